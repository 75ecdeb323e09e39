//! Validation results: per case, per group, overall, and their JSON (`perfcast_report::
//! validation` writes the terminal table and the Parquet rows).
//!
//! `rel_error = (predicted - measured) / measured` (signed; positive = over-predicted). MAPE is
//! the mean of `|rel_error|` over the cases of a group on each case's *first published metric*:
//! training — iteration time, else tokens/s per GPU, else TFLOP/s per GPU, else MFU, else the
//! per-layer time (forward + backward of one layer, both published); inference — request
//! latency, else TTFT, else TPOT, else tokens/s per GPU, else tokens/s.

use crate::cases::{Case, Kind, Metric, Mode};
use crate::intervals::{direction, Class, Interval, Residuals};
use crate::stacks::StackMatch;
use serde::Serialize;
use std::collections::BTreeMap;

/// Outcome of one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// The model cannot represent the case (reason given).
    Unsupported,
    /// The engine rejected or failed on the case (its message given).
    Error,
}

/// One published metric, predicted and compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricResult {
    pub name: Metric,
    /// `None` when the model does not predict this metric.
    pub predicted: Option<f64>,
    pub measured: f64,
    pub rel_error: Option<f64>,
    /// The interval of the prediction (`[lo, hi]`, at the level of the case's `error_bars`),
    /// when error bars were asked for and the metric is a time or a rate.
    pub interval: Option<[f64; 2]>,
}

impl MetricResult {
    pub fn new(name: Metric, predicted: Option<f64>, measured: f64) -> Self {
        let predicted = predicted.filter(|p| p.is_finite());
        let rel_error = predicted
            .map(|p| (p - measured) / measured)
            .filter(|e| e.is_finite());
        MetricResult {
            name,
            predicted,
            measured,
            rel_error,
            interval: None,
        }
    }
}

/// One case's result (the JSON `cases[]` entry).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    pub id: String,
    pub group: String,
    pub kind: Kind,
    pub status: Status,
    /// Why a case is unsupported or failed; warnings (e.g. a flagged source inconsistency)
    /// for a case that ran.
    pub reason: Option<String>,
    pub metrics: Vec<MetricResult>,
    /// The first published metric, scored (not serialised with the case: see the summary).
    #[serde(skip)]
    pub first: Option<FirstMetric>,
    /// Where the predicted time goes (name, seconds or fraction), for the table.
    #[serde(skip)]
    pub breakdown: Vec<(String, f64)>,
    /// `[case.reference]` step time and the predicted one: shown, never scored.
    #[serde(skip)]
    pub reference: Option<(f64, Option<f64>)>,
    /// Where the metrics' intervals come from (`None` without error bars).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_bars: Option<Interval>,
    /// The software stack the case was mapped to (`configs/validation/stacks.toml`) and the
    /// rule that chose it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<StackMatch>,
}

impl CaseResult {
    /// Give each predicted metric an interval: the case's class (`family`: its stack's), the
    /// residuals of its own group (and of itself) left out.
    pub fn attach_interval(
        &mut self,
        case: &Case,
        family: &str,
        residuals: &Residuals,
        level: f64,
    ) {
        let class = Class::of_case(case, family);
        let Some(iv) = residuals.interval(&class, level, Some(&case.group), Some(&case.id)) else {
            return;
        };
        for m in &mut self.metrics {
            if let (Some(p), Some(d)) = (m.predicted, direction(m.name)) {
                m.interval = Some(iv.around(p, d));
            }
        }
        self.error_bars = Some(iv);
    }

    /// The result of metric `m`, if the case publishes it.
    pub fn metric(&self, m: Metric) -> Option<&MetricResult> {
        self.metrics.iter().find(|x| x.name == m)
    }
}

/// The metric a case is scored on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FirstMetric {
    pub id: String,
    pub group: String,
    /// A schema metric name, or `layer_fwd_ms+layer_bwd_ms` for a per-layer case.
    pub metric: String,
    pub predicted: f64,
    pub measured: f64,
    pub rel_error: f64,
    /// The prediction's interval, when it has one.
    pub interval: Option<[f64; 2]>,
}

impl FirstMetric {
    /// Whether the measurement lies in the prediction's interval (`None` without one).
    pub fn inside(&self) -> Option<bool> {
        self.interval
            .map(|[lo, hi]| lo <= self.measured && self.measured <= hi)
    }
}

