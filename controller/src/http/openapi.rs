//! `/openapi.json`: the API's operations built with utoipa; the component schemas come from the
//! same schemars derivations as manifests/schema/, so there is one source for every shape.

use std::sync::OnceLock;

use aoctl_api::{Event, GitSource, IssueSource, Kind, Project, Session};
use axum::Json;
use serde_json::{json, Value};
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItemBuilder};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::{
    Content, InfoBuilder, ObjectBuilder, OpenApi, OpenApiBuilder, PathsBuilder, Ref, Required, ResponseBuilder,
};

fn json_content(schema: &str) -> Content {
    Content::new(Some(Ref::from_schema_name(schema)))
}

fn response(description: &str, schema: &str) -> utoipa::openapi::Response {
    ResponseBuilder::new().description(description).content("application/json", json_content(schema)).build()
}

/// What `includeObject` does.
const INCLUDE_OBJECT: &str = "With a Table answer, what each row carries: `None`, `Metadata` (the default, as a \
     PartialObjectMetadata) or `Object`";

/// Adds the `Table` answer that `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` asks for.
fn with_table(mut r: utoipa::openapi::Response) -> utoipa::openapi::Response {
    r.content.insert(aoctl_api::table::TABLE_MEDIA_TYPE.to_string(), json_content("Table"));
    r.description
        .push_str("; with `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, the rows `aoctl get` prints");
    r
}

fn query(name: &str, description: &str) -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Query)
        .required(Required::False)
        .description(Some(description))
        .schema(Some(ObjectBuilder::new().schema_type(utoipa::openapi::Type::String)))
        .build()
}

fn name_param() -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name("name")
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .schema(Some(ObjectBuilder::new().schema_type(utoipa::openapi::Type::String)))
        .build()
}

fn op(id: String, summary: String) -> OperationBuilder {
    OperationBuilder::new()
        .operation_id(Some(id))
        .summary(Some(summary))
        .response("default", response("A Kubernetes-style Status describing the error", "Status"))
}

fn body(schema: &str, content_type: &str) -> Option<utoipa::openapi::request_body::RequestBody> {
    Some(RequestBodyBuilder::new().required(Some(Required::True)).content(content_type, json_content(schema)).build())
}

