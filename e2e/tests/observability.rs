//! Observability, end to end: the live `/metrics` body passes `promtool check metrics` and holds
//! every metric of docs/observability.md's table with its labels; the Grafana dashboard and the example alert rules
//! use only metrics the controller exposes (and the rules pass `promtool check rules` and
//! `promtool test rules`); a real Prometheus scrapes the controller with its bearer token and
//! answers `aoctl_sessions` by project (logs are in `logs.rs`). `promtool` and `prometheus` come
//! from the Debian package `prometheus`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::OnceCell;

use crate::harness::{free_port, git_repo, project, terminate, Server, WatchStream, API};

/// The scripted agent, committed into each test repository as `scripts/agent.sh`.
const DEMO_AGENT: &str = include_str!("../agents/demo-agent");
/// How long a session gets to reach `Idle` on a busy two-core machine.
pub(crate) const READY: Duration = Duration::from_secs(60);

/// The metrics of docs/observability.md's table and their label names (`le` aside).
const DOCUMENTED_METRICS: &[(&str, &[&str])] = &[
    ("aoctl_reconcile_total", &["controller", "result"]),
    ("aoctl_reconcile_errors_total", &["controller"]),
    ("aoctl_reconcile_duration_seconds", &["controller"]),
    ("aoctl_workqueue_depth", &["controller"]),
    ("aoctl_workqueue_adds_total", &["controller"]),
    ("aoctl_workqueue_retries_total", &["controller"]),
    ("aoctl_workqueue_queue_duration_seconds", &["controller"]),
    ("aoctl_sessions", &["project", "phase"]),
    ("aoctl_session_spawn_duration_seconds", &[]),
    ("aoctl_reactions_total", &["reaction", "action", "result"]),
    ("aoctl_feedback_latency_seconds", &["reaction"]),
    ("aoctl_github_requests_total", &["endpoint", "code"]),
    ("aoctl_github_ratelimit_remaining", &[]),
    ("aoctl_runtime_operations_total", &["runtime", "op", "result"]),
    ("aoctl_watch_streams", &[]),
    ("process_cpu_seconds_total", &[]),
    ("process_resident_memory_bytes", &[]),
    ("process_virtual_memory_bytes", &[]),
    ("process_open_fds", &[]),
    ("process_max_fds", &[]),
    ("process_start_time_seconds", &[]),
];

/// Metrics with no series until their value is known: `aoctl_github_ratelimit_remaining` until
/// GitHub first answers (a 0 would read as an exhausted budget). The live server of these tests
/// talks to no GitHub; `logs.rs` reads the gauge once a stand-in GitHub has answered.
const ONCE_KNOWN: &[&str] = &["aoctl_github_ratelimit_remaining"];

/// The repository's top folder.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace holds cli/").to_path_buf()
}

/// Runs git in `dir` with a fixed identity; panics when it fails.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=aoctl e2e", "-c", "user.email=e2e@aoctl.invalid", "-c", "commit.gpgsign=false"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A repository `parent/name` whose second commit adds the scripted agent as `scripts/agent.sh`.
pub(crate) fn agent_repo(parent: &Path, name: &str) -> PathBuf {
    let repo = git_repo(parent, name, "main");
    let scripts = repo.join("scripts");
    fs::create_dir_all(&scripts).expect("create scripts/");
    let agent = scripts.join("agent.sh");
    fs::write(&agent, DEMO_AGENT).expect("write the scripted agent");
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).expect("make the agent executable");
    git(&repo, &["add", "scripts"]);
    git(&repo, &["commit", "-q", "-m", "Add the scripted agent"]);
    repo
}

/// A Session that runs the scripted agent on its prompt file.
pub(crate) fn agent_session(name: &str, project: &str) -> Value {
    json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
        "spec": {"project": project, "prompt": "write a note about observability",
            "agent": {"command": ["./scripts/agent.sh", "{promptFile}"]}}})
}

