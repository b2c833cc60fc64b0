//! Reactions: each distinct PR or agent event is acted on exactly once — typed into the agent with
//! its evidence, sent to the notifiers, or merged — keyed by a fingerprint recorded in
//! `status.reactions`. A message carries a marker (`[aoctl:ci-failed:1a2b3c4d]`) that is looked for
//! in the transcript before sending, so a controller that crashed between sending and recording
//! neither repeats nor forgets; it is typed through the session's one typing path
//! ([`crate::typing`]), never into a screen that waits for a person. `retries` and `escalateAfter` escalate to the notifiers, evaluated
//! on timers as well as on new events.

use std::time::{Duration, Instant};

use aoctl_api::condition::{self, types};
use aoctl_api::project::Project;
use aoctl_api::reactions::{MergeMethod, Reaction, ReactionAction, Reactions};
use aoctl_api::session::{reasons, ActivityState, ChecksState, PullRequestState, ReactionStatus, ReviewState};
use aoctl_api::{EventType, Session, SessionStatus, Time};
use aoctl_runtimes::{transcript, Handle};
use sha2::{Digest, Sha256};

use super::pr::{Facts, Tracked};
use super::Error;
use crate::context::Ctx;
use crate::fleet::{agent_of, input_style};
use crate::notify::{self, Notification};
use crate::typing::{self, What};

/// One reaction whose condition holds now.
struct Due {
    key: &'static str,
    fingerprint: String,
    title: String,
    evidence: String,
}

fn effective(s: &Session, p: &Project) -> Reactions {
    let mut r = Reactions::defaults();
    if let Some(pr) = &p.spec.reactions {
        r = r.overlay(pr);
    }
    if let Some(sr) = &s.spec.reactions {
        r = r.overlay(sr);
    }
    r
}

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

/// The reactions whose conditions hold, with the evidence for their messages.
async fn due(s: &Session, st: &SessionStatus, tracked: &Tracked) -> Vec<Due> {
    let mut out = vec![];
    if let Some(f) = tracked.facts.as_deref() {
        pr_due(f, tracked, &mut out).await;
    }
    if let Some(a) = &st.activity {
        let since = a.since.to_string();
        match a.state {
            ActivityState::Stuck => out.push(Due {
                key: "agent-stuck",
                fingerprint: since,
                title: format!("session {} is stuck", s.metadata.name),
                evidence: a.evidence.clone(),
            }),
            ActivityState::NeedsInput => out.push(Due {
                key: "agent-needs-input",
                fingerprint: since,
                title: format!("session {} needs input", s.metadata.name),
                evidence: a.evidence.clone(),
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
            });
        }
    }
    out
}

