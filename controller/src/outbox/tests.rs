//! Tests of the notification worker on the real store in a temporary folder, with a real HTTP
//! receiver on 127.0.0.1: what a pass delivers and when it looks again, a newer status written
//! during a pass (409), the events a pass publishes once, and a worker that starts on outboxes
//! nobody handed over (a restart).

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aoctl_api::notification::NotificationRecord;
use aoctl_api::{Event, Kind, Project, Session, Time};
use aoctl_engine::Action;
use aoctl_store::{Selector, Store, WriteOptions};
use axum::http::{HeaderMap, StatusCode};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::{Notify, Semaphore};

use super::{unsettled, Handoff, Outbox, Worker};
use crate::notifiers;

/// One request the receiver got: its path, `Idempotency-Key` and JSON body.
#[derive(Clone, Debug)]
struct Hit {
    path: String,
    key: String,
    body: Value,
}

/// What the receiver's handler shares with the test.
#[derive(Clone)]
struct Shared {
    hits: Arc<Mutex<Vec<Hit>>>,
    /// The status it answers with.
    code: Arc<AtomicU16>,
    /// While set, a request waits for a permit before it is answered.
    gate: Arc<Mutex<Option<Arc<Semaphore>>>>,
    /// Told when a request arrives.
    arrived: Arc<Notify>,
}

/// A webhook receiver on 127.0.0.1 that records what it gets; stopped when dropped.
struct Receiver {
    base: String,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

async fn receive(
    axum::extract::State(sh): axum::extract::State<Shared>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    sh.hits.lock().push(Hit { path: uri.path().to_string(), key, body });
    sh.arrived.notify_one();
    let gate = sh.gate.lock().clone();
    if let Some(gate) = gate {
        gate.acquire().await.expect("the gate stays open").forget();
    }
    StatusCode::from_u16(sh.code.load(Ordering::SeqCst)).unwrap()
}

impl Receiver {
    async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shared = Shared {
            hits: Default::default(),
            code: Arc::new(AtomicU16::new(200)),
            gate: Default::default(),
            arrived: Default::default(),
        };
        let app = axum::Router::new().fallback(axum::routing::post(receive)).with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { base, shared, task }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn answer(&self, code: u16) {
        self.shared.code.store(code, Ordering::SeqCst);
    }

    /// Holds every request from now on until a permit of the returned gate lets it be answered.
    fn hold(&self) -> Arc<Semaphore> {
        let gate = Arc::new(Semaphore::new(0));
        *self.shared.gate.lock() = Some(gate.clone());
        gate
    }

    fn hits(&self) -> Vec<Hit> {
        self.shared.hits.lock().clone()
    }

    fn keys(&self) -> Vec<String> {
        self.hits().into_iter().map(|h| h.key).collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A store in a temporary folder with a project `demo` whose one notifier is a webhook to
/// `/hook` of the receiver.
struct World {
    _dir: tempfile::TempDir,
    store: Store,
    rx: Receiver,
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store")).unwrap();
        let rx = Receiver::start().await;
        let p = json!({"metadata": {"name": "demo"}, "spec": {"path": "/nonexistent/demo",
            "notifiers": [{"type": "webhook", "url": rx.url("/hook")}]}});
        store.create(Kind::Project, p, WriteOptions::default()).await.unwrap();
        World { _dir: dir, store, rx }
    }

    fn worker(&self) -> Arc<Worker> {
        Arc::new(Worker::new(self.store.clone(), Default::default()))
    }

    /// A session `name` of `demo` whose outbox holds a record for each of `keys`.
    async fn session(&self, name: &str, keys: &[&str]) -> Session {
        let s = json!({"metadata": {"name": name}, "spec": {"project": "demo", "prompt": "p"}});
        self.store.create(Kind::Session, s, WriteOptions::default()).await.unwrap();
        self.add(name, keys).await
    }

    /// Records a notification for each of `keys` in the outbox of session `name`.
    async fn add(&self, name: &str, keys: &[&str]) -> Session {
        let mut s: Session = self.store.get_typed(name).await.unwrap();
        for k in keys {
            notifiers::enqueue(&mut s.status.notifications, record(k, false));
        }
        self.store.update_status_typed(&s).await.unwrap()
    }

    async fn get(&self, name: &str) -> Session {
        self.store.get_typed(name).await.unwrap()
    }

    /// The Warning events with `reason`, as (object, message).
    async fn events(&self, reason: &str) -> Vec<(String, String)> {
        let (events, _) = self.store.list_typed::<Event>(&Selector::everything()).await.unwrap();
        let mine = events.into_iter().filter(|e| e.reason == reason);
        mine.map(|e| (e.involved_object.name, e.message)).collect()
    }
}

/// A record to the project's one webhook.
fn record(key: &str, escalated: bool) -> NotificationRecord {
    let targets = [aoctl_api::project::Notifier {
        type_: aoctl_api::project::NotifierType::Webhook,
        url: Some("http://unused".into()),
        command: vec![],
    }];
    notifiers::record(
        key.into(),
        "agent-needs-input",
        format!("title of {key}"),
        String::new(),
        None,
        escalated,
        &targets,
    )
    .unwrap()
}

fn rec<'a>(s: &'a Session, key: &str) -> &'a NotificationRecord {
    s.status.notifications.iter().find(|r| r.key == key).unwrap_or_else(|| panic!("no record {key}: {s:#?}"))
}

