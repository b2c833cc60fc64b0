//! Waiting for objects to reach a state, by listing once and then watching (re-listing when the
//! server says the watch is too old), for `apply --wait` and `delete --wait`.

use std::collections::BTreeMap;
use std::time::Duration;

use aoctl_api::session::reasons;
use aoctl_api::Kind;
use serde_json::Value;

use crate::client::{Client, ClientError, ListParams, WatchEvent};
use crate::object;

/// Where an object stands relative to what is awaited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// Reached; the note says how (e.g. `ready`).
    Done(String),
    /// Not yet; the note says why, for the timeout message.
    Pending(String),
    /// Will not be reached.
    Failed(String),
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum WaitError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{reference}: {why}")]
    Failed { reference: String, why: String },
    #[error("timed out after {} waiting for {}", aoctl_api::Duration(*.after), .pending.join(", "))]
    Timeout { after: Duration, pending: Vec<String> },
}

/// Waits until `check` says `Done` for every name of `kind` (`None`: the object does not exist).
/// Returns each name with its note, in name order.
pub(crate) async fn wait_for(
    client: &Client,
    kind: Kind,
    names: &[String],
    timeout: Duration,
    check: impl Fn(Option<&Value>) -> Check,
) -> Result<Vec<(String, String)>, WaitError> {
    let mut state: BTreeMap<String, Check> = names.iter().map(|n| (n.clone(), Check::Pending(String::new()))).collect();
    let watched = watch_until(client, kind, &mut state, &check);
    match tokio::time::timeout(timeout, watched).await {
        Ok(r) => r?,
        Err(_) => {
            let pending = state
                .iter()
                .filter_map(|(n, c)| match c {
                    Check::Pending(why) if why.is_empty() => Some(object::reference(kind, n)),
                    Check::Pending(why) => Some(format!("{} ({why})", object::reference(kind, n))),
                    _ => None,
                })
                .collect();
            // Callers pass what is left of a longer deadline: show it in whole seconds.
            let after = Duration::from_secs(timeout.as_secs_f64().round() as u64);
            return Err(WaitError::Timeout { after, pending });
        }
    }
    Ok(state
        .into_iter()
        .map(|(n, c)| match c {
            Check::Done(note) | Check::Pending(note) | Check::Failed(note) => (n, note),
        })
        .collect())
}

