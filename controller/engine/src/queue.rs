//! A workqueue of object keys with client-go semantics: coalescing adds, one worker per key, delayed adds.
//!
//! A key is *dirty* from the moment it is added until a worker takes it. A dirty key is queued once,
//! however often it is added. A key a worker has taken is *processing* until [`WorkQueue::done`]; it is
//! never handed to a second worker meanwhile. Adding a processing key marks it dirty, and `done`
//! queues it again, once. The depth is the number of dirty keys.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::metrics::QueueMetrics;

/// A queue of keys waiting to be reconciled.
#[derive(Debug, Default)]
pub(crate) struct WorkQueue {
    inner: Mutex<Inner>,
    /// Wakes workers waiting in [`WorkQueue::pop`].
    notify: Notify,
    metrics: Option<QueueMetrics>,
}

/// The state behind the queue's lock.
#[derive(Debug, Default)]
struct Inner {
    /// Keys ready to be handed to a worker, in order; each is also in `dirty`.
    ready: VecDeque<String>,
    /// Keys waiting for a worker, with the time they were added.
    dirty: HashMap<String, Instant>,
    /// Keys a worker is reconciling.
    processing: HashSet<String>,
    /// Delayed adds by deadline; an entry whose deadline differs from `deadlines` is stale.
    delayed: BinaryHeap<Reverse<(Instant, String)>>,
    /// The current deadline of each delayed key.
    deadlines: HashMap<String, Instant>,
    shutting_down: bool,
}

impl WorkQueue {
    /// Creates an empty queue without metrics.
    #[cfg(test)]
    pub(crate) fn new() -> WorkQueue {
        WorkQueue::default()
    }

    /// Creates an empty queue that reports its depth, adds and queue times.
    pub(crate) fn with_metrics(metrics: QueueMetrics) -> WorkQueue {
        metrics.depth.set(0);
        WorkQueue { metrics: Some(metrics), ..WorkQueue::default() }
    }

    /// Adds `key`; a key that is already waiting is not added twice, and adds after shutdown are ignored.
    pub(crate) fn add(&self, key: &str) {
        let mut inner = self.inner.lock();
        if self.add_locked(&mut inner, key, Instant::now()) {
            self.notify.notify_one();
        }
    }

    /// Adds `key` after `delay`; of two pending delayed adds of one key the earlier deadline wins.
    pub(crate) fn add_after(&self, key: &str, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let mut inner = self.inner.lock();
        if inner.shutting_down {
            return;
        }
        let deadline = Instant::now() + delay;
        if inner.deadlines.get(key).is_some_and(|current| *current <= deadline) {
            return;
        }
        inner.deadlines.insert(key.to_owned(), deadline);
        inner.delayed.push(Reverse((deadline, key.to_owned())));
        // A waiting worker may sleep until a later deadline; wake one to look again.
        self.notify.notify_one();
    }

    /// Waits for a key and marks it processing; returns `None` once the queue shuts down.
    ///
    /// The caller must call [`WorkQueue::done`] with the key when it has finished with it.
    pub(crate) async fn pop(&self) -> Option<String> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let wake_at = {
                let mut inner = self.inner.lock();
                if inner.shutting_down {
                    return None;
                }
                let now = Instant::now();
                self.promote_due(&mut inner, now);
                if let Some(key) = inner.ready.pop_front() {
                    let added = inner.dirty.remove(&key).unwrap_or(now);
                    inner.processing.insert(key.clone());
                    if !inner.ready.is_empty() {
                        // Delayed keys may have become ready together; pass the wake-up on.
                        self.notify.notify_one();
                    }
                    if let Some(metrics) = &self.metrics {
                        metrics.depth.set(inner.dirty.len() as i64);
                        metrics.queue_duration.observe(now.saturating_duration_since(added).as_secs_f64());
                    }
                    return Some(key);
                }
                inner.next_deadline()
            };
            match wake_at {
                Some(deadline) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(deadline) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Marks `key` as no longer processing, and queues it again if it was added meanwhile.
    pub(crate) fn done(&self, key: &str) {
        let mut inner = self.inner.lock();
        inner.processing.remove(key);
        if inner.dirty.contains_key(key) && !inner.shutting_down {
            inner.ready.push_back(key.to_owned());
            self.notify.notify_one();
        }
    }

    /// Returns the number of keys waiting for a worker, including keys added while they were processing.
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().dirty.len()
    }

    /// Returns whether no key is waiting for a worker.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns the number of keys whose delayed add is pending.
    #[cfg(test)]
    pub(crate) fn delayed_len(&self) -> usize {
        self.inner.lock().deadlines.len()
    }

    /// Stops handing out keys and ignores further adds; waiting [`WorkQueue::pop`] calls return `None`.
    pub(crate) fn shut_down(&self) {
        self.inner.lock().shutting_down = true;
        self.notify.notify_waiters();
    }

    /// Takes adds and hands out keys again after [`WorkQueue::shut_down`], for a controller that
    /// runs again (a replica that leads once more); what waited before is kept.
    pub(crate) fn reopen(&self) {
        let mut inner = self.inner.lock();
        inner.shutting_down = false;
        inner.processing.clear();
    }

    /// Adds `key` under the lock; returns whether it became ready for a worker.
    fn add_locked(&self, inner: &mut Inner, key: &str, now: Instant) -> bool {
        if inner.shutting_down || inner.dirty.contains_key(key) {
            return false;
        }
        inner.dirty.insert(key.to_owned(), now);
        if let Some(metrics) = &self.metrics {
            metrics.adds.inc();
            metrics.depth.set(inner.dirty.len() as i64);
        }
        if inner.processing.contains(key) {
            return false;
        }
        inner.ready.push_back(key.to_owned());
        true
    }

    /// Adds every delayed key whose deadline has passed.
    fn promote_due(&self, inner: &mut Inner, now: Instant) {
        while let Some(Reverse((deadline, _))) = inner.delayed.peek() {
            if *deadline > now {
                break;
            }
            let Some(Reverse((deadline, key))) = inner.delayed.pop() else { break };
            if inner.deadlines.get(&key) == Some(&deadline) {
                inner.deadlines.remove(&key);
                self.add_locked(inner, &key, now);
            }
        }
    }
}

impl Inner {
    /// Returns the earliest pending deadline, dropping stale heap entries on the way.
    fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(Reverse((deadline, key))) = self.delayed.peek() {
            if self.deadlines.get(key) == Some(deadline) {
                return Some(*deadline);
            }
            self.delayed.pop();
        }
        None
    }
}

#[cfg(test)]
mod tests;
