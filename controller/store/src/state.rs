//! The state shared by readers, watches and the writer: the sled database, the published cache,
//! counters and whether the disk takes writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aoctl_api::Kind;
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use serde_json::Value;

use crate::backend::StoredObject;
use crate::codec::{self, kind_index, object_rv, parse_object_key, parse_rv_key};
use crate::error::StoreError;
use crate::tx::{owned_in, View};

/// A key and its value, as stored.
#[cfg(test)]
pub(crate) type KeyValue = (Vec<u8>, Vec<u8>);

/// Tunables of a store.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// How many of the newest change-log entries are kept for watches to resume from.
    pub log_retention: u64,
    /// How many `Event` objects are kept; older ones are deleted.
    pub max_events: usize,
    /// Capacity of the live watch channel; a watch that falls further behind catches up from the log.
    pub watch_buffer: usize,
    /// The most writes committed together under one flush.
    pub max_batch: usize,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig { log_retention: 10_000, max_events: 1000, watch_buffer: 4096, max_batch: 256 }
    }
}

/// The objects as of the newest published resourceVersion, in memory.
#[derive(Default)]
pub(crate) struct Cache {
    pub objects: [BTreeMap<String, StoredObject>; Kind::ALL.len()],
    pub rv: u64,
}

impl Cache {
    pub(crate) fn map(&self, kind: Kind) -> &BTreeMap<String, StoredObject> {
        &self.objects[kind_index(kind)]
    }

    pub(crate) fn map_mut(&mut self, kind: Kind) -> &mut BTreeMap<String, StoredObject> {
        &mut self.objects[kind_index(kind)]
    }
}

impl View for Cache {
    fn get(&self, kind: Kind, name: &str) -> Option<Arc<Value>> {
        self.map(kind).get(name).map(|o| o.object_arc().clone())
    }

    fn owned_by(&self, uid: &str) -> Vec<(Kind, String)> {
        owned_in(|kind| self.map(kind), uid)
    }
}

/// The sled database and its trees; clones share them.
#[derive(Clone)]
pub(crate) struct Db {
    pub db: sled::Db,
    pub objects: sled::Tree,
    pub log: sled::Tree,
    pub meta: sled::Tree,
}

/// What a database holds, loaded into memory.
pub(crate) struct Loaded {
    pub cache: Cache,
    /// The newest resourceVersion it has ever assigned.
    pub rv: u64,
    /// Log entries up to and including this resourceVersion are gone.
    pub compacted: u64,
}

impl Db {
    pub(crate) fn open(dir: &Path) -> Result<Db, StoreError> {
        // Every acknowledged write is flushed by the writer (group commit), so sled's own periodic
        // flush would only wake an idle controller twice a second for nothing.
        let db = sled::Config::new().path(dir).flush_every_ms(None).open()?;
        let objects = db.open_tree(codec::OBJECTS)?;
        let log = db.open_tree(codec::LOG)?;
        let meta = db.open_tree(codec::META)?;
        Ok(Db { db, objects, log, meta })
    }

    /// Every object and the counters, as stored.
    pub(crate) fn load(&self) -> Result<Loaded, StoreError> {
        let mut cache = Cache::default();
        let mut rv = self.stored_rv()?;
        for item in self.objects.iter() {
            let (k, v) = item?;
            let (kind, name) =
                parse_object_key(&k).ok_or_else(|| StoreError::Storage("malformed object key".into()))?;
            let obj: Value = serde_json::from_slice(&v)?;
            rv = rv.max(object_rv(&obj));
            cache.map_mut(kind).insert(name, StoredObject::new(Arc::new(obj), Arc::from(&v[..])));
        }
        let compacted = match self.log.first()? {
            Some((k, _)) => parse_rv_key(&k)? - 1,
            None => rv,
        };
        cache.rv = rv;
        Ok(Loaded { cache, rv, compacted })
    }

    /// The newest resourceVersion of the counter and the log.
    pub(crate) fn stored_rv(&self) -> Result<u64, StoreError> {
        let mut rv = match self.meta.get(codec::RV_KEY)? {
            Some(b) => parse_rv_key(&b)?,
            None => 0,
        };
        if let Some((k, _)) = self.log.last()? {
            rv = rv.max(parse_rv_key(&k)?);
        }
        Ok(rv)
    }
}

/// Everything readers, watches and the writer thread share.
pub(crate) struct Shared {
    pub dir: PathBuf,
    /// The database; `None` while the writer reopens it after a failed write (and until a reopen
    /// succeeds).
    pub db: RwLock<Option<Db>>,
    pub cache: RwLock<Cache>,
    /// The newest published resourceVersion; mirrors `cache.rv`.
    pub rv: AtomicU64,
    /// Log entries up to and including this resourceVersion may have been removed.
    pub compacted: AtomicU64,
    /// Why the last write to the disk failed, while no write has succeeded since.
    pub unwritable: Mutex<Option<StoreError>>,
    pub config: StoreConfig,
}

impl Shared {
    /// Opens the database at `dir` and loads the objects and counters.
    pub(crate) fn open(dir: &Path, config: StoreConfig) -> Result<Shared, StoreError> {
        let db = Db::open(dir)?;
        let Loaded { cache, rv, compacted } = db.load()?;
        Ok(Shared {
            dir: dir.to_path_buf(),
            db: RwLock::new(Some(db)),
            cache: RwLock::new(cache),
            rv: AtomicU64::new(rv),
            compacted: AtomicU64::new(compacted),
            unwritable: Mutex::new(None),
            config,
        })
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Cache> {
        // A panic while holding the lock cannot leave the cache half-updated in a way readers would
        // notice more than a stale read, so a poisoned lock is used as is.
        self.cache.read()
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Cache> {
        self.cache.write()
    }

    /// The database, shared with other readers; the writer waits for them before reopening it.
    pub(crate) fn db(&self) -> RwLockReadGuard<'_, Option<Db>> {
        self.db.read()
    }

    pub(crate) fn db_mut(&self) -> RwLockWriteGuard<'_, Option<Db>> {
        self.db.write()
    }

    pub(crate) fn published_rv(&self) -> u64 {
        self.rv.load(Ordering::Acquire)
    }

    /// Why the store cannot write now, if it cannot.
    pub(crate) fn unwritable(&self) -> Option<StoreError> {
        self.unwritable.lock().clone()
    }

    pub(crate) fn set_unwritable(&self, why: Option<StoreError>) {
        *self.unwritable.lock() = why;
    }

    /// The database's handles, for tests that read the trees.
    #[cfg(test)]
    pub(crate) fn handles(&self) -> Db {
        self.db().clone().expect("the database is open")
    }

    /// Every key and value of every tree, for tests that compare the database before and after.
    #[cfg(test)]
    pub(crate) fn dump(&self) -> Vec<(Vec<u8>, Vec<KeyValue>)> {
        let db = self.handles().db;
        let mut names = db.tree_names();
        names.sort();
        names
            .into_iter()
            .map(|n| {
                let tree = db.open_tree(&n).expect("tree opens");
                let items =
                    tree.iter().map(|i| i.expect("tree reads")).map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
                (n.to_vec(), items)
            })
            .collect()
    }
}
