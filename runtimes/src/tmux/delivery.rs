//! Typing a message into an agent and proving from its screen that the message was submitted,
//! shared by the tmux and process runtimes.
//!
//! The rule, in full:
//!
//! 1. The *needle* is the last non-blank line of the message, trimmed, at most its last 40
//!    characters, with whitespace and control characters removed. Screen text is compared the same
//!    way, so line wrapping and padding inside a text-UI box do not hide it.
//! 2. The text is typed (literally, or as one bracketed paste), then the screen is polled for up to
//!    `verify_timeout` until the needle is *visible*: the cursor's line holds it, or it appears on
//!    the screen — or among its last lines, where typed text lands — more often than before
//!    typing (so an old copy of the same words does not count, even as it scrolls away).
//! 3. After `submit_delay` the screen is snapshotted and the submit key is pressed.
//! 4. If the needle was visible, the message counts as submitted once the screen differs from the
//!    snapshot *and* the cursor's line no longer holds the needle. When that has not happened
//!    within `verify_timeout`, the submit key is pressed again, up to `retries` times; then
//!    `NotDelivered`.
//! 5. If the needle never became visible (an agent that does not echo, or one that shows a paste
//!    as a placeholder such as `[Pasted text]`), the submit key is pressed exactly once, with no
//!    retries because a swallowed key cannot be told from a silent agent, and the send succeeds
//!    only if the screen then changes within `verify_timeout`; otherwise `NotDelivered`.
//!
//! An agent that redraws constantly (a clock, a spinner) makes "the screen changed" true at once,
//! so for such agents only the cursor-line test of rule 4 carries weight.

use std::time::{Duration, Instant};

use aoctl_agents::InputStyle;

use crate::runtime::RuntimeError;

/// How often the screen is read while waiting.
const POLL: Duration = Duration::from_millis(40);

/// The longest needle, in characters.
const NEEDLE_CHARS: usize = 40;

/// What the verification reads from a terminal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Screen {
    /// The visible screen, wrapped lines joined.
    pub(crate) text: String,
    /// The logical line the cursor is on, wrapped rows joined.
    pub(crate) cursor_line: String,
    /// The cursor position as (row, column).
    pub(crate) cursor: (u32, u32),
}

/// The three things a runtime must do for `deliver`.
#[async_trait::async_trait]
pub(crate) trait Terminal: Send + Sync {
    /// Types `text` without submitting it: as one bracketed paste when `paste` is set.
    async fn type_text(&self, text: &str, paste: bool) -> Result<(), RuntimeError>;

    /// Presses one key, named in tmux key syntax.
    async fn press(&self, key: &str) -> Result<(), RuntimeError>;

    /// Reads the screen.
    async fn screen(&self) -> Result<Screen, RuntimeError>;
}

/// Types `text` into `term`, submits it with `style.submit_key` and verifies the submission by
/// the rule in this module's documentation.
pub(crate) async fn deliver<T: Terminal + ?Sized>(
    term: &T,
    runtime: &'static str,
    text: &str,
    style: &InputStyle,
) -> Result<(), RuntimeError> {
    let text = clean(text);
    let needle = needle(&text);
    if needle.is_empty() {
        // Nothing to see on screen: a blank message is just the submit key.
        if !text.is_empty() {
            term.type_text(&text, false).await?;
        }
        return term.press(&style.submit_key).await;
    }
    let multi_line = text.contains('\n');
    let before = term.screen().await?;
    let before_count = occurrences(&before.text, &needle);
    term.type_text(&text, multi_line && style.bracketed_paste).await?;

    // Near the bottom, where typed text lands: counting there still works when the screen is full
    // and an older copy of the same words scrolls off the top as the new one appears.
    let bottom = text.lines().count() + 8;
    let before_bottom = occurrences(&last_lines(&before.text, bottom), &needle);
    let visible = poll(term, style.verify_timeout, |s| {
        occurrences(&s.cursor_line, &needle) > 0
            || occurrences(&s.text, &needle) > before_count
            || occurrences(&last_lines(&s.text, bottom), &needle) > before_bottom
    })
    .await?
    .is_some();

    tokio::time::sleep(style.submit_delay).await;
    let pending = term.screen().await?;
    term.press(&style.submit_key).await?;

    if !visible {
        let changed = poll(term, style.verify_timeout, |s| *s != pending).await?;
        return match changed {
            Some(_) => Ok(()),
            None => Err(RuntimeError::NotDelivered {
                runtime,
                message: format!(
                    "the text never appeared on screen and nothing changed within {:?} of pressing {}",
                    style.verify_timeout, style.submit_key
                ),
            }),
        };
    }

    let submitted = |s: &Screen| *s != pending && occurrences(&s.cursor_line, &needle) == 0;
    for attempt in 0..=style.retries {
        if attempt > 0 {
            tracing::debug!(runtime, attempt, key = %style.submit_key, "message still on the input line, pressing submit again");
            term.press(&style.submit_key).await?;
        }
        if poll(term, style.verify_timeout, submitted).await?.is_some() {
            return Ok(());
        }
    }
    Err(RuntimeError::NotDelivered {
        runtime,
        message: format!(
            "pressed {} {} time(s) but the message is still on the input line",
            style.submit_key,
            style.retries + 1
        ),
    })
}

