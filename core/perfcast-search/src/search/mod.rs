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

use crate::space::{Constraints, Objective, SearchSpace};
use crate::SearchError;
use perfcast_engine::training::{Training, TrainingPlan};
use std::sync::atomic::AtomicU64;
use std::time::Instant;

/// Search `trainings` (one per device count, each with its system's `devices`) for the best
/// `top_n` plans. `template` gives every plan field the space does not walk (global batch,
/// attention kernel, dropout, overlap switches...).
pub fn search(
    trainings: &[Training],
    space: &SearchSpace,
    constraints: &Constraints,
    template: &TrainingPlan,
    objective: Objective,
    top_n: usize,
) -> Result<SearchResult, SearchError> {
    let start = Instant::now();
    resolve::check(trainings, space, constraints, top_n)?;
    let template = &TrainingPlan {
        global_batch: constraints.global_batch,
        ..template.clone()
    };
    let mut lists = Vec::with_capacity(trainings.len());
    for t in trainings {
        lists.push(resolve::lists(t, space)?);
    }
    let mut outers = resolve::outer_tuples(trainings, space, constraints)?;
    let ctx = walk::Ctx {
        trainings,
        lists,
        template,
        constraints,
        objective,
        top_n,
        threshold: AtomicU64::new(f64::INFINITY.to_bits()),
    };
    // Largest work first (small pp and many variants), for an early threshold; the order
    // does not change the result.
    outers.sort_by_key(|o| (o.pp, o.tp, o.cp, o.devices));
    let acc = walk::run(&ctx, &outers);
    if acc.counts.evaluated == 0 {
        return Err(finalists::no_plan(&acc, trainings, constraints));
    }
    finalists::finish(acc, trainings, template, objective, start)
}
