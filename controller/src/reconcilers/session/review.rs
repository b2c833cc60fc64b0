//! Reviewer sessions. For a worker whose project (or own spec) names reviewers, a round starts
//! when its pull request opens, on each new head, when it goes idle, or on `aoctl review`: one
//! reviewer Session per reviewer (`spec.reviewOf`, owned by the worker, labelled
//! `ao.dev/review-of`) on its own branch started at the worker's head, with a prompt holding the
//! pull request and the diff (from the base, or from the head the last round reviewed). A
//! reviewer's own reconcile reads its review file once it is idle or exited; the worker's posts
//! each review to the pull request, so the verdict and its line comments reach the worker through
//! the same delivery and dedupe as any GitHub review, records the verdict, and deletes the
//! reviewer. The worker's status counts the verdicts as `review.state`; `gate: true` holds
//! `approved-and-green` until every reviewer approved the head.

use std::collections::BTreeMap;
use std::time::Duration;

use aoctl_api::review::{
    reviewer_name, ReviewFile, ReviewSpec, ReviewStatus, ReviewTrigger, ReviewerStatus, ReviewerVerdict, Verdict,
    REVIEW_FILE_ENV, REVIEW_OF_LABEL, REVIEW_REQUESTED_ANNOTATION,
};
use aoctl_api::session::{ActivityState, PullRequestState, SessionSpec};
use aoctl_api::API_VERSION;
use aoctl_api::{EventType, Kind, ObjectMeta, OwnerReference, Session};
use aoctl_scm::{NewComment, ReviewEvent};
use aoctl_store::{Selector, StoreError, WriteOptions};

use super::pr::Tracked;
use super::{Error, Reconcile};

/// The most of a diff a reviewer's prompt holds.
const PROMPT_DIFF_LIMIT: usize = 256 << 10;
/// How often a worker looks at its reviewers while a round runs.
const ROUND_POLL: Duration = Duration::from_secs(2);
/// The file, in the reviewer's session folder, it writes its review to.
const REVIEW_FILE: &str = "review.json";

/// What the reviewer prompt is made of.
pub(super) struct PromptParts<'a> {
    pub extra: Option<&'a str>,
    pub number: u64,
    pub url: &'a str,
    pub title: &'a str,
    pub body: &'a str,
    pub failing: Vec<&'a str>,
    pub head: &'a str,
    /// The head the previous round reviewed, when this diff starts there.
    pub since: Option<&'a str>,
    pub base: &'a str,
    pub diff: &'a str,
    pub truncated: bool,
}

/// The reviewer's prompt: its instructions, the pull request, the diff, and the review file's
/// schema spelled out.
pub(super) fn prompt(p: &PromptParts) -> String {
    let mut out = String::new();
    out.push_str(&format!("Review pull request #{} ({}) at commit {}.\n", p.number, p.url, p.head));
    if let Some(extra) = p.extra.filter(|e| !e.trim().is_empty()) {
        out.push_str(&format!("\n{}\n", extra.trim_end()));
    }
    out.push_str(&format!("\nTitle: {}\n", p.title));
    if !p.body.trim().is_empty() {
        out.push_str(&format!("\n{}\n", p.body.trim_end()));
    }
    if !p.failing.is_empty() {
        out.push_str(&format!("\nFailing checks: {}\n", p.failing.join(", ")));
    }
    match p.since {
        Some(since) => out.push_str(&format!(
            "\nAn earlier review saw commit {since}; this diff holds only what changed since then:\n"
        )),
        None => out.push_str(&format!("\nThe diff against {}:\n", p.base)),
    }
    out.push_str("\n```diff\n");
    out.push_str(p.diff);
    if !p.diff.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("```\n");
    if p.truncated {
        out.push_str("(The diff was cut; read the rest in the checkout.)\n");
    }
    out.push_str(&format!(
        "\nYour checkout is the pull request's head; nothing you commit reaches its branch. When you are \
         done, write your review as JSON to the file named by ${REVIEW_FILE_ENV}:\n\
         {{\"verdict\": \"approve\" | \"changes-requested\" | \"comment\", \"body\": \"what you think overall\", \
         \"comments\": [{{\"path\": \"src/file.rs\", \"line\": 12, \"text\": \"what to change\"}}]}}\n\
         `line` is a line of the file as it is at the head; `body` and `comments` may be left out.\n"
    ));
    out
}

/// The review settings of a worker: its own, else its project's; none for a reviewer.
fn spec_of<'a>(r: &'a Reconcile<'_>) -> Option<&'a ReviewSpec> {
    if r.s.spec.review_of.is_some() {
        return None;
    }
    r.s.spec.review.as_ref().or(r.project.spec.review.as_ref()).filter(|s| !s.reviewers.is_empty())
}

