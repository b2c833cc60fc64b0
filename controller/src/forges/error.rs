//! The error of any forge or tracker call, with what the reconcilers ask of it: the condition
//! reason, whether to retry, how long to wait, and whether a merge was refused or raced.

use std::time::Duration;

/// What went wrong talking to a project's forge or tracker.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ForgeError {
    #[error(transparent)]
    GitHub(#[from] aoctl_github::Error),
    #[error(transparent)]
    GitLab(#[from] aoctl_gitlab::Error),
    #[error(transparent)]
    Linear(#[from] aoctl_linear::Error),
    /// The call makes no sense for this tracker (a reference it cannot name, a query for another
    /// tracker).
    #[error("{0}")]
    Unsupported(String),
}

impl ForgeError {
    /// The CamelCase reason used in conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            ForgeError::GitHub(e) => e.reason(),
            ForgeError::GitLab(e) => e.reason(),
            ForgeError::Linear(e) => e.reason(),
            ForgeError::Unsupported(_) => "TrackerMismatch",
        }
    }

    /// Whether the same call may succeed later without anything else changing.
    pub fn is_transient(&self) -> bool {
        match self {
            ForgeError::GitHub(e) => e.is_transient(),
            ForgeError::GitLab(e) => e.is_transient(),
            ForgeError::Linear(e) => e.is_transient(),
            ForgeError::Unsupported(_) => false,
        }
    }

    /// How long to wait before trying again, for a rate limit.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ForgeError::GitHub(e) => e.retry_after(),
            ForgeError::GitLab(e) => e.retry_after(),
            ForgeError::Linear(e) => e.retry_after(),
            ForgeError::Unsupported(_) => None,
        }
    }

    /// A merge refused because the head is no longer the sha it was decided for.
    pub fn head_changed(&self) -> bool {
        matches!(
            self,
            ForgeError::GitHub(aoctl_github::Error::HeadChanged { .. })
                | ForgeError::GitLab(aoctl_gitlab::Error::HeadChanged { .. })
        )
    }

    /// A merge refused because the change cannot be merged (protection, conflicts, a draft).
    pub fn not_mergeable(&self) -> bool {
        matches!(
            self,
            ForgeError::GitHub(aoctl_github::Error::NotMergeable { .. })
                | ForgeError::GitLab(aoctl_gitlab::Error::NotMergeable { .. })
        )
    }
}
