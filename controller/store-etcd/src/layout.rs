//! How the store is laid out in etcd: the keys under the prefix, the stored values (objects
//! without their resourceVersion, which is the key's `mod_revision`) and the change record every
//! transaction writes, from which watches learn what changed, in the order the rules made it.

use std::sync::Arc;

use aoctl_api::Kind;
use aoctl_store::tx::Change;
use aoctl_store::{EventKind, StoreError, WatchEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The keys of one store: `<prefix>/objects/<Kind>/<name>`, `<prefix>/changes`, and the
/// election's `<prefix>/leader/<lease>` (see `crate::election`).
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    objects: String,
    changes: Vec<u8>,
    leader: Vec<u8>,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Keys {
        let prefix = prefix.trim_end_matches('/');
        Keys {
            objects: format!("{prefix}/objects/"),
            changes: format!("{prefix}/changes").into_bytes(),
            leader: format!("{prefix}/leader").into_bytes(),
        }
    }

    /// The name the replicas campaign under.
    pub(crate) fn leader(&self) -> &[u8] {
        &self.leader
    }

    pub(crate) fn object(&self, kind: Kind, name: &str) -> Vec<u8> {
        format!("{}{}/{name}", self.objects, kind.as_str()).into_bytes()
    }

    /// The first key of the objects and the key just past the last one.
    pub(crate) fn objects_range(&self) -> (Vec<u8>, Vec<u8>) {
        let start = self.objects.clone().into_bytes();
        let mut end = start.clone();
        // The prefix ends in `/`, whose successor byte ends the range of keys it starts.
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        (start, end)
    }

    /// The key every transaction writes its change record to.
    pub(crate) fn changes(&self) -> &[u8] {
        &self.changes
    }

    /// The kind and name of an object's key.
    pub(crate) fn parse_object(&self, key: &[u8]) -> Option<(Kind, String)> {
        let rest = std::str::from_utf8(key).ok()?.strip_prefix(&self.objects)?;
        let (kind, name) = rest.split_once('/')?;
        Some((kind_from_str(kind)?, name.to_string()))
    }
}

pub(crate) fn kind_from_str(s: &str) -> Option<Kind> {
    Kind::ALL.into_iter().find(|k| k.as_str() == s)
}

/// A kind's index in per-kind tables.
pub(crate) fn kind_index(kind: Kind) -> usize {
    Kind::ALL.iter().position(|k| *k == kind).expect("every kind is in Kind::ALL")
}

/// The number in an object's `metadata.resourceVersion` (0 when absent).
pub(crate) fn object_rv(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Sets `metadata.resourceVersion`.
pub(crate) fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

/// An object as it is stored: without `metadata.resourceVersion`, which the key's revision gives.
fn without_rv(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.shift_remove("resourceVersion");
    }
    obj
}

/// The bytes stored under an object's key.
pub(crate) fn stored_value(obj: &Value) -> Vec<u8> {
    serde_json::to_vec(&without_rv(obj)).expect("values serialise")
}

/// A stored value read back at revision `rv`.
pub(crate) fn read_value(bytes: &[u8], rv: u64) -> Result<Value, StoreError> {
    let mut obj: Value = serde_json::from_slice(bytes)
        .map_err(|e| StoreError::Storage(format!("a stored object does not decode: {e}")))?;
    set_rv(&mut obj, rv);
    Ok(obj)
}

/// What one transaction changed, in the order the rules made the changes: what `<prefix>/changes`
/// holds after it. `txn` identifies the attempt that wrote it, so a writer whose answer was lost
/// can tell whether its transaction was applied.
#[derive(Serialize, Deserialize)]
struct Record {
    txn: String,
    changes: Vec<RecordChange>,
}

