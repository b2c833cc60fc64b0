//! The REST operations against the stand-in, with fixtures taken from GitHub's published REST
//! description (`@octokit/openapi` examples), adjusted per test.

use std::sync::Arc;
use std::time::Duration;

use aoctl_api::session::{ChecksState, PullRequestState, ReviewState};
use aoctl_github::{Budget, CheckKind, Client, ErrorKind, FailingCheck, IssueStateFilter, MergeMethod, ReviewComment};
use chrono::{TimeZone, Utc};
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::fixture;
use crate::stand_in::{reset_epoch, Canned, StandIn};

const TOKEN: &str = "ghp_TestTokenThatMustNeverBeLogged0123";
const REPO: &str = "/repos/octocat/Hello-World";
const SHA: &str = "6dcb09b5b57875f334f61aebed695e2e4193db5e";

async fn setup() -> (StandIn, Client) {
    let stand_in = StandIn::start().await;
    let client = Client::new(&stand_in.url(), Some(TOKEN.to_string())).unwrap();
    (stand_in, client)
}

/// A `pull-request` (full) of the fixture with a number, state and head branch.
fn pull(number: u64, state: &str, head: &str) -> Value {
    let mut p = fixture("rest/pull.json");
    p["number"] = json!(number);
    p["state"] = json!(state);
    p["html_url"] = json!(format!("https://github.com/octocat/Hello-World/pull/{number}"));
    p["head"]["ref"] = json!(head);
    p["merged_at"] = Value::Null;
    p
}

/// A `pull-request-simple` of the list fixture.
fn simple(number: u64, state: &str, head: &str) -> Value {
    let mut p = fixture("rest/pulls-list.json")[0].clone();
    p["number"] = json!(number);
    p["state"] = json!(state);
    p["head"]["ref"] = json!(head);
    p["merged_at"] = Value::Null;
    p
}

#[tokio::test]
async fn find_pull_prefers_the_open_one_and_reads_mergeable() {
    let (s, client) = setup().await;
    let list = json!([simple(1400, "closed", "demo/fix-login"), simple(1347, "open", "demo/fix-login")]);
    s.route("GET", &format!("{REPO}/pulls"), vec![Canned::json(200, &list)]);
    s.route("GET", &format!("{REPO}/pulls/1347"), vec![Canned::json(200, &pull(1347, "open", "demo/fix-login"))]);

    let pr = client.find_pull_for_branch("octocat", "Hello-World", "demo/fix-login").await.unwrap().unwrap();
    assert_eq!(pr.number, 1347);
    assert_eq!(pr.url, "https://github.com/octocat/Hello-World/pull/1347");
    assert_eq!(pr.state, PullRequestState::Open);
    assert_eq!((pr.head_ref.as_str(), pr.head_sha.as_str(), pr.base_ref.as_str()), ("demo/fix-login", SHA, "master"));
    assert_eq!(
        (pr.draft, pr.mergeable, pr.mergeable_state.as_deref(), pr.merged),
        (false, Some(true), Some("clean"), false)
    );
    assert!(!pr.has_conflicts());
    let status = pr.status(ChecksState::Passing, ReviewState::Approved);
    assert_eq!((status.number, status.mergeable, status.head_sha.as_deref()), (1347, Some(true), Some(SHA)));

    let seen = s.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].query.contains("head=octocat:demo/fix-login"), "{}", seen[0].query);
    assert!(seen[0].query.contains("state=all"));
    assert_eq!(seen[0].header("authorization"), Some(format!("Bearer {TOKEN}").as_str()));
    assert_eq!(seen[0].header("x-github-api-version"), Some("2022-11-28"));

    s.route("GET", &format!("{REPO}/pulls"), vec![Canned::json(200, &json!([]))]);
    assert_eq!(client.find_pull_for_branch("octocat", "Hello-World", "demo/none").await.unwrap(), None);
    assert!(matches!(
        client.find_pull_for_branch("../x", "Hello-World", "b").await.map_err(|e| e.kind),
        Err(ErrorKind::Invalid { .. })
    ));
}

