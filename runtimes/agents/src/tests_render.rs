//! Tests of the adapter table and of rendering launch commands.

use std::collections::BTreeSet;
use std::path::Path;

use aoctl_api::session::{AgentRef, Permissions, BUILTIN_AGENTS};

use super::*;

const PROMPT: &str = "Fix the login redirect loop";

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn input<'a>(
    agent: &'a AgentRef,
    prompt: Option<&'a str>,
    agent_args: &'a [String],
    permissions: Permissions,
) -> RenderInput<'a> {
    RenderInput {
        agent,
        prompt,
        prompt_file: Path::new("/data/sessions/fix-login/prompt.md"),
        agent_args,
        permissions,
        workdir: Path::new("/data/ws/demo/fix-login"),
        workspaces_root: Path::new("/data/ws"),
        running_as_root: false,
        mcp: None,
    }
}

fn builtin_ref(name: &str) -> AgentRef {
    AgentRef::Builtin(name.to_string())
}

fn render_builtin(name: &str, permissions: Permissions, agent_args: &[String]) -> Launch {
    render(&input(&builtin_ref(name), Some(PROMPT), agent_args, permissions)).unwrap()
}

fn contains_run(haystack: &[String], needle: &[&str]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w.iter().zip(needle).all(|(a, b)| a == b))
}

#[test]
fn the_table_is_the_builtin_list() {
    let names: Vec<&str> = all().iter().map(|a| a.name).collect();
    assert_eq!(names, BUILTIN_AGENTS, "one row per built-in name, in the same order");
    assert_eq!(names.iter().collect::<BTreeSet<_>>().len(), names.len(), "names are unique");
    assert!(builtin("nope").is_none());
}

#[test]
fn every_pattern_compiles() {
    for a in all() {
        let c = &a.cues;
        let patterns = c.ready.iter().chain(c.idle).chain(c.working).chain(c.needs_input);
        for p in patterns.chain(a.dialogs.iter().map(|d| &d.pattern)).chain(a.input.popup_guard.iter()) {
            assert!(regex::Regex::new(p).is_ok(), "{}: {p}", a.name);
        }
    }
}

#[test]
fn every_adapter_renders_for_both_permissions() {
    let extra = args(&["--model", "sonnet"]);
    for a in all() {
        for permissions in [Permissions::Bypass, Permissions::Ask] {
            let l = render_builtin(a.name, permissions, &extra);
            let ctx = format!("{} {permissions}: {:?}", a.name, l.command);
            assert_eq!(l.command[0], a.binary, "{ctx}");
            assert_eq!(l.command[l.command.len() - 2..], extra[..], "agentArgs last: {ctx}");
            assert_eq!(l.adapter.map(|x| x.name), Some(a.name));
            for arg in &l.command {
                assert!(!arg.contains("{prompt") && !arg.contains("{workdir"), "unsubstituted: {ctx}");
            }
            let bypass = permissions == Permissions::Bypass;
            if !a.bypass_args.is_empty() {
                assert_eq!(contains_run(&l.command, a.bypass_args), bypass, "bypass flag: {ctx}");
            }
            for (k, v) in a.bypass_env {
                assert_eq!(l.env.get(*k).map(String::as_str) == Some(*v), bypass, "bypass env: {ctx}");
            }
            let before_args = &l.command[..l.command.len() - 2];
            match a.prompt {
                PromptVia::Arg(_) => {
                    assert_eq!(before_args.last().map(String::as_str), Some(PROMPT), "prompt argument: {ctx}");
                    assert_eq!(l.initial_input, None);
                }
                PromptVia::File(_) => {
                    assert_eq!(before_args.last().map(String::as_str), Some("/data/sessions/fix-login/prompt.md"));
                    assert!(!l.command.iter().any(|x| x == PROMPT), "{ctx}");
                    assert_eq!(l.initial_input, None);
                }
                PromptVia::Typed => {
                    assert!(!l.command.iter().any(|x| x.contains(PROMPT)), "{ctx}");
                    assert_eq!(l.initial_input.as_deref(), Some(PROMPT), "{ctx}");
                }
            }
        }
    }
}

#[test]
fn no_prompt_means_no_prompt_arguments() {
    for a in all() {
        let l = render(&input(&builtin_ref(a.name), Some("  "), &[], Permissions::Ask)).unwrap();
        assert_eq!(l.initial_input, None, "{}", a.name);
        let plain: Vec<String> = [a.binary].iter().chain(a.args).map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(l.command.len(), plain.len(), "{}: {:?}", a.name, l.command);
    }
}

#[test]
fn claude_code_argv() {
    let l = render_builtin("claude-code", Permissions::Bypass, &args(&["--model", "sonnet"]));
    assert_eq!(l.command, args(&["claude", "--dangerously-skip-permissions", PROMPT, "--model", "sonnet"]));
    assert_eq!(l.env.get("DISABLE_AUTOUPDATER").map(String::as_str), Some("1"));
    assert_eq!(l.env.get("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC").map(String::as_str), Some("1"));
    assert!(!l.env.contains_key("IS_SANDBOX"), "not root");
    assert!(l.input.bracketed_paste);

    let ask = render_builtin("claude-code", Permissions::Ask, &[]);
    assert_eq!(ask.command, args(&["claude", PROMPT]));
}

