//! Decoding manifests (multi-document YAML) and request bodies (JSON) into typed objects, with
//! errors that name the source, line, column and field, and suggest the closest known name.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::gitsource::GitSource;
use crate::issuesource::IssueSource;
use crate::meta::{Kind, ObjectMeta, Resource};
use crate::project::Project;
use crate::session::Session;
use crate::validate::{FieldError, Validate};

/// A decoded object of a kind users write.
// Made once per decoded document and taken apart at once: the sizes of the kinds do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum AnyObject {
    Project(Project),
    Session(Session),
    GitSource(GitSource),
    IssueSource(IssueSource),
}

/// Runs `$body` with `$o` bound to the typed object, whatever its kind.
macro_rules! each_kind {
    ($any:expr, $o:ident => $body:expr) => {
        match $any {
            AnyObject::Project($o) => $body,
            AnyObject::Session($o) => $body,
            AnyObject::GitSource($o) => $body,
            AnyObject::IssueSource($o) => $body,
        }
    };
}

impl AnyObject {
    pub fn kind(&self) -> Kind {
        match self {
            AnyObject::Project(_) => Kind::Project,
            AnyObject::Session(_) => Kind::Session,
            AnyObject::GitSource(_) => Kind::GitSource,
            AnyObject::IssueSource(_) => Kind::IssueSource,
        }
    }
    pub fn meta(&self) -> &ObjectMeta {
        each_kind!(self, o => &o.metadata)
    }
    pub fn meta_mut(&mut self) -> &mut ObjectMeta {
        each_kind!(self, o => &mut o.metadata)
    }
    pub fn to_value(&self) -> serde_json::Value {
        each_kind!(self, o => serde_json::to_value(o)).expect("typed objects serialise")
    }
    pub fn validate(&self) -> Vec<FieldError> {
        each_kind!(self, o => o.validate())
    }
    /// Decodes a JSON body of `kind` strictly (no validation); `None` for a kind users do not write.
    pub fn decode_json(kind: Kind, body: &[u8]) -> Option<Result<AnyObject, DecodeError>> {
        Some(match kind {
            Kind::Project => decode_json(body).map(AnyObject::Project),
            Kind::Session => decode_json(body).map(AnyObject::Session),
            Kind::GitSource => decode_json(body).map(AnyObject::GitSource),
            Kind::IssueSource => decode_json(body).map(AnyObject::IssueSource),
            Kind::Event => return None,
        })
    }
}

/// The kinds a manifest may hold.
pub const WRITABLE_KINDS: [&str; 4] = ["Project", "Session", "GitSource", "IssueSource"];

/// Where and why decoding failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// File name, `-` for standard input, or `request body`.
    pub source: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// Field path such as `spec.reactions.ci-failed.retries`.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        f.write_str(": ")?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for DecodeError {}

/// One document of a manifest stream.
#[derive(Clone, Debug)]
pub struct Decoded {
    pub object: AnyObject,
    /// 1-based line where the document starts.
    pub line: usize,
}

