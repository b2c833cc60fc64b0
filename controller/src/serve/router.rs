//! Store changes turned into reconcile triggers: which keys of which engines a change of a
//! Project, Session or source wakes, and watching the store again when a watch ends.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::time::Duration;

use aoctl_api::Kind;
use aoctl_engine::Trigger;
use aoctl_store::{EventKind, Selector, Store, StoreError, Watch};

use crate::reconcilers::session;

/// How long after a Session's change its Project is reconciled (to count it): the changes of
/// that time are counted together.
pub(super) const PROJECT_AFTER_SESSIONS: Duration = Duration::from_millis(500);

/// How long `route_changes` waits before it watches the store again after its watch ended.
pub(super) const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(200);

/// Turns store changes into reconcile triggers (see [`Router`]). When its watch ends (it fell
/// behind the store's log, or the store could not read it), it says so, watches again from the
/// store's newest version and triggers every object it lists then, so no change made meanwhile
/// goes unreconciled until the next resync.
pub(super) async fn route_changes(
    store: Store,
    mut changes: Watch,
    mut router: Router,
    stopped: impl Future<Output = ()>,
) {
    let forward = async {
        loop {
            while let Some(ev) = changes.next().await {
                router.route(ev.kind, ev.kind_, &ev.object);
            }
            match changes.error() {
                Some(e) => tracing::warn!(error = %e, "the watch of changes ended; watching again and relisting"),
                None => tracing::warn!("the watch of changes ended; watching again and relisting"),
            }
            loop {
                tokio::time::sleep(RESUBSCRIBE_AFTER).await;
                match router.resubscribe(&store).await {
                    Ok(w) => {
                        changes = w;
                        break;
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot watch the store again; retrying"),
                }
            }
        }
    };
    tokio::select! {
        _ = forward => {},
        _ = stopped => {},
    }
}

/// What `route_changes` knows of the objects: a Project's change triggers its own key and its
/// Sessions' keys (they wait for it); a Session's triggers its own key, its Project's (which
/// counts them, [`PROJECT_AFTER_SESSIONS`] later) and its siblings' when a session that stops
/// holding a slot under `maxConcurrentSessions` or a place on a docker engine of
/// `spec.docker.hosts` frees it for them; when the files it publishes as changed
/// (`status.changedFiles`, see `session::overlap`) change, the siblings that publish a file it
/// took up or let go of are triggered, so each words its own overlap; and a worker that keeps a
/// new record for its orchestrator (`status.upstream`), or goes, triggers the orchestrator.
pub(super) struct Router {
    projects: Trigger,
    sessions: Trigger,
    /// The sources' engines: a source's change triggers it, and so does a change of a Session an
    /// IssueSource owns (a finished or stopped one frees a place for a waiting issue).
    gitsources: Option<Trigger>,
    issuesources: Option<Trigger>,
    by_project: HashMap<String, BTreeSet<String>>,
    /// What sessions depend on in a project: its generation and its Ready condition. Status-only
    /// writes (such as the session count) must not wake every session of the project.
    seen: HashMap<String, (Option<serde_json::Value>, Option<serde_json::Value>)>,
    /// Whether each session held a slot when last seen.
    holding: HashMap<String, bool>,
    /// The docker engine each live session held a place on when last seen (`spec.docker.hosts`).
    places: HashMap<String, String>,
    /// The changed files each live session published when last seen.
    published: HashMap<String, serde_json::Value>,
    /// Per project, the live sessions that published each file.
    sharing: HashMap<String, HashMap<String, BTreeSet<String>>>,
    /// The newest record each orchestrator's worker kept for it when last seen.
    upstream: HashMap<String, u64>,
}

impl Router {
    pub(super) fn new(projects: Trigger, sessions: Trigger) -> Router {
        Router {
            projects,
            sessions,
            gitsources: None,
            issuesources: None,
            by_project: HashMap::new(),
            seen: HashMap::new(),
            holding: HashMap::new(),
            places: HashMap::new(),
            published: HashMap::new(),
            sharing: HashMap::new(),
            upstream: HashMap::new(),
        }
    }

    pub(super) fn with_sources(self, gitsources: Trigger, issuesources: Trigger) -> Router {
        Router { gitsources: Some(gitsources), issuesources: Some(issuesources), ..self }
    }

    pub(super) fn route(&mut self, kind: Kind, type_: EventKind, obj: &serde_json::Value) {
        let name = obj.pointer("/metadata/name").and_then(|v| v.as_str()).unwrap_or_default().to_string();
        match kind {
            Kind::Project => {
                if type_ != EventKind::Deleted {
                    self.projects.trigger(&name);
                }
                let generation = obj.pointer("/metadata/generation").cloned();
                let ready = obj.pointer("/status/conditions").and_then(|c| {
                    c.as_array()?.iter().find(|c| c.get("type").and_then(|t| t.as_str()) == Some("Ready")).cloned()
                });
                let ready = ready.map(|c| serde_json::json!([c.get("status"), c.get("reason")]));
                let now = (generation, ready);
                if type_ == EventKind::Deleted || self.seen.get(&name) != Some(&now) {
                    for s in self.by_project.get(&name).into_iter().flatten() {
                        self.sessions.trigger(s);
                    }
                }
                if type_ == EventKind::Deleted {
                    self.seen.remove(&name);
                } else {
                    self.seen.insert(name, now);
                }
            }
            Kind::Session => {
                let project = obj.pointer("/spec/project").and_then(|v| v.as_str()).unwrap_or_default();
                let siblings = self.by_project.entry(project.to_string()).or_default();
                if type_ == EventKind::Deleted {
                    siblings.remove(&name);
                } else {
                    siblings.insert(name.clone());
                    self.sessions.trigger(&name);
                }
                // A slot under maxConcurrentSessions frees when a session that held one goes,
                // stops or ends; a session not seen before may have held one.
                let holds = type_ != EventKind::Deleted && session::holds_slot(obj);
                let held = if type_ == EventKind::Deleted {
                    self.holding.remove(&name)
                } else {
                    self.holding.insert(name.clone(), holds)
                };
                let frees = !holds && held.unwrap_or(type_ != EventKind::Added);
                // A place on a docker engine frees when a session that held one goes, ends, stops
                // or leaves that engine: a sibling waiting for room may take it.
                let place = (type_ != EventKind::Deleted).then(|| session::placement::place_of(obj)).flatten();
                let had = match place {
                    Some(h) => self.places.insert(name.clone(), h.to_string()),
                    None => self.places.remove(&name),
                };
                let frees = frees || had.is_some_and(|h| Some(h.as_str()) != place);
                let files = (type_ != EventKind::Deleted).then(|| session::overlap::published(obj)).flatten();
                let before = match files {
                    Some(f) => self.published.insert(name.clone(), f.clone()),
                    None => self.published.remove(&name),
                };
                if frees {
                    for s in siblings.iter().filter(|s| **s != name) {
                        self.sessions.trigger(s);
                    }
                }
                if before.as_ref() != files {
                    // Only the siblings that publish a file this session took up or let go of see
                    // their overlaps change: the others are not woken.
                    let (old, new) = (file_names(before.as_ref()), file_names(files));
                    let sharing = self.sharing.entry(project.to_string()).or_default();
                    if !frees {
                        for f in old.symmetric_difference(&new) {
                            for s in sharing.get(*f).into_iter().flatten().filter(|s| **s != name) {
                                self.sessions.trigger(s);
                            }
                        }
                    }
                    for f in old.difference(&new) {
                        if let Some(names) = sharing.get_mut(*f) {
                            names.remove(&name);
                            if names.is_empty() {
                                sharing.remove(*f);
                            }
                        }
                    }
                    for f in new.difference(&old) {
                        sharing.entry(f.to_string()).or_default().insert(name.clone());
                    }
                    if sharing.is_empty() {
                        self.sharing.remove(project);
                    }
                }
                // A worker that keeps a new record for its orchestrator, or goes, wakes it.
                let orchestrator = obj
                    .pointer("/metadata/labels")
                    .and_then(|l| l.get(aoctl_api::orchestrator::ORCHESTRATOR_LABEL))
                    .and_then(|v| v.as_str());
                if let Some(o) = orchestrator {
                    let top = if type_ == EventKind::Deleted { None } else { Some(session::upstream_top(obj)) };
                    let had = match top {
                        Some(t) => self.upstream.insert(name.clone(), t),
                        None => self.upstream.remove(&name),
                    };
                    if top.is_none() || top.is_some_and(|t| t > 0 && had != Some(t)) {
                        self.sessions.trigger(o);
                    }
                }
                // Many sessions changing at once make one recount of their project, not one each.
                self.projects.trigger_after(project, PROJECT_AFTER_SESSIONS);
                if let Some(issuesources) = &self.issuesources {
                    for owner in owners(obj, Kind::IssueSource) {
                        issuesources.trigger(owner);
                    }
                }
            }
            Kind::GitSource | Kind::IssueSource => {
                let engine = if kind == Kind::GitSource { &self.gitsources } else { &self.issuesources };
                if let Some(engine) = engine.as_ref().filter(|_| type_ != EventKind::Deleted) {
                    engine.trigger(&name);
                }
            }
            Kind::Event => {}
        }
    }

    /// Watches the store again from its newest version, then lists it and triggers every object:
    /// what changed while no watch ran is reconciled now. What is remembered is rebuilt from the
    /// lists; a change both listed and watched only triggers twice, and triggers coalesce.
    async fn resubscribe(&mut self, store: &Store) -> Result<Watch, StoreError> {
        let watch = store.watch(&ROUTED, store.resource_version())?;
        let (projects, _) = store.list(Kind::Project, &Selector::everything()).await?;
        let (sessions, _) = store.list(Kind::Session, &Selector::everything()).await?;
        for kind in [Kind::GitSource, Kind::IssueSource] {
            for source in store.list(kind, &Selector::everything()).await?.0 {
                self.route(kind, EventKind::Modified, &source);
            }
        }
        self.by_project.clear();
        self.seen.clear();
        self.holding.clear();
        self.places.clear();
        self.published.clear();
        self.sharing.clear();
        for s in &sessions {
            // A session seen for the first time that does not hold a slot may have freed one.
            self.route(Kind::Session, EventKind::Modified, s);
        }
        for p in &projects {
            self.route(Kind::Project, EventKind::Added, p);
        }
        tracing::info!(projects = projects.len(), sessions = sessions.len(), "watching changes again");
        Ok(watch)
    }
}

/// The kinds whose changes `route_changes` turns into triggers.
pub(super) const ROUTED: [Kind; 4] = [Kind::Project, Kind::Session, Kind::GitSource, Kind::IssueSource];

/// The file names of a published `status.changedFiles.files`.
fn file_names(files: Option<&serde_json::Value>) -> BTreeSet<&str> {
    files.and_then(|f| f.as_array()).into_iter().flatten().filter_map(|f| f.as_str()).collect()
}

/// The names of the owners of `kind` in an object's ownerReferences.
fn owners(obj: &serde_json::Value, kind: Kind) -> impl Iterator<Item = &str> {
    let refs =
        obj.pointer("/metadata/ownerReferences").and_then(|r| r.as_array()).map(Vec::as_slice).unwrap_or_default();
    refs.iter()
        .filter(move |r| r.get("kind").and_then(|k| k.as_str()) == Some(kind.as_str()))
        .filter_map(|r| r.get("name").and_then(|n| n.as_str()))
}
