//! The report of a collectives validation: every entry (predicted, measured, error on each
//! published metric; `error` with the message when it cannot be predicted, never dropped),
//! per group the mean absolute error of the scored metric and how many meet their regime's
//! target, and the totals per regime.

use super::predict::{predict, Prediction, Regime};
use super::CollectivesFile;
use perfcast_config::Plugins;
use serde_json::{json, Value};

/// One entry's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryReport {
    /// The entry's id.
    pub id: String,
    /// Its group.
    pub group: String,
    /// The prediction, or why there is none.
    pub outcome: Result<Prediction, String>,
}

impl EntryReport {
    /// The scored metric's predicted / measured, when predicted.
    pub fn ratio(&self) -> Option<f64> {
        self.outcome
            .as_ref()
            .ok()
            .and_then(|p| p.metrics.first())
            .map(|m| m.ratio())
    }
    /// Whether it meets its regime's target.
    pub fn passes(&self) -> bool {
        match (&self.outcome, self.ratio()) {
            (Ok(p), Some(r)) => p.regime.passes(r),
            _ => false,
        }
    }
}

/// Per group: entries, predicted, meeting the target, mean absolute error of the scored
/// metric (percent), the worst ratio.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSummary {
    /// The group.
    pub group: String,
    /// Entries.
    pub entries: usize,
    /// Entries predicted.
    pub predicted: usize,
    /// Entries meeting their target.
    pub passing: usize,
    /// Mean |predicted / measured - 1|, percent.
    pub mean_abs_error_pct: f64,
    /// The same over the entries of the bandwidth regime (the 15% target), if any.
    pub bandwidth_mean_abs_error_pct: Option<f64>,
    /// The ratio farthest from 1 (in log terms).
    pub worst_ratio: f64,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The file.
    pub file: String,
    /// Every entry, in file order.
    pub entries: Vec<EntryReport>,
}

/// Predict every entry of `file` (of `group` only, when given).
pub fn run(file: &CollectivesFile, group: Option<&str>, plugins: &Plugins) -> Report {
    let entries = file
        .entries
        .iter()
        .filter(|e| group.is_none_or(|g| e.group == g))
        .map(|e| EntryReport {
            id: e.id.clone(),
            group: e.group.clone(),
            outcome: predict(e, plugins).map_err(|e| e.to_string()),
        })
        .collect();
    Report {
        file: file.file.clone(),
        entries,
    }
}

impl Report {
    /// Per-group summaries, in order of first appearance.
    pub fn groups(&self) -> Vec<GroupSummary> {
        let mut names: Vec<&str> = Vec::new();
        for e in &self.entries {
            if !names.contains(&e.group.as_str()) {
                names.push(&e.group);
            }
        }
        names
            .into_iter()
            .map(|g| {
                let es: Vec<&EntryReport> = self.entries.iter().filter(|e| e.group == g).collect();
                let ratios: Vec<f64> = es.iter().filter_map(|e| e.ratio()).collect();
                let mean = if ratios.is_empty() {
                    0.0
                } else {
                    100.0 * ratios.iter().map(|r| (r - 1.0).abs()).sum::<f64>()
                        / ratios.len() as f64
                };
                let bw: Vec<f64> = es
                    .iter()
                    .filter(|e| matches!(&e.outcome, Ok(p) if p.regime == Regime::Bandwidth))
                    .filter_map(|e| e.ratio())
                    .collect();
                let bandwidth_mean_abs_error_pct = (!bw.is_empty()).then(|| {
                    100.0 * bw.iter().map(|r| (r - 1.0).abs()).sum::<f64>() / bw.len() as f64
                });
                let worst = ratios.iter().copied().fold(1.0, |w: f64, r| {
                    if r.ln().abs() > w.ln().abs() {
                        r
                    } else {
                        w
                    }
                });
                GroupSummary {
                    group: g.to_string(),
                    entries: es.len(),
                    predicted: ratios.len(),
                    passing: es.iter().filter(|e| e.passes()).count(),
                    mean_abs_error_pct: mean,
                    bandwidth_mean_abs_error_pct,
                    worst_ratio: worst,
                }
            })
            .collect()
    }

    /// Entries of `regime` meeting their target, and predicted.
    pub fn regime_counts(&self, regime: Regime) -> (usize, usize) {
        let of: Vec<&EntryReport> = self
            .entries
            .iter()
            .filter(|e| matches!(&e.outcome, Ok(p) if p.regime == regime))
            .collect();
        (of.iter().filter(|e| e.passes()).count(), of.len())
    }

    /// Entries that could not be predicted.
    pub fn errors(&self) -> usize {
        self.entries.iter().filter(|e| e.outcome.is_err()).count()
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        let entries: Vec<Value> = self
            .entries
            .iter()
            .map(|e| match &e.outcome {
                Ok(p) => json!({
                    "id": e.id, "group": e.group, "status": "ok",
                    "regime": p.regime, "topology": p.topology,
                    "passes": e.passes(),
                    "metrics": p.metrics.iter().map(|m| json!({
                        "name": m.name, "predicted": m.predicted, "measured": m.measured,
                        "error_pct": 100.0 * (m.ratio() - 1.0),
                    })).collect::<Vec<_>>(),
                }),
                Err(msg) => json!({"id": e.id, "group": e.group, "status": "error", "reason": msg}),
            })
            .collect();
        let groups: Vec<Value> = self
            .groups()
            .iter()
            .map(|g| {
                json!({
                    "group": g.group, "entries": g.entries, "predicted": g.predicted,
                    "passing": g.passing, "mean_abs_error_pct": g.mean_abs_error_pct,
                    "bandwidth_mean_abs_error_pct": g.bandwidth_mean_abs_error_pct,
                    "worst_ratio": g.worst_ratio,
                })
            })
            .collect();
        let regime = |r: Regime| {
            let (pass, of) = self.regime_counts(r);
            json!({"passing": pass, "entries": of})
        };
        json!({
            "file": self.file,
            "entries": entries,
            "groups": groups,
            "summary": {
                "bandwidth": regime(Regime::Bandwidth),
                "mid": regime(Regime::Mid),
                "latency": regime(Regime::Latency),
                "errors": self.errors(),
            },
        })
    }
}
