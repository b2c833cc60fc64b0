//! `aoctl serve --store etcd` against a real three-member etcd cluster that the test starts on
//! loopback ports: a project and sessions applied with the CLI are in etcd (the data dir holds no
//! sled store), survive a restart of the server at their resourceVersions, and a watch resumed
//! from a version of the first run misses nothing. Writes go on with a member killed; with every
//! member down `/readyz` answers 503 and writes 503, and both come back with the cluster.

use std::ffi::OsStr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::etcd::EtcdCluster;
use crate::harness::{free_port, rv, session, Server, WatchStream, API, NO_REPO};

const MANIFEST: &str = "\
apiVersion: ao.dev/v1alpha1
kind: Project
metadata:
  name: kept
spec:
  path: /nonexistent/aoctl-e2e/repo
---
apiVersion: ao.dev/v1alpha1
kind: Session
metadata:
  name: first
spec:
  project: kept
  prompt: fix the login page
---
apiVersion: ao.dev/v1alpha1
kind: Session
metadata:
  name: second
spec:
  project: kept
  prompt: write the release notes
";

/// The items of a list, by name, without their status (the controllers may still move it).
async fn items(server: &Server, plural: &str) -> Vec<(String, Value, Value)> {
    let list = server.get_path(&format!("{API}/{plural}")).await.expect(200);
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .into_iter()
        .map(|o| {
            let name = o["metadata"]["name"].as_str().unwrap_or_default().to_string();
            (name, o["metadata"]["uid"].clone(), o["spec"].clone())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_keeps_its_objects_in_etcd() {
    let mut cluster = EtcdCluster::start(3);
    let endpoints = cluster.endpoints().join(",");
    let prefix = format!("/aoctl-e2e/{}-{}", std::process::id(), free_port());
    let env = [
        ("AOCTL_STORE", OsStr::new("etcd")),
        ("AOCTL_ETCD_ENDPOINTS", OsStr::new(&endpoints)),
        ("AOCTL_ETCD_PREFIX", OsStr::new(&prefix)),
    ];
    let mut server = Server::start_with_env(&env).await;
    server.aoctl_stdin(&["apply", "-f", "-"], MANIFEST).ok();
    let first = server.wait_for("sessions", "first", Duration::from_secs(20), |s| s["status"].is_object()).await;
    server.settle().await;
    assert!(!server.data_dir.join("store").exists(), "nothing is kept in a sled store");
    let projects = items(&server, "projects").await;
    let sessions = items(&server, "sessions").await;
    assert_eq!(sessions.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["first", "second"]);
    let watched_from = server.list_rv("sessions").await;

    // A new server process on the same etcd prefix finds everything.
    server.restart_with_env(&env).await;
    assert_eq!(items(&server, "projects").await, projects, "the project, same uid and spec");
    assert_eq!(items(&server, "sessions").await, sessions, "the sessions, same uids and specs");
    let again = server.object("sessions", "first").await.expect("the session is there");
    assert!(rv(&again).parse::<u64>().unwrap() >= rv(&first).parse::<u64>().unwrap());

    // A watch resumed from a version of the first run sees what was written since.
    let mut watch =
        WatchStream::open(&server, &format!("{API}/sessions?watch=true&resourceVersion={watched_from}")).await;
    let third = server.create("sessions", &session("third", "kept", "tidy the docs")).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ev = watch.next(Duration::from_secs(20)).await.expect("the watch stays open");
        if ev["type"] == "ADDED" && ev["object"]["metadata"]["name"] == "third" {
            assert_eq!(rv(&ev["object"]), rv(&third));
            break;
        }
        assert!(Instant::now() < deadline, "no ADDED for the new session");
    }

    // One member killed: the server goes on writing.
    cluster.kill(0);
    for i in 0..5 {
        server.create("sessions", &session(&format!("while-down-{i}"), "kept", "one member is down")).await;
    }
    server.readyz_becomes(200, Duration::from_secs(30)).await;

    // Every member down: not ready, and writes are refused with 503.
    cluster.kill_all();
    let why = server.readyz_becomes(503, Duration::from_secs(30)).await;
    assert!(why.contains("etcd"), "{why}");
    let refused = server.json("POST", &format!("{API}/sessions"), &session("refused", "kept", "no etcd")).await;
    refused.expect_status(503, "ServiceUnavailable");
    assert_eq!(server.get_path("/healthz").await.code, 200, "the process is alive");
    let listed = server.get_path(&format!("{API}/sessions")).await.expect(200);
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(8), "reads go on from memory");

    // Back: ready again without a restart, and writes are stored.
    for i in 0..3 {
        cluster.restart(i);
    }
    server.readyz_becomes(200, Duration::from_secs(60)).await;
    let back = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": "back"},
        "spec": {"path": NO_REPO}});
    server.create("projects", &back).await;
    assert!(server.object("sessions", "refused").await.is_none(), "the refused write was not stored");
}
