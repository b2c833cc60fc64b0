//! Tests of an IssueSource's pass: what it plans for the issues and sessions it finds.

use aoctl_api::session::{ChecksState, PullRequestStatus, ReviewState};

use super::*;

fn issue(number: u64) -> Issue {
    Issue {
        number,
        reference: format!("#{number}"),
        title: format!("Issue {number}"),
        body: "Steps".into(),
        url: format!("https://github.com/o/r/issues/{number}"),
        labels: vec!["agent".into()],
        open: true,
        author: None,
        updated_at: String::new(),
    }
}

fn session(n: u64) -> Session {
    let mut s = Session::default();
    s.metadata.name = session_name("bugs", n);
    s.metadata.annotations.insert(MANAGED_BY.into(), "issuesource/bugs".into());
    s.spec.issue = Some(n.to_string());
    s
}

fn stopped_by_source(n: u64) -> Session {
    let mut s = session(n);
    s.spec.stopped = true;
    s.metadata.annotations.insert(STOPPED_BY.into(), "issuesource/bugs".into());
    s
}

fn with_pr(mut s: Session, state: PullRequestState) -> Session {
    s.status.pull_request = Some(PullRequestStatus {
        number: 9,
        url: String::new(),
        state,
        head_sha: None,
        checks: ChecksState::None,
        review: ReviewState::None,
        mergeable: None,
    });
    s
}

struct World {
    issues: Vec<Issue>,
    mine: BTreeMap<u64, Session>,
    merged: HashSet<u64>,
    others: HashSet<String>,
}

impl World {
    fn new(open: &[u64], sessions: Vec<Session>) -> World {
        let mine = sessions.into_iter().map(|s| (s.spec.issue.as_ref().unwrap().parse().unwrap(), s)).collect();
        World { issues: open.iter().map(|n| issue(*n)).collect(), mine, merged: HashSet::new(), others: HashSet::new() }
    }

    fn plan(&self, max: Option<u32>, on_close: OnClose) -> Plan {
        let matching = self.issues.iter().map(|i| (i.number, i)).collect();
        plan(&matching, &self.mine, &self.merged, &self.others, max, on_close, "bugs")
    }
}

fn states(p: &Plan) -> Vec<(String, String)> {
    p.entries.iter().map(|e| (e.issue.clone(), e.state.clone().unwrap())).collect()
}

#[test]
fn oldest_issues_first_up_to_max_sessions_and_the_rest_wait() {
    let w = World::new(&[7, 3, 5, 9], vec![]);
    let p = w.plan(Some(2), OnClose::Stop);
    assert_eq!(p.actions, [Step::Create(3), Step::Create(5)]);
    assert_eq!(p.waiting, [7, 9]);
    let p = w.plan(None, OnClose::Stop);
    assert_eq!(p.actions.len(), 4);
    assert!(p.waiting.is_empty());
}

#[test]
fn finished_and_source_stopped_sessions_free_their_place() {
    let mut merged = with_pr(session(1), PullRequestState::Merged);
    merged.status.phase = Some(Phase::Merged);
    let w = World::new(&[1, 2, 3, 4], vec![merged, stopped_by_source(2), session(3)]);
    // #1 is finished, #3 works; #2 (stopped by the source) resumes before #4 is made.
    let p = w.plan(Some(2), OnClose::Stop);
    assert_eq!(p.actions, [Step::Resume(2)]);
    assert_eq!(p.waiting, [4]);
    let p = w.plan(Some(1), OnClose::Stop);
    assert_eq!((p.actions.as_slice(), p.waiting.as_slice()), (&[][..], &[2, 4][..]));
    assert_eq!(
        states(&p),
        [("1".into(), "finished".into()), ("3".into(), "open".into()), ("2".into(), "closed".into())]
    );
    let p = w.plan(Some(3), OnClose::Stop);
    assert_eq!(p.actions, [Step::Resume(2), Step::Create(4)]);

    // A stop a person made is not undone, and the session keeps its place.
    let mut by_hand = session(2);
    by_hand.spec.stopped = true;
    let w = World::new(&[2, 3], vec![by_hand]);
    let p = w.plan(Some(1), OnClose::Stop);
    assert_eq!((p.actions.as_slice(), p.waiting.as_slice()), (&[][..], &[3][..]));
}

