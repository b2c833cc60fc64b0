//! The agent API (`/agent/v1/…`, docs/mcp.md): what a session's own agent may ask of the
//! controller through `aoctl mcp`, with the session token `access::guard` checked. Every handler
//! acts on the calling session, or on a session of its project (`send`, `handoff`), never on
//! another project; every call is recorded as an Event on the caller.
//!
//! Writes: `report`, `ask` and `review` change the caller's `status.agent` (and `ask` adds a record
//! to its `status.notifications` outbox) through the store with the resourceVersion read as
//! precondition, read again and retried on a conflict, so a reconcile's status write and these
//! never overwrite each other. `send` types through the same serialized, verified delivery as
//! `aoctl send`; `handoff` creates a Session through the same admission as the API's create. None
//! writes a spec. A `report` of a worker an orchestrator spawned is also kept for the orchestrator
//! (`status.upstream`) in the same write; `hello` records that the agent's tools are connected.

use aoctl_api::decode::{decode_json, AnyObject};
use aoctl_api::meta::{Kind, ObjectMeta, Time};
use aoctl_api::orchestrator::{UpstreamKind, UpstreamStatus, ORCHESTRATOR_LABEL};
use aoctl_api::project::HandoffLimits;
use aoctl_api::session::{AgentQuestion, AgentReport, ReviewRequest, SessionSpec};
use aoctl_api::wire::{AgentAskRequest, AgentHandoffRequest, AgentReportRequest, AgentReviewRequest, AgentSendRequest};
use aoctl_api::{EventType, Project, Session};
use aoctl_store::{Selector, StoreError};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::{objects, sessions, AppError, AppState};
use crate::agent_token::SessionCaller;
use crate::notifiers;

/// The label a follow-up session carries: the session that handed work off to it.
pub(crate) const HANDOFF_FROM_LABEL: &str = "ao.dev/handoff-from";
/// The longest text an agent may send in one call, in characters.
const MAX_TEXT: usize = 20_000;
/// How often a status write is tried again after a conflict.
const CAS_TRIES: usize = 8;

/// The calling session, if it still is the one the token was made for (a session deleted and
/// created again under its name has a new uid).
pub(super) async fn caller_session(state: &AppState, caller: &SessionCaller) -> Result<Session, AppError> {
    let s: Session = match state.store.get_typed(&caller.name).await {
        Ok(s) => s,
        Err(StoreError::NotFound { .. }) => return Err(AppError::SessionUnauthorized),
        Err(e) => return Err(e.into()),
    };
    if s.metadata.uid.as_deref() != Some(caller.uid.as_str()) {
        return Err(AppError::SessionUnauthorized);
    }
    Ok(s)
}

pub(super) fn text_field(field: &str, text: &str) -> Result<String, AppError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(AppError::BadRequest(format!("{field}: must not be empty")));
    }
    if t.chars().count() > MAX_TEXT {
        return Err(AppError::BadRequest(format!("{field}: longer than {MAX_TEXT} characters")));
    }
    Ok(t.to_string())
}

