//! Docker sessions placed across two engines (`Project.spec.docker.hosts`), through the real
//! controller and binary: two dockerd engines of the test's own on this machine, each with its
//! own socket, data root, exec root and containerd namespace (e2e/docker/dockerd.sh
//! `engine-start`), and the test image built on each. Four sessions spread two and two, a fifth
//! waits `NoCapacity` and starts when one is deleted, a restarted controller adopts every
//! container on its recorded engine, and stopping one engine mid-run marks its sessions
//! `HostLost`: the one with `restartPolicy: Never` fails, the other waits for room and is recreated
//! on the engine left, and its old container goes when the stopped engine comes back. Container
//! counts are read from each engine with the docker CLI, so nothing runs twice.
//!
//! Starting dockerd needs root, as e2e/test.sh's own engine does: as another user this test fails
//! saying so. The engines are stopped and their folders removed when the test ends, failed or not.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::docker_sessions::{box_repo, condition, docker_session, is_true, unique, IMAGE, READY};
use crate::harness::{Server, API};
use crate::lifecycle::eventually;

/// How long an engine is given to start, and to stop.
const ENGINE_START: Duration = Duration::from_secs(90);
/// From stopping an engine to its sessions marked lost: the grace period (10 s) and the looks.
const LOST: Duration = Duration::from_secs(60);

/// A dockerd of the test's own, stopped and removed when dropped.
struct Engine {
    dir: PathBuf,
    sessions: Vec<String>,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/docker/dockerd.sh")
}

impl Engine {
    fn start(dir: PathBuf, sessions: &[String]) -> Engine {
        let engine = Engine { dir, sessions: sessions.to_vec() };
        engine.up();
        engine
    }

