//! Workspace tests against real git repositories made with the `git` command in temporary folders.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use aoctl_api::project::SetupSpec;
use aoctl_api::session::WorkspaceKind;

use super::*;

/// Runs git in `dir` without reading the user's or the system's configuration.
pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

pub(super) struct Fixture {
    pub(super) _tmp: tempfile::TempDir,
    pub(super) repo: PathBuf,
    pub(super) ws: Workspaces,
}

/// A repository on `main` with one commit, an ignored `.env` and `node_modules`, and a root.
pub(super) fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    fs::write(repo.join("README.md"), "hello\n").unwrap();
    fs::write(repo.join(".gitignore"), ".env\nnode_modules/\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    fs::write(repo.join(".env"), "SECRET=1\n").unwrap();
    fs::create_dir(repo.join("node_modules")).unwrap();
    fs::write(repo.join("node_modules/dep.js"), "x").unwrap();
    let ws = Workspaces::new(tmp.path().join("data/workspaces"));
    Fixture { repo, ws, _tmp: tmp }
}

impl Fixture {
    pub(super) fn req(&self, session: &str) -> WorkspaceRequest {
        WorkspaceRequest {
            project: "demo".into(),
            session: session.into(),
            repo: self.repo.clone(),
            branch: format!("demo/{session}"),
            base_ref: "main".into(),
            kind: WorkspaceKind::Worktree,
            setup: None,
            sandbox: false,
            pool: false,
        }
    }

    pub(super) fn worktree_list(&self) -> String {
        git(&self.repo, &["worktree", "list", "--porcelain"])
    }
}

#[test]
fn ten_sessions_get_ten_worktrees_and_leave_the_main_checkout_alone() {
    let f = fixture();
    let head = git(&f.repo, &["rev-parse", "HEAD"]);
    let mut ports = BTreeSet::new();
    for i in 0..10 {
        let info = f.ws.ensure(&f.req(&format!("s{i}"))).unwrap();
        assert!(info.created);
        assert_eq!(info.path, f.ws.root().join("demo").join(format!("s{i}")));
        assert_eq!(info.branch, format!("demo/s{i}"));
        assert_eq!(info.head_sha.as_deref(), Some(head.as_str()));
        assert_eq!(fs::read_to_string(info.path.join("README.md")).unwrap(), "hello\n");
        assert_eq!(git(&info.path, &["branch", "--show-current"]), format!("demo/s{i}"));
        assert_eq!(git(&info.path, &["status", "--porcelain"]), "");
        assert!(!info.path.starts_with(&f.repo));
        ports.insert(info.port);
    }
    assert_eq!(ports.len(), 10, "every workspace has its own port");
    assert_eq!(git(&f.repo, &["status", "--porcelain"]), "");
    assert_eq!(git(&f.repo, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&f.repo, &["branch", "--show-current"]), "main");
    let list = f.worktree_list();
    for i in 0..10 {
        assert!(list.contains(&format!("branch refs/heads/demo/s{i}")), "{list}");
    }
    assert_eq!(list.matches("worktree ").count(), 11, "{list}");
    let records = f.ws.list().unwrap();
    assert_eq!(records.len(), 10);
    assert!(records.iter().all(|r| r.kind == WorkspaceKind::Worktree && r.setup_done));
}

#[test]
fn an_existing_branch_is_reused_not_reset() {
    let f = fixture();
    git(&f.repo, &["checkout", "-q", "-b", "demo/old"]);
    fs::write(f.repo.join("work.txt"), "done\n").unwrap();
    git(&f.repo, &["add", "work.txt"]);
    git(&f.repo, &["commit", "-q", "-m", "work"]);
    let tip = git(&f.repo, &["rev-parse", "HEAD"]);
    git(&f.repo, &["checkout", "-q", "main"]);
    let info = f.ws.ensure(&f.req("old")).unwrap();
    assert_eq!(info.head_sha.as_deref(), Some(tip.as_str()));
    assert!(info.path.join("work.txt").exists());
    assert_eq!(git(&f.repo, &["rev-parse", "demo/old"]), tip);
}

#[test]
fn ensure_is_idempotent() {
    let f = fixture();
    let first = f.ws.ensure(&f.req("a")).unwrap();
    fs::write(first.path.join("scratch.txt"), "agent work").unwrap();
    let second = f.ws.ensure(&f.req("a")).unwrap();
    assert!(!second.created);
    assert_eq!(
        (&second.path, &second.branch, &second.head_sha, second.port),
        (&first.path, &first.branch, &first.head_sha, first.port)
    );
    assert_eq!(fs::read_to_string(second.path.join("scratch.txt")).unwrap(), "agent work");
    assert_eq!(f.worktree_list().matches("worktree ").count(), 2);
}

