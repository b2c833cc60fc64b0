//! CI results of a commit: check runs and commit statuses combined into one state, the failing
//! ones listed, and the tail of a failing job's log for the agent.

use aoctl_api::session::ChecksState;
use http::Method;
use serde::Deserialize;

use crate::client::{decode, escape, segment, success, Client, Read};
use crate::error::Error;

const LIST_CHECK_RUNS: &str = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs";
const COMBINED_STATUS: &str = "GET /repos/{owner}/{repo}/commits/{ref}/status";
const GET_CHECK_RUN: &str = "GET /repos/{owner}/{repo}/check-runs/{check_run_id}";
const JOB_LOGS: &str = "GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs";
const RERUN_JOB: &str = "POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun";

/// The app slug of GitHub Actions; its check run ids are job ids.
pub const ACTIONS_APP: &str = "github-actions";

/// Lines kept from the end of a log.
pub(crate) const LOG_TAIL_LINES: usize = 50;

/// Bytes kept from the end of a log.
pub(crate) const LOG_TAIL_BYTES: usize = 8 * 1024;

/// Bytes of a job log read into memory: its end, enough for [`LOG_TAIL_LINES`] long lines.
const LOG_READ_BYTES: usize = 256 * 1024;

/// The combined CI state of a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checks {
    pub state: ChecksState,
    pub failing: Vec<FailingCheck>,
}

impl Checks {
    /// Identifies this set of failures, so a reaction fires once per distinct failure.
    pub fn fingerprint(&self) -> String {
        let mut parts: Vec<String> = self.failing.iter().map(|f| format!("{}#{}", f.name, f.id)).collect();
        parts.sort();
        parts.join(",")
    }
}

/// Where a failing check comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CheckKind {
    /// A check run (GitHub Actions or another app).
    CheckRun,
    /// A commit status (the older statuses API).
    Status,
}

/// One check that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailingCheck {
    /// The check run's name, or the status's context.
    pub name: String,
    /// The check run id (a job id for Actions), or the status id.
    pub id: u64,
    pub details_url: Option<String>,
    pub kind: CheckKind,
    /// `failure`, `timed_out`, `cancelled`, `action_required`, `startup_failure` or `error`.
    pub conclusion: String,
    /// The app that made a check run (`github-actions`); `None` for statuses.
    pub app: Option<String>,
}

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
        let pages: Vec<RunsPage> = self.get_pages(LIST_CHECK_RUNS, &path, what).await?;
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
            let path = format!("/repos/{o}/{r}/actions/jobs/{id}/logs");
            // The answer is a redirect to short-lived storage, so it is neither cached nor conditional.
            let reply = self.send(Method::GET, JOB_LOGS, &path, None, Read::Tail(LOG_READ_BYTES)).await?;
            match reply.status.as_u16() {
                200..=299 => {
                    let tail = log_tail(&String::from_utf8_lossy(&reply.body), LOG_TAIL_LINES, LOG_TAIL_BYTES);
                    return Ok((!tail.is_empty()).then_some(tail));
                }
                // Expired, invisible or forbidden logs: the check run's output is the next best thing.
                403 | 404 | 410 => {}
                _ => {
                    success(JOB_LOGS, reply, || format!("logs of job {id}"))?;
                }
            }
        }
        let path = format!("/repos/{o}/{r}/check-runs/{id}");
        let reply = self.send(Method::GET, GET_CHECK_RUN, &path, None, Read::Cached).await?;
        let reply = success(GET_CHECK_RUN, reply, || format!("check run {o}/{r}/{id}"))?;
        let run: WireRun = decode(GET_CHECK_RUN, &reply.body)?;
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
        let path = format!("/repos/{o}/{r}/actions/jobs/{job_id}/rerun");
        let reply = self.send(Method::POST, RERUN_JOB, &path, None, Read::Whole).await?;
        success(RERUN_JOB, reply, || format!("job {job_id} of {o}/{r}"))?;
        Ok(())
    }
}

/// Why a failed job's log tail looks like a failure of the infrastructure rather than of the
/// code — a lost runner, a timeout or a network error — or `None` when it does not.
pub fn flaky_cause(log_tail: &str) -> Option<&'static str> {
    const CAUSES: &[(&str, &[&str])] = &[
        (
            "the runner was lost",
            &[
                "the runner has received a shutdown signal",
                "lost communication with the server",
                "the hosted runner lost communication",
                "runner lost",
                "the self-hosted runner went offline",
            ],
        ),
        (
            "a timeout",
            &[
                "has timed out after",
                "exceeded the maximum execution time",
                "operation timed out",
                "connection timed out",
                "etimedout",
                "i/o timeout",
            ],
        ),
        (
            "a network error",
            &[
                "econnreset",
                "econnrefused",
                "connection reset by peer",
                "could not resolve host",
                "temporary failure in name resolution",
                "network is unreachable",
                "tls handshake timeout",
                "502 bad gateway",
                "503 service unavailable",
            ],
        ),
    ];
    let text = log_tail.to_ascii_lowercase();
    CAUSES.iter().find(|(_, needles)| needles.iter().any(|n| text.contains(n))).map(|(cause, _)| *cause)
}

