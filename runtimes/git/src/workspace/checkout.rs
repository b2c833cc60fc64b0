//! The git side of workspaces: adding and pruning worktrees, cloning, and finding base refs (git2),
//! with the files of a checkout written by the git program where one is installed.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use aoctl_api::session::WorkspaceKind;
use git2::build::{CheckoutBuilder, RepoBuilder};
use git2::{BranchType, Oid, Repository, WorktreePruneOptions};
use parking_lot::RwLock;

use super::{WorkspaceError, WorkspaceRecord, WorkspaceRequest};
use crate::repository;

/// Held to read while a worktree is added or an added one's branch is deleted again, and to
/// write while a folder under `.git/worktrees/` is deleted. libgit2 (1.9) takes a worktree that is
/// listed but cannot be looked up for one that has the branch checked out
/// (`git_repository_foreach_worktree` sets `error = lookup(..) < 0`, i.e. 1), so deleting one
/// session's entry while another session's branch is checked that way (`git_branch_delete` and
/// `git_worktree_add` do) fails with "reference … is already checked out". For the same reason
/// worktrees are added here with files of their own, not with `git_worktree_add`: 20 adds at
/// once fail it on each other's half-written entries.
static ADMIN: RwLock<()> = RwLock::new(());

/// The workspace's repository when the folder holds the complete checkout the record describes.
/// libgit2 writes the index only after every file is checked out, so without one the checkout
/// was cut short (or damaged), and a commit from it would delete whatever the index lacks.
pub(super) fn open_healthy(rec: &WorkspaceRecord, path: &Path) -> Option<Repository> {
    let repo = open_checkout(rec, path)?;
    repo.path().join("index").is_file().then_some(repo)
}

/// Rebuilds the missing index of a checkout that was completed, from HEAD, leaving the files
/// alone: what differs from HEAD then shows as unstaged changes. Returns whether the checkout
/// is healthy afterwards.
pub(super) fn restore_index(rec: &WorkspaceRecord, path: &Path) -> bool {
    let Some(repo) = open_checkout(rec, path) else { return false };
    let file = repo.path().join("index");
    if fs::symlink_metadata(&file).is_ok() {
        return false;
    }
    let restored = repo
        .head()
        .and_then(|h| h.peel_to_tree())
        .and_then(|tree| repo.index().and_then(|mut index| index.read_tree(&tree).and_then(|()| index.write())));
    match restored {
        Ok(()) => {
            tracing::warn!(path = %path.display(), "the workspace had no git index; rebuilt it from HEAD");
            file.is_file()
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot rebuild the workspace's git index");
            false
        }
    }
}

/// The workspace's repository when the folder is the kind of checkout the record describes.
pub(super) fn open_checkout(rec: &WorkspaceRecord, path: &Path) -> Option<Repository> {
    let repo = Repository::open(path).ok()?;
    if !same_path(repo.workdir()?, path) {
        return None;
    }
    match rec.kind {
        WorkspaceKind::Worktree | WorkspaceKind::Readonly => {
            let main = Repository::open(&rec.repo).ok()?;
            (repo.is_worktree() && same_path(repo.commondir(), main.commondir())).then_some(repo)
        }
        WorkspaceKind::Clone => (!repo.is_worktree()).then_some(repo),
        WorkspaceKind::None => None,
    }
}

/// The canonical form of a path whose last part may not exist.
fn loose_canonical(path: &Path) -> PathBuf {
    match (path.parent().and_then(|p| crate::repository::canonicalize(p).ok()), path.file_name()) {
        (Some(parent), Some(name)) => parent.join(name),
        _ => path.to_path_buf(),
    }
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Makes room for a new checkout: an empty folder (left by a crash) goes; anything else is kept
/// and reported, since it may hold someone's work.
pub(super) fn clear_broken(path: &Path, req: &WorkspaceRequest) -> Result<(), WorkspaceError> {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Ok(());
    };
    let empty = meta.is_dir() && fs::read_dir(path).map_err(WorkspaceError::io(path))?.next().is_none();
    if empty {
        return fs::remove_dir(path).map_err(WorkspaceError::io(path));
    }
    let message = "the folder exists but is not the expected git checkout; remove the session to start over".into();
    Err(cannot_make(req, path, message))
}

