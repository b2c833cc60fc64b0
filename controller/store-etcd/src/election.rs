//! Leader election among the replicas of one store: each candidate keeps an etcd lease alive and
//! campaigns with etcd's election API under `<prefix>/leader`; the winner's term lasts while it
//! can show its lease alive, and the store handle of a term writes only while its leader key is
//! the one etcd holds (every transaction compares the key's create revision), so a replica that
//! lost its lease unnoticed cannot overwrite its successor's work.

use std::sync::Arc;
use std::time::Duration;

use aoctl_store::StoreError;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::{Client, Error};

/// Why one campaign for leadership failed (the next is tried after a pause).
#[derive(Debug, thiserror::Error)]
enum CampaignError {
    #[error("no answer to a lease grant within {0:?}")]
    GrantTimeout(Duration),
    #[error("cannot grant a lease: {0}")]
    Grant(Error),
    #[error("the lease expired while campaigning")]
    LeaseExpired,
    #[error("the campaign failed: {0}")]
    Failed(Error),
    #[error("etcd answered the campaign without a leader key")]
    NoLeaderKey,
}
use crate::{EtcdStore, Fence, Shared};

/// The shortest lease the election accepts: etcd counts TTLs in whole seconds.
pub const MIN_TTL: Duration = Duration::from_secs(2);
/// How long a failed campaign step waits before it tries again.
const RETRY: Duration = Duration::from_millis(500);

/// One replica's candidacy: it campaigns for terms under the store's prefix.
#[derive(Clone)]
pub struct Election {
    store: EtcdStore,
    name: Vec<u8>,
    identity: String,
    ttl: Duration,
}

/// A term of leadership. It ends when the lease can no longer be shown alive (the candidate
/// stops leading before etcd could let another one win), or when [`Term::resign`] ends it.
pub struct Term {
    store: EtcdStore,
    lease: i64,
    ended: watch::Receiver<bool>,
    keeper: JoinHandle<()>,
}

impl EtcdStore {
    /// The candidacy of a replica called `identity` (what [`Election::leader`] answers while it
    /// leads), with leases of `ttl` (at least [`MIN_TTL`]): a leader that dies is followed
    /// within about `ttl`.
    pub fn election(&self, identity: &str, ttl: Duration) -> Election {
        let name = self.inner.shared.keys.leader().to_vec();
        Election { store: self.clone(), name, identity: identity.to_string(), ttl: ttl.max(MIN_TTL) }
    }
}

