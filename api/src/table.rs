//! Tables of objects as `aoctl get` prints them, in the shape of Kubernetes' `meta.k8s.io/v1`
//! `Table`: the columns of each kind (the `-o wide` ones have priority 1) and the cells of one
//! object. The server answers lists with a table when asked (`Accept: application/json;as=Table;
//! v=v1;g=meta.k8s.io`) and the CLI prints it, so the columns are defined here, once.

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::meta::Kind;

/// The media type that asks for a table instead of a list or an object.
pub const TABLE_MEDIA_TYPE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
/// `apiVersion` of a `Table`.
pub const TABLE_API_VERSION: &str = "meta.k8s.io/v1";

/// One column of a table (Kubernetes' `TableColumnDefinition`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ColumnDefinition {
    /// The column's title; printed in capitals.
    pub name: String,
    /// `string` or `integer`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `name` marks the column holding the object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub format: String,
    #[serde(default)]
    pub description: String,
    /// 0: always shown; 1: shown with `-o wide` only.
    #[serde(default)]
    pub priority: i32,
}

/// One row: a cell per column, and optionally the object (or its metadata) it shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableRow {
    pub cells: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
}

/// `metadata` of a table: the resourceVersion its rows are current at.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableMeta {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
}

/// Kubernetes' `meta.k8s.io/v1` `Table`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Table {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: TableMeta,
    pub column_definitions: Vec<ColumnDefinition>,
    #[serde(default)]
    pub rows: Vec<TableRow>,
}

/// What each row carries besides its cells (`?includeObject=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// Cells only.
    None,
    /// The object's metadata, as a `PartialObjectMetadata` (Kubernetes' default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query value.
    pub fn parse(s: &str) -> Option<IncludeObject> {
        match s {
            "None" => Some(IncludeObject::None),
            "Metadata" => Some(IncludeObject::Metadata),
            "Object" => Some(IncludeObject::Object),
            _ => None,
        }
    }
}

/// The cell printed for a value that is not there.
pub const NONE: &str = "<none>";

fn column(name: &str, type_: &str, priority: i32, description: &str) -> ColumnDefinition {
    let format = if name == "Name" { "name" } else { "" };
    ColumnDefinition {
        name: name.into(),
        type_: type_.into(),
        format: format.into(),
        description: description.into(),
        priority,
    }
}

