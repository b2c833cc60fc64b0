//! The docker runtime: one container per session on a Docker engine, driven through bollard.
//!
//! Every instance belongs to one controller, its owner (an id given to `connect`; the controller
//! derives it from its data folder). A session's container is named
//! `aoctl-<owner hash>-<session>` (eight hex digits of the owner), so a restarted controller finds
//! it again, the engine itself refuses a second one, and controllers sharing an engine never clash
//! on a name. It carries the labels `ao.dev/session`, `ao.dev/project`, `ao.dev/managed-by=aoctl`
//! and `ao.dev/owner=<owner>` (by both of which `list` finds it), plus the transcript path, the
//! transcript offset and the terminal size a re-attaching runtime needs. A container of another
//! owner is never listed, adopted or removed: `probe` sees it as missing, `stop` leaves it, and
//! `start` refuses to take over a same-named one. The workspace
//! is bind-mounted at `/workspace`, the working directory; a git worktree also gets its main
//! repository's `.git` folder mounted at the same absolute path, so the worktree's `gitdir:` link
//! resolves inside. The controller's folder for the session (`LaunchSpec::session_dir`, where the
//! prompt file `{promptFile}` lives, outside the workspace) is mounted read-only at
//! `/aoctl/session`. Arguments and environment values naming a path in the workspace or the
//! session folder are rewritten to the same path under `/workspace` or `/aoctl/session` (whole
//! values only: `--file=/host/path` is passed as is). A relative program or argument is left
//! alone, so `./scripts/agent` resolves against the working directory `/workspace` and a bare
//! name against the image's `PATH`. The agent runs as the uid:gid owning the workspace, with
//! an init process (so SIGTERM stops it), a TTY and open stdin, no capabilities,
//! `no-new-privileges`, network `none` unless the spec names one, and the spec's CPU, memory and
//! PID limits.
//!
//! Output and input travel on two streams per container, described in [`stream`]: the log
//! follower fills the transcript, the attach connection types input and feeds the `vt100` screen
//! that `capture` and delivery verification read. `probe` and `list` re-open both for containers
//! this instance does not follow yet, which is how a restarted controller adopts its agents.
//! A terminal view ([`view`]) is fed from that screen and types on that connection; the container's
//! TTY takes the size of the newest view, and its own again when the last one closes.
//!
//! Engines: [`DockerRuntime::connect`] takes `unix://`, `tcp://` (TLS when `DOCKER_TLS_VERIFY` or
//! `DOCKER_CERT_PATH` is set, with `ca.pem`, `cert.pem` and `key.pem` from `DOCKER_CERT_PATH` or
//! `~/.docker`), `https://`, and `ssh://user@host[:port]`; with none it honours `DOCKER_HOST` and
//! falls back to the local socket. `ssh://` is bollard's own `ssh` transport: the `openssh` crate
//! runs the system `ssh` client as a control master (so `~/.ssh/config`, keys, the agent and
//! `known_hosts` apply) and each connection runs `docker system dial-stdio` on the remote host,
//! exactly as the docker CLI does; aoctl speaks no SSH itself. That transport loses a port written
//! in the URL (bollard hands `user@host:port` to ssh as a host name), so `connect` refuses
//! `ssh://host:port` and asks for a `~/.ssh/config` alias with a `Port` line instead. The API
//! version is negotiated, so an engine as old as API 1.41 works. The controller holds one instance
//! per engine; the engine stays in the instance and handles are container names.

mod container;
mod stream;
#[cfg(all(test, unix))]
mod tests;
mod view;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use aoctl_agents::InputStyle;
use aoctl_api::session::RuntimeKind;
use bollard::errors::Error as EngineError;
use bollard::models::{ContainerState, ContainerStateStatusEnum, ContainerSummaryStateEnum};
use bollard::query_parameters::{
    CreateContainerOptions, InspectContainerOptions, ListContainersOptionsBuilder, RemoveContainerOptions,
    ResizeContainerTTYOptions, StopContainerOptions,
};
use bollard::{Docker, API_DEFAULT_VERSION};
use parking_lot::Mutex;

