//! Real agent CLIs — Claude Code, Codex and aider, from npm and PyPI — run by the real `aoctl` in
//! tmux against a scripted model endpoint (e2e/model-standin/standin.py) that speaks their wire
//! formats: Anthropic Messages, OpenAI Responses and OpenAI chat completions, each streamed as
//! SSE. Nothing but the model is stood in. Each test checks, from the requests the stand-in
//! recorded, that the first prompt reached the model once, that the agent carried out a scripted
//! tool call (a file appears in the worktree), that many messages — single- and multi-line, some
//! sent while the model streams — each reached it exactly once and whole, that the session's
//! activity follows the stream (working, then idle), and that a restarted agent continues its
//! conversation.
//!
//! The CLIs are installed by the tests when missing, pinned, under `AOCTL_E2E_CLI_CACHE` (else
//! `$XDG_CACHE_HOME/aoctl-e2e-clis` or `~/.cache/aoctl-e2e-clis`, outside the checkout, so a fresh
//! clone does not install them again); the `@latest` launch tests resolve the newest published
//! version first.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{git_repo, Server, API};
use crate::lifecycle::{events, is_true, project, wait_all, workspace, Cleanup, Tmux};

pub(crate) const CLAUDE_VERSION: &str = "2.1.332";
const CODEX_VERSION: &str = "0.171.0";
const AIDER_VERSION: &str = "0.86.2";
/// How long one install may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a session gets to reach its prompt with the first task done.
const FIRST_TASK: Duration = Duration::from_secs(120);
/// How long a message gets to reach the model.
const ARRIVAL: Duration = Duration::from_secs(30);
/// How soon the session's activity must follow the stream.
const FOLLOW: Duration = Duration::from_secs(5);
/// Messages per agent after the first prompt (each is waited for at the model before the next is
/// sent, except those sent while it streams).
const MESSAGES: usize = 100;

/// The folder that holds installed agent CLIs.
pub(crate) fn cache() -> PathBuf {
    std::env::var_os("AOCTL_E2E_CLI_CACHE")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|p| !p.is_empty())
                .map(|c| PathBuf::from(c).join("aoctl-e2e-clis"))
        })
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/aoctl-e2e-clis")))
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("agent-clis"))
}

/// Runs `cmd` to completion within `timeout`; panics with its output when it fails.
#[track_caller]
fn run_bounded(cmd: Command, timeout: Duration, what: &str) -> String {
    let out = crate::harness::run_for(cmd, None, timeout);
    assert_eq!(out.code, 0, "{what} failed:\n{out}");
    out.stdout
}

/// The newest published version of an npm package.
fn npm_latest(package: &str) -> String {
    let mut cmd = Command::new("npm");
    cmd.args(["view", package, "version"]);
    run_bounded(cmd, Duration::from_secs(60), &format!("npm view {package} version")).trim().to_string()
}

/// The `.bin` folder of `package@version`, installed with npm first when missing.
pub(crate) fn npm_cli(package: &str, version: &str, binary: &str) -> PathBuf {
    let name = package.rsplit('/').next().unwrap_or(package);
    let prefix = cache().join(format!("{name}-{version}"));
    let bin = prefix.join("node_modules").join(".bin");
    if !bin.join(binary).exists() {
        std::fs::create_dir_all(&prefix).expect("create the npm prefix");
        let mut cmd = Command::new("npm");
        cmd.arg("install").arg("--prefix").arg(&prefix);
        cmd.args(["--no-audit", "--no-fund", "--loglevel=error", &format!("{package}@{version}")]);
        run_bounded(cmd, INSTALL_TIMEOUT, &format!("npm install {package}@{version}"));
    }
    bin
}