#[tokio::test]
async fn merged_and_closed_pulls() {
    let (s, client) = setup().await;
    let mut merged = pull(7, "closed", "demo/a");
    merged["merged"] = json!(true);
    merged["merged_at"] = json!("2024-01-01T00:00:00Z");
    s.route("GET", &format!("{REPO}/pulls/7"), vec![Canned::json(200, &merged)]);
    s.route("GET", &format!("{REPO}/pulls/8"), vec![Canned::json(200, &pull(8, "closed", "demo/b"))]);
    assert_eq!(client.pull("octocat", "Hello-World", 7).await.unwrap().state, PullRequestState::Merged);
    assert_eq!(client.pull("octocat", "Hello-World", 8).await.unwrap().state, PullRequestState::Closed);
    let err = client.pull("octocat", "Hello-World", 9).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound { what: "pull request octocat/Hello-World#9".into() });
    assert_eq!(err.reason(), "GitHubNotFound");
}

#[tokio::test]
async fn create_pull_sends_the_documented_body() {
    let (s, client) = setup().await;
    let mut created = pull(1348, "open", "demo/new");
    created["draft"] = json!(true);
    created["mergeable"] = Value::Null;
    created["mergeable_state"] = json!("unknown");
    let exists = json!({
        "message": "Validation Failed",
        "errors": [{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for octocat:demo/new."}],
        "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"
    });
    s.route(
        "POST",
        &format!("{REPO}/pulls"),
        vec![
            Canned::json(201, &created)
                .header("location", "https://api.github.com/repos/octocat/Hello-World/pulls/1348"),
            Canned::json(422, &exists),
        ],
    );

    let pr =
        client.create_pull(("octocat", "Hello-World"), "demo/new", "main", "Fix login", "Body", true).await.unwrap();
    assert_eq!((pr.number, pr.draft, pr.mergeable), (1348, true, None));
    assert_eq!(s.seen()[0].method, "POST");
    let sent = s.seen()[0].json();
    assert_eq!(sent, json!({"title": "Fix login", "head": "demo/new", "base": "main", "body": "Body", "draft": true}));

    let err = client
        .create_pull(("octocat", "Hello-World"), "demo/new", "main", "Fix login", "Body", true)
        .await
        .unwrap_err();
    assert!(
        matches!(&err.kind, ErrorKind::Rejected { status: 422, .. }) && err.to_string().contains("already exists"),
        "{err}"
    );
    assert!(!err.is_transient());
}

fn run(id: u64, name: &str, status: &str, conclusion: Option<&str>, app: &str) -> Value {
    let mut r = fixture("rest/check-runs.json")["check_runs"][0].clone();
    r["id"] = json!(id);
    r["name"] = json!(name);
    r["status"] = json!(status);
    r["conclusion"] = json!(conclusion);
    r["app"]["slug"] = json!(app);
    r["details_url"] = json!(format!("https://github.com/octocat/Hello-World/actions/runs/1/job/{id}"));
    r
}

fn runs(items: Vec<Value>) -> Value {
    let mut page = fixture("rest/check-runs.json");
    page["total_count"] = json!(items.len());
    page["check_runs"] = json!(items);
    page
}

fn combined(statuses: &[(u64, &str, &str)]) -> Value {
    let mut c = fixture("rest/combined-status.json");
    let template = c["statuses"][0].clone();
    let items: Vec<Value> = statuses
        .iter()
        .map(|(id, context, state)| {
            let mut s = template.clone();
            s["id"] = json!(id);
            s["context"] = json!(context);
            s["state"] = json!(state);
            s
        })
        .collect();
    let state = if statuses.iter().any(|s| s.2 == "failure" || s.2 == "error") {
        "failure"
    } else if statuses.iter().all(|s| s.2 == "success") && !statuses.is_empty() {
        "success"
    } else {
        "pending"
    };
    c["state"] = json!(state);
    c["total_count"] = json!(items.len());
    c["statuses"] = json!(items);
    c
}

async fn checks_with(s: &StandIn, client: &Client, page: Value, status: Value) -> aoctl_github::Checks {
    s.route("GET", &format!("{REPO}/commits/{SHA}/check-runs"), vec![Canned::json(200, &page)]);
    s.route("GET", &format!("{REPO}/commits/{SHA}/status"), vec![Canned::json(200, &status)]);
    client.checks("octocat", "Hello-World", SHA).await.unwrap()
}

#[tokio::test]
async fn checks_combine_runs_and_statuses() {
    let (s, client) = setup().await;
    let ok = vec![
        run(1, "build", "completed", Some("success"), "github-actions"),
        run(2, "lint", "completed", Some("neutral"), "octoapp"),
        run(3, "docs", "completed", Some("skipped"), "github-actions"),
    ];
    let passing = checks_with(&s, &client, runs(ok.clone()), combined(&[(1, "ci/jenkins", "success")])).await;
    assert_eq!((passing.state, passing.failing.len()), (ChecksState::Passing, 0));

    let mut running = ok.clone();
    running.push(run(4, "test", "in_progress", None, "github-actions"));
    let pending = checks_with(&s, &client, runs(running.clone()), combined(&[(1, "ci/jenkins", "success")])).await;
    assert_eq!(pending.state, ChecksState::Pending);
    let pending = checks_with(&s, &client, runs(ok.clone()), combined(&[(1, "ci/jenkins", "pending")])).await;
    assert_eq!(pending.state, ChecksState::Pending);

    // A failure is reported while other checks still run.
    running.push(run(399444496, "test (ubuntu)", "completed", Some("failure"), "github-actions"));
    let failing = checks_with(&s, &client, runs(running), combined(&[(2, "security/brakeman", "error")])).await;
    assert_eq!(failing.state, ChecksState::Failing);
    assert_eq!(
        failing.failing,
        vec![
            FailingCheck {
                name: "test (ubuntu)".into(),
                id: 399444496,
                details_url: Some("https://github.com/octocat/Hello-World/actions/runs/1/job/399444496".into()),
                kind: CheckKind::CheckRun,
                conclusion: "failure".into(),
                app: Some("github-actions".into()),
            },
            FailingCheck {
                name: "security/brakeman".into(),
                id: 2,
                details_url: Some("https://ci.example.com/1000/output".into()),
                kind: CheckKind::Status,
                conclusion: "error".into(),
                app: None,
            },
        ]
    );
    assert_eq!(failing.fingerprint(), "security/brakeman#2,test (ubuntu)#399444496");

    let none = checks_with(&s, &client, runs(vec![]), combined(&[])).await;
    assert_eq!((none.state, none.failing.len()), (ChecksState::None, 0));
}

#[tokio::test]
async fn check_runs_follow_the_next_link() {
    let (s, client) = setup().await;
    let first = format!("{REPO}/commits/{SHA}/check-runs");
    let second = format!("{first}?filter=latest&per_page=100&page=2");
    let link = format!("<{}{second}>; rel=\"next\", <{}{second}>; rel=\"last\"", s.url(), s.url());
    let page1 = runs(vec![run(1, "build", "completed", Some("success"), "github-actions")]);
    let page2 = runs(vec![run(2, "test", "completed", Some("timed_out"), "github-actions")]);
    s.route("GET", &first, vec![Canned::json(200, &page1).header("link", link)]);
    s.route("GET", &second, vec![Canned::json(200, &page2)]);
    s.route("GET", &format!("{REPO}/commits/{SHA}/status"), vec![Canned::json(200, &combined(&[]))]);
    let checks = client.checks("octocat", "Hello-World", SHA).await.unwrap();
    assert_eq!(checks.state, ChecksState::Failing);
    assert_eq!(checks.failing[0].conclusion, "timed_out");
    assert_eq!(s.seen().iter().filter(|r| r.path.ends_with("/check-runs")).count(), 2);
}

const JOB_LOG: &str = "\u{feff}2024-05-01T10:00:00.1234567Z ##[group]Run cargo test\n\
2024-05-01T10:00:00.2000000Z \u{1b}[36;1mcargo test --workspace\u{1b}[0m\n\
2024-05-01T10:00:00.3000000Z ##[endgroup]\n\
2024-05-01T10:00:09.0000000Z test login::redirects ... \u{1b}[31mFAILED\u{1b}[0m\n\
2024-05-01T10:00:09.1000000Z ##[error]Process completed with exit code 101.\n";

#[tokio::test]
async fn log_tail_of_an_actions_job_follows_the_redirect_without_the_token() {
    let (s, client) = setup().await;
    let storage = format!("http://localhost:{}/blob/logs/399444496?sig=abc", s.addr.port());
    s.route(
        "GET",
        &format!("{REPO}/actions/jobs/399444496/logs"),
        vec![Canned::text(302, "").header("location", storage)],
    );
    s.route("GET", "/blob/logs/399444496", vec![Canned::text(200, JOB_LOG)]);
    let check = FailingCheck {
        name: "test".into(),
        id: 399444496,
        details_url: None,
        kind: CheckKind::CheckRun,
        conclusion: "failure".into(),
        app: Some("github-actions".into()),
    };
    let tail = client.failing_log_tail("octocat", "Hello-World", &check).await.unwrap().unwrap();
    assert_eq!(
        tail,
        "Run cargo test\ncargo test --workspace\ntest login::redirects ... FAILED\n##[error]Process completed with exit code 101."
    );
    let seen = s.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].header("authorization").is_some());
    assert_eq!(seen[1].path, "/blob/logs/399444496");
    assert_eq!(seen[1].header("authorization"), None, "the token must not follow a redirect to another host");

    // Expired logs fall back to the check run's output.
    s.route(
        "GET",
        &format!("{REPO}/actions/jobs/399444496/logs"),
        vec![Canned::json(410, &json!({"message": "Gone"}))],
    );
    s.route(
        "GET",
        &format!("{REPO}/check-runs/399444496"),
        vec![Canned::json(200, &run(399444496, "test", "completed", Some("failure"), "github-actions"))],
    );
    let tail = client.failing_log_tail("octocat", "Hello-World", &check).await.unwrap().unwrap();
    assert!(tail.starts_with("Mighty Readme report\nThere are 0 failures"), "{tail}");
}

