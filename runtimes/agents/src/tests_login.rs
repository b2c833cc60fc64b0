//! Tests of the rows' install facts and logged-out screens, on screens captured from the real CLIs.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use aoctl_api::session::ActivityState;

use super::*;

/// The pinned agent CLIs the real-CLI tests install.
const PACKAGES_TSV: &str = include_str!("../../../e2e/agents-cli/packages.tsv");

/// The rows whose ready cue also matches their logged-out screen: they sit at their prompt while
/// they say how to log in.
const READY_WHEN_LOGGED_OUT: &[&str] = &["claude-code", "copilot", "kimi"];

/// The screens captured in `screens/`: file name and text, in name order.
fn fixtures() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/screens");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.expect("directory entry").path();
            let name = path.file_name().expect("file name").to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect();
    files.sort();
    assert!(files.len() > 20, "the captured screens are there: {files:?}");
    files
}

/// The row a fixture was captured from: its name is `<binary>-<version>-<what>.txt`, with the
/// version the row's `install` names.
fn row_of(file: &str) -> &'static Adapter {
    let row = all()
        .iter()
        .filter(|a| {
            let version = a.install.map(|i| i.version).unwrap_or("-");
            file.strip_prefix(a.binary)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|rest| rest.starts_with(&format!("{version}-")))
        })
        .max_by_key(|a| a.binary.len());
    row.unwrap_or_else(|| panic!("{file}: no row with that binary and installed version"))
}

fn is_login(file: &str) -> bool {
    file.contains("-login")
}

fn screen(text: &str) -> Screen<'_> {
    Screen { text, transcript_grew: false, unchanged_for: Duration::from_secs(5), exited: None }
}

#[test]
fn packages_tsv_and_the_table_agree() {
    let mut pinned = BTreeMap::new();
    for line in PACKAGES_TSV.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        let cols: Vec<&str> = line.split('\t').collect();
        assert!(cols.len() >= 5, "packages.tsv: too few columns: {line:?}");
        let (agent, registry, package, version, binary) = (cols[0], cols[1], cols[2], cols[3], cols[4]);
        if agent == "node" {
            continue;
        }
        let row = builtin(agent).unwrap_or_else(|| panic!("packages.tsv names `{agent}`, which has no row"));
        assert_eq!(row.binary, binary, "{agent}: binary");
        assert_eq!(row.install, Some(Install { registry, package, version }), "{agent}: install");
        pinned.insert(agent, ());
    }
    for row in all().iter().filter(|a| a.install.is_some()) {
        assert!(pinned.contains_key(row.name), "{}: install is set, but packages.tsv pins no version", row.name);
    }
    assert_eq!(pinned.len(), 17, "every pinned agent CLI has its row");
}

#[test]
fn install_commands() {
    let claude = builtin("claude-code").and_then(|a| a.install).unwrap();
    assert_eq!(claude.command(), "npm install -g @anthropic-ai/claude-code@2.1.332");
    let kimi = builtin("kimi").and_then(|a| a.install).unwrap();
    assert_eq!(kimi.command(), "pipx install kimi-cli==1.51.0");
}

#[test]
fn every_login_pattern_compiles_and_every_login_says_how() {
    for a in all() {
        for p in a.login.screens {
            assert!(regex::Regex::new(p).is_ok(), "{}: {p}", a.name);
        }
        let l = &a.login;
        let said = !l.screens.is_empty() || !l.env.is_empty() || !l.files.is_empty();
        assert_eq!(said, !l.how.is_empty(), "{}: a row with a login says how", a.name);
        for f in l.files {
            assert!(!f.starts_with('/') && !f.starts_with('~'), "{}: {f} is relative to $HOME", a.name);
        }
    }
}

