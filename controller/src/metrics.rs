//! The controller's Prometheus registry: engine metrics, `aoctl_sessions`, the places on docker
//! engines (`aoctl_docker_host_sessions`, `aoctl_docker_host_capacity`), the warm pools
//! (`aoctl_workspace_pool_size`, `_ready`, `_claims_total`), `aoctl_watch_streams`,
//! `aoctl_stream_sockets`, `aoctl_log_follows`, `aoctl_terminal_streams` and the standard `process_*` metrics.
//!
//! `aoctl_sessions` is counted at each scrape on the store's stored objects, which are shared,
//! not copied or decoded: a few pointer reads per Session.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aoctl_api::session::Phase;
use aoctl_api::session::RuntimeKind;
use aoctl_api::Kind;
use aoctl_store::{Selector, Store, StoreError};
use parking_lot::Mutex;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use serde_json::Value;

pub(crate) struct Metrics {
    pub registry: Registry,
    pub engine: Arc<aoctl_engine::Metrics>,
    /// Sessions by project and phase, as the store holds them.
    pub sessions: IntGaugeVec,
    /// Open watch streams of the HTTP API.
    pub watch_streams: IntGauge,
    /// Open terminals (WebSockets) of the HTTP API.
    pub terminal_streams: IntGauge,
    /// Open multiplexed streams (the dashboard's WebSockets of `…/streams`).
    pub stream_sockets: IntGauge,
    /// Open transcript follows (`…/log?follow=true` and the log subscriptions of streams).
    pub log_follows: IntGauge,
    /// From a Session's creation to its agent running.
    pub spawn_duration: Histogram,
    /// Runtime operations by runtime, operation and result.
    pub runtime_ops: IntCounterVec,
    /// Reactions by key, action and result.
    pub reactions: IntCounterVec,
    /// The orchestrators' tool calls, by tool and result (`ok`, `refused`, `limited`, `error`).
    pub orchestrator_calls: IntCounterVec,
    /// From the event (webhook arrival, or detection when polling) to its message in the agent.
    pub feedback_latency: prometheus::HistogramVec,
    pub github_requests: IntCounterVec,
    /// Exported only once a GitHub answer has set it (see `KnownGauge`).
    pub github_ratelimit_remaining: IntGauge,
    pub gitlab_requests: IntCounterVec,
    /// Exported only once a GitLab answer has set it.
    pub gitlab_ratelimit_remaining: IntGauge,
    /// Linear GraphQL requests by operation and status code.
    pub linear_requests: IntCounterVec,
    /// Exported only once a Linear answer has set it.
    pub linear_ratelimit_remaining: IntGauge,
    /// What forge and tracker requests cost against their rate limits (304s cost nothing, a
    /// GraphQL query its points), by service and project.
    pub forge_counted: IntCounterVec,
    /// 1 while this replica leads (runs the reconcilers), else 0.
    pub leader: IntGauge,
    /// Places taken on each docker engine of a project's `spec.docker.hosts`, as last counted.
    pub docker_host_sessions: IntGaugeVec,
    /// The capacity of each docker engine of a project's `spec.docker.hosts`.
    pub docker_host_capacity: IntGaugeVec,
    /// The worktrees each project's warm pool is asked to keep, and how many are ready.
    pub workspace_pool_size: IntGaugeVec,
    pub workspace_pool_ready: IntGaugeVec,
    /// New plain-worktree workspaces of projects with a pool, by whether the pool had one ready.
    pub workspace_pool_claims: IntCounterVec,
    /// The `aoctl_sessions` series set at the last scrape.
    published: Mutex<BTreeSet<(String, &'static str)>>,
}

/// Reaction keys, as in manifests.
pub(crate) const REACTION_KEYS: [&str; 8] = [
    "ci-failed",
    "changes-requested",
    "merge-conflicts",
    "approved-and-green",
    "agent-stuck",
    "agent-needs-input",
    "agent-exited",
    "pr-closed",
];

impl Metrics {
    pub(crate) fn new() -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        #[cfg(target_os = "linux")]
        registry.register(Box::new(process::Process::new()?))?;
        let engine = aoctl_engine::Metrics::register(&registry)?;
        let sessions = IntGaugeVec::new(
            Opts::new("aoctl_sessions", "Number of sessions by project and phase."),
            &["project", "phase"],
        )?;
        registry.register(Box::new(sessions.clone()))?;
        let docker_host_sessions = IntGaugeVec::new(
            Opts::new(
                "aoctl_docker_host_sessions",
                "Sessions placed on each docker engine of a project, as last counted.",
            ),
            &["project", "host"],
        )?;
        registry.register(Box::new(docker_host_sessions.clone()))?;
        let docker_host_capacity = IntGaugeVec::new(
            Opts::new("aoctl_docker_host_capacity", "Sessions each docker engine of a project takes at once."),
            &["project", "host"],
        )?;
        registry.register(Box::new(docker_host_capacity.clone()))?;
        let workspace_pool_size = IntGaugeVec::new(
            Opts::new("aoctl_workspace_pool_size", "Worktrees a project's warm pool is asked to keep."),
            &["project"],
        )?;
        registry.register(Box::new(workspace_pool_size.clone()))?;
        let workspace_pool_ready = IntGaugeVec::new(
            Opts::new("aoctl_workspace_pool_ready", "Worktrees of a project's warm pool ready to be claimed."),
            &["project"],
        )?;
        registry.register(Box::new(workspace_pool_ready.clone()))?;
        let workspace_pool_claims = IntCounterVec::new(
            Opts::new(
                "aoctl_workspace_pool_claims_total",
                "New worktrees of projects with a warm pool: result `claimed` (from the pool) or `missed` (checked out).",
            ),
            &["project", "result"],
        )?;
        registry.register(Box::new(workspace_pool_claims.clone()))?;
        let watch_streams = IntGauge::new("aoctl_watch_streams", "Number of open watch streams of the HTTP API.")?;
        registry.register(Box::new(watch_streams.clone()))?;
        let terminal_streams =
            IntGauge::new("aoctl_terminal_streams", "Number of open session terminals (WebSockets) of the HTTP API.")?;
        registry.register(Box::new(terminal_streams.clone()))?;
        let stream_sockets = IntGauge::new(
            "aoctl_stream_sockets",
            "Number of open multiplexed streams (WebSockets of …/streams, one per dashboard) of the HTTP API.",
        )?;
        registry.register(Box::new(stream_sockets.clone()))?;
        let log_follows = IntGauge::new(
            "aoctl_log_follows",
            "Number of followed session transcripts (HTTP and stream) of the HTTP API.",
        )?;
        registry.register(Box::new(log_follows.clone()))?;
        let spawn_duration = Histogram::with_opts(
            HistogramOpts::new(
                "aoctl_session_spawn_duration_seconds",
                "Time from a Session's creation until its agent first runs.",
            )
            .buckets(vec![0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0]),
        )?;
        registry.register(Box::new(spawn_duration.clone()))?;
        let runtime_ops = IntCounterVec::new(
            Opts::new("aoctl_runtime_operations_total", "Runtime operations by runtime, operation and result."),
            &["runtime", "op", "result"],
        )?;
        registry.register(Box::new(runtime_ops.clone()))?;
        for runtime in ["tmux", "process", "docker"] {
            for op in ["start", "stop", "send"] {
                for result in ["success", "error"] {
                    runtime_ops.with_label_values(&[runtime, op, result]);
                }
            }
        }
        let reactions = IntCounterVec::new(
            Opts::new("aoctl_reactions_total", "Reactions carried out, by reaction, action and result."),
            &["reaction", "action", "result"],
        )?;
        registry.register(Box::new(reactions.clone()))?;
        for key in REACTION_KEYS {
            for action in ["send-to-agent", "notify", "merge"] {
                for result in ["success", "error", "escalated"] {
                    reactions.with_label_values(&[key, action, result]);
                }
            }
        }
        let orchestrator_calls = IntCounterVec::new(
            Opts::new("aoctl_orchestrator_calls_total", "Orchestrators' tool calls, by tool and result."),
            &["tool", "result"],
        )?;
        registry.register(Box::new(orchestrator_calls.clone()))?;
        let feedback_latency = prometheus::HistogramVec::new(
            HistogramOpts::new(
                "aoctl_feedback_latency_seconds",
                "Time from a PR event reaching the controller to its message being delivered to the agent.",
            )
            .buckets(vec![0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0]),
            &["reaction"],
        )?;
        registry.register(Box::new(feedback_latency.clone()))?;
        for key in ["ci-failed", "changes-requested", "merge-conflicts"] {
            feedback_latency.with_label_values(&[key]);
        }
        let github_requests = IntCounterVec::new(
            Opts::new("aoctl_github_requests_total", "GitHub API requests by endpoint template and status code."),
            &["endpoint", "code"],
        )?;
        registry.register(Box::new(github_requests.clone()))?;
        // The endpoints the controller polls, at 0 until the first request, so alerts on error
        // rates see a series from the start.
        for endpoint in [
            "GET /repos/{owner}/{repo}/pulls",
            "GET /repos/{owner}/{repo}/pulls/{pull_number}",
            "GET /repos/{owner}/{repo}/commits/{ref}/check-runs",
            "GET /repos/{owner}/{repo}/commits/{ref}/status",
            "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews",
            "GET /repos/{owner}/{repo}/pulls/{pull_number}/comments",
        ] {
            for code in ["200", "304"] {
                github_requests.with_label_values(&[endpoint, code]);
            }
        }
        let github_ratelimit_remaining = IntGauge::new(
            "aoctl_github_ratelimit_remaining",
            "Requests left in the lowest GitHub rate-limit budget of any token.",
        )?;
        github_ratelimit_remaining.set(UNKNOWN);
        registry.register(Box::new(KnownGauge(github_ratelimit_remaining.clone())))?;
        let gitlab_requests = IntCounterVec::new(
            Opts::new("aoctl_gitlab_requests_total", "GitLab API requests by endpoint template and status code."),
            &["endpoint", "code"],
        )?;
        registry.register(Box::new(gitlab_requests.clone()))?;
        let gitlab_ratelimit_remaining = IntGauge::new(
            "aoctl_gitlab_ratelimit_remaining",
            "Requests left in the lowest GitLab rate-limit window of any token.",
        )?;
        gitlab_ratelimit_remaining.set(UNKNOWN);
        registry.register(Box::new(KnownGauge(gitlab_ratelimit_remaining.clone())))?;
        let linear_requests = IntCounterVec::new(
            Opts::new("aoctl_linear_requests_total", "Linear GraphQL requests by operation and status code."),
            &["endpoint", "code"],
        )?;
        registry.register(Box::new(linear_requests.clone()))?;
        let linear_ratelimit_remaining = IntGauge::new(
            "aoctl_linear_ratelimit_remaining",
            "Requests left in the lowest Linear rate-limit window of any API key.",
        )?;
        linear_ratelimit_remaining.set(UNKNOWN);
        registry.register(Box::new(KnownGauge(linear_ratelimit_remaining.clone())))?;
        let forge_counted = IntCounterVec::new(
            Opts::new(
                "aoctl_forge_requests_counted_total",
                "What forge and tracker requests cost against their rate limits (a 304 nothing, a GraphQL query its points), by service and project.",
            ),
            &["service", "project"],
        )?;
        registry.register(Box::new(forge_counted.clone()))?;
        let leader = IntGauge::new(
            "aoctl_leader_election_master_status",
            "1 while this replica leads and runs the reconcilers, 0 while it only serves the API.",
        )?;
        registry.register(Box::new(leader.clone()))?;
        Ok(Metrics {
            leader,
            registry,
            engine,
            sessions,
            docker_host_sessions,
            docker_host_capacity,
            watch_streams,
            stream_sockets,
            log_follows,
            terminal_streams,
            spawn_duration,
            runtime_ops,
            reactions,
            orchestrator_calls,
            feedback_latency,
            github_requests,
            github_ratelimit_remaining,
            gitlab_requests,
            gitlab_ratelimit_remaining,
            linear_requests,
            linear_ratelimit_remaining,
            forge_counted,
            workspace_pool_size,
            workspace_pool_ready,
            workspace_pool_claims,
            published: Mutex::default(),
        })
    }

