//! A change proposed for review — a GitHub pull request or a GitLab merge request — as the
//! controller sees it, whichever forge holds it.

use aoctl_api::session::{ChecksState, PullRequestState, PullRequestStatus, ReviewState};

/// What the controller needs to know about a pull request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    /// The page on GitHub (`html_url`).
    pub url: String,
    pub state: PullRequestState,
    pub head_sha: String,
    pub head_ref: String,
    pub base_ref: String,
    /// The commit the base branch pointed at when GitHub last looked.
    pub base_sha: String,
    pub draft: bool,
    /// `None` while GitHub is still computing it.
    pub mergeable: Option<bool>,
    /// GitHub's `mergeable_state`: `clean`, `dirty` (conflicts), `blocked`, `behind`, `unstable`, …
    pub mergeable_state: Option<String>,
    pub merged: bool,
    pub title: String,
    /// The description; empty when there is none.
    pub body: String,
    /// Who opened it (a login or username); empty when the forge does not say.
    pub author: String,
}

impl PullRequest {
    /// Whether the pull request has merge conflicts with its base.
    pub fn has_conflicts(&self) -> bool {
        self.mergeable == Some(false) || self.mergeable_state.as_deref() == Some("dirty")
    }

    /// The session's `status.pullRequest` for this pull request and the given checks and review.
    pub fn status(&self, checks: ChecksState, review: ReviewState) -> PullRequestStatus {
        PullRequestStatus {
            number: self.number,
            url: self.url.clone(),
            state: self.state,
            head_sha: Some(self.head_sha.clone()),
            checks,
            review,
            mergeable: self.mergeable,
        }
    }
}

/// How a pull request is merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MergeMethod {
    Merge,
    Squash,
    Rebase,
}
