//! Webhook parsing on real deliveries copied from `@octokit/webhooks-examples`, and signatures.

use aoctl_github::webhook::{parse, verify_signature, IssuesEvent, PushEvent, RepositoryEvent, WebhookEvent};
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;

use crate::{fixture, fixture_bytes};

const SHA: &str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";

fn repo_event(event: &str, file: &str) -> RepositoryEvent {
    match parse(event, &fixture_bytes(&format!("webhooks/{file}"))).unwrap() {
        WebhookEvent::Repository(e) => e,
        other => panic!("{file}: {other:?}"),
    }
}

fn expect(event: &str, action: Option<&str>, branches: &[&str], pulls: &[u64], sha: Option<&str>) -> RepositoryEvent {
    RepositoryEvent {
        event: event.into(),
        action: action.map(Into::into),
        repository: "Codertocat/Hello-World".into(),
        branches: branches.iter().map(|b| b.to_string()).collect(),
        pull_numbers: pulls.to_vec(),
        head_sha: sha.map(Into::into),
    }
}

#[test]
fn pull_request_events() {
    let e = repo_event("pull_request", "pull_request.opened.json");
    assert_eq!(e, expect("pull_request", Some("opened"), &["changes"], &[2], Some(SHA)));
    assert!(e.concerns("changes", None) && e.concerns("other", Some(2)) && !e.concerns("other", Some(3)));
    let e = repo_event("pull_request_review", "pull_request_review.submitted.json");
    assert_eq!(e, expect("pull_request_review", Some("submitted"), &["changes"], &[2], Some(SHA)));
    let e = repo_event("pull_request_review_comment", "pull_request_review_comment.created.json");
    assert_eq!(e, expect("pull_request_review_comment", Some("created"), &["changes"], &[2], Some(SHA)));
}

#[test]
fn ci_events() {
    let e = repo_event("check_run", "check_run.completed.json");
    assert_eq!(e, expect("check_run", Some("completed"), &["changes"], &[2], Some(SHA)));
    let e = repo_event("check_suite", "check_suite.completed.json");
    assert_eq!(e, expect("check_suite", Some("completed"), &["changes"], &[2], Some(SHA)));
    // A status names every branch whose head is the commit.
    let e = repo_event("status", "status.json");
    let status_sha = "6113728f27ae82c7b1a177c8d03f9e96e0adf246";
    assert_eq!(e, expect("status", None, &["changes", "gh-pages", "master"], &[], Some(status_sha)));
    // This delivery's pull request belongs to another repository (its base repo id differs), so
    // only the run's own branch concerns sessions of octo-org/octo-repo.
    let e = repo_event("workflow_run", "workflow_run.completed.json");
    assert_eq!(e.repository, "octo-org/octo-repo");
    assert_eq!((e.branches, e.pull_numbers), (vec!["master".to_string()], vec![]));
    assert_eq!(e.head_sha.as_deref(), Some("3484a3fb816e0859fd6e1cea078d76385ff50625"));
}

#[test]
fn issue_comments_concern_pull_requests_only() {
    let e = repo_event("issue_comment", "issue_comment.created.json");
    assert_eq!(e, expect("issue_comment", Some("created"), &[], &[], None));

    // The same delivery on a pull request: GitHub adds `issue.pull_request` with these links.
    let mut on_pull = fixture("webhooks/issue_comment.created.json");
    on_pull["issue"]["pull_request"] = json!({
        "url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1",
        "html_url": "https://github.com/Codertocat/Hello-World/pull/1",
        "diff_url": "https://github.com/Codertocat/Hello-World/pull/1.diff",
        "patch_url": "https://github.com/Codertocat/Hello-World/pull/1.patch",
        "merged_at": null
    });
    let WebhookEvent::Repository(e) = parse("issue_comment", &serde_json::to_vec(&on_pull).unwrap()).unwrap() else {
        panic!("not a repository event")
    };
    assert_eq!(e, expect("issue_comment", Some("created"), &[], &[1], None));
}

