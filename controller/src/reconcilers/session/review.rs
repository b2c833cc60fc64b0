//! Reviewer sessions. For a worker whose project (or own spec) names reviewers, a round starts
//! when its pull request opens, on each new head, when it goes idle, on `aoctl review`, or when
//! its agent asks (`request_review`): one reviewer Session per reviewer (`spec.reviewOf`, owned
//! by the worker, labelled `ao.dev/review-of`) on its own branch started at the worker's head,
//! with a prompt holding the pull request and the diff (from the base, or from the head the last
//! round reviewed). A reviewer's own reconcile reads its review file once it is idle or exited.
//! The worker records the verdict in its status at once (body and line comments kept, bounded),
//! and deletes the reviewer once that record is written. The verdict counts from then on: the
//! review state and the gate use the recorded verdicts, and the reactions pass its comments to
//! the worker once each. Posting it to the pull request is a step of its own: as the forge's
//! approval or request for changes when a second identity (`spec.review.tokenEnv`) that did not
//! author the change posts it, else as a comment carrying the verdict — forges refuse a change's
//! author's own approval. A refused post is tried again with backoff of minutes, with an event in
//! the forge's words; a post a crash left unrecorded is found by its marker and not repeated.
//! `gate: true` holds `approved-and-green` until every reviewer approved the head.

use std::collections::BTreeMap;
use std::time::Duration;

use aoctl_api::condition::types;
use aoctl_api::review::{
    effective_state, review_marker, reviewer_name, PostedAs, ReviewFile, ReviewSpec, ReviewStatus, ReviewTrigger,
    ReviewerStatus, ReviewerVerdict, Verdict, REVIEW_FILE_ENV, REVIEW_OF_LABEL, REVIEW_REQUESTED_ANNOTATION,
};
use aoctl_api::session::{ActivityState, PullRequestState, ReviewState, SessionSpec};
use aoctl_api::API_VERSION;
use aoctl_api::{ConditionStatus, EventType, Kind, ObjectMeta, OwnerReference, Session, Time};
use aoctl_forge_types::{NewComment, ReviewEvent};
use aoctl_store::{StoreError, WriteOptions};

use super::pr::Tracked;
use super::{Error, Reconcile};
use crate::forges::SharedForge;

