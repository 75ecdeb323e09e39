//! `example/hsdp`: hybrid-sharded data parallelism, ZeRO-3 inside a shard group and replicas
//! across (PyTorch FSDP `HYBRID_SHARD`, pytorch/pytorch#89915: "zero-3 style sharding within
//! a node, and data parallel across"; Zhao et al. 2023, "PyTorch FSDP: Experiences on Scaling
//! Fully Sharded Data Parallel", arXiv 2304.11277, §3.2.2 and §4.2).
//!
//! The strategy declares its own mesh axis, `shard` (`plan.axes.shard`), laid out inside
//! `data`: consecutive shard ranks are closer than consecutive replicas, so a shard group of 8
//! stays in an 8-GPU node that the replicas (`plan.dp`) leave. Named in `options.strategies`
//! in place of both `data` and `zero`, it shards the model state over the `shard x cp` ranks of
//! a group as ZeRO-3 does: per layer and micro-batch its weights are all-gathered before the
//! forward and (resharding) again before the backward, its gradients reduce-scattered after
//! the backward, all on the shard group and prefetched behind the layer's compute; the
//! embedding and the head are gathered and reduce-scattered per micro-batch, exposed. After
//! each reduce-scatter the gradient shard (`1 / (shard x cp)` of the gradients) is all-reduced
//! over the replicas, as FSDP's post-backward hook does for `HYBRID_SHARD`, behind the same
//! compute. Both axes split the batch.

use perfcast_core::op::CollectiveKind::{self, AllGather, AllReduce, ReduceScatter};
use perfcast_core::parallel::{
    Axis, AxisDecl, AxisPlace, AxisSet, CommClass, CommList, CommOp, Divides, LayerDims, Overlap,
    ParallelStrategy, Phase, PlanShape, StateSplit, Window,
};
use perfcast_core::registry::Component;
use perfcast_core::workload::ModelSpec;
use perfcast_core::{Bytes, Key, ModelError, ParamSpec, ParamType, PluginError};
use serde::Deserialize;
use std::sync::Arc;

/// Parameters of `example/hsdp` (ZeRO-3's, with the built-in `zero`'s defaults).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HsdpParams {
    /// Fraction of a layer's compute that hides its prefetched gathers, its reduce-scatter
    /// and the replicas' all-reduce. Default 0.8.
    #[serde(default = "d_prefetch")]
    pub prefetch_efficiency: f64,
    /// Free the gathered weights after the forward and gather them again for the backward
    /// (FSDP `reshard_after_forward`). Default true.
    #[serde(default = "d_true")]
    pub reshard_after_forward: bool,
}

fn d_prefetch() -> f64 {
    0.8
}
fn d_true() -> bool {
    true
}

/// The declared parameters (shown by `perfcast plugins --describe example/hsdp`).
pub static PARAMS: &[ParamSpec] = &[
    ParamSpec::with_default(
        "prefetch_efficiency",
        ParamType::Float,
        "",
        "0.8",
        "(0, 1]",
        "fraction of a layer's compute that hides its prefetched gathers, its gradient reduce-scatter and the replicas' all-reduce",
        "modelling default (the built-in zero's)",
    ),
    ParamSpec::with_default(
        "reshard_after_forward",
        ParamType::Bool,
        "",
        "true",
        "true or false",
        "free gathered weights after the forward and gather them again for the backward",
        "PyTorch FSDP reshard_after_forward",
    ),
];

/// `options.strategies` with this strategy in use: the built-in list with `example/hsdp` in
/// place of `data` and `zero`.
pub const STRATEGIES: [&str; 6] = [
    "tensor",
    "sequence",
    "context",
    "expert",
    "pipeline",
    "example/hsdp",
];

/// Hybrid sharding on the declared axis `shard`.
#[derive(Debug, Clone)]
pub struct Hsdp(pub HsdpParams);

