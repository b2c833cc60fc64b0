//! Sandboxed checkouts, for sessions whose agent runs in a container: nothing of the main
//! repository is writable from inside, and what the agent commits reaches the main repository
//! only when the controller moves it.
//!
//! The work tree W is the usual workspace folder. Its git folder G is `<W>.git`, next to it and
//! outside it: its own `HEAD`, refs, index, config and an empty `hooks/`, with the main
//! repository's objects borrowed read-only through `objects/info/alternates` (or, for
//! `workspace: clone`, copied into G). `W/.git` is a gitfile naming the container-only path
//! [`CONTAINER_GIT_DIR`], so `git` run on the host in W stops at "not a git repository" instead
//! of honouring whatever the agent left in G.
//!
//! After G is made, the host never opens it as a repository: it reads one file, the session's
//! branch (`refs/heads/<branch>`, else `packed-refs`), and reads objects from `G/objects`
//! through an in-memory alternate of the main repository. So a `commondir`, a config, hooks or
//! an fsmonitor planted in G mean nothing to the host. Moving the branch copies the objects the
//! main repository lacks and sets its `refs/heads/<branch>`, and no other ref, to G's.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use git2::build::CheckoutBuilder;
use git2::{BranchType, ObjectType, Odb, Oid, Repository};

use super::checkout::{checked_out_at, remove_tree, resolve_base};
use super::{WorkspaceError, WorkspaceRequest};

/// Where a sandbox's git folder is mounted in its container; `W/.git` names it.
pub const CONTAINER_GIT_DIR: &str = "/aoctl/git";
/// The whole content of `W/.git`.
pub const GITFILE: &str = "gitdir: /aoctl/git\n";
/// The parts of G a container gets read-only, mounted over themselves.
pub const READ_ONLY_PARTS: [&str; 4] = ["config", "hooks", "info", "objects/info"];

/// The largest ref file or `packed-refs` the host reads from G.
const MAX_REF_FILE: u64 = 4096;
const MAX_PACKED_REFS: u64 = 64 << 20;

/// What a container mounts for a sandboxed checkout, and where its branch goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sandbox {
    /// G, the session's own git folder, mounted at [`CONTAINER_GIT_DIR`].
    pub git_dir: PathBuf,
    /// The main repository's objects folder, mounted read-only at its own path so that G's
    /// alternates resolve; `None` when G has its own copy (`workspace: clone`).
    pub objects: Option<PathBuf>,
    /// The main repository, which the controller moves the branch to and pushes from.
    pub repo: PathBuf,
}

fn failed(path: &Path, branch: &str, message: impl Into<String>) -> WorkspaceError {
    WorkspaceError::SandboxFailed { path: path.to_path_buf(), branch: branch.to_string(), message: message.into() }
}

/// The main repository's objects folder, resolved.
pub(super) fn objects_dir(repo: &Path) -> Result<PathBuf, WorkspaceError> {
    let main = Repository::open(repo).map_err(|e| failed(repo, "", e.message()))?;
    let objects = main.commondir().join("objects");
    crate::repository::canonicalize(&objects).map_err(WorkspaceError::io(&objects))
}

/// Makes W and G for `req`: the branch in the main repository at its tip, else made at the base
/// (after `before_branch` is told where), G's branch at the same commit, checked out into W.
/// `borrowed`: G uses the main repository's objects; otherwise it gets a copy of them. What a
/// failed creation made (W, G) is removed; the caller's record undoes the branch.
pub(super) fn create(
    req: &WorkspaceRequest,
    work: &Path,
    git_dir: &Path,
    borrowed: bool,
    before_branch: impl FnOnce(Oid) -> Result<(), WorkspaceError>,
) -> Result<(), WorkspaceError> {
    let result = create_inner(req, work, git_dir, borrowed, before_branch);
    if result.is_err() {
        let _ = remove_tree(work);
        let _ = remove_tree(git_dir);
    }
    result
}

