//! Tests of the CRD generator: every generated schema obeys the apiserver's structural rules, the
//! printer columns match `aoctl get`, and each conversion rule does what it says.

use serde_json::{json, Map, Value};

use super::*;
use crate::quantity::Quantity;

/// The keywords of Kubernetes' `JSONSchemaProps` a generated schema may use.
const ALLOWED: &[&str] = &[
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
    "properties",
    "additionalProperties",
    "items",
    "anyOf",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
];

const TYPES: &[&str] = &["object", "array", "string", "integer", "number", "boolean"];

/// Every departure from a structural schema under `node`, as `path: what`.
fn violations(node: &Value, path: &str, out: &mut Vec<String>) {
    let Some(o) = node.as_object() else {
        out.push(format!("{path}: is not an object"));
        return;
    };
    for k in o.keys() {
        if !ALLOWED.contains(&k.as_str()) {
            out.push(format!("{path}: keyword `{k}`"));
        }
    }
    let free = o.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let int_or_string = o.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    match o.get("type").and_then(Value::as_str) {
        Some(t) if TYPES.contains(&t) => {}
        Some(t) => out.push(format!("{path}: type `{t}`")),
        None if free || int_or_string => {}
        None => out.push(format!("{path}: no type")),
    }
    if int_or_string {
        if o.get("type").is_some() {
            out.push(format!("{path}: int-or-string with a type"));
        }
        let types: Vec<_> = o
            .get("anyOf")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|b| b.get("type").cloned()).collect())
            .unwrap_or_default();
        if types != [Some(json!("integer")), Some(json!("string"))] {
            out.push(format!("{path}: int-or-string without anyOf integer, string"));
        }
        for b in o.get("anyOf").and_then(Value::as_array).into_iter().flatten() {
            if b.as_object().is_none_or(|b| b.len() != 1) {
                out.push(format!("{path}: an int-or-string branch says more than its type"));
            }
        }
    } else if o.contains_key("anyOf") {
        out.push(format!("{path}: anyOf outside int-or-string"));
    }
    if o.contains_key("properties") && o.contains_key("additionalProperties") {
        out.push(format!("{path}: properties beside additionalProperties"));
    }
    if o.get("additionalProperties").is_some_and(Value::is_boolean) {
        out.push(format!("{path}: additionalProperties is a boolean"));
    }
    if o.get("nullable").is_some() && o.get("type").is_none() && !free && !int_or_string {
        out.push(format!("{path}: nullable without a type"));
    }
    let t = o.get("type").and_then(Value::as_str);
    if o.contains_key("properties") && t != Some("object") {
        out.push(format!("{path}: properties on a {t:?}"));
    }
    if o.contains_key("items") != (t == Some("array")) {
        out.push(format!("{path}: items and type array go together"));
    }
    let props = o.get("properties").and_then(Value::as_object);
    for r in o.get("required").and_then(Value::as_array).into_iter().flatten() {
        if !props.is_some_and(|p| p.contains_key(r.as_str().unwrap_or_default())) {
            out.push(format!("{path}: required `{r}` is not a property"));
        }
    }
    if let Some(d) = o.get("default") {
        default_violations(o, d, path, out);
    }
    for (name, p) in props.into_iter().flatten() {
        violations(p, &format!("{path}.{name}"), out);
    }
    if let Some(i) = o.get("items") {
        violations(i, &format!("{path}[]"), out);
    }
    if let Some(a) = o.get("additionalProperties").filter(|a| a.is_object()) {
        violations(a, &format!("{path}{{}}"), out);
    }
}

/// A default must be a value of its node: the apiserver refuses a CRD whose defaults are not.
fn default_violations(o: &Map<String, Value>, d: &Value, path: &str, out: &mut Vec<String>) {
    let ok = match o.get("type").and_then(Value::as_str) {
        Some("object") => d.as_object().is_some_and(|m| {
            o.get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .all(|r| m.contains_key(r.as_str().unwrap_or("")))
        }),
        Some("array") => d.is_array(),
        Some("string") => d.is_string(),
        Some("integer") => d.is_i64() || d.is_u64(),
        Some("number") => d.is_number(),
        Some("boolean") => d.is_boolean(),
        _ => true,
    };
    let in_enum = o.get("enum").and_then(Value::as_array).is_none_or(|e| e.contains(d));
    if !ok || !in_enum {
        out.push(format!("{path}: default {d} is not a value of the node"));
    }
}

