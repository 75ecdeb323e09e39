//! A parameter resolved against the cases: where each key applies, its starting value and
//! bounds, checked before anything is fitted (each check an error naming the key).

use super::{ParamSpec, Problem, Resolved};
use crate::harness::Harness;
use crate::overlay::{Applies, Entry};
use crate::prepared::Prepared;
use crate::report::FirstMetric;
use crate::{Error, Result};
use std::collections::BTreeSet;

/// Resolve `spec` over the runnable cases. `Ok(None)` for a default parameter (`!explicit`)
/// that applies to no case; for an explicit one that is an error.
pub(super) fn resolve(
    harness: &Harness,
    prepared: &[Prepared],
    spec: &ParamSpec,
    explicit: bool,
    notes: &mut Vec<String>,
) -> Result<Option<Resolved>> {
    let label = spec.to_string();
    let refused = |message: String| Error::Param {
        param: label.clone(),
        message,
    };
    let values = current_values(prepared, spec).map_err(refused)?;
    let known = (!values.is_empty())
        .then(|| values.iter().map(|(_, v)| v).sum::<f64>() / values.len() as f64);
    let distinct: BTreeSet<String> = values.iter().map(|(_, v)| v.to_string()).collect();
    if distinct.len() > 1 {
        notes.push(format!(
            "{label}: the configurations differ ({}): starting from their mean {}",
            distinct.into_iter().collect::<Vec<_>>().join(", "),
            known.unwrap_or_default()
        ));
    }
    let (lo, hi) = match (spec.bounds, known) {
        (Some(b), _) => b,
        (None, Some(v)) if v > 0.0 => (v / 2.0, v * 2.0),
        (None, Some(v)) if v < 0.0 => (v * 2.0, v / 2.0),
        (None, Some(_)) => {
            return Err(refused(format!(
                "the current value is 0, so there are no default bounds (half to twice it): give them, --param {label}=LO..HI"
            )))
        }
        (None, None) => {
            return Err(refused(format!(
                "{} is set in no case's configuration; a plugin or engine parameter left at its default needs bounds, --param {label}=LO..HI{}",
                spec.keys.join(", "),
                nearest(prepared, &spec.keys[0])
            )))
        }
    };
    let mut start = known.unwrap_or((lo + hi) / 2.0);
    if !(lo..=hi).contains(&start) {
        let c = start.clamp(lo, hi);
        notes.push(format!(
            "{label}: the current value {start} is outside the bounds: starting from {c}"
        ));
        start = c;
    }
    let mut per_case = vec![Vec::new(); prepared.len()];
    let mut unused = Vec::new();
    for (i, key) in spec.keys.iter().enumerate() {
        let e = Entry::number(key, start);
        let mut any = false;
        for (c, p) in prepared.iter().enumerate() {
            if harness.applies(p, &e) != Applies::No {
                per_case[c].push(i);
                any = true;
            }
        }
        if !any && explicit {
            return Err(no_case(harness, prepared, &label, &e));
        }
        if !any {
            unused.push(format!("`{key}`"));
        }
    }
    if per_case.iter().all(Vec::is_empty) {
        // The caller notes the whole parameter left out.
        return Ok(None);
    }
    if !unused.is_empty() {
        notes.push(format!(
            "default parameter {label}: {} {} to no case: left out",
            unused.join(", "),
            if unused.len() == 1 {
                "applies"
            } else {
                "apply"
            }
        ));
    }
    // Keep only the keys that apply somewhere (the overlay then carries no key that applies
    // to no case).
    let used: Vec<usize> = (0..spec.keys.len())
        .filter(|i| per_case.iter().any(|k| k.contains(i)))
        .collect();
    let keys: Vec<String> = used.iter().map(|&i| spec.keys[i].clone()).collect();
    for k in &mut per_case {
        *k = k
            .iter()
            .filter_map(|i| used.iter().position(|u| u == i))
            .collect();
    }
    let spec = &ParamSpec {
        keys,
        bounds: spec.bounds,
    };
    let (lo, hi) = check_bounds(harness, prepared, spec, &per_case, start, (lo, hi), notes)?;
    Ok(Some(Resolved {
        keys: spec.keys.clone(),
        lo,
        hi,
        start,
        per_case,
    }))
}

/// The current values of `spec`'s keys where the cases' configurations have them (every
/// case's, so a key set differently by two presets shows twice); a key that is not a number
/// there is refused.
fn current_values<'s>(
    prepared: &[Prepared],
    spec: &'s ParamSpec,
) -> std::result::Result<Vec<(&'s str, f64)>, String> {
    let mut values = Vec::new();
    for key in &spec.keys {
        for p in prepared {
            let Some(k) = p.keys() else { continue };
            if k.contains(key) {
                match k.number(key) {
                    Some(v) => values.push((key.as_str(), v)),
                    None => {
                        return Err(format!(
                            "`{key}` is not a number in the configuration of case `{}` (only numeric keys can be fitted)",
                            p.case.id
                        ))
                    }
                }
            }
        }
    }
    Ok(values)
}

