//! Prometheus metrics of the reconcile engine, named like controller-runtime's with the `aoctl_` prefix.

use std::sync::Arc;

use prometheus::{
    exponential_buckets, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry,
};

/// The buckets of `aoctl_reconcile_duration_seconds`, as in controller-runtime.
const RECONCILE_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5,
    1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
];

/// The outcome of one reconcile, as the `result` label of `aoctl_reconcile_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReconcileResult {
    /// The reconcile succeeded and waits for a change.
    Success,
    /// The reconcile failed (or panicked).
    Error,
    /// The reconcile succeeded and asked to run again at once.
    Requeue,
    /// The reconcile succeeded and asked to run again after a delay.
    RequeueAfter,
}

impl ReconcileResult {
    /// Every result, for pre-initialising the label sets.
    const ALL: [ReconcileResult; 4] =
        [ReconcileResult::Success, ReconcileResult::Error, ReconcileResult::Requeue, ReconcileResult::RequeueAfter];

    /// Returns the label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ReconcileResult::Success => "success",
            ReconcileResult::Error => "error",
            ReconcileResult::Requeue => "requeue",
            ReconcileResult::RequeueAfter => "requeue_after",
        }
    }
}

/// The engine's metric families; register once per registry and share between controllers.
#[derive(Debug, Clone)]
pub struct Metrics {
    reconcile_total: IntCounterVec,
    reconcile_errors: IntCounterVec,
    reconcile_duration: HistogramVec,
    workqueue_depth: IntGaugeVec,
    workqueue_adds: IntCounterVec,
    workqueue_retries: IntCounterVec,
    workqueue_queue_duration: HistogramVec,
}

impl Metrics {
    /// Creates the engine's metric families and registers them in `registry`.
    pub fn register(registry: &Registry) -> Result<Arc<Metrics>, prometheus::Error> {
        let controller = &["controller"];
        let metrics = Metrics {
            reconcile_total: IntCounterVec::new(
                Opts::new("aoctl_reconcile_total", "Total number of reconciliations per controller and result."),
                &["controller", "result"],
            )?,
            reconcile_errors: IntCounterVec::new(
                Opts::new("aoctl_reconcile_errors_total", "Total number of reconciliation errors per controller."),
                controller,
            )?,
            reconcile_duration: HistogramVec::new(
                HistogramOpts::new(
                    "aoctl_reconcile_duration_seconds",
                    "Length of time per reconciliation per controller, in seconds.",
                )
                .buckets(RECONCILE_BUCKETS.to_vec()),
                controller,
            )?,
            workqueue_depth: IntGaugeVec::new(
                Opts::new("aoctl_workqueue_depth", "Current number of keys waiting in the workqueue."),
                controller,
            )?,
            workqueue_adds: IntCounterVec::new(
                Opts::new("aoctl_workqueue_adds_total", "Total number of adds handled by the workqueue."),
                controller,
            )?,
            workqueue_retries: IntCounterVec::new(
                Opts::new(
                    "aoctl_workqueue_retries_total",
                    "Total number of keys re-added with backoff after a failed reconciliation.",
                ),
                controller,
            )?,
            workqueue_queue_duration: HistogramVec::new(
                HistogramOpts::new(
                    "aoctl_workqueue_queue_duration_seconds",
                    "How long in seconds a key stays in the workqueue before a worker takes it.",
                )
                .buckets(exponential_buckets(1e-8, 10.0, 12)?),
                controller,
            )?,
        };
        registry.register(Box::new(metrics.reconcile_total.clone()))?;
        registry.register(Box::new(metrics.reconcile_errors.clone()))?;
        registry.register(Box::new(metrics.reconcile_duration.clone()))?;
        registry.register(Box::new(metrics.workqueue_depth.clone()))?;
        registry.register(Box::new(metrics.workqueue_adds.clone()))?;
        registry.register(Box::new(metrics.workqueue_retries.clone()))?;
        registry.register(Box::new(metrics.workqueue_queue_duration.clone()))?;
        Ok(Arc::new(metrics))
    }

