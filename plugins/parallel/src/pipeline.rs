//! `pipeline`: pipeline parallelism (Huang et al. 2019; Narayanan et al. 2021).

use crate::common::{op, tokens};
use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{
    stage_layers, Axis, AxisSet, CommClass, CommList, LayerDims, Overlap, ParallelStrategy, Phase,
    PlanShape, Window,
};
use perfcast_core::workload::ModelSpec;
use perfcast_core::Key;
use perfcast_core::ModelError;
use serde::Deserialize;

/// Pipeline parallelism (Huang et al. 2019; Narayanan et al. 2021): layers split into `pp`
/// stages (`vpp` chunks each when interleaved; an uneven split takes the surplus from the first
/// and last stage, see `stage_layers`); each micro-batch hands `b·s·h` activations
/// to the next stage and gradients back. With TP, Megatron's scatter/gather optimisation
/// (Narayanan 2021 §4.1) sends `1/t` of the tensor per rank (with SP it is split anyway).
/// Tied embeddings: the first and last stage all-reduce the shared table's gradient per step.
/// The schedule (a `PipelineSchedule`) composes the stage times.
#[derive(Debug, Clone)]
pub struct Pipeline {
    pub params: PipelineParams,
}

/// Parameters of `pipeline`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineParams {
    /// Overlap hand-offs with compute in interleaved schedules (Megatron-Core's
    /// `overlap_p2p_comm`, on in Megatron-LM's training arguments unless
    /// `--no-overlap-p2p-communication`); Megatron-LM of 2021-22 blocked on them. Default
    /// false (the `megatron-core-*` stacks set it).
    #[serde(default)]
    pub overlap_p2p: bool,
    /// With `overlap_p2p`: fraction of one layer's compute that hides a hand-off. Default 0.8.
    #[serde(default = "d_p2p_overlap")]
    pub p2p_overlap_efficiency: f64,
}

fn d_p2p_overlap() -> f64 {
    0.8
}

impl ParallelStrategy for Pipeline {
    fn kind(&self) -> &str {
        "pipeline"
    }
    fn axis(&self) -> Axis {
        Axis::Pipeline
    }
    fn validate(&self, model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError> {
        if plan.pp == 0 {
            return Err(ModelError::invalid(
                Key::plan("pp"),
                plan.pp,
                "must be a positive integer",
            ));
        }
        if plan.vpp == 0 {
            return Err(ModelError::invalid(
                Key::plan("vpp"),
                plan.vpp,
                "must be a positive integer",
            ));
        }
        if plan.vpp > 1 && plan.pp == 1 {
            return Err(ModelError::invalid(
                Key::plan("vpp"),
                plan.vpp,
                "virtual pipeline stages need plan.pp > 1",
            ));
        }
        if stage_layers(model.layers, plan.pp, plan.vpp).is_none() {
            return Err(ModelError::invalid(
                Key::plan("pp"),
                plan.pp,
                format!(
                    "model.layers = {} cannot be split over plan.pp x plan.vpp = {} x {} chunks \
                     (uneven splits take the surplus from the first and last stage; no stage \
                     may be left empty, and interleaved, each end stage gives up at most one \
                     chunk's worth of layers)",
                    model.layers, plan.pp, plan.vpp
                ),
            ));
        }
        Ok(())
    }
    fn comms(&self, plan: &PlanShape, d: &LayerDims, out: &mut CommList) -> Result<(), ModelError> {
        if plan.pp <= 1 {
            return Ok(());
        }
        let bytes = tokens(plan, d) * d.hidden as f64 * d.act_bytes / plan.tp.max(1) as f64;
        // Megatron-Core's interleaved schedule posts the next chunk's send/receive before
        // computing the current one (`--overlap-p2p-communication`): a hand-off hides behind
        // (at least) one layer's compute.
        let overlap = if self.params.overlap_p2p && plan.vpp > 1 {
            Overlap::Behind {
                window: Window::LayerCompute,
                efficiency: self.params.p2p_overlap_efficiency,
            }
        } else {
            Overlap::Exposed
        };
        out.push(op(
            CommClass::Pipeline,
            Phase::Boundary,
            CollectiveKind::SendRecv,
            bytes,
            AxisSet::PIPELINE,
            1.0,
            overlap,
            false,
        ))?;
        if d.tied_embeddings {
            // Megatron's embedding group: the first and last stage all-reduce the gradient of
            // the shared word embedding once per step (after the pipeline flush).
            out.push(op(
                CommClass::Pipeline,
                Phase::Step,
                CollectiveKind::AllReduce,
                d.embedding_params * d.grad_bytes,
                AxisSet::PIPELINE_ENDS,
                1.0,
                Overlap::Exposed,
                false,
            ))?;
        }
        Ok(())
    }
}
