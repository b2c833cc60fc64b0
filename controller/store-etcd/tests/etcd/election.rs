//! Leader election on a real cluster: one leader at a time, a successor when the leader resigns
//! or goes silent, and a term's writes refused once the term has ended.

use std::time::Duration;

use aoctl_api::Kind;
use aoctl_store::{Store, StoreError, WriteOptions};
use serde_json::json;

use crate::cluster::EtcdCluster;
use crate::{config, gateway, open, project};

const W: WriteOptions = WriteOptions { dry_run: false };
const TTL: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_leads_and_another_follows_when_it_resigns_or_goes_silent() {
    let cluster = EtcdCluster::start(1);
    let settings = config(cluster.endpoints());
    let (a, _) = open(settings.clone()).await;
    let (b, _) = open(settings).await;
    let (ea, eb) = (a.election("a", TTL), b.election("b", TTL));
    assert_eq!(ea.leader().await.unwrap(), None, "nobody leads before a campaign");
    let term_a = tokio::time::timeout(Duration::from_secs(10), ea.campaign()).await.expect("a wins at once");
    assert_eq!(eb.leader().await.unwrap().as_deref(), Some("a"));

    // b waits while a leads, and wins at once when a resigns.
    let campaign_b = tokio::spawn({
        let eb = eb.clone();
        async move { eb.campaign().await }
    });
    tokio::time::sleep(3 * TTL).await;
    assert!(!campaign_b.is_finished(), "b won while a's lease was kept alive");
    assert!(term_a.lasts());
    let resigned = std::time::Instant::now();
    term_a.resign().await;
    let term_b = tokio::time::timeout(Duration::from_secs(5), campaign_b).await.expect("b wins").unwrap();
    assert!(resigned.elapsed() < TTL, "b won {:?} after a resigned: not at once", resigned.elapsed());
    assert_eq!(ea.leader().await.unwrap().as_deref(), Some("b"));

    // b goes silent (its lease is no longer kept alive, as when its process dies): a wins
    // within about the TTL.
    let campaign_a = tokio::spawn({
        let ea = ea.clone();
        async move { ea.campaign().await }
    });
    let silent = std::time::Instant::now();
    drop(term_b);
    let term_a = tokio::time::timeout(Duration::from_secs(10), campaign_a).await.expect("a wins").unwrap();
    let after = silent.elapsed();
    assert!(after <= 2 * TTL + Duration::from_secs(1), "a won {after:?} after b went silent");
    assert!(term_a.lasts());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_whose_lease_is_gone_ends_and_its_writes_are_refused() {
    let cluster = EtcdCluster::start(1);
    let settings = config(cluster.endpoints());
    let (etcd, own) = open(settings).await;
    let election = etcd.election("a", TTL);
    let term = election.campaign().await;
    let fenced = Store::new(term.store());
    fenced.create(Kind::Project, project("during"), W).await.expect("a write during the term");

    // The lease is revoked behind the replica's back (an operator, or etcd expiring it while the
    // replica was paused): the leader key goes with it.
    let member = cluster.endpoint(0);
    let leases = gateway(&member, "/v3/lease/leases", json!({})).await.unwrap();
    for lease in leases["leases"].as_array().into_iter().flatten() {
        gateway(&member, "/v3/lease/revoke", json!({"ID": lease["ID"]})).await.unwrap();
    }
    let refused = fenced.create(Kind::Project, project("after"), W).await;
    assert!(matches!(refused, Err(StoreError::Unavailable(_))), "{refused:?}");
    assert!(own.get(Kind::Project, "after").await.is_err(), "the refused write was not stored");
    tokio::time::timeout(Duration::from_secs(10), term.ended()).await.expect("the term ends");
    assert!(!term.lasts());
    // The replica's own handle writes whoever leads.
    own.create(Kind::Project, project("api"), W).await.expect("an unfenced write");
}
