//! Tests of the tmux runtime against a real tmux server, driving the agents in miniature of
//! [`crate::test_agents`].

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::TmuxRuntime;
use crate::contract_tests as contract;
use crate::runtime::{Handle, LaunchSpec, Owned, Probe, Runtime, RuntimeError, TERMINAL_COLS, TERMINAL_ROWS};
use crate::test_agents::*;
use crate::view_tests;

/// A tmux server on a socket in a fresh directory, killed when dropped.
struct Server {
    dir: tempfile::TempDir,
    runtime: TmuxRuntime,
}

impl Server {
    fn new() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let runtime = TmuxRuntime::new(dir.path().join("tmux.sock"));
        Server { dir, runtime }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Starts `spec` and waits until its transcript says `ready`.
    async fn start(&self, spec: &LaunchSpec) -> Handle {
        let handle = self.runtime.start(spec).await.unwrap();
        transcript_has(spec, "ready").await;
        handle
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(self.runtime.socket())
            .arg("kill-server")
            .stderr(std::process::Stdio::null())
            .status();
    }
}

#[tokio::test]
async fn tmux_start_applies_env_and_workdir_and_fills_the_transcript() {
    TmuxRuntime::available().unwrap();
    let server = Server::new();
    let spec = spec(server.path(), "envs", sh_agent(server.path(), "reader.sh", READER));
    let handle = server.start(&spec).await;
    let expected = format!("ready in {} with [envs]", spec.workdir.display());
    transcript_has(&spec, &expected).await;
    assert!(server.runtime.capture(&handle).await.unwrap().contains(&expected));
    assert_eq!(server.runtime.probe(&handle).await.unwrap(), Probe::Alive);
}

