//! Tests of the episode rules: when an episode begins, lasts and ends, how often the agent is
//! told before a person is, and that what is recorded for a person is keyed by its event.

use std::time::{Duration, Instant};

use aoctl_api::reactions::Reactions;
use aoctl_api::session::{ChecksState, PullRequestState, ReactionStatus, ReviewState};
use aoctl_api::{Session, SessionStatus, Time};
use aoctl_forge_types::{CheckKind, Checks, FailingCheck, PullRequest, Review, ReviewComment, Reviews, Standing};

use super::super::pr::Tracked;
use super::super::state::Facts;
use super::{delivered, event_key, plan, pr_due, Decision, Tally};

/// An open pull request at `head` whose checks are in `checks` (failing: check `ci` of run `run`).
fn facts(head: &str, checks: ChecksState, run: u64) -> Facts {
    let failing = if checks == ChecksState::Failing {
        vec![FailingCheck {
            name: "ci".into(),
            id: run,
            details_url: None,
            kind: CheckKind::CheckRun,
            conclusion: "failure".into(),
            app: None,
        }]
    } else {
        vec![]
    };
    Facts {
        pr: PullRequest {
            number: 7,
            url: "https://github.test/acme/widgets/pull/7".into(),
            state: PullRequestState::Open,
            head_sha: head.into(),
            head_ref: "widgets/s".into(),
            base_ref: "main".into(),
            base_sha: "b0".into(),
            draft: false,
            mergeable: Some(true),
            mergeable_state: Some("clean".into()),
            merged: false,
            title: "Widgets".into(),
            body: String::new(),
            author: "aoctl-bot".into(),
        },
        checks: Checks { state: checks, failing },
        reviews: Reviews { state: ReviewState::None, items: vec![], comments: vec![] },
        held: vec![],
        conflicts: None,
        at: Instant::now(),
    }
}

/// The pull-request events due for `f`, as (key, fingerprint).
async fn due(f: &Facts, st: &SessionStatus) -> Vec<(&'static str, String)> {
    let tracked = Tracked { client: None, facts: None, webhook_at: None, next: None };
    let mut out = vec![];
    pr_due(f, None, st, &tracked, true, &mut out);
    out.into_iter().map(|d| (d.key, d.fingerprint)).collect()
}

