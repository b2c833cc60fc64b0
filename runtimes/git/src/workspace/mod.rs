//! Workspaces: a git worktree (or a clone) per session, with the project's setup applied; for
//! sessions whose agent runs in a container, a sandboxed checkout instead (see `sandbox`).
//!
//! Every workspace lives at `<root>/<project>/<session>`, where the root is a folder the controller
//! owns (`<data dir>/workspaces`), never inside the user's checkout. Next to it, `<session>.json`
//! records what was created and marks the folder as the controller's: nothing without a record is
//! ever removed. `<session>.setup.log` keeps the output of the setup commands, and a sandbox's
//! git folder is `<session>.git`.

mod checkout;
mod diff;
mod memo;
mod pool;
#[cfg(test)]
mod pool_tests;
mod sandbox;
#[cfg(test)]
mod sandbox_tests;
mod setup;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aoctl_api::project::SetupSpec;
use aoctl_api::session::WorkspaceKind;
use chrono::{DateTime, Utc};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

pub use diff::{WorkspaceDiff, DIFF_LIMIT};
pub use pool::{PoolReport, PoolRequest};
pub use sandbox::{Sandbox, CONTAINER_GIT_DIR, GITFILE, READ_ONLY_PARTS};

/// Whether a checkout of `kind` is a linked worktree of the main repository (with an entry in
/// its `.git/worktrees/`).
pub(crate) fn linked(kind: WorkspaceKind) -> bool {
    matches!(kind, WorkspaceKind::Worktree | WorkspaceKind::Readonly)
}

/// How long one setup command may run before it is killed.
pub(crate) const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// What the controller asks for: one session's checkout.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkspaceRequest {
    pub project: String,
    pub session: String,
    /// The project's main checkout.
    pub repo: PathBuf,
    /// The session's branch; empty for a kind without one (`readonly`, `none`).
    pub branch: String,
    /// Where the branch starts when it does not exist yet (a `readonly` checkout's commit).
    pub base_ref: String,
    pub kind: WorkspaceKind,
    pub setup: Option<SetupSpec>,
    /// A sandboxed checkout (the agent runs in a container): the session's git folder is its own,
    /// outside the work tree, and its branch reaches the main repository only through `ensure`.
    /// With `kind: worktree` it borrows the main repository's objects, with `clone` it copies them.
    pub sandbox: bool,
    /// The project keeps a warm pool: a new plain worktree may be claimed from it (see `pool`).
    pub pool: bool,
}

/// A workspace ready for an agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceInfo {
    pub project: String,
    pub session: String,
    pub path: PathBuf,
    /// The branch checked out in the workspace.
    pub branch: String,
    pub head_sha: Option<String>,
    /// The `PORT` the session's servers should listen on.
    pub port: u16,
    /// Whether this call created the checkout.
    pub created: bool,
    /// For a sandboxed checkout, what its container mounts and where its branch goes.
    pub sandbox: Option<Sandbox>,
    /// Why the sandbox's branch could not be moved to the main repository at this look.
    pub sync_error: Option<String>,
    /// Whether this call took the checkout from the project's warm pool.
    pub pooled: bool,
}

impl WorkspaceInfo {
    /// The environment the session's processes get: `PORT`, `AOCTL_SESSION`, `AOCTL_PROJECT`.
    pub fn env(&self) -> BTreeMap<String, String> {
        env(&self.project, &self.session, self.port)
    }
}

/// What was created for a session, stored as JSON next to its workspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceRecord {
    pub project: String,
    pub session: String,
    pub path: PathBuf,
    pub repo: PathBuf,
    pub branch: String,
    pub base_ref: String,
    pub kind: WorkspaceKind,
    /// The worktree's name in the main repository's `.git/worktrees/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_name: Option<String>,
    pub port: u16,
    pub setup_done: bool,
    pub created_at: DateTime<Utc>,
    /// Whether the checkout is complete: written `false` before anything is created and `true`
    /// once it is. A record that still says `false` was left by an interrupted creation, whose
    /// leftovers are ours to remove since no agent has used them. Absent in records written
    /// before this field existed; those set `setup_done` only after a complete checkout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkout_done: Option<bool>,
    /// The commit the creation in progress made the branch at, written just before the branch is
    /// made: an interrupted creation deletes that branch again if it still points there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_made_at: Option<String>,
    /// A sandboxed checkout: its git folder is `<session>.git` next to the workspace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sandbox: bool,
    /// The pool entry being claimed for this workspace (see `pool`), until the claim is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_entry: Option<String>,
}

