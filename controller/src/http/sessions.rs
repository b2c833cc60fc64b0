//! Session subresources: `POST …/sessions/{name}/input` answers what
//! [`input::send_or_queue`] did: 200 when the message was typed into the agent and its delivery
//! verified, 202 when it was queued durably (the agent has not had its first prompt yet, or
//! messages wait before it; the session's reconcile types them in order), 409 when the session
//! will not run or is rate-limited (nothing is typed until its limit resets). Only the leading
//! replica types: another one of its node queues the message for it and waits (up to
//! [`LEADER_DELIVERY`]) for one that may be typed now, so its answer is the same; a replica of
//! another node than the leader's refuses with 409, naming the leader's node, unless the
//! session's runtime lives on its own node (then the message waits for a replica of that node
//! to lead);
//! `GET …/sessions/{name}/log` returns (and with `follow=true` streams) its transcript as text;
//! `GET …/sessions/{name}/diff` returns its work (commits, changes not committed, untracked
//! files) against where its branch left its base, as a unified diff; 409 before it has a
//! workspace. (`…/terminal` is in `terminal`.)

use std::time::Duration;

use aoctl_api::decode::decode_json;
use aoctl_api::wire::{AnswerRequest, InputRequest, Status};
use aoctl_api::{Project, Session};
use aoctl_git::workspace::{WorkspaceError, DIFF_LIMIT};
use aoctl_runtimes::transcript;
use aoctl_store::StoreError;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

use super::{AppError, AppState};
use crate::input::{self, SendError, Sent, Typist, Waits};
use crate::machine::base_ref_of;
use crate::typing::TypingError;

/// How often a followed log looks for new output.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// How long a replica that does not lead waits for the leader to type a message it queued.
pub(super) const LEADER_DELIVERY: Duration = Duration::from_secs(15);

