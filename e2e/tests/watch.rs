//! Watches: a watch from a list's resourceVersion sees every later change exactly once, in
//! resourceVersion order and nothing older; `aoctl get -w` prints rows as changes happen.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::{json, Value};

use crate::harness::{project, rv, rv_num, session, Server, Streaming, WatchStream, API, NO_REPO};

/// Concurrent writers, and objects each one goes through.
const WRITERS: usize = 4;
const OBJECTS: usize = 5;

/// One acknowledged change: the watch must report it as `type_` with exactly this object.
#[derive(Clone, Debug)]
pub(crate) struct Change {
    pub type_: &'static str,
    pub object: Value,
}

/// Reads, changes and writes back pinned to the version read, again when another writer (the
/// session controller) got in between, as any client of an optimistic-concurrency API does.
async fn read_modify_write(server: &Server, name: &str, sub: &str, change: impl Fn(&mut Value)) -> Value {
    let path = format!("{API}/sessions/{name}{sub}");
    for _ in 0..20 {
        let mut obj = server.object("sessions", name).await.expect("session exists");
        change(&mut obj);
        let r = server.json("PUT", &path, &obj).await;
        if r.code != 409 {
            return r.expect(200);
        }
    }
    panic!("{path}: 20 conflicts in a row");
}

/// What one writer did: the acknowledged changes, and the sessions it asked to delete whose
/// finalizers the controller has yet to release.
#[derive(Default)]
struct Written {
    changes: Vec<Change>,
    terminating: Vec<String>,
}

/// One writer's changes: per object a create, a replace, a status write, a merge patch, then a
/// delete or another patch.
async fn writer(server: &Server, w: usize) -> Written {
    let mut out = Written::default();
    for j in 0..OBJECTS {
        let name = format!("w{w}-o{j}");
        let path = format!("{API}/sessions/{name}");
        let created = server.create("sessions", &session(&name, "watched", "first")).await;
        out.changes.push(Change { type_: "ADDED", object: created });

        let replaced = read_modify_write(server, &name, "", |o| o["spec"]["prompt"] = json!("second")).await;
        out.changes.push(Change { type_: "MODIFIED", object: replaced });

        let status = read_modify_write(server, &name, "/status", |o| {
            o["status"]["conditions"] = json!([{"type": "E2eWriter", "status": "True", "reason": "Written",
                "lastTransitionTime": "2024-01-01T00:00:00Z"}]);
        })
        .await;
        out.changes.push(Change { type_: "MODIFIED", object: status });

        let patch = json!({"metadata": {"labels": {"writer": w.to_string()}}});
        out.changes.push(Change { type_: "MODIFIED", object: server.json("PATCH", &path, &patch).await.expect(200) });

        if j.is_multiple_of(2) {
            let r = server.send("DELETE", &path, None, vec![]).await;
            match r.code {
                200 => out.changes.push(Change { type_: "DELETED", object: r.json() }),
                202 => {
                    let obj = r.json();
                    assert!(obj["metadata"]["deletionTimestamp"].is_string(), "202 without deletionTimestamp: {obj}");
                    out.changes.push(Change { type_: "MODIFIED", object: obj });
                    out.terminating.push(name);
                }
                _ => panic!("DELETE {path}: {}", r.text()),
            }
        } else {
            let patch = json!({"spec": {"stopped": true}});
            out.changes
                .push(Change { type_: "MODIFIED", object: server.json("PATCH", &path, &patch).await.expect(200) });
        }
    }
    out
}

/// The names of the objects of some changes.
pub(crate) fn names(changes: &BTreeMap<u64, Change>) -> BTreeSet<String> {
    changes.values().map(|c| c.object["metadata"]["name"].as_str().unwrap_or_default().to_string()).collect()
}

fn name_of(ev: &Value) -> String {
    ev["object"]["metadata"]["name"].as_str().unwrap_or_default().to_string()
}

