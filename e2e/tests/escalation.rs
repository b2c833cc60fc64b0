//! Episodes, escalation, the notification outbox and guarded merges against the GitHub stand-in,
//! with the scripted agent and real HTTP receivers: CI failing on every head the agent pushes gets
//! `retries + 1` messages and then exactly one escalation (webhook, Slack and Discord, each with
//! the idempotency key); a notification recorded before a SIGKILL is delivered once after the
//! restart, with the same key; the desktop and command notifiers get it for real; and a merge whose head moves while GitHub handles it is refused,
//! recorded as `Merged` False `HeadMoved`, and the new head is merged once green.

use std::time::Duration;

use serde_json::{json, Value};

use crate::lifecycle::{eventually, git, transcript, Cleanup, READY};
use crate::receivers::{Desktop, Mode, Receiver};
use crate::standin::{count, delivered, has, head, is, session, Gh, REPO};

const PROJECT: &str = "widgets";
/// How long one step may take.
const STEP: Duration = Duration::from_secs(30);
const FAILING_LOG: &str =
    "test login::redirect_once ... FAILED\nredirect loop detected\n##[error]Process completed with exit code 101.";
/// The last line of a CI-failure message: the agent has it once it was submitted.
const CI_ASK: &str = "got: Please fix the failure and push.";

fn head_sha(obj: &Value) -> &str {
    obj.pointer("/status/pullRequest/headSha").and_then(Value::as_str).unwrap_or("")
}

/// A project on the stand-in's repository whose notifiers are `notifiers`.
fn project(gh: &Gh, reactions: Value, notifiers: Value) -> Value {
    let mut p = gh.project(PROJECT, REPO, "2s", reactions);
    p["spec"]["notifiers"] = notifiers;
    p
}

