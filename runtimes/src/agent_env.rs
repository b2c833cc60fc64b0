//! What an agent's environment holds: of the controller's own environment only what a program on
//! this machine needs (an allowlist) and the agent CLI's own credentials, never the controller's
//! secrets, then what the controller and the session set on purpose (docs/security.md).
//!
//! Everything here is a pure function of its arguments: the controller's environment is passed
//! in, so the rules are tested without touching the process's own.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;

use aoctl_api::{GitSource, Project};

/// Variables a program on a Unix-like machine needs, inherited from the controller as they are.
/// `TERM` is not among them: each runtime sets the terminal it gives the agent.
const NAMES: &[&str] = &[
    // Who and where.
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TZ",
    "TMPDIR",
    // Locale (and every `LC_*`, see `PREFIXES`).
    "LANG",
    "LANGUAGE",
    // Per-user folders.
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_HOME",
    "XDG_DATA_DIRS",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    // git over ssh: the agent may use the keys your ssh-agent holds while it runs, not copy them.
    "SSH_AUTH_SOCK",
    // The network as this machine reaches it.
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    // Where toolchains are installed, so the agent builds and tests as you do.
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "GOROOT",
    "JAVA_HOME",
    "NVM_DIR",
    "PYENV_ROOT",
    "PNPM_HOME",
    "VOLTA_HOME",
];

/// Prefixes of inherited variables.
const PREFIXES: &[&str] = &["LC_"];

/// What a console program on Windows needs besides [`NAMES`]; Windows compares names without case.
const WINDOWS_NAMES: &[&str] = &[
    "SystemRoot",
    "SystemDrive",
    "windir",
    "ComSpec",
    "PATHEXT",
    "OS",
    "USERNAME",
    "USERDOMAIN",
    "USERPROFILE",
    "HOMEDRIVE",
    "HOMEPATH",
    "APPDATA",
    "LOCALAPPDATA",
    "TEMP",
    "TMP",
    "ProgramData",
    "ProgramFiles",
    "ProgramFiles(x86)",
    "ProgramW6432",
    "CommonProgramFiles",
    "CommonProgramFiles(x86)",
    "CommonProgramW6432",
    "ALLUSERSPROFILE",
    "PUBLIC",
    "COMPUTERNAME",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_ARCHITECTURE",
    "PROCESSOR_IDENTIFIER",
    "PSModulePath",
];

/// The controller's own variables: never inherited, whatever an adapter names.
const OWN_PREFIX: &str = "AOCTL_";

/// What decides an agent's environment besides the controller's own.
#[derive(Clone, Copy, Debug)]
pub struct Rules<'a> {
    /// The agent runs on this machine and inherits the allowed part of the controller's
    /// environment. `false` for a container, which has its image's environment instead.
    pub inherit: bool,
    /// Its CLI's credential variables (its adapter's `login.env`), inherited too when set.
    pub keys: &'a [&'a str],
    /// Variables holding the controller's own secrets ([`secret_names`]): never inherited, and
    /// neither is any other variable holding the same value.
    pub secrets: &'a BTreeSet<String>,
}

/// [`agent_env`] over the controller's own environment.
pub fn agent_env_of_controller(rules: &Rules<'_>, set: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    agent_env(std::env::vars_os(), rules, set)
}

/// The agent's whole environment (a container adds its image's): of `controller`, the
/// controller's own environment, the variables [`Rules`] allow; then `set`, what the controller
/// and the session set on purpose, which wins. A value of `set` that is exactly `$(NAME)` is the
/// controller's variable `NAME` (left out when the controller has none), `$$(NAME)` the text
/// `$(NAME)`: that is how a session passes on one of the controller's variables, a secret too.
pub fn agent_env<K, V>(
    controller: impl IntoIterator<Item = (K, V)>,
    rules: &Rules<'_>,
    set: &BTreeMap<String, String>,
) -> BTreeMap<String, String>
where
    K: Into<OsString>,
    V: Into<OsString>,
{
    build(controller, rules, set, cfg!(windows))
}

