//! The rules of every write, applied to a staged view of the store: what the store assigns,
//! preconditions, generations, finalizers and cascading deletion. Every backend runs its writes
//! through these rules over a [`View`] of its objects (the sled store over its published cache,
//! the etcd store over its watch-fed cache), so all backends apply exactly the same ones.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use aoctl_api::validate::validate_meta;
use aoctl_api::{Kind, ObjectMeta, Time, API_VERSION};
use rand::Rng;
use serde_json::{Map, Value};

use crate::change::EventKind;
use crate::codec::{has_finalizers, is_owned_by, meta_str, set_meta};
use crate::error::StoreError;
use crate::Deleted;

/// One write of a batch (`ObjectStore::apply_all`), with the rules of the method of the same name.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    Create {
        kind: Kind,
        obj: Value,
    },
    /// `update`: a `metadata.resourceVersion` in the body is a precondition.
    Update {
        kind: Kind,
        obj: Value,
    },
    UpdateStatus {
        kind: Kind,
        name: String,
        status: Value,
        rv: Option<String>,
    },
    Delete {
        kind: Kind,
        name: String,
        rv: Option<String>,
    },
}

/// What one write of a batch returned.
#[derive(Clone, Debug, PartialEq)]
pub enum Written {
    /// The object as stored after a create, an update or a status write.
    Object(Value),
    Deleted(Deleted),
}

/// What the rules read of a backend's objects: one object by kind and name, and which objects
/// an owner has (for cascading deletion).
pub trait View {
    /// The object of `kind` named `name`, as stored (with its `metadata.resourceVersion`).
    fn get(&self, kind: Kind, name: &str) -> Option<Arc<Value>>;

    /// The kinds and names of the objects whose `metadata.ownerReferences` list `uid`, in any order.
    fn owned_by(&self, uid: &str) -> Vec<(Kind, String)>;
}

/// [`View::owned_by`] over a backend's objects by kind, as both stores keep them: the kinds and
/// names of the objects in `objects(kind)` whose `metadata.ownerReferences` list `uid`.
pub fn owned_in<'a>(
    objects: impl Fn(Kind) -> &'a std::collections::BTreeMap<String, crate::StoredObject>,
    uid: &str,
) -> Vec<(Kind, String)> {
    let mut out = vec![];
    for kind in Kind::ALL {
        for (name, obj) in objects(kind) {
            if is_owned_by(obj.object(), uid) {
                out.push((kind, name.clone()));
            }
        }
    }
    out
}

/// Staged objects by kind and name; `None` marks a removal.
pub type Overlay = HashMap<(Kind, String), Option<Arc<Value>>>;

/// One change to commit, with the resourceVersion it was given.
#[derive(Clone, Debug)]
pub struct Change {
    pub rv: u64,
    pub type_: EventKind,
    pub kind: Kind,
    pub name: String,
    pub object: Arc<Value>,
}

/// A write a backend was asked for, as the rules take it.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Create {
        kind: Kind,
        obj: Value,
    },
    Update {
        kind: Kind,
        obj: Value,
    },
    UpdateStatus {
        kind: Kind,
        name: String,
        status: Value,
        rv: Option<String>,
    },
    UpdateFinalizers {
        kind: Kind,
        name: String,
        finalizers: Vec<String>,
        rv: Option<String>,
    },
    Delete {
        kind: Kind,
        name: String,
        rv: Option<String>,
    },
    /// Writes applied in one transaction: all or none.
    All(Vec<Op>),
}

impl Op {
    /// The writes of an `apply_all`, as one transaction.
    pub fn batch(writes: Vec<Write>) -> Op {
        Op::All(
            writes
                .into_iter()
                .map(|w| match w {
                    Write::Create { kind, obj } => Op::Create { kind, obj },
                    Write::Update { kind, obj } => Op::Update { kind, obj },
                    Write::UpdateStatus { kind, name, status, rv } => Op::UpdateStatus { kind, name, status, rv },
                    Write::Delete { kind, name, rv } => Op::Delete { kind, name, rv },
                })
                .collect(),
        )
    }
}

/// What a write returns.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Object(Value),
    Deleted(Deleted),
    All(Vec<Reply>),
}

impl Reply {
    /// The object of a single write (the last state, for a delete).
    pub fn into_object(self) -> Result<Value, StoreError> {
        match self {
            Reply::Object(v) => Ok(v),
            Reply::Deleted(d) => Ok(d.into_object()),
            Reply::All(_) => Err(StoreError::Storage("unexpected reply to a single write".into())),
        }
    }

