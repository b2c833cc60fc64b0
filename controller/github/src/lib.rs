//! The GitHub side of closing the loop: find or open each session's pull request, read its checks
//! and reviews, fetch the tail of a failing job's log, merge, post reviews, read and list tracker
//! issues, read a repository's open pull requests in one GraphQL query, and make sense of webhook
//! deliveries.
//!
//! Every request goes through the shared HTTP core (`aoctl-forge-core`) and the budget of its
//! token: GETs are conditional (a 304 answers from the cache and costs no rate limit), calls are
//! held back near the end of a rate-limit window and after secondary limits, and each request is
//! counted by endpoint template, status code and project for the controller's metrics. This
//! crate does no IO other than HTTP to the configured API URL.
mod checks;
mod client;
mod issues;
mod open_pulls;
mod permissions;
mod pulls;
mod reviews;
pub mod webhook;

pub use aoctl_forge_core::{Budget, BudgetKey, Error, ErrorKind, Observer, RequestRecord, Stats};
pub use aoctl_forge_types::{
    flaky_cause, CheckKind, Checks, FailingCheck, Issue, IssueList, IssueStateFilter, MergeMethod, NewComment,
    PullRequest, Review, ReviewComment, ReviewEvent, Reviews, Standing,
};
pub use checks::ACTIONS_APP;
pub use client::{graphql_url, Client, DEFAULT_API_URL};
pub use open_pulls::OpenPull;
