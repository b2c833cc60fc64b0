//! The orchestrator's tools (`/agent/v1/orchestrator/…`, docs/orchestrator.md): what a project's
//! orchestrator agent may do to the sessions of its project, with the orchestrator token that
//! `access::guard` checked. Every call is made by the project's orchestrator Session (its role,
//! its uid, its project's `spec.orchestrator`), acts only on sessions of that project — stop,
//! resume, delete, merge and answer only on the workers it created (label `ao.dev/orchestrator`) — is
//! bounded by `spec.orchestrator.limits` (past them: 429 and nothing done), and is recorded as an
//! Event on the orchestrator and counted in `aoctl_orchestrator_calls_total`.
//!
//! Writes on the orchestrator's behalf, as the project owner's delegate: `spawn` creates a Session
//! through the API's admission; `stop`, `resume` and `merge` write a worker's `spec.stopped` or
//! `spec.reactions.approved-and-green`, and `request_review` its review annotation, each with the
//! resourceVersion read as precondition; `delete` deletes a worker.

use std::collections::BTreeMap;

use aoctl_api::decode::{decode_json, AnyObject};
use aoctl_api::meta::{Kind, ObjectMeta, Time};
use aoctl_api::orchestrator::{check_worker_labels, OrchestratorSpec, ORCHESTRATOR_LABEL};
use aoctl_api::project::Budget;
use aoctl_api::reactions::{Reaction, ReactionAction, Reactions};
use aoctl_api::review::REVIEW_REQUESTED_ANNOTATION;
use aoctl_api::session::{AgentRef, Phase, SessionRole, SessionSpec, Usage, BUILTIN_AGENTS};
use aoctl_api::wire::{AgentReviewRequest, OrchestratorSpawnRequest, OrchestratorTextRequest};
use aoctl_api::{EventType, Project, Session};
use aoctl_store::{Selector, StoreError};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::agent::{caller_session, done, text_field, view};
use super::{objects, sessions, AppError, AppState};
use crate::agent_token::SessionCaller;

/// How often a write of a worker is tried again after a conflict.
const CAS_TRIES: usize = 8;
/// The most transcript lines one call reads, and the default.
const MAX_LINES: usize = 500;
const DEFAULT_LINES: usize = 100;
/// The most transcript or diff text one call answers, in bytes (the end is kept).
const MAX_ANSWER: usize = 64 * 1024;

/// The orchestrator making a call, its project and what the project lets it do.
struct Orchestrator {
    me: Session,
    project: Project,
    spec: OrchestratorSpec,
}

/// The caller, if it is its project's orchestrator; 403 otherwise.
async fn orchestrator(state: &AppState, caller: &SessionCaller) -> Result<Orchestrator, AppError> {
    let me = caller_session(state, caller).await?;
    if me.spec.role != SessionRole::Orchestrator {
        return Err(AppError::Forbidden(format!("session \"{}\" is not an orchestrator", me.metadata.name)));
    }
    let project: Project = match state.store.get_typed(&me.spec.project).await {
        Ok(p) => p,
        Err(StoreError::NotFound { .. }) => {
            return Err(AppError::Forbidden(format!("project \"{}\" is gone", me.spec.project)))
        }
        Err(e) => return Err(e.into()),
    };
    let Some(spec) = project.spec.orchestrator.clone() else {
        return Err(AppError::Forbidden(format!("project \"{}\" has no spec.orchestrator", me.spec.project)));
    };
    Ok(Orchestrator { me, project, spec })
}

impl Orchestrator {
    fn name(&self) -> &str {
        &self.me.metadata.name
    }

    /// Session `name` of its project; with `mine`, only a worker it created.
    async fn target(&self, state: &AppState, name: &str, mine: bool) -> Result<Session, AppError> {
        let project = &self.me.spec.project;
        let t: Session = match state.store.get_typed(name).await {
            Ok(t) => t,
            Err(StoreError::NotFound { .. }) => {
                return Err(AppError::BadRequest(format!("session: no session \"{name}\" in project \"{project}\"")))
            }
            Err(e) => return Err(e.into()),
        };
        if t.spec.project != *project {
            return Err(AppError::Forbidden(format!(
                "the orchestrator of project \"{project}\" may reach only that project's sessions"
            )));
        }
        if name == self.name() {
            return Err(AppError::BadRequest("session: that is the orchestrator itself".into()));
        }
        if mine && !created_by(&t, self.name()) {
            return Err(AppError::Forbidden(format!(
                "session \"{name}\" was not created by {}; it may stop, resume, delete, merge and answer only its own workers",
                self.name()
            )));
        }
        Ok(t)
    }