#[tokio::test]
async fn log_tail_of_a_large_log_keeps_its_end() {
    let (s, client) = setup().await;
    let log: String = (1..=20_000).map(|i| format!("2024-05-01T10:00:00.0000000Z step output line {i:05}\n")).collect();
    assert!(log.len() > 1_000_000);
    s.route("GET", &format!("{REPO}/actions/jobs/5/logs"), vec![Canned::text(200, &log)]);
    let check = FailingCheck {
        name: "test".into(),
        id: 5,
        details_url: None,
        kind: CheckKind::CheckRun,
        conclusion: "failure".into(),
        app: Some("github-actions".into()),
    };
    let tail = client.failing_log_tail("octocat", "Hello-World", &check).await.unwrap().unwrap();
    assert_eq!(tail.lines().count(), 50);
    assert!(tail.starts_with("step output line 19951\n") && tail.ends_with("step output line 20000"), "{tail}");
}

#[tokio::test]
async fn log_tail_of_other_checks_is_their_output() {
    let (s, client) = setup().await;
    s.route(
        "GET",
        &format!("{REPO}/check-runs/4"),
        vec![Canned::json(200, &fixture("rest/check-runs.json")["check_runs"][0])],
    );
    let mut check = FailingCheck {
        name: "mighty_readme".into(),
        id: 4,
        details_url: None,
        kind: CheckKind::CheckRun,
        conclusion: "failure".into(),
        app: Some("octoapp".into()),
    };
    let tail = client.failing_log_tail("octocat", "Hello-World", &check).await.unwrap().unwrap();
    assert!(tail.ends_with("how to install your app."), "{tail}");
    check.kind = CheckKind::Status;
    assert_eq!(client.failing_log_tail("octocat", "Hello-World", &check).await.unwrap(), None);
    assert_eq!(s.seen().len(), 1);
}

