//! What `perfcast validate` writes of a validation run beside its JSON (the report's own): the
//! terminal table (one block per group: each case's metrics, the scored one marked `*`, the
//! reference step, the breakdown, the stack it matched; then the summary: MAPE per group and
//! kind, the intervals' coverage, the worst cases), the Parquet rows, the table of a
//! collectives file and a calibration's report (`perfcast calibrate`).

use crate::error_bars;
use perfcast_render::{num, Table};
use perfcast_validation::calibrate::{round_sig, Calibration, Cv};
use perfcast_validation::cases::Kind;
use perfcast_validation::collectives::{self, predict::Regime};
use perfcast_validation::report::FirstMetric;
use perfcast_validation::report::{CaseResult, GroupSummary, MetricResult, Report, Status};
use std::fmt::Write as _;

/// One row per case and metric (a case without metrics: one row naming why), the columns
/// of `--format parquet`: `id`, `group`, `kind`, `status`, `metric`, `predicted`,
/// `measured`, `rel_error` (signed, predicted / measured - 1), `lo` and `hi` (the
/// interval, when asked for), `stack`, `reason`.
pub fn rows(r: &Report) -> Table {
    let mut t = Table::new(&[
        ("id", false),
        ("group", false),
        ("kind", false),
        ("status", false),
        ("metric", false),
        ("predicted", true),
        ("measured", true),
        ("rel_error", true),
        ("lo", true),
        ("hi", true),
        ("stack", false),
        ("reason", false),
    ]);
    let name = |v: serde_json::Result<serde_json::Value>| match v {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    };
    let opt = |v: Option<f64>| v.map(|x| format!("{x:?}")).unwrap_or_default();
    for c in &r.cases {
        let common = [
            c.id.clone(),
            c.group.clone(),
            name(serde_json::to_value(c.kind)),
            name(serde_json::to_value(c.status)),
        ];
        let tail = [
            c.stack.as_ref().map(|s| s.name.clone()).unwrap_or_default(),
            c.reason.clone().unwrap_or_default(),
        ];
        let metrics: Vec<Option<&MetricResult>> = if c.metrics.is_empty() {
            vec![None]
        } else {
            c.metrics.iter().map(Some).collect()
        };
        for m in metrics {
            let mut row = common.to_vec();
            row.extend(match m {
                Some(m) => [
                    name(serde_json::to_value(m.name)),
                    opt(m.predicted),
                    format!("{:?}", m.measured),
                    opt(m.rel_error),
                    opt(m.interval.map(|i| i[0])),
                    opt(m.interval.map(|i| i[1])),
                ],
                None => Default::default(),
            });
            row.extend(tail.iter().cloned());
            t.push(row);
        }
    }
    t
}

/// A terminal table: one block per group, then the summary.
pub fn table(r: &Report) -> String {
    let mut out = String::new();
    let mut groups: Vec<&str> = Vec::new();
    for c in &r.cases {
        if !groups.contains(&c.group.as_str()) {
            groups.push(&c.group);
        }
    }
    let level = r.interval_level();
    for g in groups {
        let _ = writeln!(out, "== {g}");
        let _ = write!(
            out,
            "  {:<46} {:<22} {:>12} {:>12} {:>8}",
            "case", "metric", "predicted", "measured", "error"
        );
        match level {
            Some(l) => {
                let _ = writeln!(out, "    {}% interval", error_bars::level(l));
            }
            None => out.push('\n'),
        }
        for c in r.cases.iter().filter(|c| c.group == g) {
            case_rows(&mut out, c);
        }
        if let Some(s) = r.summary.groups.get(g) {
            let _ = writeln!(out, "  {}", summary_line(s));
        }
        out.push('\n');
    }
    summary_rows(&mut out, r);
    out
}

