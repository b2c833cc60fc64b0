//! The notification worker: it delivers the durable outboxes (`status.notifications`) of Sessions
//! and Projects off their reconciles, so a slow notifier holds up no reconcile.
//!
//! A reconciler only records notifications in the object's status; once that status is written
//! it hands the object to the worker ([`Handoff::hand`], a non-blocking enqueue). For each object
//! handed over, the worker reads it fresh from the store, makes one delivery pass over the records
//! that are due ([`notifiers::deliver_due`]), writes the results with the object's resourceVersion as
//! precondition (after a 409, carried onto the newer status with [`notifiers::carry`]), publishes the
//! `Escalated` and `NotifyFailed` events of the pass once its results are written, and looks at
//! the object again when its next backoff is due.
//!
//! It runs on the engine's workqueue (`controller="notifications"` in its metrics): an object is
//! delivered by one worker at a time, [`CONCURRENCY`] objects at once at most, and every stored
//! object with an unsettled record is listed at start and every [`RESCAN`], so a restart or a lost
//! hand-off loses nothing. A crash between sending and recording the result sends the record
//! again on the next pass with the same idempotency key. Each term of leadership runs its own
//! worker on the term's store ([`Outbox::run`]), which stops with the term.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aoctl_api::notification::NotificationRecord;
use aoctl_api::project::Notifier;
use aoctl_api::{EventType, Kind, Project, Resource, Session, Time};
use aoctl_engine::{Action, Config, Controller, Trigger};
use aoctl_store::{Selector, Store, StoreError};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::Value;

use crate::notifiers;
use crate::recorder::Recorder;

/// The worker's name in the engine's metrics and logs.
pub(crate) const NAME: &str = "notifications";
/// How many objects are delivered at once, at most.
pub(crate) const CONCURRENCY: usize = 8;
/// How often the stored objects with unsettled records are listed again, after once at start.
pub(crate) const RESCAN: Duration = Duration::from_secs(60);
/// Writes of one pass's results tried before the pass fails (and is made again, with backoff).
const WRITE_TRIES: usize = 3;

/// A kind whose status holds a notification outbox.
pub(crate) trait Outboxed: Resource + PartialEq {
    /// The records of `status.notifications`.
    fn outbox(&self) -> &Vec<NotificationRecord>;
    fn outbox_mut(&mut self) -> &mut Vec<NotificationRecord>;
    /// The project whose notifiers are told.
    fn project_name(&self) -> &str;
    /// The session the notifications are about; empty for a project's own.
    fn session_name(&self) -> &str;
    /// The notifiers the object carries itself (a project's); `None` when they are its project's.
    fn own_notifiers(&self) -> Option<&[Notifier]>;
}

impl Outboxed for Session {
    fn outbox(&self) -> &Vec<NotificationRecord> {
        &self.status.notifications
    }

    fn outbox_mut(&mut self) -> &mut Vec<NotificationRecord> {
        &mut self.status.notifications
    }

    fn project_name(&self) -> &str {
        &self.spec.project
    }

    fn session_name(&self) -> &str {
        &self.metadata.name
    }

    fn own_notifiers(&self) -> Option<&[Notifier]> {
        None
    }
}

impl Outboxed for Project {
    fn outbox(&self) -> &Vec<NotificationRecord> {
        &self.status.notifications
    }

    fn outbox_mut(&mut self) -> &mut Vec<NotificationRecord> {
        &mut self.status.notifications
    }

    fn project_name(&self) -> &str {
        &self.metadata.name
    }

    fn session_name(&self) -> &str {
        ""
    }

    fn own_notifiers(&self) -> Option<&[Notifier]> {
        Some(&self.spec.notifiers)
    }
}

/// The workqueue key of an object: its kind and name.
fn key(kind: Kind, name: &str) -> String {
    format!("{}/{name}", kind.as_str())
}

/// What a worker is given: an object whose outbox may hold something due.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    kind: Kind,
    name: String,
}

impl Target {
    fn parse(key: &str) -> Option<Target> {
        let (kind, name) = key.split_once('/')?;
        let kind = match kind {
            "Session" => Kind::Session,
            "Project" => Kind::Project,
            _ => return None,
        };
        Some(Target { kind, name: name.to_string() })
    }
}

