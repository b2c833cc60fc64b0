//! GitHub webhooks: the `X-Hub-Signature-256` check and the few facts of a delivery that tell
//! what to reconcile now: sessions (by repository, branch and pull request number), issue
//! sources (an issue opened, closed or relabeled) and git sources (a branch pushed).

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

/// Whether `header_value` (`sha256=<hex>`) is the HMAC-SHA256 of `body` under `secret`,
/// compared in constant time.
pub fn verify_signature(secret: &[u8], body: &[u8], header_value: &str) -> bool {
    let Some(hex_digest) = header_value.trim().strip_prefix("sha256=") else { return false };
    let Ok(expected) = hex::decode(hex_digest) else { return false };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else { return false };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

/// What a delivery is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookEvent {
    /// Sent when a hook is created; answered and otherwise ignored.
    Ping {
        hook_id: Option<u64>,
        /// `owner/name` for a repository hook; `None` for an organization hook.
        repository: Option<String>,
    },
    /// An event about pull requests or CI in a repository.
    Repository(RepositoryEvent),
    /// An `issues` event: an issue opened, closed, reopened, labeled, unlabeled, edited, …
    Issues(IssuesEvent),
    /// A `push` event: a branch or tag moved, appeared or went.
    Push(PushEvent),
    /// An event aoctl does not act on, by name.
    Unknown(String),
}

impl WebhookEvent {
    /// The repository (`owner/name`) the event is about, if any.
    pub fn repository(&self) -> Option<&str> {
        match self {
            WebhookEvent::Ping { repository, .. } => repository.as_deref(),
            WebhookEvent::Repository(e) => Some(&e.repository),
            WebhookEvent::Issues(e) => Some(&e.repository),
            WebhookEvent::Push(e) => Some(&e.repository),
            WebhookEvent::Unknown(_) => None,
        }
    }
}

/// An `issues` delivery: which issue, what happened to it, and its labels and state after that.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuesEvent {
    /// The payload's `action`: `opened`, `closed`, `reopened`, `labeled`, `unlabeled`, …
    pub action: String,
    /// `owner/name`.
    pub repository: String,
    pub number: u64,
    /// The issue's label names, as they are after the event.
    pub labels: Vec<String>,
    /// Whether the issue is open after the event.
    pub open: bool,
}

/// A `push` delivery: the ref, the commit it now points at, and the addresses of the repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushEvent {
    /// `owner/name`.
    pub repository: String,
    /// The full ref, e.g. `refs/heads/main` or `refs/tags/v1`.
    pub git_ref: String,
    /// The commit the ref points at now; forty zeros when it was deleted.
    pub after: String,
    /// `https://github.com/o/r.git`.
    pub clone_url: Option<String>,
    /// `https://github.com/o/r`.
    pub html_url: Option<String>,
    /// `git@github.com:o/r.git`.
    pub ssh_url: Option<String>,
    /// `git://github.com/o/r.git`.
    pub git_url: Option<String>,
}

impl PushEvent {
    /// Every address the repository is known by, for matching against a source's URL.
    pub fn urls(&self) -> Vec<&str> {
        [&self.clone_url, &self.html_url, &self.ssh_url, &self.git_url]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect()
    }

    /// The branch pushed, when the ref is a branch.
    pub fn branch(&self) -> Option<&str> {
        self.git_ref.strip_prefix("refs/heads/")
    }

    /// Whether the ref was deleted.
    pub fn deleted(&self) -> bool {
        !self.after.is_empty() && self.after.bytes().all(|b| b == b'0')
    }
}

/// The sessions an event concerns: those of `repository` whose branch is in `branches` or whose
/// pull request number is in `pull_numbers`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepositoryEvent {
    /// The event name, e.g. `check_run`.
    pub event: String,
    /// The payload's `action`, e.g. `completed`; `None` for `status`.
    pub action: Option<String>,
    /// `owner/name`.
    pub repository: String,
    /// Branches of this repository the event is about.
    pub branches: Vec<String>,
    /// Pull requests of this repository the event is about.
    pub pull_numbers: Vec<u64>,
    /// The commit the event is about, when it names one.
    pub head_sha: Option<String>,
}

