//! GitHub's rate limit: the stand-in answers 403 with `X-RateLimit-Remaining: 0` and a reset three
//! seconds ahead, first while aoctl would open the pull request, then while it would react to a
//! failing check. aoctl says so in `PullRequestOpen`, holds its requests back until the reset,
//! and then opens the one pull request and delivers the CI failure once. The steady-state cost
//! of tracking a pull request whose webhooks are heard is measured, printed and bounded: polls
//! go ten times rarer, and an unchanged pull request costs nothing against the limit.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::API;
use crate::lifecycle::{eventually, transcript, Cleanup, READY};
use crate::standin::{count, delivered, has, head, metric, session, Gh, REPO};

const PROJECT: &str = "widgets";
/// How long one step may take.
const STEP: Duration = Duration::from_secs(30);
/// How long the stand-in refuses everything.
const WINDOW: u64 = 3;
/// The idle time over which requests are counted.
const IDLE: Duration = Duration::from_secs(20);

/// Exhausts the stand-in's rate limit until `WINDOW` seconds from now and resets its counters.
async fn exhaust(gh: &Gh) -> Instant {
    gh.standin.ok("DELETE", "/_standin/requests", None).await;
    gh.standin.ok("POST", "/_standin/rate-limit", Some(&json!({"remaining": 0, "resetIn": WINDOW}))).await;
    Instant::now()
}

/// The API requests the stand-in refused with 403 since its counters were reset.
async fn refused(gh: &Gh) -> Vec<Value> {
    let log = gh.standin.ok("GET", "/_standin/requests?log=1", None).await;
    log["log"].as_array().into_iter().flatten().filter(|r| r["status"] == 403).cloned().collect()
}

