//! Resource handlers: list, get, create, replace, merge-patch, delete and status, for every kind.

use std::collections::HashMap;

use aoctl_api::decode::{decode_json, AnyObject};
use aoctl_api::table::{self, IncludeObject};
use aoctl_api::validate::validate_conditions;
use aoctl_api::wire::{DeleteOptions, List};
use aoctl_api::{GitSource, IssueSource, Kind, Project, Session};
use aoctl_store::{Deleted, StoreError, StoredObject, WriteOptions};
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::params::Params;
use super::patch::merge;
use super::watch;
use super::{AppError, AppState};

pub(super) fn kind_of(plural: &str) -> Result<Kind, AppError> {
    Kind::ALL.into_iter().find(|k| k.plural() == plural).ok_or(AppError::NoRoute)
}

fn writable(kind: Kind) -> Result<(), AppError> {
    if kind.has_spec() {
        Ok(())
    } else {
        Err(AppError::BadRequest(format!("{} are written by the controller and are read-only", kind.plural())))
    }
}

pub(super) async fn list_or_watch(
    State(state): State<AppState>,
    Path(plural): Path<String>,
    headers: HeaderMap,
    params: Result<Query<Params>, QueryRejection>,
) -> Result<Response, AppError> {
    let Query(params) = params?;
    let kind = kind_of(&plural)?;
    if params.is_watch() {
        return watch::stream(state, kind, params).await;
    }
    let selector = params.selector()?;
    let fields = params.fields()?;
    let table = table_request(&headers, params.include_object.as_deref())?;
    let (mut items, rv) = state.store.list_stored(kind, &selector).await?;
    items.retain(|o| fields.matches(o.object()));
    Ok(match table {
        Some(include) => table_response(kind, items.iter().map(StoredObject::object), rv, include),
        None => json_response(list_body(kind, rv, &items)),
    })
}

pub(super) async fn get_one(
    State(state): State<AppState>,
    Path(path): Path<HashMap<String, String>>,
    headers: HeaderMap,
    params: Result<Query<TableParams>, QueryRejection>,
) -> Result<Response, AppError> {
    let kind = kind_of(&path["plural"])?;
    let table = table_request(&headers, params?.include_object.as_deref())?;
    let obj = state.store.get_stored(kind, &path["name"]).await?;
    Ok(match table {
        Some(include) => {
            let rv = obj.object().pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default();
            let rv = rv.parse().unwrap_or(0);
            table_response(kind, [obj.object()], rv, include)
        }
        None => json_response(obj.json().to_vec()),
    })
}

/// The query parameters of a read of one object.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TableParams {
    pub include_object: Option<String>,
}

/// `Some(what rows carry)` when the request asks for a `Table` (`Accept`, see `aoctl_api::table`).
fn table_request(headers: &HeaderMap, include_object: Option<&str>) -> Result<Option<IncludeObject>, AppError> {
    let accept: Vec<&str> =
        headers.get_all(axum::http::header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).collect();
    if !table::accepts_table(&accept.join(",")) {
        return Ok(None);
    }
    match include_object {
        None => Ok(Some(IncludeObject::default())),
        Some(s) => IncludeObject::parse(s).map(Some).ok_or_else(|| {
            AppError::BadRequest(format!("includeObject: unsupported value `{s}`; allowed: None, Metadata, Object"))
        }),
    }
}

fn json_response(body: Vec<u8>) -> Response {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The rows of `objects` as a `meta.k8s.io/v1` `Table`, with ages as of now.
fn table_response<'a>(
    kind: Kind,
    objects: impl IntoIterator<Item = &'a Value>,
    rv: u64,
    include: IncludeObject,
) -> Response {
    let t = table::table(kind, objects, &rv.to_string(), chrono::Utc::now(), include);
    let body = serde_json::to_vec(&t).expect("tables serialise");
    ([(axum::http::header::CONTENT_TYPE, table::TABLE_MEDIA_TYPE)], body).into_response()
}

