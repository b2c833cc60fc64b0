//! The process runtime: each agent on a PTY the controller owns (portable-pty, so ConPTY on
//! Windows), its screen kept by a `vt100` terminal emulator.
//!
//! A reader thread per agent appends every byte the agent writes to its transcript and feeds the
//! emulator, which also answers the terminal queries agents block on at start-up (cursor position,
//! device status and attributes). A writer thread per agent owns the PTY's input, so typed text,
//! submit keys and query answers never interleave.
//!
//! A terminal view ([`Runtime::terminal`]) is fed by the reader thread from the same emulator (see
//! [`crate::view`]); its keys go to the writer thread, waiting while a message is being typed, and
//! its size is the PTY's (and the emulator's) while it is the newest view.
//!
//! On Windows each agent is put in a Job Object as soon as it starts, so the processes it starts
//! are in it too and `stop` ends them all (with any it started before it joined, found by parent
//! links); closing the job's last handle ends them as well.
//!
//! Handles are child process ids, and all state lives in this process: the agents do not survive a
//! controller restart, after which their handles probe as `Missing` and the controller starts them
//! again according to the session's `restartPolicy`. The PTY cannot be attached from another
//! terminal, so `attach_command` is empty; `capture`, the transcript and terminal views are the ways
//! to look in.

#[cfg(test)]
mod tests;
#[cfg(unix)]
pub(crate) mod tree;

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use aoctl_agents::InputStyle;
use aoctl_api::session::RuntimeKind;
use parking_lot::Mutex;
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize};

use crate::runtime::{Handle, LaunchSpec, Owned, Probe, Runtime, RuntimeError, TerminalView};
use crate::terminal::key_bytes;
use crate::tmux::delivery::{self, Screen, Terminal};
use crate::view::{self, Emulator};

const RUNTIME: &str = "process";

/// How long `stop` lets the agent's processes end after SIGTERM (on Windows, after its console
/// closes) before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Runs agents on PTYs owned by this process.
#[derive(Default)]
pub struct ProcessRuntime {
    agents: Mutex<HashMap<Handle, Arc<Agent>>>,
}

/// One running (or exited, not yet stopped) agent.
struct Agent {
    session: String,
    project: String,
    pid: u32,
    child: Mutex<Box<dyn Child + Send + Sync>>,
    /// Kept so the PTY stays open until `stop`.
    master: Mutex<Option<Box<dyn MasterPty + Send>>>,
    input: Sender<Vec<u8>>,
    terminal: Arc<Mutex<Emulator>>,
    /// Held while a message is typed, so a terminal view's keys wait for it.
    typing: tokio::sync::Mutex<()>,
    /// The agent's process tree; `None` when the job could not be made (only the agent itself is
    /// then ended by `stop`).
    #[cfg(windows)]
    job: Option<crate::windows::Job>,
}

fn failed(op: &'static str, message: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Failed { runtime: RUNTIME, op, message: message.to_string() }
}

impl ProcessRuntime {
    /// A runtime holding no agents yet.
    pub fn new() -> ProcessRuntime {
        crate::ignore_sigpipe();
        ProcessRuntime::default()
    }

    fn get(&self, handle: &Handle) -> Option<Arc<Agent>> {
        self.agents.lock().get(handle).cloned()
    }

    fn agent(&self, handle: &Handle) -> Result<Arc<Agent>, RuntimeError> {
        self.get(handle).ok_or_else(|| RuntimeError::NotFound { runtime: RUNTIME, handle: handle.0.clone() })
    }
}

impl Agent {
    /// `None` while running, else the exit code when there is one (not after a signal).
    fn exit(&self, op: &'static str) -> Result<Option<Option<i32>>, RuntimeError> {
        let status = self.child.lock().try_wait().map_err(|e| failed(op, e))?;
        Ok(status.map(|s| if s.signal().is_some() { None } else { i32::try_from(s.exit_code()).ok() }))
    }

    fn write(&self, bytes: Vec<u8>) -> Result<(), RuntimeError> {
        self.input.send(bytes).map_err(|_| failed("send", "the terminal's input is closed"))
    }

    /// Gives the PTY a new size (the emulator has it already); the agent gets `SIGWINCH`.
    fn resize(&self, (cols, rows): (u16, u16)) {
        if let Some(master) = self.master.lock().as_ref() {
            if let Err(e) = master.resize(PtySize { rows, cols, pixel_width: 0, pixel_height: 0 }) {
                tracing::debug!(runtime = RUNTIME, pid = self.pid, error = %e, "cannot resize the terminal");
            }
        }
    }
}

