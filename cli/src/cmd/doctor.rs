//! `aoctl doctor`: checks what aoctl needs on this machine and from its server, one check a line,
//! each failure with its fix: tmux, git, the data directory and its token, the server and whether
//! it takes the token, the agent CLIs its projects and sessions use, the docker engines, the forge
//! tokens and webhooks. Every check is bounded in time; independent ones run at once. Exits 0
//! when nothing failed (warnings do not fail), 1 otherwise.
//!
//! What it looks at is this shell's environment (its PATH, HOME and token variables): the server
//! `aoctl up` starts inherits it, so that is what its agents and forge clients get. A server
//! started elsewhere (a service, a container) may see another.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use aoctl_api::condition::types;
use aoctl_api::session::{AgentRef, RuntimeKind};
use aoctl_api::{Kind, Project, Session};
use aoctl_controller::forges;
use aoctl_runtimes::agents::{self, Adapter};
use aoctl_runtimes::docker::DockerRuntime;
use aoctl_runtimes::program::output_of;
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;

use super::emit;
use crate::args::{DoctorArgs, Global, ReportFormat};
use crate::client::{Client, ClientError, ListParams};

/// How long `tmux -V` and `git --version` may take.
const TOOL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an agent CLI's `--version` may take (Node.js CLIs are slow to start).
const AGENT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request to the aoctl server may take.
const SERVER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting to and pinging a docker engine may take.
const DOCKER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one request to a forge may take.
const FORGE_TIMEOUT: Duration = Duration::from_secs(10);
/// How many agent CLIs are started at once for their versions: each is a Node.js or Python
/// start-up, and `--all-agents` asks two dozen.
const AGENTS_AT_ONCE: usize = 4;

/// The least tmux: sessions start with `new-session -e` and their panes get a `pane-died` hook
/// (`set-hook -p`); both came in tmux 3.2 (its CHANGES, "3.1c to 3.2").
const TMUX_MIN: (u64, u64) = (3, 2);
/// The least git: a pull request's base is fetched with `git fetch --no-write-fetch-head` to find
/// merge conflicts, an option that came in git 2.29.
const GIT_MIN: (u64, u64) = (2, 29);
/// From this git on, checkouts are written by git with parallel checkout instead of libgit2
/// (runtimes/src/workspace/checkout.rs).
const GIT_PARALLEL_CHECKOUT: (u64, u64) = (2, 32);
/// A rate window with less than this share left is a warning.
const LOW_BUDGET: f64 = 0.10;
/// The agent of sessions and projects that name none (controller/src/machine.rs `agent_of`).
const DEFAULT_AGENT: &str = "claude-code";
/// Where agents no registry ships say how they are installed.
const AGENTS_DOC: &str = "docs/agents.md";

/// The outcome of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
    Skip,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }

    /// SGR colour of the status word on a terminal.
    fn color(self) -> &'static str {
        match self {
            Status::Ok => "32",
            Status::Warn => "33",
            Status::Fail => "31",
            Status::Skip => "2",
        }
    }
}

/// One check: a stable name (`tmux`, `agent:codex`, `forge:widgets`), its outcome, the line that
/// says it, and for a warning or a failure what to do.
#[derive(Clone, Debug, PartialEq, Serialize)]
struct Check {
    name: String,
    status: Status,
    detail: String,
    fix: Option<String>,
}

impl Check {
    fn new(name: impl Into<String>, status: Status, detail: impl Into<String>, fix: Option<String>) -> Check {
        Check { name: name.into(), status, detail: detail.into(), fix }
    }

    fn ok(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check::new(name, Status::Ok, detail, None)
    }

    fn skip(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check::new(name, Status::Skip, detail, None)
    }

    fn warn(name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(name, Status::Warn, detail, Some(fix.into()))
    }

    fn fail(name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(name, Status::Fail, detail, Some(fix.into()))
    }
}

/// The `-o json` document.
#[derive(Debug, Serialize)]
struct Report<'a> {
    checks: &'a [Check],
    ok: bool,
}

/// What the server holds that decides the other checks: which agents, engines and forges are used.
#[derive(Clone, Debug, Default)]
struct Fleet {
    projects: Vec<Project>,
    sessions: Vec<Session>,
}

pub(crate) async fn run(g: &Global, a: DoctorArgs) -> anyhow::Result<ExitCode> {
    let checks = checks(g, &a).await;
    let ok = checks.iter().all(|c| c.status != Status::Fail);
    match a.output {
        ReportFormat::Json => {
            let doc = serde_json::to_string_pretty(&Report { checks: &checks, ok })?;
            emit(&format!("{doc}\n"));
        }
        ReportFormat::Text => emit(&render(&checks, color_wanted())),
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Every check, in a fixed order: the machine's tools, the data directory, the server, then what
/// the server's objects use.
async fn checks(g: &Global, a: &DoctorArgs) -> Vec<Check> {
    let local = is_local(&g.server);
    let (tmux, git, (server, fleet)) = tokio::join!(tmux_check(), git_check(), server_checks(g));
    let mut out = vec![tmux, git];
    out.extend(data_dir_checks(g, local));
    out.extend(server);
    let fleet = fleet.as_ref();
    let (agents, docker, forges) =
        tokio::join!(agent_checks(fleet, a.all || a.all_agents), docker_checks(fleet, a.all), forge_checks(fleet));
    out.extend(agents);
    out.extend(docker);
    out.extend(forges);
    out.extend(webhook_checks(fleet));
    out
}

// ---------------------------------------------------------------- output

/// The text report: the status word in a column of six, then the line; a fix under it.
fn render(checks: &[Check], color: bool) -> String {
    let mut out = String::new();
    for c in checks {
        let word = format!("{:<6}", c.status.word());
        let word = if color { format!("\x1b[{}m{word}\x1b[0m", c.status.color()) } else { word };
        let _ = writeln!(out, "{word}{}", one_line(&c.detail));
        if let (Some(fix), Status::Warn | Status::Fail) = (&c.fix, c.status) {
            let _ = writeln!(out, "      fix: {}", one_line(fix));
        }
    }
    out
}

/// Colour only for a person at a terminal, and never when `NO_COLOR` is set (no-color.org).
fn color_wanted() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

/// Text that stays on its line: what a program printed may hold newlines and escapes.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r']).map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ").replace('\x1b', "")
}

// ---------------------------------------------------------------- versions

/// The numbers of the first dotted version of at least `parts` numbers in `text` (`tmux 3.3a` →
/// [3, 3] with 2, `v2.1.332 (Claude Code)` → [2, 1, 332]): a run of digits and dots.
fn dotted(text: &str, parts: usize) -> Option<Vec<u64>> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.')).find_map(|token| {
        let numbers: Vec<u64> = token
            .trim_matches('.')
            .split('.')
            .map_while(|p| if p.is_empty() { None } else { p.parse().ok() })
            .collect();
        (numbers.len() >= parts.max(1)).then_some(numbers)
    })
}

