//! The closed loop against the GitHub stand-in: a session's agent commits and pushes, aoctl opens
//! the pull request, a failing check and a review that requests changes are typed into the agent
//! (each exactly once), its fixes are pushed, and the approved, green pull request is merged by the
//! `approved-and-green` reaction. The story runs once with an agent that works in bursts (a
//! spinner redrawn every half second for a minute after each message, as real agent CLIs do) and
//! once with a quiet agent and the controller killed with SIGKILL at three points; another test
//! kills it between typing a message and submitting it.
//! The feedback latency is measured by an ignored test.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::Server;
use crate::lifecycle::{events, eventually, git, phase, transcript, worktrees, Cleanup, Tmux, READY};
use crate::standin::{cond, count, delivered, get_session, has, head, is, metric, session, Gh, REPO};

/// The project of these tests.
const PROJECT: &str = "widgets";
/// How long one step of the story may take.
const STEP: Duration = Duration::from_secs(30);
/// The reviewer who requests changes and then approves.
const REVIEWER: &str = "octo-reviewer";
/// The log of the failing check; the agent must see its last lines.
const FAILING_LOG: &str = "Run cargo test --workspace
   Compiling widgets v0.1.0 (/home/runner/work/widgets)
running 3 tests
test login::renders ... ok
test login::redirect_once ... FAILED

failures:

---- login::redirect_once stdout ----
thread 'login::redirect_once' panicked at src/login.rs:42:9:
redirect loop detected: /login -> /home -> /login

test result: FAILED. 2 passed; 1 failed; 0 ignored
error: test failed, to rerun pass `--lib`
##[error]Process completed with exit code 101.";
/// A line of that log that the agent must receive.
const LOG_LINE: &str = "redirect loop detected: /login -> /home -> /login";
/// The last line of a CI-failure message: the demo agent reads it once the submit key is pressed.
const CI_ASK: &str = "Please fix the failure and push.";
/// The last line of a changes-requested message.
const REVIEW_ASK: &str = "Please address the review comments and push.";
/// The review comment on line 1 of the agent's note.
const COMMENT: &str = "Name the bug in this heading";

/// One run of the story and where it stands.
struct Story {
    gh: Gh,
    name: &'static str,
    branch: String,
    /// Kill the controller with SIGKILL at three points and restart it.
    kills: bool,
}

impl Story {
    async fn start(name: &'static str, kills: bool) -> Story {
        let gh = Gh::start(REPO, true).await;
        let reactions = json!({"approved-and-green": {"auto": true, "action": "merge"}});
        gh.server.create("projects", &gh.project(PROJECT, REPO, "2s", reactions)).await;
        gh.project_ready(PROJECT).await;
        let prompt = "Fix the login redirect loop";
        // The story without kills has an agent whose screen keeps changing while it works.
        let extra = if kills { json!({}) } else { json!({"env": {"DEMO_AGENT_SPIN": "60"}}) };
        gh.server.create("sessions", &session(name, PROJECT, prompt, extra)).await;
        Story { gh, name, branch: format!("{PROJECT}/{name}"), kills }
    }

    fn server(&self) -> &Server {
        &self.gh.server
    }

    /// Waits until the session satisfies `pred`; panics with the object after `STEP`.
    async fn until(&self, pred: impl Fn(&Value) -> bool) -> Value {
        self.server().wait_for("sessions", self.name, STEP, pred).await
    }

    fn transcript(&self) -> String {
        transcript(self.server(), self.name)
    }

    /// Waits until the transcript holds `needle`.
    async fn heard(&self, needle: &str) {
        eventually(STEP, &format!("the agent's transcript showing {needle:?}"), || {
            let t = self.transcript();
            if t.contains(needle) {
                Ok(())
            } else {
                Err(t)
            }
        })
        .await;
    }

    /// Waits until the session's branch in origin.git moves away from `old`; the new head.
    async fn pushed_after(&self, old: &str) -> String {
        eventually(STEP, "the agent's fix pushed to origin", || match head(&self.gh.repos.bare, &self.branch) {
            Some(h) if h != old => Ok(h),
            other => Err(format!("{other:?}")),
        })
        .await
    }

