//! `aoctl get`: tables, YAML, JSON or names of projects, sessions and events, and with `-w` a
//! line per change as it happens.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use aoctl_api::table::Table;
use aoctl_api::Kind;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::emit;
use crate::args::{GetArgs, OutputFormat};
use crate::client::{Client, ListParams, WatchEvent};
use crate::object;
use crate::table::{self, RowPrinter};

pub(crate) async fn run(client: &Client, a: GetArgs) -> anyhow::Result<ExitCode> {
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

    if a.watch || matches!(a.output, Some(OutputFormat::Yaml | OutputFormat::Json)) {
        return objects(client, a.output, a.watch, &kinds, params).await;
    }
    // Tables and names need only the cells: the server builds the table, no object is sent.
    let mut tables = vec![];
    for &kind in &kinds {
        tables.push((kind, client.table(kind, &params).await?));
    }
    if tables.iter().all(|(_, t)| t.rows.is_empty()) {
        eprintln!("No resources found.");
    }
    emit(&print_tables(&tables, a.output)?);
    Ok(ExitCode::SUCCESS)
}

/// `-o yaml|json` and `-w`: whole objects.
async fn objects(
    client: &Client,
    output: Option<OutputFormat>,
    watch: bool,
    kinds: &[Kind],
    params: ListParams,
) -> anyhow::Result<ExitCode> {
    let mut lists = vec![];
    for &kind in kinds {
        let mut list = client.list(kind, &params).await?;
        sort_items(kind, &mut list.items);
        lists.push((kind, list));
    }
    if !watch {
        let items: Vec<Value> = lists.into_iter().flat_map(|(_, l)| l.items).collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items});
        emit(&if output == Some(OutputFormat::Yaml) { aoctl_api::decode::to_yaml(&list) } else { to_json(&list) });
        return Ok(ExitCode::SUCCESS);
    }
    if lists.iter().all(|(_, l)| l.items.is_empty()) {
        eprintln!("No resources found.");
    }
    let (kind, list) = lists.remove(0);
    let mut w = Watcher::new(kind, output, None, params, &list.items);
    w.print_initial(&list.items);
    w.run(client, list.resource_version).await?;
    Ok(ExitCode::SUCCESS)
}

/// Tables as `get` prints them (`wide`: with the priority-1 columns), or with `-o name` the
/// names; names are written `kind/name` when there are several kinds.
fn print_tables(tables: &[(Kind, Table)], output: Option<OutputFormat>) -> anyhow::Result<String> {
    let prefix = tables.len() > 1;
    let mut out = String::new();
    for (kind, t) in tables {
        if t.rows.is_empty() {
            continue;
        }
        let name_col = t.column_definitions.iter().position(|c| c.format == "name");
        if output == Some(OutputFormat::Name) {
            let name_col = name_col
                .ok_or_else(|| anyhow::anyhow!("the server's table of {} has no name column", kind.plural()))?;
            for r in &t.rows {
                out.push_str(&object::reference(*kind, &cell_text(r.cells.get(name_col))));
                out.push('\n');
            }
            continue;
        }
        let shown: Vec<usize> = (0..t.column_definitions.len())
            .filter(|&i| wide(output) || t.column_definitions[i].priority == 0)
            .collect();
        let head: Vec<String> = shown.iter().map(|&i| t.column_definitions[i].name.to_ascii_uppercase()).collect();
        let rows: Vec<Vec<String>> = t
            .rows
            .iter()
            .map(|r| {
                let cell = |i: usize| {
                    let text = cell_text(r.cells.get(i));
                    if prefix && Some(i) == name_col {
                        object::reference(*kind, &text)
                    } else {
                        text
                    }
                };
                shown.iter().map(|&i| cell(i)).collect()
            })
            .collect();
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&table::render(&head, &rows));
    }
    Ok(out)
}

/// A table cell as text: strings as they are, numbers written out, nothing for null.
fn cell_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
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
pub(crate) fn header(kind: Kind, wide: bool) -> Vec<String> {
    let columns = aoctl_api::table::columns(kind);
    columns.into_iter().filter(|c| wide || c.priority == 0).map(|c| c.name.to_ascii_uppercase()).collect()
}

