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

/// What the forge says of an author's access to the repository, as it said it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Standing {
    /// GitHub's `author_association` (`OWNER`, `MEMBER`, `COLLABORATOR`, `CONTRIBUTOR`, `NONE`,
    /// …); GitLab's access level by name (`Developer`, `Reporter`, …, `not a member`); empty
    /// when the forge did not say.
    pub role: String,
    /// Whether that role may write to the repository: GitHub `OWNER`, `MEMBER` or
    /// `COLLABORATOR`; GitLab Developer (30) or above.
    pub writes: bool,
}

impl Standing {
    /// The standing GitHub's `author_association` gives: write access for `OWNER`, `MEMBER` and
    /// `COLLABORATOR`, none for the others (`CONTRIBUTOR`, `FIRST_TIME_CONTRIBUTOR`,
    /// `FIRST_TIMER`, `MANNEQUIN`, `NONE`) or for a missing value.
    pub fn github(association: Option<&str>) -> Standing {
        let role = association.unwrap_or_default().to_string();
        let writes = matches!(role.as_str(), "OWNER" | "MEMBER" | "COLLABORATOR");
        Standing { role, writes }
    }

    /// The standing a GitLab access level gives (`None`: not a member): write access from
    /// Developer (30) up.
    pub fn gitlab(level: Option<u64>) -> Standing {
        let role = match level {
            None | Some(0) => "not a member".to_string(),
            Some(5) => "Minimal access".to_string(),
            Some(10) => "Guest".to_string(),
            Some(15) => "Planner".to_string(),
            Some(20) => "Reporter".to_string(),
            Some(30) => "Developer".to_string(),
            Some(40) => "Maintainer".to_string(),
            Some(50) => "Owner".to_string(),
            Some(n) => format!("access level {n}"),
        };
        Standing { role, writes: level.is_some_and(|l| l >= 30) }
    }
}

/// One submitted review.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Review {
    pub id: u64,
    /// The reviewer's login; empty for a deleted account.
    pub user: String,
    /// What the forge says of the reviewer's access.
    pub standing: Standing,
    /// As GitHub spells it: `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED` or `PENDING`.
    pub state: String,
    pub body: String,
}

/// One comment on a line of the diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReviewComment {
    pub id: u64,
    pub user: String,
    /// What the forge says of the author's access.
    pub standing: Standing,
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

    #[test]
    fn write_access_from_the_forges_words() {
        for (a, w) in [("OWNER", true), ("MEMBER", true), ("COLLABORATOR", true), ("CONTRIBUTOR", false)] {
            assert_eq!(Standing::github(Some(a)).writes, w, "{a}");
        }
        assert!(!Standing::github(Some("NONE")).writes && !Standing::github(Some("FIRST_TIMER")).writes);
        assert_eq!(Standing::github(None), Standing::default());
        assert!(!Standing::gitlab(Some(20)).writes && Standing::gitlab(Some(30)).writes);
        assert_eq!(Standing::gitlab(Some(40)).role, "Maintainer");
        assert_eq!(Standing::gitlab(None), Standing { role: "not a member".into(), writes: false });
    }

    fn r(user: &str, state: &str) -> Review {
        Review {
            id: 0,
            user: user.to_string(),
            standing: Standing::default(),
            state: state.to_string(),
            body: String::new(),
        }
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
