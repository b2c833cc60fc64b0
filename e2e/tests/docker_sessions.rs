//! Sessions with `runtime: docker` through the real controller, binary and sled data dir, on the
//! real Docker engine of the machine (CI starts it with e2e/docker/dockerd.sh; these tests fail,
//! saying so, when `docker version` does not answer). The agent is e2e/agents/box-agent, committed
//! into each test repository as scripts/box-agent and run by the busybox image
//! `aoctl-agent:busybox` (built by e2e/docker/build-image.sh when missing) as
//! `sh ./scripts/box-agent {promptFile}`: `sh` comes from the image's PATH, the relative script
//! resolves against the working directory /workspace (the sandboxed checkout), and `{promptFile}` is
//! rewritten to /aoctl/session/prompt.md, the controller's session folder mounted read-only.
//!
//! The tests share one engine, so they take turns (a process-wide lock), and their session names
//! carry this process's id so that another run on the same engine does not collide. Container
//! names are the controller's business (`aoctl-<owner hash>-<session>`): the tests take them from
//! `status.runtime.handle` and find containers by their `ao.dev/session` label.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{git_repo, Server, API};
use crate::lifecycle::eventually;

/// The local test image.
pub(crate) const IMAGE: &str = "aoctl-agent:busybox";
/// The scripted agent, committed into every test repository as `scripts/box-agent`.
pub(crate) const BOX_AGENT: &str = include_str!("../agents/box-agent");
/// How long a docker session gets to become Ready on a busy two-core machine.
pub(crate) const READY: Duration = Duration::from_secs(60);
/// How long typed text or an agent's output may take to show.
pub(crate) const ECHO: Duration = Duration::from_secs(15);

/// Docker tests take turns: they share one engine.
static ENGINE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs the docker CLI; its output.
pub(crate) fn docker(args: &[&str]) -> std::process::Output {
    Command::new("docker").args(args).stdin(Stdio::null()).output().expect("the docker client runs")
}

/// The docker CLI's trimmed standard output; panics when it fails.
#[track_caller]
pub(crate) fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(out.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Takes the engine for one test: panics with how to start one when `docker version` fails, and
/// builds the test image once when the engine lacks it.
pub(crate) async fn engine() -> tokio::sync::MutexGuard<'static, ()> {
    let turn = ENGINE.lock().await;
    let version = Command::new("docker").arg("version").stdin(Stdio::null()).output();
    match version {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "no Docker engine answers `docker version` (start one with `e2e/docker/dockerd.sh start`): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!("cannot run the docker client (`docker version`): {e}"),
    }
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| build_image(&[IMAGE]));
    turn
}

