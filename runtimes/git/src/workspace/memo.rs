//! The fast path of `Workspaces::ensure`: what the last full check of a session's workspace found,
//! and a check in a few `stat`s that nothing it relied on has changed since.
//!
//! A full check opens the workspace and the main repository with libgit2 and reads the record
//! under the claim lock. Once it has found a complete checkout with its setup done, the next
//! `ensure` of that session only compares the files the check depended on — the record, the
//! workspace's `.git`, the git folder and its index, the main repository's git folder — with
//! what they were, and reads `HEAD` and the branch's ref (loose, else `packed-refs`) itself. Any
//! difference, or anything it cannot read with certainty, sends it back to the full check. For a
//! sandboxed checkout it reads only the session's branch in the sandbox's git folder, never its
//! `HEAD` (which the agent may point anywhere).

use std::fs::{self, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{sandbox, Sandbox, WorkspaceInfo, WorkspaceRecord};

/// The identity of a file or folder: replaced, recreated or rewritten means different.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    /// Device and inode: which object it is.
    #[cfg(unix)]
    id: (u64, u64),
    #[cfg(not(unix))]
    id: Option<SystemTime>,
    size: u64,
    modified: Option<SystemTime>,
    dir: bool,
}

impl Stamp {
    fn of(meta: &Metadata) -> Stamp {
        #[cfg(unix)]
        let id = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let id = meta.created().ok();
        Stamp { id, size: meta.len(), modified: meta.modified().ok(), dir: meta.is_dir() }
    }

    /// Only which object it is: for folders, whose times move whenever an entry does.
    fn same_object(&self, other: &Stamp) -> bool {
        (self.id, self.dir) == (other.id, other.dir)
    }

    fn read(path: &Path) -> Option<Stamp> {
        fs::symlink_metadata(path).ok().map(|m| Stamp::of(&m))
    }
}

/// A workspace found complete by a full check, and what that check relied on.
#[derive(Clone, Debug)]
pub(super) struct Memo {
    pub(crate) rec: WorkspaceRecord,
    record: Stamp,
    /// `<workspace>/.git`: a file naming the git folder for worktrees, the git folder for clones.
    dot_git: Stamp,
    /// The workspace's own git folder (`<main>/.git/worktrees/<name>` for a worktree).
    git_dir: PathBuf,
    /// The main repository's git folder, shared by its worktrees (the git folder itself for clones).
    common_dir: PathBuf,
    common: Stamp,
    /// For a sandboxed checkout (whose git folder is `git_dir`), what its container mounts.
    sandbox: Option<Sandbox>,
}

impl Memo {
    /// Remembers a workspace a full check found complete: `git_dir` and `common_dir` as libgit2
    /// reported them. `None` when the repository stores refs in a way `head` does not read.
    pub(super) fn new(
        rec: &WorkspaceRecord,
        record_file: &Path,
        git_dir: &Path,
        common_dir: &Path,
        sandbox: Option<Sandbox>,
    ) -> Option<Memo> {
        if !rec.setup_done || !rec.is_checkout_done() || common_dir.join("reftable").exists() {
            return None;
        }
        Some(Memo {
            rec: rec.clone(),
            record: Stamp::read(record_file)?,
            dot_git: Stamp::read(&rec.path.join(".git"))?,
            git_dir: git_dir.to_path_buf(),
            common_dir: common_dir.to_path_buf(),
            common: Stamp::read(common_dir)?,
            sandbox,
        })
    }

    /// The workspace as it is now, when nothing the full check relied on has changed; `None` sends
    /// the caller back to the full check.
    pub(super) fn check(&self, record_file: &Path) -> Option<WorkspaceInfo> {
        if Stamp::read(record_file)? != self.record {
            return None;
        }
        let dot_git = Stamp::read(&self.rec.path.join(".git"))?;
        // A worktree's or sandbox's `.git` is a file that never changes; a clone's is its folder.
        let unchanged = if self.sandbox.is_some() || super::linked(self.rec.kind) {
            dot_git == self.dot_git
        } else {
            dot_git.same_object(&self.dot_git)
        };
        if !unchanged || !Stamp::read(&self.common_dir)?.same_object(&self.common) {
            return None;
        }
        // libgit2 writes the index last: without it the checkout is not one to work in.
        if !fs::metadata(self.git_dir.join("index")).is_ok_and(|m| m.is_file()) {
            return None;
        }
        let head = match &self.sandbox {
            Some(_) => Head::Branch {
                name: self.rec.branch.clone(),
                sha: sandbox::read_branch(&self.git_dir, &self.rec.branch).ok()?.map(|o| o.to_string()),
            },
            None => head(&self.git_dir, &self.common_dir)?,
        };
        let (branch, head_sha) = match head {
            Head::Branch { name, sha } => (name, sha),
            Head::Detached(sha) => (self.rec.branch.clone(), Some(sha)),
        };
        Some(WorkspaceInfo {
            project: self.rec.project.clone(),
            session: self.rec.session.clone(),
            path: self.rec.path.clone(),
            branch,
            head_sha,
            port: self.rec.port,
            created: false,
            sandbox: self.sandbox.clone(),
            sync_error: None,
            pooled: false,
        })
    }
}

/// What `HEAD` of a checkout says, as libgit2's `Repository::head` would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Head {
    /// On a local branch; `sha` is `None` while the branch has no commit (an unborn branch).
    Branch { name: String, sha: Option<String> },
    /// A commit, not a branch.
    Detached(String),
}

/// Reads `HEAD` from `git_dir` and the branch it names from `common_dir` (loose ref, else
/// `packed-refs`). `None` when the answer is not certain from those files: a ref outside
/// `refs/heads/`, a symbolic branch, or a file that cannot be read.
pub(super) fn head(git_dir: &Path, common_dir: &Path) -> Option<Head> {
    let text = fs::read_to_string(git_dir.join("HEAD")).ok()?;
    let text = text.trim_end();
    let Some(target) = text.strip_prefix("ref:") else {
        return is_sha(text).then(|| Head::Detached(text.to_string()));
    };
    let target = target.trim();
    let name = target.strip_prefix("refs/heads/")?;
    if name.is_empty() || target.split('/').any(|part| part.is_empty() || part == "." || part == "..") {
        return None;
    }
    let sha = match fs::read_to_string(common_dir.join(target)) {
        Ok(text) => {
            let text = text.trim_end();
            // A symbolic ref (`ref: ...`), or something half-written: let libgit2 decide.
            if !is_sha(text) {
                return None;
            }
            Some(text.to_string())
        }
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => {
            packed_ref(common_dir, target)?
        }
        // A folder of that name holds refs below it, so the branch itself is not loose.
        Err(_) if common_dir.join(target).is_dir() => packed_ref(common_dir, target)?,
        Err(_) => return None,
    };
    Some(Head::Branch { name: name.to_string(), sha })
}

/// The commit `packed-refs` gives `target`: `Some(None)` when it has none (or there is no such
/// file), `None` when the file cannot be read.
fn packed_ref(common_dir: &Path, target: &str) -> Option<Option<String>> {
    let text = match fs::read_to_string(common_dir.join("packed-refs")) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Some(None),
        Err(_) => return None,
    };
    for line in text.lines() {
        if line.starts_with('#') || line.starts_with('^') {
            continue;
        }
        if let Some((sha, name)) = line.split_once(' ') {
            if name == target {
                return is_sha(sha).then(|| Some(sha.to_string()));
            }
        }
    }
    Some(None)
}

/// A full object id: 40 hex digits (SHA-1) or 64 (SHA-256).
fn is_sha(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}
