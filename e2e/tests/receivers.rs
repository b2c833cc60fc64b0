//! A real HTTP receiver for the notifiers (webhook, Slack, Discord): an axum server on
//! 127.0.0.1:0 that records every request — path, `Idempotency-Key` header, JSON body and the
//! status it was answered with — and answers as the test says: 200, 503, or not at all until told
//! (a request held open while the controller that sent it is killed).

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use serde_json::Value;
use tokio::sync::watch;

/// How the receiver answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Ok,
    Fail,
    /// Requests wait unanswered until the mode changes; then they get 503 (their sender is gone).
    Hold,
}

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Hit {
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

pub struct Receiver {
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
        let mut hits = sh.hits.lock().unwrap();
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
    };
    sh.hits.lock().unwrap()[i].answered = code.as_u16();
    code
}

impl Receiver {
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the receiver");
        let base = format!("http://{}", listener.local_addr().expect("receiver address"));
        let shared = Shared { hits: Arc::new(Mutex::new(vec![])), mode: watch::channel(Mode::Ok).0 };
        let app = axum::Router::new().fallback(axum::routing::post(record)).with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { base, shared, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn set(&self, mode: Mode) {
        self.shared.mode.send_replace(mode);
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.shared.hits.lock().unwrap().clone()
    }

    /// The requests to `path` answered with a 2xx: the deliveries the receiver acknowledged.
    pub fn acked(&self, path: &str) -> Vec<Hit> {
        self.hits().into_iter().filter(|h| h.path == path && (200..300).contains(&h.answered)).collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
