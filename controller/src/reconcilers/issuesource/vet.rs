//! Which issues without a session an IssueSource holds back: those whose author the project does
//! not trust and for which no one it trusts applied one of the source's labels
//! ([`Trust::vouch`]), each verdict kept in the source's `State` until the issue changes.

use std::collections::{BTreeMap, HashSet};

use aoctl_api::issuesource::{conditions, HeldIssue};
use aoctl_api::{EventType, IssueSource, Project, Session};
use aoctl_forge_types::Issue;

use super::Context;
use crate::forges::{ForgeError, Tracker, Trust, Vouch};

/// The issues among `matching` without a session (in `mine`) that are held back, oldest first.
/// A new verdict that holds an issue, or lets one in by a label, is recorded as an event.
pub(super) async fn vet(
    source: &IssueSource,
    ctx: &Context,
    project: &Project,
    tracker: &dyn Tracker,
    matching: &BTreeMap<u64, &Issue>,
    mine: &BTreeMap<u64, Session>,
) -> Result<Vec<HeldIssue>, ForgeError> {
    let name = &source.metadata.name;
    let labels = query_labels(source);
    let candidates: HashSet<u64> = matching.keys().filter(|n| !mine.contains_key(n)).copied().collect();
    ctx.state.keep_verdicts(name, &candidates);
    let people = tokio::sync::OnceCell::new();
    let mut held = vec![];
    for (&n, &issue) in matching.iter().filter(|(n, _)| candidates.contains(n)) {
        let vouch = match ctx.state.verdict(name, issue) {
            Some(v) => v,
            None => {
                let vouch = Trust::vouch(&people, project, tracker, issue, &labels).await?;
                let was = ctx.state.judge(name, issue, vouch.clone());
                announce(source, ctx, issue, &vouch, was.as_ref()).await;
                vouch
            }
        };
        if let Vouch::Held { author, reason } = vouch {
            held.push(HeldIssue { issue: n.to_string(), author, reason });
        }
    }
    Ok(held)
}

/// Records an event for a verdict that holds an issue or lets one in by a label, unless the
/// verdict it replaces said the same.
async fn announce(source: &IssueSource, ctx: &Context, issue: &Issue, vouch: &Vouch, was: Option<&Vouch>) {
    match (vouch, was) {
        (Vouch::Held { reason, .. }, was) if !matches!(was, Some(Vouch::Held { .. })) => {
            let msg = format!("issue {}: {reason}", issue.reference);
            ctx.recorder.publish(source, EventType::Warning, conditions::ISSUE_HELD, &msg).await;
        }
        (Vouch::Labelled { label, by }, was) if !matches!(was, Some(Vouch::Labelled { .. })) => {
            let author = issue.author.as_ref().map_or("a deleted account", |a| a.login.as_str());
            let msg = format!("issue {} by {author}: {by} applied `{label}`, so it is taken", issue.reference);
            ctx.recorder.publish(source, EventType::Normal, conditions::ISSUE_VOUCHED, &msg).await;
        }
        _ => {}
    }
}

/// The labels the source's query selects issues by, on a forge.
fn query_labels(source: &IssueSource) -> Vec<String> {
    match &source.spec.gitlab {
        Some(g) => g.labels.clone(),
        None => source.spec.github.labels.clone(),
    }
}
