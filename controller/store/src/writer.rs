//! The single writer: a thread that takes write requests in batches, stages them, commits each
//! batch in one sled transaction under one flush (group commit), then publishes it in order.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};

use aoctl_api::Kind;
use serde_json::Value;
use sled::transaction::ConflictableTransactionError;
use sled::Transactional;
use tokio::sync::{broadcast, oneshot};

use crate::codec::{encode_log, object_key, object_rv, rv_key, RV_KEY};
use crate::error::StoreError;
use crate::state::{Cache, Shared, StoredObject};
use crate::tx::{Change, Overlay, Tx};
use crate::watch::{EventKind, WatchEvent};
use crate::Deleted;

/// A write the store was asked for.
pub(crate) enum Op {
    Create { kind: Kind, obj: Value },
    Update { kind: Kind, obj: Value },
    UpdateStatus { kind: Kind, name: String, status: Value, rv: Option<String> },
    Delete { kind: Kind, name: String, rv: Option<String> },
}

/// What a write returns.
pub(crate) enum Reply {
    Object(Value),
    Deleted(Deleted),
}

pub(crate) struct Request {
    pub op: Op,
    pub dry_run: bool,
    pub reply: oneshot::Sender<Result<Reply, StoreError>>,
}

/// `Event` objects by the resourceVersion of their last write, oldest first.
#[derive(Default)]
struct EventIndex {
    by_rv: BTreeMap<u64, String>,
    by_name: HashMap<String, u64>,
}

impl EventIndex {
    fn from_cache(cache: &Cache) -> EventIndex {
        let mut idx = EventIndex::default();
        for (name, obj) in cache.map(Kind::Event) {
            idx.by_rv.insert(object_rv(obj.object()), name.clone());
            idx.by_name.insert(name.clone(), object_rv(obj.object()));
        }
        idx
    }

    fn note(&mut self, changes: &[Change]) {
        for c in changes.iter().filter(|c| c.kind == Kind::Event) {
            if let Some(old) = self.by_name.remove(&c.name) {
                self.by_rv.remove(&old);
            }
            if c.type_ != EventKind::Deleted {
                self.by_rv.insert(c.rv, c.name.clone());
                self.by_name.insert(c.name.clone(), c.rv);
            }
        }
    }

    fn len(&self) -> usize {
        self.by_rv.len()
    }

    fn pop_oldest(&mut self) -> Option<String> {
        let (_, name) = self.by_rv.pop_first()?;
        self.by_name.remove(&name);
        Some(name)
    }
}

pub(crate) struct Writer {
    shared: Arc<Shared>,
    requests: mpsc::Receiver<Request>,
    events: broadcast::Sender<WatchEvent>,
    /// The newest committed resourceVersion.
    rv: u64,
    compacted: u64,
    event_index: EventIndex,
}

impl Writer {
    pub fn new(
        shared: Arc<Shared>,
        requests: mpsc::Receiver<Request>,
        events: broadcast::Sender<WatchEvent>,
    ) -> Writer {
        let (rv, event_index) = {
            let cache = shared.read();
            (cache.rv, EventIndex::from_cache(&cache))
        };
        let compacted = shared.compacted.load(Ordering::Acquire);
        Writer { shared, requests, events, rv, compacted, event_index }
    }

