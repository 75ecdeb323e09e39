//! Tables: rows of text cells rendered as aligned columns for a terminal or as RFC 4180 CSV.

/// A table rendered as aligned text or CSV.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// The column headers.
    pub headers: Vec<String>,
    /// Columns aligned to the right (numbers).
    pub numeric: Vec<bool>,
    /// The cells, row by row.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these `(header, numeric)` columns and no rows.
    pub fn new(headers: &[(&str, bool)]) -> Self {
        Table {
            headers: headers.iter().map(|(h, _)| h.to_string()).collect(),
            numeric: headers.iter().map(|(_, n)| *n).collect(),
            rows: Vec::new(),
        }
    }

    /// A table of left-aligned columns (for tables only written as CSV).
    pub fn with_headers(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            numeric: vec![false; headers.len()],
            rows: Vec::new(),
        }
    }

    /// Add a row (one cell per column; extra cells are not rendered).
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Rows so far.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// No rows yet.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Aligned columns separated by two spaces, a dashed rule under the header; a record per
    /// row ([`Table::render_vertical`]) when that is wider than the terminal
    /// ([`set_terminal_width`]).
    pub fn render(&self) -> String {
        self.render_within(terminal_width())
    }

    /// [`Table::render`] for a terminal of `width` columns (`None`: no limit): the aligned
    /// columns when they fit, else a record per row.
    pub fn render_within(&self, width: Option<usize>) -> String {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let total = widths.iter().sum::<usize>() + 2 * n.saturating_sub(1);
        match width {
            Some(w) if total > w && !self.rows.is_empty() => self.render_vertical(w),
            _ => self.render_columns(&widths),
        }
    }

    /// One record per row: a rule naming the row, then `header  value` lines (what a table
    /// too wide for the terminal becomes; the rule is at most `width` wide).
    pub fn render_vertical(&self, width: usize) -> String {
        let n = self.headers.len();
        let key = self
            .headers
            .iter()
            .map(|h| h.chars().count())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for (i, r) in self.rows.iter().enumerate() {
            let label = format!("-[ row {} ]", i + 1);
            let rule = width.clamp(label.len(), 40);
            out.push_str(&label);
            out.push_str(&"-".repeat(rule - label.len()));
            out.push('\n');
            for (h, c) in self.headers.iter().zip(r).take(n) {
                let pad = key - h.chars().count();
                out.push_str(format!("{h}{}  {c}", " ".repeat(pad)).trim_end());
                out.push('\n');
            }
        }
        out
    }

    fn render_columns(&self, width: &[usize]) -> String {
        let n = self.headers.len();
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate().take(n) {
                let pad = width[i].saturating_sub(c.chars().count());
                if i > 0 {
                    s.push_str("  ");
                }
                if self.numeric[i] {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    if i + 1 < n {
                        s.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        let mut out = String::new();
        line(&self.headers, &mut out);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule, &mut out);
        for r in &self.rows {
            line(r, &mut out);
        }
        out
    }

    /// RFC 4180 CSV: a header line, then one line per row.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            out.push_str(&csv_line(r));
            out.push('\n');
        }
        out
    }
}

/// Columns of the terminal the tables are written to (0: no limit).
static TERMINAL_WIDTH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Narrowest terminal a table is fitted to: below it, the columns are kept (a record per row
/// would not help).
const MIN_WIDTH: usize = 40;

/// Fit the tables [`Table::render`] draws from now on to a terminal of `width` columns
/// (`None`: no limit, the default; what a host sets when its standard output is a terminal).
pub fn set_terminal_width(width: Option<usize>) {
    let w = width.filter(|w| *w >= MIN_WIDTH).unwrap_or(0);
    TERMINAL_WIDTH.store(w, std::sync::atomic::Ordering::Relaxed);
}

fn terminal_width() -> Option<usize> {
    match TERMINAL_WIDTH.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        w => Some(w),
    }
}

