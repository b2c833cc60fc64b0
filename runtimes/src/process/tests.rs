//! Tests of the process runtime with real processes on real PTYs (a real ConPTY on Windows),
//! driving the agents in miniature of [`crate::test_agents`], as the tmux tests do.

use std::path::Path;

use super::{key_bytes, ProcessRuntime};
use crate::contract_tests as contract;
use crate::runtime::{Handle, LaunchSpec, Owned, Probe, Runtime, RuntimeError};
use crate::test_agents::{agent, pid_after, probe_becomes, spec, style, transcript_has, wait_for, Agent};

/// A runtime whose agents are killed when the test ends, however it ends.
struct Fixture {
    dir: tempfile::TempDir,
    runtime: ProcessRuntime,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture { dir: tempfile::tempdir().unwrap(), runtime: ProcessRuntime::new() }
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

impl Drop for Fixture {
    fn drop(&mut self) {
        for agent in self.runtime.agents.lock().values() {
            #[cfg(unix)]
            if let Ok(pid) = libc::pid_t::try_from(agent.pid) {
                // SAFETY: kill(2) has no memory-safety preconditions.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
            #[cfg(windows)]
            if let Some(job) = &agent.job {
                let _ = job.terminate();
            }
        }
    }
}

/// Whether process `pid` is still running.
fn alive(pid: u32) -> bool {
    #[cfg(unix)]
    return super::tree::alive(pid);
    #[cfg(windows)]
    return crate::windows::is_alive(pid);
}

#[tokio::test]
async fn process_start_applies_env_and_workdir_and_fills_the_transcript() {
    let fx = Fixture::new();
    let spec = spec(fx.path(), "envs", agent(fx.path(), Agent::Reader));
    let handle = fx.start(&spec).await;
    assert_eq!(handle.0.parse::<u32>().ok(), Some(fx.runtime.get(&handle).unwrap().pid));
    let expected = format!("ready in {} with [envs]", spec.workdir.display());
    transcript_has(&spec, &expected).await;
    assert!(fx.runtime.capture(&handle).await.unwrap().contains(&expected));
    assert_eq!(fx.runtime.probe(&handle).await.unwrap(), Probe::Alive);
    assert!(fx.runtime.attach_command(&handle).is_empty());
}

/// The agent's environment is `spec.env` and the terminal's `TERM`: nothing of the controller's,
/// which here has at least a `PATH` and `HOME` the spec leaves out.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn process_agent_gets_exactly_its_environment() {
    use crate::test_agents::{environ, set_on_purpose, sh_agent, WAITER};
    assert!(std::env::var_os("PATH").is_some() && std::env::var_os("HOME").is_some());
    let fx = Fixture::new();
    let mut spec = spec(fx.path(), "env", sh_agent(fx.path(), "waiter.sh", WAITER));
    spec.env = set_on_purpose("env");
    let handle = fx.start(&spec).await;
    let mut env = environ(fx.runtime.get(&handle).unwrap().pid);
    assert_eq!(env.remove("TERM").as_deref(), Some("xterm-256color"));
    // portable-pty names the user's login shell when the environment has none.
    env.remove("SHELL");
    assert_eq!(env, spec.env);
}

#[tokio::test]
async fn process_send_submits_a_line_even_when_it_is_already_on_screen() {
    let fx = Fixture::new();
    contract::send_submits_a_line_even_when_it_is_already_on_screen(&fx.runtime, fx.path()).await;
}

// Two tests cannot run under Wine 8.0: its console host turns escape sequences typed into a
// pseudo console into key events without characters, so a raw-mode reader never sees them
// (docs/windows.md). On Windows itself they run with `--include-ignored`.

#[tokio::test]
#[cfg_attr(windows, ignore = "Wine 8.0's console host drops typed escape sequences (bracketed paste)")]
async fn process_multi_line_message_arrives_as_one_paste() {
    let fx = Fixture::new();
    contract::multi_line_message_arrives_as_one_paste(&fx.runtime, fx.path()).await;
}

#[tokio::test]
async fn process_submit_is_retried_when_the_first_enter_is_lost() {
    let fx = Fixture::new();
    contract::submit_is_retried_when_the_first_enter_is_lost(&fx.runtime, fx.path()).await;
}

#[tokio::test]
async fn process_agent_without_echo_counts_only_when_the_screen_changes() {
    let fx = Fixture::new();
    contract::agent_without_echo_counts_only_when_the_screen_changes(&fx.runtime, fx.path()).await;
}

#[tokio::test]
async fn process_probe_reports_exit_code_then_missing_after_stop() {
    let fx = Fixture::new();
    let spec = spec(fx.path(), "exits", agent(fx.path(), Agent::Reader));
    let handle = fx.start(&spec).await;
    assert_eq!(fx.runtime.probe(&handle).await.unwrap(), Probe::Alive);
    fx.runtime.send(&handle, "quit", &style(3)).await.unwrap();
    probe_becomes(&fx.runtime, &handle, Probe::Exited(Some(3))).await;
    let err = fx.runtime.send(&handle, "again", &style(3)).await.unwrap_err();
    assert!(matches!(err, RuntimeError::Failed { op: "send", .. }), "{err}");

    // An exited agent is replaced by a new start of its session; a running one is not.
    let again = fx.runtime.start(&spec).await.unwrap();
    assert_eq!(fx.runtime.probe(&handle).await.unwrap(), Probe::Missing);
    let err = fx.runtime.start(&spec).await.unwrap_err();
    assert!(matches!(err, RuntimeError::Failed { op: "start", .. }), "{err}");
    fx.runtime.stop(&again).await.unwrap();
    assert_eq!(fx.runtime.probe(&again).await.unwrap(), Probe::Missing);
    fx.runtime.stop(&again).await.unwrap();
}

#[tokio::test]
async fn process_stop_kills_grandchildren() {
    let fx = Fixture::new();
    let spec = spec(fx.path(), "spawner", agent(fx.path(), Agent::Spawner));
    let handle = fx.start(&spec).await;
    let (orphan, stubborn) = (pid_after(&spec, "orphan:"), pid_after(&spec, "stubborn:"));
    assert!(alive(orphan) && alive(stubborn));
    fx.runtime.stop(&handle).await.unwrap();
    wait_for("the grandchildren to die", || !alive(orphan) && !alive(stubborn)).await;
    assert_eq!(fx.runtime.probe(&handle).await.unwrap(), Probe::Missing);
}

#[tokio::test]
async fn process_list_reports_session_and_project() {
    let fx = Fixture::new();
    assert_eq!(fx.runtime.list().await.unwrap(), vec![]);
    let one = spec(fx.path(), "one", agent(fx.path(), Agent::Reader));
    let mut two = spec(fx.path(), "two", one.command.clone());
    two.project = "other".into();
    let h1 = fx.start(&one).await;
    let h2 = fx.start(&two).await;
    let owned = |s: &str, p: &str, h: &Handle| Owned { session: s.into(), project: Some(p.into()), handle: h.clone() };
    assert_eq!(fx.runtime.list().await.unwrap(), vec![owned("one", "demo", &h1), owned("two", "other", &h2)]);
}

#[tokio::test]
async fn process_keys_answer_dialogs() {
    let fx = Fixture::new();
    let spec = spec(fx.path(), "keys", agent(fx.path(), Agent::Reader));
    let handle = fx.start(&spec).await;
    fx.runtime.keys(&handle, &["y", "e", "s", "Enter"]).await.unwrap();
    transcript_has(&spec, "got: yes").await;
    assert!(matches!(fx.runtime.keys(&handle, &["NoSuchKey"]).await, Err(RuntimeError::Failed { .. })));
}

/// An agent that asks for the cursor position before it draws anything gets an answer.
#[tokio::test]
#[cfg_attr(windows, ignore = "Wine 8.0's console host drops typed escape sequences (the cursor position reply)")]
async fn process_terminal_queries_are_answered() {
    let fx = Fixture::new();
    let spec = spec(fx.path(), "query", agent(fx.path(), Agent::Query));
    fx.runtime.start(&spec).await.unwrap();
    transcript_has(&spec, "ready [3;4R").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_a_terminal_view_resizes_the_agent_and_gives_its_size_back() {
    let fx = Fixture::new();
    let spec = spec(fx.path(), "size", agent(fx.path(), Agent::Size));
    let handle = fx.start(&spec).await;
    // Asks the agent its size until it tells `cols` x `rows`: the emulator takes a size before the
    // PTY does, and a console host may take a while. A console host may also draw earlier lines
    // again after a resize, so only the last size told counts.
    let tells = |cols: u16, rows: u16| {
        let (rt, handle, transcript) = (&fx.runtime, &handle, &spec.transcript);
        async move {
            let want = format!("size {cols}x{rows}");
            let last = || {
                let text = crate::test_agents::read(transcript);
                text.rfind("size ").map(|at| text[at..].split_whitespace().take(2).collect::<Vec<_>>().join(" "))
            };
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while last().as_ref() != Some(&want) {
                assert!(std::time::Instant::now() < deadline, "wanted {want}, the agent last told {:?}", last());
                rt.keys(handle, &["Enter"]).await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    };
    tells(spec.cols, spec.rows).await;

    let view = fx.runtime.terminal(&handle, 120, 40).await.unwrap();
    tells(120, 40).await;
    assert_eq!(fx.runtime.get(&handle).unwrap().terminal.lock().screen().size(), (40, 120));

    drop(view);
    tells(spec.cols, spec.rows).await;
    assert_eq!(fx.runtime.get(&handle).unwrap().terminal.lock().screen().size(), (spec.rows, spec.cols));
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_terminal_views_share_the_pty_and_give_its_size_back() {
    use crate::runtime::{TERMINAL_COLS, TERMINAL_ROWS};
    use crate::test_agents::sh_agent;
    use crate::view_tests;

    let fx = Fixture::new();
    let mut spec = spec(fx.path(), "view", sh_agent(fx.path(), "shell.sh", view_tests::SHELL));
    (spec.cols, spec.rows) = (TERMINAL_COLS, TERMINAL_ROWS);
    let handle = fx.start(&spec).await;
    view_tests::terminal_view_contract(&fx.runtime, &handle, 0).await;
    let screen = fx.runtime.get(&handle).unwrap().terminal.lock().screen().size();
    assert_eq!(screen, (TERMINAL_ROWS, TERMINAL_COLS), "the screen the controller reads is the agent's size");
    view_tests::view_closes_when_the_agent_ends(&fx.runtime, &handle).await;
}

#[cfg(unix)]
#[test]
fn the_exit_code_of_an_unreaped_child_is_read_from_proc() {
    use super::tree;

    let mut child = std::process::Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
    let pid = child.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while tree::alive(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(tree::zombie_exit_code(pid, std::process::id()), Some(7));
    assert_eq!(tree::zombie_exit_code(pid, 1), None);
    child.wait().unwrap();
}

#[test]
fn key_names_map_to_terminal_bytes() {
    assert_eq!(key_bytes("Enter", false).unwrap(), b"\r");
    assert_eq!(key_bytes("C-c", false).unwrap(), b"\x03");
    assert_eq!(key_bytes("Escape", false).unwrap(), b"\x1b");
    assert_eq!(key_bytes("Up", false).unwrap(), b"\x1b[A");
    assert_eq!(key_bytes("Up", true).unwrap(), b"\x1bOA");
    assert_eq!(key_bytes("Tab", false).unwrap(), b"\t");
    assert_eq!(key_bytes("y", false).unwrap(), b"y");
    assert_eq!(key_bytes("2", false).unwrap(), b"2");
    assert_eq!(key_bytes("Nope", false), None);
}
