//! Every agent CLI a reachable registry ships, for real: the pinned packages of e2e/agents-cli/ are
//! installed by its script into a cache outside the repository (fast once cached). For each one
//! the flags its adapter row renders must appear in the CLI's own `--help`, and a Session with
//! `agent: <name>` in tmux (a fresh worktree, a fresh HOME per server) must reach a screen the
//! row's own cues recognise: its ready prompt, a first-run dialog the controller answered, or its
//! no-credentials screen. After delete, none of its processes (nor a daemon it spawned) is left.
//! No network beyond the registries is used and no agent has credentials.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use aoctl_agents::{Adapter, RenderInput};
use aoctl_api::session::{AgentRef, Permissions};
use regex::Regex;
use serde_json::{json, Value};

use crate::harness::{git_repo, Server, API};
use crate::lifecycle::{events, project, workspace};

/// The install script and its list, in the repository.
const AGENTS_CLI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../e2e/agents-cli");
/// How long the whole install may take on a cold cache (about two minutes here).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(900);
/// How long one `--help` may take.
const HELP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a CLI may take to reach a screen of its own: kilocode and opencode draw nothing for
/// 25 to 60 s on 2 cores with three others starting beside them.
const SCREEN_TIMEOUT: Duration = Duration::from_secs(90);
/// How long its processes may take to end after delete.
const GONE_TIMEOUT: Duration = Duration::from_secs(15);
/// CLIs launched at once: each is a Node or Python program of a few hundred MB.
const AT_ONCE: usize = 4;
/// Rows another test launches with its own, deeper checks; here only their flags are checked.
const LAUNCHED_ELSEWHERE: &[&str] = &["claude-code", "codex", "aider"];

/// What the install script left: its bin folder and, per agent, `ok` or why not.
struct Installed {
    bin: PathBuf,
    status: BTreeMap<String, (String, String)>,
}

impl Installed {
    /// The agents whose CLI is installed and which have a built-in row.
    fn agents(&self) -> Vec<&'static Adapter> {
        let mut out = Vec::new();
        for (agent, (state, why)) in &self.status {
            match (aoctl_agents::builtin(agent), state.as_str()) {
                (Some(row), "ok") => out.push(row),
                (Some(_), _) => eprintln!("real_clis: {agent} is not installed here ({state}: {why})"),
                (None, _) => {}
            }
        }
        out
    }

    /// `PATH` with the bin folder first.
    fn path(&self) -> OsString {
        let mut path = vec![self.bin.clone()];
        path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
        std::env::join_paths(path).expect("PATH")
    }
}

/// Runs the install script once per test process (it returns at once when the cache is full).
fn installed() -> &'static Installed {
    static INSTALLED: OnceLock<Installed> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let script = Path::new(AGENTS_CLI).join("install.sh");
        let mut cmd = Command::new("bash");
        cmd.arg(&script);
        let out = crate::harness::run_for(cmd, None, INSTALL_TIMEOUT);
        assert_eq!(out.code, 0, "{} failed:\n{}", script.display(), out.stderr);
        let bin = PathBuf::from(out.stdout.trim());
        let status_file = bin.parent().expect("the cache").join("status.tsv");
        let text = std::fs::read_to_string(&status_file).expect("the install's status.tsv");
        let status = text
            .lines()
            .filter_map(|l| {
                let mut f = l.splitn(3, '\t');
                Some((f.next()?.to_string(), (f.next()?.to_string(), f.next().unwrap_or("").to_string())))
            })
            .collect();
        Installed { bin, status }
    })
}

/// Runs `program args…` with `PATH` and a scratch HOME; what it printed, both streams.
fn output_of(installed: &Installed, home: &Path, program: &str, args: &[&str]) -> String {
    let mut cmd = Command::new(installed.bin.join(program));
    cmd.args(args).env("PATH", installed.path()).env("HOME", home).env("NO_COLOR", "1").current_dir(home);
    let out = crate::harness::run_for(cmd, None, HELP_TIMEOUT);
    format!("{}{}", out.stdout, out.stderr)
}

/// The launch commands the row renders: a new conversation with a prompt, with bypass, and its
/// resume form.
fn rendered(row: &Adapter) -> Vec<Vec<String>> {
    let agent = AgentRef::Builtin(row.name.to_string());
    let input = RenderInput {
        agent: &agent,
        prompt: Some("say hello"),
        prompt_file: Path::new("/srv/session/prompt.md"),
        agent_args: &[],
        permissions: Permissions::Bypass,
        workdir: Path::new("/srv/ws/project/session"),
        workspaces_root: Path::new("/srv/ws"),
        running_as_root: false,
        // The MCP server's flags are checked too.
        mcp: Some(Path::new("/usr/local/bin/aoctl")),
    };
    let mut out = vec![aoctl_agents::render(&input).expect("the row renders").command];
    if let Some(resume) = aoctl_agents::render_resume(&input).expect("the row renders its resume") {
        out.push(resume.command);
    }
    out
}