/// Reads events (skipping bookmarks) until every wanted resourceVersion was seen and every
/// terminating session is gone; returns them.
pub(crate) async fn read_until(
    stream: &mut WatchStream,
    wanted: &BTreeMap<u64, Change>,
    terminating: &BTreeSet<String>,
    after: u64,
) -> Vec<(u64, Value)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen: Vec<(u64, Value)> = vec![];
    let mut missing = wanted.len();
    let mut gone = BTreeSet::new();
    while missing > 0 || gone.len() < terminating.len() {
        assert!(Instant::now() < deadline, "{missing} changes never arrived; got {} events", seen.len());
        let ev = stream.next(Duration::from_secs(15)).await.expect("the watch stream ended early");
        match ev["type"].as_str().unwrap_or_default() {
            "BOOKMARK" => continue,
            "ADDED" | "MODIFIED" => {}
            "DELETED" if terminating.contains(&name_of(&ev)) => {
                gone.insert(name_of(&ev));
            }
            "DELETED" => {}
            _ => panic!("unexpected watch event: {ev}"),
        }
        let n = rv_num(&ev["object"]);
        assert!(n > after, "the watch from {after} replayed {n}: {ev}");
        if let Some((last, _)) = seen.last() {
            assert!(n > *last, "resourceVersion {n} after {last}: out of order or repeated");
        }
        if wanted.contains_key(&n) {
            missing -= 1;
        }
        seen.push((n, ev));
    }
    seen
}

