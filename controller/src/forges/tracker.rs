//! A project's tracker — its forge's issues, or Linear — as the session reconciler (a session's
//! `spec.issue`) and the IssueSource reconciler (its query) read it.

use aoctl_api::issuesource::IssueSourceSpec;
use aoctl_scm::{Issue, IssueList, IssueStateFilter};

use super::{Forge, ForgeError};

/// Where a project's issues live.
#[derive(Clone, Debug)]
pub enum Tracker {
    /// The issues of the project's GitHub repository or GitLab project.
    Forge(Forge),
    /// Linear's issues (any team the key can read).
    Linear(aoctl_linear::Client),
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
            Tracker::Linear(_) => "Linear",
        }
    }

    /// The budget of the token the tracker is read with.
    pub fn budget(&self) -> &std::sync::Arc<aoctl_forge_core::Budget> {
        match self {
            Tracker::Forge(f) => f.budget(),
            Tracker::Linear(c) => c.budget(),
        }
    }

    /// What identifies the tracker and its scope in caches.
    pub fn describe(&self) -> String {
        match self {
            Tracker::Forge(f) => f.describe(),
            Tracker::Linear(c) => c.api_url().to_string(),
        }
    }

    /// The line of a change's description that closes the issue when the change merges: the
    /// forges' `Closes #42`, Linear's magic word before the identifier.
    pub fn closing_line(&self, reference: &str) -> String {
        match self {
            Tracker::Forge(_) => format!("Closes #{}", reference.trim().trim_start_matches('#')),
            Tracker::Linear(_) => format!("Closes {}", reference.trim()),
        }
    }

    /// One issue by reference.
    pub async fn issue(&self, reference: &str) -> Result<Issue, ForgeError> {
        let bad = || ForgeError::Unsupported(format!("`{reference}` is not an issue reference of {}", self.name()));
        let number = || reference.trim().trim_start_matches('#').parse::<u64>().map_err(|_| bad());
        match self {
            Tracker::Forge(Forge::GitHub { client, owner, repo }) => Ok(client.issue(owner, repo, number()?).await?),
            Tracker::Forge(Forge::GitLab { client, project }) => Ok(client.issue(project, number()?).await?),
            Tracker::Linear(client) => {
                if reference.trim().trim_start_matches('#').bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                Ok(client.issue(reference).await?)
            }
        }
    }

    /// The open issues an IssueSource's query selects, newest first.
    pub async fn list(&self, q: &IssueSourceSpec) -> Result<IssueList, ForgeError> {
        let mismatch = |wanted: &str| {
            ForgeError::Unsupported(format!(
                "the project's issues are on {}, but the source queries {wanted}; set spec.{} instead",
                self.name(),
                self.name().to_ascii_lowercase()
            ))
        };
        match self {
            Tracker::Forge(Forge::GitHub { client, owner, repo }) => {
                if q.gitlab.is_some() || q.linear.is_some() {
                    return Err(mismatch(if q.gitlab.is_some() { "GitLab" } else { "Linear" }));
                }
                Ok(client.list_issues(owner, repo, &q.github.labels, IssueStateFilter::Open).await?)
            }
            Tracker::Forge(Forge::GitLab { client, project }) => {
                if q.linear.is_some() {
                    return Err(mismatch("Linear"));
                }
                if !q.github.labels.is_empty() {
                    return Err(mismatch("GitHub"));
                }
                let labels = q.gitlab.as_ref().map(|g| g.labels.clone()).unwrap_or_default();
                Ok(client.list_issues(project, &labels, IssueStateFilter::Open).await?)
            }
            Tracker::Linear(client) => {
                let Some(l) = &q.linear else {
                    return Err(mismatch(if q.gitlab.is_some() { "GitLab" } else { "GitHub" }));
                };
                let query = aoctl_linear::IssueQuery {
                    team: l.team.clone(),
                    labels: l.labels.clone(),
                    states: l.states.clone(),
                };
                Ok(client.list_issues(&query).await?)
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
