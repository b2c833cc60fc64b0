//! The `Project` kind: one local git repository that sessions work on.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent::{check_agent, check_docker, AgentRef, DockerSpec, RuntimeKind, WorkspaceSpec};
use crate::condition::Condition;
use crate::duration::Duration;
use crate::meta::{check_kind, de_api_version, default_api_version, resource_impl, Kind, ObjectMeta, Time};
use crate::reactions::Reactions;
use crate::review::check_review;
use crate::session::Usage;
use crate::validate::forges::{api_url, env_var, poll, project_path};
use crate::validate::{git_ref, http_url, is_absolute, relative_path, validate_meta, Errors, FieldError, Validate};

/// A repository and the defaults its sessions share.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Project {
    #[serde(default = "default_api_version", deserialize_with = "de_api_version")]
    pub api_version: String,
    #[serde(default = "project_kind", deserialize_with = "de_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: ProjectSpec,
    #[serde(default, skip_serializing_if = "ProjectStatus::is_empty")]
    pub status: ProjectStatus,
}

fn project_kind() -> String {
    Kind::Project.as_str().to_string()
}

fn de_kind<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    check_kind(d, Kind::Project)
}

resource_impl!(Project, Kind::Project);

impl Project {
    /// A project with just a name and a path, for tests and `aoctl up`.
    pub fn new(name: &str, path: &str) -> Project {
        Project {
            api_version: default_api_version(),
            kind: project_kind(),
            metadata: ObjectMeta { name: name.to_string(), ..Default::default() },
            spec: ProjectSpec { path: path.to_string(), ..Default::default() },
            status: ProjectStatus::default(),
        }
    }
}

/// What the user declares about a project.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectSpec {
    /// Absolute path of a local git repository.
    pub path: String,
    /// GitHub repository `owner/name` for pull requests and CI (a project on GitLab sets
    /// `gitlab.projectPath` instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// Branch new sessions start from; detected from the repository when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_branch: Option<String>,
    /// Prefix of session branches; the project name when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<GithubSpec>,
    /// The project's merge requests, pipelines and issues live on GitLab (instead of GitHub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitlab: Option<GitlabSpec>,
    /// The project's issues live on Linear: `spec.issue` of its sessions (`ENG-42`) and its
    /// IssueSources read Linear, whichever forge holds the changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear: Option<LinearSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<SessionDefaults>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<SetupSpec>,
    /// Sessions beyond this many wait in phase `Queued`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_sessions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reactions: Option<Reactions>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifiers: Vec<Notifier>,
    /// Docker settings sessions inherit (`host`, `image`, limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerSpec>,
    /// Once the project's sessions used this much, new sessions wait in phase `Queued`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Reviewer agents for the project's pull requests and when they run (see docs/reviewers.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<crate::review::ReviewSpec>,
    /// Worktrees kept checked out and set up ahead of time, so a new session starts without a
    /// checkout (see docs/sessions.md); off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_pool: Option<WorkspacePoolSpec>,
    /// Bounds on the sessions its agents create with `handoff` (see docs/mcp.md); 10 per session
    /// and 100 in the project when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<HandoffLimits>,
    /// Who, besides the people the forge gives write access and the project's own bots, may
    /// speak to its agents: whose reviews and comments are typed into them (see
    /// docs/security.md#who-may-speak-to-an-agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<TrustSpec>,
    /// An agent that runs the project's fleet from a goal: it spawns and directs workers through
    /// its tools, within its limits (see docs/orchestrator.md). Off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orchestrator: Option<crate::orchestrator::OrchestratorSpec>,
}

/// How many sessions a project's agents may have handed off (`handoff`) that still exist: past
/// either bound a handoff is refused and nothing is stored. 0 turns handing off off.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandoffLimits {
    /// Sessions handed off from one session; [`HandoffLimits::PER_SESSION`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_session: Option<u32>,
    /// Sessions handed off in the whole project; [`HandoffLimits::PER_PROJECT`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_project: Option<u32>,
}