/// Removes what a creation that never finished left, all of it ours by the record: the folder,
/// the worktree's folder in the main repository's `.git/worktrees/` (or the sandbox's git folder
/// `git_dir`), a lock on the branch, and the branch when that creation made it and it still
/// points where it was made.
///
/// The lock is removed whenever present: the branch is the session's own and the only writer of
/// it before the checkout is done is `ensure`, which holds the session's lock, so the lock file
/// can only be left by a killed process.
pub(super) fn clear_interrupted(
    rec: &WorkspaceRecord,
    path: &Path,
    git_dir: Option<&Path>,
    name: &str,
) -> Result<(), WorkspaceError> {
    remove_tree(path)?;
    if let Some(git_dir) = git_dir {
        remove_tree(git_dir)?;
    }
    if !super::linked(rec.kind) && git_dir.is_none() {
        return Ok(());
    }
    let Ok(repo) = Repository::open(&rec.repo) else { return Ok(()) };
    let common = repo.commondir().to_path_buf();
    if git_dir.is_none() {
        for name in [rec.worktree_name.as_deref(), Some(name)].into_iter().flatten() {
            remove_admin_dir(&common, name, path)?;
        }
    }
    if git2::Branch::name_is_valid(&rec.branch) != Ok(true) {
        return Ok(());
    }
    let lock = common.join("refs/heads").join(format!("{}.lock", rec.branch));
    if fs::symlink_metadata(&lock).is_ok_and(|m| m.is_file()) {
        tracing::warn!(lock = %lock.display(), "removing the branch lock a killed workspace creation left");
        fs::remove_file(&lock).map_err(WorkspaceError::io(&lock))?;
    }
    let made = rec.branch_made_at.as_deref().and_then(|sha| Oid::from_str(sha).ok());
    if let (Some(made), Ok(mut branch)) = (made, repo.find_branch(&rec.branch, BranchType::Local)) {
        if branch.get().target() == Some(made) && checked_out_at(&repo, &rec.branch).is_none() {
            if let Err(e) = branch.delete() {
                tracing::warn!(branch = rec.branch, error = %e, "cannot delete the branch of an interrupted creation");
            }
        }
    }
    Ok(())
}

/// Deletes `<common>/worktrees/<name>` unless it belongs to another checkout that still exists.
/// libgit2 does not list a folder whose files are not all written yet, so pruning misses it.
fn remove_admin_dir(common: &Path, name: &str, path: &Path) -> Result<(), WorkspaceError> {
    let mut parts = Path::new(name).components();
    if !matches!((parts.next(), parts.next()), (Some(Component::Normal(_)), None)) {
        return Ok(());
    }
    let dir = common.join("worktrees").join(name);
    if !fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    if let Ok(text) = fs::read_to_string(dir.join("gitdir")) {
        // `<working tree>/.git`
        let dot_git = PathBuf::from(text.trim());
        let elsewhere = dot_git.parent().is_some_and(|wd| loose_canonical(wd) != loose_canonical(path));
        if elsewhere && fs::symlink_metadata(&dot_git).is_ok() {
            return Ok(());
        }
    }
    tracing::warn!(dir = %dir.display(), "removing the worktree entry a killed workspace creation left");
    let _deleting = ADMIN.write();
    remove_tree(&dir)
}

/// Deletes a workspace folder without following symlinks out of it.
pub(super) fn remove_tree(path: &Path) -> Result<(), WorkspaceError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(WorkspaceError::io(path)(e)),
    };
    if !meta.is_dir() {
        return fs::remove_file(path).map_err(WorkspaceError::io(path));
    }
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            // Tools such as Go's module cache leave read-only folders; make them writable and retry.
            make_writable(path);
            fs::remove_dir_all(path).map_err(WorkspaceError::io(path))
        }
        other => other.map_err(WorkspaceError::io(path)),
    }
}

