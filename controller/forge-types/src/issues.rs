//! Tracker issues, whichever tracker holds them: what a session's first prompt and an issue
//! source read of one, and who opened it and labelled it.

use crate::Standing;

/// The title, body, labels, state and author of a tracker issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// The number within its project or team (GitHub `#42`, GitLab `#42`, Linear `ENG-42`'s 42).
    pub number: u64,
    /// How the tracker names it: `#42`, or Linear's identifier `ENG-42`.
    pub reference: String,
    pub title: String,
    /// Empty when the issue has no description.
    pub body: String,
    pub url: String,
    /// The labels' names.
    pub labels: Vec<String>,
    /// Whether it is still open: GitHub `open`, GitLab `opened`, a Linear state that is neither
    /// completed nor canceled.
    pub open: bool,
    /// Who opened it; `None` when the tracker does not say (a deleted account).
    pub author: Option<IssueAuthor>,
    /// When it last changed, as the tracker spells the time; applying a label changes it. Empty
    /// when the tracker does not say.
    pub updated_at: String,
}

/// Who opened an issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssueAuthor {
    /// Their login or username.
    pub login: String,
    /// Their numeric id, where the tracker's access queries take one (GitLab).
    pub id: Option<u64>,
    /// What the tracker says of their access to the repository; `None` when it must be asked
    /// (GitLab issues do not carry it).
    pub standing: Option<Standing>,
}

/// One label applied to or removed from an issue, and by whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelEvent {
    pub label: String,
    /// The login or username of who did it.
    pub actor: String,
    /// Their numeric id, where the tracker gives one.
    pub actor_id: Option<u64>,
    /// Applied (`true`) or removed.
    pub added: bool,
}

/// Who last applied `label` (matched without regard to case) among `events`, oldest first, if
/// it is still applied by them: a later removal undoes it.
pub fn last_applied_by<'a>(events: &'a [LabelEvent], label: &str) -> Option<&'a LabelEvent> {
    match events.iter().rev().find(|e| e.label.eq_ignore_ascii_case(label)) {
        Some(e) if e.added => Some(e),
        _ => None,
    }
}

/// Which issues a list takes by state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IssueStateFilter {
    #[default]
    Open,
    Closed,
    All,
}

/// The issues a list found, newest first, and whether the tracker's answer changed since the last
/// time the same list was read through the same budget (false when every page answered 304).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssueList {
    pub issues: Vec<Issue>,
    pub changed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(label: &str, actor: &str, added: bool) -> LabelEvent {
        LabelEvent { label: label.into(), actor: actor.into(), actor_id: None, added }
    }

    #[test]
    fn the_last_application_of_a_label_counts_and_a_removal_undoes_it() {
        let events = vec![event("agent", "outsider", true), event("bug", "lead", true)];
        assert_eq!(last_applied_by(&events, "Agent").map(|e| e.actor.as_str()), Some("outsider"));
        let mut relabelled = events.clone();
        relabelled.extend([event("agent", "lead", false), event("agent", "lead", true)]);
        assert_eq!(last_applied_by(&relabelled, "agent").map(|e| e.actor.as_str()), Some("lead"));
        relabelled.push(event("agent", "outsider", false));
        assert_eq!(last_applied_by(&relabelled, "agent"), None, "removed since");
        assert_eq!(last_applied_by(&events, "docs"), None);
    }
}