impl HandoffLimits {
    pub const PER_SESSION: u32 = 10;
    pub const PER_PROJECT: u32 = 100;

    /// The bounds `limits` sets, the defaults where it says nothing: (per session, per project).
    pub fn of(limits: Option<&HandoffLimits>) -> (u32, u32) {
        let per_session = limits.and_then(|l| l.per_session).unwrap_or(Self::PER_SESSION);
        (per_session, limits.and_then(|l| l.per_project).unwrap_or(Self::PER_PROJECT))
    }
}

/// The people a project trusts beyond those with write access on its forge.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrustSpec {
    /// Logins (GitHub) or usernames (GitLab), compared without regard to case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
}

/// A project's warm pool: ready worktrees at the default branch's head, on a detached `HEAD`,
/// with the project's setup already run. A new session on the default branch, with a plain
/// worktree (`workspace.kind: worktree`, not in a container), claims one: its branch is made
/// there and the folder moved into place.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspacePoolSpec {
    /// How many ready worktrees to keep; 0 keeps none (and removes those there are).
    pub size: u32,
}

/// What the warm pool holds now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspacePoolStatus {
    /// The size asked for.
    pub size: u32,
    /// Worktrees ready to be claimed: at the default branch's head, with the setup done.
    pub ready: u32,
    /// Why the pool is short, when the last round of upkeep failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The rate budget of the token a project's forge (or tracker) is read with, and what this
/// project spent of it, as the controller last saw them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForgeBudgetStatus {
    /// `GitHub`, `GitLab` or `Linear`.
    pub service: String,
    /// The token's rate-limit windows the service reported (GitHub's `core` and `graphql`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<RateWindow>,
    /// What this project's requests cost against the limits in the last hour (a 304 nothing, a
    /// GraphQL query its points).
    pub spent_last_hour: u64,
    /// What every project on the same token spent in the last hour.
    pub token_spent_last_hour: u64,
    /// How many times slower than their interval polls go, when the token would not last until
    /// its reset at the present spend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<f64>,
    /// Whether polls wait for the budget (reads a webhook, a push or a person asks for still go).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub polls_held: bool,
}

/// One rate-limit window of a token.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateWindow {
    /// The service's name for it (`core`, `graphql`).
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_at: Option<Time>,
}

/// Limits on what a project's sessions use together, as the agents report it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// Input plus output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Dollars, counted only from agents that record a cost.
    #[serde(default, rename = "costUSD", skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Budget {
    /// Why `used` spends this budget, or `None` while some of it is left.
    pub fn spent(&self, used: &Usage) -> Option<String> {
        if let Some(t) = self.tokens.filter(|t| used.total_tokens() >= *t) {
            return Some(format!("{} of {t} tokens used", used.total_tokens()));
        }
        match (self.cost_usd, used.cost_usd) {
            (Some(max), Some(cost)) if cost >= max => Some(format!("${cost:.2} of ${max:.2} spent")),
            _ => None,
        }
    }
}

/// How the controller talks to GitHub for this project.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GithubSpec {
    /// REST base URL; `https://api.github.com` when absent (GitHub Enterprise: `https://HOST/api/v3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// Environment variable of the controller holding the token; `GITHUB_TOKEN` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// Environment variable holding the webhook secret; `AOCTL_WEBHOOK_SECRET` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret_env: Option<String>,
    /// How often open pull requests are polled; `30s` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<Duration>,
}

/// How the controller talks to GitLab for this project (see docs/gitlab.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitlabSpec {
    /// REST base URL; `https://gitlab.com/api/v4` when absent (self-managed: `https://HOST/api/v4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// The project's full path on GitLab, `group/subgroup/name`.
    pub project_path: String,
    /// Environment variable of the controller holding the token; `GITLAB_TOKEN` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// Environment variable holding the webhook's secret token; `AOCTL_GITLAB_WEBHOOK_TOKEN` when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_token_env: Option<String>,
    /// How often open merge requests are polled; `30s` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<Duration>,
}