/// The first `x.y.z` in `text`, as text.
fn semver(text: &str) -> Option<String> {
    let n = dotted(text, 3)?;
    Some(format!("{}.{}.{}", n[0], n[1], n[2]))
}

/// Whether `v` is at least `min` (major, minor).
fn at_least(v: &[u64], min: (u64, u64)) -> bool {
    (v[0], v.get(1).copied().unwrap_or(0)) >= min
}

// ---------------------------------------------------------------- programs

/// `program` on this shell's PATH: the first executable file of that name, on Windows also with
/// each of PATHEXT's extensions.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let here = std::env::current_dir().unwrap_or_default();
    aoctl_runtimes::program::find(program.as_ref(), &path, &here)
}

// ---------------------------------------------------------------- tmux and git

async fn tmux_check() -> Check {
    if cfg!(windows) {
        return Check::skip("tmux", "tmux: not used on Windows (sessions run on the process runtime there)");
    }
    let install = format!("install tmux {}.{} or later, or give sessions `runtime: process`", TMUX_MIN.0, TMUX_MIN.1);
    let Some(tmux) = on_path("tmux") else {
        return Check::fail("tmux", "tmux is not on PATH", install);
    };
    let text = match output_of(&tmux, &["-V"], TOOL_TIMEOUT).await {
        Ok(t) => t,
        Err(e) => return Check::fail("tmux", format!("tmux: `tmux -V`: {e}"), install),
    };
    let shown = text.trim().lines().next().unwrap_or_default().to_string();
    match dotted(&shown, 2) {
        Some(v) if at_least(&v, TMUX_MIN) => Check::ok("tmux", shown),
        Some(_) => Check::fail(
            "tmux",
            format!(
                "{shown}: aoctl needs {}.{} or later (sessions start with `new-session -e` and a pane `pane-died` hook, both new in tmux 3.2)",
                TMUX_MIN.0, TMUX_MIN.1
            ),
            install,
        ),
        None => Check::warn(
            "tmux",
            format!("tmux: cannot tell the version of `{shown}`"),
            format!("aoctl needs tmux {}.{} or later", TMUX_MIN.0, TMUX_MIN.1),
        ),
    }
}

async fn git_check() -> Check {
    let install = format!("install git {}.{} or later", GIT_MIN.0, GIT_MIN.1);
    let Some(git) = on_path("git") else {
        return Check::fail("git", "git is not on PATH", install);
    };
    let text = match output_of(&git, &["--version"], TOOL_TIMEOUT).await {
        Ok(t) => t,
        Err(e) => return Check::fail("git", format!("git: `git --version`: {e}"), install),
    };
    let first = text.trim().lines().next().unwrap_or_default();
    let shown = format!("git {}", first.strip_prefix("git version ").unwrap_or(first).trim());
    match dotted(first, 2) {
        Some(v) if !at_least(&v, GIT_MIN) => Check::warn(
            "git",
            format!(
                "{shown}: below {}.{}, `git fetch --no-write-fetch-head` (finding a pull request's merge conflicts) fails",
                GIT_MIN.0, GIT_MIN.1
            ),
            install,
        ),
        Some(v) if !at_least(&v, GIT_PARALLEL_CHECKOUT) => Check::ok(
            "git",
            format!(
                "{shown} (below {}.{} new worktrees are written by libgit2, without parallel checkout)",
                GIT_PARALLEL_CHECKOUT.0, GIT_PARALLEL_CHECKOUT.1
            ),
        ),
        Some(_) => Check::ok("git", shown),
        None => Check::warn("git", format!("git: cannot tell the version of `{first}`"), install),
    }
}

// ---------------------------------------------------------------- data directory and token

/// Whether the server URL names this machine: only then does the CLI use the data directory's
/// token (the same rule as `cmd::client`).
fn is_local(server: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(server) else { return false };
    let Some(host) = url.host_str() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The data directory exists and takes a new file; the token file in it is the owner's only.
fn data_dir_checks(g: &Global, local: bool) -> Vec<Check> {
    if !local {
        let why = format!("the server {} is not on this machine", g.server);
        return vec![
            Check::skip("data-dir", format!("data directory: {why}")),
            Check::skip("token-file", format!("token file: {why}")),
        ];
    }
    let dir = match g.data_dir() {
        Ok(d) => d,
        Err(e) => {
            return vec![
                Check::fail("data-dir", e.to_string(), "set AOCTL_DATA_DIR (or pass --data-dir)"),
                Check::skip("token-file", "token file: no data directory"),
            ]
        }
    };
    let data = writable(&dir);
    let token = if data.status == Status::Fail && !dir.is_dir() {
        Check::skip("token-file", "token file: no data directory")
    } else {
        token_file_check(&dir.join(aoctl_controller::TOKEN_FILE), g.token.as_deref().is_some_and(|t| !t.is_empty()))
    };
    vec![data, token]
}

/// Whether `dir` exists and a file can be made in it (made and removed again).
fn writable(dir: &Path) -> Check {
    let shown = dir.display();
    if !dir.is_dir() {
        return Check::fail(
            "data-dir",
            format!("data directory {shown} does not exist"),
            "aoctl up (the server makes it at its first start)",
        );
    }
    let probe = dir.join(format!(".aoctl-doctor-{}", std::process::id()));
    let made = std::fs::OpenOptions::new().write(true).create_new(true).open(&probe);
    let _ = std::fs::remove_file(&probe);
    match made {
        Ok(_) => Check::ok("data-dir", format!("data directory {shown} is writable")),
        Err(e) => Check::fail(
            "data-dir",
            format!("data directory {shown} is not writable: {e}"),
            format!("chmod u+w {shown}, or choose another with AOCTL_DATA_DIR"),
        ),
    }
}

/// The server's token file: present, and on Unix readable by its owner only.
fn token_file_check(file: &Path, token_given: bool) -> Check {
    let shown = file.display();
    let meta = match std::fs::metadata(file) {
        Ok(m) => m,
        Err(_) if token_given => {
            return Check::skip(
                "token-file",
                format!("token file {shown} is missing; the token comes from --token/AOCTL_TOKEN"),
            )
        }
        Err(e) => {
            return Check::fail(
                "token-file",
                format!("token file {shown}: {e}"),
                "aoctl up (the server writes it at its first start)",
            )
        }
    };
    mode_check(file, &meta)
}

#[cfg(unix)]
fn mode_check(file: &Path, meta: &std::fs::Metadata) -> Check {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Check::fail(
            "token-file",
            format!("token file {} has mode {mode:04o}: other users can read the server's token", file.display()),
            format!("chmod 600 {}", file.display()),
        );
    }
    Check::ok("token-file", format!("token file {} has mode {mode:04o}", file.display()))
}

#[cfg(not(unix))]
fn mode_check(file: &Path, _meta: &std::fs::Metadata) -> Check {
    Check::ok("token-file", format!("token file {} exists", file.display()))
}

