//! Starting and stopping the background `aoctl serve` process of `aoctl up` / `aoctl down`.
//!
//! The process runs in its own session (so it outlives the terminal that started it; on Windows
//! detached from the console, in a process group of its own), reads from `/dev/null` (`NUL`) and
//! appends its output to a log file. Its id is kept in a pid file, written atomically. It is asked
//! to stop with SIGTERM, on Windows by setting a named event it waits on ([`stop_requested`]).
//! `exec_replace` hands the terminal over to another program, for `aoctl attach`; `open_url` asks
//! the desktop to open a link, for `aoctl dashboard --open`.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Why starting, finding or stopping a background process failed. Each variant names its file.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("cannot open log file {path}: {source}")]
    Log { path: PathBuf, source: io::Error },
    #[error("cannot start {program}: {source}")]
    Spawn { program: PathBuf, source: io::Error },
    #[error("cannot write pid file {path}: {source}")]
    WritePid { path: PathBuf, source: io::Error },
    #[error("cannot read pid file {path}: {source}")]
    ReadPid { path: PathBuf, source: io::Error },
    #[error("pid file {path} does not hold a process id: {content:?}")]
    BadPid { path: PathBuf, content: String },
    #[error("cannot remove pid file {path}: {source}")]
    RemovePid { path: PathBuf, source: io::Error },
    #[error("cannot signal process {pid} of pid file {path}: {source}")]
    Signal { pid: u32, path: PathBuf, source: io::Error },
    #[error("the command to run is empty")]
    EmptyCommand,
}

/// Runs `argv` in place of this process, with its terminal, environment and working directory:
/// on Unix by exec(2), which returns only when it fails; elsewhere as a child this process waits
/// for and then exits with its status. Returns why the command could not be started.
pub fn exec_replace(argv: &[String]) -> DaemonError {
    let Some((program, args)) = argv.split_first() else { return DaemonError::EmptyCommand };
    let mut cmd = Command::new(program);
    cmd.args(args);
    let spawn_err = |source| DaemonError::Spawn { program: PathBuf::from(program), source };
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        spawn_err(cmd.exec())
    }
    #[cfg(not(unix))]
    {
        match cmd.status() {
            Ok(status) => std::process::exit(status.code().unwrap_or(1)),
            Err(source) => spawn_err(source),
        }
    }
}

/// Starts `program args…` detached from this process: in a new session (on Windows without a
/// console, in a process group of its own), stdin from the null device, stdout and stderr appended
/// to `log`. Writes the child's pid to `pid_file` and returns it.
pub fn spawn_detached(program: &Path, args: &[OsString], log: &Path, pid_file: &Path) -> Result<u32, DaemonError> {
    let log_err = |source| DaemonError::Log { path: log.to_path_buf(), source };
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(log_err)?;
    }
    let out = OpenOptions::new().create(true).append(true).open(log).map_err(log_err)?;
    let err = out.try_clone().map_err(log_err)?;

    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
    detach(&mut cmd);
    let mut child = cmd.spawn().map_err(|source| DaemonError::Spawn { program: program.to_path_buf(), source })?;
    let pid = child.id();
    if let Err(e) = write_pid(pid_file, pid) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    // Reap the child if it exits while this process still runs, so that it never lingers as a
    // zombie that `is_alive` would mistake for a live process. When this process exits first, the
    // child is adopted by init.
    #[cfg(unix)]
    std::thread::spawn(move || child.wait());
    // Dropping the handle leaves the process running; Windows keeps no zombies to reap.
    #[cfg(windows)]
    drop(child);
    Ok(pid)
}

/// Makes `cmd` start in a session of its own, out of reach of the terminal's hangup.
#[cfg(unix)]
fn detach(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only calls setsid(2), which is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(|| if libc::setsid() == -1 { Err(io::Error::last_os_error()) } else { Ok(()) });
    }
}

/// Makes `cmd` start without a console and in a process group of its own, so that neither the
/// console's closing nor its Ctrl-C reach it.
#[cfg(windows)]
fn detach(cmd: &mut Command) {
    use std::os::windows::process::CommandExt;
    use windows_sys::Win32::System::Threading::{CREATE_NEW_PROCESS_GROUP, DETACHED_PROCESS};
    cmd.creation_flags(DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP);
}

/// Writes `pid` to `pid_file` through a temporary file and a rename, so readers never see half a pid.
fn write_pid(pid_file: &Path, pid: u32) -> Result<(), DaemonError> {
    let err = |source| DaemonError::WritePid { path: pid_file.to_path_buf(), source };
    if let Some(dir) = pid_file.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(err)?;
    }
    let mut tmp = pid_file.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, format!("{pid}\n")).map_err(err)?;
    fs::rename(&tmp, pid_file).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        err(e)
    })
}

/// Reads the pid in `pid_file`; `None` when the file does not exist.
pub fn read_pid(pid_file: &Path) -> Result<Option<u32>, DaemonError> {
    let text = match fs::read_to_string(pid_file) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(DaemonError::ReadPid { path: pid_file.to_path_buf(), source }),
    };
    // Zero and values past i32::MAX would make kill(2) signal process groups: refuse them.
    match text.trim().parse::<u32>() {
        Ok(pid) if pid > 0 && pid <= i32::MAX as u32 => Ok(Some(pid)),
        _ => Err(DaemonError::BadPid { path: pid_file.to_path_buf(), content: text.chars().take(40).collect() }),
    }
}