/// How the controller talks to Linear for this project (see docs/linear.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinearSpec {
    /// GraphQL endpoint; `https://api.linear.app/graphql` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// Environment variable of the controller holding the API key; `LINEAR_API_KEY` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// Environment variable holding the webhook's signing secret; `AOCTL_LINEAR_WEBHOOK_SECRET`
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret_env: Option<String>,
}

/// Defaults for the project's sessions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionDefaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRef>,
    /// The runtime of sessions that name none; unset, `tmux` (`process` on Windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeKind>,
    /// The checkout of sessions that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceSpec>,
}

/// What is prepared in each new workspace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetupSpec {
    /// Files copied from the main checkout (relative paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copy: Vec<String>,
    /// Files or folders symlinked from the main checkout (relative paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub symlink: Vec<String>,
    /// Shell commands run in the workspace, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
}

/// Where notifications go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NotifierType {
    Webhook,
    Slack,
    Discord,
    Desktop,
    Command,
}

/// One notification target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Notifier {
    #[serde(rename = "type")]
    pub type_: NotifierType,
    /// For `webhook`, `slack` and `discord`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// For `command`: the argument vector; the notification arrives as JSON on stdin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

/// What the controller observed about a project.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The branch sessions start from: `spec.defaultBranch` or the one detected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_branch: Option<String>,
    /// Commit the default branch pointed at when last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_sha: Option<String>,
    /// Number of sessions of this project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<u32>,
    /// The usage of the project's sessions added up, deleted sessions included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// What deleted sessions used, so deleting a session does not give its spend back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_usage: Option<Usage>,
    /// The usage last counted for each stored session that has some, by session uid.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub session_usage: BTreeMap<String, Usage>,
    /// Notifications about the project (a spent budget), pending or recently delivered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<crate::notification::NotificationRecord>,
    /// The warm pool, when `spec.workspacePool` asks for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_pool: Option<WorkspacePoolStatus>,
    /// The rate budget of the token its forge is read with, when it has a forge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge_budget: Option<ForgeBudgetStatus>,
}

impl ProjectStatus {
    pub fn is_empty(&self) -> bool {
        *self == ProjectStatus::default()
    }
}

/// The most worktrees a project's warm pool may keep.
pub const MAX_POOL_SIZE: u32 = 100;

impl Validate for Project {
    fn validate(&self) -> Vec<FieldError> {
        let mut errs = vec![];
        validate_meta(&self.metadata, &mut errs);
        let mut e = Errors(errs);
        let s = &self.spec;
        if s.path.is_empty() {
            e.check("spec.path", Err("is required: the absolute path of a local git repository".into()));
        } else if !is_absolute(&s.path) || s.path.contains('\0') {
            e.check("spec.path", Err(format!("`{}` must be an absolute path", s.path).into()));
        }
        check_forges(s, &mut e);
        if let Some(o) = &s.orchestrator {
            crate::orchestrator::check_orchestrator(&self.metadata.name, o, s.budget.is_some(), &mut e);
        }
        if let Some(b) = &s.default_branch {
            e.check("spec.defaultBranch", git_ref(b));
        }
        if let Some(p) = &s.session_prefix {
            e.check("spec.sessionPrefix", git_ref(p));
        }
        if let Some(d) = &s.defaults {
            if let Some(a) = &d.agent {
                check_agent("spec.defaults.agent", a, &mut e);
            }
        }
        if let Some(setup) = &s.setup {
            for (i, p) in setup.copy.iter().enumerate() {
                e.check(format!("spec.setup.copy[{i}]"), relative_path(p));
            }
            for (i, p) in setup.symlink.iter().enumerate() {
                e.check(format!("spec.setup.symlink[{i}]"), relative_path(p));
            }
            for (i, c) in setup.commands.iter().enumerate() {
                if c.trim().is_empty() {
                    e.check(format!("spec.setup.commands[{i}]"), Err("must not be empty".into()));
                }
            }
        }
        if s.max_concurrent_sessions == Some(0) {
            e.check("spec.maxConcurrentSessions", Err("must be at least 1".into()));
        }
        if let Some(pool) = &s.workspace_pool {
            if pool.size > MAX_POOL_SIZE {
                e.check(
                    "spec.workspacePool.size",
                    Err(format!("must be at most {MAX_POOL_SIZE}: each one is a full checkout").into()),
                );
            }
        }
        if let Some(b) = &s.budget {
            if b.tokens == Some(0) {
                e.check("spec.budget.tokens", Err("must be at least 1".into()));
            }
            if let Some(c) = b.cost_usd {
                if !c.is_finite() || c <= 0.0 {
                    e.check("spec.budget.costUSD", Err("must be a positive number of dollars".into()));
                }
            }
            if b.tokens.is_none() && b.cost_usd.is_none() {
                e.check("spec.budget", Err("must set tokens or costUSD".into()));
            }
        }
        for (i, n) in s.notifiers.iter().enumerate() {
            let f = format!("spec.notifiers[{i}]");
            match n.type_ {
                NotifierType::Webhook | NotifierType::Slack | NotifierType::Discord => match &n.url {
                    Some(u) => e.check(format!("{f}.url"), http_url(u)),
                    None => e.check(
                        format!("{f}.url"),
                        Err(format!("is required for a {} notifier", n.type_.as_str()).into()),
                    ),
                },
                NotifierType::Command if n.command.is_empty() => {
                    e.check(format!("{f}.command"), Err("is required for a command notifier".into()))
                }
                _ => {}
            }
        }
        if let Some(d) = &s.docker {
            check_docker("spec.docker", d, &mut e);
        }
        if let Some(r) = &s.review {
            check_review("spec.review", r, &mut e);
        }
        e.0
    }
}

