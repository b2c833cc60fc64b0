//! Usage and rate limits an agent reports on its screen: which line says so, and when the limit
//! resets, as a UTC instant. Pure: the screen, the current time and the zone of clock times that
//! name none are passed in.
//!
//! The messages, per agent family, as the CLIs print them (quoted from their issue trackers):
//! - Claude Code: "Claude usage limit reached. Your limit will reset at 3pm (America/Santiago)."
//!   (anthropics/claude-code#9236, #15064), "5-hour limit reached ∙ resets 5am" (#6392, #7892),
//!   "You've hit your limit · resets 10pm (America/New_York)" (#22946), "You've hit your session
//!   limit · resets 8:30pm (Asia/Tokyo)" (#77082), and the raw form "Claude AI usage limit
//!   reached|1762952400" with the reset as Unix seconds (#11429). With an API key:
//!   `API Error: 429 {"type":"error","error":{"type":"rate_limit_error",…}}` (#2087).
//!   "Approaching usage limit" is a warning, not a limit (github/spec-kit#693).
//! - Codex: "■ You've hit your usage limit. Upgrade to Pro (…) or try again in 5 days 22 hours 11
//!   minutes." (openai/codex#3899, #3124) and "…, or try again at Jul 5th, 2026 8:19 PM."
//!   (openai/codex#26668); the server's error body is `{"type":"usage_limit_reached", …,
//!   "resets_at":1775317531,"resets_in_seconds":602705}`.
//! - Aider (litellm): "litellm.RateLimitError: … 429 … Resource has been exhausted (e.g. check
//!   quota)." (Aider-AI/aider#764), which aider itself retries ("Retrying in 0.5 seconds...").
//! - Any agent: "rate limit exceeded", "quota exceeded", "429 Too Many Requests".
//!
//! A limit counts only near the bottom of the screen and only when no resume message of the
//! controller (it carries [`RESUME_MARKER`]) was typed after it, so a message left in scrollback
//! after a resume is not read as a new limit. A reset that cannot be read gives a conservative
//! retry ([`FALLBACK_RETRY`]), and the evidence says so.

use std::sync::OnceLock;
use std::time::Duration;

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveTime, TimeZone, Utc};
use regex::Regex;

use super::adapter::Adapter;

/// How many non-blank lines from the bottom of the screen are searched for a limit message.
const LIMIT_LINES: usize = 12;
/// When the reset cannot be read from the message, the agent is resumed after this long.
pub(crate) const FALLBACK_RETRY: Duration = Duration::from_secs(15 * 60);
/// Starts the message that resumes an agent after its limit reset; a limit shown above a line
/// holding it is an old one.
pub const RESUME_MARKER: &str = "[aoctl:rate-limit:";
/// Evidence is cut to this many characters.
const EVIDENCE_CHARS: usize = 200;

/// A limit the agent reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    /// The screen line that says so, trimmed.
    pub line: String,
    /// When the limit resets.
    pub resets_at: DateTime<Utc>,
    /// Whether `resets_at` was read from the message (else it is `now` + [`FALLBACK_RETRY`]).
    pub(crate) reset_known: bool,
    /// The agent retries by itself (an API rate limit it backs off from): nothing needs typing
    /// at the reset.
    pub agent_retries: bool,
}

impl Limit {
    /// The line and the reset, for `status.activity.evidence`.
    pub fn evidence(&self) -> String {
        let when = self.resets_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        if self.reset_known {
            format!("{} (resets at {when})", self.line)
        } else {
            let mins = FALLBACK_RETRY.as_secs() / 60;
            format!("{} (reset time not stated; retrying in {mins} minutes, at {when})", self.line)
        }
    }
}

/// The agent families whose messages differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Claude,
    Codex,
    Aider,
    Generic,
}

fn families(adapter: Option<&Adapter>) -> &'static [Family] {
    match adapter.map(|a| a.name) {
        Some("claude-code") => &[Family::Claude, Family::Generic],
        Some("codex") => &[Family::Codex, Family::Generic],
        Some("aider") => &[Family::Aider, Family::Generic],
        Some(_) => &[Family::Generic],
        // A custom command may wrap any of the CLIs.
        None => &[Family::Claude, Family::Codex, Family::Aider, Family::Generic],
    }
}

