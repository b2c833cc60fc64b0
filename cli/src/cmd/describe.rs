//! `aoctl describe`: one object in detail, kubectl-style: metadata, spec, status, conditions and
//! the object's last events.

use std::fmt::Write as _;
use std::process::ExitCode;

use aoctl_api::Kind;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::emit;
use crate::args::DescribeArgs;
use crate::client::{Client, ListParams};
use crate::object::{self, str_at, LAST_APPLIED};
use crate::table;

/// How many of the object's events are shown.
const EVENTS: usize = 10;
/// How many of a GitSource's objects are listed.
const INVENTORY_SHOWN: usize = 20;

pub(crate) async fn run(client: &Client, a: DescribeArgs) -> anyhow::Result<ExitCode> {
    let obj = client.get(a.kind, &a.name).await?;
    let events = events_of(client, a.kind, &a.name).await?;
    emit(&describe(a.kind, &obj, &events, Utc::now()));
    Ok(ExitCode::SUCCESS)
}

/// The object's events, oldest first, at most the last `EVENTS`.
async fn events_of(client: &Client, kind: Kind, name: &str) -> anyhow::Result<Vec<Value>> {
    let field_selector = format!("involvedObject.kind={},involvedObject.name={name}", kind.as_str());
    let params = ListParams { label_selector: None, field_selector: Some(field_selector) };
    let list = client.list(Kind::Event, &params).await?;
    // Filter here too, in case the server ignored the field selector.
    let mut events: Vec<Value> = list
        .items
        .into_iter()
        .filter(|e| {
            str_at(e, "/involvedObject/kind") == Some(kind.as_str()) && str_at(e, "/involvedObject/name") == Some(name)
        })
        .collect();
    events.sort_by_key(|e| object::time_at(e, "/lastTimestamp"));
    let skip = events.len().saturating_sub(EVENTS);
    Ok(events.split_off(skip))
}

