//! Tests of reading agent screens, on screens shaped like the real Claude Code and Codex TUIs.

use std::time::Duration;

use aoctl_api::session::ActivityState;

use super::*;

const CLAUDE_IDLE: &str = "\
╭───────────────────────────────────────────────────╮
│ ✻ Welcome to Claude Code!                         │
│                                                   │
│   cwd: /data/ws/demo/fix-login                    │
╰───────────────────────────────────────────────────╯

> Fix the login redirect loop

● I'll look at the redirect handling in src/auth.ts.

● Update(src/auth.ts)
  ⎿  Updated src/auth.ts with 2 additions and 1 removal

● The loop is fixed and committed on demo/fix-login.

✻ Worked for 1m 12s

────────────────────────────────────────────────────────────────
❯\u{a0}
────────────────────────────────────────────────────────────────
  ⏵⏵ bypass permissions on (shift+tab to cycle)


";

const CLAUDE_WORKING: &str = "\
> Fix the login redirect loop

● I'll look at the redirect handling in src/auth.ts.

✻ Cogitating… (12s · ↑ 1.2k tokens · esc to interrupt)

────────────────────────────────────────────────────────────────
❯ 
────────────────────────────────────────────────────────────────
  ⏵⏵ bypass permissions on (shift+tab to cycle)
";

const CLAUDE_PERMISSION: &str = "\
● I'll clean the build output first.

────────────────────────────────────────────────────────────────
 Bash command

   rm -rf build
   Remove the build directory

 Do you want to proceed?
 ❯ 1. Yes
   2. Yes, and don't ask again for rm commands in /data/ws/demo/fix-login
   3. No, and tell Claude what to do differently (esc)

";

const CLAUDE_TRUST: &str = "\
────────────────────────────────────────────────────────────────────────────────
 Do you trust the files in this folder?

 /data/ws/demo/fix-login

 Claude Code may read, write, or execute files contained in this directory.
 This can pose security risks, so only use files, hooks, and bash commands from
  trusted sources.

 ❯ 1. Yes, proceed
   2. No, exit

 Enter to confirm · Esc to cancel
";

const CLAUDE_BYPASS_WARNING: &str = "\
 WARNING: Claude Code running in Bypass Permissions mode

 In Bypass Permissions mode, Claude Code will not ask for your approval before
 running potentially dangerous commands.

 ❯ 1. No, exit
   2. Yes, I accept

 Enter to confirm · Esc to exit
";

const CODEX_STARTING: &str = "\
╭──────────────────────────────────────────────╮
│ >_ OpenAI Codex (v0.17.0)                    │
│                                              │
│ model:     gpt-5-codex   /model to change    │
│ directory: /data/ws/demo/fix-login           │
╰──────────────────────────────────────────────╯

› Find and fix a bug in @filename
";

const CODEX_IDLE: &str = "\
╭──────────────────────────────────────────────╮
│ >_ OpenAI Codex (v0.17.0)                    │
│ directory: /data/ws/demo/fix-login           │
╰──────────────────────────────────────────────╯

› Fix the login redirect loop

• Edited src/auth.ts (+2 -1)

• The redirect loop is fixed; see the commit on demo/fix-login.

› Find and fix a bug in @filename

  97% context left · ? for shortcuts
";

const CODEX_WORKING: &str = "\
› Fix the login redirect loop

• Explored
  └ Read auth.ts

• Working (14s • esc to interrupt)

› Summarize recent commits

  98% context left · ? for shortcuts
";

const CODEX_APPROVAL: &str = "\
› Fix the login redirect loop

• I need to commit the fix.

  Would you like to run the following command?

  $ git commit -am \"Fix the login redirect loop\"

› 1. Yes, proceed
  2. Yes, and don't ask again for this command
  3. No, and tell Codex what to do differently esc

  Press enter to confirm or esc to cancel
";

const CODEX_TRUST: &str = "\
> You are running Codex in /data/ws/demo/fix-login

  Since this folder is version controlled, you may wish to allow Codex to work in this folder
  without asking for approval.