    /// The outcome of a delete.
    pub fn into_deleted(self) -> Result<Deleted, StoreError> {
        match self {
            Reply::Deleted(d) => Ok(d),
            Reply::Object(_) | Reply::All(_) => Err(StoreError::Storage("unexpected reply to a delete".into())),
        }
    }

    /// What each write of a batch returned.
    pub fn into_written(self) -> Result<Vec<Written>, StoreError> {
        let Reply::All(replies) = self else {
            return Err(StoreError::Storage("unexpected reply to a batch".into()));
        };
        replies
            .into_iter()
            .map(|r| match r {
                Reply::Deleted(d) => Ok(Written::Deleted(d)),
                Reply::Object(v) => Ok(Written::Object(v)),
                Reply::All(_) => Err(StoreError::Storage("batches do not nest".into())),
            })
            .collect()
    }
}

/// Applies one write (or a batch, in order) to `tx`. A failed write of a batch fails it, and the
/// caller drops what the batch staged.
pub fn apply(tx: &mut Tx<'_>, op: Op) -> Result<Reply, StoreError> {
    match op {
        Op::Create { kind, obj } => tx.create(kind, obj).map(Reply::Object),
        Op::Update { kind, obj } => tx.update(kind, obj).map(Reply::Object),
        Op::UpdateStatus { kind, name, status, rv } => {
            tx.update_status(kind, &name, status, rv.as_deref()).map(Reply::Object)
        }
        Op::UpdateFinalizers { kind, name, finalizers, rv } => {
            tx.update_finalizers(kind, &name, finalizers, rv.as_deref()).map(Reply::Object)
        }
        Op::Delete { kind, name, rv } => tx.delete(kind, &name, rv.as_deref()).map(Reply::Deleted),
        Op::All(ops) => ops.into_iter().map(|op| apply(tx, op)).collect::<Result<_, _>>().map(Reply::All),
    }
}

/// Characters `generateName` appends.
const NAME_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
/// How many generated names are tried before giving up.
const NAME_ATTEMPTS: usize = 16;
/// Top-level fields that are never part of an object's spec.
const NOT_SPEC: [&str; 4] = ["apiVersion", "kind", "metadata", "status"];

/// One request's staged writes, read through the batch's staged writes and the backend's view.
///
/// Each change is given the next resourceVersion from `next_rv` on (none in a dry run); a
/// backend whose versions are assigned at commit (etcd's revisions) replaces them afterwards.
pub struct Tx<'a> {
    view: &'a dyn View,
    base: &'a Overlay,
    own: Overlay,
    changes: Vec<Change>,
    next_rv: u64,
    dry_run: bool,
}

