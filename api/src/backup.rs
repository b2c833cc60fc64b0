//! The backup file that `GET /apis/ao.dev/v1alpha1/backup` (`aoctl backup`) writes and `aoctl
//! restore` reads: JSON lines, a [`Header`] first, then every stored object, one a line, as the
//! store holds it (metadata with uid and resourceVersion, spec and status). [`parse`] checks a
//! whole file: the header, each object decoded and validated as the API decodes a body, no object
//! twice, and as many objects as the header announced, so a cut file is refused.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::decode::{decode_json, AnyObject, DecodeError};
use crate::event::Event;
use crate::meta::{Kind, Time};
use crate::validate::Validate;

/// `format` of a backup's header; a reader refuses any other.
pub const FORMAT: &str = "ao.dev/backup/v1";
/// The media type the backup endpoint answers with: one JSON document a line.
pub const MEDIA_TYPE: &str = "application/jsonl";

/// The first line of a backup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// The store the snapshot was taken from: `sled` or `etcd`.
    pub backend: String,
    /// The resourceVersion the snapshot was taken at: every object is as it stood then.
    pub resource_version: String,
    /// When the snapshot was taken.
    pub time: Time,
    /// How many object lines follow.
    pub objects: u64,
    /// The version of the server that took it.
    pub server_version: String,
}

impl Header {
    /// The header of a snapshot of `objects` objects at `resource_version`.
    pub fn new(backend: &str, resource_version: u64, time: Time, objects: u64, server_version: &str) -> Header {
        Header {
            format: FORMAT.to_string(),
            backend: backend.to_string(),
            resource_version: resource_version.to_string(),
            time,
            objects,
            server_version: server_version.to_string(),
        }
    }

    /// The header as its line, with the newline.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).expect("headers serialise");
        line.push(b'\n');
        line
    }

    /// The resourceVersion as a number.
    pub fn resource_version(&self) -> u64 {
        self.resource_version.parse().unwrap_or(0)
    }
}

/// One object of a backup, decoded and validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub kind: Kind,
    /// The object as the file holds it, which is as the store held it.
    pub object: Value,
}

impl Entry {
    pub fn name(&self) -> &str {
        self.object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
    }

    /// `metadata.resourceVersion` as a number.
    pub fn resource_version(&self) -> u64 {
        self.object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }
}

/// A whole backup file, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Backup {
    pub header: Header,
    pub objects: Vec<Entry>,
}

fn error(source: &str, line: usize, column: Option<usize>, field: Option<String>, message: String) -> DecodeError {
    DecodeError { source: source.to_string(), line: Some(line), column, field, message }
}

/// Reads the header line (line 1 of `source`).
pub fn parse_header(source: &str, line: &str) -> Result<Header, DecodeError> {
    let not_ours = |why: String| {
        error(source, 1, None, None, format!("not an aoctl backup (its first line must be the backup's header): {why}"))
    };
    let value: Value = serde_json::from_str(line).map_err(|e| not_ours(e.to_string()))?;
    match value.get("format").and_then(Value::as_str) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(error(
                source,
                1,
                None,
                Some("format".into()),
                format!("unknown backup format `{other}`; this aoctl reads `{FORMAT}`"),
            ))
        }
        None => return Err(not_ours("it has no `format`".into())),
    }
    let header: Header =
        decode_json(line.as_bytes()).map_err(|e| DecodeError { source: source.to_string(), line: Some(1), ..e })?;
    if header.resource_version.parse::<u64>().is_err() {
        return Err(error(
            source,
            1,
            None,
            Some("resourceVersion".into()),
            format!("`{}` is not a resourceVersion", header.resource_version),
        ));
    }
    Ok(header)
}

/// Reads line `number` of `source`: one stored object, decoded strictly and validated as the API
/// decodes a request body, with its name, uid and resourceVersion as the store sets them.
pub fn parse_object(source: &str, number: usize, line: &str) -> Result<Entry, DecodeError> {
    let at = |field: Option<&str>, message: String| error(source, number, None, field.map(str::to_string), message);
    let object: Value =
        serde_json::from_str(line).map_err(|e| error(source, number, Some(e.column()), None, e.to_string()))?;
    let kind_name = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    let kind = Kind::ALL
        .into_iter()
        .find(|k| k.as_str() == kind_name)
        .ok_or_else(|| at(Some("kind"), format!("unknown kind `{kind_name}`")))?;
    let located = |e: DecodeError| DecodeError { source: source.to_string(), line: Some(number), ..e };
    let errors = match AnyObject::decode_json(kind, line.as_bytes()) {
        Some(decoded) => decoded.map_err(located)?.validate(),
        None => decode_json::<Event>(line.as_bytes()).map_err(located)?.validate(),
    };
    if let Some(e) = errors.into_iter().next() {
        return Err(at(Some(&e.field), e.message));
    }
    let entry = Entry { kind, object };
    for field in ["name", "uid"] {
        let present = entry.object.pointer(&format!("/metadata/{field}")).and_then(Value::as_str);
        if present.is_none_or(str::is_empty) {
            return Err(at(Some(&format!("metadata.{field}")), "a stored object has one; this one has none".into()));
        }
    }
    if entry.resource_version() == 0 {
        return Err(at(Some("metadata.resourceVersion"), "a stored object has one; this one has none".into()));
    }
    Ok(entry)
}