impl WorkspaceRecord {
    /// Whether the checkout was completed (see `checkout_done`).
    pub(crate) fn is_checkout_done(&self) -> bool {
        self.checkout_done.unwrap_or(self.setup_done)
    }

    /// The environment the session's processes get: `PORT`, `AOCTL_SESSION`, `AOCTL_PROJECT`.
    pub(crate) fn env(&self) -> BTreeMap<String, String> {
        env(&self.project, &self.session, self.port)
    }
}

/// `PORT`, `AOCTL_SESSION` and `AOCTL_PROJECT` for a session.
pub(crate) fn env(project: &str, session: &str, port: u16) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("AOCTL_PROJECT".to_string(), project.to_string()),
        ("AOCTL_SESSION".to_string(), session.to_string()),
        ("PORT".to_string(), port.to_string()),
    ])
}

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("invalid name `{name}`: {message}")]
    InvalidName { name: String, message: String },
    #[error("{repo}: base ref `{base_ref}` not found (neither a local branch, nor on origin, nor a revision)")]
    BaseRefNotFound { repo: PathBuf, base_ref: String },
    #[error("branch `{branch}` is already checked out at {path}")]
    BranchInUse { branch: String, path: PathBuf },
    #[error("worktree {path} (branch `{branch}`): {message}")]
    WorktreeFailed { path: PathBuf, branch: String, message: String },
    #[error("clone of {repo} into {path}: {message}")]
    CloneFailed { repo: PathBuf, path: PathBuf, message: String },
    #[error("sandboxed checkout {path} (branch `{branch}`): {message}")]
    SandboxFailed { path: PathBuf, branch: String, message: String },
    #[error("workspace {path} was made {made}, and {wanted} needs {needs}; delete the session (its branch is kept) and create it again")]
    LayoutChanged { path: PathBuf, made: &'static str, wanted: &'static str, needs: &'static str },
    #[error("setup command `{command}` {}; last output:\n{tail}", exit_text(.code))]
    SetupFailed { command: String, code: Option<i32>, tail: String },
    #[error("setup {action} `{path}`: {message}")]
    SetupPath { action: &'static str, path: String, message: String },
    /// The session has no complete checkout (not made yet, or being made).
    #[error("{path}: no workspace")]
    NoWorkspace { path: PathBuf },
    #[error("diff of workspace {path}: {message}")]
    DiffFailed { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

fn exit_text(code: &Option<i32>) -> String {
    match code {
        Some(c) => format!("exited with code {c}"),
        None => "was killed".to_string(),
    }
}

impl WorkspaceError {
    /// The CamelCase reason used in conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            WorkspaceError::InvalidName { .. } => "InvalidName",
            WorkspaceError::BaseRefNotFound { .. } => "BaseRefNotFound",
            WorkspaceError::BranchInUse { .. } => "BranchInUse",
            WorkspaceError::WorktreeFailed { .. } => "WorktreeFailed",
            WorkspaceError::CloneFailed { .. } => "CloneFailed",
            WorkspaceError::SandboxFailed { .. } => "SandboxFailed",
            WorkspaceError::LayoutChanged { .. } => "WorkspaceLayoutChanged",
            WorkspaceError::SetupFailed { .. } | WorkspaceError::SetupPath { .. } => "SetupFailed",
            WorkspaceError::NoWorkspace { .. } => "WorkspaceNotFound",
            WorkspaceError::DiffFailed { .. } => "DiffFailed",
            WorkspaceError::Io { .. } => "Io",
        }
    }

    fn io(path: &Path) -> impl FnOnce(io::Error) -> WorkspaceError + '_ {
        move |source| WorkspaceError::Io { path: path.to_path_buf(), source }
    }
}

/// Held while one session's workspace is created or removed.
type SessionLock = Arc<Mutex<()>>;

