//! The objects in memory, as of the newest revision the store's etcd watch delivered, and the
//! recent changes (one batch per transaction) that watches of the store are served from. Reads,
//! watches and the write rules all use this one copy.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use aoctl_api::Kind;
use aoctl_store::tx::{owned_in, View};
use aoctl_store::{EventKind, StoredObject};
use serde_json::Value;

use crate::layout::{kind_index, object_rv, Batch};

/// The objects and the recent changes.
pub(crate) struct State {
    objects: [BTreeMap<String, StoredObject>; Kind::ALL.len()],
    /// Every change up to this revision is applied.
    pub rv: u64,
    /// The recent batches, oldest first: every change with a revision above `log_start`.
    log: VecDeque<Arc<Batch>>,
    log_events: usize,
    pub log_start: u64,
    /// Moves when the objects are listed again after etcd compacted changes the store had not
    /// seen: watches that began before cannot go on.
    pub epoch: u64,
    /// How many changes `log` keeps.
    log_cap: usize,
}

impl State {
    /// The objects listed at revision `rv`, with no changes yet.
    pub(crate) fn new(objects: Vec<(Kind, String, Value)>, rv: u64, log_cap: usize) -> State {
        let mut state = State {
            objects: Default::default(),
            rv,
            log: VecDeque::new(),
            log_events: 0,
            log_start: rv,
            epoch: 0,
            log_cap: log_cap.max(1),
        };
        for (kind, name, obj) in objects {
            state.objects[kind_index(kind)].insert(name, StoredObject::encode(obj));
        }
        state
    }

    /// Replaces everything with a new listing: the changes in between are not known.
    pub(crate) fn relisted(&mut self, listed: State) {
        let epoch = self.epoch + 1;
        *self = State { epoch, ..listed };
    }

    pub(crate) fn map(&self, kind: Kind) -> &BTreeMap<String, StoredObject> {
        &self.objects[kind_index(kind)]
    }

    /// Applies one committed transaction.
    pub(crate) fn apply(&mut self, batch: Batch) {
        for ev in &batch.events {
            let map = &mut self.objects[kind_index(ev.kind)];
            let name = ev.object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            match ev.kind_ {
                EventKind::Deleted => map.remove(name),
                EventKind::Added | EventKind::Modified => {
                    map.insert(name.to_string(), StoredObject::encode_shared(ev.object.clone()))
                }
            };
        }
        self.rv = self.rv.max(batch.rv);
        self.log_events += batch.events.len();
        self.log.push_back(Arc::new(batch));
        while self.log_events > self.log_cap && self.log.len() > 1 {
            if let Some(old) = self.log.pop_front() {
                self.log_events -= old.events.len();
                self.log_start = old.rv;
            }
        }
    }

    /// The batches after revision `after`, at most `max`; `None` when some of them are no
    /// longer kept.
    pub(crate) fn batches_after(&self, after: u64, max: usize) -> Option<Vec<Arc<Batch>>> {
        if after < self.log_start {
            return None;
        }
        let first = self.log.partition_point(|b| b.rv <= after);
        Some(self.log.range(first..).take(max).cloned().collect())
    }

    /// The revision of the batch that transaction `txn` wrote, if it is among the kept ones.
    pub(crate) fn find_txn(&self, txn: &str) -> Option<u64> {
        self.log.iter().rev().find(|b| b.txn == txn).map(|b| b.rv)
    }

    /// The stored Events that are not in `skip`, oldest (by resourceVersion) first.
    pub(crate) fn events_by_age(&self, skip: impl Fn(&str) -> bool) -> Vec<String> {
        let mut events: Vec<(u64, &String)> = self
            .map(Kind::Event)
            .iter()
            .filter(|(name, _)| !skip(name))
            .map(|(name, o)| (object_rv(o.object()), name))
            .collect();
        events.sort();
        events.into_iter().map(|(_, name)| name.clone()).collect()
    }
}

impl View for State {
    fn get(&self, kind: Kind, name: &str) -> Option<Arc<Value>> {
        self.map(kind).get(name).map(|o| o.object_arc().clone())
    }

    fn owned_by(&self, uid: &str) -> Vec<(Kind, String)> {
        owned_in(|kind| self.map(kind), uid)
    }
}

/// What a write read: the revision of each object it looked at (`None`: it was absent).
pub(crate) type Reads = BTreeMap<(Kind, String), Option<u64>>;

/// The cache as the write rules see it, noting every object they read, so that the transaction
/// can check that none of them changed meanwhile.
pub(crate) struct Recording<'a> {
    state: &'a State,
    reads: RefCell<Reads>,
}

impl<'a> Recording<'a> {
    pub(crate) fn new(state: &'a State) -> Recording<'a> {
        Recording { state, reads: RefCell::new(Reads::new()) }
    }

    /// Notes an object as read, as the cache has it.
    pub(crate) fn note(&self, kind: Kind, name: &str) {
        self.get(kind, name);
    }

    pub(crate) fn into_reads(self) -> Reads {
        self.reads.into_inner()
    }
}

impl View for Recording<'_> {
    fn get(&self, kind: Kind, name: &str) -> Option<Arc<Value>> {
        let obj = self.state.get(kind, name);
        self.reads.borrow_mut().entry((kind, name.to_string())).or_insert(obj.as_deref().map(object_rv));
        obj
    }

    fn owned_by(&self, uid: &str) -> Vec<(Kind, String)> {
        self.state.owned_by(uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_store::WatchEvent;
    use serde_json::json;

    fn batch(rv: u64, txn: &str, names: &[&str]) -> Batch {
        let events = names
            .iter()
            .map(|n| WatchEvent {
                kind_: EventKind::Added,
                kind: Kind::Project,
                object: Arc::new(
                    json!({"kind": "Project", "metadata": {"name": n, "resourceVersion": rv.to_string()}}),
                ),
                rv,
            })
            .collect();
        Batch { rv, txn: txn.into(), events }
    }

    #[test]
    fn the_log_keeps_whole_batches_up_to_its_cap() {
        let mut state = State::new(vec![], 10, 3);
        state.apply(batch(12, "a", &["p1", "p2"]));
        state.apply(batch(15, "b", &["p3"]));
        assert_eq!(state.batches_after(10, 10).map(|b| b.len()), Some(2));
        assert_eq!(state.batches_after(12, 10).map(|b| b.iter().map(|b| b.rv).collect::<Vec<_>>()), Some(vec![15]));
        state.apply(batch(20, "c", &["p4"]));
        assert_eq!(state.log_start, 12, "the oldest batch went");
        assert!(state.batches_after(11, 10).is_none());
        assert_eq!(state.find_txn("c"), Some(20));
        assert_eq!(state.find_txn("a"), None);
        assert_eq!(state.map(Kind::Project).len(), 4);
        assert_eq!(state.rv, 20);
    }

    #[test]
    fn recording_notes_what_was_read() {
        let state = State::new(
            vec![(Kind::Project, "a".into(), json!({"metadata": {"name": "a", "resourceVersion": "5"}}))],
            5,
            10,
        );
        let view = Recording::new(&state);
        assert!(view.get(Kind::Project, "a").is_some());
        assert!(view.get(Kind::Project, "b").is_none());
        let reads = view.into_reads();
        assert_eq!(reads.get(&(Kind::Project, "a".into())), Some(&Some(5)));
        assert_eq!(reads.get(&(Kind::Project, "b".into())), Some(&None));
    }
}
