//! The interface of a store backend ([`ObjectStore`]) and the types it speaks: stored objects,
//! watch events and watches. The sled store and the etcd store (`aoctl-store-etcd`) implement it:
//! each its reads, watches and one write, `submit`, from which the trait builds the others, so
//! both follow the same rules and pass the same contract suite (`contract`).

use std::sync::Arc;

use aoctl_api::selector::Selector;
use aoctl_api::Kind;
use async_trait::async_trait;
use serde_json::Value;

use crate::change::EventKind;
use crate::tx::{Op, Reply, Write, Written};
use crate::{Deleted, StoreError, WriteOptions};

/// What every backend of the store provides. The rules are those of the Kubernetes apiserver:
/// only the backend assigns uid, resourceVersion, generation and timestamps; a non-empty
/// resourceVersion precondition that is not the stored one fails with `Conflict`; `generation`
/// moves only with spec; spec, status and finalizers are written through separate methods, each
/// touching nothing else; a delete of an object with finalizers sets `deletionTimestamp`, and the
/// object goes when its last finalizer is removed; a watch from any retained resourceVersion
/// sees every later change once, in order, and one from an older one fails with `Gone`.
#[async_trait]
pub trait ObjectStore: Send + Sync + 'static {
    /// The newest resourceVersion visible to reads and watches.
    fn resource_version(&self) -> u64;

    /// The oldest resourceVersion a watch may still start from.
    fn oldest_resource_version(&self) -> u64;

    /// Whether the backend can write now; the error says why not.
    fn writable(&self) -> Result<(), StoreError>;

    /// One object, with its encoding.
    async fn get_stored(&self, kind: Kind, name: &str) -> Result<StoredObject, StoreError>;

    /// The objects of `kind` matching `selector`, sorted by name, and the resourceVersion they are
    /// current at; a watch from that resourceVersion misses nothing.
    async fn list_stored(&self, kind: Kind, selector: &Selector) -> Result<(Vec<StoredObject>, u64), StoreError>;

    /// Runs one write through the rules of [`crate::tx`] and stores it; every write method
    /// below is one `Op` given to it.
    async fn submit(&self, op: Op, opts: WriteOptions) -> Result<Reply, StoreError>;

    /// Creates an object; the backend assigns uid, resourceVersion, generation and
    /// creationTimestamp (or a name, from `generateName`) and drops any status. An owner reference
    /// with an empty uid names its owner by kind and name (in `create` and `update`): the backend
    /// fills in that object's uid, as it stands in the same batch or the store, and refuses the
    /// write when there is no such object.
    async fn create(&self, kind: Kind, obj: Value, opts: WriteOptions) -> Result<Value, StoreError> {
        self.submit(Op::Create { kind, obj }, opts).await?.into_object()
    }

    /// Replaces labels, annotations, finalizers, ownerReferences and spec of an existing object.
    /// A `metadata.resourceVersion` in the body is a precondition.
    async fn update(&self, kind: Kind, obj: Value, opts: WriteOptions) -> Result<Value, StoreError> {
        self.submit(Op::Update { kind, obj }, opts).await?.into_object()
    }

    /// Replaces the status of an object, optionally on the condition that it is at `rv`.
    async fn update_status(
        &self,
        kind: Kind,
        name: &str,
        status: Value,
        rv: Option<&str>,
        opts: WriteOptions,
    ) -> Result<Value, StoreError> {
        let op = Op::UpdateStatus { kind, name: name.to_string(), status, rv: rv.map(str::to_string) };
        self.submit(op, opts).await?.into_object()
    }

    /// Replaces `metadata.finalizers` of an object and nothing else, optionally on the condition
    /// that it is at `rv`. Removing the last finalizer of an object being deleted removes it.
    async fn update_finalizers(
        &self,
        kind: Kind,
        name: &str,
        finalizers: Vec<String>,
        rv: Option<&str>,
        opts: WriteOptions,
    ) -> Result<Value, StoreError> {
        let op = Op::UpdateFinalizers { kind, name: name.to_string(), finalizers, rv: rv.map(str::to_string) };
        self.submit(op, opts).await?.into_object()
    }

    /// Deletes an object, or marks it for deletion while finalizers remain; objects it owns follow.
    async fn delete(
        &self,
        kind: Kind,
        name: &str,
        rv: Option<&str>,
        opts: WriteOptions,
    ) -> Result<Deleted, StoreError> {
        let op = Op::Delete { kind, name: name.to_string(), rv: rv.map(str::to_string) };
        self.submit(op, opts).await?.into_deleted()
    }

    /// Applies every write of `writes` in order, in one transaction: all of them are stored or,
    /// when one fails (its error is returned), none is. Later writes see the earlier ones.
    async fn apply_all(&self, writes: Vec<Write>, opts: WriteOptions) -> Result<Vec<Written>, StoreError> {
        if writes.is_empty() {
            return Ok(vec![]);
        }
        self.submit(Op::batch(writes), opts).await?.into_written()
    }

    /// Every change to objects of `kinds` (all kinds when empty) after resourceVersion `from`.
    /// Fails with `Gone` when some of those changes are no longer retained.
    fn watch(&self, kinds: &[Kind], from: u64) -> Result<Watch, StoreError>;

    /// Every object of every kind as it stood at one resourceVersion, read in one step: what a
    /// backup holds.
    async fn snapshot(&self) -> Result<Snapshot, StoreError>;
}