// ---------------------------------------------------------------- the server

/// Where the token the CLI sends comes from; it decides the fix for a refused one.
enum TokenSource {
    Given,
    File(PathBuf),
    None,
}

fn token_source(g: &Global) -> TokenSource {
    if g.token.as_deref().is_some_and(|t| !t.is_empty()) {
        return TokenSource::Given;
    }
    match g.data_dir() {
        Ok(d) if is_local(&g.server) => TokenSource::File(d.join(aoctl_controller::TOKEN_FILE)),
        _ => TokenSource::None,
    }
}

/// `server`: it answers `/healthz` and `/version`; `server-token`: it lists projects with the
/// token. The projects and sessions, when it does.
async fn server_checks(g: &Global) -> (Vec<Check>, Option<Fleet>) {
    let client = match super::client(g) {
        Ok(c) => c,
        Err(e) => {
            let fix = "set --server or AOCTL_SERVER to http://HOST:PORT";
            return (
                vec![Check::fail("server", e.to_string(), fix), Check::skip("server-token", "token: no server")],
                None,
            );
        }
    };
    let url = client.server().as_str().trim_end_matches('/').to_string();
    let answered = bounded(client.probe("healthz", SERVER_TIMEOUT)).await;
    if let Err(e) = answered {
        let detail = match e {
            Bounded::Err(ClientError::Unreachable { detail, .. }) => format!("no server answers at {url}: {detail}"),
            e => format!("the server at {url} does not answer /healthz: {e}"),
        };
        return (
            vec![Check::fail("server", detail, "aoctl up"), Check::skip("server-token", "token: no server")],
            None,
        );
    }
    let version = match bounded(client.version()).await {
        Ok(v) if !v.api_version.is_empty() && v.api_version != aoctl_api::API_VERSION => Check::warn(
            "server",
            format!("server {} at {url} serves {}, this aoctl {}", v.version, v.api_version, aoctl_api::API_VERSION),
            "use an aoctl of the server's version",
        ),
        Ok(v) => Check::ok("server", format!("server {} at {url}", or_unknown(&v.version))),
        Err(e) => Check::ok("server", format!("server at {url} (its /version: {e})")),
    };
    let (token, fleet) = fleet(&client, &token_source(g)).await;
    (vec![version, token], fleet)
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() {
        "unknown"
    } else {
        s
    }
}

/// Lists projects and sessions; a refused token is the `server-token` failure.
async fn fleet(client: &Client, source: &TokenSource) -> (Check, Option<Fleet>) {
    let projects = match bounded(client.list(Kind::Project, &ListParams::default())).await {
        Ok(l) => l.items,
        Err(Bounded::Err(e)) if e.code() == Some(401) => return (refused(source), None),
        Err(e) => {
            let check = Check::fail("server-token", format!("token: listing projects: {e}"), "see the server's log");
            return (check, None);
        }
    };
    let sessions = match bounded(client.list(Kind::Session, &ListParams::default())).await {
        Ok(l) => l.items,
        Err(e) => {
            let check = Check::fail("server-token", format!("token: listing sessions: {e}"), "see the server's log");
            return (check, None);
        }
    };
    let fleet = Fleet { projects: typed(projects), sessions: typed(sessions) };
    let detail = format!(
        "the server takes the token ({} project(s), {} session(s))",
        fleet.projects.len(),
        fleet.sessions.len()
    );
    (Check::ok("server-token", detail), Some(fleet))
}

/// The objects that read as this build's types; a server of another version may send others.
fn typed<T: serde::de::DeserializeOwned>(items: Vec<Value>) -> Vec<T> {
    items.into_iter().filter_map(|v| serde_json::from_value(v).ok()).collect()
}

/// The `server-token` failure for a 401, with the fix for where the token came from.
fn refused(source: &TokenSource) -> Check {
    let (detail, fix) = match source {
        TokenSource::Given => (
            "the server refuses the token given by --token/AOCTL_TOKEN (401)".to_string(),
            "pass the server's token: the file `token` in its data directory (or its --token-file)".to_string(),
        ),
        TokenSource::File(f) if f.exists() => (
            format!("the server refuses the token of {} (401)", f.display()),
            "the server runs with another data directory or --token-file: point AOCTL_DATA_DIR at its data directory, or pass its token with --token or AOCTL_TOKEN".to_string(),
        ),
        TokenSource::File(f) => (
            format!("the server wants a token and {} does not exist (401)", f.display()),
            "point AOCTL_DATA_DIR at the server's data directory, or pass its token with --token or AOCTL_TOKEN".to_string(),
        ),
        TokenSource::None => (
            "the server wants a token and none was given (a server on another machine is never sent the local one) (401)".to_string(),
            "pass its token with --token or AOCTL_TOKEN".to_string(),
        ),
    };
    Check::fail("server-token", detail, fix)
}

/// A request that failed or took too long.
#[derive(Debug, thiserror::Error)]
enum Bounded {
    #[error("{0}")]
    Err(ClientError),
    #[error("no answer within {}s", SERVER_TIMEOUT.as_secs())]
    Timeout,
}

async fn bounded<T>(f: impl std::future::Future<Output = Result<T, ClientError>>) -> Result<T, Bounded> {
    match tokio::time::timeout(SERVER_TIMEOUT, f).await {
        Ok(r) => r.map_err(Bounded::Err),
        Err(_) => Err(Bounded::Timeout),
    }
}

// ---------------------------------------------------------------- what the objects use

/// The project a session belongs to.
fn project_of<'a>(fleet: &'a Fleet, s: &Session) -> Option<&'a Project> {
    fleet.projects.iter().find(|p| p.metadata.name == s.spec.project)
}

/// The runtime a session runs on: its own, its project's default, else the platform's.
fn runtime_of(s: &Session, p: Option<&Project>) -> RuntimeKind {
    s.spec
        .runtime
        .or_else(|| p.and_then(|p| p.spec.defaults.as_ref()).and_then(|d| d.runtime))
        .unwrap_or(aoctl_runtimes::DEFAULT_RUNTIME)
}

/// The runtime a project's sessions get when they name none.
fn project_runtime(p: &Project) -> RuntimeKind {
    p.spec.defaults.as_ref().and_then(|d| d.runtime).unwrap_or(aoctl_runtimes::DEFAULT_RUNTIME)
}

