//! A newcomer's first hour, end to end: an agent CLI that is not installed (named, with the
//! command that installs it, and started once it appears), an agent that dies at once (its last
//! lines in the condition and in `aoctl logs`), an agent at its login screen (nothing typed into
//! it until a person logs it in, then it goes on by itself), the effective agent in
//! `aoctl get sessions`, and `aoctl up URL` next to clones of other origins and unfinished ones.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{git_repo, Server};
use crate::lifecycle::{condition, events, git, git_out, phase, project, restarts, transcript, Tmux};

/// The scripted stand-in for the `claude` CLI.
const CLAUDE_LIKE: &str = include_str!("../agents/claude-like");
/// How long a session gets to reach a state on a busy two-core machine.
const WAIT: Duration = Duration::from_secs(60);
/// The pinned claude-code package the missing-agent message must name.
const CLAUDE_PACKAGE: &str = "@anthropic-ai/claude-code@";

/// A folder for programs, and a PATH of it and the system's folders (where git and tmux are), with
/// nothing of the test machine's own agent CLIs.
fn bin_path() -> (tempfile::TempDir, OsString) {
    let bin = tempfile::Builder::new().prefix("aoctl-e2e-bin-").tempdir().expect("tempdir");
    let mut path = OsString::from(bin.path());
    path.push(":/usr/local/bin:/usr/bin:/bin");
    (bin, path)
}

/// Installs the scripted `claude` into `bin`.
fn install_claude(bin: &Path) {
    let p = bin.join("claude");
    fs::write(&p, CLAUDE_LIKE).expect("write claude");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).expect("chmod claude");
}

/// A Session of project `repo` without an agent of its own: it runs the default one.
fn plain_session(name: &str, prompt: &str) -> Value {
    json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
        "spec": {"project": "repo", "prompt": prompt}})
}

/// The `AgentReady` condition's reason, status and message.
fn agent_ready(obj: &Value) -> (String, String, String) {
    let c = condition(obj, "AgentReady").cloned().unwrap_or(Value::Null);
    let f = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (f("status"), f("reason"), f("message"))
}