fn openapi(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

#[test]
fn every_crd_is_structural() {
    for kind in KINDS {
        let crd = crd(kind).unwrap();
        let mut found = vec![];
        violations(openapi(&crd), kind.as_str(), &mut found);
        assert!(found.is_empty(), "{kind:?}:\n{}", found.join("\n"));
        let text = serde_json::to_string(&crd).unwrap();
        // Keywords are checked node by node above; these cannot be field names either.
        for banned in ["$ref", "$defs", "$schema", "#/"] {
            assert!(!text.contains(banned), "{kind:?} carries {banned}");
        }
    }
}

#[test]
fn the_checker_finds_what_is_not_structural() {
    let cases = [
        (json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}), "keyword `$ref`"),
        (json!({"type": "object", "properties": {"a": {"description": "x"}}}), "root.a: no type"),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}),
            "properties beside additionalProperties",
        ),
        (json!({"type": "object", "anyOf": [{"type": "string"}, {"type": "null"}]}), "anyOf outside int-or-string"),
        (json!({"type": ["string", "null"]}), "no type"),
        (json!({"type": "object", "properties": {}, "required": ["a"]}), "required `\"a\"`"),
        (
            json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}, "default": {}}),
            "default",
        ),
        (
            json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]}),
            "branch",
        ),
        (json!({"type": "array"}), "items and type array"),
    ];
    for (schema, expected) in cases {
        let mut found = vec![];
        violations(&schema, "root", &mut found);
        assert!(found.iter().any(|f| f.contains(expected)), "{schema}: expected {expected:?}, found {found:?}");
    }
}

#[test]
fn names_scope_and_subresources() {
    for kind in KINDS {
        let crd = crd(kind).unwrap();
        assert_eq!(crd["metadata"]["name"], format!("{}.ao.dev", kind.plural()));
        let spec = &crd["spec"];
        assert_eq!(spec["group"], GROUP);
        assert_eq!(spec["scope"], "Namespaced");
        assert_eq!(spec["names"]["kind"], kind.as_str());
        assert_eq!(spec["names"]["listKind"], kind.list_kind());
        assert_eq!(Kind::parse(spec["names"]["singular"].as_str().unwrap()), Some(kind));
        for short in spec["names"]["shortNames"].as_array().unwrap() {
            assert_eq!(Kind::parse(short.as_str().unwrap()), Some(kind), "{short}");
        }
        let v = &spec["versions"][0];
        assert_eq!(
            (v["name"].as_str(), v["served"].as_bool(), v["storage"].as_bool()),
            (Some(VERSION), Some(true), Some(true))
        );
        assert_eq!(v["subresources"], json!({"status": {}}));
        let root = openapi(&crd);
        assert_eq!(root["properties"]["metadata"], json!({"type": "object"}), "metadata is the apiserver's");
        assert!(root["properties"]["spec"]["properties"].is_object());
        assert!(root["properties"]["status"]["properties"].is_object());
    }
}

/// The node a printer column's JSONPath names, following `[?(…)]` filters into array items.
fn at_path<'a>(root: &'a Value, json_path: &str) -> Option<&'a Value> {
    let mut node = root;
    let mut path = json_path.to_string();
    while let Some(start) = path.find("[?(") {
        let end = path[start..].find(")]")? + start + 2;
        path.replace_range(start..end, "[]");
    }
    for part in path.trim_start_matches('.').split('.') {
        let (field, filtered) = match part.strip_suffix("[]") {
            Some(f) => (f, true),
            None => (part, false),
        };
        if field.is_empty() {
            continue;
        }
        node = node.get("properties")?.get(field)?;
        if filtered {
            node = node.get("items")?;
        }
    }
    Some(node)
}

#[test]
fn printer_columns_are_aoctl_get_columns_over_real_fields() {
    for kind in KINDS {
        let table = crate::table::columns(kind);
        let crd = crd(kind).unwrap();
        let mut with_metadata = openapi(&crd).clone();
        with_metadata["properties"]["metadata"] =
            json!({"type": "object", "properties": {"creationTimestamp": {"type": "string", "format": "date-time"}}});
        for c in printer_columns(kind) {
            let t = table.iter().find(|t| t.name == c.name).unwrap_or_else(|| panic!("{kind:?}: no column {}", c.name));
            assert_eq!(t.priority, c.priority, "{kind:?} {}", c.name);
            let node = at_path(&with_metadata, c.json_path)
                .unwrap_or_else(|| panic!("{kind:?}: {} names no field", c.json_path));
            let ty = node.get("type").and_then(Value::as_str);
            let fits = match c.type_ {
                "date" => ty == Some("string") && node["format"] == "date-time",
                "integer" => ty == Some("integer"),
                "boolean" => ty == Some("boolean"),
                // A string column prints whatever is there: a string, a list, or free-form JSON.
                "string" => matches!(ty, Some("string") | Some("array") | None),
                other => panic!("column type {other}"),
            };
            assert!(fits, "{kind:?} {}: a {} column over {node}", c.name, c.type_);
        }
        let printed = &crd["spec"]["versions"][0]["additionalPrinterColumns"];
        assert_eq!(printed.as_array().unwrap().len(), printer_columns(kind).len());
    }
}

