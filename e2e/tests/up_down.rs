//! `aoctl up` and `aoctl down`: a background server on the `--server` address with its pid file
//! in the data dir, a Project for the repository, reuse of a running server, and a clean stop;
//! `up --orchestrator` gives the project its orchestrator Session.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{command, free_port, git_repo, run, Out, API};

/// A scratch environment for `up`/`down`; dropping it stops any server `up` left running.
struct Env {
    tmp: tempfile::TempDir,
    server: String,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::Builder::new().prefix("aoctl-e2e-up-").tempdir().expect("tempdir");
        std::fs::create_dir_all(tmp.path().join("home")).expect("HOME");
        Env { server: format!("http://127.0.0.1:{}", free_port()), tmp }
    }

    fn data_dir(&self) -> PathBuf {
        self.tmp.path().join("data")
    }

    fn pid_file(&self) -> PathBuf {
        self.data_dir().join("serve.pid")
    }

    fn cmd(&self) -> Command {
        let mut cmd = command(&self.tmp.path().join("home"));
        cmd.env("AOCTL_SERVER", &self.server).env("AOCTL_DATA_DIR", self.data_dir());
        cmd
    }

    fn aoctl(&self, args: &[&str]) -> Out {
        let mut cmd = self.cmd();
        cmd.args(args);
        run(cmd, None)
    }

    fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.pid_file()).ok().map(|t| t.trim().parse().expect("the pid file holds a pid"))
    }

    async fn get(&self, path: &str) -> Option<(u16, Value)> {
        let mut req = reqwest::Client::new().get(format!("{}{path}", self.server));
        if let Ok(token) = std::fs::read_to_string(self.data_dir().join("token")) {
            req = req.bearer_auth(token.trim());
        }
        let resp = req.send().await.ok()?;
        let code = resp.status().as_u16();
        Some((code, resp.json().await.unwrap_or_default()))
    }

    /// A JSON merge patch of the object at `path`, with the server's token.
    async fn merge_patch(&self, path: &str, patch: Value) -> (u16, Value) {
        let token = std::fs::read_to_string(self.data_dir().join("token")).expect("the server's token");
        let resp = reqwest::Client::new()
            .patch(format!("{}{path}", self.server))
            .bearer_auth(token.trim())
            .header("content-type", "application/merge-patch+json")
            .body(patch.to_string())
            .send()
            .await
            .expect("the server answers");
        let code = resp.status().as_u16();
        (code, resp.json().await.unwrap_or_default())
    }

    /// Waits until the object at `path` passes `done` (`None`: it is not there), for at most 20 s.
    async fn until(&self, path: &str, what: &str, done: impl Fn(Option<&Value>) -> bool) -> Option<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.get(path).await.filter(|(code, _)| *code == 200).map(|(_, v)| v);
            if done(got.as_ref()) {
                return got;
            }
            assert!(Instant::now() < deadline, "{what}: {got:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if self.pid().is_some() {
            let _ = self.aoctl(&["down"]);
        }
        if let Some(pid) = self.pid() {
            // SAFETY: signalling the server this test started, whose pid file is still there.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.data_dir().join("serve.log")).unwrap_or_default();
            eprintln!("==== background server log ====\n{log}==== end ====");
        }
    }
}

/// Whether a process runs (a zombie does not count).
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks whether the process exists.
    let exists = unsafe { libc::kill(pid, 0) } == 0;
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_string)))
        .is_some_and(|state| state == "Z");
    exists && !zombie
}

