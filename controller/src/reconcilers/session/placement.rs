//! Placement of docker sessions on the engines of `spec.docker.hosts`: a session without a pinned
//! `host` gets a place on the least loaded engine that answers and has room before it launches,
//! waits (`Scheduled=False`, `NoCapacity`) while none has, and keeps its place, recorded in
//! `status.runtime.host`, for as long as it lives. An engine that stops answering for longer than
//! [`HOST_GRACE`] is lost: its sessions fail (`restartPolicy: Never`) or are placed again
//! elsewhere, and their containers there are removed once it answers again.
//!
//! Places are counted from the index of the sessions ([`super::SessionIndex`]): each live one of
//! the project (not stopped, deleted or finished) holds a place on the engine its status records,
//! or on the one this controller placed it on when its status does not say yet. Counting and taking a place happen
//! under one lock ([`super::State`]), so concurrent reconciles never both take the last place.

use std::collections::HashMap;
use std::ops::ControlFlow::{Break, Continue};
use std::time::Duration;

use aoctl_api::condition::{self, types};
use aoctl_api::session::{reasons, DockerHost, DockerSpec, Phase, RestartPolicy, RuntimeKind};
use aoctl_api::{ConditionStatus, EventType};
use aoctl_engine::Action;
use aoctl_runtimes::Probe;
use serde_json::Value;

use super::{cond, Reconcile, Step};
use crate::machine::{container_of, EngineHealth};

/// How long an engine may not answer before its sessions count as lost.
pub(crate) const HOST_GRACE: Duration = Duration::from_secs(10);
/// How often a placed session looks at its engine.
const HOST_CHECK: Duration = Duration::from_secs(5);
/// How soon a session that found no room looks again when an engine does not answer (a returning
/// engine changes nothing in the store, so nothing else wakes it).
const ENGINE_DOWN_RECHECK: Duration = Duration::from_secs(5);
/// How soon a session that found every engine full looks again by itself; a place freed by a
/// sibling wakes it at once (see `serve::Router`).
const FULL_RECHECK: Duration = Duration::from_secs(60);
/// How often a session that failed for its lost engine looks whether that engine is back, to
/// remove its container there.
const LOST_RECHECK: Duration = Duration::from_secs(10);

/// Where a session's container goes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Placement {
    /// On this engine (`None`: the default one), with no counting.
    Pinned(Option<String>),
    /// On one of these, where there is room.
    Hosts(Vec<DockerHost>),
}

/// The placement the merged docker settings ask for.
pub(crate) fn placement_of(docker: Option<&DockerSpec>) -> Placement {
    match docker {
        Some(d) if d.host.is_none() && !d.hosts.is_empty() => Placement::Hosts(d.hosts.clone()),
        Some(d) => Placement::Pinned(d.host.clone()),
        None => Placement::Pinned(None),
    }
}

/// Whether a stored Session is live: neither stopped, nor being deleted, nor finished.
pub(super) fn live(o: &Value) -> bool {
    let stopped = o.pointer("/spec/stopped").and_then(|v| v.as_bool()).unwrap_or(false);
    let deleting = o.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null());
    let phase = o.pointer("/status/phase").and_then(|p| p.as_str()).unwrap_or_default();
    let finished = [Phase::Merged, Phase::Closed, Phase::Failed].iter().any(|p| p.as_str() == phase);
    !stopped && !deleting && !finished
}

/// The docker engine a stored Session's status records it on.
pub(super) fn recorded_host(o: &Value) -> Option<&str> {
    let runtime = o.pointer("/status/runtime")?;
    (runtime.get("kind").and_then(|k| k.as_str()) == Some(RuntimeKind::Docker.as_str()))
        .then(|| runtime.get("host").and_then(|h| h.as_str()))
        .flatten()
}

/// The engine a stored Session holds a place on: the one its status records, while it is live.
pub(crate) fn place_of(o: &Value) -> Option<&str> {
    live(o).then(|| recorded_host(o)).flatten()
}