    /// Records a project's warm pool; `None` removes its series (no pool any more).
    pub(crate) fn workspace_pool(&self, project: &str, pool: Option<(u32, u32)>) {
        match pool {
            Some((size, ready)) => {
                self.workspace_pool_size.with_label_values(&[project]).set(i64::from(size));
                self.workspace_pool_ready.with_label_values(&[project]).set(i64::from(ready));
            }
            None => {
                let _ = self.workspace_pool_size.remove_label_values(&[project]);
                let _ = self.workspace_pool_ready.remove_label_values(&[project]);
            }
        }
    }

    /// Brings `aoctl_sessions` up to date with `store`: every phase of every project is present, at
    /// 0 when empty, so alerts see a series from the start.
    pub(crate) async fn refresh_sessions(&self, store: &Store) -> Result<(), StoreError> {
        let counts = Counts::from_store(store).await?;
        self.publish_sessions(&counts);
        Ok(())
    }

    /// Sets `aoctl_sessions` to `counts`, removing only the series of projects that are gone, so
    /// a scrape running at the same time never misses a series.
    fn publish_sessions(&self, counts: &Counts) {
        let mut published = self.published.lock();
        let mut now = BTreeSet::new();
        for project in &counts.projects {
            for phase in Phase::ALL {
                now.insert((project.clone(), phase.as_str()));
            }
        }
        now.extend(counts.by_phase.iter().filter(|(_, n)| **n != 0).map(|(k, _)| k.clone()));
        for (project, phase) in &now {
            let n = counts.by_phase.get(&(project.clone(), *phase)).copied().unwrap_or(0);
            self.sessions.with_label_values(&[project.as_str(), phase]).set(n);
        }
        for (project, phase) in published.difference(&now) {
            let _ = self.sessions.remove_label_values(&[project.as_str(), phase]);
        }
        *published = now;
    }

