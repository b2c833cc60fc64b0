//! Tests of the tmux runtime against a real tmux server, plus the agents-in-miniature both runtime
//! tests drive: small scripts that echo, paste, lose an Enter, stay silent or leave processes behind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::TmuxRuntime;
use crate::contract_tests as contract;
use crate::runtime::{
    Handle, InputStyle, LaunchSpec, Owned, Probe, Runtime, RuntimeError, TERMINAL_COLS, TERMINAL_ROWS,
};
use crate::view_tests;

/// Reads lines and answers each; `quit` exits with status 3.
pub(crate) const READER: &str = r#"#!/bin/sh
echo "ready in $(pwd) with $AOCTL_TEST"
while read -r line; do
  [ "$line" = quit ] && exit 3
  echo "got: $line"
done
"#;

/// Like READER, with terminal echo off: typed text never shows, only the answers do.
pub(crate) const NO_ECHO: &str = r#"#!/bin/sh
stty -echo
echo ready
while read -r line; do echo "got: $line"; done
"#;

/// No echo and no answers: nothing on screen ever changes after start.
pub(crate) const SILENT: &str = r#"#!/bin/sh
stty -echo
echo ready
while read -r line; do :; done
"#;

/// Starts a grandchild in its own session (out of reach of tmux's SIGHUP) and one that ignores
/// SIGHUP and SIGTERM, prints their pids, then waits.
pub(crate) const SPAWNER: &str = r#"#!/bin/sh
setsid sleep 1000 &
echo "orphan: $!"
(trap '' HUP TERM; exec sleep 1001) &
echo "stubborn: $!"
echo ready
wait
"#;

/// A raw-mode agent with bracketed paste on: echoes what it gets and, on Enter outside a paste,
/// reports how many paste blocks and lines the message had.
pub(crate) const PASTE: &str = r#"import os, tty
tty.setraw(0)
os.write(1, b"\x1b[?2004hready\r\n> ")
blocks, lines, inside = 0, 1, False
while True:
    c = os.read(0, 1)
    if not c:
        break
    if c == b"\x1b":
        seq = c
        while not (seq[-1:].isalpha() or seq[-1:] == b"~"):
            seq += os.read(0, 1)
        if seq == b"\x1b[200~":
            blocks, inside = blocks + 1, True
        elif seq == b"\x1b[201~":
            inside = False
        continue
    if c in (b"\r", b"\n"):
        if inside:
            lines += 1
            os.write(1, b"\r\n")
            continue
        os.write(1, b"\r\nblocks=%d lines=%d\r\n> " % (blocks, lines))
        blocks, lines = 0, 1
        continue
    os.write(1, c)
"#;

/// A raw-mode agent that loses the first Enter it is sent, as agents do while still starting.
pub(crate) const LOSES_FIRST_ENTER: &str = r#"import os, tty
tty.setraw(0)
os.write(1, b"ready\r\n> ")
line, lost = b"", False
while True:
    c = os.read(0, 1)
    if not c:
        break
    if c == b"\r":
        if not lost:
            lost = True
            continue
        os.write(1, b"\r\ngot: " + line + b"\r\n> ")
        line = b""
        continue
    line += c
    os.write(1, c)
"#;

/// Writes an executable file.
pub(crate) fn write_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The real python3 interpreter (not a version-manager shim).
pub(crate) fn python() -> String {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let out = std::process::Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .expect("python3 runs");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        })
        .clone()
}

/// A command running the shell script `body`, written into `dir`.
pub(crate) fn sh_agent(dir: &Path, name: &str, body: &str) -> Vec<String> {
    vec![write_script(dir, name, body).to_string_lossy().into_owned()]
}

/// A command running the python program `body`, written into `dir`.
pub(crate) fn py_agent(dir: &Path, name: &str, body: &str) -> Vec<String> {
    vec![python(), write_script(dir, name, body).to_string_lossy().into_owned()]
}

/// A launch of `command` for session `session`, working in `dir/work`, transcript in `dir/logs`.
pub(crate) fn spec(dir: &Path, session: &str, command: Vec<String>) -> LaunchSpec {
    let workdir = dir.join("work");
    std::fs::create_dir_all(&workdir).unwrap();
    LaunchSpec {
        session: session.into(),
        project: "demo".into(),
        workdir,
        command,
        env: BTreeMap::from([("AOCTL_TEST".to_string(), format!("[{session}]"))]),
        transcript: dir.join("logs").join(format!("{session}.log")),
        session_dir: dir.join("sessions").join(session),
        cols: 100,
        rows: 30,
        container: None,
        sandbox: None,
    }
}

/// Quick input settings for tests.
pub(crate) fn style(retries: u32) -> InputStyle {
    InputStyle {
        bracketed_paste: true,
        submit_delay: Duration::from_millis(50),
        submit_key: "Enter".into(),
        verify_timeout: Duration::from_millis(800),
        retries,
    }
}

/// Waits up to ten seconds for `f` to hold.
pub(crate) async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits until the transcript of `spec` contains `needle`.
pub(crate) async fn transcript_has(spec: &LaunchSpec, needle: &str) {
    wait_for(&format!("{needle:?} in the transcript"), || read(&spec.transcript).contains(needle)).await;
}

/// The number after `label` in the transcript of `spec`.
pub(crate) fn pid_after(spec: &LaunchSpec, label: &str) -> u32 {
    let text = read(&spec.transcript);
    let rest = &text[text.find(label).unwrap_or_else(|| panic!("{label} in {text:?}")) + label.len()..];
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// Waits until `runtime` probes `handle` as `want`.
pub(crate) async fn probe_becomes(runtime: &dyn Runtime, handle: &Handle, want: Probe) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = runtime.probe(handle).await.unwrap();
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "probe stayed {got:?}, wanted {want:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

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
    let _ = server.runtime.send(&handle, "quit", &style(3)).await;
    wait_for("the pane-died hook to open the transcript", || spec.transcript.exists()).await;
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