/// Polls session `name` until `pred` holds; the object.
async fn wait(server: &Server, name: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let obj = server.object("sessions", name).await.unwrap_or(Value::Null);
        if pred(&obj) {
            return obj;
        }
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}; last seen: {:#}", obj["status"]);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The row of `aoctl get sessions` for `name`.
fn table_row(server: &Server, name: &str) -> String {
    let out = server.aoctl(&["get", "sessions"]);
    out.ok();
    out.stdout.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_agent_cli_is_named_with_its_install_command_and_starts_once_it_appears() {
    let (bin, path) = bin_path();
    // A key, so the CLI goes to work once it is there rather than to its login screen.
    let server = Server::start_with_env(&[("PATH", &path), ("ANTHROPIC_API_KEY", "sk-ant-scripted".as_ref())]).await;
    let repo = git_repo(server.tmp.path(), "repo", "main");
    server.create("projects", &project("repo", &repo, json!({}))).await;
    server.create("sessions", &plain_session("haiku", "write a haiku")).await;

    let obj = wait(&server, "haiku", "AgentNotFound", |o| agent_ready(o).1 == "AgentNotFound").await;
    let (status, _, message) = agent_ready(&obj);
    assert_eq!(status, "False");
    assert!(message.contains("`claude`"), "the message names the program: {message}");
    assert!(message.contains(CLAUDE_PACKAGE), "the message says how to install it: {message}");
    assert_eq!(phase(&obj), "NeedsInput", "a person has to install it");
    assert!(obj.pointer("/status/runtime").is_none(), "nothing was started: {:#}", obj["status"]);
    assert!(Tmux::of(&server).sessions().is_empty(), "no tmux session was started");
    // The table names the agent the session runs, though neither it nor its project names one.
    let row = table_row(&server, "haiku");
    assert!(row.contains("claude-code") && row.contains("NeedsInput"), "{row}");
    let described = server.aoctl(&["describe", "session", "haiku"]);
    assert!(described.ok().stdout.contains("AgentNotFound"), "{}", described.stdout);
    // `aoctl spawn --wait` says so at once, with the fix, and fails.
    let spawned = server.aoctl(&["spawn", "--project", "repo", "--name", "second", "--wait=30s", "another task"]);
    assert_ne!(spawned.code, 0, "{spawned:?}");
    let said = format!("{}{}", spawned.stdout, spawned.stderr);
    assert!(said.contains("AgentNotFound") && said.contains(CLAUDE_PACKAGE), "{said}");
    // Told once, not at every look.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let told = events(&server, "haiku").await.iter().filter(|e| e["reason"] == "AgentNotFound").count();
    assert_eq!(told, 1, "one AgentNotFound event");

    // Installed: `aoctl reconcile` looks again at once, and it starts with its prompt.
    install_claude(bin.path());
    server.aoctl(&["reconcile", "session", "haiku"]).ok();
    let obj = wait(&server, "haiku", "the agent started", |o| agent_ready(o).1 == "AgentFound").await;
    assert_eq!(restarts(&obj), 0);
    let branch = "repo/haiku";
    let deadline = Instant::now() + WAIT;
    while git_out(&repo, &["log", "-1", "--format=%s", branch]).as_deref() != Some("haiku: write a haiku") {
        assert!(Instant::now() < deadline, "the agent's commit: {}", transcript(&server, "haiku"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_dies_at_once_shows_its_last_lines_and_is_not_restarted_in_a_tight_loop() {
    let server = Server::start().await;
    let repo = git_repo(server.tmp.path(), "repo", "main");
    server.create("projects", &project("repo", &repo, json!({}))).await;
    // A program that prints why it cannot go on, and one whose shell cannot find what it runs.
    let login = "echo 'agent 1.0'; echo 'Error: Please log in first (run: agent login)' >&2; exit 1";
    let missing = "echo starting; exec surely-no-such-program-aoctl --go";
    for (name, script) in [("login", login), ("missing", missing)] {
        let s = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
            "spec": {"project": "repo", "prompt": "go", "agent": {"command": ["/bin/sh", "-c", script]}}});
        server.create("sessions", &s).await;
    }
    // Exit code 127 is a shell's (or a container init's) "not found": that program is missing.
    let cases = [
        ("login", "Please log in first (run: agent login)", "AgentExitedAtStart"),
        ("missing", "surely-no-such-program-aoctl", "AgentNotFound"),
    ];
    let ready_says =
        |o: &Value| condition(o, "Ready").and_then(|c| c["message"].as_str()).unwrap_or_default().to_string();
    for (name, line, reason) in cases {
        // Between a restart and the next exit, Ready speaks of the new start; once the agent is down
        // again, both conditions quote its last lines.
        let obj = wait(&server, name, reason, |o| agent_ready(o).1 == reason && ready_says(o).contains(line)).await;
        let (_, _, message) = agent_ready(&obj);
        assert!(message.contains(line), "{name}: the condition quotes its last lines: {message}");
        let logs = server.aoctl(&["logs", name]);
        assert!(logs.ok().stdout.contains(line), "{name}: aoctl logs shows it: {}", logs.stdout);
    }
    // Backed off: within 20 s, a handful of restarts, not one per reconcile; the missing program is
    // looked for again a minute later, not at once.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let obj = server.object("sessions", "login").await.expect("session");
    assert!(restarts(&obj) <= 5, "restarts back off: {}", restarts(&obj));
    let obj = server.object("sessions", "missing").await.expect("session");
    assert_eq!(restarts(&obj), 0, "a missing program is not restarted in a loop");
    assert_eq!(agent_ready(&obj).1, "AgentNotFound");
    assert_eq!(phase(&obj), "NeedsInput");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_at_its_login_screen_gets_nothing_typed_and_goes_on_once_logged_in() {
    let (bin, path) = bin_path();
    let server = Server::start_with_env(&[("PATH", &path)]).await;
    install_claude(bin.path());
    let repo = git_repo(server.tmp.path(), "repo", "main");
    server.create("projects", &project("repo", &repo, json!({}))).await;
    server.create("sessions", &plain_session("fresh", "write the notes")).await;

    let obj = wait(&server, "fresh", "AgentNotLoggedIn", |o| agent_ready(o).1 == "AgentNotLoggedIn").await;
    let (_, _, message) = agent_ready(&obj);
    assert!(message.contains("/login"), "the message says how to log in: {message}");
    assert!(message.contains("aoctl attach fresh"), "and where: {message}");
    assert_eq!(obj.pointer("/status/activity/state").and_then(Value::as_str), Some("needs-input"));
    assert_eq!(phase(&obj), "NeedsInput");
    // A message sent meanwhile waits: nothing is typed into the login screen.
    server.aoctl(&["send", "fresh", "also add a title"]).ok();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let screen = Tmux::of(&server).capture("fresh");
    assert!(!screen.contains("also add a title"), "typed into the login screen:\n{screen}");
    assert!(!transcript(&server, "fresh").contains("also add a title"));
    let told = events(&server, "fresh").await.iter().filter(|e| e["reason"] == "AgentNotLoggedIn").count();
    assert_eq!(told, 1, "one AgentNotLoggedIn event");

    // A person logs it in through its terminal, as `aoctl attach` would let them.
    let tmux = Tmux::of(&server);
    assert!(tmux.run(&["send-keys", "-t", "=fresh:", "-l", "/login"]).status.success());
    assert!(tmux.run(&["send-keys", "-t", "=fresh:", "Enter"]).status.success());
    wait(&server, "fresh", "logged in", |o| agent_ready(o).1 == "AgentFound").await;
    let branch = "repo/fresh";
    let deadline = Instant::now() + WAIT;
    loop {
        let log = git_out(&repo, &["log", "--format=%s", branch]).unwrap_or_default();
        if log.contains("fresh: write the notes") && log.contains("fresh: also add a title") {
            break;
        }
        assert!(Instant::now() < deadline, "the prompt, then the sent message, after login: {log}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let order = git(&repo, &["log", "--reverse", "--format=%s", branch]);
    let first = order.find("write the notes").expect("prompt");
    let second = order.find("also add a title").expect("message");
    assert!(first < second, "the first prompt comes first: {order}");
    assert!(events(&server, "fresh").await.iter().any(|e| e["reason"] == "LoggedIn"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_url_reuses_its_own_clone_and_never_another_origins_or_an_unfinished_one() {
    let server = Server::start().await;
    let src = git_repo(server.tmp.path(), "src-a", "main");
    // Two bare repositories both called `tool.git`, in different folders.
    let (a, b) = (server.tmp.path().join("a/tool.git"), server.tmp.path().join("b/tool.git"));
    for bare in [&a, &b] {
        fs::create_dir_all(bare.parent().unwrap()).unwrap();
        git(server.tmp.path(), &["clone", "-q", "--bare", src.to_str().unwrap(), bare.to_str().unwrap()]);
    }
    let url = |p: &Path| format!("file://{}", p.display());
    let repos = server.data_dir.join("repos");

    let first = server.aoctl(&["up", &url(&a)]);
    assert!(first.ok().stdout.contains("cloned"), "{}", first.stdout);
    assert!(repos.join("tool/.git").is_dir());
    let again = server.aoctl(&["up", &url(&a)]);
    assert!(again.ok().stdout.contains("using the clone at"), "{}", again.stdout);
    // Another origin of the same name is cloned beside it, and becomes a project of its own.
    let other = server.aoctl(&["up", &url(&b)]);
    other.ok();
    assert!(other.stdout.contains("not reused"), "{}", other.stdout);
    assert_eq!(git_out(&repos.join("tool-2"), &["remote", "get-url", "origin"]), Some(url(&b)));
    assert_eq!(git_out(&repos.join("tool"), &["remote", "get-url", "origin"]), Some(url(&a)));
    for p in ["tool", "tool-2"] {
        assert!(server.object("projects", p).await.is_some(), "project {p}");
    }
    // A folder that is no finished clone is refused, named, and left as it was.
    let c = server.tmp.path().join("c/stuff.git");
    fs::create_dir_all(c.parent().unwrap()).unwrap();
    git(server.tmp.path(), &["clone", "-q", "--bare", src.to_str().unwrap(), c.to_str().unwrap()]);
    fs::create_dir_all(repos.join("stuff/half")).unwrap();
    let refused = server.aoctl(&["up", &url(&c)]);
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(refused.stderr.contains(&repos.join("stuff").display().to_string()), "{}", refused.stderr);
    assert!(refused.stderr.contains("no finished clone"), "{}", refused.stderr);
    assert!(repos.join("stuff/half").is_dir());
    assert!(server.object("projects", "stuff").await.is_none());
    // An interrupted clone leaves nothing where a finished one is looked for.
    let d = server.tmp.path().join("d/gone.git");
    let failed = server.aoctl(&["up", &url(&d)]);
    assert_ne!(failed.code, 0);
    assert!(!repos.join("gone").exists() && !repos.join(".gone.partial").exists());
}
