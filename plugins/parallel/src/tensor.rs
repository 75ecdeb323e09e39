//! `tensor`: Megatron tensor parallelism (Shoeybi et al. 2019), with sequence parallelism's
//! collectives (Korthikanti et al. 2022).

use crate::common::{op, tokens};
use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{
    Axis, AxisSet, CommClass, CommList, LayerDims, LayerSplit, Overlap, ParallelStrategy, Phase,
    PlanShape, Window,
};
use perfcast_core::workload::ModelSpec;
use perfcast_core::Key;
use perfcast_core::ModelError;
use serde::Deserialize;

/// Parameters of `tensor`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorParams {
    /// With `plan.tp_comm_overlap`: the fraction of a decomposed collective's overlappable
    /// chunks that does hide behind the layer's GEMMs. The overlap is a decomposition (Wang et
    /// al. 2022, "Overlap Communication with Dependent Computation via Decomposition in Large
    /// Deep Learning Models", ASPLOS'23; Transformer Engine's userbuffers ring exchange;
    /// PyTorch's micro-pipelined async TP): each GEMM and its collective are split into `tp`
    /// chunks, a chunk's transfer runs behind the previous chunk's GEMM, and the first chunk's
    /// transfer (`1/tp` of the collective) has nothing to hide behind. Of the other chunks,
    /// this fraction hides (the implementations do not decompose every collective of the
    /// layer, and a chunk's GEMM is too short to cover its transfer where it is narrower):
    /// calibrated on the public async-TP vs vanilla-TP ablations (configs/validation/
    /// CALIBRATION.md); 1 (the default) is a complete decomposition.
    #[serde(default = "d_tp_overlap")]
    pub overlap_efficiency: f64,
}

fn d_tp_overlap() -> f64 {
    1.0
}

/// Megatron tensor parallelism (Shoeybi et al. 2019): column-parallel QKV and MLP-up,
/// row-parallel output and MLP-down; two all-reduces of `b·s·h` per layer forward and two
/// backward. With sequence parallelism (Korthikanti 2022 §4.2.2) each all-reduce becomes an
/// all-gather plus a reduce-scatter of the same total volume. The vocabulary-parallel
/// embedding all-reduces (SP: reduce-scatters) its output; the LM head gathers its input
/// (SP) or all-reduces its input gradient (no SP); the vocabulary-parallel cross-entropy
/// all-reduces three `b·s` fp32 vectors (max, sum of exponentials, target logit).
#[derive(Debug, Clone)]
pub struct Tensor {
    pub params: TensorParams,
}

