//! Which replica runs the reconcilers. A sled store is one process's (sled locks its folder), so
//! that process always leads; replicas of an etcd store campaign for terms with an etcd lease
//! (`aoctl_store_etcd::Election`), and the reconcilers of a term write through a handle fenced
//! by its leader key.
//!
//! [`Leadership`] is what the rest of the replica asks: whether it leads now (only the leading
//! replica types into agents, see `crate::input`), and which node leads when it does not.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aoctl_store::{Store, StoreError};
use aoctl_store_etcd::{Election, EtcdStore, Term};

/// This replica's candidacy.
pub(crate) enum Candidacy {
    /// The only controller of its store.
    Sole(Leadership),
    Etcd(Election, Leadership),
}

/// A term of leadership.
pub(crate) enum Lead {
    /// Lasts until the process stops.
    Sole,
    Etcd(Term, Leadership),
}

/// Whether this replica leads, shared by its candidacy (which sets it) and the HTTP API.
#[derive(Clone)]
pub(crate) struct Leadership {
    leads: Arc<AtomicBool>,
    election: Option<Election>,
}

impl Leadership {
    /// Whether this replica leads now: from the moment it won a term until the term ends.
    pub(crate) fn leads(&self) -> bool {
        self.leads.load(Ordering::Acquire)
    }

    /// The node of the replica that leads now, `None` while none does (always this replica's
    /// own, for the sole controller of a sled store, which is asked only through [`leads`]).
    ///
    /// [`leads`]: Leadership::leads
    pub(crate) async fn leader_node(&self) -> Result<Option<String>, StoreError> {
        match &self.election {
            None => Ok(None),
            Some(e) => Ok(e.leader().await?.as_deref().map(node_of).map(str::to_string)),
        }
    }

    fn set(&self, leads: bool) {
        self.leads.store(leads, Ordering::Release);
    }
}

/// What a replica campaigns as: `<node>/<listen address>/<pid>`.
fn identity(node: &str, listen: SocketAddr) -> String {
    format!("{node}/{listen}/{}", std::process::id())
}

/// The node an [`identity`] names (node names may hold `/`; the address and pid do not).
fn node_of(identity: &str) -> &str {
    identity.rsplitn(3, '/').nth(2).unwrap_or(identity)
}

impl Candidacy {
    /// The sole controller of a sled store: it leads from the start.
    pub(crate) fn sole() -> Candidacy {
        Candidacy::Sole(Leadership { leads: Arc::new(AtomicBool::new(true)), election: None })
    }

    /// The candidacy of a replica of node `node` listening on `listen` on `etcd`, with leases
    /// of `ttl`.
    pub(crate) fn etcd(etcd: &EtcdStore, node: &str, listen: SocketAddr, ttl: Duration) -> Candidacy {
        let election = etcd.election(&identity(node, listen), ttl);
        let leadership = Leadership { leads: Arc::new(AtomicBool::new(false)), election: Some(election.clone()) };
        Candidacy::Etcd(election, leadership)
    }

    /// What the replica asks of its leadership.
    pub(crate) fn leadership(&self) -> Leadership {
        match self {
            Candidacy::Sole(l) | Candidacy::Etcd(_, l) => l.clone(),
        }
    }

    /// Waits until this replica leads.
    pub(crate) async fn campaign(&self) -> Lead {
        match self {
            Candidacy::Sole(_) => Lead::Sole,
            Candidacy::Etcd(election, leadership) => {
                let term = election.campaign().await;
                leadership.set(true);
                Lead::Etcd(term, leadership.clone())
            }
        }
    }
}

impl Lead {
    /// The store the reconcilers of this term write through: `own` for the sole controller, the
    /// term's fenced handle on etcd.
    pub(crate) fn store(&self, own: &Store) -> Store {
        match self {
            Lead::Sole => own.clone(),
            Lead::Etcd(term, _) => Store::new(term.store()),
        }
    }

    /// Resolves when the term has ended (never, for the sole controller); from then on the
    /// replica no longer leads.
    pub(crate) async fn ended(&self) {
        match self {
            Lead::Sole => std::future::pending().await,
            Lead::Etcd(term, leadership) => {
                term.ended().await;
                leadership.set(false);
            }
        }
    }

    /// Gives the term up at once, so that another replica can lead without waiting for the lease
    /// to expire.
    pub(crate) async fn resign(self) {
        if let Lead::Etcd(term, leadership) = self {
            leadership.set(false);
            term.resign().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_is_read_back_from_a_campaign_identity() {
        let listen: SocketAddr = "127.0.0.1:7420".parse().unwrap();
        assert_eq!(node_of(&identity("build-1", listen)), "build-1");
        assert_eq!(node_of(&identity("rack/a", "[::1]:80".parse().unwrap())), "rack/a");
        assert_eq!(node_of("older"), "older");
    }

    #[test]
    fn the_sole_controller_leads_from_the_start() {
        assert!(Candidacy::sole().leadership().leads());
    }
}
