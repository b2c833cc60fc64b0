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
//! `crate::input::send_or_queue` is `aoctl send`: the rules of what may be typed into a session
//! now, what waits in its inbox, and what is refused.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use aoctl_api::session::RuntimeKind;
use aoctl_api::{EventType, Session, Time};
use aoctl_runtimes::{agents, transcript, Handle, InputStyle, Runtime, RuntimeError};
use serde::{Deserialize, Serialize};
use tokio::sync::OwnedMutexGuard;

use crate::metrics::Metrics;
use crate::recorder::Recorder;

/// The journal of a message being typed.
const JOURNAL: &str = "typing.json";
/// The folder of the messages waiting to be typed.
const INBOX: &str = "inbox";

/// What became of a message of the inbox, as a replica waiting for its delivery sees it.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It waits in the inbox (perhaps after a failed try that is tried again).
    Waiting,
    /// It was typed and its delivery verified.
    Delivered,
    /// Its typing failed, and it is not typed again: why.
    Failed(String),
}

/// What a message is, for what its delivery records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum What {
    /// The first prompt: its delivery writes the delivered marker.
    Prompt,
    /// An inbox message: its delivery removes it from the inbox.
    Queued(u64),
    /// A message whose marker is looked for in the transcript by its sender (reactions, the resume
    /// after a usage limit): its delivery records nothing more.
    Marked,
}

/// A message of `aoctl send` waiting in a session's inbox.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Queued {
    pub seq: u64,
    pub text: String,
    pub at: Time,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Journal {
    what: What,
    /// The message as typed (its last line is what delivery is verified by).
    text: String,
    submit_key: String,
    /// The transcript's length before typing.
    offset: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum TypingError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a message: {source}")]
    Corrupt { path: PathBuf, source: serde_json::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TypingError + '_ {
    move |source| TypingError::Io { path: path.to_path_buf(), source }
}

/// The typing locks of every session and the layout of their files.
#[derive(Default)]
pub struct Typing {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Typing {
    /// Waits for the session's typing lock; first come, first served.
    pub async fn lock(&self, session: &str) -> OwnedMutexGuard<()> {
        let lock = self.locks.lock().unwrap_or_else(|e| e.into_inner()).entry(session.to_string()).or_default().clone();
        lock.lock_owned().await
    }

    /// Drops the lock of a deleted session.
    pub fn forget(&self, session: &str) {
        self.locks.lock().unwrap_or_else(|e| e.into_inner()).remove(session);
    }
}

/// A session's typing files: its folder, transcript and delivered marker.
pub struct Files {
    pub dir: PathBuf,
    pub transcript: PathBuf,
    pub delivered: PathBuf,
}

impl Files {
    fn journal(&self) -> PathBuf {
        self.dir.join(JOURNAL)
    }

    fn inbox(&self) -> PathBuf {
        self.dir.join(INBOX)
    }

    fn item(&self, seq: u64) -> PathBuf {
        self.inbox().join(format!("{seq:020}.json"))
    }

    /// Where the error of a queued message's failed typing is kept.
    fn failure(&self, seq: u64) -> PathBuf {
        self.inbox().join(format!("{seq:020}.failed"))
    }

    /// What became of inbox message `seq`: it waits while its file is there; once gone it was
    /// delivered, unless its typing failed (the failure is read once, and forgotten).
    pub async fn outcome(&self, seq: u64) -> Result<Outcome, TypingError> {
        let item = self.item(seq);
        if tokio::fs::try_exists(&item).await.map_err(io(&item))? {
            return Ok(Outcome::Waiting);
        }
        let failure = self.failure(seq);
        match tokio::fs::read_to_string(&failure).await {
            Ok(why) => {
                self.forget_failure(seq).await;
                Ok(Outcome::Failed(why))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Outcome::Delivered),
            Err(e) => Err(io(&failure)(e)),
        }
    }

    /// Forgets the failure recorded for inbox message `seq`, if any.
    pub async fn forget_failure(&self, seq: u64) {
        let _ = tokio::fs::remove_file(self.failure(seq)).await;
    }

    /// Whether the first prompt was delivered (or there was none to type).
    pub fn prompt_done(&self) -> bool {
        self.delivered.exists()
    }

    /// The marker of a first prompt that was given on the agent's command line and used up by
    /// its login screen: it is typed once the agent is logged in.
    pub fn retype_marker(&self) -> PathBuf {
        self.dir.join("prompt.retype")
    }

    /// The messages waiting in the inbox, oldest first.
    pub async fn queued(&self) -> Result<Vec<Queued>, TypingError> {
        let dir = self.inbox();
        let mut entries = match tokio::fs::read_dir(&dir).await {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(io(&dir)(e)),
        };
        let mut out = vec![];
        while let Some(e) = entries.next_entry().await.map_err(io(&dir))? {
            let path = e.path();
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let bytes = tokio::fs::read(&path).await.map_err(io(&path))?;
            let q: Queued = serde_json::from_slice(&bytes).map_err(|e| TypingError::Corrupt { path, source: e })?;
            out.push(q);
        }
        out.sort_by_key(|q| q.seq);
        Ok(out)
    }

    /// Removes a message from the inbox.
    pub async fn drop_queued(&self, seq: u64) -> Result<(), TypingError> {
        match tokio::fs::remove_file(self.item(seq)).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&self.item(seq))(e)),
            _ => Ok(()),
        }
    }

    /// Appends a message to the inbox, flushed to disk before this returns. Its number follows
    /// the newest queued one's; when another process (a replica of the same node) takes that
    /// number first, the next one is taken.
    pub async fn enqueue(&self, text: &str) -> Result<Queued, TypingError> {
        let mut seq = self.queued().await?.last().map_or(1, |q| q.seq + 1);
        loop {
            let q = Queued { seq, text: text.to_string(), at: Time::now() };
            let bytes = serde_json::to_vec(&q).expect("a message serializes");
            if create_durably(&self.item(seq), &bytes).await? {
                return Ok(q);
            }
            seq += 1;
        }
    }
}

