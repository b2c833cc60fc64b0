//! Warm pool tests against real git repositories: claims, refills, a base that moves, claims a
//! crash interrupted at each step, removal.

use std::fs;
use std::path::Path;

use aoctl_api::project::SetupSpec;

use super::pool::{EntryState, PoolRequest};
use super::tests::{fixture, git, Fixture};
use super::*;

impl Fixture {
    fn pool(&self, size: u32) -> PoolRequest {
        PoolRequest { project: "demo".into(), repo: self.repo.clone(), base_ref: "main".into(), size, setup: None }
    }

    fn pooled_req(&self, session: &str) -> WorkspaceRequest {
        WorkspaceRequest { pool: true, ..self.req(session) }
    }

    /// Rounds of upkeep until none is left to do; returns how many are ready.
    fn fill(&self, pool: &PoolRequest) -> u32 {
        for _ in 0..50 {
            let r = self.ws.tend_pool(pool).unwrap();
            if !r.more {
                return r.ready;
            }
        }
        panic!("the pool never settled");
    }

    fn branches(&self) -> Vec<String> {
        git(&self.repo, &["branch", "--format=%(refname:short)"]).lines().map(str::to_string).collect()
    }
}

/// The lines of `git worktree list --porcelain` that name a folder.
fn worktree_paths(f: &Fixture) -> Vec<String> {
    f.worktree_list().lines().filter_map(|l| l.strip_prefix("worktree ")).map(str::to_string).collect()
}

fn head_of(path: &Path) -> String {
    git(path, &["rev-parse", "HEAD"])
}

#[test]
fn a_session_claims_a_ready_worktree_and_the_pool_fills_again() {
    let f = fixture();
    let count = f._tmp.path().join("setups");
    let setup = SetupSpec {
        commands: vec![format!(
            "echo made >> {}; echo \"$PORT\" > port.txt; test -z \"$AOCTL_SESSION\"",
            count.display()
        )],
        ..Default::default()
    };
    let pool = PoolRequest { setup: Some(setup.clone()), ..f.pool(2) };
    assert_eq!(f.fill(&pool), 2);
    assert_eq!(f.branches(), ["main"], "pool entries hold no branch");
    let list = f.worktree_list();
    assert_eq!(list.matches("detached").count(), 2, "{list}");
    let entries = f.ws.pool_entries("demo").unwrap();
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().all(|e| e.state == EntryState::Ready && e.commit == head_of(&f.repo)));
    let port_of_first = entries[0].port;

    let req = WorkspaceRequest { setup: Some(setup), ..f.pooled_req("s1") };
    let info = f.ws.ensure(&req).unwrap();
    assert!(info.created && info.pooled);
    assert_eq!(info.path, f.ws.root().join("demo/s1"));
    assert_eq!(info.branch, "demo/s1");
    assert_eq!(info.head_sha.as_deref(), Some(head_of(&f.repo).as_str()));
    assert_eq!(info.port, port_of_first, "the session keeps the port its setup saw");
    assert_eq!(fs::read_to_string(info.path.join("port.txt")).unwrap().trim(), info.port.to_string());
    assert_eq!(git(&info.path, &["branch", "--show-current"]), "demo/s1");
    assert_eq!(git(&info.path, &["status", "--porcelain", "--untracked-files=no"]), "");
    assert_eq!(fs::read_to_string(info.path.join("README.md")).unwrap(), "hello\n");
    let paths = worktree_paths(&f);
    assert!(paths.iter().any(|p| Path::new(p) == crate::repository::canonicalize(&info.path).unwrap()), "{paths:?}");
    assert_eq!(fs::read_to_string(&count).unwrap().lines().count(), 2, "the claim ran no setup");
    let rec = f.ws.get("demo", "s1").unwrap();
    assert!(rec.setup_done && rec.is_checkout_done() && rec.pool_entry.is_none());
    assert!(f.ws.root().join("demo/s1.setup.log").is_file(), "the entry's setup log moved with it");
    // A later look takes the quick path and finds it unchanged.
    let again = f.ws.ensure(&req).unwrap();
    assert!(!again.created && !again.pooled);

    assert_eq!(f.ws.pool_entries("demo").unwrap().len(), 1);
    assert_eq!(f.fill(&pool), 2, "the pool is refilled");
    assert_eq!(fs::read_to_string(&count).unwrap().lines().count(), 3);
    // The session is a worktree like any other: removing it keeps its branch, prunes its entry.
    assert!(f.ws.remove("demo", "s1").unwrap());
    assert!(f.branches().contains(&"demo/s1".to_string()));
    assert_eq!(worktree_paths(&f).len(), 3, "the main checkout and two entries");
}

