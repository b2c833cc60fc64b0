//! Records `Event` objects about other objects, folding repeats into one event with a count and
//! keeping each object's newest [`MAX_EVENTS_PER_OBJECT`] events from each source: the write that
//! adds one past that deletes the oldest in the same transaction. Events also expire after the
//! server's `--event-ttl` (`event_expiry.rs`).

use std::collections::HashMap;

use aoctl_api::{Event, EventType, InvolvedObject, Kind, Resource, Time};
use aoctl_store::{Selector, Store, StoreError, Write, WriteOptions, Written};
use parking_lot::Mutex;
use serde_json::Value;

/// How many recent events the recorder remembers for folding repeats.
const MAX_REMEMBERED: usize = 1000;

/// How many events one object keeps from one source (the controller of its kind, say, or the
/// webhook receiver's delivery records): recording one more deletes the oldest, by last write.
/// The store keeps at most 1,000 events in all besides (docs/store.md), so this keeps one busy
/// object from pushing every other object's events out.
pub(crate) const MAX_EVENTS_PER_OBJECT: usize = 100;

/// How often a capped create is tried again when an event it was to delete changed or went meanwhile.
const CAP_TRIES: usize = 4;

/// Writes events; the source is the controller of the object's kind, e.g. `session-controller`.
pub(crate) struct Recorder {
    store: Store,
    /// (kind, name, reason, message) → name of the event that recorded it last.
    seen: Mutex<HashMap<(String, String, String, String), String>>,
}

impl Recorder {
    pub(crate) fn new(store: Store) -> Recorder {
        Recorder { store, seen: Mutex::new(HashMap::new()) }
    }

    /// Records an event about `obj`. Failures are logged, never returned: events are best effort.
    pub(crate) async fn publish<T: Resource>(&self, obj: &T, type_: EventType, reason: &str, message: &str) {
        if let Err(e) = self.try_publish(obj, type_, reason, message).await {
            tracing::warn!(error = %e, reason, "could not record event");
        }
    }