/// The whole description.
pub(crate) fn describe(kind: Kind, o: &Value, events: &[Value], now: DateTime<Utc>) -> String {
    let mut out = String::new();
    let top = |out: &mut String, label: &str, value: &str| {
        let _ = writeln!(out, "{:<14}{value}", format!("{label}:"));
    };
    top(&mut out, "Name", object::name(o));
    map_lines(&mut out, "Labels", o.pointer("/metadata/labels"), None);
    map_lines(&mut out, "Annotations", o.pointer("/metadata/annotations"), Some(LAST_APPLIED));
    top(&mut out, "API Version", str_at(o, "/apiVersion").unwrap_or(aoctl_api::API_VERSION));
    top(&mut out, "Kind", str_at(o, "/kind").unwrap_or(kind.as_str()));

    out.push_str("Metadata:\n");
    let mut meta = Section::new(2);
    meta.add("Creation Timestamp", str_at(o, "/metadata/creationTimestamp").unwrap_or("<unknown>"));
    meta.add("Generation", &scalar_at(o, "/metadata/generation"));
    meta.add("Resource Version", str_at(o, "/metadata/resourceVersion").unwrap_or_default());
    meta.add("UID", str_at(o, "/metadata/uid").unwrap_or_default());
    if let Some(t) = str_at(o, "/metadata/deletionTimestamp") {
        meta.add("Deletion Timestamp", t);
    }
    meta.list("Finalizers", strings(o.pointer("/metadata/finalizers")));
    let owners = o.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
    let owners: Vec<String> = owners
        .iter()
        .map(|r| format!("{}/{}", str_at(r, "/kind").unwrap_or_default(), str_at(r, "/name").unwrap_or_default()))
        .collect();
    meta.list("Owner References", owners);
    out.push_str(&meta.render());

    out.push_str("Spec:\n");
    match o.get("spec") {
        Some(spec) if !spec.is_null() => out.push_str(&indent(&aoctl_api::decode::to_yaml(spec), 2)),
        _ => out.push_str("  <none>\n"),
    }

    out.push_str("Status:\n");
    let status = status_section(kind, o, now);
    out.push_str(&if status.is_empty() { "  <none>\n".to_string() } else { status });

    out.push_str("Conditions:\n");
    let conditions = o.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    if conditions.is_empty() {
        out.push_str("  <none>\n");
    } else {
        let rows: Vec<Vec<String>> = conditions
            .iter()
            .map(|c| {
                let s = |k: &str| c.get(k).map(object::scalar).unwrap_or_default();
                vec![
                    s("type"),
                    s("status"),
                    s("reason"),
                    table::age(object::time_at(c, "/lastTransitionTime"), now),
                    s("message"),
                ]
            })
            .collect();
        out.push_str(&indent(&table::render(&["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], &rows), 2));
    }

    if events.is_empty() {
        top(&mut out, "Events", "<none>");
    } else {
        out.push_str("Events:\n");
        let rows: Vec<Vec<String>> = events.iter().map(|e| event_row(e, now)).collect();
        out.push_str(&indent(&table::render(&["TYPE", "REASON", "AGE", "FROM", "MESSAGE"], &rows), 2));
    }
    out
}

/// A project's `status.forgeBudget` on one line: the token's windows (what is left, of what, and
/// when it resets), this project's and the token's spend in the last hour, and whether polls go
/// slower or wait.
fn forge_budget(b: &Value, now: DateTime<Utc>) -> String {
    let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64);
    let service = b.get("service").and_then(Value::as_str).unwrap_or("forge");
    let windows: Vec<String> = b
        .get("windows")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|w| {
            let resource = w.get("resource").and_then(Value::as_str).unwrap_or("?");
            let left = n(w, "remaining").map_or("?".to_string(), |r| r.to_string());
            let of = n(w, "limit").map(|l| format!(" of {l}")).unwrap_or_default();
            let reset = object::time_at(w, "/resetAt")
                .map(|t| format!(", resets in {}", table::age(Some(now), t)))
                .unwrap_or_default();
            format!("{resource} {left}{of} left{reset}")
        })
        .collect();
    let mut line = format!("{service}: ");
    line.push_str(&if windows.is_empty() { "no answer yet".to_string() } else { windows.join("; ") });
    let _ = write!(
        line,
        "; spent in the last hour: {} by this project, {} by the token",
        n(b, "spentLastHour").unwrap_or(0),
        n(b, "tokenSpentLastHour").unwrap_or(0)
    );
    if let Some(x) = b.get("slowdown").and_then(Value::as_f64) {
        let _ = write!(line, "; polls {x}x slower to last until the reset");
    }
    if b.get("pollsHeld").and_then(Value::as_bool) == Some(true) {
        line.push_str("; polls wait (webhooks and pushes are still read)");
    }
    line
}

/// The status lines of a kind, aligned.
fn status_section(kind: Kind, o: &Value, now: DateTime<Utc>) -> String {
    let mut st = Section::new(2);
    let s = |p: &str| str_at(o, p).map(str::to_string);
    if kind == Kind::Session {
        st.add("Phase", &object::session_phase(o));
    }
    if o.pointer("/status/observedGeneration").is_some() {
        st.add("Observed Generation", &scalar_at(o, "/status/observedGeneration"));
    }
    match kind {
        Kind::Project => {
            if let Some(b) = s("/status/defaultBranch") {
                st.add("Default Branch", &b);
            }
            if let Some(h) = s("/status/headSha") {
                st.add("Head SHA", &h);
            }
            if let Some(n) = o.pointer("/status/sessions") {
                st.add("Sessions", &object::scalar(n));
            }
            if let Some(pool) = o.pointer("/status/workspacePool") {
                let n = |f: &str| pool.get(f).and_then(Value::as_u64).unwrap_or(0);
                let mut line = format!("{} of {} ready", n("ready"), n("size"));
                if let Some(m) = pool.get("message").and_then(Value::as_str) {
                    let _ = write!(line, " ({m})");
                }
                st.add("Workspace Pool", &line);
            }
            if let Some(b) = o.pointer("/status/forgeBudget") {
                st.add("Forge Budget", &forge_budget(b, now));
            }
        }
        Kind::Session => {
            if s("/spec/role").as_deref() == Some("orchestrator") {
                let n = |k: &str| o.pointer(&format!("/status/orchestrator/{k}")).and_then(Value::as_u64).unwrap_or(0);
                let mut line = format!("orchestrator of project {}", s("/spec/project").unwrap_or_default());
                let _ = write!(line, ", {} batch(es) of its workers' messages typed in", n("batches"));
                if o.pointer("/status/orchestrator/inFlight").is_some_and(|v| !v.is_null()) {
                    line.push_str(", one being typed");
                }
                st.add("Role", &line);
            }
            if let Some(orch) = s("/metadata/labels/ao.dev~1orchestrator") {
                let waiting = o.pointer("/status/upstream/pending").and_then(Value::as_array).map_or(0, Vec::len);
                st.add("Orchestrator", &format!("{orch} ({waiting} message(s) for it not yet typed in)"));
            }
            if let Some(path) = s("/status/workspace/path") {
                let branch = s("/status/workspace/branch").filter(|b| !b.is_empty());
                let kind = s("/spec/workspace/kind").unwrap_or_else(|| "readonly".into());
                let mut line = match branch {
                    Some(b) => format!("{path} (branch {b}"),
                    None => format!("{path} ({kind}, no branch"),
                };
                if let Some(h) = s("/status/workspace/headSha") {
                    let _ = write!(line, ", head {}", &h[..h.len().min(12)]);
                }
                line.push(')');
                st.add("Workspace", &line);
            }
            if let Some(rk) = s("/status/runtime/kind") {
                let mut line = format!("{rk} {}", s("/status/runtime/handle").unwrap_or_default());
                if let Some(t) = object::time_at(o, "/status/runtime/startedAt") {
                    let _ = write!(line, ", started {} ago", table::age(Some(t), now));
                }
                let restarts = o.pointer("/status/runtime/restarts").and_then(Value::as_u64).unwrap_or(0);
                let _ = write!(line, ", {restarts} restart(s)");
                if let Some(code) = o.pointer("/status/runtime/exitCode").filter(|c| !c.is_null()) {
                    let _ = write!(line, ", exit code {code}");
                }
                st.add("Runtime", &line);
            }
            if let Some(state) = s("/status/activity/state") {
                let mut line = state;
                if let Some(t) = object::time_at(o, "/status/activity/since") {
                    let _ = write!(line, " for {}", table::age(Some(t), now));
                }
                if let Some(ev) = s("/status/activity/evidence").filter(|e| !e.is_empty()) {
                    let _ = write!(line, " ({})", table::clean(&ev));
                }
                st.add("Activity", &line);
            }
            if let Some(n) = o.pointer("/status/pullRequest/number").and_then(Value::as_u64) {
                let p = |k: &str| s(&format!("/status/pullRequest/{k}")).unwrap_or_default();
                let mut line =
                    format!("#{n} {} {}, checks {}, review {}", p("state"), p("url"), p("checks"), p("review"));
                match o.pointer("/status/pullRequest/mergeable").and_then(Value::as_bool) {
                    Some(true) => line.push_str(", mergeable"),
                    Some(false) => line.push_str(", not mergeable"),
                    None => {}
                }
                st.add("Pull Request", &line);
            }
            if let Some(count) = o.pointer("/status/changedFiles/count").and_then(Value::as_u64) {
                let files = strings(o.pointer("/status/changedFiles/files"));
                let mut line = format!("{count} file(s)");
                if !files.is_empty() {
                    let shown = files.iter().take(5).map(String::as_str).collect::<Vec<_>>().join(", ");
                    let _ = write!(line, ": {shown}");
                    if count > 5 {
                        line.push_str(", …");
                    }
                }
                st.add("Changed Files", &line);
            }
            let overlaps = o.pointer("/status/overlaps").and_then(Value::as_array).cloned().unwrap_or_default();
            let overlaps: Vec<String> = overlaps
                .iter()
                .map(|v| {
                    let files = strings(v.get("files")).join(", ");
                    format!("session {}: {files}", str_at(v, "/session").unwrap_or_default())
                })
                .collect();
            st.list("Overlaps", overlaps);
        }
        Kind::GitSource => {
            for (label, path) in [
                ("Applied Revision", "/status/lastAppliedRevision"),
                ("Attempted Revision", "/status/lastAttemptedRevision"),
                ("Last Reconcile Request", "/status/lastHandledReconcileAt"),
            ] {
                if let Some(v) = s(path) {
                    st.add(label, &v);
                }
            }
            let inventory = o.pointer("/status/inventory").and_then(Value::as_array).cloned().unwrap_or_default();
            let objects: Vec<String> = inventory
                .iter()
                .map(|e| {
                    aoctl_api::table::reference(
                        str_at(e, "/kind").unwrap_or_default(),
                        str_at(e, "/name").unwrap_or_default(),
                    )
                })
                .collect();
            if !objects.is_empty() {
                st.add("Objects", &objects.len().to_string());
            }
            let shown = objects.len().min(INVENTORY_SHOWN);
            let mut listed: Vec<String> = objects[..shown].to_vec();
            if objects.len() > shown {
                listed.push(format!("… and {} more", objects.len() - shown));
            }
            st.list("Inventory", listed);
        }
        Kind::IssueSource => {
            if let Some(t) = object::time_at(o, "/status/lastPollTime") {
                st.add("Last Poll", &format!("{} ago", table::age(Some(t), now)));
            }
            let sessions = o.pointer("/status/sessions").and_then(Value::as_array).cloned().unwrap_or_default();
            let sessions: Vec<String> = sessions
                .iter()
                .map(|v| {
                    let state = str_at(v, "/state").unwrap_or("open");
                    format!(
                        "#{} → session {} ({state})",
                        str_at(v, "/issue").unwrap_or_default(),
                        str_at(v, "/session").unwrap_or_default()
                    )
                })
                .collect();
            st.list("Sessions", sessions);
            let waiting: Vec<String> = strings(o.pointer("/status/waiting")).iter().map(|n| format!("#{n}")).collect();
            if !waiting.is_empty() {
                st.add("Waiting", &waiting.join(", "));
            }
            let held = o.pointer("/status/held").and_then(Value::as_array).cloned().unwrap_or_default();
            let held: Vec<String> = held
                .iter()
                .map(|v| {
                    format!(
                        "#{}: {}",
                        str_at(v, "/issue").unwrap_or_default(),
                        str_at(v, "/reason").unwrap_or_default()
                    )
                })
                .collect();
            st.list("Held", held);
        }
        Kind::Event => {}
    }
    st.render()
}

fn event_row(e: &Value, now: DateTime<Utc>) -> Vec<String> {
    let s = |p: &str| str_at(e, p).unwrap_or_default().to_string();
    let mut age = table::age(object::time_at(e, "/lastTimestamp"), now);
    let count = e.get("count").and_then(Value::as_u64).unwrap_or(1);
    if count > 1 {
        let _ = write!(age, " (x{count} over {})", table::age(object::time_at(e, "/firstTimestamp"), now));
    }
    vec![s("/type"), s("/reason"), age, s("/source"), s("/message")]
}

/// `Labels:` / `Annotations:` with one `key=value` per line, aligned; `skip` is left out.
fn map_lines(out: &mut String, label: &str, map: Option<&Value>, skip: Option<&str>) {
    let entries: Vec<String> = map
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, _)| Some(k.as_str()) != skip)
                .map(|(k, v)| format!("{k}={}", object::scalar(v)))
                .collect()
        })
        .unwrap_or_default();
    let head = format!("{label}:");
    if entries.is_empty() {
        let _ = writeln!(out, "{head:<14}<none>");
    }
    for (i, e) in entries.iter().enumerate() {
        let _ = writeln!(out, "{:<14}{}", if i == 0 { head.as_str() } else { "" }, table::clean(e));
    }
}

