//! The test harness: the real `aoctl serve` on a free port and a scratch data dir, the `aoctl`
//! CLI with a clean environment, real git repositories, raw HTTP helpers and store dumps.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tempfile::TempDir;

/// The binary under test; Cargo builds it before this test target.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_aoctl");
/// Prefix of every resource path.
pub(crate) const API: &str = "/apis/ao.dev/v1alpha1";
/// A project path that does not exist: its project never becomes Ready, so no agent starts for
/// its sessions, and once the controllers have recorded that they leave its objects alone.
pub(crate) const NO_REPO: &str = "/nonexistent/aoctl-e2e/repo";
/// How long a server has to answer `/readyz`.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one CLI invocation may take.
const CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// A free TCP port on the loopback interface (bound, read and released).
pub(crate) fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local address").port()
}

/// Environment variables of the calling shell that would change what `aoctl` does, or what the
/// agents it starts do: `CI` makes many agent CLIs (Ink's apps among them) skip their interactive
/// screen, as they would never do in a person's terminal.
const SCRUBBED: &[&str] = &[
    "AOCTL_SERVER",
    "AOCTL_TOKEN",
    "AOCTL_DATA_DIR",
    "AOCTL_STORE",
    "AOCTL_ETCD_ENDPOINTS",
    "AOCTL_ETCD_PREFIX",
    "AOCTL_NODE",
    "AOCTL_LEASE_TTL",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "RUST_LOG",
    "GIT_DIR",
    "CI",
];

/// A command for the binary with a scrubbed environment and a throwaway HOME.
pub(crate) fn command(home: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    for v in SCRUBBED {
        cmd.env_remove(v);
    }
    cmd.env("HOME", home).env("NO_COLOR", "1");
    cmd
}

/// What a finished CLI invocation printed and how it exited.
#[derive(Clone, Debug)]
pub(crate) struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// Panics, showing everything, unless the command exited 0.
    #[track_caller]
    pub(crate) fn ok(&self) -> &Out {
        assert_eq!(self.code, 0, "expected success:\n{self}");
        self
    }

    /// Panics unless the command exited with `code`.
    #[track_caller]
    pub(crate) fn code(&self, code: i32) -> &Out {
        assert_eq!(self.code, code, "expected exit status {code}:\n{self}");
        self
    }
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}\n--- stdout\n{}--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

/// Runs a prepared command to completion with optional stdin, killing it after `CLI_TIMEOUT`.
pub(crate) fn run(cmd: Command, stdin: Option<&str>) -> Out {
    run_for(cmd, stdin, CLI_TIMEOUT)
}

/// Like [`run`], killing the command after `timeout`; its output is read as it comes, so a
/// command that prints a lot never blocks on a full pipe.
pub(crate) fn run_for(mut cmd: Command, stdin: Option<&str>, timeout: Duration) -> Out {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{cmd:?} cannot start: {e}"));
    if let Some(text) = stdin {
        let mut w = child.stdin.take().expect("stdin is piped");
        let text = text.to_string();
        std::thread::spawn(move || {
            let _ = w.write_all(text.as_bytes());
        });
    }
    let read = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = read(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let err = read(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the command") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Out { code: status.code().unwrap_or(-1), stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

/// A long-running CLI process (such as `get -w`) whose stdout lines arrive on a channel.
pub(crate) struct Streaming {
    child: Child,
    lines: mpsc::Receiver<String>,
    pub seen: Vec<String>,
}

impl Streaming {
    pub(crate) fn spawn(mut cmd: Command) -> Streaming {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = cmd.spawn().expect("aoctl starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Streaming { child, lines, seen: vec![] }
    }

    /// Waits for a line satisfying `pred`; panics with everything seen after `timeout`.
    #[track_caller]
    pub(crate) fn wait_line(&mut self, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Err(_) => panic!("no matching line within {timeout:?}; output so far:\n{}", self.seen.join("\n")),
            }
        }
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Creates a git repository at `parent/name` with one commit on `branch`.
pub(crate) fn git_repo(parent: &Path, name: &str, branch: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).expect("create repository folder");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(&dir)
            .args(["-c", "user.name=aoctl e2e", "-c", "user.email=e2e@aoctl.invalid", "-c", "commit.gpgsign=false"])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", parent)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q", "-b", branch]);
    std::fs::write(dir.join("README.md"), "# e2e\n").expect("write README");
    git(&["add", "README.md"]);
    git(&["commit", "-q", "-m", "Initial commit"]);
    dir.canonicalize().expect("repository path")
}

/// A Project manifest as JSON.
pub(crate) fn project(name: &str, path: &str) -> Value {
    json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": name}, "spec": {"path": path}})
}

/// A Session manifest as JSON.
pub(crate) fn session(name: &str, project: &str, prompt: &str) -> Value {
    json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
        "spec": {"project": project, "prompt": prompt}})
}