/// The `bin` folder of a virtualenv holding `aider-chat==version`, made first when missing.
fn aider_cli(version: &str) -> PathBuf {
    let venv = cache().join(format!("aider-{version}"));
    let bin = venv.join("bin");
    if !bin.join("aider").exists() {
        let mut cmd = Command::new("python3");
        cmd.args(["-m", "venv"]).arg(&venv);
        run_bounded(cmd, Duration::from_secs(120), "python3 -m venv");
        let mut cmd = Command::new(bin.join("pip"));
        cmd.args(["install", "-q", &format!("aider-chat=={version}")]);
        run_bounded(cmd, INSTALL_TIMEOUT, &format!("pip install aider-chat=={version}"));
    }
    bin
}

/// The scripted model endpoint, stopped when dropped. Its rules file (see standin.py) is
/// `model-rules.json` next to its log; while the file is missing it has no rules.
pub(crate) struct Standin {
    child: Child,
    log: PathBuf,
    rules: PathBuf,
    port: u16,
}

/// A tool's result as a later request of the conversation carried it back to the model.
#[derive(Clone, Debug)]
pub(crate) struct ToolResult {
    /// The tool called, as the model named it (`mcp__aoctl__spawn`), and the input it gave.
    pub(crate) tool: String,
    pub(crate) input: Value,
    pub(crate) is_error: bool,
    /// Its text blocks, joined by newlines.
    pub(crate) text: String,
}

