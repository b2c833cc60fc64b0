//! A project's orchestrator: `Project.spec.orchestrator` (its agent, first prompt and limits),
//! the Session role it runs as, the name and label that tie it to its workers, and what a worker
//! keeps for it (`status.upstream`) and it keeps of them (`status.orchestrator`). Imports no kind.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent::{check_agent, AgentRef, RuntimeKind};
use crate::meta::Time;
use crate::validate::{check_labels, env_name, Errors, Invalid};

/// Label on a worker an orchestrator spawned: the orchestrator Session's name.
pub const ORCHESTRATOR_LABEL: &str = "ao.dev/orchestrator";
/// Workers an orchestrator may have alive when `limits.maxSessions` is absent.
pub const DEFAULT_MAX_SESSIONS: u32 = 5;
/// The largest `limits.maxSessions`.
pub const MAX_SESSIONS_CEILING: u32 = 50;
/// The longest project name that may have an orchestrator: `<project>-orchestrator` must be a
/// session name (63 characters at most).
pub const MAX_PROJECT_NAME: usize = 63 - "-orchestrator".len();
/// The longest orchestrator prompt, in characters.
pub const MAX_PROMPT: usize = 20_000;

/// The name of a project's orchestrator Session: one per project, found without a list.
pub fn orchestrator_name(project: &str) -> String {
    format!("{project}-orchestrator")
}

/// What a Session is for: a worker (the default) works on a branch; the project's orchestrator
/// reads the repository and directs workers through its tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SessionRole {
    #[default]
    Worker,
    Orchestrator,
}

impl SessionRole {
    pub fn is_worker(&self) -> bool {
        *self == SessionRole::Worker
    }
}

/// A project's orchestrator agent: the project reconciler keeps a Session named
/// `<project>-orchestrator` in line with it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OrchestratorSpec {
    /// Built-in adapter name; the project's default agent when absent, else `claude-code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRef>,
    /// Its first message: the goal. A built-in orientation text when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Where it runs, as a session's `spec.runtime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeKind>,
    /// Its environment, and the environment of the workers it spawns.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Extra arguments of its agent's command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_args: Vec<String>,
    /// `true` stops it and keeps its Session; `false` runs it again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
    #[serde(default, skip_serializing_if = "OrchestratorLimits::is_default")]
    pub limits: OrchestratorLimits,
}

/// What the orchestrator's tools may do; a call past them fails and changes nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OrchestratorLimits {
    /// Workers it created that may exist at once, not merged, closed or failed (a stopped one
    /// counts: it can be resumed); 5 when absent, at most 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<u32>,
    /// The share of the project's `spec.budget`, in percent, that it and its workers may use;
    /// past it, spawn and resume are refused. The whole budget when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_percent: Option<u32>,
    /// It may merge its workers' pull requests (once approved and green).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merge: bool,
    /// Its workers' questions (`ask_human`) go to it instead of to a person.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub answer_questions: bool,
}

impl OrchestratorLimits {
    fn is_default(&self) -> bool {
        *self == OrchestratorLimits::default()
    }

    pub fn max_sessions(&self) -> u32 {
        self.max_sessions.unwrap_or(DEFAULT_MAX_SESSIONS)
    }
}

