//! Tests of the docker runtime against a real engine, with busybox shell scripts as agents in the
//! local image `aoctl-agent:busybox` (built by `e2e/docker/build-image.sh` when missing).
//!
//! They fail, saying how to start an engine, when `docker version` does not answer. They run one at a time:
//! `list` adopts every container of its owner on the engine (the tests of one binary share an
//! owner), and a second follower would write another test's transcript twice.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use aoctl_api::session::{DockerSpec, RuntimeKind};
use serde_json::Value;

#[path = "../../../e2e/support/strict.rs"]
mod strict;

use super::DockerRuntime;
use crate::runtime::{Handle, LaunchSpec, Owned, Probe, Runtime, RuntimeError, TERMINAL_COLS, TERMINAL_ROWS};
use crate::test_agents::{probe_becomes, read, style, transcript_has, wait_for, write_script};
use crate::view_tests;

const IMAGE: &str = "aoctl-agent:busybox";

/// The owner id of this test binary's runtimes, so parallel test runs on one engine stay apart.
fn test_owner() -> String {
    format!("test-{}", std::process::id())
}

/// Writes who it runs as into the workspace, then answers lines; `quit` exits with status 3.
const EDITOR: &str = r#"#!/bin/sh
echo "edited by $(id -u)" > /workspace/edited.txt
echo "ready in $(pwd) with $AOCTL_TEST"
while read -r line; do
  [ "$line" = quit ] && exit 3
  echo "got: $line"
done
"#;

/// A raw-mode agent that echoes what it reads and loses the first Enter it is sent.
const LOSES_FIRST_ENTER: &str = r#"#!/bin/sh
stty raw -echo
printf 'ready\r\n> '
cr=$(printf '\r')
lost=0
line=''
while :; do
  c=$(dd bs=1 count=1 2>/dev/null)
  if [ "$c" = "$cr" ]; then
    if [ $lost = 0 ]; then lost=1; continue; fi
    printf '\r\ngot: %s\r\n> ' "$line"
    line=''
  else
    line="$line$c"
    printf '%s' "$c"
  fi
done
"#;

/// Prints a hundred numbered ticks in the background while it answers lines.
const TICKER: &str = r#"#!/bin/sh
echo ready
( i=0; while [ $i -lt 100 ]; do echo "tick $i"; i=$((i+1)); sleep 0.05; done ) &
while read -r line; do echo "got: $line"; done
"#;

/// Follows the worktree's `gitdir:` link and shows that it resolves inside the container.
/// Tries to write what a sandbox keeps read-only and what it keeps writable; prints each outcome.
const SANDBOX_PROBE: &str = r#"#!/bin/sh
try() { if sh -c "$2" 2>/dev/null; then echo "$1: written"; else echo "$1: refused"; fi; }
try config 'echo x >> /aoctl/git/config'
try hooks 'touch /aoctl/git/hooks/pre-commit'
try alternates 'echo /tmp > /aoctl/git/objects/info/alternates'
try gitfile 'rm -f /workspace/.git'
try objects "touch $MAIN_OBJECTS/planted"
try index 'touch /aoctl/git/index'
try work 'touch /workspace/planted'
echo "gitfile: $(cat /workspace/.git)"
echo ready
exec sleep 1000
"#;

/// Docker tests take turns.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn docker(args: &[&str]) -> std::process::Output {
    Command::new("docker").args(args).output().expect("the docker client runs")
}

/// Builds the test image once per test binary, if the engine does not have it.
fn ensure_image() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        if docker(&["image", "inspect", IMAGE]).status.success() {
            return;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/docker/build-image.sh");
        let out = Command::new("bash").arg(&script).arg(IMAGE).output().expect("bash runs");
        assert!(out.status.success(), "{} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr));
    });
}