/// What tmux itself sets in every pane.
#[cfg(target_os = "linux")]
const SET_BY_TMUX: &[&str] = &["TERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "TMUX", "TMUX_PANE", "SHELL", "PWD"];

/// Whether `name=value` in a pane's environment is `spec`'s or tmux's own (its default `PATH`
/// when `spec` has none).
#[cfg(target_os = "linux")]
fn given_or_tmux(spec: &LaunchSpec, name: &str, value: &str) -> bool {
    spec.env.get(name).is_some_and(|v| v == value)
        || SET_BY_TMUX.contains(&name)
        || (name == "PATH" && value == "/usr/bin:/bin" && !spec.env.contains_key("PATH"))
}

/// The process id of session `name`'s pane.
#[cfg(target_os = "linux")]
fn pane_pid(server: &Server, name: &str) -> u32 {
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(server.runtime.socket())
        .args(["display-message", "-p", "-t", &format!("={name}:"), "#{pane_pid}"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// The server's global environment, as `show-environment -g` prints it.
#[cfg(target_os = "linux")]
fn global_environment(server: &Server) -> String {
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(server.runtime.socket())
        .args(["show-environment", "-g"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Regression: a tmux pane's environment is the server's (which it took from the client that
/// started it: a controller's, forge token and all) and its session's, so every agent had the
/// controller's secrets. Now an agent has `spec.env`, what tmux sets in a pane, and nothing else,
/// also on a server an older controller started, and nothing of another session's `spec.env`.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn tmux_agent_gets_exactly_its_environment_even_on_an_older_server() {
    TmuxRuntime::available().unwrap();
    assert!(std::env::var_os("PATH").is_some() && std::env::var_os("HOME").is_some());
    let server = Server::new();
    let old = std::process::Command::new("tmux")
        .arg("-S")
        .arg(server.runtime.socket())
        .args(["start-server", ";", "set-option", "-g", "exit-empty", "off"])
        .env("GITHUB_TOKEN", "ghp-of-the-controller")
        .env("AOCTL_WEBHOOK_SECRET", "hook-of-the-controller")
        .status()
        .unwrap();
    assert!(old.success() && global_environment(&server).contains("GITHUB_TOKEN="));

    let mut first = spec(server.path(), "env-first", sh_agent(server.path(), "waiter.sh", WAITER));
    first.env = set_on_purpose("env-first");
    server.start(&first).await;
    let env = environ(pane_pid(&server, "env-first"));
    for (k, v) in &env {
        assert!(given_or_tmux(&first, k, v), "{k}={v} reached the agent");
    }
    for (k, v) in &first.env {
        assert_eq!(env.get(k), Some(v), "{k}");
    }

    let mut second = spec(server.path(), "env-second", sh_agent(server.path(), "waiter.sh", WAITER));
    second.env = BTreeMap::from([("AOCTL_TEST".to_string(), "[env-second]".to_string())]);
    server.start(&second).await;
    let env = environ(pane_pid(&server, "env-second"));
    for (k, v) in &env {
        assert!(given_or_tmux(&second, k, v), "{k}={v} reached the agent");
    }
    let globals = global_environment(&server);
    assert!(!globals.contains("GITHUB_TOKEN") && !globals.contains("GIVEN"), "{globals}");
}

/// The values of the agent's environment never stand on a tmux command line, where every user
/// of the machine can read them (`/proc/<pid>/cmdline`).
#[test]
fn start_args_name_the_environment_without_its_values() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec(dir.path(), "quiet", vec!["agent".into(), "--flag".into()]);
    spec.env.insert("ANTHROPIC_API_KEY".into(), "sk-ant-never-on-a-command-line".into());
    let args = super::start_args(&spec, &["LEFT_BY_AN_OLDER_SERVER"]).unwrap();
    let text: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    assert!(!text.iter().any(|a| a.contains("sk-ant-never")), "{text:?}");
    assert!(text.iter().any(|a| a.split(' ').any(|n| n == "ANTHROPIC_API_KEY")), "{text:?}");
    assert!(text.windows(2).any(|w| w == ["-u", "LEFT_BY_AN_OLDER_SERVER"]), "{text:?}");
    let bad = BTreeMap::from([("A B".to_string(), "x".to_string())]);
    assert!(super::start_args(&LaunchSpec { env: bad, ..spec }, &[]).is_err());
}

/// Regression: tmux gives a new pane its client's PATH, not the session's, so an agent installed
/// in a folder only `spec.env.PATH` names was "command not found".
#[tokio::test]
async fn tmux_finds_the_command_on_the_path_of_spec_env() {
    let server = Server::new();
    let bin = server.path().join("local-bin");
    std::fs::create_dir_all(&bin).unwrap();
    write_script(&bin, "local-agent", "#!/bin/sh\necho \"ready with PATH=$PATH\"\nexec sleep 30\n");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut spec = spec(server.path(), "local", vec!["local-agent".into(), "--flag".into()]);
    spec.env.insert("PATH".into(), path.clone());
    let handle = server.start(&spec).await;
    transcript_has(&spec, &format!("ready with PATH={}", bin.display())).await;
    assert_eq!(server.runtime.probe(&handle).await.unwrap(), Probe::Alive);
    // A one-word command goes through `sh -c`, which looks it up in the same PATH.
    let mut one = spec.clone();
    one.session = "local-one".into();
    one.command = vec!["local-agent".into()];
    one.transcript = server.path().join("logs").join("local-one.log");
    server.start(&one).await;
    transcript_has(&one, &format!("ready with PATH={}", bin.display())).await;
}

#[tokio::test]
async fn tmux_send_submits_a_line_even_when_it_is_already_on_screen() {
    let server = Server::new();
    contract::send_submits_a_line_even_when_it_is_already_on_screen(&server.runtime, server.path()).await;
}

#[tokio::test]
async fn tmux_multi_line_message_arrives_as_one_paste() {
    let server = Server::new();
    contract::multi_line_message_arrives_as_one_paste(&server.runtime, server.path()).await;
}

#[tokio::test]
async fn tmux_submit_is_retried_when_the_first_enter_is_lost() {
    let server = Server::new();
    contract::submit_is_retried_when_the_first_enter_is_lost(&server.runtime, server.path()).await;
}

#[tokio::test]
async fn tmux_agent_without_echo_counts_only_when_the_screen_changes() {
    let server = Server::new();
    contract::agent_without_echo_counts_only_when_the_screen_changes(&server.runtime, server.path()).await;
}

#[tokio::test]
async fn tmux_probe_reports_exit_code_then_missing_after_stop() {
    let server = Server::new();
    let spec = spec(server.path(), "exits", sh_agent(server.path(), "reader.sh", READER));
    let handle = server.start(&spec).await;
    assert_eq!(server.runtime.probe(&handle).await.unwrap(), Probe::Alive);
    server.runtime.send(&handle, "quit", &style(3)).await.unwrap();
    probe_becomes(&server.runtime, &handle, Probe::Exited(Some(3))).await;
    let err = server.runtime.send(&handle, "again", &style(3)).await.unwrap_err();
    assert!(matches!(err, RuntimeError::Failed { op: "send", .. }), "{err}");
    server.runtime.stop(&handle).await.unwrap();
    assert_eq!(server.runtime.probe(&handle).await.unwrap(), Probe::Missing);
    server.runtime.stop(&handle).await.unwrap();
}

#[tokio::test]
async fn tmux_stop_kills_grandchildren() {
    let server = Server::new();
    let spec = spec(server.path(), "spawner", sh_agent(server.path(), "spawner.sh", SPAWNER));
    let handle = server.start(&spec).await;
    let (orphan, stubborn) = (pid_after(&spec, "orphan:"), pid_after(&spec, "stubborn:"));
    assert!(crate::process::tree::alive(orphan) && crate::process::tree::alive(stubborn));
    server.runtime.stop(&handle).await.unwrap();
    wait_for("the grandchildren to die", || {
        !crate::process::tree::alive(orphan) && !crate::process::tree::alive(stubborn)
    })
    .await;
    assert_eq!(server.runtime.probe(&handle).await.unwrap(), Probe::Missing);
}

#[tokio::test]
async fn tmux_list_reports_session_and_project() {
    let server = Server::new();
    assert_eq!(server.runtime.list().await.unwrap(), vec![]);
    let one = spec(server.path(), "one", sh_agent(server.path(), "reader.sh", READER));
    let mut two = spec(server.path(), "two", one.command.clone());
    two.project = "other".into();
    server.start(&one).await;
    server.start(&two).await;
    let mut listed = server.runtime.list().await.unwrap();
    listed.sort_by(|a, b| a.session.cmp(&b.session));
    let owned = |s: &str, p: &str| Owned { session: s.into(), project: Some(p.into()), handle: Handle(s.into()) };
    assert_eq!(listed, vec![owned("one", "demo"), owned("two", "other")]);
}

#[tokio::test]
async fn tmux_targets_sessions_exactly_and_refuses_duplicates() {
    let server = Server::new();
    let command = sh_agent(server.path(), "reader.sh", READER);
    let ab = server.start(&spec(server.path(), "ab", command.clone())).await;
    let a = Handle("a".into());
    assert_eq!(server.runtime.probe(&a).await.unwrap(), Probe::Missing);
    assert!(matches!(server.runtime.capture(&a).await, Err(RuntimeError::NotFound { .. })));
    server.runtime.stop(&a).await.unwrap();
    assert_eq!(server.runtime.probe(&ab).await.unwrap(), Probe::Alive);

    let a = server.start(&spec(server.path(), "a", command.clone())).await;
    let screen = server.runtime.capture(&a).await.unwrap();
    assert!(screen.contains("with [a]") && !screen.contains("[ab]"), "{screen}");
    let err = server.runtime.start(&spec(server.path(), "a", command)).await.unwrap_err();
    assert!(matches!(err, RuntimeError::Failed { op: "start", .. }), "{err}");
    server.runtime.stop(&a).await.unwrap();
    assert_eq!(server.runtime.probe(&ab).await.unwrap(), Probe::Alive);
}

#[tokio::test]
async fn tmux_arguments_and_paths_reach_the_agent_unchanged() {
    let server = Server::new();
    let args = ["%s|", "a;", ";", "b\\", "#{session_name}", "$HOME", "x y"];
    let mut command = vec!["printf".to_string()];
    command.extend(args.iter().map(|a| a.to_string()));
    let mut spec = spec(server.path(), "args", command);
    spec.transcript = server.path().join("logs #{x}").join("it's.log");
    server.runtime.start(&spec).await.unwrap();
    transcript_has(&spec, "a;|;|b\\|#{session_name}|$HOME|x y|").await;

    // A one-word command is executed, not handed to a shell: its path has a space in it.
    let mut spec = self::spec(server.path(), "word", sh_agent(server.path(), "my agent.sh", READER));
    spec.workdir = server.path().join("work #{session_name}");
    std::fs::create_dir_all(&spec.workdir).unwrap();
    server.runtime.start(&spec).await.unwrap();
    transcript_has(&spec, &format!("ready in {} with", spec.workdir.display())).await;
}

#[tokio::test]
async fn tmux_keys_and_attach_command() {
    let server = Server::new();
    let spec = spec(server.path(), "keys", sh_agent(server.path(), "reader.sh", READER));
    let handle = server.start(&spec).await;
    server.runtime.keys(&handle, &["y", "e", "s", "Enter"]).await.unwrap();
    transcript_has(&spec, "got: yes").await;
    let socket = server.runtime.socket().to_string_lossy().into_owned();
    assert_eq!(server.runtime.attach_command(&handle), ["tmux", "-S", &socket, "attach-session", "-t", "=keys"]);
}

#[tokio::test]
async fn tmux_dying_pane_touches_its_transcript_and_probes_see_it_once_told() {
    let server = Server::new();
    let spec = spec(server.path(), "dies", sh_agent(server.path(), "reader.sh", READER));
    let handle = server.start(&spec).await;
    assert_eq!(server.runtime.probe(&handle).await.unwrap(), Probe::Alive);
    // The writer keeps the unlinked file; only the hook opens the path again, creating it.
    std::fs::remove_file(&spec.transcript).unwrap();
    // Typed again until the pane is dead: on a loaded machine one "quit" has been seen to go
    // unread. Both waits are bounded, more loosely than `wait_for`, for the same reason.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let _ = server.runtime.send(&handle, "quit", &style(3)).await;
        server.runtime.invalidate_probes();
        if matches!(server.runtime.probe(&handle).await.unwrap(), Probe::Exited(_)) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the agent never read its quit");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Its own bound: the loop above may have used most of its own on a loaded machine.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !spec.transcript.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for the pane-died hook to open the transcript"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(read(&spec.transcript), "", "the hook writes nothing");
    server.runtime.invalidate_probes();
    assert_eq!(server.runtime.probe(&handle).await.unwrap(), Probe::Exited(Some(3)), "no stale view after a death");
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(server.runtime.socket())
        .args(["list-panes", "-t", "=dies:", "-F", "#{pane_in_mode}"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0", "nothing is shown over the dead pane");
}

#[tokio::test]
async fn tmux_probes_share_one_view_and_a_started_session_is_never_missing() {
    let server = Server::new();
    let one = spec(server.path(), "one", sh_agent(server.path(), "reader.sh", READER));
    let h1 = server.start(&one).await;
    assert_eq!(server.runtime.probe(&h1).await.unwrap(), Probe::Alive);
    // Started right after a probe read the view: the start invalidates it.
    let two = spec(server.path(), "two", one.command.clone());
    let h2 = server.runtime.start(&two).await.unwrap();
    assert_eq!(server.runtime.probe(&h2).await.unwrap(), Probe::Alive);
    server.runtime.stop(&h2).await.unwrap();
    assert_eq!(server.runtime.probe(&h2).await.unwrap(), Probe::Missing, "a stop invalidates the view too");
    assert_eq!(server.runtime.probe(&Handle("none".into())).await.unwrap(), Probe::Missing);
}

/// What `tmux args…` prints on the test server.
fn tmux_out(server: &Server, args: &[&str]) -> String {
    let out = std::process::Command::new("tmux").arg("-S").arg(server.runtime.socket()).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How many threads of terminal views this process runs.
fn view_threads() -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    tasks
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("tmux-view")))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmux_terminal_views_are_attached_clients_that_leave_nothing_behind() {
    let server = Server::new();
    let mut spec = spec(server.path(), "view", sh_agent(server.path(), "shell.sh", view_tests::SHELL));
    (spec.cols, spec.rows) = (TERMINAL_COLS, TERMINAL_ROWS);
    let handle = server.start(&spec).await;
    let hook = tmux_out(&server, &["show-hooks", "-t", "=view:", "client-detached"]);
    assert!(hook.contains("resize-window -t =view: -x 200 -y 50"), "every client's leaving is heard: {hook}");
    // tmux draws its status line on the view's last row.
    view_tests::terminal_view_contract(&server.runtime, &handle, 1).await;
    wait_for("the views' clients to end", || tmux_out(&server, &["list-clients"]).is_empty()).await;
    wait_for("the views' threads to end", || view_threads() == 0).await;
    let size = tmux_out(&server, &["display-message", "-p", "-t", "=view:", "#{window_width}x#{window_height}"]);
    assert_eq!(size.trim(), format!("{TERMINAL_COLS}x{TERMINAL_ROWS}"));

    view_tests::view_closes_when_the_agent_ends(&server.runtime, &handle).await;
    wait_for("the last client to end", || tmux_out(&server, &["list-clients"]).is_empty()).await;
    wait_for("the last view's threads to end", || view_threads() == 0).await;
}