#[test]
fn sessions_that_do_not_fit_the_pool_check_out_as_before() {
    let f = fixture();
    assert_eq!(f.fill(&f.pool(1)), 1);
    // An existing branch is checked out where it is, not made at the pool's commit.
    git(&f.repo, &["branch", "demo/old"]);
    let old = f.ws.ensure(&f.pooled_req("old")).unwrap();
    assert!(old.created && !old.pooled);
    // Another base.
    git(&f.repo, &["checkout", "-q", "-b", "other"]);
    fs::write(f.repo.join("other.txt"), "x\n").unwrap();
    git(&f.repo, &["add", "."]);
    git(&f.repo, &["commit", "-q", "-m", "other"]);
    git(&f.repo, &["checkout", "-q", "main"]);
    let other = f.ws.ensure(&WorkspaceRequest { base_ref: "other".into(), ..f.pooled_req("o") }).unwrap();
    assert!(!other.pooled && other.path.join("other.txt").is_file());
    // Another setup than the entries were made with.
    let setup = SetupSpec { commands: vec!["true".into()], ..Default::default() };
    let s = f.ws.ensure(&WorkspaceRequest { setup: Some(setup), ..f.pooled_req("s") }).unwrap();
    assert!(!s.pooled);
    // No pool asked for.
    assert!(!f.ws.ensure(&f.req("plain")).unwrap().pooled);
    assert_eq!(f.ws.pool_entries("demo").unwrap().len(), 1, "the entry is still there");
    assert!(f.ws.ensure(&f.pooled_req("fits")).unwrap().pooled);
}

#[test]
fn entries_follow_the_base_and_the_size() {
    let f = fixture();
    assert_eq!(f.fill(&f.pool(3)), 3);
    let old = head_of(&f.repo);
    fs::write(f.repo.join("new.txt"), "new\n").unwrap();
    git(&f.repo, &["add", "."]);
    git(&f.repo, &["commit", "-q", "-m", "second"]);
    let new = head_of(&f.repo);
    // A claim never takes an entry at the old commit.
    let early = f.ws.ensure(&f.pooled_req("early")).unwrap();
    assert!(!early.pooled && early.head_sha.as_deref() == Some(new.as_str()));
    assert_eq!(f.fill(&f.pool(3)), 3);
    for e in f.ws.pool_entries("demo").unwrap() {
        assert_eq!(e.commit, new);
        let path = f.ws.root().join("demo").join(pool::POOL_DIR).join(&e.id);
        assert_eq!(head_of(&path), new);
        assert_eq!(fs::read_to_string(path.join("new.txt")).unwrap(), "new\n");
    }
    assert_ne!(old, new);
    let s = f.ws.ensure(&f.pooled_req("late")).unwrap();
    assert!(s.pooled && s.head_sha.as_deref() == Some(new.as_str()));
    // Smaller, then none.
    assert_eq!(f.fill(&f.pool(1)), 1);
    assert_eq!(f.ws.pool_entries("demo").unwrap().len(), 1);
    assert_eq!(f.fill(&f.pool(0)), 0);
    assert!(f.ws.pool_entries("demo").unwrap().is_empty());
    assert_eq!(f.branches(), ["demo/early", "demo/late", "main"]);
}