    /// Records `event`, which carries a name of its own, unless an event of that name exists
    /// (then `Ok(false)`), within the cap of its object and source like any other event.
    pub(crate) async fn record_once(&self, event: &Event) -> Result<bool, StoreError> {
        match self.create_capped(event).await {
            Ok(_) => Ok(true),
            Err(StoreError::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn try_publish<T: Resource>(
        &self,
        obj: &T,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), StoreError> {
        let meta = obj.meta();
        let key = (T::KIND.as_str().to_string(), meta.name.clone(), reason.to_string(), message.to_string());
        let now = Time::now();
        let existing = self.seen.lock().get(&key).cloned();
        if let Some(name) = existing {
            match self.store.get_typed::<Event>(&name).await {
                Ok(mut ev) => {
                    ev.count += 1;
                    ev.last_timestamp = now;
                    ev.metadata.resource_version = None;
                    self.store.update_typed(&ev).await?;
                    return Ok(());
                }
                Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let involved =
            InvolvedObject { kind: T::KIND.as_str().to_string(), name: meta.name.clone(), uid: meta.uid.clone() };
        let source = format!("{}-controller", T::KIND.as_str().to_ascii_lowercase());
        let ev = Event::new(involved, type_, reason, message, &source, now);
        let created = self.create_capped(&ev).await?;
        let mut seen = self.seen.lock();
        // Messages carry changing details, so the map would only grow; the store keeps at most
        // this many events anyway, so older entries could not be folded into.
        if seen.len() >= MAX_REMEMBERED {
            seen.clear();
        }
        seen.insert(key, created);
        Ok(())
    }

    /// Creates `event` and, in the same transaction, deletes the oldest events of its object and
    /// source beyond [`MAX_EVENTS_PER_OBJECT`]; the new event's name. Each delete is conditioned on
    /// the version that was listed, so an event folded into meanwhile (the newest again) is kept:
    /// the whole is tried again on a fresh list.
    async fn create_capped(&self, event: &Event) -> Result<String, StoreError> {
        let obj = serde_json::to_value(event)?;
        let mut tries = 0;
        loop {
            tries += 1;
            let (events, _) = self.store.list_stored(Kind::Event, &Selector::everything()).await?;
            let excess = oldest_beyond(
                events.iter().map(|e| e.object()),
                &event.involved_object,
                &event.source,
                MAX_EVENTS_PER_OBJECT - 1,
            );
            drop(events);
            let mut writes = vec![Write::Create { kind: Kind::Event, obj: obj.clone() }];
            writes.extend(excess.into_iter().map(|(name, rv)| Write::Delete { kind: Kind::Event, name, rv: Some(rv) }));
            match self.store.apply_all(writes, WriteOptions::default()).await {
                Ok(written) => {
                    let name = match written.first() {
                        Some(Written::Object(v)) => v.pointer("/metadata/name").and_then(Value::as_str),
                        _ => None,
                    };
                    return name
                        .map(str::to_string)
                        .ok_or_else(|| StoreError::Storage("the store answered a create without the object".into()));
                }
                Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) if tries < CAP_TRIES => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// The name and resourceVersion of the events about `involved` from `source` beyond the newest
/// `keep` of them (by resourceVersion, the order of their last writes), oldest first.
fn oldest_beyond<'a>(
    events: impl Iterator<Item = &'a Value>,
    involved: &InvolvedObject,
    source: &str,
    keep: usize,
) -> Vec<(String, String)> {
    let text = |e: &'a Value, pointer: &str| e.pointer(pointer).and_then(Value::as_str);
    let mut mine: Vec<(u64, String, String)> = events
        .filter(|e| {
            text(e, "/involvedObject/kind") == Some(involved.kind.as_str())
                && text(e, "/involvedObject/name") == Some(involved.name.as_str())
                && text(e, "/source").unwrap_or_default() == source
        })
        .filter_map(|e| {
            let rv = text(e, "/metadata/resourceVersion")?;
            Some((rv.parse().ok()?, text(e, "/metadata/name")?.to_string(), rv.to_string()))
        })
        .collect();
    mine.sort_unstable();
    let excess = mine.len().saturating_sub(keep);
    mine.into_iter().take(excess).map(|(_, name, rv)| (name, rv)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::{ObjectMeta, Session};

    fn session(name: &str) -> Session {
        let mut s: Session = serde_json::from_value(serde_json::json!({
            "apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
            "spec": {"project": "demo"}}))
        .unwrap();
        s.metadata.uid = Some(format!("uid-{name}"));
        s
    }

    /// The events about the session `name`, as (reason, message, count), oldest first.
    async fn events_of(store: &Store, name: &str) -> Vec<(String, String, u32)> {
        let (mut events, _) = store.list_typed::<Event>(&Selector::everything()).await.unwrap();
        events.retain(|e| e.involved_object.name == name);
        events.sort_by_key(|e| e.metadata.resource_version.as_deref().unwrap_or_default().parse::<u64>().unwrap());
        events.into_iter().map(|e| (e.reason, e.message, e.count)).collect()
    }

    #[tokio::test]
    async fn an_object_keeps_its_newest_events_and_repeats_still_fold() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let recorder = Recorder::new(store.clone());
        let (busy, quiet) = (session("busy"), session("quiet"));
        recorder.publish(&quiet, EventType::Normal, "Started", "quiet started").await;
        for i in 0..MAX_EVENTS_PER_OBJECT + 30 {
            recorder.publish(&busy, EventType::Normal, "Reported", &format!("step {i}")).await;
        }
        let kept = events_of(&store, "busy").await;
        assert_eq!(kept.len(), MAX_EVENTS_PER_OBJECT);
        assert_eq!(kept[0].1, "step 30", "the oldest thirty went");
        assert_eq!(kept[MAX_EVENTS_PER_OBJECT - 1].1, format!("step {}", MAX_EVENTS_PER_OBJECT + 29));
        assert_eq!(
            events_of(&store, "quiet").await,
            [("Started".into(), "quiet started".into(), 1)],
            "another object's events stay"
        );

        // A repeat folds into its event, which becomes the newest: the next new event deletes
        // the oldest other one, not it.
        recorder.publish(&busy, EventType::Normal, "Reported", "step 30").await;
        recorder.publish(&busy, EventType::Warning, "Failed", "something new").await;
        let kept = events_of(&store, "busy").await;
        assert_eq!(kept.len(), MAX_EVENTS_PER_OBJECT);
        assert_eq!(kept[0].1, "step 32");
        assert_eq!(kept[MAX_EVENTS_PER_OBJECT - 2], ("Reported".into(), "step 30".into(), 2));
        assert_eq!(kept[MAX_EVENTS_PER_OBJECT - 1].1, "something new");
    }

    #[tokio::test]
    async fn a_named_event_is_recorded_once_and_capped_apart_from_other_sources() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let recorder = Recorder::new(store.clone());
        let s = session("fix");
        recorder.publish(&s, EventType::Normal, "Started", "started").await;
        let named = |i: usize| {
            let involved = InvolvedObject { kind: "Session".into(), name: "fix".into(), uid: None };
            let mut ev = Event::new(involved, EventType::Normal, "Received", format!("r{i}"), "receiver", Time::now());
            ev.metadata = ObjectMeta { name: format!("received-{i}"), ..Default::default() };
            ev
        };
        assert!(recorder.record_once(&named(0)).await.unwrap());
        assert!(!recorder.record_once(&named(0)).await.unwrap(), "the same name again");
        for i in 1..MAX_EVENTS_PER_OBJECT + 5 {
            assert!(recorder.record_once(&named(i)).await.unwrap());
        }
        let kept = events_of(&store, "fix").await;
        assert_eq!(kept.len(), MAX_EVENTS_PER_OBJECT + 1, "the receiver's newest and the controller's one");
        assert_eq!(kept[0].1, "started", "another source's event is not pushed out");
        assert_eq!(kept[1].1, "r5");
        // A name whose event went can be recorded again.
        assert!(recorder.record_once(&named(0)).await.unwrap());
    }
}
