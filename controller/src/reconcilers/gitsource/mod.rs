//! GitSource reconciler: fetches the repository into `<data dir>/sources/<name>`, reads the
//! manifests under `spec.path` with the decoder of `aoctl apply`, admits them as the API does and
//! applies them as one revision in one store transaction with the source's own status, so a
//! revision is in force whole or not at all (docs/gitops.md). Each sync also undoes drift on the
//! objects it manages, but for the fields of a Session a person's action sets, which are applied
//! only when the repository changed them (kept.rs); a no-change sync writes nothing.
//!
//! Conditions: `Ready` (True `Applied`; False `FetchFailed`, `InvalidManifest`, `ManagedElsewhere`
//! or `ApplyFailed`), `Reconciling` (True while a failed fetch or apply is retried or an object is
//! waited for; False once applied, stalled or suspended) and `Stalled` (True while the fetched
//! revision cannot be applied as it is; absent otherwise).

mod kept;
mod manifests;
mod plan;
mod policy;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use aoctl_api::condition::{self, set_condition};
use aoctl_api::gitsource::{conditions as c, GitRef, GitSourceStatus};
use aoctl_api::source;
use aoctl_api::{Condition, ConditionStatus, EventType, GitSource, Kind, Time};
use aoctl_engine::Action;
use aoctl_git::repository::source::{
    fetch, read_manifests, FetchLimits, FetchRequest, Fetched, ManifestFile, ReadLimits, SourceError, SourceRef,
};
use aoctl_store::{Store, StoreError, Write, WriteOptions};

use super::Error;
use crate::recorder::Recorder;

/// Name of this controller in metrics and events.
pub(crate) const NAME: &str = "gitsource";

/// `Ready=False` and `Stalled=True`: an object of the revision exists and another source manages it.
const MANAGED_ELSEWHERE: &str = "ManagedElsewhere";
/// How soon a source looks again when an object of its revision is still being deleted.
const WAIT_FOR_DELETION: Duration = Duration::from_secs(2);
/// How many times a revision is planned again when the objects moved under it (a conflict).
const ATTEMPTS: usize = 5;

/// What the GitSource reconciler gets.
pub(crate) struct Context {
    pub store: Store,
    pub recorder: Recorder,
    /// `<data dir>/sources`: one bare repository per GitSource, named after it.
    pub cache: PathBuf,
}

