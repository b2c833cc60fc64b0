//! GitHub as a project's forge and tracker: a repository's pull requests, checks, reviews and
//! issues through one [`aoctl_github::Client`].

use std::sync::Arc;

use aoctl_api::issuesource::IssueSourceSpec;
use aoctl_api::session::ReviewState;
use aoctl_forge_types::{
    review_state, Checks, FailingCheck, Issue, IssueList, IssueStateFilter, LabelEvent, MergeMethod, NewComment,
    PullRequest, Review, ReviewComment, ReviewEvent, Reviews, Standing,
};

use super::tracker::{forge_issue_number, mismatch};
use super::{Forge, ForgeError, Tracker, ACTIONS_BOT};

/// A repository on GitHub (or GitHub Enterprise).
#[derive(Clone, Debug)]
pub(crate) struct GitHub {
    pub client: aoctl_github::Client,
    pub owner: String,
    pub repo: String,
}

#[async_trait::async_trait]
impl Tracker for GitHub {
    fn name(&self) -> &'static str {
        "GitHub"
    }

    fn budget(&self) -> &Arc<aoctl_forge_core::Budget> {
        self.client.budget()
    }

    fn describe(&self) -> String {
        format!("{} {}/{}", self.client.api_url(), self.owner, self.repo)
    }

    fn forge(&self) -> Option<&dyn Forge> {
        Some(self)
    }

    async fn issue(&self, reference: &str) -> Result<Issue, ForgeError> {
        let number = forge_issue_number(self.name(), reference)?;
        Ok(self.client.issue(&self.owner, &self.repo, number).await?)
    }

    async fn list(&self, q: &IssueSourceSpec) -> Result<IssueList, ForgeError> {
        if q.gitlab.is_some() || q.linear.is_some() {
            return Err(mismatch(self.name(), if q.gitlab.is_some() { "GitLab" } else { "Linear" }));
        }
        Ok(self.client.list_issues(&self.owner, &self.repo, &q.github.labels, IssueStateFilter::Open).await?)
    }
}

#[async_trait::async_trait]
impl Forge for GitHub {
    fn place(&self) -> String {
        format!("{}/{}", self.owner, self.repo)
    }

    fn change_name(&self, number: u64, long: bool) -> String {
        if long {
            format!("pull request #{number}")
        } else {
            format!("PR #{number}")
        }
    }

    fn batches(&self) -> bool {
        true
    }

    async fn open_changes(&self) -> Result<Option<Vec<aoctl_github::OpenPull>>, ForgeError> {
        Ok(Some(self.client.open_pulls(&self.owner, &self.repo).await?))
    }

    fn ci_bot(&self) -> Option<&'static str> {
        Some(ACTIONS_BOT)
    }

    /// Each trusted reviewer's latest decision counts, as GitHub counts them.
    fn trusted_state(&self, _all: ReviewState, items: &[Review], _comments: &[ReviewComment]) -> ReviewState {
        review_state(items)
    }

    async fn identity(&self) -> Result<String, ForgeError> {
        Ok(self.client.login().await?)
    }

    async fn find_for_branch(&self, branch: &str) -> Result<Option<PullRequest>, ForgeError> {
        Ok(self.client.find_pull_for_branch(&self.owner, &self.repo, branch).await?)
    }

    async fn change(&self, number: u64) -> Result<PullRequest, ForgeError> {
        Ok(self.client.pull(&self.owner, &self.repo, number).await?)
    }

    async fn create(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        draft: bool,
    ) -> Result<PullRequest, ForgeError> {
        Ok(self.client.create_pull((&self.owner, &self.repo), head, base, title, body, draft).await?)
    }

    async fn checks(&self, sha: &str) -> Result<Checks, ForgeError> {
        Ok(self.client.checks(&self.owner, &self.repo, sha).await?)
    }

    async fn failing_log_tail(&self, check: &FailingCheck) -> Result<Option<String>, ForgeError> {
        Ok(self.client.failing_log_tail(&self.owner, &self.repo, check).await?)
    }

    fn can_rerun(&self, check: &FailingCheck) -> bool {
        check.kind == aoctl_forge_types::CheckKind::CheckRun && check.app.as_deref() == Some(aoctl_github::ACTIONS_APP)
    }

    async fn rerun_job(&self, job_id: u64) -> Result<(), ForgeError> {
        self.client.rerun_job(&self.owner, &self.repo, job_id).await?;
        Ok(())
    }

    async fn reviews(&self, number: u64) -> Result<Reviews, ForgeError> {
        Ok(self.client.reviews(&self.owner, &self.repo, number).await?)
    }

    async fn create_review(
        &self,
        number: u64,
        sha: &str,
        event: ReviewEvent,
        body: &str,
        comments: &[NewComment],
    ) -> Result<u64, ForgeError> {
        Ok(self.client.create_review((&self.owner, &self.repo, number), sha, event, body, comments).await?)
    }

    async fn merge(&self, number: u64, method: MergeMethod, sha: &str) -> Result<String, ForgeError> {
        Ok(self.client.merge(&self.owner, &self.repo, number, method, sha).await?)
    }

    async fn label_events(&self, number: u64) -> Result<Vec<LabelEvent>, ForgeError> {
        Ok(self.client.label_events(&self.owner, &self.repo, number).await?)
    }

    async fn standing(&self, login: &str, _id: Option<u64>) -> Result<Standing, ForgeError> {
        Ok(self.client.permission(&self.owner, &self.repo, login).await?)
    }
}
