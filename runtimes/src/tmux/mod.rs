//! The tmux runtime: one tmux session per agent on the controller's own tmux server.
//!
//! Every call runs `tmux -S <socket>` with an argument vector, so the user's default server is never
//! touched and no shell ever sees user text. Sessions are targeted exactly (`=name`, or `=name:` where
//! tmux wants a pane), because tmux otherwise prefix-matches and `a` would find `ab`. tmux splits
//! its argument vector at arguments ending in `;`, so every user-derived argument goes through
//! [`arg`], and it expands `#{…}` formats in a few places, which [`literal`] escapes.
//!
//! Sessions survive a controller restart: `list` finds them again by the `@aoctl-session` and
//! `@aoctl-project` options recorded on each.
//!
//! Probes are answered from one shared view of all panes ([`panes`]), so a fleet of idle sessions
//! costs one `tmux` process per window however many of them are probed. A pane that dies touches
//! its transcript (a `pane-died` hook appends nothing to it), so a watcher of the transcripts
//! hears of the exit without asking tmux.
//!
//! A terminal view ([`view`]) is a tmux client of its own, attached on a PTY of the view's size.

pub(crate) mod delivery;
pub(crate) mod panes;
#[cfg(all(test, unix))]
mod tests;
#[cfg(unix)]
mod view;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aoctl_agents::InputStyle;
use aoctl_api::session::RuntimeKind;
use tokio::io::AsyncWriteExt;

use crate::runtime::{Handle, LaunchSpec, Owned, Probe, Runtime, RuntimeError, TerminalView};
use crate::view::TypingLocks;
use delivery::{Screen, Terminal};
use panes::Panes;

const RUNTIME: &str = "tmux";

/// Scrollback kept per pane, in lines.
const HISTORY_LIMIT: &str = "100000";

/// Single-line text longer than this is pasted rather than typed: tmux limits the size of one command.
const MAX_TYPED: usize = 1024;

/// How long `stop` lets the agent's processes end after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Makes paste-buffer names unique within this controller.
static BUFFERS: AtomicU64 = AtomicU64::new(0);

/// Runs agents in sessions of the controller's own tmux server.
#[derive(Clone, Debug)]
pub struct TmuxRuntime {
    socket: PathBuf,
    /// The shared view of the panes probes answer from.
    panes: Arc<Panes>,
    /// Held per session while a message is typed, so a terminal view's keys wait for it.
    typing: Arc<TypingLocks>,
}

/// How often, and how far apart, a pane seen dead without its exit status is looked at again: tmux
/// marks a pane dead when its output ends, and learns the status when it reaps the process, which
/// on a busy machine can come a moment later.
const EXIT_STATUS_TRIES: u32 = 5;
const EXIT_STATUS_WAIT: Duration = Duration::from_millis(100);

/// What a failed tmux invocation means.
enum Failure {
    /// The server is not running, or the session or pane does not exist.
    Missing(String),
    /// Anything else, with tmux's message.
    Other(String),
}

impl TmuxRuntime {
    /// A runtime on the tmux server listening on `socket` (started on first use).
    pub fn new(socket: PathBuf) -> TmuxRuntime {
        TmuxRuntime { socket, panes: Arc::new(Panes::default()), typing: Arc::default() }
    }

    /// One answer from the shared view of the panes.
    async fn probe_once(&self, handle: &Handle) -> Result<Probe, RuntimeError> {
        let view = self.panes().await?;
        let Some(pane) = view.get(&handle.0) else { return Ok(Probe::Missing) };
        if !pane.dead {
            return Ok(Probe::Alive);
        }
        if let Some(code) = pane.status {
            return Ok(Probe::Exited(Some(code)));
        }
        // tmux 3.3 sometimes marks a pane dead without ever reaping its process, so the status never
        // arrives; the zombie still holds it.
        #[cfg(target_os = "linux")]
        if let (Some(pid), Some(server)) = (pane.pid, pane.server) {
            return Ok(Probe::Exited(crate::process::tree::zombie_exit_code(pid, server)));
        }
        Ok(Probe::Exited(None))
    }

    /// Makes the next probe ask tmux again instead of answering from the shared view of the
    /// panes: to be called when an agent may just have ended (its output closed).
    pub fn invalidate_probes(&self) {
        self.panes.invalidate();
    }

