//! The whole router in process, each request through `oneshot` with no socket: objects, a
//! session's input, the agent API, webhooks and the access rules, against a sled store on disk.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use aoctl_api::Session;
use aoctl_engine::{Config, Controller};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use tower::ServiceExt;

use super::{router, Access, AppState};
use crate::metrics::Metrics;

const TOKEN: &str = "router-test-token-0123456789abcdef";
const HOST: &str = "127.0.0.1:7420";
const OBJECTS: &str = "/apis/ao.dev/v1alpha1";
/// The variable the tests' GitHub project reads its webhook secret from.
const SECRET_ENV: &str = "AOCTL_ROUTER_TEST_WEBHOOK_SECRET";
const SECRET: &str = "router-test-webhook-secret";

/// The wakeups the webhook handlers left, by session and by source.
#[derive(Default)]
struct Heard(parking_lot::Mutex<Vec<String>>);

impl crate::wakeups::Wakeups for Heard {
    fn session_heard(&self, session: &str) {
        self.0.lock().push(format!("session {session}"));
    }

    fn source_heard(&self, source: &str) {
        self.0.lock().push(format!("source {source}"));
    }
}

/// A router over a fresh store, and what the tests read behind it.
struct Api {
    router: Router,
    state: AppState,
    _dir: tempfile::TempDir,
}

/// One answer: its status and its body as JSON (`Null` when it is not JSON).
struct Answer {
    status: StatusCode,
    json: Value,
}

async fn api() -> Api {
    let dir = tempfile::tempdir().unwrap();
    let store = aoctl_store::Store::open(&dir.path().join("store")).unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    let listen: SocketAddr = HOST.parse().unwrap();
    let trigger = |name| Controller::<Session>::new(Config::new(name), metrics.engine.clone()).handle();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let state = AppState {
        store: store.clone(),
        metrics: metrics.clone(),
        fleet: Arc::new(crate::fleet::Fleet::new(dir.path())),
        wakeups: Arc::new(Heard::default()),
        forges: Arc::new(crate::forges::Hub::counted_in(&metrics)),
        sessions: trigger("session"),
        gitsources: trigger("gitsource"),
        issuesources: trigger("issuesource"),
        ready: Arc::new(AtomicBool::new(true)),
        access: Arc::new(Access::new(TOKEN, listen, &[])),
        deliveries: Default::default(),
        recorder: Arc::new(crate::recorder::Recorder::new(store)),
        shutdown,
        node: "node-a".into(),
        leadership: crate::leader::Candidacy::sole().leadership(),
    };
    Api { router: router(state.clone()), state, _dir: dir }
}

impl Api {
    /// Sends a request with the bearer token (or `auth` in its place) and a JSON body.
    async fn send(&self, method: Method, path: &str, auth: Option<&str>, body: Option<Value>) -> Answer {
        let mut req = Request::builder().method(method).uri(path).header("host", HOST);
        if let Some(auth) = auth {
            req = req.header("authorization", format!("Bearer {auth}"));
        }
        let req = match body {
            Some(b) => req.header("content-type", "application/json").body(Body::from(b.to_string())),
            None => req.body(Body::empty()),
        };
        self.answer(req.unwrap()).await
    }

    async fn answer(&self, req: Request<Body>) -> Answer {
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24).await.unwrap();
        Answer { status, json: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
    }

    async fn ok(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let a = self.send(method, path, Some(TOKEN), body).await;
        assert!(a.status.is_success(), "{path}: {} {:#}", a.status, a.json);
        a.json
    }

    /// Project `p` of a repository on GitHub, and its session `s`.
    async fn project_and_session(&self) {
        let project = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": "p"},
            "spec": {"path": self._dir.path().join("repo"), "repo": "acme/widgets",
                "github": {"webhookSecretEnv": SECRET_ENV}}});
        self.ok(Method::POST, &format!("{OBJECTS}/projects"), Some(project)).await;
        let session = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": "s"},
            "spec": {"project": "p", "prompt": "fix it"}});
        self.ok(Method::POST, &format!("{OBJECTS}/sessions"), Some(session)).await;
    }
}

