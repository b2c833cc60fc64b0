//! `aoctl restore FILE`: loads a backup (`aoctl_api::backup`) into an empty store with the
//! server stopped: sled in `<data dir>/store`, or an etcd prefix. Every line is decoded and
//! validated as the API decodes a body before anything is written, and a store that holds any
//! object is refused. sled keeps each object's resourceVersion; etcd gives each the revision of
//! the transaction that wrote it (docs/store.md#backup-and-restore).

use std::path::PathBuf;

use aoctl_api::backup::{self, Header};
use aoctl_api::DecodeError;
use aoctl_store::{Restored, SledStore, StoreError};
use aoctl_store_etcd::{EtcdConfig, EtcdStore};

use crate::StoreBackend;

/// What `aoctl restore` restores, and where.
#[derive(Clone, Debug)]
pub struct RestoreOptions {
    /// The backup file.
    pub file: PathBuf,
    /// The data folder, whose `store` a sled restore writes.
    pub data_dir: PathBuf,
    pub store: StoreBackend,
}

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// The file, the line and what is wrong with it.
    #[error("{0}; nothing was restored")]
    Decode(DecodeError),
    #[error("cannot restore into the store in {path}: {source}")]
    Store { path: PathBuf, source: StoreError },
    #[error("cannot restore into etcd at {endpoints}: {source}")]
    Etcd { endpoints: String, source: StoreError },
}

/// Reads and checks the backup, then loads it; the backup's header and what was loaded.
pub async fn restore(opts: &RestoreOptions) -> Result<(Header, Restored), RestoreError> {
    let text =
        std::fs::read_to_string(&opts.file).map_err(|e| RestoreError::Read { path: opts.file.clone(), source: e })?;
    let parsed = backup::parse(&opts.file.display().to_string(), &text).map_err(RestoreError::Decode)?;
    let objects: Vec<_> = parsed.objects.into_iter().map(|e| (e.kind, e.object)).collect();
    let header = parsed.header;
    let restored = match &opts.store {
        StoreBackend::Sled => {
            let path = opts.data_dir.join("store");
            let rv = header.resource_version();
            let dir = path.clone();
            tokio::task::spawn_blocking(move || SledStore::load_snapshot(&dir, objects, rv))
                .await
                .map_err(|e| RestoreError::Store { path: path.clone(), source: StoreError::Storage(e.to_string()) })?
                .map_err(|e| RestoreError::Store { path, source: e })?
        }
        StoreBackend::Etcd { endpoints, prefix } => {
            let failed = |e| RestoreError::Etcd { endpoints: endpoints.join(","), source: e };
            let config = EtcdConfig { prefix: prefix.clone(), ..EtcdConfig::new(endpoints.clone()) };
            let etcd = EtcdStore::connect(config).await.map_err(failed)?;
            etcd.load_snapshot(objects).await.map_err(failed)?
        }
    };
    Ok((header, restored))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::Kind;
    use aoctl_store::Store;

    /// A backup file of a store with a project and a session whose status was written.
    async fn backup_file(dir: &std::path::Path) -> (PathBuf, Vec<serde_json::Value>) {
        let store = crate::http::backup::sample_store(&dir.join("source"), "Working").await;
        let snapshot = store.snapshot().await.unwrap();
        let objects = snapshot.objects.iter().map(|(_, o)| o.object().clone()).collect();
        let text: Vec<u8> =
            crate::http::backup::lines(snapshot, aoctl_api::Time::now()).flat_map(|b| b.to_vec()).collect();
        let file = dir.join("backup.jsonl");
        std::fs::write(&file, text).unwrap();
        (file, objects)
    }

    #[tokio::test]
    async fn a_backup_restores_into_an_empty_data_folder_once() {
        let dir = tempfile::tempdir().unwrap();
        let (file, objects) = backup_file(dir.path()).await;
        let opts = RestoreOptions { file, data_dir: dir.path().join("data"), store: StoreBackend::Sled };
        let (header, restored) = restore(&opts).await.unwrap();
        assert_eq!((header.objects, restored.objects, restored.resource_version), (2, 2, 3));
        let e = restore(&opts).await.unwrap_err().to_string();
        assert!(e.contains("already holds 2 objects"), "{e}");
        let store = Store::open(&dir.path().join("data/store")).unwrap();
        assert_eq!(store.get(Kind::Project, "p").await.unwrap(), objects[0]);
        assert_eq!(store.get(Kind::Session, "s").await.unwrap(), objects[1]);
    }

    #[tokio::test]
    async fn a_file_that_does_not_decode_restores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (file, _) = backup_file(dir.path()).await;
        let text = std::fs::read_to_string(&file).unwrap().replace("\"prompt\":\"fix it\"", "\"prompt\":7");
        std::fs::write(&file, text).unwrap();
        let opts = RestoreOptions { file: file.clone(), data_dir: dir.path().join("data"), store: StoreBackend::Sled };
        let e = restore(&opts).await.unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:3:", file.display())), "names the line: {e}");
        assert!(e.contains("spec.prompt") && e.ends_with("nothing was restored"), "{e}");
        assert!(!dir.path().join("data/store").exists(), "no store was even made");
    }
}
