//! Project reconciler: checks `spec.path` is the top of a git repository, resolves the default
//! branch, and sets the `Ready` condition, `status.defaultBranch` and `observedGeneration`; adds
//! up its sessions' usage into `status.usage` and, with a `budget`, sets `BudgetSpent` and tells
//! the notifiers once when it becomes spent (recorded in `status.notifications`, then delivered);
//! keeps its warm pool of worktrees (`pool`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use aoctl_api::condition::{self, set_condition, types};
use aoctl_api::{Condition, ConditionStatus, EventType, Project, ProjectStatus, Time};
use aoctl_engine::Action;
use aoctl_runtimes::git::{self, GitError};

use super::Error;
use crate::notify;
use crate::recorder::Recorder;

/// Name of this controller in metrics and events.
pub const NAME: &str = "project";

/// What the project reconciler gets: the store, the event recorder and the index of the sessions.
pub struct Context {
    pub store: aoctl_store::Store,
    pub recorder: Recorder,
    /// The stored sessions by project, shared with the session reconciler.
    pub sessions: Arc<super::session::SessionIndex>,
    /// The machine whose workspaces hold the warm pools.
    pub machine: Arc<dyn crate::machine::Machine>,
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// What the repository check found.
struct Observed {
    ready: ConditionStatus,
    reason: &'static str,
    message: String,
    default_branch: Option<String>,
    head_sha: Option<String>,
}

fn observe(spec_path: &str, wanted_branch: Option<&str>) -> Observed {
    let fail = |reason, message: String| Observed {
        ready: ConditionStatus::False,
        reason,
        message,
        default_branch: wanted_branch.map(str::to_string),
        head_sha: None,
    };
    let path = Path::new(spec_path);
    let info = match git::inspect(path) {
        Ok(i) => i,
        Err(e) => return fail(e.reason(), e.to_string()),
    };
    let canonical = aoctl_runtimes::git::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if info.root != canonical {
        return fail(
            "NotRepositoryRoot",
            format!("{spec_path} is inside the repository {}; use its top folder", info.root.display()),
        );
    }
    let Some(branch) = wanted_branch.map(str::to_string).or(info.default_branch) else {
        return fail("DefaultBranchUnknown", format!("{spec_path}: no default branch found; set spec.defaultBranch"));
    };
    match git::resolve_branch(&info.root, &branch) {
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

pub async fn reconcile(project: Arc<Project>, ctx: Arc<Context>) -> Result<Action, Error> {
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
    let seen = tokio::task::spawn_blocking(move || observe(&path, wanted.as_deref())).await?;
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
        let n = notify::record(
            key,
            "budget-spent",
            format!("the budget of project {} is spent", project.metadata.name),
            format!("new sessions wait until the budget is raised: {why}"),
            None,
            false,
            &project.spec.notifiers,
        );
        if let Some(n) = n {
            notify::enqueue(&mut status.notifications, n);
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
    let later = deliver(written, &ctx).await?;
    // A missing or broken repository may be fixed at any time: look again soon.
    let every = match seen.ready {
        ConditionStatus::True => Duration::from_secs(300),
        _ => Duration::from_secs(15),
    };
    let later = [later, pool_after].into_iter().flatten().min();
    Ok(Action::requeue(later.map_or(every, |l| l.min(every))))
}

/// Delivers the project's pending notifications and writes the results; when to look again.
async fn deliver(project: Project, ctx: &Context) -> Result<Option<Duration>, Error> {
    if project.status.notifications.iter().all(|n| n.settled()) {
        return Ok(None);
    }
    let mut next = project.clone();
    let now = Time::now();
    let (targets, name) = (&project.spec.notifiers, &project.metadata.name);
    let pass = notify::deliver_due(&mut next.status.notifications, targets, name, "", now).await;
    for msg in &pass.given_up {
        ctx.recorder.publish(&project, EventType::Warning, "NotifyFailed", msg).await;
    }
    notify::prune(&mut next.status.notifications, now);
    let later = notify::next_due(&next.status.notifications, now);
    if next.status != project.status {
        match ctx.store.update_status_typed(&next).await {
            Ok(_) => {}
            // Written again by the next reconcile: a resend carries the same key.
            Err(e) if e.is_conflict() => return Ok(Some(Duration::ZERO)),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(later)
}

pub fn error_policy(_project: Arc<Project>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %error, kind = error.metric_label(), "project reconcile failed");
    // The engine's per-object exponential backoff decides when to try again.
    Action::requeue(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn observes_repositories() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo");
        let p = dir.to_str().unwrap();
        assert_eq!(observe(p, None).reason, "RepositoryNotFound");
        std::fs::create_dir(&dir).unwrap();
        assert_eq!(observe(p, None).reason, "NotAGitRepository");
        let git =
            |args: &[&str]| assert!(Command::new("git").arg("-C").arg(&dir).args(args).status().unwrap().success());
        git(&["init", "-q", "-b", "main"]);
        assert_eq!(observe(p, None).reason, "BranchNotFound");
        git(&["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "x"]);
        let o = observe(p, None);
        assert_eq!(
            (o.ready, o.reason, o.default_branch.as_deref()),
            (ConditionStatus::True, "RepositoryReady", Some("main"))
        );
        assert_eq!(observe(p, Some("develop")).reason, "BranchNotFound");
        std::fs::create_dir(dir.join("sub")).unwrap();
        assert_eq!(observe(dir.join("sub").to_str().unwrap(), None).reason, "NotRepositoryRoot");
    }
}