/// Changes the caller's status with `change`, with its resourceVersion as precondition, reading
/// it again after a conflict; `change` answers `Err` to refuse and write nothing.
pub(super) async fn change_status(
    state: &AppState,
    caller: &SessionCaller,
    change: impl Fn(&mut Session) -> Result<(), AppError>,
) -> Result<Session, AppError> {
    let mut last = None;
    for _ in 0..CAS_TRIES {
        let mut s = caller_session(state, caller).await?;
        change(&mut s)?;
        match state.store.update_status_typed(&s).await {
            Ok(written) => {
                state.sessions.trigger(&caller.name);
                return Ok(written);
            }
            Err(e @ StoreError::Conflict { .. }) => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.map_or_else(|| AppError::Internal("no status write was tried".into()), AppError::from))
}

pub(super) async fn record(state: &AppState, s: &Session, reason: &str, message: &str) {
    state.recorder.publish(s, EventType::Normal, reason, message).await;
}

pub(super) fn done(message: impl Into<String>, details: Value) -> Response {
    Json(json!({ "message": message.into(), "details": details })).into_response()
}

/// `GET /agent/v1/status`: the caller's phase, activity, branch, pull request (checks, review)
/// and what it reported.
pub(super) async fn status(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
) -> Result<Response, AppError> {
    let s = caller_session(&state, &caller).await?;
    record(&state, &s, "AgentCalledStatus", "the agent asked for its status").await;
    Ok(Json(view(&s)).into_response())
}

/// What `status` answers about a session.
pub(super) fn view(s: &Session) -> Value {
    let st = &s.status;
    json!({
        "session": s.metadata.name,
        "project": s.spec.project,
        "phase": st.phase.map(|p| p.as_str()),
        "activity": st.activity.as_ref().map(|a| json!({ "state": a.state, "since": a.since, "evidence": a.evidence })),
        "branch": st.workspace.as_ref().map(|w| w.branch.clone()),
        "pullRequest": st.pull_request.as_ref().map(|p| json!({
            "number": p.number, "url": p.url, "state": p.state, "checks": p.checks, "review": p.review,
            "mergeable": p.mergeable,
        })),
        "agent": st.agent,
    })
}

/// `POST /agent/v1/report`: progress and a summary, kept in `status.agent` and recorded as an event.
pub(super) async fn report(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    body: Bytes,
) -> Result<Response, AppError> {
    let req: AgentReportRequest = decode_json(&body).map_err(AppError::Decode)?;
    let progress = req.progress.as_deref().map(|p| text_field("progress", p)).transpose()?;
    let summary = req.summary.as_deref().map(|p| text_field("summary", p)).transpose()?;
    if progress.is_none() && summary.is_none() {
        return Err(AppError::BadRequest("give progress, a summary or both".into()));
    }
    let words: Vec<String> = [("progress", &progress), ("summary", &summary)]
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}: {v}")))
        .collect();
    let words = words.join("; ");
    let s = change_status(&state, &caller, |s| {
        let at = Time::now();
        let a = s.status.agent.get_or_insert_with(AgentReport::default);
        if let Some(p) = &progress {
            a.progress = p.clone();
        }
        if let Some(p) = &summary {
            a.summary = p.clone();
        }
        a.reported_at = Some(at);
        // A worker an orchestrator spawned keeps the report for it, in the same write.
        if let Some(o) = s.metadata.labels.get(ORCHESTRATOR_LABEL).cloned() {
            let up = s.status.upstream.get_or_insert_with(|| UpstreamStatus { orchestrator: o, ..Default::default() });
            // Each call is its own report (two in one second too); a retried write reads again.
            let key = format!("report:{}", up.next.max(1));
            up.record(UpstreamKind::Report, key, at, &words);
        }
        Ok(())
    })
    .await?;
    record(&state, &s, "AgentReported", &words).await;
    if let Some(up) = &s.status.upstream {
        state.sessions.trigger(&up.orchestrator);
    }
    Ok(done("reported", json!({ "agent": s.status.agent })))
}

/// `POST /agent/v1/hello`: the agent's `aoctl mcp` is connected, so its tools are there from now
/// on (`status.agent.toolsAt`, written once per start of the agent); an orchestrator's first
/// prompt waits for it.
pub(super) async fn hello(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
) -> Result<Response, AppError> {
    let s = caller_session(&state, &caller).await?;
    let started = s.status.runtime.as_ref().and_then(|r| r.started_at);
    let known = s.status.agent.as_ref().and_then(|a| a.tools_at).is_some_and(|t| started.is_none_or(|s| t >= s));
    if known {
        return Ok(done("hello", json!({ "session": s.metadata.name })));
    }
    let s = change_status(&state, &caller, |s| {
        s.status.agent.get_or_insert_with(AgentReport::default).tools_at = Some(Time::now());
        Ok(())
    })
    .await?;
    Ok(done("hello", json!({ "session": s.metadata.name })))
}

