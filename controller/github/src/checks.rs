//! CI results of a commit: check runs and commit statuses combined into one state, the failing
//! ones listed, and the tail of a failing job's log for the agent.

use aoctl_api::session::ChecksState;
use aoctl_forge_core::{Call, Error, Read};
use http::Method;
use serde::Deserialize;

use aoctl_forge_types::{log_tail, CheckKind, Checks, FailingCheck, LOG_TAIL_BYTES, LOG_TAIL_LINES};

use crate::client::{escape, segment, Client};

const LIST_CHECK_RUNS: &str = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs";
const COMBINED_STATUS: &str = "GET /repos/{owner}/{repo}/commits/{ref}/status";
const GET_CHECK_RUN: &str = "GET /repos/{owner}/{repo}/check-runs/{check_run_id}";
const JOB_LOGS: &str = "GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs";
const RERUN_JOB: &str = "POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun";

/// The app slug of GitHub Actions; its check run ids are job ids.
pub const ACTIONS_APP: &str = "github-actions";

/// Bytes of a job log read into memory: its end, enough for [`LOG_TAIL_LINES`] long lines.
const LOG_READ_BYTES: usize = 256 * 1024;

#[derive(Deserialize)]
struct RunsPage {
    check_runs: Vec<WireRun>,
}

#[derive(Deserialize)]
struct WireApp {
    slug: Option<String>,
}

#[derive(Deserialize)]
struct WireOutput {
    title: Option<String>,
    summary: Option<String>,
    text: Option<String>,
}

#[derive(Deserialize)]
struct WireRun {
    id: u64,
    name: String,
    status: String,
    conclusion: Option<String>,
    details_url: Option<String>,
    html_url: Option<String>,
    app: Option<WireApp>,
    output: Option<WireOutput>,
}

#[derive(Deserialize)]
struct CombinedStatus {
    statuses: Vec<WireStatus>,
}

#[derive(Deserialize)]
struct WireStatus {
    id: u64,
    context: String,
    state: String,
    target_url: Option<String>,
}

/// Check-run conclusions that count as a failure.
const FAILED_CONCLUSIONS: &[&str] = &["failure", "timed_out", "cancelled", "action_required", "startup_failure"];

impl Client {
    /// The combined state of the check runs and commit statuses of `sha`: failing when any
    /// failed, else pending when any has not finished, else passing; `none` when there are none.
    pub async fn checks(&self, owner: &str, repo: &str, sha: &str) -> Result<Checks, Error> {
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        let what = || format!("commit {o}/{r}@{sha}");
        let sha_path = escape(sha);
        let path = format!("/repos/{o}/{r}/commits/{sha_path}/check-runs?filter=latest&per_page=100");
        let (pages, _): (Vec<RunsPage>, _) = self.get_pages(LIST_CHECK_RUNS, &path, what).await?;
        let path = format!("/repos/{o}/{r}/commits/{sha_path}/status?per_page=100");
        let combined: CombinedStatus = self.get_json(COMBINED_STATUS, &path, what).await?;

        let (mut total, mut pending) = (0usize, false);
        let mut failing = Vec::new();
        for run in pages.into_iter().flat_map(|p| p.check_runs) {
            total += 1;
            if run.status != "completed" {
                pending = true;
                continue;
            }
            let conclusion = run.conclusion.unwrap_or_default();
            if FAILED_CONCLUSIONS.contains(&conclusion.as_str()) {
                failing.push(FailingCheck {
                    name: run.name,
                    id: run.id,
                    details_url: run.details_url.or(run.html_url),
                    kind: CheckKind::CheckRun,
                    conclusion,
                    app: run.app.and_then(|a| a.slug),
                });
            }
        }
        for status in combined.statuses {
            total += 1;
            match status.state.as_str() {
                "success" => {}
                "failure" | "error" => failing.push(FailingCheck {
                    name: status.context,
                    id: status.id,
                    details_url: status.target_url,
                    kind: CheckKind::Status,
                    conclusion: status.state,
                    app: None,
                }),
                _ => pending = true,
            }
        }
        let state = if !failing.is_empty() {
            ChecksState::Failing
        } else if pending {
            ChecksState::Pending
        } else if total > 0 {
            ChecksState::Passing
        } else {
            ChecksState::None
        };
        Ok(Checks { state, failing })
    }

    /// The end of what a failing check printed: the job log for Actions (ANSI escapes and
    /// timestamps stripped), else the check run's output; `None` for statuses or when nothing
    /// is available.
    pub async fn failing_log_tail(
        &self,
        owner: &str,
        repo: &str,
        check: &FailingCheck,
    ) -> Result<Option<String>, Error> {
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        if check.kind == CheckKind::Status {
            return Ok(None);
        }
        let id = check.id;
        if check.app.as_deref() == Some(ACTIONS_APP) {
            let url = self.rest.url(&format!("/repos/{o}/{r}/actions/jobs/{id}/logs"));
            // The answer is a redirect to short-lived storage, so it is neither cached nor conditional.
            let call = Call::new(Method::GET, JOB_LOGS, &url).read(Read::Tail(LOG_READ_BYTES));
            let reply = self.rest.send(call).await?;
            match reply.status.as_u16() {
                200..=299 => {
                    let tail = log_tail(&String::from_utf8_lossy(&reply.body), LOG_TAIL_LINES, LOG_TAIL_BYTES);
                    return Ok((!tail.is_empty()).then_some(tail));
                }
                // Expired, invisible or forbidden logs: the check run's output is the next best thing.
                403 | 404 | 410 => {}
                _ => {
                    self.rest.success(JOB_LOGS, reply, || format!("logs of job {id}"))?;
                }
            }
        }
        let path = format!("/repos/{o}/{r}/check-runs/{id}");
        let run: WireRun = self.get_json(GET_CHECK_RUN, &path, || format!("check run {o}/{r}/{id}")).await?;
        let Some(output) = run.output else { return Ok(None) };
        let text: Vec<String> = [output.title, output.summary, output.text].into_iter().flatten().collect();
        let tail = log_tail(&text.join("\n"), LOG_TAIL_LINES, LOG_TAIL_BYTES);
        Ok((!tail.is_empty()).then_some(tail))
    }
}

impl Client {
    /// Re-runs one GitHub Actions job (a check run of [`ACTIONS_APP`]; its id is the job id) and
    /// the jobs that depend on it. GitHub answers 403 for a job that cannot be re-run (one still
    /// running, or of a run too old).
    pub async fn rerun_job(&self, owner: &str, repo: &str, job_id: u64) -> Result<(), Error> {
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        let url = self.rest.url(&format!("/repos/{o}/{r}/actions/jobs/{job_id}/rerun"));
        let reply = self.rest.send(Call::new(Method::POST, RERUN_JOB, &url)).await?;
        self.rest.success(RERUN_JOB, reply, || format!("job {job_id} of {o}/{r}"))?;
        Ok(())
    }
}
