//! Reactions: each distinct PR or agent event is acted on exactly once — typed into the agent with
//! its evidence, sent to the notifiers, or merged — keyed by a fingerprint recorded in
//! `status.reactions`. Events group into episodes (a ci-failed episode lasts until checks pass on
//! a head, across the agent's pushes); `attempts` counts the messages of the episode, and after
//! `retries` more than the first, or `escalateAfter` from its start, it escalates once. A message
//! carries a marker (`[aoctl:ci-failed:1a2b3c4d]`) that is looked for in the transcript before
//! sending, so a controller that crashed between sending and recording neither repeats nor
//! forgets; it is typed through the session's one typing path ([`crate::typing`]), never into a
//! screen that waits for a person. Notifications and merges are recorded in status here and
//! carried out by `effects` after that status is written. Comments of authors the project does
//! not trust are never typed: they are recorded once, held for a person (`status.heldComments`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aoctl_api::condition::{self, types};
use aoctl_api::notification::MergeStatus;
use aoctl_api::project::Project;
use aoctl_api::reactions::{MergeMethod, Reaction, ReactionAction, Reactions};
use aoctl_api::review::{self, ReviewSpec};
use aoctl_api::session::{
    reasons, ActivityState, ChecksState, HeldComment, PullRequestState, ReactionStatus, ReviewState,
};
use aoctl_api::{ConditionStatus, EventType, Session, SessionStatus, Time};
use aoctl_forge_types::FailingCheck;
use aoctl_runtimes::Handle;
use sha2::{Digest, Sha256};

use super::effects::MERGED;
use super::pr::{log_tail, Tracked};
use super::state::Facts;
use super::{messages, typed_agent, Context as Ctx, Error, Reconcile};
use crate::notifiers;
use crate::typing::{How, Keyboard, Typed, What};

/// One reaction whose condition holds now.
struct Due {
    key: &'static str,
    fingerprint: String,
    title: String,
    evidence: String,
    /// The reviews, comments and reviewers' verdicts the message passes on, remembered once it is
    /// delivered.
    ids: Option<Passed>,
    /// For a CI failure: the failing checks whose log tails make the evidence, read only when
    /// the event is acted on (see [`ci_evidence`]).
    failing: Vec<FailingCheck>,
}

/// What a changes-requested message passes on: forge reviews and comments by id, and the
/// recorded verdicts of reviewer sessions by name.
#[derive(Debug, Default)]
struct Passed {
    reviews: Vec<u64>,
    comments: Vec<u64>,
    reviewers: Vec<String>,
}

/// How many failing checks' logs a CI-failure message carries.
const LOGS_PER_MESSAGE: usize = 3;

fn config<'a>(r: &'a Reactions, key: &str) -> Option<&'a Reaction> {
    match key {
        "ci-failed" => r.ci_failed.as_ref(),
        "changes-requested" => r.changes_requested.as_ref(),
        "merge-conflicts" => r.merge_conflicts.as_ref(),
        "approved-and-green" => r.approved_and_green.as_ref(),
        "agent-stuck" => r.agent_stuck.as_ref(),
        "agent-needs-input" => r.agent_needs_input.as_ref(),
        "agent-exited" => r.agent_exited.as_ref(),
        "pr-closed" => r.pr_closed.as_ref(),
        "overlap" => r.overlap.as_ref(),
        _ => None,
    }
}

fn short(fp: &str) -> String {
    hex::encode(&Sha256::digest(fp.as_bytes())[..4])
}

fn action_name(a: ReactionAction) -> &'static str {
    match a {
        ReactionAction::SendToAgent => "send-to-agent",
        ReactionAction::Notify => "notify",
        ReactionAction::Merge => "merge",
    }
}

