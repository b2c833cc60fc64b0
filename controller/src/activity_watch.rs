//! Wakes a session's reconcile when its agent writes output or its output closes, so that quiet
//! sessions need no polling: the transcripts under `<data dir>/sessions/` are watched (inotify on
//! Linux, through the `notify` crate).
//!
//! Every runtime appends all of an agent's output to its transcript: tmux through `pipe-pane`, the
//! process runtime from its PTY reader, docker from its log follower. Output wakes the session at
//! once and then at most once per [`DEBOUNCE`], and the last output of a burst is always followed
//! by a wake, so the reconcile that classifies the agent sees it. A transcript closed after
//! writing means the writer ended: the agent exited (a dying tmux pane's hook touches the file, the
//! PTY reader ends) or its runtime was stopped. Then the fleet forgets what probes saw and the
//! session is woken at once and again [`RECHECK_AFTER_CLOSE`] later, in case the exit was not yet
//! visible to the first probe.
//!
//! A message added to a session's inbox (by a replica that does not lead, see `crate::input`)
//! wakes the session at once, so the leader types it.
//!
//! The workspaces are watched one level deep: a session folder deleted or moved away from outside
//! wakes its session at once, which reports `WorkspaceReady=False` (`WorkspaceMissing`) and makes it
//! again, rather than leaving its agent in a deleted folder until the next resync.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

// `::notify` is the file-event crate; `crate::notifiers` delivers the notifications of reactions.
use ::notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
use ::notify::{Event, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use aoctl_runtimes::session_files::folders;

use crate::fleet::Fleet;
use crate::machine::Machine;

/// Output wakes a session at most once per this period.
pub(crate) const DEBOUNCE: Duration = Duration::from_secs(1);

/// A session whose output closed is woken again after this, for an exit the first look missed.
pub(crate) const RECHECK_AFTER_CLOSE: Duration = Duration::from_secs(2);

/// Past this many remembered sessions, those woken longer than [`DEBOUNCE`] ago are forgotten.
const REMEMBERED: usize = 256;

/// What the watcher wakes: the session controller's queue.
pub(crate) trait Wake: Send + Sync + 'static {
    /// Reconciles `session` as soon as possible.
    fn wake(&self, session: &str);
    /// Reconciles `session` after `after`.
    fn wake_after(&self, session: &str, after: Duration);
}

impl Wake for aoctl_engine::Trigger {
    fn wake(&self, session: &str) {
        self.trigger(session);
    }

