//! An index of the stored Sessions, kept from the store's changes rather than listed again: per
//! project how many sessions it has, the usage each shows, the sessions that hold or wait for a
//! slot under `maxConcurrentSessions` in queue order, the files the live ones publish
//! (`status.changedFiles`), by file, and the docker engines they hold places on; per worker its
//! reviewer sessions (`spec.reviewOf`). A reader first brings it up to the store's newest
//! resourceVersion, so it answers what a full list would then, at the cost of the changes made
//! since the last read; a reconcile costs the same with ten sessions or ten thousand.
//!
//! It follows one watch of the store. When that watch ends (it fell behind what the store keeps,
//! or the store closed it) or does not catch up in time, the index is listed again from scratch.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

use aoctl_api::project::ProjectStatus;
use aoctl_api::session::{Overlap, Usage};
use aoctl_api::{Kind, Time};
use aoctl_store::{EventKind, Selector, Store, StoreError, Watch};
use serde::Deserialize;
use serde_json::Value;

use super::{holds_slot, overlap, placement, Account};

/// How long a read waits for the watch to bring the index up to the store before it lists the
/// store again instead.
const CATCH_UP: Duration = Duration::from_secs(5);

/// The index, shared by the session and project reconcilers.
#[derive(Default)]
pub(crate) struct SessionIndex {
    inner: tokio::sync::Mutex<Followed>,
}

/// The index and the watch that keeps it.
#[derive(Default)]
struct Followed {
    watch: Option<Watch>,
    /// Changes up to this resourceVersion are in the list the index was built from.
    listed: u64,
    index: Index,
}

impl SessionIndex {
    pub(crate) fn new() -> SessionIndex {
        SessionIndex::default()
    }

    /// Runs `read` on the index as of the store's resourceVersion now, or a newer one.
    pub(crate) async fn read<R>(&self, store: &Store, read: impl FnOnce(&Index) -> R) -> Result<R, StoreError> {
        let target = store.resource_version();
        let mut followed = self.inner.lock().await;
        followed.catch_up(store, target).await?;
        Ok(read(&followed.index))
    }
}

impl Followed {
    async fn catch_up(&mut self, store: &Store, target: u64) -> Result<(), StoreError> {
        let Followed { watch, listed, index } = self;
        if let Some(w) = watch.as_mut() {
            let follow = async {
                while w.resource_version() < target {
                    let Some(ev) = w.next().await else { return false };
                    if ev.rv > *listed {
                        index.apply(ev.kind, ev.kind_, &ev.object);
                    }
                }
                true
            };
            match tokio::time::timeout(CATCH_UP, follow).await {
                Ok(true) => return Ok(()),
                Ok(false) => match w.error() {
                    Some(e) => tracing::warn!(error = %e, "the sessions' index lost its watch; listing again"),
                    None => tracing::warn!("the sessions' index lost its watch; listing again"),
                },
                Err(_) => tracing::warn!(wanted = target, "the sessions' index did not catch up; listing again"),
            }
        }
        self.rebuild(store).await
    }

    /// Watches from the store's newest resourceVersion, then builds the index from a list; the
    /// changes the list already holds are skipped when the watch delivers them.
    async fn rebuild(&mut self, store: &Store) -> Result<(), StoreError> {
        self.watch = None;
        // Every kind: each change moves the watch's resourceVersion, so catching up to the
        // store's never waits for a change of another kind.
        let watch = store.watch(&[], store.resource_version())?;
        let (all, at) = store.list_stored(Kind::Session, &Selector::everything()).await?;
        let mut index = Index::default();
        for o in &all {
            index.apply(Kind::Session, EventKind::Added, o.object());
        }
        *self = Followed { watch: Some(watch), listed: at, index };
        Ok(())
    }
}

