//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`) of the kinds users write, made from the
//! same JSON Schemas as manifests/schema/ and committed under manifests/crds/ (and, identical, under
//! charts/aoctl/crds/). The schemas become *structural* OpenAPI v3 schemas: references inlined,
//! `null` branches turned into `nullable`, constants into enums, no `additionalProperties` beside
//! `properties`, and the metadata left to the apiserver.

use serde_json::{json, Map, Value};

use crate::gitsource::GitSource;
use crate::issuesource::IssueSource;
use crate::meta::Kind;
use crate::project::Project;
use crate::session::Session;
use crate::{GROUP, VERSION};

/// Why a JSON Schema could not be turned into a structural schema.
#[derive(Debug, thiserror::Error)]
#[error("{kind} schema at {path}: {message}")]
pub struct CrdError {
    /// The kind whose schema it is.
    pub kind: &'static str,
    /// Where in the schema, as a JSON pointer of schema keywords.
    pub path: String,
    pub message: String,
}

/// The kinds that get a CustomResourceDefinition: those users write (events are the server's own).
pub const KINDS: [Kind; 4] = [Kind::Project, Kind::Session, Kind::GitSource, Kind::IssueSource];

/// Definitions whose values may be written as a number or a string (a `Quantity` takes `512` as
/// well as `"512Mi"`), so their nodes carry `x-kubernetes-int-or-string`.
pub const INT_OR_STRING: &[&str] = &["Quantity"];

/// The keywords a converted node may carry; anything else in a source schema is an error, so a
/// new construct in the types is looked at before it reaches a CRD.
const PASSED_THROUGH: &[&str] = &[
    "description",
    "type",
    "format",
    "enum",
    "default",
    "minimum",
    "maximum",
    "pattern",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "required",
];

/// Formats the apiserver knows, kept as they are.
const KNOWN_FORMATS: &[&str] = &["int32", "int64", "float", "double", "date-time", "date", "byte", "uuid", "uri"];

/// An `aoctl get` column that is one field of the object, as a CRD printer column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrinterColumn {
    /// The column's name in `api::table::columns`.
    pub name: &'static str,
    /// `string`, `integer`, `boolean` or `date`.
    pub type_: &'static str,
    pub json_path: &'static str,
    /// 0: always shown; 1: shown with `-o wide` only (as in `aoctl get`).
    pub priority: i32,
    /// What the column shows, where it is less than `aoctl get`'s column of the same name
    /// (empty: the same, and described as there).
    pub description: &'static str,
}

const fn col(name: &'static str, type_: &'static str, json_path: &'static str, priority: i32) -> PrinterColumn {
    PrinterColumn { name, type_, json_path, priority, description: "" }
}

const fn col_said(
    name: &'static str,
    type_: &'static str,
    json_path: &'static str,
    description: &'static str,
) -> PrinterColumn {
    PrinterColumn { name, type_, json_path, priority: 0, description }
}

const READY: &str = ".status.conditions[?(@.type==\"Ready\")].status";
const READY_REASON: &str = ".status.conditions[?(@.type==\"Ready\")].reason";
const READY_MESSAGE: &str = ".status.conditions[?(@.type==\"Ready\")].message";
const AGE: &str = ".metadata.creationTimestamp";

/// The columns `kubectl get` prints for a kind: those of `aoctl get` that are a single field
/// (a cell aoctl computes from several fields, such as a session's overlaps, is left out).
pub fn printer_columns(kind: Kind) -> Vec<PrinterColumn> {
    match kind {
        Kind::Project => vec![
            col("Path", "string", ".spec.path", 0),
            col_said("Branch", "string", ".status.defaultBranch", "status.defaultBranch"),
            col("Ready", "string", READY, 0),
            col("Age", "date", AGE, 0),
            col("Repo", "string", ".spec.repo", 1),
            col("Reason", "string", READY_REASON, 1),
        ],
        Kind::Session => vec![
            col("Project", "string", ".spec.project", 0),
            col_said("Agent", "string", ".spec.agent", "spec.agent"),
            col("Phase", "string", ".status.phase", 0),
            col_said("Branch", "string", ".status.workspace.branch", "status.workspace.branch"),
            col("Age", "date", AGE, 0),
            col("Runtime", "string", ".status.runtime.kind", 1),
            col("Activity", "string", ".status.activity.state", 1),
            col("Restarts", "integer", ".status.runtime.restarts", 1),
            PrinterColumn {
                description: "status.pullRequest.url",
                ..col("PR", "string", ".status.pullRequest.url", 1)
            },
        ],
        Kind::GitSource => vec![
            col("Revision", "string", ".status.lastAppliedRevision", 0),
            col("Suspended", "boolean", ".spec.suspend", 0),
            col("Ready", "string", READY, 0),
            col("Message", "string", READY_MESSAGE, 0),
            col("Age", "date", AGE, 0),
            col("URL", "string", ".spec.url", 1),
            col("Path", "string", ".spec.path", 1),
            col("Attempted", "string", ".status.lastAttemptedRevision", 1),
        ],
        Kind::IssueSource => vec![
            col("Project", "string", ".spec.project", 0),
            col("Labels", "string", ".spec.github.labels", 0),
            col("Ready", "string", READY, 0),
            col("Age", "date", AGE, 0),
            col("On Close", "string", ".spec.onClose", 1),
            col("Last Poll", "date", ".status.lastPollTime", 1),
            col("Reason", "string", READY_REASON, 1),
        ],
        Kind::Event => vec![],
    }
}

