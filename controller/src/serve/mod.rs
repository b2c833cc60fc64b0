//! `aoctl serve`: opens the store, starts the controllers and the HTTP API, and shuts both down
//! on SIGINT/SIGTERM, draining in-flight reconciles.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::time::Duration;

use aoctl_api::{GitSource, IssueSource, Project, Resource, Session};
use aoctl_engine::{Action, Config, Controller, Trigger};
use aoctl_store::{Selector, Store, StoreError};
use aoctl_store_etcd::{EtcdConfig, EtcdStore};
use tokio::net::TcpListener;
use tokio::sync::watch;

mod router;

use router::{route_changes, Router, RESUBSCRIBE_AFTER, ROUTED};

use crate::fleet::Fleet;
use crate::http::{router, AppState};
use crate::metrics::Metrics;
use crate::reconcilers::{gitsource, issuesource, project, session, Error};
use crate::recorder::Recorder;

/// Settings of `aoctl serve`.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// The bearer token's file; `<data dir>/token` (made at first start) when `None`.
    pub token_file: Option<PathBuf>,
    /// Host names served besides `localhost`, loopback IPs and the listen address (`--allowed-host`).
    pub allowed_hosts: Vec<String>,
    /// Where the objects are kept (`--store`).
    pub store: StoreBackend,
    /// This replica's node (`--node`): the machine and data folder its tmux and process sessions
    /// live on; `None`: the one the data folder's node id file names ([`crate::node`]). Replicas
    /// sharing a data folder are one node.
    pub node: Option<String>,
    /// How long a leader that stops answering holds its lease (`--lease-ttl`), with etcd.
    pub lease_ttl: Duration,
    /// How long an Event is kept after its last write (`--event-ttl`).
    pub event_ttl: Duration,
}

/// Where `aoctl serve` keeps its objects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StoreBackend {
    /// sled, in `<data dir>/store`.
    #[default]
    Sled,
    /// An etcd v3 cluster (docs/store.md), under a key prefix.
    Etcd { endpoints: Vec<String>, prefix: String },
}

/// The file in the data directory that holds the bearer token, where the CLI finds it.
pub const TOKEN_FILE: &str = "token";

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("refusing to listen on {0} without --token-file: a non-loopback address needs a bearer token")]
    InsecureListen(SocketAddr),
    #[error("{path}: {source}")]
    TokenFile { path: PathBuf, source: std::io::Error },
    #[error("{0}: the token file is empty")]
    EmptyToken(PathBuf),
    #[error("--allowed-host `{0}`: expected a host name or IP address, without a scheme, port or path")]
    AllowedHost(String),
    #[error("{path}: cannot create the data directory: {source}")]
    DataDir { path: PathBuf, source: std::io::Error },
    #[error("cannot open the store in {path}: {source}")]
    Store { path: PathBuf, source: StoreError },
    #[error("cannot open the store in etcd at {endpoints}: {source}")]
    Etcd { endpoints: String, source: StoreError },
    #[error("{0}")]
    Node(#[from] crate::node::NodeError),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
}

/// Binds `opts.listen` and serves until SIGINT or SIGTERM.
pub async fn serve(opts: ServeOptions) -> Result<(), ServeError> {
    check_listen(&opts)?;
    let listener =
        TcpListener::bind(opts.listen).await.map_err(|e| ServeError::Bind { addr: opts.listen, source: e })?;
    serve_on(listener, opts, shutdown_signal()).await
}

fn check_listen(opts: &ServeOptions) -> Result<(), ServeError> {
    if !opts.listen.ip().is_loopback() && opts.token_file.is_none() {
        return Err(ServeError::InsecureListen(opts.listen));
    }
    Ok(())
}

/// The bearer token: from `--token-file`, else from `<data dir>/token`, which the first start
/// makes (random, mode 0600).
fn read_token(opts: &ServeOptions) -> Result<String, ServeError> {
    let path = match &opts.token_file {
        Some(p) => p.clone(),
        None => {
            let path = opts.data_dir.join(TOKEN_FILE);
            aoctl_runtimes::secret::ensure_token_file(&path)
                .map_err(|e| ServeError::TokenFile { path: path.clone(), source: e })?;
            path
        }
    };
    let text = aoctl_runtimes::secret::read_token_file(&path)
        .map_err(|e| ServeError::TokenFile { path: path.clone(), source: e })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(ServeError::EmptyToken(path));
    }
    Ok(token.to_string())
}

