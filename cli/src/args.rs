//! Command-line flags of `aoctl` (clap derive), and the checks across flags that clap cannot
//! express. A failed check is a usage error: it prints like clap's own and exits with status 2.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use aoctl_api::session::{RuntimeKind, BUILTIN_AGENTS};
use aoctl_api::Kind;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

/// Parses the command line and checks it; exits with status 2 on a usage error.
pub(crate) fn parse() -> Cli {
    let cli = Cli::parse();
    if let Err(e) = cli.check() {
        Cli::command().error(clap::error::ErrorKind::ArgumentConflict, e).exit();
    }
    cli
}

/// A flag's value, or a combination of flags, that cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArgError {
    #[error("unknown kind `{0}`; known kinds: projects (proj), sessions (sess), gitsources (gs), issuesources (is), events (ev)")]
    UnknownKind(String),
    #[error("unknown kind `{0}`; expected project, session, gitsource or issuesource")]
    NotWritable(String),
    #[error("unknown kind `{0}`; expected gitsource, issuesource or session")]
    NotASource(String),
    #[error("unknown agent `{given}`; did you mean `{near}`?")]
    AgentNearMiss { given: String, near: String },
    #[error("unknown agent `{0}`; built-in agents: {list}", list = BUILTIN_AGENTS.join(", "))]
    UnknownAgent(String),
    #[error("unknown runtime `{0}`; expected tmux, process or docker")]
    UnknownRuntime(String),
    #[error("`{0}` is not KEY=VALUE")]
    NotKeyValue(String),
    /// A duration, name or label the API's own checks refuse; the message is theirs.
    #[error("{0}")]
    Invalid(String),
    #[error("a NAME can be given with one kind only")]
    NameWithKinds,
    #[error("--watch works with one kind only")]
    WatchWithKinds,
    #[error("cannot find a data directory: set --data-dir or AOCTL_DATA_DIR")]
    NoDataDir,
    #[error("--store etcd needs --etcd-endpoints (or AOCTL_ETCD_ENDPOINTS)")]
    NoEtcdEndpoints,
    #[error("--etcd-endpoints is for --store etcd (or AOCTL_STORE=etcd)")]
    EndpointsWithoutEtcd,
    #[error("--lease-ttl `{0}`: expected whole seconds, at least 2s (etcd counts leases in seconds)")]
    LeaseTtl(String),
}

/// aoctl runs coding agents as Kubernetes-style resources; this is its command-line client.
#[derive(Debug, Parser)]
#[command(name = "aoctl", version, about, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every verb accepts.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// URL of the aoctl server.
    #[arg(long, global = true, env = "AOCTL_SERVER", default_value = "http://127.0.0.1:7420", value_name = "URL")]
    pub server: String,
    /// Bearer token sent to the server.
    #[arg(long, global = true, env = "AOCTL_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Data directory [default: $XDG_DATA_HOME/aoctl or ~/.local/share/aoctl; on Windows
    /// %LOCALAPPDATA%\aoctl].
    #[arg(long, global = true, env = "AOCTL_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