/// Whether `text`, typed earlier, still sits on the cursor's line unsubmitted (by the needle of
/// rule 1): what a controller killed between typing and submitting left behind.
pub(crate) async fn pending<T: Terminal + ?Sized>(term: &T, text: &str) -> Result<bool, RuntimeError> {
    let needle = needle(&clean(text));
    if needle.is_empty() {
        return Ok(false);
    }
    Ok(occurrences(&term.screen().await?.cursor_line, &needle) > 0)
}

/// Whether the output `seen` (as text) shows `text` being typed: it holds the needle of rule 1,
/// compared squashed, so line wrapping and padding do not hide it.
pub fn echoed(seen: &str, text: &str) -> bool {
    let needle = needle(&clean(text));
    !needle.is_empty() && occurrences(seen, &needle) > 0
}

/// Reads the screen until `done` holds or `timeout` has passed (at least once); the matching screen.
async fn poll<T: Terminal + ?Sized>(
    term: &T,
    timeout: Duration,
    done: impl Fn(&Screen) -> bool,
) -> Result<Option<Screen>, RuntimeError> {
    let deadline = Instant::now() + timeout;
    loop {
        let screen = term.screen().await?;
        if done(&screen) {
            return Ok(Some(screen));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The message as it is typed: line endings normalised to `\n`, trailing newlines dropped (the
/// submit key ends the message) and bracketed-paste markers removed so the text cannot end a paste
/// early.
pub(crate) fn clean(text: &str) -> String {
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .replace("\x1b[200~", "")
        .replace("\x1b[201~", "")
        .trim_end_matches('\n')
        .to_string()
}

/// The squashed tail of the last non-blank line, as described in the module documentation.
pub(crate) fn needle(text: &str) -> String {
    let last = text.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let squashed = squash(last);
    let skip = squashed.chars().count().saturating_sub(NEEDLE_CHARS);
    squashed.chars().skip(skip).collect()
}

/// `s` without whitespace and control characters.
fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace() && !c.is_control()).collect()
}

/// The last `n` non-blank lines of a screen.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// How often the squashed `needle` occurs in the squashed `hay`.
fn occurrences(hay: &str, needle: &str) -> usize {
    squash(hay).matches(needle).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needle_is_the_squashed_tail_of_the_last_line() {
        assert_eq!(needle("hello"), "hello");
        assert_eq!(needle("first\n  second line  \n\n"), "secondline");
        assert_eq!(needle(&"x".repeat(100)), "x".repeat(40));
        assert_eq!(needle(" \n\t"), "");
    }

    #[test]
    fn clean_drops_trailing_newlines_and_paste_markers() {
        assert_eq!(clean("a\r\nb\n\n"), "a\nb");
        assert_eq!(clean("a\x1b[201~b"), "ab");
    }

    #[test]
    fn echoed_finds_the_last_line_of_a_message_in_output() {
        assert!(echoed("> first\r\n> second li\nne\r\n", "first\nsecond line\n"));
        assert!(!echoed("> first\r\n", "first\nsecond line"));
        assert!(!echoed("anything", "  \n"));
    }

    #[test]
    fn occurrences_ignore_wrapping_and_padding() {
        assert_eq!(occurrences("│ hel│\n│ lo │ hello", "hello"), 1);
        assert_eq!(occurrences("hel\nlo hello", "hello"), 2);
    }
}
