//! The shape of one adapter row: static data that says how an agent CLI is launched, typed into,
//! read and prepared. The rows themselves are in `table.rs`.

use std::time::Duration;

use crate::InputStyle;

/// How the first prompt reaches the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptVia {
    /// Arguments added after the adapter's flags; `{prompt}` is replaced by the prompt text.
    Arg(&'static [&'static str]),
    /// Arguments added after the adapter's flags; `{promptFile}` is replaced by the prompt file,
    /// which the agent reads itself.
    File(&'static [&'static str]),
    /// Typed into the agent (bracketed paste, then the submit key) once its ready cue shows.
    Typed,
}

/// How text is typed into the agent; the data behind [`InputStyle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Input {
    /// Multi-line text goes in as one bracketed paste.
    pub(crate) bracketed_paste: bool,
    /// Pause between the text and the submit key, in milliseconds.
    pub(crate) submit_delay_ms: u64,
    /// The submit key in tmux key syntax.
    pub(crate) submit_key: &'static str,
    /// A pattern on the end of a message that opens a popup swallowing the submit key; a message
    /// that matches gets a trailing space.
    pub(crate) popup_guard: Option<&'static str>,
    /// Multi-line text is wrapped in a tagged brace block (`{tag`, the lines, `tag}`) and typed
    /// line by line, for agents that take a multi-line message that way and read no paste typed
    /// while they are busy (aider).
    pub(crate) tagged_braces: bool,
}

impl Input {
    /// Bracketed paste, a short pause, then Enter.
    pub(crate) const DEFAULT: Input = Input {
        bracketed_paste: true,
        submit_delay_ms: 150,
        submit_key: "Enter",
        popup_guard: None,
        tagged_braces: false,
    };
}

/// Screen cues, as regular expressions searched in the last lines of the visible screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cues {
    /// Input typed now is accepted. When empty, a generic prompt-line cue is used.
    pub ready: &'static [&'static str],
    /// The agent waits at its own prompt (used for evidence and to tell a dead menu from a live one).
    pub idle: &'static [&'static str],
    /// The agent is busy (spinner, interrupt hint). Generic cues are always added.
    pub(crate) working: &'static [&'static str],
    /// The agent asks a question only a person should answer. Generic cues are always added.
    pub needs_input: &'static [&'static str],
}

impl Cues {
    /// No agent-specific cues: only the generic ones apply.
    pub(crate) const NONE: Cues = Cues { ready: &[], idle: &[], working: &[], needs_input: &[] };
}

/// A screen the controller answers by itself, such as "trust this folder?".
///
/// A dialog with `choose` is answered by what it says: the controller reads the menu on screen,
/// finds the highlighted option (a `❯` / `›` / `>` / `▶` marker, or reverse video) and the option
/// whose text matches `choose`, sends Up or Down until the highlight is on it — reading the screen
/// again after each move — and only then Enter. A dialog without `choose` is answered with `keys`
/// (a screen that literally asks for a key, such as "press Enter to continue").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dialog {
    /// Short name for events: `trust-folder`, `bypass-warning`, `theme`.
    pub(crate) name: &'static str,
    /// Regular expression over the last lines of the screen.
    pub(crate) pattern: &'static str,
    /// Keys sent to answer it when `choose` is `None`, in tmux key syntax.
    pub(crate) keys: &'static [&'static str],
    /// A regular expression over an option's text (without its marker or `1.` number) naming the
    /// option to select.
    pub(crate) choose: Option<&'static str>,
}

impl Dialog {
    /// A dialog answered by selecting the option whose text matches `option`.
    pub(crate) const fn choose(name: &'static str, pattern: &'static str, option: &'static str) -> Dialog {
        Dialog { name, pattern, keys: &[], choose: Some(option) }
    }

    /// A dialog answered by sending `keys`.
    pub(crate) const fn keys(name: &'static str, pattern: &'static str, keys: &'static [&'static str]) -> Dialog {
        Dialog { name, pattern, keys, choose: None }
    }
}

/// Where an agent CLI is installed from, and the version aoctl's row was checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Install {
    /// `npm` or `pypi`.
    pub registry: &'static str,
    /// The package's name in that registry.
    pub package: &'static str,
    /// The version the row was checked against (e2e/agents-cli/packages.tsv pins the same).
    pub version: &'static str,
}

impl Install {
    /// The command that installs this version.
    pub fn command(&self) -> String {
        match self.registry {
            "pypi" => format!("pipx install {}=={}", self.package, self.version),
            _ => format!("npm install -g {}@{}", self.package, self.version),
        }
    }
}