    /// The workers it created that are still stored.
    async fn workers(&self, state: &AppState) -> Result<Vec<Session>, AppError> {
        let selector = Selector::parse(&format!("{ORCHESTRATOR_LABEL}={}", self.name()))
            .map_err(|e| AppError::Internal(e.to_string()))?;
        let (all, _) = state.store.list_typed::<Session>(&selector).await?;
        Ok(all.into_iter().filter(|s| s.spec.project == self.me.spec.project).collect())
    }

    /// Refuses a spawn (`spawning`) or a resume past the limits: the workers alive, and its
    /// share of the project's budget. Nothing is done past them.
    async fn within_limits(&self, state: &AppState, spawning: bool) -> Result<Limits, AppError> {
        let workers = self.workers(state).await?;
        let limits = Limits::of(&self.me, &self.project, &self.spec, &workers);
        if spawning && limits.alive >= limits.max_sessions {
            return Err(AppError::LimitReached(format!(
                "{} workers of {} are alive, its limit (spec.orchestrator.limits.maxSessions) is {}; stop a \
                 finished one and delete it first; nothing was created",
                limits.alive,
                self.name(),
                limits.max_sessions
            )));
        }
        if let Some(why) = &limits.spent {
            return Err(AppError::LimitReached(format!(
                "its share of the project's budget is spent: {why} (spec.orchestrator.limits.budgetPercent); \
                 nothing was {}",
                if spawning { "created" } else { "resumed" }
            )));
        }
        Ok(limits)
    }

    /// Records a call's outcome as an Event on the orchestrator and counts it; the outcome.
    async fn answered(
        &self,
        state: &AppState,
        tool: &str,
        what: impl AsRef<str>,
        result: Result<Response, AppError>,
    ) -> Result<Response, AppError> {
        let (kind, outcome, reason, message) = described(tool, &result, what.as_ref());
        state.metrics.orchestrator_calls.with_label_values(&[tool, outcome]).inc();
        state.recorder.publish(&self.me, kind, reason, &message).await;
        result
    }
}

/// How a call is recorded: the Event's type, the metric's result, the Event's reason and message.
type Described = (EventType, &'static str, &'static str, String);

fn described(tool: &str, result: &Result<Response, AppError>, what: &str) -> Described {
    match result {
        Ok(_) => (EventType::Normal, "ok", reason_of(tool), what.to_string()),
        Err(e) => {
            let (outcome, reason) = match e {
                AppError::LimitReached(_) => ("limited", "OrchestratorCallLimited"),
                AppError::Forbidden(_) | AppError::Conflict(_) | AppError::BadRequest(_) | AppError::Decode(_) => {
                    ("refused", "OrchestratorCallRefused")
                }
                _ => ("error", "OrchestratorCallFailed"),
            };
            (EventType::Warning, outcome, reason, format!("{tool} ({what}): {e}"))
        }
    }
}

fn reason_of(tool: &str) -> &'static str {
    match tool {
        "spawn" => "OrchestratorSpawned",
        "list_sessions" => "OrchestratorListed",
        "read_transcript" => "OrchestratorReadTranscript",
        "read_diff" => "OrchestratorReadDiff",
        "send" => "OrchestratorSent",
        "stop" => "OrchestratorStopped",
        "resume" => "OrchestratorResumed",
        "delete" => "OrchestratorDeleted",
        "request_review" => "OrchestratorReviewRequested",
        "merge" => "OrchestratorMergeRequested",
        "answer" => "OrchestratorAnswered",
        _ => "OrchestratorCalled",
    }
}

fn created_by(s: &Session, orchestrator: &str) -> bool {
    s.metadata.labels.get(ORCHESTRATOR_LABEL).map(String::as_str) == Some(orchestrator)
}

/// Whether a worker counts against `maxSessions`: stored, not being deleted, not merged, closed
/// or failed. A stopped worker counts: it can be resumed.
fn alive(s: &Session) -> bool {
    let finished = matches!(s.status.phase, Some(Phase::Merged | Phase::Closed | Phase::Failed));
    s.metadata.deletion_timestamp.is_none() && !finished
}

