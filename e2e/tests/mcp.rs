//! `aoctl mcp` driven by a real MCP client — the reference Python SDK (`mcp` from PyPI, in a
//! virtualenv in the CLI cache outside the checkout, e2e/mcp-client/client.py) — with the
//! environment the controller gave a real session's agent (the scripted demo-agent in tmux):
//! every tool works and is recorded as an event, `ask_human` puts the session in needs-input and
//! tells the project's `command` notifier once, `aoctl answer` types the answer into the agent once
//! and ends it, `send` reaches the other session's agent once, `handoff` creates a labelled
//! session that waits for a slot like any; a session's token opens nothing of the rest of the
//! API and cannot reach another project; a malformed call is an MCP error and changes nothing in
//! the store. And the real
//! Claude Code, started by aoctl with `aoctl mcp` in its MCP config, calls `status` when the
//! scripted model endpoint (e2e/model-standin) tells it to.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{run_for, Server, API, BIN};
use crate::lifecycle::{
    agent_repo, events, eventually, project, session, token, transcript, wait_all, Cleanup, Tmux, READY,
};
use crate::model_agents::cache;

/// The pinned version of the reference Python SDK.
const MCP_SDK_VERSION: &str = "2.3.0";
/// How long one step may take.
const STEP: Duration = Duration::from_secs(45);
/// The JSON-RPC error codes `aoctl mcp` answers with.
pub(crate) const INVALID_PARAMS: i64 = -32602;
const NOT_ALLOWED: i64 = -32001;

/// The python of a virtualenv holding `mcp==MCP_SDK_VERSION`, made first when missing.
pub(crate) fn sdk_python() -> PathBuf {
    let venv = cache().join(format!("mcp-{MCP_SDK_VERSION}"));
    let python = venv.join("bin").join("python3");
    let ready = venv.join("bin").join("pip").exists()
        && Command::new(&python).args(["-c", "import mcp"]).output().is_ok_and(|o| o.status.success());
    if !ready {
        let mut cmd = Command::new("python3");
        cmd.args(["-m", "venv"]).arg(&venv);
        let out = run_for(cmd, None, Duration::from_secs(120));
        assert_eq!(out.code, 0, "python3 -m venv:\n{out}");
        let mut cmd = Command::new(venv.join("bin").join("pip"));
        cmd.args(["install", "-q", &format!("mcp=={MCP_SDK_VERSION}")]);
        let out = run_for(cmd, None, Duration::from_secs(600));
        assert_eq!(out.code, 0, "pip install mcp:\n{out}");
    }
    python
}

/// What the client answered: the protocol version, the tools, and one entry per call.
pub(crate) struct Answer {
    pub(crate) doc: Value,
}

impl Answer {
    pub(crate) fn call(&self, i: usize) -> &Value {
        &self.doc["calls"][i]
    }

    /// The text of call `i`'s result; panics on an error or a tool error.
    pub(crate) fn text(&self, i: usize) -> String {
        let r = &self.call(i)["result"];
        assert_eq!(r["isError"], false, "call {i} failed: {:#}", self.doc);
        r["content"][0]["text"].as_str().unwrap_or_default().to_string()
    }

    /// The JSON-RPC error code of call `i`; panics when it succeeded.
    pub(crate) fn error(&self, i: usize) -> i64 {
        self.call(i)["error"]["code"].as_i64().unwrap_or_else(|| panic!("call {i} did not fail: {:#}", self.doc))
    }
}

/// Runs the client against `aoctl mcp` with the session's environment `env`, making `calls`.
pub(crate) fn mcp(python: &Path, env: &[(String, String)], calls: Value) -> Answer {
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/mcp-client/client.py");
    let mut cmd = Command::new(python);
    cmd.arg(client).arg(BIN).env_remove("AOCTL_SERVER").env_remove("AOCTL_SESSION_TOKEN");
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let out = run_for(cmd, Some(&calls.to_string()), Duration::from_secs(180));
    assert_eq!(out.code, 0, "the MCP client failed:\n{out}");
    let doc: Value = serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}:\n{out}"));
    Answer { doc }
}

