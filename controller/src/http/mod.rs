//! The HTTP API (README.md, "HTTP API"): resource CRUD, status, merge-patch, watch, and the system
//! endpoints. `router(state)` builds all of it without a socket, so `tests.rs` drives the whole
//! router in process with `oneshot`; `serve` binds it to a socket.

mod access;
mod agent;
pub(crate) mod backup;
mod dashboard;
pub(crate) mod error;
mod login;
mod objects;
mod openapi;
mod orchestrator;
mod params;
pub(crate) mod patch;
mod sessions;
mod streams;
mod system;
mod terminal;
mod watch;
mod webhooks;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use aoctl_store::Store;
use axum::routing::get;
use axum::Router;

use crate::fleet::Fleet;
use crate::metrics::Metrics;
pub(crate) use access::Access;
pub(crate) use error::AppError;
pub(crate) use webhooks::Deliveries;

/// What every handler can reach.
#[derive(Clone)]
pub(crate) struct AppState {
    pub store: Store,
    pub metrics: Arc<Metrics>,
    pub fleet: Arc<Fleet>,
    /// Where a webhook asks the reconcilers to poll a session's pull request or a source's
    /// tracker at their next pass.
    pub wakeups: Arc<dyn crate::wakeups::Wakeups>,
    /// The projects' forges: a verified webhook tells them the project's webhooks work.
    pub forges: Arc<crate::forges::Hub>,
    /// Reconciles a session at once (webhooks).
    pub sessions: aoctl_engine::Trigger,
    /// Syncs a GitSource at once (push webhooks).
    pub gitsources: aoctl_engine::Trigger,
    /// Polls an IssueSource at once (issues webhooks).
    pub issuesources: aoctl_engine::Trigger,
    /// Set once the store is loaded and the controllers run.
    pub ready: Arc<AtomicBool>,
    /// The bearer token, the hosts served and the other access rules (docs/security.md).
    pub access: Arc<Access>,
    /// Webhook deliveries already taken, so a replayed one is acknowledged and ignored.
    pub deliveries: Arc<Deliveries>,
    /// Records the agent API's calls as Events.
    pub recorder: Arc<crate::recorder::Recorder>,
    /// Turns `true` when the server shuts down; open watch streams end then.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// The controller node this server runs on (`aoctl serve --node`): what touches a session's
    /// runtime or files is refused for a session whose runtime lives on another node.
    pub node: String,
    /// Whether this replica leads: only the leading replica types into agents (`crate::input`).
    pub leadership: crate::leader::Leadership,
}

/// The whole API as one router.
pub(crate) fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/apis/ao.dev/v1alpha1/{plural}", get(objects::list_or_watch).post(objects::create))
        // A page's watches and transcript follows over one WebSocket (`streams`).
        .route("/apis/ao.dev/v1alpha1/streams", get(streams::streams))
        // Every object at one resourceVersion, for `aoctl backup`; the bearer token only.
        .route("/apis/ao.dev/v1alpha1/backup", get(backup::backup))
        .route(
            "/apis/ao.dev/v1alpha1/{plural}/{name}",
            get(objects::get_one).put(objects::replace).patch(objects::patch).delete(objects::delete),
        )
        .route("/apis/ao.dev/v1alpha1/{plural}/{name}/status", get(objects::get_one).put(objects::replace_status))
        .route("/apis/ao.dev/v1alpha1/sessions/{name}/input", axum::routing::post(sessions::input))
        .route("/apis/ao.dev/v1alpha1/sessions/{name}/answer", axum::routing::post(sessions::answer))
        .route("/apis/ao.dev/v1alpha1/sessions/{name}/log", get(sessions::log))
        // The agent API: only a session's token opens it (`access::AGENT_PREFIX`).
        .route("/agent/v1/status", get(agent::status))
        .route("/agent/v1/report", axum::routing::post(agent::report))
        .route("/agent/v1/ask", axum::routing::post(agent::ask))
        .route("/agent/v1/send", axum::routing::post(agent::send))
        .route("/agent/v1/handoff", axum::routing::post(agent::handoff))
        .route("/agent/v1/review", axum::routing::post(agent::review))
        .route("/agent/v1/hello", axum::routing::post(agent::hello))
        .route("/agent/v1/orchestrator/spawn", axum::routing::post(orchestrator::spawn))
        .route("/agent/v1/orchestrator/sessions", get(orchestrator::list))
        .route("/agent/v1/orchestrator/sessions/{name}", axum::routing::delete(orchestrator::delete))
        .route("/agent/v1/orchestrator/sessions/{name}/transcript", get(orchestrator::transcript))
        .route("/agent/v1/orchestrator/sessions/{name}/diff", get(orchestrator::diff))
        .route("/agent/v1/orchestrator/sessions/{name}/send", axum::routing::post(orchestrator::send))
        .route("/agent/v1/orchestrator/sessions/{name}/stop", axum::routing::post(orchestrator::stop))
        .route("/agent/v1/orchestrator/sessions/{name}/resume", axum::routing::post(orchestrator::resume))
        .route("/agent/v1/orchestrator/sessions/{name}/review", axum::routing::post(orchestrator::review))
        .route("/agent/v1/orchestrator/sessions/{name}/merge", axum::routing::post(orchestrator::merge))
        .route("/agent/v1/orchestrator/sessions/{name}/answer", axum::routing::post(orchestrator::answer))
        .route("/apis/ao.dev/v1alpha1/sessions/{name}/terminal", get(terminal::terminal))
        .route("/apis/ao.dev/v1alpha1/sessions/{name}/diff", get(sessions::diff))
        .route("/readyz", get(system::readyz))
        .route("/metrics", get(system::metrics))
        .route("/version", get(system::version))
        .route("/openapi.json", get(openapi::document))
        .route("/healthz", get(system::healthz))
        .route("/", get(dashboard::index))
        .route("/assets/{*path}", get(dashboard::asset))
        .route("/dashboard/login", axum::routing::post(login::issue))
        .route("/login", get(login::login))
        // Webhooks carry their own HMAC instead of the bearer token (`access::OPEN_PATHS`).
        .route("/webhooks/github", axum::routing::post(webhooks::github))
        .route("/webhooks/gitlab", axum::routing::post(webhooks::gitlab))
        .route("/webhooks/linear", axum::routing::post(webhooks::linear))
        .fallback(|| async { AppError::NoRoute });
    // `layer`, not `route_layer`: unknown paths are checked too. No CORS layer: no page of another
    // origin may read an answer.
    api.layer(axum::middleware::from_fn_with_state(state.clone(), access::guard))
        .layer(axum::middleware::map_response(error::status_for_framework_errors))
        .with_state(state)
}

#[cfg(test)]
mod tests;
