//! Cross-validation: the schemes ([`Cv`]), their folds and out-of-fold predictions
//! ([`CvRun`]), and the middle of the known stacks that a held-out stack family (and a stack
//! parameter no fold case reaches) takes.

use super::{round_sig, FitCase, Fold, Param, Problem, Resolved, Settings};
use crate::overlay::Entry;
use crate::report::FirstMetric;
use crate::{Error, Result};
use rayon::prelude::*;
use std::fmt;
use std::str::FromStr;

/// The cross-validation scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cv {
    /// Leave one group out.
    #[default]
    Groups,
    /// Leave one case out.
    Cases,
    /// Leave one software stack family out (its cases predicted on the fallback stack).
    Stacks,
    /// Leave one GPU generation out.
    Hardware,
    /// In-sample only.
    None,
}

impl Cv {
    /// The name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Cv::Groups => "groups",
            Cv::Cases => "cases",
            Cv::Stacks => "stacks",
            Cv::Hardware => "hardware",
            Cv::None => "none",
        }
    }
}

impl Cv {
    /// The scheme in words.
    pub const fn describe(self) -> &'static str {
        match self {
            Cv::Groups => "leave one group out",
            Cv::Cases => "leave one case out",
            Cv::Stacks => "leave one software stack family out (predicted on the fallback stack)",
            Cv::Hardware => "leave one GPU generation out",
            Cv::None => "none",
        }
    }

    /// What one fold holds out.
    pub const fn unit(self) -> &'static str {
        match self {
            Cv::Groups => "group",
            Cv::Cases | Cv::None => "case",
            Cv::Stacks => "software stack family (predicted on the fallback stack)",
            Cv::Hardware => "GPU generation",
        }
    }
}

impl fmt::Display for Cv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Cv {
    type Err = Error;
    fn from_str(s: &str) -> Result<Cv> {
        match s {
            "groups" => Ok(Cv::Groups),
            "cases" => Ok(Cv::Cases),
            "stacks" => Ok(Cv::Stacks),
            "hardware" => Ok(Cv::Hardware),
            "none" => Ok(Cv::None),
            _ => Err(Error::CrossValidation(format!(
                "`{s}`: expected `groups` (leave one group out), `cases` (leave one case out), `stacks` (leave one software stack family out), `hardware` (leave one GPU generation out) or `none`"
            ))),
        }
    }
}

/// One cross-validation of a calibration: its scheme, folds and each case's out-of-fold
/// prediction (the cases in [`super::Calibration::cases`]' order).
#[derive(Debug, Clone)]
pub struct CvRun {
    /// The scheme.
    pub cv: Cv,
    /// Its folds.
    pub folds: Vec<Fold>,
    /// Each case predicted by the fold that held it out.
    pub out_of_fold: Vec<Option<FirstMetric>>,
}

/// Cross-validate under `cv`: the folds, each fitted without its members (in parallel), and
/// the held-out cases predicted by their fold (a held-out stack family on the fallback stack).
pub(super) fn run(
    problem: &Problem,
    fit_idx: &[usize],
    cases: &[FitCase],
    cv: Cv,
    settings: &Settings,
) -> Result<CvRun> {
    let folds = cross_validate(problem, fit_idx, cases, cv, settings)?;
    let mut out_of_fold = vec![None; fit_idx.len()];
    let fallback = match cv {
        Cv::Stacks => Some(problem.harness.on_fallback_stack()?),
        _ => None,
    };
    let held: Vec<Vec<Option<FirstMetric>>> = folds
        .par_iter()
        .map(|f| {
            let idx: Vec<usize> = f.members.iter().map(|&m| fit_idx[m]).collect();
            match &fallback {
                Some(h) => problem.scores_on(h, &idx, &f.fitted),
                None => problem.scores(&idx, &f.fitted),
            }
        })
        .collect();
    for (f, s) in folds.iter().zip(held) {
        for (&m, x) in f.members.iter().zip(s) {
            out_of_fold[m] = x;
        }
    }
    Ok(CvRun {
        cv,
        folds,
        out_of_fold,
    })
}