/// Lists, then watches, updating `state`, until everything is done or something failed.
async fn watch_until(
    client: &Client,
    kind: Kind,
    state: &mut BTreeMap<String, Check>,
    check: &impl Fn(Option<&Value>) -> Check,
) -> Result<(), WaitError> {
    let params = ListParams::default();
    'relist: loop {
        let list = client.list(kind, &params).await?;
        let names: Vec<String> = state.keys().cloned().collect();
        for n in names {
            let obj = list.items.iter().find(|o| object::name(o) == n);
            state.insert(n, check(obj));
        }
        if settled(kind, state)? {
            return Ok(());
        }
        let mut rv = list.resource_version;
        loop {
            let mut watch = match client.watch(kind, &params, &rv).await {
                Ok(w) => w,
                Err(e) if e.code() == Some(410) => continue 'relist,
                Err(e) => return Err(e.into()),
            };
            while let Some(ev) = watch.next().await? {
                let (obj, exists) = match ev {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, true),
                    WatchEvent::Deleted(o) => (o, false),
                    WatchEvent::Bookmark(v) => {
                        rv = v;
                        continue;
                    }
                    WatchEvent::Error(s) if s.code == 410 => continue 'relist,
                    WatchEvent::Error(s) => return Err(ClientError::Api(Box::new(s)).into()),
                };
                let v = object::resource_version(&obj);
                if !v.is_empty() {
                    rv = v.to_string();
                }
                let name = object::name(&obj).to_string();
                if let Some(slot) = state.get_mut(&name) {
                    *slot = check(exists.then_some(&obj));
                    if settled(kind, state)? {
                        return Ok(());
                    }
                }
            }
            // The server closed the stream: watch again from where it stopped, after a breath.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// True when every object is done; an error when one failed.
fn settled(kind: Kind, state: &BTreeMap<String, Check>) -> Result<bool, WaitError> {
    for (n, c) in state {
        if let Check::Failed(why) = c {
            return Err(WaitError::Failed { reference: object::reference(kind, n), why: why.clone() });
        }
    }
    Ok(state.values().all(|c| matches!(c, Check::Done(_))))
}

/// Phases in which a session is not expected to change without outside help.
pub(crate) const SETTLED_PHASES: &[&str] = &[
    "Queued",
    "Working",
    "Idle",
    "NeedsInput",
    "Stuck",
    "PROpen",
    "CIFailed",
    "ChangesRequested",
    "Approved",
    "Mergeable",
    "Merged",
    "Closed",
    "Stopped",
];

/// `apply --wait`: Projects until `Ready=True`; Sessions until `Ready=True` or a settled phase.
pub(crate) fn ready(kind: Kind, obj: Option<&Value>) -> Check {
    let Some(obj) = obj else { return Check::Failed("was deleted while waiting".into()) };
    if object::status_is_stale(obj) {
        return Check::Pending("status not yet observed".into());
    }
    let ready = object::condition(obj, aoctl_api::condition::types::READY);
    let ready_text = || {
        ready.map(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let mut t = format!("Ready={}", s("status"));
            if !s("reason").is_empty() {
                t.push_str(&format!(" {}", s("reason")));
            }
            if !s("message").is_empty() {
                t.push_str(&format!(": {}", s("message")));
            }
            t
        })
    };
    if object::condition_true(obj, aoctl_api::condition::types::READY) {
        return Check::Done("ready".into());
    }
    if kind == Kind::Session {
        // An agent that cannot start or take work until a person acts says so at once, in its own
        // words: what to install, how to log in.
        if let Some(c) = object::condition(obj, aoctl_api::condition::types::AGENT_READY) {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default();
            let blocking = [reasons::AGENT_NOT_FOUND, reasons::AGENT_NOT_LOGGED_IN];
            if s("status") == "False" && blocking.contains(&s("reason")) {
                return Check::Failed(format!("AgentReady=False {}: {}", s("reason"), s("message")));
            }
        }
        let phase = object::session_phase(obj);
        if phase == "Failed" {
            return Check::Failed(ready_text().unwrap_or_else(|| "phase Failed".into()));
        }
        if SETTLED_PHASES.contains(&phase.as_str()) {
            return Check::Done(format!("settled in phase {phase}"));
        }
        return Check::Pending(format!("phase {phase}"));
    }
    Check::Pending(ready_text().unwrap_or_else(|| "no Ready condition yet".into()))
}

/// `delete --wait`: until the object is gone.
pub(crate) fn gone(obj: Option<&Value>) -> Check {
    match obj {
        None => Check::Done("deleted".into()),
        Some(o) => {
            let finalizers = o.pointer("/metadata/finalizers").and_then(Value::as_array).map(Vec::len).unwrap_or(0);
            Check::Pending(format!("{finalizers} finalizer(s) left"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn readiness() {
        let s = |status: Value| json!({"metadata": {"name": "x", "generation": 1}, "status": status});
        assert_eq!(ready(Kind::Session, None), Check::Failed("was deleted while waiting".into()));
        assert_eq!(ready(Kind::Session, Some(&s(json!({})))), Check::Pending("phase Pending".into()));
        assert_eq!(
            ready(Kind::Session, Some(&s(json!({"phase": "NeedsInput"})))),
            Check::Done("settled in phase NeedsInput".into())
        );
        let failed = s(json!({"phase": "Failed", "conditions": [
            {"type": "Ready", "status": "False", "reason": "AgentNotFound", "message": "no aider"}]}));
        assert_eq!(ready(Kind::Session, Some(&failed)), Check::Failed("Ready=False AgentNotFound: no aider".into()));
        let stale = s(json!({"observedGeneration": 0, "conditions": [{"type": "Ready", "status": "True"}]}));
        assert!(matches!(ready(Kind::Project, Some(&stale)), Check::Pending(_)));
        let ok = s(json!({"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True"}]}));
        assert_eq!(ready(Kind::Project, Some(&ok)), Check::Done("ready".into()));
        assert_eq!(gone(None), Check::Done("deleted".into()));
    }
}
