//! A project's orchestrator end to end: the real Claude Code, started by aoctl as the project's
//! orchestrator and as the workers it spawns, against the scripted model endpoint
//! (e2e/model-standin, its rules file scripting each agent's turns). The orchestrator splits a
//! goal into two workers; their reports reach it as marked messages, each once; it messages one,
//! stops the other and is refused a third past `maxSessions`. A worker's token cannot call the
//! orchestrator's tools, nor the orchestrator's token the rest of the API. A controller killed
//! while reports are on their way to the orchestrator repeats none of them.
//!
//! Everything is asserted from what the model received (the stand-in's log), the store and the
//! events, not from screens. Which agent sent a request is told by its working directory, which
//! Claude Code names in the environment it describes to the model.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{git_repo, rv_num, Server, API};
use crate::lifecycle::{events, eventually, git_out, project, restarts, Cleanup, Tmux};
use crate::mcp::{agent_env, mcp, sdk_python, var, INVALID_PARAMS};
use crate::model_agents::{npm_cli, setup, spec_for, user_texts, Kind, Setup, Standin, CLAUDE_VERSION};

/// The project of the model tests (`model_agents::setup`) and its orchestrator Session.
const PROJECT: &str = "models";
const ORCHESTRATOR: &str = "models-orchestrator";
/// How long one step of a scenario may take: three Claude Code processes share two cores.
const STEP: Duration = Duration::from_secs(120);

/// The pinned Claude Code.
fn claude() -> PathBuf {
    npm_cli("@anthropic-ai/claude-code", CLAUDE_VERSION, "claude")
}

/// The environment that points Claude Code at the stand-in, every tool offered at once (the
/// scripted model does not search for deferred tools).
fn model_env(s: &Setup) -> Value {
    let mut env = spec_for(Kind::Claude, s, "")["env"].clone();
    env["ENABLE_TOOL_SEARCH"] = json!("false");
    env
}

/// Gives the project `spec.orchestrator` (a merge patch; `Value::Null` takes it away).
async fn set_orchestrator(server: &Server, orchestrator: Value) {
    let patch = json!({"spec": {"orchestrator": orchestrator}});
    server.json("PATCH", &format!("{API}/projects/{PROJECT}"), &patch).await.expect(200);
}

/// Takes the orchestrator away (else the project makes it again as the cleanup deletes it), then
/// deletes every session and checks that nothing of them is left.
async fn finish(server: &Server, cleanup: Cleanup) {
    set_orchestrator(server, Value::Null).await;
    server.wait_for("sessions", ORCHESTRATOR, STEP, Value::is_null).await;
    cleanup.finish();
}

/// Takes `spec.orchestrator` away when a test fails, before [`Cleanup`] deletes the sessions
/// (declare it after): else the project makes its orchestrator again as it is deleted, and the
/// new one spawns its workers again.
struct Unorchestrate {
    addr: String,
    token: String,
    project: &'static str,
}

impl Unorchestrate {
    fn new(server: &Server, project: &'static str) -> Unorchestrate {
        let addr = server.base.trim_start_matches("http://").to_string();
        Unorchestrate { addr, token: server.token.clone(), project }
    }
}

impl Drop for Unorchestrate {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let body = r#"{"spec":{"orchestrator":null}}"#;
        let request = format!(
            "PATCH {API}/projects/{} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/merge-patch+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.project,
            self.addr,
            self.token,
            body.len()
        );
        if let Ok(mut c) = std::net::TcpStream::connect(&self.addr) {
            let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = c.write_all(request.as_bytes());
            let _ = c.read_to_end(&mut vec![]);
        }
    }
}

/// A rule of the stand-in: when the newest user text matches `when`, these calls, then `then`.
fn rule(when: &str, calls: Value, then: &str) -> Value {
    json!({"when": when, "calls": calls, "then": then})
}

fn call(tool: &str, input: Value) -> Value {
    json!({"tool": tool, "input": input})
}

/// A Bash call (Claude Code's own tool) that returns once `gate` exists.
fn wait_for_gate(gate: &Path) -> Value {
    let command = format!("while [ ! -e '{}' ]; do sleep 0.2; done; echo gate open", gate.display());
    call("Bash", json!({"command": command, "description": "Wait for the gate", "timeout": 600000}))
}

/// Kills the server with SIGKILL and starts it again on its data dir and port; the agents go on
/// in their tmux server meanwhile.
async fn restart(s: &mut Setup) {
    let path = s.path.clone();
    s.server.restart_with_env(&[("PATH", &path)]).await;
}

