//! How reactions reach an agent when a person is involved, against the GitHub stand-in and the
//! scripted agent: a CI failure that arrives while the agent's screen asks a person a yes/no
//! question waits for the answer (the person is told) and is typed once after it; review comments
//! already typed are not typed again by a controller killed and restarted between two reviews.

use std::time::Duration;

use serde_json::{json, Value};

use crate::github_feedback::{event, heard, open_pr, pushed_after, PROJECT, REVIEWER, STEP};
use crate::harness::API;
use crate::lifecycle::{transcript, Cleanup, Tmux};
use crate::standin::{count, delivered, head};

/// The notifications the receiver got for `reaction`.
fn told(gh: &crate::standin::Gh, reaction: &str) -> Vec<Value> {
    gh.notes.bodies().into_iter().filter(|b| b["reaction"] == reaction).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ci_failure_waits_while_the_agent_asks_a_person_and_is_typed_once_after_the_answer() {
    let name = "asking";
    let (gh, _number) = open_pr(name, json!({}), json!({})).await;
    let _cleanup = Cleanup::new(&gh.server);
    let branch = format!("{PROJECT}/{name}");
    let sha = head(&gh.repos.bare, &branch).expect("the agent pushed");

    // The agent asks a person something and waits for the answer.
    let r = gh.server.json("POST", &format!("{API}/sessions/{name}/input"), &json!({"text": "ask first"})).await;
    assert!(r.code == 200 || r.code == 202, "{}", r.text());
    heard(&gh, name, "(y/n)").await;
    gh.server
        .wait_for("sessions", name, STEP, |o| o.pointer("/status/activity/state") == Some(&json!("needs-input")))
        .await;

    delivered(&gh.standin.check_run(&sha, "ci", "failure", "test login ... FAILED").await, 202);
    let waiting = event(&gh, name, "ReactionWaiting").await;
    assert!(waiting.contains("the ci-failed message waits until a person answers"), "{waiting}");
    let s = gh
        .server
        .wait_for("sessions", name, STEP, |o| {
            crate::standin::cond(o, "AgentActive")["message"]
                .as_str()
                .is_some_and(|m| m.contains("ci-failed message waits"))
        })
        .await;
    assert_eq!(crate::standin::cond(&s, "AgentActive")["reason"], "NeedsInput", "{s:#}");
    crate::lifecycle::eventually(STEP, "the person told that a reaction waits", || {
        let got = told(&gh, "ci-failed");
        (!got.is_empty()).then_some(()).ok_or(format!("{:#?}", gh.notes.bodies()))
    })
    .await;
    // A few more looks while the question is on screen: nothing typed, nobody told twice.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let t = transcript(&gh.server, name);
    assert_eq!(count(&t, "[aoctl:ci-failed:"), 0, "nothing typed into the question:\n{t}");
    assert!(!t.contains("demo-agent: answered:"), "the question is still open:\n{t}");
    let got = told(&gh, "ci-failed");
    assert_eq!(got.len(), 1, "told once: {got:#?}");
    assert!(got[0]["title"].as_str().is_some_and(|t| t.contains("waits for an answer")), "{got:#?}");
    let waits = crate::github_feedback::reasons(&gh, name).await;
    assert_eq!(waits.iter().filter(|(r, _)| r == "ReactionWaiting").count(), 1, "{waits:#?}");

    // A person answers on the agent's screen; the message follows, once.
    let tmux = Tmux::of(&gh.server);
    let out = tmux.run(&["send-keys", "-t", &format!("={name}:"), "y", "Enter"]);
    assert!(out.status.success(), "{out:?}");
    heard(&gh, name, "demo-agent: answered: y").await;
    let t = heard(&gh, name, "got: [aoctl:ci-failed:").await;
    assert!(t.contains("CI failed on"), "{t}");
    pushed_after(&gh, &branch, &sha).await;
    let t = transcript(&gh.server, name);
    assert_eq!(count(&t, "got: [aoctl:ci-failed:"), 1, "typed once:\n{t}");
    let answered = t.find("demo-agent: answered: y").expect("answered");
    assert!(t.find("got: [aoctl:ci-failed:").is_some_and(|at| at > answered), "typed after the answer:\n{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_comments_typed_before_a_kill_9_are_not_typed_again_after_the_restart() {
    let name = "restarted";
    let (mut gh, number) = open_pr(name, json!({}), json!({})).await;
    let mut cleanup = Cleanup::new(&gh.server);
    let (notes, branch) = (format!("notes/{name}.md"), format!("{PROJECT}/{name}"));
    let first_head = head(&gh.repos.bare, &branch).expect("the agent pushed");

    let first = "Say which redirect loops";
    let comments = json!([{"path": notes, "line": 1, "body": first}]);
    delivered(&gh.standin.review(number, REVIEWER, "CHANGES_REQUESTED", "Not yet.", comments).await, 202);
    heard(&gh, name, &format!("got: {notes}:1: {first}")).await;
    let fixed = pushed_after(&gh, &branch, &first_head).await;
    gh.server
        .wait_for("sessions", name, STEP, |o| {
            o.pointer("/status/feedback/comments").and_then(Value::as_array).is_some_and(|c| c.len() == 1)
                && o.pointer("/status/pullRequest/headSha").and_then(Value::as_str) == Some(&fixed)
        })
        .await;

    // Killed with SIGKILL and started again on the same data; then a second review arrives.
    gh.restart().await;
    cleanup.retarget(&gh.server);
    let second = "Cover the redirect with a test";
    let comments = json!([{"path": notes, "line": 3, "body": second}]);
    delivered(&gh.standin.review(number, REVIEWER, "CHANGES_REQUESTED", "One more.", comments).await, 202);
    heard(&gh, name, &format!("got: {notes}:3: {second}")).await;
    gh.server
        .wait_for("sessions", name, STEP, |o| {
            o.pointer("/status/feedback/comments").and_then(Value::as_array).is_some_and(|c| c.len() == 2)
        })
        .await;
    // A few more looks by the restarted controller.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let t = transcript(&gh.server, name);
    assert_eq!(count(&t, &format!("got: {notes}:1: {first}")), 1, "the first review's comment was typed once:\n{t}");
    assert_eq!(count(&t, "got: Review by octo-reviewer (requested changes): Not yet."), 1, "{t}");
    assert_eq!(count(&t, &format!("got: {notes}:3: {second}")), 1, "{t}");
    assert_eq!(count(&t, "got: [aoctl:changes-requested:"), 2, "one message per review:\n{t}");
}
