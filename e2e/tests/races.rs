//! Optimistic concurrency: two writers replace one object with the same resourceVersion at the
//! same time; exactly one wins, the other gets 409 Conflict, and the winner's change is stored.
//! Merge patches without a resourceVersion all apply, none lost.

use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{project, rv, Resp, Server, API, NO_REPO};

/// Rounds that must end with one winner.
const ROUNDS: usize = 24;

/// Waits until the project controller has caught up with the newest spec, so that it does not
/// write while the next round races.
async fn quiet(server: &Server, name: &str) -> Value {
    server
        .wait_for("projects", name, Duration::from_secs(10), |p| {
            p["status"]["observedGeneration"] == p["metadata"]["generation"]
        })
        .await
}

/// Two writes built from the same read, one change each.
fn contenders(round: usize, got: &Value) -> [(String, Value); 2] {
    ["a", "b"].map(|who| {
        let prefix = format!("{who}-r{round}");
        let body = if round.is_multiple_of(2) {
            // A whole replacement, pinned to the version read.
            let mut b = got.clone();
            b.as_object_mut().expect("object").remove("status");
            b["spec"]["sessionPrefix"] = json!(prefix);
            b
        } else {
            // A merge patch pinned to the version read.
            json!({"metadata": {"resourceVersion": rv(got)}, "spec": {"sessionPrefix": prefix}})
        };
        (prefix, body)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_two_racing_writers_wins() {
    let server = Server::start().await;
    server.create("projects", &project("contested", NO_REPO)).await;
    let path = format!("{API}/projects/contested");
    let (mut decided, mut interfered) = (0, 0);

    while decided < ROUNDS {
        assert!(interfered < ROUNDS, "another writer interfered in {interfered} rounds");
        let round = decided + interfered;
        let got = quiet(&server, "contested").await;
        let [(pa, a), (pb, b)] = contenders(round, &got);
        let method = if round.is_multiple_of(2) { "PUT" } else { "PATCH" };
        let (ra, rb): (Resp, Resp) = tokio::join!(server.json(method, &path, &a), server.json(method, &path, &b));
        let (winner, loser, prefix) = match (ra.code, rb.code) {
            (200, 409) => (ra, rb, pa),
            (409, 200) => (rb, ra, pb),
            (409, 409) => {
                // A third writer (a controller) got in between the read and both writes.
                let now = server.object("projects", "contested").await.expect("project exists");
                assert_ne!(rv(&now), rv(&got), "both writes failed though nothing else wrote: {}", ra.text());
                interfered += 1;
                continue;
            }
            (ca, cb) => panic!("round {round} ({method}): {ca} and {cb}:\n{}\n{}", ra.text(), rb.text()),
        };
        loser.expect_status(409, "Conflict");
        let won = winner.json();
        assert_eq!(won["spec"]["sessionPrefix"], prefix.as_str(), "round {round}: the winner's response");
        assert!(rv(&won) != rv(&got), "round {round}: the winning write kept the old resourceVersion");
        let stored = server.object("projects", "contested").await.expect("project exists");
        assert_eq!(stored["spec"], won["spec"], "round {round}: the stored spec is not the winner's");
        assert_eq!(stored["metadata"]["uid"], got["metadata"]["uid"]);
        decided += 1;
    }
    eprintln!("{decided} rounds decided, {interfered} rounds with a third writer");
}

/// Concurrent merge patches without a resourceVersion.
const PATCHERS: usize = 24;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpinned_merge_patches_all_apply() {
    // Without a resourceVersion a merge patch applies to whatever is current: the server merges
    // again after losing a race, so every patch succeeds and none is lost.
    let server = Server::start().await;
    server.create("projects", &project("shared", NO_REPO)).await;
    let path = format!("{API}/projects/shared");
    let patches = (0..PATCHERS).map(|i| {
        let patch = json!({"metadata": {"labels": {format!("writer-{i}"): "done"}}});
        let (server, path) = (&server, &path);
        async move { server.json("PATCH", path, &patch).await }
    });
    let responses = futures::future::join_all(patches).await;
    let failed: Vec<String> = responses.iter().filter(|r| r.code != 200).map(Resp::text).collect();
    assert!(failed.is_empty(), "{} of {PATCHERS} unpinned patches failed: {failed:#?}", failed.len());
    let stored = server.object("projects", "shared").await.expect("project exists");
    let labels = stored["metadata"]["labels"].as_object().cloned().unwrap_or_default();
    assert_eq!(labels.len(), PATCHERS, "lost updates: {labels:?}");
}
