//! `/healthz`, `/readyz`, `/metrics` and `/version`.

use std::sync::atomic::Ordering;

use aoctl_api::wire::Version;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;

use super::{AppError, AppState};

pub(super) async fn healthz() -> &'static str {
    "ok"
}

/// Ready once the controllers run, and while the store can write: a store whose disk refuses
/// writes (full, say) makes it 503 with the reason, until a write succeeds again.
pub(super) async fn readyz(State(state): State<AppState>) -> Result<&'static str, AppError> {
    if !state.ready.load(Ordering::Acquire) {
        return Err(AppError::NotReady);
    }
    state.store.writable().map_err(AppError::StoreUnwritable)?;
    Ok("ok")
}

pub(super) async fn metrics(State(state): State<AppState>) -> Result<impl IntoResponse, AppError> {
    state.metrics.refresh_sessions(&state.store).await?;
    Ok(([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], state.metrics.render()))
}

pub(super) async fn version() -> Json<Version> {
    Json(Version {
        version: crate::VERSION.to_string(),
        api_version: aoctl_api::API_VERSION.to_string(),
        platform: format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}
