//! The single writer: a thread that takes write requests in batches, stages them, commits each
//! batch in one sled transaction under one flush (group commit), then publishes it in order.
//!
//! A batch is published only once its flush succeeded. After a failed write sled refuses every
//! later write (it keeps the first IO error until it is opened again) and still holds the failed
//! batch in memory, so the writer drops the database, opens it again from the disk and reloads
//! what it published from there. While the disk refuses writes the store says so (`unwritable`)
//! and tries a small write every second, so that it is writable again as soon as space returns.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use aoctl_api::Kind;
use sled::transaction::ConflictableTransactionError;
use sled::Transactional;
use tokio::sync::{broadcast, oneshot};

use crate::backend::{StoredObject, WatchEvent};
use crate::change::EventKind;
use crate::codec::{
    encode_log, log_header, log_object, object_key, object_rv, parse_rv_key, rv_key, PROBE_KEY, RV_KEY,
};
use crate::error::StoreError;
use crate::state::{Cache, Db, Loaded, Shared};
use crate::tx::{apply, Change, Op, Overlay, Reply, Tx};

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

/// How often a store whose disk refused a write tries a write of its own.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long opening the database again waits for sled's own threads to let go of its lock.
const REOPEN_ATTEMPTS: usize = 100;
const REOPEN_PAUSE: Duration = Duration::from_millis(20);

