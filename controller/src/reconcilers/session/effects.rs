//! What reactions decided, carried out once the status that records it is written: a decided
//! merge is made once, with the head sha it was decided for — a head that moved, or a merge GitHub
//! refuses, is recorded as `Merged` False with the reason and never retried with the same sha. A
//! controller that crashed in between finds the record and finishes it. (The notifications that
//! status records go out from their own worker, `crate::outbox`, which the reconcile hands the
//! written session to.)

use std::time::Duration;

use aoctl_api::condition::types;
use aoctl_api::notification::MergeStatus;
use aoctl_api::project::Project;
use aoctl_api::reactions::MergeMethod;
use aoctl_api::session::PullRequestState;
use aoctl_api::{ConditionStatus, EventType, Session, SessionStatus, Time};
use aoctl_store::StoreError;

use super::{cond, Context as Ctx, Error};

/// `status.merge.result` (and the `Merged` reason) of a merge that was made.
pub(super) const MERGED: &str = "Merged";
/// The head moved away from the approved sha before the merge (GitHub's 409, or seen first).
pub(super) const HEAD_MOVED: &str = "HeadMoved";
/// GitHub answered 405: not mergeable (branch protection, conflicts, a draft, closed).
pub(super) const NOT_MERGEABLE: &str = "NotMergeable";
/// Writes of the results tried before giving up to the next reconcile.
const WRITE_TRIES: usize = 3;

/// Makes the merge `s.status` (as written) records and has not made yet; how soon to look again.
pub(super) async fn run(s: Session, ctx: &Ctx) -> Result<Option<Duration>, Error> {
    let Some(mut m) = s.status.merge.clone().filter(|m| m.result.is_none()) else { return Ok(None) };
    let project = match ctx.store.get_typed::<Project>(&s.spec.project).await {
        Ok(p) => p,
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut st = s.status.clone();
    let later = match merge(&s, &project, ctx, &st, &mut m).await {
        Some(retry) => retry,
        None => {
            if let Some(reason) = m.result.as_deref().filter(|r| *r != MERGED) {
                let msg = m.message.clone().unwrap_or_default();
                cond(&mut st, &s, types::MERGED, ConditionStatus::False, reason, msg);
            }
            // Read the pull request again at once: merged, or with its new head.
            let mut memo = ctx.state.pr_memo(&s.metadata.name);
            memo.next_poll = None;
            ctx.state.set_pr_memo(&s.metadata.name, memo);
            Duration::ZERO
        }
    };
    st.merge = Some(m.clone());
    if st != s.status {
        write(s, st, m, ctx).await?;
    }
    Ok(Some(later))
}

/// Writes the result; on a conflict, carries it onto the newer status and tries again.
async fn write(s: Session, st: SessionStatus, merge: MergeStatus, ctx: &Ctx) -> Result<(), Error> {
    let mut next = s;
    next.status = st.clone();
    for _ in 0..WRITE_TRIES {
        match ctx.store.update_status_typed(&next).await {
            Ok(_) => return Ok(()),
            Err(e) if e.is_conflict() => {
                let fresh: Session = ctx.store.get_typed(&next.metadata.name).await?;
                next = fresh;
                if let Some(cur) = next.status.merge.as_mut() {
                    if cur.sha == merge.sha && cur.result.is_none() {
                        *cur = merge.clone();
                        if let Some(c) = st.conditions.iter().find(|c| c.type_ == types::MERGED) {
                            aoctl_api::condition::set_condition(&mut next.status.conditions, c.clone());
                        }
                    }
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    // A result not recorded leaves the merge pending: the next reconcile looks at the pull request
    // again, and finds it merged, or its head moved.
    Ok(())
}

fn finish(m: &mut MergeStatus, result: &str, message: String) {
    m.result = Some(result.to_string());
    m.message = Some(message);
    m.done_at = Some(Time::now());
}

fn forge_method(m: MergeMethod) -> aoctl_forge_types::MergeMethod {
    match m {
        MergeMethod::Merge => aoctl_forge_types::MergeMethod::Merge,
        MergeMethod::Squash => aoctl_forge_types::MergeMethod::Squash,
        MergeMethod::Rebase => aoctl_forge_types::MergeMethod::Rebase,
    }
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// Makes the recorded merge, or records why it was not made; `Some(wait)` when it is to be tried
/// again later (GitHub unavailable or rate-limited: the same decision, not a refusal).
async fn merge(s: &Session, project: &Project, ctx: &Ctx, st: &SessionStatus, m: &mut MergeStatus) -> Option<Duration> {
    let Some(pr) = st.pull_request.as_ref() else { return Some(Duration::from_secs(10)) };
    match pr.state {
        // Merged already (by a merge a crashed controller made, or by a person).
        PullRequestState::Merged => {
            finish(m, MERGED, format!("pull request #{} is merged", pr.number));
            return None;
        }
        PullRequestState::Closed => {
            finish(m, NOT_MERGEABLE, format!("pull request #{} was closed", pr.number));
            return None;
        }
        PullRequestState::Open => {}
    }
    let head = pr.head_sha.as_deref().unwrap_or_default();
    if head != m.sha {
        let msg = format!("the head moved from {} to {} before the merge", short(&m.sha), short(head));
        ctx.recorder.publish(s, EventType::Warning, HEAD_MOVED, &msg).await;
        finish(m, HEAD_MOVED, msg);
        return None;
    }
    let client = match ctx.forges.forge(project) {
        Ok(Some(c)) => c,
        Ok(None) => {
            finish(m, NOT_MERGEABLE, "the project has no forge (spec.repo or spec.gitlab)".to_string());
            return None;
        }
        Err(e) => {
            m.message = Some(e.to_string());
            return Some(Duration::from_secs(10));
        }
    };
    let key = "approved-and-green";
    match client.merge(pr.number, forge_method(m.method), &m.sha).await {
        Ok(sha) => {
            ctx.metrics.reactions.with_label_values(&[key, "merge", "success"]).inc();
            let msg = format!("merged PR #{} at {} as {}", pr.number, short(&m.sha), short(&sha));
            ctx.recorder.publish(s, EventType::Normal, "MergedByReaction", &msg).await;
            finish(m, MERGED, msg);
            None
        }
        Err(e) if e.is_transient() => {
            ctx.metrics.reactions.with_label_values(&[key, "merge", "error"]).inc();
            m.message = Some(e.to_string());
            Some(e.retry_after().unwrap_or(Duration::from_secs(10)).max(Duration::from_secs(1)))
        }
        Err(e) => {
            ctx.metrics.reactions.with_label_values(&[key, "merge", "refused"]).inc();
            let reason = if e.head_changed() {
                HEAD_MOVED
            } else if e.not_mergeable() {
                NOT_MERGEABLE
            } else {
                e.reason()
            };
            let msg = format!("merge of PR #{} at {} refused: {e}", pr.number, short(&m.sha));
            ctx.recorder.publish(s, EventType::Warning, reason, &msg).await;
            finish(m, reason, msg);
            None
        }
    }
}