/// The order in which a case's first published metric is chosen.
pub fn first_metric_order(kind: Kind) -> &'static [Metric] {
    match kind {
        Kind::Training => &[
            Metric::IterationTimeS,
            Metric::TokensPerSPerGpu,
            Metric::TflopsPerGpu,
            Metric::Mfu,
            Metric::GpuHoursPerTrillionTokens,
        ],
        Kind::Inference => &[
            Metric::LatencyS,
            Metric::TtftMs,
            Metric::TpotMs,
            Metric::TokensPerSPerGpu,
            Metric::TokensPerS,
        ],
    }
}

/// The first published metric of a case's results, scored when it was predicted.
/// `None` when the first published metric has no prediction (the case is not scored).
pub fn first_metric(r: &CaseResult) -> Option<FirstMetric> {
    let get = |m: Metric| r.metric(m);
    let make = |metric: String, p: f64, meas: f64, interval: Option<[f64; 2]>| {
        let e = (p - meas) / meas;
        e.is_finite().then(|| FirstMetric {
            id: r.id.clone(),
            group: r.group.clone(),
            metric,
            predicted: p,
            measured: meas,
            rel_error: e,
            interval,
        })
    };
    for m in first_metric_order(r.kind) {
        if let Some(x) = get(*m) {
            return x
                .predicted
                .and_then(|p| make(m.name().to_string(), p, x.measured, x.interval));
        }
    }
    if r.kind == Kind::Training {
        match (get(Metric::LayerFwdMs), get(Metric::LayerBwdMs)) {
            (Some(f), Some(b)) => {
                return match (f.predicted, b.predicted) {
                    (Some(pf), Some(pb)) => make(
                        "layer_fwd_ms+layer_bwd_ms".into(),
                        pf + pb,
                        f.measured + b.measured,
                        // One relative interval for both: the bounds add.
                        f.interval
                            .zip(b.interval)
                            .map(|(x, y)| [x[0] + y[0], x[1] + y[1]]),
                    ),
                    _ => None,
                };
            }
            (Some(x), None) | (None, Some(x)) => {
                return x
                    .predicted
                    .and_then(|p| make(x.name.name().to_string(), p, x.measured, x.interval))
            }
            (None, None) => {}
        }
    }
    None
}

/// Statistics of a set of cases.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GroupSummary {
    pub kind: Option<Kind>,
    pub cases: usize,
    pub ok: usize,
    pub unsupported: usize,
    pub error: usize,
    /// Cases scored on their first metric.
    pub scored: usize,
    /// Mean |rel_error| of the first metric (`None` when nothing was scored).
    pub mape: Option<f64>,
    /// Mean signed rel_error of the first metric (bias: > 0 over-predicts).
    pub mean_rel_error: Option<f64>,
    /// Largest |rel_error| and its case.
    pub max_abs_error: Option<f64>,
    pub worst_case: Option<String>,
    /// Scored cases whose first metric has an interval.
    pub with_interval: usize,
    /// Of those, the measurements inside their interval.
    pub inside_interval: usize,
}

/// The JSON `summary`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub groups: BTreeMap<String, GroupSummary>,
    pub overall: GroupSummary,
    pub training: GroupSummary,
    pub inference: GroupSummary,
    /// Every scored case's first metric.
    pub first_metrics: Vec<FirstMetric>,
    /// The scored cases with the largest |rel_error|, worst first (at most 10).
    pub worst: Vec<FirstMetric>,
    /// Per kind of interval (the cross-validation its residuals come from: `groups` for a
    /// known stack on known hardware, `stacks` for a stack no rule knows, `hardware` for a
    /// new GPU generation), how many of the residuals' own measurements the intervals hold,
    /// each interval drawn without what its fold held out
    /// ([`crate::intervals::Residuals::coverage`]).
    pub interval_kinds: Vec<IntervalCoverage>,
    /// perfcast beside the in-project roofline baseline on the cases both score
    /// ([`crate::baseline`]); absent when the run did not fit it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<crate::baseline::Comparison>,
}

/// How many measurements one kind of interval holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntervalCoverage {
    /// The cross-validation (`groups`, `stacks`, `hardware`, `cases`).
    pub cv: String,
    /// Measurements inside their interval.
    pub inside: usize,
    /// Measurements with an interval.
    pub scored: usize,
}