/// Every stored object at one resourceVersion ([`ObjectStore::snapshot`]).
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The backend's name: `sled` or `etcd`.
    pub backend: &'static str,
    /// Every change up to this resourceVersion is in the snapshot, and none after it.
    pub rv: u64,
    /// The objects, kind by kind (in `Kind::ALL` order), each kind's sorted by name.
    pub objects: Vec<(Kind, StoredObject)>,
}

impl Snapshot {
    /// The snapshot of per-kind maps (as both backends keep their objects) at `rv`.
    pub fn of_maps<'a>(
        backend: &'static str,
        rv: u64,
        map: impl Fn(Kind) -> &'a std::collections::BTreeMap<String, StoredObject>,
    ) -> Snapshot {
        let objects =
            Kind::ALL.into_iter().flat_map(|kind| map(kind).values().map(move |o| (kind, o.clone()))).collect();
        Snapshot { backend, rv, objects }
    }
}

/// An object as stored: its value and its JSON encoding, so that a read can answer with the
/// bytes instead of encoding the value again. Clones share both.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredObject {
    object: Arc<Value>,
    json: Arc<[u8]>,
}

impl StoredObject {
    /// Pairs a value with its encoding; `json` must be the compact JSON of `object`.
    pub(crate) fn new(object: Arc<Value>, json: Arc<[u8]>) -> StoredObject {
        StoredObject { object, json }
    }

    /// A value with the encoding `serde_json::to_vec` gives it.
    pub fn encode(object: Value) -> StoredObject {
        StoredObject::encode_shared(Arc::new(object))
    }

    /// A shared value with the encoding `serde_json::to_vec` gives it; the value is not copied.
    pub fn encode_shared(object: Arc<Value>) -> StoredObject {
        let json = serde_json::to_vec(&*object).expect("values serialise");
        StoredObject { object, json: Arc::from(json) }
    }

    pub fn object(&self) -> &Value {
        &self.object
    }

    /// The value, shared.
    pub fn object_arc(&self) -> &Arc<Value> {
        &self.object
    }

    /// The object as the compact JSON the store wrote, `serde_json::to_vec(self.object())`.
    pub fn json(&self) -> &[u8] {
        &self.json
    }
}

/// One committed change. For `Deleted`, `object` is the last state, carrying the deletion's resourceVersion.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchEvent {
    pub kind_: EventKind,
    pub kind: Kind,
    pub object: Arc<Value>,
    pub rv: u64,
}

/// What a backend's watch implements; [`Watch`] wraps it.
#[async_trait]
pub trait WatchStream: Send {
    /// The next change, or `None` when the stream ended (then `error` may say why). Must be
    /// cancel-safe: a change is never lost because a call was dropped before it returned.
    async fn next(&mut self) -> Option<WatchEvent>;

    /// The resourceVersion up to which every change has been seen.
    fn resource_version(&self) -> u64;

    /// Why the stream ended early: `Gone` when changes it still needed are no longer retained.
    fn error(&self) -> Option<&StoreError>;
}

/// A stream of the changes with a resourceVersion above a starting point, for some kinds, in order,
/// each exactly once. `next` is cancel-safe, so it may be raced against a timer to send bookmarks.
pub struct Watch {
    stream: Box<dyn WatchStream>,
}

impl Watch {
    pub fn new(stream: impl WatchStream + 'static) -> Watch {
        Watch { stream: Box::new(stream) }
    }

    /// The next change, or `None` when the store closed or the watch fell behind the retained
    /// changes (then `error` says `Gone`).
    pub async fn next(&mut self) -> Option<WatchEvent> {
        self.stream.next().await
    }

    /// The resourceVersion up to which this watch has seen every change; a bookmark may carry it.
    pub fn resource_version(&self) -> u64 {
        self.stream.resource_version()
    }

    /// Why the stream ended early: `Gone` when changes it still needed were compacted.
    pub fn error(&self) -> Option<&StoreError> {
        self.stream.error()
    }
}
