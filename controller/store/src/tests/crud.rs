//! Tests of create, get, list, update and update_status.

use aoctl_api::{Kind, Session};
use serde_json::json;

use super::*;
use crate::{Selector, StoreError};

#[tokio::test]
async fn create_get_list() {
    let dir = tmp();
    let store = open(dir.path());
    assert_eq!(store.resource_version(), 0);
    let b = store.create(Kind::Project, project("beta"), W).await.unwrap();
    let mut a = project("alpha");
    a["metadata"]["labels"] = json!({"team": "web"});
    let a = store.create(Kind::Project, a, W).await.unwrap();
    assert_eq!(rv(&b), 1);
    assert_eq!(rv(&a), 2);
    assert_eq!(generation(&a), 1);
    assert!(a["metadata"]["uid"].as_str().is_some_and(|u| u.len() == 36));
    assert!(a["metadata"]["creationTimestamp"].is_string());
    assert_eq!(store.get(Kind::Project, "alpha").await.unwrap(), a);

    let (items, list_rv) = store.list(Kind::Project, &Selector::everything()).await.unwrap();
    let names: Vec<_> = items.iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert_eq!(list_rv, 2);
    let (items, _) = store.list(Kind::Project, &Selector::parse("team=web").unwrap()).await.unwrap();
    assert_eq!(items, vec![a]);
    let (items, _) = store.list(Kind::Session, &Selector::everything()).await.unwrap();
    assert!(items.is_empty());

    let e = store.get(Kind::Session, "fix-login").await.unwrap_err();
    assert_eq!(e.to_string(), r#"sessions "fix-login" not found"#);
    assert_eq!((e.code(), e.reason()), (404, "NotFound"));
}

#[tokio::test]
async fn create_assigns_what_the_store_owns() {
    let dir = tmp();
    let store = open(dir.path());
    let mut p = project("demo");
    p["metadata"]["uid"] = json!("client-uid");
    p["metadata"]["resourceVersion"] = json!("999");
    p["metadata"]["generation"] = json!(7);
    p["metadata"]["creationTimestamp"] = json!("2001-01-01T00:00:00Z");
    p["metadata"]["deletionTimestamp"] = json!("2001-01-01T00:00:00Z");
    p["status"] = json!({"phase": "Ready"});
    let p = store.create(Kind::Project, p, W).await.unwrap();
    assert_ne!(p["metadata"]["uid"], "client-uid");
    assert_eq!(rv(&p), 1);
    assert_eq!(generation(&p), 1);
    assert_ne!(p["metadata"]["creationTimestamp"], "2001-01-01T00:00:00Z");
    assert!(p["metadata"].get("deletionTimestamp").is_none());
    assert!(p.get("status").is_none(), "status is written only through update_status");
}

#[tokio::test]
async fn already_exists_and_invalid() {
    let dir = tmp();
    let store = open(dir.path());
    store.create(Kind::Project, project("demo"), W).await.unwrap();
    let e = store.create(Kind::Project, project("demo"), W).await.unwrap_err();
    assert_eq!(e, StoreError::AlreadyExists { kind: Kind::Project, name: "demo".into() });
    assert_eq!(e.to_string(), r#"projects "demo" already exists"#);
    assert_eq!(e.code(), 409);
    // Another kind may reuse the name.
    store.create(Kind::Session, session("demo", "demo"), W).await.unwrap();

    for (bad, needle) in [
        (project("Bad_Name"), "metadata.name"),
        (json!({"kind": "Project", "metadata": {}, "spec": {}}), "metadata.name"),
        (json!({"kind": "Session", "metadata": {"name": "x"}, "spec": {}}), "kind"),
        (json!({"apiVersion": "v1", "metadata": {"name": "x"}, "spec": {}}), "apiVersion"),
        (json!({"metadata": {"name": "x", "namespace": "y"}}), "namespace"),
        (json!([1]), "JSON object"),
    ] {
        let e = store.create(Kind::Project, bad, W).await.unwrap_err();
        assert_eq!((e.code(), e.reason()), (422, "Invalid"), "{e}");
        assert!(e.to_string().contains(needle), "{e}");
    }
    assert_eq!(store.resource_version(), 2);
}

#[tokio::test]
async fn conflict_on_stale_resource_version() {
    let dir = tmp();
    let store = open(dir.path());
    let v1 = store.create(Kind::Session, session("fix-login", "demo"), W).await.unwrap();
    let mut v2 = v1.clone();
    v2["spec"]["prompt"] = json!("second");
    store.update(Kind::Session, v2, W).await.unwrap();

    let mut stale = v1.clone();
    stale["spec"]["prompt"] = json!("third");
    let e = store.update(Kind::Session, stale, W).await.unwrap_err();
    assert!(e.is_conflict() && e.is_transient());
    assert_eq!(e.code(), 409);
    assert_eq!(
        e.to_string(),
        r#"Operation cannot be fulfilled on sessions "fix-login": the object has been modified; please apply your changes to the latest version and try again"#
    );
    let stale_rv = v1["metadata"]["resourceVersion"].as_str();
    let e = store.update_status(Kind::Session, "fix-login", json!({"phase": "Working"}), stale_rv, W).await;
    assert!(e.unwrap_err().is_conflict());
    assert!(store.delete(Kind::Session, "fix-login", stale_rv, W).await.unwrap_err().is_conflict());

    // Without a resourceVersion the update is unconditional.
    let mut blind = v1.clone();
    blind["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    blind["spec"]["prompt"] = json!("fourth");
    let v3 = store.update(Kind::Session, blind, W).await.unwrap();
    assert_eq!(v3["spec"]["prompt"], "fourth");
    let e = store.update(Kind::Session, session("nope", "demo"), W).await.unwrap_err();
    assert!(e.is_not_found());
}

#[tokio::test]
async fn generation_follows_spec_only() {
    let dir = tmp();
    let store = open(dir.path());
    let v1 = store.create(Kind::Session, session("s", "demo"), W).await.unwrap();

    let mut labelled = v1.clone();
    labelled["metadata"]["labels"] = json!({"team": "web"});
    let v2 = store.update(Kind::Session, labelled, W).await.unwrap();
    assert_eq!(generation(&v2), 1);
    assert_eq!(rv(&v2), rv(&v1) + 1);
    assert_eq!(v2["metadata"]["labels"]["team"], "web");

    // The same spec with its keys in another order is no change at all.
    let mut reordered = v2.clone();
    reordered["spec"] = json!({"prompt": "fix it", "project": "demo"});
    let same = store.update(Kind::Session, reordered, W).await.unwrap();
    assert_eq!(same, v2);
    assert_eq!(store.resource_version(), rv(&v2));

    let mut changed = v2.clone();
    changed["spec"]["stopped"] = json!(true);
    let v3 = store.update(Kind::Session, changed, W).await.unwrap();
    assert_eq!(generation(&v3), 2);
    assert_eq!(v3["metadata"]["labels"]["team"], "web");
}

#[tokio::test]
async fn status_is_separate_from_spec() {
    let dir = tmp();
    let store = open(dir.path());
    let v1 = store.create(Kind::Session, session("s", "demo"), W).await.unwrap();
    let status = json!({"phase": "Working", "observedGeneration": 1});
    let v2 = store.update_status(Kind::Session, "s", status.clone(), None, W).await.unwrap();
    assert_eq!(v2["status"], status);
    assert_eq!(v2["spec"], v1["spec"]);
    assert_eq!(generation(&v2), 1);
    assert_eq!(rv(&v2), rv(&v1) + 1);

    // Writing the same status again changes nothing.
    let again = store.update_status(Kind::Session, "s", status.clone(), v2["metadata"]["resourceVersion"].as_str(), W);
    assert_eq!(again.await.unwrap(), v2);
    assert_eq!(store.resource_version(), rv(&v2));

    // The spec path keeps the stored status whatever the body says.
    let mut body = v2.clone();
    body["status"] = json!({"phase": "Failed"});
    body["spec"]["prompt"] = json!("other");
    let v3 = store.update(Kind::Session, body, W).await.unwrap();
    assert_eq!(v3["status"], status);
    assert_eq!(generation(&v3), 2);

    let e = store.update_status(Kind::Event, "x", json!({}), None, W).await.unwrap_err();
    assert_eq!(e.code(), 422);
}

#[tokio::test]
async fn update_ignores_what_the_store_owns() {
    let dir = tmp();
    let store = open(dir.path());
    let v1 = store.create(Kind::Project, project("p"), W).await.unwrap();
    let mut body = v1.clone();
    body["metadata"]["uid"] = json!("forged");
    body["metadata"]["creationTimestamp"] = json!("2001-01-01T00:00:00Z");
    body["metadata"]["deletionTimestamp"] = json!("2001-01-01T00:00:00Z");
    body["metadata"]["generation"] = json!(40);
    let same = store.update(Kind::Project, body.clone(), W).await.unwrap();
    assert_eq!(same, v1, "only store-owned fields differ, so nothing changes");
    body["metadata"]["annotations"] = json!({"note": "x"});
    let v2 = store.update(Kind::Project, body, W).await.unwrap();
    for f in ["uid", "creationTimestamp", "generation"] {
        assert_eq!(v2["metadata"][f], v1["metadata"][f], "{f}");
    }
    assert!(v2["metadata"].get("deletionTimestamp").is_none());
    assert_eq!(v2["metadata"]["annotations"]["note"], "x");
}

#[tokio::test]
async fn no_op_update_makes_no_resource_version_or_event() {
    let dir = tmp();
    let store = open(dir.path());
    let v1 = store.create(Kind::Project, project("p"), W).await.unwrap();
    let mut w = store.watch(&[Kind::Project], store.resource_version()).unwrap();
    let same = store.update(Kind::Project, v1.clone(), W).await.unwrap();
    assert_eq!(same, v1);
    assert_eq!(store.resource_version(), rv(&v1));
    assert!(next_soon(&mut w).await.is_none());
}

#[tokio::test]
async fn generate_name_appends_five_characters() {
    let dir = tmp();
    let store = open(dir.path());
    let mut names = std::collections::BTreeSet::new();
    for _ in 0..30 {
        let mut s = session("", "demo");
        s["metadata"] = json!({"generateName": "fix-"});
        let s = store.create(Kind::Session, s, W).await.unwrap();
        let name = s["metadata"]["name"].as_str().unwrap().to_string();
        let suffix = name.strip_prefix("fix-").unwrap();
        assert!(suffix.len() == 5 && suffix.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()), "{name}");
        assert_eq!(s["metadata"]["generateName"], "fix-");
        names.insert(name);
    }
    assert_eq!(names.len(), 30);
}

#[tokio::test]
async fn typed_helpers() {
    let dir = tmp();
    let store = open(dir.path());
    let s = store.create_typed(&Session::new("fix-login", "demo", "fix the login")).await.unwrap();
    assert_eq!(s.metadata.generation, Some(1));
    let mut got: Session = store.get_typed("fix-login").await.unwrap();
    assert_eq!(got, s);
    got.status.observed_generation = Some(1);
    let written = store.update_status_typed(&got).await.unwrap();
    assert_eq!(written.status.observed_generation, Some(1));
    assert_ne!(written.metadata.resource_version, got.metadata.resource_version);
    // `got` now carries a stale resourceVersion.
    assert!(store.update_status_typed(&got).await.unwrap_err().is_conflict());
    let mut next = written.clone();
    next.spec.prompt = Some("again".into());
    let updated = store.update_typed(&next).await.unwrap();
    assert_eq!(updated.metadata.generation, Some(2));
    let (all, rv) = store.list_typed::<Session>(&Selector::everything()).await.unwrap();
    assert_eq!((all, rv), (vec![updated], store.resource_version()));
}

/// The encodings `list_stored` and `get_stored` hand out are the JSON of the values next to them,
/// after creates, status writes, deletions and a reopen alike.
#[tokio::test]
async fn stored_encodings_match_their_values() {
    let dir = tmp();
    let check = |items: &[crate::StoredObject]| {
        for o in items {
            assert_eq!(o.json(), serde_json::to_vec(o.object()).unwrap().as_slice(), "{}", o.object());
            let back: serde_json::Value = serde_json::from_slice(o.json()).unwrap();
            assert_eq!(&back, o.object());
        }
    };
    {
        let store = open(dir.path());
        let p = store.create(Kind::Project, project("demo"), W).await.unwrap();
        for name in ["a", "b", "c"] {
            let mut s = session(name, "demo");
            s["metadata"]["labels"] = json!({"tier": name});
            s["metadata"]["annotations"] = json!({"note": "quote \" and é\n"});
            store.create(Kind::Session, s, W).await.unwrap();
        }
        store.update_status(Kind::Session, "b", json!({"phase": "Working"}), None, W).await.unwrap();
        store.delete(Kind::Session, "c", None, W).await.unwrap();
        let (items, rv) = store.list_stored(Kind::Session, &Selector::everything()).await.unwrap();
        assert_eq!(rv, store.resource_version());
        let names: Vec<_> = items.iter().map(|o| o.object()["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(items[1].object()["status"]["phase"], "Working");
        check(&items);
        let (values, _) = store.list(Kind::Session, &Selector::everything()).await.unwrap();
        assert_eq!(items.iter().map(|o| o.object().clone()).collect::<Vec<_>>(), values);
        let (picked, _) = store.list_stored(Kind::Session, &Selector::parse("tier in (b,c)").unwrap()).await.unwrap();
        assert_eq!(picked, items[1..]);
        let one = store.get_stored(Kind::Project, "demo").await.unwrap();
        assert_eq!(one.object(), &p);
        check(&[one]);
        assert!(store.get_stored(Kind::Session, "c").await.unwrap_err().code() == 404);
    }
    let store = open(dir.path());
    let (items, _) = store.list_stored(Kind::Session, &Selector::everything()).await.unwrap();
    assert_eq!(items.len(), 2);
    check(&items);
}
