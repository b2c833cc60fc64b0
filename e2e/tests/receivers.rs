//! A real HTTP receiver for the notifiers (webhook, Slack, Discord): an axum server on
//! 127.0.0.1:0 that records every request — path, `Idempotency-Key` header, JSON body and the
//! status it was answered with — and answers as the test says: 200, 503, not at all until told
//! (a request held open while the controller that sent it is killed), or 200 once told (a slow
//! receiver that answers in the end).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::watch;

use crate::lifecycle::eventually;

/// How the receiver answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Ok,
    Fail,
    /// Requests wait unanswered until the mode changes; then they get 503 (their sender is gone).
    Hold,
    /// Requests wait unanswered until the mode changes; then they get 200 (a slow receiver).
    Late,
}

/// One request the receiver got.
#[derive(Clone, Debug)]
pub(crate) struct Hit {
    pub path: String,
    pub key: Option<String>,
    pub body: Value,
    /// The status it was answered with; 0 while it is held.
    pub answered: u16,
}

#[derive(Clone)]
struct Shared {
    hits: Arc<Mutex<Vec<Hit>>>,
    mode: watch::Sender<Mode>,
}

pub(crate) struct Receiver {
    base: String,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

async fn record(State(sh): State<Shared>, uri: Uri, headers: HeaderMap, body: Bytes) -> StatusCode {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(String::from);
    let hit = Hit {
        path: uri.path().to_string(),
        key,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        answered: 0,
    };
    let i = {
        let mut hits = sh.hits.lock();
        hits.push(hit);
        hits.len() - 1
    };
    let mut rx = sh.mode.subscribe();
    let mode = *rx.borrow_and_update();
    let code = match mode {
        Mode::Ok => StatusCode::OK,
        Mode::Fail => StatusCode::SERVICE_UNAVAILABLE,
        Mode::Hold => {
            let _ = rx.wait_for(|m| *m != Mode::Hold).await;
            StatusCode::SERVICE_UNAVAILABLE
        }
        Mode::Late => {
            let _ = rx.wait_for(|m| *m != Mode::Late).await;
            StatusCode::OK
        }
    };
    sh.hits.lock()[i].answered = code.as_u16();
    code
}

impl Receiver {
    pub(crate) async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the receiver");
        let base = format!("http://{}", listener.local_addr().expect("receiver address"));
        let shared = Shared { hits: Arc::new(Mutex::new(vec![])), mode: watch::channel(Mode::Ok).0 };
        let app = axum::Router::new().fallback(axum::routing::post(record)).with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { base, shared, task }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) fn set(&self, mode: Mode) {
        self.shared.mode.send_replace(mode);
    }

    pub(crate) fn hits(&self) -> Vec<Hit> {
        self.shared.hits.lock().clone()
    }

    /// The requests to `path` answered with a 2xx: the deliveries the receiver acknowledged.
    pub(crate) fn acked(&self, path: &str) -> Vec<Hit> {
        self.hits().into_iter().filter(|h| h.path == path && (200..300).contains(&h.answered)).collect()
    }

    /// Waits (up to `limit`) until `pred` holds for the requests received; returns them.
    pub(crate) async fn received(&self, limit: Duration, what: &str, pred: impl Fn(&[Hit]) -> bool) -> Vec<Hit> {
        eventually(limit, what, || {
            let hits = self.hits();
            if pred(&hits) {
                Ok(hits)
            } else {
                Err(format!("{hits:#?}"))
            }
        })
        .await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A desktop session for `notify-send`: Xvfb, a private D-Bus session bus, the dunst notification
/// server on both, and `dbus-monitor` recording every `Notify` call. Stopped when dropped.
pub(crate) struct Desktop {
    pub bus: String,
    monitor_log: std::path::PathBuf,
    children: Vec<std::process::Child>,
}

impl Desktop {
    /// `None` when one of the programs is not installed.
    pub(crate) fn start(dir: &std::path::Path) -> Option<Desktop> {
        use std::io::{BufRead, BufReader};
        use std::process::{Command, Stdio};
        let have = |p: &str| {
            Command::new("sh").args(["-c", &format!("command -v {p}")]).output().is_ok_and(|o| o.status.success())
        };
        if !["Xvfb", "dbus-daemon", "dbus-monitor", "dbus-send", "dunst", "notify-send"].iter().all(|p| have(p)) {
            return None;
        }
        let first_line = |c: &mut std::process::Child| {
            let mut line = String::new();
            BufReader::new(c.stdout.take().expect("stdout is piped")).read_line(&mut line).expect("read a line");
            line.trim().to_string()
        };
        let mut d = Desktop { bus: String::new(), monitor_log: dir.join("dbus-monitor.log"), children: vec![] };
        let mut x = Command::new("Xvfb")
            .args(["-displayfd", "1", "-nolisten", "tcp"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb starts");
        let display = format!(":{}", first_line(&mut x));
        d.children.push(x);
        let mut bus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address=1"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("dbus-daemon starts");
        d.bus = first_line(&mut bus);
        d.children.push(bus);
        let log = std::fs::File::create(&d.monitor_log).expect("create the monitor log");
        let monitor = Command::new("dbus-monitor")
            .args(["--address", &d.bus, "interface='org.freedesktop.Notifications',member='Notify'"])
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-monitor starts");
        d.children.push(monitor);
        let dunst = Command::new("dunst")
            .env("DISPLAY", &display)
            .env("DBUS_SESSION_BUS_ADDRESS", &d.bus)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dunst starts");
        d.children.push(dunst);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let out = Command::new("dbus-send")
                .args([
                    &format!("--bus={}", d.bus),
                    "--print-reply",
                    "--dest=org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                ])
                .args(["org.freedesktop.DBus.NameHasOwner", "string:org.freedesktop.Notifications"])
                .output()
                .expect("dbus-send runs");
            if String::from_utf8_lossy(&out.stdout).contains("boolean true") {
                return Some(d);
            }
            assert!(std::time::Instant::now() < deadline, "dunst did not take org.freedesktop.Notifications");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// What `dbus-monitor` recorded so far.
    pub(crate) fn calls(&self) -> String {
        std::fs::read_to_string(&self.monitor_log).unwrap_or_default()
    }
}

impl Drop for Desktop {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
