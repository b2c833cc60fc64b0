//! The durable object store of aoctl: objects of every kind with the apiserver's rules (uid,
//! resourceVersion, generation, finalizers, cascading deletion) and gap-free watches.
//!
//! [`ObjectStore`] is what a backend implements: its reads, watches and one write, `submit`, from
//! which the trait builds create, update, the status and finalizer writes, delete and
//! `apply_all`; [`SledStore`] keeps the objects in sled on the local disk. Callers hold a
//! [`Store`], a cheap handle on one backend that adds the reads of plain values and the typed
//! helpers. [`tx`] holds the rules of every write, which every backend runs over a view of its
//! objects. The `contract` module (with the `contract` feature) is the
//! test suite every backend passes.

mod backend;
mod change;
mod codec;
#[cfg(any(test, feature = "contract"))]
pub mod contract;
mod error;
mod load;
mod sled_store;
mod state;
pub mod tx;
mod watch;
mod writer;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;

use aoctl_api::{Kind, Resource};
use serde_json::Value;

pub use aoctl_api::selector::{FieldSelector, Requirement, Selector};
pub use backend::{ObjectStore, Snapshot, StoredObject, Watch, WatchEvent, WatchStream};
pub use change::EventKind;
pub use error::{StoreError, CONFLICT_MESSAGE};
pub use load::Restored;
pub use sled_store::SledStore;
pub use state::StoreConfig;
pub use tx::{Write, Written};

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

/// A handle on a store backend; clones share it.
#[derive(Clone)]
pub struct Store {
    backend: Arc<dyn ObjectStore>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("resource_version", &self.resource_version()).finish()
    }
}

fn decode<T: Resource>(v: Value) -> Result<T, StoreError> {
    aoctl_api::decode::from_value(v).map_err(|e| StoreError::Storage(format!("stored object does not decode: {e}")))
}

impl Store {
    /// A handle on `backend`.
    pub fn new(backend: impl ObjectStore) -> Store {
        Store { backend: Arc::new(backend) }
    }

    /// Opens (or creates) the sled store in `dir` with the default settings.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        Store::open_with(dir, StoreConfig::default())
    }

    /// Opens (or creates) the sled store in `dir`.
    pub fn open_with(dir: &Path, config: StoreConfig) -> Result<Store, StoreError> {
        Ok(Store::new(SledStore::open(dir, config)?))
    }

    /// The newest resourceVersion visible to reads and watches.
    pub fn resource_version(&self) -> u64 {
        self.backend.resource_version()
    }

    /// Whether the store can write: the error of the last write its disk refused, while no write
    /// has succeeded since.
    pub fn writable(&self) -> Result<(), StoreError> {
        self.backend.writable()
    }

    /// The oldest resourceVersion a watch may still start from.
    pub fn oldest_resource_version(&self) -> u64 {
        self.backend.oldest_resource_version()
    }

    pub async fn get(&self, kind: Kind, name: &str) -> Result<Value, StoreError> {
        Ok(self.backend.get_stored(kind, name).await?.object().clone())
    }

    /// The objects of `kind` matching `selector`, sorted by name, and the resourceVersion they are
    /// current at; a watch from that resourceVersion misses nothing.
    pub async fn list(&self, kind: Kind, selector: &Selector) -> Result<(Vec<Value>, u64), StoreError> {
        let (items, rv) = self.backend.list_stored(kind, selector).await?;
        Ok((items.iter().map(|o| o.object().clone()).collect(), rv))
    }

    /// `get`, as the stored object: the value and its JSON encoding, shared, not copied.
    pub async fn get_stored(&self, kind: Kind, name: &str) -> Result<StoredObject, StoreError> {
        self.backend.get_stored(kind, name).await
    }

    /// `list`, as stored objects: the values and their JSON encodings, shared, not copied, so a
    /// reader can answer with the bytes rather than encode every object again.
    pub async fn list_stored(&self, kind: Kind, selector: &Selector) -> Result<(Vec<StoredObject>, u64), StoreError> {
        self.backend.list_stored(kind, selector).await
    }

    /// Creates an object; the store assigns uid, resourceVersion, generation and creationTimestamp
    /// and drops any status.
    pub async fn create(&self, kind: Kind, obj: Value, opts: WriteOptions) -> Result<Value, StoreError> {
        self.backend.create(kind, obj, opts).await
    }

    /// Replaces labels, annotations, finalizers, ownerReferences and spec of an existing object.
    /// A `metadata.resourceVersion` in the body is a precondition.
    pub async fn update(&self, kind: Kind, obj: Value, opts: WriteOptions) -> Result<Value, StoreError> {
        self.backend.update(kind, obj, opts).await
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
        self.backend.update_status(kind, name, status, rv, opts).await
    }

    /// Replaces `metadata.finalizers` of an object and nothing else, optionally on the condition
    /// that it is at `rv`; an object being deleted goes with its last finalizer.
    pub async fn update_finalizers(
        &self,
        kind: Kind,
        name: &str,
        finalizers: Vec<String>,
        rv: Option<&str>,
        opts: WriteOptions,
    ) -> Result<Value, StoreError> {
        self.backend.update_finalizers(kind, name, finalizers, rv, opts).await
    }

    /// Deletes an object, or marks it for deletion while finalizers remain; objects it owns follow.
    pub async fn delete(
        &self,
        kind: Kind,
        name: &str,
        rv: Option<&str>,
        opts: WriteOptions,
    ) -> Result<Deleted, StoreError> {
        self.backend.delete(kind, name, rv, opts).await
    }

    /// Every change to objects of `kinds` (all kinds when empty) after resourceVersion `from`.
    /// Fails with `Gone` when some of those changes are no longer in the log.
    /// Applies the writes in one transaction: all are stored, or none (the first failure is
    /// returned). Later writes see the earlier ones.
    pub async fn apply_all(&self, writes: Vec<Write>, opts: WriteOptions) -> Result<Vec<Written>, StoreError> {
        self.backend.apply_all(writes, opts).await
    }

    pub fn watch(&self, kinds: &[Kind], from: u64) -> Result<Watch, StoreError> {
        self.backend.watch(kinds, from)
    }

    /// Every object of every kind as it stood at one resourceVersion: what a backup holds.
    pub async fn snapshot(&self) -> Result<Snapshot, StoreError> {
        self.backend.snapshot().await
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

    /// Writes the finalizers of a typed object and nothing else, with its resourceVersion (if
    /// any) as precondition.
    pub async fn update_finalizers_typed<T: Resource>(&self, obj: &T) -> Result<T, StoreError> {
        let meta = obj.meta();
        let (finalizers, rv) = (meta.finalizers.clone(), meta.resource_version.as_deref());
        decode(self.update_finalizers(T::KIND, obj.name(), finalizers, rv, WriteOptions::default()).await?)
    }
}
