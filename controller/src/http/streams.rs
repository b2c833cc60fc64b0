//! `GET /apis/ao.dev/v1alpha1/streams`: one WebSocket that carries all of a page's watches and
//! transcript follows (`aoctl_api::stream`), so a dashboard holds one connection to the server
//! instead of one per watch: browsers allow six per host over plain HTTP/1.1.
//!
//! The client sends one JSON request per text frame — `watch`, `log`, `cancel` — and the server
//! answers each subscription's events as `{"id", "event"}` (the watch endpoint's lines, made by
//! the same code, `watch::start`), `{"id", "log", "offset"}` (`sessions::follow`) and
//! `{"id", "error"}` (a `Status`; the subscription is not open). A request that does not decode
//! is answered with an error naming the field, and the stream goes on. Bounds: at most
//! [`MAX_SUBSCRIPTIONS`] open at once, requests of at most [`MAX_REQUEST`] bytes (a larger one
//! ends the connection), and at most [`QUEUE`] messages waiting for a client: one that reads
//! slower than its subscriptions write is closed with 1013 and a reason saying so, rather than
//! buffered without bound. The server closes with 1001 when it shuts down. Who may connect is
//! decided by `access::guard`, as for any request (the token or the dashboard's cookie, and an
//! `Origin` of the server's own).

use std::pin::Pin;
use std::time::Duration;

use aoctl_api::decode::decode_json;
use aoctl_api::stream::{StreamMessage, StreamRequest, MAX_REQUEST, MAX_SUBSCRIPTIONS};
use aoctl_api::Kind;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use futures::stream::SplitSink;
use futures::SinkExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt, StreamMap};

use super::params::Params;
use super::watch::{self, Open, WatchSpec};
use super::{AppError, AppState};

/// The most messages that wait for a client before it counts as too slow.
pub(super) const QUEUE: usize = 1024;
/// What one watch buffers before it waits for the stream to take its lines.
const WATCH_BUFFER: usize = 64;
/// What one transcript follow buffers.
const LOG_BUFFER: usize = 16;
/// The lines of a transcript a log subscription starts with, unless it says.
const TAIL_LINES: usize = 500;
/// How long one frame may take to reach the client before the client counts as gone.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the server waits for the client's answer to its close frame.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the server pings, so that a client gone without a word is noticed.
const PING_EVERY: Duration = Duration::from_secs(30);

/// One subscription's messages, each ready to send.
type Sub = Pin<Box<dyn Stream<Item = String> + Send>>;