#[test]
fn ping_and_unknown_events() {
    let ping = parse("ping", &fixture_bytes("webhooks/ping.json")).unwrap();
    assert_eq!(
        ping,
        WebhookEvent::Ping { hook_id: Some(109948940), repository: Some("Octocoders/Hello-World".into()) }
    );
    assert_eq!(ping.repository(), Some("Octocoders/Hello-World"));
    let deployment = parse("deployment", b"{}").unwrap();
    assert_eq!(deployment, WebhookEvent::Unknown("deployment".into()));
    assert_eq!(deployment.repository(), None);
}

fn issues_event(file: &str) -> IssuesEvent {
    match parse("issues", &fixture_bytes(&format!("webhooks/{file}"))).unwrap() {
        WebhookEvent::Issues(e) => e,
        other => panic!("{file}: {other:?}"),
    }
}

#[test]
fn issues_events() {
    let issue = |action: &str| IssuesEvent {
        action: action.into(),
        repository: "Codertocat/Hello-World".into(),
        number: 1,
        labels: vec!["bug".into()],
        open: true,
    };
    assert_eq!(issues_event("issues.opened.json"), issue("opened"));
    assert_eq!(issues_event("issues.labeled.json"), issue("labeled"));
    assert_eq!(issues_event("issues.reopened.json"), issue("reopened"));
    // GitHub's example still lists the label the event removed; the issue is as the payload says.
    assert_eq!(issues_event("issues.unlabeled.json"), issue("unlabeled"));

    let mut closed = fixture("webhooks/issues.reopened.json");
    closed["action"] = json!("closed");
    closed["issue"]["state"] = json!("closed");
    closed["issue"]["labels"] = json!([]);
    let WebhookEvent::Issues(e) = parse("issues", &serde_json::to_vec(&closed).unwrap()).unwrap() else {
        panic!("not an issues event")
    };
    assert_eq!((e.action.as_str(), e.open, e.labels.len()), ("closed", false, 0));
}

#[test]
fn push_events() {
    let push = |file: &str| match parse("push", &fixture_bytes(&format!("webhooks/{file}"))).unwrap() {
        WebhookEvent::Push(e) => e,
        other => panic!("{file}: {other:?}"),
    };
    let branch = push("push.branch.json");
    assert_eq!(
        branch,
        PushEvent {
            repository: "Codertocat/Hello-World".into(),
            git_ref: "refs/heads/master".into(),
            after: "6113728f27ae82c7b1a177c8d03f9e96e0adf246".into(),
            clone_url: Some("https://github.com/Codertocat/Hello-World.git".into()),
            html_url: Some("https://github.com/Codertocat/Hello-World".into()),
            ssh_url: Some("git@github.com:Codertocat/Hello-World.git".into()),
            git_url: Some("git://github.com/Codertocat/Hello-World.git".into()),
        }
    );
    assert_eq!((branch.branch(), branch.deleted(), branch.urls().len()), (Some("master"), false, 4));
    let tag = push("push.json");
    assert_eq!((tag.git_ref.as_str(), tag.branch()), ("refs/tags/simple-tag", None));
    assert_eq!(WebhookEvent::Push(tag).repository(), Some("Codertocat/Hello-World"));
}

#[test]
fn malformed_payloads_are_errors() {
    let mut pr = fixture("webhooks/pull_request.opened.json");
    pr["pull_request"]["number"] = json!("two");
    let err = parse("pull_request", &serde_json::to_vec(&pr).unwrap()).unwrap_err();
    assert!(err.to_string().contains("pull_request.number"), "{err}");
    assert_eq!((err.reason(), err.is_transient()), ("InvalidWebhookPayload", false));
}

#[test]
fn signatures_of_a_real_delivery() {
    assert!(verify_signature(
        b"It's a Secret to Everybody",
        b"Hello, World!",
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    ));
    let body = fixture_bytes("webhooks/check_run.completed.json");
    let mut mac = Hmac::<Sha256>::new_from_slice(b"s3cr3t").unwrap();
    mac.update(&body);
    let header = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    assert!(verify_signature(b"s3cr3t", &body, &header));
    assert!(!verify_signature(b"s3cr3t", &body[1..], &header));
    assert!(!verify_signature(b"other", &body, &header));
    assert!(!verify_signature(b"s3cr3t", &body, ""));
}
