//! Which replica runs the reconcilers. A sled store is one process's (sled locks its folder), so
//! that process always leads; replicas of an etcd store campaign for terms with an etcd lease
//! (`aoctl_store_etcd::Election`), and the reconcilers of a term write through a handle fenced
//! by its leader key.

use std::time::Duration;

use aoctl_store::Store;
use aoctl_store_etcd::{Election, EtcdStore, Term};

/// This replica's candidacy.
pub enum Candidacy {
    /// The only controller of its store.
    Sole,
    Etcd(Election),
}

/// A term of leadership.
pub enum Lead {
    /// Lasts until the process stops.
    Sole,
    Etcd(Term),
}

impl Candidacy {
    /// The candidacy of a replica on `etcd` called `identity`, with leases of `ttl`.
    pub fn etcd(etcd: &EtcdStore, identity: &str, ttl: Duration) -> Candidacy {
        Candidacy::Etcd(etcd.election(identity, ttl))
    }

    /// Waits until this replica leads.
    pub async fn campaign(&self) -> Lead {
        match self {
            Candidacy::Sole => Lead::Sole,
            Candidacy::Etcd(election) => Lead::Etcd(election.campaign().await),
        }
    }
}

impl Lead {
    /// The store the reconcilers of this term write through: `own` for the sole controller, the
    /// term's fenced handle on etcd.
    pub fn store(&self, own: &Store) -> Store {
        match self {
            Lead::Sole => own.clone(),
            Lead::Etcd(term) => Store::new(term.store()),
        }
    }

    /// Resolves when the term has ended (never, for the sole controller).
    pub async fn ended(&self) {
        match self {
            Lead::Sole => std::future::pending().await,
            Lead::Etcd(term) => term.ended().await,
        }
    }

    /// Gives the term up at once, so that another replica can lead without waiting for the lease
    /// to expire.
    pub async fn resign(self) {
        if let Lead::Etcd(term) = self {
            term.resign().await;
        }
    }
}
