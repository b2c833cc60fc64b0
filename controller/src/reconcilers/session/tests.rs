//! In-process tests of the session reconciler: the real store in a temporary folder and the
//! reconciler's own logic, with fakes of the machine side (a runtime that records what it is asked,
//! workspaces that are plain folders).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aoctl_agents::InputStyle;
use aoctl_api::condition::{self, set_condition, types};
use aoctl_api::orchestrator::{UpstreamKind, UpstreamStatus};
use aoctl_api::session::{ChecksState, PullRequestState, ReviewState, RuntimeKind, WorkspaceKind};
use aoctl_api::{Condition, ConditionStatus, Kind, Project, Session, Time};
use aoctl_engine::Action;
use aoctl_forge_types::{CheckKind, Checks, FailingCheck, PullRequest, Reviews};
use aoctl_git::workspace::{
    PoolReport, PoolRequest, WorkspaceDiff, WorkspaceError, WorkspaceInfo, WorkspaceRecord, WorkspaceRequest,
};
use aoctl_runtimes::{Handle, LaunchSpec, Owned, Probe, Runtime, RuntimeError, TerminalView};
use aoctl_store::{Store, StoreError, WriteOptions};
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::state::Facts;
use super::state::PrMemo;
use super::{reconcile, Context, State, FINALIZER};
use crate::machine::{Machine, SessionFiles, WorkspaceStore};
use crate::metrics::Metrics;
use crate::recorder::Recorder;
use crate::typing::Typing;

/// A runtime that runs nothing: it remembers which agents it holds and records every start, stop
/// and message typed.
#[derive(Default)]
pub(super) struct FakeRuntime {
    inner: Mutex<Agents>,
}

#[derive(Default)]
struct Agents {
    /// What a probe of each handle answers.
    held: BTreeMap<Handle, (String, Probe)>,
    started: Vec<String>,
    stopped: Vec<Handle>,
    typed: Vec<String>,
}

impl FakeRuntime {
    /// What was typed into the agents, in order.
    pub(super) fn typed(&self) -> Vec<String> {
        self.agents().typed.clone()
    }

    fn agents(&self) -> parking_lot::MutexGuard<'_, Agents> {
        self.inner.lock()
    }

    /// An agent of `session` that runs already, as one started by a controller before a restart.
    fn running(&self, session: &str) {
        self.agents().held.insert(handle(session), (session.to_string(), Probe::Alive));
    }

    /// The agent of `session` ends with `code`.
    fn exit(&self, session: &str, code: i32) {
        self.agents().held.get_mut(&handle(session)).expect("a running agent").1 = Probe::Exited(Some(code));
    }
}

fn handle(session: &str) -> Handle {
    Handle(format!("fake-{session}"))
}

#[async_trait::async_trait]
impl Runtime for FakeRuntime {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Tmux
    }

    async fn start(&self, spec: &LaunchSpec) -> Result<Handle, RuntimeError> {
        let mut a = self.agents();
        let h = handle(&spec.session);
        if a.held.get(&h).is_some_and(|(_, p)| *p == Probe::Alive) {
            return Err(RuntimeError::Failed { runtime: "fake", op: "start", message: "already running".into() });
        }
        a.held.insert(h.clone(), (spec.session.clone(), Probe::Alive));
        a.started.push(spec.session.clone());
        Ok(h)
    }

    async fn probe(&self, h: &Handle) -> Result<Probe, RuntimeError> {
        Ok(self.agents().held.get(h).map_or(Probe::Missing, |(_, p)| *p))
    }

    async fn send(&self, h: &Handle, text: &str, _style: &InputStyle) -> Result<(), RuntimeError> {
        let mut a = self.agents();
        if a.held.get(h).is_none_or(|(_, p)| *p != Probe::Alive) {
            return Err(RuntimeError::NotFound { runtime: "fake", handle: h.0.clone() });
        }
        a.typed.push(text.to_string());
        Ok(())
    }

    async fn pending(&self, _h: &Handle, _text: &str) -> Result<bool, RuntimeError> {
        Ok(false)
    }

    async fn capture(&self, _h: &Handle) -> Result<String, RuntimeError> {
        Ok("$ ".to_string())
    }

    async fn keys(&self, _h: &Handle, _keys: &[&str]) -> Result<(), RuntimeError> {
        Ok(())
    }

    async fn stop(&self, h: &Handle) -> Result<(), RuntimeError> {
        let mut a = self.agents();
        a.held.remove(h);
        a.stopped.push(h.clone());
        Ok(())
    }

    async fn terminal(&self, _handle: &Handle, _cols: u16, _rows: u16) -> Result<TerminalView, RuntimeError> {
        Err(RuntimeError::Unavailable { runtime: "fake", message: "no terminal view yet".into() })
    }

    fn attach_command(&self, h: &Handle) -> Vec<String> {
        vec!["attach".into(), h.0.clone()]
    }

    fn handle_for(&self, session: &str) -> Option<Handle> {
        Some(handle(session))
    }

    async fn list(&self) -> Result<Vec<Owned>, RuntimeError> {
        let a = self.agents();
        Ok(a.held.iter().map(|(h, (s, _))| Owned { session: s.clone(), project: None, handle: h.clone() }).collect())
    }
}

