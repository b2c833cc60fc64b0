//! The store's watches: every change after a revision, from the changes kept in memory, or first
//! from etcd's history (a watch of the change record from that revision) until the memory's
//! reach. A revision etcd compacted away ends the watch with `Gone`, as does a listing of the
//! objects again after etcd compacted changes the store had not seen.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use aoctl_api::Kind;
use aoctl_store::{StoreError, WatchEvent, WatchStream};
use async_trait::async_trait;

use crate::client::WatchStream as EtcdWatch;
use crate::layout::{decode_record, kind_index, Batch};
use crate::wire::EventType;
use crate::Shared;

/// How many batches a watch takes from memory at a time.
const CHUNK: usize = 256;
const RETRY_MIN: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(1);

pub(crate) struct StoreWatch {
    shared: Arc<Shared>,
    advanced: tokio::sync::watch::Receiver<u64>,
    kinds: [bool; Kind::ALL.len()],
    /// Every change up to this revision has been seen.
    last: u64,
    /// The listing of the memory this watch reads from.
    epoch: u64,
    /// Reading etcd's history rather than memory.
    history: Option<History>,
    pending: VecDeque<WatchEvent>,
    error: Option<StoreError>,
    done: bool,
}

/// A watch of etcd's history of the change record, opened at the first `next`.
struct History {
    stream: Option<EtcdWatch>,
    retry: Duration,
}

impl StoreWatch {
    /// A watch from revision `from`; `Gone` when etcd is known to have compacted what it needs
    /// and memory does not hold it.
    pub(crate) fn new(shared: Arc<Shared>, kinds: &[Kind], from: u64) -> Result<StoreWatch, StoreError> {
        let mut wanted = [kinds.is_empty(); Kind::ALL.len()];
        for k in kinds {
            wanted[kind_index(*k)] = true;
        }
        let advanced = shared.subscribe();
        let (epoch, in_memory) = {
            let state = shared.read();
            (state.epoch, from >= state.log_start)
        };
        let compacted = shared.compacted();
        if !in_memory && from + 1 < compacted {
            return Err(StoreError::Gone { from, oldest: compacted });
        }
        let history = (!in_memory).then(|| History { stream: None, retry: RETRY_MIN });
        Ok(StoreWatch {
            shared,
            advanced,
            kinds: wanted,
            last: from,
            epoch,
            history,
            pending: VecDeque::new(),
            error: None,
            done: false,
        })
    }

    fn take(&mut self, batch: &Batch) {
        for ev in batch.events.iter().filter(|e| self.kinds[kind_index(e.kind)]) {
            self.pending.push_back(ev.clone());
        }
        self.last = self.last.max(batch.rv);
    }

    fn fail(&mut self, e: StoreError) {
        self.error = Some(e);
        self.done = true;
    }

    /// Reads what memory holds after `last`; switches to etcd's history when memory no longer
    /// holds all of it. Returns whether it has to wait for more.
    fn read_memory(&mut self) -> bool {
        // Seen before reading, so that a batch published after the read wakes the wait.
        self.advanced.borrow_and_update();
        let state = self.shared.read();
        if state.epoch != self.epoch {
            let e = StoreError::Gone { from: self.last, oldest: state.log_start };
            drop(state);
            self.fail(e);
            return false;
        }
        if self.last >= state.rv {
            return true;
        }
        match state.batches_after(self.last, CHUNK) {
            Some(batches) if batches.is_empty() => {
                self.last = state.rv;
                false
            }
            Some(batches) => {
                drop(state);
                for b in &batches {
                    self.take(b);
                }
                false
            }
            None => {
                drop(state);
                tracing::debug!(
                    from = self.last,
                    "a watch fell behind the changes kept in memory; reading etcd's history"
                );
                self.history = Some(History { stream: None, retry: RETRY_MIN });
                false
            }
        }
    }

    /// Reads one response of etcd's history into `pending`.
    async fn read_history(&mut self) {
        let Some(history) = self.history.as_mut() else { return };
        if history.stream.is_none() {
            let opened = tokio::time::timeout(
                self.shared.config.request_timeout,
                self.shared.client.watch(self.shared.keys.changes(), self.last as i64 + 1),
            )
            .await;
            match opened {
                Ok(Ok(stream)) => history.stream = Some(stream),
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "a watch cannot read etcd's history yet");
                    return self.pause().await;
                }
                Err(_) => return self.pause().await,
            }
        }
        let Some(stream) = history.stream.as_mut() else { return };
        let resp = match stream.message().await {
            Ok(Some(r)) => r,
            Ok(None) | Err(_) => {
                history.stream = None;
                return self.pause().await;
            }
        };
        history.retry = RETRY_MIN;
        if resp.compact_revision > 0 {
            let oldest = resp.compact_revision as u64;
            self.shared.note_compacted(oldest);
            return self.fail(StoreError::Gone { from: self.last, oldest });
        }
        if resp.canceled {
            history.stream = None;
            return;
        }
        for ev in &resp.events {
            let Some(kv) = ev.kv.as_ref().filter(|_| ev.kind == EventType::Put) else { continue };
            let rv = kv.mod_revision as u64;
            if rv <= self.last {
                continue;
            }
            match decode_record(&kv.value, rv) {
                Ok(batch) => self.take(&batch),
                Err(e) => {
                    tracing::error!(error = %e, rv, "a change record of the store cannot be read; its changes are skipped");
                    self.last = rv;
                }
            }
        }
        // Back to memory once it holds everything after what was read.
        let state = self.shared.read();
        if self.last >= state.log_start {
            self.epoch = state.epoch;
            self.history = None;
        }
    }

    /// Waits before etcd is asked again.
    async fn pause(&mut self) {
        if let Some(h) = self.history.as_mut() {
            let wait = h.retry;
            h.retry = (h.retry * 2).min(RETRY_MAX);
            tokio::time::sleep(wait).await;
        }
    }
}

#[async_trait]
impl WatchStream for StoreWatch {
    /// The next change, or `None` when the store closed or the watch cannot go on (then `error`
    /// says `Gone`).
    async fn next(&mut self) -> Option<WatchEvent> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            if self.done || self.shared.is_closed() {
                return None;
            }
            if self.history.is_some() {
                self.read_history().await;
                continue;
            }
            if self.read_memory() && self.advanced.changed().await.is_err() {
                self.done = true;
            }
        }
    }

    fn resource_version(&self) -> u64 {
        self.last
    }

    fn error(&self) -> Option<&StoreError> {
        self.error.as_ref()
    }
}
