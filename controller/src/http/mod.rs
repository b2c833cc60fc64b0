//! The HTTP API (DESIGN §4): resource CRUD, status, merge-patch, watch, and the system endpoints.
//! `router(state)` builds everything without a socket so handlers are tested with `oneshot`.

mod auth;
pub mod error;
mod objects;
mod openapi;
pub mod patch;
mod sessions;
mod system;
mod watch;
mod webhooks;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use aoctl_store::Store;
use axum::routing::get;
use axum::Router;

use crate::fleet::Fleet;
use crate::metrics::Metrics;
pub use error::AppError;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub metrics: Arc<Metrics>,
    pub fleet: Arc<Fleet>,
    /// Reconciles a session at once (webhooks).
    pub sessions: aoctl_engine::Trigger,
    /// Set once the store is loaded and the controllers run.
    pub ready: Arc<AtomicBool>,
    /// Bearer token every request but `/healthz` must carry, when set.
    pub token: Option<Arc<str>>,
    /// Turns `true` when the server shuts down; open watch streams end then.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}

/// The whole API as one router.
pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/apis/ao.dev/v1alpha1/{plural}", get(objects::list_or_watch).post(objects::create))
        .route(
            "/apis/ao.dev/v1alpha1/{plural}/{name}",
            get(objects::get_one).put(objects::replace).patch(objects::patch).delete(objects::delete),
        )
        .route("/apis/ao.dev/v1alpha1/{plural}/{name}/status", get(objects::get_one).put(objects::replace_status))
        .route("/apis/ao.dev/v1alpha1/sessions/{name}/input", axum::routing::post(sessions::input))
        .route("/apis/ao.dev/v1alpha1/sessions/{name}/log", get(sessions::log))
        .route("/readyz", get(system::readyz))
        .route("/metrics", get(system::metrics))
        .route("/version", get(system::version))
        .route("/openapi.json", get(openapi::document))
        .fallback(|| async { AppError::NoRoute })
        // `layer`, not `route_layer`: unknown paths need the token too.
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::require_token));
    // Webhooks carry their own HMAC instead of the bearer token.
    Router::new()
        .route("/healthz", get(system::healthz))
        .route("/webhooks/github", axum::routing::post(webhooks::github))
        .merge(api)
        .layer(axum::middleware::map_response(error::status_for_framework_errors))
        .with_state(state)
}
