//! `aoctl backup` and `aoctl restore` end to end: a backup killed with SIGKILL in the middle of
//! its stream leaves the earlier backup file whole and restorable, and a stream cut short is
//! refused; a backup of sled restores into an etcd prefix (versions renumbered) and one of etcd
//! into sled, each refusing a store that holds objects; and a store lost while its agents run,
//! restored into the same data folder, has its agents adopted, none launched again.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::etcd::EtcdCluster;
use crate::harness::{command, free_port, project, run, rv_num, session, Out, Server, API, NO_REPO};
use crate::lifecycle::{
    agent_repo, eventually, launch_count, processes_with, ready, restarts, token, wait_all, Cleanup, Tmux, READY,
};

/// `aoctl restore FILE ARGS…` with the data folder `data_dir`.
fn restore(home: &Path, data_dir: &Path, file: &Path, args: &[&str]) -> Out {
    let mut cmd = command(home);
    cmd.arg("restore").arg(file).arg("--data-dir").arg(data_dir).args(args);
    run(cmd, None)
}

/// Stops `server`, removes its store and restores `file` into its data folder, then starts it
/// again there.
async fn restore_into(server: &mut Server, file: &Path) -> Out {
    server.kill9();
    std::fs::remove_dir_all(server.data_dir.join("store")).expect("remove the store");
    let out = restore(&server.home, &server.data_dir, file, &[]);
    out.ok();
    server.restart().await;
    out
}

/// The objects of a backup file, by kind and name.
fn objects(file: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).expect("read the backup");
    text.lines().skip(1).map(|l| serde_json::from_str(l).expect("an object line")).collect()
}

/// What a restore must bring back of an object whatever the store: all but its resourceVersion.
fn identity(o: &Value) -> Value {
    let mut o = o.clone();
    o["metadata"].as_object_mut().expect("metadata").remove("resourceVersion");
    json!([o["kind"], o["metadata"], o["spec"]])
}

async fn stored(server: &Server, plural: &str, name: &str) -> Value {
    server.get_path(&format!("{API}/{plural}/{name}")).await.expect(200)
}

/// A server of one project and two sessions whose status the controller wrote.
async fn populated(env: &[(&str, &OsStr)]) -> Server {
    let server = Server::start_with_env(env).await;
    server.create("projects", &project("kept", NO_REPO)).await;
    for name in ["first", "second"] {
        server.create("sessions", &session(name, "kept", &format!("the task of {name}"))).await;
    }
    server.wait_for("sessions", "second", Duration::from_secs(20), |s| s["status"].is_object()).await;
    server.settle().await;
    server
}

