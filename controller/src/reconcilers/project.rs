//! Project reconciler: checks `spec.path` is the top of a git repository, resolves the default
//! branch, and sets the `Ready` condition, `status.defaultBranch` and `observedGeneration`; adds
//! up its sessions' usage into `status.usage` and, with a `budget`, sets `BudgetSpent` and tells
//! the notifiers once when it becomes spent (recorded in `status.notifications`, then delivered);
//! keeps its warm pool of worktrees (`pool`); and shows the rate budget of its forge's token and
//! what it spent of it in the last hour (`status.forgeBudget`, looked at every minute); and keeps
//! its orchestrator Session in line with `spec.orchestrator` (`orchestrator`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use aoctl_api::condition::{self, set_condition, types};
use aoctl_api::{Condition, ConditionStatus, EventType, Project, ProjectStatus, Time};
use aoctl_engine::Action;
use aoctl_git::repository::GitError;

use super::Error;
use crate::machine::Branches;
use crate::notifiers;
use crate::recorder::Recorder;

/// Name of this controller in metrics and events.
pub(crate) const NAME: &str = "project";

/// What the project reconciler gets: the store, the event recorder and the index of the sessions.
pub(crate) struct Context {
    pub store: aoctl_store::Store,
    pub recorder: Recorder,
    /// The stored sessions by project, shared with the session reconciler.
    pub sessions: Arc<super::session::SessionIndex>,
    /// The machine whose workspaces hold the warm pools.
    pub machine: Arc<dyn crate::machine::Machine>,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The projects' forges, whose budgets the status shows.
    pub forges: Arc<crate::forges::Hub>,
    /// When each project's `status.forgeBudget` was last renewed: at most once a minute, so a
    /// reconcile that a session's change asked for does not write it for every request counted.
    pub budget_shown: parking_lot::Mutex<std::collections::HashMap<String, std::time::Instant>>,
    /// Hands a project whose written status records notifications to the worker that delivers them.
    pub outbox: crate::outbox::Handoff,
}

/// The project's `status.forgeBudget`: renewed when a minute has passed since it last was (or it
/// appears or goes), else as it stands.
fn renewed_budget(project: &Project, ctx: &Context) -> Option<aoctl_api::project::ForgeBudgetStatus> {
    let spec = &project.spec;
    let has_forge = spec.repo.is_some() || spec.gitlab.is_some() || spec.linear.is_some();
    let mut shown = ctx.budget_shown.lock();
    let name = &project.metadata.name;
    let recent = shown.get(name).is_some_and(|at| at.elapsed() < BUDGET_EVERY);
    // Between renewals nothing is computed: the reconciles a session's change asks for cost no
    // copy of the budget's counters.
    if recent && has_forge == project.status.forge_budget.is_some() {
        return project.status.forge_budget.clone();
    }
    shown.insert(name.clone(), std::time::Instant::now());
    forge_budget(project, &ctx.forges)
}

/// How often a project with a forge looks at its token's budget again.
const BUDGET_EVERY: Duration = Duration::from_secs(60);

/// The rate budget of the project's forge (its tracker's when it has only that), as its status
/// shows it; `None` without either.
fn forge_budget(project: &Project, forges: &crate::forges::Hub) -> Option<aoctl_api::project::ForgeBudgetStatus> {
    let (service, budget) = match forges.forge(project) {
        Ok(Some(f)) => (f.name(), f.budget().clone()),
        _ => match forges.tracker(project) {
            Ok(Some(t)) => (t.name(), t.budget().clone()),
            _ => return None,
        },
    };
    let stats = budget.stats();
    let windows = stats
        .windows
        .iter()
        .filter(|(_, w)| w.remaining.is_some() || w.limit.is_some())
        .map(|(resource, w)| aoctl_api::project::RateWindow {
            resource: resource.clone(),
            limit: w.limit,
            remaining: w.remaining,
            reset_at: w.reset_at.map(Time),
        })
        .collect();
    let pace = budget.pace(aoctl_forge_core::CORE).max(budget.pace("graphql"));
    Some(aoctl_api::project::ForgeBudgetStatus {
        service: service.to_string(),
        windows,
        spent_last_hour: budget.spent_last_hour(&project.metadata.name),
        token_spent_last_hour: stats.spent_last_hour,
        slowdown: (pace > 1.0).then(|| (pace * 10.0).round() / 10.0),
        polls_held: !(budget.polls_allowed(aoctl_forge_core::CORE) && budget.polls_allowed("graphql")),
    })
}

