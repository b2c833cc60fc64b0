//! IssueSource reconciler: reads the project's tracker with the source's query and keeps one
//! Session per matching open issue (docs/gitops.md).
//!
//! Each pass lists the matching open issues (conditionally: an unchanged list costs 304s and no
//! rate limit) when a poll is due — every `spec.interval`, at once after an `issues` webhook or
//! `aoctl reconcile` — and otherwise works from the last list. Sessions are made oldest issue
//! first, `<source>-<number>` from the template, while fewer than `maxSessions` of them are live;
//! the other issues wait. A session whose issue closed or stopped matching ends per `onClose`, and
//! comes back when the issue matches again. A session whose pull request merged is finished: it is
//! left as it is and frees its place.
//!
//! An issue opened by someone the project does not trust (no write access, not in
//! `spec.trust.users`) is held, listed in `status.held`, until someone it trusts applies one of
//! the source's labels (docs/security.md). Each issue's verdict is kept until the issue changes,
//! or ten minutes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aoctl_api::condition::{set_condition, types};
use aoctl_api::decode::AnyObject;
use aoctl_api::issuesource::{conditions, session_name, IssueFields, IssueSession, OnClose};
use aoctl_api::session::{Phase, PullRequestState};
use aoctl_api::source::{self, MANAGED_BY};
use aoctl_api::validate::Validate;
use aoctl_api::{
    Condition, ConditionStatus, EventType, IssueSource, Kind, ObjectMeta, OwnerReference, Project, Session, Time,
    API_VERSION,
};
use aoctl_engine::Action;
use aoctl_forge_types::Issue;
use aoctl_store::{Deleted, Store, StoreError};
use parking_lot::Mutex;

use super::Error;
use crate::admission::{self, AdmissionError};
use crate::forges::{issue_number, Hub, Vouch};
use crate::recorder::Recorder;

/// Name of this controller in metrics and events.
pub(crate) const NAME: &str = "issuesource";

/// Annotation on a session its source stopped (its issue closed or stopped matching, with
/// `onClose: stop`); the value is the source, as in `ao.dev/managed-by`. Only such a stop is
/// undone when the issue matches again: a stop a person made stays.
pub(crate) const STOPPED_BY: &str = "ao.dev/stopped-by";

/// `IssueSession.state` of a session working on a matching issue.
pub(crate) const STATE_OPEN: &str = "open";
/// `IssueSession.state` of a session ended per `onClose` (or kept with `keep`).
pub(crate) const STATE_CLOSED: &str = "closed";
/// `IssueSession.state` of a session that is done: its pull request merged or closed, or it failed.
pub(crate) const STATE_FINISHED: &str = "finished";

/// `Ready=False`: a session's name would not be a DNS label.
const INVALID_SESSION_NAME: &str = "InvalidSessionName";
/// `Ready=False`: a session of that name exists and this source did not make it.
const SESSION_NAME_TAKEN: &str = "SessionNameTaken";

/// How soon a failed tracker read is tried again, at most.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(30);

/// How long whether an unchanged issue may be taken is believed.
const KEEP_VERDICT_FOR: Duration = Duration::from_secs(600);

/// What the IssueSource reconciler gets.
pub(crate) struct Context {
    pub store: Store,
    pub recorder: Recorder,
    /// The session reconciler's forges and trackers: the same rate budget per API URL and token.
    pub forges: Arc<Hub>,
    /// The last list of each source, and the polls the webhook handler asked for.
    pub state: Arc<State>,
    /// The session reconciler's index of the stored Sessions: which this source made.
    pub index: Arc<super::session::SessionIndex>,
}

/// What the reconciler remembers between passes, shared with the webhook handler.
#[derive(Default)]
pub(crate) struct State {
    inner: Mutex<Memory>,
}

#[derive(Default)]
struct Memory {
    /// Per source: the last list read, for which query, and when.
    polled: HashMap<String, Polled>,
    /// Sources whose tracker announced a change (an `issues` webhook), and when: poll at the
    /// next pass.
    wanted: HashMap<String, Instant>,
    /// Per source and issue without a session: whether it may be taken, for the issue as it was
    /// (its `updated_at`), and when that was decided.
    verdicts: HashMap<String, HashMap<u64, Verdict>>,
}

struct Verdict {
    updated_at: String,
    at: Instant,
    vouch: Vouch,
}

struct Polled {
    query: String,
    at: Instant,
    issues: Arc<Vec<Issue>>,
}