/// The rows of one case: its metrics, reference step, breakdown, warning and stack (or why it
/// did not run).
fn case_rows(out: &mut String, c: &CaseResult) {
    match c.status {
        Status::Ok => {
            for (i, m) in c.metrics.iter().enumerate() {
                let _ = writeln!(out, "{}", metric_row(c, i, m));
            }
            if let Some((r, p)) = c.reference {
                let _ = writeln!(
                    out,
                    "  {:<46} {:<22} {:>12} {:>12} {:>8}",
                    "",
                    "(reference step s)",
                    p.map(fmt_num).unwrap_or_else(|| "-".into()),
                    fmt_num(r),
                    "derived"
                );
            }
            if !c.breakdown.is_empty() {
                let parts: Vec<String> = c
                    .breakdown
                    .iter()
                    .map(|(k, v)| format!("{k} {}", fmt_num(*v)))
                    .collect();
                let _ = writeln!(out, "  {:<46} [{}]", "", parts.join(", "));
            }
            if let Some(r) = &c.reason {
                let _ = writeln!(out, "  {:<46} warning: {r}", "");
            }
            stack_line(out, c);
        }
        Status::Unsupported | Status::Error => {
            let _ = writeln!(
                out,
                "  {:<46} {}: {}",
                c.id,
                if c.status == Status::Unsupported {
                    "UNSUPPORTED"
                } else {
                    "ERROR"
                },
                c.reason.as_deref().unwrap_or("")
            );
            stack_line(out, c);
        }
    }
}

/// The summary block: MAPE per group and kind, the intervals' coverage, the worst cases.
fn summary_rows(out: &mut String, r: &Report) {
    let _ = writeln!(
        out,
        "== summary (MAPE on each case's first published metric, marked *)"
    );
    for (g, s) in &r.summary.groups {
        let _ = writeln!(out, "  {g:<28} {}", summary_line(s));
    }
    let _ = writeln!(
        out,
        "  {:<28} {}",
        "training",
        summary_line(&r.summary.training)
    );
    let _ = writeln!(
        out,
        "  {:<28} {}",
        "inference",
        summary_line(&r.summary.inference)
    );
    let _ = writeln!(
        out,
        "  {:<28} {}",
        "overall",
        summary_line(&r.summary.overall)
    );
    if let Some(l) = r.interval_level() {
        let o = &r.summary.overall;
        let _ = writeln!(
            out,
            "  {}% intervals (out-of-fold residuals of comparable cases, the case's own group left out): {} of {} measurements inside ({:.1}%)",
            error_bars::level(l),
            o.inside_interval,
            o.with_interval,
            100.0 * o.inside_interval as f64 / o.with_interval.max(1) as f64
        );
    }
    if let (Some(l), false) = (r.interval_level(), r.summary.interval_kinds.is_empty()) {
        let _ = writeln!(
            out,
            "  {}% intervals by kind, on the residuals' own measurements (each without what its fold held out):",
            error_bars::level(l)
        );
        for k in &r.summary.interval_kinds {
            let what = match k.cv.as_str() {
                "groups" => "a known stack on known hardware (leave one group out)",
                "stacks" => "a stack no rule knows (leave one stack family out)",
                "hardware" => "a new GPU generation (leave one generation out)",
                "cases" => "a known stack on known hardware (leave one case out)",
                other => other,
            };
            let _ = writeln!(
                out,
                "    {what:<56} {} of {} inside ({:.1}%)",
                k.inside,
                k.scored,
                100.0 * k.inside as f64 / k.scored.max(1) as f64
            );
        }
    }
    if let Some(b) = &r.summary.baseline {
        baseline_rows(out, b);
    }
    if !r.summary.worst.is_empty() {
        let _ = writeln!(out, "  worst cases:");
        for w in r.summary.worst.iter().take(5) {
            let _ = writeln!(
                out,
                "    {:<46} {:<26} {:+.1}%",
                w.id,
                w.metric,
                100.0 * w.rel_error
            );
        }
    }
}

