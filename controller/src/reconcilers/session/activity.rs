//! Watching a running agent: answers dialogs, classifies its activity from the screen and the
//! transcript's growth, and sets `AgentActive`, `Stalled` and `Ready`.
//!
//! When the fleet's output events are live ([`crate::activity_watch`]), an agent's output and exit
//! wake its session, so a quiet agent is looked at only by a long safety resync and by a timer at
//! the moment it would count as stuck, and its screen — which cannot change without output — is
//! read again only when the transcript grew. Working agents are still looked at every two seconds,
//! since it is silence that ends work. Docker agents, and every agent when the transcripts cannot
//! be watched, are polled.

use std::time::{Duration, Instant};

use aoctl_api::condition::types;
use aoctl_api::project::Project;
use aoctl_api::reactions::Reactions;
use aoctl_api::session::{ActivityState, ActivityStatus, RuntimeKind};
use aoctl_api::{ConditionStatus, EventType, Session, SessionStatus, Time};
use aoctl_engine::Action;
use aoctl_runtimes::agents::{self, Launch, Screen};
use aoctl_runtimes::Handle;

use super::{cond, Error};
use crate::context::Ctx;
use crate::fleet::Observation;

/// A polled screen is read again at least this often even when the transcript did not grow.
const RECAPTURE_POLLED: Duration = Duration::from_secs(30);
/// With output events, a screen is read again without new output only this rarely, as a safety net.
const RECAPTURE_QUIET: Duration = Duration::from_secs(600);
/// With output events, a quiet agent is looked at this often anyway: events can be lost, and an
/// agent adopted from an older controller has no exit hook.
const RESYNC_QUIET: Duration = Duration::from_secs(120);
/// How long after the stuck threshold a quiet agent is looked at, so that it has passed.
const STUCK_MARGIN: Duration = Duration::from_millis(500);

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
    let evented = ctx.fleet.output_events() && runtime.kind != RuntimeKind::Docker;
    let recapture_every = if evented { RECAPTURE_QUIET } else { RECAPTURE_POLLED };
    let len = tokio::fs::metadata(ctx.fleet.transcript(name)).await.map(|m| m.len()).unwrap_or(0);
    let now = Instant::now();
    let prev = ctx.fleet.observation(name);
    let grew = prev.as_ref().map_or(len > 0, |p| len != p.transcript_len);
    let (screen, captured_at) = match &prev {
        Some(p) if !grew && now.duration_since(p.captured_at) < recapture_every => (p.screen.clone(), p.captured_at),
        _ => (rt.capture(&h).await?, now),
    };
    let changed = grew || prev.as_ref().is_none_or(|p| p.screen != screen);
    let changed_at = match &prev {
        Some(p) if !changed => p.changed_at,
        _ => now,
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
    let stuck_after = stuck_after(s, project);
    let (state, evidence) = agents::classify(launch.adapter, &view, stuck_after);
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
    Ok(Action::requeue(next_look(state, evented, now.duration_since(changed_at), stuck_after)))
}

/// When an agent in `state`, unchanged for `unchanged`, is looked at next. Busy agents are polled
/// often and quiet ones rarely, since idle sessions are most of a fleet; with output events a quiet
/// agent wakes on its own, and a timer catches the moment it would count as stuck.
fn next_look(state: ActivityState, evented: bool, unchanged: Duration, stuck_after: Duration) -> Duration {
    match (state, evented) {
        (ActivityState::Working, _) => Duration::from_secs(2),
        (ActivityState::NeedsInput | ActivityState::Idle, false) => Duration::from_secs(10),
        (ActivityState::Stuck | ActivityState::Exited, false) => Duration::from_secs(30),
        (ActivityState::Idle, true) if !stuck_after.is_zero() => {
            RESYNC_QUIET.min(stuck_after.saturating_sub(unchanged) + STUCK_MARGIN)
        }
        (_, true) => RESYNC_QUIET,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn polled_agents_keep_their_intervals() {
        assert_eq!(next_look(ActivityState::Working, false, S(0), S(600)), S(2));
        assert_eq!(next_look(ActivityState::Idle, false, S(0), S(600)), S(10));
        assert_eq!(next_look(ActivityState::NeedsInput, false, S(0), S(600)), S(10));
        assert_eq!(next_look(ActivityState::Stuck, false, S(900), S(600)), S(30));
    }

    #[test]
    fn quiet_agents_with_output_events_wait_for_the_stuck_threshold_or_the_resync() {
        assert_eq!(next_look(ActivityState::Working, true, S(0), S(600)), S(2), "silence ends work");
        assert_eq!(next_look(ActivityState::Idle, true, S(0), S(600)), RESYNC_QUIET);
        assert_eq!(next_look(ActivityState::Idle, true, S(550), S(600)), S(50) + STUCK_MARGIN, "the stuck timer");
        assert_eq!(next_look(ActivityState::Idle, true, S(0), S(5)), S(5) + STUCK_MARGIN);
        assert_eq!(next_look(ActivityState::Idle, true, S(0), S(0)), RESYNC_QUIET, "stuck detection off");
        assert_eq!(next_look(ActivityState::NeedsInput, true, S(0), S(5)), RESYNC_QUIET, "a question is never stuck");
        assert_eq!(next_look(ActivityState::Stuck, true, S(900), S(600)), RESYNC_QUIET);
    }
}
