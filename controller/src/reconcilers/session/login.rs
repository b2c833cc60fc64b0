//! An agent at its login or set-up screen: `AgentReady=False`, reason `AgentNotLoggedIn`, with how
//! that CLI logs in; nothing typed into it; and a first prompt its login screen used up marked to
//! be typed once it is logged in.

use std::time::Duration;

use aoctl_agents::Launch;
use aoctl_api::condition::{self, types};
use aoctl_api::session::{reasons, ActivityState, ActivityStatus};
use aoctl_api::{ConditionStatus, EventType, Session, SessionStatus, Time};

use super::cond;

/// How often an agent at its login screen is looked at (its output wakes it sooner).
pub(super) const LOGIN_LOOK: Duration = Duration::from_secs(5);

/// Records `AgentReady` from the screen: `False`, reason `AgentNotLoggedIn`, with how to log in,
/// while the agent's login or set-up screen shows (its activity is then `needs-input`, and
/// `Ready` is false); back to `True` once it is gone. True while it shows.
pub(super) async fn login_condition(
    s: &Session,
    ctx: &super::Context,
    st: &mut SessionStatus,
    launch: &Launch,
    screen: &str,
) -> bool {
    let Some(adapter) = launch.adapter else { return false };
    let was =
        condition::find(&st.conditions, types::AGENT_READY).is_some_and(|c| c.reason == reasons::AGENT_NOT_LOGGED_IN);
    let Some(line) = aoctl_agents::logged_out(adapter, screen) else {
        if was {
            let msg = "the agent left its login screen";
            cond(st, s, types::AGENT_READY, ConditionStatus::True, reasons::AGENT_FOUND, msg);
            ctx.recorder.publish(s, EventType::Normal, "LoggedIn", msg).await;
        }
        return false;
    };
    let name = &s.metadata.name;
    let how = if adapter.login.how.is_empty() { "log it in".to_string() } else { adapter.login.how.to_string() };
    let msg = format!(
        "{} is not logged in (its screen says {line:?}): {how}; `aoctl attach {name}` or the dashboard's terminal \
         reach it, and nothing is typed into it until it is logged in",
        adapter.name
    );
    let r = reasons::AGENT_NOT_LOGGED_IN;
    if !was {
        ctx.recorder.publish(s, EventType::Warning, r, &msg).await;
    }
    let files = ctx.machine.files().typing(name);
    let given_as_argument = launch.initial_input.is_none() && !launch.resumed;
    if adapter.login.resend_prompt && given_as_argument && !files.retyping() {
        // The prompt it was given as an argument got "not logged in" for an answer: it is not
        // delivered (its echo may have looked like a ready prompt a moment before), and is typed
        // once the agent is logged in. The marker stays, so a later login screen changes nothing.
        let prompt = ctx.machine.files().read_prompt(name).await.unwrap_or_default();
        if !prompt.trim().is_empty() {
            if let Err(e) = files.mark_retype().await {
                tracing::warn!(session = %name, error = %e, "cannot record that the first prompt must be typed again");
            }
        }
    }
    cond(st, s, types::AGENT_READY, ConditionStatus::False, r, msg.clone());
    if st.activity.as_ref().is_none_or(|a| a.state != ActivityState::NeedsInput) {
        st.activity = Some(ActivityStatus {
            state: ActivityState::NeedsInput,
            since: Time::now(),
            evidence: line,
            resets_at: None,
        });
    }
    if condition::find(&st.conditions, types::AGENT_ACTIVE).is_none_or(|c| c.reason != r) {
        cond(st, s, types::AGENT_ACTIVE, ConditionStatus::False, r, "waiting at its login screen");
    }
    cond(st, s, types::STALLED, ConditionStatus::False, "Progressing", "");
    cond(st, s, types::READY, ConditionStatus::False, r, "the agent waits for a person to log it in");
    true
}
