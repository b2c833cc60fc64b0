//! Loading a backup into an empty sled store (`aoctl restore`), with the server stopped: every
//! object goes in as the backup holds it, uid, timestamps, status and resourceVersion included,
//! in one transaction, and the version counter is set past the snapshot's version, so no version
//! the restored objects carry is given out again.

use std::collections::BTreeSet;
use std::path::Path;

use aoctl_api::Kind;
use serde_json::Value;
use sled::transaction::ConflictableTransactionError;
use sled::Transactional;

use crate::codec::{kind_index, meta_str, object_key, object_rv, rv_key, set_meta, RV_KEY};
use crate::error::StoreError;
use crate::sled_store::SledStore;
use crate::state::Db;

/// What a restore loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    /// How many objects.
    pub objects: usize,
    /// The store's resourceVersion after the load: the next write gets a newer one.
    pub resource_version: u64,
    /// Whether every object kept the resourceVersion the backup gave it. The versions of a
    /// backup of etcd, where the objects of one transaction share a version, are numbered anew
    /// in a sled store, in which every version is one write's.
    pub versions_kept: bool,
}

impl SledStore {
    /// Loads `objects` (a backup taken at `resource_version`) into the store in `dir`, which must
    /// hold no object; no server may have it open. The objects keep their versions when those are
    /// distinct, and are otherwise numbered anew in their order; the counter goes past them.
    pub fn load_snapshot(
        dir: &Path,
        mut objects: Vec<(Kind, Value)>,
        resource_version: u64,
    ) -> Result<Restored, StoreError> {
        let db = Db::open(dir).map_err(|e| match e {
            StoreError::Unavailable(m) if m.contains("could not acquire lock") => StoreError::Unavailable(format!(
                "the store in {} is open in another process (a running `aoctl serve`?): stop it first",
                dir.display()
            )),
            e => e,
        })?;
        if !db.objects.is_empty() {
            return Err(StoreError::Invalid {
                message: format!(
                    "the store in {} already holds {} objects; a backup is restored into an empty store only \
                     (move the folder away, or restore into another data folder)",
                    dir.display(),
                    db.objects.len()
                ),
            });
        }
        let before = db.stored_rv()?;
        let versions: BTreeSet<u64> = objects.iter().map(|(_, o)| object_rv(o)).collect();
        let versions_kept = versions.len() == objects.len() && !versions.contains(&0);
        let counter = if versions_kept {
            let newest = versions.last().copied().unwrap_or(0);
            resource_version.max(newest).max(before)
        } else {
            objects.sort_by_cached_key(|(kind, o)| {
                (object_rv(o), kind_index(*kind), meta_str(o, "name").unwrap_or_default().to_string())
            });
            for (n, (_, o)) in objects.iter_mut().enumerate() {
                set_meta(o, "resourceVersion", Value::String((before + 1 + n as u64).to_string()));
            }
            before + objects.len() as u64
        };
        let mut rows = Vec::with_capacity(objects.len());
        for (kind, o) in &objects {
            let name = meta_str(o, "name").unwrap_or_default();
            rows.push((object_key(*kind, name), serde_json::to_vec(o)?));
        }
        // The history of a store whose objects are all gone tells nothing of the restored ones:
        // watches from before the restore get 410 and list again.
        let history: Vec<_> = db.log.iter().keys().collect::<Result<_, _>>()?;
        (&db.objects, &db.log, &db.meta).transaction(|(tree, log, meta)| {
            for (key, bytes) in &rows {
                tree.insert(key.as_slice(), bytes.as_slice())?;
            }
            for key in &history {
                log.remove(key)?;
            }
            meta.insert(RV_KEY, &rv_key(counter))?;
            Ok::<(), ConflictableTransactionError<()>>(())
        })?;
        db.db.flush()?;
        Ok(Restored { objects: objects.len(), resource_version: counter, versions_kept })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ObjectStore, Selector, StoreConfig, WriteOptions};
    use serde_json::json;

    fn project(name: &str, rv: u64) -> (Kind, Value) {
        let obj = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": rv.to_string(),
                "generation": 3, "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"path": "/src/x"}, "status": {"phase": "Ready"}});
        (Kind::Project, obj)
    }

