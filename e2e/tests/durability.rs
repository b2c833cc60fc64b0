//! Durability: every write the API acknowledged is still there, at the acknowledged
//! resourceVersion, after the server is killed with SIGKILL right after the last response.

use std::collections::{BTreeMap, BTreeSet};

use futures::stream::{self, StreamExt};
use serde_json::{json, Value};

use crate::harness::{project, rv_num, session, Server, WatchStream, API, NO_REPO};
use crate::watch::{check, read_until, Change};

/// Kill-and-restart cycles.
const CYCLES: usize = 3;
/// Sessions created per cycle; every `STATUS_EVERY`th also gets a status write.
const CREATES: usize = 175;
const STATUS_EVERY: usize = 6;
/// Requests in flight at once.
const CONCURRENCY: usize = 32;

/// Creates a session and maybe writes its status; returns its name and every acknowledged
/// object, oldest first.
async fn write_one(server: &Server, cycle: usize, i: usize) -> (String, Vec<Value>) {
    let name = format!("c{cycle}-s{i:03}");
    let mut s = session(&name, "durable", &format!("cycle {cycle}, session {i}"));
    s["metadata"]["labels"] = json!({"cycle": cycle.to_string()});
    let created = server.create("sessions", &s).await;
    if !i.is_multiple_of(STATUS_EVERY) {
        return (name, vec![created]);
    }
    let mut body = created.clone();
    body["metadata"].as_object_mut().expect("metadata").remove("resourceVersion");
    body["status"] = json!({
        "phase": "Working",
        "conditions": [{"type": "Ready", "status": "True", "reason": "WrittenByE2e",
            "message": format!("status of {name}"), "lastTransitionTime": "2024-01-01T00:00:00Z"}],
    });
    let path = format!("{API}/sessions/{name}/status");
    let written = server.json("PUT", &path, &body).await.expect(200);
    assert_eq!(written["status"], body["status"], "the status write was stored as sent");
    (name, vec![created, written])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9() {
    let mut server = Server::start().await;
    server.create("projects", &project("durable", NO_REPO)).await;
    let mut acked: BTreeMap<String, Value> = BTreeMap::new();
    let mut newest = 0u64;

    for cycle in 0..CYCLES {
        let start: u64 = server.list_rv("sessions").await.parse().expect("list resourceVersion");
        let results: Vec<(String, Vec<Value>)> = stream::iter(0..CREATES)
            .map(|i| write_one(&server, cycle, i))
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        // The moment the last write was acknowledged: no shutdown, no final flush.
        server.kill9();

        let replay: BTreeMap<u64, Change> = results
            .iter()
            .flat_map(|(_, writes)| writes)
            .map(|o| {
                let type_ = if o["status"].is_null() { "ADDED" } else { "MODIFIED" };
                (rv_num(o), Change { type_, object: o.clone() })
            })
            .collect();
        let writes = replay.len();
        assert!(writes >= 200, "only {writes} acknowledged writes in cycle {cycle}");
        for (name, mut objs) in results {
            let obj = objs.pop().expect("one write at least");
            let n = rv_num(&obj);
            assert!(n > newest, "{name}: resourceVersion {n} is not newer than the last cycle's {newest}");
            acked.insert(name, obj);
        }
        newest = acked.values().map(rv_num).max().unwrap_or(0);

        server.restart().await;
        let list = server.get_path(&format!("{API}/sessions")).await.expect(200);
        let list_rv: u64 = list["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
        assert!(list_rv >= newest, "after restart the store is at {list_rv}, behind acknowledged {newest}");
        let stored: BTreeMap<String, Value> = list["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|o| (o["metadata"]["name"].as_str().unwrap_or_default().to_string(), o.clone()))
            .collect();
        let mut exact = 0;
        for (name, want) in &acked {
            let Some(got) = stored.get(name) else {
                panic!("cycle {cycle}: acknowledged session {name} (rv {}) is gone after kill -9", rv_num(want));
            };
            assert!(
                rv_num(got) >= rv_num(want),
                "cycle {cycle}: {name} went back from acknowledged rv {} to {}",
                rv_num(want),
                rv_num(got)
            );
            if rv_num(got) == rv_num(want) {
                assert_eq!(got, want, "cycle {cycle}: {name} differs from what was acknowledged");
                exact += 1;
            } else {
                // A controller wrote its status since; what users wrote must be intact.
                for field in ["/spec", "/metadata/uid", "/metadata/generation", "/metadata/labels"] {
                    assert_eq!(got.pointer(field), want.pointer(field), "cycle {cycle}: {name}{field}");
                }
            }
        }
        eprintln!("cycle {cycle}: {writes} writes, {} sessions checked, {exact} unchanged since", acked.len());

        // The change log survived too: a watch from before the cycle replays every write of it.
        let mut w = WatchStream::open(&server, &format!("{API}/sessions?watch=true&resourceVersion={start}")).await;
        let seen = read_until(&mut w, &replay, &BTreeSet::new(), start).await;
        let ours: BTreeSet<String> = acked.keys().cloned().collect();
        check(&format!("cycle {cycle}: watch after restart"), &seen, &replay, &BTreeSet::new(), &ours);
    }
}