/// The folds of `cv`, each fitted without its members (in parallel).
fn cross_validate(
    problem: &Problem,
    fit_idx: &[usize],
    cases: &[FitCase],
    cv: Cv,
    settings: &Settings,
) -> Result<Vec<Fold>> {
    let mut folds: Vec<(String, Vec<usize>)> = Vec::new();
    match cv {
        Cv::None => return Ok(Vec::new()),
        Cv::Groups => {
            for (i, c) in cases.iter().enumerate() {
                match folds.iter_mut().find(|(g, _)| *g == c.group) {
                    Some((_, m)) => m.push(i),
                    None => folds.push((c.group.clone(), vec![i])),
                }
            }
            if folds.len() < 2 {
                return Err(Error::CrossValidation(format!(
                    "groups needs scored cases in at least two groups; all {} are in `{}` (use --cv cases or --cv none)",
                    cases.len(),
                    cases[0].group
                )));
            }
        }
        Cv::Cases => {
            if cases.len() < 2 {
                return Err(Error::CrossValidation(
                    "cases needs at least two scored cases (use --cv none)".into(),
                ));
            }
            folds = cases
                .iter()
                .enumerate()
                .map(|(i, c)| (c.id.clone(), vec![i]))
                .collect();
        }
        Cv::Stacks | Cv::Hardware => {
            let what = |c: &FitCase| match cv {
                Cv::Stacks => c.family.clone(),
                _ => c.generation.clone(),
            };
            for (i, c) in cases.iter().enumerate() {
                let w = what(c);
                match folds.iter_mut().find(|(g, _)| *g == w) {
                    Some((_, m)) => m.push(i),
                    None => folds.push((w, vec![i])),
                }
            }
            if folds.len() < 2 {
                return Err(Error::CrossValidation(format!(
                    "{} needs scored cases of at least two {}; all {} are of `{}` (use --cv groups, cases or none)",
                    cv,
                    if cv == Cv::Stacks { "stack families" } else { "GPU generations" },
                    cases.len(),
                    folds.first().map(|f| f.0.as_str()).unwrap_or("")
                )));
            }
        }
    }
    Ok(folds
        .into_par_iter()
        .map(|(held_out, members)| {
            let train: Vec<usize> = (0..fit_idx.len())
                .filter(|i| !members.contains(i))
                .map(|i| fit_idx[i])
                .collect();
            let (fitted, m) = problem.fit(&train, settings);
            Fold {
                held_out,
                members,
                fitted,
                evals: m.evals,
                converged: m.converged,
            }
        })
        .collect())
}

/// The cross-validated middle of the known stacks: fitted parameters that set stacks' keys
/// only (`stacks.NAME.KEY`, any stacks) are grouped by the `[software]` keys they set (a
/// parameter tying `efficiency.gemm` and `efficiency.attention` of three stacks sets those
/// two); each group's value is the median of its parameters' values (one per parameter,
/// however many stacks it ties). What a stack no rule knows (the fallback) takes for those
/// keys.
pub fn middle_of_stacks(params: &[impl StackParam], theta: &[f64]) -> Vec<(Vec<String>, f64)> {
    let mut groups: Vec<(Vec<String>, Vec<f64>)> = Vec::new();
    for (p, v) in params.iter().zip(theta) {
        let Some(paths) = stack_paths(p.keys()) else {
            continue;
        };
        match groups.iter_mut().find(|(k, _)| *k == paths) {
            Some((_, vs)) => vs.push(*v),
            None => groups.push((paths, vec![*v])),
        }
    }
    groups
        .into_iter()
        .map(|(k, mut vs)| {
            vs.sort_by(f64::total_cmp);
            let n = vs.len();
            let m = if n % 2 == 1 {
                vs[n / 2]
            } else {
                (vs[n / 2 - 1] + vs[n / 2]) / 2.0
            };
            (k, round_sig(m, 6))
        })
        .collect()
}

/// The `[software]` keys (sorted, once each) a parameter sets when every key it ties is a
/// stack's key; `None` when one is not.
pub(super) fn stack_paths(keys: &[String]) -> Option<Vec<String>> {
    let mut paths = Vec::new();
    for k in keys {
        let e = Entry::number(k, 0.0);
        let (_, sw) = e.stack_key()?;
        paths.push(sw.to_string());
    }
    paths.sort();
    paths.dedup();
    Some(paths)
}

/// A parameter with its tied keys (what [`middle_of_stacks`] reads).
pub trait StackParam {
    /// The keys.
    fn keys(&self) -> &[String];
}

impl<T: StackParam> StackParam for &T {
    fn keys(&self) -> &[String] {
        (*self).keys()
    }
}

impl StackParam for Resolved {
    fn keys(&self) -> &[String] {
        &self.keys
    }
}

impl StackParam for Param {
    fn keys(&self) -> &[String] {
        &self.keys
    }
}