    /// Every pane on the server, from the shared view when it is fresh.
    async fn panes(&self) -> Result<Arc<panes::View>, RuntimeError> {
        self.panes
            .get(|| async {
                let args = ["list-panes".into(), "-a".into(), "-F".into(), panes::FORMAT.into()];
                match self.run(&args, None).await {
                    Ok(out) => Ok(panes::parse(&out)),
                    Err(Failure::Missing(_)) => Ok(panes::View::new()),
                    Err(Failure::Other(message)) => {
                        Err(RuntimeError::Failed { runtime: RUNTIME, op: "probe", message })
                    }
                }
            })
            .await
    }

    /// The server's socket.
    #[cfg(all(test, unix))]
    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    /// Checks that a `tmux` binary can be run.
    #[cfg(all(test, unix))]
    pub(crate) fn available() -> Result<(), RuntimeError> {
        let unavailable = |message: String| RuntimeError::Unavailable { runtime: RUNTIME, message };
        let out = std::process::Command::new("tmux")
            .arg("-V")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| unavailable(format!("cannot run tmux: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(unavailable(format!("tmux -V failed: {}", String::from_utf8_lossy(&out.stderr).trim())))
        }
    }

    /// Runs `tmux -S socket args…` with `input` on stdin; its stdout, or why it failed. The tmux
    /// client gets only [`client_env`]: a server it starts keeps the environment of that client.
    async fn run(&self, args: &[OsString], input: Option<&[u8]>) -> Result<String, Failure> {
        self.run_with_env(args, input, &client_env()).await
    }

    /// [`TmuxRuntime::run`] with the tmux client's environment exactly `env`: a new session copies
    /// the variables `update-environment` names from its client, and tmux gives a new pane the
    /// `PATH` of the client that asked for it and looks the pane's command up in it.
    async fn run_with_env(
        &self,
        args: &[OsString],
        input: Option<&[u8]>,
        env: &BTreeMap<String, String>,
    ) -> Result<String, Failure> {
        if input.is_some() {
            crate::ignore_sigpipe();
        }
        // The tmux binary itself is the one on the controller's PATH, whatever PATH the client gets.
        let mut cmd = tokio::process::Command::new(tmux_program());
        cmd.env_clear()
            .envs(env)
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| Failure::Other(format!("cannot run tmux: {e}")))?;
        if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(data).await.map_err(|e| Failure::Other(format!("cannot write to tmux: {e}")))?;
        }
        let out = child.wait_with_output().await.map_err(|e| Failure::Other(format!("tmux failed: {e}")))?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let message = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let missing = [
            "no server running",
            "error connecting to",
            "server exited unexpectedly",
            "lost server",
            "can't find session",
            "can't find pane",
            "can't find window",
            // What tmux says about any target while the server holds no session at all.
            "no current target",
        ];
        if missing.iter().any(|m| message.contains(m)) {
            Err(Failure::Missing(message))
        } else {
            Err(Failure::Other(if message.is_empty() { format!("tmux exited with {}", out.status) } else { message }))
        }
    }

    /// Starts the server with [`client_env`] when none runs, then `spec`'s session (see
    /// [`start_args`]).
    async fn start_session(&self, spec: &LaunchSpec) -> Result<String, Failure> {
        let up = ["start-server", ";", "set-option", "-g", "exit-empty", "off", ";", "show-environment", "-g"];
        let globals = self.run(&up.map(OsString::from), None).await?;
        let args = start_args(spec, &global_names(&globals)).map_err(|e| Failure::Other(e.to_string()))?;
        self.run_with_env(&args, None, &spec.env).await
    }

    /// `run` for an operation on an existing session: a missing one is `NotFound`.
    async fn on(&self, op: &'static str, handle: &Handle, args: &[OsString]) -> Result<String, RuntimeError> {
        self.run(args, None).await.map_err(|f| failed(op, handle, f))
    }
}

fn failed(op: &'static str, handle: &Handle, failure: Failure) -> RuntimeError {
    match failure {
        Failure::Missing(_) => RuntimeError::NotFound { runtime: RUNTIME, handle: handle.0.clone() },
        Failure::Other(message) => RuntimeError::Failed { runtime: RUNTIME, op, message },
    }
}

/// An argument as tmux must receive it to pass it on unchanged: tmux ends a command at an argument
/// ending in `;` unless that `;` is preceded by a backslash, which it then drops.
fn arg(s: impl AsRef<str>) -> OsString {
    let s = s.as_ref();
    match s.strip_suffix(';') {
        Some(head) => format!("{head}\\;").into(),
        None => s.into(),
    }
}

