//! A real agent CLI launched through its adapter: Claude Code from npm, started by a Session with
//! `agent: claude-code` in tmux, shows its own UI in the session's worktree. No network is used.
//!
//! The pinned package is installed with npm into the agent CLI cache the model tests use (outside
//! the checkout) when it is missing; an install that fails fails the test.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{git_repo, Server};
use crate::lifecycle::{event, eventually, is_true, project, restarts, wait_all, workspace, Cleanup, Tmux, READY};

const PACKAGE: &str = "@anthropic-ai/claude-code";
/// The folder holding the `claude` command of the pinned version, installed first when missing.
fn claude_bin() -> PathBuf {
    let bin = crate::model_agents::npm_cli(PACKAGE, crate::model_agents::CLAUDE_VERSION, "claude");
    let version = Command::new(bin.join("claude")).arg("--version").stdin(Stdio::null()).output();
    let version = version.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    assert!(version.contains("Claude Code"), "{} --version printed {version:?}", bin.join("claude").display());
    bin
}

/// A process's environment variable, from /proc.
fn environ_var(pid: u32, name: &str) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{name}=");
    raw.split(|b| *b == 0).map(String::from_utf8_lossy).find_map(|kv| kv.strip_prefix(&prefix).map(str::to_string))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_starts_in_its_worktree() {
    let bin = claude_bin();
    let mut path = vec![bin.clone()];
    path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    let path: OsString = std::env::join_paths(path).expect("PATH");
    let server = Server::start_with_env(&[("PATH", &path)]).await;
    let cleanup = Cleanup::new(&server);
    let tmux = Tmux::of(&server);
    // A user who has used Claude Code before: in a brand-new HOME it first runs an onboarding that
    // needs Anthropic's servers, and exits when they cannot be reached.
    let profile = json!({"hasCompletedOnboarding": true, "theme": "dark"});
    std::fs::write(server.home.join(".claude.json"), profile.to_string()).expect("write ~/.claude.json");
    let repo = git_repo(server.tmp.path(), "real", "main");
    server.create("projects", &project("real", &repo, json!({}))).await;
    let s = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": "claude"},
        "spec": {"project": "real", "agent": "claude-code"}});
    server.create("sessions", &s).await;

    let idle = |o: &Value| is_true(o, "Ready") && o.pointer("/status/activity/state") == Some(&json!("idle"));
    let obj = wait_all(&server, &["claude"], READY, "Ready and idle at Claude Code's prompt", idle).await.remove(0);
    let ws = workspace(&server, "real", "claude");
    let ws_text = ws.to_str().expect("UTF-8 path");
    let screen = eventually(Duration::from_secs(30), "Claude Code's UI on the tmux screen", || {
        let screen = tmux.capture("claude");
        let ui = screen.contains("Claude Code") && screen.contains("bypass permissions on");
        if ui && screen.contains(ws_text) {
            Ok(screen)
        } else {
            Err(screen)
        }
    })
    .await;

    let pid = tmux.pane_pid("claude").expect("the pane's pid");
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).expect("the agent's working directory");
    assert_eq!(cwd, ws, "Claude Code runs in the session's worktree; screen:\n{screen}");
    let argv = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    let argv: Vec<String> = argv.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    assert_eq!(argv[0], "claude", "{argv:?}");
    assert!(argv.iter().any(|a| a == "--dangerously-skip-permissions"), "permissions: bypass is the default: {argv:?}");
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("exe");
    let installed = bin.join("claude").canonicalize().expect("installed claude");
    assert_eq!(exe, installed, "the claude the test installed");
    assert_eq!(environ_var(pid, "AOCTL_SESSION").as_deref(), Some("claude"));
    assert_eq!(environ_var(pid, "DISABLE_AUTOUPDATER").as_deref(), Some("1"));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(environ_var(pid, "IS_SANDBOX").as_deref(), Some("1"), "root needs IS_SANDBOX for bypass");
    }

    assert_eq!(restarts(&obj), 0, "{obj:#}");
    let started = event(&server, "claude", "Started").await.expect("a Started event");
    assert!(started["message"].as_str().is_some_and(|m| m.starts_with("claude in tmux runtime")), "{started:#}");
    let settings: Value =
        serde_json::from_slice(&std::fs::read(server.home.join(".claude.json")).expect("~/.claude.json")).unwrap();
    let root = server.data_dir.join("workspaces");
    let trusted = settings["projects"][root.to_str().unwrap()]["hasTrustDialogAccepted"].clone();
    assert_eq!(trusted, json!(true), "the workspaces folder is pre-trusted: {settings:#}");
    // `aoctl logs` shows the same screen as text; spacing aside, since the UI places words with
    // cursor moves.
    let out = server.aoctl(&["logs", "claude"]);
    out.ok();
    let squashed: String = out.stdout.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(squashed.contains("ClaudeCode"), "`aoctl logs claude` does not show Claude Code's screen:\n{out}");
    cleanup.finish();
}
