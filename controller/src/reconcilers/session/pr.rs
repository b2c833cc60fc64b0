//! The session's pull request: opened when the agent has committed work (`pullRequest.create`),
//! then its checks, reviews and mergeability read from the project's forge — when due, never
//! because the agent's screen changed: at once on a webhook, after the session's own commits, or
//! when a person asks (`aoctl reconcile session`); otherwise at the project's poll interval
//! (faster while checks run or mergeability is being computed, rarer once the project's webhooks
//! have been heard from, slower in proportion when the token's rate budget would not last until
//! its reset, and held back — with `ForgeSynced=False` — when it runs low), never once it is
//! merged or closed. A GitHub project with many sessions reads its open pull requests in one
//! GraphQL query per poll, and a session whose pull request did not change in it reads nothing
//! else. A failing job's log is read once per job and kept while it fails. Reviews and comments
//! count only from authors the project trusts (`forges::Trust`); the others' are kept aside as
//! held, for `reactions` to record. Forge errors become
//! conditions and are retried; they never fail the reconcile.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aoctl_api::condition::types;
use aoctl_api::project::Project;
use aoctl_api::session::{reasons, ChecksState, PullRequestState, ReviewState};
use aoctl_api::source::REQUESTED_AT;
use aoctl_api::{ConditionStatus, EventType, Session, SessionStatus, Time};
use aoctl_forge_types::{flaky_cause, Checks, FailingCheck, Issue, PullRequest, Reviews};
use aoctl_git::repository::GitError;
use aoctl_git::workspace::WorkspaceInfo;

use super::state::{ConflictsUnknown, Facts, LogTail, PrMemo};
use super::{cond, messages, Context, Error, Reconcile};
use crate::forges::{Forge, ForgeError, SharedForge, Trust};
use crate::machine::Machine;

/// A project with at least this many sessions reads its open pull requests in one batch (where
/// the forge has such a query): below it, conditional REST reads cost less.
pub(super) const BATCH_MIN: usize = 8;
/// With webhooks heard from, polls are this many times rarer, and at most this far apart.
const WEBHOOK_STRETCH: u32 = 10;
const WEBHOOK_POLL_MAX: Duration = Duration::from_secs(600);
/// How soon a pull request whose mergeability the forge is still computing is read again.
const MERGEABLE_SOON: Duration = Duration::from_secs(3);
/// How long after its last read a merged or closed pull request is looked at again.
const FINISHED_LOOK: Duration = Duration::from_secs(3600);
/// A log tail that could not be read is tried again after this long.
const LOG_RETRY: Duration = Duration::from_secs(60);

/// The forge side of one reconcile.
pub(super) struct Tracked {
    pub client: Option<SharedForge>,
    pub facts: Option<Arc<Facts>>,
    /// When the webhook that made this reconcile ask the forge arrived.
    pub webhook_at: Option<Instant>,
    /// When to look again; `None` when nothing needs polling.
    pub next: Option<Duration>,
}

fn poll_interval(p: &Project) -> Duration {
    crate::forges::poll_interval(p)
}

fn gh_error(st: &mut SessionStatus, s: &Session, e: &ForgeError, p: &Project) -> Option<Duration> {
    cond(st, s, types::PULL_REQUEST_OPEN, ConditionStatus::Unknown, e.reason(), e.to_string());
    let msg = format!("the last read failed: {e}");
    cond(st, s, types::FORGE_SYNCED, ConditionStatus::False, e.reason(), msg);
    Some(e.retry_after().unwrap_or_else(|| poll_interval(p)).max(Duration::from_secs(1)))
}

/// How many times slower than usual polls go for the forge's token (see `Budget::pace`).
fn pace(forge: &dyn Forge) -> f64 {
    let b = forge.budget();
    b.pace(aoctl_forge_core::CORE).max(b.pace("graphql"))
}

