//! Tests of the controller loop on tokio's paused clock, with a test harness shared by its submodules.

mod errors;
mod metrics;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus::proto::MetricType;
use prometheus::Registry;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

use super::{Controller, Trigger};
use crate::{Action, Config, Metrics};

/// Returns a test config: 4 workers, no resync within a test, a 1 s backoff capped at 8 s.
fn config() -> Config {
    Config {
        concurrency: 4,
        resync: Duration::from_secs(3600),
        backoff_base: Duration::from_secs(1),
        backoff_max: Duration::from_secs(8),
        ..Config::new("test")
    }
}

/// Creates a registry and a controller of string objects registered in it.
fn controller(config: Config) -> (Registry, Controller<String>) {
    let registry = Registry::new();
    let metrics = Metrics::register(&registry).unwrap();
    (registry, Controller::new(config, metrics))
}

/// A controller running in a spawned task.
struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Running {
    /// Resolves the shutdown future and waits for `run` to return.
    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.task.await.unwrap();
    }
}

/// Returns a shutdown future resolved by the returned sender.
fn shutdown_signal() -> (oneshot::Sender<()>, impl Future<Output = ()>) {
    let (tx, rx) = oneshot::channel::<()>();
    (tx, async move {
        let _ = rx.await;
    })
}

/// Returns a key lister that always lists `keys`.
fn list(keys: &[&str]) -> impl Fn() -> std::future::Ready<Vec<String>> {
    let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    move || std::future::ready(keys.clone())
}

/// Fetches an object equal to its key, for every key.
fn fetch_all(key: String) -> std::future::Ready<Option<Arc<String>>> {
    std::future::ready(Some(Arc::new(key)))
}

/// Spawns `controller` with objects equal to their keys and an error policy of `requeue(0)`.
fn spawn<R, RFut>(controller: Controller<String>, keys: &[&str], reconcile: R) -> (Trigger, Running)
where
    R: Fn(Arc<String>, Arc<()>) -> RFut + Send + Sync + 'static,
    RFut: Future<Output = Result<Action, String>> + Send + 'static,
{
    let trigger = controller.handle();
    let (stop, shutdown) = shutdown_signal();
    let policy = |_: Arc<String>, _: &String, _: Arc<()>| Action::requeue(Duration::ZERO);
    let task = tokio::spawn(controller.run(fetch_all, list(keys), reconcile, policy, Arc::new(()), shutdown));
    (trigger, Running { stop, task })
}

/// Counts runs and concurrent runs, overall and per key.
#[derive(Default)]
struct Tracker {
    runs: Mutex<HashMap<String, Vec<Instant>>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    per_key: Mutex<HashMap<String, (usize, usize)>>,
}

impl Tracker {
    /// Records the start of a run of `key`.
    fn start(&self, key: &str) {
        self.runs.lock().entry(key.to_owned()).or_default().push(Instant::now());
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let mut per_key = self.per_key.lock();
        let (current, max) = per_key.entry(key.to_owned()).or_default();
        *current += 1;
        *max = (*max).max(*current);
    }

    /// Records the end of a run of `key`.
    fn finish(&self, key: &str) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.per_key.lock().get_mut(key).unwrap().0 -= 1;
    }

    /// Returns the start times of `key`'s runs.
    fn runs(&self, key: &str) -> Vec<Instant> {
        self.runs.lock().get(key).cloned().unwrap_or_default()
    }

    /// Returns the most runs of `key` that overlapped.
    fn max_per_key(&self, key: &str) -> usize {
        self.per_key.lock().get(key).map_or(0, |(_, max)| *max)
    }
}

/// The boxed future of a test reconcile.
type Reconciling = std::pin::Pin<Box<dyn Future<Output = Result<Action, String>> + Send>>;

/// Returns a reconcile that records each run as instant and answers what `decide` says of the
/// key and the run's index (0 for the first).
fn instant(
    tracker: &Arc<Tracker>,
    decide: impl Fn(&str, usize) -> Result<Action, String> + Send + Sync + 'static,
) -> impl Fn(Arc<String>, Arc<()>) -> Reconciling + Send + Sync {
    let tracker = tracker.clone();
    move |key, _| {
        tracker.start(&key);
        tracker.finish(&key);
        let answer = decide(&key, tracker.runs(&key).len() - 1);
        Box::pin(std::future::ready(answer))
    }
}