impl State {
    /// Asks for a poll of `source` at its next pass (the caller triggers the pass).
    pub(crate) fn poll_now(&self, source: &str) {
        self.lock().wanted.insert(source.to_string(), Instant::now());
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Memory> {
        self.inner.lock()
    }

    /// The last list of `source` for `query` when no poll is due; `None` when one is.
    fn fresh(&self, source: &str, query: &str, interval: Duration) -> Option<(Arc<Vec<Issue>>, Duration)> {
        let m = self.lock();
        if m.wanted.contains_key(source) {
            return None;
        }
        let p = m.polled.get(source).filter(|p| p.query == query)?;
        let left = interval.checked_sub(p.at.elapsed())?;
        Some((p.issues.clone(), left))
    }

    /// Remembers the list read for `source`, asked for at `asked_at`. A poll asked for while it
    /// was read stays wanted: the change it announces may have come after the read.
    fn store(&self, source: &str, query: String, issues: Arc<Vec<Issue>>, asked_at: Instant) {
        let mut m = self.lock();
        if m.wanted.get(source).is_some_and(|at| *at <= asked_at) {
            m.wanted.remove(source);
        }
        m.polled.insert(source.to_string(), Polled { query, at: asked_at, issues });
    }

    fn forget(&self, source: &str) {
        let mut m = self.lock();
        m.polled.remove(source);
        m.wanted.remove(source);
        m.verdicts.remove(source);
    }

    /// The verdict on `issue` if it did not change since and is recent enough.
    fn verdict(&self, source: &str, issue: &Issue) -> Option<Vouch> {
        let m = self.lock();
        let v = m.verdicts.get(source)?.get(&issue.number)?;
        (v.updated_at == issue.updated_at && !issue.updated_at.is_empty() && v.at.elapsed() < KEEP_VERDICT_FOR)
            .then(|| v.vouch.clone())
    }

    /// Keeps the verdict on `issue`; the one it replaces.
    fn judge(&self, source: &str, issue: &Issue, vouch: Vouch) -> Option<Vouch> {
        let verdict = Verdict { updated_at: issue.updated_at.clone(), at: Instant::now(), vouch };
        let mut m = self.lock();
        m.verdicts.entry(source.to_string()).or_default().insert(issue.number, verdict).map(|v| v.vouch)
    }

    /// Forgets the verdicts on issues other than `candidates`.
    fn keep_verdicts(&self, source: &str, candidates: &HashSet<u64>) {
        if let Some(v) = self.lock().verdicts.get_mut(source) {
            v.retain(|n, _| candidates.contains(n));
        }
    }
}

pub(crate) async fn reconcile(source: Arc<IssueSource>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = source.metadata.name.clone();
    if source.metadata.deletion_timestamp.is_some() {
        // Its sessions are owned by it and go with it.
        ctx.state.forget(&name);
        return Ok(Action::await_change());
    }
    let interval = source.spec.interval();
    let requested = source::pending_request(&source.metadata, source.status.last_handled_reconcile_at.as_deref())
        .map(str::to_string);
    let mut status = source.status.clone();
    status.observed_generation = source.metadata.generation;

    let project = match ctx.store.get_typed::<Project>(&source.spec.project).await {
        Ok(p) => p,
        Err(StoreError::NotFound { .. }) => {
            let msg = format!("project \"{}\" not found", source.spec.project);
            return blocked(&source, &ctx, status, conditions::PROJECT_NOT_FOUND, &msg, interval).await;
        }
        Err(e) => return Err(e.into()),
    };
    let tracker = match ctx.forges.tracker(&project) {
        Ok(Some(t)) => t,
        Ok(None) => {
            let msg = format!(
                "project \"{}\" has no tracker to read issues from (spec.repo, spec.gitlab or spec.linear)",
                project.metadata.name
            );
            return blocked(&source, &ctx, status, conditions::NO_TRACKER, &msg, interval).await;
        }
        Err(e) => {
            let msg = format!("cannot read the issues of project \"{}\": {e}", project.metadata.name);
            return blocked(&source, &ctx, status, conditions::TRACKER_FAILED, &msg, interval).await;
        }
    };
    let query = format!("{} {:?}", tracker.describe(), source.spec.github.labels);

    // The tracker, read when a poll is due.
    let fresh = if requested.is_some() { None } else { ctx.state.fresh(&name, &query, interval) };
    let (issues, next_poll) = match fresh {
        Some(cached) => cached,
        None => {
            let asked_at = Instant::now();
            match tracker.list(&source.spec).await {
                Ok(list) => {
                    let issues = Arc::new(list.issues);
                    ctx.state.store(&name, query, issues.clone(), asked_at);
                    status.last_poll_time = Some(Time::now());
                    if requested.is_some() {
                        status.last_handled_reconcile_at = requested.clone();
                    }
                    (issues, interval)
                }
                Err(e) => {
                    let msg = format!("cannot list the issues of {}: {e}", tracker.describe());
                    let wait = e.retry_after().unwrap_or(RETRY_AFTER_FAILURE).min(interval).max(Duration::from_secs(1));
                    return blocked(&source, &ctx, status, conditions::TRACKER_FAILED, &msg, wait).await;
                }
            }
        }
    };

    let mut matching: BTreeMap<u64, &Issue> = issues.iter().filter(|i| i.open).map(|i| (i.number, i)).collect();

    // The source's sessions, by issue number, and the names its issues' sessions would take
    // that other sessions hold: asked of the session index, each of its own read by name.
    let mark = source::managed_by(Kind::IssueSource, &name);
    let wanted: Vec<String> = matching.keys().map(|n| session_name(&name, *n)).collect();
    let (made, others) = ctx
        .index
        .read(&ctx.store, |i| {
            let made = i.managed_by(&mark);
            let others: HashSet<String> = wanted.into_iter().filter(|n| i.contains(n) && !made.contains(n)).collect();
            (made, others)
        })
        .await?;
    let mut mine: BTreeMap<u64, Session> = BTreeMap::new();
    for session in made {
        let s = match ctx.store.get_typed::<Session>(&session).await {
            Ok(s) => s,
            Err(StoreError::NotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        if let Some(n) = s.spec.issue.as_deref().and_then(issue_number) {
            mine.insert(n, s);
        }
    }

    // An issue without a session yet is taken only if the project trusts its author or who
    // labelled it.
    let held = match vet::vet(&source, &ctx, &project, &*tracker, &matching, &mine).await {
        Ok(held) => held,
        Err(e) => {
            let msg = format!("cannot tell who opened or labelled the issues of {}: {e}", tracker.describe());
            let wait = e.retry_after().unwrap_or(RETRY_AFTER_FAILURE).min(interval).max(Duration::from_secs(1));
            return blocked(&source, &ctx, status, conditions::TRACKER_FAILED, &msg, wait).await;
        }
    };
    matching.retain(|n, _| !held.iter().any(|h| h.issue == n.to_string()));
    status.held = held;

    // A session whose issue just closed may have closed it by merging: the forge knows before the
    // session does. Asked once, before the session is ended.
    let mut merged = HashSet::new();
    let on_close = source.spec.on_close();
    let forge = ctx.forges.forge(&project);
    for (n, s) in &mine {
        let ends = match on_close {
            OnClose::Delete => true,
            OnClose::Stop => !s.spec.stopped,
            OnClose::Keep => false,
        };
        let open_pr = s.status.pull_request.as_ref().filter(|p| p.state == PullRequestState::Open);
        if let (false, true, Some(pr)) =
            (matching.contains_key(n), ends && s.metadata.deletion_timestamp.is_none(), open_pr)
        {
            let change = match &forge {
                Ok(Some(forge)) => forge.change(pr.number).await,
                Ok(None) => continue,
                Err(e) => Err(e.clone()),
            };
            match change {
                Ok(p) if p.merged => {
                    merged.insert(*n);
                }
                Ok(_) => {}
                Err(e) => {
                    let msg = format!("cannot read pull request #{} of session {}: {e}", pr.number, s.metadata.name);
                    let wait = e.retry_after().unwrap_or(RETRY_AFTER_FAILURE).min(interval).max(Duration::from_secs(1));
                    return blocked(&source, &ctx, status, conditions::TRACKER_FAILED, &msg, wait).await;
                }
            }
        }
    }

    let plan = plan(&matching, &mine, &merged, &others, source.spec.max_sessions, on_close, &name);
    let mut problems: Vec<(&'static str, String)> = plan.problems.clone();
    let mut entries = plan.entries.clone();
    for action in &plan.actions {
        match act(&source, &ctx, action, &matching, &mine).await {
            Ok(()) => {}
            Err(Failure::Problem(reason, msg)) => {
                entries.retain(|e| e.issue != action.issue().to_string());
                problems.push((reason, msg));
            }
            Err(Failure::Conflict) => return Ok(Action::requeue(Duration::ZERO)),
            Err(Failure::Error(e)) => return Err(e),
        }
    }
    entries.sort_by_key(|e| e.issue.parse::<u64>().unwrap_or(u64::MAX));
    status.sessions = entries;
    status.waiting = plan.waiting.iter().map(u64::to_string).collect();

    let (ready, reason, message) = match problems.first() {
        Some((reason, _)) => {
            let all: Vec<&str> = problems.iter().map(|(_, m)| m.as_str()).collect();
            (ConditionStatus::False, *reason, all.join("; "))
        }
        None => (ConditionStatus::True, conditions::SYNCED, summary(&status, matching.len())),
    };
    let was = ready_of(&source.status);
    set_condition(
        &mut status.conditions,
        Condition::new(types::READY, ready, reason, message.clone(), source.metadata.generation, Time::now()),
    );
    write_status(&source, &ctx, status).await?;
    if ready == ConditionStatus::False && was != Some((ready, reason.to_string())) {
        ctx.recorder.publish(&*source, EventType::Warning, reason, &message).await;
    }
    Ok(Action::requeue(next_poll.max(Duration::from_secs(1))))
}

pub(crate) fn error_policy(_source: Arc<IssueSource>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %error, kind = error.metric_label(), "issuesource reconcile failed");
    Action::requeue(Duration::ZERO)
}

/// One change to the store a pass makes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// Make the session of this issue from the template.
    Create(u64),
    /// `spec.stopped: false` on a session this source stopped.
    Resume(u64),
    /// `spec.stopped: true` (`onClose: stop`).
    Stop(u64),
    /// Delete the session (`onClose: delete`).
    Delete(u64),
}

impl Step {
    fn issue(&self) -> u64 {
        match self {
            Step::Create(n) | Step::Resume(n) | Step::Stop(n) | Step::Delete(n) => *n,
        }
    }
}

/// What a pass does and records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Plan {
    actions: Vec<Step>,
    entries: Vec<IssueSession>,
    waiting: Vec<u64>,
    problems: Vec<(&'static str, String)>,
}

/// Whether a session is done: its pull request merged or closed, or it failed for good.
fn finished(s: &Session) -> bool {
    matches!(s.status.phase, Some(Phase::Merged | Phase::Closed | Phase::Failed))
        || s.status.pull_request.as_ref().is_some_and(|p| p.state != PullRequestState::Open)
}

/// Whether a session's pull request merged (`merged_now`: GitHub says so, the session not yet).
fn is_merged(s: &Session, merged_now: bool) -> bool {
    merged_now
        || s.status.phase == Some(Phase::Merged)
        || s.status.pull_request.as_ref().is_some_and(|p| p.state == PullRequestState::Merged)
}

/// Decides a pass: `matching` are the open issues of the query, `mine` the source's sessions by
/// issue, `merged` the issues whose session's pull request GitHub reports merged, `others` the
/// names of sessions this source did not make.
fn plan(
    matching: &BTreeMap<u64, &Issue>,
    mine: &BTreeMap<u64, Session>,
    merged: &HashSet<u64>,
    others: &HashSet<String>,
    max: Option<u32>,
    on_close: OnClose,
    source: &str,
) -> Plan {
    let me = source::managed_by(Kind::IssueSource, source);
    let stopped_by_me = |s: &Session| s.spec.stopped && s.metadata.annotations.get(STOPPED_BY) == Some(&me);
    // Live: not finished and not stopped by this source (a stop a person made keeps its place).
    let is_live = |s: &Session| !finished(s) && !stopped_by_me(s);
    // An issue as its tracker names it (`42`, `ENG-42`): from the issue, else from the session.
    let reference = |n: u64| {
        let named = matching.get(&n).map(|i| i.reference.clone()).or_else(|| mine.get(&n)?.spec.issue.clone());
        named.map_or_else(|| n.to_string(), |r| r.trim_start_matches('#').to_string())
    };
    let entry = |n: u64, state: &str| IssueSession {
        issue: reference(n),
        session: session_name(source, n),
        state: Some(state.to_string()),
    };
    let mut p = Plan::default();
    let mut live = 0usize;
    for (n, s) in mine {
        let entry = |state: &str| IssueSession { session: s.metadata.name.clone(), ..entry(*n, state) };
        if s.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if is_merged(s, merged.contains(n)) {
            p.entries.push(entry(STATE_FINISHED));
            continue;
        }
        let done = finished(s);
        if !matching.contains_key(n) {
            match on_close {
                OnClose::Delete => p.actions.push(Step::Delete(*n)),
                OnClose::Stop if !s.spec.stopped => p.actions.push(Step::Stop(*n)),
                OnClose::Stop => {}
                OnClose::Keep => live += usize::from(is_live(s)),
            }
            if on_close != OnClose::Delete {
                p.entries.push(entry(STATE_CLOSED));
            }
            continue;
        }
        if stopped_by_me(s) {
            continue; // resumed below, in issue order, when there is room
        }
        p.entries.push(entry(if done { STATE_FINISHED } else { STATE_OPEN }));
        live += usize::from(is_live(s));
    }
    let room = |live: usize| max.is_none_or(|m| live < m as usize);
    for n in matching.keys() {
        let step = match mine.get(n) {
            Some(s) if s.metadata.deletion_timestamp.is_some() => continue, // made again once it is gone
            Some(s) if stopped_by_me(s) && !is_merged(s, merged.contains(n)) => Step::Resume(*n),
            Some(_) => continue,
            None => {
                let name = session_name(source, *n);
                if others.contains(&name) {
                    let msg = format!("session {name} for issue #{n} exists and was not made by this source");
                    p.problems.push((SESSION_NAME_TAKEN, msg));
                    continue;
                }
                Step::Create(*n)
            }
        };
        if room(live) {
            live += 1;
            p.actions.push(step);
            p.entries.push(entry(*n, STATE_OPEN));
        } else {
            if step == Step::Resume(*n) {
                p.entries.push(entry(*n, STATE_CLOSED)); // stopped until a place frees
            }
            p.waiting.push(*n);
        }
    }
    p
}

/// Why a step did not happen.
enum Failure {
    /// Reported on the source's Ready condition; the other steps go on.
    Problem(&'static str, String),
    /// The object changed meanwhile: the pass runs again at once.
    Conflict,
    Error(Error),
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        if e.is_conflict() {
            Failure::Conflict
        } else {
            Failure::Error(e.into())
        }
    }
}

async fn act(
    source: &IssueSource,
    ctx: &Context,
    step: &Step,
    matching: &BTreeMap<u64, &Issue>,
    mine: &BTreeMap<u64, Session>,
) -> Result<(), Failure> {
    let me = source::managed_by(Kind::IssueSource, &source.metadata.name);
    match step {
        Step::Create(n) => {
            let Some(issue) = matching.get(n) else { return Ok(()) };
            let session = session_for(source, issue).map_err(|(r, m)| Failure::Problem(r, m))?;
            let name = session.metadata.name.clone();
            let mut obj = AnyObject::Session(session);
            match admission::admit(&ctx.store, &mut obj, true, &[]).await {
                Ok(()) => {}
                Err(AdmissionError::Invalid { errors, .. }) => {
                    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
                    return Err(Failure::Problem(conditions::PROJECT_NOT_FOUND, text.join("; ")));
                }
                Err(AdmissionError::Store(e)) => return Err(e.into()),
            }
            match ctx.store.create(Kind::Session, obj.to_value(), Default::default()).await {
                Ok(_) => {}
                // Made by an earlier pass whose status write did not land, or by someone else:
                // the next pass sees which.
                Err(StoreError::AlreadyExists { .. }) => return Err(Failure::Conflict),
                Err(e) => return Err(e.into()),
            }
            let msg = format!("session {name} for issue #{n}: {}", issue.title);
            ctx.recorder.publish(source, EventType::Normal, "SessionCreated", &msg).await;
        }
        Step::Resume(n) | Step::Stop(n) => {
            let Some(s) = mine.get(n) else { return Ok(()) };
            let mut s = s.clone();
            let resume = matches!(step, Step::Resume(_));
            s.spec.stopped = !resume;
            if resume {
                s.metadata.annotations.remove(STOPPED_BY);
            } else {
                s.metadata.annotations.insert(STOPPED_BY.to_string(), me);
            }
            ctx.store.update_typed(&s).await?;
            let (reason, msg) = if resume {
                ("SessionResumed", format!("session {} resumed: issue #{n} matches again", s.metadata.name))
            } else {
                (
                    "SessionStopped",
                    format!("session {} stopped: issue #{n} is closed or no longer matches", s.metadata.name),
                )
            };
            ctx.recorder.publish(source, EventType::Normal, reason, &msg).await;
        }
        Step::Delete(n) => {
            let Some(s) = mine.get(n) else { return Ok(()) };
            let rv = s.metadata.resource_version.as_deref();
            match ctx.store.delete(Kind::Session, &s.metadata.name, rv, Default::default()).await {
                Ok(Deleted::Gone(_) | Deleted::Terminating(_)) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            let msg = format!("session {} deleted: issue #{n} is closed or no longer matches", s.metadata.name);
            ctx.recorder.publish(source, EventType::Normal, "SessionDeleted", &msg).await;
        }
    }
    Ok(())
}

/// The Session of `issue`, from the source's template; or why it cannot be made.
fn session_for(source: &IssueSource, issue: &Issue) -> Result<Session, (&'static str, String)> {
    let fields = IssueFields {
        number: issue.number,
        reference: issue.reference.trim_start_matches('#').to_string(),
        title: issue.title.clone(),
        body: issue.body.clone(),
        labels: issue.labels.clone(),
        url: issue.url.clone(),
    };
    let name = session_name(&source.metadata.name, issue.number);
    let template = &source.spec.template;
    let mut metadata = ObjectMeta { name: name.clone(), labels: template.labels.clone(), ..Default::default() };
    metadata.annotations.insert(MANAGED_BY.to_string(), source::managed_by(Kind::IssueSource, &source.metadata.name));
    metadata.owner_references.push(OwnerReference {
        api_version: API_VERSION.to_string(),
        kind: Kind::IssueSource.as_str().to_string(),
        name: source.metadata.name.clone(),
        uid: source.metadata.uid.clone().unwrap_or_default(),
        controller: Some(false),
        block_owner_deletion: Some(true),
    });
    let session = Session {
        api_version: API_VERSION.to_string(),
        kind: Kind::Session.as_str().to_string(),
        metadata,
        spec: template.to_spec(&source.spec.project, &fields),
        status: Default::default(),
    };
    let errors = session.validate();
    if errors.is_empty() {
        return Ok(session);
    }
    if let Some(e) = errors.iter().find(|e| e.field == "metadata.name") {
        let msg = format!("the session name {name} for issue #{} is not valid: {}", issue.number, e.message);
        return Err((INVALID_SESSION_NAME, msg));
    }
    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    Err((
        conditions::INVALID_TEMPLATE,
        format!("the template does not make a valid session for issue #{}: {}", issue.number, text.join("; ")),
    ))
}

/// `Ready=True`'s message: how many sessions work, are done, and wait.
fn summary(status: &aoctl_api::IssueSourceStatus, matching: usize) -> String {
    let count = |state: &str| status.sessions.iter().filter(|s| s.state.as_deref() == Some(state)).count();
    let mut msg = format!("{matching} matching open issue(s); {} session(s) working", count(STATE_OPEN));
    let (finished, closed) = (count(STATE_FINISHED), count(STATE_CLOSED));
    if finished > 0 {
        msg.push_str(&format!(", {finished} finished"));
    }
    if closed > 0 {
        msg.push_str(&format!(", {closed} ended"));
    }
    if !status.waiting.is_empty() {
        msg.push_str(&format!("; {} waiting for a place (maxSessions)", status.waiting.len()));
    }
    if !status.held.is_empty() {
        msg.push_str(&format!("; {} held until someone trusted labels them", status.held.len()));
    }
    msg
}

fn ready_of(status: &aoctl_api::IssueSourceStatus) -> Option<(ConditionStatus, String)> {
    aoctl_api::condition::find(&status.conditions, types::READY).map(|c| (c.status, c.reason.clone()))
}

/// Records `Ready=False` with `reason` and looks again after `wait`; the sessions stay as they are.
async fn blocked(
    source: &IssueSource,
    ctx: &Context,
    mut status: aoctl_api::IssueSourceStatus,
    reason: &str,
    message: &str,
    wait: Duration,
) -> Result<Action, Error> {
    let was = ready_of(&source.status);
    set_condition(
        &mut status.conditions,
        Condition::new(types::READY, ConditionStatus::False, reason, message, source.metadata.generation, Time::now()),
    );
    write_status(source, ctx, status).await?;
    if was != Some((ConditionStatus::False, reason.to_string())) {
        ctx.recorder.publish(source, EventType::Warning, reason, message).await;
    }
    Ok(Action::requeue(wait))
}

async fn write_status(source: &IssueSource, ctx: &Context, status: aoctl_api::IssueSourceStatus) -> Result<(), Error> {
    if status == source.status {
        return Ok(());
    }
    let mut written = source.clone();
    written.status = status;
    match ctx.store.update_status_typed(&written).await {
        Ok(_) => Ok(()),
        // Changed meanwhile: the change triggers another pass, which writes it again.
        Err(e) if e.is_conflict() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests;
mod vet;
