//! The files the controller keeps per session, under `<sessions dir>/<name>/`: the first prompt,
//! the transcript of the agent's output, the delivered and retype markers, the reviewer's review
//! file, and what typing into the agent keeps — the inbox of `aoctl send` and the journal of the
//! message being typed. The controller decides what they say; the reads and writes are here.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use aoctl_api::Time;
use serde::{Deserialize, Serialize};

use crate::transcript;

/// The file in a session's folder that every byte of its agent's output is appended to.
const TRANSCRIPT: &str = "transcript.log";
/// The journal of a message being typed.
const JOURNAL: &str = "typing.json";
/// The folder of the messages waiting to be typed.
const INBOX: &str = "inbox";

/// A read or write of a session's files that failed.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a message: {source}")]
    Corrupt { path: PathBuf, source: serde_json::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FilesError + '_ {
    move |source| FilesError::Io { path: path.to_path_buf(), source }
}

/// The layout of the controller's per-session files: `<sessions dir>/<name>/` holds the prompt,
/// the transcript, the delivered marker and what typing keeps ([`TypingFiles`]).
#[derive(Clone, Debug)]
pub struct SessionFiles {
    root: PathBuf,
}

impl SessionFiles {
    pub fn new(root: PathBuf) -> SessionFiles {
        SessionFiles { root }
    }

    /// The folder of every session's files.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Makes the folder of every session's files.
    pub fn make_root(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.root)
    }

    /// The sessions that have a folder of files.
    pub fn sessions(&self) -> Vec<String> {
        folders(&self.root)
    }

    /// The folder of a session's files.
    pub fn dir(&self, session: &str) -> PathBuf {
        self.root.join(session)
    }

    pub fn transcript(&self, session: &str) -> PathBuf {
        self.dir(session).join(TRANSCRIPT)
    }

    /// The session whose transcript `path` is, if it is one.
    pub fn transcript_of(&self, path: &Path) -> Option<String> {
        if path.file_name()? != TRANSCRIPT {
            return None;
        }
        let dir = path.parent()?;
        (dir.parent()? == self.root).then(|| dir.file_name()?.to_str().map(str::to_string)).flatten()
    }

    pub fn prompt(&self, session: &str) -> PathBuf {
        self.dir(session).join("prompt.md")
    }

    /// Exists once the first prompt of the current runtime was delivered.
    pub fn delivered_marker(&self, session: &str) -> PathBuf {
        self.dir(session).join("prompt.delivered")
    }

    /// The files of a session that typing into its agent keeps.
    pub fn typing(&self, session: &str) -> TypingFiles {
        TypingFiles {
            dir: self.dir(session),
            transcript: self.transcript(session),
            delivered: self.delivered_marker(session),
        }
    }

    /// Makes the session's folder and writes its first prompt there (empty when it has none).
    /// An error names the folder.
    pub async fn write_prompt(&self, session: &str, prompt: &str) -> Result<(), FilesError> {
        let dir = self.dir(session);
        tokio::fs::create_dir_all(&dir).await.map_err(io(&dir))?;
        tokio::fs::write(self.prompt(session), prompt).await.map_err(io(&dir))
    }

    /// The session's first prompt as written by [`SessionFiles::write_prompt`].
    pub async fn read_prompt(&self, session: &str) -> Result<String, FilesError> {
        let path = self.prompt(session);
        tokio::fs::read_to_string(&path).await.map_err(io(&path))
    }

    /// The length of the session's transcript; 0 while there is none.
    pub async fn transcript_len(&self, session: &str) -> u64 {
        tokio::fs::metadata(self.transcript(session)).await.map_or(0, |m| m.len())
    }

    /// A file the session's agent writes into the session's folder (a reviewer's review file).
    pub async fn read_own(&self, session: &str, file: &str) -> std::io::Result<String> {
        tokio::fs::read_to_string(self.dir(session).join(file)).await
    }

    /// Removes the session's folder and everything in it; a folder that is not there is no error.
    pub async fn remove(&self, session: &str) -> Result<(), FilesError> {
        let dir = self.dir(session);
        match tokio::fs::remove_dir_all(&dir).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&dir)(e)),
            _ => Ok(()),
        }
    }
}

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

/// The journal of a message being typed: what is typed, how it is submitted and where the
/// transcript stood before.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Journal {
    pub what: What,
    /// The message as typed (its last line is what delivery is verified by).
    pub text: String,
    pub submit_key: String,
    /// The transcript's length before typing.
    pub offset: u64,
}

