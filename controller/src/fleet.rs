//! The real machine: the runtimes by kind (one docker connection per engine address), the
//! workspaces, the per-session files the controller keeps (prompt, transcript, delivery marker,
//! the inbox and journal of what is typed) and the typing locks. It implements
//! [`crate::machine::Machine`]; it knows no reconciler.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use aoctl_api::session::RuntimeKind;
use aoctl_git::workspace::Workspaces;
use aoctl_runtimes::docker::DockerRuntime;
use aoctl_runtimes::process::ProcessRuntime;
use aoctl_runtimes::tmux::TmuxRuntime;
use aoctl_runtimes::{Runtime, RuntimeError};

use crate::machine::{EngineHealth, Machine, SessionFiles, WorkspaceStore};

/// How long a ping of an engine may take.
const PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
/// How long an engine that answered is trusted before it is pinged again.
const PING_FRESH: std::time::Duration = std::time::Duration::from_secs(1);
/// The longest wait between pings of an engine that does not answer (they back off up to it).
const PING_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(4);

/// What was learnt of an engine at its last ping.
#[derive(Clone, Debug)]
struct Pinged {
    at: std::time::Instant,
    /// Since when it has not answered; `None` while it answers.
    down_since: Option<std::time::Instant>,
    /// Pings failed in a row.
    failures: u32,
    message: String,
}

impl Pinged {
    /// When the next ping is due: soon for an engine that answers, backing off for one that does not.
    fn fresh(&self) -> bool {
        let wait = match self.failures {
            0 => PING_FRESH,
            n => (std::time::Duration::from_millis(250) * (1 << n.min(5))).min(PING_BACKOFF_MAX),
        };
        self.at.elapsed() < wait
    }

    fn health(&self) -> EngineHealth {
        EngineHealth {
            answers: self.down_since.is_none(),
            down_for: self.down_since.map_or_else(Default::default, |t| t.elapsed()),
            message: self.message.clone(),
        }
    }
}

pub(crate) struct Fleet {
    tmux: Arc<TmuxRuntime>,
    process: Arc<ProcessRuntime>,
    pub workspaces: Workspaces,
    files: SessionFiles,
    docker: tokio::sync::Mutex<HashMap<String, Arc<DockerRuntime>>>,
    /// The last ping of each engine address asked about.
    pings: parking_lot::Mutex<HashMap<String, Pinged>>,
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
    pub(crate) fn new(data_dir: &Path) -> Fleet {
        Fleet {
            tmux: Arc::new(TmuxRuntime::new(data_dir.join("tmux.sock"))),
            process: Arc::new(ProcessRuntime::new()),
            workspaces: Workspaces::new(data_dir.join("workspaces")),
            files: SessionFiles::new(data_dir.join("sessions")),
            docker: tokio::sync::Mutex::new(HashMap::new()),
            pings: parking_lot::Mutex::new(HashMap::new()),
            owner: owner_id(data_dir),
            output_events: AtomicBool::new(false),
            typing: Default::default(),
        }
    }

    /// The same, with the owner id of a store that several controllers share (etcd): its
    /// replicas take over each other's containers on the engines they share.
    pub(crate) fn shared_by(data_dir: &Path, store_identity: &str) -> Fleet {
        Fleet { owner: identity_id(store_identity), ..Fleet::new(data_dir) }
    }

    /// The folder of every session's controller-side files.
    pub(crate) fn sessions_dir(&self) -> &Path {
        self.files.root()
    }

    /// Records whether a watcher wakes sessions on output and exits.
    pub(crate) fn set_output_events(&self, on: bool) {
        self.output_events.store(on, Ordering::Release);
    }

    /// A session's agent closed its output (it ended, or its runtime was stopped): no probe may
    /// answer from what was seen before.
    pub(crate) fn output_closed(&self, _session: &str) {
        self.tmux.invalidate_probes();
    }

    /// This controller's owner id on docker engines: its containers carry `ao.dev/owner=<id>`.
    #[cfg(test)]
    pub(crate) fn owner(&self) -> &str {
        &self.owner
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

    /// The folder of a session's controller-side files.
    #[cfg(test)]
    pub(crate) fn session_dir(&self, session: &str) -> PathBuf {
        self.files.dir(session)
    }

    pub(crate) fn transcript(&self, session: &str) -> PathBuf {
        self.files.transcript(session)
    }

    /// The session whose transcript `path` is, if it is one.
    pub(crate) fn transcript_of(&self, path: &Path) -> Option<String> {
        self.files.transcript_of(path)
    }

    #[cfg(test)]
    pub(crate) fn prompt_file(&self, session: &str) -> PathBuf {
        self.files.prompt(session)
    }

    /// The files of a session that typing into its agent keeps ([`crate::typing`]).
    #[cfg(test)]
    pub(crate) fn typing_files(&self, session: &str) -> crate::typing::Files {
        self.files.typing(session)
    }
}

#[async_trait::async_trait]
impl Machine for Fleet {
    async fn runtime(&self, kind: RuntimeKind, host: Option<&str>) -> Result<Arc<dyn Runtime>, RuntimeError> {
        match kind {
            RuntimeKind::Tmux if cfg!(windows) => Err(RuntimeError::Unavailable {
                runtime: "tmux",
                message: "tmux does not run on Windows; use `runtime: process`".into(),
            }),
            RuntimeKind::Tmux => Ok(self.tmux.clone()),
            RuntimeKind::Process => Ok(self.process.clone()),
            RuntimeKind::Docker => Ok(self.docker(host).await?),
        }
    }

