//! Error bars beside a prediction (`--interval`, `--residuals`): the interval of each predicted
//! time and rate from the out-of-fold residuals of comparable validation cases
//! (`perfcast_validation::intervals`), appended to the table rows, as `error_bars` in JSON
//! and as `.lo`/`.hi` rows in CSV.

use perfcast_render::num;
use perfcast_validation::intervals::{Direction, Interval};
use serde::Serialize;
use std::collections::BTreeMap;

/// A level as a percentage without trailing zeros (`80`, `92.5`).
pub fn level(level: f64) -> String {
    let p = 100.0 * level;
    if (p - p.round()).abs() < 1e-9 {
        format!("{}", p.round() as i64)
    } else {
        format!("{p:.1}")
    }
}

/// One line on where an interval comes from.
pub fn describe(iv: &Interval) -> String {
    let mut s = format!(
        "{}% intervals from {} out-of-fold residuals of {}",
        level(iv.level),
        iv.residuals,
        iv.class
    );
    if let Some(n) = &iv.note {
        s.push_str(&format!(" ({n})"));
    }
    s
}

/// `(lo–hi, 80%)` beside a value of direction `d` shown as `format(value)`.
pub fn label(iv: &Interval, value: f64, d: Direction, format: impl Fn(f64) -> String) -> String {
    let [lo, hi] = iv.around(value, d);
    format!("({}–{}, {}%)", format(lo), format(hi), level(iv.level))
}

/// One metric's interval, for JSON.
#[derive(Debug, Serialize)]
pub struct MetricInterval {
    /// The prediction.
    pub value: f64,
    /// `[lo, hi]`.
    pub interval: [f64; 2],
}

/// `error_bars` in JSON: where the intervals come from and each metric's.
#[derive(Debug, Serialize)]
pub struct ErrorBars<'a> {
    /// Where the intervals come from.
    #[serde(flatten)]
    pub source: &'a Interval,
    /// Each metric's interval, by its JSON name.
    pub metrics: BTreeMap<&'a str, MetricInterval>,
}

/// A metric the error bars cover: JSON/CSV name, table row label, value, direction, and how
/// the table shows a bound.
#[derive(Clone)]
pub struct Row<'a> {
    /// JSON and CSV name.
    pub name: &'a str,
    /// The table row's label (empty: not in the table).
    pub label: &'a str,
    /// The prediction.
    pub value: f64,
    /// Whether a larger value is slower (a time) or faster (a rate).
    pub direction: Direction,
    /// How the table shows a bound.
    pub show: fn(f64) -> String,
}

impl Row<'_> {
    /// A time (seconds or milliseconds, as the value is) or a rate shown with `num`.
    pub fn new(name: &'static str, label: &'static str, value: f64, d: Direction) -> Row<'static> {
        Row {
            name,
            label,
            value,
            direction: d,
            show: num,
        }
    }
}

/// The JSON object of `rows`.
pub fn json<'a>(iv: &'a Interval, rows: &[Row<'a>]) -> ErrorBars<'a> {
    ErrorBars {
        source: iv,
        metrics: rows
            .iter()
            .map(|r| {
                (
                    r.name,
                    MetricInterval {
                        value: r.value,
                        interval: iv.around(r.value, r.direction),
                    },
                )
            })
            .collect(),
    }
}

/// `table` with each row's interval appended to its line (the first line whose text starts
/// with the row's label followed by two spaces; a row with an empty label is not shown),
/// and the source of the error bars as a line
/// after the one starting with `after` (at the end when no line does).
pub fn annotate(table: &str, iv: &Interval, rows: &[Row], after: &str) -> String {
    let mut done = vec![false; rows.len()];
    let mut out = String::with_capacity(table.len() + 256);
    let mut placed = false;
    let source = format!("  error bars: {}\n", describe(iv));
    for line in table.lines() {
        out.push_str(line);
        let body = line.trim_start();
        for (i, r) in rows.iter().enumerate() {
            if !done[i]
                && !r.label.is_empty()
                && body.starts_with(r.label)
                && body[r.label.len()..].starts_with("  ")
            {
                out.push(' ');
                out.push_str(&label(iv, r.value, r.direction, r.show));
                done[i] = true;
            }
        }
        out.push('\n');
        if !placed && body.starts_with(after.trim_start()) {
            out.push_str(&source);
            placed = true;
        }
    }
    if !placed {
        out.push_str(&source);
    }
    out
}

/// CSV rows `NAME.lo,VALUE,UNIT` and `NAME.hi,...` (`unit` per row), and the level.
pub fn csv_rows(iv: &Interval, rows: &[(Row, &str)]) -> String {
    let mut s = format!("interval_level,{},\n", iv.level);
    for (r, unit) in rows {
        let [lo, hi] = iv.around(r.value, r.direction);
        s.push_str(&format!(
            "{}.lo,{lo},{unit}\n{}.hi,{hi},{unit}\n",
            r.name, r.name
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    // A test module: a panic with a message is its failure report.
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn levels_print_without_trailing_zeros() {
        for (l, want) in [(0.8, "80"), (0.925, "92.5"), (0.5, "50")] {
            assert_eq!(level(l), want);
        }
    }

    #[test]
    fn annotations_json_and_csv() {
        let iv = Interval {
            level: 0.8,
            low: 0.9,
            high: 1.2,
            residuals: 12,
            class: "every training case".into(),
            note: None,
        };
        let rows = [
            Row::new("time", "time", 10.0, Direction::Time),
            Row::new("rate", "rate", 10.0, Direction::Rate),
        ];
        let t = annotate(
            "x\n  time     10 s\n  rate per x  3\n  rate   10\nend\n",
            &iv,
            &rows,
            "  rate  ",
        );
        assert_eq!(
            t,
            "x\n  time     10 s (9.000–12.00, 80%)\n  rate per x  3\n  rate   10 (8.333–11.11, 80%)\n  error bars: 80% intervals from 12 out-of-fold residuals of every training case\nend\n"
        );
        let j = serde_json::to_value(json(&iv, &rows)).unwrap();
        assert_eq!(j["metrics"]["time"]["interval"][1], 12.0);
        assert_eq!(j["residuals"], 12);
        assert!(
            csv_rows(&iv, &[(Row::new("t", "t", 1.0, Direction::Time), "s")])
                .contains("t.hi,1.2,s")
        );
    }
}