› 1. Yes, allow Codex to work in this folder without asking for approval
  2. No, ask me to approve edits and commands

  Press enter to continue
";

fn screen(text: &str) -> Screen<'_> {
    Screen { text, transcript_grew: false, unchanged_for: Duration::from_secs(3), exited: None }
}

fn classify_as(name: &str, s: &Screen) -> (ActivityState, String) {
    classify(builtin(name), s, Duration::from_secs(600))
}

#[test]
fn claude_idle_working_and_needs_input() {
    let (state, evidence) = classify_as("claude-code", &screen(CLAUDE_IDLE));
    assert_eq!(state, ActivityState::Idle, "{evidence}");
    assert!(evidence.starts_with('❯'), "{evidence}");

    let (state, evidence) = classify_as("claude-code", &screen(CLAUDE_WORKING));
    assert_eq!(state, ActivityState::Working);
    assert!(evidence.contains("esc to interrupt"), "{evidence}");

    let (state, evidence) = classify_as("claude-code", &screen(CLAUDE_PERMISSION));
    assert_eq!(state, ActivityState::NeedsInput);
    assert_eq!(evidence, "Do you want to proceed?");
}

/// What the controller sends to `screen`: (dialog, keys, wanted option, submits).
fn answer(name: &str, screen: &str) -> Option<(&'static str, Vec<&'static str>, Option<String>, bool)> {
    answer_dialog(builtin(name).unwrap(), screen).map(|a| (a.dialog, a.keys, a.option, a.submits))
}

