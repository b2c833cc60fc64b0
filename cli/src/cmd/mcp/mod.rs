//! `aoctl mcp`: a Model Context Protocol server on stdin and stdout (JSON-RPC 2.0, one message a
//! line, protocol versions 2024-11-05 to 2025-11-25) that a session's agent runs. It offers the agent API's calls
//! as tools, with the session's own token from `AOCTL_SESSION_TOKEN`, against `AOCTL_SERVER`
//! (docs/mcp.md): a worker session's tools, or the project orchestrator's when the token is an
//! orchestrator's. Arguments are checked here first: a malformed call is answered with the
//! JSON-RPC error `-32602` (invalid params) and nothing reaches the server.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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
/// How long the `hello` call, made once the client is initialized, may take.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

mod call;
mod tools;

use call::{api_call, outcome};
use tools::{check_args, schema, tool_set, Tool, ToolSet};

/// A JSON-RPC error.
#[derive(Debug)]
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
    /// The tools this token is offered.
    set: &'static ToolSet,
    /// Whether `hello` was called already.
    said_hello: AtomicBool,
}

impl Server {
    fn new(base: String, token: String) -> Self {
        let set = tool_set(&token);
        Server { http: reqwest::Client::new(), base, token, set, said_hello: AtomicBool::new(false) }
    }

    /// Calls the agent API; a tool result, or a JSON-RPC error when it refused the call.
    async fn call(&self, tool: &Tool, args: Map<String, Value>) -> Result<Value, RpcError> {
        let call = api_call(&self.base, tool, args);
        let mut req = self.http.request(call.method, &call.url).bearer_auth(&self.token).timeout(CALL_TIMEOUT);
        if let Some(body) = call.body {
            req = req.json(&body);
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return Ok(tool_error(format!("cannot reach the aoctl server at {}: {e}", self.base))),
        };
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        outcome(tool, status, body)
    }