#[test]
fn claude_code_as_root_needs_the_sandbox_marker_for_bypass_only() {
    let agent = builtin_ref("claude-code");
    let mut i = input(&agent, Some(PROMPT), &[], Permissions::Bypass);
    i.running_as_root = true;
    assert_eq!(render(&i).unwrap().env.get("IS_SANDBOX").map(String::as_str), Some("1"));
    i.permissions = Permissions::Ask;
    assert!(!render(&i).unwrap().env.contains_key("IS_SANDBOX"));
}

#[test]
fn codex_argv() {
    let l = render_builtin("codex", Permissions::Bypass, &args(&["-m", "o3"]));
    assert_eq!(
        l.command,
        args(&[
            "codex",
            "-c",
            "check_for_update_on_startup=false",
            "-c",
            "features.daemon_auto_start=false",
            "-c",
            r#"projects."/data/ws/demo/fix-login".trust_level="trusted""#,
            "--dangerously-bypass-approvals-and-sandbox",
            PROMPT,
            "-m",
            "o3",
        ])
    );
    assert!(l.input.submit_delay >= std::time::Duration::from_millis(300), "Codex needs a pause before Enter");
    let ask = render_builtin("codex", Permissions::Ask, &[]);
    assert!(!ask.command.iter().any(|a| a.contains("dangerously")));
}

