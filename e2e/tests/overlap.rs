//! Overlap with the real binary, git and tmux: sessions whose scripted agents commit changes to
//! the same file get `Overlapping` naming the file and each other, a session changing another
//! file does not, the overlap clears when one agent undoes its change, and the `overlap`
//! reaction tells a real HTTP receiver once per session and distinct overlap.

use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::Server;
use crate::lifecycle::{
    agent_repo, condition, eventually, git, project, ready, session, token, wait_all, write_manifest, Cleanup, READY,
};
use crate::receivers::Receiver;

/// How long one step may take on a busy two-core machine.
const STEP: Duration = Duration::from_secs(60);
/// How soon a quiet session hears of a sibling's change.
const WAKE: Duration = Duration::from_secs(30);

fn overlapping(o: &Value) -> (&str, &str, &str) {
    let c = condition(o, "Overlapping");
    let field = |k: &str| c.and_then(|c| c[k].as_str()).unwrap_or("");
    (field("status"), field("reason"), field("message"))
}

fn changed(o: &Value) -> Vec<&str> {
    let files = o.pointer("/status/changedFiles/files").and_then(Value::as_array);
    files.into_iter().flatten().filter_map(Value::as_str).collect()
}

/// The overlap notifications recorded in a session's outbox.
fn overlap_records(o: &Value) -> usize {
    let records = o.pointer("/status/notifications").and_then(Value::as_array);
    records.into_iter().flatten().filter(|r| r["reaction"] == "overlap").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_changing_the_same_file_overlap_until_one_undoes_it() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let rx = Receiver::start().await;
    let repo = agent_repo(server.tmp.path(), "shared");
    let extra = json!({"reactions": {"overlap": {"action": "notify"}},
        "notifiers": [{"type": "webhook", "url": rx.url("/hook")}]});
    let docs = [
        project("shared", &repo, extra),
        session("left", "shared", &token("left"), json!({})),
        session("right", "shared", &token("right"), json!({})),
        session("apart", "shared", &token("apart"), json!({})),
    ];
    server.aoctl(&["apply", "-f", &write_manifest(&server.tmp.path().join("shared.yaml"), &docs)]).ok();
    let names = ["left", "right", "apart"];
    // Each agent's first commit is a note of its own: no overlap yet.
    wait_all(&server, &names, READY, "Ready with their notes and no overlap", |o| {
        let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        ready(o) && changed(o) == [format!("notes/{name}.md")] && overlapping(o).1 == "NoOverlap"
    })
    .await;

    server.aoctl(&["send", "left", "edit src/shared.txt"]).ok();
    server.aoctl(&["send", "apart", "edit src/apart.txt"]).ok();
    // Left has published its change and gone quiet before right makes the same one: left learns
    // of the overlap from the files right publishes, without diffing right's branch.
    wait_all(&server, &["left", "apart"], STEP, "idle with their edits published", |o| {
        changed(o).len() == 2 && o.pointer("/status/activity/state") == Some(&json!("idle"))
    })
    .await;
    server.aoctl(&["send", "right", "edit src/shared.txt"]).ok();
    let objs = wait_all(&server, &names, WAKE, "overlapping on src/shared.txt", |o| {
        changed(o).len() == 2 && overlapping(o).0 == if o["metadata"]["name"] == "apart" { "False" } else { "True" }
    })
    .await;
    let (left, right, apart) = (&objs[0], &objs[1], &objs[2]);
    assert_eq!(overlapping(left), ("True", "FilesOverlap", "src/shared.txt also changed by session right"));
    assert_eq!(overlapping(right), ("True", "FilesOverlap", "src/shared.txt also changed by session left"));
    assert_eq!(left["status"]["overlaps"], json!([{"session": "right", "files": ["src/shared.txt"]}]));
    assert_eq!(overlapping(apart).1, "NoOverlap");
    assert_eq!(changed(apart), ["notes/apart.md", "src/apart.txt"]);
    let branch_tip = git(&repo, &["rev-parse", "shared/left"]);
    assert_eq!(left["status"]["changedFiles"]["headSha"], branch_tip.as_str(), "computed for the branch's head");

    let wide = server.aoctl(&["get", "sessions", "-o", "wide"]);
    wide.ok();
    let header = wide.stdout.lines().next().unwrap_or_default();
    assert!(header.trim_end().ends_with("OVERLAPS"), "{wide}");
    let row = |name: &str| wide.stdout.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_string();
    assert!(row("left").trim_end().ends_with("right(1)"), "{wide}");
    assert!(row("apart").trim_end().ends_with("<none>"), "{wide}");
    let described = server.aoctl(&["describe", "session", "left"]);
    described.ok();
    assert!(described.stdout.contains("Overlaps:\n    session right: src/shared.txt\n"), "{described}");
    assert!(described.stdout.contains("src/shared.txt also changed by session right"), "{described}");

    // The reaction tells the receiver once for each of the two sessions.
    let told = |session: &str| {
        rx.acked("/hook")
            .into_iter()
            .filter(|h| h.body["reaction"] == "overlap" && h.body["session"] == session)
            .count()
    };
    eventually(STEP, "one overlap notification per overlapping session", || {
        match (told("left"), told("right"), told("apart")) {
            (1, 1, 0) => Ok(()),
            seen => Err(format!("{seen:?}: {:?}", rx.hits())),
        }
    })
    .await;

    // A new head with the same overlap is not a new overlap: nothing more is recorded.
    server.aoctl(&["send", "left", "fix the wording"]).ok();
    let moved = eventually(STEP, "left's new head", || {
        let tip = git(&repo, &["rev-parse", "shared/left"]);
        (tip != branch_tip).then_some(tip).ok_or_else(|| "not committed yet".to_string())
    })
    .await;
    let left =
        server.wait_for("sessions", "left", STEP, |o| o["status"]["changedFiles"]["headSha"] == moved.as_str()).await;
    assert_eq!(overlapping(&left).0, "True");
    assert_eq!(overlap_records(&left), 1, "recorded in the status write that saw the new head: {left}");

    // Right undoes its change: both clear.
    server.aoctl(&["send", "right", "undo src/shared.txt main"]).ok();
    let objs = wait_all(&server, &names, STEP, "no overlap once right undid its change", |o| {
        overlapping(o).1 == "NoOverlap" && o["status"]["overlaps"].is_null()
    })
    .await;
    assert_eq!(changed(&objs[1]), ["notes/right.md"]);
    assert_eq!((told("left"), told("right")), (1, 1), "clearing tells no one");
    cleanup.finish();
}