/// The `AOCTL_*` variables the session's agent was started with, read from its process.
pub(crate) fn agent_env(server: &Server, name: &str) -> Vec<(String, String)> {
    let pid = Tmux::of(server).pane_pid(name).expect("the agent's pane");
    let raw = std::fs::read(format!("/proc/{pid}/environ")).expect("the agent's environment");
    raw.split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok()?.split_once('='))
        .filter(|(k, _)| ["AOCTL_SERVER", "AOCTL_SESSION", "AOCTL_SESSION_TOKEN"].contains(k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(crate) fn var<'a>(env: &'a [(String, String)], key: &str) -> &'a str {
    env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()).unwrap_or_else(|| panic!("{key} missing: {env:?}"))
}

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

async fn wait_transcript(server: &Server, name: &str, needle: &str) -> String {
    eventually(STEP, &format!("{name}'s agent shows {needle:?}"), || {
        let t = transcript(server, name);
        if t.contains(needle) {
            Ok(t)
        } else {
            Err(t)
        }
    })
    .await
}

async fn has_event(server: &Server, name: &str, reason: &str) -> Value {
    has_event_within(server, name, reason, STEP).await
}

async fn has_event_within(server: &Server, name: &str, reason: &str, timeout: Duration) -> Value {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let evs = events(server, name).await;
        if let Some(e) = evs.iter().find(|e| e["reason"] == reason) {
            return e.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no {reason} event on {name}: {evs:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_uses_every_tool_on_its_own_session_and_project_only() {
    let python = sdk_python();
    let server = Server::start().await;
    let _cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "mcp");
    let other_repo = agent_repo(server.tmp.path(), "elsewhere");
    let told = server.tmp.path().join("told.jsonl");
    let command = json!(["sh", "-c", format!("cat >> '{}'; echo >> '{}'", told.display(), told.display())]);
    let notifiers = json!([{"type": "command", "command": command}]);
    // Two slots: a follow-up session handed off while both run waits for one.
    let spec = json!({"notifiers": notifiers, "maxConcurrentSessions": 2});
    server.create("projects", &project("mcp", &repo, spec)).await;
    server.create("projects", &project("elsewhere", &other_repo, json!({}))).await;
    for (name, proj) in [("worker", "mcp"), ("peer", "mcp"), ("stranger", "elsewhere")] {
        server.create("sessions", &session(name, proj, &token(name), json!({}))).await;
    }
    wait_all(&server, &["worker", "peer", "stranger"], READY, "Ready", crate::lifecycle::ready).await;
    for name in ["worker", "peer", "stranger"] {
        wait_transcript(&server, name, "demo-agent: committed").await;
    }

    // The agent was started with the API's address, its name and its own token.
    let env = agent_env(&server, "worker");
    assert_eq!(var(&env, "AOCTL_SERVER"), server.base.trim_end_matches('/'));
    assert_eq!(var(&env, "AOCTL_SESSION"), "worker");
    let worker_token = var(&env, "AOCTL_SESSION_TOKEN").to_string();
    assert_ne!(worker_token, server.token);

    // status and report.
    let a = mcp(
        &python,
        &env,
        json!([{"name": "status"}, {"name": "report", "arguments": {"progress": "Reading the notes", "summary": "Half done"}}]),
    );
    assert_eq!(a.doc["protocolVersion"], "2025-11-25", "{:#}", a.doc);
    assert_eq!(a.doc["tools"], json!(["status", "report", "ask_human", "send", "handoff", "request_review"]));
    let status = &a.call(0)["result"]["structuredContent"];
    assert_eq!((&status["session"], &status["project"]), (&json!("worker"), &json!("mcp")), "{:#}", a.doc);
    assert_eq!(status["branch"], "mcp/worker", "{:#}", a.doc);
    assert!(["Idle", "Working"].contains(&status["phase"].as_str().unwrap_or_default()), "{:#}", a.doc);
    assert!(status["activity"]["state"].is_string(), "{:#}", a.doc);
    assert!(a.text(1).contains("reported"), "{:#}", a.doc);
    let s = server.object("sessions", "worker").await.expect("worker");
    assert_eq!(s["status"]["agent"]["progress"], "Reading the notes", "{s:#}");
    assert_eq!(s["status"]["agent"]["summary"], "Half done", "{s:#}");
    has_event(&server, "worker", "AgentCalledStatus").await;
    let e = has_event(&server, "worker", "AgentReported").await;
    assert!(e["message"].as_str().unwrap_or_default().contains("Reading the notes"), "{e:#}");

    // ask_human: needs-input with the question, the notifier told once, then answered.
    let question = "Ship the notes on Friday?";
    let a = mcp(&python, &env, json!([{"name": "ask_human", "arguments": {"question": question}}]));
    assert!(a.text(0).contains("the question was asked"), "{:#}", a.doc);
    server
        .wait_for("sessions", "worker", STEP, |o| {
            o.pointer("/status/activity/state") == Some(&json!("needs-input"))
                && o.pointer("/status/activity/evidence").and_then(Value::as_str).is_some_and(|e| e.contains(question))
        })
        .await;
    let told_text = eventually(STEP, "the notifier was told", || {
        let t = std::fs::read_to_string(&told).unwrap_or_default();
        if t.contains(question) {
            Ok(t)
        } else {
            Err(t)
        }
    })
    .await;
    let n: Value = serde_json::from_str(told_text.lines().next().unwrap_or_default()).expect("a JSON notification");
    assert_eq!((&n["reaction"], &n["session"]), (&json!("ask-human"), &json!("worker")), "{n:#}");
    has_event(&server, "worker", "AgentAsked").await;
    // A second question waits for the first to be answered.
    let a = mcp(&python, &env, json!([{"name": "ask_human", "arguments": {"question": "And Monday?"}}]));
    assert_eq!(a.call(0)["result"]["isError"], true, "{:#}", a.doc);

    let out = server.aoctl(&["answer", "worker", "yes, on Friday"]);
    out.ok();
    assert!(out.stdout.contains("answered session \"worker\""), "{out}");
    let t = wait_transcript(&server, "worker", "demo-agent: got: yes, on Friday").await;
    assert_eq!(count(&t, "demo-agent: got: yes, on Friday"), 1, "typed once:\n{t}");
    server
        .wait_for("sessions", "worker", STEP, |o| {
            o.pointer("/status/agent/question").is_none()
                && o.pointer("/status/activity/state").is_some_and(|s| s != "needs-input")
        })
        .await;
    let out = server.aoctl(&["answer", "worker", "again"]);
    out.code(1);
    assert!(out.stderr.contains("session \"worker\" has no question"), "{out}");
    let lines = std::fs::read_to_string(&told).unwrap_or_default();
    let notes = lines.lines().filter(|l| l.contains(question)).count();
    assert_eq!(notes, 1, "the notifier was told once:\n{lines}");

    // send reaches the other session's agent once; handoff makes a labelled session; a review is recorded.
    let a = mcp(
        &python,
        &env,
        json!([
            {"name": "send", "arguments": {"session": "peer", "text": "hello peer"}},
            {"name": "handoff", "arguments": {"prompt": "Follow up on the notes"}},
            {"name": "request_review", "arguments": {"note": "the notes file"}},
        ]),
    );
    let _ = a.text(0);
    let t = wait_transcript(&server, "peer", "demo-agent: got: [from session worker] hello peer").await;
    assert_eq!(count(&t, "got: [from session worker] hello peer"), 1, "sent once:\n{t}");
    let handed = a.call(1)["result"]["structuredContent"]["details"]["session"].as_str().expect("a name").to_string();
    assert!(handed.starts_with("worker-next-"), "{handed}");
    let h = server.object("sessions", &handed).await.expect("the follow-up session");
    assert_eq!(h["metadata"]["labels"]["ao.dev/handoff-from"], "worker", "{h:#}");
    assert_eq!((&h["spec"]["project"], &h["spec"]["prompt"]), (&json!("mcp"), &json!("Follow up on the notes")));
    server.wait_for("sessions", &handed, STEP, |o| crate::lifecycle::phase(o) == "Queued").await;
    let s = server.object("sessions", "worker").await.expect("worker");
    assert_eq!(s["status"]["agent"]["reviewRequested"]["note"], "the notes file", "{s:#}");
    // The project has no reviewers: the tool says that no round starts, rather than pretend.
    let review = a.call(2)["result"]["structuredContent"].clone();
    assert_eq!(review["details"]["reviewers"], 0, "{review:#}");
    assert!(review.to_string().contains("no review round starts"), "{review:#}");
    for reason in ["AgentSent", "AgentHandedOff", "ReviewRequested"] {
        has_event(&server, "worker", reason).await;
    }

    // Another project is out of reach, through MCP and over HTTP.
    let a = mcp(&python, &env, json!([{"name": "send", "arguments": {"session": "stranger", "text": "psst"}}]));
    assert_eq!(a.error(0), NOT_ALLOWED, "{:#}", a.doc);
    let bearer = |req: reqwest::RequestBuilder| req.header("authorization", format!("Bearer {worker_token}"));
    let http = reqwest::Client::new();
    for path in [
        format!("{API}/sessions"),
        format!("{API}/sessions/stranger"),
        format!("{API}/sessions/worker"),
        format!("{API}/projects/elsewhere"),
        "/metrics".to_string(),
    ] {
        let r = bearer(http.get(server.url(&path))).send().await.expect("GET");
        assert_eq!(r.status(), 401, "GET {path} with a session token");
    }
    let r = bearer(http.post(server.url(&format!("{API}/sessions/stranger/input"))))
        .json(&json!({"text": "psst"}))
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), 401, "a session token types into nothing");
    let r = http.get(server.url("/agent/v1/status")).bearer_auth(&server.token).send().await.expect("GET");
    assert_eq!(r.status(), 401, "the bearer token speaks for no session");
    let stranger_token = var(&agent_env(&server, "stranger"), "AOCTL_SESSION_TOKEN").to_string();
    let r = http.get(server.url("/agent/v1/status")).bearer_auth(&stranger_token).send().await.expect("GET");
    let body: Value = r.json().await.expect("JSON");
    assert_eq!(body["session"], "stranger", "a token speaks for its own session only");
    assert!(!transcript(&server, "stranger").contains("psst"), "nothing reached the other project");

    // Malformed calls are MCP errors and change nothing.
    let before = server.settle().await;
    let a = mcp(
        &python,
        &env,
        json!([
            {"name": "ask_human", "arguments": {}},
            {"name": "ask_human", "arguments": {"question": 42}},
            {"name": "send", "arguments": {"session": "peer"}},
            {"name": "report", "arguments": {"progress": "  "}},
            {"name": "handoff", "arguments": {"prompt": "x", "project": "elsewhere"}},
            {"name": "send", "arguments": {"session": "nobody-here", "text": "hi"}},
            {"name": "no_such_tool"},
        ]),
    );
    for i in 0..7 {
        assert_eq!(a.error(i), INVALID_PARAMS, "call {i}: {:#}", a.doc);
    }
    let after = server.settle().await;
    assert!(before == after, "a malformed call changed the store");

    // Handing off is bounded: ten sessions from one session (it made one above), then a refusal
    // that stores nothing; and, with the project's bound lowered, none from another session.
    let handoff = |token: &str, n: usize| {
        let (http, token) = (http.clone(), token.to_string());
        let url = server.url("/agent/v1/handoff");
        async move {
            let body = json!({"prompt": format!("Follow-up {n}")});
            let r = http.post(url).bearer_auth(token).json(&body).send().await.expect("POST handoff");
            (r.status().as_u16(), r.json::<Value>().await.expect("JSON"))
        }
    };
    for n in 2..=10 {
        let (code, body) = handoff(&worker_token, n).await;
        assert_eq!(code, 201, "handoff {n}: {body:#}");
    }
    let handed = |from: &'static str| {
        let server = &server;
        async move {
            let path = format!("{API}/sessions?labelSelector=ao.dev%2Fhandoff-from%3D{from}");
            server.get_path(&path).await.expect(200)["items"].as_array().map_or(0, Vec::len)
        }
    };
    assert_eq!(handed("worker").await, 10);
    let (code, body) = handoff(&worker_token, 11).await;
    assert_eq!(code, 403, "the 11th: {body:#}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("its limit of 10")), "{body:#}");
    assert_eq!(handed("worker").await, 10, "the refused handoff stored nothing");
    let bound = json!({"spec": {"handoff": {"perProject": 10}}});
    server.json("PATCH", &format!("{API}/projects/mcp"), &bound).await.expect(200);
    let peer_token = var(&agent_env(&server, "peer"), "AOCTL_SESSION_TOKEN").to_string();
    let (code, body) = handoff(&peer_token, 1).await;
    assert_eq!(code, 403, "past the project's bound: {body:#}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("10 handed-off sessions")), "{body:#}");
    assert_eq!(handed("peer").await, 0);
}

/// The command line the agent of session `name` was started with.
fn agent_argv(server: &Server, name: &str) -> Vec<String> {
    let pid = Tmux::of(server).pane_pid(name).expect("the agent's pane");
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).expect("the agent's command line");
    raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_is_given_aoctl_mcp_and_calls_its_status_tool() {
    use crate::model_agents::{npm_cli, setup, spec_for, Kind, CLAUDE_VERSION};
    let s = setup(&npm_cli("@anthropic-ai/claude-code", CLAUDE_VERSION, "claude")).await;
    let cleanup = Cleanup::new(&s.server);
    let name = "asks-status";
    let mut spec = spec_for(Kind::Claude, &s, "call-tool status");
    // The scripted model does not search for deferred tools: every tool is offered at once.
    spec["env"]["ENABLE_TOOL_SEARCH"] = json!("false");
    let manifest =
        json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name}, "spec": spec});
    s.server.create("sessions", &manifest).await;
    // The pane's first process may be the shell that execs the agent: its command line counts
    // once it is the agent's own.
    // Its environment is read at the same moment: once the agent sets its process title, what
    // the kernel shows of its command line and environment is no longer what it was given.
    let (argv, env) = eventually(STEP, "the agent started", || match Tmux::of(&s.server).pane_pid(name) {
        Some(_) => {
            let argv = agent_argv(&s.server, name);
            let env = agent_env(&s.server, name);
            if !argv.iter().any(|a| a.starts_with("--mcp-config=")) {
                Err(format!("the pane runs {argv:?}"))
            } else if !env.iter().any(|(k, _)| k == "AOCTL_SESSION") {
                Err(format!("the agent's environment reads {env:?}"))
            } else {
                Ok((argv, env))
            }
        }
        None => Err("no pane yet".to_string()),
    })
    .await;
    let config = argv.iter().find_map(|a| a.strip_prefix("--mcp-config=")).unwrap_or_else(|| panic!("{argv:?}"));
    let doc: Value = serde_json::from_str(config).expect("the MCP config is JSON");
    let command = doc["mcpServers"]["aoctl"]["command"].as_str().expect("a command");
    let same = |p: &str| std::fs::canonicalize(p).ok();
    assert_eq!(same(command), same(BIN), "the server's own binary: {doc:#}");
    assert_eq!(doc["mcpServers"]["aoctl"]["args"], json!(["mcp"]), "{doc:#}");
    assert_eq!(var(&env, "AOCTL_SESSION"), name);
    // The scripted model calls the `status` tool; the call reaches the agent API as this session.
    // Claude Code connects its MCP servers while it starts: a turn taken before `aoctl mcp`
    // answered has no aoctl tools yet, so the request is typed again until one has them.
    let deadline = std::time::Instant::now() + Duration::from_secs(150);
    let mut asked = std::time::Instant::now();
    let e = loop {
        if let Some(e) = events(&s.server, name).await.into_iter().find(|e| e["reason"] == "AgentCalledStatus") {
            break e;
        }
        assert!(std::time::Instant::now() < deadline, "no status call:\n{}", transcript(&s.server, name));
        let idle = s.server.object("sessions", name).await.is_some_and(|o| o["status"]["activity"]["state"] == "idle");
        if idle && asked.elapsed() > Duration::from_secs(15) {
            let _ = s
                .server
                .json("POST", &format!("{API}/sessions/{name}/input"), &json!({"text": "call-tool status"}))
                .await;
            asked = std::time::Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(e["involvedObject"]["name"], name, "{e:#}");
    cleanup.finish();
}