    /// Serves requests until every sender is gone.
    pub fn run(mut self) {
        while let Ok(first) = self.requests.recv() {
            let mut batch = vec![first];
            while batch.len() < self.shared.config.max_batch.max(1) {
                match self.requests.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            self.process(batch);
        }
    }

    fn process(&mut self, requests: Vec<Request>) {
        let shared = self.shared.clone();
        let mut replies = Vec::with_capacity(requests.len());
        let mut changes: Vec<Change> = vec![];
        {
            let cache = shared.read();
            let mut overlay = Overlay::new();
            let mut next_rv = self.rv + 1;
            for req in requests {
                let mut tx = Tx::new(&cache, &overlay, next_rv, req.dry_run);
                let res = apply(&mut tx, req.op);
                if res.is_ok() && !req.dry_run {
                    let (own, staged, n) = tx.into_parts();
                    overlay.extend(own);
                    self.event_index.note(&staged);
                    changes.extend(staged);
                    next_rv = n;
                    if self.event_index.len() > shared.config.max_events {
                        let mut tx = Tx::new(&cache, &overlay, next_rv, false);
                        while self.event_index.len() > shared.config.max_events {
                            let Some(name) = self.event_index.pop_oldest() else { break };
                            tx.expire(Kind::Event, &name);
                        }
                        let (own, staged, n) = tx.into_parts();
                        overlay.extend(own);
                        changes.extend(staged);
                        next_rv = n;
                    }
                }
                replies.push((req.reply, res));
            }
        }
        if !changes.is_empty() {
            if let Err(e) = self.commit(&changes) {
                tracing::error!(error = %e, "store commit failed");
                self.event_index = EventIndex::from_cache(&self.shared.read());
                for (_, res) in replies.iter_mut() {
                    if res.is_ok() {
                        *res = Err(e.clone());
                    }
                }
            }
        }
        for (reply, res) in replies {
            let _ = reply.send(res);
        }
    }

    /// Writes the changes and the log entries in one transaction, flushes, then publishes them.
    fn commit(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        let last = changes.last().map_or(self.rv, |c| c.rv);
        let retention = self.shared.config.log_retention.max(1);
        let compacted = last.saturating_sub(retention).max(self.compacted);
        let mut encoded = Vec::with_capacity(changes.len());
        for c in changes {
            // One encoding serves the object's row, its log entry and the readers' cache.
            let json: Arc<[u8]> = serde_json::to_vec(&*c.object)?.into();
            let entry = encode_log(c.type_, c.kind, &json);
            let obj = (c.type_ != EventKind::Deleted).then_some(json);
            encoded.push((object_key(c.kind, &c.name), obj, rv_key(c.rv), entry));
        }
        // Watches starting now must not count on entries this commit removes.
        self.shared.compacted.store(compacted, Ordering::Release);
        let s = &self.shared;
        (&s.objects, &s.log, &s.meta).transaction(|(objects, log, meta)| {
            for (key, obj, rv, entry) in &encoded {
                match obj {
                    Some(bytes) => objects.insert(key.as_slice(), &bytes[..])?,
                    None => objects.remove(key.as_slice())?,
                };
                log.insert(rv, entry.as_slice())?;
            }
            for rv in self.compacted + 1..=compacted {
                log.remove(&rv_key(rv))?;
            }
            meta.insert(RV_KEY, &rv_key(last))?;
            Ok::<(), ConflictableTransactionError<()>>(())
        })?;
        let flushed = s.db.flush();
        self.rv = last;
        self.compacted = compacted;
        let encodings = encoded.into_iter().map(|(_, obj, _, _)| obj);
        self.publish(changes, encodings, last);
        flushed.map(|_| ()).map_err(|e| StoreError::Storage(format!("flush failed: {e}")))
    }

    /// Makes committed changes visible to readers and watches, in resourceVersion order, each
    /// object with the encoding that was stored (`None` for deletions).
    fn publish(&self, changes: &[Change], encodings: impl Iterator<Item = Option<Arc<[u8]>>>, last: u64) {
        let mut cache = self.shared.write();
        for (c, json) in changes.iter().zip(encodings) {
            let map = cache.map_mut(c.kind);
            match json {
                None => map.remove(&c.name),
                Some(json) => map.insert(c.name.clone(), StoredObject::new(c.object.clone(), json)),
            };
        }
        cache.rv = last;
        self.shared.rv.store(last, Ordering::Release);
        for c in changes {
            // No receivers is not an error: nobody is watching.
            let _ = self.events.send(WatchEvent { kind_: c.type_, kind: c.kind, object: c.object.clone(), rv: c.rv });
        }
    }
}

fn apply(tx: &mut Tx<'_>, op: Op) -> Result<Reply, StoreError> {
    match op {
        Op::Create { kind, obj } => tx.create(kind, obj).map(Reply::Object),
        Op::Update { kind, obj } => tx.update(kind, obj).map(Reply::Object),
        Op::UpdateStatus { kind, name, status, rv } => {
            tx.update_status(kind, &name, status, rv.as_deref()).map(Reply::Object)
        }
        Op::Delete { kind, name, rv } => tx.delete(kind, &name, rv.as_deref()).map(Reply::Deleted),
    }
}
