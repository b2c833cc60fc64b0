//! Status conditions with KEP-1623 semantics: `lastTransitionTime` moves only when `status` does.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::invalid::Invalid;
use crate::meta::Time;

/// `True`, `False` or `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// One observation about an object, as in Kubernetes' `metav1.Condition`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    /// CamelCase condition type such as `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    /// CamelCase machine-readable reason for the last transition.
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    pub last_transition_time: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The condition types of this API.
pub mod types {
    pub const READY: &str = "Ready";
    pub const WORKSPACE_READY: &str = "WorkspaceReady";
    pub const RUNTIME_READY: &str = "RuntimeReady";
    pub const AGENT_ACTIVE: &str = "AgentActive";
    pub const PULL_REQUEST_OPEN: &str = "PullRequestOpen";
    pub const CHECKS_PASSED: &str = "ChecksPassed";
    pub const REVIEW_APPROVED: &str = "ReviewApproved";
    pub const MERGED: &str = "Merged";
    pub const STALLED: &str = "Stalled";
    /// Session with `spec.issue`: whether the tracker issue is still open (`False`, reason
    /// `IssueClosed`, once it is closed).
    pub const ISSUE_OPEN: &str = "IssueOpen";
    /// Session: its branch changes files that another live session of its project changes too
    /// (`True`, reason `FilesOverlap`, naming the files and the sessions; `False`, `NoOverlap`).
    pub const OVERLAPPING: &str = "Overlapping";
    /// Session placed on `spec.docker.hosts`: whether it has a place on an engine (`True`, reason
    /// `Placed`, naming the engine; `False`, `NoCapacity` or `HostLost`).
    pub const SCHEDULED: &str = "Scheduled";
    /// Project: its `budget` is spent; new sessions wait.
    pub const BUDGET_SPENT: &str = "BudgetSpent";
    /// Session with a forge: whether what it knows of its pull request is as fresh as its poll
    /// interval (`True`); `False` while polls are held back because the token's rate budget runs
    /// low (reason `ForgeBudgetLow`) or the forge does not answer (the forge's reason), with the
    /// message saying since when the view is stale.
    pub const FORGE_SYNCED: &str = "ForgeSynced";
    /// Session: whether its agent can run and take work: its program resolves where the runtime
    /// runs it and it is not at a login screen (`True`, reason `AgentFound`; `False`, reasons
    /// `AgentNotFound`, `AgentNotLoggedIn`, `AgentExitedAtStart`), with a message that says how to
    /// fix it.
    pub const AGENT_READY: &str = "AgentReady";
}

impl Condition {
    pub fn new(
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: impl Into<String>,
        observed_generation: Option<i64>,
        now: Time,
    ) -> Condition {
        Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message: message.into(),
            last_transition_time: now,
            observed_generation,
        }
    }
}

/// Checks a reason (or type) against KEP-1623's `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, ≤ 1024.
pub fn validate_reason(reason: &str) -> Result<(), Invalid> {
    let b = reason.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 1024
        && b[0].is_ascii_alphabetic()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':'))
        && (b[b.len() - 1].is_ascii_alphanumeric() || b[b.len() - 1] == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!("invalid reason `{reason}`: must be CamelCase, start with a letter and contain only letters, digits, `_`, `,` or `:`").into())
    }
}

/// Sets `new` in `conditions`, keeping `lastTransitionTime` when the status is unchanged.
/// Returns whether anything changed.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => {
            conditions.push(new);
            true
        }
        Some(old) => {
            let mut next = new;
            if old.status == next.status {
                next.last_transition_time = old.last_transition_time;
            }
            if *old == next {
                return false;
            }
            *old = next;
            true
        }
    }
}

/// Finds the condition of a type.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of a type is present and `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == ConditionStatus::True)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(status: ConditionStatus, reason: &str, t: i64) -> Condition {
        Condition::new("Ready", status, reason, "", Some(1), Time::from_unix(t))
    }

    #[test]
    fn transition_time_moves_only_with_status() {
        let mut v = vec![];
        assert!(set_condition(&mut v, c(ConditionStatus::False, "A", 10)));
        assert!(set_condition(&mut v, c(ConditionStatus::False, "B", 20)));
        assert_eq!(v[0].last_transition_time, Time::from_unix(10));
        assert_eq!(v[0].reason, "B");
        assert!(!set_condition(&mut v, c(ConditionStatus::False, "B", 30)));
        assert!(set_condition(&mut v, c(ConditionStatus::True, "B", 40)));
        assert_eq!(v[0].last_transition_time, Time::from_unix(40));
        assert_eq!(v.len(), 1);
    }

    #[test]
    fn reasons() {
        for ok in ["Ready", "RepositoryNotFound", "A_b:c,D", "x"] {
            validate_reason(ok).unwrap();
        }
        for bad in ["", "1Abc", "Not Found", "Trailing,", "has-dash"] {
            assert!(validate_reason(bad).is_err(), "{bad}");
        }
    }
}