pub(super) async fn streams(
    State(state): State<AppState>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, AppError> {
    let ws = ws?;
    Ok(ws
        .max_message_size(MAX_REQUEST)
        .max_frame_size(MAX_REQUEST)
        .on_failed_upgrade(|e| tracing::debug!(error = %e, "a stream's upgrade failed"))
        .on_upgrade(move |socket| serve(socket, state)))
}

/// Why the stream ends from the server's side: the close frame's code and reason.
type Closing = Option<(u16, String)>;

/// Serves one stream until the client goes, it reads too slowly or the server shuts down.
pub(super) async fn serve(socket: WebSocket, state: AppState) {
    let _open = Open::new(state.metrics.stream_sockets.clone());
    let (sink, mut incoming) = futures::StreamExt::split(socket);
    let (out, queued) = mpsc::channel::<Message>(QUEUE);
    let (close, closing) = oneshot::channel::<Option<CloseFrame>>();
    let writer = tokio::spawn(write(sink, queued, closing));
    let mut subs: StreamMap<u64, Sub> = StreamMap::new();
    let mut shutdown = state.shutdown.clone();
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
    let ending: Closing = loop {
        let sent = tokio::select! {
            msg = incoming.next() => match msg {
                Some(Ok(Message::Text(text))) => match handle(&state, &mut subs, text.as_str()).await {
                    Some(reply) => queue(&out, Message::Text(reply.into())),
                    None => Ok(()),
                },
                Some(Ok(Message::Binary(_))) => {
                    let e = AppError::BadRequest("requests are JSON text frames, not binary ones".into());
                    queue(&out, Message::Text(error(None, &e).into()))
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => Ok(()),
                // The client closed or went away (a request larger than MAX_REQUEST ends here too).
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => Err(None),
            },
            Some((_, text)) = subs.next(), if !subs.is_empty() => queue(&out, Message::Text(text.into())),
            _ = ping.tick() => queue(&out, Message::Ping(Default::default())),
            _ = async { shutdown.wait_for(|s| *s).await.map(|_| ()) } => {
                Err(Some((close_code::AWAY, "the server is shutting down".to_string())))
            }
        };
        if let Err(ending) = sent {
            break ending;
        }
    };
    // Dropping the subscriptions ends their watches and follows.
    drop(subs);
    let closed_by_us = ending.is_some();
    // Ours, or the answer to the client's close frame.
    let frame = ending.map(|(code, reason)| {
        tracing::debug!(code, %reason, "closing a stream");
        CloseFrame { code, reason: reason.into() }
    });
    let _ = close.send(frame);
    drop(out);
    let _ = writer.await;
    if closed_by_us {
        // Read the client's answer to the close frame, for a moment.
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, async { while let Some(Ok(_)) = incoming.next().await {} }).await;
    }
}

/// Puts a message in the client's queue: `Err` with the reason to close when the queue is full
/// (the client reads too slowly), `Err(None)` when the writer is gone (so is the client).
fn queue(out: &mpsc::Sender<Message>, msg: Message) -> Result<(), Closing> {
    match out.try_send(msg) {
        Ok(()) => Ok(()),
        Err(mpsc::error::TrySendError::Full(_)) => Err(Some((
            close_code::AGAIN,
            format!("the client reads too slowly: {QUEUE} messages wait unread; connect again"),
        ))),
        Err(mpsc::error::TrySendError::Closed(_)) => Err(None),
    }
}

/// Sends what is queued, in order, each within [`SEND_TIMEOUT`]; then, told by [`serve`], its
/// close frame at once, before anything still queued, or (`None`) the answer to the client's.
async fn write(
    mut sink: SplitSink<WebSocket, Message>,
    mut queued: mpsc::Receiver<Message>,
    mut closing: oneshot::Receiver<Option<CloseFrame>>,
) {
    loop {
        tokio::select! {
            biased;
            frame = &mut closing => return finish(sink, frame.ok().flatten()).await,
            msg = queued.recv() => match msg {
                Some(msg) => {
                    if !send(&mut sink, msg).await {
                        return;
                    }
                }
                None => return finish(sink, (&mut closing).await.ok().flatten()).await,
            },
        }
    }
}

/// Sends `frame`, or closes the sink (which answers a close frame the client sent).
async fn finish(mut sink: SplitSink<WebSocket, Message>, frame: Option<CloseFrame>) {
    match frame {
        Some(frame) => {
            send(&mut sink, Message::Close(Some(frame))).await;
        }
        None => {
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, sink.close()).await;
        }
    }
}

/// Sends one frame; `false` when the client is gone or takes longer than [`SEND_TIMEOUT`].
async fn send(sink: &mut SplitSink<WebSocket, Message>, msg: Message) -> bool {
    matches!(tokio::time::timeout(SEND_TIMEOUT, sink.send(msg)).await, Ok(Ok(())))
}

/// An error message about subscription `id`, ready to send.
fn error(id: Option<u64>, e: &AppError) -> String {
    serde_json::to_string(&StreamMessage::error(id, e.status())).expect("messages serialise")
}