/// Whether the forge's token has budget for polls (above its reserve, which is kept for what
/// webhooks, people and pushes ask for).
fn polls_allowed(forge: &dyn Forge) -> bool {
    let b = forge.budget();
    b.polls_allowed(aoctl_forge_core::CORE) && b.polls_allowed("graphql")
}

/// A duration `factor` times as long, in whole seconds.
fn times(d: Duration, factor: f64) -> Duration {
    Duration::from_secs((d.as_secs_f64() * factor).clamp(1.0, 86_400.0).round() as u64)
}

/// Why polls wait: the token's window, and since when the view is stale.
fn held_message(forge: &dyn Forge, since: aoctl_api::Time) -> String {
    let b = forge.budget();
    let windows = [aoctl_forge_core::CORE, "graphql"].map(|r| (r, b.window(r)));
    let low = windows.iter().filter(|(_, w)| w.remaining.is_some()).min_by_key(|(_, w)| w.remaining);
    let left = match low {
        Some((resource, w)) => {
            let of = w.limit.map(|l| format!(" of {l}")).unwrap_or_default();
            let until = w.reset_at.map(|t| format!(" until {}", aoctl_api::Time(t))).unwrap_or_default();
            format!("{} {resource} requests left{of}{until}", w.remaining.unwrap_or(0))
        }
        None => "little left".to_string(),
    };
    format!(
        "{}'s rate budget for this token is low ({left}): polls wait, while webhooks, pushes and `aoctl reconcile` are still acted on; the view of the pull request is stale since {since}",
        forge.name()
    )
}

/// The log tail of a failing check: read once per job (a re-run is another job) and kept while
/// it fails; a read that failed is tried again after [`LOG_RETRY`].
pub(super) async fn log_tail(
    ctx: &Context,
    session: &str,
    forge: &dyn Forge,
    check: &FailingCheck,
) -> Result<Option<String>, ForgeError> {
    let known = ctx.state.lock().log_tails.get(session).and_then(|m| m.get(&check.id)).cloned();
    if let Some(t) = known {
        if t.tail.is_ok() || t.at.elapsed() < LOG_RETRY {
            return t.tail;
        }
    }
    let tail = forge.failing_log_tail(check).await;
    let kept = LogTail { tail: tail.clone(), at: Instant::now() };
    ctx.state.lock().log_tails.entry(session.to_string()).or_default().insert(check.id, kept);
    tail
}

