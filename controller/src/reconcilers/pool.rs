//! The project reconciler's warm pool step: keeps `spec.workspacePool.size` worktrees ready at
//! the default branch's head (one round of upkeep per reconcile, at once again while work is
//! left), reports them in `status.workspacePool`, and removes them when the pool is turned off
//! or the Project is deleted (the `ao.dev/workspace-pool` finalizer).

use std::sync::Arc;
use std::time::Duration;

use aoctl_api::finalizers::{self, WORKSPACE_POOL};
use aoctl_api::project::WorkspacePoolStatus;
use aoctl_api::Project;
use aoctl_git::workspace::PoolRequest;

use super::Error;
use crate::machine::Machine;

/// How often a full pool looks whether the default branch moved.
pub(super) const RESYNC: Duration = Duration::from_secs(10);
/// How long a round that failed waits before the next.
const RETRY: Duration = Duration::from_secs(30);

/// The pool's size, when one is asked for.
fn wanted(p: &Project) -> Option<u32> {
    p.spec.workspace_pool.as_ref().map(|w| w.size).filter(|&n| n > 0)
}

/// Adds the pool's finalizer before anything of the pool is made; `true` when it was written
/// now (the reconcile ends and runs again on the change).
pub(super) async fn hold(p: &Project, store: &aoctl_store::Store) -> Result<bool, Error> {
    if wanted(p).is_none() || finalizers::holds(&p.metadata.finalizers, WORKSPACE_POOL) {
        return Ok(false);
    }
    let mut next = p.clone();
    next.metadata.finalizers.push(WORKSPACE_POOL.to_string());
    store.update_finalizers_typed(&next).await?;
    Ok(true)
}

/// A deleted Project's pool is removed, then its finalizer released.
pub(super) async fn release(p: &Project, store: &aoctl_store::Store, machine: &Arc<dyn Machine>) -> Result<(), Error> {
    if !finalizers::holds(&p.metadata.finalizers, WORKSPACE_POOL) {
        return Ok(());
    }
    let (m, name) = (machine.clone(), p.metadata.name.clone());
    let removed = tokio::task::spawn_blocking(move || m.workspaces().drain_pool(&name)).await??;
    tracing::info!(project = %p.metadata.name, removed, "removed the warm pool of a deleted project");
    let mut next = p.clone();
    next.metadata.finalizers.retain(|f| f != WORKSPACE_POOL);
    store.update_finalizers_typed(&next).await?;
    Ok(())
}

/// One round of upkeep on a ready project (`default_branch` resolved): the status to show and
/// when to look again. A project without a pool has what is left of one removed.
pub(super) async fn tend(
    p: &Project,
    default_branch: Option<&str>,
    machine: &Arc<dyn Machine>,
) -> (Option<WorkspacePoolStatus>, Option<Duration>) {
    let m = machine.clone();
    let Some(size) = wanted(p) else {
        let name = p.metadata.name.clone();
        match tokio::task::spawn_blocking(move || m.workspaces().drain_pool(&name)).await {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::info!(project = %p.metadata.name, removed = n, "removed the warm pool's worktrees"),
            Ok(Err(e)) => tracing::warn!(project = %p.metadata.name, error = %e, "cannot remove the warm pool"),
            Err(e) => tracing::warn!(project = %p.metadata.name, error = %e, "cannot remove the warm pool"),
        }
        return (None, None);
    };
    let Some(base) = default_branch else {
        let message = Some("the default branch is not known yet".to_string());
        return (Some(WorkspacePoolStatus { size, ready: 0, message }), Some(RETRY));
    };
    let req = PoolRequest {
        project: p.metadata.name.clone(),
        repo: p.spec.path.clone().into(),
        base_ref: base.to_string(),
        size,
        setup: p.spec.setup.clone(),
    };
    let ready = p.status.workspace_pool.as_ref().map_or(0, |s| s.ready);
    match tokio::task::spawn_blocking(move || m.workspaces().tend_pool(&req)).await {
        Ok(Ok(r)) => {
            let status = WorkspacePoolStatus { size, ready: r.ready, message: None };
            (Some(status), Some(if r.more { Duration::ZERO } else { RESYNC }))
        }
        Ok(Err(e)) => {
            tracing::warn!(project = %p.metadata.name, error = %e, "warm pool upkeep failed");
            (Some(WorkspacePoolStatus { size, ready, message: Some(e.to_string()) }), Some(RETRY))
        }
        Err(e) => (Some(WorkspacePoolStatus { size, ready, message: Some(e.to_string()) }), Some(RETRY)),
    }
}