/// perfcast beside the in-project roofline baseline, per group and kind, on the cases both
/// score.
fn baseline_rows(out: &mut String, b: &perfcast_validation::baseline::Comparison) {
    let params: Vec<String> = b
        .params
        .iter()
        .map(|(k, v)| format!("{k} {v:.3}"))
        .collect();
    let _ = writeln!(
        out,
        "== perfcast beside the roofline baseline (perfcast_validation::baseline: {})",
        params.join(", ")
    );
    let _ = writeln!(
        out,
        "  {:<36} {:>6} {:>6} {:>6} {:>9} {:>9} {:>15}",
        "group", "scored", "base", "both", "perfcast", "roofline", "roofline, LOGO"
    );
    let rows = b.groups.iter().map(|(g, v)| (g.as_str(), v)).chain([
        ("training", &b.training),
        ("inference", &b.inference),
        ("overall", &b.overall),
    ]);
    for (g, v) in rows {
        let _ = writeln!(
            out,
            "  {g:<36} {:>6} {:>6} {:>6} {:>9} {:>9} {:>15}",
            v.perfcast_scored,
            v.baseline_scored,
            v.both,
            pct(v.perfcast_mape),
            pct(v.baseline_mape),
            pct(v.baseline_leave_group_out_mape)
        );
    }
    let _ = writeln!(
        out,
        "  (scored: by perfcast; base: by the baseline; MAPE on the cases both score; LOGO: \
         the baseline refitted without the case's group)"
    );
}

/// One metric's row of the table: case (on the first row), metric, predicted, measured,
/// error, `*` on the scored metric, and the interval with `in`/`OUT` when there is one.
fn metric_row(c: &CaseResult, i: usize, m: &MetricResult) -> String {
    let first = c
        .first
        .as_ref()
        .is_some_and(|f| f.metric.split('+').any(|x| x == m.name.name()));
    let mut row = format!(
        "  {:<46} {:<22} {:>12} {:>12} {:>8}",
        if i == 0 { c.id.as_str() } else { "" },
        m.name.name(),
        m.predicted.map(fmt_num).unwrap_or_else(|| "-".into()),
        fmt_num(m.measured),
        m.rel_error
            .map(|e| format!("{:+.1}%", 100.0 * e))
            .unwrap_or_else(|| "n/a".into()),
    );
    match m.interval {
        Some([lo, hi]) => {
            let inside = lo <= m.measured && m.measured <= hi;
            let _ = write!(
                row,
                "{}  {}–{} {}",
                if first { " *" } else { "  " },
                fmt_num(lo),
                fmt_num(hi),
                if inside { "in" } else { "OUT" }
            );
        }
        None if first => row.push_str(" *"),
        None => {}
    }
    row
}

/// `stack: NAME (rule N: "pattern")` under a case.
fn stack_line(out: &mut String, c: &CaseResult) {
    if let Some(m) = &c.stack {
        let _ = writeln!(out, "  {:<46} stack: {}", "", m.describe());
    }
}

fn summary_line(s: &GroupSummary) -> String {
    let mut l = format!(
        "{} cases: {} ok, {} unsupported, {} error; scored {}",
        s.cases, s.ok, s.unsupported, s.error, s.scored
    );
    if let (Some(m), Some(b), Some(w), Some(id)) =
        (s.mape, s.mean_rel_error, s.max_abs_error, &s.worst_case)
    {
        let _ = write!(
            l,
            "; MAPE {:.1}% (bias {:+.1}%), worst {:.1}% ({id})",
            100.0 * m,
            100.0 * b,
            100.0 * w
        );
    }
    if s.with_interval > 0 {
        let _ = write!(
            l,
            "; interval holds {} of {}",
            s.inside_interval, s.with_interval
        );
    }
    l
}

