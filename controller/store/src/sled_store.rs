//! The store on sled: one writer thread that commits writes in batches, each in a single sled
//! transaction followed by one flush, so resourceVersion order is commit order is watch order,
//! and a write is on disk before it is acknowledged. Reads are served from an in-memory copy of
//! the published state, and a batch is published only once it is on disk: a write the disk
//! refused (a full disk, say) is seen by no reader and no watch, its versions were never shown
//! to anyone, and the store writes again as soon as the disk does, without a restart.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use aoctl_api::selector::Selector;
use aoctl_api::Kind;
use async_trait::async_trait;
use tokio::sync::{broadcast, oneshot};

use crate::backend::{ObjectStore, Snapshot, StoredObject, Watch, WatchEvent};
use crate::error::StoreError;
use crate::state::{Shared, StoreConfig};
use crate::tx::{Op, Reply};
use crate::watch::LogWatch;
use crate::writer::{Request, Writer};
use crate::WriteOptions;

/// The sled backend; clones share it, and the writer stops when the last one goes.
#[derive(Clone)]
pub struct SledStore {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    requests: Option<mpsc::Sender<Request>>,
    events: broadcast::Sender<WatchEvent>,
    writer: Option<JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the queue stops the writer once it has served what was queued.
        self.requests.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

fn closed() -> StoreError {
    StoreError::Storage("the store is closed".into())
}

impl SledStore {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path, config: StoreConfig) -> Result<SledStore, StoreError> {
        let shared = Arc::new(Shared::open(dir, config)?);
        let (events, _) = broadcast::channel(shared.config.watch_buffer.max(1));
        let (requests, rx) = mpsc::channel();
        let w = Writer::new(shared.clone(), rx, events.clone());
        let writer = std::thread::Builder::new()
            .name("aoctl-store-writer".into())
            .spawn(move || w.run())
            .map_err(|e| StoreError::Storage(format!("cannot start the store writer: {e}")))?;
        Ok(SledStore { inner: Arc::new(Inner { shared, requests: Some(requests), events, writer: Some(writer) }) })
    }

    /// The settings the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.inner.shared.config
    }

    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Shared {
        &self.inner.shared
    }
}

#[async_trait]
impl ObjectStore for SledStore {
    fn resource_version(&self) -> u64 {
        self.inner.shared.published_rv()
    }

    fn oldest_resource_version(&self) -> u64 {
        self.inner.shared.compacted.load(Ordering::Acquire)
    }

    /// The error of the last write its disk refused, while no write has succeeded since. The
    /// store tries a small write every second meanwhile.
    fn writable(&self) -> Result<(), StoreError> {
        match self.inner.shared.unwritable() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Queues a write for the writer and waits until it is committed and flushed (or refused).
    async fn submit(&self, op: Op, opts: WriteOptions) -> Result<Reply, StoreError> {
        let (reply, rx) = oneshot::channel();
        let requests = self.inner.requests.as_ref().ok_or_else(closed)?;
        requests.send(Request { op, dry_run: opts.dry_run, reply }).map_err(|_| closed())?;
        rx.await.map_err(|_| StoreError::Storage("the store writer stopped".into()))?
    }

    async fn get_stored(&self, kind: Kind, name: &str) -> Result<StoredObject, StoreError> {
        let cache = self.inner.shared.read();
        cache.map(kind).get(name).cloned().ok_or_else(|| StoreError::not_found(kind, name))
    }

    async fn list_stored(&self, kind: Kind, selector: &Selector) -> Result<(Vec<StoredObject>, u64), StoreError> {
        let cache = self.inner.shared.read();
        let items = cache.map(kind).values().filter(|o| selector.matches_object(o.object())).cloned().collect();
        Ok((items, cache.rv))
    }

    fn watch(&self, kinds: &[Kind], from: u64) -> Result<Watch, StoreError> {
        let rx = self.inner.events.subscribe();
        let compacted = self.inner.shared.compacted.load(Ordering::Acquire);
        if from < compacted {
            return Err(StoreError::Gone { from, oldest: compacted + 1 });
        }
        Ok(Watch::new(LogWatch::new(self.inner.shared.clone(), rx, kinds, from)))
    }

    /// The published objects under one read of the cache, which the writer replaces batch by
    /// batch under its lock: no half of a batch is ever in it.
    async fn snapshot(&self) -> Result<Snapshot, StoreError> {
        let cache = self.inner.shared.read();
        Ok(Snapshot::of_maps("sled", cache.rv, |kind| cache.map(kind)))
    }
}
