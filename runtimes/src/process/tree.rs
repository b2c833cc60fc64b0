//! Killing an agent's whole process tree, shared by the tmux and process runtimes: agents leave
//! daemons and background jobs behind that outlive their terminal.
//!
//! On Linux the tree is read from `/proc/*/stat`: every process descending from the root by parent
//! links, plus every process still in the root's session (an orphan that double-forked but did not
//! call `setsid`). Elsewhere only the root's process group is signalled. A process that started its
//! own session *and* was re-parented away before the stop cannot be found.

use std::time::{Duration, Instant};

/// How often liveness is checked during the grace period.
const POLL: Duration = Duration::from_millis(50);

/// Sends SIGTERM to the tree of `root` (the root itself only when `include_root`; a dead tmux pane
/// keeps the pid of a process that is gone), waits up to `grace` for it to end, then sends SIGKILL to
/// whatever is left, including processes started meanwhile. Returns the pids that were signalled.
#[cfg(unix)]
pub(crate) async fn kill_tree(root: u32, include_root: bool, grace: Duration) -> Vec<u32> {
    if root <= 1 {
        return Vec::new();
    }
    let mut pids = members(root, include_root);
    signal_all(root, include_root, &pids, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
    }
    for pid in members(root, include_root) {
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    if !left.is_empty() {
        tracing::debug!(root, ?left, "processes outlived SIGTERM, sending SIGKILL");
        signal_all(root, include_root, &left, libc::SIGKILL);
    }
    pids
}

/// Signals `pids` and the process group led by `root`.
#[cfg(unix)]
fn signal_all(root: u32, include_root: bool, pids: &[u32], signal: libc::c_int) {
    for &pid in pids {
        if let Ok(pid) = libc::pid_t::try_from(pid) {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe { libc::kill(pid, signal) };
        }
    }
    if include_root {
        if let Ok(pgrp) = libc::pid_t::try_from(root) {
            // SAFETY: as above; a negative pid names the process group.
            unsafe { libc::kill(-pgrp, signal) };
        }
    }
}

/// Whether `pid` exists and is not a zombie.
#[cfg(unix)]
pub(crate) fn alive(pid: u32) -> bool {
    let Ok(raw) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(raw, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM) {
        return false;
    }
    #[cfg(target_os = "linux")]
    if let Some(stat) = read_stat(pid) {
        return stat.state != 'Z';
    }
    true
}

/// The tree of `root` as described in the module documentation.
#[cfg(target_os = "linux")]
fn members(root: u32, include_root: bool) -> Vec<u32> {
    let table: Vec<Stat> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(read_stat)
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        for s in &table {
            if (s.ppid == parent || s.session == root) && !found.contains(&s.pid) {
                found.push(s.pid);
            }
        }
        i += 1;
    }
    if !include_root {
        found.retain(|&p| p != root);
    }
    found
}

/// Without `/proc` the tree is the root alone; its process group is signalled as well.
#[cfg(all(unix, not(target_os = "linux")))]
fn members(root: u32, include_root: bool) -> Vec<u32> {
    if include_root {
        vec![root]
    } else {
        Vec::new()
    }
}

/// The exit code held by `pid` when it is a zombie child of `parent` that exited normally; `None`
/// when it is anything else or was killed by a signal.
#[cfg(target_os = "linux")]
pub(crate) fn zombie_exit_code(pid: u32, parent: u32) -> Option<i32> {
    let stat = read_stat(pid)?;
    let status = stat.exit_code.filter(|_| stat.state == 'Z' && stat.ppid == parent)?;
    // The wait(2) status: the low seven bits are the killing signal, the next byte the exit code.
    (status & 0x7f == 0).then_some((status >> 8) & 0xff)
}

/// The fields of `/proc/PID/stat` the tree needs.
#[cfg(target_os = "linux")]
struct Stat {
    pid: u32,
    state: char,
    ppid: u32,
    session: u32,
    /// Field 52, the wait(2) status of an exited process (Linux 3.5 and later).
    exit_code: Option<i32>,
}

#[cfg(target_os = "linux")]
fn read_stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself hold spaces and parentheses.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let _pgrp = fields.next()?;
    let session = fields.next()?.parse().ok()?;
    // Fields 7 to 51 lie between the session (field 6) and the exit code (field 52).
    let exit_code = fields.nth(45).and_then(|c| c.parse().ok());
    Some(Stat { pid, state, ppid, session, exit_code })
}