fn build() -> Value {
    let mut paths = PathsBuilder::new();
    for kind in Kind::ALL {
        let (k, plural, list) = (kind.as_str(), kind.plural(), kind.list_kind());
        let base = format!("/apis/ao.dev/v1alpha1/{plural}");
        let list_op = op(format!("list{k}"), format!("List or watch {plural}"))
            .parameter(query("labelSelector", "Label selector such as `team=web,tier!=db`"))
            .parameter(query("fieldSelector", "Field selector such as `spec.project=demo`"))
            .parameter(query("watch", "`true` streams ADDED/MODIFIED/DELETED/BOOKMARK events as NDJSON"))
            .parameter(query("resourceVersion", "Start a watch after this version; 410 when it is too old"))
            .parameter(query("timeoutSeconds", "End a watch after this many seconds"))
            .parameter(query("includeObject", INCLUDE_OBJECT))
            .response("200", with_table(response(&format!("The {plural}"), list)));
        let get_op = op(format!("read{k}"), format!("Read a {k}"))
            .parameter(name_param())
            .parameter(query("includeObject", INCLUDE_OBJECT))
            .response("200", with_table(response(k, k)));
        let mut collection = PathItemBuilder::new().operation(HttpMethod::Get, list_op);
        let mut item = PathItemBuilder::new().operation(HttpMethod::Get, get_op);
        if kind.has_spec() {
            let dry = || query("dryRun", "`All` checks and returns the result without storing it");
            collection = collection.operation(
                HttpMethod::Post,
                op(format!("create{k}"), format!("Create a {k}"))
                    .parameter(dry())
                    .request_body(body(k, "application/json"))
                    .response("201", response("Created", k)),
            );
            item = item
                .operation(
                    HttpMethod::Put,
                    op(format!("replace{k}"), format!("Replace a {k}'s metadata and spec"))
                        .parameter(name_param())
                        .parameter(dry())
                        .request_body(body(k, "application/json"))
                        .response("200", response("Replaced", k)),
                )
                .operation(
                    HttpMethod::Patch,
                    op(format!("patch{k}"), format!("Merge-patch a {k} (RFC 7386)"))
                        .parameter(name_param())
                        .parameter(dry())
                        .request_body(body(k, "application/merge-patch+json"))
                        .response("200", response("Patched", k)),
                )
                .operation(
                    HttpMethod::Delete,
                    op(format!("delete{k}"), format!("Delete a {k}"))
                        .parameter(name_param())
                        .parameter(dry())
                        .response("200", response("Deleted", k))
                        .response("202", response("Deletion started; finalizers remain", k)),
                );
            let status = PathItemBuilder::new()
                .operation(
                    HttpMethod::Get,
                    op(format!("read{k}Status"), format!("Read a {k} with its status"))
                        .parameter(name_param())
                        .response("200", response(k, k)),
                )
                .operation(
                    HttpMethod::Put,
                    op(format!("replace{k}Status"), format!("Replace a {k}'s status"))
                        .parameter(name_param())
                        .request_body(body(k, "application/json"))
                        .response("200", response("Replaced", k)),
                )
                .build();
            paths = paths.path(format!("{base}/{{name}}/status"), status);
        }
        paths = paths.path(base.clone(), collection.build()).path(format!("{base}/{{name}}"), item.build());
    }
    paths = session_subresources(paths);
    for (path, summary) in [
        ("/healthz", "Liveness: 200 while the process serves"),
        (
            "/readyz",
            "Readiness: 200 once the store is loaded and the controllers run, 503 while the store cannot write",
        ),
        ("/metrics", "Prometheus metrics in the text format"),
        ("/version", "Server version"),
    ] {
        let id = path.trim_start_matches('/').to_string();
        let o = OperationBuilder::new()
            .operation_id(Some(id))
            .summary(Some(summary))
            .response("200", ResponseBuilder::new().description("OK").build());
        paths = paths.path(path, PathItemBuilder::new().operation(HttpMethod::Get, o).build());
    }
    let doc: OpenApi = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("aoctl")
                .version(crate::VERSION)
                .description(Some("Declarative control of fleets of terminal coding agents")),
        )
        .paths(paths.build())
        .build();
    let mut doc = serde_json::to_value(doc).expect("the document serialises");
    // Every operation needs the bearer token (docs/security.md) but the few open ones.
    doc["components"] = json!({
        "schemas": schemas(),
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
            "description": "The token in the server's `<data dir>/token` (or its --token-file)"}},
    });
    doc["security"] = json!([{"bearer": []}]);
    for open in ["/healthz", "/readyz", "/version", "/login"] {
        doc["paths"][open]["get"]["security"] = json!([]);
    }
    // The dashboard's page and everything it calls take its cookie as well as the token.
    doc["components"]["securitySchemes"]["dashboardCookie"] = json!({"type": "apiKey", "in": "cookie", "name": "aoctl_dashboard",
        "description": "Set by GET /login; same-origin requests only"});
    doc["security"] = json!([{"bearer": []}, {"dashboardCookie": []}]);
    doc["paths"]["/dashboard/login"]["post"]["security"] = json!([{"bearer": []}]);
    doc["paths"]["/apis/ao.dev/v1alpha1/backup"]["get"]["security"] = json!([{"bearer": []}]);
    doc["components"]["securitySchemes"]["sessionToken"] = json!({"type": "http", "scheme": "bearer",
        "description": "A session's own token (`AOCTL_SESSION_TOKEN` in its agent's environment); opens only /agent/v1/"});
    for path in ["status", "report", "ask", "send", "handoff", "review"] {
        let method = if path == "status" { "get" } else { "post" };
        doc["paths"][format!("/agent/v1/{path}")][method]["security"] = json!([{"sessionToken": []}]);
    }
    doc
}