#[test]
fn codex_trust_key_escapes_the_path() {
    let agent = builtin_ref("codex");
    let mut i = input(&agent, None, &[], Permissions::Ask);
    i.workdir = Path::new(r#"/data/ws/we"ird\dir"#);
    let l = render(&i).unwrap();
    assert!(l.command.contains(&r#"projects."/data/ws/we\"ird\\dir".trust_level="trusted""#.to_string()));
}

#[test]
fn aider_argv() {
    let l = render_builtin("aider", Permissions::Bypass, &args(&["--model", "sonnet"]));
    assert_eq!(
        l.command,
        args(&[
            "aider",
            "--no-check-update",
            "--no-show-release-notes",
            "--no-analytics",
            "--no-gitignore",
            "--no-show-model-warnings",
            "--chat-history-file",
            "/data/sessions/fix-login/aider.chat.history.md",
            "--input-history-file",
            "/data/sessions/fix-login/aider.input.history",
            "--yes-always",
            "--model",
            "sonnet",
        ])
    );
    assert!(!l.command.iter().any(|a| a == "--no-auto-commits"), "aider commits its own edits");
    assert_eq!(l.initial_input.as_deref(), Some(PROMPT), "--message would exit after one reply");
}

#[test]
fn gemini_argv() {
    let l = render_builtin("gemini", Permissions::Bypass, &args(&["-m", "gemini-2.5-pro"]));
    assert_eq!(l.command, args(&["gemini", "--yolo", "--prompt-interactive", PROMPT, "-m", "gemini-2.5-pro"]));
    let ask = render_builtin("gemini", Permissions::Ask, &[]);
    assert_eq!(ask.command, args(&["gemini", "--prompt-interactive", PROMPT]));
}

#[test]
fn a_prompt_that_looks_like_a_flag_is_typed() {
    let agent = builtin_ref("claude-code");
    let l = render(&input(&agent, Some("--help me fix this"), &[], Permissions::Ask)).unwrap();
    assert_eq!(l.command, args(&["claude"]));
    assert_eq!(l.initial_input.as_deref(), Some("--help me fix this"));
}

#[test]
fn prompt_text_is_not_substituted_again() {
    let agent = builtin_ref("claude-code");
    let l = render(&input(&agent, Some("print {workdir} and {prompt}"), &[], Permissions::Ask)).unwrap();
    assert_eq!(l.command[1], "print {workdir} and {prompt}");
}

#[test]
fn custom_command_substitution() {
    let agent =
        AgentRef::Custom { command: args(&["./agent", "--file", "{promptFile}", "--msg={prompt}", "-C{workdir}"]) };
    let extra = args(&["--fast"]);
    let l = render(&input(&agent, Some(PROMPT), &extra, Permissions::Bypass)).unwrap();
    assert_eq!(
        l.command,
        args(&[
            "./agent",
            "--file",
            "/data/sessions/fix-login/prompt.md",
            &format!("--msg={PROMPT}"),
            "-C/data/ws/demo/fix-login",
            "--fast"
        ])
    );
    assert!(l.adapter.is_none() && l.env.is_empty() && l.initial_input.is_none());

    let none = render(&input(&agent, None, &[], Permissions::Ask)).unwrap();
    assert_eq!(none.command[3], "--msg=", "no prompt renders as the empty string");
}

#[test]
fn custom_command_without_placeholders_gets_the_prompt_typed() {
    let agent = AgentRef::Custom { command: args(&["bash"]) };
    let l = render(&input(&agent, Some(PROMPT), &[], Permissions::Bypass)).unwrap();
    assert_eq!(l.command, args(&["bash"]));
    assert_eq!(l.initial_input.as_deref(), Some(PROMPT));
}

#[test]
fn errors() {
    let empty = AgentRef::Custom { command: args(&[""]) };
    assert!(matches!(render(&input(&empty, None, &[], Permissions::Ask)), Err(AgentError::EmptyCommand)));
    let unknown = builtin_ref("nope");
    let err = render(&input(&unknown, None, &[], Permissions::Ask)).unwrap_err();
    assert!(matches!(err, AgentError::Unknown(ref name) if name == "nope"), "{err}");
}

#[test]
fn resume_commands() {
    let extra = args(&["--model", "sonnet"]);
    let claude = builtin_ref("claude-code");
    let l = render_resume(&input(&claude, Some(PROMPT), &extra, Permissions::Bypass)).unwrap().unwrap();
    assert_eq!(l.command, args(&["claude", "--continue", "--dangerously-skip-permissions", "--model", "sonnet"]));
    assert_eq!(l.initial_input, None);

    let codex = builtin_ref("codex");
    let l = render_resume(&input(&codex, None, &[], Permissions::Ask)).unwrap().unwrap();
    assert_eq!(l.command[l.command.len() - 2..], args(&["resume", "--last"])[..]);

    let grok = builtin_ref("grok");
    assert!(render_resume(&input(&grok, None, &[], Permissions::Ask)).unwrap().is_none());
    let custom = AgentRef::Custom { command: args(&["x"]) };
    assert!(render_resume(&input(&custom, None, &[], Permissions::Ask)).unwrap().is_none());
}

#[test]
fn codex_dollar_word_gets_a_trailing_space() {
    let codex = builtin("codex");
    assert_eq!(prepare_text(codex, "deploy with $release"), "deploy with $release ");
    assert_eq!(prepare_text(codex, "costs $5\n"), "costs $5 ");
    assert_eq!(prepare_text(codex, "plain text"), "plain text");
    assert_eq!(prepare_text(builtin("claude-code"), "with $release"), "with $release");
    assert_eq!(prepare_text(None, "with $release"), "with $release");
}

#[test]
fn aider_gets_multi_line_text_as_a_tagged_brace_block() {
    let aider = builtin("aider");
    assert_eq!(prepare_text(aider, "one line"), "one line");
    assert_eq!(prepare_text(aider, "first\n  second\n"), "{aoctl\nfirst\n  second\naoctl}");
    // A line that would close the block early changes the tag.
    assert_eq!(prepare_text(aider, "a\naoctl}\nb"), "{aoctl1\na\naoctl}\nb\naoctl1}");
    assert_eq!(prepare_text(aider, "{aoctl\n{aoctl1\nb"), "{aoctl2\n{aoctl\n{aoctl1\nb\naoctl2}");
    // Agents without it keep their text (Claude Code takes a bracketed paste).
    assert_eq!(prepare_text(builtin("claude-code"), "a\nb"), "a\nb");
}

#[test]
fn agents_that_take_an_mcp_server_on_the_command_line_get_aoctl_mcp() {
    let aoctl = Path::new("/opt/aoctl \"x\"/aoctl");
    let render_with = |name: &str, mcp: Option<&Path>| {
        let agent = AgentRef::Builtin(name.to_string());
        let mut i = input(&agent, Some(PROMPT), &[], Permissions::Bypass);
        i.mcp = mcp;
        (render(&i).unwrap().command, render_resume(&i).unwrap().map(|l| l.command))
    };
    let (claude, resumed) = render_with("claude-code", Some(aoctl));
    let config = claude.iter().find_map(|a| a.strip_prefix("--mcp-config=")).expect("--mcp-config=JSON");
    let doc: serde_json::Value = serde_json::from_str(config).unwrap();
    assert_eq!(doc["mcpServers"]["aoctl"]["command"], aoctl.to_str().unwrap());
    assert_eq!(doc["mcpServers"]["aoctl"]["args"], serde_json::json!(["mcp"]));
    assert_eq!(claude.last().map(String::as_str), Some(PROMPT), "the prompt stays the last argument");
    assert!(resumed.unwrap().iter().any(|a| a.starts_with("--mcp-config=")), "a resumed agent has it too");
    let (codex, _) = render_with("codex", Some(aoctl));
    assert!(codex.contains(&r#"mcp_servers.aoctl.command="/opt/aoctl \"x\"/aoctl""#.to_string()), "{codex:?}");
    assert!(codex.iter().any(|a| a.contains("env_vars") && a.contains("AOCTL_SESSION_TOKEN")), "{codex:?}");
    for name in ["claude-code", "codex", "aider"] {
        let (plain, _) = render_with(name, None);
        assert!(!plain.iter().any(|a| a.contains("mcp")), "{name}: no MCP server unless asked: {plain:?}");
    }
}
