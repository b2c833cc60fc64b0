//! `aoctl get`: tables, YAML, JSON or names of projects, sessions and events, and with `-w` a
//! line per change as it happens.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use aoctl_api::Kind;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::emit;
use crate::args::{GetArgs, OutputFormat};
use crate::client::{Client, ListParams, WatchEvent};
use crate::object::{self, str_at};
use crate::table::{self, RowPrinter};

pub async fn run(client: &Client, a: GetArgs) -> anyhow::Result<ExitCode> {
    let params = ListParams { label_selector: a.selector.clone(), field_selector: None };
    let kinds = a.kinds.0;
    let now = Utc::now();
    if let Some(name) = &a.name {
        let kind = kinds[0];
        let obj = client.get(kind, name).await?;
        match a.output {
            Some(OutputFormat::Yaml) => emit(&aoctl_api::decode::to_yaml(&obj)),
            Some(OutputFormat::Json) => emit(&to_json(&obj)),
            Some(OutputFormat::Name) => emit(&format!("{}\n", object::reference(kind, name))),
            Some(OutputFormat::Wide) | None => {
                emit(&table::render(&header(kind, wide(a.output)), &[row(kind, &obj, wide(a.output), false, now)]))
            }
        }
        if a.watch {
            let rv = object::resource_version(&obj).to_string();
            let mut w = Watcher::new(kind, a.output, Some(name.clone()), params, &[obj]);
            w.run(client, rv).await?;
        }
        return Ok(ExitCode::SUCCESS);
    }

    let mut lists = vec![];
    for &kind in &kinds {
        let mut list = client.list(kind, &params).await?;
        sort_items(kind, &mut list.items);
        lists.push((kind, list));
    }
    let total: usize = lists.iter().map(|(_, l)| l.items.len()).sum();
    match a.output {
        Some(OutputFormat::Yaml | OutputFormat::Json) if !a.watch => {
            let items: Vec<Value> = lists.iter().flat_map(|(_, l)| l.items.iter().cloned()).collect();
            let list = json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items});
            emit(&if a.output == Some(OutputFormat::Yaml) {
                aoctl_api::decode::to_yaml(&list)
            } else {
                to_json(&list)
            });
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    if total == 0 {
        eprintln!("No resources found.");
    }
    if a.watch {
        let (kind, list) = lists.remove(0);
        let mut w = Watcher::new(kind, a.output, None, params, &list.items);
        w.print_initial(&list.items);
        w.run(client, list.resource_version).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let prefix = kinds.len() > 1;
    let mut first = true;
    for (kind, list) in &lists {
        if list.items.is_empty() {
            continue;
        }
        match a.output {
            Some(OutputFormat::Name) => {
                for o in &list.items {
                    emit(&format!("{}\n", object::reference(*kind, object::name(o))));
                }
            }
            _ => {
                let rows: Vec<Vec<String>> =
                    list.items.iter().map(|o| row(*kind, o, wide(a.output), prefix, now)).collect();
                if !first {
                    emit("\n");
                }
                emit(&table::render(&header(*kind, wide(a.output)), &rows));
            }
        }
        first = false;
    }
    Ok(ExitCode::SUCCESS)
}

fn wide(o: Option<OutputFormat>) -> bool {
    o == Some(OutputFormat::Wide)
}

fn to_json(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("JSON values serialise");
    s.push('\n');
    s
}

/// Projects and sessions by name; events oldest first, as they happened.
fn sort_items(kind: Kind, items: &mut [Value]) {
    if kind == Kind::Event {
        items.sort_by_key(|e| (object::time_at(e, "/lastTimestamp"), object::name(e).to_string()));
    } else {
        items.sort_by(|a, b| object::name(a).cmp(object::name(b)));
    }
}

/// The column titles of a kind.
pub fn header(kind: Kind, wide: bool) -> Vec<&'static str> {
    let (mut h, extra): (Vec<&str>, &[&str]) = match kind {
        Kind::Project => (vec!["NAME", "PATH", "BRANCH", "READY", "AGE"], &["REPO", "REASON"]),
        Kind::Session => {
            (vec!["NAME", "PROJECT", "AGENT", "PHASE", "BRANCH", "AGE"], &["RUNTIME", "ACTIVITY", "RESTARTS", "PR"])
        }
        Kind::Event => {
            (vec!["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], &["SOURCE", "FIRST SEEN", "COUNT", "NAME"])
        }
    };
    if wide {
        h.extend_from_slice(extra);
    }
    h
}

/// The cells of one object; `prefix` writes names as `kind/name`.
pub fn row(kind: Kind, o: &Value, wide: bool, prefix: bool, now: DateTime<Utc>) -> Vec<String> {
    let s = |p: &str| str_at(o, p).map(str::to_string);
    let none = || "<none>".to_string();
    let name = if prefix { object::reference(kind, object::name(o)) } else { object::name(o).to_string() };
    let age = table::age(object::time_at(o, "/metadata/creationTimestamp"), now);
    let ready = object::condition(o, "Ready");
    let cond = |k: &str| ready.and_then(|c| c.get(k)).and_then(Value::as_str).map(str::to_string);
    match kind {
        Kind::Project => {
            let branch = s("/status/defaultBranch").or_else(|| s("/spec/defaultBranch")).unwrap_or_else(none);
            let mut r = vec![
                name,
                s("/spec/path").unwrap_or_default(),
                branch,
                cond("status").unwrap_or("Unknown".into()),
                age,
            ];
            if wide {
                r.push(s("/spec/repo").unwrap_or_else(none));
                r.push(cond("reason").unwrap_or_else(none));
            }
            r
        }
        Kind::Session => {
            let branch = s("/status/workspace/branch").or_else(|| s("/spec/branch")).unwrap_or_else(none);
            let mut r = vec![
                name,
                s("/spec/project").unwrap_or_default(),
                object::agent(o).unwrap_or_else(none),
                object::session_phase(o),
                branch,
                age,
            ];
            if wide {
                r.push(s("/status/runtime/kind").or_else(|| s("/spec/runtime")).unwrap_or_else(none));
                r.push(s("/status/activity/state").unwrap_or_else(none));
                r.push(o.pointer("/status/runtime/restarts").and_then(Value::as_u64).unwrap_or(0).to_string());
                let pr = o.pointer("/status/pullRequest/number").and_then(Value::as_u64).map(|n| {
                    match s("/status/pullRequest/state") {
                        Some(state) => format!("#{n} {state}"),
                        None => format!("#{n}"),
                    }
                });
                r.push(pr.unwrap_or_else(none));
            }
            r
        }
        Kind::Event => {
            let involved = match (s("/involvedObject/kind").and_then(|k| Kind::parse(&k)), s("/involvedObject/name")) {
                (Some(k), Some(n)) => object::reference(k, &n),
                (None, Some(n)) => {
                    format!("{}/{n}", s("/involvedObject/kind").unwrap_or_default().to_ascii_lowercase())
                }
                _ => none(),
            };
            let mut r = vec![
                table::age(object::time_at(o, "/lastTimestamp"), now),
                s("/type").unwrap_or_default(),
                s("/reason").unwrap_or_default(),
                involved,
                s("/message").unwrap_or_default(),
            ];
            if wide {
                r.push(s("/source").unwrap_or_default());
                r.push(table::age(object::time_at(o, "/firstTimestamp"), now));
                r.push(o.get("count").and_then(Value::as_u64).unwrap_or(1).to_string());
                r.push(name);
            }
            r
        }
    }
}

/// Prints changes of one kind as they happen, re-listing when the watch is too old.
struct Watcher {
    kind: Kind,
    output: Option<OutputFormat>,
    name: Option<String>,
    params: ListParams,
    /// Last version printed of each object, to print only what changed after a re-list.
    seen: BTreeMap<String, Value>,
    rows: Option<RowPrinter>,
}

impl Watcher {
    fn new(
        kind: Kind,
        output: Option<OutputFormat>,
        name: Option<String>,
        params: ListParams,
        initial: &[Value],
    ) -> Watcher {
        let seen = initial.iter().map(|o| (object::name(o).to_string(), o.clone())).collect();
        let mut w = Watcher { kind, output, name, params, seen, rows: None };
        if !initial.is_empty() && w.is_table() {
            let rows: Vec<Vec<String>> = initial.iter().map(|o| w.cells(o)).collect();
            w.rows = Some(RowPrinter::new(&header(kind, wide(output)), &rows));
        }
        w
    }

    fn is_table(&self) -> bool {
        matches!(self.output, None | Some(OutputFormat::Wide))
    }

    fn cells(&self, o: &Value) -> Vec<String> {
        row(self.kind, o, wide(self.output), false, Utc::now())
    }

    /// The listing that precedes the changes.
    fn print_initial(&mut self, items: &[Value]) {
        if items.is_empty() {
            return;
        }
        if self.is_table() {
            let rows: Vec<Vec<String>> = items.iter().map(|o| self.cells(o)).collect();
            emit(&table::render(&header(self.kind, wide(self.output)), &rows));
        } else {
            items.iter().for_each(|o| self.print(o));
        }
    }

    fn print(&mut self, o: &Value) {
        match self.output {
            Some(OutputFormat::Yaml) => emit(&format!("---\n{}", aoctl_api::decode::to_yaml(o))),
            Some(OutputFormat::Json) => emit(&to_json(o)),
            Some(OutputFormat::Name) => emit(&format!("{}\n", object::reference(self.kind, object::name(o)))),
            Some(OutputFormat::Wide) | None => {
                let cells = self.cells(o);
                match &self.rows {
                    Some(p) => emit(&p.row(&cells)),
                    None => {
                        let h = header(self.kind, wide(self.output));
                        emit(&table::render(&h, std::slice::from_ref(&cells)));
                        self.rows = Some(RowPrinter::new(&h, &[cells]));
                    }
                }
            }
        }
    }

    fn wanted(&self, o: &Value) -> bool {
        self.name.as_deref().is_none_or(|n| n == object::name(o))
    }

    async fn run(&mut self, client: &Client, mut rv: String) -> anyhow::Result<()> {
        loop {
            let mut watch = match client.watch(self.kind, &self.params, &rv).await {
                Ok(w) => w,
                Err(e) if e.code() == Some(410) => {
                    rv = self.relist(client).await?;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            while let Some(ev) = watch.next().await? {
                let (o, deleted) = match ev {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, false),
                    WatchEvent::Deleted(o) => (o, true),
                    WatchEvent::Bookmark(v) => {
                        if !v.is_empty() {
                            rv = v;
                        }
                        continue;
                    }
                    WatchEvent::Error(s) if s.code == 410 => {
                        rv = self.relist(client).await?;
                        break;
                    }
                    WatchEvent::Error(s) => return Err(crate::client::ClientError::Api(s).into()),
                };
                if !object::resource_version(&o).is_empty() {
                    rv = object::resource_version(&o).to_string();
                }
                if !self.wanted(&o) {
                    continue;
                }
                let name = object::name(&o).to_string();
                self.print(&o);
                if deleted {
                    self.seen.remove(&name);
                } else {
                    self.seen.insert(name, o);
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Lists again after the watch fell too far behind; prints what changed meanwhile and returns
    /// the resource version to watch from.
    async fn relist(&mut self, client: &Client) -> anyhow::Result<String> {
        let list = client.list(self.kind, &self.params).await?;
        let mut fresh = BTreeMap::new();
        for o in list.items.into_iter().filter(|o| self.wanted(o)) {
            fresh.insert(object::name(&o).to_string(), o);
        }
        let gone: Vec<Value> =
            self.seen.iter().filter(|(n, _)| !fresh.contains_key(*n)).map(|(_, o)| o.clone()).collect();
        for o in &gone {
            self.print(o);
        }
        let changed: Vec<Value> = fresh
            .iter()
            .filter(|(n, o)| {
                self.seen.get(*n).is_none_or(|old| object::resource_version(old) != object::resource_version(o))
            })
            .map(|(_, o)| o.clone())
            .collect();
        for o in &changed {
            self.print(o);
        }
        self.seen = fresh;
        Ok(list.resource_version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_rows() {
        let now = Utc::now();
        let created = (now - chrono::TimeDelta::seconds(45)).to_rfc3339();
        let s = json!({"kind": "Session", "metadata": {"name": "fix", "creationTimestamp": created},
            "spec": {"project": "demo", "agent": "aider", "branch": "demo/fix"},
            "status": {"phase": "Working", "workspace": {"path": "/w", "branch": "demo/fix-2"},
                "runtime": {"kind": "tmux", "handle": "h", "restarts": 2},
                "pullRequest": {"number": 7, "url": "u", "state": "open", "checks": "none", "review": "none"}}});
        assert_eq!(
            row(Kind::Session, &s, false, true, now),
            ["session/fix", "demo", "aider", "Working", "demo/fix-2", "45s"]
        );
        let w = row(Kind::Session, &s, true, false, now);
        assert_eq!(&w[6..], ["tmux", "<none>", "2", "#7 open"]);
        assert_eq!(header(Kind::Session, true).len(), w.len());
    }

    #[test]
    fn project_and_event_rows() {
        let now = Utc::now();
        let p = json!({"metadata": {"name": "demo"}, "spec": {"path": "/src/demo", "repo": "a/b"},
            "status": {"defaultBranch": "main", "conditions": [{"type": "Ready", "status": "False", "reason": "NotAGitRepository"}]}});
        assert_eq!(
            row(Kind::Project, &p, true, false, now),
            ["demo", "/src/demo", "main", "False", "<unknown>", "a/b", "NotAGitRepository"]
        );
        let e = json!({"metadata": {"name": "fix.1"}, "involvedObject": {"kind": "Session", "name": "fix"},
            "type": "Normal", "reason": "Started", "message": "agent started", "count": 3});
        assert_eq!(
            row(Kind::Event, &e, false, false, now),
            ["<unknown>", "Normal", "Started", "session/fix", "agent started"]
        );
        assert_eq!(header(Kind::Event, false).len(), 5);
    }

    #[test]
    fn events_sort_by_time() {
        let mut items = vec![
            json!({"metadata": {"name": "b"}, "lastTimestamp": "2024-01-02T00:00:00Z"}),
            json!({"metadata": {"name": "a"}, "lastTimestamp": "2024-01-03T00:00:00Z"}),
        ];
        sort_items(Kind::Event, &mut items);
        assert_eq!(object::name(&items[0]), "b");
        sort_items(Kind::Session, &mut items);
        assert_eq!(object::name(&items[0]), "a");
    }
}