/// Workspaces that are empty folders under a root, with no git behind them.
struct FakeWorkspaces {
    root: PathBuf,
    made: Arc<Mutex<HashMap<(String, String), WorkspaceRecord>>>,
}

impl WorkspaceStore for FakeWorkspaces {
    fn root(&self) -> &Path {
        &self.root
    }

    fn ensure(&self, req: &WorkspaceRequest) -> Result<WorkspaceInfo, WorkspaceError> {
        let path = self.root.join(&req.project).join(&req.session);
        let created = !path.exists();
        std::fs::create_dir_all(&path).expect("a workspace folder");
        let record = WorkspaceRecord {
            project: req.project.clone(),
            session: req.session.clone(),
            path: path.clone(),
            repo: req.repo.clone(),
            branch: req.branch.clone(),
            base_ref: req.base_ref.clone(),
            kind: req.kind,
            worktree_name: None,
            port: 3000,
            setup_done: true,
            created_at: chrono::Utc::now(),
            checkout_done: Some(true),
            branch_made_at: None,
            sandbox: false,
            pool_entry: None,
        };
        self.made.lock().insert((req.project.clone(), req.session.clone()), record);
        Ok(WorkspaceInfo {
            project: req.project.clone(),
            session: req.session.clone(),
            path,
            branch: req.branch.clone(),
            head_sha: None,
            port: 3000,
            created,
            sandbox: None,
            sync_error: None,
            pooled: false,
        })
    }

    fn remove(&self, project: &str, session: &str) -> Result<bool, WorkspaceError> {
        let Some(r) = self.made.lock().remove(&(project.to_string(), session.to_string())) else {
            return Ok(false);
        };
        std::fs::remove_dir_all(&r.path).expect("the workspace folder goes");
        Ok(true)
    }

    fn list(&self) -> Result<Vec<WorkspaceRecord>, WorkspaceError> {
        Ok(self.made.lock().values().cloned().collect())
    }

    /// These folders have no git behind them, so there is no diff to show.
    fn diff(&self, project: &str, session: &str, _: &str, _: usize) -> Result<WorkspaceDiff, WorkspaceError> {
        Err(WorkspaceError::NoWorkspace { path: self.root.join(project).join(session) })
    }

    /// No pool is kept in these folders without git: the session reconciler never asks for one.
    fn tend_pool(&self, req: &PoolRequest) -> Result<PoolReport, WorkspaceError> {
        Err(WorkspaceError::NoWorkspace { path: self.root.join(&req.project) })
    }

    fn drain_pool(&self, _: &str) -> Result<usize, WorkspaceError> {
        Ok(0)
    }

    fn pools(&self) -> Vec<String> {
        vec![]
    }

    fn is_gone(&self, path: &std::path::Path) -> bool {
        !path.exists()
    }
}

struct FakeMachine {
    runtime: Arc<FakeRuntime>,
    workspaces: FakeWorkspaces,
    files: SessionFiles,
    typing: Typing,
    /// Docker engine addresses that have not answered for a minute.
    down: Arc<Mutex<std::collections::HashSet<String>>>,
}

