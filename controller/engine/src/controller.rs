//! The controller loop: initial list, resync, a bounded worker pool, backoff and graceful shutdown.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};
use tracing::Instrument;

use crate::backoff::Backoff;
use crate::metrics::{ControllerMetrics, Metrics, ReconcileResult};
use crate::queue::WorkQueue;
use crate::{Action, Config};

/// A reconcile loop for objects of type `T`, identified by string keys.
pub struct Controller<T> {
    config: Config,
    metrics: ControllerMetrics,
    queue: Arc<WorkQueue>,
    _object: PhantomData<fn() -> T>,
}

/// Enqueues keys of one controller; cheap to clone and usable from any task.
#[derive(Clone)]
pub struct Trigger {
    queue: Arc<WorkQueue>,
}

impl Trigger {
    /// Enqueues `key` for reconciliation; ignored once the controller shuts down.
    pub fn trigger(&self, key: &str) {
        self.queue.add(key);
    }

    /// Enqueues `key` after `delay`; ignored once the controller shuts down.
    pub fn trigger_after(&self, key: &str, delay: Duration) {
        self.queue.add_after(key, delay);
    }
}

impl fmt::Debug for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trigger").field("waiting", &self.queue.len()).finish()
    }
}

impl<T> fmt::Debug for Controller<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller").field("config", &self.config).field("waiting", &self.queue.len()).finish()
    }
}

impl<T: Send + Sync + 'static> Controller<T> {
    /// Creates a controller and initialises its metric series at zero.
    pub fn new(config: Config, metrics: Arc<Metrics>) -> Controller<T> {
        metrics.init_controller(config.name);
        let metrics = metrics.controller(config.name);
        let queue = Arc::new(WorkQueue::with_metrics(metrics.queue()));
        Controller { config, metrics, queue, _object: PhantomData }
    }

    /// A controller that takes the keys of `handle` again once the controller `handle` came from
    /// has stopped: triggers sent meanwhile were ignored, and the first list enqueues every key.
    /// A replica that leads again runs its reconcilers anew this way, and the handles the rest of
    /// the program keeps reach them.
    pub fn resume(config: Config, metrics: Arc<Metrics>, handle: &Trigger) -> Controller<T> {
        handle.queue.reopen();
        let metrics = metrics.controller(config.name);
        Controller { config, metrics, queue: handle.queue.clone(), _object: PhantomData }
    }

    /// Returns a handle that enqueues keys of this controller.
    pub fn handle(&self) -> Trigger {
        Trigger { queue: self.queue.clone() }
    }

    /// Runs the controller until `shutdown` resolves, then waits for in-flight reconciles and returns.
    ///
    /// `keys` is called once before any worker starts, so that every key is enqueued first, and then
    /// every `resync`. A worker takes a key, calls `fetch` for its newest object (`None`: the object
    /// is gone and the key is skipped) and calls `reconcile`. On an error, `error_policy` decides:
    /// [`Action::await_change`] drops the key until its next trigger, [`Action::requeue`] retries it
    /// after the larger of the policy's delay and the key's exponential backoff.
    pub async fn run<C, E, F, FFut, K, KFut, R, RFut, P, S>(
        self,
        fetch: F,
        keys: K,
        reconcile: R,
        error_policy: P,
        ctx: Arc<C>,
        shutdown: S,
    ) where
        C: Send + Sync + 'static,
        E: fmt::Display + Send + 'static,
        F: Fn(String) -> FFut + Send + Sync + 'static,
        FFut: Future<Output = Option<Arc<T>>> + Send + 'static,
        K: Fn() -> KFut,
        KFut: Future<Output = Vec<String>>,
        R: Fn(Arc<T>, Arc<C>) -> RFut + Send + Sync + 'static,
        RFut: Future<Output = Result<Action, E>> + Send + 'static,
        P: Fn(Arc<T>, &E, Arc<C>) -> Action + Send + Sync + 'static,
        S: Future,
    {
        let Controller { config, metrics, queue, .. } = self;
        let _close = CloseOnDrop(queue.clone());
        tokio::pin!(shutdown);
        let name = config.name;

        tokio::select! {
            biased;
            _ = &mut shutdown => {
                tracing::info!(controller = name, "controller stopped before its first list");
                return;
            }
            listed = keys() => enqueue(&queue, listed),
        }

        let worker = Arc::new(Worker {
            name,
            queue: queue.clone(),
            backoff: Backoff::new(config.backoff_base, config.backoff_max),
            metrics,
            fetch,
            reconcile,
            error_policy,
            ctx,
        });
        let mut workers = JoinSet::new();
        for _ in 0..config.concurrency.max(1) {
            let worker = worker.clone();
            workers.spawn(async move { worker.work().await });
        }
        tracing::info!(controller = name, workers = config.concurrency.max(1), "controller started");

        if config.resync.is_zero() {
            shutdown.await;
        } else {
            let mut ticker = tokio::time::interval_at(Instant::now() + config.resync, config.resync);
            ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                let resync = async {
                    ticker.tick().await;
                    keys().await
                };
                tokio::select! {
                    biased;
                    _ = &mut shutdown => break,
                    listed = resync => enqueue(&queue, listed),
                }
            }
        }

        tracing::info!(controller = name, "controller shutting down, draining in-flight reconciles");
        queue.shut_down();
        while let Some(joined) = workers.join_next().await {
            if let Err(err) = joined {
                tracing::error!(controller = name, error = %err, "controller worker ended abnormally");
            }
        }
        tracing::info!(controller = name, "controller stopped");
    }
}