/// The `metadata.resourceVersion` of an object.
pub(crate) fn rv(obj: &Value) -> String {
    obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default().to_string()
}

/// A resourceVersion as a number, for ordering (the store's are decimal counters).
pub(crate) fn rv_num(obj: &Value) -> u64 {
    rv(obj).parse().unwrap_or_else(|_| panic!("resourceVersion is not a counter: {obj}"))
}

/// An HTTP response: status code and body.
#[derive(Clone, Debug)]
pub(crate) struct Resp {
    pub code: u16,
    pub body: Vec<u8>,
}

impl Resp {
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; `Null` when it is not JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// Panics unless the code is `code`; returns the JSON body.
    #[track_caller]
    pub(crate) fn expect(&self, code: u16) -> Value {
        assert_eq!(self.code, code, "unexpected response: {}", self.text());
        self.json()
    }

    /// Panics unless this is a Kubernetes-style `Status` error with this code and reason.
    #[track_caller]
    pub(crate) fn expect_status(&self, code: u16, reason: &str) -> Value {
        let v = self.json();
        assert_eq!(self.code, code, "unexpected response: {}", self.text());
        assert_eq!(v["kind"], "Status", "not a Status body: {}", self.text());
        assert_eq!(v["code"], code, "Status.code: {}", self.text());
        assert_eq!(v["reason"], reason, "Status.reason: {}", self.text());
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "Status.message: {}", self.text());
        v
    }
}

/// How to start a server.
#[derive(Clone, Debug, Default)]
pub(crate) struct Options {
    /// Address to listen on; `127.0.0.1` when empty.
    pub host: String,
    /// A bearer token, written to a file passed as `--token-file`.
    pub token: Option<String>,
    /// The data dir on a tmpfs of this many MiB of its own (see [`mount_tmpfs`]).
    pub tmpfs_mib: Option<u32>,
}

pub(crate) use crate::disk::{mount_tmpfs, unmount};

/// Why a tmpfs cannot be mounted here, if it cannot: only a refusal of the permission counts, so
/// a test that needs one skips only where mounting is impossible.
pub(crate) fn tmpfs_refused() -> Option<std::io::Error> {
    let dir = tempfile::tempdir().expect("tempdir");
    match mount_tmpfs(dir.path(), 1) {
        Ok(()) => {
            unmount(dir.path());
            None
        }
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Some(e),
        Err(e) => panic!("mount a tmpfs on {}: {e}", dir.path().display()),
    }
}

/// A running `aoctl serve`, killed when dropped. Its data dir, log and HOME live in a tempdir.
pub(crate) struct Server {
    pub tmp: TempDir,
    pub data_dir: PathBuf,
    pub home: PathBuf,
    pub port: u16,
    pub base: String,
    opts: Options,
    child: Option<Child>,
    log: PathBuf,
    pub http: reqwest::Client,
    /// The bearer token: the one of `Options`, else the one the server made in its data dir.
    pub token: String,
}

/// The token a server keeps in `data_dir` (made at its first start; it exists once `/readyz`
/// answers).
pub(crate) fn token_of(data_dir: &Path) -> String {
    let path = data_dir.join("token");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let token = text.trim().to_string();
    assert!(!token.is_empty(), "{} is empty", path.display());
    token
}

impl Server {
    pub(crate) async fn start() -> Server {
        Server::start_with(Options::default()).await
    }

