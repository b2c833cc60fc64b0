//! Sandboxed checkouts against real repositories: the layout, moving the branch (and only it) to
//! the main repository, what a planted `commondir`, config, hooks or other refs change (nothing),
//! copied objects for clones, removal, and layout changes.
//!
//! Where the tests play the agent they run `git --git-dir G --work-tree W`, as `git` inside the
//! container sees G at `/aoctl/git`; the real container is in e2e/tests/docker_sandbox.rs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use aoctl_api::session::WorkspaceKind;

use super::tests::{fixture, git, Fixture};
use super::*;

impl Fixture {
    fn sandboxed(&self, session: &str) -> WorkspaceRequest {
        WorkspaceRequest { sandbox: true, ..self.req(session) }
    }
}

/// `git` as the agent runs it: in W, with G as its git folder.
fn agent_git(work: &Path, git_dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["--git-dir", git_dir.to_str().unwrap(), "--work-tree", work.to_str().unwrap()];
    all.extend(args);
    git(work, &all)
}

/// The agent writes `file` and commits it; the new commit.
fn agent_commit(work: &Path, git_dir: &Path, file: &str, text: &str) -> String {
    fs::write(work.join(file), text).unwrap();
    agent_git(work, git_dir, &["add", file]);
    agent_git(work, git_dir, &["commit", "-q", "-m", &format!("agent: {file}")]);
    agent_git(work, git_dir, &["rev-parse", "HEAD"])
}

fn refs(repo: &Path) -> String {
    git(repo, &["for-each-ref", "--format=%(refname) %(objectname)"])
}

fn git_dir_of(info: &WorkspaceInfo) -> PathBuf {
    info.sandbox.as_ref().expect("a sandbox").git_dir.clone()
}

#[test]
fn a_sandbox_has_its_git_folder_outside_the_work_tree_and_borrows_the_objects() {
    let f = fixture();
    let base = git(&f.repo, &["rev-parse", "main"]);
    let info = f.ws.ensure(&f.sandboxed("s1")).unwrap();
    assert!(info.created);
    assert_eq!(info.branch, "demo/s1");
    assert_eq!(info.head_sha.as_deref(), Some(base.as_str()));
    let sandbox = info.sandbox.clone().unwrap();
    assert_eq!(sandbox.git_dir, info.path.with_file_name("s1.git"));
    assert!(!sandbox.git_dir.starts_with(&info.path));
    let objects = f.repo.join(".git/objects").canonicalize().unwrap();
    assert_eq!(sandbox.objects.as_deref(), Some(objects.as_path()));
    assert_eq!(sandbox.repo, f.repo);

    assert_eq!(fs::read_to_string(info.path.join(".git")).unwrap(), "gitdir: /aoctl/git\n");
    assert_eq!(fs::read_to_string(info.path.join("README.md")).unwrap(), "hello\n");
    let g = &sandbox.git_dir;
    assert_eq!(fs::read_to_string(g.join("objects/info/alternates")).unwrap(), format!("{}\n", objects.display()));
    assert_eq!(fs::read_to_string(g.join("HEAD")).unwrap(), "ref: refs/heads/demo/s1\n");
    assert_eq!(fs::read_dir(g.join("hooks")).unwrap().count(), 0, "no hooks, not even samples");
    assert!(g.join("index").is_file());
    assert!(!g.join("commondir").exists());
    // The branch is made in the main repository too, at the base, and nothing is checked out there.
    assert_eq!(git(&f.repo, &["rev-parse", "refs/heads/demo/s1"]), base);
    assert_eq!(f.worktree_list().lines().filter(|l| l.starts_with("worktree ")).count(), 1);
    // The agent's view: a clean checkout on its branch.
    assert_eq!(agent_git(&info.path, g, &["status", "--porcelain"]), "");
    assert_eq!(agent_git(&info.path, g, &["symbolic-ref", "HEAD"]), "refs/heads/demo/s1");

    // `git` on the host in W refuses: the gitfile names a folder only the container has.
    let out = Command::new("git").arg("-C").arg(&info.path).arg("status").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a git repository"), "{out:?}");
}

