//! Agent adapters: one table of data for the built-in agent CLIs (`table.rs`, rows of the shape in
//! `adapter.rs`), one generic adapter that renders launch commands from a row (here), reads the
//! screen (`activity.rs`) and prepares the agent's own configuration (`home.rs`); the usage and
//! rate limits agents print ([`limits`]) and the token and cost records Claude Code and Codex
//! write ([`usage`]).
//!
//! A launch command is an argument vector, never a shell string:
//! `binary, args…, bypass args…, prompt args…, agentArgs…`. `agentArgs` always come last, for
//! custom commands too. A prompt that starts with `-` is typed after start instead of passed as an
//! argument, so it cannot be read as a flag. A custom `{command: [...]}` gets `{prompt}` (the
//! empty string when there is no prompt) and `{promptFile}` substituted; when it uses neither, the
//! prompt is typed once the screen shows a prompt line. `permissions` has no effect on a custom
//! command.

mod activity;
mod adapter;
mod home;
pub mod limits;
mod table;
pub mod usage;

#[cfg(test)]
mod tests_activity;
#[cfg(test)]
mod tests_login;
#[cfg(test)]
mod tests_render;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aoctl_api::session::{AgentRef, Permissions};

pub use activity::{answer_dialog, classify, is_ready, logged_out, DialogAnswer, Screen};
pub use adapter::{Adapter, Cues, Dialog, HomeEdit, Input, Install, JsonLit, Login, PromptVia};
pub use home::{prepare_home, prepare_own_home};
pub use table::{all, builtin};

/// How text is typed into an agent: what its adapter says ([`Adapter::input_style`]), which every
/// runtime follows when it delivers a message.
#[derive(Clone, Debug, PartialEq)]
pub struct InputStyle {
    /// Multi-line text goes in as one bracketed paste so the agent receives one message.
    pub bracketed_paste: bool,
    /// Pause between the text and the submitting key (some agents turn an immediate Enter into a newline).
    pub submit_delay: Duration,
    /// The key that submits, in tmux key syntax (`Enter`, `C-m`).
    pub submit_key: String,
    /// How long delivery is checked before the submit key is sent again.
    pub verify_timeout: Duration,
    /// How many times the submit key is retried.
    pub retries: u32,
}

impl Default for InputStyle {
    fn default() -> Self {
        InputStyle {
            bracketed_paste: true,
            submit_delay: Duration::from_millis(150),
            submit_key: "Enter".into(),
            verify_timeout: Duration::from_secs(2),
            retries: 3,
        }
    }
}

/// What rendering an agent's launch command needs.
#[derive(Clone, Copy, Debug)]
pub struct RenderInput<'a> {
    pub agent: &'a AgentRef,
    /// The first prompt; `None` or blank starts the agent without one.
    pub prompt: Option<&'a str>,
    /// Where the controller writes the prompt, outside the tracked tree.
    pub prompt_file: &'a Path,
    /// `spec.agentArgs`, appended last.
    pub agent_args: &'a [String],
    pub permissions: Permissions,
    /// The session's workspace; the agent's working directory.
    pub workdir: &'a Path,
    /// The folder all workspaces live under.
    pub workspaces_root: &'a Path,
    /// Whether the controller (and so the agent) runs as uid 0.
    pub running_as_root: bool,
    /// The `aoctl` binary to configure as the agent's MCP server (`aoctl mcp`), for agents whose
    /// row says how (`Adapter::mcp_args`); `None` configures none.
    pub mcp: Option<&'a Path>,
}

/// A rendered launch: what the runtime starts and how to talk to it.
#[derive(Clone, Debug)]
pub struct Launch {
    /// Argument vector; the binary first.
    pub command: Vec<String>,
    /// Added to the agent's environment.
    pub env: BTreeMap<String, String>,
    /// The prompt to type once the agent is ready, for agents that take it typed.
    pub initial_input: Option<String>,
    pub input: InputStyle,
    /// The built-in row, or `None` for a custom command.
    pub adapter: Option<&'static Adapter>,
    /// Rendered by [`render_resume`]: it continues the last conversation.
    pub resumed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("unknown agent `{0}`")]
    Unknown(String),
    #[error("agent.command is empty")]
    EmptyCommand,
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not valid JSON: {source}")]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("{path}: `{key}` is not a JSON {expected}")]
    Shape { path: PathBuf, key: String, expected: &'static str },
}

impl AgentError {}

/// Renders the command that starts a new conversation. Pure: reads and writes nothing.
pub fn render(input: &RenderInput) -> Result<Launch, AgentError> {
    let prompt = input.prompt.filter(|p| !p.trim().is_empty());
    let vars = Vars::new(input, prompt);
    match input.agent {
        AgentRef::Custom { command } => render_custom(command, input, &vars, prompt),
        AgentRef::Builtin(name) => {
            let adapter = builtin(name).ok_or_else(|| AgentError::Unknown(name.clone()))?;
            let bypass = input.permissions == Permissions::Bypass;
            let mut command = head(adapter, &vars);
            if bypass {
                command.extend(adapter.bypass_args.iter().map(|a| a.to_string()));
            }
            let mut initial_input = None;
            if let Some(p) = prompt {
                match adapter.prompt {
                    PromptVia::Arg(t) if !p.trim_start().starts_with('-') => {
                        command.extend(t.iter().map(|a| vars.apply(a)))
                    }
                    PromptVia::File(t) => command.extend(t.iter().map(|a| vars.apply(a))),
                    _ => initial_input = Some(prepare_text(Some(adapter), p)),
                }
            }
            command.extend(input.agent_args.iter().cloned());
            Ok(Launch {
                command,
                env: env_of(adapter, input),
                initial_input,
                input: adapter.input_style(),
                adapter: Some(adapter),
                resumed: false,
            })
        }
    }
}