pub(super) async fn input(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, AppError> {
    let req: InputRequest = decode_json(&body).map_err(AppError::Decode)?;
    if req.text.trim().is_empty() {
        return Err(AppError::BadRequest("text: must not be empty".into()));
    }
    delivered(send(&state, &name, &req.text).await?)
}

/// Refuses what would reach a session's runtime or its files from a server of another node than
/// the one its runtime lives on (see `reconcilers::session::node`): this server's tmux, processes
/// and session files are not that node's.
pub(super) fn on_this_node(state: &AppState, s: &Session) -> Result<(), AppError> {
    match s.status.runtime.as_ref().and_then(|r| r.node.as_deref().map(|n| (r.kind, n))) {
        Some((kind, node)) if node != state.node => Err(AppError::Conflict(format!(
            "session \"{}\"'s {kind} runtime lives on node \"{node}\", and this server runs on node \"{}\": ask a server of node \"{node}\"",
            s.metadata.name, state.node
        ))),
        _ => Ok(()),
    }
}

/// Who types into session `s` (`None`: not found yet): this replica when it leads; else the
/// leader, when it is of this node (it shares the inbox); else nobody yet, for a session whose
/// runtime lives on this node. A session the leader of another node drives is refused.
async fn typist(state: &AppState, s: Option<&Session>) -> Result<Typist, AppError> {
    if state.leadership.leads() {
        return Ok(Typist::Here);
    }
    let leader = match state.leadership.leader_node().await {
        Ok(Some(node)) if node != state.node => node,
        // This node's, or none now (an election is on), or unknown (etcd does not answer): the
        // next leader of this node types it.
        _ => return Ok(Typist::Leader { bound: LEADER_DELIVERY }),
    };
    let runtime_node = s.and_then(|s| s.status.runtime.as_ref()).and_then(|r| r.node.as_deref());
    if runtime_node == Some(state.node.as_str()) {
        return Ok(Typist::None);
    }
    Err(AppError::Conflict(format!(
        "input to session \"{name}\" is typed by the leading replica, of node \"{leader}\", and this server runs on \
         node \"{node}\", whose inbox it does not read: ask a server of node \"{leader}\"",
        name = s.map_or("", |s| s.metadata.name.as_str()),
        node = state.node,
    )))
}

/// What [`input::send_or_queue`] did with `text` for session `name`, worded, with its code.
async fn send(state: &AppState, name: &str, text: &str) -> Result<(u16, String), AppError> {
    let found = state.store.get_typed::<Session>(name).await.ok();
    if let Some(s) = &found {
        on_this_node(state, s)?;
    }
    let typist = typist(state, found.as_ref()).await?;
    let sent = input::send_or_queue(&state.store, &*state.fleet, &state.metrics, &state.sessions, name, text, typist);
    let chars = text.chars().count();
    match sent.await {
        Ok(Sent::Delivered) => Ok((200, format!("delivered {chars} characters to session \"{name}\""))),
        Ok(Sent::Queued { seq, ahead, prompt_done, waits }) => {
            let after = match waits {
                Waits::NoLeader => format!("once a replica of node \"{}\" leads", state.node),
                Waits::Leader => {
                    format!("by the leading replica, which had not typed it within {}s", LEADER_DELIVERY.as_secs())
                }
                Waits::Turn if prompt_done => format!("after the {ahead} message(s) queued before it"),
                Waits::Turn => "once the agent has its first prompt".to_string(),
            };
            Ok((202, format!("queued {chars} characters for session \"{name}\" as message {seq}: it is typed {after}")))
        }
        Err(e @ (SendError::RateLimited { .. } | SendError::WillNotRun { .. })) => {
            Err(AppError::NotRunning(e.to_string()))
        }
        Err(SendError::Store(e)) => Err(e.into()),
        Err(SendError::Typing(TypingError::Runtime(e))) => Err(e.into()),
        Err(SendError::Typing(e)) => Err(AppError::Internal(e.to_string())),
    }
}

/// Types `text` into session `name` through the delivery of `aoctl send`: what was done, worded.
pub(super) async fn deliver(state: &AppState, name: &str, text: &str) -> Result<String, AppError> {
    send(state, name, text).await.map(|(_, m)| m)
}

fn delivered((code, message): (u16, String)) -> Result<Response, AppError> {
    if code == 200 {
        return Ok(Json(Status::success(200, message)).into_response());
    }
    let body = Status { reason: "Accepted".into(), ..Status::success(202, message) };
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// `POST …/sessions/{name}/answer`: a person's answer to the question the agent asked
/// (`ask_human`), typed into the agent like `aoctl send`; then the question is cleared (the
/// status written with its resourceVersion as precondition) and `needs-input` ends. 409 when no
/// question waits.
pub(super) async fn answer(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, AppError> {
    let req: AnswerRequest = decode_json(&body).map_err(AppError::Decode)?;
    if req.text.trim().is_empty() {
        return Err(AppError::BadRequest("text: must not be empty".into()));
    }
    let s: Session = state.store.get_typed(&name).await?;
    let Some(question) = s.status.agent.as_ref().and_then(|a| a.question.clone()) else {
        return Err(AppError::Conflict(format!("session \"{name}\" has no question waiting for an answer")));
    };
    let sent = send(&state, &name, &req.text).await?;
    for _ in 0..8 {
        let mut s: Session = state.store.get_typed(&name).await?;
        let Some(a) = s.status.agent.as_mut().filter(|a| a.question.as_ref() == Some(&question)) else { break };
        a.question = None;
        match state.store.update_status_typed(&s).await {
            Ok(_) => break,
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    state
        .recorder
        .publish(&s, aoctl_api::EventType::Normal, "Answered", &format!("{}: {}", question.text, req.text))
        .await;
    state.sessions.trigger(&name);
    delivered(sent)
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LogParams {
    tail_lines: Option<usize>,
    follow: Option<bool>,
}

pub(super) async fn log(
    State(state): State<AppState>,
    Path(name): Path<String>,
    params: Result<Query<LogParams>, QueryRejection>,
) -> Result<Response, AppError> {
    let Query(params) = params?;
    let (text, offset) = transcript_start(&state, &name, None, params.tail_lines).await?;
    let headers = [(header::CONTENT_TYPE, "text/plain; charset=utf-8")];
    if !params.follow.unwrap_or(false) {
        return Ok((headers, text).into_response());
    }
    let (tx, rx) = mpsc::channel(64);
    follow(state, name, offset, tx);
    let first = tokio_stream::once(Ok::<_, std::io::Error>(Bytes::from(text)));
    // A follow ends (the session is gone, the server shuts down) by ending the body.
    let rest = ReceiverStream::new(rx).map_while(|piece| piece.ok().map(|(text, _)| Ok(Bytes::from(text))));
    Ok((headers, Body::from_stream(first.chain(rest))).into_response())
}

/// Where showing session `name`'s transcript starts: with `from`, the text written after that
/// offset; without, its last `tail_lines` lines (all it keeps when `None`) as the agent's terminal
/// shows them, so a text UI that redraws in place reads once. Then the offset to follow it from.
/// The session must exist and run on this node; its transcript may not exist yet.
pub(super) async fn transcript_start(
    state: &AppState,
    name: &str,
    from: Option<u64>,
    tail_lines: Option<usize>,
) -> Result<(String, u64), AppError> {
    let s: Session = state.store.get_typed(name).await?;
    on_this_node(state, &s)?;
    let path = state.fleet.transcript(name);
    let p = path.clone();
    let (rows, cols) = (aoctl_runtimes::TERMINAL_ROWS, aoctl_runtimes::TERMINAL_COLS);
    tokio::task::spawn_blocking(move || match from {
        None => transcript::tail_rendered(&p, tail_lines, rows, cols),
        Some(offset) => transcript::read_from(&p, offset).map(|(bytes, end)| (transcript::to_text(&bytes), end)),
    })
    .await
    .map_err(|e| AppError::Internal(e.to_string()))?
    .map_err(|e| AppError::Internal(format!("{}: {e}", path.display())))
}

/// Follows session `name`'s transcript from `offset`: each new piece, as text, with the offset
/// after it, until `tx`'s receiver goes or the server shuts down; when the session is gone (or
/// its transcript cannot be read), that error, and the follow ends. Waits on a full channel.
/// Shared by `…/log?follow=true` and the log subscriptions of the multiplexed streams.
pub(super) fn follow(
    state: AppState,
    name: String,
    mut offset: u64,
    tx: mpsc::Sender<Result<(String, u64), AppError>>,
) {
    let path = state.fleet.transcript(&name);
    let mut shutdown = state.shutdown.clone();
    let gauge = state.metrics.log_follows.clone();
    tokio::spawn(async move {
        let _open = super::watch::Open::new(gauge);
        let mut tick = tokio::time::interval(FOLLOW_POLL);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = tx.closed() => return,
                _ = async { shutdown.wait_for(|s| *s).await.map(|_| ()) } => return,
            }
            let p = path.clone();
            let read = tokio::task::spawn_blocking(move || transcript::read_from(&p, offset)).await;
            let (bytes, end) = match read {
                Ok(Ok(read)) => read,
                Ok(Err(e)) => {
                    let _ = tx.send(Err(AppError::Internal(format!("{}: {e}", path.display())))).await;
                    return;
                }
                Err(e) => {
                    let _ = tx.send(Err(AppError::Internal(e.to_string()))).await;
                    return;
                }
            };
            offset = end;
            if bytes.is_empty() {
                if let Err(e) = state.store.get_typed::<Session>(&name).await {
                    let _ = tx.send(Err(e.into())).await;
                    return;
                }
                continue;
            }
            if tx.send(Ok((transcript::to_text(&bytes), end))).await.is_err() {
                return;
            }
        }
    });
}

pub(super) async fn diff(State(state): State<AppState>, Path(name): Path<String>) -> Result<Response, AppError> {
    let patch = diff_patch(&state, &name).await?;
    Ok(([(header::CONTENT_TYPE, "text/x-diff; charset=utf-8")], patch).into_response())
}

/// Session `name`'s work against its merge base with its base branch, as a patch (cut at
/// `DIFF_LIMIT`). 409 while it has no workspace.
pub(super) async fn diff_patch(state: &AppState, name: &str) -> Result<Vec<u8>, AppError> {
    let name = name.to_string();
    let s: Session = state.store.get_typed(&name).await?;
    on_this_node(state, &s)?;
    let no_workspace = || AppError::Conflict(format!("session \"{name}\" has no workspace yet"));
    if s.status.workspace.is_none() {
        return Err(no_workspace());
    }
    let project: Option<Project> = state.store.get_typed(&s.spec.project).await.ok();
    let base = base_ref_of(&s, project.as_ref());
    let (fleet, project, session) = (state.fleet.clone(), s.spec.project.clone(), name.clone());
    let diff = tokio::task::spawn_blocking(move || fleet.workspaces.diff(&project, &session, &base, DIFF_LIMIT))
        .await
        .map_err(|e| AppError::Internal(e.to_string()))?;
    match diff {
        Ok(d) => Ok(d.patch),
        Err(WorkspaceError::NoWorkspace { .. }) => Err(no_workspace()),
        Err(e @ WorkspaceError::BaseRefNotFound { .. }) => Err(AppError::Conflict(format!("session \"{name}\": {e}"))),
        Err(e) => Err(AppError::Internal(e.to_string())),
    }
}