    pub(crate) async fn start_with(opts: Options) -> Server {
        let tmp = tempfile::Builder::new().prefix("aoctl-e2e-").tempdir().expect("tempdir");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).expect("create HOME");
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("HTTP client");
        let mut s = Server {
            data_dir: tmp.path().join("data"),
            log: tmp.path().join("server.log"),
            home,
            port: 0,
            base: String::new(),
            opts,
            child: None,
            http,
            tmp,
            token: String::new(),
        };
        if let Some(mib) = s.opts.tmpfs_mib {
            std::fs::create_dir_all(&s.data_dir).expect("create the data dir");
            mount_tmpfs(&s.data_dir, mib).unwrap_or_else(|e| panic!("mount a tmpfs on the data dir: {e}"));
        }
        s.launch(true, &[]).await;
        s
    }

    /// Takes the token of a server that just became ready.
    fn learn_token(&mut self) {
        self.token = match &self.opts.token {
            Some(t) => t.clone(),
            None => token_of(&self.data_dir),
        };
    }

    fn host(&self) -> &str {
        if self.opts.host.is_empty() {
            "127.0.0.1"
        } else {
            &self.opts.host
        }
    }

    /// Starts the process, with `env` added to its environment, and waits until it is ready; a
    /// port taken meanwhile means another try.
    /// Starts `aoctl serve` on this server's port and data folder, `env` added to its
    /// environment, its output appended to the log.
    fn spawn_serve(&self, env: &[(&str, &std::ffi::OsStr)]) -> Child {
        let mut cmd = command(&self.home);
        cmd.envs(env.iter().copied());
        cmd.args(["serve", "--listen", &format!("{}:{}", self.host(), self.port), "--data-dir"]);
        cmd.arg(&self.data_dir);
        if let Some(t) = &self.opts.token {
            let f = self.tmp.path().join("token");
            std::fs::write(&f, format!("{t}\n")).expect("write token file");
            cmd.arg("--token-file").arg(f);
        }
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).expect("open log");
        cmd.stdin(Stdio::null()).stdout(log.try_clone().expect("log handle")).stderr(log);
        cmd.spawn().expect("aoctl serve starts")
    }

    async fn launch(&mut self, new_port: bool, env: &[(&str, &std::ffi::OsStr)]) {
        for attempt in 0..5 {
            if new_port || attempt > 0 || self.port == 0 {
                self.port = free_port();
            }
            self.base = format!("http://127.0.0.1:{}", self.port);
            self.child = Some(self.spawn_serve(env));
            match self.wait_ready().await {
                Ok(()) => return self.learn_token(),
                Err(exited) if exited && self.log_text().contains("cannot listen") => continue,
                Err(_) => panic!("the server did not become ready; its log:\n{}", self.log_text()),
            }
        }
        panic!("no free port after 5 attempts; log:\n{}", self.log_text());
    }

    /// `Err(true)` when the process exited, `Err(false)` on timeout.
    async fn wait_ready(&mut self) -> Result<(), bool> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(c) = self.child.as_mut() {
                if c.try_wait().expect("wait for server").is_some() {
                    self.child = None;
                    return Err(true);
                }
            }
            if self.get("/readyz").await.map(|r| r.code == 200).unwrap_or(false) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(false)
    }

    /// Everything the server logged so far (all its runs).
    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL, then reap: no shutdown code runs.
    pub(crate) fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: the pid is that of our own child, which has not been reaped yet.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
            c.wait().expect("reap server");
        }
    }

    /// Starts the server again on the same data dir (and port, when it is still free).
    pub(crate) async fn restart(&mut self) {
        self.kill9();
        self.launch(false, &[]).await;
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request with the server's token (none before it is known: `/readyz` needs none).
    pub(crate) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, self.url(path));
        if self.token.is_empty() {
            r
        } else {
            r.bearer_auth(&self.token)
        }
    }

    /// Sends a request with a raw body and content type.
    pub(crate) async fn send(&self, method: &str, path: &str, content_type: Option<&str>, body: Vec<u8>) -> Resp {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("HTTP method");
        let mut r = self.request(method, path);
        if let Some(ct) = content_type {
            r = r.header(reqwest::header::CONTENT_TYPE, ct);
        }
        if !body.is_empty() {
            r = r.body(body);
        }
        let resp = r.send().await.unwrap_or_else(|e| panic!("{path}: {e}\nserver log:\n{}", self.log_text()));
        let code = resp.status().as_u16();
        Resp { code, body: resp.bytes().await.expect("response body").to_vec() }
    }

    /// Like `send`, for a body the server may refuse before reading it all (413): the server
    /// answers and closes, and the client can see the closed connection before the answer. A
    /// transport error is tried again, a few times; an answer is returned as it is.
    pub(crate) async fn send_oversized(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Resp {
        let mut last = String::new();
        // A connection of its own: the server closes it after refusing, and a pooled one would
        // fail the next request of the test.
        let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("HTTP client");
        for _ in 0..5 {
            let m = reqwest::Method::from_bytes(method.as_bytes()).expect("HTTP method");
            let mut r = http.request(m, self.url(path)).bearer_auth(&self.token);
            if let Some(ct) = content_type {
                r = r.header(reqwest::header::CONTENT_TYPE, ct);
            }
            match r.body(body.clone()).send().await {
                Ok(resp) => {
                    let code = resp.status().as_u16();
                    return Resp { code, body: resp.bytes().await.expect("response body").to_vec() };
                }
                Err(e) => last = e.to_string(),
            }
        }
        panic!("{path}: no answer in 5 attempts: {last}\nserver log:\n{}", self.log_text())
    }

    async fn get(&self, path: &str) -> Result<Resp, reqwest::Error> {
        let resp = self.request(reqwest::Method::GET, path).send().await?;
        let code = resp.status().as_u16();
        Ok(Resp { code, body: resp.bytes().await?.to_vec() })
    }

    pub(crate) async fn get_path(&self, path: &str) -> Resp {
        self.send("GET", path, None, vec![]).await
    }

    /// Polls `/readyz` until it answers `code` (panics after `limit`); returns the body.
    pub(crate) async fn readyz_becomes(&self, code: u16, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let r = self.get_path("/readyz").await;
            if r.code == code {
                return r.text();
            }
            assert!(Instant::now() < deadline, "/readyz still answers {} after {limit:?}: {}", r.code, r.text());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) async fn json(&self, method: &str, path: &str, body: &Value) -> Resp {
        let ct = if method == "PATCH" { "application/merge-patch+json" } else { "application/json" };
        self.send(method, path, Some(ct), serde_json::to_vec(body).expect("JSON")).await
    }

    /// Creates an object through the API; panics unless 201.
    pub(crate) async fn create(&self, plural: &str, obj: &Value) -> Value {
        self.json("POST", &format!("{API}/{plural}"), obj).await.expect(201)
    }

    /// Reads an object; `None` on 404.
    pub(crate) async fn object(&self, plural: &str, name: &str) -> Option<Value> {
        let r = self.get_path(&format!("{API}/{plural}/{name}")).await;
        match r.code {
            404 => None,
            _ => Some(r.expect(200)),
        }
    }

    /// Polls an object until `pred` holds; panics with the last state after `timeout`.
    pub(crate) async fn wait_for(
        &self,
        plural: &str,
        name: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let obj = self.object(plural, name).await.unwrap_or(Value::Null);
            if pred(&obj) {
                return obj;
            }
            if Instant::now() > deadline {
                panic!("{plural}/{name} did not reach the expected state in {timeout:?}: {obj:#}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The list of a kind as returned, byte for byte.
    pub(crate) async fn list_bytes(&self, plural: &str) -> Vec<u8> {
        let r = self.get_path(&format!("{API}/{plural}")).await;
        assert_eq!(r.code, 200, "list {plural}: {}", r.text());
        r.body
    }

    /// The resourceVersion of a list of this kind.
    pub(crate) async fn list_rv(&self, plural: &str) -> String {
        self.get_path(&format!("{API}/{plural}")).await.expect(200)["metadata"]["resourceVersion"]
            .as_str()
            .expect("list resourceVersion")
            .to_string()
    }

    /// The lists of projects, sessions and events, byte for byte, one after the other.
    pub(crate) async fn dump(&self) -> Vec<u8> {
        let mut out = vec![];
        for plural in ["projects", "sessions", "gitsources", "issuesources", "events"] {
            out.extend_from_slice(plural.as_bytes());
            out.push(b'\n');
            out.extend(self.list_bytes(plural).await);
            out.push(b'\n');
        }
        out
    }

    /// Waits until the controllers are done reacting: the dump stays the same for 1.36 s, longer
    /// than an agent's output can defer its session's next look (the transcript watcher wakes a
    /// session at most once a second, and always once after its last output). Returns it.
    pub(crate) async fn settle(&self) -> Vec<u8> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = self.dump().await;
        let mut same = 0;
        while same < 8 {
            assert!(Instant::now() < deadline, "the store kept changing for 20 s:\n{}", String::from_utf8_lossy(&last));
            tokio::time::sleep(Duration::from_millis(170)).await;
            let d = self.dump().await;
            if d == last {
                same += 1;
            } else {
                same = 0;
                last = d;
            }
        }
        last
    }

    /// A CLI invocation against this server.
    pub(crate) fn cli(&self) -> Command {
        let mut cmd = command(&self.home);
        cmd.env("AOCTL_SERVER", &self.base).env("AOCTL_DATA_DIR", &self.data_dir);
        cmd
    }

    /// Runs `aoctl ARGS` against this server.
    pub(crate) fn aoctl(&self, args: &[&str]) -> Out {
        let mut cmd = self.cli();
        cmd.args(args);
        run(cmd, None)
    }

    /// Runs `aoctl ARGS` with `stdin` as standard input.
    pub(crate) fn aoctl_stdin(&self, args: &[&str], stdin: &str) -> Out {
        let mut cmd = self.cli();
        cmd.args(args);
        run(cmd, Some(stdin))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
        // Agents' tmux server, if a controller started one on the data dir's socket.
        let sock = self.data_dir.join("tmux.sock");
        if sock.exists() {
            let _ = Command::new("tmux").arg("-S").arg(&sock).arg("kill-server").output();
        }
        if self.opts.tmpfs_mib.is_some() {
            unmount(&self.data_dir);
        }
        if std::thread::panicking() {
            eprintln!("==== server log ({}) ====\n{}==== end of server log ====", self.log.display(), self.log_text());
        }
    }
}

/// Reads newline-delimited JSON events from a watch response.
pub(crate) struct WatchStream {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

impl WatchStream {
    /// Opens `path` (which carries `watch=true`); panics unless 200.
    pub(crate) async fn open(server: &Server, path: &str) -> WatchStream {
        let http = reqwest::Client::new();
        let resp = http.get(server.url(path)).bearer_auth(&server.token).send().await.expect("watch request");
        assert_eq!(resp.status().as_u16(), 200, "watch {path}");
        WatchStream { resp, buf: vec![] }
    }

    /// The next event, `None` when the stream ended; panics after `timeout` without one.
    pub(crate) async fn next(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Some(
                    serde_json::from_slice(&line)
                        .unwrap_or_else(|e| panic!("watch line is not JSON ({e}): {}", String::from_utf8_lossy(&line))),
                );
            }
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk())
                .await
                .unwrap_or_else(|_| panic!("no watch event within {timeout:?}"))
                .expect("watch stream reads");
            match chunk {
                Some(c) => self.buf.extend_from_slice(&c),
                None => return None,
            }
        }
    }
}

