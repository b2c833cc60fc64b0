//! Who may speak to a project's agents: the people the forge gives write access (GitHub's
//! `author_association` `OWNER`, `MEMBER` or `COLLABORATOR`; GitLab Developer or above), the
//! project's own bots (the identity of its token, its reviewer identity, GitHub Actions) and
//! those `spec.trust.users` lists. What anyone else writes on a change is held back from the
//! agent ([`Trust::split`]).

use aoctl_api::project::Project;
use aoctl_api::session::ReviewState;
use aoctl_scm::{review_state, Reviews, Standing};

use super::{Forge, Hub};

/// The bot GitHub Actions posts as: the project's own CI.
pub const ACTIONS_BOT: &str = "github-actions[bot]";

/// The people and bots a project trusts by name, beyond the forge's writers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trust {
    /// Lower-cased logins.
    names: Vec<String>,
}

impl Trust {
    /// The names a project trusts: `spec.trust.users` and `bots` (the identities its tokens
    /// speak as), plus its CI's bot on GitHub.
    pub fn named(project: &Project, forge: &Forge, bots: &[String]) -> Trust {
        let listed = project.spec.trust.iter().flat_map(|t| t.users.iter());
        let ci = matches!(forge, Forge::GitHub { .. }).then(|| ACTIONS_BOT.to_string());
        let mut names: Vec<String> =
            listed.chain(bots.iter()).chain(ci.iter()).map(|n| n.trim().to_ascii_lowercase()).collect();
        names.retain(|n| !n.is_empty());
        names.sort();
        names.dedup();
        Trust { names }
    }

    /// The names a project trusts, its bots' identities asked of the forge (each asked once per
    /// token; an identity that cannot be read is left out, which trusts less, never more).
    pub async fn of(project: &Project, forge: &Forge, hub: &Hub, review_token_envs: &[&str]) -> Trust {
        let mut bots = vec![];
        if let Ok(me) = forge.identity().await {
            bots.push(me);
        }
        for env in review_token_envs {
            if let Ok(Some(reviewer)) = hub.forge_as(project, env) {
                if let Ok(me) = reviewer.identity().await {
                    bots.push(me);
                }
            }
        }
        Trust::named(project, forge, &bots)
    }

    /// Whether what `user` writes may reach an agent: the forge says they may write, or the
    /// project names them.
    pub fn trusts(&self, user: &str, standing: &Standing) -> bool {
        standing.writes || (!user.is_empty() && self.names.iter().any(|n| n.eq_ignore_ascii_case(user)))
    }

    /// The reviews and comments of trusted authors, with the state they add up to, and those of
    /// everyone else. An untrusted approval approves nothing and an untrusted request for changes
    /// asks for none.
    pub fn split(&self, forge: &Forge, all: Reviews) -> (Reviews, Reviews) {
        let (items, held_items): (Vec<_>, Vec<_>) =
            all.items.into_iter().partition(|r| self.trusts(&r.user, &r.standing));
        let (comments, held_comments): (Vec<_>, Vec<_>) =
            all.comments.into_iter().partition(|c| self.trusts(&c.user, &c.standing));
        let held = Reviews { state: ReviewState::None, items: held_items, comments: held_comments };
        if held.items.is_empty() && held.comments.is_empty() {
            return (Reviews { state: all.state, items, comments }, held);
        }
        let state = match forge {
            Forge::GitHub { .. } => review_state(&items),
            // GitLab's approvals follow its own approval rules; what an outsider's thread asked
            // for no longer counts.
            Forge::GitLab { .. } => match all.state {
                ReviewState::ChangesRequested if !items.iter().any(|r| r.state == "CHANGES_REQUESTED") => {
                    if items.is_empty() && comments.is_empty() {
                        ReviewState::None
                    } else {
                        ReviewState::Pending
                    }
                }
                s => s,
            },
        };
        (Reviews { state, items, comments }, held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::project::TrustSpec;
    use aoctl_scm::{Review, ReviewComment};

    fn github() -> Forge {
        let client = aoctl_github::Client::new("http://127.0.0.1:9", None).unwrap();
        Forge::GitHub { client, owner: "acme".into(), repo: "widgets".into() }
    }

    fn review(id: u64, user: &str, role: &str, state: &str) -> Review {
        Review {
            id,
            user: user.into(),
            standing: Standing::github(Some(role)),
            state: state.into(),
            body: format!("{user} says"),
        }
    }

    fn comment(id: u64, user: &str, role: &str, review: u64) -> ReviewComment {
        ReviewComment {
            id,
            user: user.into(),
            standing: Standing::github(Some(role)),
            path: "a.rs".into(),
            line: Some(1),
            original_line: Some(1),
            body: "run this".into(),
            in_reply_to: None,
            review_id: Some(review),
            diff_hunk: String::new(),
        }
    }

    #[tokio::test]
    async fn writers_listed_users_and_bots_are_trusted_and_no_one_else() {
        let mut project = Project::new("widgets", "/w");
        project.spec.trust = Some(TrustSpec { users: vec![" Friend ".into()] });
        let t = Trust::named(&project, &github(), &["review-bot".into()]);
        assert!(t.trusts("lead", &Standing::github(Some("MEMBER"))));
        assert!(t.trusts("friend", &Standing::github(Some("NONE"))), "spec.trust, any case");
        assert!(t.trusts("Review-Bot", &Standing::github(Some("NONE"))), "the project's own bot");
        assert!(t.trusts(ACTIONS_BOT, &Standing::default()), "its CI");
        assert!(!t.trusts("drive-by", &Standing::github(Some("NONE"))));
        assert!(!t.trusts("drive-by", &Standing::github(Some("CONTRIBUTOR"))));
        assert!(!t.trusts("", &Standing::default()));
    }

    #[tokio::test]
    async fn untrusted_reviews_are_held_and_decide_nothing() {
        let t = Trust::named(&Project::new("widgets", "/w"), &github(), &[]);
        let all = Reviews {
            state: ReviewState::ChangesRequested,
            items: vec![review(1, "lead", "OWNER", "APPROVED"), review(2, "drive-by", "NONE", "CHANGES_REQUESTED")],
            comments: vec![comment(10, "drive-by", "NONE", 2), comment(11, "lead", "OWNER", 1)],
        };
        let (trusted, held) = t.split(&github(), all);
        assert_eq!(trusted.state, ReviewState::Approved, "the outsider's request for changes asks for nothing");
        assert_eq!(trusted.items.iter().map(|r| r.id).collect::<Vec<_>>(), vec![1]);
        assert_eq!(trusted.comments.iter().map(|c| c.id).collect::<Vec<_>>(), vec![11]);
        assert_eq!((held.items[0].id, held.comments[0].id), (2, 10));

        let outsider_approval = Reviews {
            state: ReviewState::Approved,
            items: vec![review(3, "drive-by", "NONE", "APPROVED")],
            comments: vec![],
        };
        assert_eq!(t.split(&github(), outsider_approval).0.state, ReviewState::None, "approves nothing");
    }
}
