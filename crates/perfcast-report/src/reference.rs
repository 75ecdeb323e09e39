//! The `[reference]` figures of a config beside a report's prediction (`predict`, `infer`):
//! a table section, JSON and CSV rows.

use perfcast_scenario::reference::{Compared, Reference};
use serde::Serialize;
use std::fmt::Write as _;

/// What JSON reports carry under `reference`.
#[derive(Debug, Serialize)]
pub struct ReferenceOut<'a> {
    /// Where the published figures come from.
    pub source: &'a str,
    /// A note on them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'a str>,
    /// Each figure beside its prediction.
    pub compared: Vec<Compared>,
}

/// The comparison of `r` with the report's metrics (`predicted(key)`).
pub fn compare<'a>(r: &'a Reference, predicted: impl Fn(&str) -> Option<f64>) -> ReferenceOut<'a> {
    ReferenceOut {
        source: &r.source,
        note: r.note.as_deref(),
        compared: r.compare(predicted),
    }
}

fn value(unit: &str, v: f64) -> String {
    match unit {
        "fraction" => format!("{:.1}%", 100.0 * v),
        _ => perfcast_render::num(v),
    }
}

/// The table section: one line per figure, predicted, published, the difference.
pub fn table(out: &ReferenceOut<'_>) -> String {
    let mut s = format!("Published ({})\n", out.source);
    for c in &out.compared {
        let unit = if c.unit == "fraction" { "" } else { c.unit };
        let _ = writeln!(
            s,
            "  {:<27} predicted {:>10} {unit:<7}  published {:>10} {unit:<7}  {:+.1}%",
            c.label,
            value(c.unit, c.predicted),
            value(c.unit, c.published),
            100.0 * c.difference
        );
    }
    if let Some(n) = out.note {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}

/// `reference.KEY,published,unit` and `reference.KEY.difference,fraction,` rows.
pub fn csv(out: &ReferenceOut<'_>) -> String {
    let mut s = String::new();
    for c in &out.compared {
        let _ = writeln!(s, "reference.{},{},{}", c.key, c.published, c.unit);
        let _ = writeln!(
            s,
            "reference.{}.difference,{},fraction",
            c.key, c.difference
        );
    }
    s
}
