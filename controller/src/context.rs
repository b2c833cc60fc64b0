//! What every reconciler gets: the store, the event recorder and the metrics.

use std::sync::Arc;

use aoctl_store::Store;

use crate::metrics::Metrics;
use crate::recorder::Recorder;

pub struct Ctx {
    pub store: Store,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
}
