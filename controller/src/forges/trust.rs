//! Who may speak to a project's agents: the people the forge gives write access (GitHub's
//! `author_association` `OWNER`, `MEMBER` or `COLLABORATOR`; GitLab Developer or above), the
//! project's own bots (the identity of its token, its reviewer identity, GitHub Actions) and
//! those `spec.trust.users` lists. What anyone else writes on a change is held back from the
//! agent ([`Trust::split`]), and an issue source takes an issue someone else opened only once a
//! trusted person applied one of its labels ([`Trust::vouch`]).

use aoctl_api::project::Project;
use aoctl_api::session::ReviewState;
use aoctl_forge_types::{last_applied_by, Issue, LabelEvent, Reviews, Standing};

use super::{Forge, ForgeError, Hub, Tracker};

/// The bot GitHub Actions posts as: the project's own CI.
pub(crate) const ACTIONS_BOT: &str = "github-actions[bot]";

/// The people and bots a project trusts by name, beyond the forge's writers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Trust {
    /// Lower-cased logins.
    names: Vec<String>,
}

impl Trust {
    /// The names a project trusts: `spec.trust.users` and `bots` (the identities its tokens
    /// speak as), plus its CI's bot on GitHub.
    pub(crate) fn named(project: &Project, forge: &dyn Forge, bots: &[String]) -> Trust {
        let ci = forge.ci_bot().map(str::to_string);
        Trust::listed(project, bots.iter().chain(ci.iter()))
    }

    /// Those a project names (`spec.trust.users`) and the identity of its token: who may vouch
    /// for an issue with a label. Its CI's bot is not among them: a workflow that labels issues
    /// by what they say would let their authors vouch for themselves.
    pub(crate) async fn people(project: &Project, tracker: &dyn Tracker) -> Trust {
        let me = match tracker.forge() {
            Some(forge) => forge.identity().await.ok(),
            None => None,
        };
        Trust::listed(project, me.iter())
    }

    fn listed<'a>(project: &'a Project, more: impl Iterator<Item = &'a String>) -> Trust {
        let listed = project.spec.trust.iter().flat_map(|t| t.users.iter());
        let mut names: Vec<String> = listed.chain(more).map(|n| n.trim().to_ascii_lowercase()).collect();
        names.retain(|n| !n.is_empty());
        names.sort();
        names.dedup();
        Trust { names }
    }

    /// The names a project trusts, its bots' identities asked of the forge (each asked once per
    /// token; an identity that cannot be read is left out, which trusts less, never more).
    pub(crate) async fn of(project: &Project, forge: &dyn Forge, hub: &Hub, review_token_envs: &[&str]) -> Trust {
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
    pub(crate) fn trusts(&self, user: &str, standing: &Standing) -> bool {
        standing.writes || (!user.is_empty() && self.names.iter().any(|n| n.eq_ignore_ascii_case(user)))
    }

    /// Whether an issue source may take `issue`, whose query selects `labels`: its author may
    /// write or is named, or the last to apply one of `labels` may or is. Linear's issues are
    /// its workspace members' and are taken. `people` is [`Trust::people`], asked for only when
    /// the forge does not vouch for the author. Costs, for such an author, one conditional read
    /// of the issue's label events and a (kept) access read per labeller.
    pub(crate) async fn vouch(
        people: &tokio::sync::OnceCell<Trust>,
        project: &Project,
        tracker: &dyn Tracker,
        issue: &Issue,
        labels: &[String],
    ) -> Result<Vouch, ForgeError> {
        let Some(forge) = tracker.forge() else {
            return Ok(Vouch::Author(String::new()));
        };
        let (author, author_id, standing) = match &issue.author {
            Some(a) => (a.login.clone(), a.id, a.standing.clone()),
            None => (String::new(), None, None),
        };
        let standing = match (standing, author_id) {
            (Some(s), _) => s,
            (None, Some(id)) => forge.standing(&author, Some(id)).await?,
            (None, None) => Standing::default(),
        };
        if standing.writes {
            return Ok(Vouch::Author(author));
        }
        let trust = people.get_or_init(|| Trust::people(project, tracker)).await;
        if trust.trusts(&author, &standing) {
            return Ok(Vouch::Author(author));
        }
        let who = if author.is_empty() { "a deleted account".to_string() } else { author.clone() };
        let role = if standing.role.is_empty() { String::new() } else { format!(" ({})", standing.role) };
        if labels.is_empty() {
            let reason = format!(
                "opened by {who}{role}, who may not write to {}; the source selects no label for a maintainer to apply",
                forge.place()
            );
            return Ok(Vouch::Held { author, reason });
        }
        let events: Vec<LabelEvent> = forge.label_events(issue.number).await?;
        for label in labels {
            let Some(event) = last_applied_by(&events, label) else { continue };
            if trust.names.iter().any(|n| n.eq_ignore_ascii_case(&event.actor))
                || forge.standing(&event.actor, event.actor_id).await?.writes
            {
                return Ok(Vouch::Labelled { label: label.clone(), by: event.actor.clone() });
            }
        }
        let reason = format!(
            "opened by {who}{role}, who may not write to {}; waiting for someone who may to apply `{}`",
            forge.place(),
            labels.join("`, `")
        );
        Ok(Vouch::Held { author, reason })
    }

    /// The reviews and comments of trusted authors, with the state they add up to, and those of
    /// everyone else. An untrusted approval approves nothing and an untrusted request for changes
    /// asks for none.
    pub(crate) fn split(&self, forge: &dyn Forge, all: Reviews) -> (Reviews, Reviews) {
        let (items, held_items): (Vec<_>, Vec<_>) =
            all.items.into_iter().partition(|r| self.trusts(&r.user, &r.standing));
        let (comments, held_comments): (Vec<_>, Vec<_>) =
            all.comments.into_iter().partition(|c| self.trusts(&c.user, &c.standing));
        let held = Reviews { state: ReviewState::None, items: held_items, comments: held_comments };
        if held.items.is_empty() && held.comments.is_empty() {
            return (Reviews { state: all.state, items, comments }, held);
        }
        let state = forge.trusted_state(all.state, &items, &comments);
        (Reviews { state, items, comments }, held)
    }
}