/// Text that tmux format-expands, escaped so it stays literal.
fn literal(s: &str) -> String {
    s.replace('#', "##")
}

/// `s` quoted for `/bin/sh` with single quotes.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The pane of session `name`, targeted exactly.
fn pane(name: &str) -> OsString {
    arg(format!("={name}:"))
}

/// What of the controller's environment a tmux client that starts no agent gets: where things
/// are and the locale, nothing else, so that a server it starts holds no more than that.
fn client_env() -> BTreeMap<String, String> {
    const NAMES: &[&str] = &["PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TMUX_TMPDIR"];
    NAMES.iter().filter_map(|n| Some((n.to_string(), std::env::var(n).ok()?))).collect()
}

/// The names of the server's global environment in the output of `show-environment -g`
/// (`NAME=value`, or `-NAME` for one marked to be removed).
fn global_names(out: &str) -> Vec<&str> {
    out.lines()
        .filter_map(|line| {
            let line = line.strip_prefix('-').unwrap_or(line);
            Some(line.split_once('=').map_or(line, |(name, _)| name)).filter(|n| !n.is_empty())
        })
        .collect()
}

/// The `tmux` found on the controller's own `PATH`, or plain `tmux` when none is.
fn tmux_program() -> &'static Path {
    static PROGRAM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PROGRAM.get_or_init(|| {
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join("tmux"))
            .find(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("tmux"))
    })
}

fn io_error(path: &Path, source: std::io::Error) -> RuntimeError {
    RuntimeError::Io { path: path.to_path_buf(), source }
}

fn start_failed(message: impl Into<String>) -> RuntimeError {
    RuntimeError::Failed { runtime: RUNTIME, op: "start", message: message.into() }
}

/// The `pane-died` hook of every pane the runtime starts: it appends nothing to the transcript
/// named by the pane's `@aoctl-transcript` option, which closes the file once more after its
/// writer, so a watcher of the transcript learns of the exit. It prints nothing and always
/// succeeds, since tmux would show any output or failure over the dead pane.
const PANE_DIED: &str = "run-shell -b 'exec 2>/dev/null; true >> #{q:@aoctl-transcript}; true'";

/// The `client-detached` hook of session `name`: once its last client has left, its window goes
/// back to `cols` × `rows` (tmux would keep the size of that client) and follows the size of the
/// clients that attach later again. `None` for a name tmux would not take unquoted in a hook (a
/// Session's name always is such a name).
fn restore_hook(name: &str, cols: u16, rows: u16) -> Option<String> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return None;
    }
    let window = format!("={name}:");
    Some(format!(
        "if-shell -F '#{{==:#{{session_attached}},0}}' \
         'resize-window -t {window} -x {cols} -y {rows} ; set-option -wu -t {window} window-size'"
    ))
}