/// Adds every listed key to the queue.
fn enqueue(queue: &WorkQueue, keys: Vec<String>) {
    for key in &keys {
        queue.add(key);
    }
}

/// Shuts the queue down when [`Controller::run`] returns or is dropped, so later triggers are ignored.
struct CloseOnDrop(Arc<WorkQueue>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.shut_down();
    }
}

/// What every worker of one controller shares.
struct Worker<C, F, R, P> {
    name: &'static str,
    queue: Arc<WorkQueue>,
    backoff: Backoff,
    metrics: ControllerMetrics,
    fetch: F,
    reconcile: R,
    error_policy: P,
    ctx: Arc<C>,
}

impl<T, C, E, F, FFut, R, RFut, P> Worker<C, F, R, P>
where
    T: Send + Sync + 'static,
    C: Send + Sync + 'static,
    E: fmt::Display + Send + 'static,
    F: Fn(String) -> FFut + Send + Sync + 'static,
    FFut: Future<Output = Option<Arc<T>>> + Send + 'static,
    R: Fn(Arc<T>, Arc<C>) -> RFut + Send + Sync + 'static,
    RFut: Future<Output = Result<Action, E>> + Send + 'static,
    P: Fn(Arc<T>, &E, Arc<C>) -> Action + Send + Sync + 'static,
{
    /// Takes keys until the queue shuts down.
    async fn work(&self) {
        while let Some(key) = self.queue.pop().await {
            let span = tracing::info_span!("reconcile", controller = self.name, object = key.as_str());
            let started = Instant::now();
            let processed = AssertUnwindSafe(self.process(&key)).catch_unwind().instrument(span.clone()).await;
            if let Err(panic) = processed {
                let _entered = span.enter();
                self.metrics.reconciled(ReconcileResult::Error, started.elapsed().as_secs_f64());
                let delay = self.backoff.next_delay(&key);
                tracing::error!(panic = panic_message(&*panic), retry_in = ?delay, "reconcile panicked");
                self.metrics.retried();
                self.queue.add_after(&key, delay);
            }
            self.queue.done(&key);
        }
    }

    /// Fetches and reconciles one key, then requeues it as its result asks.
    async fn process(&self, key: &str) {
        let Some(object) = (self.fetch)(key.to_owned()).await else {
            tracing::debug!("object is gone, skipping");
            self.backoff.reset(key);
            return;
        };
        let started = Instant::now();
        let result = (self.reconcile)(object.clone(), self.ctx.clone()).await;
        let seconds = started.elapsed().as_secs_f64();
        match result {
            Ok(action) => {
                self.backoff.reset(key);
                match action.requeue_after() {
                    None => {
                        self.metrics.reconciled(ReconcileResult::Success, seconds);
                        tracing::debug!("reconciled");
                    }
                    Some(after) => {
                        let result =
                            if after.is_zero() { ReconcileResult::Requeue } else { ReconcileResult::RequeueAfter };
                        self.metrics.reconciled(result, seconds);
                        tracing::debug!(requeue_after = ?after, "reconciled, requeueing");
                        self.queue.add_after(key, after);
                    }
                }
            }
            Err(err) => {
                self.metrics.reconciled(ReconcileResult::Error, seconds);
                match (self.error_policy)(object, &err, self.ctx.clone()).requeue_after() {
                    None => {
                        self.backoff.record_failure(key);
                        tracing::warn!(error = %err, "reconcile failed, waiting for a change");
                    }
                    Some(after) => {
                        let delay = self.backoff.next_delay(key).max(after);
                        tracing::warn!(error = %err, retry_in = ?delay, "reconcile failed");
                        self.metrics.retried();
                        self.queue.add_after(key, delay);
                    }
                }
            }
        }
    }
}

/// Returns the message of a panic payload, when it has one.
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(message) = panic.downcast_ref::<&str>() {
        message
    } else if let Some(message) = panic.downcast_ref::<String>() {
        message
    } else {
        "non-string panic payload"
    }
}

#[cfg(test)]
mod tests;
