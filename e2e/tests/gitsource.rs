//! GitSource end to end: the real server syncing real bare repositories on disk. Commits that
//! add, change and remove sessions (with and without prune), a broken manifest, a force-push, a
//! repository that disappears, drift (and a person's Merge when green, which is kept),
//! `ao.dev/reconcile: disabled`, suspend, `aoctl reconcile`, a controller killed with SIGKILL in
//! the middle of applying a revision, and deleting a source.
//! The sessions are `stopped: true` in a project whose repository does not exist, so no agent runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{Server, API, NO_REPO};
use crate::lifecycle::{condition, is_true, READY};

/// A repository the tests commit manifests to (`work/`), pushed to the bare one the source
/// fetches (`fleet.git`).
struct Fleet {
    work: PathBuf,
    bare: PathBuf,
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=aoctl e2e", "-c", "user.email=e2e@aoctl.invalid", "-c", "commit.gpgsign=false"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Fleet {
    fn new(parent: &Path) -> Fleet {
        let (work, bare) = (parent.join("fleet-work"), parent.join("fleet.git"));
        std::fs::create_dir_all(&work).expect("work folder");
        std::fs::create_dir_all(&bare).expect("bare folder");
        git(&bare, &["init", "-q", "--bare", "-b", "main"]);
        git(&work, &["init", "-q", "-b", "main"]);
        std::fs::write(work.join("README.md"), "# fleet\n").expect("README");
        Fleet { work, bare }
    }

    fn url(&self) -> &str {
        self.bare.to_str().expect("UTF-8 path")
    }

    /// Writes (`Some`) and removes (`None`) files, commits and force-pushes; the revision the
    /// source reports for it.
    fn commit(&self, files: &[(&str, Option<&str>)]) -> String {
        for (path, text) in files {
            let file = self.work.join(path);
            match text {
                Some(t) => {
                    std::fs::create_dir_all(file.parent().expect("parent")).expect("folder");
                    std::fs::write(&file, t).expect("write manifest");
                }
                None => std::fs::remove_file(&file).expect("remove manifest"),
            }
        }
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "--allow-empty", "-m", "change"]);
        self.push()
    }

    fn push(&self) -> String {
        git(&self.work, &["push", "-q", "-f", self.url(), "HEAD:main"]);
        format!("main@sha1:{}", git(&self.work, &["rev-parse", "HEAD"]))
    }
}

fn project_yaml() -> String {
    format!("apiVersion: ao.dev/v1alpha1\nkind: Project\nmetadata:\n  name: fleet\nspec:\n  path: {NO_REPO}\n")
}

fn session_yaml(name: &str, prompt: &str) -> String {
    format!(
        "apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata:\n  name: {name}\nspec:\n  project: fleet\n  prompt: {prompt}\n  stopped: true\n"
    )
}

fn source(name: &str, url: &str, prune: bool, interval: &str) -> Value {
    json!({"apiVersion": "ao.dev/v1alpha1", "kind": "GitSource", "metadata": {"name": name},
        "spec": {"url": url, "path": "fleet", "prune": prune, "interval": interval,
            "policy": {"kinds": ["Project", "Session"], "projectRoots": ["/nonexistent"]}}})
}

fn status<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.pointer(&format!("/status/{field}")).and_then(Value::as_str)
}

/// Waits until the source reports `revision` applied and Ready.
async fn applied(server: &Server, name: &str, revision: &str) -> Value {
    server
        .wait_for("gitsources", name, READY, |o| {
            status(o, "lastAppliedRevision") == Some(revision) && is_true(o, "Ready")
        })
        .await
}

/// The sessions not being deleted, with their prompts.
/// Waits until the source reports `revision` attempted and Stalled.
async fn stalled_at(server: &Server, name: &str, revision: &str) -> Value {
    server
        .wait_for("gitsources", name, READY, |o| {
            condition(o, "Stalled").is_some_and(|c| c["status"] == "True")
                && status(o, "lastAttemptedRevision") == Some(revision)
        })
        .await
}

