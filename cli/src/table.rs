//! kubectl-like tables: no borders, left aligned, headers in capitals, two spaces between
//! columns; and ages written the way kubectl writes them (`45s`, `3m12s`, `5h`, `2d`).

use chrono::{DateTime, Utc};
use comfy_table::{presets, CellAlignment, Table};

/// Columns are separated by this many spaces.
const GAP: u16 = 2;

/// Renders a table; every line ends with a newline and carries no trailing spaces.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header.iter().map(|h| h.to_ascii_uppercase()));
    for row in rows {
        t.add_row(row.iter().map(|c| clean(c)));
    }
    let n = header.len();
    for (i, col) in t.column_iter_mut().enumerate() {
        col.set_padding((0, if i + 1 == n { 0 } else { GAP }));
        col.set_cell_alignment(CellAlignment::Left);
    }
    let mut out = String::new();
    for line in t.lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Prints rows one at a time under a table already printed (`get -w`), keeping its column widths
/// where the new cells fit.
#[derive(Clone, Debug)]
pub struct RowPrinter {
    widths: Vec<usize>,
}

impl RowPrinter {
    /// Remembers the widths of a table with this header and these rows.
    pub fn new(header: &[&str], rows: &[Vec<String>]) -> RowPrinter {
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for row in rows {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(clean(c).chars().count());
            }
        }
        RowPrinter { widths }
    }

    /// One row, padded to the remembered widths, with a trailing newline.
    pub fn row(&self, cells: &[String]) -> String {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let cell = clean(cell);
            line.push_str(&cell);
            if i + 1 < cells.len() {
                let w = self.widths.get(i).copied().unwrap_or(0);
                let pad = w.saturating_sub(cell.chars().count()) + GAP as usize;
                line.push_str(&" ".repeat(pad));
            }
        }
        let mut line = line.trim_end().to_string();
        line.push('\n');
        line
    }
}

/// Makes text safe for one table cell: no line breaks, no control characters (terminal escapes).
pub fn clean(s: &str) -> String {
    s.chars().map(|c| if c == '\n' || c == '\t' || c == '\r' { ' ' } else { c }).filter(|c| !c.is_control()).collect()
}

/// The age of a timestamp, or `<unknown>`.
pub fn age(since: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match since {
        Some(t) => human_duration(now.signed_duration_since(t)),
        None => "<unknown>".into(),
    }
}

/// kubectl's `HumanDuration`: exact for short spans, coarser as they grow.
pub fn human_duration(d: chrono::TimeDelta) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    fn s(n: i64) -> String {
        human_duration(TimeDelta::seconds(n))
    }

    #[test]
    fn ages_like_kubectl() {
        assert_eq!(s(-5), "<invalid>");
        assert_eq!(s(0), "0s");
        assert_eq!(s(45), "45s");
        assert_eq!(s(119), "119s");
        assert_eq!(s(120), "2m");
        assert_eq!(s(3 * 60 + 12), "3m12s");
        assert_eq!(s(10 * 60 + 5), "10m");
        assert_eq!(s(179 * 60), "179m");
        assert_eq!(s(3 * 3600 + 60 * 30), "3h30m");
        assert_eq!(s(5 * 3600), "5h");
        assert_eq!(s(47 * 3600), "47h");
        assert_eq!(s(2 * 86400), "2d");
        assert_eq!(s(3 * 86400 + 4 * 3600), "3d4h");
        assert_eq!(s(100 * 86400), "100d");
        assert_eq!(s(800 * 86400), "2y70d");
        assert_eq!(s(9 * 365 * 86400), "9y");
        assert_eq!(age(None, Utc::now()), "<unknown>");
    }

    #[test]
    fn tables_like_kubectl() {
        let rows = vec![
            vec!["demo".to_string(), "/src/demo".to_string(), "main".to_string()],
            vec!["a-longer-name".to_string(), "/x".to_string(), String::new()],
        ];
        let out = render(&["name", "path", "branch"], &rows);
        assert_eq!(out, "NAME           PATH       BRANCH\ndemo           /src/demo  main\na-longer-name  /x\n");
        let p = RowPrinter::new(&["NAME", "PATH", "BRANCH"], &rows);
        assert_eq!(p.row(&["b".into(), "/y".into(), "dev".into()]), "b              /y         dev\n");
    }

    #[test]
    fn cells_are_single_line() {
        assert_eq!(clean("a\nb\x1b[31mc"), "a b[31mc");
        let out = render(&["MESSAGE"], &[vec!["two\nlines".into()]]);
        assert_eq!(out, "MESSAGE\ntwo lines\n");
    }
}