#[tokio::test]
async fn reviews_and_comments() {
    let (s, client) = setup().await;
    let mut reviews = fixture("rest/reviews.json");
    let mut changes = reviews[0].clone();
    changes["id"] = json!(81);
    changes["user"]["login"] = json!("hubot");
    changes["state"] = json!("CHANGES_REQUESTED");
    changes["body"] = json!("Please add a test.");
    reviews.as_array_mut().unwrap().push(changes);
    s.route("GET", &format!("{REPO}/pulls/1347/reviews"), vec![Canned::json(200, &reviews)]);
    s.route(
        "GET",
        &format!("{REPO}/pulls/1347/comments"),
        vec![Canned::json(200, &fixture("rest/review-comments.json"))],
    );

    let r = client.reviews("octocat", "Hello-World", 1347).await.unwrap();
    assert_eq!(r.state, ReviewState::ChangesRequested);
    assert_eq!(r.items.len(), 2);
    assert_eq!((r.items[0].id, r.items[0].user.as_str(), r.items[0].state.as_str()), (80, "octocat", "APPROVED"));
    assert_eq!(r.items[1].body, "Please add a test.");
    assert_eq!(
        r.comments,
        vec![ReviewComment {
            id: 10,
            user: "octocat".into(),
            standing: aoctl_forge_types::Standing { role: "NONE".into(), writes: false },
            path: "file1.txt".into(),
            line: Some(2),
            original_line: Some(2),
            body: "Great stuff!".into(),
            in_reply_to: Some(8),
            review_id: Some(42),
            diff_hunk: "@@ -16,33 +16,40 @@ public class Connection : IConnection...".into(),
        }]
    );
}

