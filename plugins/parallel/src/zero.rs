//! `zero` and `fsdp`: ZeRO stages 1-3 (Rajbhandari et al. 2020), PyTorch FSDP.

use crate::common::op;
use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{
    Axis, AxisSet, CommClass, CommList, LayerDims, Overlap, ParallelStrategy, Phase, PlanShape,
    StateSplit, Window,
};
use perfcast_core::workload::ModelSpec;
use perfcast_core::Key;
use perfcast_core::ModelError;
use serde::Deserialize;

/// Parameters of `zero` and `fsdp`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZeroParams {
    /// Fraction of a layer's compute (stage 3) or of the first micro-batch's forward
    /// (stages 1-2, `plan.overlap_param_gather`) that hides parameter all-gathers prefetched
    /// ahead of use. Default 0.8.
    #[serde(default = "d_zero_overlap")]
    pub prefetch_efficiency: f64,
    /// Stage 3 only: free gathered weights after the forward and gather them again for the
    /// backward (PyTorch FSDP `reshard_after_forward`, DeepSpeed ZeRO-3). Default true.
    #[serde(default = "d_true")]
    pub reshard_after_forward: bool,
}

fn d_zero_overlap() -> f64 {
    0.8
}
fn d_true() -> bool {
    true
}

/// ZeRO (Rajbhandari et al. 2020) over the `dp x cp` ranks: stage 1 shards the optimizer
/// state, 2 also the gradients, 3 also the weights (PyTorch FSDP FULL_SHARD). Stages 1-2
/// all-gather the updated weights once per step; stage 3 all-gathers each layer's weights
/// before its forward and (resharding) again before its backward, and reduce-scatters its
/// gradients after each micro-batch's backward; the embedding and the LM head are gathered
/// once per micro-batch on their stages.
#[derive(Debug, Clone)]
pub struct Zero {
    pub name: &'static str,
    pub params: ZeroParams,
}

impl ParallelStrategy for Zero {
    fn kind(&self) -> &str {
        self.name
    }
    fn axis(&self) -> Axis {
        Axis::Data
    }
    fn validate(&self, _model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError> {
        if plan.zero_stage > 3 {
            return Err(ModelError::invalid(
                Key::plan("zero_stage"),
                plan.zero_stage,
                "must be 0, 1, 2 or 3",
            ));
        }
        Ok(())
    }
    fn split_state(&self, plan: &PlanShape, split: &mut StateSplit) -> Result<(), ModelError> {
        let n = plan.dp.max(1) * plan.cp.max(1);
        if plan.zero_stage >= 1 {
            split.optimizer *= n;
        }
        if plan.zero_stage >= 2 {
            split.grads *= n;
        }
        if plan.zero_stage >= 3 {
            split.weights *= n;
        }
        Ok(())
    }
    fn comms(&self, plan: &PlanShape, d: &LayerDims, out: &mut CommList) -> Result<(), ModelError> {
        if plan.zero_stage == 0 || plan.dp as u64 * plan.cp as u64 <= 1 {
            return Ok(());
        }
        let g = AxisSet::DATA_CONTEXT;
        let c = CommClass::Zero;
        use CollectiveKind::*;
        if plan.zero_stage < 3 {
            let overlap = if plan.overlap_param_gather {
                Overlap::Behind {
                    window: Window::FirstForward,
                    efficiency: self.params.prefetch_efficiency,
                }
            } else {
                Overlap::Exposed
            };
            let bytes = d.device_params * d.weight_bytes;
            return out.push(op(c, Phase::Step, AllGather, bytes, g, 1.0, overlap, false));
        }
        let prefetch = Overlap::Behind {
            window: Window::LayerCompute,
            efficiency: self.params.prefetch_efficiency,
        };
        let w = d.layer_params * d.weight_bytes;
        out.push(op(c, Phase::Forward, AllGather, w, g, 1.0, prefetch, false))?;
        if self.params.reshard_after_forward {
            out.push(op(
                c,
                Phase::Backward,
                AllGather,
                w,
                g,
                1.0,
                prefetch,
                false,
            ))?;
        }
        let grads = d.layer_params * d.grad_bytes;
        out.push(op(
            CommClass::Data,
            Phase::Backward,
            ReduceScatter,
            grads,
            g,
            1.0,
            prefetch,
            false,
        ))?;
        // The embedding table (first stage) and the LM head (last stage; the same table when
        // tied on one stage): FSDP's root unit, gathered at the start of each micro-batch's
        // forward and kept until its backward has reduce-scattered the gradients. Exposed:
        // nothing of the micro-batch runs before the first or after the last of them.
        let x = Overlap::Exposed;
        let e = d.embedding_params;
        let ends: &[(Phase, Phase)] = if d.tied_embeddings && plan.pp <= 1 {
            &[(Phase::EmbeddingForward, Phase::EmbeddingBackward)]
        } else {
            &[
                (Phase::EmbeddingForward, Phase::EmbeddingBackward),
                (Phase::HeadForward, Phase::HeadBackward),
            ]
        };
        for &(fwd, bwd) in ends {
            out.push(op(c, fwd, AllGather, e * d.weight_bytes, g, 1.0, x, false))?;
            out.push(op(
                CommClass::Data,
                bwd,
                ReduceScatter,
                e * d.grad_bytes,
                g,
                1.0,
                x,
                false,
            ))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Data, DataParams};
    use perfcast_core::fixtures::{gpt3_layer_dims as dims, gpt3_plan as plan};
    #[test]
    fn state_split_by_zero_stage() {
        let z = Zero {
            name: "zero",
            params: ZeroParams {
                prefetch_efficiency: 0.8,
                reshard_after_forward: true,
            },
        };
        let table = [
            (0u8, (1, 1, 1)),
            (1, (1, 1, 8)),
            (2, (1, 8, 8)),
            (3, (8, 8, 8)),
        ];
        for (stage, (w, g, o)) in table {
            let mut s = StateSplit::default();
            z.split_state(
                &PlanShape {
                    zero_stage: stage,
                    ..plan()
                },
                &mut s,
            )
            .unwrap();
            assert_eq!(
                (s.weights, s.grads, s.optimizer),
                (w, g, o),
                "stage {stage}"
            );
        }
        // ZeRO-3: gather fwd + bwd, reduce-scatter grads per layer; gather and reduce-scatter
        // the embedding (first stage) and the head (last stage, pp 16); data adds nothing.
        let mut l = CommList::default();
        let p3 = PlanShape {
            zero_stage: 3,
            ..plan()
        };
        z.comms(&p3, &dims(), &mut l).unwrap();
        Data {
            params: DataParams {
                overlap_efficiency: 0.8,
            },
        }
        .comms(&p3, &dims(), &mut l)
        .unwrap();
        assert_eq!(l.len(), 7);
        assert!(l.iter().all(|c| c.phase != Phase::Step));
        let ends = [
            Phase::EmbeddingForward,
            Phase::EmbeddingBackward,
            Phase::HeadForward,
            Phase::HeadBackward,
        ];
        for ph in ends {
            let c: Vec<_> = l.iter().filter(|c| c.phase == ph).collect();
            assert_eq!(c.len(), 1, "{ph:?}");
            assert_eq!(c[0].bytes.0, dims().embedding_params * 2.0, "{ph:?}");
        }
        // One stage with tied embeddings: one table.
        let mut l1 = CommList::default();
        let p1 = PlanShape { pp: 1, ..p3 };
        z.comms(&p1, &dims(), &mut l1).unwrap();
        assert_eq!(l1.len(), 5);
    }
}