    #[tokio::test]
    async fn a_snapshot_loads_with_its_versions_and_the_counter_goes_past_them() {
        let source = tempfile::tempdir().unwrap();
        let store = SledStore::open(source.path(), StoreConfig::default()).unwrap();
        for name in ["a", "b"] {
            store.create(Kind::Project, project(name, 1).1, WriteOptions::default()).await.unwrap();
        }
        let first = store.get_stored(Kind::Project, "a").await.unwrap().object().clone();
        store
            .update_status(Kind::Project, "a", json!({"phase": "Ready"}), None, WriteOptions::default())
            .await
            .unwrap();
        let snap = store.snapshot().await.unwrap();
        assert_eq!((snap.backend, snap.rv, snap.objects.len()), ("sled", 3, 2));
        let objects: Vec<(Kind, Value)> = snap.objects.iter().map(|(k, o)| (*k, o.object().clone())).collect();
        drop(store);

        let target = tempfile::tempdir().unwrap();
        let restored = SledStore::load_snapshot(target.path(), objects.clone(), snap.rv).unwrap();
        assert_eq!(restored, Restored { objects: 2, resource_version: 3, versions_kept: true });
        let store = SledStore::open(target.path(), StoreConfig::default()).unwrap();
        let (listed, rv) = store.list_stored(Kind::Project, &Selector::default()).await.unwrap();
        assert_eq!(rv, 3);
        let listed: Vec<Value> = listed.iter().map(|o| o.object().clone()).collect();
        assert_eq!(listed, objects.iter().map(|(_, o)| o.clone()).collect::<Vec<_>>(), "as they were, status too");
        assert_ne!(listed[0], first, "the status write is in");
        assert!(store.watch(&[], 2).is_err(), "no history before the restore: a watch from it lists again");
        assert!(store.watch(&[], 3).is_ok());
        let next = store.create(Kind::Project, project("c", 1).1, WriteOptions::default()).await.unwrap();
        assert_eq!(object_rv(&next), 4, "the next write gets the next version");
        // A precondition with a restored version holds.
        let b = store.update_status(Kind::Project, "b", json!({}), Some("2"), WriteOptions::default()).await;
        assert!(b.is_ok(), "{b:?}");
    }

    #[tokio::test]
    async fn only_an_empty_store_is_loaded() {
        let dir = tempfile::tempdir().unwrap();
        SledStore::load_snapshot(dir.path(), vec![project("a", 5)], 5).unwrap();
        let e = SledStore::load_snapshot(dir.path(), vec![project("b", 6)], 6).unwrap_err();
        assert!(e.to_string().contains("already holds 1 objects"), "{e}");
        let store = SledStore::open(dir.path(), StoreConfig::default()).unwrap();
        let e = SledStore::load_snapshot(dir.path(), vec![], 0).unwrap_err();
        assert!(e.to_string().contains("open in another process"), "{e}");
        assert!(store.get_stored(Kind::Project, "b").await.is_err(), "nothing of the refused load is in");
    }

    #[tokio::test]
    async fn shared_versions_are_numbered_anew_past_the_stores_own() {
        let dir = tempfile::tempdir().unwrap();
        {
            // A store that had objects once: its counter is at 2, its history holds them.
            let store = SledStore::open(dir.path(), StoreConfig::default()).unwrap();
            store.create(Kind::Project, project("old", 1).1, WriteOptions::default()).await.unwrap();
            store.delete(Kind::Project, "old", None, WriteOptions::default()).await.unwrap();
        }
        // A backup of etcd: one transaction wrote both, so they share its revision.
        let objects = vec![project("b", 40), project("a", 40), project("c", 12)];
        let restored = SledStore::load_snapshot(dir.path(), objects, 41).unwrap();
        assert_eq!(restored, Restored { objects: 3, resource_version: 5, versions_kept: false });
        let store = SledStore::open(dir.path(), StoreConfig::default()).unwrap();
        let rv = |name: &'static str| {
            let store = store.clone();
            async move { object_rv(store.get_stored(Kind::Project, name).await.unwrap().object()) }
        };
        assert_eq!([rv("c").await, rv("a").await, rv("b").await], [3, 4, 5], "in their order, after the old ones");
        assert!(store.watch(&[], 2).is_err(), "the old history is gone");
        let w = store.watch(&[], 5);
        assert!(w.is_ok());
    }
}