/// Whether `help` documents `flag` as an option (not merely mentions a longer flag).
fn documents(help: &str, flag: &str) -> bool {
    let re = format!(r"(?m)(?:^|[\s,\[(|]){}(?:[\s,=\[<)|]|$)", regex::escape(flag));
    Regex::new(&re).expect("flag pattern").is_match(help)
}

#[test]
fn every_flag_an_adapter_renders_is_in_its_clis_help() {
    let installed = installed();
    let home = tempfile::tempdir().expect("a scratch HOME");
    let mut missing = Vec::new();
    let mut checked = 0;
    let word = Regex::new(r"^[a-z][a-z-]*$").unwrap();
    for row in installed.agents() {
        let mut helps = vec![output_of(installed, home.path(), row.binary, &["--help"])];
        let commands = rendered(row);
        // A bare word in the command may name a subcommand (`codex resume`): its help counts too.
        for command in &commands {
            for w in command[1..].iter().filter(|a| word.is_match(a)) {
                if documents(&helps[0], w) {
                    helps.push(output_of(installed, home.path(), row.binary, &[w, "--help"]));
                }
            }
        }
        for command in &commands {
            for flag in command[1..].iter().filter(|a| a.starts_with('-')) {
                let flag = flag.split('=').next().unwrap_or(flag);
                checked += 1;
                if !helps.iter().any(|h| documents(h, flag)) {
                    missing
                        .push(format!("{}: `{flag}` (from {command:?}) is not in `{} --help`", row.name, row.binary));
                }
            }
        }
    }
    assert!(checked > 0, "no flag was checked");
    assert!(missing.is_empty(), "flags the CLIs do not document:\n{}", missing.join("\n"));
}

/// The first of `patterns` found in `text`.
fn first_match(patterns: &[&str], text: &str) -> Option<String> {
    patterns.iter().find_map(|p| Regex::new(p).ok()?.find(text).map(|m| m.as_str().trim().to_string()))
}

/// A screen the row's own cues recognise, with what recognised it; `None` for any other screen.
fn recognised(row: &Adapter, obj: &Value, screen: &str) -> Option<String> {
    let state = obj.pointer("/status/activity/state").and_then(Value::as_str)?;
    // What aoctl saw on the screen: a CLI that exits may leave only tmux's "Pane is dead" behind.
    let evidence = obj.pointer("/status/activity/evidence").and_then(Value::as_str).unwrap_or_default();
    let screen = &format!("{screen}\n{evidence}");
    let ready: Vec<&str> = row.cues.ready.iter().chain(row.cues.idle).copied().collect();
    let login = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "AgentReady" && c["reason"] == "AgentNotLoggedIn"));
    match state {
        "idle" => first_match(&ready, screen).map(|m| format!("ready screen ({m})")),
        // A login screen counts once the session says so, with how to log in.
        "needs-input" if !row.login.screens.is_empty() => {
            let m = first_match(row.login.screens, screen)?;
            let message = login?["message"].as_str().unwrap_or_default();
            message.contains(row.login.how).then(|| format!("login screen ({m}), AgentNotLoggedIn"))
        }
        "needs-input" => first_match(row.cues.needs_input, screen).map(|m| format!("no-credentials screen ({m})")),
        // A CLI that exits when it has no credentials, saying so.
        "exited" => {
            let patterns: Vec<&str> = row.cues.needs_input.iter().chain(row.login.screens).copied().collect();
            first_match(&patterns, screen).map(|m| format!("exited at its no-credentials message ({m})"))
        }
        _ => None,
    }
}

/// Processes with `HOME=home` in their environment, other than tmux and aoctl itself: the agent
/// and anything it started (daemons keep their environment).
fn processes_of(home: &Path) -> Vec<(u32, String)> {
    let needle = format!("HOME={}", home.display());
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else { continue };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else { continue };
        if !env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            continue;
        }
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        let name = exe.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
        if name == "tmux" || name == "aoctl" || name.is_empty() {
            continue;
        }
        let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let argv: Vec<String> = argv.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        out.push((pid, argv.join(" ").chars().take(120).collect()));
    }
    out
}

/// What happened to one CLI: the screen it reached (or why not) and what was left after delete.
struct Outcome {
    agent: &'static str,
    reached: Result<String, String>,
    answered: Vec<String>,
    left: Vec<(u32, String)>,
    seconds: f32,
}

