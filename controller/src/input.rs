//! `aoctl send`: a message typed into a session's agent at once when nothing waits before it,
//! else queued in the session's inbox for its reconcile to type in turn (see [`crate::typing`]).

use aoctl_api::condition::{self, types};
use aoctl_api::session::{ActivityState, Phase};
use aoctl_api::{Project, Session};
use aoctl_runtimes::{agents, Handle};
use aoctl_store::{Store, StoreError};

use crate::machine::{agent_of, input_style, Machine};
use crate::metrics::Metrics;
use crate::typing::{type_message, TypingError, What};

/// What [`send_or_queue`] did with a message.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    /// Typed into the agent, and its delivery verified.
    Delivered,
    /// Written to the session's inbox as message `seq`; the session's reconcile types it once the
    /// first prompt is delivered (`prompt_done` says whether it is) and the `ahead` messages queued
    /// before it are.
    Queued { seq: u64, ahead: usize, prompt_done: bool },
}

/// Why [`send_or_queue`] typed nothing and queued nothing, or failed.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The agent waits for its usage limit to reset; nothing is typed into it until then.
    #[error("session \"{name}\" is rate-limited until {until}; nothing was typed (evidence: {evidence})")]
    RateLimited { name: String, until: String, evidence: String },
    /// No agent runs, and none will without a change to the session.
    #[error("session \"{name}\" has no running agent (phase {phase})")]
    WillNotRun { name: String, phase: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Typing(#[from] TypingError),
}

/// Types `text` into the agent of session `name` and verifies its delivery, or queues it
/// durably when the agent has not had its first prompt yet or messages wait before it (and wakes
/// the session's reconcile through `wake`, which types them in order). Refuses a session that is
/// rate-limited, or has no agent and will not have one. A message whose typing failed is taken
/// out of the inbox, so it is not typed again.
pub async fn send_or_queue(
    store: &Store,
    machine: &dyn Machine,
    metrics: &Metrics,
    wake: &aoctl_engine::Trigger,
    name: &str,
    text: &str,
) -> Result<Sent, SendError> {
    let s: Session = store.get_typed(name).await?;
    if let Some(a) = s.status.activity.as_ref().filter(|a| a.state == ActivityState::RateLimited) {
        let until = a.resets_at.map_or_else(|| "an unknown time".to_string(), |t| t.to_string());
        return Err(SendError::RateLimited { name: name.to_string(), until, evidence: a.evidence.clone() });
    }
    let running = condition::is_true(&s.status.conditions, types::RUNTIME_READY);
    let rt_status = s.status.runtime.clone().filter(|_| running);
    if rt_status.is_none() && !will_run(&s) {
        let phase = s.status.phase.map_or("Pending", |p| p.as_str()).to_string();
        return Err(SendError::WillNotRun { name: name.to_string(), phase });
    }
    let files = machine.files().typing(name);
    let lock = machine.typing().lock(name).await;
    let queued = files.enqueue(text).await?;
    let ahead = files.queued().await?.len() - 1;
    let Some(rt_status) = rt_status.filter(|_| files.prompt_done() && ahead == 0) else {
        drop(lock);
        wake.trigger(name);
        return Ok(Sent::Queued { seq: queued.seq, ahead, prompt_done: files.prompt_done() });
    };
    let project: Option<Project> = store.get_typed(&s.spec.project).await.ok();
    let rt = machine.runtime_for(&s, project.as_ref(), rt_status.kind).await.map_err(TypingError::from)?;
    let (style, adapter) = input_style(&agent_of(&s, project.as_ref()));
    let prepared = agents::prepare_text(adapter, text);
    let handle = Handle(rt_status.handle.clone());
    let sent = type_message(&files, &*rt, &handle, &prepared, &style, What::Queued(queued.seq)).await;
    metrics.runtime_op(rt_status.kind, "send", sent.is_ok());
    if sent.is_err() {
        // Answered with the error: not typed again by the reconcile.
        files.drop_queued(queued.seq).await?;
    }
    sent?;
    Ok(Sent::Delivered)
}

/// Whether a session without a running agent will have one without a change to it: it is not
/// stopped, deleted, finished or failed, and its project is ready (it may wait for a slot).
fn will_run(s: &Session) -> bool {
    let blocked = ["ProjectNotFound", "ProjectNotReady"];
    let ready = condition::find(&s.status.conditions, types::READY);
    let phase = s.status.phase.unwrap_or(Phase::Pending);
    !s.spec.stopped
        && s.metadata.deletion_timestamp.is_none()
        && ![Phase::Failed, Phase::Merged, Phase::Closed, Phase::Stopped, Phase::Terminating].contains(&phase)
        && ready.is_some_and(|c| !blocked.contains(&c.reason.as_str()))
}
