//! Everything typed into an agent goes one way per session: the first prompt, `aoctl send` and
//! reactions. Messages sent before the first prompt is delivered are queued (202) and typed after
//! it, in order; messages sent while it is typed arrive whole, once each; and the journal a
//! controller killed around typing leaves makes its successor neither repeat nor drop a message.

use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{Server, API};
use crate::lifecycle::{
    agent_repo, eventually, phase, project, ready, session, token, transcript, wait_all, Cleanup, Tmux, AGENT, READY,
};

/// A session whose scripted agent gets its first prompt typed (its command names no prompt file).
fn typed_session(name: &str, project: &str, extra: Value) -> Value {
    let mut s = session(name, project, &token(name), extra);
    s["spec"]["agent"] = json!({"command": [AGENT, token(name)]});
    s
}

/// The lines the scripted agent says it got, in order, but empty ones (a controller restarted
/// while typing presses the submit key once more when it cannot tell whether it was pressed).
fn got(server: &Server, name: &str) -> Vec<String> {
    let text = transcript(server, name).replace('\r', "");
    let lines = text.lines().filter_map(|l| l.split_once("demo-agent: got: ").map(|(_, m)| m.trim().to_string()));
    lines.filter(|l| !l.is_empty()).collect()
}

async fn send(server: &Server, name: &str, text: &str) -> (u16, Value) {
    let r = server.json("POST", &format!("{API}/sessions/{name}/input"), &json!({"text": text})).await;
    (r.code, r.json())
}