impl Reconcile<'_> {
    /// A worker's reviewers: collects what finished reviewers wrote, then starts a round when one
    /// is due. How soon to look again while a round runs.
    pub(super) async fn review(&mut self, tracked: &Tracked) -> Result<Option<Duration>, Error> {
        let Some(spec) = spec_of(self).cloned() else { return Ok(None) };
        let mut rs = self.st.review.clone().unwrap_or_default();
        let live = self.reviewers().await?;
        let mut collected = false;
        for r in &live {
            collected |= self.collect(r, tracked, &mut rs).await?;
        }
        let running = live.iter().any(|r| r.metadata.deletion_timestamp.is_none() && !r.status.reviewer_done());
        if running {
            self.st.review = Some(rs);
            return Ok(Some(ROUND_POLL));
        }
        if let Some(sha) = rs.running_sha.take() {
            rs.reviewed_sha = Some(sha);
        }
        let Some(f) = tracked.facts.as_deref().filter(|f| f.pr.state == PullRequestState::Open) else {
            self.st.review = Some(rs).filter(|r| *r != ReviewStatus::default());
            return Ok(None);
        };
        let head = f.pr.head_sha.clone();
        let asked = self.s.metadata.annotations.get(REVIEW_REQUESTED_ANNOTATION).cloned();
        let idle = self.st.activity.as_ref().is_some_and(|a| a.state == ActivityState::Idle);
        let due = if asked.is_some() && asked != rs.requested {
            true
        } else if rs.reviewed_sha.as_deref() == Some(head.as_str()) {
            false
        } else {
            let new_head = match rs.reviewed_sha {
                None => spec.runs_on(ReviewTrigger::PrOpened),
                Some(_) => spec.runs_on(ReviewTrigger::Push),
            };
            new_head || (idle && spec.runs_on(ReviewTrigger::Idle))
        };
        if !due {
            self.st.review = Some(rs);
            // A review just posted is read back from the pull request on the next look.
            return Ok(collected.then_some(ROUND_POLL));
        }
        rs.requested = asked;
        let started = self.start_round(&spec, f, &mut rs).await?;
        self.st.review = Some(rs);
        Ok(started.then_some(ROUND_POLL))
    }

    /// The reviewer sessions of this worker, live or being deleted.
    async fn reviewers(&self) -> Result<Vec<Session>, Error> {
        let (all, _) = self.ctx.store.list_typed::<Session>(&Selector::everything()).await?;
        let me = &self.s.metadata;
        Ok(all
            .into_iter()
            .filter(|r| r.spec.review_of.as_deref() == Some(me.name.as_str()))
            .filter(|r| r.metadata.owner_references.iter().any(|o| o.uid == me.uid.clone().unwrap_or_default()))
            .collect())
    }

    /// Passes on what a finished reviewer wrote — as a review of the pull request, and in the
    /// worker's status — then deletes the reviewer.
    async fn collect(&mut self, r: &Session, tracked: &Tracked, rs: &mut ReviewStatus) -> Result<bool, Error> {
        let Some(found) = r.status.reviewer.as_ref() else { return Ok(false) };
        let Some(review) = found.review.as_ref() else { return Ok(false) };
        if r.metadata.deletion_timestamp.is_some() {
            return Ok(false);
        }
        let index = reviewer_index(&r.metadata.name);
        let recorded = rs.verdicts.iter().any(|v| v.session == r.metadata.name);
        if !recorded {
            if let (Some(c), Some(f)) = (&tracked.client, tracked.facts.as_deref()) {
                let event = match review.verdict {
                    Verdict::Approve => ReviewEvent::Approve,
                    Verdict::ChangesRequested => ReviewEvent::RequestChanges,
                    Verdict::Comment => ReviewEvent::Comment,
                };
                let body = review_body(&r.metadata.name, review);
                let comments: Vec<NewComment> = review
                    .comments
                    .iter()
                    .map(|c| NewComment { path: c.path.clone(), line: c.line, body: c.text.clone() })
                    .collect();
                if let Err(e) = c.create_review(f.pr.number, &found.head_sha, event, &body, &comments).await {
                    let msg = format!("the review of {} could not be posted: {e}", r.metadata.name);
                    self.ctx.recorder.publish(self.s, EventType::Warning, "ReviewNotPosted", &msg).await;
                    return Ok(false);
                }
                // The next look at the pull request reads the review at once.
                let mut memo = self.ctx.state.pr_memo(&self.s.metadata.name);
                memo.next_poll = None;
                self.ctx.state.set_pr_memo(&self.s.metadata.name, memo);
            }
            rs.record(ReviewerVerdict {
                reviewer: index,
                session: r.metadata.name.clone(),
                head_sha: found.head_sha.clone(),
                verdict: review.verdict,
                comments: review.comments.len() as u32,
            });
            let msg = format!(
                "{} reviewed {}: {} with {} line comment(s)",
                r.metadata.name,
                short(&found.head_sha),
                review.verdict,
                review.comments.len()
            );
            self.ctx.recorder.publish(self.s, EventType::Normal, "Reviewed", &msg).await;
        }
        match self.ctx.store.delete(Kind::Session, &r.metadata.name, None, WriteOptions::default()).await {
            Ok(_) | Err(StoreError::NotFound { .. }) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }

    /// Starts a round: one reviewer session per reviewer, on the pull request's head. Whether it
    /// started (it waits when the diff cannot be read yet).
    async fn start_round(
        &mut self,
        spec: &ReviewSpec,
        f: &super::state::Facts,
        rs: &mut ReviewStatus,
    ) -> Result<bool, Error> {
        let (s, ctx) = (self.s, self.ctx);
        let head = f.pr.head_sha.clone();
        let since = rs.reviewed_sha.clone();
        let base = since.clone().unwrap_or_else(|| self.base_ref());
        let machine = ctx.machine.clone();
        let (project, name, from) = (s.spec.project.clone(), s.metadata.name.clone(), base.clone());
        let diff =
            tokio::task::spawn_blocking(move || machine.workspaces().diff(&project, &name, &from, PROMPT_DIFF_LIMIT))
                .await?;
        let diff = match diff {
            Ok(d) => d,
            Err(e) => {
                let msg = format!("the diff for the reviewers could not be read: {e}");
                ctx.recorder.publish(s, EventType::Warning, "ReviewNotStarted", &msg).await;
                return Ok(false);
            }
        };
        let text = String::from_utf8_lossy(&diff.patch).into_owned();
        let failing: Vec<&str> = f.checks.failing.iter().map(|c| c.name.as_str()).collect();
        rs.round += 1;
        for (i, reviewer) in spec.reviewers.iter().enumerate() {
            let parts = PromptParts {
                extra: reviewer.prompt.as_deref(),
                number: f.pr.number,
                url: &f.pr.url,
                title: &f.pr.title,
                body: &f.pr.body,
                failing: failing.clone(),
                head: &head,
                since: since.as_deref(),
                base: &base,
                diff: &text,
                truncated: diff.truncated,
            };
            let name = reviewer_name(&s.metadata.name, rs.round, i);
            let file = ctx.machine.files().dir(&name).join(REVIEW_FILE);
            let r = Session {
                api_version: API_VERSION.to_string(),
                kind: Kind::Session.as_str().to_string(),
                metadata: ObjectMeta {
                    name: name.clone(),
                    labels: BTreeMap::from([(REVIEW_OF_LABEL.to_string(), s.metadata.name.clone())]),
                    owner_references: vec![OwnerReference {
                        api_version: API_VERSION.to_string(),
                        kind: Kind::Session.as_str().to_string(),
                        name: s.metadata.name.clone(),
                        uid: s.metadata.uid.clone().unwrap_or_default(),
                        controller: Some(true),
                        block_owner_deletion: None,
                    }],
                    ..Default::default()
                },
                spec: SessionSpec {
                    project: s.spec.project.clone(),
                    agent: reviewer.agent.clone(),
                    runtime: reviewer.runtime.or(Some(self.runtime_kind)),
                    prompt: Some(prompt(&parts)),
                    base_ref: Some(head.clone()),
                    env: BTreeMap::from([(REVIEW_FILE_ENV.to_string(), file.display().to_string())]),
                    review_of: Some(s.metadata.name.clone()),
                    ..Default::default()
                },
                status: Default::default(),
            };
            match ctx.store.create_typed(&r).await {
                Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        rs.running_sha = Some(head.clone());
        let what =
            since.map_or_else(|| "the pull request".to_string(), |s| format!("what changed since {}", short(&s)));
        let msg = format!("round {} reviews {what} at {}", rs.round, short(&head));
        ctx.recorder.publish(s, EventType::Normal, "ReviewStarted", &msg).await;
        Ok(true)
    }

    /// A reviewer's part: reads its review file into its status. A valid file is taken at once;
    /// a missing or malformed one counts only once the agent is idle or exited (it may still be
    /// writing), and is then an event naming what is wrong, once per problem. How soon to look
    /// again while no review is in.
    pub(super) async fn read_review_file(&mut self) -> Result<Option<Duration>, Error> {
        if self.st.reviewer.as_ref().is_some_and(|r| r.review.is_some()) {
            return Ok(None);
        }
        let state = self.st.activity.as_ref().map(|a| a.state);
        let exited = state == Some(ActivityState::Exited);
        let settled = exited || state == Some(ActivityState::Idle);
        let head = self.s.spec.base_ref.clone().unwrap_or_default();
        let path = self.ctx.machine.files().dir(&self.s.metadata.name).join(REVIEW_FILE);
        let found = match tokio::fs::read_to_string(&path).await {
            Ok(text) => ReviewFile::parse(&text).map_err(|e| format!("the review file is malformed: {e}")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !exited => return Ok(Some(ROUND_POLL)),
            Err(e) => Err(format!("the review file could not be read: {e}")),
        };
        if found.is_err() && !settled {
            return Ok(Some(ROUND_POLL));
        }
        let mut next = self.st.reviewer.clone().unwrap_or(ReviewerStatus { head_sha: head, ..Default::default() });
        match found {
            Ok(review) => {
                next.review = Some(review);
                next.error = None;
            }
            Err(why) => {
                if next.error.as_deref() != Some(why.as_str()) {
                    self.ctx.recorder.publish(self.s, EventType::Warning, "ReviewFileInvalid", &why).await;
                }
                if !next.told {
                    // Told once, through the inbox that `aoctl send` queues into: typed in turn.
                    let text = format!("{why}. Write the review to ${REVIEW_FILE_ENV} again, as your prompt says.");
                    let files = self.ctx.machine.files().typing(&self.s.metadata.name);
                    files.enqueue(&text).await?;
                    next.told = true;
                }
                next.error = Some(why);
            }
        }
        let waiting = next.review.is_none() && !exited;
        self.st.reviewer = Some(next);
        Ok(waiting.then_some(ROUND_POLL))
    }
}

/// The body of the review posted for a reviewer.
fn review_body(session: &str, r: &ReviewFile) -> String {
    let body = if r.body.trim().is_empty() { r.verdict.as_str().to_string() } else { r.body.clone() };
    format!("{body}\n\n(reviewer session {session})")
}

/// The reviewer's index, the last part of its name.
fn reviewer_index(name: &str) -> u32 {
    name.rsplit('-').next().and_then(|n| n.parse().ok()).unwrap_or(0)
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(7)]
}

/// Whether a reviewer session is done: it wrote a review.
trait ReviewerDone {
    fn reviewer_done(&self) -> bool;
}

impl ReviewerDone for aoctl_api::SessionStatus {
    fn reviewer_done(&self) -> bool {
        self.reviewer.as_ref().is_some_and(|r| r.review.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(since: Option<&'a str>, diff: &'a str) -> PromptParts<'a> {
        PromptParts {
            extra: Some("Look hard at error handling."),
            number: 4,
            url: "https://github.test/acme/widgets/pull/4",
            title: "Fix the login",
            body: "It looped.",
            failing: vec!["test"],
            head: "abcdef0123",
            since,
            base: "main",
            diff,
            truncated: false,
        }
    }

    #[test]
    fn the_prompt_holds_the_pull_request_the_diff_and_the_file_schema() {
        let p = prompt(&parts(None, "diff --git a/x b/x\n+new line\n"));
        assert!(
            p.starts_with("Review pull request #4 (https://github.test/acme/widgets/pull/4) at commit abcdef0123.\n")
        );
        assert!(p.contains("\nLook hard at error handling.\n"), "{p}");
        assert!(p.contains("\nTitle: Fix the login\n\nIt looped.\n"), "{p}");
        assert!(p.contains("\nFailing checks: test\n"), "{p}");
        assert!(p.contains("The diff against main:\n\n```diff\ndiff --git a/x b/x\n+new line\n```\n"), "{p}");
        assert!(p.contains("$AOCTL_REVIEW_FILE"), "{p}");
        assert!(p.contains("\"verdict\": \"approve\" | \"changes-requested\" | \"comment\""), "{p}");
        let again = prompt(&parts(Some("1111111"), "+only this\n"));
        assert!(again.contains("An earlier review saw commit 1111111; this diff holds only what changed"), "{again}");
        assert!(!again.contains("The diff against main"), "{again}");
    }

    #[test]
    fn reviewer_indexes_come_from_their_names() {
        assert_eq!(reviewer_index(&reviewer_name("fix-login", 3, 1)), 1);
        assert_eq!(reviewer_index(&reviewer_name("fix-login", 3, 0)), 0);
    }
}
