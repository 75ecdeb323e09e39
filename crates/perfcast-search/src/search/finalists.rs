//! The finalists: the top N plans fully evaluated (`Training::evaluate_placed`), the Pareto
//! fronts and the fastest plan per device count decoded from their keys, the summary; or,
//! when no plan was timed, an error that says why.

use super::accumulate::{Acc, Scored};
use super::resolve::Outer;
use super::results::{Counts, ParetoPoint, PlanKey, RankedPlan, SearchResult, Summary, PRECISIONS};
use crate::space::{Constraints, Objective};
use crate::SearchError;
use perfcast_core::DType;
use perfcast_engine::training::{Fp8Recipe, Placement, Training, TrainingPlan};
use std::time::Instant;

use perfcast_render::GIB;

fn placement_of(k: &PlanKey) -> Placement {
    Placement::all()
        .get(k.placement as usize)
        .copied()
        .unwrap_or_default()
}

/// The template's recipe where it runs `precision`'s format (a search over precisions keeps a
/// named fp8 recipe for its fp8 plans; other precisions take their default).
pub(super) fn recipe_for(template: &TrainingPlan, precision: DType) -> Option<Fp8Recipe> {
    template.fp8_recipe.filter(|r| r.dtype() == precision)
}

/// Set `plan.axes` to `degrees` (the run's numbering) by the training's axis names: every
/// axis of degree > 1, and those the template names.
pub(super) fn set_axes(
    plan: &mut TrainingPlan,
    training: &Training,
    degrees: &[u32; perfcast_core::parallel::MAX_DECLARED_AXES],
) {
    for (decl, &d) in training.declared_axes().zip(degrees) {
        if d > 1 || plan.axes.contains_key(&decl.name) {
            plan.axes.insert(decl.name.clone(), d);
        }
    }
}

fn plan_of(template: &TrainingPlan, training: &Training, k: &PlanKey) -> TrainingPlan {
    let rnames = training.recompute_names();
    let snames = training.schedule_names();
    let mut plan = TrainingPlan {
        tp: k.tp,
        pp: k.pp,
        dp: k.dp,
        cp: k.cp,
        ep: k.ep,
        etp: k.etp,
        vpp: k.vpp,
        sp: k.sp,
        zero_stage: k.zero_stage,
        micro_batch: k.micro_batch,
        recompute: rnames[k.recompute as usize].to_string(),
        // The modules say what `selective` reruns; other policies take none.
        recompute_modules: template
            .recompute_modules
            .filter(|_| rnames[k.recompute as usize] == "selective"),
        recompute_layers: (k.recompute_layers > 0).then_some(k.recompute_layers),
        schedule: Some(snames[k.schedule as usize].to_string()),
        precision: PRECISIONS[k.precision as usize],
        fp8_recipe: recipe_for(template, PRECISIONS[k.precision as usize]),
        tp_comm_overlap: k.tp_comm_overlap,
        overlap_grad_reduce: k.overlap_grad_reduce,
        overlap_param_gather: k.overlap_param_gather,
        ..template.clone()
    };
    set_axes(&mut plan, training, &k.axes);
    plan
}

/// Why no plan was timed: the space lists none, none fits in memory (the limit and the
/// smallest need), or the engine refused them all; with the three most frequent refusals.
/// What the walk covered, for the summary: the tuples walked (in the walk's order), the
/// estimated size of the space, and the time limit.
pub(super) struct Walked<'a> {
    pub(super) outers: &'a [Outer],
    pub(super) estimated: u64,
    pub(super) max_seconds: Option<f64>,
}

impl Walked<'_> {
    /// Plans not visited, the labels of the tuples cut short (at most [`MAX_LISTED`]) and
    /// their count.
    fn not_visited(&self, acc: &Acc) -> (u64, Vec<String>, usize) {
        let plans = acc.unvisited.iter().map(|(_, n)| *n).sum();
        let labels = acc
            .unvisited
            .iter()
            .take(MAX_LISTED)
            .map(|(i, n)| {
                let o = &self.outers[*i];
                format!(
                    "tp{} pp{} dp{} cp{} on {} devices ({n} plans)",
                    o.tp, o.pp, o.dp, o.cp, o.devices
                )
            })
            .collect();
        (plans, labels, acc.unvisited.len())
    }
}

/// Most tuples a summary lists by name.
const MAX_LISTED: usize = 20;

