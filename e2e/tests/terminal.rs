//! A session's terminal and diff through the real binary: a WebSocket client (tokio-tungstenite)
//! on `…/sessions/{name}/terminal` of a tmux and a process session running the scripted agent
//! sees its screen (rendered with vt100), types into it, resizes it and leaves it running; the
//! access rules refuse a foreign Origin (403) and a missing token (401) before the upgrade; a
//! session without a running agent is 409. `…/diff` shows the agent's commit and work it has not
//! committed. A docker session's terminal and diff are tested in docker_sessions.rs, with the
//! client defined here.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::harness::{Server, API, NO_REPO};
use crate::lifecycle::{
    agent_committed, agent_repo, condition, git, phase, processes_with, project, ready, session, token, wait_all,
    workspace, Cleanup, Tmux, READY,
};

/// How long the agent's output may take to reach the terminal.
pub(crate) const SHOW: Duration = Duration::from_secs(20);

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The WebSocket URL of a session's terminal.
pub(crate) fn url(server: &Server, name: &str, query: &str) -> String {
    format!("ws://127.0.0.1:{}{API}/sessions/{name}/terminal{query}", server.port)
}

/// Opens a WebSocket handshake with these headers: the socket, or the HTTP answer's code and body.
pub(crate) async fn handshake(url: &str, headers: &[(&'static str, String)]) -> Result<Socket, (u16, String)> {
    let mut req = url.into_client_request().expect("a WebSocket request");
    for (k, v) in headers {
        req.headers_mut().insert(*k, HeaderValue::from_str(v).expect("a header value"));
    }
    match tokio::time::timeout(Duration::from_secs(30), tokio_tungstenite::connect_async(req)).await {
        Err(_) => panic!("no answer to the handshake of {url} within 30 s"),
        Ok(Ok((socket, resp))) => {
            assert_eq!(resp.status().as_u16(), 101);
            Ok(socket)
        }
        Ok(Err(WsError::Http(resp))) => {
            let body = resp.body().as_deref().map(String::from_utf8_lossy).unwrap_or_default().into_owned();
            Err((resp.status().as_u16(), body))
        }
        Ok(Err(e)) => panic!("the handshake of {url} failed: {e}"),
    }
}

pub(crate) fn bearer(server: &Server) -> (&'static str, String) {
    ("authorization", format!("Bearer {}", server.token))
}

/// A person's terminal: the socket and the screen its output draws.
pub(crate) struct Term {
    socket: Socket,
    screen: vt100::Parser,
}

impl Term {
    /// Connects with the token and the API's own Origin, as the dashboard's page would.
    pub(crate) async fn open(server: &Server, name: &str, cols: u16, rows: u16) -> Term {
        let origin = ("origin", format!("http://127.0.0.1:{}", server.port));
        let url = url(server, name, &format!("?cols={cols}&rows={rows}"));
        let socket = handshake(&url, &[bearer(server), origin])
            .await
            .unwrap_or_else(|(code, body)| panic!("the terminal of {name} was refused: {code} {body}"));
        Term { socket, screen: vt100::Parser::new(rows, cols, 0) }
    }

    /// Reads output until the screen shows `text`; panics with the screen after `SHOW`.
    pub(crate) async fn shows(&mut self, text: &str) -> String {
        self.until(text, |screen| screen.contains(text)).await
    }

    /// Reads output until the screen's text satisfies `pred`; panics with the screen after `SHOW`.
    pub(crate) async fn until(&mut self, text: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + SHOW;
        loop {
            let contents = self.screen.screen().contents();
            if pred(&contents) {
                return contents;
            }
            let next = tokio::time::timeout_at(deadline, self.socket.next()).await;
            match next {
                Err(_) => panic!("the terminal did not show {text:?} within {SHOW:?}; it shows:\n{contents}"),
                Ok(Some(Ok(Message::Binary(bytes)))) => self.screen.process(&bytes),
                Ok(Some(Ok(Message::Close(frame)))) => {
                    let f = frame.map(|f| (u16::from(f.code), f.reason.to_string()));
                    panic!("the terminal closed ({f:?}) before showing {text:?}; it shows:\n{contents}");
                }
                Ok(Some(Ok(other))) => panic!("a frame that is not output: {other:?}"),
                Ok(Some(Err(e))) => panic!("the terminal failed before showing {text:?}: {e}\n{contents}"),
                Ok(None) => panic!("the terminal ended before showing {text:?}; it shows:\n{contents}"),
            }
        }
    }

    /// Types `keys` as one binary frame.
    pub(crate) async fn types(&mut self, keys: &str) {
        self.socket.send(Message::Binary(keys.as_bytes().to_vec().into())).await.expect("keys sent");
    }

    pub(crate) async fn resize(&mut self, cols: u16, rows: u16) {
        let text = json!({"resize": [cols, rows]}).to_string();
        self.socket.send(Message::text(text)).await.expect("resize sent");
        self.screen.screen_mut().set_size(rows, cols);
    }

    /// Closes from the client's side and waits for the server's answer.
    pub(crate) async fn close(mut self) {
        self.socket.close(None).await.expect("close sent");
        let deadline = tokio::time::Instant::now() + SHOW;
        loop {
            match tokio::time::timeout_at(deadline, self.socket.next()).await {
                Err(_) => panic!("the server did not answer the close within {SHOW:?}"),
                Ok(None) | Ok(Some(Err(_))) => return,
                Ok(Some(Ok(_))) => {}
            }
        }
    }
}

/// The value of `aoctl_terminal_streams` at `/metrics`.
async fn open_terminals(server: &Server) -> i64 {
    let text = server.get_path("/metrics").await.text();
    let line = text.lines().find(|l| l.starts_with("aoctl_terminal_streams ")).expect("aoctl_terminal_streams");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("a number")
}

pub(crate) async fn terminals_are(server: &Server, want: i64) {
    let deadline = tokio::time::Instant::now() + SHOW;
    loop {
        let now = open_terminals(server).await;
        if now == want {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "aoctl_terminal_streams stays at {now}, not {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Connects to the terminal of the running session `name`, sees the agent's screen, types a line
/// and sees the agent's answer, resizes, types again, closes, and checks the agent still runs.
async fn round_trip(server: &Server, name: &str, agent_token: &str) {
    // Refused before any upgrade: a page of another site, and a client without the token.
    let url = url(server, name, "");
    let (code, body) = handshake(&url, &[bearer(server), ("origin", "http://evil.example".into())]).await.unwrap_err();
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("Forbidden") && body.contains("evil.example"), "{body}");
    let (code, body) = handshake(&url, &[]).await.unwrap_err();
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("Unauthorized"), "{body}");
    terminals_are(server, 0).await;

    let mut term = Term::open(server, name, 120, 40).await;
    term.shows(&format!("demo-agent: working on: Task of {name}")).await;
    term.shows("demo-agent: committed").await;
    terminals_are(server, 1).await;
    term.types("edit x.txt\r").await;
    term.shows("demo-agent: got: edit x.txt").await;
    // Its answer: a second commit, then its prompt again.
    let committed = |screen: &str| screen.matches("demo-agent: committed").count() >= 2;
    term.until("a second commit", committed).await;

    term.resize(100, 30).await;
    term.types("fix after the resize\r").await;
    term.shows("demo-agent: got: fix after the resize").await;
    term.close().await;
    terminals_are(server, 0).await;

    // The agent runs on: the session stays Ready, and its process is there.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let obj = server.object("sessions", name).await.expect("the session");
    assert!(ready(&obj), "{obj:#}");
    assert!(!processes_with(agent_token).is_empty(), "the agent's process is gone");
    // And a second person's terminal opens on the same screen.
    let mut again = Term::open(server, name, 120, 40).await;
    again.shows("demo-agent: got: fix after the resize").await;
    again.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tmux_sessions_terminal_shows_the_agent_and_takes_keys() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "term");
    server.create("projects", &project("term", &repo, json!({}))).await;
    let agent = token("t-tmux");
    server.create("sessions", &session("t-tmux", "term", &agent, json!({}))).await;
    wait_all(&server, &["t-tmux"], READY, "Ready", ready).await;
    round_trip(&server, "t-tmux", &agent).await;
    assert!(Tmux::of(&server).has("t-tmux"), "the tmux session is still there");
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_sessions_terminal_shows_the_agent_and_takes_keys() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "pty");
    server.create("projects", &project("pty", &repo, json!({}))).await;
    let agent = token("t-proc");
    server.create("sessions", &session("t-proc", "pty", &agent, json!({"runtime": "process"}))).await;
    wait_all(&server, &["t-proc"], READY, "Ready", ready).await;
    round_trip(&server, "t-proc", &agent).await;
    cleanup.finish();
}

/// The `Status` body of a plain GET (no handshake) of `path`, which must answer `code`.
async fn status(server: &Server, path: &str, code: u16, reason: &str) -> String {
    let v = server.get_path(path).await.expect_status(code, reason);
    v["message"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_a_running_agent_has_no_terminal() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "idle");
    server.create("projects", &project("idle", &repo, json!({}))).await;
    server.create("projects", &project("nowhere", std::path::Path::new(NO_REPO), json!({}))).await;
    let docs = [
        session("paused", "idle", &token("paused"), json!({"stopped": true})),
        session("waiting", "nowhere", &token("waiting"), json!({})),
        session("ended", "idle", &token("ended"), json!({"restartPolicy": "Never", "env": {"E2E_EXIT_CODE": "0"}})),
    ];
    for d in &docs {
        server.create("sessions", d).await;
    }
    wait_all(&server, &["ended"], READY, "exited", |o| {
        condition(o, "RuntimeReady").is_some_and(|c| c["reason"] == "AgentExited")
    })
    .await;
    wait_all(&server, &["waiting"], READY, "waiting for its project", |o| !phase(o).is_empty()).await;

    let with_token = [bearer(&server)];
    for (name, says) in [
        ("paused", "is stopped (spec.stopped is true)"),
        ("waiting", "has no running agent"),
        ("ended", "has no running agent (AgentExited: the agent exited with code 0"),
    ] {
        // A WebSocket handshake gets the plain answer before any upgrade …
        let (code, body) = handshake(&url(&server, name, ""), &with_token).await.unwrap_err();
        assert_eq!(code, 409, "{name}: {body}");
        assert!(body.contains(says), "{name}: {body}");
        // … and so does a plain request, with a Status body.
        let path = format!("{API}/sessions/{name}/terminal");
        let message = status(&server, &path, 409, "Conflict").await;
        assert!(message.starts_with(&format!("session \"{name}\" ")) && message.contains(says), "{message}");
    }
    let (code, body) = handshake(&url(&server, "missing", ""), &with_token).await.unwrap_err();
    assert_eq!(code, 404, "{body}");
    status(&server, &format!("{API}/sessions/missing/terminal"), 404, "NotFound").await;
    for bad in ["?cols=1", "?rows=1001", "?cols=70000", "?cols=wide"] {
        let (code, body) = handshake(&url(&server, "paused", bad), &with_token).await.unwrap_err();
        assert_eq!(code, 400, "{bad}: {body}");
        status(&server, &format!("{API}/sessions/paused/terminal{bad}"), 400, "BadRequest").await;
    }
    // The access rules first, whatever the session.
    let (code, _) = handshake(&url(&server, "paused", ""), &[]).await.unwrap_err();
    assert_eq!(code, 401);
    let evil = [bearer(&server), ("origin", "http://evil.example".to_string())];
    let (code, _) = handshake(&url(&server, "missing", ""), &evil).await.unwrap_err();
    assert_eq!(code, 403);
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_diff_shows_the_agents_commit_and_the_work_it_has_not_committed() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "diffs");
    server.create("projects", &project("diffs", &repo, json!({}))).await;
    server.create("projects", &project("nowhere", std::path::Path::new(NO_REPO), json!({}))).await;
    server.create("sessions", &session("d1", "diffs", &token("d1"), json!({}))).await;
    server.create("sessions", &session("no-ws", "nowhere", &token("no-ws"), json!({}))).await;
    let obj = wait_all(&server, &["d1"], READY, "Ready", ready).await.remove(0);
    let branch = obj["status"]["workspace"]["branch"].as_str().expect("the branch").to_string();
    agent_committed(&repo, &branch, "d1").await;

    // Work the agent has not committed: a changed tracked file and an untracked one.
    let ws = workspace(&server, "diffs", "d1");
    std::fs::write(ws.join("README.md"), "# e2e\n\nA line not committed.\n").expect("edit README.md");
    std::fs::create_dir_all(ws.join("drafts")).expect("drafts/");
    std::fs::write(ws.join("drafts/plan.md"), "step one\nstep two\n").expect("write an untracked file");

    let path = format!("{API}/sessions/d1/diff");
    let resp = server.request(reqwest::Method::GET, &path).send().await.expect("the diff");
    assert_eq!(resp.status().as_u16(), 200);
    let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    assert_eq!(ct, "text/x-diff; charset=utf-8");
    let diff = resp.text().await.expect("the diff's text");
    let want = [
        // The agent's commit: its note.
        "diff --git a/notes/d1.md b/notes/d1.md\nnew file mode 100644\n",
        "--- /dev/null\n+++ b/notes/d1.md\n@@ -0,0 +1,3 @@\n+# d1\n+\n+Task of d1\n",
        // Not committed.
        "--- a/README.md\n+++ b/README.md\n@@ -1 +1,3 @@\n # e2e\n+\n+A line not committed.\n",
        "--- /dev/null\n+++ b/drafts/plan.md\n@@ -0,0 +1,2 @@\n+step one\n+step two\n",
    ];
    for w in want {
        assert!(diff.contains(w), "{w:?} is not in the diff:\n{diff}");
    }
    assert!(!diff.contains("scripts/"), "what the base already has is no change:\n{diff}");

    // git agrees on every line of the tracked files' part.
    let fork = git(&ws, &["merge-base", "HEAD", "main"]);
    let by_git = git(&ws, &["diff", fork.as_str()]);
    for line in by_git.lines().filter(|l| !l.starts_with("index ")) {
        assert!(diff.lines().any(|d| d == line), "{line:?} (from git diff) is not in:\n{diff}");
    }

    let message = status(&server, &format!("{API}/sessions/no-ws/diff"), 409, "Conflict").await;
    assert_eq!(message, "session \"no-ws\" has no workspace yet");
    status(&server, &format!("{API}/sessions/missing/diff"), 404, "NotFound").await;
    let r = server.http.get(server.url(&path)).send().await.expect("a request without the token");
    assert_eq!(r.status().as_u16(), 401);
    cleanup.finish();
}