/// Checks `spec.orchestrator` of project `project` (`has_budget`: whether it has `spec.budget`).
pub(crate) fn check_orchestrator(project: &str, o: &OrchestratorSpec, has_budget: bool, e: &mut Errors) {
    if project.len() > MAX_PROJECT_NAME {
        e.check(
            "spec.orchestrator",
            Err(format!(
                "a project with an orchestrator has a name of at most {MAX_PROJECT_NAME} characters, so that \
                 `{}` is a session name",
                orchestrator_name(project)
            )
            .into()),
        );
    }
    if let Some(a) = &o.agent {
        check_agent("spec.orchestrator.agent", a, e);
    }
    if let Some(p) = &o.prompt {
        if p.chars().count() > MAX_PROMPT {
            e.check("spec.orchestrator.prompt", Err(format!("is longer than {MAX_PROMPT} characters").into()));
        }
    }
    for k in o.env.keys() {
        e.check(format!("spec.orchestrator.env.{k}"), env_name(k));
    }
    for (i, a) in o.agent_args.iter().enumerate() {
        if a.contains('\0') {
            e.check(format!("spec.orchestrator.agentArgs[{i}]"), Err("must not contain NUL".into()));
        }
    }
    if let Some(n) = o.limits.max_sessions.filter(|n| *n > MAX_SESSIONS_CEILING) {
        e.check("spec.orchestrator.limits.maxSessions", Err(format!("{n} is more than {MAX_SESSIONS_CEILING}").into()));
    }
    if let Some(p) = o.limits.budget_percent {
        let r: Result<(), Invalid> = if !(1..=100).contains(&p) {
            Err(format!("{p} is not a percentage from 1 to 100").into())
        } else if !has_budget {
            Err("needs spec.budget, the budget it is a share of".into())
        } else {
            Ok(())
        };
        e.check("spec.orchestrator.limits.budgetPercent", r);
    }
}

/// Checks labels given to a worker an orchestrator spawns: valid keys and values, none of the
/// controller's own (`ao.dev/`).
pub fn check_worker_labels(labels: &BTreeMap<String, String>) -> Vec<crate::FieldError> {
    let mut e = Errors(vec![]);
    check_labels("labels", labels, &mut e, true);
    for k in labels.keys().filter(|k| k.starts_with("ao.dev/")) {
        e.check(format!("labels.{k}"), Err("labels under ao.dev/ are the controller's".into()));
    }
    e.0
}

/// What a worker has for its orchestrator: records written with the fact they tell, trimmed once
/// the orchestrator had them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamStatus {
    /// The orchestrator Session these records are for.
    pub orchestrator: String,
    /// The next record's number.
    #[serde(default)]
    pub next: u64,
    /// Records the orchestrator has not had yet, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<UpstreamRecord>,
    /// Keys of the newest records, so that no fact is recorded twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<String>,
}

/// How many keys `UpstreamStatus.recent` keeps.
pub const RECENT_KEYS: usize = 32;
/// How many records `UpstreamStatus.pending` holds; past it the oldest are dropped.
pub const MAX_PENDING: usize = 50;
/// The longest record text, in characters.
pub const MAX_RECORD_TEXT: usize = 2_000;

impl UpstreamStatus {
    /// Appends a record unless its key was recorded already; whether it did.
    pub fn record(&mut self, kind: UpstreamKind, key: String, at: Time, text: &str) -> bool {
        if self.recent.contains(&key) || self.pending.iter().any(|r| r.key == key) {
            return false;
        }
        let clipped = text.chars().count() > MAX_RECORD_TEXT;
        let mut text: String = text.chars().take(MAX_RECORD_TEXT).collect();
        if clipped {
            text.push('…');
        }
        if self.pending.len() >= MAX_PENDING {
            let dropped = self.pending.len() + 1 - MAX_PENDING;
            self.pending.drain(..dropped);
            text = format!("({dropped} older messages were dropped) {text}");
        }
        let seq = self.next.max(1);
        self.next = seq + 1;
        self.pending.push(UpstreamRecord { seq, kind, key: key.clone(), at, text });
        self.recent.push(key);
        if self.recent.len() > RECENT_KEYS {
            let over = self.recent.len() - RECENT_KEYS;
            self.recent.drain(..over);
        }
        true
    }

    /// Drops the records up to `seq`, which the orchestrator had.
    pub fn trim(&mut self, seq: u64) -> bool {
        let before = self.pending.len();
        self.pending.retain(|r| r.seq > seq);
        self.pending.len() != before
    }

    /// The highest pending record's number.
    pub fn top(&self) -> u64 {
        self.pending.last().map_or(0, |r| r.seq)
    }
}

