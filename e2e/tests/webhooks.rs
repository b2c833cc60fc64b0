//! `POST /webhooks/github` with GitHub's own example payloads (the fixtures of the github crate,
//! taken from `@octokit/webhooks-examples`): correctly signed ones are accepted (`ping` answered),
//! badly signed or unsigned ones are refused with 401 and change nothing, events aoctl does not use
//! are ignored, and a `check_run` about a session's branch makes aoctl look at GitHub at once,
//! although the project polls only every ten minutes. A `push` signed with a GitSource's own
//! secret wakes the GitSources of that repository.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{git_repo, Resp, Server};
use crate::lifecycle::{Cleanup, READY};
use crate::standin::{has, head, session, sign, Gh, SECRET, TOKEN};

/// The repository of the fixtures' `check_run`, `pull_request`, … deliveries.
const REPO: &str = "Codertocat/Hello-World";
/// The repositories of the `ping` and `workflow_run` fixtures, given projects of their own.
const OTHER_REPOS: [(&str, &str); 2] = [("octocoders", "Octocoders/Hello-World"), ("octo-org", "octo-org/octo-repo")];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../controller/github/tests/fixtures/webhooks")
}

/// Every fixture as (event name, file name, body), the event being the file name's first part.
fn payloads() -> Vec<(String, String, Vec<u8>)> {
    let mut out: Vec<(String, String, Vec<u8>)> = std::fs::read_dir(fixtures())
        .expect("the webhook fixtures")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".json"))
        .map(|f| {
            let event = f.split('.').next().unwrap_or_default().to_string();
            let body = std::fs::read(fixtures().join(&f)).expect("read a fixture");
            (event, f, body)
        })
        .collect();
    out.sort();
    out
}

/// Delivers `body` as GitHub does, with `signature` as `X-Hub-Signature-256` when given, and a
/// delivery id of its own, as every delivery of GitHub's has.
async fn deliver(server: &Server, event: Option<&str>, body: &[u8], signature: Option<&str>) -> Resp {
    static DELIVERIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = DELIVERIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    deliver_as(server, &format!("72d3162e-cc78-11e3-81ab-{n:012x}"), event, body, signature).await
}

/// [`deliver`] with the delivery id `id`: the same id again is what a replay sends.
async fn deliver_as(server: &Server, id: &str, event: Option<&str>, body: &[u8], signature: Option<&str>) -> Resp {
    let mut r = server
        .http
        .post(server.url("/webhooks/github"))
        .header("Content-Type", "application/json")
        .header("User-Agent", "GitHub-Hookshot/e2e")
        .header("X-GitHub-Delivery", id)
        .body(body.to_vec());
    if let Some(e) = event {
        r = r.header("X-GitHub-Event", e);
    }
    if let Some(s) = signature {
        r = r.header("X-Hub-Signature-256", s);
    }
    let resp = r.send().await.expect("webhook request");
    let code = resp.status().as_u16();
    Resp { code, body: resp.bytes().await.expect("webhook response").to_vec() }
}

/// A store dump ([`Server::dump`]) without the records of deliveries taken (Events of reason
/// `WebhookReceived`) and without the lists' versions, which those records move.
fn beside_deliveries(dump: &[u8]) -> String {
    let text = String::from_utf8_lossy(dump);
    let lines = text.lines().map(|line| match serde_json::from_str::<Value>(line) {
        Ok(mut list) if list.get("items").is_some() => {
            list["metadata"].as_object_mut().map(|m| m.remove("resourceVersion"));
            if let Some(items) = list["items"].as_array_mut() {
                items.retain(|o| o["reason"] != "WebhookReceived");
            }
            list.to_string()
        }
        _ => line.to_string(),
    });
    lines.collect::<Vec<_>>().join("\n")
}

