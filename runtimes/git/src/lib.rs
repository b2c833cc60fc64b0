//! Git repositories and the workspaces sessions work in, on the machine: [`repository`] reads,
//! clones, fetches and pushes repositories with git2 and runs the git program, and fetches a
//! GitSource's manifests; [`workspace`] makes a session's worktree or clone (with the project's
//! setup, the warm pool of worktrees, the sandboxed checkout of container sessions) and the diff
//! of its work.
pub mod repository;
pub mod workspace;
