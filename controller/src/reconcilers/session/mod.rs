//! Session reconciler. One reconcile is a list of steps, in order: finalizer → not held by another
//! node → project → the effective agent recorded → queue slot → budget → placement on a docker
//! engine → workspace → changed files and overlaps → stopped → first prompt's text → runtime →
//! first prompt → queued messages → activity, then for a reviewer its review file, for a worker
//! pull request → reviewer rounds → reactions; then the status is written, handed to the
//! notification worker, and effects run.
//! Each step either goes on or ends the reconcile with an [`Action`]; the runtime → activity steps
//! end only the agent's part, so the pull request and reactions are looked at whatever the agent
//! does.
//! It records the `Ready`, `WorkspaceReady`, `RuntimeReady`, `AgentActive` and `Stalled`
//! conditions and the phase.
//!
//! What the steps share travels in one [`Reconcile`]; what one reconcile leaves for the next is
//! the [`State`]; the machine it drives is behind [`crate::machine::Machine`].

mod activity;
mod cleanup;
mod context;
mod effects;
pub(crate) mod gc;
mod index;
mod launch;
mod login;
mod messages;
mod node;
pub(crate) mod overlap;
pub(crate) mod placement;
pub(crate) mod pr;
mod reactions;
mod reports;
mod review;
mod state;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_forge;
mod upstream;

use std::collections::BTreeMap;
use std::ops::ControlFlow::{self, Break, Continue};
use std::sync::Arc;
use std::time::Duration;

use aoctl_api::condition::{self, set_condition, types};
use aoctl_api::project::{Project, ProjectStatus};
use aoctl_api::session::{
    reasons, ActivityState, Phase, RuntimeKind, SessionRole, Usage, WorkspaceKind, WorkspaceStatus,
};
use aoctl_api::{Condition, ConditionStatus, EventType, Session, SessionStatus, Time};
use aoctl_engine::Action;
use aoctl_git::workspace::{WorkspaceInfo, WorkspaceRequest};
use aoctl_store::StoreError;

use super::Error;
pub(crate) use context::Context;
pub(crate) use index::{upstream_top, SessionIndex};
pub(crate) use state::State;

/// Name of this controller in metrics and events.
pub(crate) const NAME: &str = "session";
/// Held while the controller still has a runtime or workspace to clean up.
pub(crate) const FINALIZER: &str = aoctl_api::finalizers::SESSION_CLEANUP;

/// What a step returns: go on (with what it found), or end with this action.
type Step<T = ()> = Result<ControlFlow<Action, T>, Error>;

/// Runs a step: yields what it found, or returns its action from the enclosing function.
macro_rules! step {
    ($step:expr) => {
        match $step? {
            Continue(found) => found,
            Break(action) => return Ok(action),
        }
    };
}

/// Sets a condition stamped with the session's generation.
pub(crate) fn cond(
    st: &mut SessionStatus,
    s: &Session,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    msg: impl Into<String>,
) {
    set_condition(&mut st.conditions, Condition::new(type_, status, reason, msg, s.metadata.generation, Time::now()));
}

pub(crate) async fn reconcile(s: Arc<Session>, ctx: Arc<Context>) -> Result<Action, Error> {
    step!(finalizer(&s, &ctx).await);
    let mut st = s.status.clone();
    let mut tally = reactions::Tally::default();
    let result = drive(&s, &ctx, &mut st, &mut tally).await;
    let written = write_status(&ctx.store, &ctx.metrics, &s, st, tally).await?;
    // Once the status recording them is written, its notifications go to their worker (which
    // delivers them off this reconcile) and a decided merge is made.
    ctx.outbox.hand(&written);
    let later = effects::run(written, &ctx).await?;
    result.map(|a| earliest(a, later))
}

pub(crate) fn error_policy(_s: Arc<Session>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %error, kind = error.metric_label(), "session reconcile failed");
    Action::requeue(Duration::ZERO)
}

