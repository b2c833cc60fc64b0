//! `aoctl mcp`: a Model Context Protocol server on stdin and stdout (JSON-RPC 2.0, one message a
//! line, protocol versions 2024-11-05 to 2025-11-25) that a session's agent runs. It offers the agent API's calls
//! as tools, with the session's own token from `AOCTL_SESSION_TOKEN`, against `AOCTL_SERVER`
//! (docs/mcp.md). Arguments are checked here first: a malformed call is answered with the
//! JSON-RPC error `-32602` (invalid params) and nothing reaches the server.

use std::process::ExitCode;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Map, Value};
use std::io::{BufRead, Write};

/// The protocol versions spoken, newest first.
const VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const PARSE_ERROR: i64 = -32700;
/// The agent API refused the session's token, or what it asked of another session or project.
const NOT_ALLOWED: i64 = -32001;
/// How long one call to the agent API may take (typing into an agent is verified, so it may be slow).
const CALL_TIMEOUT: Duration = Duration::from_secs(90);

/// A tool: its name, description, the arguments it takes (name, required, description) and the
/// agent API call it makes.
struct Tool {
    name: &'static str,
    description: &'static str,
    args: &'static [(&'static str, bool, &'static str)],
    method: &'static str,
    path: &'static str,
}

const TOOLS: &[Tool] = &[
    Tool {
        name: "status",
        description: "This session's state as the aoctl controller sees it: phase, activity, branch, pull request \
                      (its checks and review) and what was reported.",
        args: &[],
        method: "GET",
        path: "status",
    },
    Tool {
        name: "report",
        description: "Report progress and/or a summary of the work; shown in the session's status and recorded \
                      as an event.",
        args: &[
            ("progress", false, "What is being done now, in a sentence."),
            ("summary", false, "A summary of the work so far."),
        ],
        method: "POST",
        path: "report",
    },
    Tool {
        name: "ask_human",
        description: "Ask a person a question. The session shows that it needs input and the project's \
                      notifiers are told; this returns at once. The person's answer is typed into this \
                      conversation as a new message when they give it (aoctl answer). Ask one question at a time.",
        args: &[("question", true, "The question, with what the person needs to answer it.")],
        method: "POST",
        path: "ask",
    },
    Tool {
        name: "send",
        description: "Send a message to another session of the same project; it is typed into that session's \
                      agent, marked as coming from this session.",
        args: &[("session", true, "The other session's name."), ("text", true, "The message.")],
        method: "POST",
        path: "send",
    },
    Tool {
        name: "handoff",
        description: "Create a follow-up session in the same project with a prompt; it is named after this \
                      session, labelled with it, and waits for a slot or budget like any session.",
        args: &[("prompt", true, "The follow-up session's first prompt.")],
        method: "POST",
        path: "handoff",
    },
    Tool {
        name: "request_review",
        description: "Ask for a review of this session's work. The request is recorded (as an event and in the \
                      session's status); when the session or its project has reviewers, a review round starts and \
                      their verdicts and comments come back to you. The answer says which.",
        args: &[("note", false, "What to look at.")],
        method: "POST",
        path: "review",
    },
];