#[async_trait::async_trait]
impl view::Viewed for Agent {
    fn typing(&self) -> &tokio::sync::Mutex<()> {
        &self.typing
    }

    fn keys(&self, bytes: Vec<u8>) {
        // An agent that ended takes no keys; its view closes by itself.
        let _ = self.write(bytes);
    }

    async fn change(&self, change: view::Change) {
        let resized = change(&mut self.terminal.lock());
        if let Some(size) = resized {
            self.resize(size);
        }
    }

    fn catch_up(&self, id: u64) {
        self.terminal.lock().catch_up(id);
    }
}

/// Starts `spec` on a new PTY; the caller holds the agent map.
fn spawn(spec: &LaunchSpec) -> Result<Agent, RuntimeError> {
    let (program, args) = spec.command.split_first().ok_or_else(|| failed("start", "the command is empty"))?;
    if !spec.workdir.is_dir() {
        return Err(failed("start", format!("working directory {} does not exist", spec.workdir.display())));
    }
    let transcript = open_transcript(spec)?;
    let size = PtySize { rows: spec.rows, cols: spec.cols, pixel_width: 0, pixel_height: 0 };
    let pair = portable_pty::native_pty_system().openpty(size).map_err(|e| failed("start", format!("{e:#}")))?;
    let mut cmd = CommandBuilder::new(program);
    cmd.args(args);
    cmd.cwd(&spec.workdir);
    // `spec.env` is the agent's whole environment: nothing of the controller's (on Windows, nor of
    // the registry's user and system variables, which portable-pty would add).
    cmd.env_clear();
    // The agent's terminal is the emulator, whatever terminal the controller itself runs in.
    cmd.env("TERM", "xterm-256color");
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let child = pair.slave.spawn_command(cmd).map_err(|e| failed("start", format!("cannot run {program}: {e:#}")))?;
    drop(pair.slave);
    let pid = child.process_id().ok_or_else(|| failed("start", "the child has no process id"))?;
    #[cfg(windows)]
    let job = crate::windows::Job::holding(pid)
        .inspect_err(
            |e| tracing::warn!(pid, error = %e, "cannot put the agent in a job; stop ends only the agent itself"),
        )
        .ok();
    let reader = pair.master.try_clone_reader().map_err(|e| failed("start", format!("{e:#}")))?;
    let writer = pair.master.take_writer().map_err(|e| failed("start", format!("{e:#}")))?;

    let terminal = Arc::new(Mutex::new(Emulator::new(spec.cols, spec.rows)));
    let (input, queue) = mpsc::channel();
    let threads = std::thread::Builder::new()
        .name(format!("aoctl-pty-in-{pid}"))
        .spawn(move || feed(writer, queue))
        .and_then(|_| {
            let (terminal, input) = (terminal.clone(), input.clone());
            std::thread::Builder::new()
                .name(format!("aoctl-pty-out-{pid}"))
                .spawn(move || pump(reader, transcript, terminal, input))
        });
    let mut child = child;
    if let Err(e) = threads {
        let _ = child.kill();
        let _ = child.wait();
        return Err(failed("start", format!("cannot start the terminal threads: {e}")));
    }
    Ok(Agent {
        session: spec.session.clone(),
        project: spec.project.clone(),
        pid,
        child: Mutex::new(child),
        master: Mutex::new(Some(pair.master)),
        input,
        terminal,
        typing: tokio::sync::Mutex::new(()),
        #[cfg(windows)]
        job,
    })
}

fn open_transcript(spec: &LaunchSpec) -> Result<Transcript, RuntimeError> {
    let io = |source| RuntimeError::Io { path: spec.transcript.clone(), source };
    if let Some(dir) = spec.transcript.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let file = OpenOptions::new().create(true).append(true).open(&spec.transcript).map_err(io)?;
    Ok(Transcript::new(spec.transcript.clone(), file))
}

/// Where the reader thread appends the agent's output. On Windows the file is opened for each
/// chunk and closed again: a file held open there cannot be removed, and a console host that
/// outlives its agent (as Wine's may) would keep the reader thread, and so the session's folder,
/// from ever being deleted.
struct Transcript {
    #[cfg(windows)]
    path: std::path::PathBuf,
    #[cfg(not(windows))]
    file: File,
}

impl Transcript {
    #[cfg_attr(not(windows), allow(unused_variables))]
    fn new(path: std::path::PathBuf, file: File) -> Transcript {
        #[cfg(windows)]
        {
            drop(file);
            Transcript { path }
        }
        #[cfg(not(windows))]
        Transcript { file }
    }

    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        #[cfg(windows)]
        {
            // `create` stays off: a transcript removed with its session is not made again.
            OpenOptions::new().append(true).open(&self.path)?.write_all(bytes)
        }
        #[cfg(not(windows))]
        self.file.write_all(bytes)
    }
}

