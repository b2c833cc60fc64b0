//! A project's forge as the session reconciler uses it: the change of a branch (a GitHub pull
//! request or a GitLab merge request), its CI and reviews, the failing job's log, re-runs,
//! reviews posted by reviewer agents, and the merge guarded by the head sha.

use std::time::Duration;

use std::sync::Arc;

use aoctl_api::project::Project;
use aoctl_forge_core::Budget;
use aoctl_scm::{
    Checks, FailingCheck, LabelEvent, MergeMethod, NewComment, PullRequest, ReviewEvent, Reviews, Standing,
};

use super::ForgeError;

/// How often open changes are polled when the project says nothing.
const DEFAULT_POLL: Duration = Duration::from_secs(30);

/// A project's forge, with the repository or project it names there.
#[derive(Clone, Debug)]
pub enum Forge {
    GitHub { client: aoctl_github::Client, owner: String, repo: String },
    GitLab { client: aoctl_gitlab::Client, project: String },
}

/// How often a project's open changes are polled.
pub fn poll_interval(project: &Project) -> Duration {
    let s = &project.spec;
    let set = match &s.gitlab {
        Some(g) => g.poll_interval,
        None => s.github.as_ref().and_then(|g| g.poll_interval),
    };
    set.map_or(DEFAULT_POLL, |d| d.as_std())
}

