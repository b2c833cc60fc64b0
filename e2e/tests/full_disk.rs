//! A full disk: the server's data dir on a real 20 MiB tmpfs of its own (mounted by the test,
//! which needs root or CAP_SYS_ADMIN; where mounting is refused it fails under `make test` and
//! elsewhere says so on stderr and does nothing, `strict.rs`), filled by a file until the kernel answers ENOSPC, then freed by removing the file.
//! A refused create is neither readable nor watched, `/readyz` says why, the server writes again
//! once space returns, and no resourceVersion is ever given out twice, across a restart too.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use crate::disk::fill;
use crate::harness::{project, rv_num, session, tmpfs_refused, Options, Server, WatchStream, API, NO_REPO};

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
}

/// Reads watch events until one is about `name`; returns them all.
async fn watch_until(w: &mut WatchStream, name: &str) -> Vec<Value> {
    let mut seen = vec![];
    loop {
        let ev = w.next(Duration::from_secs(20)).await.expect("the watch stays open");
        let done = name_of(&ev["object"]) == name;
        seen.push(ev);
        if done {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_visibly_and_the_server_recovers_without_a_restart() {
    if let Some(e) = tmpfs_refused() {
        crate::strict::missing(&format!("the full-disk test cannot mount a tmpfs here ({e}); run it as root"));
        return;
    }
    let mut server = Server::start_with(Options { tmpfs_mib: Some(20), ..Options::default() }).await;
    server.create("projects", &project("demo", NO_REPO)).await;
    server.create("sessions", &session("before", "demo", "written before the disk fills")).await;
    let from = server.list_rv("sessions").await;
    let mut w = WatchStream::open(&server, &format!("{API}/sessions?watch=true&resourceVersion={from}")).await;
    let filler = fill(&server.data_dir);

    // Writes into space the database already has may succeed; the first that needs more fails.
    let big = "x".repeat(48 << 10);
    let mut acked: Vec<Value> = vec![];
    let mut refused = None;
    for i in 0..400 {
        let name = format!("s{i}");
        let r = server.json("POST", &format!("{API}/sessions"), &session(&name, "demo", &big)).await;
        match r.code {
            201 => acked.push(r.json()),
            _ => {
                refused = Some((name, r));
                break;
            }
        }
    }
    let (refused, r) = refused.expect("a create fails on the full disk");
    let status = r.expect_status(507, "InsufficientStorage");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains("no space left") && message.contains("not stored"), "{message}");
    let not_ready = server.get_path("/readyz").await;
    assert_eq!(not_ready.code, 503, "{}", not_ready.text());
    assert!(
        not_ready.text().contains("cannot write") && not_ready.text().contains("no space left"),
        "{}",
        not_ready.text()
    );
    assert_eq!(server.get_path("/healthz").await.code, 200, "the process is alive");
    assert!(server.object("sessions", &refused).await.is_none(), "the refused session is not readable");
    let list = server.get_path(&format!("{API}/sessions")).await.expect(200);
    let listed: BTreeSet<&str> = list["items"].as_array().expect("items").iter().map(name_of).collect();
    assert!(!listed.contains(refused.as_str()), "the refused session is not listed");

    std::fs::remove_file(&filler).expect("free the space");
    server.readyz_becomes(200, Duration::from_secs(30)).await;
    let after = server.create("sessions", &session("after", "demo", "written once space returned")).await;

    // The watch saw the acknowledged sessions and the one after, never the refused one.
    let seen = watch_until(&mut w, "after").await;
    assert!(seen.iter().all(|e| name_of(&e["object"]) != refused), "the refused session was watched: {seen:#?}");
    let added: Vec<&str> = seen.iter().filter(|e| e["type"] == "ADDED").map(|e| name_of(&e["object"])).collect();
    let mut expected: Vec<&str> = acked.iter().map(name_of).collect();
    expected.push("after");
    assert_eq!(added, expected);
    let mut versions: Vec<u64> = seen.iter().map(|e| rv_num(&e["object"])).collect();
    assert!(versions.windows(2).all(|p| p[0] < p[1]), "watched versions increase: {versions:?}");

    // After a restart the refused session is still absent, a watch resumed from before the disk
    // filled replays what was watched, and new versions are new.
    server.restart().await;
    assert!(server.object("sessions", &refused).await.is_none(), "the refused session came back");
    assert!(server.object("sessions", "after").await.is_some(), "the session written after is kept");
    let next = server.create("sessions", &session("next", "demo", "written after the restart")).await;
    let mut resumed = WatchStream::open(&server, &format!("{API}/sessions?watch=true&resourceVersion={from}")).await;
    let replayed = watch_until(&mut resumed, "next").await;
    assert!(replayed.iter().all(|e| name_of(&e["object"]) != refused), "the refused session is in the log");
    let newest = *versions.last().expect("the session after was watched");
    assert_eq!(newest, rv_num(&after), "the last event watched is the session after");
    let replayed: Vec<u64> = replayed.iter().map(|e| rv_num(&e["object"])).collect();
    let prefix: Vec<u64> = replayed.iter().copied().take_while(|v| *v <= newest).collect();
    assert_eq!(prefix, versions, "the resumed watch replays exactly what was watched");
    versions.extend(acked.iter().map(rv_num));
    assert!(versions.iter().all(|v| *v < rv_num(&next)), "a version was given out twice: {versions:?} and {next}");
}