/// The built-in agents that run on this machine (not in a container): each session's effective
/// agent and each project's default, with its reviewers'; the default agent when the server
/// holds none or does not answer.
fn local_agents(fleet: Option<&Fleet>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let Some(fleet) = fleet else {
        names.insert(DEFAULT_AGENT.to_string());
        return names;
    };
    let mut add = |agent: &AgentRef| {
        if let AgentRef::Builtin(n) = agent {
            names.insert(n.clone());
        }
    };
    for p in fleet.projects.iter().filter(|p| project_runtime(p) != RuntimeKind::Docker) {
        add(&p.spec.defaults.as_ref().and_then(|d| d.agent.clone()).unwrap_or_else(|| builtin(DEFAULT_AGENT)));
        for r in p.spec.review.iter().flat_map(|r| &r.reviewers) {
            if r.runtime.unwrap_or(project_runtime(p)) != RuntimeKind::Docker {
                r.agent.iter().for_each(&mut add);
            }
        }
    }
    for s in &fleet.sessions {
        let p = project_of(fleet, s);
        if runtime_of(s, p) != RuntimeKind::Docker {
            add(&aoctl_controller::machine::agent_of(s, p));
        }
    }
    if fleet.projects.is_empty() && fleet.sessions.is_empty() {
        names.insert(DEFAULT_AGENT.to_string());
    }
    names
}

fn builtin(name: &str) -> AgentRef {
    AgentRef::Builtin(name.to_string())
}

// ---------------------------------------------------------------- agent CLIs

/// The CLI and the login of each agent used here (every row with `all`), in the table's order.
async fn agent_checks(fleet: Option<&Fleet>, all: bool) -> Vec<Check> {
    let used = local_agents(fleet);
    let rows: Vec<&'static Adapter> = agents::all().iter().filter(|a| all || used.contains(a.name)).collect();
    if rows.is_empty() {
        return vec![Check::skip("agents", "agents: every session runs its agent in a container")];
    }
    let home = home_dir();
    let clis: Vec<Check> =
        futures::stream::iter(rows.iter().copied().map(cli_check)).buffered(AGENTS_AT_ONCE).collect().await;
    // A key in a session's `spec.env` reaches its agent as well as one in the server's environment.
    let in_sessions: BTreeSet<&str> =
        fleet.iter().flat_map(|f| &f.sessions).flat_map(|s| s.spec.env.keys()).map(String::as_str).collect();
    let set = |v: &str| in_sessions.contains(v) || std::env::var_os(v).is_some_and(|x| !x.is_empty());
    let mut out = vec![];
    for (a, cli) in rows.iter().zip(clis) {
        out.push(cli);
        out.push(login_check(a, home.as_deref(), set));
    }
    out
}

/// The agent's binary on PATH, and its version against the one its row was checked with.
async fn cli_check(a: &Adapter) -> Check {
    let name = format!("agent:{}", a.name);
    let Some(path) = on_path(a.binary) else {
        let fix = match &a.install {
            Some(i) => i.command(),
            None => format!("no registry ships it; see {AGENTS_DOC}"),
        };
        return Check::fail(name, format!("{}: `{}` is not on PATH", a.name, a.binary), fix);
    };
    let printed = match output_of(&path, &["--version"], AGENT_TIMEOUT).await {
        Ok(t) => t,
        Err(e) => {
            let fix = format!("run `{} --version` to see what it waits for", path.display());
            return Check::warn(name, format!("{}: `{} --version`: {e}", a.name, a.binary), fix);
        }
    };
    version_check(a, &path, semver(&printed))
}

/// The verdict on the version an agent's CLI printed (`None`: it printed no x.y.z).
fn version_check(a: &Adapter, path: &Path, found: Option<String>) -> Check {
    let name = format!("agent:{}", a.name);
    let at = path.display();
    let pinned = a.install.as_ref().map(|i| (i, semver(i.version).unwrap_or_else(|| i.version.to_string())));
    match (found, pinned) {
        (Some(v), Some((_, pin))) if v == pin => Check::ok(name, format!("{} {v} ({at})", a.name)),
        (Some(v), Some((i, pin))) => Check::warn(
            name,
            format!("{} {v} ({at}): checked against {pin}; {v} may differ in its screens", a.name),
            i.command(),
        ),
        (None, Some((i, pin))) => Check::warn(
            name,
            format!("{} ({at}): `{} --version` printed no version; checked against {pin}", a.name, a.binary),
            i.command(),
        ),
        (Some(v), None) => Check::ok(name, format!("{} {v} ({at}; no pinned version)", a.name)),
        (None, None) => Check::ok(name, format!("{} ({at}; it prints no version)", a.name)),
    }
}

/// Whether the agent can be told its credentials: one of its variables set, or one of its
/// credential files under HOME. `set` says whether a variable is set (the environment, in use).
fn login_check(a: &Adapter, home: Option<&Path>, set: impl Fn(&str) -> bool) -> Check {
    let name = format!("login:{}", a.name);
    let login = &a.login;
    if login.env.is_empty() && login.files.is_empty() {
        return Check::skip(name, format!("{}: login not checked (its row names no credentials to look for)", a.name));
    }
    if let Some(v) = login.env.iter().find(|v| set(v)) {
        return Check::ok(name, format!("{}: logged in ({v} is set)", a.name));
    }
    if let Some(f) = home.and_then(|h| login.files.iter().find(|f| h.join(f).exists())) {
        return Check::ok(name, format!("{}: logged in (~/{f} exists)", a.name));
    }
    let mut looked = vec![];
    match login.env {
        [] => {}
        [one] => looked.push(format!("{one} is not set")),
        many => looked.push(format!("none of {} is set", many.join(", "))),
    }
    if !login.files.is_empty() {
        let files: Vec<String> = login.files.iter().map(|f| format!("~/{f}")).collect();
        looked.push(format!("no {}", files.join(", ")));
    }
    let how = if login.how.is_empty() { format!("see {AGENTS_DOC}") } else { login.how.to_string() };
    Check::warn(name, format!("{}: not logged in ({})", a.name, looked.join("; ")), how)
}

fn home_dir() -> Option<PathBuf> {
    let var = if cfg!(windows) { "USERPROFILE" } else { "HOME" };
    std::env::var_os(var).filter(|h| !h.is_empty()).map(PathBuf::from)
}

// ---------------------------------------------------------------- docker

/// The engines of docker sessions and projects (`None`: DOCKER_HOST or the local engine).
fn docker_engines(fleet: &Fleet) -> BTreeSet<Option<String>> {
    let mut engines = BTreeSet::new();
    let of_spec = |d: Option<&aoctl_api::session::DockerSpec>| -> Vec<Option<String>> {
        let Some(d) = d else { return vec![None] };
        let mut hosts: Vec<Option<String>> = d.hosts.iter().map(|h| Some(h.host.clone())).collect();
        if let Some(h) = d.host.clone().filter(|h| !h.trim().is_empty()) {
            hosts.push(Some(h));
        }
        if hosts.is_empty() {
            hosts.push(None);
        }
        hosts
    };
    for p in fleet.projects.iter().filter(|p| project_runtime(p) == RuntimeKind::Docker) {
        engines.extend(of_spec(p.spec.docker.as_ref()));
    }
    for s in &fleet.sessions {
        let p = project_of(fleet, s);
        if runtime_of(s, p) == RuntimeKind::Docker {
            engines.extend(of_spec(aoctl_controller::machine::container_of(s, p).as_ref()));
        }
    }
    engines
}