/// The short names `aoctl` accepts for a kind (`Kind::parse`).
fn short_names(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Project => &["proj"],
        Kind::Session => &["sess"],
        Kind::GitSource => &["gs"],
        Kind::IssueSource => &["is"],
        Kind::Event => &[],
    }
}

/// The JSON Schema of a kind users write, as published under manifests/schema/.
pub fn json_schema(kind: Kind) -> Option<Value> {
    let schema = match kind {
        Kind::Project => schemars::schema_for!(Project),
        Kind::Session => schemars::schema_for!(Session),
        Kind::GitSource => schemars::schema_for!(GitSource),
        Kind::IssueSource => schemars::schema_for!(IssueSource),
        Kind::Event => return None,
    };
    Some(schema.to_value())
}

/// The structural `openAPIV3Schema` made from a kind's JSON Schema.
pub fn structural_schema(kind: Kind, schema: &Value) -> Result<Value, CrdError> {
    let cx = Convert { kind: kind.as_str(), defs: schema.get("$defs").and_then(Value::as_object) };
    let err = |path: &str, message: &str| cx.error(path, message);
    let props = schema.get("properties").and_then(Value::as_object).ok_or_else(|| err("", "has no properties"))?;
    let mut out = Map::new();
    for (name, node) in props {
        let converted = match name.as_str() {
            "apiVersion" | "kind" => json!({"type": "string"}),
            // The apiserver owns and validates metadata; a CRD may say no more than this.
            "metadata" => json!({"type": "object"}),
            _ => Value::Object(cx.node(node, &format!("/properties/{name}"), &mut Vec::new())?),
        };
        out.insert(name.clone(), converted);
    }
    let mut root = Map::new();
    if let Some(d) = schema.get("description") {
        root.insert("description".into(), d.clone());
    }
    root.insert("type".into(), "object".into());
    root.insert("properties".into(), Value::Object(out));
    if let Some(r) = schema.get("required") {
        root.insert("required".into(), r.clone());
    }
    Ok(Value::Object(root))
}

/// The CustomResourceDefinition of a kind users write.
pub fn crd(kind: Kind) -> Result<Value, CrdError> {
    let schema = json_schema(kind).ok_or_else(|| CrdError {
        kind: kind.as_str(),
        path: String::new(),
        message: "is not a kind users write".into(),
    })?;
    let columns: Vec<Value> = printer_columns(kind)
        .iter()
        .map(|c| {
            let description = match c.description {
                "" => crate::table::columns(kind)
                    .into_iter()
                    .find(|t| t.name == c.name)
                    .map(|t| t.description)
                    .unwrap_or_default(),
                said => said.to_string(),
            };
            let mut v = json!({"name": c.name, "type": c.type_, "jsonPath": c.json_path});
            if !description.is_empty() {
                v["description"] = description.into();
            }
            if c.priority != 0 {
                v["priority"] = c.priority.into();
            }
            v
        })
        .collect();
    let plural = kind.plural();
    Ok(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{plural}.{GROUP}"),
            "labels": {"app.kubernetes.io/part-of": "aoctl"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind.as_str(),
                "listKind": kind.list_kind(),
                "plural": plural,
                "singular": kind.as_str().to_ascii_lowercase(),
                "shortNames": short_names(kind),
                "categories": ["aoctl"],
            },
            "scope": "Namespaced",
            "versions": [{
                "name": VERSION,
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": structural_schema(kind, &schema)?},
            }],
        },
    }))
}

