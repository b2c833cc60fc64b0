//! The one error of every forge and tracker call: which service, what went wrong, and the
//! service's own words for it (GitHub's `message` and `errors`, GitLab's `message`, Linear's
//! GraphQL errors), with the condition reason each maps to.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// The service a client speaks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Service {
    GitHub,
    GitLab,
    Linear,
}

impl Service {
    /// The service's name, for messages and metric labels' values.
    pub fn name(self) -> &'static str {
        match self {
            Service::GitHub => "GitHub",
            Service::GitLab => "GitLab",
            Service::Linear => "Linear",
        }
    }

    /// The lower-case name, for metric labels.
    pub fn label(self) -> &'static str {
        match self {
            Service::GitHub => "github",
            Service::GitLab => "gitlab",
            Service::Linear => "linear",
        }
    }

    /// How this service names a change under review with its number: `pull request #7` or
    /// `merge request !7`.
    pub fn change(self, number: u64) -> String {
        match self {
            Service::GitLab => format!("merge request !{number}"),
            _ => format!("pull request #{number}"),
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What went wrong, whichever service said it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A rate limit is spent (the primary window, or a secondary limit when `secondary`); nothing
    /// is sent before `reset_at`.
    RateLimited { reset_at: DateTime<Utc>, secondary: bool },
    /// A 5xx answer, a timeout or a broken connection; the same call may succeed later.
    Transient { message: String },
    /// 401: the token is missing, wrong, expired or revoked.
    Unauthorized { message: String },
    /// 403 that is not a rate limit: the token may not do this.
    Forbidden { endpoint: &'static str, message: String },
    /// 404 (or 410): the object does not exist or is not visible to the token.
    NotFound { what: String },
    /// A merge refused: protection, failing checks, conflicts, a draft, not open.
    NotMergeable { number: u64, message: String },
    /// A merge refused because the head moved since `sha` was observed.
    HeadChanged { number: u64, sha: String, message: String },
    /// 422 or another 4xx: the request itself was refused; `detail` holds the service's reasons.
    Rejected { endpoint: &'static str, status: u16, message: String },
    /// The answer did not have the documented shape.
    Decode { endpoint: &'static str, message: String },
    /// The API URL or a name cannot be used to build a request.
    Invalid { message: String },
}

/// The error of one forge or tracker call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Error {
    pub service: Service,
    pub kind: ErrorKind,
    /// The service's own reasons beyond its message (GitHub's `errors`, GitLab's list of
    /// messages), in its words; empty when it gave none.
    pub detail: Vec<String>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.service;
        match &self.kind {
            ErrorKind::RateLimited { reset_at, secondary: false } => {
                write!(f, "{s} rate limit exhausted until {reset_at}")?
            }
            ErrorKind::RateLimited { reset_at, secondary: true } => {
                write!(f, "{s} secondary rate limit: calls wait until {reset_at}")?
            }
            ErrorKind::Transient { message } => write!(f, "{s} is unavailable: {message}")?,
            ErrorKind::Unauthorized { message } => write!(f, "{s} rejected the credentials: {message}")?,
            ErrorKind::Forbidden { endpoint, message } => write!(f, "{s} refused {endpoint}: {message}")?,
            ErrorKind::NotFound { what } => write!(f, "{s} has no {what}")?,
            ErrorKind::NotMergeable { number, message } => {
                write!(f, "{} cannot be merged: {message}", s.change(*number))?
            }
            ErrorKind::HeadChanged { number, sha, message } => {
                write!(f, "{} head is no longer {sha}: {message}", s.change(*number))?
            }
            ErrorKind::Rejected { endpoint, status, message } => {
                write!(f, "{s} rejected {endpoint} ({status}): {message}")?
            }
            ErrorKind::Decode { endpoint, message } => write!(f, "unexpected answer from {s} {endpoint}: {message}")?,
            ErrorKind::Invalid { message } => write!(f, "invalid {s} request: {message}")?,
        }
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail.join("; "))?;
        }
        Ok(())
    }
}

impl Error {
    pub fn new(service: Service, kind: ErrorKind) -> Error {
        Error { service, kind, detail: vec![] }
    }

    /// The same error with the service's own reasons.
    pub fn with_detail(mut self, detail: Vec<String>) -> Error {
        self.detail = detail;
        self
    }

