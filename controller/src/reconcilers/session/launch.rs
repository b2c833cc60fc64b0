//! Starting, adopting, restarting and stopping a session's agent, and typing its first prompt.

use std::time::Duration;

use aoctl_api::condition::{self, types};
use aoctl_api::project::Project;
use aoctl_api::session::{
    reasons, ActivityState, ActivityStatus, Permissions, RestartPolicy, RuntimeKind, RuntimeStatus,
};
use aoctl_api::{ConditionStatus, EventType, Session, SessionStatus, Time};
use aoctl_engine::Action;
use aoctl_runtimes::agents::{self, Launch, RenderInput};
use aoctl_runtimes::workspace::WorkspaceInfo;
use aoctl_runtimes::{Handle, LaunchSpec, Probe, Runtime};

use super::{cond, Error};
use crate::context::Ctx;
use crate::fleet::{agent_of, container_of, input_style};
use crate::typing::{self, Recovered, What};

/// Whether the agent runs, and if not what to do next.
pub(super) enum Running {
    /// Alive and given its first prompt: observe its activity.
    Yes(Box<Launch>),
    /// Not (yet) running, or waiting for the agent: come back per the action.
    Wait(Action),
}

/// Longest wait between restarts of a crash-looping agent.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(300);

fn running_as_root() -> bool {
    #[cfg(unix)]
    {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() == 0 }
    }
    #[cfg(not(unix))]
    false
}

/// The handle to look for in `rt`: the runtime's own name for the Session's agent when it names
/// agents deterministically (tmux sessions, docker containers), so one started just before a crash
/// is found even when its status was never written; else the one in the status.
fn handle_of(s: &Session, st: &SessionStatus, rt: &dyn Runtime) -> Option<Handle> {
    let kind = rt.kind();
    rt.handle_for(&s.metadata.name)
        .or_else(|| st.runtime.as_ref().filter(|r| r.kind == kind).map(|r| Handle(r.handle.clone())))
}

