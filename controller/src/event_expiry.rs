//! Expires `Event`s: those whose `lastTimestamp` is older than the server's `--event-ttl` are
//! deleted in the background, on the leader's store, at most [`BATCH`] in one transaction. Only
//! the Event kind is listed. An event folded into since it was listed is fresh again and kept.
//! The events of a deleted object go this way too, once they are older than the TTL.

use std::future::Future;
use std::time::Duration;

use aoctl_api::Kind;
use aoctl_store::{Selector, Store, StoreError, Write, WriteOptions};
use chrono::{DateTime, Utc};
use serde_json::Value;

/// The most events deleted in one store transaction.
pub(crate) const BATCH: usize = 100;

/// How often expired events are looked for: a tenth of the TTL, between a second and a minute.
pub(crate) fn interval(ttl: Duration) -> Duration {
    (ttl / 10).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

/// Expires events every [`interval`] until `stopped` resolves.
pub(crate) async fn run(store: Store, ttl: Duration, stopped: impl Future<Output = ()>) {
    let work = async {
        loop {
            match expire(&store, ttl, Utc::now()).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(events = n, "expired events deleted"),
                Err(e) => tracing::warn!(error = %e, "cannot delete expired events; trying again later"),
            }
            tokio::time::sleep(interval(ttl)).await;
        }
    };
    tokio::select! {
        _ = work => {},
        _ = stopped => {},
    }
}

/// Deletes the events whose last write (`lastTimestamp`) is more than `ttl` before `now`, in
/// batches of [`BATCH`]; how many it deleted.
pub(crate) async fn expire(store: &Store, ttl: Duration, now: DateTime<Utc>) -> Result<usize, StoreError> {
    let Some(cutoff) = chrono::Duration::from_std(ttl).ok().and_then(|ttl| now.checked_sub_signed(ttl)) else {
        return Ok(0);
    };
    let expired: Vec<(String, String)> = {
        let (events, _) = store.list_stored(Kind::Event, &Selector::everything()).await?;
        events.iter().filter_map(|e| expired(e.object(), cutoff)).collect()
    };
    delete(store, &expired).await
}

/// Deletes the events named with the resourceVersion they were listed at, [`BATCH`] to a
/// transaction; one written since (folded into, so fresh again) or gone is left alone. How many
/// it deleted.
async fn delete(store: &Store, listed: &[(String, String)]) -> Result<usize, StoreError> {
    let mut deleted = 0;
    for batch in listed.chunks(BATCH) {
        let writes = batch
            .iter()
            .map(|(name, rv)| Write::Delete { kind: Kind::Event, name: name.clone(), rv: Some(rv.clone()) })
            .collect();
        match store.apply_all(writes, WriteOptions::default()).await {
            Ok(_) => deleted += batch.len(),
            // One of them was folded into (so it is fresh) or deleted since the list, and the
            // transaction refused them all: the others go one by one.
            Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => {
                for (name, rv) in batch {
                    match store.delete(Kind::Event, name, Some(rv), WriteOptions::default()).await {
                        Ok(_) => deleted += 1,
                        Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

/// The name and resourceVersion of `event` when its last write is before `cutoff`.
fn expired(event: &Value, cutoff: DateTime<Utc>) -> Option<(String, String)> {
    let last = event.get("lastTimestamp").and_then(Value::as_str)?;
    let last = DateTime::parse_from_rfc3339(last).ok()?;
    if last >= cutoff {
        return None;
    }
    let meta = event.get("metadata")?;
    let name = meta.get("name").and_then(Value::as_str)?;
    let rv = meta.get("resourceVersion").and_then(Value::as_str)?;
    Some((name.to_string(), rv.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::{Event, EventType, InvolvedObject, Time};

    fn event(object: &str, n: usize, last: DateTime<Utc>) -> Event {
        let involved = InvolvedObject { kind: "Session".into(), name: object.into(), uid: None };
        let mut ev =
            Event::new(involved, EventType::Normal, "Reported", format!("step {n}"), "session-controller", Time(last));
        ev.first_timestamp = Time(last);
        ev
    }

    async fn count(store: &Store) -> usize {
        store.list_stored(Kind::Event, &Selector::everything()).await.unwrap().0.len()
    }

    #[tokio::test]
    async fn events_older_than_the_ttl_are_deleted_in_batches_and_fresh_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let now = Utc::now();
        let ttl = Duration::from_secs(3600);
        let old = now - chrono::Duration::seconds(3601);
        let fresh = now - chrono::Duration::seconds(3599);
        // More old events than one batch holds, about an object that is gone and one that is not.
        for i in 0..BATCH + 20 {
            store.create_typed(&event(if i % 2 == 0 { "gone" } else { "live" }, i, old)).await.unwrap();
        }
        for i in 0..7 {
            store.create_typed(&event("live", 1000 + i, fresh)).await.unwrap();
        }
        assert_eq!(count(&store).await, BATCH + 27);
        assert_eq!(expire(&store, ttl, now).await.unwrap(), BATCH + 20);
        let (left, _) = store.list_typed::<Event>(&Selector::everything()).await.unwrap();
        assert_eq!(left.len(), 7);
        let mut messages: Vec<_> = left.iter().map(|e| e.message.clone()).collect();
        messages.sort();
        assert_eq!(
            messages,
            (1000..1007).map(|i| format!("step {i}")).collect::<Vec<_>>(),
            "only the fresh ones are left"
        );
        assert_eq!(expire(&store, ttl, now).await.unwrap(), 0, "nothing more to expire");
        // An hour on, they go too.
        assert_eq!(expire(&store, ttl, now + chrono::Duration::seconds(3600)).await.unwrap(), 7);
        assert_eq!(count(&store).await, 0);
    }

    #[tokio::test]
    async fn an_event_folded_into_since_the_list_is_kept_and_the_rest_of_its_batch_goes_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let now = Utc::now();
        let old = now - chrono::Duration::seconds(7200);
        let mut names = vec![];
        for i in 0..5 {
            names.push(store.create_typed(&event("fix", i, old)).await.unwrap().metadata.name);
        }
        // What expire listed: everything old. Then a repeat refreshes one before the delete.
        let listed: Vec<(String, String)> = {
            let (events, _) = store.list_stored(Kind::Event, &Selector::everything()).await.unwrap();
            events.iter().filter_map(|e| expired(e.object(), now - chrono::Duration::seconds(3600))).collect()
        };
        assert_eq!(listed.len(), 5);
        let mut repeated: Event = store.get_typed(&names[2]).await.unwrap();
        repeated.count += 1;
        repeated.last_timestamp = Time(now);
        store.update_typed(&repeated).await.unwrap();
        // Its stale version fails the batch's transaction; the others go one by one.
        assert_eq!(delete(&store, &listed).await.unwrap(), 4);
        let (left, _) = store.list_typed::<Event>(&Selector::everything()).await.unwrap();
        assert_eq!(
            left.iter().map(|e| (e.metadata.name.as_str(), e.count)).collect::<Vec<_>>(),
            [(names[2].as_str(), 2)]
        );
        // And the next pass finds it fresh.
        assert_eq!(expire(&store, Duration::from_secs(3600), now).await.unwrap(), 0);
    }

    #[test]
    fn the_interval_is_a_tenth_of_the_ttl_within_bounds() {
        assert_eq!(interval(Duration::from_secs(3600)), Duration::from_secs(60));
        assert_eq!(interval(Duration::from_secs(100)), Duration::from_secs(10));
        assert_eq!(interval(Duration::from_secs(2)), Duration::from_secs(1));
    }
}
