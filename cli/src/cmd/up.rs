//! `aoctl up`: register a repository (a path, or a URL cloned into the data directory) as a
//! Project, first starting `aoctl serve` in the background when no server answers; with
//! `--orchestrator`, the project gets an orchestrator agent too.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use aoctl_api::orchestrator::{orchestrator_name, OrchestratorSpec};
use aoctl_api::{AnyObject, Kind, Project};
use aoctl_git::repository;
use aoctl_runtimes::daemon;
use reqwest::Url;
use serde_json::{json, Map, Value};

use super::apply::{desired, Outcome};
use super::emit;
use crate::args::{Global, UpArgs};
use crate::client::Client;
use crate::object;

/// Pid file of the background server, in the data directory.
pub(crate) const PID_FILE: &str = "serve.pid";
/// Log of the background server, in the data directory.
pub(crate) const LOG_FILE: &str = "serve.log";
/// How long a starting server has to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

pub(crate) async fn run(g: &Global, a: UpArgs) -> anyhow::Result<ExitCode> {
    // The open endpoints tell whether a server runs; its token exists once it has started.
    let probe = Client::new(&g.server, None)?;
    let data_dir = g.data_dir()?;

    let path = if is_url(&a.target) { clone_into(&a.target, &data_dir).await? } else { PathBuf::from(&a.target) };
    let info = tokio::task::spawn_blocking(move || repository::inspect(&path)).await??;
    let name = sanitize_name(&info.root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
    let root = info.root.to_str().ok_or_else(|| anyhow!("{}: the path is not valid UTF-8", info.root.display()))?;

    ensure_server(&probe, &data_dir).await?;
    let client = super::client(g)?;

    let mut project = Project::new(&name, root);
    project.spec.default_branch = info.default_branch.clone();
    project.spec.repo = info.github_repo.clone();
    if let Some(prompt) = &a.orchestrator {
        let prompt = (!prompt.trim().is_empty()).then(|| prompt.clone());
        project.spec.orchestrator = Some(OrchestratorSpec { prompt, ..Default::default() });
    }
    let outcome = register(&client, &name, project).await?;
    emit(&format!("{} {outcome}\n", object::reference(Kind::Project, &name)));
    if a.orchestrator.is_some() {
        let o = orchestrator_name(&name);
        emit(&format!(
            "session \"{o}\" is the project's orchestrator: talk to it with aoctl send {o} TEXT, or on the dashboard\n"
        ));
    } else {
        emit(&format!("next: aoctl spawn --project {name} \"describe the task\"\n"));
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether the argument is a git URL rather than a path.
fn is_url(s: &str) -> bool {
    ["https://", "http://", "git@", "ssh://", "file://"].iter().any(|p| s.starts_with(p))
}

/// The folder a URL is cloned into: its last path element, without `.git`, as a DNS label.
fn repo_dir_name(url: &str) -> String {
    let trimmed = url.trim_end_matches('/');
    let last = trimmed.rsplit(['/', ':']).next().unwrap_or_default();
    sanitize_name(last.strip_suffix(".git").unwrap_or(last))
}

/// How many folders named after one repository (`name`, `name-2` …) are tried.
const SAME_NAME: usize = 20;

/// Clones `url` into `<data dir>/repos/<name>`, or reuses an earlier clone of the same URL there.
/// A folder of that name holding a clone of another URL is left alone and the clone goes beside
/// it (`<name>-2`, …); one that is no finished clone (not a repository, or without an `origin`) is
/// refused with the folder named.
async fn clone_into(url: &str, data_dir: &Path) -> anyhow::Result<PathBuf> {
    let repos = data_dir.join("repos");
    let base = repo_dir_name(url);
    let mut dest = None;
    for i in 1..=SAME_NAME {
        let candidate = repos.join(if i == 1 { base.clone() } else { format!("{base}-{i}") });
        if !candidate.exists() {
            dest = Some(candidate);
            break;
        }
        let c = candidate.clone();
        let origin = tokio::task::spawn_blocking(move || repository::origin_url(&c)).await?;
        match origin {
            Ok(Some(o)) if repository::same_remote(&o, url) => {
                emit(&format!("using the clone at {}\n", candidate.display()));
                return Ok(candidate);
            }
            Ok(Some(o)) => emit(&format!("{} is a clone of {o}; not reused\n", candidate.display())),
            Ok(None) => bail!(
                "{} has no `origin` remote, so it is no finished clone of {url}; remove it (or give `aoctl up` its path)",
                candidate.display()
            ),
            Err(e) => bail!("{e}: the folder is no finished clone of {url}; remove it (or give `aoctl up` its path)"),
        }
    }
    let Some(dest) = dest else {
        bail!("{}: {SAME_NAME} folders named after `{base}` hold clones of other URLs", repos.display())
    };
    std::fs::create_dir_all(&repos).with_context(|| format!("cannot create {}", repos.display()))?;
    let (u, d) = (url.to_string(), dest.clone());
    tokio::task::spawn_blocking(move || repository::clone(&u, &d)).await??;
    emit(&format!("cloned {url} into {}\n", dest.display()));
    Ok(dest)
}

/// A DNS-1123 label made from a folder name: lower case, runs of other characters as one `-`,
/// at most 63 characters; `project` when nothing is left.
pub(crate) fn sanitize_name(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.truncate(63);
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "project".into()
    } else {
        out.to_string()
    }
}

/// The address `serve` must listen on so that the `--server` URL reaches it.
fn listen_addr(server: &Url) -> anyhow::Result<SocketAddr> {
    let port = server.port_or_known_default().ok_or_else(|| anyhow!("the server URL {server} has no port"))?;
    let host = server.host_str().ok_or_else(|| anyhow!("the server URL {server} has no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host}"))?
        .next()
        .ok_or_else(|| anyhow!("{host} has no address"))
}

/// Starts `aoctl serve` in the background unless a server answers, and waits until it is ready.
async fn ensure_server(client: &Client, data_dir: &Path) -> anyhow::Result<()> {
    let server = client.server().clone();
    if client.probe("healthz", Duration::from_secs(2)).await.is_ok() {
        emit(&format!("server already running at {server}\n"));
        return Ok(());
    }
    let pid_file = data_dir.join(PID_FILE);
    let log = data_dir.join(LOG_FILE);
    // A server started a moment ago may not answer yet: wait for it rather than start another.
    let (pid, started) = match daemon::read_pid(&pid_file)? {
        Some(pid) if daemon::is_alive(pid) => (pid, false),
        _ => {
            let listen = listen_addr(&server)?;
            let exe = std::env::current_exe().context("cannot find the aoctl executable")?;
            let args: Vec<OsString> = vec![
                "serve".into(),
                "--listen".into(),
                listen.to_string().into(),
                "--data-dir".into(),
                data_dir.as_os_str().to_owned(),
            ];
            (daemon::spawn_detached(&exe, &args, &log, &pid_file)?, true)
        }
    };
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if client.probe("readyz", Duration::from_secs(2)).await.is_ok() {
            break;
        }
        if !daemon::is_alive(pid) {
            // Removes the pid file the dead server left.
            let _ = daemon::stop(&pid_file, Duration::ZERO);
            match tail(&log, 10) {
                t if t.is_empty() => bail!("the server exited before it was ready; its log {} is empty", log.display()),
                t => bail!("the server exited before it was ready; its log {} ends with:\n{t}", log.display()),
            }
        }
        if Instant::now() >= deadline {
            bail!("the server (pid {pid}) was not ready after {}s; see {}", READY_TIMEOUT.as_secs(), log.display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if started {
        emit(&format!("server started (pid {pid}, log {})\n", log.display()));
    } else {
        emit(&format!("server already running at {server} (pid {pid})\n"));
    }
    Ok(())
}

/// The last `n` lines of a file, indented.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].iter().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

/// Creates the project, or fills in what an existing one for the same path lacks. Settings the
/// user made (defaultBranch, repo and everything else) are kept.
async fn register(client: &Client, name: &str, project: Project) -> anyhow::Result<Outcome> {
    let path = project.spec.path.clone();
    let body = desired(&AnyObject::Project(project));
    let live = match client.get(Kind::Project, name).await {
        Ok(live) => live,
        Err(e) if e.is_not_found() => {
            client.create(Kind::Project, &body, false).await?;
            return Ok(Outcome::Created);
        }
        Err(e) => return Err(e.into()),
    };
    let live_path = object::str_at(&live, "/spec/path").unwrap_or_default();
    if live_path != path {
        bail!(
            "project \"{name}\" already exists for {live_path}; rename this folder or apply a Project with another name for {path}"
        );
    }
    let patch = missing_fields(&body, &live);
    if patch.is_empty() {
        return Ok(Outcome::Unchanged);
    }
    client.merge_patch(Kind::Project, name, &json!({"spec": patch})).await?;
    Ok(Outcome::Configured)
}

/// The spec fields `up` detected (or was asked for) that the live project does not set.
fn missing_fields(body: &Value, live: &Value) -> Map<String, Value> {
    let mut patch = Map::new();
    for key in ["defaultBranch", "repo", "orchestrator"] {
        let ours = body.pointer(&format!("/spec/{key}")).filter(|v| !v.is_null());
        let theirs = live.pointer(&format!("/spec/{key}")).filter(|v| !v.is_null());
        if let (Some(v), None) = (ours, theirs) {
            patch.insert(key.into(), v.clone());
        }
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_names() {
        assert_eq!(sanitize_name("My_Repo.rs"), "my-repo-rs");
        assert_eq!(sanitize_name("--Ünïcode--"), "n-code");
        assert_eq!(sanitize_name("..."), "project");
        assert_eq!(sanitize_name("2048"), "2048");
        let long = sanitize_name(&format!("{}-x", "a".repeat(62)));
        assert_eq!(long, "a".repeat(62));
        assert!(aoctl_api::validate::dns1123_label(&sanitize_name(&"Z_".repeat(80))).is_ok());
    }

    #[test]
    fn urls() {
        assert!(is_url("git@github.com:acme/widgets.git"));
        assert!(is_url("file:///tmp/x"));
        assert!(!is_url("./widgets"));
        assert_eq!(repo_dir_name("git@github.com:acme/Widgets.git"), "widgets");
        assert_eq!(repo_dir_name("https://github.com/acme/widgets/"), "widgets");
        assert_eq!(repo_dir_name("file:///tmp/../.."), "project");
    }

    #[test]
    fn listen_addresses() {
        let a = listen_addr(&Url::parse("http://127.0.0.1:7420").unwrap()).unwrap();
        assert_eq!(a.to_string(), "127.0.0.1:7420");
        let a = listen_addr(&Url::parse("http://localhost:9000/").unwrap()).unwrap();
        assert_eq!(a.to_string(), "127.0.0.1:9000");
        let a = listen_addr(&Url::parse("http://[::1]:1").unwrap()).unwrap();
        assert_eq!(a.to_string(), "[::1]:1");
    }

    #[test]
    fn only_missing_fields_are_filled() {
        let body = json!({"spec": {"path": "/p", "defaultBranch": "main", "repo": "a/b"}});
        let live = json!({"spec": {"path": "/p", "defaultBranch": "develop"}});
        assert_eq!(Value::Object(missing_fields(&body, &live)), json!({"repo": "a/b"}));
        let body = json!({"spec": {"path": "/p", "orchestrator": {"prompt": "new goal"}}});
        let live = json!({"spec": {"path": "/p", "orchestrator": {"prompt": "old goal"}}});
        assert!(missing_fields(&body, &live).is_empty(), "an orchestrator the project has stays as it is");
        let live = json!({"spec": {"path": "/p"}});
        assert_eq!(Value::Object(missing_fields(&body, &live)), json!({"orchestrator": {"prompt": "new goal"}}));
    }
}
