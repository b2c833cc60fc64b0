//! Deleting a session: stop its runtime, remove the workspace the controller made (the branch
//! stays), remove the controller's files for it, then release the finalizer.

use aoctl_api::{EventType, Session};
use aoctl_engine::Action;
use aoctl_runtimes::{Handle, RuntimeError};

use super::{Context, Error, FINALIZER};

pub(super) async fn finalize(s: &Session, ctx: &Context) -> Result<Action, Error> {
    if !s.metadata.finalizers.iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    let name = s.metadata.name.clone();
    // Every runtime is asked, so an agent started under a previous `runtime` value goes too.
    let project = ctx.store.get_typed::<aoctl_api::Project>(&s.spec.project).await.ok();
    let mut runtimes = ctx.machine.runtimes().await;
    if let Some(r) = s.status.runtime.as_ref() {
        if let Ok(rt) = ctx.machine.runtime_for(s, project.as_ref(), r.kind).await {
            runtimes.push(rt);
        }
    }
    for rt in runtimes {
        let mut handles = vec![];
        if let Some(r) = s.status.runtime.as_ref().filter(|r| r.kind == rt.kind()) {
            handles.push(Handle(r.handle.clone()));
        }
        // An engine that does not answer (a lost docker host) does not hold the deletion up: what
        // is left there is an orphan, which the collector removes once it answers (`gc.rs`).
        let listed = match rt.list().await {
            Ok(listed) => listed,
            Err(e @ RuntimeError::Unavailable { .. }) => {
                tracing::warn!(session = %name, error = %e, "an engine does not answer; its containers are collected later");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        handles.extend(listed.into_iter().filter(|o| o.session == name).map(|o| o.handle));
        handles.dedup();
        for h in handles {
            rt.stop(&h).await?;
            ctx.metrics.runtime_op(rt.kind(), "stop", true);
        }
    }
    let machine = ctx.machine.clone();
    let (project, session) = (s.spec.project.clone(), name.clone());
    let removed = tokio::task::spawn_blocking(move || machine.workspaces().remove(&project, &session)).await??;
    ctx.machine.files().remove(&name).await?;
    ctx.machine.typing().forget(&name);
    ctx.state.forget(&name);
    let what = if removed { "stopped the runtime and removed the workspace" } else { "stopped the runtime" };
    ctx.recorder.publish(s, EventType::Normal, "CleanedUp", &format!("{what}; the branch is kept")).await;
    let mut next = s.clone();
    next.metadata.finalizers.retain(|f| f != FINALIZER);
    ctx.store.update_finalizers_typed(&next).await?;
    Ok(Action::await_change())
}