impl<'a> Tx<'a> {
    pub fn new(view: &'a dyn View, base: &'a Overlay, next_rv: u64, dry_run: bool) -> Tx<'a> {
        Tx { view, base, own: Overlay::new(), changes: vec![], next_rv, dry_run }
    }

    /// The staged objects, the changes and the next free resourceVersion.
    pub fn into_parts(self) -> (Overlay, Vec<Change>, u64) {
        (self.own, self.changes, self.next_rv)
    }

    pub fn get(&self, kind: Kind, name: &str) -> Option<Arc<Value>> {
        let key = (kind, name.to_string());
        if let Some(v) = self.own.get(&key).or_else(|| self.base.get(&key)) {
            return v.clone();
        }
        self.view.get(kind, name)
    }

    fn get_existing(&self, kind: Kind, name: &str) -> Result<Arc<Value>, StoreError> {
        self.get(kind, name).ok_or_else(|| StoreError::not_found(kind, name))
    }

    /// Stages a new version of an object under the next resourceVersion.
    fn put(&mut self, kind: Kind, name: &str, obj: Value, type_: EventKind) -> Value {
        let obj = self.record(kind, name, obj, type_);
        self.own.insert((kind, name.to_string()), Some(obj.clone()));
        Value::clone(&obj)
    }

    /// Stages the removal of an object; `last` is its final state.
    fn remove(&mut self, kind: Kind, name: &str, last: Value) -> Value {
        let obj = self.record(kind, name, last, EventKind::Deleted);
        self.own.insert((kind, name.to_string()), None);
        Value::clone(&obj)
    }

    fn record(&mut self, kind: Kind, name: &str, mut obj: Value, type_: EventKind) -> Arc<Value> {
        let rv = self.next_rv;
        self.next_rv += 1;
        if !self.dry_run {
            set_meta(&mut obj, "resourceVersion", Value::String(rv.to_string()));
        }
        let obj = Arc::new(obj);
        self.changes.push(Change { rv, type_, kind, name: name.to_string(), object: obj.clone() });
        obj
    }

    /// Fills in the uid of each owner reference that names its owner by kind and name only, from
    /// the owner as it stands now (written earlier in the same batch, say); fails when it is not there.
    fn resolve_owners(&self, meta: &mut ObjectMeta) -> Result<(), StoreError> {
        for (i, r) in meta.owner_references.iter_mut().enumerate().filter(|(_, r)| r.uid.is_empty()) {
            let owner = Kind::ALL.into_iter().find(|k| k.as_str() == r.kind).and_then(|k| self.get(k, &r.name));
            let uid = owner.as_deref().and_then(|o| meta_str(o, "uid")).map(str::to_string);
            match uid {
                Some(uid) => r.uid = uid,
                None => {
                    return Err(StoreError::invalid(format!(
                        "metadata.ownerReferences[{i}]: the owner {} \"{}\" does not exist",
                        r.kind, r.name
                    )))
                }
            }
        }
        Ok(())
    }

    pub fn create(&mut self, kind: Kind, body: Value) -> Result<Value, StoreError> {
        let body = check_object(kind, body)?;
        let mut meta = parse_meta(&body)?;
        self.resolve_owners(&mut meta)?;
        check_meta(&meta)?;
        if meta.name.is_empty() {
            let prefix = meta.generate_name.clone().unwrap_or_default();
            let mut rng = rand::rng();
            for _ in 0..NAME_ATTEMPTS {
                let suffix: String =
                    (0..5).map(|_| char::from(NAME_CHARS[rng.random_range(0..NAME_CHARS.len())])).collect();
                let candidate = format!("{prefix}{suffix}");
                if self.get(kind, &candidate).is_none() {
                    meta.name = candidate;
                    break;
                }
            }
            if meta.name.is_empty() {
                return Err(StoreError::AlreadyExists { kind, name: format!("{prefix}*****") });
            }
        } else if self.get(kind, &meta.name).is_some() {
            return Err(StoreError::AlreadyExists { kind, name: meta.name });
        }
        meta.uid = Some(uuid::Uuid::new_v4().to_string());
        meta.resource_version = None;
        meta.generation = Some(1);
        meta.creation_timestamp = Some(Time::now());
        meta.deletion_timestamp = None;
        let name = meta.name.clone();
        let obj = assemble(kind, &meta, body.into_iter().filter(|(k, _)| !NOT_SPEC.contains(&k.as_str())))?;
        Ok(self.put(kind, &name, obj, EventKind::Added))
    }

    pub fn update(&mut self, kind: Kind, body: Value) -> Result<Value, StoreError> {
        let body = check_object(kind, body)?;
        let mut body_meta = parse_meta(&body)?;
        if body_meta.name.is_empty() {
            return Err(StoreError::invalid("metadata.name: is required"));
        }
        self.resolve_owners(&mut body_meta)?;
        check_meta(&body_meta)?;
        let name = body_meta.name.clone();
        let stored = self.get_existing(kind, &name)?;
        check_rv(kind, &name, &stored, body_meta.resource_version.as_deref())?;
        let stored_meta = stored_meta(&stored)?;
        let mut meta = stored_meta.clone();
        meta.labels = body_meta.labels;
        meta.annotations = body_meta.annotations;
        meta.finalizers = body_meta.finalizers;
        meta.owner_references = body_meta.owner_references;
        let old_spec = spec_of(kind, stored.as_object());
        let new_spec = spec_of(kind, Some(&body));
        if old_spec != new_spec {
            meta.generation = Some(stored_meta.generation.unwrap_or(1) + 1);
        }
        let mut obj = if kind.has_spec() {
            let mut obj = Value::clone(&stored);
            if let Some(o) = obj.as_object_mut() {
                match body.get("spec") {
                    Some(spec) => o.insert("spec".into(), spec.clone()),
                    None => o.shift_remove("spec"),
                };
            }
            obj
        } else {
            let mut rest: Vec<(String, Value)> =
                body.into_iter().filter(|(k, _)| !NOT_SPEC.contains(&k.as_str())).collect();
            if let Some(status) = stored.get("status") {
                rest.push(("status".into(), status.clone()));
            }
            assemble(kind, &meta, rest)?
        };
        set_meta_all(&mut obj, &meta)?;
        if obj == *stored {
            return Ok(obj);
        }
        if meta.deletion_timestamp.is_some() && meta.finalizers.is_empty() {
            let last = self.remove(kind, &name, obj);
            self.cascade(meta.uid.as_deref())?;
            return Ok(last);
        }
        Ok(self.put(kind, &name, obj, EventKind::Modified))
    }

    pub fn update_status(
        &mut self,
        kind: Kind,
        name: &str,
        status: Value,
        rv: Option<&str>,
    ) -> Result<Value, StoreError> {
        if !kind.has_spec() {
            return Err(StoreError::invalid(format!("{} have no status", kind.plural())));
        }
        let stored = self.get_existing(kind, name)?;
        check_rv(kind, name, &stored, rv)?;
        let mut obj = Value::clone(&stored);
        if let Some(o) = obj.as_object_mut() {
            if status.is_null() || status.as_object().is_some_and(Map::is_empty) {
                o.shift_remove("status");
            } else {
                o.insert("status".into(), status);
            }
        }
        if obj == *stored {
            return Ok(obj);
        }
        Ok(self.put(kind, name, obj, EventKind::Modified))
    }

    /// Replaces `metadata.finalizers` and nothing else; an object being deleted goes with its
    /// last finalizer.
    pub fn update_finalizers(
        &mut self,
        kind: Kind,
        name: &str,
        finalizers: Vec<String>,
        rv: Option<&str>,
    ) -> Result<Value, StoreError> {
        let stored = self.get_existing(kind, name)?;
        check_rv(kind, name, &stored, rv)?;
        let mut meta = stored_meta(&stored)?;
        meta.finalizers = finalizers;
        check_meta(&meta)?;
        let mut obj = Value::clone(&stored);
        set_meta_all(&mut obj, &meta)?;
        if obj == *stored {
            return Ok(obj);
        }
        if meta.deletion_timestamp.is_some() && meta.finalizers.is_empty() {
            let last = self.remove(kind, name, obj);
            self.cascade(meta.uid.as_deref())?;
            return Ok(last);
        }
        Ok(self.put(kind, name, obj, EventKind::Modified))
    }

    pub fn delete(&mut self, kind: Kind, name: &str, rv: Option<&str>) -> Result<Deleted, StoreError> {
        let stored = self.get_existing(kind, name)?;
        check_rv(kind, name, &stored, rv)?;
        let out = self.delete_object(kind, name, &stored);
        self.cascade(meta_str(&stored, "uid"))?;
        Ok(out)
    }

    /// Removes an object at once, finalizers or not (used to expire old events).
    pub fn expire(&mut self, kind: Kind, name: &str) {
        if let Some(obj) = self.get(kind, name) {
            self.remove(kind, name, Value::clone(&obj));
        }
    }

    /// Removes an object without finalizers, or marks one with finalizers for deletion.
    fn delete_object(&mut self, kind: Kind, name: &str, stored: &Value) -> Deleted {
        if !has_finalizers(stored) {
            return Deleted::Gone(self.remove(kind, name, stored.clone()));
        }
        if meta_str(stored, "deletionTimestamp").is_some() {
            return Deleted::Terminating(stored.clone());
        }
        let mut obj = stored.clone();
        let now = serde_json::to_value(Time::now()).unwrap_or_default();
        set_meta(&mut obj, "deletionTimestamp", now);
        Deleted::Terminating(self.put(kind, name, obj, EventKind::Modified))
    }

    /// Deletes every object owned (transitively) by the object with this uid.
    fn cascade(&mut self, uid: Option<&str>) -> Result<(), StoreError> {
        let Some(uid) = uid else { return Ok(()) };
        let mut queue = VecDeque::from([uid.to_string()]);
        let mut seen = HashSet::new();
        while let Some(uid) = queue.pop_front() {
            if !seen.insert(uid.clone()) {
                continue;
            }
            for (kind, name) in self.owned_by(&uid) {
                let Some(obj) = self.get(kind, &name) else { continue };
                self.delete_object(kind, &name, &obj);
                if let Some(child) = meta_str(&obj, "uid") {
                    queue.push_back(child.to_string());
                }
            }
        }
        Ok(())
    }

    /// The objects that list `uid` as an owner, sorted by kind and name.
    fn owned_by(&self, uid: &str) -> Vec<(Kind, String)> {
        let mut out: Vec<(Kind, String)> = self
            .view
            .owned_by(uid)
            .into_iter()
            .filter(|key| !self.own.contains_key(key) && !self.base.contains_key(key))
            .collect();
        for (key, obj) in self.base {
            if obj.as_deref().is_some_and(|o| is_owned_by(o, uid)) && !self.own.contains_key(key) {
                out.push(key.clone());
            }
        }
        for (key, obj) in &self.own {
            if obj.as_deref().is_some_and(|o| is_owned_by(o, uid)) {
                out.push(key.clone());
            }
        }
        out.sort();
        out
    }
}

