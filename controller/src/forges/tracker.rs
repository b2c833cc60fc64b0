//! A project's tracker — for now its forge's issues — as the session reconciler (a session's
//! `spec.issue`) and the IssueSource reconciler (its query) read it.

use aoctl_api::issuesource::IssueSourceSpec;
use aoctl_scm::{Issue, IssueList, IssueStateFilter};

use super::{Forge, ForgeError};

/// Where a project's issues live.
#[derive(Clone, Debug)]
pub enum Tracker {
    /// The issues of the project's GitHub repository.
    Forge(Forge),
}

/// The number in an issue reference: `42`, `#42`, or a tracker's `KEY-42`.
pub fn issue_number(reference: &str) -> Option<u64> {
    let r = reference.trim().trim_start_matches('#');
    let digits = r.rsplit_once('-').map_or(r, |(_, n)| n);
    digits.parse().ok()
}

impl Tracker {
    /// The tracker's name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Tracker::Forge(f) => f.name(),
        }
    }

    /// What identifies the tracker and its scope in caches.
    pub fn describe(&self) -> String {
        match self {
            Tracker::Forge(f) => f.describe(),
        }
    }

    /// The line of a change's description that closes the issue when the change merges.
    pub fn closing_line(&self, reference: &str) -> String {
        match self {
            Tracker::Forge(_) => format!("Closes #{}", reference.trim().trim_start_matches('#')),
        }
    }

    /// One issue by reference.
    pub async fn issue(&self, reference: &str) -> Result<Issue, ForgeError> {
        let bad = || ForgeError::Unsupported(format!("`{reference}` is not an issue reference of {}", self.name()));
        match self {
            Tracker::Forge(Forge::GitHub { client, owner, repo }) => {
                let n: u64 = reference.trim().trim_start_matches('#').parse().map_err(|_| bad())?;
                Ok(client.issue(owner, repo, n).await?)
            }
        }
    }

    /// The open issues an IssueSource's query selects, newest first.
    pub async fn list(&self, q: &IssueSourceSpec) -> Result<IssueList, ForgeError> {
        match self {
            Tracker::Forge(Forge::GitHub { client, owner, repo }) => {
                Ok(client.list_issues(owner, repo, &q.github.labels, IssueStateFilter::Open).await?)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_of_references() {
        assert_eq!(issue_number("42"), Some(42));
        assert_eq!(issue_number("#42"), Some(42));
        assert_eq!(issue_number("ENG-42"), Some(42));
        assert_eq!(issue_number("ENG-"), None);
        assert_eq!(issue_number("x"), None);
    }
}
