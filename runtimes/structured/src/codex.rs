//! Codex's app-server (JSON-RPC over stdio, lines without a `"jsonrpc"` field): what each request,
//! response and notification means. Unknown methods are ignored; a request of the server's that is
//! not an approval is kept as an extension request to answer with -32601.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::fold::Approval;
use crate::{rpc_id, short, str_at, texts, Ended, Event, Tokens};

/// A turn of a thread as `thread/resume` (or `thread/turns/list`) answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastTurn {
    pub id: String,
    /// `completed`, `interrupted`, `failed`, `inProgress`.
    pub status: String,
    /// The `clientId`s of its user messages: our `clientUserMessageId`s.
    pub client_ids: Vec<String>,
}

/// The turns of a thread object (`result.thread` of `thread/resume`).
pub fn past_turns(thread: &Value) -> Vec<PastTurn> {
    let turns = thread.get("turns").and_then(Value::as_array);
    turns
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let items = t.get("items").and_then(Value::as_array);
            Some(PastTurn {
                id: str_at(t, "id")?.to_string(),
                status: str_at(t, "status").unwrap_or("unknown").to_string(),
                client_ids: items
                    .into_iter()
                    .flatten()
                    .filter(|i| str_at(i, "type") == Some("userMessage"))
                    .filter_map(|i| str_at(i, "clientId"))
                    .map(str::to_string)
                    .collect(),
            })
        })
        .collect()
}

/// What a line the controller wrote means.
pub(crate) fn inbound(v: &Value) -> Vec<Event> {
    let id = v.get("id").and_then(rpc_id);
    match (str_at(v, "method"), id) {
        (Some(method), Some(id)) => {
            let mut out = vec![Event::Requested { id: id.clone(), method: method.to_string() }];
            if matches!(method, "turn/start" | "turn/steer") {
                let p = v.get("params").unwrap_or(&Value::Null);
                let text = texts(p.get("input"));
                out.push(Event::Sent {
                    id: str_at(p, "clientUserMessageId").map(str::to_string),
                    text,
                    request: Some(id),
                });
            }
            out
        }
        // A notification of ours (`initialized`): nothing to wait for.
        (Some(_), None) => vec![],
        // Our answer to a request of the server's.
        (None, Some(id)) => match v.get("result").and_then(|r| str_at(r, "decision")) {
            Some(d) => vec![Event::ApprovalAnswered { request: id, allowed: d.starts_with("accept") }],
            None if v.get("result").and_then(|r| r.get("decision")).is_some() => {
                // `{"acceptWithExecpolicyAmendment": …}` and the like: an acceptance.
                vec![Event::ApprovalAnswered { request: id, allowed: true }]
            }
            None => vec![Event::AnsweredAgent { id }],
        },
        (None, None) => vec![],
    }
}

/// What a line the server printed means.
pub(crate) fn outbound(v: &Value, t: i64, outstanding: &BTreeMap<String, String>) -> Vec<Event> {
    let id = v.get("id").and_then(rpc_id);
    let params = v.get("params").unwrap_or(&Value::Null);
    match (str_at(v, "method"), id) {
        (None, Some(id)) => response(v, id, outstanding),
        (Some(method), Some(id)) => {
            if method.ends_with("/requestApproval") {
                vec![Event::ApprovalAsked(approval(&id, method, params, t))]
            } else {
                vec![Event::ExtRequest(v.clone())]
            }
        }
        (Some(method), None) => notification(method, params),
        (None, None) => vec![],
    }
}

/// A response to one of our requests.
fn response(v: &Value, id: String, outstanding: &BTreeMap<String, String>) -> Vec<Event> {
    let error = v.get("error").map(|e| str_at(e, "message").unwrap_or("error").to_string());
    let mut out = vec![];
    let result = v.get("result").unwrap_or(&Value::Null);
    let names_a_thread = matches!(outstanding.get(&id).map(String::as_str), Some("thread/start" | "thread/resume"));
    if let Some(thread) = result.get("thread").filter(|_| names_a_thread) {
        if let Some(tid) = str_at(thread, "id") {
            out.push(Event::Conversation(tid.to_string()));
            out.push(Event::Ready);
        }
        for turn in past_turns(thread) {
            out.extend(turn.client_ids.into_iter().map(|id| Event::Accepted { id }));
        }
    }
    if let Some(e) = &error {
        if is_rate_limit(e) {
            out.push(Event::RateLimited { text: e.clone() });
        }
    }
    out.insert(0, Event::Responded { id, error });
    out
}

/// Whether an error's text is a rate limit's.
fn is_rate_limit(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("429") || t.contains("rate limit") || t.contains("usage limit")
}