impl Reconcile<'_> {
    /// Reads the pull request from the forge when a read is due (see the module's words), else
    /// reuses the last answers; opens it first when the session asks for one and there is none.
    pub(super) async fn pull_request(&mut self, ws: &WorkspaceInfo) -> Result<Tracked, Error> {
        let (s, ctx) = (self.s, self.ctx);
        let project = &self.project;
        let asked = s
            .metadata
            .annotations
            .get(REQUESTED_AT)
            .filter(|a| self.st.last_handled_reconcile_at.as_ref() != Some(*a))
            .cloned();
        let client = match ctx.forges.forge(project) {
            Ok(Some(c)) => c,
            Ok(None) => {
                // Nothing to read: a person's request is handled at once.
                if let Some(at) = asked {
                    self.st.last_handled_reconcile_at = Some(at);
                }
                return Ok(Tracked { client: None, facts: None, webhook_at: None, next: None });
            }
            Err(e) => {
                let next = gh_error(self.st, s, &e, project);
                return Ok(Tracked { client: None, facts: None, webhook_at: None, next });
            }
        };
        let name = &s.metadata.name;
        let mut memo = ctx.state.pr_memo(name);
        let now = Instant::now();
        let every = self.poll_every(&*client, memo.facts.as_deref());
        let own_head = ws.head_sha.is_some()
            && ws.head_sha != memo.local_head
            && memo.facts.as_ref().is_some_and(|f| ws.head_sha.as_deref() != Some(f.pr.head_sha.as_str()));
        let due = memo.next_poll.is_none_or(|t| t <= now);
        let urgent = memo.webhook_at.is_some() || asked.is_some() || own_head;
        if !due && !urgent {
            let next = memo.next_poll.map(|t| t - now);
            return Ok(Tracked { client: Some(client), facts: memo.facts, webhook_at: None, next });
        }
        memo.local_head = ws.head_sha.clone();
        if !urgent && !polls_allowed(&*client) {
            // Polls wait for the budget; what a webhook, a person or a push asks for still goes.
            let since = *memo.held_since.get_or_insert_with(aoctl_api::Time::now);
            let msg = held_message(&*client, since);
            cond(self.st, s, types::FORGE_SYNCED, ConditionStatus::False, reasons::FORGE_BUDGET_LOW, msg);
            memo.next_poll = Some(now + every);
            let facts = memo.facts.clone();
            ctx.state.set_pr_memo(name, memo);
            return Ok(Tracked { client: Some(client), facts, webhook_at: None, next: Some(every) });
        }
        let batch = match (urgent, memo.facts.is_some()) {
            (false, true) => self.batch_digest(&*client, &ws.branch, every).await,
            _ => None,
        };
        if let (Some(digest), Some(facts)) = (&batch, &memo.facts) {
            if memo.digest.as_ref() == Some(digest) && facts.pr.state == PullRequestState::Open {
                // The batch shows nothing new about this pull request: nothing else is read.
                memo.next_poll = Some(now + every);
                memo.held_since = None;
                self.synced(&*client, every);
                let facts = memo.facts.clone();
                ctx.state.set_pr_memo(name, memo);
                return Ok(Tracked { client: Some(client), facts, webhook_at: None, next: Some(every) });
            }
        }
        let webhook_at = memo.webhook_at.take();
        let result = self.poll(ws, &*client).await;
        let project = &self.project;
        ctx.forges.refresh_gauge();
        let (facts, next) = match result {
            Ok(Some(f)) => {
                let every = self.poll_every(&*client, Some(&f));
                let next = match f.pr.state {
                    PullRequestState::Merged | PullRequestState::Closed => None,
                    PullRequestState::Open if f.pr.mergeable.is_none() => Some(every.min(MERGEABLE_SOON)),
                    PullRequestState::Open => Some(every),
                };
                self.synced(&*client, every);
                (Some(Arc::new(f)), next)
            }
            Ok(None) => {
                self.synced(&*client, every);
                (None, Some(every))
            }
            Err(e) => (memo.facts.clone(), gh_error(self.st, s, &e, project)),
        };
        if let Some(at) = asked {
            self.st.last_handled_reconcile_at = Some(at);
        }
        let digest = if facts.is_some() { batch } else { None };
        // A merged or closed pull request is not polled again; only a webhook, a new commit or a
        // person's request reads it (the safety look an hour on is in case all of those are lost).
        let next_poll = next.map_or(now + FINISHED_LOOK, |d| now + d);
        ctx.state.set_pr_memo(
            name,
            PrMemo {
                next_poll: Some(next_poll),
                webhook_at: None,
                facts: facts.clone(),
                digest,
                local_head: memo.local_head,
                held_since: None,
            },
        );
        Ok(Tracked { client: Some(client), facts, webhook_at, next })
    }

    /// How long until the next poll: the project's interval — a third of it while checks run and
    /// no webhook has been heard from, ten times it (at most ten minutes) once the project's
    /// webhooks have — slowed by the token's pace.
    fn poll_every(&self, forge: &dyn Forge, facts: Option<&Facts>) -> Duration {
        let base = poll_interval(&self.project);
        let every = if self.ctx.forges.webhooks_work(&self.project.metadata.name) {
            (base * WEBHOOK_STRETCH).min(WEBHOOK_POLL_MAX).max(base)
        } else if facts.is_some_and(|f| f.checks.state == ChecksState::Pending && f.pr.state == PullRequestState::Open)
        {
            (base / 3).max(Duration::from_secs(5))
        } else {
            base
        };
        times(every, pace(forge))
    }

    /// `ForgeSynced=True`, saying how the forge is read.
    fn synced(&mut self, forge: &dyn Forge, every: Duration) {
        let how = if self.ctx.forges.webhooks_work(&self.project.metadata.name) {
            format!(
                "read on {} webhooks, after the session's commits and every {}",
                forge.name(),
                aoctl_api::Duration(every)
            )
        } else {
            format!("read from {} every {} and after the session's commits", forge.name(), aoctl_api::Duration(every))
        };
        cond(self.st, self.s, types::FORGE_SYNCED, ConditionStatus::True, reasons::FORGE_POLLED, how);
    }

    /// The digest the project's batch of open changes shows for `branch`, reading the batch when
    /// it is older than `max_age`; `None` when the forge has no batch, the project is too small
    /// for one, or it could not be read (the session then reads its own).
    async fn batch_digest(&self, forge: &dyn Forge, branch: &str, max_age: Duration) -> Option<String> {
        if !forge.batches() {
            return None;
        }
        let (ctx, project) = (self.ctx, &self.project.metadata.name);
        let sessions = ctx.index.read(&ctx.store, |i| i.sessions(project)).await.ok()?;
        if sessions < BATCH_MIN {
            return None;
        }
        let batch = ctx.state.batch(project);
        let mut batch = batch.lock().await;
        if batch.at.is_none_or(|at| at.elapsed() >= max_age) {
            match forge.open_changes().await {
                Ok(Some(pulls)) => {
                    batch.pulls = pulls.into_iter().map(|p| (p.head_ref.clone(), p)).collect();
                    batch.at = Some(Instant::now());
                }
                Ok(None) => return None,
                Err(e) => {
                    tracing::debug!(error = %e, project, "the batch of open pull requests could not be read");
                    return None;
                }
            }
        }
        Some(batch.pulls.get(branch).map_or_else(|| "absent".to_string(), |p| p.digest.clone()))
    }

    async fn poll(&mut self, ws: &WorkspaceInfo, c: &dyn Forge) -> Result<Option<Facts>, ForgeError> {
        let (s, ctx) = (self.s, self.ctx);
        let want = s.spec.pull_request.clone().unwrap_or_default();
        let mut pr = c.find_for_branch(&ws.branch).await?;
        if pr.is_none() && want.create {
            pr = self.open(ws, c, want.draft).await?;
        }
        let st = &mut *self.st;
        let Some(mut pr) = pr else {
            if !want.create {
                cond(
                    st,
                    s,
                    types::PULL_REQUEST_OPEN,
                    ConditionStatus::False,
                    "NoPullRequest",
                    "no pull request for the branch",
                );
            }
            st.pull_request = None;
            return Ok(None);
        };
        // The agent committed but did not push: push for it, never forcing.
        if want.create && pr.state == PullRequestState::Open && ws.head_sha.as_deref().is_some_and(|h| h != pr.head_sha)
        {
            match push(&ctx.machine, ws).await {
                Ok(()) => pr = c.change(pr.number).await?,
                Err((_, e)) => tracing::debug!(error = %e, session = %s.metadata.name, "push failed"),
            }
        }
        let checks = c.checks(&pr.head_sha).await?;
        // Only the logs of jobs that still fail are kept.
        if let Some(tails) = ctx.state.lock().log_tails.get_mut(&s.metadata.name) {
            tails.retain(|id, _| checks.failing.iter().any(|f| f.id == *id));
        }
        let checks = self.rerun_flaky(c, &pr, checks).await;
        let st = &mut *self.st;
        // Only what the project's trusted authors wrote counts and may reach the agent.
        let review_envs: Vec<&str> = [s.spec.review.as_ref(), self.project.spec.review.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|r| r.token_env.as_deref())
            .collect();
        let trust = Trust::of(&self.project, c, &ctx.forges, &review_envs).await;
        let (reviews, untrusted) = trust.split(c, c.reviews(pr.number).await?);
        let held = messages::held_comments(&untrusted, Time::now());
        let conflicts = if pr.state == PullRequestState::Open && pr.has_conflicts() {
            let known = ctx.state.pr_memo(&s.metadata.name).facts.and_then(|f| match &f.conflicts {
                Some(Ok(files)) if f.pr.head_sha == pr.head_sha && f.pr.base_sha == pr.base_sha => Some(files.clone()),
                _ => None,
            });
            match known {
                Some(files) => Some(Ok(files)),
                None => Some(conflicting_files(&ctx.machine, ws, &pr).await),
            }
        } else {
            None
        };
        let before = st.pull_request.clone();
        st.pull_request = Some(pr.status(checks.state, reviews.state));
        set_conditions(s, st, &pr, &checks, &reviews);
        if before.as_ref().map(|b| b.state) != Some(pr.state) && pr.state != PullRequestState::Open {
            let what = if pr.state == PullRequestState::Merged { "Merged" } else { "PullRequestClosed" };
            ctx.recorder
                .publish(s, EventType::Normal, what, &format!("pull request #{} is {}", pr.number, pr.state))
                .await;
        }
        Ok(Some(Facts { pr, checks, reviews, held, conflicts, at: Instant::now() }))
    }
    /// With `ci-failed: {rerunFailedJobs: n}`, re-runs each failed CI job the forge can re-run (GitHub Actions) whose log shows
    /// a lost runner, a timeout or a network error, up to `n` times per job and head commit, and says
    /// so in a `JobRerun` event. A re-run job counts as pending rather than failing, so the agent is
    /// not woken for it; a failure that does not look flaky, or one re-run `n` times, stays failing.
    async fn rerun_flaky(&mut self, c: &dyn Forge, pr: &PullRequest, mut checks: Checks) -> Checks {
        let (s, ctx, project, st) = (self.s, self.ctx, &self.project, &mut *self.st);
        let limit =
            aoctl_api::reactions::Reactions::effective(project.spec.reactions.as_ref(), s.spec.reactions.as_ref())
                .ci_failed
                .and_then(|r| r.rerun_failed_jobs)
                .unwrap_or(0);
        if limit == 0 || checks.state != ChecksState::Failing || pr.state != PullRequestState::Open {
            return checks;
        }
        let sha = pr.head_sha.clone();
        let mut rerun = vec![];
        for check in checks.failing.iter().filter(|f| c.can_rerun(f)) {
            let done = st.feedback.as_ref().map_or(0, |f| f.reruns_of(&sha, &check.name));
            if done >= limit {
                continue;
            }
            let Ok(Some(tail)) = log_tail(ctx, &s.metadata.name, c, check).await else { continue };
            let Some(cause) = flaky_cause(&tail) else { continue };
            match c.rerun_job(check.id).await {
                Ok(()) => {
                    st.feedback.get_or_insert_default().count_rerun(&sha, &check.name);
                    let msg = format!(
                        "re-ran job {} (id {}) of PR #{}, re-run {} of {limit}: its log shows {cause}",
                        check.name,
                        check.id,
                        pr.number,
                        done + 1
                    );
                    ctx.recorder.publish(s, EventType::Normal, "JobRerun", &msg).await;
                    rerun.push(check.id);
                }
                Err(e) => {
                    let msg = format!("re-run of job {} (id {}) failed: {e}", check.name, check.id);
                    ctx.recorder.publish(s, EventType::Warning, e.reason(), &msg).await;
                }
            }
        }
        if !rerun.is_empty() {
            checks.failing.retain(|f| !rerun.contains(&f.id));
            if checks.failing.is_empty() {
                checks.state = ChecksState::Pending;
            }
        }
        checks
    }
    /// Opens the pull request once the agent has committed work, pushing its branch first.
    async fn open(
        &mut self,
        ws: &WorkspaceInfo,
        c: &dyn Forge,
        draft: bool,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let (s, ctx, project, st) = (self.s, self.ctx, &self.project, &mut *self.st);
        let base = project.status.default_branch.clone().unwrap_or_else(|| "main".into());
        let (root, branch, b) = (branch_repo(ws), ws.branch.clone(), base.clone());
        let machine = ctx.machine.clone();
        let ahead = tokio::task::spawn_blocking(move || machine.branches().ahead(&root, &branch, &b)).await;
        if !matches!(ahead, Ok(Ok(n)) if n > 0) {
            let msg = format!("waiting for the agent to commit on {} (nothing ahead of {base} yet)", ws.branch);
            cond(st, s, types::PULL_REQUEST_OPEN, ConditionStatus::False, "NoCommits", msg);
            return Ok(None);
        }
        if let Err((reason, message)) = push(&ctx.machine, ws).await {
            cond(st, s, types::PULL_REQUEST_OPEN, ConditionStatus::False, reason, message);
            return Ok(None);
        }
        let prompt = s.spec.prompt.clone().unwrap_or_default();
        let first = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        let title = if first.is_empty() {
            format!("{}: work from aoctl", s.metadata.name)
        } else {
            first.chars().take(72).collect()
        };
        let mut body = prompt.clone();
        if let Some(issue) = &s.spec.issue {
            let tracker = ctx.forges.tracker(project).ok().flatten();
            let tracker: &dyn crate::forges::Tracker = match &tracker {
                Some(t) => t.as_ref(),
                None => c,
            };
            body.push_str(&format!("\n\n{}", tracker.closing_line(issue)));
        }
        body.push_str(&format!("\n\n_Opened by aoctl for session `{}`._", s.metadata.name));
        let pr = c.create(&ws.branch, &base, &title, &body, draft).await?;
        ctx.recorder.publish(s, EventType::Normal, "PullRequestCreated", &format!("#{} {}", pr.number, pr.url)).await;
        Ok(Some(pr))
    }
    /// Reads the session's issue at most once per poll interval (conditionally, so an unchanged
    /// issue costs a `304`) and sets `IssueOpen`: `True` while it is open, `False` with reason
    /// `IssueClosed` once it is closed, `Unknown` while the tracker cannot be read.
    pub(super) async fn issue(&mut self) -> IssueRead {
        let (s, ctx, project, st) = (self.s, self.ctx, &self.project, &mut *self.st);
        let Some(reference) = s.spec.issue.as_deref() else { return IssueRead::Unread };
        let tracker = match ctx.forges.tracker(project) {
            Ok(Some(t)) => t,
            Ok(None) => return IssueRead::Unread,
            Err(e) => {
                cond(st, s, types::ISSUE_OPEN, ConditionStatus::Unknown, e.reason(), e.to_string());
                return IssueRead::Unavailable;
            }
        };
        let name = &s.metadata.name;
        let known = ctx.state.lock().issues.get(name).cloned();
        if let Some((at, issue)) = &known {
            if at.elapsed() < poll_interval(project) {
                return IssueRead::Read(issue.clone());
            }
        }
        match tracker.issue(reference).await {
            Ok(issue) => {
                let issue = Arc::new(issue);
                let (status, reason, what) = if issue.open {
                    (ConditionStatus::True, "Open", "open")
                } else {
                    (ConditionStatus::False, reasons::ISSUE_CLOSED, "closed")
                };
                let title: String = issue.title.chars().take(100).collect();
                let shown = display_reference(&issue.reference);
                cond(st, s, types::ISSUE_OPEN, status, reason, format!("issue {shown} is {what}: {title}"));
                ctx.state.lock().issues.insert(name.clone(), (Instant::now(), issue.clone()));
                IssueRead::Read(issue)
            }
            Err(e) => {
                cond(st, s, types::ISSUE_OPEN, ConditionStatus::Unknown, e.reason(), e.to_string());
                match known {
                    Some((_, issue)) => IssueRead::Read(issue),
                    None => IssueRead::Unavailable,
                }
            }
        }
    }
}

