//! The closed loop against the GitLab stand-in: a session's agent commits and pushes, aoctl opens
//! the merge request, a failed pipeline job's log and an unresolved diff note (`path:line`) are
//! typed into the agent (each exactly once), its fixes are pushed, and once the thread is resolved
//! and the merge request approved with a green pipeline, the `approved-and-green` reaction merges
//! it, guarded by the head sha. Webhooks arrive with `X-Gitlab-Token`; a wrong token and a replayed
//! delivery change nothing.

use std::ffi::{OsStr, OsString};
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::Server;
use crate::lifecycle::{eventually, git, phase, transcript, worktrees, Cleanup, Tmux, READY};
use crate::standin::{cond, count, has, head, is, metric, repos, session, Notifications, Repos, StandIn};

/// The token the stand-in requires and the server reads from `GITLAB_TOKEN`.
const TOKEN: &str = "glpat-e2eStandInToken0123";
/// The webhook token the stand-in sends and the server reads from `AOCTL_GITLAB_WEBHOOK_TOKEN`.
const HOOK_TOKEN: &str = "e2e-gitlab-webhook-token";
/// The GitLab project of these tests.
const PATH: &str = "acme/widgets";
/// The aoctl project of these tests.
const PROJECT: &str = "widgets";
/// How long one step of the story may take.
const STEP: Duration = Duration::from_secs(30);
/// The reviewer who leaves a diff note and then approves.
const REVIEWER: &str = "gl-reviewer";
/// The log of the failing job; the agent must see its last lines.
const FAILING_LOG: &str = "$ cargo test --workspace
   Compiling widgets v0.1.0 (/builds/acme/widgets)
running 3 tests
test login::renders ... ok
test login::redirect_once ... FAILED

---- login::redirect_once stdout ----
thread 'login::redirect_once' panicked at src/login.rs:42:9:
redirect loop detected: /login -> /home -> /login

test result: FAILED. 2 passed; 1 failed; 0 ignored
ERROR: Job failed: exit code 101";
const LOG_LINE: &str = "redirect loop detected: /login -> /home -> /login";
const CI_ASK: &str = "Please fix the failure and push.";
const REVIEW_ASK: &str = "Please address the review comments and push.";
const COMMENT: &str = "Name the bug in this heading";

fn gl_env() -> [(&'static str, &'static OsStr); 2] {
    [("GITLAB_TOKEN", OsStr::new(TOKEN)), ("AOCTL_GITLAB_WEBHOOK_TOKEN", OsStr::new(HOOK_TOKEN))]
}

/// One GitLab test's world: an aoctl server with the GitLab environment, the repositories, the
/// stand-in and a notification receiver.
struct Gl {
    server: Server,
    standin: StandIn,
    repos: Repos,
    notes: Notifications,
}

impl Gl {
    async fn start(webhooks: bool) -> Gl {
        let server = Server::start_with_env(&gl_env()).await;
        let repos = repos(server.tmp.path());
        let mut args: Vec<OsString> =
            vec!["--project".into(), PATH.into(), "--git-dir".into(), repos.bare.clone().into()];
        args.extend(["--token".into(), TOKEN.into()]);
        // The reviewer is a Developer of the project, as a team's reviewers are.
        args.extend(["--member".into(), format!("{REVIEWER}=30").into()]);
        if webhooks {
            args.extend([
                "--webhook-url".into(),
                server.url("/webhooks/gitlab").into(),
                "--webhook-token".into(),
                HOOK_TOKEN.into(),
            ]);
        }
        let standin = StandIn::launch(server.tmp.path(), "gitlab-standin", &args, TOKEN);
        let notes = Notifications::start().await;
        Gl { server, standin, repos, notes }
    }

