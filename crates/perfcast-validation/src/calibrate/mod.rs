//! `perfcast calibrate`: fit named shared parameters (any configuration key, plugin
//! parameters included) to a cases file, with cross-validation.
//!
//! * **Parameters** ([`ParamSpec`]): one value per parameter, set on every key it names
//!   (tied keys) in every case whose configuration has the key ([`crate::overlay`]: present,
//!   or a parameter the case's plugin or engine accepts). A key that applies to no case is an
//!   error; so is one that moves no prediction between its bounds. Without `--param` the
//!   default set [`DEFAULT_PARAMS`] is fitted (its keys that apply to no case left out).
//! * **Objective**: the mean over the cases of `|ln(predicted / measured)|` of each case's
//!   first published metric (the metric `perfcast validate` scores), over the cases that are
//!   scored at the starting values (the configuration's own values), less the serving runs,
//!   which are scored at every fitted value but fitted on only when asked ([`ServingCases`]).
//!   A point where a case fails is infeasible.
//! * **Optimiser** ([`optimize`]): Nelder–Mead on the box of the bounds, deterministic, with a
//!   convergence test and restarts; not converging is reported with the best point.
//! * **Cross-validation** ([`Cv`]): leave-one-group-out (each group predicted by the
//!   parameters fitted on all other groups), leave-one-case-out, leave one software stack
//!   family out, leave one GPU generation out, or none. Every fold starts from the same
//!   starting values; a parameter that applies to no case of a fold's training set keeps its
//!   starting value there. A held-out stack family is predicted as a stack no rule knows: its
//!   cases run on the fallback stack of the rules (`generic`), whose keys that the fitted
//!   parameters set for named stacks (`stacks.NAME.KEY`) take the median of those fitted
//!   values ([`middle_of_stacks`]: the cross-validated middle of the known stacks), the way a
//!   user's unknown framework is predicted.
//!
//! What does not depend on the parameters is worked out once: each case is prepared
//! ([`crate::prepared`]: model, configuration sources, the system when no parameter reaches
//! it), cases are evaluated in parallel and folds are fitted in parallel (rayon).

mod cv;
pub mod optimize;
mod output;
pub mod params;
mod serving;
pub mod synthetic;

use cv::stack_paths;
pub use cv::{middle_of_stacks, Cv, CvRun, StackParam};
pub use optimize::{Minimum, Settings};
pub use params::{DefaultParam, ParamSpec, DEFAULT_PARAMS};
pub use serving::ServingCases;

use crate::cases::{CasesFile, Kind};
use crate::harness::Harness;
use crate::intervals::Class;
use crate::overlay::Entry;
use crate::prepared::Prepared;
use crate::report::{first_metric, FirstMetric, Status};
use crate::serving::ServingRun;
use crate::{Error, Result};
use perfcast_serving::Schedule;
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Mutex;

/// What to fit, and how.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The parameters; empty: [`DEFAULT_PARAMS`].
    pub params: Vec<ParamSpec>,
    /// Cross-validation.
    pub cv: Cv,
    /// Further cross-validations, reported beside the first (`--cv groups,stacks,hardware`).
    pub also: Vec<Cv>,
    /// What the cases simulated as serving runs (`server` and `offline-max-throughput`
    /// modes) are to the fit: scored only (the default), fitted on too, or left out
    /// ([`ServingCases`]).
    pub serving: ServingCases,
    /// Optimiser settings.
    pub settings: Settings,
}

/// A parameter as fitted.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Param {
    /// Its keys (tied).
    pub keys: Vec<String>,
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
    /// Starting value (the configuration's, else the middle of the bounds).
    pub start: f64,
    /// Fitted value (six significant digits: what the overlay carries).
    pub fitted: f64,
    /// Cases it was fitted on (scored cases it applies to, in the objective).
    pub cases: usize,
}