/// Checks `spec.repo`, `spec.github`, `spec.gitlab` and `spec.linear` of a project.
fn check_forges(s: &ProjectSpec, e: &mut Errors) {
    if let Some(r) = &s.repo {
        let ok = r.split_once('/').is_some_and(|(o, n)| {
            !o.is_empty()
                && !n.is_empty()
                && !n.contains('/')
                && r.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_./".contains(&c))
        });
        if !ok {
            e.check("spec.repo", Err(format!("`{r}` is not a GitHub repository of the form owner/name").into()));
        }
    }
    if let Some(g) = &s.github {
        api_url(e, "spec.github.apiUrl", g.api_url.as_deref());
        env_var(e, "spec.github.tokenEnv", g.token_env.as_deref());
        env_var(e, "spec.github.webhookSecretEnv", g.webhook_secret_env.as_deref());
        poll(e, "spec.github.pollInterval", g.poll_interval);
    }
    if let Some(g) = &s.gitlab {
        if s.repo.is_some() {
            e.check(
                "spec.gitlab",
                Err("cannot be set with spec.repo: a project's changes live on GitHub or on GitLab".into()),
            );
        }
        if s.github.is_some() {
            e.check("spec.gitlab", Err("cannot be set with spec.github: the project is on one forge".into()));
        }
        e.check("spec.gitlab.projectPath", project_path(&g.project_path));
        api_url(e, "spec.gitlab.apiUrl", g.api_url.as_deref());
        env_var(e, "spec.gitlab.tokenEnv", g.token_env.as_deref());
        env_var(e, "spec.gitlab.webhookTokenEnv", g.webhook_token_env.as_deref());
        poll(e, "spec.gitlab.pollInterval", g.poll_interval);
    }
    if let Some(l) = &s.linear {
        api_url(e, "spec.linear.apiUrl", l.api_url.as_deref());
        env_var(e, "spec.linear.tokenEnv", l.token_env.as_deref());
        env_var(e, "spec.linear.webhookSecretEnv", l.webhook_secret_env.as_deref());
    }
}