pub(super) async fn ensure_running(
    s: &Session,
    project: &Project,
    ws: &WorkspaceInfo,
    ctx: &Ctx,
    st: &mut SessionStatus,
    kind: RuntimeKind,
    prompt: &str,
) -> Result<Running, Error> {
    let prompt = (!prompt.trim().is_empty()).then_some(prompt);
    let rt = match ctx.fleet.runtime_for(s, Some(project), kind).await {
        Ok(rt) => rt,
        Err(e) => {
            cond(st, s, types::RUNTIME_READY, ConditionStatus::False, e.reason(), e.to_string());
            cond(st, s, types::READY, ConditionStatus::False, e.reason(), "the runtime is unavailable");
            return Ok(Running::Wait(Action::requeue(Duration::from_secs(15))));
        }
    };
    let name = &s.metadata.name;
    let prompt_file = ctx.fleet.prompt_file(name);
    let agent = agent_of(s, Some(project));
    let input = RenderInput {
        agent: &agent,
        prompt,
        prompt_file: &prompt_file,
        agent_args: &s.spec.agent_args,
        permissions: s.spec.permissions.unwrap_or(Permissions::Bypass),
        workdir: &ws.path,
        workspaces_root: ctx.fleet.workspaces.root(),
        running_as_root: running_as_root(),
    };
    let launch = match agents::render(&input) {
        Ok(l) => l,
        Err(e) => {
            let r = reasons::AGENT_CONFIG_INVALID;
            cond(st, s, types::RUNTIME_READY, ConditionStatus::False, r, e.to_string());
            cond(st, s, types::READY, ConditionStatus::False, r, "the agent cannot be launched");
            return Ok(Running::Wait(Action::await_change()));
        }
    };

    let handle = handle_of(s, st, &*rt);
    let probe = match &handle {
        Some(h) => rt.probe(h).await?,
        None => Probe::Missing,
    };
    let was_stopped =
        condition::find(&st.conditions, types::RUNTIME_READY).is_some_and(|c| c.reason == reasons::STOPPED);
    let policy = s.spec.restart_policy.unwrap_or(RestartPolicy::OnFailure);
    // An agent started before whose conversation began (its prompt was an argument, or the typed
    // one was delivered) continues that conversation when it is started again and its CLI can.
    let resumable = st.runtime.is_some()
        && (launch.initial_input.is_none() || ctx.fleet.delivered_marker(name).exists())
        && prompt.is_some();
    let again = |launch: Launch| -> Launch {
        if !resumable {
            return launch;
        }
        match agents::render_resume(&input) {
            Ok(Some(resume)) => resume,
            _ => launch,
        }
    };
    match probe {
        Probe::Alive => {
            let h = handle.expect("a probed handle");
            let adopted = st.runtime.as_ref().is_none_or(|r| r.handle != h.0 || r.kind != kind);
            if adopted {
                st.runtime = Some(RuntimeStatus {
                    kind,
                    handle: h.0.clone(),
                    started_at: Some(Time::now()),
                    restarts: st.runtime.as_ref().map_or(0, |r| r.restarts),
                    exit_code: None,
                    attach_command: rt.attach_command(&h),
                });
                ctx.recorder
                    .publish(s, EventType::Normal, "Adopted", &format!("{kind} runtime {} is running", h.0))
                    .await;
            }
            cond(st, s, types::RUNTIME_READY, ConditionStatus::True, "Running", format!("{kind} runtime {}", h.0));
            deliver_first_prompt(s, ctx, st, &*rt, &h, launch).await
        }
        Probe::Exited(_) | Probe::Missing if st.runtime.is_some() && !was_stopped => {
            let (what, code) = match probe {
                Probe::Exited(code) => (format!("the agent exited with code {}", fmt_code(code)), code),
                _ => ("the runtime disappeared".to_string(), None),
            };
            if let Some(r) = st.runtime.as_mut() {
                r.exit_code = code;
            }
            if let Probe::Exited(code) = probe {
                exited_activity(st, code);
            }
            let restart = match policy {
                RestartPolicy::Always => true,
                RestartPolicy::OnFailure => code != Some(0),
                RestartPolicy::Never => false,
            };
            if !restart {
                let already = condition::find(&st.conditions, types::RUNTIME_READY)
                    .is_some_and(|c| c.reason == reasons::AGENT_EXITED);
                let msg = format!("{what}; restartPolicy {policy} does not restart it");
                cond(st, s, types::RUNTIME_READY, ConditionStatus::False, reasons::AGENT_EXITED, msg.clone());
                cond(st, s, types::READY, ConditionStatus::False, reasons::AGENT_EXITED, msg.clone());
                cond(st, s, types::AGENT_ACTIVE, ConditionStatus::False, reasons::AGENT_EXITED, what);
                if !already {
                    ctx.recorder.publish(s, EventType::Warning, reasons::AGENT_EXITED, &msg).await;
                }
                return Ok(Running::Wait(Action::await_change()));
            }
            if condition::is_true(&st.conditions, types::RUNTIME_READY) {
                // The first look that misses the agent says so before anything is restarted, so a
                // watcher sees the loss even when the restart follows within milliseconds.
                let reason = if probe == Probe::Missing { reasons::RUNTIME_LOST } else { reasons::RESTARTING };
                let msg = format!("{what}; restarting it (restartPolicy {policy})");
                cond(st, s, types::RUNTIME_READY, ConditionStatus::False, reason, msg.clone());
                cond(st, s, types::READY, ConditionStatus::False, reason, msg.clone());
                cond(st, s, types::AGENT_ACTIVE, ConditionStatus::False, reason, what);
                if probe == Probe::Missing {
                    // An exit is told by the `Restarting` event that follows.
                    ctx.recorder.publish(s, EventType::Warning, reason, &msg).await;
                }
                return Ok(Running::Wait(Action::requeue(Duration::ZERO)));
            }
            // Back off a crash loop: 1 s, 2 s, 4 s … since the last start, capped.
            let restarts = st.runtime.as_ref().map_or(0, |r| r.restarts);
            let delay = Duration::from_secs(1u64 << restarts.min(9)).min(MAX_RESTART_DELAY);
            let since = st.runtime.as_ref().and_then(|r| r.started_at).map(|t| t.0);
            if let Some(since) = since {
                let elapsed = (chrono::Utc::now() - since).to_std().unwrap_or_default();
                if elapsed < delay {
                    let msg = format!("{what}; restarting in {}s", (delay - elapsed).as_secs().max(1));
                    cond(st, s, types::RUNTIME_READY, ConditionStatus::False, "BackOff", msg.clone());
                    cond(st, s, types::READY, ConditionStatus::False, "BackOff", msg);
                    cond(st, s, types::AGENT_ACTIVE, ConditionStatus::False, "BackOff", what);
                    return Ok(Running::Wait(Action::requeue(delay - elapsed)));
                }
            }
            if let Some(h) = &handle {
                rt.stop(h).await?;
            }
            let msg = format!("{what}; restart {} (restartPolicy {policy})", restarts + 1);
            ctx.recorder.publish(s, EventType::Warning, "Restarting", &msg).await;
            start(s, project, ws, ctx, st, &*rt, kind, again(launch), restarts + 1, prompt).await
        }
        // Never started, resumed after a stop, or exited while stopped.
        _ => {
            // Only a dead agent is cleared away: a Missing one may be appearing right now, started
            // by a controller that was killed mid-start, and `start` then finds it.
            if let (Some(h), Probe::Exited(_)) = (&handle, probe) {
                rt.stop(h).await?;
            }
            let restarts = st.runtime.as_ref().map_or(0, |r| r.restarts);
            start(s, project, ws, ctx, st, &*rt, kind, again(launch), restarts, prompt).await
        }
    }
}