#[derive(Serialize, Deserialize)]
struct RecordChange {
    #[serde(rename = "type")]
    type_: RecordType,
    kind: String,
    object: Value,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
enum RecordType {
    Added,
    Modified,
    Deleted,
}

/// The change record of a transaction.
pub(crate) fn encode_record(txn: &str, changes: &[Change]) -> Vec<u8> {
    let record = Record {
        txn: txn.to_string(),
        changes: changes
            .iter()
            .map(|c| RecordChange {
                type_: match c.type_ {
                    EventKind::Added => RecordType::Added,
                    EventKind::Modified => RecordType::Modified,
                    EventKind::Deleted => RecordType::Deleted,
                },
                kind: c.kind.as_str().to_string(),
                object: without_rv(&c.object),
            })
            .collect(),
    };
    serde_json::to_vec(&record).expect("records serialise")
}

/// The changes of one committed transaction, all at its revision.
#[derive(Debug)]
pub(crate) struct Batch {
    pub rv: u64,
    pub txn: String,
    pub events: Vec<WatchEvent>,
}

/// A change record read back at revision `rv`.
pub(crate) fn decode_record(bytes: &[u8], rv: u64) -> Result<Batch, StoreError> {
    let record: Record = serde_json::from_slice(bytes)
        .map_err(|e| StoreError::Storage(format!("a change record does not decode: {e}")))?;
    let mut events = Vec::with_capacity(record.changes.len());
    for c in record.changes {
        let kind = kind_from_str(&c.kind)
            .ok_or_else(|| StoreError::Storage(format!("a change record names an unknown kind `{}`", c.kind)))?;
        let mut object = c.object;
        set_rv(&mut object, rv);
        let kind_ = match c.type_ {
            RecordType::Added => EventKind::Added,
            RecordType::Modified => EventKind::Modified,
            RecordType::Deleted => EventKind::Deleted,
        };
        events.push(WatchEvent { kind_, kind, object: Arc::new(object), rv });
    }
    Ok(Batch { rv, txn: record.txn, events })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_name_kind_and_name_under_the_prefix() {
        let keys = Keys::new("/aoctl/");
        let key = keys.object(Kind::Session, "fix-login");
        assert_eq!(key, b"/aoctl/objects/Session/fix-login");
        assert_eq!(keys.parse_object(&key), Some((Kind::Session, "fix-login".to_string())));
        assert_eq!(keys.parse_object(b"/aoctl/objects/Nope/x"), None);
        assert_eq!(keys.parse_object(b"/other/objects/Session/x"), None);
        let (start, end) = keys.objects_range();
        assert!(start.as_slice() <= key.as_slice() && key.as_slice() < end.as_slice());
        assert!(keys.changes() < start.as_slice() || keys.changes() >= end.as_slice(), "the record is no object");
    }

    #[test]
    fn stored_values_carry_no_version_and_reads_set_the_revision() {
        let obj = json!({"kind": "Project", "metadata": {"name": "a", "resourceVersion": "7"}, "spec": {}});
        let bytes = stored_value(&obj);
        assert!(!String::from_utf8_lossy(&bytes).contains("resourceVersion"));
        assert_eq!(read_value(&bytes, 42).unwrap()["metadata"]["resourceVersion"], "42");
    }

    #[test]
    fn records_round_trip_in_order() {
        let object =
            |name: &str| Arc::new(json!({"kind": "Project", "metadata": {"name": name, "resourceVersion": "1"}}));
        let changes = [
            Change { rv: 1, type_: EventKind::Added, kind: Kind::Project, name: "a".into(), object: object("a") },
            Change { rv: 2, type_: EventKind::Deleted, kind: Kind::Project, name: "b".into(), object: object("b") },
        ];
        let batch = decode_record(&encode_record("t1", &changes), 9).unwrap();
        assert_eq!(batch.txn, "t1");
        let got: Vec<(EventKind, u64, &Value)> =
            batch.events.iter().map(|e| (e.kind_, e.rv, &e.object["metadata"]["name"])).collect();
        assert_eq!(got, [(EventKind::Added, 9, &json!("a")), (EventKind::Deleted, 9, &json!("b"))]);
        assert_eq!(batch.events[0].object["metadata"]["resourceVersion"], "9");
        assert!(decode_record(b"{}", 1).is_err());
    }
}
