//! The machine side as the reconcilers see it: runtimes by kind, the workspaces (and the project
//! reconciler's warm pools), the per-session files the controller keeps, the typing locks and the
//! git asked of a repository ([`Branches`]). [`crate::fleet::Fleet`] is the
//! real one; tests give the reconciler fakes. Nothing here knows any reconciler.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use aoctl_agents::InputStyle;
use aoctl_api::condition::{self, types};
use aoctl_api::project::Project;
use aoctl_api::session::{AgentRef, RuntimeKind, RuntimeStatus};
use aoctl_api::Session;
use aoctl_git::repository::{self, GitError, RepoInfo};
use aoctl_git::workspace::{
    PoolReport, PoolRequest, WorkspaceDiff, WorkspaceError, WorkspaceInfo, WorkspaceRecord, WorkspaceRequest,
    Workspaces,
};
pub(crate) use aoctl_runtimes::session_files::SessionFiles;
use aoctl_runtimes::{Handle, Runtime, RuntimeError};

use crate::typing::Typing;

/// What runs agents and holds their checkouts and files.
#[async_trait::async_trait]
pub(crate) trait Machine: Send + Sync + 'static {
    /// The runtime of a kind; for docker, the engine at `host` (`None`: the local default).
    async fn runtime(&self, kind: RuntimeKind, host: Option<&str>) -> Result<Arc<dyn Runtime>, RuntimeError>;

    /// Every runtime agents may be listed from (cleanup and orphan collection ask them all).
    async fn runtimes(&self) -> Vec<Arc<dyn Runtime>>;

    /// The session checkouts.
    fn workspaces(&self) -> &dyn WorkspaceStore;

    /// Where each session's controller-side files are.
    fn files(&self) -> &SessionFiles;

    /// The per-session locks everything typed into an agent holds.
    fn typing(&self) -> &Typing;

    /// Whether agents' output and exits wake their sessions, so quiet ones need no polling.
    fn output_events(&self) -> bool;

    /// The git the session reconciler asks of a session's branch: libgit2 through
    /// `aoctl_git::repository`, unless a machine has its own.
    fn branches(&self) -> &dyn Branches {
        &Git
    }

    /// Whether the docker engine at `host` answers, and since when it does not. A machine with
    /// no engines of its own to watch says every engine answers.
    async fn engine_health(&self, _host: &str) -> EngineHealth {
        EngineHealth { answers: true, down_for: Duration::ZERO, message: String::new() }
    }

    /// The docker engines connected so far, by address (`None`: the default engine).
    async fn docker_engines(&self) -> Vec<(Option<String>, Arc<dyn Runtime>)> {
        vec![]
    }

    /// The runtime a session's agent runs in: for docker, the engine its status records it on,
    /// else the one its and its project's settings name.
    async fn runtime_for(
        &self,
        s: &Session,
        p: Option<&Project>,
        kind: RuntimeKind,
    ) -> Result<Arc<dyn Runtime>, RuntimeError> {
        let recorded = s.status.runtime.as_ref().filter(|r| r.kind == kind).and_then(|r| r.host.clone());
        let host = recorded.or_else(|| container_of(s, p).and_then(|d| d.host));
        self.runtime(kind, host.as_deref()).await
    }

    /// The runtime and handle of the agent `status.runtime` names (see [`running_agent`]).
    async fn agent(
        &self,
        s: &Session,
        p: Option<&Project>,
        running: &RuntimeStatus,
    ) -> Result<(Arc<dyn Runtime>, Handle), RuntimeError> {
        let rt = self.runtime_for(s, p, running.kind).await?;
        Ok((rt, Handle(running.handle.clone())))
    }
}

/// What was last seen of a docker engine's answers.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EngineHealth {
    /// It answered the last ping.
    pub answers: bool,
    /// How long it has not answered; zero while it answers.
    pub down_for: Duration,
    /// Why the last ping failed; empty while it answers.
    pub message: String,
}