/// The controller's workspaces, under one root folder.
#[derive(Debug)]
pub struct Workspaces {
    root: PathBuf,
    setup_timeout: Duration,
    /// Serializes port choice and the first write of a record.
    claim: Mutex<()>,
    /// One lock per session: `ensure` and `remove` of a session never overlap in this process, so a
    /// record that says the checkout is unfinished was left by an attempt that is over.
    busy: Mutex<BTreeMap<(String, String), SessionLock>>,
    /// What the last full check of each session's workspace found (see `memo`).
    memos: RwLock<HashMap<(String, String), Arc<memo::Memo>>>,
    /// How many `ensure` calls took the full check (opening repositories), for tests and logs.
    full_checks: AtomicU64,
    /// The commit each sandbox's branch was last moved to in the main repository.
    synced: Mutex<HashMap<(String, String), String>>,
    /// The ports given to workspaces and pool entries, read from their records on first use.
    ports: Mutex<Option<BTreeSet<u16>>>,
    pool_locks: pool::PoolLocks,
}

impl Workspaces {
    /// Workspaces under `root` (`<data dir>/workspaces`), created on first use.
    pub fn new(root: PathBuf) -> Workspaces {
        let root = std::path::absolute(&root).unwrap_or(root);
        Workspaces {
            root,
            setup_timeout: DEFAULT_SETUP_TIMEOUT,
            claim: Mutex::new(()),
            busy: Mutex::default(),
            memos: RwLock::default(),
            full_checks: AtomicU64::new(0),
            synced: Mutex::default(),
            ports: Mutex::default(),
            pool_locks: pool::PoolLocks::default(),
        }
    }

    /// Changes how long one setup command may run.
    #[cfg(test)]
    pub(crate) fn with_setup_timeout(mut self, timeout: Duration) -> Workspaces {
        self.setup_timeout = timeout;
        self
    }

