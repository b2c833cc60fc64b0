//! What the controller observed about a session: `SessionStatus` and its parts, the activity,
//! pull request and phase states, the condition reasons, and the phase derived from them.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent::RuntimeKind;
use crate::condition::Condition;
use crate::feedback::{FeedbackStatus, HeldComment};
use crate::meta::{string_enum, Time};
use crate::notification::{MergeStatus, NotificationRecord};
use crate::review::ReviewState;

string_enum!(
    /// The agent's activity, from its screen and transcript.
    ActivityState {
        Working = "working", Idle = "idle", NeedsInput = "needs-input", Stuck = "stuck", Exited = "exited",
        RateLimited = "rate-limited",
    }
);
string_enum!(
    /// State of a pull request.
    PullRequestState { Open = "open", Merged = "merged", Closed = "closed" }
);
string_enum!(
    /// Combined state of a pull request's checks.
    ChecksState { Passing = "passing", Failing = "failing", Pending = "pending", None = "none" }
);
string_enum!(
    /// Display summary of a session, derived from its conditions and status.
    Phase {
        Pending = "Pending", Queued = "Queued", Provisioning = "Provisioning", Working = "Working", Idle = "Idle",
        NeedsInput = "NeedsInput", Stuck = "Stuck", PrOpen = "PROpen", CiFailed = "CIFailed",
        ChangesRequested = "ChangesRequested", Approved = "Approved", Mergeable = "Mergeable", Merged = "Merged",
        Closed = "Closed", Stopped = "Stopped", Failed = "Failed", Terminating = "Terminating",
        RateLimited = "RateLimited",
    }
);

impl Phase {
    pub const ALL: [Phase; 18] = [
        Phase::Pending,
        Phase::Queued,
        Phase::Provisioning,
        Phase::Working,
        Phase::Idle,
        Phase::NeedsInput,
        Phase::Stuck,
        Phase::RateLimited,
        Phase::PrOpen,
        Phase::CiFailed,
        Phase::ChangesRequested,
        Phase::Approved,
        Phase::Mergeable,
        Phase::Merged,
        Phase::Closed,
        Phase::Stopped,
        Phase::Failed,
        Phase::Terminating,
    ];
}

/// What the controller observed about a session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<ActivityStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<PullRequestStatus>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reactions: BTreeMap<String, ReactionStatus>,
    /// Notifications recorded by reactions, pending or recently delivered (see `notification`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<NotificationRecord>,
    /// The merge the `approved-and-green` reaction decided last, and how it went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeStatus>,
    /// What of the pull request's feedback was already passed on, so that nothing is sent twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<FeedbackStatus>,
    /// Comments on the pull request from authors the project does not trust, newest last, at
    /// most [`HeldComment::MAX`]: never typed into the agent by the controller; a person may pass
    /// one on (the dashboard's session page).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_comments: Vec<HeldComment>,
    /// Tokens and cost, where the agent reports them (Claude Code, Codex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The files the session's branch changes since it left its base, published for the other
    /// sessions of the project to compare with their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_files: Option<ChangedFiles>,
    /// The other live sessions of the project whose branches change some of the same files, by
    /// session name (the `Overlapping` condition words them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlaps: Vec<Overlap>,
    /// What the session's own agent told the controller through `aoctl mcp`: its progress, a
    /// question for a person, a review it asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentReport>,
    /// A worker's reviewer rounds and their verdicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<crate::review::ReviewStatus>,
    /// A reviewer's review, read from its review file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<crate::review::ReviewerStatus>,
    /// The last `ao.dev/reconcile-requested-at` value acted on (`aoctl reconcile session`): the
    /// forge was read for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
    /// The agent the session runs: its own `spec.agent`, else its project's default, else
    /// `claude-code`; a custom agent as `custom:<program>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_agent: Option<String>,
    /// A worker an orchestrator spawned: what it has for its orchestrator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<crate::orchestrator::UpstreamStatus>,
    /// An orchestrator: what it had of its workers, and the batch being typed into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orchestrator: Option<crate::orchestrator::OrchestratorStatus>,
}