use crate::runtime::{Handle, LaunchSpec, Owned, Probe, Runtime, RuntimeError, TerminalView};
use crate::tmux::delivery;
use container::{Meta, LABEL_MANAGED_BY, LABEL_OWNER, LABEL_PROJECT, LABEL_SESSION, MANAGED_BY};
use stream::Agent;

const RUNTIME: &str = "docker";

/// The engine used when neither `connect` nor `DOCKER_HOST` names one.
#[cfg(unix)]
const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";
#[cfg(windows)]
const DEFAULT_HOST: &str = "npipe:////./pipe/docker_engine";

/// Seconds an engine request may take to answer (streams then run as long as they last).
const REQUEST_TIMEOUT: u64 = 120;

/// Seconds `stop` gives the agent between SIGTERM and SIGKILL.
const STOP_GRACE: i32 = 5;

/// How long `stop` waits for the log follower to write a stopped container's last output.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(3);

/// Runs agents in containers of one Docker engine.
pub struct DockerRuntime {
    docker: Docker,
    /// The engine address as given to `connect`; `None` for the default engine.
    host: Option<String>,
    /// The engine address in use, for messages.
    address: String,
    /// The controller this instance works for: the `ao.dev/owner` label of its containers.
    owner: String,
    /// `aoctl-<owner hash>-`, the start of its container names.
    prefix: String,
    /// The streams of each container this instance follows, by container name.
    agents: Mutex<HashMap<String, Arc<Agent>>>,
    /// Held while streams are opened, so two calls never follow one container twice.
    adopting: tokio::sync::Mutex<()>,
}

fn failed(op: &'static str, message: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Failed { runtime: RUNTIME, op, message: message.to_string() }
}

fn start_failed(message: impl std::fmt::Display) -> RuntimeError {
    failed("start", message)
}

/// An error with its sources, which is where bollard keeps the reason a connection failed.
fn chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

fn is_status(e: &EngineError, code: u16) -> bool {
    matches!(e, EngineError::DockerResponseServerError { status_code, .. } if *status_code == code)
}

/// What an engine call's state means to the controller.
fn probe_of(state: Option<&ContainerState>) -> Probe {
    use ContainerStateStatusEnum as S;
    let Some(state) = state else { return Probe::Exited(None) };
    match state.status {
        Some(S::RUNNING | S::PAUSED | S::RESTARTING) => Probe::Alive,
        _ if state.running == Some(true) => Probe::Alive,
        Some(S::CREATED) => Probe::Exited(None),
        _ => Probe::Exited(state.exit_code.and_then(|c| i32::try_from(c).ok())),
    }
}

/// The certificate folder when `tcp://` must use TLS.
fn tls_dir(always: bool) -> Option<PathBuf> {
    let verify = std::env::var_os("DOCKER_TLS_VERIFY").is_some_and(|v| !v.is_empty());
    let dir = std::env::var_os("DOCKER_CERT_PATH").filter(|d| !d.is_empty()).map(PathBuf::from);
    match dir {
        Some(dir) => Some(dir),
        None if verify || always => std::env::var_os("HOME").map(|h| Path::new(&h).join(".docker")),
        None => None,
    }
}

/// The port written in an `ssh://` address, if any.
fn ssh_port(address: &str) -> Option<&str> {
    let rest = address.strip_prefix("ssh://")?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host.rsplit_once(':').map(|(_, port)| port).filter(|p| p.parse::<u16>().is_ok())
}