/// The last `max_lines` lines of a log, at most `max_bytes` long, with ANSI escapes, GitHub's
/// leading timestamps, `##[group]` markers and trailing blank lines removed.
pub(crate) fn log_tail(raw: &str, max_lines: usize, max_bytes: usize) -> String {
    let lines: Vec<String> = raw
        .trim_start_matches('\u{feff}')
        .lines()
        .map(|line| strip_ansi(strip_timestamp(line)))
        .filter(|line| line.trim() != "##[endgroup]")
        .map(|line| match line.strip_prefix("##[group]") {
            Some(rest) => rest.to_string(),
            None => line.trim_end().to_string(),
        })
        .collect();
    let end = lines.iter().rposition(|l| !l.trim().is_empty()).map_or(0, |i| i + 1);
    let start = end.saturating_sub(max_lines);
    let mut tail = lines[start..end].join("\n");
    if tail.len() > max_bytes {
        let mut cut = tail.len() - max_bytes;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        // Start at a line boundary when one is in the kept part.
        if let Some(nl) = tail[cut..].find('\n') {
            cut += nl + 1;
        }
        tail = tail[cut..].to_string();
    }
    tail
}

/// Removes the `2024-01-02T03:04:05.1234567Z ` prefix that Actions puts on every line.
fn strip_timestamp(line: &str) -> &str {
    let b = line.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    let shape = b.len() > 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !shape {
        return line;
    }
    let mut i = 19;
    if b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if b.get(i) != Some(&b'Z') {
        return line;
    }
    let rest = &line[i + 1..];
    rest.strip_prefix(' ').unwrap_or(rest)
}

/// Removes ANSI escape sequences (CSI such as colours, OSC such as hyperlinks, and two-byte ones).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            if c != '\r' {
                out.push(c);
            }
            continue;
        }
        match chars.next() {
            Some('[') => {
                // Parameters and intermediates, then one final byte in @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                // Ends with BEL or ESC \.
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_timestamps_and_ansi() {
        let raw = "\u{feff}2024-05-01T10:00:00.1234567Z ##[group]Run cargo test\n\
                   2024-05-01T10:00:01.0000000Z \u{1b}[1m\u{1b}[31merror[E0308]\u{1b}[0m: mismatched types\r\n\
                   2024-05-01T10:00:02Z ##[endgroup]\n\
                   2024-05-01T10:00:03.5Z \u{1b}]8;;https://x\u{7}link\u{1b}]8;;\u{7} done\n\
                   not a 2024-05-01T10:00:03Z timestamp\n\n\n";
        assert_eq!(
            log_tail(raw, 50, 8192),
            "Run cargo test\nerror[E0308]: mismatched types\nlink done\nnot a 2024-05-01T10:00:03Z timestamp"
        );
    }

    #[test]
    fn tells_flaky_failures_from_real_ones() {
        let lost = "Run cargo test\n##[error]The runner has received a shutdown signal. This can happen when the runner service is stopped.";
        assert_eq!(flaky_cause(lost), Some("the runner was lost"));
        assert_eq!(
            flaky_cause("##[error]The job running on runner X has timed out after 360 minutes."),
            Some("a timeout")
        );
        assert_eq!(
            flaky_cause("error: failed to download: Connection reset by peer (os error 104)"),
            Some("a network error")
        );
        assert_eq!(flaky_cause("curl: (6) Could not resolve host: index.crates.io"), Some("a network error"));
        let real = "test login::redirect_once ... FAILED\nerror: test failed, to rerun pass `--lib`";
        assert_eq!(flaky_cause(real), None);
        assert_eq!(flaky_cause(""), None);
    }

    #[test]
    fn keeps_the_last_lines_within_bounds() {
        let raw: String = (1..=200).map(|i| format!("2024-05-01T10:00:00.0Z line {i}\n")).collect();
        let tail = log_tail(&raw, 50, 8192);
        assert_eq!(tail.lines().count(), 50);
        assert!(tail.starts_with("line 151\n") && tail.ends_with("line 200"));

        let long: String = (0..50).map(|i| format!("{i} {}\n", "é".repeat(200))).collect();
        let tail = log_tail(&long, 50, 8192);
        assert!(tail.len() <= 8192);
        assert!(tail.ends_with(&"é".repeat(200)));
        assert!(tail.split('\n').next().unwrap().chars().next().unwrap().is_ascii_digit());
    }
}
