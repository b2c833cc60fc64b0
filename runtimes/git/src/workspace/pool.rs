//! A project's warm pool: worktrees checked out ahead of time at the base branch's head, on a
//! detached `HEAD`, with the project's setup already run, so that a new session's workspace is a
//! branch made and a folder renamed instead of a checkout.
//!
//! Entries live at `<root>/<project>/_pool/<id>` (no session name starts with `_`), each with a
//! record `<id>.json` written before anything is made. An entry is `making` (being made, moved to
//! a new base or removed; one found so at the start of a round was left by a crash and is
//! removed), `ready`, or `claimed` by a session. A claim is crash-safe:
//! 1. the session's record names the entry (`poolEntry`) and the commit its branch is made at;
//! 2. the entry's record says `claimed` by that session;
//! 3. the branch is made at the entry's commit;
//! 4. the folder is renamed into the session's place — the one step that moves it;
//! 5. the worktree's admin files are pointed at the new place and its `HEAD` at the branch;
//! 6. the entry's record goes; 7. the session's record says the checkout is done.
//!
//! Interrupted before 4, the folder is still the pool's and the claim is undone (the branch goes
//! if it is still where it was made); after 4 it is the session's and 5–7 are finished. Either
//! way the folder is in one place only, and a pool entry never holds a branch.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aoctl_api::project::SetupSpec;
use aoctl_api::session::WorkspaceKind;
use chrono::{DateTime, Utc};
use git2::{BranchType, Oid, Repository};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::{check_name, checkout, setup, WorkspaceError, WorkspaceRecord, WorkspaceRequest, Workspaces};

/// The folder of a project's pool entries, beside its workspaces.
pub(super) const POOL_DIR: &str = "_pool";

/// What the controller asks of a project's pool.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolRequest {
    pub project: String,
    /// The project's main checkout.
    pub repo: PathBuf,
    /// The branch (or revision) entries are checked out at: the project's default branch.
    pub base_ref: String,
    /// How many ready entries to keep.
    pub size: u32,
    pub setup: Option<SetupSpec>,
}

/// What a round of upkeep left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolReport {
    /// Entries ready to be claimed: at the base's commit, set up with the current setup.
    pub ready: u32,
    /// Whether more work is waiting (an entry to make, move or remove).
    pub more: bool,
}

/// One entry's record, `<id>.json` beside its folder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PoolEntry {
    pub project: String,
    pub id: String,
    pub repo: PathBuf,
    /// The worktree's name in the main repository's `.git/worktrees/`.
    pub worktree_name: String,
    /// The commit the entry is checked out at.
    pub commit: String,
    /// The `PORT` its setup commands saw; the session that claims it keeps it.
    pub port: u16,
    /// The setup it was prepared with, to tell when the project's setup changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<serde_json::Value>,
    #[serde(flatten)]
    pub state: EntryState,
    pub created_at: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub(super) enum EntryState {
    /// Being made, moved to another commit or removed: nobody may claim it.
    Making,
    Ready,
    /// Being claimed by this session (see the module's steps).
    Claimed {
        session: String,
    },
}

/// The per-project locks of the pool: `claims` is held for a claim's steps and for reading or
/// writing entries' records; `tending` for a whole round of upkeep, so one round runs at a time.
#[derive(Debug, Default)]
pub(super) struct PoolLocks {
    claims: Mutex<BTreeMap<String, Arc<Mutex<()>>>>,
    tending: Mutex<BTreeMap<String, Arc<Mutex<()>>>>,
}

fn lock_of(map: &Mutex<BTreeMap<String, Arc<Mutex<()>>>>, project: &str) -> Arc<Mutex<()>> {
    map.lock().entry(project.to_string()).or_default().clone()
}

/// What one round decided to do once the records were read.
enum Work {
    Remove(PoolEntry),
    Refresh(PoolEntry),
    Make(PoolEntry),
}

/// Whether an entry's folder is a complete checkout on a detached `HEAD` (libgit2 writes the
/// index last, so one without it was cut short).
fn healthy_entry(path: &Path) -> bool {
    Repository::open(path)
        .is_ok_and(|r| r.is_worktree() && r.head_detached().unwrap_or(false) && r.path().join("index").is_file())
}

/// The setup as its JSON, to compare what an entry was prepared with.
fn setup_value(setup: &Option<SetupSpec>) -> Option<serde_json::Value> {
    setup.as_ref().and_then(|s| serde_json::to_value(s).ok())
}

impl Workspaces {
    fn pool_dir(&self, project: &str) -> PathBuf {
        self.root.join(project).join(POOL_DIR)
    }