/// Reads and checks a whole backup; the error names the line that is wrong.
pub fn parse(source: &str, text: &str) -> Result<Backup, DecodeError> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l)).filter(|(_, l)| !l.trim().is_empty());
    let header = match lines.next() {
        Some((1, line)) => parse_header(source, line)?,
        _ => return Err(error(source, 1, None, None, "empty, or not an aoctl backup: the header is missing".into())),
    };
    let mut objects = Vec::new();
    let mut seen = BTreeSet::new();
    for (number, line) in lines {
        let entry = parse_object(source, number, line)?;
        if !seen.insert((entry.kind, entry.name().to_string())) {
            return Err(error(
                source,
                number,
                None,
                None,
                format!("{} `{}` is in the backup twice", entry.kind.as_str(), entry.name()),
            ));
        }
        objects.push(entry);
    }
    if objects.len() as u64 != header.objects {
        let last = text.lines().count();
        return Err(error(
            source,
            last,
            None,
            None,
            format!(
                "the backup is incomplete: its header announces {} objects, and it ends after {}",
                header.objects,
                objects.len()
            ),
        ));
    }
    Ok(Backup { header, objects })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn header(objects: u64) -> String {
        let h = Header::new("sled", 12, Time::from_unix(1_700_000_000), objects, "0.1.0");
        String::from_utf8(h.to_line()).unwrap()
    }

    fn project(name: &str, rv: u64) -> Value {
        json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": rv.to_string(),
                "generation": 1, "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"path": "/src/app"},
            "status": {"observedGeneration": 1}})
    }

    fn file(header: &str, objects: &[Value]) -> String {
        let mut text = header.to_string();
        for o in objects {
            text.push_str(&o.to_string());
            text.push('\n');
        }
        text
    }

    #[test]
    fn a_backup_reads_back_as_written() {
        let objects = [project("a", 3), project("b", 7)];
        let backup = parse("b.jsonl", &file(&header(2), &objects)).unwrap();
        assert_eq!(backup.header.resource_version(), 12);
        assert_eq!(backup.header.backend, "sled");
        assert_eq!(backup.objects.len(), 2);
        assert_eq!(backup.objects[1].object, objects[1], "objects are kept as the file has them");
        let b = &backup.objects[1];
        assert_eq!((b.kind, b.name(), b.resource_version()), (Kind::Project, "b", 7));
    }

    #[test]
    fn a_cut_file_is_refused() {
        let e = parse("b.jsonl", &file(&header(3), &[project("a", 3), project("b", 7)])).unwrap_err();
        assert!(e.to_string().contains("announces 3 objects, and it ends after 2"), "{e}");
        let e = parse("b.jsonl", "").unwrap_err();
        assert!(e.to_string().starts_with("b.jsonl:1: "), "{e}");
    }

    #[test]
    fn errors_name_the_line() {
        let mut bad = project("b", 7);
        bad["spec"]["pathh"] = json!("/x");
        let e = parse("b.jsonl", &file(&header(2), &[project("a", 3), bad])).unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.to_string().contains("pathh"), "{e}");

        let text = format!("{}{}\n{{not json\n", header(2), project("a", 3));
        let e = parse("b.jsonl", &text).unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");

        let mut invalid = project("a", 7);
        invalid["metadata"]["name"] = json!("Not A Name");
        let e = parse("b.jsonl", &file(&header(1), &[invalid])).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.field.as_deref().is_some_and(|f| f.contains("name")), "{e}");

        let mut unversioned = project("a", 3);
        unversioned["metadata"].as_object_mut().unwrap().remove("resourceVersion");
        let e = parse("b.jsonl", &file(&header(1), &[unversioned])).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("metadata.resourceVersion"), "{e}");

        let e = parse("b.jsonl", &file(&header(2), &[project("a", 3), project("a", 4)])).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");

        let mut pod = project("a", 3);
        pod["kind"] = json!("Pod");
        let e = parse("b.jsonl", &file(&header(1), &[pod])).unwrap_err();
        assert!(e.to_string().contains("unknown kind `Pod`"), "{e}");
    }

    #[test]
    fn headers_of_other_files_are_refused() {
        let e = parse("b.jsonl", &file("{\"kind\": \"Project\"}\n", &[])).unwrap_err();
        assert!(e.to_string().contains("not an aoctl backup"), "{e}");
        let newer = header(0).replace(FORMAT, "ao.dev/backup/v9");
        let e = parse("b.jsonl", &newer).unwrap_err();
        assert!(e.to_string().contains("unknown backup format `ao.dev/backup/v9`"), "{e}");
        let e = parse("b.jsonl", "apiVersion: v1\n").unwrap_err();
        assert_eq!(e.line, Some(1));
    }

    #[test]
    fn events_are_checked_as_events() {
        let event = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Event",
            "metadata": {"name": "fix-x7k2p", "uid": "u1", "resourceVersion": "9"},
            "involvedObject": {"kind": "Session", "name": "fix"}, "reason": "Started", "message": "m",
            "type": "Normal", "count": 1,
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z"});
        let backup = parse("b.jsonl", &file(&header(1), std::slice::from_ref(&event))).unwrap();
        assert_eq!(backup.objects[0].kind, Kind::Event);
        let mut bad = event;
        bad["spec"] = json!({});
        let e = parse("b.jsonl", &file(&header(1), &[bad])).unwrap_err();
        assert!(e.to_string().contains("spec"), "an Event has no spec: {e}");
    }
}
