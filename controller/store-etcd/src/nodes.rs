//! The register of the replicas' nodes: each replica keeps a key of its own under
//! `<prefix>/nodes/<node>/<lease>` for as long as it runs, holding its node, host, data folder
//! and process, on a lease it keeps alive (so a replica that dies leaves the register within the
//! lease's TTL). A node is one data folder: a replica refuses to register a node that a live
//! replica of another data folder (another host, or another path) has registered before it.
//!
//! Two replicas of different folders that register at the same moment both see each other once
//! their keys are written; the one whose key is newer (a higher create revision) gives way, so
//! exactly one of them runs as the node.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aoctl_store::StoreError;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use crate::wire::{PutRequest, RangeRequest, RequestOp, TxnRequest};
use crate::{EtcdStore, MIN_TTL};

/// What a replica registers of itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaim {
    /// The node the replica runs as.
    pub node: String,
    /// The machine it runs on.
    pub host: String,
    /// Its data folder, as it names it.
    pub data_dir: String,
    /// Its process id, to find it by.
    pub pid: u32,
}

impl NodeClaim {
    /// Whether `other` runs in the same data folder (on the same host, at the same path).
    pub fn same_folder(&self, other: &NodeClaim) -> bool {
        self.host == other.host && self.data_dir == other.data_dir
    }
}

/// Why a replica could not register its node.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// A live replica of another data folder registered the node first.
    #[error(
        "node \"{}\" is taken by a live replica with another data folder: process {} on host \"{}\" in {}",
        .theirs.node, .theirs.pid, .theirs.host, .theirs.data_dir
    )]
    Taken { theirs: NodeClaim },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A replica's key in the register, kept alive until [`Registration::release`] (or, when the
/// process dies, until its lease's TTL runs out). Should the lease be lost (etcd unreachable for
/// longer than the TTL), the key is written again, with the same check.
pub struct Registration {
    store: EtcdStore,
    lease: Arc<AtomicI64>,
    keeper: JoinHandle<()>,
}