#[test]
fn a_changed_setup_makes_the_entries_again() {
    let f = fixture();
    assert_eq!(f.fill(&f.pool(1)), 1);
    let setup = SetupSpec { commands: vec!["echo v2 > setup.txt".into()], ..Default::default() };
    let pool = PoolRequest { setup: Some(setup.clone()), ..f.pool(1) };
    assert_eq!(f.fill(&pool), 1);
    let s = f.ws.ensure(&WorkspaceRequest { setup: Some(setup), ..f.pooled_req("s") }).unwrap();
    assert!(s.pooled);
    assert_eq!(fs::read_to_string(s.path.join("setup.txt")).unwrap(), "v2\n");
}

#[test]
fn a_failing_setup_leaves_no_entry_behind() {
    let f = fixture();
    let setup = SetupSpec { commands: vec!["echo broken; exit 3".into()], ..Default::default() };
    let err = f.ws.tend_pool(&PoolRequest { setup: Some(setup), ..f.pool(1) }).unwrap_err();
    assert!(matches!(err, WorkspaceError::SetupFailed { code: Some(3), .. }), "{err}");
    assert!(f.ws.pool_entries("demo").unwrap().is_empty());
    assert_eq!(worktree_paths(&f).len(), 1, "{}", f.worktree_list());
}

/// Starts a claim of the pool's first entry for `session` by hand and stops after `steps` of
/// its steps (1: the session's record, 2: the entry's, 3: the branch, 4: the move), as a crash
/// would.
fn interrupted_claim(f: &Fixture, session: &str, steps: u32) -> pool::PoolEntry {
    let req = f.pooled_req(session);
    let path = f.ws.root().join("demo").join(session);
    let mut rec = f.ws.claim(&req, &path).unwrap();
    let mut entry = f.ws.pool_entries("demo").unwrap().remove(0);
    rec.pool_entry = Some(entry.id.clone());
    rec.worktree_name = Some(entry.worktree_name.clone());
    rec.branch_made_at = Some(entry.commit.clone());
    f.ws.write_record(&rec).unwrap();
    if steps >= 2 {
        entry.state = EntryState::Claimed { session: session.into() };
        f.ws.write_entry(&entry).unwrap();
    }
    if steps >= 3 {
        git(&f.repo, &["branch", &req.branch, &entry.commit]);
    }
    if steps >= 4 {
        fs::rename(f.ws.root().join("demo").join(pool::POOL_DIR).join(&entry.id), &path).unwrap();
    }
    entry
}

#[test]
fn a_claim_cut_short_before_the_move_gives_the_entry_back() {
    for steps in 1..=3 {
        let f = fixture();
        assert_eq!(f.fill(&f.pool(1)), 1);
        let entry = interrupted_claim(&f, "s", steps);
        if steps >= 2 {
            // The pool side leaves a claim its session still names alone, and does not count it.
            let r = f.ws.tend_pool(&f.pool(1)).unwrap();
            assert_eq!(r.ready, 0, "steps {steps}");
            assert_eq!(f.ws.pool_entries("demo").unwrap().len(), 1, "steps {steps}: no second entry is made");
        }
        // The session's next look undoes the claim and claims again, this time to the end.
        let info = f.ws.ensure(&f.pooled_req("s")).unwrap();
        assert!(info.pooled, "steps {steps}");
        assert_eq!(git(&info.path, &["branch", "--show-current"]), "demo/s");
        assert!(f.ws.pool_entries("demo").unwrap().is_empty(), "steps {steps}");
        assert_eq!(f.branches(), ["demo/s", "main"]);
        let paths = worktree_paths(&f);
        assert_eq!(paths.len(), 2, "steps {steps}: {paths:?}");
        let admin = crate::repository::canonicalize(&f.repo).unwrap().join(".git/worktrees").join(&entry.worktree_name);
        let gitdir = fs::read_to_string(admin.join("gitdir")).unwrap();
        assert_eq!(Path::new(gitdir.trim()), crate::repository::canonicalize(&info.path).unwrap().join(".git"));
    }
}

