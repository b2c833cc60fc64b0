//! What a failing CI job printed: the tail of its log, cleaned for an agent to read, and whether it
//! looks like a failure of the infrastructure rather than of the code.

/// Lines kept from the end of a log.
pub const LOG_TAIL_LINES: usize = 50;

/// Bytes kept from the end of a log.
pub const LOG_TAIL_BYTES: usize = 8 * 1024;

/// Why a failed job's log tail looks like a failure of the infrastructure rather than of the
/// code — a lost runner, a timeout or a network error — or `None` when it does not.
pub fn flaky_cause(log_tail: &str) -> Option<&'static str> {
    const CAUSES: &[(&str, &[&str])] = &[
        (
            "the runner was lost",
            &[
                "the runner has received a shutdown signal",
                "lost communication with the server",
                "the hosted runner lost communication",
                "runner lost",
                "the self-hosted runner went offline",
            ],
        ),
        (
            "a timeout",
            &[
                "has timed out after",
                "exceeded the maximum execution time",
                "operation timed out",
                "connection timed out",
                "etimedout",
                "i/o timeout",
            ],
        ),
        (
            "a network error",
            &[
                "econnreset",
                "econnrefused",
                "connection reset by peer",
                "could not resolve host",
                "temporary failure in name resolution",
                "network is unreachable",
                "tls handshake timeout",
                "502 bad gateway",
                "503 service unavailable",
            ],
        ),
    ];
    let text = log_tail.to_ascii_lowercase();
    CAUSES.iter().find(|(_, needles)| needles.iter().any(|n| text.contains(n))).map(|(cause, _)| *cause)
}

/// The last `max_lines` lines of a log, at most `max_bytes` long, with ANSI escapes, GitHub's
/// leading timestamps, `##[group]` markers and trailing blank lines removed.
pub fn log_tail(raw: &str, max_lines: usize, max_bytes: usize) -> String {
    let lines: Vec<String> = raw
        .trim_start_matches('\u{feff}')
        .lines()
        .map(|line| strip_ansi(strip_timestamp(line)))
        .filter(|line| line.trim() != "##[endgroup]")
        .map(|line| match line.strip_prefix("##[group]") {
            Some(rest) => rest.to_string(),
            None => line.trim_end().to_string(),
        })
        .collect();
    let end = lines.iter().rposition(|l| !l.trim().is_empty()).map_or(0, |i| i + 1);
    let start = end.saturating_sub(max_lines);
    let mut tail = lines[start..end].join("\n");
    if tail.len() > max_bytes {
        let mut cut = tail.len() - max_bytes;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        // Start at a line boundary when one is in the kept part.
        if let Some(nl) = tail[cut..].find('\n') {
            cut += nl + 1;
        }
        tail = tail[cut..].to_string();
    }
    tail
}

/// Removes the `2024-01-02T03:04:05.1234567Z ` prefix that Actions puts on every line.
fn strip_timestamp(line: &str) -> &str {
    let b = line.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    let shape = b.len() > 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !shape {
        return line;
    }
    let mut i = 19;
    if b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if b.get(i) != Some(&b'Z') {
        return line;
    }
    let rest = &line[i + 1..];
    rest.strip_prefix(' ').unwrap_or(rest)
}

/// Removes ANSI escape sequences (CSI such as colours, OSC such as hyperlinks, and two-byte ones).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            if c != '\r' {
                out.push(c);
            }
            continue;
        }
        match chars.next() {
            Some('[') => {
                // Parameters and intermediates, then one final byte in @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                // Ends with BEL or ESC \.
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_timestamps_and_ansi() {
        let raw = "\u{feff}2024-05-01T10:00:00.1234567Z ##[group]Run cargo test\n\
                   2024-05-01T10:00:01.0000000Z \u{1b}[1m\u{1b}[31merror[E0308]\u{1b}[0m: mismatched types\r\n\
                   2024-05-01T10:00:02Z ##[endgroup]\n\
                   2024-05-01T10:00:03.5Z \u{1b}]8;;https://x\u{7}link\u{1b}]8;;\u{7} done\n\
                   not a 2024-05-01T10:00:03Z timestamp\n\n\n";
        assert_eq!(
            log_tail(raw, 50, 8192),
            "Run cargo test\nerror[E0308]: mismatched types\nlink done\nnot a 2024-05-01T10:00:03Z timestamp"
        );
    }

    #[test]
    fn tells_flaky_failures_from_real_ones() {
        let lost = "Run cargo test\n##[error]The runner has received a shutdown signal. This can happen when the runner service is stopped.";
        assert_eq!(flaky_cause(lost), Some("the runner was lost"));
        assert_eq!(
            flaky_cause("##[error]The job running on runner X has timed out after 360 minutes."),
            Some("a timeout")
        );
        assert_eq!(
            flaky_cause("error: failed to download: Connection reset by peer (os error 104)"),
            Some("a network error")
        );
        assert_eq!(flaky_cause("curl: (6) Could not resolve host: index.crates.io"), Some("a network error"));
        let real = "test login::redirect_once ... FAILED\nerror: test failed, to rerun pass `--lib`";
        assert_eq!(flaky_cause(real), None);
        assert_eq!(flaky_cause(""), None);
    }

    #[test]
    fn keeps_the_last_lines_within_bounds() {
        let raw: String = (1..=200).map(|i| format!("2024-05-01T10:00:00.0Z line {i}\n")).collect();
        let tail = log_tail(&raw, 50, 8192);
        assert_eq!(tail.lines().count(), 50);
        assert!(tail.starts_with("line 151\n") && tail.ends_with("line 200"));

        let long: String = (0..50).map(|i| format!("{i} {}\n", "é".repeat(200))).collect();
        let tail = log_tail(&long, 50, 8192);
        assert!(tail.len() <= 8192);
        assert!(tail.ends_with(&"é".repeat(200)));
        assert!(tail.split('\n').next().unwrap().chars().next().unwrap().is_ascii_digit());
    }
}
