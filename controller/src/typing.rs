//! The one path by which anything is typed into a session's agent — its first prompt, the
//! messages of `aoctl send` and the messages of reactions — so that nothing is typed twice or
//! interleaved, across crashes too.
//!
//! Typing into a session is serialized by a lock per session ([`Typing::lock`]), held from the
//! check of what may be typed until the message was submitted and its outcome recorded. Messages of
//! `aoctl send` are first written to the session's inbox (`<session dir>/inbox/<seq>.json`, flushed
//! before it is answered), and typed in order: at once when the first prompt was delivered and
//! nothing is queued before them, else after the first prompt, by the session's reconcile.
//!
//! Before typing, a journal (`<session dir>/typing.json`) records what is typed, the needle its
//! delivery is verified by and the transcript's length. A controller killed at any point leaves:
//! - the journal, nothing typed: the transcript past the recorded length does not show the text,
//!   so the journal is dropped and the message is typed again (it was not);
//! - the journal, the text typed (on the input line, or echoed in the transcript since the recorded
//!   length), perhaps submitted: the submit key is pressed once — on an agent that got the message
//!   that is an empty line, which agents ignore — and the message is recorded as delivered, never
//!   typed again.
//!
//! [`recover`] does this before anything else is typed. An agent that does not echo what is typed
//! into it leaves no trace to tell the first case from the third; its message is typed again.
//! A first prompt whose delivery was not seen (`NotDelivered`: no echo, no change on screen within
//! the verification's time) keeps its journal too, so the next attempt starts with [`recover`]: an
//! agent that echoed it late (a slow console) gets the submit key, not the prompt a second time.
//!
//! Only the replica that leads types (`crate::input`): the others add to the inbox, which
//! replicas of one node share with their data folder, and its reconcile types what they added. So
//! the journal has one writer. Any process may add to an inbox: a message's number is taken by
//! linking its file into place, which fails when another took the number first. A queued message
//! whose typing failed leaves its error beside it (`<seq>.failed`) until it is delivered, for a
//! replica that waits for its delivery ([`Files::outcome`]).
//!
//! Everything that types — the first prompt, `aoctl send` and its inbox, reactions, the resume
//! after a usage limit — does it through one verb, [`Keyboard::type_in`]: under the session's
//! typing lock (held by the [`Keyboard`]) it finishes what a killed controller was typing, skips a
//! message whose marker shows it was typed before or whose turn has not come, prepares the text
//! for the agent, types it and verifies its delivery, counts it in the runtime metric and
//! publishes its event. What differs between them is a [`How`].
//!
//! The inbox, the journal and the markers are read and written by
//! `aoctl_runtimes::session_files`; this module decides what they say.
//!
//! `crate::input::send_or_queue` is `aoctl send`: the rules of what may be typed into a session
//! now, what waits in its inbox, and what is refused.

use std::collections::HashMap;
use std::sync::Arc;

use aoctl_agents::InputStyle;
use aoctl_api::session::RuntimeKind;
use aoctl_api::{EventType, Session};
pub(crate) use aoctl_runtimes::session_files::{
    inbox_message_of, FilesError, Journal, Outcome, TypingFiles as Files, What,
};
use aoctl_runtimes::{Handle, Runtime, RuntimeError};
use parking_lot::Mutex;
use tokio::sync::OwnedMutexGuard;

use crate::metrics::Metrics;
use crate::recorder::Recorder;

#[derive(Debug, thiserror::Error)]
pub(crate) enum TypingError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Files(#[from] FilesError),
}

/// The typing locks of every session and the layout of their files.
#[derive(Default)]
pub(crate) struct Typing {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Typing {
    /// Waits for the session's typing lock; first come, first served.
    pub(crate) async fn lock(&self, session: &str) -> OwnedMutexGuard<()> {
        let lock = self.locks.lock().entry(session.to_string()).or_default().clone();
        lock.lock_owned().await
    }