#[async_trait::async_trait]
impl Machine for FakeMachine {
    async fn runtime(&self, _kind: RuntimeKind, _host: Option<&str>) -> Result<Arc<dyn Runtime>, RuntimeError> {
        Ok(self.runtime.clone())
    }

    async fn runtimes(&self) -> Vec<Arc<dyn Runtime>> {
        vec![self.runtime.clone()]
    }

    async fn engine_health(&self, host: &str) -> crate::machine::EngineHealth {
        let down = self.down.lock().contains(host);
        crate::machine::EngineHealth {
            answers: !down,
            down_for: if down { Duration::from_secs(60) } else { Duration::ZERO },
            message: if down { "connection refused".into() } else { String::new() },
        }
    }

    fn workspaces(&self) -> &dyn WorkspaceStore {
        &self.workspaces
    }

    fn files(&self) -> &SessionFiles {
        &self.files
    }

    fn typing(&self) -> &Typing {
        &self.typing
    }

    fn output_events(&self) -> bool {
        false
    }
}

/// A session reconciler on a fresh store, with a fake machine.
pub(super) struct World {
    dir: tempfile::TempDir,
    pub(super) ctx: Arc<Context>,
    pub(super) runtime: Arc<FakeRuntime>,
    down: Arc<Mutex<std::collections::HashSet<String>>>,
    made: Arc<Mutex<HashMap<(String, String), WorkspaceRecord>>>,
}

impl World {
    pub(super) async fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store")).unwrap();
        let runtime = Arc::new(FakeRuntime::default());
        let down = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let made = Arc::new(Mutex::new(HashMap::new()));
        let machine = FakeMachine {
            down: down.clone(),
            runtime: runtime.clone(),
            workspaces: FakeWorkspaces { root: dir.path().join("workspaces"), made: made.clone() },
            files: SessionFiles::new(dir.path().join("sessions")),
            typing: Typing::default(),
        };
        let metrics = Arc::new(Metrics::new().unwrap());
        let ctx = Arc::new(Context {
            store: store.clone(),
            recorder: Recorder::new(store),
            machine: Arc::new(machine),
            forges: Arc::new(crate::forges::Hub::counted_in(&metrics)),
            metrics,
            state: Arc::new(State::default()),
            index: Arc::new(super::SessionIndex::new()),
            node: "here".into(),
            session_keys: Some(crate::agent_token::SessionKeys::new("t0ken", "127.0.0.1:7420".parse().unwrap())),
            outbox: crate::outbox::Handoff::unattended(),
        });
        World { dir, ctx, runtime, down, made }
    }

    /// A Ready project named `demo`, with `spec` merged over its path.
    pub(super) async fn project(&self, spec: Value) {
        let mut full = json!({"path": self.dir.path().join("repo")});
        full.as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
        let p = json!({"metadata": {"name": "demo"}, "spec": full});
        self.ctx.store.create(Kind::Project, p, WriteOptions::default()).await.unwrap();
        let mut p: Project = self.ctx.store.get_typed("demo").await.unwrap();
        let ready = Condition::new(types::READY, ConditionStatus::True, "RepositoryReady", "", None, Time::now());
        set_condition(&mut p.status.conditions, ready);
        p.status.default_branch = Some("main".into());
        self.ctx.store.update_status_typed(&p).await.unwrap();
    }

    /// A session of `demo` whose agent takes its prompt as an argument; `spec` merged over it.
    pub(super) async fn session(&self, name: &str, spec: Value) {
        let home = self.dir.path().join("home");
        let mut full = json!({
            "project": "demo",
            "prompt": "fix the bug",
            "agent": {"command": ["agent", "{prompt}"]},
            "env": {"HOME": home},
        });
        full.as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
        let s = json!({"metadata": {"name": name}, "spec": full});
        self.ctx.store.create(Kind::Session, s, WriteOptions::default()).await.unwrap();
    }

    pub(super) async fn get(&self, name: &str) -> Session {
        self.ctx.store.get_typed(name).await.unwrap()
    }

    /// One reconcile of the session as it is stored now.
    pub(super) async fn reconcile(&self, name: &str) -> Action {
        reconcile(Arc::new(self.get(name).await), self.ctx.clone()).await.unwrap()
    }

    /// Reconciles until the agent of `name` was found running and given its first prompt.
    pub(super) async fn running(&self, name: &str) {
        for _ in 0..3 {
            self.reconcile(name).await;
        }
        let files = self.ctx.machine.files().typing(name);
        assert!(files.prompt_done(), "the first prompt of {name} is delivered");
    }

    /// The checkout each session's workspace was made as.
    fn made_kinds(&self) -> HashMap<String, WorkspaceKind> {
        self.made.lock().iter().map(|((_, s), r)| (s.clone(), r.kind)).collect()
    }

    fn started(&self) -> Vec<String> {
        self.runtime.agents().started.clone()
    }
}

