//! The session lifecycle with the real binary, git and tmux: ten sessions on one repository, typing
//! into an agent, deletion, stop and resume, the `maxConcurrentSessions` queue and restart policies.
//! Every session runs the scripted agent committed in its test repository (e2e/agents/).

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{Server, API, NO_REPO};
use crate::lifecycle::{
    agent_committed, agent_repo, condition, event, eventually, git, git_ok, is_true, launch_count, launched, phase,
    processes_with, project, ready, restarts, session, tip, token, transcript, wait_all, workspace, worktrees,
    write_manifest, Cleanup, Tmux, READY,
};

/// How long typed text may take to show in `aoctl logs`.
const ECHO: Duration = Duration::from_secs(10);

/// Waits until exactly one agent process carries `token`; its pid.
async fn one_agent(token: &str) -> u32 {
    eventually(READY, &format!("one agent process with {token}"), || match processes_with(token).as_slice() {
        [pid] => Ok(*pid),
        pids => Err(format!("{pids:?}")),
    })
    .await
}

/// Polls `aoctl logs NAME` until it contains every one of `lines`, in order.
async fn logs_show(server: &Server, name: &str, lines: &[&str]) -> String {
    eventually(ECHO, &format!("`aoctl logs {name}` showing {lines:?}"), || {
        let out = server.aoctl(&["logs", name]);
        out.ok();
        let mut rest = out.stdout.as_str();
        for l in lines {
            match rest.find(l) {
                Some(i) => rest = &rest[i + l.len()..],
                None => return Err(out.stdout.clone()),
            }
        }
        Ok(out.stdout)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_sessions_get_ten_worktrees_on_ten_branches() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "fleet");
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let names: Vec<String> = (0..10).map(|i| format!("task-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut docs = vec![project("fleet", &repo, json!({"sessionPrefix": "agents"}))];
    docs.extend(names.iter().map(|n| session(n, "fleet", &token(n), json!({}))));
    let file = write_manifest(&server.tmp.path().join("fleet.yaml"), &docs);
    server.aoctl(&["apply", "-f", &file]).ok();

    let objs = wait_all(&server, &names, READY, "Ready", ready).await;
    for (name, obj) in names.iter().zip(&objs) {
        let branch = format!("agents/{name}");
        assert_eq!(obj["status"]["workspace"]["branch"], branch, "{obj:#}");
        assert_eq!(obj["status"]["workspace"]["path"], workspace(&server, "fleet", name).to_str().unwrap(), "{obj:#}");
        agent_committed(&repo, &branch, name).await;
        assert!(git_ok(&repo, &["merge-base", "--is-ancestor", &head, &branch]), "{branch} does not start at main");
    }

    let mut listed = worktrees(&repo);
    assert_eq!(listed.len(), 11, "git worktree list: {listed:?}");
    assert_eq!(listed.remove(0), (repo.clone(), "main".to_string()), "the main checkout comes first");
    listed.sort();
    let mut expected: Vec<_> = names.iter().map(|n| (workspace(&server, "fleet", n), format!("agents/{n}"))).collect();
    expected.sort();
    assert_eq!(listed, expected, "one worktree per session on its own branch");
    assert_eq!(git(&repo, &["status", "--porcelain"]), "", "the main checkout is untouched");
    assert_eq!(git(&repo, &["rev-parse", "HEAD"]), head, "the main checkout's HEAD did not move");
    assert_eq!(git(&repo, &["symbolic-ref", "HEAD"]), "refs/heads/main");

    let out = server.aoctl(&["get", "sessions"]);
    out.ok();
    let rows: Vec<Vec<&str>> = out.stdout.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    let mut shown: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    shown.sort();
    assert_eq!(shown, names, "aoctl get sessions:\n{out}");
    for r in &rows {
        assert!(["Working", "Idle"].contains(&r[3]), "a session not in a settled phase:\n{out}");
    }

    cleanup.finish();
    assert_eq!(worktrees(&repo).len(), 1, "deleting the sessions removes their worktrees");
    for n in &names {
        assert!(git_ok(&repo, &["rev-parse", "--verify", &format!("refs/heads/agents/{n}")]), "branch of {n} kept");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_types_into_the_agent_and_refuses_sessions_without_one() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "chat");
    let docs = [
        project("chat", &repo, json!({})),
        project("nowhere", Path::new(NO_REPO), json!({})),
        session("talk", "chat", &token("talk"), json!({})),
        session("paused", "chat", &token("paused"), json!({"stopped": true})),
        session("homeless", "nowhere", &token("homeless"), json!({})),
    ];
    server.aoctl(&["apply", "-f", &write_manifest(&server.tmp.path().join("chat.yaml"), &docs)]).ok();
    wait_all(&server, &["talk"], READY, "Ready", ready).await;
    logs_show(&server, "talk", &["demo-agent: committed"]).await;

    let out = server.aoctl(&["send", "talk", "hello there"]);
    out.ok();
    assert!(out.stdout.contains("delivered 11 characters"), "{out}");
    logs_show(&server, "talk", &["demo-agent: got: hello there"]).await;
    assert!(transcript(&server, "talk").contains("demo-agent: got: hello there"), "the transcript file has it too");

    server.aoctl_stdin(&["send", "talk", "-"], "first line\nsecond line\n").ok();
    logs_show(&server, "talk", &["demo-agent: got: first line", "demo-agent: got: second line"]).await;

    // Neither a stopped session nor one whose project is not ready has an agent to type into.
    wait_all(&server, &["paused"], READY, "Stopped", |o| phase(o) == "Stopped").await;
    wait_all(&server, &["homeless"], READY, "waiting for its project", |o| {
        condition(o, "Ready").is_some_and(|c| c["reason"] == "ProjectNotReady")
    })
    .await;
    for name in ["paused", "homeless"] {
        let r = server.json("POST", &format!("{API}/sessions/{name}/input"), &json!({"text": "anyone?"})).await;
        let status = r.expect_status(409, "Conflict");
        assert!(status["message"].as_str().unwrap().contains("no running agent"), "{status}");
        let out = server.aoctl(&["send", name, "anyone?"]);
        out.code(1);
        assert!(out.stderr.contains("no running agent"), "{out}");
    }
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_leaves_nothing_but_the_branch() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let tmux = Tmux::of(&server);
    let repo = agent_repo(server.tmp.path(), "doom");
    let tok = token("doomed");
    server.create("projects", &project("doom", &repo, json!({}))).await;
    server.create("sessions", &session("doomed", "doom", &tok, json!({}))).await;
    wait_all(&server, &["doomed"], READY, "Ready", ready).await;
    agent_committed(&repo, "doom/doomed", "doomed").await;
    one_agent(&tok).await;
    let ws = workspace(&server, "doom", "doomed");
    assert!(ws.join("notes/doomed.md").is_file(), "the agent's note is in its worktree");
    assert!(tmux.has("doomed"));

    let out = server.aoctl(&["delete", "session", "doomed", "--wait"]);
    out.ok();
    assert!(server.object("sessions", "doomed").await.is_none(), "the object is gone");
    assert!(!tmux.has("doomed"), "the tmux session is gone");
    assert_eq!(processes_with(&tok), Vec::<u32>::new(), "the agent process is gone");
    assert!(!ws.exists(), "the worktree folder is gone");
    assert_eq!(worktrees(&repo), vec![(repo.clone(), "main".to_string())], "git forgot the worktree");
    assert!(!server.data_dir.join("sessions/doomed").exists(), "the controller's files for it are gone");
    assert_eq!(tip(&repo, "doom/doomed").as_deref(), Some("demo-agent|doomed: Task of doomed"), "the branch is kept");
    cleanup.finish();
}

/// A `readonly` session reads the repository at the base: the agent runs in a checkout at no
/// branch, its commit reaches no branch, no pull request step runs, and deleting it leaves the
/// repository as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readonly_session_leaves_no_branch_and_no_change() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "scout");
    let refs = || git(&repo, &["for-each-ref", "--format=%(refname) %(objectname)"]);
    let (head, before) = (git(&repo, &["rev-parse", "HEAD"]), refs());
    let tok = token("survey");
    server.create("projects", &project("scout", &repo, json!({}))).await;
    let s = session("survey", "scout", &tok, json!({"workspace": {"kind": "readonly"}}));
    let created = server.create("sessions", &s).await;
    assert_eq!(created["spec"]["workspace"], json!({"kind": "readonly"}));
    let obj = wait_all(&server, &["survey"], READY, "Ready", ready).await.remove(0);
    let ws = workspace(&server, "scout", "survey");
    let at =
        condition(&obj, "WorkspaceReady").expect("WorkspaceReady")["message"].as_str().unwrap_or_default().to_string();
    assert!(at.starts_with(&format!("readonly at {} at no branch (", ws.display())), "{at}");
    assert_eq!(obj["status"]["workspace"]["branch"], "", "{obj:#}");
    // The scripted agent commits its note where it runs: in the checkout, on no branch.
    eventually(READY, "the agent's note committed in the checkout", || {
        let subject = git(&ws, &["log", "-1", "--format=%s"]);
        (subject == "survey: Task of survey").then_some(()).ok_or(subject)
    })
    .await;
    assert_eq!(git(&ws, &["branch", "--show-current"]), "", "the checkout is on no branch");
    assert_eq!(refs(), before, "no branch or ref of the repository moved");
    assert!(condition(&obj, "PullRequestOpen").is_none(), "no pull request step: {obj:#}");

    server.aoctl(&["delete", "session", "survey", "--wait"]).ok();
    assert!(!ws.exists(), "the checkout is gone");
    assert_eq!(worktrees(&repo), vec![(repo.clone(), "main".to_string())], "git forgot the worktree");
    assert_eq!((refs(), git(&repo, &["rev-parse", "HEAD"])), (before, head), "the repository is as it was");
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");

    // A branch is no part of such a session, so naming one is refused, naming the field.
    let bad = session("named", "scout", &tok, json!({"workspace": {"kind": "none"}, "branch": "x"}));
    let out = server.json("POST", &format!("{API}/sessions"), &bad).await;
    assert_eq!(out.code, 422, "{}", out.text());
    assert!(out.text().contains("spec.branch: a `none` workspace has no branch"), "{}", out.text());
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_session_keeps_its_workspace_and_resumes() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let tmux = Tmux::of(&server);
    let repo = agent_repo(server.tmp.path(), "pause");
    let log = server.tmp.path().join("launches.log");
    let tok = token("nap");
    let manifest = |stopped: Option<bool>| {
        let mut extra = json!({"env": {"E2E_LAUNCH_LOG": log}});
        if let Some(s) = stopped {
            extra["stopped"] = json!(s);
        }
        write_manifest(
            &server.tmp.path().join("pause.yaml"),
            &[project("pause", &repo, json!({})), session("nap", "pause", &tok, extra)],
        )
    };
    server.aoctl(&["apply", "-f", &manifest(None)]).ok();
    wait_all(&server, &["nap"], READY, "Ready", ready).await;
    let first = one_agent(&tok).await;
    agent_committed(&repo, "pause/nap", "nap").await;

    let patch = json!({"spec": {"stopped": true}});
    server.json("PATCH", &format!("{API}/sessions/nap"), &patch).await.expect(200);
    let obj = wait_all(&server, &["nap"], READY, "Stopped", |o| {
        phase(o) == "Stopped" && condition(o, "RuntimeReady").is_some_and(|c| c["reason"] == "Stopped")
    })
    .await
    .remove(0);
    let before = restarts(&obj);
    assert!(!tmux.has("nap"), "the runtime is gone");
    assert_eq!(processes_with(&tok), Vec::<u32>::new(), "the agent process is gone");
    let ws = workspace(&server, "pause", "nap");
    assert!(ws.join("notes/nap.md").is_file(), "the workspace is kept with the agent's work");
    assert!(worktrees(&repo).iter().any(|(p, _)| *p == ws), "git still lists the worktree");

    let out = server.aoctl(&["apply", "-f", &manifest(Some(false))]);
    out.ok();
    assert!(out.stdout.contains("session/nap configured"), "{out}");
    let obj =
        wait_all(&server, &["nap"], READY, "running again", |o| ready(o) && is_true(o, "RuntimeReady")).await.remove(0);
    let second = one_agent(&tok).await;
    assert_ne!(first, second, "a new agent process");
    assert_eq!(restarts(&obj), before, "resuming is not a restart: {obj:#}");
    launched(&log, "nap", 2).await;
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrent_sessions_queues_the_rest() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let tmux = Tmux::of(&server);
    let repo = agent_repo(server.tmp.path(), "queue");
    let names = ["q1", "q2", "q3", "q4"];
    let mut docs = vec![project("queue", &repo, json!({"maxConcurrentSessions": 2}))];
    docs.extend(names.iter().map(|n| session(n, "queue", &token(n), json!({}))));
    server.aoctl(&["apply", "-f", &write_manifest(&server.tmp.path().join("queue.yaml"), &docs)]).ok();

    let queued = |o: &Value| phase(o) == "Queued";
    wait_all(&server, &["q1", "q2"], READY, "Ready", ready).await;
    let objs = wait_all(&server, &["q3", "q4"], READY, "Queued", queued).await;
    for (i, o) in objs.iter().enumerate() {
        let msg = condition(o, "Ready").and_then(|c| c["message"].as_str()).unwrap_or_default();
        assert!(msg.contains(&format!("position {}", i + 1)), "{o:#}");
    }
    assert_eq!(tmux.sessions(), ["q1", "q2"], "only two agents run");
    for n in ["q3", "q4"] {
        assert!(!workspace(&server, "queue", n).exists(), "a queued session has no workspace yet");
    }

    server.aoctl(&["delete", "session", "q1", "--wait"]).ok();
    wait_all(&server, &["q3"], READY, "Ready after a slot freed", ready).await;
    let q4 = wait_all(&server, &["q4"], READY, "still Queued", queued).await.remove(0);
    let msg = condition(&q4, "Ready").and_then(|c| c["message"].as_str()).unwrap_or_default();
    assert!(msg.contains("position 1"), "{q4:#}");
    assert_eq!(tmux.sessions(), ["q2", "q3"], "the queued session took the freed slot");
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_policy_decides_what_follows_an_exit() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let tmux = Tmux::of(&server);
    let repo = agent_repo(server.tmp.path(), "policy");
    let log = server.tmp.path().join("launches.log");
    let env = |extra: Value| {
        let mut env = json!({"E2E_LAUNCH_LOG": log});
        env.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        env
    };
    let victim = token("victim");
    let docs = [
        project("policy", &repo, json!({})),
        // Exits 3 at its first launch only.
        session(
            "flaky",
            "policy",
            &token("flaky"),
            json!({"restartPolicy": "OnFailure", "env": env(json!({"E2E_EXIT_CODE": "3", "E2E_EXIT_TIMES": "1"}))}),
        ),
        session(
            "fatal",
            "policy",
            &token("fatal"),
            json!({"restartPolicy": "Never", "env": env(json!({"E2E_EXIT_CODE": "3"}))}),
        ),
        session("victim", "policy", &victim, json!({"env": env(json!({}))})),
        // Exits 3 at every launch.
        session("crashloop", "policy", &token("crashloop"), json!({"env": env(json!({"E2E_EXIT_CODE": "3"}))})),
    ];
    server.aoctl(&["apply", "-f", &write_manifest(&server.tmp.path().join("policy.yaml"), &docs)]).ok();

    // OnFailure: the failed agent is started again and the restart is counted.
    wait_all(&server, &["flaky"], READY, "restarted once and Ready", |o| ready(o) && restarts(o) == 1).await;
    launched(&log, "flaky", 2).await;
    let ev = event(&server, "flaky", "Restarting").await.expect("a Restarting event");
    let msg = ev["message"].as_str().unwrap_or_default();
    assert!(msg.contains("exited with code 3") && msg.contains("restart 1"), "{ev:#}");
    let out = server.aoctl(&["describe", "session", "flaky"]);
    out.ok();
    assert!(out.stdout.lines().any(|l| l.contains("Restarting") && l.contains("code 3")), "{out}");

    // Never: the session fails and stays failed.
    let fatal = wait_all(&server, &["fatal"], READY, "Failed", |o| phase(o) == "Failed").await.remove(0);
    for c in ["Ready", "RuntimeReady"] {
        let cond = condition(&fatal, c).expect("condition");
        assert_eq!((&cond["status"], &cond["reason"]), (&json!("False"), &json!("AgentExited")), "{fatal:#}");
    }
    assert_eq!(restarts(&fatal), 0, "{fatal:#}");
    assert!(event(&server, "fatal", "AgentExited").await.is_some(), "an AgentExited event");

    // An agent killed from outside counts as a failure and is restarted.
    wait_all(&server, &["victim"], READY, "Ready", ready).await;
    let agent = one_agent(&victim).await;
    assert_eq!(tmux.pane_pid("victim"), Some(agent), "the pane runs the agent itself");
    // SAFETY: kill(2) with a pid read just now; at worst it names a process that already ended.
    assert_eq!(unsafe { libc::kill(agent as i32, libc::SIGKILL) }, 0, "kill -9 {agent}");
    wait_all(&server, &["victim"], READY, "restarted once and Ready", |o| ready(o) && restarts(o) == 1).await;
    let again = one_agent(&victim).await;
    assert_ne!(again, agent, "a new agent process");
    launched(&log, "victim", 2).await;
    let out = server.aoctl(&["describe", "session", "victim"]);
    assert!(out.stdout.lines().any(|l| l.contains("Restarting") && l.contains("restart 1")), "{out}");

    // A crash loop backs off between restarts; meanwhile the session is not Ready.
    let looping = wait_all(&server, &["crashloop"], READY, "restarted twice and backing off", |o| {
        restarts(o) >= 2 && condition(o, "RuntimeReady").is_some_and(|c| c["reason"] == "BackOff")
    })
    .await
    .remove(0);
    assert!(launch_count(&log, "crashloop") >= 3, "{looping:#}");
    assert_eq!(phase(&looping), "Provisioning", "{looping:#}");
    assert!(!ready(&looping), "Ready while its agent is dead and waiting to be restarted: {looping:#}");

    // Failing with Never does not launch again later.
    assert_eq!(launch_count(&log, "fatal"), 1, "restartPolicy Never launched the agent again");
    cleanup.finish();
}
