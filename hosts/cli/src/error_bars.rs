//! Error bars on the CLI's predictions (`--interval`, `--residuals`): the interval of each
//! predicted time and rate from the out-of-fold residuals of comparable validation cases
//! (`perfcast_validation::intervals`), appended to the table rows, as `error_bars` in JSON
//! and as `.lo`/`.hi` rows in CSV.

use perfcast_render::num;
use perfcast_validation::cases::Kind;
use perfcast_validation::intervals::{Class, Direction, Interval, Residuals};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `--interval` and `--residuals`, for every command that predicts.
#[derive(Debug, Clone, clap::Args)]
pub struct IntervalArgs {
    /// Error bars: the level of each prediction's interval, in percent (e.g. 80, 90), or
    /// `none`.
    #[arg(long = "interval", value_name = "PERCENT", default_value = "80", value_parser = parse_level)]
    pub interval: Level,
    /// The residuals the error bars come from (`perfcast calibrate --residuals`); default: the
    /// shipped configs/validation/residuals.toml.
    #[arg(long = "residuals", value_name = "FILE")]
    pub residuals: Option<PathBuf>,
}

/// An interval level (a fraction), or none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level(pub Option<f64>);

fn parse_level(s: &str) -> Result<Level, String> {
    if s == "none" {
        return Ok(Level(None));
    }
    let p: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a percentage (e.g. 80) or `none`"))?;
    if !(p.is_finite() && p > 0.0 && p < 100.0) {
        return Err(format!(
            "{s}: the interval level is a percentage strictly between 0 and 100"
        ));
    }
    Ok(Level(Some(p / 100.0)))
}

impl IntervalArgs {
    /// The residuals and the level, `None` for `--interval none`.
    pub fn load(&self) -> anyhow::Result<Option<(Residuals, f64)>> {
        let Some(level) = self.interval.0 else {
            return Ok(None);
        };
        let r = match &self.residuals {
            Some(p) => Residuals::load(p),
            None => Residuals::embedded(),
        }
        .map_err(anyhow::Error::msg)?;
        Ok(Some((r, level)))
    }

    /// The interval of a `kind` prediction from the resolved scenario `sc` (`None` without
    /// error bars or without enough residuals).
    pub fn for_scenario(
        &self,
        sc: &perfcast_scenario::Scenario,
        kind: Kind,
    ) -> anyhow::Result<Option<Interval>> {
        Ok(self
            .load()?
            .and_then(|(r, level)| r.interval(&Class::of_scenario(sc, kind), level, None, None)))
    }
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
    #[serde(flatten)]
    pub source: &'a Interval,
    pub metrics: BTreeMap<&'a str, MetricInterval>,
}

/// A metric the error bars cover: JSON/CSV name, table row label, value, direction, and how
/// the table shows a bound.
#[derive(Clone)]
pub struct Row<'a> {
    pub name: &'a str,
    pub label: &'a str,
    pub value: f64,
    pub direction: Direction,
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
    let describe = format!("  error bars: {}\n", iv.describe());
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
                out.push_str(&iv.label(r.value, r.direction, r.show));
                done[i] = true;
            }
        }
        out.push('\n');
        if !placed && body.starts_with(after.trim_start()) {
            out.push_str(&describe);
            placed = true;
        }
    }
    if !placed {
        out.push_str(&describe);
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
    use super::*;

    #[test]
    fn levels_and_annotations() {
        assert_eq!(parse_level("80").unwrap(), Level(Some(0.8)));
        assert_eq!(parse_level("92.5%").unwrap(), Level(Some(0.925)));
        assert_eq!(parse_level("none").unwrap(), Level(None));
        for bad in ["0", "100", "x", "-5", "nan"] {
            assert!(parse_level(bad).is_err(), "{bad}");
        }
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
