//! The CI state of a commit, whichever forge reported it: one combined state and the checks
//! (check runs, commit statuses, pipeline jobs) that failed.

use aoctl_api::session::ChecksState;

/// The combined CI state of a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checks {
    pub state: ChecksState,
    pub failing: Vec<FailingCheck>,
}

impl Checks {
    /// Identifies this set of failures, so a reaction fires once per distinct failure.
    pub fn fingerprint(&self) -> String {
        let mut parts: Vec<String> = self.failing.iter().map(|f| format!("{}#{}", f.name, f.id)).collect();
        parts.sort();
        parts.join(",")
    }
}

/// Where a failing check comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CheckKind {
    /// A check run (GitHub Actions or another app).
    CheckRun,
    /// A commit status (the older statuses API).
    Status,
}

/// One check that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailingCheck {
    /// The check run's name, or the status's context.
    pub name: String,
    /// The check run id (a job id for Actions), or the status id.
    pub id: u64,
    pub details_url: Option<String>,
    pub kind: CheckKind,
    /// `failure`, `timed_out`, `cancelled`, `action_required`, `startup_failure` or `error`.
    pub conclusion: String,
    /// The app that made a check run (`github-actions`); `None` for statuses.
    pub app: Option<String>,
}
