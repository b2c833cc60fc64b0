//! Fixtures of the session-lifecycle tests (sessions.rs, recovery.rs, real_agent.rs): a repository
//! with the scripted agent committed, manifests of sessions that run it, probes of tmux, git and
//! /proc, and a guard that deletes every session and stops the agents' tmux server when a test ends.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::harness::{command, git_repo, Server, API};

/// The wrapper every test session runs, committed as `scripts/agent.sh`.
const WRAPPER: &str = include_str!("../agents/lifecycle-agent");
/// The scripted agent the wrapper starts, committed as `scripts/demo-agent`.
const DEMO_AGENT: &str = include_str!("../agents/demo-agent");
/// The agent's command, relative to the worktree it runs in.
pub(crate) const AGENT: &str = "./scripts/agent.sh";
/// How long sessions get to become Ready on a busy two-core machine.
pub(crate) const READY: Duration = Duration::from_secs(60);

/// A git command in `dir` with a fixed identity and no user or system configuration.
fn git_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args(["-c", "user.name=aoctl e2e", "-c", "user.email=e2e@aoctl.invalid", "-c", "commit.gpgsign=false"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .stdin(Stdio::null());
    cmd
}

/// Runs git in `dir`; its trimmed standard output. Panics when git fails.
#[track_caller]
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir, args).output().expect("git runs");
    assert!(out.status.success(), "git {args:?} in {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether git succeeds in `dir`.
pub(crate) fn git_ok(dir: &Path, args: &[&str]) -> bool {
    git_out(dir, args).is_some()
}

/// Git's trimmed standard output in `dir`, `None` when it fails.
pub(crate) fn git_out(dir: &Path, args: &[&str]) -> Option<String> {
    let out = git_cmd(dir, args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A repository `parent/name` on `main` whose second commit adds the scripted agent.
pub(crate) fn agent_repo(parent: &Path, name: &str) -> PathBuf {
    let repo = git_repo(parent, name, "main");
    let scripts = repo.join("scripts");
    fs::create_dir_all(&scripts).expect("create scripts/");
    for (file, text) in [("agent.sh", WRAPPER), ("demo-agent", DEMO_AGENT)] {
        let path = scripts.join(file);
        fs::write(&path, text).expect("write the scripted agent");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("make the agent executable");
    }
    git(&repo, &["add", "scripts"]);
    git(&repo, &["commit", "-q", "-m", "Add the scripted agent"]);
    repo
}

/// A word no other process on the machine has among its arguments.
pub(crate) fn token(tag: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("e2e-{tag}-{}-{nanos}", std::process::id())
}

/// Inserts the fields of `extra` into the object `target`.
fn merge(target: &mut Value, extra: Value) {
    if let (Some(t), Value::Object(e)) = (target.as_object_mut(), extra) {
        t.extend(e);
    }
}

/// A Project manifest for `repo`, with `extra` fields in its spec.
pub(crate) fn project(name: &str, repo: &Path, extra: Value) -> Value {
    let mut p = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": name},
        "spec": {"path": repo}});
    merge(&mut p["spec"], extra);
    p
}

/// A Session manifest running the scripted agent with `token` in its arguments, with `extra`
/// fields in its spec. Its prompt is `Task of <name>`.
pub(crate) fn session(name: &str, project: &str, token: &str, extra: Value) -> Value {
    let mut s = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
        "spec": {"project": project, "prompt": format!("Task of {name}"),
            "agent": {"command": [AGENT, "{promptFile}", token]}}});
    merge(&mut s["spec"], extra);
    s
}

/// Writes `docs` as one multi-document YAML file; its path as a string.
pub(crate) fn write_manifest(path: &Path, docs: &[Value]) -> String {
    let text: Vec<String> = docs.iter().map(|d| serde_yaml_ng::to_string(d).expect("YAML")).collect();
    fs::write(path, text.join("---\n")).expect("write manifest");
    path.to_str().expect("UTF-8 path").to_string()
}

/// The condition `type_` of an object.
pub(crate) fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_)
}

/// Whether the condition `type_` is True.
pub(crate) fn is_true(obj: &Value, type_: &str) -> bool {
    condition(obj, type_).is_some_and(|c| c["status"] == "True")
}

pub(crate) fn ready(obj: &Value) -> bool {
    is_true(obj, "Ready")
}

pub(crate) fn phase(obj: &Value) -> &str {
    obj.pointer("/status/phase").and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn restarts(obj: &Value) -> u64 {
    obj.pointer("/status/runtime/restarts").and_then(Value::as_u64).unwrap_or(0)
}

/// One line per session for failure messages: phase, restarts and conditions.
fn summary(name: &str, obj: &Value) -> String {
    let conds: Vec<String> = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| format!("{}={}/{} {:?}", c["type"], c["status"], c["reason"], c["message"].as_str().unwrap_or("")))
        .collect();
    format!("{name}: phase {:?}, restarts {}, {}", phase(obj), restarts(obj), conds.join(", "))
}

