//! Usage limits and budgets with the real binary, git and tmux. A scripted agent (e2e/agents/
//! limit-agent) prints Claude Code's usage-limit message with a reset some seconds ahead: the
//! session is `rate-limited` with the reset as evidence, `aoctl send` is refused and nothing is
//! typed, a queued session takes its slot under `maxConcurrentSessions: 1`, and once the reset has
//! passed and a slot is free it is resumed exactly once. The same agent records token usage in
//! Claude Code's format under its HOME: the totals reach the Session and the Project, and once the
//! project's budget is spent the next session waits and the notifiers are told once, and deleting
//! the session that spent it gives nothing back.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{Server, API};
use crate::lifecycle::{
    agent_repo, condition, eventually, git, is_true, phase, project, ready, session, token, wait_all, write_manifest,
    Cleanup, Tmux, READY,
};

const LIMIT_AGENT: &str = include_str!("../agents/limit-agent");
/// How far ahead the scripted agent's limit resets: long enough for the steps before it.
const RESET_IN: u64 = 20;

/// Commits the limit agent into `repo` as scripts/limit-agent.
fn add_limit_agent(repo: &Path) {
    let path = repo.join("scripts").join("limit-agent");
    fs::write(&path, LIMIT_AGENT).expect("write the limit agent");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("make it executable");
    git(repo, &["add", "scripts/limit-agent"]);
    git(repo, &["commit", "-q", "-m", "Add the limit agent"]);
}

/// A session running the limit agent with `env`.
fn limit_session(name: &str, project: &str, env: Value) -> Value {
    session(
        name,
        project,
        "",
        json!({"agent": {"command": ["./scripts/limit-agent", "{promptFile}", token(name)]}, "env": env}),
    )
}

fn state(o: &Value) -> &str {
    o.pointer("/status/activity/state").and_then(Value::as_str).unwrap_or("")
}

