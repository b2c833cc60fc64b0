//! The store of aoctl on etcd v3: [`EtcdStore`] implements [`aoctl_store::ObjectStore`] with the
//! same rules as the sled store (they are the same code, `aoctl_store::tx`) and passes the same
//! contract suite.
//!
//! Objects live under `<prefix>/objects/<Kind>/<name>`, stored without their resourceVersion:
//! the resourceVersion is the key's `mod_revision`, the etcd revision of the transaction that
//! wrote it, so the objects of one transaction share it. Every transaction also writes a change
//! record to `<prefix>/changes` (what changed, in the order the rules made the changes), and the
//! store follows that key with one etcd watch into an in-memory copy of every object; reads,
//! watches and the write rules are served from that copy. A write runs the rules against the copy
//! at revision R and commits one etcd transaction that checks the `mod_revision` (or absence) of
//! every object the rules read or wrote; when another writer came first, the store waits until
//! its copy has seen that write and runs the rules again. A write returns once the copy has
//! reached its revision, so a reader of the same store sees it at once.

mod cache;
mod client;
mod election;
mod error;
mod follow;
mod layout;
mod load;
mod nodes;
mod watch;
mod wire;
mod write;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aoctl_api::selector::Selector;
use aoctl_api::Kind;
use aoctl_store::tx::{Op, Reply};
use aoctl_store::{ObjectStore, Snapshot, StoreError, StoredObject, Watch, WriteOptions};
use async_trait::async_trait;
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio::task::JoinHandle;

pub use crate::election::{Election, Term, MIN_TTL};
pub use crate::nodes::{NodeClaim, RegisterError, Registration};

use crate::cache::State;
use crate::client::Client;
use crate::layout::{Batch, Keys};
use crate::wire::RangeRequest;

/// Settings of an etcd store.
#[derive(Clone, Debug)]
pub struct EtcdConfig {
    /// The client URLs of the cluster's members (`http://host:2379`).
    pub endpoints: Vec<String>,
    /// The key prefix everything of this store lives under; stores with different prefixes share
    /// a cluster without seeing each other.
    pub prefix: String,
    /// How many revisions of history etcd keeps for watches to start from: the store compacts
    /// older ones as it writes. 0 leaves compaction to etcd (or to its operator).
    pub retention: u64,
    /// How many of the newest changes are kept in memory for watches; a watch from an older
    /// revision reads etcd's history until it reaches them.
    pub memory_changes: usize,
    /// How many `Event` objects are kept; older ones are deleted, as in the sled store.
    pub max_events: usize,
    /// How long one etcd request may take.
    pub request_timeout: Duration,
    /// How long a write may keep trying while etcd is unreachable or electing a leader.
    pub write_timeout: Duration,
}

impl EtcdConfig {
    /// The default settings for a cluster at `endpoints`, under the prefix `/aoctl`.
    pub fn new(endpoints: Vec<String>) -> EtcdConfig {
        EtcdConfig {
            endpoints,
            prefix: DEFAULT_PREFIX.to_string(),
            retention: 10_000,
            memory_changes: 4096,
            max_events: 1000,
            request_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(15),
        }
    }
}

/// The key prefix of a store when none is given.
pub const DEFAULT_PREFIX: &str = "/aoctl";

/// How long a write waits for the store's copy to reach a revision before it answers anyway.
const CATCH_UP_BOUND: Duration = Duration::from_secs(10);
/// How often a store whose requests fail asks etcd whether it answers again.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// The largest etcd answer the store reads: a response's body, or one message of a stream (a
/// watch response can carry many revisions).
const MAX_MESSAGE: usize = 256 << 20;

/// The id of the cluster the client reaches.
async fn cluster_id(client: &Client, timeout: Duration) -> Result<u64, StoreError> {
    match tokio::time::timeout(timeout, client.member_list()).await {
        Ok(Ok(resp)) => Ok(resp.header.cluster_id),
        Ok(Err(e)) => Err(StoreError::Unavailable(format!("cannot read the etcd cluster's id: {e}"))),
        Err(_) => Err(StoreError::Unavailable(format!("no answer to a member list within {timeout:?}"))),
    }
}