/// Compact number formatting for the table.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e5 {
        format!("{v:.3e}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

/// A collectives file's report as terminal tables: entries by group, then the groups and the
/// totals per regime.
pub fn collectives_table(r: &collectives::report::Report) -> String {
    let mut t = Table::with_headers(&[
        "id",
        "group",
        "regime",
        "metric",
        "predicted",
        "measured",
        "error",
        "target",
    ]);
    for e in &r.entries {
        match &e.outcome {
            Ok(p) => {
                for (i, m) in p.metrics.iter().enumerate() {
                    t.push(vec![
                        if i == 0 { e.id.clone() } else { String::new() },
                        if i == 0 {
                            e.group.clone()
                        } else {
                            String::new()
                        },
                        if i == 0 {
                            p.regime.name().into()
                        } else {
                            String::new()
                        },
                        m.name.into(),
                        num(m.predicted),
                        num(m.measured),
                        format!("{:+.1}%", 100.0 * (m.ratio() - 1.0)),
                        match i {
                            0 if e.passes() => "ok".into(),
                            0 => "MISS".into(),
                            _ => String::new(),
                        },
                    ]);
                }
            }
            Err(msg) => t.push(vec![
                e.id.clone(),
                e.group.clone(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                format!("error: {msg}"),
            ]),
        }
    }
    let mut g = Table::with_headers(&[
        "group",
        "entries",
        "passing",
        "mean |error|",
        "mean |error| (bandwidth)",
        "worst ratio",
    ]);
    for s in r.groups() {
        g.push(vec![
            s.group,
            s.entries.to_string(),
            format!("{}/{}", s.passing, s.predicted),
            format!("{:.1}%", s.mean_abs_error_pct),
            s.bandwidth_mean_abs_error_pct
                .map(|v| format!("{v:.1}%"))
                .unwrap_or_else(|| "-".into()),
            format!("{:.2}", s.worst_ratio),
        ]);
    }
    let line = |regime: Regime, target: &str| {
        let (pass, of) = r.regime_counts(regime);
        format!("{:<10} {pass}/{of} within {target}\n", regime.name())
    };
    format!(
        "{}\n{}\n{}{}{}errors: {}\n",
        t.render(),
        g.render(),
        line(Regime::Bandwidth, "15% (bus bandwidth)"),
        line(Regime::Mid, "2x"),
        line(Regime::Latency, "2x"),
        r.errors()
    )
}

/// A calibration's terminal report: the cases, the objective, each parameter's bounds, start
/// and fitted value, whether the fit and every cross-validation fold converged, MAPE per
/// group before, in sample and out of fold, the notes.
pub fn calibration_table(c: &Calibration) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "calibration on {} (sha256 {}): {} scored cases in {} groups ({} unsupported, {} error, {} not scored)",
        c.cases_described(),
        &c.sha256[..c.sha256.len().min(12)],
        c.cases.len(),
        c.groups().len(),
        c.skipped.0,
        c.skipped.1,
        c.skipped.2
    );
    let _ = writeln!(
        s,
        "objective: mean |ln(predicted / measured)| of each case's first published metric: {:.4} at the start, {:.4} fitted",
        c.start_objective, c.fit.f
    );
    let _ = writeln!(
        s,
        "\n  {:<58} {:>16} {:>10} {:>10} {:>6} {:>19}",
        "parameter", "bounds", "start", "fitted", "cases", "folds (min..max)"
    );
    for (j, p) in c.params.iter().enumerate() {
        // The spread of the parameter over the cross-validation's folds: how well the
        // cases determine it.
        let folds: Vec<f64> = c
            .folds
            .iter()
            .filter_map(|f| f.fitted.get(j).copied())
            .collect();
        let spread = match (
            folds.iter().copied().reduce(f64::min),
            folds.iter().copied().reduce(f64::max),
        ) {
            (Some(lo), Some(hi)) => format!("{}..{}", round_sig(lo, 3), round_sig(hi, 3)),
            _ => "-".into(),
        };
        for (i, k) in p.keys.iter().enumerate() {
            if i == 0 {
                let _ = writeln!(
                    s,
                    "  {:<58} {:>16} {:>10} {:>10} {:>6} {:>19}",
                    k,
                    format!("{}..{}", p.lo, p.hi),
                    round_sig(p.start, 6),
                    p.fitted,
                    p.cases,
                    spread
                );
            } else {
                let _ = writeln!(s, "    = {k}");
            }
        }
    }
    let _ = writeln!(
        s,
        "\nfit: {} after {} evaluations",
        if c.fit.converged {
            "converged"
        } else {
            "NOT CONVERGED"
        },
        c.fit.evals
    );
    let runs = std::iter::once((c.cv, &c.folds))
        .filter(|(cv, _)| *cv != Cv::None)
        .chain(c.also.iter().map(|r| (r.cv, &r.folds)));
    for (cv, folds) in runs {
        let bad: Vec<&str> = folds
            .iter()
            .filter(|f| !f.converged)
            .map(|f| f.held_out.as_str())
            .collect();
        let _ = writeln!(
            s,
            "cross-validation: {} ({} folds, {} evaluations){}",
            cv.describe(),
            folds.len(),
            folds.iter().map(|f| f.evals).sum::<usize>(),
            if bad.is_empty() {
                ", every fold converged".to_string()
            } else {
                format!("; NOT CONVERGED without: {}", bad.join(", "))
            }
        );
    }
    group_table(c, &mut s);
    for n in &c.notes {
        let _ = writeln!(s, "note: {n}");
    }
    let _ = writeln!(s, "took {:.1} s ({} threads)", c.seconds, c.threads);
    s
}

