//! What a tool call becomes on the agent API: its method, URL (the `{session}` of its path filled
//! in, a GET's arguments in its query) and body, and what the API's answer becomes for the agent
//! (a result, a tool error it can act on, or a JSON-RPC error).

use reqwest::{Method, StatusCode};
use serde_json::{json, Map, Value};

use super::tools::{Shows, Tool};
use super::{err, tool_error, RpcError, INVALID_PARAMS, NOT_ALLOWED};

/// One call of the agent API.
#[derive(Debug, PartialEq)]
pub(super) struct ApiCall {
    pub(super) method: Method,
    pub(super) url: String,
    /// The JSON body, for a POST: always an object.
    pub(super) body: Option<Value>,
}

/// The agent API call a tool call makes against the server at `base`, from its checked arguments:
/// `{session}` in the path filled from the `session` argument (percent-encoded as a path segment),
/// the other arguments as a POST's JSON body or a GET's or DELETE's query string.
pub(super) fn api_call(base: &str, tool: &Tool, mut args: Map<String, Value>) -> ApiCall {
    let mut path = tool.path.to_string();
    if path.contains("{session}") {
        let session = args.remove("session");
        path = path.replace("{session}", &percent_encode(session.as_ref().and_then(Value::as_str).unwrap_or("")));
    }
    let method = Method::from_bytes(tool.method.as_bytes()).expect("the tools' methods are valid");
    let mut url = format!("{}/agent/v1/{path}", base.trim_end_matches('/'));
    if method == Method::POST {
        return ApiCall { method, url, body: Some(Value::Object(args)) };
    }
    // In the tool's order of arguments, so the same call makes the same URL.
    let query: Vec<String> = tool
        .args
        .iter()
        .filter_map(|a| {
            let value = match args.get(a.name)? {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => other.to_string(),
            };
            Some(format!("{}={}", percent_encode(a.name), percent_encode(&value)))
        })
        .collect();
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query.join("&"));
    }
    ApiCall { method, url, body: None }
}

/// `s` with every byte but the unreserved ones (letters, digits, `-._~`) percent-encoded: fit for a
/// path segment or a query string's name or value.
pub(super) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What the agent is told of the agent API's answer (its status and JSON body) to a tool's call: a
/// tool result, with `isError` when the server could not carry the call out now, or a JSON-RPC error
/// when it refused the arguments (400, 422) or the token (401, 403).
pub(super) fn outcome(tool: &Tool, status: StatusCode, body: Value) -> Result<Value, RpcError> {
    let message = body.get("message").and_then(Value::as_str).unwrap_or_default().to_string();
    match status {
        c if c.is_success() => {
            let pretty = |body: &Value| serde_json::to_string_pretty(body).unwrap_or_default();
            let text = match tool.shows {
                Shows::Message => message,
                Shows::Json => pretty(&body),
                Shows::Field(field) => {
                    body.get(field).and_then(Value::as_str).map_or_else(|| pretty(&body), str::to_string)
                }
            };
            Ok(json!({ "content": [{ "type": "text", "text": text }], "structuredContent": body, "isError": false }))
        }
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => Err(err(INVALID_PARAMS, message)),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(err(NOT_ALLOWED, format!("{status}: {message}"))),
        _ => Ok(tool_error(format!("{status}: {message}"))),
    }
}