    /// The CamelCase reason used in conditions and events.
    pub fn reason(&self) -> &'static str {
        use ErrorKind::*;
        use Service::*;
        match (&self.kind, self.service) {
            (NotMergeable { .. }, _) => "PullRequestNotMergeable",
            (HeadChanged { .. }, _) => "PullRequestHeadChanged",
            (RateLimited { .. }, GitHub) => "GitHubRateLimited",
            (RateLimited { .. }, GitLab) => "GitLabRateLimited",
            (RateLimited { .. }, Linear) => "LinearRateLimited",
            (Transient { .. }, GitHub) => "GitHubUnavailable",
            (Transient { .. }, GitLab) => "GitLabUnavailable",
            (Transient { .. }, Linear) => "LinearUnavailable",
            (Unauthorized { .. }, GitHub) => "GitHubUnauthorized",
            (Unauthorized { .. }, GitLab) => "GitLabUnauthorized",
            (Unauthorized { .. }, Linear) => "LinearUnauthorized",
            (Forbidden { .. }, GitHub) => "GitHubForbidden",
            (Forbidden { .. }, GitLab) => "GitLabForbidden",
            (Forbidden { .. }, Linear) => "LinearForbidden",
            (NotFound { .. }, GitHub) => "GitHubNotFound",
            (NotFound { .. }, GitLab) => "GitLabNotFound",
            (NotFound { .. }, Linear) => "LinearNotFound",
            (Rejected { .. }, GitHub) => "GitHubRequestRejected",
            (Rejected { .. }, GitLab) => "GitLabRequestRejected",
            (Rejected { .. }, Linear) => "LinearRequestRejected",
            (Decode { .. }, GitHub) => "GitHubBadResponse",
            (Decode { .. }, GitLab) => "GitLabBadResponse",
            (Decode { .. }, Linear) => "LinearBadResponse",
            (Invalid { .. }, GitHub) => "GitHubRequestInvalid",
            (Invalid { .. }, GitLab) => "GitLabRequestInvalid",
            (Invalid { .. }, Linear) => "LinearRequestInvalid",
        }
    }

    /// Whether the same call may succeed later without anything else changing.
    pub fn is_transient(&self) -> bool {
        matches!(self.kind, ErrorKind::RateLimited { .. } | ErrorKind::Transient { .. })
    }

    /// How long to wait before trying again, for a rate limit.
    pub fn retry_after(&self) -> Option<Duration> {
        match self.kind {
            ErrorKind::RateLimited { reset_at, .. } => Some((reset_at - Utc::now()).to_std().unwrap_or(Duration::ZERO)),
            _ => None,
        }
    }

    /// A merge refused because the head is no longer the sha it was decided for.
    pub fn head_changed(&self) -> bool {
        matches!(self.kind, ErrorKind::HeadChanged { .. })
    }

    /// A merge refused because the change cannot be merged.
    pub fn not_mergeable(&self) -> bool {
        matches!(self.kind, ErrorKind::NotMergeable { .. })
    }

    /// The service's message and reasons as one line, for a person: what it said, not what we
    /// made of it (`Unprocessable Entity: Can not approve your own pull request`).
    pub fn service_said(&self) -> String {
        let message = match &self.kind {
            ErrorKind::Transient { message }
            | ErrorKind::Unauthorized { message }
            | ErrorKind::Forbidden { message, .. }
            | ErrorKind::NotMergeable { message, .. }
            | ErrorKind::HeadChanged { message, .. }
            | ErrorKind::Rejected { message, .. }
            | ErrorKind::Decode { message, .. }
            | ErrorKind::Invalid { message } => message.clone(),
            ErrorKind::NotFound { what } => format!("no {what}"),
            ErrorKind::RateLimited { .. } => self.to_string(),
        };
        match self.detail.is_empty() {
            true => message,
            false => format!("{message}: {}", self.detail.join("; ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_and_messages_name_the_service_and_keep_its_words() {
        let e = Error::new(
            Service::GitHub,
            ErrorKind::Rejected {
                endpoint: "POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews",
                status: 422,
                message: "Unprocessable Entity".into(),
            },
        )
        .with_detail(vec!["Can not approve your own pull request".into()]);
        assert_eq!(e.reason(), "GitHubRequestRejected");
        assert!(e.to_string().ends_with("(Can not approve your own pull request)"), "{e}");
        assert_eq!(e.service_said(), "Unprocessable Entity: Can not approve your own pull request");
        let merge = Error::new(Service::GitLab, ErrorKind::NotMergeable { number: 7, message: "draft".into() });
        assert_eq!(merge.to_string(), "merge request !7 cannot be merged: draft");
        assert_eq!(merge.reason(), "PullRequestNotMergeable");
        assert!(merge.not_mergeable() && !merge.is_transient());
        let limited = Error::new(Service::Linear, ErrorKind::RateLimited { reset_at: Utc::now(), secondary: false });
        assert!(limited.is_transient() && limited.retry_after().is_some());
        assert_eq!(limited.reason(), "LinearRateLimited");
    }
}
