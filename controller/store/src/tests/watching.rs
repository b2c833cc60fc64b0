//! Tests of watches: gap-free from a list, concurrent writers, lagging, compaction and filters.

use std::sync::Arc;

use aoctl_api::Kind;
use serde_json::json;

use super::*;
use crate::codec::{log_header, parse_rv_key};
use crate::{EventKind, Selector, StoreConfig, StoreError};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watch_from_a_list_sees_every_later_change_once_in_order() {
    let dir = tmp();
    let (sled, store) = open_sled(dir.path(), StoreConfig::default());
    for i in 0..5 {
        store.create(Kind::Session, session(&format!("pre-{i}"), "demo"), W).await.unwrap();
    }
    let (items, from) = store.list(Kind::Session, &Selector::everything()).await.unwrap();
    assert_eq!(items.len(), 5);
    let mut w = store.watch(&[Kind::Session], from).unwrap();

    const TASKS: usize = 8;
    const WRITES: usize = 50;
    let mut tasks = vec![];
    for t in 0..TASKS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("t{t}");
            let mut obj = store.create(Kind::Session, session(&name, "demo"), W).await.unwrap();
            for i in 1..WRITES {
                obj["spec"]["prompt"] = json!(format!("write {i}"));
                obj = store.update(Kind::Session, obj, W).await.unwrap();
            }
        }));
    }
    let total = TASKS * WRITES;
    let mut seen = Vec::with_capacity(total);
    while seen.len() < total {
        let ev = tokio::time::timeout(std::time::Duration::from_secs(30), w.next()).await.unwrap().unwrap();
        seen.push(ev);
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert!(next_soon(&mut w).await.is_none(), "nothing is delivered twice");

    let rvs: Vec<u64> = seen.iter().map(|e| e.rv).collect();
    let expected: Vec<u64> = (from + 1..=from + total as u64).collect();
    assert_eq!(rvs, expected, "strictly increasing, no gaps");
    for e in &seen {
        assert_eq!(rv(&e.object), e.rv);
    }
    // The same sequence is in the log.
    let logged: Vec<(u64, EventKind)> = sled
        .shared()
        .handles()
        .log
        .range(crate::codec::rv_key(from + 1)..)
        .map(|i| i.unwrap())
        .map(|(k, v)| (parse_rv_key(&k).unwrap(), log_header(&v).unwrap().0))
        .collect();
    let watched: Vec<(u64, EventKind)> = seen.iter().map(|e| (e.rv, e.kind_)).collect();
    assert_eq!(logged, watched);
    assert_eq!(seen.iter().filter(|e| e.kind_ == EventKind::Added).count(), TASKS);
    assert_eq!(w.resource_version(), store.resource_version());
}

#[tokio::test]
async fn compacted_resource_versions_are_gone() {
    let dir = tmp();
    let (sled, store) = open_sled(dir.path(), StoreConfig { log_retention: 5, ..StoreConfig::default() });
    for i in 0..20 {
        store.create(Kind::Project, project(&format!("p{i}")), W).await.unwrap();
    }
    let now = store.resource_version();
    assert_eq!(now, 20);
    let e = store.watch(&[Kind::Project], 0).err().unwrap();
    assert_eq!(e, StoreError::Gone { from: 0, oldest: 16 });
    assert_eq!((e.code(), e.reason()), (410, "Expired"));
    assert!(store.watch(&[Kind::Project], now - 6).is_err());
    assert_eq!(store.oldest_resource_version(), now - 5);

    let mut w = store.watch(&[Kind::Project], now - 5).unwrap();
    let mut got = vec![];
    for _ in 0..5 {
        got.push(w.next().await.unwrap().rv);
    }
    assert_eq!(got, (16..=20).collect::<Vec<_>>());
    assert_eq!(sled.shared().handles().log.len(), 5);

    // After a reopen, the compaction point is read back from the log.
    drop(w);
    drop((sled, store));
    let store = open_with(dir.path(), StoreConfig { log_retention: 5, ..StoreConfig::default() });
    assert!(matches!(store.watch(&[], 14), Err(StoreError::Gone { .. })));
    store.watch(&[], 15).unwrap();
}

#[tokio::test]
async fn a_lagging_watch_catches_up_from_the_log() {
    let dir = tmp();
    let store = open_with(dir.path(), StoreConfig { watch_buffer: 2, ..StoreConfig::default() });
    let mut w = store.watch(&[Kind::Project], 0).unwrap();
    // Start following live before the writes, so that the channel overflows.
    assert!(next_soon(&mut w).await.is_none());
    for i in 0..40 {
        store.create(Kind::Project, project(&format!("p{i}")), W).await.unwrap();
    }
    let mut got = vec![];
    while let Some(ev) = next_soon(&mut w).await {
        got.push(ev.rv);
    }
    assert_eq!(got, (1..=40).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_lagging_watch_past_compaction_ends_with_gone() {
    let dir = tmp();
    let config = StoreConfig { watch_buffer: 2, log_retention: 4, ..StoreConfig::default() };
    let store = open_with(dir.path(), config);
    let mut w = store.watch(&[Kind::Project], 0).unwrap();
    assert!(next_soon(&mut w).await.is_none());
    for i in 0..20 {
        store.create(Kind::Project, project(&format!("p{i}")), W).await.unwrap();
    }
    let mut got = vec![];
    while let Some(ev) = next_soon(&mut w).await {
        got.push(ev.rv);
    }
    assert!(got.windows(2).all(|p| p[1] == p[0] + 1), "{got:?}");
    assert!(matches!(w.error(), Some(StoreError::Gone { .. })), "{:?}", w.error());
    assert!(w.next().await.is_none());
}

#[tokio::test]
async fn watches_filter_by_kind_and_end_with_the_store() {
    let dir = tmp();
    let store = open(dir.path());
    let mut w = store.watch(&[Kind::Session], 0).unwrap();
    let mut all = store.watch(&[], 0).unwrap();
    store.create(Kind::Project, project("demo"), W).await.unwrap();
    store.create(Kind::Session, session("a", "demo"), W).await.unwrap();
    store.create(Kind::Project, project("other"), W).await.unwrap();
    let ev = w.next().await.unwrap();
    assert_eq!((ev.kind, ev.rv), (Kind::Session, 2));
    assert!(next_soon(&mut w).await.is_none());
    assert_eq!(w.resource_version(), 3, "progress counts changes of other kinds");
    for want in 1..=3 {
        assert_eq!(all.next().await.unwrap().rv, want);
    }
    let object = Arc::clone(&ev.object);
    drop(store);
    assert!(w.next().await.is_none());
    assert!(w.error().is_none());
    assert_eq!(object["metadata"]["name"], "a");
}