/// What the index holds of one stored Session.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    project: String,
    uid: Option<String>,
    /// `status.usage`, when it has one that reads.
    usage: Option<Usage>,
    /// Its place in its project's queue when it holds or waits for a slot: when it was created.
    queued: Option<Option<Time>>,
    /// The files it publishes for its siblings (see [`overlap::published`]).
    files: Option<Vec<String>>,
    /// The worker session it reviews (`spec.reviewOf`).
    review_of: Option<String>,
    /// The docker engine its status records it on (see [`placement::recorded_host`]).
    host: Option<String>,
    /// Whether it holds its place there (see [`placement::live`]).
    live: bool,
    /// The source that made it (`ao.dev/managed-by`).
    managed_by: Option<String>,
    /// The orchestrator that spawned it (label `ao.dev/orchestrator`).
    orchestrator: Option<String>,
    /// The number of the newest record it keeps for its orchestrator (`status.upstream`), 0 when none.
    upstream_top: u64,
}

impl Entry {
    fn of(o: &Value) -> Entry {
        let text = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_string);
        let created = || o.pointer("/metadata/creationTimestamp").and_then(|v| Time::deserialize(v).ok());
        Entry {
            project: text("/spec/project").unwrap_or_default(),
            uid: text("/metadata/uid"),
            usage: o.pointer("/status/usage").and_then(|u| Usage::deserialize(u).ok()),
            queued: holds_slot(o).then(created),
            files: overlap::published(o)
                .map(|f| f.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()),
            review_of: text("/spec/reviewOf"),
            host: placement::recorded_host(o).map(str::to_string),
            live: placement::live(o),
            managed_by: o
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(aoctl_api::source::MANAGED_BY))
                .and_then(Value::as_str)
                .map(str::to_string),
            orchestrator: o
                .pointer("/metadata/labels")
                .and_then(|l| l.get(aoctl_api::orchestrator::ORCHESTRATOR_LABEL))
                .and_then(Value::as_str)
                .map(str::to_string),
            upstream_top: upstream_top(o),
        }
    }
}

/// The number of the newest record a stored Session keeps for its orchestrator, 0 when none.
pub(crate) fn upstream_top(o: &Value) -> u64 {
    let pending = o.pointer("/status/upstream/pending").and_then(Value::as_array);
    pending.and_then(|p| p.last()).and_then(|r| r.get("seq")).and_then(Value::as_u64).unwrap_or(0)
}

/// A worker of an orchestrator, as the index knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Worker {
    pub name: String,
    pub uid: Option<String>,
    /// The newest record it keeps for its orchestrator.
    pub top: u64,
}

/// What the index holds of one project's sessions.
#[derive(Debug, Default)]
struct Sessions {
    count: usize,
    /// The names of its stored sessions.
    names: BTreeSet<String>,
    /// The uids of its stored sessions.
    uids: HashSet<String>,
    /// The usage its sessions show, by uid.
    usage: HashMap<String, Usage>,
    /// The sessions that hold or wait for a slot, oldest first.
    queue: BTreeSet<(Option<Time>, String)>,
    /// The live sessions that publish each file.
    by_file: HashMap<String, BTreeSet<String>>,
}

/// The stored Sessions, by name, by project and by the worker they review.
#[derive(Debug, Default)]
pub(crate) struct Index {
    sessions: HashMap<String, Entry>,
    projects: HashMap<String, Sessions>,
    /// The reviewer sessions of each worker, by name.
    reviewers: HashMap<String, BTreeSet<String>>,
    /// The sessions each source made (by its `ao.dev/managed-by` value), by name.
    managed: HashMap<String, BTreeSet<String>>,
    /// The workers each orchestrator spawned (label `ao.dev/orchestrator`), by name.
    orchestrated: HashMap<String, BTreeSet<String>>,
}

/// What the index tells of one stored Session to whoever needs them all (the orphan collector).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    pub name: String,
    pub project: String,
    /// The docker engine its status records it on.
    pub host: Option<String>,
}