/// What an agent reported about itself through the agent API (`aoctl mcp`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentReport {
    /// The agent's last progress note.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub progress: String,
    /// The agent's last summary of its work.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// When it last reported progress or a summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_at: Option<Time>,
    /// The question the agent asked a person and that waits for `aoctl answer`; while it is
    /// here the session's activity is `needs-input`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<AgentQuestion>,
    /// The review the agent asked for last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_requested: Option<ReviewRequest>,
    /// When the agent's `aoctl mcp` last connected: its tools are there from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_at: Option<Time>,
}

/// A question an agent asked a person.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentQuestion {
    pub text: String,
    pub asked_at: Time,
}

/// A review an agent asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewRequest {
    /// What the agent wants looked at, in its words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    pub at: Time,
}

/// The files a branch changes: its head's tree against the tree of its merge base with the base
/// branch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangedFiles {
    /// The branch head the files were computed for.
    pub head_sha: String,
    /// The base branch's commit they were computed against.
    pub base_sha: String,
    /// The changed paths, sorted; the first [`ChangedFiles::MAX_FILES`] of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// How many paths changed in all (more than `files` holds when it is cut).
    #[serde(default)]
    pub count: u32,
}

impl ChangedFiles {
    /// The most paths a status publishes.
    pub const MAX_FILES: usize = 200;
}

/// Files that another session's branch changes too.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Overlap {
    /// The other session.
    pub session: String,
    /// The paths both branches change, sorted.
    pub files: Vec<String>,
}

/// Tokens an agent used and what they cost, as the agent itself recorded them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Usage {
    /// Every input token, cached ones included.
    #[serde(default)]
    pub input_tokens: u64,
    /// The part of `inputTokens` read from the prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// Output tokens, reasoning included.
    #[serde(default)]
    pub output_tokens: u64,
    /// Dollars, when the agent recorded a cost; absent when it recorded only tokens.
    #[serde(default, rename = "costUSD", skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Input and output tokens together: what a token budget counts.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// The larger of each figure of this and `other`.
    pub fn max(&self, other: &Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.max(other.input_tokens),
            cached_input_tokens: self.cached_input_tokens.max(other.cached_input_tokens),
            output_tokens: self.output_tokens.max(other.output_tokens),
            cost_usd: match (self.cost_usd, other.cost_usd) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0.0).max(b.unwrap_or(0.0))),
            },
        }
    }

    /// Adds `other` to this; a cost is known when either side knows one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.cached_input_tokens = self.cached_input_tokens.saturating_add(other.cached_input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
    }
}