fn make_writable(dir: &Path) {
    let Ok(meta) = fs::symlink_metadata(dir) else { return };
    if !meta.is_dir() {
        return;
    }
    let mut perms = meta.permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    let _ = fs::set_permissions(dir, perms);
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        make_writable(&entry.path());
    }
}

/// Drops the main repository's entries for this workspace that no longer hold its checkout: the
/// one of its recorded name and `name` (the one a creation now uses), looked up directly; with
/// neither (a record written before names were recorded), every entry whose folder is `path`.
/// Failures are logged; a stale entry only blocks the branch.
pub(super) fn prune_stale(rec: &WorkspaceRecord, path: &Path, name: Option<&str>) {
    let Ok(repo) = Repository::open(&rec.repo) else { return };
    let _deleting = ADMIN.write();
    let named: Vec<&str> = rec.worktree_name.as_deref().into_iter().chain(name).collect();
    let listed;
    let names: Vec<&str> = if !named.is_empty() {
        // Looking at every worktree would cost each new or removed session as much as the
        // repository has worktrees.
        named.clone()
    } else {
        let Ok(all) = repo.worktrees() else { return };
        listed = all;
        listed.iter().flatten().collect()
    };
    for name in names {
        let Ok(wt) = repo.find_worktree(name) else { continue };
        let ours = named.contains(&name) || loose_canonical(wt.path()) == loose_canonical(path);
        if !ours || (fs::symlink_metadata(path).is_ok() && wt.validate().is_ok()) {
            continue;
        }
        let mut opts = WorktreePruneOptions::new();
        opts.valid(true).working_tree(true);
        if let Err(e) = wt.prune(Some(&mut opts)) {
            tracing::warn!(repo = %rec.repo.display(), worktree = name, error = %e, "cannot prune worktree");
        }
    }
}

/// Adds the worktree `name` (its folder in `.git/worktrees/`) at `path` on `req.branch`, creating
/// the branch from the base ref when absent; `before_branch` is told the commit just before the
/// branch is made there. On failure what was made is removed, the branch too when made here.
pub(super) fn create_worktree(
    req: &WorkspaceRequest,
    path: &Path,
    name: &str,
    before_branch: impl FnOnce(Oid) -> Result<(), WorkspaceError>,
) -> Result<(), WorkspaceError> {
    let failed = |message: String| WorkspaceError::WorktreeFailed {
        path: path.to_path_buf(),
        branch: req.branch.clone(),
        message,
    };
    let repo = Repository::open(&req.repo).map_err(|e| failed(format!("{}: {}", req.repo.display(), e.message())))?;
    let (branch, made) = match repo.find_branch(&req.branch, BranchType::Local) {
        Ok(b) => (b, false),
        Err(_) => {
            let commit = repo.find_commit(resolve_base(&repo, req)?).map_err(|e| failed(e.message().into()))?;
            before_branch(commit.id())?;
            (repo.branch(&req.branch, &commit, false).map_err(|e| failed(e.message().into()))?, true)
        }
    };
    // A branch made just now is checked out nowhere, so the worktrees need no look (a look at
    // each would cost every new session as much as the repository has worktrees).
    if !made {
        prune_gone_holders(&repo, &req.branch);
        if let Some(at) = checked_out_at(&repo, &req.branch) {
            return Err(WorkspaceError::BranchInUse { branch: req.branch.clone(), path: at });
        }
    }
    let commit = branch.get().peel_to_commit().map_err(|e| failed(e.message().into()))?.id();
    let head = format!("ref: refs/heads/{}\n", req.branch);
    if let Err(e) = add_linked(&repo, path, name, &head, commit) {
        // `add_linked` removed what it made; a branch made just now goes too.
        if made {
            let _adding = ADMIN.read();
            let _ = repo.find_branch(&req.branch, BranchType::Local).and_then(|mut b| b.delete());
        }
        return Err(failed(e.to_string()));
    }
    Ok(())
}

