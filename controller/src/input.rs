//! `aoctl send`: a message typed into a session's agent at once when nothing waits before it,
//! else queued in the session's inbox for its reconcile to type in turn (see [`crate::typing`]).
//!
//! Only the replica that leads types ([`Typist`]): on any other, the message goes to the inbox,
//! which the replicas of one node share with their data folder, and the leader's reconcile types
//! it (the leader's transcript watcher sees it arrive and wakes the session). One the leader
//! would type at once is waited for, within a bound, so the answer says whether it was
//! delivered.

use std::time::Duration;

use aoctl_api::condition::{self, types};
use aoctl_api::session::{ActivityState, Phase};
use aoctl_api::{Project, Session};
use aoctl_runtimes::{Handle, RuntimeError};
use aoctl_store::{Store, StoreError};

use crate::machine::{agent_of, input_style, Machine};
use crate::metrics::Metrics;
use crate::typing::{Agent, How, Keyboard, Outcome, TypingError, What};

/// How often a replica waiting for the leader's delivery of a message looks at the inbox.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// Which process types a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Typist {
    /// This one: it leads (and runs the session's reconcile).
    Here,
    /// The leading replica, of this node: this one queues the message, and waits for the
    /// delivery of one that may be typed now up to `bound`.
    Leader { bound: Duration },
    /// None now: no replica of this node leads. The message waits in the inbox until one does.
    None,
}

/// What a queued message waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waits {
    /// Its turn: the first prompt, or the messages queued before it.
    Turn,
    /// The leading replica, which had not typed it within the bound.
    Leader,
    /// A replica of this node to lead.
    NoLeader,
}

/// What [`send_or_queue`] did with a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Typed into the agent, and its delivery verified.
    Delivered,
    /// Written to the session's inbox as message `seq`; the session's reconcile types it once the
    /// first prompt is delivered (`prompt_done` says whether it is) and the `ahead` messages queued
    /// before it are.
    Queued { seq: u64, ahead: usize, prompt_done: bool, waits: Waits },
}

/// Why [`send_or_queue`] typed nothing and queued nothing, or failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
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

impl From<crate::typing::FilesError> for SendError {
    fn from(e: crate::typing::FilesError) -> SendError {
        SendError::Typing(e.into())
    }
}

/// Types `text` into the agent of session `name` and verifies its delivery, or queues it
/// durably when the agent has not had its first prompt yet or messages wait before it (and wakes
/// the session's reconcile through `wake`, which types them in order). Refuses a session that is
/// rate-limited, or has no agent and will not have one. A message whose typing failed is taken
/// out of the inbox, so it is not typed again. Where `typist` is not this process, the message is
/// only queued, for the leader's reconcile.
pub(crate) async fn send_or_queue(
    store: &Store,
    machine: &dyn Machine,
    metrics: &Metrics,
    wake: &aoctl_engine::Trigger,
    name: &str,
    text: &str,
    typist: Typist,
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
    let ahead = files.queued().await?.iter().filter(|q| q.seq < queued.seq).count();
    let now = rt_status.as_ref().is_some_and(|_| files.prompt_done() && ahead == 0);
    let waits = match typist {
        Typist::Here => Waits::Turn,
        Typist::Leader { bound } if now => {
            drop(lock);
            return delivered_by_leader(&files, name, queued.seq, bound, rt_status).await;
        }
        Typist::Leader { .. } => Waits::Turn,
        Typist::None => Waits::NoLeader,
    };
    let Some(rt_status) = rt_status.filter(|_| now && typist == Typist::Here) else {
        drop(lock);
        wake.trigger(name);
        return Ok(Sent::Queued { seq: queued.seq, ahead, prompt_done: files.prompt_done(), waits });
    };
    let project: Option<Project> = store.get_typed(&s.spec.project).await.ok();
    let rt = machine.runtime_for(&s, project.as_ref(), rt_status.kind).await.map_err(TypingError::from)?;
    let (style, adapter) = input_style(&agent_of(&s, project.as_ref()));
    let handle = Handle(rt_status.handle.clone());
    let (session, kind) = (&s, rt_status.kind);
    let agent = Agent { session, files, rt: &*rt, handle: &handle, kind, style, adapter, metrics, recorder: None };
    let keyboard = Keyboard::holding(agent, lock);
    let files = keyboard.files();
    let sent = keyboard.type_in(text, &How::of(What::Queued(queued.seq))).await;
    if sent.is_err() {
        // Answered with the error: not typed again by the reconcile.
        files.drop_queued(queued.seq).await?;
        files.forget_failure(queued.seq).await;
    }
    sent?;
    Ok(Sent::Delivered)
}

/// Waits up to `bound` for the leading replica to type inbox message `seq` of session `name`:
/// delivered, failed (with the leader's reason), or still queued.
async fn delivered_by_leader(
    files: &crate::typing::Files,
    name: &str,
    seq: u64,
    bound: Duration,
    rt_status: Option<aoctl_api::session::RuntimeStatus>,
) -> Result<Sent, SendError> {
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        match files.outcome(seq).await? {
            Outcome::Delivered => return Ok(Sent::Delivered),
            Outcome::Failed(why) => {
                let runtime = rt_status.map_or(aoctl_runtimes::DEFAULT_RUNTIME, |r| r.kind).as_str();
                let message = format!("message {seq} for session \"{name}\", typed by the leading replica: {why}");
                return Err(TypingError::Runtime(RuntimeError::NotDelivered { runtime, message }).into());
            }
            Outcome::Waiting if tokio::time::Instant::now() >= deadline => {
                let ahead = files.queued().await?.iter().filter(|q| q.seq < seq).count();
                let prompt_done = files.prompt_done();
                return Ok(Sent::Queued { seq, ahead, prompt_done, waits: Waits::Leader });
            }
            Outcome::Waiting => tokio::time::sleep(LOOK_EVERY).await,
        }
    }
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
