//! Several `aoctl serve` replicas on one etcd store (a real three-member cluster on loopback):
//! every replica serves the API, one leads and runs the reconcilers. The leader is killed with
//! SIGKILL while 20 sessions spawn (with three replicas, an etcd member too): another replica
//! leads within seconds, no session is lost or
//! launched twice, and every write a replica acknowledged meanwhile is there. A leader of another
//! node leaves the tmux sessions of the node that started them alone, and that node's controller
//! takes them back without a second launch. Replicas with data folders of their own are nodes of
//! their own without `--node`; one claiming a live replica's node from another folder refuses to
//! start. Input sent through a follower is typed by the leader alone.

use std::ffi::OsStr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::etcd::EtcdCluster;
use crate::harness::{free_port, Server, API, NO_REPO};
use crate::lifecycle::{
    agent_repo, eventually, is_true, launch_count, launches, phase, processes_with, project, ready, session, token,
    wait_all, write_manifest, Cleanup, Tmux, READY,
};

/// How long a replica waits after the leader's last keep-alive before it takes over.
const LEASE_TTL: &str = "3s";
/// The bound on a takeover: the lease's TTL, the campaign and the first list, on a loaded machine.
const TAKEOVER: Duration = Duration::from_secs(20);
/// How long 20 agents may take to be Ready on two cores, after a takeover.
const FLEET_READY: Duration = Duration::from_secs(240);

/// The environment of a replica of the store under `prefix` of `cluster`.
fn etcd_env(cluster: &EtcdCluster, prefix: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AOCTL_STORE", "etcd".into()),
        ("AOCTL_ETCD_ENDPOINTS", cluster.endpoints().join(",")),
        ("AOCTL_ETCD_PREFIX", prefix.into()),
        ("AOCTL_LEASE_TTL", LEASE_TTL.into()),
    ]
}

/// The environment of a replica of node `node`.
fn node_env(cluster: &EtcdCluster, prefix: &str, node: &str) -> Vec<(&'static str, String)> {
    let mut env = etcd_env(cluster, prefix);
    env.push(("AOCTL_NODE", node.into()));
    env
}

fn as_env<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a OsStr)> {
    env.iter().map(|(k, v)| (*k, OsStr::new(v))).collect()
}