/// What the repository check found.
struct Observed {
    ready: ConditionStatus,
    reason: &'static str,
    message: String,
    default_branch: Option<String>,
    head_sha: Option<String>,
}

fn observe(git: &dyn Branches, spec_path: &str, wanted_branch: Option<&str>) -> Observed {
    let fail = |reason, message: String| Observed {
        ready: ConditionStatus::False,
        reason,
        message,
        default_branch: wanted_branch.map(str::to_string),
        head_sha: None,
    };
    let path = Path::new(spec_path);
    let info = match git.inspect(path) {
        Ok(i) => i,
        Err(e) => return fail(e.reason(), e.to_string()),
    };
    let canonical = git.canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if info.root != canonical {
        return fail(
            "NotRepositoryRoot",
            format!("{spec_path} is inside the repository {}; use its top folder", info.root.display()),
        );
    }
    let Some(branch) = wanted_branch.map(str::to_string).or(info.default_branch) else {
        return fail("DefaultBranchUnknown", format!("{spec_path}: no default branch found; set spec.defaultBranch"));
    };
    match git.resolve_branch(&info.root, &branch) {
        Ok(sha) => Observed {
            ready: ConditionStatus::True,
            reason: "RepositoryReady",
            message: format!("default branch {branch} at {}", &sha[..sha.len().min(12)]),
            default_branch: Some(branch),
            head_sha: Some(sha),
        },
        Err(e @ GitError::BranchNotFound { .. }) => {
            let mut o = fail(e.reason(), e.to_string());
            o.default_branch = Some(branch);
            o
        }
        Err(e) => fail(e.reason(), e.to_string()),
    }
}