#[tokio::test]
async fn merge_maps_405_and_409() {
    let (s, client) = setup().await;
    let not_mergeable =
        json!({"message": "Pull Request is not mergeable", "documentation_url": "https://docs.github.com/rest"});
    let moved = json!({"message": "Head branch was modified. Review and try the merge again."});
    s.route(
        "PUT",
        &format!("{REPO}/pulls/1347/merge"),
        vec![
            Canned::json(200, &fixture("rest/merge.json")),
            Canned::json(405, &not_mergeable),
            Canned::json(409, &moved),
        ],
    );
    let merged = client.merge("octocat", "Hello-World", 1347, MergeMethod::Squash, SHA).await.unwrap();
    assert_eq!(merged, SHA);
    assert_eq!(
        (s.seen()[0].method.as_str(), s.seen()[0].json()),
        ("PUT", json!({"merge_method": "squash", "sha": SHA}))
    );

    let err = client.merge("octocat", "Hello-World", 1347, MergeMethod::Merge, SHA).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotMergeable { number: 1347, message: "Pull Request is not mergeable".into() });
    assert_eq!((err.reason(), err.is_transient()), ("PullRequestNotMergeable", false));

    let err = client.merge("octocat", "Hello-World", 1347, MergeMethod::Rebase, SHA).await.unwrap_err();
    assert!(matches!(&err.kind, ErrorKind::HeadChanged { number: 1347, sha, .. } if sha == SHA), "{err}");
    assert_eq!((err.reason(), err.is_transient()), ("PullRequestHeadChanged", false));
}

#[tokio::test]
async fn issue_title_and_body() {
    let (s, client) = setup().await;
    s.route("GET", &format!("{REPO}/issues/1347"), vec![Canned::json(200, &fixture("rest/issue.json"))]);
    let issue = client.issue("octocat", "Hello-World", 1347).await.unwrap();
    assert_eq!(
        (issue.number, issue.title.as_str(), issue.body.as_str()),
        (1347, "Found a bug", "I'm having a problem with this.")
    );
    assert_eq!((issue.labels.as_slice(), issue.open), (&["bug".to_string()][..], true));
}

/// An item of an issue list: the issue fixture as an issue, or as a pull request.
fn listed(number: u64, title: &str, labels: &[&str], pull: bool) -> Value {
    let mut i = fixture("rest/issue.json");
    i["number"] = json!(number);
    i["title"] = json!(title);
    i["html_url"] = json!(format!("https://github.com/octocat/Hello-World/issues/{number}"));
    let label = i["labels"][0].clone();
    i["labels"] = labels
        .iter()
        .map(|name| {
            let mut l = label.clone();
            l["name"] = json!(name);
            l
        })
        .collect();
    if !pull {
        i.as_object_mut().unwrap().remove("pull_request");
    }
    i
}