/// Build from its parameters (what `export_plugin!` calls; the tests compile it in with it).
pub fn build(p: HsdpParams) -> Result<Hsdp, PluginError> {
    let e = p.prefetch_efficiency;
    if !(e > 0.0 && e <= 1.0) {
        return Err(PluginError::Params {
            path: "prefetch_efficiency".into(),
            message: format!("{e} is outside (0, 1]"),
        });
    }
    Ok(Hsdp(p))
}

/// The shard group's axis: this strategy's first declared axis.
const SHARD: AxisSet = AxisSet::declared(0);

/// A collective of this strategy.
fn op(class: CommClass, phase: Phase, kind: CollectiveKind, bytes: f64, group: AxisSet) -> CommOp {
    CommOp {
        class,
        phase,
        kind,
        bytes: Bytes(bytes),
        group,
        count: 1.0,
        overlap: Overlap::Exposed,
        with_recompute: false,
        dispatch: None,
    }
}

impl ParallelStrategy for Hsdp {
    fn kind(&self) -> &str {
        "example/hsdp"
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
                "example/hsdp shards the model state ZeRO-3 inside its shard group: must be 3",
            ));
        }
        Ok(())
    }
    fn split_state(&self, plan: &PlanShape, split: &mut StateSplit) -> Result<(), ModelError> {
        let n = plan.axes[0].max(1) * plan.cp.max(1);
        split.optimizer *= n;
        split.grads *= n;
        split.weights *= n;
        Ok(())
    }
    fn comms(&self, plan: &PlanShape, d: &LayerDims, out: &mut CommList) -> Result<(), ModelError> {
        let shard = plan.axes[0].max(1) as f64 * plan.cp.max(1) as f64;
        let replicas = plan.dp > 1;
        if shard <= 1.0 && !replicas {
            return Ok(());
        }
        let group = SHARD.union(AxisSet::CONTEXT);
        let behind = Overlap::Behind {
            window: Window::LayerCompute,
            efficiency: self.0.prefetch_efficiency,
        };
        let layer = |kind, phase, class, bytes| CommOp {
            overlap: behind,
            ..op(class, phase, kind, bytes, group)
        };
        let (w, g) = (
            d.layer_params * d.weight_bytes,
            d.layer_params * d.grad_bytes,
        );
        if shard > 1.0 {
            out.push(layer(AllGather, Phase::Forward, CommClass::Zero, w))?;
            if self.0.reshard_after_forward {
                out.push(layer(AllGather, Phase::Backward, CommClass::Zero, w))?;
            }
            out.push(layer(ReduceScatter, Phase::Backward, CommClass::Data, g))?;
        }
        // The embedding table (first stage) and the LM head (last stage; one table when tied
        // on one stage), gathered for each micro-batch and reduce-scattered after it.
        let ends: &[(Phase, Phase)] = if d.tied_embeddings && plan.pp <= 1 {
            &[(Phase::EmbeddingForward, Phase::EmbeddingBackward)]
        } else {
            &[
                (Phase::EmbeddingForward, Phase::EmbeddingBackward),
                (Phase::HeadForward, Phase::HeadBackward),
            ]
        };
        let e = d.embedding_params;
        if shard > 1.0 {
            for &(fwd, bwd) in ends {
                out.push(op(
                    CommClass::Zero,
                    fwd,
                    AllGather,
                    e * d.weight_bytes,
                    group,
                ))?;
                let rs = e * d.grad_bytes;
                out.push(op(CommClass::Data, bwd, ReduceScatter, rs, group))?;
            }
        }
        if replicas {
            // The gradient shards, all-reduced over the replicas.
            let ar = CommOp {
                overlap: behind,
                ..op(
                    CommClass::Data,
                    Phase::Backward,
                    AllReduce,
                    g / shard,
                    AxisSet::DATA,
                )
            };
            out.push(ar)?;
            for &(_, bwd) in ends {
                let bytes = e * d.grad_bytes / shard;
                out.push(op(CommClass::Data, bwd, AllReduce, bytes, AxisSet::DATA))?;
            }
        }
        Ok(())
    }
}

