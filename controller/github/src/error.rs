//! The errors of GitHub operations, with the condition reasons they map to.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// What went wrong talking to GitHub.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The rate limit (primary or secondary) is spent; nothing is sent before `reset_at`.
    #[error("GitHub rate limit exhausted until {reset_at}")]
    RateLimited { reset_at: DateTime<Utc> },
    /// A 5xx answer, a timeout or a broken connection; the same call may succeed later.
    #[error("GitHub is unavailable: {message}")]
    Transient { message: String },
    /// 401: the token is missing, wrong or expired.
    #[error("GitHub rejected the credentials: {message}")]
    Unauthorized { message: String },
    /// 403 that is not a rate limit: the token may not do this.
    #[error("GitHub refused {endpoint}: {message}")]
    Forbidden { endpoint: &'static str, message: String },
    /// 404 (or 410): the repository, pull request or issue does not exist or is not visible.
    #[error("GitHub has no {what}")]
    NotFound { what: String },
    /// 405 on merge: branch protection, failing checks, conflicts or a draft.
    #[error("pull request #{number} cannot be merged: {message}")]
    NotMergeable { number: u64, message: String },
    /// 409 on merge: the head moved since `sha` was observed.
    #[error("pull request #{number} head is no longer {sha}: {message}")]
    HeadChanged { number: u64, sha: String, message: String },
    /// 422 or another 4xx: the request itself is wrong (e.g. the pull request already exists).
    #[error("GitHub rejected {endpoint} ({status}): {message}")]
    Rejected { endpoint: &'static str, status: u16, message: String },
    /// The answer did not have the documented shape.
    #[error("unexpected answer from {endpoint}: {message}")]
    Decode { endpoint: &'static str, message: String },
    /// The API URL, an owner, repository or branch cannot be used to build a request.
    #[error("invalid GitHub request: {message}")]
    Invalid { message: String },
}

impl Error {
    /// The CamelCase reason used in conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::RateLimited { .. } => "GitHubRateLimited",
            Error::Transient { .. } => "GitHubUnavailable",
            Error::Unauthorized { .. } => "GitHubUnauthorized",
            Error::Forbidden { .. } => "GitHubForbidden",
            Error::NotFound { .. } => "GitHubNotFound",
            Error::NotMergeable { .. } => "PullRequestNotMergeable",
            Error::HeadChanged { .. } => "PullRequestHeadChanged",
            Error::Rejected { .. } => "GitHubRequestRejected",
            Error::Decode { .. } => "GitHubBadResponse",
            Error::Invalid { .. } => "GitHubRequestInvalid",
        }
    }

    /// Whether the same call may succeed later without anything else changing.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::RateLimited { .. } | Error::Transient { .. })
    }

    /// How long to wait before trying again, for a rate limit.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::RateLimited { reset_at } => Some((*reset_at - Utc::now()).to_std().unwrap_or(Duration::ZERO)),
            _ => None,
        }
    }

    pub(crate) fn transient(message: impl Into<String>) -> Error {
        Error::Transient { message: message.into() }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::Invalid { message: message.into() }
    }

    pub(crate) fn decode(endpoint: &'static str, message: impl std::fmt::Display) -> Error {
        Error::Decode { endpoint, message: message.to_string() }
    }
}