impl RepositoryEvent {
    /// Whether a session on `branch` with pull request `pull_number` is concerned.
    pub fn concerns(&self, branch: &str, pull_number: Option<u64>) -> bool {
        self.branches.iter().any(|b| b == branch) || pull_number.is_some_and(|n| self.pull_numbers.contains(&n))
    }
}

/// A payload that is not valid JSON of the event's documented shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid `{event}` webhook payload: {message}")]
pub struct ParseError {
    pub(crate) event: String,
    pub(crate) message: String,
}

impl ParseError {
    /// The CamelCase reason used in conditions and events.
    pub fn reason(&self) -> &'static str {
        "InvalidWebhookPayload"
    }

    /// A malformed payload stays malformed.
    pub fn is_transient(&self) -> bool {
        false
    }
}

#[derive(Deserialize)]
struct Repo {
    id: u64,
    full_name: String,
    #[serde(default)]
    clone_url: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    ssh_url: Option<String>,
    #[serde(default)]
    git_url: Option<String>,
}

#[derive(Deserialize)]
struct RepoId {
    id: u64,
}

#[derive(Deserialize)]
struct Head {
    #[serde(rename = "ref")]
    name: String,
    sha: String,
    repo: Option<RepoId>,
}

#[derive(Deserialize)]
struct Base {
    repo: Option<RepoId>,
}

/// A pull request as the `pull_request*` events and the `pull_requests` arrays of CI events carry it.
#[derive(Deserialize)]
struct Pull {
    number: u64,
    head: Head,
    base: Base,
}

#[derive(Deserialize)]
struct Suite {
    head_branch: Option<String>,
    head_sha: String,
    #[serde(default)]
    pull_requests: Vec<Pull>,
}

#[derive(Deserialize)]
struct CheckRun {
    head_sha: String,
    check_suite: Suite,
    #[serde(default)]
    pull_requests: Vec<Pull>,
}

#[derive(Deserialize)]
struct WorkflowRun {
    head_branch: Option<String>,
    head_sha: String,
    head_repository: Option<RepoId>,
    #[serde(default)]
    pull_requests: Vec<Pull>,
}

#[derive(Deserialize)]
struct Named {
    name: String,
}

#[derive(Deserialize)]
struct IssueRef {
    number: u64,
    pull_request: Option<serde_json::Value>,
    #[serde(default)]
    labels: Option<Vec<Named>>,
    #[serde(default)]
    state: Option<String>,
}

#[derive(Deserialize)]
struct Payload {
    action: Option<String>,
    repository: Option<Repo>,
    hook_id: Option<u64>,
    pull_request: Option<Pull>,
    check_run: Option<CheckRun>,
    check_suite: Option<Suite>,
    workflow_run: Option<WorkflowRun>,
    issue: Option<IssueRef>,
    sha: Option<String>,
    #[serde(default)]
    branches: Vec<Named>,
    #[serde(rename = "ref")]
    git_ref: Option<String>,
    after: Option<String>,
}

/// The events that are read (besides `ping`): the ones that can concern a session, then
/// `issues` (for issue sources) and `push` (for git sources).
pub(crate) const EVENTS: &[&str] = &[
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "issue_comment",
    "check_run",
    "check_suite",
    "status",
    "workflow_run",
    "issues",
    "push",
];

