//! IssueSource reconciler: reads the project's tracker with the source's query and keeps one
//! Session per matching open issue (docs/gitops.md).

use std::sync::Arc;

use aoctl_api::IssueSource;
use aoctl_engine::Action;
use aoctl_store::Store;

use super::Error;
use crate::github::Hub;
use crate::recorder::Recorder;

/// Name of this controller in metrics and events.
pub const NAME: &str = "issuesource";

/// What the IssueSource reconciler gets.
pub struct Context {
    pub store: Store,
    pub recorder: Recorder,
    /// The session reconciler's GitHub clients: the same rate budget per API URL and token.
    pub github: Arc<Hub>,
}

pub async fn reconcile(source: Arc<IssueSource>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _ = &ctx;
    Ok(Action::requeue(source.spec.interval()))
}

pub fn error_policy(_source: Arc<IssueSource>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %error, kind = error.metric_label(), "issuesource reconcile failed");
    Action::requeue(std::time::Duration::ZERO)
}