/// Splits a YAML stream at `---` / `...` markers; yields each document's first line (1-based) and text.
pub fn split_documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = vec![];
    let mut cur = String::new();
    let mut start = 1;
    for (i, line) in text.lines().enumerate() {
        let marker = line == "---" || line.starts_with("--- ") || line.starts_with("---\t") || line == "...";
        if marker {
            docs.push((start, std::mem::take(&mut cur)));
            start = i + 2;
            if let Some(rest) = line.strip_prefix("--- ") {
                // Content after the marker belongs to the new document, on the marker's line.
                start = i + 1;
                cur.push_str(rest);
                cur.push('\n');
            }
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
    }
    docs.push((start, cur));
    docs.into_iter()
        .filter(|(_, d)| d.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')))
        .collect()
}

/// Decodes and validates every document of a YAML (or JSON) manifest stream.
pub fn decode_manifests(source: &str, text: &str) -> Result<Vec<Decoded>, DecodeError> {
    let mut out = vec![];
    for (start, doc) in split_documents(text) {
        let object = decode_yaml_document(source, start, &doc)?;
        out.push(Decoded { object, line: start });
    }
    Ok(out)
}

fn decode_yaml_document(source: &str, start: usize, doc: &str) -> Result<AnyObject, DecodeError> {
    let at = |line: Option<usize>, column: Option<usize>, field: Option<String>, message: String| DecodeError {
        source: source.to_string(),
        line: line.map(|l| l + start - 1),
        column,
        field,
        message,
    };
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(doc).map_err(|e| {
        let loc = e.location();
        let mut msg = strip_location(&e.to_string());
        let line = loc.as_ref().and_then(|l| doc.lines().nth(l.line().saturating_sub(1)));
        if line.is_some_and(|l| l.trim_start_matches(' ').starts_with('\t')) {
            msg.push_str(" (YAML cannot be indented with tabs; use spaces)");
        }
        at(loc.as_ref().map(|l| l.line()), loc.as_ref().map(|l| l.column()), None, msg)
    })?;
    let map = value.as_mapping().ok_or_else(|| {
        at(Some(1), None, None, "a manifest must be a mapping with apiVersion, kind, metadata and spec".into())
    })?;
    let kind = match map.get("kind") {
        Some(serde_yaml_ng::Value::String(k)) => k.clone(),
        Some(_) => return Err(at(locate(doc, "kind"), None, Some("kind".into()), "must be a string".into())),
        None => {
            return Err(at(
                Some(1),
                None,
                Some("kind".into()),
                format!("is required: one of {}", WRITABLE_KINDS.join(", ")),
            ))
        }
    };
    let typed = |(l, c, f, m)| at(l, c, f, m);
    let object = match kind.as_str() {
        "Project" => AnyObject::Project(typed_yaml(doc).map_err(typed)?),
        "Session" => AnyObject::Session(typed_yaml(doc).map_err(typed)?),
        "GitSource" => AnyObject::GitSource(typed_yaml(doc).map_err(typed)?),
        "IssueSource" => AnyObject::IssueSource(typed_yaml(doc).map_err(typed)?),
        other => {
            let hint = suggest(other, &WRITABLE_KINDS).map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default();
            return Err(at(
                locate(doc, "kind"),
                None,
                Some("kind".into()),
                format!("unknown kind `{other}`{hint}; allowed: {}", WRITABLE_KINDS.join(", ")),
            ));
        }
    };
    if let Some(fe) = object.validate().into_iter().next() {
        return Err(at(locate_nearest(doc, &fe.field), None, Some(fe.field), fe.message));
    }
    Ok(object)
}

type Located = (Option<usize>, Option<usize>, Option<String>, String);

fn typed_yaml<T: DeserializeOwned>(doc: &str) -> Result<T, Located> {
    let de = serde_yaml_ng::Deserializer::from_str(doc);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = field_path(e.path());
        let inner = e.inner();
        let loc = inner.location();
        (
            loc.as_ref().map(|l| l.line()),
            loc.as_ref().map(|l| l.column()),
            path,
            humanize(&strip_location(&inner.to_string())),
        )
    })
}

/// Decodes a JSON request body into `T`, naming line, column and field on failure. No validation.
pub fn decode_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, DecodeError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let v: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = field_path(e.path());
        let inner = e.inner();
        DecodeError {
            source: "request body".into(),
            line: Some(inner.line()),
            column: Some(inner.column()),
            field: path,
            message: humanize(&strip_location(&inner.to_string())),
        }
    })?;
    de.end().map_err(|e| DecodeError {
        source: "request body".into(),
        line: Some(e.line()),
        column: Some(e.column()),
        field: None,
        message: "trailing characters after the JSON value".into(),
    })?;
    Ok(v)
}

/// Decodes and validates a JSON object of a typed kind.
pub fn decode_json_valid<T: DeserializeOwned + Validate>(body: &[u8]) -> Result<T, DecodeError> {
    let v: T = decode_json(body)?;
    if let Some(fe) = v.validate().into_iter().next() {
        return Err(DecodeError {
            source: "request body".into(),
            line: None,
            column: None,
            field: Some(fe.field),
            message: fe.message,
        });
    }
    Ok(v)
}

