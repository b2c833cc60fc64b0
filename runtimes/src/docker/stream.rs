//! The two streams the runtime keeps per container.
//!
//! - The *log follower* appends the container's logs (`follow`, with timestamps) to the
//!   transcript. The engine's log is complete but line-buffered: a prompt without a newline
//!   reaches it only with the next newline.
//! - The *attach connection* (hijacked, stdin and output) carries typed input in and the raw,
//!   unbuffered output out into a `vt100` screen, which is what `capture` and delivery
//!   verification read and which answers the terminal queries agents block on at start-up.
//!   Terminal views are fed from that screen too (see [`crate::view`]), and close when the
//!   connection ends.
//!
//! A follower that starts over (a restarted controller, or an engine connection that broke) never
//! writes a byte twice: the first time it skips as many bytes of the container's log as the
//! transcript holds past the offset recorded in the container's labels, and when it reconnects it
//! asks only for entries since the last timestamp it wrote and drops those not newer.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bollard::query_parameters::{
    AttachContainerOptions, InspectContainerOptions, LogsOptions, ResizeContainerTTYOptions,
};
use bollard::Docker;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::container::Meta;
use super::{failed, RUNTIME};
use crate::runtime::RuntimeError;
pub(super) use crate::terminal::key_bytes;
use crate::tmux::delivery::{Screen, Terminal};
use crate::view::Emulator;

/// Our own attach connection's detach sequence. The engine holds back a typed byte that starts it
/// until the next one arrives, so it is made of keys agents hardly ever receive (the default,
/// `ctrl-p,ctrl-q`, would delay every `C-p`).
const DETACH_KEYS: &str = "ctrl-^,ctrl-_";

/// How much of the end of the transcript is replayed into the screen of an adopted container.
const SEED_BYTES: u64 = 64 << 10;

/// The engine splits a line longer than this into partial log entries.
const PARTIAL_ENTRY: usize = 16 << 10;

/// How long a broken log stream waits before it reconnects.
const RECONNECT: Duration = Duration::from_secs(1);

/// The streams of one container.
pub(super) struct Agent {
    /// The container's id: a container re-created under the same name is another agent.
    pub(crate) id: String,
    terminal: Arc<Mutex<Emulator>>,
    /// Held while a message is typed, so a terminal view's keys wait for it.
    pub(super) typing: tokio::sync::Mutex<()>,
    /// Held while the container's terminal changes size, so the engine hears the sizes in order.
    resizing: tokio::sync::Mutex<()>,
    /// Bytes for the attach connection's writer; `None` when not attached.
    input: Mutex<Option<mpsc::UnboundedSender<Vec<u8>>>>,
    attach_tasks: Mutex<Vec<JoinHandle<()>>>,
    follower: Mutex<Option<JoinHandle<()>>>,
}

impl Agent {
    /// The streams of container `id`: attached when `attach` is set (before the container starts,
    /// or while it runs), with the screen seeded from the transcript's end when `seed` is set.
    pub(super) async fn open(
        docker: &Docker,
        id: &str,
        meta: &Meta,
        attach: bool,
        seed: bool,
    ) -> Result<Agent, bollard::errors::Error> {
        let mut emulator = Emulator::new(meta.cols, meta.rows);
        if seed {
            let len = std::fs::metadata(&meta.transcript).map(|m| m.len()).unwrap_or(0);
            if let Ok((bytes, _)) = crate::transcript::read_from(&meta.transcript, len.saturating_sub(SEED_BYTES)) {
                emulator.replay(&bytes);
            }
        }
        let terminal = Arc::new(Mutex::new(emulator));
        let agent = Agent {
            id: id.to_string(),
            terminal,
            typing: tokio::sync::Mutex::new(()),
            resizing: tokio::sync::Mutex::new(()),
            input: Mutex::new(None),
            attach_tasks: Mutex::new(vec![]),
            follower: Mutex::new(None),
        };
        if attach {
            agent.attach(docker).await?;
        }
        Ok(agent)
    }

