//! Fixtures of the pull-request tests (github_loop.rs, webhooks.rs, ratelimit.rs): the GitHub
//! stand-in of e2e/github-standin as a child process, a bare `origin.git` whose `main` holds the
//! scripted agent and a clone of it as the project's path, an aoctl server that has the token and
//! the webhook secret, a local receiver for webhook notifications, signing, and metric reads.

use std::ffi::OsStr;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{Server, API};
use crate::lifecycle::{git, git_out};

/// The token the stand-in requires and the server reads from `GITHUB_TOKEN`.
pub(crate) const TOKEN: &str = "ghp_e2eStandInToken0123456789";
/// The token of a second GitHub identity, a reviewer bot, which the server reads from
/// `AOCTL_REVIEW_TOKEN` (a project's `spec.review.tokenEnv` names it).
pub(crate) const REVIEW_TOKEN: &str = "ghp_e2eReviewBotToken0123456789";
/// The login of that identity.
pub(crate) const REVIEW_BOT: &str = "octo-review-bot";
/// The variable the server reads it from.
pub(crate) const REVIEW_TOKEN_ENV: &str = "AOCTL_REVIEW_TOKEN";
/// A person invited to collaborate on the stand-in's repository (its `author_association` is
/// `COLLABORATOR`), as the people who review a team's pull requests are: the tests' reviewer.
pub(crate) const COLLABORATOR: &str = "octo-reviewer";
/// The webhook secret the stand-in signs with and the server reads from `AOCTL_WEBHOOK_SECRET`.
pub(crate) const SECRET: &str = "e2e-webhook-secret";
/// The repository of the pull-request tests.
pub(crate) const REPO: &str = "acme/widgets";
/// The scripted agent, committed as `scripts/agent.sh`.
const DEMO_AGENT: &str = include_str!("../agents/demo-agent");
/// How long a stand-in may take to print its port (the GitLab one generates its schemas on its
/// first start).
const LISTEN_TIMEOUT: Duration = Duration::from_secs(60);

/// The folder of a stand-in: `github-standin`, `gitlab-standin` or `linear-standin`.
fn standin_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e").join(name)
}

/// Runs `npm ci` in a stand-in's folder once, when its `node_modules` is missing.
fn ensure_node_modules(name: &str) {
    static DONE: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut done = DONE.lock();
    let dir = standin_dir(name);
    if done.iter().any(|d| d == name) || dir.join("node_modules").is_dir() {
        done.push(name.to_string());
        return;
    }
    let out = Command::new("npm").arg("ci").current_dir(&dir).output().expect("npm runs");
    assert!(out.status.success(), "npm ci in {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    done.push(name.to_string());
}

/// The server environment that lets it talk to the stand-in and check its webhooks.
pub(crate) fn gh_env() -> [(&'static str, &'static OsStr); 3] {
    [
        ("GITHUB_TOKEN", OsStr::new(TOKEN)),
        ("AOCTL_WEBHOOK_SECRET", OsStr::new(SECRET)),
        (REVIEW_TOKEN_ENV, OsStr::new(REVIEW_TOKEN)),
    ]
}

/// `sha256=<hex>`: the `X-Hub-Signature-256` of `body` under `secret`, computed by openssl.
pub(crate) fn sign(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hmac_hex(secret, body))
}

