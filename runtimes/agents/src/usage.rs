//! Tokens and cost where the agent records them on disk: Claude Code's conversation files and
//! Codex's rollout files. The parsers are pure; [`read`] finds a session's files.
//!
//! - Claude Code writes each conversation as JSONL under
//!   `<config dir>/projects/<cwd with every character but letters and digits turned into '-'>/`
//!   (`~/.claude` unless `CLAUDE_CONFIG_DIR` says otherwise), subagents' in a folder beside it.
//!   Each assistant line carries `message.usage {input_tokens, output_tokens,
//!   cache_creation_input_tokens, cache_read_input_tokens}`; one API response can be written as
//!   several lines with the same `message.id` and `requestId`, so they are counted once. Older
//!   versions also wrote `costUSD` per line. (Formats as documented by the readers ccusage,
//!   ccost and claude-ui, github.com/ryoppippi/ccusage and yongkangc/claude-ui.)
//! - Codex writes `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl` (`~/.codex` by
//!   default): a first `session_meta` line with `payload.cwd`, then `event_msg` lines whose
//!   `payload.type` is `token_count` with cumulative `payload.info.total_token_usage
//!   {input_tokens, cached_input_tokens, output_tokens, reasoning_output_tokens}` (ccusage's
//!   apps/codex notes). `output_tokens` already holds the reasoning tokens, as in OpenAI's API.
//!
//! Neither records a cost any more, so `costUSD` is known only where a line carries one.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use aoctl_api::session::Usage;
use serde_json::Value;

use super::AgentError;

/// Folders below a Claude project folder that are searched (its subagents' conversations).
const CLAUDE_DEPTH: usize = 3;
/// Folders below `sessions/` (year, month, day).
const CODEX_DEPTH: usize = 4;

