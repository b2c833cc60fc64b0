//! The durable object store of aoctl: objects of every kind in sled, with the apiserver's rules
//! (uid, resourceVersion, generation, finalizers, cascading deletion) and gap-free watches.
//!
//! Writes go to one writer thread that commits them in batches, each in a single sled transaction
//! followed by one flush, so resourceVersion order is commit order is watch order, and a write is
//! on disk before it is acknowledged. Reads are served from an in-memory copy of the published state,
//! and a batch is published only once it is on disk: a write the disk refused (a full disk, say)
//! is seen by no reader and no watch, its versions were never shown to anyone, and the store
//! writes again as soon as the disk does, without a restart ([`Store::writable`]).

mod codec;
mod error;
mod selector;
mod state;
mod tx;
mod watch;
mod writer;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use aoctl_api::{Kind, Resource};
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

pub use error::{StoreError, CONFLICT_MESSAGE};
pub use selector::{Requirement, Selector};
pub use state::{StoreConfig, StoredObject};
pub use watch::{EventKind, Watch, WatchEvent};

use state::Shared;
use writer::{Op, Reply, Request, Writer};

/// Options of a write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Run every check and return what would be stored, but store nothing.
    pub dry_run: bool,
}

impl WriteOptions {
    /// A dry-run write.
    pub const DRY_RUN: WriteOptions = WriteOptions { dry_run: true };
}

/// The outcome of a delete.
#[derive(Clone, Debug, PartialEq)]
pub enum Deleted {
    /// The object was removed; this is its last state.
    Gone(Value),
    /// Finalizers remain: the object stays, with `deletionTimestamp` set, until they are removed.
    Terminating(Value),
}

impl Deleted {
    pub fn object(&self) -> &Value {
        match self {
            Deleted::Gone(v) | Deleted::Terminating(v) => v,
        }
    }

    pub fn into_object(self) -> Value {
        match self {
            Deleted::Gone(v) | Deleted::Terminating(v) => v,
        }
    }

    pub fn is_gone(&self) -> bool {
        matches!(self, Deleted::Gone(_))
    }
}

/// A handle on the store; clones share it.
#[derive(Clone)]
pub struct Store {
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

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("resource_version", &self.resource_version()).finish()
    }
}

fn closed() -> StoreError {
    StoreError::Storage("the store is closed".into())
}

fn decode<T: Resource>(v: Value) -> Result<T, StoreError> {
    aoctl_api::decode::from_value(v).map_err(|e| StoreError::Storage(format!("stored object does not decode: {e}")))
}