    /// Drops the lock of a deleted session.
    pub(crate) fn forget(&self, session: &str) {
        self.locks.lock().remove(session);
    }
}

/// Types `text` and records its delivery as `what` says, under the journal described in the
/// module documentation. The caller holds the session's typing lock and has run [`recover`].
pub(crate) async fn type_message(
    files: &Files,
    rt: &dyn Runtime,
    h: &Handle,
    text: &str,
    style: &InputStyle,
    what: What,
) -> Result<(), TypingError> {
    let offset = files.transcript_len().await;
    let journal = Journal { what, text: text.to_string(), submit_key: style.submit_key.clone(), offset };
    files.write_journal(&journal).await?;
    let sent = rt.send(h, text, style).await;
    match (&sent, what) {
        (Ok(()), _) => delivered(files, what).await?,
        // For a replica that waits for its delivery; a try that succeeds later forgets it.
        (Err(e), What::Queued(seq)) => {
            let why = match e {
                RuntimeError::NotDelivered { message, .. } => message.clone(),
                e => e.to_string(),
            };
            files.record_failure(seq, &why).await;
        }
        (Err(_), _) => {}
    }
    // A first prompt that was typed but not seen arriving is looked for again before it is typed
    // again: the journal stays, and `recover` finds it echoed if it arrived late.
    let unseen = matches!(sent, Err(RuntimeError::NotDelivered { .. })) && what == What::Prompt;
    if !unseen {
        files.remove_journal().await?;
    }
    Ok(sent?)
}

/// Records that a message was delivered.
async fn delivered(files: &Files, what: What) -> Result<(), TypingError> {
    match what {
        What::Prompt => files.mark_prompt_done().await?,
        What::Queued(seq) => {
            files.forget_failure(seq).await;
            files.drop_queued(seq).await?
        }
        What::Marked => {}
    }
    Ok(())
}

/// What [`recover`] found of a message typed by a controller that was killed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Recovered {
    /// It had not been typed: it is typed again in turn.
    NotTyped(What),
    /// It was typed (and perhaps submitted): the submit key was pressed once more, and it is
    /// recorded as delivered.
    Typed(What),
}

/// Finishes what a killed controller was typing, by the rules of the module documentation;
/// `None` when it was typing nothing. The caller holds the session's typing lock.
pub(crate) async fn recover(files: &Files, rt: &dyn Runtime, h: &Handle) -> Result<Option<Recovered>, TypingError> {
    let Some(j) = files.read_journal().await? else { return Ok(None) };
    let seen = files.transcript_since(j.offset).await?;
    // Echoed is not submitted: a shell's line discipline echoes a paste before anything reads it,
    // and a screen may show a message that is still being edited. Pressing submit once more is
    // an empty line to an agent that did get it, which agents ignore.
    let typed = rt.pending(h, &j.text).await? || aoctl_runtimes::echoed(&seen, &j.text);
    if typed {
        rt.keys(h, &[j.submit_key.as_str()]).await?;
        delivered(files, j.what).await?;
    }
    files.remove_journal().await?;
    Ok(Some(if typed { Recovered::Typed(j.what) } else { Recovered::NotTyped(j.what) }))
}

/// The agent a message is typed into, and what records the typing: the runtime metric always,
/// the session's events where there is a recorder.
pub(crate) struct Agent<'a> {
    pub session: &'a Session,
    /// The session's typing files.
    pub files: Files,
    pub rt: &'a dyn Runtime,
    pub handle: &'a Handle,
    pub kind: RuntimeKind,
    /// How the agent takes input.
    pub style: InputStyle,
    /// Its adapter, which prepares what is typed into it (`None`: a program of its own).
    pub adapter: Option<&'static aoctl_agents::Adapter>,
    pub metrics: &'a Metrics,
    /// Publishes the events of its typing; `None` publishes none (`aoctl send` answers instead).
    pub recorder: Option<&'a Recorder>,
}

/// How one message is typed: what differs between the things that type into an agent (the first
/// prompt, `aoctl send` and its inbox, reactions, the resume after a usage limit).
#[derive(Clone, Debug)]
pub(crate) struct How<'a> {
    /// What its delivery records.
    pub what: What,
    /// The text still goes through the adapter's preparation (the first prompt comes prepared).
    pub prepare: bool,
    /// A marker that, found in the transcript, says the message was typed before (by a controller
    /// that was killed before it recorded so): it is not typed again.
    pub marker: Option<&'a str>,
    /// It waits its turn: after the first prompt and the messages of `aoctl send` queued before.
    pub in_turn: bool,
    /// The agent's screen waits for a person: nothing is typed into it.
    pub held: bool,
    /// The message of the event its delivery publishes (`PromptDelivered` for the first prompt,
    /// else `SentToAgent`); `None` publishes none.
    pub event: Option<String>,
}