async fn pr_due(f: &Facts, tracked: &Tracked, out: &mut Vec<Due>) {
    let pr = &f.pr;
    let n = pr.number;
    if pr.state == PullRequestState::Closed {
        out.push(Due {
            key: "pr-closed",
            fingerprint: n.to_string(),
            title: format!("pull request #{n} was closed without merging"),
            evidence: pr.url.clone(),
        });
    }
    if pr.state != PullRequestState::Open {
        return;
    }
    if f.checks.state == ChecksState::Failing {
        let names: Vec<&str> = f.checks.failing.iter().map(|c| c.name.as_str()).collect();
        let mut evidence = String::new();
        if let Some((c, owner, repo)) = &tracked.client {
            for check in f.checks.failing.iter().take(3) {
                match c.failing_log_tail(owner, repo, check).await {
                    Ok(Some(tail)) => {
                        evidence.push_str(&format!("--- {} (last lines of its log)\n{tail}\n", check.name))
                    }
                    Ok(None) => evidence.push_str(&format!("--- {} failed (no log available)\n", check.name)),
                    Err(e) => evidence.push_str(&format!("--- {} failed (log unavailable: {e})\n", check.name)),
                }
            }
        }
        out.push(Due {
            key: "ci-failed",
            fingerprint: format!("{}:{}", pr.head_sha, f.checks.fingerprint()),
            title: format!(
                "CI failed on {} for PR #{n}: {}",
                &pr.head_sha[..pr.head_sha.len().min(7)],
                names.join(", ")
            ),
            evidence,
        });
    }
    if f.reviews.state == ReviewState::ChangesRequested {
        let mut ids: Vec<String> = f
            .reviews
            .items
            .iter()
            .filter(|r| r.state.eq_ignore_ascii_case("CHANGES_REQUESTED"))
            .map(|r| format!("r{}", r.id))
            .collect();
        ids.extend(f.reviews.comments.iter().map(|c| format!("c{}", c.id)));
        ids.sort();
        let mut evidence = String::new();
        for r in f.reviews.items.iter().filter(|r| r.state.eq_ignore_ascii_case("CHANGES_REQUESTED")) {
            if !r.body.trim().is_empty() {
                evidence.push_str(&format!("{} wrote: {}\n", r.user, r.body.trim()));
            }
        }
        for c in &f.reviews.comments {
            let line = c.line.map(|l| format!(":{l}")).unwrap_or_default();
            evidence.push_str(&format!("{}{line}: {} ({})\n", c.path, c.body.trim(), c.user));
        }
        let users: Vec<&str> = f.reviews.items.iter().map(|r| r.user.as_str()).collect();
        out.push(Due {
            key: "changes-requested",
            fingerprint: ids.join(","),
            title: format!("changes requested on PR #{n} by {}", users.join(", ")),
            evidence,
        });
    }
    if pr.has_conflicts() {
        out.push(Due {
            key: "merge-conflicts",
            fingerprint: format!("{}:{}", pr.base_ref, pr.head_sha),
            title: format!("PR #{n} has merge conflicts with {}", pr.base_ref),
            evidence: format!("Merge or rebase onto {} and push.", pr.base_ref),
        });
    }
    if f.checks.state == ChecksState::Passing && f.reviews.state == ReviewState::Approved && pr.mergeable == Some(true)
    {
        out.push(Due {
            key: "approved-and-green",
            fingerprint: pr.head_sha.clone(),
            title: format!("PR #{n} is approved and green"),
            evidence: pr.url.clone(),
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

/// Acts on every due reaction; returns how soon a timer (escalation) needs another look.
pub(super) async fn react(
    s: &Session,
    project: &Project,
    tracked: &Tracked,
    ctx: &Ctx,
    st: &mut SessionStatus,
) -> Result<Option<Duration>, Error> {
    let all = effective(s, project);
    let now = Time::now();
    let due = due(s, st, tracked).await;
    if !due.is_empty() {
        let keys: Vec<&str> = due.iter().map(|d| d.key).collect();
        tracing::debug!(due = ?keys, "reactions due");
    }
    let mut next: Option<Duration> = None;
    // An episode ends when its condition no longer holds: the next occurrence starts afresh.
    let keys: Vec<&str> = due.iter().map(|d| d.key).collect();
    st.reactions.retain(|k, _| keys.contains(&k.as_str()));
    for d in due {
        let Some(cfg) = config(&all, d.key) else { continue };
        let mut action = cfg.action.unwrap_or(ReactionAction::Notify);
        if cfg.auto == Some(false) {
            // Not automatic: a person decides, so they are told.
            action = ReactionAction::Notify;
        }
        let mut rs = st.reactions.get(d.key).cloned().unwrap_or_default();
        let since = *rs.since.get_or_insert(now);
        if rs.last_fingerprint.as_deref() == Some(&d.fingerprint) {
            if let Some(after) = cfg.escalate_after.map(|d| d.as_std()) {
                let waited = (now.0 - since.0).to_std().unwrap_or_default();
                if !rs.escalated && waited >= after {
                    escalate(s, project, ctx, &d, &mut rs, &format!("unresolved for {}", cfg.escalate_after.unwrap()));
                } else if !rs.escalated {
                    next = min(next, after - waited);
                }
            }
            st.reactions.insert(d.key.to_string(), rs);
            continue;
        }
        let limit = cfg.retries.map(|r| r + 1);
        if action == ReactionAction::SendToAgent && limit.is_some_and(|l| rs.attempts >= l) {
            if !rs.escalated {
                let why = format!("still not resolved after {} messages to the agent", rs.attempts);
                escalate(s, project, ctx, &d, &mut rs, &why);
            }
            rs.last_fingerprint = Some(d.fingerprint.clone());
            st.reactions.insert(d.key.to_string(), rs);
            continue;
        }
        let done = match action {
            ReactionAction::SendToAgent => send(s, project, tracked, ctx, st, &d, cfg).await,
            ReactionAction::Notify => {
                notify_now(s, project, ctx, &d, false);
                Ok(true)
            }
            ReactionAction::Merge => merge(s, tracked, ctx, &d, cfg).await,
        };
        let label = action_name(action);
        match done {
            Ok(true) => {
                ctx.metrics.reactions.with_label_values(&[d.key, label, "success"]).inc();
                rs.attempts += 1;
                rs.last_fingerprint = Some(d.fingerprint.clone());
                rs.last_at = Some(now);
            }
            // Not deliverable yet (no running agent): the reaction stays due.
            Ok(false) => next = min(next, Duration::from_secs(5)),
            Err(e) => {
                ctx.metrics.reactions.with_label_values(&[d.key, label, "error"]).inc();
                ctx.recorder.publish(s, EventType::Warning, "ReactionFailed", &format!("{}: {e}", d.key)).await;
                next = min(next, Duration::from_secs(10));
            }
        }
        if let Some(after) = cfg.escalate_after {
            next = min(next, after.as_std());
        }
        st.reactions.insert(d.key.to_string(), rs);
    }
    Ok(next)
}

fn min(a: Option<Duration>, b: Duration) -> Option<Duration> {
    Some(a.map_or(b, |a| a.min(b)))
}

fn notification(s: &Session, project: &Project, d: &Due, escalated: bool, why: &str) -> Notification {
    let title = if escalated { format!("{} (escalated: {why})", d.title) } else { d.title.clone() };
    Notification {
        project: project.metadata.name.clone(),
        session: s.metadata.name.clone(),
        reaction: d.key.to_string(),
        title,
        message: d.evidence.clone(),
        url: s.status.pull_request.as_ref().map(|p| p.url.clone()),
        escalated,
        at: Time::now(),
    }
}

fn notify_now(s: &Session, project: &Project, ctx: &Ctx, d: &Due, escalated: bool) {
    let n = notification(s, project, d, escalated, "");
    notify::send(ctx.store.clone(), s.clone(), project.spec.notifiers.clone(), n);
}

fn escalate(s: &Session, project: &Project, ctx: &Ctx, d: &Due, rs: &mut ReactionStatus, why: &str) {
    rs.escalated = true;
    ctx.metrics.reactions.with_label_values(&[d.key, "notify", "escalated"]).inc();
    let n = notification(s, project, d, true, why);
    notify::send(ctx.store.clone(), s.clone(), project.spec.notifiers.clone(), n);
    let (store, session, msg) = (ctx.store.clone(), s.clone(), format!("{}: {why}", d.key));
    tokio::spawn(async move {
        crate::recorder::Recorder::new(store).publish(&session, EventType::Warning, "Escalated", &msg).await;
    });
}

/// Types the reaction's message into the agent unless its marker is already in the transcript,
/// through the session's one typing path ([`crate::typing`]): after the first prompt and the
/// queued messages of `aoctl send`, never into a screen that waits for a person.
async fn send(
    s: &Session,
    project: &Project,
    tracked: &Tracked,
    ctx: &Ctx,
    st: &mut SessionStatus,
    d: &Due,
    cfg: &Reaction,
) -> Result<bool, Error> {
    let running = condition::is_true(&st.conditions, types::RUNTIME_READY);
    let Some(rt_status) = st.runtime.clone().filter(|_| running && !s.spec.stopped) else { return Ok(false) };
    if st.activity.as_ref().is_some_and(|a| a.state == ActivityState::RateLimited) {
        // Typed now it would be lost or spend the limit's first minutes: it waits for the resume.
        return Ok(false);
    }
    let name = &s.metadata.name;
    let text = message(d, cfg);
    let marker = text.split_whitespace().next().unwrap_or_default().to_string();
    let rt = ctx.fleet.runtime_for(s, Some(project), rt_status.kind).await?;
    let h = Handle(rt_status.handle.clone());
    let files = ctx.fleet.typing_files(name);
    let _typing = ctx.fleet.typing.lock(name).await;
    typing::recover(&files, &*rt, &h).await?;
    let path = ctx.fleet.transcript(name);
    let seen = tokio::task::spawn_blocking(move || transcript::tail(&path, None)).await?;
    let typed_before = seen.is_ok_and(|(t, _)| t.contains(&marker));
    tracing::debug!(reaction = d.key, %marker, typed_before, "sending to the agent");
    if typed_before {
        return Ok(true);
    }
    if !files.prompt_done() || !files.queued().await?.is_empty() {
        // Its turn comes after the first prompt and the messages queued before it.
        return Ok(false);
    }
    if st.activity.as_ref().is_some_and(|a| a.state == ActivityState::NeedsInput) {
        waits_for_person(s, project, ctx, st, d).await;
        return Ok(false);
    }
    let (style, adapter) = input_style(&agent_of(s, Some(project)));
    let text = aoctl_runtimes::agents::prepare_text(adapter, &text);
    let sent = typing::type_message(&files, &*rt, &h, &text, &style, What::Marked).await;
    ctx.metrics.runtime_op(rt_status.kind, "send", sent.is_ok());
    sent?;
    let from = tracked.webhook_at.or(tracked.facts.as_ref().map(|f| f.at)).unwrap_or_else(Instant::now);
    ctx.metrics.feedback_latency.with_label_values(&[d.key]).observe(from.elapsed().as_secs_f64());
    ctx.recorder.publish(s, EventType::Normal, "SentToAgent", &format!("{}: {}", d.key, d.title)).await;
    Ok(true)
}

/// A reaction's message waits because the agent's screen asks a person something (a permission
/// or yes/no prompt): `AgentActive` says so, and the first time an event is recorded and the
/// person is told ([`notify_reaction_waits_for_person`]).
async fn waits_for_person(s: &Session, project: &Project, ctx: &Ctx, st: &mut SessionStatus, d: &Due) {
    let evidence = st.activity.as_ref().map(|a| a.evidence.clone()).unwrap_or_default();
    let msg = format!("{evidence}; the {} message waits until a person answers", d.key);
    let told = condition::find(&st.conditions, types::AGENT_ACTIVE).is_some_and(|c| c.message == msg);
    super::cond(st, s, types::AGENT_ACTIVE, aoctl_api::ConditionStatus::False, "NeedsInput", msg.clone());
    if !told {
        ctx.recorder.publish(s, EventType::Warning, "ReactionWaiting", &msg).await;
        notify_reaction_waits_for_person(s, project, ctx, d, &msg);
    }
}

/// Tells the person that a reaction waits for their answer on the agent's screen.
fn notify_reaction_waits_for_person(s: &Session, project: &Project, ctx: &Ctx, d: &Due, why: &str) {
    let waiting = Due {
        key: d.key,
        fingerprint: d.fingerprint.clone(),
        title: format!("session {} waits for an answer before the {} message", s.metadata.name, d.key),
        evidence: why.to_string(),
    };
    notify_now(s, project, ctx, &waiting, false);
}

async fn merge(s: &Session, tracked: &Tracked, ctx: &Ctx, d: &Due, cfg: &Reaction) -> Result<bool, Error> {
    let (Some((c, owner, repo)), Some(f)) = (&tracked.client, tracked.facts.as_deref()) else { return Ok(false) };
    let method = match cfg.merge_method.unwrap_or(MergeMethod::Merge) {
        MergeMethod::Merge => aoctl_github::MergeMethod::Merge,
        MergeMethod::Squash => aoctl_github::MergeMethod::Squash,
        MergeMethod::Rebase => aoctl_github::MergeMethod::Rebase,
    };
    match c.merge(owner, repo, f.pr.number, method, &f.pr.head_sha).await {
        Ok(sha) => {
            let msg = format!("merged PR #{} as {}", f.pr.number, &sha[..sha.len().min(12)]);
            ctx.recorder.publish(s, EventType::Normal, "MergedByReaction", &msg).await;
            // Read the merged state at once rather than at the next poll.
            let mut memo = ctx.fleet.pr_memo(&s.metadata.name);
            memo.next_poll = None;
            ctx.fleet.set_pr_memo(&s.metadata.name, memo);
            Ok(true)
        }
        Err(e) => {
            let msg = format!("{}: merge of PR #{} failed: {e}", d.key, f.pr.number);
            ctx.recorder.publish(s, EventType::Warning, e.reason(), &msg).await;
            Ok(false)
        }
    }
}