/// The reactions whose conditions hold, with the evidence for their messages (a CI failure's log
/// tails are read later, and only for an event that is acted on). No IO.
fn due(s: &Session, review: Option<&ReviewSpec>, st: &SessionStatus, tracked: &Tracked) -> Vec<Due> {
    let mut out = vec![];
    if let Some(f) = tracked.facts.as_deref() {
        // With a review gate, the merge waits for the reviewers to approve this very head.
        let gate = review::gate_open(review, st.review.as_ref(), &f.pr.head_sha);
        pr_due(f, review, st, tracked, gate, &mut out);
    }
    if let Some(a) = &st.activity {
        let since = a.since.to_string();
        match a.state {
            ActivityState::Stuck => out.push(Due {
                key: "agent-stuck",
                fingerprint: since,
                title: format!("session {} is stuck", s.metadata.name),
                evidence: a.evidence.clone(),
                ids: None,
                failing: vec![],
            }),
            // A question asked through `aoctl mcp` told the notifiers itself, once.
            ActivityState::NeedsInput if st.agent.as_ref().is_some_and(|a| a.question.is_some()) => {}
            ActivityState::NeedsInput => out.push(Due {
                key: "agent-needs-input",
                fingerprint: since,
                title: format!("session {} needs input", s.metadata.name),
                evidence: a.evidence.clone(),
                ids: None,
                failing: vec![],
            }),
            _ => {}
        }
    }
    if let Some(c) = condition::find(&st.conditions, types::RUNTIME_READY) {
        if c.reason == reasons::AGENT_EXITED {
            let started = st.runtime.as_ref().and_then(|r| r.started_at).map(|t| t.to_string()).unwrap_or_default();
            out.push(Due {
                key: "agent-exited",
                fingerprint: started,
                title: format!("the agent of session {} exited", s.metadata.name),
                evidence: c.message.clone(),
                ids: None,
                failing: vec![],
            });
        }
    }
    out.extend(overlap_due(s, st));
    out
}

/// `overlap`: the branch changes files other live sessions change too; one event per distinct
/// set of sessions and files.
fn overlap_due(s: &Session, st: &SessionStatus) -> Option<Due> {
    let c = condition::find(&st.conditions, types::OVERLAPPING).filter(|c| c.status == ConditionStatus::True)?;
    let others: Vec<&str> = st.overlaps.iter().map(|o| o.session.as_str()).collect();
    Some(Due {
        key: "overlap",
        fingerprint: super::overlap::fingerprint(&st.overlaps),
        title: format!("session {} changes the same files as {}", s.metadata.name, others.join(", ")),
        evidence: c.message.clone(),
        ids: None,
        failing: vec![],
    })
}

fn pr_due(
    f: &Facts,
    review: Option<&ReviewSpec>,
    st: &SessionStatus,
    tracked: &Tracked,
    gate: bool,
    out: &mut Vec<Due>,
) {
    let pr = &f.pr;
    let n = pr.number;
    let name = |long: bool| match &tracked.client {
        Some(forge) => forge.change_name(n, long),
        None if long => format!("pull request #{n}"),
        None => format!("PR #{n}"),
    };
    if pr.state == PullRequestState::Closed {
        out.push(Due {
            key: "pr-closed",
            fingerprint: n.to_string(),
            title: format!("{} was closed without merging", name(true)),
            evidence: pr.url.clone(),
            ids: None,
            failing: vec![],
        });
    }
    if pr.state != PullRequestState::Open {
        return;
    }
    if f.checks.state == ChecksState::Failing {
        let names: Vec<&str> = f.checks.failing.iter().map(|c| c.name.as_str()).collect();
        out.push(Due {
            key: "ci-failed",
            fingerprint: format!("{}:{}", pr.head_sha, f.checks.fingerprint()),
            title: format!(
                "CI failed on {} for {}: {}",
                &pr.head_sha[..pr.head_sha.len().min(7)],
                name(false),
                names.join(", ")
            ),
            evidence: String::new(),
            ids: None,
            failing: f.checks.failing.iter().take(LOGS_PER_MESSAGE).cloned().collect(),
        });
    }
    // The forge's reviews and the recorded verdicts of the reviewer sessions on this head.
    let state = review::effective_state(f.reviews.state, review, st.review.as_ref(), &pr.head_sha);
    if state == ReviewState::ChangesRequested {
        let mut users: Vec<String> = vec![];
        let asking = f.reviews.items.iter().filter(|r| r.state.eq_ignore_ascii_case("CHANGES_REQUESTED"));
        let verdicts: Vec<&aoctl_api::review::ReviewerVerdict> =
            st.review.iter().flat_map(|rs| rs.changes_requested_on(&pr.head_sha)).collect();
        let names = asking.map(|r| r.user.clone()).chain(verdicts.iter().map(|v| v.session.clone()));
        for user in names {
            if !users.contains(&user) {
                users.push(user);
            }
        }
        let title = format!("changes requested on {} by {}", name(false), users.join(", "));
        // Only what was not passed on yet; with nothing new the episode goes on unchanged. What
        // the reviewer sessions posted comes from their recorded verdicts, not again from the forge.
        let forge_new = messages::new_feedback(&messages::without_reviewer_posts(&f.reviews), st.feedback.as_ref());
        let passed_on =
            |session: &str| st.feedback.as_ref().is_some_and(|fb| fb.reviewers.iter().any(|r| r == session));
        let fresh: Vec<&&aoctl_api::review::ReviewerVerdict> =
            verdicts.iter().filter(|v| !passed_on(&v.session)).collect();
        if forge_new.is_some() || !fresh.is_empty() {
            let mut passed = Passed::default();
            let mut blocks = vec![];
            let mut fingerprint = vec![];
            if let Some(new) = forge_new {
                fingerprint.push(new.fingerprint());
                blocks.push(new.text);
                (passed.reviews, passed.comments) = (new.reviews, new.comments);
            }
            for v in fresh {
                fingerprint.push(format!("s{}", v.session));
                blocks.push(messages::reviewer_feedback(v));
                passed.reviewers.push(v.session.clone());
            }
            out.push(Due {
                key: "changes-requested",
                fingerprint: fingerprint.join(","),
                title,
                evidence: blocks.join("\n"),
                ids: Some(passed),
                failing: vec![],
            });
        } else if let Some(last) = st.reactions.get("changes-requested").and_then(|r| r.last_fingerprint.clone()) {
            out.push(Due {
                key: "changes-requested",
                fingerprint: last,
                title,
                evidence: String::new(),
                ids: None,
                failing: vec![],
            });
        }
    }
    if pr.has_conflicts() {
        out.push(Due {
            key: "merge-conflicts",
            fingerprint: format!("{}:{}", pr.base_ref, pr.head_sha),
            title: format!("{} has merge conflicts with {}", name(false), pr.base_ref),
            evidence: messages::conflicts(&pr.base_ref, f.conflicts.as_ref()),
            ids: None,
            failing: vec![],
        });
    }
    if f.checks.state == ChecksState::Passing && state == ReviewState::Approved && pr.mergeable == Some(true) && gate {
        out.push(Due {
            key: "approved-and-green",
            fingerprint: pr.head_sha.clone(),
            title: format!("{} is approved and green", name(false)),
            evidence: pr.url.clone(),
            ids: None,
            failing: vec![],
        });
    }
}