/// The etcd backend; clones share it. Dropping the last one stops its watch of etcd, and ends
/// the store's watches.
#[derive(Clone)]
pub struct EtcdStore {
    inner: Arc<Inner>,
    /// The leader key a term's handle writes under (see [`Term::store`]); `None` for the
    /// replica's own handle, which writes whoever leads.
    fence: Option<Arc<Fence>>,
}

/// A leader key: a transaction under it is stored only while etcd holds the key as created at
/// `create_revision`.
#[derive(Debug)]
pub(crate) struct Fence {
    pub key: Vec<u8>,
    pub create_revision: i64,
}

struct Inner {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.shared.close();
    }
}

/// What the store's handles, its watch of etcd and its watches share.
pub(crate) struct Shared {
    pub config: EtcdConfig,
    /// The etcd cluster's id, as its members answer it.
    cluster: u64,
    pub keys: Keys,
    client: Client,
    state: RwLock<State>,
    /// The revision the copy has reached, for writers and watches waiting for it.
    advanced: tokio::sync::watch::Sender<u64>,
    rv: AtomicU64,
    /// etcd's compaction revision as far as the store knows: revisions below it are gone.
    compacted: AtomicU64,
    /// The revision the store last asked etcd to compact to.
    compact_target: AtomicU64,
    compacting: AtomicBool,
    closed: AtomicBool,
    health: Mutex<Health>,
}

/// Why the store cannot write now: its requests have failed, or its watch of etcd has been down,
/// for longer than a moment (a request sent to a member that just died is sent to another).
#[derive(Default)]
struct Health {
    requests: Option<(Instant, String)>,
    watch: Option<(Instant, String)>,
}

/// How long requests must keep failing, or the watch stay down, before the store says it cannot
/// write.
const FAILING_FOR: Duration = Duration::from_secs(1);