impl ParallelStrategy for Tensor {
    fn kind(&self) -> &str {
        "tensor"
    }
    fn axis(&self) -> Axis {
        Axis::Tensor
    }
    fn validate(&self, model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError> {
        let t = plan.tp as u64;
        if t == 0 {
            return Err(ModelError::invalid(
                Key::plan("tp"),
                plan.tp,
                "must be a positive integer",
            ));
        }
        if !model.heads.is_multiple_of(t) {
            return Err(ModelError::invalid(
                Key::plan("tp"),
                plan.tp,
                format!("must divide model.heads = {}", model.heads),
            ));
        }
        let kv = model.kv_heads();
        if !(kv.is_multiple_of(t) || t.is_multiple_of(kv)) {
            return Err(ModelError::invalid(
                Key::plan("tp"),
                plan.tp,
                format!(
                    "must divide model.kv_heads = {kv} or be a multiple of it (KV heads replicated)"
                ),
            ));
        }
        if !model.ffn_hidden.is_multiple_of(t) {
            return Err(ModelError::invalid(
                Key::plan("tp"),
                plan.tp,
                format!("must divide model.ffn_hidden = {}", model.ffn_hidden),
            ));
        }
        Ok(())
    }
    fn split_layer(&self, plan: &PlanShape, split: &mut LayerSplit) -> Result<(), ModelError> {
        split.weights *= plan.tp.max(1);
        Ok(())
    }
    fn comms(&self, plan: &PlanShape, d: &LayerDims, out: &mut CommList) -> Result<(), ModelError> {
        if plan.tp <= 1 {
            return Ok(());
        }
        let s = tokens(plan, d) * d.hidden as f64 * d.act_bytes;
        let overlap = if plan.tp_comm_overlap {
            Overlap::Behind {
                window: Window::LayerGemms,
                efficiency: 1.0,
            }
        } else {
            Overlap::Exposed
        };
        let g = AxisSet::TENSOR;
        let c = CommClass::Tensor;
        use CollectiveKind::*;
        // The forward gathers GEMM inputs (in fp8 when the recipe scales per tensor); the
        // backward gathers 16-bit output gradients.
        let gathered = tokens(plan, d) * d.hidden as f64 * d.gather_bytes;
        // With overlap, the first of `tp` chunks is exposed, `overlap_efficiency` of the rest
        // behind the GEMMs.
        let first = if plan.tp_comm_overlap {
            let chunked = 1.0 - 1.0 / plan.tp as f64;
            1.0 - chunked * self.params.overlap_efficiency.clamp(0.0, 1.0)
        } else {
            1.0
        };
        let mut layer_op = |phase, kind, bytes: f64| -> Result<(), ModelError> {
            out.push(op(
                c,
                phase,
                kind,
                bytes * first,
                g,
                2.0,
                Overlap::Exposed,
                true,
            ))?;
            if first < 1.0 {
                out.push(op(
                    c,
                    phase,
                    kind,
                    bytes * (1.0 - first),
                    g,
                    2.0,
                    overlap,
                    true,
                ))?;
            }
            Ok(())
        };
        for phase in [Phase::Forward, Phase::Backward] {
            if plan.sp {
                let ag = if phase == Phase::Forward { gathered } else { s };
                layer_op(phase, AllGather, ag)?;
                layer_op(phase, ReduceScatter, s)?;
            } else {
                layer_op(phase, AllReduce, s)?;
            }
        }
        let x = Overlap::Exposed;
        if plan.sp {
            out.push(op(
                c,
                Phase::EmbeddingForward,
                ReduceScatter,
                s,
                g,
                1.0,
                x,
                false,
            ))?;
            out.push(op(
                c,
                Phase::EmbeddingBackward,
                AllGather,
                s,
                g,
                1.0,
                x,
                false,
            ))?;
            out.push(op(c, Phase::HeadForward, AllGather, s, g, 1.0, x, false))?;
            out.push(op(
                c,
                Phase::HeadBackward,
                ReduceScatter,
                s,
                g,
                1.0,
                x,
                false,
            ))?;
        } else {
            out.push(op(
                c,
                Phase::EmbeddingForward,
                AllReduce,
                s,
                g,
                1.0,
                x,
                false,
            ))?;
            out.push(op(c, Phase::HeadBackward, AllReduce, s, g, 1.0, x, false))?;
        }
        let loss = tokens(plan, d) * 4.0;
        out.push(op(c, Phase::HeadForward, AllReduce, loss, g, 3.0, x, false))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::fixtures::{gpt3_layer_dims as dims, gpt3_plan as plan};

    /// Per-layer TP volume: 2 all-reduces of b·s·h each way (Megatron); SP: the same bytes as
    /// 2 all-gathers + 2 reduce-scatters. Ring wire volume: AR 2(t-1)/t = AG + RS.
    #[test]
    fn tensor_volumes() {
        let t = Tensor {
            params: TensorParams {
                overlap_efficiency: 0.6,
            },
        };
        let s = 2048.0 * 12288.0 * 2.0;
        let wire = |p: &PlanShape| {
            let mut l = CommList::default();
            t.comms(p, &dims(), &mut l).unwrap();
            l.iter()
                .filter(|c| c.phase == Phase::Forward)
                .map(|c| c.count * c.bytes.0 * c.kind.ring_traffic_factor(p.tp))
                .sum::<f64>()
        };
        let base = wire(&plan());
        assert!((base - 2.0 * s * 2.0 * 7.0 / 8.0).abs() < 1.0);
        let sp = wire(&PlanShape { sp: true, ..plan() });
        assert!((sp - base).abs() < 1.0);
        assert_eq!(wire(&PlanShape { tp: 1, ..plan() }), 0.0);
    }
}