/// The folder name Claude Code gives a working directory.
pub(crate) fn claude_folder_name(cwd: &str) -> String {
    cwd.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

/// Adds the usage of one Claude Code conversation file's `text` to `total`; `seen` holds the
/// responses already counted (across files: a resumed conversation repeats earlier lines).
pub(crate) fn add_claude(text: &str, seen: &mut HashSet<String>, total: &mut Usage) {
    for line in text.lines().filter(|l| l.contains("\"usage\"")) {
        let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
        if v.get("type").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        let Some(u) = v.pointer("/message/usage") else { continue };
        let id = v.pointer("/message/id").and_then(Value::as_str);
        let request = v.get("requestId").and_then(Value::as_str);
        if let (Some(id), Some(request)) = (id, request) {
            if !seen.insert(format!("{id}:{request}")) {
                continue;
            }
        } else if let Some(uuid) = v.get("uuid").and_then(Value::as_str) {
            if !seen.insert(uuid.to_string()) {
                continue;
            }
        }
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        let cache_read = n("cache_read_input_tokens");
        total.add(&Usage {
            input_tokens: n("input_tokens") + n("cache_creation_input_tokens") + cache_read,
            cached_input_tokens: cache_read,
            output_tokens: n("output_tokens"),
            cost_usd: v.get("costUSD").and_then(Value::as_f64),
        });
    }
}

/// The working directory and the final cumulative usage of one Codex rollout file.
pub(crate) fn parse_codex(text: &str) -> (Option<String>, Option<Usage>) {
    let mut cwd = None;
    let mut last = None;
    for line in text.lines() {
        if cwd.is_none() && line.contains("\"session_meta\"") {
            if let Ok(v) = serde_json::from_str::<Value>(line) {
                cwd = v.pointer("/payload/cwd").and_then(Value::as_str).map(str::to_string);
            }
        }
        if !line.contains("\"token_count\"") {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
        let Some(u) = v.pointer("/payload/info/total_token_usage") else { continue };
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        last = Some(Usage {
            input_tokens: n("input_tokens"),
            cached_input_tokens: n("cached_input_tokens"),
            output_tokens: n("output_tokens"),
            cost_usd: None,
        });
    }
    (cwd, last)
}

/// Where to look for an agent's records.
#[derive(Clone, Debug)]
pub struct Sources {
    /// Claude Code's configuration folder (`~/.claude`).
    pub claude_dir: PathBuf,
    /// Codex's home (`~/.codex`), read only for the codex adapter.
    pub codex_home: Option<PathBuf>,
}

impl Sources {
    /// Where an agent of a session looks for its records: `HOME`, `CLAUDE_CONFIG_DIR` and, for
    /// codex, `CODEX_HOME`, each from the session's own environment (`own`), else the
    /// controller's. `None` when there is no home to look in.
    pub fn of_session(own: &std::collections::BTreeMap<String, String>, codex: bool) -> Option<Sources> {
        let env = |k: &str| own.get(k).map(std::ffi::OsString::from).or_else(|| std::env::var_os(k));
        let home = env("HOME").map(PathBuf::from)?;
        let claude_dir = env("CLAUDE_CONFIG_DIR").map_or_else(|| home.join(".claude"), PathBuf::from);
        let codex_home = codex.then(|| env("CODEX_HOME").map_or_else(|| home.join(".codex"), PathBuf::from));
        Some(Sources { claude_dir, codex_home })
    }
}

/// The usage recorded by the agent working in `workdir`: Claude Code's files for that folder
/// (any agent: the folder is the session's own) and, for Codex, the rollouts started in it since
/// `since`. `None` when no record was found.
pub fn read(sources: &Sources, workdir: &Path, since: Option<SystemTime>) -> Result<Option<Usage>, AgentError> {
    let mut found = false;
    let mut total = Usage::default();
    let mut names = vec![claude_folder_name(&workdir.to_string_lossy())];
    if let Ok(real) = workdir.canonicalize() {
        names.push(claude_folder_name(&real.to_string_lossy()));
    }
    names.dedup();
    let mut seen = HashSet::new();
    for name in names {
        let dir = sources.claude_dir.join("projects").join(name);
        for file in jsonl_files(&dir, CLAUDE_DEPTH, None)? {
            let text = read_text(&file)?;
            found = true;
            add_claude(&text, &mut seen, &mut total);
        }
    }
    if let Some(home) = &sources.codex_home {
        let want = [workdir.to_path_buf(), workdir.canonicalize().unwrap_or_else(|_| workdir.to_path_buf())];
        for file in jsonl_files(&home.join("sessions"), CODEX_DEPTH, since)? {
            if !file.file_name().is_some_and(|n| n.to_string_lossy().starts_with("rollout-")) {
                continue;
            }
            let (cwd, usage) = parse_codex(&read_text(&file)?);
            if cwd.is_some_and(|c| want.iter().any(|w| Path::new(&c) == w)) {
                if let Some(u) = usage {
                    found = true;
                    total.add(&u);
                }
            }
        }
    }
    Ok(found.then_some(total))
}

fn read_text(path: &Path) -> Result<String, AgentError> {
    match std::fs::read(path) {
        Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Err(e) => Err(AgentError::Io { path: path.to_path_buf(), source: e }),
    }
}

/// The `.jsonl` files under `dir` down to `depth` folders, modified since `since`; none when
/// `dir` does not exist.
fn jsonl_files(dir: &Path, depth: usize, since: Option<SystemTime>) -> Result<Vec<PathBuf>, AgentError> {
    let mut out = vec![];
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(AgentError::Io { path: dir.to_path_buf(), source: e }),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            if depth > 0 {
                out.extend(jsonl_files(&path, depth - 1, since)?);
            }
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            let recent = since.is_none_or(|s| meta.modified().map_or(true, |m| m >= s));
            if recent {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as Claude Code writes them: a user line, an assistant response written twice (one
    /// line per content block, same message id and request id), another response with a cost.
    const CLAUDE: &str = concat!(
        r#"{"parentUuid":null,"cwd":"/w/demo","sessionId":"s1","type":"user","message":{"role":"user","content":"Fix it"},"uuid":"u1","timestamp":"2025-05-26T07:27:40.079Z"}"#,
        "\n",
        r#"{"parentUuid":"u1","cwd":"/w/demo","sessionId":"s1","type":"assistant","requestId":"req_1","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"thinking","thinking":"..."}],"usage":{"input_tokens":10,"cache_creation_input_tokens":1000,"cache_read_input_tokens":5000,"output_tokens":200,"service_tier":"standard"}},"uuid":"a1","timestamp":"2025-05-26T07:27:45.000Z"}"#,
        "\n",
        r#"{"parentUuid":"a1","cwd":"/w/demo","sessionId":"s1","type":"assistant","requestId":"req_1","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"text","text":"Done"}],"usage":{"input_tokens":10,"cache_creation_input_tokens":1000,"cache_read_input_tokens":5000,"output_tokens":200}},"uuid":"a2","timestamp":"2025-05-26T07:27:45.100Z"}"#,
        "\n",
        r#"{"parentUuid":"a2","type":"assistant","requestId":"req_2","costUSD":0.0123,"message":{"id":"msg_2","role":"assistant","usage":{"input_tokens":5,"output_tokens":50}},"uuid":"a3"}"#,
        "\n",
        "not json\n",
    );

    #[test]
    fn claude_usage_counts_each_response_once() {
        let mut total = Usage::default();
        let mut seen = HashSet::new();
        add_claude(CLAUDE, &mut seen, &mut total);
        assert_eq!(
            total,
            Usage { input_tokens: 6015, cached_input_tokens: 5000, output_tokens: 250, cost_usd: Some(0.0123) }
        );
        add_claude(CLAUDE, &mut seen, &mut total);
        assert_eq!(total.input_tokens, 6015, "a conversation resumed into a second file repeats its lines");
    }

    #[test]
    fn claude_folders_replace_everything_but_letters_and_digits() {
        assert_eq!(claude_folder_name("/Users/me/src/github.com/me/app_1"), "-Users-me-src-github-com-me-app-1");
    }

    const CODEX: &str = concat!(
        r#"{"timestamp":"2025-09-20T10:00:00.000Z","type":"session_meta","payload":{"id":"0199","timestamp":"2025-09-20T10:00:00.000Z","cwd":"/w/demo","originator":"codex_cli_rs","cli_version":"0.39.0"}}"#,
        "\n",
        r#"{"timestamp":"2025-09-20T10:00:01.000Z","type":"turn_context","payload":{"cwd":"/w/demo","model":"gpt-5-codex"}}"#,
        "\n",
        r#"{"timestamp":"2025-09-20T10:00:05.000Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{"primary":{"used_percent":7.0,"window_minutes":300,"resets_at":1763483205}}}}"#,
        "\n",
        r#"{"timestamp":"2025-09-20T10:00:09.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1200,"cached_input_tokens":800,"output_tokens":300,"reasoning_output_tokens":100,"total_tokens":1500},"last_token_usage":{"input_tokens":1200,"cached_input_tokens":800,"output_tokens":300,"reasoning_output_tokens":100,"total_tokens":1500}}}}"#,
        "\n",
        r#"{"timestamp":"2025-09-20T10:01:09.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":3000,"cached_input_tokens":2000,"output_tokens":700,"reasoning_output_tokens":200,"total_tokens":3700}}}}"#,
        "\n",
    );

    #[test]
    fn codex_usage_is_the_last_cumulative_count() {
        let (cwd, usage) = parse_codex(CODEX);
        assert_eq!(cwd.as_deref(), Some("/w/demo"));
        assert_eq!(
            usage,
            Some(Usage { input_tokens: 3000, cached_input_tokens: 2000, output_tokens: 700, cost_usd: None })
        );
        assert_eq!(parse_codex("").1, None);
    }

    #[test]
    fn read_finds_a_sessions_files() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("ws").join("demo.x");
        std::fs::create_dir_all(&work).unwrap();
        let work = work.canonicalize().unwrap();
        let claude = tmp.path().join(".claude");
        let codex = tmp.path().join(".codex");
        let sources = Sources { claude_dir: claude.clone(), codex_home: Some(codex.clone()) };
        assert_eq!(read(&sources, &work, None).unwrap(), None, "nothing recorded");

        let dir = claude.join("projects").join(claude_folder_name(&work.to_string_lossy()));
        std::fs::create_dir_all(dir.join("s1").join("subagents")).unwrap();
        std::fs::write(dir.join("s1.jsonl"), CLAUDE).unwrap();
        let sub = r#"{"type":"assistant","requestId":"req_9","message":{"id":"msg_9","usage":{"input_tokens":1,"output_tokens":2}}}"#;
        std::fs::write(dir.join("s1").join("subagents").join("agent-1.jsonl"), sub).unwrap();
        let other = claude.join("projects").join("-elsewhere");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("x.jsonl"), CLAUDE).unwrap();
        let u = read(&sources, &work, None).unwrap().unwrap();
        assert_eq!((u.input_tokens, u.output_tokens), (6016, 252), "its folder and its subagents, no other");

        let day = codex.join("sessions").join("2025").join("09").join("20");
        std::fs::create_dir_all(&day).unwrap();
        let mine = CODEX.replace("/w/demo", &work.to_string_lossy());
        std::fs::write(day.join("rollout-2025-09-20T10-00-00-0199.jsonl"), &mine).unwrap();
        std::fs::write(day.join("rollout-2025-09-20T11-00-00-0200.jsonl"), CODEX).unwrap();
        let u = read(&sources, &work, None).unwrap().unwrap();
        assert_eq!((u.input_tokens, u.output_tokens), (6016 + 3000, 252 + 700));
        let later = SystemTime::now() + std::time::Duration::from_secs(3600);
        let only_claude = read(&sources, &work, Some(later)).unwrap().unwrap();
        assert_eq!(only_claude.input_tokens, 6016, "rollouts older than the session are not its own");
    }
}