#[tokio::test]
async fn objects_are_created_read_listed_and_bad_input_changes_nothing() {
    let api = api().await;
    api.project_and_session().await;
    let s = api.ok(Method::GET, &format!("{OBJECTS}/sessions/s"), None).await;
    assert_eq!((&s["spec"]["project"], &s["metadata"]["generation"]), (&json!("p"), &json!(1)), "{s:#}");
    let list = api.ok(Method::GET, &format!("{OBJECTS}/sessions"), None).await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list:#}");

    // A bad field is a 4xx naming it, and nothing is stored.
    let bad = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": "t"},
        "spec": {"project": "p", "prompt": "x", "agent": {"command": []}}});
    let a = api.send(Method::POST, &format!("{OBJECTS}/sessions"), Some(TOKEN), Some(bad)).await;
    assert!(a.status.is_client_error(), "{} {:#}", a.status, a.json);
    assert!(a.json.to_string().contains("agent"), "the error names the field: {:#}", a.json);
    assert!(matches!(api.state.store.get_typed::<Session>("t").await, Err(aoctl_store::StoreError::NotFound { .. })));
    let a = api.send(Method::GET, &format!("{OBJECTS}/widgets"), Some(TOKEN), None).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{:#}", a.json);

    // The status is the reconcilers': a client's write of it is refused.
    let a =
        api.send(Method::PUT, &format!("{OBJECTS}/sessions/s/status"), Some(TOKEN), Some(json!({"status": {}}))).await;
    assert!(a.status.is_client_error(), "{} {:#}", a.status, a.json);
}

