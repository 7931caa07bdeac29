//! A plain table of text cells and its renderings: GitHub markdown, terminal boxes (unicode or
//! ASCII), CSV and HTML.

use crate::html::escape;

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// Which characters a terminal table is drawn with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Charset {
    /// Unicode box drawing (`┌─┬─┐`).
    #[default]
    Unicode,
    /// Plain ASCII (`+-+|`), with unit symbols transliterated (`µs` -> `us`, `×` -> `x`).
    Ascii,
}

/// A table of text cells. Rows shorter than the header are padded with empty cells.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    /// Column headers.
    pub header: Vec<String>,
    /// Alignment per column (missing entries are left-aligned).
    pub align: Vec<Align>,
    /// The cells.
    pub rows: Vec<Vec<String>>,
    /// Per row, a link target for its first cell in HTML (`#section-id`); missing entries
    /// link nothing. Other renderings show the text alone.
    pub links: Vec<Option<String>>,
}

impl Table {
    /// A table with these headers, all left-aligned.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        let align = vec![Align::Left; header.len()];
        Table {
            header,
            align,
            rows: Vec::new(),
            links: Vec::new(),
        }
    }

    /// Right-aligns the columns at these indices.
    pub fn right(mut self, cols: impl IntoIterator<Item = usize>) -> Table {
        for c in cols {
            if let Some(a) = self.align.get_mut(c) {
                *a = Align::Right;
            }
        }
        self
    }

    /// Appends a row.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Appends a row whose first cell links to `href` in HTML.
    pub fn push_linked(&mut self, row: Vec<String>, href: String) {
        self.links.resize(self.rows.len(), None);
        self.links.push(Some(href));
        self.rows.push(row);
    }

    fn cell(&self, row: usize, col: usize) -> &str {
        self.rows[row].get(col).map(String::as_str).unwrap_or("")
    }

    fn align_of(&self, col: usize) -> Align {
        self.align.get(col).copied().unwrap_or(Align::Left)
    }

    /// Column widths, in characters, of cells already mapped through `map`.
    fn widths(&self, map: &dyn Fn(&str) -> String) -> Vec<usize> {
        (0..self.header.len())
            .map(|c| {
                let h = width(&map(&self.header[c]));
                (0..self.rows.len())
                    .map(|r| width(&map(self.cell(r, c))))
                    .fold(h, usize::max)
            })
            .collect()
    }

    /// GitHub-flavoured markdown, padded so that the source reads well too.
    pub fn to_markdown(&self) -> String {
        let map = |s: &str| markdown_cell(s);
        let w = self.widths(&map);
        let mut out = String::new();
        let line = |cells: Vec<String>, out: &mut String| {
            out.push('|');
            for (c, text) in cells.iter().enumerate() {
                out.push(' ');
                out.push_str(&pad(text, w[c].max(3), self.align_of(c)));
                out.push_str(" |");
            }
            out.push('\n');
        };
        line(self.header.iter().map(|h| map(h)).collect(), &mut out);
        out.push('|');
        for (c, &wc) in w.iter().enumerate() {
            let dashes = "-".repeat(wc.max(3) + 1);
            match self.align_of(c) {
                Align::Left => out.push_str(&format!(":{dashes}|")),
                Align::Right => out.push_str(&format!("{dashes}:|")),
            }
        }
        out.push('\n');
        for r in 0..self.rows.len() {
            line(
                (0..self.header.len())
                    .map(|c| map(self.cell(r, c)))
                    .collect(),
                &mut out,
            );
        }
        out
    }

    /// A box-drawn table for a terminal.
    pub fn to_terminal(&self, charset: Charset) -> String {
        let map = |s: &str| match charset {
            Charset::Unicode => one_line(s),
            Charset::Ascii => to_ascii(&one_line(s)),
        };
        let w = self.widths(&map);
        // [left, fill, join, right] for top, middle and bottom rules, and the vertical bar.
        let (top, mid, bot, bar) = match charset {
            Charset::Unicode => (
                ['┌', '─', '┬', '┐'],
                ['├', '─', '┼', '┤'],
                ['└', '─', '┴', '┘'],
                '│',
            ),
            Charset::Ascii => (
                ['+', '-', '+', '+'],
                ['+', '-', '+', '+'],
                ['+', '-', '+', '+'],
                '|',
            ),
        };
        let rule = |p: [char; 4], out: &mut String| {
            out.push(p[0]);
            for (c, &wc) in w.iter().enumerate() {
                if c > 0 {
                    out.push(p[2]);
                }
                out.extend(std::iter::repeat_n(p[1], wc + 2));
            }
            out.push(p[3]);
            out.push('\n');
        };
        let line = |cells: Vec<String>, out: &mut String| {
            out.push(bar);
            for (c, text) in cells.iter().enumerate() {
                out.push(' ');
                out.push_str(&pad(text, w[c], self.align_of(c)));
                out.push(' ');
                out.push(bar);
            }
            out.push('\n');
        };
        let mut out = String::new();
        rule(top, &mut out);
        line(self.header.iter().map(|h| map(h)).collect(), &mut out);
        rule(mid, &mut out);
        for r in 0..self.rows.len() {
            line(
                (0..self.header.len())
                    .map(|c| map(self.cell(r, c)))
                    .collect(),
                &mut out,
            );
        }
        rule(bot, &mut out);
        out
    }

    /// An HTML `<table>` inside a `<div class="scroll">` (so that a wide table scrolls within
    /// its own box rather than widening the page), every cell escaped.
    pub fn to_html(&self) -> String {
        let mut out = String::from("<div class=\"scroll\"><table>\n<thead><tr>");
        for (c, h) in self.header.iter().enumerate() {
            out.push_str(&format!(
                "<th{}>{}</th>",
                class(self.align_of(c)),
                escape(h)
            ));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for r in 0..self.rows.len() {
            out.push_str("<tr>");
            for c in 0..self.header.len() {
                let text = escape(self.cell(r, c));
                let link = self.links.get(r).and_then(Option::as_ref);
                let content = match link {
                    Some(href) if c == 0 => format!("<a href=\"{}\">{text}</a>", escape(href)),
                    _ => text,
                };
                out.push_str(&format!("<td{}>{content}</td>", class(self.align_of(c))));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table></div>\n");
        out
    }
}

fn class(a: Align) -> &'static str {
    match a {
        Align::Left => "",
        Align::Right => " class=\"num\"",
    }
}

/// Display width in characters (every character ccbench prints is one column wide).
fn width(s: &str) -> usize {
    s.chars().count()
}

fn pad(s: &str, w: usize, align: Align) -> String {
    let fill = " ".repeat(w.saturating_sub(width(s)));
    match align {
        Align::Left => format!("{s}{fill}"),
        Align::Right => format!("{fill}{s}"),
    }
}

/// Newlines and tabs become spaces so that a cell stays on its row.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A cell for a markdown table: one line, with `|` and `\` escaped.
pub(crate) fn markdown_cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Transliterates the symbols ccbench prints to ASCII; anything else non-ASCII becomes `?`.
pub(crate) fn to_ascii(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            'µ' | 'μ' => out.push('u'),
            '×' => out.push('x'),
            '–' | '—' | '−' => out.push('-'),
            '…' => out.push_str("..."),
            '·' => out.push('/'),
            '≈' => out.push('~'),
            '→' => out.push_str("->"),
            '≥' => out.push_str(">="),
            '≤' => out.push_str("<="),
            '±' => out.push_str("+-"),
            c if c.is_ascii() => out.push(c),
            _ => out.push('?'),
        }
    }
    out
}