/// A session's input, log, terminal (a WebSocket) and diff, the multiplexed stream (a WebSocket),
/// and the dashboard's sign-in.
fn session_subresources(paths: PathsBuilder) -> PathsBuilder {
    let terminal = op("connectSessionTerminal".into(), "Open a terminal on a session's agent (WebSocket)".into())
        .description(Some(
            "Upgrades to a WebSocket. Binary frames carry the keys typed, one way, and the agent's terminal \
             output, the other; the only text frame is `{\"resize\": [cols, rows]}` (2 to 1000 each), and any \
             other closes the connection with 1008. The server closes with 1000 when the agent's output ends \
             and 1001 when it shuts down; the agent keeps running when the connection ends. Errors before the \
             upgrade are plain answers: 404 no such session, 409 no running agent, 400 a bad size or no \
             WebSocket handshake. Authenticated and Origin-checked like every request.",
        ))
        .parameter(name_param())
        .parameter(query("cols", "Columns of the terminal, 2 to 1000 (default 200)"))
        .parameter(query("rows", "Rows of the terminal, 2 to 1000 (default 50)"))
        .response("101", ResponseBuilder::new().description("Switching to the WebSocket protocol").build());
    let streams = op("connectStream".into(), "Watches and transcript follows over one WebSocket".into())
        .description(Some(
            "Upgrades to a WebSocket that carries a page's watches and transcript follows (the dashboard's \
             one connection per browser). Each text frame the client sends is one request with an id of its \
             own: `{\"op\":\"watch\",\"id\":1,\"plural\":\"sessions\",\"resourceVersion\":\"…\"}` (also \
             `labelSelector`, `fieldSelector`), `{\"op\":\"log\",\"id\":2,\"session\":\"…\",\"offset\":…}` (or \
             `tailLines`), `{\"op\":\"cancel\",\"id\":1}`. The server answers `{\"id\",\"event\"}` (a watch \
             line), `{\"id\",\"log\",\"offset\"}` and `{\"id\",\"error\"}` (a `Status`; a field that does not \
             decode is named). At most 32 subscriptions and 16 KiB a request; a client with more than 1024 \
             messages waiting is closed with 1013, and all are closed with 1001 when the server shuts down. \
             Authenticated and Origin-checked like every request.",
        ))
        .response("101", ResponseBuilder::new().description("Switching to the WebSocket protocol").build());
    let diff_text = ResponseBuilder::new()
        .description(
            "The session's work — its branch's commits, changes not committed yet and untracked files (not \
             ignored ones) — against the merge base of its branch with its base (`spec.baseRef`, else the \
             project's default branch), in git's unified format; a diff longer than 8 MiB is cut, with a last \
             line saying so",
        )
        .content(
            "text/x-diff; charset=utf-8",
            Content::new(Some(ObjectBuilder::new().schema_type(utoipa::openapi::Type::String))),
        )
        .build();
    let diff = op("readSessionDiff".into(), "Read a session's work as a unified diff".into())
        .parameter(name_param())
        .response("200", diff_text)
        .response("409", response("The session has no workspace yet", "Status"));
    let text_body = |description: &str, content_type: &str| {
        ResponseBuilder::new()
            .description(description)
            .content(content_type, Content::new(Some(ObjectBuilder::new().schema_type(utoipa::openapi::Type::String))))
            .build()
    };
    let input_body = ObjectBuilder::new()
        .property("text", ObjectBuilder::new().schema_type(utoipa::openapi::Type::String))
        .required("text")
        .build();
    let input = op("createSessionInput".into(), "Type a message into a session's agent".into())
        .description(Some(
            "200 once the message was typed and its delivery verified on the agent's screen, 202 when it was \
             queued durably (the agent has not had its first prompt yet, or messages wait before it), 409 when \
             the session will not run or is rate-limited.",
        ))
        .parameter(name_param())
        .request_body(Some(
            RequestBodyBuilder::new()
                .required(Some(Required::True))
                .content("application/json", Content::new(Some(input_body.clone())))
                .build(),
        ))
        .response("200", response("Delivered", "Status"))
        .response("202", response("Queued", "Status"))
        .response("409", response("The session has no agent to type into", "Status"));
    let answer = op("createSessionAnswer".into(), "Answer the question a session's agent asked".into())
        .description(Some(
            "Types the answer into the agent like `…/input`, then clears `status.agent.question`, which ends \
             the session's needs-input. 409 when no question waits or the session will not run.",
        ))
        .parameter(name_param())
        .request_body(Some(
            RequestBodyBuilder::new()
                .required(Some(Required::True))
                .content("application/json", Content::new(Some(input_body.clone())))
                .build(),
        ))
        .response("200", response("Delivered", "Status"))
        .response("202", response("Queued", "Status"))
        .response("409", response("No question waits, or no agent to type into", "Status"));
    let log = op("readSessionLog".into(), "Read a session's transcript as text".into())
        .parameter(name_param())
        .parameter(query("tailLines", "Only the last lines"))
        .parameter(query("follow", "`true` streams new output as it comes"))
        .response("200", text_body("The transcript as the agent's terminal shows it", "text/plain; charset=utf-8"));
    let login_code =
        op("createDashboardLogin".into(), "A one-time code that signs a browser in to the dashboard".into())
            .description(Some(
                "Only the bearer token may ask (not the dashboard's cookie); the code works once, within 60 s.",
            ))
            .response(
                "201",
                ResponseBuilder::new()
                    .description("`{code, path, expiresInSeconds}`; follow `path` in the browser")
                    .content("application/json", Content::new(Some(ObjectBuilder::new())))
                    .build(),
            );
    let login = op("dashboardLogin".into(), "Trade a one-time code for the dashboard's cookie".into())
        .parameter(query("code", "The code of POST /dashboard/login"))
        .response("303", ResponseBuilder::new().description("Signed in: the cookie is set; on to `/`").build())
        .response("401", text_body("The code was used, expired or unknown", "text/html; charset=utf-8"));
    let page = op("dashboard".into(), "The web dashboard".into())
        .response("200", text_body("The page", "text/html; charset=utf-8"))
        .response("401", text_body("Not signed in: how to sign in", "text/html; charset=utf-8"));
    let backup = op("readBackup".into(), "Every stored object at one resourceVersion (aoctl backup)".into())
        .description(Some(
            "JSON lines: a header `{format, backend, resourceVersion, time, objects, serverVersion}`, then \
             every stored object, one a line, with its metadata (uid, resourceVersion) and status as stored, \
             all as they stood at the header's resourceVersion (docs/store.md#backup-and-restore). Only the \
             bearer token takes a backup: the dashboard's cookie is refused with 403.",
        ))
        .response("200", text_body("The backup file", aoctl_api::backup::MEDIA_TYPE))
        .response("403", response("Asked with the dashboard's cookie, not the bearer token", "Status"));
    let paths = agent_api(paths);
    paths
        .path("/apis/ao.dev/v1alpha1/backup", PathItemBuilder::new().operation(HttpMethod::Get, backup).build())
        .path(
            "/apis/ao.dev/v1alpha1/sessions/{name}/input",
            PathItemBuilder::new().operation(HttpMethod::Post, input).build(),
        )
        .path(
            "/apis/ao.dev/v1alpha1/sessions/{name}/answer",
            PathItemBuilder::new().operation(HttpMethod::Post, answer).build(),
        )
        .path(
            "/apis/ao.dev/v1alpha1/sessions/{name}/log",
            PathItemBuilder::new().operation(HttpMethod::Get, log).build(),
        )
        .path("/dashboard/login", PathItemBuilder::new().operation(HttpMethod::Post, login_code).build())
        .path("/login", PathItemBuilder::new().operation(HttpMethod::Get, login).build())
        .path("/", PathItemBuilder::new().operation(HttpMethod::Get, page).build())
        .path(
            "/apis/ao.dev/v1alpha1/sessions/{name}/terminal",
            PathItemBuilder::new().operation(HttpMethod::Get, terminal).build(),
        )
        .path("/apis/ao.dev/v1alpha1/streams", PathItemBuilder::new().operation(HttpMethod::Get, streams).build())
        .path(
            "/apis/ao.dev/v1alpha1/sessions/{name}/diff",
            PathItemBuilder::new().operation(HttpMethod::Get, diff).build(),
        )
}