perfcast_abi::export_plugin! {
    name: "hsdp",
    version: env!("CARGO_PKG_VERSION"),
    parallel_strategies: [
        "example/hsdp" => build
            : "hybrid-sharded data parallelism (FSDP HYBRID_SHARD): ZeRO-3 inside plan.axes.shard, replicas over plan.dp; replaces data and zero"
            [PARAMS],
    ],
}

// Compiled in instead of loaded: `hsdp::register(&mut registry)` adds the same strategy under
// the same name (what the tests check the loaded library against).
perfcast_core::builtin!(
    ParallelStrategy,
    "example/hsdp",
    "the example/hsdp plugin, compiled in",
    |p| {
        let params = perfcast_core::params::parse(p)?;
        Ok(Component::ParallelStrategy(Arc::new(build(params)?)))
    },
    params = PARAMS
);
perfcast_core::register_fn!();

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::fixtures::{gpt, gpt3_layer_dims as dims, gpt3_plan};

    fn hsdp() -> Hsdp {
        build(HsdpParams {
            prefetch_efficiency: 0.8,
            reshard_after_forward: true,
        })
        .unwrap()
    }

    /// The GPT-3 fixture's plan (TP 8, PP 16) with 2 replicas of a shard group of 4, and its
    /// layer of 1.25e8 parameters per TP rank in 2-byte weights and gradients: the state is
    /// divided by 4; per layer the forward and backward gathers (2.5e8 bytes) and the gradient
    /// reduce-scatter run on the shard group, and the gradient shard (a quarter, 6.25e7
    /// bytes) is all-reduced over the 2 replicas (Zhao et al. 2023 §3.2.2: a reduce-scatter
    /// inside the group, then an all-reduce of the shard across).
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
        s.validate(&gpt(96, 12288, 96), &plan).unwrap();
        let mut split = StateSplit::default();
        s.split_state(&plan, &mut split).unwrap();
        assert_eq!((split.weights, split.grads, split.optimizer), (4, 4, 4));
        let mut out = CommList::default();
        s.comms(&plan, &d, &mut out).unwrap();
        let on = |g: AxisSet| out.iter().filter(move |c| c.group.contains(g));
        // Forward and backward gathers, the reduce-scatter; the embedding's and the head's
        // gather and reduce-scatter (untied over 16 stages).
        assert_eq!(on(SHARD).count(), 3 + 4);
        assert_eq!(on(SHARD).next().unwrap().bytes.0, 2.5e8);
        let ar: Vec<_> = on(AxisSet::DATA).collect();
        assert_eq!(ar.len(), 3);
        assert_eq!((ar[0].kind, ar[0].phase), (AllReduce, Phase::Backward));
        assert_eq!(ar[0].bytes.0, d.layer_params * d.grad_bytes / 4.0);
        assert_eq!(ar[0].bytes.0, 6.25e7);
        assert_eq!(ar[1].bytes.0, d.embedding_params * d.grad_bytes / 4.0);
        // One replica: no all-reduce, the shard group's collectives only.
        plan.dp = 1;
        let mut out = CommList::default();
        s.comms(&plan, &d, &mut out).unwrap();
        assert!(out.iter().all(|c| c.group.contains(SHARD)));
    }

    #[test]
    fn refuses_other_zero_stages_and_bad_parameters() {
        let plan = PlanShape {
            zero_stage: 1,
            ..gpt3_plan()
        };
        let e = hsdp()
            .validate(&gpt(96, 12288, 96), &plan)
            .unwrap_err()
            .to_string();
        assert!(e.contains("plan.zero_stage") && e.contains("ZeRO-3"), "{e}");
        for bad in [0.0, 1.5, f64::NAN] {
            let p = HsdpParams {
                prefetch_efficiency: bad,
                reshard_after_forward: true,
            };
            let e = build(p).unwrap_err().to_string();
            assert!(e.contains("prefetch_efficiency"), "{bad}: {e}");
        }
    }
}