/// The branch a session works on: `spec.branch`, else `<sessionPrefix>/<name>`.
pub(crate) fn branch_of(s: &Session, p: &Project) -> String {
    s.spec.branch.clone().unwrap_or_else(|| {
        let prefix = p.spec.session_prefix.clone().unwrap_or_else(|| p.metadata.name.clone());
        format!("{prefix}/{}", s.metadata.name)
    })
}

/// A deleted session is cleaned up; a new one gets the finalizer first.
async fn finalizer(s: &Session, ctx: &Context) -> Step {
    if s.metadata.deletion_timestamp.is_some() {
        return cleanup::finalize(s, ctx).await.map(Break);
    }
    if !s.metadata.finalizers.iter().any(|f| f == FINALIZER) {
        // Only the finalizers are written, with the resourceVersion we read.
        let mut next = s.clone();
        next.metadata.finalizers.push(FINALIZER.to_string());
        ctx.store.update_finalizers_typed(&next).await?;
        return Ok(Break(Action::await_change()));
    }
    Ok(Continue(()))
}

/// Writes the status the steps left, with the phase it implies, when it changed; then counts the
/// reactions it records. A write refused for a newer status (409) records nothing and counts
/// nothing, and the reconcile that decides again on the newer status counts what it records.
async fn write_status(
    store: &aoctl_store::Store,
    metrics: &crate::metrics::Metrics,
    s: &Session,
    mut st: SessionStatus,
    tally: reactions::Tally,
) -> Result<Session, StoreError> {
    st.observed_generation = s.metadata.generation;
    st.phase = Some(st.derive_phase(s.spec.stopped, false));
    let mut written = s.clone();
    if st != s.status {
        written.status = st;
        written = store.update_status_typed(&written).await?;
    }
    tally.count(metrics);
    Ok(written)
}

/// The steps of a session with its project.
async fn drive(
    s: &Session,
    ctx: &Context,
    st: &mut SessionStatus,
    tally: &mut reactions::Tally,
) -> Result<Action, Error> {
    step!(node::held_elsewhere(s, ctx, st));
    let project = step!(project(s, ctx, st).await);
    Reconcile::new(s, ctx, project, st, tally).run().await
}

/// The session's project, once it is Ready.
async fn project(s: &Session, ctx: &Context, st: &mut SessionStatus) -> Step<Project> {
    let project = match ctx.store.get_typed::<Project>(&s.spec.project).await {
        Ok(p) => p,
        Err(StoreError::NotFound { .. }) => {
            let msg = format!("project \"{}\" not found", s.spec.project);
            cond(st, s, types::READY, ConditionStatus::False, "ProjectNotFound", msg);
            return Ok(Break(Action::requeue(Duration::from_secs(10))));
        }
        Err(e) => return Err(e.into()),
    };
    if !condition::is_true(&project.status.conditions, types::READY) {
        let msg = format!("waiting for project \"{}\" to be Ready", project.metadata.name);
        cond(st, s, types::READY, ConditionStatus::False, "ProjectNotReady", msg);
        return Ok(Break(Action::requeue(Duration::from_secs(5))));
    }
    Ok(Continue(project))
}

/// One reconcile of a session whose project is Ready: what its steps share.
pub(super) struct Reconcile<'a> {
    s: &'a Session,
    ctx: &'a Context,
    project: Project,
    /// The status being made; written once the steps are done.
    st: &'a mut SessionStatus,
    /// The runtime the session asks for (its own, else its project's default).
    runtime_kind: RuntimeKind,
    /// The checkout the session asks for (its own, else its project's default, else a worktree).
    workspace_kind: WorkspaceKind,
    /// Whether a rate-limited session whose limit reset may take a slot again.
    slot_free: bool,
    /// The reactions recorded, counted in the metrics once the status is written.
    tally: &'a mut reactions::Tally,
    /// The docker engine the runtime is on (`None`: the default one), from `place`.
    host: Option<String>,
    /// How soon a placed session looks at its engine again.
    host_check: Option<Duration>,
}

