//! The Agent Client Protocol (JSON-RPC 2.0 over stdio, protocol version 1): what each request,
//! response and `session/update` means. A prompt's id is its message id; the turn runs from our
//! `session/prompt` to its response. Requests of the agent's other than `session/request_permission`
//! (vendor extensions such as `craft/drainMidTurnQueue`, `fs/*`, `terminal/*`, which we do not
//! advertise) are kept to answer with -32601.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::fold::Approval;
use crate::{rpc_id, short, str_at, texts, Ended, Event, Tokens};

/// What a line the controller wrote means.
pub(crate) fn inbound(v: &Value) -> Vec<Event> {
    let id = v.get("id").and_then(rpc_id);
    match (str_at(v, "method"), id) {
        (Some(method), Some(id)) => {
            let mut out = vec![Event::Requested { id: id.clone(), method: method.to_string() }];
            if method == "session/prompt" {
                let text = texts(v.get("params").and_then(|p| p.get("prompt")));
                out.push(Event::Sent { id: Some(id.clone()), text, request: Some(id.clone()) });
                out.push(Event::TurnStarted { turn: Some(id.clone()), message: Some(id) });
            }
            out
        }
        (Some(_), None) => vec![],
        (None, Some(id)) => match v.get("result").and_then(|r| r.get("outcome")) {
            Some(outcome) => {
                let option = str_at(outcome, "optionId").unwrap_or_default();
                let allowed = str_at(outcome, "outcome") == Some("selected")
                    && !option.contains("reject")
                    && !option.contains("deny")
                    && option != "cancel";
                vec![Event::ApprovalAnswered { request: id, allowed }]
            }
            None => vec![Event::AnsweredAgent { id }],
        },
        (None, None) => vec![],
    }
}

/// What a line the agent printed means.
pub(crate) fn outbound(v: &Value, t: i64, outstanding: &BTreeMap<String, String>) -> Vec<Event> {
    let id = v.get("id").and_then(rpc_id);
    let params = v.get("params").unwrap_or(&Value::Null);
    match (str_at(v, "method"), id) {
        (None, Some(id)) => response(v, id, outstanding),
        (Some("session/request_permission"), Some(id)) => vec![Event::ApprovalAsked(approval(&id, params, t))],
        (Some(_), Some(_)) => vec![Event::ExtRequest(v.clone())],
        (Some("session/update"), None) => update(params),
        _ => vec![],
    }
}

/// Whether an error's text says the agent has no credentials.
fn is_auth(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    ["authenticat", "api key", "login", "log in", "credential"].iter().any(|w| t.contains(w))
}

/// Whether an error's text is a rate limit's.
fn is_rate_limit(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("429") || t.contains("rate limit") || t.contains("quota")
}

/// A response to one of our requests.
fn response(v: &Value, id: String, outstanding: &BTreeMap<String, String>) -> Vec<Event> {
    let error = v.get("error").map(|e| {
        let msg = str_at(e, "message").unwrap_or("error");
        match e.get("data").and_then(|d| d.get("details").or(Some(d))).and_then(Value::as_str) {
            Some(details) => format!("{msg}: {details}"),
            None => msg.to_string(),
        }
    });
    let result = v.get("result").unwrap_or(&Value::Null);
    let mut out = vec![Event::Responded { id: id.clone(), error: error.clone() }];
    match outstanding.get(&id).map(String::as_str) {
        Some("session/new" | "session/load") => match &error {
            Some(e) if is_auth(e) => out.push(Event::AuthFailed { text: e.clone() }),
            Some(e) => out.push(Event::Error { text: e.clone() }),
            None => {
                if let Some(s) = str_at(result, "sessionId") {
                    out.push(Event::Conversation(s.to_string()));
                }
                out.push(Event::Ready);
            }
        },
        Some("session/prompt") => {
            if let Some(e) = &error {
                if is_rate_limit(e) {
                    out.push(Event::RateLimited { text: e.clone() });
                } else if is_auth(e) {
                    out.push(Event::AuthFailed { text: e.clone() });
                }
            }
            let reason = str_at(result, "stopReason").map(str::to_string);
            out.push(Event::TurnEnded(Ended {
                is_error: error.is_some() || reason.as_deref() == Some("refusal"),
                result: reason.unwrap_or_else(|| "error".to_string()),
                turn: Some(id.clone()),
                duration_ms: None,
                tokens: None,
                cost: None,
                cost_total: None,
                messages: if error.is_some() { vec![] } else { vec![id] },
                api_status: None,
            }));
        }
        _ => {}
    }
    out
}

