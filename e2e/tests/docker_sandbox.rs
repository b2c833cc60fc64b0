//! The sandbox of docker sessions, attacked from inside a real container: a project on a real git
//! repository with two docker sessions in the git-capable test image `aoctl-agent:git` (built by
//! `e2e/docker/build-image.sh --git` when missing). From inside session A's container
//! (`docker exec`) every way to reach the main repository or session B is tried — hooks, config
//! (`core.fsmonitor`, `core.hooksPath`), the main repository's refs, B's branch, `packed-refs`, a
//! `commondir`, replacing `/workspace/.git`, the main objects folder — and the host's main
//! repository (every ref, its config, its hooks) must be byte-identical afterwards, and `git` on
//! the host in A's work tree must run nothing the agent planted. Then A's own commit reaches A's
//! branch in the main repository through the controller, and `status.workspace.headSha` says so.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::docker_sessions::{
    box_repo, build_image, container_of, docker, engine, inspect, project, ready, unique, Containers,
};
use crate::harness::Server;
use crate::lifecycle::eventually;

/// The busybox image with git.
const GIT_IMAGE: &str = "aoctl-agent:git";
/// How long the controller may take to move a commit (docker agents are looked at every few seconds).
const MOVED: Duration = Duration::from_secs(60);

/// `git` on the host, without the user's configuration.
fn host_git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .stdin(Stdio::null())
        .output()
        .expect("git runs")
}

