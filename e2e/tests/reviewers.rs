//! Reviewer sessions against the GitHub stand-in, which refuses a pull request's author's own
//! approval as GitHub does: a scripted worker opens a pull request, a scripted reviewer gets its
//! diff and requests changes with two line comments, the worker hears each once as
//! `path:line: text`, its push is re-reviewed with only what changed, nothing the reviewer
//! commits reaches the worker's branch, and the reviewer's approval gates the merge. With a
//! second identity (`spec.review.tokenEnv`, a reviewer bot) the verdicts are the forge's own
//! reviews; without one they are posted as comments from the author's token and count all the
//! same, and a post the forge refuses is tried again minutes later, not in a storm. `aoctl
//! review` starts a round the triggers did not, and a malformed review file is an event naming
//! the field, told to the reviewer once.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::{json, Value};

use crate::github_feedback::{heard, pushed_after, reasons, PROJECT, STEP};
use crate::lifecycle::{eventually, git, transcript, Cleanup, READY};
use crate::standin::{count, delivered, head, is, session, Gh, REPO, REVIEW_BOT, REVIEW_TOKEN_ENV};

const REVIEW_AGENT: &str = include_str!("../agents/review-agent");

/// The reviewer's prompts it kept, by reviewer session name.
fn prompts(gh: &Gh) -> Vec<(String, String)> {
    let dir = gh.repos.clone.join(".git/review-prompts");
    let mut all: Vec<(String, String)> = fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| {
                    let name = e.file_name().to_string_lossy().trim_end_matches(".md").to_string();
                    (name, fs::read_to_string(e.path()).unwrap_or_default())
                })
                .collect()
        })
        .unwrap_or_default();
    all.sort();
    all
}

/// Waits until the reviewers kept `n` whole prompts (a copy being written is not one yet); them,
/// oldest round first.
async fn prompts_of(gh: &Gh, n: usize) -> Vec<(String, String)> {
    eventually(STEP, &format!("{n} reviewer prompt(s)"), || {
        let all = prompts(gh);
        let whole = all.iter().filter(|(_, p)| p.trim_end().ends_with("may be left out.")).count();
        if whole >= n {
            Ok(all)
        } else {
            Err(format!("{all:?}"))
        }
    })
    .await
}

