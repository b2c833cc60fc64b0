//! Unit tests of `aoctl doctor`: versions, output, verdicts on agents, tokens, engines and webhooks.

use super::forge::*;
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

fn row(install: Option<aoctl_agents::Install>, login: aoctl_agents::Login) -> Adapter {
    let mut a = *aoctl_agents::builtin("codex").unwrap();
    a.install = install;
    a.login = login;
    a
}

/// A login with these credentials; other fields (which rows may grow) as codex's.
fn login(how: &'static str, env: &'static [&'static str], files: &'static [&'static str]) -> aoctl_agents::Login {
    aoctl_agents::Login { screens: &[], how, env, files, ..aoctl_agents::builtin("codex").unwrap().login }
}

const PINNED: aoctl_agents::Install =
    aoctl_agents::Install { registry: "npm", package: "@openai/codex", version: "0.171.0" };

#[test]
fn agent_versions_against_the_pin() {
    let a = row(Some(PINNED), login("", &[], &[]));
    let p = Path::new("/bin/codex");
    let same = version_check(&a, p, Some("0.171.0".into()));
    assert_eq!((same.status, same.detail.as_str()), (Status::Ok, "codex 0.171.0 (/bin/codex)"));
    let newer = version_check(&a, p, Some("0.180.1".into()));
    assert_eq!(newer.status, Status::Warn);
    assert_eq!(newer.detail, "codex 0.180.1 (/bin/codex): checked against 0.171.0; 0.180.1 may differ in its screens");
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
        ForgeKey { kind: ForgeKind::GitHub, api: "https://api.github.com".into(), token_env: "GITHUB_TOKEN".into() }
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
    let key =
        ForgeKey { kind: ForgeKind::GitHub, api: "https://api.github.com".into(), token_env: "GITHUB_TOKEN".into() };
    let limits = serde_json::json!({"resources": {"core": {"limit": 5000, "remaining": 4990},
        "graphql": {"limit": 5000, "remaining": 300}, "search": {"limit": 30, "remaining": 30}}});
    let windows = github_windows(&limits);
    assert_eq!(windows, [("core".to_string(), 4990, 5000), ("graphql".to_string(), 300, 5000)]);
    let classic = TokenFacts { login: "octocat".into(), scopes: Some(vec!["repo".into(), "workflow".into()]), windows };
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