/// The columns of a kind, the `-o wide` ones (priority 1) last.
pub fn columns(kind: Kind) -> Vec<ColumnDefinition> {
    let age = "Time since the object was created";
    match kind {
        Kind::Project => vec![
            column("Name", "string", 0, "metadata.name"),
            column("Path", "string", 0, "spec.path"),
            column("Branch", "string", 0, "status.defaultBranch, else spec.defaultBranch"),
            column("Ready", "string", 0, "Status of the Ready condition"),
            column("Age", "string", 0, age),
            column("Repo", "string", 1, "spec.repo"),
            column("Reason", "string", 1, "Reason of the Ready condition"),
        ],
        Kind::Session => vec![
            column("Name", "string", 0, "metadata.name"),
            column("Project", "string", 0, "spec.project"),
            column("Agent", "string", 0, "the agent it runs: spec.agent, else the project's, else the default (custom:<program> for a custom agent)"),
            column("Phase", "string", 0, "status.phase; Terminating while deleted"),
            column("Branch", "string", 0, "status.workspace.branch, else spec.branch"),
            column("Age", "string", 0, age),
            column("Runtime", "string", 1, "status.runtime.kind, else spec.runtime"),
            column("Activity", "string", 1, "status.activity.state"),
            column("Restarts", "integer", 1, "status.runtime.restarts"),
            column("PR", "string", 1, "status.pullRequest number and state"),
            column(
                "Overlaps",
                "string",
                1,
                "status.overlaps: the other sessions changing the same files, and how many",
            ),
        ],
        Kind::GitSource => vec![
            column("Name", "string", 0, "metadata.name"),
            column("Revision", "string", 0, "status.lastAppliedRevision, its commit id cut to 12 digits"),
            column("Suspended", "string", 0, "spec.suspend"),
            column("Ready", "string", 0, "Status of the Ready condition"),
            column("Message", "string", 0, "Message of the Ready condition"),
            column("Age", "string", 0, age),
            column("URL", "string", 1, "spec.url"),
            column("Path", "string", 1, "spec.path"),
            column("Objects", "integer", 1, "How many objects status.inventory lists"),
            column("Attempted", "string", 1, "status.lastAttemptedRevision"),
        ],
        Kind::IssueSource => vec![
            column("Name", "string", 0, "metadata.name"),
            column("Project", "string", 0, "spec.project"),
            column("Labels", "string", 0, "spec.github.labels"),
            column("Sessions", "string", 0, "Open sessions, and spec.maxSessions"),
            column("Waiting", "integer", 0, "How many issues wait for a slot (status.waiting)"),
            column("Ready", "string", 0, "Status of the Ready condition"),
            column("Age", "string", 0, age),
            column("On Close", "string", 1, "spec.onClose"),
            column("Last Poll", "string", 1, "Time since status.lastPollTime"),
            column("Reason", "string", 1, "Reason of the Ready condition"),
        ],
        Kind::Event => vec![
            column("Last Seen", "string", 0, "Time since lastTimestamp"),
            column("Type", "string", 0, "type"),
            column("Reason", "string", 0, "reason"),
            column("Object", "string", 0, "involvedObject as kind/name"),
            column("Message", "string", 0, "message"),
            column("Source", "string", 1, "source"),
            column("First Seen", "string", 1, "Time since firstTimestamp"),
            column("Count", "integer", 1, "count"),
            column("Name", "string", 1, "metadata.name"),
        ],
    }
}

/// A field of an object. The objects of a table have a handful of fields per level, and
/// comparing that many keys costs less than hashing one: tables have thousands of rows.
fn field<'a>(o: &'a Value, key: &str) -> Option<&'a Value> {
    o.as_object()?.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
}

/// The value at a path of field names; unlike `Value::pointer`, it allocates nothing.
fn at<'a>(o: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(o, |v, k| field(v, k))
}

fn str_at<'a>(o: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(o, path).and_then(Value::as_str)
}

/// A time at a path.
fn time_at(o: &Value, path: &[&str]) -> Option<DateTime<Utc>> {
    str_at(o, path).and_then(|s| DateTime::parse_from_rfc3339(s).ok()).map(|t| t.with_timezone(&Utc))
}

/// `kind/name` as kubectl prints it, e.g. `session/fix-login`.
pub fn reference(kind: &str, name: &str) -> String {
    format!("{}/{name}", kind.to_ascii_lowercase())
}

/// The condition of a type in `status.conditions`.
fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    field(status, "conditions")?.as_array()?.iter().find(|c| field(c, "type").and_then(Value::as_str) == Some(type_))
}

/// `spec.agent` as shown in tables: a built-in name, or `custom:<program>`.
fn agent(spec: &Value) -> Option<String> {
    let agent = field(spec, "agent")?;
    match agent {
        Value::String(s) => Some(s.clone()),
        Value::Object(_) => {
            let program = field(agent, "command").and_then(|c| c.get(0)).and_then(Value::as_str).unwrap_or_default();
            Some(format!("custom:{program}"))
        }
        _ => None,
    }
}

/// The session's displayed phase: `Terminating` while deleting, `Pending` before the first status.
fn session_phase(meta: &Value, status: &Value) -> String {
    if field(meta, "deletionTimestamp").is_some_and(|t| !t.is_null()) {
        return "Terminating".into();
    }
    str_at(status, &["phase"]).unwrap_or("Pending").to_string()
}

