//! The contract of a store backend, as tests any backend runs: each function takes a
//! [`Backend`] that makes fresh, empty stores, and panics when the backend breaks a rule of
//! [`ObjectStore`](crate::ObjectStore). The sled store runs every one of them in its unit tests; a
//! backend in another crate turns on the `contract` feature and runs them the same way.

use std::time::Duration;

use aoctl_api::{Kind, API_VERSION};
use serde_json::{json, Value};

use crate::{Deleted, EventKind, Selector, Store, StoreError, Watch, WatchEvent, Write, WriteOptions, Written};

/// How long a watch may take to deliver a change that was already acknowledged.
const DELIVERY_BOUND: Duration = Duration::from_secs(10);
const W: WriteOptions = WriteOptions { dry_run: false };

/// Makes the stores the contract runs against.
pub trait Backend {
    /// A fresh, empty store that keeps the newest `retain` changes (at least) for watches to
    /// start from, and forgets older ones once more have been made.
    fn store(&mut self, retain: u64) -> Store;
}

fn project(name: &str, labels: Value) -> Value {
    json!({"apiVersion": API_VERSION, "kind": "Project", "metadata": {"name": name, "labels": labels},
        "spec": {"path": format!("/src/{name}")}})
}

fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).expect("a resourceVersion")
}

fn rv_str(obj: &Value) -> String {
    rv(obj).to_string()
}

async fn next(w: &mut Watch) -> WatchEvent {
    tokio::time::timeout(DELIVERY_BOUND, w.next())
        .await
        .expect("an acknowledged change is delivered")
        .expect("the watch stays open")
}

/// Create assigns what the store owns; update and status writes with the current resourceVersion
/// succeed and move it; generation moves with spec only.
pub async fn create_get_update_with_preconditions(b: &mut dyn Backend) {
    let store = b.store(100);
    let created = store.create(Kind::Project, project("web", json!({"team": "a"})), W).await.unwrap();
    assert!(created["metadata"]["uid"].is_string(), "{created}");
    assert!(created["metadata"]["creationTimestamp"].is_string(), "{created}");
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(rv(&created), store.resource_version());
    assert_eq!(store.get(Kind::Project, "web").await.unwrap(), created);
    let stored = store.get_stored(Kind::Project, "web").await.unwrap();
    assert_eq!(serde_json::from_slice::<Value>(stored.json()).unwrap(), created, "the encoding is the object");

    let mut next = created.clone();
    next["metadata"]["labels"]["team"] = json!("b");
    let relabelled = store.update(Kind::Project, next, W).await.unwrap();
    assert!(rv(&relabelled) > rv(&created));
    assert_eq!(relabelled["metadata"]["generation"], 1, "labels are not spec");
    assert_eq!(relabelled["metadata"]["uid"], created["metadata"]["uid"]);

    let mut next = relabelled.clone();
    next["spec"]["path"] = json!("/src/elsewhere");
    let moved = store.update(Kind::Project, next, W).await.unwrap();
    assert_eq!(moved["metadata"]["generation"], 2, "spec moves generation");

    let unconditional = store.update(Kind::Project, project("web", json!({"team": "c"})), W).await.unwrap();
    assert_eq!(unconditional["metadata"]["labels"]["team"], "c", "no resourceVersion, no precondition");
    assert_eq!(unconditional["metadata"]["generation"], 3);

    let same = store.update(Kind::Project, unconditional.clone(), W).await.unwrap();
    assert_eq!(rv(&same), rv(&unconditional), "a write that changes nothing makes no version");

    let e = store.create(Kind::Project, project("web", json!({})), W).await.unwrap_err();
    assert!(matches!(e, StoreError::AlreadyExists { .. }), "{e}");
    let e = store.get(Kind::Project, "nope").await.unwrap_err();
    assert!(e.is_not_found() && e.code() == 404, "{e}");
}

/// Every write with a stale resourceVersion fails with 409 and changes nothing.
pub async fn stale_versions_conflict(b: &mut dyn Backend) {
    let store = b.store(100);
    let old = store.create(Kind::Project, project("web", json!({})), W).await.unwrap();
    let mut newer = old.clone();
    newer["metadata"]["labels"] = json!({"team": "a"});
    let current = store.update(Kind::Project, newer, W).await.unwrap();
    let stale = rv_str(&old);

    let mut again = old.clone();
    again["spec"]["path"] = json!("/src/other");
    let errors = [
        store.update(Kind::Project, again, W).await.unwrap_err(),
        store.update_status(Kind::Project, "web", json!({"defaultBranch": "x"}), Some(&stale), W).await.unwrap_err(),
        store.update_finalizers(Kind::Project, "web", vec!["a.dev/x".into()], Some(&stale), W).await.unwrap_err(),
        store.delete(Kind::Project, "web", Some(&stale), W).await.unwrap_err(),
    ];
    for e in errors {
        assert!(e.is_conflict(), "{e}");
        assert_eq!((e.code(), e.reason()), (409, "Conflict"));
    }
    assert_eq!(store.get(Kind::Project, "web").await.unwrap(), current, "nothing changed");
    assert_eq!(store.resource_version(), rv(&current));
}