/// The places taken on each engine by `sessions` (the live sessions of a project, by name, each
/// with the engine its status records) other than `except`: where this controller placed them,
/// else where their status says.
pub(crate) fn loads<'a>(
    except: &str,
    sessions: impl Iterator<Item = (&'a str, Option<&'a str>)>,
    placed: &HashMap<String, Option<String>>,
) -> HashMap<String, u32> {
    let mut loads = HashMap::new();
    for (name, recorded) in sessions.filter(|(name, _)| *name != except) {
        let host = match placed.get(name) {
            Some(h) => h.as_deref(),
            None => recorded,
        };
        if let Some(h) = host {
            *loads.entry(h.to_string()).or_default() += 1;
        }
    }
    loads
}

/// The engine a new session goes to: among those that answer and have room, the least loaded for
/// its capacity (then the fewer sessions, then the first listed); `None` when none has room.
pub(crate) fn choose<'h>(
    hosts: &'h [DockerHost],
    loads: &HashMap<String, u32>,
    answers: impl Fn(&str) -> bool,
) -> Option<&'h DockerHost> {
    let load = |h: &DockerHost| loads.get(&h.host).copied().unwrap_or(0);
    let mut best: Option<&DockerHost> = None;
    for h in hosts.iter().filter(|h| load(h) < h.capacity && answers(&h.host)) {
        let better = match best {
            None => true,
            Some(b) => {
                let (lh, lb) = (u64::from(load(h)), u64::from(load(b)));
                let (ch, cb) = (u64::from(h.capacity), u64::from(b.capacity));
                lh * cb < lb * ch || (lh * cb == lb * ch && lh < lb)
            }
        };
        if better {
            best = Some(h);
        }
    }
    best
}

/// The words for an engine in messages: `a (unix:///run/a.sock)`.
fn engine_words(hosts: &[DockerHost], host: &str) -> String {
    let label =
        hosts.iter().find(|h| h.host == host).map_or_else(|| aoctl_api::session::derived_label(host), |h| h.label());
    format!("{label} ({host})")
}