/// One fold of the cross-validation.
#[derive(Debug, Clone, PartialEq)]
pub struct Fold {
    /// The group or case held out.
    pub held_out: String,
    /// The fit cases held out (indices into [`Calibration::cases`]).
    pub members: Vec<usize>,
    /// The parameter values fitted without them.
    pub fitted: Vec<f64>,
    /// The optimiser's outcome.
    pub evals: usize,
    /// Whether it converged.
    pub converged: bool,
}

/// A case the calibration scores.
#[derive(Debug, Clone, PartialEq)]
pub struct FitCase {
    /// Case id.
    pub id: String,
    /// Group.
    pub group: String,
    /// Kind.
    pub kind: Kind,
    /// Its class for error bars.
    pub class: Class,
    /// The accelerator.
    pub gpu: String,
    /// The family of its software stack (`megatron`, `torchtitan`, ...).
    pub family: String,
    /// Its GPU generation (`Ampere`, `Hopper`, `Blackwell`; the accelerator where the
    /// catalog names none).
    pub generation: String,
}

/// The outcome of a calibration.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// The cases file and its sha256.
    pub cases_file: String,
    /// sha256 (hex) of the cases file.
    pub sha256: String,
    /// What the serving runs of the file were to the fit ([`Options::serving`]).
    pub serving: ServingCases,
    /// UTC date of the run.
    pub date: String,
    /// The parameters.
    pub params: Vec<Param>,
    /// Things said on the way (default parameters left out, clamped starts).
    pub notes: Vec<String>,
    /// The cross-validation scheme.
    pub cv: Cv,
    /// The scored cases.
    pub cases: Vec<FitCase>,
    /// Cases of the file not scored, by reason: unsupported, error, first metric not
    /// predicted.
    pub skipped: (usize, usize, usize),
    /// Each case's first metric with the configuration as it is (what `perfcast validate`
    /// reports; the starting values differ from it where a parameter starts from the middle
    /// of its bounds, a clamped value or the mean of tied keys).
    pub before: Vec<Option<FirstMetric>>,
    /// ... at the fitted values.
    pub in_sample: Vec<Option<FirstMetric>>,
    /// ... predicted out of fold (empty for [`Cv::None`]).
    pub out_of_fold: Vec<Option<FirstMetric>>,
    /// The fit on every case.
    pub fit: Minimum,
    /// Objective at the starting values.
    pub start_objective: f64,
    /// The folds.
    pub folds: Vec<Fold>,
    /// The further cross-validations ([`Options::also`]).
    pub also: Vec<CvRun>,
    /// The roofline baseline on the same cases, fitted on those in the objective and refitted
    /// without each case's group ([`crate::baseline::calibration_sets`]).
    pub baseline: [Vec<Option<FirstMetric>>; 2],
    /// Wall time, seconds.
    pub seconds: f64,
    /// Threads it ran on.
    pub threads: usize,
}

impl Calibration {
    /// Whether the fit and every fold converged.
    pub fn converged(&self) -> bool {
        self.fit.converged
            && self
                .folds
                .iter()
                .chain(self.also.iter().flat_map(|r| &r.folds))
                .all(|f| f.converged)
    }
}

/// A parameter being resolved against the cases.
struct Resolved {
    keys: Vec<String>,
    lo: f64,
    hi: f64,
    start: f64,
    /// Per runnable case, the indices of the keys that apply to it.
    per_case: Vec<Vec<usize>>,
}

/// The problem: prepared cases and resolved parameters.
struct Problem<'h, 'c> {
    harness: &'h Harness,
    prepared: Vec<Prepared<'c>>,
    /// Per prepared case, whether it is in the objective (a serving run is scored only
    /// unless [`ServingCases::Fit`]).
    in_fit: Vec<bool>,
    params: Vec<Resolved>,
    /// Per prepared case, its serving run's schedule when it does not depend on step times
    /// (recorded at the start: [`Problem::record`]); an evaluation re-times it instead of
    /// simulating the run again, to the same result.
    schedules: Vec<Option<Box<Schedule>>>,
    /// Each block of the fit minimised so far, by its parameters and cases: a fold that
    /// holds out none of a block's cases fits it exactly as the fit on every case did.
    blocks: Mutex<HashMap<Block, Minimum>>,
    /// What standard error says while it runs.
    progress: progress::Progress,
}

