//! `aoctl reconcile KIND NAME`: ask a source to sync, or a session to read its forge, now. It
//! sets the object's `ao.dev/reconcile-requested-at` annotation (a merge patch of its metadata)
//! and waits until the object records having handled that value, then prints how it went.

use std::process::ExitCode;

use aoctl_api::source::REQUESTED_AT;
use aoctl_api::Kind;
use chrono::{SecondsFormat, Utc};
use serde_json::{json, Value};

use super::emit;
use crate::args::ReconcileArgs;
use crate::client::Client;
use crate::object;
use crate::wait::{self, Check};

pub(crate) async fn run(client: &Client, a: ReconcileArgs) -> anyhow::Result<ExitCode> {
    // Sub-second precision: two requests in the same second are two requests.
    let at = Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true);
    let patch = json!({"metadata": {"annotations": {REQUESTED_AT: at}}});
    client.merge_patch(a.kind, &a.name, &patch).await?;
    let reference = object::reference(a.kind, &a.name);
    if a.no_wait {
        emit(&format!("{reference}: reconcile requested at {at}\n"));
        return Ok(ExitCode::SUCCESS);
    }
    let names = [a.name.clone()];
    let done = wait::wait_for(client, a.kind, &names, a.timeout, |o| handled(a.kind, o, &at)).await?;
    let note = done.into_iter().next().map(|(_, n)| n).unwrap_or_default();
    emit(&format!("{reference}: {note}\n"));
    Ok(ExitCode::SUCCESS)
}

/// Whether the object handled the request `at`: then its Ready condition (a session's
/// ForgeSynced) says how it went.
fn handled(kind: Kind, obj: Option<&Value>, at: &str) -> Check {
    let Some(obj) = obj else { return Check::Failed("was deleted while waiting".into()) };
    if obj.pointer("/status/lastHandledReconcileAt").and_then(Value::as_str) != Some(at) {
        return Check::Pending("the request not handled yet".into());
    }
    use aoctl_api::condition::types;
    let which = if kind == Kind::Session { types::FORGE_SYNCED } else { types::READY };
    if kind == Kind::Session && object::condition(obj, which).is_none() {
        return Check::Done("the project has no forge to read".into());
    }
    let ready = object::condition(obj, which);
    let field = |k: &str| ready.and_then(|c| c.get(k)).and_then(Value::as_str).unwrap_or_default().to_string();
    let message = field("message");
    match field("status").as_str() {
        "True" if kind == Kind::GitSource => {
            let revision = obj.pointer("/status/lastAppliedRevision").and_then(Value::as_str).unwrap_or("<none>");
            Check::Done(format!("applied revision {revision}"))
        }
        "True" => Check::Done(if message.is_empty() { "synced".into() } else { message }),
        _ => Check::Failed(format!("Ready={} {}: {message}", field("status"), field("reason"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_counts_once_handled_and_ready_says_how() {
        let at = "2026-12-01T10:00:00.000001Z";
        let source = |handled: &str, ready: Value| {
            json!({"status": {"lastHandledReconcileAt": handled, "lastAppliedRevision": "main@sha1:abc",
                "conditions": [ready]}})
        };
        let ok = json!({"type": "Ready", "status": "True", "reason": "Applied", "message": "applied 3 objects"});
        assert!(matches!(handled(Kind::GitSource, Some(&source("older", ok.clone())), at), Check::Pending(_)));
        assert_eq!(
            handled(Kind::GitSource, Some(&source(at, ok.clone())), at),
            Check::Done("applied revision main@sha1:abc".into())
        );
        assert_eq!(handled(Kind::IssueSource, Some(&source(at, ok)), at), Check::Done("applied 3 objects".into()));
        let bad = json!({"type": "Ready", "status": "False", "reason": "InvalidManifest", "message": "s.yaml:3: spec.agent: unknown"});
        assert_eq!(
            handled(Kind::GitSource, Some(&source(at, bad)), at),
            Check::Failed("Ready=False InvalidManifest: s.yaml:3: spec.agent: unknown".into())
        );
        assert!(matches!(handled(Kind::GitSource, None, at), Check::Failed(_)));
    }
}