async fn docker_checks(fleet: Option<&Fleet>, all: bool) -> Vec<Check> {
    let mut engines = fleet.map(docker_engines).unwrap_or_default();
    if engines.is_empty() {
        if !all {
            return vec![Check::skip("docker", "docker: no project or session uses the docker runtime")];
        }
        engines.insert(None);
    }
    futures::future::join_all(engines.into_iter().map(|host| async move { docker_check(host.as_deref()).await })).await
}

/// Connects to one engine and pings it.
async fn docker_check(host: Option<&str>) -> Check {
    let name = match host {
        Some(h) => format!("docker:{h}"),
        None => "docker".to_string(),
    };
    let shown = match (host, std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty())) {
        (Some(h), _) => h.to_string(),
        (None, Some(env)) => format!("DOCKER_HOST={env}"),
        (None, None) => "local".to_string(),
    };
    let fix = "start the docker engine (dockerd, Docker Desktop) or fix the address; see docs/docker.md";
    // The owner id only scopes which containers the instance would see; none are looked at.
    let reached = tokio::time::timeout(DOCKER_TIMEOUT, async {
        match DockerRuntime::connect(host, "aoctl-doctor").await {
            Ok(engine) => engine.ping(DOCKER_TIMEOUT).await,
            Err(e) => Err(e),
        }
    })
    .await;
    match reached {
        Ok(Ok(())) => Check::ok(name, format!("docker engine ({shown}) answers")),
        Ok(Err(e)) => Check::fail(name, format!("docker engine ({shown}): {e}"), fix),
        Err(_) => {
            Check::fail(name, format!("docker engine ({shown}): no answer within {}s", DOCKER_TIMEOUT.as_secs()), fix)
        }
    }
}

// ---------------------------------------------------------------- forges

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum ForgeKind {
    GitHub,
    GitLab,
}

impl ForgeKind {
    fn as_str(self) -> &'static str {
        match self {
            ForgeKind::GitHub => "GitHub",
            ForgeKind::GitLab => "GitLab",
        }
    }
}

/// One token on one forge API, and the projects that read it with that token.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ForgeKey {
    kind: ForgeKind,
    api: String,
    token_env: String,
}

/// The forge a project's changes live on (GitLab for `spec.gitlab`, GitHub for `spec.repo`),
/// with the API URL and token variable the controller uses (controller/src/forges).
fn forge_of(p: &Project) -> Option<ForgeKey> {
    if let Some(gl) = &p.spec.gitlab {
        return Some(ForgeKey {
            kind: ForgeKind::GitLab,
            api: gl.api_url.clone().unwrap_or_else(|| "https://gitlab.com/api/v4".into()),
            token_env: gl.token_env.clone().unwrap_or_else(|| forges::DEFAULT_GITLAB_TOKEN_ENV.into()),
        });
    }
    p.spec.repo.as_deref().filter(|r| r.contains('/'))?;
    let gh = p.spec.github.as_ref();
    Some(ForgeKey {
        kind: ForgeKind::GitHub,
        api: gh.and_then(|g| g.api_url.clone()).unwrap_or_else(|| "https://api.github.com".into()),
        token_env: gh.and_then(|g| g.token_env.clone()).unwrap_or_else(|| forges::DEFAULT_TOKEN_ENV.into()),
    })
}

async fn forge_checks(fleet: Option<&Fleet>) -> Vec<Check> {
    let Some(fleet) = fleet else {
        return vec![Check::skip("forge", "forge tokens: the server's projects are not known")];
    };
    let mut by_key: BTreeMap<ForgeKey, Vec<String>> = BTreeMap::new();
    for p in &fleet.projects {
        if let Some(key) = forge_of(p) {
            by_key.entry(key).or_default().push(p.metadata.name.clone());
        }
    }
    if by_key.is_empty() {
        return vec![Check::skip("forge", "forge tokens: no project has a forge")];
    }
    let http = match reqwest::Client::builder()
        .timeout(FORGE_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .user_agent(concat!("aoctl/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(h) => h,
        Err(e) => return vec![Check::fail("forge", format!("forge tokens: no HTTP client: {e}"), "report this bug")],
    };
    let checks = by_key.into_iter().map(|(key, projects)| {
        let http = http.clone();
        async move {
            let bounded = tokio::time::timeout(FORGE_TIMEOUT * 3, forge_check(&http, &key, &projects)).await;
            bounded.unwrap_or_else(|_| {
                let detail = format!("{}: {} did not answer in time", projects.join(", "), key.api);
                Check::fail(format!("forge:{}", projects.join(",")), detail, "check the network and spec.*.apiUrl")
            })
        }
    });
    futures::future::join_all(checks).await
}

/// What a forge said about a token, and what is wrong with it.
#[derive(Debug, Default, PartialEq)]
struct TokenFacts {
    login: String,
    /// The token's scopes; `None` when the forge does not tell (GitHub's fine-grained tokens).
    scopes: Option<Vec<String>>,
    /// Rate windows: name, remaining, limit.
    windows: Vec<(String, u64, u64)>,
}

async fn forge_check(http: &reqwest::Client, key: &ForgeKey, projects: &[String]) -> Check {
    let name = format!("forge:{}", projects.join(","));
    let who = format!("{} ({} {})", projects.join(", "), key.kind.as_str(), key.api);
    let token = match std::env::var(&key.token_env).ok().filter(|t| !t.trim().is_empty()) {
        Some(t) => t,
        None => {
            return Check::fail(
                name,
                format!("{who}: {} is not set in this environment", key.token_env),
                format!(
                    "export {}=<a {} token> before `aoctl up` (the server reads it from its own environment)",
                    key.token_env,
                    needed_scope(key.kind)
                ),
            )
        }
    };
    let facts = match key.kind {
        ForgeKind::GitHub => github_facts(http, &key.api, &token).await,
        ForgeKind::GitLab => gitlab_facts(http, &key.api, &token).await,
    };
    match facts {
        Ok(f) => judge_token(name, &who, key, &f),
        Err(ForgeError::Refused(code)) => Check::fail(
            name,
            format!("{who}: the token in {} is refused ({code})", key.token_env),
            format!("make a new {} token and set {}", needed_scope(key.kind), key.token_env),
        ),
        Err(e) => Check::fail(name, format!("{who}: {e}"), "check the network and the project's apiUrl"),
    }
}

fn needed_scope(kind: ForgeKind) -> &'static str {
    match kind {
        ForgeKind::GitHub => "`repo`-scoped (or fine-grained, with contents, pull requests and checks)",
        ForgeKind::GitLab => "`api`-scoped",
    }
}

/// The line of a token the forge took: whose it is, its scopes, its budget; warnings for a
/// missing scope or a budget below a tenth.
fn judge_token(name: String, who: &str, key: &ForgeKey, f: &TokenFacts) -> Check {
    let mut detail = format!("{who}: {} is {}'s", key.token_env, or_unknown(&f.login));
    let mut problems: Vec<(String, String)> = vec![];
    let needed = match key.kind {
        ForgeKind::GitHub => "repo",
        ForgeKind::GitLab => "api",
    };
    match (&f.scopes, key.kind) {
        (Some(s), _) => {
            let _ = write!(detail, "; scopes {}", if s.is_empty() { "none".to_string() } else { s.join(", ") });
            if !s.iter().any(|x| x == needed) {
                problems.push((
                    format!("it lacks the `{needed}` scope"),
                    format!("give the token the `{needed}` scope, or make a new one"),
                ));
            }
        }
        (None, ForgeKind::GitHub) => {
            detail.push_str("; no X-OAuth-Scopes sent, so a fine-grained token (its permissions are not checked)")
        }
        (None, ForgeKind::GitLab) => detail.push_str("; its scopes are not reported"),
    }
    if !f.windows.is_empty() {
        let shown: Vec<String> = f.windows.iter().map(|(n, rem, lim)| format!("{n} {rem}/{lim}")).collect();
        let _ = write!(detail, "; budget {} left", shown.join(", "));
    }
    for (n, rem, lim) in &f.windows {
        if *lim > 0 && (*rem as f64) < (*lim as f64) * LOW_BUDGET {
            problems.push((
                format!("the {n} budget is low ({rem} of {lim} left)"),
                "wait for the reset, or give projects a longer pollInterval or their own tokens".to_string(),
            ));
        }
    }
    if problems.is_empty() {
        return Check::ok(name, detail);
    }
    let (whys, fixes): (Vec<String>, Vec<String>) = problems.into_iter().unzip();
    Check::warn(name, format!("{detail}; {}", whys.join("; ")), fixes.join("; "))
}

/// Why a forge told nothing about a token.
#[derive(Debug, thiserror::Error)]
enum ForgeError {
    #[error("the token is refused ({0})")]
    Refused(u16),
    #[error("{url} answered {code}")]
    Status { url: String, code: u16 },
    #[error("cannot reach {url}: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("{url}: unexpected answer: {detail}")]
    Invalid { url: String, detail: String },
}

/// GETs `url` with `headers`; the answer's headers and JSON body. 401 and 403 are `Refused`.
async fn get_json(
    http: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
) -> Result<(reqwest::header::HeaderMap, Value), ForgeError> {
    let mut req = http.get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.map_err(|e| ForgeError::Unreachable { url: url.to_string(), detail: innermost(&e) })?;
    let code = resp.status().as_u16();
    if code == 401 || code == 403 {
        return Err(ForgeError::Refused(code));
    }
    if !resp.status().is_success() {
        return Err(ForgeError::Status { url: url.to_string(), code });
    }
    let headers = resp.headers().clone();
    let body =
        resp.json::<Value>().await.map_err(|e| ForgeError::Invalid { url: url.to_string(), detail: innermost(&e) })?;
    Ok((headers, body))
}

/// The innermost message of an error chain: reqwest's own says little.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        msg = s.to_string();
        cur = s.source();
    }
    msg
}