    /// Records the places taken on a project's docker engine and its capacity.
    pub(crate) fn docker_host(&self, project: &str, host: &str, taken: u32, capacity: u32) {
        self.docker_host_sessions.with_label_values(&[project, host]).set(i64::from(taken));
        self.docker_host_capacity.with_label_values(&[project, host]).set(i64::from(capacity));
    }

    /// Counts one runtime operation.
    pub(crate) fn runtime_op(&self, runtime: RuntimeKind, op: &str, ok: bool) {
        self.runtime_ops.with_label_values(&[runtime.as_str(), op, if ok { "success" } else { "error" }]).inc();
    }

    /// The text exposition format.
    pub(crate) fn render(&self) -> String {
        let mut buf = vec![];
        TextEncoder::new().encode(&self.registry.gather(), &mut buf).expect("text encoding does not fail");
        String::from_utf8(buf).expect("the text format is UTF-8")
    }
}

/// Sessions by project and phase.
#[derive(Clone, Debug, Default, PartialEq)]
struct Counts {
    projects: BTreeSet<String>,
    by_phase: BTreeMap<(String, &'static str), i64>,
}

impl Counts {
    /// The counts of the store now.
    async fn from_store(store: &Store) -> Result<Counts, StoreError> {
        let mut counts = Counts::default();
        let (projects, _) = store.list_stored(Kind::Project, &Selector::everything()).await?;
        let (sessions, _) = store.list_stored(Kind::Session, &Selector::everything()).await?;
        for p in &projects {
            counts.add_project(p.object());
        }
        for s in &sessions {
            counts.add_session(s.object());
        }
        Ok(counts)
    }

