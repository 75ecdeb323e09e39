//! The search: enumerate plan groups (every dimension but recompute and schedule), walk them
//! in parallel, evaluate each group's variants on the engine's fast path, keep a bounded
//! top-N heap and a Pareto set per worker, merge, and run the full `evaluate` for the
//! finalists only.
//!
//! One module per step: `resolve` (inputs checked, the space turned into the lists walked),
//! `walk` (enumeration, pruning, timing on the fast path), `accumulate` (what a worker keeps),
//! `finalists` (full evaluation of the top N, the fronts, the summary) and `results` (the
//! types returned).

mod accumulate;
mod finalists;
mod resolve;
mod results;
mod walk;

pub use results::{Counts, ParetoPoint, PlanKey, RankedPlan, SearchResult, Summary};

use crate::space::{Budget, Constraints, Objective, SearchSpace};
use crate::SearchError;
use perfcast_engine::training::{Training, TrainingPlan};
use perfcast_render::GIB;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

/// Search `trainings` (one per device count, each with its system's `devices`) for the best
/// `top_n` plans. `template` gives every plan field the space does not walk (global batch,
/// attention kernel, dropout, overlap switches...). No time limit: see [`search_within`].
pub fn search(
    trainings: &[Training],
    space: &SearchSpace,
    constraints: &Constraints,
    template: &TrainingPlan,
    objective: Objective,
    top_n: usize,
) -> Result<SearchResult, SearchError> {
    search_within(
        trainings,
        space,
        constraints,
        template,
        objective,
        top_n,
        Budget::UNLIMITED,
    )
}

/// [`search`] within `budget`: before the walk, the space's size is estimated and a device
/// count whose model state cannot fit even sharded over all its devices
/// ([`Training::memory_floor`]) is dropped (all of them: an error at once, with the figures);
/// the walk stops at `budget.max_seconds` and the result is then the best found so far, its
/// summary saying what was not visited.
pub fn search_within(
    trainings: &[Training],
    space: &SearchSpace,
    constraints: &Constraints,
    template: &TrainingPlan,
    objective: Objective,
    top_n: usize,
    budget: Budget,
) -> Result<SearchResult, SearchError> {
    let space = (trainings, space, constraints, template);
    search_with(space, objective, top_n, budget, true)
}

/// [`search_within`], the memory checks of partial recompute counts by bisection or (`bisect`
/// false, for the tests) one by one.
pub(crate) fn search_with(
    (trainings, space, constraints, template): (
        &[Training],
        &SearchSpace,
        &Constraints,
        &TrainingPlan,
    ),
    objective: Objective,
    top_n: usize,
    budget: Budget,
    bisect: bool,
) -> Result<SearchResult, SearchError> {
    let start = Instant::now();
    resolve::check(trainings, space, constraints, top_n)?;
    if let Some(s) = budget.max_seconds {
        if !(s.is_finite() && s > 0.0) {
            return Err(SearchError::Invalid {
                key: "search.max_seconds".into(),
                message: format!("{s} is not allowed: a positive number of seconds"),
            });
        }
    }
    let template = &TrainingPlan {
        global_batch: constraints.global_batch,
        ..template.clone()
    };
    let mut lists = Vec::with_capacity(trainings.len());
    for t in trainings {
        lists.push(resolve::lists(t, space, template.precision)?);
    }
    let mut outers = resolve::outer_tuples(trainings, space, constraints, template)?;
    let hopeless = hopeless_counts(trainings, constraints, template.task);
    outers.retain(|o| !hopeless.iter().any(|(t, _)| *t == o.t));
    if outers.is_empty() && !hopeless.is_empty() {
        let why: Vec<String> = hopeless.into_iter().map(|(_, m)| m).collect();
        return Err(SearchError::Empty {
            reason: format!("no plan can fit in memory: {}", why.join("; ")),
        });
    }
    let ctx = walk::Ctx {
        trainings,
        lists,
        template,
        constraints,
        objective,
        top_n,
        threshold: AtomicU64::new(f64::INFINITY.to_bits()),
        deadline: budget
            .max_seconds
            .map(|s| start + Duration::from_secs_f64(s.min(1e9))),
        expired: AtomicBool::new(false),
        bisect,
    };
    // Largest work first (small pp and many variants), for an early threshold; the order
    // does not change the result.
    outers.sort_by_key(|o| (o.pp, o.tp, o.cp, o.devices));
    let estimates: Vec<u64> = outers.iter().map(|o| ctx.estimate(*o)).collect();
    let mut acc = walk::run(&ctx, &outers, &estimates);
    acc.unvisited.sort_unstable();
    let walked = finalists::Walked {
        outers: &outers,
        estimated: estimates.iter().fold(0u64, |a, e| a.saturating_add(*e)),
        max_seconds: budget.max_seconds,
    };
    if acc.counts.evaluated == 0 {
        return Err(finalists::no_plan(&acc, trainings, constraints, &walked));
    }
    finalists::finish(
        acc,
        trainings,
        template,
        objective,
        constraints,
        start,
        &walked,
    )
}

/// The device counts (training indices) whose model state alone cannot fit in a device even
/// sharded over all its devices, each with the figures that prove it.
fn hopeless_counts(
    trainings: &[Training],
    constraints: &Constraints,
    task: perfcast_engine::training::Task,
) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, t) in trainings.iter().enumerate() {
        let n = t.system().devices;
        let floor = t.memory_floor(n, task).0;
        let limit = constraints.memory_limit(t.capacity().0);
        if floor > limit {
            out.push((
                i,
                format!(
                    "on {n} devices every plan needs at least {:.2} GiB per device ({} \
                     has {:.4e} parameters; {}, spread over all {n} devices, plus the \
                     runtime reserve), but the limit is {:.2} GiB (capacity x (1 - \
                     search.memory_headroom = {})); more devices or a smaller model",
                    floor / GIB,
                    t.model().name,
                    t.model().params() as f64,
                    match task {
                        perfcast_engine::training::Task::Lora =>
                            "frozen weights keep at least their 2 bytes each",
                        _ => "mixed-precision Adam keeps at least 16 bytes of state per parameter",
                    },
                    limit / GIB,
                    constraints.memory_headroom,
                ),
            ));
        }
    }
    out
}