/// The agent API (docs/mcp.md): only a session's token opens it.
fn agent_api(mut paths: PathsBuilder) -> PathsBuilder {
    for (method, path, id, summary) in [
        (HttpMethod::Get, "status", "agentStatus", "The calling session's phase, activity, branch and pull request"),
        (HttpMethod::Post, "report", "agentReport", "Report progress and a summary (`{progress?, summary?}`)"),
        (HttpMethod::Post, "ask", "agentAsk", "Ask a person a question (`{question}`); answered by …/answer"),
        (
            HttpMethod::Post,
            "send",
            "agentSend",
            "Type a message into a session of the same project (`{session, text}`)",
        ),
        (HttpMethod::Post, "handoff", "agentHandoff", "Create a follow-up session in the same project (`{prompt}`)"),
        (HttpMethod::Post, "review", "agentReview", "Record a request for review (`{note?}`)"),
    ] {
        let o = op(id.into(), summary.into())
            .response("200", ResponseBuilder::new().description("`{message, details}`").build())
            .response("400", response("Bad arguments; nothing changed", "Status"))
            .response("401", response("Not a session token of this server", "Status"))
            .response("403", response("Another project's session", "Status"));
        paths = paths.path(format!("/agent/v1/{path}"), PathItemBuilder::new().operation(method, o).build());
    }
    paths
}

