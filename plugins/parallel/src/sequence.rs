//! `sequence`: Megatron sequence parallelism (Korthikanti et al. 2022 §4.2.2).

use perfcast_core::parallel::{Axis, LayerSplit, ParallelStrategy, PlanShape};
use perfcast_core::workload::ModelSpec;
use perfcast_core::Key;
use perfcast_core::ModelError;

/// Megatron sequence parallelism (Korthikanti 2022 §4.2.2): the ops outside the
/// tensor-parallel region (norms, dropout, residual adds) and their activations are split
/// along the sequence over the TP group. Its collectives are issued by `tensor`.
#[derive(Debug, Clone, Default)]
pub struct Sequence;

impl ParallelStrategy for Sequence {
    fn kind(&self) -> &str {
        "sequence"
    }
    fn axis(&self) -> Axis {
        Axis::Sequence
    }
    fn validate(&self, model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError> {
        if plan.sp && plan.tp > 1 {
            let local = model.seq_len / plan.cp.max(1) as u64;
            if !(local * plan.micro_batch as u64).is_multiple_of(plan.tp as u64) {
                return Err(ModelError::invalid(
                    Key::plan("sp"),
                    plan.sp,
                    format!(
                        "sequence parallelism needs the tokens per device \
                         (micro_batch x seq_len / cp = {}) divisible by plan.tp = {}",
                        local * plan.micro_batch as u64,
                        plan.tp
                    ),
                ));
            }
        }
        Ok(())
    }
    fn split_layer(&self, plan: &PlanShape, split: &mut LayerSplit) -> Result<(), ModelError> {
        if plan.sp {
            split.pointwise *= plan.tp.max(1);
        }
        Ok(())
    }
}
