//! What an etcd error means for a write: refused for good (nothing was applied), never sent (the
//! member it went to does not take connections: another may), or perhaps applied (the answer
//! was lost, or the cluster is electing a leader), and the store error a client gets for it.

use aoctl_store::StoreError;
use etcd_client::Error;

/// An etcd request that failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// etcd refused the request, so nothing of it was applied; the error says why.
    Refused(StoreError),
    /// The request did not leave: no connection to the member it was sent to.
    NotSent(String),
    /// No answer came: the request may or may not have been applied.
    Unknown(String),
}

/// gRPC status codes (they are fixed by the gRPC protocol).
mod code {
    pub(super) const NOT_FOUND: i32 = 5;
    pub(super) const INVALID_ARGUMENT: i32 = 3;
    pub(super) const ALREADY_EXISTS: i32 = 6;
    pub(super) const PERMISSION_DENIED: i32 = 7;
    pub(super) const RESOURCE_EXHAUSTED: i32 = 8;
    pub(super) const FAILED_PRECONDITION: i32 = 9;
    pub(super) const OUT_OF_RANGE: i32 = 11;
    pub(super) const UNIMPLEMENTED: i32 = 12;
    pub(super) const UNAVAILABLE: i32 = 14;
    pub(super) const UNAUTHENTICATED: i32 = 16;
}

/// What a failed request means.
pub(crate) fn classify(e: &Error) -> Failure {
    let Error::GRpcStatus(status) = e else {
        return match e {
            Error::InvalidArgs(_) | Error::InvalidUri(_) | Error::Utf8Error(_) | Error::InvalidMetadataValue(_) => {
                Failure::Refused(StoreError::Storage(format!("etcd: {e}")))
            }
            _ => Failure::Unknown(e.to_string()),
        };
    };
    let message = status.message();
    let lower = message.to_ascii_lowercase();
    if i32::from(status.code()) == code::UNAVAILABLE
        && (lower.contains("connect error")
            || lower.contains("connection refused")
            || lower.contains("trying to connect"))
    {
        return Failure::NotSent(format!("etcd: {message}"));
    }
    match i32::from(status.code()) {
        code::INVALID_ARGUMENT if message.contains("too many operations") => Failure::Refused(StoreError::Storage(
            "the write needs more operations in one etcd transaction than the cluster allows (etcd's \
             --max-txn-ops, 128 by default)"
                .into(),
        )),
        code::INVALID_ARGUMENT if message.contains("too large") => Failure::Refused(StoreError::Storage(
            "the write is larger than one etcd request may be (etcd's --max-request-bytes, 1.5 MiB by default)".into(),
        )),
        code::RESOURCE_EXHAUSTED if message.contains("space exceeded") => Failure::Refused(
            StoreError::InsufficientStorage(format!("etcd's database is full ({message}); the write was not stored")),
        ),
        code::INVALID_ARGUMENT
        | code::NOT_FOUND
        | code::ALREADY_EXISTS
        | code::PERMISSION_DENIED
        | code::FAILED_PRECONDITION
        | code::OUT_OF_RANGE
        | code::UNIMPLEMENTED
        | code::UNAUTHENTICATED => Failure::Refused(StoreError::Storage(format!("etcd refused the write: {message}"))),
        // Unavailable, deadline exceeded, aborted, internal, unknown: perhaps applied.
        _ => Failure::Unknown(format!("etcd: {message}")),
    }
}

/// The error of a write that could not reach etcd in time.
pub(crate) fn unavailable(why: &str) -> StoreError {
    StoreError::Unavailable(format!("etcd is unreachable: {why}"))
}