/// The hex HMAC-SHA256 of `body` under `secret`, computed by openssl.
pub(crate) fn hmac_hex(secret: &str, body: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("openssl")
        .args(["dgst", "-sha256", "-hmac", secret])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl runs");
    child.stdin.take().expect("stdin is piped").write_all(body).expect("write to openssl");
    let out = child.wait_with_output().expect("openssl finishes");
    assert!(out.status.success(), "openssl: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = text.trim().rsplit(' ').next().unwrap_or_default();
    assert_eq!(hex.len(), 64, "openssl printed {text:?}");
    hex.to_string()
}

/// A running `node server.js` of a stand-in, killed when dropped.
pub(crate) struct StandIn {
    child: Child,
    pub base: String,
    log: PathBuf,
    http: reqwest::Client,
    token: String,
}

impl StandIn {
    /// Starts the GitHub stand-in for `repo` backed by the bare repository `git_dir`, requiring
    /// [`TOKEN`]; with `webhook_url`, every action it announces is POSTed there signed with
    /// [`SECRET`]. Its stderr goes to `dir/standin.log`.
    pub(crate) fn start(dir: &Path, repo: &str, git_dir: &Path, webhook_url: Option<&str>) -> StandIn {
        let mut args: Vec<std::ffi::OsString> = vec!["--repo".into(), repo.into(), "--git-dir".into(), git_dir.into()];
        args.extend(["--token".into(), TOKEN.into()]);
        args.extend(["--identity".into(), format!("{REVIEW_TOKEN}={REVIEW_BOT}").into()]);
        args.extend(["--collaborator".into(), COLLABORATOR.into()]);
        if let Some(url) = webhook_url {
            args.extend(["--webhook-url".into(), url.into(), "--webhook-secret".into(), SECRET.into()]);
        }
        StandIn::launch(dir, "github-standin", &args, TOKEN)
    }

    /// Starts the stand-in in folder `name` with `args` (after `--port 0`); control and API calls
    /// carry `token`. Its stderr goes to `dir/<name>.log`.
    pub(crate) fn launch(dir: &Path, name: &str, args: &[std::ffi::OsString], token: &str) -> StandIn {
        ensure_node_modules(name);
        let log = dir.join(if name == "github-standin" { "standin.log".to_string() } else { format!("{name}.log") });
        let mut cmd = Command::new("node");
        cmd.arg(standin_dir(name).join("server.js")).args(["--port", "0"]).args(args);
        let err = fs::File::create(&log).expect("create the stand-in log");
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(err).spawn().expect("node starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = line.strip_prefix("listening on ") {
                    let _ = tx.send(addr.trim().to_string());
                }
            }
        });
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("HTTP client");
        let mut s = StandIn { child, base: String::new(), log, http, token: token.to_string() };
        match rx.recv_timeout(LISTEN_TIMEOUT) {
            Ok(addr) => s.base = format!("http://{addr}"),
            Err(_) => panic!("{name} printed no `listening on` line; its stderr:\n{}", s.log_text()),
        }
        s
    }

    pub(crate) fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends a request to the stand-in; the status and the JSON body (`Null` when not JSON).
    pub(crate) async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("HTTP method");
        let mut r = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(b) = body {
            r = r.json(b);
        }
        let resp = r.send().await.unwrap_or_else(|e| panic!("stand-in {path}: {e}\n{}", self.log_text()));
        let code = resp.status().as_u16();
        let bytes = resp.bytes().await.expect("stand-in body");
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// A control or API call that must succeed; its JSON body.
    pub(crate) async fn ok(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (code, v) = self.call(method, path, body).await;
        assert!((200..300).contains(&code), "stand-in {method} {path} answered {code}: {v:#}");
        v
    }

    /// Adds a completed check run to `sha`; the stand-in's answer, with its webhook deliveries.
    pub(crate) async fn check_run(&self, sha: &str, name: &str, conclusion: &str, log: &str) -> Value {
        let body = json!({"sha": sha, "name": name, "conclusion": conclusion, "log": log});
        self.ok("POST", "/_standin/check-runs", Some(&body)).await
    }

    /// Submits a review of pull request `number`.
    pub(crate) async fn review(&self, number: u64, user: &str, state: &str, body: &str, comments: Value) -> Value {
        let req = json!({"number": number, "user": user, "state": state, "body": body, "comments": comments});
        self.ok("POST", "/_standin/reviews", Some(&req)).await
    }

    /// The stand-in's state of the first repository.
    pub(crate) async fn repo_state(&self) -> Value {
        self.ok("GET", "/_standin/state", None).await["repos"][0].clone()
    }

    /// Every pull request of the first repository.
    pub(crate) async fn pulls(&self) -> Vec<Value> {
        self.repo_state().await["pulls"].as_array().cloned().unwrap_or_default()
    }

    /// The request counters: `{total, counted, byRoute}`.
    pub(crate) async fn requests(&self) -> Value {
        self.ok("GET", "/_standin/requests", None).await
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("==== stand-in stderr ====\n{}==== end of stand-in stderr ====", self.log_text());
        }
    }
}

/// Every delivery in a stand-in answer was accepted with `code`.
#[track_caller]
pub(crate) fn delivered(answer: &Value, code: u64) {
    let deliveries = answer["deliveries"].as_array().cloned().unwrap_or_default();
    assert!(!deliveries.is_empty(), "no webhook deliveries: {answer:#}");
    for d in &deliveries {
        assert_eq!(d["status"], code, "a webhook delivery: {answer:#}");
    }
}

/// The bare `origin.git` and the clone the project works in.
pub(crate) struct Repos {
    pub bare: PathBuf,
    pub clone: PathBuf,
}

/// Creates `parent/origin.git` whose `main` has one commit with `README.md` and the scripted agent
/// as `scripts/agent.sh`, and clones it to `parent/widgets`.
pub(crate) fn repos(parent: &Path) -> Repos {
    let bare = parent.join("origin.git");
    fs::create_dir_all(&bare).expect("create origin.git");
    git(&bare, &["init", "-q", "--bare", "-b", "main"]);
    let seed = parent.join("seed");
    fs::create_dir_all(seed.join("scripts")).expect("create the seed repository");
    git(&seed, &["init", "-q", "-b", "main"]);
    fs::write(seed.join("README.md"), "# widgets\n").expect("write README");
    let agent = seed.join("scripts/agent.sh");
    fs::write(&agent, DEMO_AGENT).expect("write the scripted agent");
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).expect("make the agent executable");
    git(&seed, &["add", "."]);
    git(&seed, &["commit", "-q", "-m", "Initial commit with the scripted agent"]);
    git(&seed, &["push", "-q", bare.to_str().expect("UTF-8 path"), "main"]);
    let clone = parent.join("widgets");
    git(parent, &["clone", "-q", bare.to_str().expect("UTF-8 path"), clone.to_str().expect("UTF-8 path")]);
    Repos { bare: bare.canonicalize().expect("bare path"), clone: clone.canonicalize().expect("clone path") }
}