    /// Opens the attach connection: a writer task for input, a reader task for the screen.
    pub(super) async fn attach(&self, docker: &Docker) -> Result<(), bollard::errors::Error> {
        let options = AttachContainerOptions {
            detach_keys: Some(DETACH_KEYS.into()),
            logs: false,
            stream: true,
            stdin: true,
            stdout: true,
            stderr: true,
        };
        let attached = docker.attach_container(&self.id, Some(options)).await?;
        let (mut output, mut input) = (attached.output, attached.input);
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let writer = tokio::spawn(async move {
            while let Some(bytes) = rx.recv().await {
                if input.write_all(&bytes).await.is_err() || input.flush().await.is_err() {
                    break;
                }
            }
        });
        let (terminal, replies) = (self.terminal.clone(), tx.clone());
        terminal.lock().resume();
        let reader = tokio::spawn(async move {
            while let Some(Ok(chunk)) = output.next().await {
                let answer = terminal.lock().feed(&chunk.into_bytes());
                if !answer.is_empty() {
                    let _ = replies.send(answer);
                }
            }
            terminal.lock().end();
        });
        *self.input.lock() = Some(tx);
        for old in std::mem::replace(&mut *self.attach_tasks.lock(), vec![writer, reader]) {
            old.abort();
        }
        Ok(())
    }

    /// Whether the attach connection is open.
    pub(super) fn attached(&self) -> bool {
        let tasks = self.attach_tasks.lock();
        self.input.lock().as_ref().is_some_and(|tx| !tx.is_closed())
            && !tasks.is_empty()
            && tasks.iter().all(|t| !t.is_finished())
    }

    /// Starts the log follower appending this container's output to `meta.transcript`.
    pub(super) fn follow(&self, docker: &Docker, meta: &Meta) {
        let task = tokio::spawn(follow(docker.clone(), self.id.clone(), meta.transcript.clone(), meta.offset));
        if let Some(old) = self.follower.lock().replace(task) {
            old.abort();
        }
    }

    /// Waits up to `timeout` for the log follower to write the container's last output, then
    /// closes everything.
    pub(super) async fn finish(&self, timeout: Duration) {
        let follower = self.follower.lock().take();
        if let Some(mut task) = follower {
            if tokio::time::timeout(timeout, &mut task).await.is_err() {
                task.abort();
            }
        }
        for task in self.attach_tasks.lock().drain(..) {
            task.abort();
        }
    }

    /// Queues `bytes` for the container's input.
    pub(super) fn write(&self, op: &'static str, bytes: Vec<u8>) -> Result<(), RuntimeError> {
        let input = self.input.lock();
        let tx = input.as_ref().ok_or_else(|| failed(op, "not attached to the container's input"))?;
        tx.send(bytes).map_err(|_| failed(op, "the container's input is closed"))
    }

    /// The screen as plain text.
    pub(super) fn contents(&self) -> String {
        self.terminal.lock().screen().contents()
    }

    /// Whether the agent asked for application cursor keys.
    pub(super) fn application_cursor(&self) -> bool {
        self.terminal.lock().screen().application_cursor()
    }

    /// Runs `change` on the screen and its views, then gives the container's terminal the size it
    /// asks for, if any.
    pub(super) async fn sized<T>(
        &self,
        docker: &Docker,
        change: impl FnOnce(&mut Emulator) -> (T, Option<(u16, u16)>),
    ) -> T {
        let _resizing = self.resizing.lock().await;
        let (value, resized) = change(&mut self.terminal.lock());
        if let Some((cols, rows)) = resized {
            let size = ResizeContainerTTYOptions { h: rows.into(), w: cols.into() };
            if let Err(e) = docker.resize_container_tty(&self.id, size).await {
                tracing::debug!(runtime = RUNTIME, container = %self.id, error = %e, "cannot resize the terminal");
            }
        }
        value
    }