#[test]
fn a_claim_cut_short_after_the_move_is_finished_never_shared() {
    let f = fixture();
    assert_eq!(f.fill(&f.pool(1)), 1);
    let entry = interrupted_claim(&f, "s", 4);
    // The pool side neither takes it back nor prunes its worktree entry: the folder moved.
    let r = f.ws.tend_pool(&f.pool(1)).unwrap();
    assert_eq!(r.ready, 0);
    let admin = crate::repository::canonicalize(&f.repo).unwrap().join(".git/worktrees").join(&entry.worktree_name);
    assert!(admin.is_dir());
    let info = f.ws.ensure(&f.pooled_req("s")).unwrap();
    assert!(info.created && info.pooled);
    assert_eq!(info.port, entry.port);
    assert_eq!(git(&info.path, &["branch", "--show-current"]), "demo/s");
    assert_eq!(git(&info.path, &["status", "--porcelain"]), "");
    assert!(f.ws.pool_entries("demo").unwrap().iter().all(|e| e.id != entry.id));
    assert_eq!(f.fill(&f.pool(1)), 1, "a new entry replaces it");
}

#[test]
fn a_session_removed_in_the_middle_of_a_claim() {
    // Before the move: the entry goes back to the pool whole.
    let f = fixture();
    assert_eq!(f.fill(&f.pool(1)), 1);
    interrupted_claim(&f, "s", 3);
    assert!(f.ws.remove("demo", "s").unwrap());
    assert_eq!(f.ws.tend_pool(&f.pool(1)).unwrap().ready, 1);
    assert_eq!(f.branches(), ["main"], "the claim's branch went with it");
    assert!(f.ws.ensure(&f.pooled_req("t")).unwrap().pooled);

    // After the move: the folder was the session's and goes with it; the pool makes a new one.
    let f = fixture();
    assert_eq!(f.fill(&f.pool(1)), 1);
    interrupted_claim(&f, "s", 4);
    assert!(f.ws.remove("demo", "s").unwrap());
    assert_eq!(worktree_paths(&f).len(), 1, "{}", f.worktree_list());
    assert_eq!(f.fill(&f.pool(1)), 1);
    assert_eq!(worktree_paths(&f).len(), 2);
}

#[test]
fn an_entry_left_half_made_is_removed_and_made_again() {
    let f = fixture();
    assert_eq!(f.fill(&f.pool(1)), 1);
    let mut e = f.ws.pool_entries("demo").unwrap().remove(0);
    e.state = EntryState::Making;
    f.ws.write_entry(&e).unwrap();
    fs::remove_file(f.ws.root().join("demo").join(pool::POOL_DIR).join(&e.id).join("README.md")).unwrap();
    assert_eq!(f.fill(&f.pool(1)), 1);
    let now = f.ws.pool_entries("demo").unwrap();
    assert_eq!(now.len(), 1);
    let path = f.ws.root().join("demo").join(pool::POOL_DIR).join(&now[0].id);
    assert!(path.join("README.md").is_file());
    assert_eq!(worktree_paths(&f).len(), 2, "{}", f.worktree_list());
}

#[test]
fn draining_removes_every_entry_and_its_worktree() {
    let f = fixture();
    assert_eq!(f.fill(&f.pool(3)), 3);
    let s = f.ws.ensure(&f.pooled_req("s")).unwrap();
    assert!(s.pooled);
    assert_eq!(f.ws.pools(), ["demo"]);
    assert_eq!(f.ws.drain_pool("demo").unwrap(), 2);
    assert!(f.ws.pools().is_empty());
    assert!(!f.ws.root().join("demo").join(pool::POOL_DIR).exists());
    let paths = worktree_paths(&f);
    assert_eq!(paths.len(), 2, "the main checkout and the session: {paths:?}");
    assert!(s.path.join("README.md").is_file(), "the session's workspace stays");
    assert_eq!(f.ws.drain_pool("demo").unwrap(), 0);
}