impl EtcdStore {
    /// Registers `claim` with a lease of `ttl` (at least [`MIN_TTL`]), unless a live replica of
    /// another data folder registered the same node before. Tries again while etcd does not
    /// answer, up to the store's write timeout.
    pub async fn register_node(&self, claim: &NodeClaim, ttl: Duration) -> Result<Registration, RegisterError> {
        let ttl = ttl.max(MIN_TTL);
        let deadline = tokio::time::Instant::now() + self.inner.shared.config.write_timeout;
        let lease = loop {
            match register_once(self, claim, ttl).await {
                Ok(lease) => break lease,
                Err(RegisterError::Store(e)) if tokio::time::Instant::now() < deadline => {
                    tracing::warn!(error = %e, "cannot register this replica's node yet; trying again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        };
        tracing::info!(node = %claim.node, lease, "this replica's node is registered");
        let lease = Arc::new(AtomicI64::new(lease));
        let keeper = tokio::spawn(keep(self.clone(), claim.clone(), ttl, lease.clone()));
        Ok(Registration { store: self.clone(), lease, keeper })
    }

    /// The live registrations of `node`, oldest first.
    pub async fn node_claims(&self, node: &str) -> Result<Vec<NodeClaim>, StoreError> {
        Ok(claims(self, node).await?.into_iter().map(|(_, _, c)| c).collect())
    }
}

impl Registration {
    /// Leaves the register at once: the lease is revoked, which deletes the key.
    pub async fn release(self) {
        self.keeper.abort();
        let shared = &self.store.inner.shared;
        let lease = self.lease.load(Ordering::Acquire);
        let revoked = tokio::time::timeout(shared.config.request_timeout, shared.client.lease_revoke(lease)).await;
        if !matches!(revoked, Ok(Ok(()))) {
            tracing::debug!(lease, "cannot revoke the node registration's lease; it expires by itself");
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// The keys of `node`'s registrations: from `<prefix>/nodes/<node>/` to the key past them.
fn node_range(store: &EtcdStore, node: &str) -> (Vec<u8>, Vec<u8>) {
    let prefix = store.inner.shared.config.prefix.trim_end_matches('/');
    let start = format!("{prefix}/nodes/{node}/").into_bytes();
    let mut end = start.clone();
    // The range ends at the successor of its last byte, `/`.
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    (start, end)
}

/// An etcd request bounded by `timeout`, its failure as the store's.
async fn bounded<T>(
    timeout: Duration,
    f: impl std::future::Future<Output = Result<T, crate::client::Error>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(timeout, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(crate::error::unavailable(&e.to_string())),
        Err(_) => Err(crate::error::unavailable(&format!("no answer within {timeout:?}"))),
    }
}

/// The registrations of `node` now: each key's create revision, lease-named key and claim, oldest
/// first. Values that are no claim (a newer version's) are passed over.
async fn claims(store: &EtcdStore, node: &str) -> Result<Vec<(i64, Vec<u8>, NodeClaim)>, StoreError> {
    let shared = &store.inner.shared;
    let (key, range_end) = node_range(store, node);
    let read = RangeRequest { key, range_end, ..RangeRequest::default() };
    let found = bounded(shared.config.request_timeout, shared.client.range(&read)).await?;
    let mut out: Vec<_> = found
        .kvs
        .into_iter()
        .filter_map(|kv| {
            let claim: NodeClaim = serde_json::from_slice(&kv.value).ok()?;
            (claim.node == node).then_some((kv.create_revision, kv.key, claim))
        })
        .collect();
    out.sort_by_key(|(rev, _, _)| *rev);
    Ok(out)
}

/// Writes this replica's key on a new lease, then looks at the node's other keys: an older one
/// of another data folder means the node is taken, and the key goes again. The lease's id.
async fn register_once(store: &EtcdStore, claim: &NodeClaim, ttl: Duration) -> Result<i64, RegisterError> {
    let shared = &store.inner.shared;
    let (client, timeout) = (&shared.client, shared.config.request_timeout);
    let lease = bounded(timeout, client.lease_grant(ttl.as_secs() as i64)).await?.id;
    let revoke = || async move {
        let _ = tokio::time::timeout(timeout, client.lease_revoke(lease)).await;
    };
    let (prefix, _) = node_range(store, &claim.node);
    let mut key = prefix;
    key.extend_from_slice(format!("{lease:016x}").as_bytes());
    let value = serde_json::to_vec(claim).expect("a claim serializes");
    let put = TxnRequest {
        compare: vec![],
        success: vec![RequestOp::Put(PutRequest { key: key.clone(), value, lease })],
        failure: vec![],
    };
    let mine = match bounded(timeout, client.txn(&put)).await {
        Ok(written) => written.header.revision,
        Err(e) => {
            revoke().await;
            return Err(e.into());
        }
    };
    let others = match claims(store, &claim.node).await {
        Ok(found) => found,
        Err(e) => {
            revoke().await;
            return Err(e.into());
        }
    };
    let taken = others.into_iter().find(|(rev, k, theirs)| *k != key && *rev < mine && !theirs.same_folder(claim));
    if let Some((_, _, theirs)) = taken {
        revoke().await;
        return Err(RegisterError::Taken { theirs });
    }
    Ok(lease)
}

/// Keeps the registration's lease alive, three times per TTL; when etcd says it is gone,
/// registers again on a new one.
async fn keep(store: EtcdStore, claim: NodeClaim, ttl: Duration, lease: Arc<AtomicI64>) {
    let shared = store.inner.shared.clone();
    loop {
        tokio::time::sleep(ttl / 3).await;
        let id = lease.load(Ordering::Acquire);
        let answer = tokio::time::timeout(ttl / 3, shared.client.lease_keep_alive(id)).await;
        match answer {
            Ok(Ok(a)) if a.ttl > 0 => continue,
            Ok(Ok(_)) => {}
            // Not answered: tried again at the next step, while the lease may still live.
            _ => continue,
        }
        tracing::warn!(node = %claim.node, lease = id, "this replica's node registration expired; registering again");
        match register_once(&store, &claim, ttl).await {
            Ok(new) => lease.store(new, Ordering::Release),
            Err(e @ RegisterError::Taken { .. }) => {
                tracing::error!(error = %e, "this replica lost its node's registration to another data folder");
            }
            Err(e) => tracing::debug!(error = %e, "cannot register this replica's node again yet"),
        }
    }
}
