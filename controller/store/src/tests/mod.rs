//! Tests of the store against a real sled database in a temporary directory.

mod contract;
mod crud;
#[cfg(target_os = "linux")]
#[path = "../../../../e2e/support/disk.rs"]
mod disk;
#[cfg(target_os = "linux")]
mod full_disk;
mod lifecycle;
#[cfg(target_os = "linux")]
#[path = "../../../../e2e/support/strict.rs"]
mod strict;
mod watching;

use std::path::Path;
use std::time::Duration;

use aoctl_api::{Event, EventType, InvolvedObject, Time};
use serde_json::{json, Value};

use crate::{SledStore, Store, StoreConfig, Watch, WatchEvent, WriteOptions};

pub(super) const W: WriteOptions = WriteOptions { dry_run: false };

pub(super) fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

pub(super) fn open(dir: &Path) -> Store {
    Store::open(dir).expect("the store opens")
}

pub(super) fn open_with(dir: &Path, config: StoreConfig) -> Store {
    Store::open_with(dir, config).expect("the store opens")
}

/// The sled store itself, for tests that look at what it keeps on disk, and a handle on it.
pub(super) fn open_sled(dir: &Path, config: StoreConfig) -> (SledStore, Store) {
    let sled = SledStore::open(dir, config).expect("the store opens");
    (sled.clone(), Store::new(sled))
}

pub(super) fn project(name: &str) -> Value {
    json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": name}, "spec": {"path": "/tmp/x"}})
}

pub(super) fn session(name: &str, project: &str) -> Value {
    json!({
        "apiVersion": "ao.dev/v1alpha1",
        "kind": "Session",
        "metadata": {"name": name},
        "spec": {"project": project, "prompt": "fix it"}
    })
}

/// A session owned by the object `owner` (a stored object with a uid).
pub(super) fn owned_session(name: &str, owner: &Value) -> Value {
    let mut s = session(name, owner["metadata"]["name"].as_str().unwrap_or_default());
    s["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "ao.dev/v1alpha1",
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }]);
    s
}

pub(super) fn event(about: &str) -> Value {
    let involved = InvolvedObject { kind: "Session".into(), name: about.into(), uid: None };
    let e = Event::new(involved, EventType::Normal, "Started", "the agent started", "test", Time::now());
    serde_json::to_value(e).expect("events serialise")
}

pub(super) fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"].as_str().expect("a resourceVersion").parse().expect("a number")
}

pub(super) fn generation(obj: &Value) -> i64 {
    obj["metadata"]["generation"].as_i64().expect("a generation")
}

/// The next event, or `None` when none comes within a short while.
pub(super) async fn next_soon(w: &mut Watch) -> Option<WatchEvent> {
    tokio::time::timeout(Duration::from_millis(300), w.next()).await.ok().flatten()
}

#[test]
fn handles_cross_threads() {
    fn send_sync<T: Send + Sync + Clone + 'static>() {}
    fn send<T: Send + 'static>() {}
    send_sync::<Store>();
    send::<Watch>();
}