fn patterns(f: Family) -> &'static [&'static str] {
    match f {
        Family::Claude => &[
            r"(?i)\bclaude(?: ai)? usage limit reached",
            r"(?i)\b\d+-hour limit reached",
            r"(?i)\b(?:weekly|opus|sonnet|daily|monthly) limit reached",
            r"(?i)\byou'?ve hit your (?:\w+ )?limit\b",
            r"(?i)\brate_limit_error\b",
        ],
        Family::Codex => &[
            r"(?i)\byou'?ve hit your (?:\w+ )?limit\b",
            r"(?i)\busage_limit_reached\b",
            r"(?i)\b429 too many requests\b",
        ],
        Family::Aider => &[r"(?i)\blitellm\.ratelimiterror\b", r"(?i)\bresource has been exhausted\b"],
        Family::Generic => &[
            r"(?i)\b(?:usage|rate) limit (?:reached|exceeded|hit)\b",
            r"(?i)\brate[ _-]?limited\b",
            r"(?i)\bquota (?:exceeded|exhausted)\b|\bexceeded your (?:current )?quota\b",
            r"(?i)\bresource_exhausted\b",
            r"(?i)\btoo many requests\b",
            r"(?i)\bratelimiterror\b",
        ],
    }
}

fn compiled(families: &[Family]) -> Vec<&'static Regex> {
    static ALL: OnceLock<Vec<(Family, Vec<Regex>)>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        [Family::Claude, Family::Codex, Family::Aider, Family::Generic]
            .into_iter()
            .map(|f| (f, patterns(f).iter().map(|p| Regex::new(p).expect("limit pattern")).collect()))
            .collect()
    });
    all.iter().filter(|(f, _)| families.contains(f)).flat_map(|(_, v)| v.iter()).collect()
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("reset pattern"))
}

/// The limit the agent reports at the bottom of `screen`, if any. `local` is the zone of clock
/// times that name none (the agent's machine's).
pub fn detect(adapter: Option<&Adapter>, screen: &str, now: DateTime<Utc>, local: FixedOffset) -> Option<Limit> {
    let lines: Vec<&str> = screen.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    let lines = &lines[lines.len().saturating_sub(LIMIT_LINES)..];
    let res = compiled(families(adapter));
    let at = lines.iter().rposition(|l| res.iter().any(|r| r.is_match(l)))?;
    if lines[at + 1..].iter().any(|l| l.contains(RESUME_MARKER)) || lines[at].contains(RESUME_MARKER) {
        return None;
    }
    // A message may wrap: the reset can be on the next lines ("Your limit will reset\n at 3pm").
    let mut text = lines[at].trim().to_string();
    for l in lines[at + 1..].iter().take(2) {
        text.push(' ');
        text.push_str(l.trim());
    }
    let retries = {
        static RETRY: OnceLock<Regex> = OnceLock::new();
        re(&RETRY, r"(?i)\bretrying in\b|\battempt \d+\s*/\s*\d+|\bretry(?:ing)? \d+/\d+")
    }
    .is_match(&text);
    let (resets_at, reset_known) = match parse_reset(&text, now, local) {
        Some(t) => (t, true),
        None => (now + chrono::Duration::from_std(FALLBACK_RETRY).expect("fits"), false),
    };
    Some(Limit { line: cut(lines[at].trim()), resets_at, reset_known, agent_retries: retries })
}