    fn project(&self, poll: &str, reactions: Value) -> Value {
        json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": PROJECT},
            "spec": {"path": self.repos.clone,
                "gitlab": {"apiUrl": format!("{}/api/v4", self.standin.base), "projectPath": PATH, "pollInterval": poll},
                "reactions": reactions,
                "notifiers": [{"type": "webhook", "url": self.notes.url}]}})
    }

    async fn state(&self) -> Value {
        self.standin.ok("GET", "/_standin/state", None).await["projects"][0].clone()
    }

    async fn merge_requests(&self) -> Vec<Value> {
        self.state().await["mergeRequests"].as_array().cloned().unwrap_or_default()
    }

    /// A pipeline on `sha` with one job `test` in `status`, printing `log`.
    async fn pipeline(&self, sha: &str, status: &str, log: &str) -> Value {
        let body = json!({"sha": sha, "jobs": [{"name": "test", "stage": "test", "status": status, "log": log}]});
        self.standin.ok("POST", "/_standin/pipelines", Some(&body)).await
    }

    /// The merge request as the REST API serves it.
    async fn api_mr(&self, iid: u64) -> Value {
        self.standin.ok("GET", &format!("/api/v4/projects/acme%2Fwidgets/merge_requests/{iid}"), None).await
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

fn head_sha(obj: &Value) -> &str {
    obj.pointer("/status/pullRequest/headSha").and_then(Value::as_str).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_loop_a_failed_jobs_trace_is_read_once_while_the_agent_works() {
    let gl = Gl::start(true).await;
    let server = &gl.server;
    let name = "gl-spinning";
    server.create("projects", &gl.project("2s", json!({}))).await;
    server.wait_for("projects", PROJECT, STEP, |p| is(p, "Ready", "True")).await;
    // The agent's spinner redraws its screen every half second without end.
    let spec = json!({"env": {"DEMO_AGENT_SPIN": "forever"}});
    server.create("sessions", &session(name, PROJECT, "Fix the login redirect loop", spec)).await;
    let _cleanup = Cleanup::new(server);
    server.wait_for("sessions", name, READY, |o| is(o, "PullRequestOpen", "True")).await;
    let first = head(&gl.repos.bare, &format!("{PROJECT}/{name}")).expect("the agent pushed its branch");
    gl.standin.ok("DELETE", "/_standin/requests", None).await;
    delivered(&gl.pipeline(&first, "failed", FAILING_LOG).await, 202);
    eventually(STEP, "the failure in the agent's transcript", || {
        let t = transcript(server, name);
        if t.contains(LOG_LINE) {
            Ok(())
        } else {
            Err(t)
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(15)).await;
    let asked = gl.standin.ok("GET", "/_standin/requests", None).await;
    let traces = asked["byRoute"]["GET /projects/:id/jobs/:job_id/trace"]["total"].as_u64().unwrap_or(0);
    eprintln!("gitlab_loop: trace reads {traces}; counted {}; by route: {}", asked["counted"], asked["byRoute"]);
    assert_eq!(traces, 1, "the failed job's trace is read once: {asked:#}");
    assert_eq!(count(&transcript(server, name), "got: [aoctl:ci-failed:"), 1, "the failure reached the agent once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_loop_from_spawn_to_merge() {
    let gl = Gl::start(true).await;
    let server = &gl.server;
    let name = "gl-loop";
    let branch = format!("{PROJECT}/{name}");
    let notes = format!("notes/{name}.md");
    let reactions = json!({"approved-and-green": {"auto": true, "action": "merge"}});
    server.create("projects", &gl.project("2s", reactions)).await;
    server.wait_for("projects", PROJECT, STEP, |p| is(p, "Ready", "True")).await;
    server.create("sessions", &session(name, PROJECT, "Fix the login redirect loop", json!({}))).await;
    let cleanup = Cleanup::new(server);
    let until = |pred: Box<dyn Fn(&Value) -> bool + Send + Sync>| server.wait_for("sessions", name, STEP, pred);
    let heard = |needle: String| async move {
        eventually(STEP, &format!("the agent's transcript showing {needle:?}"), || {
            let t = transcript(server, name);
            if t.contains(&needle) {
                Ok(())
            } else {
                Err(t)
            }
        })
        .await
    };
    let pushed_after = |old: String| {
        let bare = gl.repos.bare.clone();
        let branch = branch.clone();
        async move {
            eventually(STEP, "the agent's fix pushed to origin", || match head(&bare, &branch) {
                Some(h) if h != old => Ok(h),
                other => Err(format!("{other:?}")),
            })
            .await
        }
    };

    // The agent pushes; aoctl opens the merge request.
    let s = server.wait_for("sessions", name, READY, |o| is(o, "PullRequestOpen", "True")).await;
    let iid = s["status"]["pullRequest"]["number"].as_u64().expect("status.pullRequest.number");
    let first = head(&gl.repos.bare, &branch).expect("the agent pushed its branch");
    assert_eq!(head_sha(&s), first, "{s:#}");
    assert_eq!(phase(&s), "PROpen", "{s:#}");
    let url = s["status"]["pullRequest"]["url"].as_str().unwrap_or_default();
    assert!(url.ends_with(&format!("/acme/widgets/-/merge_requests/{iid}")), "the merge request's web_url: {s:#}");
    let mrs = gl.merge_requests().await;
    assert_eq!(mrs.len(), 1, "one merge request: {mrs:#?}");
    let mr = gl.api_mr(iid).await;
    assert_eq!((&mr["source_branch"], &mr["target_branch"]), (&json!(branch), &json!("main")), "{mr:#}");
    assert_eq!((&mr["state"], &mr["title"]), (&json!("opened"), &json!("Fix the login redirect loop")), "{mr:#}");

    // A failed job's log reaches the agent.
    delivered(&gl.pipeline(&first, "failed", FAILING_LOG).await, 202);
    heard("got: [aoctl:ci-failed:".into()).await;
    heard(format!("for MR !{iid}: test")).await;
    heard(format!("got: {LOG_LINE}")).await;
    heard(format!("got: {CI_ASK}")).await;
    // Recorded as failing: `ChecksPassed=False` on the first head, or, when the agent's fix (its
    // answer to the message just heard) moved the head before a look caught that state, the
    // reaction's record of the failed job on the first head.
    let on_first = format!("{first}:test");
    let failed = move |o: &Value| {
        has(o, "ChecksPassed", "False", "ChecksFailing")
            || o.pointer("/status/reactions/ci-failed/lastFingerprint")
                .and_then(Value::as_str)
                .is_some_and(|f| f.starts_with(&on_first))
    };
    let s = until(Box::new(failed)).await;
    if has(&s, "ChecksPassed", "False", "ChecksFailing") {
        assert_eq!(cond(&s, "ChecksPassed")["message"], "failing: test", "{s:#}");
    }

    // The fix is a new head; its pipeline passes.
    let second = pushed_after(first.clone()).await;
    let want = second.clone();
    until(Box::new(move |o| head_sha(o) == want)).await;
    delivered(&gl.pipeline(&second, "success", "all 3 tests passed").await, 202);
    let want = second.clone();
    let s = until(Box::new(move |o| head_sha(o) == want && is(o, "ChecksPassed", "True"))).await;
    assert!(s.pointer("/status/reactions/ci-failed").is_none(), "the CI episode is over: {s:#}");

    // A diff note on line 1 of the agent's note reaches it as path:line.
    let body = json!({"iid": iid, "user": REVIEWER, "body": COMMENT, "path": notes, "line": 1});
    let answer = gl.standin.ok("POST", "/_standin/notes", Some(&body)).await;
    delivered(&answer, 202);
    let discussion = answer["discussion"]["id"].as_str().expect("the discussion's id").to_string();
    heard(format!("changes requested on MR !{iid} by {REVIEWER}")).await;
    heard(format!("got: {notes}:1: {COMMENT}")).await;
    heard(format!("got: {REVIEW_ASK}")).await;
    until(Box::new(|o| has(o, "ReviewApproved", "False", "ChangesRequested"))).await;

    // The fix goes green; the unresolved thread still asks for changes.
    let third = pushed_after(second.clone()).await;
    let want = third.clone();
    until(Box::new(move |o| head_sha(o) == want)).await;
    delivered(&gl.pipeline(&third, "success", "all 3 tests passed").await, 202);
    let want = third.clone();
    let s = until(Box::new(move |o| head_sha(o) == want && is(o, "ChecksPassed", "True"))).await;
    assert!(has(&s, "ReviewApproved", "False", "ChangesRequested"), "{s:#}");

    // The reviewer resolves the thread and approves: merged, once, at the third head.
    let resolve =
        format!("/api/v4/projects/acme%2Fwidgets/merge_requests/{iid}/discussions/{discussion}?resolved=true");
    gl.standin.ok("PUT", &resolve, None).await;
    delivered(&gl.standin.ok("POST", "/_standin/approve", Some(&json!({"iid": iid, "user": REVIEWER}))).await, 202);
    let s = until(Box::new(|o| is(o, "Merged", "True"))).await;
    assert!(has(&s, "ReviewApproved", "True", "Approved"), "{s:#}");
    assert_eq!((s["status"]["pullRequest"]["state"].as_str(), phase(&s)), (Some("merged"), "Merged"), "{s:#}");
    let mr = gl.api_mr(iid).await;
    assert_eq!((&mr["state"], &mr["sha"]), (&json!("merged"), &json!(third)), "{mr:#}");
    git(&gl.repos.bare, &["merge-base", "--is-ancestor", &third, "main"]);
    let requests = gl.standin.ok("GET", "/_standin/requests", None).await;
    let merge_calls = requests["byRoute"]["PUT /projects/:id/merge_requests/:iid/merge"]["total"].as_u64();
    assert_eq!(merge_calls, Some(1), "one merge request to GitLab: {requests:#}");

    // Each message reached the agent exactly once.
    let t = transcript(server, name);
    assert_eq!(count(&t, "got: [aoctl:ci-failed:"), 1, "CI failure messages:\n{t}");
    assert_eq!(count(&t, "got: [aoctl:changes-requested:"), 1, "review messages:\n{t}");
    assert_eq!(count(&t, &format!("got: {notes}:1: {COMMENT}")), 1, "the diff note:\n{t}");
    assert_eq!(count(&t, "demo-agent: working on:"), 1, "agent launches:\n{t}");
    assert!(metric(server, "aoctl_gitlab_requests_total", &[("code", "200")]).await >= 1.0);
    // Reads are conditional: what did not change since the last read answered 304 (which of
    // them depends on the order webhooks and polls came in).
    assert!(
        metric(server, "aoctl_gitlab_requests_total", &[("code", "304")]).await >= 1.0,
        "conditional reads answered 304"
    );
    let escalations: Vec<Value> = gl.notes.bodies().into_iter().filter(|n| n["escalated"] == true).collect();
    assert!(escalations.is_empty(), "nothing needed escalating: {escalations:#?}");

    cleanup.finish();
    assert!(!Tmux::of(server).has(name), "the agent's tmux session is gone");
    assert_eq!(worktrees(&gl.repos.clone).len(), 1, "only the main checkout is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_webhooks_need_the_token_and_are_taken_once() {
    let gl = Gl::start(false).await;
    let server = &gl.server;
    server.create("projects", &gl.project("10m", json!({}))).await;
    server.wait_for("projects", PROJECT, STEP, |p| is(p, "Ready", "True")).await;
    let body = json!({"object_kind": "merge_request", "event_type": "merge_request",
        "project": {"id": 1, "path_with_namespace": PATH},
        "object_attributes": {"iid": 1, "source_branch": "widgets/x", "action": "update"}})
    .to_string();
    let send = |token: Option<&'static str>, uuid: &'static str| {
        let body = body.clone();
        async move {
            let mut r = server
                .request(reqwest::Method::POST, "/webhooks/gitlab")
                .header("content-type", "application/json")
                .header("x-gitlab-event", "Merge Request Hook")
                .header("x-gitlab-event-uuid", uuid);
            if let Some(t) = token {
                r = r.header("x-gitlab-token", t);
            }
            let resp = r.body(body).send().await.expect("send the delivery");
            (resp.status().as_u16(), resp.text().await.unwrap_or_default())
        }
    };
    assert_eq!(send(None, "u-1").await.0, 401, "no token");
    assert_eq!(send(Some("e2e-gitlab-webhook-tokeN"), "u-1").await.0, 401, "a token that differs in one byte");
    assert_eq!(send(Some("e2e-gitlab-webhook-token-and-more"), "u-1").await.0, 401, "a longer token");
    let (code, text) = send(Some(HOOK_TOKEN), "u-1").await;
    assert_eq!(code, 202, "{text}");
    assert!(text.contains("concerns 0 session(s)"), "{text}");
    let (code, text) = send(Some(HOOK_TOKEN), "u-1").await;
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("already received"), "a replay is ignored: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_issuesource_takes_an_outsiders_issue_once_a_developer_labels_it() {
    let gl = Gl::start(false).await;
    let cleanup = Cleanup::new(&gl.server);
    let s = &gl.server;
    // An outsider's issue whose template adds `agent`, and one of the project's owner.
    let open = |user: &str, title: &str| json!({"title": title, "labels": ["agent"], "user": user});
    gl.standin.ok("POST", "/_standin/issues", Some(&open("outsider", "Run this script"))).await;
    gl.standin.ok("POST", "/_standin/issues", Some(&open("octo", "Crash on start"))).await;
    s.create("projects", &gl.project("2s", json!({}))).await;
    let source = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "IssueSource", "metadata": {"name": "bugs"},
        "spec": {"project": PROJECT, "gitlab": {"labels": ["agent"]}, "interval": "10m",
            "template": {"agent": {"command": ["./scripts/agent.sh", "{promptFile}"]},
                "prompt": "Fix #{{number}}", "pullRequest": {"create": false}}}});
    s.create("issuesources", &source).await;

    let held = |o: &Value| o["status"]["held"].as_array().cloned().unwrap_or_default();
    let o = s.wait_for("issuesources", "bugs", STEP, |o| !held(o).is_empty()).await;
    assert_eq!(held(&o)[0]["issue"], "1", "{o:#}");
    let reason = held(&o)[0]["reason"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("outsider (not a member)"), "{reason}");
    s.wait_for("sessions", "bugs-2", READY, Value::is_object).await;
    assert!(s.object("sessions", "bugs-1").await.is_none(), "the outsider's issue made no session");

    // A Developer of the project takes the label off and applies it again.
    let as_reviewer = |labels: Value| json!({"labels": labels, "user": REVIEWER});
    gl.standin.ok("POST", "/_standin/issues/1/labels", Some(&as_reviewer(json!([])))).await;
    gl.standin.ok("POST", "/_standin/issues/1/labels", Some(&as_reviewer(json!(["agent"])))).await;
    s.aoctl(&["reconcile", "issuesource", "bugs"]).ok();
    s.wait_for("sessions", "bugs-1", READY, Value::is_object).await;
    s.wait_for("issuesources", "bugs", STEP, |o| held(o).is_empty()).await;
    s.send("DELETE", &format!("{}/issuesources/bugs", crate::harness::API), None, vec![]).await.expect(200);
    for name in ["bugs-1", "bugs-2"] {
        s.wait_for("sessions", name, Duration::from_secs(60), Value::is_null).await;
    }
    cleanup.finish();
}