fn create_inner(
    req: &WorkspaceRequest,
    work: &Path,
    git_dir: &Path,
    borrowed: bool,
    before_branch: impl FnOnce(Oid) -> Result<(), WorkspaceError>,
) -> Result<(), WorkspaceError> {
    let branch = &req.branch;
    let fail = |e: git2::Error| failed(work, branch, e.message());
    let main = Repository::open(&req.repo)
        .map_err(|e| failed(work, branch, format!("{}: {}", req.repo.display(), e.message())))?;
    let tip = match main.find_branch(branch, BranchType::Local) {
        Ok(b) => b.get().target().ok_or_else(|| failed(work, branch, "the branch points at no commit"))?,
        Err(_) => {
            let commit = main.find_commit(resolve_base(&main, req)?).map_err(fail)?;
            before_branch(commit.id())?;
            main.branch(branch, &commit, false).map_err(fail)?;
            commit.id()
        }
    };
    // The controller moves this branch: a checkout of it would see its files change under it.
    if let Some(at) = checked_out_at(&main, branch) {
        return Err(WorkspaceError::BranchInUse { branch: branch.clone(), path: at });
    }
    let objects = objects_dir(&req.repo)?;
    write_layout(git_dir, branch, borrowed.then_some(objects.as_path()))?;

    let repo = Repository::open(git_dir).map_err(fail)?;
    if !borrowed {
        let source = main.workdir().unwrap_or(main.path());
        let url = source.to_str().ok_or_else(|| failed(work, branch, "the repository path is not UTF-8"))?;
        repo.remote_anonymous(url)
            .and_then(|mut r| r.fetch(&[tip.to_string()], None, None))
            .map_err(|e| failed(work, branch, format!("cannot copy the objects of {tip}: {}", e.message())))?;
    }
    repo.reference(&format!("refs/heads/{branch}"), tip, true, "aoctl: sandbox created").map_err(fail)?;
    fs::create_dir_all(work).map_err(WorkspaceError::io(work))?;
    repo.set_workdir(work, false).map_err(fail)?;
    repo.checkout_head(Some(CheckoutBuilder::new().force())).map_err(fail)?;
    // Last: a folder without its gitfile is a creation cut short.
    let dot_git = work.join(".git");
    fs::write(&dot_git, GITFILE).map_err(WorkspaceError::io(&dot_git))
}