/// Writes `path` through a temporary file that is flushed and renamed, then flushes the folder (on
/// Unix; a Windows folder cannot be opened as a file, and NTFS journals the rename itself).
async fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), TypingError> {
    let dir = path.parent().expect("a file in a folder").to_path_buf();
    let tmp = path.with_extension("tmp");
    let (bytes, p, t) = (bytes.to_vec(), path.to_path_buf(), tmp.clone());
    let written = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        use std::io::Write;
        std::fs::create_dir_all(&dir)?;
        let mut f = std::fs::File::create(&t)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&t, &p)?;
        #[cfg(unix)]
        std::fs::File::open(&dir)?.sync_all()?;
        Ok(())
    })
    .await
    .map_err(|e| io(path)(std::io::Error::other(e)))?;
    written.map_err(io(&tmp))
}

/// Writes `path` whole, flushed, unless it exists: written aside and linked into place, so no
/// reader sees it part-written and only one of several writers makes it. `false` when it existed.
async fn create_durably(path: &Path, bytes: &[u8]) -> Result<bool, TypingError> {
    static ASIDE: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().expect("a file in a folder").to_path_buf();
    let aside = ASIDE.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_extension(format!("{}.{aside}.tmp", std::process::id()));
    let (bytes, p, t) = (bytes.to_vec(), path.to_path_buf(), tmp.clone());
    let created = tokio::task::spawn_blocking(move || -> std::io::Result<bool> {
        use std::io::Write;
        std::fs::create_dir_all(&dir)?;
        let written = (|| {
            let mut f = std::fs::File::create(&t)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::hard_link(&t, &p)
        })();
        let _ = std::fs::remove_file(&t);
        match written {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(e),
        }
        #[cfg(unix)]
        std::fs::File::open(&dir)?.sync_all()?;
        Ok(true)
    })
    .await
    .map_err(|e| io(path)(std::io::Error::other(e)))?;
    created.map_err(io(&tmp))
}

/// Types `text` and records its delivery as `what` says, under the journal described in the
/// module documentation. The caller holds the session's typing lock and has run [`recover`].
pub async fn type_message(
    files: &Files,
    rt: &dyn Runtime,
    h: &Handle,
    text: &str,
    style: &InputStyle,
    what: What,
) -> Result<(), TypingError> {
    let offset = tokio::fs::metadata(&files.transcript).await.map_or(0, |m| m.len());
    let journal = Journal { what, text: text.to_string(), submit_key: style.submit_key.clone(), offset };
    let path = files.journal();
    write_durably(&path, &serde_json::to_vec(&journal).expect("a journal serializes")).await?;
    let sent = rt.send(h, text, style).await;
    match (&sent, what) {
        (Ok(()), _) => delivered(files, what).await?,
        // For a replica that waits for its delivery; a try that succeeds later forgets it.
        (Err(e), What::Queued(seq)) => {
            let why = match e {
                RuntimeError::NotDelivered { message, .. } => message.clone(),
                e => e.to_string(),
            };
            let _ = tokio::fs::write(files.failure(seq), why).await;
        }
        (Err(_), _) => {}
    }
    // A first prompt that was typed but not seen arriving is looked for again before it is typed
    // again: the journal stays, and `recover` finds it echoed if it arrived late.
    let unseen = matches!(sent, Err(RuntimeError::NotDelivered { .. })) && what == What::Prompt;
    if !unseen {
        tokio::fs::remove_file(&path).await.map_err(io(&path))?;
    }
    Ok(sent?)
}

