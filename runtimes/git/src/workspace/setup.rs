//! A project's setup in a new workspace: copy and symlink files from the main checkout, then run
//! the setup commands through `sh -c` with a timeout, their output kept in a log.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Component, Path};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use aoctl_api::project::SetupSpec;

use super::WorkspaceError;

/// How many lines of output a failed command reports.
const TAIL_LINES: usize = 20;

pub(super) struct Context<'a> {
    pub(crate) workspace: &'a Path,
    /// The project's main checkout, where copied and linked files come from.
    pub(crate) main: &'a Path,
    pub(crate) log: &'a Path,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) timeout: Duration,
}

/// Copies, links, then runs the commands; the first failure stops the setup.
pub(super) fn run(spec: &SetupSpec, ctx: &Context<'_>) -> Result<(), WorkspaceError> {
    let main = crate::repository::canonicalize(ctx.main).map_err(WorkspaceError::io(ctx.main))?;
    for rel in &spec.copy {
        let src = source(&main, rel, "copy")?;
        let dst = ctx.workspace.join(rel);
        make_parent(&dst)?;
        copy_all(&src, &dst).map_err(|e| setup_path("copy", rel, e.to_string()))?;
    }
    for rel in &spec.symlink {
        let src = source(&main, rel, "symlink")?;
        let dst = ctx.workspace.join(rel);
        match fs::symlink_metadata(&dst) {
            Ok(m) if m.file_type().is_symlink() => fs::remove_file(&dst).map_err(WorkspaceError::io(&dst))?,
            Ok(_) => return Err(setup_path("symlink", rel, "already exists in the workspace".into())),
            Err(_) => {}
        }
        make_parent(&dst)?;
        symlink(&src, &dst).map_err(|e| setup_path("symlink", rel, e.to_string()))?;
    }
    if spec.commands.is_empty() {
        return Ok(());
    }
    File::create(ctx.log).map_err(WorkspaceError::io(ctx.log))?;
    for command in &spec.commands {
        run_command(command, ctx)?;
    }
    Ok(())
}

fn setup_path(action: &'static str, rel: &str, message: String) -> WorkspaceError {
    WorkspaceError::SetupPath { action, path: rel.to_string(), message }
}

/// The main checkout's `rel`, which must be a relative path inside it and exist.
fn source(main: &Path, rel: &str, action: &'static str) -> Result<std::path::PathBuf, WorkspaceError> {
    let path = Path::new(rel);
    let inside = !rel.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside {
        return Err(setup_path(action, rel, "must be a relative path inside the repository".into()));
    }
    let src = main.join(path);
    if fs::symlink_metadata(&src).is_err() {
        return Err(setup_path(action, rel, format!("{} does not exist", src.display())));
    }
    Ok(src)
}

fn make_parent(dst: &Path) -> Result<(), WorkspaceError> {
    match dst.parent() {
        Some(parent) => fs::create_dir_all(parent).map_err(WorkspaceError::io(parent)),
        None => Ok(()),
    }
}

/// Copies a file, a symlink (as a link) or a folder tree, replacing files already there.
fn copy_all(src: &Path, dst: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(src)?;
    if meta.file_type().is_symlink() {
        if fs::symlink_metadata(dst).is_ok() {
            fs::remove_file(dst)?;
        }
        return symlink(&fs::read_link(src)?, dst);
    }
    if meta.is_dir() {
        fs::create_dir_all(dst)?;
        for entry in fs::read_dir(src)? {
            let entry = entry?;
            copy_all(&entry.path(), &dst.join(entry.file_name()))?;
        }
        return Ok(());
    }
    fs::copy(src, dst).map(drop)
}

#[cfg(unix)]
fn symlink(src: &Path, dst: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(src, dst)
}

#[cfg(windows)]
fn symlink(src: &Path, dst: &Path) -> io::Result<()> {
    if src.is_dir() {
        std::os::windows::fs::symlink_dir(src, dst)
    } else {
        std::os::windows::fs::symlink_file(src, dst)
    }
}

/// Runs one command in the workspace, its output appended to the log.
fn run_command(command: &str, ctx: &Context<'_>) -> Result<(), WorkspaceError> {
    let io_err = WorkspaceError::io(ctx.log);
    let mut log = OpenOptions::new().append(true).open(ctx.log).map_err(WorkspaceError::io(ctx.log))?;
    writeln!(log, "$ {command}").map_err(WorkspaceError::io(ctx.log))?;
    let start = log.metadata().map_err(WorkspaceError::io(ctx.log))?.len();
    let (out, err) = match (log.try_clone(), log.try_clone()) {
        (Ok(out), Ok(err)) => (out, err),
        (Err(e), _) | (_, Err(e)) => return Err(io_err(e)),
    };
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(ctx.workspace)
        .envs(&ctx.env)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err));
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().map_err(|e| WorkspaceError::SetupFailed {
        command: command.to_string(),
        code: None,
        tail: format!("cannot start sh: {e}"),
    })?;
    let (status, timed_out) = wait(&mut child, ctx.timeout).map_err(WorkspaceError::io(ctx.log))?;
    if status.success() {
        return Ok(());
    }
    if timed_out {
        let _ = writeln!(log, "(killed after the setup timeout of {}s)", ctx.timeout.as_secs());
    }
    Err(WorkspaceError::SetupFailed { command: command.to_string(), code: status.code(), tail: tail(ctx.log, start) })
}

/// Waits for the child until the timeout, then kills its whole process group.
fn wait(child: &mut std::process::Child, timeout: Duration) -> io::Result<(ExitStatus, bool)> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((status, false));
        }
        if Instant::now() >= deadline {
            kill(child);
            return Ok((child.wait()?, true));
        }
        std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

#[cfg(unix)]
fn kill(child: &mut std::process::Child) {
    match i32::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals the process group the child leads.
        Ok(pid) => unsafe {
            libc::kill(-pid, libc::SIGKILL);
        },
        Err(_) => {
            let _ = child.kill();
        }
    }
}

#[cfg(not(unix))]
fn kill(child: &mut std::process::Child) {
    let _ = child.kill();
}

/// The last lines the log got since `start`.
fn tail(log: &Path, start: u64) -> String {
    let mut text = Vec::new();
    if let Ok(mut f) = File::open(log) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let from = start.max(len.saturating_sub(64 * 1024));
        if f.seek(SeekFrom::Start(from)).is_ok() {
            let _ = f.read_to_end(&mut text);
        }
    }
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}
