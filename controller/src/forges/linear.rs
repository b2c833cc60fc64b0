//! Linear as a project's tracker: the issues of any team its key can read.

use std::sync::Arc;

use aoctl_api::issuesource::IssueSourceSpec;
use aoctl_forge_types::{Issue, IssueList};

use super::tracker::mismatch;
use super::{ForgeError, Tracker};

/// Linear's issues, read with one key.
#[derive(Clone, Debug)]
pub(crate) struct Linear {
    pub client: aoctl_linear::Client,
}

#[async_trait::async_trait]
impl Tracker for Linear {
    fn name(&self) -> &'static str {
        "Linear"
    }

    fn budget(&self) -> &Arc<aoctl_forge_core::Budget> {
        self.client.budget()
    }

    fn describe(&self) -> String {
        self.client.api_url().to_string()
    }

    /// Linear's magic word before the identifier.
    fn closing_line(&self, reference: &str) -> String {
        format!("Closes {}", reference.trim())
    }

    async fn issue(&self, reference: &str) -> Result<Issue, ForgeError> {
        if reference.trim().trim_start_matches('#').bytes().all(|b| b.is_ascii_digit()) {
            return Err(ForgeError::Unsupported(format!("`{reference}` is not an issue reference of Linear")));
        }
        Ok(self.client.issue(reference).await?)
    }

    async fn list(&self, q: &IssueSourceSpec) -> Result<IssueList, ForgeError> {
        let Some(l) = &q.linear else {
            return Err(mismatch(self.name(), if q.gitlab.is_some() { "GitLab" } else { "GitHub" }));
        };
        let query =
            aoctl_linear::IssueQuery { team: l.team.clone(), labels: l.labels.clone(), states: l.states.clone() };
        Ok(self.client.list_issues(&query).await?)
    }
}
