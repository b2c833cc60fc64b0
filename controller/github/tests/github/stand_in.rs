//! A GitHub stand-in on 127.0.0.1:0: canned answers per route, GitHub's rate-limit headers,
//! conditional requests (`If-None-Match` → 304, without the body or `Link`), and a log of what it
//! was sent.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use parking_lot::Mutex;
use serde_json::Value;

/// One canned answer.
#[derive(Clone, Debug)]
pub(crate) struct Canned {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub delay: Duration,
}

impl Canned {
    pub(crate) fn json(status: u16, body: &Value) -> Canned {
        Canned {
            status,
            headers: vec![("content-type".into(), "application/json; charset=utf-8".into())],
            body: serde_json::to_vec(body).unwrap(),
            delay: Duration::ZERO,
        }
    }

    pub(crate) fn text(status: u16, body: &str) -> Canned {
        Canned {
            status,
            headers: vec![("content-type".into(), "text/plain".into())],
            body: body.as_bytes().to_vec(),
            delay: Duration::ZERO,
        }
    }

    pub(crate) fn header(mut self, name: &str, value: impl ToString) -> Canned {
        self.headers.push((name.to_ascii_lowercase(), value.to_string()));
        self
    }

    pub(crate) fn delay(mut self, delay: Duration) -> Canned {
        self.delay = delay;
        self
    }
}

/// One request the stand-in received.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

struct Route {
    method: String,
    /// A path, or a path with `?query` that must match exactly.
    target: String,
    /// Answers in turn; the last one repeats.
    answers: VecDeque<Canned>,
}

#[derive(Default)]
struct Inner {
    routes: Vec<Route>,
    seen: Vec<Seen>,
    remaining: u64,
}

/// A running stand-in; it stops when the test's runtime ends.
#[derive(Clone)]
pub(crate) struct StandIn {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
}

/// `X-RateLimit-Reset` of every answer: an hour from the start of the test.
pub(crate) fn reset_epoch() -> i64 {
    use std::sync::OnceLock;
    static RESET: OnceLock<i64> = OnceLock::new();
    *RESET.get_or_init(|| chrono::Utc::now().timestamp() + 3600)
}

impl StandIn {
    pub(crate) async fn start() -> StandIn {
        let inner = Arc::new(Mutex::new(Inner { remaining: 5000, ..Inner::default() }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().fallback(answer).with_state(inner.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        StandIn { addr, inner }
    }

    /// The base URL, as a project's `spec.github.apiUrl` would name it.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answers `method target` with `answers` in turn, the last one from then on.
    pub(crate) fn route(&self, method: &str, target: &str, answers: Vec<Canned>) -> &StandIn {
        let mut inner = self.inner.lock();
        inner.routes.retain(|r| !(r.method == method && r.target == target));
        inner.routes.push(Route { method: method.into(), target: target.into(), answers: answers.into() });
        self
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.inner.lock().seen.clone()
    }

    /// The rate limit left, as the stand-in counts it (304s are free, as on GitHub).
    pub(crate) fn remaining(&self) -> u64 {
        self.inner.lock().remaining
    }
}

async fn answer(State(inner): State<Arc<Mutex<Inner>>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = to_bytes(body, 1 << 20).await.unwrap().to_vec();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    let method = parts.method.to_string();
    let canned = {
        let mut inner = inner.lock();
        inner.seen.push(Seen {
            method: method.clone(),
            path: path.clone(),
            query: query.clone(),
            headers: parts.headers.clone(),
            body,
        });
        let with_query = format!("{path}?{query}");
        let index = inner
            .routes
            .iter()
            .position(|r| r.method == method && r.target == with_query)
            .or_else(|| inner.routes.iter().position(|r| r.method == method && r.target == path));
        let found = index.map(|i| &mut inner.routes[i]);
        match found {
            Some(r) if r.answers.len() > 1 => r.answers.pop_front(),
            Some(r) => r.answers.front().cloned(),
            None => None,
        }
    };
    let canned = canned.unwrap_or_else(|| {
        Canned::json(
            404,
            &serde_json::json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}),
        )
    });
    if !canned.delay.is_zero() {
        tokio::time::sleep(canned.delay).await;
    }
    let etag = canned.headers.iter().find(|(k, _)| k == "etag").map(|(_, v)| v.clone());
    let if_none_match = parts.headers.get("if-none-match").and_then(|v| v.to_str().ok());
    let not_modified = etag.is_some() && etag.as_deref() == if_none_match;
    let remaining = {
        let mut inner = inner.lock();
        if !not_modified {
            inner.remaining = inner.remaining.saturating_sub(1);
        }
        inner.remaining
    };
    let mut headers = HeaderMap::new();
    headers.insert("x-ratelimit-limit", HeaderValue::from_static("5000"));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(remaining));
    headers.insert("x-ratelimit-reset", HeaderValue::from(reset_epoch()));
    headers.insert("x-ratelimit-resource", HeaderValue::from_static("core"));
    for (k, v) in &canned.headers {
        headers.insert(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
    }
    if not_modified {
        // Like the end-to-end GitHub stand-in, a 304 repeats neither the body nor the `Link`.
        headers.remove("content-type");
        headers.remove("link");
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    (StatusCode::from_u16(canned.status).unwrap(), headers, Body::from(canned.body)).into_response()
}