fn message(d: &Due, cfg: &Reaction) -> String {
    let marker = format!("[aoctl:{}:{}]", d.key, short(&d.fingerprint));
    let body = match &cfg.message {
        Some(t) => t.replace("{evidence}", d.evidence.trim_end()),
        None => {
            let ask = match d.key {
                "ci-failed" => "Please fix the failure and push.",
                "changes-requested" => "Please address the review comments and push.",
                "merge-conflicts" => "Please resolve the conflicts and push.",
                _ => "",
            };
            format!("{}\n{}\n{ask}", d.title, d.evidence.trim_end())
        }
    };
    format!("{marker} {}", body.trim_end())
}

/// Whether an episode of `key` with no event due now is still open: a ci-failed episode lasts
/// while the PR is open and its checks have not passed (a pushed head whose checks are pending or
/// not yet reported does not end it); a merge-conflicts episode lasts while GitHub is still
/// computing mergeability. The others end as soon as their condition no longer holds. While the
/// pull request is not known (GitHub unavailable, or not read yet since a restart), an episode
/// about it is not known to be resolved either: it lasts.
fn lasts(key: &str, facts: Option<&Facts>) -> bool {
    let Some(f) = facts else { return PR_KEYS.contains(&key) };
    if f.pr.state != PullRequestState::Open {
        return false;
    }
    match key {
        "ci-failed" => f.checks.state != ChecksState::Passing,
        "merge-conflicts" => f.pr.mergeable.is_none(),
        _ => false,
    }
}

/// The reactions to events of the pull request.
const PR_KEYS: &[&str] = &["ci-failed", "changes-requested", "merge-conflicts", "approved-and-green", "pr-closed"];