    fn entry_path(&self, project: &str, id: &str) -> PathBuf {
        self.pool_dir(project).join(id)
    }

    fn entry_record_path(&self, project: &str, id: &str) -> PathBuf {
        self.pool_dir(project).join(format!("{id}.json"))
    }

    /// The records of a project's pool entries, sorted by id.
    pub(super) fn pool_entries(&self, project: &str) -> Result<Vec<PoolEntry>, WorkspaceError> {
        let dir = self.pool_dir(project);
        let files = match fs::read_dir(&dir) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(WorkspaceError::io(&dir)(e)),
        };
        let mut out = vec![];
        for file in files.flatten() {
            let name = file.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_suffix(".json") else { continue };
            let path = file.path();
            let parsed = fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_slice::<PoolEntry>(&t).map_err(|e| e.to_string()));
            match parsed {
                Ok(e) if e.id == id && e.project == project => out.push(e),
                Ok(_) => tracing::warn!(file = %path.display(), "skipping a pool record for another entry"),
                Err(e) => tracing::warn!(file = %path.display(), error = %e, "skipping an unreadable pool record"),
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    pub(super) fn write_entry(&self, entry: &PoolEntry) -> Result<(), WorkspaceError> {
        let file = self.entry_record_path(&entry.project, &entry.id);
        let tmp = file.with_extension("json.tmp");
        let text = serde_json::to_vec_pretty(entry)
            .map_err(|e| WorkspaceError::Io { path: file.clone(), source: e.into() })?;
        fs::write(&tmp, text).map_err(WorkspaceError::io(&tmp))?;
        fs::rename(&tmp, &file).map_err(WorkspaceError::io(&file))
    }

    fn delete_entry_record(&self, project: &str, id: &str) -> Result<(), WorkspaceError> {
        let file = self.entry_record_path(project, id);
        match fs::remove_file(&file) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(WorkspaceError::io(&file)(e)),
            _ => Ok(()),
        }
    }

