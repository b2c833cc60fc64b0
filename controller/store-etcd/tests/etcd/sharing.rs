//! Stores that share a prefix: two at once writing the same objects (each sees the other's
//! writes, concurrent writes are retried, stale ones conflict), a store opened again (its objects
//! at their versions, and a watch from before it was opened), and the cap on Events.

use aoctl_api::{Event, EventType, InvolvedObject, Kind, Time};
use aoctl_store::{EventKind, Selector, StoreError, WriteOptions};
use aoctl_store_etcd::EtcdConfig;
use serde_json::json;

use crate::cluster::EtcdCluster;
use crate::{config, next, open, project, rv};

const W: WriteOptions = WriteOptions { dry_run: false };

/// Runs the futures as tasks at once and collects their outputs in order.
async fn join_all<T: Send + 'static>(futures: Vec<impl std::future::Future<Output = T> + Send + 'static>) -> Vec<T> {
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("the task finishes"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_prefix_see_and_order_each_others_writes() {
    let cluster = EtcdCluster::start(1);
    let settings = config(cluster.endpoints());
    let (_, a) = open(settings.clone()).await;
    let (_, b) = open(settings).await;

    let created = a.create(Kind::Project, project("web"), W).await.unwrap();
    let mut wb = b.watch(&[Kind::Project], rv(&created) - 1).unwrap();
    assert_eq!(next(&mut wb).await.object["metadata"]["uid"], created["metadata"]["uid"], "b sees a's create");
    assert_eq!(b.get(Kind::Project, "web").await.unwrap(), created);

    // Unconditional status writes from both at once: every one is applied, one after another.
    let writes: Vec<_> = (0..16)
        .map(|i| {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            async move { store.update_status(Kind::Project, "web", json!({"sessions": i}), None, W).await }
        })
        .collect();
    let results = join_all(writes).await;
    let mut versions: Vec<u64> =
        results.iter().map(|r| rv(r.as_ref().expect("a concurrent write is retried"))).collect();
    versions.sort();
    versions.dedup();
    assert_eq!(versions.len(), 16, "each write has a revision of its own");
    let newest = *versions.last().expect("versions");
    let last = results.iter().flatten().find(|o| rv(o) == newest).expect("the newest write");
    for store in [&a, &b] {
        let mut w = store.watch(&[Kind::Project], newest - 1).unwrap();
        assert_eq!(next(&mut w).await.rv, newest);
        assert_eq!(store.get(Kind::Project, "web").await.unwrap()["status"], last["status"], "both agree");
    }

    // A precondition from the other store's newer version waits for it; a stale one conflicts.
    let current = b.get(Kind::Project, "web").await.unwrap();
    let by_b = b
        .update_status(
            Kind::Project,
            "web",
            json!({"sessions": 100}),
            Some(current["metadata"]["resourceVersion"].as_str().unwrap()),
            W,
        )
        .await
        .unwrap();
    let by_a = a.update_status(Kind::Project, "web", json!({"sessions": 101}), Some(&rv(&by_b).to_string()), W).await;
    assert_eq!(by_a.unwrap()["status"]["sessions"], 101, "a waited until it had b's version");
    let stale = b.update_status(Kind::Project, "web", json!({"sessions": 102}), Some(&rv(&by_b).to_string()), W).await;
    let e = stale.unwrap_err();
    assert!(e.is_conflict(), "{e:?}");

    // The same name created by both at once: one wins, the other is told it exists.
    let creates: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .map(|s| async move { s.create(Kind::Project, project("race"), W).await })
        .collect();
    let results = join_all(creates).await;
    let won = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(won, 1, "{results:?}");
    assert!(results.iter().any(|r| matches!(r, Err(StoreError::AlreadyExists { .. }))), "{results:?}");

    // A cascade by one store removes what the other created under the owner.
    let owner = a.get(Kind::Project, "web").await.unwrap();
    let mut child = project("child");
    child["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "name": "web", "uid": owner["metadata"]["uid"]}]);
    let child = b.create(Kind::Project, child, W).await.unwrap();
    let mut wa = a.watch(&[Kind::Project], rv(&child) - 1).unwrap();
    assert_eq!(next(&mut wa).await.rv, rv(&child));
    assert!(a.delete(Kind::Project, "web", None, W).await.unwrap().is_gone());
    let kinds: Vec<(EventKind, String)> = [next(&mut wa).await, next(&mut wa).await]
        .iter()
        .map(|e| (e.kind_, e.object["metadata"]["name"].as_str().unwrap_or_default().to_string()))
        .collect();
    assert_eq!(kinds, [(EventKind::Deleted, "web".to_string()), (EventKind::Deleted, "child".to_string())]);
    let mut wb = b.watch(&[Kind::Project], rv(&child)).unwrap();
    next(&mut wb).await;
    next(&mut wb).await;
    assert!(b.get(Kind::Project, "child").await.unwrap_err().is_not_found());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opened_again_has_its_objects_and_their_history() {
    let cluster = EtcdCluster::start(1);
    let settings = config(cluster.endpoints());
    let (etcd, store) = open(settings.clone()).await;
    let a = store.create(Kind::Project, project("a"), W).await.unwrap();
    let b = store.create(Kind::Project, project("b"), W).await.unwrap();
    let a2 = store.update_status(Kind::Project, "a", json!({"sessions": 3}), None, W).await.unwrap();
    store.delete(Kind::Project, "b", None, W).await.unwrap();
    let before = store.resource_version();
    drop(store);
    drop(etcd);

    let (_, again) = open(settings.clone()).await;
    assert_eq!(again.resource_version(), before, "nothing else was written since");
    let (items, listed) = again.list(Kind::Project, &Selector::everything()).await.unwrap();
    assert_eq!(items, vec![a2.clone()], "the objects at their versions");
    assert_eq!(listed, before);
    // A watch from before the store was opened reads etcd's history.
    let mut w = again.watch(&[Kind::Project], rv(&a)).unwrap();
    let got: Vec<(EventKind, u64)> =
        [next(&mut w).await, next(&mut w).await, next(&mut w).await].iter().map(|e| (e.kind_, e.rv)).collect();
    assert_eq!(got[0], (EventKind::Added, rv(&b)));
    assert_eq!(got[1], (EventKind::Modified, rv(&a2)));
    assert_eq!(got[2].0, EventKind::Deleted);

    // Another prefix on the same cluster is another store.
    let (_, other) = open(config(cluster.endpoints())).await;
    assert!(other.list(Kind::Project, &Selector::everything()).await.unwrap().0.is_empty());
    assert_eq!(
        EtcdConfig::new(vec![]).prefix,
        aoctl_store_etcd::DEFAULT_PREFIX,
        "stores share the default prefix unless told otherwise"
    );
}

fn event(about: &str) -> serde_json::Value {
    let involved = InvolvedObject { kind: "Session".into(), name: about.into(), uid: None };
    let e = Event::new(involved, EventType::Normal, "Started", "the agent started", "test", Time::now());
    serde_json::to_value(e).expect("events serialise")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_events_are_expired_in_the_same_transaction() {
    let cluster = EtcdCluster::start(1);
    let (_, store) = open(EtcdConfig { max_events: 3, ..config(cluster.endpoints()) }).await;
    let mut w = store.watch(&[Kind::Event], store.resource_version()).unwrap();
    let mut names = vec![];
    for i in 0..5 {
        let e = store.create(Kind::Event, event(&format!("s{i}")), W).await.unwrap();
        names.push(e["metadata"]["name"].as_str().unwrap().to_string());
    }
    let (left, _) = store.list(Kind::Event, &Selector::everything()).await.unwrap();
    let mut left: Vec<String> = left.iter().map(|e| e["metadata"]["name"].as_str().unwrap().to_string()).collect();
    left.sort();
    let mut newest = names[2..].to_vec();
    newest.sort();
    assert_eq!(left, newest);

    let mut deleted = vec![];
    let mut seen = 0;
    while seen < 7 {
        let ev = next(&mut w).await;
        seen += 1;
        if ev.kind_ == EventKind::Deleted {
            deleted.push(ev.object["metadata"]["name"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(deleted, names[..2]);

    // Updating an event makes it the newest.
    let mut bumped = store.get(Kind::Event, &names[2]).await.unwrap();
    bumped["count"] = json!(2);
    store.update(Kind::Event, bumped, W).await.unwrap();
    store.create(Kind::Event, event("s5"), W).await.unwrap();
    store.get(Kind::Event, &names[2]).await.unwrap();
    assert!(store.get(Kind::Event, &names[3]).await.unwrap_err().is_not_found());
}
