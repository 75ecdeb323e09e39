//! The baseline beside perfcast: on the cases a calibration scores, and per group and kind of
//! a validation report.

use super::{run, BaselineCase, BaselineRun};
use crate::cases::{CasesFile, Kind};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The baseline on the cases a calibration scores (`ids`, in its order), fitted on those of
/// them in its objective (`fitted_on`: perfcast's fit and the baseline's see the same cases)
/// and refitted without each case's group: each case's first metric in sample and out of
/// fold, as [`crate::report::FirstMetric`]s (`None` where the baseline does not cover the
/// case).
pub fn calibration_sets(
    file: &CasesFile,
    ids: &[&str],
    fitted_on: &[&str],
) -> [Vec<Option<crate::report::FirstMetric>>; 2] {
    let fitted: std::collections::HashSet<&str> = fitted_on.iter().copied().collect();
    let run = run(file, None, &|id| fitted.contains(id));
    let by_id: HashMap<&str, &BaselineCase> =
        run.cases.iter().map(|c| (c.id.as_str(), c)).collect();
    let set = |err: fn(&BaselineCase) -> f64| {
        ids.iter()
            .map(|id| {
                let c = by_id.get(id)?;
                let m = c.measured;
                Some(crate::report::FirstMetric {
                    id: c.id.clone(),
                    group: c.group.clone(),
                    metric: c.metric.clone(),
                    predicted: m * (1.0 + err(c)),
                    measured: m,
                    rel_error: err(c),
                    interval: None,
                })
            })
            .collect()
    };
    [set(|c| c.in_sample), set(|c| c.leave_group_out)]
}

/// perfcast beside the baseline on one set of cases: those both score (perfcast's first
/// published metric predicted, the baseline's too).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Versus {
    /// Cases perfcast scores, cases the baseline scores, cases both score.
    pub perfcast_scored: usize,
    pub baseline_scored: usize,
    pub both: usize,
    /// MAPE over the cases both score: perfcast's (as validated), the baseline fitted on every
    /// case, and the baseline refitted without each case's group.
    pub perfcast_mape: Option<f64>,
    pub baseline_mape: Option<f64>,
    pub baseline_leave_group_out_mape: Option<f64>,
}

/// The `summary.baseline` of `perfcast validate`: the baseline's fitted parameters and
/// perfcast beside it per group, per kind and overall.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Comparison {
    pub params: BTreeMap<String, f64>,
    pub groups: BTreeMap<String, Versus>,
    pub training: Versus,
    pub inference: Versus,
    pub overall: Versus,
}

/// Set perfcast's first-metric errors (`perfcast`: case id -> relative error) beside the
/// baseline's `run`, over `cases` (id, group, kind).
pub fn compare(
    perfcast: &HashMap<&str, f64>,
    cases: &[(&str, &str, Kind)],
    run: &BaselineRun,
) -> Comparison {
    let base: HashMap<&str, &BaselineCase> = run.cases.iter().map(|c| (c.id.as_str(), c)).collect();
    let versus = |pick: &dyn Fn(&str, Kind) -> bool| {
        let mut v = Versus::default();
        let mut sums = [0.0; 3];
        for &(id, ..) in cases.iter().filter(|(_, g, k)| pick(g, *k)) {
            let p = perfcast.get(id);
            let b = base.get(id);
            v.perfcast_scored += usize::from(p.is_some());
            v.baseline_scored += usize::from(b.is_some());
            if let (Some(p), Some(b)) = (p, b) {
                v.both += 1;
                sums[0] += p.abs();
                sums[1] += b.in_sample.abs();
                sums[2] += b.leave_group_out.abs();
            }
        }
        let mean = |s: f64| (v.both > 0).then(|| s / v.both as f64);
        v.perfcast_mape = mean(sums[0]);
        v.baseline_mape = mean(sums[1]);
        v.baseline_leave_group_out_mape = mean(sums[2]);
        v
    };
    let mut names: Vec<&str> = cases.iter().map(|c| c.1).collect();
    names.sort_unstable();
    names.dedup();
    Comparison {
        params: run.params.clone(),
        groups: names
            .into_iter()
            .map(|n| (n.to_string(), versus(&|g, _| g == n)))
            .collect(),
        training: versus(&|_, k| k == Kind::Training),
        inference: versus(&|_, k| k == Kind::Inference),
        overall: versus(&|_, _| true),
    }
}
