//! `aoctl apply`: create or replace the objects of manifests, optionally prune the ones that left
//! the manifests, and wait for the applied ones to become ready.

use std::collections::HashSet;
use std::fmt;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use aoctl_api::{AnyObject, Kind};
use serde_json::{Map, Value};

use super::emit;
use crate::args::ApplyArgs;
use crate::client::{Client, ClientError, Deleted, ListParams};
use crate::manifest::{self, Manifest};
use crate::object::{self, LAST_APPLIED};
use crate::wait;

/// How many times a write that lost a race (409) is tried again.
const ATTEMPTS: usize = 5;

/// What applying one object did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Created,
    Configured,
    Unchanged,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Created => "created",
            Outcome::Configured => "configured",
            Outcome::Unchanged => "unchanged",
        })
    }
}

pub(crate) async fn run(client: &Client, a: ApplyArgs) -> anyhow::Result<ExitCode> {
    let manifests = manifest::load(&a.filenames, a.recursive)?;
    let suffix = if a.dry_run { " (dry run)" } else { "" };
    let mut applied: Vec<(Kind, String)> = vec![];
    let mut failed = 0;
    let mut pending = PendingProjects::default();
    for m in &manifests {
        let reference = object::reference(m.kind(), m.name());
        let want = desired(&m.object);
        let result = match apply_one(client, m.kind(), m.name(), &want, a.dry_run).await {
            Err(e) if a.dry_run && pending.excuses(m.kind(), &want, &e) => Ok((Outcome::Created, want)),
            other => other,
        };
        match result {
            Ok((outcome, _)) => {
                pending.note(m.kind(), m.name(), outcome);
                emit(&format!("{reference} {outcome}{suffix}\n"));
                applied.push((m.kind(), m.name().to_string()));
            }
            Err(e) => {
                eprintln!("error: {}: {reference}: {e}", location(m));
                failed += 1;
            }
        }
    }
    if a.prune {
        let selector = a.selector.as_deref().unwrap_or_default();
        failed += prune(client, selector, &applied, a.dry_run).await?;
    }
    if failed > 0 {
        // Each failure was reported above.
        return Ok(ExitCode::FAILURE);
    }
    if let (Some(timeout), false) = (a.wait, a.dry_run) {
        wait_ready(client, &applied, timeout).await?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The Projects a dry run would create. The server cannot admit a Session of a Project that does
/// not exist yet, so such a Session, already validated locally when its manifest was read, is
/// reported as the manifest has it.
#[derive(Default)]
pub(crate) struct PendingProjects(HashSet<String>);

impl PendingProjects {
    pub(crate) fn note(&mut self, kind: Kind, name: &str, outcome: Outcome) {
        if kind == Kind::Project && outcome == Outcome::Created {
            self.0.insert(name.to_string());
        }
    }

    /// Whether the server refused `desired` only because its project is one of these.
    pub(crate) fn excuses(&self, kind: Kind, desired: &Value, err: &ClientError) -> bool {
        let ClientError::Api(status) = err else { return false };
        let causes = status.details.as_ref().map(|d| d.causes.as_slice()).unwrap_or_default();
        kind == Kind::Session
            && status.code == 422
            && !causes.is_empty()
            && causes.iter().all(|c| c.field.as_deref() == Some("spec.project"))
            && desired.pointer("/spec/project").and_then(Value::as_str).is_some_and(|p| self.0.contains(p))
    }
}

fn location(m: &Manifest) -> String {
    format!("{}:{}", m.source, m.line)
}

/// The body sent for a manifest: its JSON without `status`, annotated with itself (compact JSON)
/// as the last-applied configuration.
pub(crate) fn desired(obj: &AnyObject) -> Value {
    let mut v = obj.to_value();
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    let mut recorded = v.clone();
    if let Some(ann) = recorded.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        ann.remove(LAST_APPLIED);
        if ann.is_empty() {
            recorded["metadata"].as_object_mut().map(|m| m.remove("annotations"));
        }
    }
    let meta = v
        .as_object_mut()
        .and_then(|o| o.entry("metadata").or_insert_with(|| Value::Object(Map::new())).as_object_mut());
    if let Some(meta) = meta {
        let ann = meta.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
        if let Some(ann) = ann.as_object_mut() {
            ann.insert(LAST_APPLIED.into(), Value::String(recorded.to_string()));
        }
    }
    v
}

/// `desired` made ready to replace `live`: the live resourceVersion as precondition, and the
/// live finalizers and owner references when the manifest names none (controllers own those).
pub(crate) fn merge_live(desired: &Value, live: &Value) -> Value {
    let mut v = desired.clone();
    let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) else { return v };
    meta.insert("resourceVersion".into(), Value::String(object::resource_version(live).to_string()));
    for key in ["finalizers", "ownerReferences"] {
        let empty = meta.get(key).and_then(Value::as_array).is_none_or(Vec::is_empty);
        if let Some(l) =
            live.pointer(&format!("/metadata/{key}")).filter(|l| l.as_array().is_some_and(|a| !a.is_empty()))
        {
            if empty {
                meta.insert(key.into(), l.clone());
            }
        }
    }
    v
}