#[test]
fn the_agents_commits_reach_the_main_branch_through_ensure_and_nothing_else_moves() {
    let f = fixture();
    let req = f.sandboxed("s1");
    let info = f.ws.ensure(&req).unwrap();
    let g = git_dir_of(&info);
    let before = refs(&f.repo);
    let one = agent_commit(&info.path, &g, "a.txt", "one\n");
    let two = agent_commit(&info.path, &g, "b.txt", "two\n");
    // Nothing moves until the controller looks.
    assert_eq!(refs(&f.repo), before);
    assert!(
        Command::new("git").arg("-C").arg(&f.repo).args(["cat-file", "-e", &one]).status().unwrap().code() != Some(0)
    );

    let after = f.ws.ensure(&req).unwrap();
    assert_eq!(after.head_sha.as_deref(), Some(two.as_str()));
    assert_eq!(after.sync_error, None);
    assert_eq!(git(&f.repo, &["rev-parse", "refs/heads/demo/s1"]), two);
    // The objects are the main repository's own now, not borrowed from G.
    git(&f.repo, &["cat-file", "-e", &one]);
    assert_eq!(git(&f.repo, &["show", &format!("{two}:b.txt")]), "two");
    git(&f.repo, &["fsck", "--connectivity-only", "--no-dangling"]);
    let moved: Vec<String> =
        refs(&f.repo).lines().filter(|l| !before.lines().any(|b| b == *l)).map(str::to_string).collect();
    assert_eq!(moved, vec![format!("refs/heads/demo/s1 {two}")]);
    // Looked at again with nothing new: the fast path, the same answer.
    let checks = f.ws.full_checks();
    assert_eq!(f.ws.ensure(&req).unwrap().head_sha.as_deref(), Some(two.as_str()));
    assert_eq!(f.ws.full_checks(), checks);
}