fn summarise<'a>(results: impl Iterator<Item = &'a CaseResult>) -> GroupSummary {
    let mut g = GroupSummary::default();
    let mut errs = Vec::new();
    for r in results {
        g.kind = match g.kind {
            None => Some(r.kind),
            Some(k) if k == r.kind => Some(k),
            Some(_) => None,
        };
        g.cases += 1;
        match r.status {
            Status::Ok => g.ok += 1,
            Status::Unsupported => g.unsupported += 1,
            Status::Error => g.error += 1,
        }
        if let Some(f) = &r.first {
            errs.push((f.rel_error, f.id.clone()));
            if let Some(inside) = f.inside() {
                g.with_interval += 1;
                g.inside_interval += usize::from(inside);
            }
        }
    }
    g.scored = errs.len();
    if !errs.is_empty() {
        let n = errs.len() as f64;
        g.mape = Some(errs.iter().map(|e| e.0.abs()).sum::<f64>() / n);
        g.mean_rel_error = Some(errs.iter().map(|e| e.0).sum::<f64>() / n);
        let w = errs
            .iter()
            .max_by(|a, b| a.0.abs().total_cmp(&b.0.abs()))
            .cloned();
        g.max_abs_error = w.as_ref().map(|w| w.0.abs());
        g.worst_case = w.map(|w| w.1);
    }
    g
}

/// The whole validation run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub cases: Vec<CaseResult>,
    pub summary: Summary,
}

impl Report {
    pub fn new(mut cases: Vec<CaseResult>) -> Report {
        for c in &mut cases {
            c.first = if c.status == Status::Ok {
                first_metric(c)
            } else {
                None
            };
        }
        let mut groups = BTreeMap::new();
        let mut names: Vec<&str> = Vec::new();
        for c in &cases {
            if !names.contains(&c.group.as_str()) {
                names.push(&c.group);
            }
        }
        for n in names {
            groups.insert(
                n.to_string(),
                summarise(cases.iter().filter(|c| c.group == n)),
            );
        }
        let first_metrics: Vec<FirstMetric> =
            cases.iter().filter_map(|c| c.first.clone()).collect();
        let mut worst = first_metrics.clone();
        worst.sort_by(|a, b| b.rel_error.abs().total_cmp(&a.rel_error.abs()));
        worst.truncate(10);
        let summary = Summary {
            groups,
            overall: summarise(cases.iter()),
            training: summarise(cases.iter().filter(|c| c.kind == Kind::Training)),
            inference: summarise(cases.iter().filter(|c| c.kind == Kind::Inference)),
            first_metrics,
            worst,
            interval_kinds: Vec::new(),
            baseline: None,
        };
        Report { cases, summary }
    }

    /// The level of the error bars, if the cases have them.
    pub fn interval_level(&self) -> Option<f64> {
        self.cases
            .iter()
            .find_map(|c| c.error_bars.as_ref().map(|e| e.level))
    }

    /// Fit the roofline baseline on the cases of `file` perfcast supports (the whole file's,
    /// whatever `group` this report holds: perfcast's configuration was fitted on them too) and
    /// set it beside this report's first-metric errors, for the cases of `group`
    /// ([`crate::baseline::run`], [`crate::baseline::compare`]).
    pub fn attach_baseline(&mut self, file: &crate::cases::CasesFile, group: Option<&str>) {
        let errors: std::collections::HashMap<&str, f64> = self
            .cases
            .iter()
            .filter_map(|c| c.first.as_ref().map(|f| (c.id.as_str(), f.rel_error)))
            .collect();
        let cases: Vec<(&str, &str, Kind)> = self
            .cases
            .iter()
            .map(|c| (c.id.as_str(), c.group.as_str(), c.kind))
            .collect();
        // The baseline is fitted on the cases perfcast models, less the server-mode runs:
        // ~1,350 closed-loop and rate-driven points would outweigh every other case 3:1 in
        // its six shared parameters (perfcast's shipped fit leaves them out too, `calibrate
        // --exclude-serving`); it still predicts them, from the parameters fitted on the rest.
        let supported: std::collections::HashSet<&str> = file
            .cases
            .iter()
            .filter(|c| crate::harness::unsupported_reason(c).is_none())
            .filter(|c| c.inference.as_ref().is_none_or(|i| i.mode != Mode::Server))
            .map(|c| c.id.as_str())
            .collect();
        let run = crate::baseline::run(file, group, &|id| supported.contains(id));
        self.summary.baseline = Some(crate::baseline::compare(&errors, &cases, &run));
    }

