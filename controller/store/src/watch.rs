//! The sled store's watches: every change after a resourceVersion, replayed from the log and then
//! followed live.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use aoctl_api::Kind;
use async_trait::async_trait;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use crate::backend::{WatchEvent, WatchStream};
use crate::codec::{kind_index, log_header, log_object, parse_rv_key, rv_key};
use crate::error::StoreError;
use crate::state::Shared;

/// How many log entries a catching-up watch reads at a time.
const REPLAY_CHUNK: u64 = 256;

/// A watch of the sled store: the log replayed in chunks, then the live broadcast.
pub(crate) struct LogWatch {
    shared: Arc<Shared>,
    rx: broadcast::Receiver<WatchEvent>,
    kinds: [bool; Kind::ALL.len()],
    /// Every change up to this resourceVersion (of any kind) has been seen.
    last: u64,
    /// Changes up to this resourceVersion are to be read from the log rather than the channel.
    catch_up_to: u64,
    pending: VecDeque<WatchEvent>,
    error: Option<StoreError>,
    done: bool,
}

impl LogWatch {
    pub(crate) fn new(shared: Arc<Shared>, rx: broadcast::Receiver<WatchEvent>, kinds: &[Kind], from: u64) -> LogWatch {
        let mut wanted = [kinds.is_empty(); Kind::ALL.len()];
        for k in kinds {
            wanted[kind_index(*k)] = true;
        }
        let published = shared.rv.load(Ordering::Acquire);
        LogWatch {
            shared,
            rx,
            kinds: wanted,
            last: from,
            catch_up_to: published,
            pending: VecDeque::new(),
            error: None,
            done: false,
        }
    }

    /// Reads the next stretch of the log into `pending`; a missing entry means it was compacted.
    fn replay_chunk(&mut self) -> Result<(), StoreError> {
        let end = self.catch_up_to.min(self.last + REPLAY_CHUNK);
        // Held while reading, so the writer never reopens the database under a replay.
        let db = self.shared.db();
        let db = db.as_ref().ok_or_else(|| match self.shared.unwritable() {
            Some(e) => e,
            None => StoreError::Unavailable("the store's database is being reopened".into()),
        })?;
        for item in db.log.range(rv_key(self.last + 1)..=rv_key(end)) {
            let (k, v) = item?;
            let rv = parse_rv_key(&k)?;
            if rv != self.last + 1 {
                break;
            }
            let (kind_, kind) = log_header(&v)?;
            if self.kinds[kind_index(kind)] {
                self.pending.push_back(WatchEvent { kind_, kind, object: Arc::new(log_object(&v)?), rv });
            }
            self.last = rv;
        }
        if self.last < end {
            return Err(StoreError::Gone {
                from: self.last,
                oldest: self.shared.compacted.load(Ordering::Acquire) + 1,
            });
        }
        Ok(())
    }
}

#[async_trait]
impl WatchStream for LogWatch {
    /// The next change, or `None` when the store closed or the watch fell behind the retained log
    /// (then `error` says `Gone`).
    async fn next(&mut self) -> Option<WatchEvent> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            if self.done {
                return None;
            }
            if self.last < self.catch_up_to {
                if let Err(e) = self.replay_chunk() {
                    self.error = Some(e);
                    self.done = true;
                }
                continue;
            }
            match self.rx.recv().await {
                Ok(ev) if ev.rv <= self.last => {}
                Ok(ev) if ev.rv > self.last + 1 => {
                    // Not expected, since changes are published in order; the log fills the gap.
                    self.catch_up_to = ev.rv;
                }
                Ok(ev) => {
                    self.last = ev.rv;
                    if self.kinds[kind_index(ev.kind)] {
                        return Some(ev);
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    tracing::debug!(missed = n, "watch lagged behind; catching up from the log");
                    self.catch_up_to = self.shared.rv.load(Ordering::Acquire);
                }
                Err(RecvError::Closed) => self.done = true,
            }
        }
    }

    /// The resourceVersion up to which this watch has seen every change; a bookmark may carry it.
    fn resource_version(&self) -> u64 {
        self.last
    }

    /// Why the stream ended early: `Gone` when changes it still needed were compacted.
    fn error(&self) -> Option<&StoreError> {
        self.error.as_ref()
    }
}
