//! `expert`: expert parallelism for mixture-of-experts layers, with expert tensor
//! parallelism and Megatron-Core's folding (Liu et al. 2024, "MoE Parallel Folding",
//! arXiv:2504.14960; Megatron-Core MoE docs).
//!
//! The MoE layers use their own mesh over the same `tp x cp x dp` ranks of a pipeline stage
//! as attention: ETP innermost, then EP, then expert data parallelism (EDP, the rest). Each
//! rank holds `experts / ep` routed experts, each split over `etp` ranks; the router, the
//! shared experts and attention stay on the dense mesh.
//!
//! Per MoE layer and micro-batch, forward: the tokens go to their experts' ranks and the
//! expert outputs come back (dispatch and combine); backward: their gradients, the same
//! volumes (Lepikhin et al. 2021, GShard §2.2: "two all-to-all ... in the forward pass and
//! two in the backward"). With `alltoall`, `deepep` and `hybridep` each is an all-to-all of
//! `tokens x top_k` rows of `hidden` elements per rank (the busiest rank's, its load
//! imbalance included); DeepEP/HybridEP rows cross a scale-up domain boundary once per
//! destination domain ([`Dispatch::hierarchical`], placed by the engine). `allgather`
//! gathers every rank's `tokens x hidden` over the group and reduce-scatters the outputs.
//! With `etp > 1` the received tokens are all-gathered over the ETP group before the experts
//! and their outputs reduce-scattered after (Megatron-Core's alltoall dispatcher).
//!
//! The experts' gradients are reduced over the EDP group (their replicas), not over DP x CP;
//! ZeRO shards their optimizer state (stage 1), gradients (2) and weights (3) over it, and
//! stage 3 gathers each MoE layer's experts before use.

use crate::common::op;
use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{
    Axis, AxisSet, CommClass, CommList, Dispatch, Dispatcher, LayerDims, LayerSplit, Overlap,
    ParallelStrategy, Phase, PlanShape, StateSplit, Window,
};
use perfcast_core::workload::ModelSpec;
use perfcast_core::{Key, ModelError};
use serde::Deserialize;

/// Parameters of `expert`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpertParams {
    /// With `plan.ep_comm_overlap`: fraction of an MoE layer's compute (of the other micro-
    /// batch in flight) that hides its dispatch and combine. Default 0.8, the modelling default
    /// of the other overlaps (`data`, `zero`); DeepSeek-V3's DualPipe reports the all-to-all
    /// "fully hidden" (DeepSeek 2024 §3.2.1), i.e. 1.
    #[serde(default = "d_eighty")]
    pub overlap_efficiency: f64,
    /// With `plan.overlap_grad_reduce`: fraction of the last micro-batch's backward that hides
    /// the experts' gradient reduction over the expert data-parallel group (as `data`'s).
    /// Default 0.8.
    #[serde(default = "d_eighty")]
    pub grad_overlap_efficiency: f64,
    /// Fraction of a layer's compute (ZeRO-3) or of the first forward (ZeRO-1/2 with
    /// `plan.overlap_param_gather`) that hides the experts' parameter gathers (as `zero`'s).
    /// Default 0.8.
    #[serde(default = "d_eighty")]
    pub prefetch_efficiency: f64,
}

fn d_eighty() -> f64 {
    0.8
}

/// Expert parallelism (module documentation).
#[derive(Debug, Clone)]
pub struct Expert {
    pub params: ExpertParams,
}

/// Ranks of a stage the expert mesh is carved out of: `tp x cp x dp`, times the declared axes
/// that split the batch (their ranks hold other data, as data-parallel ones do).
fn expert_mesh(plan: &PlanShape) -> u64 {
    let data = plan.dp.max(1) as u64 * plan.batch_split.max(1) as u64;
    plan.tp.max(1) as u64 * plan.cp.max(1) as u64 * data
}

/// Ranks of the expert data-parallel group: `tp x cp x dp / (ep x etp)` (`dp` times the
/// declared axes that split the batch).
pub fn expert_data_degree(plan: &PlanShape) -> u64 {
    (expert_mesh(plan) / (plan.ep.max(1) as u64 * plan.etp.max(1) as u64)).max(1)
}

