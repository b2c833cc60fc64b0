//! Records `Event` objects about other objects, folding repeats into one event with a count.

use std::collections::HashMap;
use std::sync::Mutex;

use aoctl_api::{Event, EventType, InvolvedObject, Resource, Time};
use aoctl_store::{Store, StoreError};

/// How many recent events the recorder remembers for folding repeats.
const MAX_REMEMBERED: usize = 1000;

/// Writes events; the source is the controller of the object's kind, e.g. `session-controller`.
pub struct Recorder {
    store: Store,
    /// (kind, name, reason, message) → name of the event that recorded it last.
    seen: Mutex<HashMap<(String, String, String, String), String>>,
}

impl Recorder {
    pub fn new(store: Store) -> Recorder {
        Recorder { store, seen: Mutex::new(HashMap::new()) }
    }

    /// Records an event about `obj`. Failures are logged, never returned: events are best effort.
    pub async fn publish<T: Resource>(&self, obj: &T, type_: EventType, reason: &str, message: &str) {
        if let Err(e) = self.try_publish(obj, type_, reason, message).await {
            tracing::warn!(error = %e, reason, "could not record event");
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
        let existing = self.seen.lock().expect("recorder lock").get(&key).cloned();
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
        let created = self.store.create_typed(&ev).await?;
        let mut seen = self.seen.lock().expect("recorder lock");
        // Messages carry changing details, so the map would only grow; the store keeps at most
        // this many events anyway, so older entries could not be folded into.
        if seen.len() >= MAX_REMEMBERED {
            seen.clear();
        }
        seen.insert(key, created.metadata.name);
        Ok(())
    }
}
