//! The built-in adapters: one row per agent CLI. Each row says where its facts come from: the
//! notes on CLIs observed on this machine (`observed`), the CLI's own documentation (`docs`), the
//! seed orchestrator's adapter for it (`seed`), or a conservative guess (`guessed`). Where a fact
//! could not be found, the row types the prompt after start and adds no bypass flag.

use super::adapter::{Adapter, Cues, Dialog, HomeEdit, Input, Install, JsonLit, Login, PromptVia};

/// A prompt line on its own: `>`, `❯` or `›`, optionally inside a box.
pub(crate) const PROMPT_LINE: &str = r"(?m)^[ \t]*(?:[│┃|][ \t]*)?[>❯›][ \t]*(?:[│┃|][ \t]*)?$";

/// "Trust the files in this folder?" screens, answered by choosing the option that trusts it.
const TRUST_FILES: Dialog = Dialog::choose(
    "trust-folder",
    r"(?i)do you trust the files in this folder|yes, i trust this folder|confirm folder trust",
    // "Yes, I trust this folder" (Claude Code), a plain "Yes" (Copilot 1.0), "Trust …".
    r"(?i)^(?:yes(?:, (?:i trust|proceed|trust)\b.*)?$|trust)",
);

/// Gemini-style folder trust (also Qwen's "trust the files"), answered by choosing the option that
/// trusts the folder.
const TRUST_GEMINI: Dialog = Dialog::choose(
    "trust-folder",
    r"(?i)do you trust (?:this folder|the files in this folder)",
    r"(?i)^(?:yes, )?trust (?:this )?folder",
);

/// An npm package at a version (e2e/agents-cli/packages.tsv pins the same).
const fn npm(package: &'static str, version: &'static str) -> Option<Install> {
    Some(Install { registry: "npm", package, version })
}

/// A PyPI package at a version (e2e/agents-cli/packages.tsv pins the same).
const fn pypi(package: &'static str, version: &'static str) -> Option<Install> {
    Some(Install { registry: "pypi", package, version })
}

/// Gemini-style trusted folders: a trusted folder covers everything below it.
const fn trusted_folders(file: &'static str) -> HomeEdit {
    HomeEdit::Set { file, path: &["{root}"], value: JsonLit::Str("TRUST_FOLDER") }
}

