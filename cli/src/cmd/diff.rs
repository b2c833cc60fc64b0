//! `aoctl diff`: what `apply` would change, as a unified diff of the live object against the
//! server's dry-run result, without the fields the store manages. Exits 1 when anything differs.

use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;
use similar::TextDiff;

use super::apply::{desired, merge_live, same_content};
use super::emit;
use crate::args::DiffArgs;
use crate::client::Client;
use crate::manifest;
use crate::object;

pub async fn run(client: &Client, a: DiffArgs) -> anyhow::Result<ExitCode> {
    let manifests = manifest::load(&a.filenames, a.recursive)?;
    let mut differs = false;
    for m in &manifests {
        let reference = object::reference(m.kind(), m.name());
        let want = desired(&m.object);
        let context = || format!("{}:{}: {reference}", m.source, m.line);
        let (live, merged) = match client.get(m.kind(), m.name()).await {
            Err(e) if e.is_not_found() => (None, client.create(m.kind(), &want, true).await.with_context(context)?),
            Err(e) => return Err(e).with_context(context),
            Ok(live) => {
                let body = merge_live(&want, &live);
                let merged = if same_content(&body, &live) {
                    live.clone()
                } else {
                    client.replace(m.kind(), m.name(), &body, true).await.with_context(context)?
                };
                (Some(live), merged)
            }
        };
        let text = unified(&reference, live.as_ref(), &merged);
        if !text.is_empty() {
            differs = true;
            emit(&text);
        }
    }
    Ok(if differs { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// YAML of an object for diffing: managed fields stripped.
fn diffable(v: &Value) -> String {
    aoctl_api::decode::to_yaml(&object::strip_managed(v))
}

/// The unified diff between the live object (absent: new) and the merged one; empty when equal.
pub fn unified(reference: &str, live: Option<&Value>, merged: &Value) -> String {
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
