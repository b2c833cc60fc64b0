//! The GitLab side of closing the loop: find or open each session's merge request, read its
//! pipeline, approvals, reviewers and discussions, fetch the tail of a failing job's log, retry a
//! job, merge guarded by the head sha, read and list project issues, and make sense of webhook
//! deliveries.
//!
//! Every request goes through a [`Budget`] shared by all clients of one token: GETs are
//! conditional on the ETag GitLab sent, calls are held back near the end of the
//! `RateLimit-*` window and after a 429, and each request is counted by endpoint template and
//! status code for the controller's metrics. This crate does no IO other than HTTP to the
//! configured API URL.
mod client;
mod error;
mod issues;
mod merge_requests;
mod pipelines;
mod reviews;
pub mod webhook;

pub use aoctl_scm::Budget;
pub use client::{Client, DEFAULT_API_URL};
pub use error::Error;
pub use pipelines::GITLAB_CI;
