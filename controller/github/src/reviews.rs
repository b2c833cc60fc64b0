//! Reviews of a pull request: the reviews and line comments with their authors' standing in the
//! repository (`author_association`), and the review state they add up to.

use aoctl_forge_core::Error;
use http::Method;
use serde::Deserialize;
use serde_json::json;

use aoctl_forge_types::{review_state, NewComment, Review, ReviewComment, ReviewEvent, Reviews, Standing};

use crate::client::{segment, Client};

const LIST_REVIEWS: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews";
const LIST_REVIEW_COMMENTS: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}/comments";
const CREATE_REVIEW: &str = "POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews";

#[derive(Deserialize)]
struct WireUser {
    login: String,
}

#[derive(Deserialize)]
struct WireReview {
    id: u64,
    user: Option<WireUser>,
    #[serde(default)]
    author_association: Option<String>,
    state: String,
    #[serde(default)]
    body: Option<String>,
}

#[derive(Deserialize)]
struct WireComment {
    id: u64,
    user: Option<WireUser>,
    #[serde(default)]
    author_association: Option<String>,
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
        let (pages, _): (Vec<Vec<WireReview>>, _) = self.get_pages(LIST_REVIEWS, &path, what).await?;
        let items: Vec<Review> = pages
            .into_iter()
            .flatten()
            .map(|w| Review {
                id: w.id,
                user: w.user.map(|u| u.login).unwrap_or_default(),
                standing: Standing::github(w.author_association.as_deref()),
                state: w.state,
                body: w.body.unwrap_or_default(),
            })
            .collect();
        let path = format!("/repos/{o}/{r}/pulls/{number}/comments?per_page=100");
        let (pages, _): (Vec<Vec<WireComment>>, _) = self.get_pages(LIST_REVIEW_COMMENTS, &path, what).await?;
        let comments = pages
            .into_iter()
            .flatten()
            .map(|w| ReviewComment {
                id: w.id,
                user: w.user.map(|u| u.login).unwrap_or_default(),
                standing: Standing::github(w.author_association.as_deref()),
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
        let request = json!({"commit_id": sha, "event": event_name(event), "body": body, "comments": comments});
        let path = format!("/repos/{o}/{r}/pulls/{number}/reviews");
        let created: Created = self
            .rest
            .write_json(Method::POST, CREATE_REVIEW, &path, &request, || format!("pull request {o}/{r}#{number}"))
            .await?;
        Ok(created.id)
    }
}

/// GitHub's `event` for a review decision.
fn event_name(e: ReviewEvent) -> &'static str {
    match e {
        ReviewEvent::Approve => "APPROVE",
        ReviewEvent::RequestChanges => "REQUEST_CHANGES",
        ReviewEvent::Comment => "COMMENT",
    }
}
