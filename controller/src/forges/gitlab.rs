//! GitLab as a project's forge and tracker: a project's merge requests, pipelines, notes and
//! issues through one [`aoctl_gitlab::Client`].

use std::sync::Arc;

use aoctl_api::issuesource::IssueSourceSpec;
use aoctl_api::session::ReviewState;
use aoctl_forge_types::{
    Checks, FailingCheck, Issue, IssueList, IssueStateFilter, LabelEvent, MergeMethod, NewComment, PullRequest, Review,
    ReviewComment, ReviewEvent, Reviews, Standing,
};

use super::tracker::{forge_issue_number, mismatch};
use super::{Forge, ForgeError, Tracker};

/// A project on GitLab (gitlab.com or self-managed).
#[derive(Clone, Debug)]
pub(crate) struct GitLab {
    pub client: aoctl_gitlab::Client,
    pub project: String,
}

#[async_trait::async_trait]
impl Tracker for GitLab {
    fn name(&self) -> &'static str {
        "GitLab"
    }

    fn budget(&self) -> &Arc<aoctl_forge_core::Budget> {
        self.client.budget()
    }

    fn describe(&self) -> String {
        format!("{} {}", self.client.api_url(), self.project)
    }

    fn forge(&self) -> Option<&dyn Forge> {
        Some(self)
    }

    async fn issue(&self, reference: &str) -> Result<Issue, ForgeError> {
        let number = forge_issue_number(self.name(), reference)?;
        Ok(self.client.issue(&self.project, number).await?)
    }

    async fn list(&self, q: &IssueSourceSpec) -> Result<IssueList, ForgeError> {
        if q.linear.is_some() {
            return Err(mismatch(self.name(), "Linear"));
        }
        if !q.github.labels.is_empty() {
            return Err(mismatch(self.name(), "GitHub"));
        }
        let labels = q.gitlab.as_ref().map(|g| g.labels.clone()).unwrap_or_default();
        Ok(self.client.list_issues(&self.project, &labels, IssueStateFilter::Open).await?)
    }
}

#[async_trait::async_trait]
impl Forge for GitLab {
    fn place(&self) -> String {
        self.project.clone()
    }

    fn change_name(&self, number: u64, long: bool) -> String {
        if long {
            format!("merge request !{number}")
        } else {
            format!("MR !{number}")
        }
    }

    /// GitLab's approvals follow its own approval rules; what an untrusted thread asked for no
    /// longer counts.
    fn trusted_state(&self, all: ReviewState, items: &[Review], comments: &[ReviewComment]) -> ReviewState {
        match all {
            ReviewState::ChangesRequested if !items.iter().any(|r| r.state == "CHANGES_REQUESTED") => {
                if items.is_empty() && comments.is_empty() {
                    ReviewState::None
                } else {
                    ReviewState::Pending
                }
            }
            s => s,
        }
    }

    async fn identity(&self) -> Result<String, ForgeError> {
        Ok(self.client.username().await?)
    }

    async fn find_for_branch(&self, branch: &str) -> Result<Option<PullRequest>, ForgeError> {
        Ok(self.client.find_mr_for_branch(&self.project, branch).await?)
    }

    async fn change(&self, number: u64) -> Result<PullRequest, ForgeError> {
        Ok(self.client.merge_request(&self.project, number).await?)
    }

    async fn create(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        draft: bool,
    ) -> Result<PullRequest, ForgeError> {
        Ok(self.client.create_mr(&self.project, head, base, title, body, draft).await?)
    }

    async fn checks(&self, sha: &str) -> Result<Checks, ForgeError> {
        Ok(self.client.checks(&self.project, sha).await?)
    }

    async fn failing_log_tail(&self, check: &FailingCheck) -> Result<Option<String>, ForgeError> {
        Ok(self.client.failing_log_tail(&self.project, check).await?)
    }

    fn can_rerun(&self, check: &FailingCheck) -> bool {
        check.kind == aoctl_forge_types::CheckKind::CheckRun && check.app.as_deref() == Some(aoctl_gitlab::GITLAB_CI)
    }

    async fn rerun_job(&self, job_id: u64) -> Result<(), ForgeError> {
        self.client.retry_job(&self.project, job_id).await?;
        Ok(())
    }

    async fn reviews(&self, number: u64) -> Result<Reviews, ForgeError> {
        Ok(self.client.reviews(&self.project, number).await?)
    }

    async fn create_review(
        &self,
        number: u64,
        sha: &str,
        event: ReviewEvent,
        body: &str,
        comments: &[NewComment],
    ) -> Result<u64, ForgeError> {
        Ok(self.client.create_review((&self.project, number), sha, event, body, comments).await?)
    }

    async fn merge(&self, number: u64, method: MergeMethod, sha: &str) -> Result<String, ForgeError> {
        Ok(self.client.merge(&self.project, number, method, sha).await?)
    }

    async fn label_events(&self, number: u64) -> Result<Vec<LabelEvent>, ForgeError> {
        Ok(self.client.label_events(&self.project, number).await?)
    }

    async fn standing(&self, _login: &str, id: Option<u64>) -> Result<Standing, ForgeError> {
        Ok(match id {
            Some(id) => Standing::gitlab(self.client.access_level(&self.project, id).await?),
            None => Standing::gitlab(None),
        })
    }
}