/// Renders a typed object as YAML the way `aoctl get -o yaml` shows it.
pub fn to_yaml<T: Serialize>(v: &T) -> String {
    serde_yaml_ng::to_string(v).expect("objects serialise to YAML")
}

/// Typed view of a JSON value of a known kind.
pub fn from_value<T: Resource>(v: serde_json::Value) -> Result<T, DecodeError> {
    serde_path_to_error::deserialize(v).map_err(|e| DecodeError {
        source: T::KIND.as_str().into(),
        line: None,
        column: None,
        field: field_path(e.path()),
        message: humanize(&e.inner().to_string()),
    })
}

fn field_path(p: &serde_path_to_error::Path) -> Option<String> {
    let s = p.to_string();
    (s != "." && !s.is_empty()).then_some(s)
}

/// Drops the ` at line L column C` suffix and the `path: ` prefix serde_yaml_ng adds: both are
/// reported in their own fields.
fn strip_location(msg: &str) -> String {
    // Every " at line L column C" goes, wherever it is: the location has its own fields.
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(i) = rest.find(" at line ") {
        out.push_str(&rest[..i]);
        let after = &rest[i + " at line ".len()..];
        let digits = |s: &str| s.chars().take_while(char::is_ascii_digit).count();
        let n = digits(after);
        let tail = &after[n..];
        match tail.strip_prefix(" column ") {
            Some(c) if n > 0 && digits(c) > 0 => rest = &c[digits(c)..],
            _ => {
                out.push_str(" at line ");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    let msg = out.as_str();
    match msg.split_once(": ") {
        Some((head, rest)) if !head.is_empty() && !head.contains([' ', '`']) => rest.to_string(),
        _ => msg.to_string(),
    }
}

/// Rewrites serde's unknown-field and unknown-variant messages with the closest known name.
pub fn humanize(msg: &str) -> String {
    for (prefix, what) in [("unknown field `", "field"), ("unknown variant `", "value")] {
        let Some(rest) = msg.strip_prefix(prefix) else { continue };
        let Some(end) = rest.find('`') else { continue };
        let got = &rest[..end];
        let tail = &rest[end + 1..];
        let known: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
        if known.is_empty() {
            return format!("unknown {what} `{got}`: no {what}s are allowed here");
        }
        let hint = suggest(got, &known).map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default();
        let label = if what == "field" { "known fields" } else { "allowed values" };
        return format!("unknown {what} `{got}`{hint}; {label}: {}", known.join(", "));
    }
    msg.to_string()
}

/// The closest candidate to `got`, if any is close enough to be a likely typo.
pub fn suggest<'a>(got: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = got.to_ascii_lowercase();
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(&lower, &c.to_ascii_lowercase()), *c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// The line of a field path, or of its nearest ancestor present in the document (a missing
/// required field is reported where it belongs).
pub fn locate_nearest(doc: &str, path: &str) -> Option<usize> {
    let mut p = path;
    loop {
        if let Some(line) = locate(doc, p) {
            return Some(line);
        }
        let cut = p.rfind(['.', '['])?;
        p = &p[..cut];
    }
}

/// Best-effort line (1-based, within `doc`) of a field path like `spec.notifiers[0].url`.
pub fn locate(doc: &str, path: &str) -> Option<usize> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut from = 0usize;
    let mut min_indent: isize = -1;
    let mut found = None;
    for seg in path.split('.') {
        let (key, index) = match seg.find('[') {
            Some(i) => (&seg[..i], seg[i + 1..].trim_end_matches(']').parse::<usize>().ok()),
            None => (seg, None),
        };
        let mut hit = None;
        for (i, line) in lines.iter().enumerate().skip(from) {
            let indent = (line.len() - line.trim_start().len()) as isize;
            let body = line.trim_start().trim_start_matches("- ");
            if !line.trim().is_empty() && !line.trim_start().starts_with('#') && indent <= min_indent && i > from {
                break;
            }
            if indent > min_indent || i == from {
                let quoted = [format!("{key}:"), format!("\"{key}\":"), format!("'{key}':")];
                if quoted.iter().any(|q| {
                    body.starts_with(q.as_str()) || line.contains(&format!("{{{q}")) || line.contains(&format!(", {q}"))
                }) {
                    hit = Some((i, indent));
                    break;
                }
            }
        }
        let (line, indent) = hit?;
        found = Some(line + 1);
        from = line;
        min_indent = indent;
        if let Some(n) = index {
            let items: Vec<usize> = lines
                .iter()
                .enumerate()
                .skip(line + 1)
                .take_while(|(_, l)| {
                    l.trim().is_empty()
                        || (l.len() - l.trim_start().len()) as isize > indent
                        || l.trim_start().starts_with("- ")
                })
                .filter(|(_, l)| l.trim_start().starts_with("- "))
                .map(|(i, _)| i)
                .collect();
            if let Some(&item) = items.get(n) {
                found = Some(item + 1);
                from = item;
                min_indent = (lines[item].len() - lines[item].trim_start().len()) as isize;
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "apiVersion: ao.dev/v1alpha1\nkind: Project\nmetadata:\n  name: demo\nspec:\n  path: /tmp/demo\n---\n# a session\napiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {name: fix-login}\nspec:\n  project: demo\n  prompt: hi\n";

    #[test]
    fn decodes_a_stream() {
        let docs = decode_manifests("m.yaml", GOOD).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].object.kind(), Kind::Project);
        assert_eq!(docs[1].line, 8);
        assert_eq!(docs[1].object.meta().name, "fix-login");
    }

    #[test]
    fn unknown_field_names_line_and_suggestion() {
        let text = GOOD.replace("  prompt: hi", "  promtp: hi");
        let e = decode_manifests("m.yaml", &text).unwrap_err();
        assert_eq!(e.line, Some(14), "{e}");
        assert_eq!(e.field.as_deref(), Some("spec.promtp"), "{e}");
        assert!(e.message.contains("did you mean `prompt`"), "{e}");
    }

    #[test]
    fn bad_enum_lists_values() {
        let text = GOOD.replace("  prompt: hi", "  runtime: tmuxx");
        let e = decode_manifests("m.yaml", &text).unwrap_err();
        assert!(e.message.contains("allowed values: tmux, process, docker"), "{e}");
        assert!(e.message.contains("did you mean `tmux`"), "{e}");
        assert_eq!(e.line, Some(14));
    }

    #[test]
    fn semantic_error_is_located() {
        let text = GOOD.replace("name: demo", "name: Demo_1");
        let e = decode_manifests("m.yaml", &text).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("metadata.name"));
        assert_eq!(e.line, Some(4), "{e}");
    }

    #[test]
    fn json_body_errors() {
        let e = decode_json::<Session>(br#"{"spec": {"project": "a", "stoped": true}}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("spec.stoped"));
        assert!(e.message.contains("did you mean `stopped`"), "{e}");
        let e =
            decode_json_valid::<Session>(br#"{"metadata":{"name":"x"},"spec": {"project": "a", "branch": "a..b"}}"#)
                .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("spec.branch"));
    }

    #[test]
    fn syntax_errors_name_the_place_once() {
        let e = decode_manifests("m.yaml", "kind: Project\nspec:\n\tpath: /x\n").unwrap_err();
        assert!(e.message.contains("tabs"), "{e}");
        assert!(!e.message.contains(" at line "), "{e}");
        assert_eq!(e.line, Some(3));
    }

    #[test]
    fn missing_fields_point_at_their_parent() {
        let doc = "spec:\n  notifiers:\n  - type: webhook\n";
        assert_eq!(locate(doc, "spec.notifiers[0].url"), None);
        assert_eq!(locate_nearest(doc, "spec.notifiers[0].url"), Some(3));
    }

    #[test]
    fn locate_in_lists() {
        let doc = "spec:\n  notifiers:\n  - type: webhook\n    url: x\n  - type: slack\n    url: y\n";
        assert_eq!(locate(doc, "spec.notifiers[1].url"), Some(6));
        assert_eq!(locate(doc, "spec.notifiers[0]"), Some(3));
    }
}