/// The names of the controller's secrets: every token and webhook secret variable that
/// `projects` (their GitHub, GitLab and Linear settings and `review.tokenEnv`) and `sources`
/// name, and `defaults`, the variables the controller reads for settings that name none.
pub fn secret_names<'a>(
    projects: impl IntoIterator<Item = &'a Project>,
    sources: impl IntoIterator<Item = &'a GitSource>,
    defaults: &[&str],
) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = defaults.iter().map(|d| d.to_string()).collect();
    for p in projects {
        let spec = &p.spec;
        let github = spec.github.iter().flat_map(|g| [&g.token_env, &g.webhook_secret_env]);
        let gitlab = spec.gitlab.iter().flat_map(|g| [&g.token_env, &g.webhook_token_env]);
        let linear = spec.linear.iter().flat_map(|l| [&l.token_env, &l.webhook_secret_env]);
        let review = spec.review.iter().map(|r| &r.token_env);
        names.extend(github.chain(gitlab).chain(linear).chain(review).flatten().cloned());
    }
    for s in sources {
        names.extend([&s.spec.token_env, &s.spec.webhook_secret_env].into_iter().flatten().cloned());
    }
    names
}

/// [`agent_env`] with the platform's rules given: on Windows names are compared without case
/// and its own system variables are allowed too.
fn build<K, V>(
    controller: impl IntoIterator<Item = (K, V)>,
    rules: &Rules<'_>,
    set: &BTreeMap<String, String>,
    windows: bool,
) -> BTreeMap<String, String>
where
    K: Into<OsString>,
    V: Into<OsString>,
{
    let same = |a: &str, b: &str| if windows { a.eq_ignore_ascii_case(b) } else { a == b };
    // Variables that are not text can be neither allowed nor referred to.
    let controller: Vec<(String, String)> = controller
        .into_iter()
        .filter_map(|(k, v)| Some((k.into().into_string().ok()?, v.into().into_string().ok()?)))
        .collect();
    let lookup = |name: &str| controller.iter().find(|(k, _)| same(k, name)).map(|(_, v)| v.clone());
    let secret = |name: &str| rules.secrets.iter().any(|s| same(s, name));
    let secret_values: Vec<&str> =
        controller.iter().filter(|(k, v)| secret(k) && !v.is_empty()).map(|(_, v)| v.as_str()).collect();

    let allowed = |name: &str| {
        let listed = |list: &[&str]| list.iter().any(|n| same(n, name));
        let prefixed = PREFIXES.iter().any(|p| name.len() > p.len() && same(&name[..p.len()], p));
        listed(NAMES) || prefixed || (windows && listed(WINDOWS_NAMES)) || listed(rules.keys)
    };
    let own = |name: &str| name.len() >= OWN_PREFIX.len() && same(&name[..OWN_PREFIX.len()], OWN_PREFIX);

    let mut env = BTreeMap::new();
    if rules.inherit {
        for (k, v) in &controller {
            let set_here = set.keys().any(|s| same(s, k));
            if allowed(k) && !own(k) && !secret(k) && !secret_values.contains(&v.as_str()) && !set_here {
                env.insert(k.clone(), v.clone());
            }
        }
    }
    for (k, v) in set {
        let value = match reference(v) {
            Reference::To(name) => lookup(name),
            Reference::Escaped(text) => Some(text.to_string()),
            Reference::None => Some(v.clone()),
        };
        if let Some(value) = value {
            env.insert(k.clone(), value);
        }
    }
    env
}