/// Per group and overall: cases, MAPE before, in-sample, cross-validated (one column per
/// scheme, headed by what a fold holds out), and the roofline baseline on the same cases
/// (fitted on them; `roofline cv`: refitted without each case's group).
fn group_table(c: &Calibration, s: &mut String) {
    let mut sets: Vec<(String, &[Option<FirstMetric>])> = Vec::new();
    if c.cv != Cv::None {
        sets.push((format!("cv {}", c.cv.name()), &c.out_of_fold));
    }
    for r in &c.also {
        sets.push((format!("cv {}", r.cv.name()), &r.out_of_fold));
    }
    sets.push(("roofline".into(), &c.baseline[0]));
    sets.push(("roofline cv".into(), &c.baseline[1]));
    let mut head = format!(
        "\n  {:<30} {:>6} {:>8} {:>10}",
        "group", "cases", "before", "in-sample"
    );
    for (name, _) in &sets {
        let _ = write!(head, " {name:>12}");
    }
    let _ = writeln!(s, "{}", head.trim_end());
    let row = |s: &mut String, name: &str, keep: &dyn Fn(usize) -> bool| {
        let (b, n) = c.mape_of(&c.before, keep);
        let (i, _) = c.mape_of(&c.in_sample, keep);
        let mut line = format!("  {:<30} {:>6} {:>8} {:>10}", name, n, pct(b), pct(i));
        for (_, set) in &sets {
            let _ = write!(line, " {:>12}", pct(c.mape_of(set, keep).0));
        }
        let _ = writeln!(s, "{line}");
    };
    for g in c.groups() {
        row(s, g, &|i| c.cases[i].group == g);
    }
    for (name, k) in [("training", Kind::Training), ("inference", Kind::Inference)] {
        if c.cases.iter().any(|c| c.kind == k) {
            row(s, name, &|i| c.cases[i].kind == k);
        }
    }
    row(s, "overall", &|_| true);
}

/// `12.3%` or `-`.
fn pct(m: Option<f64>) -> String {
    m.map(|m| format!("{:.1}%", 100.0 * m))
        .unwrap_or_else(|| "-".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_validation::cases::Metric;

    fn case(id: &str, status: Status, metrics: Vec<MetricResult>) -> CaseResult {
        CaseResult {
            id: id.into(),
            group: "g".into(),
            kind: Kind::Training,
            status,
            reason: (status != Status::Ok).then(|| "why".into()),
            metrics,
            first: None,
            breakdown: vec![("compute".into(), 0.5)],
            reference: None,
            error_bars: None,
            stack: None,
        }
    }

    /// The table names a case that did not run with its reason, marks the scored metric, and
    /// the rows hold one row per metric (one naming why for a case without metrics).
    #[test]
    fn table_and_rows() {
        let r = Report::new(vec![
            case(
                "a",
                Status::Ok,
                vec![MetricResult::new(Metric::IterationTimeS, Some(1.2), 1.0)],
            ),
            case("b", Status::Unsupported, Vec::new()),
        ]);
        let t = table(&r);
        assert!(t.contains("== g"), "{t}");
        assert!(t.contains("UNSUPPORTED: why"), "{t}");
        assert!(t.contains("+20.0% *"), "{t}");
        assert!(t.contains("[compute 0.5000]"), "{t}");
        assert!(t.contains("== summary"), "{t}");
        let rows = rows(&r).csv();
        assert_eq!(rows.lines().count(), 3, "{rows}");
        assert!(rows.contains("b,g,training,unsupported,"), "{rows}");
    }

    #[test]
    fn compact_numbers() {
        for (v, want) in [
            (0.0, "0"),
            (123456.0, "1.235e5"),
            (123.45, "123.5"),
            (1.23456, "1.235"),
            (0.012345, "0.0123"),
        ] {
            assert_eq!(fmt_num(v), want);
        }
    }
}
