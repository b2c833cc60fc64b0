//! `aoctl doctor` against a real server, with a PATH the test controls (a fake `tmux` and `git`
//! that print versions, a scripted `claude` that prints the pinned one): everything passes, a
//! missing agent CLI fails with its install command, a server that is down fails with `aoctl up`,
//! and a GitHub project's token is checked against the GitHub stand-in, its budget shown.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::harness::{run, Out, Server};
use crate::standin::{Gh, REPO, TOKEN};

/// Every check a doctor run names when the server has no projects.
const NAMES: &[&str] = &[
    "tmux",
    "git",
    "data-dir",
    "token-file",
    "server",
    "server-token",
    "agent:claude-code",
    "login:claude-code",
    "docker",
    "forge",
    "webhooks",
];

/// The version Claude Code's row was checked against, or a stand-in one for a row without it.
fn pinned() -> &'static str {
    claude().install.map_or("2.1.332", |i| i.version)
}

fn claude() -> &'static aoctl_agents::Adapter {
    aoctl_agents::builtin("claude-code").expect("the claude-code row")
}

fn script(dir: &Path, name: &str, body: &str) {
    let file = dir.join(name);
    fs::write(&file, format!("#!/bin/sh\n{body}\n")).expect("write a script");
    fs::set_permissions(&file, fs::Permissions::from_mode(0o755)).expect("make it executable");
}

/// A folder for PATH with a `tmux` and a `git` that print their versions, and with `claude` a
/// scripted Claude Code that prints the pinned version.
fn bin_dir(parent: &Path, claude: bool) -> PathBuf {
    let dir = parent.join(if claude { "bin" } else { "bin-without-claude" });
    fs::create_dir_all(&dir).expect("create the bin folder");
    script(&dir, "tmux", "echo 'tmux 3.4'");
    script(&dir, "git", "echo 'git version 2.45.2'");
    if claude {
        script(&dir, "claude", &format!("echo '{} (Claude Code)'", pinned()));
    }
    dir
}

/// `aoctl doctor ARGS` against `server` with `bin` as the whole PATH.
fn doctor(server: &Server, bin: &Path, args: &[&str]) -> Out {
    let mut cmd = server.cli();
    cmd.env("PATH", bin).arg("doctor").args(args);
    run(cmd, None)
}

