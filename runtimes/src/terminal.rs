//! What the runtimes that own a terminal emulator share (the process runtime's PTY, the docker
//! runtime's attach stream): the bytes a named key sends, and answers to terminal queries.

/// Answers to terminal queries (cursor position, status, device attributes), collected while
/// output is parsed and written back to the agent: agents can stall at start-up waiting for them.
#[derive(Default)]
pub(crate) struct Replies(pub(crate) Vec<u8>);

impl vt100::Callbacks for Replies {
    fn unhandled_csi(&mut self, screen: &mut vt100::Screen, i1: Option<u8>, _: Option<u8>, params: &[&[u16]], c: char) {
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
        match (i1, c, first) {
            (None, 'n', 6) => {
                let (row, col) = screen.cursor_position();
                self.0.extend(format!("\x1b[{};{}R", row + 1, col + 1).bytes());
            }
            (None, 'n', 5) => self.0.extend(b"\x1b[0n"),
            (None, 'c', 0) => self.0.extend(b"\x1b[?1;2c"),
            _ => {}
        }
    }
}

/// The bytes a terminal sends for a key named in tmux syntax (`Enter`, `C-c`, `Up`, `y`).
pub(crate) fn key_bytes(key: &str, application_cursor: bool) -> Option<Vec<u8>> {
    let arrow = |c: char| if application_cursor { format!("\x1bO{c}") } else { format!("\x1b[{c}") };
    let text = match key {
        "Enter" | "C-m" | "KPEnter" => "\r".to_string(),
        "Escape" | "Esc" | "C-[" => "\x1b".into(),
        "Tab" | "C-i" => "\t".into(),
        "BTab" => "\x1b[Z".into(),
        "BSpace" => "\x7f".into(),
        "Space" => " ".into(),
        "Up" => arrow('A'),
        "Down" => arrow('B'),
        "Right" => arrow('C'),
        "Left" => arrow('D'),
        "Home" => "\x1b[H".into(),
        "End" => "\x1b[F".into(),
        "PageUp" | "PgUp" | "PPage" => "\x1b[5~".into(),
        "PageDown" | "PgDn" | "NPage" => "\x1b[6~".into(),
        "DC" | "Delete" => "\x1b[3~".into(),
        "C-Space" | "C-@" => "\0".into(),
        _ => {
            let single = |s: &str| {
                let mut chars = s.chars();
                chars.next().filter(|_| chars.next().is_none())
            };
            if let Some(c) = key.strip_prefix("C-").and_then(single).filter(char::is_ascii_alphabetic) {
                char::from(c.to_ascii_lowercase() as u8 & 0x1f).to_string()
            } else if let Some(c) = key.strip_prefix("M-").and_then(single) {
                format!("\x1b{c}")
            } else {
                single(key)?.to_string()
            }
        }
    };
    Some(text.into_bytes())
}