/// One test's engine connection, scratch folder and containers (removed when dropped).
struct Bench {
    runtime: DockerRuntime,
    dir: tempfile::TempDir,
    sessions: parking_lot::Mutex<Vec<String>>,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Bench {
    /// Takes the engine for one test; panics, saying how to start one, when no engine answers
    /// `docker version` (as the end-to-end docker tests do): a missing engine is a failed run,
    /// not a passed one.
    async fn new() -> Bench {
        let turn = SERIAL.lock().await;
        let start = "start one with `e2e/docker/dockerd.sh start`";
        match Command::new("docker").arg("version").output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => panic!(
                "no Docker engine answers `docker version` ({start}): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => panic!("cannot run the docker client (`docker version`; {start}): {e}"),
        }
        ensure_image();
        let runtime =
            DockerRuntime::connect(None, &test_owner()).await.expect("the engine that answers the CLI answers bollard");
        Bench { runtime, dir: tempfile::tempdir().unwrap(), sessions: Default::default(), _turn: turn }
    }

    /// A unique session name, cleaned up with the bench.
    fn session(&self, label: &str) -> String {
        let name = format!("dt{}-{label}", std::process::id());
        self.sessions.lock().push(name.clone());
        name
    }

    /// A launch of the shell script `body` as session `label`, in a workspace of its own owned by
    /// uid 1000 when the tests run as root (so the owner is not the engine's default user).
    fn spec(&self, label: &str, body: &str) -> LaunchSpec {
        let session = self.session(label);
        let workdir = self.dir.path().join(format!("work-{label}"));
        std::fs::create_dir_all(&workdir).unwrap();
        let script = write_script(&workdir, "agent.sh", body);
        if unsafe { libc::geteuid() } == 0 {
            for path in [&workdir, &script] {
                std::os::unix::fs::chown(path, Some(1000), Some(1000)).unwrap();
            }
        }
        launch(self.dir.path(), &session, workdir, vec![script.to_string_lossy().into_owned()])
    }

    /// How many containers carry the session's label, whatever their state.
    fn containers(&self, session: &str) -> usize {
        let filter = format!("label=ao.dev/session={session}");
        let out = docker(&["ps", "-a", "-q", "--filter", &filter]);
        String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.trim().is_empty()).count()
    }

    /// Starts `spec` and waits until its transcript says `ready`.
    async fn start(&self, spec: &LaunchSpec) -> Handle {
        let handle = self.runtime.start(spec).await.unwrap();
        transcript_has(spec, "ready").await;
        handle
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        for session in self.sessions.lock().iter() {
            let _ = docker(&["rm", "-f", &self.runtime.container_name(session)]);
        }
    }
}

fn launch(dir: &Path, session: &str, workdir: PathBuf, command: Vec<String>) -> LaunchSpec {
    LaunchSpec {
        session: session.into(),
        project: "demo".into(),
        workdir,
        command,
        env: [("AOCTL_TEST".to_string(), format!("[{session}]"))].into(),
        transcript: dir.join("logs").join(format!("{session}.log")),
        session_dir: dir.join("sessions").join(session),
        cols: 100,
        rows: 30,
        container: Some(DockerSpec {
            image: Some(IMAGE.into()),
            cpus: Some(0.5),
            memory: Some("64Mi".parse().unwrap()),
            pids_limit: Some(64),
            ..Default::default()
        }),
        sandbox: None,
    }
}

/// `docker inspect` of one container, as the CLI reports it.
fn inspect(name: &str) -> Value {
    let out = docker(&["inspect", name]);
    assert!(out.status.success(), "docker inspect {name}: {}", String::from_utf8_lossy(&out.stderr));
    let mut all: Value = serde_json::from_slice(&out.stdout).unwrap();
    all[0].take()
}

/// The bind mount at `destination` in an inspected container.
fn mount<'a>(c: &'a Value, destination: &str) -> &'a Value {
    let mounts = c["Mounts"].as_array().unwrap();
    mounts
        .iter()
        .find(|m| m["Destination"] == destination)
        .unwrap_or_else(|| panic!("no mount at {destination} in {mounts:?}"))
}

