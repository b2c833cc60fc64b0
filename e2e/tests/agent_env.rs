//! What an agent is given of the controller's environment, read from the agent process itself
//! (`/proc/<pid>/environ`) in tmux and process sessions: the allowlist (PATH, HOME, …) and what
//! `spec.env` names, never the controller's secrets — the default forge token, a token variable
//! a Project names, the webhook secret, a copy of a secret under another name, `AOCTL_*` — nor
//! anything else of its environment.

use std::collections::BTreeMap;
use std::ffi::OsStr;

use serde_json::json;

use crate::harness::Server;
use crate::lifecycle::{agent_repo, processes_with, project, ready, session, token, wait_all, Cleanup, READY};

/// The environment of process `pid`.
fn environ(pid: u32) -> BTreeMap<String, String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).expect("the agent's environment");
    raw.split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok()?.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_get_the_allowlist_and_what_their_spec_names_never_the_controllers_secrets() {
    const FORGE: &str = "ghp_e2e_controller_forge_token_0123456789";
    const TEAM: &str = "glpat-e2e-team-token-9876543210";
    const HOOK: &str = "e2e-webhook-secret-abcdef";
    let env: [(&str, &OsStr); 6] = [
        ("GITHUB_TOKEN", FORGE.as_ref()),
        ("TEAM_FORGE_TOKEN", TEAM.as_ref()),
        ("AOCTL_WEBHOOK_SECRET", HOOK.as_ref()),
        ("COPY_OF_THE_TOKEN", FORGE.as_ref()),
        ("E2E_UNRELATED", "not for agents".as_ref()),
        ("LC_MESSAGES", "C".as_ref()),
    ];
    let server = Server::start_with_env(&env).await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "envs");
    server.create("projects", &project("envs", &repo, json!({}))).await;
    // Another project names a token variable of its own: a secret of the controller too. Its
    // forge is never reached (no session of it runs).
    let gh = json!({"github": {"apiUrl": "http://127.0.0.1:9", "tokenEnv": "TEAM_FORGE_TOKEN"}});
    server.create("projects", &project("team", &repo, gh)).await;

    let named = json!({"PLAIN": "set on purpose", "PASSED": "$(TEAM_FORGE_TOKEN)", "LITERAL": "$$(HOME)"});
    let words: Vec<(&str, String)> = ["in-tmux", "in-process"].into_iter().map(|n| (n, token(n))).collect();
    for (name, word) in &words {
        let runtime = if *name == "in-tmux" { "tmux" } else { "process" };
        let extra = json!({"runtime": runtime, "env": named});
        server.create("sessions", &session(name, "envs", word, extra)).await;
    }
    let names: Vec<&str> = words.iter().map(|(n, _)| *n).collect();
    wait_all(&server, &names, READY, "Ready", ready).await;

    for (name, word) in &words {
        let pids = processes_with(word);
        assert_eq!(pids.len(), 1, "{name}: one agent process: {pids:?}");
        let env = environ(pids[0]);
        let has = |k: &str| env.get(k).map(String::as_str);
        for secret in ["GITHUB_TOKEN", "TEAM_FORGE_TOKEN", "AOCTL_WEBHOOK_SECRET", "COPY_OF_THE_TOKEN"] {
            assert_eq!(has(secret), None, "{name}: {secret} reached the agent: {env:#?}");
        }
        for (k, v) in &env {
            assert!(v != FORGE && v != HOOK, "{name}: {k} holds a secret's value");
        }
        assert_eq!(has("E2E_UNRELATED"), None, "{name}: not on the allowlist");
        assert_eq!(has("AOCTL_DATA_DIR"), None, "{name}: the controller's own settings stay its own");
        assert_eq!(has("PATH"), std::env::var("PATH").ok().as_deref(), "{name}: PATH is inherited");
        assert!(has("HOME").is_some_and(|h| !h.is_empty()), "{name}: HOME is inherited");
        assert_eq!(has("LC_MESSAGES"), Some("C"), "{name}: the locale is inherited");
        assert_eq!(has("PLAIN"), Some("set on purpose"), "{name}");
        assert_eq!(has("PASSED"), Some(TEAM), "{name}: a secret spec.env names on purpose reaches it");
        assert_eq!(has("LITERAL"), Some("$(HOME)"), "{name}: $$( is the text $(");
        assert_eq!(has("AOCTL_SESSION"), Some(*name), "{name}: its own identity");
        assert!(has("AOCTL_SESSION_TOKEN").is_some(), "{name}: its own token");
    }
    cleanup.finish();
}