/// Both bounds must be values the plugins and engines accept (checked on the first case each
/// key applies to); default bounds are narrowed to what they accept (an efficiency's twice
/// may pass 1) by bisection towards the start.
fn check_bounds(
    harness: &Harness,
    prepared: &[Prepared],
    spec: &ParamSpec,
    per_case: &[Vec<usize>],
    start: f64,
    (mut lo, mut hi): (f64, f64),
    notes: &mut Vec<String>,
) -> Result<(f64, f64)> {
    let label = spec.to_string();
    let refused = |message: String| Error::Param {
        param: label.clone(),
        message,
    };
    for (i, key) in spec.keys.iter().enumerate() {
        let Some(c) = per_case.iter().position(|k| k.contains(&i)) else {
            continue;
        };
        let accepts = |v: f64| harness.probe(&prepared[c], &[Entry::number(key, v)]);
        for upper in [false, true] {
            let v = if upper { hi } else { lo };
            let Err(m) = accepts(v) else { continue };
            if spec.bounds.is_some() || accepts(start).is_err() {
                return Err(refused(format!(
                    "case `{}` refuses {key} = {v}: {m}; narrow the bounds",
                    prepared[c].case.id
                )));
            }
            // Bisect between the start (accepted) and the refused bound.
            let (mut ok, mut bad) = (start, v);
            for _ in 0..12 {
                let mid = (ok + bad) / 2.0;
                if accepts(mid).is_ok() {
                    ok = mid;
                } else {
                    bad = mid;
                }
            }
            let ok = super::round_sig(ok, 4);
            let ok = if accepts(ok).is_ok() { ok } else { start };
            notes.push(format!(
                "{label}: {key} = {v} is refused ({m}): default bounds narrowed to {}",
                if upper {
                    format!("{lo}..{ok}")
                } else {
                    format!("{ok}..{hi}")
                }
            ));
            if upper {
                hi = ok;
            } else {
                lo = ok;
            }
            if lo >= hi {
                return Err(refused(format!(
                    "no range around the current value {start} is accepted; give bounds"
                )));
            }
        }
    }
    Ok((lo, hi))
}

/// The error for a key that applies to no case: the nearest keys of the configurations, and
/// what a case whose configuration has the parent table said.
fn no_case(harness: &Harness, prepared: &[Prepared], label: &str, e: &Entry) -> Error {
    let mut why = String::new();
    if let Some(p) = prepared
        .iter()
        .find(|p| p.keys().is_some_and(|k| k.has_parent_table(&e.key)))
    {
        if let Err(m) = harness.probe(p, std::slice::from_ref(e)) {
            why = format!(
                "; case `{}` has its parent table but refuses it: {m}",
                p.case.id
            );
        }
    }
    Error::Param {
        param: label.to_string(),
        message: format!(
            "`{}` exists in no case's configuration (the hardware preset with the case's settings, [options] as the case's engine reads it, and its stack's keys stacks.NAME.KEY that land on one option){why}{}",
            e.key,
            nearest(prepared, &e.key)
        ),
    }
}

/// `; nearest keys: a, b, c` over every case's configuration.
fn nearest(prepared: &[Prepared], key: &str) -> String {
    let mut all: Vec<(usize, String)> = Vec::new();
    for p in prepared {
        if let Some(k) = p.keys() {
            for n in k.nearest(key, 3) {
                if !all.iter().any(|(_, x)| *x == n) {
                    all.push((perfcast_core::suggest::edit_distance(&n, key), n));
                }
            }
        }
    }
    all.sort();
    if all.is_empty() {
        return String::new();
    }
    let names: Vec<String> = all.into_iter().take(3).map(|(_, n)| n).collect();
    format!("; nearest keys: {}", names.join(", "))
}

/// Every parameter must move some scored case's prediction between its bounds (a flat one
/// cannot be fitted): an error for an explicit parameter, left at its start (and said) for a
/// default one.
pub(super) fn check_moves(
    problem: &mut Problem,
    fit: &[usize],
    at_start: &[Option<FirstMetric>],
    explicit: bool,
    notes: &mut Vec<String>,
) -> Result<()> {
    let start = problem.start();
    for j in 0..problem.params.len() {
        let cases: Vec<usize> = fit
            .iter()
            .copied()
            .filter(|&c| !problem.params[j].per_case[c].is_empty())
            .collect();
        let p = &problem.params[j];
        let label = p.keys.join(",");
        if cases.is_empty() {
            if explicit {
                return Err(Error::Param {
                    param: label,
                    message: "applies only to cases outside the objective (not scored at the start, or serving runs, which are scored but not fitted on unless --serving fit), nothing to fit it on"
                        .into(),
                });
            }
            notes.push(format!(
                "default parameter {label} applies to no scored case: kept at {}",
                p.start
            ));
            continue;
        }
        let mut moved = false;
        for v in [p.lo, p.hi] {
            let mut theta = start.clone();
            theta[j] = v;
            let s = problem.scores(&cases, &theta);
            moved |= s.iter().zip(&cases).any(|(x, &c)| match (x, &at_start[c]) {
                (Some(a), Some(b)) => (a.predicted - b.predicted).abs() > 1e-9 * b.predicted.abs(),
                _ => true,
            });
        }
        if !moved {
            if explicit {
                return Err(Error::Param {
                    param: label,
                    message: format!(
                        "applies to {} scored cases but moves none of their predictions between {} and {}: it cannot be fitted",
                        cases.len(),
                        p.lo,
                        p.hi
                    ),
                });
            }
            notes.push(format!(
                "default parameter {label} moves no prediction: kept at {}",
                p.start
            ));
            problem.params[j].per_case.iter_mut().for_each(Vec::clear);
        }
    }
    Ok(())
}