/// The first git with parallel checkout (`checkout.workers`); an older one is not used.
const GIT_MIN_VERSION: (u32, u32) = (2, 32);

/// How long git may take to write one checkout before it is killed.
const GIT_CHECKOUT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The git program that writes checkouts: `git` on PATH when it is at least `GIT_MIN_VERSION`,
/// looked up once per process; none when libgit2 writes them. On Windows libgit2 always does for
/// now: git's writing there is untested (under Wine, the `git` a Windows program finds on PATH is
/// the host's Linux git).
pub(super) fn checkout_git() -> Option<PathBuf> {
    #[cfg(test)]
    if let Some(chosen) = CHOSEN_GIT.with(|c| c.borrow().clone()) {
        return chosen;
    }
    if cfg!(windows) {
        return None;
    }
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND.get_or_init(|| usable_git(Path::new("git"))).clone()
}

fn usable_git(program: &Path) -> Option<PathBuf> {
    let version = repository::version(program)?;
    (version >= GIT_MIN_VERSION).then(|| program.to_path_buf())
}

#[cfg(test)]
thread_local! {
    /// The choice of `with_checkout_git` for this thread.
    static CHOSEN_GIT: std::cell::RefCell<Option<Option<PathBuf>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with the git program `program` writing the checkouts this thread makes, or libgit2
/// with none or with a program that is not a usable git.
#[cfg(test)]
pub(super) fn with_checkout_git<T>(program: Option<&Path>, f: impl FnOnce() -> T) -> T {
    let chosen = program.and_then(usable_git);
    let before = CHOSEN_GIT.with(|c| c.replace(Some(chosen)));
    let out = f();
    CHOSEN_GIT.with(|c| c.replace(before));
    out
}

/// Makes the index and the tracked files of the worktree at `path` match `commit`'s tree, forced:
/// tracked files that differ are written again or removed, untracked ones stay unless one is in
/// the way, and `HEAD` is left alone. git (`read-tree --reset -u`, with its parallel checkout)
/// writes them when it is installed, libgit2 when it is not or when git fails. Both write the
/// index last, once every file is written, so a new checkout cut short has none.
fn write_files(path: &Path, commit: Oid) -> Result<(), git2::Error> {
    if let Some(program) = checkout_git() {
        let sha = commit.to_string();
        let args = [
            // As many workers as cores, for a checkout of at least 100 files; one writes fewer.
            "-c",
            "checkout.workers=0",
            "-c",
            "checkout.thresholdForParallelism=100",
            // Nothing starts a file-system monitor daemon for a worktree it has not used yet.
            "-c",
            "core.fsmonitor=false",
            "read-tree",
            "--reset",
            "-u",
            &sha,
        ];
        match repository::run_in(&program, path, &args, GIT_CHECKOUT_TIMEOUT) {
            Ok(()) => return Ok(()),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "git cannot write the checkout; libgit2 writes it")
            }
        }
    }
    let repo = Repository::open(path)?;
    let target = repo.find_commit(commit)?;
    repo.checkout_tree(target.as_object(), Some(CheckoutBuilder::new().force()))
}

/// A path as git writes it into `gitdir` files: with `/` between its parts on Windows too, where
/// libgit2 reads a backslash in them as part of a name, and finds no work tree.
fn link_text(path: &Path) -> String {
    let text = path.display().to_string();
    if cfg!(windows) {
        text.replace('\\', "/")
    } else {
        text
    }
}

/// Why a linked worktree could not be added.
#[derive(Debug, thiserror::Error)]
enum AddError {
    /// A folder or admin file of it could not be made or written.
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
    /// libgit2 could not write its files and index.
    #[error("{}", .0.message())]
    Checkout(#[from] git2::Error),
}

/// The error of an IO step on `path`.
fn at(path: &Path) -> impl FnOnce(io::Error) -> AddError + '_ {
    move |source| AddError::Io { path: path.to_path_buf(), source }
}