/// Waits until the agent got every one of `want`.
async fn got_all(server: &Server, name: &str, want: &[String]) -> Vec<String> {
    eventually(Duration::from_secs(30), "every message at the agent", || {
        let lines = got(server, name);
        want.iter().all(|w| lines.contains(w)).then(|| lines.clone()).ok_or(format!("{lines:#?}"))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_before_and_during_the_first_prompt_arrive_after_it_whole_once_and_in_order() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "chat");
    server.create("projects", &project("chat", &repo, json!({"maxConcurrentSessions": 1}))).await;
    server.create("sessions", &session("first", "chat", &token("first"), json!({}))).await;
    wait_all(&server, &["first"], READY, "Ready", ready).await;
    server.create("sessions", &typed_session("later", "chat", json!({}))).await;
    wait_all(&server, &["later"], READY, "Queued", |o| phase(o) == "Queued").await;

    // Before its agent runs: queued, in order.
    let early: Vec<String> = (1..=3).map(|i| format!("early-{i} {}", "abcdefghij".repeat(12))).collect();
    for (i, m) in early.iter().enumerate() {
        let (code, body) = send(&server, "later", m).await;
        assert_eq!(code, 202, "{body:#}");
        let msg = body["message"].as_str().unwrap_or_default();
        assert!(msg.contains(&format!("message {}", i + 1)) && msg.contains("first prompt"), "{body:#}");
    }
    let out = server.aoctl(&["send", "later", "early-4 via the CLI"]);
    out.ok();
    assert!(out.stdout.contains("queued"), "{out}");

    // The slot frees; while the agent starts and gets its first prompt, more arrive at once.
    server.aoctl(&["delete", "session", "first", "--wait=60s"]).ok();
    let during: Vec<String> = (1..=6).map(|i| format!("during-{i} {}", "klmnopqrst".repeat(12))).collect();
    let sends = during.iter().map(|m| send(&server, "later", m));
    for (code, body) in futures::future::join_all(sends).await {
        assert!(code == 200 || code == 202, "{body:#}");
    }
    let mut want = vec!["Task of later".to_string()];
    want.extend(early.iter().cloned());
    want.push("early-4 via the CLI".into());
    want.extend(during.iter().cloned());
    let lines = got_all(&server, "later", &want).await;
    // Nothing typed twice or mixed: every line the agent got is one whole message, once.
    for w in &want {
        assert_eq!(lines.iter().filter(|l| *l == w).count(), 1, "{w:?} in {lines:#?}");
    }
    assert_eq!(lines.len(), want.len(), "only the messages, whole: {lines:#?}");
    assert_eq!(lines[..5], want[..5], "the first prompt first, then the queued ones in order");
    cleanup.finish();
}

/// The length of the session `k`'s transcript, in bytes.
fn transcript_len(server: &Server) -> u64 {
    std::fs::metadata(server.data_dir.join("sessions/k/transcript.log")).map_or(0, |m| m.len())
}

/// Waits until the controller of session `k` has nothing left to type or record: its inbox is
/// empty and no journal is open (a kill now tests one crash point, not two).
async fn settled(server: &Server) {
    let dir = server.data_dir.join("sessions/k");
    eventually(Duration::from_secs(10), "nothing left to type", || {
        let queued = std::fs::read_dir(dir.join("inbox")).map_or(0, |d| d.count());
        let typing = dir.join("typing.json").exists();
        (queued == 0 && !typing).then_some(()).ok_or(format!("{queued} queued, typing: {typing}"))
    })
    .await;
}

/// The typing journal a controller killed while typing leaves behind.
fn journal(server: &Server, name: &str, what: Value, text: &str, offset: u64) {
    let dir = server.data_dir.join("sessions").join(name);
    let j = json!({"what": what, "text": text, "submitKey": "Enter", "offset": offset});
    std::fs::write(dir.join("typing.json"), serde_json::to_vec(&j).unwrap()).expect("write the journal");
}

/// A message of `aoctl send` waiting in the inbox.
fn inbox(server: &Server, name: &str, seq: u64, text: &str) {
    let dir = server.data_dir.join("sessions").join(name).join("inbox");
    std::fs::create_dir_all(&dir).expect("inbox");
    let q = json!({"seq": seq, "text": text, "at": "2025-01-01T00:00:00Z"});
    std::fs::write(dir.join(format!("{seq:020}.json")), serde_json::to_vec(&q).unwrap()).expect("write the message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_around_typing_repeats_nothing() {
    let mut server = Server::start().await;
    let mut cleanup = Cleanup::new(&server);
    let tmux = Tmux::of(&server);
    let repo = agent_repo(server.tmp.path(), "crash");
    server.create("projects", &project("crash", &repo, json!({}))).await;
    server.create("sessions", &typed_session("k", "crash", json!({}))).await;
    got_all(&server, "k", &["Task of k".to_string()]).await;
    settled(&server).await;

    // Killed after submitting the first prompt, before recording it.
    server.kill9();
    std::fs::remove_file(server.data_dir.join("sessions/k/prompt.delivered")).expect("the delivered marker");
    journal(&server, "k", json!("prompt"), "Task of k", 0);
    server.restart().await;
    cleanup.retarget(&server);
    wait_all(&server, &["k"], READY, "Ready", ready).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(got(&server, "k"), ["Task of k"], "the first prompt is not typed again");

    // Killed before typing a queued message.
    server.kill9();
    journal(&server, "k", json!({"queued": 1}), "alpha message", transcript_len(&server));
    inbox(&server, "k", 1, "alpha message");
    server.restart().await;
    cleanup.retarget(&server);
    got_all(&server, "k", &["alpha message".to_string()]).await;
    settled(&server).await;

    // Killed after typing, before submitting.
    server.kill9();
    let offset = transcript_len(&server);
    tmux.run(&["send-keys", "-t", "=k:", "-l", "beta message"]);
    journal(&server, "k", json!({"queued": 2}), "beta message", offset);
    inbox(&server, "k", 2, "beta message");
    server.restart().await;
    cleanup.retarget(&server);
    got_all(&server, "k", &["beta message".to_string()]).await;
    settled(&server).await;

    // Killed after submitting, before recording.
    server.kill9();
    let offset = transcript_len(&server);
    tmux.run(&["send-keys", "-t", "=k:", "-l", "gamma message"]);
    tmux.run(&["send-keys", "-t", "=k:", "Enter"]);
    got_all(&server, "k", &["gamma message".to_string()]).await;
    journal(&server, "k", json!({"queued": 3}), "gamma message", offset);
    inbox(&server, "k", 3, "gamma message");
    server.restart().await;
    cleanup.retarget(&server);
    wait_all(&server, &["k"], READY, "Ready", ready).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(got(&server, "k"), ["Task of k", "alpha message", "beta message", "gamma message"]);
    let left = std::fs::read_dir(server.data_dir.join("sessions/k/inbox")).map_or(0, |d| d.count());
    assert_eq!(left, 0, "the inbox is empty");
    cleanup.finish();
}