pub(super) use aoctl_api::issuesource::display_reference;

/// The files that conflict between the pull request's head and its base, computed with libgit2
/// in the session's repository after fetching the base from `origin` (and the head too, when it
/// was pushed from elsewhere).
async fn conflicting_files(
    machine: &Arc<dyn Machine>,
    ws: &WorkspaceInfo,
    pr: &PullRequest,
) -> Result<Vec<String>, ConflictsUnknown> {
    let (root, base, head, head_ref) = (branch_repo(ws), pr.base_ref.clone(), pr.head_sha.clone(), pr.head_ref.clone());
    let machine = machine.clone();
    let work = move || -> Result<Vec<String>, GitError> {
        let git = machine.branches();
        let base = git.fetch_branch(&root, "origin", &base)?;
        match git.conflicting_files(&root, &head, &base) {
            Ok(files) => Ok(files),
            Err(_) => {
                let head = git.fetch_branch(&root, "origin", &head_ref)?;
                git.conflicting_files(&root, &head, &base)
            }
        }
    };
    Ok(tokio::task::spawn_blocking(work).await??)
}

fn set_conditions(s: &Session, st: &mut SessionStatus, pr: &PullRequest, checks: &Checks, reviews: &Reviews) {
    use ConditionStatus::*;
    let n = pr.number;
    match pr.state {
        PullRequestState::Open => cond(st, s, types::PULL_REQUEST_OPEN, True, "Open", format!("#{n} {}", pr.url)),
        PullRequestState::Merged => cond(st, s, types::PULL_REQUEST_OPEN, False, "Merged", format!("#{n} was merged")),
        PullRequestState::Closed => cond(st, s, types::PULL_REQUEST_OPEN, False, "Closed", format!("#{n} was closed")),
    }
    let failing: Vec<&str> = checks.failing.iter().map(|f| f.name.as_str()).collect();
    let (cs, cr, cm) = match checks.state {
        ChecksState::Passing => (True, "ChecksPassing", "every check passed".to_string()),
        ChecksState::Failing => (False, "ChecksFailing", format!("failing: {}", failing.join(", "))),
        ChecksState::Pending => (Unknown, "ChecksPending", "checks are running".to_string()),
        ChecksState::None => (Unknown, "NoChecks", "no checks reported for the head commit".to_string()),
    };
    cond(st, s, types::CHECKS_PASSED, cs, cr, cm);
    let (rs, rr) = match reviews.state {
        ReviewState::Approved => (True, "Approved"),
        ReviewState::ChangesRequested => (False, "ChangesRequested"),
        ReviewState::Pending => (Unknown, "ReviewPending"),
        ReviewState::None => (Unknown, "NoReviews"),
    };
    cond(st, s, types::REVIEW_APPROVED, rs, rr, "");
    let merged = pr.state == PullRequestState::Merged;
    cond(st, s, types::MERGED, if merged { True } else { False }, if merged { "Merged" } else { "NotMerged" }, "");
}