impl Global {
    /// The data directory: the flag, else `$XDG_DATA_HOME/aoctl`, else `~/.local/share/aoctl`; on
    /// Windows the flag, else `%LOCALAPPDATA%\aoctl` (the user's own, not roaming, folder).
    pub(crate) fn data_dir(&self) -> Result<PathBuf, ArgError> {
        if let Some(d) = self.data_dir.as_ref().filter(|d| !d.as_os_str().is_empty()) {
            return Ok(d.clone());
        }
        let env_dir = |name: &str| std::env::var_os(name).map(PathBuf::from).filter(|p| p.is_absolute());
        if cfg!(windows) {
            return env_dir("LOCALAPPDATA").map(|d| d.join("aoctl")).ok_or(ArgError::NoDataDir);
        }
        if let Some(xdg) = env_dir("XDG_DATA_HOME") {
            return Ok(xdg.join("aoctl"));
        }
        if let Some(home) = env_dir("HOME") {
            return Ok(home.join(".local/share/aoctl"));
        }
        Err(ArgError::NoDataDir)
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the controller and its HTTP API in the foreground.
    Serve(ServeArgs),
    /// Start a background server if none answers, and register the repository as a Project.
    Up(UpArgs),
    /// Stop the background server started by `aoctl up`; runtimes keep running.
    Down,
    /// Create or update objects from manifest files.
    Apply(ApplyArgs),
    /// List objects or show some of them.
    Get(GetArgs),
    /// Show one object in detail, with its conditions and recent events.
    Describe(DescribeArgs),
    /// Delete objects by name or by manifest.
    Delete(DeleteArgs),
    /// Show what `apply` would change; exits 1 when there are differences, 2 on an error.
    Diff(DiffArgs),
    /// Print what a session's agent wrote to its terminal.
    Logs(LogsArgs),
    /// Type a message into a session's agent, and check that it arrived.
    Send(SendArgs),
    /// Answer the question a session's agent asked a person (the `ask_human` tool of `aoctl mcp`).
    ///
    /// The answer is typed into the agent like `aoctl send`; then the question is cleared and the
    /// session's `needs-input` ends. An error when the session has no question waiting.
    Answer(SendArgs),
    /// Serve the Model Context Protocol on stdin and stdout for a session's agent.
    ///
    /// Run by the agent itself: it reads AOCTL_SERVER and AOCTL_SESSION_TOKEN, which every
    /// session's agent gets at launch, and offers the tools status, report, ask_human, send,
    /// handoff and request_review, each acting on that session only (docs/mcp.md).
    Mcp,
    /// Sync a GitSource, poll an IssueSource, or read a Session's pull request now, and wait
    /// until it has.
    ///
    /// Sets the `ao.dev/reconcile-requested-at` annotation to the current time; the object's
    /// controller acts on it at once (a session reads its forge even when the token's budget
    /// holds polls back) and records the value in `status.lastHandledReconcileAt`. Prints the
    /// outcome (the revision applied, or why not) and exits 1 when it did not succeed.
    Reconcile(ReconcileArgs),
    /// Start a review round of a session's pull request now, with its project's reviewers.
    ///
    /// Sets the `ao.dev/review-requested` annotation to the current time; the controller starts
    /// one reviewer session per reviewer on the pull request's head (see docs/reviewers.md).
    Review(ReviewArgs),
    /// Attach this terminal to a session's agent (tmux); works on the server's machine only.
    ///
    /// Replaces aoctl with the session's attach command, such as `tmux -S SOCKET attach-session`.
    /// The command names the server's local tmux socket, so this works only on the machine the
    /// server runs on, as the same user. Detach with the tmux prefix and `d` (default Ctrl-b d);
    /// the agent keeps running. Sessions of the `process` runtime cannot be attached: use
    /// `aoctl logs -f` and `aoctl send`.
    Attach(AttachArgs),
    /// Create a session from a prompt.
    Spawn(SpawnArgs),
    /// Print a link that signs a browser in to the web dashboard, and exit.
    ///
    /// The link carries a code that works once, within a minute; following it sets a cookie
    /// (HttpOnly, SameSite=Strict, for a day) and opens the overview. The bearer token itself is
    /// never put in a link.
    Dashboard(DashboardArgs),
    /// Print the client's and the server's versions.
    Version,
    /// Check this machine and the server, one check a line, each failure with its fix.
    ///
    /// Checks tmux, git, the data directory and its token file, the server and its token, the
    /// agent CLIs the server's projects and sessions use (on PATH, their version against the one
    /// aoctl was checked with, logged in), the docker engines docker sessions use, and each forge's
    /// token (its scopes and rate budget) and webhooks. Exits 0 when nothing failed (warnings do
    /// not fail), 1 otherwise.
    Doctor(DoctorArgs),
    /// Write every object the server holds to FILE, as it stood at one resourceVersion.
    ///
    /// Works while the server runs. FILE is JSON lines: a header (format, backend,
    /// resourceVersion, time, object count), then one stored object a line, status and metadata
    /// included. It is written as FILE.partial, checked, flushed to disk and renamed, so an
    /// interrupted backup leaves an earlier FILE as it was. Takes the API's bearer token.
    Backup(BackupArgs),
    /// Load a backup into an empty store: sled in DATA_DIR/store, or an etcd prefix.
    ///
    /// Run it with the server stopped; a store that holds any object is refused, and so is a file
    /// that does not decode (the error names the line). sled keeps every object's resourceVersion;
    /// etcd numbers them anew (docs/store.md). Agents still running in the data folder are
    /// adopted when the server starts, not started again.
    Restore(RestoreArgs),
    /// Print a shell completion script.
    Completion(CompletionArgs),
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Output format: one check a line, or a JSON document.
    #[arg(short = 'o', long, value_enum, default_value_t = ReportFormat::Text, value_name = "FORMAT")]
    pub output: ReportFormat,
    /// Check every built-in agent's CLI, not only those the server's projects and sessions use.
    #[arg(long)]
    pub all_agents: bool,
    /// Check everything: every agent's CLI, and the docker engine even when no session uses it.
    #[arg(long)]
    pub all: bool,
}

/// The output of `aoctl doctor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ReportFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub(crate) struct BackupArgs {
    /// The file to write (replaced only once the backup is whole).
    #[arg(short = 'o', long = "output", required = true, value_name = "FILE")]
    pub output: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct RestoreArgs {
    /// A file of `aoctl backup -o FILE`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Where the objects are kept, as `aoctl serve` takes it.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// Where the objects are kept: sled in DATA_DIR/store, or an etcd v3 cluster (--etcd-endpoints).
    #[arg(long = "store", value_enum, env = "AOCTL_STORE", default_value_t = StoreKind::Sled, value_name = "STORE")]
    pub kind: StoreKind,
    /// The etcd cluster's client URLs, comma-separated (with --store etcd).
    #[arg(long, env = "AOCTL_ETCD_ENDPOINTS", value_delimiter = ',', value_name = "URL[,URL...]")]
    pub etcd_endpoints: Vec<String>,
    /// The key prefix of the objects in etcd.
    #[arg(long, env = "AOCTL_ETCD_PREFIX", default_value = "/aoctl", value_name = "PREFIX")]
    pub etcd_prefix: String,
}

#[derive(Debug, Args)]
pub(crate) struct DashboardArgs {
    /// Also open the link in a browser ($BROWSER, else the desktop's default).
    #[arg(long)]
    pub open: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on; non-loopback addresses need --token-file.
    #[arg(long, default_value = "127.0.0.1:7420", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// File holding the bearer token clients must send [default: DATA_DIR/token, made at first start].
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// A host name (or IP) clients may use to reach the server, besides localhost, loopback IPs and
    /// the listen address; requests naming any other host are refused. Repeatable.
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
    /// Format of the log on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Pretty, value_name = "FORMAT")]
    pub log_format: LogFormat,
    /// Where the objects are kept: sled in DATA_DIR/store, or an etcd v3 cluster (--etcd-endpoints).
    #[arg(long, value_enum, env = "AOCTL_STORE", default_value_t = StoreKind::Sled, value_name = "STORE")]
    pub store: StoreKind,
    /// The etcd cluster's client URLs, comma-separated (with --store etcd).
    #[arg(long, env = "AOCTL_ETCD_ENDPOINTS", value_delimiter = ',', value_name = "URL[,URL...]")]
    pub etcd_endpoints: Vec<String>,
    /// The key prefix of the objects in etcd; servers with different prefixes share a cluster
    /// without seeing each other's objects.
    #[arg(long, env = "AOCTL_ETCD_PREFIX", default_value = "/aoctl", value_name = "PREFIX")]
    pub etcd_prefix: String,
    /// This replica's node: the machine and data folder its tmux and process sessions live on;
    /// a leader of another node leaves them alone. Replicas sharing a data folder are one node
    /// [default: the data folder's node id, `<host>-<suffix>`, kept in DATA_DIR/node-id].
    #[arg(long, env = "AOCTL_NODE", value_name = "NAME")]
    pub node: Option<String>,
    /// With --store etcd: how long a leader that stops answering keeps its lease, so how soon
    /// another replica takes over (at least 2 s).
    #[arg(long, env = "AOCTL_LEASE_TTL", default_value = "5s", value_parser = parse_lease_ttl, value_name = "DURATION")]
    pub lease_ttl: Duration,
    /// How long an Event is kept after its last write; the controller deletes older ones
    /// (webhook delivery records too). Each object also keeps only its newest 100 events.
    #[arg(long, env = "AOCTL_EVENT_TTL", default_value = "1h", value_parser = parse_event_ttl, value_name = "DURATION")]
    pub event_ttl: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum StoreKind {
    Sled,
    Etcd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    Pretty,
    Json,
}

#[derive(Debug, Args)]
pub(crate) struct UpArgs {
    /// A local repository path, or a git URL to clone into the data directory.
    #[arg(default_value = ".", value_name = "PATH|URL")]
    pub target: String,
    /// Give the project an orchestrator agent (`spec.orchestrator`), with PROMPT as its goal when
    /// given; an orchestrator the project has already is left as it is.
    #[arg(long, value_name = "PROMPT", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub orchestrator: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    /// Manifest file, directory of *.yaml|*.yml|*.json, or `-` for stdin; may be repeated.
    #[arg(short = 'f', long = "filename", required = true, value_name = "PATH")]
    pub filenames: Vec<String>,
    /// Read directories recursively.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// Ask the server what would happen without changing anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Delete applied objects matching --selector that are not in these manifests.
    #[arg(long, requires = "selector")]
    pub prune: bool,
    /// Label selector of the objects --prune may delete.
    #[arg(short = 'l', long, requires = "prune", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Wait until the applied objects are ready (default 60s).
    #[arg(long, value_name = "DURATION", num_args = 0..=1, require_equals = true, default_missing_value = "60s",
          value_parser = parse_duration)]
    pub wait: Option<Duration>,
}