/// The argument vector that starts `spec` in one tmux invocation, so that `pipe-pane` is attached
/// before the pane's first output is read. Its client's environment must be `spec.env`.
///
/// A pane's environment is the server's global environment, then its session's. The global one
/// is emptied first (`stale`: the names it held, which a server started by an older controller
/// filled with that controller's environment); the session's is copied from the client, naming
/// `spec.env`'s variables in `update-environment` for this one command, so that no value is ever
/// on a command line. Should this invocation itself start the server, the global environment gets
/// the client's, which is removed again once the session exists.
fn start_args(spec: &LaunchSpec, stale: &[&str]) -> Result<Vec<OsString>, RuntimeError> {
    let name = &spec.session;
    let mut command: Vec<&str> = spec.command.iter().map(String::as_str).collect();
    if command.is_empty() {
        return Err(start_failed("the command is empty"));
    }
    if let Some(bad) = command.iter().find(|a| a.ends_with("\\;")) {
        return Err(start_failed(format!("tmux cannot pass the argument `{bad}` (it ends in `\\;`)")));
    }
    // tmux hands a one-word command to `sh -c`: give it a constant script that execs the word instead.
    if command.len() == 1 {
        command.splice(0..0, ["/bin/sh", "-c", "exec \"$0\""]);
    }
    // tmux runs the pipe and the hook in a folder of its choosing: the transcript's path must be absolute.
    let transcript = std::path::absolute(&spec.transcript).unwrap_or_else(|_| spec.transcript.clone());
    let transcript = transcript.to_str().ok_or_else(|| start_failed("the transcript path is not UTF-8"))?;
    let workdir = spec.workdir.to_str().ok_or_else(|| start_failed("the working directory is not UTF-8"))?;
    let pipe = format!("cat >> {}", sh_quote(transcript));

    let mut args: Vec<OsString> = ["start-server", ";"].map(OsString::from).to_vec();
    args.extend(["set-option", "-g", "remain-on-exit", "on", ";"].map(OsString::from));
    args.extend(["set-option", "-g", "history-limit", HISTORY_LIMIT, ";"].map(OsString::from));
    // A server that outlives its last session cannot race a stop followed by a start.
    args.extend(["set-option", "-g", "exit-empty", "off", ";"].map(OsString::from));
    for name in stale {
        args.extend(["set-environment".into(), "-g".into(), "-u".into(), arg(name), ";".into()]);
    }
    if let Some(bad) = spec.env.keys().find(|k| k.is_empty() || k.contains([' ', ',', '*', '?', '[', '='])) {
        return Err(start_failed(format!("tmux cannot pass the environment variable `{bad}`")));
    }
    let names = spec.env.keys().map(String::as_str).collect::<Vec<_>>().join(" ");
    args.extend(["set-option".into(), "-g".into(), "update-environment".into(), arg(names), ";".into()]);
    args.extend(["new-session", "-d", "-s"].map(OsString::from));
    args.push(arg(name));
    args.extend(["-x".into(), spec.cols.to_string().into(), "-y".into(), spec.rows.to_string().into()]);
    args.extend(["-c".into(), arg(literal(workdir))]);
    args.push("--".into());
    args.extend(command.iter().map(arg));
    args.push(";".into());
    args.extend(["set-option", "-g", "-u", "update-environment", ";"].map(OsString::from));
    for name in spec.env.keys() {
        args.extend(["set-environment".into(), "-g".into(), "-u".into(), arg(name), ";".into()]);
    }
    args.extend(["pipe-pane".into(), "-o".into(), "-t".into(), pane(name), arg(literal(&pipe)), ";".into()]);
    args.extend(["set-option".into(), "-t".into(), pane(name), "@aoctl-session".into(), arg(name), ";".into()]);
    args.extend([
        "set-option".into(),
        "-t".into(),
        pane(name),
        "@aoctl-project".into(),
        arg(&spec.project),
        ";".into(),
    ]);
    args.extend(["set-option".into(), "-p".into(), "-t".into(), pane(name), "@aoctl-transcript".into()]);
    args.extend([arg(transcript), ";".into()]);
    args.extend(["set-hook".into(), "-p".into(), "-t".into(), pane(name), "pane-died".into(), PANE_DIED.into()]);
    if let Some(hook) = restore_hook(name, spec.cols, spec.rows) {
        args.extend([";".into(), "set-hook".into(), "-t".into(), pane(name), "client-detached".into(), arg(hook)]);
    }
    Ok(args)
}

/// One session, for typing into and reading.
struct Session<'a> {
    tmux: &'a TmuxRuntime,
    handle: &'a Handle,
}

