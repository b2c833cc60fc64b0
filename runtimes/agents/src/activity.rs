//! Reading an agent's screen: its activity (working, idle, needs-input, stuck, exited), the
//! dialogs the controller answers by itself, and whether it is ready for typed input.
//!
//! Rules, in order: an exited agent is exited; a needs-input cue in the last lines of the screen,
//! with no prompt line of the agent's below it, is needs-input; a screen changed in the last
//! 1.5 s or a working cue (spinner, "esc to interrupt") is working; anything else is idle. An idle screen unchanged
//! for longer than `stuck_after` is stuck, and so is a working cue frozen that long without the
//! transcript growing (a live spinner or timer changes the screen). A zero `stuck_after` never
//! reports stuck.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use aoctl_api::session::ActivityState;
use parking_lot::Mutex;
use regex::Regex;

use super::adapter::{Adapter, Dialog};
use super::table::{all, PROMPT_LINE};

/// How many non-blank lines from the bottom are searched for working cues.
const WORKING_LINES: usize = 10;
/// How many non-blank lines from the bottom are searched for questions, ready cues and dialogs.
const QUESTION_LINES: usize = 30;
/// Output this recent counts as work in progress, for agents (aider) whose screen shows no cue
/// while a model's answer streams in.
const RECENT_OUTPUT: Duration = Duration::from_millis(1500);
/// Evidence is cut to this many characters.
const EVIDENCE_CHARS: usize = 200;

/// A numbered menu: a selected option (`❯ 1. Yes`) next to another option (`2. No`).
const MENU: &str = concat!(
    r"(?m)^[ \t│]*[❯›●▶][ \t]*\d+\.[ \t]+\S[^\n]*(?:\n[^\n]*){0,8}?\n[ \t│]*\d+\.[ \t]+\S",
    r"|^[ \t│]*\d+\.[ \t]+\S[^\n]*(?:\n[^\n]*){0,8}?\n[ \t│]*[❯›●▶][ \t]*\d+\.[ \t]+\S",
);

/// Cues every agent shares.
const GENERIC_WORKING: &[&str] = &[r"(?i)\besc to interrupt\b", r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]"];
const GENERIC_NEEDS_INPUT: &[&str] = &[
    MENU,
    r"(?i)\bdo you want to (?:proceed|continue|allow|run|make|create|apply|edit)\b",
    r"(?i)[(\[](?:y/n|yes/no)[)\]]",
];
const GENERIC_READY: &[&str] = &[PROMPT_LINE, r"(?i)type (?:a|your) message"];

/// What the controller saw of a running agent.
#[derive(Clone, Copy, Debug)]
pub struct Screen<'a> {
    /// The visible screen as plain text.
    pub text: &'a str,
    /// The transcript grew since the last look.
    pub transcript_grew: bool,
    /// How long the screen has not changed.
    pub unchanged_for: Duration,
    /// `Some(code)` once the agent's process ended.
    pub exited: Option<Option<i32>>,
}

