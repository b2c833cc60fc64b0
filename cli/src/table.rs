//! kubectl-like tables: no borders, left aligned, headers in capitals, two spaces between
//! columns; and ages written the way kubectl writes them (`45s`, `3m12s`, `5h`, `2d`), by
//! `aoctl_api::table`, which also holds the columns of every kind.

use comfy_table::{presets, CellAlignment, Table};

/// Ages are written by the same function the server's tables use.
pub(crate) use aoctl_api::table::age;

/// Columns are separated by this many spaces.
const GAP: u16 = 2;

/// Renders a table; every line ends with a newline and carries no trailing spaces.
pub(crate) fn render<S: AsRef<str>>(header: &[S], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header.iter().map(|h| h.as_ref().to_ascii_uppercase()).collect();
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| clean(c)).collect()).collect();
    match render_ascii(&header, &rows) {
        Some(out) => out,
        None => render_any(&header, &rows),
    }
}

/// `render_any` for the common table: every cell ASCII (one column per byte), every row as
/// long as the header. A thousand rows take well under a millisecond this way.
fn render_ascii(header: &[String], rows: &[Vec<String>]) -> Option<String> {
    let n = header.len();
    let fits = |r: &[String]| r.len() == n && r.iter().all(|c| c.is_ascii());
    if !fits(header) || !rows.iter().all(|r| fits(r)) {
        return None;
    }
    let mut widths: Vec<usize> = header.iter().map(String::len).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let line_len = widths.iter().sum::<usize>() + GAP as usize * n + 1;
    let mut out = String::with_capacity(line_len * (rows.len() + 1));
    for r in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        let start = out.len();
        for (i, (c, w)) in r.iter().zip(&widths).enumerate() {
            out.push_str(c);
            if i + 1 < n {
                out.extend(std::iter::repeat_n(' ', w - c.len() + GAP as usize));
            }
        }
        let end = start + out[start..].trim_end().len();
        out.truncate(end);
        out.push('\n');
    }
    Some(out)
}

/// Any table, with display widths (wide characters count two columns) worked out by comfy-table.
fn render_any(header: &[String], rows: &[Vec<String>]) -> String {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header);
    for row in rows {
        t.add_row(row);
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
pub(crate) struct RowPrinter {
    widths: Vec<usize>,
}

impl RowPrinter {
    /// Remembers the widths of a table with this header and these rows.
    pub(crate) fn new<S: AsRef<str>>(header: &[S], rows: &[Vec<String>]) -> RowPrinter {
        let mut widths: Vec<usize> = header.iter().map(|h| h.as_ref().chars().count()).collect();
        for row in rows {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(clean(c).chars().count());
            }
        }
        RowPrinter { widths }
    }

    /// One row, padded to the remembered widths, with a trailing newline.
    pub(crate) fn row(&self, cells: &[String]) -> String {
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
pub(crate) fn clean(s: &str) -> String {
    s.chars().map(|c| if c == '\n' || c == '\t' || c == '\r' { ' ' } else { c }).filter(|c| !c.is_control()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The quick path for ASCII tables writes what comfy-table writes.
    #[test]
    fn ascii_tables_render_like_comfy_table() {
        let words = ["", "a", "web", "two words", "session/fix-login", "<none>", " lead", "trail ", "#7 open", "3m20s"];
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        for cols in 1..6 {
            let header: Vec<String> = (0..cols).map(|i| ["NAME", "X", "LAST SEEN", "PR", "A"][i].to_string()).collect();
            for n in [0, 1, 2, 7] {
                let rows: Vec<Vec<String>> =
                    (0..n).map(|_| (0..cols).map(|_| words[next() % words.len()].to_string()).collect()).collect();
                let fast = render_ascii(&header, &rows).expect("ASCII");
                assert_eq!(fast, render_any(&header, &rows), "{header:?} {rows:?}");
            }
        }
        let wide = vec![vec!["日本".to_string(), "x".to_string()]];
        assert!(render_ascii(&["A".into(), "B".into()], &wide).is_none());
        assert_eq!(render(&["a", "b"], &wide), "A     B\n日本  x\n");
        let ragged = vec![vec!["only".to_string()]];
        assert!(render_ascii(&["A".into(), "B".into()], &ragged).is_none());
        assert_eq!(render(&["a", "b"], &ragged), "A     B\nonly\n");
    }

    #[test]
    fn cells_are_single_line() {
        assert_eq!(clean("a\nb\x1b[31mc"), "a b[31mc");
        let out = render(&["MESSAGE"], &[vec!["two\nlines".into()]]);
        assert_eq!(out, "MESSAGE\ntwo lines\n");
    }
}