async fn sessions(server: &Server) -> BTreeMap<String, String> {
    let list = server.get_path(&format!("{API}/sessions")).await.expect(200);
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter(|s| s.pointer("/metadata/deletionTimestamp").is_none_or(Value::is_null))
        .map(|s| {
            let name = s["metadata"]["name"].as_str().unwrap_or_default().to_string();
            (name, s["spec"]["prompt"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

/// Waits until the live sessions are exactly `want` (name → prompt).
async fn sessions_become(server: &Server, want: &[(&str, &str)]) {
    let want: BTreeMap<String, String> = want.iter().map(|(n, p)| (n.to_string(), p.to_string())).collect();
    let deadline = Instant::now() + READY;
    loop {
        let got = sessions(server).await;
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "sessions: {got:?}, expected {want:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until an object is gone.
async fn gone(server: &Server, plural: &str, name: &str) {
    let deadline = Instant::now() + READY;
    while let Some(obj) = server.object(plural, name).await {
        assert!(Instant::now() < deadline, "{plural}/{name} is still there: {obj:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The reasons of the events about GitSource `name`.
async fn event_reasons(server: &Server, name: &str) -> Vec<String> {
    let list = server.get_path(&format!("{API}/events")).await.expect(200);
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter(|e| e["involvedObject"]["kind"] == "GitSource" && e["involvedObject"]["name"] == name)
        .filter_map(|e| e["reason"].as_str().map(str::to_string))
        .collect()
}

async fn patch(server: &Server, plural: &str, name: &str, body: Value) -> Value {
    server.json("PATCH", &format!("{API}/{plural}/{name}"), &body).await.expect(200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_add_change_and_remove_sessions_and_prune_follows() {
    let server = Server::start().await;
    let fleet = Fleet::new(server.tmp.path());
    let rev1 = fleet.commit(&[
        ("fleet/project.yaml", Some(&project_yaml())),
        ("fleet/sessions/a.yaml", Some(&session_yaml("a", "first"))),
        ("fleet/sessions/b.yaml", Some(&session_yaml("b", "second"))),
    ]);
    server.create("gitsources", &source("fleet", fleet.url(), true, "1s")).await;
    let obj = applied(&server, "fleet", &rev1).await;
    assert_eq!(obj["status"]["inventory"].as_array().map(Vec::len), Some(3), "{obj:#}");
    sessions_become(&server, &[("a", "first"), ("b", "second")]).await;
    let a = server.object("sessions", "a").await.expect("session a");
    assert_eq!(a["metadata"]["annotations"]["ao.dev/managed-by"], "gitsource/fleet");
    let owners: Vec<&str> =
        a["metadata"]["ownerReferences"].as_array().unwrap().iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(owners, ["GitSource", "Project"]);
    let table = server.aoctl(&["get", "gitsources"]);
    table.ok();
    assert!(table.stdout.contains(&rev1[..22]), "the table shows the revision:\n{table}");

    let rev2 = fleet.commit(&[
        ("fleet/sessions/a.yaml", Some(&session_yaml("a", "changed"))),
        ("fleet/sessions/b.yaml", None),
        ("fleet/sessions/more/c.yml", Some(&session_yaml("c", "third"))),
    ]);
    applied(&server, "fleet", &rev2).await;
    sessions_become(&server, &[("a", "changed"), ("c", "third")]).await;
    gone(&server, "sessions", "b").await;
    let reasons = event_reasons(&server, "fleet").await;
    assert!(reasons.iter().any(|r| r == "Applied") && reasons.iter().any(|r| r == "Pruned"), "{reasons:?}");

    // Deleting a pruning source deletes what it applied.
    server.send("DELETE", &format!("{API}/gitsources/fleet"), None, vec![]).await.expect(200);
    gone(&server, "sessions", "a").await;
    gone(&server, "sessions", "c").await;
    gone(&server, "projects", "fleet").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_prune_removed_objects_stay_and_outlive_the_source() {
    let server = Server::start().await;
    let fleet = Fleet::new(server.tmp.path());
    fleet.commit(&[
        ("fleet/project.yaml", Some(&project_yaml())),
        ("fleet/a.yaml", Some(&session_yaml("a", "first"))),
        ("fleet/b.yaml", Some(&session_yaml("b", "second"))),
    ]);
    server.create("gitsources", &source("keep", fleet.url(), false, "1s")).await;
    sessions_become(&server, &[("a", "first"), ("b", "second")]).await;
    let rev2 = fleet.commit(&[("fleet/b.yaml", None)]);
    let obj = applied(&server, "keep", &rev2).await;
    let inventory: Vec<&str> =
        obj["status"]["inventory"].as_array().unwrap().iter().filter_map(|e| e["name"].as_str()).collect();
    assert_eq!(inventory, ["fleet", "a"], "{obj:#}");
    let b = server.object("sessions", "b").await.expect("b stays");
    let owners: Vec<&str> =
        b["metadata"]["ownerReferences"].as_array().unwrap().iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(owners, ["Project"], "without prune the source owns nothing");

    server.send("DELETE", &format!("{API}/gitsources/keep"), None, vec![]).await.expect(200);
    gone(&server, "gitsources", "keep").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    sessions_become(&server, &[("a", "first"), ("b", "second")]).await;
    assert!(server.object("projects", "fleet").await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_manifest_stalls_the_source_and_the_last_good_revision_stays() {
    let server = Server::start().await;
    let fleet = Fleet::new(server.tmp.path());
    let rev1 = fleet.commit(&[
        ("fleet/project.yaml", Some(&project_yaml())),
        ("fleet/sessions/a.yaml", Some(&session_yaml("a", "first"))),
    ]);
    server.create("gitsources", &source("fleet", fleet.url(), true, "1s")).await;
    applied(&server, "fleet", &rev1).await;

    // Line 7 holds the misspelt field.
    let bad =
        "apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata:\n  name: fix\nspec:\n  project: fleet\n  promt: typo\n";
    let rev2 = fleet.commit(&[
        ("fleet/sessions/a.yaml", Some(&session_yaml("a", "changed"))),
        ("fleet/sessions/fix.yaml", Some(bad)),
    ]);
    let obj = stalled_at(&server, "fleet", &rev2).await;
    let stalled = condition(&obj, "Stalled").unwrap();
    let message = stalled["message"].as_str().unwrap();
    assert!(message.starts_with("fleet/sessions/fix.yaml:7:") && message.contains("spec.promt"), "{stalled:#}");
    let ready = condition(&obj, "Ready").unwrap();
    assert_eq!((ready["status"].as_str(), ready["reason"].as_str()), (Some("False"), Some("InvalidManifest")));
    assert_eq!(status(&obj, "lastAppliedRevision"), Some(rev1.as_str()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    sessions_become(&server, &[("a", "first")]).await;
    let out = server.aoctl(&["reconcile", "gitsource", "fleet"]);
    assert_ne!(out.code, 0, "{out}");
    assert!(out.stderr.contains("InvalidManifest") && out.stderr.contains("fix.yaml:7"), "{out}");
    let describe = server.aoctl(&["describe", "gitsource", "fleet"]);
    assert!(describe.ok().stdout.contains("fix.yaml:7"), "{describe}");

    let rev3 = fleet.commit(&[("fleet/sessions/fix.yaml", Some(&session_yaml("fix", "fixed")))]);
    let obj = applied(&server, "fleet", &rev3).await;
    assert!(condition(&obj, "Stalled").is_none(), "a good revision clears Stalled: {obj:#}");
    sessions_become(&server, &[("a", "changed"), ("fix", "fixed")]).await;
}

/// A repository declares only what its source's policy allows: a Session with a custom agent
/// command stalls the revision, naming the file and field, until the policy allows commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_agent_command_is_refused_by_the_default_policy_and_applied_once_allowed() {
    let server = Server::start().await;
    let fleet = Fleet::new(server.tmp.path());
    let rev1 = fleet.commit(&[
        ("fleet/project.yaml", Some(&project_yaml())),
        ("fleet/sessions/a.yaml", Some(&session_yaml("a", "first"))),
    ]);
    server.create("gitsources", &source("fleet", fleet.url(), true, "1s")).await;
    applied(&server, "fleet", &rev1).await;

    let custom =
        format!("{}  agent: {{command: [sh, -c, 'echo from the fleet repository']}}\n", session_yaml("probe", "x"));
    let rev2 = fleet.commit(&[("fleet/sessions/probe.yaml", Some(&custom))]);
    let obj = stalled_at(&server, "fleet", &rev2).await;
    let message = condition(&obj, "Stalled").unwrap()["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with(
            "fleet/sessions/probe.yaml:1: spec.agent.command: a custom agent command may not come from GitSource fleet"
        ),
        "{message}"
    );
    assert!(server.object("sessions", "probe").await.is_none(), "nothing of the revision was applied");

    patch(&server, "gitsources", "fleet", json!({"spec": {"policy": {"commands": true}}})).await;
    applied(&server, "fleet", &rev2).await;
    let probe = server.object("sessions", "probe").await.expect("the session, once commands are allowed");
    assert_eq!(probe["spec"]["agent"]["command"][0], "sh", "{probe:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_push_is_followed_and_a_vanished_repository_leaves_the_objects() {
    let server = Server::start().await;
    let fleet = Fleet::new(server.tmp.path());
    fleet.commit(&[("fleet/project.yaml", Some(&project_yaml())), ("fleet/a.yaml", Some(&session_yaml("a", "one")))]);
    let rev2 = fleet.commit(&[("fleet/b.yaml", Some(&session_yaml("b", "two")))]);
    server.create("gitsources", &source("fleet", fleet.url(), true, "1s")).await;
    applied(&server, "fleet", &rev2).await;
    sessions_become(&server, &[("a", "one"), ("b", "two")]).await;

    // History rewritten: b's commit is gone, c's replaces it.
    git(&fleet.work, &["reset", "-q", "--hard", "HEAD~1"]);
    let rewritten = fleet.commit(&[("fleet/c.yaml", Some(&session_yaml("c", "three")))]);
    applied(&server, "fleet", &rewritten).await;
    sessions_become(&server, &[("a", "one"), ("c", "three")]).await;

    std::fs::remove_dir_all(&fleet.bare).expect("remove the repository");
    let obj = server
        .wait_for("gitsources", "fleet", READY, |o| {
            condition(o, "Ready").is_some_and(|c| c["status"] == "False" && c["reason"] == "FetchFailed")
        })
        .await;
    assert_eq!(status(&obj, "lastAppliedRevision"), Some(rewritten.as_str()));
    // The event is recorded just after the status that says so.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !event_reasons(&server, "fleet").await.iter().any(|r| r == "FetchFailed") {
        assert!(tokio::time::Instant::now() < deadline, "no FetchFailed event");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    sessions_become(&server, &[("a", "one"), ("c", "three")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_is_undone_at_the_next_interval_and_disabled_objects_are_left_alone() {
    let server = Server::start().await;
    let fleet = Fleet::new(server.tmp.path());
    let rev1 = fleet.commit(&[
        ("fleet/project.yaml", Some(&project_yaml())),
        ("fleet/a.yaml", Some(&session_yaml("a", "one"))),
        ("fleet/b.yaml", Some(&session_yaml("b", "two"))),
    ]);
    server.create("gitsources", &source("fleet", fleet.url(), true, "1s")).await;
    applied(&server, "fleet", &rev1).await;

    // Merge when green, as the dashboard sets it, is a person's action: it is kept.
    let merge = json!({"approved-and-green": {"auto": true, "action": "merge"}});
    let by_hand = json!({"metadata": {"labels": {"by": "hand"}}, "spec": {"prompt": "by hand", "reactions": merge}});
    patch(&server, "sessions", "a", by_hand).await;
    let b = json!({"metadata": {"annotations": {"ao.dev/reconcile": "disabled"}}, "spec": {"prompt": "mine now"}});
    patch(&server, "sessions", "b", b).await;
    let a = server
        .wait_for("sessions", "a", READY, |o| o["spec"]["prompt"] == "one" && o["metadata"]["labels"]["by"].is_null())
        .await;
    assert_eq!(a["metadata"]["annotations"]["ao.dev/managed-by"], "gitsource/fleet");
    tokio::time::sleep(Duration::from_secs(3)).await;
    sessions_become(&server, &[("a", "one"), ("b", "mine now")]).await;
    let a = server.object("sessions", "a").await.expect("session a");
    assert_eq!(a["spec"]["reactions"], merge, "a person's Merge when green outlasts the syncs: {a:#}");

    // Removed from the repository with prune on, the disabled one is not pruned either.
    let rev2 = fleet.commit(&[("fleet/b.yaml", None), ("fleet/a.yaml", Some(&session_yaml("a", "newer")))]);
    applied(&server, "fleet", &rev2).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    sessions_become(&server, &[("a", "newer"), ("b", "mine now")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_stops_syncing_and_reconcile_syncs_now() {
    let server = Server::start().await;
    let fleet = Fleet::new(server.tmp.path());
    let rev1 = fleet
        .commit(&[("fleet/project.yaml", Some(&project_yaml())), ("fleet/a.yaml", Some(&session_yaml("a", "one")))]);
    // An hour between syncs: only the request syncs sooner.
    server.create("gitsources", &source("fleet", fleet.url(), false, "1h")).await;
    applied(&server, "fleet", &rev1).await;

    let rev2 = fleet.commit(&[("fleet/a.yaml", Some(&session_yaml("a", "two")))]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    sessions_become(&server, &[("a", "one")]).await;
    let out = server.aoctl(&["reconcile", "gitsource", "fleet"]);
    out.ok();
    assert!(out.stdout.contains(&format!("applied revision {rev2}")), "{out}");
    sessions_become(&server, &[("a", "two")]).await;
    let obj = server.object("gitsources", "fleet").await.unwrap();
    assert!(status(&obj, "lastHandledReconcileAt").is_some(), "{obj:#}");

    patch(&server, "gitsources", "fleet", json!({"spec": {"suspend": true}})).await;
    server
        .wait_for("gitsources", "fleet", READY, |o| {
            condition(o, "Reconciling").is_some_and(|c| c["status"] == "False" && c["reason"] == "Suspended")
        })
        .await;
    let rev3 = fleet.commit(&[("fleet/a.yaml", Some(&session_yaml("a", "three")))]);
    let out = server.aoctl(&["reconcile", "gitsource", "fleet"]);
    out.ok();
    tokio::time::sleep(Duration::from_secs(1)).await;
    sessions_become(&server, &[("a", "two")]).await;
    let obj = server.object("gitsources", "fleet").await.unwrap();
    assert_eq!(status(&obj, "lastAppliedRevision"), Some(rev2.as_str()), "nothing applied while suspended");

    patch(&server, "gitsources", "fleet", json!({"spec": {"suspend": false}})).await;
    applied(&server, "fleet", &rev3).await;
    sessions_become(&server, &[("a", "three")]).await;
}

/// Sessions in each revision of the kill test.
const MANY: usize = 120;

/// Revision `i` of the kill test: the project and MANY sessions `r<i>-<j>`, nothing else.
fn generation(fleet: &Fleet, i: usize) -> (String, BTreeMap<String, String>) {
    let folder = fleet.work.join("fleet/sessions");
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).expect("sessions folder");
    let mut want = BTreeMap::new();
    for j in 0..MANY {
        let name = format!("r{i}-{j}");
        let prompt = format!("revision {i}");
        std::fs::write(folder.join(format!("{name}.yaml")), session_yaml(&name, &prompt)).expect("write session");
        want.insert(name, prompt);
    }
    (fleet.commit(&[("fleet/project.yaml", Some(&project_yaml()))]), want)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_while_applying_leaves_the_old_revision_or_the_new_one_whole() {
    let mut server = Server::start().await;
    let fleet = Fleet::new(server.tmp.path());
    let hidden = server.tmp.path().join("fleet.git.away");
    let (mut revision, mut want) = generation(&fleet, 0);
    server.create("gitsources", &source("fleet", fleet.url(), true, "1h")).await;
    applied(&server, "fleet", &revision).await;
    assert_eq!(sessions(&server).await, want);

    // How long a sync of a new revision takes here, from the request to the status: the kills
    // land at random moments within it.
    let (next, next_want) = generation(&fleet, 1);
    let started = Instant::now();
    server.aoctl(&["reconcile", "gitsource", "fleet"]).ok();
    let span = started.elapsed().as_millis().max(20) as u64;
    assert_eq!(sessions(&server).await, next_want);
    (revision, want) = (next, next_want);

    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64 | 1;
    let mut x = seed;
    let mut landed = vec![];
    for i in 2..=7 {
        let (next, next_want) = generation(&fleet, i);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let delay = Duration::from_millis(x % span);
        server.aoctl(&["reconcile", "gitsource", "fleet", "--no-wait"]).ok();
        tokio::time::sleep(delay).await;
        server.kill9();
        // Out of reach while the controller starts again: its first sync fails to fetch, so what
        // the store holds is what the killed one left.
        std::fs::rename(&fleet.bare, &hidden).expect("hide the repository");
        server.restart().await;
        let obj = server
            .wait_for("gitsources", "fleet", READY, |o| {
                condition(o, "Ready").is_some_and(|c| c["reason"] == "FetchFailed")
            })
            .await;
        let got = sessions(&server).await;
        let in_force = status(&obj, "lastAppliedRevision").unwrap_or_default().to_string();
        if got == next_want {
            assert_eq!(in_force, next, "the new sessions came with their revision's status");
            landed.push(format!("{delay:?}: new"));
        } else {
            assert_eq!(got, want, "seed {seed}, kill {delay:?} after the request: neither revision whole");
            assert_eq!(in_force, revision, "the old sessions stay with their revision's status");
            landed.push(format!("{delay:?}: old"));
        }
        std::fs::rename(&hidden, &fleet.bare).expect("restore the repository");
        let out = server.aoctl(&["reconcile", "gitsource", "fleet"]);
        assert!(out.ok().stdout.contains(&next), "{out}");
        assert_eq!(sessions(&server).await, next_want, "converged to the new revision");
        (revision, want) = (next, next_want);
    }
    eprintln!("a sync took {span} ms; seed {seed}; each kill found: {landed:?}");
}