/// Waits until exactly one of `replicas` leads; its index.
async fn the_leader(replicas: &[&Server], bound: Duration) -> usize {
    let deadline = Instant::now() + bound;
    loop {
        let mut leading = vec![];
        for (i, r) in replicas.iter().enumerate() {
            if r.leads().await {
                leading.push(i);
            }
        }
        if let [one] = leading.as_slice() {
            return *one;
        }
        assert!(Instant::now() < deadline, "not exactly one leader within {bound:?}: {leading:?} lead");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
}

/// With `member_killed`, an etcd member is killed too, just before the leader.
async fn leader_killed_while_sessions_spawn(n: usize, member_killed: bool) {
    let mut cluster = EtcdCluster::start(3);
    let prefix = format!("/aoctl-e2e/{}-{}", std::process::id(), free_port());
    let env = etcd_env(&cluster, &prefix);
    let mut replicas = vec![Server::start_with_env(&as_env(&env)).await];
    for _ in 1..n {
        let r = replicas[0].replica(&as_env(&env)).await;
        replicas.push(r);
    }
    let leader = the_leader(&replicas.iter().collect::<Vec<_>>(), TAKEOVER).await;
    let follower = (leader + 1) % n;
    let cleanup = Cleanup::new(&replicas[follower]);
    let tmux = Tmux::of(&replicas[0]);

    // Everything is written through a follower: the API of every replica serves writes.
    let api = &replicas[follower];
    let repo = agent_repo(api.tmp.path(), "fleet");
    let log = api.tmp.path().join("launches.log");
    api.create("projects", &project("fleet", &repo, json!({}))).await;
    api.wait_for("projects", "fleet", READY, |p| is_true(p, "Ready")).await;
    let names: Vec<String> = (0..20).map(|i| format!("s{i:02}")).collect();
    let tokens: Vec<String> = names.iter().map(|n| token(n)).collect();
    let docs: Vec<Value> = names
        .iter()
        .zip(&tokens)
        .map(|(n, t)| session(n, "fleet", t, json!({"env": {"E2E_LAUNCH_LOG": log}})))
        .collect();
    let file = write_manifest(&api.tmp.path().join("sessions.yaml"), &docs);
    api.aoctl(&["apply", "-f", &file]).ok();

    // Writes go on through the follower while the leader dies; those acknowledged must stay.
    let writer = {
        let (base, token) = (api.base.clone(), api.token.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
            let mut acknowledged = vec![];
            for i in 0..40 {
                let name = format!("ack-{i:02}");
                let body = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": name},
                    "spec": {"path": NO_REPO}});
                let sent = http.post(format!("{base}{API}/projects")).bearer_auth(&token).json(&body).send().await;
                if sent.is_ok_and(|r| r.status().as_u16() == 201) {
                    acknowledged.push(name);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            acknowledged
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    if member_killed {
        cluster.kill(0);
    }
    let before = launches(&log).len();
    replicas[leader].kill9();
    let killed = Instant::now();
    let survivors: Vec<&Server> = replicas.iter().enumerate().filter(|(i, _)| *i != leader).map(|(_, r)| r).collect();
    let next = the_leader(&survivors, TAKEOVER).await;
    eprintln!(
        "{n} replicas: the leader was killed with {before} of 20 agents launched; another led {:?} later",
        killed.elapsed()
    );

    let objs =
        wait_all(survivors[next], &names.iter().map(String::as_str).collect::<Vec<_>>(), FLEET_READY, "Ready", |o| {
            ready(o) || phase(o) == "Failed"
        })
        .await;
    let failed: Vec<String> = objs.iter().filter(|o| !ready(o)).map(|o| format!("{o:#}")).collect();
    assert!(failed.is_empty(), "sessions failed after the takeover:\n{}", failed.join("\n"));
    // A second launch would come within a reconcile or two.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (name, tok) in names.iter().zip(&tokens) {
        assert_eq!(launch_count(&log, name), 1, "{name} launched other than once: {:?}", launches(&log));
        assert_eq!(processes_with(tok).len(), 1, "{name} has other than one agent process");
    }
    assert_eq!(tmux.sessions(), names, "one tmux session per Session");
    let acknowledged = tokio::time::timeout(Duration::from_secs(120), writer).await.expect("the writer ends").unwrap();
    assert!(!acknowledged.is_empty(), "no write was acknowledged while the leader died");
    let list = survivors[next].get_path(&format!("{API}/projects")).await.expect(200);
    let stored: Vec<&str> =
        list["items"].as_array().unwrap().iter().filter_map(|p| p["metadata"]["name"].as_str()).collect();
    for name in &acknowledged {
        assert!(stored.contains(&name.as_str()), "the acknowledged {name} is missing: {stored:?}");
    }

    // The killed replica comes back; nothing is launched again.
    let mut back = replicas.remove(leader);
    back.restart_with_env(&as_env(&env)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // One replica leads (the restarted one only if the leader's own term ended meanwhile, which
    // a loaded machine can cause), and nothing was launched again.
    let mut all: Vec<&Server> = replicas.iter().collect();
    all.push(&back);
    the_leader(&all, TAKEOVER).await;
    assert_eq!(launches(&log).len(), 20, "launch log: {:?}", launches(&log));
    cleanup.finish();
    // Before `back`, which may own the shared data folder.
    drop(cleanup);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_the_leader_killed_while_20_sessions_spawn() {
    leader_killed_while_sessions_spawn(2, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_the_leader_and_an_etcd_member_killed_while_20_sessions_spawn() {
    leader_killed_while_sessions_spawn(3, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_of_another_node_leaves_that_nodes_tmux_sessions_alone() {
    let cluster = EtcdCluster::start(1);
    let prefix = format!("/aoctl-e2e/{}-{}", std::process::id(), free_port());
    let (alpha_env, beta_env) = (node_env(&cluster, &prefix, "alpha"), node_env(&cluster, &prefix, "beta"));
    let mut alpha = Server::start_with_env(&as_env(&alpha_env)).await;
    the_leader(&[&alpha], TAKEOVER).await;
    // Another machine: its own data folder, tmux server and HOME.
    let mut beta = Server::start_with_env(&as_env(&beta_env)).await;
    let repo = agent_repo(alpha.tmp.path(), "nodes");
    let log = alpha.tmp.path().join("launches.log");
    alpha.create("projects", &project("nodes", &repo, json!({}))).await;
    let tokens = [token("n1"), token("n2")];
    for (name, tok) in ["n1", "n2"].iter().zip(&tokens) {
        alpha.create("sessions", &session(name, "nodes", tok, json!({"env": {"E2E_LAUNCH_LOG": log}}))).await;
    }
    let objs = wait_all(&alpha, &["n1", "n2"], READY, "Ready", ready).await;
    for o in &objs {
        assert_eq!(o["status"]["runtime"]["node"], "alpha", "a tmux runtime records its node: {o:#}");
    }

    // alpha dies; beta leads, and leaves alpha's sessions alone.
    alpha.kill9();
    the_leader(&[&beta], TAKEOVER).await;
    let held = wait_all(&beta, &["n1", "n2"], TAKEOVER, "held by node alpha", |o| {
        condition(o, "RuntimeReady").is_some_and(|c| c["status"] == "Unknown" && c["reason"] == "OnAnotherNode")
    })
    .await;
    let msg = condition(&held[0], "RuntimeReady").unwrap()["message"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("\"alpha\"") && msg.contains("\"beta\""), "{msg}");
    assert_eq!(Tmux::of(&beta).sessions(), Vec::<String>::new(), "beta started none of alpha's agents");
    // What reaches the runtime or its files is refused on beta, and says where to go; nothing is
    // queued there to be lost.
    let sent = beta.json("POST", &format!("{API}/sessions/n1/input"), &json!({"text": "hello"})).await;
    let refused = sent.expect(409);
    assert!(refused["message"].as_str().is_some_and(|m| m.contains("node \"alpha\"")), "{refused:#}");
    assert_eq!(beta.get_path(&format!("{API}/sessions/n1/diff")).await.code, 409);
    assert_eq!(beta.get_path(&format!("{API}/sessions/n1/log")).await.code, 409);
    for (name, tok) in ["n1", "n2"].iter().zip(&tokens) {
        assert_eq!(launch_count(&log, name), 1, "{name}: {:?}", launches(&log));
        assert_eq!(processes_with(tok).len(), 1, "{name}'s agent runs on in alpha's tmux");
    }

    // alpha comes back as a follower; beta dies; alpha leads and takes its sessions back as
    // they are, without launching them again.
    alpha.restart_with_env(&as_env(&alpha_env)).await;
    beta.kill9();
    the_leader(&[&alpha], TAKEOVER).await;
    wait_all(&alpha, &["n1", "n2"], READY, "Ready on alpha again", |o| {
        ready(o) && condition(o, "RuntimeReady").is_some_and(|c| c["status"] == "True")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    eventually(Duration::from_secs(5), "one launch each", || {
        match (launch_count(&log, "n1"), launch_count(&log, "n2")) {
            (1, 1) => Ok(()),
            counts => Err(format!("{counts:?}: {:?}", launches(&log))),
        }
    })
    .await;
    Cleanup::new(&alpha).finish();
}

/// A docker session on an engine every node reaches (here the test engine over mutual TLS, as
/// `e2e/test.sh` exports it) moves with the leadership: a leader of another node adopts its
/// container, and no second one is started. The replicas share the data folder at one path, as
/// replicas on several machines share it on a network file system (the container's workspace is
/// a bind mount of it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_session_on_a_shared_engine_moves_with_the_leadership() {
    use crate::docker_sessions::{box_repo, docker_session, engine, limits, Containers};
    let Ok(host) = std::env::var("AOCTL_TEST_DOCKER_HOST") else {
        crate::strict::missing("AOCTL_TEST_DOCKER_HOST is not set (e2e/test.sh sets it with dockerd.sh tls-env)");
        return;
    };
    let _turn = engine().await;
    let cluster = EtcdCluster::start(1);
    let prefix = format!("/aoctl-e2e/{}-{}", std::process::id(), free_port());
    let (alpha_env, beta_env) = (node_env(&cluster, &prefix, "alpha"), node_env(&cluster, &prefix, "beta"));
    let mut alpha = Server::start_with_env(&as_env(&alpha_env)).await;
    the_leader(&[&alpha], TAKEOVER).await;
    let beta = alpha.replica(&as_env(&beta_env)).await;
    let name = crate::docker_sessions::unique("moves");
    let _containers = Containers::new(&[&name]);
    let repo = box_repo(alpha.tmp.path(), "shared");
    beta.create("projects", &project("shared", &repo, json!({}))).await;
    let mut docker = limits();
    docker["host"] = json!(host);
    beta.create("sessions", &docker_session(&name, "shared", docker)).await;
    let before = beta.wait_for("sessions", &name, FLEET_READY, ready).await;
    assert_eq!(before["status"]["runtime"]["node"], Value::Null, "a shared engine's container has no node: {before:#}");
    let handle = before["status"]["runtime"]["handle"].as_str().expect("a container").to_string();
    let on_engine = |label: &str| -> Vec<String> {
        let out = std::process::Command::new("docker")
            .args(["-H", &host, "--tlsverify", "ps", "-aq", "--filter", &format!("label=ao.dev/session={label}")])
            .output()
            .expect("docker ps");
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
    };
    let id = on_engine(&name);
    assert_eq!(id.len(), 1, "one container: {id:?}");

    alpha.kill9();
    the_leader(&[&beta], TAKEOVER).await;
    // The new leader looks at the session within its first list; it stays Ready on the same
    // container, not a restart.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = beta.wait_for("sessions", &name, READY, ready).await;
    assert_eq!(after["status"]["runtime"]["handle"], handle.as_str());
    assert_eq!(after["status"]["runtime"]["restarts"], 0, "{after:#}");
    assert_eq!(on_engine(&name), id, "the same container, and only it");
    beta.aoctl(&["delete", "session", &name, "--wait=60s"]).ok();
    assert_eq!(on_engine(&name), Vec::<String>::new(), "the new leader removed it on delete");
}

/// The node id a server's data folder names it by (made at its first start).
fn node_id(server: &Server) -> String {
    let path = server.data_dir.join("node-id");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).trim().to_string()
}

/// Two replicas on one machine, each with a data folder of its own and no `--node`: each is a
/// node of its own (its folder's node id), so when the leader dies the other leaves the leader's
/// tmux sessions alone rather than launch them again from its own, empty, tmux server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_with_data_folders_of_their_own_are_two_nodes_and_launch_nothing_twice() {
    let cluster = EtcdCluster::start(1);
    let prefix = format!("/aoctl-e2e/{}-{}", std::process::id(), free_port());
    let env = etcd_env(&cluster, &prefix);
    let mut alpha = Server::start_with_env(&as_env(&env)).await;
    the_leader(&[&alpha], TAKEOVER).await;
    let beta = Server::start_with_env(&as_env(&env)).await;
    let (alpha_node, beta_node) = (node_id(&alpha), node_id(&beta));
    assert_ne!(alpha_node, beta_node, "two data folders, two node ids");
    let mut cleanup = Cleanup::new(&alpha);
    let repo = agent_repo(alpha.tmp.path(), "own");
    let log = alpha.tmp.path().join("launches.log");
    alpha.create("projects", &project("own", &repo, json!({}))).await;
    let names = ["o1", "o2", "o3"];
    let tokens: Vec<String> = names.iter().map(|n| token(n)).collect();
    for (name, tok) in names.iter().zip(&tokens) {
        alpha.create("sessions", &session(name, "own", tok, json!({"env": {"E2E_LAUNCH_LOG": log}}))).await;
    }
    for o in wait_all(&alpha, &names, READY, "Ready", ready).await {
        assert_eq!(o["status"]["runtime"]["node"], alpha_node.as_str(), "{o:#}");
    }

    alpha.kill9();
    the_leader(&[&beta], TAKEOVER).await;
    cleanup.retarget(&beta);
    wait_all(&beta, &names, TAKEOVER, "held by the dead leader's node", |o| {
        condition(o, "RuntimeReady").is_some_and(|c| c["status"] == "Unknown" && c["reason"] == "OnAnotherNode")
    })
    .await;
    // A second launch would come within a reconcile or two.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(Tmux::of(&beta).sessions(), Vec::<String>::new(), "beta launched none of alpha's agents");
    for (name, tok) in names.iter().zip(&tokens) {
        assert_eq!(launch_count(&log, name), 1, "{name}: {:?}", launches(&log));
        assert_eq!(processes_with(tok).len(), 1, "{name}'s agent runs on in alpha's tmux");
    }
}

/// A replica given the node of a live replica that has another data folder refuses to start,
/// and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_claiming_a_live_replicas_node_from_another_data_folder_refuses_to_start() {
    let cluster = EtcdCluster::start(1);
    let prefix = format!("/aoctl-e2e/{}-{}", std::process::id(), free_port());
    let env = node_env(&cluster, &prefix, "shared-name");
    let first = Server::start_with_env(&as_env(&env)).await;
    the_leader(&[&first], TAKEOVER).await;

    let other = tempfile::Builder::new().prefix("aoctl-e2e-other-").tempdir().expect("tempdir");
    let mut cmd = crate::harness::command(&first.home);
    cmd.envs(as_env(&env));
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{}", free_port()), "--data-dir"]);
    cmd.arg(other.path().join("data"));
    let out = crate::harness::run_for(cmd, None, Duration::from_secs(30));
    assert_ne!(out.code, 0, "the second replica started: {out:?}");
    assert!(
        out.stderr.contains("node \"shared-name\" is taken by a live replica with another data folder")
            && out.stderr.contains(&first.data_dir.canonicalize().unwrap().display().to_string())
            && out.stderr.contains("--node"),
        "{}",
        out.stderr
    );
    assert!(first.leads().await, "the first replica runs on");
}

/// The transcript lines the scripted agent says it got, but empty ones.
fn got(server: &Server, name: &str) -> Vec<String> {
    let text = crate::lifecycle::transcript(server, name).replace('\r', "");
    let lines = text.lines().filter_map(|l| l.split_once("demo-agent: got: ").map(|(_, m)| m.trim().to_string()));
    lines.filter(|l| !l.is_empty()).collect()
}

/// Two replicas of one node (one data folder): input sent through either is typed by the leader
/// alone, so messages sent through both at once arrive whole, once each, and the follower's
/// answer says whether its message was delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_through_a_follower_and_the_leader_at_once_is_typed_by_the_leader_whole_and_once() {
    let cluster = EtcdCluster::start(1);
    let prefix = format!("/aoctl-e2e/{}-{}", std::process::id(), free_port());
    let env = etcd_env(&cluster, &prefix);
    let alpha = Server::start_with_env(&as_env(&env)).await;
    the_leader(&[&alpha], TAKEOVER).await;
    let beta = alpha.replica(&as_env(&env)).await;
    assert_eq!(node_id(&alpha), node_id(&beta), "one data folder, one node");
    let (leader, follower) = match the_leader(&[&alpha, &beta], TAKEOVER).await {
        0 => (&alpha, &beta),
        _ => (&beta, &alpha),
    };
    let cleanup = Cleanup::new(leader);
    let repo = agent_repo(leader.tmp.path(), "typed");
    leader.create("projects", &project("typed", &repo, json!({}))).await;
    leader.create("sessions", &session("talk", "typed", &token("talk"), json!({}))).await;
    wait_all(leader, &["talk"], READY, "Ready", ready).await;
    let input = format!("{API}/sessions/talk/input");
    // Its task was an argument: it counts as had once the agent shows its prompt.
    let had = leader.data_dir.join("sessions/talk/prompt.delivered");
    eventually(Duration::from_secs(30), "the first prompt counted as delivered", || {
        had.exists().then_some(()).ok_or(crate::lifecycle::transcript(leader, "talk"))
    })
    .await;

    // Alone, through the follower: the leader types it, and the follower says it was delivered.
    let r = follower.json("POST", &input, &json!({"text": "alone via the follower"})).await;
    assert_eq!(r.code, 200, "{:#}", r.json());
    assert!(r.json()["message"].as_str().is_some_and(|m| m.starts_with("delivered")), "{:#}", r.json());
    assert!(got(leader, "talk").contains(&"alone via the follower".to_string()));

    // Through both at once.
    let via = |tag: &str| -> Vec<String> {
        (1..=4).map(|i| format!("{tag}-{i} {}", "abcdefghijklmnopqrstuvwxyz".repeat(5))).collect()
    };
    let (from_follower, from_leader) = (via("follower"), via("leader"));
    let bodies = |ms: &[String]| ms.iter().map(|m| json!({"text": m})).collect::<Vec<_>>();
    let (to_follower, to_leader) = (bodies(&from_follower), bodies(&from_leader));
    let sends = to_follower
        .iter()
        .map(|b| follower.json("POST", &input, b))
        .chain(to_leader.iter().map(|b| leader.json("POST", &input, b)));
    for r in futures::future::join_all(sends).await {
        assert!(r.code == 200 || r.code == 202, "{:#}", r.json());
    }
    let mut want = vec!["alone via the follower".to_string()];
    want.extend(from_follower.iter().cloned());
    want.extend(from_leader.iter().cloned());
    let lines = eventually(Duration::from_secs(60), "every message at the agent", || {
        let lines = got(leader, "talk");
        want.iter().all(|w| lines.contains(w)).then(|| lines.clone()).ok_or(format!("{lines:#?}"))
    })
    .await;
    for w in &want {
        assert_eq!(lines.iter().filter(|l| *l == w).count(), 1, "{w} arrived other than once: {lines:#?}");
    }
    assert_eq!(lines.len(), want.len(), "only whole messages arrived: {lines:#?}");
    cleanup.finish();
}
