//! The README's quick start ("Use it on your repository"), run as written: its shell block is read
//! from README.md and run by `sh -e` in a fresh HOME holding `~/src/my-repo`, with the `aoctl`
//! under test and a scripted `claude` (e2e/agents/claude-like) first on PATH. Only the
//! `cargo install` line is left out (the binary under test stands for what it installs, and is
//! checked to be the one that line builds). Every command must succeed, `aoctl doctor` included,
//! and the session it spawns must do its work.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::harness::{command, free_port, run_for, BIN};
use crate::lifecycle::git_out;

const README: &str = include_str!("../../README.md");
const CLAUDE_LIKE: &str = include_str!("../agents/claude-like");

/// The shell block under the README's "Use it on your repository" heading.
fn quick_start() -> Vec<String> {
    let section = README.split("## Use it on your repository").nth(1).expect("the README has a quick start");
    let block = section.split("```sh\n").nth(1).and_then(|b| b.split("```").next()).expect("a sh block");
    block.lines().map(str::to_string).collect()
}

#[test]
fn the_quick_start_block_names_only_commands_this_test_runs() {
    let lines = quick_start();
    assert!(lines[0].starts_with("cargo install --path cli"), "{lines:?}");
    // The cargo package at `cli` is the binary this test runs.
    let manifest = include_str!("../../cli/Cargo.toml");
    assert!(manifest.contains("name = \"aoctl\""), "cli/ builds aoctl");
    for l in &lines[1..] {
        assert!(l.starts_with("aoctl ") || l.starts_with("cd "), "a line this test can run: {l}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_quick_start_runs_as_written() {
    let tmp = tempfile::Builder::new().prefix("aoctl-e2e-quickstart-").tempdir().expect("tempdir");
    let home = tmp.path().join("home");
    let bin = tmp.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(fs::canonicalize(BIN).expect("the aoctl binary"), bin.join("aoctl")).unwrap();
    let claude = bin.join("claude");
    fs::write(&claude, CLAUDE_LIKE).unwrap();
    fs::set_permissions(&claude, fs::Permissions::from_mode(0o755)).unwrap();
    let repo = crate::harness::git_repo(&home.join("src"), "my-repo", "main");

    let script: Vec<String> = quick_start().into_iter().skip(1).collect();
    let script = format!("set -ex\n{}\n", script.join("\n"));
    let mut path = OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let port = free_port();
    // The environment the harness gives aoctl (nothing of the test machine's aoctl settings),
    // for a shell that runs it.
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", &script]).current_dir(&home);
    for (k, v) in command(&home).get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    sh.env("PATH", &path)
        .env("HOME", &home)
        .env("AOCTL_SERVER", format!("http://127.0.0.1:{port}"))
        // The scripted claude's credentials: with none it waits at its login screen.
        .env("ANTHROPIC_API_KEY", "sk-ant-scripted");
    let data_dir = home.join(".local/share/aoctl");
    let out = run_for(sh, None, Duration::from_secs(180));
    let stop_agents = || {
        let _ =
            std::process::Command::new("tmux").arg("-S").arg(data_dir.join("tmux.sock")).arg("kill-server").output();
    };
    if out.code != 0 {
        let mut describe = command(&home);
        describe.args(["describe", "session", "haiku"]).env("AOCTL_SERVER", format!("http://127.0.0.1:{port}"));
        let described = run_for(describe, None, Duration::from_secs(30));
        stop_agents();
        let log = fs::read_to_string(data_dir.join("serve.log")).unwrap_or_default();
        panic!("the quick start failed: {out:?}\n--- the session:\n{}\n--- the server's log:\n{log}", described.stdout);
    }
    assert!(out.stdout.contains("project/my-repo created"), "{}", out.stdout);
    assert!(out.stdout.contains("session/haiku created"), "{}", out.stdout);
    let row = out.stdout.lines().find(|l| l.starts_with("haiku ")).unwrap_or_default();
    assert!(row.contains("claude-code"), "get sessions names the agent: {row}");
    // The server is down, its agent still works: the scripted claude commits the prompt.
    let deadline = Instant::now() + Duration::from_secs(60);
    let want = "haiku: write a haiku about this repository";
    while git_out(&repo, &["log", "-1", "--format=%s", "my-repo/haiku"]).as_deref() != Some(want) {
        if Instant::now() > deadline {
            stop_agents();
            panic!("the agent's commit on my-repo/haiku: {:?}", git_out(&repo, &["log", "--oneline", "--all"]));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop_agents();
}
