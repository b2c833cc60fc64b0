//! GitLab webhooks: the `X-Gitlab-Token` check and the few facts of a delivery that tell what to
//! reconcile now: sessions (by project, branch and merge request iid) and issue sources (an issue
//! opened, closed, moved or relabeled).

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Whether the `X-Gitlab-Token` a delivery carries is `secret`, compared in constant time (both
/// are hashed first, so not even the length leaks).
pub fn verify_token(secret: &[u8], given: &str) -> bool {
    if secret.is_empty() {
        return false;
    }
    let (a, b) = (Sha256::digest(secret), Sha256::digest(given.as_bytes()));
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What a delivery is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookEvent {
    /// A merge request, its pipeline or jobs, or a note on it changed.
    Change(ChangeEvent),
    /// An issue opened, closed, reopened, moved, relabeled or edited.
    Issue(IssueEvent),
    /// An event aoctl does not act on, by its `X-Gitlab-Event`.
    Unknown(String),
}

/// Which merge request or branch a delivery concerns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeEvent {
    /// `path_with_namespace` of the project.
    pub project: String,
    /// The `X-Gitlab-Event` name, e.g. `Pipeline Hook`.
    pub event: String,
    /// The branch (a merge request's source, a pipeline's or job's ref), if known.
    pub branch: Option<String>,
    /// The merge request's iid, if known.
    pub iid: Option<u64>,
}

impl ChangeEvent {
    /// Whether a session on `branch` with merge request `iid` is concerned.
    pub fn concerns(&self, branch: &str, iid: Option<u64>) -> bool {
        (!branch.is_empty() && self.branch.as_deref() == Some(branch)) || (iid.is_some() && self.iid == iid)
    }
}

/// An issue delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssueEvent {
    pub project: String,
    pub iid: u64,
    /// `open`, `close`, `reopen`, `update`, … (`object_attributes.action`).
    pub action: String,
}

/// Why a delivery cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid `{event}` payload: {message}")]
pub struct ParseError {
    pub event: String,
    pub message: String,
}

#[derive(Deserialize)]
struct Project {
    path_with_namespace: String,
}

#[derive(Deserialize, Default)]
struct MrRef {
    iid: Option<u64>,
    source_branch: Option<String>,
}

#[derive(Deserialize, Default)]
struct Attributes {
    iid: Option<u64>,
    source_branch: Option<String>,
    #[serde(rename = "ref")]
    git_ref: Option<String>,
    action: Option<String>,
    noteable_type: Option<String>,
}

#[derive(Deserialize)]
struct Payload {
    project: Project,
    #[serde(default)]
    object_attributes: Option<Attributes>,
    #[serde(default)]
    merge_request: Option<MrRef>,
    /// A Job Hook's ref (jobs are flat).
    #[serde(default, rename = "ref")]
    git_ref: Option<String>,
}

/// Reads a delivery of `event` (the `X-Gitlab-Event` header).
pub fn parse(event: &str, body: &[u8]) -> Result<WebhookEvent, ParseError> {
    let known =
        ["Merge Request Hook", "Pipeline Hook", "Job Hook", "Note Hook", "Issue Hook", "Confidential Issue Hook"];
    if !known.contains(&event) {
        return Ok(WebhookEvent::Unknown(event.to_string()));
    }
    let err = |m: String| ParseError { event: event.to_string(), message: m };
    let de = &mut serde_json::Deserializer::from_slice(body);
    let p: Payload = serde_path_to_error::deserialize(de).map_err(|e| err(e.to_string()))?;
    let attrs = p.object_attributes.unwrap_or_default();
    let mr = p.merge_request.unwrap_or_default();
    let project = p.project.path_with_namespace;
    Ok(match event {
        "Issue Hook" | "Confidential Issue Hook" => WebhookEvent::Issue(IssueEvent {
            project,
            iid: attrs.iid.ok_or_else(|| err("object_attributes.iid is missing".into()))?,
            action: attrs.action.unwrap_or_default(),
        }),
        "Merge Request Hook" => WebhookEvent::Change(ChangeEvent {
            project,
            event: event.to_string(),
            branch: attrs.source_branch,
            iid: attrs.iid,
        }),
        "Note Hook" if attrs.noteable_type.as_deref() != Some("MergeRequest") => {
            WebhookEvent::Unknown(format!("{event} on a {}", attrs.noteable_type.unwrap_or_default()))
        }
        "Job Hook" => {
            WebhookEvent::Change(ChangeEvent { project, event: event.to_string(), branch: p.git_ref, iid: None })
        }
        // Pipeline and MR notes: the merge request is a sibling of the attributes.
        _ => WebhookEvent::Change(ChangeEvent {
            project,
            event: event.to_string(),
            branch: mr.source_branch.or(attrs.git_ref),
            iid: mr.iid,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tokens_compare_whole() {
        assert!(verify_token(b"s3cret", "s3cret"));
        assert!(!verify_token(b"s3cret", "s3cre"));
        assert!(!verify_token(b"s3cret", ""));
        assert!(!verify_token(b"", ""));
    }

    #[test]
    fn deliveries_name_branches_and_iids() {
        let body = json!({"object_kind": "pipeline", "project": {"path_with_namespace": "acme/w"},
            "object_attributes": {"id": 5, "ref": "w/fix", "sha": "abc", "status": "failed"},
            "merge_request": {"iid": 3, "source_branch": "w/fix"}});
        let WebhookEvent::Change(c) = parse("Pipeline Hook", body.to_string().as_bytes()).unwrap() else { panic!() };
        assert!(c.concerns("w/fix", None) && c.concerns("", Some(3)) && !c.concerns("other", Some(4)));
        let note = json!({"object_kind": "note", "project": {"path_with_namespace": "acme/w"},
            "object_attributes": {"id": 9, "noteable_type": "Issue"}});
        assert!(matches!(parse("Note Hook", note.to_string().as_bytes()).unwrap(), WebhookEvent::Unknown(_)));
        let issue = json!({"object_kind": "issue", "project": {"path_with_namespace": "acme/w"},
            "object_attributes": {"iid": 4, "action": "close"}});
        assert_eq!(
            parse("Issue Hook", issue.to_string().as_bytes()).unwrap(),
            WebhookEvent::Issue(IssueEvent { project: "acme/w".into(), iid: 4, action: "close".into() })
        );
        assert!(parse("Issue Hook", b"{}").is_err());
        assert_eq!(parse("Tag Push Hook", b"x").unwrap(), WebhookEvent::Unknown("Tag Push Hook".into()));
    }
}