/// Runs e2e/docker/build-image.sh with `args` unless the image (the last argument) exists.
pub(crate) fn build_image(args: &[&str]) {
    if docker(&["image", "inspect", args[args.len() - 1]]).status.success() {
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/docker/build-image.sh");
    let out = Command::new("bash").arg(&script).args(args).output().expect("bash runs");
    assert!(out.status.success(), "{} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr));
}

/// A session name unique to this test process.
pub(crate) fn unique(label: &str) -> String {
    format!("box{}-{label}", std::process::id())
}

/// The containers of a test's sessions: records the engine's events about them while the test
/// runs (printed when it fails, since another controller on the engine may have touched them) and
/// removes them when dropped, so a failing test leaves none behind. Declare it before the server:
/// the controller goes first, then its containers.
pub(crate) struct Containers {
    sessions: Vec<String>,
    events: Option<std::process::Child>,
    log: tempfile::NamedTempFile,
}

impl Containers {
    pub(crate) fn new(sessions: &[&str]) -> Containers {
        let log = tempfile::NamedTempFile::new().expect("events file");
        let mut cmd = Command::new("docker");
        cmd.args(["events", "--format", "{{.Time}} {{.Action}} {{.Actor.Attributes.name}}"]);
        for s in sessions {
            cmd.args(["--filter", &format!("label=ao.dev/session={s}")]);
        }
        let out = log.reopen().expect("events file");
        let events = cmd.stdin(Stdio::null()).stdout(out).stderr(Stdio::null()).spawn().ok();
        Containers { sessions: sessions.iter().map(|s| s.to_string()).collect(), events, log }
    }
}

impl Drop for Containers {
    fn drop(&mut self) {
        for session in &self.sessions {
            for id in session_containers(session) {
                let _ = docker(&["rm", "-f", &id]);
            }
        }
        if let Some(mut child) = self.events.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let events = fs::read_to_string(self.log.path()).unwrap_or_default();
            eprintln!("==== engine events of {:?} ====\n{events}==== end of engine events ====", self.sessions);
        }
    }
}

/// A repository `parent/name` on `main` whose second commit adds the scripted agent.
pub(crate) fn box_repo(parent: &Path, name: &str) -> PathBuf {
    let repo = git_repo(parent, name, "main");
    let scripts = repo.join("scripts");
    fs::create_dir_all(&scripts).expect("create scripts/");
    let agent = scripts.join("box-agent");
    fs::write(&agent, BOX_AGENT).expect("write the scripted agent");
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).expect("make the agent executable");
    for args in [&["add", "scripts"][..], &["commit", "-q", "-m", "Add the box agent"]] {
        let out = Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["-c", "user.name=aoctl e2e", "-c", "user.email=e2e@aoctl.invalid", "-c", "commit.gpgsign=false"])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env_remove("GIT_DIR")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    repo
}

/// A Project for `repo`.
pub(crate) fn project(name: &str, repo: &Path) -> Value {
    json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": name}, "spec": {"path": repo}})
}

/// A docker Session running the box agent, with `docker` as its `spec.docker`.
pub(crate) fn docker_session(name: &str, project: &str, docker: Value) -> Value {
    json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
        "spec": {"project": project, "prompt": format!("Task of {name}\nsecond line"), "runtime": "docker",
            "docker": docker, "agent": {"command": ["sh", "./scripts/box-agent", "{promptFile}"]}}})
}

/// The limits the tests ask for.
pub(crate) fn limits() -> Value {
    json!({"image": IMAGE, "cpus": 1, "memory": "128Mi", "pidsLimit": 64})
}

/// The condition `type_` of an object.
pub(crate) fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_)
}

pub(crate) fn is_true(obj: &Value, type_: &str) -> bool {
    condition(obj, type_).is_some_and(|c| c["status"] == "True")
}

fn restarts(obj: &Value) -> u64 {
    obj.pointer("/status/runtime/restarts").and_then(Value::as_u64).unwrap_or(0)
}

/// The ids of the containers carrying session `name`'s label, whatever their state.
pub(crate) fn session_containers(name: &str) -> Vec<String> {
    let out = docker_ok(&["ps", "-a", "-q", "--no-trunc", "--filter", &format!("label=ao.dev/session={name}")]);
    out.lines().map(str::to_string).filter(|l| !l.is_empty()).collect()
}

/// The container name in a session's `status.runtime.handle`, checked to be
/// `aoctl-<8 hex digits of the owner>-<session>`.
#[track_caller]
pub(crate) fn container_of(obj: &Value, name: &str) -> String {
    let handle = obj["status"]["runtime"]["handle"].as_str().unwrap_or_else(|| panic!("no handle in {obj:#}"));
    let hash = handle.strip_prefix("aoctl-").and_then(|h| h.strip_suffix(&format!("-{name}")));
    assert!(
        hash.is_some_and(|h| h.len() == 8 && h.bytes().all(|b| b.is_ascii_hexdigit())),
        "container name {handle} is not aoctl-<owner hash>-{name}"
    );
    handle.to_string()
}

/// `docker inspect` of one container.
#[track_caller]
pub(crate) fn inspect(container: &str) -> Value {
    let mut all: Value = serde_json::from_str(&docker_ok(&["inspect", container])).expect("docker inspect JSON");
    all[0].take()
}