#[async_trait::async_trait]
impl Terminal for Session<'_> {
    /// Short single-line text goes in with `send-keys -l`; anything else through a paste buffer,
    /// bracketed when asked (tmux brackets it only if the agent enabled bracketed paste, and turns
    /// newlines into carriage returns as a terminal does), raw with newlines kept otherwise.
    async fn type_text(&self, text: &str, paste: bool) -> Result<(), RuntimeError> {
        let target = pane(&self.handle.0);
        if !paste && !text.contains('\n') && text.len() <= MAX_TYPED {
            let args = ["send-keys".into(), "-l".into(), "-t".into(), target, "--".into(), arg(text)];
            return self.tmux.on("send", self.handle, &args).await.map(drop);
        }
        let buffer = format!("aoctl-{}-{}", std::process::id(), BUFFERS.fetch_add(1, Ordering::Relaxed));
        let load = ["load-buffer", "-b", &buffer, "-"].map(OsString::from);
        self.tmux.run(&load, Some(text.as_bytes())).await.map_err(|f| failed("send", self.handle, f))?;
        let mut args: Vec<OsString> = ["paste-buffer", "-d", "-b", &buffer].map(OsString::from).to_vec();
        args.push(if paste { "-p".into() } else { "-r".into() });
        args.extend(["-t".into(), target]);
        let pasted = self.tmux.on("send", self.handle, &args).await;
        if pasted.is_err() {
            let _ = self.tmux.run(&["delete-buffer", "-b", &buffer].map(OsString::from), None).await;
        }
        pasted.map(drop)
    }

    async fn press(&self, key: &str) -> Result<(), RuntimeError> {
        let args = ["send-keys".into(), "-t".into(), pane(&self.handle.0), arg(key)];
        self.tmux.on("send", self.handle, &args).await.map(drop)
    }

    async fn screen(&self) -> Result<Screen, RuntimeError> {
        let target = pane(&self.handle.0);
        let args = [
            "display-message".into(),
            "-p".into(),
            "-t".into(),
            target.clone(),
            "#{cursor_y} #{cursor_x}".into(),
            ";".into(),
            // The last 200 lines of history as well as the screen: an older copy of the message's
            // words that scrolls off the screen while the new one appears is still counted, so the
            // new one shows as new.
            "capture-pane".into(),
            "-p".into(),
            "-J".into(),
            "-S".into(),
            "-200".into(),
            "-t".into(),
            target.clone(),
        ];
        let out = self.tmux.on("capture", self.handle, &args).await?;
        let (first, text) = out.split_once('\n').unwrap_or((&out, ""));
        let mut numbers = first.split(' ').map(|n| n.trim().parse::<u32>().unwrap_or(0));
        let cursor = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
        // Capturing down to the cursor's row with wrapped rows joined ends with the cursor's logical line.
        let args = [
            "capture-pane".into(),
            "-p".into(),
            "-J".into(),
            "-E".into(),
            cursor.0.to_string().into(),
            "-t".into(),
            target,
        ];
        let upto = self.tmux.on("capture", self.handle, &args).await?;
        let cursor_line = upto.strip_suffix('\n').unwrap_or(&upto).rsplit('\n').next().unwrap_or("").to_string();
        Ok(Screen { text: text.to_string(), cursor_line, cursor })
    }
}