/// Hands objects whose written status records notifications to the worker; cheap to clone, and
/// it never waits.
#[derive(Clone)]
pub(crate) struct Handoff {
    trigger: Trigger,
    /// The resourceVersion last handed over, by key: a reconcile that wrote nothing new hands
    /// nothing over again, the worker having scheduled that version's records already.
    handed: Arc<Mutex<HashMap<String, String>>>,
}

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handoff").field("trigger", &self.trigger).finish()
    }
}

impl Handoff {
    /// Hands `obj`, as written, to the worker when its outbox holds a record not settled.
    pub(crate) fn hand<T: Outboxed>(&self, obj: &T) {
        if obj.outbox().iter().all(NotificationRecord::settled) {
            return;
        }
        let key = key(T::KIND, obj.name());
        let version = obj.meta().resource_version.clone().unwrap_or_default();
        if self.handed.lock().insert(key.clone(), version.clone()).as_ref() == Some(&version) {
            return;
        }
        self.trigger.trigger(&key);
    }

    /// A hand-off no worker takes from, for tests of the reconcilers alone.
    #[cfg(test)]
    pub(crate) fn unattended() -> Handoff {
        let metrics = aoctl_engine::Metrics::register(&prometheus::Registry::new()).expect("engine metrics register");
        Outbox::new(metrics).handoff()
    }
}

/// The notification worker of one term of leadership.
pub(crate) struct Outbox {
    controller: Controller<Target>,
    handoff: Handoff,
}

impl Outbox {
    /// A worker whose queue takes hand-offs at once; it delivers once [`Outbox::run`] runs.
    pub(crate) fn new(metrics: Arc<aoctl_engine::Metrics>) -> Outbox {
        let config = Config { concurrency: CONCURRENCY, resync: RESCAN, ..Config::new(NAME) };
        let controller = Controller::new(config, metrics);
        let handoff = Handoff { trigger: controller.handle(), handed: Default::default() };
        Outbox { controller, handoff }
    }

    /// The hand-off the reconcilers of the term get.
    pub(crate) fn handoff(&self) -> Handoff {
        self.handoff.clone()
    }

    /// Delivers, writing through `store` (the term's), until `stopped` resolves; then lets the
    /// passes under way finish, each target being bounded in time.
    pub(crate) async fn run(self, store: Store, stopped: impl Future<Output = ()>) {
        let worker = Arc::new(Worker::new(store.clone(), self.handoff.handed.clone()));
        self.controller
            .run(
                |key: String| async move { Target::parse(&key).map(Arc::new) },
                move || {
                    let store = store.clone();
                    async move { unsettled(&store).await }
                },
                |target: Arc<Target>, worker: Arc<Worker>| async move {
                    match target.kind {
                        Kind::Project => worker.pass::<Project>(&target.name).await,
                        _ => worker.pass::<Session>(&target.name).await,
                    }
                },
                |target: Arc<Target>, error: &StoreError, _| {
                    let (kind, name) = (target.kind.as_str(), &target.name);
                    tracing::warn!(error = %error, kind, name = %name, "notification pass failed");
                    // The engine's per-key backoff decides when to try again.
                    Action::requeue(Duration::ZERO)
                },
                worker,
                stopped,
            )
            .await
    }
}

/// The keys of the stored Sessions and Projects whose outbox holds a record not settled.
async fn unsettled(store: &Store) -> Vec<String> {
    let mut keys = vec![];
    for kind in [Kind::Project, Kind::Session] {
        match store.list_stored(kind, &Selector::everything()).await {
            Ok((items, _)) => {
                keys.extend(
                    items.iter().map(|o| o.object()).filter(|o| has_unsettled(o)).filter_map(|o| {
                        o.pointer("/metadata/name").and_then(Value::as_str).map(|name| key(kind, name))
                    }),
                )
            }
            Err(e) => tracing::error!(error = %e, kind = kind.as_str(), "cannot list objects for their notifications"),
        }
    }
    keys
}

/// Whether a stored object's `status.notifications` holds a record not settled.
fn has_unsettled(o: &Value) -> bool {
    let records = o.pointer("/status/notifications").and_then(Value::as_array);
    records.is_some_and(|rs| rs.iter().any(|r| NotificationRecord::deserialize(r).is_ok_and(|r| !r.settled())))
}

/// What every pass of one worker shares.
struct Worker {
    store: Store,
    recorder: Recorder,
    /// The hand-off's memory, forgotten for an object whose outbox is settled or that is gone.
    handed: Arc<Mutex<HashMap<String, String>>>,
}

