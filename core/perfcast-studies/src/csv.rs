//! A minimal CSV writer (RFC 4180 quoting) and number formatting for study outputs.

/// A CSV table built row by row.
#[derive(Debug, Clone, Default)]
pub struct Csv {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A number with 6 significant digits, without exponent noise for ordinary magnitudes.
pub fn num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let e = v.abs().log10().floor() as i32;
    if !(-4..=12).contains(&e) {
        return format!("{v:.5e}");
    }
    let decimals = (5 - e).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

impl Csv {
    pub fn new(header: &[&str]) -> Self {
        Csv {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }
    /// Add a row; it must have one field per column.
    pub fn row(&mut self, fields: Vec<String>) {
        debug_assert_eq!(fields.len(), self.header.len());
        self.rows.push(fields);
    }
    pub fn len(&self) -> usize {
        self.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    pub fn render(&self) -> String {
        let mut out = String::new();
        let line = |f: &[String]| f.iter().map(|s| field(s)).collect::<Vec<_>>().join(",");
        out.push_str(&line(&self.header));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_quoting() {
        let table = [
            (0.0, "0"),
            (1.5, "1.5"),
            (123456.789, "123457"),
            (0.000123456, "0.000123456"),
            (2e-7, "2.00000e-7"),
            (35.0, "35"),
        ];
        for (v, s) in table {
            assert_eq!(num(v), s, "{v}");
        }
        let mut c = Csv::new(&["a", "b"]);
        c.row(vec!["x,y".into(), "say \"hi\"".into()]);
        assert_eq!(c.render(), "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n");
    }
}
