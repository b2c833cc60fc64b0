//! The `Session` kind: one agent working on one branch in its own workspace and runtime. Its
//! status is in `status.rs`, its validation in `validate.rs`; what it shares with the other kinds
//! that run agents is in `crate::agent`, and is named here too.

use std::collections::BTreeMap;

mod status;
mod validate;

pub use crate::agent::{
    derived_label, AgentRef, DockerHost, DockerSpec, Permissions, RestartPolicy, RuntimeKind, WorkspaceKind,
    WorkspaceSpec, BUILTIN_AGENTS,
};
pub use crate::feedback::{FeedbackStatus, HeldComment, JobRerun};
pub use crate::orchestrator::SessionRole;
pub use crate::review::ReviewState;
pub use status::*;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::meta::{check_kind, de_api_version, default_api_version, resource_impl, Kind, ObjectMeta};
use crate::reactions::Reactions;

/// An agent working on one branch of a project.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Session {
    #[serde(default = "default_api_version", deserialize_with = "de_api_version")]
    pub api_version: String,
    #[serde(default = "session_kind", deserialize_with = "de_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: SessionSpec,
    #[serde(default, skip_serializing_if = "SessionStatus::is_empty")]
    pub status: SessionStatus,
}

fn session_kind() -> String {
    Kind::Session.as_str().to_string()
}

fn de_kind<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    check_kind(d, Kind::Session)
}

resource_impl!(Session, Kind::Session);

impl Session {
    /// A session with a name, project and prompt, for tests and `aoctl spawn`.
    pub fn new(name: &str, project: &str, prompt: &str) -> Session {
        Session {
            api_version: default_api_version(),
            kind: session_kind(),
            metadata: ObjectMeta { name: name.to_string(), ..Default::default() },
            spec: SessionSpec { project: project.to_string(), prompt: Some(prompt.to_string()), ..Default::default() },
            status: SessionStatus::default(),
        }
    }
}

/// What the user declares about a session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionSpec {
    /// Name of the `Project` this session works on.
    pub project: String,
    /// Built-in adapter name or `{command: [...]}`; the project's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRef>,
    /// Extra arguments appended to the adapter's command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_args: Vec<String>,
    /// `bypass` (default) or `ask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Permissions>,
    /// Where the agent runs; when neither the session nor its project's defaults name one, `tmux`
    /// (`process` on Windows, which has no tmux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeKind>,
    /// The session's checkout, `{kind: worktree | clone | readonly | none}`; a worktree when
    /// neither the session nor its project's defaults name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceSpec>,
    /// The first message typed into the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Tracker issue whose title and body join the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<String>,
    /// Branch of the session; `<sessionPrefix>/<name>` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Where a new branch starts; the project's default branch when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ref: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// `true` stops the runtime and keeps the workspace; `false` resumes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<PullRequestSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerSpec>,
    /// Per-key overrides of the project's reactions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reactions: Option<Reactions>,
    /// The reviewers of this session's pull request, in place of the project's `review`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<crate::review::ReviewSpec>,
    /// Makes this session a reviewer of the named worker session: it runs on a checkout of the
    /// worker's head, opens no pull request, and writes its review to `$AOCTL_REVIEW_FILE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_of: Option<String>,
    /// `worker` (the default) or `orchestrator`: the project's orchestrator, which the project
    /// reconciler makes from `Project.spec.orchestrator`; it has no branch of its own.
    #[serde(default, skip_serializing_if = "SessionRole::is_worker")]
    pub role: SessionRole,
}

/// Whether and how the session's pull request is opened.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PullRequestSpec {
    #[serde(default)]
    pub create: bool,
    #[serde(default)]
    pub draft: bool,
}
