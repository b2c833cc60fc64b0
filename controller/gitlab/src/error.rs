//! The errors of GitLab operations, with the condition reasons they map to.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// What went wrong talking to GitLab.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A 429, or the `RateLimit-*` window is spent; nothing is sent before `reset_at`.
    #[error("GitLab rate limit exhausted until {reset_at}")]
    RateLimited { reset_at: DateTime<Utc> },
    /// A 5xx answer, a timeout or a broken connection; the same call may succeed later.
    #[error("GitLab is unavailable: {message}")]
    Transient { message: String },
    /// 401: the token is missing, wrong, expired or revoked.
    #[error("GitLab rejected the credentials: {message}")]
    Unauthorized { message: String },
    /// 403: the token may not do this.
    #[error("GitLab refused {endpoint}: {message}")]
    Forbidden { endpoint: &'static str, message: String },
    /// 404: the project, merge request, job or issue does not exist or is not visible.
    #[error("GitLab has no {what}")]
    NotFound { what: String },
    /// 405, 406 or 422 on merge: not open, a draft, not approved, a failing pipeline or conflicts.
    #[error("merge request !{iid} cannot be merged: {message}")]
    NotMergeable { iid: u64, message: String },
    /// 409 on merge: the source branch moved since `sha` was observed.
    #[error("merge request !{iid} head is no longer {sha}: {message}")]
    HeadChanged { iid: u64, sha: String, message: String },
    /// Another 4xx: the request itself is wrong (e.g. the merge request already exists).
    #[error("GitLab rejected {endpoint} ({status}): {message}")]
    Rejected { endpoint: &'static str, status: u16, message: String },
    /// The answer did not have the documented shape.
    #[error("unexpected answer from {endpoint}: {message}")]
    Decode { endpoint: &'static str, message: String },
    /// The API URL, project path or branch cannot be used to build a request.
    #[error("invalid GitLab request: {message}")]
    Invalid { message: String },
}

impl Error {
    /// The CamelCase reason used in conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::RateLimited { .. } => "GitLabRateLimited",
            Error::Transient { .. } => "GitLabUnavailable",
            Error::Unauthorized { .. } => "GitLabUnauthorized",
            Error::Forbidden { .. } => "GitLabForbidden",
            Error::NotFound { .. } => "GitLabNotFound",
            Error::NotMergeable { .. } => "PullRequestNotMergeable",
            Error::HeadChanged { .. } => "PullRequestHeadChanged",
            Error::Rejected { .. } => "GitLabRequestRejected",
            Error::Decode { .. } => "GitLabBadResponse",
            Error::Invalid { .. } => "GitLabRequestInvalid",
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