impl NotifierType {
    pub fn as_str(self) -> &'static str {
        match self {
            NotifierType::Webhook => "webhook",
            NotifierType::Slack => "slack",
            NotifierType::Discord => "discord",
            NotifierType::Desktop => "desktop",
            NotifierType::Command => "command",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::{GitlabSpec, LinearSpec};

    fn errors(check: impl FnOnce(&mut Errors)) -> Vec<String> {
        let mut e = Errors(vec![]);
        check(&mut e);
        e.0.into_iter().map(|f| f.to_string()).collect()
    }

    #[test]
    fn workspace_pools() {
        let with = |size| {
            let mut p = Project::new("demo", "/abs/repo");
            p.spec.workspace_pool = Some(WorkspacePoolSpec { size });
            p.validate().into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>()
        };
        assert!(with(0).is_empty());
        assert!(with(MAX_POOL_SIZE).is_empty());
        assert_eq!(
            with(MAX_POOL_SIZE + 1),
            ["spec.workspacePool.size: must be at most 100: each one is a full checkout"]
        );
    }

    #[test]
    fn budgets() {
        let with = |b: Budget| {
            let mut p = Project::new("demo", "/abs/repo");
            p.spec.budget = Some(b);
            p.validate().into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>()
        };
        assert_eq!(with(Budget { tokens: Some(1000), cost_usd: Some(2.5) }), Vec::<String>::new());
        assert_eq!(with(Budget { tokens: Some(0), cost_usd: None }), ["spec.budget.tokens: must be at least 1"]);
        assert_eq!(
            with(Budget { tokens: None, cost_usd: Some(-1.0) }),
            ["spec.budget.costUSD: must be a positive number of dollars"]
        );
        assert_eq!(with(Budget { tokens: None, cost_usd: Some(f64::NAN) }).len(), 1);
        assert_eq!(with(Budget::default()), ["spec.budget: must set tokens or costUSD"]);
    }

    #[test]
    fn a_project_is_on_one_forge_and_names_it_well() {
        let gitlab = GitlabSpec { project_path: "acme/widgets".into(), ..Default::default() };
        let ok =
            ProjectSpec { gitlab: Some(gitlab.clone()), linear: Some(LinearSpec::default()), ..Default::default() };
        assert_eq!(errors(|e| check_forges(&ok, e)), Vec::<String>::new());
        let both = ProjectSpec { repo: Some("acme/widgets".into()), gitlab: Some(gitlab), ..Default::default() };
        assert_eq!(
            errors(|e| check_forges(&both, e)),
            ["spec.gitlab: cannot be set with spec.repo: a project's changes live on GitHub or on GitLab"]
        );
        let bad = ProjectSpec {
            gitlab: Some(GitlabSpec {
                project_path: "widgets".into(),
                api_url: Some("gitlab.example".into()),
                webhook_token_env: Some("1X".into()),
                poll_interval: Some(crate::Duration(std::time::Duration::from_millis(10))),
                ..Default::default()
            }),
            linear: Some(LinearSpec { token_env: Some("A-B".into()), ..Default::default() }),
            ..Default::default()
        };
        let found = errors(|e| check_forges(&bad, e));
        let fields: Vec<&str> = found.iter().map(|m| m.split(':').next().unwrap_or_default()).collect();
        assert_eq!(
            fields,
            [
                "spec.gitlab.projectPath",
                "spec.gitlab.apiUrl",
                "spec.gitlab.webhookTokenEnv",
                "spec.gitlab.pollInterval",
                "spec.linear.tokenEnv"
            ],
            "{found:#?}"
        );
    }

    #[test]
    fn budgets_are_spent_by_tokens_or_by_known_cost() {
        let used = Usage { input_tokens: 900, output_tokens: 100, cost_usd: Some(1.5), ..Default::default() };
        assert_eq!(Budget { tokens: Some(2000), cost_usd: None }.spent(&used), None);
        assert_eq!(
            Budget { tokens: Some(1000), cost_usd: None }.spent(&used).as_deref(),
            Some("1000 of 1000 tokens used")
        );
        assert_eq!(Budget { tokens: None, cost_usd: Some(1.0) }.spent(&used).as_deref(), Some("$1.50 of $1.00 spent"));
        let no_cost = Usage { cost_usd: None, ..used };
        assert_eq!(Budget { tokens: None, cost_usd: Some(1.0) }.spent(&no_cost), None, "no cost recorded, none spent");
    }
}
