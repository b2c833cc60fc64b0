//! A person's live view of a tmux session: a real tmux client (`attach-session`) on a PTY of the
//! view's size, so tmux draws the screen for the person and sizes the window as it does for any
//! attached client (the window follows the client that was active last, `window-size latest`).
//! The session's `client-detached` hook ([`super::restore_hook`]) puts the window back to the size
//! it was started at when its last client leaves, however the client ended.
//!
//! Each view has a reader thread from the PTY to the view's output, a writer thread from the
//! person's keys to the PTY, and a task that serves the view's input, watches the pane, and at the
//! end kills and reaps the client. A view that does not read its output holds up only its own
//! client: the server writes to a client's terminal without waiting for it, and when one falls
//! behind it drops what it had not written and redraws that client once it keeps up. Keys wait
//! while the runtime types a message ([`TypingLocks`](crate::view::TypingLocks)). The PTY is written
//! through a duplicate of its descriptor, never portable-pty's writer, which sends a newline and an
//! end-of-file when dropped, and those would reach the agent as keys.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use portable_pty::{Child, CommandBuilder, MasterPty, PtySize};
use tokio::sync::{mpsc, oneshot};

use super::{arg, pane, restore_hook, tmux_program, TmuxRuntime, RUNTIME};
use crate::runtime::{Handle, Probe, Runtime, RuntimeError, TerminalInput, TerminalView};
use crate::view::{self, Watch};

/// How often a view checks that its pane still runs (the client stays attached to a dead pane).
const PANE_POLL: Duration = Duration::from_secs(1);

fn failed(message: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Failed { runtime: RUNTIME, op: "terminal", message: message.to_string() }
}

/// Opens a view of session `handle` at `cols` × `rows`.
pub(super) async fn open(
    tmux: &TmuxRuntime,
    handle: &Handle,
    cols: u16,
    rows: u16,
) -> Result<TerminalView, RuntimeError> {
    let name = &handle.0;
    // `list-panes`, not `display-message`, which answers for another session when this one is missing.
    let args = ["list-panes".into(), "-t".into(), pane(name), "-F".into(), "#{pane_dead} #{default-size}".into()];
    let out = tmux.on("terminal", handle, &args).await?;
    let mut fields = out.split_whitespace();
    if fields.next() == Some("1") {
        return Err(failed("the agent has exited"));
    }
    // Sessions started before the hook existed get it now, with the size they were started at.
    let home =
        fields.next().and_then(|s| s.split_once('x')).and_then(|(c, r)| Some((c.parse().ok()?, r.parse().ok()?)));
    if let Some(hook) = home.and_then(|(c, r)| restore_hook(name, c, r)) {
        let args = ["set-hook".into(), "-t".into(), pane(name), "client-detached".into(), arg(hook)];
        tmux.on("terminal", handle, &args).await?;
    }

    let size = PtySize { rows: rows.max(1), cols: cols.max(1), pixel_width: 0, pixel_height: 0 };
    let pair = portable_pty::native_pty_system().openpty(size).map_err(|e| failed(format!("{e:#}")))?;
    let reader = pair.master.try_clone_reader().map_err(|e| failed(format!("{e:#}")))?;
    let writer = writer_of(pair.master.as_ref())?;
    let mut cmd = CommandBuilder::new(tmux_program());
    cmd.args([OsString::from("-u"), "-S".into(), tmux.socket.clone().into(), "attach-session".into(), "-t".into()]);
    cmd.arg(arg(format!("={name}")));
    // A client with as little of the controller's environment as the others (see `client_env`).
    cmd.env_clear();
    for (k, v) in super::client_env() {
        cmd.env(k, v);
    }
    // The person's terminal is an xterm, whatever terminal the controller runs in.
    cmd.env("TERM", "xterm-256color");
    let mut child = pair.slave.spawn_command(cmd).map_err(|e| failed(format!("cannot run tmux: {e:#}")))?;
    drop(pair.slave);

    let (view, output, watch) = view::open();
    let (keys, typed) = std::sync::mpsc::channel::<(Vec<u8>, oneshot::Sender<()>)>();
    let (exited, client_ended) = oneshot::channel::<()>();
    let threads = std::thread::Builder::new()
        .name("tmux-view-out".into())
        .spawn(move || copy_out(reader, output, exited))
        .and_then(|_| std::thread::Builder::new().name("tmux-view-in".into()).spawn(move || copy_in(writer, typed)));
    if let Err(e) = threads {
        let _ = child.kill();
        let _ = child.wait();
        return Err(failed(format!("cannot start the view's threads: {e}")));
    }
    let client = Client { tmux: tmux.clone(), handle: handle.clone(), master: pair.master, child, keys };
    tokio::spawn(client.serve(watch, client_ended));
    Ok(view)
}

