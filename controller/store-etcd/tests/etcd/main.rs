//! The etcd store against real etcd clusters on loopback ports that the tests start and stop
//! themselves (Debian's etcd-server): the contract suite of every store backend, and what only a
//! cluster shows: a member killed, the whole cluster down and back, compaction, two stores
//! writing the same objects, a store opened again.
//!
//! The clusters are started the Unix way (a parent-death signal), so these build on Unix only.
#![cfg(unix)]

#[path = "../../../../e2e/support/etcd.rs"]
mod cluster;

mod contract;
mod election;
mod failures;
mod sharing;

use std::time::Duration;

use aoctl_store::{Store, Watch, WatchEvent};
use aoctl_store_etcd::{EtcdConfig, EtcdStore};
use serde_json::{json, Value};

/// How long a watch may take to deliver a change that was already acknowledged.
const DELIVERY: Duration = Duration::from_secs(15);

/// A prefix no other store uses.
fn fresh_prefix() -> String {
    format!("/aoctl-test/{}", uuid::Uuid::new_v4())
}

/// The settings of a store under a fresh prefix of the cluster at `endpoints`.
fn config(endpoints: Vec<String>) -> EtcdConfig {
    EtcdConfig { prefix: fresh_prefix(), ..EtcdConfig::new(endpoints) }
}

async fn open(config: EtcdConfig) -> (EtcdStore, Store) {
    let etcd = EtcdStore::connect(config).await.expect("the store connects");
    (etcd.clone(), Store::new(etcd))
}

fn project(name: &str) -> Value {
    json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": name}, "spec": {"path": "/src/x"}})
}

fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).expect("a resourceVersion")
}

fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or_default()
}

async fn next(w: &mut Watch) -> WatchEvent {
    tokio::time::timeout(DELIVERY, w.next())
        .await
        .expect("an acknowledged change is delivered")
        .unwrap_or_else(|| panic!("the watch stays open ({:?})", w.error()))
}

/// Waits (a bounded while) until `check` holds.
async fn eventually(what: &str, bound: Duration, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + bound;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {bound:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
