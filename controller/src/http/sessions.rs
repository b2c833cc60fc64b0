//! Session subresources: `POST …/sessions/{name}/input` types into the agent and verifies delivery
//! (200), or queues the message durably when the agent has not had its first prompt yet or
//! messages wait before it (202; the session's reconcile types them in order, see
//! [`crate::typing`]); 409 when the session will not run or is rate-limited (nothing is typed
//! until its limit resets);
//! `GET …/sessions/{name}/log` returns (and with `follow=true` streams) its transcript as text.

use std::time::Duration;

use aoctl_api::condition::{self, types};
use aoctl_api::decode::decode_json;
use aoctl_api::session::{ActivityState, Phase};
use aoctl_api::wire::Status;
use aoctl_api::{Project, Session};
use aoctl_runtimes::{agents, transcript, Handle};
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::{AppError, AppState};
use crate::fleet::{agent_of, input_style};
use crate::typing::{self, What};

/// How often a followed log looks for new output.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct InputRequest {
    text: String,
}

pub async fn input(State(state): State<AppState>, Path(name): Path<String>, body: Bytes) -> Result<Response, AppError> {
    let req: InputRequest = decode_json(&body).map_err(AppError::Decode)?;
    if req.text.trim().is_empty() {
        return Err(AppError::BadRequest("text: must not be empty".into()));
    }
    let s: Session = state.store.get_typed(&name).await?;
    if let Some(a) = s.status.activity.as_ref().filter(|a| a.state == ActivityState::RateLimited) {
        let at = a.resets_at.map_or_else(|| "an unknown time".to_string(), |t| t.to_string());
        return Err(AppError::NotRunning(format!(
            "session \"{name}\" is rate-limited until {at}; nothing was typed (evidence: {})",
            a.evidence
        )));
    }
    let running = condition::is_true(&s.status.conditions, types::RUNTIME_READY);
    let rt_status = s.status.runtime.clone().filter(|_| running);
    if rt_status.is_none() && !will_run(&s) {
        let phase = s.status.phase.map_or("Pending", |p| p.as_str());
        return Err(AppError::NotRunning(format!("session \"{name}\" has no running agent (phase {phase})")));
    }
    let files = state.fleet.typing_files(&name);
    let typing = state.fleet.typing.lock(&name).await;
    let internal = |e: typing::TypingError| AppError::Internal(e.to_string());
    let queued = files.enqueue(&req.text).await.map_err(internal)?;
    let ahead = files.queued().await.map_err(internal)?.len() - 1;
    let Some(rt_status) = rt_status.filter(|_| files.prompt_done() && ahead == 0) else {
        drop(typing);
        // The session's reconcile types it in turn.
        state.sessions.trigger(&name);
        let after = if files.prompt_done() {
            format!("after the {ahead} message(s) queued before it")
        } else {
            "once the agent has its first prompt".to_string()
        };
        let message = format!(
            "queued {} characters for session \"{name}\" as message {}: it is typed {after}",
            req.text.chars().count(),
            queued.seq
        );
        let body = Status { reason: "Accepted".into(), ..Status::success(202, message) };
        return Ok((StatusCode::ACCEPTED, Json(body)).into_response());
    };
    let project: Option<Project> = state.store.get_typed(&s.spec.project).await.ok();
    let rt = state.fleet.runtime_for(&s, project.as_ref(), rt_status.kind).await?;
    let (style, adapter) = input_style(&agent_of(&s, project.as_ref()));
    let text = agents::prepare_text(adapter, &req.text);
    let handle = Handle(rt_status.handle.clone());
    let sent = typing::type_message(&files, &*rt, &handle, &text, &style, What::Queued(queued.seq)).await;
    state.metrics.runtime_op(rt_status.kind, "send", sent.is_ok());
    if sent.is_err() {
        // Answered with the error: not typed again by the reconcile.
        files.drop_queued(queued.seq).await.map_err(internal)?;
    }
    match sent {
        Err(typing::TypingError::Runtime(e)) => return Err(e.into()),
        Err(e) => return Err(internal(e)),
        Ok(()) => {}
    }
    let message = format!("delivered {} characters to session \"{name}\"", req.text.chars().count());
    Ok(Json(Status::success(200, message)).into_response())
}

/// Whether a session without a running agent will have one without a change to it: it is not
/// stopped, deleted, finished or failed, and its project is ready (it may wait for a slot).
fn will_run(s: &Session) -> bool {
    let blocked = ["ProjectNotFound", "ProjectNotReady"];
    let ready = condition::find(&s.status.conditions, types::READY);
    let phase = s.status.phase.unwrap_or(Phase::Pending);
    !s.spec.stopped
        && s.metadata.deletion_timestamp.is_none()
        && ![Phase::Failed, Phase::Merged, Phase::Closed, Phase::Stopped, Phase::Terminating].contains(&phase)
        && ready.is_some_and(|c| !blocked.contains(&c.reason.as_str()))
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogParams {
    tail_lines: Option<usize>,
    follow: Option<bool>,
}

pub async fn log(
    State(state): State<AppState>,
    Path(name): Path<String>,
    params: Result<Query<LogParams>, QueryRejection>,
) -> Result<Response, AppError> {
    let Query(params) = params?;
    // The session must exist; its transcript may not yet.
    let _: Session = state.store.get_typed(&name).await?;
    let path = state.fleet.transcript(&name);
    let (text, mut offset) = {
        let p = path.clone();
        // As the agent's terminal shows it, so a text UI that redraws in place reads once.
        let (rows, cols) = (aoctl_runtimes::TERMINAL_ROWS, aoctl_runtimes::TERMINAL_COLS);
        tokio::task::spawn_blocking(move || transcript::tail_rendered(&p, params.tail_lines, rows, cols))
            .await
            .map_err(|e| AppError::Internal(e.to_string()))?
            .map_err(|e| AppError::Internal(format!("{}: {e}", path.display())))?
    };
    let headers = [(header::CONTENT_TYPE, "text/plain; charset=utf-8")];
    if !params.follow.unwrap_or(false) {
        return Ok((headers, text).into_response());
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let mut shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        if tx.send(Ok(Bytes::from(text))).await.is_err() {
            return;
        }
        let mut tick = tokio::time::interval(FOLLOW_POLL);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = tx.closed() => return,
                _ = async { shutdown.wait_for(|s| *s).await.map(|_| ()) } => return,
            }
            let p = path.clone();
            let Ok(Ok((bytes, end))) = tokio::task::spawn_blocking(move || transcript::read_from(&p, offset)).await
            else {
                return;
            };
            offset = end;
            if bytes.is_empty() {
                if state.store.get_typed::<Session>(&name).await.is_err() {
                    return;
                }
                continue;
            }
            if tx.send(Ok(Bytes::from(transcript::to_text(&bytes)))).await.is_err() {
                return;
            }
        }
    });
    Ok((headers, Body::from_stream(ReceiverStream::new(rx))).into_response())
}
