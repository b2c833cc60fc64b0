//! The errors of the store, with the HTTP status codes and Kubernetes reasons they map to.

use aoctl_api::Kind;

/// What went wrong in a store operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No object of this kind has this name.
    #[error("{} \"{name}\" not found", kind.plural())]
    NotFound { kind: Kind, name: String },
    /// An object of this kind already has this name.
    #[error("{} \"{name}\" already exists", kind.plural())]
    AlreadyExists { kind: Kind, name: String },
    /// A resourceVersion precondition failed.
    #[error("Operation cannot be fulfilled on {} \"{name}\": {message}", kind.plural())]
    Conflict { kind: Kind, name: String, message: String },
    /// Changes after `from` were compacted away; the client must list again.
    #[error("too old resource version: {from} ({oldest})")]
    Gone { from: u64, oldest: u64 },
    /// The request itself is malformed.
    #[error("{message}")]
    Invalid { message: String },
    /// The disk is full (or the file may grow no more): nothing was written.
    #[error("insufficient storage: {0}")]
    InsufficientStorage(String),
    /// The disk failed otherwise, or the database is being reopened after a failure.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// The database or the encoding failed.
    #[error("storage error: {0}")]
    Storage(String),
}

/// The message of a failed resourceVersion precondition, worded as Kubernetes words it.
pub const CONFLICT_MESSAGE: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

impl StoreError {
    /// The HTTP status code this error maps to.
    pub fn code(&self) -> u16 {
        match self {
            StoreError::NotFound { .. } => 404,
            StoreError::AlreadyExists { .. } | StoreError::Conflict { .. } => 409,
            StoreError::Gone { .. } => 410,
            StoreError::Invalid { .. } => 422,
            StoreError::InsufficientStorage(_) => 507,
            StoreError::Unavailable(_) => 503,
            StoreError::Storage(_) => 500,
        }
    }

    /// The Kubernetes `Status.reason` of this error.
    pub fn reason(&self) -> &'static str {
        match self {
            StoreError::NotFound { .. } => "NotFound",
            StoreError::AlreadyExists { .. } => "AlreadyExists",
            StoreError::Conflict { .. } => "Conflict",
            StoreError::Gone { .. } => "Expired",
            StoreError::Invalid { .. } => "Invalid",
            StoreError::InsufficientStorage(_) => "InsufficientStorage",
            StoreError::Unavailable(_) => "ServiceUnavailable",
            StoreError::Storage(_) => "InternalError",
        }
    }

    /// Whether retrying the same operation (after reading the object again) may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::Conflict { .. }
                | StoreError::InsufficientStorage(_)
                | StoreError::Unavailable(_)
                | StoreError::Storage(_)
        )
    }

    /// Whether the disk refused the write: the store takes no writes until it can write again.
    pub fn is_disk(&self) -> bool {
        matches!(self, StoreError::InsufficientStorage(_) | StoreError::Unavailable(_))
    }

    /// Whether this is a `NotFound`.
    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound { .. })
    }

    /// Whether this is a `Conflict`.
    pub fn is_conflict(&self) -> bool {
        matches!(self, StoreError::Conflict { .. })
    }

    /// The conflict error for a stale resourceVersion of `kind`/`name`.
    pub fn conflict(kind: Kind, name: &str) -> StoreError {
        StoreError::Conflict { kind, name: name.to_string(), message: CONFLICT_MESSAGE.to_string() }
    }

    pub(crate) fn not_found(kind: Kind, name: &str) -> StoreError {
        StoreError::NotFound { kind, name: name.to_string() }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> StoreError {
        StoreError::Invalid { message: message.into() }
    }
}

impl From<sled::Error> for StoreError {
    fn from(e: sled::Error) -> StoreError {
        use std::io::ErrorKind;
        match &e {
            sled::Error::Io(io) if io.kind() == ErrorKind::StorageFull => {
                StoreError::InsufficientStorage("no space left on the store's disk".into())
            }
            sled::Error::Io(io) if io.kind() == ErrorKind::QuotaExceeded => {
                StoreError::InsufficientStorage("the disk quota of the store is exceeded".into())
            }
            sled::Error::Io(io) if io.kind() == ErrorKind::FileTooLarge => {
                StoreError::InsufficientStorage("the store's database file may not grow larger".into())
            }
            sled::Error::Io(io) => StoreError::Unavailable(format!("the store's disk failed: {io}")),
            _ => StoreError::Storage(e.to_string()),
        }
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> StoreError {
        StoreError::Storage(e.to_string())
    }
}

impl<E: std::fmt::Debug> From<sled::transaction::TransactionError<E>> for StoreError {
    fn from(e: sled::transaction::TransactionError<E>) -> StoreError {
        match e {
            sled::transaction::TransactionError::Storage(e) => StoreError::from(e),
            sled::transaction::TransactionError::Abort(e) => StoreError::Storage(format!("transaction aborted: {e:?}")),
        }
    }
}