/// Why an issue source may take an issue, or why not yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Vouch {
    /// Its author may write to the repository or is named (empty: the tracker's own members).
    Author(String),
    /// Someone who may applied `label`.
    Labelled { label: String, by: String },
    /// Neither, and why.
    Held { author: String, reason: String },
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::project::TrustSpec;
    use aoctl_forge_types::{Review, ReviewComment};

    fn github() -> crate::forges::GitHub {
        let client = aoctl_github::Client::new("http://127.0.0.1:9", None).unwrap();
        crate::forges::GitHub { client, owner: "acme".into(), repo: "widgets".into() }
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

    fn issue(author: Option<(&str, &str)>) -> Issue {
        Issue {
            number: 7,
            reference: "#7".into(),
            title: "Run this".into(),
            body: String::new(),
            url: String::new(),
            labels: vec![],
            open: true,
            author: author.map(|(login, role)| aoctl_forge_types::IssueAuthor {
                login: login.into(),
                id: None,
                standing: Some(Standing::github(Some(role))),
            }),
            updated_at: "2026-01-01T00:00:00Z".into(),
        }
    }

    /// The verdicts that need no request beyond the forge's identity (which fails here, and is
    /// then left out).
    #[tokio::test]
    async fn writers_and_named_authors_vouch_for_their_issues_and_no_one_else_does_without_a_label() {
        let mut project = Project::new("widgets", "/w");
        project.spec.trust = Some(TrustSpec { users: vec!["friend".into()] });
        let tracker = github();
        let vouch = |author| {
            let (project, tracker) = (project.clone(), tracker.clone());
            async move { Trust::vouch(&Default::default(), &project, &tracker, &issue(author), &[]).await.unwrap() }
        };
        assert_eq!(vouch(Some(("lead", "OWNER"))).await, Vouch::Author("lead".into()));
        assert_eq!(vouch(Some(("friend", "NONE"))).await, Vouch::Author("friend".into()));
        let Vouch::Held { author, reason } = vouch(Some(("drive-by", "CONTRIBUTOR"))).await else { panic!() };
        assert_eq!(author, "drive-by");
        assert!(reason.contains("drive-by (CONTRIBUTOR)") && reason.contains("no label"), "{reason}");
        let Vouch::Held { reason, .. } = vouch(None).await else { panic!() };
        assert!(reason.contains("a deleted account"), "{reason}");

        let linear = crate::forges::Linear { client: aoctl_linear::Client::new("http://127.0.0.1:9", None).unwrap() };
        let v = Trust::vouch(&Default::default(), &project, &linear, &issue(None), &[]).await.unwrap();
        assert_eq!(v, Vouch::Author(String::new()), "Linear's issues are its members'");
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
