//! The Linear side of the backlog: one issue by its identifier (`ENG-42`), and the issues of a
//! team that have labels and are in chosen workflow states, over Linear's GraphQL API; and the
//! `Linear-Signature` check of webhook deliveries.
//!
//! Every request goes through the shared HTTP core (`aoctl-forge-core`) and the budget of its
//! API key: calls are held back near the end of the `X-RateLimit-Requests-*` window and after a
//! `RATELIMITED` error, and each request is counted by operation, status code and project.
//! GraphQL answers carry no ETag, so
//! whether a list changed is told by comparing the answer with the last one. This crate does no
//! IO other than HTTP to the configured API URL.
mod client;
mod issues;
pub mod webhook;

pub use aoctl_forge_core::{Budget, Error, ErrorKind};
pub use client::{Client, DEFAULT_API_URL};
pub use issues::{IssueQuery, OPEN_STATE_TYPES};