    /// The folder every workspace lives under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Makes the folder every workspace lives under.
    pub fn make_root(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.root)
    }

    /// Whether the folder at `path` (a workspace that was made) is no longer there; `false` when
    /// that cannot be told.
    pub fn is_gone(&self, path: &Path) -> bool {
        !path.try_exists().unwrap_or(true)
    }

    /// Creates the session's workspace, or returns it unchanged when it is already there.
    ///
    /// Once a workspace was found complete, later calls check it in a few `stat`s and read its
    /// `HEAD` themselves (see `memo`); anything changed since sends them to the full check, which
    /// opens the repositories and makes the checkout again when it is gone. For a sandboxed
    /// checkout, each call also moves the session's branch to the main repository when it moved
    /// in the sandbox; `head_sha` is then the main repository's branch.
    pub fn ensure(&self, req: &WorkspaceRequest) -> Result<WorkspaceInfo, WorkspaceError> {
        let mut info = self.ensure_checkout(req)?;
        if let Some(sandbox) = info.sandbox.clone() {
            self.sync(&mut info, &sandbox);
        }
        Ok(info)
    }

    /// Moves a sandbox's branch to the main repository unless it is where it was last moved to.
    fn sync(&self, info: &mut WorkspaceInfo, sandbox: &Sandbox) {
        let key = (info.project.clone(), info.session.clone());
        let last = self.synced.lock().get(&key).cloned();
        if info.head_sha.is_some() && info.head_sha == last {
            return;
        }
        let busy = self.session_lock(&info.project, &info.session);
        let _busy = busy.lock();
        let synced = sandbox::sync(&sandbox.repo, &sandbox.git_dir, &info.branch);
        info.head_sha = synced.head.map(|o| o.to_string());
        match (&synced.error, &info.head_sha) {
            (None, Some(head)) => {
                self.synced.lock().insert(key, head.clone());
            }
            _ => {
                self.synced.lock().remove(&key);
            }
        }
        if let Some(e) = &synced.error {
            tracing::warn!(session = %info.session, error = %e, "cannot move the sandbox's branch");
        }
        info.sync_error = synced.error;
    }

    fn ensure_checkout(&self, req: &WorkspaceRequest) -> Result<WorkspaceInfo, WorkspaceError> {
        check_name(&req.project)?;
        check_name(&req.session)?;
        let branch_ok = if req.kind.has_branch() {
            git2::Branch::name_is_valid(&req.branch) == Ok(true)
        } else {
            req.branch.is_empty()
        };
        if !branch_ok {
            return Err(WorkspaceError::InvalidName {
                name: req.branch.clone(),
                message: if req.kind.has_branch() {
                    "not a valid branch name".into()
                } else {
                    format!("a `{}` workspace has no branch", req.kind)
                },
            });
        }
        let key = (req.project.clone(), req.session.clone());
        let memo = self.memos.read().get(&key).cloned();
        if let Some(info) = memo
            .filter(|m| m.rec.sandbox == req.sandbox)
            .and_then(|m| m.check(&self.record_path(&req.project, &req.session)))
        {
            return Ok(info);
        }
        let lock = self.session_lock(&req.project, &req.session);
        let _busy = lock.lock();
        self.full_checks.fetch_add(1, Ordering::Relaxed);
        self.memos.write().remove(&key);
        let dir = self.root.join(&req.project);
        fs::create_dir_all(&dir).map_err(WorkspaceError::io(&dir))?;
        let path = self.path_of(&req.project, &req.session);
        if req.sandbox && !req.kind.has_branch() {
            let message = format!("a `{}` workspace is not available with runtime docker", req.kind);
            return Err(WorkspaceError::SandboxFailed { path, branch: req.branch.clone(), message });
        }
        let git_dir = self.git_dir_of(&req.project, &req.session);
        let mut rec = self.claim(req, &path)?;
        // Unique per session in the main repository's `.git/worktrees/`: labels hold no dots.
        let name = format!("aoctl-{}.{}", req.project, req.session);

        let (mut created, mut pooled) = (false, false);
        let done = rec.is_checkout_done();
        if done && rec.sandbox != req.sandbox {
            let (made, wanted, needs) = if rec.sandbox {
                ("as a sandboxed checkout for runtime docker", "a runtime on the host", "a plain worktree or clone")
            } else {
                ("as a plain worktree or clone", "runtime docker", "a sandboxed checkout")
            };
            return Err(WorkspaceError::LayoutChanged { path, made, wanted, needs });
        }
        let healthy = |rec: &WorkspaceRecord| {
            if rec.kind == WorkspaceKind::None {
                path.is_dir()
            } else if rec.sandbox {
                sandbox::healthy(&path, &git_dir) || sandbox::restore_index(&rec.repo, &path, &git_dir, &rec.branch)
            } else {
                checkout::open_healthy(rec, &path).is_some() || checkout::restore_index(rec, &path)
            }
        };
        if !(done && healthy(&rec)) {
            let resumed = !done && rec.pool_entry.is_some() && self.resume_claim(&mut rec, &path)?;
            pooled = resumed || self.make_checkout(req, &mut rec, done, &path, &git_dir, &name)?;
            created = true;
        }

        if !rec.setup_done {
            if let Some(spec) = &req.setup {
                let log = self.root.join(&rec.project).join(format!("{}.setup.log", rec.session));
                let ctx = setup::Context {
                    workspace: &path,
                    main: &rec.repo,
                    log: &log,
                    env: rec.env(),
                    timeout: self.setup_timeout,
                };
                setup::run(spec, &ctx)?;
            }
            rec.setup_done = true;
            self.write_record(&rec)?;
        }

        let vanished = || WorkspaceError::WorktreeFailed {
            path: path.clone(),
            branch: rec.branch.clone(),
            message: "the checkout vanished while it was being prepared".into(),
        };
        let record_file = self.record_path(&rec.project, &rec.session);
        let (branch, head_sha, sandbox) = if rec.kind == WorkspaceKind::None {
            if !path.is_dir() {
                return Err(vanished());
            }
            (String::new(), None, None)
        } else if rec.sandbox {
            if !sandbox::healthy(&path, &git_dir) {
                return Err(vanished());
            }
            let head = sandbox::read_branch(&git_dir, &rec.branch)?.map(|o| o.to_string());
            let sandbox = Sandbox {
                git_dir: git_dir.clone(),
                objects: (rec.kind == WorkspaceKind::Worktree).then(|| sandbox::objects_dir(&rec.repo)).transpose()?,
                repo: rec.repo.clone(),
            };
            if let Some(memo) = memo::Memo::new(&rec, &record_file, &git_dir, &git_dir, Some(sandbox.clone())) {
                self.memos.write().insert(key, Arc::new(memo));
            }
            (rec.branch.clone(), head, Some(sandbox))
        } else {
            let repo = checkout::open_healthy(&rec, &path).ok_or_else(vanished)?;
            let head = repo.head().ok();
            let branch = head.as_ref().filter(|h| h.is_branch()).and_then(|h| h.shorthand()).unwrap_or(&rec.branch);
            if let Some(memo) = memo::Memo::new(&rec, &record_file, repo.path(), repo.commondir(), None) {
                self.memos.write().insert(key, Arc::new(memo));
            }
            (branch.to_string(), head.as_ref().and_then(|h| h.target()).map(|o| o.to_string()), None)
        };
        Ok(WorkspaceInfo {
            project: rec.project.clone(),
            session: rec.session.clone(),
            path,
            branch,
            head_sha,
            port: rec.port,
            created,
            sandbox,
            sync_error: None,
            pooled,
        })
    }

    /// Makes the session's checkout where there is none, or none that is healthy: claimed from
    /// the project's pool when one fits, checked out otherwise. Returns whether it came from the pool.
    fn make_checkout(
        &self,
        req: &WorkspaceRequest,
        rec: &mut WorkspaceRecord,
        done: bool,
        path: &Path,
        git_dir: &Path,
        name: &str,
    ) -> Result<bool, WorkspaceError> {
        if done {
            if rec.sandbox {
                // Commits the agent made since the last look are not lost with G.
                let synced = sandbox::sync(&rec.repo, git_dir, &rec.branch);
                if let Some(e) = synced.error {
                    tracing::warn!(session = %rec.session, error = %e, "cannot move the branch of a broken sandbox");
                }
            }
            checkout::clear_broken(path, req)?;
            if rec.sandbox {
                checkout::remove_tree(git_dir)?;
            }
        } else {
            // The creation that wrote this record never finished (the process was killed),
            // so ensure never returned the folder: nothing in it is anyone's work.
            checkout::clear_interrupted(rec, path, rec.sandbox.then_some(git_dir), name)?;
        }
        if linked(rec.kind) && !rec.sandbox {
            checkout::prune_stale(rec, path, Some(name));
        }
        rec.repo = req.repo.clone();
        rec.branch = req.branch.clone();
        rec.base_ref = req.base_ref.clone();
        rec.kind = req.kind;
        rec.sandbox = req.sandbox;
        rec.worktree_name = (linked(req.kind) && !req.sandbox).then(|| name.to_string());
        rec.setup_done = false;
        rec.checkout_done = Some(false);
        rec.branch_made_at = None;
        rec.pool_entry = None;
        rec.created_at = Utc::now();
        self.write_record(rec)?;
        if self.claim_from_pool(req, rec, path)? {
            return Ok(true);
        }
        let made_at = |base: git2::Oid| {
            rec.branch_made_at = Some(base.to_string());
            self.write_record(rec)
        };
        match (req.sandbox, req.kind) {
            (true, kind) => sandbox::create(req, path, git_dir, kind == WorkspaceKind::Worktree, made_at)?,
            (false, WorkspaceKind::Worktree) => checkout::create_worktree(req, path, name, made_at)?,
            (false, WorkspaceKind::Clone) => checkout::create_clone(req, path)?,
            (false, WorkspaceKind::Readonly) => checkout::create_readonly(req, path, name)?,
            (false, WorkspaceKind::None) => fs::create_dir_all(path).map_err(WorkspaceError::io(path))?,
        }
        rec.checkout_done = Some(true);
        self.write_record(rec)?;
        Ok(false)
    }

    /// Deletes the session's workspace, its worktree entry (or sandbox git folder, after moving its
    /// branch to the main repository one last time), record and setup log; keeps the branch.
    /// Only a folder with a record is touched. Returns whether anything was removed.
    pub fn remove(&self, project: &str, session: &str) -> Result<bool, WorkspaceError> {
        check_name(project)?;
        check_name(session)?;
        let busy = self.session_lock(project, session);
        let _busy = busy.lock();
        self.memos.write().remove(&(project.to_string(), session.to_string()));
        self.synced.lock().remove(&(project.to_string(), session.to_string()));
        let Some(mut rec) = self.read_record(project, session)? else {
            return Ok(false);
        };
        let path = self.path_of(project, session);
        // A claim a crash interrupted is settled first, so the pool entry's worktree is pruned
        // only when its folder is the session's.
        self.resume_claim(&mut rec, &path)?;
        if rec.sandbox {
            let git_dir = self.git_dir_of(project, session);
            if rec.is_checkout_done() {
                if let Some(e) = sandbox::sync(&rec.repo, &git_dir, &rec.branch).error {
                    tracing::warn!(session, error = %e, "removing a sandbox whose branch could not be moved");
                }
            }
            checkout::remove_tree(&git_dir)?;
        }
        checkout::remove_tree(&path)?;
        if linked(rec.kind) && !rec.sandbox {
            checkout::prune_stale(&rec, &path, None);
        }
        let dir = self.root.join(project);
        for file in [format!("{session}.setup.log"), format!("{session}.json")] {
            match fs::remove_file(dir.join(&file)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(WorkspaceError::io(&dir.join(file))(e)),
                _ => {}
            }
        }
        // The project folder goes when its last workspace does; a folder with anything else stays.
        let _ = fs::remove_dir(&dir);
        self.release_port(rec.port);
        Ok(true)
    }

    /// Every workspace with a record, sorted by project and session.
    pub fn list(&self) -> Result<Vec<WorkspaceRecord>, WorkspaceError> {
        let mut out = Vec::new();
        let projects = match fs::read_dir(&self.root) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(WorkspaceError::io(&self.root)(e)),
        };
        for project in projects.flatten() {
            let name = project.file_name().to_string_lossy().into_owned();
            if !project.file_type().is_ok_and(|t| t.is_dir()) || check_name(&name).is_err() {
                continue;
            }
            let files = fs::read_dir(project.path()).map_err(WorkspaceError::io(&project.path()))?;
            for file in files.flatten() {
                let file_name = file.file_name().to_string_lossy().into_owned();
                let Some(session) = file_name.strip_suffix(".json") else { continue };
                if check_name(session).is_err() {
                    continue;
                }
                match self.read_record(&name, session) {
                    Ok(Some(rec)) => out.push(rec),
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "skipping an unreadable workspace record"),
                }
            }
        }
        out.sort_by(|a, b| (&a.project, &a.session).cmp(&(&b.project, &b.session)));
        Ok(out)
    }

    /// The record of one session's workspace, when there is one.
    #[cfg(test)]
    pub(crate) fn get(&self, project: &str, session: &str) -> Option<WorkspaceRecord> {
        check_name(project).ok()?;
        check_name(session).ok()?;
        self.read_record(project, session).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "unreadable workspace record");
            None
        })
    }

    /// How many `ensure` calls so far took the full check, which opens repositories.
    #[cfg(test)]
    pub(crate) fn full_checks(&self) -> u64 {
        self.full_checks.load(Ordering::Relaxed)
    }

    /// The lock held while one session's workspace is created or removed.
    fn session_lock(&self, project: &str, session: &str) -> SessionLock {
        let mut busy = self.busy.lock();
        // Forget locks nobody holds or waits for, so the map stays as small as the work in flight.
        busy.retain(|_, l| Arc::strong_count(l) > 1);
        busy.entry((project.to_string(), session.to_string())).or_default().clone()
    }

    fn path_of(&self, project: &str, session: &str) -> PathBuf {
        self.root.join(project).join(session)
    }

    /// A sandboxed checkout's git folder, next to its work tree.
    fn git_dir_of(&self, project: &str, session: &str) -> PathBuf {
        self.root.join(project).join(format!("{session}.git"))
    }

    fn record_path(&self, project: &str, session: &str) -> PathBuf {
        self.root.join(project).join(format!("{session}.json"))
    }

    /// The existing record, or a new one with a fresh port, written before anything is created.
    fn claim(&self, req: &WorkspaceRequest, path: &Path) -> Result<WorkspaceRecord, WorkspaceError> {
        let _guard = self.claim.lock();
        if let Some(rec) = self.read_record(&req.project, &req.session)? {
            return Ok(rec);
        }
        if fs::symlink_metadata(path).is_ok() {
            let message = "the folder exists but has no aoctl record; move it away".to_string();
            return Err(checkout::cannot_make(req, path, message));
        }
        let port = self.take_port(path)?;
        let rec = WorkspaceRecord {
            project: req.project.clone(),
            session: req.session.clone(),
            path: path.to_path_buf(),
            repo: req.repo.clone(),
            branch: req.branch.clone(),
            base_ref: req.base_ref.clone(),
            kind: req.kind,
            worktree_name: None,
            port,
            setup_done: false,
            created_at: Utc::now(),
            checkout_done: Some(false),
            branch_made_at: None,
            sandbox: req.sandbox,
            pool_entry: None,
        };
        self.write_record(&rec)?;
        Ok(rec)
    }

    /// A port for a new workspace or pool entry at `path`: free now and given to no other.
    fn take_port(&self, path: &Path) -> Result<u16, WorkspaceError> {
        let mut ports = self.ports.lock();
        let taken = match &mut *ports {
            Some(taken) => taken,
            None => ports.insert(self.ports_in_use()?),
        };
        let port = free_port(taken).map_err(WorkspaceError::io(path))?;
        taken.insert(port);
        Ok(port)
    }

    /// Gives back the port of a workspace or pool entry that went.
    fn release_port(&self, port: u16) {
        if let Some(taken) = &mut *self.ports.lock() {
            taken.remove(&port);
        }
    }

    /// The ports the records on disk hold.
    fn ports_in_use(&self) -> Result<BTreeSet<u16>, WorkspaceError> {
        let mut taken: BTreeSet<u16> = self.list()?.iter().map(|r| r.port).collect();
        for project in self.pools() {
            taken.extend(self.pool_entries(&project)?.iter().map(|e| e.port));
        }
        Ok(taken)
    }

    fn read_record(&self, project: &str, session: &str) -> Result<Option<WorkspaceRecord>, WorkspaceError> {
        let file = self.record_path(project, session);
        let text = match fs::read(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(WorkspaceError::io(&file)(e)),
        };
        let mut rec: WorkspaceRecord = serde_json::from_slice(&text).map_err(|e| WorkspaceError::Io {
            path: file.clone(),
            source: io::Error::new(io::ErrorKind::InvalidData, e),
        })?;
        if rec.project != project || rec.session != session {
            let message = format!("the record is for {}/{}", rec.project, rec.session);
            return Err(WorkspaceError::Io { path: file, source: io::Error::new(io::ErrorKind::InvalidData, message) });
        }
        // The location is the truth: the data dir may have moved since the record was written.
        rec.path = self.path_of(project, session);
        Ok(Some(rec))
    }

    /// Writes the record atomically: a temporary file renamed over the old one.
    fn write_record(&self, rec: &WorkspaceRecord) -> Result<(), WorkspaceError> {
        let file = self.record_path(&rec.project, &rec.session);
        let tmp = file.with_extension("json.tmp");
        let text =
            serde_json::to_vec_pretty(rec).map_err(|e| WorkspaceError::Io { path: file.clone(), source: e.into() })?;
        // The project's folder goes when its last workspace or pool does, which another thread may
        // have done a moment after this one made it.
        if let Some(dir) = file.parent() {
            fs::create_dir_all(dir).map_err(WorkspaceError::io(dir))?;
        }
        fs::write(&tmp, text).map_err(WorkspaceError::io(&tmp))?;
        fs::rename(&tmp, &file).map_err(WorkspaceError::io(&file))
    }
}

/// Refuses names that could leave the root; the API already checks they are DNS-1123 labels.
fn check_name(name: &str) -> Result<(), WorkspaceError> {
    aoctl_api::validate::dns1123_label(name)
        .map_err(|message| WorkspaceError::InvalidName { name: name.to_string(), message: message.into() })
}

/// A TCP port free on 127.0.0.1 right now and not given to another workspace.
fn free_port(taken: &BTreeSet<u16>) -> io::Result<u16> {
    for _ in 0..64 {
        let port = TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port();
        if !taken.contains(&port) {
            return Ok(port);
        }
    }
    Err(io::Error::new(io::ErrorKind::AddrInUse, "no free TCP port on 127.0.0.1"))
}
