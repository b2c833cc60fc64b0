//! What the sources (`GitSource`, `IssueSource`) mark on the objects they make, and the
//! annotations that steer them.

use crate::meta::{Kind, ObjectMeta};

/// Annotation naming the source that made an object: `gitsource/<name>` or `issuesource/<name>`.
pub const MANAGED_BY: &str = "ao.dev/managed-by";
/// Annotation of an object its source leaves alone (no drift undone, no prune) when `disabled`.
pub const RECONCILE: &str = "ao.dev/reconcile";
/// The value of [`RECONCILE`] that turns a source's writes off for the object.
pub const RECONCILE_DISABLED: &str = "disabled";
/// Annotation `aoctl reconcile KIND NAME` sets on a source (a timestamp): sync now.
pub const REQUESTED_AT: &str = "ao.dev/reconcile-requested-at";
/// Annotation a `GitSource` keeps on a Session it applies: the repository's values, as JSON by
/// field path, of the fields a person's action sets (`spec.stopped`,
/// `spec.reactions.approved-and-green`) when the source last applied them. The source applies
/// such a field again only when the repository's value differs from the one recorded.
pub const LAST_APPLIED_FIELDS: &str = "ao.dev/last-applied-fields";

/// The [`MANAGED_BY`] value of source `name` of `kind`, e.g. `gitsource/fleet`.
pub fn managed_by(kind: Kind, name: &str) -> String {
    format!("{}/{name}", kind.as_str().to_ascii_lowercase())
}

/// Whether the object is made by source `name` of `kind`.
pub fn is_managed_by(meta: &ObjectMeta, kind: Kind, name: &str) -> bool {
    meta.annotations.get(MANAGED_BY).is_some_and(|v| *v == managed_by(kind, name))
}

/// Whether the object asks its source to leave it alone.
pub fn reconcile_disabled(meta: &ObjectMeta) -> bool {
    meta.annotations.get(RECONCILE).is_some_and(|v| v == RECONCILE_DISABLED)
}

/// The sync a source was asked for and has not handled yet, if any.
pub fn pending_request<'a>(meta: &'a ObjectMeta, handled: Option<&str>) -> Option<&'a str> {
    meta.annotations.get(REQUESTED_AT).map(String::as_str).filter(|r| Some(*r) != handled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_name_the_source_and_requests_are_handled_once() {
        let mut meta = ObjectMeta::default();
        assert_eq!(managed_by(Kind::GitSource, "fleet"), "gitsource/fleet");
        meta.annotations.insert(MANAGED_BY.into(), "issuesource/bugs".into());
        assert!(is_managed_by(&meta, Kind::IssueSource, "bugs"));
        assert!(!is_managed_by(&meta, Kind::GitSource, "bugs"));
        assert!(!reconcile_disabled(&meta));
        meta.annotations.insert(RECONCILE.into(), "disabled".into());
        assert!(reconcile_disabled(&meta));
        meta.annotations.insert(REQUESTED_AT.into(), "2026-12-01T10:00:00Z".into());
        assert_eq!(pending_request(&meta, None), Some("2026-12-01T10:00:00Z"));
        assert_eq!(pending_request(&meta, Some("2026-12-01T10:00:00Z")), None);
    }
}