pub(super) fn no_plan(
    acc: &Acc,
    trainings: &[Training],
    constraints: &Constraints,
    walked: &Walked<'_>,
) -> SearchError {
    let counts = &acc.counts;
    if !acc.unvisited.is_empty() {
        let (plans, _, tuples) = walked.not_visited(acc);
        return SearchError::Empty {
            reason: format!(
                "no plan was timed within search.max_seconds = {} s (--max-seconds): {} of \
                 about {} plans visited, {plans} not visited in {tuples} of {} (tp, pp, dp, \
                 cp) tuples; raise the limit or narrow the [search] space",
                walked.max_seconds.unwrap_or(0.0),
                acc.visited,
                walked.estimated,
                walked.outers.len()
            ),
        };
    }
    let limit_gib = constraints.memory_limit(trainings[0].capacity().0) / GIB;
    let mut reason = if counts.enumerated == 0 {
        "the space lists no plan (check search.vpp, search.micro_batch, search.recompute, \
         search.schedule, search.precision)"
            .to_string()
    } else if counts.pruned_memory > 0 {
        format!(
            "no plan fits in memory: the limit is {limit_gib:.2} GiB per device \
             (capacity x (1 - search.memory_headroom = {})), the smallest plan needs {:.2} GiB",
            constraints.memory_headroom,
            acc.min_memory / GIB
        )
    } else {
        "every plan was refused by the engine's checks".to_string()
    };
    let mut reasons: Vec<_> = acc.invalid.iter().collect();
    reasons
        .sort_by(|a, b| (b.1 .0.cmp(&a.1 .0)).then_with(|| a.0.to_string().cmp(&b.0.to_string())));
    for (k, (c, m)) in reasons.iter().take(3) {
        reason.push_str(&format!("; {c} plans refused on `{k}`: {m}"));
    }
    SearchError::Empty { reason }
}

/// The result of a search that timed at least one plan: the top N fully evaluated (ranked
/// by objective, ties by key), the fronts, and the summary (`start` is when the search
/// began).
pub(super) fn finish(
    mut acc: Acc,
    trainings: &[Training],
    template: &TrainingPlan,
    objective: Objective,
    constraints: &Constraints,
    start: Instant,
    walked: &Walked<'_>,
) -> Result<SearchResult, SearchError> {
    let training_of = |s: &Scored| {
        let i = trainings
            .iter()
            .position(|t| t.system().devices == s.key.devices);
        &trainings[i.unwrap_or(0)]
    };
    let mut top: Vec<Scored> = std::mem::take(&mut acc.top).into_vec();
    top.sort();
    let mut plans = Vec::with_capacity(top.len());
    for (i, s) in top.iter().enumerate() {
        let t = training_of(s);
        let plan = plan_of(template, t, &s.key);
        let placement = placement_of(&s.key);
        let report = t
            .evaluate_placed(&plan, &placement)
            .map_err(|e| SearchError::Model {
                context: format!("evaluating finalist {plan:?}"),
                source: e,
            })?;
        plans.push(RankedPlan {
            rank: i + 1,
            objective: s.objective,
            plan,
            placement: placement.name(),
            report,
        });
    }
    let point = |s: &Scored| ParetoPoint {
        devices: s.key.devices,
        time_s: s.time,
        memory_gib: s.memory / GIB,
        plan: plan_of(template, training_of(s), &s.key),
        placement: placement_of(&s.key).name(),
    };
    let pareto: Vec<ParetoPoint> = acc.pareto.pts.iter().map(point).collect();
    let fastest: Vec<ParetoPoint> = acc.fastest.values().map(point).collect();
    // Fastest per device count, kept when faster than every smaller count.
    let mut pareto_devices = Vec::new();
    if trainings.len() > 1 {
        let mut best = f64::INFINITY;
        for s in acc.fastest.values() {
            if s.time < best {
                best = s.time;
                pareto_devices.push(point(s));
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let capacity = trainings[0].capacity().0;
    Ok(SearchResult {
        plans,
        pareto,
        pareto_devices,
        fastest,
        summary: summary(&acc, seconds, objective, walked, constraints, capacity),
    })
}

/// The summary; `capacity` (bytes per device) and the constraints give the memory limit.
fn summary(
    acc: &Acc,
    seconds: f64,
    objective: Objective,
    walked: &Walked<'_>,
    constraints: &Constraints,
    capacity: f64,
) -> Summary {
    let counts: &Counts = &acc.counts;
    let (not_visited, not_visited_tuples, n) = walked.not_visited(acc);
    Summary {
        memory_headroom: constraints.memory_headroom,
        memory_limit_gib: constraints.memory_limit(capacity) / GIB,
        estimated: walked.estimated,
        complete: acc.unvisited.is_empty(),
        not_visited,
        not_visited_tuple_count: n,
        not_visited_tuples,
        max_seconds: walked.max_seconds,
        enumerated: counts.enumerated,
        pruned: counts.pruned,
        evaluated: counts.evaluated,
        seconds,
        pruned_invalid: counts.pruned_invalid,
        pruned_memory: counts.pruned_memory,
        pruned_bound: counts.pruned_bound,
        groups: counts.groups,
        layer_programs: counts.layer_programs,
        plans_per_s: counts.enumerated as f64 / seconds.max(1e-9),
        evaluations_per_s: counts.evaluated as f64 / seconds.max(1e-9),
        objective,
        threads: rayon::current_num_threads(),
    }
}
