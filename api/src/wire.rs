//! The envelopes of the HTTP API, in Kubernetes' shapes, shared by the server and its clients:
//! the `Status` body of every error (and of actions that return no object), the lines of a watch
//! stream and their bookmarks, lists, the bodies of deletes and of a session's input, the
//! `/version` document and the answers to webhooks. Tables are in [`crate::table`].

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Kind, API_VERSION};

/// `kind` of a [`Status`].
pub const STATUS_KIND: &str = "Status";
/// `apiVersion` of a [`Status`], as Kubernetes writes it.
pub const STATUS_API_VERSION: &str = "v1";

/// Whether the action a [`Status`] answers succeeded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Success,
    #[default]
    Failure,
}

/// A Kubernetes-style `Status`: what every error answers, and what an action with no object to
/// return answers on success.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    #[serde(default = "status_kind")]
    pub kind: String,
    #[serde(default = "status_api_version")]
    pub api_version: String,
    #[serde(default)]
    pub metadata: StatusMeta,
    #[serde(default)]
    pub status: Outcome,
    #[serde(default)]
    pub message: String,
    /// A machine-readable reason: `NotFound`, `Conflict`, `Invalid`, …
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The HTTP status code.
    #[serde(default)]
    pub code: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
}

fn status_kind() -> String {
    STATUS_KIND.to_string()
}

fn status_api_version() -> String {
    STATUS_API_VERSION.to_string()
}

/// A `Status`'s (empty) metadata.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusMeta {}

/// The object a [`Status`] is about, and what was wrong with it field by field.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusDetails {
    /// The object's plural kind (`sessions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
}

/// One thing wrong with a request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusCause {
    /// `FieldValueInvalid` for a field that failed validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The field's path (`spec.reactions.ci-failed.retries`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    #[serde(default)]
    pub message: String,
    /// Where in the request body the problem is, when it could be decoded that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
}

impl Status {
    /// A failure with its HTTP code, reason and message.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Status {
        Status {
            kind: status_kind(),
            api_version: status_api_version(),
            status: Outcome::Failure,
            message: message.into(),
            reason: reason.to_string(),
            code,
            ..Status::default()
        }
    }

    /// A success with no object to return.
    pub fn success(code: u16, message: impl Into<String>) -> Status {
        Status { status: Outcome::Success, ..Status::failure(code, "", message) }
    }
}

impl fmt::Display for Status {
    /// The message, then the field causes it does not already mention.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let message = if self.message.is_empty() { self.reason.as_str() } else { self.message.as_str() };
        f.write_str(message)?;
        let causes = self.details.iter().flat_map(|d| &d.causes);
        let extra: Vec<String> = causes
            .map(|c| match &c.field {
                Some(field) if !field.is_empty() => format!("{field}: {}", c.message),
                _ => c.message.clone(),
            })
            .filter(|c| !c.is_empty() && !message.contains(c.as_str()))
            .collect();
        match extra.as_slice() {
            [] => Ok(()),
            [one] => write!(f, ": {one}"),
            many => many.iter().try_for_each(|c| write!(f, "\n  {c}")),
        }
    }
}

/// The `type` of a watch line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WatchEventType {
    Added,
    Modified,
    Deleted,
    /// Progress: the stream has seen every change up to the object's `metadata.resourceVersion`.
    Bookmark,
    /// The stream ends; the object is a [`Status`] (410 `Expired`: watch again from a new list).
    Error,
}

/// One line of a watch stream (`application/json; stream=watch`): `{"type": …, "object": …}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WatchLine<T = Value> {
    #[serde(rename = "type")]
    pub type_: WatchEventType,
    pub object: T,
}

/// A list's metadata: the version to watch from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    #[serde(default)]
    pub resource_version: String,
}

/// A list of objects of one kind (`kind: SessionList`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct List<T = Value> {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ListMeta,
    /// A `null` list reads as empty.
    #[serde(default = "Vec::new", deserialize_with = "null_is_empty", bound(deserialize = "T: Deserialize<'de>"))]
    pub items: Vec<T>,
}

impl<T> List<T> {
    /// The list of `items` of `kind`, current at resourceVersion `rv`.
    pub fn new(kind: Kind, rv: u64, items: Vec<T>) -> List<T> {
        List {
            api_version: API_VERSION.to_string(),
            kind: kind.list_kind().to_string(),
            metadata: ListMeta { resource_version: rv.to_string() },
            items,
        }
    }
}

fn null_is_empty<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// The object of a `BOOKMARK` watch line: the watched kind with only `metadata.resourceVersion`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bookmark {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ListMeta,
}

impl Bookmark {
    /// A bookmark of a watch of `kind` that has seen every change up to `rv`.
    pub fn new(kind: Kind, rv: u64) -> Bookmark {
        Bookmark {
            api_version: API_VERSION.to_string(),
            kind: kind.as_str().to_string(),
            metadata: ListMeta { resource_version: rv.to_string() },
        }
    }
}

/// The body of a delete (`DeleteOptions`), optional; of its fields aoctl reads only the
/// resourceVersion precondition and ignores the others.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<Preconditions>,
}

/// What must hold of the object for a delete to go ahead.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    /// The object's current resourceVersion; another one fails the delete with 409.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// The body of `POST …/sessions/{name}/input`: the text to type into the agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputRequest {
    pub text: String,
}