#[tokio::test]
async fn list_issues_reads_every_page_conditionally_and_leaves_pull_requests_out() {
    let (s, client) = setup().await;
    let first = format!("{REPO}/issues");
    let query = "state=open&labels=agent,good%20first%20issue&sort=created&direction=desc&per_page=100";
    let second = format!("{first}?{query}&page=2");
    let link = format!("<{}{second}>; rel=\"next\", <{}{second}>; rel=\"last\"", s.url(), s.url());
    let page1 =
        json!([listed(3, "Newest", &["agent", "good first issue"], false), listed(2, "A PR", &["agent"], true)]);
    let page2 = json!([listed(1, "Oldest", &["agent", "good first issue", "bug"], false)]);
    s.route("GET", &first, vec![Canned::json(200, &page1).header("link", &link).header("etag", "\"p1\"")]);
    s.route("GET", &second, vec![Canned::json(200, &page2).header("etag", "\"p2\"")]);
    let labels = ["agent".to_string(), "good first issue".to_string()];

    let list = client.list_issues("octocat", "Hello-World", &labels, IssueStateFilter::Open).await.unwrap();
    assert!(list.changed);
    assert_eq!(
        list.issues.iter().map(|i| (i.number, i.title.as_str())).collect::<Vec<_>>(),
        [(3, "Newest"), (1, "Oldest")]
    );
    assert_eq!(list.issues[1].labels, ["agent", "good first issue", "bug"]);
    assert_eq!(list.issues[0].url, "https://github.com/octocat/Hello-World/issues/3");
    assert!(list.issues.iter().all(|i| i.open && i.body == "I'm having a problem with this."));
    assert_eq!(s.seen()[0].query, query);
    let remaining = s.remaining();

    // Unchanged: both pages answer 304 (the second found through the cached `Link`), for free.
    let again = client.list_issues("octocat", "Hello-World", &labels, IssueStateFilter::Open).await.unwrap();
    assert_eq!((again.changed, &again.issues), (false, &list.issues));
    let seen = s.seen();
    assert_eq!(seen.len(), 4);
    assert_eq!((seen[2].header("if-none-match"), seen[3].header("if-none-match")), (Some("\"p1\""), Some("\"p2\"")));
    assert_eq!(s.remaining(), remaining, "304s cost no rate limit");
    assert_eq!(client.budget().stats().not_modified, 2);

    // One page changed: the list is new.
    s.route("GET", &second, vec![Canned::json(200, &json!([])).header("etag", "\"p2b\"")]);
    let changed = client.list_issues("octocat", "Hello-World", &labels, IssueStateFilter::Open).await.unwrap();
    assert!(changed.changed);
    assert_eq!(changed.issues.iter().map(|i| i.number).collect::<Vec<_>>(), [3]);

    // Without labels the parameter is left out; a label with a comma cannot be asked for.
    s.route("GET", &first, vec![Canned::json(200, &json!([]))]);
    let all = client.list_issues("octocat", "Hello-World", &[], IssueStateFilter::All).await.unwrap();
    assert!(all.issues.is_empty() && all.changed);
    assert_eq!(s.seen().last().unwrap().query, "state=all&sort=created&direction=desc&per_page=100");
    let err = client.list_issues("octocat", "Hello-World", &["a,b".into()], IssueStateFilter::Open).await.unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Invalid { .. }), "{err}");
    let err = client.list_issues("octocat", "Nope", &[], IssueStateFilter::Closed).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound { what: "repository octocat/Nope".into() });
}