    fn add_project(&mut self, obj: &Value) {
        if let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str) {
            self.projects.insert(name.to_string());
        }
    }

    /// Counts a Session under its project and phase (`Pending` before its first status).
    fn add_session(&mut self, obj: &Value) {
        let project = obj.pointer("/spec/project").and_then(Value::as_str).unwrap_or_default();
        let phase = obj.pointer("/status/phase").and_then(Value::as_str);
        let phase = Phase::ALL.into_iter().find(|p| Some(p.as_str()) == phase).unwrap_or(Phase::Pending);
        *self.by_phase.entry((project.to_string(), phase.as_str())).or_default() += 1;
    }
}

/// Marks a gauge that has no value yet; `KnownGauge` exports nothing while it holds it.
const UNKNOWN: i64 = -1;

/// A gauge exported only once it was set to a value of its own: before GitHub first answers,
/// `aoctl_github_ratelimit_remaining` has no series, rather than a 0 that reads as "exhausted".
struct KnownGauge(IntGauge);

impl Collector for KnownGauge {
    fn desc(&self) -> Vec<&Desc> {
        self.0.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        if self.0.get() <= UNKNOWN {
            return vec![];
        }
        self.0.collect()
    }
}

/// The standard `process_*` metrics, with `process_cpu_seconds_total` in fractional seconds (the
/// prometheus crate's collector counts whole seconds only).
#[cfg(target_os = "linux")]
mod process {
    use prometheus::core::{Collector, Desc};
    use prometheus::process_collector::ProcessCollector;
    use prometheus::proto::MetricFamily;
    use prometheus::{Counter, Opts};