/// Adds the linked worktree `name` of `main` at `path`, laid out as `git worktree add` lays it
/// out: the folder `<common>/worktrees/<name>` with `commondir`, `HEAD` (the text `head`) and
/// `gitdir`, and `<path>/.git` pointing at it; then writes the files and the index at `commit`.
/// `path` must not exist, and its parent must. On failure what it made is removed again.
fn add_linked(main: &Repository, path: &Path, name: &str, head: &str, commit: Oid) -> Result<(), AddError> {
    let admin = main.commondir().join("worktrees").join(name);
    let mut made_admin = false;
    let mut made_path = false;
    let mut add = || -> Result<(), AddError> {
        {
            let _adding = ADMIN.read();
            // Made when missing, and never removed: another creation may be using it.
            let parent = admin.parent().unwrap_or(&admin);
            fs::create_dir_all(parent).map_err(at(parent))?;
            fs::create_dir(&admin).map_err(at(&admin))?;
            made_admin = true;
        }
        fs::create_dir(path).map_err(at(path))?;
        made_path = true;
        let abs_path = repository::canonicalize(path).map_err(at(path))?;
        let abs_admin = repository::canonicalize(&admin).map_err(at(&admin))?;
        let write = |file: &Path, text: String| fs::write(file, text).map_err(at(file));
        write(&admin.join("commondir"), "../..\n".into())?;
        write(&admin.join("HEAD"), head.to_string())?;
        write(&admin.join("gitdir"), format!("{}\n", link_text(&abs_path.join(".git"))))?;
        write(&path.join(".git"), format!("gitdir: {}\n", link_text(&abs_admin)))?;
        Ok(write_files(path, commit)?)
    };
    let result = add();
    if result.is_err() {
        if made_path {
            let _ = remove_tree(path);
        }
        if made_admin {
            let _deleting = ADMIN.write();
            let _ = remove_tree(&admin);
        }
    }
    result
}

/// The commit of `base_ref`: a local branch, `origin/<base_ref>`, or any revision git understands.
pub(super) fn resolve_base(repo: &Repository, req: &WorkspaceRequest) -> Result<Oid, WorkspaceError> {
    let root = repo.workdir().unwrap_or(repo.path());
    repository::resolve_branch(root, &req.base_ref)
        .ok()
        .and_then(|sha| Oid::from_str(&sha).ok())
        .or_else(|| repo.revparse_single(&req.base_ref).ok()?.peel_to_commit().ok().map(|c| c.id()))
        .filter(|_| !req.base_ref.is_empty())
        .ok_or_else(|| WorkspaceError::BaseRefNotFound { repo: req.repo.clone(), base_ref: req.base_ref.clone() })
}

/// Prunes the worktree entries that hold `branch` although their folder is gone (deleted by hand,
/// or a data dir thrown away), as `git worktree prune` would; a locked entry is kept.
fn prune_gone_holders(repo: &Repository, branch: &str) {
    let wanted = format!("refs/heads/{branch}");
    let common = repo.commondir().to_path_buf();
    let Ok(names) = repo.worktrees() else { return };
    for name in names.iter().flatten() {
        let Ok(wt) = repo.find_worktree(name) else { continue };
        let holds = head_is(&common.join("worktrees").join(name).join("HEAD"), &wanted);
        let locked = !matches!(wt.is_locked(), Ok(git2::WorktreeLockStatus::Unlocked));
        if !holds || locked || fs::symlink_metadata(wt.path()).is_ok() {
            continue;
        }
        let _deleting = ADMIN.write();
        match wt.prune(Some(WorktreePruneOptions::new().valid(true))) {
            Ok(()) => {
                tracing::info!(worktree = name, path = %wt.path().display(), branch, "pruned a worktree entry whose folder is gone")
            }
            Err(e) => tracing::warn!(worktree = name, error = %e, "cannot prune a worktree entry whose folder is gone"),
        }
    }
}

