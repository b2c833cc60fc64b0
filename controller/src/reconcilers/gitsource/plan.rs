//! What applying a revision takes: the writes that make the store hold the revision's objects
//! (creates, updates that undo drift, and with `prune` deletes of what left the repository), each
//! object admitted as the API admits it, and compared first so an unchanged object is not written.
//! The fields a person's action sets on a Session are merged three ways (kept.rs).

use std::collections::{BTreeMap, HashSet};

use aoctl_api::decode::AnyObject;
use aoctl_api::gitsource::InventoryEntry;
use aoctl_api::review::REVIEW_REQUESTED_ANNOTATION;
use aoctl_api::source::{self, MANAGED_BY, REQUESTED_AT};
use aoctl_api::{GitSource, Kind, ObjectMeta, OwnerReference, API_VERSION};
use aoctl_store::{Selector, Store, StoreError, StoredObject, Write};
use serde_json::Value;

use super::manifests::{reference, Desired};
use super::{kept, policy};
use crate::admission::{self, AdmissionError};

/// The kinds a revision may hold, in the order they are applied.
const KINDS: [Kind; 4] = [Kind::Project, Kind::IssueSource, Kind::Session, Kind::GitSource];

/// Annotations people and `aoctl` set on a live object to ask for something once; a source keeps
/// them when the repository does not set them, so undoing drift does not undo a request.
const KEPT_ANNOTATIONS: [&str; 2] = [REQUESTED_AT, REVIEW_REQUESTED_ANNOTATION];

/// The writes of a revision and what they do.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub writes: Vec<Write>,
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub pruned: Vec<String>,
    /// Every object of the revision (those left alone too), sorted.
    pub inventory: Vec<InventoryEntry>,
    /// Objects of the revision left alone because they are disabled (`ao.dev/reconcile: disabled`).
    pub skipped: Vec<String>,
    /// Objects of the revision still being deleted: they are made again once gone.
    pub waiting: Vec<String>,
}

/// Why a revision cannot be applied as it is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// An object did not pass admission: `file:line: field: message`.
    Invalid(String),
    /// An object exists and another source manages it.
    ManagedElsewhere(String),
}

impl Refusal {
    pub(crate) fn message(&self) -> &str {
        match self {
            Refusal::Invalid(m) | Refusal::ManagedElsewhere(m) => m,
        }
    }
}

/// Plans the writes that apply `desired` (in apply order) for `source`.
pub(crate) async fn plan(
    store: &Store,
    source: &GitSource,
    desired: &[Desired],
) -> Result<Result<Plan, Refusal>, StoreError> {
    let mine = source::managed_by(Kind::GitSource, &source.metadata.name);
    let mut live: BTreeMap<(u8, Kind, String), StoredObject> = BTreeMap::new();
    for kind in KINDS {
        for obj in store.list_stored(kind, &Selector::everything()).await?.0 {
            let name = obj.object().pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
            live.insert((kind.apply_rank(), kind, name), obj);
        }
    }
    let owner = source.spec.prune.then(|| owner_ref(source));
    let mut plan = Plan::default();
    let mut staged: Vec<AnyObject> = vec![];
    let mut wanted = HashSet::new();
    for d in desired {
        // Nothing of a revision is written while one of its objects is more than the source may
        // declare.
        let refused = policy::refusals(source, &d.object);
        if !refused.is_empty() {
            let at = d.location();
            let lines: Vec<String> = refused.iter().map(|r| format!("{at}: {r}")).collect();
            return Ok(Err(Refusal::Invalid(lines.join("; "))));
        }
        let (kind, name) = (d.kind(), d.name().to_string());
        let shown = reference(kind, &name);
        wanted.insert((kind, name.clone()));
        plan.inventory.push(InventoryEntry { kind: kind.as_str().into(), name: name.clone() });
        let Some(current) = live.get(&(kind.apply_rank(), kind, name.clone())) else {
            let mut obj = d.object.clone();
            let meta = obj.meta_mut();
            meta.annotations.insert(MANAGED_BY.into(), mine.clone());
            meta.owner_references.extend(owner.clone());
            kept::mark_created(&mut obj);
            if let Some(refused) = admit(store, &mut obj, true, &staged, d).await? {
                return Ok(Err(refused));
            }
            plan.writes.push(Write::Create { kind, obj: without_status(obj.to_value()) });
            plan.created.push(shown);
            staged.push(obj);
            continue;
        };
        let current_meta: ObjectMeta = serde_json::from_value(current.object()["metadata"].clone())
            .map_err(|e| StoreError::Storage(format!("{shown}: {e}")))?;
        match current_meta.annotations.get(MANAGED_BY) {
            Some(other) if *other != mine => {
                let why = format!("{}: {shown} exists and is managed by {other}", d.location());
                return Ok(Err(Refusal::ManagedElsewhere(why)));
            }
            _ => {}
        }
        if source::reconcile_disabled(&current_meta) {
            plan.skipped.push(shown);
            continue;
        }
        if current_meta.deletion_timestamp.is_some() {
            plan.waiting.push(shown);
            continue;
        }
        let current = typed(kind, current, &shown)?;
        let mut next = current.clone();
        set_content(&mut next, &d.object);
        let meta = next.meta_mut();
        meta.annotations.insert(MANAGED_BY.into(), mine.clone());
        for key in KEPT_ANNOTATIONS {
            if let Some(v) = current_meta.annotations.get(key) {
                meta.annotations.entry(key.into()).or_insert_with(|| v.clone());
            }
        }
        meta.owner_references.retain(|r| !is_owner_ref(r, source));
        meta.owner_references.extend(owner.clone());
        kept::merge(&mut next, &current);
        if let Some(refused) = admit(store, &mut next, false, &staged, d).await? {
            return Ok(Err(refused));
        }
        if next != current {
            plan.writes.push(Write::Update { kind, obj: without_status(next.to_value()) });
            plan.updated.push(shown);
        }
        staged.push(next);
    }
    if source.spec.prune {
        // Deletes go in the reverse order of applying: Sessions before their Projects.
        for ((_, kind, name), obj) in live.iter().rev() {
            let meta: ObjectMeta = match serde_json::from_value(obj.object()["metadata"].clone()) {
                Ok(m) => m,
                Err(_) => continue,
            };
            let managed = meta.annotations.get(MANAGED_BY) == Some(&mine);
            if !managed || wanted.contains(&(*kind, name.clone())) || source::reconcile_disabled(&meta) {
                continue;
            }
            if meta.deletion_timestamp.is_some() {
                continue;
            }
            plan.writes.push(Write::Delete { kind: *kind, name: name.clone(), rv: meta.resource_version.clone() });
            plan.pruned.push(reference(*kind, name));
        }
    }
    plan.inventory.sort();
    Ok(Ok(plan))
}