/// Classifies the agent's activity; the evidence is the matching line or a short reason.
pub fn classify(adapter: Option<&Adapter>, screen: &Screen, stuck_after: Duration) -> (ActivityState, String) {
    if let Some(code) = screen.exited {
        return match code {
            Some(c) => (ActivityState::Exited, format!("the agent exited with code {c}")),
            None => (ActivityState::Exited, "the agent exited".to_string()),
        };
    }
    if let Some(line) = adapter.and_then(|a| logged_out(a, screen.text)) {
        return (ActivityState::NeedsInput, line);
    }
    let cues = compiled(adapter);
    let text = clean(screen.text);
    let lines = tail(&text, QUESTION_LINES);
    if let Some(evidence) = question(&cues, &lines) {
        return (ActivityState::NeedsInput, evidence);
    }
    let stuck = !stuck_after.is_zero() && screen.unchanged_for > stuck_after;
    let recent = tail(&text, WORKING_LINES);
    if let Some(line) = last_match_line(&cues.working, &recent) {
        if stuck && !screen.transcript_grew {
            let why = format!("working cue unchanged for {}: {line}", human(screen.unchanged_for));
            return (ActivityState::Stuck, evidence(&why));
        }
        return (ActivityState::Working, evidence(&line));
    }
    // A screen that changed this recently is work in progress: output streams in (aider shows no
    // cue while it does), and two looks in quick succession can fall between two chunks. Output
    // that leaves the screen as it was (a cursor shown and hidden, as kimi does every second) is
    // no work.
    if screen.unchanged_for < RECENT_OUTPUT {
        return (ActivityState::Working, format!("the screen changed {} ms ago", screen.unchanged_for.as_millis()));
    }
    let idle = last_match_line(&cues.idle, &lines)
        .or_else(|| last_match_line(&cues.ready, &lines))
        .or_else(|| lines.lines().last().map(str::to_string))
        .unwrap_or_else(|| "blank screen".to_string());
    if stuck {
        let why = format!("idle, screen unchanged for {}: {idle}", human(screen.unchanged_for));
        return (ActivityState::Stuck, evidence(&why));
    }
    (ActivityState::Idle, evidence(&idle))
}

/// The line of the agent's logged-out or set-up screen (its row's [`Login::screens`]) when the
/// last lines of `screen` show one. Unlike a question, it counts even with the agent's prompt
/// below it: several CLIs sit at their prompt saying "use /login".
///
/// [`Login::screens`]: super::adapter::Login::screens
pub fn logged_out(adapter: &Adapter, screen: &str) -> Option<String> {
    let text = clean(screen);
    let lines = tail(&text, QUESTION_LINES);
    adapter.login.screens.iter().filter_map(|p| regex(p)?.find_iter(&lines).last()).max_by_key(|m| m.end()).map(|m| {
        let start = lines[..m.start()].rfind('\n').map_or(0, |i| i + 1);
        let end = lines[m.end()..].find('\n').map_or(lines.len(), |i| m.end() + i);
        evidence(lines[start..end].trim())
    })
}

/// What the controller sends to a dialog on screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DialogAnswer {
    /// The dialog's name, for events.
    pub dialog: &'static str,
    /// The keys to send now, in tmux key syntax.
    pub keys: Vec<&'static str>,
    /// For a dialog answered by choice, the wanted option's text as on screen.
    pub option: Option<String>,
    /// True when the keys submit the answer (Enter with the wanted option highlighted, or a
    /// dialog answered by keys); false when they only move the highlight, so the next screen
    /// must be read before anything is submitted.
    pub submits: bool,
}

/// The dialog on screen the controller answers itself, and what to send to it now. A dialog
/// answered by choice whose menu cannot be read, or whose wanted option is not on screen, gets no
/// answer: nothing is sent blind.
pub fn answer_dialog(adapter: &Adapter, screen: &str) -> Option<DialogAnswer> {
    let cues = compiled(Some(adapter));
    let text = clean(screen);
    let lines = tail(&text, QUESTION_LINES);
    let raw = raw_lines(screen);
    for (re, d) in &cues.dialogs {
        match d.choose {
            None => {
                if last_live_match(re, &cues, &lines).is_some() {
                    return Some(DialogAnswer { dialog: d.name, keys: d.keys.to_vec(), option: None, submits: true });
                }
            }
            Some(option) => {
                if let Some(answer) = choose(re, option, d, &cues, &raw) {
                    return Some(answer);
                }
            }
        }
    }
    None
}

/// Whether typed input is accepted now: the agent's ready cue shows and no dialog or question is
/// in the way.
pub fn is_ready(adapter: &Adapter, screen: &str) -> bool {
    let cues = compiled(Some(adapter));
    let text = clean(screen);
    let lines = tail(&text, QUESTION_LINES);
    let dialog_shown = cues.dialogs.iter().any(|(re, _)| last_live_match(re, &cues, &lines).is_some());
    if dialog_shown || answer_dialog(adapter, screen).is_some() || question(&cues, &lines).is_some() {
        return false;
    }
    cues.ready.iter().any(|re| re.is_match(&lines))
}