/// Whether two versions of an object agree on everything users write.
pub(crate) fn same_content(a: &Value, b: &Value) -> bool {
    let pick = |v: &Value| {
        let m = |k: &str| v.pointer(&format!("/metadata/{k}")).cloned().filter(|x| !is_empty(x));
        (m("labels"), m("annotations"), m("finalizers"), m("ownerReferences"), v.get("spec").cloned())
    };
    pick(a) == pick(b)
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Creates the object, or replaces the live one; retries when another writer got there first.
pub(crate) async fn apply_one(
    client: &Client,
    kind: Kind,
    name: &str,
    desired: &Value,
    dry_run: bool,
) -> Result<(Outcome, Value), ClientError> {
    let mut attempt = 1;
    loop {
        let result = match client.get(kind, name).await {
            Err(e) if e.is_not_found() => client.create(kind, desired, dry_run).await.map(|v| (Outcome::Created, v)),
            Err(e) => return Err(e),
            Ok(live) => {
                let body = merge_live(desired, &live);
                if same_content(&body, &live) {
                    return Ok((Outcome::Unchanged, live));
                }
                client.replace(kind, name, &body, dry_run).await.map(|v| {
                    let unchanged = same_content(&live, &v)
                        || (!dry_run && object::resource_version(&live) == object::resource_version(&v));
                    (if unchanged { Outcome::Unchanged } else { Outcome::Configured }, v)
                })
            }
        };
        match result {
            Err(e) if e.code() == Some(409) && attempt < ATTEMPTS => attempt += 1,
            other => return other,
        }
    }
}

/// Deletes the objects matching `selector` that an earlier apply created (they carry the
/// last-applied annotation) and this one did not mention. Returns how many could not be deleted.
async fn prune(client: &Client, selector: &str, applied: &[(Kind, String)], dry_run: bool) -> anyhow::Result<usize> {
    let keep: HashSet<(Kind, &str)> = applied.iter().map(|(k, n)| (*k, n.as_str())).collect();
    let params = ListParams { label_selector: Some(selector.to_string()), field_selector: None };
    let suffix = if dry_run { " (dry run)" } else { "" };
    let mut failed = 0;
    for kind in [Kind::Session, Kind::Project] {
        let list = client.list(kind, &params).await.with_context(|| format!("listing {} to prune", kind.plural()))?;
        for item in &list.items {
            let name = object::name(item);
            let managed = item.pointer("/metadata/annotations").and_then(|a| a.get(LAST_APPLIED)).is_some();
            let deleting = item.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
            if !managed || deleting || keep.contains(&(kind, name)) {
                continue;
            }
            let reference = object::reference(kind, name);
            match client.delete(kind, name, dry_run).await {
                Ok(Deleted::Gone | Deleted::Terminating) => emit(&format!("{reference} pruned{suffix}\n")),
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    eprintln!("error: pruning {reference}: {e}");
                    failed += 1;
                }
            }
        }
    }
    Ok(failed)
}

/// Waits for Projects, then Sessions, to be ready, within one overall timeout.
async fn wait_ready(client: &Client, applied: &[(Kind, String)], timeout: std::time::Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    for kind in [Kind::Project, Kind::Session] {
        let names: Vec<String> = applied.iter().filter(|(k, _)| *k == kind).map(|(_, n)| n.clone()).collect();
        if names.is_empty() {
            continue;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let done = wait::wait_for(client, kind, &names, left, |o| wait::ready(kind, o)).await?;
        for (name, note) in done {
            emit(&format!("{} {note}\n", object::reference(kind, &name)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::decode::decode_manifests;
    use serde_json::json;

    fn session(extra_meta: &str) -> AnyObject {
        let text = format!(
            "apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata:\n  name: x\n{extra_meta}spec:\n  project: demo\n"
        );
        decode_manifests("t.yaml", &text).unwrap().remove(0).object
    }

    #[test]
    fn desired_records_itself() {
        let d = desired(&session("  labels: {team: web}\n"));
        let recorded: Value =
            serde_json::from_str(d["metadata"]["annotations"][LAST_APPLIED].as_str().unwrap()).unwrap();
        assert_eq!(recorded["metadata"], json!({"name": "x", "labels": {"team": "web"}}));
        assert_eq!(recorded["spec"], json!({"project": "demo"}));
        assert!(d.get("status").is_none());
        // Applying the same manifest again records the same text.
        let again = desired(&session("  labels: {team: web}\n"));
        assert_eq!(again, d);
    }

    #[test]
    fn live_fields_carry_over() {
        let d = desired(&session(""));
        let live = json!({"metadata": {"name": "x", "resourceVersion": "12", "finalizers": ["ao.dev/workspace"],
            "ownerReferences": [{"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "name": "demo", "uid": "u"}]},
            "spec": {"project": "demo"}, "status": {"phase": "Working"}});
        let body = merge_live(&d, &live);
        assert_eq!(body["metadata"]["resourceVersion"], "12");
        assert_eq!(body["metadata"]["finalizers"], json!(["ao.dev/workspace"]));
        assert_eq!(body["metadata"]["ownerReferences"][0]["name"], "demo");
        assert!(!same_content(&body, &live), "the annotation is new");
        let mut live2 = live.clone();
        live2["metadata"]["annotations"] = body["metadata"]["annotations"].clone();
        assert!(same_content(&body, &live2));

        let own = desired(&session("  finalizers: [example.com/mine]\n"));
        assert_eq!(merge_live(&own, &live)["metadata"]["finalizers"], json!(["example.com/mine"]));
    }
}
