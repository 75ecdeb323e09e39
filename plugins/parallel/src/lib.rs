//! Built-in parallel strategies, one per mesh axis: `tensor`, `sequence`, `context`,
//! `expert`, `pipeline`, `data`, `zero` (and `fsdp`, ZeRO with PyTorch FSDP's resharding
//! switch). Hybrid-sharded data parallelism, on a mesh axis of its own, is the example plugin
//! `plugins/examples/hsdp` (loaded with `--load`).
//!
//! Mesh order (Megatron-LM): TP innermost, then CP, PP, DP outermost; the MoE layers' expert
//! mesh (ETP, EP, EDP) is folded into a stage's TP x CP x DP ranks (`expert`). Each strategy divides
//! one layer's work ([`LayerSplit`]), adds its collectives ([`CommOp`], tagged with the axes of
//! their group; the engine places the group on the network levels) and shards the model state
//! ([`StateSplit`]). Volumes follow the papers cited on each strategy. Overlap efficiencies are
//! named plugin parameters with documented defaults, shared by every scenario.
//!
//! One module per strategy (`tensor`, `sequence`, `context`, `pipeline`, `data`, `zero` for
//! both `zero` and `fsdp`), `common` for what they share; the registration is here.
//!
//! [`LayerSplit`]: perfcast_core::parallel::LayerSplit
//! [`CommOp`]: perfcast_core::parallel::CommOp
//! [`StateSplit`]: perfcast_core::parallel::StateSplit

mod common;
mod context;
mod data;
mod expert;
mod pipeline;
mod sequence;
mod tensor;
mod zero;

pub use context::{Context, ContextParams};
pub use data::{Data, DataParams};
pub use expert::{expert_data_degree, Expert, ExpertParams};
pub use pipeline::{Pipeline, PipelineParams};
pub use sequence::Sequence;
pub use tensor::{Tensor, TensorParams};
pub use zero::{Zero, ZeroParams};

use perfcast_core::params::{self, fraction};
use perfcast_core::registry::Component;
use perfcast_core::{ParamSpec, ParamType, PluginError};
use serde::Deserialize;
use std::sync::Arc;

// ---------------------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

fn tensor(p: &serde_json::Value) -> Result<Component, PluginError> {
    let params: TensorParams = params::parse(p)?;
    fraction("overlap_efficiency", params.overlap_efficiency)?;
    Ok(Component::ParallelStrategy(Arc::new(Tensor { params })))
}
fn context(p: &serde_json::Value) -> Result<Component, PluginError> {
    let params: ContextParams = params::parse(p)?;
    fraction("overlap_efficiency", params.overlap_efficiency)?;
    Ok(Component::ParallelStrategy(Arc::new(Context { params })))
}
fn pipeline(p: &serde_json::Value) -> Result<Component, PluginError> {
    let params: PipelineParams = params::parse(p)?;
    fraction("p2p_overlap_efficiency", params.p2p_overlap_efficiency)?;
    Ok(Component::ParallelStrategy(Arc::new(Pipeline { params })))
}
fn data(p: &serde_json::Value) -> Result<Component, PluginError> {
    let params: DataParams = params::parse(p)?;
    fraction("overlap_efficiency", params.overlap_efficiency)?;
    Ok(Component::ParallelStrategy(Arc::new(Data { params })))
}
fn expert(p: &serde_json::Value) -> Result<Component, PluginError> {
    let params: ExpertParams = params::parse(p)?;
    fraction("overlap_efficiency", params.overlap_efficiency)?;
    fraction("grad_overlap_efficiency", params.grad_overlap_efficiency)?;
    fraction("prefetch_efficiency", params.prefetch_efficiency)?;
    Ok(Component::ParallelStrategy(Arc::new(Expert { params })))
}
fn zero(name: &'static str, p: &serde_json::Value) -> Result<Zero, PluginError> {
    let params: ZeroParams = params::parse(p)?;
    fraction("prefetch_efficiency", params.prefetch_efficiency)?;
    Ok(Zero { name, params })
}
fn zero_named(name: &'static str, p: &serde_json::Value) -> Result<Component, PluginError> {
    Ok(Component::ParallelStrategy(Arc::new(zero(name, p)?)))
}

/// The parameter every overlap-taking strategy has, with its meaning and source.
const fn overlap(
    name: &'static str,
    default: &'static str,
    doc: &'static str,
    source: &'static str,
) -> ParamSpec {
    ParamSpec::with_default(name, ParamType::Float, "", default, "(0, 1]", doc, source)
}

