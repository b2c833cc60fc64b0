//! The GitLab side of closing the loop: find or open each session's merge request, read its
//! pipeline, approvals, reviewers and discussions (with each author's access level, from the
//! project's members), fetch the tail of a failing job's log, retry a
//! job, merge guarded by the head sha, read and list project issues, and make sense of webhook
//! deliveries.
//!
//! Every request goes through the shared HTTP core (`aoctl-forge-core`) and the budget of its
//! token: GETs are conditional on the ETag GitLab sent (the job trace, which GitLab never
//! answers with one, is read once per job by the controller), calls are held back near the end
//! of the `RateLimit-*` window and after a 429, and each request is counted by endpoint template,
//! status code and project for the controller's metrics. This crate does no IO other than HTTP
//! to the configured API URL.
mod client;
mod issues;
mod levels;
mod members;
mod merge_requests;
mod pipelines;
mod reviews;
pub mod webhook;

pub use aoctl_forge_core::{Budget, Error, ErrorKind};
pub use client::{Client, DEFAULT_API_URL};
pub use pipelines::GITLAB_CI;
