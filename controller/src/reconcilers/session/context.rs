//! What the session reconciler gets: the store, the event recorder, the machine (runtimes,
//! workspaces, session files), the forges, the metrics, its own memory, the index of the sessions
//! and the hand-off to the notification worker. Assembled by `serve`;
//! tests assemble it with fakes of the machine.

use std::sync::Arc;

use aoctl_store::Store;

use super::index::SessionIndex;
use super::state::State;
use crate::forges::Hub;
use crate::machine::Machine;
use crate::metrics::Metrics;
use crate::recorder::Recorder;

pub(crate) struct Context {
    pub store: Store,
    pub recorder: Recorder,
    pub machine: Arc<dyn Machine>,
    /// The projects' forges and trackers, shared with the IssueSource reconciler: one rate
    /// budget per API URL and token.
    pub forges: Arc<Hub>,
    pub metrics: Arc<Metrics>,
    /// Shared with the webhook handler, which asks for a poll of a session's pull request.
    pub state: Arc<State>,
    /// The stored sessions by project, kept from the store's changes; shared with the project
    /// reconciler.
    pub index: Arc<SessionIndex>,
    /// The controller node this runs on (`aoctl serve --node`): the runtimes it starts that only
    /// this machine reaches are recorded as this node's (see `node`).
    pub node: String,
    /// Makes the token each agent gets for the agent API (`aoctl mcp`); `None` gives none.
    pub session_keys: Option<crate::agent_token::SessionKeys>,
    /// Hands a session whose written status records notifications to the worker that delivers them.
    pub outbox: crate::outbox::Handoff,
}
