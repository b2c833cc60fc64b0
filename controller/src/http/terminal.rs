//! `GET …/sessions/{name}/terminal?cols=&rows=`: a person's terminal on a session's agent, over a
//! WebSocket (docs/sessions.md, "A session's terminal and its diff"). Before the upgrade, errors
//! are plain HTTP answers: 404 for no such session, 409 when no agent runs, 400 for a bad size or a
//! request that is no WebSocket handshake, and the runtime's own (503 when it has no terminal to
//! give). After it, binary frames carry the keys typed one way and the agent's terminal output the
//! other, and a text frame `{"resize": [cols, rows]}` resizes. The server closes with 1000 when the
//! agent's output ends, 1008 for any other text frame and 1001 when it shuts down; a client that
//! goes away ends the view, and the agent runs on. Who may connect is decided by `access::guard`,
//! as for any request.

use std::ops::RangeInclusive;
use std::time::Duration;

use aoctl_api::{Project, Session};
use aoctl_runtimes::{Probe, TerminalInput, TerminalView, TERMINAL_COLS, TERMINAL_ROWS};
use axum::extract::rejection::QueryRejection;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use prometheus::IntGauge;
use tokio::sync::watch;

use super::watch::Open;
use super::{AppError, AppState};
use crate::machine::{running_agent, Machine};

/// The columns and rows a terminal may have.
const SIZES: RangeInclusive<u16> = 2..=1000;
/// The largest message a client may send (a paste, say).
const MAX_MESSAGE: usize = 1 << 20;
/// How long one frame may take to reach the client before the client counts as gone.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the server waits for the client's answer to its close frame.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct TerminalParams {
    cols: Option<u32>,
    rows: Option<u32>,
}

/// A size from the query: within [`SIZES`], `default` when absent.
fn size(name: &str, given: Option<u32>, default: u16) -> Result<u16, AppError> {
    let v = given.unwrap_or(default.into());
    u16::try_from(v).ok().filter(|v| SIZES.contains(v)).ok_or_else(|| {
        AppError::BadRequest(format!(
            "{name}: {v} is not a terminal size: it must be {} to {}",
            SIZES.start(),
            SIZES.end()
        ))
    })
}

pub(super) async fn terminal(
    State(state): State<AppState>,
    Path(name): Path<String>,
    params: Result<Query<TerminalParams>, QueryRejection>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, AppError> {
    let Query(params) = params?;
    let cols = size("cols", params.cols, TERMINAL_COLS)?;
    let rows = size("rows", params.rows, TERMINAL_ROWS)?;
    let s: Session = state.store.get_typed(&name).await?;
    super::sessions::on_this_node(&state, &s)?;
    let running = running_agent(&s).map_err(|e| AppError::NotRunning(e.to_string()))?;
    let ws = ws?;
    let project: Option<Project> = state.store.get_typed(&s.spec.project).await.ok();
    let (rt, handle) = state.fleet.agent(&s, project.as_ref(), running).await?;
    let view = match rt.terminal(&handle, cols, rows).await {
        Ok(view) => view,
        // The status lags behind an agent that ended a moment ago.
        Err(_) if matches!(rt.probe(&handle).await, Ok(Probe::Exited(_) | Probe::Missing)) => {
            return Err(AppError::NotRunning(format!("session \"{name}\" has no running agent: it has just ended")));
        }
        Err(e) => return Err(e.into()),
    };
    let (shutdown, gauge) = (state.shutdown.clone(), state.metrics.terminal_streams.clone());
    let failed = name.clone();
    Ok(ws
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        .on_failed_upgrade(move |e| tracing::debug!(session = %failed, error = %e, "a terminal's upgrade failed"))
        .on_upgrade(move |socket| async move {
            tracing::debug!(session = %name, cols, rows, "terminal opened");
            pump(socket, view, shutdown, gauge).await;
            tracing::debug!(session = %name, "terminal closed");
        }))
}

/// Carries a terminal's bytes both ways until the agent's output ends, the client goes, the
/// client breaks the protocol or the server shuts down; dropping the view then ends it.
async fn pump(mut socket: WebSocket, view: TerminalView, mut shutdown: watch::Receiver<bool>, gauge: IntGauge) {
    let _open = Open::new(gauge);
    let TerminalView { mut output, input } = view;
    loop {
        tokio::select! {
            out = output.recv() => match out {
                Some(bytes) => {
                    if !send(&mut socket, Message::Binary(bytes.into())).await {
                        return;
                    }
                }
                None => return close(socket, close_code::NORMAL, "the agent ended").await,
            },
            msg = socket.recv() => match msg {
                // A view that ended drops what is typed; its output ends next.
                Some(Ok(Message::Binary(keys))) => {
                    let _ = input.send(TerminalInput::Bytes(keys.to_vec())).await;
                }
                Some(Ok(Message::Text(text))) => match resize(&text) {
                    Ok((cols, rows)) => {
                        let _ = input.send(TerminalInput::Resize { cols, rows }).await;
                    }
                    Err(reason) => return close(socket, close_code::POLICY, &reason.to_string()).await,
                },
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                // The client closed: reading on sends the answer to its close frame.
                Some(Ok(Message::Close(_))) => return drain(socket).await,
                None | Some(Err(_)) => return,
            },
            _ = async { shutdown.wait_for(|s| *s).await.map(|_| ()) } => {
                return close(socket, close_code::AWAY, "the server is shutting down").await;
            }
        }
    }
}

/// Sends one frame; `false` when the client is gone or takes longer than [`SEND_TIMEOUT`].
async fn send(socket: &mut WebSocket, msg: Message) -> bool {
    matches!(tokio::time::timeout(SEND_TIMEOUT, socket.send(msg)).await, Ok(Ok(())))
}

/// Closes with `code` and `reason`, then waits a moment for the client's answer.
async fn close(mut socket: WebSocket, code: u16, reason: &str) {
    let frame = CloseFrame { code, reason: reason.into() };
    if send(&mut socket, Message::Close(Some(frame))).await {
        drain(socket).await;
    }
}

/// Reads what the client still sends after a close frame, for at most [`CLOSE_TIMEOUT`].
async fn drain(mut socket: WebSocket) {
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, async { while let Some(Ok(_)) = socket.recv().await {} }).await;
}