/// The store (but the records of the deliveries themselves) and the stand-in's request count
/// stay as they are for a while.
async fn nothing_changes(gh: &Gh, dump: &[u8], requests: &Value, what: &str) {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (before, now) = (beside_deliveries(dump), beside_deliveries(&gh.server.dump().await));
    assert!(now == before, "{what} changed the store:\nbefore:\n{before}\nafter:\n{now}");
    let asked = gh.standin.requests().await;
    assert_eq!(asked["total"], requests["total"], "{what} made aoctl ask GitHub: {asked:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_webhooks_are_verified_and_reconcile_at_once() {
    let mut gh = Gh::start(REPO, false).await;
    let mut cleanup = Cleanup::new(&gh.server);
    gh.server.create("projects", &gh.project("hello", REPO, "10m", json!({}))).await;
    for (name, repo) in OTHER_REPOS {
        let path = git_repo(gh.server.tmp.path(), name, "main");
        let mut p = gh.project(name, repo, "10m", json!({}));
        p["spec"]["path"] = json!(path);
        gh.server.create("projects", &p).await;
    }
    gh.project_ready("hello").await;
    let name = "hook";
    let branch = "hello/hook";
    let spec = json!({"pullRequest": {"create": false}});
    gh.server.create("sessions", &session(name, "hello", "Fix the greeting", spec)).await;
    let s = gh
        .server
        .wait_for("sessions", name, READY, |o| {
            has(o, "PullRequestOpen", "False", "NoPullRequest") && has(o, "AgentActive", "False", "Idle")
        })
        .await;
    // Idle can be reported a moment before the agent's push lands: wait for the branch.
    let mut sha = head(&gh.repos.bare, branch);
    for _ in 0..100 {
        if sha.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        sha = head(&gh.repos.bare, branch);
    }
    let sha = sha.expect("the agent pushed its branch");
    assert!(s.pointer("/status/pullRequest").is_none(), "{s:#}");

    // A pull request appears on GitHub; no webhook tells aoctl, which polls every ten minutes.
    let pr = json!({"title": "Fix the greeting", "head": branch, "base": "main"});
    let (code, created) = gh.standin.call("POST", "/repos/Codertocat/Hello-World/pulls", Some(&pr)).await;
    assert_eq!(code, 201, "{created:#}");
    let number = created["number"].as_u64().expect("the pull request's number");
    let dump = gh.server.settle().await;
    let requests = gh.standin.requests().await;

    // GitHub's example payloads, signed with the secret: accepted; none of them is about the session.
    for (event, file, body) in payloads() {
        let r = deliver(&gh.server, Some(&event), &body, Some(&sign(SECRET, &body))).await;
        match event.as_str() {
            "ping" => assert_eq!((r.code, &r.json()["message"]), (200, &json!("pong")), "{file}: {}", r.text()),
            // No IssueSource of the project, no GitSource of the repository.
            "issues" => assert_eq!((r.code, &r.json()["issueSources"]), (202, &json!([])), "{file}: {}", r.text()),
            "push" => assert_eq!((r.code, &r.json()["gitSources"]), (202, &json!([])), "{file}: {}", r.text()),
            _ => assert_eq!((r.code, &r.json()["sessions"]), (202, &json!([])), "{file}: {}", r.text()),
        }
    }
    nothing_changes(&gh, &dump, &requests, "deliveries about other branches").await;

    // A `check_run` edited to be about the session's branch.
    let fixture = std::fs::read(fixtures().join("check_run.completed.json")).expect("the check_run fixture");
    let mut check_run: Value = serde_json::from_slice(&fixture).expect("JSON fixture");
    check_run["check_run"]["head_sha"] = json!(sha);
    check_run["check_run"]["check_suite"]["head_sha"] = json!(sha);
    check_run["check_run"]["check_suite"]["head_branch"] = json!(branch);
    let body = serde_json::to_vec(&check_run).expect("JSON");
    let good = sign(SECRET, &body);

    // Refused: a wrong secret, a tampered body, no signature, a malformed one, a SHA-1 one.
    let mut tampered = check_run.clone();
    tampered["check_run"]["conclusion"] = json!("success");
    let tampered = serde_json::to_vec(&tampered).expect("JSON");
    let sha1 = format!("sha1={}", &good["sha256=".len()..][..40]);
    let refused: [(&str, &[u8], Option<String>); 6] = [
        ("the wrong secret", &body, Some(sign("not-the-secret", &body))),
        ("the signature of another body", &tampered, Some(good.clone())),
        ("no signature", &body, None),
        ("an empty signature", &body, Some(String::new())),
        ("a signature that is not hex", &body, Some("sha256=zz".repeat(8))),
        ("a SHA-1 signature", &body, Some(sha1)),
    ];
    for (what, body, signature) in refused {
        let r = deliver(&gh.server, Some("check_run"), body, signature.as_deref()).await;
        r.expect_status(401, "Unauthorized");
        assert!(!r.text().contains(SECRET) && !r.text().contains(TOKEN), "{what}: {}", r.text());
    }
    let r = deliver(&gh.server, None, &body, Some(&good)).await;
    assert_eq!(r.code, 400, "no X-GitHub-Event header: {}", r.text());
    nothing_changes(&gh, &dump, &requests, "refused deliveries").await;

    // An event aoctl does not use, correctly signed: accepted and ignored.
    let watch = json!({"action": "started", "repository": check_run["repository"], "sender": check_run["sender"]});
    let watch = serde_json::to_vec(&watch).expect("JSON");
    let r = deliver(&gh.server, Some("watch"), &watch, Some(&sign(SECRET, &watch))).await;
    assert_eq!(r.code, 202, "{}", r.text());
    assert!(r.text().contains("ignored"), "{}", r.text());
    nothing_changes(&gh, &dump, &requests, "an ignored event").await;

    // The real thing: the session is reconciled at once and finds its pull request.
    let t0 = Instant::now();
    let r = deliver(&gh.server, Some("check_run"), &body, Some(&good)).await;
    assert_eq!((r.code, &r.json()["sessions"]), (202, &json!([name])), "{}", r.text());
    let s = gh
        .server
        .wait_for("sessions", name, Duration::from_secs(10), |o| has(o, "PullRequestOpen", "True", "Open"))
        .await;
    let took = t0.elapsed();
    eprintln!("webhooks: check_run delivery → PullRequestOpen=True in {} ms", took.as_millis());
    assert!(took < Duration::from_secs(2), "the webhook took {took:?} to have an effect");
    assert_eq!(s["status"]["pullRequest"]["number"].as_u64(), Some(number), "{s:#}");
    assert_eq!(s["status"]["pullRequest"]["headSha"], sha, "{s:#}");
    let asked = gh.standin.requests().await;
    assert!(asked["total"].as_u64() > requests["total"].as_u64(), "aoctl asked GitHub: {asked:#}");

    // A replay of a delivery (the same X-GitHub-Delivery) is acknowledged and ignored, and still
    // is after a restart: the delivery is recorded in the store, not only in memory.
    let id = "9c0a2f4e-e2e0-11ee-8f5a-replayed00001";
    let r = deliver_as(&gh.server, id, Some("check_run"), &body, Some(&good)).await;
    assert_eq!((r.code, &r.json()["sessions"]), (202, &json!([name])), "{}", r.text());
    let r = deliver_as(&gh.server, id, Some("check_run"), &body, Some(&good)).await;
    assert_eq!(r.code, 200, "{}", r.text());
    assert!(r.text().contains("already received; ignored"), "{}", r.text());
    let events: Value = serde_json::from_slice(&gh.server.list_bytes("events").await).expect("a list of events");
    let recorded: Vec<&Value> =
        events["items"].as_array().into_iter().flatten().filter(|e| e["reason"] == "WebhookReceived").collect();
    assert!(recorded.iter().any(|e| e["message"].as_str().is_some_and(|m| m.contains(id))), "{recorded:#?}");
    gh.restart().await;
    cleanup.retarget(&gh.server);
    let r = deliver_as(&gh.server, id, Some("check_run"), &body, Some(&good)).await;
    assert_eq!(r.code, 200, "a replay after a restart: {}", r.text());
    assert!(r.text().contains("already received; ignored"), "{}", r.text());
    cleanup.finish();
}

/// The variable holding the push secret of the GitSource below.
const FLEET_SECRET_ENV: &str = "AOCTL_E2E_FLEET_SECRET";
const FLEET_SECRET: &str = "e2e-fleet-push-secret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_push_webhooks_wake_the_git_sources_of_the_repository() {
    let secret = std::ffi::OsString::from(FLEET_SECRET);
    let gh = Gh::start_with_env(REPO, false, &[(FLEET_SECRET_ENV, secret.as_os_str())]).await;
    // No project has this repository: only the GitSource's own secret can verify its pushes.
    let source = |name: &str, url: &str| {
        json!({"apiVersion": "ao.dev/v1alpha1", "kind": "GitSource", "metadata": {"name": name},
            "spec": {"url": url, "interval": "10m", "suspend": true, "webhookSecretEnv": FLEET_SECRET_ENV}})
    };
    gh.server.create("gitsources", &source("fleet", "https://GitHub.com/Codertocat/Hello-World.git")).await;
    gh.server.create("gitsources", &source("other", "https://github.com/Codertocat/Other")).await;
    let body = std::fs::read(fixtures().join("push.branch.json")).expect("the push fixture");

    // Signed with the source's secret: the sources naming the repository (by any of its
    // addresses, the host in any case) are woken, and only they.
    let r = deliver(&gh.server, Some("push"), &body, Some(&sign(FLEET_SECRET, &body))).await;
    assert_eq!((r.code, &r.json()["gitSources"]), (202, &json!(["fleet"])), "{}", r.text());

    // Unverified: the projects' secret is no project's of this repository, or a wrong one.
    for wrong in [SECRET, "not-the-secret"] {
        let r = deliver(&gh.server, Some("push"), &body, Some(&sign(wrong, &body))).await;
        r.expect_status(401, "Unauthorized");
    }
    // The source's secret verifies pushes only, and only of its repository.
    let r = deliver(&gh.server, Some("issues"), &body, Some(&sign(FLEET_SECRET, &body))).await;
    r.expect_status(401, "Unauthorized");
    let mut elsewhere: Value = serde_json::from_slice(&body).expect("JSON fixture");
    for key in ["clone_url", "html_url", "ssh_url", "git_url"] {
        elsewhere["repository"][key] = json!(format!("https://github.com/someone/else/{key}"));
    }
    let elsewhere = serde_json::to_vec(&elsewhere).expect("JSON");
    let r = deliver(&gh.server, Some("push"), &elsewhere, Some(&sign(FLEET_SECRET, &elsewhere))).await;
    r.expect_status(401, "Unauthorized");
}