/// A notification of the server's.
fn notification(method: &str, p: &Value) -> Vec<Event> {
    let item = p.get("item").unwrap_or(&Value::Null);
    match method {
        "thread/started" => p
            .get("thread")
            .and_then(|t| str_at(t, "id"))
            .map(|id| vec![Event::Conversation(id.to_string())])
            .unwrap_or_default(),
        "turn/started" => {
            let turn = p.get("turn").and_then(|t| str_at(t, "id")).map(str::to_string);
            vec![Event::TurnStarted { turn, message: None }]
        }
        "item/started" => match str_at(item, "type") {
            Some("userMessage") => {
                str_at(item, "clientId").map(|id| vec![Event::Accepted { id: id.to_string() }]).unwrap_or_default()
            }
            Some("commandExecution") => vec![Event::Tool {
                name: "command".into(),
                summary: short(str_at(item, "command").unwrap_or_default(), 80),
            }],
            Some("fileChange") => vec![Event::Tool { name: "edit".into(), summary: String::new() }],
            Some("mcpToolCall") => vec![Event::Tool {
                name: str_at(item, "tool").unwrap_or("mcp").to_string(),
                summary: str_at(item, "server").unwrap_or_default().to_string(),
            }],
            _ => vec![],
        },
        "item/completed" => match str_at(item, "type") {
            Some("agentMessage") => match str_at(item, "text").filter(|t| !t.is_empty()) {
                Some(text) => vec![Event::Said { text: text.to_string(), chunk: false }],
                None => vec![],
            },
            Some("commandExecution" | "fileChange" | "mcpToolCall") => {
                let status = str_at(item, "status").unwrap_or("completed");
                let exit = item.get("exitCode").and_then(Value::as_i64);
                let output = str_at(item, "aggregatedOutput").filter(|o| !o.is_empty());
                let text = match (output, exit) {
                    (Some(o), _) => o.to_string(),
                    (None, Some(code)) => format!("{status} (exit code {code})"),
                    (None, None) => status.to_string(),
                };
                vec![Event::ToolResult { text, is_error: status != "completed" || exit.is_some_and(|c| c != 0) }]
            }
            _ => vec![],
        },
        "thread/tokenUsage/updated" => {
            let last = p.get("tokenUsage").and_then(|u| u.get("last"));
            let n = |k: &str| last.and_then(|l| l.get(k)).and_then(Value::as_u64).unwrap_or(0);
            match last {
                Some(_) => vec![Event::TurnTokens(Tokens {
                    input: n("inputTokens"),
                    cached: n("cachedInputTokens"),
                    output: n("outputTokens"),
                })],
                None => vec![],
            }
        }
        "turn/completed" => {
            let turn = p.get("turn").unwrap_or(&Value::Null);
            let status = str_at(turn, "status").unwrap_or("unknown").to_string();
            let error = turn.get("error").filter(|e| !e.is_null());
            let mut out = vec![];
            if let Some(text) = error.and_then(|e| str_at(e, "message")).filter(|m| is_rate_limit(m)) {
                out.push(Event::RateLimited { text: text.to_string() });
            }
            out.push(Event::TurnEnded(Ended {
                is_error: error.is_some() || status == "failed",
                result: status,
                turn: str_at(turn, "id").map(str::to_string),
                duration_ms: turn.get("durationMs").and_then(Value::as_u64),
                tokens: None,
                cost: None,
                cost_total: None,
                messages: vec![],
                api_status: None,
            }));
            out
        }
        "serverRequest/resolved" => p
            .get("requestId")
            .and_then(rpc_id)
            .map(|request| vec![Event::ApprovalResolved { request }])
            .unwrap_or_default(),
        "error" => {
            let text = p.get("error").and_then(|e| str_at(e, "message")).or_else(|| str_at(p, "message"));
            let text = text.unwrap_or("error").to_string();
            if is_rate_limit(&text) {
                vec![Event::RateLimited { text }]
            } else {
                vec![Event::Error { text }]
            }
        }
        _ => vec![],
    }
}

/// The approval an `item/*/requestApproval` request asks for.
fn approval(id: &str, method: &str, p: &Value, t: i64) -> Approval {
    let tool = match method {
        "item/commandExecution/requestApproval" => "command",
        "item/fileChange/requestApproval" => "edit",
        "item/permissions/requestApproval" => "permissions",
        _ => "tool",
    };
    let options = p.get("availableDecisions").and_then(Value::as_array);
    Approval {
        request: id.to_string(),
        tool: tool.to_string(),
        command: str_at(p, "command").map(str::to_string),
        path: str_at(p, "grantRoot").or_else(|| str_at(p, "cwd")).map(str::to_string),
        title: str_at(p, "reason").map(str::to_string),
        asked_at: t,
        input: p.clone(),
        options: options
            .into_iter()
            .flatten()
            .map(|d| match d {
                Value::String(s) => s.clone(),
                Value::Object(o) => o.keys().next().cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .collect(),
    }
}