impl Reconcile<'_> {
    /// The docker engine the session's runtime is on: pinned, recorded, found holding its
    /// container, or chosen now. Sets `self.host`; a session that must wait, or whose engine was
    /// lost, ends the reconcile here.
    pub(super) async fn place(&mut self) -> Step {
        self.host = None;
        if self.runtime_kind != RuntimeKind::Docker {
            return Ok(Continue(()));
        }
        let docker = container_of(self.s, Some(&self.project));
        let hosts = match placement_of(docker.as_ref()) {
            Placement::Pinned(host) => {
                self.host = host;
                return Ok(Continue(()));
            }
            Placement::Hosts(hosts) => hosts,
        };
        let pending_cleanup = self.remove_from_lost_engine().await;
        let (s, ctx) = (self.s, self.ctx);
        let name = s.metadata.name.as_str();
        let ready = condition::find(&self.st.conditions, types::READY);
        if ready.is_some_and(|c| c.status == ConditionStatus::False && c.reason == reasons::HOST_LOST) {
            // Failed with its engine (restartPolicy Never): it stays failed.
            return Ok(Break(if pending_cleanup { Action::requeue(LOST_RECHECK) } else { Action::await_change() }));
        }
        if s.spec.stopped {
            // A stopped session holds no place; its container is stopped where its status says.
            ctx.state.lock().placed.remove(name);
            self.host = self.st.runtime.as_ref().filter(|r| r.kind == RuntimeKind::Docker).and_then(|r| r.host.clone());
            return Ok(Continue(()));
        }
        let resumed =
            condition::find(&self.st.conditions, types::RUNTIME_READY).is_some_and(|c| c.reason == reasons::STOPPED);
        let recorded = self.st.runtime.as_ref().filter(|r| r.kind == RuntimeKind::Docker).and_then(|r| r.host.clone());
        let remembered = ctx.state.lock().placed.get(name).cloned();
        let current = match remembered {
            Some(h) => h,
            // A session coming back from a stop gave its place up: it is placed again.
            None if resumed => None,
            None => recorded,
        };
        if let Some(host) = current {
            self.host = Some(host.clone());
            let health = ctx.machine.engine_health(&host).await;
            if health.answers {
                self.placed(&hosts, &host, None).await;
                self.host_check = Some(HOST_CHECK);
                return Ok(Continue(()));
            }
            if health.down_for < HOST_GRACE {
                let wait = (HOST_GRACE - health.down_for).clamp(Duration::from_millis(500), Duration::from_secs(2));
                return Ok(Break(Action::requeue(wait)));
            }
            return Ok(Break(self.host_lost(&hosts, &host, &health).await));
        }
        let mut health = HashMap::new();
        for h in &hosts {
            health.insert(h.host.clone(), ctx.machine.engine_health(&h.host).await);
        }
        // Started just before a restart, before its status was written: its container is adopted
        // where it is, never started a second time elsewhere.
        for h in hosts.iter().filter(|h| health[&h.host].answers) {
            let Ok(rt) = ctx.machine.runtime(RuntimeKind::Docker, Some(&h.host)).await else { continue };
            let Some(handle) = rt.handle_for(name) else { continue };
            if matches!(rt.probe(&handle).await, Ok(Probe::Alive | Probe::Exited(_))) {
                ctx.state.lock().placed.insert(name.to_string(), Some(h.host.clone()));
                self.host = Some(h.host.clone());
                self.placed(&hosts, &h.host, Some("where its container was found")).await;
                return Ok(Continue(()));
            }
        }
        let turn = ctx.state.placing.lock().await;
        let loads = ctx
            .index
            .read(&ctx.store, |i| {
                let mut memory = ctx.state.lock();
                memory.placed.retain(|n, _| i.contains(n));
                i.loads(&s.spec.project, name, &memory.placed)
            })
            .await?;
        let chosen = choose(&hosts, &loads, |h| health.get(h).is_some_and(|e| e.answers)).cloned();
        if let Some(h) = &chosen {
            ctx.state.lock().placed.insert(name.to_string(), Some(h.host.clone()));
        }
        drop(turn);
        for h in &hosts {
            let taken = loads.get(&h.host).copied().unwrap_or(0) + u32::from(chosen.as_ref() == Some(h));
            ctx.metrics.docker_host(&s.spec.project, &h.label(), taken, h.capacity);
        }
        let taken = |h: &DockerHost| loads.get(&h.host).copied().unwrap_or(0);
        match chosen {
            Some(h) => {
                self.host = Some(h.host.clone());
                let why = format!("{} of its {} places were taken", taken(&h), h.capacity);
                self.placed(&hosts, &h.host, Some(&why)).await;
                Ok(Continue(()))
            }
            None => {
                let each: Vec<String> = hosts
                    .iter()
                    .map(|h| match health[&h.host].answers {
                        true => format!("{} {}/{}", h.label(), taken(h), h.capacity),
                        false => format!("{} does not answer", h.label()),
                    })
                    .collect();
                let msg = format!("no docker engine of the project has room: {}", each.join(", "));
                let first = condition::find(&self.st.conditions, types::SCHEDULED)
                    .is_none_or(|c| c.reason != reasons::NO_CAPACITY);
                cond(self.st, s, types::SCHEDULED, ConditionStatus::False, reasons::NO_CAPACITY, msg.clone());
                cond(self.st, s, types::READY, ConditionStatus::False, reasons::NO_CAPACITY, msg.clone());
                if first {
                    ctx.recorder.publish(s, EventType::Normal, reasons::NO_CAPACITY, &msg).await;
                }
                let down = hosts.iter().any(|h| !health[&h.host].answers);
                Ok(Break(Action::requeue(if down { ENGINE_DOWN_RECHECK } else { FULL_RECHECK })))
            }
        }
    }

    /// Records the place (`Scheduled=True`), with an event when it is new.
    async fn placed(&mut self, hosts: &[DockerHost], host: &str, why: Option<&str>) {
        let (s, ctx) = (self.s, self.ctx);
        let words = engine_words(hosts, host);
        let msg = format!("on docker engine {words}");
        let known = condition::find(&self.st.conditions, types::SCHEDULED)
            .is_some_and(|c| c.status == ConditionStatus::True && c.message == msg);
        if known {
            return;
        }
        cond(self.st, s, types::SCHEDULED, ConditionStatus::True, reasons::PLACED, msg.clone());
        let event = match why {
            Some(why) => format!("{msg}, {why}"),
            None => msg,
        };
        ctx.recorder.publish(s, EventType::Normal, reasons::PLACED, &event).await;
    }

    /// The session's engine is lost: the session gives its place up and fails
    /// (`restartPolicy: Never`) or is placed again at once.
    async fn host_lost(&mut self, hosts: &[DockerHost], host: &str, health: &EngineHealth) -> Action {
        let (s, ctx) = (self.s, self.ctx);
        let name = s.metadata.name.clone();
        {
            let mut memory = ctx.state.lock();
            memory.placed.insert(name.clone(), None);
            memory.moved_from.insert(name, host.to_string());
        }
        if let Some(r) = self.st.runtime.as_mut() {
            r.host = None;
        }
        self.host = None;
        let msg = format!(
            "docker engine {} has not answered for {}s: {}",
            engine_words(hosts, host),
            health.down_for.as_secs(),
            health.message
        );
        let r = reasons::HOST_LOST;
        cond(self.st, s, types::SCHEDULED, ConditionStatus::False, r, msg.clone());
        cond(self.st, s, types::RUNTIME_READY, ConditionStatus::False, r, msg.clone());
        cond(self.st, s, types::AGENT_ACTIVE, ConditionStatus::False, r, msg.clone());
        let policy = s.spec.restart_policy.unwrap_or(RestartPolicy::OnFailure);
        let (reason, what, action) = match policy {
            RestartPolicy::Never => {
                (r, format!("{msg}; restartPolicy Never does not recreate it"), Action::requeue(LOST_RECHECK))
            }
            _ => (
                reasons::RESCHEDULING,
                format!("{msg}; it is recreated on another engine (restartPolicy {policy})"),
                Action::requeue(Duration::ZERO),
            ),
        };
        cond(self.st, s, types::READY, ConditionStatus::False, reason, what.clone());
        ctx.recorder.publish(s, EventType::Warning, r, &what).await;
        action
    }

    /// Removes the session's container from the lost engine it was moved off, once that engine
    /// answers again; whether one is still waiting for it.
    async fn remove_from_lost_engine(&mut self) -> bool {
        let (s, ctx) = (self.s, self.ctx);
        let name = s.metadata.name.as_str();
        let Some(old) = ctx.state.lock().moved_from.get(name).cloned() else { return false };
        if !ctx.machine.engine_health(&old).await.answers {
            return true;
        }
        let Ok(rt) = ctx.machine.runtime(RuntimeKind::Docker, Some(&old)).await else { return true };
        if let Some(handle) = rt.handle_for(name) {
            if let Err(e) = rt.stop(&handle).await {
                tracing::warn!(session = %name, engine = %old, error = %e, "cannot remove the container on the engine that returned");
                return true;
            }
            ctx.metrics.runtime_op(RuntimeKind::Docker, "stop", true);
            let msg = format!("docker engine {old} answers again; the container the session left there was removed");
            ctx.recorder.publish(s, EventType::Normal, "RemovedFromLostHost", &msg).await;
        }
        ctx.state.lock().moved_from.remove(name);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::Kind;
    use aoctl_store::EventKind;
    use serde_json::json;

    use super::super::index::Index;

    fn host(address: &str, capacity: u32) -> DockerHost {
        DockerHost { host: address.into(), capacity, name: None }
    }

    fn session(name: &str, project: &str, phase: &str, host: Option<&str>) -> Value {
        let mut o = json!({"metadata": {"name": name}, "spec": {"project": project}, "status": {"phase": phase}});
        if let Some(h) = host {
            o["status"]["runtime"] = json!({"kind": "docker", "handle": format!("c-{name}"), "host": h});
        }
        o
    }

    #[test]
    fn the_least_loaded_engine_with_room_that_answers_is_chosen() {
        let hosts = [host("unix:///a", 2), host("unix:///b", 4), host("unix:///c", 1)];
        let loads = |pairs: &[(&str, u32)]| pairs.iter().map(|(h, n)| (h.to_string(), *n)).collect::<HashMap<_, _>>();
        let all = |_: &str| true;
        assert_eq!(choose(&hosts, &loads(&[]), all).unwrap().host, "unix:///a", "ties go to the first listed");
        // a 1/2 and b 1/4: b is less loaded for its size.
        assert_eq!(choose(&hosts, &loads(&[("unix:///a", 1), ("unix:///b", 1)]), all).unwrap().host, "unix:///c");
        assert_eq!(
            choose(&hosts, &loads(&[("unix:///a", 1), ("unix:///b", 1), ("unix:///c", 1)]), all).unwrap().host,
            "unix:///b"
        );
        let full = loads(&[("unix:///a", 2), ("unix:///b", 4), ("unix:///c", 1)]);
        assert_eq!(choose(&hosts, &full, all), None);
        let b_down = |h: &str| h != "unix:///b";
        assert_eq!(
            choose(&hosts, &loads(&[("unix:///a", 2), ("unix:///c", 1)]), b_down),
            None,
            "b has room but is down"
        );
        assert_eq!(
            choose(&hosts, &loads(&[("unix:///a", 5)]), all).unwrap().host,
            "unix:///b",
            "over capacity counts as full"
        );
    }

    #[test]
    fn places_are_held_by_live_sessions_of_the_project_only() {
        let sessions = [
            session("a1", "p", "Working", Some("unix:///a")),
            session("a2", "p", "Idle", Some("unix:///a")),
            session("b1", "p", "Failed", Some("unix:///b")),
            session("b2", "p", "Working", Some("unix:///b")),
            session("elsewhere", "q", "Working", Some("unix:///b")),
            session("new", "p", "Pending", None),
            session("me", "p", "Working", Some("unix:///b")),
        ];
        let mut index = Index::default();
        for o in &sessions {
            index.apply(Kind::Session, EventKind::Added, o);
        }
        let none = HashMap::new();
        let counted = index.loads("p", "me", &none);
        assert_eq!(counted, HashMap::from([("unix:///a".to_string(), 2), ("unix:///b".to_string(), 1)]));
        // Placed by this controller, before its status says so; and one taken off a lost engine.
        let placed = HashMap::from([("new".to_string(), Some("unix:///b".to_string())), ("a2".to_string(), None)]);
        let counted = index.loads("p", "me", &placed);
        assert_eq!(counted, HashMap::from([("unix:///a".to_string(), 1), ("unix:///b".to_string(), 2)]));
        let mut stopped = session("s", "p", "Stopped", Some("unix:///a"));
        stopped["spec"]["stopped"] = json!(true);
        assert_eq!(place_of(&stopped), None);
        assert_eq!(place_of(&sessions[0]), Some("unix:///a"));
        assert_eq!(place_of(&sessions[2]), None, "a failed session holds no place");
    }

    #[test]
    fn a_pinned_host_is_no_placement() {
        let hosts = vec![host("unix:///a", 1)];
        assert_eq!(placement_of(None), Placement::Pinned(None));
        let d = DockerSpec { hosts: hosts.clone(), ..Default::default() };
        assert_eq!(placement_of(Some(&d)), Placement::Hosts(hosts.clone()));
        let pinned = DockerSpec { host: Some("unix:///p".into()), hosts, ..Default::default() };
        assert_eq!(placement_of(Some(&pinned)), Placement::Pinned(Some("unix:///p".into())));
    }
}