fn reason(s: &Session, type_: &str) -> String {
    condition::find(&s.status.conditions, type_).map(|c| c.reason.clone()).unwrap_or_default()
}

#[tokio::test]
async fn the_first_reconcile_adds_the_finalizer_and_deletion_cleans_up_before_releasing_it() {
    let w = World::new().await;
    w.project(json!({})).await;
    w.session("web", json!({})).await;

    assert_eq!(w.reconcile("web").await, Action::await_change());
    assert_eq!(w.get("web").await.metadata.finalizers, [FINALIZER]);
    assert!(w.started().is_empty(), "nothing is started before the finalizer is stored");

    w.running("web").await;
    let workspace = PathBuf::from(&w.get("web").await.status.workspace.unwrap().path);
    assert!(workspace.is_dir());
    assert!(w.ctx.machine.files().dir("web").is_dir());

    w.ctx.store.delete(Kind::Session, "web", None, WriteOptions::default()).await.unwrap();
    assert!(w.get("web").await.metadata.deletion_timestamp.is_some(), "held by the finalizer");
    w.reconcile("web").await;
    // Every runtime is asked, so the one the status names may be asked twice.
    assert!(w.runtime.agents().stopped.contains(&handle("web")));
    assert!(w.runtime.agents().held.is_empty(), "the agent is stopped");
    assert!(!workspace.exists(), "the workspace is removed");
    assert!(!w.ctx.machine.files().dir("web").exists(), "the session's files are removed");
    let gone = w.ctx.store.get_typed::<Session>("web").await;
    assert!(matches!(gone, Err(StoreError::NotFound { .. })), "the finalizer was released: {gone:?}");
}

#[tokio::test]
async fn a_third_session_waits_in_the_queue_under_max_concurrent_sessions() {
    let w = World::new().await;
    w.project(json!({"maxConcurrentSessions": 2})).await;
    for name in ["a", "b", "c"] {
        w.session(name, json!({})).await;
    }
    for _ in 0..3 {
        for name in ["a", "b", "c"] {
            w.reconcile(name).await;
        }
    }
    assert_eq!(w.started(), ["a", "b"]);
    let c = w.get("c").await;
    assert_eq!(reason(&c, types::READY), "Queued");
    assert!(c.status.runtime.is_none());

    // A slot frees when a session stops.
    let mut a = w.get("a").await;
    a.spec.stopped = true;
    w.ctx.store.update_typed(&a).await.unwrap();
    w.reconcile("a").await;
    w.reconcile("c").await;
    assert_eq!(w.started(), ["a", "b", "c"]);
}

#[tokio::test]
async fn an_orchestrator_holds_no_slot_and_gets_a_checkout_without_a_branch() {
    let w = World::new().await;
    w.project(json!({"maxConcurrentSessions": 1, "orchestrator": {}, "defaults": {"workspace": "clone"}})).await;
    w.session("a", json!({})).await;
    w.session("demo-orchestrator", json!({"role": "orchestrator"})).await;
    w.session("b", json!({})).await;
    for _ in 0..3 {
        for name in ["a", "demo-orchestrator", "b"] {
            w.reconcile(name).await;
        }
    }
    assert_eq!(w.started(), ["a", "demo-orchestrator"], "the orchestrator runs beside the one worker");
    assert_eq!(reason(&w.get("b").await, types::READY), "Queued");
    let o = w.get("demo-orchestrator").await;
    let ws = o.status.workspace.expect("a checkout");
    assert_eq!(ws.branch, "", "no branch of its own");
    let made = w.made_kinds();
    assert_eq!(made.get("demo-orchestrator"), Some(&WorkspaceKind::Readonly), "not the project's default clone");
    assert_eq!(made.get("a"), Some(&WorkspaceKind::Clone));
    assert!(o.status.pull_request.is_none());
}

