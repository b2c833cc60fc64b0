//! Tests of the controller's metrics, read back from the registry.

use super::*;

#[tokio::test(start_paused = true)]
async fn metrics_count_results_errors_retries_and_queue_activity() {
    let (registry, controller) = controller(config());
    let tracker = Arc::new(Tracker::default());
    let reconcile = instant(&tracker, move |key, run| match (key, run) {
        ("after", _) => Ok(Action::requeue(Duration::from_secs(3600))),
        ("now", 0) => Ok(Action::requeue(Duration::ZERO)),
        ("err", 0 | 1) => Err("boom".to_string()),
        _ => Ok(Action::await_change()),
    });
    let labels = [("controller", "test")];
    assert_eq!(metric(&registry, "aoctl_reconcile_total", &[("controller", "test"), ("result", "error")]), 0.0);
    let (_trigger, running) = spawn(controller, &["ok", "after", "now", "err"], reconcile);
    sleep(Duration::from_secs(30)).await;
    running.stop().await;

    let reconciles = |result| metric(&registry, "aoctl_reconcile_total", &[("controller", "test"), ("result", result)]);
    assert_eq!(reconciles("success"), 3.0, "ok, now's second run and err's third run");
    assert_eq!(reconciles("requeue"), 1.0);
    assert_eq!(reconciles("requeue_after"), 1.0);
    assert_eq!(reconciles("error"), 2.0);
    assert_eq!(metric(&registry, "aoctl_reconcile_errors_total", &labels), 2.0);
    assert_eq!(metric(&registry, "aoctl_workqueue_retries_total", &labels), 2.0);
    assert_eq!(metric(&registry, "aoctl_reconcile_duration_seconds", &labels), 7.0);
    assert_eq!(metric(&registry, "aoctl_workqueue_adds_total", &labels), 7.0, "four listed keys and three re-adds");
    assert_eq!(metric(&registry, "aoctl_workqueue_queue_duration_seconds", &labels), 7.0);
    assert_eq!(metric(&registry, "aoctl_workqueue_depth", &labels), 0.0);
}

#[tokio::test(start_paused = true)]
async fn depth_counts_waiting_keys_and_returns_to_zero() {
    let (registry, controller) = controller(Config { concurrency: 1, ..config() });
    let tracker = Arc::new(Tracker::default());
    let labels = [("controller", "test")];
    let (_trigger, running) = spawn(controller, &["a", "b", "c"], sleeping(&tracker, Duration::from_secs(1)));
    sleep(Duration::from_millis(500)).await;
    assert_eq!(metric(&registry, "aoctl_workqueue_depth", &labels), 2.0, "b and c wait while a runs");
    sleep(Duration::from_secs(3)).await;
    assert_eq!(metric(&registry, "aoctl_workqueue_depth", &labels), 0.0);
    running.stop().await;
    assert_eq!(metric(&registry, "aoctl_workqueue_queue_duration_seconds", &labels), 3.0);
}