/// Does what one request asks; the answer to send at once, if any (a refusal).
async fn handle(state: &AppState, subs: &mut StreamMap<u64, Sub>, text: &str) -> Option<String> {
    let req: StreamRequest = match decode_json(text.as_bytes()) {
        Ok(req) => req,
        Err(e) => {
            // Say which subscription the refusal is about when the request names one.
            let id = serde_json::from_str::<Value>(text).ok().and_then(|v| v.get("id").and_then(Value::as_u64));
            return Some(error(id, &AppError::Decode(e)));
        }
    };
    let id = req.id();
    if let StreamRequest::Cancel { .. } = req {
        subs.remove(&id);
        return None;
    }
    if subs.contains_key(&id) {
        let e = AppError::BadRequest(format!("id: {id} names an open subscription; cancel it first or use another id"));
        return Some(error(Some(id), &e));
    }
    if subs.len() >= MAX_SUBSCRIPTIONS {
        let e = AppError::BadRequest(format!(
            "id: a stream holds at most {MAX_SUBSCRIPTIONS} subscriptions at once; cancel one first"
        ));
        return Some(error(Some(id), &e));
    }
    let sub = match req {
        StreamRequest::Watch { plural, resource_version, label_selector, field_selector, .. } => {
            let params = Params { label_selector, field_selector, resource_version, ..Params::default() };
            subscribe_watch(state, id, &plural, params).await
        }
        StreamRequest::Log { session, offset, tail_lines, .. } => {
            subscribe_log(state, id, session, offset, tail_lines).await
        }
        StreamRequest::Cancel { .. } => unreachable!("answered above"),
    };
    match sub {
        Ok(sub) => {
            subs.insert(id, sub);
            None
        }
        Err(e) => Some(error(Some(id), &e)),
    }
}

/// A watch, as `GET …/{plural}?watch=true` with `params` starts it.
async fn subscribe_watch(state: &AppState, id: u64, plural: &str, params: Params) -> Result<Sub, AppError> {
    let Some(kind) = Kind::ALL.into_iter().find(|k| k.plural() == plural) else {
        let known: Vec<&str> = Kind::ALL.iter().map(|k| k.plural()).collect();
        return Err(AppError::BadRequest(format!(
            "plural: `{plural}` is no kind of this API; one of {}",
            known.join(", ")
        )));
    };
    let spec = WatchSpec {
        kind,
        selector: params.selector()?,
        fields: params.fields()?,
        from: watch::from_version(params.resource_version.as_deref())?,
        deadline: None,
    };
    let lines = watch::start(state, spec, WATCH_BUFFER).await?;
    // Each line is the watch endpoint's JSON, spliced in as it is.
    Ok(Box::pin(
        ReceiverStream::new(lines)
            .map(move |line| format!("{{\"id\":{id},\"event\":{}}}", String::from_utf8_lossy(&line))),
    ))
}