    const CPU: &str = "process_cpu_seconds_total";
    const CPU_HELP: &str = "Total user and system CPU time spent in seconds.";

    pub(super) struct Process {
        others: ProcessCollector,
        cpu: Counter,
    }

    impl Process {
        pub(super) fn new() -> Result<Process, prometheus::Error> {
            Ok(Process { others: ProcessCollector::for_self(), cpu: Counter::with_opts(Opts::new(CPU, CPU_HELP))? })
        }
    }

    /// User and system CPU time of this process so far, in seconds, to the microsecond.
    pub(super) fn cpu_seconds() -> f64 {
        // SAFETY: getrusage only writes the struct it is given, which is plain data.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid, writable rusage.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
            return 0.0;
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        secs(usage.ru_utime) + secs(usage.ru_stime)
    }

    impl Collector for Process {
        fn desc(&self) -> Vec<&Desc> {
            let mut descs: Vec<&Desc> = self.others.desc().into_iter().filter(|d| d.fq_name != CPU).collect();
            descs.extend(self.cpu.desc());
            descs
        }

        fn collect(&self) -> Vec<MetricFamily> {
            let mut families: Vec<MetricFamily> =
                self.others.collect().into_iter().filter(|f| f.name() != CPU).collect();
            // A new counter per scrape: the time is read whole each time, and it only grows.
            if let Ok(cpu) = Counter::with_opts(Opts::new(CPU, CPU_HELP)) {
                cpu.inc_by(cpu_seconds());
                families.extend(cpu.collect());
            }
            families
        }
    }
}

#[cfg(test)]
mod tests {
    use aoctl_store::WriteOptions;
    use serde_json::json;

    use super::*;

    fn session(name: &str, project: &str) -> Value {
        json!({"apiVersion": aoctl_api::API_VERSION, "kind": "Session", "metadata": {"name": name},
            "spec": {"project": project}})
    }

    fn project(name: &str) -> Value {
        json!({"apiVersion": aoctl_api::API_VERSION, "kind": "Project", "metadata": {"name": name},
            "spec": {"path": format!("/src/{name}")}})
    }

    /// The `aoctl_sessions` samples of a scrape, without the zeros.
    fn sessions(m: &Metrics) -> BTreeMap<(String, String), i64> {
        let mut out = BTreeMap::new();
        for family in m.registry.gather().iter().filter(|f| f.name() == "aoctl_sessions") {
            for metric in family.get_metric() {
                let label =
                    |n: &str| metric.get_label().iter().find(|l| l.name() == n).map(|l| l.value().to_string()).unwrap();
                let n = metric.get_gauge().value() as i64;
                assert!(
                    n != 0 || phase_count(m, &label("project")) == Phase::ALL.len(),
                    "a zero is only there to complete a project's phases"
                );
                if n != 0 {
                    out.insert((label("project"), label("phase")), n);
                }
            }
        }
        out
    }

