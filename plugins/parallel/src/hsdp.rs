//! `hsdp`: hybrid-sharded data parallelism, ZeRO-3 inside a shard group and replicas across
//! (PyTorch FSDP `HYBRID_SHARD`, pytorch/pytorch#89915: "zero-3 style sharding within a node,
//! and data parallel across"; Zhao et al. 2023, "PyTorch FSDP", arXiv 2304.11277).
//!
//! The strategy declares its own mesh axis, `shard` (`plan.axes.shard`), laid out inside
//! `data`: consecutive shard ranks are closer than consecutive replicas, so a shard group of 8
//! stays in an 8-GPU node that the replicas (`plan.dp`) leave. It takes the place of both
//! `data` and `zero` in `options.strategies`.

use crate::common::op;
use crate::zero::Zero;
use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{
    Axis, AxisDecl, AxisPlace, AxisSet, CommClass, CommList, Divides, LayerDims, Overlap,
    ParallelStrategy, Phase, PlanShape, StateSplit, Window,
};
use perfcast_core::workload::ModelSpec;
use perfcast_core::{Key, ModelError};

/// The shard group's axis, as this strategy numbers it.
const SHARD: AxisSet = AxisSet::declared(0);

/// Hybrid sharding: the model state is sharded ZeRO-3 over the `shard x cp` ranks of a group
/// (the built-in `zero`'s collectives on that group: each layer's weights all-gathered before
/// its forward and, resharding, its backward; its gradients reduce-scattered after its
/// backward; the embedding and the head gathered per micro-batch), and replicated over
/// `plan.dp` groups: after each reduce-scatter, the gradient shard (`1 / (shard x cp)` of it) is
/// all-reduced over the replicas, as FSDP's post-backward hook does for `HYBRID_SHARD`, hidden
/// behind the layer's compute like the reduce-scatter. Both axes split the batch.
#[derive(Debug, Clone)]
pub struct Hsdp {
    /// ZeRO-3 inside the shard group (`prefetch_efficiency`, `reshard_after_forward`).
    pub zero: Zero,
}

/// The plan as the shard group's ZeRO-3 sees it: its data-parallel ranks are the shard's.
fn sharded(plan: &PlanShape) -> PlanShape {
    PlanShape {
        dp: plan.axes[0],
        batch_split: 1,
        ..*plan
    }
}