/// Component schemas for every kind, its list and `Status`, from schemars.
fn schemas() -> Value {
    let mut gen = schemars::generate::SchemaSettings::openapi3().into_generator();
    gen.subschema_for::<Project>();
    gen.subschema_for::<Session>();
    gen.subschema_for::<GitSource>();
    gen.subschema_for::<IssueSource>();
    gen.subschema_for::<Event>();
    let mut defs = gen.take_definitions(true);
    for kind in Kind::ALL {
        defs.insert(
            kind.list_kind().to_string(),
            json!({
                "type": "object",
                "required": ["apiVersion", "kind", "metadata", "items"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string", "enum": [kind.list_kind()]},
                    "metadata": {"type": "object", "properties": {"resourceVersion": {"type": "string"}}},
                    "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{}", kind.as_str())}},
                }
            }),
        );
    }
    defs.insert(
        "Table".into(),
        json!({
            "type": "object",
            "description": "Kubernetes' meta.k8s.io/v1 Table: the columns of the kind (priority 1: `-o wide` only) and a row per object",
            "required": ["apiVersion", "kind", "columnDefinitions", "rows"],
            "properties": {
                "apiVersion": {"type": "string", "enum": [aoctl_api::table::TABLE_API_VERSION]},
                "kind": {"type": "string", "enum": ["Table"]},
                "metadata": {"type": "object", "properties": {"resourceVersion": {"type": "string"}}},
                "columnDefinitions": {"type": "array", "items": {"type": "object", "required": ["name", "type"], "properties": {
                    "name": {"type": "string"},
                    "type": {"type": "string", "enum": ["string", "integer"]},
                    "format": {"type": "string"},
                    "description": {"type": "string"},
                    "priority": {"type": "integer"}
                }}},
                "rows": {"type": "array", "items": {"type": "object", "required": ["cells"], "properties": {
                    "cells": {"type": "array", "items": {}},
                    "object": {"type": "object"}
                }}}
            }
        }),
    );
    defs.insert(
        "Status".into(),
        json!({
            "type": "object",
            "required": ["kind", "code", "reason", "message"],
            "properties": {
                "kind": {"type": "string", "enum": ["Status"]},
                "apiVersion": {"type": "string"},
                "status": {"type": "string", "enum": ["Failure"]},
                "code": {"type": "integer"},
                "reason": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object", "properties": {
                    "name": {"type": "string"},
                    "kind": {"type": "string"},
                    "causes": {"type": "array", "items": {"type": "object", "properties": {
                        "field": {"type": "string"}, "message": {"type": "string"}, "reason": {"type": "string"}}}}
                }}
            }
        }),
    );
    Value::Object(defs)
}