/// How an agent CLI says that it has no credentials, and how a person gives it some.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Login {
    /// Regular expressions over the last lines of the screen: its logged-out or set-up screens.
    pub screens: &'static [&'static str],
    /// What a person does to log in, in the agent's terminal or beside it.
    pub how: &'static str,
    /// Environment variables any one of which gives it credentials.
    pub env: &'static [&'static str],
    /// Files under `$HOME` any one of which holds credentials it saved.
    pub files: &'static [&'static str],
    /// A first prompt given on its command line is used up by the login screen (answered with
    /// "not logged in"), so it is typed once the agent is logged in. False where it is kept, or
    /// where that has not been seen.
    pub resend_prompt: bool,
}

impl Login {
    /// No login is known for the CLI.
    pub(crate) const NONE: Login = Login { screens: &[], how: "", env: &[], files: &[], resend_prompt: false };
}

/// A JSON literal written into an agent's configuration file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonLit {
    Bool(bool),
    Str(&'static str),
}

/// An idempotent edit of a JSON configuration file under `$HOME`. In `path` and `item`, `{root}`
/// stands for the workspaces root and `{workdir}` for the session's workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HomeEdit {
    /// Sets the value at `path`, creating the objects on the way.
    Set { file: &'static str, path: &'static [&'static str], value: JsonLit },
    /// Adds `item` to the string array at `path` unless it is already there.
    Add { file: &'static str, path: &'static [&'static str], item: &'static str },
}

/// One agent CLI, as data. Arguments may use the placeholders `{prompt}`, `{promptFile}`,
/// `{promptDir}`, `{workdir}`, `{workdirToml}` (the workdir escaped for a TOML string) and
/// `{workspacesRoot}`; `mcp_args` also `{aoctl}` (the `aoctl` binary), `{aoctlToml}` (escaped for
/// a TOML string) and `{mcpJson}` (an `mcpServers` JSON document naming `aoctl mcp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adapter {
    /// The name a manifest uses (`spec.agent`).
    pub name: &'static str,
    /// The executable, looked up on `PATH`.
    pub binary: &'static str,
    /// Arguments that always follow the binary.
    pub(crate) args: &'static [&'static str],
    /// How the first prompt is given.
    pub(crate) prompt: PromptVia,
    /// Arguments added for `permissions: bypass`.
    pub(crate) bypass_args: &'static [&'static str],
    /// Environment added for `permissions: bypass`.
    pub(crate) bypass_env: &'static [(&'static str, &'static str)],
    /// Environment added for `permissions: bypass` when the controller runs as root.
    pub(crate) root_bypass_env: &'static [(&'static str, &'static str)],
    /// Environment always added.
    pub(crate) env: &'static [(&'static str, &'static str)],
    /// How text is typed.
    pub(crate) input: Input,
    /// What the screen looks like.
    pub cues: Cues,
    /// Screens answered without asking anyone.
    pub(crate) dialogs: &'static [Dialog],
    /// Arguments, placed after `args`, that continue the agent's last conversation in the
    /// workdir instead of starting a new one; `None` when the CLI has no such form.
    pub(crate) resume: Option<&'static [&'static str]>,
    /// Edits of the agent's own configuration that pre-trust the workspaces root or the workdir.
    pub(crate) home: &'static [HomeEdit],
    /// Arguments, placed after `args`, that give the agent `aoctl mcp` as an MCP server with the
    /// session's environment (docs/mcp.md); empty when the CLI takes none on its command line.
    pub(crate) mcp_args: &'static [&'static str],
    /// Where its CLI comes from; `None` for CLIs no package registry ships.
    pub install: Option<Install>,
    /// Its logged-out screens and how to log in.
    pub login: Login,
}

impl Adapter {
    /// Whether its command line can give it `aoctl mcp` (so its tools connect on their own).
    pub fn takes_mcp(&self) -> bool {
        !self.mcp_args.is_empty()
    }

    /// An empty row; table rows fill in what they need with `..Adapter::BASE`.
    pub(crate) const BASE: Adapter = Adapter {
        name: "",
        binary: "",
        args: &[],
        prompt: PromptVia::Typed,
        bypass_args: &[],
        bypass_env: &[],
        root_bypass_env: &[],
        env: &[],
        input: Input::DEFAULT,
        cues: Cues::NONE,
        dialogs: &[],
        resume: None,
        home: &[],
        mcp_args: &[],
        install: None,
        login: Login::NONE,
    };

    /// The runtime's view of [`Adapter::input`].
    pub fn input_style(&self) -> InputStyle {
        InputStyle {
            bracketed_paste: self.input.bracketed_paste,
            submit_delay: Duration::from_millis(self.input.submit_delay_ms),
            submit_key: self.input.submit_key.to_string(),
            ..InputStyle::default()
        }
    }
}