impl SessionStatus {
    pub fn is_empty(&self) -> bool {
        *self == SessionStatus::default()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspaceStatus {
    pub path: String,
    pub branch: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_sha: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeStatus {
    pub kind: RuntimeKind,
    /// Runtime-specific handle: tmux session name, process id or container id.
    pub handle: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default)]
    pub restarts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The command that attaches a terminal to the agent (`aoctl attach` runs it); empty when
    /// the runtime cannot be attached to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attach_command: Vec<String>,
    /// The controller node the runtime lives on, for runtimes only that machine can reach (tmux,
    /// process, a docker engine on a local socket): only a controller of that node drives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Docker: the address of the engine the container lives on; absent for the default engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActivityStatus {
    pub state: ActivityState,
    pub since: Time,
    /// What the state was derived from, e.g. the matching screen line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub evidence: String,
    /// `rate-limited`: when the agent's usage limit resets and it is resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<Time>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PullRequestStatus {
    pub number: u64,
    pub url: String,
    pub state: PullRequestState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_sha: Option<String>,
    pub checks: ChecksState,
    pub review: ReviewState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mergeable: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReactionStatus {
    /// Identifies the current episode: from the condition's first appearance until it is resolved
    /// (for `ci-failed`: until checks pass on a head, across pushes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub episode: Option<String>,
    /// Messages sent (or notifications made) in the current episode.
    #[serde(default)]
    pub attempts: u32,
    /// When the current episode began; `escalateAfter` counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fingerprint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_at: Option<Time>,
    #[serde(default)]
    pub escalated: bool,
}

/// Condition reasons the phase is derived from.
pub mod reasons {
    /// `Ready=False`: waiting for a slot under the project's `maxConcurrentSessions`.
    pub const QUEUED: &str = "Queued";
    /// `Ready=False`: the project's `budget` is spent, so the session does not start.
    pub const BUDGET_SPENT: &str = "BudgetSpent";
    /// `AgentActive=False`: the agent reported a usage or rate limit and waits for its reset.
    pub const RATE_LIMITED: &str = "RateLimited";
    /// `RuntimeReady=False`: the agent exited and `restartPolicy` does not restart it.
    pub const AGENT_EXITED: &str = "AgentExited";
    /// `RuntimeReady=False`: the agent's runtime vanished (its tmux server or container is
    /// gone); set at the first look that misses it and held until the agent runs again.
    pub const RUNTIME_LOST: &str = "RuntimeLost";
    /// `RuntimeReady=False`: the agent exited and `restartPolicy` restarts it.
    pub const RESTARTING: &str = "Restarting";
    /// `WorkspaceReady=False`: the workspace folder was deleted from outside; it is made again.
    pub const WORKSPACE_MISSING: &str = "WorkspaceMissing";
    /// `RuntimeReady=False`: `spec.stopped` is true.
    pub const STOPPED: &str = "Stopped";
    /// `Overlapping=True`: another live session of the project changes some of the same files.
    pub const FILES_OVERLAP: &str = "FilesOverlap";
    /// `Overlapping=False`: no other live session of the project changes the same files.
    pub const NO_OVERLAP: &str = "NoOverlap";
    /// `IssueOpen=False`: the session's tracker issue (`spec.issue`) was closed.
    pub const ISSUE_CLOSED: &str = "IssueClosed";
    /// `RuntimeReady=False`: the agent cannot be launched as configured.
    pub const AGENT_CONFIG_INVALID: &str = "AgentConfigInvalid";
    /// `RuntimeReady=Unknown`: the runtime lives on another controller node than the one that
    /// leads; it is left alone until a controller of its node leads.
    pub const ON_ANOTHER_NODE: &str = "OnAnotherNode";
    /// `RuntimeReady=False`: the runtime kind is not available to this controller.
    pub const RUNTIME_UNAVAILABLE: &str = "RuntimeUnavailable";
    /// `Scheduled=True`: the session has a place on one of `spec.docker.hosts`.
    pub const PLACED: &str = "Placed";
    /// `Scheduled=False`, `Ready=False`: no engine of `spec.docker.hosts` that answers has room;
    /// the session waits (phase `Pending`).
    pub const NO_CAPACITY: &str = "NoCapacity";
    /// `Scheduled=False`, `RuntimeReady=False`: the engine the session was placed on stopped
    /// answering for longer than the grace period. With `restartPolicy: Never` also `Ready=False`
    /// and the phase `Failed`; otherwise `Ready=False`, reason `Rescheduling`.
    pub const HOST_LOST: &str = "HostLost";
    /// `Ready=False`: the session's host was lost and it is placed on another one.
    pub const RESCHEDULING: &str = "Rescheduling";
    /// `ForgeSynced=True`: the forge is read at its interval (and at once on webhooks).
    pub const FORGE_POLLED: &str = "Polled";
    /// `ForgeSynced=False`: the token's rate budget runs low; polls wait (reads a webhook asks
    /// for still go) and the session's view of its pull request may be stale.
    pub const FORGE_BUDGET_LOW: &str = "ForgeBudgetLow";
    /// `AgentReady=True`: the agent's program was found where its runtime runs it, and no login
    /// screen shows.
    pub const AGENT_FOUND: &str = "AgentFound";
    /// `AgentReady=False`, `Ready=False`: the agent's program is not found where its runtime runs
    /// it; nothing is started until it is (looked for again every minute and on `aoctl reconcile`).
    /// The phase is `NeedsInput`: a person installs it.
    pub const AGENT_NOT_FOUND: &str = "AgentNotFound";
    /// `AgentReady=False`: the agent shows its login or set-up screen; nothing is typed into it
    /// until a person logs it in (`aoctl attach`, the dashboard's terminal).
    pub const AGENT_NOT_LOGGED_IN: &str = "AgentNotLoggedIn";
    /// `AgentReady=False`: the agent exited within moments of its start; the message holds the
    /// last lines it printed.
    pub const AGENT_EXITED_AT_START: &str = "AgentExitedAtStart";
    /// `RuntimeReady` reasons that no retry will fix without a change: the phase is `Failed`. An
    /// unavailable runtime (a docker engine that is down) is retried instead.
    pub const PERMANENT: &[&str] = &[AGENT_EXITED, AGENT_CONFIG_INVALID];
}

impl SessionStatus {
    /// The display phase, derived from the conditions and the observed state. The order of the
    /// checks is the priority: deletion, a finished PR, a stop, queueing, failures, provisioning,
    /// PR progress, then the agent's activity.
    pub fn derive_phase(&self, stopped: bool, deleting: bool) -> Phase {
        use crate::condition::{find, types};
        use crate::ConditionStatus::*;
        let cond = |t: &str| find(&self.conditions, t);
        let is = |t: &str, st: crate::ConditionStatus| cond(t).is_some_and(|c| c.status == st);
        if deleting {
            return Phase::Terminating;
        }
        if let Some(pr) = &self.pull_request {
            match pr.state {
                PullRequestState::Merged => return Phase::Merged,
                PullRequestState::Closed => return Phase::Closed,
                PullRequestState::Open => {}
            }
        }
        if stopped {
            return Phase::Stopped;
        }
        if cond(types::READY)
            .is_some_and(|c| c.status == False && [reasons::QUEUED, reasons::BUDGET_SPENT].contains(&c.reason.as_str()))
        {
            return Phase::Queued;
        }
        if is(types::READY, False) && cond(types::READY).is_some_and(|c| c.reason == reasons::HOST_LOST) {
            return Phase::Failed;
        }
        if cond(types::SCHEDULED).is_some_and(|c| c.status == False && c.reason == reasons::NO_CAPACITY) {
            return Phase::Pending;
        }
        if is(types::WORKSPACE_READY, False) {
            return Phase::Failed;
        }
        if cond(types::AGENT_READY).is_some_and(|c| c.status == False && c.reason == reasons::AGENT_NOT_FOUND) {
            return Phase::NeedsInput;
        }
        if let Some(c) = cond(types::RUNTIME_READY) {
            if c.status == False && reasons::PERMANENT.contains(&c.reason.as_str()) {
                return Phase::Failed;
            }
        }
        if !is(types::WORKSPACE_READY, True) {
            return if self.conditions.is_empty() { Phase::Pending } else { Phase::Provisioning };
        }
        if !is(types::RUNTIME_READY, True) {
            return Phase::Provisioning;
        }
        // An agent waiting for its usage limit to reset can act on nothing, PR feedback included.
        if self.activity.as_ref().is_some_and(|a| a.state == ActivityState::RateLimited) {
            return Phase::RateLimited;
        }
        if let Some(pr) = &self.pull_request {
            return match (pr.checks, pr.review) {
                (ChecksState::Failing, _) => Phase::CiFailed,
                (_, ReviewState::ChangesRequested) => Phase::ChangesRequested,
                (ChecksState::Passing, ReviewState::Approved) if pr.mergeable == Some(true) => Phase::Mergeable,
                (_, ReviewState::Approved) => Phase::Approved,
                _ => Phase::PrOpen,
            };
        }
        match self.activity.as_ref().map(|a| a.state) {
            Some(ActivityState::NeedsInput) => Phase::NeedsInput,
            Some(ActivityState::Stuck) => Phase::Stuck,
            Some(ActivityState::Idle) => Phase::Idle,
            Some(ActivityState::Exited) => Phase::Failed,
            Some(ActivityState::RateLimited) => Phase::RateLimited,
            Some(ActivityState::Working) | None => Phase::Working,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::{set_condition, types};
    use crate::{Condition, ConditionStatus, Time};

    fn with(conds: &[(&str, ConditionStatus, &str)]) -> SessionStatus {
        let mut s = SessionStatus::default();
        for (t, st, r) in conds {
            set_condition(&mut s.conditions, Condition::new(t, *st, r, "", None, Time::from_unix(0)));
        }
        s
    }

    #[test]
    fn phases() {
        use ConditionStatus::*;
        assert_eq!(SessionStatus::default().derive_phase(false, false), Phase::Pending);
        assert_eq!(SessionStatus::default().derive_phase(false, true), Phase::Terminating);
        assert_eq!(with(&[(types::READY, False, reasons::QUEUED)]).derive_phase(false, false), Phase::Queued);
        assert_eq!(with(&[(types::WORKSPACE_READY, False, "SetupFailed")]).derive_phase(false, false), Phase::Failed);
        let running = with(&[(types::WORKSPACE_READY, True, "Ready"), (types::RUNTIME_READY, True, "Running")]);
        assert_eq!(running.derive_phase(false, false), Phase::Working);
        assert_eq!(running.derive_phase(true, false), Phase::Stopped);
        let mut idle = running.clone();
        idle.activity = Some(ActivityStatus {
            state: ActivityState::Idle,
            since: Time::from_unix(0),
            evidence: String::new(),
            resets_at: None,
        });
        assert_eq!(idle.derive_phase(false, false), Phase::Idle);
        let mut limited = running.clone();
        limited.activity = Some(ActivityStatus {
            state: ActivityState::RateLimited,
            since: Time::from_unix(0),
            evidence: "Claude usage limit reached".into(),
            resets_at: Some(Time::from_unix(3600)),
        });
        assert_eq!(limited.derive_phase(false, false), Phase::RateLimited);
        assert_eq!(
            with(&[(types::READY, False, reasons::BUDGET_SPENT)]).derive_phase(false, false),
            Phase::Queued,
            "a spent budget queues"
        );
        let mut pr = running.clone();
        pr.pull_request = Some(PullRequestStatus {
            number: 1,
            url: String::new(),
            state: PullRequestState::Open,
            head_sha: None,
            checks: ChecksState::Failing,
            review: ReviewState::None,
            mergeable: None,
        });
        assert_eq!(pr.derive_phase(false, false), Phase::CiFailed);
        let exited =
            with(&[(types::WORKSPACE_READY, True, "Ready"), (types::RUNTIME_READY, False, reasons::AGENT_EXITED)]);
        assert_eq!(exited.derive_phase(false, false), Phase::Failed);
    }

    #[test]
    fn a_session_without_room_is_pending_and_one_whose_host_was_lost_for_good_failed() {
        use ConditionStatus::*;
        let waiting =
            with(&[(types::SCHEDULED, False, reasons::NO_CAPACITY), (types::READY, False, reasons::NO_CAPACITY)]);
        assert_eq!(waiting.derive_phase(false, false), Phase::Pending);
        let lost = with(&[
            (types::WORKSPACE_READY, True, "WorkspaceReady"),
            (types::SCHEDULED, False, reasons::HOST_LOST),
            (types::RUNTIME_READY, False, reasons::HOST_LOST),
            (types::READY, False, reasons::HOST_LOST),
        ]);
        assert_eq!(lost.derive_phase(false, false), Phase::Failed);
        let moving = with(&[
            (types::WORKSPACE_READY, True, "WorkspaceReady"),
            (types::SCHEDULED, False, reasons::HOST_LOST),
            (types::RUNTIME_READY, False, reasons::HOST_LOST),
            (types::READY, False, reasons::RESCHEDULING),
        ]);
        assert_eq!(moving.derive_phase(false, false), Phase::Provisioning);
    }
}
