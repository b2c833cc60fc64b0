//! Store semantics through the API: only the store assigns uid, resourceVersion, generation and
//! timestamps; generation moves only with the spec; spec and status are written through separate
//! paths; dry runs store nothing; generateName makes a name.

use std::time::Duration;

use serde_json::json;

use crate::harness::{project, rv, Server, API, NO_REPO};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_owns_versions_and_spec_and_status_are_separate() {
    let server = Server::start().await;
    let path = format!("{API}/projects/owned");

    // Whatever a client claims for the store's fields is ignored.
    let mut forged = project("owned", NO_REPO);
    forged["metadata"]["uid"] = json!("forged-uid");
    forged["metadata"]["generation"] = json!(42);
    forged["metadata"]["creationTimestamp"] = json!("2001-01-01T00:00:00Z");
    forged["status"] = json!({"sessions": 99});
    let created = server.create("projects", &forged).await;
    assert_ne!(created["metadata"]["uid"], "forged-uid", "{created}");
    assert_eq!(created["metadata"]["generation"], 1, "{created}");
    assert_ne!(created["metadata"]["creationTimestamp"], "2001-01-01T00:00:00Z", "{created}");
    assert!(created["status"]["sessions"] != 99, "a create wrote status: {created}");
    let uid = created["metadata"]["uid"].clone();

    // The controller's status write does not move the generation.
    let p =
        server.wait_for("projects", "owned", Duration::from_secs(10), |p| p["status"]["observedGeneration"] == 1).await;
    assert_eq!(p["metadata"]["generation"], 1);

    // A replace changes labels and spec, never status, uid or timestamps; labels alone keep the
    // generation.
    let mut body = p.clone();
    body["metadata"]["labels"] = json!({"tier": "gold"});
    body["metadata"]["uid"] = json!("another-uid");
    body["status"] = json!({"sessions": 99});
    let replaced = server.json("PUT", &path, &body).await.expect(200);
    assert_eq!(replaced["metadata"]["labels"]["tier"], "gold");
    assert_eq!(replaced["metadata"]["generation"], 1, "labels bumped the generation: {replaced}");
    assert_eq!(replaced["metadata"]["uid"], uid, "{replaced}");
    assert_eq!(replaced["metadata"]["creationTimestamp"], p["metadata"]["creationTimestamp"]);
    assert_eq!(replaced["status"], p["status"], "a replace wrote status: {replaced}");
    assert!(rv(&replaced).parse::<u64>().unwrap() > rv(&p).parse::<u64>().unwrap());

    let patch = json!({"spec": {"sessionPrefix": "owned-v2"}});
    let patched = server.json("PATCH", &path, &patch).await.expect(200);
    assert_eq!(patched["metadata"]["generation"], 2, "a spec change must bump the generation: {patched}");
    assert_eq!(patched["metadata"]["labels"]["tier"], "gold", "the merge patch dropped labels: {patched}");

    // A status write changes status only.
    let p =
        server.wait_for("projects", "owned", Duration::from_secs(10), |p| p["status"]["observedGeneration"] == 2).await;
    let mut body = p.clone();
    body["spec"]["sessionPrefix"] = json!("sneaked-in");
    body["metadata"]["labels"] = json!({"tier": "tin"});
    body["status"]["headSha"] = json!("0123456789abcdef0123456789abcdef01234567");
    let written = server.json("PUT", &format!("{path}/status"), &body).await.expect(200);
    assert_eq!(written["spec"], p["spec"], "a status write changed the spec: {written}");
    assert_eq!(written["metadata"]["labels"], p["metadata"]["labels"], "{written}");
    assert_eq!(written["metadata"]["generation"], 2, "{written}");
    assert_eq!(written["status"]["headSha"], body["status"]["headSha"], "{written}");

    // Dry runs answer as if, and store nothing.
    let before = server.settle().await;
    let r = server.json("POST", &format!("{API}/projects?dryRun=All"), &project("dry", NO_REPO)).await;
    assert_eq!(r.expect(201)["metadata"]["name"], "dry");
    let r = server.json("PATCH", &format!("{path}?dryRun=All"), &json!({"spec": {"sessionPrefix": "dry"}})).await;
    assert_eq!(r.expect(200)["spec"]["sessionPrefix"], "dry");
    server.send("DELETE", &format!("{path}?dryRun=All"), None, vec![]).await.expect(200);
    assert_eq!(server.dump().await, before, "a dry run changed the store");
    assert!(server.object("projects", "dry").await.is_none());

    // generateName: the store picks a unique name with that prefix.
    let mut gen = project("", NO_REPO);
    gen["metadata"] = json!({"generateName": "gen-"});
    let a = server.create("projects", &gen).await;
    let b = server.create("projects", &gen).await;
    for o in [&a, &b] {
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        assert!(name.starts_with("gen-") && name.len() == 9, "generated name {name:?}");
    }
    assert_ne!(a["metadata"]["name"], b["metadata"]["name"]);
}