#[tokio::test]
async fn not_modified_answers_from_the_cache_for_free() {
    let (s, client) = setup().await;
    let path = format!("{REPO}/pulls/1347");
    s.route("GET", &path, vec![Canned::json(200, &pull(1347, "open", "demo/a")).header("etag", "\"v1\"")]);
    let first = client.pull("octocat", "Hello-World", 1347).await.unwrap();
    let remaining = client.budget().remaining();
    assert_eq!(remaining, Some(4999));
    let second = client.pull("octocat", "Hello-World", 1347).await.unwrap();
    assert_eq!(first, second);

    let seen = s.seen();
    assert_eq!(seen[0].header("if-none-match"), None);
    assert_eq!(seen[1].header("if-none-match"), Some("\"v1\""));
    assert_eq!(client.budget().remaining(), remaining, "a 304 costs no rate limit");
    assert_eq!(s.remaining(), 4999);
    let stats = client.budget().stats();
    assert_eq!(stats.not_modified, 1);
    let endpoint = "GET /repos/{owner}/{repo}/pulls/{pull_number}".to_string();
    assert_eq!(stats.requests[&(endpoint.clone(), "200".into())], 1);
    assert_eq!(stats.requests[&(endpoint, "304".into())], 1);

    // A changed resource comes back whole with its new ETag.
    s.route("GET", &path, vec![Canned::json(200, &pull(1347, "closed", "demo/a")).header("etag", "\"v2\"")]);
    assert_eq!(client.pull("octocat", "Hello-World", 1347).await.unwrap().state, PullRequestState::Closed);
    assert_eq!(client.budget().remaining(), Some(4998));
}

#[tokio::test]
async fn exhausted_rate_limit_blocks_every_client_of_the_token() {
    let s = StandIn::start().await;
    let budget = Arc::new(Budget::new());
    let a = Client::with_budget(&s.url(), Some(TOKEN.into()), budget.clone()).unwrap();
    let b = Client::with_budget(&s.url(), Some(TOKEN.into()), budget.clone()).unwrap();
    let reset = Utc::now().timestamp() + 600;
    let limited = json!({"message": "API rate limit exceeded for user ID 1.", "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"});
    s.route(
        "GET",
        &format!("{REPO}/pulls/1"),
        vec![Canned::json(403, &limited).header("x-ratelimit-remaining", 0).header("x-ratelimit-reset", reset)],
    );
    let reset_at = Utc.timestamp_opt(reset, 0).unwrap();
    let err = a.pull("octocat", "Hello-World", 1).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::RateLimited { reset_at, secondary: false });
    assert_eq!((err.reason(), err.is_transient()), ("GitHubRateLimited", true));
    assert!(err.retry_after().unwrap() > Duration::from_secs(590));
    assert_eq!(budget.remaining(), Some(0));
    assert_eq!(budget.blocked_until(), Some(reset_at));

    let err = b.issue("octocat", "Hello-World", 2).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::RateLimited { reset_at, secondary: false });
    assert_eq!(s.seen().len(), 1, "a blocked budget sends nothing");
    assert_eq!(budget.stats().refused, 1);
}

#[tokio::test]
async fn secondary_limit_with_retry_after() {
    let (s, client) = setup().await;
    let limited =
        json!({"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."});
    s.route("GET", &format!("{REPO}/pulls/1"), vec![Canned::json(429, &limited).header("retry-after", 30)]);
    let before = Utc::now();
    let ErrorKind::RateLimited { reset_at, .. } = client.pull("octocat", "Hello-World", 1).await.unwrap_err().kind
    else {
        panic!("not rate limited")
    };
    assert!(
        reset_at >= before + chrono::Duration::seconds(29) && reset_at <= Utc::now() + chrono::Duration::seconds(31)
    );
    assert_eq!(client.budget().blocked_until(), Some(reset_at));
    assert!(matches!(
        client.pull("octocat", "Hello-World", 1).await.map_err(|e| e.kind),
        Err(ErrorKind::RateLimited { .. })
    ));
    assert_eq!(s.seen().len(), 1);
}

#[tokio::test]
async fn floor_holds_calls_back_until_the_reset() {
    let s = StandIn::start().await;
    let client = Client::with_budget(&s.url(), None, Arc::new(Budget::new().with_floor(4999))).unwrap();
    s.route("GET", &format!("{REPO}/issues/1"), vec![Canned::json(200, &fixture("rest/issue.json"))]);
    client.issue("octocat", "Hello-World", 1).await.unwrap();
    assert_eq!(s.seen()[0].header("authorization"), None);
    let err = client.issue("octocat", "Hello-World", 1).await.unwrap_err();
    assert_eq!(
        err.kind,
        ErrorKind::RateLimited { reset_at: Utc.timestamp_opt(reset_epoch(), 0).unwrap(), secondary: false }
    );
    assert_eq!(s.seen().len(), 1);
}