impl Election {
    /// Waits until this replica leads, trying again through etcd's failures, and returns the term.
    pub async fn campaign(&self) -> Term {
        loop {
            match self.try_campaign().await {
                Ok(term) => return term,
                Err(e) => {
                    tracing::warn!(error = %e, "the campaign for leadership failed; trying again");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }

    async fn try_campaign(&self) -> Result<Term, CampaignError> {
        let shared = self.store.inner.shared.clone();
        let timeout = shared.config.request_timeout;
        let client = &shared.client;
        let granted = tokio::time::timeout(timeout, client.lease_grant(self.ttl.as_secs() as i64))
            .await
            .map_err(|_| CampaignError::GrantTimeout(timeout))?
            .map_err(CampaignError::Grant)?;
        let lease = granted.id;
        let (alive_tx, ended) = watch::channel(false);
        let keeper = tokio::spawn(keep_alive(client.clone(), lease, self.ttl, alive_tx));
        let mut lost = ended.clone();
        // Answered once this candidate wins, however long another one leads.
        let campaign = client.campaign(&self.name, self.identity.as_bytes(), lease);
        let won = tokio::select! {
            won = campaign => won,
            _ = lost.wait_for(|e| *e) => {
                keeper.abort();
                return Err(CampaignError::LeaseExpired);
            }
        };
        let leader = match won {
            Ok(resp) => resp.leader,
            Err(e) => {
                keeper.abort();
                revoke(client, lease, timeout).await;
                return Err(CampaignError::Failed(e));
            }
        };
        let Some(leader) = leader else {
            keeper.abort();
            revoke(client, lease, timeout).await;
            return Err(CampaignError::NoLeaderKey);
        };
        let fence = Fence { key: leader.key, create_revision: leader.rev };
        tracing::info!(identity = %self.identity, lease, revision = leader.rev, "this replica leads");
        let store = EtcdStore { inner: self.store.inner.clone(), fence: Some(Arc::new(fence)) };
        Ok(Term { store, lease, ended, keeper })
    }

    /// The identity of the replica that leads now, if one does.
    pub async fn leader(&self) -> Result<Option<String>, StoreError> {
        let shared = &self.store.inner.shared;
        let timeout = shared.config.request_timeout;
        match tokio::time::timeout(timeout, shared.client.leader(&self.name)).await {
            Ok(Ok(resp)) => Ok(resp.kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned())),
            // etcd answers "election: no leader" as an error ("etcdserver: no leader" is another
            // one: the member has no leader of its own cluster).
            Ok(Err(e)) if e.message().is_some_and(|m| m.contains("election: no leader")) => Ok(None),
            Ok(Err(e)) => Err(crate::error::unavailable(&e.to_string())),
            Err(_) => Err(crate::error::unavailable(&format!("no answer within {timeout:?}"))),
        }
    }
}

impl Term {
    /// The store handle of this term: its writes are stored only while the term lasts, and are
    /// refused as `Unavailable` after it.
    pub fn store(&self) -> EtcdStore {
        self.store.clone()
    }

    /// Resolves when the term has ended.
    pub async fn ended(&self) {
        let mut ended = self.ended.clone();
        let _ = ended.wait_for(|e| *e).await;
    }

    /// Whether the term still lasts.
    pub fn lasts(&self) -> bool {
        !*self.ended.borrow()
    }

    /// Ends the term now: the lease is revoked, which deletes the leader key, so another replica
    /// can win at once rather than after the lease's TTL.
    pub async fn resign(self) {
        self.keeper.abort();
        let shared: &Shared = &self.store.inner.shared;
        revoke(&shared.client, self.lease, shared.config.request_timeout).await;
        tracing::info!(lease = self.lease, "this replica resigned its leadership");
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// Keeps the lease alive, about six times per TTL, and ends the term once the lease cannot be
/// shown alive for a third of its TTL more: the lease lives until at least the send time of the
/// last answered keep-alive plus the TTL, and no sooner can another candidate win. Each
/// keep-alive is one request, to whichever member answers.
async fn keep_alive(client: Client, lease: i64, ttl: Duration, ended: watch::Sender<bool>) {
    let step = ttl / 6;
    // A slow answer on a loaded machine is still an answer: each try may take a quarter of the
    // TTL, and the check above it still ends the term before the lease can expire.
    let patience = ttl / 4;
    let mut alive_until = Instant::now() + ttl;
    loop {
        if Instant::now() + ttl / 3 >= alive_until {
            tracing::warn!(lease, "the leadership lease could not be kept alive; this replica stops leading");
            let _ = ended.send(true);
            return;
        }
        let sent = Instant::now();
        let answered = match tokio::time::timeout(patience, client.lease_keep_alive(lease)).await {
            Ok(Ok(answer)) => Some(answer.ttl),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "the lease's keep-alive was not answered");
                None
            }
            Err(_) => None,
        };
        match answered {
            Some(left) if left > 0 => alive_until = sent + ttl,
            Some(_) => {
                tracing::warn!(lease, "the leadership lease has expired; this replica stops leading");
                let _ = ended.send(true);
                return;
            }
            None => {}
        }
        tokio::time::sleep_until(sent + step).await;
    }
}

async fn revoke(client: &Client, lease: i64, timeout: Duration) {
    match tokio::time::timeout(timeout, client.lease_revoke(lease)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, lease, "cannot revoke the lease; it expires by itself"),
        Err(_) => tracing::debug!(lease, "no answer to the lease's revocation; it expires by itself"),
    }
}