#[async_trait::async_trait]
impl Runtime for TmuxRuntime {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Tmux
    }

    /// The program is looked up on the `PATH` the agent gets (the session's, else the
    /// controller's), a path with a separator against the workdir.
    async fn resolve(&self, spec: &LaunchSpec) -> Result<(), RuntimeError> {
        crate::program::resolve(RUNTIME, spec).map(drop)
    }

    /// Starts `spec.command` in a new session named `spec.session`; a session of that name that
    /// already exists is an error (the controller decides whether to adopt it).
    async fn start(&self, spec: &LaunchSpec) -> Result<Handle, RuntimeError> {
        start_args(spec, &[])?;
        if !spec.workdir.is_dir() {
            return Err(start_failed(format!("working directory {} does not exist", spec.workdir.display())));
        }
        for dir in [self.socket.parent(), spec.transcript.parent()].into_iter().flatten() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
            }
        }
        self.panes.invalidate();
        let mut result = self.start_session(spec).await;
        if matches!(&result, Err(Failure::Missing(m)) if m.contains("server exited") || m.contains("lost server")) {
            // The server was shutting down as this start reached it; the next start brings up a new one.
            tokio::time::sleep(Duration::from_millis(200)).await;
            result = self.start_session(spec).await;
        }
        // Whatever happened, the session may exist now: no probe may answer from an older view.
        self.panes.invalidate();
        match result {
            Ok(_) => Ok(Handle(spec.session.clone())),
            Err(Failure::Missing(message) | Failure::Other(message)) => Err(start_failed(message)),
        }
    }

    /// Answers from the shared view of the panes (see [`panes`]). A pane seen dead before tmux
    /// has its exit status is asked about again, a few times, before its code counts as unknown.
    async fn probe(&self, handle: &Handle) -> Result<Probe, RuntimeError> {
        let mut probe = self.probe_once(handle).await?;
        for _ in 0..EXIT_STATUS_TRIES {
            if probe != Probe::Exited(None) {
                break;
            }
            tokio::time::sleep(EXIT_STATUS_WAIT).await;
            self.panes.invalidate();
            probe = self.probe_once(handle).await?;
        }
        Ok(probe)
    }

    /// Types and submits `text`, verified by the rule of [`delivery`].
    async fn send(&self, handle: &Handle, text: &str, style: &InputStyle) -> Result<(), RuntimeError> {
        match self.probe(handle).await? {
            Probe::Alive => {}
            Probe::Exited(_) => {
                return Err(RuntimeError::Failed {
                    runtime: RUNTIME,
                    op: "send",
                    message: "the agent has exited".into(),
                })
            }
            Probe::Missing => return Err(RuntimeError::NotFound { runtime: RUNTIME, handle: handle.0.clone() }),
        }
        let typing = self.typing.of(&handle.0);
        let _typing = typing.lock().await;
        delivery::deliver(&Session { tmux: self, handle }, RUNTIME, text, style).await
    }

    async fn pending(&self, handle: &Handle, text: &str) -> Result<bool, RuntimeError> {
        delivery::pending(&Session { tmux: self, handle }, text).await
    }

    async fn capture(&self, handle: &Handle) -> Result<String, RuntimeError> {
        self.on("capture", handle, &["capture-pane".into(), "-p".into(), "-J".into(), "-t".into(), pane(&handle.0)])
            .await
    }

    async fn keys(&self, handle: &Handle, keys: &[&str]) -> Result<(), RuntimeError> {
        if keys.is_empty() {
            return Ok(());
        }
        let mut args = vec!["send-keys".into(), "-t".into(), pane(&handle.0)];
        args.extend(keys.iter().map(arg));
        self.on("keys", handle, &args).await.map(drop)
    }

    /// Kills the pane's process tree (SIGTERM, up to two seconds, SIGKILL), then the session.
    async fn stop(&self, handle: &Handle) -> Result<(), RuntimeError> {
        let args =
            ["display-message".into(), "-p".into(), "-t".into(), pane(&handle.0), "#{pane_pid} #{pane_dead}".into()];
        let out = match self.run(&args, None).await {
            Ok(out) => out,
            Err(Failure::Missing(_)) => return Ok(()),
            Err(Failure::Other(message)) => return Err(RuntimeError::Failed { runtime: RUNTIME, op: "stop", message }),
        };
        #[cfg(unix)]
        {
            let mut fields = out.split_whitespace();
            if let Some(pid) = fields.next().and_then(|p| p.parse::<u32>().ok()) {
                let dead = fields.next() == Some("1");
                crate::process::tree::kill_tree(pid, !dead, STOP_GRACE).await;
            }
        }
        #[cfg(not(unix))]
        let _ = (out, STOP_GRACE);
        let killed = self.run(&["kill-session".into(), "-t".into(), arg(format!("={}", handle.0))], None).await;
        self.panes.invalidate();
        self.typing.forget(&handle.0);
        match killed {
            Ok(_) | Err(Failure::Missing(_)) => Ok(()),
            Err(Failure::Other(message)) => Err(RuntimeError::Failed { runtime: RUNTIME, op: "stop", message }),
        }
    }

    /// Tmux sessions are named after the Session.
    fn handle_for(&self, session: &str) -> Option<Handle> {
        Some(Handle(session.to_string()))
    }

    /// A tmux client of its own, attached on a PTY of `cols` × `rows` (see [`view`]).
    async fn terminal(&self, handle: &Handle, cols: u16, rows: u16) -> Result<TerminalView, RuntimeError> {
        #[cfg(unix)]
        return view::open(self, handle, cols, rows).await;
        #[cfg(not(unix))]
        {
            let _ = (handle, cols, rows);
            Err(RuntimeError::Unavailable { runtime: RUNTIME, message: "tmux runs only on Unix".into() })
        }
    }

    fn attach_command(&self, handle: &Handle) -> Vec<String> {
        let socket = self.socket.to_string_lossy().into_owned();
        vec!["tmux".into(), "-S".into(), socket, "attach-session".into(), "-t".into(), format!("={}", handle.0)]
    }

    /// Every session on this server; none when the server is not running.
    async fn list(&self) -> Result<Vec<Owned>, RuntimeError> {
        let format = "#{session_name}\t#{@aoctl-session}\t#{@aoctl-project}";
        let out = match self.run(&["list-sessions".into(), "-F".into(), format.into()], None).await {
            Ok(out) => out,
            Err(Failure::Missing(_)) => return Ok(Vec::new()),
            Err(Failure::Other(message)) => return Err(RuntimeError::Failed { runtime: RUNTIME, op: "list", message }),
        };
        Ok(out
            .lines()
            .filter_map(|line| {
                let mut fields = line.split('\t');
                let name = fields.next().filter(|n| !n.is_empty())?;
                let session = fields.next().filter(|s| !s.is_empty()).unwrap_or(name);
                let project = fields.next().filter(|p| !p.is_empty()).map(str::to_string);
                Some(Owned { session: session.to_string(), project, handle: Handle(name.to_string()) })
            })
            .collect())
    }
}
