//! What a search returns ([`SearchResult`]: the ranked finalists, the Pareto fronts, the
//! [`Summary`]) and the compact plan form the workers keep ([`PlanKey`]).

use crate::space::Objective;
use perfcast_core::parallel::MAX_DECLARED_AXES;
use perfcast_core::DType;
use perfcast_engine::training::{TrainingPlan, TrainingReport};
use serde::Serialize;

/// A plan in compact form (indices into the space's lists); its derived order is the
/// tie-break of equal objectives, so output order never depends on thread count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PlanKey {
    pub devices: u32,
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub cp: u32,
    /// Expert parallelism and expert tensor parallelism (1 and 1 for a dense model).
    pub ep: u32,
    pub etp: u32,
    pub vpp: u32,
    pub micro_batch: u32,
    pub sp: bool,
    pub zero_stage: u8,
    pub precision: u8,
    pub tp_comm_overlap: bool,
    pub overlap_grad_reduce: bool,
    pub overlap_param_gather: bool,
    /// Index into the training's recompute policies.
    pub recompute: u8,
    /// Partial full recompute: layers per stage (0 = policy default).
    pub recompute_layers: u32,
    /// Index into the training's schedules.
    pub schedule: u8,
    /// Index into `Placement::all()` (0: Megatron's TP, CP, PP, DP).
    pub placement: u8,
    /// Degrees of the declared axes, in the run's numbering (1 beyond them).
    pub axes: [u32; MAX_DECLARED_AXES],
}

/// The precisions a [`PlanKey`] encodes (`PlanKey::precision` indexes this).
pub(super) const PRECISIONS: [DType; 4] = [DType::Bf16, DType::Fp16, DType::Fp8, DType::Fp4];

pub(super) fn precision_code(d: DType) -> Option<u8> {
    PRECISIONS.iter().position(|p| *p == d).map(|i| i as u8)
}

/// Counts of a search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Counts {
    /// Plans generated from the space (tp x pp x dp x cp = devices, redundant switches folded).
    pub enumerated: u64,
    /// Discarded before timing: `pruned_invalid + pruned_memory + pruned_bound`.
    pub pruned: u64,
    /// Refused by the engine's checks (divisibility, schedule rules).
    pub pruned_invalid: u64,
    /// Over the memory limit.
    pub pruned_memory: u64,
    /// A lower bound on their time proved they cannot enter the top N nor the Pareto front.
    pub pruned_bound: u64,
    /// Timed on the fast path.
    pub evaluated: u64,
    /// Plan groups (plans sharing everything but recompute and schedule).
    pub groups: u64,
    /// Distinct layer shapes whose op programs were timed.
    pub layer_programs: u64,
}

impl Counts {
    pub(super) fn add(&mut self, o: &Counts) {
        self.enumerated += o.enumerated;
        self.pruned += o.pruned;
        self.pruned_invalid += o.pruned_invalid;
        self.pruned_memory += o.pruned_memory;
        self.pruned_bound += o.pruned_bound;
        self.evaluated += o.evaluated;
        self.groups += o.groups;
        self.layer_programs += o.layer_programs;
    }
}

/// One plan of the result, with its full report.
#[derive(Debug, Clone, Serialize)]
pub struct RankedPlan {
    pub rank: usize,
    pub objective: f64,
    pub plan: TrainingPlan,
    /// Order of the mesh axes on the devices, innermost first (`tp-cp-pp-dp`).
    pub placement: String,
    pub report: TrainingReport,
}

/// One point of a Pareto front.
#[derive(Debug, Clone, Serialize)]
pub struct ParetoPoint {
    pub devices: u32,
    pub time_s: f64,
    pub memory_gib: f64,
    pub plan: TrainingPlan,
    pub placement: String,
}

/// Counts and time of a search.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Plans in the space, counted before the walk (an upper bound on `enumerated`, which
    /// leaves out partial-recompute counts beyond a group's real stage size).
    pub estimated: u64,
    /// Whether the walk finished (false: `max_seconds` stopped it; the plans are the best
    /// found so far).
    pub complete: bool,
    /// Plans the time limit left unvisited (0 when complete).
    pub not_visited: u64,
    /// How many (tp, pp, dp, cp, devices) tuples were not walked to the end.
    pub not_visited_tuple_count: usize,
    /// Those tuples (the first 20), each with its unvisited plans.
    pub not_visited_tuples: Vec<String>,
    /// The time limit of the walk, seconds (`None`: none).
    pub max_seconds: Option<f64>,
    pub enumerated: u64,
    pub pruned: u64,
    pub evaluated: u64,
    pub seconds: f64,
    pub pruned_invalid: u64,
    pub pruned_memory: u64,
    pub pruned_bound: u64,
    pub groups: u64,
    pub layer_programs: u64,
    /// Plans enumerated per second (`enumerated / seconds`).
    pub plans_per_s: f64,
    /// Plans timed on the fast path per second.
    pub evaluations_per_s: f64,
    pub objective: Objective,
    pub threads: usize,
    /// The fraction of device memory kept free (`search.memory_headroom`).
    pub memory_headroom: f64,
    /// The memory a plan may use per device, GiB: capacity x (1 - memory_headroom).
    pub memory_limit_gib: f64,
}

/// What a search returns.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResult {
    /// The top N by the objective (ties by plan key), each fully evaluated.
    pub plans: Vec<RankedPlan>,
    /// Non-dominated plans by (step time, peak memory per device), memory ascending.
    pub pareto: Vec<ParetoPoint>,
    /// With several device counts: the fastest plan per count, kept when no smaller count is
    /// as fast (the front of time vs GPU count).
    pub pareto_devices: Vec<ParetoPoint>,
    /// The fastest plan of every device count searched.
    pub fastest: Vec<ParetoPoint>,
    pub summary: Summary,
}