    /// Redraws view `id` if it dropped output and has room again.
    pub(super) fn catch_up(&self, id: u64) {
        self.terminal.lock().catch_up(id);
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        for task in self.attach_tasks.lock().iter().chain(self.follower.lock().as_ref()) {
            task.abort();
        }
    }
}

#[async_trait::async_trait]
impl Terminal for Agent {
    /// A paste is bracketed only if the agent enabled bracketed paste, with newlines sent as carriage
    /// returns the way a terminal pastes; plain text goes in unchanged.
    async fn type_text(&self, text: &str, paste: bool) -> Result<(), RuntimeError> {
        let bytes = if paste {
            let body = text.replace('\n', "\r");
            if self.terminal.lock().screen().bracketed_paste() {
                format!("\x1b[200~{body}\x1b[201~")
            } else {
                body
            }
        } else {
            text.to_string()
        };
        self.write("send", bytes.into_bytes())
    }

    async fn press(&self, key: &str) -> Result<(), RuntimeError> {
        let bytes =
            key_bytes(key, self.application_cursor()).ok_or_else(|| failed("send", format!("unknown key `{key}`")))?;
        self.write("send", bytes)
    }

    async fn screen(&self) -> Result<Screen, RuntimeError> {
        let parser = self.terminal.lock();
        let screen = parser.screen();
        let (row, col) = screen.cursor_position();
        let (_, cols) = screen.size();
        let mut start = row;
        while start > 0 && screen.row_wrapped(start - 1) {
            start -= 1;
        }
        let cursor_line = screen.contents_between(start, 0, row, cols);
        Ok(Screen { text: screen.contents(), cursor_line, cursor: (row.into(), col.into()) })
    }
}

/// Appends the log of container `id` to `transcript` until the container stops.
async fn follow(docker: Docker, id: String, transcript: PathBuf, offset: u64) {
    let mut last: Option<String> = None;
    loop {
        match follow_once(&docker, &id, &transcript, offset, &mut last).await {
            Ok(()) => return,
            Err(message) => tracing::debug!(runtime = RUNTIME, container = %id, %message, "the log stream broke"),
        }
        tokio::time::sleep(RECONNECT).await;
        let running = docker
            .inspect_container(&id, None::<InspectContainerOptions>)
            .await
            .ok()
            .and_then(|c| c.state?.running)
            .unwrap_or(false);
        if !running {
            // One last pass picks up what the container wrote before it stopped.
            if let Err(message) = follow_once(&docker, &id, &transcript, offset, &mut last).await {
                tracing::warn!(runtime = RUNTIME, container = %id, %message, "the container's last output may be missing from its transcript");
            }
            return;
        }
    }
}

