//! Orphan collection: runtimes and workspaces this controller owns that no Session claims (left
//! by a crash between deleting an object and cleaning up after it) are removed.

use std::collections::HashSet;

use aoctl_api::Session;
use aoctl_store::Selector;

use super::{Context, Error};

/// Removes orphans; returns how many runtimes and workspaces went.
pub async fn collect(ctx: &Context) -> Result<(usize, usize), Error> {
    // Runtimes and workspaces are listed before the sessions: anything that exists then and has no
    // Session afterwards cannot belong to a Session still being created.
    let mut owned = vec![];
    for rt in ctx.machine.runtimes().await {
        for o in rt.list().await? {
            owned.push((rt.clone(), o));
        }
    }
    let machine = ctx.machine.clone();
    let records = tokio::task::spawn_blocking(move || machine.workspaces().list()).await??;
    let (sessions, _) = ctx.store.list_typed::<Session>(&Selector::everything()).await?;
    let claimed: HashSet<(String, String)> =
        sessions.iter().map(|s| (s.spec.project.clone(), s.metadata.name.clone())).collect();
    let names: HashSet<&str> = sessions.iter().map(|s| s.metadata.name.as_str()).collect();
    let mut runtimes = 0;
    for (rt, o) in owned {
        if !names.contains(o.session.as_str()) {
            tracing::warn!(session = %o.session, runtime = %rt.kind(), "removing an orphaned runtime");
            rt.stop(&o.handle).await?;
            runtimes += 1;
        }
    }
    let mut workspaces = 0;
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