/// The parameters of `tensor` (defaults as [`TensorParams`]' documentation says).
pub static TENSOR_PARAMS: &[ParamSpec] = &[overlap(
    "overlap_efficiency",
    "1.0",
    "with plan.tp_comm_overlap: fraction of the TP collectives' chunks after the first (1/tp stays exposed) that hides behind the layer's GEMMs",
    "decomposition (Wang et al. 2022, ASPLOS'23; Transformer Engine userbuffers); 1 = complete; stacks set what their implementation reaches (configs/validation/CALIBRATION.md)",
)];
/// The parameters of `context`.
pub static CONTEXT_PARAMS: &[ParamSpec] = &[overlap(
    "overlap_efficiency",
    "0.8",
    "fraction of the attention core's time that hides the ring K/V exchange",
    "RAPID-LLM's CP overlap fraction (Korthikanti validation config)",
)];
/// The parameters of `pipeline`.
pub static PIPELINE_PARAMS: &[ParamSpec] = &[
    ParamSpec::with_default(
        "overlap_p2p",
        ParamType::Bool,
        "",
        "false",
        "true or false",
        "overlap hand-offs with compute in interleaved schedules",
        "Megatron-Core --overlap-p2p-communication; Megatron-LM of 2021-22 blocked on them",
    ),
    overlap(
        "p2p_overlap_efficiency",
        "0.8",
        "with overlap_p2p: fraction of one layer's compute that hides a hand-off",
        "modelling default",
    ),
];
/// The parameters of `expert` (defaults as [`expert::ExpertParams`]' documentation says).
pub static EXPERT_PARAMS: &[ParamSpec] = &[
    overlap(
        "overlap_efficiency",
        "0.8",
        "with plan.ep_comm_overlap: fraction of an MoE layer's compute (of the other micro-batch in flight) that hides its dispatch and combine",
        "modelling default as data/zero; DeepSeek-V3 report 3.2.1: DualPipe hides the all-to-all fully (1)",
    ),
    overlap(
        "grad_overlap_efficiency",
        "0.8",
        "with plan.overlap_grad_reduce: fraction of the last micro-batch's backward that hides the experts' gradient reduction",
        "modelling default (as data's overlap_efficiency)",
    ),
    overlap(
        "prefetch_efficiency",
        "0.8",
        "fraction of a layer's compute (ZeRO-3) or of the first forward (ZeRO-1/2) that hides the experts' parameter gathers",
        "modelling default (as zero's prefetch_efficiency)",
    ),
];
/// The parameters of `data`.
pub static DATA_PARAMS: &[ParamSpec] = &[overlap(
    "overlap_efficiency",
    "0.8",
    "with plan.overlap_grad_reduce: fraction of the last micro-batch's backward that can hide the bucketed gradient reduction",
    "PyTorch DDP, Li et al. 2020 3.2.3 (the last bucket is ready only when the backward ends); modelling default",
)];
/// The parameters of `zero` and `fsdp`.
pub static ZERO_PARAMS: &[ParamSpec] = &[
    overlap(
        "prefetch_efficiency",
        "0.8",
        "fraction of a layer's compute (stage 3) or of the first micro-batch's forward (stages 1-2, plan.overlap_param_gather) that hides prefetched parameter all-gathers",
        "modelling default",
    ),
    ParamSpec::with_default(
        "reshard_after_forward",
        ParamType::Bool,
        "",
        "true",
        "true or false",
        "stage 3: free gathered weights after the forward and gather them again for the backward",
        "PyTorch FSDP reshard_after_forward; DeepSpeed ZeRO-3",
    ),
];

perfcast_core::builtin!(
    ParallelStrategy,
    "tensor",
    "Megatron tensor parallel: column/row split, 2 all-reduces fwd + 2 bwd per layer",
    tensor,
    params = TENSOR_PARAMS
);
perfcast_core::builtin!(
    ParallelStrategy,
    "sequence",
    "Megatron sequence parallel: norms/dropout split over TP, all-gather + reduce-scatter",
    |p| {
        params::parse::<NoParams>(p)?;
        Ok(Component::ParallelStrategy(Arc::new(Sequence)))
    },
    params = &[]
);
perfcast_core::builtin!(
    ParallelStrategy,
    "context",
    "Context parallel: sequence split, ring K/V exchange overlapped with attention",
    context,
    params = CONTEXT_PARAMS
);
perfcast_core::builtin!(
    ParallelStrategy,
    "expert",
    "Expert parallel (MoE): experts split over EP x ETP ranks folded into TP x CP x DP; token dispatch/combine all-to-all per MoE layer",
    expert,
    params = EXPERT_PARAMS
);
perfcast_core::builtin!(
    ParallelStrategy,
    "pipeline",
    "Pipeline parallel: layers split into stages, activation hand-offs between them",
    pipeline,
    params = PIPELINE_PARAMS
);
perfcast_core::builtin!(
    ParallelStrategy,
    "data",
    "Data parallel: gradient all-reduce (reduce-scatter with ZeRO), overlapped with backward",
    data,
    params = DATA_PARAMS
);
perfcast_core::builtin!(
    ParallelStrategy,
    "zero",
    "ZeRO 1/2/3: optimizer, gradients, weights sharded over DP; parameter all-gathers",
    |p| zero_named("zero", p),
    params = ZERO_PARAMS
);
perfcast_core::builtin!(
    ParallelStrategy,
    "fsdp",
    "PyTorch FSDP (ZeRO with reshard_after_forward switch); plan.zero_stage 3 = FULL_SHARD",
    |p| zero_named("fsdp", p),
    params = ZERO_PARAMS
);