#[tokio::test]
async fn the_access_rules_hold_for_every_kind_of_caller() {
    let api = api().await;
    api.project_and_session().await;
    let path = format!("{OBJECTS}/sessions");
    assert_eq!(api.send(Method::GET, &path, None, None).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(api.send(Method::GET, &path, Some("wrong"), None).await.status, StatusCode::UNAUTHORIZED);
    // Another Host (DNS rebinding) is refused, token or not.
    let req =
        Request::get(&path).header("host", "evil.example:7420").header("authorization", format!("Bearer {TOKEN}"));
    assert_eq!(api.answer(req.body(Body::empty()).unwrap()).await.status, StatusCode::FORBIDDEN);
    // A page of another site may not change anything.
    let req = Request::post(&path)
        .header("host", HOST)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("origin", "https://evil.example")
        .header("content-type", "application/json")
        .body(Body::from("{}"));
    assert_eq!(api.answer(req.unwrap()).await.status, StatusCode::FORBIDDEN);

    // A session's token opens the agent API for that session only, and nothing else.
    let s = api.state.store.get_typed::<Session>("s").await.unwrap();
    let session_token = api.state.access.sessions.token("s", s.metadata.uid.as_deref().unwrap_or_default());
    let me = api.send(Method::GET, "/agent/v1/status", Some(&session_token), None).await;
    assert_eq!(me.status, StatusCode::OK, "{:#}", me.json);
    assert!(me.json.to_string().contains("\"s\""), "{:#}", me.json);
    assert_eq!(api.send(Method::GET, &path, Some(&session_token), None).await.status, StatusCode::UNAUTHORIZED);
    let by_bearer = api.send(Method::GET, "/agent/v1/status", Some(TOKEN), None).await;
    assert!(by_bearer.status.is_client_error(), "the bearer token is no session's: {}", by_bearer.status);
    // A token minted for a session that was since deleted and made again opens nothing.
    let stale = api.state.access.sessions.token("s", "another-uid");
    assert!(api.send(Method::GET, "/agent/v1/status", Some(&stale), None).await.status.is_client_error());
}

#[tokio::test]
async fn the_agent_api_records_a_report_in_the_sessions_status() {
    let api = api().await;
    api.project_and_session().await;
    let s = api.state.store.get_typed::<Session>("s").await.unwrap();
    let token = api.state.access.sessions.token("s", s.metadata.uid.as_deref().unwrap_or_default());
    let body = json!({"summary": "fixed the redirect loop", "progress": "done"});
    let a = api.send(Method::POST, "/agent/v1/report", Some(&token), Some(body)).await;
    assert!(a.status.is_success(), "{} {:#}", a.status, a.json);
    let s = api.state.store.get_typed::<Session>("s").await.unwrap();
    let agent = serde_json::to_value(&s.status.agent).unwrap();
    assert!(agent.to_string().contains("fixed the redirect loop"), "{agent:#}");
    // A bad report is refused and changes nothing.
    let a = api.send(Method::POST, "/agent/v1/report", Some(&token), Some(json!({"summary": 7}))).await;
    assert!(a.status.is_client_error(), "{} {:#}", a.status, a.json);
    let again = api.state.store.get_typed::<Session>("s").await.unwrap();
    assert_eq!(again.metadata.resource_version, s.metadata.resource_version);
}

#[tokio::test]
async fn input_to_a_session_without_a_runtime_is_refused_and_an_empty_one_is_a_bad_request() {
    let api = api().await;
    api.project_and_session().await;
    let path = format!("{OBJECTS}/sessions/s/input");
    let empty = api.send(Method::POST, &path, Some(TOKEN), Some(json!({"text": "  "}))).await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST, "{:#}", empty.json);
    let a = api.send(Method::POST, &path, Some(TOKEN), Some(json!({"text": "hello"}))).await;
    assert!(a.status.is_client_error(), "no runtime runs the agent yet: {} {:#}", a.status, a.json);
    let nobody = format!("{OBJECTS}/sessions/nobody/input");
    let missing = api.send(Method::POST, &nobody, Some(TOKEN), Some(json!({"text": "hi"}))).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{:#}", missing.json);
}

fn signed(body: &[u8], secret: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[tokio::test]
async fn a_webhook_is_taken_only_signed_with_the_projects_secret_and_only_once() {
    std::env::set_var(SECRET_ENV, SECRET);
    let api = api().await;
    api.project_and_session().await;
    // An event aoctl does not use: verified, remembered, and otherwise ignored.
    let body = json!({"action": "started", "repository": {"full_name": "acme/widgets"}}).to_string();
    let deliver = |signature: String, id: &str| {
        Request::post("/webhooks/github")
            .header("host", HOST)
            .header("content-type", "application/json")
            .header("x-github-event", "watch")
            .header("x-github-delivery", id)
            .header("x-hub-signature-256", signature)
            .body(Body::from(body.clone()))
            .unwrap()
    };
    let forged = api.answer(deliver(signed(body.as_bytes(), "not-the-secret"), "d-1")).await;
    assert_eq!(forged.status, StatusCode::UNAUTHORIZED, "{:#}", forged.json);
    let taken = api.answer(deliver(signed(body.as_bytes(), SECRET), "d-1")).await;
    assert_eq!(taken.status, StatusCode::ACCEPTED, "{:#}", taken.json);
    let again = api.answer(deliver(signed(body.as_bytes(), SECRET), "d-1")).await;
    assert_eq!(again.status, StatusCode::OK);
    assert!(again.json.to_string().contains("already received"), "a replay is ignored: {:#}", again.json);
}

/// The token of stored session `name`: its orchestrator's when `orchestrator`.
async fn token_of(api: &Api, name: &str, orchestrator: bool) -> String {
    let s = api.state.store.get_typed::<Session>(name).await.unwrap();
    let uid = s.metadata.uid.unwrap_or_default();
    let keys = &api.state.access.sessions;
    if orchestrator {
        keys.orchestrator_token(name, &uid)
    } else {
        keys.token(name, &uid)
    }
}

#[tokio::test]
async fn the_orchestrators_tools_are_bounded_confined_to_its_project_and_closed_to_workers() {
    let api = api().await;
    api.project_and_session().await;
    let mut p = api.state.store.get_typed::<aoctl_api::Project>("p").await.unwrap();
    let o = json!({"env": {"MODEL_URL": "http://model"}, "limits": {"maxSessions": 2}});
    p.spec.orchestrator = Some(serde_json::from_value(o).unwrap());
    api.state.store.update_typed(&p).await.unwrap();
    let orch = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": "p-orchestrator"},
        "spec": {"project": "p", "role": "orchestrator", "prompt": "GOAL"}});
    api.ok(Method::POST, &format!("{OBJECTS}/sessions"), Some(orch)).await;
    let q = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": "q"},
        "spec": {"path": "/elsewhere"}});
    api.ok(Method::POST, &format!("{OBJECTS}/projects"), Some(q)).await;
    let other = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": "other"},
        "spec": {"project": "q", "prompt": "x"}});
    api.ok(Method::POST, &format!("{OBJECTS}/sessions"), Some(other)).await;
    let (o, w) = (token_of(&api, "p-orchestrator", true).await, token_of(&api, "s", false).await);
    let spawn = "/agent/v1/orchestrator/spawn";

    // A worker's token opens none of the tools; the orchestrator's opens nothing else.
    let a = api.send(Method::POST, spawn, Some(&w), Some(json!({"prompt": "x"}))).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{:#}", a.json);
    let a = api.send(Method::GET, &format!("{OBJECTS}/sessions"), Some(&o), None).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);

    // Within the limit, workers are made with its label and environment; past it, nothing is.
    let bad = api.send(Method::POST, spawn, Some(&o), Some(json!({"prompt": "x", "labels": {"ao.dev/x": "y"}}))).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{:#}", bad.json);
    let bad = api.send(Method::POST, spawn, Some(&o), Some(json!({"prompt": "x", "agent": "rm-rf"}))).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{:#}", bad.json);
    for name in ["w-a", "w-b"] {
        let a = api
            .send(
                Method::POST,
                spawn,
                Some(&o),
                Some(json!({"prompt": "TASK", "name": name, "labels": {"team": "api"}})),
            )
            .await;
        assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.json);
    }
    let wa = api.state.store.get_typed::<Session>("w-a").await.unwrap();
    assert_eq!(wa.metadata.labels["ao.dev/orchestrator"], "p-orchestrator");
    assert_eq!(wa.metadata.labels["team"], "api");
    assert_eq!(wa.spec.env["MODEL_URL"], "http://model");
    let past = api.send(Method::POST, spawn, Some(&o), Some(json!({"prompt": "TASK", "name": "w-c"}))).await;
    assert_eq!(past.status, StatusCode::TOO_MANY_REQUESTS, "{:#}", past.json);
    assert!(past.json["message"].as_str().unwrap().contains("maxSessions"), "{:#}", past.json);
    assert!(api.state.store.get_typed::<Session>("w-c").await.is_err(), "nothing is stored past the limit");

    let list = api.send(Method::GET, "/agent/v1/orchestrator/sessions", Some(&o), None).await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.json["limits"]["alive"], 2, "{:#}", list.json);
    let names: Vec<(&str, bool)> = list.json["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["session"].as_str().unwrap(), s["mine"].as_bool().unwrap()))
        .collect();
    assert_eq!(names, [("s", false), ("w-a", true), ("w-b", true)], "its project only, itself left out");

    // Only its own workers may be stopped, deleted or merged; only its project's sessions reached.
    let stop = |n: &str| format!("/agent/v1/orchestrator/sessions/{n}/stop");
    assert_eq!(api.send(Method::POST, &stop("s"), Some(&o), Some(json!({}))).await.status, StatusCode::FORBIDDEN);
    assert_eq!(api.send(Method::POST, &stop("other"), Some(&o), Some(json!({}))).await.status, StatusCode::FORBIDDEN);
    assert_eq!(
        api.send(Method::POST, &stop("nobody"), Some(&o), Some(json!({}))).await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(api.send(Method::POST, &stop("w-a"), Some(&o), Some(json!({}))).await.status, StatusCode::OK);
    assert!(api.state.store.get_typed::<Session>("w-a").await.unwrap().spec.stopped);
    let send = json!({"text": "hi"});
    let a = api.send(Method::POST, "/agent/v1/orchestrator/sessions/other/send", Some(&o), Some(send)).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    let merge = api.send(Method::POST, "/agent/v1/orchestrator/sessions/w-a/merge", Some(&o), Some(json!({}))).await;
    assert_eq!(merge.status, StatusCode::CONFLICT, "merge is off: {:#}", merge.json);
    let answer = json!({"text": "yes"});
    let a = api.send(Method::POST, "/agent/v1/orchestrator/sessions/w-a/answer", Some(&o), Some(answer)).await;
    assert_eq!(a.status, StatusCode::CONFLICT, "answering is off: {:#}", a.json);

    // A stopped worker still counts; a deleted one does not.
    let del = api.send(Method::DELETE, "/agent/v1/orchestrator/sessions/w-b", Some(&o), None).await;
    assert_eq!(del.status, StatusCode::OK, "{:#}", del.json);
    let (one, two) = tokio::join!(
        api.send(Method::POST, spawn, Some(&o), Some(json!({"prompt": "TASK", "name": "w-d"}))),
        api.send(Method::POST, spawn, Some(&o), Some(json!({"prompt": "TASK", "name": "w-e"}))),
    );
    let mut codes = [one.status.as_u16(), two.status.as_u16()];
    codes.sort();
    assert_eq!(codes, [201, 429], "two spawns at once for one place: {:#} {:#}", one.json, two.json);

    // A report of one of its workers is kept for it, once per report.
    let wa = token_of(&api, "w-a", false).await;
    for summary in ["A-DONE", "A-DONE"] {
        let a = api.send(Method::POST, "/agent/v1/report", Some(&wa), Some(json!({"summary": summary}))).await;
        assert!(a.status.is_success());
    }
    let up = api.state.store.get_typed::<Session>("w-a").await.unwrap().status.upstream.unwrap();
    assert_eq!(up.orchestrator, "p-orchestrator");
    assert_eq!(up.pending.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2], "two reports, two records");
    assert!(up.pending[0].text.contains("A-DONE"));
    let s = api.send(Method::POST, "/agent/v1/report", Some(&w), Some(json!({"summary": "x"}))).await;
    assert!(s.status.is_success());
    assert!(api.state.store.get_typed::<Session>("s").await.unwrap().status.upstream.is_none(), "not a worker of it");
}