#[tokio::test]
async fn a_pass_sends_what_is_due_and_looks_again_when_the_backoff_ends() {
    let w = World::new().await;
    let worker = w.worker();
    w.session("s", &["k1"]).await;

    // Refused: recorded, and the next look is when the first backoff (2 s) ends.
    w.rx.answer(503);
    let action = worker.pass::<Session>("s").await.unwrap();
    let after = action.requeue_after().expect("looked at again");
    assert!(after > Duration::from_secs(1) && after <= notifiers::backoff(1), "{action:?}");
    let s = w.get("s").await;
    let r = rec(&s, "k1");
    assert_eq!((r.attempts, r.pending.as_slice()), (1, ["webhook#0".to_string()].as_slice()));
    assert!(r.next_attempt_at.is_some() && r.last_error.as_deref().is_some_and(|e| e.contains("503")), "{r:#?}");
    assert_eq!(w.rx.keys(), ["k1"]);

    // Looked at before it is due: nothing is sent and nothing written.
    let action = worker.pass::<Session>("s").await.unwrap();
    assert!(action.requeue_after().is_some_and(|a| a <= after), "{action:?}");
    assert_eq!(w.rx.keys(), ["k1"]);
    assert_eq!(w.get("s").await.metadata.resource_version, s.metadata.resource_version, "nothing written");

    // Once due (the backoff moved into the past), sent again with the same key, and delivered.
    let mut due = s.clone();
    due.status.notifications[0].next_attempt_at = Some(Time(Time::now().0 - chrono::Duration::seconds(1)));
    w.store.update_status_typed(&due).await.unwrap();
    w.rx.answer(200);
    assert_eq!(worker.pass::<Session>("s").await.unwrap(), Action::await_change(), "nothing left to deliver");
    let s = w.get("s").await;
    let r = rec(&s, "k1");
    assert!(r.delivered_at.is_some() && r.pending.is_empty() && r.last_error.is_none(), "{r:#?}");
    assert_eq!(r.attempts, 2);
    assert_eq!(w.rx.keys(), ["k1", "k1"], "a resend carries the same Idempotency-Key");
    let body = &w.rx.hits()[1].body;
    assert_eq!(
        (&body["idempotencyKey"], &body["session"], &body["project"]),
        (&json!("k1"), &json!("s"), &json!("demo"))
    );

    // Settled: a further look sends nothing.
    assert_eq!(worker.pass::<Session>("s").await.unwrap(), Action::await_change());
    assert_eq!(w.rx.hits().len(), 2);
}

#[tokio::test]
async fn a_status_written_during_a_pass_keeps_its_changes_and_gets_the_results() {
    let w = World::new().await;
    let worker = w.worker();
    w.session("s", &["k1"]).await;
    let gate = w.rx.hold();
    let arrived = w.rx.shared.arrived.clone();
    let pass = tokio::spawn({
        let worker = worker.clone();
        async move { worker.pass::<Session>("s").await }
    });
    tokio::time::timeout(Duration::from_secs(10), arrived.notified()).await.expect("the request arrives");

    // While the receiver holds the request, a reconcile writes a newer status: a new record and
    // a phase of its own.
    let mut newer = w.add("s", &["k2"]).await;
    newer.status.phase = Some(aoctl_api::session::Phase::Working);
    w.store.update_status_typed(&newer).await.unwrap();
    gate.add_permits(1);
    let action = tokio::time::timeout(Duration::from_secs(10), pass).await.expect("the pass ends").unwrap().unwrap();
    assert_eq!(action, Action::requeue(Duration::ZERO), "the new record is due at once");

    // The results were carried onto the newer status (409), which kept what the reconcile wrote.
    let s = w.get("s").await;
    assert_eq!(s.status.phase, Some(aoctl_api::session::Phase::Working));
    let (k1, k2) = (rec(&s, "k1"), rec(&s, "k2"));
    assert!(k1.delivered_at.is_some() && k1.pending.is_empty() && k1.attempts == 1, "{k1:#?}");
    assert!(k2.delivered_at.is_none() && k2.attempts == 0 && k2.pending.len() == 1, "{k2:#?}");
    assert_eq!(w.rx.keys(), ["k1"]);

    // The next pass sends the new record only.
    gate.add_permits(1);
    assert_eq!(worker.pass::<Session>("s").await.unwrap(), Action::await_change());
    assert!(rec(&w.get("s").await, "k2").delivered_at.is_some());
    assert_eq!(w.rx.keys(), ["k1", "k2"], "nothing sent twice");
}