/// The repository the session's branch is read and pushed from: the main repository for a
/// sandboxed checkout (never the sandbox, whose config and hooks are the agent's), else the workspace.
pub(super) fn branch_repo(ws: &WorkspaceInfo) -> std::path::PathBuf {
    ws.sandbox.as_ref().map_or_else(|| ws.path.clone(), |sb| sb.repo.clone())
}

/// Pushes the session's branch to `origin` (never forced); on failure a condition reason and message.
async fn push(machine: &Arc<dyn Machine>, ws: &WorkspaceInfo) -> Result<(), (&'static str, String)> {
    let (path, branch, machine) = (branch_repo(ws), ws.branch.clone(), machine.clone());
    match tokio::task::spawn_blocking(move || machine.branches().push(&path, "origin", &branch)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err((e.reason(), e.to_string())),
        Err(e) => Err(("PushFailed", e.to_string())),
    }
}

/// What is known of the session's tracker issue (`spec.issue`).
pub(super) enum IssueRead {
    /// No issue, or no tracker to read it from (a project without a forge), or a
    /// reference without a number: the prompt names it only.
    Unread,
    /// Read now or at most a poll interval ago.
    Read(Arc<Issue>),
    /// The tracker did not answer and the issue was never read; the condition says why.
    Unavailable,
}
