//! `data`: data parallelism, the per-step gradient reduction.

use crate::common::op;
use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{
    Axis, AxisSet, CommClass, CommList, LayerDims, Overlap, ParallelStrategy, Phase, PlanShape,
    Window,
};
use perfcast_core::workload::ModelSpec;
use perfcast_core::Key;
use perfcast_core::ModelError;
use serde::Deserialize;

/// Parameters of `data`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataParams {
    /// With `plan.overlap_grad_reduce`: fraction of the last micro-batch's backward pass on a
    /// stage that can hide the bucketed gradient reduction (the last bucket is only ready when
    /// the backward ends; PyTorch DDP, Li et al. 2020 §3.2.3). Default 0.8.
    #[serde(default = "d_dp_overlap")]
    pub overlap_efficiency: f64,
}

fn d_dp_overlap() -> f64 {
    0.8
}

/// Data parallelism: replicas over `dp` (x `cp`) ranks reduce their gradients once per step:
/// a ring all-reduce (volume `2(p-1)/p`), or with a sharded optimizer (ZeRO >= 1) a
/// reduce-scatter (ZeRO-3 reduces per layer in `zero`).
#[derive(Debug, Clone)]
pub struct Data {
    pub params: DataParams,
}

impl ParallelStrategy for Data {
    fn kind(&self) -> &str {
        "data"
    }
    fn axis(&self) -> Axis {
        Axis::Data
    }
    fn validate(&self, _model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError> {
        for (k, v) in [
            (Key::plan("dp"), plan.dp),
            (Key::plan("micro_batch"), plan.micro_batch),
            (Key::plan("global_batch"), plan.global_batch),
        ] {
            if v == 0 {
                return Err(ModelError::invalid(k, v, "must be a positive integer"));
            }
        }
        let per = plan.micro_batch as u64 * plan.dp as u64;
        if !(plan.global_batch as u64).is_multiple_of(per) {
            return Err(ModelError::invalid(
                Key::plan("global_batch"),
                plan.global_batch,
                format!(
                    "must be a multiple of plan.micro_batch x plan.dp = {} x {} = {per}",
                    plan.micro_batch, plan.dp
                ),
            ));
        }
        Ok(())
    }
    fn comms(&self, plan: &PlanShape, d: &LayerDims, out: &mut CommList) -> Result<(), ModelError> {
        if plan.zero_stage >= 3 {
            return Ok(());
        }
        let overlap = if plan.overlap_grad_reduce {
            Overlap::Behind {
                window: Window::LastBackward,
                efficiency: self.params.overlap_efficiency,
            }
        } else {
            Overlap::Exposed
        };
        let kind = if plan.zero_stage == 0 {
            CollectiveKind::AllReduce
        } else {
            CollectiveKind::ReduceScatter
        };
        out.push(op(
            CommClass::Data,
            Phase::Step,
            kind,
            d.device_params * d.grad_bytes,
            AxisSet::DATA_CONTEXT,
            1.0,
            overlap,
            false,
        ))
    }
}
