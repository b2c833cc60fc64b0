//! The dashboard's live connections in a real browser against the real binary: a terminal
//! WebSocket opened by a page of another origin is refused, and the tabs of one browser share one
//! watch stream (within the browser's six connections) and all resume after a server restart.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::browser::{Browser, Options, STEP};
use crate::dashboard::{agents, got, login, signed_in, COOKIE, LIVE};
use crate::harness::{Server, API, NO_REPO};
use crate::lifecycle::{eventually, Cleanup};

/// A web server of another origin on `ip`, answering every request with a small page, until
/// dropped.
struct Elsewhere {
    pub origin: String,
    stop: Arc<AtomicBool>,
}

impl Elsewhere {
    fn start(ip: Ipv4Addr) -> Elsewhere {
        let listener = TcpListener::bind(SocketAddr::new(IpAddr::V4(ip), 0)).expect("bind another origin");
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let origin = format!("http://{}", listener.local_addr().expect("its address"));
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            let page = "<!doctype html><title>elsewhere</title><p>Another site.</p>";
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                        let mut buf = [0u8; 4096];
                        let _ = conn.read(&mut buf);
                        let _ = conn.write_all(answer.as_bytes());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Elsewhere { origin, stop }
    }
}

impl Drop for Elsewhere {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Opens a WebSocket to `url` from the page: whether it opened, and how it closed.
const OPEN_SOCKET: &str = r#"(url) => new Promise((resolve) => {
  const ws = new WebSocket(url);
  let opened = false;
  ws.onopen = () => { opened = true; ws.close(); };
  ws.onclose = (e) => resolve({opened, closed: true, code: e.code});
  setTimeout(() => resolve({opened, closed: false}), 15000);
})"#;

/// The answer (head and body) to a WebSocket handshake to `path` sent with this Origin and the
/// dashboard's cookie, made by hand.
fn handshake(port: u16, path: &str, origin: &str, cookie: &str) -> String {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).expect("connect to the server");
    conn.set_read_timeout(Some(Duration::from_secs(10))).expect("a read timeout");
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n\
         Cookie: {COOKIE}={cookie}\r\n\r\n"
    );
    conn.write_all(request.as_bytes()).expect("send the handshake");
    let mut got = vec![];
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return text;
            }
        }
        match conn.read(&mut buf) {
            Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => return text,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_websocket_opened_by_a_page_of_another_origin_is_refused() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let name = "console";
    agents(&server, "ops", &[name]).await;
    let browser = Browser::launch();
    let (origin, cookie) = login(&server, &browser);
    let value = cookie["value"].as_str().expect("the cookie's value").to_string();
    let path = format!("{API}/sessions/{name}/terminal?cols=80&rows=24");
    let url = format!("{}{path}", origin.replacen("http://", "ws://", 1));

    // From the dashboard's own page the socket opens: the refusals below are the Origin's doing.
    let page = signed_in(&browser, &origin, &cookie, None, "/");
    let own = page.eval_for(OPEN_SOCKET, json!(url), Duration::from_secs(30));
    assert_eq!(own["opened"], true, "the dashboard's own page opens the terminal: {own}");
    let own_origin = format!("http://127.0.0.1:{}", server.port);
    let own = handshake(server.port, &path, &own_origin, &value);
    assert!(own.starts_with("HTTP/1.1 101 "), "a handshake of the page's own origin: {own}");

    // Another port of the same host (the same site: the strict cookie goes along) and another
    // loopback address (another site).
    for ip in [Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 2)] {
        let elsewhere = Elsewhere::start(ip);
        let foreign = browser.open(Options { cookies: vec![cookie.clone()], ..Options::default() });
        let nav = foreign.goto(&format!("{}/", elsewhere.origin));
        assert_eq!(nav.status, Some(200), "{nav:?}");
        let r = foreign.eval_for(OPEN_SOCKET, json!(url), Duration::from_secs(30));
        assert_eq!(r["opened"], false, "a page of {} opened the terminal: {r}", elsewhere.origin);
        assert_eq!(r["closed"], true, "the refused socket closes: {r}");
        let d = foreign.diagnostics();
        assert!(
            d.console_errors.iter().any(|e| e.contains("WebSocket") && e.contains("403")),
            "the browser reports the server's 403: {d:#?}"
        );
        let answer = handshake(server.port, &path, &elsewhere.origin, &value);
        assert!(answer.starts_with("HTTP/1.1 403 "), "the handshake with Origin {}: {answer}", elsewhere.origin);
        assert!(answer.contains(&format!("`{}`", elsewhere.origin)), "refused for its Origin: {answer}");
    }
    cleanup.finish();
}