/// Checks that a body is an object of `kind` and returns its fields.
fn check_object(kind: Kind, body: Value) -> Result<Map<String, Value>, StoreError> {
    let Value::Object(map) = body else {
        return Err(StoreError::invalid("the object must be a JSON object"));
    };
    match map.get("apiVersion") {
        None => {}
        Some(Value::String(v)) if v == API_VERSION => {}
        Some(v) => return Err(StoreError::invalid(format!("apiVersion: unsupported {v}, expected `{API_VERSION}`"))),
    }
    match map.get("kind") {
        None => {}
        Some(Value::String(k)) if k == kind.as_str() => {}
        Some(k) => return Err(StoreError::invalid(format!("kind: {k} where `{kind}` was expected"))),
    }
    Ok(map)
}

fn parse_meta(body: &Map<String, Value>) -> Result<ObjectMeta, StoreError> {
    match body.get("metadata") {
        None | Some(Value::Null) => Ok(ObjectMeta::default()),
        Some(m) => serde_json::from_value(m.clone()).map_err(|e| StoreError::invalid(format!("metadata: {e}"))),
    }
}

fn stored_meta(obj: &Value) -> Result<ObjectMeta, StoreError> {
    let m = obj.get("metadata").cloned().unwrap_or_default();
    serde_json::from_value(m).map_err(|e| StoreError::Storage(format!("stored metadata does not decode: {e}")))
}

