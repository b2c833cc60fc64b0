//! Reviews of a pull request: the reviews and line comments, and the review state they add up to.

use std::collections::HashMap;

use aoctl_api::session::ReviewState;
use http::Method;
use serde::Deserialize;
use serde_json::json;

use crate::client::{decode, segment, success, Client, Read};
use crate::error::Error;

const LIST_REVIEWS: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews";
const LIST_REVIEW_COMMENTS: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}/comments";
const CREATE_REVIEW: &str = "POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews";

/// The decision a new review carries, as the API spells its `event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviewEvent {
    Approve,
    RequestChanges,
    Comment,
}

impl ReviewEvent {
    fn as_str(self) -> &'static str {
        match self {
            ReviewEvent::Approve => "APPROVE",
            ReviewEvent::RequestChanges => "REQUEST_CHANGES",
            ReviewEvent::Comment => "COMMENT",
        }
    }
}

/// A line comment of a new review: a line of the file as it is at the reviewed commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewComment {
    pub path: String,
    pub line: u64,
    pub body: String,
}

/// The reviews of a pull request, oldest first, and the state they add up to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reviews {
    pub state: ReviewState,
    pub items: Vec<Review>,
    pub comments: Vec<ReviewComment>,
}

/// One submitted review.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Review {
    pub id: u64,
    /// The reviewer's login; empty for a deleted account.
    pub user: String,
    /// As GitHub spells it: `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED` or `PENDING`.
    pub state: String,
    pub body: String,
}

/// One comment on a line of the diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReviewComment {
    pub id: u64,
    pub user: String,
    pub path: String,
    /// The line in the new file; `None` when the comment is outdated.
    pub line: Option<u64>,
    /// The line it was made on, for an outdated comment.
    pub original_line: Option<u64>,
    pub body: String,
    /// The comment this one answers.
    pub in_reply_to: Option<u64>,
    /// The review it belongs to.
    pub review_id: Option<u64>,
    /// The part of the diff it is about; its last line is the commented one.
    pub diff_hunk: String,
}

#[derive(Deserialize)]
struct WireUser {
    login: String,
}

#[derive(Deserialize)]
struct WireReview {
    id: u64,
    user: Option<WireUser>,
    state: String,
    #[serde(default)]
    body: Option<String>,
}

#[derive(Deserialize)]
struct WireComment {
    id: u64,
    user: Option<WireUser>,
    path: String,
    #[serde(default)]
    line: Option<u64>,
    #[serde(default)]
    original_line: Option<u64>,
    body: String,
    #[serde(default)]
    in_reply_to_id: Option<u64>,
    #[serde(default)]
    pull_request_review_id: Option<u64>,
    #[serde(default)]
    diff_hunk: String,
}

impl Client {
    /// The reviews and review comments of a pull request.
    pub async fn reviews(&self, owner: &str, repo: &str, number: u64) -> Result<Reviews, Error> {
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        let what = || format!("pull request {o}/{r}#{number}");
        let path = format!("/repos/{o}/{r}/pulls/{number}/reviews?per_page=100");
        let pages: Vec<Vec<WireReview>> = self.get_pages(LIST_REVIEWS, &path, what).await?;
        let items: Vec<Review> = pages
            .into_iter()
            .flatten()
            .map(|w| Review {
                id: w.id,
                user: w.user.map(|u| u.login).unwrap_or_default(),
                state: w.state,
                body: w.body.unwrap_or_default(),
            })
            .collect();
        let path = format!("/repos/{o}/{r}/pulls/{number}/comments?per_page=100");
        let pages: Vec<Vec<WireComment>> = self.get_pages(LIST_REVIEW_COMMENTS, &path, what).await?;
        let comments = pages
            .into_iter()
            .flatten()
            .map(|w| ReviewComment {
                id: w.id,
                user: w.user.map(|u| u.login).unwrap_or_default(),
                path: w.path,
                line: w.line,
                original_line: w.original_line,
                body: w.body,
                in_reply_to: w.in_reply_to_id,
                review_id: w.pull_request_review_id,
                diff_hunk: w.diff_hunk,
            })
            .collect();
        Ok(Reviews { state: review_state(&items), items, comments })
    }
}

impl Client {
    /// Submits a review of commit `sha` of a pull request, as the token's user; its id.
    pub async fn create_review(
        &self,
        (owner, repo, number): (&str, &str, u64),
        sha: &str,
        event: ReviewEvent,
        body: &str,
        comments: &[NewComment],
    ) -> Result<u64, Error> {
        #[derive(Deserialize)]
        struct Created {
            id: u64,
        }
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        let comments: Vec<_> =
            comments.iter().map(|c| json!({"path": c.path, "line": c.line, "side": "RIGHT", "body": c.body})).collect();
        let request = json!({"commit_id": sha, "event": event.as_str(), "body": body, "comments": comments});
        let path = format!("/repos/{o}/{r}/pulls/{number}/reviews");
        let reply = self.send(Method::POST, CREATE_REVIEW, &path, Some(&request), Read::Whole).await?;
        let reply = success(CREATE_REVIEW, reply, || format!("pull request {o}/{r}#{number}"))?;
        decode::<Created>(CREATE_REVIEW, &reply.body).map(|c| c.id)
    }
}

/// The state that reviews (oldest first) add up to. Each reviewer's latest approval, request for
/// changes or dismissal counts (a later plain comment does not undo an approval); any request
/// for changes wins, then any approval. Reviews without a decision make `pending`; no reviews
/// at all make `none`.
pub(crate) fn review_state(items: &[Review]) -> ReviewState {
    let mut decisions: HashMap<&str, &str> = HashMap::new();
    let mut any = false;
    for review in items {
        match review.state.as_str() {
            "PENDING" => {}
            state @ ("APPROVED" | "CHANGES_REQUESTED" | "DISMISSED") => {
                any = true;
                decisions.insert(review.user.as_str(), state);
            }
            _ => any = true,
        }
    }
    if decisions.values().any(|s| *s == "CHANGES_REQUESTED") {
        ReviewState::ChangesRequested
    } else if decisions.values().any(|s| *s == "APPROVED") {
        ReviewState::Approved
    } else if any {
        ReviewState::Pending
    } else {
        ReviewState::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(user: &str, state: &str) -> Review {
        Review { id: 0, user: user.to_string(), state: state.to_string(), body: String::new() }
    }

    #[test]
    fn latest_decision_per_user() {
        assert_eq!(review_state(&[]), ReviewState::None);
        assert_eq!(review_state(&[r("a", "PENDING")]), ReviewState::None);
        assert_eq!(review_state(&[r("a", "COMMENTED")]), ReviewState::Pending);
        assert_eq!(review_state(&[r("a", "APPROVED"), r("a", "COMMENTED")]), ReviewState::Approved);
        assert_eq!(review_state(&[r("a", "CHANGES_REQUESTED"), r("a", "APPROVED")]), ReviewState::Approved);
        assert_eq!(review_state(&[r("a", "APPROVED"), r("b", "CHANGES_REQUESTED")]), ReviewState::ChangesRequested);
        assert_eq!(
            review_state(&[r("b", "CHANGES_REQUESTED"), r("b", "DISMISSED"), r("a", "APPROVED")]),
            ReviewState::Approved
        );
        assert_eq!(review_state(&[r("a", "APPROVED"), r("a", "DISMISSED")]), ReviewState::Pending);
    }
}
