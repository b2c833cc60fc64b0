//! The messages of a multiplexed stream (`GET /apis/ao.dev/v1alpha1/streams`, a WebSocket): one
//! connection carries a page's watches and transcript follows. The client sends a
//! [`StreamRequest`] per text frame; the server answers with [`StreamMessage`]s, each naming the
//! subscription (`id`) it belongs to. A watch's events are the lines of the watch endpoint
//! (`{"type": …, "object": …}`, [`crate::wire::WatchLine`]) as they are.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::wire::Status;

/// The most subscriptions (watches and logs) one stream holds at once.
pub const MAX_SUBSCRIPTIONS: usize = 32;
/// The largest request (one text frame) a client may send, in bytes.
pub const MAX_REQUEST: usize = 16 * 1024;

/// What a client asks of a stream, one per text frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "camelCase", deny_unknown_fields)]
pub enum StreamRequest {
    /// Watch the objects of a kind, as `GET …/{plural}?watch=true` with the same parameters
    /// does: from `resourceVersion` (from the current objects, as `ADDED`, when absent or `0`).
    Watch {
        /// The client's name for this subscription, unique among its open ones.
        id: u64,
        /// `sessions`, `projects`, `events`, `gitsources` or `issuesources`.
        plural: String,
        #[serde(default, rename = "resourceVersion", skip_serializing_if = "Option::is_none")]
        resource_version: Option<String>,
        #[serde(default, rename = "labelSelector", skip_serializing_if = "Option::is_none")]
        label_selector: Option<String>,
        #[serde(default, rename = "fieldSelector", skip_serializing_if = "Option::is_none")]
        field_selector: Option<String>,
    },
    /// Follow a session's transcript: from `offset` (a byte offset a `log` message gave) when
    /// given, else its last `tailLines` lines (500 when absent) as its terminal shows them.
    Log {
        id: u64,
        session: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offset: Option<u64>,
        #[serde(default, rename = "tailLines", skip_serializing_if = "Option::is_none")]
        tail_lines: Option<usize>,
    },
    /// End a subscription; ending one that is not open is no error.
    Cancel { id: u64 },
}

impl StreamRequest {
    /// The subscription the request is about.
    pub fn id(&self) -> u64 {
        match self {
            StreamRequest::Watch { id, .. } | StreamRequest::Log { id, .. } | StreamRequest::Cancel { id } => *id,
        }
    }
}

/// What the server sends, one per text frame: exactly one of `event`, `log` and `error`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamMessage {
    /// The subscription; absent on an error about a request that named none (not JSON, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// A watch's event, as the watch endpoint writes it. An `ERROR` event ends the watch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Value>,
    /// The next piece of a transcript, as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// With `log`: the transcript's byte offset after this piece, to resume from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// A refused request or a subscription that ended (a `Status`, as the HTTP API answers
    /// errors); the subscription is no longer open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Value>")]
    pub error: Option<Status>,
}

impl StreamMessage {
    pub fn log(id: u64, text: String, offset: u64) -> StreamMessage {
        StreamMessage { id: Some(id), log: Some(text), offset: Some(offset), ..StreamMessage::default() }
    }

    pub fn error(id: Option<u64>, status: Status) -> StreamMessage {
        StreamMessage { id, error: Some(status), ..StreamMessage::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_as_the_dashboard_writes_them() {
        let w: StreamRequest =
            serde_json::from_str(r#"{"op":"watch","id":1,"plural":"sessions","resourceVersion":"42"}"#).unwrap();
        assert_eq!(
            w,
            StreamRequest::Watch {
                id: 1,
                plural: "sessions".into(),
                resource_version: Some("42".into()),
                label_selector: None,
                field_selector: None
            }
        );
        let l: StreamRequest = serde_json::from_str(r#"{"op":"log","id":2,"session":"s","offset":10}"#).unwrap();
        assert_eq!(l, StreamRequest::Log { id: 2, session: "s".into(), offset: Some(10), tail_lines: None });
        let c: StreamRequest = serde_json::from_str(r#"{"op":"cancel","id":2}"#).unwrap();
        assert_eq!(c.id(), 2);
        for bad in [
            r#"{"op":"watch","id":1}"#,
            r#"{"op":"watch","id":1,"plural":"sessions","extra":1}"#,
            r#"{"op":"nope","id":1}"#,
            r#"{"id":1}"#,
            r#"{"op":"cancel","id":-1}"#,
        ] {
            assert!(serde_json::from_str::<StreamRequest>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn messages_carry_only_what_they_have() {
        let m = StreamMessage::log(3, "hi\n".into(), 7);
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"id":3,"log":"hi\n","offset":7}"#);
        let e = StreamMessage::error(None, Status::failure(400, "BadRequest", "op: missing"));
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["error"]["code"], 400);
        assert!(v.get("id").is_none());
    }
}