#[tokio::test]
async fn server_errors_and_timeouts_are_transient() {
    let (s, client) = setup().await;
    let client = client.with_timeout(Duration::from_millis(300));
    s.route("GET", &format!("{REPO}/pulls/1"), vec![Canned::json(502, &json!({"message": "Server Error"}))]);
    let err = client.pull("octocat", "Hello-World", 1).await.unwrap_err();
    assert!(matches!(&err.kind, ErrorKind::Transient { message } if message.contains("502")), "{err}");
    assert_eq!((err.reason(), err.is_transient()), ("GitHubUnavailable", true));

    s.route("GET", &format!("{REPO}/pulls/2"), vec![Canned::json(200, &json!({})).delay(Duration::from_secs(3))]);
    let err = client.pull("octocat", "Hello-World", 2).await.unwrap_err();
    assert!(matches!(&err.kind, ErrorKind::Transient { message } if message.contains("timed out")), "{err}");

    let stats = client.budget().stats();
    assert_eq!(stats.requests[&("GET /repos/{owner}/{repo}/pulls/{pull_number}".into(), "<error>".into())], 1);

    let unreachable = Client::new("http://127.0.0.1:1", None).unwrap();
    assert!(unreachable.issue("o", "r", 1).await.unwrap_err().is_transient());
}

#[tokio::test]
async fn unauthorized_and_shape_errors() {
    let (s, client) = setup().await;
    s.route("GET", &format!("{REPO}/issues/1"), vec![Canned::json(401, &json!({"message": "Bad credentials"}))]);
    s.route("GET", &format!("{REPO}/issues/2"), vec![Canned::json(200, &json!({"number": "two"}))]);
    let err = client.issue("octocat", "Hello-World", 1).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unauthorized { message: "Bad credentials".into() });
    let err = client.issue("octocat", "Hello-World", 2).await.unwrap_err();
    assert_eq!(err.reason(), "GitHubBadResponse");
    assert!(!format!("{err} {err:?}").contains(TOKEN));
}

#[tokio::test]
async fn enterprise_base_path_and_observer() {
    let s = StandIn::start().await;
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = records.clone();
    let budget = Budget::new().with_observer(Arc::new(move |r: &aoctl_github::RequestRecord<'_>| {
        sink.lock().push((r.endpoint.to_string(), r.code_label()));
    }));
    let client = Client::with_budget(&format!("{}/api/v3/", s.url()), Some(TOKEN.into()), Arc::new(budget)).unwrap();
    assert_eq!(client.api_url(), format!("{}/api/v3", s.url()));
    s.route("GET", &format!("/api/v3{REPO}/issues/1347"), vec![Canned::json(200, &fixture("rest/issue.json"))]);
    client.issue("octocat", "Hello-World", 1347).await.unwrap();
    client.issue("octocat", "Hello-World", 1).await.unwrap_err();
    assert_eq!(
        *records.lock(),
        vec![
            ("GET /repos/{owner}/{repo}/issues/{issue_number}".to_string(), "200".to_string()),
            ("GET /repos/{owner}/{repo}/issues/{issue_number}".to_string(), "404".to_string()),
        ]
    );
    assert!(matches!(Client::new("not a url", None).map_err(|e| e.kind), Err(ErrorKind::Invalid { .. })));
    assert_eq!(Client::new("", None).unwrap().api_url(), aoctl_github::DEFAULT_API_URL);
}

#[tokio::test]
async fn the_token_never_appears_in_debug_output() {
    let (_s, client) = setup().await;
    let debug = format!("{client:?} {:?}", client.budget());
    assert!(!debug.contains(TOKEN), "{debug}");
    assert!(debug.contains("<redacted>"));
    let anonymous = Client::new(aoctl_github::DEFAULT_API_URL, None).unwrap();
    assert!(format!("{anonymous:?}").contains("token: None"));
    let key = aoctl_github::BudgetKey::new(client.api_url(), Some(TOKEN));
    assert!(!format!("{key:?}").contains(TOKEN));
}
