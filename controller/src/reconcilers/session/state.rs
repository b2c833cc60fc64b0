//! What the session reconciler learns in one reconcile and uses in the next: the last look at
//! each agent, the pull request answers, the failing jobs' log tails, each project's batch of
//! open pull requests, the limits waited for, when usage was read, the issues read and the places
//! taken on docker engines. It lives as long as this controller: a restarted one starts with
//! nothing remembered.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use aoctl_git::repository::GitError;
use parking_lot::{Mutex, MutexGuard};

use crate::forges::ForgeError;

/// What was last seen of a session's agent, to tell activity from silence.
#[derive(Clone, Debug)]
pub(crate) struct Observation {
    pub transcript_len: u64,
    pub screen: String,
    /// When the screen or transcript last changed.
    pub changed_at: Instant,
    /// When the screen was last captured.
    pub captured_at: Instant,
}

/// What the controller remembers of a session's pull request between reconciles.
#[derive(Clone, Debug, Default)]
pub(crate) struct PrMemo {
    /// The forge is asked again no sooner than this, unless a webhook arrives.
    pub next_poll: Option<Instant>,
    /// When a webhook about the session arrived and was not yet acted on.
    pub webhook_at: Option<Instant>,
    /// The last answers, reused between polls.
    pub facts: Option<Arc<Facts>>,
    /// The batch digest of the pull request when `facts` were read: while the project's batch
    /// shows the same, nothing else is read.
    pub digest: Option<String>,
    /// The workspace head last seen: a new one (the agent committed, perhaps pushed) asks the
    /// forge at once.
    pub local_head: Option<String>,
    /// Since when polls were held back for the token's budget, while they are.
    pub held_since: Option<aoctl_api::Time>,
}

/// A failing job's log tail, read once per job (a re-run is a new job) and kept while the job
/// fails; a failed read is tried again after a while.
#[derive(Clone, Debug)]
pub(super) struct LogTail {
    pub tail: Result<Option<String>, ForgeError>,
    pub at: Instant,
}

/// A project's open pull requests as one batched query saw them.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// When it was read; `None` before the first read.
    pub at: Option<Instant>,
    /// By branch.
    pub pulls: HashMap<String, aoctl_github::OpenPull>,
}

/// When a session's usage records were last read, and whether its agent wrote since.
pub(super) struct UsageRead {
    pub at: Instant,
    pub pending: bool,
}

/// Why the files that conflict with the base could not be computed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConflictsUnknown {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("the computation stopped: {0}")]
    Stopped(#[from] tokio::task::JoinError),
}

/// What the forge said about the session's pull request at the last poll.
#[derive(Debug)]
pub(crate) struct Facts {
    pub pr: aoctl_forge_types::PullRequest,
    pub checks: aoctl_forge_types::Checks,
    /// The reviews and comments of authors the project trusts (see `forges::Trust`).
    pub reviews: aoctl_forge_types::Reviews,
    /// The reviews and comments of everyone else, as held back from the agent.
    pub held: Vec<aoctl_api::session::HeldComment>,
    /// For a pull request with conflicts: the files that conflict with its base, or why they
    /// could not be computed.
    pub conflicts: Option<Result<Vec<String>, ConflictsUnknown>>,
    /// When these answers were read.
    pub at: Instant,
}

/// What the session reconciler remembers of a session's last limit.
#[derive(Clone, Debug)]
pub(super) struct LimitMemo {
    /// The limit's screen line.
    pub line: String,
    /// The agent retries by itself: nothing is typed at the reset.
    pub agent_retries: bool,
    /// Resumed from: the same line on screen is no new limit.
    pub cleared: bool,
}

/// The memory itself, behind [`State`]'s lock.
#[derive(Default)]
pub(super) struct Memory {
    /// Per session: the last look at its agent.
    pub observations: HashMap<String, Observation>,
    /// Per session: its pull request.
    pub prs: HashMap<String, PrMemo>,
    /// Per session: the limit it waits for or last waited for (see `activity.rs`).
    pub limits: HashMap<String, LimitMemo>,
    /// Per session: when its agent's usage records were last read.
    pub usage_read: HashMap<String, UsageRead>,
    /// Per session: its tracker issue and when it was read.
    pub issues: HashMap<String, (Instant, Arc<aoctl_forge_types::Issue>)>,
    /// Per session: the log tails of its failing jobs, by job id.
    pub log_tails: HashMap<String, HashMap<u64, LogTail>>,
    /// Per session: the engine it was placed on (`None`: taken off a lost one), until and after
    /// its status says so; placement counts these over the stored statuses (see `placement.rs`).
    pub placed: HashMap<String, Option<String>>,
    /// Per session: the lost engine it was moved off, whose container is removed once it answers.
    pub moved_from: HashMap<String, String>,
}

/// The session reconciler's memory, shared with the webhook handler (which asks for a poll).
#[derive(Default)]
pub(crate) struct State {
    memory: Mutex<Memory>,
    /// Per project: its batch of open pull requests; one read at a time.
    batches: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Batch>>>>,
    /// Held while a session is placed on an engine: the places are counted and one is taken
    /// before another session counts them.
    pub(super) placing: tokio::sync::Mutex<()>,
}

impl State {
    pub(super) fn lock(&self) -> MutexGuard<'_, Memory> {
        self.memory.lock()
    }

    /// A webhook concerns the session: its next reconcile asks GitHub at once.
    pub(crate) fn webhook_arrived(&self, session: &str) {
        let mut m = self.lock();
        let memo = m.prs.entry(session.to_string()).or_default();
        memo.webhook_at.get_or_insert_with(Instant::now);
        memo.next_poll = None;
    }

    /// What is remembered of the session's pull request.
    pub(crate) fn pr_memo(&self, session: &str) -> PrMemo {
        self.lock().prs.get(session).cloned().unwrap_or_default()
    }

    pub(crate) fn set_pr_memo(&self, session: &str, memo: PrMemo) {
        self.lock().prs.insert(session.to_string(), memo);
    }

    /// The batch of a project, to lock while it is read or refreshed.
    pub(super) fn batch(&self, project: &str) -> Arc<tokio::sync::Mutex<Batch>> {
        let mut batches = self.batches.lock();
        batches.entry(project.to_string()).or_default().clone()
    }

    pub(super) fn observation(&self, session: &str) -> Option<Observation> {
        self.lock().observations.get(session).cloned()
    }

    pub(super) fn observe(&self, session: &str, o: Observation) {
        self.lock().observations.insert(session.to_string(), o);
    }

    /// Drops what is remembered about a deleted session.
    pub(super) fn forget(&self, session: &str) {
        let mut m = self.lock();
        m.observations.remove(session);
        m.prs.remove(session);
        m.limits.remove(session);
        m.usage_read.remove(session);
        m.issues.remove(session);
        m.log_tails.remove(session);
        m.placed.remove(session);
        m.moved_from.remove(session);
    }
}