/// A session's typing files: its folder, transcript and delivered marker.
pub struct TypingFiles {
    pub dir: PathBuf,
    pub transcript: PathBuf,
    pub delivered: PathBuf,
}

impl TypingFiles {
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
    pub async fn outcome(&self, seq: u64) -> Result<Outcome, FilesError> {
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

    /// Records why the typing of inbox message `seq` failed, for a replica that waits for its
    /// delivery; best effort.
    pub async fn record_failure(&self, seq: u64, why: &str) {
        let _ = tokio::fs::write(self.failure(seq), why).await;
    }

    /// Forgets the failure recorded for inbox message `seq`, if any.
    pub async fn forget_failure(&self, seq: u64) {
        let _ = tokio::fs::remove_file(self.failure(seq)).await;
    }

    /// Whether the first prompt was delivered (or there was none to type).
    pub fn prompt_done(&self) -> bool {
        self.delivered.exists()
    }

    /// Records that the first prompt was delivered (or that there was none to type), flushed.
    pub async fn mark_prompt_done(&self) -> Result<(), FilesError> {
        write_durably(&self.delivered, b"").await
    }

    /// The marker of a first prompt that was given on the agent's command line and used up by
    /// its login screen: it is typed once the agent is logged in.
    fn retype_marker(&self) -> PathBuf {
        self.dir.join("prompt.retype")
    }

    /// Whether the first prompt waits to be typed again ([`TypingFiles::mark_retype`]).
    pub fn retyping(&self) -> bool {
        self.retype_marker().exists()
    }

    /// Records that the first prompt, given on the command line, was not delivered and is typed
    /// once the agent is logged in: the retype marker is written and the delivered marker removed.
    pub async fn mark_retype(&self) -> std::io::Result<()> {
        let marked = tokio::fs::write(self.retype_marker(), b"").await;
        let undelivered = match tokio::fs::remove_file(&self.delivered).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        marked.and(undelivered)
    }

    /// Forgets the delivery of the first prompt and the journal: a new runtime, into which nothing
    /// was typed yet. Best effort.
    pub async fn forget_runtime(&self) {
        let _ = tokio::fs::remove_file(&self.delivered).await;
        let _ = tokio::fs::remove_file(self.retype_marker()).await;
        self.reset().await;
    }

    /// The messages waiting in the inbox, oldest first.
    pub async fn queued(&self) -> Result<Vec<Queued>, FilesError> {
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
            let q: Queued = serde_json::from_slice(&bytes).map_err(|e| FilesError::Corrupt { path, source: e })?;
            out.push(q);
        }
        out.sort_by_key(|q| q.seq);
        Ok(out)
    }

    /// Removes a message from the inbox.
    pub async fn drop_queued(&self, seq: u64) -> Result<(), FilesError> {
        match tokio::fs::remove_file(self.item(seq)).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&self.item(seq))(e)),
            _ => Ok(()),
        }
    }

    /// Appends a message to the inbox, flushed to disk before this returns. Its number follows
    /// the newest queued one's; when another process (a replica of the same node) takes that
    /// number first, the next one is taken.
    pub async fn enqueue(&self, text: &str) -> Result<Queued, FilesError> {
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

    /// Writes the journal, flushed, before anything is typed.
    pub async fn write_journal(&self, journal: &Journal) -> Result<(), FilesError> {
        write_durably(&self.journal(), &serde_json::to_vec(journal).expect("a journal serializes")).await
    }

    /// The journal a controller left; `None` when there is none, or when it was torn while it was
    /// written (then nothing was typed after it, and it is removed).
    pub async fn read_journal(&self) -> Result<Option<Journal>, FilesError> {
        let path = self.journal();
        let bytes = match tokio::fs::read(&path).await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path)(e)),
        };
        match serde_json::from_slice::<Journal>(&bytes) {
            Ok(j) => Ok(Some(j)),
            Err(_) => {
                self.remove_journal().await?;
                Ok(None)
            }
        }
    }

    /// Removes the journal once what it records is done.
    pub async fn remove_journal(&self) -> Result<(), FilesError> {
        let path = self.journal();
        tokio::fs::remove_file(&path).await.map_err(io(&path))
    }

    /// Clears the journal of a runtime that was replaced; best effort.
    pub async fn reset(&self) {
        let _ = tokio::fs::remove_file(self.journal()).await;
    }

    /// The length of the transcript; 0 while there is none.
    pub async fn transcript_len(&self) -> u64 {
        tokio::fs::metadata(&self.transcript).await.map_or(0, |m| m.len())
    }

    /// The transcript's text past `offset`; empty when it cannot be read.
    pub async fn transcript_since(&self, offset: u64) -> Result<String, FilesError> {
        let path = self.transcript.clone();
        let read = tokio::task::spawn_blocking(move || transcript::read_from(&path, offset))
            .await
            .map_err(|e| io(&self.transcript)(std::io::Error::other(e)))?;
        Ok(read.map(|(b, _)| transcript::to_text(&b)).unwrap_or_default())
    }

    /// Whether the transcript's text shows `marker`; `false` when it cannot be read.
    pub async fn transcript_shows(&self, marker: &str) -> Result<bool, FilesError> {
        let path = self.transcript.clone();
        let seen = tokio::task::spawn_blocking(move || transcript::tail(&path, None))
            .await
            .map_err(|e| io(&self.transcript)(std::io::Error::other(e)))?;
        Ok(seen.is_ok_and(|(t, _)| t.contains(marker)))
    }
}

