//! The errors of Linear operations, with the condition reasons they map to.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// What went wrong talking to Linear.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `RATELIMITED`, or the request window is spent; nothing is sent before `reset_at`.
    #[error("Linear rate limit exhausted until {reset_at}")]
    RateLimited { reset_at: DateTime<Utc> },
    /// A 5xx answer, a timeout or a broken connection; the same call may succeed later.
    #[error("Linear is unavailable: {message}")]
    Transient { message: String },
    /// The API key is missing, wrong or revoked.
    #[error("Linear rejected the credentials: {message}")]
    Unauthorized { message: String },
    /// The key may not read this.
    #[error("Linear refused {operation}: {message}")]
    Forbidden { operation: &'static str, message: String },
    /// No such issue or team, or not visible to the key.
    #[error("Linear has no {what}")]
    NotFound { what: String },
    /// Linear refused the query or its variables.
    #[error("Linear rejected {operation}: {message}")]
    Rejected { operation: &'static str, message: String },
    /// The answer did not have the documented shape.
    #[error("unexpected answer to {operation}: {message}")]
    Decode { operation: &'static str, message: String },
    /// The API URL, a team key or identifier cannot be used to build a request.
    #[error("invalid Linear request: {message}")]
    Invalid { message: String },
}

impl Error {
    /// The CamelCase reason used in conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::RateLimited { .. } => "LinearRateLimited",
            Error::Transient { .. } => "LinearUnavailable",
            Error::Unauthorized { .. } => "LinearUnauthorized",
            Error::Forbidden { .. } => "LinearForbidden",
            Error::NotFound { .. } => "LinearNotFound",
            Error::Rejected { .. } => "LinearRequestRejected",
            Error::Decode { .. } => "LinearBadResponse",
            Error::Invalid { .. } => "LinearRequestInvalid",
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

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::Invalid { message: message.into() }
    }
}
