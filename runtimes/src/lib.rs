//! Where aoctl touches the machine: git repositories and workspaces (git2), the runtimes agents
//! run in (tmux, a PTY the controller owns), the agent adapters, and background processes. Only
//! this crate spawns processes.

pub mod agents;
pub mod daemon;
pub mod docker;
pub mod git;
pub mod notify;
pub mod process;
pub mod runtime;
pub mod tmux;
pub mod transcript;
pub mod workspace;

pub use runtime::{Handle, InputStyle, LaunchSpec, Owned, Probe, Runtime, RuntimeError};