/// The cells of one object; `prefix` writes names as `kind/name`.
pub(crate) fn row(kind: Kind, o: &Value, wide: bool, prefix: bool, now: DateTime<Utc>) -> Vec<String> {
    let columns = aoctl_api::table::columns(kind);
    let cells = aoctl_api::table::cells(kind, o, now);
    columns
        .iter()
        .zip(&cells)
        .filter(|(c, _)| wide || c.priority == 0)
        .map(|(c, v)| {
            let text = cell_text(Some(v));
            if prefix && c.format == "name" {
                object::reference(kind, &text)
            } else {
                text
            }
        })
        .collect()
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
                    WatchEvent::Error(s) => return Err(crate::client::ClientError::Api(Box::new(s)).into()),
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
        assert_eq!(&w[6..], ["tmux", "<none>", "2", "#7 open", "<none>"]);
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

    /// What the server's table prints is what rows built here from the whole objects print, in
    /// every format and with several kinds.
    #[test]
    fn server_tables_print_like_local_rows() {
        let now = Utc::now();
        let t = (now - chrono::TimeDelta::seconds(200)).to_rfc3339();
        let projects = [json!({"metadata": {"name": "web", "creationTimestamp": t}, "spec": {"path": "/src/web"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "RepositoryReady"}]}})];
        let sessions = [
            json!({"metadata": {"name": "a", "creationTimestamp": t}, "spec": {"project": "web", "agent": "aider"}}),
            json!({"metadata": {"name": "bb", "creationTimestamp": t}, "spec": {"project": "web", "agent": "codex",
                "branch": "web/bb"}, "status": {"phase": "Stopped", "runtime": {"kind": "tmux", "restarts": 3}}}),
        ];
        let table = |kind, items: &[Value]| {
            let t = aoctl_api::table::table(kind, items, "5", now, aoctl_api::table::IncludeObject::None);
            // As sent over the wire.
            let t: Table = serde_json::from_slice(&serde_json::to_vec(&t).unwrap()).unwrap();
            (kind, t)
        };
        let both = [table(Kind::Project, &projects), table(Kind::Session, &sessions)];
        for output in [None, Some(OutputFormat::Wide)] {
            let w = wide(output);
            let local = |kind, items: &[Value], prefix| {
                let rows: Vec<Vec<String>> = items.iter().map(|o| row(kind, o, w, prefix, now)).collect();
                table::render(&header(kind, w), &rows)
            };
            let one = print_tables(&both[1..], output).unwrap();
            assert_eq!(one, local(Kind::Session, &sessions, false));
            let two = print_tables(&both, output).unwrap();
            assert_eq!(
                two,
                format!("{}\n{}", local(Kind::Project, &projects, true), local(Kind::Session, &sessions, true))
            );
        }
        let plain = print_tables(&both[1..], None).unwrap();
        assert_eq!(
            plain,
            "NAME  PROJECT  AGENT  PHASE    BRANCH  AGE\n\
             a     web      aider  Pending  <none>  3m20s\n\
             bb    web      codex  Stopped  web/bb  3m20s\n"
        );
        let wide_out = print_tables(&both[1..], Some(OutputFormat::Wide)).unwrap();
        assert!(wide_out.starts_with(
            "NAME  PROJECT  AGENT  PHASE    BRANCH  AGE    RUNTIME  ACTIVITY  RESTARTS  PR      OVERLAPS\n"
        ));
        assert!(wide_out.ends_with("3m20s  tmux     <none>    3         <none>  <none>\n"), "{wide_out}");
        assert_eq!(print_tables(&both, Some(OutputFormat::Name)).unwrap(), "project/web\nsession/a\nsession/bb\n");
        let empty = [table(Kind::Event, &[]), table(Kind::Session, &sessions[..1])];
        assert_eq!(
            print_tables(&empty, None).unwrap().lines().nth(1),
            Some("session/a  web      aider  Pending  <none>  3m20s")
        );
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