/// The body of `POST …/sessions/{name}/answer`: a person's answer to the agent's question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerRequest {
    pub text: String,
}

/// The body of `POST /agent/v1/report`: the agent's progress and summary; at least one is given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentReportRequest {
    #[serde(default)]
    pub progress: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
}

/// The body of `POST /agent/v1/ask`: a question for a person.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentAskRequest {
    pub question: String,
}

/// The body of `POST /agent/v1/send`: a message to another session of the same project.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSendRequest {
    pub session: String,
    pub text: String,
}

/// The body of `POST /agent/v1/handoff`: the prompt of a follow-up session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentHandoffRequest {
    pub prompt: String,
}

/// The body of `POST /agent/v1/review`: what the agent wants reviewed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentReviewRequest {
    #[serde(default)]
    pub note: Option<String>,
}

/// The body of `POST /agent/v1/orchestrator/spawn`: a worker for the project's orchestrator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrchestratorSpawnRequest {
    pub prompt: String,
    /// A built-in agent's name; the project's default when absent.
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub issue: Option<String>,
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// The worker's name; generated from the orchestrator's when absent.
    #[serde(default)]
    pub name: Option<String>,
}

/// The body of `POST /agent/v1/orchestrator/sessions/{name}/send` and `…/answer`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrchestratorTextRequest {
    pub text: String,
}

/// The `/version` document.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    /// The server's version.
    #[serde(default)]
    pub version: String,
    /// The API group version it serves.
    #[serde(default)]
    pub api_version: String,
    /// `os/arch` of the server.
    #[serde(default)]
    pub platform: String,
}

/// What a webhook delivery is answered with: what was done with it, and the sessions (or, for
/// `issues` and `push`, the sources) it woke.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookAnswer {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_sources: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_sources: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_has_kubernetes_shape() {
        let s = Status::failure(404, "NotFound", "sessions \"x\" not found");
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "sessions \"x\" not found", "reason": "NotFound", "code": 404})
        );
        let ok = serde_json::to_value(Status::success(200, "done")).unwrap();
        assert_eq!(
            ok,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "message": "done", "code": 200})
        );
        // A sparse body from another server still reads.
        let sparse: Status = serde_json::from_value(json!({"code": 410, "message": "gone"})).unwrap();
        assert_eq!((sparse.code, sparse.kind.as_str(), sparse.status), (410, "Status", Outcome::Failure));
    }

    #[test]
    fn the_message_names_causes_it_does_not_mention() {
        let mut s = Status::failure(422, "Invalid", "session \"x\" is invalid");
        s.details = Some(StatusDetails {
            causes: vec![StatusCause {
                field: Some("spec.agent".into()),
                message: "required".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        assert_eq!(s.to_string(), "session \"x\" is invalid: spec.agent: required");
    }

    #[test]
    fn watch_lines_name_their_type_in_capitals() {
        let l = WatchLine { type_: WatchEventType::Bookmark, object: json!({}) };
        assert_eq!(serde_json::to_string(&l).unwrap(), r#"{"type":"BOOKMARK","object":{}}"#);
        let back: WatchLine = serde_json::from_str(r#"{"type":"DELETED","object":{"a":1}}"#).unwrap();
        assert_eq!(back.type_, WatchEventType::Deleted);
        assert!(serde_json::from_str::<WatchLine>(r#"{"type":"RENAMED","object":{}}"#).is_err());
    }

    #[test]
    fn lists_and_bookmarks_have_kubernetes_shape() {
        let l = List::new(Kind::Session, 7, vec![json!({"a": 1})]);
        assert_eq!(
            serde_json::to_string(&l).unwrap(),
            r#"{"apiVersion":"ao.dev/v1alpha1","kind":"SessionList","metadata":{"resourceVersion":"7"},"items":[{"a":1}]}"#
        );
        let back: List = serde_json::from_str(r#"{"items":null,"metadata":{"resourceVersion":"3"}}"#).unwrap();
        assert_eq!((back.items.len(), back.metadata.resource_version.as_str()), (0, "3"));
        assert!(serde_json::from_str::<List>(r#"{"items":{}}"#).is_err());
        let b = serde_json::to_value(Bookmark::new(Kind::Project, 9)).unwrap();
        assert_eq!(
            b,
            json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"resourceVersion": "9"}})
        );
    }

    #[test]
    fn delete_options_and_input_bodies() {
        let d: DeleteOptions =
            serde_json::from_str(r#"{"preconditions":{"resourceVersion":"4"},"propagationPolicy":"Foreground"}"#)
                .unwrap();
        assert_eq!(d.preconditions.and_then(|p| p.resource_version).as_deref(), Some("4"));
        assert_eq!(serde_json::from_str::<DeleteOptions>("{}").unwrap(), DeleteOptions::default());
        let i = InputRequest { text: "hi".into() };
        assert_eq!(serde_json::to_string(&i).unwrap(), r#"{"text":"hi"}"#);
        assert!(serde_json::from_str::<InputRequest>(r#"{"text":"hi","x":1}"#).is_err());
    }
}

/// The answer to `POST /dashboard/login`: a one-time code that opens the dashboard in a browser.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginCode {
    /// The code; it works once.
    pub code: String,
    /// The path to follow, `/login?code=…`, relative to the server's address.
    pub path: String,
    /// How long the code stays valid.
    pub expires_in_seconds: u64,
}
