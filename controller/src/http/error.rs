//! One error type for every handler, rendered as a Kubernetes-style `Status` body.

use aoctl_api::wire::{Status, StatusCause, StatusDetails};
use aoctl_api::{DecodeError, FieldError, Kind};
use aoctl_store::StoreError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// Everything a request can fail with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The body is not valid JSON for the kind, or has unknown fields.
    #[error("{0}")]
    Decode(DecodeError),
    /// The body decoded but a field's value is not allowed.
    #[error("{kind} \"{name}\" is invalid: {}", .errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    Invalid { kind: Kind, name: String, errors: Vec<FieldError> },
    #[error("{0}")]
    BadRequest(String),
    #[error("the server could not find the requested resource")]
    NoRoute,
    #[error("Unauthorized: a valid bearer token is required (the server keeps it in the file `token` of its data directory, where aoctl finds it; elsewhere pass --token or AOCTL_TOKEN)")]
    Unauthorized,
    /// The agent API was called without a valid session token.
    #[error("Unauthorized: the agent API takes only a session's own token (AOCTL_SESSION_TOKEN in its agent's environment), of a session that still exists")]
    SessionUnauthorized,
    #[error("Unauthorized: X-Hub-Signature-256 is missing or does not match the webhook secret of a project for this repository")]
    BadSignature,
    /// Refused by the access rules (host, origin) whoever asks.
    #[error("Forbidden: {0}")]
    Forbidden(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("the server is starting; try again shortly")]
    NotReady,
    /// The store's disk refuses writes (full, failing); reads still work.
    #[error("not ready: the store cannot write: {0}")]
    StoreUnwritable(StoreError),
    /// The session has no running agent to talk to.
    #[error("{0}")]
    NotRunning(String),
    /// What was asked for does not exist in the object's current state (a session without a
    /// workspace yet, a base branch that is gone).
    #[error("{0}")]
    Conflict(String),
    /// A WebSocket endpoint was asked something that is not a WebSocket handshake.
    #[error("{message}")]
    NotWebSocket { code: u16, message: String },
    #[error(transparent)]
    Runtime(#[from] aoctl_runtimes::RuntimeError),
    /// A call past a bound the caller is held to (an orchestrator's limits): nothing was done.
    #[error("{0}")]
    LimitReached(String),
    #[error("{0}")]
    Internal(String),
}

impl AppError {
    fn code_and_reason(&self) -> (u16, &'static str) {
        match self {
            AppError::Store(e) => (e.code(), e.reason()),
            AppError::Decode(_) | AppError::BadRequest(_) => (400, "BadRequest"),
            AppError::Invalid { .. } => (422, "Invalid"),
            AppError::NoRoute => (404, "NotFound"),
            AppError::Unauthorized | AppError::SessionUnauthorized | AppError::BadSignature => (401, "Unauthorized"),
            AppError::Forbidden(_) => (403, "Forbidden"),
            AppError::UnsupportedMediaType(_) => (415, "UnsupportedMediaType"),
            AppError::NotReady | AppError::StoreUnwritable(_) => (503, "ServiceUnavailable"),
            AppError::NotRunning(_) | AppError::Conflict(_) => (409, "Conflict"),
            AppError::NotWebSocket { code, .. } => match code {
                405 => (405, "MethodNotAllowed"),
                426 => (426, "UpgradeRequired"),
                _ => (400, "BadRequest"),
            },
            AppError::Runtime(e) => match e {
                aoctl_runtimes::RuntimeError::Unavailable { .. } => (503, "ServiceUnavailable"),
                aoctl_runtimes::RuntimeError::NotFound { .. } => (409, "Conflict"),
                aoctl_runtimes::RuntimeError::NotDelivered { .. } => (504, "Timeout"),
                _ => (500, "InternalError"),
            },
            AppError::LimitReached(_) => (429, "TooManyRequests"),
            AppError::Internal(_) => (500, "InternalError"),
        }
    }

    /// The `Status` body.
    pub(crate) fn status(&self) -> Status {
        let (code, reason) = self.code_and_reason();
        let mut status = Status::failure(code, reason, self.to_string());
        let about = |kind: &Kind, name: &str, causes: Vec<StatusCause>| StatusDetails {
            kind: Some(kind.plural().to_string()),
            name: Some(name.to_string()),
            causes,
        };
        status.details = match self {
            AppError::Decode(d) => Some(StatusDetails {
                causes: vec![StatusCause {
                    field: d.field.clone(),
                    message: d.message.clone(),
                    line: d.line,
                    column: d.line.and(d.column),
                    ..StatusCause::default()
                }],
                ..StatusDetails::default()
            }),
            AppError::Invalid { kind, name, errors } => {
                let causes = errors
                    .iter()
                    .map(|e| StatusCause {
                        reason: Some("FieldValueInvalid".into()),
                        field: Some(e.field.clone()),
                        message: e.message.clone(),
                        ..StatusCause::default()
                    })
                    .collect();
                Some(about(kind, name, causes))
            }
            AppError::Store(
                StoreError::NotFound { kind, name }
                | StoreError::AlreadyExists { kind, name }
                | StoreError::Conflict { kind, name, .. },
            ) => Some(about(kind, name, vec![])),
            _ => None,
        };
        status
    }

    pub(crate) fn code(&self) -> u16 {
        self.code_and_reason().0
    }
}

/// Errors axum answers by itself (405, 413, …) get a `Status` body like every other error.
pub(crate) async fn status_for_framework_errors(resp: Response) -> Response {
    let code = resp.status();
    // JSON is ours already; HTML is the dashboard's own pages (sign-in), written for people.
    let ours = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/html"));
    if !(code.is_client_error() || code.is_server_error()) || ours {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 64 << 10).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_string();
    let reason = match code.as_u16() {
        405 => "MethodNotAllowed",
        413 => "RequestEntityTooLarge",
        403 => "Forbidden",
        415 => "UnsupportedMediaType",
        400 | 422 => "BadRequest",
        404 => "NotFound",
        c if c >= 500 => "InternalError",
        _ => "BadRequest",
    };
    let message = if text.is_empty() { code.canonical_reason().unwrap_or("error").to_string() } else { text };
    let body = Status::failure(code.as_u16(), reason, message);
    let mut resp = (code, Json(body)).into_response();
    for (k, v) in parts.headers.iter().filter(|(k, _)| *k == axum::http::header::ALLOW) {
        resp.headers_mut().insert(k, v.clone());
    }
    resp
}

impl From<crate::admission::AdmissionError> for AppError {
    fn from(e: crate::admission::AdmissionError) -> AppError {
        match e {
            crate::admission::AdmissionError::Invalid { kind, name, errors } => {
                AppError::Invalid { kind, name, errors }
            }
            crate::admission::AdmissionError::Store(e) => AppError::Store(e),
        }
    }
}

impl From<axum::extract::ws::rejection::WebSocketUpgradeRejection> for AppError {
    fn from(r: axum::extract::ws::rejection::WebSocketUpgradeRejection) -> AppError {
        let message = format!("this endpoint takes a WebSocket handshake: {}", r.body_text());
        AppError::NotWebSocket { code: r.status().as_u16(), message }
    }
}

impl From<axum::extract::rejection::QueryRejection> for AppError {
    fn from(r: axum::extract::rejection::QueryRejection) -> AppError {
        AppError::BadRequest(r.body_text())
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if code.is_server_error() {
            tracing::error!(error = %self, "request failed");
        }
        (code, Json(self.status())).into_response()
    }
}