/// An event a pass publishes once its results are written: the reason and the message.
type Told = (&'static str, String);

impl Worker {
    fn new(store: Store, handed: Arc<Mutex<HashMap<String, String>>>) -> Worker {
        Worker { recorder: Recorder::new(store.clone()), store, handed }
    }

    /// One delivery pass over the outbox of the object `name` of kind `T`, as stored now; when to
    /// look again.
    async fn pass<T: Outboxed>(&self, name: &str) -> Result<Action, StoreError> {
        let read: T = match self.store.get_typed(name).await {
            Ok(o) => o,
            Err(e) if e.is_not_found() => return Ok(self.settled::<T>(name)),
            Err(e) => return Err(e),
        };
        if read.outbox().iter().all(NotificationRecord::settled) {
            return Ok(self.settled::<T>(name));
        }
        // A session whose project is gone has no one to tell; the rescan looks at it again.
        let Some(targets) = self.targets(&read).await? else { return Ok(Action::await_change()) };
        let now = Time::now();
        let mut outbox = read.outbox().clone();
        let pass = notifiers::deliver_due(&mut outbox, &targets, read.project_name(), read.session_name(), now).await;
        let events = told(&outbox, &pass);
        notifiers::prune(&mut outbox, now);
        let Some(written) = self.write(read, &outbox, &pass.changed, now).await? else {
            return Ok(self.settled::<T>(name));
        };
        for (reason, msg) in &events {
            self.recorder.publish(&written, EventType::Warning, reason, msg).await;
        }
        Ok(match notifiers::next_due(written.outbox(), Time::now()) {
            Some(after) => Action::requeue(after),
            None => self.settled::<T>(name),
        })
    }

    /// Forgets what was handed over of an object with nothing left to deliver (or gone).
    fn settled<T: Resource>(&self, name: &str) -> Action {
        self.handed.lock().remove(&key(T::KIND, name));
        Action::await_change()
    }

    /// The notifiers to tell: the object's own, else its project's; `None` when the project is gone.
    async fn targets<T: Outboxed>(&self, obj: &T) -> Result<Option<Vec<Notifier>>, StoreError> {
        if let Some(own) = obj.own_notifiers() {
            return Ok(Some(own.to_vec()));
        }
        match self.store.get_typed::<Project>(obj.project_name()).await {
            Ok(p) => Ok(Some(p.spec.notifiers)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes `outbox` (the pass's results) as the outbox of `read`, with its resourceVersion as
    /// precondition; after a 409, carries the delivery state of the `changed` records onto the
    /// newer status and tries again. The object as it stands after; `None` when it is gone.
    async fn write<T: Outboxed>(
        &self,
        read: T,
        outbox: &[NotificationRecord],
        changed: &[String],
        now: Time,
    ) -> Result<Option<T>, StoreError> {
        let mut stored = read.outbox().clone();
        let mut next = read;
        *next.outbox_mut() = outbox.to_vec();
        // A 409 on every one of a few writes fails the pass (retried with the engine's backoff):
        // the next pass sends again what was sent but not recorded, with the same keys.
        let mut tries = 1;
        loop {
            if *next.outbox() == stored {
                return Ok(Some(next));
            }
            match self.store.update_status_typed(&next).await {
                Ok(written) => return Ok(Some(written)),
                Err(e) if e.is_not_found() => return Ok(None),
                Err(e) if e.is_conflict() && tries < WRITE_TRIES => {
                    tries += 1;
                    let mut fresh: T = match self.store.get_typed(next.name()).await {
                        Ok(f) => f,
                        Err(e) if e.is_not_found() => return Ok(None),
                        Err(e) => return Err(e),
                    };
                    stored = fresh.outbox().clone();
                    notifiers::carry(outbox, fresh.outbox_mut(), changed);
                    notifiers::prune(fresh.outbox_mut(), now);
                    next = fresh;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The events of a pass: `Escalated` for an escalation that reached its first target, and
/// `NotifyFailed` for each record given up.
fn told(outbox: &[NotificationRecord], pass: &notifiers::Pass) -> Vec<Told> {
    let escalated = pass.first_sent.iter().filter_map(|key| outbox.iter().find(|n| &n.key == key && n.escalated));
    let mut out: Vec<Told> = escalated.map(|n| ("Escalated", format!("{}: {}", n.reaction, n.title))).collect();
    out.extend(pass.given_up.iter().map(|msg| ("NotifyFailed", msg.clone())));
    out
}

#[cfg(test)]
mod tests;