    fn wake_after(&self, session: &str, after: Duration) {
        self.trigger_after(session, after);
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum WatchError {
    #[error("{path}: cannot create the sessions folder: {source}")]
    Folder { path: PathBuf, source: std::io::Error },
    #[error("cannot watch {path}: {source}")]
    Watch { path: PathBuf, source: ::notify::Error },
}

/// Spacing of the wakes output causes, per session.
#[derive(Debug)]
pub(crate) struct Debounce {
    period: Duration,
    /// When each session was last woken, or will be by a wake already scheduled.
    last: HashMap<String, Instant>,
}

impl Debounce {
    pub(crate) fn new(period: Duration) -> Debounce {
        Debounce { period, last: HashMap::new() }
    }

    /// Output of `session` arrived at `now`: `Some(ZERO)` wakes it now, `Some(d)` in `d` (the end of
    /// the period), `None` not at all because a wake already scheduled comes after this output.
    pub(crate) fn output(&mut self, session: &str, now: Instant) -> Option<Duration> {
        if self.last.len() > REMEMBERED {
            let period = self.period;
            self.last.retain(|_, at| *at + period > now);
        }
        let at = match self.last.get(session) {
            Some(last) if *last > now => return None,
            Some(last) if now < *last + self.period => *last + self.period,
            _ => now,
        };
        self.last.insert(session.to_string(), at);
        Some(at - now)
    }
}

/// Watches the transcripts of `fleet` and wakes their sessions through `wake` until `stopped`.
/// Marks the fleet's output events live while it runs.
pub(crate) fn start(
    fleet: Arc<Fleet>,
    wake: impl Wake,
    stopped: impl Future<Output = ()> + Send + 'static,
) -> Result<JoinHandle<()>, WatchError> {
    let dir = fleet.sessions_dir().to_path_buf();
    fleet.files().make_root().map_err(|e| WatchError::Folder { path: dir.clone(), source: e })?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut watcher = ::notify::recommended_watcher(move |event| {
        let _ = tx.send(event);
    })
    .map_err(|e| WatchError::Watch { path: dir.clone(), source: e })?;
    watcher.watch(&dir, RecursiveMode::Recursive).map_err(|e| WatchError::Watch { path: dir.clone(), source: e })?;
    // The workspaces are watched one level deep only (their contents are the agents' business):
    // the root for new project folders, each project folder for session folders that go.
    let root = fleet.workspaces.root().to_path_buf();
    fleet.workspaces.make_root().map_err(|e| WatchError::Folder { path: root.clone(), source: e })?;
    watcher
        .watch(&root, RecursiveMode::NonRecursive)
        .map_err(|e| WatchError::Watch { path: root.clone(), source: e })?;
    for project in folders(&root) {
        let path = root.join(project);
        watcher.watch(&path, RecursiveMode::NonRecursive).map_err(|e| WatchError::Watch { path, source: e })?;
    }
    fleet.set_output_events(true);
    Ok(tokio::spawn(async move {
        let mut debounce = Debounce::new(DEBOUNCE);
        let work = async {
            while let Some(event) = rx.recv().await {
                match event {
                    Ok(event) => {
                        workspace_event(&root, &mut watcher, &wake, &event);
                        handle(&fleet, &wake, &mut debounce, &event)
                    }
                    Err(e) => tracing::warn!(error = %e, "watching the transcripts"),
                }
            }
        };
        tokio::select! {
            _ = work => tracing::warn!("the transcript watcher stopped; activity is polled again"),
            _ = stopped => {}
        }
        fleet.set_output_events(false);
    }))
}

/// Acts on an event about the workspaces: a new project folder is watched too, and a session's
/// folder that is removed or moved away wakes the session, which then says so and makes it again.
fn workspace_event(root: &Path, watcher: &mut impl Watcher, wake: &impl Wake, event: &Event) {
    let gone = matches!(event.kind, EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_)));
    for path in &event.paths {
        let Some(parent) = path.parent() else { continue };
        if parent == root {
            if matches!(event.kind, EventKind::Create(_)) && path.is_dir() {
                if let Err(e) = watcher.watch(path, RecursiveMode::NonRecursive) {
                    tracing::warn!(error = %e, path = %path.display(), "cannot watch a project's workspaces");
                }
            }
        } else if gone && parent.parent() == Some(root) && !path.exists() {
            if let Some(session) = path.file_name().and_then(|n| n.to_str()).filter(|n| !n.ends_with(".json")) {
                wake.wake(session);
            }
        }
    }
}