/// A status write replaces status only; a spec write keeps the status.
pub async fn status_writes_do_not_touch_spec(b: &mut dyn Backend) {
    let store = b.store(100);
    let created = store.create(Kind::Project, project("web", json!({"team": "a"})), W).await.unwrap();
    let status = json!({"defaultBranch": "main"});
    let with_status =
        store.update_status(Kind::Project, "web", status.clone(), Some(&rv_str(&created)), W).await.unwrap();
    assert_eq!(with_status["status"], status);
    assert_eq!(with_status["spec"], created["spec"]);
    assert_eq!(with_status["metadata"]["generation"], 1);
    let mut meta = with_status["metadata"].clone();
    meta["resourceVersion"] = created["metadata"]["resourceVersion"].clone();
    assert_eq!(meta, created["metadata"], "only the resourceVersion moved");

    let mut body = with_status.clone();
    body["spec"]["path"] = json!("/src/moved");
    body["status"] = json!({"defaultBranch": "ignored"});
    let moved = store.update(Kind::Project, body, W).await.unwrap();
    assert_eq!(moved["status"], status, "a spec write keeps the stored status");

    let created = store.create(Kind::Project, project("fresh", json!({})), W).await.unwrap();
    assert!(created.get("status").is_none_or(|s| s.as_object().is_none_or(|m| m.is_empty())));
}

/// A finalizer write replaces `metadata.finalizers` and nothing else: not spec, status, labels,
/// annotations, owners or generation.
pub async fn finalizer_writes_touch_only_finalizers(b: &mut dyn Backend) {
    let store = b.store(100);
    let mut body = project("web", json!({"team": "a"}));
    body["metadata"]["annotations"] = json!({"note": "kept"});
    let created = store.create(Kind::Project, body, W).await.unwrap();
    let before = store.update_status(Kind::Project, "web", json!({"defaultBranch": "main"}), None, W).await.unwrap();

    let after = store
        .update_finalizers(Kind::Project, "web", vec!["a.dev/one".into()], Some(&rv_str(&before)), W)
        .await
        .unwrap();
    assert!(rv(&after) > rv(&before));
    assert_eq!(after["metadata"]["finalizers"], json!(["a.dev/one"]));
    let strip = |o: &Value| {
        let mut o = o.clone();
        let meta = o["metadata"].as_object_mut().expect("metadata");
        meta.remove("resourceVersion");
        meta.remove("finalizers");
        o
    };
    assert_eq!(strip(&after), strip(&before), "nothing but finalizers and the resourceVersion moved");
    assert_eq!(after["metadata"]["generation"], created["metadata"]["generation"]);

    let same = store.update_finalizers(Kind::Project, "web", vec!["a.dev/one".into()], None, W).await.unwrap();
    assert_eq!(rv(&same), rv(&after), "the same finalizers make no version");
    let e = store.update_finalizers(Kind::Project, "nope", vec![], None, W).await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

/// Deleting an object with finalizers marks it; it goes when its last finalizer is removed, and a
/// watch sees both changes.
pub async fn deletion_waits_for_the_last_finalizer(b: &mut dyn Backend) {
    let store = b.store(100);
    let mut body = project("web", json!({}));
    body["metadata"]["finalizers"] = json!(["a.dev/one", "a.dev/two"]);
    store.create(Kind::Project, body, W).await.unwrap();
    let mut w = store.watch(&[Kind::Project], store.resource_version()).unwrap();

    let Deleted::Terminating(marked) = store.delete(Kind::Project, "web", None, W).await.unwrap() else {
        panic!("finalizers remain, so the object stays")
    };
    assert!(marked["metadata"]["deletionTimestamp"].is_string(), "{marked}");
    assert_eq!(store.get(Kind::Project, "web").await.unwrap(), marked);
    let ev = next(&mut w).await;
    assert_eq!((ev.kind_, ev.rv), (EventKind::Modified, rv(&marked)));

    let one_left =
        store.update_finalizers(Kind::Project, "web", vec!["a.dev/two".into()], Some(&rv_str(&marked)), W).await;
    let one_left = one_left.unwrap();
    assert_eq!(one_left["metadata"]["deletionTimestamp"], marked["metadata"]["deletionTimestamp"]);
    assert_eq!(next(&mut w).await.kind_, EventKind::Modified);

    let last = store.update_finalizers(Kind::Project, "web", vec![], None, W).await.unwrap();
    assert!(store.get(Kind::Project, "web").await.unwrap_err().is_not_found());
    let ev = next(&mut w).await;
    assert_eq!((ev.kind_, ev.rv), (EventKind::Deleted, rv(&last)));

    store.create(Kind::Project, project("plain", json!({})), W).await.unwrap();
    let gone = store.delete(Kind::Project, "plain", None, W).await.unwrap();
    assert!(gone.is_gone(), "no finalizers, gone at once");
    assert!(store.get(Kind::Project, "plain").await.unwrap_err().is_not_found());
}

/// A watch from a listed resourceVersion sees every later change of its kinds once, in order.
pub async fn watch_from_a_version(b: &mut dyn Backend) {
    let store = b.store(100);
    for name in ["a", "b"] {
        store.create(Kind::Project, project(name, json!({})), W).await.unwrap();
    }
    let (items, listed) = store.list(Kind::Project, &Selector::everything()).await.unwrap();
    assert_eq!(items.len(), 2);
    let mut w = store.watch(&[Kind::Project], listed).unwrap();
    let c = store.create(Kind::Project, project("c", json!({})), W).await.unwrap();
    let a = store.update_status(Kind::Project, "a", json!({"defaultBranch": "main"}), None, W).await.unwrap();
    let event = json!({"apiVersion": API_VERSION, "kind": "Event", "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Project", "name": "a"}, "type": "Normal", "reason": "R", "message": "m"});
    store.create(Kind::Event, event, W).await.unwrap();
    let Deleted::Gone(b_last) = store.delete(Kind::Project, "b", None, W).await.unwrap() else {
        panic!("no finalizers")
    };
    let got: Vec<(EventKind, u64)> = {
        let mut got = vec![];
        for _ in 0..3 {
            let ev = next(&mut w).await;
            assert_eq!(ev.kind, Kind::Project, "only the kinds asked for");
            got.push((ev.kind_, ev.rv));
        }
        got
    };
    assert_eq!(got, [(EventKind::Added, rv(&c)), (EventKind::Modified, rv(&a)), (EventKind::Deleted, rv(&b_last))]);
    assert_eq!(w.resource_version(), store.resource_version());

    // A second watch from the same version sees the same changes, and one of every kind sees the event.
    let mut all = store.watch(&[], listed).unwrap();
    let kinds: Vec<Kind> = [next(&mut all).await, next(&mut all).await, next(&mut all).await, next(&mut all).await]
        .iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, [Kind::Project, Kind::Project, Kind::Event, Kind::Project]);
}