/// The commit `branch` points at in a repository, if it exists.
pub(crate) fn head(repo: &Path, branch: &str) -> Option<String> {
    git_out(repo, &["rev-parse", "--verify", "-q", &format!("refs/heads/{branch}")]).filter(|s| !s.is_empty())
}

/// Records the JSON bodies POSTed to it: the target of a project's `webhook` notifier.
pub(crate) struct Notifications {
    pub url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Notifications {
    pub(crate) async fn start() -> Notifications {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the receiver");
        let url = format!("http://{}/hook", listener.local_addr().expect("receiver address"));
        let bodies = Arc::new(Mutex::new(vec![]));
        let seen = bodies.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    if let Some(body) = read_request(&mut conn).await {
                        seen.lock().push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                    }
                    let ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
                    let _ = conn.write_all(ok.as_bytes()).await;
                });
            }
        });
        Notifications { url, bodies, task }
    }

    /// The bodies received so far.
    pub(crate) fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().clone()
    }
}

impl Drop for Notifications {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one HTTP/1.1 request; its body.
async fn read_request(conn: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut buf = vec![];
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = conn.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let len: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    while buf.len() < end + len {
        let n = conn.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf[end..end + len].to_vec())
}

/// One pull-request test's world: an aoctl server with the GitHub environment, the repositories,
/// the stand-in and the notification receiver. The server is dropped (and its agents' tmux
/// server stopped) before the stand-in.
pub(crate) struct Gh {
    pub server: Server,
    pub standin: StandIn,
    pub repos: Repos,
    pub notes: Notifications,
}

impl Gh {
    /// Starts everything; with `webhooks`, the stand-in announces its actions to the server.
    pub(crate) async fn start(repo: &str, webhooks: bool) -> Gh {
        Gh::start_with_env(repo, webhooks, &[]).await
    }

    /// Like [`Gh::start`], the server also getting `extra` in its environment.
    pub(crate) async fn start_with_env(repo: &str, webhooks: bool, extra: &[(&str, &OsStr)]) -> Gh {
        let mut env: Vec<(&str, &OsStr)> = gh_env().to_vec();
        env.extend_from_slice(extra);
        let server = Server::start_with_env(&env).await;
        let repos = repos(server.tmp.path());
        let hook = webhooks.then(|| server.url("/webhooks/github"));
        let standin = StandIn::start(server.tmp.path(), repo, &repos.bare, hook.as_deref());
        let notes = Notifications::start().await;
        Gh { server, standin, repos, notes }
    }

    /// A Project for the clone on `repo`, polling GitHub every `poll`, with `reactions`.
    pub(crate) fn project(&self, name: &str, repo: &str, poll: &str, reactions: Value) -> Value {
        json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": name},
            "spec": {"path": self.repos.clone, "repo": repo,
                "github": {"apiUrl": self.standin.base, "pollInterval": poll},
                "reactions": reactions,
                "notifiers": [{"type": "webhook", "url": self.notes.url}]}})
    }

    /// SIGKILL and restart of the server, with the GitHub environment, on the same port.
    pub(crate) async fn restart(&mut self) {
        self.server.restart_with_env(&gh_env()).await;
    }

    /// Waits until the project is Ready.
    pub(crate) async fn project_ready(&self, name: &str) {
        self.server.wait_for("projects", name, Duration::from_secs(30), |p| is(p, "Ready", "True")).await;
    }
}

/// A Session running the scripted agent that wants a pull request, with `extra` in its spec.
pub(crate) fn session(name: &str, project: &str, prompt: &str, extra: Value) -> Value {
    let mut s = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
        "spec": {"project": project, "prompt": prompt,
            "agent": {"command": ["./scripts/agent.sh", "{promptFile}"]},
            "pullRequest": {"create": true}}});
    if let (Some(spec), Value::Object(e)) = (s["spec"].as_object_mut(), extra) {
        spec.extend(e);
    }
    s
}

/// The condition `type_` of an object, or `Null`.
pub(crate) fn cond(obj: &Value, type_: &str) -> Value {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Whether the condition `type_` has this status.
pub(crate) fn is(obj: &Value, type_: &str, status: &str) -> bool {
    cond(obj, type_)["status"] == status
}

/// Whether the condition `type_` has this status and reason.
pub(crate) fn has(obj: &Value, type_: &str, status: &str, reason: &str) -> bool {
    let c = cond(obj, type_);
    c["status"] == status && c["reason"] == reason
}

/// The sum of the samples of metric `name` (exactly) whose labels include every pair of `labels`.
pub(crate) async fn metric(server: &Server, name: &str, labels: &[(&str, &str)]) -> f64 {
    let text = server.get_path("/metrics").await.text();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' ')))
        .filter(|l| labels.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// How many times `needle` occurs in `text`.
pub(crate) fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

/// The session object; panics when it does not exist.
pub(crate) async fn get_session(server: &Server, name: &str) -> Value {
    server.get_path(&format!("{API}/sessions/{name}")).await.expect(200)
}