pub(crate) async fn reconcile(source: Arc<GitSource>, ctx: Arc<Context>) -> Result<Action, Error> {
    if source.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let generation = source.metadata.generation;
    let interval = source.spec.interval();
    let mut status = source.status.clone();
    status.observed_generation = generation;
    let handled = status.last_handled_reconcile_at.clone();
    if let Some(asked) = source::pending_request(&source.metadata, handled.as_deref()) {
        status.last_handled_reconcile_at = Some(asked.to_string());
    }
    let set = |status: &mut GitSourceStatus, type_: &str, on: ConditionStatus, reason: &str, message: &str| {
        let cond = Condition::new(type_, on, reason, message, generation, Time::now());
        set_condition(&mut status.conditions, cond);
    };

    if source.spec.suspend {
        let why = "spec.suspend is set: nothing is fetched or applied";
        set(&mut status, c::RECONCILING, ConditionStatus::False, c::SUSPENDED, why);
        write_status(&ctx, &source, &status).await?;
        return Ok(Action::await_change());
    }

    let (fetched, files) = match fetch_and_read(&ctx, &source).await? {
        Ok(got) => got,
        Err(not) => {
            let message = not.to_string();
            let was = ready_of(&source.status);
            set(&mut status, c::READY, ConditionStatus::False, c::FETCH_FAILED, &message);
            let retry = format!("retrying every {}", aoctl_api::Duration(interval));
            set(&mut status, c::RECONCILING, ConditionStatus::True, c::PROGRESSING, &retry);
            if write_status(&ctx, &source, &status).await? && was != ready_of(&status) {
                ctx.recorder.publish(&*source, EventType::Warning, c::FETCH_FAILED, &message).await;
            }
            return Ok(Action::requeue(interval));
        }
    };
    let revision = fetched.revision.clone();
    status.last_attempted_revision = Some(revision.clone());

    let desired =
        match files.map_err(manifests::Unappliable::from).and_then(|f| manifests::decode(&f, &source.metadata.name)) {
            Ok(d) => d,
            Err(why) => {
                return stalled(&ctx, &source, status, c::INVALID_MANIFEST, &revision, &why.to_string()).await;
            }
        };

    for attempt in 1..=ATTEMPTS {
        let plan = match plan::plan(&ctx.store, &source, &desired).await? {
            Ok(plan) => plan,
            Err(refused) => {
                let reason = match refused {
                    plan::Refusal::Invalid(_) => c::INVALID_MANIFEST,
                    plan::Refusal::ManagedElsewhere(_) => MANAGED_ELSEWHERE,
                };
                return stalled(&ctx, &source, status, reason, &revision, refused.message()).await;
            }
        };
        let mut next = status.clone();
        next.last_applied_revision = Some(revision.clone());
        next.inventory = plan.inventory.clone();
        next.conditions.retain(|x| x.type_ != c::STALLED);
        set(&mut next, c::READY, ConditionStatus::True, c::APPLIED, &format!("applied revision {revision}"));
        let later = match plan.waiting.is_empty() {
            true => {
                set(&mut next, c::RECONCILING, ConditionStatus::False, c::APPLIED, "");
                interval
            }
            false => {
                let why = format!("waiting for {} to be deleted to make it again", plan.waiting.join(", "));
                set(&mut next, c::RECONCILING, ConditionStatus::True, c::PROGRESSING, &why);
                WAIT_FOR_DELETION.min(interval)
            }
        };
        if plan.writes.is_empty() && next == source.status {
            return Ok(Action::requeue(later));
        }
        let mut writes = plan.writes;
        writes.push(Write::UpdateStatus {
            kind: Kind::GitSource,
            name: source.metadata.name.clone(),
            status: serde_json::to_value(&next).map_err(StoreError::from)?,
            rv: source.metadata.resource_version.clone(),
        });
        match ctx.store.apply_all(writes, WriteOptions::default()).await {
            Ok(_) => {
                announce(&ctx, &source, &revision, &plan.created, &plan.updated, &plan.pruned).await;
                return Ok(Action::requeue(later));
            }
            // The source itself changed: its new version is reconciled next.
            Err(StoreError::Conflict { kind: Kind::GitSource, name, .. }) if name == source.metadata.name => {
                return Ok(Action::requeue(Duration::ZERO));
            }
            // An object changed, came or went between the plan and the write: plan again.
            Err(StoreError::Conflict { .. } | StoreError::AlreadyExists { .. } | StoreError::NotFound { .. })
                if attempt < ATTEMPTS => {}
            Err(e @ (StoreError::Invalid { .. } | StoreError::Conflict { .. } | StoreError::AlreadyExists { .. })) => {
                let message = format!("revision {revision}: {e}");
                let was = ready_of(&source.status);
                set(&mut status, c::READY, ConditionStatus::False, c::APPLY_FAILED, &message);
                let retry = format!("retrying every {}", aoctl_api::Duration(interval));
                set(&mut status, c::RECONCILING, ConditionStatus::True, c::PROGRESSING, &retry);
                if write_status(&ctx, &source, &status).await? && was != ready_of(&status) {
                    ctx.recorder.publish(&*source, EventType::Warning, c::APPLY_FAILED, &message).await;
                }
                return Ok(Action::requeue(interval));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Action::requeue(Duration::ZERO))
}

pub(crate) fn error_policy(_source: Arc<GitSource>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %error, kind = error.metric_label(), "gitsource reconcile failed");
    // The engine's per-object exponential backoff decides when to try again.
    Action::requeue(Duration::ZERO)
}

/// The ref of the spec as the fetcher names it.
fn source_ref(r: &GitRef) -> SourceRef {
    match (&r.branch, &r.tag, &r.commit) {
        (Some(b), _, _) => SourceRef::Branch(b.clone()),
        (None, Some(t), _) => SourceRef::Tag(t.clone()),
        (None, None, Some(c)) => SourceRef::Commit(c.clone()),
        (None, None, None) => SourceRef::Branch("main".into()),
    }
}

/// Why a source's ref could not be fetched.
#[derive(Debug, thiserror::Error)]
enum NotFetched {
    #[error("spec.tokenEnv: {0} is not set in the controller's environment")]
    TokenUnset(String),
    #[error(transparent)]
    Fetch(#[from] SourceError),
}

/// Fetches the ref (on the blocking pool) and reads the manifests of the commit it resolved to;
/// `Err` with why a fetch failed.
async fn fetch_and_read(
    ctx: &Context,
    source: &GitSource,
) -> Result<Result<(Fetched, Result<Vec<ManifestFile>, SourceError>), NotFetched>, Error> {
    let token = match &source.spec.token_env {
        None => None,
        Some(var) => match std::env::var(var) {
            Ok(t) if !t.is_empty() => Some(t),
            _ => return Ok(Err(NotFetched::TokenUnset(var.clone()))),
        },
    };
    let cache = ctx.cache.join(&source.metadata.name);
    let url = source.spec.url.clone();
    let reference = source_ref(&source.spec.reference());
    let folder = source.spec.path.clone().unwrap_or_default();
    let work = move || {
        let request =
            FetchRequest { url: &url, reference: &reference, token: token.as_deref(), limits: FetchLimits::default() };
        let fetched = fetch(&cache, &request)?;
        let files = read_manifests(&cache, &fetched.commit, &folder, &ReadLimits::default());
        Ok::<_, SourceError>((fetched, files))
    };
    Ok(tokio::task::spawn_blocking(work).await?.map_err(NotFetched::from))
}

/// Records a revision that cannot be applied as it is: `Stalled=True` and `Ready=False` naming
/// the problem; the objects and `lastAppliedRevision` stay as they are.
async fn stalled(
    ctx: &Context,
    source: &GitSource,
    mut status: GitSourceStatus,
    reason: &str,
    revision: &str,
    message: &str,
) -> Result<Action, Error> {
    let generation = source.metadata.generation;
    let was = condition::find(&source.status.conditions, c::STALLED).map(|x| x.message.clone());
    for (type_, on) in [
        (c::STALLED, ConditionStatus::True),
        (c::READY, ConditionStatus::False),
        (c::RECONCILING, ConditionStatus::False),
    ] {
        let text = match type_ {
            c::RECONCILING => format!("revision {revision} waits for a new commit"),
            _ => message.to_string(),
        };
        set_condition(&mut status.conditions, Condition::new(type_, on, reason, text, generation, Time::now()));
    }
    if write_status(ctx, source, &status).await? && was.as_deref() != Some(message) {
        let text = format!("revision {revision}: {message}");
        ctx.recorder.publish(source, EventType::Warning, c::APPLY_FAILED, &text).await;
    }
    Ok(Action::requeue(source.spec.interval()))
}

/// Writes `status` when it differs from the stored one; whether it wrote. A conflict is no
/// error: the source changed, and its new version is reconciled next.
async fn write_status(ctx: &Context, source: &GitSource, status: &GitSourceStatus) -> Result<bool, Error> {
    if *status == source.status {
        return Ok(false);
    }
    let value = serde_json::to_value(status).map_err(StoreError::from)?;
    let rv = source.metadata.resource_version.as_deref();
    match ctx.store.update_status(Kind::GitSource, &source.metadata.name, value, rv, WriteOptions::default()).await {
        Ok(_) => Ok(true),
        Err(e) if e.is_conflict() => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// `Ready`'s status, reason and message, to tell when it changes.
fn ready_of(status: &GitSourceStatus) -> Option<(ConditionStatus, String, String)> {
    condition::find(&status.conditions, c::READY).map(|x| (x.status, x.reason.clone(), x.message.clone()))
}

/// The events of an applied revision: `Applied` when it changed objects, `Pruned` naming what it
/// deleted.
async fn announce(
    ctx: &Context,
    source: &GitSource,
    revision: &str,
    created: &[String],
    updated: &[String],
    pruned: &[String],
) {
    if created.is_empty() && updated.is_empty() && pruned.is_empty() {
        return;
    }
    let text = format!(
        "revision {revision}: {} created, {} configured, {} pruned",
        created.len(),
        updated.len(),
        pruned.len()
    );
    ctx.recorder.publish(source, EventType::Normal, c::APPLIED, &text).await;
    if !pruned.is_empty() {
        ctx.recorder.publish(source, EventType::Normal, "Pruned", &listed(pruned)).await;
    }
}

/// Up to ten names, then how many more.
fn listed(names: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text = names.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}