/// The project's orchestrator, started with its goal; and two workers of it, each keeping a
/// report for it that arrived `ago` seconds ago.
async fn orchestrated(ago: i64) -> World {
    let w = World::new().await;
    w.project(json!({"orchestrator": {}})).await;
    w.session("demo-orchestrator", json!({"role": "orchestrator", "prompt": "GOAL"})).await;
    w.running("demo-orchestrator").await;
    let at = Time(chrono::Utc::now() - chrono::Duration::seconds(ago));
    for (name, text) in [("w-a", "A-DONE"), ("w-b", "B-DONE")] {
        let s = json!({"metadata": {"name": name, "labels": {"ao.dev/orchestrator": "demo-orchestrator"}},
            "spec": {"project": "demo", "prompt": "task", "agent": {"command": ["agent"]}}});
        w.ctx.store.create(Kind::Session, s, WriteOptions::default()).await.unwrap();
        let mut s = w.get(name).await;
        let mut up = UpstreamStatus { orchestrator: "demo-orchestrator".into(), ..Default::default() };
        up.record(UpstreamKind::Report, "report:1".into(), at, text);
        s.status.upstream = Some(up);
        w.ctx.store.update_status_typed(&s).await.unwrap();
    }
    w
}

fn reports_typed(w: &World) -> Vec<String> {
    w.runtime.typed().into_iter().filter(|t| t.contains("[aoctl:reports:")).collect()
}

#[tokio::test]
async fn two_reports_together_reach_the_orchestrator_as_one_message_once() {
    let w = orchestrated(10).await;
    for _ in 0..4 {
        w.reconcile("demo-orchestrator").await;
    }
    let typed = reports_typed(&w);
    assert_eq!(typed.len(), 1, "{typed:?}");
    assert!(
        typed[0].contains("A-DONE") && typed[0].contains("B-DONE") && typed[0].contains("2 messages"),
        "{}",
        typed[0]
    );
    let o = w.get("demo-orchestrator").await.status.orchestrator.unwrap();
    assert!(o.in_flight.is_none());
    assert_eq!((o.batches, o.delivered["w-a"].seq, o.delivered["w-b"].seq), (1, 1, 1));
    // Each worker trims what its orchestrator had, and nothing is typed again.
    for _ in 0..3 {
        w.reconcile("w-a").await;
    }
    assert!(w.get("w-a").await.status.upstream.unwrap().pending.is_empty());
    for _ in 0..3 {
        w.reconcile("demo-orchestrator").await;
    }
    assert_eq!(reports_typed(&w).len(), 1);
}

#[test]
fn an_orchestrators_first_prompt_waits_for_the_tools_of_an_agent_given_them() {
    use super::launch::waits_for_tools;
    let mut s = Session::new("demo-orchestrator", "demo", "GOAL");
    let claude = aoctl_agents::builtin("claude-code");
    assert!(claude.is_some_and(|a| a.takes_mcp()));
    assert!(!waits_for_tools(&s, claude, true), "a worker's does not");
    let mut worker = s.clone();
    worker.metadata.labels.insert("ao.dev/orchestrator".into(), "demo-orchestrator".into());
    assert!(waits_for_tools(&worker, claude, true), "a worker of an orchestrator reports to it with its tools");
    s.spec.role = aoctl_api::session::SessionRole::Orchestrator;
    assert!(waits_for_tools(&s, claude, true));
    assert!(!waits_for_tools(&s, claude, false), "not when the server gives no agent aoctl mcp");
    assert!(!waits_for_tools(&s, None, true), "not a program of its own, which may never connect");
    let without = aoctl_agents::all().iter().find(|a| !a.takes_mcp()).expect("an agent that takes no MCP server");
    assert!(!waits_for_tools(&s, Some(without), true), "not an agent that is given no tools");
}

#[tokio::test]
async fn reports_wait_for_a_quiet_moment() {
    let w = orchestrated(0).await;
    let action = w.reconcile("demo-orchestrator").await;
    assert!(reports_typed(&w).is_empty(), "a report that just arrived waits for others");
    let after = action.requeue_after().expect("it looks again");
    assert!(after <= Duration::from_secs(3), "{after:?}");
}