impl Index {
    /// Takes in one change of the store; changes of other kinds are ignored.
    pub(crate) fn apply(&mut self, kind: Kind, type_: EventKind, obj: &Value) {
        if kind != Kind::Session {
            return;
        }
        let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str) else { return };
        let entry = (type_ != EventKind::Deleted).then(|| Entry::of(obj));
        let before = match &entry {
            Some(e) => self.sessions.insert(name.to_string(), e.clone()),
            None => self.sessions.remove(name),
        };
        if before == entry {
            return;
        }
        if let Some(b) = before {
            self.forget(name, b);
        }
        if let Some(e) = entry {
            self.count(name, e);
        }
    }

    fn count(&mut self, name: &str, e: Entry) {
        if let Some(worker) = e.review_of {
            self.reviewers.entry(worker).or_default().insert(name.to_string());
        }
        if let Some(source) = e.managed_by {
            self.managed.entry(source).or_default().insert(name.to_string());
        }
        if let Some(o) = e.orchestrator {
            self.orchestrated.entry(o).or_default().insert(name.to_string());
        }
        let p = self.projects.entry(e.project).or_default();
        p.count += 1;
        p.names.insert(name.to_string());
        if let Some(uid) = e.uid {
            if let Some(u) = e.usage {
                p.usage.insert(uid.clone(), u);
            }
            p.uids.insert(uid);
        }
        if let Some(created) = e.queued {
            p.queue.insert((created, name.to_string()));
        }
        for f in e.files.into_iter().flatten() {
            p.by_file.entry(f).or_default().insert(name.to_string());
        }
    }

    fn forget(&mut self, name: &str, e: Entry) {
        let links = [
            (&mut self.reviewers, &e.review_of),
            (&mut self.managed, &e.managed_by),
            (&mut self.orchestrated, &e.orchestrator),
        ];
        for (by, key) in links {
            if let Some(names) = key.as_ref().and_then(|k| by.get_mut(k)) {
                names.remove(name);
                if names.is_empty() {
                    by.remove(key.as_deref().unwrap_or_default());
                }
            }
        }
        let Some(p) = self.projects.get_mut(&e.project) else { return };
        p.count -= 1;
        p.names.remove(name);
        if let Some(uid) = &e.uid {
            p.usage.remove(uid);
            p.uids.remove(uid);
        }
        if let Some(created) = e.queued {
            p.queue.remove(&(created, name.to_string()));
        }
        for f in e.files.iter().flatten() {
            if let Some(names) = p.by_file.get_mut(f) {
                names.remove(name);
                if names.is_empty() {
                    p.by_file.remove(f);
                }
            }
        }
        if p.count == 0 {
            self.projects.remove(&e.project);
        }
    }

    /// How many sessions `project` has.
    pub(crate) fn sessions(&self, project: &str) -> usize {
        self.projects.get(project).map_or(0, |p| p.count)
    }

    /// The usage of `project` (see [`super::account`]), from the sessions that show some and
    /// those its status counted before.
    pub(crate) fn account(&self, project: &str, before: &ProjectStatus) -> Account {
        let Some(p) = self.projects.get(project) else {
            return super::account_of(before, std::iter::empty());
        };
        let shown = p.usage.iter().map(|(uid, u)| (uid.as_str(), Some(u.clone())));
        let earlier = before
            .session_usage
            .keys()
            .filter(|uid| p.uids.contains(*uid) && !p.usage.contains_key(*uid))
            .map(|uid| (uid.as_str(), None));
        super::account_of(before, shown.chain(earlier))
    }

    /// How many sessions of `project` hold or wait for a slot.
    pub(crate) fn contenders(&self, project: &str) -> usize {
        self.projects.get(project).map_or(0, |p| p.queue.len())
    }

    /// The place of session `name` in the queue of `project` (0: first), or the queue's length
    /// when it is not in it.
    pub(crate) fn rank(&self, project: &str, name: &str) -> usize {
        let Some(p) = self.projects.get(project) else { return 0 };
        match self.sessions.get(name).and_then(|e| e.queued.filter(|_| e.project == project)) {
            Some(created) => p.queue.range(..(created, name.to_string())).count(),
            None => p.queue.len(),
        }
    }

    /// Whether a session named `name` is stored.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.sessions.contains_key(name)
    }

    /// Every stored session, by name.
    pub(crate) fn stored(&self) -> Vec<Stored> {
        let mut all: Vec<Stored> = self
            .sessions
            .iter()
            .map(|(name, e)| Stored { name: name.clone(), project: e.project.clone(), host: e.host.clone() })
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// The sessions source `mark` made (its `ao.dev/managed-by` value, e.g. `issuesource/bugs`),
    /// by name.
    pub(crate) fn managed_by(&self, mark: &str) -> BTreeSet<String> {
        self.managed.get(mark).cloned().unwrap_or_default()
    }

    /// The workers orchestrator `name` spawned, by name.
    pub(crate) fn workers(&self, orchestrator: &str) -> Vec<Worker> {
        let names = self.orchestrated.get(orchestrator).into_iter().flatten();
        names
            .filter_map(|n| {
                let e = self.sessions.get(n)?;
                Some(Worker { name: n.clone(), uid: e.uid.clone(), top: e.upstream_top })
            })
            .collect()
    }

    /// The sessions that review `worker` (`spec.reviewOf`), by name.
    pub(crate) fn reviewers(&self, worker: &str) -> Vec<String> {
        self.reviewers.get(worker).map_or_else(Vec::new, |r| r.iter().cloned().collect())
    }

    /// The places taken on each docker engine by the live sessions of `project` other than
    /// `except` (see [`placement::loads`]; `placed`: where this controller placed sessions).
    pub(crate) fn loads(
        &self,
        project: &str,
        except: &str,
        placed: &HashMap<String, Option<String>>,
    ) -> HashMap<String, u32> {
        let Some(p) = self.projects.get(project) else { return HashMap::new() };
        let live = p.names.iter().filter_map(|n| {
            let e = self.sessions.get(n).filter(|e| e.live)?;
            Some((n.as_str(), e.host.as_deref()))
        });
        placement::loads(except, live, placed)
    }

    /// The live sessions of `project` other than `name` that publish some of `own`, each with
    /// the files it shares (sorted), by session name.
    pub(crate) fn overlaps(&self, project: &str, name: &str, own: &[String]) -> Vec<Overlap> {
        let Some(p) = self.projects.get(project) else { return vec![] };
        let mut shared: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for f in own {
            for sibling in p.by_file.get(f).into_iter().flatten().filter(|s| *s != name) {
                shared.entry(sibling).or_default().insert(f);
            }
        }
        shared
            .into_iter()
            .map(|(s, files)| Overlap {
                session: s.to_string(),
                files: files.into_iter().map(str::to_string).collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The queues the way a full list counts them: the slot holders by project, oldest first.
    fn queues_of(all: &[Value]) -> HashMap<String, Vec<String>> {
        let mut by_project: HashMap<String, Vec<(Option<Time>, String)>> = HashMap::new();
        for o in all.iter().filter(|o| holds_slot(o)) {
            let created = o.pointer("/metadata/creationTimestamp").and_then(|v| Time::deserialize(v).ok());
            let project = o["spec"]["project"].as_str().unwrap().to_string();
            by_project.entry(project).or_default().push((created, o["metadata"]["name"].as_str().unwrap().into()));
        }
        by_project
            .into_iter()
            .map(|(p, mut v)| {
                v.sort();
                (p, v.into_iter().map(|(_, n)| n).collect())
            })
            .collect()
    }

    /// The overlaps the way a full list finds them: every published sibling compared.
    fn overlaps_of(all: &[Value], project: &str, name: &str, own: &[String]) -> Vec<Overlap> {
        let published: Vec<(String, Vec<String>)> = all
            .iter()
            .filter(|o| o["spec"]["project"] == project && o["metadata"]["name"] != name)
            .filter_map(|o| {
                let files = overlap::published(o)?;
                let files = files.as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect();
                Some((o["metadata"]["name"].as_str().unwrap().to_string(), files))
            })
            .collect();
        overlap::overlaps(own, published.iter().map(|(n, f)| (n, f)))
    }

    /// A small deterministic generator, so a failure replays.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    fn session(rng: &mut Rng, name: &str, uid: &str, created: u64) -> Value {
        let project = ["p", "q"][rng.below(2) as usize];
        let phase = ["Working", "Stopped", "Queued", "Merged", "Failed"][rng.below(5) as usize];
        let files: Vec<String> = (0..rng.below(4)).map(|_| format!("src/{}.rs", rng.below(5))).collect();
        let mut o = json!({
            "metadata": {"name": name, "uid": uid, "creationTimestamp": format!("2026-01-01T00:00:{:02}Z", created % 60)},
            "spec": {"project": project, "stopped": rng.below(4) == 0},
            "status": {"phase": phase},
        });
        if rng.below(3) > 0 {
            o["status"]["usage"] = json!({"inputTokens": rng.below(100), "outputTokens": rng.below(100)});
        }
        if rng.below(3) > 0 {
            o["status"]["changedFiles"] = json!({"headSha": "h", "baseSha": "b", "files": files, "count": files.len()});
        }
        if rng.below(8) == 0 {
            o["status"]["activity"] = json!({"state": "rate-limited"});
        }
        if rng.below(10) == 0 {
            o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:01:00Z");
        }
        if rng.below(3) == 0 {
            o["spec"]["reviewOf"] = json!(format!("s{}", rng.below(30)));
        }
        if rng.below(3) > 0 {
            o["metadata"]["annotations"] = json!({"ao.dev/managed-by": format!("issuesource/{}", rng.below(3))});
        }
        if rng.below(3) > 0 {
            o["metadata"]["labels"] = json!({"ao.dev/orchestrator": format!("o{}", rng.below(2))});
            if rng.below(2) == 0 {
                let pending: Vec<Value> = (1..=rng.below(3)).map(|seq| json!({"seq": seq})).collect();
                o["status"]["upstream"] = json!({"orchestrator": "o", "pending": pending});
            }
        }
        match rng.below(4) {
            0 => o["status"]["runtime"] = json!({"kind": "tmux", "handle": "t"}),
            1 | 2 => {
                let host = format!("unix:///engine-{}", rng.below(3));
                o["status"]["runtime"] = json!({"kind": "docker", "handle": "c", "host": host});
            }
            _ => {}
        }
        o
    }

    /// The places the way a full list counts them: every live session of the project.
    fn loads_of(
        all: &[Value],
        project: &str,
        except: &str,
        placed: &HashMap<String, Option<String>>,
    ) -> HashMap<String, u32> {
        let live = all
            .iter()
            .filter(|o| o["spec"]["project"] == project && placement::live(o))
            .map(|o| (o["metadata"]["name"].as_str().unwrap(), placement::recorded_host(o)));
        placement::loads(except, live, placed)
    }

    /// After every add, change and delete, the index answers what a recount of all the stored
    /// sessions answers.
    #[test]
    fn agrees_with_a_full_recount() {
        let mut rng = Rng(7);
        let mut index = Index::default();
        let mut stored: BTreeMap<String, Value> = BTreeMap::new();
        let mut before: HashMap<&str, ProjectStatus> = HashMap::new();
        for step in 0..2000u64 {
            let name = format!("s{}", rng.below(30));
            let uid = format!("{name}-{}", step / 500);
            if stored.contains_key(&name) && rng.below(4) == 0 {
                let last = stored.remove(&name).unwrap();
                index.apply(Kind::Session, EventKind::Deleted, &last);
            } else {
                let type_ = if stored.contains_key(&name) { EventKind::Modified } else { EventKind::Added };
                let o = session(&mut rng, &name, &uid, step);
                index.apply(Kind::Session, type_, &o);
                stored.insert(name, o);
            }
            index.apply(Kind::Event, EventKind::Added, &json!({"metadata": {"name": "e"}}));
            let all: Vec<Value> = stored.values().cloned().collect();
            let queues = queues_of(&all);
            for project in ["p", "q", "none"] {
                let mine = all.iter().filter(|o| o["spec"]["project"] == project).count();
                assert_eq!(index.sessions(project), mine, "step {step}");
                let b = before.entry(project).or_default();
                let full = super::super::account(project, b, all.iter());
                assert_eq!(index.account(project, b), full, "step {step}");
                b.session_usage = full.counted;
                b.retired_usage = Some(full.retired);
                let queue = queues.get(project).cloned().unwrap_or_default();
                assert_eq!(index.contenders(project), queue.len(), "step {step}");
                for o in all.iter().filter(|o| o["spec"]["project"] == project) {
                    let n = o["metadata"]["name"].as_str().unwrap();
                    let rank = queue.iter().position(|q| q == n).unwrap_or(queue.len());
                    assert_eq!(index.rank(project, n), rank, "step {step}: {n}");
                    let own: Vec<String> = (0..3).map(|i| format!("src/{i}.rs")).collect();
                    assert_eq!(index.overlaps(project, n, &own), overlaps_of(&all, project, n, &own), "step {step}");
                    let placed = HashMap::from([("s1".to_string(), Some("unix:///elsewhere".to_string()))]);
                    assert_eq!(index.loads(project, n, &placed), loads_of(&all, project, n, &placed), "step {step}");
                }
            }
            for n in (0..30).map(|i| format!("s{i}")) {
                let reviewers: Vec<String> = all
                    .iter()
                    .filter(|o| o["spec"]["reviewOf"] == n.as_str())
                    .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
                    .collect();
                assert_eq!(index.reviewers(&n), reviewers, "step {step}: reviewers of {n}");
                assert_eq!(index.contains(&n), stored.contains_key(&n), "step {step}");
            }
            let everyone: Vec<Stored> = all
                .iter()
                .map(|o| Stored {
                    name: o["metadata"]["name"].as_str().unwrap().to_string(),
                    project: o["spec"]["project"].as_str().unwrap().to_string(),
                    host: placement::recorded_host(o).map(str::to_string),
                })
                .collect();
            assert_eq!(index.stored(), everyone, "step {step}");
            for mark in (0..4).map(|i| format!("issuesource/{i}")) {
                let made: BTreeSet<String> = all
                    .iter()
                    .filter(|o| o["metadata"]["annotations"]["ao.dev/managed-by"] == mark.as_str())
                    .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
                    .collect();
                assert_eq!(index.managed_by(&mark), made, "step {step}: made by {mark}");
            }
            for o in ["o0", "o1"] {
                let workers: Vec<Worker> = all
                    .iter()
                    .filter(|s| s["metadata"]["labels"]["ao.dev/orchestrator"] == o)
                    .map(|s| Worker {
                        name: s["metadata"]["name"].as_str().unwrap().to_string(),
                        uid: s["metadata"]["uid"].as_str().map(str::to_string),
                        top: upstream_top(s),
                    })
                    .collect();
                assert_eq!(index.workers(o), workers, "step {step}: workers of {o}");
            }
        }
        assert!(index.sessions("p") > 0 && index.contenders("p") > 0, "the mix exercises every part");
        let reviewed = (0..30).filter(|i| !index.reviewers(&format!("s{i}")).is_empty()).count();
        let placed = index.loads("p", "", &HashMap::new()).values().sum::<u32>()
            + index.loads("q", "", &HashMap::new()).values().sum::<u32>();
        assert!(reviewed > 0 && placed > 0, "reviewers and places are in the mix");
    }

    fn stored(name: &str) -> Value {
        json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
            "spec": {"project": "p"}})
    }

    /// A read sees every write made before it, and an index whose watch ended lists again.
    #[tokio::test]
    async fn reads_follow_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let index = SessionIndex::new();
        assert_eq!(index.read(&store, |i| i.sessions("p")).await.unwrap(), 0);
        let opts = aoctl_store::WriteOptions::default();
        for n in ["a", "b", "c"] {
            store.create(Kind::Session, stored(n), opts).await.unwrap();
            // A write of another kind between: catching up never waits for a Session change.
            let ev = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Event", "metadata": {"name": format!("e{n}")}});
            store.create(Kind::Event, ev, opts).await.unwrap();
        }
        assert_eq!(index.read(&store, |i| (i.sessions("p"), i.contenders("p"))).await.unwrap(), (3, 3));
        store.delete(Kind::Session, "b", None, opts).await.unwrap();
        assert_eq!(index.read(&store, |i| (i.sessions("p"), i.rank("p", "c"))).await.unwrap(), (2, 1));
        // The watch is gone, as when it falls behind the store's log: the index lists again.
        index.inner.lock().await.watch = None;
        store.create(Kind::Session, stored("d"), opts).await.unwrap();
        assert_eq!(index.read(&store, |i| i.sessions("p")).await.unwrap(), 3);
    }
}