/// A block of a fit: its parameters (indices into [`Problem::params`]) and its cases.
type Block = (Vec<usize>, Vec<usize>);

impl Problem<'_, '_> {
    /// The entries of case `c` (an index into `prepared`) at `theta`.
    fn entries(&self, c: usize, theta: &[f64]) -> Vec<Entry> {
        let mut out = Vec::new();
        for (p, v) in self.params.iter().zip(theta) {
            for &k in &p.per_case[c] {
                out.push(Entry::number(&p.keys[k], *v));
            }
        }
        out
    }

    /// The first metric of each of `cases` at `theta` (`None` where it is not scored). Each
    /// distinct system is composed once (cases of one accelerator, NIC and device count
    /// share it), then the cases are evaluated in parallel.
    fn scores(&self, cases: &[usize], theta: &[f64]) -> Vec<Option<FirstMetric>> {
        let h = self.harness;
        let entries: Vec<Vec<Entry>> = cases.iter().map(|&c| self.entries(c, theta)).collect();
        let keys: Vec<Option<String>> = cases
            .iter()
            .zip(&entries)
            .map(|(&c, e)| h.system_key(&self.prepared[c], e))
            .collect();
        let mut firsts: Vec<(usize, &str)> = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            if let Some(k) = k {
                if !firsts.iter().any(|(_, f)| f == k) {
                    firsts.push((i, k));
                }
            }
        }
        let systems: Vec<Result<perfcast_core::System>> = firsts
            .par_iter()
            .map(|&(i, _)| h.compose(&self.prepared[cases[i]], &entries[i]))
            .collect();
        (0..cases.len())
            .into_par_iter()
            .map(|i| {
                let system = keys[i].as_ref().and_then(|k| {
                    let j = firsts.iter().position(|(_, f)| f == k)?;
                    Some(systems[j].clone())
                });
                let c = cases[i];
                let mut how = match &self.schedules[c] {
                    Some(s) => ServingRun::Replay(s),
                    None => ServingRun::Simulate,
                };
                let r = h.evaluate_with(&self.prepared[c], &entries[i], system, &mut how);
                if r.status != Status::Ok {
                    return None;
                }
                first_metric(&r)
            })
            .collect()
    }

    /// The first metric of every case at `theta`, the schedule of each serving run in the
    /// objective recorded (where it does not depend on step times) for the evaluations to
    /// come.
    fn record(&mut self, theta: &[f64]) -> Vec<Option<FirstMetric>> {
        self.progress.phase(&format!(
            "{} cases prepared; scoring the start",
            self.prepared.len()
        ));
        let h = self.harness;
        let (scores, schedules): (Vec<_>, Vec<_>) = (0..self.prepared.len())
            .into_par_iter()
            .map(|c| {
                let mut how = if self.in_fit[c] {
                    ServingRun::Record(None)
                } else {
                    ServingRun::Simulate
                };
                let r = h.evaluate_with(&self.prepared[c], &self.entries(c, theta), None, &mut how);
                let schedule = match how {
                    ServingRun::Record(s) => s,
                    _ => None,
                };
                let first = first_metric(&r).filter(|_| r.status == Status::Ok);
                (first, schedule)
            })
            .unzip();
        self.schedules = schedules;
        self.progress.phase("fitting");
        scores
    }

    /// The first metric of each of `cases` at `theta`, each prepared again by `other` (a
    /// harness mapping every case to the fallback stack: [`Harness::on_fallback_stack`]): the
    /// parameters' keys that apply there, and the fallback stack's keys that fitted
    /// parameters set for named stacks at their middle ([`middle_of_stacks`]).
    fn scores_on(
        &self,
        other: &Harness,
        cases: &[usize],
        theta: &[f64],
    ) -> Vec<Option<FirstMetric>> {
        let fallback = other.stacks().fallback_name();
        let mut entries: Vec<Entry> = Vec::new();
        for (p, v) in self.params.iter().zip(theta) {
            for k in &p.keys {
                entries.push(Entry::number(k, *v));
            }
        }
        for (keys, v) in middle_of_stacks(&self.params, theta) {
            for key in keys {
                entries.push(Entry::number(&format!("stacks.{fallback}.{key}"), v));
            }
        }
        cases
            .par_iter()
            .map(|&c| {
                let p = other.prepare(self.prepared[c].case);
                let applicable = other.applicable(&p, &entries);
                let r = other.evaluate(&p, &applicable);
                if r.status != Status::Ok {
                    return None;
                }
                first_metric(&r)
            })
            .collect()
    }

    /// What a calibration reports of prepared case `c`.
    fn fit_case(&self, c: usize) -> FitCase {
        let case = self.prepared[c].case;
        let family = self.harness.stacks().of(case).1.family.clone();
        FitCase {
            id: case.id.clone(),
            group: case.group.clone(),
            kind: case.kind,
            class: Class::of_case(case, &family),
            gpu: case.system.gpu.clone(),
            family,
            generation: crate::stacks::generation_of(&case.system.gpu)
                .map(|g| g.name().to_string())
                .unwrap_or_else(|| case.system.gpu.clone()),
        }
    }

    /// Mean |ln(predicted / measured)| over `cases`; `+inf` when one is not scored.
    fn objective(&self, cases: &[usize], theta: &[f64]) -> f64 {
        let s = self.scores(cases, theta);
        self.progress.evaluated(cases.len());
        let mut sum = 0.0;
        for f in &s {
            match f {
                Some(f) => sum += (f.predicted / f.measured).ln().abs(),
                None => return f64::INFINITY,
            }
        }
        let v = sum / cases.len().max(1) as f64;
        if v.is_finite() {
            v
        } else {
            f64::INFINITY
        }
    }

    fn start(&self) -> Vec<f64> {
        self.params.iter().map(|p| p.start).collect()
    }

    /// The blocks minimised so far (a poisoned lock only means another fold panicked: its
    /// blocks are whole or absent).
    fn memo(&self) -> std::sync::MutexGuard<'_, HashMap<Block, Minimum>> {
        self.blocks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fit the parameters that apply to some case of `cases` in the objective
    /// ([`Problem::in_fit`]; the others keep their start).
    fn fit(&self, cases: &[usize], settings: &Settings) -> (Vec<f64>, Minimum) {
        let cases: Vec<usize> = cases.iter().copied().filter(|&c| self.in_fit[c]).collect();
        let cases = cases.as_slice();
        let start = self.start();
        let free: Vec<usize> = (0..self.params.len())
            .filter(|&j| {
                cases
                    .iter()
                    .any(|&c| !self.params[j].per_case[c].is_empty())
            })
            .collect();
        let theta_of = |x: &[f64]| {
            let mut t = start.clone();
            for (&j, xi) in free.iter().zip(x) {
                let p = &self.params[j];
                t[j] = p.lo + xi * (p.hi - p.lo);
            }
            t
        };
        let x0: Vec<f64> = free
            .iter()
            .map(|&j| {
                let p = &self.params[j];
                (p.start - p.lo) / (p.hi - p.lo)
            })
            .collect();
        // The objective is a sum over cases, and a case moves only with the parameters that
        // apply to it: each connected block of parameters and cases is minimised alone (in
        // parallel), the same minimum in far fewer evaluations of far fewer cases.
        let applies = |k: usize, c: usize| !self.params[free[k]].per_case[c].is_empty();
        let parts: Vec<(Minimum, Vec<usize>)> = blocks(free.len(), cases, applies)
            .into_par_iter()
            .map(|(at, members)| {
                let key = (at.iter().map(|&k| free[k]).collect(), members.clone());
                if let Some(m) = self.memo().get(&key) {
                    return (m.clone(), at);
                }
                let sub = |x: &[f64]| {
                    let mut full = x0.clone();
                    for (&k, v) in at.iter().zip(x) {
                        full[k] = *v;
                    }
                    full
                };
                let y0: Vec<f64> = at.iter().map(|&k| x0[k]).collect();
                let m = optimize::minimize(
                    |y| self.objective(&members, &theta_of(&sub(y))),
                    &y0,
                    settings,
                );
                self.memo().insert(key, m.clone());
                (m, at)
            })
            .collect();
        let mut x = x0.clone();
        let (mut evals, mut converged) = (0, true);
        for (m, at) in &parts {
            for (&k, v) in at.iter().zip(&m.x) {
                x[k] = *v;
            }
            evals += m.evals;
            converged &= m.converged;
        }
        let f = self.objective(cases, &theta_of(&x));
        let m = Minimum {
            converged: converged && f.is_finite(),
            x,
            f,
            evals,
        };
        let mut theta = theta_of(&m.x);
        for (t, p) in theta.iter_mut().zip(&self.params) {
            *t = round_sig(*t, 6).clamp(p.lo, p.hi);
        }
        // A stack's parameter that no case here reaches (its stack's cases all held out)
        // takes the middle of the stacks fitted here, as a stack no rule knows would: its
        // configured value was fitted on the held-out cases themselves.
        let fitted: Vec<&Resolved> = free.iter().map(|&j| &self.params[j]).collect();
        let values: Vec<f64> = free.iter().map(|&j| theta[j]).collect();
        let middle = middle_of_stacks(&fitted, &values);
        for (j, p) in self.params.iter().enumerate() {
            if free.contains(&j) {
                continue;
            }
            if let Some(v) = stack_paths(&p.keys)
                .and_then(|sw| middle.iter().find(|(k, _)| *k == sw))
                .map(|(_, v)| *v)
            {
                theta[j] = v.clamp(p.lo, p.hi);
            }
        }
        (theta, m)
    }
}