    /// Tells the controller, once, that the agent's tools are connected (`POST /agent/v1/hello`),
    /// before the next request is read: a client that connects and leaves at once has still said
    /// it. Its failure is ignored.
    async fn hello(&self) {
        if self.said_hello.swap(true, Ordering::Relaxed) {
            return;
        }
        let req = self
            .http
            .post(format!("{}/agent/v1/hello", self.base.trim_end_matches('/')))
            .bearer_auth(&self.token)
            .timeout(HELLO_TIMEOUT)
            .json(&json!({}));
        let _ = req.send().await;
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
                "instructions": server.set.instructions,
            }))
        }
        "ping" => Ok(json!({})),
        "tools/list" => {
            let tools: Vec<Value> = server
                .set
                .tools
                .iter()
                .map(|t| json!({ "name": t.name, "description": t.description, "inputSchema": schema(t) }))
                .collect();
            Ok(json!({ "tools": tools }))
        }
        "tools/call" => {
            let name = params.and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or("");
            let Some(tool) = server.set.tools.iter().find(|t| t.name == name) else {
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
        if method == Some("notifications/initialized") && msg.get("id").is_none() {
            server.hello().await;
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
    // The token picks the tools: an orchestrator's (`aoo1.`) or a worker session's.
    let server = Server::new(base, token);
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
    use reqwest::{Method, StatusCode};

    use super::call::{percent_encode, ApiCall};
    use super::tools::*;
    use super::*;

    /// A server of a worker session's token.
    fn server() -> Server {
        // Nothing listens there: a call that got past the checks would answer "cannot reach".
        Server::new("http://127.0.0.1:9".into(), "aos1.w.u.m".into())
    }

    fn orchestrator() -> Server {
        Server::new("http://127.0.0.1:9".into(), "aoo1.p.u.m".into())
    }

    fn names(set: &ToolSet) -> Vec<&'static str> {
        set.tools.iter().map(|t| t.name).collect()
    }

    fn tool(set: &'static ToolSet, name: &str) -> &'static Tool {
        set.tools.iter().find(|t| t.name == name).unwrap()
    }

    fn call(name: &str, arguments: Value) -> String {
        json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "name": name, "arguments": arguments } })
            .to_string()
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
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

    #[tokio::test]
    async fn the_token_picks_the_tools() {
        assert!(std::ptr::eq(tool_set("aos1.w.u.m"), &WORKER_TOOLS));
        assert!(std::ptr::eq(tool_set("anything"), &WORKER_TOOLS));
        assert!(std::ptr::eq(tool_set("aoo1.p.u.m"), &ORCHESTRATOR_TOOLS));
        assert_eq!(names(&WORKER_TOOLS), ["status", "report", "ask_human", "send", "handoff", "request_review"]);
        assert_eq!(
            names(&ORCHESTRATOR_TOOLS),
            [
                "status",
                "report",
                "ask_human",
                "spawn",
                "list_sessions",
                "read_transcript",
                "read_diff",
                "send",
                "stop",
                "resume",
                "delete",
                "request_review",
                "merge",
                "answer"
            ]
        );

        let o = orchestrator();
        let init = handle(&o, r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#).await.unwrap();
        assert!(init["result"]["instructions"].as_str().unwrap().contains("orchestrator"), "{init}");
        let init = handle(&server(), r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#).await.unwrap();
        assert!(!init["result"]["instructions"].as_str().unwrap().contains("orchestrator"), "{init}");
        let list = handle(&o, r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).await.unwrap();
        let listed: Vec<&str> =
            list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(listed, names(&ORCHESTRATOR_TOOLS));

        // Each set's tools only.
        let r = handle(&o, &call("handoff", json!({ "prompt": "p" }))).await.unwrap();
        assert_eq!(r["error"]["code"], INVALID_PARAMS, "{r}");
        assert!(r["error"]["message"].as_str().unwrap().contains("unknown tool"), "{r}");
        let r = handle(&server(), &call("spawn", json!({ "prompt": "p" }))).await.unwrap();
        assert_eq!(r["error"]["code"], INVALID_PARAMS, "{r}");
        // A good call of the orchestrator's gets past the checks (and finds no server).
        let r = handle(&o, &call("spawn", json!({ "prompt": "p", "labels": { "team": "a" } }))).await.unwrap();
        assert_eq!(r["result"]["isError"], true, "{r}");
    }

    #[test]
    fn the_tools_are_consistent() {
        for set in [&WORKER_TOOLS, &ORCHESTRATOR_TOOLS] {
            for t in set.tools {
                let method = Method::from_bytes(t.method.as_bytes()).unwrap();
                assert!([Method::GET, Method::POST, Method::DELETE].contains(&method), "{}", t.name);
                if t.path.contains("{session}") {
                    let session = t.args.iter().find(|a| a.name == "session");
                    assert!(session.is_some_and(|a| a.required && a.kind == Kind::Str), "{}", t.name);
                }
                if method != Method::POST {
                    assert!(t.args.iter().all(|a| a.kind != Kind::StrMap), "{}: no object in a query", t.name);
                }
            }
        }
    }

    #[test]
    fn arguments_are_checked_by_kind() {
        let spawn = tool(&ORCHESTRATOR_TOOLS, "spawn");
        let transcript = tool(&ORCHESTRATOR_TOOLS, "read_transcript");
        let refused = |t: &Tool, v: Value, what: &str| {
            let e = check_args(t, Some(&v)).unwrap_err();
            assert_eq!(e.code, INVALID_PARAMS, "{v}");
            assert!(e.message.contains(t.name) && e.message.contains(what), "{v}: {}", e.message);
        };
        refused(spawn, json!({ "prompt": "p", "labels": "team=a" }), "`labels`");
        refused(spawn, json!({ "prompt": "p", "labels": ["a"] }), "`labels`");
        refused(spawn, json!({ "prompt": "p", "labels": { "team": 1 } }), "`labels`");
        refused(spawn, json!({ "prompt": "p", "labels": { "": "a" } }), "`labels`");
        refused(spawn, json!({ "prompt": "p", "name": 3 }), "`name`");
        refused(spawn, json!({ "labels": { "team": "a" } }), "`prompt`");
        refused(spawn, json!({ "prompt": "p", "branch": "x" }), "`branch`");
        refused(transcript, json!({ "session": "w", "lines": 0 }), "`lines`");
        refused(transcript, json!({ "session": "w", "lines": 501 }), "`lines`");
        refused(transcript, json!({ "session": "w", "lines": -3 }), "`lines`");
        refused(transcript, json!({ "session": "w", "lines": "20" }), "`lines`");
        refused(transcript, json!({ "session": "w", "lines": 2.5 }), "`lines`");
        refused(transcript, json!({ "lines": 20 }), "`session`");
        refused(transcript, json!({ "session": " " }), "`session`");
        refused(transcript, json!({ "session": ".." }), "`session`");
        refused(tool(&ORCHESTRATOR_TOOLS, "delete"), json!({}), "`session`");
        refused(tool(&ORCHESTRATOR_TOOLS, "send"), json!({ "session": "w" }), "`text`");

        let ok = |t: &Tool, v: Value| check_args(t, Some(&v)).unwrap_or_else(|e| panic!("{v}: {}", e.message));
        ok(spawn, json!({ "prompt": "p" }));
        ok(spawn, json!({ "prompt": "p", "labels": {}, "agent": "codex", "issue": "12", "name": "w-1" }));
        ok(spawn, json!({ "prompt": "p", "labels": { "team": "a", "area": "" } }));
        ok(transcript, json!({ "session": "w" }));
        ok(transcript, json!({ "session": "w", "lines": 1 }));
        ok(transcript, json!({ "session": "w", "lines": 500 }));
        ok(tool(&ORCHESTRATOR_TOOLS, "list_sessions"), json!({}));
        check_args(tool(&ORCHESTRATOR_TOOLS, "list_sessions"), None).unwrap();
    }

    #[test]
    fn schemas_tell_the_kinds() {
        let spawn = schema(tool(&ORCHESTRATOR_TOOLS, "spawn"));
        assert_eq!(spawn["required"], json!(["prompt"]));
        assert_eq!(spawn["properties"]["prompt"]["type"], "string");
        assert_eq!(spawn["properties"]["labels"]["type"], "object");
        assert_eq!(spawn["properties"]["labels"]["additionalProperties"], json!({ "type": "string" }));
        let transcript = schema(tool(&ORCHESTRATOR_TOOLS, "read_transcript"));
        assert_eq!(transcript["required"], json!(["session"]));
        assert_eq!(transcript["properties"]["lines"]["type"], "integer");
        assert_eq!(transcript["properties"]["lines"]["minimum"], 1);
        assert_eq!(transcript["properties"]["lines"]["maximum"], 500);
        assert_eq!(transcript["additionalProperties"], false);
        let list = schema(tool(&ORCHESTRATOR_TOOLS, "list_sessions"));
        assert_eq!(list["properties"], json!({}));
    }

    #[test]
    fn api_calls_fill_the_path_and_the_query_or_body() {
        let base = "http://h:1/";
        let o = |name: &str, v: Value| api_call(base, tool(&ORCHESTRATOR_TOOLS, name), args(v));
        assert_eq!(
            o("read_transcript", json!({ "session": "a b/c", "lines": 20 })),
            ApiCall {
                method: Method::GET,
                url: "http://h:1/agent/v1/orchestrator/sessions/a%20b%2Fc/transcript?lines=20".into(),
                body: None
            }
        );
        assert_eq!(
            o("read_transcript", json!({ "session": "w-1" })).url,
            "http://h:1/agent/v1/orchestrator/sessions/w-1/transcript"
        );
        assert_eq!(
            o("read_diff", json!({ "session": "w" })),
            ApiCall { method: Method::GET, url: "http://h:1/agent/v1/orchestrator/sessions/w/diff".into(), body: None }
        );
        assert_eq!(
            o("list_sessions", json!({})),
            ApiCall { method: Method::GET, url: "http://h:1/agent/v1/orchestrator/sessions".into(), body: None }
        );
        assert_eq!(
            o("send", json!({ "session": "w", "text": "hi" })),
            ApiCall {
                method: Method::POST,
                url: "http://h:1/agent/v1/orchestrator/sessions/w/send".into(),
                body: Some(json!({ "text": "hi" }))
            }
        );
        assert_eq!(
            o("stop", json!({ "session": "w" })),
            ApiCall {
                method: Method::POST,
                url: "http://h:1/agent/v1/orchestrator/sessions/w/stop".into(),
                body: Some(json!({}))
            }
        );
        assert_eq!(
            o("delete", json!({ "session": "w" })),
            ApiCall { method: Method::DELETE, url: "http://h:1/agent/v1/orchestrator/sessions/w".into(), body: None }
        );
        let labels = json!({ "prompt": "p", "labels": { "team": "a" }, "name": "w" });
        assert_eq!(
            o("spawn", labels.clone()),
            ApiCall { method: Method::POST, url: "http://h:1/agent/v1/orchestrator/spawn".into(), body: Some(labels) }
        );
        // A worker's `send` names the other session in the body, as before.
        let w = api_call(base, tool(&WORKER_TOOLS, "send"), args(json!({ "session": "x", "text": "t" })));
        assert_eq!(
            w,
            ApiCall {
                method: Method::POST,
                url: "http://h:1/agent/v1/send".into(),
                body: Some(json!({ "session": "x", "text": "t" }))
            }
        );
        assert_eq!(percent_encode("a-b_c.d~e"), "a-b_c.d~e");
        assert_eq!(percent_encode("a b?&=é"), "a%20b%3F%26%3D%C3%A9");
    }

    #[test]
    fn outcomes_follow_the_status() {
        let text = |r: &Value| r["content"][0]["text"].as_str().unwrap().to_string();
        let status = json!({ "phase": "Running", "message": "m" });
        let ok = outcome(tool(&ORCHESTRATOR_TOOLS, "status"), StatusCode::OK, status.clone()).unwrap();
        assert_eq!(text(&ok), serde_json::to_string_pretty(&status).unwrap());
        assert_eq!(ok["isError"], false);
        assert_eq!(ok["structuredContent"], status);
        let list = outcome(tool(&ORCHESTRATOR_TOOLS, "list_sessions"), StatusCode::OK, json!({ "sessions": [] }));
        assert_eq!(text(&list.unwrap()), serde_json::to_string_pretty(&json!({ "sessions": [] })).unwrap());
        let transcript = json!({ "session": "w", "text": "line 1\nline 2" });
        let r = outcome(tool(&ORCHESTRATOR_TOOLS, "read_transcript"), StatusCode::OK, transcript).unwrap();
        assert_eq!(text(&r), "line 1\nline 2");
        let diff = json!({ "diff": "--- a\n+++ b\n" });
        assert_eq!(
            text(&outcome(tool(&ORCHESTRATOR_TOOLS, "read_diff"), StatusCode::OK, diff).unwrap()),
            "--- a\n+++ b\n"
        );
        let no_field = json!({ "other": 1 });
        let r = outcome(tool(&ORCHESTRATOR_TOOLS, "read_diff"), StatusCode::OK, no_field.clone()).unwrap();
        assert_eq!(text(&r), serde_json::to_string_pretty(&no_field).unwrap());
        let r = outcome(tool(&ORCHESTRATOR_TOOLS, "spawn"), StatusCode::CREATED, json!({ "message": "created w" }));
        assert_eq!(text(&r.unwrap()), "created w");

        let spawn = tool(&ORCHESTRATOR_TOOLS, "spawn");
        for (code, shown) in [
            (StatusCode::CONFLICT, "409 Conflict: at the limit"),
            (StatusCode::TOO_MANY_REQUESTS, "429 Too Many Requests: at the limit"),
            (StatusCode::INTERNAL_SERVER_ERROR, "500 Internal Server Error: at the limit"),
            (StatusCode::NOT_FOUND, "404 Not Found: at the limit"),
        ] {
            let r = outcome(spawn, code, json!({ "message": "at the limit" })).unwrap();
            assert_eq!(r["isError"], true, "{code}");
            assert_eq!(text(&r), shown);
        }
        let e = outcome(spawn, StatusCode::BAD_REQUEST, json!({ "message": "bad name" })).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (INVALID_PARAMS, "bad name"));
        assert_eq!(outcome(spawn, StatusCode::UNPROCESSABLE_ENTITY, Value::Null).unwrap_err().code, INVALID_PARAMS);
        assert_eq!(
            outcome(spawn, StatusCode::FORBIDDEN, json!({ "message": "not yours" })).unwrap_err().code,
            NOT_ALLOWED
        );
        assert_eq!(outcome(spawn, StatusCode::UNAUTHORIZED, Value::Null).unwrap_err().code, NOT_ALLOWED);
    }

    #[tokio::test]
    async fn calls_reach_the_agent_api_and_hello_is_said_once() {
        type Seen = Arc<parking_lot::Mutex<Vec<(String, String, String, String)>>>;
        use std::sync::Arc;
        let seen: Seen = Arc::default();
        let record = seen.clone();
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let record = record.clone();
            async move {
                let (parts, body) = req.into_parts();
                let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                let auth = parts.headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                let body = String::from_utf8_lossy(&body).into_owned();
                record.lock().push((parts.method.to_string(), parts.uri.to_string(), auth, body));
                axum::Json(json!({ "message": "ok", "text": "line 1\nline 2" }))
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });

        let s = Server::new(base, "aoo1.p.u.m".into());
        for _ in 0..2 {
            assert!(handle(&s, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await.is_none());
        }
        let r = handle(&s, &call("read_transcript", json!({ "session": "a b", "lines": 7 }))).await.unwrap();
        assert_eq!(r["result"]["content"][0]["text"], "line 1\nline 2", "{r}");
        let r = handle(&s, &call("delete", json!({ "session": "w" }))).await.unwrap();
        assert_eq!(r["result"]["content"][0]["text"], "ok", "{r}");

        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !seen.lock().iter().any(|(_, uri, _, _)| uri == "/agent/v1/hello") {
            assert!(tokio::time::Instant::now() < deadline, "no hello: {:?}", seen.lock());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let seen = seen.lock().clone();
        let hellos: Vec<_> = seen.iter().filter(|(_, uri, _, _)| uri == "/agent/v1/hello").collect();
        assert_eq!(hellos.len(), 1, "{seen:?}");
        assert_eq!((hellos[0].0.as_str(), hellos[0].3.as_str()), ("POST", "{}"));
        assert!(seen.iter().all(|(_, _, auth, _)| auth == "Bearer aoo1.p.u.m"), "{seen:?}");
        let others: Vec<(&str, &str, &str)> = seen
            .iter()
            .filter(|(_, uri, _, _)| uri != "/agent/v1/hello")
            .map(|(m, uri, _, body)| (m.as_str(), uri.as_str(), body.as_str()))
            .collect();
        assert_eq!(
            others,
            [
                ("GET", "/agent/v1/orchestrator/sessions/a%20b/transcript?lines=7", ""),
                ("DELETE", "/agent/v1/orchestrator/sessions/w", "")
            ]
        );
    }
}
