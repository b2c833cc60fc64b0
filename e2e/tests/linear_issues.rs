//! An IssueSource on Linear, against the Linear stand-in (GraphQL, with Linear's schema subset
//! checked against @linear/sdk): one Session per open issue of the team that has the labels,
//! named `<source>-<number>`, with `spec.issue` the identifier (`ENG-1`) and the prompt rendered
//! from it; a label added later makes one at once (the signed webhook, with a ten-minute poll
//! interval); an issue moved to Done, or moved to another team, ends its session per `onClose`.
//! A delivery with a bad signature, or sent long ago, changes nothing.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{Server, API};
use crate::lifecycle::{Cleanup, READY};
use crate::standin::{cond, hmac_hex, is, metric, repos, Repos, StandIn};

/// The API key the stand-in requires and the server reads from `LINEAR_API_KEY`.
const TOKEN: &str = "lin_api_e2eStandInKey0123456789";
/// The webhook signing secret, read by the server from `AOCTL_LINEAR_WEBHOOK_SECRET`.
const SECRET: &str = "e2e-linear-webhook-secret";
const PROJECT: &str = "widgets";
const SOURCE: &str = "bugs";
/// How soon a webhook must have its effect (the poll interval is ten minutes).
const AT_ONCE: Duration = Duration::from_secs(10);

struct Lin {
    server: Server,
    standin: StandIn,
    repos: Repos,
}

impl Lin {
    async fn start() -> Lin {
        let env: [(&str, &OsStr); 2] =
            [("LINEAR_API_KEY", OsStr::new(TOKEN)), ("AOCTL_LINEAR_WEBHOOK_SECRET", OsStr::new(SECRET))];
        let server = Server::start_with_env(&env).await;
        let repos = repos(server.tmp.path());
        let args: Vec<OsString> = vec![
            "--team".into(),
            "ENG:Engineering".into(),
            "--team".into(),
            "OPS:Operations".into(),
            "--token".into(),
            TOKEN.into(),
            "--webhook-url".into(),
            server.url("/webhooks/linear").into(),
            "--webhook-secret".into(),
            SECRET.into(),
        ];
        let standin = StandIn::launch(server.tmp.path(), "linear-standin", &args, TOKEN);
        Lin { server, standin, repos }
    }

    async fn issue(&self, title: &str, labels: &[&str]) -> Value {
        let body =
            json!({"team": "ENG", "title": title, "description": format!("Steps for {title}"), "labels": labels});
        self.standin.ok("POST", "/_standin/issues", Some(&body)).await
    }

    async fn act(&self, identifier: &str, action: &str, body: Value) -> Value {
        self.standin.ok("POST", &format!("/_standin/issues/{identifier}/{action}"), Some(&body)).await
    }
}

/// Every delivery in a stand-in answer was accepted with `code`.
#[track_caller]
fn delivered(answer: &Value, code: u64) {
    let deliveries = answer["deliveries"].as_array().cloned().unwrap_or_default();
    assert!(!deliveries.is_empty(), "no webhook deliveries: {answer:#}");
    for d in &deliveries {
        assert_eq!(d["status"], code, "a webhook delivery: {answer:#}");
    }
}