/// Records that the agent exited, with its exit code as the evidence (`since` moves only when the
/// state does).
fn exited_activity(st: &mut SessionStatus, code: Option<i32>) {
    if st.activity.as_ref().is_some_and(|a| a.state == ActivityState::Exited) {
        return;
    }
    let evidence = match code {
        Some(c) => format!("the agent exited with code {c}"),
        None => "the agent exited (its exit code is unknown)".to_string(),
    };
    st.activity = Some(ActivityStatus { state: ActivityState::Exited, since: Time::now(), evidence, resets_at: None });
}

fn fmt_code(code: Option<i32>) -> String {
    code.map_or_else(|| "unknown".to_string(), |c| c.to_string())
}

#[allow(clippy::too_many_arguments)]
async fn start(
    s: &Session,
    project: &Project,
    ws: &WorkspaceInfo,
    ctx: &Ctx,
    st: &mut SessionStatus,
    rt: &dyn Runtime,
    kind: RuntimeKind,
    launch: Launch,
    restarts: u32,
    prompt: Option<&str>,
) -> Result<Running, Error> {
    let name = &s.metadata.name;
    let dir = ctx.fleet.session_dir(name);
    let io = |e: std::io::Error| Error::Io { path: dir.clone(), source: e };
    tokio::fs::create_dir_all(&dir).await.map_err(io)?;
    tokio::fs::write(ctx.fleet.prompt_file(name), prompt.unwrap_or_default()).await.map_err(io)?;
    {
        // A new agent: nothing of the first prompt or of a message typed into the old one counts.
        let _typing = ctx.fleet.typing.lock(name).await;
        let _ = tokio::fs::remove_file(ctx.fleet.delivered_marker(name)).await;
        typing::reset(&ctx.fleet.typing_files(name)).await;
    }
    if let (Some(adapter), Some(home)) = (launch.adapter, std::env::var_os("HOME")) {
        if let Err(e) = agents::prepare_home(adapter, home.as_ref(), ctx.fleet.workspaces.root(), &ws.path) {
            tracing::warn!(error = %e, session = %name, "could not prepare the agent's settings");
        }
    }
    let mut env = ws.env();
    env.extend(launch.env.clone());
    env.extend(s.spec.env.clone());
    let spec = LaunchSpec {
        session: name.clone(),
        project: s.spec.project.clone(),
        workdir: ws.path.clone(),
        command: launch.command.clone(),
        env,
        transcript: ctx.fleet.transcript(name),
        session_dir: ctx.fleet.session_dir(name),
        cols: aoctl_runtimes::TERMINAL_COLS,
        rows: aoctl_runtimes::TERMINAL_ROWS,
        container: container_of(s, Some(project)),
        sandbox: ws.sandbox.clone(),
    };
    let started = std::time::Instant::now();
    let h = match rt.start(&spec).await {
        Ok(h) => h,
        // Started meanwhile by a controller killed mid-start: adopt it, never start a second.
        Err(e) if handle_of(s, st, rt).is_some() => {
            let h = handle_of(s, st, rt).expect("checked above");
            if rt.probe(&h).await? != Probe::Alive {
                return fail_start(s, ctx, st, kind, e).await;
            }
            h
        }
        Err(e) => return fail_start(s, ctx, st, kind, e).await,
    };
    ctx.metrics.runtime_op(kind, "start", true);
    tracing::debug!(session = %name, took = ?started.elapsed(), "runtime started");
    if restarts == 0 && st.runtime.is_none() {
        if let Some(created) = s.metadata.creation_timestamp {
            let secs = (chrono::Utc::now() - created.0).num_milliseconds().max(0) as f64 / 1000.0;
            ctx.metrics.spawn_duration.observe(secs);
        }
    }
    st.runtime = Some(RuntimeStatus {
        kind,
        handle: h.0.clone(),
        started_at: Some(Time::now()),
        restarts,
        exit_code: None,
        attach_command: rt.attach_command(&h),
    });
    cond(st, s, types::RUNTIME_READY, ConditionStatus::True, "Running", format!("{kind} runtime {}", h.0));
    let continuing = if launch.resumed { " (continuing its last conversation)" } else { "" };
    let msg = format!("{} in {kind} runtime {}{continuing}", launch.command[0], h.0);
    ctx.recorder.publish(s, EventType::Normal, "Started", &msg).await;
    if launch.initial_input.is_some() {
        cond(
            st,
            s,
            types::READY,
            ConditionStatus::False,
            "WaitingForAgent",
            "waiting for the agent to accept its first prompt",
        );
        return Ok(Running::Wait(Action::requeue(Duration::from_millis(300))));
    }
    Ok(Running::Yes(Box::new(launch)))
}