/// What a value of `spec.env` says.
enum Reference<'a> {
    /// `$(NAME)`: the controller's variable `NAME`.
    To(&'a str),
    /// `$$(NAME)`: the text `$(NAME)`.
    Escaped(&'a str),
    /// Anything else: itself.
    None,
}

/// `NAME` when `v` is exactly `$(NAME)`.
fn referred(v: &str) -> Option<&str> {
    let inner = v.strip_prefix("$(")?.strip_suffix(')')?;
    aoctl_api::validate::env_name(inner).ok().map(|()| inner)
}

fn reference(value: &str) -> Reference<'_> {
    let name = referred;
    if let Some(escaped) = value.strip_prefix('$').filter(|rest| name(rest).is_some()) {
        return Reference::Escaped(escaped);
    }
    match name(value) {
        Some(n) => Reference::To(n),
        None => Reference::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A controller started as docs/github.md says, with an agent key and some noise.
    fn controller() -> Vec<(String, String)> {
        [
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ("HOME", "/home/me"),
            ("USER", "me"),
            ("LANG", "en_US.UTF-8"),
            ("LC_CTYPE", "en_US.UTF-8"),
            ("TERM", "xterm-kitty"),
            ("SSH_AUTH_SOCK", "/run/user/1000/ssh-agent.sock"),
            ("GITHUB_TOKEN", "ghp_forge_token_1234"),
            ("AOCTL_WEBHOOK_SECRET", "hook-secret-5678"),
            ("AOCTL_DATA_DIR", "/home/me/.local/share/aoctl"),
            ("AOCTL_TOKEN", "bearer-token-9abc"),
            ("CORP_TOKEN", "corp-secret-def0"),
            ("ANTHROPIC_API_KEY", "sk-ant-key"),
            ("OPENAI_API_KEY", "sk-openai-key"),
            ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
            ("LS_COLORS", "di=01;34"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn secrets(extra: &[&str]) -> BTreeSet<String> {
        let defaults = ["GITHUB_TOKEN", "AOCTL_WEBHOOK_SECRET", "GITLAB_TOKEN", "LINEAR_API_KEY"];
        defaults.iter().chain(extra).map(|s| s.to_string()).collect()
    }

    fn env_of(
        keys: &[&str],
        secrets: &BTreeSet<String>,
        set: &[(&str, &str)],
        windows: bool,
    ) -> BTreeMap<String, String> {
        let rules = Rules { inherit: true, keys, secrets };
        let set = set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        build(controller(), &rules, &set, windows)
    }

    #[test]
    fn the_allowlist_is_kept_and_the_rest_of_the_controller_is_not() {
        let env = env_of(&[], &secrets(&[]), &[], false);
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(names, ["HOME", "LANG", "LC_CTYPE", "PATH", "SSH_AUTH_SOCK", "USER"]);
        assert_eq!(env["PATH"], "/usr/local/bin:/usr/bin:/bin");
    }

    #[test]
    fn the_controllers_secrets_and_own_variables_never_reach_an_agent() {
        // Copilot's row names GITHUB_TOKEN as one of its keys; the forge's token still stays out.
        let env = env_of(&["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"], &secrets(&[]), &[], false);
        assert!(!env.contains_key("GITHUB_TOKEN"), "{env:?}");
        for name in ["AOCTL_WEBHOOK_SECRET", "AOCTL_DATA_DIR", "AOCTL_TOKEN", "TERM", "AWS_SECRET_ACCESS_KEY"] {
            assert!(!env.contains_key(name), "{name} leaked: {env:?}");
        }
        // A variable an adapter or the allowlist names but a project's tokenEnv also names.
        let env = env_of(&["ANTHROPIC_API_KEY"], &secrets(&["ANTHROPIC_API_KEY", "SSH_AUTH_SOCK"]), &[], false);
        assert!(!env.contains_key("ANTHROPIC_API_KEY") && !env.contains_key("SSH_AUTH_SOCK"), "{env:?}");
        // `AOCTL_*` stays out even when an adapter would name it.
        let env = env_of(&["AOCTL_TOKEN"], &secrets(&[]), &[], false);
        assert!(!env.contains_key("AOCTL_TOKEN"), "{env:?}");
    }

    #[test]
    fn a_copy_of_a_secret_under_another_name_stays_out_too() {
        let mut controller = controller();
        controller.push(("GH_TOKEN".into(), "ghp_forge_token_1234".into()));
        let secrets = secrets(&[]);
        let rules = Rules { inherit: true, keys: &["GH_TOKEN"], secrets: &secrets };
        let env = build(controller.clone(), &rules, &BTreeMap::new(), false);
        assert!(!env.contains_key("GH_TOKEN"), "{env:?}");
        // A different value under that name is the agent's own key.
        controller.last_mut().unwrap().1 = "ghp_copilot_own".into();
        let env = build(controller, &rules, &BTreeMap::new(), false);
        assert_eq!(env.get("GH_TOKEN").map(String::as_str), Some("ghp_copilot_own"));
    }

    #[test]
    fn the_agents_own_keys_are_inherited_and_no_other_agents() {
        let env = env_of(&["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"], &secrets(&[]), &[], false);
        assert_eq!(env.get("ANTHROPIC_API_KEY").map(String::as_str), Some("sk-ant-key"));
        assert!(!env.contains_key("OPENAI_API_KEY") && !env.contains_key("CLAUDE_CODE_OAUTH_TOKEN"), "{env:?}");
    }

    #[test]
    fn what_is_set_on_purpose_wins_even_a_secret() {
        let set = [
            ("GITHUB_TOKEN", "given-in-spec"),
            ("PATH", "/opt/agent/bin"),
            ("AOCTL_SESSION", "s1"),
            ("AWS_SECRET_ACCESS_KEY", "$(AWS_SECRET_ACCESS_KEY)"),
            ("CORP", "$(CORP_TOKEN)"),
            ("HOOK", "$(AOCTL_WEBHOOK_SECRET)"),
            ("MISSING", "$(NOT_SET_ANYWHERE)"),
            ("LITERAL", "$$(GITHUB_TOKEN)"),
            ("TEXT", "$(not a name)"),
        ];
        let env = env_of(&[], &secrets(&["CORP_TOKEN"]), &set, false);
        assert_eq!(env["GITHUB_TOKEN"], "given-in-spec");
        assert_eq!(env["PATH"], "/opt/agent/bin");
        assert_eq!(env["AOCTL_SESSION"], "s1");
        assert_eq!(env["AWS_SECRET_ACCESS_KEY"], "aws-secret");
        assert_eq!(env["CORP"], "corp-secret-def0");
        assert_eq!(env["HOOK"], "hook-secret-5678");
        assert!(!env.contains_key("MISSING"), "{env:?}");
        assert_eq!(env["LITERAL"], "$(GITHUB_TOKEN)");
        assert_eq!(env["TEXT"], "$(not a name)");
        // A reference is to the controller's environment, not to another variable set here.
        let env = env_of(&[], &secrets(&[]), &[("A", "x"), ("B", "$(A)")], false);
        assert!(!env.contains_key("B"), "{env:?}");
    }

    #[test]
    fn a_container_inherits_nothing_but_may_refer_to_the_controller() {
        let secrets = secrets(&[]);
        let rules = Rules { inherit: false, keys: &["ANTHROPIC_API_KEY"], secrets: &secrets };
        let set = BTreeMap::from([
            ("KEY".to_string(), "$(ANTHROPIC_API_KEY)".to_string()),
            ("PORT".to_string(), "3001".to_string()),
        ]);
        let env = build(controller(), &rules, &set, false);
        let expected = BTreeMap::from([("KEY".to_string(), "sk-ant-key".to_string()), ("PORT".into(), "3001".into())]);
        assert_eq!(env, expected);
    }

    /// Windows' own variables are allowed there (names compared without case) and nowhere else.
    #[test]
    fn windows_system_variables_are_kept_on_windows_only() {
        let mut controller: Vec<(String, String)> = [
            ("Path", r"C:\Windows\system32;C:\Windows"),
            ("SystemRoot", r"C:\Windows"),
            ("COMSPEC", r"C:\Windows\system32\cmd.exe"),
            ("PATHEXT", ".COM;.EXE;.BAT;.CMD"),
            ("USERPROFILE", r"C:\Users\me"),
            ("APPDATA", r"C:\Users\me\AppData\Roaming"),
            ("LOCALAPPDATA", r"C:\Users\me\AppData\Local"),
            ("TEMP", r"C:\Users\me\AppData\Local\Temp"),
            ("ProgramFiles(x86)", r"C:\Program Files (x86)"),
            ("Github_Token", "ghp_forge_token_1234"),
            ("aoctl_data_dir", r"C:\aoctl"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        controller.push(("OneDrive".into(), r"C:\Users\me\OneDrive".into()));
        let secrets = secrets(&[]);
        let rules = Rules { inherit: true, keys: &[], secrets: &secrets };
        let set = BTreeMap::from([("PATH".to_string(), r"C:\agent\bin".to_string())]);
        let env = build(controller.clone(), &rules, &set, true);
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        let expected = [
            "APPDATA",
            "COMSPEC",
            "LOCALAPPDATA",
            "PATH",
            "PATHEXT",
            "ProgramFiles(x86)",
            "SystemRoot",
            "TEMP",
            "USERPROFILE",
        ];
        // `Path` gave way to the `PATH` set on purpose: one variable on Windows, not two.
        assert_eq!(names, expected);
        assert_eq!(env["PATH"], r"C:\agent\bin");
        // Elsewhere the same names are nobody's business but Windows'.
        let env = build(controller, &rules, &BTreeMap::new(), false);
        assert!(env.is_empty(), "{env:?}");
    }

    #[cfg(windows)]
    #[test]
    fn on_this_machine_the_windows_rules_apply() {
        let secrets = BTreeSet::new();
        let rules = Rules { inherit: true, keys: &[], secrets: &secrets };
        let env = agent_env([("systemroot", r"C:\Windows")], &rules, &BTreeMap::new());
        assert_eq!(env.get("systemroot").map(String::as_str), Some(r"C:\Windows"));
    }

    #[test]
    fn secret_names_are_every_variable_the_projects_and_sources_name() {
        let project: Project = serde_json::from_value(serde_json::json!({
            "apiVersion": aoctl_api::API_VERSION,
            "kind": "Project",
            "metadata": {"name": "p"},
            "spec": {
                "path": "/src/p",
                "github": {"tokenEnv": "GH_BOT_TOKEN", "webhookSecretEnv": "GH_HOOK"},
                "gitlab": {"projectPath": "g/p", "tokenEnv": "GL_TOKEN"},
                "linear": {"webhookSecretEnv": "LIN_HOOK"},
                "review": {"reviewers": [], "tokenEnv": "REVIEW_BOT_TOKEN"}
            }
        }))
        .unwrap();
        let source: GitSource = serde_json::from_value(serde_json::json!({
            "apiVersion": aoctl_api::API_VERSION,
            "kind": "GitSource",
            "metadata": {"name": "s"},
            "spec": {"url": "https://example.com/m.git", "tokenEnv": "MANIFESTS_TOKEN", "webhookSecretEnv": "SRC_HOOK"}
        }))
        .unwrap();
        let names = secret_names([&project], [&source], &["GITHUB_TOKEN"]);
        let expected = [
            "GH_BOT_TOKEN",
            "GH_HOOK",
            "GITHUB_TOKEN",
            "GL_TOKEN",
            "LIN_HOOK",
            "MANIFESTS_TOKEN",
            "REVIEW_BOT_TOKEN",
            "SRC_HOOK",
        ];
        assert_eq!(names.iter().map(String::as_str).collect::<Vec<_>>(), expected);
    }
}