    /// Tmux (not on Windows), process, the local docker engine when one answers, and every engine
    /// sessions use.
    async fn runtimes(&self) -> Vec<Arc<dyn Runtime>> {
        let mut all: Vec<Arc<dyn Runtime>> = vec![self.process.clone()];
        if !cfg!(windows) {
            all.insert(0, self.tmux.clone());
        }
        if let Err(e) = self.docker(None).await {
            tracing::debug!(error = %e, "no local docker engine");
        }
        all.extend(self.docker.lock().await.values().map(|d| d.clone() as Arc<dyn Runtime>));
        all
    }

    /// Pings the engine unless it was pinged a moment ago; failed pings back off.
    async fn engine_health(&self, host: &str) -> EngineHealth {
        if let Some(p) = self.pings.lock().get(host).filter(|p| p.fresh()) {
            return p.health();
        }
        let answer = match tokio::time::timeout(PING_TIMEOUT, self.docker(Some(host))).await {
            Ok(Ok(d)) => d.ping(PING_TIMEOUT).await,
            Ok(Err(e)) => Err(e),
            Err(_) => Err(RuntimeError::Unavailable {
                runtime: "docker",
                message: format!("the engine at {host} did not answer within {}s", PING_TIMEOUT.as_secs()),
            }),
        };
        let now = std::time::Instant::now();
        let mut pings = self.pings.lock();
        let before = pings.get(host).cloned();
        let next = match answer {
            Ok(()) => Pinged { at: now, down_since: None, failures: 0, message: String::new() },
            Err(e) => Pinged {
                at: now,
                down_since: Some(before.as_ref().and_then(|b| b.down_since).unwrap_or(now)),
                failures: before.as_ref().map_or(0, |b| b.failures) + 1,
                message: e.to_string(),
            },
        };
        if before.as_ref().map(|b| b.down_since.is_some()) != Some(next.down_since.is_some()) {
            match &next.down_since {
                None => tracing::info!(engine = %host, "the docker engine answers"),
                Some(_) => tracing::warn!(engine = %host, error = %next.message, "the docker engine does not answer"),
            }
        }
        let health = next.health();
        pings.insert(host.to_string(), next);
        health
    }

    async fn docker_engines(&self) -> Vec<(Option<String>, Arc<dyn Runtime>)> {
        let engines = self.docker.lock().await;
        engines.values().map(|d| (d.host().map(str::to_string), d.clone() as Arc<dyn Runtime>)).collect()
    }

    fn workspaces(&self) -> &dyn WorkspaceStore {
        &self.workspaces
    }

    fn files(&self) -> &SessionFiles {
        &self.files
    }

    fn typing(&self) -> &crate::typing::Typing {
        &self.typing
    }

    fn output_events(&self) -> bool {
        self.output_events.load(Ordering::Acquire)
    }
}

/// A stable id of the controller using `data_dir`: the first 12 hex digits of the SHA-256 of the
/// folder's canonical path (as given when it cannot be resolved), so two controllers sharing a
/// docker engine with different data folders never take each other's containers, and a restarted
/// one finds its own.
pub(crate) fn owner_id(data_dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    let dir = data_dir.canonicalize().or_else(|_| std::path::absolute(data_dir)).unwrap_or_else(|_| data_dir.into());
    let digest = Sha256::digest(dir.as_os_str().as_encoded_bytes());
    hex::encode(digest)[..12].to_string()
}

/// The owner id of the controllers sharing the store that `identity` names: 12 hex digits of the
/// SHA-256 of `store:<identity>`.
fn identity_id(identity: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(format!("store:{identity}").as_bytes()))[..12].to_string()
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
        let shared = Fleet::shared_by(a.path(), "etcd:00000000000000ab/aoctl").owner().to_string();
        assert_eq!(Fleet::shared_by(b.path(), "etcd:00000000000000ab/aoctl").owner(), shared, "any data folder");
        assert_ne!(Fleet::shared_by(a.path(), "etcd:00000000000000ab/other").owner(), shared);
        assert_ne!(shared, id);
    }
}