/// One CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// CSV text from a header and rows (lines end with `\n`).
pub(crate) fn csv(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = header
        .iter()
        .map(|h| csv_field(h))
        .collect::<Vec<_>>()
        .join(",");
    out.push('\n');
    for row in rows {
        out.push_str(
            &row.iter()
                .map(|c| csv_field(c))
                .collect::<Vec<_>>()
                .join(","),
        );
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(["name", "time"]).right([1]);
        t.push(vec!["seal".into(), "1.23 µs".into()]);
        t.push(vec!["a|b".into(), "12 ns".into()]);
        t
    }

    #[test]
    fn markdown() {
        assert_eq!(
            sample().to_markdown(),
            "| name |    time |\n\
             |:-----|--------:|\n\
             | seal | 1.23 µs |\n\
             | a\\|b |   12 ns |\n"
        );
    }

    #[test]
    fn terminal_unicode_and_ascii() {
        assert_eq!(
            sample().to_terminal(Charset::Unicode),
            "┌──────┬─────────┐\n\
             │ name │    time │\n\
             ├──────┼─────────┤\n\
             │ seal │ 1.23 µs │\n\
             │ a|b  │   12 ns │\n\
             └──────┴─────────┘\n"
        );
        assert_eq!(
            sample().to_terminal(Charset::Ascii),
            "+------+---------+\n\
             | name |    time |\n\
             +------+---------+\n\
             | seal | 1.23 us |\n\
             | a|b  |   12 ns |\n\
             +------+---------+\n"
        );
    }

    #[test]
    fn csv_quoting() {
        let text = csv(
            &["a", "b"],
            &[vec!["x,y".into(), "say \"hi\"".into()], vec!["1".into()]],
        );
        assert_eq!(text, "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n1\n");
    }

    #[test]
    fn html_escapes_cells() {
        let mut t = Table::new(["<b>"]);
        t.push(vec!["<script>alert(1)</script>".into()]);
        let h = t.to_html();
        assert!(!h.contains("<script>"));
        assert!(h.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(h.contains("&lt;b&gt;"));
    }

    /// A plain RFC 4180 reader, as the reference for the writer.
    fn parse_csv(text: &str) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        let mut row = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut field)),
                (false, '\n') => {
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                (false, c) => field.push(c),
            }
        }
        rows
    }

    proptest::proptest! {
        #[test]
        fn csv_round_trips(rows in proptest::collection::vec(
            proptest::collection::vec("[a-z,\"\n\r µ|]{0,8}", 3), 0..6)
        ) {
            let text = csv(&["a", "b", "c"], &rows);
            let parsed = parse_csv(&text);
            proptest::prop_assert_eq!(&parsed[0], &vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]);
            proptest::prop_assert_eq!(&parsed[1..], &rows[..]);
        }

        #[test]
        fn markdown_rows_keep_their_columns(cells in proptest::collection::vec("[a-z|\\\\\n<]{0,6}", 3)) {
            let mut t = Table::new(["x", "y", "z"]);
            t.push(cells);
            let md = t.to_markdown();
            for line in md.lines() {
                // Unescaped pipes: 4 per line (borders and separators).
                let mut n = 0;
                let mut escaped = false;
                for c in line.chars() {
                    match (escaped, c) {
                        (false, '\\') => escaped = true,
                        (false, '|') => n += 1,
                        _ => escaped = false,
                    }
                }
                proptest::prop_assert_eq!(n, 4, "{}", line);
            }
            proptest::prop_assert_eq!(md.lines().count(), 3);
        }
    }
}