/// What the session reconciler asks git of a session's branch repository (its workspace, or the
/// repository behind its sandboxed checkout). Calls block (libgit2, the network); callers run them
/// on the blocking pool.
pub(crate) trait Branches: Send + Sync {
    /// The repository at `path`: its top folder and default branch.
    fn inspect(&self, path: &Path) -> Result<RepoInfo, GitError>;
    /// `path` with its links resolved, as git names the repository's top folder.
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf>;
    /// The commit id of local `branch`.
    fn resolve_branch(&self, root: &Path, branch: &str) -> Result<String, GitError>;
    /// How many commits `branch` has that `base` has not.
    fn ahead(&self, root: &Path, branch: &str, base: &str) -> Result<usize, GitError>;
    /// Pushes `branch` to `remote`, never forced.
    fn push(&self, workdir: &Path, remote: &str, branch: &str) -> Result<(), GitError>;
    /// Fetches `branch` of `remote`; the commit id it is at.
    fn fetch_branch(&self, workdir: &Path, remote: &str, branch: &str) -> Result<String, GitError>;
    /// The files a merge of commits `ours` and `theirs` would conflict in.
    fn conflicting_files(&self, root: &Path, ours: &str, theirs: &str) -> Result<Vec<String>, GitError>;
    /// The files commit `head` changes against its merge base with commit `base`.
    fn changed_files(&self, root: &Path, head: &str, base: &str) -> Result<Vec<String>, GitError>;
}

/// [`Branches`] through libgit2 (`aoctl_git::repository`).
pub(crate) struct Git;

impl Branches for Git {
    fn inspect(&self, path: &Path) -> Result<RepoInfo, GitError> {
        repository::inspect(path)
    }

    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        repository::canonicalize(path)
    }

    fn resolve_branch(&self, root: &Path, branch: &str) -> Result<String, GitError> {
        repository::resolve_branch(root, branch)
    }

    fn ahead(&self, root: &Path, branch: &str, base: &str) -> Result<usize, GitError> {
        repository::ahead(root, branch, base)
    }

    fn push(&self, workdir: &Path, remote: &str, branch: &str) -> Result<(), GitError> {
        repository::push(workdir, remote, branch)
    }

    fn fetch_branch(&self, workdir: &Path, remote: &str, branch: &str) -> Result<String, GitError> {
        repository::fetch_branch(workdir, remote, branch)
    }

    fn conflicting_files(&self, root: &Path, ours: &str, theirs: &str) -> Result<Vec<String>, GitError> {
        repository::conflicting_files(root, ours, theirs)
    }

    fn changed_files(&self, root: &Path, head: &str, base: &str) -> Result<Vec<String>, GitError> {
        repository::changed_files(root, head, base)
    }
}

/// The session checkouts: made, listed and removed. Calls block (git, setup commands); callers
/// run them on the blocking pool.
pub(crate) trait WorkspaceStore: Send + Sync {
    /// The folder every workspace lives under.
    fn root(&self) -> &Path;
    /// Creates the session's workspace, or returns it unchanged when it is already there.
    fn ensure(&self, req: &WorkspaceRequest) -> Result<WorkspaceInfo, WorkspaceError>;
    /// Deletes the session's workspace (the branch stays); whether anything was removed.
    fn remove(&self, project: &str, session: &str) -> Result<bool, WorkspaceError>;
    /// Every workspace with a record.
    fn list(&self) -> Result<Vec<WorkspaceRecord>, WorkspaceError>;
    /// The session's work against the merge base of its branch with `base_ref` (a branch or a
    /// commit id), as a unified diff of at most about `limit` bytes.
    fn diff(&self, project: &str, session: &str, base_ref: &str, limit: usize)
        -> Result<WorkspaceDiff, WorkspaceError>;
    /// One round of upkeep of a project's warm pool (see `Workspaces::tend_pool`).
    fn tend_pool(&self, req: &PoolRequest) -> Result<PoolReport, WorkspaceError>;
    /// Removes a project's pool entries; how many went.
    fn drain_pool(&self, project: &str) -> Result<usize, WorkspaceError>;
    /// The projects that have pool entries on disk.
    fn pools(&self) -> Vec<String>;
    /// Whether the folder of a workspace that was made, at `path`, is no longer there (deleted
    /// from outside); `false` when that cannot be told.
    fn is_gone(&self, path: &Path) -> bool;
}

impl WorkspaceStore for Workspaces {
    fn root(&self) -> &Path {
        Workspaces::root(self)
    }

