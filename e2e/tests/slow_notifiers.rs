//! A slow notifier holds up no session: the scripted agent asks a person a question, the
//! `agent-needs-input` reaction records a notification, and the project's webhook receiver holds
//! the request unanswered. Meanwhile `aoctl send` answers the agent and the session's reconcile
//! goes on (the message is in the transcript, the activity moves on) while the delivery's outcome
//! is not even recorded yet; once the receiver answers, the notification is delivered, once.
//!
//! The receiver answers when the test says so rather than after a fixed delay: a notifier's HTTP
//! request is bounded at 10 s, so the test asserts on the order of events, not on wall time.

use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::Server;
use crate::lifecycle::{agent_repo, eventually, project, ready, session, token, transcript, wait_all, Cleanup, READY};
use crate::receivers::{Mode, Receiver};

/// How long one step may take.
const STEP: Duration = Duration::from_secs(30);

/// The session's notification records.
fn records(s: &Value) -> Vec<Value> {
    s.pointer("/status/notifications").and_then(Value::as_array).cloned().unwrap_or_default()
}

fn activity(s: &Value) -> &str {
    s.pointer("/status/activity/state").and_then(Value::as_str).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notifier_that_holds_its_answer_holds_up_no_session() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let rx = Receiver::start().await;
    rx.set(Mode::Late);
    let repo = agent_repo(server.tmp.path(), "slow");
    let notifiers = json!({"notifiers": [{"type": "webhook", "url": rx.url("/hook")}]});
    server.create("projects", &project("slow", &repo, notifiers)).await;
    let name = "asker";
    server.create("sessions", &session(name, "slow", &token(name), json!({}))).await;
    wait_all(&server, &[name], READY, "Ready", ready).await;

    // The agent asks a person; the notifiers are told, and the receiver holds the request.
    server.aoctl(&["send", name, "ask first"]).ok();
    let s = server.wait_for("sessions", name, STEP, |o| !records(o).is_empty()).await;
    let rec = records(&s)[0].clone();
    assert_eq!(rec["reaction"], "agent-needs-input", "{rec:#}");
    let key = rec["key"].as_str().expect("the record's key").to_string();
    rx.received(STEP, "the notification held by the receiver", |h| h.len() == 1 && h[0].answered == 0).await;

    // While it is held, a person's answer goes through `aoctl send`: it reaches the agent, and the
    // session's reconcile records that the agent no longer waits, before the held delivery's outcome
    // is recorded.
    server.aoctl(&["send", name, "yes-please"]).ok();
    eventually(STEP, "the answer in the transcript", || {
        let t = transcript(&server, name);
        t.contains("demo-agent: answered: yes-please").then_some(()).ok_or(t)
    })
    .await;
    let s = server.wait_for("sessions", name, STEP, |o| !activity(o).is_empty() && activity(o) != "needs-input").await;
    let rec = records(&s)[0].clone();
    assert_eq!(rec["attempts"].as_u64().unwrap_or(0), 0, "the held attempt is not recorded yet: {s:#}");
    assert!(rec["deliveredAt"].is_null() && rec["lastError"].is_null(), "{rec:#}");
    let hits = rx.hits();
    assert!(hits.len() == 1 && hits[0].answered == 0, "the receiver still holds the one request: {hits:#?}");

    // The receiver answers: delivered once, on that attempt.
    rx.set(Mode::Ok);
    let s = server
        .wait_for("sessions", name, STEP, |o| records(o).first().is_some_and(|r| r["deliveredAt"].is_string()))
        .await;
    let rec = records(&s)[0].clone();
    assert!(rec["pending"].is_null() && rec["lastError"].is_null() && rec["attempts"] == 1, "{rec:#}");
    // A few more looks by the worker and the reconciler: nothing is sent again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let hits = rx.hits();
    assert_eq!(rx.acked("/hook").len(), 1, "delivered exactly once: {hits:#?}");
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!((hits[0].key.as_deref(), &hits[0].body["idempotencyKey"]), (Some(key.as_str()), &json!(key)));
    assert_eq!((&hits[0].body["session"], &hits[0].body["project"]), (&json!(name), &json!("slow")));
    cleanup.finish();
}