/// Records a failed start and hands the error to the engine's backoff.
async fn fail_start(
    s: &Session,
    ctx: &Ctx,
    st: &mut SessionStatus,
    kind: RuntimeKind,
    e: aoctl_runtimes::RuntimeError,
) -> Result<Running, Error> {
    ctx.metrics.runtime_op(kind, "start", false);
    cond(st, s, types::RUNTIME_READY, ConditionStatus::False, e.reason(), e.to_string());
    cond(st, s, types::READY, ConditionStatus::False, e.reason(), "the agent could not be started");
    ctx.recorder.publish(s, EventType::Warning, "StartFailed", &e.to_string()).await;
    Err(e.into())
}

/// Types the first prompt once the agent is ready, answering first-run dialogs on the way. An
/// agent that takes its prompt otherwise (as an argument) has it delivered at once.
async fn deliver_first_prompt(
    s: &Session,
    ctx: &Ctx,
    st: &mut SessionStatus,
    rt: &dyn Runtime,
    h: &Handle,
    launch: Launch,
) -> Result<Running, Error> {
    let name = &s.metadata.name;
    let files = ctx.fleet.typing_files(name);
    if files.prompt_done() {
        return Ok(Running::Yes(Box::new(launch)));
    }
    let _typing = ctx.fleet.typing.lock(name).await;
    let Some(text) = launch.initial_input.clone() else {
        let io = |e: std::io::Error| Error::Io { path: files.delivered.clone(), source: e };
        tokio::fs::write(&files.delivered, b"").await.map_err(io)?;
        return Ok(Running::Yes(Box::new(launch)));
    };
    if let Some(found) = typing::recover(&files, rt, h).await? {
        recovered(s, ctx, &found).await;
        if files.prompt_done() {
            return Ok(Running::Yes(Box::new(launch)));
        }
    }
    let screen = rt.capture(h).await?;
    if let Some(adapter) = launch.adapter {
        if answer_dialog(s, ctx, rt, h, adapter, &screen).await? {
            return Ok(Running::Wait(Action::requeue(Duration::from_millis(500))));
        }
        if !agents::is_ready(adapter, &screen) {
            cond(st, s, types::READY, ConditionStatus::False, "WaitingForAgent", "waiting for the agent's prompt");
            return Ok(Running::Wait(Action::requeue(Duration::from_millis(300))));
        }
    }
    if let Err(e) = typing::type_message(&files, rt, h, &text, &launch.input, What::Prompt).await {
        ctx.metrics.runtime_op(st.runtime.as_ref().map_or(RuntimeKind::Tmux, |r| r.kind), "send", false);
        ctx.recorder.publish(s, EventType::Warning, "PromptNotDelivered", &e.to_string()).await;
        return Err(e.into());
    }
    ctx.recorder.publish(s, EventType::Normal, "PromptDelivered", "the first prompt was typed and submitted").await;
    Ok(Running::Yes(Box::new(launch)))
}