fn scalar_at(o: &Value, pointer: &str) -> String {
    o.pointer(pointer).map(object::scalar).unwrap_or_default()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array).map(|a| a.iter().map(object::scalar).collect()).unwrap_or_default()
}

fn indent(text: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    text.lines().map(|l| if l.is_empty() { "\n".to_string() } else { format!("{pad}{l}\n") }).collect()
}

/// Aligned `Label:  value` lines under a heading, plus lists shown one item per line.
struct Section {
    indent: usize,
    lines: Vec<(String, Option<String>)>,
}

impl Section {
    fn new(indent: usize) -> Section {
        Section { indent, lines: vec![] }
    }

    fn add(&mut self, label: &str, value: &str) {
        self.lines.push((format!("{label}:"), Some(value.to_string())));
    }

    /// A list; nothing when empty.
    fn list(&mut self, label: &str, items: Vec<String>) {
        if items.is_empty() {
            return;
        }
        self.lines.push((format!("{label}:"), None));
        for i in items {
            self.lines.push((format!("  {i}"), None));
        }
    }

    fn render(&self) -> String {
        let width = self.lines.iter().filter(|(_, v)| v.is_some()).map(|(l, _)| l.len()).max().unwrap_or(0) + 2;
        let pad = " ".repeat(self.indent);
        let mut out = String::new();
        for (label, value) in &self.lines {
            match value {
                Some(v) => {
                    let _ = writeln!(out, "{pad}{label:<width$}{}", table::clean(v));
                }
                None => {
                    let _ = writeln!(out, "{pad}{label}");
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn describes_a_session() {
        let now = Utc::now();
        let o = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session",
            "metadata": {"name": "fix", "labels": {"team": "web", "tier": "a"},
                "annotations": {LAST_APPLIED: "{}"}, "generation": 2, "resourceVersion": "9", "uid": "u-1",
                "creationTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["ao.dev/workspace"]},
            "spec": {"project": "demo", "prompt": "hi"},
            "status": {"phase": "Working", "observedGeneration": 2,
                "workspace": {"path": "/w", "branch": "demo/fix"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "Working", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
        let ev = json!({"type": "Normal", "reason": "Started", "source": "session-controller", "message": "go", "count": 2,
            "lastTimestamp": now.to_rfc3339(), "firstTimestamp": (now - chrono::TimeDelta::seconds(30)).to_rfc3339()});
        let text = describe(Kind::Session, &o, &[ev], now);
        assert!(
            text.starts_with("Name:         fix\nLabels:       team=web\n              tier=a\nAnnotations:  <none>\n"),
            "{text}"
        );
        assert!(text.contains("  Resource Version:    9\n"), "{text}");
        assert!(text.contains("  Finalizers:\n    ao.dev/workspace\n"), "{text}");
        assert!(text.contains("Spec:\n  project: demo\n  prompt: hi\n"), "{text}");
        assert!(text.contains("  Phase:                Working\n  Observed Generation:  2\n  Workspace:            /w (branch demo/fix)\n"), "{text}");
        assert!(text.contains("  TYPE   STATUS  REASON   AGE"), "{text}");
        assert!(text.contains("  Normal  Started  0s (x2 over 30s)  session-controller  go\n"), "{text}");
        assert!(!text.contains("Overlaps"), "{text}");
    }

    #[test]
    fn describes_an_orchestrator_and_its_worker() {
        let o = json!({"kind": "Session", "metadata": {"name": "demo-orchestrator"},
            "spec": {"project": "demo", "role": "orchestrator", "workspace": {"kind": "readonly"}},
            "status": {"workspace": {"path": "/w", "branch": "", "headSha": "0123456789abcdef"},
                "orchestrator": {"workers": 2, "batches": 3}}});
        let text = describe(Kind::Session, &o, &[], Utc::now());
        assert!(text.contains("Role:       orchestrator of project demo, 3 batch(es)"), "{text}");
        assert!(text.contains("/w (readonly, no branch, head 0123456789ab)"), "{text}");
        let w = json!({"kind": "Session", "metadata": {"name": "w", "labels": {"ao.dev/orchestrator": "demo-orchestrator"}},
            "spec": {"project": "demo"}, "status": {"upstream": {"orchestrator": "demo-orchestrator",
                "pending": [{"seq": 1, "kind": "report", "key": "k", "at": "2026-01-01T00:00:00Z", "text": "t"}]}}});
        let text = describe(Kind::Session, &w, &[], Utc::now());
        assert!(text.contains("Orchestrator:  demo-orchestrator (1 message(s) for it not yet typed in)"), "{text}");
    }

    #[test]
    fn describes_the_files_a_session_shares_with_others() {
        let o = json!({"kind": "Session", "metadata": {"name": "fix"}, "spec": {"project": "demo"},
            "status": {"changedFiles": {"headSha": "h", "baseSha": "b", "files": ["a.rs", "b.rs"], "count": 2},
                "overlaps": [{"session": "other-1", "files": ["a.rs", "b.rs"]}, {"session": "z", "files": ["b.rs"]}]}});
        let text = describe(Kind::Session, &o, &[], Utc::now());
        assert!(text.contains("  Changed Files:  2 file(s): a.rs, b.rs\n"), "{text}");
        assert!(text.contains("  Overlaps:\n    session other-1: a.rs, b.rs\n    session z: b.rs\n"), "{text}");
    }

    #[test]
    fn describes_the_budget_of_a_projects_forge_token() {
        let now = Utc::now();
        let reset = (now + chrono::TimeDelta::seconds(30 * 60 + 20)).to_rfc3339();
        let o = json!({"kind": "Project", "metadata": {"name": "demo"}, "spec": {"path": "/r"},
            "status": {"forgeBudget": {"service": "GitHub", "spentLastHour": 12, "tokenSpentLastHour": 40,
                "slowdown": 2.5, "pollsHeld": true,
                "windows": [{"resource": "core", "limit": 5000, "remaining": 312, "resetAt": reset}]}}});
        let text = describe(Kind::Project, &o, &[], now);
        assert!(
            text.contains("  Forge Budget:  GitHub: core 312 of 5000 left, resets in 30m; spent in the last hour: 12 by this project, 40 by the token; polls 2.5x slower to last until the reset; polls wait (webhooks and pushes are still read)\n"),
            "{text}"
        );
    }
}