impl Table {
    /// The table of an RFC 4180 CSV text with a header line (what [`Table::csv`] writes):
    /// quoted fields with doubled quotes and line breaks inside. A row whose field count is
    /// not the header's is an error naming its line. Every column is taken as text
    /// (`numeric` false).
    pub fn from_csv(text: &str) -> Result<Table, String> {
        let mut records: Vec<(usize, Vec<String>)> = Vec::new();
        let (mut row, mut field) = (Vec::new(), String::new());
        let (mut quoted, mut line, mut start) = (false, 1, 1);
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => {
                    line += usize::from(c == '\n');
                    field.push(c);
                }
                (false, '"') if field.is_empty() => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut field)),
                (false, '\r') if chars.peek() == Some(&'\n') => {}
                (false, '\n') => {
                    row.push(std::mem::take(&mut field));
                    records.push((start, std::mem::take(&mut row)));
                    line += 1;
                    start = line;
                }
                (false, c) => field.push(c),
            }
        }
        if quoted {
            return Err(format!("line {start}: a quoted field is not closed"));
        }
        if !field.is_empty() || !row.is_empty() {
            row.push(field);
            records.push((start, row));
        }
        let mut records = records.into_iter();
        let Some((_, headers)) = records.next() else {
            return Err("no header line".into());
        };
        let mut rows = Vec::new();
        for (at, r) in records {
            if r.len() != headers.len() {
                return Err(format!(
                    "line {at}: {} fields where the header has {}",
                    r.len(),
                    headers.len()
                ));
            }
            rows.push(r);
        }
        Ok(Table {
            numeric: vec![false; headers.len()],
            headers,
            rows,
        })
    }
}

/// One CSV line (no line break) of `cells`.
pub fn csv_line(cells: &[String]) -> String {
    let cells: Vec<String> = cells.iter().map(|c| csv_cell(c)).collect();
    cells.join(",")
}

/// A CSV field (RFC 4180): quoted, with inner quotes doubled, when it holds a comma, a quote
/// or a line break.
pub fn csv_cell(c: &str) -> String {
    if c.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", c.replace('"', "\"\""))
    } else {
        c.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table that fits keeps its columns; one wider than the terminal becomes a record per
    /// row with every cell; no limit, or a terminal narrower than 40 columns, keeps the
    /// columns.
    #[test]
    fn a_table_wider_than_the_terminal_becomes_records() {
        let mut t = Table::new(&[("plan", false), ("step time (s)", true)]);
        t.push(vec!["tp=8 pp=16 dp=8".into(), "29.5".into()]);
        t.push(vec!["tp=4 pp=32 dp=8".into(), "31.25".into()]);
        let columns = "plan             step time (s)\n\
                       ---------------  -------------\n\
                       tp=8 pp=16 dp=8           29.5\n\
                       tp=4 pp=32 dp=8          31.25\n";
        assert_eq!(t.render_within(None), columns);
        assert_eq!(t.render_within(Some(80)), columns);
        let records = "-[ row 1 ]-------------------\n\
                       plan           tp=8 pp=16 dp=8\n\
                       step time (s)  29.5\n\
                       -[ row 2 ]-------------------\n\
                       plan           tp=4 pp=32 dp=8\n\
                       step time (s)  31.25\n";
        assert_eq!(t.render_within(Some(29)), records);
        set_terminal_width(Some(30)); // below the narrowest: no limit
        assert_eq!(t.render(), columns);
        set_terminal_width(None);
        assert_eq!(t.render(), columns);
    }

    /// What `csv` writes, `from_csv` reads back: commas, quotes and line breaks in cells,
    /// empty cells; a short row and an open quote are errors naming the line.
    #[test]
    fn csv_round_trips_and_bad_csv_names_the_line() {
        let mut t = Table::new(&[("a", false), ("b, c", true), ("d", false)]);
        t.push(vec!["x".into(), "say \"hi\"".into(), "".into()]);
        t.push(vec!["two\nlines".into(), "1.5".into(), "z".into()]);
        let back = Table::from_csv(&t.csv()).unwrap();
        assert_eq!((back.headers, back.rows), (t.headers, t.rows));
        let crlf = Table::from_csv("a,b\r\n1,2\r\n").unwrap();
        assert_eq!(crlf.rows, vec![vec!["1".to_string(), "2".to_string()]]);
        for (text, want) in [
            ("a,b\n1,2\n3\n", "line 3: 1 fields where the header has 2"),
            ("a,b\n\"1,2\n", "line 2: a quoted field is not closed"),
            ("", "no header line"),
        ] {
            assert_eq!(Table::from_csv(text).unwrap_err(), want, "{text:?}");
        }
    }

    #[test]
    fn table_aligns_and_csv_quotes() {
        let mut t = Table::new(&[("name", false), ("value", true)]);
        t.push(vec!["a".into(), "1".into()]);
        t.push(vec!["long,name".into(), "100".into()]);
        let r = t.render();
        assert_eq!(
            r,
            "name       value\n---------  -----\na              1\nlong,name    100\n"
        );
        assert_eq!(t.csv(), "name,value\na,1\n\"long,name\",100\n");
        let mut c = Table::with_headers(&["a", "b"]);
        c.push(vec!["x,y".into(), "say \"hi\"".into()]);
        assert_eq!(c.csv(), "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n");
        assert_eq!((c.len(), c.is_empty()), (1, false));
        assert_eq!(csv_cell("a\r\nb"), "\"a\r\nb\"");
    }
}