/// Polls `aoctl logs NAME` until it contains `needle`; the logs.
pub(crate) async fn logs_show(server: &Server, name: &str, needle: &str) -> String {
    eventually(ECHO, &format!("`aoctl logs {name}` showing {needle:?}"), || {
        let out = server.aoctl(&["logs", name]);
        out.ok();
        if out.stdout.contains(needle) {
            Ok(out.stdout)
        } else {
            Err(out.stdout)
        }
    })
    .await
}

/// Waits until the session is Ready with a running container; the object.
pub(crate) async fn ready(server: &Server, name: &str) -> Value {
    server.wait_for("sessions", name, READY, |o| is_true(o, "Ready") && is_true(o, "RuntimeReady")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_session_edits_its_worktree_in_a_hardened_container_and_takes_input() {
    let _turn = engine().await;
    let name = unique("edit");
    let _containers = Containers::new(&[&name]);
    let server = Server::start().await;
    let repo = box_repo(server.tmp.path(), "boxed");
    server.create("projects", &project("boxed", &repo)).await;
    server.create("sessions", &docker_session(&name, "boxed", limits())).await;

    let obj = ready(&server, &name).await;
    let container = container_of(&obj, &name);
    assert_eq!(obj["status"]["runtime"]["kind"], "docker", "{obj:#}");
    let worktree = PathBuf::from(obj["status"]["workspace"]["path"].as_str().expect("status.workspace.path"));

    // The agent read its prompt file from the read-only session folder and edited the worktree,
    // as the uid owning the worktree.
    logs_show(&server, &name, &format!("box-agent: working on: Task of {name}")).await;
    let note = worktree.join("notes").join(format!("{name}.txt"));
    let text =
        eventually(ECHO, "the agent's note in the worktree", || fs::read_to_string(&note).map_err(|e| e.to_string()))
            .await;
    assert_eq!(text, format!("{name}\nTask of {name}\n"));
    let owner = fs::metadata(&worktree).expect("worktree metadata");
    let written = fs::metadata(&note).expect("note metadata");
    assert_eq!((written.uid(), written.gid()), (owner.uid(), owner.gid()), "the note's owner");
    logs_show(&server, &name, &format!("wrote notes/{name}.txt as {}:{}", owner.uid(), owner.gid())).await;

    // The container as the engine reports it.
    let c = inspect(&container);
    let host = &c["HostConfig"];
    assert_eq!(host["NanoCpus"], 1_000_000_000i64, "{host:#}");
    assert_eq!(host["Memory"], 134_217_728i64, "{host:#}");
    assert_eq!(host["PidsLimit"], 64, "{host:#}");
    assert_eq!(host["SecurityOpt"], json!(["no-new-privileges"]), "{host:#}");
    assert_eq!(host["CapDrop"], json!(["ALL"]), "{host:#}");
    assert_eq!(host["NetworkMode"], "none", "{host:#}");
    assert_eq!(host["Init"], true, "{host:#}");
    let config = &c["Config"];
    assert_eq!(config["Labels"]["ao.dev/session"], name.as_str());
    assert_eq!(config["Labels"]["ao.dev/project"], "boxed");
    assert_eq!(config["Labels"]["ao.dev/managed-by"], "aoctl");
    let owner_label = config["Labels"]["ao.dev/owner"].as_str().unwrap_or_default();
    assert!(owner_label.len() == 12 && owner_label.bytes().all(|b| b.is_ascii_hexdigit()), "{config:#}");
    assert_eq!(config["User"], format!("{}:{}", owner.uid(), owner.gid()));
    assert_eq!(config["Image"], IMAGE);
    assert_eq!(config["Entrypoint"], json!(["sh"]));
    assert_eq!(config["Cmd"], json!(["./scripts/box-agent", "/aoctl/session/prompt.md"]));
    let mounts = c["Mounts"].as_array().expect("Mounts");
    let mount = |dest: &str| mounts.iter().find(|m| m["Destination"] == dest).cloned().unwrap_or(Value::Null);
    assert_eq!(mount("/workspace")["Source"], worktree.canonicalize().unwrap().to_str().unwrap(), "{mounts:#?}");
    assert_eq!(mount("/workspace")["RW"], true, "{mounts:#?}");
    let session_dir = server.data_dir.join("sessions").join(&name).canonicalize().unwrap();
    assert_eq!(mount("/aoctl/session")["Source"], session_dir.to_str().unwrap(), "{mounts:#?}");
    assert_eq!(mount("/aoctl/session")["RW"], false, "{mounts:#?}");
    // The workspace is a sandboxed checkout: its own git folder (next to the work tree) at
    // /aoctl/git, its config, hooks and the gitfile read-only, and of the main repository only
    // the objects folder, read-only. Nothing of the main `.git` is writable.
    let sandbox = PathBuf::from(format!("{}.git", worktree.canonicalize().unwrap().display()));
    assert_eq!(mount("/aoctl/git")["Source"], sandbox.to_str().unwrap(), "{mounts:#?}");
    assert_eq!(mount("/aoctl/git")["RW"], true, "{mounts:#?}");
    for ro in ["/aoctl/git/config", "/aoctl/git/hooks", "/aoctl/git/info", "/aoctl/git/objects/info", "/workspace/.git"]
    {
        assert_eq!(mount(ro)["RW"], false, "{ro}: {mounts:#?}");
    }
    let git_dir = repo.join(".git").canonicalize().unwrap();
    let objects = git_dir.join("objects");
    assert_eq!(mount(objects.to_str().unwrap())["Source"], objects.to_str().unwrap(), "{mounts:#?}");
    assert_eq!(mount(objects.to_str().unwrap())["RW"], false, "{mounts:#?}");
    for m in mounts {
        let source = m["Source"].as_str().unwrap_or_default();
        assert!(
            !Path::new(source).starts_with(&git_dir) || (source == objects.to_str().unwrap() && m["RW"] == false),
            "the main repository's {source} is mounted read-write: {mounts:#?}"
        );
    }
    assert_eq!(mount(git_dir.to_str().unwrap()), Value::Null, "the main .git is not mounted: {mounts:#?}");

    // Input typed through the CLI reaches the agent, which writes it into the worktree.
    server.aoctl(&["send", &name, "hello from the host"]).ok();
    logs_show(&server, &name, "box-agent: got: hello from the host").await;
    eventually(ECHO, "the typed line in the note", || match fs::read_to_string(&note) {
        Ok(t) if t.ends_with("hello from the host\n") => Ok(()),
        other => Err(format!("{other:?}")),
    })
    .await;

    server.aoctl(&["delete", "session", &name, "--wait=60s"]).ok();
    assert_eq!(session_containers(&name), Vec::<String>::new(), "containers left after delete --wait");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_container_is_readopted_after_kill9_recreated_after_rm_and_removed_on_delete() {
    let _turn = engine().await;
    let name = unique("adopt");
    let _containers = Containers::new(&[&name]);
    let mut server = Server::start().await;
    let repo = box_repo(server.tmp.path(), "boxed");
    server.create("projects", &project("boxed", &repo)).await;
    server.create("sessions", &docker_session(&name, "boxed", limits())).await;

    let before = ready(&server, &name).await;
    let container = container_of(&before, &name);
    assert_eq!(restarts(&before), 0, "{before:#}");
    logs_show(&server, &name, "box-agent: working on:").await;
    let id = inspect(&container)["Id"].as_str().expect("container id").to_string();
    assert_eq!(session_containers(&name), vec![id.clone()]);

    // kill -9 of the controller: the agent keeps running and the restarted controller adopts the
    // same container instead of starting a second one.
    server.kill9();
    assert_eq!(inspect(&container)["State"]["Running"], true, "the container outlives the controller");
    server.restart().await;
    server.settle().await;
    let after = ready(&server, &name).await;
    assert_eq!(restarts(&after), 0, "an adopted container is not a restart: {after:#}");
    assert_eq!(after["status"]["runtime"]["handle"], container.as_str());
    for _ in 0..10 {
        assert_eq!(session_containers(&name), vec![id.clone()], "one container, the same, after the restart");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(inspect(&container)["State"]["Running"], true);
    // Adopted means followed: input goes in and its echo comes out, and nothing is logged twice.
    server.aoctl(&["send", &name, "after the restart"]).ok();
    let logs = logs_show(&server, &name, "box-agent: got: after the restart").await;
    assert_eq!(logs.matches("box-agent: working on:").count(), 1, "the transcript repeats output:\n{logs}");
    assert_eq!(restarts(&ready(&server, &name).await), 0);

    // Removed from outside: the controller notices and starts a new container (restartPolicy
    // OnFailure restarts an agent whose runtime disappeared), which writes its note afresh.
    let worktree = PathBuf::from(before["status"]["workspace"]["path"].as_str().expect("status.workspace.path"));
    let note = worktree.join("notes").join(format!("{name}.txt"));
    fs::remove_file(&note).expect("remove the note");
    let owner = fs::metadata(&worktree).expect("worktree metadata");
    let owner = format!("{}:{}", owner.uid(), owner.gid());
    docker_ok(&["rm", "-f", &container]);
    let restarted = server
        .wait_for("sessions", &name, READY, |o| restarts(o) == 1 && is_true(o, "RuntimeReady") && is_true(o, "Ready"))
        .await;
    assert_eq!(restarted["status"]["runtime"]["handle"], container.as_str());
    let new_id = inspect(&container)["Id"].as_str().expect("container id").to_string();
    assert_ne!(new_id, id, "a new container");
    assert_eq!(session_containers(&name), vec![new_id]);
    assert_eq!(inspect(&container)["Config"]["User"], owner.as_str());
    logs_show(&server, &name, &format!("wrote notes/{name}.txt as {owner}")).await;
    let written = fs::metadata(&note).expect("the new agent's note");
    assert_eq!(format!("{}:{}", written.uid(), written.gid()), owner, "the new note's owner");
    // The new agent appends to the same transcript and takes input.
    eventually(ECHO, "the new agent's output", || {
        let out = server.aoctl(&["logs", &name]);
        match out.stdout.matches("box-agent: working on:").count() {
            2 => Ok(()),
            n => Err(format!("{n} starts in:\n{}", out.stdout)),
        }
    })
    .await;
    server.aoctl(&["send", &name, "to the new container"]).ok();
    logs_show(&server, &name, "box-agent: got: to the new container").await;

    // Deleted with --wait: no container of the session is left, in any state.
    server.aoctl(&["delete", "session", &name, "--wait=60s"]).ok();
    let managed = docker_ok(&[
        "ps",
        "-a",
        "--filter",
        "label=ao.dev/managed-by=aoctl",
        "--format",
        "{{.Names}} {{.Label \"ao.dev/session\"}}",
    ]);
    let ours: Vec<&str> = managed.lines().filter(|l| l.split(' ').any(|w| w == container || w == name)).collect();
    assert!(ours.is_empty(), "containers of {name} left after delete --wait: {ours:?}");
    assert!(!docker(&["inspect", &container]).status.success(), "{container} still exists");
    assert!(server.object("sessions", &name).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_missing_image_and_unreachable_engine_are_conditions_not_crashes() {
    let _turn = engine().await;
    let (no_image, no_engine) = (unique("no-image"), unique("no-engine"));
    let _containers = Containers::new(&[&no_image, &no_engine]);
    let server = Server::start().await;
    let repo = box_repo(server.tmp.path(), "boxed");
    server.create("projects", &project("boxed", &repo)).await;
    let missing = "aoctl-e2e-missing:none";
    server.create("sessions", &docker_session(&no_image, "boxed", json!({"image": missing}))).await;
    let nowhere = json!({"image": IMAGE, "host": "unix:///nonexistent.sock"});
    server.create("sessions", &docker_session(&no_engine, "boxed", nowhere)).await;

    let failed = |o: &Value| condition(o, "RuntimeReady").is_some_and(|c| c["status"] == "False" && c["reason"] != "");
    let a = server.wait_for("sessions", &no_image, READY, failed).await;
    let rr = condition(&a, "RuntimeReady").unwrap();
    eprintln!("missing image: phase {}, RuntimeReady {rr}", a["status"]["phase"]);
    assert_eq!(rr["reason"], "RuntimeFailed", "{a:#}");
    let message = rr["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("image {missing} is not on the engine")), "{a:#}");
    assert!(!is_true(&a, "Ready"), "{a:#}");
    assert_eq!(session_containers(&no_image), Vec::<String>::new(), "no container for a missing image");

    let b = server.wait_for("sessions", &no_engine, READY, failed).await;
    let rr = condition(&b, "RuntimeReady").unwrap();
    eprintln!("unreachable engine: phase {}, RuntimeReady {rr}", b["status"]["phase"]);
    assert_eq!(rr["reason"], "RuntimeUnavailable", "{b:#}");
    let message = rr["message"].as_str().unwrap_or_default();
    assert!(message.contains("unix:///nonexistent.sock"), "{b:#}");
    assert!(!is_true(&b, "Ready"), "{b:#}");

    // The controller keeps serving, and both sessions delete cleanly.
    assert_eq!(server.get_path("/healthz").await.code, 200);
    assert_eq!(server.get_path(&format!("{API}/sessions")).await.code, 200);
    server.aoctl(&["delete", "session", &no_image, &no_engine, "--wait=60s"]).ok();
    assert!(server.object("sessions", &no_image).await.is_none());
    assert!(server.object("sessions", &no_engine).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_sessions_terminal_takes_keys_and_its_diff_shows_the_sandboxes_work() {
    use crate::terminal::{terminals_are, Term};
    let _turn = engine().await;
    let name = unique("term");
    let _containers = Containers::new(&[&name]);
    let server = Server::start().await;
    let repo = box_repo(server.tmp.path(), "boxterm");
    server.create("projects", &project("boxterm", &repo)).await;
    server.create("sessions", &docker_session(&name, "boxterm", limits())).await;
    let obj = ready(&server, &name).await;
    let container = container_of(&obj, &name);

    let mut term = Term::open(&server, &name, 120, 40).await;
    term.shows(&format!("box-agent: working on: Task of {name}")).await;
    terminals_are(&server, 1).await;
    term.types("hello from the terminal\r").await;
    term.shows("box-agent: got: hello from the terminal").await;
    term.resize(100, 30).await;
    term.types("after the resize\r").await;
    term.shows("box-agent: got: after the resize").await;
    term.close().await;
    terminals_are(&server, 0).await;
    assert_eq!(inspect(&container)["State"]["Running"], true, "the container runs on");

    // The box agent has no git: its note is untracked work in the sandbox.
    let want = format!(
        "--- /dev/null\n+++ b/notes/{name}.txt\n@@ -0,0 +1,4 @@\n+{name}\n+Task of {name}\n\
         +hello from the terminal\n+after the resize\n"
    );
    let deadline = Instant::now() + ECHO;
    loop {
        let diff = server.get_path(&format!("{API}/sessions/{name}/diff")).await;
        assert_eq!(diff.code, 200, "{}", diff.text());
        if diff.text().contains(&want) {
            assert!(!diff.text().contains("scripts/"), "{}", diff.text());
            break;
        }
        assert!(Instant::now() < deadline, "{want:?} is not in the diff:\n{}", diff.text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