/// The reader thread: agent output to the transcript, the emulator and its views, query answers to
/// the input. The views close when the output ends.
fn pump(
    mut reader: Box<dyn Read + Send>,
    mut transcript: Transcript,
    terminal: Arc<Mutex<Emulator>>,
    input: Sender<Vec<u8>>,
) {
    let mut buf = [0u8; 8192];
    let mut warned = false;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // EIO: every holder of the PTY's other side has gone.
            Err(_) => break,
        };
        if let Err(e) = transcript.append(&buf[..n]) {
            if !warned {
                tracing::warn!(error = %e, "cannot append to the transcript");
                warned = true;
            }
        }
        let replies = terminal.lock().feed(&buf[..n]);
        if !replies.is_empty() {
            let _ = input.send(replies);
        }
    }
    terminal.lock().end();
}

/// Opens a view of `agent` at `cols` × `rows`, which the PTY takes at once, and serves its input
/// until both halves are dropped.
fn open_view(agent: Arc<Agent>, cols: u16, rows: u16) -> TerminalView {
    let (view, output, watch) = view::open();
    let id = {
        let mut emulator = agent.terminal.lock();
        let (id, resized) = emulator.add(output, cols, rows);
        if let Some(size) = resized {
            agent.resize(size);
        }
        id
    };
    tokio::spawn(view::serve(watch, agent, id));
    view
}

/// The writer thread: everything queued for the agent, in order.
fn feed(mut writer: Box<dyn Write + Send>, queue: Receiver<Vec<u8>>) {
    for bytes in queue {
        if writer.write_all(&bytes).and_then(|()| writer.flush()).is_err() {
            break;
        }
    }
}

/// One agent, for typing into and reading.
struct Pty<'a>(&'a Agent);

#[async_trait::async_trait]
impl Terminal for Pty<'_> {
    /// A paste is bracketed only if the agent enabled bracketed paste, with newlines sent as carriage
    /// returns the way a terminal pastes; plain text goes in unchanged.
    async fn type_text(&self, text: &str, paste: bool) -> Result<(), RuntimeError> {
        let bytes = if paste {
            let body = text.replace('\n', "\r");
            if self.0.terminal.lock().screen().bracketed_paste() {
                format!("\x1b[200~{body}\x1b[201~")
            } else {
                body
            }
        } else {
            text.to_string()
        };
        self.0.write(bytes.into_bytes())
    }

    async fn press(&self, key: &str) -> Result<(), RuntimeError> {
        let app = self.0.terminal.lock().screen().application_cursor();
        let bytes = key_bytes(key, app).ok_or_else(|| failed("send", format!("unknown key `{key}`")))?;
        self.0.write(bytes)
    }

    async fn screen(&self) -> Result<Screen, RuntimeError> {
        let parser = self.0.terminal.lock();
        let screen = parser.screen();
        let (row, col) = screen.cursor_position();
        let (_, cols) = screen.size();
        let mut start = row;
        while start > 0 && screen.row_wrapped(start - 1) {
            start -= 1;
        }
        let cursor_line = screen.contents_between(start, 0, row, cols);
        Ok(Screen { text: screen.contents(), cursor_line, cursor: (row.into(), col.into()) })
    }
}