/// A text frame that is not a resize: the reason the socket is closed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum BadFrame {
    #[error(r#"text frames are {{"resize": [cols, rows]}}; keys go in binary frames"#)]
    NotResize,
    #[error("resize: {cols}x{rows} is not a terminal size: each must be {} to {}", SIZES.start(), SIZES.end())]
    Size { cols: u32, rows: u32 },
}

/// The only text frame there is: `{"resize": [cols, rows]}`; otherwise the reason to close.
fn resize(text: &str) -> Result<(u16, u16), BadFrame> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Resize {
        resize: (u32, u32),
    }
    let Ok(Resize { resize: (cols, rows) }) = serde_json::from_str::<Resize>(text) else {
        return Err(BadFrame::NotResize);
    };
    let fits = |v: u32| u16::try_from(v).ok().filter(|v| SIZES.contains(v));
    match (fits(cols), fits(rows)) {
        (Some(c), Some(r)) => Ok((c, r)),
        _ => Err(BadFrame::Size { cols, rows }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use futures::{SinkExt, StreamExt};
    use tokio::sync::mpsc;
    use tokio_tungstenite::tungstenite::Message as Client;

    #[test]
    fn sizes_are_bounded() {
        assert_eq!(size("cols", None, 200).unwrap(), 200);
        assert_eq!(size("cols", Some(2), 200).unwrap(), 2);
        assert_eq!(size("rows", Some(1000), 50).unwrap(), 1000);
        for bad in [0, 1, 1001, 70_000] {
            let e = size("rows", Some(bad), 50).unwrap_err();
            assert_eq!(e.code(), 400);
            assert_eq!(e.to_string(), format!("rows: {bad} is not a terminal size: it must be 2 to 1000"));
        }
    }

    #[test]
    fn the_only_text_frame_is_a_resize() {
        assert_eq!(resize(r#"{"resize":[120,40]}"#), Ok((120, 40)));
        assert_eq!(resize(r#" { "resize" : [2, 1000] } "#), Ok((2, 1000)));
        for bad in [r#"{"resize":[1,40]}"#, r#"{"resize":[120,1001]}"#, r#"{"resize":[70000,40]}"#] {
            assert!(resize(bad).unwrap_err().to_string().starts_with("resize: "), "{bad}");
        }
        for bad in ["ls\r", r#"{"resize":[80]}"#, r#"{"resize":[80,24],"x":1}"#, r#"{"resize":[-1,24]}"#, "{}"] {
            assert!(resize(bad).unwrap_err().to_string().starts_with("text frames are "), "{bad}");
        }
        // Every reason fits in a close frame (123 bytes).
        assert!(resize("x").unwrap_err().to_string().len() <= 123);
        assert!(resize(r#"{"resize":[4294967295,4294967295]}"#).unwrap_err().to_string().len() <= 123);
    }

    /// The far ends of a terminal view, as a runtime holds them.
    struct Agent {
        output: mpsc::Sender<Vec<u8>>,
        input: mpsc::Receiver<TerminalInput>,
    }

    type ClientSocket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

    /// A server on a free port whose one route pumps a fresh view; the client connected to it,
    /// the agent's ends of the view, the shutdown sender and the gauge.
    async fn connect() -> (ClientSocket, Agent, watch::Sender<bool>, IntGauge) {
        let (out_tx, out_rx) = mpsc::channel(16);
        let (in_tx, in_rx) = mpsc::channel(16);
        let view = std::sync::Arc::new(parking_lot::Mutex::new(Some(TerminalView { output: out_rx, input: in_tx })));
        let (stop_tx, stop_rx) = watch::channel(false);
        let gauge = IntGauge::new("terminals", "open terminals").unwrap();
        let g = gauge.clone();
        let app = axum::Router::new().route(
            "/t",
            axum::routing::get(move |ws: WebSocketUpgrade| {
                let view = view.lock().take().expect("one connection");
                let (stop, g) = (stop_rx.clone(), g.clone());
                async move { ws.on_upgrade(move |s| pump(s, view, stop, g)) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let (client, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/t")).await.unwrap();
        (client, Agent { output: out_tx, input: in_rx }, stop_tx, gauge)
    }

    const WAIT: Duration = Duration::from_secs(10);

    async fn next(client: &mut ClientSocket) -> Option<Client> {
        tokio::time::timeout(WAIT, client.next()).await.expect("a frame in time").map(|m| m.expect("a frame"))
    }

    async fn typed(input: &mut mpsc::Receiver<TerminalInput>) -> Option<TerminalInput> {
        tokio::time::timeout(WAIT, input.recv()).await.expect("input in time")
    }

    /// The close frame's code and reason, once the client reads it and the closing handshake ends.
    async fn closed(client: &mut ClientSocket) -> (u16, String) {
        loop {
            match next(client).await {
                Some(Client::Close(Some(f))) => {
                    // Reading on answers the close frame; then the stream ends.
                    assert!(next(client).await.is_none(), "nothing after the close frame");
                    return (f.code.into(), f.reason.to_string());
                }
                Some(Client::Binary(_)) => continue,
                other => panic!("expected a close frame, got {other:?}"),
            }
        }
    }

    async fn gauge_is(gauge: &IntGauge, want: i64) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while gauge.get() != want {
            assert!(tokio::time::Instant::now() < deadline, "the gauge stays at {}, not {want}", gauge.get());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn bytes_go_both_ways_and_the_agents_end_closes_normally() {
        let (mut client, mut agent, _stop, gauge) = connect().await;
        gauge_is(&gauge, 1).await;
        agent.output.send(b"\x1b[2Jhello> ".to_vec()).await.unwrap();
        assert_eq!(next(&mut client).await, Some(Client::Binary(b"\x1b[2Jhello> ".to_vec().into())));
        client.send(Client::Binary(b"ls\r".to_vec().into())).await.unwrap();
        assert_eq!(typed(&mut agent.input).await, Some(TerminalInput::Bytes(b"ls\r".to_vec())));
        client.send(Client::text(r#"{"resize":[100,30]}"#)).await.unwrap();
        assert_eq!(typed(&mut agent.input).await, Some(TerminalInput::Resize { cols: 100, rows: 30 }));
        drop(agent.output);
        assert_eq!(closed(&mut client).await, (1000, "the agent ended".to_string()));
        assert_eq!(typed(&mut agent.input).await, None, "the view is dropped");
        gauge_is(&gauge, 0).await;
    }

    #[tokio::test]
    async fn another_text_frame_breaks_the_protocol() {
        let (mut client, mut agent, _stop, gauge) = connect().await;
        client.send(Client::text("ls\r")).await.unwrap();
        let (code, reason) = closed(&mut client).await;
        assert_eq!(code, 1008);
        assert!(reason.starts_with("text frames are "), "{reason}");
        assert_eq!(typed(&mut agent.input).await, None, "nothing typed, and the view is dropped");
        gauge_is(&gauge, 0).await;
    }

    #[tokio::test]
    async fn a_client_that_goes_drops_the_view() {
        let (mut client, mut agent, _stop, gauge) = connect().await;
        client.close(None).await.unwrap();
        assert_eq!(typed(&mut agent.input).await, None);
        assert!(agent.output.is_closed());
        gauge_is(&gauge, 0).await;
    }

    #[tokio::test]
    async fn shutting_down_closes_open_terminals() {
        let (mut client, mut agent, stop, gauge) = connect().await;
        gauge_is(&gauge, 1).await;
        stop.send(true).unwrap();
        assert_eq!(closed(&mut client).await, (1001, "the server is shutting down".to_string()));
        assert_eq!(typed(&mut agent.input).await, None);
        gauge_is(&gauge, 0).await;
    }
}