impl Store {
    /// Opens (or creates) the store in `dir` with the default settings.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        Store::open_with(dir, StoreConfig::default())
    }

    /// Opens (or creates) the store in `dir`.
    pub fn open_with(dir: &Path, config: StoreConfig) -> Result<Store, StoreError> {
        let shared = Arc::new(Shared::open(dir, config)?);
        let (events, _) = broadcast::channel(shared.config.watch_buffer.max(1));
        let (requests, rx) = mpsc::channel();
        let w = Writer::new(shared.clone(), rx, events.clone());
        let writer = std::thread::Builder::new()
            .name("aoctl-store-writer".into())
            .spawn(move || w.run())
            .map_err(|e| StoreError::Storage(format!("cannot start the store writer: {e}")))?;
        Ok(Store { inner: Arc::new(Inner { shared, requests: Some(requests), events, writer: Some(writer) }) })
    }

    /// The settings the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.inner.shared.config
    }

    /// The newest resourceVersion visible to reads and watches.
    pub fn resource_version(&self) -> u64 {
        self.inner.shared.published_rv()
    }

    /// Whether the store can write: the error of the last write its disk refused, while no write
    /// has succeeded since. The store tries a small write every second meanwhile.
    pub fn writable(&self) -> Result<(), StoreError> {
        match self.inner.shared.unwritable() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The oldest resourceVersion a watch may still start from.
    pub fn oldest_resource_version(&self) -> u64 {
        self.inner.shared.compacted.load(Ordering::Acquire)
    }

    pub async fn get(&self, kind: Kind, name: &str) -> Result<Value, StoreError> {
        let cache = self.inner.shared.read();
        cache.get(kind, name).map(|o| Value::clone(o)).ok_or_else(|| StoreError::not_found(kind, name))
    }

    /// The objects of `kind` matching `selector`, sorted by name, and the resourceVersion they are
    /// current at; a watch from that resourceVersion misses nothing.
    pub async fn list(&self, kind: Kind, selector: &Selector) -> Result<(Vec<Value>, u64), StoreError> {
        let cache = self.inner.shared.read();
        let items = cache
            .map(kind)
            .values()
            .map(StoredObject::object)
            .filter(|o| selector.matches_object(o))
            .cloned()
            .collect();
        Ok((items, cache.rv))
    }

    /// `get`, as the stored object: the value and its JSON encoding, shared, not copied.
    pub async fn get_stored(&self, kind: Kind, name: &str) -> Result<StoredObject, StoreError> {
        let cache = self.inner.shared.read();
        cache.map(kind).get(name).cloned().ok_or_else(|| StoreError::not_found(kind, name))
    }

    /// `list`, as stored objects: the values and their JSON encodings, shared, not copied, so a
    /// reader can answer with the bytes rather than encode every object again.
    pub async fn list_stored(&self, kind: Kind, selector: &Selector) -> Result<(Vec<StoredObject>, u64), StoreError> {
        let cache = self.inner.shared.read();
        let items = cache.map(kind).values().filter(|o| selector.matches_object(o.object())).cloned().collect();
        Ok((items, cache.rv))
    }

    /// Creates an object; the store assigns uid, resourceVersion, generation and creationTimestamp
    /// and drops any status.
    pub async fn create(&self, kind: Kind, obj: Value, opts: WriteOptions) -> Result<Value, StoreError> {
        self.object(Op::Create { kind, obj }, opts).await
    }

    /// Replaces labels, annotations, finalizers, ownerReferences and spec of an existing object.
    /// A `metadata.resourceVersion` in the body is a precondition.
    pub async fn update(&self, kind: Kind, obj: Value, opts: WriteOptions) -> Result<Value, StoreError> {
        self.object(Op::Update { kind, obj }, opts).await
    }

    /// Replaces the status of an object, optionally on the condition that it is at `rv`.
    pub async fn update_status(
        &self,
        kind: Kind,
        name: &str,
        status: Value,
        rv: Option<&str>,
        opts: WriteOptions,
    ) -> Result<Value, StoreError> {
        let op = Op::UpdateStatus { kind, name: name.to_string(), status, rv: rv.map(str::to_string) };
        self.object(op, opts).await
    }

    /// Deletes an object, or marks it for deletion while finalizers remain; objects it owns follow.
    pub async fn delete(
        &self,
        kind: Kind,
        name: &str,
        rv: Option<&str>,
        opts: WriteOptions,
    ) -> Result<Deleted, StoreError> {
        match self.submit(Op::Delete { kind, name: name.to_string(), rv: rv.map(str::to_string) }, opts).await? {
            Reply::Deleted(d) => Ok(d),
            Reply::Object(_) => Err(StoreError::Storage("unexpected reply to a delete".into())),
        }
    }

    /// Every change to objects of `kinds` (all kinds when empty) after resourceVersion `from`.
    /// Fails with `Gone` when some of those changes are no longer in the log.
    pub fn watch(&self, kinds: &[Kind], from: u64) -> Result<Watch, StoreError> {
        let rx = self.inner.events.subscribe();
        let compacted = self.inner.shared.compacted.load(Ordering::Acquire);
        if from < compacted {
            return Err(StoreError::Gone { from, oldest: compacted + 1 });
        }
        Ok(Watch::new(self.inner.shared.clone(), rx, kinds, from))
    }

    pub async fn get_typed<T: Resource>(&self, name: &str) -> Result<T, StoreError> {
        decode(self.get(T::KIND, name).await?)
    }

    pub async fn list_typed<T: Resource>(&self, selector: &Selector) -> Result<(Vec<T>, u64), StoreError> {
        let (items, rv) = self.list(T::KIND, selector).await?;
        Ok((items.into_iter().map(decode).collect::<Result<_, _>>()?, rv))
    }

    pub async fn create_typed<T: Resource>(&self, obj: &T) -> Result<T, StoreError> {
        decode(self.create(T::KIND, serde_json::to_value(obj)?, WriteOptions::default()).await?)
    }

    /// Updates the spec side of a typed object, with its resourceVersion (if any) as precondition.
    pub async fn update_typed<T: Resource>(&self, obj: &T) -> Result<T, StoreError> {
        decode(self.update(T::KIND, serde_json::to_value(obj)?, WriteOptions::default()).await?)
    }

    /// Writes the status of a typed object, with its resourceVersion (if any) as precondition.
    pub async fn update_status_typed<T: Resource>(&self, obj: &T) -> Result<T, StoreError> {
        let status = serde_json::to_value(obj)?.get("status").cloned().unwrap_or(Value::Null);
        let rv = obj.meta().resource_version.as_deref();
        decode(self.update_status(T::KIND, obj.name(), status, rv, WriteOptions::default()).await?)
    }

    async fn object(&self, op: Op, opts: WriteOptions) -> Result<Value, StoreError> {
        match self.submit(op, opts).await? {
            Reply::Object(v) => Ok(v),
            Reply::Deleted(d) => Ok(d.into_object()),
        }
    }

    /// Queues a write for the writer and waits until it is committed and flushed (or refused).
    async fn submit(&self, op: Op, opts: WriteOptions) -> Result<Reply, StoreError> {
        let (reply, rx) = oneshot::channel();
        let requests = self.inner.requests.as_ref().ok_or_else(closed)?;
        requests.send(Request { op, dry_run: opts.dry_run, reply }).map_err(|_| closed())?;
        rx.await.map_err(|_| StoreError::Storage("the store writer stopped".into()))?
    }

    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Shared {
        &self.inner.shared
    }
}