#[async_trait::async_trait]
impl Runtime for ProcessRuntime {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Process
    }

    /// The program is looked up on the `PATH` the agent gets (the session's, else the
    /// controller's), a path with a separator against the workdir.
    async fn resolve(&self, spec: &LaunchSpec) -> Result<(), RuntimeError> {
        crate::program::resolve(RUNTIME, spec).map(drop)
    }

    /// Starts `spec.command` on a new PTY. A session whose earlier agent is still running is an
    /// error; an exited one is forgotten.
    async fn start(&self, spec: &LaunchSpec) -> Result<Handle, RuntimeError> {
        let mut agents = self.agents.lock();
        let mut stale = Vec::new();
        for (handle, agent) in agents.iter().filter(|(_, a)| a.session == spec.session) {
            if agent.exit("start")?.is_none() {
                return Err(failed(
                    "start",
                    format!("session {} is already running as process {}", spec.session, handle.0),
                ));
            }
            stale.push(handle.clone());
        }
        for handle in stale {
            agents.remove(&handle);
        }
        let agent = spawn(spec)?;
        let handle = Handle(agent.pid.to_string());
        agents.insert(handle.clone(), Arc::new(agent));
        Ok(handle)
    }

    async fn probe(&self, handle: &Handle) -> Result<Probe, RuntimeError> {
        let Some(agent) = self.get(handle) else { return Ok(Probe::Missing) };
        Ok(match agent.exit("probe")? {
            None => Probe::Alive,
            Some(code) => Probe::Exited(code),
        })
    }

    /// Types and submits `text`, verified by the rule of [`delivery`].
    async fn send(&self, handle: &Handle, text: &str, style: &InputStyle) -> Result<(), RuntimeError> {
        let agent = self.agent(handle)?;
        if agent.exit("send")?.is_some() {
            return Err(failed("send", "the agent has exited"));
        }
        let _typing = agent.typing.lock().await;
        delivery::deliver(&Pty(&agent), RUNTIME, text, style).await
    }

    async fn pending(&self, handle: &Handle, text: &str) -> Result<bool, RuntimeError> {
        let agent = self.agent(handle)?;
        delivery::pending(&Pty(&agent), text).await
    }

    async fn capture(&self, handle: &Handle) -> Result<String, RuntimeError> {
        let agent = self.agent(handle)?;
        let contents = agent.terminal.lock().screen().contents();
        Ok(contents)
    }

    async fn keys(&self, handle: &Handle, keys: &[&str]) -> Result<(), RuntimeError> {
        let agent = self.agent(handle)?;
        let app = agent.terminal.lock().screen().application_cursor();
        let mut bytes = Vec::new();
        for key in keys {
            bytes.extend(key_bytes(key, app).ok_or_else(|| failed("keys", format!("unknown key `{key}`")))?);
        }
        agent.write(bytes)
    }

    /// Kills the agent's process tree (SIGTERM, up to two seconds, SIGKILL; on Windows the console
    /// closes, which asks its processes to end, and after up to two seconds the job is
    /// terminated), reaps the agent and closes its PTY.
    async fn stop(&self, handle: &Handle) -> Result<(), RuntimeError> {
        let Some(agent) = self.agents.lock().remove(handle) else { return Ok(()) };
        #[cfg(unix)]
        tree::kill_tree(agent.pid, true, STOP_GRACE).await;
        #[cfg(windows)]
        {
            // The job holds every process started after the agent joined it; one the agent started
            // in the moment before is found by its parent link, so the tree is read first too.
            let mut tree = crate::windows::tree(agent.pid);
            agent.master.lock().take();
            let deadline = std::time::Instant::now() + STOP_GRACE;
            while tree.iter().any(|&p| crate::windows::is_alive(p)) && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if let Some(Err(e)) = agent.job.as_ref().map(crate::windows::Job::terminate) {
                tracing::warn!(pid = agent.pid, error = %e, "cannot end the agent's job");
            }
            for pid in crate::windows::tree(agent.pid) {
                if !tree.contains(&pid) {
                    tree.push(pid);
                }
            }
            for pid in tree.into_iter().filter(|&p| crate::windows::is_alive(p)) {
                if let Err(e) = crate::windows::terminate(pid) {
                    tracing::warn!(pid, error = %e, "cannot end a process of the agent");
                }
            }
        }
        let reaped = tokio::task::spawn_blocking(move || {
            let mut child = agent.child.lock();
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let status = child.wait();
            drop(child);
            agent.master.lock().take();
            status
        })
        .await
        .map_err(|e| failed("stop", e))?;
        reaped.map(drop).map_err(|e| failed("stop", e))
    }

    /// A view fed from the emulator; the PTY takes its size while it is the newest view.
    async fn terminal(&self, handle: &Handle, cols: u16, rows: u16) -> Result<TerminalView, RuntimeError> {
        let agent = self.agent(handle)?;
        if agent.exit("terminal")?.is_some() {
            return Err(failed("terminal", "the agent has exited"));
        }
        Ok(open_view(agent, cols, rows))
    }

    /// Always empty: the PTY belongs to the controller and cannot be attached from a terminal.
    fn attach_command(&self, _handle: &Handle) -> Vec<String> {
        Vec::new()
    }

    async fn list(&self) -> Result<Vec<Owned>, RuntimeError> {
        let agents = self.agents.lock();
        let mut owned: Vec<Owned> = agents
            .iter()
            .map(|(handle, a)| Owned {
                session: a.session.clone(),
                project: Some(a.project.clone()).filter(|p| !p.is_empty()),
                handle: handle.clone(),
            })
            .collect();
        owned.sort_by(|a, b| a.session.cmp(&b.session));
        Ok(owned)
    }
}