fn chosen(
    dialog: &'static str,
    keys: &[&'static str],
    option: &str,
    submits: bool,
) -> Option<(&'static str, Vec<&'static str>, Option<String>, bool)> {
    Some((dialog, keys.to_vec(), Some(option.to_string()), submits))
}

#[test]
fn claude_dialogs_are_answered_by_what_they_say() {
    let claude = builtin("claude-code").unwrap();
    // Shaped like an older version, whose first option trusted the folder: Enter at once.
    assert_eq!(answer("claude-code", CLAUDE_TRUST), chosen("trust-folder", &["Enter"], "1. Yes, proceed", true));
    assert_eq!(
        answer("claude-code", CLAUDE_BYPASS_WARNING),
        chosen("bypass-warning", &["Down"], "2. Yes, I accept", false),
        "the highlight moves first; Enter only once the screen shows it on the wanted option"
    );
    let moved = CLAUDE_BYPASS_WARNING.replace(" ❯ 1. No, exit\n   2.", "   1. No, exit\n ❯ 2.");
    assert_eq!(answer("claude-code", &moved), chosen("bypass-warning", &["Enter"], "2. Yes, I accept", true));
    assert_eq!(answer("claude-code", CLAUDE_IDLE), None);
    assert_eq!(answer("claude-code", CLAUDE_PERMISSION), None, "tool approvals are left to people");
    assert!(!is_ready(claude, CLAUDE_TRUST));
    assert!(!is_ready(claude, CLAUDE_PERMISSION));
    assert!(is_ready(claude, CLAUDE_IDLE));
    assert_eq!(classify_as("claude-code", &screen(CLAUDE_TRUST)).0, ActivityState::NeedsInput);
}

/// Screens captured from the real CLIs in tmux (`capture-pane -p`), trailing blanks trimmed.
const REAL_CLAUDE_TRUST: &str = include_str!("screens/claude-2.1.332-trust.txt");
const REAL_CLAUDE_API_KEY: &str = include_str!("screens/claude-2.1.332-api-key.txt");
const REAL_CLAUDE_BYPASS: &str = include_str!("screens/claude-2.1.332-bypass.txt");
const REAL_CLAUDE_READY: &str = include_str!("screens/claude-2.1.332-ready.txt");
const REAL_CLAUDE_WORKING: &str = include_str!("screens/claude-2.1.332-working.txt");
const REAL_CODEX_TRUST: &str = include_str!("screens/codex-0.171.0-trust.txt");
const REAL_CODEX_IDLE: &str = include_str!("screens/codex-0.171.0-after-trust.txt");
const REAL_CODEX_WORKING: &str = include_str!("screens/codex-0.171.0-working.txt");
const REAL_AIDER_READY: &str = include_str!("screens/aider-0.86.2-ready.txt");
const REAL_COPILOT_TRUST: &str = include_str!("screens/copilot-1.0.102-trust.txt");

/// Copilot 1.0.102 offers a plain "Yes" first: chosen (not "Yes, and remember…", nor "No").
#[test]
fn copilot_trust_screen_is_answered_with_its_plain_yes() {
    assert_eq!(answer("copilot", REAL_COPILOT_TRUST), chosen("trust-folder", &["Enter"], "1. Yes", true));
    let moved = REAL_COPILOT_TRUST.replace("│ ❯ 1. Yes", "│   1. Yes").replace("│   3. No (Esc)", "│ ❯ 3. No (Esc)");
    assert_ne!(moved, REAL_COPILOT_TRUST);
    assert_eq!(answer("copilot", &moved), chosen("trust-folder", &["Up", "Up"], "1. Yes", false));
}

/// Regression: Claude Code 2.1.332's trust screen highlights "No, exit" first; Enter there made it
/// exit with "Claude Code didn't start because this folder isn't trusted".
#[test]
fn claude_2_1_332_trust_screen_is_answered_yes_not_with_a_blind_enter() {
    assert_eq!(
        answer("claude-code", REAL_CLAUDE_TRUST),
        chosen("trust-folder", &["Down"], "Yes, I trust this folder", false)
    );
    // The screen Claude Code showed after one Down.
    let moved = REAL_CLAUDE_TRUST.replace(" ❯ No, exit\n   Yes", "   No, exit\n ❯ Yes");
    assert_ne!(moved, REAL_CLAUDE_TRUST);
    assert_eq!(answer("claude-code", &moved), chosen("trust-folder", &["Enter"], "Yes, I trust this folder", true));
    assert!(!is_ready(builtin("claude-code").unwrap(), REAL_CLAUDE_TRUST), "no prompt is typed into the dialog");
}

#[test]
fn claude_2_1_332_api_key_and_bypass_screens() {
    assert_eq!(answer("claude-code", REAL_CLAUDE_API_KEY), chosen("api-key", &["Up"], "Yes", false));
    let moved = REAL_CLAUDE_API_KEY.replace("    Yes\n  ❯ No", "  ❯ Yes\n    No");
    assert_eq!(answer("claude-code", &moved), chosen("api-key", &["Enter"], "Yes", true));
    assert_eq!(answer("claude-code", REAL_CLAUDE_BYPASS), chosen("bypass-warning", &["Down"], "Yes, I accept", false));
    let moved = REAL_CLAUDE_BYPASS.replace("  ❯ No, exit\n    Yes", "    No, exit\n  ❯ Yes");
    assert_eq!(answer("claude-code", &moved), chosen("bypass-warning", &["Enter"], "Yes, I accept", true));
    let claude = builtin("claude-code").unwrap();
    assert!(!is_ready(claude, REAL_CLAUDE_API_KEY));
    assert!(!is_ready(claude, REAL_CLAUDE_BYPASS));
}

#[test]
fn claude_2_1_332_ready_and_working_screens() {
    let claude = builtin("claude-code").unwrap();
    assert_eq!(answer("claude-code", REAL_CLAUDE_READY), None);
    assert_eq!(answer("claude-code", REAL_CLAUDE_WORKING), None, "its own transcript is no dialog");
    assert!(is_ready(claude, REAL_CLAUDE_READY));
    let (state, evidence) = classify_as("claude-code", &screen(REAL_CLAUDE_WORKING));
    assert_eq!(state, ActivityState::Working, "{evidence}");
}

#[test]
fn codex_0_171_trust_screen_and_prompt() {
    assert_eq!(answer("codex", REAL_CODEX_TRUST), chosen("trust-folder", &["Enter"], "1. Trust and continue", true));
    let other_first =
        REAL_CODEX_TRUST.replace("› 1. Trust and continue\n  2. Back", "  1. Trust and continue\n› 2. Back");
    assert_eq!(answer("codex", &other_first), chosen("trust-folder", &["Up"], "1. Trust and continue", false));
    let codex = builtin("codex").unwrap();
    assert!(!is_ready(codex, REAL_CODEX_TRUST));
    assert_eq!(answer("codex", REAL_CODEX_IDLE), None);
    assert_eq!(answer("codex", REAL_CODEX_WORKING), None);
    assert!(is_ready(codex, REAL_CODEX_IDLE));
    assert_eq!(classify_as("codex", &screen(REAL_CODEX_IDLE)).0, ActivityState::Idle);
}

#[test]
fn aider_0_86_ready_screen_has_no_dialog() {
    let aider = builtin("aider").unwrap();
    assert_eq!(answer_dialog(aider, REAL_AIDER_READY), None);
    assert!(is_ready(aider, REAL_AIDER_READY));
    assert_eq!(classify_as("aider", &screen(REAL_AIDER_READY)).0, ActivityState::Idle);
}

#[test]
fn a_reverse_video_highlight_is_read_and_an_unknown_option_gets_no_answer() {
    let reverse = "Do you trust this folder?\n\n  \x1b[7mNo, leave\x1b[0m\n  Trust folder\n\n  Enter to select\n";
    static TRUST: [Dialog; 1] = [Dialog::choose("trust-folder", r"(?i)do you trust this folder", r"(?i)^trust folder")];
    let row = Adapter { name: "reverse", binary: "reverse", dialogs: &TRUST, ..Adapter::BASE };
    let gemini = &row;
    let a = answer_dialog(gemini, reverse).expect("an answer");
    assert_eq!((a.keys, a.option.as_deref(), a.submits), (vec!["Down"], Some("Trust folder"), false));
    let unknown = "Do you trust this folder?\n\n› 1. Maybe later\n  2. Never\n";
    assert_eq!(answer_dialog(gemini, unknown), None, "nothing is sent blind");
}

#[test]
fn an_answered_question_left_above_the_prompt_is_not_needs_input() {
    let answered = format!("{CLAUDE_PERMISSION}\n● Removed build/.\n\n────────\n❯ \n────────\n  ? for shortcuts\n");
    assert_eq!(classify_as("claude-code", &screen(&answered)).0, ActivityState::Idle);
}

#[test]
fn codex_idle_working_and_needs_input() {
    let (state, evidence) = classify_as("codex", &screen(CODEX_IDLE));
    assert_eq!(state, ActivityState::Idle);
    assert_eq!(evidence, "› Find and fix a bug in @filename");

    let (state, evidence) = classify_as("codex", &screen(CODEX_WORKING));
    assert_eq!(state, ActivityState::Working);
    assert_eq!(evidence, "• Working (14s • esc to interrupt)");

    let (state, evidence) = classify_as("codex", &screen(CODEX_APPROVAL));
    assert_eq!(state, ActivityState::NeedsInput);
    assert_eq!(evidence, "Would you like to run the following command?");
}

#[test]
fn codex_is_ready_only_once_its_footer_shows() {
    let codex = builtin("codex").unwrap();
    assert!(!is_ready(codex, CODEX_STARTING), "composer without footer");
    assert!(is_ready(codex, CODEX_IDLE));
    assert!(!is_ready(codex, CODEX_APPROVAL));
    assert_eq!(
        answer("codex", CODEX_TRUST),
        chosen(
            "trust-folder",
            &["Enter"],
            "1. Yes, allow Codex to work in this folder without asking for approval",
            true
        )
    );
    assert_eq!(answer("codex", CODEX_IDLE), None);
}

#[test]
fn a_screen_that_just_changed_is_working() {
    let s = Screen { transcript_grew: true, unchanged_for: Duration::from_millis(200), ..screen(CLAUDE_IDLE) };
    assert_eq!(classify_as("claude-code", &s), (ActivityState::Working, "the screen changed 200 ms ago".to_string()));
}

/// Regression: kimi 1.51 writes cursor hide/show sequences every second at its idle prompt; the
/// transcript grows, the screen stays the same, and the agent was never seen idle.
#[test]
fn output_that_leaves_the_screen_as_it_was_is_not_work() {
    let s = Screen { transcript_grew: true, ..screen(CLAUDE_IDLE) };
    assert_eq!(classify_as("claude-code", &s).0, ActivityState::Idle);
}

#[test]
fn idle_too_long_is_stuck() {
    let s = Screen { unchanged_for: Duration::from_secs(601), ..screen(CLAUDE_IDLE) };
    let (state, evidence) = classify_as("claude-code", &s);
    assert_eq!(state, ActivityState::Stuck);
    assert!(evidence.starts_with("idle, screen unchanged for 10m"), "{evidence}");
    assert_eq!(classify(builtin("claude-code"), &s, Duration::ZERO).0, ActivityState::Idle, "zero disables");

    let frozen = Screen { unchanged_for: Duration::from_secs(3600), ..screen(CODEX_WORKING) };
    assert_eq!(classify_as("codex", &frozen).0, ActivityState::Stuck);
}

#[test]
fn exited_wins() {
    let s = Screen { exited: Some(Some(1)), ..screen(CLAUDE_WORKING) };
    assert_eq!(classify_as("claude-code", &s), (ActivityState::Exited, "the agent exited with code 1".to_string()));
    let s = Screen { exited: Some(None), ..screen("") };
    assert_eq!(classify(None, &s, Duration::ZERO).0, ActivityState::Exited);
}

#[test]
fn custom_commands_use_generic_cues() {
    assert_eq!(classify(None, &screen("$ ./agent\nThinking ⠙\n"), Duration::ZERO).0, ActivityState::Working);
    let (state, evidence) = classify(None, &screen("Overwrite config.yml? [y/N]\n"), Duration::ZERO);
    assert_eq!((state, evidence.as_str()), (ActivityState::NeedsInput, "Overwrite config.yml? [y/N]"));
    assert_eq!(classify(None, &screen("done\n> \n"), Duration::ZERO).0, ActivityState::Idle);
}

#[test]
fn aider_prompt_and_questions() {
    let aider = builtin("aider").unwrap();
    let asking = "Aider v0.86.1\nsrc/auth.ts\nAdd file to the chat? (Y)es/(N)o/(D)on't ask again [Yes]:\n";
    assert_eq!(classify(Some(aider), &screen(asking), Duration::ZERO).0, ActivityState::NeedsInput);
    let ready = "Aider v0.86.1\nMain model: sonnet with diff edit format\nRepo-map: using 4096 tokens\n>\n";
    assert!(is_ready(aider, ready));
    assert!(!is_ready(aider, asking));
}

#[test]
fn escape_sequences_and_long_lines_are_handled() {
    let text = format!("\x1b[1m{}\x1b[0m esc to interrupt\r\n", "x".repeat(500));
    let (state, evidence) = classify(None, &screen(&text), Duration::ZERO);
    assert_eq!(state, ActivityState::Working);
    assert_eq!(evidence.chars().count(), 200);
}

/// Regression: a model answer that starts with "Working" (shown as `• Working on …`) kept a
/// Codex session working after the answer ended.
#[test]
fn codex_answer_text_starting_with_working_is_not_a_working_cue() {
    let answered = REAL_CODEX_IDLE.replace("• The file is written.", "• Working on it slowly. Done.");
    assert_ne!(answered, REAL_CODEX_IDLE);
    assert_eq!(classify_as("codex", &screen(&answered)).0, ActivityState::Idle);
}

/// Regression: aider shows no cue while an answer streams, and two looks between two chunks saw
/// it idle mid-stream.
#[test]
fn output_a_moment_ago_is_still_working() {
    let s = Screen { unchanged_for: Duration::from_millis(300), ..screen(REAL_AIDER_READY) };
    assert_eq!(classify_as("aider", &s).0, ActivityState::Working);
    let s = Screen { unchanged_for: Duration::from_secs(2), ..screen(REAL_AIDER_READY) };
    assert_eq!(classify_as("aider", &s).0, ActivityState::Idle);
}