/// Checks what a watch delivered against what the writers were told. Events nobody was told of
/// may only be the session controller's writes to `ours`.
pub(crate) fn check(
    what: &str,
    seen: &[(u64, Value)],
    wanted: &BTreeMap<u64, Change>,
    terminating: &BTreeSet<String>,
    ours: &BTreeSet<String>,
) {
    let mut deleted = BTreeSet::new();
    let mut extra = 0;
    for (n, ev) in seen {
        let name = name_of(ev);
        assert!(!deleted.contains(&name), "{what}: an event for {name} after it was deleted: {ev}");
        if ev["type"] == "DELETED" {
            deleted.insert(name.clone());
        }
        match wanted.get(n) {
            Some(c) => {
                assert_eq!(ev["type"], c.type_, "{what}: event {n}: {ev}");
                assert_eq!(ev["object"], c.object, "{what}: event {n} carries another object than acknowledged");
            }
            None => {
                // The session controller writes status and its finalizer, and finally removes the
                // sessions it cleaned up after.
                let by_controller = match ev["type"].as_str() {
                    Some("MODIFIED") => ours.contains(&name),
                    Some("DELETED") => terminating.contains(&name),
                    _ => false,
                };
                assert!(by_controller, "{what}: unexpected event {ev}");
                extra += 1;
            }
        }
    }
    assert_eq!(seen.len() - extra, wanted.len(), "{what}: every acknowledged change exactly once");
    assert!(terminating.is_subset(&deleted), "{what}: deleted sessions never went away");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_sees_every_change_once_in_order() {
    let server = Server::start().await;
    server.create("projects", &project("watched", NO_REPO)).await;
    for i in 0..3 {
        server.create("sessions", &session(&format!("pre-{i}"), "watched", "before the list")).await;
    }
    // Let the session controller finish with them (finalizer, first status) before listing.
    server.settle().await;
    let from: u64 = server.list_rv("sessions").await.parse().expect("list resourceVersion");
    let mut resumed = WatchStream::open(&server, &format!("{API}/sessions?watch=true&resourceVersion={from}")).await;
    let mut fresh = WatchStream::open(&server, &format!("{API}/sessions?watch=true")).await;

    let written: Vec<Written> = join_all((0..WRITERS).map(|w| writer(&server, w))).await;
    let changes: Vec<&Change> = written.iter().flat_map(|w| &w.changes).collect();
    assert_eq!(changes.len(), WRITERS * OBJECTS * 5);
    let wanted: BTreeMap<u64, Change> = changes.iter().map(|c| (rv_num(&c.object), (*c).clone())).collect();
    assert_eq!(wanted.len(), changes.len(), "each acknowledged change has its own resourceVersion");
    let terminating: BTreeSet<String> = written.iter().flat_map(|w| w.terminating.iter().cloned()).collect();

    let seen = read_until(&mut resumed, &wanted, &terminating, from).await;
    let ours = names(&wanted);
    check("watch from the list's resourceVersion", &seen, &wanted, &terminating, &ours);

    // Without a resourceVersion, the stream starts with the objects that exist, as ADDED.
    let mut initial = vec![];
    for _ in 0..3 {
        let ev = fresh.next(Duration::from_secs(10)).await.expect("initial events");
        assert_eq!(ev["type"], "ADDED", "{ev}");
        initial.push(ev["object"]["metadata"]["name"].as_str().unwrap_or_default().to_string());
    }
    initial.sort();
    assert_eq!(initial, ["pre-0", "pre-1", "pre-2"]);
    let seen = read_until(&mut fresh, &wanted, &terminating, from).await;
    check("watch without resourceVersion", &seen, &wanted, &terminating, &ours);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_a_row_per_change() {
    let server = Server::start().await;
    server.create("projects", &project("watched", NO_REPO)).await;
    server.create("sessions", &session("before", "watched", "listed first")).await;

    let mut cmd = server.cli();
    cmd.args(["get", "sessions", "-w"]);
    let mut w = Streaming::spawn(cmd);
    w.wait_line(Duration::from_secs(10), |l| l.starts_with("NAME") && l.contains("PHASE"));
    w.wait_line(Duration::from_secs(10), |l| l.starts_with("before ") && l.contains("watched"));

    let created = server.create("sessions", &session("after", "watched", "created while watching")).await;
    let row = w.wait_line(Duration::from_secs(10), |l| l.starts_with("after "));
    assert!(row.contains("watched"), "{row}");
    let patched = json!({"metadata": {"labels": {"seen": "twice"}}});
    server.json("PATCH", &format!("{API}/sessions/after"), &patched).await.expect(200);
    let again = w.wait_line(Duration::from_secs(10), |l| l.starts_with("after "));
    assert!(again.contains("watched"), "{again}");
    assert!(rv(&created) != rv(&server.object("sessions", "after").await.expect("after")));
}

/// The store keeps this many changes for watches to resume from.
const RETENTION: usize = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_a_compacted_version_is_gone() {
    // More changes than the log keeps, by 32 writers on their own projects (labels only, so no
    // controller writes too).
    let server = Server::start().await;
    let writers = 32;
    for k in 0..writers {
        server.create("projects", &project(&format!("busy-{k}"), NO_REPO)).await;
    }
    server.settle().await;
    let oldest_written = server.list_rv("projects").await;
    let rounds = RETENTION / writers + 10;
    let acked = join_all((0..writers).map(|k| {
        let server = &server;
        async move {
            let path = format!("{API}/projects/busy-{k}");
            let mut acked = vec![];
            for i in 0..rounds {
                let patch = json!({"metadata": {"labels": {"n": i.to_string()}}});
                acked.push(server.json("PATCH", &path, &patch).await.expect(200));
            }
            acked
        }
    }))
    .await
    .concat();
    let newest: u64 = server.list_rv("projects").await.parse().expect("list resourceVersion");

    for too_old in ["1", oldest_written.as_str()] {
        let mut w = WatchStream::open(&server, &format!("{API}/projects?watch=true&resourceVersion={too_old}")).await;
        let ev = w.next(Duration::from_secs(10)).await.expect("an ERROR event");
        assert_eq!(ev["type"], "ERROR", "a watch from {too_old} of {newest} should be gone: {ev}");
        assert_eq!(
            (ev["object"]["code"].as_u64(), ev["object"]["reason"].as_str()),
            (Some(410), Some("Expired")),
            "{ev}"
        );
        assert!(w.next(Duration::from_secs(10)).await.is_none(), "the stream ends after the ERROR");
    }

    // From a version still kept, everything after it arrives, in order.
    let from = newest - (RETENTION as u64) / 2;
    let wanted: BTreeMap<u64, Change> = acked
        .into_iter()
        .filter(|o| rv_num(o) > from)
        .map(|o| (rv_num(&o), Change { type_: "MODIFIED", object: o }))
        .collect();
    let mut w = WatchStream::open(&server, &format!("{API}/projects?watch=true&resourceVersion={from}")).await;
    let seen = read_until(&mut w, &wanted, &BTreeSet::new(), from).await;
    check("watch from a retained version", &seen, &wanted, &BTreeSet::new(), &BTreeSet::new());
}
