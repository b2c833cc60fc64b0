//! The session reconciler against a forge of the test's own ([`crate::forges::Hub::give`]): what
//! it reads of a pull request, and what of it reaches the agent, counted call by call.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use aoctl_api::session::{ChecksState, ReviewState};
use aoctl_forge_types::{
    CheckKind, Checks, FailingCheck, Issue, IssueList, LabelEvent, MergeMethod, NewComment, PullRequest, Review,
    ReviewComment, ReviewEvent, Reviews, Standing,
};
use serde_json::json;

use super::tests::{open_pull, World};
use crate::forges::{Forge, ForgeError, Tracker};

/// The last lines of the failing job's log.
const TAIL: &str = "redirect loop detected: /login -> /home -> /login";

/// A forge holding one open pull request whose job `test` (a GitHub Actions job) fails, and
/// counting what is asked of it.
#[derive(Debug, Default)]
struct FailingCi {
    polls: AtomicUsize,
    log_reads: AtomicUsize,
    writes: AtomicUsize,
}

#[async_trait::async_trait]
impl Tracker for FailingCi {
    fn name(&self) -> &'static str {
        "a test forge"
    }

    fn budget(&self) -> &Arc<aoctl_forge_core::Budget> {
        static BUDGET: std::sync::OnceLock<Arc<aoctl_forge_core::Budget>> = std::sync::OnceLock::new();
        BUDGET.get_or_init(|| Arc::new(aoctl_forge_core::Budget::new()))
    }

    fn describe(&self) -> String {
        "test-forge acme/web".into()
    }

    fn forge(&self) -> Option<&dyn Forge> {
        Some(self)
    }

    async fn issue(&self, reference: &str) -> Result<Issue, ForgeError> {
        Err(ForgeError::Unsupported(format!("no issue {reference}")))
    }

    async fn list(&self, _q: &aoctl_api::issuesource::IssueSourceSpec) -> Result<IssueList, ForgeError> {
        Ok(IssueList { issues: vec![], changed: false })
    }
}

#[async_trait::async_trait]
impl Forge for FailingCi {
    fn place(&self) -> String {
        "acme/web".into()
    }

    fn change_name(&self, number: u64, _long: bool) -> String {
        format!("change {number}")
    }

    fn trusted_state(&self, all: ReviewState, _items: &[Review], _comments: &[ReviewComment]) -> ReviewState {
        all
    }

    async fn identity(&self) -> Result<String, ForgeError> {
        Ok("aoctl-bot".into())
    }

    async fn find_for_branch(&self, _branch: &str) -> Result<Option<PullRequest>, ForgeError> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        Ok(Some(open_pull()))
    }

    async fn change(&self, _number: u64) -> Result<PullRequest, ForgeError> {
        Ok(open_pull())
    }

    async fn create(&self, _: &str, _: &str, _: &str, _: &str, _: bool) -> Result<PullRequest, ForgeError> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok(open_pull())
    }

    async fn checks(&self, _sha: &str) -> Result<Checks, ForgeError> {
        let failing = FailingCheck {
            name: "test".into(),
            id: 11,
            details_url: None,
            kind: CheckKind::CheckRun,
            conclusion: "failure".into(),
            app: Some("github-actions".into()),
        };
        Ok(Checks { state: ChecksState::Failing, failing: vec![failing] })
    }

    async fn failing_log_tail(&self, check: &FailingCheck) -> Result<Option<String>, ForgeError> {
        self.log_reads.fetch_add(1, Ordering::SeqCst);
        Ok((check.id == 11).then(|| format!("error[E0308]: mismatched types\n{TAIL}")))
    }

    fn can_rerun(&self, _check: &FailingCheck) -> bool {
        false
    }

    async fn rerun_job(&self, _job_id: u64) -> Result<(), ForgeError> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn reviews(&self, _number: u64) -> Result<Reviews, ForgeError> {
        Ok(Reviews { state: ReviewState::None, items: vec![], comments: vec![] })
    }

    async fn create_review(
        &self,
        _: u64,
        _: &str,
        _: ReviewEvent,
        _: &str,
        _: &[NewComment],
    ) -> Result<u64, ForgeError> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok(1)
    }

    async fn merge(&self, _: u64, _: MergeMethod, _: &str) -> Result<String, ForgeError> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok("merged".into())
    }

    async fn label_events(&self, _number: u64) -> Result<Vec<LabelEvent>, ForgeError> {
        Ok(vec![])
    }

    async fn standing(&self, _login: &str, _id: Option<u64>) -> Result<Standing, ForgeError> {
        Ok(Standing::default())
    }
}

#[tokio::test]
async fn a_failed_jobs_log_tail_is_read_once_and_typed_into_the_agent_once() {
    let w = World::new().await;
    let forge = Arc::new(FailingCi::default());
    w.ctx.forges.give("demo", forge.clone());
    w.project(json!({"repo": "acme/web"})).await;
    w.session("web", json!({"pullRequest": {"create": false}})).await;
    w.running("web").await;

    // Polled again and again (as if each poll were due): the failure stays the same.
    for _ in 0..4 {
        let mut memo = w.ctx.state.pr_memo("web");
        memo.next_poll = Some(Instant::now());
        w.ctx.state.set_pr_memo("web", memo);
        w.reconcile("web").await;
    }
    assert!(forge.polls.load(Ordering::SeqCst) >= 4, "each due reconcile asked the forge");
    assert_eq!(forge.log_reads.load(Ordering::SeqCst), 1, "the log of a job that still fails is read once");
    assert_eq!(forge.writes.load(Ordering::SeqCst), 0, "nothing was written to the forge");
    let typed: Vec<String> = w.runtime.typed().into_iter().filter(|t| t.contains("test")).collect();
    assert_eq!(typed.len(), 1, "typed once: {typed:#?}");
    assert!(typed[0].contains(TAIL), "the log's last lines reach the agent: {}", typed[0]);
    let s = w.get("web").await;
    assert_eq!(s.status.reactions["ci-failed"].attempts, 1);
    assert_eq!(s.status.pull_request.as_ref().map(|p| p.number), Some(7));
}