    /// `{"cases":[...],"summary":{...}}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: &str, group: &str, kind: Kind, metrics: Vec<MetricResult>) -> CaseResult {
        CaseResult {
            id: id.into(),
            group: group.into(),
            kind,
            status: Status::Ok,
            reason: None,
            metrics,
            first: None,
            breakdown: Vec::new(),
            reference: None,
            error_bars: None,
            stack: None,
        }
    }

    /// The first-metric order of the issue, as a table: (metrics present, chosen).
    #[test]
    fn first_metric_order_table() {
        use Metric::*;
        let table: &[(Kind, &[Metric], &str)] = &[
            (
                Kind::Training,
                &[Mfu, IterationTimeS, TflopsPerGpu],
                "iteration_time_s",
            ),
            (Kind::Training, &[Hfu, TflopsPerGpu], "tflops_per_gpu"),
            (
                Kind::Training,
                &[Mfu, TokensPerSPerGpu],
                "tokens_per_s_per_gpu",
            ),
            (Kind::Training, &[Hfu, Mfu], "mfu"),
            (
                Kind::Training,
                &[LayerFwdMs, LayerBwdMs],
                "layer_fwd_ms+layer_bwd_ms",
            ),
            (Kind::Training, &[LayerBwdMs], "layer_bwd_ms"),
            (Kind::Inference, &[TtftMs, LatencyS, TpotMs], "latency_s"),
            (Kind::Inference, &[TpotMs, TtftMs], "ttft_ms"),
            (Kind::Inference, &[TokensPerS, TpotMs], "tpot_ms"),
            (
                Kind::Inference,
                &[TokensPerS, TokensPerSPerGpu],
                "tokens_per_s_per_gpu",
            ),
            (Kind::Inference, &[TokensPerS], "tokens_per_s"),
        ];
        for (kind, ms, want) in table {
            let r = case(
                "x",
                "g",
                *kind,
                ms.iter()
                    .map(|m| MetricResult::new(*m, Some(1.1), 1.0))
                    .collect(),
            );
            let f = first_metric(&r).unwrap();
            assert_eq!(f.metric, *want);
            assert!((f.rel_error - 0.1).abs() < 1e-12);
        }
        // Layer sum: (7 + 13) predicted vs (8 + 12) measured -> 0 error.
        let r = case(
            "x",
            "g",
            Kind::Training,
            vec![
                MetricResult::new(LayerFwdMs, Some(7.0), 8.0),
                MetricResult::new(LayerBwdMs, Some(13.0), 12.0),
            ],
        );
        assert_eq!(first_metric(&r).unwrap().rel_error, 0.0);
        // A first metric without prediction leaves the case unscored (no fallback to a later one).
        let r = case(
            "x",
            "g",
            Kind::Training,
            vec![
                MetricResult::new(IterationTimeS, None, 8.0),
                MetricResult::new(Mfu, Some(0.5), 0.5),
            ],
        );
        assert!(first_metric(&r).is_none());
    }

    #[test]
    fn summary_counts_and_mape() {
        let mut cases = vec![
            case(
                "a",
                "g1",
                Kind::Training,
                vec![MetricResult::new(Metric::IterationTimeS, Some(1.1), 1.0)],
            ),
            case(
                "b",
                "g1",
                Kind::Training,
                vec![MetricResult::new(Metric::IterationTimeS, Some(0.7), 1.0)],
            ),
            case(
                "c",
                "g2",
                Kind::Inference,
                vec![MetricResult::new(Metric::LatencyS, Some(2.0), 2.0)],
            ),
            case(
                "d",
                "g2",
                Kind::Inference,
                vec![MetricResult::new(Metric::TokensPerS, None, 2.0)],
            ),
        ];
        cases[3].status = Status::Unsupported;
        cases[3].reason = Some("why".into());
        let r = Report::new(cases);
        let g1 = &r.summary.groups["g1"];
        assert_eq!((g1.cases, g1.ok, g1.scored), (2, 2, 2));
        assert!((g1.mape.unwrap() - 0.2).abs() < 1e-12);
        assert!((g1.mean_rel_error.unwrap() + 0.1).abs() < 1e-12);
        assert_eq!(g1.worst_case.as_deref(), Some("b"));
        let g2 = &r.summary.groups["g2"];
        assert_eq!((g2.cases, g2.ok, g2.unsupported, g2.scored), (2, 1, 1, 1));
        assert_eq!(r.summary.overall.cases, 4);
        assert_eq!(r.summary.worst[0].id, "b");
        let j = r.to_json();
        let c0 = &j["cases"][0];
        let keys: Vec<&String> = c0.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["group", "id", "kind", "metrics", "reason", "status"]);
        assert_eq!(c0["metrics"][0]["name"], "iteration_time_s");
        assert_eq!(j["cases"][3]["status"], "unsupported");
    }
}