/// Reads a delivery of `event_name` (the `X-GitHub-Event` header).
pub fn parse(event_name: &str, body: &[u8]) -> Result<WebhookEvent, ParseError> {
    if event_name != "ping" && !EVENTS.contains(&event_name) {
        return Ok(WebhookEvent::Unknown(event_name.to_string()));
    }
    let error = |message: String| ParseError { event: event_name.to_string(), message };
    let de = &mut serde_json::Deserializer::from_slice(body);
    let p: Payload = serde_path_to_error::deserialize(de).map_err(|e| error(e.to_string()))?;
    if event_name == "ping" {
        return Ok(WebhookEvent::Ping { hook_id: p.hook_id, repository: p.repository.map(|r| r.full_name) });
    }
    let missing = |field: &str| error(format!("missing field `{field}`"));
    let repo = p.repository.ok_or_else(|| missing("repository"))?;
    if event_name == "issues" {
        let issue = p.issue.ok_or_else(|| missing("issue"))?;
        return Ok(WebhookEvent::Issues(IssuesEvent {
            action: p.action.ok_or_else(|| missing("action"))?,
            repository: repo.full_name,
            number: issue.number,
            labels: issue.labels.unwrap_or_default().into_iter().map(|l| l.name).collect(),
            open: issue.state.ok_or_else(|| missing("issue.state"))? == "open",
        }));
    }
    if event_name == "push" {
        return Ok(WebhookEvent::Push(PushEvent {
            repository: repo.full_name,
            git_ref: p.git_ref.ok_or_else(|| missing("ref"))?,
            after: p.after.ok_or_else(|| missing("after"))?,
            clone_url: repo.clone_url,
            html_url: repo.html_url,
            ssh_url: repo.ssh_url,
            git_url: repo.git_url,
        }));
    }
    let mut facts = Facts { repo_id: repo.id, branches: Vec::new(), pulls: Vec::new(), sha: None };
    match event_name {
        "pull_request" | "pull_request_review" | "pull_request_review_comment" => {
            let pull = p.pull_request.ok_or_else(|| missing("pull_request"))?;
            facts.sha = Some(pull.head.sha.clone());
            facts.pull(pull);
        }
        "issue_comment" => {
            let issue = p.issue.ok_or_else(|| missing("issue"))?;
            if issue.pull_request.is_some() {
                facts.pulls.push(issue.number);
            }
        }
        "check_run" => {
            let run = p.check_run.ok_or_else(|| missing("check_run"))?;
            facts.sha = Some(run.head_sha);
            facts.branches.extend(run.check_suite.head_branch);
            run.pull_requests.into_iter().chain(run.check_suite.pull_requests).for_each(|pr| facts.pull(pr));
        }
        "check_suite" => {
            let suite = p.check_suite.ok_or_else(|| missing("check_suite"))?;
            facts.sha = Some(suite.head_sha);
            facts.branches.extend(suite.head_branch);
            suite.pull_requests.into_iter().for_each(|pr| facts.pull(pr));
        }
        "workflow_run" => {
            let run = p.workflow_run.ok_or_else(|| missing("workflow_run"))?;
            facts.sha = Some(run.head_sha);
            // A run of a fork's branch is not about this repository's branch of the same name.
            if run.head_repository.is_none_or(|r| r.id == repo.id) {
                facts.branches.extend(run.head_branch);
            }
            run.pull_requests.into_iter().for_each(|pr| facts.pull(pr));
        }
        _ => {
            // `status`: every branch whose head is the commit.
            facts.sha = Some(p.sha.ok_or_else(|| missing("sha"))?);
            facts.branches.extend(p.branches.into_iter().map(|b| b.name));
        }
    }
    facts.branches.sort();
    facts.branches.dedup();
    facts.pulls.sort_unstable();
    facts.pulls.dedup();
    Ok(WebhookEvent::Repository(RepositoryEvent {
        event: event_name.to_string(),
        action: p.action,
        repository: repo.full_name,
        branches: facts.branches,
        pull_numbers: facts.pulls,
        head_sha: facts.sha,
    }))
}

struct Facts {
    repo_id: u64,
    branches: Vec<String>,
    pulls: Vec<u64>,
    sha: Option<String>,
}

