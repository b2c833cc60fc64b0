//! The runtimes agents run in (tmux, a PTY the controller owns, ConPTY on Windows, a docker
//! container), and what else touches the machine on a session's or the controller's behalf: a
//! session's files, the agent's environment, finding an agent's program, notification programs,
//! the private data folder and its token and node id files, and the background server of
//! `aoctl up`. Git repositories and workspaces are `aoctl-git`, the agent adapter table
//! `aoctl-agents` (both beside this crate, in `runtimes/`); only the crates of `runtimes/` spawn
//! processes.
pub mod agent_env;
#[cfg(test)]
mod contract_tests;
pub mod daemon;
pub mod docker;
pub mod node_id;
pub mod notification_programs;
pub mod process;
pub mod program;
mod runtime;
pub mod secret;
pub mod session_files;
mod terminal;
#[cfg(test)]
mod test_agents;
pub mod tmux;
pub mod transcript;
mod view;
#[cfg(all(test, unix))]
mod view_tests;
#[cfg(windows)]
mod windows;

pub use runtime::{
    Handle, LaunchSpec, Owned, Probe, Runtime, RuntimeError, TerminalInput, TerminalView, DEFAULT_RUNTIME,
    TERMINAL_COLS, TERMINAL_ROWS,
};
pub use tmux::delivery::echoed;

/// Makes a write to a pipe whose reader is gone an error (`EPIPE`) instead of a `SIGPIPE` that
/// ends the process. Rust binaries start that way; this holds it for any process that writes to
/// its children through this crate (a library's host may not have).
pub(crate) fn ignore_sigpipe() {
    #[cfg(unix)]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
        ONCE.call_once(|| unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        });
    }
}
