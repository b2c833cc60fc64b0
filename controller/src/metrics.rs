//! The controller's Prometheus registry: engine metrics, `aoctl_sessions`, `aoctl_watch_streams`
//! and the standard `process_*` metrics.

use std::collections::BTreeMap;
use std::sync::Arc;

use aoctl_api::session::Phase;
use aoctl_api::session::RuntimeKind;
use aoctl_api::{Kind, Session};
use aoctl_store::{Selector, Store, StoreError};
use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    pub registry: Registry,
    pub engine: Arc<aoctl_engine::Metrics>,
    /// Sessions by project and phase, as the store holds them.
    pub sessions: IntGaugeVec,
    /// Open watch streams of the HTTP API.
    pub watch_streams: IntGauge,
    /// From a Session's creation to its agent running.
    pub spawn_duration: Histogram,
    /// Runtime operations by runtime, operation and result.
    pub runtime_ops: IntCounterVec,
    /// Reactions by key, action and result.
    pub reactions: IntCounterVec,
    /// From the event (webhook arrival, or detection when polling) to its message in the agent.
    pub feedback_latency: prometheus::HistogramVec,
    pub github_requests: IntCounterVec,
    pub github_ratelimit_remaining: IntGauge,
}

/// Reaction keys, as in manifests.
pub const REACTION_KEYS: [&str; 8] = [
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
    pub fn new() -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        #[cfg(target_os = "linux")]
        registry.register(Box::new(prometheus::process_collector::ProcessCollector::for_self()))?;
        let engine = aoctl_engine::Metrics::register(&registry)?;
        let sessions = IntGaugeVec::new(
            Opts::new("aoctl_sessions", "Number of sessions by project and phase."),
            &["project", "phase"],
        )?;
        registry.register(Box::new(sessions.clone()))?;
        let watch_streams = IntGauge::new("aoctl_watch_streams", "Number of open watch streams of the HTTP API.")?;
        registry.register(Box::new(watch_streams.clone()))?;
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
        registry.register(Box::new(github_ratelimit_remaining.clone()))?;
        Ok(Metrics {
            registry,
            engine,
            sessions,
            watch_streams,
            spawn_duration,
            runtime_ops,
            reactions,
            feedback_latency,
            github_requests,
            github_ratelimit_remaining,
        })
    }

    /// Recomputes `aoctl_sessions` from the store; every phase of every project is present, at 0
    /// when empty, so alerts see a series from the start.
    pub async fn refresh_sessions(&self, store: &Store) -> Result<(), StoreError> {
        let (projects, _) = store.list(Kind::Project, &Selector::everything()).await?;
        let (sessions, _): (Vec<Session>, _) = store.list_typed(&Selector::everything()).await?;
        let mut counts: BTreeMap<(String, &'static str), i64> = BTreeMap::new();
        for p in &projects {
            let name = p.pointer("/metadata/name").and_then(|v| v.as_str()).unwrap_or_default();
            for phase in Phase::ALL {
                counts.insert((name.to_string(), phase.as_str()), 0);
            }
        }
        for s in &sessions {
            let phase = s.status.phase.unwrap_or(Phase::Pending).as_str();
            *counts.entry((s.spec.project.clone(), phase)).or_default() += 1;
        }
        self.sessions.reset();
        for ((project, phase), n) in counts {
            self.sessions.with_label_values(&[&project, phase]).set(n);
        }
        Ok(())
    }

    /// Counts one runtime operation.
    pub fn runtime_op(&self, runtime: RuntimeKind, op: &str, ok: bool) {
        self.runtime_ops.with_label_values(&[runtime.as_str(), op, if ok { "success" } else { "error" }]).inc();
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut buf = vec![];
        TextEncoder::new().encode(&self.registry.gather(), &mut buf).expect("text encoding does not fail");
        String::from_utf8(buf).expect("the text format is UTF-8")
    }
}