/// Admits `obj` as the API would; the refusal, worded `file:line: field: message`, if refused.
async fn admit(
    store: &Store,
    obj: &mut AnyObject,
    creating: bool,
    staged: &[AnyObject],
    d: &Desired,
) -> Result<Option<Refusal>, StoreError> {
    match admission::admit(store, obj, creating, staged).await {
        Ok(()) => Ok(None),
        Err(AdmissionError::Invalid { errors, .. }) => {
            let at = d.location();
            let lines: Vec<String> = errors.iter().map(|e| format!("{at}: {e}")).collect();
            Ok(Some(Refusal::Invalid(lines.join("; "))))
        }
        Err(AdmissionError::Store(e)) => Err(e),
    }
}

/// The reference that makes the source an owner (not the controller) of an object it applies, so
/// the store deletes the object with the source.
fn owner_ref(source: &GitSource) -> OwnerReference {
    OwnerReference {
        api_version: API_VERSION.into(),
        kind: Kind::GitSource.as_str().into(),
        name: source.metadata.name.clone(),
        uid: source.metadata.uid.clone().unwrap_or_default(),
        controller: Some(false),
        block_owner_deletion: None,
    }
}

fn is_owner_ref(r: &OwnerReference, source: &GitSource) -> bool {
    r.kind == Kind::GitSource.as_str() && r.name == source.metadata.name
}

/// A stored object of one of [`KINDS`] as its type; one that does not decode is a storage error
/// naming it (`shown`).
fn typed(kind: Kind, obj: &StoredObject, shown: &str) -> Result<AnyObject, StoreError> {
    match AnyObject::decode_json(kind, obj.json()) {
        Some(decoded) => decoded.map_err(|e| StoreError::Storage(format!("{shown}: {e}"))),
        None => Err(StoreError::Storage(format!("{shown}: events are not applied from a repository"))),
    }
}

/// Gives `live` the spec, labels and annotations of `desired` (objects of the same kind).
fn set_content(live: &mut AnyObject, desired: &AnyObject) {
    match (&mut *live, desired) {
        (AnyObject::Project(l), AnyObject::Project(d)) => l.spec = d.spec.clone(),
        (AnyObject::Session(l), AnyObject::Session(d)) => l.spec = d.spec.clone(),
        (AnyObject::GitSource(l), AnyObject::GitSource(d)) => l.spec = d.spec.clone(),
        (AnyObject::IssueSource(l), AnyObject::IssueSource(d)) => l.spec = d.spec.clone(),
        // Objects are matched by kind and name: the kinds always agree.
        _ => return,
    }
    let meta = live.meta_mut();
    meta.labels = desired.meta().labels.clone();
    meta.annotations = desired.meta().annotations.clone();
}

fn without_status(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.shift_remove("status");
    }
    v
}