/// A revision as tables show it: `main@sha1:` and the first 12 digits of the commit id.
fn short_revision(revision: &str) -> String {
    match revision.rsplit_once("sha1:") {
        Some((head, id)) if id.len() > 12 => format!("{head}sha1:{}", &id[..12]),
        _ => revision.to_string(),
    }
}

/// What a missing part of an object reads as.
static NULL: Value = Value::Null;

/// The cells of one object, one per column of `columns(kind)`, with ages as of `now`.
pub fn cells(kind: Kind, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    // Each part is looked up once: tables of thousands of rows are built per request.
    let part = |k: &str| field(o, k).unwrap_or(&NULL);
    let (meta, spec, status) = (part("metadata"), part("spec"), part("status"));
    let s = |v: &Value, p: &[&str]| str_at(v, p).map(str::to_string);
    let none = || NONE.to_string();
    let name = str_at(meta, &["name"]).unwrap_or_default().to_string();
    let created = || age(time_at(meta, &["creationTimestamp"]), now);
    let cells: Vec<Value> = match kind {
        Kind::Project => {
            let ready = condition(status, "Ready");
            let cond = |k: &str| ready.and_then(|c| field(c, k)).and_then(Value::as_str).map(str::to_string);
            vec![
                name.into(),
                s(spec, &["path"]).unwrap_or_default().into(),
                s(status, &["defaultBranch"]).or_else(|| s(spec, &["defaultBranch"])).unwrap_or_else(none).into(),
                cond("status").unwrap_or_else(|| "Unknown".into()).into(),
                created().into(),
                s(spec, &["repo"]).unwrap_or_else(none).into(),
                cond("reason").unwrap_or_else(none).into(),
            ]
        }
        Kind::Session => {
            let runtime = field(status, "runtime").unwrap_or(&NULL);
            let overlaps = field(status, "overlaps").and_then(Value::as_array).filter(|o| !o.is_empty()).map(|o| {
                let names: Vec<String> = o
                    .iter()
                    .map(|o| {
                        let files = field(o, "files").and_then(Value::as_array).map_or(0, Vec::len);
                        format!("{}({files})", str_at(o, &["session"]).unwrap_or_default())
                    })
                    .collect();
                names.join(",")
            });
            let pr = field(status, "pullRequest").unwrap_or(&NULL);
            let pr = field(pr, "number").and_then(Value::as_u64).map(|n| match str_at(pr, &["state"]) {
                Some(state) => format!("#{n} {state}"),
                None => format!("#{n}"),
            });
            vec![
                name.into(),
                s(spec, &["project"]).unwrap_or_default().into(),
                s(status, &["effectiveAgent"]).or_else(|| agent(spec)).unwrap_or_else(none).into(),
                session_phase(meta, status).into(),
                s(status, &["workspace", "branch"]).or_else(|| s(spec, &["branch"])).unwrap_or_else(none).into(),
                created().into(),
                s(runtime, &["kind"]).or_else(|| s(spec, &["runtime"])).unwrap_or_else(none).into(),
                s(status, &["activity", "state"]).unwrap_or_else(none).into(),
                field(runtime, "restarts").and_then(Value::as_u64).unwrap_or(0).into(),
                pr.unwrap_or_else(none).into(),
                overlaps.unwrap_or_else(none).into(),
            ]
        }
        Kind::GitSource => {
            let ready = condition(status, "Ready");
            let cond = |k: &str| ready.and_then(|c| field(c, k)).and_then(Value::as_str).map(str::to_string);
            let suspended = field(spec, "suspend").and_then(Value::as_bool).unwrap_or(false);
            vec![
                name.into(),
                s(status, &["lastAppliedRevision"]).map(|r| short_revision(&r)).unwrap_or_else(none).into(),
                suspended.to_string().into(),
                cond("status").unwrap_or_else(|| "Unknown".into()).into(),
                cond("message").unwrap_or_default().into(),
                created().into(),
                s(spec, &["url"]).unwrap_or_default().into(),
                s(spec, &["path"]).unwrap_or_else(|| "./".into()).into(),
                field(status, "inventory").and_then(Value::as_array).map_or(0, Vec::len).into(),
                s(status, &["lastAttemptedRevision"]).map(|r| short_revision(&r)).unwrap_or_else(none).into(),
            ]
        }
        Kind::IssueSource => {
            let ready = condition(status, "Ready");
            let cond = |k: &str| ready.and_then(|c| field(c, k)).and_then(Value::as_str).map(str::to_string);
            let labels = at(spec, &["github", "labels"])
                .and_then(Value::as_array)
                .map(|l| l.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","));
            let open = field(status, "sessions")
                .and_then(Value::as_array)
                .map_or(0, |l| l.iter().filter(|x| str_at(x, &["state"]).unwrap_or("open") == "open").count());
            let sessions = match field(spec, "maxSessions").and_then(Value::as_u64) {
                Some(max) => format!("{open}/{max}"),
                None => open.to_string(),
            };
            vec![
                name.into(),
                s(spec, &["project"]).unwrap_or_default().into(),
                labels.filter(|l| !l.is_empty()).unwrap_or_else(none).into(),
                sessions.into(),
                field(status, "waiting").and_then(Value::as_array).map_or(0, Vec::len).into(),
                cond("status").unwrap_or_else(|| "Unknown".into()).into(),
                created().into(),
                s(spec, &["onClose"]).unwrap_or_else(|| "stop".into()).into(),
                time_at(status, &["lastPollTime"]).map(|t| age(Some(t), now)).unwrap_or_else(none).into(),
                cond("reason").unwrap_or_else(none).into(),
            ]
        }
        Kind::Event => {
            let kind = s(o, &["involvedObject", "kind"]);
            let involved = match (kind.as_deref().and_then(Kind::parse), s(o, &["involvedObject", "name"])) {
                (Some(k), Some(n)) => reference(k.as_str(), &n),
                (None, Some(n)) => reference(kind.as_deref().unwrap_or_default(), &n),
                _ => none(),
            };
            vec![
                age(time_at(o, &["lastTimestamp"]), now).into(),
                s(o, &["type"]).unwrap_or_default().into(),
                s(o, &["reason"]).unwrap_or_default().into(),
                involved.into(),
                s(o, &["message"]).unwrap_or_default().into(),
                s(o, &["source"]).unwrap_or_default().into(),
                age(time_at(o, &["firstTimestamp"]), now).into(),
                field(o, "count").and_then(Value::as_u64).unwrap_or(1).into(),
                name.into(),
            ]
        }
    };
    debug_assert_eq!(cells.len(), columns(kind).len());
    cells
}

