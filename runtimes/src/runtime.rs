//! The `Runtime` trait: how the controller starts, probes, types into, reads and stops an agent,
//! whatever it runs in (tmux, a PTY it owns, a container).

use std::collections::BTreeMap;
use std::path::PathBuf;

use aoctl_agents::InputStyle;
use aoctl_api::session::{DockerSpec, RuntimeKind};
use aoctl_git::workspace::Sandbox;

/// The terminal size every agent gets, in columns and rows.
pub const TERMINAL_COLS: u16 = 200;
pub const TERMINAL_ROWS: u16 = 50;

/// The runtime of sessions that name none: tmux, or on Windows, which has no tmux, the process
/// runtime (a ConPTY the controller owns).
pub const DEFAULT_RUNTIME: RuntimeKind = if cfg!(windows) { RuntimeKind::Process } else { RuntimeKind::Tmux };

/// Everything needed to start one agent.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchSpec {
    /// The Session's name (a DNS-1123 label); runtimes derive their own names from it.
    pub session: String,
    pub project: String,
    /// Working directory: the session's workspace.
    pub workdir: PathBuf,
    /// Argument vector; never joined into a shell string.
    pub command: Vec<String>,
    /// The agent's whole environment, as [`crate::agent_env::agent_env`] makes it: nothing of the
    /// controller's own environment reaches the agent unless it is here. Runtimes add only the
    /// terminal's `TERM` (and what tmux sets in a pane: `TMUX`, `TMUX_PANE`); a container also has
    /// its image's environment.
    pub env: BTreeMap<String, String>,
    /// File every byte of output is appended to (`aoctl logs`).
    pub transcript: PathBuf,
    /// The controller's folder for this session (the prompt file lives here). Runtimes that
    /// isolate files (docker) mount it read-only so `{promptFile}` resolves inside.
    pub session_dir: PathBuf,
    /// Terminal size.
    pub cols: u16,
    pub rows: u16,
    /// Container settings for the docker runtime (the session's over the project's); other
    /// runtimes ignore them.
    pub container: Option<DockerSpec>,
    /// The workspace's sandbox git folder and the main repository's objects, which the docker
    /// runtime mounts (read-only where the agent must not write); other runtimes ignore it.
    pub sandbox: Option<Sandbox>,
}

/// An opaque, runtime-specific name for a started agent: a tmux session name, a process id, a
/// container id. Stored in `status.runtime.handle` so a restarted controller finds it again.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(pub String);

/// What a probe found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    Alive,
    /// The agent ended; its exit code when known.
    Exited(Option<i32>),
    /// The runtime has no such handle (removed from outside, or lost with a restart).
    Missing,
}

/// What a person's terminal sends to an agent's terminal (the dashboard's WebSocket).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TerminalInput {
    /// Keys typed, as the bytes a terminal sends for them.
    Bytes(Vec<u8>),
    /// The person's terminal changed size.
    Resize { cols: u16, rows: u16 },
}

/// A person's live view of an agent's terminal, opened by [`Runtime::terminal`]. Dropping both
/// halves ends the view; the agent keeps running.
#[derive(Debug)]
pub struct TerminalView {
    /// What the terminal shows: first enough to draw the current screen, then the output as it
    /// comes. Closes when the agent or the view ends.
    pub output: tokio::sync::mpsc::Receiver<Vec<u8>>,
    /// Keys and resizes for the agent's terminal.
    pub input: tokio::sync::mpsc::Sender<TerminalInput>,
}