#[derive(Debug, Args)]
pub(crate) struct GetArgs {
    /// Kinds to list, comma separated: projects, sessions, events (or proj, sess, ev).
    #[arg(value_parser = parse_kinds, value_name = "KINDS")]
    pub kinds: KindList,
    /// Show only the object of this name.
    pub name: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, value_name = "FORMAT")]
    pub output: Option<OutputFormat>,
    /// Label selector, such as `team=web,tier!=db`.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// After listing, print changes as they happen, until interrupted.
    #[arg(short = 'w', long)]
    pub watch: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    Wide,
    Yaml,
    Json,
    Name,
}

#[derive(Debug, Args)]
pub(crate) struct DescribeArgs {
    /// project, session, gitsource or issuesource.
    #[arg(value_parser = parse_writable_kind, value_name = "KIND")]
    pub kind: Kind,
    pub name: String,
}

#[derive(Debug, Args)]
pub(crate) struct DeleteArgs {
    /// project, session, gitsource or issuesource.
    #[arg(value_parser = parse_writable_kind, value_name = "KIND", required_unless_present = "filenames")]
    pub kind: Option<Kind>,
    /// Names of the objects to delete.
    #[arg(value_name = "NAME", required_unless_present = "filenames")]
    pub names: Vec<String>,
    /// Delete the objects of these manifests instead; may be repeated.
    #[arg(short = 'f', long = "filename", value_name = "PATH", conflicts_with_all = ["kind", "names"])]
    pub filenames: Vec<String>,
    /// Read directories recursively.
    #[arg(short = 'R', long, requires = "filenames")]
    pub recursive: bool,
    /// Wait until the objects are gone, finalizers included (default 60s).
    #[arg(long, value_name = "DURATION", num_args = 0..=1, require_equals = true, default_missing_value = "60s",
          value_parser = parse_duration)]
    pub wait: Option<Duration>,
}