/// What a row carries of its object.
fn row_object(o: &Value, include: IncludeObject) -> Option<Value> {
    match include {
        IncludeObject::None => None,
        IncludeObject::Object => Some(o.clone()),
        IncludeObject::Metadata => {
            let mut partial = Map::new();
            partial.insert("kind".into(), "PartialObjectMetadata".into());
            partial.insert("apiVersion".into(), TABLE_API_VERSION.into());
            partial.insert("metadata".into(), o.get("metadata").cloned().unwrap_or_else(|| json!({})));
            Some(Value::Object(partial))
        }
    }
}

/// The table of `objects`, current at `resource_version`, with ages as of `now`. Projects and
/// sessions keep the order given (the store's: by name); events are ordered as they happened
/// (by `lastTimestamp`, then name).
pub fn table<'a>(
    kind: Kind,
    objects: impl IntoIterator<Item = &'a Value>,
    resource_version: &str,
    now: DateTime<Utc>,
    include: IncludeObject,
) -> Table {
    let mut objects: Vec<&Value> = objects.into_iter().collect();
    if kind == Kind::Event {
        objects.sort_by_cached_key(|e| {
            (time_at(e, &["lastTimestamp"]), str_at(e, &["metadata", "name"]).unwrap_or_default().to_string())
        });
    }
    Table {
        api_version: TABLE_API_VERSION.into(),
        kind: "Table".into(),
        metadata: TableMeta { resource_version: resource_version.into() },
        column_definitions: columns(kind),
        rows: objects
            .into_iter()
            .map(|o| TableRow { cells: cells(kind, o, now), object: row_object(o, include) })
            .collect(),
    }
}