/// A client for `address` (not yet contacted).
fn client(address: &str) -> Result<Docker, EngineError> {
    let scheme = address.split_once("://").map_or("", |(s, _)| s);
    match scheme {
        "tcp" | "http" | "https" => match tls_dir(scheme == "https") {
            Some(dir) => Docker::connect_with_ssl(
                address,
                &dir.join("key.pem"),
                &dir.join("cert.pem"),
                &dir.join("ca.pem"),
                REQUEST_TIMEOUT,
                API_DEFAULT_VERSION,
            ),
            None => Docker::connect_with_http(address, REQUEST_TIMEOUT, API_DEFAULT_VERSION),
        },
        #[cfg(unix)]
        "unix" => Docker::connect_with_unix(address, REQUEST_TIMEOUT, API_DEFAULT_VERSION),
        #[cfg(windows)]
        "npipe" => Docker::connect_with_named_pipe(address, REQUEST_TIMEOUT, API_DEFAULT_VERSION),
        #[cfg(unix)]
        "ssh" => Docker::connect_with_ssh(address, REQUEST_TIMEOUT, API_DEFAULT_VERSION, None),
        _ => Docker::connect_with_host(address),
    }
}

impl DockerRuntime {
    /// Connects to the engine at `host` (`unix://`, `tcp://`, `https://`, `ssh://`; `npipe://` on
    /// Windows), or with `None` to `DOCKER_HOST` or the local engine (the socket; Docker Desktop's
    /// named pipe on Windows), and negotiates the API version. The instance works for controller
    /// `owner` (a stable, non-empty id): it sees only containers labelled `ao.dev/owner=<owner>`.
    pub async fn connect(host: Option<&str>, owner: &str) -> Result<DockerRuntime, RuntimeError> {
        let owner = owner.trim();
        if owner.is_empty() {
            return Err(failed("connect", "the owner id is empty"));
        }
        let host = host.map(str::trim).filter(|h| !h.is_empty()).map(str::to_string);
        let address = host
            .clone()
            .or_else(|| std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()))
            .unwrap_or_else(|| DEFAULT_HOST.to_string());
        let unavailable = |message: String| RuntimeError::Unavailable { runtime: RUNTIME, message };
        if let Some(port) = ssh_port(&address) {
            return Err(unavailable(format!(
                "{address}: the ssh transport cannot take a port in the address; add a Host alias with \
                 `Port {port}` to ~/.ssh/config and use ssh://user@alias"
            )));
        }
        let docker = client(&address)
            .map_err(|e| unavailable(format!("cannot use the engine address {address}: {}", chain(&e))))?;
        let docker = docker.negotiate_version().await.map_err(|e| match e {
            EngineError::DockerResponseServerError { status_code, message } => {
                unavailable(format!("the engine at {address} answered {status_code}: {}", message.trim()))
            }
            e => unavailable(format!("cannot reach the engine at {address} (is dockerd running?): {}", chain(&e))),
        })?;
        Ok(DockerRuntime {
            docker,
            host,
            address,
            owner: owner.to_string(),
            prefix: container::container_name(owner, ""),
            agents: Mutex::new(HashMap::new()),
            adopting: tokio::sync::Mutex::new(()),
        })
    }

    /// The engine address given to `connect`, `None` for the default engine.
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// Whether the engine answers now: one `/_ping`, given at most `within` to answer.
    pub async fn ping(&self, within: Duration) -> Result<(), RuntimeError> {
        match tokio::time::timeout(within, self.docker.ping()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(self.engine("ping", e)),
            Err(_) => Err(RuntimeError::Unavailable {
                runtime: RUNTIME,
                message: format!("the engine at {} did not answer a ping within {}s", self.address, within.as_secs()),
            }),
        }
    }

    /// The container of session `session`: `aoctl-<owner hash>-<session>`.
    pub(crate) fn container_name(&self, session: &str) -> String {
        format!("{}{session}", self.prefix)
    }

    /// The `ao.dev/owner` label of a container, `None` when it has none.
    fn owner_of(labels: &HashMap<String, String>) -> Option<&str> {
        labels.get(LABEL_OWNER).map(String::as_str)
    }

    /// Whether a container with these labels is one of this controller's.
    fn owns(&self, labels: &HashMap<String, String>) -> bool {
        Self::owner_of(labels) == Some(self.owner.as_str())
    }

    /// Whether a container with these labels is another controller's (an unlabelled one, made by
    /// an older aoctl, is nobody's).
    fn foreign(&self, labels: &HashMap<String, String>) -> bool {
        Self::owner_of(labels).is_some_and(|o| o != self.owner)
    }

    /// An engine error as the controller sees it: no answer is `Unavailable`, any answer `Failed`.
    fn engine(&self, op: &'static str, e: EngineError) -> RuntimeError {
        match e {
            EngineError::DockerResponseServerError { status_code, message } => {
                failed(op, format!("{} (HTTP {status_code})", message.trim()))
            }
            EngineError::HyperResponseError { .. }
            | EngineError::HyperLegacyError { .. }
            | EngineError::IOError { .. }
            | EngineError::RequestTimeoutError
            | EngineError::SocketNotFoundError(_) => RuntimeError::Unavailable {
                runtime: RUNTIME,
                message: format!("cannot reach the engine at {}: {}", self.address, chain(&e)),
            },
            other => failed(op, chain(&other)),
        }
    }

    fn get(&self, name: &str) -> Option<Arc<Agent>> {
        self.agents.lock().get(name).cloned()
    }

    async fn inspect(
        &self,
        op: &'static str,
        name: &str,
    ) -> Result<Option<bollard::models::ContainerInspectResponse>, RuntimeError> {
        match self.docker.inspect_container(name, None::<InspectContainerOptions>).await {
            Ok(c) => Ok(Some(c)),
            Err(e) if is_status(&e, 404) => Ok(None),
            Err(e) => Err(self.engine(op, e)),
        }
    }

    /// The streams of container `name`, opened when this instance does not follow it yet (or lost
    /// its attach connection while it runs); `None` for a container this controller did not create.
    async fn adopt(
        &self,
        name: &str,
        id: &str,
        labels: &HashMap<String, String>,
        running: bool,
    ) -> Result<Option<Arc<Agent>>, RuntimeError> {
        let current = |a: &Agent| a.id == id && (a.attached() || !running);
        if let Some(agent) = self.get(name).filter(|a| current(a)) {
            return Ok(Some(agent));
        }
        let Some(meta) = Meta::from_labels(labels).filter(|_| self.owns(labels)) else { return Ok(None) };
        let _adopting = self.adopting.lock().await;
        match self.get(name) {
            Some(agent) if current(&agent) => return Ok(Some(agent)),
            // Same container, attach connection lost: re-attach, keeping the log follower.
            Some(agent) if agent.id == id => {
                agent.attach(&self.docker).await.map_err(|e| self.engine("attach", e))?;
                return Ok(Some(agent));
            }
            _ => {}
        }
        let agent =
            Arc::new(Agent::open(&self.docker, id, &meta, running, true).await.map_err(|e| self.engine("attach", e))?);
        agent.follow(&self.docker, &meta);
        tracing::debug!(runtime = RUNTIME, container = name, running, "following an existing container");
        self.agents.lock().insert(name.to_string(), agent.clone());
        Ok(Some(agent))
    }

    /// The streams of a running container, for typing into.
    async fn running(&self, op: &'static str, handle: &Handle) -> Result<Arc<Agent>, RuntimeError> {
        if let Some(agent) = self.get(&handle.0).filter(|a| a.attached()) {
            return Ok(agent);
        }
        let not_found = || RuntimeError::NotFound { runtime: RUNTIME, handle: handle.0.clone() };
        let c = self.inspect(op, &handle.0).await?.ok_or_else(not_found)?;
        if probe_of(c.state.as_ref()) != Probe::Alive {
            return Err(failed(op, "the agent has exited"));
        }
        let labels = c.config.and_then(|c| c.labels).unwrap_or_default();
        self.adopt(&handle.0, c.id.as_deref().unwrap_or(&handle.0), &labels, true)
            .await?
            .ok_or_else(|| failed(op, format!("container {} was not created by this aoctl controller", handle.0)))
    }

    /// Stops and removes container `name`, after its log follower wrote its last output; another
    /// controller's container is left alone.
    async fn remove(&self, op: &'static str, name: &str) -> Result<(), RuntimeError> {
        let Some(c) = self.inspect(op, name).await? else {
            self.agents.lock().remove(name);
            return Ok(());
        };
        let labels = c.config.and_then(|c| c.labels).unwrap_or_default();
        if self.foreign(&labels) {
            tracing::warn!(
                runtime = RUNTIME,
                container = name,
                owner = Self::owner_of(&labels).unwrap_or_default(),
                "not removing another controller's container"
            );
            return Ok(());
        }
        let agent = self.agents.lock().remove(name);
        let stop = StopContainerOptions { signal: None, t: Some(STOP_GRACE) };
        match self.docker.stop_container(name, Some(stop)).await {
            Ok(()) => {}
            Err(e) if is_status(&e, 404) => return Ok(()),
            Err(e) if is_status(&e, 304) => {}
            Err(e) => return Err(self.engine(op, e)),
        }
        if let Some(agent) = agent {
            agent.finish(FLUSH_TIMEOUT).await;
        }
        let remove = RemoveContainerOptions { v: false, force: true, link: false };
        match self.docker.remove_container(name, Some(remove)).await {
            Ok(()) => Ok(()),
            // Gone already, or being removed by someone else.
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
            Err(e) => Err(self.engine(op, e)),
        }
    }

    /// Creates container `name` for `spec`, attaches to it and starts it.
    async fn create(&self, name: &str, spec: &LaunchSpec, image: &str) -> Result<(), RuntimeError> {
        match self.docker.inspect_image(image).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {
                return Err(start_failed(format!(
                    "image {image} is not on the engine at {}; build or pull it there first",
                    self.address
                )))
            }
            Err(e) => return Err(self.engine("start", e)),
        }
        let transcript = std::path::absolute(&spec.transcript)
            .map_err(|e| RuntimeError::Io { path: spec.transcript.clone(), source: e })?;
        if let Some(dir) = transcript.parent() {
            std::fs::create_dir_all(dir).map_err(|e| RuntimeError::Io { path: dir.to_path_buf(), source: e })?;
        }
        if !spec.session_dir.as_os_str().is_empty() {
            std::fs::create_dir_all(&spec.session_dir)
                .map_err(|e| RuntimeError::Io { path: spec.session_dir.clone(), source: e })?;
        }
        let offset = std::fs::metadata(&transcript).map(|m| m.len()).unwrap_or(0);
        let meta = Meta { transcript, offset, cols: spec.cols.max(1), rows: spec.rows.max(1) };
        let body = container::create_body(spec, &meta, &self.owner)?;
        let options = CreateContainerOptions { name: Some(name.to_string()), platform: String::new() };
        let id = match self.docker.create_container(Some(options), body).await {
            Ok(created) => created.id,
            Err(e) if is_status(&e, 409) => return Err(container::exists_error(name, "being started")),
            Err(e) => return Err(self.engine("start", e)),
        };
        // Attached before it starts, so the screen sees the first output.
        let started = async {
            let agent = Agent::open(&self.docker, &id, &meta, true, false).await?;
            self.docker.start_container(&id, None).await?;
            Ok::<_, EngineError>(agent)
        };
        let agent = match started.await {
            Ok(agent) => Arc::new(agent),
            Err(e) => {
                let remove = RemoveContainerOptions { v: false, force: true, link: false };
                let _ = self.docker.remove_container(&id, Some(remove)).await;
                // The image's PATH is only known to the engine: its runtime says when the program
                // is not there ("exec: \"claude\": executable file not found in $PATH").
                let text = e.to_string();
                if text.contains("executable file not found")
                    || (text.contains("exec:") && text.contains("no such file"))
                {
                    return Err(RuntimeError::ProgramNotFound {
                        runtime: RUNTIME,
                        program: spec.command[0].clone(),
                        searched: format!("in image {image}"),
                    });
                }
                return Err(self.engine("start", e));
            }
        };
        let size = ResizeContainerTTYOptions { h: meta.rows.into(), w: meta.cols.into() };
        if let Err(e) = self.docker.resize_container_tty(&id, size).await {
            tracing::debug!(runtime = RUNTIME, container = name, error = %e, "cannot set the terminal size");
        }
        agent.follow(&self.docker, &meta);
        self.agents.lock().insert(name.to_string(), agent);
        Ok(())
    }
}

