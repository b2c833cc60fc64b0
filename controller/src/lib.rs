//! The aoctl controller: reconcilers, the HTTP API, metrics, and `serve`, which wires them to
//! the store and the engine.

pub mod activity_watch;
pub mod admission;
pub mod agent_token;
pub mod event_expiry;
pub mod fleet;
pub mod forges;
pub mod http;
pub mod input;
pub mod leader;
pub mod machine;
pub mod metrics;
pub mod node;
pub mod notify;
pub mod outbox;
pub mod reconcilers;
pub mod recorder;
pub mod restore;
mod serve;
pub mod typing;
pub mod wakeups;

pub use serve::{serve, serve_on, ServeError, ServeOptions, StoreBackend, TOKEN_FILE};

/// Version of this build, as `/version` and `aoctl version` report it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
