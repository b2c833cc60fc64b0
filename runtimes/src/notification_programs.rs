//! Notifications that run a program: the desktop (`notify-send`) and a user's command, which
//! gets the notification as JSON on its standard input.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a notification command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a notification program did not do its job.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("the command is empty")]
    EmptyCommand,
    #[error("{program}: {source}")]
    Spawn { program: String, source: std::io::Error },
    #[error("{program} exited with {status}: {stderr}")]
    Failed { program: String, status: std::process::ExitStatus, stderr: String },
    #[error("{program} did not finish within {}s", .after.as_secs())]
    TimedOut { program: String, after: Duration },
}

/// Shows a desktop notification with `notify-send` where it is installed; `key` travels as the
/// hint `x-aoctl-idempotency-key`, so a notification server can tell a resend from a new one.
pub fn desktop(title: &str, body: &str, key: &str) -> Result<(), NotifyError> {
    let program = "notify-send".to_string();
    let hint = format!("--hint=string:x-aoctl-idempotency-key:{key}");
    let out = Command::new(&program)
        .args(["--app-name=aoctl", &hint, "--", title, body])
        .stdin(Stdio::null())
        .output()
        .map_err(|source| NotifyError::Spawn { program: program.clone(), source })?;
    if out.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(NotifyError::Failed { program, status: out.status, stderr })
    }
}

/// Runs `argv` with `json` on standard input; fails on a non-zero exit or after 30 s.
pub fn command(argv: &[String], json: &[u8]) -> Result<(), NotifyError> {
    let (program, args) = argv.split_first().ok_or(NotifyError::EmptyCommand)?;
    let spawn = |source| NotifyError::Spawn { program: program.clone(), source };
    crate::ignore_sigpipe();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn)?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its input is not an error.
        let _ = stdin.write_all(json);
    }
    let start = Instant::now();
    loop {
        match child.try_wait().map_err(spawn)? {
            Some(status) if status.success() => return Ok(()),
            Some(status) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                let stderr = err.trim().to_string();
                return Err(NotifyError::Failed { program: program.clone(), status, stderr });
            }
            None if start.elapsed() > COMMAND_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(NotifyError::TimedOut { program: program.clone(), after: COMMAND_TIMEOUT });
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_gets_json_on_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.json");
        let argv = vec!["sh".to_string(), "-c".to_string(), format!("cat > '{}'", out.display())];
        command(&argv, br#"{"a":1}"#).unwrap();
        assert_eq!(std::fs::read_to_string(out).unwrap(), r#"{"a":1}"#);
        let err = command(&["sh".into(), "-c".into(), "echo boom >&2; exit 4".into()], b"{}").unwrap_err();
        assert!(matches!(&err, NotifyError::Failed { stderr, .. } if stderr == "boom"), "{err}");
        assert!(command(&[], b"{}").is_err());
    }
}
