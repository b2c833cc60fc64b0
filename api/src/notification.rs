//! The notification outbox kept in an object's status: each notification is recorded (in the same
//! status write as the decision that made it) before it is sent, then delivered to every target
//! with retries and backoff, and marked delivered. Its `key` identifies the event, so a resend
//! after a crash carries the same `Idempotency-Key`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::meta::Time;
use crate::reactions::MergeMethod;

/// One notification and how far its delivery got.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotificationRecord {
    /// The event's idempotency key: object uid, reaction, episode and kind.
    pub key: String,
    /// The reaction key (e.g. `ci-failed`), or `budget-spent` for a project.
    pub reaction: String,
    pub title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Whether this escalates something the agent was not able to resolve.
    #[serde(default)]
    pub escalated: bool,
    /// When it was recorded.
    pub at: Time,
    /// The targets it has not reached yet, as `<type>#<index in spec.notifiers>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
    /// Delivery passes made so far.
    #[serde(default)]
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<Time>,
    /// When every target had it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<Time>,
    /// When delivery was given up, some targets still failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl NotificationRecord {
    /// Whether delivery is over: delivered, or given up.
    pub fn settled(&self) -> bool {
        self.delivered_at.is_some() || self.failed_at.is_some()
    }
}

/// A merge decided by the `approved-and-green` reaction, recorded before it is made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MergeStatus {
    /// The head commit that was approved and green; GitHub merges only while it is the head.
    pub sha: String,
    pub method: MergeMethod,
    pub decided_at: Time,
    /// `Merged`, `HeadMoved` or `NotMergeable`; absent while the merge is still to be made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_at: Option<Time>,
}