impl ParallelStrategy for Hsdp {
    fn kind(&self) -> &str {
        "hsdp"
    }
    fn axis(&self) -> Axis {
        Axis::Data
    }
    fn axes(&self) -> Vec<AxisDecl> {
        vec![AxisDecl {
            name: "shard".into(),
            place: AxisPlace::Inside(Axis::Data),
            divides: Divides {
                batch: true,
                ..Divides::default()
            },
        }]
    }
    fn validate(&self, _model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError> {
        if plan.zero_stage != 3 {
            return Err(ModelError::invalid(
                Key::plan("zero_stage"),
                plan.zero_stage,
                "hsdp shards the model state ZeRO-3 inside its shard group: must be 3",
            ));
        }
        let per = plan.micro_batch as u64 * plan.dp as u64 * plan.axes[0] as u64;
        if per == 0 || !(plan.global_batch as u64).is_multiple_of(per) {
            return Err(ModelError::invalid(
                Key::plan("global_batch"),
                plan.global_batch,
                format!(
                    "must be a multiple of plan.micro_batch x plan.dp x plan.axes.shard = {} x \
                     {} x {} = {per}",
                    plan.micro_batch, plan.dp, plan.axes[0]
                ),
            ));
        }
        Ok(())
    }
    fn split_state(&self, plan: &PlanShape, split: &mut StateSplit) -> Result<(), ModelError> {
        self.zero.split_state(&sharded(plan), split)
    }
    fn comms(&self, plan: &PlanShape, d: &LayerDims, out: &mut CommList) -> Result<(), ModelError> {
        let start = out.len();
        self.zero.comms(&sharded(plan), d, out)?;
        for c in out.ops_mut_from(start) {
            c.group = AxisSet(c.group.0 & !AxisSet::DATA.0).union(SHARD);
        }
        if plan.dp <= 1 {
            return Ok(());
        }
        let shard = (plan.axes[0].max(1) * plan.cp.max(1)) as f64;
        let behind = Overlap::Behind {
            window: Window::LayerCompute,
            efficiency: self.zero.params.prefetch_efficiency,
        };
        let layer = d.layer_params * d.grad_bytes / shard;
        out.push(op(
            CommClass::Data,
            Phase::Backward,
            CollectiveKind::AllReduce,
            layer,
            AxisSet::DATA,
            1.0,
            behind,
            false,
        ))?;
        // The embedding's and the head's gradient shards, after their (exposed) reduce-scatters.
        let ends: &[Phase] = if d.tied_embeddings && plan.pp <= 1 {
            &[Phase::EmbeddingBackward]
        } else {
            &[Phase::EmbeddingBackward, Phase::HeadBackward]
        };
        for &phase in ends {
            let bytes = d.embedding_params * d.grad_bytes / shard;
            out.push(op(
                CommClass::Data,
                phase,
                CollectiveKind::AllReduce,
                bytes,
                AxisSet::DATA,
                1.0,
                Overlap::Exposed,
                false,
            ))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zero::ZeroParams;
    use perfcast_core::fixtures::{gpt3_layer_dims as dims, gpt3_plan};

    fn hsdp() -> Hsdp {
        Hsdp {
            zero: Zero {
                name: "hsdp",
                params: ZeroParams {
                    prefetch_efficiency: 0.8,
                    reshard_after_forward: true,
                },
            },
        }
    }

    /// GPT-3 175B, TP 8, PP 16, 2 replicas of a shard group of 4: the state is divided by 4;
    /// per layer the forward and backward gathers and the gradient reduce-scatter of the
    /// layer's 1.35e8 parameters (per TP rank) run on the shard group, and the gradient shard
    /// (a quarter: 2 bytes x 1.35e8 / 4) is all-reduced over the 2 replicas.
    #[test]
    fn collectives_and_state_by_hand() {
        let mut plan = PlanShape {
            dp: 2,
            zero_stage: 3,
            ..gpt3_plan()
        };
        plan.axes[0] = 4;
        let d = dims();
        let s = hsdp();
        s.validate(&perfcast_core::fixtures::gpt(96, 12288, 96), &plan)
            .unwrap();
        let mut split = StateSplit::default();
        s.split_state(&plan, &mut split).unwrap();
        assert_eq!((split.weights, split.grads, split.optimizer), (4, 4, 4));
        let mut out = CommList::default();
        s.comms(&plan, &d, &mut out).unwrap();
        let on = |g: AxisSet| out.iter().filter(move |c| c.group.contains(g));
        // Forward and backward gathers, the reduce-scatter; the embedding's and the head's
        // gather and reduce-scatter (untied over 16 stages).
        assert_eq!(on(SHARD).count(), 3 + 4);
        let ar: Vec<_> = on(AxisSet::DATA).collect();
        assert_eq!(ar.len(), 3);
        assert_eq!(ar[0].kind, CollectiveKind::AllReduce);
        assert_eq!(ar[0].phase, Phase::Backward);
        assert_eq!(ar[0].bytes.0, d.layer_params * d.grad_bytes / 4.0);
        assert_eq!(ar[1].bytes.0, d.embedding_params * d.grad_bytes / 4.0);
        // One replica: no all-reduce, the shard group's collectives only.
        plan.dp = 1;
        let mut out = CommList::default();
        s.comms(&plan, &d, &mut out).unwrap();
        assert!(out.iter().all(|c| c.group.contains(SHARD)));
    }

    #[test]
    fn refuses_other_zero_stages_and_uneven_batches() {
        let mut plan = PlanShape {
            dp: 2,
            zero_stage: 1,
            ..gpt3_plan()
        };
        plan.axes[0] = 4;
        let m = perfcast_core::fixtures::gpt(96, 12288, 96);
        let e = hsdp().validate(&m, &plan).unwrap_err().to_string();
        assert!(e.contains("plan.zero_stage") && e.contains("ZeRO-3"), "{e}");
        plan.zero_stage = 3;
        plan.global_batch = 12;
        let e = hsdp().validate(&m, &plan).unwrap_err().to_string();
        assert!(e.contains("plan.global_batch") && e.contains("= 8"), "{e}");
    }
}