/// Writes `path` through a temporary file that is flushed and renamed, then flushes the folder (on
/// Unix; a Windows folder cannot be opened as a file, and NTFS journals the rename itself).
async fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), FilesError> {
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
async fn create_durably(path: &Path, bytes: &[u8]) -> Result<bool, FilesError> {
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

/// The names of the folders under `dir`; none when it cannot be read.
pub fn folders(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return vec![] };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect()
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

    fn files(dir: &Path) -> TypingFiles {
        TypingFiles {
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
        f.record_failure(a.seq, "the agent did not echo it").await;
        assert_eq!(f.outcome(a.seq).await.unwrap(), Outcome::Waiting);
        f.forget_failure(a.seq).await;
        f.drop_queued(a.seq).await.unwrap();
        assert_eq!(f.outcome(a.seq).await.unwrap(), Outcome::Delivered);
        // Dropped after a failure: failed, once.
        f.record_failure(b.seq, "not delivered").await;
        f.drop_queued(b.seq).await.unwrap();
        assert_eq!(f.outcome(b.seq).await.unwrap(), Outcome::Failed("not delivered".into()));
        assert_eq!(f.outcome(b.seq).await.unwrap(), Outcome::Delivered, "read once");
    }

    #[tokio::test]
    async fn a_torn_journal_is_dropped_and_a_whole_one_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        assert!(f.read_journal().await.unwrap().is_none(), "none yet");
        let j = Journal { what: What::Queued(3), text: "hi".into(), submit_key: "Enter".into(), offset: 7 };
        f.write_journal(&j).await.unwrap();
        let back = f.read_journal().await.unwrap().unwrap();
        assert_eq!((back.what, back.text.as_str(), back.offset), (What::Queued(3), "hi", 7));
        std::fs::write(f.journal(), b"{\"what\":").unwrap();
        assert!(f.read_journal().await.unwrap().is_none(), "torn");
        assert!(!f.journal().exists(), "a torn journal is removed");
    }

    #[tokio::test]
    async fn a_first_prompt_given_as_an_argument_is_marked_for_typing_again() {
        let dir = tempfile::tempdir().unwrap();
        let files = SessionFiles::new(dir.path().join("sessions"));
        files.write_prompt("s1", "fix it").await.unwrap();
        assert_eq!(files.read_prompt("s1").await.unwrap(), "fix it");
        let t = files.typing("s1");
        t.mark_prompt_done().await.unwrap();
        assert!(t.prompt_done() && !t.retyping());
        t.mark_retype().await.unwrap();
        assert!(!t.prompt_done() && t.retyping());
        t.forget_runtime().await;
        assert!(!t.prompt_done() && !t.retyping());
        files.remove("s1").await.unwrap();
        files.remove("s1").await.unwrap();
        assert!(!files.dir("s1").exists());
    }

    #[test]
    fn transcript_of_names_the_session_of_a_transcript_only() {
        let dir = tempfile::tempdir().unwrap();
        let files = SessionFiles::new(dir.path().join("sessions"));
        assert_eq!(files.transcript_of(&files.transcript("web-1")).as_deref(), Some("web-1"));
        assert_eq!(files.transcript_of(&files.prompt("web-1")), None);
        assert_eq!(files.transcript_of(&files.root().join("transcript.log")), None);
        assert_eq!(files.transcript_of(&dir.path().join("other/web-1/transcript.log")), None);
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