/// Creates a project on a repository holding the agent and one session running it; returns the
/// session once it is `Idle` (the agent committed and waits for input).
async fn active(server: &Server, project_name: &str, session: &str) -> Value {
    let repo = agent_repo(server.tmp.path(), project_name);
    server.create("projects", &project(project_name, repo.to_str().expect("UTF-8 path"))).await;
    server.create("sessions", &agent_session(session, project_name)).await;
    server.wait_for("sessions", session, READY, |s| s["status"]["phase"] == "Idle").await
}

/// One sample of the text exposition format.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses one sample line (`name{label="value",...} value [timestamp]`); `None` when malformed.
fn parse_sample(line: &str) -> Option<Sample> {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    let name = line[..end].to_string();
    let mut rest = &line[end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        loop {
            let (start, c) = chars.next()?;
            if c == '}' {
                rest = &inner[start + 1..];
                break;
            }
            if c == ',' {
                continue;
            }
            let eq = inner[start..].find('=')? + start;
            let label = inner[start..eq].to_string();
            while chars.next()?.0 < eq {}
            if chars.next()?.1 != '"' {
                return None;
            }
            let mut value = String::new();
            loop {
                match chars.next()?.1 {
                    '"' => break,
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    other => value.push(other),
                }
            }
            labels.insert(label, value);
        }
    }
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(Sample { name, labels, value })
}

/// A parsed `/metrics` body: families by name with their type, and every sample.
pub(crate) struct Exposition {
    pub(crate) body: String,
    types: BTreeMap<String, String>,
    samples: Vec<Sample>,
}

impl Exposition {
    pub(crate) fn parse(body: String) -> Exposition {
        let mut types = BTreeMap::new();
        let mut samples = vec![];
        for line in body.lines() {
            if let Some(t) = line.strip_prefix("# TYPE ") {
                let mut parts = t.split_whitespace();
                if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                    types.insert(name.to_string(), kind.to_string());
                }
            } else if !line.starts_with('#') && !line.trim().is_empty() {
                let s = parse_sample(line).unwrap_or_else(|| panic!("unparsable sample line: {line}"));
                samples.push(s);
            }
        }
        Exposition { body, types, samples }
    }

    /// Whether a series name can be queried: a family, or a sample name (`_bucket` and the like).
    fn exposes(&self, name: &str) -> bool {
        self.types.contains_key(name) || self.samples.iter().any(|s| s.name == name)
    }

    /// The value of the sample with this name and exactly these labels.
    pub(crate) fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.samples.iter().find(|s| s.name == name && s.labels == want).map(|s| s.value)
    }

    /// The sum of the samples named `name` whose labels include `labels`.
    pub(crate) fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(v)))
            .map(|s| s.value)
            .sum()
    }
}

/// What the shared live server exposed after some activity.
struct Live {
    metrics: Exposition,
    /// The session's phase when the body was read.
    phase: String,
}

static LIVE: OnceCell<Live> = OnceCell::const_new();

/// The `/metrics` body of a server with a project, a session running the scripted agent and one
/// open watch stream, read once per test process (the server is gone afterwards).
async fn live() -> &'static Live {
    LIVE.get_or_init(|| async {
        let server = Server::start().await;
        let session = active(&server, "obs", "obs-1").await;
        let _watch = WatchStream::open(&server, &format!("{API}/sessions?watch=true")).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        let metrics = loop {
            let r = server.get_path("/metrics").await;
            assert_eq!(r.code, 200, "{}", r.text());
            let m = Exposition::parse(r.text());
            if m.value("aoctl_watch_streams", &[]) == Some(1.0) {
                break m;
            }
            assert!(Instant::now() < deadline, "aoctl_watch_streams never counted the watch:\n{}", m.body);
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let phase = session["status"]["phase"].as_str().unwrap_or_default().to_string();
        Live { metrics, phase }
    })
    .await
}