/// Records that a message was delivered.
async fn delivered(files: &Files, what: What) -> Result<(), TypingError> {
    match what {
        What::Prompt => write_durably(&files.delivered, b"").await,
        What::Queued(seq) => {
            files.forget_failure(seq).await;
            files.drop_queued(seq).await
        }
        What::Marked => Ok(()),
    }
}

/// What [`recover`] found of a message typed by a controller that was killed.
#[derive(Debug, PartialEq, Eq)]
pub enum Recovered {
    /// It had not been typed: it is typed again in turn.
    NotTyped(What),
    /// It was typed (and perhaps submitted): the submit key was pressed once more, and it is
    /// recorded as delivered.
    Typed(What),
}

/// Finishes what a killed controller was typing, by the rules of the module documentation;
/// `None` when it was typing nothing. The caller holds the session's typing lock.
pub async fn recover(files: &Files, rt: &dyn Runtime, h: &Handle) -> Result<Option<Recovered>, TypingError> {
    let path = files.journal();
    let bytes = match tokio::fs::read(&path).await {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    let Ok(j) = serde_json::from_slice::<Journal>(&bytes) else {
        // Torn while it was written: nothing was typed after it.
        tokio::fs::remove_file(&path).await.map_err(io(&path))?;
        return Ok(None);
    };
    let (transcript_path, offset) = (files.transcript.clone(), j.offset);
    let seen = tokio::task::spawn_blocking(move || transcript::read_from(&transcript_path, offset))
        .await
        .map_err(|e| io(&files.transcript)(std::io::Error::other(e)))?
        .map(|(b, _)| transcript::to_text(&b))
        .unwrap_or_default();
    // Echoed is not submitted: a shell's line discipline echoes a paste before anything reads it,
    // and a screen may show a message that is still being edited. Pressing submit once more is
    // an empty line to an agent that did get it, which agents ignore.
    let typed = rt.pending(h, &j.text).await? || aoctl_runtimes::echoed(&seen, &j.text);
    if typed {
        rt.keys(h, &[j.submit_key.as_str()]).await?;
        delivered(files, j.what).await?;
    }
    tokio::fs::remove_file(&path).await.map_err(io(&path))?;
    Ok(Some(if typed { Recovered::Typed(j.what) } else { Recovered::NotTyped(j.what) }))
}

/// Clears the journal of a runtime that was replaced: nothing typed into the old one is pending.
pub async fn reset(files: &Files) {
    let _ = tokio::fs::remove_file(files.journal()).await;
}

/// The agent a message is typed into, and what records the typing: the runtime metric always,
/// the session's events where there is a recorder.
pub struct Agent<'a> {
    pub session: &'a Session,
    /// The session's typing files.
    pub files: Files,
    pub rt: &'a dyn Runtime,
    pub handle: &'a Handle,
    pub kind: RuntimeKind,
    /// How the agent takes input.
    pub style: InputStyle,
    /// Its adapter, which prepares what is typed into it (`None`: a program of its own).
    pub adapter: Option<&'static agents::Adapter>,
    pub metrics: &'a Metrics,
    /// Publishes the events of its typing; `None` publishes none (`aoctl send` answers instead).
    pub recorder: Option<&'a Recorder>,
}

/// How one message is typed: what differs between the things that type into an agent (the first
/// prompt, `aoctl send` and its inbox, reactions, the resume after a usage limit).
#[derive(Clone, Debug)]
pub struct How<'a> {
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
    pub fn of(what: What) -> Self {
        How { what, prepare: true, marker: None, in_turn: false, held: false, event: None }
    }
}

/// What [`Keyboard::type_in`] did with a message.
#[derive(Debug, PartialEq, Eq)]
pub enum Typed {
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
pub struct Keyboard<'a> {
    agent: Agent<'a>,
    _turn: OwnedMutexGuard<()>,
}

