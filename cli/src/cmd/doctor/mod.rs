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

use aoctl_agents::Adapter;
use aoctl_api::condition::types;
use aoctl_api::session::{AgentRef, RuntimeKind};
use aoctl_api::{Kind, Project, Session};
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
/// (runtimes/git/src/workspace/checkout.rs).
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
            add(&aoctl_controller::agent_of(s, p));
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
    let rows: Vec<&'static Adapter> = aoctl_agents::all().iter().filter(|a| all || used.contains(a.name)).collect();
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
            engines.extend(of_spec(aoctl_controller::container_of(s, p).as_ref()));
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

mod forge;
#[cfg(test)]
mod tests;

use forge::{forge_checks, webhook_checks};
