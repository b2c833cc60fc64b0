//! The one HTTP core every forge and tracker client sends through: a [`Core`] per client holds
//! the service, its API URL, a [`Transport`] (octocrab for GitHub's REST and GraphQL APIs, reqwest
//! for GitLab and Linear), and the [`Budget`] shared by every client of one API URL and token —
//! rate-limit windows per resource, blocks after `Retry-After` and secondary limits, the ETag
//! cache that makes reads conditional, request counters and what each project spent in the last
//! hour, from which the pace of polling follows. Every failure is one [`Error`] that keeps the
//! service's own words. Each client keeps only its endpoints and shapes. The token never appears
//! in a log line or a `Debug` output; no IO but HTTP to the configured API URL.
mod budget;
mod core;
mod error;
mod kept;
mod transport;

pub use budget::{
    epoch, header_u64, Budget, BudgetKey, Cached, Observer, RequestRecord, Stats, Window, CORE, DEFAULT_FLOOR, MAX_PACE,
};
pub use core::{api_url, escape, next_page, rate_limited, service_message, Call, Core, Cost, Read, Reply, Settings};
pub use error::{Error, ErrorKind, Service};
pub use kept::Kept;
pub use transport::{Body, Reqwest, Transport, TransportError};