/// The text of the terminal's rows, when it holds every one of `want` (an array of strings).
const SCREEN_HAS: &str = r#"(want) => {
  const rows = document.querySelector('#terminal .xterm-rows');
  const text = rows ? [...rows.children].map((r) => r.textContent).join('\n') : '';
  return want.every((w) => text.includes(w)) && text;
}"#;

/// The transcript's text, when it holds every one of `want`.
const TRANSCRIPT_HAS: &str = r#"(want) => {
  const text = document.querySelector('#transcript')?.textContent ?? '';
  return want.every((w) => text.includes(w)) && text;
}"#;

/// How long six fetches at once take in the page, in milliseconds: they wait for a free
/// connection when the page's streams hold the browser's six.
const SIX_FETCHES: &str = r#"async () => {
  const t = performance.now();
  await Promise.all([...Array(6)].map(() => fetch('/version', { credentials: 'same-origin' }).then((r) => r.text())));
  return Math.round(performance.now() - t);
}"#;

/// The requests the server holds open, from its gauges: stream sockets, terminals, watches (over
/// streams or not) and followed transcripts.
async fn held(server: &Server) -> [i64; 4] {
    let text = server.get_path("/metrics").await.text();
    let gauge = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<f64>().ok())
            .map_or(-1, |v| v as i64)
    };
    [
        gauge("aoctl_stream_sockets"),
        gauge("aoctl_terminal_streams"),
        gauge("aoctl_watch_streams"),
        gauge("aoctl_log_follows"),
    ]
}