#[async_trait::async_trait]
impl Runtime for DockerRuntime {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Docker
    }

    /// Creates and starts container `aoctl-<owner hash>-<session>`. A running container of that
    /// name is an error (and is adopted when it is this controller's); a finished one of this
    /// controller is removed first. One of another owner (or of none) is an error and left alone.
    async fn start(&self, spec: &LaunchSpec) -> Result<Handle, RuntimeError> {
        let image = container::image_of(spec.container.as_ref())?;
        if spec.command.is_empty() {
            return Err(start_failed("the command is empty"));
        }
        if !spec.workdir.is_dir() {
            return Err(start_failed(format!("working directory {} does not exist", spec.workdir.display())));
        }
        let name = self.container_name(&spec.session);
        if let Some(existing) = self.inspect("start", &name).await? {
            let labels = existing.config.as_ref().and_then(|c| c.labels.as_ref());
            if !labels.is_some_and(|l| self.owns(l)) {
                return Err(container::foreign_error(&name, labels.and_then(Self::owner_of)));
            }
            if probe_of(existing.state.as_ref()) == Probe::Alive {
                let labels = existing.config.and_then(|c| c.labels).unwrap_or_default();
                if let Err(e) = self.adopt(&name, existing.id.as_deref().unwrap_or(&name), &labels, true).await {
                    tracing::warn!(runtime = RUNTIME, container = %name, error = %e, "cannot follow the running container");
                }
                return Err(container::exists_error(&name, "running"));
            }
            self.remove("start", &name).await?;
        }
        self.create(&name, spec, image).await?;
        Ok(Handle(name))
    }

    /// The container's state; another controller's container is `Missing` to this one.
    async fn probe(&self, handle: &Handle) -> Result<Probe, RuntimeError> {
        let found = self.inspect("probe", &handle.0).await?;
        let labels = found.as_ref().and_then(|c| c.config.as_ref()).and_then(|c| c.labels.clone()).unwrap_or_default();
        let Some(c) = found.filter(|_| !self.foreign(&labels)) else {
            self.agents.lock().remove(&handle.0);
            return Ok(Probe::Missing);
        };
        let probe = probe_of(c.state.as_ref());
        let id = c.id.as_deref().unwrap_or(&handle.0);
        if let Err(e) = self.adopt(&handle.0, id, &labels, probe == Probe::Alive).await {
            tracing::warn!(runtime = RUNTIME, container = %handle.0, error = %e, "cannot follow the container");
        }
        Ok(probe)
    }

    /// Types and submits `text` on the container's stdin, verified on its screen by the rule of
    /// [`delivery`].
    async fn send(&self, handle: &Handle, text: &str, style: &InputStyle) -> Result<(), RuntimeError> {
        let agent = self.running("send", handle).await?;
        let _typing = agent.typing.lock().await;
        delivery::deliver(agent.as_ref(), RUNTIME, text, style).await
    }

    async fn pending(&self, handle: &Handle, text: &str) -> Result<bool, RuntimeError> {
        let agent = self.running("send", handle).await?;
        delivery::pending(agent.as_ref(), text).await
    }

    /// The last screenful of output, from the attach connection (or, for a container that is not
    /// running, from the end of its transcript).
    async fn capture(&self, handle: &Handle) -> Result<String, RuntimeError> {
        if let Some(agent) = self.get(&handle.0) {
            return Ok(agent.contents());
        }
        let not_found = || RuntimeError::NotFound { runtime: RUNTIME, handle: handle.0.clone() };
        let c = self.inspect("capture", &handle.0).await?.ok_or_else(not_found)?;
        let running = probe_of(c.state.as_ref()) == Probe::Alive;
        let labels = c.config.and_then(|c| c.labels).unwrap_or_default();
        let agent = self.adopt(&handle.0, c.id.as_deref().unwrap_or(&handle.0), &labels, running).await?;
        Ok(agent.ok_or_else(not_found)?.contents())
    }

    async fn keys(&self, handle: &Handle, keys: &[&str]) -> Result<(), RuntimeError> {
        if keys.is_empty() {
            return Ok(());
        }
        let agent = self.running("keys", handle).await?;
        let app = agent.application_cursor();
        let mut bytes = Vec::new();
        for key in keys {
            bytes.extend(stream::key_bytes(key, app).ok_or_else(|| failed("keys", format!("unknown key `{key}`")))?);
        }
        agent.write("keys", bytes)
    }

    /// Stops the container (SIGTERM, SIGKILL after five seconds) and removes it.
    async fn stop(&self, handle: &Handle) -> Result<(), RuntimeError> {
        self.remove("stop", &handle.0).await
    }

    /// A view of the running container's screen, adopting it first when this instance does not
    /// follow it yet.
    async fn terminal(&self, handle: &Handle, cols: u16, rows: u16) -> Result<TerminalView, RuntimeError> {
        let agent = self.running("terminal", handle).await?;
        Ok(view::open(self.docker.clone(), agent, cols, rows).await)
    }

    fn attach_command(&self, handle: &Handle) -> Vec<String> {
        container::attach_args(self.host.as_deref(), &handle.0)
    }

    /// The container name, `aoctl-<owner hash>-<session>`.
    fn handle_for(&self, session: &str) -> Option<Handle> {
        Some(Handle(self.container_name(session)))
    }

    /// Every container on this engine labelled `ao.dev/managed-by=aoctl` and
    /// `ao.dev/owner=<owner>`, whatever its state; the ones this instance does not follow yet are
    /// adopted. Other controllers' containers are not listed.
    async fn list(&self) -> Result<Vec<Owned>, RuntimeError> {
        let labels = vec![format!("{LABEL_MANAGED_BY}={MANAGED_BY}"), format!("{LABEL_OWNER}={}", self.owner)];
        let filters = HashMap::from([("label".to_string(), labels)]);
        let options = ListContainersOptionsBuilder::default().all(true).filters(&filters).build();
        let found = self.docker.list_containers(Some(options)).await.map_err(|e| self.engine("list", e))?;
        let mut owned = Vec::new();
        for c in found {
            let Some(name) = c.names.iter().flatten().map(|n| n.trim_start_matches('/')).next().map(str::to_string)
            else {
                continue;
            };
            let labels = c.labels.unwrap_or_default();
            if !self.owns(&labels) {
                continue;
            }
            let session = labels
                .get(LABEL_SESSION)
                .cloned()
                .or_else(|| name.strip_prefix(&self.prefix).map(str::to_string))
                .unwrap_or_else(|| name.clone());
            let running = matches!(
                c.state,
                Some(
                    ContainerSummaryStateEnum::RUNNING
                        | ContainerSummaryStateEnum::PAUSED
                        | ContainerSummaryStateEnum::RESTARTING
                )
            );
            if let Some(id) = &c.id {
                if let Err(e) = self.adopt(&name, id, &labels, running).await {
                    tracing::warn!(runtime = RUNTIME, container = %name, error = %e, "cannot follow the container");
                }
            }
            let project = labels.get(LABEL_PROJECT).filter(|p| !p.is_empty()).cloned();
            owned.push(Owned { session, project, handle: Handle(name) });
        }
        owned.sort_by(|a, b| a.session.cmp(&b.session));
        Ok(owned)
    }
}
