//! Logs, end to end: `serve --log-format json` writes JSON lines with one span per reconcile, and
//! never the GitHub token, which a fake GitHub receives.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{command, free_port, terminate, token_of, API};
use crate::observability::{agent_repo, agent_session, assert_promtool_ok, promtool, Exposition, READY};

/// `aoctl serve --log-format json` with extra environment, its stderr in a file.
struct JsonServe {
    tmp: tempfile::TempDir,
    child: Option<Child>,
    base: String,
    log: PathBuf,
    http: reqwest::Client,
    token: String,
}

impl JsonServe {
    async fn start(env: &[(&str, &str)]) -> JsonServe {
        let tmp = tempfile::Builder::new().prefix("aoctl-e2e-logs-").tempdir().expect("tempdir");
        let home = tmp.path().join("home");
        fs::create_dir_all(&home).expect("create HOME");
        let log = tmp.path().join("server.log");
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("HTTP client");
        for _ in 0..5 {
            let port = free_port();
            let base = format!("http://127.0.0.1:{port}");
            let mut cmd = command(&home);
            cmd.envs(env.iter().copied());
            cmd.args(["serve", "--log-format", "json", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"]);
            cmd.arg(tmp.path().join("data"));
            let out = fs::File::create(&log).expect("create the log");
            cmd.stdin(Stdio::null()).stdout(out.try_clone().expect("log handle")).stderr(out);
            let mut child = cmd.spawn().expect("aoctl serve starts");
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline && child.try_wait().ok().flatten().is_none() {
                let ready = http.get(format!("{base}/readyz")).send().await;
                if ready.is_ok_and(|r| r.status().is_success()) {
                    let token = token_of(&tmp.path().join("data"));
                    return JsonServe { tmp, child: Some(child), base, log, http, token };
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let _ = child.kill();
            let _ = child.wait();
            let text = fs::read_to_string(&log).unwrap_or_default();
            assert!(text.contains("cannot listen"), "the server did not become ready:\n{text}");
        }
        panic!("no free port after 5 attempts");
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn post(&self, plural: &str, obj: &Value) {
        let url = format!("{}{API}/{plural}", self.base);
        let r = self.http.post(url).bearer_auth(&self.token).json(obj).send().await.expect("POST");
        let code = r.status().as_u16();
        assert_eq!(code, 201, "create {plural}: {}", r.text().await.unwrap_or_default());
    }

    async fn get_text(&self, path: &str) -> String {
        let r = self.http.get(format!("{}{path}", self.base)).bearer_auth(&self.token).send().await.expect("GET");
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.text().await.expect("body")
    }

    /// SIGTERM (the server drains and logs its shutdown), then SIGKILL after 10 s.
    fn stop(&mut self) {
        if let Some(c) = self.child.take() {
            terminate(c, Duration::from_secs(10));
        }
    }
}

impl Drop for JsonServe {
    fn drop(&mut self) {
        self.stop();
        let sock = self.tmp.path().join("data").join("tmux.sock");
        if sock.exists() {
            let _ = Command::new("tmux").arg("-S").arg(&sock).arg("kill-server").output();
        }
        if std::thread::panicking() {
            eprintln!("==== server log ====\n{}==== end of server log ====", self.log_text());
        }
    }
}

/// A stand-in for the GitHub REST API that answers every request with an empty list (the first
/// with 401) and rate-limit headers, and keeps each request's head.
async fn fake_github() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the fake GitHub");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let heads = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let heads = heads.clone();
            tokio::spawn(async move {
                let mut buf = vec![];
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let first = {
                    let mut h = heads.lock();
                    h.push(String::from_utf8_lossy(&buf).into_owned());
                    h.len() == 1
                };
                let reset = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) + 3600;
                let (status, body) = if first {
                    (
                        "401 Unauthorized",
                        r#"{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}"#,
                    )
                } else {
                    ("200 OK", "[]")
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n\
                     X-RateLimit-Limit: 5000\r\nX-RateLimit-Remaining: 4321\r\nX-RateLimit-Used: 679\r\n\
                     X-RateLimit-Reset: {reset}\r\nX-RateLimit-Resource: core\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (base, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_reconcile_spans_and_never_the_github_token() {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let gh_token = format!("ghp_e2eObservabilitySecret{nanos:x}{:x}", std::process::id());
    let (gh, seen) = fake_github().await;
    // Debug everywhere: the most the log can say, and so the likeliest level to leak a secret.
    let server = JsonServe::start(&[("RUST_LOG", "debug"), ("AOCTL_E2E_GH_TOKEN", &gh_token)]).await;
    let repo = agent_repo(server.tmp.path(), "logged");
    server
        .post(
            "projects",
            &json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": "logged"},
                "spec": {"path": repo, "repo": "octo/logged",
                    "github": {"apiUrl": gh, "tokenEnv": "AOCTL_E2E_GH_TOKEN", "pollInterval": "1s"}}}),
        )
        .await;
    server.post("sessions", &agent_session("logged-1", "logged")).await;

    // The controller polls GitHub for the session's pull request with the token.
    let deadline = Instant::now() + READY;
    loop {
        let authed = seen
            .lock()
            .iter()
            .filter(|h| {
                h.lines().any(|l| l.to_ascii_lowercase().starts_with("authorization:") && l.contains(&gh_token))
            })
            .count();
        if authed >= 3 {
            break;
        }
        assert!(Instant::now() < deadline, "GitHub saw {authed} authenticated requests:\n{}", server.log_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = Exposition::parse(server.get_text("/metrics").await);
    let pulls = "GET /repos/{owner}/{repo}/pulls";
    assert!(metrics.sum("aoctl_github_requests_total", &[("endpoint", pulls), ("code", "401")]) >= 1.0);
    assert!(metrics.sum("aoctl_github_requests_total", &[("endpoint", pulls), ("code", "200")]) >= 1.0);
    assert_eq!(metrics.value("aoctl_github_ratelimit_remaining", &[]), Some(4321.0), "{}", metrics.body);
    let out = promtool(&["check", "metrics"], Some(&metrics.body));
    assert_promtool_ok(&out, &format!("/metrics after GitHub requests:\n{}", metrics.body));

    let mut exposed = metrics.body.clone();
    for plural in ["projects", "sessions", "events"] {
        exposed.push_str(&server.get_text(&format!("{API}/{plural}")).await);
    }
    let mut server = server;
    server.stop();
    let log = server.log_text();

    let mut reconciles: BTreeSet<(String, String)> = BTreeSet::new();
    for (i, line) in log.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("log line {} is not JSON ({e}): {line}", i + 1));
        for key in ["timestamp", "level", "target", "fields"] {
            assert!(!v[key].is_null(), "log line {} has no {key}: {line}", i + 1);
        }
        if v["span"]["name"] == "reconcile" {
            let controller = v["span"]["controller"].as_str().unwrap_or_default().to_string();
            let object = v["span"]["object"].as_str().unwrap_or_default().to_string();
            assert!(!controller.is_empty() && !object.is_empty(), "reconcile span without its object: {line}");
            reconciles.insert((controller, object));
        }
    }
    for want in [("project", "logged"), ("session", "logged-1")] {
        let want = (want.0.to_string(), want.1.to_string());
        assert!(reconciles.contains(&want), "no reconcile line of {want:?}; saw {reconciles:?}");
    }
    assert!(log.contains("\"shutting down\""), "SIGTERM is logged:\n{log}");

    for (what, text) in [("the server log", &log), ("/metrics or the stored objects", &exposed)] {
        if let Some(at) = text.find(&gh_token) {
            let line = text[..at].rfind('\n').map_or(0, |i| i + 1);
            let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
            panic!("the GitHub token appears in {what}: {}", &text[line..end]);
        }
    }
}