// `register(&mut Registry)`: this crate's built-ins, composed by `perfcast-builtins`.
perfcast_core::register_fn!();

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::fixtures::{gpt, gpt3_plan as plan};
    use perfcast_core::parallel::{ParallelStrategy, PlanShape};
    use perfcast_core::workload::ModelSpec;

    /// The declared defaults of the fractions are the serde defaults in force.
    #[test]
    fn declared_defaults_are_the_ones_in_force() {
        let declared = |specs: &[ParamSpec], name: &str| -> f64 {
            let p = specs.iter().find(|p| p.name == name).unwrap();
            p.default.value().unwrap().parse().unwrap()
        };
        let empty = serde_json::json!({});
        let t: tensor::TensorParams = serde_json::from_value(empty.clone()).unwrap();
        assert_eq!(
            declared(TENSOR_PARAMS, "overlap_efficiency"),
            t.overlap_efficiency
        );
        let c: context::ContextParams = serde_json::from_value(empty.clone()).unwrap();
        assert_eq!(
            declared(CONTEXT_PARAMS, "overlap_efficiency"),
            c.overlap_efficiency
        );
        let d: data::DataParams = serde_json::from_value(empty.clone()).unwrap();
        assert_eq!(
            declared(DATA_PARAMS, "overlap_efficiency"),
            d.overlap_efficiency
        );
        let p: pipeline::PipelineParams = serde_json::from_value(empty).unwrap();
        assert_eq!(
            declared(PIPELINE_PARAMS, "p2p_overlap_efficiency"),
            p.p2p_overlap_efficiency
        );
    }

    /// The strategies in the engine's default mesh order.
    fn all() -> Vec<Arc<dyn ParallelStrategy>> {
        [
            "tensor", "sequence", "context", "expert", "pipeline", "data", "zero",
        ]
        .iter()
        .map(|n| {
            let c = match *n {
                "tensor" => tensor(&serde_json::Value::Null),
                "context" => context(&serde_json::Value::Null),
                "data" => data(&serde_json::Value::Null),
                "zero" => zero_named("zero", &serde_json::Value::Null),
                "expert" => expert(&serde_json::Value::Null),
                "sequence" => Ok(Component::ParallelStrategy(Arc::new(Sequence))),
                _ => pipeline(&serde_json::Value::Null),
            };
            match c.unwrap() {
                Component::ParallelStrategy(s) => s,
                _ => unreachable!(),
            }
        })
        .collect()
    }

    /// Bad degrees: (mutation, key named in the error).
    #[test]
    fn validation_names_the_key() {
        type Case = (fn(&mut PlanShape, &mut ModelSpec), &'static str);
        let cases: [Case; 9] = [
            (|p, _| p.tp = 7, "plan.tp"),
            (
                |p, m| {
                    p.tp = 4;
                    m.kv_heads = Some(6)
                },
                "plan.tp",
            ),
            (|p, _| p.pp = 64, "plan.pp"),
            (
                |p, _| {
                    p.pp = 16;
                    p.vpp = 4
                },
                "plan.pp",
            ),
            (
                |p, _| {
                    p.pp = 1;
                    p.vpp = 2
                },
                "plan.vpp",
            ),
            (|p, _| p.global_batch = 1537, "plan.global_batch"),
            (|p, _| p.cp = 3, "plan.cp"),
            (|p, _| p.zero_stage = 4, "plan.zero_stage"),
            (|p, _| p.micro_batch = 0, "plan.micro_batch"),
        ];
        let strategies = all();
        let ok =
            |p: &PlanShape, m: &ModelSpec| strategies.iter().try_for_each(|s| s.validate(m, p));
        ok(&plan(), &gpt(96, 12288, 96)).unwrap();
        for (i, (mutate, key)) in cases.into_iter().enumerate() {
            let (mut p, mut m) = (plan(), gpt(96, 12288, 96));
            mutate(&mut p, &mut m);
            let e = ok(&p, &m).unwrap_err().to_string();
            assert!(e.contains(key), "case {i}: {e}");
        }
    }

    #[test]
    fn params_are_checked() {
        assert!(tensor(&serde_json::json!({"overlap_efficiency": 1.5})).is_err());
        assert!(data(&serde_json::json!({"overlap": 0.5})).is_err());
        assert!(zero_named("zero", &serde_json::json!({"prefetch_efficiency": 0.5})).is_ok());
        assert!(expert(&serde_json::json!({"overlap_efficiency": 2.0})).is_err());
        assert!(expert(&serde_json::json!({"dispatcher": "x"})).is_err());
    }
}