/// A `session/update` notification.
fn update(p: &Value) -> Vec<Event> {
    let mut out = vec![];
    if let Some(s) = str_at(p, "sessionId") {
        out.push(Event::Conversation(s.to_string()));
    }
    let u = p.get("update").unwrap_or(&Value::Null);
    let kind = str_at(u, "sessionUpdate").unwrap_or_default();
    // The agent works on what it was sent (any update but the replay of the user's own text).
    if kind != "user_message_chunk" {
        out.push(Event::Progress);
    }
    match kind {
        "user_message_chunk" => {
            if let Some(text) = u.get("content").and_then(|c| str_at(c, "text")) {
                out.push(Event::Replayed { text: text.to_string() });
            }
        }
        "tool_call" => {
            let name = u.get("_meta").and_then(|m| str_at(m, "toolName")).or_else(|| str_at(u, "kind"));
            let command = u.get("rawInput").and_then(|r| str_at(r, "command")).or_else(|| str_at(u, "title"));
            out.push(Event::Tool {
                name: name.unwrap_or("tool").to_string(),
                summary: short(command.unwrap_or_default(), 80),
            });
        }
        "tool_call_update" if matches!(str_at(u, "status"), Some("completed" | "failed")) => {
            let content = u.get("content").and_then(Value::as_array);
            let text = content
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("content").and_then(|c| str_at(c, "text")))
                .collect::<Vec<_>>()
                .join("\n");
            out.push(Event::ToolResult { text, is_error: str_at(u, "status") == Some("failed") });
        }
        "agent_message_chunk" => {
            if let Some(text) = u.get("content").and_then(|c| str_at(c, "text")).filter(|t| !t.is_empty()) {
                out.push(Event::Said { text: text.to_string(), chunk: true });
            }
            if let Some(usage) = u.get("_meta").and_then(|m| m.get("usage")) {
                let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
                out.push(Event::TurnTokens(Tokens {
                    input: n("inputTokens"),
                    cached: n("cachedReadTokens"),
                    output: n("outputTokens"),
                }));
            }
        }
        _ => {}
    }
    out
}

/// The approval a `session/request_permission` request asks for.
fn approval(id: &str, p: &Value, t: i64) -> Approval {
    let call = p.get("toolCall").unwrap_or(&Value::Null);
    let raw = call.get("rawInput").unwrap_or(&Value::Null);
    let tool = call.get("_meta").and_then(|m| str_at(m, "toolName")).or_else(|| str_at(call, "kind"));
    let path = call
        .get("locations")
        .and_then(Value::as_array)
        .and_then(|l| l.first())
        .and_then(|l| str_at(l, "path"))
        .or_else(|| str_at(raw, "file_path"))
        .or_else(|| str_at(raw, "path"));
    let options = p.get("options").and_then(Value::as_array);
    Approval {
        request: id.to_string(),
        tool: tool.unwrap_or("tool").to_string(),
        command: str_at(raw, "command").map(str::to_string),
        path: path.map(str::to_string),
        title: str_at(call, "title").map(str::to_string),
        asked_at: t,
        input: p.clone(),
        options: options
            .into_iter()
            .flatten()
            .filter_map(|o| Some(format!("{}:{}", str_at(o, "kind")?, str_at(o, "optionId")?)))
            .collect(),
    }
}