/// The environment the agent of session `name` was started with, once it runs.
async fn env_of(server: &Server, name: &str) -> Vec<(String, String)> {
    eventually(STEP, &format!("{name}'s agent runs"), || {
        match Tmux::of(server).pane_pid(name).map(|_| agent_env(server, name)) {
            Some(env) if env.iter().any(|(k, _)| k == "AOCTL_SESSION_TOKEN") => Ok(env),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// A session's object; `Null` when it is not stored.
async fn object(server: &Server, name: &str) -> Value {
    server.object("sessions", name).await.unwrap_or(Value::Null)
}

/// The checkout a session's agent works in, once its workspace is made.
async fn workdir(server: &Server, name: &str) -> PathBuf {
    let o = server.wait_for("sessions", name, STEP, |o| o.pointer("/status/workspace/path").is_some()).await;
    PathBuf::from(o["status"]["workspace"]["path"].as_str().expect("a path"))
}

/// Whether some string in `v` holds `needle`.
fn holds(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s.contains(needle),
        Value::Array(a) => a.iter().any(|v| holds(v, needle)),
        Value::Object(o) => o.values().any(|v| holds(v, needle)),
        _ => false,
    }
}

/// The main requests of the agent working in `dir`, oldest first: Claude Code names its working
/// directory in the environment it describes to the model.
fn requests_of(standin: &Standin, dir: &Path) -> Vec<Value> {
    let line = format!("Primary working directory: {}\n", dir.display());
    standin.main_requests().into_iter().filter(|r| holds(&r["body"], &line)).collect()
}

/// The user texts of the newest request of the agent working in `dir`.
fn newest_texts(standin: &Standin, dir: &Path) -> Vec<String> {
    requests_of(standin, dir).last().map(user_texts).unwrap_or_default()
}

/// How often `needle` occurs in the user texts of the newest request of the agent in `dir`.
fn times(standin: &Standin, dir: &Path, needle: &str) -> usize {
    newest_texts(standin, dir).iter().map(|t| t.matches(needle).count()).sum()
}

/// Waits until the agent in `dir` received `needle`.
async fn reaches(standin: &Standin, dir: &Path, needle: &str, what: &str) {
    eventually(STEP, what, || match times(standin, dir, needle) {
        0 => Err(format!("{} requests of this agent so far", requests_of(standin, dir).len())),
        _ => Ok(()),
    })
    .await;
}

/// Waits for an event of `reason` about session `name`.
async fn event(server: &Server, name: &str, reason: &str) -> Value {
    let deadline = Instant::now() + STEP;
    loop {
        let evs = events(server, name).await;
        if let Some(e) = evs.iter().find(|e| e["reason"] == reason) {
            return e.clone();
        }
        assert!(Instant::now() < deadline, "no {reason} event on {name}: {evs:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The workers whose records the orchestrator has had (`status.orchestrator.delivered`).
fn delivered(o: &Value) -> Vec<String> {
    o.pointer("/status/orchestrator/delivered")
        .and_then(Value::as_object)
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default()
}

/// The markers (`[aoctl:reports:<uid8>-<id>]`) in `text`.
fn markers(text: &str) -> Vec<String> {
    text.match_indices("[aoctl:reports:")
        .filter_map(|(at, _)| text[at..].find(']').map(|end| text[at..at + end + 1].to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orchestrator_splits_a_goal_into_workers_and_acts_on_their_reports() {
    let began = Instant::now();
    let s = setup(&claude()).await;
    let cleanup = Cleanup::new(&s.server);
    let _failing = Unorchestrate::new(&s.server, PROJECT);
    let server = &s.server;
    // A worker's first prompt is typed once its `aoctl mcp` is connected, so w-a reports in its
    // first turn. w-b reports only once w-a's report is stored (it waits in Bash for a gate):
    // B-DONE never reaches the orchestrator before A-DONE, whether the two come in one message or
    // in two.
    let gate_b = server.tmp.path().join("gate-b");
    s.standin.rules(&json!([
        rule("FOLLOW-A", json!([call("report", json!({"summary": "A-FOLLOWED"}))]), "followed"),
        rule("TASK-A", json!([call("report", json!({"summary": "A-DONE"}))]), "a done"),
        rule("TASK-B", json!([wait_for_gate(&gate_b), call("report", json!({"summary": "B-DONE"}))]), "b done"),
        rule(
            r"(?s)\[aoctl:reports:.*B-DONE",
            json!([
                call("send", json!({"session": "w-a", "text": "FOLLOW-A"})),
                call("stop", json!({"session": "w-b"})),
                call("spawn", json!({"name": "w-c", "prompt": "TASK-C"})),
            ]),
            "acted",
        ),
        rule(r"\[aoctl:reports:", json!([]), "noted"),
        rule(
            "GOAL",
            json!([
                call("spawn", json!({"name": "w-a", "prompt": "TASK-A"})),
                call("spawn", json!({"name": "w-b", "prompt": "TASK-B"})),
            ]),
            "spawned",
        ),
    ]));
    let env = model_env(&s);
    set_orchestrator(
        server,
        json!({"agent": "claude-code", "prompt": "GOAL split the work", "env": env, "limits": {"maxSessions": 2}}),
    )
    .await;

    // The orchestrator reads a detached checkout: no branch, no pull request.
    let odir = workdir(server, ORCHESTRATOR).await;
    let o = object(server, ORCHESTRATOR).await;
    assert_eq!(o["spec"]["role"], "orchestrator", "{o:#}");
    assert_eq!(o["spec"]["workspace"]["kind"], "readonly", "{o:#}");
    assert_eq!(o["spec"]["restartPolicy"], "Always", "{o:#}");
    assert_eq!(o["spec"]["env"], env, "{o:#}");
    assert_eq!(o["status"]["workspace"]["branch"], "", "{o:#}");
    assert_eq!(git_out(&odir, &["symbolic-ref", "-q", "HEAD"]), None, "the checkout is on a branch");
    let repo = server.tmp.path().join(PROJECT);
    let branch = format!("refs/heads/{PROJECT}/{ORCHESTRATOR}");
    assert_eq!(git_out(&repo, &["rev-parse", "-q", "--verify", &branch]), None, "a branch was made for it");

    // Its first turn has its tools: it spawns two workers, labelled with it, with its environment.
    for name in ["w-a", "w-b"] {
        let w = server.wait_for("sessions", name, STEP, |w| !w.is_null()).await;
        assert_eq!(w["metadata"]["labels"]["ao.dev/orchestrator"], ORCHESTRATOR, "{w:#}");
        assert_eq!(w["spec"]["env"], env, "{w:#}");
        assert_ne!(w["spec"]["role"], "orchestrator", "{w:#}");
    }
    let spawned = event(server, ORCHESTRATOR, "OrchestratorSpawned").await;
    eprintln!("workers spawned after {:?}: {}", began.elapsed(), spawned["message"]);
    let (adir, bdir) = (workdir(server, "w-a").await, workdir(server, "w-b").await);

    // w-a reports in its first turn; then w-b is let through and reports.
    let tools = |w: &Value| w.pointer("/status/agent/toolsAt").is_some();
    server.wait_for("sessions", "w-a", STEP, |w| w.pointer("/status/agent/summary") == Some(&json!("A-DONE"))).await;
    server.wait_for("sessions", "w-b", STEP, tools).await;
    std::fs::write(&gate_b, "").expect("open the gate");
    reaches(&s.standin, &odir, "B-DONE", "both reports reach the orchestrator").await;
    let batches: Vec<String> =
        newest_texts(&s.standin, &odir).iter().filter(|t| t.contains("[aoctl:reports:")).cloned().collect();
    eprintln!("reports delivered after {:?}, in {} message(s): {batches:#?}", began.elapsed(), batches.len());

    // It acts on them: a message to w-a, a stop of w-b, and a third worker refused.
    event(server, ORCHESTRATOR, "OrchestratorSent").await;
    event(server, ORCHESTRATOR, "OrchestratorStopped").await;
    let limited = event(server, ORCHESTRATOR, "OrchestratorCallLimited").await;
    assert_eq!(limited["type"], "Warning", "{limited:#}");
    assert!(limited["message"].as_str().is_some_and(|m| m.contains("maxSessions")), "{limited:#}");
    reaches(&s.standin, &adir, "FOLLOW-A", "w-a's model receives the orchestrator's message").await;
    reaches(&s.standin, &odir, "A-FOLLOWED", "w-a's second report reaches the orchestrator").await;
    server
        .wait_for("sessions", "w-b", STEP, |w| w["spec"]["stopped"] == true && w["status"]["phase"] == "Stopped")
        .await;
    eprintln!("acted on after {:?}", began.elapsed());

    // The third spawn came back to the model as a tool error naming the limit; nothing stored.
    let results = s.standin.tool_results();
    let third = results
        .iter()
        .find(|r| r.tool.ends_with("__spawn") && r.input["name"] == "w-c")
        .unwrap_or_else(|| panic!("no result of the third spawn: {results:#?}"));
    assert!(third.is_error && third.text.contains("maxSessions"), "{third:#?}");
    assert_eq!(object(server, "w-c").await, Value::Null, "the refused spawn stored a session");
    let fine = |tool: &str| results.iter().filter(|r| r.tool.ends_with(&format!("__{tool}")) && !r.is_error).count();
    assert_eq!((fine("spawn"), fine("send"), fine("stop")), (2, 1, 1), "{results:#?}");

    // Each report reached the orchestrator once, and the message reached w-a once, marked.
    for needle in ["A-DONE", "B-DONE", "A-FOLLOWED", "GOAL split the work"] {
        assert_eq!(times(&s.standin, &odir, needle), 1, "{needle} in {:#?}", newest_texts(&s.standin, &odir));
    }
    let texts = newest_texts(&s.standin, &adir);
    assert_eq!(times(&s.standin, &adir, "FOLLOW-A"), 1, "{texts:#?}");
    let from = format!("[from orchestrator {ORCHESTRATOR}] FOLLOW-A");
    assert!(texts.iter().any(|t| t.contains(&from)), "not marked as the orchestrator's: {texts:#?}");
    assert_eq!(times(&s.standin, &bdir, "FOLLOW-A"), 0, "the message reached w-b");
    let o = object(server, ORCHESTRATOR).await;
    assert_eq!(delivered(&o), ["w-a", "w-b"], "{o:#}");
    assert!(o.pointer("/status/orchestrator/inFlight").is_none(), "{o:#}");
    event(server, ORCHESTRATOR, "ReportsDelivered").await;

    // A stopped worker is not one that exited: nothing of it is kept for the orchestrator.
    let exited = |t: &String| t.contains("w-b — exited");
    assert!(!newest_texts(&s.standin, &odir).iter().any(exited), "w-b's stop was reported as an exit");
    let w_after = object(server, "w-b").await;
    let pending = w_after.pointer("/status/upstream/pending").and_then(Value::as_array).cloned().unwrap_or_default();
    assert!(pending.iter().all(|r| r["kind"] != "exited"), "{w_after:#}");
    let kept = events(server, "w-b").await;
    assert!(!kept.iter().any(|e| e["reason"] == "ReportedToOrchestrator"), "{kept:#?}");
    let o = object(server, ORCHESTRATOR).await;
    assert!(o["status"]["pullRequest"].is_null(), "the orchestrator has a pull request: {o:#}");

    finish(server, cleanup).await;
    eprintln!("the whole test took {:?}", began.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_token_cannot_call_the_orchestrators_tools() {
    let python = sdk_python();
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let _failing = Unorchestrate::new(&server, "gate");
    let repo = git_repo(server.tmp.path(), "gate", "main");
    // Agents that only wait: the prompt goes into a file, so nothing is typed.
    let idle = json!({"command": ["sh", "-c", "exec sleep 3600", "agent", "{promptFile}"]});
    let spec = json!({"defaults": {"agent": idle},
        "orchestrator": {"agent": idle, "prompt": "wait here", "limits": {"maxSessions": 1}}});
    server.create("projects", &project("gate", &repo, spec)).await;
    let oenv = env_of(&server, "gate-orchestrator").await;
    let otoken = var(&oenv, "AOCTL_SESSION_TOKEN").to_string();
    assert!(otoken.starts_with("aoo1.gate-orchestrator."), "{otoken}");

    // The orchestrator's tools: it lists the project, spawns one worker, and is refused a second.
    let a = mcp(
        &python,
        &oenv,
        json!([
            {"name": "list_sessions"},
            {"name": "spawn", "arguments": {"name": "w1", "prompt": "first"}},
            {"name": "spawn", "arguments": {"name": "w2", "prompt": "second"}},
        ]),
    );
    let tools: Vec<&str> = a.doc["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
    for tool in ["spawn", "list_sessions", "read_transcript", "stop", "merge", "answer"] {
        assert!(tools.contains(&tool), "{tool} is not offered to the orchestrator: {tools:?}");
    }
    let listed = &a.call(0)["result"]["structuredContent"];
    assert_eq!(listed["sessions"], json!([]), "{:#}", a.doc);
    assert_eq!((&listed["limits"]["maxSessions"], &listed["limits"]["alive"]), (&json!(1), &json!(0)), "{:#}", a.doc);
    assert!(a.text(1).contains("created worker \"w1\""), "{:#}", a.doc);
    let refused = &a.call(2)["result"];
    assert_eq!(refused["isError"], true, "{:#}", a.doc);
    assert!(refused["content"][0]["text"].as_str().is_some_and(|t| t.contains("maxSessions")), "{:#}", a.doc);
    let w1 = object(&server, "w1").await;
    assert_eq!(w1["metadata"]["labels"]["ao.dev/orchestrator"], "gate-orchestrator", "{w1:#}");
    assert_eq!(object(&server, "w2").await, Value::Null, "the refused spawn stored a session");
    event(&server, "gate-orchestrator", "OrchestratorCallLimited").await;

    // The worker's token: a worker's tools only, and the orchestrator's calls are refused.
    let wenv = env_of(&server, "w1").await;
    let wtoken = var(&wenv, "AOCTL_SESSION_TOKEN").to_string();
    assert!(wtoken.starts_with("aos1."), "{wtoken}");
    let a = mcp(&python, &wenv, json!([{"name": "spawn", "arguments": {"prompt": "more"}}, {"name": "list_sessions"}]));
    assert_eq!(a.doc["tools"], json!(["status", "report", "ask_human", "send", "handoff", "request_review"]));
    assert_eq!((a.error(0), a.error(1)), (INVALID_PARAMS, INVALID_PARAMS), "{:#}", a.doc);
    let before = server.get_path(&format!("{API}/sessions")).await.expect(200)["items"].as_array().map(Vec::len);
    let http = reqwest::Client::new();
    let post = |path: &str, token: &str, body: Value| http.post(server.url(path)).bearer_auth(token).json(&body).send();
    let r =
        post("/agent/v1/orchestrator/spawn", &wtoken, json!({"name": "w3", "prompt": "sneaky"})).await.expect("POST");
    assert_eq!(r.status(), 403, "a worker spawns: {:?}", r.text().await);
    let r = http.get(server.url("/agent/v1/orchestrator/sessions")).bearer_auth(&wtoken).send().await.expect("GET");
    assert_eq!(r.status(), 403, "a worker lists the project");
    let r = post("/agent/v1/orchestrator/sessions/w1/stop", &wtoken, json!({})).await.expect("POST");
    assert_eq!(r.status(), 403, "a worker stops a worker");
    let after = server.get_path(&format!("{API}/sessions")).await.expect(200)["items"].as_array().map(Vec::len);
    assert_eq!(before, after, "a refused call stored something");
    assert_eq!(object(&server, "w3").await, Value::Null);
    assert_eq!(object(&server, "w1").await["spec"]["stopped"], Value::Null, "w1 was stopped");

    // The orchestrator's token opens nothing of the resource API.
    for path in [format!("{API}/sessions"), format!("{API}/sessions/w1"), format!("{API}/projects/gate")] {
        let r = http.get(server.url(&path)).bearer_auth(&otoken).send().await.expect("GET");
        assert_eq!(r.status(), 401, "GET {path} with the orchestrator's token");
    }
    let r = post(
        &format!("{API}/sessions"),
        &otoken,
        json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session",
        "metadata": {"name": "w4"}, "spec": {"project": "gate", "prompt": "x"}}),
    )
    .await
    .expect("POST");
    assert_eq!(r.status(), 401, "POST sessions with the orchestrator's token");
    assert_eq!(object(&server, "w4").await, Value::Null);

    let patch = json!({"spec": {"orchestrator": null}});
    server.json("PATCH", &format!("{API}/projects/gate"), &patch).await.expect(200);
    server.wait_for("sessions", "gate-orchestrator", STEP, Value::is_null).await;
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_restart_repeats_no_message_to_the_orchestrator() {
    let began = Instant::now();
    let mut s = setup(&claude()).await;
    let mut cleanup = Cleanup::new(&s.server);
    let _failing = Unorchestrate::new(&s.server, PROJECT);
    // Each worker reports once the test let it through (see the test above).
    let (gate_a, gate_b) = (s.server.tmp.path().join("gate-a"), s.server.tmp.path().join("gate-b"));
    s.standin.rules(&json!([
        rule("TASK-A", json!([wait_for_gate(&gate_a), call("report", json!({"summary": "A-DONE"}))]), "a done"),
        rule("TASK-B", json!([wait_for_gate(&gate_b), call("report", json!({"summary": "B-DONE"}))]), "b done"),
        rule(r"\[aoctl:reports:", json!([]), "noted"),
        rule(
            "GOAL",
            json!([
                call("spawn", json!({"name": "w-a", "prompt": "TASK-A"})),
                call("spawn", json!({"name": "w-b", "prompt": "TASK-B"})),
            ]),
            "spawned",
        ),
    ]));
    let env = model_env(&s);
    set_orchestrator(&s.server, json!({"agent": "claude-code", "prompt": "GOAL split the work", "env": env})).await;
    let odir = workdir(&s.server, ORCHESTRATOR).await;

    // Killed right after w-a's report is kept for the orchestrator.
    let tools = |w: &Value| w.pointer("/status/agent/toolsAt").is_some();
    s.server.wait_for("sessions", "w-a", STEP, tools).await;
    std::fs::write(&gate_a, "").expect("open the gate");
    let started = Instant::now();
    loop {
        let w = object(&s.server, "w-a").await;
        if w.pointer("/status/upstream/pending").and_then(Value::as_array).is_some_and(|p| !p.is_empty()) {
            break;
        }
        assert!(started.elapsed() < STEP * 2, "w-a kept no report: {w:#}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    restart(&mut s).await;
    cleanup.retarget(&s.server);
    eprintln!("killed after w-a's report was kept, {:?} in", began.elapsed());

    // Killed again as soon as a batch is in flight to the orchestrator.
    let started = Instant::now();
    let batch = loop {
        let o = object(&s.server, ORCHESTRATOR).await;
        if let Some(b) = o.pointer("/status/orchestrator/inFlight").filter(|b| !b.is_null()) {
            break b.clone();
        }
        assert!(started.elapsed() < STEP, "no batch in flight: {o:#}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    restart(&mut s).await;
    cleanup.retarget(&s.server);
    eprintln!("killed with batch {} in flight, {:?} in", batch["id"], began.elapsed());

    // Then w-b reports.
    s.server.wait_for("sessions", "w-b", STEP, tools).await;
    std::fs::write(&gate_b, "").expect("open the gate");
    let o = s
        .server
        .wait_for("sessions", ORCHESTRATOR, STEP, |o| {
            delivered(o) == ["w-a", "w-b"] && o.pointer("/status/orchestrator/inFlight").is_none()
        })
        .await;
    reaches(&s.standin, &odir, "A-DONE", "w-a's report reaches the orchestrator").await;
    reaches(&s.standin, &odir, "B-DONE", "w-b's report reaches the orchestrator").await;

    // Each message once: every marker in one block of the conversation, each report once.
    let texts = newest_texts(&s.standin, &odir);
    let all: Vec<String> = texts.iter().flat_map(|t| markers(t)).collect();
    let batches = o["status"]["orchestrator"]["batches"].as_u64().expect("batches");
    assert_eq!(all.len() as u64, batches, "one marker per batch: {texts:#?}\n{o:#}");
    for m in &all {
        let holding = texts.iter().filter(|t| t.contains(m.as_str())).count();
        assert_eq!((holding, all.iter().filter(|x| *x == m).count()), (1, 1), "{m} repeated: {texts:#?}");
    }
    for needle in ["A-DONE", "B-DONE", "GOAL split the work"] {
        assert_eq!(texts.iter().map(|t| t.matches(needle).count()).sum::<usize>(), 1, "{needle}: {texts:#?}");
    }
    // The agents went on in tmux: none was started again.
    for name in [ORCHESTRATOR, "w-a", "w-b"] {
        let obj = object(&s.server, name).await;
        assert_eq!(restarts(&obj), 0, "{name}'s agent was started again: {obj:#}");
    }
    eprintln!("{batches} batch(es) delivered once each after {:?}: {all:?}", began.elapsed());
    let mut evs = events(&s.server, ORCHESTRATOR).await;
    evs.sort_by_key(|e| (e["firstTimestamp"].as_str().unwrap_or_default().to_string(), rv_num(e)));
    for e in evs {
        if !e["reason"].as_str().is_some_and(|r| r.starts_with("Orchestrator")) {
            eprintln!("  {}: {}", e["reason"], e["message"]);
        }
    }

    finish(&s.server, cleanup).await;
    eprintln!("the whole test took {:?}", began.elapsed());
}