/// Commits the scripted reviewer into the repository, so the worker's head (its checkout) holds it.
fn commit_reviewer(gh: &Gh) {
    let script = gh.repos.clone.join("scripts/review.sh");
    fs::write(&script, REVIEW_AGENT).expect("write the reviewer script");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("make it executable");
    let clone = &gh.repos.clone;
    git(clone, &["add", "scripts/review.sh"]);
    git(clone, &["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "the reviewer script"]);
    git(clone, &["push", "-q", "origin", "main"]);
}

/// A project whose one scripted reviewer gates the merge; `extra` joins its `spec.review`.
fn reviewed_project(gh: &Gh, extra: Value) -> Value {
    let mut project = gh.project(PROJECT, REPO, "2s", json!({"approved-and-green": {"auto": true, "action": "merge"}}));
    let mut review = json!({
        "reviewers": [{"agent": {"command": ["./scripts/review.sh", "{promptFile}"]}, "prompt": "Be brief."}],
        "on": ["pr-opened", "push"],
        "gate": true,
    });
    review.as_object_mut().expect("an object").extend(extra.as_object().cloned().unwrap_or_default());
    project["spec"]["review"] = review;
    project
}

/// The reviews of the first pull request on the stand-in.
async fn forge_reviews(gh: &Gh) -> Vec<Value> {
    gh.standin.repo_state().await["reviews"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviewers_request_changes_re_review_the_push_and_gate_the_merge() {
    let gh = Gh::start(REPO, true).await;
    let _cleanup = Cleanup::new(&gh.server);
    commit_reviewer(&gh);
    // The verdicts are posted by a second identity, which may approve what aoctl's token opened.
    let project = reviewed_project(&gh, json!({"tokenEnv": REVIEW_TOKEN_ENV}));
    gh.server.create("projects", &project).await;
    gh.project_ready(PROJECT).await;
    let name = "login";
    gh.server.create("sessions", &session(name, PROJECT, "Fix the login redirect loop", json!({}))).await;
    let s = gh.server.wait_for("sessions", name, READY, |o| is(o, "PullRequestOpen", "True")).await;
    let number = s["status"]["pullRequest"]["number"].as_u64().expect("status.pullRequest.number");
    let (notes, branch) = (format!("notes/{name}.md"), format!("{PROJECT}/{name}"));
    let first_head = head(&gh.repos.bare, &branch).expect("the worker pushed");

    // Round 1: the reviewer's prompt holds the pull request and the worker's change.
    let first = prompts_of(&gh, 1).await;
    let (reviewer, prompt) = &first[0];
    assert_eq!(reviewer, &format!("{name}-review-1-0"), "{first:?}");
    assert!(prompt.contains(&format!("Review pull request #{number} ")), "{prompt}");
    assert!(prompt.contains(&format!("at commit {first_head}")), "{prompt}");
    assert!(prompt.contains("Be brief."), "{prompt}");
    assert!(prompt.contains(&format!("+++ b/{notes}")) && prompt.contains("+Fix the login redirect loop"), "{prompt}");
    assert!(prompt.contains("The diff against main:"), "{prompt}");

    // The worker hears the verdict's two line comments once each.
    heard(&gh, name, &format!("got: {notes}:1: Name the bug in this heading")).await;
    let t = heard(&gh, name, &format!("got: {notes}:3: Say what was tried")).await;
    assert_eq!(count(&t, &format!("got: {notes}:1: Name the bug in this heading")), 1, "{t}");
    assert_eq!(count(&t, &format!("got: {notes}:3: Say what was tried")), 1, "{t}");
    let events = reasons(&gh, name).await;
    assert!(
        events.iter().any(|(r, m)| r == "Reviewed" && m.contains("changes-requested with 2 line comment(s)")),
        "{events:?}"
    );

    // The worker's fix is pushed: round 2 reviews only what changed since the first head.
    let second_head = pushed_after(&gh, &branch, &first_head).await;
    let both = prompts_of(&gh, 2).await;
    let (again, prompt) = &both[1];
    assert_eq!(again, &format!("{name}-review-2-0"), "{both:?}");
    assert!(prompt.contains(&format!("An earlier review saw commit {first_head}")), "{prompt}");
    assert!(prompt.contains("+- [aoctl:changes-requested:"), "the new change is in the diff:\n{prompt}");
    assert!(!prompt.contains("+Fix the login redirect loop"), "the reviewed change is not:\n{prompt}");

    // Green checks; the merge waits for the reviewer's approval of the new head, then happens.
    let answer = gh.standin.check_run(&second_head, "ci", "success", "all tests passed").await;
    delivered(&answer, 202);
    gh.server
        .wait_for("sessions", name, STEP, |o| {
            is(o, "ChecksPassed", "True")
                && o.pointer("/status/pullRequest/headSha").and_then(Value::as_str) == Some(second_head.as_str())
        })
        .await;
    // Two polls later it is still open: the reviewer has not approved yet.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let s = gh.server.object("sessions", name).await.expect("the worker");
    assert_eq!(s["status"]["pullRequest"]["state"], "open", "merged before the reviewer approved: {s:#}");
    assert!(s["status"]["merge"].is_null(), "{s:#}");
    fs::write(gh.repos.clone.join(".git/review-go"), "").expect("let the reviewer approve");
    let s = gh
        .server
        .wait_for("sessions", name, STEP, |o| {
            o.pointer("/status/pullRequest/state").and_then(Value::as_str) == Some("merged")
        })
        .await;
    let review = &s["status"]["review"];
    assert_eq!(review["round"], 2, "{s:#}");
    assert_eq!(review["reviewedSha"], json!(second_head), "{s:#}");
    assert_eq!(review["state"], "approved", "{s:#}");
    assert_eq!(review["verdicts"][0]["headSha"], json!(second_head), "{s:#}");
    let pulls = gh.standin.pulls().await;
    assert_eq!(pulls[0]["head"]["sha"], json!(second_head), "the approved head was merged: {:#}", pulls[0]);
    let reviews = forge_reviews(&gh).await;
    let states: Vec<&str> = reviews.iter().filter_map(|r| r["state"].as_str()).collect();
    assert_eq!(states, ["CHANGES_REQUESTED", "APPROVED"], "{reviews:#?}");
    assert_eq!(reviews[1]["commitId"], json!(second_head), "{reviews:#?}");
    assert!(reviews.iter().all(|r| r["user"] == REVIEW_BOT), "posted by the reviewer bot: {reviews:#?}");

    // The reviewers committed in their checkouts; none of it reached the worker's branch.
    for repo in [&gh.repos.bare, &gh.repos.clone] {
        let files = git(repo, &["ls-tree", "-r", "--name-only", &second_head]);
        assert!(!files.contains("review-"), "a reviewer's file on the worker's branch: {files}");
        let log = git(repo, &["log", "--format=%an", &second_head]);
        assert!(!log.contains("review-agent"), "a reviewer's commit on the worker's branch: {log}");
    }
    // Each reviewer session was removed once its review was passed on.
    for r in 1..=2 {
        let reviewer = format!("{name}-review-{r}-0");
        let deadline = std::time::Instant::now() + STEP;
        while gh.server.object("sessions", &reviewer).await.is_some() {
            assert!(std::time::Instant::now() < deadline, "{reviewer} is still there");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let t = transcript(&gh.server, name);
    assert_eq!(count(&t, "got: [aoctl:changes-requested:"), 1, "one review message:\n{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviewers_without_a_second_identity_post_comments_that_count_and_a_refused_post_waits() {
    let gh = Gh::start(REPO, true).await;
    let _cleanup = Cleanup::new(&gh.server);
    commit_reviewer(&gh);
    gh.server.create("projects", &reviewed_project(&gh, json!({}))).await;
    gh.project_ready(PROJECT).await;
    // The first review GitHub is sent is refused, with its reasons.
    let route = "POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews";
    let refusal = json!({
        "message": "Unprocessable Entity",
        "errors": ["Review cannot be submitted at this time"],
        "documentation_url": "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request",
    });
    let fault = json!({"status": 422, "count": 1, "route": route, "body": refusal});
    gh.standin.ok("POST", "/_standin/faults", Some(&fault)).await;
    let name = "plain";
    gh.server.create("sessions", &session(name, PROJECT, "Fix the login redirect loop", json!({}))).await;
    gh.server.wait_for("sessions", name, READY, |o| is(o, "PullRequestOpen", "True")).await;
    let (notes, branch) = (format!("notes/{name}.md"), format!("{PROJECT}/{name}"));
    let first_head = head(&gh.repos.bare, &branch).expect("the worker pushed");

    // The post was refused, yet the verdict counts: the worker hears both comments, once each.
    heard(&gh, name, &format!("got: {notes}:1: Name the bug in this heading")).await;
    let t = heard(&gh, name, &format!("got: {notes}:3: Say what was tried")).await;
    assert_eq!(count(&t, &format!("got: {notes}:1: Name the bug in this heading")), 1, "{t}");
    let events = reasons(&gh, name).await;
    let (_, said) = events.iter().find(|(r, _)| r == "ReviewNotPosted").expect("a ReviewNotPosted event");
    assert!(said.contains("Unprocessable Entity: Review cannot be submitted at this time"), "{said}");
    assert!(said.contains("posted again after 2m"), "{said}");
    // The event goes out before the status that records the try is written.
    let s = gh
        .server
        .wait_for("sessions", name, STEP, |o| o.pointer("/status/review/verdicts/0/post/attempts") == Some(&json!(1)))
        .await;
    let post = &s["status"]["review"]["verdicts"][0]["post"];
    assert!(post["reviewId"].is_null() && post["nextAttemptAt"].is_string(), "{s:#}");
    assert!(post["lastError"].as_str().unwrap_or_default().contains("Review cannot be submitted"), "{s:#}");
    // No storm: the refused post is not tried again for minutes.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let asked = gh.standin.requests().await;
    assert_eq!(asked["byRoute"][route]["total"], 1, "one try in the first minutes: {asked:#}");

    // Round 2: the approval is posted as a comment from aoctl's own token (GitHub refuses an
    // author's approval), and the recorded verdict opens the gate.
    let second_head = pushed_after(&gh, &branch, &first_head).await;
    prompts_of(&gh, 2).await;
    delivered(&gh.standin.check_run(&second_head, "ci", "success", "all tests passed").await, 202);
    fs::write(gh.repos.clone.join(".git/review-go"), "").expect("let the reviewer approve");
    let s = gh
        .server
        .wait_for("sessions", name, STEP, |o| {
            o.pointer("/status/pullRequest/state").and_then(Value::as_str) == Some("merged")
        })
        .await;
    assert_eq!(s["status"]["review"]["state"], "approved", "{s:#}");
    let reviews = forge_reviews(&gh).await;
    let approval = reviews.iter().find(|r| r["commitId"] == json!(second_head)).expect("the approval is posted");
    assert_eq!(approval["state"], "COMMENTED", "{reviews:#?}");
    assert!(approval["body"].as_str().unwrap_or_default().starts_with("**Verdict: approve.**"), "{approval:#}");
    assert!(!reviews.iter().any(|r| r["state"] == "APPROVED" || r["state"] == "CHANGES_REQUESTED"), "{reviews:#?}");
    let t = transcript(&gh.server, name);
    assert_eq!(count(&t, "got: [aoctl:changes-requested:"), 1, "one review message:\n{t}");
}

/// A reviewer that writes a review file with a verdict that does not exist, then echoes its input.
const BAD_REVIEWER: &str = "printf '{\"verdict\": \"lgtm\"}' >\"$AOCTL_REVIEW_FILE\"; \
    while printf '> ' && IFS= read -r line; do echo \"bad-reviewer: got: $line\"; done";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviewers_aoctl_review_starts_a_round_and_a_malformed_file_is_named_once() {
    let gh = Gh::start(REPO, true).await;
    let _cleanup = Cleanup::new(&gh.server);
    let mut project = gh.project(PROJECT, REPO, "2s", json!({}));
    // Only pushes start rounds, so the opened pull request waits for `aoctl review`.
    project["spec"]["review"] =
        json!({"reviewers": [{"agent": {"command": ["sh", "-c", BAD_REVIEWER]}}], "on": ["push"]});
    gh.server.create("projects", &project).await;
    gh.project_ready(PROJECT).await;
    let name = "asked";
    gh.server.create("sessions", &session(name, PROJECT, "Fix the login redirect loop", json!({}))).await;
    gh.server.wait_for("sessions", name, READY, |o| is(o, "PullRequestOpen", "True")).await;
    let reviewer = format!("{name}-review-1-0");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(gh.server.object("sessions", &reviewer).await.is_none(), "a round started without a push or a request");

    let out = gh.server.aoctl(&["review", name]);
    out.ok();
    assert!(out.stdout.contains(&format!("review of session \"{name}\" requested at ")), "{out}");
    let s = gh.server.wait_for("sessions", &reviewer, STEP, |o| !o["status"].is_null()).await;
    assert_eq!(s["spec"]["reviewOf"], name, "{s:#}");
    assert_eq!(s["metadata"]["labels"]["ao.dev/review-of"], name, "{s:#}");
    assert_eq!(s["metadata"]["ownerReferences"][0]["name"], name, "{s:#}");

    // The file names a verdict that does not exist: an event says which field, the reviewer is told once.
    let why = "the review file is malformed: verdict: `lgtm` is not one of approve, changes-requested, comment";
    let deadline = std::time::Instant::now() + STEP;
    loop {
        let all = reasons(&gh, &reviewer).await;
        if let Some((_, m)) = all.iter().find(|(r, _)| r == "ReviewFileInvalid") {
            assert_eq!(m, why);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no ReviewFileInvalid event: {all:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    heard(&gh, &reviewer, &format!("bad-reviewer: got: {why}")).await;
    // A few reconciles later it was still told only once.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t = transcript(&gh.server, &reviewer);
    assert_eq!(count(&t, "bad-reviewer: got: the review file is malformed"), 1, "told once:\n{t}");
    let s = gh.server.object("sessions", &reviewer).await.expect("the reviewer waits for a valid file");
    assert_eq!(s["status"]["reviewer"]["error"], why, "{s:#}");
    let w = gh.server.object("sessions", name).await.expect("the worker");
    assert_eq!(w["status"]["review"]["round"], 1, "{w:#}");
    assert!(w["status"]["review"]["requested"].is_string(), "the request was acted on: {w:#}");

    // A reviewer is not reviewed.
    let out = gh.server.aoctl(&["review", &reviewer]);
    out.code(1);
    assert!(out.stderr.contains(&format!("is a reviewer of \"{name}\"")), "{out}");
}