impl Standin {
    fn start(dir: &Path) -> Standin {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/model-standin/standin.py");
        let log = dir.join("model-requests.jsonl");
        let rules = dir.join("model-rules.json");
        let mut child = Command::new("python3")
            .arg(script)
            .arg("--log")
            .arg(&log)
            .arg("--rules")
            .arg(&rules)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the model stand-in");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(20)).expect("the stand-in says where it listens");
        let port = line.trim().strip_prefix("listening ").and_then(|p| p.parse().ok()).expect("listening PORT");
        Standin { child, log, rules, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Replaces the rules at once (a temporary file renamed over them): a request reads either
    /// the old rules or the new ones, never a part.
    pub(crate) fn rules(&self, rules: &Value) {
        let tmp = self.rules.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(rules).expect("JSON")).expect("write the rules");
        std::fs::rename(&tmp, &self.rules).expect("put the rules in place");
    }

    /// Everything recorded so far.
    fn entries(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// The results of the tools the model called, each once, in the order they came back: read
    /// from the user messages of later requests, matched with the call by its id.
    pub(crate) fn tool_results(&self) -> Vec<ToolResult> {
        let mut calls: BTreeMap<String, (String, Value)> = BTreeMap::new();
        let mut out: Vec<(String, ToolResult)> = vec![];
        for r in self.main_requests() {
            for m in r["body"]["messages"].as_array().into_iter().flatten() {
                for b in m["content"].as_array().into_iter().flatten() {
                    match (m["role"].as_str(), b["type"].as_str()) {
                        (Some("assistant"), Some("tool_use")) => {
                            let id = b["id"].as_str().unwrap_or_default().to_string();
                            calls.insert(id, (b["name"].as_str().unwrap_or_default().to_string(), b["input"].clone()));
                        }
                        (Some("user"), Some("tool_result")) => {
                            let id = b["tool_use_id"].as_str().unwrap_or_default().to_string();
                            if out.iter().any(|(seen, _)| *seen == id) {
                                continue;
                            }
                            let text = match &b["content"] {
                                Value::String(s) => s.clone(),
                                Value::Array(parts) => {
                                    let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
                                    texts.join("\n")
                                }
                                _ => String::new(),
                            };
                            let (tool, input) = calls.get(&id).cloned().unwrap_or_default();
                            let is_error = b["is_error"].as_bool().unwrap_or(false);
                            out.push((id, ToolResult { tool, input, is_error, text }));
                        }
                        _ => {}
                    }
                }
            }
        }
        out.into_iter().map(|(_, r)| r).collect()
    }

    /// The requests of the agent's main conversation, oldest first: not the side requests (titles,
    /// commit messages) the CLIs also send.
    pub(crate) fn main_requests(&self) -> Vec<Value> {
        self.entries().into_iter().filter(|e| e["event"] == "request" && is_main(e)).collect()
    }

    /// Whether request `n` was answered completely.
    fn done(&self, n: u64) -> bool {
        self.entries().iter().any(|e| e["event"] == "done" && e["n"] == n)
    }

    /// Waits for the first main request whose newest user texts hold `needle`; its number.
    async fn arrival(&self, needle: &str, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.main_requests().iter().find(|r| user_texts(r).iter().any(|t| t.contains(needle))) {
                return r["n"].as_u64().expect("n");
            }
            assert!(Instant::now() < deadline, "{needle:?} did not reach the model within {timeout:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Standin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("==== model stand-in: requests (newest user text) and rules applied ====");
            for e in self.entries() {
                match e["event"].as_str() {
                    Some("request") => {
                        let text = user_texts(&e).last().cloned().unwrap_or_default();
                        let text: String = text.chars().take(160).collect();
                        let tools = e["body"]["tools"].as_array().map_or(0, Vec::len);
                        eprintln!("#{} {} ({tools} tools): {text:?}", e["n"], e["api"]);
                    }
                    Some("done") => {}
                    _ => {
                        let mut e = e.clone();
                        e.as_object_mut().map(|o| o.remove("t"));
                        eprintln!("#{} {e}", e["n"]);
                    }
                }
            }
            eprintln!("==== end of the stand-in's log ====");
        }
    }
}

fn is_main(request: &Value) -> bool {
    let body = &request["body"];
    match request["api"].as_str() {
        Some("chat") => {
            let first = body["messages"][0]["content"].as_str().unwrap_or_default();
            !first.contains("commit message")
        }
        _ => body["tools"].as_array().is_some_and(|t| !t.is_empty()),
    }
}

/// The user texts of a request's conversation, in order, one entry per text block.
pub(crate) fn user_texts(request: &Value) -> Vec<String> {
    let body = &request["body"];
    let mut out = vec![];
    let text_of = |content: &Value, out: &mut Vec<String>| match content {
        Value::String(s) => out.push(s.clone()),
        Value::Array(blocks) => {
            for b in blocks {
                if let Some(t) = b["text"].as_str() {
                    if matches!(b["type"].as_str(), Some("text" | "input_text") | None) {
                        out.push(t.to_string());
                    }
                }
            }
        }
        _ => {}
    };
    match request["api"].as_str() {
        Some("responses") => {
            for item in body["input"].as_array().into_iter().flatten() {
                if item["type"] == "message" && item["role"] == "user" {
                    text_of(&item["content"], &mut out);
                }
            }
        }
        _ => {
            for m in body["messages"].as_array().into_iter().flatten() {
                if m["role"] == "user" {
                    text_of(&m["content"], &mut out);
                }
            }
        }
    }
    out
}

/// The agent under test and how it is pointed at the stand-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Claude,
    Codex,
    Aider,
}

/// Its fields are dropped in order: the stand-in, whose log is in the server's folder, first.
pub(crate) struct Setup {
    pub(crate) standin: Standin,
    pub(crate) server: Server,
    /// The PATH the server was started with (`bin` first), for a restart to give it again.
    pub(crate) path: OsString,
}

/// A server whose agents find `bin` first on PATH, a project, and the stand-in.
pub(crate) async fn setup(bin: &Path) -> Setup {
    let mut path = vec![bin.to_path_buf()];
    path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    let path: OsString = std::env::join_paths(path).expect("PATH");
    let server = Server::start_with_env(&[("PATH", &path)]).await;
    let standin = Standin::start(server.tmp.path());
    let repo = git_repo(server.tmp.path(), "models", "main");
    server.create("projects", &project("models", &repo, json!({}))).await;
    Setup { server, standin, path }
}

/// The session's spec for `kind`: environment and arguments that point it at the stand-in.
pub(crate) fn spec_for(kind: Kind, s: &Setup, prompt: &str) -> Value {
    let url = s.standin.url();
    let (agent, env, args): (&str, BTreeMap<&str, String>, Vec<String>) = match kind {
        Kind::Claude => (
            "claude-code",
            BTreeMap::from([("ANTHROPIC_BASE_URL", url), ("ANTHROPIC_API_KEY", "sk-ant-standin-key".to_string())]),
            vec![],
        ),
        Kind::Codex => {
            let home = s.server.tmp.path().join("codex-home");
            std::fs::create_dir_all(&home).expect("CODEX_HOME");
            let config = format!(
                "model = \"gpt-5.1-codex\"\nmodel_provider = \"standin\"\n\n[model_providers.standin]\n\
                 name = \"standin\"\nbase_url = \"{url}/v1\"\nwire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n"
            );
            if !home.join("config.toml").exists() {
                std::fs::write(home.join("config.toml"), config).expect("write config.toml");
            }
            let home = home.to_string_lossy().into_owned();
            ("codex", BTreeMap::from([("CODEX_HOME", home), ("OPENAI_API_KEY", "sk-standin".to_string())]), vec![])
        }
        Kind::Aider => (
            "aider",
            BTreeMap::from([("OPENAI_API_KEY", "sk-standin".to_string()), ("OPENAI_API_BASE", format!("{url}/v1"))]),
            ["--model", "openai/standin-model", "--max-chat-history-tokens", "1000000", "--no-auto-lint"]
                .map(String::from)
                .to_vec(),
        ),
    };
    json!({"project": "models", "agent": agent, "prompt": prompt, "env": env, "agentArgs": args,
        "restartPolicy": "Always"})
}

async fn activity(server: &Server, name: &str) -> String {
    let obj = server.object("sessions", name).await.unwrap_or(Value::Null);
    obj.pointer("/status/activity/state").and_then(Value::as_str).unwrap_or_default().to_string()
}

/// Polls the session until its activity is `state`; how long that took.
async fn activity_becomes(server: &Server, name: &str, state: &str, timeout: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let now = activity(server, name).await;
        if now == state {
            return start.elapsed();
        }
        assert!(start.elapsed() < timeout, "activity of {name} is {now:?}, not {state:?}, after {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Types `text` into the session: through `aoctl send` (stdin) or the input API.
async fn send(server: &Server, name: &str, text: &str, via_cli: bool) {
    if via_cli {
        server.aoctl_stdin(&["send", name, "-"], text).ok();
    } else {
        let r = server.json("POST", &format!("{API}/sessions/{name}/input"), &json!({"text": text})).await;
        assert!(r.code < 300, "POST input: {} {}", r.code, r.text());
    }
}

/// How often `needle` occurs in the user texts of the newest main request.
fn occurrences(standin: &Standin, needle: &str) -> usize {
    let reqs = standin.main_requests();
    let last = reqs.last().expect("a main request");
    user_texts(last).iter().map(|t| t.matches(needle).count()).sum()
}

/// The whole scenario for one agent.
async fn scenario(kind: Kind, bin: PathBuf) {
    let began = Instant::now();
    let s = setup(&bin).await;
    let cleanup = Cleanup::new(&s.server);
    let name = "agent";
    let ws = workspace(&s.server, "models", name);
    let word = format!("made-by-{kind:?}").to_lowercase();
    let target = match kind {
        // Claude Code's Write tool takes an absolute path.
        Kind::Claude => ws.join("from-model.txt").to_string_lossy().into_owned(),
        _ => "from-model.txt".to_string(),
    };
    let prompt = format!("first-task create-file {target} {word}");
    let manifest = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
        "spec": spec_for(kind, &s, &prompt)});
    s.server.create("sessions", &manifest).await;

    // The first prompt reaches the model once, and the scripted tool call writes the file.
    let idle = |o: &Value| is_true(o, "Ready") && o.pointer("/status/activity/state") == Some(&json!("idle"));
    let waited = wait_all(&s.server, &[name], FIRST_TASK, "Ready and idle", |o| {
        idle(o) && std::fs::read_to_string(ws.join("from-model.txt")).is_ok_and(|t| t.trim() == word)
    })
    .await;
    let started = began.elapsed();
    assert_eq!(occurrences(&s.standin, "first-task"), 1, "the first prompt reaches the model exactly once");
    let answered: Vec<String> = events(&s.server, name)
        .await
        .into_iter()
        .filter(|e| e["reason"] == "DialogAnswered")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect();
    eprintln!("{kind:?}: ready with the first task done after {started:?}; dialogs answered: {answered:?}");
    drop(waited);

    // Activity follows the stream: working while it streams, idle soon after it ends.
    send(&s.server, name, "slow 8 activity-probe", true).await;
    let n = s.standin.arrival("activity-probe", ARRIVAL).await;
    let to_working = activity_becomes(&s.server, name, "working", FOLLOW).await;
    assert!(!s.standin.done(n), "the session was seen working only after the stream ended");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s.standin.done(n) {
        assert!(Instant::now() < deadline, "the slow answer did not end");
        assert_eq!(activity(&s.server, name).await, "working", "working for as long as the model streams");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let to_idle = activity_becomes(&s.server, name, "idle", FOLLOW).await;
    eprintln!("{kind:?}: working {to_working:?} after the stream began, idle {to_idle:?} after it ended");

    // Many messages, each once and whole: single- and multi-line, by CLI and API, some while the
    // model is streaming a slow answer.
    let sent_at = Instant::now();
    let mut texts = vec![];
    let mut i = 0;
    while i < MESSAGES {
        let text = if i % 4 == 1 {
            format!("note m{i:03}x first line\nsecond line of m{i:03}x\n  indented third line of m{i:03}x")
        } else {
            format!("note m{i:03}x one line")
        };
        if i % 20 == 10 {
            // A slow answer, then two messages while it streams.
            let slow = format!("slow 4 m{i:03}x");
            send(&s.server, name, &slow, i % 2 == 0).await;
            s.standin.arrival(&format!("m{i:03}x"), ARRIVAL).await;
            texts.push(slow);
            i += 1;
            for _ in 0..2 {
                let during = format!("while streaming m{i:03}x\nsecond line m{i:03}x");
                send(&s.server, name, &during, i % 2 == 0).await;
                texts.push(during);
                i += 1;
            }
            for t in &texts[texts.len() - 2..] {
                let token = t.split_whitespace().nth(2).expect("token").to_string();
                s.standin.arrival(&token, ARRIVAL).await;
            }
            continue;
        }
        send(&s.server, name, &text, i % 2 == 0).await;
        s.standin.arrival(&format!("m{i:03}x"), ARRIVAL).await;
        texts.push(text);
        i += 1;
    }
    activity_becomes(&s.server, name, "idle", Duration::from_secs(30)).await;
    let per_message = sent_at.elapsed() / texts.len() as u32;
    let last = s.standin.main_requests().pop().expect("a main request");
    let blocks = user_texts(&last);
    for (k, text) in texts.iter().enumerate() {
        let token = format!("m{:03}x", text_index(text));
        let holding: Vec<&String> = blocks.iter().filter(|b| b.contains(&token)).collect();
        assert!(!holding.is_empty(), "message {k} ({text:?}) is missing from the conversation");
        let whole = holding.iter().filter(|b| b.contains(text.as_str())).count();
        let first_line = text.lines().next().unwrap_or_default();
        let times: usize = blocks.iter().map(|b| b.matches(first_line).count()).sum();
        assert!(whole >= 1, "message {k} did not arrive whole: {text:?} vs {holding:#?}");
        assert_eq!(times, 1, "message {k} ({text:?}) reached the model {times} times");
    }
    eprintln!("{kind:?}: {} messages, {per_message:?} each", texts.len());

    // A restart continues the conversation: the agent's tmux session goes away (as after a
    // reboot); the controller starts it again with the CLI's resume arguments.
    let restarted_at = Instant::now();
    let tmux = Tmux::of(&s.server);
    let out = tmux.run(&["kill-session", "-t", &format!("={name}")]);
    assert!(out.status.success(), "kill-session: {}", String::from_utf8_lossy(&out.stderr));
    let continuing = |e: &Value| {
        e["reason"] == "Started"
            && e["message"].as_str().is_some_and(|m| m.contains("continuing its last conversation"))
    };
    let deadline = Instant::now() + FIRST_TASK;
    let resumed = loop {
        if let Some(e) = events(&s.server, name).await.into_iter().find(continuing) {
            break e;
        }
        assert!(
            Instant::now() < deadline,
            "no Started event continuing the conversation: {:#?}",
            events(&s.server, name).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let restarted = |o: &Value| o.pointer("/status/runtime/restarts").and_then(Value::as_u64).unwrap_or(0) >= 1;
    wait_all(&s.server, &[name], FIRST_TASK, "restarted, Ready and idle", |o| restarted(o) && idle(o)).await;
    eprintln!("{kind:?}: restarted after {:?}: {}", restarted_at.elapsed(), resumed["message"]);
    send(&s.server, name, "after-restart question", true).await;
    let n = s.standin.arrival("after-restart", ARRIVAL).await;
    let req = s.standin.main_requests().into_iter().find(|r| r["n"] == n).expect("the request");
    let history = user_texts(&req).join("\n");
    assert!(
        history.contains("first-task") && history.contains(&texts[texts.len() - 1]),
        "the first request after the restart carries the earlier conversation:\n{history}"
    );
    // Aider's --restore-chat-history rebuilds the history from its markdown log, where the first
    // prompt shows up twice (seen with 0.86.2); the prompt is not typed again either way.
    if kind != Kind::Aider {
        assert_eq!(occurrences(&s.standin, "first-task"), 1, "the first prompt is not typed again on restart");
    }
    cleanup.finish();
    eprintln!("{kind:?}: the whole test took {:?}", began.elapsed());
}

/// The number `NNN` in a message's `mNNNx` token.
fn text_index(text: &str) -> usize {
    let at = text.find('m').expect("a token");
    let rest = &text[at..];
    let at = rest.find(|c: char| c.is_ascii_digit()).expect("digits");
    rest[at..at + 3].parse().expect("a number")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_works_against_a_scripted_model() {
    scenario(Kind::Claude, npm_cli("@anthropic-ai/claude-code", CLAUDE_VERSION, "claude")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_works_against_a_scripted_model() {
    scenario(Kind::Codex, npm_cli("@openai/codex", CODEX_VERSION, "codex")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aider_works_against_a_scripted_model() {
    scenario(Kind::Aider, aider_cli(AIDER_VERSION)).await;
}

/// The newest published version reaches its prompt with its first-run screens answered, and its
/// first prompt reaches the model once.
async fn latest_launches(kind: Kind, bin: PathBuf) {
    let s = setup(&bin).await;
    let cleanup = Cleanup::new(&s.server);
    let manifest = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": "latest"},
        "spec": spec_for(kind, &s, "latest-launch hello")});
    s.server.create("sessions", &manifest).await;
    let idle = |o: &Value| is_true(o, "Ready") && o.pointer("/status/activity/state") == Some(&json!("idle"));
    wait_all(&s.server, &["latest"], Duration::from_secs(90), "Ready and idle", idle).await;
    s.standin.arrival("latest-launch", ARRIVAL).await;
    assert_eq!(occurrences(&s.standin, "latest-launch"), 1);
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_latest_reaches_its_prompt() {
    let version = npm_latest("@anthropic-ai/claude-code");
    eprintln!("claude-code@latest is {version}");
    latest_launches(Kind::Claude, npm_cli("@anthropic-ai/claude-code", &version, "claude")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_latest_reaches_its_prompt() {
    let version = npm_latest("@openai/codex");
    eprintln!("codex@latest is {version}");
    latest_launches(Kind::Codex, npm_cli("@openai/codex", &version, "codex")).await;
}
