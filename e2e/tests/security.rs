//! The attacks docs/security.md defends against, tried on the real binary, each refused with the
//! store and the agent unchanged: a web page's "simple" request (an `Origin` of its own, `text/plain`), DNS rebinding
//! (a `Host` of the attacker's), no token, a wrong one, one in the query string, a replayed
//! webhook (after a restart too); and what stays easy: the token made at first start (0600) that
//! the CLI finds by itself. The docker sandbox's escapes are tried from inside a real container
//! in docker_sandbox.rs.

use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{project, Resp, Server, API, NO_REPO};
use crate::lifecycle::READY;
use crate::observability::{agent_repo, agent_session};

/// A raw request with exactly these headers (none added but the token when `token` is set).
async fn raw(server: &Server, method: &str, path: &str, headers: &[(&str, &str)], body: &str, token: bool) -> Resp {
    let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut r = server.http.request(m, server.url(path));
    if token {
        r = r.bearer_auth(&server.token);
    }
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    if !body.is_empty() {
        r = r.body(body.to_string());
    }
    let resp = r.send().await.expect("request");
    let code = resp.status().as_u16();
    assert!(
        !resp.headers().keys().any(|k| k.as_str().starts_with("access-control-")),
        "{method} {path} sent CORS headers: {:?}",
        resp.headers()
    );
    Resp { code, body: resp.bytes().await.expect("body").to_vec() }
}

/// One refused request: what it is, method, path, headers, body, whether it carries the token,
/// and the code it gets.
type Attack<'a> = (&'a str, &'a str, &'a str, Vec<(&'a str, &'a str)>, &'a str, bool, u16);

/// The session's transcript as `aoctl logs` shows it.
async fn transcript(server: &Server, name: &str) -> String {
    server.get_path(&format!("{API}/sessions/{name}/log")).await.text()
}