fn cut(s: &str) -> String {
    match s.char_indices().nth(EVIDENCE_CHARS) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// When a limit message says it resets: Unix seconds (`|1762952400`, `"resets_at":…`), a relative
/// duration ("try again in 2 days 3 hours 12 minutes", "retrying in 5 seconds"), a date and time
/// ("try again at Jul 5th, 2026 8:19 PM") or a clock time, with or without a zone ("resets 3pm
/// (America/New_York)", "reset at 1pm (Etc/GMT+5)", "try again at 6:00 PM"). A clock time is its
/// next occurrence after `now`. `None` when the text states no reset this reads.
pub(crate) fn parse_reset(text: &str, now: DateTime<Utc>, local: FixedOffset) -> Option<DateTime<Utc>> {
    static EPOCH: OnceLock<Regex> = OnceLock::new();
    static IN_SECS: OnceLock<Regex> = OnceLock::new();
    static RELATIVE: OnceLock<Regex> = OnceLock::new();
    static PART: OnceLock<Regex> = OnceLock::new();
    static DATED: OnceLock<Regex> = OnceLock::new();
    static CLOCK: OnceLock<Regex> = OnceLock::new();

    let epoch = re(&EPOCH, r#"(?i)(?:\||\bresets_at"?\s*[:=]\s*"?)(\d{10})\b"#);
    if let Some(c) = epoch.captures(text) {
        return Utc.timestamp_opt(c[1].parse().ok()?, 0).single();
    }
    let in_secs = re(&IN_SECS, r#"(?i)\bresets_in_seconds"?\s*[:=]\s*(\d+)"#);
    if let Some(c) = in_secs.captures(text) {
        return Some(now + chrono::Duration::seconds(c[1].parse().ok()?));
    }
    let unit = r"(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)";
    let relative = re(
        &RELATIVE,
        &format!(
            r"(?i)\b(?:try again|retry(?:ing)?|resets?|available again|wait)(?: in| after)\s+((?:\d+(?:\.\d+)?\s*{unit}\b[\s,]*(?:and\s+)?)+)"
        ),
    );
    if let Some(c) = relative.captures(text) {
        let part = re(&PART, &format!(r"(?i)(\d+(?:\.\d+)?)\s*({unit})\b"));
        let mut secs = 0.0f64;
        for p in part.captures_iter(&c[1]) {
            let n: f64 = p[1].parse().ok()?;
            let u = p[2].to_ascii_lowercase();
            secs += n * match u.chars().next() {
                Some('d') => 86_400.0,
                Some('h') => 3_600.0,
                Some('m') => 60.0,
                _ => 1.0,
            };
        }
        return Some(now + chrono::Duration::milliseconds((secs * 1000.0).ceil() as i64));
    }
    let zone = r"(?:\s*\(([A-Za-z_]+(?:/[A-Za-z0-9_+\-]+)*)\)|\s+(UTC|GMT))?";
    let dated = re(
        &DATED,
        &format!(
            r"(?i)\b(?:try again at|resets?(?: at| on)?|until)\s+(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s*(?:(\d{{4}}),?)?\s*(?:at\s+)?(\d{{1,2}})(?::(\d{{2}}))?\s*([ap]\.?m\.?)?{zone}"
        ),
    );
    if let Some(c) = dated.captures(text) {
        let month = month_number(&c[1])?;
        let day: u32 = c[2].parse().ok()?;
        let (h, m) = hour_minute(&c[4], c.get(5).map(|m| m.as_str()), c.get(6).map(|m| m.as_str()))?;
        let tz_name = c.get(7).or(c.get(8)).map(|m| m.as_str());
        let year = match c.get(3) {
            Some(y) => y.as_str().parse().ok()?,
            None => now.year(),
        };
        let at = in_zone(tz_name, local, NaiveDate::from_ymd_opt(year, month, day)?.and_time(time(h, m)?))?;
        // A date without a year that has passed means next year.
        if c.get(3).is_none() && at < now - chrono::Duration::days(1) {
            let next = NaiveDate::from_ymd_opt(year + 1, month, day)?.and_time(time(h, m)?);
            return in_zone(tz_name, local, next);
        }
        return Some(at);
    }
    let clock = re(
        &CLOCK,
        &format!(
            r"(?i)\b(?:try again at|resets?(?: at)?|reset at|until)\s+(\d{{1,2}})(?::(\d{{2}}))?\s*([ap]\.?m\.?)?{zone}"
        ),
    );
    if let Some(c) = clock.captures(text) {
        let ampm = c.get(3).map(|m| m.as_str());
        // A bare number with neither minutes nor am/pm is not a clock time ("resets 5").
        if c.get(2).is_none() && ampm.is_none() {
            return None;
        }
        let (h, m) = hour_minute(&c[1], c.get(2).map(|m| m.as_str()), ampm)?;
        let tz_name = c.get(4).or(c.get(5)).map(|m| m.as_str());
        return next_clock(tz_name, local, now, h, m);
    }
    None
}

fn month_number(name: &str) -> Option<u32> {
    let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    months.iter().position(|m| name.to_ascii_lowercase().starts_with(m)).map(|i| i as u32 + 1)
}

fn hour_minute(h: &str, m: Option<&str>, ampm: Option<&str>) -> Option<(u32, u32)> {
    let mut h: u32 = h.parse().ok()?;
    let m: u32 = m.map_or(Some(0), |m| m.parse().ok())?;
    match ampm.map(|s| s.to_ascii_lowercase().starts_with('p')) {
        Some(pm) if (1..=12).contains(&h) => h = h % 12 + if pm { 12 } else { 0 },
        Some(_) => return None,
        None if h > 23 => return None,
        None => {}
    }
    (m < 60).then_some((h, m))
}

fn time(h: u32, m: u32) -> Option<NaiveTime> {
    NaiveTime::from_hms_opt(h, m, 0)
}

/// A wall-clock time in the named zone (`UTC`, `GMT`, an IANA name), else in `local`.
fn in_zone(name: Option<&str>, local: FixedOffset, at: chrono::NaiveDateTime) -> Option<DateTime<Utc>> {
    match name {
        Some(n) if n.eq_ignore_ascii_case("utc") || n.eq_ignore_ascii_case("gmt") => Some(at.and_utc()),
        Some(n) => match n.parse::<chrono_tz::Tz>() {
            Ok(tz) => tz.from_local_datetime(&at).earliest().map(|t| t.with_timezone(&Utc)),
            // A zone this does not know: the local one is the best guess.
            Err(_) => local.from_local_datetime(&at).earliest().map(|t| t.with_timezone(&Utc)),
        },
        None => local.from_local_datetime(&at).earliest().map(|t| t.with_timezone(&Utc)),
    }
}

/// The first `h:m` in the zone after `now`: today's, or tomorrow's when today's has passed.
fn next_clock(name: Option<&str>, local: FixedOffset, now: DateTime<Utc>, h: u32, m: u32) -> Option<DateTime<Utc>> {
    let today = |tz_now: chrono::NaiveDate| tz_now.and_time(time(h, m).expect("valid clock"));
    let date = match name {
        Some(n) if n.eq_ignore_ascii_case("utc") || n.eq_ignore_ascii_case("gmt") => now.date_naive(),
        Some(n) => match n.parse::<chrono_tz::Tz>() {
            Ok(tz) => now.with_timezone(&tz).date_naive(),
            Err(_) => now.with_timezone(&local).date_naive(),
        },
        None => now.with_timezone(&local).date_naive(),
    };
    time(h, m)?;
    let at = in_zone(name, local, today(date))?;
    if at > now {
        return Some(at);
    }
    in_zone(name, local, today(date.succ_opt()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2025-10-09 12:00:00 UTC, a Thursday.
    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 10, 9, 12, 0, 0).unwrap()
    }

    fn utc() -> FixedOffset {
        FixedOffset::east_opt(0).unwrap()
    }

    fn reset(text: &str) -> Option<String> {
        parse_reset(text, now(), utc()).map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    }

    #[test]
    fn reads_claude_code_resets() {
        // 3pm in Santiago (UTC-3 in October) is 18:00 UTC.
        let s = "Claude usage limit reached. Your limit will reset at 3pm (America/Santiago).";
        assert_eq!(reset(s).as_deref(), Some("2025-10-09T18:00:00Z"));
        // At 12:00 UTC it is 7am in Chicago (UTC-5 in October): 9am is still to come today.
        let s = "⎿  Claude usage limit reached. Your limit will reset at 9am (America/Chicago).";
        assert_eq!(reset(s).as_deref(), Some("2025-10-09T14:00:00Z"));
        // Etc/GMT+5 is five hours behind UTC.
        let s = "Claude usage limit reached. Your limit will reset at 1pm (Etc/GMT+5).";
        assert_eq!(reset(s).as_deref(), Some("2025-10-09T18:00:00Z"));
        assert_eq!(reset("5-hour limit reached ∙ resets 5am").as_deref(), Some("2025-10-10T05:00:00Z"), "tomorrow");
        assert_eq!(reset("5-hour limit reached ∙ resets 9pm").as_deref(), Some("2025-10-09T21:00:00Z"));
        let s = "You've hit your limit · resets 10pm (America/New_York)";
        assert_eq!(reset(s).as_deref(), Some("2025-10-10T02:00:00Z"));
        let s = "You've hit your session limit · resets 8:30pm (Asia/Tokyo)";
        // 21:00 in Tokyo now; 20:30 there has passed, so tomorrow's 20:30 JST = 11:30 UTC.
        assert_eq!(reset(s).as_deref(), Some("2025-10-10T11:30:00Z"));
        assert_eq!(reset("Claude AI usage limit reached|1762952400").as_deref(), Some("2025-11-12T13:00:00Z"));
        assert_eq!(
            reset("Claude usage limit reached. Your limit will reset at 12am.").as_deref(),
            Some("2025-10-10T00:00:00Z")
        );
    }

    #[test]
    fn reads_codex_resets() {
        let s = "■ You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 5 days 22 hours 11 minutes.";
        assert_eq!(reset(s).as_deref(), Some("2025-10-15T10:11:00Z"));
        let s = "You've hit your usage limit. Try again in 4 days 20 hours 9 minutes.";
        assert_eq!(reset(s).as_deref(), Some("2025-10-14T08:09:00Z"));
        let s = "You've hit your usage limit. Upgrade to Plus to continue using Codex (https://chatgpt.com/explore/plus), or try again at Jul 5th, 2026 8:19 PM.";
        assert_eq!(reset(s).as_deref(), Some("2026-07-05T20:19:00Z"));
        assert_eq!(
            reset("You've hit your usage limit. Try again at 6:00 PM.").as_deref(),
            Some("2025-10-09T18:00:00Z")
        );
        let s = r#"{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","resets_at":1775317531,"resets_in_seconds":602705}}"#;
        assert_eq!(reset(s).as_deref(), Some("2026-04-04T15:45:31Z"));
        let s = r#"{"type":"usage_limit_reached","resets_in_seconds":90}"#;
        assert_eq!(reset(s).as_deref(), Some("2025-10-09T12:01:30Z"));
    }

    #[test]
    fn reads_retries_and_local_clock_times() {
        assert_eq!(
            parse_reset("Retrying in 0.5 seconds...", now(), utc()),
            Some(now() + chrono::Duration::milliseconds(500))
        );
        assert_eq!(reset("rate limited; retrying in 30s (attempt 2/10)").as_deref(), Some("2025-10-09T12:00:30Z"));
        let plus2 = FixedOffset::east_opt(2 * 3600).unwrap();
        let at = parse_reset("5-hour limit reached ∙ resets 3pm", now(), plus2).unwrap();
        assert_eq!(at.to_rfc3339(), "2025-10-09T13:00:00+00:00", "a clock time without a zone is local");
        assert_eq!(reset("resets 15:30 UTC").as_deref(), Some("2025-10-09T15:30:00Z"));
    }

    #[test]
    fn unreadable_resets_are_none() {
        assert_eq!(reset("Claude usage limit reached."), None);
        assert_eq!(reset("You've hit your usage limit. Upgrade your plan to continue, or try again at 10 de jul. de 2026, 11:52."), None);
        assert_eq!(reset("429 Too Many Requests"), None);
        assert_eq!(reset("resets 5"), None, "a bare number is no clock time");
        assert_eq!(reset("resets at 25:00"), None);
    }

    fn screen(lines: &[&str]) -> String {
        lines.join("\n")
    }

    #[test]
    fn detects_limits_at_the_bottom_of_the_screen() {
        let claude = crate::builtin("claude-code");
        let s = screen(&[
            "● Working on it",
            "  ⎿  Claude usage limit reached. Your limit will reset at 3pm (America/New_York).",
            "",
            "> ",
            "  ? for shortcuts",
        ]);
        let l = detect(claude, &s, now(), utc()).expect("a limit");
        assert_eq!(l.resets_at.to_rfc3339(), "2025-10-09T19:00:00+00:00");
        assert!(l.reset_known && !l.agent_retries);
        assert!(l.line.starts_with("⎿  Claude usage limit reached"), "{}", l.line);
        assert!(l.evidence().contains("resets at 2025-10-09T19:00:00Z"), "{}", l.evidence());

        let wrapped =
            screen(&["Claude usage limit reached. Your limit will reset", "     at 3pm (America/Santiago).", ">"]);
        assert_eq!(detect(None, &wrapped, now(), utc()).unwrap().resets_at.to_rfc3339(), "2025-10-09T18:00:00+00:00");

        let codex = crate::builtin("codex");
        let s = screen(&["■ You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 2 days 3 hours 12", "minutes.", "› "]);
        assert_eq!(detect(codex, &s, now(), utc()).unwrap().resets_at.to_rfc3339(), "2025-10-11T15:12:00+00:00");
    }

    #[test]
    fn unreadable_resets_fall_back_and_say_so() {
        let s = screen(&["Error: quota exceeded for this key", "> "]);
        let l = detect(None, &s, now(), utc()).expect("a limit");
        assert!(!l.reset_known);
        assert_eq!(l.resets_at, now() + chrono::Duration::minutes(15));
        assert!(l.evidence().contains("reset time not stated; retrying in 15 minutes"), "{}", l.evidence());
    }

    #[test]
    fn api_rate_limits_the_agent_retries_are_marked() {
        let aider = crate::builtin("aider");
        let s = screen(&[
            "litellm.RateLimitError: VertexAIException - Resource has been exhausted (e.g. check quota).",
            "Retrying in 2.0 seconds...",
        ]);
        let l = detect(aider, &s, now(), utc()).expect("a limit");
        assert!(l.agent_retries && l.reset_known);
        assert_eq!(l.resets_at, now() + chrono::Duration::seconds(2));
        let claude = crate::builtin("claude-code");
        let s = r#"  ⎿  API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}}"#;
        assert!(detect(claude, s, now(), utc()).is_some());
    }

    #[test]
    fn no_limit_in_ordinary_screens_warnings_or_old_scrollback() {
        let claude = crate::builtin("claude-code");
        assert_eq!(detect(claude, "● Done.\n> \n  ? for shortcuts", now(), utc()), None);
        assert_eq!(detect(claude, "Approaching usage limit · resets at 2am\n>", now(), utc()), None, "a warning");
        let resumed = screen(&[
            "Claude usage limit reached. Your limit will reset at 3pm (America/New_York).",
            "> [aoctl:rate-limit:1a2b3c4d] Your usage limit has reset. Please continue where you left off.",
            "● Continuing…",
        ]);
        assert_eq!(detect(claude, &resumed, now(), utc()), None, "a limit before the resume message is old");
        let again =
            format!("{resumed}\nClaude usage limit reached. Your limit will reset at 8pm (America/New_York).\n>");
        assert_eq!(detect(claude, &again, now(), utc()).unwrap().resets_at.to_rfc3339(), "2025-10-10T00:00:00+00:00");
        let mut scrolled: Vec<String> = vec!["5-hour limit reached ∙ resets 3pm".into()];
        scrolled.extend((0..20).map(|i| format!("line {i}")));
        assert_eq!(detect(claude, &scrolled.join("\n"), now(), utc()), None, "far above the bottom");
        // Codex's adapter does not read Claude's wording, a custom command reads every family's.
        let codex = crate::builtin("codex");
        assert_eq!(detect(codex, "5-hour limit reached ∙ resets 3pm", now(), utc()), None);
        assert!(detect(None, "5-hour limit reached ∙ resets 3pm", now(), utc()).is_some());
    }
}
