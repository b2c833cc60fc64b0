//! Tests of finalizers, cascading deletion, dry runs, reopening and the cap on events.

use aoctl_api::Kind;
use serde_json::json;

use super::*;
use crate::{Deleted, EventKind, Selector, StoreConfig};

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let dir = tmp();
    let store = open(dir.path());
    let mut s = session("s", "demo");
    s["metadata"]["finalizers"] = json!(["ao.dev/cleanup"]);
    store.create(Kind::Session, s, W).await.unwrap();

    let Deleted::Terminating(t1) = store.delete(Kind::Session, "s", None, W).await.unwrap() else {
        panic!("a finalizer remains")
    };
    assert!(t1["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(generation(&t1), 1);
    let Deleted::Terminating(t2) = store.delete(Kind::Session, "s", None, W).await.unwrap() else {
        panic!("a finalizer remains")
    };
    assert_eq!(t2, t1, "a repeated delete changes nothing");
    assert_eq!(store.resource_version(), rv(&t1));

    let mut w = store.watch(&[Kind::Session], store.resource_version()).unwrap();
    let mut done = t1.clone();
    done["metadata"]["finalizers"] = json!([]);
    let last = store.update(Kind::Session, done, W).await.unwrap();
    assert!(store.get(Kind::Session, "s").await.unwrap_err().is_not_found());
    let ev = w.next().await.unwrap();
    assert_eq!((ev.kind_, ev.kind, ev.rv), (EventKind::Deleted, Kind::Session, rv(&t1) + 1));
    assert_eq!(*ev.object, last);
    assert!(ev.object["metadata"].get("finalizers").is_none());
}

#[tokio::test]
async fn deleting_a_project_deletes_its_sessions() {
    let dir = tmp();
    let store = open(dir.path());
    let p = store.create(Kind::Project, project("demo"), W).await.unwrap();
    store.create(Kind::Session, owned_session("a", &p), W).await.unwrap();
    let mut b = owned_session("b", &p);
    b["metadata"]["finalizers"] = json!(["ao.dev/cleanup"]);
    let b = store.create(Kind::Session, b, W).await.unwrap();
    let c = store.create(Kind::Session, owned_session("c", &b), W).await.unwrap();
    store.create(Kind::Session, session("other", "demo"), W).await.unwrap();
    let mut w = store.watch(&[], store.resource_version()).unwrap();

    let d = store.delete(Kind::Project, "demo", None, W).await.unwrap();
    assert!(d.is_gone());
    assert!(store.get(Kind::Project, "demo").await.unwrap_err().is_not_found());
    assert!(store.get(Kind::Session, "a").await.unwrap_err().is_not_found());
    let b_now = store.get(Kind::Session, "b").await.unwrap();
    assert!(b_now["metadata"]["deletionTimestamp"].is_string(), "b keeps its finalizer");
    assert!(store.get(Kind::Session, "c").await.unwrap_err().is_not_found(), "owned by the terminating b");
    store.get(Kind::Session, "other").await.unwrap();

    let mut seen = vec![];
    while let Some(ev) = next_soon(&mut w).await {
        seen.push((ev.kind_, ev.object["metadata"]["name"].as_str().unwrap().to_string()));
    }
    let expect = [(EventKind::Deleted, "demo"), (EventKind::Deleted, "a"), (EventKind::Modified, "b")];
    let mut expect: Vec<_> = expect.iter().map(|(t, n)| (*t, n.to_string())).collect();
    expect.push((EventKind::Deleted, "c".into()));
    assert_eq!(seen, expect);

    let mut done = b_now.clone();
    done["metadata"]["finalizers"] = json!([]);
    store.update(Kind::Session, done, W).await.unwrap();
    let (left, _) = store.list(Kind::Session, &Selector::everything()).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(c["metadata"]["name"], "c");
}

#[tokio::test]
async fn a_terminating_owner_still_cascades() {
    let dir = tmp();
    let store = open(dir.path());
    let mut p = project("demo");
    p["metadata"]["finalizers"] = json!(["ao.dev/cleanup"]);
    let p = store.create(Kind::Project, p, W).await.unwrap();
    store.create(Kind::Session, owned_session("a", &p), W).await.unwrap();
    let d = store.delete(Kind::Project, "demo", None, W).await.unwrap();
    assert!(matches!(d, Deleted::Terminating(_)));
    assert!(store.get(Kind::Session, "a").await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let dir = tmp();
    let (sled, store) = open_sled(dir.path(), StoreConfig::default());
    let p = store.create(Kind::Project, project("demo"), W).await.unwrap();
    let s = store.create(Kind::Session, owned_session("a", &p), W).await.unwrap();
    let before = sled.shared().dump();
    let rv_before = store.resource_version();
    let mut w = store.watch(&[], rv_before).unwrap();
    let dry = WriteOptions::DRY_RUN;

    let created = store.create(Kind::Project, project("new"), dry).await.unwrap();
    assert!(created["metadata"]["uid"].is_string());
    assert!(created["metadata"].get("resourceVersion").is_none());
    assert!(store.create(Kind::Project, project("demo"), dry).await.unwrap_err().code() == 409);
    let mut changed = s.clone();
    changed["spec"]["prompt"] = json!("other");
    let updated = store.update(Kind::Session, changed, dry).await.unwrap();
    assert_eq!((generation(&updated), rv(&updated)), (2, rv(&s)));
    let status = store.update_status(Kind::Session, "a", json!({"phase": "Working"}), None, dry).await.unwrap();
    assert_eq!(status["status"]["phase"], "Working");
    assert!(store.delete(Kind::Project, "demo", None, dry).await.unwrap().is_gone());
    let mut ev = event("a");
    ev["metadata"]["name"] = json!("ev");
    store.create(Kind::Event, ev, dry).await.unwrap();

    assert_eq!(sled.shared().dump(), before);
    assert_eq!(store.resource_version(), rv_before);
    assert_eq!(store.get(Kind::Session, "a").await.unwrap(), s);
    assert!(next_soon(&mut w).await.is_none());
}

#[tokio::test]
async fn reopening_keeps_objects_and_counter() {
    let dir = tmp();
    let (p, last) = {
        let store = open(dir.path());
        let p = store.create(Kind::Project, project("demo"), W).await.unwrap();
        store.create(Kind::Session, session("a", "demo"), W).await.unwrap();
        store.delete(Kind::Session, "a", None, W).await.unwrap();
        (p, store.resource_version())
    };
    assert_eq!(last, 3);
    let store = open(dir.path());
    assert_eq!(store.resource_version(), last);
    assert_eq!(store.get(Kind::Project, "demo").await.unwrap(), p);
    assert!(store.get(Kind::Session, "a").await.unwrap_err().is_not_found());
    let s = store.create(Kind::Session, session("b", "demo"), W).await.unwrap();
    assert_eq!(rv(&s), last + 1);

    // The log survives too: a watch from the start replays every change.
    let mut w = store.watch(&[], 0).unwrap();
    let mut types = vec![];
    while let Some(ev) = next_soon(&mut w).await {
        types.push((ev.rv, ev.kind_));
    }
    use EventKind::*;
    assert_eq!(types, [(1, Added), (2, Added), (3, Deleted), (4, Added)]);
}

#[tokio::test]
async fn old_events_are_expired() {
    let dir = tmp();
    let store = open_with(dir.path(), StoreConfig { max_events: 3, ..StoreConfig::default() });
    let mut w = store.watch(&[Kind::Event], 0).unwrap();
    let mut names = vec![];
    for i in 0..5 {
        let e = store.create(Kind::Event, event(&format!("s{i}")), W).await.unwrap();
        names.push(e["metadata"]["name"].as_str().unwrap().to_string());
    }
    let (left, _) = store.list(Kind::Event, &Selector::everything()).await.unwrap();
    let mut left: Vec<_> = left.iter().map(|e| e["metadata"]["name"].as_str().unwrap().to_string()).collect();
    left.sort();
    let mut newest = names[2..].to_vec();
    newest.sort();
    assert_eq!(left, newest);

    let mut deleted = vec![];
    while let Some(ev) = next_soon(&mut w).await {
        if ev.kind_ == EventKind::Deleted {
            deleted.push(ev.object["metadata"]["name"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(deleted, names[..2]);

    // Updating an event makes it the newest.
    let oldest = store.get(Kind::Event, &names[2]).await.unwrap();
    let mut bumped = oldest.clone();
    bumped["count"] = json!(2);
    store.update(Kind::Event, bumped, W).await.unwrap();
    store.create(Kind::Event, event("s5"), W).await.unwrap();
    store.get(Kind::Event, &names[2]).await.unwrap();
    assert!(store.get(Kind::Event, &names[3]).await.unwrap_err().is_not_found());
}

/// Set in the child process of `acknowledged_writes_survive_kill_9`: the store directory to write to.
const CRASH_DIR_ENV: &str = "AOCTL_STORE_CRASH_DIR";

/// In the child process only: writes projects and reports each acknowledged one, until killed.
#[tokio::test]
async fn crash_child() {
    let Some(dir) = std::env::var_os(CRASH_DIR_ENV) else { return };
    let store = open(std::path::Path::new(&dir));
    for i in 0.. {
        store.create(Kind::Project, project(&format!("p{i}")), W).await.unwrap();
        println!("acked {i}");
    }
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    use std::io::BufRead;
    let dir = tmp();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "tests::lifecycle::crash_child", "--nocapture", "--test-threads=1"])
        .env(CRASH_DIR_ENV, dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked = None;
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("acked ") {
            let n: u64 = n.parse().unwrap();
            acked = Some(n);
            if n >= 30 {
                child.kill().unwrap();
                break;
            }
        }
    }
    child.wait().unwrap();
    let acked = acked.expect("the child acknowledged writes");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let store = open(dir.path());
        for i in 0..=acked {
            store.get(Kind::Project, &format!("p{i}")).await.unwrap();
        }
        assert!(store.resource_version() > acked);
    });
}
