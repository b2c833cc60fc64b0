//! The warm pool end to end, with the real binary, git and tmux: a Project with
//! `spec.workspacePool` keeps ready worktrees on a detached HEAD, a new Session claims one (its
//! branch made there, the folder moved into place), the pool fills again, follows the default
//! branch when it moves, survives a SIGKILL in the middle of claims without a folder ending up in
//! two places, and goes with its Project.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::Server;
use crate::lifecycle::{
    agent_committed, agent_repo, event, eventually, git, git_ok, project, ready, session, token, wait_all, workspace,
    write_manifest, Cleanup, READY,
};

/// How long a pool of a few worktrees of the small test repository may take to fill.
const FILL: Duration = Duration::from_secs(60);

/// `status.workspacePool` of a project.
async fn pool_status(server: &Server, name: &str) -> Value {
    server.object("projects", name).await.map(|p| p["status"]["workspacePool"].clone()).unwrap_or(Value::Null)
}

/// Waits until the project's pool reports `ready` ready worktrees and `repo` has that many
/// detached worktrees (the status is written after the round that made them).
async fn wait_ready(server: &Server, repo: &Path, name: &str, ready: u64) -> Value {
    let deadline = tokio::time::Instant::now() + FILL;
    loop {
        let st = pool_status(server, name).await;
        let entries = detached(repo);
        if st["ready"] == ready && entries.len() as u64 == ready {
            return st;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "project {name}: not {ready} ready within {FILL:?}: {st}, {entries:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The detached worktrees of `repo` (the pool's entries): their folders and commits.
fn detached(repo: &Path) -> Vec<(PathBuf, String)> {
    let text = git(repo, &["worktree", "list", "--porcelain"]);
    text.split("\n\n")
        .filter(|block| block.lines().any(|l| l == "detached"))
        .filter_map(|block| {
            let path = block.lines().find_map(|l| l.strip_prefix("worktree "))?;
            let head = block.lines().find_map(|l| l.strip_prefix("HEAD "))?;
            Some((PathBuf::from(path), head.to_string()))
        })
        .collect()
}

fn branches(repo: &Path) -> Vec<String> {
    git(repo, &["branch", "--format=%(refname:short)"]).lines().map(str::to_string).collect()
}

fn pool_dir(server: &Server, project: &str) -> PathBuf {
    server.data_dir.join("workspaces").join(project).join("_pool")
}

/// The value of one sample of the server's `/metrics`.
async fn sample(server: &Server, series: &str) -> Option<f64> {
    let text = server.get_path("/metrics").await.text();
    text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_claim_ready_worktrees_and_the_pool_follows_its_branch() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "warm");
    server.create("projects", &project("warm", &repo, json!({"workspacePool": {"size": 2}}))).await;
    let st = wait_ready(&server, &repo, "warm", 2).await;
    assert_eq!(st["size"], 2, "{st}");
    let p = server.object("projects", "warm").await.unwrap();
    assert!(p["metadata"]["finalizers"].as_array().unwrap().iter().any(|f| f == "ao.dev/workspace-pool"), "{p:#}");
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let entries = detached(&repo);
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert!(entries.iter().all(|(path, at)| path.starts_with(pool_dir(&server, "warm")) && *at == head), "{entries:?}");
    assert_eq!(branches(&repo), ["main"], "pool entries hold no branch");
    let out = server.aoctl(&["describe", "project", "warm"]);
    out.ok();
    assert!(out.stdout.contains("Workspace Pool:") && out.stdout.contains("2 of 2 ready"), "{out}");

    server.create("sessions", &session("first", "warm", &token("first"), json!({}))).await;
    wait_all(&server, &["first"], READY, "Ready", ready).await;
    let created = event(&server, "first", "WorkspaceCreated").await.expect("a WorkspaceCreated event");
    assert!(created["message"].as_str().unwrap().contains("from the warm pool"), "{created:#}");
    let ws = workspace(&server, "warm", "first");
    assert!(entries.iter().all(|(path, _)| !path.exists() || *path != ws));
    assert_eq!(git(&ws, &["branch", "--show-current"]), "warm/first");
    agent_committed(&repo, "warm/first", "first").await;
    assert!(git_ok(&repo, &["merge-base", "--is-ancestor", &head, "warm/first"]));
    wait_ready(&server, &repo, "warm", 2).await;
    assert_eq!(detached(&repo).len(), 2, "refilled");
    let claimed = r#"aoctl_workspace_pool_claims_total{project="warm",result="claimed"}"#;
    assert_eq!(sample(&server, claimed).await, Some(1.0));
    assert_eq!(sample(&server, r#"aoctl_workspace_pool_ready{project="warm"}"#).await, Some(2.0));

    // The default branch moves: the entries follow it, and the next session starts there.
    fs::write(repo.join("moved.txt"), "moved\n").unwrap();
    git(&repo, &["add", "moved.txt"]);
    git(&repo, &["commit", "-q", "-m", "Move the default branch"]);
    let moved = git(&repo, &["rev-parse", "HEAD"]);
    eventually(FILL, "the pool's entries at the new head", || {
        let e = detached(&repo);
        (e.len() == 2 && e.iter().all(|(_, at)| *at == moved)).then_some(()).ok_or(format!("{e:?}"))
    })
    .await;
    wait_ready(&server, &repo, "warm", 2).await;
    server.create("sessions", &session("second", "warm", &token("second"), json!({}))).await;
    wait_all(&server, &["second"], READY, "Ready", ready).await;
    let created = event(&server, "second", "WorkspaceCreated").await.expect("a WorkspaceCreated event");
    assert!(created["message"].as_str().unwrap().contains("from the warm pool"), "{created:#}");
    assert!(workspace(&server, "warm", "second").join("moved.txt").is_file());

    // A smaller pool gives back what it does not need; deleting the Project removes the rest.
    let mut p = server.object("projects", "warm").await.unwrap();
    p["spec"]["workspacePool"]["size"] = json!(1);
    server.json("PUT", &format!("{}/projects/warm", crate::harness::API), &p).await.expect(200);
    eventually(FILL, "the pool down to one entry", || {
        let e = detached(&repo);
        (e.len() == 1).then_some(()).ok_or(format!("{e:?}"))
    })
    .await;
    server.aoctl(&["delete", "session", "--wait", "first", "second"]).ok();
    server.aoctl(&["delete", "project", "warm", "--wait"]).ok();
    assert!(server.object("projects", "warm").await.is_none());
    eventually(READY, "the pool's folder gone", || {
        (!pool_dir(&server, "warm").exists()).then_some(()).ok_or("still there".to_string())
    })
    .await;
    assert_eq!(detached(&repo), vec![], "git forgot the pool's worktrees");
    cleanup.finish();
}

/// SIGKILLs the controller `delay` after six sessions are applied to a project whose pool of six
/// is full, starts it again, and checks every session got a whole worktree of its own, every
/// folder is in one place, and the pool fills again.
async fn crash_while_claiming(delay: Duration) {
    let mut server = Server::start().await;
    let mut cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "burst");
    server.create("projects", &project("burst", &repo, json!({"workspacePool": {"size": 6}}))).await;
    wait_ready(&server, &repo, "burst", 6).await;
    let names: Vec<String> = (0..6).map(|i| format!("burst-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let docs: Vec<Value> = names.iter().map(|n| session(n, "burst", &token(n), json!({}))).collect();
    server.aoctl(&["apply", "-f", &write_manifest(&server.tmp.path().join("burst.yaml"), &docs)]).ok();
    tokio::time::sleep(delay).await;
    server.restart().await;
    cleanup.retarget(&server);

    wait_all(&server, &names, READY, "Ready after the crash", ready).await;
    for n in &names {
        let ws = workspace(&server, "burst", n);
        assert_eq!(git(&ws, &["branch", "--show-current"]), format!("burst/{n}"), "{delay:?}");
        assert!(ws.join("scripts/agent.sh").is_file(), "{delay:?}: {n} has the whole checkout");
        agent_committed(&repo, &format!("burst/{n}"), n).await;
    }
    wait_ready(&server, &repo, "burst", 6).await;
    let entries = detached(&repo);
    assert_eq!(entries.len(), 6, "{delay:?}: {entries:?}");
    assert!(entries.iter().all(|(p, _)| p.starts_with(pool_dir(&server, "burst"))), "{entries:?}");
    let mut expected: Vec<String> = names.iter().map(|n| format!("burst/{n}")).collect();
    expected.push("main".into());
    assert_eq!(branches(&repo), expected, "{delay:?}: no branch but the sessions' and main");
    let listed = git(&repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1 + 6 + 6, "{delay:?}: {listed}");
    assert!(!listed.contains("prunable"), "{delay:?}: {listed}");
    let mut delete = vec!["delete", "session", "--wait"];
    delete.extend(&names);
    server.aoctl(&delete).ok();
    server.aoctl(&["delete", "project", "burst", "--wait"]).ok();
    assert_eq!(detached(&repo), vec![], "{delay:?}: the pool went with its project");
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_in_the_middle_of_claims_loses_and_shares_nothing() {
    for delay in [Duration::from_millis(30), Duration::from_millis(150)] {
        crash_while_claiming(delay).await;
    }
}
