//! The store on a disk that fills up: a real tmpfs of a few MiB mounted for the test (which needs
//! root or CAP_SYS_ADMIN; without them it fails under `make test` and elsewhere says so on stderr
//! and does nothing, `strict.rs`), filled by a file until the kernel answers ENOSPC, then freed by
//! removing the file.

use std::path::Path;
use std::time::{Duration, Instant};

use aoctl_api::Kind;
use serde_json::json;

use super::disk::{fill, mount_tmpfs, unmount};
use super::*;
use crate::{EventKind, Selector, StoreError};

/// A tmpfs mounted on a temporary directory, unmounted when dropped.
pub(super) struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `mib` MiB; `None` when this process may not mount (a failure when strict,
    /// see `strict.rs`).
    pub(super) fn mount(mib: u32) -> Option<Tmpfs> {
        let dir = tmp();
        match mount_tmpfs(dir.path(), mib) {
            Ok(()) => Some(Tmpfs { dir }),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                super::strict::missing(&format!("the full-disk test cannot mount a tmpfs here ({e}); run it as root"));
                None
            }
            Err(e) => panic!("mount a tmpfs on {}: {e}", dir.path().display()),
        }
    }

    pub(super) fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        unmount(self.dir.path());
    }
}

/// A session whose prompt takes `kib` KiB, so that storing it needs new space.
fn big_session(name: &str, kib: usize) -> Value {
    let mut s = session(name, "demo");
    s["spec"]["prompt"] = json!("x".repeat(kib << 10));
    s
}

/// Waits, at most `limit`, until the store says it can write.
async fn writable_within(store: &Store, limit: Duration) -> Result<(), StoreError> {
    let deadline = Instant::now() + limit;
    loop {
        match store.writable() {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[tokio::test]
async fn a_full_disk_refuses_writes_shows_none_of_them_and_recovers_without_a_restart() {
    let Some(fs) = Tmpfs::mount(8) else { return };
    let dir = fs.path().join("store");
    let store = open(&dir);
    store.create(Kind::Project, project("demo"), W).await.unwrap();
    store.create(Kind::Session, session("before", "demo"), W).await.unwrap();
    let start = store.resource_version();
    let mut w = store.watch(&[], start).unwrap();
    let filler = fill(fs.path());

    // Writes into space sled already has may still succeed; the first one that needs more fails.
    let mut stored = vec![];
    let mut refused = None;
    for i in 0..400 {
        let name = format!("s{i}");
        match store.create(Kind::Session, big_session(&name, 24), W).await {
            Ok(obj) => stored.push(obj),
            Err(e) => {
                refused = Some((name, e));
                break;
            }
        }
    }
    let (name, e) = refused.expect("a write fails on the full disk");
    assert_eq!((e.code(), e.reason()), (507, "InsufficientStorage"), "{e}");
    assert!(e.to_string().contains("no space left") && e.to_string().contains("not stored"), "{e}");
    let last_ok = stored.last().map_or(start, rv);
    assert_eq!(store.resource_version(), last_ok, "the failed write gave out no version");
    assert!(store.get(Kind::Session, &name).await.unwrap_err().is_not_found(), "the refused object is not readable");
    let (items, list_rv) = store.list(Kind::Session, &Selector::everything()).await.unwrap();
    assert_eq!((items.len(), list_rv), (stored.len() + 1, last_ok));
    assert_eq!(store.writable().unwrap_err().code(), 507, "the store says it cannot write");

    // The disk is still full: other writes fail the same way and leave nothing behind.
    let again = store.create(Kind::Session, big_session("again", 24), W).await.unwrap_err();
    assert_eq!(again.code(), 507, "{again}");
    let note = json!({"phase": "Working", "note": "y".repeat(24 << 10)});
    let e = store.update_status(Kind::Session, "before", note, None, W).await.unwrap_err();
    assert_eq!(e.code(), 507, "{e}");
    assert!(store.get(Kind::Session, "before").await.unwrap().get("status").is_none(), "the status is unchanged");
    assert_eq!(store.resource_version(), last_ok);

    std::fs::remove_file(&filler).expect("free the space");
    writable_within(&store, Duration::from_secs(20)).await.expect("the store writes again once space returns");
    let after = store.create(Kind::Session, session("after", "demo"), W).await.unwrap();
    assert_eq!(rv(&after), last_ok + 1);

    // The watch saw exactly the stored writes, then the one after, with no gap and nothing else.
    let mut seen = vec![];
    while let Some(ev) = next_soon(&mut w).await {
        seen.push(ev);
    }
    let names: Vec<String> =
        seen.iter().map(|e| e.object["metadata"]["name"].as_str().unwrap_or_default().to_string()).collect();
    let mut expected: Vec<String> =
        stored.iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_string()).collect();
    expected.push("after".into());
    assert_eq!(names, expected);
    assert!(seen.iter().all(|e| e.kind_ == EventKind::Added));
    let rvs: Vec<u64> = seen.iter().map(|e| e.rv).collect();
    assert_eq!(rvs, (start + 1..=last_ok + 1).collect::<Vec<_>>());

    // After a restart the refused writes are still absent and versions go on from the last one.
    drop(w);
    drop(store);
    let store = open(&dir);
    assert_eq!(store.resource_version(), last_ok + 1);
    assert!(store.get(Kind::Session, &name).await.unwrap_err().is_not_found());
    assert!(store.get(Kind::Session, "again").await.unwrap_err().is_not_found());
    store.get(Kind::Session, "after").await.unwrap();
    let mut replay = store.watch(&[], start).unwrap();
    let mut replayed = vec![];
    while let Some(ev) = next_soon(&mut replay).await {
        replayed.push(ev.rv);
    }
    assert_eq!(replayed, rvs, "the log holds the same changes");
    let next = store.create(Kind::Session, session("next", "demo"), W).await.unwrap();
    assert_eq!(rv(&next), last_ok + 2);
}