impl Server {
    /// Like [`Server::start`], with `env` added to the server's environment, which the agents'
    /// tmux server and the agents inherit (say, a `PATH` holding an agent CLI the test installed).
    /// A [`Server::restart`] starts the process without them.
    pub(crate) async fn start_with_env(env: &[(&str, &std::ffi::OsStr)]) -> Server {
        let tmp = tempfile::Builder::new().prefix("aoctl-e2e-").tempdir().expect("tempdir");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).expect("create HOME");
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("HTTP client");
        let mut s = Server {
            data_dir: tmp.path().join("data"),
            log: tmp.path().join("server.log"),
            home,
            port: 0,
            base: String::new(),
            opts: Options::default(),
            child: None,
            http,
            tmp,
            token: String::new(),
        };
        s.launch(true, env).await;
        s
    }
}

impl Server {
    /// Kills the server with SIGKILL and starts it again on the same data dir and port with `env`
    /// added to its environment (what [`Server::start_with_env`] gave the first run), waiting until
    /// it is ready. The port is kept so that webhooks aimed at it still arrive.
    pub(crate) async fn restart_with_env(&mut self, env: &[(&str, &std::ffi::OsStr)]) {
        self.kill9();
        for _ in 0..20 {
            self.child = Some(self.spawn_serve(env));
            match self.wait_ready().await {
                Ok(()) => return self.learn_token(),
                Err(true) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(false) => panic!("the restarted server did not become ready; its log:\n{}", self.log_text()),
            }
        }
        panic!("the server could not listen on port {} again; log:\n{}", self.port, self.log_text());
    }
}

