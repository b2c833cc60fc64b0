//! The aoctl reconcile engine: a kube-runtime-style controller loop for aoctl's resources.
//!
//! A [`Controller`] owns a workqueue of object keys. Watchers and other sources enqueue keys
//! through a cheap, cloneable [`Trigger`]; [`Controller::run`] lists every key once, then starts a
//! bounded pool of workers that fetch the newest object for a key and reconcile it. A key is never
//! reconciled by two workers at once, triggers coalesce, errors back off per key, and every key is
//! re-enqueued periodically (resync).
mod backoff;
mod controller;
mod metrics;
mod queue;

use std::time::Duration;

pub use controller::{Controller, Trigger};
pub use metrics::Metrics;

/// What the engine does with a key after its reconcile returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Reconciles the key again after `after`, or as soon as possible when `after` is zero.
    pub fn requeue(after: Duration) -> Action {
        Action { requeue_after: Some(after) }
    }

    /// Reconciles the key again only when it is triggered or resynced.
    pub fn await_change() -> Action {
        Action { requeue_after: None }
    }

    /// Returns the requeue delay, or `None` when the action waits for a change.
    pub fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }
}

/// Tuning of one controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The controller's name, used as the `controller` label and in log spans.
    pub name: &'static str,
    /// How many keys are reconciled at once at most (values below one count as one).
    pub concurrency: usize,
    /// How often every key is re-enqueued; zero turns the periodic resync off.
    pub resync: Duration,
    /// The backoff after the first error of a key; it doubles with each further error.
    pub backoff_base: Duration,
    /// The cap of the per-key backoff before jitter.
    pub backoff_max: Duration,
}

impl Config {
    /// Returns a config with default tuning: 4 workers, a 10-minute resync, a backoff from 500 ms to 5 minutes.
    pub fn new(name: &'static str) -> Config {
        Config {
            name,
            concurrency: 4,
            resync: Duration::from_secs(10 * 60),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(5 * 60),
        }
    }
}
