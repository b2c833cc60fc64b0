//! NDJSON watch streams: `ADDED`/`MODIFIED`/`DELETED` in resourceVersion order, periodic
//! `BOOKMARK`s, and an `ERROR` with a 410 `Status` when the requested version is gone. `start` makes
//! the events, for this endpoint and for the watches of the multiplexed streams (`streams.rs`).

use std::time::Duration;

use aoctl_api::selector::{FieldSelector, Selector};
use aoctl_api::wire::{Bookmark, WatchEventType, WatchLine};
use aoctl_api::Kind;
use aoctl_store::{EventKind, StoreError};
use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

use super::params::Params;
use super::{AppError, AppState};

/// How often an idle watch reports how far it has got.
const BOOKMARK_EVERY: Duration = Duration::from_secs(5);

/// One event as the watch endpoint writes it, without its newline.
fn line<T: serde::Serialize>(type_: WatchEventType, object: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(&WatchLine { type_, object }).expect("values serialise"))
}

/// The version a watch starts after: `None` (from a list of the current objects) when absent,
/// empty or `0`.
pub(super) fn from_version(rv: Option<&str>) -> Result<Option<u64>, AppError> {
    match rv {
        None | Some("") | Some("0") => Ok(None),
        Some(rv) => rv.parse::<u64>().map(Some).map_err(|_| {
            AppError::BadRequest(format!("resourceVersion: `{rv}` is not a resource version from this server"))
        }),
    }
}

/// What one watch follows.
pub(super) struct WatchSpec {
    pub kind: Kind,
    pub selector: Selector,
    pub fields: FieldSelector,
    /// The version to start after; `None` starts with the current objects as `ADDED` events.
    pub from: Option<u64>,
    pub deadline: Option<tokio::time::Instant>,
}

/// Starts a watch: its events, each one line of JSON (`WatchLine`, no newline), in a channel of
/// `capacity` lines that the watch waits on when it is full (its reader is slow), until the store
/// ends it (an `ERROR` line with a 410 `Status`: it fell too far behind), the deadline passes, the
/// server shuts down or the receiver is dropped. Shared by the NDJSON endpoint and the
/// multiplexed streams (`streams.rs`).
pub(super) async fn start(
    state: &AppState,
    spec: WatchSpec,
    capacity: usize,
) -> Result<mpsc::Receiver<Bytes>, AppError> {
    let WatchSpec { kind, selector, fields, from, deadline } = spec;
    // Without a version, the stream starts with the current objects as ADDED events.
    let (initial, from) = match from {
        Some(rv) => (vec![], rv),
        None => state.store.list(kind, &selector).await?,
    };
    let (tx, rx) = mpsc::channel::<Bytes>(capacity);
    let watch = state.store.watch(&[kind], from);
    let gauge = state.metrics.watch_streams.clone();
    let mut shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        let _open = Open::new(gauge);
        for obj in initial.iter().filter(|o| fields.matches(o)) {
            if tx.send(line(WatchEventType::Added, obj)).await.is_err() {
                return;
            }
        }
        let mut watch = match watch {
            Ok(w) => w,
            Err(e) => {
                let _ = tx.send(line(WatchEventType::Error, &AppError::Store(e).status())).await;
                return;
            }
        };
        let mut last = from;
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY);
        loop {
            let until_deadline = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ev = watch.next() => {
                    let Some(ev) = ev else {
                        // The store ended the stream: it fell too far behind (410, re-list) or is closing.
                        let e = watch.error().cloned().unwrap_or(StoreError::Gone { from: last, oldest: last + 1 });
                        let _ = tx.send(line(WatchEventType::Error, &AppError::Store(e).status())).await;
                        return;
                    };
                    last = ev.rv;
                    if !selector.matches_object(&ev.object) || !fields.matches(&ev.object) {
                        continue;
                    }
                    let type_ = match ev.kind_ {
                        EventKind::Added => WatchEventType::Added,
                        EventKind::Modified => WatchEventType::Modified,
                        EventKind::Deleted => WatchEventType::Deleted,
                    };
                    if tx.send(line(type_, &*ev.object)).await.is_err() {
                        return;
                    }
                }
                _ = tick.tick() => {
                    if tx.send(line(WatchEventType::Bookmark, &Bookmark::new(kind, last))).await.is_err() {
                        return;
                    }
                }
                _ = tx.closed() => return,
                _ = async { shutdown.wait_for(|s| *s).await.map(|_| ()) } => return,
                _ = until_deadline => return,
            }
        }
    });
    Ok(rx)
}

/// `GET …/{plural}?watch=true`: the events of [`start`] as newline-delimited JSON.
pub(super) async fn stream(state: AppState, kind: Kind, params: Params) -> Result<Response, AppError> {
    let spec = WatchSpec {
        kind,
        selector: params.selector()?,
        fields: params.fields()?,
        from: from_version(params.resource_version.as_deref())?,
        deadline: params.timeout_seconds.map(|s| tokio::time::Instant::now() + Duration::from_secs(s)),
    };
    let rx = start(&state, spec, 256).await?;
    let lines = ReceiverStream::new(rx).map(|l| {
        let mut v = Vec::with_capacity(l.len() + 1);
        v.extend_from_slice(&l);
        v.push(b'\n');
        Ok::<_, std::io::Error>(Bytes::from(v))
    });
    Ok(([(header::CONTENT_TYPE, "application/json; stream=watch")], Body::from_stream(lines)).into_response())
}

/// Counts an open stream in a gauge (`aoctl_watch_streams`, `aoctl_terminal_streams`) for as long
/// as it lives.
pub(super) struct Open(prometheus::IntGauge);

impl Open {
    pub(super) fn new(gauge: prometheus::IntGauge) -> Open {
        gauge.inc();
        Open(gauge)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.dec();
    }
}