/// A transcript follow, from `offset` or its last `tail_lines` lines.
async fn subscribe_log(
    state: &AppState,
    id: u64,
    session: String,
    offset: Option<u64>,
    tail_lines: Option<usize>,
) -> Result<Sub, AppError> {
    let (text, end) =
        super::sessions::transcript_start(state, &session, offset, Some(tail_lines.unwrap_or(TAIL_LINES))).await?;
    let (tx, rx) = mpsc::channel(LOG_BUFFER);
    super::sessions::follow(state.clone(), session, end, tx);
    let say = |m: StreamMessage| serde_json::to_string(&m).expect("messages serialise");
    let first = tokio_stream::once(say(StreamMessage::log(id, text, end)));
    let rest = ReceiverStream::new(rx).map(move |piece| match piece {
        Ok((text, end)) => say(StreamMessage::log(id, text, end)),
        Err(e) => error(Some(id), &e),
    });
    Ok(Box::pin(first.chain(rest)))
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
    use tokio_tungstenite::tungstenite::Message as Client;

    use crate::serve::{serve_on, ServeOptions, StoreBackend};

    const TOKEN: &str = "stream-test-token";
    const WAIT: Duration = Duration::from_secs(20);

    type ClientSocket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

    /// A whole server on a free port, with a token of its own; its address, the sender that
    /// stops it, and the folder it keeps its data in.
    async fn server() -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token-file");
        std::fs::write(&token_file, TOKEN).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let opts = ServeOptions {
            listen: addr,
            data_dir: dir.path().join("data"),
            token_file: Some(token_file),
            allowed_hosts: vec![],
            store: StoreBackend::Sled,
            node: Some("test".into()),
            lease_ttl: Duration::from_secs(10),
            event_ttl: Duration::from_secs(3600),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            serve_on(listener, opts, async move {
                let _ = stopped.await;
            })
            .await
        });
        (addr, stop, dir)
    }

    async fn connect(addr: std::net::SocketAddr, headers: &[(&str, &str)]) -> Result<ClientSocket, String> {
        let request = || {
            let mut req = format!("ws://{addr}/apis/ao.dev/v1alpha1/streams").into_client_request().unwrap();
            for (k, v) in headers {
                let name = HeaderName::from_bytes(k.as_bytes()).unwrap();
                req.headers_mut().insert(name, HeaderValue::from_str(v).unwrap());
            }
            req
        };
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            match tokio_tungstenite::connect_async(request()).await {
                Ok((c, _)) => return Ok(c),
                Err(tokio_tungstenite::tungstenite::Error::Http(r)) => return Err(r.status().to_string()),
                // The server is still starting.
                Err(_) if tokio::time::Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    async fn signed_in(addr: std::net::SocketAddr) -> ClientSocket {
        connect(addr, &[("authorization", &format!("Bearer {TOKEN}"))]).await.expect("a stream")
    }

    async fn ask(c: &mut ClientSocket, req: Value) {
        futures::SinkExt::send(c, Client::text(req.to_string())).await.unwrap();
    }

    /// The next message that is an event (`events` true) or is none (an error, a log), skipping
    /// pings and the others.
    async fn next_of(c: &mut ClientSocket, events: bool) -> Value {
        loop {
            let m = tokio::time::timeout(WAIT, c.next()).await.expect("a message in time").expect("open").unwrap();
            let Client::Text(t) = m else { continue };
            let v: Value = serde_json::from_str(&t).unwrap();
            if v.get("event").is_some() == events && v["event"]["type"] != "BOOKMARK" {
                return v;
            }
        }
    }

    async fn next(c: &mut ClientSocket) -> Value {
        next_of(c, false).await
    }

    #[tokio::test]
    async fn watches_and_logs_share_one_socket_and_bad_requests_name_their_field() {
        let (addr, stop, _dir) = server().await;
        let mut c = signed_in(addr).await;
        ask(&mut c, json!({"op": "watch", "id": 1, "plural": "projects"})).await;
        // A project created now arrives as the watch endpoint's ADDED line.
        let http = reqwest::Client::new();
        let project = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": "p"},
            "spec": {"path": "/nonexistent/p"}});
        let r = http
            .post(format!("http://{addr}/apis/ao.dev/v1alpha1/projects"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(project.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        let m = next_of(&mut c, true).await;
        assert_eq!(m["id"], 1, "{m}");
        assert_eq!(m["event"]["type"], "ADDED", "{m}");
        let rv = m["event"]["object"]["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        assert_eq!(m["event"]["object"]["metadata"]["name"], "p", "{m}");

        // Bad requests: an error naming the field, and the stream goes on.
        ask(&mut c, json!({"op": "watch", "id": 2})).await;
        let m = next(&mut c).await;
        assert_eq!(m["id"], 2, "{m}");
        assert_eq!(m["error"]["code"], 400, "{m}");
        assert!(m["error"]["message"].as_str().unwrap().contains("plural"), "{m}");
        futures::SinkExt::send(&mut c, Client::text("not json")).await.unwrap();
        let m = next(&mut c).await;
        assert!(m.get("id").is_none() && m["error"]["code"] == 400, "{m}");
        ask(&mut c, json!({"op": "watch", "id": 3, "plural": "nope"})).await;
        let m = next(&mut c).await;
        assert!(m["error"]["message"].as_str().unwrap().starts_with("plural: `nope`"), "{m}");
        ask(&mut c, json!({"op": "watch", "id": 4, "plural": "sessions", "resourceVersion": "x"})).await;
        let m = next(&mut c).await;
        assert!(m["error"]["message"].as_str().unwrap().starts_with("resourceVersion: "), "{m}");
        ask(&mut c, json!({"op": "watch", "id": 1, "plural": "sessions"})).await;
        let m = next(&mut c).await;
        assert!(m["error"]["message"].as_str().unwrap().starts_with("id: 1 names an open subscription"), "{m}");
        ask(&mut c, json!({"op": "log", "id": 5, "session": "missing"})).await;
        let m = next(&mut c).await;
        assert_eq!((m["id"].clone(), m["error"]["code"].clone()), (json!(5), json!(404)), "{m}");

        // At most MAX_SUBSCRIPTIONS at once; a cancel makes room.
        for id in 100..(100 + MAX_SUBSCRIPTIONS as u64 - 1) {
            ask(&mut c, json!({"op": "watch", "id": id, "plural": "sessions", "resourceVersion": rv})).await;
        }
        ask(&mut c, json!({"op": "watch", "id": 999, "plural": "sessions", "resourceVersion": rv})).await;
        let m = next(&mut c).await;
        assert_eq!(m["id"], 999, "{m}");
        assert!(m["error"]["message"].as_str().unwrap().contains("at most 32 subscriptions"), "{m}");
        ask(&mut c, json!({"op": "cancel", "id": 1})).await;
        ask(&mut c, json!({"op": "watch", "id": 999, "plural": "sessions", "resourceVersion": rv})).await;
        ask(&mut c, json!({"op": "watch", "id": 1000, "plural": "sessions", "resourceVersion": rv})).await;
        let m = next(&mut c).await;
        assert_eq!(m["id"], 1000, "only the one past the bound is refused: {m}");

        // The server shutting down closes the stream with 1001.
        let _ = stop.send(());
        loop {
            let m = tokio::time::timeout(WAIT, c.next()).await.expect("a close in time");
            match m {
                Some(Ok(Client::Close(Some(f)))) => {
                    assert_eq!(u16::from(f.code), 1001);
                    assert_eq!(f.reason.as_str(), "the server is shutting down");
                    break;
                }
                Some(Ok(_)) => continue,
                other => panic!("expected a close frame, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_full_queue_closes_a_slow_client_with_a_reason_and_a_gone_one_quietly() {
        let (out, queued) = mpsc::channel(1);
        assert_eq!(queue(&out, Message::Text("a".into())), Ok(()));
        let Err(Some((code, reason))) = queue(&out, Message::Text("b".into())) else { panic!("a full queue") };
        assert_eq!(code, 1013);
        assert!(reason.starts_with("the client reads too slowly: 1024 messages wait unread"), "{reason}");
        assert!(reason.len() <= 123, "the reason fits in a close frame");
        drop(queued);
        assert_eq!(queue(&out, Message::Text("c".into())), Err(None));
    }

    #[tokio::test]
    async fn the_same_access_rules_as_every_request() {
        let (addr, _stop, _dir) = server().await;
        assert_eq!(connect(addr, &[]).await.err().as_deref(), Some("401 Unauthorized"));
        let bearer = format!("Bearer {TOKEN}");
        let foreign = connect(addr, &[("authorization", &bearer), ("origin", "http://evil.example")]).await;
        assert_eq!(foreign.err().as_deref(), Some("403 Forbidden"));
        let own = format!("http://{addr}");
        assert!(connect(addr, &[("authorization", &bearer), ("origin", &own)]).await.is_ok());
    }
}
