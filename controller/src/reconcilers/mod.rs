//! The reconcilers: each looks at the whole object, drives the world toward its spec and writes
//! status. None is told why it runs, so each is idempotent.

pub(crate) mod gitsource;
pub(crate) mod issuesource;
mod orchestrator;
mod pool;
pub(crate) mod project;
pub(crate) mod session;

use std::path::PathBuf;

/// Errors of reconcilers.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error(transparent)]
    Store(#[from] aoctl_store::StoreError),
    #[error(transparent)]
    Runtime(#[from] aoctl_runtimes::RuntimeError),
    #[error(transparent)]
    Workspace(#[from] aoctl_git::workspace::WorkspaceError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("background task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error(transparent)]
    Git(#[from] aoctl_git::repository::GitError),
    #[error(transparent)]
    Forge(#[from] crate::forges::ForgeError),
}

impl From<crate::typing::TypingError> for Error {
    fn from(e: crate::typing::TypingError) -> Error {
        use crate::typing::TypingError as T;
        match e {
            T::Runtime(e) => Error::Runtime(e),
            T::Files(e) => e.into(),
        }
    }
}

impl From<aoctl_runtimes::session_files::FilesError> for Error {
    fn from(e: aoctl_runtimes::session_files::FilesError) -> Error {
        use aoctl_runtimes::session_files::FilesError as F;
        match e {
            F::Io { path, source } => Error::Io { path, source },
            F::Corrupt { path, source } => Error::Io { path, source: std::io::Error::other(source) },
        }
    }
}

impl Error {
    /// Label for metrics and logs.
    pub(crate) fn metric_label(&self) -> &'static str {
        match self {
            Error::Store(_) => "store",
            Error::Runtime(_) => "runtime",
            Error::Workspace(_) => "workspace",
            Error::Io { .. } => "io",
            Error::Join(_) => "join",
            Error::Git(_) => "git",
            Error::Forge(_) => "forge",
        }
    }
}

/// The memory the session and IssueSource reconcilers share with the webhook handlers.
pub(crate) struct Memory {
    pub sessions: std::sync::Arc<session::State>,
    pub sources: std::sync::Arc<issuesource::State>,
}

impl crate::wakeups::Wakeups for Memory {
    fn session_heard(&self, session: &str) {
        self.sessions.webhook_arrived(session);
    }

    fn source_heard(&self, source: &str) {
        self.sources.poll_now(source);
    }
}