    /// One round of upkeep of a project's pool: leftovers of a crash are cleared, then at most
    /// one entry is made, moved to the base's new commit, or removed (beyond `size`, or prepared
    /// with another setup). Call again while `more` says so.
    pub fn tend_pool(&self, req: &PoolRequest) -> Result<PoolReport, WorkspaceError> {
        check_name(&req.project)?;
        let tending = lock_of(&self.pool_locks.tending, &req.project);
        let _tending = tending.lock();
        let repo = Repository::open(&req.repo).map_err(|e| WorkspaceError::WorktreeFailed {
            path: req.repo.clone(),
            branch: req.base_ref.clone(),
            message: e.message().to_string(),
        })?;
        let probe = WorkspaceRequest {
            project: req.project.clone(),
            session: String::new(),
            repo: req.repo.clone(),
            branch: String::new(),
            base_ref: req.base_ref.clone(),
            kind: WorkspaceKind::Worktree,
            setup: req.setup.clone(),
            sandbox: false,
            pool: true,
        };
        let base = checkout::resolve_base(&repo, &probe)?.to_string();
        let setup = setup_value(&req.setup);
        let fresh = |e: &PoolEntry| e.state == EntryState::Ready && e.commit == base && e.setup == setup;

        let work = {
            let claims = lock_of(&self.pool_locks.claims, &req.project);
            let _claims = claims.lock();
            let mut entries = vec![];
            for e in self.pool_entries(&req.project)? {
                entries.extend(self.settle_claim(e)?);
            }
            let ready = entries.iter().filter(|e| fresh(e)).count();
            let pending = entries.iter().filter(|e| matches!(e.state, EntryState::Claimed { .. })).count();
            let gone = |e: &PoolEntry| {
                e.state == EntryState::Making
                    || (e.state == EntryState::Ready && !healthy_entry(&self.entry_path(&e.project, &e.id)))
            };
            let stale = |e: &PoolEntry| e.state == EntryState::Ready && !fresh(e);
            let work = if let Some(e) = entries.iter().find(|e| gone(e)) {
                Some(Work::Remove(e.clone()))
            } else if ready > req.size as usize {
                entries.iter().rev().find(|e| fresh(e)).cloned().map(Work::Remove)
            } else if let Some(e) = entries.iter().find(|e| stale(e)) {
                // Moved in place when its files can be kept (same setup); made again otherwise.
                if ready + pending >= req.size as usize || e.setup != setup {
                    Some(Work::Remove(e.clone()))
                } else {
                    Some(Work::Refresh(e.clone()))
                }
            } else if ready + pending < req.size as usize {
                // Never an id used before: a claimed entry's worktree keeps its name in the session.
                let common = repo.commondir().join("worktrees");
                let free = |id: &String| {
                    !entries.iter().any(|e| &e.id == id)
                        && fs::symlink_metadata(common.join(format!("aoctl-{}.{POOL_DIR}.{id}", req.project))).is_err()
                };
                let stamp = Utc::now().timestamp_micros().unsigned_abs();
                let id = (0..).map(|n| format!("{:x}", stamp + n)).find(free).unwrap_or_default();
                let dir = self.pool_dir(&req.project);
                fs::create_dir_all(&dir).map_err(WorkspaceError::io(&dir))?;
                let port = self.take_port(&self.entry_path(&req.project, &id))?;
                Some(Work::Make(PoolEntry {
                    project: req.project.clone(),
                    worktree_name: format!("aoctl-{}.{POOL_DIR}.{id}", req.project),
                    id,
                    repo: req.repo.clone(),
                    commit: base.clone(),
                    port,
                    setup: setup.clone(),
                    state: EntryState::Making,
                    created_at: Utc::now(),
                }))
            } else {
                None
            };
            // Marked before the slow part, so no claim takes it meanwhile.
            if let Some(Work::Remove(e) | Work::Refresh(e) | Work::Make(e)) = &work {
                if e.state != EntryState::Making {
                    self.write_entry(&PoolEntry { state: EntryState::Making, ..e.clone() })?;
                } else if !self.entry_record_path(&e.project, &e.id).exists() {
                    self.write_entry(e)?;
                }
            }
            work
        };

        let done = match work {
            None => None,
            Some(Work::Remove(e)) => {
                self.remove_entry(&e)?;
                None
            }
            Some(Work::Refresh(e)) => {
                let commit = Oid::from_str(&base).map_err(|e| WorkspaceError::Io {
                    path: req.repo.clone(),
                    source: io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
                })?;
                let path = self.entry_path(&e.project, &e.id);
                let prepared = checkout::move_detached(&path, commit).and_then(|()| self.prepare(&e, req));
                if let Err(err) = prepared {
                    self.remove_entry(&e)?;
                    return Err(err);
                }
                Some(PoolEntry { commit: base.clone(), ..e })
            }
            Some(Work::Make(e)) => {
                let commit = Oid::from_str(&e.commit).map_err(|err| WorkspaceError::Io {
                    path: req.repo.clone(),
                    source: io::Error::new(io::ErrorKind::InvalidData, err.to_string()),
                })?;
                let path = self.entry_path(&e.project, &e.id);
                let made = checkout::add_detached_worktree(&req.repo, &path, &e.worktree_name, commit)
                    .and_then(|()| self.prepare(&e, req));
                if let Err(err) = made {
                    self.remove_entry(&e)?;
                    return Err(err);
                }
                Some(e)
            }
        };
        let claims = lock_of(&self.pool_locks.claims, &req.project);
        let _claims = claims.lock();
        if let Some(e) = done {
            self.write_entry(&PoolEntry { state: EntryState::Ready, ..e })?;
        }
        let entries = self.pool_entries(&req.project)?;
        let ready = entries.iter().filter(|e| fresh(e)).count();
        let pending = entries.iter().filter(|e| matches!(e.state, EntryState::Claimed { .. })).count();
        let more = entries.iter().any(|e| !fresh(e) && !matches!(e.state, EntryState::Claimed { .. }))
            || ready + pending < req.size as usize
            || ready > req.size as usize;
        Ok(PoolReport { ready: ready as u32, more })
    }

    /// Removes every entry of a project's pool (the project is gone, or its pool turned off);
    /// an entry being claimed by a session that still names it is left to that session.
    /// Returns how many went.
    pub fn drain_pool(&self, project: &str) -> Result<usize, WorkspaceError> {
        check_name(project)?;
        let tending = lock_of(&self.pool_locks.tending, project);
        let _tending = tending.lock();
        let doomed: Vec<PoolEntry> = {
            let claims = lock_of(&self.pool_locks.claims, project);
            let _claims = claims.lock();
            let mut doomed = vec![];
            for e in self.pool_entries(project)? {
                let Some(e) = self.settle_claim(e)? else { continue };
                if matches!(e.state, EntryState::Claimed { .. }) {
                    continue;
                }
                self.write_entry(&PoolEntry { state: EntryState::Making, ..e.clone() })?;
                doomed.push(e);
            }
            doomed
        };
        for e in &doomed {
            self.remove_entry(e)?;
        }
        // Only a pool that was there takes its project's folder with it: a project that never had
        // one (whose upkeep drains nothing at every look) leaves its sessions' folder alone.
        let dir = self.pool_dir(project);
        if dir.exists() {
            let _ = fs::remove_dir(&dir);
            let _ = fs::remove_dir(self.root.join(project));
        }
        Ok(doomed.len())
    }