/// Records what [`typing::recover`] found of a message a killed controller was typing.
async fn recovered(s: &Session, ctx: &Ctx, found: &Recovered) {
    let what = |w: &What| match w {
        What::Prompt => "the first prompt".to_string(),
        What::Queued(seq) => format!("message {seq} of aoctl send"),
        What::Marked => "a message".to_string(),
    };
    let delivered = |w: &What| if *w == What::Prompt { "PromptDelivered" } else { "SentToAgent" };
    let (reason, msg) = match found {
        Recovered::NotTyped(w) => {
            ("TypingResumed", format!("{} was not typed before a restart; it is typed again", what(w)))
        }
        Recovered::Typed(w) => {
            (delivered(w), format!("{} was typed before a restart; it was submitted, not typed again", what(w)))
        }
    };
    ctx.recorder.publish(s, EventType::Normal, reason, &msg).await;
}

/// Finishes what a killed controller was typing, then types the messages of `aoctl send` that
/// wait in the session's inbox, in order, once the first prompt was delivered. A message that
/// was typed but not seen submitted is dropped with a warning: typing it again would repeat it.
pub(super) async fn deliver_queued(s: &Session, project: &Project, ctx: &Ctx, st: &SessionStatus) -> Result<(), Error> {
    let name = &s.metadata.name;
    let Some(rt_status) = st.runtime.as_ref() else { return Ok(()) };
    let files = ctx.fleet.typing_files(name);
    let rt = ctx.fleet.runtime_for(s, Some(project), rt_status.kind).await?;
    let h = Handle(rt_status.handle.clone());
    let _typing = ctx.fleet.typing.lock(name).await;
    if let Some(found) = typing::recover(&files, &*rt, &h).await? {
        recovered(s, ctx, &found).await;
    }
    let limited = st.activity.as_ref().is_some_and(|a| a.state == ActivityState::RateLimited);
    if !files.prompt_done() || limited {
        return Ok(());
    }
    let (style, adapter) = input_style(&agent_of(s, Some(project)));
    for q in files.queued().await? {
        let text = agents::prepare_text(adapter, &q.text);
        let sent = typing::type_message(&files, &*rt, &h, &text, &style, What::Queued(q.seq)).await;
        ctx.metrics.runtime_op(rt_status.kind, "send", sent.is_ok());
        match sent {
            Ok(()) => {
                let msg = format!("typed message {} of aoctl send ({} characters)", q.seq, q.text.chars().count());
                ctx.recorder.publish(s, EventType::Normal, "SentToAgent", &msg).await;
            }
            Err(typing::TypingError::Runtime(e @ aoctl_runtimes::RuntimeError::NotDelivered { .. })) => {
                files.drop_queued(q.seq).await?;
                let msg = format!("message {} of aoctl send is not typed again: {e}", q.seq);
                ctx.recorder.publish(s, EventType::Warning, e.reason(), &msg).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Answers a dialog on screen that the adapter answers by itself; true when keys were sent. Keys
/// that only move the highlight come back for another look, which submits once the screen shows
/// the wanted option highlighted.
pub(super) async fn answer_dialog(
    s: &Session,
    ctx: &Ctx,
    rt: &dyn Runtime,
    h: &Handle,
    adapter: &agents::Adapter,
    screen: &str,
) -> Result<bool, Error> {
    let Some(answer) = agents::answer_dialog(adapter, screen) else { return Ok(false) };
    rt.keys(h, &answer.keys).await?;
    let dialog = answer.dialog;
    if answer.submits {
        let msg = match &answer.option {
            Some(option) => format!("answered the {dialog} dialog: {option:?}"),
            None => format!("answered the {dialog} dialog"),
        };
        ctx.recorder.publish(s, EventType::Normal, "DialogAnswered", &msg).await;
    } else {
        tracing::debug!(session = %s.metadata.name, dialog, keys = ?answer.keys, "moving to the wanted option");
    }
    Ok(true)
}

/// Stops an agent whose workspace was re-created under it; the next step restarts it.
pub(super) async fn stop_for_new_workspace(
    s: &Session,
    project: &Project,
    ctx: &Ctx,
    st: &mut SessionStatus,
    kind: RuntimeKind,
) -> Result<(), Error> {
    let rt = ctx.fleet.runtime_for(s, Some(project), kind).await?;
    if let Some(h) = handle_of(s, st, &*rt) {
        if rt.probe(&h).await? == Probe::Alive {
            rt.stop(&h).await?;
            let msg = "the workspace was re-created; the agent is restarted in it";
            ctx.recorder.publish(s, EventType::Warning, "WorkspaceRecreated", msg).await;
        }
    }
    // Stopped on purpose: the restart that follows is no loss of the runtime.
    let msg = "the workspace was re-created; restarting the agent in it";
    cond(st, s, types::RUNTIME_READY, ConditionStatus::False, "WorkspaceRecreated", msg);
    Ok(())
}

/// `spec.stopped: true`: the runtime goes, the workspace stays.
pub(super) async fn stop(
    s: &Session,
    project: &Project,
    ctx: &Ctx,
    st: &mut SessionStatus,
    kind: RuntimeKind,
) -> Result<Action, Error> {
    if let Ok(rt) = ctx.fleet.runtime_for(s, Some(project), kind).await {
        if let Some(h) = handle_of(s, st, &*rt) {
            if rt.probe(&h).await? == Probe::Alive {
                rt.stop(&h).await?;
                ctx.metrics.runtime_op(kind, "stop", true);
                let msg = "spec.stopped is true; the workspace is kept";
                ctx.recorder.publish(s, EventType::Normal, "Stopped", msg).await;
            }
        }
    }
    let msg = "spec.stopped is true; the workspace is kept";
    cond(st, s, types::RUNTIME_READY, ConditionStatus::False, reasons::STOPPED, msg);
    cond(st, s, types::AGENT_ACTIVE, ConditionStatus::False, reasons::STOPPED, msg);
    cond(st, s, types::READY, ConditionStatus::False, reasons::STOPPED, msg);
    Ok(Action::await_change())
}