#[tokio::test]
async fn a_batch_written_but_not_typed_is_typed_once_and_one_typed_before_a_crash_is_not_typed_again() {
    let w = orchestrated(10).await;
    // The pass that forms the batch writes it and types nothing: a crash here loses nothing.
    w.reconcile("demo-orchestrator").await;
    let o = w.get("demo-orchestrator").await;
    let batch = o.status.orchestrator.as_ref().and_then(|o| o.in_flight.clone()).expect("a batch in flight");
    assert!(reports_typed(&w).is_empty());
    // A controller that typed it and was killed before it recorded so: its marker is in the
    // transcript, so it is not typed again; the cursors move all the same.
    let transcript = w.ctx.machine.files().transcript("demo-orchestrator");
    std::fs::write(&transcript, format!("> {}\n", batch.text)).unwrap();
    w.reconcile("demo-orchestrator").await;
    assert!(reports_typed(&w).is_empty(), "found typed before: not typed again");
    let o = w.get("demo-orchestrator").await.status.orchestrator.unwrap();
    assert!(o.in_flight.is_none() && o.delivered["w-a"].seq == 1, "{o:?}");
}

#[tokio::test]
async fn a_worker_that_exits_keeps_it_for_its_orchestrator_once_and_a_stopped_one_keeps_none() {
    let w = World::new().await;
    w.project(json!({"orchestrator": {}})).await;
    let s = json!({"metadata": {"name": "w-a", "labels": {"ao.dev/orchestrator": "demo-orchestrator"}},
        "spec": {"project": "demo", "prompt": "task", "agent": {"command": ["agent", "{prompt}"]}}});
    w.ctx.store.create(Kind::Session, s, WriteOptions::default()).await.unwrap();
    w.running("w-a").await;
    w.runtime.exit("w-a", 1);
    for _ in 0..3 {
        w.reconcile("w-a").await;
    }
    let up = w.get("w-a").await.status.upstream.expect("kept for its orchestrator");
    let kinds: Vec<UpstreamKind> = up.pending.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [UpstreamKind::Exited], "one exit, one record");
    assert!(up.pending[0].text.starts_with("its agent exited"), "{}", up.pending[0].text);
    // A worker stopped on purpose keeps no exit for its orchestrator.
    let s = json!({"metadata": {"name": "w-b", "labels": {"ao.dev/orchestrator": "demo-orchestrator"}},
        "spec": {"project": "demo", "prompt": "task", "agent": {"command": ["agent", "{prompt}"]}}});
    w.ctx.store.create(Kind::Session, s, WriteOptions::default()).await.unwrap();
    w.running("w-b").await;
    let mut b = w.get("w-b").await;
    b.spec.stopped = true;
    w.ctx.store.update_typed(&b).await.unwrap();
    for _ in 0..3 {
        w.reconcile("w-b").await;
    }
    let kept = w.get("w-b").await.status.upstream.map(|u| u.pending.len()).unwrap_or(0);
    assert_eq!(kept, 0, "stopping is no exit");
}

/// Moves the stored start of the session's agent back, as if it had run for a minute.
async fn started_a_minute_ago(w: &World, name: &str) {
    let mut s = w.get(name).await;
    let r = s.status.runtime.as_mut().unwrap();
    r.started_at = Some(Time(chrono::Utc::now() - chrono::Duration::seconds(60)));
    w.ctx.store.update_status_typed(&s).await.unwrap();
}