impl Facts {
    /// Adds a pull request of this repository, and its head branch when that is in this repository too.
    fn pull(&mut self, pull: Pull) {
        if pull.base.repo.as_ref().is_some_and(|r| r.id != self.repo_id) {
            return;
        }
        self.pulls.push(pull.number);
        if pull.head.repo.is_some_and(|r| r.id == self.repo_id) {
            self.branches.push(pull.head.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"It's a Secret to Everybody";
    const SIGNATURE: &str = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    #[test]
    fn github_test_vector() {
        assert!(verify_signature(SECRET, b"Hello, World!", SIGNATURE));
        assert!(!verify_signature(SECRET, b"Hello, World?", SIGNATURE));
        assert!(!verify_signature(b"wrong", b"Hello, World!", SIGNATURE));
        assert!(!verify_signature(SECRET, b"Hello, World!", &SIGNATURE.replace("sha256=", "sha1=")));
        assert!(!verify_signature(SECRET, b"Hello, World!", "sha256=zz"));
        assert!(!verify_signature(SECRET, b"Hello, World!", &SIGNATURE[..SIGNATURE.len() - 2]));
    }

    fn repository() -> serde_json::Value {
        serde_json::json!({
            "id": 1,
            "full_name": "octo/demo",
            "clone_url": "https://github.com/octo/demo.git",
            "html_url": "https://github.com/octo/demo",
            "ssh_url": "git@github.com:octo/demo.git",
            "git_url": "git://github.com/octo/demo.git"
        })
    }

    #[test]
    fn issues_events_carry_the_issue_after_the_change() {
        let body = serde_json::json!({
            "action": "unlabeled",
            "issue": {"number": 7, "state": "open", "labels": [{"name": "bug"}]},
            "label": {"name": "agent"},
            "repository": repository(),
        });
        let ev = parse("issues", body.to_string().as_bytes()).unwrap();
        assert_eq!(
            ev,
            WebhookEvent::Issues(IssuesEvent {
                action: "unlabeled".into(),
                repository: "octo/demo".into(),
                number: 7,
                labels: vec!["bug".into()],
                open: true,
            })
        );
        assert_eq!(ev.repository(), Some("octo/demo"));
        let closed = serde_json::json!({"action": "closed", "issue": {"number": 7, "state": "closed"}, "repository": repository()});
        let WebhookEvent::Issues(e) = parse("issues", closed.to_string().as_bytes()).unwrap() else { panic!() };
        assert!(!e.open && e.labels.is_empty());
        let err =
            parse("issues", br#"{"action":"opened","issue":{"number":1},"repository":{"id":1,"full_name":"o/r"}}"#)
                .unwrap_err();
        assert_eq!(err.to_string(), "invalid `issues` webhook payload: missing field `issue.state`");
    }

    #[test]
    fn push_events_name_the_ref_and_every_address() {
        let body = serde_json::json!({"ref": "refs/heads/main", "after": "a".repeat(40), "repository": repository()});
        let WebhookEvent::Push(e) = parse("push", body.to_string().as_bytes()).unwrap() else { panic!() };
        assert_eq!((e.repository.as_str(), e.branch(), e.deleted()), ("octo/demo", Some("main"), false));
        assert_eq!(
            e.urls(),
            [
                "https://github.com/octo/demo.git",
                "https://github.com/octo/demo",
                "git@github.com:octo/demo.git",
                "git://github.com/octo/demo.git"
            ]
        );
        let body = serde_json::json!({"ref": "refs/tags/v1", "after": "0".repeat(40), "repository": {"id": 1, "full_name": "o/r"}});
        let WebhookEvent::Push(e) = parse("push", body.to_string().as_bytes()).unwrap() else { panic!() };
        assert_eq!((e.branch(), e.deleted(), e.urls().len()), (None, true, 0));
        assert!(parse("push", br#"{"after":"x","repository":{"id":1,"full_name":"o/r"}}"#).is_err());
    }

    #[test]
    fn unknown_events_are_not_read() {
        assert_eq!(parse("deployment", b"not json").unwrap(), WebhookEvent::Unknown("deployment".into()));
        let err = parse("pull_request", b"{}").unwrap_err();
        assert_eq!(err.to_string(), "invalid `pull_request` webhook payload: missing field `repository`");
        assert!(parse("status", b"[").is_err());
    }
}