#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// Manifest file, directory or `-`; may be repeated.
    #[arg(short = 'f', long = "filename", required = true, value_name = "PATH")]
    pub filenames: Vec<String>,
    /// Read directories recursively.
    #[arg(short = 'R', long)]
    pub recursive: bool,
}

#[derive(Debug, Args)]
pub(crate) struct LogsArgs {
    /// Name of the session.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// Keep printing new output as it comes, until interrupted or the session is deleted.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Print only the last N lines of what is there now.
    #[arg(long, value_name = "N")]
    pub tail: Option<usize>,
}

#[derive(Debug, Args)]
pub(crate) struct SendArgs {
    /// Name of the session.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The message; `-` reads it from stdin (all lines, less one trailing newline).
    #[arg(value_name = "TEXT|-")]
    pub text: String,
}

#[derive(Debug, Args)]
pub(crate) struct ReviewArgs {
    /// Name of the worker session.
    #[arg(value_name = "SESSION")]
    pub session: String,
}

#[derive(Debug, Args)]
pub(crate) struct ReconcileArgs {
    /// gitsource (gs), issuesource (is) or session.
    #[arg(value_parser = parse_source_kind, value_name = "KIND")]
    pub kind: Kind,
    pub name: String,
    /// How long to wait for the source to act, such as `90s` or `5m`.
    #[arg(long, default_value = "2m", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: std::time::Duration,
    /// Return once the request is recorded, without waiting.
    #[arg(long)]
    pub no_wait: bool,
}