fn schema(tool: &Tool) -> Value {
    let properties: Map<String, Value> = tool
        .args
        .iter()
        .map(|(name, _, description)| (name.to_string(), json!({ "type": "string", "description": description })))
        .collect();
    let required: Vec<&str> = tool.args.iter().filter(|(_, r, _)| *r).map(|(n, _, _)| *n).collect();
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

/// The arguments of a call, checked against the tool's: strings, the required ones not blank,
/// no others; otherwise an invalid-params error.
fn check_args(tool: &Tool, args: Option<&Value>) -> Result<Map<String, Value>, RpcError> {
    let args = match args {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(err(INVALID_PARAMS, "arguments must be an object")),
    };
    for (k, v) in &args {
        if !tool.args.iter().any(|(n, _, _)| n == k) {
            return Err(err(INVALID_PARAMS, format!("{}: unknown argument `{k}`", tool.name)));
        }
        if !v.is_string() {
            return Err(err(INVALID_PARAMS, format!("{}: argument `{k}` must be a string", tool.name)));
        }
    }
    for (name, required, _) in tool.args {
        let blank = args.get(*name).and_then(Value::as_str).is_none_or(|s| s.trim().is_empty());
        if *required && blank {
            return Err(err(INVALID_PARAMS, format!("{}: argument `{name}` is required", tool.name)));
        }
    }
    if tool.name == "report" && args.values().all(|v| v.as_str().is_none_or(|s| s.trim().is_empty())) {
        return Err(err(INVALID_PARAMS, "report: give progress, summary or both"));
    }
    Ok(args)
}

/// A JSON-RPC error.
struct RpcError {
    code: i64,
    message: String,
}

fn err(code: i64, message: impl Into<String>) -> RpcError {
    RpcError { code, message: message.into() }
}

struct Server {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Server {
    /// Calls the agent API; a tool result, or a JSON-RPC error when it refused the call.
    async fn call(&self, tool: &Tool, args: Map<String, Value>) -> Result<Value, RpcError> {
        let url = format!("{}/agent/v1/{}", self.base.trim_end_matches('/'), tool.path);
        let method = Method::from_bytes(tool.method.as_bytes()).expect("the tools' methods are valid");
        let mut req = self.http.request(method.clone(), &url).bearer_auth(&self.token).timeout(CALL_TIMEOUT);
        if method == Method::POST {
            req = req.json(&Value::Object(args));
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return Ok(tool_error(format!("cannot reach the aoctl server at {}: {e}", self.base))),
        };
        let code = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        let message = body.get("message").and_then(Value::as_str).unwrap_or_default().to_string();
        match code {
            c if c.is_success() => {
                let text = if tool.name == "status" {
                    serde_json::to_string_pretty(&body).unwrap_or_default()
                } else {
                    message
                };
                Ok(
                    json!({ "content": [{ "type": "text", "text": text }], "structuredContent": body, "isError": false }),
                )
            }
            StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => Err(err(INVALID_PARAMS, message)),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(err(NOT_ALLOWED, format!("{code}: {message}"))),
            _ => Ok(tool_error(format!("{code}: {message}"))),
        }
    }
}

/// A tool result that reports a failure the agent may act on (the server down, a session not running).
fn tool_error(text: String) -> Value {
    json!({ "content": [{ "type": "text", "text": text }], "isError": true })
}

async fn answer(server: &Server, method: &str, params: Option<&Value>) -> Result<Value, RpcError> {
    match method {
        "initialize" => {
            let asked = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str).unwrap_or("");
            let version = VERSIONS.iter().find(|v| **v == asked).unwrap_or(&VERSIONS[0]);
            Ok(json!({
                "protocolVersion": version,
                "capabilities": { "tools": { "listChanged": false } },
                "serverInfo": { "name": "aoctl", "version": env!("CARGO_PKG_VERSION") },
                "instructions": "Tools of the aoctl controller that runs this session: report progress, ask a \
                                 person a question, hand work to a new session, message another session.",
            }))
        }
        "ping" => Ok(json!({})),
        "tools/list" => {
            let tools: Vec<Value> = TOOLS
                .iter()
                .map(|t| json!({ "name": t.name, "description": t.description, "inputSchema": schema(t) }))
                .collect();
            Ok(json!({ "tools": tools }))
        }
        "tools/call" => {
            let name = params.and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or("");
            let Some(tool) = TOOLS.iter().find(|t| t.name == name) else {
                return Err(err(INVALID_PARAMS, format!("unknown tool `{name}`")));
            };
            let args = check_args(tool, params.and_then(|p| p.get("arguments")))?;
            server.call(tool, args).await
        }
        other => Err(err(METHOD_NOT_FOUND, format!("method `{other}` is not offered"))),
    }
}

/// The answer to one line, if it is a request (notifications and responses get none).
async fn handle(server: &Server, line: &str) -> Option<Value> {
    let msg: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return Some(error_reply(Value::Null, err(PARSE_ERROR, format!("not JSON: {e}")))),
    };
    let id = msg.get("id").cloned();
    let method = msg.get("method").and_then(Value::as_str);
    let (Some(id), Some(method)) = (id, method) else {
        // A notification (no id), or a response to nothing we asked.
        if msg.get("jsonrpc") != Some(&json!("2.0")) || (msg.get("method").is_none() && msg.get("id").is_none()) {
            return Some(error_reply(Value::Null, err(INVALID_REQUEST, "not a JSON-RPC 2.0 message")));
        }
        return None;
    };
    if msg.get("jsonrpc") != Some(&json!("2.0")) {
        return Some(error_reply(id, err(INVALID_REQUEST, "not a JSON-RPC 2.0 request")));
    }
    Some(match answer(server, method, msg.get("params")).await {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(e) => error_reply(id, e),
    })
}

