//! Starting, adopting, restarting and stopping a session's agent, and typing its first prompt.

use std::ops::ControlFlow::{Break, Continue};
use std::sync::Arc;
use std::time::Duration;

use aoctl_agents::{Launch, RenderInput};
use aoctl_api::condition::{self, types};
use aoctl_api::session::{
    reasons, ActivityState, ActivityStatus, Permissions, RestartPolicy, RuntimeKind, RuntimeStatus, SessionRole,
};
use aoctl_api::{ConditionStatus, EventType, Session, SessionStatus, Time};
use aoctl_engine::Action;
use aoctl_git::workspace::WorkspaceInfo;
use aoctl_runtimes::agent_env;
use aoctl_runtimes::{Handle, LaunchSpec, Probe, Runtime};

use super::{cond, typed_agent, Context, Error, Reconcile, Step};
use crate::machine::{agent_of, container_of};
use crate::typing::{self, How, Keyboard, What};

/// The session's agent, once it runs.
pub(super) struct Agent {
    pub launch: Launch,
    /// Where it was found running, and its handle; `None` right after it was started (its first
    /// prompt is typed at the next look).
    pub found: Option<(Arc<dyn Runtime>, Handle)>,
}

/// Longest wait between restarts of a crash-looping agent.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(300);
/// How often a session whose agent's program is missing looks for it again.
const LOOK_AGAIN: Duration = Duration::from_secs(60);
/// An agent that exits this soon after its start died at start (`AgentExitedAtStart`).
const AT_START: Duration = Duration::from_secs(20);
/// How long a custom agent that prints nothing is waited for before its first prompt is typed.
const SILENT_START: Duration = Duration::from_secs(10);
/// How long an orchestrator's first prompt waits for its agent's tools to connect.
const TOOLS_WAIT: Duration = Duration::from_secs(60);
/// How many of an exited agent's last lines its conditions quote.
const LAST_LINES: usize = 8;

/// The runtime of `kind`; for docker, on the engine placement found (`host`).
pub(super) async fn engine(
    ctx: &Context,
    host: &Option<String>,
    kind: RuntimeKind,
) -> Result<Arc<dyn Runtime>, aoctl_runtimes::RuntimeError> {
    let host = if kind == RuntimeKind::Docker { host.as_deref() } else { None };
    ctx.machine.runtime(kind, host).await
}

/// Whether the session's first prompt waits for its agent's tools: an orchestrator's, and that of
/// a worker an orchestrator spawned (which reports to it with them), when its agent is given
/// `aoctl mcp` (`mcp`: the server gives it to agents that take it).
pub(super) fn waits_for_tools(s: &Session, adapter: Option<&aoctl_agents::Adapter>, mcp: bool) -> bool {
    let orchestrated = s.metadata.labels.contains_key(aoctl_api::orchestrator::ORCHESTRATOR_LABEL);
    (s.spec.role == SessionRole::Orchestrator || orchestrated) && mcp && adapter.is_some_and(|a| a.takes_mcp())
}

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