/// One line of the screen: its text without escape sequences, and whether any of it is shown in
/// reverse video.
struct RawLine {
    text: String,
    reverse: bool,
}

/// The last lines of the screen, blank lines kept (they end a menu), trailing blank lines dropped.
fn raw_lines(screen: &str) -> Vec<RawLine> {
    static REVERSE: OnceLock<Regex> = OnceLock::new();
    let reverse = REVERSE.get_or_init(|| Regex::new(r"\x1b\[(?:[0-9:;]*;)?7(?:[;:][0-9:;]*)?m").expect("SGR pattern"));
    let mut lines: Vec<RawLine> = screen
        .split('\n')
        .map(|l| RawLine {
            reverse: reverse.is_match(l),
            text: clean(l).trim_end_matches(['\r', ' ', '\t']).to_string(),
        })
        .collect();
    while lines.last().is_some_and(|l| l.text.trim().is_empty()) {
        lines.pop();
    }
    let keep = QUESTION_LINES + 10;
    lines.split_off(lines.len().saturating_sub(keep))
}

/// A highlighted option: leading blanks or box lines, a marker, then the option's text.
const HIGHLIGHT: &str = r"^([ \t│┃|]*)([❯›>▶])[ \t]+(\S.*)$";
/// The `1. ` of a numbered option.
const NUMBER: &str = r"^\d+\.[ \t]+";

/// An option of a menu on screen: its line and its text (without marker or number).
struct MenuOption {
    line: usize,
    text: String,
}

/// Where the option text of a line starts, in characters, if the line is an option indented to
/// `col` (nothing but blanks and box lines before it).
fn option_at(line: &str, col: usize) -> Option<String> {
    let prefix: String = line.chars().take(col).collect();
    if prefix.chars().count() < col || !prefix.chars().all(|c| matches!(c, ' ' | '\t' | '│' | '┃' | '|')) {
        return None;
    }
    let rest: String = line.chars().skip(col).collect();
    (!rest.is_empty() && !rest.starts_with([' ', '\t'])).then(|| rest.trim_end_matches([' ', '│', '┃']).to_string())
}

/// The menu around the highlighted line `h` (whose text starts at column `col`): the options and
/// the index of the highlighted one. Options are the neighbouring lines indented the same, up to
/// a blank line or a line indented less; when the highlighted option is numbered, only numbered
/// lines are options. Deeper-indented lines are descriptions of the option above.
fn menu(raw: &[RawLine], h: usize, col: usize, text: &str) -> (Vec<MenuOption>, usize) {
    let number = regex(NUMBER);
    let numbered = number.is_some_and(|re| re.is_match(text));
    let is_option = |i: usize| -> Option<String> {
        let t = option_at(&raw[i].text, col)?;
        (!numbered || number.is_some_and(|re| re.is_match(&t))).then_some(t)
    };
    let deeper = |i: usize| {
        option_at(&raw[i].text, col).is_none() && {
            let lead = raw[i].text.chars().take_while(|c| matches!(c, ' ' | '\t' | '│' | '┃' | '|')).count();
            lead > col && !raw[i].text.trim().is_empty()
        }
    };
    let mut above = vec![];
    let mut i = h;
    while i > 0 {
        i -= 1;
        if let Some(t) = is_option(i) {
            above.push(MenuOption { line: i, text: t });
        } else if !deeper(i) {
            break;
        }
    }
    above.reverse();
    let index = above.len();
    let mut options = above;
    options.push(MenuOption { line: h, text: text.to_string() });
    for i in h + 1..raw.len() {
        if let Some(t) = is_option(i) {
            options.push(MenuOption { line: i, text: t });
        } else if !deeper(i) {
            break;
        }
    }
    (options, index)
}