/// The lines typed into the agent that carry the resume marker.
fn resumes(log: &Path) -> usize {
    fs::read_to_string(log).unwrap_or_default().lines().filter(|l| l.contains("[aoctl:rate-limit:")).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_agent_waits_for_its_reset_frees_its_slot_and_is_resumed_once() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let tmux = Tmux::of(&server);
    let repo = agent_repo(server.tmp.path(), "quota");
    add_limit_agent(&repo);
    let log = server.tmp.path().join("typed.log");
    let docs = [
        project("quota", &repo, json!({"maxConcurrentSessions": 1})),
        limit_session("limited", "quota", json!({"E2E_LIMIT_IN": RESET_IN.to_string(), "E2E_INPUT_LOG": log})),
        session("next", "quota", &token("next"), json!({})),
    ];
    server.aoctl(&["apply", "-f", &write_manifest(&server.tmp.path().join("quota.yaml"), &docs)]).ok();

    // Rate-limited, with the line and the reset as evidence.
    let o = wait_all(&server, &["limited"], READY, "rate-limited", |o| state(o) == "rate-limited").await.remove(0);
    let evidence = o.pointer("/status/activity/evidence").and_then(Value::as_str).unwrap_or_default();
    assert!(evidence.contains("Claude AI usage limit reached|"), "{o:#}");
    assert!(evidence.contains("resets at "), "{o:#}");
    let resets_at = o.pointer("/status/activity/resetsAt").and_then(Value::as_str).expect("resetsAt").to_string();
    let reset = chrono::DateTime::parse_from_rfc3339(&resets_at).expect("RFC 3339").with_timezone(&chrono::Utc);
    let ahead = (reset - chrono::Utc::now()).num_seconds();
    assert!(ahead > 0 && ahead <= RESET_IN as i64, "the reset is the one printed: {resets_at} ({ahead}s ahead)");
    assert!(evidence.contains(&resets_at), "the evidence names the reset: {evidence}");

    // Nothing is typed meanwhile: `aoctl send` is refused with the reset time.
    let out = server.aoctl(&["send", "limited", "hello while limited"]);
    out.code(1);
    assert!(out.stderr.contains("rate-limited until") && out.stderr.contains("nothing was typed"), "{out}");
    let resp = server.json("POST", &format!("{API}/sessions/limited/input"), &json!({"text": "hi"})).await;
    resp.expect_status(409, "Conflict");

    // It holds no slot: the queued session starts while it waits.
    let both = wait_all(&server, &["limited", "next"], READY, "next running beside the limited one", |o| {
        if o["metadata"]["name"] == "next" {
            ready(o)
        } else {
            phase(o) == "RateLimited"
        }
    })
    .await;
    assert!(chrono::Utc::now() < reset, "next started before the reset: {both:#?}");
    assert_eq!(tmux.sessions(), ["limited", "next"]);
    assert!(!fs::read_to_string(&log).unwrap_or_default().contains("hello"), "nothing was typed into it");

    // The reset passes while `next` holds the only slot: it waits Queued rather than exceed it.
    let wait = Duration::from_secs(RESET_IN + 30);
    let o = server
        .wait_for("sessions", "limited", wait, |o| {
            phase(o) == "Queued" && condition(o, "Ready").is_some_and(|c| c["reason"] == "Queued")
        })
        .await;
    let msg = condition(&o, "Ready").and_then(|c| c["message"].as_str()).unwrap_or_default();
    assert!(msg.contains("waiting for a slot"), "{o:#}");
    assert_eq!(resumes(&log), 0, "not resumed without a slot");

    // A slot frees: it is resumed, once.
    server.aoctl(&["delete", "session", "next", "--wait"]).ok();
    eventually(READY, "the resume message typed into the agent", || match resumes(&log) {
        0 => Err("none yet".to_string()),
        n => Ok(n),
    })
    .await;
    let o = server.wait_for("sessions", "limited", READY, |o| state(o) != "rate-limited" && ready(o)).await;
    assert!(is_true(&o, "AgentActive") || state(&o) == "idle", "{o:#}");
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(resumes(&log), 1, "resumed exactly once: {}", fs::read_to_string(&log).unwrap_or_default());
    let o = server.object("sessions", "limited").await.expect("limited");
    assert_ne!(state(&o), "rate-limited", "the old message on screen is not a new limit: {o:#}");
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_makes_new_sessions_wait_and_is_told_once() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "budget");
    add_limit_agent(&repo);
    let told = server.tmp.path().join("told.jsonl");
    let notifier = json!({"type": "command", "command": ["sh", "-c", format!("cat >> '{}'; echo >> '{}'", told.display(), told.display())]});
    let docs = [
        project("budget", &repo, json!({"budget": {"tokens": 1000}, "notifiers": [notifier]})),
        limit_session("spender", "budget", json!({"E2E_USAGE_IN": "900", "E2E_USAGE_OUT": "300"})),
    ];
    server.aoctl(&["apply", "-f", &write_manifest(&server.tmp.path().join("budget.yaml"), &docs)]).ok();

    let o = server.wait_for("sessions", "spender", READY, |o| o.pointer("/status/usage/inputTokens").is_some()).await;
    assert_eq!(o["status"]["usage"], json!({"inputTokens": 900, "outputTokens": 300}), "{o:#}");
    let p = server.wait_for("projects", "budget", READY, |p| is_true(p, "BudgetSpent")).await;
    assert_eq!(p["status"]["usage"], json!({"inputTokens": 900, "outputTokens": 300}), "{p:#}");
    let msg = condition(&p, "BudgetSpent").and_then(|c| c["message"].as_str()).unwrap_or_default();
    assert_eq!(msg, "1200 of 1000 tokens used");

    // The next session waits; the running one goes on.
    let late = limit_session("late", "budget", json!({}));
    server.aoctl(&["apply", "-f", &write_manifest(&server.tmp.path().join("late.yaml"), &[late])]).ok();
    let o = server
        .wait_for("sessions", "late", READY, |o| {
            phase(o) == "Queued" && condition(o, "Ready").is_some_and(|c| c["reason"] == "BudgetSpent")
        })
        .await;
    assert!(o.pointer("/status/runtime").is_none(), "it did not start: {o:#}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let o = server.object("sessions", "late").await.expect("late");
    assert_eq!(phase(&o), "Queued", "still waiting: {o:#}");
    let spender = server.object("sessions", "spender").await.expect("spender");
    assert!(ready(&spender), "the running session is not stopped: {spender:#}");

    let sent = eventually(Duration::from_secs(10), "the budget notification", || {
        let text = fs::read_to_string(&told).unwrap_or_default();
        let lines: Vec<String> = text.lines().filter(|l| l.contains("budget-spent")).map(str::to_string).collect();
        if lines.is_empty() {
            Err(text)
        } else {
            Ok(lines)
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let again = fs::read_to_string(&told).unwrap_or_default().lines().filter(|l| l.contains("budget-spent")).count();
    assert_eq!((sent.len(), again), (1, 1), "told once");

    // Deleting the session that spent it gives nothing back: the project keeps its figures.
    server.aoctl(&["delete", "session", "spender", "--wait=60s"]).ok();
    assert!(server.object("sessions", "spender").await.is_none(), "spender is deleted");
    let p = server.wait_for("projects", "budget", READY, |p| p.pointer("/status/retiredUsage").is_some()).await;
    assert_eq!(p["status"]["usage"], json!({"inputTokens": 900, "outputTokens": 300}), "{p:#}");
    assert!(is_true(&p, "BudgetSpent"), "still spent: {p:#}");
    assert!(p.pointer("/status/sessionUsage").is_none(), "no stored session has usage: {p:#}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let o = server.object("sessions", "late").await.expect("late");
    assert_eq!(phase(&o), "Queued", "still waiting after the delete: {o:#}");
    cleanup.finish();
}