impl<'a> Reconcile<'a> {
    fn new(
        s: &'a Session,
        ctx: &'a Context,
        project: Project,
        st: &'a mut SessionStatus,
        tally: &'a mut reactions::Tally,
    ) -> Reconcile<'a> {
        let defaults = project.spec.defaults.as_ref();
        let runtime_kind =
            s.spec.runtime.or(defaults.and_then(|d| d.runtime)).unwrap_or(aoctl_runtimes::DEFAULT_RUNTIME);
        // An orchestrator reads the repository: its project's default checkout is a workers'.
        let default_workspace = match s.spec.role {
            SessionRole::Orchestrator => None,
            SessionRole::Worker => defaults.and_then(|d| d.workspace),
        };
        let workspace_kind = s.spec.workspace.or(default_workspace).map_or(
            match s.spec.role {
                SessionRole::Orchestrator => WorkspaceKind::Readonly,
                SessionRole::Worker => WorkspaceKind::Worktree,
            },
            |w| w.kind,
        );
        Reconcile {
            s,
            ctx,
            project,
            st,
            runtime_kind,
            workspace_kind,
            slot_free: true,
            tally,
            host: None,
            host_check: None,
        }
    }

    /// The branch the session's work is compared with: `spec.baseRef`, else the project's default.
    fn base_ref(&self) -> String {
        crate::machine::base_ref_of(self.s, Some(&self.project))
    }

    /// The steps, then what a worker keeps for its orchestrator — whichever step ended the pass
    /// (a merged pull request, a stop, an exit each end it early).
    async fn run(mut self) -> Result<Action, Error> {
        let action = self.steps().await?;
        let up = self.upstream().await?;
        Ok(earliest(action, up))
    }

    async fn steps(&mut self) -> Result<Action, Error> {
        self.st.effective_agent = Some(match crate::machine::agent_of(self.s, Some(&self.project)) {
            aoctl_api::session::AgentRef::Builtin(name) => name,
            aoctl_api::session::AgentRef::Custom { command, .. } => {
                format!("custom:{}", command.first().map_or("", String::as_str))
            }
        });
        step!(self.slot().await);
        step!(self.budget().await);
        step!(self.place().await);
        let ws = step!(self.workspace().await);
        let branched = self.workspace_kind.has_branch();
        if branched {
            // Before the stop: a stopped session's branch still overlaps its siblings'.
            self.overlap(&ws).await?;
        }
        step!(self.stopped().await);
        let prompt = step!(self.first_prompt_text().await);
        let agent = earliest(self.agent(&ws, &prompt).await?, self.host_check);
        if self.s.spec.review_of.is_some() {
            // A reviewer opens no pull request and reacts to none: it writes its review file.
            let again = self.read_review_file().await?;
            return Ok(earliest(agent, again));
        }
        if !branched {
            // No branch, so no pull request to open, review or react to.
            return Ok(agent);
        }
        let tracked = self.pull_request(&ws).await?;
        let reviews = self.review(&tracked).await?;
        let timers = self.reactions(&tracked).await?;
        Ok(earliest(earliest(earliest(agent, tracked.next), timers), reviews))
    }

    /// The agent's part: when it ends early, the pull request and reactions are still looked at.
    async fn agent(&mut self, ws: &WorkspaceInfo, prompt: &str) -> Result<Action, Error> {
        let agent = step!(self.runtime(ws, prompt).await);
        step!(self.first_prompt(&agent).await);
        self.queued_messages().await?;
        let reports = match self.s.spec.role {
            SessionRole::Orchestrator => self.deliver_reports().await?,
            SessionRole::Worker => None,
        };
        Ok(earliest(self.activity(&agent.launch).await?, reports))
    }

    /// A slot under `maxConcurrentSessions`. A rate-limited session holds none: it skips the
    /// queue while it waits for its reset, and is resumed at the reset only if a slot is free then
    /// (see `activity`).
    async fn slot(&mut self) -> Step {
        let (s, ctx, project) = (self.s, self.ctx, &self.project);
        let rate_limited = self.st.activity.as_ref().is_some_and(|a| a.state == ActivityState::RateLimited);
        if rate_limited {
            self.slot_free = free_slot(project, ctx).await?;
        } else if let Some(rank) = queue_rank(s, project, ctx).await? {
            let max = project.spec.max_concurrent_sessions.unwrap_or(u32::MAX);
            let msg = format!(
                "position {} in the queue of project \"{}\" (maxConcurrentSessions: {max})",
                rank + 1,
                project.metadata.name
            );
            cond(self.st, s, types::READY, ConditionStatus::False, reasons::QUEUED, msg);
            return Ok(Break(Action::requeue(Duration::from_secs(10))));
        }
        Ok(Continue(()))
    }

    /// A spent budget stops new work: a session not started yet waits; running ones go on.
    async fn budget(&mut self) -> Step {
        if self.st.runtime.is_some() {
            return Ok(Continue(()));
        }
        if let Some(why) = budget_spent(&self.project, self.ctx).await? {
            let msg = format!("the budget of project \"{}\" is spent: {why}", self.project.metadata.name);
            cond(self.st, self.s, types::READY, ConditionStatus::False, reasons::BUDGET_SPENT, msg);
            return Ok(Break(Action::requeue(Duration::from_secs(30))));
        }
        Ok(Continue(()))
    }

    /// The session's checkout, made (again) when it is missing.
    async fn workspace(&mut self) -> Step<WorkspaceInfo> {
        let base_ref = self.base_ref();
        let (s, ctx, project) = (self.s, self.ctx, &self.project);
        let st = &mut *self.st;
        let kind = self.workspace_kind;
        let req = WorkspaceRequest {
            project: project.metadata.name.clone(),
            session: s.metadata.name.clone(),
            repo: project.spec.path.clone().into(),
            branch: if kind.has_branch() { branch_of(s, project) } else { String::new() },
            base_ref,
            kind,
            setup: project.spec.setup.clone(),
            // A container gets a sandboxed checkout: nothing of the main repository is writable in it.
            sandbox: self.runtime_kind == RuntimeKind::Docker,
            pool: project.spec.workspace_pool.as_ref().is_some_and(|p| p.size > 0),
        };
        let pooling = req.pool && req.kind == WorkspaceKind::Worktree && !req.sandbox;
        if let Some(gone) = workspace_gone(&self.ctx.machine, st).await {
            // Said before it is made again, so the status shows the loss even when the new checkout
            // follows at once.
            let reason = reasons::WORKSPACE_MISSING;
            let msg = format!("the workspace folder {gone} was deleted; it is made again");
            cond(st, s, types::WORKSPACE_READY, ConditionStatus::False, reason, msg.clone());
            cond(st, s, types::READY, ConditionStatus::False, reason, msg.clone());
            ctx.recorder.publish(s, EventType::Warning, reason, &msg).await;
            return Ok(Break(Action::requeue(Duration::ZERO)));
        }
        let machine = ctx.machine.clone();
        let started = std::time::Instant::now();
        let ensured = tokio::task::spawn_blocking(move || machine.workspaces().ensure(&req)).await?;
        tracing::debug!(took = ?started.elapsed(), "workspace ensured");
        let ws = match ensured {
            Ok(ws) => ws,
            Err(e) => {
                let first =
                    condition::find(&st.conditions, types::WORKSPACE_READY).is_none_or(|c| c.reason != e.reason());
                cond(st, s, types::WORKSPACE_READY, ConditionStatus::False, e.reason(), e.to_string());
                cond(st, s, types::READY, ConditionStatus::False, e.reason(), "the workspace could not be prepared");
                if first {
                    ctx.recorder.publish(s, EventType::Warning, e.reason(), &e.to_string()).await;
                }
                return Ok(Break(Action::requeue(Duration::from_secs(60))));
            }
        };
        if ws.created {
            let from = if ws.pooled { " (from the warm pool)" } else { "" };
            let msg = format!("{} {}{from}", ws.path.display(), on_branch(kind, &ws));
            ctx.recorder.publish(s, EventType::Normal, "WorkspaceCreated", &msg).await;
            if pooling {
                let result = if ws.pooled { "claimed" } else { "missed" };
                ctx.metrics.workspace_pool_claims.with_label_values(&[s.spec.project.as_str(), result]).inc();
            }
        }
        if let Some(e) = &ws.sync_error {
            ctx.recorder.publish(s, EventType::Warning, "BranchNotMoved", e).await;
        }
        let msg = format!("{} at {} {}", kind.as_str(), ws.path.display(), on_branch(kind, &ws));
        cond(st, s, types::WORKSPACE_READY, ConditionStatus::True, "WorkspaceReady", msg);
        st.workspace = Some(WorkspaceStatus {
            path: ws.path.display().to_string(),
            branch: ws.branch.clone(),
            head_sha: ws.head_sha.clone(),
        });
        Ok(Continue(ws))
    }

    /// The first prompt: the session's, with its issue's title, labels and body. An agent not
    /// started yet waits for the issue while the tracker does not answer.
    async fn first_prompt_text(&mut self) -> Step<String> {
        let issue = match self.issue().await {
            pr::IssueRead::Read(issue) => Some(issue),
            pr::IssueRead::Unread => None,
            pr::IssueRead::Unavailable if self.st.runtime.is_none() => {
                let msg = "waiting to read the issue for the first prompt (see IssueOpen)";
                cond(self.st, self.s, types::READY, ConditionStatus::False, "WaitingForIssue", msg);
                return Ok(Break(Action::requeue(Duration::from_secs(10))));
            }
            pr::IssueRead::Unavailable => None,
        };
        let spec = &self.s.spec;
        Ok(Continue(messages::first_prompt(spec.prompt.as_deref(), spec.issue.as_deref(), issue.as_deref())))
    }
}