fn canonical(p: &Path) -> String {
    p.canonicalize().expect("canonical path").to_str().expect("UTF-8 path").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_starts_a_background_server_and_down_stops_it() {
    let env = Env::new();
    let repo = git_repo(env.tmp.path(), "My_Widgets", "trunk");
    let repo_arg = repo.to_str().expect("UTF-8 path");

    let out = env.aoctl(&["up", repo_arg]);
    out.ok();
    assert!(out.stdout.contains("server started (pid "), "{out}");
    assert!(out.stdout.contains("project/my-widgets created"), "{out}");
    let pid = env.pid().unwrap_or_else(|| panic!("no pid file in the data dir after up:\n{out}"));
    assert!(alive(pid), "the background server (pid {pid}) is not running");
    assert!(out.stdout.contains(&format!("pid {pid}")), "{out}");

    let (code, p) = env.get(&format!("{API}/projects/my-widgets")).await.expect("the server answers");
    assert_eq!(code, 200, "{p}");
    assert_eq!(p["spec"]["path"], canonical(&repo), "{p}");
    assert_eq!(p["spec"]["defaultBranch"], "trunk", "the default branch comes from the repository: {p}");

    // The project controller of the background server inspects the repository.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, p) = env.get(&format!("{API}/projects/my-widgets")).await.expect("the server answers");
        if p["status"]["conditions"][0]["status"] == "True" {
            assert_eq!(p["status"]["defaultBranch"], "trunk", "{p}");
            break;
        }
        assert!(Instant::now() < deadline, "the project never became Ready: {p}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let again = env.aoctl(&["up", repo_arg]);
    again.ok();
    assert!(again.stdout.contains("server already running"), "{again}");
    assert!(again.stdout.contains("project/my-widgets unchanged"), "{again}");
    assert_eq!(env.pid(), Some(pid), "a second up started another server");
    let out = env.aoctl(&["get", "projects", "-o", "name"]);
    assert_eq!(out.ok().stdout, "project/my-widgets\n", "{out}");

    let down = env.aoctl(&["down"]);
    down.ok();
    assert!(down.stdout.contains(&format!("server stopped (pid {pid})")), "{down}");
    assert!(!env.pid_file().exists(), "down left the pid file");
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(Instant::now() < deadline, "the server (pid {pid}) still runs after down");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(env.get("/healthz").await.is_none(), "something still answers on {}", env.server);

    let out = env.aoctl(&["down"]);
    assert_eq!(out.code, 1, "down without a server is a failure:\n{out}");
    assert!(out.stderr.contains("no background server"), "{out}");

    // The store outlives the server: up again finds the project it made before.
    let out = env.aoctl(&["up", repo_arg]);
    out.ok();
    assert!(out.stdout.contains("project/my-widgets unchanged"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_with_orchestrator_gives_the_project_its_orchestrator_session() {
    let env = Env::new();
    let repo = git_repo(env.tmp.path(), "fleet", "main");
    let repo_arg = repo.to_str().expect("UTF-8 path");
    env.aoctl(&["up", repo_arg]).ok();
    // Its agent waits quietly, so nothing reaches a model.
    let agent = json!({"spec": {"defaults": {"agent": {"command": ["sleep", "600"]}}}});
    let (code, p) = env.merge_patch(&format!("{API}/projects/fleet"), agent).await;
    assert_eq!(code, 200, "{p}");

    let out = env.aoctl(&["up", repo_arg, "--orchestrator=Ship the rate limiter"]);
    out.ok();
    assert!(out.stdout.contains("project/fleet configured"), "{out}");
    assert!(out.stdout.contains("session \"fleet-orchestrator\" is the project's orchestrator"), "{out}");
    let path = format!("{API}/sessions/fleet-orchestrator");
    let s = env
        .until(&path, "the orchestrator Session is made", |s| {
            s.is_some_and(|s| s["status"]["workspace"]["path"].is_string())
        })
        .await
        .unwrap();
    assert_eq!(s["spec"]["role"], "orchestrator", "{s}");
    assert_eq!(s["spec"]["prompt"], "Ship the rate limiter", "{s}");
    assert_eq!(s["spec"]["workspace"]["kind"], "readonly", "{s}");
    assert_eq!(s["status"]["workspace"].get("branch").and_then(Value::as_str).unwrap_or(""), "", "{s}");
    assert_eq!(s["metadata"]["ownerReferences"][0]["name"], "fleet", "{s}");
    let checkout = PathBuf::from(s["status"]["workspace"]["path"].as_str().unwrap());
    assert!(checkout.join("README.md").exists() || checkout.read_dir().is_ok_and(|mut d| d.next().is_some()));

    // An orchestrator the project has stays as it is.
    let again = env.aoctl(&["up", repo_arg, "--orchestrator=Another goal"]);
    assert!(again.ok().stdout.contains("project/fleet unchanged"), "{again}");
    let (_, p) = env.get(&format!("{API}/projects/fleet")).await.unwrap();
    assert_eq!(p["spec"]["orchestrator"]["prompt"], "Ship the rate limiter", "{p}");

    // Taking spec.orchestrator away removes the Session, and with it its agent and checkout.
    let (code, p) = env.merge_patch(&format!("{API}/projects/fleet"), json!({"spec": {"orchestrator": null}})).await;
    assert_eq!(code, 200, "{p}");
    env.until(&path, "the orchestrator Session is removed", |s| s.is_none()).await;
    assert!(!checkout.exists(), "its checkout is removed");
}