impl Reconcile<'_> {
    /// `spec.stopped: true`: the runtime goes, the workspace stays.
    pub(super) async fn stopped(&mut self) -> Step {
        if !self.s.spec.stopped {
            return Ok(Continue(()));
        }
        let (s, ctx, kind) = (self.s, self.ctx, self.runtime_kind);
        let st = &mut *self.st;
        if let Ok(rt) = engine(self.ctx, &self.host, kind).await {
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
        Ok(Break(Action::await_change()))
    }

    /// The agent runs: found running (and adopted when the status did not know it), else started,
    /// restarted per `restartPolicy` or left exited. An agent whose workspace was made again is
    /// stopped first, to be restarted in the new one.
    pub(super) async fn runtime(&mut self, ws: &WorkspaceInfo, prompt: &str) -> Step<Agent> {
        if ws.created && self.st.runtime.is_some() {
            self.stop_for_new_workspace().await?;
        }
        let (s, ctx, kind) = (self.s, self.ctx, self.runtime_kind);
        let project = &self.project;
        let st = &mut *self.st;
        let prompt = (!prompt.trim().is_empty()).then_some(prompt);
        let rt = match engine(self.ctx, &self.host, kind).await {
            Ok(rt) => rt,
            Err(e) => {
                cond(st, s, types::RUNTIME_READY, ConditionStatus::False, e.reason(), e.to_string());
                cond(st, s, types::READY, ConditionStatus::False, e.reason(), "the runtime is unavailable");
                return Ok(Break(Action::requeue(Duration::from_secs(15))));
            }
        };
        let name = &s.metadata.name;
        let files = ctx.machine.files();
        let prompt_file = files.prompt(name);
        let agent = agent_of(s, Some(project));
        // An orchestrator's first turn, and its workers', must have their tools: for an agent
        // given `aoctl mcp`, the prompt is typed once its `aoctl mcp` said hello (see
        // `first_prompt`), never given on its command line.
        let mcp = ctx.session_keys.as_ref().and_then(|k| k.mcp_command());
        let adapter = match &agent {
            aoctl_api::session::AgentRef::Builtin(name) => aoctl_agents::builtin(name),
            aoctl_api::session::AgentRef::Custom { .. } => None,
        };
        let deferred = waits_for_tools(s, adapter, mcp.is_some());
        let input = RenderInput {
            agent: &agent,
            prompt: if deferred { None } else { prompt },
            prompt_file: &prompt_file,
            agent_args: &s.spec.agent_args,
            permissions: s.spec.permissions.unwrap_or(Permissions::Bypass),
            workdir: &ws.path,
            workspaces_root: ctx.machine.workspaces().root(),
            running_as_root: running_as_root(),
            mcp,
        };
        let launch = match aoctl_agents::render(&input) {
            Ok(mut l) if deferred => {
                let typed = prompt.filter(|p| !p.trim().is_empty());
                l.initial_input = typed.map(|p| aoctl_agents::prepare_text(l.adapter, p));
                l
            }
            Ok(l) => l,
            Err(e) => {
                let r = reasons::AGENT_CONFIG_INVALID;
                cond(st, s, types::RUNTIME_READY, ConditionStatus::False, r, e.to_string());
                cond(st, s, types::READY, ConditionStatus::False, r, "the agent cannot be launched");
                return Ok(Break(Action::await_change()));
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
            && (launch.initial_input.is_none() || files.typing(name).prompt_done())
            && prompt.is_some();
        let again = |launch: Launch| -> Launch {
            if !resumable {
                return launch;
            }
            match aoctl_agents::render_resume(&input) {
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
                        host: self.host.clone().filter(|_| kind == RuntimeKind::Docker),
                        node: super::node::owner(kind, self.host.as_deref(), &ctx.node),
                    });
                    ctx.recorder
                        .publish(s, EventType::Normal, "Adopted", &format!("{kind} runtime {} is running", h.0))
                        .await;
                }
                cond(st, s, types::RUNTIME_READY, ConditionStatus::True, "Running", format!("{kind} runtime {}", h.0));
                let started = st.runtime.as_ref().and_then(|r| r.started_at).map(|t| t.0);
                let lived = started.map(|t| (chrono::Utc::now() - t).to_std().unwrap_or_default());
                if failed_at_start(st) && lived.is_some_and(|d| d >= AT_START) {
                    let msg = format!("`{}` has run for {}s", launch.command[0], AT_START.as_secs());
                    cond(st, s, types::AGENT_READY, ConditionStatus::True, reasons::AGENT_FOUND, msg);
                }
                Ok(Continue(Agent { launch, found: Some((rt, h)) }))
            }
            Probe::Exited(_) | Probe::Missing if st.runtime.is_some() && !was_stopped => {
                let (mut what, code) = match probe {
                    Probe::Exited(code) => (format!("the agent exited with code {}", fmt_code(code)), code),
                    _ => ("the runtime disappeared".to_string(), None),
                };
                if let Probe::Exited(_) = probe {
                    let last = last_lines(files.transcript(name)).await;
                    let started = st.runtime.as_ref().and_then(|r| r.started_at).map(|t| t.0);
                    let lived = started.map(|t| (chrono::Utc::now() - t).to_std().unwrap_or_default());
                    if !last.is_empty() {
                        what = format!("{what}; its last lines:\n{last}");
                    }
                    if lived.is_some_and(|d| d < AT_START) {
                        let secs = lived.unwrap_or_default().as_secs().max(1);
                        let msg =
                            format!("{what}\n(within {secs}s of its start; `aoctl logs {name}` has all it printed)");
                        // 127 is "command not found" from a shell or a container's init: the program
                        // is missing where it runs (inside the image, for docker), so it is looked for
                        // at the pace of a missing program, not restarted in a loop.
                        if probe == Probe::Exited(Some(127)) {
                            let since = lived.unwrap_or_default();
                            let msg = format!("{msg}; {}", install_hint(launch.adapter));
                            let r = reasons::AGENT_NOT_FOUND;
                            let first =
                                condition::find(&st.conditions, types::AGENT_READY).is_none_or(|c| c.reason != r);
                            cond(st, s, types::AGENT_READY, ConditionStatus::False, r, msg.clone());
                            cond(st, s, types::READY, ConditionStatus::False, r, msg.clone());
                            cond(
                                st,
                                s,
                                types::RUNTIME_READY,
                                ConditionStatus::False,
                                r,
                                "the agent's program was not found where it runs",
                            );
                            if first {
                                ctx.recorder.publish(s, EventType::Warning, r, &msg).await;
                            }
                            if let Some(r) = st.runtime.as_mut() {
                                r.exit_code = Some(127);
                            }
                            exited_activity(st, Some(127));
                            return Ok(Break(Action::requeue(LOOK_AGAIN.saturating_sub(since))));
                        }
                        let r = reasons::AGENT_EXITED_AT_START;
                        cond(st, s, types::AGENT_READY, ConditionStatus::False, r, msg);
                    }
                }
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
                    return Ok(Break(Action::await_change()));
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
                    return Ok(Break(Action::requeue(Duration::ZERO)));
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
                        return Ok(Break(Action::requeue(delay - elapsed)));
                    }
                }
                if let Some(h) = &handle {
                    rt.stop(h).await?;
                }
                let msg = format!("{what}; restart {} (restartPolicy {policy})", restarts + 1);
                ctx.recorder.publish(s, EventType::Warning, "Restarting", &msg).await;
                let launch = again(launch);
                self.start(ws, &*rt, launch, restarts + 1, prompt).await
            }
            // Never started, resumed after a stop, or exited while stopped.
            _ => {
                // Only a dead agent is cleared away: a Missing one may be appearing right now, started
                // by a controller that was killed mid-start, and `start` then finds it.
                if let (Some(h), Probe::Exited(_)) = (&handle, probe) {
                    rt.stop(h).await?;
                }
                let restarts = st.runtime.as_ref().map_or(0, |r| r.restarts);
                let launch = again(launch);
                self.start(ws, &*rt, launch, restarts, prompt).await
            }
        }
    }

    /// Starts the agent with `restarts` counted in its status.
    async fn start(
        &mut self,
        ws: &WorkspaceInfo,
        rt: &dyn Runtime,
        launch: Launch,
        restarts: u32,
        prompt: Option<&str>,
    ) -> Step<Agent> {
        let (s, ctx, kind) = (self.s, self.ctx, self.runtime_kind);
        let st = &mut *self.st;
        let name = &s.metadata.name;
        let files = ctx.machine.files();
        files.write_prompt(name, prompt.unwrap_or_default()).await?;
        {
            // A new agent: nothing of the first prompt or of a message typed into the old one counts.
            let _typing = ctx.machine.typing().lock(name).await;
            files.typing(name).forget_runtime().await;
        }
        if let Some(adapter) = launch.adapter {
            if let Err(e) = aoctl_agents::prepare_own_home(adapter, ctx.machine.workspaces().root(), &ws.path) {
                tracing::warn!(error = %e, session = %name, "could not prepare the agent's settings");
            }
        }
        let mut set = ws.env();
        set.extend(launch.env.clone());
        set.extend(s.spec.env.clone());
        // Last, so that no spec can hand the agent another session's identity.
        if let (Some(keys), Some(uid)) = (&ctx.session_keys, s.metadata.uid.as_deref()) {
            set.extend(keys.env(name, uid, s.spec.role == aoctl_api::session::SessionRole::Orchestrator));
        }
        let container = container_of(s, Some(&self.project));
        let env = agent_environment(ctx, &self.project, &launch, container.is_none(), &set).await;
        let spec = LaunchSpec {
            session: name.clone(),
            project: s.spec.project.clone(),
            workdir: ws.path.clone(),
            command: launch.command.clone(),
            env,
            transcript: files.transcript(name),
            session_dir: files.dir(name),
            cols: aoctl_runtimes::TERMINAL_COLS,
            rows: aoctl_runtimes::TERMINAL_ROWS,
            container,
            sandbox: ws.sandbox.clone(),
        };
        if let Err(e) = rt.resolve(&spec).await {
            return self.program_missing(&launch, e).await;
        }
        let started = std::time::Instant::now();
        let h = match rt.start(&spec).await {
            Ok(h) => h,
            Err(e @ aoctl_runtimes::RuntimeError::ProgramNotFound { .. }) => {
                return self.program_missing(&launch, e).await;
            }
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
            host: self.host.clone().filter(|_| kind == RuntimeKind::Docker),
            node: super::node::owner(kind, self.host.as_deref(), &ctx.node),
        });
        cond(st, s, types::RUNTIME_READY, ConditionStatus::True, "Running", format!("{kind} runtime {}", h.0));
        // After a failed start the failure stands until the new agent has run a while (see the
        // probe of a live agent).
        if !failed_at_start(st) {
            let found = format!("`{}` started in the {kind} runtime", launch.command[0]);
            cond(st, s, types::AGENT_READY, ConditionStatus::True, reasons::AGENT_FOUND, found);
        }
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
            return Ok(Break(Action::requeue(Duration::from_millis(300))));
        }
        Ok(Continue(Agent { launch, found: None }))
    }

    /// The agent's program is not where its runtime would run it: nothing is started, the
    /// condition says what to install, and it is looked for again every minute (and at once on
    /// `aoctl reconcile session`). Errors other than `ProgramNotFound` are a failed start.
    async fn program_missing<T>(&mut self, launch: &Launch, e: aoctl_runtimes::RuntimeError) -> Step<T> {
        let (s, ctx, kind) = (self.s, self.ctx, self.runtime_kind);
        let st = &mut *self.st;
        let aoctl_runtimes::RuntimeError::ProgramNotFound { .. } = &e else {
            return fail_start(s, ctx, st, kind, e).await;
        };
        let name = &s.metadata.name;
        let install = install_hint(launch.adapter);
        let msg = format!(
            "{e}; {install}; it starts by itself once the program is there (looked for every minute, \
             or now with `aoctl reconcile session {name}`)"
        );
        let r = reasons::AGENT_NOT_FOUND;
        let first = condition::find(&st.conditions, types::AGENT_READY).is_none_or(|c| c.reason != r);
        cond(st, s, types::AGENT_READY, ConditionStatus::False, r, msg.clone());
        cond(
            st,
            s,
            types::RUNTIME_READY,
            ConditionStatus::False,
            r,
            "nothing was started: the agent's program is missing",
        );
        cond(st, s, types::READY, ConditionStatus::False, r, msg.clone());
        if first {
            ctx.recorder.publish(s, EventType::Warning, r, &msg).await;
        }
        Ok(Break(Action::requeue(LOOK_AGAIN)))
    }

    /// Types the first prompt into an agent found running once it is ready, answering first-run
    /// dialogs on the way. An agent with no prompt to type (resumed, or given it as an argument)
    /// counts as having it once its prompt shows, so nothing `aoctl send` queued is typed earlier.
    /// One just started is left for the next look.
    pub(super) async fn first_prompt(&mut self, agent: &Agent) -> Step {
        let Some((rt, h)) = &agent.found else { return Ok(Continue(())) };
        let (rt, launch) = (&**rt, &agent.launch);
        let (s, ctx) = (self.s, self.ctx);
        let st = &mut *self.st;
        let name = &s.metadata.name;
        if ctx.machine.files().typing(name).prompt_done() {
            return Ok(Continue(()));
        }
        let kind = st.runtime.as_ref().map_or(aoctl_runtimes::DEFAULT_RUNTIME, |r| r.kind);
        // The launch's own input style and adapter, which prepared its first prompt.
        let (style, adapter) = (launch.input.clone(), launch.adapter);
        let typed = typing::Agent { style, adapter, ..typed_agent(s, ctx, &self.project, rt, h, kind) };
        let keyboard = Keyboard::lock(ctx.machine.typing(), typed).await;
        let files = keyboard.files();
        let mut text = launch.initial_input.clone();
        if text.is_none() && files.retyping() {
            // Given on its command line and used up by its login screen: typed now instead.
            let prompt = ctx.machine.files().read_prompt(name).await?;
            text = Some(aoctl_agents::prepare_text(launch.adapter, &prompt)).filter(|t| !t.trim().is_empty());
        }
        if text.is_some() && keyboard.recover().await?.is_some() && files.prompt_done() {
            return Ok(Continue(()));
        }
        // Nothing is typed before the agent shows its prompt: not the first prompt, and not what
        // `aoctl send` queued for an agent with none to type (resumed, or given it as an argument).
        let screen = rt.capture(h).await?;
        if let Some(adapter) = launch.adapter {
            if answer_dialog(s, ctx, rt, h, adapter, &screen).await? {
                return Ok(Break(Action::requeue(Duration::from_millis(500))));
            }
            // Nothing is typed into a login screen: a person logs the agent in, and the prompt
            // follows once its ready screen shows.
            if super::login::login_condition(s, ctx, st, launch, &screen).await {
                return Ok(Break(Action::requeue(super::login::LOGIN_LOOK)));
            }
            if !aoctl_agents::is_ready(adapter, &screen) {
                if text.is_none() {
                    // Nothing to type: its activity is looked at meanwhile (a login screen, say),
                    // and what `aoctl send` queued waits until its prompt shows.
                    return Ok(Continue(()));
                }
                cond(st, s, types::READY, ConditionStatus::False, "WaitingForAgent", "waiting for the agent's prompt");
                return Ok(Break(Action::requeue(Duration::from_millis(300))));
            }
        } else if text.is_some() && screen.trim().is_empty() {
            // A program of its own says nothing of being ready: its first output is taken for it
            // (what is typed before it reads is echoed late, and a late echo looks like a message
            // that never arrived), or, for one that prints nothing, a few seconds.
            let started = st.runtime.as_ref().and_then(|r| r.started_at).map(|t| t.0);
            let waited = started.map(|t| (chrono::Utc::now() - t).to_std().unwrap_or_default());
            if waited.is_some_and(|w| w < SILENT_START) {
                let msg = "waiting for the agent's first output";
                cond(st, s, types::READY, ConditionStatus::False, "WaitingForAgent", msg);
                return Ok(Break(Action::requeue(Duration::from_millis(300))));
            }
        }
        let Some(text) = text else {
            files.mark_prompt_done().await?;
            return Ok(Continue(()));
        };
        let mcp = ctx.session_keys.as_ref().and_then(|k| k.mcp_command()).is_some();
        if waits_for_tools(s, launch.adapter, mcp) {
            let started = st.runtime.as_ref().and_then(|r| r.started_at);
            let tools_at = st.agent.as_ref().and_then(|a| a.tools_at);
            let connected = tools_at.is_some_and(|t| started.is_none_or(|s| t >= s));
            let waited = started.map(|t| (chrono::Utc::now() - t.0).to_std().unwrap_or_default()).unwrap_or_default();
            if !connected && waited < TOOLS_WAIT {
                let msg = "waiting for the agent's tools (aoctl mcp) before its first prompt";
                cond(st, s, types::READY, ConditionStatus::False, "WaitingForTools", msg);
                return Ok(Break(Action::requeue(Duration::from_millis(500))));
            }
            if !connected {
                let msg = format!(
                    "the agent's aoctl mcp did not connect within {}s; its first prompt is typed without its tools",
                    TOOLS_WAIT.as_secs()
                );
                ctx.recorder.publish(s, EventType::Warning, "ToolsNotConnected", &msg).await;
            }
        }
        // Prepared with the rest of the launch.
        let event = Some("the first prompt was typed and submitted".to_string());
        let how = How { prepare: false, event, ..How::of(What::Prompt) };
        if let Err(e) = keyboard.type_in(&text, &how).await {
            ctx.recorder.publish(s, EventType::Warning, "PromptNotDelivered", &e.to_string()).await;
            return Err(e.into());
        }
        Ok(Continue(()))
    }

    /// Finishes what a killed controller was typing, then types the messages of `aoctl send` that
    /// wait in the session's inbox, in order, once the first prompt was delivered. A message that
    /// was typed but not seen submitted is dropped with a warning: typing it again would repeat it.
    pub(super) async fn queued_messages(&mut self) -> Result<(), Error> {
        let (s, ctx, project, st) = (self.s, self.ctx, &self.project, &*self.st);
        let Some(rt_status) = st.runtime.as_ref() else { return Ok(()) };
        let rt = engine(self.ctx, &self.host, rt_status.kind).await?;
        let h = Handle(rt_status.handle.clone());
        let typed = typed_agent(s, ctx, project, &*rt, &h, rt_status.kind);
        let adapter = typed.adapter;
        let keyboard = Keyboard::lock(ctx.machine.typing(), typed).await;
        let files = keyboard.files();
        keyboard.recover().await?;
        let limited = st.activity.as_ref().is_some_and(|a| a.state == ActivityState::RateLimited);
        if !files.prompt_done() || limited {
            return Ok(());
        }
        let queued = files.queued().await?;
        if queued.is_empty() {
            return Ok(());
        }
        // Nothing is typed into a login screen, even one that shows after the prompt was counted.
        let at_login = condition::find(&st.conditions, types::AGENT_READY)
            .is_some_and(|c| c.reason == reasons::AGENT_NOT_LOGGED_IN);
        if at_login || adapter.is_some_and(|a| !a.login.screens.is_empty()) {
            let screen = rt.capture(&h).await?;
            if at_login || adapter.and_then(|a| aoctl_agents::logged_out(a, &screen)).is_some() {
                return Ok(());
            }
        }
        for q in queued {
            let msg = format!("typed message {} of aoctl send ({} characters)", q.seq, q.text.chars().count());
            let how = How { event: Some(msg), ..How::of(What::Queued(q.seq)) };
            match keyboard.type_in(&q.text, &how).await {
                Ok(_) => {}
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

    /// Stops an agent whose workspace was re-created under it; the runtime step restarts it.
    async fn stop_for_new_workspace(&mut self) -> Result<(), Error> {
        let (s, ctx, kind) = (self.s, self.ctx, self.runtime_kind);
        let st = &mut *self.st;
        let rt = engine(self.ctx, &self.host, kind).await?;
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

/// Whether the agent's last run ended at its start (`AgentExitedAtStart`, or `AgentNotFound` seen
/// from its exit code), so a new start does not yet prove it can run.
fn failed_at_start(st: &SessionStatus) -> bool {
    let exited = st.runtime.as_ref().is_some_and(|r| r.exit_code.is_some() || r.restarts > 0);
    condition::find(&st.conditions, types::AGENT_READY).is_some_and(|c| {
        c.status == ConditionStatus::False
            && (c.reason == reasons::AGENT_EXITED_AT_START || (c.reason == reasons::AGENT_NOT_FOUND && exited))
    })
}

/// The agent's whole environment: `set` (what the controller and the session set on purpose)
/// over the part of the controller's own environment an agent may have (`inherit`: not in a
/// container) — never the controller's secrets, the token and webhook variables of any
/// Project or GitSource, nor `AOCTL_*` (docs/security.md#what-an-agent-is-given).
async fn agent_environment(
    ctx: &Context,
    project: &aoctl_api::Project,
    launch: &Launch,
    inherit: bool,
    set: &std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    use crate::forges::{DEFAULT_GITLAB_TOKEN_ENV, DEFAULT_LINEAR_TOKEN_ENV, DEFAULT_TOKEN_ENV};
    let store = &ctx.store;
    let everything = aoctl_store::Selector::everything();
    let projects = store.list_typed::<aoctl_api::Project>(&everything).await.map(|(p, _)| p);
    let sources = store.list_typed::<aoctl_api::GitSource>(&everything).await.map(|(g, _)| g);
    // A list that failed leaves out no more than the defaults and this project's names.
    let projects = projects.unwrap_or_else(|_| vec![project.clone()]);
    let sources = sources.unwrap_or_default();
    let defaults = [DEFAULT_TOKEN_ENV, DEFAULT_GITLAB_TOKEN_ENV, DEFAULT_LINEAR_TOKEN_ENV];
    let secrets = agent_env::secret_names(&projects, &sources, &defaults);
    let keys: Vec<&str> = launch.adapter.map(|a| a.login.env.to_vec()).unwrap_or_default();
    let rules = agent_env::Rules { inherit, keys: &keys, secrets: &secrets };
    agent_env::agent_env_of_controller(&rules, set)
}

/// How to get a missing agent program: its row's pinned install command.
fn install_hint(adapter: Option<&aoctl_agents::Adapter>) -> String {
    match adapter {
        Some(a) => match a.install {
            Some(i) => format!("install {} with `{}`", a.name, i.command()),
            None => format!("install {} (no package registry ships it; see its vendor's instructions)", a.name),
        },
        None => "install it, or correct spec.agent.command or the PATH in spec.env".to_string(),
    }
}

/// The last non-blank lines the agent printed, as its terminal showed them; empty when it printed
/// nothing (or the transcript cannot be read).
async fn last_lines(transcript: std::path::PathBuf) -> String {
    let read = tokio::task::spawn_blocking(move || {
        let rows = aoctl_runtimes::TERMINAL_ROWS;
        aoctl_runtimes::transcript::tail_rendered(
            &transcript,
            Some(usize::from(rows) * 2),
            rows,
            aoctl_runtimes::TERMINAL_COLS,
        )
    })
    .await;
    let Ok(Ok((text, _))) = read else { return String::new() };
    let lines: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(LAST_LINES)..].join("\n")
}

fn fmt_code(code: Option<i32>) -> String {
    code.map_or_else(|| "unknown".to_string(), |c| c.to_string())
}

/// Records a failed start and hands the error to the engine's backoff.
async fn fail_start<T>(
    s: &Session,
    ctx: &Context,
    st: &mut SessionStatus,
    kind: RuntimeKind,
    e: aoctl_runtimes::RuntimeError,
) -> Step<T> {
    ctx.metrics.runtime_op(kind, "start", false);
    cond(st, s, types::RUNTIME_READY, ConditionStatus::False, e.reason(), e.to_string());
    cond(st, s, types::READY, ConditionStatus::False, e.reason(), "the agent could not be started");
    ctx.recorder.publish(s, EventType::Warning, "StartFailed", &e.to_string()).await;
    Err(e.into())
}

/// Answers a dialog on screen that the adapter answers by itself; true when keys were sent. Keys
/// that only move the highlight come back for another look, which submits once the screen shows
/// the wanted option highlighted.
pub(super) async fn answer_dialog(
    s: &Session,
    ctx: &Context,
    rt: &dyn Runtime,
    h: &Handle,
    adapter: &aoctl_agents::Adapter,
    screen: &str,
) -> Result<bool, Error> {
    let Some(answer) = aoctl_agents::answer_dialog(adapter, screen) else { return Ok(false) };
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