#[test]
fn a_planted_commondir_config_hooks_or_other_refs_change_nothing_on_the_host() {
    let f = fixture();
    let req = f.sandboxed("s1");
    let info = f.ws.ensure(&req).unwrap();
    let other = f.ws.ensure(&f.sandboxed("s2")).unwrap();
    let g = git_dir_of(&info);
    let main_git = f.repo.join(".git");
    let config = fs::read(main_git.join("config")).unwrap();
    let hooks: Vec<_> = fs::read_dir(main_git.join("hooks")).unwrap().flatten().map(|e| e.file_name()).collect();
    let marker = f._tmp.path().join("marker");
    let evil = format!("#!/bin/sh\ntouch {}\n", marker.display());

    // What an agent could write in its own git folder (the container keeps config and hooks
    // read-only; here nothing does, which is the worst case for the host side).
    let tip = agent_commit(&info.path, &g, "work.txt", "mine\n");
    fs::write(g.join("commondir"), format!("{}\n", main_git.display())).unwrap();
    fs::write(g.join("hooks/post-checkout"), &evil).unwrap();
    fs::write(g.join("config"), format!("[core]\n\tfsmonitor = {}\n\thooksPath = /tmp\n", marker.display())).unwrap();
    fs::write(g.join("refs/heads/main"), format!("{tip}\n")).unwrap();
    fs::create_dir_all(g.join("refs/heads/demo")).unwrap();
    fs::write(g.join("refs/heads/demo/s2"), format!("{tip}\n")).unwrap();
    fs::write(g.join("packed-refs"), format!("{tip} refs/heads/main\n{tip} refs/heads/demo/s2\n")).unwrap();
    fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    let main_before = git(&f.repo, &["rev-parse", "main"]);
    let s2_before = other.head_sha.clone().unwrap();

    let after = f.ws.ensure(&req).unwrap();
    // Only the session's branch moved, to the commit G's own branch names.
    assert_eq!(after.branch, "demo/s1");
    assert_eq!(after.head_sha.as_deref(), Some(tip.as_str()));
    assert_eq!(git(&f.repo, &["rev-parse", "refs/heads/demo/s1"]), tip);
    assert_eq!(git(&f.repo, &["rev-parse", "main"]), main_before);
    assert_eq!(git(&f.repo, &["rev-parse", "refs/heads/demo/s2"]), s2_before);
    assert!(
        !main_git.join("packed-refs").exists()
            || !fs::read_to_string(main_git.join("packed-refs")).unwrap().contains(&tip)
    );
    assert_eq!(fs::read(main_git.join("config")).unwrap(), config);
    let now: Vec<_> = fs::read_dir(main_git.join("hooks")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(now, hooks);
    assert!(!marker.exists(), "something the agent planted ran");
    let out = Command::new("git").arg("-C").arg(&info.path).arg("status").output().unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert!(!marker.exists(), "`git status` on the host ran what the agent planted");
}

#[test]
fn a_branch_checked_out_on_the_host_is_not_moved_and_the_error_says_so() {
    let f = fixture();
    let req = f.sandboxed("s1");
    let info = f.ws.ensure(&req).unwrap();
    let g = git_dir_of(&info);
    let base = info.head_sha.clone().unwrap();
    agent_commit(&info.path, &g, "a.txt", "one\n");
    git(&f.repo, &["checkout", "-q", "demo/s1"]);
    let after = f.ws.ensure(&req).unwrap();
    assert_eq!(after.head_sha.as_deref(), Some(base.as_str()), "headSha is the main repository's branch");
    let e = after.sync_error.expect("a sync error");
    assert!(e.contains("is checked out at"), "{e}");
    assert_eq!(git(&f.repo, &["rev-parse", "HEAD"]), base);
    git(&f.repo, &["checkout", "-q", "main"]);
    let tip = agent_git(&info.path, &g, &["rev-parse", "HEAD"]);
    assert_eq!(f.ws.ensure(&req).unwrap().head_sha, Some(tip));
}

#[test]
fn a_cloned_sandbox_copies_the_objects_and_borrows_nothing() {
    let f = fixture();
    let req = WorkspaceRequest { kind: WorkspaceKind::Clone, ..f.sandboxed("c1") };
    let info = f.ws.ensure(&req).unwrap();
    let sandbox = info.sandbox.clone().unwrap();
    assert_eq!(sandbox.objects, None);
    assert!(!sandbox.git_dir.join("objects/info/alternates").exists());
    let base = info.head_sha.clone().unwrap();
    // G alone has the history: no alternates to lean on.
    git(&sandbox.git_dir, &["--git-dir", sandbox.git_dir.to_str().unwrap(), "cat-file", "-e", &base]);
    let tip = agent_commit(&info.path, &sandbox.git_dir, "c.txt", "cloned\n");
    assert_eq!(f.ws.ensure(&req).unwrap().head_sha.as_deref(), Some(tip.as_str()));
    assert_eq!(git(&f.repo, &["show", &format!("{tip}:c.txt")]), "cloned");
}

#[test]
fn removal_moves_the_last_commits_then_deletes_both_folders_and_keeps_the_branch() {
    let f = fixture();
    let info = f.ws.ensure(&f.sandboxed("s1")).unwrap();
    let g = git_dir_of(&info);
    let tip = agent_commit(&info.path, &g, "late.txt", "after the last look\n");
    assert!(f.ws.remove("demo", "s1").unwrap());
    assert!(!info.path.exists() && !g.exists());
    assert_eq!(git(&f.repo, &["rev-parse", "refs/heads/demo/s1"]), tip);
    assert_eq!(f.ws.list().unwrap(), vec![]);
}

#[test]
fn a_lost_index_is_rebuilt_and_a_removed_work_tree_is_made_again() {
    let f = fixture();
    let req = f.sandboxed("s1");
    let info = f.ws.ensure(&req).unwrap();
    let g = git_dir_of(&info);
    fs::write(info.path.join("README.md"), "edited\n").unwrap();
    fs::remove_file(g.join("index")).unwrap();
    let again = f.ws.ensure(&req).unwrap();
    assert!(!again.created, "the checkout is kept");
    assert!(g.join("index").is_file());
    assert_eq!(fs::read_to_string(info.path.join("README.md")).unwrap(), "edited\n");
    assert_eq!(agent_git(&info.path, &g, &["status", "--porcelain"]), "M README.md");

    let tip = agent_commit(&info.path, &g, "kept.txt", "kept\n");
    checkout::remove_tree(&info.path).unwrap();
    let made = f.ws.ensure(&req).unwrap();
    assert!(made.created);
    assert_eq!(made.head_sha.as_deref(), Some(tip.as_str()), "the branch's commits survived");
    assert_eq!(fs::read_to_string(made.path.join("kept.txt")).unwrap(), "kept\n");
}

#[test]
fn a_changed_runtime_does_not_turn_one_layout_into_the_other() {
    let f = fixture();
    f.ws.ensure(&f.req("plain")).unwrap();
    let e = f.ws.ensure(&f.sandboxed("plain")).unwrap_err();
    assert_eq!(e.reason(), "WorkspaceLayoutChanged");
    assert!(e.to_string().contains("runtime docker needs a sandboxed checkout"), "{e}");
    f.ws.ensure(&f.sandboxed("boxed")).unwrap();
    let e = f.ws.ensure(&f.req("boxed")).unwrap_err();
    assert_eq!(e.reason(), "WorkspaceLayoutChanged");
}

#[test]
fn a_killed_sandbox_creation_is_cleared_and_made_again() {
    let f = fixture();
    let req = f.sandboxed("s1");
    let info = f.ws.ensure(&req).unwrap();
    let g = git_dir_of(&info);
    // As if killed before the gitfile was written: the record says unfinished.
    let mut rec = f.ws.get("demo", "s1").unwrap();
    rec.checkout_done = Some(false);
    f.ws.write_record(&rec).unwrap();
    fs::remove_file(info.path.join(".git")).unwrap();
    fs::write(g.join("leftover"), "x").unwrap();
    let made = f.ws.ensure(&req).unwrap();
    assert!(made.created);
    assert!(!g.join("leftover").exists(), "G was made afresh");
    assert_eq!(fs::read_to_string(made.path.join(".git")).unwrap(), GITFILE);
}