/// Runs `promtool ARGS`, with `stdin` on its standard input.
pub(crate) fn promtool(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new("promtool");
    cmd.args(args).stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("promtool runs (install the Debian package `prometheus`)");
    if let Some(text) = stdin {
        child.stdin.take().expect("stdin is piped").write_all(text.as_bytes()).expect("write to promtool");
    }
    child.wait_with_output().expect("promtool finishes")
}

/// Panics, showing everything promtool said, unless it succeeded.
#[track_caller]
pub(crate) fn assert_promtool_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "promtool rejected {what} ({}):\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `aoctl_*` and `process_*` metric names a PromQL expression reads (quoted strings skipped).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut word = String::new();
    let mut quote = None;
    let mut escaped = false;
    for c in expr.chars().chain([' ']) {
        if let Some(q) = quote {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, c) if c == q => quote = None,
                _ => {}
            }
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
            continue;
        }
        if word.starts_with("aoctl_") || word.starts_with("process_") {
            names.insert(std::mem::take(&mut word));
        }
        word.clear();
        if matches!(c, '"' | '\'' | '`') {
            quote = Some(c);
        }
    }
    names
}

/// Names in `exprs` the live body does not expose, each with the expression using it.
fn unexposed(metrics: &Exposition, exprs: &[String]) -> Vec<String> {
    let mut missing = vec![];
    for e in exprs {
        for name in metric_names(e) {
            if !metrics.exposes(&name) && !ONCE_KNOWN.contains(&name.as_str()) {
                missing.push(format!("{name} (in `{e}`)"));
            }
        }
    }
    missing
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_accepts_the_live_metrics() {
    let live = live().await;
    let out = promtool(&["check", "metrics"], Some(&live.metrics.body));
    assert_promtool_ok(&out, &format!("the live /metrics body:\n{}", live.metrics.body));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_metric_is_exposed_with_its_labels() {
    let live = live().await;
    let m = &live.metrics;
    let mut problems = vec![];
    for (name, labels) in DOCUMENTED_METRICS {
        if ONCE_KNOWN.contains(name) {
            if m.exposes(name) {
                problems.push(format!("{name}: exposed before it is known"));
            }
            continue;
        }
        if !m.types.contains_key(*name) {
            problems.push(format!("{name}: no `# TYPE` line (no series exists before first use?)"));
            continue;
        }
        let want: BTreeSet<&str> = labels.iter().copied().collect();
        let histogram = m.types[*name] == "histogram";
        let series: Vec<String> = if histogram {
            ["_bucket", "_sum", "_count"].iter().map(|suffix| format!("{name}{suffix}")).collect()
        } else {
            vec![name.to_string()]
        };
        for s in m.samples.iter().filter(|s| series.contains(&s.name)) {
            let got: BTreeSet<&str> = s.labels.keys().map(String::as_str).filter(|l| *l != "le").collect();
            if got != want {
                problems.push(format!("{}: labels {got:?}, docs/observability.md says {want:?}", s.name));
                break;
            }
        }
    }
    assert!(problems.is_empty(), "{}\n--- body\n{}", problems.join("\n"), m.body);

    // The values say what the server did: one Idle session, one watch, one agent started.
    let phase = live.phase.as_str();
    assert_eq!(m.value("aoctl_sessions", &[("project", "obs"), ("phase", phase)]), Some(1.0), "{}", m.body);
    assert_eq!(m.sum("aoctl_sessions", &[("project", "obs")]), 1.0, "one session in all: {}", m.body);
    let every_phase = m.samples.iter().filter(|s| s.name == "aoctl_sessions").count();
    assert!(every_phase >= 10, "every phase of the project is pre-initialised: {}", m.body);
    assert_eq!(m.value("aoctl_watch_streams", &[]), Some(1.0));
    assert!(m.sum("aoctl_session_spawn_duration_seconds_count", &[]) >= 1.0, "{}", m.body);
    let started = [("runtime", "tmux"), ("op", "start"), ("result", "success")];
    assert!(m.sum("aoctl_runtime_operations_total", &started) >= 1.0, "{}", m.body);
    assert!(m.sum("aoctl_reconcile_total", &[("controller", "session")]) >= 1.0, "{}", m.body);
    assert!(m.value("process_resident_memory_bytes", &[]).is_some_and(|v| v > 0.0), "{}", m.body);
    assert!(!m.body.contains("obs-1"), "no per-session label by default: {}", m.body);
}

/// Every panel of a Grafana dashboard, rows' nested panels included.
fn panels(dash: &Value) -> Vec<&Value> {
    let mut out = vec![];
    for p in dash["panels"].as_array().into_iter().flatten() {
        out.push(p);
        out.extend(p["panels"].as_array().into_iter().flatten());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_queries_use_only_exposed_metrics() {
    let path = root().join("charts/aoctl/dashboards/aoctl-overview.json");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dash: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(dash["schemaVersion"].as_u64().is_some_and(|v| v >= 36), "schemaVersion: {}", dash["schemaVersion"]);
    assert_eq!(dash["uid"], "aoctl-overview");
    let vars = dash["templating"]["list"].as_array().expect("templating.list");
    let ds = vars.iter().find(|v| v["name"] == "datasource").expect("a `datasource` variable");
    assert_eq!((&ds["type"], &ds["query"]), (&json!("datasource"), &json!("prometheus")));

    let mut exprs = vec![];
    let mut ids = BTreeSet::new();
    for p in panels(&dash) {
        assert!(ids.insert(p["id"].as_u64().expect("panel id")), "duplicate panel id {}", p["id"]);
        let g = &p["gridPos"];
        let (x, w) = (g["x"].as_u64().expect("gridPos.x"), g["w"].as_u64().expect("gridPos.w"));
        assert!(x + w <= 24, "panel {} is wider than the grid", p["title"]);
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "panel {} datasource", p["title"]);
        let targets = p["targets"].as_array().filter(|t| !t.is_empty());
        for t in targets.unwrap_or_else(|| panic!("panel {} has no targets", p["title"])) {
            let expr = t["expr"].as_str().unwrap_or_else(|| panic!("panel {} target without expr", p["title"]));
            exprs.push(expr.to_string());
        }
    }
    for v in vars.iter().filter(|v| v["type"] == "query") {
        exprs.push(v["definition"].as_str().expect("query variable definition").to_string());
    }

    let used: BTreeSet<String> = exprs.iter().flat_map(|e| metric_names(e)).collect();
    for want in [
        "aoctl_sessions",
        "aoctl_session_spawn_duration_seconds_bucket",
        "aoctl_reconcile_total",
        "aoctl_reconcile_errors_total",
        "aoctl_reconcile_duration_seconds_bucket",
        "aoctl_workqueue_depth",
        "aoctl_workqueue_retries_total",
        "aoctl_reactions_total",
        "aoctl_feedback_latency_seconds_bucket",
        "aoctl_github_requests_total",
        "aoctl_github_ratelimit_remaining",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "aoctl_watch_streams",
    ] {
        assert!(used.contains(want), "the dashboard shows no {want}; it reads {used:?}");
    }
    let live = live().await;
    let missing = unexposed(&live.metrics, &exprs);
    assert!(missing.is_empty(), "the dashboard reads metrics /metrics lacks:\n{}", missing.join("\n"));
}

/// The rules of docs/alerts.yaml as `(alert, expr)`.
fn alert_rules() -> Vec<(String, String)> {
    let path = root().join("docs/alerts.yaml");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Value = serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rules = vec![];
    for g in doc["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            let name = r["alert"].as_str().expect("every rule is an alert").to_string();
            rules.push((name, r["expr"].as_str().expect("expr").to_string()));
        }
    }
    rules
}

/// `promtool test rules` input: which alerts fire on made-up series, and which must not. The
/// annotations are stripped from a copy of the rules first (a test would otherwise have to
/// repeat their rendered text).
const RULE_TESTS: &str = r#"
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'up{job="aoctl",instance="a:7420"}'
        values: '1x40'
      - series: 'up{job="aoctl",instance="b:7420"}'
        values: '0x40'
      - series: 'aoctl_sessions{instance="a:7420",project="web",phase="Stuck"}'
        values: '0 1x39'
      - series: 'aoctl_sessions{instance="a:7420",project="web",phase="NeedsInput"}'
        values: '0x40'
      - series: 'aoctl_reactions_total{instance="a:7420",reaction="ci-failed",action="send-to-agent",result="escalated"}'
        values: '0x25 1x14'
      - series: 'aoctl_reactions_total{instance="a:7420",reaction="agent-stuck",action="notify",result="escalated"}'
        values: '0 1 1x38'
      - series: 'aoctl_github_ratelimit_remaining{instance="a:7420"}'
        values: '5000 4000 3000 2000 1000 400x35'
      - series: 'aoctl_github_requests_total{instance="a:7420",endpoint="GET /repos/{owner}/{repo}/pulls",code="200"}'
        values: '0+100x40'
      # c: a budget read as 0 long ago, no requests since; d: requests, but no answer said the
      # budget yet (no series). Neither is low.
      - series: 'aoctl_github_ratelimit_remaining{instance="c:7420"}'
        values: '0x40'
      - series: 'aoctl_github_requests_total{instance="d:7420",endpoint="GET /repos/{owner}/{repo}/pulls",code="304"}'
        values: '0+100x40'
      - series: 'aoctl_reconcile_total{instance="a:7420",controller="session",result="success"}'
        values: '0+5x40'
      - series: 'aoctl_reconcile_total{instance="a:7420",controller="session",result="error"}'
        values: '0+5x40'
      - series: 'aoctl_reconcile_errors_total{instance="a:7420",controller="session"}'
        values: '0+5x40'
      - series: 'aoctl_reconcile_total{instance="a:7420",controller="project",result="requeue_after"}'
        values: '0+10x40'
      - series: 'aoctl_reconcile_errors_total{instance="a:7420",controller="project"}'
        values: '0x40'
      - series: 'aoctl_workqueue_depth{instance="a:7420",controller="session"}'
        values: '500x40'
      - series: 'aoctl_workqueue_depth{instance="a:7420",controller="project"}'
        values: '0x40'
    alert_rule_test:
      - {eval_time: 10m, alertname: AoctlSessionsStuck}
      - eval_time: 30m
        alertname: AoctlSessionsStuck
        exp_alerts: [{exp_labels: {severity: warning, instance: "a:7420", project: web}}]
      - {eval_time: 30m, alertname: AoctlSessionsNeedInput}
      - eval_time: 10m
        alertname: AoctlReactionEscalated
        exp_alerts: [{exp_labels: {severity: warning, instance: "a:7420", reaction: agent-stuck}}]
      - eval_time: 30m
        alertname: AoctlReactionEscalated
        exp_alerts: [{exp_labels: {severity: warning, instance: "a:7420", reaction: ci-failed}}]
      - eval_time: 30m
        alertname: AoctlGithubRateLimitLow
        exp_alerts: [{exp_labels: {severity: warning, instance: "a:7420"}}]
      - {eval_time: 5m, alertname: AoctlReconcileErrors}
      - eval_time: 30m
        alertname: AoctlReconcileErrors
        exp_alerts: [{exp_labels: {severity: warning, instance: "a:7420", controller: session}}]
      - eval_time: 30m
        alertname: AoctlWorkqueueBacklog
        exp_alerts: [{exp_labels: {severity: warning, instance: "a:7420", controller: session}}]
      - eval_time: 30m
        alertname: AoctlDown
        exp_alerts: [{exp_labels: {severity: critical, job: aoctl, instance: "b:7420"}}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_rules_pass_promtool_and_use_only_exposed_metrics() {
    let path = root().join("docs/alerts.yaml");
    let out = promtool(&["check", "rules", path.to_str().expect("UTF-8 path")], None);
    assert_promtool_ok(&out, "docs/alerts.yaml");

    // The same rules without annotations, against made-up series.
    let tmp = tempfile::tempdir().expect("tempdir");
    let text = fs::read_to_string(&path).expect("read docs/alerts.yaml");
    let mut doc: Value = serde_yaml_ng::from_str(&text).expect("docs/alerts.yaml is YAML");
    for g in doc["groups"].as_array_mut().expect("groups") {
        for r in g["rules"].as_array_mut().expect("rules") {
            r.as_object_mut().expect("rule").remove("annotations");
        }
    }
    let bare = tmp.path().join("alerts.yaml");
    fs::write(&bare, serde_yaml_ng::to_string(&doc).expect("YAML")).expect("write the bare rules");
    let tests = tmp.path().join("alerts.test.yaml");
    fs::write(&tests, format!("rule_files: [{}]\n{RULE_TESTS}", bare.display())).expect("write the rule tests");
    let out = promtool(&["test", "rules", tests.to_str().expect("UTF-8 path")], None);
    assert_promtool_ok(&out, "the alert rules' unit tests");

    let rules = alert_rules();
    let names: BTreeSet<&str> = rules.iter().map(|(n, _)| n.as_str()).collect();
    for want in ["AoctlSessionsStuck", "AoctlReactionEscalated", "AoctlGithubRateLimitLow", "AoctlReconcileErrors"] {
        assert!(names.contains(want), "docs/alerts.yaml lacks {want}: {names:?}");
    }
    let live = live().await;
    let exprs: Vec<String> = rules.into_iter().map(|(_, e)| e).collect();
    let missing = unexposed(&live.metrics, &exprs);
    assert!(missing.is_empty(), "the alert rules read metrics /metrics lacks:\n{}", missing.join("\n"));
}

/// A real Prometheus on a free port with a scratch TSDB, killed when dropped.
struct Prometheus {
    child: Option<Child>,
    base: String,
    log: PathBuf,
    http: reqwest::Client,
}

impl Prometheus {
    /// Starts `prometheus` with `config` (YAML) and waits until it is ready.
    async fn start(dir: &Path, config: &str) -> Prometheus {
        let cfg = dir.join("prometheus.yml");
        fs::write(&cfg, config).expect("write prometheus.yml");
        let check = promtool(&["check", "config", cfg.to_str().expect("UTF-8 path")], None);
        assert_promtool_ok(&check, &format!("the Prometheus configuration:\n{config}"));
        let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("HTTP client");
        let log = dir.join("prometheus.log");
        for _ in 0..3 {
            let port = free_port();
            let out = fs::File::create(&log).expect("create the Prometheus log");
            let child = Command::new("prometheus")
                .arg(format!("--config.file={}", cfg.display()))
                .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(out.try_clone().expect("log handle"))
                .stderr(out)
                .spawn()
                .expect("prometheus runs (install the Debian package `prometheus`)");
            let base = format!("http://127.0.0.1:{port}");
            let mut p = Prometheus { child: Some(child), base, log: log.clone(), http: http.clone() };
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if p.child.as_mut().and_then(|c| c.try_wait().ok().flatten()).is_some() {
                    break;
                }
                let ready = p.http.get(format!("{}/-/ready", p.base)).send().await;
                if ready.is_ok_and(|r| r.status().is_success()) {
                    return p;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let text = p.log_text();
            p.stop();
            assert!(text.contains("address already in use"), "prometheus did not become ready:\n{text}");
        }
        panic!("prometheus found no free port in 3 attempts");
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// An API call; panics unless Prometheus answers `status: success`.
    async fn api(&self, path: &str, query: &[(&str, &str)]) -> Value {
        let r = self.http.get(format!("{}{path}", self.base)).query(query).send().await.expect("Prometheus answers");
        let body: Value = r.json().await.expect("Prometheus answers JSON");
        assert_eq!(body["status"], "success", "{path} {query:?}: {body}");
        body["data"].clone()
    }

    /// SIGTERM, then SIGKILL after 10 s.
    fn stop(&mut self) {
        if let Some(c) = self.child.take() {
            terminate(c, Duration::from_secs(10));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("==== prometheus log ====\n{}==== end of prometheus log ====", self.log_text());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_prometheus_scrapes_sessions_by_project() {
    let server = Server::start().await;
    let session = active(&server, "scraped", "scraped-1").await;
    let phase = session["status"]["phase"].as_str().expect("status.phase").to_string();

    // The scrape configuration of docs/observability.md, at a 1 s interval, with the token file
    // the server made in its data dir.
    let dir = tempfile::Builder::new().prefix("aoctl-e2e-prometheus-").tempdir().expect("tempdir");
    let token_file = server.data_dir.join("token");
    let alerts = root().join("docs/alerts.yaml");
    let config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
         rule_files: ['{}']\n\
         scrape_configs:\n\
         \x20 - job_name: aoctl\n\
         \x20   static_configs: [{{targets: ['127.0.0.1:{}']}}]\n\
         \x20   authorization: {{type: Bearer, credentials_file: '{}'}}\n",
        alerts.display(),
        server.port,
        token_file.display()
    );
    let mut prom = Prometheus::start(dir.path(), &config).await;

    let deadline = Instant::now() + Duration::from_secs(30);
    let found = loop {
        let data = prom.api("/api/v1/query", &[("query", "aoctl_sessions")]).await;
        let found = data["result"].as_array().into_iter().flatten().find(|r| {
            r["metric"]["project"] == "scraped"
                && r["metric"]["phase"] == phase.as_str()
                && r["metric"]["job"] == "aoctl"
        });
        if let Some(r) = found {
            break r.clone();
        }
        assert!(Instant::now() < deadline, "no aoctl_sessions sample for the project after 30 s: {data}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(found["value"][1], "1", "one {phase} session in project `scraped`: {found}");
    let total = prom.api("/api/v1/query", &[("query", "sum(aoctl_sessions{project=\"scraped\"})")]).await;
    assert_eq!(total["result"][0]["value"][1], "1", "one session in all: {total}");
    let targets = prom.api("/api/v1/targets", &[]).await;
    assert_eq!(targets["activeTargets"][0]["health"], "up", "the bearer token is accepted: {targets}");

    // Prometheus loaded every example alert rule and evaluates it without error.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let rules = prom.api("/api/v1/rules", &[]).await;
        let all: Vec<&Value> =
            rules["groups"].as_array().into_iter().flatten().flat_map(|g| g["rules"].as_array().unwrap()).collect();
        assert_eq!(all.len(), alert_rules().len(), "rules loaded: {rules}");
        assert!(all.iter().all(|r| r["health"] != "err"), "a rule fails to evaluate: {rules}");
        if all.iter().all(|r| r["health"] == "ok") {
            break;
        }
        assert!(Instant::now() < deadline, "rules not evaluated after 15 s: {rules}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Every query of the dashboard runs, with its variables as Grafana would fill them.
    let dash: Value = serde_json::from_str(
        &fs::read_to_string(root().join("charts/aoctl/dashboards/aoctl-overview.json")).expect("read the dashboard"),
    )
    .expect("the dashboard is JSON");
    let mut with_data = 0;
    for p in panels(&dash) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().expect("expr");
            let q = expr.replace("$__rate_interval", "1m").replace("$instance", ".*").replace("$project", ".*");
            let data = prom.api("/api/v1/query", &[("query", &q)]).await;
            with_data += usize::from(data["result"].as_array().is_some_and(|r| !r.is_empty()));
        }
    }
    assert!(with_data > 0, "no dashboard query returned data");
    prom.stop();
}