    /// In the run with kills: SIGKILL, then a restart on the same data dir and port.
    async fn maybe_kill(&mut self, at: &str) {
        if self.kills {
            eprintln!("github_loop: kill -9 of the controller {at}");
            self.gh.restart().await;
        }
    }
}

fn head_sha(obj: &Value) -> &str {
    obj.pointer("/status/pullRequest/headSha").and_then(Value::as_str).unwrap_or("")
}

/// Spawn → PR → failing CI → fix → green → changes requested → fix → approved → merged → deleted.
async fn story(name: &'static str, kills: bool) {
    let mut st = Story::start(name, kills).await;
    let cleanup = Cleanup::new(st.server());
    let notes = format!("notes/{name}.md");

    // The agent commits and pushes; aoctl opens the pull request.
    let s = st.server().wait_for("sessions", name, READY, |o| is(o, "PullRequestOpen", "True")).await;
    let number = s["status"]["pullRequest"]["number"].as_u64().expect("status.pullRequest.number");
    let first = head(&st.gh.repos.bare, &st.branch).expect("the agent pushed its branch");
    assert_eq!(s["status"]["pullRequest"]["state"], "open", "{s:#}");
    assert_eq!(head_sha(&s), first, "status.pullRequest.headSha is the pushed head: {s:#}");
    assert!(has(&s, "PullRequestOpen", "True", "Open"), "{s:#}");
    assert!(has(&s, "ReviewApproved", "Unknown", "NoReviews"), "{s:#}");
    assert!(has(&s, "Merged", "False", "NotMerged"), "{s:#}");
    assert_eq!(phase(&s), "PROpen", "{s:#}");
    let pulls = st.gh.standin.pulls().await;
    assert_eq!(pulls.len(), 1, "one pull request in the stand-in: {pulls:#?}");
    let pr = &pulls[0];
    assert_eq!((pr["number"].as_u64(), &pr["state"]), (Some(number), &json!("open")), "{pr:#}");
    assert_eq!((&pr["head"]["ref"], &pr["head"]["sha"]), (&json!(st.branch), &json!(first)), "{pr:#}");
    assert_eq!(pr["base"]["ref"], "main", "{pr:#}");
    assert_eq!(pr["title"], "Fix the login redirect loop", "{pr:#}");

    // A failing check with a multi-line log reaches the agent with the log's tail.
    let answer = st.gh.standin.check_run(&first, "ci", "failure", FAILING_LOG).await;
    delivered(&answer, 202);
    st.maybe_kill("right after the failing check was posted").await;
    st.heard("got: [aoctl:ci-failed:").await;
    st.heard(&format!("got: {LOG_LINE}")).await;
    st.heard(&format!("got: {CI_ASK}")).await;
    st.maybe_kill("right after the CI failure was delivered").await;
    let logs = st.server().aoctl(&["logs", name]);
    logs.ok();
    assert!(logs.stdout.contains("demo-agent: got: [aoctl:ci-failed:"), "aoctl logs:\n{}", logs.stdout);
    assert!(logs.stdout.contains(LOG_LINE), "aoctl logs lack the log line:\n{}", logs.stdout);
    if !kills {
        // The failure and the reaction are recorded while it lasts (until aoctl sees the fix).
        let s =
            st.until(|o| o.pointer("/status/reactions/ci-failed/attempts").and_then(Value::as_u64) == Some(1)).await;
        assert!(has(&s, "ChecksPassed", "False", "ChecksFailing"), "{s:#}");
        assert_eq!(cond(&s, "ChecksPassed")["message"], "failing: ci", "{s:#}");
        assert_eq!(phase(&s), "CIFailed", "{s:#}");
        let r = &s["status"]["reactions"]["ci-failed"];
        let fp = r["lastFingerprint"].as_str().unwrap_or_default();
        assert!(fp.starts_with(&first), "the fingerprint names the failing head: {r:#}");
        assert!(r["lastAt"].is_string(), "{r:#}");
        assert_eq!(r["escalated"], false, "{r:#}");
    }

    // The agent's fix is a new head; aoctl sees it and the failing check no longer applies.
    let second = st.pushed_after(&first).await;
    let s = st.until(|o| head_sha(o) == second).await;
    assert!(has(&s, "ChecksPassed", "Unknown", "NoChecks"), "{s:#}");
    let answer = st.gh.standin.check_run(&second, "ci", "success", "all 3 tests passed").await;
    delivered(&answer, 202);
    let s = st.until(|o| head_sha(o) == second && is(o, "ChecksPassed", "True")).await;
    assert!(has(&s, "ChecksPassed", "True", "ChecksPassing"), "{s:#}");
    assert_eq!(phase(&s), "PROpen", "{s:#}");
    assert!(s.pointer("/status/reactions/ci-failed").is_none(), "the CI episode is over: {s:#}");

    // The reviewer requests changes on line 1 of the agent's note.
    let comments = json!([{"path": notes, "line": 1, "body": COMMENT}]);
    let answer = st.gh.standin.review(number, REVIEWER, "CHANGES_REQUESTED", "Almost there.", comments).await;
    delivered(&answer, 202);
    st.heard("got: [aoctl:changes-requested:").await;
    st.heard(&format!("got: {notes}:1: {COMMENT}")).await;
    st.heard(&format!("got: {REVIEW_ASK}")).await;
    st.maybe_kill("right after the review was delivered").await;
    let s = st.until(|o| has(o, "ReviewApproved", "False", "ChangesRequested")).await;
    assert!(["ChangesRequested", "PROpen"].contains(&phase(&s)), "{s:#}");
    if !kills {
        let s = st
            .until(|o| o.pointer("/status/reactions/changes-requested/attempts").and_then(Value::as_u64) == Some(1))
            .await;
        assert!(s["status"]["reactions"]["changes-requested"]["lastFingerprint"].is_string(), "{s:#}");
    }

    // The fix is pushed and goes green; the review still asks for changes.
    let third = st.pushed_after(&second).await;
    st.until(|o| head_sha(o) == third).await;
    let answer = st.gh.standin.check_run(&third, "ci", "success", "all 3 tests passed").await;
    delivered(&answer, 202);
    let s = st.until(|o| head_sha(o) == third && is(o, "ChecksPassed", "True")).await;
    assert!(has(&s, "ReviewApproved", "False", "ChangesRequested"), "{s:#}");
    assert_eq!(phase(&s), "ChangesRequested", "{s:#}");

    // Approval makes it approved and green: `action: merge` merges it for real.
    let answer = st.gh.standin.review(number, REVIEWER, "APPROVED", "Thanks!", json!([])).await;
    delivered(&answer, 202);
    let s = st.until(|o| is(o, "Merged", "True")).await;
    assert!(has(&s, "Merged", "True", "Merged"), "{s:#}");
    assert!(has(&s, "PullRequestOpen", "False", "Merged"), "{s:#}");
    assert!(has(&s, "ReviewApproved", "True", "Approved"), "{s:#}");
    assert!(is(&s, "ChecksPassed", "True"), "{s:#}");
    assert_eq!(s["status"]["pullRequest"]["state"], "merged", "{s:#}");
    assert_eq!(phase(&s), "Merged", "{s:#}");
    let pulls = st.gh.standin.pulls().await;
    assert_eq!(pulls.len(), 1, "still one pull request: {pulls:#?}");
    assert_eq!((&pulls[0]["merged"], &pulls[0]["head"]["sha"]), (&json!(true), &json!(third)), "{:#}", pulls[0]);
    let bare = &st.gh.repos.bare;
    git(bare, &["merge-base", "--is-ancestor", &third, "main"]);
    let authors = git(bare, &["log", "--format=%an", "main"]);
    assert_eq!(count(&authors, "demo-agent"), 3, "main holds the agent's three commits:\n{authors}");

    // Each message reached the agent exactly once, and the agent was never relaunched.
    let t = st.transcript();
    assert_eq!(count(&t, "got: [aoctl:ci-failed:"), 1, "CI failure messages in the transcript:\n{t}");
    assert_eq!(count(&t, "got: [aoctl:changes-requested:"), 1, "review messages in the transcript:\n{t}");
    assert_eq!(count(&t, &format!("got: {CI_ASK}")), 1, "CI messages submitted:\n{t}");
    assert_eq!(count(&t, &format!("got: {REVIEW_ASK}")), 1, "review messages submitted:\n{t}");
    assert_eq!(count(&t, "demo-agent: working on:"), 1, "agent launches in the transcript:\n{t}");
    let reasons: Vec<String> =
        events(st.server(), name).await.iter().map(|e| e["reason"].as_str().unwrap_or("").to_string()).collect();
    for r in ["PullRequestCreated", "MergedByReaction", "Merged"] {
        assert!(reasons.iter().any(|x| x == r), "no {r} event: {reasons:?}");
    }
    if !kills {
        let sent = reasons.iter().filter(|r| *r == "SentToAgent").count();
        assert_eq!(sent, 2, "SentToAgent events: {reasons:?}");
        let server = st.server();
        let ci = [("reaction", "ci-failed"), ("action", "send-to-agent"), ("result", "success")];
        assert!(metric(server, "aoctl_reactions_total", &ci).await >= 1.0, "aoctl_reactions_total for ci-failed");
        let merged = [("reaction", "approved-and-green"), ("action", "merge"), ("result", "success")];
        assert!(metric(server, "aoctl_reactions_total", &merged).await >= 1.0, "aoctl_reactions_total for merge");
        assert!(metric(server, "aoctl_feedback_latency_seconds_count", &[]).await >= 1.0, "feedback latency count");
    }
    let escalations: Vec<Value> = st.gh.notes.bodies().into_iter().filter(|n| n["escalated"] == true).collect();
    assert!(escalations.is_empty(), "nothing needed escalating: {escalations:#?}");

    // Deleting the merged session leaves no agent and no worktree.
    let workspace = get_session(st.server(), name).await["status"]["workspace"]["path"].as_str().map(String::from);
    cleanup.finish();
    assert!(!Tmux::of(st.server()).has(name), "the agent's tmux session is gone");
    assert_eq!(worktrees(&st.gh.repos.clone).len(), 1, "only the main checkout is left");
    assert!(workspace.is_some_and(|w| !std::path::Path::new(&w).exists()), "the worktree folder is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_loop_from_spawn_to_merge() {
    story("loop", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_loop_survives_controller_kill9() {
    story("loop-kill", true).await;
}

/// A controller killed after typing a CI-failure message into the agent but before pressing the
/// submit key gets it submitted after the restart, once: the message's marker on the screen (and
/// so in the transcript) is not proof that the agent received it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_loop_kill9_between_typing_and_submit() {
    let mut gh = Gh::start(REPO, true).await;
    let _cleanup = Cleanup::new(&gh.server);
    gh.server.create("projects", &gh.project(PROJECT, REPO, "2s", json!({}))).await;
    gh.project_ready(PROJECT).await;
    let name = "typed";
    gh.server.create("sessions", &session(name, PROJECT, "Fix the login redirect loop", json!({}))).await;
    gh.server.wait_for("sessions", name, READY, |o| is(o, "PullRequestOpen", "True")).await;
    let sha = head(&gh.repos.bare, &format!("{PROJECT}/{name}")).expect("the agent pushed its branch");
    let tmux = Tmux::of(&gh.server);
    delivered(&gh.standin.check_run(&sha, "ci", "failure", FAILING_LOG).await, 202);
    let t0 = Instant::now();
    while !tmux.capture(name).contains("[aoctl:ci-failed:") {
        assert!(t0.elapsed() < STEP, "no message on the screen:\n{}", tmux.capture(name));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    gh.server.kill9();
    let ask = format!("got: {CI_ASK}");
    if transcript(&gh.server, name).contains(&ask) {
        eprintln!("github_loop: the submit key was pressed before the kill; the window was missed");
        return;
    }
    gh.restart().await;
    let t = eventually(Duration::from_secs(15), "the typed message submitted after the restart", || {
        let t = transcript(&gh.server, name);
        if t.contains(&ask) {
            Ok(t)
        } else {
            Err(t)
        }
    })
    .await;
    assert_eq!(count(&t, "got: [aoctl:ci-failed:"), 1, "the message was typed once:\n{t}");
    assert_eq!(count(&t, &ask), 1, "the message was submitted once:\n{t}");
}

/// CI-failure webhook → the message on the agent's screen, and → the message submitted, over ten
/// failures (a new failing check on each fix); prints p50/p90 of both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: cargo test -p aoctl --test e2e github_loop_feedback_latency -- --ignored --nocapture"]
async fn github_loop_feedback_latency() {
    let gh = Gh::start(REPO, true).await;
    let _cleanup = Cleanup::new(&gh.server);
    let reactions = json!({"ci-failed": {"retries": 100}});
    gh.server.create("projects", &gh.project(PROJECT, REPO, "2s", reactions)).await;
    gh.project_ready(PROJECT).await;
    let name = "latency";
    gh.server.create("sessions", &session(name, PROJECT, "Measure the feedback latency", json!({}))).await;
    let branch = format!("{PROJECT}/{name}");
    gh.server.wait_for("sessions", name, READY, |o| is(o, "PullRequestOpen", "True")).await;
    let tmux = Tmux::of(&gh.server);
    let mut sha = head(&gh.repos.bare, &branch).expect("the agent pushed its branch");
    let (mut samples, mut submitted) = (vec![], vec![]);
    for i in 0..10 {
        gh.server.wait_for("sessions", name, STEP, |o| head_sha(o) == sha).await;
        let needle = format!("CI failed on {}", &sha[..7]);
        gh.standin.check_run(&sha, &format!("ci-{i}"), "failure", FAILING_LOG).await;
        let t0 = Instant::now();
        loop {
            if tmux.capture(name).contains(&needle) {
                break;
            }
            assert!(t0.elapsed() < STEP, "repetition {i}: no message on screen:\n{}", tmux.capture(name));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        samples.push(t0.elapsed());
        let ask = format!("got: {CI_ASK}");
        while count(&transcript(&gh.server, name), &ask) <= i {
            assert!(t0.elapsed() < STEP, "repetition {i}: the message was not submitted");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        submitted.push(t0.elapsed());
        let old = sha.clone();
        sha = eventually(STEP, "the fix pushed", || match head(&gh.repos.bare, &branch) {
            Some(h) if h != old => Ok(h),
            other => Err(format!("{other:?}")),
        })
        .await;
        // GitHub announces a push to a pull request's branch as `pull_request.synchronize`.
        gh.standin.ok("POST", "/_standin/refresh", Some(&json!({}))).await;
    }
    let t = transcript(&gh.server, name);
    assert_eq!(count(&t, "got: [aoctl:ci-failed:"), 10, "one message per failure");
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    let stats = |mut v: Vec<Duration>| {
        v.sort();
        let all: Vec<String> = v.iter().map(|d| format!("{:.0}", ms(d))).collect();
        (ms(&v[v.len() / 2]), ms(&v[v.len() * 9 / 10]), all.join(", "))
    };
    let (p50, p90, all) = stats(samples);
    let (s50, s90, sall) = stats(submitted);
    let sum = metric(&gh.server, "aoctl_feedback_latency_seconds_sum", &[("reaction", "ci-failed")]).await;
    let n = metric(&gh.server, "aoctl_feedback_latency_seconds_count", &[("reaction", "ci-failed")]).await;
    eprintln!("feedback latency, check-run call returned → text in the pane, ms: p50 {p50:.0}, p90 {p90:.0} [{all}]");
    eprintln!("feedback latency, check-run call returned → message submitted, ms: p50 {s50:.0}, p90 {s90:.0} [{sall}]");
    eprintln!(
        "aoctl_feedback_latency_seconds{{reaction=\"ci-failed\"}}: mean {:.0} ms over {n}",
        sum / n.max(1.0) * 1000.0
    );
    assert!(p50 < 5000.0, "p50 {p50:.0} ms is far beyond the 300 ms target");
}