/// The line that starts with `prefix`, and the one after it.
#[track_caller]
fn line_and_next<'a>(out: &'a Out, prefix: &str) -> (&'a str, &'a str) {
    let lines: Vec<&str> = out.stdout.lines().collect();
    let i = lines.iter().position(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no line `{prefix}…`:\n{out}"));
    (lines[i], lines.get(i + 1).copied().unwrap_or_default())
}

/// The checks of a `-o json` document, by name.
#[track_caller]
fn checks(out: &Out) -> Vec<Value> {
    let doc: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"));
    let checks = doc["checks"].as_array().cloned().unwrap_or_else(|| panic!("no checks:\n{out}"));
    assert_eq!(doc["ok"], out.code == 0, "`ok` says what the exit status says:\n{out}");
    for c in &checks {
        assert!(["ok", "warn", "fail", "skip"].contains(&c["status"].as_str().unwrap_or_default()), "{c}");
        assert!(!c["detail"].as_str().unwrap_or_default().is_empty(), "{c}");
        assert!(c.get("fix").is_some(), "every check has a fix field: {c}");
    }
    checks
}

#[track_caller]
fn named<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    checks.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no check `{name}`: {checks:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_passes_when_everything_is_there() {
    let server = Server::start().await;
    let bin = bin_dir(server.tmp.path(), true);
    let out = doctor(&server, &bin, &[]);
    out.ok();
    let has = |l: &str| assert!(out.stdout.lines().any(|x| x == l), "expected the line `{l}`:\n{out}");
    has("ok    tmux 3.4");
    has("ok    git 2.45.2");
    let claude = bin.join("claude");
    has(&format!("ok    claude-code {} ({})", pinned(), claude.display()));
    let (server_line, _) = line_and_next(&out, "ok    server ");
    assert!(server_line.ends_with(&format!("at {}", server.base)), "{server_line}");
    line_and_next(&out, "ok    the server takes the token (0 project(s), 0 session(s))");
    line_and_next(&out, &format!("ok    token file {} has mode 0600", server.data_dir.join("token").display()));
    assert!(!out.stdout.contains("\x1b["), "no colour when stdout is not a terminal:\n{out}");

    let out = doctor(&server, &bin, &["-o", "json"]);
    out.ok();
    let checks = checks(&out);
    for name in NAMES {
        named(&checks, name);
    }
    assert_eq!(named(&checks, "tmux")["status"], "ok");
    assert_eq!(named(&checks, "agent:claude-code")["status"], "ok");
    assert_eq!(named(&checks, "docker")["status"], "skip", "no session uses docker");
    assert_eq!(named(&checks, "forge")["status"], "skip", "no project has a forge");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_fails_without_the_agent_cli_and_says_how_to_install_it() {
    let server = Server::start().await;
    let bin = bin_dir(server.tmp.path(), false);
    let out = doctor(&server, &bin, &[]);
    out.code(1);
    let (line, fix) = line_and_next(&out, "fail  claude-code:");
    assert_eq!(line, "fail  claude-code: `claude` is not on PATH", "{out}");
    match claude().install {
        Some(i) => {
            assert_eq!(fix, format!("      fix: {}", i.command()), "{out}");
            assert!(fix.contains(&format!("@anthropic-ai/claude-code@{}", i.version)), "{out}");
        }
        None => assert_eq!(fix, "      fix: no registry ships it; see docs/agents.md", "{out}"),
    }
    let out = doctor(&server, &bin, &["-o", "json"]);
    out.code(1);
    let checks = checks(&out);
    let c = named(&checks, "agent:claude-code");
    assert_eq!(c["status"], "fail");
    assert_eq!(c["detail"], "claude-code: `claude` is not on PATH");
    // The other checks still pass: one missing CLI is the only failure.
    let failed: Vec<&Value> = checks.iter().filter(|c| c["status"] == "fail").collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_says_to_start_a_server_that_is_down() {
    let mut server = Server::start().await;
    server.kill9();
    let bin = bin_dir(server.tmp.path(), true);
    let started = std::time::Instant::now();
    let out = doctor(&server, &bin, &[]);
    out.code(1);
    let (line, fix) = line_and_next(&out, "fail  no server answers at ");
    assert!(line.starts_with(&format!("fail  no server answers at {}", server.base)), "{out}");
    assert_eq!(fix, "      fix: aoctl up", "{out}");
    line_and_next(&out, "skip  token: no server");
    // Without the server's projects, the default agent is the one checked.
    line_and_next(&out, &format!("ok    claude-code {}", pinned()));
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "took {:?}", started.elapsed());
    let checks = checks(&doctor(&server, &bin, &["-o", "json"]));
    assert_eq!(named(&checks, "server")["fix"], "aoctl up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_a_github_token_and_shows_its_budget() {
    let gh = Gh::start(REPO, false).await;
    gh.server.create("projects", &gh.project("widgets", REPO, "30s", json!({}))).await;
    let bin = bin_dir(gh.server.tmp.path(), true);
    let run_doctor = |args: &[&str]| {
        let mut cmd = gh.server.cli();
        cmd.env("PATH", &bin).env("GITHUB_TOKEN", TOKEN).env_remove("AOCTL_WEBHOOK_SECRET");
        cmd.arg("doctor").args(args);
        run(cmd, None)
    };
    let out = run_doctor(&[]);
    let (line, _) = line_and_next(&out, "ok    widgets (GitHub ");
    let budget = regex::Regex::new(r"; budget core (\d+)/(\d+), graphql (\d+)/(\d+) left$").unwrap();
    let caps = budget.captures(line).unwrap_or_else(|| panic!("no budget on the forge line:\n{out}"));
    let n = |i: usize| caps[i].parse::<u64>().unwrap();
    assert!(n(1) <= n(2) && n(2) > 0 && n(3) <= n(4) && n(4) > 0, "{line}");
    assert!(line.contains(&format!("GitHub {}): GITHUB_TOKEN is ", gh.standin.base)), "{line}");
    // The stand-in sends no X-OAuth-Scopes, as GitHub does for fine-grained tokens.
    assert!(line.contains("fine-grained token"), "{line}");
    let (hook, fix) = line_and_next(&out, "warn  widgets: AOCTL_WEBHOOK_SECRET is not set here");
    assert!(hook.ends_with("polling only (slower, costs budget)"), "{out}");
    assert!(fix.ends_with("docs/github.md#webhooks"), "{out}");
    out.ok();

    let checks = checks(&run_doctor(&["-o", "json"]));
    assert_eq!(named(&checks, "forge:widgets")["status"], "ok");
    assert_eq!(named(&checks, "webhooks:widgets")["status"], "warn");

    // A token the stand-in does not know is refused.
    let mut cmd = gh.server.cli();
    cmd.env("PATH", &bin).env("GITHUB_TOKEN", "ghp_notTheStandInsToken").arg("doctor");
    let out = run(cmd, None);
    out.code(1);
    let (line, fix) = line_and_next(&out, "fail  widgets (GitHub ");
    assert!(line.ends_with("the token in GITHUB_TOKEN is refused (401)"), "{out}");
    assert!(fix.contains("set GITHUB_TOKEN"), "{out}");
}