/// `GET /user` (the login, `X-OAuth-Scopes`) and `GET /rate_limit` (free: it costs no budget).
async fn github_facts(http: &reqwest::Client, api: &str, token: &str) -> Result<TokenFacts, ForgeError> {
    let api = api.trim_end_matches('/');
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("accept", "application/vnd.github+json"),
        ("x-github-api-version", "2022-11-28"),
    ];
    let (h, user) = get_json(http, &format!("{api}/user"), &headers).await?;
    let scopes = h
        .get("x-oauth-scopes")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(str::to_string).collect::<Vec<_>>());
    let (_, limits) = get_json(http, &format!("{api}/rate_limit"), &headers).await?;
    Ok(TokenFacts { login: str_of(&user, "/login"), scopes, windows: github_windows(&limits) })
}

/// `core` and `graphql` of a `/rate_limit` answer.
fn github_windows(limits: &Value) -> Vec<(String, u64, u64)> {
    ["core", "graphql"]
        .iter()
        .filter_map(|w| {
            let r = limits.pointer(&format!("/resources/{w}"))?;
            Some((w.to_string(), r.get("remaining")?.as_u64()?, r.get("limit")?.as_u64()?))
        })
        .collect()
}

/// `GET /user` (the username, and the `RateLimit-*` headers when GitLab sends them) and
/// `GET /personal_access_tokens/self` for the scopes (a project, group or older GitLab's token
/// may not say).
async fn gitlab_facts(http: &reqwest::Client, api: &str, token: &str) -> Result<TokenFacts, ForgeError> {
    let api = api.trim_end_matches('/');
    let headers = [("private-token", token)];
    let (h, user) = get_json(http, &format!("{api}/user"), &headers).await?;
    let header = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    let windows = match (header("ratelimit-remaining"), header("ratelimit-limit")) {
        (Some(rem), Some(lim)) => vec![("api".to_string(), rem, lim)],
        _ => vec![],
    };
    let scopes = match get_json(http, &format!("{api}/personal_access_tokens/self"), &headers).await {
        Ok((_, t)) => t
            .get("scopes")
            .and_then(Value::as_array)
            .map(|s| s.iter().filter_map(Value::as_str).map(str::to_string).collect::<Vec<_>>()),
        Err(_) => None,
    };
    Ok(TokenFacts { login: str_of(&user, "/username"), scopes, windows })
}

fn str_of(v: &Value, pointer: &str) -> String {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_string()
}

// ---------------------------------------------------------------- webhooks

/// For each project with a forge: whether its webhooks are heard. The server records that only
/// in its sessions' `ForgeSynced` condition ("read on GitHub webhooks …"), so a project whose
/// sessions do not say so is taken as polled.
fn webhook_checks(fleet: Option<&Fleet>) -> Vec<Check> {
    let Some(fleet) = fleet else {
        return vec![Check::skip("webhooks", "webhooks: the server's projects are not known")];
    };
    let checks: Vec<Check> = fleet
        .projects
        .iter()
        .filter_map(|p| forge_of(p).map(|k| webhook_check(p, k.kind, fleet, |v| std::env::var_os(v).is_some())))
        .collect();
    if checks.is_empty() {
        return vec![Check::skip("webhooks", "webhooks: no project has a forge")];
    }
    checks
}