/// `(file name, YAML)` of every CRD, as committed under manifests/crds/.
pub fn crds() -> Result<Vec<(String, String)>, CrdError> {
    KINDS
        .iter()
        .map(|&kind| {
            let yaml = serde_yaml_ng::to_string(&crd(kind)?).expect("a JSON value serialises as YAML");
            let header = format!(
                "# The CustomResourceDefinition of aoctl's {} kind, generated from the api types by `make schema`;\n# do not edit.\n",
                kind.as_str()
            );
            Ok((format!("{}.yaml", kind.plural()), header + &yaml))
        })
        .collect()
}

struct Convert<'a> {
    kind: &'static str,
    defs: Option<&'a Map<String, Value>>,
}

impl Convert<'_> {
    fn error(&self, path: &str, message: &str) -> CrdError {
        CrdError { kind: self.kind, path: path.to_string(), message: message.to_string() }
    }

    /// Converts one schema node; `stack` holds the definitions being inlined, to refuse a cycle.
    fn node(&self, node: &Value, path: &str, stack: &mut Vec<String>) -> Result<Map<String, Value>, CrdError> {
        let obj = match node {
            Value::Bool(true) => return Ok(free_form()),
            Value::Object(o) => o,
            _ => return Err(self.error(path, "is not a schema object")),
        };
        if obj.is_empty() {
            return Ok(free_form());
        }
        // A reference: the definition inlined, with the referring node's own keywords over it.
        if let Some(r) = obj.get("$ref") {
            let r = r.as_str().unwrap_or_default();
            let name =
                r.strip_prefix("#/$defs/").ok_or_else(|| self.error(path, &format!("unknown reference `{r}`")))?;
            let def = self
                .defs
                .and_then(|d| d.get(name))
                .ok_or_else(|| self.error(path, &format!("reference to a missing definition `{name}`")))?;
            if stack.iter().any(|s| s == name) {
                return Err(self.error(path, &format!("`{name}` refers to itself; a structural schema cannot")));
            }
            stack.push(name.to_string());
            let mut out = self.node(def, &format!("{path}/$ref({name})"), stack)?;
            stack.pop();
            if INT_OR_STRING.contains(&name) {
                out = int_or_string(out);
            }
            let mut rest = obj.clone();
            rest.remove("$ref");
            for (k, v) in self.node_keywords(&rest, path, stack)? {
                out.insert(k, v);
            }
            return Ok(out);
        }
        self.node_keywords(obj, path, stack)
    }

    fn node_keywords(
        &self,
        obj: &Map<String, Value>,
        path: &str,
        stack: &mut Vec<String>,
    ) -> Result<Map<String, Value>, CrdError> {
        let mut out = Map::new();
        for (k, v) in obj {
            match k.as_str() {
                // Annotations of JSON Schema with no place (or no use) in a CRD.
                "$schema" | "title" | "examples" | "$defs" => {}
                "type" => match v {
                    Value::String(_) => {
                        out.insert("type".into(), v.clone());
                    }
                    Value::Array(types) => {
                        let named: Vec<&Value> = types.iter().filter(|t| t.as_str() != Some("null")).collect();
                        if named.len() != 1 {
                            return Err(self.error(path, &format!("takes several types {v}")));
                        }
                        out.insert("type".into(), named[0].clone());
                        if named.len() < types.len() {
                            out.insert("nullable".into(), true.into());
                        }
                    }
                    _ => return Err(self.error(path, "has a type that is neither a name nor a list")),
                },
                "const" => {
                    out.insert("enum".into(), json!([v]));
                }
                "format" => {
                    let f = v.as_str().unwrap_or_default();
                    let (format, max) = match f {
                        "uint8" => ("int32", Some(u64::from(u8::MAX))),
                        "uint16" => ("int32", Some(u64::from(u16::MAX))),
                        "uint32" => ("int64", Some(u64::from(u32::MAX))),
                        // The apiserver's integers are 64-bit signed; the minimum below says unsigned.
                        "uint64" | "uint" => ("int64", None),
                        "int8" | "int16" => ("int32", None),
                        f if KNOWN_FORMATS.contains(&f) => (f, None),
                        _ => return Err(self.error(path, &format!("has the format `{f}` the apiserver does not know"))),
                    };
                    out.insert("format".into(), format.into());
                    if f.starts_with("uint") {
                        out.entry("minimum").or_insert(0.into());
                        if let Some(max) = max {
                            out.insert("maximum".into(), max.into());
                        }
                    }
                }
                "properties" => {
                    let props =
                        v.as_object().ok_or_else(|| self.error(path, "has properties that are not an object"))?;
                    let mut converted = Map::new();
                    for (name, p) in props {
                        converted.insert(
                            name.clone(),
                            Value::Object(self.node(p, &format!("{path}/properties/{name}"), stack)?),
                        );
                    }
                    out.insert("properties".into(), Value::Object(converted));
                }
                "additionalProperties" => {
                    if obj.contains_key("properties") {
                        // aoctl refuses unknown fields; the apiserver prunes them, which a
                        // structural schema cannot say otherwise beside `properties`.
                        if v.is_object() {
                            return Err(self.error(path, "has a schema for additionalProperties beside properties"));
                        }
                        continue;
                    }
                    match v {
                        Value::Bool(false) => {}
                        Value::Bool(true) => {
                            out.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
                        }
                        _ => {
                            let items = self.node(v, &format!("{path}/additionalProperties"), stack)?;
                            out.insert("additionalProperties".into(), Value::Object(items));
                        }
                    }
                }
                "items" => {
                    let items = self.node(v, &format!("{path}/items"), stack)?;
                    out.insert("items".into(), Value::Object(items));
                }
                "anyOf" | "oneOf" => {
                    let branches = v.as_array().ok_or_else(|| self.error(path, &format!("{k} is not a list")))?;
                    for (key, value) in self.alternatives(branches, &format!("{path}/{k}"), stack)? {
                        if key == "description" && out.contains_key("description") {
                            continue;
                        }
                        out.insert(key, value);
                    }
                }
                k if PASSED_THROUGH.contains(&k) => {
                    out.insert(k.to_string(), v.clone());
                }
                _ => return Err(self.error(path, &format!("has the keyword `{k}`, which has no conversion"))),
            }
        }
        if out.get("type").and_then(Value::as_str) == Some("object")
            && !out.contains_key("properties")
            && !out.contains_key("additionalProperties")
            && !out.contains_key("x-kubernetes-preserve-unknown-fields")
        {
            // An object with no declared fields keeps what it is given.
            out.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
        }
        Ok(out)
    }

    /// `anyOf` / `oneOf`: a value or null (`nullable`), constants of one type (an `enum`), or
    /// values of different shapes (kept as free-form JSON, which aoctl's own decoding checks).
    fn alternatives(
        &self,
        branches: &[Value],
        path: &str,
        stack: &mut Vec<String>,
    ) -> Result<Map<String, Value>, CrdError> {
        let is_null = |b: &Value| b.get("type").and_then(Value::as_str) == Some("null");
        let others: Vec<&Value> = branches.iter().filter(|b| !is_null(b)).collect();
        let nullable = others.len() < branches.len();
        let mut out = if others.len() == 1 {
            self.node(others[0], &format!("{path}/0"), stack)?
        } else if !others.is_empty() && others.iter().all(|b| b.get("const").is_some()) {
            let types: Vec<&Value> = others.iter().filter_map(|b| b.get("type")).collect();
            if types.len() != others.len() || types.windows(2).any(|w| w[0] != w[1]) {
                return Err(self.error(path, "has constants of several types"));
            }
            let values: Vec<Value> = others.iter().map(|b| b["const"].clone()).collect();
            let said: Vec<String> = others
                .iter()
                .filter_map(|b| Some(format!("`{}`: {}", b["const"].as_str()?, b.get("description")?.as_str()?)))
                .collect();
            let mut m = Map::new();
            if !said.is_empty() {
                m.insert("description".into(), said.join("\n").into());
            }
            m.insert("type".into(), types[0].clone());
            m.insert("enum".into(), values.into());
            m
        } else if others.is_empty() {
            return Err(self.error(path, "allows only null"));
        } else {
            let mut m = Map::new();
            let shapes: Vec<String> = others
                .iter()
                .map(|b| match b.get("enum").and_then(Value::as_array) {
                    Some(e) => format!(
                        "one of {}",
                        e.iter().filter_map(Value::as_str).map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
                    ),
                    None => b.get("type").and_then(Value::as_str).unwrap_or("a value").to_string(),
                })
                .collect();
            m.insert("description".into(), format!("Either {}.", shapes.join(", or ")).into());
            m.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
            m
        };
        if nullable {
            out.insert("nullable".into(), true.into());
        }
        Ok(out)
    }
}

fn free_form() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
    m
}

/// A string node that also takes an integer: the structural form of Kubernetes' int-or-string.
/// Its rules stay at its top, where each applies to the values of its own type only.
fn int_or_string(mut node: Map<String, Value>) -> Map<String, Value> {
    node.remove("type");
    node.insert("x-kubernetes-int-or-string".into(), true.into());
    node.insert("anyOf".into(), json!([{"type": "integer"}, {"type": "string"}]));
    // Like `pattern` for strings, `minimum` applies to numbers only.
    node.insert("minimum".into(), 0.into());
    node
}

#[cfg(test)]
mod tests;