impl<'a> Keyboard<'a> {
    /// Waits for the session's typing lock, of `locks`.
    pub async fn lock(locks: &Typing, agent: Agent<'a>) -> Keyboard<'a> {
        let turn = locks.lock(&agent.session.metadata.name).await;
        Keyboard::holding(agent, turn)
    }

    /// Types into the agent under a typing lock the caller took (`aoctl send` holds it while it
    /// queues the message).
    pub fn holding(agent: Agent<'a>, turn: OwnedMutexGuard<()>) -> Keyboard<'a> {
        Keyboard { agent, _turn: turn }
    }

    /// The session's typing files.
    pub fn files(&self) -> &Files {
        &self.agent.files
    }

    /// Finishes what a killed controller was typing ([`recover`]), with an event saying what it
    /// found.
    pub async fn recover(&self) -> Result<Option<Recovered>, TypingError> {
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
    pub async fn type_in(&self, text: &str, how: &How<'_>) -> Result<Typed, TypingError> {
        let a = &self.agent;
        self.recover().await?;
        if let Some(marker) = how.marker {
            let path = a.files.transcript.clone();
            let seen = tokio::task::spawn_blocking(move || transcript::tail(&path, None))
                .await
                .map_err(|e| io(&a.files.transcript)(std::io::Error::other(e)))?;
            let before = seen.is_ok_and(|(t, _)| t.contains(marker));
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
        let text = if how.prepare { agents::prepare_text(a.adapter, text) } else { text.to_string() };
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

/// The session whose inbox `path` (under the sessions folder `root`) is a message of, if it is one.
pub fn inbox_message_of(root: &Path, path: &Path) -> Option<String> {
    if path.extension()? != "json" {
        return None;
    }
    let inbox = path.parent()?;
    let dir = inbox.parent()?;
    (inbox.file_name()? == INBOX && dir.parent()? == root).then(|| dir.file_name()?.to_str().map(str::to_string))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> Files {
        Files {
            dir: dir.join("s"),
            transcript: dir.join("s/transcript.log"),
            delivered: dir.join("s/prompt.delivered"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writers_adding_at_once_take_a_number_each() {
        let dir = tempfile::tempdir().unwrap();
        let all: Vec<_> = (0..16)
            .map(|i| {
                let f = files(dir.path());
                tokio::spawn(async move { f.enqueue(&format!("message {i}")).await.unwrap().seq })
            })
            .collect();
        let mut seqs = vec![];
        for t in all {
            seqs.push(t.await.unwrap());
        }
        seqs.sort_unstable();
        assert_eq!(seqs, (1..=16).collect::<Vec<u64>>(), "one number each, none lost");
        let queued = files(dir.path()).queued().await.unwrap();
        assert_eq!(queued.len(), 16);
        let mut texts: Vec<_> = queued.iter().map(|q| q.text.clone()).collect();
        texts.sort();
        texts.dedup();
        assert_eq!(texts.len(), 16, "every message kept whole");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("s/inbox")).unwrap().map(|e| e.unwrap().path()).collect();
        assert!(names.iter().all(|p| p.extension().is_some_and(|x| x == "json")), "nothing left aside: {names:?}");
    }

    #[tokio::test]
    async fn an_outcome_is_waiting_then_delivered_or_failed() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let a = f.enqueue("a").await.unwrap();
        let b = f.enqueue("b").await.unwrap();
        assert_eq!(f.outcome(a.seq).await.unwrap(), Outcome::Waiting);
        // A failed try that is tried again: still waiting; then delivered, and the failure gone.
        std::fs::write(f.failure(a.seq), "the agent did not echo it").unwrap();
        assert_eq!(f.outcome(a.seq).await.unwrap(), Outcome::Waiting);
        delivered(&f, What::Queued(a.seq)).await.unwrap();
        assert_eq!(f.outcome(a.seq).await.unwrap(), Outcome::Delivered);
        // Dropped after a failure: failed, once.
        std::fs::write(f.failure(b.seq), "not delivered").unwrap();
        f.drop_queued(b.seq).await.unwrap();
        assert_eq!(f.outcome(b.seq).await.unwrap(), Outcome::Failed("not delivered".into()));
        assert_eq!(f.outcome(b.seq).await.unwrap(), Outcome::Delivered, "read once");
    }

    #[test]
    fn inbox_messages_are_told_from_other_files() {
        let root = Path::new("/data/sessions");
        assert_eq!(inbox_message_of(root, &root.join("s1/inbox/00000000000000000001.json")).as_deref(), Some("s1"));
        assert_eq!(inbox_message_of(root, &root.join("s1/inbox/00000000000000000001.1.0.tmp")), None);
        assert_eq!(inbox_message_of(root, &root.join("s1/transcript.log")), None);
        assert_eq!(inbox_message_of(root, &root.join("s1/other/1.json")), None);
        assert_eq!(inbox_message_of(Path::new("/elsewhere"), &root.join("s1/inbox/1.json")), None);
    }
}
