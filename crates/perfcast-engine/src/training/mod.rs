//! The training step model: one optimizer step of a dense decoder-only transformer under
//! TP/SP/CP/PP/DP/ZeRO with a recompute policy and a pipeline schedule.
//!
//! Method (Narayanan et al. 2021; Korthikanti et al. 2022; seed paper §2): build one layer's
//! op program on one device (shapes sharded by the strategies), time each op on the device's
//! `ComputeUnit` over its memory tiers, time each collective on the network levels its group
//! spans, keep what the overlap rules expose, multiply by the layers of a stage, add the
//! embedding (first stage) and the LM head with the loss (last stage), let the schedule
//! compose the slowest stage over the micro-batches, then add the exposed gradient
//! reduction / parameter gathers and the optimizer step. Memory per stage: model state per
//! ZeRO stage, activations per recompute policy times the micro-batches the schedule keeps in
//! flight, transient buffers, against the device tier's capacity.

mod activations;
mod check;
mod components;
mod compose;
mod evaluate;
mod fast;
mod flops;
mod ledger;
mod lora;
mod memory;
mod modules;
mod moe;
mod ops;
mod ops_linear;
mod ops_moe;
mod placement;
mod plan;
mod prepare;
mod recipe;
mod report;
mod rerun;
mod shape;
mod time;
mod timer;

pub use fast::{LayerCache, PlanGroup};
pub use lora::{LoraPlan, LoraTarget, Task};
pub use modules::RecomputeModules;
pub(crate) use moe::load_factor;
pub use placement::{MeshAxis, Placement};
pub use plan::{EngineParams, TrainingPlan};
pub use recipe::{CastCosts, Fp8Recipe};
pub use report::{
    AxisLedger, Bottleneck, Feasibility, LayerReport, MemoryReport, StageField, StageMemory,
    TimeBreakdown, TrainingReport, MOE_METRICS,
};
pub use timer::{ComputeBreakdown, KernelPaths, OpLine};

pub use components::{TrainingComponents, TrainingOptions};

use crate::network::Network;
use perfcast_core::workload::ModelSpec;
use perfcast_core::{Bytes, System};

/// Registry names of the parallel strategies a `Training` uses by default, in mesh order
/// (Megatron-LM's: TP innermost, then SP, CP, EP (the MoE layers' expert mesh, folded into
/// TP x CP x DP), PP, DP, and ZeRO sharding over DP). Any registry that holds strategies of
/// these names serves; the built-ins do.
pub const DEFAULT_STRATEGIES: [&str; 7] = [
    "tensor", "sequence", "context", "expert", "pipeline", "data", "zero",
];

/// A model on a system, resolved and ready to evaluate training plans.
#[derive(Clone)]
pub struct Training {
    model: ModelSpec,
    system: System,
    network: Network,
    params: EngineParams,
    comps: TrainingComponents,
    capacity: Bytes,
}

/// Per-class exposed communication time.
type ClassComm = [f64; 6];

fn sum(c: &ClassComm) -> f64 {
    c.iter().sum()
}

impl Training {
    pub fn model(&self) -> &ModelSpec {
        &self.model
    }
    pub fn system(&self) -> &System {
        &self.system
    }
    pub fn params(&self) -> &EngineParams {
        &self.params
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_axes;
#[cfg(test)]
mod tests_lora;
#[cfg(test)]
mod tests_modules;
#[cfg(test)]
mod tests_moe;