#[test]
fn a_folder_deleted_from_outside_is_recreated() {
    let f = fixture();
    let mut req = f.req("gone");
    req.setup = Some(SetupSpec { commands: vec!["echo $PORT > port.txt".into()], ..Default::default() });
    let first = f.ws.ensure(&req).unwrap();
    fs::remove_dir_all(&first.path).unwrap();
    let again = f.ws.ensure(&req).unwrap();
    assert!(again.created);
    assert_eq!((&again.path, again.port), (&first.path, first.port));
    assert_eq!(fs::read_to_string(again.path.join("port.txt")).unwrap().trim(), first.port.to_string());
    let list = f.worktree_list();
    assert_eq!(list.matches("worktree ").count(), 2, "{list}");
    assert!(!list.contains("prunable"), "{list}");
}

#[test]
fn remove_deletes_folder_and_worktree_and_keeps_the_branch() {
    let f = fixture();
    let mut req = f.req("bye");
    req.setup =
        Some(SetupSpec { symlink: vec!["node_modules".into()], commands: vec!["true".into()], ..Default::default() });
    let info = f.ws.ensure(&req).unwrap();
    assert!(f.ws.remove("demo", "bye").unwrap());
    assert!(!info.path.exists());
    assert!(f.repo.join("node_modules/dep.js").exists(), "the symlink's target survives");
    assert!(!f.worktree_list().contains("bye"), "{}", f.worktree_list());
    git(&f.repo, &["rev-parse", "--verify", "refs/heads/demo/bye"]);
    assert!(f.ws.get("demo", "bye").is_none());
    assert!(!f.ws.root().join("demo/bye.setup.log").exists());
    assert!(!f.ws.remove("demo", "bye").unwrap());
    // The branch is free again: a new workspace picks it up.
    assert!(f.ws.ensure(&req).unwrap().created);
}

#[test]
fn folders_without_a_record_are_never_removed_or_taken_over() {
    let f = fixture();
    let by_hand = f.ws.root().join("demo/mine");
    fs::create_dir_all(&by_hand).unwrap();
    fs::write(by_hand.join("keep.txt"), "x").unwrap();
    assert!(!f.ws.remove("demo", "mine").unwrap());
    assert!(by_hand.join("keep.txt").exists());
    let err = f.ws.ensure(&f.req("mine")).unwrap_err();
    assert_eq!(err.reason(), "WorktreeFailed", "{err}");
    assert!(by_hand.join("keep.txt").exists());
}

#[test]
fn setup_copies_links_and_runs_commands_with_the_port() {
    let f = fixture();
    let mut req = f.req("setup");
    req.setup = Some(SetupSpec {
        copy: vec![".env".into()],
        symlink: vec!["node_modules".into()],
        commands: vec![
            "echo $PORT > port.txt".into(),
            "echo \"$AOCTL_PROJECT/$AOCTL_SESSION\" > who.txt; echo hi".into(),
        ],
    });
    let info = f.ws.ensure(&req).unwrap();
    assert_eq!(fs::read_to_string(info.path.join(".env")).unwrap(), "SECRET=1\n");
    let link = fs::read_link(info.path.join("node_modules")).unwrap();
    assert!(link.is_absolute());
    assert_eq!(link, f.repo.canonicalize().unwrap().join("node_modules"));
    assert_eq!(fs::read_to_string(info.path.join("port.txt")).unwrap().trim(), info.port.to_string());
    assert_eq!(fs::read_to_string(info.path.join("who.txt")).unwrap().trim(), "demo/setup");
    assert!(fs::read_to_string(f.ws.root().join("demo/setup.setup.log")).unwrap().contains("hi"));
    assert_eq!(info.env()["PORT"], info.port.to_string());
    assert_eq!(f.ws.get("demo", "setup").unwrap().env()["AOCTL_SESSION"], "setup");
    // Setup runs once: a second ensure does not run the commands again.
    fs::remove_file(info.path.join("port.txt")).unwrap();
    f.ws.ensure(&req).unwrap();
    assert!(!info.path.join("port.txt").exists());
}

#[test]
fn failed_setup_reports_the_tail_and_runs_again_next_time() {
    let f = fixture();
    let mut req = f.req("flaky");
    let script = "seq 1 50; if [ -f marker ]; then echo fixed; else touch marker; echo broken >&2; exit 3; fi";
    req.setup = Some(SetupSpec { commands: vec![script.into()], ..Default::default() });
    match f.ws.ensure(&req).unwrap_err() {
        WorkspaceError::SetupFailed { command, code, tail } => {
            assert_eq!((command.as_str(), code), (script, Some(3)));
            assert!(tail.ends_with("broken"), "{tail}");
            assert_eq!(tail.lines().count(), 20, "{tail}");
        }
        e => panic!("{e}"),
    }
    assert!(!f.ws.get("demo", "flaky").unwrap().setup_done);
    let info = f.ws.ensure(&req).unwrap();
    assert!(!info.created);
    assert!(fs::read_to_string(f.ws.root().join("demo/flaky.setup.log")).unwrap().contains("fixed"));
    assert!(f.ws.get("demo", "flaky").unwrap().setup_done);
}