#[derive(Debug, Args)]
pub(crate) struct AttachArgs {
    /// Name of the session.
    #[arg(value_name = "SESSION")]
    pub session: String,
}

#[derive(Debug, Args)]
pub(crate) struct SpawnArgs {
    /// Project the session works on.
    #[arg(long, value_parser = parse_name, value_name = "PROJECT")]
    pub project: String,
    /// Built-in agent adapter, such as claude-code or aider [default: the project's].
    #[arg(long, value_parser = parse_agent, value_name = "AGENT")]
    pub agent: Option<String>,
    /// Where the agent runs: tmux, process or docker [default: the project's].
    #[arg(long, value_parser = parse_runtime, value_name = "RUNTIME")]
    pub runtime: Option<RuntimeKind>,
    /// Name of the session [default: generated, `<project>-xxxxx`].
    #[arg(long, value_parser = parse_name, value_name = "NAME")]
    pub name: Option<String>,
    /// Label of the session, as key=value; may be repeated.
    #[arg(long = "label", value_parser = parse_label, value_name = "KEY=VALUE")]
    pub labels: Vec<(String, String)>,
    /// Wait until the session is ready or settled, then print its phase (default 60s).
    #[arg(long, value_name = "DURATION", num_args = 0..=1, require_equals = true, default_missing_value = "60s",
          value_parser = parse_duration)]
    pub wait: Option<Duration>,
    /// The task for the agent; `-` reads it from stdin (all lines, less one trailing newline).
    #[arg(value_name = "PROMPT|-")]
    pub prompt: String,
}