/// `POST /agent/v1/ask`: a question for a person. The session shows `needs-input` with the
/// question as evidence until `aoctl answer`; the project's notifiers are told once, through the
/// status's notification outbox. Answers at once.
pub(super) async fn ask(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    body: Bytes,
) -> Result<Response, AppError> {
    let req: AgentAskRequest = decode_json(&body).map_err(AppError::Decode)?;
    let question = text_field("question", &req.question)?;
    let s = caller_session(&state, &caller).await?;
    let project: Option<Project> = state.store.get_typed(&s.spec.project).await.ok();
    // A worker of an orchestrator its project lets answer asks it, not a person.
    let answers =
        project.as_ref().and_then(|p| p.spec.orchestrator.as_ref()).is_some_and(|o| o.limits.answer_questions);
    let orchestrator = s.metadata.labels.get(ORCHESTRATOR_LABEL).filter(|_| answers).cloned();
    let notifiers = project.map(|p| p.spec.notifiers).unwrap_or_default();
    let asked_at = Time::now();
    let s = change_status(&state, &caller, |s| {
        if let Some(q) = s.status.agent.as_ref().and_then(|a| a.question.as_ref()) {
            return Err(AppError::Conflict(format!(
                "session \"{}\" already waits for an answer to: {}",
                s.metadata.name, q.text
            )));
        }
        let a = s.status.agent.get_or_insert_with(AgentReport::default);
        a.question = Some(AgentQuestion { text: question.clone(), asked_at });
        if let Some(o) = &orchestrator {
            let up = s
                .status
                .upstream
                .get_or_insert_with(|| UpstreamStatus { orchestrator: o.clone(), ..Default::default() });
            let text = format!("asks: {question} (answer with the answer tool)");
            up.record(UpstreamKind::Question, format!("question:{asked_at}"), asked_at, &text);
            return Ok(());
        }
        let uid = s.metadata.uid.clone().unwrap_or_default();
        let title = format!("session {} asks: {}", s.metadata.name, first_line(&question));
        let message = format!("{question}\n\nAnswer with: aoctl answer {} TEXT", s.metadata.name);
        let key = format!("{uid}:ask-human:{asked_at}");
        if let Some(n) = notifiers::record(key, "ask-human", title, message, None, false, &notifiers) {
            notifiers::enqueue(&mut s.status.notifications, n);
        }
        Ok(())
    })
    .await?;
    record(&state, &s, "AgentAsked", &question).await;
    if let Some(o) = &orchestrator {
        state.sessions.trigger(o);
        return Ok(done(
            format!("the question was asked of your orchestrator {o}; its answer is typed into this session"),
            json!({ "question": question, "orchestrator": o }),
        ));
    }
    let told = if notifiers.is_empty() { "no notifier is configured" } else { "the project's notifiers are told" };
    Ok(done(
        format!("the question was asked; {told}; the answer is typed into this session when a person gives it"),
        json!({ "question": question }),
    ))
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut short: String = line.chars().take(120).collect();
    if short.len() < line.len() {
        short.push('…');
    }
    short
}

/// `POST /agent/v1/send`: a message typed into another session of the caller's project, through
/// the same delivery as `aoctl send`.
pub(super) async fn send(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    body: Bytes,
) -> Result<Response, AppError> {
    let req: AgentSendRequest = decode_json(&body).map_err(AppError::Decode)?;
    let text = text_field("text", &req.text)?;
    let me = caller_session(&state, &caller).await?;
    if req.session == me.metadata.name {
        return Err(AppError::BadRequest("session: a session cannot send to itself".into()));
    }
    let target: Session = match state.store.get_typed(&req.session).await {
        Ok(t) => t,
        Err(StoreError::NotFound { .. }) => {
            return Err(AppError::BadRequest(format!(
                "session: no session \"{}\" in project \"{}\"",
                req.session, me.spec.project
            )))
        }
        Err(e) => return Err(e.into()),
    };
    if target.spec.project != me.spec.project {
        return Err(AppError::Forbidden(format!(
            "session \"{}\" may reach only sessions of project \"{}\"",
            me.metadata.name, me.spec.project
        )));
    }
    let text = format!("[from session {}] {text}", me.metadata.name);
    let answer = sessions::deliver(&state, &req.session, &text).await;
    let outcome = match &answer {
        Ok(m) => m.clone(),
        Err(e) => format!("not delivered: {e}"),
    };
    record(&state, &me, "AgentSent", &format!("to session {}: {outcome}", req.session)).await;
    Ok(done(answer?, json!({ "session": req.session })))
}

/// `POST /agent/v1/handoff`: a follow-up Session in the caller's project with the given prompt,
/// named after the caller and labelled with it; it queues for a slot and the budget like any.
pub(super) async fn handoff(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    body: Bytes,
) -> Result<Response, AppError> {
    let req: AgentHandoffRequest = decode_json(&body).map_err(AppError::Decode)?;
    let prompt = text_field("prompt", &req.prompt)?;
    let me = caller_session(&state, &caller).await?;
    // A generated name is the prefix and five characters; a name is at most 63.
    let mut prefix: String = me.metadata.name.chars().take(48).collect();
    prefix = prefix.trim_end_matches('-').to_string();
    let spec = SessionSpec {
        project: me.spec.project.clone(),
        agent: me.spec.agent.clone(),
        agent_args: me.spec.agent_args.clone(),
        permissions: me.spec.permissions,
        runtime: me.spec.runtime,
        workspace: me.spec.workspace,
        prompt: Some(prompt),
        base_ref: me.spec.base_ref.clone(),
        env: me.spec.env.clone(),
        docker: me.spec.docker.clone(),
        ..Default::default()
    };
    let mut labels: std::collections::BTreeMap<String, String> =
        [(HANDOFF_FROM_LABEL.to_string(), me.metadata.name.clone())].into();
    // A follow-up of an orchestrator's worker is its worker too: it reports to it and counts
    // against its maxSessions.
    if let Some(o) = me.metadata.labels.get(ORCHESTRATOR_LABEL) {
        labels.insert(ORCHESTRATOR_LABEL.to_string(), o.clone());
    }
    let meta = ObjectMeta { generate_name: Some(format!("{prefix}-next-")), labels, ..Default::default() };
    // One handoff at a time in this process, so that two at once cannot both pass the bounds.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one = ONE_AT_A_TIME.lock().await;
    within_handoff_limits(&state, &me).await?;
    let mut session = Session::new("", &me.spec.project, "");
    (session.metadata, session.spec) = (meta, spec);
    let mut obj = AnyObject::Session(session);
    let errors = obj.validate();
    if !errors.is_empty() {
        return Err(AppError::Invalid { kind: Kind::Session, name: format!("{prefix}-next-*"), errors });
    }
    objects::admit(&state, &mut obj, true).await?;
    let created = state.store.create(Kind::Session, obj.to_value(), Default::default()).await?;
    let name = created["metadata"]["name"].as_str().unwrap_or_default().to_string();
    record(&state, &me, "AgentHandedOff", &format!("created session {name}")).await;
    let message = format!("created session \"{name}\" in project \"{}\"", me.spec.project);
    Ok((StatusCode::CREATED, done(message, json!({ "session": name }))).into_response())
}