/// The highlighted line nearest the bottom, at or after `from`: its index, the column its text
/// starts at and the text.
fn highlighted(raw: &[RawLine], from: usize) -> Option<(usize, usize, String)> {
    let marker = regex(HIGHLIGHT)?;
    (from..raw.len()).rev().find_map(|i| {
        if let Some(c) = marker.captures(&raw[i].text) {
            let col = c[1].chars().count() + c[2].chars().count() + {
                let after = &raw[i].text[c.get(2).map_or(0, |m| m.end())..];
                after.chars().take_while(|ch| *ch == ' ' || *ch == '\t').count()
            };
            return Some((i, col, c[3].trim_end_matches([' ', '│', '┃']).to_string()));
        }
        if raw[i].reverse && !raw[i].text.trim().is_empty() {
            let col = raw[i].text.chars().take_while(|c| c.is_whitespace()).count();
            return Some((i, col, raw[i].text.trim().to_string()));
        }
        None
    })
}

/// The answer to a dialog answered by choice, when its pattern shows near a readable menu that
/// holds the wanted option and no prompt of the agent is below the menu.
fn choose(
    re: &Regex,
    option: &'static str,
    d: &'static Dialog,
    cues: &Compiled,
    raw: &[RawLine],
) -> Option<DialogAnswer> {
    let wanted = regex(option)?;
    let joined: Vec<&str> = raw.iter().map(|l| l.text.as_str()).collect();
    let joined = joined.join("\n");
    let m = re.find_iter(&joined).last()?;
    let match_line = joined[..m.start()].matches('\n').count();
    let (h, col, text) = highlighted(raw, match_line.saturating_sub(12))?;
    let (options, current) = menu(raw, h, col, &text);
    let last_line = options.last().map_or(h, |o| o.line);
    if last_line + 12 < match_line {
        return None;
    }
    let below: Vec<&str> = raw[last_line + 1..].iter().map(|l| l.text.as_str()).collect();
    let below = below.join("\n");
    if cues.idle.iter().chain(&cues.ready).any(|p| p.is_match(&below)) {
        return None;
    }
    let strip = |t: &str| regex(NUMBER).map_or(t.to_string(), |n| n.replace(t, "").into_owned());
    let target = options.iter().position(|o| wanted.is_match(&strip(&o.text)))?;
    let keys = match target as isize - current as isize {
        0 => vec!["Enter"],
        n if n > 0 => vec!["Down"; n as usize],
        n => vec!["Up"; n.unsigned_abs()],
    };
    let submits = target == current;
    Some(DialogAnswer { dialog: d.name, keys, option: Some(options[target].text.clone()), submits })
}