/// Waits until the server holds `want` (see [`held`]).
async fn holds(server: &Server, want: [i64; 4], what: &str) {
    let deadline = Instant::now() + LIVE;
    loop {
        let now = held(server).await;
        if now == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the server holds {now:?} (stream sockets, terminals, watches, transcripts), not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tabs_of_one_browser_share_one_stream_and_all_resume_after_a_restart() {
    let mut server = Server::start().await;
    let mut cleanup = Cleanup::new(&server);
    let names = ["tab-one", "tab-two"];
    agents(&server, "tabs", &names).await;
    let browser = Browser::launch();
    let (origin, cookie) = login(&server, &browser);
    let row = |n: &str| format!("a.session[data-session=\"{n}\"]");

    // As a person browses, in one browser context: the overview; the second session opened from
    // it in a new tab (Ctrl+click), the first in this tab (a click); a third tab with the overview.
    let overview = signed_in(&browser, &origin, &cookie, None, "/");
    overview.wait_visible(&row("tab-one"), LIVE);
    overview.wait_visible(&row("tab-two"), LIVE);
    let two = overview.click_new_tab(&row("tab-two"));
    overview.click(&row("tab-one"));
    let one = overview;
    let third = one.new_tab(&format!("{origin}/"));
    third.wait_visible(&row("tab-one"), LIVE);
    let sessions = [(&one, "tab-one"), (&two, "tab-two")];
    let tabs = [&one, &two, &third];

    for (tab, n) in sessions {
        tab.front();
        tab.wait_for(&format!("section#session[data-session=\"{n}\"]"), LIVE);
        // The terminal shows the agent's screen, takes typed keys and shows the agent's echo.
        tab.wait_until("the agent's screen in the terminal", SCREEN_HAS, json!(["demo-agent: working on"]), LIVE);
        tab.click("#session [data-action=type]");
        tab.wait_for("#session [data-action=type][aria-pressed=\"true\"]", STEP);
        tab.click("#terminal");
        let words = format!("hello from {n}");
        tab.type_text(&words);
        tab.press("Enter");
        tab.wait_until("the typed line's echo", SCREEN_HAS, json!([format!("demo-agent: got: {words}")]), LIVE);
        // Its diff and its transcript show.
        tab.wait_visible("#diff [data-path]", LIVE);
        tab.wait_until("the transcript", TRANSCRIPT_HAS, json!(["demo-agent"]), LIVE);
        // Send reaches the agent.
        let sent = format!("sent to {n}");
        tab.fill("#send textarea[name=text]", &sent);
        tab.click("#send button[type=submit]");
        eventually(LIVE, "the message sent from the page", || {
            let lines = got(&server, n);
            if lines.contains(&sent) {
                Ok(())
            } else {
                Err(format!("{lines:?}"))
            }
        })
        .await;
        tab.wait_until("the sent line in the transcript", TRANSCRIPT_HAS, json!([format!("got: {sent}")]), LIVE);
    }
    for tab in tabs {
        tab.wait_for("#live[data-state=live]", LIVE);
    }

    // What the browser holds of the server: one stream (three watches a tab, a transcript a
    // session page) and a terminal a session page: three connections for three tabs.
    holds(&server, [1, 2, 9, 2], "three tabs of one browser").await;
    let [streams, terminals, ..] = held(&server).await;
    assert!(streams + terminals <= 3, "the browser holds {streams} streams and {terminals} terminals");
    let open = browser.connections_to(server.port);
    eprintln!("connections of the browser to the server, idle keep-alive ones with them: {open}");
    // Every tab still gets a connection at once for six requests in a row.
    for tab in tabs {
        let took = tab.eval_for(SIX_FETCHES, json!(null), Duration::from_secs(20)).as_u64().unwrap_or(u64::MAX);
        assert!(took < 5000, "six fetches took {took} ms in {}", tab.text("title"));
        let d = tab.diagnostics();
        assert!(!d.console_errors.iter().any(|e| e.starts_with("uncaught")), "the page threw: {d:#?}");
    }

    // The server restarts: every tab resumes, its watches from their versions, its transcript
    // from its offset, its terminal by itself.
    let port = server.port;
    server.restart().await;
    assert_eq!(server.port, port, "the server came back on its port");
    cleanup.retarget(&server);
    for (tab, n) in sessions {
        tab.front();
        tab.wait_for(".term-state[data-state=open]", Duration::from_secs(60));
        tab.click("#terminal");
        let file = format!("after-{n}.txt");
        tab.type_text(&format!("edit {file}"));
        tab.press("Enter");
        tab.wait_until(
            "the echo after the restart",
            SCREEN_HAS,
            json!([format!("demo-agent: got: edit {file}")]),
            LIVE,
        );
        // The agent's new commit reaches the page by the sessions watch, which loads the diff again.
        tab.wait_visible(&format!("#diff [data-path=\"{file}\"]"), LIVE);
        tab.wait_until("the transcript after the restart", TRANSCRIPT_HAS, json!([format!("got: edit {file}")]), LIVE);
    }
    server.create("projects", &crate::harness::project("later", NO_REPO)).await;
    server.create("sessions", &crate::harness::session("after-restart", "later", "Arrive")).await;
    third.front();
    third.wait_for(&row("after-restart"), LIVE);
    for tab in tabs {
        tab.wait_for("#live[data-state=live]", LIVE);
    }
    holds(&server, [1, 2, 9, 2], "three tabs after the restart").await;
    let open = browser.connections_to(server.port);
    eprintln!("connections of the browser to the server after the restart, idle ones with them: {open}");
    for tab in tabs {
        let d = tab.diagnostics();
        assert!(!d.console_errors.iter().any(|e| e.starts_with("uncaught")), "the page threw: {d:#?}");
    }
    cleanup.finish();
}