    fn ensure(&self, req: &WorkspaceRequest) -> Result<WorkspaceInfo, WorkspaceError> {
        Workspaces::ensure(self, req)
    }

    fn remove(&self, project: &str, session: &str) -> Result<bool, WorkspaceError> {
        Workspaces::remove(self, project, session)
    }

    fn list(&self) -> Result<Vec<WorkspaceRecord>, WorkspaceError> {
        Workspaces::list(self)
    }

    fn diff(
        &self,
        project: &str,
        session: &str,
        base_ref: &str,
        limit: usize,
    ) -> Result<WorkspaceDiff, WorkspaceError> {
        Workspaces::diff(self, project, session, base_ref, limit)
    }

    fn tend_pool(&self, req: &PoolRequest) -> Result<PoolReport, WorkspaceError> {
        Workspaces::tend_pool(self, req)
    }

    fn drain_pool(&self, project: &str) -> Result<usize, WorkspaceError> {
        Workspaces::drain_pool(self, project)
    }

    fn pools(&self) -> Vec<String> {
        Workspaces::pools(self)
    }

    fn is_gone(&self, path: &Path) -> bool {
        Workspaces::is_gone(self, path)
    }
}

/// Why a session has no running agent, in a sentence that names the session.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotRunning {
    #[error("session \"{0}\" is being deleted; its agent does not run")]
    Deleting(String),
    #[error("session \"{0}\" is stopped (spec.stopped is true); its agent does not run")]
    Stopped(String),
    /// `RuntimeReady` is not True, with this reason and message.
    #[error("session \"{name}\" has no running agent ({reason}: {message})")]
    NotReady { name: String, reason: String, message: String },
    #[error("session \"{0}\" has no running agent: it has not started yet")]
    NotStarted(String),
}

/// The agent a session's status says runs: `status.runtime` while `RuntimeReady` is True and the
/// session is neither stopped nor being deleted.
pub(crate) fn running_agent(s: &Session) -> Result<&RuntimeStatus, NotRunning> {
    let name = s.metadata.name.clone();
    if s.metadata.deletion_timestamp.is_some() {
        return Err(NotRunning::Deleting(name));
    }
    if s.spec.stopped {
        return Err(NotRunning::Stopped(name));
    }
    let ready = condition::find(&s.status.conditions, types::RUNTIME_READY);
    match (ready, s.status.runtime.as_ref()) {
        (Some(c), Some(rt)) if c.status == aoctl_api::ConditionStatus::True => Ok(rt),
        (Some(c), _) if !c.message.is_empty() => {
            Err(NotRunning::NotReady { name, reason: c.reason.clone(), message: c.message.clone() })
        }
        _ => Err(NotRunning::NotStarted(name)),
    }
}

/// The branch a session's work is compared with: `spec.baseRef`, else the project's default
/// branch, else `main`.
pub(crate) fn base_ref_of(s: &Session, p: Option<&Project>) -> String {
    s.spec.base_ref.clone().or_else(|| p.and_then(|p| p.status.default_branch.clone())).unwrap_or_else(|| "main".into())
}

/// The agent a session runs: its own, else its project's default, else `claude-code`.
pub fn agent_of(s: &Session, p: Option<&Project>) -> AgentRef {
    s.spec
        .agent
        .clone()
        .or_else(|| p.and_then(|p| p.spec.defaults.as_ref()).and_then(|d| d.agent.clone()))
        .unwrap_or_else(|| AgentRef::Builtin("claude-code".into()))
}

/// How text is typed into an agent: its adapter's style, or the default for custom commands.
pub(crate) fn input_style(agent: &AgentRef) -> (InputStyle, Option<&'static aoctl_agents::Adapter>) {
    match agent {
        AgentRef::Builtin(name) => match aoctl_agents::builtin(name) {
            Some(a) => (a.input_style(), Some(a)),
            None => (InputStyle::default(), None),
        },
        AgentRef::Custom { .. } => (InputStyle::default(), None),
    }
}