/// Whether an `Accept` header asks for a table: the first media range the server can answer
/// decides, so `application/json` before the table form means a list.
pub fn accepts_table(accept: &str) -> bool {
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        if !matches!(media.as_str(), "application/json" | "application/*" | "*/*") {
            continue;
        }
        let (mut as_, mut g, mut v) = (None, None, None);
        for p in parts {
            match p.split_once('=').map(|(k, v)| (k.trim(), v.trim().trim_matches('"'))) {
                Some(("as", x)) => as_ = Some(x),
                Some(("g", x)) => g = Some(x),
                Some(("v", x)) => v = Some(x),
                _ => {}
            }
        }
        match as_ {
            None => return false,
            Some("Table") if media == "application/json" && g == Some("meta.k8s.io") && v == Some("v1") => return true,
            // A form this server does not produce (another version, another shape): try the next.
            Some(_) => continue,
        }
    }
    false
}

/// The age of a timestamp, or `<unknown>`.
pub fn age(since: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match since {
        Some(t) => human_duration(now.signed_duration_since(t)),
        None => "<unknown>".into(),
    }
}

/// kubectl's `HumanDuration`: exact for short spans, coarser as they grow.
pub fn human_duration(d: TimeDelta) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: i64) -> String {
        human_duration(TimeDelta::seconds(n))
    }

    fn names(kind: Kind, priority: i32) -> Vec<String> {
        columns(kind).into_iter().filter(|c| c.priority <= priority).map(|c| c.name.to_ascii_uppercase()).collect()
    }

    #[test]
    fn ages_like_kubectl() {
        assert_eq!(s(-5), "<invalid>");
        assert_eq!(s(0), "0s");
        assert_eq!(s(45), "45s");
        assert_eq!(s(119), "119s");
        assert_eq!(s(120), "2m");
        assert_eq!(s(3 * 60 + 12), "3m12s");
        assert_eq!(s(10 * 60 + 5), "10m");
        assert_eq!(s(179 * 60), "179m");
        assert_eq!(s(3 * 3600 + 60 * 30), "3h30m");
        assert_eq!(s(5 * 3600), "5h");
        assert_eq!(s(47 * 3600), "47h");
        assert_eq!(s(2 * 86400), "2d");
        assert_eq!(s(3 * 86400 + 4 * 3600), "3d4h");
        assert_eq!(s(100 * 86400), "100d");
        assert_eq!(s(800 * 86400), "2y70d");
        assert_eq!(s(9 * 365 * 86400), "9y");
        assert_eq!(age(None, Utc::now()), "<unknown>");
    }

    /// The columns `aoctl get` has always printed, plain and `-o wide`.
    #[test]
    fn columns_of_every_kind() {
        assert_eq!(names(Kind::Project, 0), ["NAME", "PATH", "BRANCH", "READY", "AGE"]);
        assert_eq!(names(Kind::Project, 1)[5..], ["REPO", "REASON"]);
        assert_eq!(names(Kind::Session, 0), ["NAME", "PROJECT", "AGENT", "PHASE", "BRANCH", "AGE"]);
        assert_eq!(names(Kind::Session, 1)[6..], ["RUNTIME", "ACTIVITY", "RESTARTS", "PR", "OVERLAPS"]);
        assert_eq!(names(Kind::GitSource, 0), ["NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE", "AGE"]);
        assert_eq!(names(Kind::IssueSource, 0), ["NAME", "PROJECT", "LABELS", "SESSIONS", "WAITING", "READY", "AGE"]);
        assert_eq!(names(Kind::Event, 0), ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
        assert_eq!(names(Kind::Event, 1)[5..], ["SOURCE", "FIRST SEEN", "COUNT", "NAME"]);
        for kind in Kind::ALL {
            let cols = columns(kind);
            // The wide columns come last, so a plain table is a prefix of the wide one.
            assert!(cols.windows(2).all(|w| w[0].priority <= w[1].priority), "{kind:?}");
            assert_eq!(cols.iter().filter(|c| c.format == "name").count(), 1, "{kind:?}");
            assert_eq!(cells(kind, &json!({}), Utc::now()).len(), cols.len(), "{kind:?}");
        }
    }

    #[test]
    fn session_cells() {
        let now = Utc::now();
        let created = (now - TimeDelta::seconds(45)).to_rfc3339();
        let s = json!({"kind": "Session", "metadata": {"name": "fix", "creationTimestamp": created},
            "spec": {"project": "demo", "agent": "aider", "branch": "demo/fix"},
            "status": {"phase": "Working", "workspace": {"path": "/w", "branch": "demo/fix-2"},
                "runtime": {"kind": "tmux", "handle": "h", "restarts": 2},
                "pullRequest": {"number": 7, "url": "u", "state": "open", "checks": "none", "review": "none"},
                "overlaps": [{"session": "other-1", "files": ["a.rs", "b.rs"]}, {"session": "z", "files": ["a.rs"]}]}});
        assert_eq!(
            cells(Kind::Session, &s, now),
            [
                json!("fix"),
                json!("demo"),
                json!("aider"),
                json!("Working"),
                json!("demo/fix-2"),
                json!("45s"),
                json!("tmux"),
                json!("<none>"),
                json!(2),
                json!("#7 open"),
                json!("other-1(2),z(1)")
            ]
        );
        let pending = json!({"metadata": {"name": "new", "deletionTimestamp": created},
            "spec": {"project": "demo", "agent": {"command": ["./bot", "{prompt}"]}, "runtime": "process"}});
        let c = cells(Kind::Session, &pending, now);
        assert_eq!(c[2..5], [json!("custom:./bot"), json!("Terminating"), json!("<none>")]);
        assert_eq!(c[5], "<unknown>");
        assert_eq!(c[6..], [json!("process"), json!("<none>"), json!(0), json!("<none>"), json!("<none>")]);
    }

    #[test]
    fn project_and_event_cells() {
        let now = Utc::now();
        let p = json!({"metadata": {"name": "demo"}, "spec": {"path": "/src/demo", "repo": "a/b"},
            "status": {"defaultBranch": "main", "conditions": [{"type": "Ready", "status": "False", "reason": "NotAGitRepository"}]}});
        assert_eq!(
            cells(Kind::Project, &p, now),
            ["demo", "/src/demo", "main", "False", "<unknown>", "a/b", "NotAGitRepository"]
        );
        let e = json!({"metadata": {"name": "fix.1"}, "involvedObject": {"kind": "Session", "name": "fix"},
            "type": "Normal", "reason": "Started", "message": "agent started", "count": 3});
        assert_eq!(
            cells(Kind::Event, &e, now),
            [
                json!("<unknown>"),
                json!("Normal"),
                json!("Started"),
                json!("session/fix"),
                json!("agent started"),
                json!(""),
                json!("<unknown>"),
                json!(3),
                json!("fix.1")
            ]
        );
        let odd = json!({"involvedObject": {"kind": "Widget", "name": "w"}});
        assert_eq!(cells(Kind::Event, &odd, now)[3], "widget/w");
    }

    #[test]
    fn source_cells() {
        let now = Utc::now();
        let id = "0123456789abcdef0123456789abcdef01234567";
        let g = json!({"metadata": {"name": "fleet"}, "spec": {"url": "/srv/fleet.git", "path": "sessions"},
            "status": {"lastAppliedRevision": format!("main@sha1:{id}"), "lastAttemptedRevision": format!("main@sha1:{id}"),
                "inventory": [{"kind": "Session", "name": "a"}, {"kind": "Session", "name": "b"}],
                "conditions": [{"type": "Ready", "status": "True", "reason": "Applied", "message": "applied 2 objects"}]}});
        assert_eq!(
            cells(Kind::GitSource, &g, now),
            [
                json!("fleet"),
                json!("main@sha1:0123456789ab"),
                json!("false"),
                json!("True"),
                json!("applied 2 objects"),
                json!("<unknown>"),
                json!("/srv/fleet.git"),
                json!("sessions"),
                json!(2),
                json!("main@sha1:0123456789ab")
            ]
        );
        let i = json!({"metadata": {"name": "bugs"}, "spec": {"project": "demo", "github": {"labels": ["agent", "bug"]}, "maxSessions": 2},
            "status": {"sessions": [{"issue": "1", "session": "bugs-1", "state": "open"}, {"issue": "2", "session": "bugs-2", "state": "closed"}],
                "waiting": ["3", "4"]}});
        assert_eq!(
            cells(Kind::IssueSource, &i, now)[..6],
            [json!("bugs"), json!("demo"), json!("agent,bug"), json!("1/2"), json!(2), json!("Unknown")]
        );
    }

    #[test]
    fn tables_order_events_and_carry_what_was_asked() {
        let now = Utc::now();
        let events = [
            json!({"metadata": {"name": "b"}, "lastTimestamp": "2024-01-02T00:00:00Z"}),
            json!({"metadata": {"name": "a"}, "lastTimestamp": "2024-01-03T00:00:00Z"}),
        ];
        let t = table(Kind::Event, &events, "9", now, IncludeObject::None);
        let names: Vec<&Value> = t.rows.iter().map(|r| &r.cells[8]).collect();
        assert_eq!(names, ["b", "a"]);
        assert!(t.rows.iter().all(|r| r.object.is_none()));
        let t = table(Kind::Session, events.iter().rev(), "9", now, IncludeObject::Metadata);
        let names: Vec<&Value> = t.rows.iter().map(|r| &r.cells[0]).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            t.rows[0].object,
            Some(json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a"}}))
        );
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["kind"], "Table");
        assert_eq!(v["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(v["metadata"], json!({"resourceVersion": "9"}));
        assert_eq!(
            v["columnDefinitions"][0],
            json!({"name": "Name", "type": "string", "format": "name",
            "description": "metadata.name", "priority": 0})
        );
        assert_eq!(serde_json::from_value::<Table>(v).unwrap(), t);
        let t = table(Kind::Project, [&events[0]], "", now, IncludeObject::Object);
        assert_eq!(t.rows[0].object.as_ref(), Some(&events[0]));
        assert_eq!(IncludeObject::parse("None"), Some(IncludeObject::None));
        assert_eq!(IncludeObject::parse("none"), None);
    }

    #[test]
    fn accept_headers() {
        assert!(accepts_table(TABLE_MEDIA_TYPE));
        assert!(accepts_table("application/json;as=Table;v=v1;g=meta.k8s.io, application/json"));
        assert!(accepts_table("application/json; as=Table; g=meta.k8s.io; v=v1"));
        assert!(accepts_table(
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io"
        ));
        assert!(!accepts_table("application/json"));
        assert!(!accepts_table("application/json, application/json;as=Table;v=v1;g=meta.k8s.io"));
        assert!(!accepts_table("*/*"));
        assert!(!accepts_table(""));
        assert!(!accepts_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io"));
        assert!(!accepts_table("application/yaml;as=Table;v=v1;g=meta.k8s.io"));
        assert!(!accepts_table("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"));
    }
}
