//! A worker's part of telling its orchestrator what happened: each fact the orchestrator acts on
//! — its pull request merged or closed, its checks failing past their retries, its agent exiting
//! or stuck — is kept as a record in the worker's own `status.upstream`, in the status write that
//! records the fact, once per fact (its key). Its `report`s are kept by the agent API. Records the
//! orchestrator had (its `status.orchestrator.delivered`) are trimmed here; the orchestrator's
//! reconcile types the rest into it (`reports`).

use std::time::Duration;

use aoctl_api::orchestrator::{UpstreamKind, UpstreamStatus, ORCHESTRATOR_LABEL};
use aoctl_api::session::{ActivityState, PullRequestState};
use aoctl_api::{EventType, Session, Time};
use aoctl_store::StoreError;

use super::{Error, Reconcile};

impl Reconcile<'_> {
    /// Records what a worker an orchestrator spawned has for it, and trims what it had.
    pub(super) async fn upstream(&mut self) -> Result<Option<Duration>, Error> {
        let Some(orchestrator) = self.s.metadata.labels.get(ORCHESTRATOR_LABEL).cloned() else { return Ok(None) };
        let facts = facts(self.s, self.st);
        let up = self.st.upstream.get_or_insert_with(|| UpstreamStatus { orchestrator, ..Default::default() });
        let mut recorded = vec![];
        for (kind, key, text) in facts {
            if up.record(kind, key, Time::now(), &text) {
                recorded.push(format!("{} (record {})", kind.as_str(), up.next - 1));
            }
        }
        if !up.pending.is_empty() {
            let had = had(self.ctx, &up.orchestrator, self.s).await?;
            up.trim(had);
        }
        if up.pending.is_empty() && up.recent.is_empty() {
            self.st.upstream = None;
        }
        for r in recorded {
            let msg = format!("kept for its orchestrator: {r}");
            self.ctx.recorder.publish(self.s, EventType::Normal, "ReportedToOrchestrator", &msg).await;
        }
        Ok(None)
    }
}

/// The last record of `worker` that `orchestrator` had, 0 when none (or it is gone).
async fn had(ctx: &super::Context, orchestrator: &str, worker: &Session) -> Result<u64, Error> {
    let o: Session = match ctx.store.get_typed(orchestrator).await {
        Ok(o) => o,
        Err(StoreError::NotFound { .. }) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let uid = worker.metadata.uid.as_deref().unwrap_or_default();
    let delivered = o.status.orchestrator.as_ref().and_then(|s| s.delivered.get(&worker.metadata.name));
    Ok(delivered.filter(|d| d.uid == uid).map_or(0, |d| d.seq))
}

/// The facts of a worker's status its orchestrator is told of: kind, key and text.
fn facts(s: &Session, st: &aoctl_api::SessionStatus) -> Vec<(UpstreamKind, String, String)> {
    let mut out = vec![];
    if let Some(pr) = &st.pull_request {
        match pr.state {
            PullRequestState::Merged => out.push((
                UpstreamKind::Merged,
                format!("merged:{}", pr.number),
                format!("its pull request #{} was merged", pr.number),
            )),
            PullRequestState::Closed => out.push((
                UpstreamKind::Closed,
                format!("closed:{}", pr.number),
                format!("its pull request #{} was closed without merging", pr.number),
            )),
            PullRequestState::Open => {}
        }
    }
    if let Some(r) = st.reactions.get("ci-failed").filter(|r| r.escalated) {
        let episode = r.episode.clone().or(r.since.map(|t| t.to_string())).unwrap_or_default();
        let pr = st.pull_request.as_ref().map(|p| format!(" (pull request #{})", p.number)).unwrap_or_default();
        out.push((
            UpstreamKind::CiFailed,
            format!("ci-failed:{episode}"),
            format!("its checks still fail after the retries its reactions allow{pr}"),
        ));
    }
    if let Some(a) = &st.activity {
        let evidence = if a.evidence.is_empty() { String::new() } else { format!(": {}", a.evidence) };
        match a.state {
            ActivityState::Exited if !s.spec.stopped => {
                let started = st.runtime.as_ref().and_then(|r| r.started_at).unwrap_or(a.since);
                out.push((UpstreamKind::Exited, format!("exited:{started}"), format!("its agent exited{evidence}")));
            }
            ActivityState::Stuck => out.push((
                UpstreamKind::Stuck,
                format!("stuck:{}", a.since),
                format!("its agent seems stuck{evidence}"),
            )),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use aoctl_api::session::{ActivityStatus, ReactionStatus};

    use super::*;

    #[test]
    fn each_fact_has_a_key_of_its_own_episode() {
        let s = Session::new("w", "p", "x");
        let mut st: aoctl_api::SessionStatus = serde_json::from_value(serde_json::json!({
            "pullRequest": {"number": 12, "url": "u", "state": "merged", "checks": "failing", "review": "none"}
        }))
        .unwrap();
        let since = Time::now();
        st.reactions.insert(
            "ci-failed".into(),
            ReactionStatus { episode: Some("abc".into()), escalated: true, ..Default::default() },
        );
        st.activity = Some(ActivityStatus {
            state: ActivityState::Stuck,
            since,
            evidence: "no output for 10m".into(),
            resets_at: None,
        });
        let keys: Vec<(UpstreamKind, String)> = facts(&s, &st).into_iter().map(|(k, key, _)| (k, key)).collect();
        assert_eq!(
            keys,
            [
                (UpstreamKind::Merged, "merged:12".to_string()),
                (UpstreamKind::CiFailed, "ci-failed:abc".to_string()),
                (UpstreamKind::Stuck, format!("stuck:{since}")),
            ]
        );
        st.reactions.get_mut("ci-failed").unwrap().escalated = false;
        st.activity.as_mut().unwrap().state = ActivityState::Working;
        assert_eq!(facts(&s, &st).len(), 1, "not escalated, not stuck");
    }
}
