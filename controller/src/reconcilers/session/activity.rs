//! Watching a running agent: answers dialogs, classifies its activity from the screen and the
//! transcript's growth, and sets `AgentActive`, `Stalled` and `Ready`.
//!
//! When the machine's output events are live ([`crate::activity_watch`]), an agent's output and exit
//! wake its session, so a quiet agent is looked at only by a long safety resync and by a timer at
//! the moment it would count as stuck, and its screen — which cannot change without output — is
//! read again only when the transcript grew. Working agents are still looked at every two seconds,
//! since it is silence that ends work. Docker agents, and every agent when the transcripts cannot
//! be watched, are polled.
//!
//! An agent that reports a usage or rate limit ("limit reached, resets at …") is `rate-limited`
//! until the reset: nothing is typed into it meanwhile (reactions wait, `aoctl send` is refused)
//! and it holds no slot under `maxConcurrentSessions`. At the reset, once a slot is free, a short
//! resume message is typed into it once (unless the agent retries by itself, as with an API rate
//! limit it backs off from), and its activity is read as before. Its usage records (tokens, cost)
//! are read every [`USAGE_EVERY`] into `status.usage`.

use std::time::{Duration, Instant};

use aoctl_agents::{limits, usage, Launch, Screen};
use aoctl_api::condition::{self, types};
use aoctl_api::project::Project;
use aoctl_api::reactions::Reactions;
use aoctl_api::session::{reasons, ActivityState, ActivityStatus, RuntimeKind};
use aoctl_api::{ConditionStatus, EventType, Session, SessionStatus, Time};
use aoctl_engine::Action;
use aoctl_runtimes::{Handle, Runtime};
use chrono::{DateTime, Offset, Utc};
use sha2::{Digest, Sha256};

use super::state::LimitMemo;
use super::state::{Observation, UsageRead};
use super::{cond, typed_agent, Error, Reconcile};
use crate::typing::{How, Keyboard, What};

/// A polled screen is read again at least this often even when the transcript did not grow.
const RECAPTURE_POLLED: Duration = Duration::from_secs(30);
/// With output events, a screen is read again without new output only this rarely, as a safety net.
const RECAPTURE_QUIET: Duration = Duration::from_secs(600);
/// With output events, a quiet agent is looked at this often anyway: an agent adopted from an
/// older controller has no exit hook. (Events lost to an inotify overflow wake every session.)
/// Quiet agents are most of a fleet: 1,000 of them cost 1.7 reconciles a second at this period.
const RESYNC_QUIET: Duration = Duration::from_secs(600);
/// How long after the stuck threshold a quiet agent is looked at, so that it has passed.
const STUCK_MARGIN: Duration = Duration::from_millis(500);
/// How often an agent's usage records are read.
const USAGE_EVERY: Duration = Duration::from_secs(10);
/// How often a rate-limited session that may not resume yet looks for a free slot.
const SLOT_POLL: Duration = Duration::from_secs(10);
fn stuck_after(s: &Session, p: &Project) -> Duration {
    let r = Reactions::effective(p.spec.reactions.as_ref(), s.spec.reactions.as_ref());
    r.agent_stuck.and_then(|a| a.threshold).map_or(Duration::from_secs(600), |d| d.as_std())
}