#[tokio::test]
async fn a_workers_question_goes_to_its_orchestrator_when_the_project_lets_it_answer() {
    let api = api().await;
    api.project_and_session().await;
    let mut p = api.state.store.get_typed::<aoctl_api::Project>("p").await.unwrap();
    p.spec.orchestrator = Some(serde_json::from_value(json!({"limits": {"answerQuestions": true}})).unwrap());
    api.state.store.update_typed(&p).await.unwrap();
    let orch = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": "p-orchestrator"},
        "spec": {"project": "p", "role": "orchestrator"}});
    api.ok(Method::POST, &format!("{OBJECTS}/sessions"), Some(orch)).await;
    let o = token_of(&api, "p-orchestrator", true).await;
    let a = api
        .send(Method::POST, "/agent/v1/orchestrator/spawn", Some(&o), Some(json!({"prompt": "T", "name": "w-a"})))
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.json);
    let w = token_of(&api, "w-a", false).await;
    let a = api.send(Method::POST, "/agent/v1/ask", Some(&w), Some(json!({"question": "which port?"}))).await;
    assert!(a.status.is_success(), "{:#}", a.json);
    assert!(a.json["message"].as_str().unwrap().contains("orchestrator p-orchestrator"), "{:#}", a.json);
    let s = api.state.store.get_typed::<Session>("w-a").await.unwrap();
    assert!(s.status.notifications.is_empty(), "no person is told");
    let up = s.status.upstream.unwrap();
    assert_eq!(up.pending.len(), 1);
    assert_eq!(up.pending[0].kind, aoctl_api::orchestrator::UpstreamKind::Question);
    assert!(up.pending[0].text.contains("which port?"));
    // The worker of a plain session asks a person as before.
    let plain = token_of(&api, "s", false).await;
    api.send(Method::POST, "/agent/v1/ask", Some(&plain), Some(json!({"question": "ok?"}))).await;
    assert!(api.state.store.get_typed::<Session>("s").await.unwrap().status.upstream.is_none());
}