static ADAPTERS: [Adapter; 24] = [
    // observed + docs: a positional prompt starts the interactive REPL with it; as root the bypass
    // flag is refused unless IS_SANDBOX=1; the updater and telemetry are switched off. Since 2.1.3xx
    // a trusted parent folder no longer covers a worktree, so trust is written for each workdir
    // (and still for the workspaces root, for older versions) before launch; the trust screen,
    // which now highlights "No, exit" first, is also answered on screen by its text. The bypass
    // warning is switched off in settings and answered by text; "use this API key?" (default No)
    // is answered Yes, since a key in the session's environment is there to be used. Logged out
    // (2.1.332, fresh HOME prepared as above) it sits at its prompt with "Not logged in · run
    // /login" above the input box, and answers a prompt with "Not logged in · Please run /login".
    Adapter {
        name: "claude-code",
        binary: "claude",
        prompt: PromptVia::Arg(&["{prompt}"]),
        bypass_args: &["--dangerously-skip-permissions"],
        root_bypass_env: &[("IS_SANDBOX", "1")],
        env: &[("DISABLE_AUTOUPDATER", "1"), ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")],
        cues: Cues {
            ready: &[
                r"(?m)^[ \t]*(?:│[ \t]*>|❯)(?:[ \t]*│?[ \t]*$|[ \t]+[^\d\s])",
                r"\? for shortcuts",
                r"(?i)bypass permissions on",
            ],
            idle: &[r"(?m)^[ \t]*(?:│[ \t]*>|❯)(?:[ \t]*│?[ \t]*$|[ \t]+[^\d\s])"],
            working: &[r"(?m)^[ \t]*[·✢✳✶✻✽*][ \t]+[A-Z][a-z]+…"],
            needs_input: &[r"(?i)do you want to (?:proceed|make this edit|create|allow)"],
        },
        dialogs: &[
            Dialog::choose(
                "trust-folder",
                r"(?i)do you trust the files in this folder|yes, i trust this folder|is this a project you created or one you trust",
                r"(?i)^yes, (?:i trust this folder|proceed)",
            ),
            Dialog::choose("bypass-warning", r"(?s)Bypass Permissions mode.*Yes, I accept", r"^Yes, I accept"),
            Dialog::choose("api-key", r"(?i)do you want to use this api key\?", r"^Yes$"),
            Dialog::choose("theme", r"(?i)choose the text style that looks best", r"(?i)^dark mode"),
            Dialog::keys("onboarding", r"(?i)press enter to continue", &["Enter"]),
        ],
        resume: Some(&["--continue"]),
        // `=` keeps the variadic flag from taking the prompt that follows as a second config.
        mcp_args: &["--mcp-config={mcpJson}"],
        home: &[
            HomeEdit::Set {
                file: ".claude.json",
                path: &["projects", "{workdir}", "hasTrustDialogAccepted"],
                value: JsonLit::Bool(true),
            },
            HomeEdit::Set {
                file: ".claude.json",
                path: &["projects", "{root}", "hasTrustDialogAccepted"],
                value: JsonLit::Bool(true),
            },
            HomeEdit::Set {
                file: ".claude/settings.json",
                path: &["skipDangerousModePermissionPrompt"],
                value: JsonLit::Bool(true),
            },
            // In a fresh HOME the first-run setup wants the network and exits without it; an
            // unattended session has no one to go through it anyway.
            HomeEdit::Set { file: ".claude.json", path: &["hasCompletedOnboarding"], value: JsonLit::Bool(true) },
        ],
        install: npm("@anthropic-ai/claude-code", "2.1.332"),
        login: Login {
            // The status line above the input box, not the answer in the transcript, which stays
            // on screen after a login.
            screens: &[r"(?i)not logged in[ \t]*·[ \t]*run /login"],
            how: "type /login in the session's terminal (`aoctl attach`), or run `claude auth login`, or set \
                  ANTHROPIC_API_KEY in the session's env",
            env: &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"],
            files: &[".claude/.credentials.json"],
            resend_prompt: true,
        },
        ..Adapter::BASE
    },
    // observed + seed: the workdir is trusted with a `-c` override (one argv element, no shell);
    // the app-server daemon is avoided with `-c features.daemon_auto_start=false` (a config override
    // an older Codex ignores, where an unknown `--no-daemon` flag would stop it starting). Input is
    // safe only once the footer shows; a pause comes before Enter; a trailing `$word` gets a space.
    // Codex looks a worktree's trust up under the main clone ("Trusting will apply to the
    // repository root"), so the trust screen still shows and is answered by choosing "Trust and
    // continue". `resume --last` continues the newest conversation (0.171: a subcommand that
    // takes the same `-c` and bypass flags). Logged out (0.171.0) it opens "Welcome to Codex" with
    // "Sign in with ChatGPT / Device Code / another way"; OPENAI_API_KEY or CODEX_API_KEY in its
    // environment does not get past that screen, so no variable is listed.
    Adapter {
        name: "codex",
        binary: "codex",
        args: &[
            "-c",
            "check_for_update_on_startup=false",
            "-c",
            "features.daemon_auto_start=false",
            "-c",
            r#"projects."{workdirToml}".trust_level="trusted""#,
        ],
        prompt: PromptVia::Arg(&["{prompt}"]),
        bypass_args: &["--dangerously-bypass-approvals-and-sandbox"],
        input: Input { submit_delay_ms: 500, popup_guard: Some(r"\$[\w-]+$"), ..Input::DEFAULT },
        cues: Cues {
            ready: &[r"\? for shortcuts", r"(?i)\d+% context left", r"⏎ send"],
            idle: &[r"(?m)^[ \t]*[›▌](?:[ \t]*$|[ \t]+[^\d\s])"],
            working: &[r"(?m)^[ \t]*•[ \t]*Working[ \t]*\("],
            needs_input: &[r"(?i)would you like to (?:run|make|apply|grant)", r"(?i)allow command\?"],
        },
        dialogs: &[Dialog::choose(
            "trust-folder",
            r"(?i)allow codex to work in this folder|do you trust the contents of this directory|trust this (?:folder|directory)\?",
            r"(?i)^(?:trust and continue|yes, (?:allow|continue|trust))",
        )],
        resume: Some(&["resume", "--last"]),
        // Codex gives an MCP server only a few variables of its own environment unless named.
        mcp_args: &[
            "-c",
            r#"mcp_servers.aoctl.command="{aoctlToml}""#,
            "-c",
            r#"mcp_servers.aoctl.args=["mcp"]"#,
            "-c",
            r#"mcp_servers.aoctl.env_vars=["AOCTL_SERVER","AOCTL_SESSION_TOKEN"]"#,
        ],
        install: npm("@openai/codex", "0.171.0"),
        login: Login {
            screens: &[r"(?i)\bsign in with chatgpt\b"],
            how: "run `codex login` (`--device-auth` without a browser), or pipe a key to \
                  `codex login --with-api-key`",
            env: &[],
            files: &[".codex/auth.json"],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // observed + docs + seed: `--message` runs once and exits, so the prompt is typed. Aider's own
    // auto-commits stay on: aoctl wants the agent's work committed on the session branch, and each
    // aider edit becomes one commit. `--no-gitignore` keeps it from editing the tracked .gitignore,
    // and its histories live beside the prompt file, outside the tracked tree. Analytics, update
    // checks and model warnings (a yes/no question for a model litellm does not know) are off, and
    // litellm reads its bundled model list instead of fetching one, so no first-run question
    // appears (0.86.2 shows none with a key). With no key it says "No LLM model was specified and
    // no API keys were provided", offers an OpenRouter login in a browser (asking first unless
    // `--yes-always`), waits 5 minutes for it and exits 1.
    Adapter {
        name: "aider",
        binary: "aider",
        args: &[
            "--no-check-update",
            "--no-show-release-notes",
            "--no-analytics",
            "--no-gitignore",
            "--no-show-model-warnings",
            "--chat-history-file",
            "{promptDir}/aider.chat.history.md",
            "--input-history-file",
            "{promptDir}/aider.input.history",
        ],
        bypass_args: &["--yes-always"],
        env: &[("LITELLM_LOCAL_MODEL_COST_MAP", "True")],
        // Its prompt reads nothing while it answers, and a paste typed meanwhile arrives unbracketed,
        // each line a message; a `{tag` … `tag}` block typed line by line is one message either way.
        input: Input { bracketed_paste: false, tagged_braces: true, ..Input::DEFAULT },
        cues: Cues {
            ready: &[r"(?m)^(?:[a-z][a-z0-9-]*(?: multi)?|multi)?> ?$"],
            idle: &[r"(?m)^(?:[a-z][a-z0-9-]*(?: multi)?|multi)?> ?$"],
            working: &[r"(?mi)^[ \t░█▒▓]*waiting for\b"],
            needs_input: &[r"\(Y\)es/\(N\)o", r"(?m)\[(?:Yes|No)\]:[ \t]*$"],
        },
        resume: Some(&["--restore-chat-history"]),
        install: pypi("aider-chat", "0.86.2"),
        login: Login {
            screens: &[
                r"(?i)no llm model was specified and no api keys were provided",
                r"(?i)login to openrouter or create a free account|connect aider with openrouter",
            ],
            how: "set ANTHROPIC_API_KEY, OPENAI_API_KEY or another key aider reads in the session's env; it has \
                  no login command and without a key offers an OpenRouter login in a browser, then exits",
            env: &["OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"],
            files: &[".aider/oauth-keys.env"],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // seed + observed 1.18.33 (npm `opencode-ai`): `--prompt` and `--continue` are in its help;
    // permissions come from config, so bypass sets OPENCODE_PERMISSION. With no provider it still
    // opens its TUI at "Ask anything…" (about 20 s on 2 cores), suggesting /connect: it runs on
    // its free models, so it has no logged-out screen.
    Adapter {
        name: "opencode",
        binary: "opencode",
        prompt: PromptVia::Arg(&["--prompt", "{prompt}"]),
        bypass_env: &[("OPENCODE_PERMISSION", r#"{"edit":"allow","bash":"allow","webfetch":"allow"}"#)],
        cues: Cues { ready: &[r"(?i)ctrl\+p commands|enter send|ask anything", PROMPT_LINE], ..Cues::NONE },
        resume: Some(&["--continue"]),
        install: npm("opencode-ai", "1.18.33"),
        ..Adapter::BASE
    },
    // observed 0.0.34 (npm `@vibe-kit/grok-cli`, which reports 1.0.1): its help has no update,
    // permission or resume flag (the ones once here were Claude's and made it exit 1), and no
    // approval prompts are documented. A leading positional word naming a subcommand (`git`,
    // `mcp`) runs that command, so the prompt is typed. Without GROK_API_KEY it exits 1 saying
    // "API key required" (the line scrolls into tmux history; the screen is left blank).
    Adapter {
        name: "grok",
        binary: "grok",
        install: npm("@vibe-kit/grok-cli", "0.0.34"),
        login: Login {
            screens: &[r"(?i)api key required"],
            how: "set GROK_API_KEY in the session's env (or `apiKey` in ~/.grok/user-settings.json); without \
                  one it exits at start",
            env: &["GROK_API_KEY"],
            files: &[".grok/user-settings.json"],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // observed 0.215.0 (npm `droid`; `@factory/cli` has no Linux binary on npm): `droid [prompt]` is
    // interactive; its help lists `--auto <low|medium|high>` (autonomy level) and `--resume --last`
    // (the newest session in the folder). Logged out it asks to "login with your Factory account"
    // above a Login / Exit menu; it has no login subcommand.
    Adapter {
        name: "droid",
        binary: "droid",
        prompt: PromptVia::Arg(&["{prompt}"]),
        bypass_args: &["--auto", "high"],
        resume: Some(&["--resume", "--last"]),
        install: npm("droid", "0.215.0"),
        login: Login {
            screens: &[r"(?i)please login with your factory account"],
            how: "choose Login on its screen in the session's terminal (`aoctl attach`), or set FACTORY_API_KEY \
                  in the session's env",
            env: &["FACTORY_API_KEY"],
            files: &[".factory/auth.v2.file", ".factory/auth.encrypted"],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // observed 0.0.1790142911 (npm `@sourcegraph/amp`): `-x` is execute mode, so the prompt is
    // typed. Its help has no bypass flag: allowing everything is the `amp.dangerouslyAllowAll`
    // setting of its settings file, which aoctl does not write, so none is added. With no
    // AMP_API_KEY it says "No API key found. Starting login flow..." and asks "Would you like to
    // log in to Amp? [(y)es, (n)o]". Ready cues guessed.
    Adapter {
        name: "amp",
        binary: "amp",
        cues: Cues { ready: &[r"(?i)type a message|what can i help", PROMPT_LINE], ..Cues::NONE },
        install: npm("@sourcegraph/amp", "0.0.1790142911-g7618fb"),
        login: Login {
            screens: &[r"(?i)would you like to log in to amp|no api key found\. starting login flow"],
            how: "run `amp login` (or answer y on its screen in the session's terminal, `aoctl attach`), or set \
                  AMP_API_KEY in the session's env",
            env: &["AMP_API_KEY"],
            files: &[".local/share/amp/secrets.json"],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // seed: Antigravity's CLI; the permission picker is recognised by its wording. No registry
    // reachable here ships `agy`, so nothing of this row is checked against a real CLI.
    Adapter {
        name: "agy",
        binary: "agy",
        args: &["--add-dir", "{workdir}"],
        prompt: PromptVia::Arg(&["--prompt-interactive", "{prompt}"]),
        bypass_args: &["--dangerously-skip-permissions"],
        cues: Cues { needs_input: &[r"(?i)requesting permission for:"], ..Cues::NONE },
        ..Adapter::BASE
    },
    // seed: `crush run` is non-interactive, so the prompt is typed; `--yolo` skips approvals.
    // Resume guessed unavailable. npm `@charmland/crush` (0.96.1) downloads its binary from GitHub
    // in its install script, which fails where only the registries are reachable: not checked.
    Adapter {
        name: "crush",
        binary: "crush",
        bypass_args: &["--yolo"],
        cues: Cues {
            ready: &[r"(?i)ready\.\.\.", PROMPT_LINE],
            needs_input: &[r"(?i)allow for (?:this )?session|permission required"],
            ..Cues::NONE
        },
        ..Adapter::BASE
    },
    // docs + seed: the binary is `cursor-agent`; a positional prompt is interactive; `--force`
    // allows commands unless denied. The approval wording is guessed. Cursor ships it only through
    // its own install script, on no registry: not checked against a real CLI.
    Adapter {
        name: "cursor",
        binary: "cursor-agent",
        prompt: PromptVia::Arg(&["{prompt}"]),
        bypass_args: &["--force"],
        cues: Cues {
            ready: &[r"(?i)add a follow-up|plan, search, build anything", r"(?m)^[ \t]*(?:Cursor|Composer) .* · "],
            idle: &[r"(?m)^[ \t]*→"],
            needs_input: &[r"(?i)\(y\)[ \t]*\(enter\)|run this command\?"],
            ..Cues::NONE
        },
        resume: Some(&["resume"]),
        ..Adapter::BASE
    },
    // docs + seed + observed 0.24.4 (npm `@qwen-code/qwen-code`, Node 22): a fork of gemini-cli:
    // `--prompt-interactive`, `--yolo`, `--continue` are in its help; gemini-style trust. With no
    // credentials it opens a "Connect a Provider" picker (also /auth). No single variable logs it
    // in: a key needs its base URL and model beside it (OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL).
    Adapter {
        name: "qwen",
        binary: "qwen",
        prompt: PromptVia::Arg(&["--prompt-interactive", "{prompt}"]),
        bypass_args: &["--yolo"],
        cues: Cues {
            ready: &[r"(?i)type your message"],
            idle: &[r"(?i)type your message"],
            working: &[r"(?i)esc to cancel"],
            needs_input: &[r"(?i)allow execution|apply this change\?|allow once"],
        },
        dialogs: &[TRUST_GEMINI],
        resume: Some(&["--continue"]),
        home: &[trusted_folders(".qwen/trustedFolders.json")],
        install: npm("@qwen-code/qwen-code", "0.24.4"),
        login: Login {
            // The picker's title, alone on its line in the box.
            screens: &[r"(?im)^[ \t│┃|]*connect a provider[ \t│┃|]*$"],
            how: "pick a provider in its Connect a Provider dialog (/auth) in the session's terminal (`aoctl \
                  attach`), or set OPENAI_API_KEY, OPENAI_BASE_URL and OPENAI_MODEL in the session's env",
            env: &[],
            files: &[".qwen/oauth_creds.json"],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // seed + docs + observed 1.0.102 (npm `@github/copilot`): `--interactive <prompt>` runs the
    // prompt and stays interactive (`-p` exits); `--allow-all-tools` and `--continue` are in its
    // help. A new folder shows "Confirm folder trust", answered with its first option; logged out
    // it then sits at its `❯` prompt saying "Please use /login to sign in to use Copilot" (its
    // ready cue matches that screen). Its token goes to the system keychain or a file under
    // ~/.copilot whose name the package does not show, so no file is listed.
    Adapter {
        name: "copilot",
        binary: "copilot",
        prompt: PromptVia::Arg(&["--interactive", "{prompt}"]),
        bypass_args: &["--allow-all-tools"],
        cues: Cues { ready: &[r"(?i)/ commands · \? help", PROMPT_LINE], ..Cues::NONE },
        dialogs: &[TRUST_FILES],
        resume: Some(&["--continue"]),
        install: npm("@github/copilot", "1.0.102"),
        login: Login {
            screens: &[r"(?i)please use /login to sign in"],
            how: "run `copilot login` (or type /login in the session's terminal, `aoctl attach`), or set \
                  COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN in the session's env",
            env: &["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"],
            files: &[],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // seed + docs: `goose session` is the interactive REPL; approvals come from GOOSE_MODE. Goose
    // is released on GitHub only (no registry here ships it): not checked against a real CLI.
    Adapter {
        name: "goose",
        binary: "goose",
        args: &["session"],
        bypass_env: &[("GOOSE_MODE", "auto")],
        cues: Cues { ready: &[r"\( O\)>", PROMPT_LINE], ..Cues::NONE },
        resume: Some(&["--resume"]),
        ..Adapter::BASE
    },
    // docs + observed 0.36.0 (npm `@augmentcode/auggie`): `--instruction-file` gives the first
    // instruction and stays interactive; `--continue` is in its help. It has no blanket approval
    // flag (only per-tool rules), so none is added. Logged out it shows "→ Login to continue" and
    // "Press return to open your browser".
    Adapter {
        name: "auggie",
        binary: "auggie",
        prompt: PromptVia::File(&["--instruction-file", "{promptFile}"]),
        resume: Some(&["--continue"]),
        install: npm("@augmentcode/auggie", "0.36.0"),
        login: Login {
            screens: &[r"(?im)^[ \t→>❯›]*login to continue[ \t]*$", r"(?i)new to augment\? you can create an account"],
            how: "run `auggie login`, or set AUGMENT_SESSION_AUTH (the contents of ~/.augment/session.json) in \
                  the session's env",
            env: &["AUGMENT_SESSION_AUTH"],
            files: &[".augment/session.json"],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // seed + observed 1.5.47 (npm `@continuedev/cli`): the CLI is `cn`; a positional prompt is
    // interactive; `--auto` (all tools allowed) and `--resume` are in its help. With no key it asks
    // "Enter your Anthropic API key:" and saves it in ~/.continue/config.yaml; it reads
    // ANTHROPIC_API_KEY only when headless, and has no login command.
    Adapter {
        name: "continue",
        binary: "cn",
        prompt: PromptVia::Arg(&["{prompt}"]),
        bypass_args: &["--auto"],
        cues: Cues { needs_input: &[r"(?i)enter select"], ..Cues::NONE },
        resume: Some(&["--resume"]),
        install: npm("@continuedev/cli", "1.5.47"),
        login: Login {
            screens: &[r"(?i)enter your [a-z]+ api key"],
            how: "type an Anthropic API key at its \"Enter your Anthropic API key\" prompt in the session's \
                  terminal (`aoctl attach`)",
            env: &[],
            files: &[".continue/config.yaml"],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // seed: Devin for Terminal (its vendor's installer only, on no registry here: not checked
    // against a real CLI); `-p` is print mode, so the prompt is positional. Its trust list is
    // pre-filled with the workspaces root (whether a parent covers children is not known) and the
    // trust screen is also answered. Resume needs a session id.
    Adapter {
        name: "devin",
        binary: "devin",
        prompt: PromptVia::Arg(&["{prompt}"]),
        bypass_args: &["--permission-mode", "dangerous"],
        dialogs: &[TRUST_FILES],
        home: &[HomeEdit::Add {
            file: ".local/share/devin/cli/trusted_workspaces.json",
            path: &["trusted_paths"],
            item: "{root}",
        }],
        ..Adapter::BASE
    },
    // seed + observed 3.0.65 (npm `cline`): a prompt in argv is parsed as a command, so it is
    // typed. `--yolo` may also switch to plain headless output, so `--auto-approve true` (in its
    // help) is used. Resume needs a session id. With no provider it shows "Welcome to Cline /
    // Connect a model provider to get started" over a sign-in menu; CLINE_API_KEY does not get
    // past it.
    Adapter {
        name: "cline",
        binary: "cline",
        bypass_args: &["--auto-approve", "true"],
        cues: Cues { ready: &[r"(?i)type a message|what can i help", PROMPT_LINE], ..Cues::NONE },
        install: npm("cline", "3.0.65"),
        login: Login {
            screens: &[r"(?i)connect a model provider to get started"],
            how: "run `cline auth` (e.g. `cline auth -p anthropic -k KEY -m MODEL`), or pick a provider on its \
                  welcome screen in the session's terminal (`aoctl attach`)",
            env: &[],
            files: &[".cline/data/settings/providers.json"],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // seed + docs + observed 1.51.0 (PyPI `kimi-cli`, Python 3.13; on 3.12.1 it dies at start with
    // a TypeError): `-p` is non-interactive, so the prompt is typed; `--yolo` and `--continue` are
    // in its help. Its input box is headed `── input ──`; logged out it says "Model: not set, send
    // /login to login" above it (its ready cue matches that screen). KIMI_API_KEY alone logs nothing
    // in: it only overrides a configured provider's key.
    Adapter {
        name: "kimi",
        binary: "kimi",
        bypass_args: &["--yolo"],
        cues: Cues { ready: &[r"(?m)^── input ─", r"│ >", PROMPT_LINE], ..Cues::NONE },
        resume: Some(&["--continue"]),
        install: pypi("kimi-cli", "1.51.0"),
        login: Login {
            screens: &[r"(?i)model:[ \t]*not set, send /login"],
            how: "run `kimi login`, or send /login in the session's terminal (`aoctl attach`)",
            env: &[],
            files: &[".kimi/credentials/kimi-code.json"],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // seed + docs: `kiro-cli chat`; a positional prompt is not reliably submitted, so it is typed.
    // Kiro ships it through its own installer, on no registry here: not checked against a real CLI.
    Adapter {
        name: "kiro",
        binary: "kiro-cli",
        args: &["chat"],
        bypass_args: &["--trust-all-tools"],
        cues: Cues {
            ready: &[r"(?i)ask a question or describe a task", PROMPT_LINE],
            needs_input: &[r"\[y/n/t\]"],
            ..Cues::NONE
        },
        resume: Some(&["--resume"]),
        ..Adapter::BASE
    },
    // seed + observed 7.7.7 (npm `@kilocode/cli`, an opencode fork): the TUI rejects permission
    // flags; KILO_CONFIG_CONTENT is merged as the top config, so bypass allows every tool there.
    // The prompt is typed. Its screen stays blank for 25 s or more on 2 cores before the TUI shows
    // "Ask anything…"; the ready cue waits for that, and the first prompt with it. With no
    // credentials it runs on its free "Kilo Gateway" model: it has no logged-out screen.
    Adapter {
        name: "kilocode",
        binary: "kilocode",
        bypass_env: &[("KILO_CONFIG_CONTENT", r#"{"permission":{"*":"allow"}}"#)],
        cues: Cues { ready: &[r"(?i)ask anything|ctrl\+p commands"], ..Cues::NONE },
        resume: Some(&["--continue"]),
        install: npm("@kilocode/cli", "7.7.7"),
        ..Adapter::BASE
    },
    // seed + observed 3.0.2 (PyPI `mistral-vibe`, Python 3.12): `--trust` skips its folder trust
    // prompt; the positional prompt keeps the TUI; the builtin `auto-approve` agent approves every
    // tool (`--agent`, `--continue` in its help). A fresh HOME opens its setup ("Welcome to Mistral
    // Vibe - Let's get you started!"), which needs a person and an API key; with MISTRAL_API_KEY
    // it opens at its `>` prompt.
    Adapter {
        name: "vibe",
        binary: "vibe",
        args: &["--trust"],
        prompt: PromptVia::Arg(&["{prompt}"]),
        bypass_args: &["--agent", "auto-approve"],
        resume: Some(&["--continue"]),
        install: pypi("mistral-vibe", "3.0.2"),
        login: Login {
            screens: &[r"(?i)welcome to mistral vibe\b"],
            how: "run `vibe --setup` (or go through its setup in the session's terminal, `aoctl attach`), or set \
                  MISTRAL_API_KEY in the session's env",
            env: &["MISTRAL_API_KEY"],
            files: &[".vibe/.env"],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // seed + observed 0.73.1 (npm `@mariozechner/pi-coding-agent`): the prompt is a trailing
    // positional (no `--` terminator); Pi has no approval prompts. At start it tries to download
    // fd and ripgrep (it carries on without them); with no provider it warns "No models
    // available. Use /login" and answers a prompt with "No API key found for the selected model".
    // It writes an empty ~/.pi/agent/auth.json at start, so that file says nothing of a login.
    Adapter {
        name: "pi",
        binary: "pi",
        prompt: PromptVia::Arg(&["{prompt}"]),
        resume: Some(&["--continue"]),
        install: npm("@mariozechner/pi-coding-agent", "0.73.1"),
        login: Login {
            screens: &[r"(?i)no models available\. use /login|no api key found for the selected model"],
            how: "send /login in the session's terminal (`aoctl attach`), or set a provider's key such as \
                  ANTHROPIC_API_KEY in the session's env",
            env: &[
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_OAUTH_TOKEN",
                "OPENAI_API_KEY",
                "GEMINI_API_KEY",
                "XAI_API_KEY",
                "GROQ_API_KEY",
                "CEREBRAS_API_KEY",
                "OPENROUTER_API_KEY",
                "MISTRAL_API_KEY",
                "DEEPSEEK_API_KEY",
                "MOONSHOT_API_KEY",
                "KIMI_API_KEY",
                "ZAI_API_KEY",
                "AI_GATEWAY_API_KEY",
            ],
            files: &[],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
    // seed: a positional prompt may run in one-shot command mode, so it is typed;
    // `--unrestricted` skips approvals. Resume needs a session id. No registry reachable here
    // ships `autohand`: not checked against a real CLI.
    Adapter { name: "autohand", binary: "autohand", bypass_args: &["--unrestricted"], ..Adapter::BASE },
    // docs + seed + observed 0.61.0 (npm `@google/gemini-cli`): `--prompt-interactive` runs the
    // prompt and stays interactive; `--yolo` approves every action; `--resume latest` continues
    // (all in its help). Folder trust is pre-filled and its "Do you trust the files in this
    // folder?" answered; with no key it then asks "How would you like to authenticate for this
    // project?" ("No authentication method selected"), and waits for authentication once one is
    // chosen.
    Adapter {
        name: "gemini",
        binary: "gemini",
        prompt: PromptVia::Arg(&["--prompt-interactive", "{prompt}"]),
        bypass_args: &["--yolo"],
        cues: Cues {
            ready: &[r"(?i)type your message"],
            idle: &[r"(?i)type your message"],
            working: &[r"(?i)esc to cancel"],
            needs_input: &[r"(?i)allow execution|apply this change\?|allow once"],
        },
        dialogs: &[TRUST_GEMINI],
        resume: Some(&["--resume", "latest"]),
        home: &[trusted_folders(".gemini/trustedFolders.json")],
        install: npm("@google/gemini-cli", "0.61.0"),
        login: Login {
            screens: &[
                r"(?i)how would you like to authenticate|no authentication method selected",
                r"(?i)waiting for authentication",
            ],
            how: "choose a method in its authentication dialog in the session's terminal (`aoctl attach`), or \
                  set GEMINI_API_KEY in the session's env",
            env: &["GEMINI_API_KEY"],
            files: &[".gemini/oauth_creds.json", ".gemini/gemini-credentials.json"],
            resend_prompt: false,
        },
        ..Adapter::BASE
    },
];

/// Every built-in adapter, in the order of `BUILTIN_AGENTS`.
pub fn all() -> &'static [Adapter] {
    &ADAPTERS
}

/// The built-in adapter with this name.
pub fn builtin(name: &str) -> Option<&'static Adapter> {
    ADAPTERS.iter().find(|a| a.name == name)
}
