//! CI results of a commit: its newest pipeline's jobs combined into one state, the failing ones
//! listed, the tail of a failing job's log for the agent, and retrying a job.

use aoctl_api::session::ChecksState;
use aoctl_forge_types::{log_tail, CheckKind, Checks, FailingCheck, LOG_TAIL_BYTES, LOG_TAIL_LINES};
use http::Method;
use serde::Deserialize;

use aoctl_forge_core::{Call, Error, Read};

use crate::client::{escape, project_id, Client};

const LIST_PIPELINES: &str = "GET /projects/:id/pipelines";
const LIST_JOBS: &str = "GET /projects/:id/pipelines/:pipeline_id/jobs";
const JOB_TRACE: &str = "GET /projects/:id/jobs/:job_id/trace";
const RETRY_JOB: &str = "POST /projects/:id/jobs/:job_id/retry";

/// The `app` of a failing check that is a GitLab CI job; its id is the job id.
pub const GITLAB_CI: &str = "gitlab-ci";

/// Bytes of a job log read into memory: its end, enough for [`LOG_TAIL_LINES`] long lines.
const LOG_READ_BYTES: usize = 256 * 1024;

#[derive(Deserialize)]
struct WirePipeline {
    id: u64,
    #[serde(default)]
    status: String,
}

#[derive(Deserialize)]
struct WireJob {
    id: u64,
    name: String,
    status: String,
    #[serde(default)]
    allow_failure: bool,
    #[serde(default)]
    web_url: Option<String>,
    #[serde(default)]
    failure_reason: Option<String>,
}

/// Job statuses of a job that has not finished.
const UNFINISHED: &[&str] = &["created", "pending", "running", "waiting_for_resource", "preparing", "scheduled"];

impl Client {
    /// The combined state of the jobs of `sha`'s newest pipeline: failing when a job that may not
    /// fail failed or was canceled, else pending while one has not finished, else passing; `none`
    /// when the commit has no pipeline. Manual and skipped jobs do not count.
    pub async fn checks(&self, project: &str, sha: &str) -> Result<Checks, Error> {
        let id = project_id(project)?;
        let what = || format!("commit {project}@{sha}");
        let path = format!("/projects/{id}/pipelines?sha={}&order_by=id&sort=desc&per_page=20", escape(sha));
        let (pipelines, _) = self.get_pages::<WirePipeline>(LIST_PIPELINES, &path, what).await?;
        let Some(pipeline) = pipelines.iter().max_by_key(|p| p.id) else {
            return Ok(Checks { state: ChecksState::None, failing: vec![] });
        };
        let path = format!("/projects/{id}/pipelines/{}/jobs?per_page=100", pipeline.id);
        let (jobs, _) = self.get_pages::<WireJob>(LIST_JOBS, &path, what).await?;
        let (mut counted, mut pending) = (0usize, false);
        let mut failing = vec![];
        for job in jobs {
            match job.status.as_str() {
                "manual" | "skipped" => continue,
                s if UNFINISHED.contains(&s) => pending = true,
                "failed" | "canceled" if !job.allow_failure => failing.push(FailingCheck {
                    conclusion: conclusion(&job.status, job.failure_reason.as_deref()).to_string(),
                    name: job.name,
                    id: job.id,
                    details_url: job.web_url,
                    kind: CheckKind::CheckRun,
                    app: Some(GITLAB_CI.to_string()),
                }),
                _ => {}
            }
            counted += 1;
        }
        // A pipeline still being created has no jobs yet, and is not green.
        if counted == 0 && UNFINISHED.contains(&pipeline.status.as_str()) {
            pending = true;
        }
        let state = if !failing.is_empty() {
            ChecksState::Failing
        } else if pending {
            ChecksState::Pending
        } else if counted > 0 {
            ChecksState::Passing
        } else {
            ChecksState::None
        };
        Ok(Checks { state, failing })
    }