#[test]
fn every_login_screen_is_logged_out_and_needs_input() {
    let mut seen = vec![];
    for (file, text) in fixtures().iter().filter(|(f, _)| is_login(f)) {
        let row = row_of(file);
        let line = logged_out(row, text).unwrap_or_else(|| panic!("{file}: not seen as logged out"));
        assert!(!line.is_empty(), "{file}");
        let (state, evidence) = classify(Some(row), &screen(text), Duration::from_secs(600));
        assert_eq!(state, ActivityState::NeedsInput, "{file}: {evidence}");
        assert_eq!(evidence, line, "{file}: the evidence is the logged-out line");
        seen.push(row.name);
    }
    for a in all().iter().filter(|a| !a.login.screens.is_empty()) {
        assert!(seen.contains(&a.name), "{}: has login screens but no captured screen shows one", a.name);
    }
    for name in seen {
        assert!(!builtin(name).unwrap().login.screens.is_empty(), "{name}: a login screen is captured");
    }
}

#[test]
fn no_other_screen_is_logged_out() {
    for (file, text) in fixtures().iter().filter(|(f, _)| !is_login(f)) {
        let row = row_of(file);
        assert_eq!(logged_out(row, text), None, "{file}");
    }
}

/// Each captured login screen and the words of the line it is recognised by.
const LOGIN_LINES: &[(&str, &str)] = &[
    ("aider-0.86.2-login-ask.txt", "Login to OpenRouter or create a free account?"),
    ("aider-0.86.2-login.txt", "Please open this URL in your browser to connect Aider with OpenRouter"),
    ("amp-0.0.1790142911-g7618fb-login.txt", "Would you like to log in to Amp?"),
    ("auggie-0.36.0-login.txt", "→ Login to continue"),
    ("claude-2.1.332-login-no-prompt.txt", "Not logged in · run /login"),
    ("claude-2.1.332-login.txt", "Not logged in · run /login"),
    ("cline-3.0.65-login.txt", "Connect a model provider to get started."),
    ("cn-1.5.47-login.txt", "Enter your Anthropic API key:"),
    ("codex-0.171.0-login.txt", "1. Sign in with ChatGPT"),
    ("copilot-1.0.102-login.txt", "Please use /login to sign in to use Copilot"),
    ("droid-0.215.0-login.txt", "Please login with your Factory account to continue."),
    ("gemini-0.61.0-login.txt", "No authentication method selected."),
    ("grok-0.0.34-login.txt", "Error: API key required. Set GROK_API_KEY"),
    ("kimi-1.51.0-login.txt", "Model: not set, send /login to login"),
    ("pi-0.73.1-login.txt", "Error: No API key found for the selected model."),
    ("qwen-0.24.4-login.txt", "Connect a Provider"),
    ("vibe-3.0.2-login.txt", "Welcome to Mistral Vibe - Let's get you started!"),
];

#[test]
fn each_login_screen_is_recognised_by_its_own_line() {
    let files = fixtures();
    let login: Vec<&str> = files.iter().map(|(f, _)| f.as_str()).filter(|f| is_login(f)).collect();
    let listed: Vec<&str> = LOGIN_LINES.iter().map(|(f, _)| *f).collect();
    assert_eq!(login, listed, "every captured login screen is listed");
    for (file, words) in LOGIN_LINES {
        let text = &files.iter().find(|(f, _)| f == file).expect("listed file").1;
        let line = logged_out(row_of(file), text).unwrap_or_default();
        assert!(line.contains(words), "{file}: {line:?}");
    }
}

#[test]
fn which_ready_cues_match_a_login_screen() {
    let mut ready = vec![];
    for (file, text) in fixtures().iter().filter(|(f, _)| is_login(f)) {
        let row = row_of(file);
        if is_ready(row, text) && !ready.contains(&row.name) {
            ready.push(row.name);
        }
    }
    ready.sort();
    assert_eq!(ready, READY_WHEN_LOGGED_OUT);
}

#[test]
fn opencode_and_kilocode_start_at_their_prompt_without_credentials() {
    for (file, text) in fixtures().iter().filter(|(f, _)| f.starts_with("opencode-") || f.starts_with("kilocode-")) {
        let row = row_of(file);
        assert!(row.login.screens.is_empty(), "{file}");
        assert!(is_ready(row, text), "{file}");
    }
}