#[test]
fn a_closed_issue_ends_its_session_per_on_close() {
    let w = World::new(&[], vec![session(1), stopped_by_source(2)]);
    assert_eq!(w.plan(None, OnClose::Delete).actions, [Step::Delete(1), Step::Delete(2)]);
    let p = w.plan(None, OnClose::Stop);
    assert_eq!(p.actions, [Step::Stop(1)], "a stopped one is not stopped again");
    assert_eq!(states(&p), [("1".into(), "closed".into()), ("2".into(), "closed".into())]);
    let p = w.plan(None, OnClose::Keep);
    assert!(p.actions.is_empty());
    assert_eq!(states(&p).len(), 2);
}

#[test]
fn a_merged_pull_request_finishes_the_session_whatever_on_close_says() {
    let mut w = World::new(
        &[],
        vec![with_pr(session(1), PullRequestState::Open), with_pr(session(2), PullRequestState::Merged)],
    );
    w.merged.insert(1);
    for on_close in [OnClose::Delete, OnClose::Stop] {
        let p = w.plan(Some(1), on_close);
        assert!(p.actions.is_empty(), "{on_close}: {p:?}");
        assert_eq!(states(&p), [("1".into(), "finished".into()), ("2".into(), "finished".into())]);
    }
    // Reopened after the merge: the finished session stays, and frees its place.
    let w = World::new(&[2, 3], vec![with_pr(session(2), PullRequestState::Merged)]);
    assert_eq!(w.plan(Some(1), OnClose::Stop).actions, [Step::Create(3)]);
}

#[test]
fn deleted_sessions_are_made_again_and_foreign_names_are_reported() {
    let mut going = session(1);
    going.metadata.deletion_timestamp = Some(Time::now());
    let mut w = World::new(&[1, 2], vec![going]);
    w.others.insert("bugs-2".into());
    let p = w.plan(None, OnClose::Delete);
    assert!(p.actions.is_empty(), "#1 is made again once its old session is gone: {p:?}");
    assert_eq!(p.problems.len(), 1);
    assert_eq!(p.problems[0].0, SESSION_NAME_TAKEN);
    assert!(p.problems[0].1.contains("bugs-2"), "{:?}", p.problems);
}

#[test]
fn sessions_are_made_from_the_template_or_a_clear_reason() {
    let mut source = IssueSource::default();
    source.metadata.name = "bugs".into();
    source.metadata.uid = Some("u-1".into());
    source.spec.project = "demo".into();
    source.spec.template.prompt = Some("Fix #{{number}}: {{title}} [{{labels}}] {{url}}".into());
    source.spec.template.labels.insert("team".into(), "web".into());
    let s = session_for(&source, &issue(42)).unwrap();
    assert_eq!(s.metadata.name, "bugs-42");
    assert_eq!(s.spec.prompt.as_deref(), Some("Fix #42: Issue 42 [agent] https://github.com/o/r/issues/42"));
    assert_eq!((s.spec.project.as_str(), s.spec.issue.as_deref()), ("demo", Some("42")));
    assert_eq!(s.metadata.annotations[MANAGED_BY], "issuesource/bugs");
    assert_eq!(s.metadata.labels["team"], "web");
    let owner = &s.metadata.owner_references[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("IssueSource", "u-1", Some(false)));

    source.metadata.name = "b".repeat(61);
    let (reason, msg) = session_for(&source, &issue(42)).unwrap_err();
    assert_eq!(reason, INVALID_SESSION_NAME);
    assert!(msg.contains("issue #42"), "{msg}");

    source.metadata.name = "bugs".into();
    source.spec.template.agent_args = vec![String::new()];
    source.spec.template.base_ref = Some("bad ref..".into());
    let (reason, msg) = session_for(&source, &issue(42)).unwrap_err();
    assert_eq!(reason, conditions::INVALID_TEMPLATE, "{msg}");
}

#[test]
fn a_poll_is_due_after_the_interval_or_when_asked_for() {
    let state = State::default();
    let minute = Duration::from_secs(60);
    assert!(state.fresh("bugs", "q", minute).is_none(), "never read");
    state.store("bugs", "q".into(), Arc::new(vec![issue(1)]), Instant::now());
    let (issues, left) = state.fresh("bugs", "q", minute).unwrap();
    assert_eq!((issues.len(), left <= minute), (1, true));
    assert!(state.fresh("bugs", "other query", minute).is_none());
    assert!(state.fresh("bugs", "q", Duration::ZERO).is_none());
    state.poll_now("bugs");
    assert!(state.fresh("bugs", "q", minute).is_none());
    state.store("bugs", "q".into(), Arc::new(vec![]), Instant::now());
    assert!(state.fresh("bugs", "q", minute).is_some());
    state.forget("bugs");
    assert!(state.fresh("bugs", "q", minute).is_none());
}