pub(crate) async fn reconcile(project: Arc<Project>, ctx: Arc<Context>) -> Result<Action, Error> {
    if project.metadata.deletion_timestamp.is_some() {
        super::pool::release(&project, &ctx.store, &ctx.machine).await?;
        ctx.metrics.workspace_pool(&project.metadata.name, None);
        return Ok(Action::await_change());
    }
    if super::pool::hold(&project, &ctx.store).await? {
        return Ok(Action::await_change());
    }
    let path = project.spec.path.clone();
    let wanted = project.spec.default_branch.clone();
    let machine = ctx.machine.clone();
    let seen = tokio::task::spawn_blocking(move || observe(machine.branches(), &path, wanted.as_deref())).await?;
    let (pool, pool_after) = match seen.ready {
        ConditionStatus::True => super::pool::tend(&project, seen.default_branch.as_deref(), &ctx.machine).await,
        _ => (project.status.workspace_pool.clone(), None),
    };
    ctx.metrics.workspace_pool(&project.metadata.name, pool.as_ref().map(|p| (p.size, p.ready)));

    // Counted in the index of the sessions, which the store's changes keep: no list of them all.
    let mine = &project.metadata.name;
    let (count, account) =
        ctx.sessions.read(&ctx.store, |i| (i.sessions(mine), i.account(mine, &project.status))).await?;
    let used = account.total;
    let spent = project.spec.budget.as_ref().and_then(|b| b.spent(&used));

    let generation = project.metadata.generation;
    let mut status = project.status.clone();
    let was_ready = condition::find(&status.conditions, types::READY).map(|c| (c.status, c.reason.clone()));
    set_condition(
        &mut status.conditions,
        Condition::new(types::READY, seen.ready, seen.reason, seen.message.clone(), generation, Time::now()),
    );
    status = ProjectStatus {
        observed_generation: generation,
        default_branch: seen.default_branch,
        head_sha: seen.head_sha,
        sessions: Some(count as u32),
        usage: (used != Default::default()).then(|| used.clone()),
        retired_usage: (account.retired != Default::default()).then_some(account.retired),
        session_usage: account.counted,
        workspace_pool: pool,
        forge_budget: renewed_budget(&project, &ctx),
        ..status
    };
    let was_spent = condition::is_true(&status.conditions, types::BUDGET_SPENT);
    match (&project.spec.budget, &spent) {
        (Some(_), Some(why)) => {
            let c = Condition::new(
                types::BUDGET_SPENT,
                ConditionStatus::True,
                "BudgetSpent",
                why.clone(),
                generation,
                Time::now(),
            );
            set_condition(&mut status.conditions, c);
        }
        (Some(_), None) => {
            let c =
                Condition::new(types::BUDGET_SPENT, ConditionStatus::False, "BudgetLeft", "", generation, Time::now());
            set_condition(&mut status.conditions, c);
        }
        (None, _) => status.conditions.retain(|c| c.type_ != types::BUDGET_SPENT),
    }
    // Told once: when the condition turns True. The notification is recorded in the same status
    // write and delivered after it.
    let newly_spent = spent.as_ref().filter(|_| !was_spent);
    if let Some(why) = newly_spent {
        let since = condition::find(&status.conditions, types::BUDGET_SPENT).map(|c| c.last_transition_time);
        let uid = project.metadata.uid.as_deref().unwrap_or(&project.metadata.name);
        let key = format!("{uid}:budget-spent:{}:notify", since.unwrap_or_else(Time::now));
        let n = notifiers::record(
            key,
            "budget-spent",
            format!("the budget of project {} is spent", project.metadata.name),
            format!("new sessions wait until the budget is raised: {why}"),
            None,
            false,
            &project.spec.notifiers,
        );
        if let Some(n) = n {
            notifiers::enqueue(&mut status.notifications, n);
        }
    }
    let mut written = (*project).clone();
    if status != project.status {
        written.status = status;
        written = ctx.store.update_status_typed(&written).await?;
        if was_ready != Some((seen.ready, seen.reason.to_string())) {
            let type_ = if seen.ready == ConditionStatus::True { EventType::Normal } else { EventType::Warning };
            ctx.recorder.publish(&*project, type_, seen.reason, &seen.message).await;
        }
        if let Some(why) = newly_spent {
            let msg = format!("new sessions wait until the budget is raised: {why}");
            ctx.recorder.publish(&*project, EventType::Warning, "BudgetSpent", &msg).await;
        }
    }
    super::orchestrator::keep(&project, seen.ready == ConditionStatus::True, &ctx.store, &ctx.recorder).await?;
    let budget_after = written.status.forge_budget.as_ref().map(|_| BUDGET_EVERY);
    // Its notifications go out from their own worker, off this reconcile.
    ctx.outbox.hand(&written);
    // A missing or broken repository may be fixed at any time: look again soon.
    let every = match seen.ready {
        ConditionStatus::True => Duration::from_secs(300),
        _ => Duration::from_secs(15),
    };
    let later = [pool_after, budget_after].into_iter().flatten().min();
    Ok(Action::requeue(later.map_or(every, |l| l.min(every))))
}

pub(crate) fn error_policy(_project: Arc<Project>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %error, kind = error.metric_label(), "project reconcile failed");
    // The engine's per-object exponential backoff decides when to try again.
    Action::requeue(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Git;
    use std::process::Command;

    #[test]
    fn observes_repositories() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo");
        let p = dir.to_str().unwrap();
        assert_eq!(observe(&Git, p, None).reason, "RepositoryNotFound");
        std::fs::create_dir(&dir).unwrap();
        assert_eq!(observe(&Git, p, None).reason, "NotAGitRepository");
        let git =
            |args: &[&str]| assert!(Command::new("git").arg("-C").arg(&dir).args(args).status().unwrap().success());
        git(&["init", "-q", "-b", "main"]);
        assert_eq!(observe(&Git, p, None).reason, "BranchNotFound");
        git(&["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "x"]);
        let o = observe(&Git, p, None);
        assert_eq!(
            (o.ready, o.reason, o.default_branch.as_deref()),
            (ConditionStatus::True, "RepositoryReady", Some("main"))
        );
        assert_eq!(observe(&Git, p, Some("develop")).reason, "BranchNotFound");
        std::fs::create_dir(dir.join("sub")).unwrap();
        assert_eq!(observe(&Git, dir.join("sub").to_str().unwrap(), None).reason, "NotRepositoryRoot");
    }
}
