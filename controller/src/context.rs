//! What every reconciler gets: the store, the event recorder, the fleet and the metrics.

use std::sync::Arc;

use aoctl_store::Store;

use crate::fleet::Fleet;
use crate::metrics::Metrics;
use crate::recorder::Recorder;

pub struct Ctx {
    pub store: Store,
    pub recorder: Recorder,
    pub fleet: Arc<Fleet>,
    pub github: crate::github::Hub,
    pub metrics: Arc<Metrics>,
}