/// Renders the command that continues the agent's last conversation in the workdir (after a
/// restart, or `stopped: false` again): `binary, args…, resume args…, bypass args…, agentArgs…`.
/// `None` for custom commands and for agents whose CLI has no such form.
pub fn render_resume(input: &RenderInput) -> Result<Option<Launch>, AgentError> {
    let AgentRef::Builtin(name) = input.agent else { return Ok(None) };
    let adapter = builtin(name).ok_or_else(|| AgentError::Unknown(name.clone()))?;
    let Some(resume) = adapter.resume else { return Ok(None) };
    let vars = Vars::new(input, None);
    let mut command = head(adapter, &vars);
    command.extend(resume.iter().map(|a| vars.apply(a)));
    if input.permissions == Permissions::Bypass {
        command.extend(adapter.bypass_args.iter().map(|a| a.to_string()));
    }
    command.extend(input.agent_args.iter().cloned());
    Ok(Some(Launch {
        command,
        env: env_of(adapter, input),
        initial_input: None,
        input: adapter.input_style(),
        adapter: Some(adapter),
        resumed: true,
    }))
}

/// The text to type for `text`: a message the agent would turn into a popup (Codex's trailing
/// `$word`) gets a trailing space so the submit key is not swallowed, and a multi-line message
/// for an agent with `tagged_braces` becomes its brace block.
pub fn prepare_text(adapter: Option<&Adapter>, text: &str) -> String {
    let Some(adapter) = adapter else { return text.to_string() };
    if adapter.input.tagged_braces && text.trim_end().contains('\n') {
        return tagged_block(text.trim_end());
    }
    match adapter.input.popup_guard.and_then(activity::regex) {
        Some(re) if re.is_match(text.trim_end()) => format!("{} ", text.trim_end()),
        _ => text.to_string(),
    }
}

/// `text` inside `{tag` … `tag}`, with a tag that no line of the text could be mistaken for.
fn tagged_block(text: &str) -> String {
    let clashes = |tag: &str| {
        text.lines().any(|l| {
            let l = l.trim_matches(|c| c == '\r' || c == '\n');
            l == format!("{{{tag}") || l == format!("{tag}}}")
        })
    };
    let tag = (0..)
        .map(|n| if n == 0 { "aoctl".to_string() } else { format!("aoctl{n}") })
        .find(|t| !clashes(t))
        .expect("some tag is free");
    format!("{{{tag}\n{text}\n{tag}}}")
}

fn render_custom(
    command: &[String],
    input: &RenderInput,
    vars: &Vars,
    prompt: Option<&str>,
) -> Result<Launch, AgentError> {
    if command.first().is_none_or(|c| c.is_empty()) {
        return Err(AgentError::EmptyCommand);
    }
    let takes_prompt = command.iter().any(|a| a.contains("{prompt}") || a.contains("{promptFile}"));
    let mut rendered: Vec<String> = command.iter().map(|a| vars.apply(a)).collect();
    rendered.extend(input.agent_args.iter().cloned());
    Ok(Launch {
        command: rendered,
        env: BTreeMap::new(),
        initial_input: prompt.filter(|_| !takes_prompt).map(str::to_string),
        input: InputStyle::default(),
        adapter: None,
        resumed: false,
    })
}

fn head(adapter: &Adapter, vars: &Vars) -> Vec<String> {
    let mut command = vec![adapter.binary.to_string()];
    command.extend(adapter.args.iter().map(|a| vars.apply(a)));
    if vars.mcp {
        command.extend(adapter.mcp_args.iter().map(|a| vars.apply(a)));
    }
    command
}

fn env_of(adapter: &Adapter, input: &RenderInput) -> BTreeMap<String, String> {
    let bypass = input.permissions == Permissions::Bypass;
    let mut env: BTreeMap<String, String> = adapter.env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    if bypass {
        env.extend(adapter.bypass_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        if input.running_as_root {
            env.extend(adapter.root_bypass_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        }
    }
    env
}

/// Placeholder values; substitution is one pass, so a prompt containing `{workdir}` stays as typed.
struct Vars {
    values: [(&'static str, String); 9],
    /// Whether the `aoctl mcp` server is configured.
    mcp: bool,
}

impl Vars {
    fn new(input: &RenderInput, prompt: Option<&str>) -> Vars {
        let workdir = input.workdir.to_string_lossy().into_owned();
        let prompt_dir = input.prompt_file.parent().unwrap_or(Path::new(".")).to_string_lossy().into_owned();
        let aoctl = input.mcp.map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let mcp_json =
            serde_json::json!({"mcpServers": {"aoctl": {"type": "stdio", "command": aoctl, "args": ["mcp"]}}});
        Vars {
            mcp: input.mcp.is_some(),
            values: [
                ("prompt", prompt.unwrap_or_default().to_string()),
                ("promptFile", input.prompt_file.to_string_lossy().into_owned()),
                ("promptDir", prompt_dir),
                ("workdirToml", toml_escape(&workdir)),
                ("workdir", workdir),
                ("workspacesRoot", input.workspaces_root.to_string_lossy().into_owned()),
                ("aoctlToml", toml_escape(&aoctl)),
                ("aoctl", aoctl),
                ("mcpJson", mcp_json.to_string()),
            ],
        }
    }

    fn apply(&self, template: &str) -> String {
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let hit = after.find('}').and_then(|close| {
                let key = &after[..close];
                self.values.iter().find(|(k, _)| *k == key).map(|(_, v)| (v, close))
            });
            match hit {
                Some((value, close)) => {
                    out.push_str(value);
                    rest = &after[close + 1..];
                }
                None => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// Escapes text for the inside of a TOML basic string.
fn toml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}
