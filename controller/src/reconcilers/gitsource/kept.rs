//! The fields of a Session that a person's action sets — `spec.stopped` (Stop and Resume) and
//! `spec.reactions.approved-and-green` (Merge when green) — and that a source therefore applies
//! only when the repository's value changed since the source last applied it, as a three-way
//! merge does: a person's action wins over drift until a commit changes that field. The values
//! last applied are recorded on the object in the annotation `ao.dev/last-applied-fields`, as
//! JSON by field path.

use std::collections::BTreeMap;

use aoctl_api::decode::AnyObject;
use aoctl_api::reactions::Reactions;
use aoctl_api::source::LAST_APPLIED_FIELDS;
use aoctl_api::SessionSpec;
use serde_json::Value;

/// One field a person's action sets: its path in the record, its value as JSON, and how the
/// live object's value is put into a spec.
struct Field {
    path: &'static str,
    value: fn(&SessionSpec) -> Value,
    keep: fn(&mut SessionSpec, &SessionSpec),
}

const FIELDS: [Field; 2] = [
    Field { path: "spec.stopped", value: |s| Value::Bool(s.stopped), keep: |next, live| next.stopped = live.stopped },
    Field {
        path: "spec.reactions.approved-and-green",
        value: |s| {
            let entry = s.reactions.as_ref().and_then(|r| r.approved_and_green.as_ref());
            entry.and_then(|e| serde_json::to_value(e).ok()).unwrap_or(Value::Null)
        },
        keep: |next, live| {
            let entry = live.reactions.as_ref().and_then(|r| r.approved_and_green.clone());
            match (&mut next.reactions, entry) {
                (Some(r), entry) => r.approved_and_green = entry,
                (None, None) => {}
                (None, Some(e)) => {
                    next.reactions = Some(Reactions { approved_and_green: Some(e), ..Reactions::default() })
                }
            }
        },
    },
];

/// The record of `spec`'s values of the fields, as the annotation holds it.
fn record(spec: &SessionSpec) -> String {
    let fields: BTreeMap<&str, Value> = FIELDS.iter().map(|f| (f.path, (f.value)(spec))).collect();
    serde_json::to_string(&fields).unwrap_or_default()
}

/// Marks a Session the source creates with the record of the repository's values.
pub(crate) fn mark_created(obj: &mut AnyObject) {
    if let AnyObject::Session(s) = obj {
        let text = record(&s.spec);
        s.metadata.annotations.insert(LAST_APPLIED_FIELDS.into(), text);
    }
}

/// For a Session `next` that holds the repository's spec, about to replace `live`: keeps the live
/// value of each field whose repository value is the one the source applied last (a person may
/// have changed it since), lets the repository's value win where it changed or where `live` has
/// no record of it, and records the repository's values on `next`.
pub(crate) fn merge(next: &mut AnyObject, live: &AnyObject) {
    let (AnyObject::Session(next), AnyObject::Session(live)) = (next, live) else { return };
    let applied: BTreeMap<String, Value> = live
        .metadata
        .annotations
        .get(LAST_APPLIED_FIELDS)
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default();
    let text = record(&next.spec);
    for f in &FIELDS {
        if applied.get(f.path) == Some(&(f.value)(&next.spec)) {
            (f.keep)(&mut next.spec, &live.spec);
        }
    }
    next.metadata.annotations.insert(LAST_APPLIED_FIELDS.into(), text);
}

#[cfg(test)]
mod tests {
    use aoctl_api::reactions::{Reaction, ReactionAction};
    use aoctl_api::Session;

    use super::*;

    fn session(stopped: bool, merge: Option<bool>) -> Session {
        let mut s = Session::new("a", "web", "one");
        s.spec.stopped = stopped;
        s.spec.reactions = merge.map(|auto| Reactions {
            approved_and_green: Some(Reaction {
                auto: Some(auto),
                action: Some(ReactionAction::Merge),
                ..Reaction::default()
            }),
            ..Reactions::default()
        });
        s
    }

    /// The spec `merge` makes from the repository's `repo` over `live`.
    fn merged(repo: &Session, live: &Session) -> Session {
        let mut next = AnyObject::Session(repo.clone());
        merge(&mut next, &AnyObject::Session(live.clone()));
        match next {
            AnyObject::Session(s) => s,
            _ => unreachable!("merge keeps the kind"),
        }
    }

    #[test]
    fn a_persons_value_is_kept_until_the_repository_changes_the_field() {
        let repo = session(false, None);
        let mut created = AnyObject::Session(repo.clone());
        mark_created(&mut created);
        let AnyObject::Session(created) = created else { unreachable!() };
        assert_eq!(
            created.metadata.annotations[LAST_APPLIED_FIELDS],
            r#"{"spec.reactions.approved-and-green":null,"spec.stopped":false}"#
        );

        let mut live = created.clone();
        live.spec.stopped = true;
        live.spec.reactions = session(true, Some(true)).spec.reactions;
        let next = merged(&repo, &live);
        assert_eq!((next.spec.stopped, next.spec.reactions.clone()), (true, live.spec.reactions.clone()), "kept");
        assert_eq!(next.metadata.annotations, created.metadata.annotations, "the record is the repository's");

        // The repository changes the reaction: its value wins, the person's stop stays.
        let repo = session(false, Some(false));
        let next = merged(&repo, &live);
        assert_eq!((next.spec.stopped, next.spec.reactions.clone()), (true, repo.spec.reactions.clone()));
        // Then it changes `stopped` too.
        let repo = session(true, Some(false));
        let mut live = next;
        live.spec.stopped = false;
        assert!(merged(&repo, &live).spec.stopped, "the repository's new value wins");
    }

    #[test]
    fn without_a_record_the_repository_wins() {
        let repo = session(false, None);
        let live = session(true, Some(true));
        let next = merged(&repo, &live);
        assert_eq!((next.spec.stopped, next.spec.reactions), (false, None));
        let mut bad = live.clone();
        bad.metadata.annotations.insert(LAST_APPLIED_FIELDS.into(), "not json".into());
        assert!(!merged(&repo, &bad).spec.stopped, "an unreadable record is no record");
    }
}