    /// Settles an entry claimed by a session that no longer names it (the claim was undone, or
    /// the session removed): back to ready when its folder is still here, its record deleted when
    /// the folder went with the session. `None` when the record went.
    fn settle_claim(&self, mut e: PoolEntry) -> Result<Option<PoolEntry>, WorkspaceError> {
        let EntryState::Claimed { session } = &e.state else { return Ok(Some(e)) };
        let theirs = self.read_record(&e.project, session).ok().flatten();
        if theirs.is_some_and(|r| r.pool_entry.as_deref() == Some(e.id.as_str())) {
            return Ok(Some(e));
        }
        if fs::symlink_metadata(self.entry_path(&e.project, &e.id)).is_err() {
            self.delete_entry_record(&e.project, &e.id)?;
            return Ok(None);
        }
        e.state = EntryState::Ready;
        self.write_entry(&e)?;
        Ok(Some(e))
    }

    /// The projects that have a pool folder.
    pub fn pools(&self) -> Vec<String> {
        let Ok(projects) = fs::read_dir(&self.root) else { return vec![] };
        let mut out: Vec<String> = projects
            .flatten()
            .map(|p| p.file_name().to_string_lossy().into_owned())
            .filter(|p| check_name(p).is_ok() && self.pool_dir(p).is_dir())
            .collect();
        out.sort();
        out
    }

    /// Copies, links and runs the project's setup in an entry; its commands see the entry's
    /// `PORT` and `AOCTL_PROJECT`, and no `AOCTL_SESSION`, which is not known yet.
    fn prepare(&self, e: &PoolEntry, req: &PoolRequest) -> Result<(), WorkspaceError> {
        let Some(spec) = &req.setup else { return Ok(()) };
        let path = self.entry_path(&e.project, &e.id);
        let log = self.pool_dir(&e.project).join(format!("{}.setup.log", e.id));
        let mut env = super::env(&e.project, "", e.port);
        env.remove("AOCTL_SESSION");
        let ctx = setup::Context { workspace: &path, main: &req.repo, log: &log, env, timeout: self.setup_timeout };
        setup::run(spec, &ctx)
    }

    /// Deletes an entry marked `making`: its folder and worktree entry, its log, then its record.
    fn remove_entry(&self, e: &PoolEntry) -> Result<(), WorkspaceError> {
        let path = self.entry_path(&e.project, &e.id);
        checkout::remove_worktree(&e.repo, &path, &e.worktree_name)?;
        let log = self.pool_dir(&e.project).join(format!("{}.setup.log", e.id));
        let _ = fs::remove_file(log);
        let claims = lock_of(&self.pool_locks.claims, &e.project);
        let _claims = claims.lock();
        self.delete_entry_record(&e.project, &e.id)?;
        self.release_port(e.port);
        Ok(())
    }

    /// Takes a ready entry for a new session when one fits the request: a plain worktree on a
    /// branch that does not exist yet, starting at the entry's commit, with the same setup.
    /// `rec` is the session's record of an attempt that has not made anything yet. Returns
    /// whether the workspace is now in place (with its setup done).
    pub(super) fn claim_from_pool(
        &self,
        req: &WorkspaceRequest,
        rec: &mut WorkspaceRecord,
        path: &Path,
    ) -> Result<bool, WorkspaceError> {
        if !req.pool || req.kind != WorkspaceKind::Worktree || req.sandbox {
            return Ok(false);
        }
        let Ok(repo) = Repository::open(&req.repo) else { return Ok(false) };
        if repo.find_branch(&req.branch, BranchType::Local).is_ok() {
            return Ok(false);
        }
        let Ok(base) = checkout::resolve_base(&repo, req) else { return Ok(false) };
        let setup = setup_value(&req.setup);
        let claims = lock_of(&self.pool_locks.claims, &req.project);
        let _claims = claims.lock();
        let entries = self.pool_entries(&req.project)?;
        let Some(mut entry) = entries.into_iter().find(|e| {
            e.state == EntryState::Ready
                && e.commit == base.to_string()
                && e.setup == setup
                && e.repo == req.repo
                && fs::symlink_metadata(self.entry_path(&e.project, &e.id)).is_ok()
        }) else {
            return Ok(false);
        };
        let Ok(commit) = repo.find_commit(base) else { return Ok(false) };
        // 1, 2: both records say who has it before anything moves.
        rec.pool_entry = Some(entry.id.clone());
        rec.worktree_name = Some(entry.worktree_name.clone());
        rec.branch_made_at = Some(base.to_string());
        self.write_record(rec)?;
        entry.state = EntryState::Claimed { session: req.session.clone() };
        self.write_entry(&entry)?;
        // 3: the branch.
        if let Err(e) = repo.branch(&req.branch, &commit, false) {
            tracing::warn!(branch = req.branch, error = %e, "cannot make the branch on a pool entry; checking out instead");
            self.undo_claim(rec)?;
            return Ok(false);
        }
        // 4: the move.
        if let Err(e) = fs::rename(self.entry_path(&entry.project, &entry.id), path) {
            tracing::warn!(path = %path.display(), error = %e, "cannot move a pool entry into place; checking out instead");
            self.undo_claim(rec)?;
            return Ok(false);
        }
        self.release_port(rec.port);
        rec.port = entry.port;
        self.finish_claim(rec, &entry.id, path)?;
        Ok(true)
    }

