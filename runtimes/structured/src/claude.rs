//! Claude Code's stream-json (`claude -p --input-format stream-json --output-format stream-json
//! --verbose`): what each line the controller wrote and the agent printed means. Unknown types and
//! fields are ignored; nothing here panics on a line it does not know.

use serde_json::Value;

use crate::fold::Approval;
use crate::{short, str_at, Ended, Event, Tokens};

/// The text of a user message's `content`: a string, or the text blocks of a list.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| str_at(b, "type") == Some("text"))
            .filter_map(|b| str_at(b, "text"))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// What a line the controller wrote means.
pub(crate) fn inbound(v: &Value) -> Vec<Event> {
    match str_at(v, "type") {
        Some("user") => {
            let text = v.get("message").and_then(|m| m.get("content")).map(content_text).unwrap_or_default();
            vec![Event::Sent { id: str_at(v, "uuid").map(str::to_string), text, request: None }]
        }
        Some("control_response") => {
            let Some(r) = v.get("response") else { return vec![] };
            let Some(request) = str_at(r, "request_id") else { return vec![] };
            let behavior = r.get("response").and_then(|b| str_at(b, "behavior"));
            match behavior {
                Some(b) => vec![Event::ApprovalAnswered { request: request.to_string(), allowed: b == "allow" }],
                None => vec![Event::AnsweredAgent { id: request.to_string() }],
            }
        }
        _ => vec![],
    }
}

/// What a line the agent printed means.
pub(crate) fn outbound(v: &Value, t: i64) -> Vec<Event> {
    let mut out = vec![];
    if let Some(s) = str_at(v, "session_id") {
        out.push(Event::Conversation(s.to_string()));
    }
    match str_at(v, "type") {
        Some("command_lifecycle") => {
            let Some(id) = str_at(v, "command_uuid") else { return out };
            let id = id.to_string();
            match str_at(v, "state") {
                Some("started") => {
                    out.push(Event::Accepted { id: id.clone() });
                    out.push(Event::TurnStarted { turn: None, message: Some(id) });
                }
                // A uuid the session already has completes at once, without a turn.
                Some("completed") => out.push(Event::Accepted { id }),
                _ => {}
            }
        }
        Some("system") if str_at(v, "subtype") == Some("init") => out.push(Event::Ready),
        Some("assistant") => {
            // The messages this answer is for: what says a turn runs should a CLI stop reporting
            // `command_lifecycle` (with it, these join the turn it started).
            for id in uuids(v) {
                out.push(Event::Accepted { id: id.clone() });
                out.push(Event::TurnStarted { turn: None, message: Some(id) });
            }
            let text = v.get("message").and_then(|m| m.get("content")).map(content_text).unwrap_or_default();
            match str_at(v, "error") {
                Some("rate_limit") => out.push(Event::RateLimited { text: text.clone() }),
                Some("authentication_failed") => out.push(Event::AuthFailed { text: text.clone() }),
                Some(other) => out.push(Event::Error { text: format!("{other}: {}", short(&text, 120)) }),
                None if !text.is_empty() => out.push(Event::Said { text: text.clone(), chunk: false }),
                None => {}
            }
            let blocks = v.get("message").and_then(|m| m.get("content")).and_then(Value::as_array);
            for b in blocks.into_iter().flatten().filter(|b| str_at(b, "type") == Some("tool_use")) {
                let name = str_at(b, "name").unwrap_or("tool").to_string();
                let summary = b.get("input").map(input_summary).unwrap_or_default();
                out.push(Event::Tool { name, summary });
            }
        }
        // The results of tool calls come back as a user line of `tool_result` blocks.
        Some("user") => {
            let blocks = v.get("message").and_then(|m| m.get("content")).and_then(Value::as_array);
            for b in blocks.into_iter().flatten().filter(|b| str_at(b, "type") == Some("tool_result")) {
                out.push(Event::ToolResult {
                    text: b.get("content").map(content_text).unwrap_or_default(),
                    is_error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                });
            }
        }
        Some("control_request") => {
            let id = str_at(v, "request_id").map(str::to_string);
            let req = v.get("request");
            match (id, req.and_then(|r| str_at(r, "subtype"))) {
                (Some(id), Some("can_use_tool")) => {
                    out.push(Event::ApprovalAsked(approval(&id, req.unwrap_or(&Value::Null), t)))
                }
                (Some(_), _) => out.push(Event::ExtRequest(v.clone())),
                _ => {}
            }
        }
        Some("result") => out.push(Event::TurnEnded(ended(v))),
        _ => {}
    }
    out
}

/// A short description of a tool's input: its command, else its path, else its description.
fn input_summary(input: &Value) -> String {
    ["command", "file_path", "path", "pattern", "url", "description"]
        .iter()
        .find_map(|k| str_at(input, k))
        .map(|s| short(s, 80))
        .unwrap_or_default()
}

/// The approval a `can_use_tool` request asks for.
fn approval(id: &str, req: &Value, t: i64) -> Approval {
    let input = req.get("input").cloned().unwrap_or(Value::Null);
    Approval {
        request: id.to_string(),
        tool: str_at(req, "tool_name").unwrap_or("tool").to_string(),
        command: str_at(&input, "command").map(str::to_string),
        path: str_at(&input, "file_path").or_else(|| str_at(req, "blocked_path")).map(str::to_string),
        title: str_at(req, "description").map(str::to_string),
        asked_at: t,
        input,
        options: vec![],
    }
}

/// How a `result` line ends its turn.
fn ended(v: &Value) -> Ended {
    let usage = v.get("usage");
    let n = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64).unwrap_or(0);
    let tokens = usage.map(|_| Tokens {
        input: n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens"),
        cached: n("cache_read_input_tokens"),
        output: n("output_tokens"),
    });
    let cost = v
        .get("model_usage_since_last_result")
        .and_then(Value::as_object)
        .map(|models| models.values().filter_map(|m| m.get("costUSD").and_then(Value::as_f64)).sum::<f64>());
    let messages = uuids(v);
    Ended {
        result: str_at(v, "subtype").unwrap_or("unknown").to_string(),
        is_error: v.get("is_error").and_then(Value::as_bool).unwrap_or(false),
        turn: None,
        duration_ms: v.get("duration_ms").and_then(Value::as_u64),
        tokens,
        cost,
        cost_total: v.get("total_cost_usd").and_then(Value::as_f64),
        messages,
        api_status: v.get("api_error_status").and_then(Value::as_u64).and_then(|s| u16::try_from(s).ok()),
    }
}

/// A line's `user_message_uuids`: the ids of the messages it answers.
fn uuids(v: &Value) -> Vec<String> {
    let ids = v.get("user_message_uuids").and_then(Value::as_array);
    ids.into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}
