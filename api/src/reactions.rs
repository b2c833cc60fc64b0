//! What happens when a session's PR or agent changes state: reaction keys and their defaults.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::Duration;

/// What a reaction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReactionAction {
    /// Type a message with the evidence into the session's agent.
    SendToAgent,
    /// Tell the project's notifiers.
    Notify,
    /// Merge the pull request.
    Merge,
}

/// One reaction's settings; every field is optional so a project or session overrides per key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Reaction {
    /// Whether the reaction runs on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<ReactionAction>,
    /// How often the agent is sent the same kind of event before escalating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// Escalate to the notifiers when unresolved for this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_after: Option<Duration>,
    /// For `agent-stuck`: idle time after which the agent counts as stuck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<Duration>,
    /// Message template sent to the agent; `{evidence}` is replaced with the details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For `action: merge`: `merge`, `squash` or `rebase`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_method: Option<MergeMethod>,
    /// For `ci-failed`: how often a failed GitHub Actions job whose log shows a lost runner, a
    /// timeout or a network error is re-run before the agent is told (default 0: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_failed_jobs: Option<u32>,
}

/// How a pull request is merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MergeMethod {
    Merge,
    Squash,
    Rebase,
}

/// Reaction settings by key. Absent keys take the defaults of [`Reactions::defaults`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Reactions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_failed: Option<Reaction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes_requested: Option<Reaction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_conflicts: Option<Reaction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_and_green: Option<Reaction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_stuck: Option<Reaction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_needs_input: Option<Reaction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_exited: Option<Reaction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_closed: Option<Reaction>,
    /// The session's branch changes files another live session of the project changes too
    /// (`Overlapping`). Off unless configured; its action is `notify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<Reaction>,
}

impl Reactions {
    /// The defaults of the product contract.
    pub fn defaults() -> Reactions {
        use ReactionAction::*;
        let r = |auto: Option<bool>, action, retries, escalate: Option<u64>, threshold: Option<u64>| {
            Some(Reaction {
                auto,
                action: Some(action),
                retries,
                escalate_after: escalate.map(Duration::from_secs),
                threshold: threshold.map(Duration::from_secs),
                message: None,
                merge_method: None,
                rerun_failed_jobs: None,
            })
        };
        Reactions {
            ci_failed: r(Some(true), SendToAgent, Some(2), Some(1800), None),
            changes_requested: r(Some(true), SendToAgent, None, Some(1800), None),
            merge_conflicts: r(Some(true), SendToAgent, None, None, None),
            approved_and_green: r(Some(false), Notify, None, None, None),
            agent_stuck: r(None, Notify, None, None, Some(600)),
            agent_needs_input: r(None, Notify, None, None, None),
            agent_exited: r(None, Notify, None, None, None),
            pr_closed: r(None, Notify, None, None, None),
            overlap: None,
        }
    }

    /// What a session reacts with: the defaults, overlaid by its project's reactions, then by its
    /// own.
    pub fn effective(project: Option<&Reactions>, session: Option<&Reactions>) -> Reactions {
        let mut r = Reactions::defaults();
        for over in [project, session].into_iter().flatten() {
            r = r.overlay(over);
        }
        r
    }

    /// Field-by-field overlay: every field set in `over` wins over `self`.
    pub fn overlay(&self, over: &Reactions) -> Reactions {
        fn one(base: &Option<Reaction>, over: &Option<Reaction>) -> Option<Reaction> {
            match (base, over) {
                (b, None) => b.clone(),
                (None, Some(o)) => Some(o.clone()),
                (Some(b), Some(o)) => Some(Reaction {
                    auto: o.auto.or(b.auto),
                    action: o.action.or(b.action),
                    retries: o.retries.or(b.retries),
                    escalate_after: o.escalate_after.or(b.escalate_after),
                    threshold: o.threshold.or(b.threshold),
                    message: o.message.clone().or_else(|| b.message.clone()),
                    merge_method: o.merge_method.or(b.merge_method),
                    rerun_failed_jobs: o.rerun_failed_jobs.or(b.rerun_failed_jobs),
                }),
            }
        }
        Reactions {
            ci_failed: one(&self.ci_failed, &over.ci_failed),
            changes_requested: one(&self.changes_requested, &over.changes_requested),
            merge_conflicts: one(&self.merge_conflicts, &over.merge_conflicts),
            approved_and_green: one(&self.approved_and_green, &over.approved_and_green),
            agent_stuck: one(&self.agent_stuck, &over.agent_stuck),
            agent_needs_input: one(&self.agent_needs_input, &over.agent_needs_input),
            agent_exited: one(&self.agent_exited, &over.agent_exited),
            pr_closed: one(&self.pr_closed, &over.pr_closed),
            overlap: one(&self.overlap, &over.overlap),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_keeps_unset_fields() {
        let over =
            Reactions { ci_failed: Some(Reaction { retries: Some(5), ..Default::default() }), ..Default::default() };
        let r = Reactions::defaults().overlay(&over);
        let ci = r.ci_failed.unwrap();
        assert_eq!(ci.retries, Some(5));
        assert_eq!(ci.action, Some(ReactionAction::SendToAgent));
        assert_eq!(ci.escalate_after, Some(Duration::from_secs(1800)));
    }

    #[test]
    fn overlap_is_off_unless_configured() {
        assert_eq!(Reactions::defaults().overlap, None);
        let over = Reactions { overlap: Some(Reaction::default()), ..Default::default() };
        assert_eq!(Reactions::defaults().overlay(&over).overlap, Some(Reaction::default()));
    }
}