#[test]
fn int_or_string_definitions_take_both() {
    assert_eq!(serde_json::from_value::<Quantity>(json!(512)).unwrap().bytes(), 512);
    assert_eq!(serde_json::from_value::<Quantity>(json!("1Ki")).unwrap().bytes(), 1024);
    // A Duration is a string only, so it is not in the list.
    assert!(serde_json::from_value::<crate::Duration>(json!(30)).is_err());
    let crd = crd(Kind::Project).unwrap();
    let text = serde_json::to_string(&crd).unwrap();
    assert!(text.contains("\"x-kubernetes-int-or-string\":true"), "the Project's docker limits take quantities");
}

fn convert(schema: Value) -> Result<Value, CrdError> {
    structural_schema(Kind::Session, &schema)
}

fn spec_of(root: Value) -> Value {
    root["properties"]["spec"].clone()
}

#[test]
fn options_become_nullable() {
    let root = convert(json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"anyOf": [{"$ref": "#/$defs/B"}, {"type": "null"}], "description": "b's"},
        }, "additionalProperties": false}},
        "$defs": {"B": {"type": "integer", "format": "uint32", "minimum": 0, "description": "B's"}},
    }))
    .unwrap();
    let spec = spec_of(root);
    assert_eq!(spec["properties"]["a"], json!({"type": "string", "nullable": true}));
    assert_eq!(
        spec["properties"]["b"],
        json!({"type": "integer", "format": "int64", "minimum": 0, "maximum": 4294967295u64, "description": "b's", "nullable": true})
    );
    assert!(spec.get("additionalProperties").is_none());
}

#[test]
fn constants_become_an_enum() {
    let root = convert(json!({"properties": {"spec": {"oneOf": [
        {"type": "string", "const": "a", "description": "The first."},
        {"type": "string", "const": "b", "description": "The second."},
    ]}}}))
    .unwrap();
    let spec = spec_of(root);
    assert_eq!(spec["type"], "string");
    assert_eq!(spec["enum"], json!(["a", "b"]));
    assert_eq!(spec["description"], "`a`: The first.\n`b`: The second.");
}

#[test]
fn mixed_shapes_and_free_json_are_preserved() {
    let root = convert(json!({"properties": {"spec": {"type": "object", "properties": {
        "agent": {"oneOf": [{"type": "string", "enum": ["x", "y"]}, {"type": "object", "properties": {}}]},
        "any": true,
        "map": {"type": "object", "additionalProperties": true},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
    }}}}))
    .unwrap();
    let p = &spec_of(root)["properties"];
    assert_eq!(p["agent"]["x-kubernetes-preserve-unknown-fields"], true);
    assert_eq!(p["agent"]["description"], "Either one of `x`, `y`, or object.");
    assert!(p["agent"].get("type").is_none());
    assert_eq!(p["any"], json!({"x-kubernetes-preserve-unknown-fields": true}));
    assert_eq!(p["map"], json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    assert_eq!(p["env"], json!({"type": "object", "additionalProperties": {"type": "string"}}));
}

#[test]
fn what_cannot_be_converted_is_an_error() {
    let cyclic = json!({"properties": {"spec": {"$ref": "#/$defs/A"}}, "$defs": {
        "A": {"type": "object", "properties": {"next": {"$ref": "#/$defs/A"}}},
    }});
    assert!(convert(cyclic).unwrap_err().to_string().contains("refers to itself"));
    let unknown = json!({"properties": {"spec": {"type": "object", "patternProperties": {}}}});
    assert!(convert(unknown).unwrap_err().to_string().contains("`patternProperties`"));
    let format = json!({"properties": {"spec": {"type": "string", "format": "ip"}}});
    assert!(convert(format).unwrap_err().to_string().contains("`ip`"));
    let missing = json!({"properties": {"spec": {"$ref": "#/$defs/Nope"}}});
    let e = convert(missing).unwrap_err();
    assert_eq!(e.path, "/properties/spec");
    assert!(e.to_string().starts_with("Session schema at /properties/spec: reference to a missing definition"), "{e}");
}

#[test]
fn files_are_named_after_plurals_and_say_they_are_generated() {
    let files = crds().unwrap();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["projects.yaml", "sessions.yaml", "gitsources.yaml", "issuesources.yaml"]);
    for (name, text) in &files {
        assert!(text.starts_with("# The CustomResourceDefinition of aoctl's "), "{name}");
        let back: Value = serde_yaml_ng::from_str(text).unwrap();
        assert_eq!(back["kind"], "CustomResourceDefinition", "{name}");
    }
}