/// The session's notification records.
fn records(s: &Value) -> Vec<Value> {
    s.pointer("/status/notifications").and_then(Value::as_array).cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ci_failing_on_every_pushed_head_escalates_once_after_its_retries() {
    let gh = Gh::start(REPO, true).await;
    let _cleanup = Cleanup::new(&gh.server);
    let rx = Receiver::start().await;
    let reactions = json!({"ci-failed": {"retries": 2, "escalateAfter": "1h"}});
    let notifiers = json!([{"type": "webhook", "url": rx.url("/hook")}, {"type": "slack", "url": rx.url("/slack")},
        {"type": "discord", "url": rx.url("/discord")}]);
    gh.server.create("projects", &project(&gh, reactions, notifiers)).await;
    gh.project_ready(PROJECT).await;
    let name = "escalate";
    gh.server.create("sessions", &session(name, PROJECT, "Fix the login redirect loop", json!({}))).await;
    gh.server.wait_for("sessions", name, READY, |o| is(o, "PullRequestOpen", "True")).await;
    let branch = format!("{PROJECT}/{name}");
    let mut sha = head(&gh.repos.bare, &branch).expect("the agent pushed its branch");

    // retries: 2 — the first message and two more, one per failing head the agent pushes.
    for i in 1..=3 {
        gh.server.wait_for("sessions", name, STEP, |o| head_sha(o) == sha).await;
        delivered(&gh.standin.check_run(&sha, "ci", "failure", FAILING_LOG).await, 202);
        eventually(STEP, &format!("CI message {i} submitted"), || {
            let t = transcript(&gh.server, name);
            if count(&t, CI_ASK) == i {
                Ok(())
            } else {
                Err(t)
            }
        })
        .await;
        let old = sha.clone();
        sha = eventually(STEP, "the agent's fix pushed", || match head(&gh.repos.bare, &branch) {
            Some(h) if h != old => Ok(h),
            other => Err(format!("{other:?}")),
        })
        .await;
        if i < 3 {
            let s = gh.server.wait_for("sessions", name, STEP, |o| head_sha(o) == sha).await;
            let r = &s["status"]["reactions"]["ci-failed"];
            assert_eq!(r["attempts"], i as u64, "a pushed head whose checks are pending continues the episode: {s:#}");
            assert_eq!(r["escalated"], false, "{s:#}");
        }
    }
    let episode = gh.server.wait_for("sessions", name, STEP, |o| head_sha(o) == sha).await["status"]["reactions"]
        ["ci-failed"]["episode"]
        .clone();
    assert!(episode.is_string(), "one episode across the pushes");

    // The fourth head fails too: the people are told, once, and the agent is not sent more.
    delivered(&gh.standin.check_run(&sha, "ci", "failure", FAILING_LOG).await, 202);
    let hits = rx
        .received(STEP, "the escalation at every receiver", |h| {
            ["/hook", "/slack", "/discord"].iter().all(|p| h.iter().any(|x| &x.path == p && x.answered == 200))
        })
        .await;
    let s =
        gh.server.wait_for("sessions", name, STEP, |o| records(o).iter().all(|r| r["deliveredAt"].is_string())).await;
    let r = &s["status"]["reactions"]["ci-failed"];
    assert_eq!((&r["attempts"], &r["escalated"], &r["episode"]), (&json!(3), &json!(true), &episode), "{s:#}");
    let recs = records(&s);
    assert_eq!(recs.len(), 1, "one notification recorded: {s:#}");
    let key = recs[0]["key"].as_str().expect("the record's key").to_string();
    let uid = s["metadata"]["uid"].as_str().expect("uid");
    assert_eq!(key, format!("{uid}:ci-failed:{}:escalation", episode.as_str().unwrap()), "{s:#}");
    assert!(recs[0]["pending"].is_null() && recs[0]["attempts"] == 1, "{:#}", recs[0]);
    assert_eq!(hits.len(), 3, "one request per receiver: {hits:#?}");
    for h in &hits {
        assert_eq!(h.key.as_deref(), Some(key.as_str()), "Idempotency-Key of {h:#?}");
    }
    let by = |p: &str| hits.iter().find(|h| h.path == p).expect("a request").body.clone();
    let hook = by("/hook");
    assert_eq!((&hook["idempotencyKey"], &hook["escalated"]), (&json!(key), &json!(true)), "{hook:#}");
    assert_eq!(
        (&hook["reaction"], &hook["session"], &hook["project"]),
        (&json!("ci-failed"), &json!(name), &json!(PROJECT))
    );
    let title = hook["title"].as_str().unwrap_or_default();
    assert!(title.contains("still unresolved after 3 messages"), "{hook:#}");
    assert!(hook["message"].as_str().unwrap_or_default().contains("redirect loop detected"), "{hook:#}");
    // Slack's incoming webhook: `text`, and blocks of a header (plain_text ≤ 150) and a section (mrkdwn ≤ 3000).
    let slack = by("/slack");
    assert!(slack["text"].as_str().is_some_and(|t| t.contains("escalated")), "{slack:#}");
    assert_eq!(
        (&slack["blocks"][0]["type"], &slack["blocks"][0]["text"]["type"]),
        (&json!("header"), &json!("plain_text"))
    );
    assert!(slack["blocks"][0]["text"]["text"].as_str().is_some_and(|t| t.chars().count() <= 150), "{slack:#}");
    assert_eq!(
        (&slack["blocks"][1]["type"], &slack["blocks"][1]["text"]["type"]),
        (&json!("section"), &json!("mrkdwn"))
    );
    // Discord's execute webhook: `content` ≤ 2000, one embed with a title ≤ 256.
    let discord = by("/discord");
    assert!(discord["content"].as_str().is_some_and(|c| !c.is_empty() && c.chars().count() <= 2000), "{discord:#}");
    assert!(discord["embeds"][0]["title"].as_str().is_some_and(|t| t.chars().count() <= 256), "{discord:#}");
    let t = transcript(&gh.server, name);
    assert_eq!(count(&t, "got: [aoctl:ci-failed:"), 3, "retries: 2 is three messages:\n{t}");

    // It goes on failing (a re-run on the same head): no message, no second escalation.
    let before = s["status"]["reactions"]["ci-failed"]["lastFingerprint"].clone();
    delivered(&gh.standin.check_run(&sha, "ci-rerun", "failure", FAILING_LOG).await, 202);
    gh.server
        .wait_for("sessions", name, STEP, |o| {
            let fp = &o["status"]["reactions"]["ci-failed"]["lastFingerprint"];
            fp.is_string() && *fp != before
        })
        .await;
    assert_eq!(rx.hits().len(), 3, "escalated once: {:#?}", rx.hits());
    let t = transcript(&gh.server, name);
    assert_eq!(count(&t, "got: [aoctl:ci-failed:"), 3, "no fourth message:\n{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_recorded_before_a_kill9_is_delivered_once_after_the_restart() {
    let mut gh = Gh::start(REPO, true).await;
    let _cleanup = Cleanup::new(&gh.server);
    let rx = Receiver::start().await;
    rx.set(Mode::Fail);
    let name = "outbox";
    notified_ci_failure(&gh, name, json!([{"type": "webhook", "url": rx.url("/hook")}])).await;

    // Recorded, tried and refused by the receiver: the record waits in status for its next attempt.
    let s = gh
        .server
        .wait_for("sessions", name, STEP, |o| {
            records(o).first().is_some_and(|r| r["attempts"].as_u64() >= Some(1) && r["lastError"].is_string())
        })
        .await;
    let rec = records(&s)[0].clone();
    assert!(rec["deliveredAt"].is_null() && rec["nextAttemptAt"].is_string(), "{rec:#}");
    assert_eq!(rec["pending"], json!(["webhook#0"]), "{rec:#}");
    let key = rec["key"].as_str().expect("key").to_string();

    // The next attempt reaches the receiver, which holds it unanswered; the controller is killed
    // having sent it but not recorded the result.
    rx.set(Mode::Hold);
    rx.received(STEP, "an attempt held open", |h| h.iter().any(|x| x.answered == 0)).await;
    gh.server.kill9();
    rx.set(Mode::Ok);
    gh.restart().await;
    let s = gh
        .server
        .wait_for("sessions", name, STEP, |o| records(o).first().is_some_and(|r| r["deliveredAt"].is_string()))
        .await;
    let rec = records(&s)[0].clone();
    assert!(rec["pending"].is_null() && rec["lastError"].is_null(), "{rec:#}");
    let hits = rx.hits();
    assert!(hits.iter().all(|h| h.key.as_deref() == Some(key.as_str())), "every attempt carries the key: {hits:#?}");
    assert!(hits.iter().all(|h| h.body["idempotencyKey"] == json!(key)), "{hits:#?}");
    assert_eq!(rx.acked("/hook").len(), 1, "delivered exactly once: {hits:#?}");
    assert!(hits.len() >= 3, "refused, held, then delivered: {hits:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_that_moves_during_the_merge_is_not_merged_and_the_new_green_head_is() {
    let gh = Gh::start(REPO, true).await;
    let _cleanup = Cleanup::new(&gh.server);
    let reactions = json!({"approved-and-green": {"auto": true, "action": "merge"}});
    gh.server.create("projects", &gh.project(PROJECT, REPO, "2s", reactions)).await;
    gh.project_ready(PROJECT).await;
    let name = "race";
    gh.server.create("sessions", &session(name, PROJECT, "Fix the login redirect loop", json!({}))).await;
    let s = gh.server.wait_for("sessions", name, READY, |o| is(o, "PullRequestOpen", "True")).await;
    let number = s["status"]["pullRequest"]["number"].as_u64().expect("number");
    let branch = format!("{PROJECT}/{name}");
    let first = head(&gh.repos.bare, &branch).expect("the agent pushed its branch");
    gh.server.wait_for("sessions", name, STEP, |o| head_sha(o) == first).await;

    // GitHub takes two seconds over the merge request; the branch moves meanwhile.
    let route = "PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge";
    gh.standin.ok("POST", "/_standin/faults", Some(&json!({"route": route, "delayMs": 2000}))).await;
    delivered(&gh.standin.check_run(&first, "ci", "success", "all tests passed").await, 202);
    delivered(&gh.standin.review(number, "octo-reviewer", "APPROVED", "Ship it", json!([])).await, 202);
    let s = gh.server.wait_for("sessions", name, STEP, |o| o.pointer("/status/merge/sha").is_some()).await;
    assert_eq!(s["status"]["merge"]["sha"], json!(first), "the merge is recorded for the approved head: {s:#}");
    // The fault is used up when the merge request arrives; it then waits out the delay.
    let deadline = std::time::Instant::now() + STEP;
    while !gh.standin.ok("GET", "/_standin/faults", None).await["faults"].as_array().is_some_and(Vec::is_empty) {
        assert!(std::time::Instant::now() < deadline, "no merge request reached the stand-in");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let bare = &gh.repos.bare;
    let tree = git(bare, &["rev-parse", &format!("{first}^{{tree}}")]);
    let moved = git(bare, &["commit-tree", tree.trim(), "-p", &first, "-m", "A push during the merge"]);
    let moved = moved.trim().to_string();
    git(bare, &["update-ref", &format!("refs/heads/{branch}"), &moved, &first]);

    let s = gh.server.wait_for("sessions", name, STEP, |o| has(o, "Merged", "False", "HeadMoved")).await;
    assert_eq!(s["status"]["merge"]["result"], "HeadMoved", "{s:#}");
    let pulls = gh.standin.pulls().await;
    assert_eq!(pulls[0]["merged"], false, "{:#}", pulls[0]);
    let merges = |v: &Value| v["byRoute"][route]["total"].as_u64().unwrap_or(0);
    assert_eq!(merges(&gh.standin.requests().await), 1, "the refused sha is not tried again");

    // The new head goes through its checks; approved and green, it is merged.
    gh.standin.ok("POST", "/_standin/refresh", Some(&json!({}))).await;
    let s = gh.server.wait_for("sessions", name, STEP, |o| head_sha(o) == moved).await;
    assert!(!is(&s, "ChecksPassed", "True") && !is(&s, "Merged", "True"), "{s:#}");
    delivered(&gh.standin.check_run(&moved, "ci", "success", "all tests passed").await, 202);
    let s = gh.server.wait_for("sessions", name, STEP, |o| is(o, "Merged", "True")).await;
    assert_eq!((&s["status"]["merge"]["sha"], &s["status"]["merge"]["result"]), (&json!(moved), &json!("Merged")));
    let pulls = gh.standin.pulls().await;
    assert_eq!((&pulls[0]["merged"], &pulls[0]["head"]["sha"]), (&json!(true), &json!(moved)), "{:#}", pulls[0]);
    assert_eq!(merges(&gh.standin.requests().await), 2, "one merge request per approved head");
}

/// The desktop and command notifiers for real: `notify-send` reaches a notification server
/// (dunst on Xvfb, on a private session bus), and the command gets the webhook JSON on stdin —
/// both with the idempotency key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn desktop_and_command_notifiers_get_the_notification_with_its_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(desktop) = Desktop::start(dir.path()) else {
        crate::strict::missing("Xvfb, dbus-daemon, dunst or notify-send is not installed");
        return;
    };
    let bus = std::ffi::OsString::from(&desktop.bus);
    let gh = Gh::start_with_env(REPO, true, &[("DBUS_SESSION_BUS_ADDRESS", bus.as_os_str())]).await;
    let _cleanup = Cleanup::new(&gh.server);
    let told = dir.path().join("told.json");
    let command = json!(["sh", "-c", format!("cat > '{}'", told.display())]);
    let notifiers = json!([{"type": "desktop"}, {"type": "command", "command": command}]);
    let name = "desk";
    let sha = notified_ci_failure(&gh, name, notifiers).await;
    let s = gh
        .server
        .wait_for("sessions", name, STEP, |o| records(o).first().is_some_and(|r| r["deliveredAt"].is_string()))
        .await;
    let key = records(&s)[0]["key"].as_str().expect("key").to_string();
    let calls = desktop.calls();
    assert_eq!(count(&calls, "member=Notify"), 1, "one Notify call:\n{calls}");
    assert!(calls.contains("string \"aoctl\""), "the app name:\n{calls}");
    assert!(calls.contains(&format!("CI failed on {}", &sha[..7])), "the title:\n{calls}");
    assert!(calls.contains("\"x-aoctl-idempotency-key\"") && calls.contains(&format!("string \"{key}\"")), "{calls}");
    let got: Value = serde_json::from_str(&std::fs::read_to_string(&told).expect("the command ran")).expect("JSON");
    assert_eq!(
        (&got["idempotencyKey"], &got["reaction"], &got["session"]),
        (&json!(key), &json!("ci-failed"), &json!(name))
    );
}

/// A project whose `ci-failed` reaction notifies `notifiers`, a session `name` of it with its PR
/// open, and a failing check on the PR's head; the head's sha.
async fn notified_ci_failure(gh: &Gh, name: &str, notifiers: Value) -> String {
    gh.server.create("projects", &project(gh, json!({"ci-failed": {"action": "notify"}}), notifiers)).await;
    gh.project_ready(PROJECT).await;
    gh.server.create("sessions", &session(name, PROJECT, "Fix the login redirect loop", json!({}))).await;
    gh.server.wait_for("sessions", name, READY, |o| is(o, "PullRequestOpen", "True")).await;
    let sha = head(&gh.repos.bare, &format!("{PROJECT}/{name}")).expect("the agent pushed its branch");
    delivered(&gh.standin.check_run(&sha, "ci", "failure", FAILING_LOG).await, 202);
    sha
}
