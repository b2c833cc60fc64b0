//! Tests of error handling: per-key exponential backoff, the error policy and panics.

use super::*;

/// Returns whether `gap` lies within the jitter around `nominal` seconds.
fn within_jitter(gap: Duration, nominal: f64) -> bool {
    let seconds = gap.as_secs_f64();
    seconds >= nominal * (1.0 - crate::backoff::JITTER) - 1e-6
        && seconds <= nominal * (1.0 + crate::backoff::JITTER) + 1e-6
}

#[tokio::test(start_paused = true)]
async fn errors_back_off_exponentially_per_key_capped_and_reset_after_success() {
    let (registry, controller) = controller(config());
    let tracker = Arc::new(Tracker::default());
    // Key "a" fails five times, succeeds with a requeue, fails once more and then succeeds for good.
    // Key "b" fails once, later, and then succeeds.
    let reconcile = instant(&tracker, move |key, run| match (key, run) {
        ("a", 0..=4 | 6) | ("b", 0) => Err(format!("run {run} of {key} failed")),
        ("a", 5) => Ok(Action::requeue(Duration::from_secs(10))),
        _ => Ok(Action::await_change()),
    });
    let (trigger, running) = spawn(controller, &["a"], reconcile);
    sleep(Duration::from_secs(20)).await;
    trigger.trigger("b");
    sleep(Duration::from_secs(100)).await;
    running.stop().await;

    let runs = tracker.runs("a");
    assert_eq!(runs.len(), 8);
    let gaps: Vec<Duration> = runs.windows(2).map(|w| w[1] - w[0]).collect();
    for (i, nominal) in [1.0, 2.0, 4.0, 8.0, 8.0].into_iter().enumerate() {
        assert!(within_jitter(gaps[i], nominal), "gap {i} is {:?}, expected about {nominal} s", gaps[i]);
    }
    assert_eq!(gaps[5], Duration::from_secs(10), "a successful requeue uses its own delay");
    assert!(within_jitter(gaps[6], 1.0), "backoff did not reset after a success: {:?}", gaps[6]);

    let runs = tracker.runs("b");
    assert_eq!(runs.len(), 2);
    assert!(within_jitter(runs[1] - runs[0], 1.0), "backoff of b depends on a's failures");

    assert_eq!(metric(&registry, "aoctl_reconcile_errors_total", &[("controller", "test")]), 7.0);
    assert_eq!(metric(&registry, "aoctl_workqueue_retries_total", &[("controller", "test")]), 7.0);
}

#[tokio::test(start_paused = true)]
async fn the_error_policy_delay_wins_over_a_shorter_backoff_and_await_change_stops_retries() {
    let (registry, controller) = controller(config());
    let tracker = Arc::new(Tracker::default());
    let reconcile = instant(&tracker, move |key, _| Err::<Action, _>(format!("{key} always fails")));
    let policy = |key: Arc<String>, err: &String, _: Arc<()>| {
        assert!(err.starts_with(key.as_str()));
        if key.as_str() == "slow" {
            Action::requeue(Duration::from_secs(30))
        } else {
            Action::await_change()
        }
    };
    let (stop, shutdown) = shutdown_signal();
    let task =
        tokio::spawn(controller.run(fetch_all, list(&["slow", "once"]), reconcile, policy, Arc::new(()), shutdown));
    sleep(Duration::from_secs(100)).await;
    Running { stop, task }.stop().await;

    assert_eq!(tracker.runs("once").len(), 1, "await_change from the policy must not retry");
    let runs = tracker.runs("slow");
    assert_eq!(runs.len(), 4, "slow should run at 0, 30, 60 and 90 s");
    assert!(runs.windows(2).all(|w| w[1] - w[0] == Duration::from_secs(30)));
    assert_eq!(metric(&registry, "aoctl_reconcile_errors_total", &[("controller", "test")]), 5.0);
    assert_eq!(metric(&registry, "aoctl_workqueue_retries_total", &[("controller", "test")]), 4.0);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_reconcile_counts_as_an_error_and_is_retried() {
    let (registry, controller) = controller(Config { concurrency: 1, ..config() });
    let tracker = Arc::new(Tracker::default());
    let reconcile = {
        let tracker = tracker.clone();
        move |key: Arc<String>, _| {
            let tracker = tracker.clone();
            async move {
                tracker.start(&key);
                tracker.finish(&key);
                if tracker.runs(&key).len() == 1 {
                    panic!("reconcile of {key} panicked");
                }
                Ok::<_, String>(Action::await_change())
            }
        }
    };
    let (_trigger, running) = spawn(controller, &["a"], reconcile);
    sleep(Duration::from_secs(5)).await;
    running.stop().await;
    let runs = tracker.runs("a");
    assert_eq!(runs.len(), 2, "the key is retried after a panic");
    assert!(within_jitter(runs[1] - runs[0], 1.0));
    let reconciles = |result| metric(&registry, "aoctl_reconcile_total", &[("controller", "test"), ("result", result)]);
    assert_eq!((reconciles("error"), reconciles("success")), (1.0, 1.0));
}