#[tokio::test]
async fn an_agent_that_exited_is_restarted_per_its_restart_policy() {
    let w = World::new().await;
    w.project(json!({})).await;
    w.session("fails", json!({})).await;
    w.session("never", json!({"restartPolicy": "Never"})).await;
    for name in ["fails", "never"] {
        w.running(name).await;
        started_a_minute_ago(&w, name).await;
        w.runtime.exit(name, 1);
    }

    // The first look says the agent is gone; the next restarts it.
    assert_eq!(w.reconcile("fails").await, Action::requeue(Duration::ZERO));
    assert_eq!(reason(&w.get("fails").await, types::RUNTIME_READY), "Restarting");
    w.reconcile("fails").await;
    let fails = w.get("fails").await;
    assert_eq!(w.started(), ["fails", "never", "fails"]);
    let runtime = fails.status.runtime.clone().unwrap();
    assert_eq!((runtime.restarts, runtime.exit_code), (1, None));
    assert_eq!(reason(&fails, types::RUNTIME_READY), "Running");

    for _ in 0..2 {
        w.reconcile("never").await;
    }
    let never = w.get("never").await;
    assert_eq!(w.started(), ["fails", "never", "fails"], "restartPolicy Never starts nothing");
    assert_eq!(reason(&never, types::RUNTIME_READY), "AgentExited");
    assert_eq!(never.status.runtime.unwrap().exit_code, Some(1));
}

#[tokio::test]
async fn an_agent_found_running_after_a_restart_is_adopted_not_started_again() {
    let w = World::new().await;
    w.project(json!({})).await;
    w.session("web", json!({})).await;
    // Started by a controller that stopped before it wrote the session's status: its folder and
    // prompt were written before the start.
    w.runtime.running("web");
    let files = w.ctx.machine.files();
    std::fs::create_dir_all(files.dir("web")).unwrap();
    std::fs::write(files.prompt("web"), "fix the bug").unwrap();

    w.reconcile("web").await;
    w.reconcile("web").await;
    let s = w.get("web").await;
    assert!(w.started().is_empty(), "started twice: {:?}", w.started());
    assert_eq!(s.status.runtime.as_ref().map(|r| r.handle.as_str()), Some("fake-web"));
    assert_eq!(reason(&s, types::RUNTIME_READY), "Running");
    let (events, _) = w.ctx.store.list(Kind::Event, &aoctl_store::Selector::everything()).await.unwrap();
    assert!(events.iter().any(|e| e["reason"] == "Adopted"), "an Adopted event: {events:?}");
}

/// An open pull request #7 of branch `demo/web`, mergeable, at head `abc123`.
pub(super) fn open_pull() -> PullRequest {
    PullRequest {
        number: 7,
        url: "https://github.com/acme/web/pull/7".into(),
        state: PullRequestState::Open,
        head_sha: "abc123".into(),
        head_ref: "demo/web".into(),
        base_ref: "main".into(),
        base_sha: "def456".into(),
        draft: false,
        mergeable: Some(true),
        mergeable_state: None,
        merged: false,
        title: "Fix the login".into(),
        body: String::new(),
        author: "aoctl-bot".into(),
    }
}

/// What GitHub would say of an open pull request whose one check failed.
fn failed_ci() -> Facts {
    let pr = open_pull();
    let failing = FailingCheck {
        name: "test".into(),
        id: 11,
        details_url: None,
        kind: CheckKind::Status,
        conclusion: "failure".into(),
        app: None,
    };
    let checks = Checks { state: ChecksState::Failing, failing: vec![failing] };
    let reviews = Reviews { state: ReviewState::None, items: vec![], comments: vec![] };
    Facts { pr, checks, reviews, held: vec![], conflicts: None, at: Instant::now() }
}

#[tokio::test]
async fn a_failed_ci_is_typed_into_the_agent_once() {
    let w = World::new().await;
    // Nothing listens at this address: the test never reaches GitHub.
    w.project(json!({"repo": "acme/web", "github": {"apiUrl": "http://127.0.0.1:9"}})).await;
    w.session("web", json!({})).await;
    let answers = PrMemo {
        next_poll: Some(Instant::now() + Duration::from_secs(3600)),
        webhook_at: None,
        facts: Some(Arc::new(failed_ci())),
        ..Default::default()
    };
    w.ctx.state.set_pr_memo("web", answers);

    w.running("web").await;
    for _ in 0..2 {
        w.reconcile("web").await;
    }
    let typed = w.runtime.agents().typed.clone();
    assert_eq!(typed.len(), 1, "typed once: {typed:?}");
    assert!(typed[0].contains("test"), "names the failing check: {}", typed[0]);
    let s = w.get("web").await;
    assert_eq!(s.status.reactions["ci-failed"].attempts, 1);
}