/// One thing a worker has for its orchestrator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamRecord {
    pub seq: u64,
    pub kind: UpstreamKind,
    /// What makes it one fact (`report:<reportedAt>`, `merged:<number>`).
    pub key: String,
    pub at: Time,
    pub text: String,
}

/// What a record tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum UpstreamKind {
    /// The worker's agent reported (`report`).
    Report,
    /// The worker's agent asked a question the orchestrator may answer.
    Question,
    /// Its pull request was merged.
    Merged,
    /// Its pull request was closed without merging.
    Closed,
    /// Its checks still fail after the retries its reactions allow.
    CiFailed,
    /// Its agent exited on its own.
    Exited,
    /// Its agent is stuck.
    Stuck,
}

impl UpstreamKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            UpstreamKind::Report => "report",
            UpstreamKind::Question => "question",
            UpstreamKind::Merged => "merged",
            UpstreamKind::Closed => "closed",
            UpstreamKind::CiFailed => "ci-failed",
            UpstreamKind::Exited => "exited",
            UpstreamKind::Stuck => "stuck",
        }
    }
}

/// What an orchestrator keeps of its workers' records: what it had, and the batch being typed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OrchestratorStatus {
    /// Workers it created that are alive (what `limits.maxSessions` counts).
    #[serde(default)]
    pub workers: u32,
    /// Per worker: the last record typed into the orchestrator.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub delivered: BTreeMap<String, Delivered>,
    /// The batch being typed: written before it is typed, cleared once it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<Batch>,
    /// Batches delivered so far.
    #[serde(default)]
    pub batches: u64,
}

/// The last record of one worker an orchestrator had.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Delivered {
    pub uid: String,
    pub seq: u64,
}

/// Records typed into an orchestrator as one message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Batch {
    pub id: u64,
    pub items: Vec<BatchItem>,
    pub text: String,
    pub formed_at: Time,
}

/// One record of a batch: a worker's record, or (`seq` 0) word that the worker is gone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BatchItem {
    pub session: String,
    pub uid: String,
    pub seq: u64,
    pub kind: String,
    pub at: Time,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_kept_once_per_key_and_trimmed_once_had() {
        let mut u = UpstreamStatus { orchestrator: "p-orchestrator".into(), ..Default::default() };
        let at = Time::now();
        assert!(u.record(UpstreamKind::Merged, "merged:12".into(), at, "PR #12 was merged"));
        assert!(!u.record(UpstreamKind::Merged, "merged:12".into(), at, "PR #12 was merged"));
        assert!(u.record(UpstreamKind::Report, "report:1".into(), at, "done"));
        assert_eq!(u.pending.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(u.top(), 2);
        assert!(u.trim(1));
        assert!(!u.trim(1));
        assert_eq!(u.pending.len(), 1);
        // A trimmed key is still known: the same fact is not recorded again.
        assert!(!u.record(UpstreamKind::Merged, "merged:12".into(), at, "PR #12 was merged"));
        assert_eq!(u.next, 3);
    }

    #[test]
    fn long_texts_are_clipped_and_an_overflow_says_so() {
        let mut u = UpstreamStatus::default();
        let at = Time::now();
        u.record(UpstreamKind::Report, "k".into(), at, &"x".repeat(MAX_RECORD_TEXT + 10));
        assert_eq!(u.pending[0].text.chars().count(), MAX_RECORD_TEXT + 1);
        assert!(u.pending[0].text.ends_with('…'));
        for i in 0..MAX_PENDING {
            u.record(UpstreamKind::Report, format!("r{i}"), at, "r");
        }
        assert_eq!(u.pending.len(), MAX_PENDING);
        assert_eq!(u.pending[0].seq, 2);
        assert!(u.pending.last().unwrap().text.starts_with("(1 older messages were dropped)"));
        assert!(u.recent.len() <= RECENT_KEYS);
    }
}