/// Where `branch` is checked out: the main working tree or any linked worktree, stale ones included
/// (git refuses those too until they are pruned).
pub(super) fn checked_out_at(repo: &Repository, branch: &str) -> Option<PathBuf> {
    let wanted = format!("refs/heads/{branch}");
    let common = repo.commondir();
    if !repo.is_bare() && head_is(&common.join("HEAD"), &wanted) {
        let main = if common.file_name().is_some_and(|n| n == ".git") { common.parent() } else { None };
        return Some(main.unwrap_or(common).to_path_buf());
    }
    let names = repo.worktrees().ok()?;
    names.iter().flatten().find_map(|name| {
        let wt = repo.find_worktree(name).ok()?;
        head_is(&common.join("worktrees").join(name).join("HEAD"), &wanted).then(|| wt.path().to_path_buf())
    })
}

/// Whether the `HEAD` file `file` points at the ref `wanted` (`refs/heads/…`).
fn head_is(file: &Path, wanted: &str) -> bool {
    fs::read_to_string(file).is_ok_and(|t| t.trim().strip_prefix("ref:").map(str::trim) == Some(wanted))
}

/// Clones the main checkout into `path` and checks out `req.branch`; origin becomes the main
/// repository's origin (or the main checkout itself when it has none).
pub(super) fn create_clone(req: &WorkspaceRequest, path: &Path) -> Result<(), WorkspaceError> {
    let result = clone_into(req, path);
    if result.is_err() {
        let _ = remove_tree(path);
    }
    result
}

fn clone_into(req: &WorkspaceRequest, path: &Path) -> Result<(), WorkspaceError> {
    let failed = |message: &str| WorkspaceError::CloneFailed {
        repo: req.repo.clone(),
        path: path.to_path_buf(),
        message: message.into(),
    };
    let main = Repository::open(&req.repo).map_err(|e| failed(e.message()))?;
    let target = match main.find_branch(&req.branch, BranchType::Local) {
        Ok(b) => b.get().target().ok_or_else(|| failed("the branch points at no commit"))?,
        Err(_) => resolve_base(&main, req)?,
    };
    let source = main.workdir().unwrap_or(main.path());
    let source = crate::repository::canonicalize(source).unwrap_or_else(|_| source.components().collect());
    let url = source.to_str().ok_or_else(|| failed("the repository path is not UTF-8"))?;
    // Checking out happens once, below, on the session's branch.
    let mut none = CheckoutBuilder::new();
    none.dry_run();
    let clone = RepoBuilder::new().with_checkout(none).clone(url, path).map_err(|e| failed(e.message()))?;

    if clone.find_commit(target).is_err() {
        // The base is not under refs/heads or refs/tags of the main repository (`origin/x`, say).
        clone
            .remote_anonymous(url)
            .and_then(|mut r| r.fetch(&[target.to_string()], None, None))
            .map_err(|e| failed(&format!("cannot fetch {target} from the main checkout: {}", e.message())))?;
    }
    let commit = clone.find_commit(target).map_err(|e| failed(e.message()))?;
    if clone.find_branch(&req.branch, BranchType::Local).is_err() {
        clone.branch(&req.branch, &commit, false).map_err(|e| failed(e.message()))?;
    }
    clone.set_head(&format!("refs/heads/{}", req.branch)).map_err(|e| failed(e.message()))?;
    write_files(path, target).map_err(|e| failed(e.message()))?;

    let origin = main.find_remote("origin").ok().and_then(|r| r.url().map(str::to_string));
    if let Some(origin) = origin {
        clone.remote_set_url("origin", &origin).map_err(|e| failed(e.message()))?;
    }
    Ok(())
}

/// Adds a linked worktree named `name` (in the main repository's `.git/worktrees/`) at `path`,
/// its `HEAD` detached at `commit`: the files and the index written, no branch made or held.
/// The admin files are written the way git writes them, so git and libgit2 both read the result.
/// On failure what was made is removed again.
pub(super) fn add_detached_worktree(repo: &Path, path: &Path, name: &str, commit: Oid) -> Result<(), WorkspaceError> {
    let failed = |message: String| WorkspaceError::WorktreeFailed {
        path: path.to_path_buf(),
        branch: format!("(detached at {commit})"),
        message,
    };
    let main = Repository::open(repo).map_err(|e| failed(format!("{}: {}", repo.display(), e.message())))?;
    main.find_commit(commit).map_err(|e| failed(e.message().to_string()))?;
    add_linked(&main, path, name, &format!("{commit}\n"), commit).map_err(|e| failed(e.to_string()))
}