/// The independent blocks of a fit of `n` parameters on `cases`: each the parameters linked
/// through the cases they share (`applies(k, c)`: parameter `k` applies to case `c`), with
/// those cases, in the order of their first parameter. Cases no parameter applies to are in
/// none (they do not move).
fn blocks(
    n: usize,
    cases: &[usize],
    applies: impl Fn(usize, usize) -> bool,
) -> Vec<(Vec<usize>, Vec<usize>)> {
    // Union-find over the parameters, each root its block's smallest parameter.
    let mut root: Vec<usize> = (0..n).collect();
    fn find(root: &mut [usize], mut a: usize) -> usize {
        while root[a] != a {
            root[a] = root[root[a]];
            a = root[a];
        }
        a
    }
    for &c in cases {
        let mut first = None;
        for k in (0..n).filter(|&k| applies(k, c)) {
            match first {
                None => first = Some(k),
                Some(f) => {
                    let (a, b) = (find(&mut root, f), find(&mut root, k));
                    root[a.max(b)] = a.min(b);
                }
            }
        }
    }
    let mut out: Vec<(usize, Vec<usize>, Vec<usize>)> = Vec::new();
    for k in 0..n {
        let r = find(&mut root, k);
        match out.iter_mut().find(|b| b.0 == r) {
            Some(b) => b.1.push(k),
            None => out.push((r, vec![k], Vec::new())),
        }
    }
    for &c in cases {
        if let Some(k) = (0..n).find(|&k| applies(k, c)) {
            let r = find(&mut root, k);
            if let Some(b) = out.iter_mut().find(|b| b.0 == r) {
                b.2.push(c);
            }
        }
    }
    out.into_iter()
        .map(|(_, at, members)| (at, members))
        .collect()
}