/// A watch from a version whose changes are no longer retained fails with 410 `Expired`; one from
/// a retained version works.
pub async fn too_old_versions_are_gone(b: &mut dyn Backend) {
    let retain = 3;
    let store = b.store(retain);
    for i in 0..20 {
        store.create(Kind::Project, project(&format!("p{i}"), json!({})), W).await.unwrap();
    }
    let now = store.resource_version();
    let e = store.watch(&[Kind::Project], 0).err().expect("the first changes are forgotten");
    assert!(matches!(e, StoreError::Gone { .. }), "{e}");
    assert_eq!((e.code(), e.reason()), (410, "Expired"));
    assert!(store.oldest_resource_version() <= now - retain);
    let mut w = store.watch(&[Kind::Project], now - retain).unwrap();
    for want in now - retain + 1..=now {
        assert_eq!(next(&mut w).await.rv, want);
    }
}

/// Lists are sorted by name, filtered by labels and current at the store's resourceVersion; a dry
/// run stores nothing.
pub async fn lists_select_and_dry_runs_store_nothing(b: &mut dyn Backend) {
    let store = b.store(100);
    for (name, team) in [("web", "a"), ("api", "b"), ("db", "a")] {
        store.create(Kind::Project, project(name, json!({"team": team})), W).await.unwrap();
    }
    let (items, listed) = store.list(Kind::Project, &Selector::parse("team=a").unwrap()).await.unwrap();
    let names: Vec<&str> = items.iter().map(|o| o["metadata"]["name"].as_str().unwrap_or_default()).collect();
    assert_eq!(names, ["db", "web"]);
    assert_eq!(listed, store.resource_version());
    let (stored, _) = store.list_stored(Kind::Project, &Selector::everything()).await.unwrap();
    assert_eq!(stored.len(), 3);

    let at = store.resource_version();
    let dry = store.create(Kind::Project, project("dry", json!({})), WriteOptions::DRY_RUN).await.unwrap();
    assert_eq!(dry["metadata"]["name"], "dry");
    store.delete(Kind::Project, "web", None, WriteOptions::DRY_RUN).await.unwrap();
    store.update_finalizers(Kind::Project, "db", vec!["a.dev/x".into()], None, WriteOptions::DRY_RUN).await.unwrap();
    assert_eq!(store.resource_version(), at);
    assert!(store.get(Kind::Project, "dry").await.unwrap_err().is_not_found());
    assert!(store.get(Kind::Project, "web").await.is_ok());
    assert!(store.get(Kind::Project, "db").await.unwrap()["metadata"].get("finalizers").is_none());
}