    /// Goes on with an interrupted claim the session's record names: finished when the folder
    /// was moved, undone when not. Returns whether the workspace is now in place.
    pub(super) fn resume_claim(&self, rec: &mut WorkspaceRecord, path: &Path) -> Result<bool, WorkspaceError> {
        let Some(id) = rec.pool_entry.clone() else { return Ok(false) };
        let claims = lock_of(&self.pool_locks.claims, &rec.project);
        let _claims = claims.lock();
        if fs::symlink_metadata(path).is_ok() {
            let entry = self.pool_entries(&rec.project)?.into_iter().find(|e| e.id == id);
            if let Some(e) = entry.filter(|e| e.state == (EntryState::Claimed { session: rec.session.clone() })) {
                rec.port = e.port;
            }
            tracing::warn!(session = rec.session, entry = id, "finishing a claim of a pool entry a crash interrupted");
            self.finish_claim(rec, &id, path)?;
            return Ok(true);
        }
        tracing::warn!(session = rec.session, entry = id, "undoing a claim of a pool entry a crash interrupted");
        self.undo_claim(rec)?;
        Ok(false)
    }

    /// Steps 5–7 of a claim, each safe to repeat.
    fn finish_claim(&self, rec: &mut WorkspaceRecord, id: &str, path: &Path) -> Result<(), WorkspaceError> {
        let name = rec.worktree_name.clone().unwrap_or_default();
        checkout::adopt_worktree(&rec.repo, &name, path, Some(&rec.branch))?;
        let log = self.pool_dir(&rec.project).join(format!("{id}.setup.log"));
        let to = self.root.join(&rec.project).join(format!("{}.setup.log", rec.session));
        match fs::rename(&log, &to) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(WorkspaceError::io(&log)(e)),
            _ => {}
        }
        self.delete_entry_record(&rec.project, id)?;
        rec.pool_entry = None;
        rec.checkout_done = Some(true);
        // Only ready entries are claimed, and those were set up with the session's setup.
        rec.setup_done = true;
        self.write_record(rec)
    }

    /// Gives an entry whose folder did not move back to the pool, deletes the branch the claim
    /// made when it is still where it was made, and clears the claim from the session's record
    /// (with a port of its own: the entry's stays the entry's).
    pub(super) fn undo_claim(&self, rec: &mut WorkspaceRecord) -> Result<(), WorkspaceError> {
        let Some(id) = rec.pool_entry.clone() else { return Ok(()) };
        if let Some(mut e) = self.pool_entries(&rec.project)?.into_iter().find(|e| e.id == id) {
            if e.state == (EntryState::Claimed { session: rec.session.clone() }) {
                e.state = EntryState::Ready;
                self.write_entry(&e)?;
            }
        }
        if let (Ok(repo), Some(made)) = (Repository::open(&rec.repo), rec.branch_made_at.as_deref()) {
            if let Ok(mut branch) = repo.find_branch(&rec.branch, BranchType::Local) {
                let unused = checkout::checked_out_at(&repo, &rec.branch).is_none();
                if branch.get().target().map(|o| o.to_string()).as_deref() == Some(made) && unused {
                    if let Err(e) = branch.delete() {
                        tracing::warn!(branch = rec.branch, error = %e, "cannot delete the branch of an undone claim");
                    }
                }
            }
        }
        rec.pool_entry = None;
        rec.worktree_name = None;
        rec.branch_made_at = None;
        rec.port = self.take_port(&rec.path)?;
        self.write_record(rec)
    }
}
