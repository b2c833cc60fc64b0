//! What every reconciler gets: the store, the event recorder, the fleet, the metrics and what the
//! session reconciler remembers between reconciles.

use std::sync::{Arc, Mutex};

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
    /// Lives as long as this controller: a restarted one starts with nothing remembered.
    pub session_memory: Mutex<crate::reconcilers::session::Memory>,
}