/// The session's agent as [`crate::typing`] types into it: its runtime `rt` (of `kind`) and
/// handle `h`, the input style and adapter of the agent the session runs, the metrics and events.
fn typed_agent<'a>(
    s: &'a Session,
    ctx: &'a Context,
    project: &Project,
    rt: &'a dyn aoctl_runtimes::Runtime,
    h: &'a aoctl_runtimes::Handle,
    kind: RuntimeKind,
) -> crate::typing::Agent<'a> {
    let (style, adapter) = crate::machine::input_style(&crate::machine::agent_of(s, Some(project)));
    let (metrics, recorder) = (&*ctx.metrics, Some(&ctx.recorder));
    let files = ctx.machine.files().typing(&s.metadata.name);
    crate::typing::Agent { session: s, files, rt, handle: h, kind, style, adapter, metrics, recorder }
}

/// The path of a workspace that was ready and whose folder no longer exists.
async fn workspace_gone(machine: &Arc<dyn crate::machine::Machine>, st: &SessionStatus) -> Option<String> {
    if !condition::is_true(&st.conditions, types::WORKSPACE_READY) {
        return None;
    }
    let path = st.workspace.as_ref()?.path.clone();
    let machine = machine.clone();
    let gone =
        tokio::task::spawn_blocking(move || machine.workspaces().is_gone(std::path::Path::new(&path)).then_some(path));
    gone.await.unwrap_or(None)
}