impl ParallelStrategy for Expert {
    fn kind(&self) -> &str {
        "expert"
    }
    fn axis(&self) -> Axis {
        Axis::Expert
    }
    fn validate(&self, model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError> {
        for (k, v) in [(Key::plan("ep"), plan.ep), (Key::plan("etp"), plan.etp)] {
            if v == 0 {
                return Err(ModelError::invalid(k, v, "must be a positive integer"));
            }
        }
        let Some(moe) = &model.moe else {
            for (k, v) in [(Key::plan("ep"), plan.ep), (Key::plan("etp"), plan.etp)] {
                if v > 1 {
                    return Err(ModelError::invalid(
                        k,
                        v,
                        "must be 1: expert parallelism needs a mixture-of-experts model \
                         ([model.moe])",
                    ));
                }
            }
            return Ok(());
        };
        let (ep, etp) = (plan.ep as u64, plan.etp as u64);
        if !moe.experts.is_multiple_of(ep) {
            return Err(ModelError::invalid(
                Key::plan("ep"),
                plan.ep,
                format!("must divide model.moe.experts = {}", moe.experts),
            ));
        }
        if !moe.expert_ffn_hidden.is_multiple_of(etp) {
            return Err(ModelError::invalid(
                Key::plan("etp"),
                plan.etp,
                format!(
                    "must divide model.moe.expert_ffn_hidden = {}",
                    moe.expert_ffn_hidden
                ),
            ));
        }
        let mesh = expert_mesh(plan);
        if !mesh.is_multiple_of(ep * etp) {
            let declared = if plan.batch_split > 1 {
                " x the declared axes that split the batch"
            } else {
                ""
            };
            return Err(ModelError::invalid(
                Key::plan("ep"),
                plan.ep,
                format!(
                    "plan.ep x plan.etp = {} must divide plan.tp x plan.cp x plan.dp{declared} = \
                     {mesh} (the expert-parallel group is carved out of a stage's TP x CP x DP \
                     ranks)",
                    ep * etp
                ),
            ));
        }
        if plan.tp > 1 && !plan.sp {
            return Err(ModelError::invalid(
                Key::plan("sp"),
                plan.sp,
                "must be true with plan.tp > 1 for a mixture-of-experts model (Megatron-Core: \
                 \"When using MoE and tensor parallelism, sequence parallelism must be used\"; \
                 the MoE layers take the sequence-parallel shard of the tokens)",
            ));
        }
        if plan.ep_comm_overlap && plan.micro_batches() < 2 {
            return Err(ModelError::invalid(
                Key::plan("ep_comm_overlap"),
                true,
                format!(
                    "needs at least 2 micro-batches per step to overlap one's dispatch with \
                     another's compute (there are {})",
                    plan.micro_batches()
                ),
            ));
        }
        Ok(())
    }
    fn split_layer(&self, plan: &PlanShape, split: &mut LayerSplit) -> Result<(), ModelError> {
        split.experts *= plan.ep.max(1);
        split.expert_weights *= plan.etp.max(1);
        Ok(())
    }
    fn split_state(&self, plan: &PlanShape, split: &mut StateSplit) -> Result<(), ModelError> {
        let n = u32::try_from(expert_data_degree(plan)).unwrap_or(u32::MAX);
        if plan.zero_stage >= 1 {
            split.expert_optimizer *= n;
        }
        if plan.zero_stage >= 2 {
            split.expert_grads *= n;
        }
        if plan.zero_stage >= 3 {
            split.expert_weights *= n;
        }
        Ok(())
    }
    fn comms(&self, plan: &PlanShape, d: &LayerDims, out: &mut CommList) -> Result<(), ModelError> {
        let Some(m) = &d.moe else { return Ok(()) };
        use CollectiveKind::*;
        let c = CommClass::Expert;
        let h = d.hidden as f64;
        let overlap = if plan.ep_comm_overlap {
            Overlap::Behind {
                window: Window::LayerCompute,
                efficiency: self.params.overlap_efficiency,
            }
        } else {
            Overlap::Exposed
        };
        let phases = [Phase::ExpertForward, Phase::ExpertBackward];
        if plan.ep > 1 {
            match plan.moe_dispatcher {
                Dispatcher::Allgather => {
                    let s = plan.ep as f64 * m.tokens * h * m.dispatch_bytes;
                    for ph in phases {
                        out.push(op(c, ph, AllGather, s, AxisSet::EXPERT, 1.0, overlap, true))?;
                        out.push(op(
                            c,
                            ph,
                            ReduceScatter,
                            s,
                            AxisSet::EXPERT,
                            1.0,
                            overlap,
                            true,
                        ))?;
                    }
                }
                d @ (Dispatcher::Alltoall | Dispatcher::Deepep | Dispatcher::Hybridep) => {
                    let s = m.routed * h * m.dispatch_bytes;
                    let dispatch = Dispatch {
                        top_k: m.top_k as u32,
                        experts: m.experts as u32,
                        expert_groups: m.expert_groups as u32,
                        group_top_k: m.group_top_k as u32,
                        hierarchical: d.hierarchical(),
                    };
                    for ph in phases {
                        // Dispatch and combine: the same rows each way.
                        let mut a2a = op(c, ph, AllToAll, s, AxisSet::EXPERT, 2.0, overlap, true);
                        a2a.dispatch = Some(dispatch);
                        out.push(a2a)?;
                    }
                }
            }
        }
        if plan.etp > 1 {
            let s = plan.etp as f64 * m.routed * h * m.dispatch_bytes;
            let g = AxisSet::EXPERT_TENSOR;
            for ph in phases {
                out.push(op(c, ph, AllGather, s, g, 1.0, overlap, true))?;
                out.push(op(c, ph, ReduceScatter, s, g, 1.0, overlap, true))?;
            }
        }
        if expert_data_degree(plan) > 1 {
            self.expert_state_comms(plan, d, m, out)?;
        }
        Ok(())
    }
}

impl Expert {
    /// The experts' gradient reduction and ZeRO gathers over the expert data-parallel group.
    fn expert_state_comms(
        &self,
        plan: &PlanShape,
        d: &LayerDims,
        m: &perfcast_core::parallel::MoeDims,
        out: &mut CommList,
    ) -> Result<(), ModelError> {
        use CollectiveKind::*;
        let g = AxisSet::EXPERT_DATA;
        if plan.zero_stage >= 3 {
            let prefetch = Overlap::Behind {
                window: Window::LayerCompute,
                efficiency: self.params.prefetch_efficiency,
            };
            let w = m.expert_layer_params * d.weight_bytes;
            let z = CommClass::Zero;
            out.push(op(
                z,
                Phase::ExpertForward,
                AllGather,
                w,
                g,
                1.0,
                prefetch,
                false,
            ))?;
            out.push(op(
                z,
                Phase::ExpertBackward,
                AllGather,
                w,
                g,
                1.0,
                prefetch,
                false,
            ))?;
            let grads = m.expert_layer_params * d.grad_bytes;
            return out.push(op(
                CommClass::Data,
                Phase::ExpertBackward,
                ReduceScatter,
                grads,
                g,
                1.0,
                prefetch,
                false,
            ));
        }
        let reduce = if plan.overlap_grad_reduce {
            Overlap::Behind {
                window: Window::LastBackward,
                efficiency: self.params.grad_overlap_efficiency,
            }
        } else {
            Overlap::Exposed
        };
        let kind = if plan.zero_stage == 0 {
            AllReduce
        } else {
            ReduceScatter
        };
        out.push(op(
            CommClass::Data,
            Phase::Step,
            kind,
            m.expert_params * d.grad_bytes,
            g,
            1.0,
            reduce,
            false,
        ))?;
        if plan.zero_stage >= 1 {
            let gather = if plan.overlap_param_gather {
                Overlap::Behind {
                    window: Window::FirstForward,
                    efficiency: self.params.prefetch_efficiency,
                }
            } else {
                Overlap::Exposed
            };
            out.push(op(
                CommClass::Zero,
                Phase::Step,
                AllGather,
                m.expert_params * d.weight_bytes,
                g,
                1.0,
                gather,
                false,
            ))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::fixtures::{gpt, gpt3_layer_dims as dims, gpt3_plan as plan};
    use perfcast_core::parallel::MoeDims;
    use perfcast_core::workload::MoeSpec;

    fn expert() -> Expert {
        Expert {
            params: ExpertParams {
                overlap_efficiency: 0.8,
                grad_overlap_efficiency: 0.8,
                prefetch_efficiency: 0.8,
            },
        }
    }

    fn moe_model() -> ModelSpec {
        ModelSpec {
            moe: Some(MoeSpec::new(64, 8, 2048)),
            ..gpt(96, 12288, 96)
        }
    }

    /// A DeepSeek-like MoE layer: 4096 tokens per rank, top-8, h 12288 (the fixture's).
    fn moe_dims() -> LayerDims {
        LayerDims {
            moe: Some(MoeDims {
                experts: 64,
                top_k: 8,
                expert_groups: 0,
                group_top_k: 0,
                tokens: 4096.0,
                routed: 4096.0 * 8.0,
                dispatch_bytes: 2.0,
                expert_layer_params: 1e8,
                expert_params: 1e9,
            }),
            ..dims()
        }
    }

    fn ep_plan(ep: u32, etp: u32) -> PlanShape {
        PlanShape {
            tp: 1,
            sp: false,
            ep,
            etp,
            dp: 64,
            ..plan()
        }
    }

    /// All-to-all volume per token: dispatch and combine each send `top_k x hidden` elements
    /// per token forward, and again backward (GShard §2.2); the buffer is the busiest rank's.
    #[test]
    fn dispatch_volume_per_token() {
        let mut l = CommList::default();
        expert().comms(&ep_plan(8, 1), &moe_dims(), &mut l).unwrap();
        let a2a: Vec<_> = l
            .iter()
            .filter(|c| c.kind == CollectiveKind::AllToAll)
            .collect();
        assert_eq!(a2a.len(), 2);
        for c in &a2a {
            assert_eq!(c.count, 2.0);
            assert_eq!(c.group, AxisSet::EXPERT);
            // Per token: top_k x hidden x 2 bytes.
            assert_eq!(c.bytes.0 / 4096.0, 8.0 * 12288.0 * 2.0);
            assert!(c.with_recompute && c.dispatch.is_some_and(|d| !d.hierarchical));
        }
        let phases: Vec<_> = a2a.iter().map(|c| c.phase).collect();
        assert_eq!(phases, [Phase::ExpertForward, Phase::ExpertBackward]);
        // Expert data parallelism 64 / 8 = 8: the experts' gradients reduced over it.
        assert!(l
            .iter()
            .any(|c| c.group == AxisSet::EXPERT_DATA && c.phase == Phase::Step));
        // DeepEP: hierarchical; all-gather: tokens (not copies) gathered over the group.
        let mut l = CommList::default();
        let p = PlanShape {
            moe_dispatcher: Dispatcher::Deepep,
            ..ep_plan(8, 1)
        };
        expert().comms(&p, &moe_dims(), &mut l).unwrap();
        assert!(l.iter().any(|c| c.dispatch.is_some_and(|d| d.hierarchical)));
        let mut l = CommList::default();
        let p = PlanShape {
            moe_dispatcher: Dispatcher::Allgather,
            ..ep_plan(8, 1)
        };
        expert().comms(&p, &moe_dims(), &mut l).unwrap();
        let ag = l
            .iter()
            .find(|c| c.kind == CollectiveKind::AllGather)
            .unwrap();
        assert_eq!(ag.bytes.0, 8.0 * 4096.0 * 12288.0 * 2.0);
        // No EP, no ETP, no EDP: nothing. Dense model: nothing.
        let mut l = CommList::default();
        let p = PlanShape {
            dp: 1,
            ..ep_plan(1, 1)
        };
        expert().comms(&p, &moe_dims(), &mut l).unwrap();
        expert().comms(&ep_plan(8, 1), &dims(), &mut l).unwrap();
        assert!(l.is_empty());
    }

    #[test]
    fn state_and_layer_splits() {
        let e = expert();
        let mut s = LayerSplit::default();
        e.split_layer(&ep_plan(8, 2), &mut s).unwrap();
        assert_eq!((s.experts, s.expert_weights), (8, 2));
        for (zero, want) in [(0u8, (1, 1, 1)), (1, (1, 1, 4)), (3, (4, 4, 4))] {
            let mut st = StateSplit::default();
            let p = PlanShape {
                zero_stage: zero,
                ..ep_plan(8, 2)
            };
            e.split_state(&p, &mut st).unwrap();
            assert_eq!(
                (st.expert_weights, st.expert_grads, st.expert_optimizer),
                want
            );
            assert_eq!((st.weights, st.grads, st.optimizer), (1, 1, 1));
        }
    }

    /// Bad plans: (plan, model, key named).
    #[test]
    fn validation_names_the_key() {
        let e = expert();
        let m = moe_model();
        e.validate(&m, &ep_plan(8, 1)).unwrap();
        let table: [(PlanShape, ModelSpec, &str); 7] = [
            (ep_plan(3, 1), m.clone(), "plan.ep"),
            (ep_plan(128, 1), m.clone(), "model.moe.experts"),
            (
                PlanShape {
                    dp: 4,
                    ..ep_plan(8, 1)
                },
                m.clone(),
                "plan.tp x plan.cp x plan.dp",
            ),
            (ep_plan(8, 3), m.clone(), "plan.etp"),
            (ep_plan(8, 1), gpt(96, 12288, 96), "mixture-of-experts"),
            (
                PlanShape {
                    tp: 8,
                    sp: false,
                    ..ep_plan(8, 1)
                },
                m.clone(),
                "plan.sp",
            ),
            (
                PlanShape {
                    ep_comm_overlap: true,
                    global_batch: 64,
                    ..ep_plan(8, 1)
                },
                m,
                "plan.ep_comm_overlap",
            ),
        ];
        for (i, (p, model, key)) in table.into_iter().enumerate() {
            let err = e.validate(&model, &p).unwrap_err().to_string();
            assert!(err.contains(key), "case {i}: {err}");
        }
    }
}
