//! The machine side the session reconciler drives: the runtimes by kind, the workspaces, and the
//! per-session files the controller keeps (prompt, transcript, delivery marker, the inbox and journal
//! of what is typed).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use aoctl_api::project::Project;
use aoctl_api::session::{AgentRef, RuntimeKind};
use aoctl_api::Session;
use aoctl_runtimes::agents;
use aoctl_runtimes::docker::DockerRuntime;
use aoctl_runtimes::process::ProcessRuntime;
use aoctl_runtimes::tmux::TmuxRuntime;
use aoctl_runtimes::workspace::Workspaces;
use aoctl_runtimes::{InputStyle, Runtime, RuntimeError};

/// The file in a session's folder that every byte of its agent's output is appended to.
const TRANSCRIPT: &str = "transcript.log";

/// What was last seen of a session's agent, to tell activity from silence.
#[derive(Clone, Debug)]
pub struct Observation {
    pub transcript_len: u64,
    pub screen: String,
    /// When the screen or transcript last changed.
    pub changed_at: Instant,
    /// When the screen was last captured.
    pub captured_at: Instant,
}

/// What the controller remembers of a session's pull request between reconciles.
#[derive(Clone, Debug, Default)]
pub struct PrMemo {
    /// GitHub is asked again no sooner than this, unless a webhook arrives.
    pub next_poll: Option<Instant>,
    /// When a webhook about the session arrived and was not yet acted on.
    pub webhook_at: Option<Instant>,
    /// The last answers, reused between polls.
    pub facts: Option<Arc<crate::reconcilers::session::pr::Facts>>,
}

pub struct Fleet {
    tmux: Arc<TmuxRuntime>,
    process: Arc<ProcessRuntime>,
    pub workspaces: Workspaces,
    sessions_dir: PathBuf,
    observations: Mutex<HashMap<String, Observation>>,
    prs: Mutex<HashMap<String, PrMemo>>,
    docker: tokio::sync::Mutex<HashMap<String, Arc<DockerRuntime>>>,
    /// This controller's id on shared docker engines (`ao.dev/owner`), from its data folder.
    owner: String,
    /// Whether a watcher of the transcripts wakes sessions on output and exits
    /// ([`crate::activity_watch`]); without one, activity is polled.
    output_events: AtomicBool,
    /// The per-session locks everything typed into an agent holds ([`crate::typing`]).
    pub typing: crate::typing::Typing,
}

impl Fleet {
    /// Lays out `<data dir>/{workspaces,sessions,tmux.sock}`.
    pub fn new(data_dir: &Path) -> Fleet {
        Fleet {
            tmux: Arc::new(TmuxRuntime::new(data_dir.join("tmux.sock"))),
            process: Arc::new(ProcessRuntime::new()),
            workspaces: Workspaces::new(data_dir.join("workspaces")),
            sessions_dir: data_dir.join("sessions"),
            observations: Mutex::new(HashMap::new()),
            prs: Mutex::new(HashMap::new()),
            docker: tokio::sync::Mutex::new(HashMap::new()),
            owner: owner_id(data_dir),
            output_events: AtomicBool::new(false),
            typing: Default::default(),
        }
    }

    /// The folder of every session's controller-side files.
    pub fn sessions_dir(&self) -> &Path {
        &self.sessions_dir
    }

    /// Whether agents' output and exits wake their sessions, so quiet ones need no polling.
    pub fn output_events(&self) -> bool {
        self.output_events.load(Ordering::Acquire)
    }

    /// Records whether a watcher wakes sessions on output and exits.
    pub fn set_output_events(&self, on: bool) {
        self.output_events.store(on, Ordering::Release);
    }

    /// A session's agent closed its output (it ended, or its runtime was stopped): no probe may
    /// answer from what was seen before.
    pub fn output_closed(&self, _session: &str) {
        self.tmux.invalidate_probes();
    }

    /// This controller's owner id on docker engines: its containers carry `ao.dev/owner=<id>`.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The runtime of a kind; for docker, the engine at `host` (`None`: the local default).
    pub async fn runtime(&self, kind: RuntimeKind, host: Option<&str>) -> Result<Arc<dyn Runtime>, RuntimeError> {
        match kind {
            RuntimeKind::Tmux => Ok(self.tmux.clone()),
            RuntimeKind::Process => Ok(self.process.clone()),
            RuntimeKind::Docker => Ok(self.docker(host).await?),
        }
    }

    /// The runtime a session's agent runs in, with its docker engine from its and its project's settings.
    pub async fn runtime_for(
        &self,
        s: &Session,
        p: Option<&Project>,
        kind: RuntimeKind,
    ) -> Result<Arc<dyn Runtime>, RuntimeError> {
        let host = container_of(s, p).and_then(|d| d.host);
        self.runtime(kind, host.as_deref()).await
    }

    /// One connection per docker engine, made on first use and kept.
    async fn docker(&self, host: Option<&str>) -> Result<Arc<DockerRuntime>, RuntimeError> {
        let key = host.unwrap_or_default().to_string();
        let mut engines = self.docker.lock().await;
        if let Some(d) = engines.get(&key) {
            return Ok(d.clone());
        }
        let d = Arc::new(DockerRuntime::connect(host, &self.owner).await?);
        engines.insert(key, d.clone());
        Ok(d)
    }