impl Server {
    /// Another `aoctl serve` on the same data dir and HOME (one node) with `env` added, on its own
    /// port, with its own log, waited for until ready: a replica of this server's store, which
    /// `env` must name (etcd; a sled store is locked by one process).
    pub(crate) async fn replica(&self, env: &[(&str, &std::ffi::OsStr)]) -> Server {
        let tmp = tempfile::Builder::new().prefix("aoctl-e2e-replica-").tempdir().expect("tempdir");
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("HTTP client");
        let mut s = Server {
            data_dir: self.data_dir.clone(),
            log: tmp.path().join("server.log"),
            home: self.home.clone(),
            port: 0,
            base: String::new(),
            opts: Options::default(),
            child: None,
            http,
            tmp,
            token: String::new(),
        };
        s.launch(true, env).await;
        s
    }

    /// Whether this server leads its store's replicas, from its `/metrics`.
    pub(crate) async fn leads(&self) -> bool {
        let r = self.get_path("/metrics").await;
        r.code == 200 && r.text().lines().any(|l| l.trim() == "aoctl_leader_election_master_status 1")
    }
}

/// Stops a child with SIGTERM, then SIGKILL once `grace` has passed, and reaps it.
pub(crate) fn terminate(mut child: Child, grace: Duration) {
    // SAFETY: the pid is that of our own child, which has not been reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while child.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
