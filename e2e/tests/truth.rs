//! Status that tells the truth within one look: a lost tmux server shows as `RuntimeReady=False`
//! (`RuntimeLost`) to a watcher before the agent runs again, a deleted workspace shows as
//! `WorkspaceReady=False` (`WorkspaceMissing`) within seconds before it is made again, and an agent
//! that exits is `exited` with its exit code, which the `agent-exited` reaction notifies.

use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{Server, WatchStream, API};
use crate::lifecycle::{
    agent_repo, condition, eventually, project, ready, session, token, wait_all, workspace, write_manifest, Cleanup,
    Tmux, READY,
};

/// The status and reason of a condition of a session object, as one string.
fn cond_of(o: &Value, type_: &str) -> String {
    condition(o, type_).map_or_else(String::new, |c| {
        format!("{}/{}", c["status"].as_str().unwrap_or(""), c["reason"].as_str().unwrap_or(""))
    })
}

/// Follows the watch until `done` holds for session `name`; every value of condition `type_` seen
/// on the way, in order, without repeats.
async fn watch_until(
    stream: &mut WatchStream,
    name: &str,
    type_: &str,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let mut seen: Vec<String> = vec![];
    let deadline = tokio::time::Instant::now() + READY;
    while !done(&seen) {
        assert!(tokio::time::Instant::now() < deadline, "{type_} of {name} went only through {seen:?}");
        let Some(ev) = stream.next(READY).await else { panic!("the watch ended; {type_} went through {seen:?}") };
        if ev["object"]["metadata"]["name"] != name {
            continue;
        }
        let now = cond_of(&ev["object"], type_);
        if seen.last() != Some(&now) {
            seen.push(now);
        }
    }
    seen
}

async fn watch_sessions(server: &Server) -> WatchStream {
    let list = server.get_path(&format!("{API}/sessions")).await.expect(200);
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
    WatchStream::open(server, &format!("{API}/sessions?watch=true&resourceVersion={rv}")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_tmux_server_shows_runtime_ready_false_until_the_agent_runs_again() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "lost");
    server.create("projects", &project("lost", &repo, json!({}))).await;
    server.create("sessions", &session("gone", "lost", &token("gone"), json!({}))).await;
    wait_all(&server, &["gone"], READY, "Ready", ready).await;

    let mut stream = watch_sessions(&server).await;
    Tmux::of(&server).kill_server();
    let seen = watch_until(&mut stream, "gone", "RuntimeReady", |seen| {
        seen.iter().any(|c| c == "False/RuntimeLost") && seen.last().is_some_and(|c| c == "True/Running")
    })
    .await;
    // Writes from before the kill may still show it running; the first change is the loss.
    let first_change = seen.iter().find(|c| *c != "True/Running");
    assert_eq!(first_change.map(String::as_str), Some("False/RuntimeLost"), "the loss is the first news: {seen:?}");
    let o = wait_all(&server, &["gone"], READY, "Ready again", ready).await.remove(0);
    assert_eq!(o["status"]["runtime"]["restarts"], 1, "{o:#}");
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_workspace_shows_workspace_missing_within_seconds_then_is_made_again() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "vanish");
    server.create("projects", &project("vanish", &repo, json!({}))).await;
    server.create("sessions", &session("poof", "vanish", &token("poof"), json!({}))).await;
    wait_all(&server, &["poof"], READY, "Ready", ready).await;
    let ws = workspace(&server, "vanish", "poof");
    // Idle, so that nothing but the deletion wakes the session.
    let idle = |o: &Value| ready(o) && o.pointer("/status/activity/state") == Some(&json!("idle"));
    wait_all(&server, &["poof"], READY, "idle", idle).await;

    let mut stream = watch_sessions(&server).await;
    std::fs::remove_dir_all(&ws).expect("delete the worktree folder");
    let deleted = std::time::Instant::now();
    watch_until(&mut stream, "poof", "WorkspaceReady", |seen| seen.iter().any(|c| c == "False/WorkspaceMissing")).await;
    assert!(deleted.elapsed() < Duration::from_secs(5), "noticed after {:?}", deleted.elapsed());
    watch_until(&mut stream, "poof", "WorkspaceReady", |seen| seen.last().is_some_and(|c| c == "True/WorkspaceReady"))
        .await;
    eventually(READY, "the worktree made again", || {
        ws.join("notes/poof.md").is_file().then_some(()).ok_or_else(String::new)
    })
    .await;
    wait_all(&server, &["poof"], READY, "Ready again", ready).await;
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exited_agent_is_exited_with_its_code_and_the_agent_exited_reaction_notifies() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "quits");
    let told = server.tmp.path().join("told.jsonl");
    let notifier = json!({"type": "command", "command": ["sh", "-c", format!("cat >> '{}'; echo >> '{}'", told.display(), told.display())]});
    let docs = [
        project("quits", &repo, json!({"notifiers": [notifier]})),
        session("three", "quits", &token("three"), json!({"restartPolicy": "Never", "env": {"E2E_EXIT_CODE": "3"}})),
    ];
    server.aoctl(&["apply", "-f", &write_manifest(&server.tmp.path().join("quits.yaml"), &docs)]).ok();

    let o = server
        .wait_for("sessions", "three", READY, |o| o.pointer("/status/activity/state") == Some(&json!("exited")))
        .await;
    let evidence = o["status"]["activity"]["evidence"].as_str().unwrap_or_default();
    assert!(evidence.contains("code 3"), "{o:#}");
    assert_eq!(o["status"]["runtime"]["exitCode"], 3, "{o:#}");
    let notes = eventually(Duration::from_secs(20), "the agent-exited notification", || {
        let text = std::fs::read_to_string(&told).unwrap_or_default();
        text.contains("agent-exited").then_some(text.clone()).ok_or(text)
    })
    .await;
    assert!(notes.contains("code 3"), "{notes}");
    let described = server.aoctl(&["describe", "session", "three"]);
    assert!(described.stdout.contains("exited"), "{described}");
    cleanup.finish();
}