/// Waits until the transcript shows `needle`; panics with it after a while.
async fn transcript_shows(server: &Server, name: &str, needle: &str) {
    for _ in 0..200 {
        if transcript(server, name).await.contains(needle) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the agent never showed {needle:?}:\n{}", transcript(server, name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_pages_rebinding_and_requests_without_the_token_cannot_reach_the_agent() {
    let server = Server::start().await;
    let repo = agent_repo(server.tmp.path(), "victim");
    server.create("projects", &project("victim", repo.to_str().expect("UTF-8 path"))).await;
    server.create("sessions", &agent_session("target", "victim")).await;
    server.wait_for("sessions", "target", READY, |s| s["status"]["phase"] == "Idle").await;
    let before = server.settle().await;
    let input = format!("{API}/sessions/target/input");
    let typed = r#"{"text": "pwned-by-a-web-page"}"#;
    let port = server.port.to_string();
    let evil_host = format!("evil.example:{port}");
    let own_origin = format!("http://127.0.0.1:{port}");
    let list = format!("{API}/sessions");

    // (what, method, path, headers, body, with the token, expected code)
    let cases: Vec<Attack> = vec![
        (
            "a page's fetch: text/plain and its own Origin, no token",
            "POST",
            &input,
            vec![("content-type", "text/plain;charset=UTF-8"), ("origin", "http://evil.example")],
            typed,
            false,
            403,
        ),
        (
            "the same fetch, had the page the token",
            "POST",
            &input,
            vec![("content-type", "text/plain;charset=UTF-8"), ("origin", "http://evil.example")],
            typed,
            true,
            403,
        ),
        (
            "text/plain from our own origin, with the token",
            "POST",
            &input,
            vec![("content-type", "text/plain"), ("origin", &own_origin)],
            typed,
            true,
            415,
        ),
        (
            "a form post",
            "POST",
            &input,
            vec![("content-type", "application/x-www-form-urlencoded")],
            "text=pwned-by-a-web-page",
            true,
            415,
        ),
        ("a body without a content type", "POST", &input, vec![], typed, true, 415),
        ("a cross-site fetch of a list", "GET", &list, vec![("sec-fetch-site", "cross-site")], "", true, 403),
        (
            "DNS rebinding: the attacker's name resolving to 127.0.0.1",
            "POST",
            &input,
            vec![("host", &evil_host), ("content-type", "application/json")],
            typed,
            true,
            403,
        ),
        (
            "a rebound page reading the sessions",
            "GET",
            &list,
            vec![("host", &evil_host), ("origin", "http://evil.example:7420")],
            "",
            true,
            403,
        ),
        ("rebinding the open /healthz", "GET", "/healthz", vec![("host", &evil_host)], "", false, 403),
        ("no token", "POST", &input, vec![("content-type", "application/json")], typed, false, 401),
        (
            "a wrong token",
            "POST",
            &input,
            vec![("content-type", "application/json"), ("authorization", "Bearer not-the-token")],
            typed,
            false,
            401,
        ),
        ("no token for the metrics", "GET", "/metrics", vec![], "", false, 401),
    ];
    for (what, method, path, headers, body, token, code) in &cases {
        let r = raw(&server, method, path, headers, body, *token).await;
        let reason = match code {
            401 => "Unauthorized",
            403 => "Forbidden",
            _ => "UnsupportedMediaType",
        };
        assert_eq!(r.code, *code, "{what}: {}", r.text());
        r.expect_status(*code, reason);
    }
    // The token in the query string, as some tools put it, is no token.
    for q in ["token", "access_token", "bearer"] {
        let path = format!("{input}?{q}={}", server.token);
        let r = raw(&server, "POST", &path, &[("content-type", "application/json")], typed, false).await;
        r.expect_status(401, "Unauthorized");
    }

    // A rebound page's attempt at code execution: a Session whose agent is any command.
    let marker = server.tmp.path().join("rebinding-ran");
    let evil = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": "evil"},
        "spec": {"project": "victim", "agent": {"command": ["/bin/sh", "-c", format!("touch {}", marker.display())]}}});
    let evil = evil.to_string();
    for (headers, token) in [
        (vec![("host", evil_host.as_str()), ("content-type", "application/json")], true),
        (vec![("content-type", "text/plain"), ("origin", "http://evil.example")], false),
        (vec![("content-type", "application/json")], false),
    ] {
        let r = raw(&server, "POST", &format!("{API}/sessions"), &headers, &evil, token).await;
        assert!(matches!(r.code, 401 | 403 | 415), "{headers:?}: {}", r.text());
    }

    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!marker.exists(), "a refused request ran a command");
    assert!(server.object("sessions", "evil").await.is_none());
    let after = server.settle().await;
    assert!(after == before, "a refused request changed the store");
    assert!(!transcript(&server, "target").await.contains("pwned"), "a refused request reached the agent");

    // The same message, sent as the API asks, arrives: the checks above could have failed.
    let r =
        raw(&server, "POST", &input, &[("content-type", "application/json")], r#"{"text": "hello-from-aoctl"}"#, true)
            .await;
    r.expect(200);
    transcript_shows(&server, "target", "got: hello-from-aoctl").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_made_private_at_first_start_and_the_cli_finds_it() {
    use std::os::unix::fs::PermissionsExt;

    let mut server = Server::start().await;
    let file = server.data_dir.join("token");
    let mode = std::fs::metadata(&file).expect("the token file").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the token file's mode is {mode:o}");
    let dir_mode = std::fs::metadata(&server.data_dir).expect("the data dir").permissions().mode();
    assert_eq!(dir_mode & 0o077, 0, "the data dir is open to others: {dir_mode:o}");
    assert_eq!(server.token.len(), 64, "{}", server.token);

    // The CLI, given only the data dir, needs nothing else; `localhost` is this machine too.
    let out = server.aoctl_stdin(
        &["apply", "-f", "-"],
        &format!("apiVersion: ao.dev/v1alpha1\nkind: Project\nmetadata: {{name: found}}\nspec: {{path: {NO_REPO}}}\n"),
    );
    out.ok();
    let mut cmd = server.cli();
    cmd.args(["--server", &format!("http://localhost:{}", server.port), "get", "projects", "-o", "name"]);
    let out = crate::harness::run(cmd, None);
    out.ok();
    assert_eq!(out.stdout, "project/found\n", "{out}");
    // Without the data dir it has no token, and says where the token lives.
    let mut cmd = crate::harness::command(&server.home);
    cmd.env("AOCTL_SERVER", &server.base).args(["get", "projects"]);
    let out = crate::harness::run(cmd, None);
    out.code(1);
    assert!(out.stderr.contains("Unauthorized") && out.stderr.contains("--token"), "{out}");

    // A restart keeps the token: clients that read it once keep working.
    let token = server.token.clone();
    server.restart().await;
    assert_eq!(server.token, token, "the token changed across a restart");
    assert_eq!(std::fs::read_to_string(&file).expect("token").trim(), token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_webhook_is_acknowledged_and_ignored() {
    let server = Server::start().await;
    let secret = "e2e-replay-secret";
    let mut p: Value = project("hooked", NO_REPO);
    p["spec"]["repo"] = json!("Octocoders/Hello-World");
    p["spec"]["github"] = json!({"webhookSecretEnv": "AOCTL_E2E_REPLAY_SECRET"});
    server.create("projects", &p).await;
    // The secret is read from the controller's environment: restart with it.
    let mut server = server;
    server.restart_with_env(&[("AOCTL_E2E_REPLAY_SECRET", std::ffi::OsStr::new(secret))]).await;
    // GitHub's own example `ping` (the fixtures of the github crate), about Octocoders/Hello-World.
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../controller/github/tests/fixtures/webhooks/ping.json");
    let body = std::fs::read_to_string(fixture).expect("the ping fixture");
    let signature = crate::standin::sign(secret, body.as_bytes());
    let first = ping(&server, &body, "d6f1c2a0-0001", &signature).await;
    assert_eq!(first.expect(200)["message"], "pong", "{}", first.text());
    let replay = ping(&server, &body, "d6f1c2a0-0001", &signature).await;
    let v = replay.expect(200);
    assert!(v["message"].as_str().is_some_and(|m| m.contains("already received")), "{v}");
    assert!(server.log_text().contains("replayed webhook delivery ignored"), "{}", server.log_text());
    // A new delivery id is a new delivery; a forged signature is still refused, replay or not.
    assert_eq!(ping(&server, &body, "d6f1c2a0-0002", &signature).await.expect(200)["message"], "pong");
    ping(&server, &body, "d6f1c2a0-0003", "sha256=00").await.expect_status(401, "Unauthorized");
    ping(&server, &body, "d6f1c2a0-0002", "sha256=00").await.expect_status(401, "Unauthorized");
    // Without the delivery id there is nothing to tell a replay by.
    let headers =
        [("content-type", "application/json"), ("x-github-event", "ping"), ("x-hub-signature-256", signature.as_str())];
    raw(&server, "POST", "/webhooks/github", &headers, &body, false).await.expect_status(400, "BadRequest");

    // Each delivery taken is recorded in the store, as an Event about the project.
    let events = server.get_path(&format!("{API}/events?fieldSelector=reason%3DWebhookReceived")).await.expect(200);
    let recorded: Vec<&Value> = events["items"].as_array().expect("items").iter().collect();
    assert_eq!(recorded.len(), 2, "{events:#}");
    assert!(recorded.iter().all(|e| e["involvedObject"]["name"] == "hooked"), "{events:#}");
    // So a replay after a crash and a restart (memory lost) is still ignored.
    server.restart_with_env(&[("AOCTL_E2E_REPLAY_SECRET", std::ffi::OsStr::new(secret))]).await;
    for id in ["d6f1c2a0-0001", "d6f1c2a0-0002"] {
        let v = ping(&server, &body, id, &signature).await.expect(200);
        assert!(v["message"].as_str().is_some_and(|m| m.contains("already received")), "{id} after a restart: {v}");
    }
    assert_eq!(ping(&server, &body, "d6f1c2a0-0004", &signature).await.expect(200)["message"], "pong");
}

/// GitHub's `ping` delivery `body` with the delivery id `id` and the signature header `signature`.
async fn ping(server: &Server, body: &str, id: &str, signature: &str) -> Resp {
    let headers = [
        ("content-type", "application/json"),
        ("x-github-event", "ping"),
        ("x-github-delivery", id),
        ("x-hub-signature-256", signature),
    ];
    raw(server, "POST", "/webhooks/github", &headers, body, false).await
}
