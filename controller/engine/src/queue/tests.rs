//! Unit tests of the workqueue on tokio's paused clock.

use std::sync::Arc;
use std::time::Duration;

use prometheus::Registry;
use tokio::time::{timeout, Instant};

use super::WorkQueue;
use crate::metrics::{Metrics, QueueMetrics};

/// Pops a key, failing the test when none is ready within a millisecond.
async fn pop_now(queue: &WorkQueue) -> String {
    timeout(Duration::from_millis(1), queue.pop()).await.expect("a key should be ready").expect("queue is open")
}

/// Returns whether no key becomes ready within `wait`.
async fn nothing_within(queue: &WorkQueue, wait: Duration) -> bool {
    timeout(wait, queue.pop()).await.is_err()
}

#[tokio::test(start_paused = true)]
async fn adds_of_a_waiting_key_coalesce() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add("b");
    queue.add("a");
    queue.add("a");
    assert_eq!(queue.len(), 2);
    assert_eq!(pop_now(&queue).await, "a");
    assert_eq!(pop_now(&queue).await, "b");
    assert!(queue.is_empty());
    assert!(nothing_within(&queue, Duration::from_secs(1)).await);
}

#[tokio::test(start_paused = true)]
async fn a_processing_key_is_not_handed_out_again_until_done() {
    let queue = WorkQueue::new();
    queue.add("a");
    assert_eq!(pop_now(&queue).await, "a");
    for _ in 0..5 {
        queue.add("a");
    }
    assert_eq!(queue.len(), 1, "the key is waiting behind its running reconcile");
    assert!(nothing_within(&queue, Duration::from_secs(1)).await, "a processing key was handed out twice");
    queue.done("a");
    assert_eq!(pop_now(&queue).await, "a");
    queue.done("a");
    assert!(nothing_within(&queue, Duration::from_secs(1)).await, "the dirty key was requeued more than once");
}

#[tokio::test(start_paused = true)]
async fn a_delayed_add_waits_for_its_deadline() {
    let queue = WorkQueue::new();
    let start = Instant::now();
    queue.add_after("a", Duration::from_secs(10));
    assert_eq!(queue.len(), 0, "a delayed key is not waiting yet");
    assert_eq!(queue.delayed_len(), 1);
    let key = queue.pop().await.unwrap();
    assert_eq!(key, "a");
    assert_eq!(start.elapsed(), Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn the_earlier_deadline_of_a_key_wins() {
    let queue = WorkQueue::new();
    let start = Instant::now();
    queue.add_after("a", Duration::from_secs(10));
    queue.add_after("a", Duration::from_secs(3));
    queue.add_after("a", Duration::from_secs(20));
    assert_eq!(queue.delayed_len(), 1);
    assert_eq!(queue.pop().await.unwrap(), "a");
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    queue.done("a");
    assert!(nothing_within(&queue, Duration::from_secs(60)).await, "a superseded deadline fired");
}

#[tokio::test(start_paused = true)]
async fn a_waiting_worker_wakes_for_a_new_earlier_deadline() {
    let queue = Arc::new(WorkQueue::new());
    queue.add_after("late", Duration::from_secs(100));
    let popper = tokio::spawn({
        let queue = queue.clone();
        async move { queue.pop().await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start = Instant::now();
    queue.add_after("early", Duration::from_secs(5));
    assert_eq!(popper.await.unwrap().as_deref(), Some("early"));
    assert_eq!(start.elapsed(), Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn shutdown_wakes_waiters_and_ignores_adds() {
    let queue = Arc::new(WorkQueue::new());
    let popper = tokio::spawn({
        let queue = queue.clone();
        async move { queue.pop().await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    queue.shut_down();
    assert_eq!(popper.await.unwrap(), None);
    queue.add("a");
    queue.add_after("b", Duration::from_secs(1));
    assert!(queue.is_empty());
    assert_eq!(queue.pop().await, None);
}

#[tokio::test(start_paused = true)]
async fn metrics_count_adds_depth_and_queue_time() {
    let registry = Registry::new();
    let metrics = Metrics::register(&registry).unwrap();
    let queue_metrics = QueueMetrics::new(&metrics, "test");
    let queue = WorkQueue::with_metrics(queue_metrics.clone());
    queue.add("a");
    queue.add("a");
    queue.add("b");
    assert_eq!(queue_metrics.adds.get(), 2, "a coalesced add is not counted");
    assert_eq!(queue_metrics.depth.get(), 2);
    tokio::time::sleep(Duration::from_secs(2)).await;
    pop_now(&queue).await;
    pop_now(&queue).await;
    assert_eq!(queue_metrics.depth.get(), 0);
    assert_eq!(queue_metrics.queue_duration.get_sample_count(), 2);
    assert_eq!(queue_metrics.queue_duration.get_sample_sum(), 4.0);
}