/// The sooner of an action and an optional delay.
fn earliest(a: Action, b: Option<Duration>) -> Action {
    match (a.requeue_after(), b) {
        (Some(x), Some(y)) => Action::requeue(x.min(y)),
        (None, Some(y)) => Action::requeue(y),
        _ => a,
    }
}

/// `None` when the session may run; `Some(rank)` when it waits behind `maxConcurrentSessions`.
/// A stopped session holds no slot and waits for none: its agent is stopped at once.
async fn queue_rank(s: &Session, project: &Project, ctx: &Context) -> Result<Option<usize>, Error> {
    let Some(max) = project.spec.max_concurrent_sessions else { return Ok(None) };
    if s.spec.stopped || s.spec.role == SessionRole::Orchestrator {
        return Ok(None);
    }
    let (project, name) = (&project.metadata.name, &s.metadata.name);
    let rank = ctx.index.read(&ctx.store, |i| i.rank(project, name)).await?;
    Ok((rank >= max as usize).then(|| rank - max as usize))
}

/// Whether a rate-limited session may take a slot again: fewer sessions than
/// `maxConcurrentSessions` hold or wait for one. Sessions queued before it go first.
async fn free_slot(project: &Project, ctx: &Context) -> Result<bool, Error> {
    let Some(max) = project.spec.max_concurrent_sessions else { return Ok(true) };
    let contenders = ctx.index.read(&ctx.store, |i| i.contenders(&project.metadata.name)).await?;
    Ok(contenders < max as usize)
}

