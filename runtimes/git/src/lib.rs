//! Git repositories and the workspaces sessions work in, on the machine: [`repository`] reads
//! repositories and finds conflicting and changed files with git2, clones, fetches and pushes with
//! the git program, and fetches a GitSource's ref and reads its manifests; [`workspace`] makes a
//! session's worktree or clone (with the project's setup, the warm pool of worktrees, the
//! sandboxed checkout of container sessions) and the diff of its work.
pub mod repository;
pub mod workspace;
