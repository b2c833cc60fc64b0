//! Reviews of a change: the decisions and line comments, and the review state they add up to.

use std::collections::HashMap;

use aoctl_api::session::ReviewState;

/// The decision a new review carries, as the API spells its `event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviewEvent {
    Approve,
    RequestChanges,
    Comment,
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

/// The state that reviews (oldest first) add up to. Each reviewer's latest approval, request for
/// changes or dismissal counts (a later plain comment does not undo an approval); any request
/// for changes wins, then any approval. Reviews without a decision make `pending`; no reviews
/// at all make `none`.
pub fn review_state(items: &[Review]) -> ReviewState {
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