#[test]
fn ssh_addresses_with_a_port_are_recognised() {
    assert_eq!(super::ssh_port("ssh://me@box:2222"), Some("2222"));
    assert_eq!(super::ssh_port("ssh://[::1]:2222/"), Some("2222"));
    assert_eq!(super::ssh_port("ssh://me@box"), None);
    assert_eq!(super::ssh_port("ssh://[::1]"), None);
    assert_eq!(super::ssh_port("tcp://box:2375"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_agent_edits_the_workspace_as_its_owner_in_a_hardened_container() {
    let bench = Bench::new().await;
    let spec = bench.spec("edit", EDITOR);
    let handle = bench.start(&spec).await;
    assert_eq!(handle.0, format!("aoctl-{}-{}", super::container::owner_hash(&test_owner()), spec.session));
    assert_eq!(bench.runtime.handle_for(&spec.session), Some(handle.clone()));
    transcript_has(&spec, &format!("ready in /workspace with [{}]", spec.session)).await;
    let owner = std::fs::metadata(&spec.workdir).unwrap();
    let edited = spec.workdir.join("edited.txt");
    wait_for("the agent's edit", || edited.exists()).await;
    assert_eq!(read(&edited), format!("edited by {}\n", owner.uid()));
    assert_eq!(std::fs::metadata(&edited).unwrap().uid(), owner.uid());

    let c = inspect(&handle.0);
    let host = &c["HostConfig"];
    assert_eq!(host["NanoCpus"], 500_000_000);
    assert_eq!(host["Memory"], 64 << 20);
    assert_eq!(host["PidsLimit"], 64);
    assert_eq!(host["SecurityOpt"], serde_json::json!(["no-new-privileges"]));
    assert_eq!(host["CapDrop"], serde_json::json!(["ALL"]));
    assert_eq!(host["NetworkMode"], "none");
    assert_eq!(host["Init"], true);
    let config = &c["Config"];
    assert_eq!(config["User"], format!("{}:{}", owner.uid(), owner.gid()));
    assert_eq!(config["WorkingDir"], "/workspace");
    assert_eq!((config["Tty"].clone(), config["OpenStdin"].clone()), (Value::Bool(true), Value::Bool(true)));
    assert_eq!(config["Labels"]["ao.dev/session"], spec.session.as_str());
    assert_eq!(config["Labels"]["ao.dev/project"], "demo");
    assert_eq!(config["Labels"]["ao.dev/managed-by"], "aoctl");
    assert_eq!(config["Labels"]["ao.dev/owner"], test_owner().as_str());
    let workspace = mount(&c, "/workspace");
    assert_eq!(workspace["Type"], "bind");
    assert_eq!(workspace["Source"], spec.workdir.canonicalize().unwrap().to_str().unwrap());
    assert_eq!(workspace["RW"], true);
    let session = mount(&c, "/aoctl/session");
    assert_eq!(session["Source"], spec.session_dir.canonicalize().unwrap().to_str().unwrap());
    assert_eq!(session["RW"], false);
    assert_eq!(c["Mounts"].as_array().unwrap().len(), 2, "a plain folder needs no .git mount");
}

/// Reads the prompt file named by its first argument, shows where it found it, and fails to write
/// into the session folder, which is read-only.
const PROMPT_READER: &str = r#"#!/bin/sh
echo "prompt at $1 (env $AOCTL_PROMPT): $(head -n 1 "$1")"
if echo x > "$(dirname "$1")/scribble" 2>/dev/null; then echo "session folder writable"; else echo "session folder read-only"; fi
echo ready
exec sleep 1000
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_agent_reads_its_prompt_file_from_the_read_only_session_folder() {
    let bench = Bench::new().await;
    let mut spec = bench.spec("prompt", PROMPT_READER);
    // The controller writes the prompt into its session folder, outside the workspace, and names
    // it by its host path; a relative program resolves against /workspace.
    std::fs::create_dir_all(&spec.session_dir).unwrap();
    let prompt = spec.session_dir.join("prompt.md");
    std::fs::write(&prompt, "Fix the login loop\nsecond line\n").unwrap();
    let prompt = prompt.to_string_lossy().into_owned();
    spec.command = vec!["sh".into(), "./agent.sh".into(), prompt.clone()];
    spec.env.insert("AOCTL_PROMPT".into(), prompt);
    let handle = bench.start(&spec).await;
    transcript_has(&spec, "prompt at /aoctl/session/prompt.md (env /aoctl/session/prompt.md): Fix the login loop\r\n")
        .await;
    transcript_has(&spec, "session folder read-only").await;
    assert!(!spec.session_dir.join("scribble").exists());
    let c = inspect(&handle.0);
    assert_eq!(c["Config"]["Cmd"], serde_json::json!(["./agent.sh", "/aoctl/session/prompt.md"]));
    assert_eq!(c["Config"]["Entrypoint"], serde_json::json!(["sh"]));

    // A session folder that does not exist yet is created, so the mount never fails.
    let mut spec = bench.spec("fresh-dir", PROMPT_READER);
    spec.session_dir = bench.dir.path().join("not-yet").join(&spec.session);
    let missing = spec.session_dir.join("prompt.md").to_string_lossy().into_owned();
    spec.command = vec!["sh".into(), "./agent.sh".into(), missing];
    bench.start(&spec).await;
    assert!(spec.session_dir.is_dir());
    transcript_has(&spec, "prompt at /aoctl/session/prompt.md").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_send_keys_capture_and_exit_code() {
    let bench = Bench::new().await;
    let spec = bench.spec("send", EDITOR);
    let handle = bench.start(&spec).await;
    let runtime = &bench.runtime;
    assert_eq!(runtime.kind(), RuntimeKind::Docker);
    assert_eq!(runtime.attach_command(&handle), ["docker", "attach", "--sig-proxy=false", handle.0.as_str()]);
    assert_eq!(runtime.probe(&handle).await.unwrap(), Probe::Alive);

    runtime.send(&handle, "hello world", &style(3)).await.unwrap();
    transcript_has(&spec, "got: hello world").await;
    assert!(runtime.capture(&handle).await.unwrap().contains("got: hello world"));
    runtime.send(&handle, "one\ntwo", &style(3)).await.unwrap();
    transcript_has(&spec, "got: two").await;
    assert!(read(&spec.transcript).contains("got: one"));
    runtime.keys(&handle, &["y", "e", "s", "Enter"]).await.unwrap();
    transcript_has(&spec, "got: yes").await;
    assert!(matches!(runtime.keys(&handle, &["Bogus"]).await, Err(RuntimeError::Failed { op: "keys", .. })));

    runtime.send(&handle, "quit", &style(3)).await.unwrap();
    probe_becomes(runtime, &handle, Probe::Exited(Some(3))).await;
    let err = runtime.send(&handle, "again", &style(3)).await.unwrap_err();
    assert!(matches!(err, RuntimeError::Failed { op: "send", .. }), "{err}");
    runtime.stop(&handle).await.unwrap();
    assert_eq!(runtime.probe(&handle).await.unwrap(), Probe::Missing);
    assert_eq!(bench.containers(&spec.session), 0);
    runtime.stop(&handle).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_submit_is_retried_when_the_first_enter_is_lost() {
    let bench = Bench::new().await;
    // The typed text shows on the screen before any newline, which only the attach stream carries.
    let spec_a = bench.spec("no-retry", LOSES_FIRST_ENTER);
    let handle = bench.start(&spec_a).await;
    let err = bench.runtime.send(&handle, "hello", &style(0)).await.unwrap_err();
    assert!(matches!(err, RuntimeError::NotDelivered { .. }), "{err}");
    assert!(bench.runtime.capture(&handle).await.unwrap().contains("> hello"));

    let spec_b = bench.spec("retry", LOSES_FIRST_ENTER);
    let handle = bench.start(&spec_b).await;
    bench.runtime.send(&handle, "hello", &style(2)).await.unwrap();
    transcript_has(&spec_b, "got: hello").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_restarted_controller_adopts_the_container_without_duplicating_output() {
    let bench = Bench::new().await;
    let spec = bench.spec("adopt", TICKER);
    // The first controller starts the agent; `bench.runtime` plays the restarted one.
    let first = DockerRuntime::connect(None, &test_owner()).await.unwrap();
    let handle = first.start(&spec).await.unwrap();
    transcript_has(&spec, "tick 10\r\n").await;
    // The controller goes away; the agent keeps printing while nobody follows it.
    drop(first);
    tokio::time::sleep(Duration::from_millis(800)).await;

    let owned = bench.runtime.list().await.unwrap();
    let mine = Owned { session: spec.session.clone(), project: Some("demo".into()), handle: handle.clone() };
    assert!(owned.contains(&mine), "{owned:?}");
    assert_eq!(bench.runtime.probe(&handle).await.unwrap(), Probe::Alive);
    let err = bench.runtime.start(&spec).await.unwrap_err();
    assert!(matches!(err, RuntimeError::Failed { op: "start", .. }), "{err}");
    assert_eq!(bench.containers(&spec.session), 1);

    transcript_has(&spec, "tick 99\r\n").await;
    bench.runtime.send(&handle, "after restart", &style(3)).await.unwrap();
    transcript_has(&spec, "got: after restart").await;
    let text = read(&spec.transcript);
    for i in 0..100 {
        assert_eq!(text.matches(&format!("tick {i}\r\n")).count(), 1, "tick {i} in {text:?}");
    }
    assert_eq!(text.matches("ready").count(), 1, "{text:?}");
    assert!(bench.runtime.capture(&handle).await.unwrap().contains("got: after restart"));
    bench.runtime.stop(&handle).await.unwrap();
    assert_eq!(bench.containers(&spec.session), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_container_removed_from_outside_probes_missing() {
    let bench = Bench::new().await;
    let spec = bench.spec("gone", EDITOR);
    let handle = bench.start(&spec).await;
    assert!(docker(&["rm", "-f", &handle.0]).status.success());
    assert_eq!(bench.runtime.probe(&handle).await.unwrap(), Probe::Missing);
    assert!(matches!(bench.runtime.capture(&handle).await, Err(RuntimeError::NotFound { .. })));
    assert!(matches!(bench.runtime.send(&handle, "x", &style(0)).await, Err(RuntimeError::NotFound { .. })));
    bench.runtime.stop(&handle).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_sandbox_is_mounted_read_only_where_the_agent_must_not_write() {
    let bench = Bench::new().await;
    let main = bench.dir.path().join("main");
    std::fs::create_dir_all(&main).unwrap();
    let git = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&main, &["init", "-q", "-b", "main"]);
    std::fs::write(main.join("README"), "hi\n").unwrap();
    git(&main, &["add", "README"]);
    git(&main, &["commit", "-q", "-m", "first"]);
    let workspaces = aoctl_git::workspace::Workspaces::new(bench.dir.path().join("workspaces"));
    let session = bench.session("sandbox");
    let req = aoctl_git::workspace::WorkspaceRequest {
        project: "demo".into(),
        session: session.clone(),
        repo: main.clone(),
        branch: format!("demo/{session}"),
        base_ref: "main".into(),
        kind: aoctl_api::session::WorkspaceKind::Worktree,
        setup: None,
        sandbox: true,
        pool: false,
    };
    let ws = workspaces.ensure(&req).unwrap();
    let sandbox = ws.sandbox.clone().unwrap();
    let objects = sandbox.objects.clone().unwrap();
    let script = write_script(&ws.path, "agent.sh", SANDBOX_PROBE);
    let mut spec = launch(bench.dir.path(), &session, ws.path.clone(), vec![script.to_string_lossy().into_owned()]);
    spec.env.insert("MAIN_OBJECTS".into(), objects.to_string_lossy().into_owned());
    spec.sandbox = Some(sandbox.clone());
    let handle = bench.start(&spec).await;

    for refused in ["config", "hooks", "alternates", "gitfile", "objects"] {
        transcript_has(&spec, &format!("{refused}: refused")).await;
    }
    for written in ["index", "work"] {
        transcript_has(&spec, &format!("{written}: written")).await;
    }
    transcript_has(&spec, "gitfile: gitdir: /aoctl/git").await;
    assert!(!objects.join("planted").exists());
    let c = inspect(&handle.0);
    let git_dir = sandbox.git_dir.canonicalize().unwrap();
    assert_eq!(mount(&c, "/aoctl/git")["Source"], git_dir.to_str().unwrap());
    assert_eq!(mount(&c, "/aoctl/git")["RW"], true);
    for ro in ["/aoctl/git/config", "/aoctl/git/hooks", "/aoctl/git/info", "/aoctl/git/objects/info", "/workspace/.git"]
    {
        assert_eq!(mount(&c, ro)["RW"], false, "{ro}");
    }
    assert_eq!(mount(&c, objects.to_str().unwrap())["RW"], false);
    let main_git = main.join(".git").canonicalize().unwrap();
    for m in c["Mounts"].as_array().unwrap() {
        let source = m["Source"].as_str().unwrap();
        assert!(m["RW"] == false || !Path::new(source).starts_with(&main_git), "{source} is writable");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_start_and_connect_errors_are_clear() {
    let bench = Bench::new().await;
    let mut spec = bench.spec("errors", EDITOR);
    spec.container = None;
    let err = bench.runtime.start(&spec).await.unwrap_err().to_string();
    assert_eq!(err, "docker: start failed: spec.docker.image is required for runtime docker");
    spec.container = Some(DockerSpec { image: Some("aoctl-missing:none".into()), ..Default::default() });
    let err = bench.runtime.start(&spec).await.unwrap_err().to_string();
    assert!(err.contains("image aoctl-missing:none is not on the engine"), "{err}");
    assert_eq!(bench.containers(&spec.session), 0);
    spec.container = launch(bench.dir.path(), "x", spec.workdir.clone(), vec![]).container;
    // The init process reports a missing program: the agent exits with 127 and says why.
    spec.command = vec!["/no/such/agent".into()];
    let handle = bench.runtime.start(&spec).await.unwrap();
    probe_becomes(&bench.runtime, &handle, Probe::Exited(Some(127))).await;
    transcript_has(&spec, "/no/such/agent").await;

    let Err(err) = DockerRuntime::connect(Some("unix:///nonexistent/docker.sock"), "o").await else {
        panic!("connected to a missing socket")
    };
    assert!(matches!(err, RuntimeError::Unavailable { .. }), "{err}");
    assert!(err.to_string().contains("unix:///nonexistent/docker.sock"), "{err}");
    let Err(err) = DockerRuntime::connect(Some("gopher://nowhere"), "o").await else { panic!("connected to gopher") };
    assert!(matches!(err, RuntimeError::Unavailable { .. }), "{err}");
    let Err(err) = DockerRuntime::connect(Some("ssh://me@box:2222"), "o").await else { panic!("connected over ssh") };
    assert!(err.to_string().contains("Port 2222"), "{err}");
    let Err(err) = DockerRuntime::connect(None, " ").await else { panic!("connected without an owner") };
    assert!(err.to_string().contains("owner"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_controllers_sharing_an_engine_keep_to_their_own_containers() {
    let bench = Bench::new().await;
    let other = DockerRuntime::connect(None, &format!("{}-other", test_owner())).await.unwrap();
    let spec = bench.spec("shared", EDITOR);
    let mine = bench.start(&spec).await;

    // The other controller neither lists nor sees nor removes this one's container, and starts the
    // same session under a name of its own.
    let theirs_name = other.container_name(&spec.session);
    assert_ne!(theirs_name, mine.0);
    let cleanup = scopeguard(theirs_name.clone());
    assert!(other.list().await.unwrap().iter().all(|o| o.handle != mine), "listed by the other owner");
    assert_eq!(other.probe(&mine).await.unwrap(), Probe::Missing);
    other.stop(&mine).await.unwrap();
    assert_eq!(bench.runtime.probe(&mine).await.unwrap(), Probe::Alive);
    let mut their_spec = spec.clone();
    their_spec.transcript = bench.dir.path().join("logs").join("other.log");
    let theirs = other.start(&their_spec).await.unwrap();
    assert_eq!(theirs.0, theirs_name);
    transcript_has(&their_spec, "ready").await;
    let listed = other.list().await.unwrap();
    assert_eq!(listed.iter().map(|o| &o.handle).collect::<Vec<_>>(), [&theirs], "{listed:?}");
    let listed = bench.runtime.list().await.unwrap();
    assert!(listed.iter().any(|o| o.handle == mine) && listed.iter().all(|o| o.handle != theirs), "{listed:?}");
    assert_eq!(bench.containers(&spec.session), 2);

    // A same-named container of another owner is neither adopted nor replaced, running or not.
    other.stop(&theirs).await.unwrap();
    bench.runtime.stop(&mine).await.unwrap();
    let foreign = ["--label", "ao.dev/managed-by=aoctl", "--label", "ao.dev/owner=someone-else"];
    let out = docker(&[&["run", "-d", "--name", &mine.0][..], &foreign[..], &[IMAGE, "sleep", "1000"][..]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = bench.runtime.start(&spec).await.unwrap_err();
    assert!(matches!(err, RuntimeError::Failed { op: "start", .. }), "{err}");
    assert!(err.to_string().contains("ao.dev/owner=someone-else"), "{err}");
    assert_eq!(bench.runtime.probe(&mine).await.unwrap(), Probe::Missing);
    bench.runtime.stop(&mine).await.unwrap();
    assert!(bench.runtime.list().await.unwrap().iter().all(|o| o.handle != mine));
    let running = docker(&["inspect", "-f", "{{.State.Running}}", &mine.0]);
    assert_eq!(String::from_utf8_lossy(&running.stdout).trim(), "true");
    assert!(docker(&["stop", "-t", "0", &mine.0]).status.success());
    let err = bench.runtime.start(&spec).await.unwrap_err().to_string();
    assert!(err.contains("ao.dev/owner=someone-else"), "{err}");
    drop(cleanup);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_terminal_views_share_the_container_tty_and_give_its_size_back() {
    let bench = Bench::new().await;
    let mut spec = bench.spec("view", view_tests::SHELL);
    (spec.cols, spec.rows) = (TERMINAL_COLS, TERMINAL_ROWS);
    let handle = bench.start(&spec).await;
    view_tests::terminal_view_contract(&bench.runtime, &handle, 0).await;
    view_tests::view_closes_when_the_agent_ends(&bench.runtime, &handle).await;
}

/// Removes container `name` when dropped.
fn scopeguard(name: String) -> impl Drop {
    struct Remove(String);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = docker(&["rm", "-f", &self.0]);
        }
    }
    Remove(name)
}

/// Spawn time of ten sessions through the runtime against ten `docker run -d` of the same image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: cargo test -p aoctl-runtimes docker_spawn_time -- --ignored --nocapture"]
async fn docker_spawn_time_of_ten_sessions() {
    let bench = Bench::new().await;
    let specs: Vec<LaunchSpec> = (0..10).map(|i| bench.spec(&format!("t{i}"), EDITOR)).collect();
    let began = Instant::now();
    for spec in &specs {
        bench.runtime.start(spec).await.unwrap();
    }
    let started = began.elapsed();
    for spec in &specs {
        transcript_has(spec, "ready").await;
    }
    let ready = began.elapsed();

    let names: Vec<String> =
        (0..10).map(|i| bench.session(&format!("r{i}"))).map(|s| bench.runtime.container_name(&s)).collect();
    let began = Instant::now();
    for name in &names {
        let out =
            docker(&["run", "-d", "-t", "-i", "--init", "--network", "none", "--name", name, IMAGE, "sleep", "1000"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let cli = began.elapsed();
    eprintln!(
        "10 sessions: runtime.start {:.2}s ({:.0} ms each), all ready {:.2}s; docker run -d {:.2}s ({:.0} ms each)",
        started.as_secs_f64(),
        started.as_secs_f64() * 100.0,
        ready.as_secs_f64(),
        cli.as_secs_f64(),
        cli.as_secs_f64() * 100.0
    );
    for spec in &specs {
        bench.runtime.stop(&Handle(bench.runtime.container_name(&spec.session))).await.unwrap();
    }
}

/// The same agent on another engine address, such as `ssh://user@host` or `tcp://host:2376` (with
/// `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH` for TLS); the workspace path must exist on that host:
/// `AOCTL_TEST_DOCKER_HOST=ssh://user@host cargo test -p aoctl-runtimes docker_on_another`.
/// `make test` points it at the local engine's mutual-TLS listener (`e2e/docker/dockerd.sh
/// tls-env`), and there the test fails without it (`strict.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_on_another_engine_address() {
    let Ok(host) = std::env::var("AOCTL_TEST_DOCKER_HOST") else {
        strict::missing("AOCTL_TEST_DOCKER_HOST is not set (`e2e/docker/dockerd.sh tls-env` prints it)");
        return;
    };
    let bench = Bench::new().await;
    let runtime = DockerRuntime::connect(Some(&host), &test_owner()).await.unwrap();
    assert_eq!(runtime.host(), Some(host.as_str()));
    let spec = bench.spec("remote", EDITOR);
    let handle = runtime.start(&spec).await.unwrap();
    assert_eq!(runtime.attach_command(&handle)[..3], ["docker", "-H", host.as_str()]);
    transcript_has(&spec, "ready in /workspace").await;
    runtime.send(&handle, "from afar", &style(3)).await.unwrap();
    transcript_has(&spec, "got: from afar").await;
    assert_eq!(runtime.probe(&handle).await.unwrap(), Probe::Alive);
    runtime.stop(&handle).await.unwrap();
    assert_eq!(runtime.probe(&handle).await.unwrap(), Probe::Missing);
}