/// A list ([`List`]) with each item spliced in as the store encoded it: no object is copied or
/// encoded again. The envelope is the api's `List` with no items, encoded, and the items go
/// between its brackets, so the bytes are those `serde_json::to_vec` writes for the whole list.
fn list_body(kind: Kind, rv: u64, items: &[StoredObject]) -> Vec<u8> {
    let envelope = serde_json::to_vec(&List::<Value>::new(kind, rv, vec![])).expect("lists serialise");
    let open = envelope.strip_suffix(b"]}").expect("a list ends with its items");
    let size = items.iter().map(|o| o.json().len() + 1).sum::<usize>();
    let mut out = Vec::with_capacity(open.len() + size + 2);
    out.extend_from_slice(open);
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(o.json());
    }
    out.extend_from_slice(b"]}");
    out
}

/// Decodes a body strictly into the kind's type, validates it and returns its canonical JSON.
fn decode_body(kind: Kind, body: &[u8]) -> Result<AnyObject, AppError> {
    let obj = match AnyObject::decode_json(kind, body) {
        Some(decoded) => decoded.map_err(AppError::Decode)?,
        None => return Err(writable(kind).unwrap_err()),
    };
    let errors = obj.validate();
    if !errors.is_empty() {
        let meta = obj.meta();
        let name = match (&meta.name[..], &meta.generate_name) {
            ("", Some(g)) => format!("{g}*"),
            (n, _) => n.to_string(),
        };
        return Err(AppError::Invalid { kind, name, errors });
    }
    Ok(obj)
}

/// What every write checks first: the kind is known and writable, the query parses (`dryRun`),
/// and — for writes with a body — the content type is JSON (or merge-patch JSON for a patch).
fn write_request(
    plural: &str,
    params: Result<Query<Params>, QueryRejection>,
    body: Option<(&HeaderMap, bool)>,
) -> Result<(Kind, WriteOptions), AppError> {
    let Query(params) = params?;
    let kind = kind_of(plural)?;
    writable(kind)?;
    if let Some((headers, merge_patch)) = body {
        require_json(headers, merge_patch)?;
    }
    Ok((kind, params.options()?))
}

fn require_json(headers: &HeaderMap, merge_patch: bool) -> Result<(), AppError> {
    let ct = headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json");
    let ct = ct.split(';').next().unwrap_or("").trim();
    let ok = ct == "application/json" || (merge_patch && ct == "application/merge-patch+json");
    if ok {
        Ok(())
    } else {
        let allowed = if merge_patch { "application/merge-patch+json, application/json" } else { "application/json" };
        Err(AppError::UnsupportedMediaType(format!("unsupported content type `{ct}`; use {allowed}")))
    }
}

/// Admission (`crate::admission`) for a write through the API.
pub(super) async fn admit(state: &AppState, obj: &mut AnyObject, creating: bool) -> Result<(), AppError> {
    crate::admission::admit(&state.store, obj, creating, &[]).await.map_err(AppError::from)
}

pub(super) async fn create(
    State(state): State<AppState>,
    Path(plural): Path<String>,
    params: Result<Query<Params>, QueryRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, AppError> {
    let (kind, opts) = write_request(&plural, params, Some((&headers, false)))?;
    let mut obj = decode_body(kind, &body)?;
    admit(&state, &mut obj, true).await?;
    let created = state.store.create(kind, obj.to_value(), opts).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

fn check_name(body_name: &str, url_name: &str) -> Result<(), AppError> {
    if body_name != url_name {
        return Err(AppError::BadRequest(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({url_name})"
        )));
    }
    Ok(())
}

/// Fills an empty `metadata.name` from the URL; other mismatches are errors.
fn name_from_url(body: &[u8], url_name: &str) -> Result<Vec<u8>, AppError> {
    let mut v: Value = serde_json::from_slice(body).map_err(|e| {
        AppError::Decode(aoctl_api::DecodeError {
            source: "request body".into(),
            line: Some(e.line()),
            column: Some(e.column()),
            field: None,
            message: e.to_string(),
        })
    })?;
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        match meta.get("name").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("name".into(), json!(url_name));
            }
            Some(n) => check_name(n, url_name)?,
        }
    } else if v.is_object() {
        v["metadata"] = json!({"name": url_name});
    }
    Ok(serde_json::to_vec(&v).expect("values serialise"))
}

