//! Reading agent transcripts: the raw terminal output a runtime appends to a file, turned into
//! plain text (escape sequences removed, carriage-return overwrites applied) for `aoctl logs`.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// At most this much of the end of a transcript is read to find the last lines.
const TAIL_WINDOW: u64 = 4 << 20;

/// Removes terminal escape sequences and applies carriage returns: a line keeps only what was
/// written after its last `\r`.
pub fn to_text(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(s.len());
    let mut line = String::new();
    // A carriage return overwrites the line only once something is written after it: agents end
    // lines with `\r\r\n` too.
    let mut returned = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.next() {
                // CSI: parameters and intermediates, then one final byte in @..~. Cursor moves to
                // the right (`C`) and to a column (`G`) become spaces, so words stay apart.
                Some('[') => {
                    let mut params = String::new();
                    for n in chars.by_ref() {
                        if ('@'..='~').contains(&n) {
                            let count: usize = params.parse().unwrap_or(1).min(500);
                            match n {
                                'C' => line.extend(std::iter::repeat_n(' ', count)),
                                'G' if line.chars().count() < count => {
                                    let pad = count - 1 - line.chars().count().min(count - 1);
                                    line.extend(std::iter::repeat_n(' ', pad));
                                }
                                _ => {}
                            }
                            break;
                        }
                        params.push(n);
                    }
                }
                // OSC, DCS, SOS, PM, APC: up to BEL or ST (ESC \).
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    while let Some(n) = chars.next() {
                        if n == '\x07' || (n == '\x1b' && chars.peek() == Some(&'\\')) {
                            if n == '\x1b' {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                // Character-set selection takes one more character.
                Some('(' | ')' | '*' | '+') => {
                    chars.next();
                }
                _ => {}
            },
            '\r' => returned = true,
            '\n' => {
                out.push_str(line.trim_end());
                out.push('\n');
                line.clear();
                returned = false;
            }
            '\x08' => {
                line.pop();
            }
            c if c.is_control() && c != '\t' => {}
            c => {
                if std::mem::take(&mut returned) {
                    line.clear();
                }
                line.push(c);
            }
        }
    }
    out.push_str(&line);
    out
}

/// Lines kept above the screen when a transcript is rendered.
const SCROLLBACK: usize = 20_000;

/// What a terminal of `rows` × `cols` shows after `bytes`, as text: the lines scrolled off the top
/// (at most 20,000), then the screen, a line wrapped at the edge joined again, trailing blank
/// lines left out. Unlike [`to_text`], text a full-screen program redraws in place (moving the
/// cursor up and writing over it) comes out once, as it was last drawn.
pub fn render(bytes: &[u8], rows: u16, cols: u16) -> String {
    let mut term = vt100::Parser::new(rows.max(1), cols.max(1), SCROLLBACK);
    term.process(bytes);
    let screen = term.screen_mut();
    screen.set_scrollback(usize::MAX);
    let back = screen.scrollback();
    let rows = usize::from(rows.max(1));
    let mut out = String::new();
    let mut start = 0;
    while start < back + rows {
        // At offset `o` the view's first row is line `back - o` of scrollback and screen together.
        let offset = back.saturating_sub(start);
        screen.set_scrollback(offset);
        let top = back - offset;
        for (i, row) in screen.rows(0, cols.max(1)).enumerate().skip(start - top) {
            out.push_str(&row);
            let wrapped = u16::try_from(i).is_ok_and(|r| screen.row_wrapped(r));
            if !wrapped {
                let kept = out.trim_end_matches([' ', '\t']).len();
                out.truncate(kept);
                out.push('\n');
            }
        }
        start = top + rows;
    }
    screen.set_scrollback(0);
    let kept = out.trim_end().len();
    out.truncate(kept);
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// The last `lines` lines (all when `None`) of what a `rows` × `cols` terminal shows after the
/// transcript's read window ([`render`]), and the file length they end at.
pub fn tail_rendered(path: &Path, lines: Option<usize>, rows: u16, cols: u16) -> io::Result<(String, u64)> {
    let (buf, len) = read_window(path)?;
    Ok((last_lines(&render(&buf, rows, cols), lines), len))
}

/// The last `TAIL_WINDOW` bytes of a transcript (none when it does not exist yet) and its length.
fn read_window(path: &Path) -> io::Result<(Vec<u8>, u64)> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((vec![], 0)),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let start = len.saturating_sub(TAIL_WINDOW);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::with_capacity((len - start) as usize);
    f.by_ref().take(len - start).read_to_end(&mut buf)?;
    Ok((buf, len))
}

/// The last `lines` lines of `text` (all of it when `None`).
fn last_lines(text: &str, lines: Option<usize>) -> String {
    let Some(n) = lines else { return text.to_string() };
    // `split_inclusive` keeps each line's newline, so an unfinished last line stays unfinished.
    let all: Vec<&str> = text.split_inclusive('\n').collect();
    all[all.len().saturating_sub(n)..].concat()
}

/// The last `lines` lines of a transcript as text (all of the read window when `None`), and the
/// file length they end at, from which `read_from` continues.
pub fn tail(path: &Path, lines: Option<usize>) -> io::Result<(String, u64)> {
    let (buf, len) = read_window(path)?;
    Ok((last_lines(&to_text(&buf), lines), len))
}

/// What was appended after `offset`, as raw bytes, and the new end.
pub fn read_from(path: &Path, offset: u64) -> io::Result<(Vec<u8>, u64)> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((vec![], offset)),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    // A transcript that shrank was replaced: start over.
    let from = if len < offset { 0 } else { offset };
    f.seek(SeekFrom::Start(from))?;
    let mut buf = vec![];
    f.by_ref().take(len - from).read_to_end(&mut buf)?;
    Ok((buf, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_shows_text_redrawn_in_place_once_as_last_drawn() {
        // A box drawn, then redrawn three lines up with new words, as a text UI does.
        let raw =
            b"header\r\n\xe2\x94\x82 old words\r\n\xe2\x94\x82 more\r\nfooter\r\n\x1b[3A\r\x1b[2C\x1b[Knew  words\r\n";
        assert_eq!(render(raw, 10, 40), "header\n\u{2502} new  words\n\u{2502} more\nfooter\n");
        // to_text keeps every version.
        assert!(to_text(raw).contains("old words"));
    }

    #[test]
    fn render_keeps_what_scrolled_off_and_joins_wrapped_lines() {
        let mut raw = Vec::new();
        for i in 0..30 {
            raw.extend_from_slice(format!("line {i}\r\n").as_bytes());
        }
        raw.extend_from_slice(&[b'x'; 25]);
        raw.extend_from_slice(b"\r\nend");
        let text = render(&raw, 5, 10);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 32, "{text}");
        assert_eq!((lines[0], lines[29]), ("line 0", "line 29"));
        assert_eq!(lines[30], "x".repeat(25), "a line wrapped at the edge is one line again");
        assert_eq!(lines[31], "end");
        assert_eq!(render(b"", 5, 10), "");
    }

    #[test]
    fn strips_escapes_and_applies_carriage_returns() {
        let raw = b"\x1b[1;32mgreen\x1b[0m text\r\n\x1b]0;title\x07progress 10%\rprogress 100%\nab\x08c\n";
        assert_eq!(to_text(raw), "green text\nprogress 100%\nac\n");
        assert_eq!(to_text(b"kept\r\r\nnext\r\n"), "kept\nnext\n");
        assert_eq!(to_text(b"Claude\x1b[1CCode\x1b[20Gv2\n"), "Claude Code        v2\n");
    }

    #[test]
    fn tails_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.log");
        std::fs::write(&p, "one\ntwo\nthree\n").unwrap();
        assert_eq!(tail(&p, Some(2)).unwrap(), ("two\nthree\n".to_string(), 14));
        std::fs::write(&p, "one\ntwo\nthree\nfour\n").unwrap();
        assert_eq!(read_from(&p, 14).unwrap(), (b"four\n".to_vec(), 19));
        assert_eq!(tail(&dir.path().join("missing"), Some(3)).unwrap(), (String::new(), 0));
        std::fs::write(&p, "one\n> ").unwrap();
        assert_eq!(tail(&p, Some(1)).unwrap().0, "> ");
    }
}