/// One runtime-owned agent found by `list`, for re-adoption and orphan cleanup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owned {
    pub session: String,
    pub project: Option<String>,
    pub handle: Handle,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{runtime} is not available: {message}")]
    Unavailable { runtime: &'static str, message: String },
    #[error("{runtime}: no such handle `{handle}`")]
    NotFound { runtime: &'static str, handle: String },
    #[error("{runtime}: {op} failed: {message}")]
    Failed { runtime: &'static str, op: &'static str, message: String },
    #[error("{runtime}: input was not delivered: {message}")]
    NotDelivered { runtime: &'static str, message: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// The agent's program is not where the runtime would run it (its `PATH`, the image's).
    #[error("{runtime}: the agent's program `{program}` was not found ({searched})")]
    ProgramNotFound { runtime: &'static str, program: String, searched: String },
}

impl RuntimeError {
    /// The CamelCase reason used in conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            RuntimeError::Unavailable { .. } => "RuntimeUnavailable",
            RuntimeError::NotFound { .. } => "RuntimeNotFound",
            RuntimeError::Failed { .. } => "RuntimeFailed",
            RuntimeError::NotDelivered { .. } => "InputNotDelivered",
            RuntimeError::Io { .. } => "RuntimeIOError",
            RuntimeError::ProgramNotFound { .. } => "AgentNotFound",
        }
    }
}

/// A place agents run in. Implementations are cheap to share (`Arc<dyn Runtime>`).
#[async_trait::async_trait]
pub trait Runtime: Send + Sync {
    fn kind(&self) -> RuntimeKind;

    /// Starts the agent; the transcript starts receiving output at once.
    async fn start(&self, spec: &LaunchSpec) -> Result<Handle, RuntimeError>;

    /// Checks before `start` that the agent's program is where this runtime would run it;
    /// `ProgramNotFound` when it is not. Runtimes that can only tell by starting it (a container's
    /// image) answer `Ok` here and `ProgramNotFound` from `start`.
    async fn resolve(&self, _spec: &LaunchSpec) -> Result<(), RuntimeError> {
        Ok(())
    }

    async fn probe(&self, handle: &Handle) -> Result<Probe, RuntimeError>;

    /// Types `text` and submits it, then verifies from the screen that it was submitted
    /// (re-sending the submit key up to `style.retries` times); `NotDelivered` otherwise.
    async fn send(&self, handle: &Handle, text: &str, style: &InputStyle) -> Result<(), RuntimeError>;

    /// Whether `text`, typed earlier, still sits on the agent's input line without having been
    /// submitted (typed by a controller that was killed before it pressed the submit key).
    async fn pending(&self, handle: &Handle, text: &str) -> Result<bool, RuntimeError>;

    /// The visible screen as plain text.
    async fn capture(&self, handle: &Handle) -> Result<String, RuntimeError>;

    /// Sends raw keys without verification (answering a dialog: `Enter`, `Down`, `y`).
    async fn keys(&self, handle: &Handle, keys: &[&str]) -> Result<(), RuntimeError>;

    /// Stops the agent and everything it started; stopping a missing handle is not an error.
    async fn stop(&self, handle: &Handle) -> Result<(), RuntimeError>;

    /// The argument vector a user runs to attach a terminal (`aoctl attach` execs it).
    fn attach_command(&self, handle: &Handle) -> Vec<String>;

    /// Opens a live view of the agent's terminal at `cols` × `rows`, for a person to watch and
    /// type into (the dashboard's terminal). Several views of one agent may be open; none of them
    /// ever holds up the agent, its transcript or `capture`. The agent's terminal takes the size of
    /// the newest view (under tmux, of the client that was active last) and goes back to its own
    /// size when the last one closes. A missing handle is `NotFound`, an agent that has exited
    /// `Failed`.
    async fn terminal(&self, handle: &Handle, cols: u16, rows: u16) -> Result<TerminalView, RuntimeError>;

    /// The handle the agent of session `session` has whenever it runs, for runtimes that name
    /// agents deterministically (tmux sessions, docker containers), so a restarted controller finds
    /// one started just before a crash; `None` when handles are only known once started.
    fn handle_for(&self, _session: &str) -> Option<Handle> {
        None
    }

    /// Every agent this runtime holds for this controller.
    async fn list(&self) -> Result<Vec<Owned>, RuntimeError>;
}