/// Why following a container's log stopped before its end.
#[derive(Debug, thiserror::Error)]
enum FollowError {
    #[error("{}: {source}", path.display())]
    Transcript { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Logs(#[from] bollard::errors::Error),
}

/// One log request, followed to its end; `Err` when the stream broke.
async fn follow_once(
    docker: &Docker,
    id: &str,
    transcript: &Path,
    offset: u64,
    last: &mut Option<String>,
) -> Result<(), FollowError> {
    let io = |source: std::io::Error| FollowError::Transcript { path: transcript.to_path_buf(), source };
    if let Some(dir) = transcript.parent().filter(|d| !d.as_os_str().is_empty()) {
        tokio::fs::create_dir_all(dir).await.map_err(io)?;
    }
    let mut file = tokio::fs::OpenOptions::new().create(true).append(true).open(transcript).await.map_err(io)?;
    // The first request skips what the transcript already holds of this container's output.
    let mut skip = match last {
        Some(_) => 0,
        None => file.metadata().await.map_err(io)?.len().saturating_sub(offset),
    };
    let since = last.as_deref().and_then(seconds).unwrap_or(0);
    let options =
        LogsOptions { follow: true, stdout: true, stderr: true, since, until: 0, timestamps: true, tail: "all".into() };
    let mut logs = docker.logs(id, Some(options));
    while let Some(item) = logs.next().await {
        let bytes = item?.into_bytes();
        let (stamp, content) = split_timestamp(&bytes);
        if let (Some(stamp), Some(seen)) = (stamp, last.as_deref()) {
            // Fixed-width UTC timestamps sort as text.
            if stamp <= seen {
                continue;
            }
        }
        let content = strip_partial_stamps(content);
        let cut = usize::try_from(skip).unwrap_or(usize::MAX).min(content.len());
        skip -= cut as u64;
        if cut < content.len() {
            file.write_all(&content[cut..]).await.map_err(io)?;
            file.flush().await.map_err(io)?;
        }
        if let Some(stamp) = stamp {
            *last = Some(stamp.to_string());
        }
    }
    Ok(())
}

/// Splits a log line into its timestamp (`2024-01-02T03:04:05.123456789Z`) and content.
pub(super) fn split_timestamp(line: &[u8]) -> (Option<&str>, &[u8]) {
    let Some(space) = line.iter().take(40).position(|&b| b == b' ') else { return (None, line) };
    match std::str::from_utf8(&line[..space]) {
        Ok(stamp) if stamp.len() >= 20 && stamp.as_bytes()[4] == b'-' && stamp.as_bytes()[10] == b'T' => {
            (Some(stamp), &line[space + 1..])
        }
        _ => (None, line),
    }
}

/// Removes the timestamps of continuation entries from a line the engine logged in parts (only
/// lines longer than [`PARTIAL_ENTRY`] are).
fn strip_partial_stamps(content: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    static STAMP: OnceLock<regex::bytes::Regex> = OnceLock::new();
    if content.len() <= PARTIAL_ENTRY {
        return content.into();
    }
    let stamp = STAMP.get_or_init(|| {
        regex::bytes::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ").expect("a valid regular expression")
    });
    stamp.replace_all(content, &b""[..])
}

/// Whole seconds since the epoch of an RFC 3339 timestamp, as the logs API's `since` takes them.
fn seconds(stamp: &str) -> Option<i32> {
    let time = chrono::DateTime::parse_from_rfc3339(stamp).ok()?;
    i32::try_from(time.timestamp()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_split_into_timestamp_and_content() {
        let line = b"2026-11-30T01:41:41.038657875Z > typed\r\n";
        assert_eq!(split_timestamp(line), (Some("2026-11-30T01:41:41.038657875Z"), &b"> typed\r\n"[..]));
        assert_eq!(split_timestamp(b"no stamp here\n"), (None, &b"no stamp here\n"[..]));
        assert_eq!(seconds("2026-11-30T01:41:41.038657875Z"), Some(1_796_002_901));
        assert!("2026-11-30T01:41:41.038657875Z" < "2026-11-30T01:41:41.100000000Z");
    }

    #[test]
    fn continuation_stamps_are_removed_from_long_lines_only() {
        let head = "x".repeat(PARTIAL_ENTRY);
        let line = format!("{head}2026-11-30T01:41:41.038657875Z tail\n");
        assert_eq!(&*strip_partial_stamps(line.as_bytes()), format!("{head}tail\n").as_bytes());
        let short = b"2026-11-30T01:41:41.038657875Z quoted\n";
        assert_eq!(&*strip_partial_stamps(short), &short[..]);
    }

    #[test]
    fn keys_map_to_terminal_bytes() {
        assert_eq!(key_bytes("Enter", false), Some(b"\r".to_vec()));
        assert_eq!(key_bytes("Escape", false), Some(b"\x1b".to_vec()));
        assert_eq!(key_bytes("Up", false), Some(b"\x1b[A".to_vec()));
        assert_eq!(key_bytes("Down", true), Some(b"\x1bOB".to_vec()));
        assert_eq!(key_bytes("C-c", false), Some(vec![3]));
        assert_eq!(key_bytes("y", false), Some(b"y".to_vec()));
        assert_eq!(key_bytes("7", false), Some(b"7".to_vec()));
        assert_eq!(key_bytes("Bogus", false), None);
    }
}
