//! The register of nodes on a real cluster: a node registered by a live replica of one data folder
//! is refused to another folder, shared by replicas of the same folder, and free again once the
//! holder leaves or its lease runs out.

use std::time::Duration;

use aoctl_store_etcd::{NodeClaim, RegisterError};

use crate::cluster::EtcdCluster;
use crate::{config, open};

const TTL: Duration = Duration::from_secs(2);

fn claim(node: &str, data_dir: &str, pid: u32) -> NodeClaim {
    NodeClaim { node: node.into(), host: "build-1".into(), data_dir: data_dir.into(), pid }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_is_one_data_folder_while_its_holder_lives() {
    let cluster = EtcdCluster::start(1);
    let settings = config(cluster.endpoints());
    let (a, _) = open(settings.clone()).await;
    let (b, _) = open(settings).await;

    let first = a.register_node(&claim("n", "/srv/a", 1), TTL).await.expect("a free node");
    // Another replica of the same folder is the same node.
    let same = b.register_node(&claim("n", "/srv/a", 2), TTL).await.expect("the same folder");
    // Another folder, or the same path on another host, is refused, naming the holder.
    match b.register_node(&claim("n", "/srv/b", 3), TTL).await {
        Err(RegisterError::Taken { theirs }) => assert_eq!((theirs.data_dir.as_str(), theirs.pid), ("/srv/a", 1)),
        other => panic!("another folder registered the node: {:?}", other.map(|_| ())),
    }
    let elsewhere = NodeClaim { host: "build-2".into(), ..claim("n", "/srv/a", 4) };
    assert!(matches!(b.register_node(&elsewhere, TTL).await, Err(RegisterError::Taken { .. })));
    // Other nodes are free, and the refused ones left nothing behind.
    let other = b.register_node(&claim("n2", "/srv/b", 3), TTL).await.expect("another node");
    let pids: Vec<u32> = a.node_claims("n").await.unwrap().iter().map(|c| c.pid).collect();
    assert_eq!(pids, vec![1, 2]);

    // Kept alive for several TTLs.
    tokio::time::sleep(3 * TTL).await;
    assert_eq!(a.node_claims("n").await.unwrap().len(), 2, "the registrations were kept alive");

    // Released at once; gone within the TTL when the holder goes silent.
    first.release().await;
    drop(same);
    tokio::time::sleep(2 * TTL + Duration::from_secs(1)).await;
    assert_eq!(a.node_claims("n").await.unwrap(), vec![], "nobody holds the node");
    let now = b.register_node(&claim("n", "/srv/b", 3), TTL).await.expect("the node is free again");
    now.release().await;
    other.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_folders_registering_at_once_one_holds_the_node() {
    let cluster = EtcdCluster::start(1);
    let settings = config(cluster.endpoints());
    let (a, _) = open(settings.clone()).await;
    let (b, _) = open(settings).await;
    for round in 0..5 {
        let node = format!("race-{round}");
        let (ca, cb) = (claim(&node, "/srv/a", 1), claim(&node, "/srv/b", 2));
        let (ra, rb) = tokio::join!(a.register_node(&ca, TTL), b.register_node(&cb, TTL));
        assert!(ra.is_ok() != rb.is_ok(), "round {round}: exactly one folder holds the node");
        let held = a.node_claims(&node).await.unwrap();
        assert_eq!(held.len(), 1, "the refused one left nothing: {held:?}");
        for r in [ra, rb].into_iter().flatten() {
            r.release().await;
        }
    }
}