    /// Every runtime this controller can list agents from: tmux, process, the local docker engine
    /// when one answers, and every engine sessions use.
    pub async fn runtimes(&self) -> Vec<Arc<dyn Runtime>> {
        let mut all: Vec<Arc<dyn Runtime>> = vec![self.tmux.clone(), self.process.clone()];
        if let Err(e) = self.docker(None).await {
            tracing::debug!(error = %e, "no local docker engine");
        }
        all.extend(self.docker.lock().await.values().map(|d| d.clone() as Arc<dyn Runtime>));
        all
    }

    /// The folder of a session's controller-side files.
    pub fn session_dir(&self, session: &str) -> PathBuf {
        self.sessions_dir.join(session)
    }

    pub fn transcript(&self, session: &str) -> PathBuf {
        self.session_dir(session).join(TRANSCRIPT)
    }

    /// The session whose transcript `path` is, if it is one.
    pub fn transcript_of(&self, path: &Path) -> Option<String> {
        if path.file_name()? != TRANSCRIPT {
            return None;
        }
        let dir = path.parent()?;
        (dir.parent()? == self.sessions_dir).then(|| dir.file_name()?.to_str().map(str::to_string)).flatten()
    }

    pub fn prompt_file(&self, session: &str) -> PathBuf {
        self.session_dir(session).join("prompt.md")
    }

    /// Exists once the first prompt of the current runtime was delivered.
    pub fn delivered_marker(&self, session: &str) -> PathBuf {
        self.session_dir(session).join("prompt.delivered")
    }

    /// The files of a session that typing into its agent keeps ([`crate::typing`]).
    pub fn typing_files(&self, session: &str) -> crate::typing::Files {
        crate::typing::Files {
            dir: self.session_dir(session),
            transcript: self.transcript(session),
            delivered: self.delivered_marker(session),
        }
    }

    pub fn observation(&self, session: &str) -> Option<Observation> {
        self.observations.lock().expect("observations lock").get(session).cloned()
    }

    pub fn observe(&self, session: &str, o: Observation) {
        self.observations.lock().expect("observations lock").insert(session.to_string(), o);
    }

    pub fn forget(&self, session: &str) {
        self.observations.lock().expect("observations lock").remove(session);
        self.prs.lock().expect("prs lock").remove(session);
        self.typing.forget(session);
    }

    pub fn pr_memo(&self, session: &str) -> PrMemo {
        self.prs.lock().expect("prs lock").get(session).cloned().unwrap_or_default()
    }

    pub fn set_pr_memo(&self, session: &str, memo: PrMemo) {
        self.prs.lock().expect("prs lock").insert(session.to_string(), memo);
    }

    /// A webhook concerns the session: its next reconcile asks GitHub at once.
    pub fn webhook_arrived(&self, session: &str) {
        let mut prs = self.prs.lock().expect("prs lock");
        let memo = prs.entry(session.to_string()).or_default();
        memo.webhook_at.get_or_insert_with(Instant::now);
        memo.next_poll = None;
    }
}

/// A stable id of the controller using `data_dir`: the first 12 hex digits of the SHA-256 of the
/// folder's canonical path (as given when it cannot be resolved), so two controllers sharing a
/// docker engine with different data folders never take each other's containers, and a restarted
/// one finds its own.
pub fn owner_id(data_dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    let dir = data_dir.canonicalize().or_else(|_| std::path::absolute(data_dir)).unwrap_or_else(|_| data_dir.into());
    let digest = Sha256::digest(dir.as_os_str().as_encoded_bytes());
    hex::encode(digest)[..12].to_string()
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
pub fn input_style(agent: &AgentRef) -> (InputStyle, Option<&'static agents::Adapter>) {
    match agent {
        AgentRef::Builtin(name) => match agents::builtin(name) {
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
        (Some(o), Some(b)) => Some(aoctl_api::session::DockerSpec {
            image: o.image.or(b.image),
            cpus: o.cpus.or(b.cpus),
            memory: o.memory.or(b.memory),
            pids_limit: o.pids_limit.or(b.pids_limit),
            network: o.network.or(b.network),
            host: o.host.or(b.host),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_id_is_stable_per_data_folder() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let id = owner_id(a.path());
        assert_eq!(id.len(), 12);
        assert!(id.bytes().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_eq!(owner_id(&a.path().join(".")), id, "the canonical path counts");
        assert_ne!(owner_id(b.path()), id);
        assert_eq!(Fleet::new(a.path()).owner(), id);
    }

    #[test]
    fn transcript_of_names_the_session_of_a_transcript_only() {
        let dir = tempfile::tempdir().unwrap();
        let fleet = Fleet::new(dir.path());
        assert_eq!(fleet.transcript_of(&fleet.transcript("web-1")).as_deref(), Some("web-1"));
        assert_eq!(fleet.transcript_of(&fleet.prompt_file("web-1")), None);
        assert_eq!(fleet.transcript_of(&fleet.sessions_dir().join("transcript.log")), None);
        assert_eq!(fleet.transcript_of(&dir.path().join("other/web-1/transcript.log")), None);
    }
}