/// `v` to `digits` significant digits.
pub fn round_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    let r = (v * scale).round() / scale;
    if r.is_finite() {
        r
    } else {
        v
    }
}

/// Calibrate on the cases of `file` (sha256 `sha256`) through `harness` (its own overlay is
/// not used: the parameters are the only keys set).
pub fn calibrate(
    harness: &Harness,
    file: &CasesFile,
    sha256: &str,
    opts: &Options,
) -> Result<Calibration> {
    let t0 = std::time::Instant::now();
    let serving = |c: &&crate::cases::Case| {
        c.inference
            .as_ref()
            .is_some_and(|i| crate::serving::models_mode(i.mode))
    };
    let all: Vec<Prepared> = file
        .cases
        .par_iter()
        .filter(|c| !(opts.serving == ServingCases::Exclude && serving(c)))
        .map(|c| harness.prepare(c))
        .collect();
    let (mut unsupported, mut errors) = (0, 0);
    let mut reasons = Vec::new();
    for p in &all {
        if let Some((s, why)) = p.failure() {
            match s {
                Status::Unsupported => unsupported += 1,
                _ => errors += 1,
            }
            if reasons.len() < 3 {
                reasons.push(why.clone().for_case(&p.case.id).to_string());
            }
        }
    }
    let prepared: Vec<Prepared> = all.into_iter().filter(|p| p.runnable()).collect();
    if prepared.is_empty() {
        return Err(Error::Calibration {
            file: file.file.clone(),
            message: format!(
                "no case the engines support ({} cases: {unsupported} unsupported, {errors} whose system cannot be built), so nothing to calibrate on; for example:\n  {}",
                file.cases.len(),
                reasons.join("\n  ")
            ),
        });
    }
    let mut notes = Vec::new();
    let n = file.cases.iter().filter(serving).count();
    match opts.serving {
        _ if n == 0 => {}
        ServingCases::Exclude => notes.push(format!(
            "{n} cases simulated as serving runs (server, offline-max-throughput) left out (--serving exclude)"
        )),
        ServingCases::Score => notes.push(format!(
            "{n} cases simulated as serving runs (server, offline-max-throughput) predicted at each fitted value and scored, not fitted on (--serving fit puts them in the objective)"
        )),
        ServingCases::Fit => {}
    }
    let (specs, explicit) = if opts.params.is_empty() {
        (DEFAULT_PARAMS.iter().map(|d| d.spec()).collect(), false)
    } else {
        (opts.params.clone(), true)
    };
    let mut params = Vec::new();
    for spec in &specs {
        // An explicit parameter that applies to no case is an error inside `resolve`.
        match resolve(harness, &prepared, spec, explicit, &mut notes)? {
            Some(r) => params.push(r),
            None => notes.push(format!(
                "default parameter {} applies to no case of {}: left out",
                spec.keys.join(","),
                file.file
            )),
        }
    }
    if params.is_empty() {
        return Err(Error::Calibration {
            file: file.file.clone(),
            message: format!(
                "none of the default parameters ({}) applies to a case of this file; name the parameters with --param KEY=LO..HI",
                DEFAULT_PARAMS
                    .iter()
                    .map(|d| d.keys.join(","))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        });
    }
    let in_fit = prepared
        .iter()
        .map(|p| opts.serving.fitted() || !serving(&p.case))
        .collect();
    let problem = Problem {
        harness,
        prepared,
        in_fit,
        params,
        schedules: Vec::new(),
        blocks: Mutex::default(),
        progress: progress::Progress::new(t0),
    };
    finish(
        problem,
        file,
        sha256,
        opts,
        notes,
        (unsupported, errors),
        t0,
    )
}

mod file;
mod progress;
mod resolve;
pub use file::{calibrate_file, sha256_hex, utc_date};
use resolve::resolve;

/// Score the start, fit, cross-validate.
fn finish(
    mut problem: Problem,
    file: &CasesFile,
    sha256: &str,
    opts: &Options,
    notes: Vec<String>,
    failed: (usize, usize),
    t0: std::time::Instant,
) -> Result<Calibration> {
    let start = problem.start();
    let everything: Vec<usize> = (0..problem.prepared.len()).collect();
    let at_start = problem.record(&start);
    let fit_idx: Vec<usize> = everything
        .iter()
        .copied()
        .filter(|&c| at_start[c].is_some())
        .collect();
    let unscored = everything.len() - fit_idx.len();
    if fit_idx.is_empty() {
        return Err(Error::Calibration {
            file: file.file.clone(),
            message: format!(
                "no case is scored at the starting values ({} cases run, none has a predicted first metric); nothing to calibrate on",
                everything.len()
            ),
        });
    }
    // The cases in the objective; the others (serving runs scored only) are predicted at
    // each fitted value.
    let objective_idx: Vec<usize> = fit_idx
        .iter()
        .copied()
        .filter(|&c| problem.in_fit[c])
        .collect();
    if objective_idx.is_empty() {
        return Err(Error::Calibration {
            file: file.file.clone(),
            message: format!(
                "every scored case ({}) is a serving run, which a calibration scores but does not fit on unless told to: use --serving fit",
                fit_idx.len()
            ),
        });
    }
    let mut notes = notes;
    resolve::check_moves(
        &mut problem,
        &objective_idx,
        &at_start,
        !opts.params.is_empty(),
        &mut notes,
    )?;
    let (fitted, fit) = problem.fit(&objective_idx, &opts.settings);
    let in_sample = problem.scores(&fit_idx, &fitted);
    let cases: Vec<FitCase> = fit_idx.iter().map(|&c| problem.fit_case(c)).collect();
    let (folds, out_of_fold) = match opts.cv {
        Cv::None => (Vec::new(), Vec::new()),
        cv => {
            problem
                .progress
                .phase(&format!("cross-validating ({})", cv.name()));
            let r = cv::run(&problem, &fit_idx, &cases, cv, &opts.settings)?;
            (r.folds, r.out_of_fold)
        }
    };
    let mut also = Vec::new();
    for &cv in &opts.also {
        if cv != Cv::None && cv != opts.cv && !also.iter().any(|r: &CvRun| r.cv == cv) {
            also.push(cv::run(&problem, &fit_idx, &cases, cv, &opts.settings)?);
        }
    }
    let params = problem
        .params
        .iter()
        .zip(&fitted)
        .map(|(p, v)| Param {
            keys: p.keys.clone(),
            lo: p.lo,
            hi: p.hi,
            start: p.start,
            fitted: *v,
            cases: objective_idx
                .iter()
                .filter(|&&c| !p.per_case[c].is_empty())
                .count(),
        })
        .collect();
    let ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    let in_objective: Vec<&str> = (0..ids.len())
        .filter(|&i| problem.in_fit[fit_idx[i]])
        .map(|i| ids[i])
        .collect();
    let baseline = crate::baseline::calibration_sets(file, &ids, &in_objective);
    Ok(Calibration {
        cases_file: file.file.clone(),
        sha256: sha256.to_string(),
        serving: opts.serving,
        date: utc_date(),
        params,
        notes,
        cv: opts.cv,
        cases,
        skipped: (failed.0, failed.1, unscored),
        before: fit_idx
            .par_iter()
            .map(|&c| {
                let r = problem.harness.evaluate(&problem.prepared[c], &[]);
                first_metric(&r).filter(|_| r.status == Status::Ok)
            })
            .collect(),
        in_sample,
        out_of_fold,
        start_objective: problem.objective(&objective_idx, &start),
        fit,
        folds,
        also,
        baseline,
        seconds: t0.elapsed().as_secs_f64(),
        threads: rayon::current_num_threads(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stack parameters are grouped by the software keys they set, one value per parameter
    /// (however many stacks it ties); the median of each group; other parameters ignored.
    #[test]
    fn the_middle_of_the_stacks() {
        let p = |keys: &[&str]| Param {
            keys: keys.iter().map(|k| k.to_string()).collect(),
            lo: 0.0,
            hi: 2.0,
            start: 1.0,
            fitted: 1.0,
            cases: 1,
        };
        let both = |s: &str| {
            [
                format!("stacks.{s}.efficiency.gemm"),
                format!("stacks.{s}.efficiency.attention"),
            ]
        };
        let [a1, a2] = both("a");
        let [b1, b2] = both("b");
        let [c1, c2] = both("c");
        let params = [
            p(&[
                &a1,
                &a2,
                "stacks.a2.efficiency.gemm",
                "stacks.a2.efficiency.attention",
            ]),
            p(&[&b1, &b2]),
            p(&[&c1, &c2]),
            p(&["stacks.a.host.kernel_launch_us"]),
            p(&["stacks.b.host.kernel_launch_us"]),
            p(&["options.host_launch_us"]),
            p(&["stacks.a.efficiency.gemm", "options.step_overhead_us"]),
        ];
        let m = middle_of_stacks(&params, &[0.7, 0.9, 0.8, 10.0, 20.0, 5.0, 0.1]);
        let eff = vec![
            "efficiency.attention".to_string(),
            "efficiency.gemm".to_string(),
        ];
        assert_eq!(
            m,
            vec![
                (eff, 0.8),
                (vec!["host.kernel_launch_us".to_string()], 15.0)
            ]
        );
    }

    /// Parameters linked through shared cases form one block; a case no parameter reaches is
    /// in none; a parameter that reaches no case is a block of its own, with no cases.
    #[test]
    fn blocks_of_a_fit() {
        // (cases, which parameters apply to each case (by position), blocks expected).
        type Table = (
            &'static [usize],
            &'static [&'static [usize]],
            &'static [(&'static [usize], &'static [usize])],
        );
        let table: &[Table] = &[
            // Two stacks' parameters, each on its cases; the inference parameters 2 and 3
            // together on theirs.
            (
                &[0, 1, 2, 3, 4],
                &[&[0], &[1], &[0], &[2, 3], &[3]],
                &[(&[0], &[0, 2]), (&[1], &[1]), (&[2, 3], &[3, 4])],
            ),
            // A chain links 0-1 and 1-2 into one block; case 1 moves with nothing.
            (
                &[0, 1, 2],
                &[&[0, 1], &[], &[2, 1]],
                &[(&[0, 1, 2], &[0, 2])],
            ),
            // Parameter 1 reaches no case; only the cases given are counted.
            (&[2], &[&[0], &[1], &[0]], &[(&[0], &[2]), (&[1], &[])]),
        ];
        for &(cases, applies, want) in table {
            let n = want.iter().map(|b| b.0.len()).sum();
            let got = blocks(n, cases, |k, c| applies[c].contains(&k));
            let want: Vec<(Vec<usize>, Vec<usize>)> =
                want.iter().map(|(a, b)| (a.to_vec(), b.to_vec())).collect();
            assert_eq!(got, want, "{applies:?}");
        }
    }

    #[test]
    fn rounding_and_names() {
        assert_eq!(round_sig(0.712345678, 6), 0.712346);
        assert_eq!(round_sig(192.00004, 6), 192.0);
        assert_eq!(round_sig(-0.000123456789, 3), -0.000123);
        assert_eq!(round_sig(0.0, 6), 0.0);
        for cv in [Cv::Groups, Cv::Cases, Cv::Stacks, Cv::Hardware, Cv::None] {
            assert_eq!(cv.name().parse::<Cv>().unwrap(), cv);
        }
        assert!("folds"
            .parse::<Cv>()
            .unwrap_err()
            .to_string()
            .contains("`groups`"));
        let d = utc_date();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"), "{d}");
    }
}