fn webhook_check(p: &Project, kind: ForgeKind, fleet: &Fleet, set: impl Fn(&str) -> bool) -> Check {
    let project = &p.metadata.name;
    let name = format!("webhooks:{project}");
    let forge = kind.as_str();
    let (var, doc) = match kind {
        ForgeKind::GitHub => (
            p.spec
                .github
                .as_ref()
                .and_then(|g| g.webhook_secret_env.clone())
                .unwrap_or_else(|| forges::DEFAULT_WEBHOOK_SECRET_ENV.into()),
            "docs/github.md#webhooks",
        ),
        ForgeKind::GitLab => (
            p.spec
                .gitlab
                .as_ref()
                .and_then(|g| g.webhook_token_env.clone())
                .unwrap_or_else(|| forges::DEFAULT_GITLAB_WEBHOOK_TOKEN_ENV.into()),
            "docs/gitlab.md#webhooks",
        ),
    };
    let heard =
        fleet.sessions.iter().filter(|s| &s.spec.project == project).any(|s| {
            s.status.conditions.iter().any(|c| c.type_ == types::FORGE_SYNCED && c.message.contains(" webhooks"))
        });
    if heard {
        return Check::ok(name, format!("{project}: {forge} webhooks heard (its sessions are read on webhooks)"));
    }
    let polling = "polling only (slower, costs budget)";
    if !set(&var) {
        return Check::warn(
            name,
            format!("{project}: {var} is not set here, so the server cannot verify {forge} webhooks; {polling}"),
            format!("set {var} in the server's environment and add the webhook: {doc}"),
        );
    }
    Check::warn(
        name,
        format!("{project}: no {forge} webhook heard since the server started; {polling}"),
        format!("add the webhook with the secret of {var}: {doc}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::{Condition, ConditionStatus, Time};

    #[test]
    fn versions() {
        assert_eq!(dotted("tmux 3.3a", 2), Some(vec![3, 3]));
        assert_eq!(dotted("tmux next-3.6", 2), Some(vec![3, 6]));
        assert_eq!(dotted("tmux master", 2), None);
        assert_eq!(dotted("git version 2.47.3", 2), Some(vec![2, 47, 3]));
        assert_eq!(dotted("git version 2.39.5 (Apple Git-154)", 2), Some(vec![2, 39, 5]));
        assert_eq!(semver("2.1.332 (Claude Code)"), Some("2.1.332".into()));
        assert_eq!(semver("codex-cli 0.171.0\n"), Some("0.171.0".into()));
        assert_eq!(semver("aider v0.86.2"), Some("0.86.2".into()));
        assert_eq!(semver("0.0.1790142911-g7618fb"), Some("0.0.1790142911".into()));
        assert_eq!(semver("Python 3.12"), None, "two numbers are not x.y.z");
        assert_eq!(semver("built 1.2.\nversion 4.5.6"), Some("4.5.6".into()));
        assert_eq!(semver("no version here"), None);
        assert!(at_least(&[3, 2], TMUX_MIN) && at_least(&[10, 0], TMUX_MIN));
        assert!(!at_least(&[3, 1, 9], TMUX_MIN) && !at_least(&[2, 28, 0], GIT_MIN));
        assert!(at_least(&[2, 29], GIT_MIN));
    }

    #[test]
    fn text_and_json_reports() {
        let checks = vec![
            Check::ok("tmux", "tmux 3.4"),
            Check::fail("agent:claude-code", "claude-code: `claude` is not on PATH", "npm install -g x@1.2.3"),
            Check::warn("login:codex", "codex: not logged in\n(none set)", "run codex login"),
            Check::skip("docker", "docker: no project or session uses the docker runtime"),
        ];
        assert_eq!(
            render(&checks, false),
            "ok    tmux 3.4\n\
             fail  claude-code: `claude` is not on PATH\n      fix: npm install -g x@1.2.3\n\
             warn  codex: not logged in (none set)\n      fix: run codex login\n\
             skip  docker: no project or session uses the docker runtime\n"
        );
        assert!(render(&checks[..1], true).starts_with("\x1b[32mok    \x1b[0mtmux 3.4"));
        let doc = serde_json::to_value(Report { checks: &checks, ok: false }).unwrap();
        assert_eq!(doc["ok"], false);
        assert_eq!(
            doc["checks"][0],
            serde_json::json!({"name": "tmux", "status": "ok", "detail": "tmux 3.4", "fix": null})
        );
        assert_eq!(doc["checks"][1]["status"], "fail");
        assert_eq!(doc["checks"][3]["status"], "skip");
    }

    fn row(install: Option<agents::Install>, login: agents::Login) -> Adapter {
        let mut a = *agents::builtin("codex").unwrap();
        a.install = install;
        a.login = login;
        a
    }

    /// A login with these credentials; other fields (which rows may grow) as codex's.
    fn login(how: &'static str, env: &'static [&'static str], files: &'static [&'static str]) -> agents::Login {
        agents::Login { screens: &[], how, env, files, ..agents::builtin("codex").unwrap().login }
    }

    const PINNED: agents::Install = agents::Install { registry: "npm", package: "@openai/codex", version: "0.171.0" };

    #[test]
    fn agent_versions_against_the_pin() {
        let a = row(Some(PINNED), login("", &[], &[]));
        let p = Path::new("/bin/codex");
        let same = version_check(&a, p, Some("0.171.0".into()));
        assert_eq!((same.status, same.detail.as_str()), (Status::Ok, "codex 0.171.0 (/bin/codex)"));
        let newer = version_check(&a, p, Some("0.180.1".into()));
        assert_eq!(newer.status, Status::Warn);
        assert_eq!(
            newer.detail,
            "codex 0.180.1 (/bin/codex): checked against 0.171.0; 0.180.1 may differ in its screens"
        );
        assert_eq!(newer.fix.as_deref(), Some("npm install -g @openai/codex@0.171.0"));
        assert_eq!(version_check(&a, p, None).status, Status::Warn);
        let unpinned = row(None, a.login);
        assert_eq!(version_check(&unpinned, p, Some("1.0.0".into())).status, Status::Ok);
    }

    #[test]
    fn logins() {
        let none = row(None, login("", &[], &[]));
        assert_eq!(login_check(&none, None, |_| true).status, Status::Skip);
        let a = row(None, login("run `codex login`", &["OPENAI_API_KEY", "CODEX_API_KEY"], &[".codex/auth.json"]));
        let by_env = login_check(&a, None, |v| v == "CODEX_API_KEY");
        assert_eq!((by_env.status, by_env.detail.as_str()), (Status::Ok, "codex: logged in (CODEX_API_KEY is set)"));
        let home = tempfile::tempdir().unwrap();
        let out = login_check(&a, Some(home.path()), |_| false);
        assert_eq!(out.status, Status::Warn);
        assert_eq!(
            out.detail,
            "codex: not logged in (none of OPENAI_API_KEY, CODEX_API_KEY is set; no ~/.codex/auth.json)"
        );
        assert_eq!(out.fix.as_deref(), Some("run `codex login`"));
        std::fs::create_dir_all(home.path().join(".codex")).unwrap();
        std::fs::write(home.path().join(".codex/auth.json"), "{}").unwrap();
        assert_eq!(login_check(&a, Some(home.path()), |_| false).status, Status::Ok);
    }

    fn project(name: &str, spec: Value) -> Project {
        let mut v = serde_json::json!({"metadata": {"name": name}, "spec": {"path": "/p"}});
        v["spec"].as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    fn session(name: &str, project: &str, spec: Value) -> Session {
        let mut v = serde_json::json!({"metadata": {"name": name}, "spec": {"project": project}});
        v["spec"].as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn agents_and_engines_in_use() {
        assert_eq!(local_agents(None), BTreeSet::from([DEFAULT_AGENT.to_string()]));
        assert_eq!(local_agents(Some(&Fleet::default())), BTreeSet::from([DEFAULT_AGENT.to_string()]));
        let fleet = Fleet {
            projects: vec![
                project("web", serde_json::json!({"defaults": {"agent": "aider"}})),
                project(
                    "box",
                    serde_json::json!({"defaults": {"agent": "gemini", "runtime": "docker"},
                    "docker": {"hosts": [{"host": "tcp://b1:2376", "capacity": 2}]}}),
                ),
            ],
            sessions: vec![
                session("a", "web", serde_json::json!({"agent": "codex"})),
                session("b", "web", serde_json::json!({})),
                session("c", "web", serde_json::json!({"agent": "qwen", "runtime": "docker"})),
                session("d", "box", serde_json::json!({"agent": "opencode"})),
                session("e", "gone", serde_json::json!({})),
                session("f", "web", serde_json::json!({"agent": {"command": ["./agent.sh"]}})),
            ],
        };
        let names: Vec<String> = local_agents(Some(&fleet)).into_iter().collect();
        assert_eq!(names, ["aider", "claude-code", "codex"], "docker sessions' agents run in their containers");
        let engines = docker_engines(&fleet);
        assert_eq!(engines, BTreeSet::from([None, Some("tcp://b1:2376".to_string())]));
        let no_docker = Fleet { projects: vec![fleet.projects[0].clone()], sessions: vec![fleet.sessions[0].clone()] };
        assert!(docker_engines(&no_docker).is_empty());
    }

    #[test]
    fn forges_of_projects() {
        let gh = forge_of(&project("w", serde_json::json!({"repo": "acme/w"}))).unwrap();
        assert_eq!(
            gh,
            ForgeKey {
                kind: ForgeKind::GitHub,
                api: "https://api.github.com".into(),
                token_env: "GITHUB_TOKEN".into()
            }
        );
        let ghe = forge_of(&project(
            "w",
            serde_json::json!({"repo": "acme/w", "github": {"apiUrl": "http://127.0.0.1:9/api/v3", "tokenEnv": "GHE"}}),
        ))
        .unwrap();
        assert_eq!((ghe.api.as_str(), ghe.token_env.as_str()), ("http://127.0.0.1:9/api/v3", "GHE"));
        let gl = forge_of(&project("g", serde_json::json!({"gitlab": {"projectPath": "a/b"}}))).unwrap();
        assert_eq!((gl.kind, gl.token_env.as_str()), (ForgeKind::GitLab, "GITLAB_TOKEN"));
        assert_eq!(forge_of(&project("n", serde_json::json!({}))), None);
    }

    #[test]
    fn token_verdicts() {
        let key = ForgeKey {
            kind: ForgeKind::GitHub,
            api: "https://api.github.com".into(),
            token_env: "GITHUB_TOKEN".into(),
        };
        let limits = serde_json::json!({"resources": {"core": {"limit": 5000, "remaining": 4990},
            "graphql": {"limit": 5000, "remaining": 300}, "search": {"limit": 30, "remaining": 30}}});
        let windows = github_windows(&limits);
        assert_eq!(windows, [("core".to_string(), 4990, 5000), ("graphql".to_string(), 300, 5000)]);
        let classic =
            TokenFacts { login: "octocat".into(), scopes: Some(vec!["repo".into(), "workflow".into()]), windows };
        let c = judge_token("forge:w".into(), "w (GitHub)", &key, &classic);
        assert_eq!(c.status, Status::Warn);
        assert_eq!(
            c.detail,
            "w (GitHub): GITHUB_TOKEN is octocat's; scopes repo, workflow; budget core 4990/5000, graphql 300/5000 left; \
             the graphql budget is low (300 of 5000 left)"
        );
        let fine = TokenFacts { login: "octocat".into(), scopes: None, windows: vec![("core".into(), 5000, 5000)] };
        let c = judge_token("forge:w".into(), "w (GitHub)", &key, &fine);
        assert_eq!(c.status, Status::Ok);
        assert!(c.detail.contains("fine-grained token"), "{}", c.detail);
        let narrow = TokenFacts { login: "octocat".into(), scopes: Some(vec!["read:user".into()]), windows: vec![] };
        let c = judge_token("forge:w".into(), "w (GitHub)", &key, &narrow);
        assert_eq!(c.status, Status::Warn);
        assert!(c.detail.ends_with("it lacks the `repo` scope"), "{}", c.detail);
    }

    #[test]
    fn webhooks_heard_or_not() {
        let p = project("w", serde_json::json!({"repo": "acme/w"}));
        let mut s = session("s", "w", serde_json::json!({}));
        let fleet = |s: &Session| Fleet { projects: vec![p.clone()], sessions: vec![s.clone()] };
        let unset = webhook_check(&p, ForgeKind::GitHub, &fleet(&s), |_| false);
        assert_eq!(unset.status, Status::Warn);
        assert!(unset.detail.starts_with("w: AOCTL_WEBHOOK_SECRET is not set here"), "{}", unset.detail);
        assert_eq!(
            webhook_check(&p, ForgeKind::GitHub, &fleet(&s), |_| true).detail,
            "w: no GitHub webhook heard since the server started; polling only (slower, costs budget)"
        );
        s.status.conditions.push(Condition::new(
            types::FORGE_SYNCED,
            ConditionStatus::True,
            "Polled",
            "read on GitHub webhooks, after the session's commits and every 5m",
            None,
            Time::now(),
        ));
        assert_eq!(webhook_check(&p, ForgeKind::GitHub, &fleet(&s), |_| false).status, Status::Ok);
    }

    #[test]
    fn local_servers() {
        assert!(is_local("http://127.0.0.1:7420") && is_local("http://localhost:1") && is_local("http://[::1]:1"));
        assert!(!is_local("http://build-1:7420") && !is_local("not a url"));
    }

    #[cfg(unix)]
    #[test]
    fn token_file_modes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        assert_eq!(token_file_check(&f, false).status, Status::Fail);
        assert_eq!(token_file_check(&f, true).status, Status::Skip);
        std::fs::write(&f, "t\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let loose = token_file_check(&f, false);
        assert_eq!(loose.status, Status::Fail);
        assert_eq!(loose.fix, Some(format!("chmod 600 {}", f.display())));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(token_file_check(&f, false).status, Status::Ok);
        assert_eq!(writable(dir.path()).status, Status::Ok);
        assert_eq!(writable(&dir.path().join("none")).status, Status::Fail);
    }
}
