//! What an etcd error means for a write: refused for good (nothing was applied), never sent (no
//! member took the connection: one may on the next try), or perhaps applied (the answer was lost,
//! or the cluster is electing a leader), and the store error a client gets for it.

use aoctl_store::StoreError;

use crate::client::Error;
use crate::wire::code;

/// An etcd request that failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// etcd refused the request, so nothing of it was applied; the error says why.
    Refused(StoreError),
    /// The request did not leave: no connection to a member it was sent to.
    NotSent(String),
    /// No answer came: the request may or may not have been applied.
    Unknown(String),
}

/// What a failed request means.
pub(crate) fn classify(e: &Error) -> Failure {
    let (status, message) = match e {
        Error::Status { code, message } => (*code, message.as_str()),
        Error::Connect(_) => return Failure::NotSent(format!("etcd: {e}")),
        Error::Invalid(_) => return Failure::Refused(StoreError::Storage(format!("etcd: {e}"))),
        Error::Timeout(_) | Error::Transport(_) => return Failure::Unknown(format!("etcd: {e}")),
    };
    let lower = message.to_ascii_lowercase();
    // The gateway could not reach its own member's gRPC server: the request never got to etcd.
    if status == code::UNAVAILABLE
        && (lower.contains("connect error")
            || lower.contains("connection refused")
            || lower.contains("trying to connect"))
    {
        return Failure::NotSent(format!("etcd: {message}"));
    }
    match status {
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