/// An orchestrator's limits and where it stands against them.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Limits {
    max_sessions: u32,
    alive: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget_percent: Option<u32>,
    /// What it and its workers used.
    used: Usage,
    merge: bool,
    answer_questions: bool,
    /// Why its share of the budget is spent.
    #[serde(skip_serializing_if = "Option::is_none")]
    spent: Option<String>,
}

impl Limits {
    fn of(me: &Session, project: &Project, spec: &OrchestratorSpec, workers: &[Session]) -> Limits {
        let mut used = me.status.usage.clone().unwrap_or_default();
        for w in workers {
            if let Some(u) = &w.status.usage {
                used.add(u);
            }
        }
        let share = |p: u32| {
            project.spec.budget.as_ref().map(|b| Budget {
                tokens: b.tokens.map(|t| t.saturating_mul(u64::from(p)) / 100),
                cost_usd: b.cost_usd.map(|c| c * f64::from(p) / 100.0),
            })
        };
        let spent = spec.limits.budget_percent.and_then(share).and_then(|b| b.spent(&used));
        Limits {
            max_sessions: spec.limits.max_sessions(),
            alive: workers.iter().filter(|w| alive(w)).count() as u32,
            budget_percent: spec.limits.budget_percent,
            used,
            merge: spec.limits.merge,
            answer_questions: spec.limits.answer_questions,
            spent,
        }
    }
}

/// Spawn and resume are serialised in this process, so two at once cannot both pass the bounds.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `POST /agent/v1/orchestrator/spawn`: a worker in the orchestrator's project, labelled with
/// it, with the project's defaults and `spec.orchestrator.env`; it waits for a slot and the
/// budget like any session.
pub(super) async fn spawn(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    body: Bytes,
) -> Result<Response, AppError> {
    let o = orchestrator(&state, &caller).await?;
    let result = spawn_worker(&state, &o, &body).await;
    let what = match &result {
        Ok(_) => "created a worker".to_string(),
        Err(_) => "a worker".to_string(),
    };
    o.answered(&state, "spawn", what, result).await
}

async fn spawn_worker(state: &AppState, o: &Orchestrator, body: &[u8]) -> Result<Response, AppError> {
    let req: OrchestratorSpawnRequest = decode_json(body).map_err(AppError::Decode)?;
    let prompt = text_field("prompt", &req.prompt)?;
    let agent = match req.agent.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
        None => None,
        Some(a) if BUILTIN_AGENTS.contains(&a) => Some(AgentRef::Builtin(a.to_string())),
        Some(a) => {
            return Err(AppError::BadRequest(format!(
                "agent: `{a}` is not a built-in agent ({})",
                BUILTIN_AGENTS.join(", ")
            )))
        }
    };
    let bad_labels = check_worker_labels(&req.labels);
    if let Some(e) = bad_labels.first() {
        return Err(AppError::BadRequest(e.to_string()));
    }
    let project = &o.me.spec.project;
    let mut labels: BTreeMap<String, String> = req.labels.clone();
    labels.insert(ORCHESTRATOR_LABEL.to_string(), o.name().to_string());
    let mut prefix: String = project.chars().take(48).collect();
    prefix = prefix.trim_end_matches('-').to_string();
    let meta = match req.name.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
        Some(n) => ObjectMeta { name: n.to_string(), labels, ..Default::default() },
        None => ObjectMeta { generate_name: Some(format!("{prefix}-w-")), labels, ..Default::default() },
    };
    let spec = SessionSpec {
        project: project.clone(),
        agent,
        prompt: Some(prompt),
        issue: req.issue.clone().filter(|i| !i.trim().is_empty()),
        env: o.spec.env.clone(),
        ..Default::default()
    };
    let shown = meta.name.clone();
    let mut session = Session::new("", project, "");
    (session.metadata, session.spec) = (meta, spec);
    let mut obj = AnyObject::Session(session);
    let errors = obj.validate();
    if !errors.is_empty() {
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        return Err(AppError::BadRequest(text.join("; ")));
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let limits = o.within_limits(state, true).await?;
    objects::admit(state, &mut obj, true).await?;
    let created = match state.store.create(Kind::Session, obj.to_value(), Default::default()).await {
        Ok(c) => c,
        Err(StoreError::AlreadyExists { .. }) => {
            return Err(AppError::Conflict(format!("name: a session \"{shown}\" exists already; pick another name")))
        }
        Err(e) => return Err(e.into()),
    };
    let name = created["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let message = format!(
        "created worker \"{name}\" in project \"{project}\" ({} of {} alive)",
        limits.alive + 1,
        limits.max_sessions
    );
    Ok((StatusCode::CREATED, done(message, json!({ "session": name }))).into_response())
}

