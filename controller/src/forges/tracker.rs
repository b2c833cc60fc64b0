//! A project's tracker — its forge's issues, or Linear — as the session reconciler (a session's
//! `spec.issue`) and the IssueSource reconciler (its query) read it.

use std::sync::Arc;

use aoctl_api::issuesource::IssueSourceSpec;
use aoctl_forge_types::{Issue, IssueList};

use super::{Forge, ForgeError};

/// A tracker shared between reconciles.
pub(crate) type SharedTracker = Arc<dyn Tracker>;

/// The number in an issue reference: `42`, `#42`, or a tracker's `KEY-42`.
pub(crate) fn issue_number(reference: &str) -> Option<u64> {
    let r = reference.trim().trim_start_matches('#');
    let digits = r.rsplit_once('-').map_or(r, |(_, n)| n);
    digits.parse().ok()
}

/// Where a project's issues live.
#[async_trait::async_trait]
pub(crate) trait Tracker: Send + Sync + std::fmt::Debug {
    /// The tracker's name, for messages.
    fn name(&self) -> &'static str;

    /// The budget of the token the tracker is read with.
    fn budget(&self) -> &Arc<aoctl_forge_core::Budget>;

    /// What identifies the tracker and its scope in caches.
    fn describe(&self) -> String;

    /// The forge whose issues these are, if it is one.
    fn forge(&self) -> Option<&dyn Forge> {
        None
    }

    /// The line of a change's description that closes the issue when the change merges: the
    /// forges' `Closes #42`.
    fn closing_line(&self, reference: &str) -> String {
        format!("Closes #{}", reference.trim().trim_start_matches('#'))
    }

    /// One issue by reference.
    async fn issue(&self, reference: &str) -> Result<Issue, ForgeError>;

    /// The open issues an IssueSource's query selects, newest first.
    async fn list(&self, q: &IssueSourceSpec) -> Result<IssueList, ForgeError>;
}

/// The number of a forge's issue reference (`42`, `#42`).
pub(super) fn forge_issue_number(tracker: &str, reference: &str) -> Result<u64, ForgeError> {
    reference
        .trim()
        .trim_start_matches('#')
        .parse::<u64>()
        .map_err(|_| ForgeError::Unsupported(format!("`{reference}` is not an issue reference of {tracker}")))
}

/// The error of a source whose query is for another tracker than the project's.
pub(super) fn mismatch(tracker: &str, wanted: &str) -> ForgeError {
    ForgeError::Unsupported(format!(
        "the project's issues are on {tracker}, but the source queries {wanted}; set spec.{} instead",
        tracker.to_ascii_lowercase()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_of_references() {
        assert_eq!(issue_number("42"), Some(42));
        assert_eq!(issue_number("#42"), Some(42));
        assert_eq!(issue_number("ENG-42"), Some(42));
        assert_eq!(issue_number("ENG-"), None);
        assert_eq!(issue_number("x"), None);
    }
}