/// A stand-in for the server that answers a backup request with `body` and then, with `hold`,
/// keeps the connection open without another byte.
fn standin(body: Vec<u8>, hold: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        let Ok((mut conn, _)) = listener.accept() else { return };
        let mut request = vec![];
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let head = if hold {
            "HTTP/1.1 200 OK\r\ncontent-type: application/jsonl\r\ntransfer-encoding: chunked\r\n\r\n".to_string()
        } else {
            format!("HTTP/1.1 200 OK\r\ncontent-type: application/jsonl\r\ncontent-length: {}\r\n\r\n", body.len())
        };
        let _ = conn.write_all(head.as_bytes());
        if hold {
            let _ = conn.write_all(format!("{:x}\r\n", body.len()).as_bytes());
            let _ = conn.write_all(&body);
            let _ = conn.write_all(b"\r\n");
            let _ = conn.flush();
            // The rest never comes, until the test ends.
            std::thread::sleep(Duration::from_secs(120));
        } else {
            let _ = conn.write_all(&body);
        }
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_killed_midway_leaves_the_earlier_backup_usable() {
    let server = populated(&[]).await;
    let file = server.tmp.path().join("aoctl.jsonl");
    let out = server.aoctl(&["backup", "-o", file.to_str().unwrap()]);
    // A project, two sessions and the events recorded about them by then.
    let n = objects(&file).len();
    assert!(n >= 3 && out.ok().stdout.contains(&format!("backup of {n} objects")), "{out}");
    let earlier = std::fs::read(&file).expect("the backup");
    let lines: Vec<&[u8]> = earlier.split(|b| *b == b'\n').collect();

    // The header of a longer backup and its first object, then nothing more.
    let header =
        String::from_utf8_lossy(lines[0]).replace(&format!("\"objects\":{n}"), &format!("\"objects\":{}", n + 40));
    let body = [header.as_bytes(), b"\n", lines[1], b"\n"].concat();
    let partial = server.tmp.path().join("aoctl.jsonl.partial");
    let mut cmd = command(&server.home);
    cmd.args(["backup", "-o"]).arg(&file).args(["--server", &standin(body.clone(), true), "--token", "t"]);
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("aoctl starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&partial).map_or(0, |m| m.len()) < body.len() as u64 {
        assert!(Instant::now() < deadline, "the backup never wrote what it got to {}", partial.display());
        assert!(child.try_wait().expect("wait").is_none(), "the backup ended while its stream was open");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap it");
    assert_eq!(std::fs::read(&file).expect("the backup"), earlier, "the earlier backup is untouched");

    // A stream that ends early, in good order: refused, and the earlier backup stays.
    let mut cmd = command(&server.home);
    cmd.args(["backup", "-o"]).arg(&file).args(["--server", &standin(body, false), "--token", "t"]);
    let out = run(cmd, None);
    out.code(1);
    assert!(
        out.stderr.contains("did not arrive whole") && out.stderr.contains(&format!("announces {} objects", n + 40)),
        "{out}"
    );
    assert_eq!(std::fs::read(&file).expect("the backup"), earlier);
    assert!(!partial.exists(), "the refused partial file is removed");

    // And the earlier backup restores: every object as it was, at its resourceVersion.
    let mut other = Server::start().await;
    let out = restore_into(&mut other, &file).await;
    assert!(out.stdout.contains("every object keeps its resourceVersion"), "{out}");
    for o in objects(&file) {
        let name = o["metadata"]["name"].as_str().unwrap().to_string();
        let plural = format!("{}s", o["kind"].as_str().unwrap().to_lowercase());
        let got = stored(&other, &plural, &name).await;
        assert_eq!(identity(&got), identity(&o), "{plural}/{name}");
        // At its version, unless a controller wrote its status since; then whole, as it was.
        assert!(rv_num(&got) >= rv_num(&o), "{plural}/{name} went back in version");
        if rv_num(&got) == rv_num(&o) {
            assert_eq!(got, o, "{plural}/{name}");
        }
    }
    // A restore into a store that holds objects is refused, and so is a line that does not decode.
    other.kill9();
    let out = restore(&other.home, &other.data_dir, &file, &[]);
    assert!(out.code(1).stderr.contains(&format!("already holds {n} objects")), "{out}");
    let broken = other.tmp.path().join("broken.jsonl");
    let text = String::from_utf8(earlier).unwrap().replacen("\"spec\":{", "\"spec\":{\"bogus\":1,", 1);
    std::fs::write(&broken, text).unwrap();
    let out = restore(&other.home, &other.tmp.path().join("fresh"), &broken, &[]);
    assert!(out.code(1).stderr.contains(&format!("{}:2:", broken.display())), "names the line: {out}");
    assert!(out.stderr.contains("bogus"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_restores_across_sled_and_etcd() {
    let cluster = EtcdCluster::start(1);
    let endpoints = cluster.endpoints().join(",");
    let prefix = format!("/aoctl-e2e/{}-{}", std::process::id(), free_port());
    let sled = populated(&[]).await;
    let file = sled.tmp.path().join("from-sled.jsonl");
    sled.aoctl(&["backup", "-o", file.to_str().unwrap()]).ok();
    let kept = objects(&file);
    let n = kept.len();

    let etcd_flags = ["--store", "etcd", "--etcd-endpoints", &endpoints, "--etcd-prefix", &prefix];
    let out = restore(&sled.home, &sled.tmp.path().join("etcd-data"), &file, &etcd_flags);
    let restored = format!("restored {n} objects");
    assert!(out.ok().stdout.contains(&restored) && out.stdout.contains("numbered anew"), "{out}");
    let out = restore(&sled.home, &sled.tmp.path().join("etcd-data"), &file, &etcd_flags);
    assert!(out.code(1).stderr.contains(&format!("already holds {n} objects")), "{out}");

    let env = [
        ("AOCTL_STORE", OsStr::new("etcd")),
        ("AOCTL_ETCD_ENDPOINTS", OsStr::new(&endpoints)),
        ("AOCTL_ETCD_PREFIX", OsStr::new(&prefix)),
    ];
    let on_etcd = Server::start_with_env(&env).await;
    for o in &kept {
        let plural = format!("{}s", o["kind"].as_str().unwrap().to_lowercase());
        let got = stored(&on_etcd, &plural, o["metadata"]["name"].as_str().unwrap()).await;
        assert_eq!(identity(&got), identity(o), "{plural}");
        assert_eq!(got["status"]["phase"], o["status"]["phase"], "{plural}: the status came along");
    }

    // Back again: a backup of etcd says so, and its shared revisions are numbered anew in sled.
    // Beside the first backup: the etcd server's folder goes with it.
    let file = sled.tmp.path().join("from-etcd.jsonl");
    on_etcd.aoctl(&["backup", "-o", file.to_str().unwrap()]).ok();
    let header: Value = serde_json::from_str(std::fs::read_to_string(&file).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(header["backend"], "etcd");
    drop(on_etcd);
    let mut back = Server::start().await;
    restore_into(&mut back, &file).await;
    for o in &kept {
        let plural = format!("{}s", o["kind"].as_str().unwrap().to_lowercase());
        let got = stored(&back, &plural, o["metadata"]["name"].as_str().unwrap()).await;
        assert_eq!(identity(&got), identity(o), "{plural}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_under_running_agents_adopts_them() {
    let mut server = Server::start().await;
    let mut cleanup = Cleanup::new(&server);
    let tmux = Tmux::of(&server);
    let repo = agent_repo(server.tmp.path(), "kept");
    let log = server.tmp.path().join("launches.log");
    let word = token("kept");
    server.create("projects", &crate::lifecycle::project("kept", &repo, json!({}))).await;
    let s = crate::lifecycle::session("runner", "kept", &word, json!({"env": {"E2E_LAUNCH_LOG": log}}));
    server.create("sessions", &s).await;
    wait_all(&server, &["runner"], READY, "Ready", ready).await;
    let agent = eventually(READY, "the agent's process", || match processes_with(&word).as_slice() {
        [pid] => Ok(*pid),
        pids => Err(format!("{pids:?}")),
    })
    .await;
    assert_eq!(launch_count(&log, "runner"), 1);
    let file = server.tmp.path().join("aoctl.jsonl");
    server.aoctl(&["backup", "-o", file.to_str().unwrap()]).ok();

    // The store is lost while the agent runs on; the backup goes back into the same folder.
    restore_into(&mut server, &file).await;
    cleanup.retarget(&server);
    let obj = wait_all(&server, &["runner"], READY, "Ready after the restore", ready).await.remove(0);
    // Long enough for a second launch to show, had there been one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(processes_with(&word), vec![agent], "the agent is the same process");
    assert_eq!(launch_count(&log, "runner"), 1, "no agent was launched again");
    assert_eq!(restarts(&obj), 0);
    assert_eq!(tmux.sessions(), ["runner"]);
    cleanup.finish();
}
