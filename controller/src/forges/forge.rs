//! A project's forge as the session reconciler uses it: the change of a branch (a GitHub pull
//! request or a GitLab merge request), its CI and reviews, the failing job's log, re-runs,
//! reviews posted by reviewer agents, and the merge guarded by the head sha; who applied an
//! issue's labels and what a user may do there. One implementation per client (`github.rs`,
//! `gitlab.rs`); tests bring their own.

use std::sync::Arc;
use std::time::Duration;

use aoctl_api::project::Project;
use aoctl_api::session::ReviewState;
use aoctl_forge_types::{
    Checks, FailingCheck, LabelEvent, MergeMethod, NewComment, PullRequest, Review, ReviewComment, ReviewEvent,
    Reviews, Standing,
};

use super::{ForgeError, Tracker};

/// How often open changes are polled when the project says nothing.
const DEFAULT_POLL: Duration = Duration::from_secs(30);

/// A forge shared between the reconciles of a project.
pub(crate) type SharedForge = Arc<dyn Forge>;

/// How often a project's open changes are polled.
pub(crate) fn poll_interval(project: &Project) -> Duration {
    let s = &project.spec;
    let set = match &s.gitlab {
        Some(g) => g.poll_interval,
        None => s.github.as_ref().and_then(|g| g.poll_interval),
    };
    set.map_or(DEFAULT_POLL, |d| d.as_std())
}

/// A project's forge, with the repository or project it names there. Its issues make it a
/// [`Tracker`] too.
#[async_trait::async_trait]
pub(crate) trait Forge: Tracker {
    /// The repository or project path, for messages.
    fn place(&self) -> String;

    /// A change as people name it on this forge: `PR #7` on GitHub, `MR !7` on GitLab; with
    /// `long`, `pull request #7` and `merge request !7`.
    fn change_name(&self, number: u64, long: bool) -> String;

    /// Whether this forge reads a project's open changes in one batched query
    /// ([`Forge::open_changes`]).
    fn batches(&self) -> bool {
        false
    }

    /// The open changes of the repository in one batched query: each one's branch, head and a
    /// digest of what the controller reads of it; `None` where the forge has no such query.
    async fn open_changes(&self) -> Result<Option<Vec<aoctl_github::OpenPull>>, ForgeError> {
        Ok(None)
    }

    /// The bot the project's own CI speaks as, trusted for what it reports on a change.
    fn ci_bot(&self) -> Option<&'static str> {
        None
    }

    /// The review state of a change once untrusted reviews and comments are set aside: `all` is
    /// what the forge said with them, `items` and `comments` the trusted ones left.
    fn trusted_state(&self, all: ReviewState, items: &[Review], comments: &[ReviewComment]) -> ReviewState;

    /// The name the token speaks as on this forge (a login or username).
    async fn identity(&self) -> Result<String, ForgeError>;

    /// The change whose head is `branch` (an open one first, else the newest), if any.
    async fn find_for_branch(&self, branch: &str) -> Result<Option<PullRequest>, ForgeError>;

    /// One change by number.
    async fn change(&self, number: u64) -> Result<PullRequest, ForgeError>;

    /// Opens a change from `head` into `base`.
    async fn create(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        draft: bool,
    ) -> Result<PullRequest, ForgeError>;

    /// The combined CI state of commit `sha`.
    async fn checks(&self, sha: &str) -> Result<Checks, ForgeError>;

    /// The end of what a failing check printed, when it can be read.
    async fn failing_log_tail(&self, check: &FailingCheck) -> Result<Option<String>, ForgeError>;

    /// Whether `check` is a CI job this forge can re-run.
    fn can_rerun(&self, check: &FailingCheck) -> bool;

    /// Re-runs one failed CI job.
    async fn rerun_job(&self, job_id: u64) -> Result<(), ForgeError>;

    /// The reviews and line comments of a change.
    async fn reviews(&self, number: u64) -> Result<Reviews, ForgeError>;

    /// Posts a reviewer's review of commit `sha`; its id.
    async fn create_review(
        &self,
        number: u64,
        sha: &str,
        event: ReviewEvent,
        body: &str,
        comments: &[NewComment],
    ) -> Result<u64, ForgeError>;

    /// Merges a change if its head is still `sha`; the merge commit's sha.
    async fn merge(&self, number: u64, method: MergeMethod, sha: &str) -> Result<String, ForgeError>;

    /// Who applied and removed which label of issue `number`, oldest first.
    async fn label_events(&self, number: u64) -> Result<Vec<LabelEvent>, ForgeError>;

    /// What a user may do in the repository or project (some forges ask by `id`; without one,
    /// nothing). Kept for a while by the client.
    async fn standing(&self, login: &str, id: Option<u64>) -> Result<Standing, ForgeError>;
}
