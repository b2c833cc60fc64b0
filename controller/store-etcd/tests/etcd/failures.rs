//! What a cluster in trouble does to the store: a member (the leader) killed with SIGKILL, every
//! member down and back, revisions compacted away, a transaction too big for etcd, and one whose
//! answer was lost after etcd applied it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aoctl_api::Kind;
use aoctl_store::{EventKind, Selector, StoreError, WriteOptions};
use aoctl_store_etcd::EtcdConfig;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cluster::EtcdCluster;
use crate::{b64, config, eventually, gateway, int, name, next, open, project, rv};

const W: WriteOptions = WriteOptions { dry_run: false };

/// The index of the member that leads the cluster.
async fn leader(cluster: &EtcdCluster, members: usize) -> usize {
    for _ in 0..100 {
        for i in 0..members {
            let member = cluster.endpoint(i);
            let asked = gateway(&member, "/v3/maintenance/status", json!({}));
            let Ok(Ok(status)) = tokio::time::timeout(Duration::from_secs(2), asked).await else { continue };
            // Member ids are uint64s, half of them past i64::MAX: compared as such.
            let id = |v: &Value| v.as_str().and_then(|s| s.parse::<u64>().ok()).or_else(|| v.as_u64()).unwrap_or(0);
            if id(&status["leader"]) != 0 && id(&status["header"]["member_id"]) == id(&status["leader"]) {
                return i;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no member says it leads the cluster");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_watches_go_on_when_a_member_is_killed() {
    let mut cluster = EtcdCluster::start(3);
    let settings = config(cluster.endpoints());
    let prefix = settings.prefix.clone();
    let (_, store) = open(settings).await;
    let mut watch = store.watch(&[Kind::Project], store.resource_version()).unwrap();
    for i in 0..5 {
        store.create(Kind::Project, project(&format!("before-{i}")), W).await.unwrap();
    }
    for i in 0..5 {
        assert_eq!(name(&next(&mut watch).await.object), format!("before-{i}"));
    }

    let killed = leader(&cluster, 3).await;
    cluster.kill(killed);
    let started = Instant::now();
    let mut written = vec![];
    for i in 0..20 {
        let p = store.create(Kind::Project, project(&format!("after-{i}")), W).await;
        written.push(p.unwrap_or_else(|e| panic!("write {i} after the leader was killed: {e}")));
    }
    eprintln!("20 writes with the leader killed took {:?}", started.elapsed());
    for (i, w) in written.iter().enumerate() {
        let ev = next(&mut watch).await;
        assert_eq!((ev.kind_, name(&ev.object), ev.rv), (EventKind::Added, name(w), rv(w)), "change {i}");
    }
    let status = store.update_status(Kind::Project, "after-3", serde_json::json!({"sessions": 2}), None, W).await;
    let status = status.unwrap();
    assert_eq!(status["status"]["sessions"], 2);
    let ev = next(&mut watch).await;
    assert_eq!((ev.kind_, ev.rv), (EventKind::Modified, rv(&status)));
    eventually("the store is writable", Duration::from_secs(20), || store.writable().is_ok()).await;

    // A store opened now, with the dead member among its endpoints, reads everything.
    let (_, other) = open(EtcdConfig { prefix, ..EtcdConfig::new(cluster.endpoints()) }).await;
    let (items, _) = other.list(Kind::Project, &Selector::everything()).await.unwrap();
    assert_eq!(items.len(), 25);

    // The member comes back and catches up; the store goes on.
    cluster.restart(killed);
    eventually("the killed member is healthy again", Duration::from_secs(60), || cluster.healthy(killed)).await;
    let p = store.create(Kind::Project, project("back"), W).await.unwrap();
    assert_eq!(name(&next(&mut watch).await.object), name(&p));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_fail_with_503_while_etcd_is_down_and_resume_when_it_is_back() {
    let mut cluster = EtcdCluster::start(3);
    let fast = EtcdConfig {
        request_timeout: Duration::from_secs(1),
        write_timeout: Duration::from_secs(4),
        ..config(cluster.endpoints())
    };
    let (_, store) = open(fast).await;
    store.create(Kind::Project, project("a"), W).await.unwrap();
    let mut watch = store.watch(&[Kind::Project], store.resource_version()).unwrap();

    cluster.kill_all();
    let started = Instant::now();
    let e = store.create(Kind::Project, project("refused"), W).await.unwrap_err();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
    assert_eq!((e.code(), e.reason()), (503, "ServiceUnavailable"));
    assert!(started.elapsed() < Duration::from_secs(15), "the write gave up in time: {:?}", started.elapsed());
    let why = store.writable().unwrap_err();
    assert_eq!(why.code(), 503, "{why}");
    assert!(why.to_string().contains("etcd"), "{why}");
    // Reads go on from memory.
    assert!(store.get(Kind::Project, "a").await.is_ok());
    // A store that knows it cannot write gives up after one try.
    let started = Instant::now();
    store.create(Kind::Project, project("refused-again"), W).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());

    for i in 0..3 {
        cluster.restart(i);
    }
    eventually("the cluster is healthy again", Duration::from_secs(60), || (0..3).all(|i| cluster.healthy(i))).await;
    eventually("the store is writable again", Duration::from_secs(30), || store.writable().is_ok()).await;
    let b = store.create(Kind::Project, project("b"), W).await.unwrap();
    let ev = next(&mut watch).await;
    assert_eq!((name(&ev.object), ev.rv), ("b", rv(&b)), "the watch goes on where it was");
    assert!(store.get(Kind::Project, "refused").await.unwrap_err().is_not_found(), "a refused write is not stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_read_etcds_history_and_compacted_revisions_are_gone() {
    let cluster = EtcdCluster::start(1);
    // Two changes in memory, no compaction of the store's own: older revisions come from etcd.
    let (_, store) = open(EtcdConfig { memory_changes: 2, retention: 0, ..config(cluster.endpoints()) }).await;
    let mut rvs = vec![];
    for i in 0..10 {
        rvs.push(rv(&store.create(Kind::Project, project(&format!("p{i}")), W).await.unwrap()));
    }
    let mut w = store.watch(&[Kind::Project], rvs[2]).unwrap();
    for want in &rvs[3..] {
        assert_eq!(next(&mut w).await.rv, *want, "from etcd's history, in order");
    }
    let live = store.create(Kind::Project, project("live"), W).await.unwrap();
    assert_eq!(next(&mut w).await.rv, rv(&live), "then live");

    // etcd compacts (its operator, or another store); the store learns it from etcd.
    gateway(&cluster.endpoint(0), "/v3/kv/compaction", json!({"revision": rvs[5].to_string()})).await.unwrap();
    let mut old = store.watch(&[Kind::Project], rvs[2]).expect("not known to be compacted yet");
    let end = tokio::time::timeout(Duration::from_secs(15), old.next()).await.expect("the watch ends");
    assert!(end.is_none());
    let e = old.error().cloned().expect("why it ended");
    assert!(matches!(e, StoreError::Gone { .. }), "{e:?}");
    assert_eq!((e.code(), e.reason()), (410, "Expired"));
    assert_eq!(store.oldest_resource_version(), rvs[5] - 1);
    let e = store.watch(&[Kind::Project], rvs[1]).err().expect("now known to be compacted");
    assert_eq!(e.code(), 410);
    // From the oldest retained revision on, the history is there.
    let mut w = store.watch(&[Kind::Project], store.oldest_resource_version()).unwrap();
    assert_eq!(next(&mut w).await.rv, rvs[5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_compacts_what_it_no_longer_keeps() {
    let cluster = EtcdCluster::start(1);
    let (_, store) = open(EtcdConfig { retention: 16, memory_changes: 4, ..config(cluster.endpoints()) }).await;
    let first = rv(&store.create(Kind::Project, project("first"), W).await.unwrap());
    for i in 0..40 {
        store.create(Kind::Project, project(&format!("p{i}")), W).await.unwrap();
    }
    let now = store.resource_version();
    let oldest = store.oldest_resource_version();
    assert!(oldest > first && oldest <= now - 16, "compacted to {oldest}, between {first} and {now} - 16");
    assert_eq!(store.watch(&[], first).err().map(|e| e.code()), Some(410));
    let mut w = store.watch(&[], now - 16).unwrap();
    assert_eq!(next(&mut w).await.rv, now - 15);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_beyond_etcds_transaction_limit_is_refused_whole() {
    // etcd's default --max-txn-ops is 128: a cascade to 130 objects needs more.
    let cluster = EtcdCluster::start(1);
    let (_, store) = open(config(cluster.endpoints())).await;
    let owner = store.create(Kind::Project, project("owner"), W).await.unwrap();
    for i in 0..130 {
        let mut child = project(&format!("child-{i:03}"));
        child["metadata"]["ownerReferences"] = serde_json::json!([{"apiVersion": "ao.dev/v1alpha1",
            "kind": "Project", "name": "owner", "uid": owner["metadata"]["uid"]}]);
        store.create(Kind::Project, child, W).await.unwrap();
    }
    let at = store.resource_version();
    let e = store.delete(Kind::Project, "owner", None, W).await.unwrap_err();
    assert_eq!(e.code(), 500, "{e}");
    assert!(e.to_string().contains("--max-txn-ops"), "{e}");
    assert_eq!(store.resource_version(), at, "nothing of it was stored");
    assert_eq!(store.list(Kind::Project, &Selector::everything()).await.unwrap().0.len(), 131);
    assert!(store.writable().is_ok(), "a refused write says nothing about etcd's health");
}

/// A TCP proxy in front of one etcd member that can hold back etcd's answers and cut every
/// connection, so that a transaction is applied while its answer never arrives.
struct Proxy {
    addr: std::net::SocketAddr,
    hold: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hold = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let upstream = upstream.trim_start_matches("http://").to_string();
        let (h, c) = (hold.clone(), connections.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { continue };
                let hold = h.clone();
                c.lock().push(tokio::spawn(async move {
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let up = tokio::io::copy(&mut cr, &mut sw);
                    let down = async {
                        let mut buf = vec![0u8; 64 << 10];
                        loop {
                            // While held, etcd's answers wait in the socket.
                            while hold.load(Ordering::Acquire) {
                                tokio::time::sleep(Duration::from_millis(5)).await;
                            }
                            let n = sr.read(&mut buf).await?;
                            if n == 0 {
                                return Ok::<(), std::io::Error>(());
                            }
                            cw.write_all(&buf[..n]).await?;
                        }
                    };
                    let _ = tokio::join!(up, down);
                }));
            }
        });
        Proxy { addr, hold, connections, accept }
    }

    /// Drops every connection; new ones pass answers through again.
    fn cut(&self) {
        for c in self.connections.lock().drain(..) {
            c.abort();
        }
        self.hold.store(false, Ordering::Release);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_answer_was_lost_is_found_applied() {
    let cluster = EtcdCluster::start(1);
    let proxy = Proxy::start(cluster.endpoint(0)).await;
    let settings =
        EtcdConfig { request_timeout: Duration::from_secs(2), ..config(vec![format!("http://{}", proxy.addr)]) };
    let prefix = settings.prefix.clone();
    let (_, store) = open(settings).await;
    let mut watch = store.watch(&[Kind::Project], store.resource_version()).unwrap();

    proxy.hold.store(true, Ordering::Release);
    let writing = {
        let store = store.clone();
        tokio::spawn(async move { store.create(Kind::Project, project("lost"), W).await })
    };
    // The transaction is applied (etcd has the object) while its answer is held back.
    let key = json!({"key": b64(format!("{prefix}/objects/Project/lost").as_bytes())});
    let member = cluster.endpoint(0);
    let direct = || gateway(&member, "/v3/kv/range", key.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    while direct().await.unwrap()["kvs"].as_array().is_none_or(|kvs| kvs.is_empty()) {
        assert!(Instant::now() < deadline, "the transaction was not applied");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.cut();

    let created = tokio::time::timeout(Duration::from_secs(30), writing)
        .await
        .expect("the write answers")
        .unwrap()
        .expect("the applied write answers as done, not as a conflict or AlreadyExists");
    let stored = direct().await.unwrap();
    assert_eq!(rv(&created), int(&stored["kvs"][0]["mod_revision"]) as u64, "at the revision it was applied at");
    let ev = next(&mut watch).await;
    assert_eq!((ev.kind_, ev.rv), (EventKind::Added, rv(&created)));
    assert_eq!(store.get(Kind::Project, "lost").await.unwrap(), created);
    let again = tokio::time::timeout(Duration::from_millis(500), watch.next()).await;
    assert!(again.is_err(), "one change, not two: {again:?}");
}