/// G's files and folders, written by hand so that every byte is the controller's: no template,
/// no sample hooks.
fn write_layout(git_dir: &Path, branch: &str, objects: Option<&Path>) -> Result<(), WorkspaceError> {
    for dir in ["hooks", "info", "objects/info", "objects/pack", "refs/heads", "refs/tags"] {
        let d = git_dir.join(dir);
        fs::create_dir_all(&d).map_err(WorkspaceError::io(&d))?;
    }
    let config = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                  \tlogallrefupdates = true\n[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n";
    let mut files = vec![
        ("HEAD", format!("ref: refs/heads/{branch}\n")),
        ("config", config.to_string()),
        ("info/exclude", String::new()),
    ];
    if let Some(objects) = objects {
        let line = objects.to_str().ok_or_else(|| failed(git_dir, branch, "the objects path is not UTF-8"))?;
        files.push(("objects/info/alternates", format!("{line}\n")));
    }
    for (name, text) in files {
        let f = git_dir.join(name);
        fs::write(&f, text).map_err(WorkspaceError::io(&f))?;
    }
    Ok(())
}

/// Whether W and G are a complete sandboxed checkout: W's gitfile names the container path, and
/// G has its `HEAD`, objects and the index libgit2 writes last.
pub(super) fn healthy(work: &Path, git_dir: &Path) -> bool {
    let file = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    let dir = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    dir(work)
        && read_small(&work.join(".git"), MAX_REF_FILE).ok().flatten().as_deref() == Some(GITFILE.as_bytes())
        && dir(git_dir)
        && file(&git_dir.join("HEAD"))
        && dir(&git_dir.join("objects"))
        && file(&git_dir.join("index"))
}

/// Rebuilds a missing `G/index` from the branch's tree (G's, else the main repository's), leaving
/// W's files alone; whether the checkout is healthy afterwards.
pub(super) fn restore_index(repo: &Path, work: &Path, git_dir: &Path, branch: &str) -> bool {
    let index = git_dir.join("index");
    if fs::symlink_metadata(&index).is_ok() || !fs::symlink_metadata(git_dir).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    let rebuilt = (|| -> Result<(), git2::Error> {
        let view = view(repo, git_dir)?;
        let tip = match read_branch(git_dir, branch) {
            Ok(Some(tip)) => tip,
            _ => view.refname_to_id(&format!("refs/heads/{branch}"))?,
        };
        let tree = view.find_commit(tip)?.tree()?;
        let mut idx = git2::Index::open(&index)?;
        idx.read_tree(&tree)?;
        idx.write()
    })();
    match rebuilt {
        Ok(()) => {
            tracing::warn!(path = %work.display(), "the sandbox had no git index; rebuilt it from its branch");
            healthy(work, git_dir)
        }
        Err(e) => {
            tracing::warn!(path = %work.display(), error = %e, "cannot rebuild the sandbox's git index");
            false
        }
    }
}

/// The main repository with G's objects added in memory only, to read the agent's objects from.
pub(super) fn view(repo: &Path, git_dir: &Path) -> Result<Repository, git2::Error> {
    let view = Repository::open(repo)?;
    let objects = git_dir.join("objects");
    let objects = objects.to_str().ok_or_else(|| git2::Error::from_str("the sandbox path is not UTF-8"))?;
    view.odb()?.add_disk_alternate(objects)?;
    Ok(view)
}

/// The commit G's `refs/heads/<branch>` names: the loose ref, else its line in `packed-refs`;
/// `None` when G has no such branch. Only regular files are read (never a FIFO, a device or
/// through a final symlink), and only their first bytes.
pub(super) fn read_branch(git_dir: &Path, branch: &str) -> Result<Option<Oid>, WorkspaceError> {
    let name = format!("refs/heads/{branch}");
    let loose = git_dir.join(&name);
    let bad = |what: &str| failed(git_dir, branch, format!("{name} in the sandbox {what}"));
    if let Some(text) = read_small(&loose, MAX_REF_FILE)? {
        let text = String::from_utf8_lossy(&text);
        return Oid::from_str(text.trim_end()).map(Some).map_err(|_| bad("is not a commit id"));
    }
    let Some(packed) = read_small(&git_dir.join("packed-refs"), MAX_PACKED_REFS)? else { return Ok(None) };
    for line in String::from_utf8_lossy(&packed).lines() {
        if let Some((sha, r)) = line.split_once(' ') {
            if r == name && !line.starts_with('#') && !line.starts_with('^') {
                return Oid::from_str(sha).map(Some).map_err(|_| bad("has a bad line in packed-refs"));
            }
        }
    }
    Ok(None)
}

/// Up to `max` bytes of the regular file `path`; `None` when there is none (or something else
/// stands there: a folder, a symlink, a FIFO).
fn read_small(path: &Path, max: u64) -> Result<Option<Vec<u8>>, WorkspaceError> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file: File = match options.open(path) {
        Ok(f) => f,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(WorkspaceError::io(path)(e)),
    };
    if !file.metadata().map_err(WorkspaceError::io(path))?.is_file() {
        return Ok(None);
    }
    let mut text = Vec::new();
    file.take(max).read_to_end(&mut text).map_err(WorkspaceError::io(path))?;
    Ok(Some(text))
}

fn is_absent(e: &io::Error) -> bool {
    // ELOOP: a symlink where the file should be.
    matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) || e.raw_os_error() == Some(libc::ELOOP)
}