/// What one reconcile does about a reaction, decided with no IO by [`plan`].
#[derive(Debug, PartialEq)]
enum Decision {
    /// A new event of the episode of `key` to act on: a message, a notification or a merge.
    Act(&'static str),
    /// The episode of `key` escalates now, for `why`; `event` when a due event made it.
    Escalate { key: String, why: String, event: bool },
}

/// The episode rules of one reconcile, given the events due now (key and fingerprint): ends the
/// episodes whose condition is resolved, begins those of keys due for the first time, and decides
/// on each new event and each open episode's `escalateAfter`. Returns the decisions in order and
/// how soon a timer needs another look. An escalation is recorded in `reactions` here; an act is
/// recorded by [`delivered`] once it is carried out.
fn plan(
    reactions: &mut BTreeMap<String, ReactionStatus>,
    due: &[(&'static str, &str)],
    all: &Reactions,
    facts: Option<&Facts>,
    now: Time,
) -> (Vec<Decision>, Option<Duration>) {
    // An episode ends when its condition is resolved; the next occurrence starts a new one.
    reactions.retain(|k, _| due.iter().any(|(d, _)| d == k) || lasts(k, facts));
    let mut out = vec![];
    let mut next = None;
    for (key, fingerprint) in due {
        let Some(cfg) = config(all, key) else { continue };
        let rs = reactions.entry(key.to_string()).or_default();
        if rs.episode.is_none() {
            rs.episode = Some(episode_id(key, now, fingerprint));
            rs.since = Some(now);
        }
        if rs.last_fingerprint.as_deref() != Some(fingerprint) {
            let limit = cfg.retries.map(|r| r + 1);
            if action_of(cfg) == ReactionAction::SendToAgent && limit.is_some_and(|l| rs.attempts >= l) {
                // The agent had its messages and the condition came back: a person is told, once.
                rs.last_fingerprint = Some(fingerprint.to_string());
                if !rs.escalated {
                    rs.escalated = true;
                    let why = format!("still unresolved after {} messages to the agent", rs.attempts);
                    out.push(Decision::Escalate { key: key.to_string(), why, event: true });
                }
            } else {
                out.push(Decision::Act(key));
            }
        }
    }
    // Every open episode, with a new event or not (a pushed fix whose checks have not reported).
    for (key, rs) in reactions.iter_mut() {
        let Some(after) = config(all, key).and_then(|c| c.escalate_after) else { continue };
        let (Some(since), false) = (rs.since, rs.escalated) else { continue };
        let waited = (now.0 - since.0).to_std().unwrap_or_default();
        if waited >= after.as_std() {
            rs.escalated = true;
            let event = due.iter().any(|(d, _)| d == key);
            out.push(Decision::Escalate { key: key.clone(), why: format!("unresolved for {after}"), event });
        } else {
            next = min(next, after.as_std() - waited);
        }
    }
    (out, next)
}

/// Records in the episode that its event `fingerprint` was acted on at `now`.
fn delivered(rs: &mut ReactionStatus, fingerprint: &str, now: Time) {
    rs.attempts += 1;
    rs.last_fingerprint = Some(fingerprint.to_string());
    rs.last_at = Some(now);
}

/// The action a reaction takes.
fn action_of(cfg: &Reaction) -> ReactionAction {
    if cfg.auto == Some(false) {
        // Not automatic: a person decides, so they are told.
        return ReactionAction::Notify;
    }
    cfg.action.unwrap_or(ReactionAction::Notify)
}

/// A new episode's id: short, and different for every episode of one key.
fn episode_id(key: &str, now: Time, fingerprint: &str) -> String {
    short(&format!("{key}/{now}/{fingerprint}"))
}

/// The idempotency key of one notification: session uid, reaction, episode and kind.
fn event_key(s: &Session, key: &str, rs: &ReactionStatus, kind: &str) -> String {
    let uid = s.metadata.uid.as_deref().unwrap_or(&s.metadata.name);
    format!("{uid}:{key}:{}:{kind}", rs.episode.as_deref().unwrap_or("-"))
}

impl Reconcile<'_> {
    /// Decides on every due reaction and on the episodes still open; returns how soon a timer
    /// (escalation) needs another look. Notifications and merges are only recorded here, in the
    /// status: they are carried out (`effects`) once the status that records them is written, and
    /// what is counted in the metrics goes to the tally, counted then too.
    pub(super) async fn reactions(&mut self, tracked: &Tracked) -> Result<Option<Duration>, Error> {
        let (s, ctx) = (self.s, self.ctx);
        hold(s, tracked, ctx, self.st).await;
        let all = Reactions::effective(self.project.spec.reactions.as_ref(), s.spec.reactions.as_ref());
        let now = Time::now();
        let review = s.spec.review.as_ref().or(self.project.spec.review.as_ref());
        let mut due = due(s, review, self.st, tracked);
        if !due.is_empty() {
            let keys: Vec<&str> = due.iter().map(|d| d.key).collect();
            tracing::debug!(due = ?keys, "reactions due");
        }
        let events: Vec<(&'static str, &str)> = due.iter().map(|d| (d.key, d.fingerprint.as_str())).collect();
        let mut reactions = std::mem::take(&mut self.st.reactions);
        let (decisions, mut next) = plan(&mut reactions, &events, &all, tracked.facts.as_deref(), now);
        self.st.reactions = reactions;
        for decision in &decisions {
            // A CI failure's log tails are read only for an event that is acted on.
            let key = match decision {
                Decision::Act(key) => *key,
                Decision::Escalate { key, event: true, .. } => key.as_str(),
                Decision::Escalate { .. } => continue,
            };
            if let Some(d) = due.iter_mut().find(|d| d.key == key) {
                ci_evidence(s, tracked, ctx, d).await;
            }
        }
        for decision in decisions {
            match decision {
                Decision::Act(key) => {
                    let (Some(d), Some(cfg)) = (due.iter().find(|d| d.key == key), config(&all, key)) else { continue };
                    let Some(mut rs) = self.st.reactions.remove(key) else { continue };
                    if let Some(again) = self.act(tracked, d, cfg, &mut rs).await {
                        next = min(next, again);
                    }
                    self.st.reactions.insert(key.to_string(), rs);
                }
                Decision::Escalate { key, why, event } => {
                    let d = due.iter().find(|d| d.key == key).filter(|_| event);
                    self.escalate(&key, d, &why);
                }
            }
        }
        refused_merge(s, self.st);
        Ok(next)
    }

    /// Acts on a new event of an episode: types it into the agent, records a notification, or
    /// records a merge. How soon to look again when it could not be done now.
    async fn act(&mut self, tracked: &Tracked, d: &Due, cfg: &Reaction, rs: &mut ReactionStatus) -> Option<Duration> {
        let (s, ctx) = (self.s, self.ctx);
        let now = Time::now();
        let action = action_of(cfg);
        let label = action_name(action);
        let done = match action {
            ReactionAction::SendToAgent => self.send(tracked, d, cfg).await,
            ReactionAction::Notify => {
                let kind = format!("notify-{}", rs.attempts + 1);
                let n = notifiers::record(
                    event_key(s, d.key, rs, &kind),
                    d.key,
                    d.title.clone(),
                    d.evidence.clone(),
                    pr_url(self.st),
                    false,
                    &self.project.spec.notifiers,
                );
                if let Some(n) = n {
                    notifiers::enqueue(&mut self.st.notifications, n);
                }
                Ok(true)
            }
            ReactionAction::Merge => Ok(decide_merge(self.st, tracked, cfg, now)),
        };
        match done {
            Ok(true) => {
                if action != ReactionAction::Merge {
                    self.tally.add(d.key, label, "success");
                }
                if let Some(p) = &d.ids {
                    let fb = self.st.feedback.get_or_insert_default();
                    fb.remember(&p.reviews, &p.comments);
                    fb.remember_reviewers(&p.reviewers);
                }
                delivered(rs, &d.fingerprint, now);
                None
            }
            // Not deliverable yet (no running agent): the reaction stays due.
            Ok(false) => Some(Duration::from_secs(5)),
            Err(e) => {
                // A failure happened whether or not the status is written: counted at once.
                ctx.metrics.reactions.with_label_values(&[d.key, label, "error"]).inc();
                ctx.recorder.publish(s, EventType::Warning, "ReactionFailed", &format!("{}: {e}", d.key)).await;
                Some(Duration::from_secs(10))
            }
        }
    }

    /// Records the episode's one escalation to the notifiers in the status (decided by [`plan`]).
    fn escalate(&mut self, key: &str, d: Option<&Due>, why: &str) {
        let s = self.s;
        let st = &mut *self.st;
        let Some(rs) = st.reactions.get(key) else { return };
        let event = event_key(s, key, rs, "escalation");
        self.tally.add(key, "notify", "escalated");
        let evidence = d.map(|d| d.evidence.clone()).unwrap_or_default();
        let n = notifiers::record(
            event,
            key,
            escalation_title(s, key, d, why),
            evidence,
            pr_url(st),
            true,
            &self.project.spec.notifiers,
        );
        if let Some(n) = n {
            notifiers::enqueue(&mut st.notifications, n);
        }
    }

    /// Types the reaction's message into the agent unless its marker is already in the transcript,
    /// through the session's one typing path ([`crate::typing`]): after the first prompt and the
    /// queued messages of `aoctl send`, never into a screen that waits for a person.
    async fn send(&mut self, tracked: &Tracked, d: &Due, cfg: &Reaction) -> Result<bool, Error> {
        let (s, ctx) = (self.s, self.ctx);
        let st = &*self.st;
        let running = condition::is_true(&st.conditions, types::RUNTIME_READY);
        let Some(rt_status) = st.runtime.clone().filter(|_| running && !s.spec.stopped) else { return Ok(false) };
        if st.activity.as_ref().is_some_and(|a| a.state == ActivityState::RateLimited) {
            // Typed now it would be lost or spend the limit's first minutes: it waits for the resume.
            return Ok(false);
        }
        let text = message(d, cfg);
        let marker = text.split_whitespace().next().unwrap_or_default();
        let rt = ctx.machine.runtime_for(s, Some(&self.project), rt_status.kind).await?;
        let h = Handle(rt_status.handle.clone());
        let held = st.activity.as_ref().is_some_and(|a| a.state == ActivityState::NeedsInput);
        let event = Some(format!("{}: {}", d.key, d.title));
        let how = How { marker: Some(marker), in_turn: true, held, event, ..How::of(What::Marked) };
        let typed = {
            let agent = typed_agent(s, ctx, &self.project, &*rt, &h, rt_status.kind);
            Keyboard::lock(ctx.machine.typing(), agent).await.type_in(&text, &how).await?
        };
        match typed {
            Typed::Before => Ok(true),
            // Its turn comes after the first prompt and the messages queued before it.
            Typed::NotYet => Ok(false),
            Typed::Held => {
                self.waits_for_person(d).await;
                Ok(false)
            }
            Typed::Delivered => {
                let from = tracked.webhook_at.or(tracked.facts.as_ref().map(|f| f.at)).unwrap_or_else(Instant::now);
                ctx.metrics.feedback_latency.with_label_values(&[d.key]).observe(from.elapsed().as_secs_f64());
                Ok(true)
            }
        }
    }

    /// A reaction's message waits because the agent's screen asks a person something (a
    /// permission or yes/no prompt): `AgentActive` says so, and the first time an event is
    /// recorded and the person is told ([`notify_reaction_waits_for_person`]).
    async fn waits_for_person(&mut self, d: &Due) {
        let (s, ctx) = (self.s, self.ctx);
        let st = &mut *self.st;
        let evidence = st.activity.as_ref().map(|a| a.evidence.clone()).unwrap_or_default();
        let msg = format!("{evidence}; the {} message waits until a person answers", d.key);
        let told = condition::find(&st.conditions, types::AGENT_ACTIVE).is_some_and(|c| c.message == msg);
        super::cond(st, s, types::AGENT_ACTIVE, aoctl_api::ConditionStatus::False, "NeedsInput", msg.clone());
        if !told {
            ctx.recorder.publish(s, EventType::Warning, "ReactionWaiting", &msg).await;
            notify_reaction_waits_for_person(s, &self.project, st, d, &msg);
        }
    }
}

/// Records the comments of untrusted authors that were not recorded before: in
/// `status.heldComments` (the newest [`HeldComment::MAX`]) for a person to read and perhaps pass
/// on, and in a `CommentHeld` event naming the author. Nothing of them is typed.
async fn hold(s: &Session, tracked: &Tracked, ctx: &Ctx, st: &mut SessionStatus) {
    let Some(f) = tracked.facts.as_deref() else { return };
    for h in &f.held {
        let key = h.key();
        if st.feedback.as_ref().is_some_and(|fb| fb.held.contains(&key)) {
            continue;
        }
        st.feedback.get_or_insert_default().remember_held(&key);
        st.held_comments.retain(|k| k.key() != key);
        st.held_comments.push(h.clone());
        let over = st.held_comments.len().saturating_sub(HeldComment::MAX);
        st.held_comments.drain(..over);
        let what = if h.kind == "review" { "review" } else { "comment" };
        let role = if h.role.is_empty() { "unknown".to_string() } else { h.role.clone() };
        let msg = format!(
            "{what} {} by {} ({role}) was not passed on to the agent: the project does not trust its author \
             (a person may pass it on from the dashboard)",
            h.id, h.author
        );
        ctx.recorder.publish(s, EventType::Warning, "CommentHeld", &msg).await;
    }
}

/// The evidence of a CI failure: the last lines of each failing job's log, read once per job and
/// kept while it fails ([`log_tail`]), so a failure already delivered costs no request.
async fn ci_evidence(s: &Session, tracked: &Tracked, ctx: &Ctx, d: &mut Due) {
    let Some(forge) = &tracked.client else { return };
    if d.failing.is_empty() || !d.evidence.is_empty() {
        return;
    }
    for check in &d.failing {
        match log_tail(ctx, &s.metadata.name, &**forge, check).await {
            Ok(Some(tail)) => d.evidence.push_str(&format!("--- {} (last lines of its log)\n{tail}\n", check.name)),
            Ok(None) => d.evidence.push_str(&format!("--- {} failed (no log available)\n", check.name)),
            Err(e) => d.evidence.push_str(&format!("--- {} failed (log unavailable: {e})\n", check.name)),
        }
    }
}

/// Reaction outcomes to count in `aoctl_reactions_total` once the status recording them is
/// written: a write that fails (a newer status, 409) records nothing, and the reconcile that
/// decides again counts them then.
#[derive(Debug, Default)]
pub(super) struct Tally(Vec<(String, &'static str, &'static str)>);

impl Tally {
    fn add(&mut self, key: &str, action: &'static str, result: &'static str) {
        self.0.push((key.to_string(), action, result));
    }

    /// Counts everything tallied; called once the status is written.
    pub(super) fn count(self, metrics: &crate::metrics::Metrics) {
        for (key, action, result) in self.0 {
            metrics.reactions.with_label_values(&[&key, action, result]).inc();
        }
    }
}

fn min(a: Option<Duration>, b: Duration) -> Option<Duration> {
    Some(a.map_or(b, |a| a.min(b)))
}

fn pr_url(st: &SessionStatus) -> Option<String> {
    st.pull_request.as_ref().map(|p| p.url.clone())
}

/// The title of an escalation: the event's own when one is due, else the reaction's.
fn escalation_title(s: &Session, key: &str, d: Option<&Due>, why: &str) -> String {
    let what = d.map_or_else(|| format!("{key} on session {}", s.metadata.name), |d| d.title.clone());
    format!("{what} (escalated: {why})")
}

/// Records the merge of the approved, green head; `effects` makes it once the record is written.
fn decide_merge(st: &mut SessionStatus, tracked: &Tracked, cfg: &Reaction, now: Time) -> bool {
    let (Some(_), Some(f)) = (&tracked.client, tracked.facts.as_deref()) else { return false };
    st.merge = Some(MergeStatus {
        sha: f.pr.head_sha.clone(),
        method: cfg.merge_method.unwrap_or(MergeMethod::Merge),
        decided_at: now,
        result: None,
        message: None,
        done_at: None,
    });
    true
}

/// While the PR is open, a merge GitHub refused keeps `Merged` False with the reason it gave.
fn refused_merge(s: &Session, st: &mut SessionStatus) {
    let open = st.pull_request.as_ref().is_some_and(|p| p.state == PullRequestState::Open);
    let Some(m) = st.merge.clone().filter(|_| open) else { return };
    if let Some(reason) = m.result.as_deref().filter(|r| *r != MERGED) {
        let msg = m.message.clone().unwrap_or_default();
        super::cond(st, s, types::MERGED, ConditionStatus::False, reason, msg);
    }
}

/// Tells the person that a reaction waits for their answer on the agent's screen (once per
/// event: the outbox's key names the event).
fn notify_reaction_waits_for_person(s: &Session, project: &Project, st: &mut SessionStatus, d: &Due, why: &str) {
    let uid = s.metadata.uid.as_deref().unwrap_or(&s.metadata.name);
    let n = notifiers::record(
        format!("{uid}:{}:{}:waits-for-person", d.key, d.fingerprint),
        d.key,
        format!("session {} waits for an answer before the {} message", s.metadata.name, d.key),
        why.to_string(),
        pr_url(st),
        false,
        &project.spec.notifiers,
    );
    if let Some(n) = n {
        notifiers::enqueue(&mut st.notifications, n);
    }
}

#[cfg(test)]
#[path = "tests_reactions.rs"]
mod tests;
