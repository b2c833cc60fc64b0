//! Reading fields of objects the server returns, kept as JSON values so that the client shows
//! whatever the server sends, including fields newer than this client.

use aoctl_api::Kind;
use chrono::{DateTime, Utc};
use serde_json::Value;

/// Annotation holding the manifest `aoctl apply` last applied, as compact JSON.
pub(crate) const LAST_APPLIED: &str = "ao.dev/last-applied-configuration";

/// The string at a JSON pointer such as `/status/phase`.
pub(crate) fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// `metadata.name`, or the empty string.
pub(crate) fn name(v: &Value) -> &str {
    str_at(v, "/metadata/name").unwrap_or_default()
}

/// `metadata.resourceVersion`, or the empty string.
pub(crate) fn resource_version(v: &Value) -> &str {
    str_at(v, "/metadata/resourceVersion").unwrap_or_default()
}

/// A time at a JSON pointer.
pub(crate) fn time_at(v: &Value, pointer: &str) -> Option<DateTime<Utc>> {
    str_at(v, pointer).and_then(|s| DateTime::parse_from_rfc3339(s).ok()).map(|t| t.with_timezone(&Utc))
}

/// `kind/name` as kubectl prints it, e.g. `session/fix-login`.
pub(crate) fn reference(kind: Kind, name: &str) -> String {
    format!("{}/{name}", kind.as_str().to_ascii_lowercase())
}

/// `kind "name"` as kubectl's delete prints it.
pub(crate) fn quoted(kind: Kind, name: &str) -> String {
    format!("{} \"{name}\"", kind.as_str().to_ascii_lowercase())
}

/// The condition of a type in `status.conditions`.
pub(crate) fn condition<'a>(v: &'a Value, type_: &str) -> Option<&'a Value> {
    v.pointer("/status/conditions")?.as_array()?.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// Whether the condition of a type is `True`.
pub(crate) fn condition_true(v: &Value, type_: &str) -> bool {
    condition(v, type_).and_then(|c| c.get("status")).and_then(Value::as_str) == Some("True")
}

/// `status.observedGeneration` is behind `metadata.generation`: the status describes an older spec.
pub(crate) fn status_is_stale(v: &Value) -> bool {
    let gen = v.pointer("/metadata/generation").and_then(Value::as_i64);
    let observed = v.pointer("/status/observedGeneration").and_then(Value::as_i64);
    matches!((gen, observed), (Some(g), Some(o)) if o < g)
}

/// A scalar rendered for a table cell or a describe line.
pub(crate) fn scalar(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Bool(_) | Value::Number(_) => v.to_string(),
        other => other.to_string(),
    }
}

/// The session's displayed phase: `Terminating` while deleting, `Pending` before the first status.
pub(crate) fn session_phase(v: &Value) -> String {
    if v.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) {
        return "Terminating".into();
    }
    str_at(v, "/status/phase").unwrap_or("Pending").to_string()
}

/// A copy without the fields the store manages, for comparing and diffing objects.
pub(crate) fn strip_managed(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in ["resourceVersion", "generation", "creationTimestamp", "uid", "managedFields"] {
            meta.remove(key);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields() {
        let v = json!({"metadata": {"name": "x", "generation": 3, "resourceVersion": "9", "uid": "u"},
            "spec": {"agent": {"command": ["./bot", "{prompt}"]}},
            "status": {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(name(&v), "x");
        assert!(condition_true(&v, "Ready"));
        assert!(status_is_stale(&v));
        assert_eq!(session_phase(&v), "Pending");
        assert_eq!(reference(Kind::Session, "x"), "session/x");
        let s = strip_managed(&v);
        assert_eq!(s["metadata"], json!({"name": "x"}));
    }
}
