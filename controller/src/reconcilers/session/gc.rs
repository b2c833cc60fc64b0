//! Orphan collection: runtimes and workspaces this controller owns that no Session claims (left
//! by a crash between deleting an object and cleaning up after it), and warm pools no Project
//! claims, are removed, and so are the
//! containers of sessions that were moved off a lost docker engine and are recorded on another.

use std::collections::HashSet;

use aoctl_api::session::RuntimeKind;
use aoctl_api::Project;
use aoctl_store::Selector;

use super::{Context, Error};

/// Removes orphans; returns how many runtimes and workspaces went.
pub(crate) async fn collect(ctx: &Context) -> Result<(usize, usize), Error> {
    // Runtimes and workspaces are listed before the sessions: anything that exists then and has no
    // Session afterwards cannot belong to a Session still being created.
    let machine = ctx.machine.clone();
    let pools = tokio::task::spawn_blocking(move || machine.workspaces().pools()).await?;
    let mut owned = vec![];
    for rt in ctx.machine.runtimes().await {
        // An engine that does not answer is looked at again at the next collection.
        let listed = match rt.list().await {
            Ok(listed) => listed,
            Err(e @ aoctl_runtimes::RuntimeError::Unavailable { .. }) => {
                tracing::debug!(error = %e, "an engine does not answer; collected later");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        for o in listed {
            owned.push((rt.clone(), o));
        }
    }
    // Every engine of the projects' `spec.docker.hosts` is asked, connected or not yet.
    let (projects, _) = ctx.store.list_typed::<Project>(&Selector::everything()).await?;
    for h in projects.iter().filter_map(|p| p.spec.docker.as_ref()).flat_map(|d| d.hosts.iter()) {
        if ctx.machine.engine_health(&h.host).await.answers {
            let _ = ctx.machine.runtime(RuntimeKind::Docker, Some(&h.host)).await;
        }
    }
    let mut elsewhere = vec![];
    for (host, rt) in ctx.machine.docker_engines().await {
        let Some(host) = host else { continue };
        if !ctx.machine.engine_health(&host).await.answers {
            continue;
        }
        for o in rt.list().await? {
            elsewhere.push((host.clone(), rt.clone(), o));
        }
    }
    let machine = ctx.machine.clone();
    let records = tokio::task::spawn_blocking(move || machine.workspaces().list()).await??;
    // From the index of the sessions, brought up to the store now.
    let sessions = ctx.index.read(&ctx.store, |i| i.stored()).await?;
    let claimed: HashSet<(String, String)> = sessions.iter().map(|s| (s.project.clone(), s.name.clone())).collect();
    let names: HashSet<&str> = sessions.iter().map(|s| s.name.as_str()).collect();
    let mut runtimes = 0;
    for (rt, o) in owned {
        if !names.contains(o.session.as_str()) {
            tracing::warn!(session = %o.session, runtime = %rt.kind(), "removing an orphaned runtime");
            rt.stop(&o.handle).await?;
            runtimes += 1;
        }
    }
    // A session recorded on one engine that left a container on another (moved off it while it
    // did not answer): that container goes.
    let recorded: std::collections::HashMap<&str, &str> =
        sessions.iter().filter_map(|s| Some((s.name.as_str(), s.host.as_deref()?))).collect();
    for (host, rt, o) in elsewhere {
        if recorded.get(o.session.as_str()).is_some_and(|on| *on != host) {
            tracing::warn!(session = %o.session, engine = %host, "removing a container left on an engine the session moved off");
            rt.stop(&o.handle).await?;
            runtimes += 1;
        }
    }
    let mut workspaces = 0;
    // The warm pool of a Project that is gone (its finalizer normally removes it first).
    let live: HashSet<&str> = projects.iter().map(|p| p.metadata.name.as_str()).collect();
    for project in pools.into_iter().filter(|p| !live.contains(p.as_str())) {
        tracing::warn!(project, "removing the warm pool of a project that is gone");
        let machine = ctx.machine.clone();
        workspaces += tokio::task::spawn_blocking(move || machine.workspaces().drain_pool(&project)).await??;
    }
    for r in records {
        if !claimed.contains(&(r.project.clone(), r.session.clone())) {
            tracing::warn!(session = %r.session, path = %r.path.display(), "removing an orphaned workspace");
            let machine = ctx.machine.clone();
            if tokio::task::spawn_blocking(move || machine.workspaces().remove(&r.project, &r.session)).await?? {
                workspaces += 1;
            }
        }
    }
    Ok((runtimes, workspaces))
}