    /// The end of a failing job's log, with GitLab's section markers and ANSI escapes removed;
    /// `None` when the check is not a job or its log is empty or gone.
    pub async fn failing_log_tail(&self, project: &str, check: &FailingCheck) -> Result<Option<String>, Error> {
        if check.app.as_deref() != Some(GITLAB_CI) {
            return Ok(None);
        }
        let id = project_id(project)?;
        let path = format!("/projects/{id}/jobs/{}/trace", check.id);
        let url = self.core.url(&path);
        let reply = self.core.send(Call::new(Method::GET, JOB_TRACE, &url).read(Read::Tail(LOG_READ_BYTES))).await?;
        match reply.status.as_u16() {
            200..=299 => {}
            // Erased, expired or invisible logs.
            403 | 404 | 410 => return Ok(None),
            _ => {
                self.core.success(JOB_TRACE, reply, || format!("log of job {}", check.id))?;
                return Ok(None);
            }
        }
        let text = strip_sections(&String::from_utf8_lossy(&reply.body));
        let tail = log_tail(&text, LOG_TAIL_LINES, LOG_TAIL_BYTES);
        Ok((!tail.is_empty()).then_some(tail))
    }

    /// Retries one finished job (GitLab makes a new job in the same pipeline). GitLab answers
    /// 403 for a job that cannot be retried.
    pub async fn retry_job(&self, project: &str, job_id: u64) -> Result<(), Error> {
        let id = project_id(project)?;
        let path = format!("/projects/{id}/jobs/{job_id}/retry");
        let url = self.core.url(&path);
        let reply = self.core.send(Call::new(Method::POST, RETRY_JOB, &url)).await?;
        self.core.success(RETRY_JOB, reply, || format!("job {job_id} of {project}"))?;
        Ok(())
    }
}

/// The forge-neutral conclusion of a failed or canceled job.
fn conclusion(status: &str, reason: Option<&str>) -> &'static str {
    match (status, reason) {
        ("canceled", _) => "cancelled",
        (_, Some("job_execution_timeout")) => "timed_out",
        _ => "failure",
    }
}

/// A job log without GitLab's `section_start:<time>:<name>` / `section_end:…` markers (each
/// ends in `\r` and an erase-line escape) and without carriage returns.
fn strip_sections(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for line in raw.split('\n') {
        let mut rest = line;
        let mut kept = String::new();
        let mut marked = false;
        while let Some(at) = rest.find("section_") {
            let (before, marker) = rest.split_at(at);
            let is_marker = marker.starts_with("section_start:") || marker.starts_with("section_end:");
            if !is_marker {
                kept.push_str(&rest[..at + "section_".len()]);
                rest = &rest[at + "section_".len()..];
                continue;
            }
            kept.push_str(before);
            marked = true;
            rest = match marker.find('\r') {
                Some(cr) => &marker[cr + 1..],
                None => "",
            };
        }
        kept.push_str(rest);
        // A line that held only a marker (and the erase-line escape after it) goes whole.
        if marked && kept.replace("\u{1b}[0K", "").trim().is_empty() {
            continue;
        }
        out.push_str(kept.trim_end_matches('\r'));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_markers_go() {
        let raw = "\u{1b}[0Ksection_start:1700000000:step_script\r\u{1b}[0K\u{1b}[36;1mExecuting \"step_script\"\u{1b}[0;m\n$ cargo test\nsection_end:1700000001:step_script\r\u{1b}[0K\nmy_section_name stays\r\n";
        let clean = log_tail(&strip_sections(raw), 50, 8192);
        assert_eq!(clean, "Executing \"step_script\"\n$ cargo test\nmy_section_name stays");
    }

    #[test]
    fn conclusions() {
        assert_eq!(conclusion("failed", None), "failure");
        assert_eq!(conclusion("failed", Some("job_execution_timeout")), "timed_out");
        assert_eq!(conclusion("canceled", None), "cancelled");
    }
}