/// The session's docker settings over its project's, field by field.
pub fn container_of(s: &Session, p: Option<&Project>) -> Option<aoctl_api::session::DockerSpec> {
    let (own, base) = (s.spec.docker.clone(), p.and_then(|p| p.spec.docker.clone()));
    match (own, base) {
        (None, b) => b,
        (Some(o), None) => Some(o),
        (Some(o), Some(b)) => Some({
            let pinned_or_own = o.host.is_some() || !o.hosts.is_empty();
            aoctl_api::session::DockerSpec {
                image: o.image.or(b.image),
                cpus: o.cpus.or(b.cpus),
                memory: o.memory.or(b.memory),
                pids_limit: o.pids_limit.or(b.pids_limit),
                network: o.network.or(b.network),
                // A session's own `host` pins it, its own `hosts` replace the project's, and either
                // hides the project's other choice.
                host: match (&o.host, o.hosts.is_empty()) {
                    (Some(_), _) => o.host,
                    (None, true) => b.host,
                    (None, false) => None,
                },
                hosts: if pinned_or_own { o.hosts } else { b.hosts },
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(extra_spec: serde_json::Value, status: serde_json::Value) -> Session {
        let mut spec = serde_json::json!({"project": "p", "prompt": "x"});
        spec.as_object_mut().unwrap().extend(extra_spec.as_object().unwrap().clone());
        let v = serde_json::json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session",
            "metadata": {"name": "s1"}, "spec": spec, "status": status});
        serde_json::from_value(v).unwrap()
    }

    fn ready(status: &str, reason: &str, message: &str) -> serde_json::Value {
        serde_json::json!({"type": "RuntimeReady", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2025-01-01T00:00:00Z"})
    }

    #[test]
    fn a_running_agent_is_the_one_runtime_ready_vouches_for() {
        let runtime = serde_json::json!({"kind": "tmux", "handle": "s1"});
        let running =
            serde_json::json!({"runtime": runtime, "conditions": [ready("True", "Running", "tmux runtime s1")]});
        let s = session(serde_json::json!({}), running.clone());
        assert_eq!(running_agent(&s).unwrap().handle, "s1");
        let stopped = session(serde_json::json!({"stopped": true}), running);
        assert_eq!(
            running_agent(&stopped).unwrap_err().to_string(),
            "session \"s1\" is stopped (spec.stopped is true); its agent does not run"
        );
        let exited = serde_json::json!({"runtime": runtime,
            "conditions": [ready("False", "AgentExited", "the agent exited with code 0")]});
        assert_eq!(
            running_agent(&session(serde_json::json!({}), exited)).unwrap_err().to_string(),
            "session \"s1\" has no running agent (AgentExited: the agent exited with code 0)"
        );
        assert_eq!(
            running_agent(&session(serde_json::json!({}), serde_json::json!({}))).unwrap_err().to_string(),
            "session \"s1\" has no running agent: it has not started yet"
        );
    }

    #[test]
    fn a_sessions_own_engine_choice_hides_its_projects() {
        use aoctl_api::session::{DockerHost, DockerSpec};
        let hosts = vec![DockerHost { host: "unix:///a.sock".into(), capacity: 2, name: None }];
        let mut p: Project = serde_json::from_value(serde_json::json!({"apiVersion": "ao.dev/v1alpha1",
            "kind": "Project", "metadata": {"name": "p"}, "spec": {"path": "/r"}}))
        .unwrap();
        p.spec.docker = Some(DockerSpec { image: Some("img".into()), hosts: hosts.clone(), ..Default::default() });
        let mut s = session(serde_json::json!({}), serde_json::json!({}));
        let merged = container_of(&s, Some(&p)).unwrap();
        assert_eq!((merged.host, merged.hosts.clone()), (None, hosts.clone()), "inherited");
        s.spec.docker = Some(DockerSpec { host: Some("unix:///pinned.sock".into()), ..Default::default() });
        let merged = container_of(&s, Some(&p)).unwrap();
        assert_eq!(
            (merged.host.as_deref(), merged.hosts.len(), merged.image.as_deref()),
            (Some("unix:///pinned.sock"), 0, Some("img"))
        );
        p.spec.docker = Some(DockerSpec { host: Some("unix:///project.sock".into()), ..Default::default() });
        s.spec.docker = Some(DockerSpec { hosts: hosts.clone(), ..Default::default() });
        let merged = container_of(&s, Some(&p)).unwrap();
        assert_eq!((merged.host, merged.hosts), (None, hosts), "the session's own hosts");
    }
}
