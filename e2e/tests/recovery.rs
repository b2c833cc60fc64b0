//! Crash recovery of the session controller: SIGKILL while sessions are spawning must neither
//! lose a session nor launch an agent twice; at start the controller removes runtimes and
//! workspaces no Session claims; a worktree deleted from outside is made again.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::Server;
use crate::lifecycle::{
    agent_committed, agent_repo, cwd_of, event, eventually, git, git_ok, git_out, launch_count, launches, phase,
    processes_with, project, ready, restarts, session, token, wait_all, workspace, worktrees, write_manifest, Cleanup,
    Tmux, READY,
};

/// Sessions spawned at once in the crash tests.
const SESSIONS: [&str; 5] = ["c1", "c2", "c3", "c4", "c5"];

/// Applies five sessions, SIGKILLs the controller `delay` after `aoctl apply` returns, starts it
/// again and checks that every session converges with exactly one launch of its agent.
async fn crash_while_spawning(delay: Duration) {
    let mut server = Server::start().await;
    let mut cleanup = Cleanup::new(&server);
    let tmux = Tmux::of(&server);
    let repo = agent_repo(server.tmp.path(), "crash");
    // Enough files that checking out a worktree takes a while, as in a real project: a kill is
    // then likely to land in the middle of one.
    let src = repo.join("src");
    std::fs::create_dir_all(&src).expect("create src/");
    for i in 0..300 {
        std::fs::write(src.join(format!("m{i}.rs")), format!("pub const N: u32 = {i};\n")).expect("write file");
    }
    git(&repo, &["add", "src"]);
    git(&repo, &["commit", "-q", "-m", "Add sources"]);
    let log = server.tmp.path().join("launches.log");
    server.create("projects", &project("crash", &repo, json!({}))).await;
    server.wait_for("projects", "crash", READY, |p| crate::lifecycle::is_true(p, "Ready")).await;
    let tokens: Vec<String> = SESSIONS.iter().map(|n| token(n)).collect();
    let docs: Vec<_> = SESSIONS
        .iter()
        .zip(&tokens)
        .map(|(n, t)| session(n, "crash", t, json!({"env": {"E2E_LAUNCH_LOG": log}})))
        .collect();
    let file = write_manifest(&server.tmp.path().join("sessions.yaml"), &docs);

    server.aoctl(&["apply", "-f", &file]).ok();
    tokio::time::sleep(delay).await;
    let before = launches(&log).len();
    server.restart().await;
    cleanup.retarget(&server);
    eprintln!("killed {delay:?} after apply, with {before} of {} agents launched", SESSIONS.len());

    let objs = wait_all(&server, &SESSIONS, READY, "Ready after the crash", |o| ready(o) || phase(o) == "Failed").await;
    let failed: Vec<String> = objs.iter().filter(|o| !ready(o)).map(|o| format!("{o:#}")).collect();
    assert!(failed.is_empty(), "sessions failed after the crash:\n{}", failed.join("\n"));
    for ((name, tok), obj) in SESSIONS.iter().zip(&tokens).zip(&objs) {
        let ws = workspace(&server, "crash", name);
        let status = git_out(&ws, &["status", "--porcelain", "-uall"]).unwrap_or_else(|| "(not a git checkout)".into());
        let note = format!("notes/{name}.md");
        let changed: Vec<&str> = status.lines().filter(|l| !l.ends_with(&note)).collect();
        assert_eq!(changed, Vec::<&str>::new(), "{name}: the worktree is not a complete checkout of its branch");
        assert_eq!(restarts(obj), 0, "{name} was restarted: {obj:#}");
        let branch = format!("crash/{name}");
        agent_committed(&repo, &branch, name).await;
        let diff = git(&repo, &["diff", "--name-status", "main", &branch]);
        assert_eq!(diff, format!("A\tnotes/{name}.md"), "{branch} holds more than the agent's note");
        eventually(READY, &format!("one agent process for {name}"), || match processes_with(tok).as_slice() {
            [_] => Ok(()),
            pids => Err(format!("{pids:?}")),
        })
        .await;
    }
    // A second launch would come within a reconcile or two (two seconds apart while working).
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (name, tok) in SESSIONS.iter().zip(&tokens) {
        assert_eq!(launch_count(&log, name), 1, "{name} launched other than once: {:?}", launches(&log));
        assert_eq!(processes_with(tok).len(), 1, "{name} has other than one agent process");
    }
    assert_eq!(launches(&log).len(), SESSIONS.len(), "launch log: {:?}", launches(&log));
    assert_eq!(tmux.sessions(), SESSIONS, "one tmux session per Session, none orphaned");
    let listed = worktrees(&repo);
    assert_eq!(listed.len(), SESSIONS.len() + 1, "git worktree list: {listed:?}");
    for name in SESSIONS {
        let ws = workspace(&server, "crash", name);
        assert!(listed.iter().any(|(p, b)| *p == ws && *b == format!("crash/{name}")), "{name}: {listed:?}");
    }
    let folders = std::fs::read_dir(server.data_dir.join("workspaces/crash")).expect("workspaces").flatten();
    let dirs = folders.filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).count();
    assert_eq!(dirs, SESSIONS.len(), "one workspace folder per session");
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_right_after_apply_launches_each_agent_once() {
    crash_while_spawning(Duration::ZERO).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_150ms_after_apply_launches_each_agent_once() {
    crash_while_spawning(Duration::from_millis(150)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_500ms_after_apply_launches_each_agent_once() {
    crash_while_spawning(Duration::from_millis(500)).await;
}

/// Writes the record the workspaces module keeps next to a worktree it made.
fn workspace_record(root: &Path, project: &str, session: &str, repo: &Path, branch: &str) {
    let record = json!({
        "project": project, "session": session, "path": root.join(project).join(session), "repo": repo,
        "branch": branch, "baseRef": "main", "kind": "worktree", "worktreeName": session, "port": 40999,
        "setupDone": true, "createdAt": "2025-01-01T00:00:00Z",
    });
    let file = root.join(project).join(format!("{session}.json"));
    std::fs::write(file, serde_json::to_vec_pretty(&record).unwrap()).expect("write workspace record");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_removed_at_start_and_owned_agents_adopted() {
    let mut server = Server::start().await;
    let mut cleanup = Cleanup::new(&server);
    let tmux = Tmux::of(&server);
    let repo = agent_repo(server.tmp.path(), "tidy");
    let log = server.tmp.path().join("launches.log");
    let keeper = token("keeper");
    server.create("projects", &project("tidy", &repo, json!({}))).await;
    server.create("sessions", &session("keeper", "tidy", &keeper, json!({"env": {"E2E_LAUNCH_LOG": log}}))).await;
    wait_all(&server, &["keeper"], READY, "Ready", ready).await;
    let agent = eventually(READY, "keeper's agent", || match processes_with(&keeper).as_slice() {
        [pid] => Ok(*pid),
        pids => Err(format!("{pids:?}")),
    })
    .await;

    // An orphaned runtime: a tmux session on the controller's server, labelled as the tmux
    // runtime labels its own, for a Session that does not exist.
    let ghost = token("ghost");
    let start = ["new-session", "-d", "-s", "ghost", "--", "sh", "-c", "sleep 600; :", &ghost];
    for args in [
        &start[..],
        &["set-option", "-t", "=ghost:", "@aoctl-session", "ghost"],
        &["set-option", "-t", "=ghost:", "@aoctl-project", "tidy"],
    ] {
        let out = tmux.run(args);
        assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    eventually(READY, "the orphan's process", || {
        (processes_with(&ghost).len() == 1).then_some(()).ok_or_else(String::new)
    })
    .await;
    // An orphaned workspace: a worktree in the controller's folder with its record, no Session.
    let root = server.data_dir.join("workspaces");
    let stray = root.join("tidy/stray");
    git(&repo, &["worktree", "add", "-q", "-b", "tidy/stray", stray.to_str().unwrap(), "main"]);
    workspace_record(&root, "tidy", "stray", &repo, "tidy/stray");

    server.restart().await;
    cleanup.retarget(&server);
    eventually(READY, "the orphans removed", || {
        let left = (tmux.has("ghost"), processes_with(&ghost), stray.exists(), root.join("tidy/stray.json").exists());
        if left == (false, vec![], false, false) {
            Ok(())
        } else {
            Err(format!("(tmux session, processes, folder, record): {left:?}"))
        }
    })
    .await;
    assert!(!worktrees(&repo).iter().any(|(p, _)| *p == stray), "git forgot the orphaned worktree");
    assert!(git_ok(&repo, &["rev-parse", "--verify", "refs/heads/tidy/stray"]), "its branch is kept");

    // The session that exists keeps its agent: adopted, not started again.
    let obj = wait_all(&server, &["keeper"], READY, "Ready", ready).await.remove(0);
    assert_eq!(processes_with(&keeper), vec![agent], "keeper's agent is the same process");
    assert_eq!(launch_count(&log, "keeper"), 1);
    assert_eq!(restarts(&obj), 0);
    assert_eq!(tmux.sessions(), ["keeper"]);
    assert!(workspace(&server, "tidy", "keeper").join("notes/keeper.md").is_file());
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worktree_deleted_from_outside_is_made_again() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "phoenix");
    let tok = token("rise");
    server.create("projects", &project("phoenix", &repo, json!({}))).await;
    server.create("sessions", &session("rise", "phoenix", &tok, json!({}))).await;
    wait_all(&server, &["rise"], READY, "Ready", ready).await;
    let ws = workspace(&server, "phoenix", "rise");
    eventually(READY, "the agent's note", || ws.join("notes/rise.md").is_file().then_some(()).ok_or_else(String::new))
        .await;

    std::fs::remove_dir_all(&ws).expect("delete the worktree folder");
    eventually(Duration::from_secs(30), "the worktree made again", || {
        let head = git_out(&ws, &["rev-parse", "--abbrev-ref", "HEAD"]);
        match head.as_deref() {
            Some("phoenix/rise") if ws.join("notes/rise.md").is_file() => Ok(()),
            other => Err(format!("HEAD {other:?}")),
        }
    })
    .await;
    let listed = worktrees(&repo);
    assert_eq!(listed.iter().filter(|(p, _)| *p == ws).count(), 1, "git lists it once: {listed:?}");
    // The agent starts again in the new worktree and may be writing its note again: look once it
    // is idle.
    let idle = |o: &Value| ready(o) && o.pointer("/status/activity/state") == Some(&json!("idle"));
    wait_all(&server, &["rise"], READY, "Ready and idle", idle).await;
    assert_eq!(git(&ws, &["status", "--porcelain"]), "", "the branch's work is all there");
    let ev = event(&server, "rise", "WorkspaceCreated").await.expect("a WorkspaceCreated event");
    assert_eq!(ev["count"], 2, "created, then created again: {ev:#}");

    // The agent must work in the new folder, not in the deleted one it was started in.
    eventually(Duration::from_secs(30), "the agent running in the recreated worktree", || {
        let pids = processes_with(&tok);
        let cwds: Vec<_> = pids.iter().map(|p| cwd_of(*p)).collect();
        match cwds.as_slice() {
            [Some(cwd)] if *cwd == ws => Ok(()),
            other => Err(format!("agent working directories: {other:?}")),
        }
    })
    .await;
    server.aoctl(&["send", "rise", "fix the typo"]).ok();
    eventually(Duration::from_secs(10), "the agent's commit after the recreation", || {
        let subject = git_out(&repo, &["log", "-1", "--format=%s", "phoenix/rise", "--"]);
        (subject.as_deref() == Some("rise: fix the typo")).then_some(()).ok_or(format!("{subject:?}"))
    })
    .await;
    cleanup.finish();
}