impl How<'_> {
    /// A message of `what`, prepared for the agent, typed at once, with no event.
    pub(crate) fn of(what: What) -> Self {
        How { what, prepare: true, marker: None, in_turn: false, held: false, event: None }
    }
}

/// What [`Keyboard::type_in`] did with a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Typed {
    /// Typed, and its delivery verified.
    Delivered,
    /// Its marker is in the transcript: it was typed before, and is not typed again.
    Before,
    /// Not its turn yet ([`How::in_turn`]): nothing was typed.
    NotYet,
    /// The agent's screen waits for a person ([`How::held`]): nothing was typed.
    Held,
}

/// A session's agent with its typing lock held, until it is dropped: the one way anything is
/// typed into an agent ([`Keyboard::type_in`]).
pub(crate) struct Keyboard<'a> {
    agent: Agent<'a>,
    _turn: OwnedMutexGuard<()>,
}

impl<'a> Keyboard<'a> {
    /// Waits for the session's typing lock, of `locks`.
    pub(crate) async fn lock(locks: &Typing, agent: Agent<'a>) -> Keyboard<'a> {
        let turn = locks.lock(&agent.session.metadata.name).await;
        Keyboard::holding(agent, turn)
    }

    /// Types into the agent under a typing lock the caller took (`aoctl send` holds it while it
    /// queues the message).
    pub(crate) fn holding(agent: Agent<'a>, turn: OwnedMutexGuard<()>) -> Keyboard<'a> {
        Keyboard { agent, _turn: turn }
    }

    /// The session's typing files.
    pub(crate) fn files(&self) -> &Files {
        &self.agent.files
    }

    /// Finishes what a killed controller was typing ([`recover`]), with an event saying what it
    /// found.
    pub(crate) async fn recover(&self) -> Result<Option<Recovered>, TypingError> {
        let a = &self.agent;
        let found = recover(&a.files, a.rt, a.handle).await?;
        if let (Some(found), Some(recorder)) = (&found, a.recorder) {
            let (reason, msg) = found.event();
            recorder.publish(a.session, EventType::Normal, reason, &msg).await;
        }
        Ok(found)
    }

    /// Types `text` into the agent as `how` says: finishes what a killed controller was typing,
    /// looks for the message's marker and its turn, prepares the text, types it and verifies its
    /// delivery (see [`type_message`]), counts it in the runtime metric and publishes its event.
    pub(crate) async fn type_in(&self, text: &str, how: &How<'_>) -> Result<Typed, TypingError> {
        let a = &self.agent;
        self.recover().await?;
        if let Some(marker) = how.marker {
            let before = a.files.transcript_shows(marker).await?;
            tracing::debug!(session = %a.session.metadata.name, %marker, before, "typing a marked message");
            if before {
                return Ok(Typed::Before);
            }
        }
        if how.in_turn && (!a.files.prompt_done() || !a.files.queued().await?.is_empty()) {
            return Ok(Typed::NotYet);
        }
        if how.held {
            return Ok(Typed::Held);
        }
        let text = if how.prepare { aoctl_agents::prepare_text(a.adapter, text) } else { text.to_string() };
        let sent = type_message(&a.files, a.rt, a.handle, &text, &a.style, how.what).await;
        a.metrics.runtime_op(a.kind, "send", sent.is_ok());
        sent?;
        if let (Some(msg), Some(recorder)) = (&how.event, a.recorder) {
            recorder.publish(a.session, EventType::Normal, delivered_reason(how.what), msg).await;
        }
        Ok(Typed::Delivered)
    }
}

/// The reason of the event of a delivery.
fn delivered_reason(what: What) -> &'static str {
    if what == What::Prompt {
        "PromptDelivered"
    } else {
        "SentToAgent"
    }
}

impl Recovered {
    /// The reason and message of the event that tells what was found.
    fn event(&self) -> (&'static str, String) {
        let what = |w: &What| match w {
            What::Prompt => "the first prompt".to_string(),
            What::Queued(seq) => format!("message {seq} of aoctl send"),
            What::Marked => "a message".to_string(),
        };
        match self {
            Recovered::NotTyped(w) => {
                ("TypingResumed", format!("{} was not typed before a restart; it is typed again", what(w)))
            }
            Recovered::Typed(w) => (
                delivered_reason(*w),
                format!("{} was typed before a restart; it was submitted, not typed again", what(w)),
            ),
        }
    }
}
