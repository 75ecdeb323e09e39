//! perfcast-search: the best way to run a model on a system, and how the answer moves as the
//! hardware changes.
//!
//! - [`best_plans`] / [`search()`]: enumerate every plan of a [`SearchSpace`] (TP, PP, DP, CP,
//!   virtual stages, micro-batch, sequence parallelism, recompute policy including N-layer
//!   partial full recompute, ZeRO stage, pipeline schedule, precision, TP-communication
//!   overlap, placement of the groups on the devices; one or several device counts) under
//!   [`Constraints`] (global batch, memory headroom, max TP = the NVLink domain by default),
//!   discard what the engine refuses and what does not fit before timing, prune what a lower
//!   bound proves useless, time the rest on the engine's fast path
//!   ([`perfcast_engine::training::PlanGroup`]) in parallel (rayon), and fully evaluate the
//!   top N.
//! - [`sweep`]: a grid or list over any config keys, each point evaluated or searched.
//! - [`serving`]: deployments for serving (TP, PP, replicas, scheduler limits, aggregated or
//!   disaggregated), each simulated at several loads; the Pareto front of tokens/s per GPU
//!   against tokens/s per user and the best deployment per SLO (`[serving_search]`).
//!
//! Invariants: results do not depend on the thread count (top N sorted by (objective, plan
//! key), Pareto ties broken by plan key; only the split of the counts between pruned by the
//! bound and evaluated does, as workers share the N-th best objective as they go); memory is bounded (a top-N heap and a Pareto set per
//! worker, never a list of all plans); fast-path times and memory equal `Training::evaluate`'s
//! (same engine code; tested); every bad input is a [`SearchError`] naming the key.
//!
//! Placement: every order of the mesh axes the engine can lay out
//! ([`perfcast_engine::training::Placement`]: Megatron-LM's TP, CP, PP, DP, and e.g. DP
//! inside the NVLink domain with TP across nodes) is a search dimension; orders that place a
//! plan's groups the same are tried once. PP stays the third axis.

pub mod config;
pub mod default_plan;
pub mod search;
pub mod serving;
pub mod space;
pub mod sweep;

pub use config::{load_scenario, Scenario};
pub use search::{search, Counts, ParetoPoint, PlanKey, RankedPlan, SearchResult, Summary};
pub use space::{
    Constraints, DeviceRange, Devices, Objective, SearchConfig, SearchSpace,
    DEFAULT_MEMORY_HEADROOM,
};

/// The plan fields that search and sweep outputs (CSV, tables) list, one column each, with
/// whether the column is numeric.
pub const PLAN_COLUMNS: [(&str, bool); 15] = [
    ("tp", true),
    ("pp", true),
    ("dp", true),
    ("cp", true),
    ("ep", true),
    ("etp", true),
    ("vpp", true),
    ("micro_batch", true),
    ("sp", false),
    ("zero_stage", true),
    ("recompute", false),
    ("recompute_layers", true),
    ("schedule", false),
    ("precision", false),
    ("tp_comm_overlap", false),
];

/// The cells of [`PLAN_COLUMNS`] for `p`. Sequence parallelism only exists with TP > 1.
pub fn plan_cells(p: &TrainingPlan) -> [String; 15] {
    [
        p.tp.to_string(),
        p.pp.to_string(),
        p.dp.to_string(),
        p.cp.to_string(),
        p.ep.to_string(),
        p.etp.to_string(),
        p.vpp.to_string(),
        p.micro_batch.to_string(),
        (p.sp && p.tp > 1).to_string(),
        p.zero_stage.to_string(),
        p.recompute.clone(),
        p.recompute_layers
            .map(|n| n.to_string())
            .unwrap_or_default(),
        p.schedule_name().to_string(),
        p.precision.name().to_string(),
        p.tp_comm_overlap.to_string(),
    ]
}

use perfcast_engine::training::{Training, TrainingPlan};

/// Errors of a search or a sweep: each names the key (or file) and what is allowed.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("invalid `{key}`: {message}")]
    Invalid { key: String, message: String },
    #[error("empty plan space: {reason}")]
    Empty { reason: String },
    #[error("{context}: {source}")]
    Model {
        context: String,
        #[source]
        source: perfcast_core::ModelError,
    },
    #[error(transparent)]
    Host(#[from] perfcast_config::HostError),
    #[error(transparent)]
    Scenario(#[from] perfcast_scenario::ScenarioError),
    #[error("{path}: {message}")]
    File { path: String, message: String },
}

/// The `top_n` fastest plans of `space` for `training`'s model and system (its device count),
/// every other plan field from the engine's defaults, under `constraints`.
pub fn best_plans(
    training: &Training,
    space: &SearchSpace,
    constraints: &Constraints,
    top_n: usize,
) -> Result<SearchResult, SearchError> {
    let template = TrainingPlan {
        global_batch: constraints.global_batch,
        ..TrainingPlan::default()
    };
    search(
        std::slice::from_ref(training),
        space,
        constraints,
        &template,
        Objective::Time,
        top_n,
    )
}

#[cfg(test)]
mod tests;
