//! `aoctl diff`: what `apply` would change, as a unified diff of the live object against the
//! server's dry-run result, without the fields the store manages. Exits 0 when nothing differs,
//! 1 when something does and 2 when an object could not be compared (like `kubectl diff`).

use std::process::ExitCode;

use serde_json::Value;
use similar::TextDiff;

use super::apply::{desired, merge_live, same_content, Outcome, PendingProjects};
use super::emit;
use crate::args::DiffArgs;
use crate::client::{Client, ClientError};
use crate::manifest;
use crate::object;

pub(crate) async fn run(client: &Client, a: DiffArgs) -> anyhow::Result<ExitCode> {
    let manifests = match manifest::load(&a.filenames, a.recursive) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut differs = false;
    let mut failed = false;
    let mut pending = PendingProjects::default();
    for m in &manifests {
        let reference = object::reference(m.kind(), m.name());
        let want = desired(&m.object);
        let compared = match compare(client, m.kind(), m.name(), &want).await {
            Err(e) if pending.excuses(m.kind(), &want, &e) => Ok((None, want)),
            other => other,
        };
        let (live, merged) = match compared {
            Ok(pair) => pair,
            Err(e) => {
                eprintln!("error: {}:{}: {reference}: {e}", m.source, m.line);
                failed = true;
                continue;
            }
        };
        let outcome = if live.is_none() { Outcome::Created } else { Outcome::Configured };
        pending.note(m.kind(), m.name(), outcome);
        let text = unified(&reference, live.as_ref(), &merged);
        if !text.is_empty() {
            differs = true;
            emit(&text);
        }
    }
    Ok(ExitCode::from(if failed { 2 } else { u8::from(differs) }))
}

/// The live object (absent: new) and what the server would make of the manifest (dry run).
async fn compare(
    client: &Client,
    kind: aoctl_api::Kind,
    name: &str,
    want: &Value,
) -> Result<(Option<Value>, Value), ClientError> {
    match client.get(kind, name).await {
        Err(e) if e.is_not_found() => Ok((None, client.create(kind, want, true).await?)),
        Err(e) => Err(e),
        Ok(live) => {
            let body = merge_live(want, &live);
            let merged =
                if same_content(&body, &live) { live.clone() } else { client.replace(kind, name, &body, true).await? };
            Ok((Some(live), merged))
        }
    }
}

/// YAML of an object for diffing: managed fields stripped.
fn diffable(v: &Value) -> String {
    aoctl_api::decode::to_yaml(&object::strip_managed(v))
}

/// The unified diff between the live object (absent: new) and the merged one; empty when equal.
pub(crate) fn unified(reference: &str, live: Option<&Value>, merged: &Value) -> String {
    let old = live.map(diffable).unwrap_or_default();
    let new = diffable(merged);
    if old == new {
        return String::new();
    }
    TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("live/{reference}"), &format!("merged/{reference}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn managed_fields_do_not_count() {
        let live = json!({"metadata": {"name": "x", "resourceVersion": "1", "generation": 1}, "spec": {"prompt": "a"}});
        let same = json!({"metadata": {"name": "x", "resourceVersion": "2", "generation": 2}, "spec": {"prompt": "a"}});
        assert_eq!(unified("session/x", Some(&live), &same), "");
        let changed = json!({"metadata": {"name": "x", "resourceVersion": "2"}, "spec": {"prompt": "b"}});
        let d = unified("session/x", Some(&live), &changed);
        assert!(d.starts_with("--- live/session/x\n+++ merged/session/x\n"), "{d}");
        assert!(d.contains("-  prompt: a\n+  prompt: b\n"), "{d}");
        assert!(!d.contains("resourceVersion"), "{d}");
        let new = unified("session/y", None, &changed);
        assert!(new.contains("+metadata:\n"), "{new}");
    }
}
