//! What one session spends of its token while CI fails and its agent works, counted by the GitHub
//! stand-in (which counts as GitHub does: a 304 costs nothing, a log's redirect costs one): three
//! failing jobs, an agent whose spinner redraws its screen every half second without end (so its
//! session reconciles again and again), a poll interval of two seconds. The failure reaches the
//! agent once, each job's log is read once, and while it goes on failing the forge costs next to
//! nothing (the GitLab side is in gitlab_loop.rs). Bounds are counts, not times.

use std::time::Duration;

use serde_json::{json, Value};

use crate::github_feedback::heard;
use crate::lifecycle::{Cleanup, READY};
use crate::standin::{count, delivered, head, is, metric, session, Gh, REPO};

const PROJECT: &str = "widgets";
/// How long the failure goes on while the agent redraws its screen.
const FAILING: Duration = Duration::from_secs(30);
/// The GitHub Actions job-log route: each read is one counted request (its 302).
const JOB_LOGS: &str = "GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs";

fn routes(asked: &Value, route: &str) -> u64 {
    asked["byRoute"][route]["total"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_budget_a_failing_ci_with_a_working_agent_spends_almost_nothing() {
    let gh = Gh::start(REPO, true).await;
    let _cleanup = Cleanup::new(&gh.server);
    gh.server.create("projects", &gh.project(PROJECT, REPO, "2s", json!({}))).await;
    gh.project_ready(PROJECT).await;
    let name = "spinning";
    let spec = json!({"env": {"DEMO_AGENT_SPIN": "forever"}});
    gh.server.create("sessions", &session(name, PROJECT, "Fix the login redirect loop", spec)).await;
    gh.server.wait_for("sessions", name, READY, |o| is(o, "PullRequestOpen", "True")).await;
    let first = head(&gh.repos.bare, &format!("{PROJECT}/{name}")).expect("the agent pushed");

    // Three jobs fail on the head; from here every request is counted.
    gh.standin.ok("DELETE", "/_standin/requests", None).await;
    let reconciles_before = metric(&gh.server, "aoctl_reconcile_total", &[("controller", "session")]).await;
    for job in ["build", "test", "lint"] {
        let log = format!("Run {job}\nerror: {job} failed at step 3\n##[error]Process completed with exit code 1.");
        delivered(&gh.standin.check_run(&first, job, "failure", &log).await, 202);
    }
    // The failure reaches the agent with the logs of the jobs failing when aoctl looked (a job
    // that fails later, on a head the agent already replaced, is no news).
    heard(&gh, name, "got: Please fix the failure and push.").await;
    // The agent pushes a fix whose checks never report, so the episode goes on (a pushed head
    // without checks does not end it) while the spinner keeps redrawing the agent's screen.
    tokio::time::sleep(FAILING).await;

    let asked = gh.standin.requests().await;
    let reconciles =
        metric(&gh.server, "aoctl_reconcile_total", &[("controller", "session")]).await - reconciles_before;
    let (total, counted) = (asked["total"].as_u64().unwrap_or(0), asked["counted"].as_u64().unwrap_or(0));
    eprintln!(
        "forge_budget: {reconciles} session reconciles in {}s; {total} requests, {counted} counted; by route: {}",
        FAILING.as_secs(),
        asked["byRoute"]
    );
    // The screen kept changing, so the session was reconciled again and again: the test is real.
    assert!(reconciles >= 20.0, "the spinner made few reconciles ({reconciles}): the story did not happen");
    // Each failing job's log was read at most once, however often the session was reconciled.
    let log = gh.standin.ok("GET", "/_standin/requests?log=1", None).await;
    let mut paths: Vec<&str> = log["log"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["route"] == JOB_LOGS)
        .filter_map(|r| r["path"].as_str())
        .collect();
    let reads = paths.len();
    paths.sort_unstable();
    paths.dedup();
    assert!(reads >= 1 && reads == paths.len(), "each failing job's log is read once: {reads} reads of {paths:?}");
    assert!(routes(&asked, JOB_LOGS) <= 3, "{asked:#}");
    // A generous bound on everything counted: the checks and reviews read when the jobs failed,
    // the new head the agent pushed and the mergeability GitHub computes for it; never a storm
    // (before, over 600 in 60 s).
    assert!(counted <= 40, "{counted} counted requests in {}s: {asked:#}", FAILING.as_secs());
    let t = crate::lifecycle::transcript(&gh.server, name);
    assert_eq!(count(&t, "got: [aoctl:ci-failed:"), 1, "the failure reached the agent once:\n{t}");
}
