//! What of a pull request's feedback a session's status remembers: the reviews, comments and
//! reviewer verdicts already passed on, the CI jobs re-run, and the comments held back from the
//! agent because the project does not trust their authors.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::meta::Time;

/// The review feedback already typed into the agent (or notified) and the CI jobs already re-run,
/// remembered in the status so that a restarted controller neither repeats nor forgets them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedbackStatus {
    /// Ids of the reviews whose text was passed on, oldest first; at most [`FeedbackStatus::MAX_IDS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reviews: Vec<u64>,
    /// Ids of the review comments passed on, oldest first; at most [`FeedbackStatus::MAX_IDS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<u64>,
    /// Failed jobs re-run as flaky, for the pull request's current head only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reruns: Vec<JobRerun>,
    /// Reviewer sessions whose verdict was passed on; at most [`FeedbackStatus::MAX_IDS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reviewers: Vec<String>,
    /// Keys ([`HeldComment::key`]) of the reviews and comments held back because the project
    /// does not trust their authors, so each is recorded once; at most [`FeedbackStatus::MAX_IDS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<String>,
}

/// A review or comment whose author the project does not trust, kept for a person to read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeldComment {
    /// `review` (a review's own text) or `comment` (a line comment or a note).
    pub kind: String,
    /// The forge's id of the review or comment.
    pub id: u64,
    /// The author's login or username.
    pub author: String,
    /// What the forge says of the author: GitHub's `author_association` (`NONE`,
    /// `CONTRIBUTOR`, …), GitLab's access level.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub role: String,
    /// The file and line it is about, for a line comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// Its text, cut after [`HeldComment::BODY_MAX`] characters (an ellipsis marks the cut).
    pub body: String,
    /// What a person's "pass on" types into the agent: the text fenced as a quotation from its
    /// author.
    pub message: String,
    /// When the controller held it back.
    pub held_at: Time,
}

impl HeldComment {
    /// The most held comments a status keeps; the oldest are dropped first.
    pub const MAX: usize = 10;
    /// Characters of a held comment's text that are kept.
    pub const BODY_MAX: usize = 1500;

    /// Identifies it among reviews and comments: `r<id>` or `c<id>`.
    pub fn key(&self) -> String {
        format!("{}{}", if self.kind == "review" { 'r' } else { 'c' }, self.id)
    }
}

impl FeedbackStatus {
    /// The most review or comment ids remembered; the oldest are forgotten first.
    pub const MAX_IDS: usize = 500;

    /// Remembers review and comment ids as passed on, keeping the newest [`Self::MAX_IDS`] of each.
    pub fn remember(&mut self, reviews: &[u64], comments: &[u64]) {
        keep_newest(&mut self.reviews, reviews);
        keep_newest(&mut self.comments, comments);
    }

    /// Remembers the key of a held review or comment, keeping the newest [`Self::MAX_IDS`].
    pub fn remember_held(&mut self, key: &str) {
        keep_newest(&mut self.held, &[key.to_string()]);
    }

    /// Remembers reviewer sessions whose verdict was passed on.
    pub fn remember_reviewers(&mut self, sessions: &[String]) {
        keep_newest(&mut self.reviewers, sessions);
    }

    /// How often the job named `check` was re-run on commit `sha`.
    pub fn reruns_of(&self, sha: &str, check: &str) -> u32 {
        self.reruns.iter().find(|r| r.sha == sha && r.check == check).map_or(0, |r| r.count)
    }

    /// Counts one more re-run of `check` on `sha`; re-runs of other commits are forgotten.
    pub fn count_rerun(&mut self, sha: &str, check: &str) {
        self.reruns.retain(|r| r.sha == sha);
        match self.reruns.iter_mut().find(|r| r.check == check) {
            Some(r) => r.count += 1,
            None => self.reruns.push(JobRerun { sha: sha.to_string(), check: check.to_string(), count: 1 }),
        }
    }
}

/// How often one failed job was re-run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobRerun {
    /// The head commit it failed on.
    pub sha: String,
    /// The check run's name.
    pub check: String,
    pub count: u32,
}

/// Adds the `items` `list` does not hold yet, then forgets the oldest past
/// [`FeedbackStatus::MAX_IDS`].
fn keep_newest<T: PartialEq + Clone>(list: &mut Vec<T>, items: &[T]) {
    for item in items {
        if !list.contains(item) {
            list.push(item.clone());
        }
    }
    let over = list.len().saturating_sub(FeedbackStatus::MAX_IDS);
    list.drain(..over);
}