/// A project placing docker sessions on engines `(address, capacity)`.
fn hosts(engines: &[(&str, u32)]) -> Value {
    let hosts: Vec<Value> = engines.iter().map(|(h, c)| json!({"host": h, "capacity": c})).collect();
    json!({"docker": {"image": "img", "hosts": hosts}, "defaults": {"runtime": "docker"}})
}

fn host_of(s: &Session) -> Option<String> {
    s.status.runtime.as_ref().and_then(|r| r.host.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_sessions_reconciled_at_once_take_no_more_places_than_there_are() {
    let w = Arc::new(World::new().await);
    w.project(hosts(&[("unix:///x.sock", 3), ("unix:///y.sock", 2)])).await;
    let names: Vec<String> = (0..16).map(|i| format!("s{i}")).collect();
    for n in &names {
        w.session(n, json!({})).await;
    }
    for _ in 0..3 {
        let all = names.iter().map(|n| {
            let w = w.clone();
            let n = n.clone();
            tokio::spawn(async move { w.reconcile(&n).await })
        });
        for done in futures::future::join_all(all).await {
            done.unwrap();
        }
    }
    let mut on: HashMap<Option<String>, usize> = HashMap::new();
    for n in &names {
        let s = w.get(n).await;
        *on.entry(host_of(&s)).or_default() += 1;
        match host_of(&s) {
            Some(_) => assert_eq!(reason(&s, types::SCHEDULED), "Placed"),
            None => {
                assert_eq!(reason(&s, types::SCHEDULED), "NoCapacity", "{n}");
                assert_eq!(s.status.phase, Some(aoctl_api::session::Phase::Pending));
            }
        }
    }
    assert_eq!(on.get(&Some("unix:///x.sock".into())), Some(&3), "{on:?}");
    assert_eq!(on.get(&Some("unix:///y.sock".into())), Some(&2), "{on:?}");
    assert_eq!(w.started().len(), 5, "{:?}", w.started());
}

#[tokio::test]
async fn a_lost_engine_fails_its_never_sessions_and_moves_the_others() {
    let w = World::new().await;
    w.project(hosts(&[("unix:///x.sock", 1), ("unix:///y.sock", 1), ("unix:///z.sock", 1)])).await;
    w.session("never", json!({"restartPolicy": "Never"})).await;
    w.running("never").await;
    w.session("moves", json!({})).await;
    w.running("moves").await;
    assert_eq!(host_of(&w.get("never").await).as_deref(), Some("unix:///x.sock"));
    assert_eq!(host_of(&w.get("moves").await).as_deref(), Some("unix:///y.sock"));

    // y goes, and its container with it.
    started_a_minute_ago(&w, "moves").await;
    w.down.lock().insert("unix:///y.sock".into());
    w.runtime.agents().held.remove(&handle("moves"));
    assert_eq!(w.reconcile("moves").await, Action::requeue(Duration::ZERO));
    let lost = w.get("moves").await;
    assert_eq!(reason(&lost, types::RUNTIME_READY), "HostLost");
    assert_eq!(reason(&lost, types::SCHEDULED), "HostLost");
    assert_eq!(reason(&lost, types::READY), "Rescheduling");
    let msg = &condition::find(&lost.status.conditions, types::RUNTIME_READY).unwrap().message;
    assert!(msg.contains("y (unix:///y.sock) has not answered for 60s"), "{msg}");
    assert_eq!(host_of(&lost), None);
    w.running("moves").await;
    let moved = w.get("moves").await;
    assert_eq!(host_of(&moved).as_deref(), Some("unix:///z.sock"));
    assert_eq!(moved.status.runtime.as_ref().unwrap().restarts, 1);
    assert_eq!(w.started(), ["never", "moves", "moves"]);

    // x goes: its Never session fails, and stays failed when x answers again.
    w.down.lock().insert("unix:///x.sock".into());
    w.reconcile("never").await;
    let failed = w.get("never").await;
    assert_eq!(reason(&failed, types::READY), "HostLost");
    assert_eq!(failed.status.phase, Some(aoctl_api::session::Phase::Failed));
    w.down.lock().remove("unix:///x.sock");
    w.reconcile("never").await;
    assert_eq!(w.get("never").await.status.phase, Some(aoctl_api::session::Phase::Failed));
    assert_eq!(w.started(), ["never", "moves", "moves"], "nothing started again");
}