/// Whether a process with this id exists (and is not a zombie).
#[cfg(unix)]
pub fn is_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else { return false };
    if raw <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let exists = unsafe { libc::kill(raw, 0) } == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists && !is_zombie(pid)
}

/// Whether a process with this id exists and has not exited.
#[cfg(windows)]
pub fn is_alive(pid: u32) -> bool {
    crate::windows::is_alive(pid)
}

/// On Linux, reads the state letter of `/proc/PID/stat`; elsewhere assumes the process is not a zombie.
#[cfg(unix)]
fn is_zombie(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state follows the command name, which is in parentheses and may itself hold spaces.
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()) == Some("Z")
}

/// Stops the process of `pid_file`: asks it to end (SIGTERM; on Windows its stop event), gives it
/// up to `grace` to exit, then kills it (SIGKILL; on Windows it is terminated, at once when it has
/// no stop event). Removes the pid file. Returns the pid when a live process was stopped, `None`
/// when there was no pid file or its process was already gone (the stale file is removed too).
pub fn stop(pid_file: &Path, grace: Duration) -> Result<Option<u32>, DaemonError> {
    let Some(pid) = read_pid(pid_file)? else { return Ok(None) };
    if !is_alive(pid) {
        remove_pid_file(pid_file)?;
        return Ok(None);
    }
    let signal_err = |source| DaemonError::Signal { pid, path: pid_file.to_path_buf(), source };
    let asked = ask_to_end(pid).map_err(signal_err)?;
    if !(asked && wait_gone(pid, grace)) {
        end_now(pid).map_err(signal_err)?;
        wait_gone(pid, Duration::from_secs(5));
    }
    remove_pid_file(pid_file)?;
    Ok(Some(pid))
}

/// Sends SIGTERM; always asked.
#[cfg(unix)]
fn ask_to_end(pid: u32) -> io::Result<bool> {
    signal(pid, libc::SIGTERM).map(|()| true)
}

#[cfg(unix)]
fn end_now(pid: u32) -> io::Result<()> {
    signal(pid, libc::SIGKILL)
}

/// Sets the process's stop event; `false` when it has none.
#[cfg(windows)]
fn ask_to_end(pid: u32) -> io::Result<bool> {
    crate::windows::request_stop(pid)
}

#[cfg(windows)]
fn end_now(pid: u32) -> io::Result<()> {
    crate::windows::terminate(pid)
}

/// Resolves when this process is asked to stop: Ctrl-C, or SIGTERM (what [`stop`] sends); on
/// Windows Ctrl-C, Ctrl-Break, the console closing, or [`stop`] setting the stop event.
pub async fn stop_requested() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let other = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(windows)]
    let other = async {
        use tokio::signal::windows;
        // A thread of its own, not a blocking task: the runtime would wait for that at exit.
        let (set, event) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || set.send(crate::windows::wait_for_stop_request()));
        let (mut brk, mut close) = match (windows::ctrl_break(), windows::ctrl_close()) {
            (Ok(b), Ok(c)) => (b, c),
            _ => return std::future::pending().await,
        };
        tokio::select! {
            done = event => {
                if !matches!(done, Ok(Ok(()))) {
                    tracing::warn!("cannot wait for a stop request; only Ctrl-C and Ctrl-Break stop this process");
                    std::future::pending::<()>().await;
                }
            }
            _ = brk.recv() => {}
            _ = close.recv() => {}
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = other => {},
    }
}

/// Sends `sig` to `pid`; a process that is already gone is no error.
#[cfg(unix)]
fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: `pid` was checked to be a positive process id by `read_pid`.
    if unsafe { libc::kill(pid as i32, sig) } == 0 {
        return Ok(());
    }
    let source = io::Error::last_os_error();
    if source.raw_os_error() == Some(libc::ESRCH) {
        return Ok(());
    }
    Err(source)
}