fn error_reply(id: Value, e: RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": e.code, "message": e.message } })
}

pub(crate) async fn run() -> anyhow::Result<ExitCode> {
    let base = std::env::var("AOCTL_SERVER").map_err(|_| {
        anyhow::anyhow!("AOCTL_SERVER is not set: aoctl mcp runs inside a session's agent, which gets it at launch")
    })?;
    let token = std::env::var("AOCTL_SESSION_TOKEN").map_err(|_| {
        anyhow::anyhow!(
            "AOCTL_SESSION_TOKEN is not set: aoctl mcp runs inside a session's agent, which gets it at launch"
        )
    })?;
    let server = Server { http: reqwest::Client::new(), base, token };
    // Standard input is read on a thread of its own, a line at a time; requests are answered in order.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<String>>(16);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            if tx.blocking_send(line).is_err() {
                return;
            }
        }
    });
    while let Some(line) = rx.recv().await {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(reply) = handle(&server, &line).await {
            let mut out = std::io::stdout().lock();
            serde_json::to_writer(&mut out, &reply)?;
            out.write_all(b"\n")?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> Server {
        // Nothing listens there: a call that got past the checks would answer "cannot reach".
        Server { http: reqwest::Client::new(), base: "http://127.0.0.1:9".into(), token: "t".into() }
    }

    #[tokio::test]
    async fn initialize_lists_tools_and_refuses_bad_calls() {
        let s = server();
        let init =
            handle(&s, r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#)
                .await
                .unwrap();
        assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
        let init =
            handle(&s, r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}"#)
                .await
                .unwrap();
        assert_eq!(init["result"]["protocolVersion"], VERSIONS[0]);
        assert!(handle(&s, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await.is_none());
        let list = handle(&s, r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).await.unwrap();
        let names: Vec<&str> =
            list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["status", "report", "ask_human", "send", "handoff", "request_review"]);
        for bad in [
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ask_human","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ask_human","arguments":{"question":7}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"send","arguments":{"session":"x","text":" "}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"status","arguments":{"session":"other"}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"report","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"report","arguments":[1]}}"#,
        ] {
            let r = handle(&s, bad).await.unwrap();
            assert_eq!(r["error"]["code"], INVALID_PARAMS, "{bad}: {r}");
        }
        assert_eq!(
            handle(&s, r#"{"jsonrpc":"2.0","id":4,"method":"x"}"#).await.unwrap()["error"]["code"],
            METHOD_NOT_FOUND
        );
        assert_eq!(handle(&s, "{").await.unwrap()["error"]["code"], PARSE_ERROR);
        let unreachable =
            handle(&s, r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"status"}}"#).await.unwrap();
        assert_eq!(unreachable["result"]["isError"], true, "{unreachable}");
    }
}