impl EtcdStore {
    /// Connects to the cluster, lists the store's objects and starts following its changes.
    /// Fails when the cluster does not answer within the write timeout.
    pub async fn connect(config: EtcdConfig) -> Result<EtcdStore, StoreError> {
        if config.endpoints.is_empty() {
            return Err(StoreError::Invalid { message: "no etcd endpoints were given".into() });
        }
        let prefix = config.prefix.trim_end_matches('/');
        if prefix.is_empty() {
            return Err(StoreError::Invalid { message: "the etcd key prefix may not be empty".into() });
        }
        // Every request requires a leader: a member that has none refuses it at once, and the
        // request goes to another member.
        let client = Client::new(&config.endpoints, config.request_timeout).map_err(|e| {
            StoreError::Unavailable(format!("cannot connect to etcd at {}: {e}", config.endpoints.join(",")))
        })?;
        let keys = Keys::new(prefix);
        let deadline = tokio::time::Instant::now() + config.write_timeout;
        let (objects, rv) = loop {
            match follow::list(&client, &keys, config.request_timeout).await {
                Ok(listed) => break listed,
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    return Err(StoreError::Unavailable(format!(
                        "cannot read the store from etcd at {}: {e}",
                        config.endpoints.join(",")
                    )))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the store from etcd yet; trying again");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        // Asked like the list: a member that is down answers nothing, and another is tried.
        let cluster = loop {
            match cluster_id(&client, config.request_timeout).await {
                Ok(id) => break id,
                Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the etcd cluster's id yet; trying again");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        let (advanced, _) = tokio::sync::watch::channel(rv);
        let state = State::new(objects, rv, config.memory_changes);
        let shared = Arc::new(Shared {
            cluster,
            keys,
            client,
            state: RwLock::new(state),
            advanced,
            rv: AtomicU64::new(rv),
            compacted: AtomicU64::new(0),
            compact_target: AtomicU64::new(0),
            compacting: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            health: Mutex::new(Health::default()),
            config,
        });
        let tasks = vec![tokio::spawn(follow::follow(shared.clone())), tokio::spawn(probe(shared.clone()))];
        tracing::info!(rv, prefix = %shared.config.prefix, "the store follows etcd");
        Ok(EtcdStore { inner: Arc::new(Inner { shared, tasks }), fence: None })
    }

    /// The settings the store was opened with.
    pub fn config(&self) -> &EtcdConfig {
        &self.inner.shared.config
    }

    /// What names this store among all: the etcd cluster's id and the key prefix. Replicas of
    /// one store share it, and a store of another prefix or cluster differs.
    pub fn identity(&self) -> String {
        let shared = &self.inner.shared;
        format!("etcd:{:016x}{}", shared.cluster, shared.config.prefix.trim_end_matches('/'))
    }
}

impl Shared {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, State> {
        // A panic under the lock leaves at worst a stale copy, which the next batch corrects.
        self.state.read()
    }

    fn write_state(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write()
    }

    pub(crate) fn rv(&self) -> u64 {
        self.rv.load(Ordering::Acquire)
    }

    /// Applies a committed transaction to the copy and wakes whoever waits for it.
    pub(crate) fn publish(&self, batch: Batch) {
        let rv = {
            let mut state = self.write_state();
            state.apply(batch);
            state.rv
        };
        self.rv.store(rv, Ordering::Release);
        self.advanced.send_replace(rv);
    }

    /// Replaces the copy with a new listing (after etcd compacted changes it had not seen).
    pub(crate) fn relisted(&self, listed: State) {
        let rv = {
            let mut state = self.write_state();
            state.relisted(listed);
            state.rv
        };
        self.rv.store(rv, Ordering::Release);
        self.advanced.send_replace(rv);
    }

    /// A receiver of the revisions the copy reaches.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.advanced.subscribe()
    }

    /// Waits (a bounded while) until the copy has reached revision `rv`.
    pub(crate) async fn wait_for(&self, rv: u64) {
        let mut rx = self.subscribe();
        let reached = tokio::time::timeout(CATCH_UP_BOUND, rx.wait_for(|at| *at >= rv)).await;
        if !matches!(reached, Ok(Ok(_))) && !self.is_closed() {
            tracing::warn!(rv, at = self.rv(), "the store's copy has not reached a committed revision yet");
        }
    }

    pub(crate) fn note_compacted(&self, revision: u64) {
        self.compacted.fetch_max(revision, Ordering::AcqRel);
    }

    pub(crate) fn compacted(&self) -> u64 {
        self.compacted.load(Ordering::Acquire)
    }

    /// After a write at `rv`: compacts the history older than the retention, now and then.
    pub(crate) async fn compact_after(&self, rv: u64) {
        let keep = self.config.retention;
        if keep == 0 {
            return;
        }
        let target = rv.saturating_sub(keep);
        let step = (keep / 8).max(1);
        if target < self.compact_target.load(Ordering::Acquire) + step || self.compacting.swap(true, Ordering::AcqRel) {
            return;
        }
        self.compact_target.store(target, Ordering::Release);
        match tokio::time::timeout(self.config.request_timeout, self.client.compact(target as i64)).await {
            Ok(Ok(())) => self.note_compacted(target),
            // Someone compacted further already.
            Ok(Err(e)) if e.is_compacted() => self.note_compacted(target),
            Ok(Err(e)) => tracing::debug!(error = %e, target, "etcd did not compact"),
            Err(_) => tracing::debug!(target, "etcd did not answer a compaction"),
        }
        self.compacting.store(false, Ordering::Release);
    }

    fn health(&self) -> parking_lot::MutexGuard<'_, Health> {
        self.health.lock()
    }

    /// Why the store cannot write, if it cannot.
    pub(crate) fn unwritable(&self) -> Option<String> {
        let h = self.health();
        let failing = |f: &Option<(Instant, String)>| {
            f.as_ref().filter(|(since, _)| since.elapsed() >= FAILING_FOR).map(|(_, why)| why.clone())
        };
        failing(&h.requests).or_else(|| failing(&h.watch))
    }

    /// Whether a request failed since the last one that succeeded.
    fn requests_failing(&self) -> bool {
        self.health().requests.is_some()
    }

    pub(crate) fn requests_failed(&self, why: &str) {
        let mut h = self.health();
        match &mut h.requests {
            Some((_, last)) => *last = why.to_string(),
            None => {
                tracing::debug!(error = why, "an etcd request of the store failed");
                h.requests = Some((Instant::now(), why.to_string()));
            }
        }
    }

    pub(crate) fn requests_ok(&self) {
        if let Some((since, was)) = self.health().requests.take() {
            if since.elapsed() >= FAILING_FOR {
                tracing::info!(after = %was, "etcd answers the store's requests again");
            }
        }
    }

    pub(crate) fn watch_failed(&self, why: &str) {
        let mut h = self.health();
        match &mut h.watch {
            Some((_, last)) => *last = why.to_string(),
            None => {
                tracing::info!(error = why, "the store's watch of etcd broke; watching again");
                h.watch = Some((Instant::now(), why.to_string()));
            }
        }
    }

    pub(crate) fn watch_ok(&self) {
        if let Some((since, was)) = self.health().watch.take() {
            if since.elapsed() >= FAILING_FOR {
                tracing::info!(after = %was, "the store watches etcd again");
            }
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        // Wakes the store's watches, which then end.
        self.advanced.send_modify(|_| {});
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// While the store's requests fail, asks etcd every second for the change record (a
/// linearizable read, so a quorum answered) and notes when it answers again.
async fn probe(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        if !shared.requests_failing() {
            continue;
        }
        let read = RangeRequest::key(shared.keys.changes());
        if let Ok(Ok(_)) = tokio::time::timeout(shared.config.request_timeout, shared.client.range(&read)).await {
            shared.requests_ok();
        }
    }
}

#[async_trait]
impl ObjectStore for EtcdStore {
    /// The revision the store's copy has reached.
    fn resource_version(&self) -> u64 {
        self.inner.shared.rv()
    }

    /// One below etcd's compaction revision, as far as the store knows (0 when it knows of none).
    fn oldest_resource_version(&self) -> u64 {
        self.inner.shared.compacted().saturating_sub(1)
    }

    /// `Unavailable` while etcd does not answer the store's requests or its watch is down.
    fn writable(&self) -> Result<(), StoreError> {
        match self.inner.shared.unwritable() {
            Some(why) => Err(error::unavailable(&why)),
            None => Ok(()),
        }
    }

    async fn submit(&self, op: Op, opts: WriteOptions) -> Result<Reply, StoreError> {
        write::write(&self.inner.shared, self.fence.as_deref(), op, opts.dry_run).await
    }

    async fn get_stored(&self, kind: Kind, name: &str) -> Result<StoredObject, StoreError> {
        let state = self.inner.shared.read();
        state.map(kind).get(name).cloned().ok_or_else(|| StoreError::NotFound { kind, name: name.to_string() })
    }

    async fn list_stored(&self, kind: Kind, selector: &Selector) -> Result<(Vec<StoredObject>, u64), StoreError> {
        let state = self.inner.shared.read();
        let items = state.map(kind).values().filter(|o| selector.matches_object(o.object())).cloned().collect();
        Ok((items, state.rv))
    }

    fn watch(&self, kinds: &[Kind], from: u64) -> Result<Watch, StoreError> {
        Ok(Watch::new(watch::StoreWatch::new(self.inner.shared.clone(), kinds, from)?))
    }

    /// The copy under one read: it takes each etcd transaction whole.
    async fn snapshot(&self) -> Result<Snapshot, StoreError> {
        let state = self.inner.shared.read();
        Ok(Snapshot::of_maps("etcd", state.rv, |kind| state.map(kind)))
    }
}