/// One reconcile's episode rules on the events `f` makes due (or none, without facts); every
/// act is carried out. The decisions, and how soon a timer needs another look.
async fn reconcile(
    st: &mut SessionStatus,
    f: Option<&Facts>,
    all: &Reactions,
    now: Time,
) -> (Vec<Decision>, Option<Duration>) {
    let events = match f {
        Some(f) => due(f, st).await,
        None => vec![],
    };
    let refs: Vec<(&'static str, &str)> = events.iter().map(|(k, fp)| (*k, fp.as_str())).collect();
    let (decisions, next) = plan(&mut st.reactions, &refs, all, f, now);
    for d in &decisions {
        if let Decision::Act(key) = d {
            let fp = &events.iter().find(|(k, _)| k == key).expect("an act has its event").1;
            delivered(st.reactions.get_mut(*key).expect("an act has its episode"), fp, now);
        }
    }
    (decisions, next)
}

fn at(minutes: i64) -> Time {
    Time::from_unix(1_700_000_000 + minutes * 60)
}

/// The default reactions, `ci-failed` (sent to the agent) with `retries` and `escalateAfter`
/// in minutes.
fn ci(retries: Option<u32>, escalate_after: Option<u64>) -> Reactions {
    let mut all = Reactions::defaults();
    let ci = all.ci_failed.as_mut().expect("a default ci-failed");
    ci.retries = retries;
    ci.escalate_after = escalate_after.map(|m| aoctl_api::Duration::from_secs(m * 60));
    all
}

fn escalations(ds: &[Decision]) -> usize {
    ds.iter().filter(|d| matches!(d, Decision::Escalate { .. })).count()
}

fn episode(st: &SessionStatus, key: &str) -> Option<String> {
    st.reactions.get(key).and_then(|r| r.episode.clone())
}

#[tokio::test]
async fn a_ci_failed_episode_lasts_across_pushes_until_checks_pass() {
    let all = ci(Some(5), None);
    let mut st = SessionStatus::default();
    let (d, _) = reconcile(&mut st, Some(&facts("a1", ChecksState::Failing, 1)), &all, at(0)).await;
    assert_eq!(d, [Decision::Act("ci-failed")]);
    let first = episode(&st, "ci-failed").expect("an episode began");

    // The agent pushes a fix: its checks are pending, then not reported at all, then it fails too.
    for f in [facts("b2", ChecksState::Pending, 0), facts("b2", ChecksState::None, 0)] {
        let (d, _) = reconcile(&mut st, Some(&f), &all, at(1)).await;
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(episode(&st, "ci-failed").as_ref(), Some(&first), "a pending head does not end it");
    }
    // Not known for a while (GitHub unavailable, or a restarted controller that has not read it yet).
    let (d, _) = reconcile(&mut st, None, &all, at(2)).await;
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(episode(&st, "ci-failed").as_ref(), Some(&first), "not knowing is not resolved");
    let (d, _) = reconcile(&mut st, Some(&facts("b2", ChecksState::Failing, 2)), &all, at(3)).await;
    assert_eq!(d, [Decision::Act("ci-failed")], "a new failure of the same episode is sent");
    assert_eq!(episode(&st, "ci-failed").as_ref(), Some(&first));
    assert_eq!(st.reactions["ci-failed"].attempts, 2);
    // Seen again: nothing.
    let (d, _) = reconcile(&mut st, Some(&facts("b2", ChecksState::Failing, 2)), &all, at(4)).await;
    assert!(d.is_empty(), "{d:?}");

    // Checks pass: the episode ends; the next failure begins a new one.
    reconcile(&mut st, Some(&facts("c3", ChecksState::Passing, 0)), &all, at(5)).await;
    assert!(!st.reactions.contains_key("ci-failed"), "{:?}", st.reactions);
    reconcile(&mut st, Some(&facts("d4", ChecksState::Failing, 4)), &all, at(6)).await;
    let second = episode(&st, "ci-failed").expect("a new episode");
    assert_ne!(second, first);
    assert_eq!(st.reactions["ci-failed"].attempts, 1);

    // It ends as well when the pull request merges or closes, its checks still failing.
    for state in [PullRequestState::Merged, PullRequestState::Closed] {
        let mut st = st.clone();
        let mut f = facts("d4", ChecksState::Pending, 0);
        f.pr.state = state;
        reconcile(&mut st, Some(&f), &all, at(7)).await;
        assert!(!st.reactions.contains_key("ci-failed"), "{state:?}: {:?}", st.reactions);
    }
}

#[tokio::test]
async fn retries_n_sends_n_plus_one_messages_then_escalates_once() {
    for retries in [0, 1, 2] {
        let all = ci(Some(retries), None);
        let mut st = SessionStatus::default();
        let (mut acts, mut escalated, mut with_event) = (0, 0, 0);
        for run in 1..=6u64 {
            // Each fix the agent pushes fails again.
            let head = format!("h{run}");
            reconcile(&mut st, Some(&facts(&head, ChecksState::Pending, 0)), &all, at(run as i64)).await;
            let (d, _) = reconcile(&mut st, Some(&facts(&head, ChecksState::Failing, run)), &all, at(run as i64)).await;
            acts += d.iter().filter(|d| matches!(d, Decision::Act(_))).count();
            escalated += escalations(&d);
            with_event += d.iter().filter(|d| matches!(d, Decision::Escalate { event: true, .. })).count();
        }
        assert_eq!(acts, retries as usize + 1, "retries: {retries}");
        assert_eq!((escalated, with_event), (1, 1), "retries: {retries}");
        let rs = &st.reactions["ci-failed"];
        assert!(rs.escalated);
        assert_eq!(rs.attempts, retries + 1);
    }
}

#[tokio::test]
async fn escalate_after_escalates_once_counted_from_the_episode_start() {
    let all = ci(None, Some(30));
    let mut st = SessionStatus::default();
    let (d, next) = reconcile(&mut st, Some(&facts("a1", ChecksState::Failing, 1)), &all, at(0)).await;
    assert_eq!(d, [Decision::Act("ci-failed")]);
    assert_eq!(next, Some(Duration::from_secs(30 * 60)), "a timer for the escalation");
    // A new failure later does not move the start.
    let (d, next) = reconcile(&mut st, Some(&facts("b2", ChecksState::Failing, 2)), &all, at(20)).await;
    assert_eq!(d, [Decision::Act("ci-failed")]);
    assert_eq!(next, Some(Duration::from_secs(10 * 60)));
    // Due while the fix's checks are pending: escalated with no event of its own.
    let (d, next) = reconcile(&mut st, Some(&facts("c3", ChecksState::Pending, 0)), &all, at(30)).await;
    assert!(
        matches!(&d[..], [Decision::Escalate { key, event: false, why }] if key == "ci-failed" && why.contains("30m")),
        "{d:?}"
    );
    assert_eq!(next, None, "nothing left to time");
    // Once: neither later looks nor new failures escalate again.
    for (minute, run) in [(40, 3), (90, 4)] {
        let (d, _) =
            reconcile(&mut st, Some(&facts(&format!("h{run}"), ChecksState::Failing, run)), &all, at(minute)).await;
        assert_eq!(escalations(&d), 0, "{d:?}");
    }
    // The next episode starts afresh.
    reconcile(&mut st, Some(&facts("ok", ChecksState::Passing, 0)), &all, at(100)).await;
    reconcile(&mut st, Some(&facts("bad", ChecksState::Failing, 9)), &all, at(101)).await;
    let (d, _) = reconcile(&mut st, Some(&facts("bad", ChecksState::Failing, 9)), &all, at(131)).await;
    assert_eq!(escalations(&d), 1, "{d:?}");
}

/// Changes requested by `octo` in review `id`, with one comment.
fn review(f: &mut Facts, id: u64, state: &str) {
    f.reviews.items.push(Review {
        id,
        user: "octo".into(),
        standing: Standing::github(Some("MEMBER")),
        state: state.into(),
        body: format!("review {id}"),
    });
    f.reviews.comments.push(ReviewComment {
        id: id * 10,
        user: "octo".into(),
        standing: Standing::github(Some("MEMBER")),
        path: "src/lib.rs".into(),
        line: Some(1),
        original_line: None,
        body: format!("comment of {id}"),
        in_reply_to: None,
        review_id: Some(id),
        diff_hunk: "@@ -1 +1 @@\n+fn main() {}".into(),
    });
}

#[tokio::test]
async fn changes_requested_ends_on_approval_or_another_review_state() {
    let all = Reactions::defaults();
    for then in [ReviewState::Approved, ReviewState::None, ReviewState::Pending] {
        let mut st = SessionStatus::default();
        let mut f = facts("a1", ChecksState::Passing, 0);
        f.reviews.state = ReviewState::ChangesRequested;
        review(&mut f, 1, "CHANGES_REQUESTED");
        let (d, _) = reconcile(&mut st, Some(&f), &all, at(0)).await;
        assert_eq!(d, [Decision::Act("changes-requested")]);
        st.feedback.get_or_insert_default().remember(&[1], &[10]);
        let first = episode(&st, "changes-requested").expect("an episode");
        // Nothing new: the episode goes on and nothing is sent.
        let (d, _) = reconcile(&mut st, Some(&f), &all, at(1)).await;
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(episode(&st, "changes-requested").as_ref(), Some(&first));
        // A second review: the same episode, a new message.
        review(&mut f, 2, "CHANGES_REQUESTED");
        let (d, _) = reconcile(&mut st, Some(&f), &all, at(2)).await;
        assert_eq!(d, [Decision::Act("changes-requested")]);
        assert_eq!(episode(&st, "changes-requested").as_ref(), Some(&first));
        // The review state changes: the episode ends.
        f.reviews.state = then;
        reconcile(&mut st, Some(&f), &all, at(3)).await;
        assert!(!st.reactions.contains_key("changes-requested"), "{then:?}: {:?}", st.reactions);
    }
}

#[tokio::test]
async fn a_reviewer_who_requested_changes_twice_is_named_once() {
    let mut f = facts("a1", ChecksState::Passing, 0);
    f.reviews.state = ReviewState::ChangesRequested;
    review(&mut f, 1, "CHANGES_REQUESTED");
    review(&mut f, 2, "CHANGES_REQUESTED");
    f.reviews.items.push(Review {
        id: 3,
        user: "hubot".into(),
        standing: Standing::github(Some("MEMBER")),
        state: "CHANGES_REQUESTED".into(),
        body: "no".into(),
    });
    let tracked = Tracked { client: None, facts: None, webhook_at: None, next: None };
    let mut out = vec![];
    pr_due(&f, None, &SessionStatus::default(), &tracked, true, &mut out);
    let titles: Vec<&str> = out.iter().map(|d| d.title.as_str()).collect();
    assert_eq!(titles, ["changes requested on PR #7 by octo, hubot"]);
}

#[tokio::test]
async fn merge_conflicts_last_while_mergeability_is_computed_and_end_when_mergeable() {
    let all = Reactions::defaults();
    let mut st = SessionStatus::default();
    let mut f = facts("a1", ChecksState::Passing, 0);
    f.pr.mergeable = Some(false);
    f.pr.mergeable_state = Some("dirty".into());
    let (d, _) = reconcile(&mut st, Some(&f), &all, at(0)).await;
    assert_eq!(d, [Decision::Act("merge-conflicts")]);
    let first = episode(&st, "merge-conflicts");
    // The agent merged the base and pushed: GitHub is computing.
    let mut computing = facts("b2", ChecksState::Pending, 0);
    (computing.pr.mergeable, computing.pr.mergeable_state) = (None, None);
    reconcile(&mut st, Some(&computing), &all, at(1)).await;
    assert_eq!(episode(&st, "merge-conflicts"), first, "still computing: the episode lasts");
    // Still conflicting on the new head: the same episode, a new message.
    let mut again = f.clone_with_head("b2");
    let (d, _) = reconcile(&mut st, Some(&again), &all, at(2)).await;
    assert_eq!(d, [Decision::Act("merge-conflicts")]);
    assert_eq!(episode(&st, "merge-conflicts"), first);
    (again.pr.mergeable, again.pr.mergeable_state) = (Some(true), Some("clean".into()));
    reconcile(&mut st, Some(&again), &all, at(3)).await;
    assert!(!st.reactions.contains_key("merge-conflicts"), "{:?}", st.reactions);
}

trait WithHead {
    fn clone_with_head(&self, head: &str) -> Facts;
}

impl WithHead for Facts {
    fn clone_with_head(&self, head: &str) -> Facts {
        let mut f = facts(head, self.checks.state, 0);
        (f.pr.mergeable, f.pr.mergeable_state) = (self.pr.mergeable, self.pr.mergeable_state.clone());
        f
    }
}

#[tokio::test]
async fn notification_keys_name_the_event_and_survive_a_restart_and_a_second_look() {
    let mut s = Session::new("s", "widgets", "fix it");
    s.metadata.uid = Some("uid-1".into());
    let all = ci(Some(0), None);
    let mut st = SessionStatus::default();
    reconcile(&mut st, Some(&facts("a1", ChecksState::Failing, 1)), &all, at(0)).await;
    // Written, then read by a restarted controller.
    let text = serde_json::to_string(&st).expect("status as JSON");
    let read: SessionStatus = serde_json::from_str(&text).expect("status from JSON");
    let failing = facts("b2", ChecksState::Failing, 2);
    // The same event decided twice from the same written status (the first write refused, 409;
    // or a controller killed before writing), at different times: one key.
    let mut keys = vec![];
    for minute in [5, 9] {
        let mut st = read.clone();
        let (d, _) = reconcile(&mut st, Some(&failing), &all, at(minute)).await;
        assert_eq!(escalations(&d), 1, "{d:?}");
        keys.push(event_key(&s, "ci-failed", &st.reactions["ci-failed"], "escalation"));
    }
    assert_eq!(keys[0], keys[1]);
    assert!(keys[0].starts_with("uid-1:ci-failed:") && keys[0].ends_with(":escalation"), "{}", keys[0]);
    // Another episode's escalation is another event: another key.
    let mut st = read.clone();
    reconcile(&mut st, Some(&facts("ok", ChecksState::Passing, 0)), &all, at(10)).await;
    reconcile(&mut st, Some(&facts("c3", ChecksState::Failing, 3)), &all, at(11)).await;
    reconcile(&mut st, Some(&facts("d4", ChecksState::Failing, 4)), &all, at(12)).await;
    let other = event_key(&s, "ci-failed", &st.reactions["ci-failed"], "escalation");
    assert_ne!(other, keys[0]);
}

#[tokio::test]
async fn reactions_are_counted_once_the_status_recording_them_is_written() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = aoctl_store::Store::open(dir.path()).expect("a store");
    let metrics = crate::metrics::Metrics::new().expect("metrics");
    let stored = store.create_typed(&Session::new("s", "widgets", "fix it")).await.expect("created");
    // Another writer changes the status first: this reconcile's write is refused (409).
    let mut other = stored.clone();
    other.status.reactions.insert("ci-failed".into(), ReactionStatus::default());
    let fresh = store.update_status_typed(&other).await.expect("the other write");
    let escalated = || metrics.reactions.with_label_values(&["ci-failed", "notify", "escalated"]).get();
    let decided = |st: &SessionStatus| {
        let mut st = st.clone();
        st.reactions.entry("ci-failed".into()).or_default().escalated = true;
        st
    };
    let mut tally = Tally::default();
    tally.add("ci-failed", "notify", "escalated");
    let refused = super::super::write_status(&store, &metrics, &stored, decided(&stored.status), tally).await;
    assert!(refused.is_err_and(|e| e.is_conflict()));
    assert_eq!(escalated(), 0, "nothing was recorded, so nothing is counted");
    // Decided again on the newer status, and written.
    let mut tally = Tally::default();
    tally.add("ci-failed", "notify", "escalated");
    let written = super::super::write_status(&store, &metrics, &fresh, decided(&fresh.status), tally).await;
    assert!(written.expect("written").status.reactions["ci-failed"].escalated);
    assert_eq!(escalated(), 1);
}

