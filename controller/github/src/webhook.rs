//! GitHub webhooks: the `X-Hub-Signature-256` check and the few facts of a delivery that tell
//! which sessions to reconcile now (their repository, branches and pull request numbers).

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
    /// An event aoctl does not act on, by name.
    Unknown(String),
}

impl WebhookEvent {
    /// The repository (`owner/name`) the event is about, if any.
    pub fn repository(&self) -> Option<&str> {
        match self {
            WebhookEvent::Ping { repository, .. } => repository.as_deref(),
            WebhookEvent::Repository(e) => Some(&e.repository),
            WebhookEvent::Unknown(_) => None,
        }
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
}

/// The events that can concern a session.
pub(crate) const EVENTS: &[&str] = &[
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "issue_comment",
    "check_run",
    "check_suite",
    "status",
    "workflow_run",
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

    #[test]
    fn unknown_events_are_not_read() {
        assert_eq!(parse("deployment", b"not json").unwrap(), WebhookEvent::Unknown("deployment".into()));
        let err = parse("pull_request", b"{}").unwrap_err();
        assert_eq!(err.to_string(), "invalid `pull_request` webhook payload: missing field `repository`");
        assert!(parse("status", b"[").is_err());
    }
}