pub(super) async fn document() -> Json<Value> {
    static DOC: OnceLock<Value> = OnceLock::new();
    Json(DOC.get_or_init(build).clone())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_reference_resolves() {
        let doc = super::build();
        let text = doc.to_string();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for r in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = &r[..r.find('"').unwrap()];
            assert!(schemas.contains_key(name), "dangling $ref to {name}");
        }
        assert!(doc["paths"]["/apis/ao.dev/v1alpha1/sessions/{name}/status"]["put"].is_object());
        assert!(doc["paths"]["/apis/ao.dev/v1alpha1/events"]["post"].is_null());
        assert!(doc["paths"]["/apis/ao.dev/v1alpha1/sessions/{name}/input"]["post"].is_object());
        assert!(doc["paths"]["/apis/ao.dev/v1alpha1/sessions/{name}/answer"]["post"].is_object());
        assert_eq!(
            doc["paths"]["/agent/v1/ask"]["post"]["security"],
            serde_json::json!([{"sessionToken": []}]),
            "the agent API takes a session's token only"
        );
        assert_eq!(doc["paths"]["/login"]["get"]["security"], serde_json::json!([]), "the sign-in link needs no token");
        assert_eq!(
            doc["paths"]["/dashboard/login"]["post"]["security"],
            serde_json::json!([{"bearer": []}]),
            "codes need the token"
        );
        let session = |sub: &str| doc["paths"][format!("/apis/ao.dev/v1alpha1/sessions/{{name}}/{sub}")]["get"].clone();
        assert!(session("terminal")["responses"]["101"].is_object());
        assert!(doc["paths"]["/apis/ao.dev/v1alpha1/streams"]["get"]["responses"]["101"].is_object());
        let backup = &doc["paths"]["/apis/ao.dev/v1alpha1/backup"]["get"];
        assert_eq!(backup["security"], serde_json::json!([{"bearer": []}]), "a backup takes the token only");
        assert!(backup["responses"]["200"]["content"][aoctl_api::backup::MEDIA_TYPE].is_object());
        assert!(session("diff")["responses"]["200"]["content"]["text/x-diff; charset=utf-8"].is_object());
        assert!(session("diff")["security"].is_null(), "the diff needs the token");
        assert_eq!(doc["security"][0]["bearer"], serde_json::json!([]));
        assert_eq!(doc["paths"]["/healthz"]["get"]["security"], serde_json::json!([]));
        assert!(doc["paths"]["/metrics"]["get"]["security"].is_null(), "/metrics needs the token");
        let list = &doc["paths"]["/apis/ao.dev/v1alpha1/sessions"]["get"]["responses"]["200"]["content"];
        assert_eq!(list[aoctl_api::table::TABLE_MEDIA_TYPE]["schema"]["$ref"], "#/components/schemas/Table");
    }
}