/// Why the checkout a request asks for cannot be made at `path`, in the words of its kind.
pub(super) fn cannot_make(req: &WorkspaceRequest, path: &Path, message: String) -> WorkspaceError {
    match req.kind {
        WorkspaceKind::Clone => {
            WorkspaceError::CloneFailed { repo: req.repo.clone(), path: path.to_path_buf(), message }
        }
        WorkspaceKind::Worktree | WorkspaceKind::Readonly | WorkspaceKind::None => {
            WorkspaceError::WorktreeFailed { path: path.to_path_buf(), branch: req.branch.clone(), message }
        }
    }
}

/// A `readonly` checkout: a linked worktree of the main repository at the base, on no branch.
/// What the agent changes or commits there reaches no branch and goes with the workspace.
pub(super) fn create_readonly(req: &WorkspaceRequest, path: &Path, name: &str) -> Result<(), WorkspaceError> {
    let main = Repository::open(&req.repo).map_err(|e| cannot_make(req, path, e.message().to_string()))?;
    let commit = resolve_base(&main, req)?;
    add_detached_worktree(&req.repo, path, name, commit)
}

/// Moves a detached worktree at `path` to `commit` in place: only the tracked files that differ
/// are written (or removed); untracked files, such as what setup commands made, stay.
pub(super) fn move_detached(path: &Path, commit: Oid) -> Result<(), WorkspaceError> {
    let failed = |message: String| WorkspaceError::WorktreeFailed {
        path: path.to_path_buf(),
        branch: format!("(detached at {commit})"),
        message,
    };
    let wt = Repository::open(path).map_err(|e| failed(e.message().to_string()))?;
    wt.find_commit(commit).map_err(|e| failed(e.message().to_string()))?;
    write_files(path, commit).map_err(|e| failed(e.message().to_string()))?;
    wt.set_head_detached(commit).map_err(|e| failed(e.message().to_string()))
}

/// Points the linked worktree `name` of the main repository at its folder's new place `path`
/// (after the folder was renamed) and, with `branch`, puts that branch in its `HEAD`. Each file
/// is replaced atomically, so a crash leaves either the old content or the new one.
pub(super) fn adopt_worktree(repo: &Path, name: &str, path: &Path, branch: Option<&str>) -> Result<(), WorkspaceError> {
    let failed = |message: String| WorkspaceError::WorktreeFailed {
        path: path.to_path_buf(),
        branch: branch.unwrap_or("(detached)").to_string(),
        message,
    };
    let main = Repository::open(repo).map_err(|e| failed(format!("{}: {}", repo.display(), e.message())))?;
    let admin = main.commondir().join("worktrees").join(name);
    let abs_path = repository::canonicalize(path).map_err(|e| failed(format!("{}: {e}", path.display())))?;
    let replace = |file: &str, text: String| {
        let tmp = admin.join(format!("{file}.aoctl-tmp"));
        fs::write(&tmp, text)
            .and_then(|()| fs::rename(&tmp, admin.join(file)))
            .map_err(|e| failed(format!("{}: {e}", admin.join(file).display())))
    };
    replace("gitdir", format!("{}\n", link_text(&abs_path.join(".git"))))?;
    if let Some(branch) = branch {
        replace("HEAD", format!("ref: refs/heads/{branch}\n"))?;
    }
    Ok(())
}

/// Removes a linked worktree made by `add_detached_worktree`: its folder, and its entry in the
/// main repository unless the entry now belongs to a checkout elsewhere that still exists.
pub(super) fn remove_worktree(repo: &Path, path: &Path, name: &str) -> Result<(), WorkspaceError> {
    remove_tree(path)?;
    let Ok(main) = Repository::open(repo) else { return Ok(()) };
    remove_admin_dir(main.commondir(), name, path)
}
