//! The error of any forge or tracker call, with what the reconcilers ask of it: the condition
//! reason, whether to retry, how long to wait, and whether a merge was refused or raced.

use std::time::Duration;

/// What went wrong talking to a project's forge or tracker.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ForgeError {
    /// The service answered (or did not): its error, in its words.
    #[error(transparent)]
    Service(#[from] aoctl_forge_core::Error),
    /// The call makes no sense for this tracker (a reference it cannot name, a query for another
    /// tracker).
    #[error("{0}")]
    Unsupported(String),
}

impl ForgeError {
    /// The CamelCase reason used in conditions.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            ForgeError::Service(e) => e.reason(),
            ForgeError::Unsupported(_) => "TrackerMismatch",
        }
    }

    /// Whether the same call may succeed later without anything else changing.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, ForgeError::Service(e) if e.is_transient())
    }

    /// How long to wait before trying again, for a rate limit.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            ForgeError::Service(e) => e.retry_after(),
            ForgeError::Unsupported(_) => None,
        }
    }

    /// A merge refused because the head is no longer the sha it was decided for.
    pub(crate) fn head_changed(&self) -> bool {
        matches!(self, ForgeError::Service(e) if e.head_changed())
    }

    /// A merge refused because the change cannot be merged (protection, conflicts, a draft).
    pub(crate) fn not_mergeable(&self) -> bool {
        matches!(self, ForgeError::Service(e) if e.not_mergeable())
    }

    /// What the service said, in its words (its message and reasons); this error's own text for
    /// one that did not come from the service.
    pub(crate) fn service_said(&self) -> String {
        match self {
            ForgeError::Service(e) => e.service_said(),
            ForgeError::Unsupported(m) => m.clone(),
        }
    }
}