/// Launches `row` through aoctl on a server of its own and waits for a screen its cues know.
async fn launch(row: &'static Adapter, path: OsString, prompt: Option<&'static str>, login_only: bool) -> Outcome {
    let start = Instant::now();
    let server = Server::start_with_env(&[("PATH", &path)]).await;
    let tmux = crate::lifecycle::Tmux::of(&server);
    let repo = git_repo(server.tmp.path(), "cli", "main");
    server.create("projects", &project("cli", &repo, json!({}))).await;
    let name = format!("cli-{}", row.name);
    let mut s = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
        "spec": {"project": "cli", "agent": row.name, "env": {"PATH": path.to_string_lossy()}}});
    if let Some(p) = prompt {
        s["spec"]["prompt"] = json!(p);
    }
    server.create("sessions", &s).await;
    let deadline = Instant::now() + SCREEN_TIMEOUT;
    let reached = loop {
        let obj = server.get_path(&format!("{API}/sessions/{name}")).await.json();
        let screen = tmux.capture(&name);
        // A CLI whose login screen is awaited may show its prompt line a moment before.
        if let Some(how) = recognised(row, &obj, &screen).filter(|h| !login_only || h.starts_with("login screen")) {
            break Ok(how);
        }
        if Instant::now() > deadline {
            let activity = obj.pointer("/status/activity").cloned().unwrap_or(Value::Null);
            let screen: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
            let tail = screen[screen.len().saturating_sub(12)..].join("\n");
            break Err(format!("activity {activity}; last lines of its screen:\n{tail}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let answered = events(&server, &name)
        .await
        .iter()
        .filter(|e| e["reason"] == "DialogAnswered")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect();
    let reached = match (reached, prompt) {
        // Nothing is typed into a login screen: the prompt shows at most once (as an argument).
        (Ok(how), Some(p)) if tmux.capture(&name).matches(p).count() > 1 => {
            Err(format!("reached its {how}, but the prompt was typed into it:\n{}", tmux.capture(&name)))
        }
        (r, _) => r,
    };
    if reached.is_ok() {
        let ws = workspace(&server, "cli", &name);
        assert!(ws.is_dir(), "{}: its worktree {} exists", row.name, ws.display());
    }
    server.aoctl(&["delete", "session", &name, "--wait=30s"]).ok();
    let gone = Instant::now() + GONE_TIMEOUT;
    let mut left = processes_of(&server.home);
    while !left.is_empty() && Instant::now() < gone {
        tokio::time::sleep(Duration::from_millis(250)).await;
        left = processes_of(&server.home);
    }
    for (pid, _) in &left {
        // SAFETY: kill has no memory preconditions; the pid was read from /proc just now.
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    Outcome { agent: row.name, reached, answered, left, seconds: start.elapsed().as_secs_f32() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_installed_cli_reaches_a_screen_of_its_own_and_leaves_nothing() {
    let installed = installed();
    let path = installed.path();
    let rows: Vec<&'static Adapter> =
        installed.agents().into_iter().filter(|r| !LAUNCHED_ELSEWHERE.contains(&r.name)).collect();
    assert!(!rows.is_empty(), "no agent CLI is installed");
    let mut outcomes = Vec::new();
    for batch in rows.chunks(AT_ONCE) {
        let runs = batch.iter().map(|row| tokio::spawn(launch(row, path.clone(), None, false)));
        for run in runs.collect::<Vec<_>>() {
            outcomes.push(run.await.expect("a launch"));
        }
    }
    let mut failures = Vec::new();
    for o in &outcomes {
        let answered = if o.answered.is_empty() { String::new() } else { format!(", {}", o.answered.join(", ")) };
        match &o.reached {
            Ok(how) => eprintln!("real_clis: {} reached its {how}{answered} in {:.0} s", o.agent, o.seconds),
            Err(why) => {
                failures.push(format!("{}: no screen its row recognises within {SCREEN_TIMEOUT:?}: {why}", o.agent))
            }
        }
        if !o.left.is_empty() {
            failures.push(format!("{}: processes left after delete: {:?}", o.agent, o.left));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Claude Code, Codex and gemini without credentials, given a first prompt: each waits at its
/// login screen, the session says `AgentNotLoggedIn` with how to log in, and the prompt was not
/// typed into that screen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_codex_and_gemini_without_credentials_wait_at_their_login_screens() {
    let installed = installed();
    let path = installed.path();
    let rows: Vec<&'static Adapter> =
        installed.agents().into_iter().filter(|r| ["claude-code", "codex", "gemini"].contains(&r.name)).collect();
    assert_eq!(rows.len(), 3, "claude-code, codex and gemini are installed");
    let runs: Vec<_> =
        rows.iter().map(|row| tokio::spawn(launch(row, path.clone(), Some("write the release notes"), true))).collect();
    let mut failures = Vec::new();
    for run in runs {
        let o = run.await.expect("a launch");
        match &o.reached {
            Ok(how) if how.starts_with("login screen") => eprintln!("real_clis: {} reached its {how}", o.agent),
            Ok(how) => failures.push(format!("{}: reached its {how}, not its login screen", o.agent)),
            Err(why) => failures.push(format!("{}: no login screen within {SCREEN_TIMEOUT:?}: {why}", o.agent)),
        }
        if !o.left.is_empty() {
            failures.push(format!("{}: processes left after delete: {:?}", o.agent, o.left));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