fn reason(obj: &Value, type_: &str) -> String {
    let c = crate::standin::cond(obj, type_);
    format!("{}/{}", c["status"].as_str().unwrap_or("-"), c["reason"].as_str().unwrap_or("-"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_rate_limit_backs_off_and_loses_nothing() {
    let gh = Gh::start(REPO, true).await;
    let cleanup = Cleanup::new(&gh.server);
    gh.server.create("projects", &gh.project(PROJECT, REPO, "2s", json!({}))).await;
    gh.project_ready(PROJECT).await;
    let name = "limited";
    let branch = format!("{PROJECT}/{name}");
    let spec = json!({"pullRequest": {"create": false}});
    gh.server.create("sessions", &session(name, PROJECT, "Fix the login redirect loop", spec)).await;
    gh.server.wait_for("sessions", name, READY, |o| has(o, "PullRequestOpen", "False", "NoPullRequest")).await;
    let first =
        eventually(STEP, "the agent's push", || head(&gh.repos.bare, &branch).ok_or_else(|| "no branch".to_string()))
            .await;

    // The limit is spent when the session starts wanting a pull request.
    let t0 = exhaust(&gh).await;
    let patch = json!({"spec": {"pullRequest": {"create": true}}});
    gh.server.json("PATCH", &format!("{API}/sessions/{name}"), &patch).await.expect(200);
    // A commit status on the branch: its webhook makes aoctl look at GitHub now, inside the window.
    let status = json!({"branch": branch, "context": "lint", "state": "success"});
    delivered(&gh.standin.ok("POST", "/_standin/statuses", Some(&status)).await, 202);
    let s =
        gh.server.wait_for("sessions", name, STEP, |o| has(o, "PullRequestOpen", "Unknown", "GitHubRateLimited")).await;
    let msg = crate::standin::cond(&s, "PullRequestOpen")["message"].clone();
    assert!(msg.as_str().is_some_and(|m| m.contains("rate limit")), "{s:#}");
    assert!(t0.elapsed() < Duration::from_secs(WINDOW), "the limit was seen only after the window");
    let s = gh.server.wait_for("sessions", name, STEP, |o| has(o, "PullRequestOpen", "True", "Open")).await;
    let opened_after = t0.elapsed();
    let blocked = refused(&gh).await;
    eprintln!(
        "ratelimit: PR opened {} ms after the limit was spent; refused requests: {}",
        opened_after.as_millis(),
        blocked.len()
    );
    assert!(opened_after >= Duration::from_secs(WINDOW - 1), "opened within the window: {opened_after:?}");
    assert!(!blocked.is_empty() && blocked.len() <= 3, "aoctl kept asking while blocked: {blocked:#?}");
    let pulls = gh.standin.pulls().await;
    assert_eq!(pulls.len(), 1, "one pull request: {pulls:#?}");
    assert_eq!(s["status"]["pullRequest"]["number"], pulls[0]["number"], "{s:#}");
    assert_eq!(pulls[0]["head"]["sha"], first, "{:#}", pulls[0]);
    assert!(metric(&gh.server, "aoctl_github_requests_total", &[("code", "403")]).await >= 1.0, "403s counted");

    // The limit is spent again as a check fails: the failure still reaches the agent, once.
    let t1 = exhaust(&gh).await;
    delivered(&gh.standin.check_run(&first, "ci", "failure", "error: expected `;`\nbuild failed").await, 202);
    gh.server.wait_for("sessions", name, STEP, |o| has(o, "PullRequestOpen", "Unknown", "GitHubRateLimited")).await;
    eventually(STEP, "the CI failure in the agent's transcript", || {
        let t = transcript(&gh.server, name);
        if t.contains("got: [aoctl:ci-failed:") {
            Ok(())
        } else {
            Err(t)
        }
    })
    .await;
    let delivered_after = t1.elapsed();
    let blocked = refused(&gh).await;
    eprintln!(
        "ratelimit: CI failure delivered {} ms after the limit was spent; refused requests: {}",
        delivered_after.as_millis(),
        blocked.len()
    );
    assert!(delivered_after >= Duration::from_secs(WINDOW - 1), "delivered within the window: {delivered_after:?}");
    assert!(!blocked.is_empty() && blocked.len() <= 3, "aoctl kept asking while blocked: {blocked:#?}");

    // Steady state: the fix is pushed and green, and nothing happens for a while.
    let second = eventually(STEP, "the fix pushed", || match head(&gh.repos.bare, &branch) {
        Some(h) if h != first => Ok(h),
        other => Err(format!("{other:?}")),
    })
    .await;
    delivered(&gh.standin.check_run(&second, "ci", "success", "ok").await, 202);
    let sha_green = |o: &Value| {
        o.pointer("/status/pullRequest/headSha") == Some(&json!(second))
            && has(o, "ChecksPassed", "True", "ChecksPassing")
    };
    let s = gh.server.wait_for("sessions", name, STEP, sha_green).await;
    assert!(has(&s, "PullRequestOpen", "True", "Open"), "{}", reason(&s, "PullRequestOpen"));
    gh.standin.ok("DELETE", "/_standin/requests", None).await;
    tokio::time::sleep(IDLE).await;
    let asked = gh.standin.requests().await;
    let (total, counted) = (asked["total"].as_f64().unwrap_or(0.0), asked["counted"].as_f64().unwrap_or(0.0));
    // Each poll lists the branch's pull requests once.
    let polls = asked["byRoute"]["GET /repos/{owner}/{repo}/pulls"]["total"].as_f64().unwrap_or(0.0);
    eprintln!(
        "ratelimit: idle open PR with webhooks heard, pollInterval 2s, {}s: {polls} polls, {total} requests \
         ({counted} counted against the limit, the rest 304); by route: {}",
        IDLE.as_secs(),
        asked["byRoute"]
    );
    // Webhooks were heard, so an idle pull request is polled every 20 s, not every 2 s; what is
    // read of it unchanged answers 304 and costs nothing.
    assert!(polls <= 2.0, "an idle pull request whose webhooks are heard is polled rarely: {asked:#}");
    assert!(counted <= 2.0, "an idle pull request costs (almost) nothing against the limit: {asked:#}");

    // Nothing was lost or repeated.
    let t = transcript(&gh.server, name);
    assert_eq!(count(&t, "got: [aoctl:ci-failed:"), 1, "CI failure messages:\n{t}");
    assert_eq!(gh.standin.pulls().await.len(), 1, "still one pull request");
    cleanup.finish();
}