    /// Creates every label set of the controller `name`, so that each series exists at zero from the start.
    pub(crate) fn init_controller(&self, name: &str) {
        self.controller(name);
    }

    /// Returns the series of the controller `name`, creating them when missing.
    pub(crate) fn controller(&self, name: &str) -> ControllerMetrics {
        let results =
            ReconcileResult::ALL.map(|result| self.reconcile_total.with_label_values(&[name, result.as_str()]));
        ControllerMetrics {
            results,
            errors: self.reconcile_errors.with_label_values(&[name]),
            duration: self.reconcile_duration.with_label_values(&[name]),
            retries: self.workqueue_retries.with_label_values(&[name]),
            queue: QueueMetrics {
                depth: self.workqueue_depth.with_label_values(&[name]),
                adds: self.workqueue_adds.with_label_values(&[name]),
                queue_duration: self.workqueue_queue_duration.with_label_values(&[name]),
            },
        }
    }
}

/// The series of one controller, bound to its label.
#[derive(Debug, Clone)]
pub(crate) struct ControllerMetrics {
    results: [IntCounter; 4],
    errors: IntCounter,
    duration: Histogram,
    retries: IntCounter,
    queue: QueueMetrics,
}

impl ControllerMetrics {
    /// Counts one finished reconcile with its result and duration in seconds.
    pub(crate) fn reconciled(&self, result: ReconcileResult, seconds: f64) {
        let index = ReconcileResult::ALL.iter().position(|r| *r == result).unwrap_or(0);
        self.results[index].inc();
        if result == ReconcileResult::Error {
            self.errors.inc();
        }
        self.duration.observe(seconds);
    }

    /// Counts one re-add after a failure.
    pub(crate) fn retried(&self) {
        self.retries.inc();
    }

    /// Returns the workqueue's series.
    pub(crate) fn queue(&self) -> QueueMetrics {
        self.queue.clone()
    }
}

/// The workqueue series of one controller.
#[derive(Debug, Clone)]
pub(crate) struct QueueMetrics {
    pub(crate) depth: IntGauge,
    pub(crate) adds: IntCounter,
    pub(crate) queue_duration: Histogram,
}

impl QueueMetrics {
    /// Returns the workqueue series of the controller `name` in `metrics`.
    #[cfg(test)]
    pub(crate) fn new(metrics: &Metrics, name: &str) -> QueueMetrics {
        metrics.controller(name).queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_controller_creates_every_series_at_zero() {
        let registry = Registry::new();
        let metrics = Metrics::register(&registry).unwrap();
        metrics.init_controller("session");
        let families = registry.gather();
        let names: Vec<&str> = families.iter().map(|f| f.name()).collect();
        for name in [
            "aoctl_reconcile_total",
            "aoctl_reconcile_errors_total",
            "aoctl_reconcile_duration_seconds",
            "aoctl_workqueue_depth",
            "aoctl_workqueue_adds_total",
            "aoctl_workqueue_retries_total",
            "aoctl_workqueue_queue_duration_seconds",
        ] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
        let total = families.iter().find(|f| f.name() == "aoctl_reconcile_total").unwrap();
        let mut results: Vec<&str> = total
            .get_metric()
            .iter()
            .map(|m| {
                assert_eq!(m.get_counter().value(), 0.0);
                m.get_label().iter().find(|l| l.name() == "result").unwrap().value()
            })
            .collect();
        results.sort_unstable();
        assert_eq!(results, ["error", "requeue", "requeue_after", "success"]);
        for family in &families {
            assert!(family.help().ends_with('.'), "help of {} is not a sentence", family.name());
        }
    }

    #[test]
    fn registering_twice_in_one_registry_fails() {
        let registry = Registry::new();
        Metrics::register(&registry).unwrap();
        assert!(Metrics::register(&registry).is_err());
    }
}