#[tokio::test]
async fn a_question_asked_through_mcp_is_not_told_again_as_needs_input() {
    use aoctl_api::session::{ActivityState, ActivityStatus, AgentQuestion, AgentReport};
    let s = Session::new("asker", "demo", "Task");
    let tracked = Tracked { client: None, facts: None, webhook_at: None, next: None };
    let evidence = "the agent asks: Ship it?".to_string();
    let mut st = SessionStatus {
        activity: Some(ActivityStatus { state: ActivityState::NeedsInput, since: at(0), evidence, resets_at: None }),
        agent: Some(AgentReport {
            question: Some(AgentQuestion { text: "Ship it?".into(), asked_at: at(0) }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let keys = |due: Vec<super::Due>| due.into_iter().map(|d| d.key).collect::<Vec<_>>();
    let asked = keys(super::due(&s, None, &st, &tracked));
    assert!(!asked.contains(&"agent-needs-input"), "the agent API told the notifiers already: {asked:?}");
    st.agent = None;
    let on_screen = keys(super::due(&s, None, &st, &tracked));
    assert!(on_screen.contains(&"agent-needs-input"), "a question on the agent's screen still is told: {on_screen:?}");
}

#[tokio::test]
async fn a_review_gate_holds_the_merge_until_the_reviewers_approve_the_head() {
    use aoctl_api::review::{ReviewSpec, ReviewStatus, ReviewerSpec, ReviewerVerdict, Verdict};
    let mut f = facts("h2", ChecksState::Passing, 0);
    f.reviews.state = ReviewState::Approved;
    let tracked = Tracked { client: None, facts: Some(std::sync::Arc::new(f)), webhook_at: None, next: None };
    let spec = ReviewSpec { reviewers: vec![ReviewerSpec::default()], gate: true, ..Default::default() };
    let s = Session::new("s", "widgets", "work");
    let keys = |due: Vec<super::Due>| due.into_iter().map(|d| d.key).collect::<Vec<_>>();
    let mut st = SessionStatus::default();
    assert_eq!(keys(super::due(&s, None, &st, &tracked)), ["approved-and-green"], "no reviewers, no gate");
    assert!(keys(super::due(&s, Some(&spec), &st, &tracked)).is_empty(), "no reviewer approved yet");
    let approve = |head: &str| {
        let file = aoctl_api::review::ReviewFile { verdict: Verdict::Approve, body: String::new(), comments: vec![] };
        ReviewerVerdict::of(0, "s-review-1-0", head, &file)
    };
    st.review.get_or_insert_with(ReviewStatus::default).record(approve("h1"));
    assert!(keys(super::due(&s, Some(&spec), &st, &tracked)).is_empty(), "an older head was approved");
    st.review.get_or_insert_with(ReviewStatus::default).record(approve("h2"));
    assert_eq!(keys(super::due(&s, Some(&spec), &st, &tracked)), ["approved-and-green"]);
}