/// The most of a diff a reviewer's prompt holds.
const PROMPT_DIFF_LIMIT: usize = 256 << 10;
/// How often a worker looks at its reviewers while a round runs.
const ROUND_POLL: Duration = Duration::from_secs(2);
/// The file, in the reviewer's session folder, it writes its review to.
const REVIEW_FILE: &str = "review.json";
/// The first wait after a refused post; it doubles up to [`POST_BACKOFF_MAX`].
const POST_BACKOFF: Duration = Duration::from_secs(120);
const POST_BACKOFF_MAX: Duration = Duration::from_secs(3600);

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
            collected |= self.collect(r, &mut rs).await?;
        }
        let posting = self.post_reviews(&spec, tracked, &mut rs).await;
        self.show_review_state(&spec, tracked, &rs);
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
        let agent_asked = self.st.agent.as_ref().and_then(|a| a.review_requested.as_ref()).map(|r| r.at);
        let idle = self.st.activity.as_ref().is_some_and(|a| a.state == ActivityState::Idle);
        let due = if (asked.is_some() && asked != rs.requested)
            || (agent_asked.is_some() && agent_asked != rs.agent_requested)
        {
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
            // A verdict just recorded: its reviewer is deleted once the record is written.
            let again = collected.then_some(ROUND_POLL);
            return Ok([again, posting].into_iter().flatten().min());
        }
        rs.requested = asked;
        rs.agent_requested = agent_asked;
        let started = self.start_round(&spec, f, &mut rs).await?;
        self.st.review = Some(rs);
        Ok([started.then_some(ROUND_POLL), posting].into_iter().flatten().min())
    }

    /// The review state the pull request's status and `ReviewApproved` show: the forge's, with
    /// the recorded verdicts of the reviewers on the current head.
    fn show_review_state(&mut self, spec: &ReviewSpec, tracked: &Tracked, rs: &ReviewStatus) {
        let Some(f) = tracked.facts.as_deref() else { return };
        let state = effective_state(f.reviews.state, Some(spec), Some(rs), &f.pr.head_sha);
        let Some(pr) = self.st.pull_request.as_mut() else { return };
        if pr.review == state {
            return;
        }
        pr.review = state;
        let (status, reason) = match state {
            ReviewState::Approved => (ConditionStatus::True, "Approved"),
            ReviewState::ChangesRequested => (ConditionStatus::False, "ChangesRequested"),
            ReviewState::Pending => (ConditionStatus::Unknown, "ReviewPending"),
            ReviewState::None => (ConditionStatus::Unknown, "NoReviews"),
        };
        super::cond(self.st, self.s, types::REVIEW_APPROVED, status, reason, "");
    }

    /// Posts each recorded verdict not posted yet whose time has come: as the forge's verdict when
    /// an identity that did not author the change can post it, else as a comment carrying it.
    /// How soon a post is due again.
    async fn post_reviews(&mut self, spec: &ReviewSpec, tracked: &Tracked, rs: &mut ReviewStatus) -> Option<Duration> {
        let (Some(forge), Some(f)) = (&tracked.client, tracked.facts.as_deref()) else { return None };
        if f.pr.state != PullRequestState::Open {
            return None;
        }
        let now = Time::now();
        let mut next: Option<Duration> = None;
        for v in rs.verdicts.iter_mut() {
            let Some(post) = v.post.as_mut().filter(|p| !p.done()) else { continue };
            if let Some(at) = post.next_attempt_at.filter(|at| *at > now) {
                let wait = (at.0 - now.0).to_std().unwrap_or_default();
                next = Some(next.map_or(wait, |n| n.min(wait)));
                continue;
            }
            // Posted before a crash kept it from being recorded: found by its marker.
            let marker = review_marker(&v.session);
            if let Some(found) = f.reviews.items.iter().find(|r| r.body.contains(&marker)) {
                post.review_id = Some(found.id);
                continue;
            }
            let (poster, as_) = self.poster(spec, forge, &f.pr.author).await;
            let event = match (as_, v.verdict) {
                (PostedAs::Verdict, Verdict::Approve) => ReviewEvent::Approve,
                (PostedAs::Verdict, Verdict::ChangesRequested) => ReviewEvent::RequestChanges,
                _ => ReviewEvent::Comment,
            };
            let body = post_body(v, as_);
            let comments: Vec<NewComment> = v
                .line_comments
                .iter()
                .map(|c| NewComment { path: c.path.clone(), line: c.line, body: c.text.clone() })
                .collect();
            let name = forge.change_name(f.pr.number, false);
            match poster.create_review(f.pr.number, &v.head_sha, event, &body, &comments).await {
                Ok(id) => {
                    let post = v.post.get_or_insert_default();
                    post.review_id = Some(id);
                    post.as_ = Some(as_);
                    post.last_error = None;
                    post.next_attempt_at = None;
                    let how = match as_ {
                        PostedAs::Verdict => "as its verdict",
                        PostedAs::Comment => "as a comment (the change's author cannot approve it)",
                    };
                    let msg = format!("the review of {} ({}) is posted to {name} {how}", v.session, v.verdict);
                    self.ctx.recorder.publish(self.s, EventType::Normal, "ReviewPosted", &msg).await;
                    // The next look at the pull request reads it back.
                    let mut memo = self.ctx.state.pr_memo(&self.s.metadata.name);
                    memo.next_poll = None;
                    self.ctx.state.set_pr_memo(&self.s.metadata.name, memo);
                }
                Err(e) => {
                    let post = v.post.get_or_insert_default();
                    post.attempts += 1;
                    let backoff = POST_BACKOFF.saturating_mul(1 << (post.attempts - 1).min(5)).min(POST_BACKOFF_MAX);
                    let wait = e.retry_after().map_or(backoff, |r| r.max(backoff));
                    post.next_attempt_at = Some(Time(now.0 + chrono::Duration::from_std(wait).unwrap_or_default()));
                    post.last_error = Some(e.service_said());
                    let msg = format!(
                        "the review of {} could not be posted to {name} (try {}); {} said: {}; it counts as recorded and is posted again after {}",
                        v.session,
                        post.attempts,
                        forge.name(),
                        e.service_said(),
                        aoctl_api::Duration(wait)
                    );
                    self.ctx.recorder.publish(self.s, EventType::Warning, "ReviewNotPosted", &msg).await;
                    next = Some(next.map_or(wait, |n| n.min(wait)));
                }
            }
        }
        next
    }

    /// Who posts a verdict and how: the reviewer identity of `spec.review.tokenEnv`, else the
    /// project's token — as the forge's verdict when that identity did not open the change, as a
    /// comment when it did (or cannot be told).
    async fn poster(&self, spec: &ReviewSpec, forge: &SharedForge, author: &str) -> (SharedForge, PostedAs) {
        let second =
            spec.token_env.as_deref().and_then(|env| self.ctx.forges.forge_as(&self.project, env).ok().flatten());
        let poster = second.unwrap_or_else(|| forge.clone());
        let as_ = match poster.identity().await {
            Ok(me) if !author.is_empty() && !me.eq_ignore_ascii_case(author) => PostedAs::Verdict,
            _ => PostedAs::Comment,
        };
        (poster, as_)
    }

    /// The reviewer sessions of this worker, live or being deleted: those the index of the
    /// sessions names as reviewing it (`spec.reviewOf`) that it owns.
    async fn reviewers(&self) -> Result<Vec<Session>, Error> {
        let me = &self.s.metadata;
        let (ctx, uid) = (self.ctx, me.uid.clone().unwrap_or_default());
        let names = ctx.index.read(&ctx.store, |i| i.reviewers(&me.name)).await?;
        let mut out = vec![];
        for name in names {
            match ctx.store.get_typed::<Session>(&name).await {
                Ok(r) if r.metadata.owner_references.iter().any(|o| o.uid == uid) => out.push(r),
                Ok(_) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }

    /// Records what a finished reviewer wrote in the worker's status; once that record is
    /// written (the stored status holds it), deletes the reviewer. Whether it did either.
    async fn collect(&mut self, r: &Session, rs: &mut ReviewStatus) -> Result<bool, Error> {
        let Some(found) = r.status.reviewer.as_ref() else { return Ok(false) };
        let Some(review) = found.review.as_ref() else { return Ok(false) };
        if r.metadata.deletion_timestamp.is_some() {
            return Ok(false);
        }
        let name = &r.metadata.name;
        let stored = self.s.status.review.as_ref().is_some_and(|st| st.has_session(name));
        if !stored {
            if !rs.has_session(name) {
                rs.record(ReviewerVerdict::of(reviewer_index(name), name, &found.head_sha, review));
                let msg = format!(
                    "{name} reviewed {}: {} with {} line comment(s)",
                    short(&found.head_sha),
                    review.verdict,
                    review.comments.len()
                );
                self.ctx.recorder.publish(self.s, EventType::Normal, "Reviewed", &msg).await;
            }
            return Ok(true);
        }
        match self.ctx.store.delete(Kind::Session, name, None, WriteOptions::default()).await {
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
        let found = match self.ctx.machine.files().read_own(&self.s.metadata.name, REVIEW_FILE).await {
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

/// The body of the review posted for a reviewer: posted as a comment, it says the verdict.
fn post_body(v: &ReviewerVerdict, as_: PostedAs) -> String {
    let said = if v.body.trim().is_empty() { v.verdict.as_str().to_string() } else { v.body.clone() };
    let body = match (as_, v.verdict) {
        (PostedAs::Comment, Verdict::Approve) => format!("**Verdict: approve.** {said}"),
        (PostedAs::Comment, Verdict::ChangesRequested) => format!("**Verdict: changes requested.** {said}"),
        _ => said,
    };
    format!("{body}\n\n{}", review_marker(&v.session))
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
