//! The GitHub side of closing the loop: find or open each session's pull request, read its checks
//! and reviews, fetch the tail of a failing job's log, merge, read and list tracker issues, and
//! make sense of webhook deliveries.
//!
//! Every request goes through a [`Budget`] shared by all clients of one token: GETs are
//! conditional (a 304 answers from the cache and costs no rate limit), calls are held back near
//! the end of the rate-limit window and after secondary limits, and each request is counted by
//! endpoint template and status code for the controller's metrics. This crate does no IO other
//! than HTTP to the configured API URL.
mod checks;
mod client;
mod error;
mod issues;
mod pulls;
mod reviews;
pub mod webhook;

pub use aoctl_scm::{
    flaky_cause, Budget, BudgetKey, CheckKind, Checks, FailingCheck, Issue, IssueList, IssueStateFilter, MergeMethod,
    NewComment, Observer, PullRequest, RequestRecord, Review, ReviewComment, ReviewEvent, Reviews, Stats,
};
pub use checks::ACTIONS_APP;
pub use client::{Client, DEFAULT_API_URL};
pub use error::Error;