/// Polls until the process is gone or `limit` has passed; returns whether it is gone.
fn wait_gone(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if !is_alive(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn remove_pid_file(pid_file: &Path) -> Result<(), DaemonError> {
    match fs::remove_file(pid_file) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(DaemonError::RemovePid { path: pid_file.to_path_buf(), source }),
    }
}

/// The argument vectors that open `url` in a browser, in the order they are tried: each entry of
/// `$BROWSER` (a `:`-separated list of commands, split on whitespace, never run by a shell; `%s`
/// stands for the link, else it is appended), then the desktop's own opener.
pub fn browser_commands(browser_env: Option<&str>, url: &str) -> Vec<Vec<String>> {
    let mut commands: Vec<Vec<String>> = browser_env
        .unwrap_or("")
        .split(':')
        .map(|entry| entry.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .filter(|argv| !argv.is_empty())
        .map(|mut argv| {
            if argv.iter().any(|a| a.contains("%s")) {
                argv.iter_mut().for_each(|a| *a = a.replace("%s", url));
            } else {
                argv.push(url.to_string());
            }
            argv
        })
        .collect();
    let opener: &[&str] = if cfg!(target_os = "macos") {
        &["open"]
    } else if cfg!(windows) {
        // Not `cmd /c start`, which would read the link's `&` as a command separator.
        &["rundll32", "url.dll,FileProtocolHandler"]
    } else {
        &["xdg-open"]
    };
    commands.push(opener.iter().map(|s| s.to_string()).chain([url.to_string()]).collect());
    commands
}

/// Opens `url` with the first of [`browser_commands`] that starts; does not wait for it.
pub fn open_url(url: &str) -> Result<(), DaemonError> {
    let browser = std::env::var("BROWSER").ok();
    let mut last = DaemonError::EmptyCommand;
    for argv in browser_commands(browser.as_deref(), url) {
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        match cmd.spawn() {
            Ok(_) => return Ok(()),
            Err(source) => last = DaemonError::Spawn { program: PathBuf::from(&argv[0]), source },
        }
    }
    Err(last)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn sleep_bin() -> PathBuf {
        ["/bin/sleep", "/usr/bin/sleep"].iter().map(PathBuf::from).find(|p| p.exists()).expect("sleep is installed")
    }

    #[test]
    fn spawn_then_stop() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("run/serve.pid");
        let log = dir.path().join("logs/serve.log");
        let pid = spawn_detached(&sleep_bin(), &["30".into()], &log, &pid_file).unwrap();
        assert_eq!(read_pid(&pid_file).unwrap(), Some(pid));
        assert!(is_alive(pid));
        assert!(log.exists());
        assert!(!dir.path().join("run/serve.pid.tmp").exists());

        let started = Instant::now();
        assert_eq!(stop(&pid_file, Duration::from_secs(5)).unwrap(), Some(pid));
        assert!(started.elapsed() < Duration::from_secs(5), "SIGTERM should be enough for sleep");
        assert!(!is_alive(pid));
        assert!(!pid_file.exists());
        assert_eq!(stop(&pid_file, Duration::from_secs(1)).unwrap(), None);
    }

    #[test]
    fn new_session_and_appended_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        fs::write(&log, "before\n").unwrap();
        let pid_file = dir.path().join("p.pid");
        let script = "echo pid=$$; [ -r /proc/$$/stat ] && echo sid=$(cut -d' ' -f6 /proc/$$/stat)";
        let args: Vec<OsString> = vec!["-c".into(), script.into()];
        let pid = spawn_detached(Path::new("/bin/sh"), &args, &log, &pid_file).unwrap();
        assert!(wait_gone(pid, Duration::from_secs(10)));
        let text = fs::read_to_string(&log).unwrap();
        assert!(text.starts_with("before\n"), "{text}");
        assert!(text.contains(&format!("pid={pid}\n")), "{text}");
        if Path::new("/proc/self/stat").exists() {
            assert!(text.contains(&format!("sid={pid}\n")), "the child leads its own session: {text}");
        }
    }

    #[test]
    fn exec_replace_reports_what_cannot_start() {
        assert!(matches!(exec_replace(&[]), DaemonError::EmptyCommand));
        let e = exec_replace(&["/nonexistent/aoctl-no-such-program".into(), "x".into()]);
        assert!(matches!(&e, DaemonError::Spawn { source, .. } if source.kind() == io::ErrorKind::NotFound), "{e}");
        assert!(e.to_string().starts_with("cannot start /nonexistent/aoctl-no-such-program: "), "{e}");
    }

    #[test]
    fn stale_and_bad_pid_files() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("serve.pid");
        assert_eq!(read_pid(&pid_file).unwrap(), None);

        fs::write(&pid_file, "0\n").unwrap();
        assert!(matches!(read_pid(&pid_file), Err(DaemonError::BadPid { .. })));
        fs::write(&pid_file, "abc").unwrap();
        let e = read_pid(&pid_file).unwrap_err();
        assert!(e.to_string().contains("serve.pid"), "{e}");

        let pid = spawn_detached(&sleep_bin(), &["0".into()], &dir.path().join("l"), &pid_file).unwrap();
        assert!(wait_gone(pid, Duration::from_secs(10)));
        assert_eq!(stop(&pid_file, Duration::from_secs(1)).unwrap(), None);
        assert!(!pid_file.exists(), "a stale pid file is removed");
    }

    #[test]
    fn browsers_come_from_the_environment_then_the_desktop() {
        let url = "http://127.0.0.1:7420/login?code=ab&x=1";
        let commands = browser_commands(Some("firefox --new-tab:chromium --app=%s:"), url);
        assert_eq!(commands[0], vec!["firefox", "--new-tab", url]);
        assert_eq!(commands[1], vec!["chromium", format!("--app={url}").as_str()]);
        assert_eq!(commands.len(), 3, "the desktop's opener comes last: {commands:?}");
        assert_eq!(commands[2].last().map(String::as_str), Some(url));
        assert_eq!(browser_commands(None, url).len(), 1);
    }
}