fn check_meta(meta: &ObjectMeta) -> Result<(), StoreError> {
    let mut errs = vec![];
    validate_meta(meta, &mut errs);
    match errs.into_iter().next() {
        Some(e) => Err(StoreError::invalid(e.to_string())),
        None => Ok(()),
    }
}

/// Fails with `Conflict` when a non-empty resourceVersion precondition differs from the stored one.
fn check_rv(kind: Kind, name: &str, stored: &Value, rv: Option<&str>) -> Result<(), StoreError> {
    match rv {
        Some(rv) if !rv.is_empty() && Some(rv) != meta_str(stored, "resourceVersion") => {
            Err(StoreError::conflict(kind, name))
        }
        _ => Ok(()),
    }
}

/// The part of an object that bumps its generation: `spec`, or for events every field but metadata.
fn spec_of(kind: Kind, obj: Option<&Map<String, Value>>) -> Value {
    let Some(obj) = obj else { return Value::Null };
    if kind.has_spec() {
        return obj.get("spec").cloned().unwrap_or(Value::Null);
    }
    Value::Object(
        obj.iter().filter(|(k, _)| !NOT_SPEC.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect(),
    )
}

/// Builds an object in the canonical field order: apiVersion, kind, metadata, then the rest.
fn assemble(
    kind: Kind,
    meta: &ObjectMeta,
    rest: impl IntoIterator<Item = (String, Value)>,
) -> Result<Value, StoreError> {
    let mut map = Map::new();
    map.insert("apiVersion".into(), Value::String(API_VERSION.into()));
    map.insert("kind".into(), Value::String(kind.as_str().into()));
    map.insert("metadata".into(), serde_json::to_value(meta)?);
    map.extend(rest);
    Ok(Value::Object(map))
}

fn set_meta_all(obj: &mut Value, meta: &ObjectMeta) -> Result<(), StoreError> {
    if let Some(o) = obj.as_object_mut() {
        o.insert("metadata".into(), serde_json::to_value(meta)?);
    }
    Ok(())
}