#[derive(Debug, Args)]
pub(crate) struct CompletionArgs {
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// One or more kinds, in the order given, without repeats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KindList(pub Vec<Kind>);

impl FromStr for KindList {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut kinds = vec![];
        for part in s.split(',') {
            let kind = Kind::parse(part.trim()).ok_or_else(|| ArgError::UnknownKind(part.to_string()))?;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        Ok(KindList(kinds))
    }
}

fn parse_kinds(s: &str) -> Result<KindList, ArgError> {
    s.parse()
}

fn parse_source_kind(s: &str) -> Result<Kind, ArgError> {
    match Kind::parse(s) {
        Some(k @ (Kind::GitSource | Kind::IssueSource | Kind::Session)) => Ok(k),
        _ => Err(ArgError::NotASource(s.to_string())),
    }
}

fn parse_writable_kind(s: &str) -> Result<Kind, ArgError> {
    match Kind::parse(s) {
        Some(k) if k.has_spec() => Ok(k),
        _ => Err(ArgError::NotWritable(s.to_string())),
    }
}

fn parse_duration(s: &str) -> Result<Duration, ArgError> {
    aoctl_api::Duration::from_str(s).map(|d| d.as_std()).map_err(ArgError::Invalid)
}

fn parse_lease_ttl(s: &str) -> Result<Duration, ArgError> {
    let ttl = parse_duration(s)?;
    if ttl < Duration::from_secs(2) || ttl.subsec_nanos() != 0 {
        return Err(ArgError::LeaseTtl(s.to_string()));
    }
    Ok(ttl)
}

fn parse_event_ttl(s: &str) -> Result<Duration, ArgError> {
    let ttl = parse_duration(s)?;
    if ttl < Duration::from_secs(1) {
        return Err(ArgError::Invalid(format!("--event-ttl `{s}`: expected a duration of at least 1s")));
    }
    Ok(ttl)
}

fn parse_name(s: &str) -> Result<String, ArgError> {
    aoctl_api::validate::dns1123_label(s).map(|()| s.to_string()).map_err(|e| ArgError::Invalid(e.into()))
}

/// A built-in agent name; a near miss is answered with the closest name.
fn parse_agent(s: &str) -> Result<String, ArgError> {
    if BUILTIN_AGENTS.contains(&s) {
        return Ok(s.to_string());
    }
    Err(match aoctl_api::decode::suggest(s, BUILTIN_AGENTS) {
        Some(near) => ArgError::AgentNearMiss { given: s.to_string(), near: near.to_string() },
        None => ArgError::UnknownAgent(s.to_string()),
    })
}

fn parse_runtime(s: &str) -> Result<RuntimeKind, ArgError> {
    [RuntimeKind::Tmux, RuntimeKind::Process, RuntimeKind::Docker]
        .into_iter()
        .find(|k| k.as_str() == s)
        .ok_or_else(|| ArgError::UnknownRuntime(s.to_string()))
}

fn parse_label(s: &str) -> Result<(String, String), ArgError> {
    let (k, v) = s.split_once('=').ok_or_else(|| ArgError::NotKeyValue(s.to_string()))?;
    aoctl_api::validate::label_key(k).map_err(|e| ArgError::Invalid(e.into()))?;
    aoctl_api::validate::label_value(v).map_err(|e| ArgError::Invalid(e.into()))?;
    Ok((k.to_string(), v.to_string()))
}

impl Cli {
    /// Checks rules across flags; the message is for a usage error.
    fn check(&self) -> Result<(), ArgError> {
        let store = match &self.command {
            Command::Serve(a) => Some((a.store, &a.etcd_endpoints)),
            Command::Restore(a) => Some((a.store.kind, &a.store.etcd_endpoints)),
            _ => None,
        };
        if let Some((kind, endpoints)) = store {
            let endpoints = endpoints.iter().any(|e| !e.trim().is_empty());
            match kind {
                StoreKind::Etcd if !endpoints => return Err(ArgError::NoEtcdEndpoints),
                StoreKind::Sled if endpoints => return Err(ArgError::EndpointsWithoutEtcd),
                _ => {}
            }
        }
        if let Command::Get(g) = &self.command {
            if g.kinds.0.len() > 1 && g.name.is_some() {
                return Err(ArgError::NameWithKinds);
            }
            if g.kinds.0.len() > 1 && g.watch {
                return Err(ArgError::WatchWithKinds);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_lists() {
        assert_eq!("projects,sessions".parse::<KindList>().unwrap().0, vec![Kind::Project, Kind::Session]);
        assert_eq!("sess,ev,session".parse::<KindList>().unwrap().0, vec![Kind::Session, Kind::Event]);
        let e = "projects,pods".parse::<KindList>().unwrap_err().to_string();
        assert!(e.contains("unknown kind `pods`"), "{e}");
        assert!("".parse::<KindList>().is_err());
    }

    #[test]
    fn serve_store_flags() {
        let serve = |args: &[&str]| {
            let cli = Cli::try_parse_from([&["aoctl", "serve"], args].concat()).expect("the flags parse");
            cli.check().map(|()| match cli.command {
                Command::Serve(a) => (a.store, a.etcd_endpoints, a.etcd_prefix),
                _ => unreachable!("a serve command"),
            })
        };
        assert_eq!(serve(&[]).unwrap(), (StoreKind::Sled, vec![], "/aoctl".to_string()));
        let etcd =
            serve(&["--store", "etcd", "--etcd-endpoints", "http://a:2379,http://b:2379", "--etcd-prefix", "/p"]);
        assert_eq!(
            etcd.unwrap(),
            (StoreKind::Etcd, vec!["http://a:2379".to_string(), "http://b:2379".to_string()], "/p".to_string())
        );
        assert!(matches!(serve(&["--store", "etcd"]), Err(ArgError::NoEtcdEndpoints)));
        assert!(matches!(serve(&["--etcd-endpoints", "http://a:2379"]), Err(ArgError::EndpointsWithoutEtcd)));
        assert!(Cli::try_parse_from(["aoctl", "serve", "--store", "zookeeper"]).is_err());
    }

    #[test]
    fn serve_lease_ttl_is_whole_seconds_of_at_least_two() {
        let ttl = |v: &str| match Cli::try_parse_from(["aoctl", "serve", "--lease-ttl", v]).map(|c| c.command) {
            Ok(Command::Serve(a)) => Ok(a.lease_ttl),
            Ok(_) => unreachable!("a serve command"),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(ttl("3s").unwrap(), Duration::from_secs(3));
        assert_eq!(ttl("1m").unwrap(), Duration::from_secs(60));
        let e = ttl("1s").unwrap_err();
        assert!(e.contains("at least 2s"), "{e}");
        assert!(ttl("2500ms").is_err());
        let Command::Serve(a) = Cli::try_parse_from(["aoctl", "serve"]).unwrap().command else { panic!() };
        assert_eq!(a.lease_ttl, Duration::from_secs(5));
        assert_eq!(a.node, None);
    }

    #[test]
    fn serve_event_ttl_is_an_hour_unless_given() {
        let ttl = |args: &[&str]| match Cli::try_parse_from([&["aoctl", "serve"], args].concat()).map(|c| c.command) {
            Ok(Command::Serve(a)) => Ok(a.event_ttl),
            Ok(_) => unreachable!("a serve command"),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(ttl(&[]).unwrap(), Duration::from_secs(3600));
        assert_eq!(ttl(&["--event-ttl", "24h"]).unwrap(), Duration::from_secs(86_400));
        assert_eq!(ttl(&["--event-ttl", "90s"]).unwrap(), Duration::from_secs(90));
        assert!(ttl(&["--event-ttl", "0s"]).unwrap_err().contains("at least 1s"));
        assert!(ttl(&["--event-ttl", "soon"]).is_err());
    }

    #[test]
    fn backup_and_restore_flags() {
        let cli = Cli::try_parse_from(["aoctl", "backup", "-o", "b.jsonl"]).unwrap();
        let Command::Backup(a) = cli.command else { panic!("a backup command") };
        assert_eq!(a.output, PathBuf::from("b.jsonl"));
        assert!(Cli::try_parse_from(["aoctl", "backup"]).is_err(), "-o is required");
        let restore = |args: &[&str]| {
            let cli = Cli::try_parse_from([&["aoctl", "restore"], args].concat()).expect("the flags parse");
            cli.check().map(|()| match cli.command {
                Command::Restore(a) => (a.file, a.store.kind, a.store.etcd_endpoints, a.store.etcd_prefix),
                _ => unreachable!("a restore command"),
            })
        };
        assert_eq!(restore(&["b.jsonl"]).unwrap(), ("b.jsonl".into(), StoreKind::Sled, vec![], "/aoctl".to_string()));
        let etcd = restore(&["b.jsonl", "--store", "etcd", "--etcd-endpoints", "http://a:2379", "--etcd-prefix", "/p"]);
        assert_eq!(etcd.unwrap(), ("b.jsonl".into(), StoreKind::Etcd, vec!["http://a:2379".to_string()], "/p".into()));
        assert!(matches!(restore(&["b.jsonl", "--store", "etcd"]), Err(ArgError::NoEtcdEndpoints)));
        assert!(matches!(
            restore(&["b.jsonl", "--etcd-endpoints", "http://a:2379"]),
            Err(ArgError::EndpointsWithoutEtcd)
        ));
        assert!(Cli::try_parse_from(["aoctl", "restore"]).is_err(), "FILE is required");
    }

    #[test]
    fn flags_parse() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["aoctl", "apply", "-f", "x.yaml", "--wait"]).unwrap();
        let Command::Apply(a) = cli.command else { panic!() };
        assert_eq!(a.wait, Some(Duration::from_secs(60)));
        let cli = Cli::try_parse_from(["aoctl", "apply", "-f", "-", "--wait=5m", "--prune", "-l", "a=b"]).unwrap();
        let Command::Apply(a) = cli.command else { panic!() };
        assert_eq!(a.wait, Some(Duration::from_secs(300)));
        assert!(Cli::try_parse_from(["aoctl", "apply", "-f", "-", "--prune"]).is_err());
        assert!(Cli::try_parse_from(["aoctl", "delete", "session"]).is_err());
        assert!(Cli::try_parse_from(["aoctl", "delete", "pod", "x"]).is_err());
        assert!(Cli::try_parse_from(["aoctl", "delete", "-f", "a.yaml", "session", "x"]).is_err());
        let cli = Cli::try_parse_from(["aoctl", "--server", "http://h:1", "get", "proj,sess", "-o", "wide"]).unwrap();
        assert_eq!(cli.global.server, "http://h:1");
        let multi = Cli::try_parse_from(["aoctl", "get", "proj,sess", "x"]).unwrap();
        assert!(multi.check().is_err());
    }

    #[test]
    fn session_verbs_parse() {
        let cli = Cli::try_parse_from(["aoctl", "logs", "x", "-f", "--tail", "20"]).unwrap();
        let Command::Logs(l) = cli.command else { panic!() };
        assert_eq!((l.session.as_str(), l.follow, l.tail), ("x", true, Some(20)));
        assert!(Cli::try_parse_from(["aoctl", "logs", "x", "--tail", "-1"]).is_err());
        let cli = Cli::try_parse_from(["aoctl", "send", "x", "-"]).unwrap();
        let Command::Send(s) = cli.command else { panic!() };
        assert_eq!(s.text, "-");
        assert!(Cli::try_parse_from(["aoctl", "send", "x"]).is_err());
        assert!(Cli::try_parse_from(["aoctl", "attach", "x"]).is_ok());

        let cli = Cli::try_parse_from([
            "aoctl",
            "spawn",
            "--project",
            "demo",
            "--agent",
            "aider",
            "--runtime",
            "process",
            "--label",
            "team=web",
            "--label",
            "ao.dev/tier=1",
            "--wait=2m",
            "fix it",
        ])
        .unwrap();
        let Command::Spawn(s) = cli.command else { panic!() };
        assert_eq!(s.agent.as_deref(), Some("aider"));
        assert_eq!(s.runtime, Some(RuntimeKind::Process));
        assert_eq!(s.labels, [("team".to_string(), "web".to_string()), ("ao.dev/tier".into(), "1".into())]);
        assert_eq!(s.wait, Some(Duration::from_secs(120)));
        assert_eq!(s.prompt, "fix it");
        let cli = Cli::try_parse_from(["aoctl", "spawn", "--project", "demo", "--wait", "-"]).unwrap();
        let Command::Spawn(s) = cli.command else { panic!() };
        assert_eq!((s.wait, s.prompt.as_str()), (Some(Duration::from_secs(60)), "-"));

        let err = |args: &[&str]| Cli::try_parse_from(args).unwrap_err().to_string();
        let e = err(&["aoctl", "spawn", "--project", "demo", "--agent", "claude", "p"]);
        assert!(e.contains("did you mean `claude-code`?"), "{e}");
        let e = err(&["aoctl", "spawn", "--project", "demo", "--runtime", "podman", "p"]);
        assert!(e.contains("expected tmux, process or docker"), "{e}");
        let e = err(&["aoctl", "spawn", "--project", "demo", "--label", "team", "p"]);
        assert!(e.contains("is not KEY=VALUE"), "{e}");
        assert!(Cli::try_parse_from(["aoctl", "spawn", "--project", "Demo", "p"]).is_err());
        assert!(Cli::try_parse_from(["aoctl", "spawn", "--project", "demo", "--name", "a_b", "p"]).is_err());
        assert!(Cli::try_parse_from(["aoctl", "spawn", "p"]).is_err());
    }
}
