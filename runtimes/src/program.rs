//! Finding an agent's program before it is started, as the runtime that starts it would: a name
//! on the `PATH` the agent gets, a path with a separator against its working directory; and
//! asking a program for its version within a bound (`aoctl doctor`).
//!
//! Starting a program that does not exist gives nothing to read: tmux's pane dies before its
//! first byte, a ConPTY returns an error code. Looking first lets the controller say which
//! program is missing and where it looked, instead of restarting it in a loop.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::runtime::{LaunchSpec, RuntimeError};

/// Where `spec`'s program is, for a runtime that runs it on this machine with the controller's
/// environment plus `spec.env`; `ProgramNotFound` naming what was searched when it is nowhere.
pub(crate) fn resolve(runtime: &'static str, spec: &LaunchSpec) -> Result<PathBuf, RuntimeError> {
    let Some(program) = spec.command.first() else {
        return Err(RuntimeError::Failed { runtime, op: "start", message: "the command is empty".into() });
    };
    let path = spec.env.get("PATH").map(OsString::from).or_else(|| std::env::var_os("PATH")).unwrap_or_default();
    find(program.as_ref(), &path, &spec.workdir).ok_or_else(|| {
        let searched = if has_separator(program) {
            format!("relative to {}", spec.workdir.display())
        } else {
            format!("on PATH={}", path.to_string_lossy())
        };
        RuntimeError::ProgramNotFound { runtime, program: program.clone(), searched }
    })
}

/// The file `program` names: itself when it holds a path separator (relative ones against
/// `workdir`), else the first executable file of that name in a folder of `path`. On Windows a
/// name without an extension also matches with each of `PATHEXT`'s.
pub fn find(program: &OsStr, path: &OsStr, workdir: &Path) -> Option<PathBuf> {
    let text = program.to_string_lossy();
    if text.is_empty() {
        return None;
    }
    if has_separator(&text) {
        let p = Path::new(program);
        let p = if p.is_absolute() { p.to_path_buf() } else { workdir.join(p) };
        return candidates(&p).into_iter().find(|c| executable(c));
    }
    std::env::split_paths(path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .flat_map(|dir| candidates(&dir.join(program)))
        .find(|c| executable(c))
}

fn has_separator(program: &str) -> bool {
    program.contains('/') || (cfg!(windows) && program.contains('\\'))
}

/// The file names `p` may stand for.
fn candidates(p: &Path) -> Vec<PathBuf> {
    let mut out = vec![p.to_path_buf()];
    if cfg!(windows) && p.extension().is_none() {
        let exts = std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into());
        for ext in exts.split(';').filter(|e| !e.is_empty()) {
            let mut name = p.as_os_str().to_os_string();
            name.push(ext.to_ascii_lowercase());
            out.push(PathBuf::from(name));
        }
    }
    out
}

/// A regular file (through links) that may be run: on Unix one with an execute bit.
fn executable(p: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(p) else { return false };
    if !meta.is_file() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    true
}

/// Why running a program for its version gave nothing.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot run it: {0}")]
    Spawn(std::io::Error),
    #[error("it did not finish within {}s", .0.as_secs())]
    Timeout(Duration),
}

/// What `program args…` printed (stdout, then stderr), killed with everything it started when it
/// takes longer than `within`: an agent CLI may sit waiting for a login instead of answering.
pub async fn output_of(program: &Path, args: &[&str], within: Duration) -> Result<String, RunError> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let child = cmd.spawn().map_err(RunError::Spawn)?;
    let pid = child.id();
    match tokio::time::timeout(within, child.wait_with_output()).await {
        Ok(Ok(out)) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push('\n');
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            Ok(text)
        }
        Ok(Err(e)) => Err(RunError::Spawn(e)),
        Err(_) => {
            kill_group(pid);
            Err(RunError::Timeout(within))
        }
    }
}

/// Kills the process group the timed-out program leads (its own child was killed on drop).
#[cfg(unix)]
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) with a negative pid signals the process group our child leads.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

#[cfg(not(unix))]
fn kill_group(_pid: Option<u32>) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    fn script(dir: &Path, name: &str, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[cfg(unix)]
    #[test]
    fn a_name_is_found_on_path_in_order_and_only_when_executable() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        script(&a, "agent", 0o644);
        let wanted = script(&b, "agent", 0o755);
        let path = std::env::join_paths([&a, &b]).unwrap();
        assert_eq!(find("agent".as_ref(), &path, tmp.path()), Some(wanted));
        assert_eq!(find("other".as_ref(), &path, tmp.path()), None);
        // A folder of that name is no program.
        std::fs::create_dir_all(a.join("dir")).unwrap();
        assert_eq!(find("dir".as_ref(), &path, tmp.path()), None);
        // An empty PATH entry is not the current folder.
        script(tmp.path(), "here", 0o755);
        assert_eq!(find("here".as_ref(), OsStr::new(":"), tmp.path()), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_path_is_taken_as_is_and_relative_ones_against_the_workdir() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("scripts")).unwrap();
        let wanted = script(&tmp.path().join("scripts"), "agent", 0o755);
        assert_eq!(
            find("./scripts/agent".as_ref(), OsStr::new(""), tmp.path()),
            Some(tmp.path().join("./scripts/agent"))
        );
        assert_eq!(find(wanted.as_os_str(), OsStr::new(""), Path::new("/")), Some(wanted.clone()));
        assert_eq!(find("scripts/missing".as_ref(), OsStr::new(""), tmp.path()), None);
    }

    #[test]
    fn the_error_names_the_program_and_where_it_looked() {
        let spec = LaunchSpec {
            session: "s".into(),
            project: "p".into(),
            workdir: std::env::temp_dir(),
            command: vec!["surely-no-such-agent-cli".into(), "--flag".into()],
            env: [("PATH".to_string(), "/nowhere/bin".to_string())].into(),
            transcript: PathBuf::new(),
            session_dir: PathBuf::new(),
            cols: 80,
            rows: 24,
            container: None,
            sandbox: None,
        };
        let e = resolve("tmux", &spec).unwrap_err();
        assert_eq!(e.reason(), "AgentNotFound");
        let msg = e.to_string();
        assert!(msg.contains("`surely-no-such-agent-cli`") && msg.contains("PATH=/nowhere/bin"), "{msg}");
    }

    #[tokio::test]
    async fn a_program_that_hangs_is_cut_short() {
        if cfg!(windows) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("slow");
        std::fs::write(&script, "#!/bin/sh\nsleep 30\n").unwrap();
        #[cfg(unix)]
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let r = output_of(&script, &["--version"], Duration::from_millis(300)).await;
        assert!(matches!(r, Err(RunError::Timeout(_))), "{r:?}");
        let echo = dir.path().join("echo");
        std::fs::write(&echo, "#!/bin/sh\necho \"2.1.332 (Claude Code)\"\n").unwrap();
        #[cfg(unix)]
        std::fs::set_permissions(&echo, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let text = output_of(&echo, &["--version"], Duration::from_secs(5)).await.unwrap();
        assert!(text.contains("2.1.332 (Claude Code)"), "{text}");
    }
}