#[track_caller]
fn host_git_ok(dir: &Path, args: &[&str]) -> String {
    let out = host_git(dir, args);
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Everything of the main repository an agent must not change: every ref with its commit, the
/// config, `packed-refs` and the hooks folder (names and contents), as one comparable text.
fn host_state(repo: &Path) -> String {
    let git = repo.join(".git");
    let mut state = host_git_ok(repo, &["for-each-ref", "--format=%(refname) %(objectname)"]);
    state.push_str("\n--- HEAD\n");
    state.push_str(&fs::read_to_string(git.join("HEAD")).unwrap_or_default());
    state.push_str("--- config\n");
    state.push_str(&fs::read_to_string(git.join("config")).expect("the main config"));
    state.push_str("--- packed-refs\n");
    state.push_str(&fs::read_to_string(git.join("packed-refs")).unwrap_or_else(|_| "(none)\n".into()));
    let mut hooks: Vec<_> = fs::read_dir(git.join("hooks")).into_iter().flatten().flatten().collect();
    hooks.sort_by_key(|e| e.file_name());
    for hook in hooks {
        state.push_str(&format!("--- hooks/{}\n", hook.file_name().to_string_lossy()));
        state.push_str(&String::from_utf8_lossy(&fs::read(hook.path()).unwrap_or_default()));
    }
    state
}

/// Runs `script` with `sh -c` in `container` (as its user, in /workspace); exit code and output.
fn exec(container: &str, script: &str) -> (i32, String) {
    let out = docker(&["exec", "-w", "/workspace", container, "sh", "-c", script]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// A docker Session in the git image.
fn git_session(name: &str, project: &str) -> Value {
    json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
        "spec": {"project": project, "prompt": format!("Task of {name}"), "runtime": "docker",
            "docker": {"image": GIT_IMAGE, "memory": "256Mi", "pidsLimit": 128},
            "agent": {"command": ["sh", "./scripts/box-agent", "{promptFile}"]}}})
}

fn workspace_of(obj: &Value) -> (PathBuf, String) {
    let ws = &obj["status"]["workspace"];
    (PathBuf::from(ws["path"].as_str().expect("status.workspace.path")), ws["branch"].as_str().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_sandbox_keeps_the_main_repository_out_of_reach_and_moves_only_the_sessions_branch() {
    let _turn = engine().await;
    build_image(&["--git", GIT_IMAGE]);
    let (a, b) = (unique("sbx-a"), unique("sbx-b"));
    let _containers = Containers::new(&[&a, &b]);
    let server = Server::start().await;
    let repo = box_repo(server.tmp.path(), "sandboxed");
    server.create("projects", &project("sandboxed", &repo)).await;
    server.create("sessions", &git_session(&a, "sandboxed")).await;
    server.create("sessions", &git_session(&b, "sandboxed")).await;
    let obj_a = ready(&server, &a).await;
    let obj_b = ready(&server, &b).await;
    let container = container_of(&obj_a, &a);
    let (work, branch_a) = workspace_of(&obj_a);
    let (_, branch_b) = workspace_of(&obj_b);
    let sandbox = PathBuf::from(format!("{}.git", work.display()));
    assert!(sandbox.is_dir(), "the sandbox git folder {} next to the work tree", sandbox.display());
    let main = repo.canonicalize().unwrap();
    let main_git = main.join(".git");
    let base = host_git_ok(&main, &["rev-parse", "main"]);
    assert_eq!(host_git_ok(&main, &["rev-parse", &branch_a]), base, "A's branch is made in the main repository");
    assert_eq!(obj_a["status"]["workspace"]["headSha"], base.as_str());

    // Git works inside, on A's branch, over the borrowed objects.
    let (code, out) = exec(&container, "git symbolic-ref HEAD && git log --format=%H -1 && git status --porcelain");
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with(&format!("refs/heads/{branch_a}\n{base}\n")), "{out}");

    let before = host_state(&main);
    let sandbox_config = fs::read(sandbox.join("config")).unwrap();
    let marker = server.tmp.path().join("planted-ran");
    // A script in the (shared, writable) work tree that would betray running on the host.
    fs::write(work.join("evil.sh"), format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    let evil = "/workspace/evil.sh";
    let m = main_git.display();

    // Each attempt: (what, script, must the command itself fail).
    let attempts: Vec<(&str, String, bool)> = vec![
        ("a hook in /workspace/.git", format!("mkdir -p .git/hooks && cp {evil} .git/hooks/pre-commit"), true),
        ("a hook in the sandbox", format!("cp {evil} /aoctl/git/hooks/post-checkout"), true),
        ("core.fsmonitor", format!("git config core.fsmonitor {evil}"), true),
        ("core.hooksPath", "mkdir -p hooks && git config core.hooksPath /workspace/hooks".into(), true),
        ("the sandbox config replaced", "echo '[core]' > /tmp/c && mv /tmp/c /aoctl/git/config".into(), true),
        ("the sandbox config unlinked", "rm -f /aoctl/git/config".into(), true),
        ("the alternates", "echo /tmp > /aoctl/git/objects/info/alternates".into(), true),
        ("the main objects folder", format!("touch {m}/objects/evil"), true),
        ("a main object folder", format!("mkdir {m}/objects/00"), true),
        ("/workspace/.git unlinked", "rm -f /workspace/.git".into(), true),
        ("/workspace/.git renamed", "mv /workspace/.git /workspace/git-old".into(), true),
        ("/workspace/.git rewritten", format!("echo 'gitdir: {m}' > /workspace/.git"), true),
        // These may succeed inside the container; they must change nothing on the host.
        (
            "main's refs/heads/main",
            format!("mkdir -p {m}/refs/heads && git rev-parse HEAD > {m}/refs/heads/main"),
            false,
        ),
        ("main's packed-refs", format!("echo \"$(git rev-parse HEAD) refs/heads/main\" >> {m}/packed-refs"), false),
        ("git push to the main repository", format!("git push {m} HEAD:refs/heads/{branch_b}"), false),
        ("B's branch in A's sandbox", format!("git update-ref refs/heads/{branch_b} HEAD"), false),
        ("main in A's sandbox", "git update-ref refs/heads/main HEAD".into(), false),
        (
            "the sandbox's packed-refs",
            format!("echo \"$(git rev-parse HEAD) refs/heads/{branch_b}\" > /aoctl/git/packed-refs"),
            false,
        ),
        ("a commondir in the sandbox", format!("echo {m} > /aoctl/git/commondir"), false),
    ];
    for (what, script, must_fail) in &attempts {
        let (code, out) = exec(&container, script);
        eprintln!("attempt: {what}: exit {code}: {}", out.trim());
        if *must_fail {
            assert_ne!(code, 0, "{what} succeeded inside the container: {out}");
        }
    }
    // Whatever the container now holds: G's config and hooks as the controller wrote them, the
    // gitfile intact, nothing of the main repository changed.
    assert_eq!(fs::read(sandbox.join("config")).unwrap(), sandbox_config, "the sandbox config changed");
    assert_eq!(fs::read_dir(sandbox.join("hooks")).unwrap().count(), 0, "a hook landed in the sandbox");
    assert_eq!(fs::read_to_string(work.join(".git")).unwrap(), "gitdir: /aoctl/git\n");
    assert!(!main_git.join("objects/evil").exists());
    // Give the controller a few looks at the workspace, then compare byte for byte.
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(host_state(&main), before, "the main repository changed");

    // `git` on the host in A's work tree refuses, and runs nothing; neither does git in main.
    let out = host_git(&work, &["status"]);
    assert!(!out.status.success(), "git status on the host in the sandbox worked: {out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a git repository"), "{out:?}");
    let out = Command::new("git").arg("-C").arg(&work).arg("status").stdin(Stdio::null()).output().unwrap();
    assert!(!out.status.success(), "{out:?}");
    host_git_ok(&main, &["status"]);
    assert!(!marker.exists(), "something the agent planted ran on the host");

    // The agent tidies up what breaks its own git (a commondir names a folder it cannot read),
    // then commits: the commit reaches A's branch in the main repository through the controller.
    let (code, out) = exec(&container, "rm -f /aoctl/git/commondir && rm -f /aoctl/git/packed-refs");
    assert_eq!(code, 0, "{out}");
    let script = "echo 'the agent was here' > agent.txt && git add agent.txt && \
                  git -c user.name=agent -c user.email=agent@box.invalid commit -q -m 'agent work' && git rev-parse HEAD";
    let (code, out) = exec(&container, script);
    assert_eq!(code, 0, "the agent's commit: {out}");
    let commit = out.trim().lines().last().unwrap_or_default().to_string();
    assert_eq!(commit.len(), 40, "{out}");
    eventually(MOVED, "the agent's commit on its branch in the main repository", || {
        let at = host_git(&main, &["rev-parse", &branch_a]);
        let at = String::from_utf8_lossy(&at.stdout).trim().to_string();
        if at == commit {
            Ok(())
        } else {
            Err(at)
        }
    })
    .await;
    let obj = server.wait_for("sessions", &a, MOVED, |o| o["status"]["workspace"]["headSha"] == commit.as_str()).await;
    assert_eq!(obj["status"]["workspace"]["branch"], branch_a.as_str());
    assert_eq!(host_git_ok(&main, &["show", &format!("{commit}:agent.txt")]), "the agent was here");
    host_git_ok(&main, &["fsck", "--connectivity-only", "--no-dangling"]);
    // Only A's branch moved, and the config and hooks are still the same bytes.
    let after = host_state(&main);
    let changed: Vec<&str> = after.lines().filter(|l| !before.lines().any(|b| b == *l)).collect();
    assert_eq!(changed, vec![format!("refs/heads/{branch_a} {commit}").as_str()], "{after}");
    assert_eq!(host_git_ok(&main, &["rev-parse", &branch_b]), base, "B's branch");
    assert_eq!(host_git_ok(&main, &["rev-parse", "main"]), base, "main");
    assert!(!marker.exists());
    assert_eq!(inspect(&container)["State"]["Running"], true);

    // Deleting the sessions removes both work trees and sandboxes, and keeps the branches.
    server.aoctl(&["delete", "session", &a, &b, "--wait=60s"]).ok();
    assert!(!work.exists() && !sandbox.exists(), "the workspace or its sandbox is left");
    assert_eq!(host_git_ok(&main, &["rev-parse", &branch_a]), commit);
}
