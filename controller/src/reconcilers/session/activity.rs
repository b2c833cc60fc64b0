//! Watching a running agent: answers dialogs, classifies its activity from the screen and the
//! transcript's growth, and sets `AgentActive`, `Stalled` and `Ready`.

use std::time::{Duration, Instant};

use aoctl_api::condition::types;
use aoctl_api::project::Project;
use aoctl_api::reactions::Reactions;
use aoctl_api::session::{ActivityState, ActivityStatus};
use aoctl_api::{ConditionStatus, EventType, Session, SessionStatus, Time};
use aoctl_engine::Action;
use aoctl_runtimes::agents::{self, Launch, Screen};
use aoctl_runtimes::Handle;

use super::{cond, Error};
use crate::context::Ctx;
use crate::fleet::Observation;

/// A screen is read again at least this often even when the transcript did not grow.
const RECAPTURE_EVERY: Duration = Duration::from_secs(30);

fn stuck_after(s: &Session, p: &Project) -> Duration {
    let mut r = Reactions::defaults();
    if let Some(pr) = &p.spec.reactions {
        r = r.overlay(pr);
    }
    if let Some(sr) = &s.spec.reactions {
        r = r.overlay(sr);
    }
    r.agent_stuck.and_then(|a| a.threshold).map_or(Duration::from_secs(600), |d| d.as_std())
}

pub(super) async fn observe(
    s: &Session,
    project: &Project,
    launch: &Launch,
    ctx: &Ctx,
    st: &mut SessionStatus,
) -> Result<Action, Error> {
    let name = &s.metadata.name;
    let Some(runtime) = st.runtime.clone() else { return Ok(Action::await_change()) };
    let rt = ctx.fleet.runtime_for(s, Some(project), runtime.kind).await?;
    let h = Handle(runtime.handle.clone());
    let len = tokio::fs::metadata(ctx.fleet.transcript(name)).await.map(|m| m.len()).unwrap_or(0);
    let now = Instant::now();
    let prev = ctx.fleet.observation(name);
    let grew = prev.as_ref().map_or(len > 0, |p| len != p.transcript_len);
    let screen = match &prev {
        Some(p) if !grew && now.duration_since(p.captured_at) < RECAPTURE_EVERY => p.screen.clone(),
        _ => rt.capture(&h).await?,
    };
    let changed = grew || prev.as_ref().is_none_or(|p| p.screen != screen);
    let changed_at = match &prev {
        Some(p) if !changed => p.changed_at,
        _ => now,
    };
    let captured_at = if prev.as_ref().is_some_and(|p| p.screen == screen && !grew) {
        prev.as_ref().map_or(now, |p| p.captured_at.max(now - RECAPTURE_EVERY))
    } else {
        now
    };
    ctx.fleet.observe(name, Observation { transcript_len: len, screen: screen.clone(), changed_at, captured_at });

    if let Some(adapter) = launch.adapter {
        if let Some((dialog, keys)) = agents::dialog(adapter, &screen) {
            rt.keys(&h, keys).await?;
            ctx.recorder
                .publish(s, EventType::Normal, "DialogAnswered", &format!("answered the {dialog} dialog"))
                .await;
            return Ok(Action::requeue(Duration::from_millis(500)));
        }
    }
    let view =
        Screen { text: &screen, transcript_grew: grew, unchanged_for: now.duration_since(changed_at), exited: None };
    let (state, evidence) = agents::classify(launch.adapter, &view, stuck_after(s, project));
    if st.activity.as_ref().map(|a| a.state) != Some(state) {
        st.activity = Some(ActivityStatus { state, since: Time::now(), evidence: evidence.clone() });
        match state {
            ActivityState::NeedsInput => ctx.recorder.publish(s, EventType::Warning, "NeedsInput", &evidence).await,
            ActivityState::Stuck => ctx.recorder.publish(s, EventType::Warning, "Stuck", &evidence).await,
            _ => {}
        }
    }
    let (active, reason) = match state {
        ActivityState::Working => (ConditionStatus::True, "Working"),
        ActivityState::Idle => (ConditionStatus::False, "Idle"),
        ActivityState::NeedsInput => (ConditionStatus::False, "NeedsInput"),
        ActivityState::Stuck => (ConditionStatus::False, "Stuck"),
        ActivityState::Exited => (ConditionStatus::False, "AgentExited"),
    };
    cond(st, s, types::AGENT_ACTIVE, active, reason, evidence.clone());
    if state == ActivityState::Stuck {
        cond(st, s, types::STALLED, ConditionStatus::True, "Stuck", evidence);
    } else {
        cond(st, s, types::STALLED, ConditionStatus::False, "Progressing", "");
    }
    cond(st, s, types::READY, ConditionStatus::True, "Running", format!("the agent is {state}"));
    // Poll busy agents often and quiet ones rarely: idle sessions are most of a fleet.
    Ok(Action::requeue(match state {
        ActivityState::Working => Duration::from_secs(2),
        ActivityState::NeedsInput | ActivityState::Idle => Duration::from_secs(10),
        ActivityState::Stuck | ActivityState::Exited => Duration::from_secs(30),
    }))
}