fn check_allowed_hosts(hosts: &[String]) -> Result<(), ServeError> {
    for h in hosts {
        let bare = h.trim_start_matches('[').trim_end_matches(']');
        let name_ok = !h.is_empty()
            && h.len() <= 253
            && h.split('.')
                .all(|l| !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
        if !(name_ok || bare.parse::<std::net::IpAddr>().is_ok()) {
            return Err(ServeError::AllowedHost(h.clone()));
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    aoctl_runtimes::daemon::stop_requested().await;
    tracing::info!("shutting down");
}

/// Serves on an already bound listener until `shutdown` resolves; tests use `127.0.0.1:0`.
///
/// Every replica serves the API and its watches; the reconcilers run while the replica leads
/// (always, on sled; for a term of the etcd election otherwise, see [`crate::leader`]).
pub(crate) async fn serve_on(
    listener: TcpListener,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let listen = listener.local_addr()?;
    check_listen(&ServeOptions { listen, ..opts.clone() })?;
    check_allowed_hosts(&opts.allowed_hosts)?;
    aoctl_runtimes::secret::private_dir(&opts.data_dir)
        .map_err(|e| ServeError::DataDir { path: opts.data_dir.clone(), source: e })?;
    let token = read_token(&opts)?;
    let node = crate::node::resolve(opts.node.as_deref(), &opts.data_dir)?;
    let (store, etcd) = open_store(&opts).await?;
    // Refused when a live replica of another data folder runs as this node.
    let registration = match &etcd {
        Some(etcd) => Some(crate::node::register(etcd, &node, &opts.data_dir, opts.lease_ttl).await?),
        None => None,
    };
    let metrics = Arc::new(Metrics::new()?);
    let ready = Arc::new(AtomicBool::new(false));
    let (stop_tx, stop_rx) = watch::channel(false);
    let fleet = Arc::new(match &etcd {
        Some(etcd) => Fleet::shared_by(&opts.data_dir, &etcd.identity()),
        None => Fleet::new(&opts.data_dir),
    });
    let engines = Engines::new(&metrics);
    let forges = Arc::new(crate::forges::Hub::counted_in(&metrics));
    let access = Arc::new(crate::http::Access::new(&token, listen, &opts.allowed_hosts));
    let world = World {
        own: store.clone(),
        metrics: metrics.clone(),
        fleet: fleet.clone(),
        session_state: Arc::new(session::State::default()),
        issuesource_state: Arc::new(issuesource::State::default()),
        forges,
        // Agents that take an MCP server get this binary's `aoctl mcp` (docs/mcp.md).
        session_keys: match std::env::current_exe() {
            Ok(exe) => access.sessions.clone().with_mcp_command(exe),
            Err(_) => access.sessions.clone(),
        },
        sources_cache: opts.data_dir.join("sources"),
        node: node.clone(),
        engines: engines.clone(),
        event_ttl: opts.event_ttl,
    };
    let candidacy = match &etcd {
        Some(etcd) => crate::leader::Candidacy::etcd(etcd, &node, listen, opts.lease_ttl),
        None => crate::leader::Candidacy::sole(),
    };
    let state = AppState {
        store: store.clone(),
        metrics: metrics.clone(),
        fleet,
        wakeups: Arc::new(crate::reconcilers::Memory {
            sessions: world.session_state.clone(),
            sources: world.issuesource_state.clone(),
        }),
        forges: world.forges.clone(),
        sessions: engines.sessions.clone(),
        gitsources: engines.gitsources.clone(),
        issuesources: engines.issuesources.clone(),
        ready: ready.clone(),
        access,
        recorder: Arc::new(Recorder::new(store.clone())),
        deliveries: Default::default(),
        shutdown: stop_rx.clone(),
        node: node.clone(),
        leadership: candidacy.leadership(),
    };
    let leading = tokio::spawn(lead(candidacy, world, stop_rx.clone()));
    ready.store(true, Ordering::Release);
    tracing::info!(listen = %listen, data_dir = %opts.data_dir.display(), node = %node, "serving");
    let server = axum::serve(listener, router(state)).with_graceful_shutdown(until(stop_rx));
    let server = tokio::spawn(async move { server.await });
    shutdown.await;
    ready.store(false, Ordering::Release);
    let _ = stop_tx.send(true);
    let served = server.await;
    let _ = leading.await;
    if let Some(r) = registration {
        r.release().await;
    }
    match served {
        Ok(r) => r.map_err(ServeError::Io),
        Err(e) => Err(ServeError::Io(std::io::Error::other(e))),
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
fn until(stop: watch::Receiver<bool>) -> impl Future<Output = ()> + Send + 'static {
    let mut stop = stop;
    async move {
        let _ = stop.wait_for(|s| *s).await;
    }
}

/// The reconcilers' engines. They are made once, so the handles the HTTP API keeps reach the
/// engines of every term; each term runs them again ([`Controller::resume`]).
#[derive(Clone)]
struct Engines {
    metrics: Arc<aoctl_engine::Metrics>,
    projects: Trigger,
    sessions: Trigger,
    gitsources: Trigger,
    issuesources: Trigger,
}

impl Engines {
    fn new(metrics: &Metrics) -> Engines {
        let m = metrics.engine.clone();
        Engines {
            projects: Controller::<Project>::new(Engines::config(project::NAME), m.clone()).handle(),
            sessions: Controller::<Session>::new(Engines::config(session::NAME), m.clone()).handle(),
            gitsources: Controller::<GitSource>::new(Engines::config(gitsource::NAME), m.clone()).handle(),
            issuesources: Controller::<IssueSource>::new(Engines::config(issuesource::NAME), m.clone()).handle(),
            metrics: m,
        }
    }

    fn config(name: &'static str) -> Config {
        match name {
            session::NAME => Config { concurrency: 16, ..Config::new(name) },
            _ => Config::new(name),
        }
    }

    fn resume<T: Resource>(&self, handle: &Trigger, name: &'static str) -> Controller<T> {
        Controller::resume(Engines::config(name), self.metrics.clone(), handle)
    }
}

/// What the reconcilers of every term share with the rest of the replica.
#[derive(Clone)]
struct World {
    /// The replica's own store handle; a term's reconcilers get a fenced one (see [`Lead::store`]).
    own: Store,
    metrics: Arc<Metrics>,
    fleet: Arc<Fleet>,
    session_state: Arc<session::State>,
    issuesource_state: Arc<issuesource::State>,
    forges: Arc<crate::forges::Hub>,
    session_keys: crate::agent_token::SessionKeys,
    sources_cache: PathBuf,
    node: String,
    engines: Engines,
    event_ttl: Duration,
}

/// Campaigns, runs the reconcilers for each term won, and stops them when the term ends (then
/// campaigns again) or the replica stops (then resigns, so another replica leads at once).
async fn lead(candidacy: crate::leader::Candidacy, world: World, stop: watch::Receiver<bool>) {
    loop {
        let term = tokio::select! {
            term = candidacy.campaign() => term,
            _ = until(stop.clone()) => return,
        };
        world.metrics.leader.set(1);
        let (end_tx, end_rx) = watch::channel(false);
        let store = term.store(&world.own);
        let running = tokio::spawn(run_term(world.clone(), store, end_rx));
        let stopping = tokio::select! {
            _ = term.ended() => false,
            _ = until(stop.clone()) => true,
        };
        let _ = end_tx.send(true);
        if let Err(e) = running.await {
            tracing::error!(error = %e, "the reconcilers of a term ended abnormally");
        }
        world.metrics.leader.set(0);
        if stopping {
            term.resign().await;
            return;
        }
        tracing::warn!("this replica's term of leadership ended; its reconcilers stopped, and it campaigns again");
    }
}

/// Runs every reconciler on `store` until `end` turns true, then waits for them to drain.
async fn run_term(world: World, store: Store, end: watch::Receiver<bool>) {
    let World { metrics, fleet, engines, .. } = &world;
    let stopped = || until(end.clone());
    // One index of the sessions per term, kept from its own store handle's changes.
    let sessions = Arc::new(session::SessionIndex::new());
    // The notifications the reconcilers record go out from a worker of their own, on the term's store.
    let outbox = crate::outbox::Outbox::new(metrics.engine.clone());
    let project_ctx = Arc::new(project::Context {
        store: store.clone(),
        recorder: Recorder::new(store.clone()),
        sessions: sessions.clone(),
        machine: fleet.clone(),
        metrics: metrics.clone(),
        forges: world.forges.clone(),
        budget_shown: Default::default(),
        outbox: outbox.handoff(),
    });
    let session_ctx = Arc::new(session::Context {
        store: store.clone(),
        recorder: Recorder::new(store.clone()),
        machine: fleet.clone(),
        forges: world.forges.clone(),
        metrics: metrics.clone(),
        state: world.session_state.clone(),
        index: sessions.clone(),
        node: world.node.clone(),
        session_keys: Some(world.session_keys.clone()),
        outbox: outbox.handoff(),
    });
    let gitsource_ctx = Arc::new(gitsource::Context {
        store: store.clone(),
        recorder: Recorder::new(store.clone()),
        cache: world.sources_cache.clone(),
    });
    let issuesource_ctx = Arc::new(issuesource::Context {
        store: store.clone(),
        recorder: Recorder::new(store.clone()),
        forges: world.forges.clone(),
        state: world.issuesource_state.clone(),
        index: sessions,
    });
    // Subscribe before the engines list keys, so no change between the two is missed.
    let changes = loop {
        match store.watch(&ROUTED, store.resource_version()) {
            Ok(w) => break w,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the store; trying again");
                tokio::select! {
                    _ = tokio::time::sleep(RESUBSCRIBE_AFTER) => {},
                    _ = stopped() => return,
                }
            }
        }
    };
    let triggers = Router::new(engines.projects.clone(), engines.sessions.clone())
        .with_sources(engines.gitsources.clone(), engines.issuesources.clone());
    let mut tasks = vec![tokio::spawn(route_changes(store.clone(), changes, triggers, stopped()))];
    // Agents' output and exits wake their sessions, so quiet ones are not polled.
    match crate::activity_watch::start(fleet.clone(), engines.sessions.clone(), stopped()) {
        Ok(watch) => tasks.push(watch),
        Err(e) => tracing::warn!(error = %e, "agents' activity is polled: the transcripts cannot be watched"),
    }
    tasks.push(tokio::spawn(run_controller(
        engines.resume::<Project>(&engines.projects, project::NAME),
        store.clone(),
        project_ctx,
        project::reconcile,
        project::error_policy,
        stopped(),
    )));
    tasks.push(tokio::spawn(run_controller(
        engines.resume::<Session>(&engines.sessions, session::NAME),
        store.clone(),
        session_ctx.clone(),
        session::reconcile,
        session::error_policy,
        stopped(),
    )));
    tasks.push(tokio::spawn(run_controller(
        engines.resume::<GitSource>(&engines.gitsources, gitsource::NAME),
        store.clone(),
        gitsource_ctx,
        gitsource::reconcile,
        gitsource::error_policy,
        stopped(),
    )));
    tasks.push(tokio::spawn(run_controller(
        engines.resume::<IssueSource>(&engines.issuesources, issuesource::NAME),
        store.clone(),
        issuesource_ctx,
        issuesource::reconcile,
        issuesource::error_policy,
        stopped(),
    )));
    tasks.push(tokio::spawn(outbox.run(store.clone(), stopped())));
    tasks.push(tokio::spawn(collect_orphans(session_ctx, stopped())));
    tasks.push(tokio::spawn(crate::event_expiry::run(store.clone(), world.event_ttl, stopped())));
    for t in tasks {
        let _ = t.await;
    }
}

/// Opens the store the options name: sled in `<data dir>/store`, or etcd (whose handle comes
/// too, for the election and the store's identity).
async fn open_store(opts: &ServeOptions) -> Result<(Store, Option<EtcdStore>), ServeError> {
    match &opts.store {
        StoreBackend::Sled => {
            let dir = opts.data_dir.join("store");
            Ok((Store::open(&dir).map_err(|e| ServeError::Store { path: dir, source: e })?, None))
        }
        StoreBackend::Etcd { endpoints, prefix } => {
            let config = EtcdConfig { prefix: prefix.clone(), ..EtcdConfig::new(endpoints.clone()) };
            let etcd = EtcdStore::connect(config)
                .await
                .map_err(|e| ServeError::Etcd { endpoints: endpoints.join(","), source: e })?;
            tracing::info!(endpoints = %endpoints.join(","), prefix = %prefix, "the store is in etcd");
            Ok((Store::new(etcd.clone()), Some(etcd)))
        }
    }
}

/// Runs one controller over the objects of one kind in the store.
async fn run_controller<T, C, R, RF, P>(
    controller: Controller<T>,
    store: Store,
    ctx: Arc<C>,
    reconcile: R,
    error_policy: P,
    stopped: impl Future<Output = ()> + Send + 'static,
) where
    T: Resource,
    C: Send + Sync + 'static,
    R: Fn(Arc<T>, Arc<C>) -> RF + Send + Sync + 'static,
    RF: Future<Output = Result<Action, Error>> + Send + 'static,
    P: Fn(Arc<T>, &Error, Arc<C>) -> Action + Send + Sync + 'static,
{
    let keys_store = store.clone();
    controller
        .run(
            move |name: String| {
                let store = store.clone();
                async move { store.get_typed::<T>(&name).await.ok().map(Arc::new) }
            },
            move || {
                let store = keys_store.clone();
                async move {
                    match store.list_typed::<T>(&Selector::everything()).await {
                        Ok((items, _)) => items.iter().map(|o| o.name().to_string()).collect(),
                        Err(e) => {
                            tracing::error!(error = %e, kind = %T::KIND, "cannot list objects");
                            vec![]
                        }
                    }
                }
            },
            reconcile,
            error_policy,
            ctx,
            stopped,
        )
        .await
}

/// How often orphaned runtimes and workspaces are looked for, after once at start.
const COLLECT_EVERY: Duration = Duration::from_secs(300);

async fn collect_orphans(ctx: Arc<session::Context>, stopped: impl Future<Output = ()>) {
    let work = async {
        loop {
            match session::gc::collect(&ctx).await {
                Ok((0, 0)) => {}
                Ok((r, w)) => tracing::info!(runtimes = r, workspaces = w, "removed orphans"),
                Err(e) => tracing::warn!(error = %e, "orphan collection failed"),
            }
            tokio::time::sleep(COLLECT_EVERY).await;
        }
    };
    tokio::select! {
        _ = work => {},
        _ = stopped => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::Kind;
    use aoctl_store::EventKind;
    use aoctl_store::{StoreConfig, WriteOptions};
    use serde_json::json;
    use std::collections::BTreeSet;
    use tokio::sync::mpsc;

    /// Runs a controller whose reconcile reports each key it is given.
    /// A stop signal and a maker of futures that end when it is sent.
    fn stopper() -> (watch::Sender<bool>, impl Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) {
        let (stop, stop_rx) = watch::channel(false);
        let stopped = move || -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
            let mut rx = stop_rx.clone();
            Box::pin(async move {
                let _ = rx.wait_for(|s| *s).await;
            })
        };
        (stop, stopped)
    }

    fn recording<T: Resource>(
        store: &Store,
        name: &'static str,
        metrics: &Metrics,
        stopped: impl Future<Output = ()> + Send + 'static,
    ) -> (Trigger, mpsc::UnboundedReceiver<String>, tokio::task::JoinHandle<()>) {
        let controller =
            Controller::<T>::new(Config { resync: Duration::ZERO, ..Config::new(name) }, metrics.engine.clone());
        let trigger = controller.handle();
        let (tx, rx) = mpsc::unbounded_channel();
        let store = store.clone();
        let task = tokio::spawn(controller.run(
            move |key: String| {
                let store = store.clone();
                async move { store.get_typed::<T>(&key).await.ok().map(Arc::new) }
            },
            || async { vec![] },
            move |obj: Arc<T>, _: Arc<()>| {
                let _ = tx.send(obj.name().to_string());
                async { Ok::<_, StoreError>(Action::await_change()) }
            },
            |_, _, _| Action::await_change(),
            Arc::new(()),
            stopped,
        ));
        (trigger, rx, task)
    }

    /// Waits, at most ten seconds, until every name of `want` has been reconciled.
    async fn reconciled(rx: &mut mpsc::UnboundedReceiver<String>, want: &[&str]) -> Result<(), BTreeSet<String>> {
        let mut left: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !left.is_empty() {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(name)) => {
                    left.remove(&name);
                }
                _ => return Err(left),
            }
        }
        Ok(())
    }

    #[tokio::test]
    async fn route_changes_watches_again_when_its_watch_falls_behind_the_log() {
        let dir = tempfile::tempdir().unwrap();
        // A live channel of one change and a log of two: a watch that misses three changes ends.
        let config = StoreConfig { watch_buffer: 1, log_retention: 2, ..StoreConfig::default() };
        let store = Store::open_with(dir.path(), config).unwrap();
        let w = WriteOptions::default();
        let project = json!({"metadata": {"name": "demo"}, "spec": {"path": "/nonexistent/demo"}});
        store.create(Kind::Project, project, w).await.unwrap();
        let changes = store.watch(&[Kind::Project, Kind::Session], store.resource_version()).unwrap();
        // Made before anything reads the watch: it can only catch up from the log, which lost them.
        for name in ["a", "b", "c", "d"] {
            let s = json!({"metadata": {"name": name}, "spec": {"project": "demo", "prompt": "p"}});
            store.create(Kind::Session, s, w).await.unwrap();
        }

        let metrics = Metrics::new().unwrap();
        let (stop, stopped) = stopper();
        let (projects, mut reconciled_projects, p_task) = recording::<Project>(&store, "projects", &metrics, stopped());
        let (sessions, mut reconciled_sessions, s_task) = recording::<Session>(&store, "sessions", &metrics, stopped());
        let router = tokio::spawn(route_changes(store.clone(), changes, Router::new(projects, sessions), stopped()));

        reconciled(&mut reconciled_sessions, &["a", "b", "c", "d"]).await.expect("the sessions made while behind");
        reconciled(&mut reconciled_projects, &["demo"]).await.expect("the project");
        // And the new watch follows later changes.
        let s = json!({"metadata": {"name": "e"}, "spec": {"project": "demo", "prompt": "p"}});
        store.create(Kind::Session, s, w).await.unwrap();
        reconciled(&mut reconciled_sessions, &["e"]).await.expect("a session made after the new watch");

        let _ = stop.send(true);
        for t in [router, p_task, s_task] {
            tokio::time::timeout(Duration::from_secs(10), t).await.expect("stops").unwrap();
        }
    }

    #[tokio::test]
    async fn a_session_whose_changed_files_change_wakes_its_siblings() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let w = WriteOptions::default();
        for name in ["a", "b", "c", "elsewhere"] {
            let project = if name == "elsewhere" { "other" } else { "demo" };
            let s = json!({"metadata": {"name": name}, "spec": {"project": project, "prompt": "p"}});
            store.create(Kind::Session, s, w).await.unwrap();
        }
        let metrics = Metrics::new().unwrap();
        let (stop, stopped) = stopper();
        let (projects, _p, p_task) = recording::<Project>(&store, "projects", &metrics, stopped());
        let (sessions, mut reconciled_sessions, s_task) = recording::<Session>(&store, "sessions", &metrics, stopped());
        let mut router = Router::new(projects, sessions);
        let with_files = |name: &str, project: &str, files: &[&str]| {
            json!({"metadata": {"name": name}, "spec": {"project": project},
                "status": {"phase": "Working", "changedFiles": {"headSha": "h", "baseSha": "b", "files": files, "count": files.len()}}})
        };
        router.route(Kind::Session, EventKind::Added, &with_files("a", "demo", &["x.rs"]));
        router.route(Kind::Session, EventKind::Added, &with_files("elsewhere", "other", &["x.rs"]));
        // c changes a file no other session changes: the changes below are nothing to it.
        router.route(Kind::Session, EventKind::Added, &with_files("c", "demo", &["z.rs"]));
        reconciled(&mut reconciled_sessions, &["a", "elsewhere", "c"]).await.expect("their own changes");
        // b publishes its files: a, of the same project, is woken to compare them with its own.
        router.route(Kind::Session, EventKind::Modified, &with_files("b", "demo", &["x.rs"]));
        reconciled(&mut reconciled_sessions, &["a", "b"]).await.expect("b's sibling woken");
        // b's files change again: a is woken again, for x.rs that b no longer changes.
        router.route(Kind::Session, EventKind::Modified, &with_files("b", "demo", &["y.rs"]));
        reconciled(&mut reconciled_sessions, &["a"]).await.expect("woken by the new files");
        // a takes up y.rs: b is woken.
        router.route(Kind::Session, EventKind::Modified, &with_files("a", "demo", &["x.rs", "y.rs"]));
        reconciled(&mut reconciled_sessions, &["a", "b"]).await.expect("b woken by a's new file");
        // None of this touched z.rs: c was never woken after its own change.
        let late = tokio::time::timeout(Duration::from_millis(300), async {
            while let Some(name) = reconciled_sessions.recv().await {
                if name == "c" {
                    return;
                }
            }
        });
        assert!(late.await.is_err(), "c was woken by changes to files it does not change");
        // b is deleted: what it published is gone, so a is woken once more.
        router.route(Kind::Session, EventKind::Deleted, &with_files("b", "demo", &["y.rs"]));
        reconciled(&mut reconciled_sessions, &["a"]).await.expect("woken by the deletion");

        let _ = stop.send(true);
        for t in [p_task, s_task] {
            tokio::time::timeout(Duration::from_secs(10), t).await.expect("stops").unwrap();
        }
    }

    #[tokio::test]
    async fn a_session_leaving_its_docker_engine_wakes_its_waiting_siblings() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let w = WriteOptions::default();
        for name in ["a", "b"] {
            let s = json!({"metadata": {"name": name}, "spec": {"project": "demo", "prompt": "p"}});
            store.create(Kind::Session, s, w).await.unwrap();
        }
        let metrics = Metrics::new().unwrap();
        let (stop, stopped) = stopper();
        let (projects, _p, p_task) = recording::<Project>(&store, "projects", &metrics, stopped());
        let (sessions, mut reconciled_sessions, s_task) = recording::<Session>(&store, "sessions", &metrics, stopped());
        let mut router = Router::new(projects, sessions);
        let on = |name: &str, host: Option<&str>| {
            json!({"metadata": {"name": name}, "spec": {"project": "demo"},
                "status": {"phase": "Working", "runtime": {"kind": "docker", "handle": name, "host": host}}})
        };
        router.route(Kind::Session, EventKind::Added, &on("a", Some("unix:///b.sock")));
        router.route(Kind::Session, EventKind::Added, &on("b", None));
        reconciled(&mut reconciled_sessions, &["a", "b"]).await.expect("their own changes");
        // a is still live (it holds its maxConcurrentSessions slot) but leaves its engine.
        router.route(Kind::Session, EventKind::Modified, &on("a", None));
        reconciled(&mut reconciled_sessions, &["b"]).await.expect("b woken: a place freed");

        let _ = stop.send(true);
        for t in [p_task, s_task] {
            tokio::time::timeout(Duration::from_secs(10), t).await.expect("stops").unwrap();
        }
    }

    #[tokio::test]
    async fn sources_wake_on_their_own_changes_and_an_issuesource_on_its_sessions_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let w = WriteOptions::default();
        store
            .create(Kind::GitSource, json!({"metadata": {"name": "fleet"}, "spec": {"url": "/srv/fleet"}}), w)
            .await
            .unwrap();
        store
            .create(Kind::IssueSource, json!({"metadata": {"name": "bugs"}, "spec": {"project": "demo"}}), w)
            .await
            .unwrap();
        let metrics = Metrics::new().unwrap();
        let (stop, stopped) = stopper();
        let (projects, _p, p_task) = recording::<Project>(&store, "projects", &metrics, stopped());
        let (sessions, _s, s_task) = recording::<Session>(&store, "sessions", &metrics, stopped());
        let (gitsources, mut git, g_task) = recording::<GitSource>(&store, "gitsources", &metrics, stopped());
        let (issuesources, mut issues, i_task) = recording::<IssueSource>(&store, "issuesources", &metrics, stopped());
        let mut router = Router::new(projects, sessions).with_sources(gitsources, issuesources);
        router.route(Kind::GitSource, EventKind::Modified, &json!({"metadata": {"name": "fleet"}}));
        reconciled(&mut git, &["fleet"]).await.expect("the GitSource's own change");
        let owned = json!({"metadata": {"name": "bugs-7", "ownerReferences": [
            {"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "name": "demo", "uid": "p"},
            {"apiVersion": "ao.dev/v1alpha1", "kind": "IssueSource", "name": "bugs", "uid": "i"}]},
            "spec": {"project": "demo"}});
        router.route(Kind::Session, EventKind::Deleted, &owned);
        reconciled(&mut issues, &["bugs"]).await.expect("its session went: a waiting issue may start");

        let _ = stop.send(true);
        for t in [p_task, s_task, g_task, i_task] {
            tokio::time::timeout(Duration::from_secs(10), t).await.expect("stops").unwrap();
        }
    }
}