/// The names of the source's sessions that are not being deleted.
async fn sessions_of(server: &Server) -> BTreeSet<String> {
    let list = server.get_path(&format!("{API}/sessions")).await.expect(200);
    let mark = format!("issuesource/{SOURCE}");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["metadata"]["annotations"]["ao.dev/managed-by"] == mark.as_str())
        .filter(|s| s["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|s| s["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Waits until the source's live sessions are exactly `want`.
async fn until_sessions(server: &Server, want: &[&str], timeout: Duration) {
    let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
    let t0 = Instant::now();
    loop {
        let now = sessions_of(server).await;
        if now == want {
            return;
        }
        if t0.elapsed() > timeout {
            let source = server.object("issuesources", SOURCE).await.unwrap_or(Value::Null);
            panic!("the sessions of {SOURCE} are {now:?}, not {want:?}, after {timeout:?}; the source: {source:#}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linear_issues_make_sessions_and_done_or_moved_issues_end_them() {
    let lin = Lin::start().await;
    let s = &lin.server;
    let first = lin.issue("Crash on start", &["agent"]).await;
    assert_eq!(first["issue"]["identifier"], "ENG-1", "{first:#}");
    lin.issue("Docs typo", &["docs"]).await;
    let project = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": PROJECT},
        "spec": {"path": lin.repos.clone, "linear": {"apiUrl": format!("{}/graphql", lin.standin.base)}}});
    s.create("projects", &project).await;
    s.wait_for("projects", PROJECT, Duration::from_secs(30), |p| is(p, "Ready", "True")).await;
    let source = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "IssueSource", "metadata": {"name": SOURCE},
        "spec": {"project": PROJECT, "linear": {"team": "ENG", "labels": ["agent"]}, "interval": "10m",
            "onClose": "delete",
            "template": {"agent": {"command": ["./scripts/agent.sh", "{promptFile}"]},
                "prompt": "Fix {{reference}}: {{title}}", "pullRequest": {"create": false}}}});
    s.create("issuesources", &source).await;
    let cleanup = Cleanup::new(s);

    // The labeled issue of the team gets a session named by its number, its spec naming ENG-1.
    until_sessions(s, &["bugs-1"], READY).await;
    let one = s.wait_for("sessions", "bugs-1", READY, |o| is(o, "IssueOpen", "True")).await;
    assert_eq!(one["spec"]["issue"], "ENG-1", "{one:#}");
    assert_eq!(one["spec"]["prompt"], "Fix ENG-1: Crash on start", "{one:#}");
    let open = cond(&one, "IssueOpen");
    assert_eq!(open["message"], "issue ENG-1 is open: Crash on start", "{one:#}");
    let src = s.wait_for("issuesources", SOURCE, READY, |o| is(o, "Ready", "True")).await;
    assert_eq!(src["status"]["sessions"][0]["issue"], "ENG-1", "{src:#}");

    // A label added later: a session at once, through the signed webhook.
    delivered(&lin.act("ENG-2", "labels", json!({"labels": ["docs", "agent"]})).await, 202);
    until_sessions(s, &["bugs-1", "bugs-2"], AT_ONCE).await;

    // Done: its session is deleted (onClose: delete). Moved to another team: the same.
    delivered(&lin.act("ENG-1", "state", json!({"state": "Done"})).await, 202);
    until_sessions(s, &["bugs-2"], AT_ONCE).await;
    let moved = lin.act("ENG-2", "move", json!({"team": "OPS"})).await;
    delivered(&moved, 202);
    assert_eq!(moved["issue"]["identifier"], "OPS-1", "{moved:#}");
    until_sessions(s, &[], AT_ONCE).await;

    // Every read went through Linear's GraphQL API, counted by operation.
    let requests = lin.standin.ok("GET", "/_standin/requests", None).await;
    assert!(requests["byOperation"]["TeamIssues"].as_u64() >= Some(3), "{requests:#}");
    assert!(requests["byOperation"]["IssueByIdentifier"].as_u64() >= Some(1), "{requests:#}");
    assert!(metric(s, "aoctl_linear_requests_total", &[("endpoint", "TeamIssues"), ("code", "200")]).await >= 3.0);

    // A delivery signed with another secret, or sent long ago, changes nothing.
    let now = chrono::Utc::now().timestamp_millis();
    let body = |at: i64| {
        json!({"action": "create", "type": "Issue", "data": {"identifier": "ENG-9"}, "webhookTimestamp": at})
            .to_string()
    };
    let post = |sig: String, body: String, id: &'static str| async move {
        let resp = s
            .request(reqwest::Method::POST, "/webhooks/linear")
            .header("content-type", "application/json")
            .header("linear-signature", sig)
            .header("linear-delivery", id)
            .body(body)
            .send()
            .await
            .expect("send the delivery");
        resp.status().as_u16()
    };
    let fresh = body(now);
    assert_eq!(post(hmac_hex("another-secret", fresh.as_bytes()), fresh.clone(), "d-1").await, 401);
    let stale = body(now - 10 * 60 * 1000);
    assert_eq!(post(hmac_hex(SECRET, stale.as_bytes()), stale, "d-2").await, 400, "a delivery of ten minutes ago");
    assert_eq!(post(hmac_hex(SECRET, fresh.as_bytes()), fresh.clone(), "d-3").await, 202);
    assert_eq!(post(hmac_hex(SECRET, fresh.as_bytes()), fresh, "d-3").await, 200, "a replay is acknowledged");
    cleanup.finish();
}