/// Why the project's budget is spent, or `None` while some is left (or it has none).
async fn budget_spent(project: &Project, ctx: &Context) -> Result<Option<String>, Error> {
    let Some(budget) = &project.spec.budget else { return Ok(None) };
    let used = ctx.index.read(&ctx.store, |i| i.account(&project.metadata.name, &project.status).total).await?;
    Ok(budget.spent(&used))
}

/// A project's usage: its stored sessions' and its deleted sessions'.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Account {
    /// Everything added up.
    pub total: Usage,
    /// What sessions that are gone used (`status.retiredUsage`).
    pub retired: Usage,
    /// What was counted for each stored session, by uid (`status.sessionUsage`).
    pub counted: BTreeMap<String, Usage>,
}

/// Where a checkout stands, for messages: `on branch demo/fix`, `at no branch (a1b2c3d)`, or
/// `outside git` for an empty folder.
fn on_branch(kind: WorkspaceKind, ws: &WorkspaceInfo) -> String {
    match kind {
        WorkspaceKind::None => "outside git".to_string(),
        WorkspaceKind::Readonly => {
            let sha = ws.head_sha.as_deref().map_or("", |s| &s[..s.len().min(7)]);
            format!("at no branch ({sha})")
        }
        WorkspaceKind::Worktree | WorkspaceKind::Clone => format!("on branch {}", ws.branch),
    }
}

/// The usage of `project` from its stored sessions and what its status counted before: a
/// session counts the larger of what it shows and what was counted for it (a figure read lower
/// for a moment gives nothing back), and a session no longer stored moves its last counted usage
/// into `retired`, so deleting a session never lowers the total.
#[cfg(test)]
pub(crate) fn account<'a>(
    project: &str,
    before: &ProjectStatus,
    sessions: impl Iterator<Item = &'a serde_json::Value>,
) -> Account {
    let shown =
        sessions.filter(|o| o.pointer("/spec/project").and_then(|p| p.as_str()) == Some(project)).filter_map(|o| {
            let uid = o.pointer("/metadata/uid").and_then(|u| u.as_str())?;
            Some((uid, o.pointer("/status/usage").and_then(|u| <Usage as serde::Deserialize>::deserialize(u).ok())))
        });
    account_of(before, shown)
}

/// [`account`] from the uid and shown usage of each stored session of the project; a session
/// that shows none need only be given when `before` counted it.
pub(crate) fn account_of<'a>(
    before: &ProjectStatus,
    sessions: impl Iterator<Item = (&'a str, Option<Usage>)>,
) -> Account {
    let mut counted = BTreeMap::new();
    for (uid, shown) in sessions {
        let earlier = before.session_usage.get(uid);
        let usage = match (shown, earlier) {
            (Some(s), Some(e)) => s.max(e),
            (Some(s), None) => s,
            (None, Some(e)) => e.clone(),
            (None, None) => continue,
        };
        if usage != Usage::default() {
            counted.insert(uid.to_string(), usage);
        }
    }
    let mut retired = before.retired_usage.clone().unwrap_or_default();
    for (uid, usage) in &before.session_usage {
        if !counted.contains_key(uid) {
            retired.add(usage);
        }
    }
    let mut total = retired.clone();
    counted.values().for_each(|u| total.add(u));
    Account { total, retired, counted }
}