impl Reconcile<'_> {
    /// Looks at the running agent: its screen, its usage, its limits, then its activity state.
    pub(super) async fn activity(&mut self, launch: &Launch) -> Result<Action, Error> {
        let (s, ctx) = (self.s, self.ctx);
        let name = &s.metadata.name;
        let Some(runtime) = self.st.runtime.clone() else { return Ok(Action::await_change()) };
        let rt = super::launch::engine(self.ctx, &self.host, runtime.kind).await?;
        let h = Handle(runtime.handle.clone());
        let evented = ctx.machine.output_events() && runtime.kind != RuntimeKind::Docker;
        let recapture_every = if evented { RECAPTURE_QUIET } else { RECAPTURE_POLLED };
        let len = ctx.machine.files().transcript_len(name).await;
        let now = Instant::now();
        let prev = ctx.state.observation(name);
        let grew = prev.as_ref().map_or(len > 0, |p| len != p.transcript_len);
        let (screen, captured_at) = match &prev {
            Some(p) if !grew && now.duration_since(p.captured_at) < recapture_every => {
                (p.screen.clone(), p.captured_at)
            }
            _ => (rt.capture(&h).await?, now),
        };
        // The screen, not the transcript, says whether something happened: some agents write bytes
        // that change nothing on screen (cursor shown and hidden) while they wait.
        let changed = prev.as_ref().is_none_or(|p| p.screen != screen);
        let changed_at = match &prev {
            Some(p) if !changed => p.changed_at,
            _ => now,
        };
        ctx.state.observe(name, Observation { transcript_len: len, screen: screen.clone(), changed_at, captured_at });

        if let Some(adapter) = launch.adapter {
            if super::launch::answer_dialog(s, ctx, &*rt, &h, adapter, &screen).await? {
                return Ok(Action::requeue(Duration::from_millis(500)));
            }
        }
        let usage_due = self.read_usage(launch, grew).await;
        if let Some(action) = self.rate_limit(launch, &*rt, &h, &screen).await? {
            return Ok(action);
        }
        let (project, st) = (&self.project, &mut *self.st);
        let view = Screen {
            text: &screen,
            transcript_grew: grew,
            unchanged_for: now.duration_since(changed_at),
            exited: None,
        };
        let stuck_after = stuck_after(s, project);
        let (mut state, mut evidence) = aoctl_agents::classify(launch.adapter, &view, stuck_after);
        let logged_out = super::login::login_condition(s, ctx, st, launch, &screen).await;
        if logged_out {
            return Ok(Action::requeue(super::login::LOGIN_LOOK));
        }
        // A question the agent asked through `aoctl mcp` waits for a person whatever its screen shows.
        if let Some(q) = st.agent.as_ref().and_then(|a| a.question.as_ref()) {
            (state, evidence) = (ActivityState::NeedsInput, format!("the agent asks: {}", q.text));
        }
        if st.activity.as_ref().map(|a| a.state) != Some(state) {
            st.activity =
                Some(ActivityStatus { state, since: Time::now(), evidence: evidence.clone(), resets_at: None });
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
            ActivityState::RateLimited => (ConditionStatus::False, reasons::RATE_LIMITED),
        };
        // The evidence is recorded when the state changes; while it holds, a screen that keeps
        // changing (a spinner, a clock) changes nothing stored, so it writes no status and wakes
        // no reconcile of its own.
        let holds = condition::find(&st.conditions, types::AGENT_ACTIVE).is_some_and(|c| c.reason == reason);
        if !holds {
            cond(st, s, types::AGENT_ACTIVE, active, reason, evidence.clone());
        }
        if state == ActivityState::Stuck {
            if !condition::is_true(&st.conditions, types::STALLED) {
                cond(st, s, types::STALLED, ConditionStatus::True, "Stuck", evidence);
            }
        } else {
            cond(st, s, types::STALLED, ConditionStatus::False, "Progressing", "");
        }
        cond(st, s, types::READY, ConditionStatus::True, "Running", format!("the agent is {state}"));
        let next = next_look(state, evented, now.duration_since(changed_at), stuck_after);
        Ok(Action::requeue(usage_due.map_or(next, |d| d.min(next))))
    }
    /// The rate-limit state machine: enters `rate-limited` when the screen shows a new limit, waits
    /// for the reset, and at the reset (with a slot free) resumes the agent once. `None` when the
    /// agent is not rate-limited and its activity is read as usual.
    async fn rate_limit(
        &mut self,
        launch: &Launch,
        rt: &dyn Runtime,
        h: &Handle,
        screen: &str,
    ) -> Result<Option<Action>, Error> {
        let (s, ctx, slot_free) = (self.s, self.ctx, self.slot_free);
        let name = &s.metadata.name;
        let now = Utc::now();
        if let Some(a) = self.st.activity.clone().filter(|a| a.state == ActivityState::RateLimited) {
            let resets = a.resets_at.map_or(now, |t| t.0);
            if now < resets {
                limited_conditions(s, self.st, &a.evidence);
                return Ok(Some(Action::requeue(until(now, resets).min(RESYNC_QUIET))));
            }
            if !slot_free {
                let max = self.project.spec.max_concurrent_sessions.unwrap_or(u32::MAX);
                let msg = format!(
                    "the usage limit reset at {}; waiting for a slot to resume in (maxConcurrentSessions: {max})",
                    Time(resets)
                );
                cond(self.st, s, types::READY, ConditionStatus::False, reasons::QUEUED, msg);
                return Ok(Some(Action::requeue(SLOT_POLL)));
            }
            let memo = ctx.state.lock().limits.get(name).cloned();
            let retries = memo.as_ref().is_some_and(|m| m.agent_retries);
            let what = if retries {
                "the agent retries by itself".to_string()
            } else {
                self.resume(rt, h, &a).await?;
                "the resume message was typed".to_string()
            };
            if let Some(m) = ctx.state.lock().limits.get_mut(name) {
                m.cleared = true;
            }
            let evidence = format!("the usage limit reset at {}; {what}", Time(resets));
            ctx.recorder.publish(s, EventType::Normal, "Resumed", &evidence).await;
            let st = &mut *self.st;
            st.activity =
                Some(ActivityStatus { state: ActivityState::Working, since: Time::now(), evidence, resets_at: None });
            cond(st, s, types::AGENT_ACTIVE, ConditionStatus::True, "Resumed", "resumed after the usage limit reset");
            cond(st, s, types::STALLED, ConditionStatus::False, "Progressing", "");
            cond(st, s, types::READY, ConditionStatus::True, "Running", "the agent is working");
            return Ok(Some(Action::requeue(Duration::from_secs(2))));
        }
        let Some(limit) = limits::detect(launch.adapter, screen, now, local_offset()) else { return Ok(None) };
        let seen = ctx.state.lock().limits.get(name).cloned();
        if seen.is_some_and(|m| m.cleared && m.agent_retries && m.line == limit.line) {
            // The retry message of a limit already waited out, still on screen.
            return Ok(None);
        }
        ctx.state.lock().limits.insert(
            name.clone(),
            LimitMemo { line: limit.line.clone(), agent_retries: limit.agent_retries, cleared: false },
        );
        let evidence = limit.evidence();
        let st = &mut *self.st;
        st.activity = Some(ActivityStatus {
            state: ActivityState::RateLimited,
            since: Time::now(),
            evidence: evidence.clone(),
            resets_at: Some(Time(limit.resets_at)),
        });
        ctx.recorder.publish(s, EventType::Warning, reasons::RATE_LIMITED, &evidence).await;
        limited_conditions(s, st, &evidence);
        Ok(Some(Action::requeue(until(now, limit.resets_at).min(RESYNC_QUIET))))
    }
    /// Types the resume message once: not again when its marker is already in the transcript (typed
    /// before a crash). Delivery is verified by the runtime.
    async fn resume(&self, rt: &dyn Runtime, h: &Handle, a: &ActivityStatus) -> Result<(), Error> {
        let (s, ctx, project, st) = (self.s, self.ctx, &self.project, &*self.st);
        let text = resume_message(a);
        let marker = text.split_whitespace().next().unwrap_or_default();
        let kind = st.runtime.as_ref().map_or(aoctl_runtimes::DEFAULT_RUNTIME, |r| r.kind);
        let keyboard = Keyboard::lock(ctx.machine.typing(), typed_agent(s, ctx, project, rt, h, kind)).await;
        keyboard.type_in(&text, &How { marker: Some(marker), ..How::of(What::Marked) }).await?;
        Ok(())
    }
    /// Reads the agent's usage records into `status.usage`, at most every [`USAGE_EVERY`]. Docker
    /// agents keep theirs inside the container and are not read. A failure is logged, not fatal.
    /// Returns when to look again for a read that had to wait for the interval.
    async fn read_usage(&mut self, launch: &Launch, grew: bool) -> Option<Duration> {
        let (s, ctx, st) = (self.s, self.ctx, &mut *self.st);
        let name = &s.metadata.name;
        if st.runtime.as_ref().is_none_or(|r| r.kind == RuntimeKind::Docker) {
            return None;
        }
        let ws = std::path::PathBuf::from(&st.workspace.as_ref()?.path);
        {
            let mut m = ctx.state.lock();
            let now = Instant::now();
            // The agent wrote since the last read: its records may have grown, so a read skipped now
            // is made once the interval is over, even if the agent is quiet by then.
            let pending = grew || m.usage_read.get(name).is_some_and(|r| r.pending);
            if let Some(last) = m.usage_read.get_mut(name).filter(|r| now.duration_since(r.at) < USAGE_EVERY) {
                last.pending = pending;
                return pending.then(|| USAGE_EVERY.saturating_sub(now.duration_since(last.at)));
            }
            m.usage_read.insert(name.clone(), UsageRead { at: now, pending: false });
        }
        let codex = launch.adapter.is_some_and(|a| a.name == "codex");
        let sources = usage::Sources::of_session(&s.spec.env, codex)?;
        let since = s.metadata.creation_timestamp.map(|t| std::time::SystemTime::from(t.0));
        match tokio::task::spawn_blocking(move || usage::read(&sources, &ws, since)).await {
            Ok(Ok(Some(u))) => st.usage = Some(u),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => tracing::debug!(session = %name, error = %e, "could not read the agent's usage records"),
            Err(e) => tracing::debug!(session = %name, error = %e, "the usage reader panicked"),
        }
        None
    }
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
        (_, true) | (ActivityState::RateLimited, false) => RESYNC_QUIET,
    }
}