impl Forge {
    /// The forge's name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Forge::GitHub { .. } => "GitHub",
            Forge::GitLab { .. } => "GitLab",
        }
    }

    /// The API URL, repository and project, which identify a query in caches.
    pub fn describe(&self) -> String {
        match self {
            Forge::GitHub { client, owner, repo } => format!("{} {owner}/{repo}", client.api_url()),
            Forge::GitLab { client, project } => format!("{} {project}", client.api_url()),
        }
    }

    /// The budget of the token this forge is read with.
    pub fn budget(&self) -> &Arc<Budget> {
        match self {
            Forge::GitHub { client, .. } => client.budget(),
            Forge::GitLab { client, .. } => client.budget(),
        }
    }

    /// Whether this forge reads a project's open changes in one batched query
    /// ([`Forge::open_changes`]).
    pub fn batches(&self) -> bool {
        matches!(self, Forge::GitHub { .. })
    }

    /// The open changes of the repository in one batched query (GitHub's GraphQL API): each one's
    /// branch, head and a digest of what the controller reads of it; `None` where the forge has
    /// no such query.
    pub async fn open_changes(&self) -> Result<Option<Vec<aoctl_github::OpenPull>>, ForgeError> {
        match self {
            Forge::GitHub { client, owner, repo } => Ok(Some(client.open_pulls(owner, repo).await?)),
            Forge::GitLab { .. } => Ok(None),
        }
    }

    /// The name the token speaks as on this forge (a login or username).
    pub async fn identity(&self) -> Result<String, ForgeError> {
        Ok(match self {
            Forge::GitHub { client, .. } => client.login().await?,
            Forge::GitLab { client, .. } => client.username().await?,
        })
    }

    /// The repository or project path, for messages.
    pub fn place(&self) -> String {
        match self {
            Forge::GitHub { owner, repo, .. } => format!("{owner}/{repo}"),
            Forge::GitLab { project, .. } => project.clone(),
        }
    }

    /// A change as people name it on this forge: `PR #7` on GitHub, `MR !7` on GitLab; with
    /// `long`, `pull request #7` and `merge request !7`.
    pub fn change_name(&self, number: u64, long: bool) -> String {
        match (self, long) {
            (Forge::GitHub { .. }, false) => format!("PR #{number}"),
            (Forge::GitHub { .. }, true) => format!("pull request #{number}"),
            (Forge::GitLab { .. }, false) => format!("MR !{number}"),
            (Forge::GitLab { .. }, true) => format!("merge request !{number}"),
        }
    }

    /// The change whose head is `branch` (an open one first, else the newest), if any.
    pub async fn find_for_branch(&self, branch: &str) -> Result<Option<PullRequest>, ForgeError> {
        Ok(match self {
            Forge::GitHub { client, owner, repo } => client.find_pull_for_branch(owner, repo, branch).await?,
            Forge::GitLab { client, project } => client.find_mr_for_branch(project, branch).await?,
        })
    }

    /// One change by number.
    pub async fn change(&self, number: u64) -> Result<PullRequest, ForgeError> {
        Ok(match self {
            Forge::GitHub { client, owner, repo } => client.pull(owner, repo, number).await?,
            Forge::GitLab { client, project } => client.merge_request(project, number).await?,
        })
    }

    /// Opens a change from `head` into `base`.
    pub async fn create(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        draft: bool,
    ) -> Result<PullRequest, ForgeError> {
        Ok(match self {
            Forge::GitHub { client, owner, repo } => {
                client.create_pull(owner, repo, head, base, title, body, draft).await?
            }
            Forge::GitLab { client, project } => client.create_mr(project, head, base, title, body, draft).await?,
        })
    }

    /// The combined CI state of commit `sha`.
    pub async fn checks(&self, sha: &str) -> Result<Checks, ForgeError> {
        Ok(match self {
            Forge::GitHub { client, owner, repo } => client.checks(owner, repo, sha).await?,
            Forge::GitLab { client, project } => client.checks(project, sha).await?,
        })
    }

    /// The end of what a failing check printed, when it can be read.
    pub async fn failing_log_tail(&self, check: &FailingCheck) -> Result<Option<String>, ForgeError> {
        Ok(match self {
            Forge::GitHub { client, owner, repo } => client.failing_log_tail(owner, repo, check).await?,
            Forge::GitLab { client, project } => client.failing_log_tail(project, check).await?,
        })
    }

    /// Whether `check` is a CI job this forge can re-run.
    pub fn can_rerun(&self, check: &FailingCheck) -> bool {
        let app = match self {
            Forge::GitHub { .. } => aoctl_github::ACTIONS_APP,
            Forge::GitLab { .. } => aoctl_gitlab::GITLAB_CI,
        };
        check.kind == aoctl_scm::CheckKind::CheckRun && check.app.as_deref() == Some(app)
    }

    /// Re-runs one failed CI job.
    pub async fn rerun_job(&self, job_id: u64) -> Result<(), ForgeError> {
        match self {
            Forge::GitHub { client, owner, repo } => client.rerun_job(owner, repo, job_id).await?,
            Forge::GitLab { client, project } => client.retry_job(project, job_id).await?,
        }
        Ok(())
    }

    /// The reviews and line comments of a change.
    pub async fn reviews(&self, number: u64) -> Result<Reviews, ForgeError> {
        Ok(match self {
            Forge::GitHub { client, owner, repo } => client.reviews(owner, repo, number).await?,
            Forge::GitLab { client, project } => client.reviews(project, number).await?,
        })
    }

    /// Posts a reviewer's review of commit `sha`; its id.
    pub async fn create_review(
        &self,
        number: u64,
        sha: &str,
        event: ReviewEvent,
        body: &str,
        comments: &[NewComment],
    ) -> Result<u64, ForgeError> {
        Ok(match self {
            Forge::GitHub { client, owner, repo } => {
                client.create_review((owner, repo, number), sha, event, body, comments).await?
            }
            Forge::GitLab { client, project } => {
                client.create_review((project, number), sha, event, body, comments).await?
            }
        })
    }

    /// Who applied and removed which label of issue `number`, oldest first.
    pub async fn label_events(&self, number: u64) -> Result<Vec<LabelEvent>, ForgeError> {
        Ok(match self {
            Forge::GitHub { client, owner, repo } => client.label_events(owner, repo, number).await?,
            Forge::GitLab { client, project } => client.label_events(project, number).await?,
        })
    }

    /// What a user may do in the repository or project (GitLab asks by `id`; without one, none).
    /// Kept for a while by the client.
    pub async fn standing(&self, login: &str, id: Option<u64>) -> Result<Standing, ForgeError> {
        Ok(match self {
            Forge::GitHub { client, owner, repo } => client.permission(owner, repo, login).await?,
            Forge::GitLab { client, project } => match id {
                Some(id) => Standing::gitlab(client.access_level(project, id).await?),
                None => Standing::gitlab(None),
            },
        })
    }

    /// Merges a change if its head is still `sha`; the merge commit's sha.
    pub async fn merge(&self, number: u64, method: MergeMethod, sha: &str) -> Result<String, ForgeError> {
        Ok(match self {
            Forge::GitHub { client, owner, repo } => client.merge(owner, repo, number, method, sha).await?,
            Forge::GitLab { client, project } => client.merge(project, number, method, sha).await?,
        })
    }
}