/// Acts on one file event.
fn handle(fleet: &Fleet, wake: &impl Wake, debounce: &mut Debounce, event: &Event) {
    if event.need_rescan() {
        // Events were lost: every session may have news.
        tracing::debug!("transcript events overflowed; waking every session");
        for session in fleet.files().sessions() {
            fleet.output_closed(&session);
            wake.wake(&session);
        }
        return;
    }
    let closed = matches!(event.kind, EventKind::Access(AccessKind::Close(AccessMode::Write)));
    let grew = matches!(event.kind, EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any) | EventKind::Create(_));
    if !closed && !grew {
        return;
    }
    if matches!(event.kind, EventKind::Create(_)) {
        // A message another replica of this node added to the inbox: this leader types it.
        let root = fleet.sessions_dir();
        for session in event.paths.iter().filter_map(|p| crate::typing::inbox_message_of(root, p)) {
            wake.wake(&session);
        }
    }
    for session in event.paths.iter().filter_map(|p| fleet.transcript_of(p)) {
        if closed {
            fleet.output_closed(&session);
            wake.wake(&session);
            wake.wake_after(&session, RECHECK_AFTER_CLOSE);
        } else {
            match debounce.output(&session, Instant::now()) {
                Some(d) if d.is_zero() => wake.wake(&session),
                Some(d) => wake.wake_after(&session, d),
                None => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use parking_lot::Mutex;

    use crate::machine::Machine;

    use super::*;

    /// Records the wakes: `(session, delay)`.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<(String, Duration)>>>);

    impl Wake for Recorder {
        fn wake(&self, session: &str) {
            self.0.lock().push((session.to_string(), Duration::ZERO));
        }

        fn wake_after(&self, session: &str, after: Duration) {
            self.0.lock().push((session.to_string(), after));
        }
    }

    impl Recorder {
        fn take(&self) -> Vec<(String, Duration)> {
            std::mem::take(&mut *self.0.lock())
        }

        /// Waits up to five seconds until a wake of `session` with delay `delay` is recorded.
        async fn wait_for(&self, session: &str, delay: Duration) {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !self.0.lock().iter().any(|(s, d)| s == session && *d == delay) {
                assert!(Instant::now() < deadline, "no wake of {session} after {delay:?}: {:?}", self.0.lock());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn output_wakes_at_once_then_at_most_once_per_period_and_always_after_the_last() {
        let mut d = Debounce::new(Duration::from_secs(1));
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        assert_eq!(d.output("a", t0), Some(Duration::ZERO), "the first output wakes at once");
        assert_eq!(d.output("a", ms(300)), Some(Duration::from_millis(700)), "more output: a wake at the period's end");
        assert_eq!(d.output("a", ms(600)), None, "that wake comes after this output too");
        assert_eq!(d.output("b", ms(600)), Some(Duration::ZERO), "sessions are spaced separately");
        assert_eq!(d.output("a", ms(1200)), Some(Duration::from_millis(800)), "spaced a period after the last wake");
        assert_eq!(d.output("a", ms(5000)), Some(Duration::ZERO), "after a quiet period, at once again");
    }

    #[tokio::test(start_paused = true)]
    async fn debounce_forgets_sessions_quiet_for_a_period() {
        let mut d = Debounce::new(Duration::from_secs(1));
        let t0 = Instant::now();
        for i in 0..=REMEMBERED {
            d.output(&format!("s{i}"), t0);
        }
        d.output("late", t0 + Duration::from_secs(2));
        assert_eq!(d.last.len(), 1);
    }

    /// A fleet on a fresh data folder with a watcher waking into a recorder.
    async fn watched() -> (tempfile::TempDir, Arc<Fleet>, Recorder, tokio::sync::oneshot::Sender<()>, JoinHandle<()>) {
        let dir = tempfile::tempdir().unwrap();
        let fleet = Arc::new(Fleet::new(dir.path()));
        let woken = Recorder::default();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = start(fleet.clone(), woken.clone(), async move {
            let _ = stopped.await;
        })
        .unwrap();
        (dir, fleet, woken, stop, task)
    }

    /// Creates the session's folder and waits until the recursive watch has surely taken it in.
    async fn session_folder(fleet: &Fleet, name: &str) -> PathBuf {
        std::fs::create_dir_all(fleet.session_dir(name)).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        fleet.transcript(name)
    }

    #[tokio::test]
    async fn a_growing_transcript_wakes_its_session_debounced() {
        let (_dir, fleet, woken, stop, task) = watched().await;
        assert!(fleet.output_events());
        let path = session_folder(&fleet, "web").await;
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
        file.write_all(b"hello\n").unwrap();
        woken.wait_for("web", Duration::ZERO).await;
        // A burst: many writes within the period wake it once more, at the period's end.
        for _ in 0..20 {
            file.write_all(b"more\n").unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let wakes = woken.take();
        assert!(wakes.iter().all(|(s, _)| s == "web"), "{wakes:?}");
        assert!((2..=3).contains(&wakes.len()), "a burst within the period wakes twice at most: {wakes:?}");
        assert!(wakes[1..].iter().all(|(_, d)| !d.is_zero() && *d <= DEBOUNCE), "{wakes:?}");
        // Other files of the session's folder wake nothing.
        std::fs::write(fleet.prompt_file("web"), "prompt").unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(woken.take(), vec![], "the prompt file is not output");
        let _ = stop.send(());
        task.await.unwrap();
        assert!(!fleet.output_events(), "polling resumes when the watcher stops");
    }

    #[tokio::test]
    async fn a_deleted_workspace_folder_wakes_its_session() {
        let (_dir, fleet, woken, stop, task) = watched().await;
        let ws = fleet.workspaces.root().join("proj").join("gone");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(ws.join("src/lib.rs"), "").unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        std::fs::write(fleet.workspaces.root().join("proj/gone.json"), "{}").unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(woken.take(), vec![], "files of a workspace and its record are no news");
        std::fs::remove_dir_all(&ws).unwrap();
        woken.wait_for("gone", Duration::ZERO).await;
        let _ = stop.send(());
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_message_added_to_an_inbox_wakes_its_session() {
        let (_dir, fleet, woken, stop, task) = watched().await;
        session_folder(&fleet, "asked").await;
        // As a replica that does not lead adds it.
        fleet.typing_files("asked").enqueue("hello").await.unwrap();
        woken.wait_for("asked", Duration::ZERO).await;
        let _ = stop.send(());
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_closed_transcript_wakes_its_session_now_and_again_later() {
        let (_dir, fleet, woken, stop, task) = watched().await;
        let path = session_folder(&fleet, "done").await;
        std::fs::write(&path, b"").unwrap();
        woken.wait_for("done", RECHECK_AFTER_CLOSE).await;
        assert!(woken.take().contains(&("done".to_string(), Duration::ZERO)));
        // Opening without writing, as a dying tmux pane's hook does, counts as a close too.
        std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        woken.wait_for("done", RECHECK_AFTER_CLOSE).await;
        let _ = stop.send(());
        task.await.unwrap();
    }
}