    /// Starts (or starts again) the engine; panics with its log when it does not answer.
    fn up(&self) {
        let out = Command::new("timeout")
            .arg(ENGINE_START.as_secs().to_string())
            .arg("bash")
            .arg(script())
            .arg("engine-start")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "dockerd.sh engine-start {}: {}{}",
            self.dir.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stops the engine, as a machine that goes away would.
    fn down(&self) {
        let out = Command::new("timeout")
            .arg(ENGINE_START.as_secs().to_string())
            .arg("bash")
            .arg(script())
            .arg("engine-stop")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
            .expect("bash runs");
        assert!(out.status.success(), "dockerd.sh engine-stop: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn address(&self) -> String {
        format!("unix://{}", self.dir.join("docker.sock").display())
    }

    fn docker(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker")
            .arg("-H")
            .arg(self.address())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("the docker client runs")
    }

    /// The names of the containers of the test's sessions on this engine, whatever their state.
    fn containers(&self) -> Result<Vec<String>, String> {
        let out = self.docker(&["ps", "-a", "--filter", "label=ao.dev/managed-by=aoctl", "--format", "{{.Names}}"]);
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|n| self.sessions.iter().any(|s| n.ends_with(&format!("-{s}"))))
            .map(str::to_string)
            .collect();
        names.sort();
        Ok(names)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Ok(names) = self.containers() {
            for n in names {
                let _ = self.docker(&["rm", "-f", &n]);
            }
        }
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.join("dockerd.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            eprintln!("==== end of {}/dockerd.log ====", self.dir.display());
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
        self.down();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The engine address a session's status records.
fn host_of(obj: &Value) -> Option<&str> {
    obj.pointer("/status/runtime/host").and_then(Value::as_str)
}

fn reason_of<'a>(obj: &'a Value, type_: &str) -> Option<&'a str> {
    condition(obj, type_).and_then(|c| c["reason"].as_str())
}

fn restarts(obj: &Value) -> u64 {
    obj.pointer("/status/runtime/restarts").and_then(Value::as_u64).unwrap_or(0)
}

/// The reasons of the events about session `name`.
async fn event_reasons(server: &Server, name: &str) -> Vec<String> {
    let list = server.get_path(&format!("{API}/events")).await.expect(200);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["name"] == name)
        .filter_map(|e| e["reason"].as_str().map(str::to_string))
        .collect()
}

async fn delete(server: &Server, name: &str) {
    let r = server.send("DELETE", &format!("{API}/sessions/{name}"), None, vec![]).await;
    assert!(matches!(r.code, 200 | 202), "delete {name}: {}", r.text());
    server.wait_for("sessions", name, READY, |o| o.is_null()).await;
}

async fn running(server: &Server, name: &str) -> Value {
    server.wait_for("sessions", name, READY, |o| is_true(o, "Ready") && is_true(o, "RuntimeReady")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_sessions_spread_over_two_engines_wait_for_room_and_leave_a_lost_one() {
    assert!(
        is_root(),
        "this test starts two dockerd engines of its own, which needs root (as e2e/test.sh's engine does)"
    );
    let names: Vec<String> = (1..=5).map(|i| unique(&format!("host{i}"))).collect();
    let dir = tempfile::Builder::new().prefix("aoctl-eng").tempdir().expect("a folder for the engines");
    let a = Engine::start(dir.path().join("a"), &names);
    let b = Engine::start(dir.path().join("b"), &names);
    let server = Server::start().await;
    let repo = box_repo(server.tmp.path(), "spread");
    let project = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": "spread"},
        "spec": {"path": repo, "docker": {"image": IMAGE, "memory": "128Mi", "pidsLimit": 64, "hosts": [
            {"host": a.address(), "capacity": 2, "name": "a"},
            {"host": b.address(), "capacity": 2, "name": "b"}]}}});
    server.create("projects", &project).await;

    // Four at once: two on each engine, whatever order the reconciles run in.
    for n in &names[..4] {
        server.create("sessions", &docker_session(n, "spread", json!({}))).await;
    }
    let mut on = std::collections::BTreeMap::<String, Vec<String>>::new();
    for n in &names[..4] {
        let obj = running(&server, n).await;
        assert_eq!(reason_of(&obj, "Scheduled"), Some("Placed"), "{obj:#}");
        on.entry(host_of(&obj).expect("status.runtime.host").to_string()).or_default().push(n.clone());
    }
    assert_eq!(on.get(&a.address()).map(Vec::len), Some(2), "{on:?}");
    assert_eq!(on.get(&b.address()).map(Vec::len), Some(2), "{on:?}");
    let count = |e: &Engine| e.containers().expect("the engine answers").len();
    assert_eq!((count(&a), count(&b)), (2, 2));

    // A fifth finds no room: it waits, Pending, without a container anywhere.
    let fifth = &names[4];
    server.create("sessions", &docker_session(fifth, "spread", json!({}))).await;
    let waiting = server.wait_for("sessions", fifth, READY, |o| reason_of(o, "Scheduled") == Some("NoCapacity")).await;
    assert_eq!(waiting["status"]["phase"], "Pending", "{waiting:#}");
    let msg = condition(&waiting, "Scheduled").unwrap()["message"].as_str().unwrap().to_string();
    assert!(msg.contains("a 2/2") && msg.contains("b 2/2"), "{msg}");
    assert!(event_reasons(&server, fifth).await.contains(&"NoCapacity".to_string()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!((count(&a), count(&b)), (2, 2), "the fifth did not start anywhere");

    // One on a is deleted: the fifth takes its place there at once (its sibling's deletion wakes it).
    let gone = on[&a.address()][0].clone();
    delete(&server, &gone).await;
    let obj = running(&server, fifth).await;
    assert_eq!(host_of(&obj), Some(a.address().as_str()), "{obj:#}");
    let on_a: Vec<String> = vec![on[&a.address()][1].clone(), fifth.clone()];
    let on_b = on[&b.address()].clone();
    assert_eq!((count(&a), count(&b)), (2, 2));

    // A restarted controller finds every container on its recorded engine and starts none.
    let mut server = server;
    server.restart().await;
    for n in on_a.iter().chain(&on_b) {
        let obj = running(&server, n).await;
        assert_eq!(restarts(&obj), 0, "{n} was not started again: {obj:#}");
    }
    assert_eq!((count(&a), count(&b)), (2, 2));

    // Engine b stops mid-run: one of its sessions may not restart, the other may.
    let (never, moving) = (&on_b[0], &on_b[1]);
    let patch = json!({"spec": {"restartPolicy": "Never"}});
    server.json("PATCH", &format!("{API}/sessions/{never}"), &patch).await.expect(200);
    server
        .wait_for("sessions", never, READY, |o| o["status"]["observedGeneration"] == o["metadata"]["generation"])
        .await;
    b.down();
    let failed = server.wait_for("sessions", never, LOST, |o| o["status"]["phase"] == "Failed").await;
    assert_eq!(reason_of(&failed, "RuntimeReady"), Some("HostLost"), "{failed:#}");
    assert_eq!(reason_of(&failed, "Ready"), Some("HostLost"), "{failed:#}");
    let words = condition(&failed, "RuntimeReady").unwrap()["message"].as_str().unwrap();
    assert!(words.contains(&format!("b ({})", b.address())), "the message names the engine: {words}");
    // The other is lost too, and waits: a is full.
    let lost = server
        .wait_for("sessions", moving, LOST, |o| {
            reason_of(o, "RuntimeReady") == Some("HostLost") && reason_of(o, "Scheduled") == Some("NoCapacity")
        })
        .await;
    assert_eq!(host_of(&lost), None, "{lost:#}");
    assert!(event_reasons(&server, moving).await.contains(&"HostLost".to_string()));
    assert_eq!(count(&a), 2, "nothing more on a while it is full");

    // Room on a: the lost session is recreated there, its restart counted.
    delete(&server, &on_a[0]).await;
    let moved = running(&server, moving).await;
    assert_eq!(host_of(&moved), Some(a.address().as_str()), "{moved:#}");
    assert_eq!(restarts(&moved), 1, "{moved:#}");
    let on_a_now = a.containers().unwrap();
    assert_eq!(on_a_now.len(), 2, "{on_a_now:?}");
    assert!(on_a_now.iter().any(|c| c.ends_with(&format!("-{moving}"))), "{on_a_now:?}");
    let failed = server.object("sessions", never).await.unwrap();
    assert_eq!(failed["status"]["phase"], "Failed", "a Never session stays failed: {failed:#}");

    // b comes back: what the sessions left there is removed; nothing of them runs twice.
    b.up();
    eventually(LOST, "the containers left on b removed", || match b.containers() {
        Ok(left) if left.is_empty() => Ok(()),
        Ok(left) => Err(format!("{left:?}")),
        Err(e) => Err(e),
    })
    .await;
    assert_eq!(a.containers().unwrap().len(), 2);
    let moved_again = server.object("sessions", moving).await.unwrap();
    assert_eq!(host_of(&moved_again), Some(a.address().as_str()), "{moved_again:#}");
    assert_eq!(restarts(&moved_again), 1, "{moved_again:#}");
    drop(server);
}