/// The zone of clock times a limit message names none for: this machine's, the agent's.
fn local_offset() -> chrono::FixedOffset {
    chrono::Local::now().offset().fix()
}

/// Sets the conditions of a rate-limited session.
fn limited_conditions(s: &Session, st: &mut SessionStatus, evidence: &str) {
    cond(st, s, types::AGENT_ACTIVE, ConditionStatus::False, reasons::RATE_LIMITED, evidence);
    cond(st, s, types::STALLED, ConditionStatus::False, reasons::RATE_LIMITED, "waiting for the usage limit to reset");
    cond(st, s, types::READY, ConditionStatus::True, "Running", "the agent waits for its usage limit to reset");
}

/// How long from `now` to `at`, with a little margin so that `at` has passed; zero if it has.
fn until(now: DateTime<Utc>, at: DateTime<Utc>) -> Duration {
    (at - now).to_std().map_or(Duration::ZERO, |d| d + STUCK_MARGIN)
}

/// The message that resumes an agent after the limit in `a`: its marker is distinct per limit.
fn resume_message(a: &ActivityStatus) -> String {
    let fp = format!("{}|{}", a.evidence, a.resets_at.map(|t| t.to_string()).unwrap_or_default());
    let short = hex::encode(&Sha256::digest(fp.as_bytes())[..4]);
    format!("{}{short}] Your usage limit has reset. Please continue where you left off.", limits::RESUME_MARKER)
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

    #[test]
    fn resume_messages_carry_a_marker_distinct_per_limit() {
        let a = |evidence: &str, at: i64| ActivityStatus {
            state: ActivityState::RateLimited,
            since: Time::from_unix(0),
            evidence: evidence.into(),
            resets_at: Some(Time::from_unix(at)),
        };
        let m = resume_message(&a("5-hour limit reached ∙ resets 3pm", 100));
        assert!(m.starts_with(limits::RESUME_MARKER), "{m}");
        assert_eq!(m, resume_message(&a("5-hour limit reached ∙ resets 3pm", 100)), "stable across reconciles");
        assert_ne!(m, resume_message(&a("5-hour limit reached ∙ resets 3pm", 200)), "another limit, another marker");
        assert!(
            limits::detect(None, &format!("Claude usage limit reached\n> {m}"), Utc::now(), local_offset()).is_none()
        );
    }

    #[test]
    fn the_reset_is_waited_for_with_a_margin() {
        let now = Utc::now();
        assert_eq!(until(now, now + chrono::Duration::seconds(5)), S(5) + STUCK_MARGIN);
        assert_eq!(until(now, now - chrono::Duration::seconds(5)), Duration::ZERO);
    }
}