    fn phase_count(m: &Metrics, project: &str) -> usize {
        let families = m.registry.gather();
        let family = families.iter().find(|f| f.name() == "aoctl_sessions").unwrap();
        family.get_metric().iter().filter(|x| x.get_label().iter().any(|l| l.value() == project)).count()
    }

    fn want(rows: &[(&str, &str, i64)]) -> BTreeMap<(String, String), i64> {
        rows.iter().map(|(p, ph, n)| ((p.to_string(), ph.to_string()), *n)).collect()
    }

    #[test]
    fn counts_by_project_and_phase() {
        let mut c = Counts::default();
        c.add_project(&project("api"));
        let mut b = session("b", "web");
        b["status"] = json!({"phase": "Working"});
        for s in [session("a", "web"), b, session("d", "api")] {
            c.add_session(&s);
        }
        let by_phase: Vec<_> = c.by_phase.iter().map(|((p, ph), n)| (p.as_str(), *ph, *n)).collect();
        assert_eq!(by_phase, [("api", "Pending", 1), ("web", "Pending", 1), ("web", "Working", 1)]);
        assert_eq!(c.projects.iter().collect::<Vec<_>>(), ["api"]);
        assert_eq!(c.by_phase.values().sum::<i64>(), 3, "sessions of a deleted project still count");
    }

    /// A scrape right after a write sees it: every phase of a project, and no series of a
    /// deleted project.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn scrapes_count_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let w = WriteOptions::default();
        store.create(Kind::Project, project("web"), w).await.unwrap();
        store.create(Kind::Session, session("before", "web"), w).await.unwrap();
        let m = Arc::new(Metrics::new().unwrap());

        let check = |want_rows: &[(&str, &str, i64)]| {
            let (m, store) = (m.clone(), store.clone());
            let want_rows = want(want_rows);
            async move {
                m.refresh_sessions(&store).await.unwrap();
                assert_eq!(sessions(&m), want_rows);
            }
        };
        check(&[("web", "Pending", 1)]).await;
        store.create(Kind::Project, project("api"), w).await.unwrap();
        store.create(Kind::Session, session("a", "api"), w).await.unwrap();
        store.update_status(Kind::Session, "a", json!({"phase": "Working"}), None, w).await.unwrap();
        check(&[("web", "Pending", 1), ("api", "Working", 1)]).await;
        assert_eq!(phase_count(&m, "api"), Phase::ALL.len(), "every phase of a project is present");
        store.delete(Kind::Session, "before", None, w).await.unwrap();
        store.delete(Kind::Project, "web", None, w).await.unwrap();
        check(&[("api", "Working", 1)]).await;
        assert_eq!(phase_count(&m, "web"), 0, "a deleted project's series go");
        store.create(Kind::Session, session("late", "api"), w).await.unwrap();
        check(&[("api", "Working", 1), ("api", "Pending", 1)]).await;
    }

    #[test]
    fn the_rate_limit_gauge_has_no_series_until_github_answers() {
        let m = Metrics::new().unwrap();
        assert!(!m.render().contains("aoctl_github_ratelimit_remaining"), "{}", m.render());
        m.github_ratelimit_remaining.set(0);
        assert!(m.render().contains("\naoctl_github_ratelimit_remaining 0\n"), "{}", m.render());
        m.github_ratelimit_remaining.set(4321);
        assert!(m.render().contains("\naoctl_github_ratelimit_remaining 4321\n"), "{}", m.render());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn process_cpu_seconds_are_fractional() {
        let m = Metrics::new().unwrap();
        let read = || {
            let text = m.render();
            let line = text.lines().find(|l| l.starts_with("process_cpu_seconds_total ")).expect("a CPU sample");
            line.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap()
        };
        let before = read();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        let spent = read() - before;
        assert!(spent > 0.01 && spent < 0.9, "moved by {spent} s after 60 ms of work");
        assert!(m.render().contains("process_resident_memory_bytes"), "the other process metrics stay");
    }
}
