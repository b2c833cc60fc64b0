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
mod nodes;
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

/// Asks the etcd member at `endpoint` directly, through its JSON gateway (`path` is `/v3/...`),
/// as an operator would; etcd's error when it refuses.
async fn gateway(endpoint: &str, path: &str, body: Value) -> Result<Value, String> {
    let client = reqwest::Client::builder().no_proxy().build().map_err(|e| e.to_string())?;
    let sent = client.post(format!("{endpoint}{path}")).json(&body).timeout(Duration::from_secs(5)).send().await;
    let resp = sent.map_err(|e| e.to_string())?;
    let status = resp.status();
    let answer: Value = resp.json().await.map_err(|e| e.to_string())?;
    if status.is_success() {
        Ok(answer)
    } else {
        Err(format!("{status}: {answer}"))
    }
}

/// A key or value as etcd's gateway takes it: base64.
fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A 64-bit integer of etcd's JSON: a string (or a number); 0 when absent.
fn int(v: &Value) -> i64 {
    v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_i64()).unwrap_or(0)
}

/// Waits (a bounded while) until `check` holds.
async fn eventually(what: &str, bound: Duration, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + bound;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {bound:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