/// A regular expression from the table, compiled once.
pub(super) fn regex(pattern: &'static str) -> Option<&'static Regex> {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, Option<&'static Regex>>>> = OnceLock::new();
    let mut cache = CACHE.get_or_init(Default::default).lock();
    *cache.entry(pattern).or_insert_with(|| match Regex::new(pattern) {
        Ok(re) => Some(Box::leak(Box::new(re))),
        Err(e) => {
            tracing::error!(pattern, error = %e, "an agent screen pattern does not compile");
            None
        }
    })
}

/// An adapter's cues with the generic ones added.
#[derive(Clone)]
pub(super) struct Compiled {
    ready: Vec<&'static Regex>,
    idle: Vec<&'static Regex>,
    working: Vec<&'static Regex>,
    needs_input: Vec<&'static Regex>,
    dialogs: Vec<(&'static Regex, &'static Dialog)>,
}

fn compile(patterns: &[&'static str]) -> Vec<&'static Regex> {
    patterns.iter().filter_map(|p| regex(p)).collect()
}

pub(super) fn compiled(adapter: Option<&Adapter>) -> Cow<'static, Compiled> {
    static TABLE: OnceLock<Vec<Compiled>> = OnceLock::new();
    static GENERIC: OnceLock<Compiled> = OnceLock::new();
    match adapter {
        None => Cow::Borrowed(GENERIC.get_or_init(|| build(None))),
        Some(a) => match all().iter().position(|row| std::ptr::eq(row, a)) {
            Some(i) => Cow::Borrowed(&TABLE.get_or_init(|| all().iter().map(|r| build(Some(r))).collect())[i]),
            None => Cow::Owned(build(Some(a))),
        },
    }
}

fn build(adapter: Option<&Adapter>) -> Compiled {
    let cues = adapter.map(|a| a.cues).unwrap_or(super::adapter::Cues::NONE);
    let ready = if cues.ready.is_empty() { GENERIC_READY } else { cues.ready };
    let dialogs: &'static [Dialog] = adapter.map_or(&[], |a| a.dialogs);
    Compiled {
        ready: compile(ready),
        idle: compile(cues.idle),
        working: compile(&[cues.working, GENERIC_WORKING].concat()),
        needs_input: compile(&[cues.needs_input, GENERIC_NEEDS_INPUT].concat()),
        dialogs: dialogs.iter().filter_map(|d| regex(d.pattern).map(|re| (re, d))).collect(),
    }
}

/// The question the agent is waiting on, if one is live at the bottom of the screen.
fn question(cues: &Compiled, lines: &str) -> Option<String> {
    let (start, _) = cues.needs_input.iter().filter_map(|re| last_live_match(re, cues, lines)).max_by_key(|m| m.1)?;
    let before: Vec<&str> = lines[..start].lines().collect();
    let first = lines[start..].lines().next().unwrap_or_default();
    let asked = before.iter().rev().take(6).find(|l| l.trim_end().ends_with('?')).copied();
    Some(evidence(asked.filter(|_| !first.trim_end().ends_with('?')).unwrap_or(first)))
}

/// The last match of `re` whose lines are not followed by the agent's own prompt (which would
/// make it an answered question left in scrollback). Returns the start of the match's first line
/// and the match end.
fn last_live_match(re: &Regex, cues: &Compiled, lines: &str) -> Option<(usize, usize)> {
    let m = re.find_iter(lines).last()?;
    let line_start = lines[..m.start()].rfind('\n').map_or(0, |i| i + 1);
    let after = lines[m.end()..].find('\n').map_or("", |i| &lines[m.end() + i + 1..]);
    let prompt_below = cues.idle.iter().chain(&cues.ready).any(|p| p.is_match(after));
    (!prompt_below).then_some((line_start, m.end()))
}

/// The trimmed line holding the last match of any of `patterns`.
fn last_match_line(patterns: &[&'static Regex], lines: &str) -> Option<String> {
    let m = patterns.iter().filter_map(|re| re.find_iter(lines).last()).max_by_key(|m| m.start())?;
    let start = lines[..m.start()].rfind('\n').map_or(0, |i| i + 1);
    let end = lines[m.start()..].find('\n').map_or(lines.len(), |i| m.start() + i);
    Some(lines[start..end].trim().to_string())
}

/// The screen without escape sequences or carriage returns.
fn clean(text: &str) -> Cow<'_, str> {
    static ESC: OnceLock<Regex> = OnceLock::new();
    let esc = ESC.get_or_init(|| {
        Regex::new(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])").expect("escape pattern")
    });
    if !text.contains('\x1b') && !text.contains('\r') {
        return Cow::Borrowed(text);
    }
    Cow::Owned(esc.replace_all(text, "").replace("\r\n", "\n").replace('\r', "\n"))
}

/// The last `n` non-blank lines, right-trimmed, joined by newlines.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Trimmed and cut to [`EVIDENCE_CHARS`] characters.
fn evidence(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(EVIDENCE_CHARS) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// `45s`, `12m`, `1h5m`.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, _) => format!("{m}m"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}