/// `GET /agent/v1/orchestrator/sessions`: every session of the project, what each is doing, and
/// the orchestrator's limits.
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
) -> Result<Response, AppError> {
    let o = orchestrator(&state, &caller).await?;
    let result = async {
        let (all, _) = state.store.list_typed::<Session>(&Selector::everything()).await?;
        let mine: Vec<&Session> = all.iter().filter(|s| s.spec.project == o.me.spec.project).collect();
        let workers: Vec<Session> = mine.iter().filter(|s| created_by(s, o.name())).map(|s| (*s).clone()).collect();
        let limits = Limits::of(&o.me, &o.project, &o.spec, &workers);
        let sessions: Vec<Value> = mine
            .iter()
            .filter(|s| s.metadata.name != o.name())
            .map(|s| {
                let mut v = view(s);
                v["mine"] = json!(created_by(s, o.name()));
                v["stopped"] = json!(s.spec.stopped);
                v["createdAt"] = json!(s.metadata.creation_timestamp);
                v["prompt"] = json!(s.spec.prompt.as_deref().map(|p| clip_start(p, 300)));
                v
            })
            .collect();
        Ok::<_, AppError>(Json(json!({ "sessions": sessions, "limits": limits })).into_response())
    }
    .await;
    o.answered(&state, "list_sessions", "listed the project's sessions", result).await
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TranscriptParams {
    lines: Option<usize>,
}

/// `GET /agent/v1/orchestrator/sessions/{name}/transcript?lines=N`: the last lines of a
/// session's terminal, as its screen shows them.
pub(super) async fn transcript(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    Path(name): Path<String>,
    params: Result<Query<TranscriptParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, AppError> {
    let o = orchestrator(&state, &caller).await?;
    let result = async {
        let Query(params) = params.map_err(|e| AppError::BadRequest(format!("lines: {e}")))?;
        let lines = params.lines.unwrap_or(DEFAULT_LINES);
        if !(1..=MAX_LINES).contains(&lines) {
            return Err(AppError::BadRequest(format!("lines: {lines} is not from 1 to {MAX_LINES}")));
        }
        o.target(&state, &name, false).await?;
        let (text, _) = sessions::transcript_start(&state, &name, None, Some(lines)).await?;
        let text = clip_end(&text, MAX_ANSWER);
        Ok(Json(json!({ "message": format!("the last {lines} lines of session \"{name}\""), "text": text }))
            .into_response())
    }
    .await;
    o.answered(&state, "read_transcript", format!("read the transcript of session {name}"), result).await
}

/// `GET /agent/v1/orchestrator/sessions/{name}/diff`: a session's work against its base.
pub(super) async fn diff(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    Path(name): Path<String>,
) -> Result<Response, AppError> {
    let o = orchestrator(&state, &caller).await?;
    let result = async {
        o.target(&state, &name, false).await?;
        let patch = sessions::diff_patch(&state, &name).await?;
        let text = String::from_utf8_lossy(&patch);
        let diff = if text.is_empty() { "(no changes)".to_string() } else { clip_end(&text, MAX_ANSWER) };
        Ok(Json(json!({ "message": format!("the diff of session \"{name}\""), "diff": diff })).into_response())
    }
    .await;
    o.answered(&state, "read_diff", format!("read the diff of session {name}"), result).await
}

/// `POST /agent/v1/orchestrator/sessions/{name}/send`: a message typed into a session of the
/// project, marked as the orchestrator's.
pub(super) async fn send(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, AppError> {
    let o = orchestrator(&state, &caller).await?;
    let result = async {
        let req: OrchestratorTextRequest = decode_json(&body).map_err(AppError::Decode)?;
        let text = text_field("text", &req.text)?;
        o.target(&state, &name, false).await?;
        let text = format!("[from orchestrator {}] {text}", o.name());
        let answer = sessions::deliver(&state, &name, &text).await?;
        Ok(done(answer, json!({ "session": name })))
    }
    .await;
    o.answered(&state, "send", format!("sent session {name} a message"), result).await
}

/// `POST /agent/v1/orchestrator/sessions/{name}/stop`: stops a worker it created (its
/// workspace stays).
pub(super) async fn stop(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    Path(name): Path<String>,
) -> Result<Response, AppError> {
    set_stopped(state, caller, name, true).await
}

/// `POST /agent/v1/orchestrator/sessions/{name}/resume`: resumes a worker it stopped, within
/// its budget share.
pub(super) async fn resume(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    Path(name): Path<String>,
) -> Result<Response, AppError> {
    set_stopped(state, caller, name, false).await
}

async fn set_stopped(
    state: AppState,
    caller: SessionCaller,
    name: String,
    stopped: bool,
) -> Result<Response, AppError> {
    let o = orchestrator(&state, &caller).await?;
    let tool = if stopped { "stop" } else { "resume" };
    let result = async {
        o.target(&state, &name, true).await?;
        let _one = if stopped { None } else { Some(ONE_AT_A_TIME.lock().await) };
        if !stopped {
            o.within_limits(&state, false).await?;
        }
        let changed = change_worker(&state, &name, |s| {
            if s.spec.stopped == stopped {
                return false;
            }
            s.spec.stopped = stopped;
            true
        })
        .await?;
        let message = match (changed, stopped) {
            (true, true) => format!("session \"{name}\" is stopping; its workspace stays"),
            (true, false) => format!("session \"{name}\" is resuming"),
            (false, true) => format!("session \"{name}\" was stopped already"),
            (false, false) => format!("session \"{name}\" was not stopped"),
        };
        Ok(done(message, json!({ "session": name })))
    }
    .await;
    o.answered(&state, tool, format!("{tool} session {name}"), result).await
}

/// `DELETE /agent/v1/orchestrator/sessions/{name}`: deletes a worker it created; the session's
/// cleanup removes its agent and workspace, its branch stays.
pub(super) async fn delete(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    Path(name): Path<String>,
) -> Result<Response, AppError> {
    let o = orchestrator(&state, &caller).await?;
    let result = async {
        let t = o.target(&state, &name, true).await?;
        let rv = t.metadata.resource_version.clone();
        state.store.delete(Kind::Session, &name, rv.as_deref(), Default::default()).await?;
        state.sessions.trigger(&name);
        Ok(done(format!("session \"{name}\" is being deleted; its branch stays"), json!({ "session": name })))
    }
    .await;
    o.answered(&state, "delete", format!("deleted session {name}"), result).await
}

/// `POST /agent/v1/orchestrator/sessions/{name}/review`: asks for a review round of a
/// session's pull request, as `aoctl review` does.
pub(super) async fn review(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, AppError> {
    let o = orchestrator(&state, &caller).await?;
    let result = async {
        let req: AgentReviewRequest = decode_json(&body).map_err(AppError::Decode)?;
        let note = req.note.as_deref().map(|n| text_field("note", n)).transpose()?;
        let t = o.target(&state, &name, false).await?;
        if t.spec.review_of.is_some() {
            return Err(AppError::BadRequest(format!("session: \"{name}\" is a reviewer; ask for its worker's review")));
        }
        let at = Time::now().to_string();
        change_worker(&state, &name, |s| {
            s.metadata.annotations.insert(REVIEW_REQUESTED_ANNOTATION.to_string(), at.clone());
            true
        })
        .await?;
        let reviewers = t.spec.review.as_ref().or(o.project.spec.review.as_ref()).map_or(0, |r| r.reviewers.len());
        let message = if reviewers > 0 {
            format!("a review round of session \"{name}\" starts with {reviewers} reviewer(s) once its pull request is open")
        } else {
            format!("the request is recorded on session \"{name}\", but neither it nor the project has reviewers (spec.review.reviewers)")
        };
        Ok(done(message, json!({ "session": name, "note": note, "reviewers": reviewers })))
    }
    .await;
    o.answered(&state, "request_review", format!("asked for a review of session {name}"), result).await
}

/// `POST /agent/v1/orchestrator/sessions/{name}/merge`: when the project lets its orchestrator
/// merge, turns on a worker's `approved-and-green` reaction with `action: merge`: its pull
/// request is merged once approved and green, by the reactions' own checks.
pub(super) async fn merge(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    Path(name): Path<String>,
) -> Result<Response, AppError> {
    let o = orchestrator(&state, &caller).await?;
    let result = async {
        if !o.spec.limits.merge {
            return Err(AppError::Conflict(format!(
                "project \"{}\" does not let its orchestrator merge (spec.orchestrator.limits.merge); ask a person",
                o.me.spec.project
            )));
        }
        o.target(&state, &name, true).await?;
        change_worker(&state, &name, |s| {
            let reactions = s.spec.reactions.get_or_insert_with(Reactions::default);
            let r = reactions.approved_and_green.get_or_insert_with(Reaction::default);
            let wanted = (Some(true), Some(ReactionAction::Merge));
            if (r.auto, r.action) == wanted {
                return false;
            }
            (r.auto, r.action) = wanted;
            true
        })
        .await?;
        Ok(done(
            format!("session \"{name}\"'s pull request is merged once it is approved and its checks pass"),
            json!({ "session": name }),
        ))
    }
    .await;
    o.answered(&state, "merge", format!("asked to merge session {name} when green"), result).await
}

/// `POST /agent/v1/orchestrator/sessions/{name}/answer`: when the project lets its
/// orchestrator answer its workers' questions, answers the one session `name` asked.
pub(super) async fn answer(
    State(state): State<AppState>,
    Extension(caller): Extension<SessionCaller>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, AppError> {
    let o = orchestrator(&state, &caller).await?;
    let result = async {
        if !o.spec.limits.answer_questions {
            return Err(AppError::Conflict(format!(
                "project \"{}\" does not let its orchestrator answer questions (spec.orchestrator.limits.answerQuestions); a person answers them",
                o.me.spec.project
            )));
        }
        let req: OrchestratorTextRequest = decode_json(&body).map_err(AppError::Decode)?;
        let text = text_field("text", &req.text)?;
        // Only its own workers ask it; the others' questions are a person's to answer.
        o.target(&state, &name, true).await?;
        let body = Bytes::from(json!({ "text": format!("[from orchestrator {}] {text}", o.name()) }).to_string());
        sessions::answer(State(state.clone()), Path(name.clone()), body).await?;
        Ok(done(format!("the answer is typed into session \"{name}\""), json!({ "session": name })))
    }
    .await;
    o.answered(&state, "answer", format!("answered session {name}"), result).await
}

/// Changes worker `name` with `change` (which answers whether it changed anything), written
/// with its resourceVersion as precondition and read again after a conflict; whether it wrote.
async fn change_worker(state: &AppState, name: &str, change: impl Fn(&mut Session) -> bool) -> Result<bool, AppError> {
    let mut last = None;
    for _ in 0..CAS_TRIES {
        let mut s: Session = state.store.get_typed(name).await?;
        if !change(&mut s) {
            return Ok(false);
        }
        match state.store.update_typed(&s).await {
            Ok(_) => {
                state.sessions.trigger(name);
                return Ok(true);
            }
            Err(e @ StoreError::Conflict { .. }) => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.map_or_else(|| AppError::Internal("no write was tried".into()), AppError::from))
}

/// The last `max` bytes of `text` (cut at a character), marked when cut.
fn clip_end(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// The first `max` characters of `text`, marked when cut.
fn clip_start(text: &str, max: usize) -> String {
    let mut short: String = text.chars().take(max).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_clipped_at_characters() {
        assert_eq!(clip_end("abc", 5), "abc");
        assert_eq!(clip_end("aébc", 3), "…bc");
        assert_eq!(clip_start("abcdef", 3), "abc…");
    }

    #[test]
    fn a_finished_or_deleted_worker_is_not_alive_and_a_stopped_one_is() {
        let mut s = Session::new("w", "p", "x");
        assert!(alive(&s));
        s.spec.stopped = true;
        assert!(alive(&s), "a stopped worker can be resumed");
        s.status.phase = Some(Phase::Merged);
        assert!(!alive(&s));
        s.status.phase = None;
        s.metadata.deletion_timestamp = Some(Time::now());
        assert!(!alive(&s));
    }
}
