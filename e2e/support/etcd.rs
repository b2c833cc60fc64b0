//! A real etcd cluster on loopback ports for tests: members of Debian's `etcd` (package
//! etcd-server) on free ports, each with its data dir in a temporary folder, started and waited
//! for by the test, killed one by one or all at once, started again, and stopped when the cluster
//! is dropped. Members get SIGKILL when the thread that started them ends, so none outlives a
//! test run that is killed. Shared as a source file by `controller/store-etcd`'s tests and the
//! end-to-end tests.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a new cluster has to answer `/health` on every member.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running cluster; dropping it kills every member.
pub(crate) struct EtcdCluster {
    dir: tempfile::TempDir,
    token: String,
    members: Vec<Member>,
}

struct Member {
    name: String,
    client: u16,
    peer: u16,
    child: Option<Child>,
}

/// The etcd binary: `AOCTL_TEST_ETCD` when set, else `etcd` on the PATH.
fn binary() -> PathBuf {
    std::env::var_os("AOCTL_TEST_ETCD").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("etcd"))
}

/// `n` distinct free ports on 127.0.0.1 (bound together, then released).
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> =
        (0..n).map(|_| TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0")).collect();
    listeners.iter().map(|l| l.local_addr().expect("a local address").port()).collect()
}

impl EtcdCluster {
    /// Starts `n` members and waits until each answers `/health`; panics (with the members'
    /// logs) when they do not within a minute, or when etcd is not installed.
    pub(crate) fn start(n: usize) -> EtcdCluster {
        let mut last_logs = String::new();
        for _ in 0..3 {
            let mut cluster = EtcdCluster::launch(n);
            let deadline = Instant::now() + START_TIMEOUT;
            while Instant::now() < deadline {
                if (0..n).all(|i| cluster.healthy(i)) {
                    return cluster;
                }
                if cluster
                    .members
                    .iter_mut()
                    .any(|m| m.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(Some(_)))))
                {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            last_logs = cluster.logs();
            // A port taken by someone else between choosing and binding it: try new ports.
            if !last_logs.contains("address already in use") {
                break;
            }
        }
        panic!("the etcd cluster did not become healthy; its logs:\n{last_logs}");
    }

    fn launch(n: usize) -> EtcdCluster {
        let dir = tempfile::Builder::new().prefix("aoctl-etcd-").tempdir().expect("a temporary folder");
        let ports = free_ports(2 * n);
        let token = format!("aoctl-test-{}-{}", std::process::id(), ports[0]);
        let members = (0..n)
            .map(|i| Member { name: format!("m{i}"), client: ports[2 * i], peer: ports[2 * i + 1], child: None })
            .collect();
        let mut cluster = EtcdCluster { dir, token, members };
        for i in 0..n {
            cluster.spawn(i);
        }
        cluster
    }

    fn spawn(&mut self, i: usize) {
        let initial: Vec<String> =
            self.members.iter().map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer)).collect();
        let m = &self.members[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{}.log", m.name)))
            .expect("open the member's log");
        let mut cmd = Command::new(binary());
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("ETCD_") {
                cmd.env_remove(k);
            }
        }
        let client = format!("http://127.0.0.1:{}", m.client);
        let peer = format!("http://127.0.0.1:{}", m.peer);
        cmd.arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(self.dir.path().join(&m.name))
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial.join(","), "--initial-cluster-token", &self.token])
            .args(["--initial-cluster-state", "new", "--logger", "zap", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a log handle"))
            .stderr(log);
        // SAFETY: prctl is async-signal-safe and touches nothing of the parent.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| {
            panic!("cannot start {} ({e}): install etcd (Debian: apt-get install etcd-server)", binary().display())
        });
        self.members[i].child = Some(child);
    }

    /// Every member's client URL.
    pub(crate) fn endpoints(&self) -> Vec<String> {
        (0..self.members.len()).map(|i| self.endpoint(i)).collect()
    }

    pub(crate) fn endpoint(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].client)
    }

    /// Kills member `i` with SIGKILL and reaps it.
    pub(crate) fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills every member.
    pub(crate) fn kill_all(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }

    /// Starts a killed member again on its data dir; it rejoins the cluster. Does not wait.
    pub(crate) fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
    }

    /// Whether member `i` answers `/health` with a healthy cluster (within a second).
    pub(crate) fn healthy(&self, i: usize) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.members[i].client)) else { return false };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
        if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
            return false;
        }
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer.contains("\"health\":\"true\"")
    }

    /// Every member's log.
    pub(crate) fn logs(&self) -> String {
        let mut out = String::new();
        for m in &self.members {
            let text = std::fs::read_to_string(self.dir.path().join(format!("{}.log", m.name))).unwrap_or_default();
            out.push_str(&format!("==== etcd {} ====\n{text}\n", m.name));
        }
        out
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.kill_all();
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
    }
}
