//! The aoctl controller: reconcilers, the HTTP API, metrics, and `serve`, which wires them to
//! the store and the engine. Its modules are private; it exports what the `aoctl` binary uses
//! (`serve`, `restore`, the token file's name, the forges' default variables, the agent and
//! container a session resolves to).

mod activity_watch;
mod admission;
mod agent_token;
mod event_expiry;
mod fleet;
mod forges;
mod http;
mod input;
mod leader;
mod machine;
mod metrics;
mod node;
mod notifiers;
mod outbox;
mod reconcilers;
mod recorder;
mod restore;
mod serve;
mod typing;
mod wakeups;

pub use forges::{
    DEFAULT_GITLAB_TOKEN_ENV, DEFAULT_GITLAB_WEBHOOK_TOKEN_ENV, DEFAULT_TOKEN_ENV, DEFAULT_WEBHOOK_SECRET_ENV,
};
pub use machine::{agent_of, container_of};
pub use restore::{restore, RestoreError, RestoreOptions};
pub use serve::{serve, ServeError, ServeOptions, StoreBackend, TOKEN_FILE};

/// Version of this build, as `/version` and `aoctl version` report it.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