/// Refuses a handoff from `me` past its project's `spec.handoff` bounds: the sessions handed off
/// from `me`, and in its whole project, that still exist.
async fn within_handoff_limits(state: &AppState, me: &Session) -> Result<(), AppError> {
    let project = match state.store.get_typed::<Project>(&me.spec.project).await {
        Ok(p) => Some(p),
        Err(StoreError::NotFound { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let (per_session, per_project) = HandoffLimits::of(project.as_ref().and_then(|p| p.spec.handoff.as_ref()));
    let handed_off = Selector::parse(HANDOFF_FROM_LABEL).map_err(|e| AppError::BadRequest(e.to_string()))?;
    let (sessions, _) = state.store.list_typed::<Session>(&handed_off).await?;
    let in_project: Vec<&Session> = sessions.iter().filter(|s| s.spec.project == me.spec.project).collect();
    let mine = in_project.iter().filter(|s| s.metadata.labels.get(HANDOFF_FROM_LABEL) == Some(&me.metadata.name));
    let (mine, all) = (mine.count(), in_project.len());
    let refuse = |what: String| {
        Err(AppError::Forbidden(format!(
            "{what}; nothing was created (project \"{}\" spec.handoff bounds the sessions handed off that still exist)",
            me.spec.project
        )))
    };
    if mine >= per_session as usize {
        return refuse(format!(
            "session \"{}\" has handed off {mine} sessions, its limit of {per_session}",
            me.metadata.name
        ));
    }
    if all >= per_project as usize {
        return refuse(format!(
            "project \"{}\" has {all} handed-off sessions, its limit of {per_project}",
            me.spec.project
        ));
    }
    Ok(())
}

/// `POST /agent/v1/review`: records that the agent asks for a review, in `status.agent` and as
/// an event. When the session (or its project) has reviewers, the session's reconcile starts a
/// round for it, and the answer says so; otherwise it says that none will.
pub(super) async fn review(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    body: Bytes,
) -> Result<Response, AppError> {
    let req: AgentReviewRequest = decode_json(&body).map_err(AppError::Decode)?;
    let note = req.note.as_deref().map(|n| text_field("note", n)).transpose()?.unwrap_or_default();
    let s = change_status(&state, &caller, |s| {
        let a = s.status.agent.get_or_insert_with(AgentReport::default);
        a.review_requested = Some(ReviewRequest { note: note.clone(), at: Time::now() });
        Ok(())
    })
    .await?;
    let message = if note.is_empty() { "the agent asks for a review".to_string() } else { note.clone() };
    record(&state, &s, "ReviewRequested", &message).await;
    let reviewers = match s.spec.review.as_ref().filter(|r| !r.reviewers.is_empty()) {
        Some(r) => r.reviewers.len(),
        None => match state.store.get_typed::<Project>(&s.spec.project).await {
            Ok(p) => p.spec.review.map_or(0, |r| r.reviewers.len()),
            Err(StoreError::NotFound { .. }) => 0,
            Err(e) => return Err(e.into()),
        },
    };
    let answer = if s.spec.review_of.is_some() {
        "the request is recorded; this session is itself a reviewer, so no round starts".to_string()
    } else if reviewers > 0 {
        let r = if reviewers == 1 { "reviewer" } else { "reviewers" };
        format!("a review round starts with {reviewers} {r} once the pull request is open; their verdicts and comments come back to you")
    } else {
        "the request is recorded, but no review round starts: neither this session nor its project has reviewers (spec.review.reviewers); a person sees the request".to_string()
    };
    Ok(done(answer, json!({ "note": note, "reviewers": reviewers })))
}