/// Returns a reconcile that tracks its runs, sleeps `busy` and then waits for a change.
fn sleeping(tracker: &Arc<Tracker>, busy: Duration) -> impl Fn(Arc<String>, Arc<()>) -> Reconciling + Send + Sync {
    let tracker = tracker.clone();
    move |key, _| {
        let tracker = tracker.clone();
        Box::pin(async move {
            tracker.start(&key);
            sleep(busy).await;
            tracker.finish(&key);
            Ok(Action::await_change())
        })
    }
}

/// Reads a counter or gauge value, or a histogram's sample count, of the series with `labels`.
fn metric(registry: &Registry, name: &str, labels: &[(&str, &str)]) -> f64 {
    let families = registry.gather();
    let family = families.iter().find(|f| f.name() == name).unwrap_or_else(|| panic!("{name} is missing"));
    let series = family
        .get_metric()
        .iter()
        .find(|m| labels.iter().all(|(k, v)| m.get_label().iter().any(|l| l.name() == *k && l.value() == *v)))
        .unwrap_or_else(|| panic!("{name}{labels:?} is missing"));
    match family.get_field_type() {
        MetricType::COUNTER => series.get_counter().value(),
        MetricType::GAUGE => series.get_gauge().value(),
        MetricType::HISTOGRAM => series.get_histogram().sample_count() as f64,
        other => panic!("unexpected metric type {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn one_reconcile_per_key_even_under_many_triggers() {
    let (_registry, controller) = controller(Config { concurrency: 8, ..config() });
    let tracker = Arc::new(Tracker::default());
    let keys = ["a", "b", "c"];
    let (trigger, running) = spawn(controller, &keys, sleeping(&tracker, Duration::from_millis(100)));
    for _ in 0..50 {
        for key in keys {
            trigger.trigger(key);
            trigger.trigger(key);
        }
        sleep(Duration::from_millis(30)).await;
    }
    sleep(Duration::from_secs(1)).await;
    running.stop().await;
    for key in keys {
        assert_eq!(tracker.max_per_key(key), 1, "{key} was reconciled concurrently");
        assert!(tracker.runs(key).len() >= 10, "{key} ran only {} times", tracker.runs(key).len());
    }
    assert!(tracker.max_in_flight.load(Ordering::SeqCst) > 1, "different keys should run in parallel");
}

#[tokio::test(start_paused = true)]
async fn triggers_during_a_reconcile_coalesce_into_one_follow_up() {
    let (_registry, controller) = controller(config());
    let tracker = Arc::new(Tracker::default());
    let (trigger, running) = spawn(controller, &["a"], sleeping(&tracker, Duration::from_secs(1)));
    sleep(Duration::from_millis(100)).await;
    assert_eq!(tracker.runs("a").len(), 1);
    for _ in 0..10 {
        trigger.trigger("a");
    }
    sleep(Duration::from_secs(10)).await;
    let runs = tracker.runs("a");
    assert_eq!(runs.len(), 2, "ten triggers during a run should cause exactly one follow-up");
    assert_eq!(runs[1] - runs[0], Duration::from_secs(1), "the follow-up starts when the first run ends");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn global_concurrency_is_bounded() {
    let (_registry, controller) = controller(Config { concurrency: 3, ..config() });
    let tracker = Arc::new(Tracker::default());
    let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let start = Instant::now();
    let (_trigger, running) = spawn(controller, &key_refs, sleeping(&tracker, Duration::from_secs(1)));
    sleep(Duration::from_secs(10)).await;
    running.stop().await;
    assert_eq!(tracker.max_in_flight.load(Ordering::SeqCst), 3);
    let mut last_start = start;
    for key in &keys {
        let runs = tracker.runs(key);
        assert_eq!(runs.len(), 1, "{key} should run once");
        last_start = last_start.max(runs[0]);
    }
    assert_eq!(last_start - start, Duration::from_secs(3), "ten one-second runs on three workers start in four waves");
}

#[tokio::test(start_paused = true)]
async fn requeue_after_reruns_after_the_delay_and_not_before() {
    let (_registry, controller) = controller(config());
    let tracker = Arc::new(Tracker::default());
    let reconcile = instant(&tracker, move |_, run| {
        let first = run == 0;
        Ok(if first { Action::requeue(Duration::from_secs(10)) } else { Action::await_change() })
    });
    let (_trigger, running) = spawn(controller, &["a"], reconcile);
    sleep(Duration::from_millis(9_999)).await;
    assert_eq!(tracker.runs("a").len(), 1, "the requeue fired early");
    sleep(Duration::from_millis(2)).await;
    let runs = tracker.runs("a");
    assert_eq!(runs.len(), 2, "the requeue did not fire");
    assert_eq!(runs[1] - runs[0], Duration::from_secs(10));
    sleep(Duration::from_secs(600)).await;
    assert_eq!(tracker.runs("a").len(), 2, "await_change must not requeue");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn resync_reenqueues_every_key_periodically() {
    let (_registry, controller) = controller(Config { resync: Duration::from_secs(60), ..config() });
    let tracker = Arc::new(Tracker::default());
    let listed = Arc::new(AtomicUsize::new(0));
    let keys = {
        let listed = listed.clone();
        move || {
            listed.fetch_add(1, Ordering::SeqCst);
            std::future::ready(vec!["a".to_string(), "b".to_string()])
        }
    };
    let (stop, shutdown) = shutdown_signal();
    let policy = |_: Arc<String>, _: &String, _: Arc<()>| Action::await_change();
    let reconcile = sleeping(&tracker, Duration::ZERO);
    let task = tokio::spawn(controller.run(fetch_all, keys, reconcile, policy, Arc::new(()), shutdown));
    sleep(Duration::from_secs(59)).await;
    assert_eq!((tracker.runs("a").len(), tracker.runs("b").len()), (1, 1));
    sleep(Duration::from_secs(150)).await;
    assert_eq!(listed.load(Ordering::SeqCst), 4, "one list at start and one per resync");
    for key in ["a", "b"] {
        let runs = tracker.runs(key);
        assert_eq!(runs.len(), 4, "{key} should run at 0, 60, 120 and 180 s");
        assert!(runs.windows(2).all(|w| w[1] - w[0] == Duration::from_secs(60)));
    }
    Running { stop, task }.stop().await;
}

#[tokio::test(start_paused = true)]
async fn keys_are_listed_before_any_worker_starts() {
    let (_registry, controller) = controller(config());
    controller.handle().trigger("early");
    let listed = Arc::new(AtomicBool::new(false));
    let keys = {
        let listed = listed.clone();
        move || {
            let listed = listed.clone();
            async move {
                sleep(Duration::from_secs(1)).await;
                listed.store(true, Ordering::SeqCst);
                vec!["a".to_string()]
            }
        }
    };
    let fetched = Arc::new(Mutex::new(Vec::new()));
    let fetch = {
        let (listed, fetched) = (listed.clone(), fetched.clone());
        move |key: String| {
            fetched.lock().push((key.clone(), listed.load(Ordering::SeqCst)));
            std::future::ready(Some(Arc::new(key)))
        }
    };
    let (stop, shutdown) = shutdown_signal();
    let tracker = Arc::new(Tracker::default());
    let policy = |_: Arc<String>, _: &String, _: Arc<()>| Action::await_change();
    let reconcile = sleeping(&tracker, Duration::ZERO);
    let task = tokio::spawn(controller.run(fetch, keys, reconcile, policy, Arc::new(()), shutdown));
    sleep(Duration::from_secs(5)).await;
    Running { stop, task }.stop().await;
    let mut fetched = fetched.lock().clone();
    fetched.sort();
    assert_eq!(fetched, [("a".to_string(), true), ("early".to_string(), true)]);
}

#[tokio::test(start_paused = true)]
async fn a_gone_object_is_skipped_without_error() {
    let (registry, controller) = controller(config());
    let trigger = controller.handle();
    let tracker = Arc::new(Tracker::default());
    let policy_calls = Arc::new(AtomicUsize::new(0));
    let fetch = |key: String| std::future::ready((key != "gone").then(|| Arc::new(key)));
    let policy = {
        let policy_calls = policy_calls.clone();
        move |_: Arc<String>, _: &String, _: Arc<()>| {
            policy_calls.fetch_add(1, Ordering::SeqCst);
            Action::await_change()
        }
    };
    let (stop, shutdown) = shutdown_signal();
    let reconcile = sleeping(&tracker, Duration::ZERO);
    let task = tokio::spawn(controller.run(fetch, list(&["gone", "here"]), reconcile, policy, Arc::new(()), shutdown));
    sleep(Duration::from_secs(1)).await;
    trigger.trigger("gone");
    sleep(Duration::from_secs(1)).await;
    Running { stop, task }.stop().await;
    assert_eq!(tracker.runs("gone").len(), 0);
    assert_eq!(tracker.runs("here").len(), 1);
    assert_eq!(policy_calls.load(Ordering::SeqCst), 0);
    let reconciles = |result| metric(&registry, "aoctl_reconcile_total", &[("controller", "test"), ("result", result)]);
    assert_eq!((reconciles("success"), reconciles("error")), (1.0, 0.0));
    assert_eq!(metric(&registry, "aoctl_reconcile_errors_total", &[("controller", "test")]), 0.0);
    assert_eq!(metric(&registry, "aoctl_workqueue_retries_total", &[("controller", "test")]), 0.0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_drains_in_flight_reconciles_and_starts_no_new_ones() {
    let (registry, controller) = controller(Config { concurrency: 1, ..config() });
    let trigger = controller.handle();
    let tracker = Arc::new(Tracker::default());
    let finished = Arc::new(AtomicUsize::new(0));
    let reconcile = {
        let (tracker, finished) = (tracker.clone(), finished.clone());
        move |key: Arc<String>, _| {
            let (tracker, finished) = (tracker.clone(), finished.clone());
            async move {
                tracker.start(&key);
                sleep(Duration::from_secs(5)).await;
                tracker.finish(&key);
                finished.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(Action::requeue(Duration::ZERO))
            }
        }
    };
    let policy = |_: Arc<String>, _: &String, _: Arc<()>| Action::await_change();
    let start = Instant::now();
    controller.run(fetch_all, list(&["a", "b"]), reconcile, policy, Arc::new(()), sleep(Duration::from_secs(1))).await;
    assert_eq!(start.elapsed(), Duration::from_secs(5), "run returns once the in-flight reconcile finished");
    assert_eq!(finished.load(Ordering::SeqCst), 1, "the in-flight reconcile ran to its end");
    let adds = metric(&registry, "aoctl_workqueue_adds_total", &[("controller", "test")]);
    trigger.trigger("c");
    assert_eq!(metric(&registry, "aoctl_workqueue_adds_total", &[("controller", "test")]), adds);
    sleep(Duration::from_secs(60)).await;
    assert_eq!(tracker.runs("a").len() + tracker.runs("b").len(), 1, "no reconcile starts after shutdown");
    assert!(tracker.runs("c").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_resumed_controller_takes_its_handles_triggers_again() {
    let registry = Registry::new();
    let metrics = Metrics::register(&registry).unwrap();
    let first = Controller::<String>::new(config(), metrics.clone());
    let tracker = Arc::new(Tracker::default());
    let (trigger, running) = spawn(first, &["a"], sleeping(&tracker, Duration::from_millis(10)));
    sleep(Duration::from_secs(1)).await;
    running.stop().await;
    // Between the two runs the handle's triggers are ignored.
    trigger.trigger("ignored");
    let again = Controller::<String>::resume(config(), metrics, &trigger);
    let (_, running) = spawn(again, &["b"], sleeping(&tracker, Duration::from_millis(10)));
    trigger.trigger("c");
    sleep(Duration::from_secs(1)).await;
    running.stop().await;
    assert_eq!(tracker.runs("a").len(), 1, "{:?}", tracker.runs.lock());
    assert_eq!(tracker.runs("b").len(), 1, "the second run lists its keys");
    assert_eq!(tracker.runs("c").len(), 1, "the old handle reaches the second run");
    assert!(tracker.runs("ignored").is_empty(), "a trigger between runs is dropped");
}
