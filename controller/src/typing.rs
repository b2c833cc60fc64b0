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
//! [`send_or_queue`] is `aoctl send`: the rules of what may be typed into a session now, what
//! waits in its inbox, and what is refused.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use aoctl_api::Time;
use aoctl_runtimes::{transcript, Handle, InputStyle, Runtime, RuntimeError};
use serde::{Deserialize, Serialize};
use tokio::sync::OwnedMutexGuard;

/// The journal of a message being typed.
const JOURNAL: &str = "typing.json";
/// The folder of the messages waiting to be typed.
const INBOX: &str = "inbox";

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

    /// Appends a message to the inbox, flushed to disk before this returns. The caller holds the
    /// session's typing lock.
    pub async fn enqueue(&self, text: &str) -> Result<Queued, TypingError> {
        let seq = self.queued().await?.last().map_or(1, |q| q.seq + 1);
        let q = Queued { seq, text: text.to_string(), at: Time::now() };
        let bytes = serde_json::to_vec(&q).expect("a message serializes");
        write_durably(&self.item(seq), &bytes).await?;
        Ok(q)
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
    if sent.is_ok() {
        delivered(files, what).await?;
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
        What::Queued(seq) => files.drop_queued(seq).await,
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