pub(super) async fn replace(
    State(state): State<AppState>,
    Path((plural, name)): Path<(String, String)>,
    params: Result<Query<Params>, QueryRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, AppError> {
    let (kind, opts) = write_request(&plural, params, Some((&headers, false)))?;
    let body = name_from_url(&body, &name)?;
    let mut obj = decode_body(kind, &body)?;
    admit(&state, &mut obj, false).await?;
    Ok(Json(state.store.update(kind, obj.to_value(), opts).await?))
}

pub(super) async fn patch(
    State(state): State<AppState>,
    Path((plural, name)): Path<(String, String)>,
    params: Result<Query<Params>, QueryRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, AppError> {
    let (kind, opts) = write_request(&plural, params, Some((&headers, true)))?;
    let patch: Value = decode_json(&body).map_err(AppError::Decode)?;
    if !patch.is_object() {
        return Err(AppError::BadRequest("a merge patch must be a JSON object".into()));
    }
    let pinned = patch.pointer("/metadata/resourceVersion").is_some();
    // Without a resourceVersion in the patch, a concurrent write is merged again, as Kubernetes does:
    // every conflict means another write landed, so retrying makes progress.
    let mut attempts = 0u32;
    loop {
        let mut current = state.store.get(kind, &name).await?;
        if let Some(status) = current.as_object_mut() {
            status.remove("status");
        }
        merge(&mut current, &patch);
        let merged = serde_json::to_vec(&current).expect("values serialise");
        let merged = name_from_url(&merged, &name)?;
        let mut obj = decode_body(kind, &merged)?;
        admit(&state, &mut obj, false).await?;
        match state.store.update(kind, obj.to_value(), opts).await {
            Err(StoreError::Conflict { .. }) if !pinned && attempts < MAX_PATCH_ATTEMPTS => {
                attempts += 1;
                // Spread the retries of many concurrent patches so they stop colliding.
                let jitter = std::time::Duration::from_micros(rand_micros(attempts));
                tokio::time::sleep(jitter).await;
            }
            other => return Ok(Json(other?)),
        }
    }
}

/// How often an unpinned merge patch is retried after a conflict before giving up.
const MAX_PATCH_ATTEMPTS: u32 = 64;

/// A pseudo-random pause that grows with the attempt number, up to a few milliseconds.
fn rand_micros(attempt: u32) -> u64 {
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    u64::from(seed % (200 * attempt.min(20)))
}

pub(super) async fn delete(
    State(state): State<AppState>,
    Path((plural, name)): Path<(String, String)>,
    params: Result<Query<Params>, QueryRejection>,
    body: Bytes,
) -> Result<Response, AppError> {
    let (kind, opts) = write_request(&plural, params, None)?;
    // An optional DeleteOptions body: {"preconditions": {"resourceVersion": "…"}}.
    let options: DeleteOptions =
        if body.is_empty() { DeleteOptions::default() } else { decode_json(&body).map_err(AppError::Decode)? };
    let precondition = options.preconditions.and_then(|p| p.resource_version);
    Ok(match state.store.delete(kind, &name, precondition.as_deref(), opts).await? {
        Deleted::Gone(obj) => (StatusCode::OK, Json(obj)).into_response(),
        Deleted::Terminating(obj) => (StatusCode::ACCEPTED, Json(obj)).into_response(),
    })
}

pub(super) async fn replace_status(
    State(state): State<AppState>,
    Path((plural, name)): Path<(String, String)>,
    params: Result<Query<Params>, QueryRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, AppError> {
    let (kind, opts) = write_request(&plural, params, Some((&headers, false)))?;
    let body = name_from_url(&body, &name)?;
    let (status, rv, errors) = match kind {
        Kind::Project => {
            let p: Project = decode_json(&body).map_err(AppError::Decode)?;
            let errs = validate_conditions("status.conditions", &p.status.conditions);
            (serde_json::to_value(&p.status), p.metadata.resource_version, errs)
        }
        Kind::Session => {
            let s: Session = decode_json(&body).map_err(AppError::Decode)?;
            let errs = validate_conditions("status.conditions", &s.status.conditions);
            (serde_json::to_value(&s.status), s.metadata.resource_version, errs)
        }
        Kind::GitSource => {
            let g: GitSource = decode_json(&body).map_err(AppError::Decode)?;
            let errs = validate_conditions("status.conditions", &g.status.conditions);
            (serde_json::to_value(&g.status), g.metadata.resource_version, errs)
        }
        Kind::IssueSource => {
            let i: IssueSource = decode_json(&body).map_err(AppError::Decode)?;
            let errs = validate_conditions("status.conditions", &i.status.conditions);
            (serde_json::to_value(&i.status), i.metadata.resource_version, errs)
        }
        Kind::Event => unreachable!("events are rejected by writable()"),
    };
    if !errors.is_empty() {
        return Err(AppError::Invalid { kind, name, errors });
    }
    let status = status.expect("status serialises");
    Ok(Json(state.store.update_status(kind, &name, status, rv.as_deref(), opts).await?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::selector::Selector;
    use aoctl_api::API_VERSION;
    use aoctl_store::{Store, WriteOptions};
    use axum::http::HeaderValue;
    use serde_json::json;

    /// The list spliced from stored encodings is byte for byte the list built as a value.
    #[tokio::test]
    async fn list_bytes_are_the_encoded_list() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let w = WriteOptions::default();
        for (name, team) in [("web", "a"), ("api", "b"), ("db", "a")] {
            let p = json!({"apiVersion": API_VERSION, "kind": "Project",
                "metadata": {"name": name, "labels": {"team": team}, "annotations": {"note": "\"quoted\"\n é"}},
                "spec": {"path": format!("/src/{name}")}});
            store.create(Kind::Project, p, w).await.unwrap();
        }
        store.update_status(Kind::Project, "api", json!({"defaultBranch": "main"}), None, w).await.unwrap();
        for selector in ["", "team=a", "team=none"] {
            let selector = Selector::parse(selector).unwrap();
            let (stored, rv) = store.list_stored(Kind::Project, &selector).await.unwrap();
            let (values, _) = store.list(Kind::Project, &selector).await.unwrap();
            let want = serde_json::to_vec(&List::new(Kind::Project, rv, values)).unwrap();
            assert_eq!(
                String::from_utf8(list_body(Kind::Project, rv, &stored)).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
        let empty = list_body(Kind::Session, 7, &[]);
        assert_eq!(
            empty,
            br#"{"apiVersion":"ao.dev/v1alpha1","kind":"SessionList","metadata":{"resourceVersion":"7"},"items":[]}"#
        );
    }

    #[test]
    fn tables_are_asked_for_with_accept() {
        let mut h = HeaderMap::new();
        assert!(table_request(&h, None).unwrap().is_none());
        h.insert(axum::http::header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(table_request(&h, Some("None")).unwrap().is_none(), "includeObject alone asks for nothing");
        h.append(axum::http::header::ACCEPT, HeaderValue::from_static(table::TABLE_MEDIA_TYPE));
        assert!(table_request(&h, None).unwrap().is_none(), "the first acceptable form wins");
        let mut h = HeaderMap::new();
        h.insert(axum::http::header::ACCEPT, HeaderValue::from_static(table::TABLE_MEDIA_TYPE));
        assert_eq!(table_request(&h, None).unwrap(), Some(IncludeObject::Metadata));
        assert_eq!(table_request(&h, Some("None")).unwrap(), Some(IncludeObject::None));
        assert!(matches!(table_request(&h, Some("All")), Err(AppError::BadRequest(m)) if m.contains("includeObject")));
    }
}