/// Polls the session list until `pred` holds for every one of `names`; their objects, in order.
pub(crate) async fn wait_all(
    server: &Server,
    names: &[&str],
    timeout: Duration,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + timeout;
    loop {
        let list = server.get_path(&format!("{API}/sessions")).await.expect(200);
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let objs: Vec<Value> = names
            .iter()
            .map(|n| items.iter().find(|o| o["metadata"]["name"] == *n).cloned().unwrap_or(Value::Null))
            .collect();
        if objs.iter().all(&pred) {
            return objs;
        }
        if Instant::now() > deadline {
            let lines: Vec<String> = names.iter().zip(&objs).map(|(n, o)| summary(n, o)).collect();
            panic!("sessions did not become {what} within {timeout:?}:\n{}", lines.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `probe` until it returns `Ok`; panics with its last `Err` after `timeout`.
pub(crate) async fn eventually<T>(timeout: Duration, what: &str, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match probe() {
            Ok(v) => return v,
            Err(last) if Instant::now() > deadline => panic!("{what}: not within {timeout:?}; last seen: {last}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The author and subject of the newest commit on `branch`.
pub(crate) fn tip(repo: &Path, branch: &str) -> Option<String> {
    git_out(repo, &["log", "-1", "--format=%an|%s", branch, "--"]).filter(|t| !t.is_empty())
}

/// Waits until the scripted agent's commit is the tip of the session's branch.
pub(crate) async fn agent_committed(repo: &Path, branch: &str, session: &str) {
    let want = format!("demo-agent|{session}: Task of {session}");
    eventually(READY, &format!("the agent's commit on {branch}"), || match tip(repo, branch) {
        Some(t) if t == want => Ok(()),
        other => Err(format!("{other:?}")),
    })
    .await;
}

/// The Events about one session, oldest first.
pub(crate) async fn events(server: &Server, session: &str) -> Vec<Value> {
    let list = server.get_path(&format!("{API}/events")).await.expect(200);
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .into_iter()
        .filter(|e| e["involvedObject"]["kind"] == "Session" && e["involvedObject"]["name"] == session)
        .collect()
}

/// The event of a session with this reason, if any.
pub(crate) async fn event(server: &Server, session: &str, reason: &str) -> Option<Value> {
    events(server, session).await.into_iter().find(|e| e["reason"] == reason)
}

/// The folder of a session's workspace.
pub(crate) fn workspace(server: &Server, project: &str, session: &str) -> PathBuf {
    server.data_dir.join("workspaces").join(project).join(session)
}

/// A session's transcript, as the controller writes it.
pub(crate) fn transcript(server: &Server, session: &str) -> String {
    fs::read_to_string(server.data_dir.join("sessions").join(session).join("transcript.log")).unwrap_or_default()
}

/// The main repository's worktrees as (path, branch), the main checkout first.
pub(crate) fn worktrees(repo: &Path) -> Vec<(PathBuf, String)> {
    let text = git(repo, &["worktree", "list", "--porcelain"]);
    text.split("\n\n")
        .filter_map(|block| {
            let mut path = None;
            let mut branch = String::new();
            for line in block.lines() {
                if let Some(p) = line.strip_prefix("worktree ") {
                    path = Some(PathBuf::from(p));
                } else if let Some(b) = line.strip_prefix("branch ") {
                    branch = b.strip_prefix("refs/heads/").unwrap_or(b).to_string();
                }
            }
            Some((path?, branch))
        })
        .collect()
}

/// The lines of a launch log written by the scripted agent.
pub(crate) fn launches(log: &Path) -> Vec<String> {
    fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
}

/// How many launches of `session` the log records.
pub(crate) fn launch_count(log: &Path, session: &str) -> usize {
    launches(log).iter().filter(|l| *l == session).count()
}

/// Waits until the launch log records `n` launches of `session` (an agent logs its launch a moment
/// after its runtime started it).
pub(crate) async fn launched(log: &Path, session: &str, n: usize) {
    eventually(Duration::from_secs(10), &format!("{n} launches of {session}"), || match launch_count(log, session) {
        c if c == n => Ok(()),
        c => Err(format!("{c} launches: {:?}", launches(log))),
    })
    .await;
}

/// The agents' tmux server of one data dir.
pub(crate) struct Tmux {
    pub sock: PathBuf,
}

impl Tmux {
    pub(crate) fn of(server: &Server) -> Tmux {
        Tmux { sock: server.data_dir.join("tmux.sock") }
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .args(args)
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .output()
            .expect("tmux runs")
    }

    /// The names of its sessions, sorted; none when the server is not running.
    pub(crate) fn sessions(&self) -> Vec<String> {
        let out = self.run(&["list-sessions", "-F", "#{session_name}"]);
        let mut names: Vec<String> = if out.status.success() {
            String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
        } else {
            vec![]
        };
        names.sort();
        names
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.run(&["has-session", "-t", &format!("={name}")]).status.success()
    }

    /// The pid of the process the session's pane runs.
    pub(crate) fn pane_pid(&self, name: &str) -> Option<u32> {
        let out = self.run(&["display-message", "-p", "-t", &format!("={name}:"), "#{pane_pid}"]);
        String::from_utf8_lossy(&out.stdout).trim().parse().ok().filter(|_| out.status.success())
    }

    /// What the session's pane shows.
    pub(crate) fn capture(&self, name: &str) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", &format!("={name}:")]).stdout).into_owned()
    }

    pub(crate) fn kill_server(&self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The arguments of a live process, split at NUL bytes.
fn argv(pid: u32) -> Vec<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name in parentheses may hold spaces; the fields after it are numbers.
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// Live processes with `token` as one of their arguments, other than tmux (whose server repeats
/// the command line of the session it was started for) and other than shells forked from a match
/// (a script's command substitutions).
pub(crate) fn processes_with(token: &str) -> Vec<u32> {
    let matching: HashSet<u32> = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let args = argv(*pid);
            let tmux = args.first().is_some_and(|a| a.rsplit('/').next().unwrap_or(a).starts_with("tmux"));
            !tmux && args.iter().any(|a| a == token)
        })
        .collect();
    let mut pids: Vec<u32> =
        matching.iter().copied().filter(|p| parent_of(*p).is_none_or(|pp| !matching.contains(&pp))).collect();
    pids.sort();
    pids
}

/// The current directory of a process.
pub(crate) fn cwd_of(pid: u32) -> Option<PathBuf> {
    fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// Runs a prepared command, killing it after `timeout`; `None` when it could not run or was killed.
fn run_for(mut cmd: Command, timeout: Duration) -> Option<Output> {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().ok()?;
    let deadline = Instant::now() + timeout;
    while child.try_wait().ok()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().ok()
}

/// Deletes every session through the CLI and stops the agents' tmux server when dropped, so that
/// a failing test leaves no agent behind. Drop it before the server: declare it after.
pub(crate) struct Cleanup {
    base: String,
    home: PathBuf,
    data_dir: PathBuf,
}

impl Cleanup {
    pub(crate) fn new(server: &Server) -> Cleanup {
        Cleanup { base: server.base.clone(), home: server.home.clone(), data_dir: server.data_dir.clone() }
    }

    /// Follows a server restarted on another port.
    pub(crate) fn retarget(&mut self, server: &Server) {
        self.base = server.base.clone();
    }

    fn aoctl(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = command(&self.home);
        cmd.env("AOCTL_SERVER", &self.base).env("AOCTL_DATA_DIR", &self.data_dir).args(args);
        let out = run_for(cmd, Duration::from_secs(90)).ok_or_else(|| format!("aoctl {args:?} did not finish"))?;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        if out.status.success() {
            Ok(text(&out.stdout))
        } else {
            Err(format!("aoctl {args:?}: {}{}", text(&out.stdout), text(&out.stderr)))
        }
    }

    /// Deletes every session and waits until they are gone.
    fn delete_all(&self) -> Result<(), String> {
        let listed = self.aoctl(&["get", "sessions", "-o", "name"])?;
        let names: Vec<&str> = listed.lines().filter_map(|l| l.trim().strip_prefix("session/")).collect();
        if names.is_empty() {
            return Ok(());
        }
        let mut args = vec!["delete", "session"];
        args.extend(&names);
        args.push("--wait=60s");
        self.aoctl(&args).map(drop)
    }

    /// Deletes every session and checks that nothing of them is left: no tmux session, no
    /// workspace folder, no per-session files.
    #[track_caller]
    pub(crate) fn finish(&self) {
        self.delete_all().unwrap_or_else(|e| panic!("deleting the sessions at the end: {e}"));
        let tmux = Tmux { sock: self.data_dir.join("tmux.sock") };
        assert_eq!(tmux.sessions(), Vec::<String>::new(), "tmux sessions left after deleting every session");
        let left = |dir: PathBuf| -> Vec<String> { walk(&dir).into_iter().map(|p| p.display().to_string()).collect() };
        assert_eq!(left(self.data_dir.join("workspaces")), Vec::<String>::new(), "workspace files left");
        assert_eq!(left(self.data_dir.join("sessions")), Vec::<String>::new(), "per-session files left");
    }
}

/// Every file and folder under `dir`, which may not exist.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        out.push(e.path());
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walk(&e.path()));
        }
    }
    out
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Err(e) = self.delete_all() {
            eprintln!("cleanup: {e}");
        }
        Tmux { sock: self.data_dir.join("tmux.sock") }.kill_server();
    }
}