/// What moving the branch found: the main repository's `refs/heads/<branch>` afterwards, and
/// why it could not be moved, if it could not.
#[derive(Debug, Default)]
pub(super) struct Synced {
    pub(crate) head: Option<Oid>,
    pub(crate) error: Option<String>,
}

/// Moves the session's branch from G to the main repository `repo`: copies the objects the main
/// repository lacks and sets its `refs/heads/<branch>` (forced: it is the session's own branch)
/// to G's. Nothing else is read from G and no other ref is written. A branch checked out in
/// the main repository or a worktree of it is not moved.
pub(super) fn sync(repo: &Path, git_dir: &Path, branch: &str) -> Synced {
    let name = format!("refs/heads/{branch}");
    let main = match Repository::open(repo) {
        Ok(m) => m,
        Err(e) => return Synced { head: None, error: Some(format!("{}: {}", repo.display(), e.message())) },
    };
    let current = main.refname_to_id(&name).ok();
    let tip = match read_branch(git_dir, branch) {
        Ok(Some(tip)) => tip,
        // The agent deleted its branch: the main repository keeps what it had.
        Ok(None) => return Synced { head: current, error: None },
        Err(e) => return Synced { head: current, error: Some(e.to_string()) },
    };
    if current == Some(tip) {
        return Synced { head: current, error: None };
    }
    if let Some(at) = checked_out_at(&main, branch) {
        let error = format!("branch `{branch}` is checked out at {}; its commits stay in the sandbox", at.display());
        return Synced { head: current, error: Some(error) };
    }
    let moved = (|| -> Result<usize, git2::Error> {
        let view = view(repo, git_dir)?;
        let copied = copy_reachable(&view, &main, tip)?;
        main.reference(&name, tip, true, "aoctl: the session's commits, from its sandbox")?;
        Ok(copied)
    })();
    match moved {
        Ok(copied) => {
            tracing::debug!(branch, sha = %tip, copied, "moved the session's branch from its sandbox");
            Synced { head: Some(tip), error: None }
        }
        Err(e) => {
            Synced { head: current, error: Some(format!("cannot move branch `{branch}` to {tip}: {}", e.message())) }
        }
    }
}

/// Copies into `main` every object reachable from `tip` that it lacks, reading them from `view`
/// (the main repository plus G's objects); how many. Walks are iterative, so no history or tree
/// the agent builds can exhaust the stack; a commit main's branches already hold is not visited.
fn copy_reachable(view: &Repository, main: &Repository, tip: Oid) -> Result<usize, git2::Error> {
    let dst = main.odb()?;
    let src = view.odb()?;
    if dst.exists(tip) {
        return Ok(0);
    }
    let mut walk = view.revwalk()?;
    walk.push(tip)?;
    for r in main.references_glob("refs/heads/*")?.flatten() {
        if let Some(oid) = r.target() {
            let _ = walk.hide(oid);
        }
    }
    let mut copied = 0;
    for oid in walk {
        let oid = oid?;
        if dst.exists(oid) {
            continue;
        }
        let commit = view.find_commit(oid)?;
        let mut trees = vec![commit.tree_id()];
        while let Some(id) = trees.pop() {
            if dst.exists(id) {
                continue;
            }
            let tree = view.find_tree(id)?;
            for entry in tree.iter() {
                match entry.kind() {
                    Some(ObjectType::Tree) => trees.push(entry.id()),
                    Some(ObjectType::Blob) if !dst.exists(entry.id()) => copied += copy(&src, &dst, entry.id())?,
                    // Submodule commits live elsewhere.
                    _ => {}
                }
            }
            copied += copy(&src, &dst, id)?;
        }
        copied += copy(&src, &dst, oid)?;
    }
    Ok(copied)
}

fn copy(src: &Odb<'_>, dst: &Odb<'_>, id: Oid) -> Result<usize, git2::Error> {
    let obj = src.read(id)?;
    let written = dst.write(obj.kind(), obj.data())?;
    if written != id {
        return Err(git2::Error::from_str(&format!("object {id} reads back as {written}")));
    }
    Ok(1)
}