#[tokio::test]
async fn escalations_and_given_up_targets_are_told_once_by_the_pass_that_records_them() {
    let w = World::new().await;
    let worker = w.worker();
    w.session("s", &[]).await;
    let mut s = w.get("s").await;
    notifiers::enqueue(&mut s.status.notifications, record("up", true));
    let mut last = record("last", false);
    last.attempts = notifiers::MAX_ATTEMPTS - 1;
    notifiers::enqueue(&mut s.status.notifications, last);
    w.store.update_status_typed(&s).await.unwrap();

    // Both fail: the escalation reaches no one yet, and the last try of the other is given up.
    w.rx.answer(503);
    worker.pass::<Session>("s").await.unwrap();
    let s = w.get("s").await;
    assert!(rec(&s, "last").failed_at.is_some(), "{s:#?}");
    let failed = w.events("NotifyFailed").await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].1.contains("notification last failed after 10 attempts"), "{failed:?}");
    assert!(w.events("Escalated").await.is_empty());

    // An escalation whose first attempt reaches its target is told as `Escalated`.
    let mut s = w.get("s").await;
    notifiers::enqueue(&mut s.status.notifications, record("first", true));
    w.store.update_status_typed(&s).await.unwrap();
    w.rx.answer(200);
    worker.pass::<Session>("s").await.unwrap();
    assert_eq!(w.events("Escalated").await, [("s".to_string(), "agent-needs-input: title of first".to_string())]);

    // Looked at again: nothing is told twice.
    let mut s = w.get("s").await;
    s.status.notifications.iter_mut().filter(|r| r.key == "up").for_each(|r| r.next_attempt_at = None);
    w.store.update_status_typed(&s).await.unwrap();
    worker.pass::<Session>("s").await.unwrap();
    assert_eq!(w.events("Escalated").await.len(), 1);
    assert_eq!(w.events("NotifyFailed").await.len(), 1);
}

#[tokio::test]
async fn a_worker_started_on_a_store_delivers_what_nobody_handed_over_and_what_is_handed_over() {
    let w = World::new().await;
    // Left by a controller that stopped before delivering: a session's record, a project's, and
    // a session whose records are settled.
    w.session("pending", &["k-session"]).await;
    w.session("done", &["k-done"]).await;
    let mut done = w.get("done").await;
    done.status.notifications[0].delivered_at = Some(Time::now());
    done.status.notifications[0].pending.clear();
    w.store.update_status_typed(&done).await.unwrap();
    w.session("quiet", &[]).await;
    let mut p: Project = w.store.get_typed("demo").await.unwrap();
    notifiers::enqueue(&mut p.status.notifications, record("k-project", false));
    w.store.update_status_typed(&p).await.unwrap();
    assert_eq!(unsettled(&w.store).await, ["Project/demo", "Session/pending"]);

    let metrics = crate::metrics::Metrics::new().unwrap();
    let outbox = Outbox::new(metrics.engine.clone());
    let handoff: Handoff = outbox.handoff();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(outbox.run(w.store.clone(), async move {
        let _ = stopped.await;
    }));
    let delivered = |o: &[NotificationRecord]| o.iter().all(|r| r.delivered_at.is_some());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let s = w.get("pending").await;
        let p: Project = w.store.get_typed("demo").await.unwrap();
        if delivered(&s.status.notifications) && delivered(&p.status.notifications) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not delivered: {s:#?} {p:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut keys = w.rx.keys();
    keys.sort();
    assert_eq!(keys, ["k-project", "k-session"], "each once, and nothing settled sent again");
    let project_hit = w.rx.hits().into_iter().find(|h| h.key == "k-project").unwrap();
    assert!(project_hit.body.get("session").is_none() && project_hit.path == "/hook", "{project_hit:?}");

    // A record written later is handed over, and delivered long before the next rescan.
    let written = w.add("quiet", &["k-later"]).await;
    handoff.hand(&written);
    handoff.hand(&written);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !delivered(&w.get("quiet").await.status.notifications) {
        assert!(tokio::time::Instant::now() < deadline, "the hand-off was not delivered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(w.rx.keys().iter().filter(|k| *k == "k-later").count(), 1);

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), run).await.expect("the worker stops").unwrap();
    assert_eq!(w.rx.hits().len(), 3);
}
