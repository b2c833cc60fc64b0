//! How objects and log entries are laid out in sled: keys, value encodings and metadata accessors.

use aoctl_api::Kind;
use serde_json::{Map, Value};

use crate::change::EventKind;
use crate::error::StoreError;

/// Name of the tree holding the newest version of every object, keyed by `Kind/name`.
pub(crate) const OBJECTS: &str = "objects";
/// Name of the tree holding the change log, keyed by resourceVersion (big-endian u64).
pub(crate) const LOG: &str = "log";
/// Name of the tree holding counters.
pub(crate) const META: &str = "meta";
/// Key of the newest assigned resourceVersion in the `meta` tree.
pub(crate) const RV_KEY: &[u8] = b"rv";
/// Key of the `meta` entry a store that cannot write rewrites to learn when it can again.
pub(crate) const PROBE_KEY: &[u8] = b"probe";

/// A kind's byte in log entries on disk, and its index in per-kind tables. The numbers are
/// stored: a new kind takes the next one, and none ever changes.
pub(crate) fn kind_index(kind: Kind) -> usize {
    match kind {
        Kind::Project => 0,
        Kind::Session => 1,
        Kind::Event => 2,
        Kind::GitSource => 3,
        Kind::IssueSource => 4,
    }
}

pub(crate) fn kind_from_index(i: u8) -> Option<Kind> {
    Kind::ALL.into_iter().find(|k| kind_index(*k) == usize::from(i))
}

/// The kind whose `kind` field value is exactly `s`.
pub(crate) fn kind_from_str(s: &str) -> Option<Kind> {
    Kind::ALL.into_iter().find(|k| k.as_str() == s)
}

pub(crate) fn object_key(kind: Kind, name: &str) -> Vec<u8> {
    format!("{}/{name}", kind.as_str()).into_bytes()
}

pub(crate) fn parse_object_key(key: &[u8]) -> Option<(Kind, String)> {
    let s = std::str::from_utf8(key).ok()?;
    let (kind, name) = s.split_once('/')?;
    Some((kind_from_str(kind)?, name.to_string()))
}

pub(crate) fn rv_key(rv: u64) -> [u8; 8] {
    rv.to_be_bytes()
}

pub(crate) fn parse_rv_key(key: &[u8]) -> Result<u64, StoreError> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| StoreError::Storage("malformed log key".into()))?;
    Ok(u64::from_be_bytes(bytes))
}

/// A log entry is one byte of event type, one byte of kind, then the object as JSON (`json`).
pub(crate) fn encode_log(type_: EventKind, kind: Kind, json: &[u8]) -> Vec<u8> {
    let t = match type_ {
        EventKind::Added => 0u8,
        EventKind::Modified => 1,
        EventKind::Deleted => 2,
    };
    let mut out = Vec::with_capacity(json.len() + 2);
    out.extend_from_slice(&[t, kind_index(kind) as u8]);
    out.extend_from_slice(json);
    out
}

/// The type and kind of a log entry, without decoding its object.
pub(crate) fn log_header(bytes: &[u8]) -> Result<(EventKind, Kind), StoreError> {
    let bad = || StoreError::Storage("malformed log entry".into());
    let (&t, rest) = bytes.split_first().ok_or_else(bad)?;
    let &k = rest.first().ok_or_else(bad)?;
    let t = match t {
        0 => EventKind::Added,
        1 => EventKind::Modified,
        2 => EventKind::Deleted,
        _ => return Err(bad()),
    };
    Ok((t, kind_from_index(k).ok_or_else(bad)?))
}

pub(crate) fn log_object(bytes: &[u8]) -> Result<Value, StoreError> {
    Ok(serde_json::from_slice(bytes.get(2..).unwrap_or_default())?)
}

/// The `metadata` map of an object, if it has one.
pub(crate) fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj).and_then(|m| m.get(field)).and_then(Value::as_str)
}

/// The `metadata.resourceVersion` of a stored object as a number (0 when absent).
pub(crate) fn object_rv(obj: &Value) -> u64 {
    meta_str(obj, "resourceVersion").and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Whether the object lists `uid` among its `metadata.ownerReferences`.
pub(crate) fn is_owned_by(obj: &Value, uid: &str) -> bool {
    meta(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| r.get("uid").and_then(Value::as_str) == Some(uid)))
}

/// Whether `metadata.finalizers` is non-empty.
pub(crate) fn has_finalizers(obj: &Value) -> bool {
    meta(obj).and_then(|m| m.get("finalizers")).and_then(Value::as_array).is_some_and(|f| !f.is_empty())
}

/// Sets a `metadata` field, creating the map when missing.
pub(crate) fn set_meta(obj: &mut Value, field: &str, value: Value) {
    if let Some(o) = obj.as_object_mut() {
        let m = o.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
        if let Some(m) = m.as_object_mut() {
            m.insert(field.to_string(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_bytes_are_fixed_and_distinct() {
        // The bytes of log entries already on disk.
        assert_eq!([Kind::Project, Kind::Session, Kind::Event].map(kind_index), [0, 1, 2]);
        for kind in Kind::ALL {
            assert_eq!(kind_from_index(kind_index(kind) as u8), Some(kind));
        }
        assert_eq!(kind_from_index(Kind::ALL.len() as u8), None);
    }
}