/// A batch is stored whole or not at all: a failing write (here a stale precondition, last)
/// leaves nothing of the others; a good batch is seen by a watch as consecutive changes, later
/// writes see earlier ones (a status write on an object the same batch creates), and a delete
/// in a batch cascades as a single delete does.
pub async fn batches_are_all_or_nothing(b: &mut dyn Backend) {
    let store = b.store(100);
    let old = store.create(Kind::Project, project("old", json!({})), W).await.unwrap();
    let at = store.resource_version();
    let stale = Some((rv(&old) + 5).to_string());
    let failing = vec![
        Write::Create { kind: Kind::Project, obj: project("a", json!({})) },
        Write::Delete { kind: Kind::Project, name: "old".into(), rv: None },
        Write::UpdateStatus { kind: Kind::Project, name: "a".into(), status: json!({"sessions": 1}), rv: None },
        Write::Delete { kind: Kind::Project, name: "old".into(), rv: stale },
    ];
    let err = store.apply_all(failing, W).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. } | StoreError::Conflict { .. }), "{err:?}");
    assert_eq!(store.resource_version(), at, "nothing of a failed batch is stored");
    assert!(store.get(Kind::Project, "a").await.unwrap_err().is_not_found());
    assert!(store.get(Kind::Project, "old").await.is_ok());

    let mut watch = store.watch(&[Kind::Project], at).unwrap();
    let good = vec![
        Write::Create { kind: Kind::Project, obj: project("a", json!({})) },
        Write::UpdateStatus { kind: Kind::Project, name: "a".into(), status: json!({"sessions": 1}), rv: None },
        Write::Create { kind: Kind::Project, obj: project("b", json!({})) },
        Write::Delete { kind: Kind::Project, name: "old".into(), rv: Some(rv_str(&old)) },
    ];
    let written = store.apply_all(good, W).await.unwrap();
    assert_eq!(written.len(), 4);
    let Written::Object(status) = &written[1] else { panic!("{written:?}") };
    assert_eq!(status["status"]["sessions"], 1);
    assert!(matches!(&written[3], Written::Deleted(Deleted::Gone(_))), "{written:?}");
    let mut seen = vec![];
    for _ in 0..4 {
        let ev = next(&mut watch).await;
        seen.push((ev.kind_, ev.object["metadata"]["name"].as_str().unwrap_or_default().to_string(), ev.rv));
    }
    let names: Vec<(EventKind, &str)> = seen.iter().map(|(k, n, _)| (*k, n.as_str())).collect();
    assert_eq!(
        names,
        [(EventKind::Added, "a"), (EventKind::Modified, "a"), (EventKind::Added, "b"), (EventKind::Deleted, "old")]
    );
    let versions: Vec<u64> = seen.iter().map(|(_, _, v)| *v).collect();
    assert_eq!(versions, [at + 1, at + 2, at + 3, at + 4], "one batch, consecutive versions");
    assert_eq!(store.resource_version(), at + 4);

    // An owner named without its uid is found in the same batch, and owns as any owner does.
    let mut owned = project("owned", json!({}));
    owned["metadata"]["ownerReferences"] =
        json!([{"apiVersion": API_VERSION, "kind": "Project", "name": "c", "uid": ""}]);
    let mut orphan = owned.clone();
    orphan["metadata"]["name"] = json!("orphan");
    orphan["metadata"]["ownerReferences"][0]["name"] = json!("nobody");
    let err = store.apply_all(vec![Write::Create { kind: Kind::Project, obj: orphan }], W).await.unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }), "{err:?}");
    let written = store
        .apply_all(
            vec![
                Write::Create { kind: Kind::Project, obj: project("c", json!({})) },
                Write::Create { kind: Kind::Project, obj: owned },
            ],
            W,
        )
        .await
        .unwrap();
    let [Written::Object(c), Written::Object(owned)] = &written[..] else { panic!("{written:?}") };
    assert_eq!(owned["metadata"]["ownerReferences"][0]["uid"], c["metadata"]["uid"]);
    store.delete(Kind::Project, "c", None, W).await.unwrap();
    assert!(store.get(Kind::Project, "owned").await.unwrap_err().is_not_found(), "the owner's delete cascades");

    let before = store.resource_version();
    let dry = vec![Write::Create { kind: Kind::Project, obj: project("dry", json!({})) }];
    store.apply_all(dry, WriteOptions::DRY_RUN).await.unwrap();
    assert_eq!(store.resource_version(), before, "a dry-run batch stores nothing");
    assert!(store.apply_all(vec![], W).await.unwrap().is_empty());
}