/// A duplicate of the PTY's descriptor, to write the person's keys to.
fn writer_of(master: &dyn MasterPty) -> Result<File, RuntimeError> {
    let fd = master.as_raw_fd().ok_or_else(|| failed("the terminal has no file descriptor"))?;
    // SAFETY: `fd` is the master's open descriptor, borrowed only for as long as it takes to
    // duplicate it; `master` outlives this call.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let owned = borrowed.try_clone_to_owned().map_err(|e| failed(format!("cannot duplicate the terminal: {e}")))?;
    Ok(File::from(owned))
}

/// The reader thread: everything the client draws, to the view, until the client ends. A view
/// whose output was dropped no longer gets it, but the client is still read, so it never blocks.
fn copy_out(mut reader: Box<dyn Read + Send>, output: mpsc::Sender<Vec<u8>>, exited: oneshot::Sender<()>) {
    let mut buf = [0u8; 8192];
    let mut open = true;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // EIO: the client closed its terminal.
            Err(_) => break,
        };
        open = open && output.blocking_send(buf[..n].to_vec()).is_ok();
    }
    drop(exited);
}

/// The writer thread: the person's keys, to the client, each acknowledged once written.
fn copy_in(mut writer: File, typed: std::sync::mpsc::Receiver<(Vec<u8>, oneshot::Sender<()>)>) {
    for (bytes, done) in typed {
        if writer.write_all(&bytes).and_then(|()| writer.flush()).is_err() {
            break;
        }
        let _ = done.send(());
    }
}

/// One view's tmux client.
struct Client {
    tmux: TmuxRuntime,
    handle: Handle,
    master: Box<dyn MasterPty + Send>,
    child: Box<dyn Child + Send + Sync>,
    keys: std::sync::mpsc::Sender<(Vec<u8>, oneshot::Sender<()>)>,
}

impl Client {
    /// Serves the view until both its halves are dropped, the client ends or the pane dies; then
    /// ends the client (its detaching puts the window back to its size when it was the last one).
    async fn serve(self, mut watch: Watch, mut client_ended: oneshot::Receiver<()>) {
        let Client { tmux, handle, master, mut child, keys } = self;
        let typing = tmux.typing.of(&handle.0);
        let mut pane = tokio::time::interval(PANE_POLL);
        loop {
            tokio::select! {
                next = watch.next() => match next {
                    None => break,
                    Some(TerminalInput::Bytes(bytes)) => {
                        if !type_keys(&typing, &keys, bytes).await {
                            break;
                        }
                    }
                    Some(TerminalInput::Resize { cols, rows }) => {
                        let size = PtySize { rows: rows.max(1), cols: cols.max(1), pixel_width: 0, pixel_height: 0 };
                        if let Err(e) = master.resize(size) {
                            tracing::debug!(runtime = RUNTIME, session = %handle.0, error = %e, "cannot resize a view");
                        }
                    }
                },
                _ = &mut client_ended => break,
                _ = pane.tick() => {
                    if matches!(tmux.probe(&handle).await, Ok(Probe::Exited(_) | Probe::Missing)) {
                        break;
                    }
                }
            }
        }
        drop(keys);
        let reaped = tokio::task::spawn_blocking(move || {
            // SIGHUP, then SIGKILL if it is still there after a moment.
            let _ = child.kill();
            let _ = child.wait();
            drop(master);
        })
        .await;
        if let Err(e) = reaped {
            tracing::warn!(runtime = RUNTIME, session = %handle.0, error = %e, "cannot reap a view's tmux client");
        }
    }
}

/// Writes `bytes` to the client once no message is being typed; whether the client took them.
async fn type_keys(
    typing: &Arc<tokio::sync::Mutex<()>>,
    keys: &std::sync::mpsc::Sender<(Vec<u8>, oneshot::Sender<()>)>,
    bytes: Vec<u8>,
) -> bool {
    let _typing = typing.lock().await;
    let (done, written) = oneshot::channel();
    keys.send((bytes, done)).is_ok() && written.await.is_ok()
}