/// Whether a stored Session holds or waits for a slot under `maxConcurrentSessions`: it is a
/// worker (the orchestrator directs them and takes none of their slots), not stopped, not being
/// deleted, not finished and not rate-limited (an agent waiting for its usage limit to reset does
/// no work; it takes a slot again when it is resumed).
pub(crate) fn holds_slot(o: &serde_json::Value) -> bool {
    if o.pointer("/spec/role").and_then(|v| v.as_str()) == Some("orchestrator") {
        return false;
    }
    let stopped = o.pointer("/spec/stopped").and_then(|v| v.as_bool()).unwrap_or(false);
    let deleting = o.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null());
    let phase = o.pointer("/status/phase").and_then(|p| p.as_str()).unwrap_or_default();
    let finished = [Phase::Merged, Phase::Closed, Phase::Failed].iter().any(|p| p.as_str() == phase);
    let activity = o.pointer("/status/activity/state").and_then(|p| p.as_str()).unwrap_or_default();
    let rate_limited = activity == ActivityState::RateLimited.as_str();
    !stopped && !deleting && !finished && !rate_limited
}

#[cfg(test)]
mod unit_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rate_limited_sessions_hold_no_slot() {
        let working =
            json!({"spec": {"project": "p"}, "status": {"phase": "Working", "activity": {"state": "working"}}});
        assert!(holds_slot(&working));
        let queued = json!({"spec": {"project": "p"}, "status": {"phase": "Queued"}});
        assert!(holds_slot(&queued), "a queued session waits for a slot");
        let limited = json!({"spec": {"project": "p"}, "status": {"phase": "RateLimited", "activity": {"state": "rate-limited"}}});
        assert!(!holds_slot(&limited));
        let waiting =
            json!({"spec": {"project": "p"}, "status": {"phase": "Queued", "activity": {"state": "rate-limited"}}});
        assert!(!holds_slot(&waiting), "reset, but waiting for a slot to resume in");
        let stopped = json!({"spec": {"project": "p", "stopped": true}, "status": {"phase": "Stopped"}});
        assert!(!holds_slot(&stopped));
    }

    #[test]
    fn usage_adds_up_per_project_and_a_deleted_session_keeps_its_share() {
        let a = json!({"metadata": {"uid": "a"}, "spec": {"project": "p"},
            "status": {"usage": {"inputTokens": 10, "outputTokens": 5, "costUSD": 0.5}}});
        let b = json!({"metadata": {"uid": "b"}, "spec": {"project": "p"},
            "status": {"usage": {"inputTokens": 1, "outputTokens": 1}}});
        let other = json!({"metadata": {"uid": "o"}, "spec": {"project": "q"},
            "status": {"usage": {"inputTokens": 100, "outputTokens": 100}}});
        let none = json!({"metadata": {"uid": "n"}, "spec": {"project": "p"}});
        let all = [a.clone(), b, other, none];
        let first = account("p", &ProjectStatus::default(), all.iter());
        let u = &first.total;
        assert_eq!((u.input_tokens, u.output_tokens, u.cost_usd), (11, 6, Some(0.5)));
        assert_eq!(first.counted.keys().collect::<Vec<_>>(), ["a", "b"]);

        // `b` is deleted and `a` shows less for a moment: neither lowers the total.
        let before = ProjectStatus { session_usage: first.counted.clone(), ..Default::default() };
        let lower = json!({"metadata": {"uid": "a"}, "spec": {"project": "p"},
            "status": {"usage": {"inputTokens": 3, "outputTokens": 1}}});
        let then = account("p", &before, [lower].iter());
        assert_eq!((then.total.input_tokens, then.total.output_tokens), (11, 6));
        assert_eq!((then.retired.input_tokens, then.retired.output_tokens), (1, 1));
        assert_eq!(then.counted.keys().collect::<Vec<_>>(), ["a"]);

        // Once retired, `b` stays counted; `a` grows.
        let before = ProjectStatus {
            session_usage: then.counted.clone(),
            retired_usage: Some(then.retired.clone()),
            ..Default::default()
        };
        let more = json!({"metadata": {"uid": "a"}, "spec": {"project": "p"},
            "status": {"usage": {"inputTokens": 20, "outputTokens": 5}}});
        let last = account("p", &before, [more].iter());
        assert_eq!((last.total.input_tokens, last.total.output_tokens), (21, 6));
        assert!(account("p", &before, [].iter()).counted.is_empty());
    }
}
