//! One shared view of every pane on the controller's tmux server, so that the probes of many
//! sessions within a short window cost one `tmux list-panes -a` instead of a process each.
//!
//! A view is reused for at most [`WINDOW`], and never after [`Panes::invalidate`]: the runtime
//! invalidates it whenever it starts or stops a session itself, and the controller does when an
//! agent's output closes (its pane died). A view that was being read while it was invalidated is
//! handed to the probes that were already waiting for it — it is newer than they are — but is
//! not kept for later ones. An exited pane can therefore look alive for at most the window, and a
//! session this runtime just started never looks missing.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// How long one view of the panes answers probes.
pub(crate) const WINDOW: Duration = Duration::from_millis(1500);

/// The `list-panes -F` format [`parse`] reads: one tab-separated line per pane.
pub(crate) const FORMAT: &str =
    "#{session_name}\t#{window_active}#{pane_active}\t#{pane_dead}\t#{pane_pid}\t#{pid}\t#{pane_dead_status}";

/// What a view says about a session's pane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pane {
    pub(crate) dead: bool,
    /// The pane's first process.
    pub(crate) pid: Option<u32>,
    /// The tmux server's process.
    pub(crate) server: Option<u32>,
    /// The exit status of a dead pane, once tmux has it.
    pub(crate) status: Option<i32>,
}

/// The panes of every session, by session name: the active pane of the active window.
pub(crate) type View = HashMap<String, Pane>;

/// Reads `list-panes -a -F FORMAT` output. A session with several panes is represented by the
/// pane `=name:` targets (the active pane of the active window), else its first one.
pub(crate) fn parse(out: &str) -> View {
    let mut view = View::new();
    for line in out.lines() {
        let mut f = line.split('\t');
        let (Some(name), Some(active), Some(dead)) = (f.next(), f.next(), f.next()) else { continue };
        if name.is_empty() {
            continue;
        }
        let pane = Pane {
            dead: dead == "1",
            pid: f.next().and_then(|p| p.parse().ok()),
            server: f.next().and_then(|p| p.parse().ok()),
            status: f.next().and_then(|s| s.trim().parse().ok()),
        };
        if active == "11" || !view.contains_key(name) {
            view.insert(name.to_string(), pane);
        }
    }
    view
}

/// The cached view and when it was asked for.
struct Cached {
    generation: u64,
    asked_at: Instant,
    view: Arc<View>,
}

/// The shared, invalidatable view of the panes.
pub(crate) struct Panes {
    window: Duration,
    /// Bumped by every invalidation; a view read under an older generation is not reused.
    generation: AtomicU64,
    /// Held while a view is read, so that probes arriving meanwhile wait for it instead of
    /// starting their own.
    cached: tokio::sync::Mutex<Option<Cached>>,
}

impl Default for Panes {
    fn default() -> Panes {
        Panes::with_window(WINDOW)
    }
}

impl std::fmt::Debug for Panes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Panes").field("window", &self.window).finish_non_exhaustive()
    }
}

impl Panes {
    pub(crate) fn with_window(window: Duration) -> Panes {
        Panes { window, generation: AtomicU64::new(0), cached: tokio::sync::Mutex::new(None) }
    }

    /// Forgets the current view: the next probe reads the panes again.
    pub(crate) fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The current view, read with `read` when there is none fresh enough.
    pub(crate) async fn get<E, F, Fut>(&self, read: F) -> Result<Arc<View>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<View, E>>,
    {
        let asked_at = Instant::now();
        let mut cached = self.cached.lock().await;
        let generation = self.generation.load(Ordering::SeqCst);
        if let Some(c) = cached.as_ref() {
            // A view read since this probe asked is as good as one it would read itself.
            let fresh = c.generation == generation && c.asked_at.elapsed() < self.window;
            if fresh || (c.generation == generation && c.asked_at >= asked_at) {
                return Ok(c.view.clone());
            }
        }
        let started = Instant::now();
        let view = Arc::new(read().await?);
        *cached = Some(Cached { generation, asked_at: started, view: view.clone() });
        Ok(view)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn view(dead: bool) -> View {
        let pane = Pane { dead, pid: Some(1), server: Some(2), status: dead.then_some(0) };
        View::from([("a".to_string(), pane)])
    }

    /// Counts the reads and answers with `dead`.
    async fn read(reads: &AtomicUsize, dead: bool) -> Result<View, ()> {
        reads.fetch_add(1, Ordering::SeqCst);
        Ok(view(dead))
    }

    #[tokio::test(start_paused = true)]
    async fn probes_within_the_window_share_one_read() {
        let (panes, reads) = (Panes::with_window(Duration::from_secs(2)), AtomicUsize::new(0));
        for _ in 0..10 {
            assert_eq!(*panes.get(|| read(&reads, false)).await.unwrap(), view(false));
            tokio::time::advance(Duration::from_millis(100)).await;
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(*panes.get(|| read(&reads, true)).await.unwrap(), view(true), "read again after the window");
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn invalidation_forces_a_new_read() {
        let (panes, reads) = (Panes::with_window(Duration::from_secs(60)), AtomicUsize::new(0));
        panes.get(|| read(&reads, false)).await.unwrap();
        panes.invalidate();
        assert_eq!(*panes.get(|| read(&reads, true)).await.unwrap(), view(true));
        assert_eq!(*panes.get(|| read(&reads, false)).await.unwrap(), view(true), "the new view is kept");
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_view_invalidated_while_it_was_read_is_not_kept() {
        let panes = Arc::new(Panes::with_window(Duration::from_secs(60)));
        let reads = Arc::new(AtomicUsize::new(0));
        let (p, r) = (panes.clone(), reads.clone());
        let slow = tokio::spawn(async move {
            p.get(|| async {
                r.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(500)).await;
                Ok::<_, ()>(view(false))
            })
            .await
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A session starts (or its pane dies) while the old view is being read.
        panes.invalidate();
        assert_eq!(*slow.await.unwrap().unwrap(), view(false), "the reader gets what it read");
        assert_eq!(*panes.get(|| read(&reads, true)).await.unwrap(), view(true), "later probes read again");
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn probes_waiting_for_a_read_take_its_view() {
        let panes = Arc::new(Panes::with_window(Duration::ZERO));
        let reads = Arc::new(AtomicUsize::new(0));
        let mut waiting = Vec::new();
        for _ in 0..5 {
            let (p, r) = (panes.clone(), reads.clone());
            waiting.push(tokio::spawn(async move {
                p.get(|| async {
                    r.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok::<_, ()>(view(false))
                })
                .await
            }));
        }
        for w in waiting {
            w.await.unwrap().unwrap();
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1, "one read answered the probes that asked before it began");
    }

    #[test]
    fn parse_takes_the_active_pane_and_tolerates_noise() {
        let out = "a\t10\t0\t100\t9\t\na\t11\t1\t101\t9\t3\nb\t11\t0\t200\t9\t\n\t11\t0\t1\t1\t\nbroken\n";
        let v = parse(out);
        assert_eq!(v.len(), 2);
        assert_eq!(v["a"], Pane { dead: true, pid: Some(101), server: Some(9), status: Some(3) });
        assert_eq!(v["b"], Pane { dead: false, pid: Some(200), server: Some(9), status: None });
    }
}