#[test]
fn setup_errors_name_the_missing_file_and_the_timeout_kills() {
    let f = fixture();
    let mut req = f.req("missing");
    req.setup = Some(SetupSpec { copy: vec!["config/local.yaml".into()], ..Default::default() });
    let err = f.ws.ensure(&req).unwrap_err();
    assert_eq!(err.reason(), "SetupFailed");
    assert!(err.to_string().contains("config/local.yaml"), "{err}");

    let ws = Workspaces::new(f.ws.root().to_path_buf()).with_setup_timeout(Duration::from_millis(300));
    let mut req = f.req("slow");
    req.setup = Some(SetupSpec { commands: vec!["echo started; sleep 30".into()], ..Default::default() });
    let t = Instant::now();
    match ws.ensure(&req).unwrap_err() {
        WorkspaceError::SetupFailed { code: None, tail, .. } => assert!(tail.contains("started"), "{tail}"),
        e => panic!("{e}"),
    }
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn clones_check_out_the_branch_and_point_origin_upstream() {
    let f = fixture();
    git(&f.repo, &["remote", "add", "origin", "https://github.com/acme/widgets.git"]);
    // A base only on a remote-tracking branch, which a clone does not copy.
    let release = git(&f.repo, &["commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "release"]);
    git(&f.repo, &["update-ref", "refs/remotes/origin/release", &release]);
    let mut req = f.req("cl");
    req.kind = WorkspaceKind::Clone;
    req.base_ref = "release".into();
    let info = f.ws.ensure(&req).unwrap();
    assert!(info.created);
    assert_eq!(info.head_sha.as_deref(), Some(release.as_str()));
    assert_eq!(git(&info.path, &["branch", "--show-current"]), "demo/cl");
    assert_eq!(git(&info.path, &["remote", "get-url", "origin"]), "https://github.com/acme/widgets.git");
    assert_eq!(git(&info.path, &["status", "--porcelain"]), "");
    assert!(info.path.join(".git").is_dir(), "a clone, not a worktree");
    assert!(!f.worktree_list().contains("cl"));
    assert!(!f.ws.ensure(&req).unwrap().created);
    assert!(f.ws.remove("demo", "cl").unwrap());
    assert!(!info.path.exists());
}

#[test]
fn a_clone_without_origin_points_at_the_main_checkout() {
    let f = fixture();
    let mut req = f.req("local");
    req.kind = WorkspaceKind::Clone;
    let info = f.ws.ensure(&req).unwrap();
    assert_eq!(git(&info.path, &["remote", "get-url", "origin"]), f.repo.canonicalize().unwrap().to_str().unwrap());
    assert_eq!(info.head_sha, Some(git(&f.repo, &["rev-parse", "main"])));
}

#[test]
fn errors_have_reasons() {
    let f = fixture();
    let mut req = f.req("nobase");
    req.base_ref = "no-such-ref".into();
    assert_eq!(f.ws.ensure(&req).unwrap_err().reason(), "BaseRefNotFound");
    assert!(git(&f.repo, &["branch", "--list", "demo/nobase"]).is_empty());

    let mut req = f.req("inuse");
    req.branch = "main".into();
    let err = f.ws.ensure(&req).unwrap_err();
    assert_eq!(err.reason(), "BranchInUse", "{err}");

    let first = f.ws.ensure(&f.req("one")).unwrap();
    let mut req = f.req("two");
    req.branch = "demo/one".into();
    match f.ws.ensure(&req).unwrap_err() {
        WorkspaceError::BranchInUse { path, .. } => {
            assert_eq!(path.canonicalize().unwrap(), first.path.canonicalize().unwrap())
        }
        e => panic!("{e}"),
    }

    // A worktree whose folder was deleted by hand no longer holds its branch; a locked one does.
    let gone = f.ws.ensure(&f.req("gone")).unwrap();
    let locked = f.ws.ensure(&f.req("locked")).unwrap();
    git(&f.repo, &["worktree", "lock", locked.path.to_str().unwrap()]);
    for p in [&gone.path, &locked.path] {
        fs::remove_dir_all(p).unwrap();
    }
    let mut req = f.req("three");
    req.branch = "demo/gone".into();
    let again = f.ws.ensure(&req).unwrap();
    assert_eq!(git(&again.path, &["rev-parse", "--abbrev-ref", "HEAD"]), "demo/gone");
    req = f.req("four");
    req.branch = "demo/locked".into();
    assert_eq!(f.ws.ensure(&req).unwrap_err().reason(), "BranchInUse");

    for (project, session) in [("..", "x"), ("demo", "a/b"), ("demo", ".."), ("Demo", "x")] {
        let mut req = f.req("x");
        (req.project, req.session) = (project.into(), session.into());
        assert_eq!(f.ws.ensure(&req).unwrap_err().reason(), "InvalidName");
        assert!(f.ws.remove(project, session).is_err());
    }
    let mut req = f.req("badbranch");
    req.branch = "a..b".into();
    assert_eq!(f.ws.ensure(&req).unwrap_err().reason(), "InvalidName");
}

/// The record `ensure` writes before it creates anything, as a killed creation leaves it.
fn unfinished_record(f: &Fixture, req: &WorkspaceRequest, branch_made_at: Option<String>) -> WorkspaceRecord {
    let rec = WorkspaceRecord {
        project: req.project.clone(),
        session: req.session.clone(),
        path: f.ws.path_of(&req.project, &req.session),
        repo: req.repo.clone(),
        branch: req.branch.clone(),
        base_ref: req.base_ref.clone(),
        kind: req.kind,
        worktree_name: (req.kind == WorkspaceKind::Worktree && !req.sandbox)
            .then(|| format!("aoctl-{}.{}", req.project, req.session)),
        port: 41999,
        setup_done: false,
        created_at: Utc::now(),
        checkout_done: Some(false),
        branch_made_at,
        sandbox: req.sandbox,
        pool_entry: None,
    };
    fs::create_dir_all(f.ws.root().join(&req.project)).unwrap();
    f.ws.write_record(&rec).unwrap();
    rec
}

/// Asserts `path` is a complete, clean checkout of `branch` at main, listed once by git.
fn assert_complete(f: &Fixture, info: &WorkspaceInfo, branch: &str) {
    assert_eq!(fs::read_to_string(info.path.join("README.md")).unwrap(), "hello\n");
    assert_eq!(fs::read_to_string(info.path.join(".gitignore")).unwrap(), ".env\nnode_modules/\n");
    assert_eq!(git(&info.path, &["status", "--porcelain"]), "");
    assert_eq!(git(&info.path, &["branch", "--show-current"]), branch);
    assert_eq!(info.head_sha, Some(git(&f.repo, &["rev-parse", "main"])));
    let list = f.worktree_list();
    assert_eq!(list.matches("worktree ").count(), 2, "{list}");
    assert!(!list.contains("prunable"), "{list}");
    assert!(f.ws.get(&info.project, &info.session).unwrap().is_checkout_done());
}

#[test]
fn leftovers_of_a_killed_worktree_creation_are_cleared_and_the_checkout_made_again() {
    let f = fixture();
    let req = f.req("crash");
    let main = git(&f.repo, &["rev-parse", "main"]);
    let rec = unfinished_record(&f, &req, Some(main.clone()));
    // What libgit2 leaves when killed mid-checkout: the branch it made, an admin folder without
    // HEAD (which libgit2 does not list), a half-written folder without index, and a branch lock.
    git(&f.repo, &["branch", "demo/crash", "main"]);
    let admin = f.repo.join(".git/worktrees/aoctl-demo.crash");
    fs::create_dir_all(&admin).unwrap();
    fs::write(admin.join("gitdir"), format!("{}\n", rec.path.join(".git").display())).unwrap();
    fs::write(admin.join("commondir"), "../..\n").unwrap();
    fs::create_dir_all(&rec.path).unwrap();
    fs::write(rec.path.join(".git"), format!("gitdir: {}\n", admin.display())).unwrap();
    fs::write(rec.path.join("README.md"), "hel").unwrap();
    let lock = f.repo.join(".git/refs/heads/demo/crash.lock");
    fs::write(&lock, format!("{main}\n")).unwrap();

    let info = f.ws.ensure(&req).unwrap();
    assert!(info.created);
    assert_eq!(info.port, 41999, "the record's port is kept");
    assert_complete(&f, &info, "demo/crash");
    assert!(!lock.exists());
    assert!(!f.ws.ensure(&req).unwrap().created);
}

#[test]
fn a_creation_killed_while_making_the_branch_is_made_again() {
    let f = fixture();
    let req = f.req("lock");
    unfinished_record(&f, &req, Some(git(&f.repo, &["rev-parse", "main"])));
    let lock = f.repo.join(".git/refs/heads/demo/lock.lock");
    fs::create_dir_all(lock.parent().unwrap()).unwrap();
    fs::write(&lock, "").unwrap();
    let info = f.ws.ensure(&req).unwrap();
    assert_complete(&f, &info, "demo/lock");
    assert!(!lock.exists());
}

#[test]
fn a_checkout_killed_before_its_index_was_written_is_made_again() {
    let f = fixture();
    let req = f.req("half");
    let first = f.ws.ensure(&req).unwrap();
    // The state of a checkout cut short: files missing or truncated, no index yet, and the
    // record not marked done.
    let mut rec = f.ws.get("demo", "half").unwrap();
    rec.checkout_done = Some(false);
    rec.setup_done = false;
    rec.branch_made_at = first.head_sha.clone();
    f.ws.write_record(&rec).unwrap();
    fs::remove_file(f.repo.join(".git/worktrees/aoctl-demo.half/index")).unwrap();
    fs::remove_file(first.path.join(".gitignore")).unwrap();
    fs::write(first.path.join("README.md"), "he").unwrap();

    let info = f.ws.ensure(&req).unwrap();
    assert!(info.created);
    assert_complete(&f, &info, "demo/half");
}

#[test]
fn a_finished_worktree_that_lost_its_index_gets_it_back_and_keeps_the_work() {
    let f = fixture();
    let req = f.req("noindex");
    let first = f.ws.ensure(&req).unwrap();
    fs::write(first.path.join("README.md"), "hello\nagent\n").unwrap();
    fs::write(first.path.join("scratch.txt"), "agent work").unwrap();
    fs::remove_file(f.repo.join(".git/worktrees/aoctl-demo.noindex/index")).unwrap();

    let info = f.ws.ensure(&req).unwrap();
    assert!(!info.created);
    // (`git` trims the leading space of " M".)
    assert_eq!(git(&info.path, &["status", "--porcelain"]), "M README.md\n?? scratch.txt");
    assert_eq!(fs::read_to_string(info.path.join("scratch.txt")).unwrap(), "agent work");
}

#[test]
fn a_killed_clone_is_made_again() {
    let f = fixture();
    let mut req = f.req("clonecrash");
    req.kind = WorkspaceKind::Clone;
    let rec = unfinished_record(&f, &req, None);
    fs::create_dir_all(&rec.path).unwrap();
    git(&rec.path, &["init", "-q"]);
    fs::write(rec.path.join("README.md"), "h").unwrap();
    let info = f.ws.ensure(&req).unwrap();
    assert!(info.created);
    assert_eq!(fs::read_to_string(info.path.join("README.md")).unwrap(), "hello\n");
    assert_eq!(git(&info.path, &["status", "--porcelain"]), "");
    assert_eq!(git(&info.path, &["branch", "--show-current"]), "demo/clonecrash");
}

#[test]
fn records_of_older_versions_are_done_once_setup_was() {
    let f = fixture();
    let req = f.req("legacy");
    let first = f.ws.ensure(&req).unwrap();
    let file = f.ws.record_path("demo", "legacy");
    let mut json: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    json.as_object_mut().unwrap().remove("checkoutDone");
    json.as_object_mut().unwrap().remove("branchMadeAt");
    fs::write(&file, serde_json::to_vec(&json).unwrap()).unwrap();
    fs::write(first.path.join("scratch.txt"), "agent work").unwrap();
    assert!(f.ws.get("demo", "legacy").unwrap().is_checkout_done());
    assert!(!f.ws.ensure(&req).unwrap().created);
    assert!(first.path.join("scratch.txt").exists());

    // An older version killed mid-checkout left setupDone false: made again.
    json["setupDone"] = false.into();
    fs::write(&file, serde_json::to_vec(&json).unwrap()).unwrap();
    fs::remove_file(f.repo.join(".git/worktrees/aoctl-demo.legacy/index")).unwrap();
    fs::remove_file(first.path.join(".gitignore")).unwrap();
    let info = f.ws.ensure(&req).unwrap();
    assert!(info.created);
    assert!(!info.path.join("scratch.txt").exists());
    assert_complete(&f, &info, "demo/legacy");
}

#[test]
fn a_healthy_workspace_is_checked_without_opening_a_repository() {
    let f = fixture();
    let req = f.req("fast");
    let first = f.ws.ensure(&req).unwrap();
    assert_eq!(f.ws.full_checks(), 1);
    for _ in 0..3 {
        let again = f.ws.ensure(&req).unwrap();
        assert!(!again.created);
        assert_eq!(
            (&again.path, &again.branch, &again.head_sha, again.port),
            (&first.path, &first.branch, &first.head_sha, first.port)
        );
    }
    assert_eq!(f.ws.full_checks(), 1, "the repositories were opened again");
    // Another session's memo is its own.
    f.ws.ensure(&f.req("other")).unwrap();
    assert_eq!(f.ws.full_checks(), 2);
}

#[test]
fn a_remembered_workspace_deleted_from_outside_is_recreated() {
    let f = fixture();
    let req = f.req("memo-gone");
    let first = f.ws.ensure(&req).unwrap();
    f.ws.ensure(&req).unwrap();
    fs::remove_dir_all(&first.path).unwrap();
    let again = f.ws.ensure(&req).unwrap();
    assert!(again.created);
    assert_eq!(f.ws.full_checks(), 2);
    assert_complete(&f, &again, "demo/memo-gone");
    // The record rewritten from outside is read again, too.
    let mut rec = f.ws.get("demo", "memo-gone").unwrap();
    rec.port = 41998;
    f.ws.write_record(&rec).unwrap();
    assert_eq!(f.ws.ensure(&req).unwrap().port, 41998);
    assert_eq!(f.ws.full_checks(), 3);
    // A removed workspace is forgotten: the next ensure makes it again.
    assert!(f.ws.remove("demo", "memo-gone").unwrap());
    assert!(f.ws.ensure(&req).unwrap().created);
}

#[test]
fn a_commit_in_a_remembered_workspace_moves_its_head_sha() {
    let f = fixture();
    let req = f.req("commits");
    let first = f.ws.ensure(&req).unwrap();
    fs::write(first.path.join("work.txt"), "one\n").unwrap();
    git(&first.path, &["add", "work.txt"]);
    git(&first.path, &["commit", "-q", "-m", "one"]);
    let one = git(&first.path, &["rev-parse", "HEAD"]);
    let info = f.ws.ensure(&req).unwrap();
    assert_eq!((info.branch.as_str(), info.head_sha.as_deref()), ("demo/commits", Some(one.as_str())));

    // Packed refs (after `git gc`) are read too.
    git(&f.repo, &["pack-refs", "--all"]);
    assert!(!f.repo.join(".git/refs/heads/demo/commits").exists());
    assert_eq!(f.ws.ensure(&req).unwrap().head_sha.as_deref(), Some(one.as_str()));
    fs::write(first.path.join("work.txt"), "two\n").unwrap();
    git(&first.path, &["commit", "-q", "-am", "two"]);
    let two = git(&first.path, &["rev-parse", "HEAD"]);
    assert_eq!(f.ws.ensure(&req).unwrap().head_sha.as_deref(), Some(two.as_str()));

    // A detached HEAD reports its commit on the recorded branch; another branch by its name.
    git(&first.path, &["checkout", "-q", "--detach", &one]);
    let info = f.ws.ensure(&req).unwrap();
    assert_eq!((info.branch.as_str(), info.head_sha.as_deref()), ("demo/commits", Some(one.as_str())));
    git(&first.path, &["checkout", "-q", "-b", "side"]);
    let info = f.ws.ensure(&req).unwrap();
    assert_eq!((info.branch.as_str(), info.head_sha.as_deref()), ("side", Some(one.as_str())));
    assert_eq!(f.ws.full_checks(), 1, "every answer came from the memo");
}

/// `memo::head` says what libgit2 says, in every state a workspace's HEAD can be in.
#[test]
fn head_read_from_files_agrees_with_libgit2() {
    let f = fixture();
    let info = f.ws.ensure(&f.req("heads")).unwrap();
    let agree = |what: &str| {
        let repo = git2::Repository::open(&info.path).unwrap();
        let want = match repo.head() {
            Ok(h) if h.is_branch() => {
                Some(memo::Head::Branch { name: h.shorthand().unwrap().into(), sha: h.target().map(|o| o.to_string()) })
            }
            Ok(h) => Some(memo::Head::Detached(h.target().unwrap().to_string())),
            Err(_) => None,
        };
        let got = memo::head(repo.path(), repo.commondir());
        match want {
            Some(want) => assert_eq!(got, Some(want), "{what}"),
            // libgit2 has no HEAD for an unborn branch: no commit, the branch from the record.
            None => assert!(matches!(got, Some(memo::Head::Branch { sha: None, .. })), "{what}: {got:?}"),
        }
    };
    agree("a new worktree");
    fs::write(info.path.join("a.txt"), "a\n").unwrap();
    git(&info.path, &["add", "a.txt"]);
    git(&info.path, &["commit", "-q", "-m", "a"]);
    agree("after a commit");
    git(&f.repo, &["pack-refs", "--all"]);
    agree("packed");
    git(&info.path, &["checkout", "-q", "--detach", "HEAD~1"]);
    agree("detached");
    git(&info.path, &["checkout", "-q", "--orphan", "fresh/start"]);
    agree("unborn");
    git(&info.path, &["checkout", "-q", "-b", "nested/deeper/name", "main"]);
    agree("a nested branch name");
}

/// A `git` at `dir/git` that appends its arguments to `dir/git.log` and then runs `body`
/// (`exec git "$@"` passes them on to the git on PATH).
#[cfg(unix)]
fn logging_git(dir: &Path, body: &str) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let (program, log) = (dir.join("git"), dir.join("git.log"));
    fs::write(&program, format!("#!/bin/sh\necho \"$*\" >> '{}'\n{body}\n", log.display())).unwrap();
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
    (program, log)
}

#[cfg(unix)]
#[test]
fn an_installed_git_writes_the_files_of_worktrees_and_clones() {
    let f = fixture();
    let bin = f._tmp.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let (program, log) = logging_git(&bin, "exec git \"$@\"");
    let main = git(&f.repo, &["rev-parse", "main"]);
    let (wt, cl) = checkout::with_checkout_git(Some(&program), || {
        assert_eq!(checkout::checkout_git(), Some(program.clone()));
        let mut clone = f.req("gitclone");
        clone.kind = WorkspaceKind::Clone;
        (f.ws.ensure(&f.req("bygit")).unwrap(), f.ws.ensure(&clone).unwrap())
    });
    let calls = fs::read_to_string(&log).unwrap();
    assert_eq!(calls.matches(&format!("read-tree --reset -u {main}")).count(), 2, "{calls}");
    assert_complete(&f, &wt, "demo/bygit");
    // The name given is the entry's, not the folder's (`bygit`) as `git worktree add` would make it.
    let admin = f.repo.join(".git/worktrees/aoctl-demo.bygit");
    assert_eq!(fs::read_to_string(admin.join("HEAD")).unwrap(), "ref: refs/heads/demo/bygit\n");
    assert!(admin.join("index").is_file());
    assert!(git(&f.repo, &["worktree", "list", "--porcelain"]).contains("branch refs/heads/demo/bygit"));
    let repo = git2::Repository::open(&f.repo).unwrap();
    repo.find_worktree("aoctl-demo.bygit").unwrap().validate().unwrap();
    assert_eq!(fs::read_to_string(cl.path.join("README.md")).unwrap(), "hello\n");
    assert_eq!(git(&cl.path, &["status", "--porcelain"]), "");
    assert_eq!(git(&cl.path, &["branch", "--show-current"]), "demo/gitclone");
    assert!(f.ws.remove("demo", "bygit").unwrap());
    assert!(!admin.exists());
}

#[test]
fn without_git_libgit2_writes_the_checkouts_and_clears_a_killed_one() {
    let f = fixture();
    let none = f._tmp.path().join("no-such-dir/git");
    checkout::with_checkout_git(Some(&none), || {
        assert_eq!(checkout::checkout_git(), None, "a git that cannot run is not used");
        let info = f.ws.ensure(&f.req("nogit")).unwrap();
        assert_complete(&f, &info, "demo/nogit");
        assert!(f.repo.join(".git/worktrees/aoctl-demo.nogit/index").is_file());
        assert!(f.ws.remove("demo", "nogit").unwrap());

        // A creation killed after the entry and a part of the files were written.
        let req = f.req("nogit-crash");
        let rec = unfinished_record(&f, &req, Some(git(&f.repo, &["rev-parse", "main"])));
        git(&f.repo, &["branch", "demo/nogit-crash", "main"]);
        let admin = f.repo.join(".git/worktrees/aoctl-demo.nogit-crash");
        fs::create_dir_all(&admin).unwrap();
        fs::write(admin.join("commondir"), "../..\n").unwrap();
        fs::write(admin.join("HEAD"), "ref: refs/heads/demo/nogit-crash\n").unwrap();
        fs::write(admin.join("gitdir"), format!("{}\n", rec.path.join(".git").display())).unwrap();
        fs::create_dir_all(&rec.path).unwrap();
        fs::write(rec.path.join(".git"), format!("gitdir: {}\n", admin.display())).unwrap();
        fs::write(rec.path.join("README.md"), "hel").unwrap();
        let info = f.ws.ensure(&req).unwrap();
        assert!(info.created);
        assert_complete(&f, &info, "demo/nogit-crash");

        let mut clone = f.req("nogit-clone");
        clone.kind = WorkspaceKind::Clone;
        let info = f.ws.ensure(&clone).unwrap();
        assert_eq!(git(&info.path, &["status", "--porcelain"]), "");
        assert_eq!(fs::read_to_string(info.path.join(".gitignore")).unwrap(), ".env\nnode_modules/\n");
    });
}

#[cfg(unix)]
#[test]
fn a_git_too_old_is_not_used_and_a_failing_one_leaves_the_files_to_libgit2() {
    let f = fixture();
    let bin = f._tmp.path().join("old");
    fs::create_dir(&bin).unwrap();
    let (old, old_log) = logging_git(&bin, "echo 'git version 2.31.8'");
    checkout::with_checkout_git(Some(&old), || assert_eq!(checkout::checkout_git(), None));
    assert_eq!(fs::read_to_string(&old_log).unwrap(), "--version\n");

    let bin = f._tmp.path().join("broken");
    fs::create_dir(&bin).unwrap();
    let body =
        "if [ \"$1\" = --version ]; then echo 'git version 2.47.3'; exit 0; fi\necho 'fatal: broken' >&2; exit 128";
    let (broken, log) = logging_git(&bin, body);
    let info = checkout::with_checkout_git(Some(&broken), || f.ws.ensure(&f.req("fallback")).unwrap());
    assert!(fs::read_to_string(&log).unwrap().contains("read-tree --reset -u"));
    assert_complete(&f, &info, "demo/fallback");
}

/// A detached worktree made at one commit and moved to another, by git and by libgit2.
#[test]
fn detached_worktrees_are_added_and_moved_by_either_writer() {
    let f = fixture();
    let first = git(&f.repo, &["rev-parse", "main"]);
    fs::write(f.repo.join("added.txt"), "new\n").unwrap();
    git(&f.repo, &["rm", "-q", ".gitignore"]);
    git(&f.repo, &["add", "added.txt"]);
    git(&f.repo, &["commit", "-q", "-m", "second"]);
    let second = git(&f.repo, &["rev-parse", "main"]);
    let oid = |s: &str| git2::Oid::from_str(s).unwrap();
    let writers = [Some(PathBuf::from("git")), None];
    for (i, writer) in writers.iter().enumerate() {
        let path = f._tmp.path().join(format!("detached{i}"));
        let name = format!("warm-{i}");
        checkout::with_checkout_git(writer.as_deref(), || {
            assert_eq!(checkout::checkout_git().is_some(), writer.is_some());
            checkout::add_detached_worktree(&f.repo, &path, &name, oid(&first)).unwrap();
            assert_eq!(git(&path, &["rev-parse", "HEAD"]), first);
            assert_eq!(git(&path, &["status", "--porcelain"]), "");
            assert!(path.join(".gitignore").is_file());
            let err = checkout::add_detached_worktree(&f.repo, &path, &name, oid(&first)).unwrap_err();
            assert_eq!(err.reason(), "WorktreeFailed");
            assert!(path.join(".gitignore").is_file(), "a failed add leaves what it did not make");

            fs::write(path.join("setup-made.txt"), "keep\n").unwrap();
            fs::write(path.join("README.md"), "changed\n").unwrap();
            checkout::move_detached(&path, oid(&second)).unwrap();
            assert_eq!(git(&path, &["rev-parse", "HEAD"]), second);
            assert_eq!(git(&path, &["status", "--porcelain"]), "?? setup-made.txt");
            assert_eq!(fs::read_to_string(path.join("README.md")).unwrap(), "hello\n");
            assert!(path.join("added.txt").is_file() && !path.join(".gitignore").exists());
            assert!(git(&f.repo, &["worktree", "list", "--porcelain"]).contains(&format!("detached{i}")));
        });
    }
}

#[test]
fn a_readonly_checkout_is_the_base_on_no_branch_and_goes_without_a_trace() {
    let f = fixture();
    let head = git(&f.repo, &["rev-parse", "HEAD"]);
    let branches = git(&f.repo, &["branch", "--list"]);
    let req = WorkspaceRequest { kind: WorkspaceKind::Readonly, branch: String::new(), ..f.req("triage") };
    let info = f.ws.ensure(&req).unwrap();
    assert!(info.created);
    assert_eq!((info.branch.as_str(), info.head_sha.as_deref()), ("", Some(head.as_str())));
    assert_eq!(git(&info.path, &["branch", "--show-current"]), "", "detached");
    assert_eq!(fs::read_to_string(info.path.join("README.md")).unwrap(), "hello\n");
    // What the agent writes and even commits there reaches no branch of the repository.
    fs::write(info.path.join("notes.md"), "a report\n").unwrap();
    git(&info.path, &["add", "notes.md"]);
    git(&info.path, &["commit", "-q", "-m", "scratch"]);
    let again = f.ws.ensure(&req).unwrap();
    assert!(!again.created, "a healthy readonly checkout is kept");
    assert_eq!(git(&f.repo, &["branch", "--list"]), branches);
    assert_eq!(git(&f.repo, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&f.repo, &["status", "--porcelain"]), "");
    assert!(f.ws.diff("demo", "triage", "main", 1 << 20).unwrap().patch.starts_with(b"diff --git"));

    assert!(f.ws.remove("demo", "triage").unwrap());
    assert!(!info.path.exists());
    assert_eq!(f.worktree_list().matches("worktree ").count(), 1, "the worktree entry goes too");
    assert_eq!(git(&f.repo, &["branch", "--list"]), branches);
}

#[test]
fn a_none_workspace_is_an_empty_folder_outside_git() {
    let f = fixture();
    let req = WorkspaceRequest { kind: WorkspaceKind::None, branch: String::new(), ..f.req("research") };
    let info = f.ws.ensure(&req).unwrap();
    assert_eq!((info.created, info.branch.as_str(), info.head_sha.as_deref()), (true, "", None));
    assert_eq!(fs::read_dir(&info.path).unwrap().count(), 0);
    fs::write(info.path.join("report.md"), "findings\n").unwrap();
    let again = f.ws.ensure(&req).unwrap();
    assert!(!again.created && again.path.join("report.md").is_file(), "its content stays while it lives");
    assert!(f.ws.diff("demo", "research", "main", 1 << 20).unwrap().patch.is_empty());
    assert_eq!(f.worktree_list().matches("worktree ").count(), 1);
    assert!(f.ws.remove("demo", "research").unwrap());
    assert!(!info.path.exists());
}

#[test]
fn a_branchless_workspace_is_refused_in_a_container() {
    let f = fixture();
    let req =
        WorkspaceRequest { kind: WorkspaceKind::Readonly, sandbox: true, branch: String::new(), ..f.req("boxed") };
    let e = f.ws.ensure(&req).unwrap_err();
    assert!(e.to_string().contains("`readonly` workspace is not available with runtime docker"), "{e}");
    assert!(!f.ws.path_of("demo", "boxed").exists());
}