/// A row of a commit: the object's key, its encoding (`None` for a removal), its log key and entry.
type Encoded = (Vec<u8>, Option<Arc<[u8]>>, [u8; 8], Vec<u8>);

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
    pub(crate) fn new(
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
    pub(crate) fn run(mut self) {
        loop {
            let first = if self.shared.unwritable().is_some() {
                match self.requests.recv_timeout(PROBE_EVERY) {
                    Ok(r) => r,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        self.probe();
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match self.requests.recv() {
                    Ok(r) => r,
                    Err(_) => break,
                }
            };
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
                let mut tx = Tx::new(&*cache, &overlay, next_rv, req.dry_run);
                let res = apply(&mut tx, req.op);
                if res.is_ok() && !req.dry_run {
                    let (own, staged, n) = tx.into_parts();
                    overlay.extend(own);
                    self.event_index.note(&staged);
                    changes.extend(staged);
                    next_rv = n;
                    if self.event_index.len() > shared.config.max_events {
                        let mut tx = Tx::new(&*cache, &overlay, next_rv, false);
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
                tracing::error!(error = %e, writes = changes.len(), "store commit failed; none of it is visible");
                self.failed(&e);
                let e = not_stored(e);
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
    /// Nothing is published when the transaction or the flush fails.
    fn commit(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        let last = changes.last().map_or(self.rv, |c| c.rv);
        let retention = self.shared.config.log_retention.max(1);
        let compacted = last.saturating_sub(retention).max(self.compacted);
        let mut encoded: Vec<Encoded> = Vec::with_capacity(changes.len());
        for c in changes {
            // One encoding serves the object's row, its log entry and the readers' cache.
            let json: Arc<[u8]> = serde_json::to_vec(&*c.object)?.into();
            let entry = encode_log(c.type_, c.kind, &json);
            let obj = (c.type_ != EventKind::Deleted).then_some(json);
            encoded.push((object_key(c.kind, &c.name), obj, rv_key(c.rv), entry));
        }
        if self.shared.db().is_none() {
            self.reopen()?;
        }
        // Watches starting now must not count on entries this commit removes.
        self.shared.compacted.store(compacted, Ordering::Release);
        if let Err(e) = self.write(&encoded, compacted, last) {
            self.shared.compacted.store(self.compacted, Ordering::Release);
            return Err(e);
        }
        self.rv = last;
        self.compacted = compacted;
        let encodings = encoded.into_iter().map(|(_, obj, _, _)| obj);
        self.publish(changes, encodings, last);
        self.writable();
        Ok(())
    }

    /// The transaction and the flush of a commit.
    fn write(&self, encoded: &[Encoded], compacted: u64, last: u64) -> Result<(), StoreError> {
        let db = self.shared.db();
        let db = db.as_ref().ok_or_else(reopening)?;
        (&db.objects, &db.log, &db.meta).transaction(|(objects, log, meta)| {
            for (key, obj, rv, entry) in encoded {
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
        db.db.flush()?;
        Ok(())
    }

    /// Notes that the disk takes writes (again).
    fn writable(&self) {
        if let Some(was) = self.shared.unwritable() {
            self.shared.set_unwritable(None);
            tracing::info!(after = %was, "the store writes to its disk again");
        }
    }

    /// After a failed write: the store is unwritable until a write succeeds, and the database is
    /// opened again so that sled forgets both its error and the batch it holds in memory.
    fn failed(&mut self, e: &StoreError) {
        self.shared.set_unwritable(Some(e.clone()));
        if let Err(e) = self.reopen() {
            tracing::error!(error = %e, "cannot open the store's database again; trying again at the next write");
        }
        self.event_index = EventIndex::from_cache(&self.shared.read());
    }

    /// A write of one small entry, to learn whether the disk takes writes again.
    fn probe(&mut self) {
        let tried = (|| {
            if self.shared.db().is_none() {
                self.reopen()?;
            }
            let db = self.shared.db();
            let db = db.as_ref().ok_or_else(reopening)?;
            db.meta.insert(PROBE_KEY, &rv_key(self.rv))?;
            db.db.flush()?;
            Ok::<(), StoreError>(())
        })();
        match tried {
            Ok(()) => self.writable(),
            Err(e) => {
                tracing::debug!(error = %e, "the store's disk still refuses writes");
                self.failed(&e);
            }
        }
    }

    /// Drops the database and opens it again from the disk, then makes readers see what the disk
    /// holds. That is what was published, unless the disk kept a batch whose flush reported an
    /// error: then that batch is published too (under the versions it was written with), so
    /// readers, watches and the next restart agree and no version is given out again.
    fn reopen(&mut self) -> Result<(), StoreError> {
        let mut slot = self.shared.db_mut();
        // Every handle must go: sled holds a lock on its file until the last one is dropped, and
        // a database whose write failed does no IO when dropped.
        slot.take();
        let db = open_again(&self.shared)?;
        let Loaded { cache, rv, compacted } = db.load()?;
        let mut kept = vec![];
        if rv > self.rv {
            for item in db.log.range(rv_key(self.rv + 1)..=rv_key(rv)) {
                let (k, v) = item?;
                let (kind_, kind) = log_header(&v)?;
                kept.push(WatchEvent { kind_, kind, object: Arc::new(log_object(&v)?), rv: parse_rv_key(&k)? });
            }
        }
        *slot = Some(db);
        drop(slot);
        if rv < self.rv {
            // Never expected: a published write is flushed. Versions still only go up.
            tracing::error!(published = self.rv, on_disk = rv, "the store's disk holds less than was published");
            return Ok(());
        }
        if !kept.is_empty() {
            tracing::warn!(
                from = self.rv + 1,
                to = rv,
                "a batch whose write reported an error was found on the disk; it is published"
            );
        }
        {
            let mut published = self.shared.write();
            *published = cache;
            self.shared.rv.store(rv, Ordering::Release);
        }
        self.rv = rv;
        self.compacted = compacted.max(self.compacted);
        self.shared.compacted.store(self.compacted, Ordering::Release);
        for ev in kept {
            let _ = self.events.send(ev);
        }
        Ok(())
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

/// Opens the store's database, waiting a little for sled's threads to release the old one.
fn open_again(shared: &Shared) -> Result<Db, StoreError> {
    let mut attempt = 0;
    loop {
        match Db::open(&shared.dir) {
            Err(StoreError::Unavailable(m)) if m.contains("could not acquire lock") && attempt < REOPEN_ATTEMPTS => {
                attempt += 1;
                std::thread::sleep(REOPEN_PAUSE);
            }
            other => return other,
        }
    }
}

fn reopening() -> StoreError {
    StoreError::Unavailable("the store's database could not be opened again after a failed write".into())
}

/// The error a client gets for a write of a failed batch.
fn not_stored(e: StoreError) -> StoreError {
    match e {
        StoreError::InsufficientStorage(m) => StoreError::InsufficientStorage(format!("{m}; the write was not stored")),
        StoreError::Unavailable(m) => StoreError::Unavailable(format!("{m}; the write was not stored")),
        StoreError::Storage(m) => StoreError::Storage(format!("{m}; the write was not stored")),
        e => e,
    }
}
