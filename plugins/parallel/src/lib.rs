//! Built-in parallel strategies, one per mesh axis: `tensor`, `sequence`, `context`,
//! `pipeline`, `data`, `zero` (and `fsdp`, ZeRO with PyTorch FSDP's resharding switch).
//!
//! Mesh order (Megatron-LM): TP innermost, then CP, PP, DP outermost. Each strategy divides
//! one layer's work ([`LayerSplit`]), adds its collectives ([`CommOp`], tagged with the axes of
//! their group; the engine places the group on the network levels) and shards the model state
//! ([`StateSplit`]). Volumes follow the papers cited on each strategy. Overlap efficiencies are
//! named plugin parameters with documented defaults, shared by every scenario.

use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{
    stage_layers, Axis, AxisSet, CommClass, CommList, CommOp, CpComm, LayerDims, LayerSplit,
    Overlap, ParallelStrategy, Phase, PlanShape, StateSplit, Window,
};
use perfcast_core::params::{self, fraction};
use perfcast_core::registry::Component;
use perfcast_core::workload::ModelSpec;
use perfcast_core::Key;
use perfcast_core::{Bytes, ModelError, PluginError};
use serde::Deserialize;
use std::sync::Arc;

#[allow(clippy::too_many_arguments)] // one field each: a struct literal by another name
fn op(
    class: CommClass,
    phase: Phase,
    kind: CollectiveKind,
    bytes: f64,
    group: AxisSet,
    count: f64,
    overlap: Overlap,
    with_recompute: bool,
) -> CommOp {
    CommOp {
        class,
        phase,
        kind,
        bytes: Bytes(bytes),
        group,
        count,
        overlap,
        with_recompute,
    }
}

/// Tokens of one micro-batch on one device (context parallel splits the sequence).
fn tokens(plan: &PlanShape, d: &LayerDims) -> f64 {
    d.micro_batch as f64 * d.seq_len as f64 / plan.cp.max(1) as f64
}

// ---------------------------------------------------------------------------------------
// Tensor parallel
// ---------------------------------------------------------------------------------------

/// Parameters of `tensor`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorParams {
    /// With `plan.tp_comm_overlap`: fraction of the layer's GEMM time that can hide its
    /// tensor-parallel collectives (Megatron-Core/Transformer Engine userbuffer overlap
    /// splits GEMMs into chunks; the first and last chunk stay exposed). Default 0.6, the
    /// TP overlap fraction of RAPID-LLM's Korthikanti validation config.
    #[serde(default = "d_tp_overlap")]
    pub overlap_efficiency: f64,
}

fn d_tp_overlap() -> f64 {
    0.6
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
    fn split_layer(&self, plan: &PlanShape, split: &mut LayerSplit) {
        split.weights *= plan.tp.max(1);
    }
    fn comms(&self, plan: &PlanShape, d: &LayerDims, out: &mut CommList) -> Result<(), ModelError> {
        if plan.tp <= 1 {
            return Ok(());
        }
        let s = tokens(plan, d) * d.hidden as f64 * d.act_bytes;
        let overlap = if plan.tp_comm_overlap {
            Overlap::Behind {
                window: Window::LayerGemms,
                efficiency: self.params.overlap_efficiency,
            }
        } else {
            Overlap::Exposed
        };
        let g = AxisSet::TENSOR;
        let c = CommClass::Tensor;
        use CollectiveKind::*;
        for phase in [Phase::Forward, Phase::Backward] {
            if plan.sp {
                out.push(op(c, phase, AllGather, s, g, 2.0, overlap, true))?;
                out.push(op(c, phase, ReduceScatter, s, g, 2.0, overlap, true))?;
            } else {
                out.push(op(c, phase, AllReduce, s, g, 2.0, overlap, true))?;
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

// ---------------------------------------------------------------------------------------
// Sequence parallel
// ---------------------------------------------------------------------------------------

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
    fn split_layer(&self, plan: &PlanShape, split: &mut LayerSplit) {
        if plan.sp {
            split.pointwise *= plan.tp.max(1);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Context parallel
// ---------------------------------------------------------------------------------------

/// Parameters of `context`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextParams {
    /// Fraction of the attention core's time that hides the ring K/V exchange. Default 0.8,
    /// RAPID-LLM's CP overlap fraction (Korthikanti validation config).
    #[serde(default = "d_cp_overlap")]
    pub overlap_efficiency: f64,
}

fn d_cp_overlap() -> f64 {
    0.8
}

/// Context parallelism (Megatron-Core; ring attention, Liu et al. 2023): the sequence is split
/// over `cp` ranks (load-balanced causal chunks); attention passes each rank's K and V around
/// the ring in `cp - 1` steps overlapped with the attention of the previous chunk; the
/// backward pass circulates K, V and their gradients (twice the bytes). With
/// `plan.cp_comm = all_gather` (Llama 3) K and V are all-gathered instead, exposed. Gradients
/// are reduced over `dp x cp` (by `data`).
#[derive(Debug, Clone)]
pub struct Context {
    pub params: ContextParams,
}

impl ParallelStrategy for Context {
    fn kind(&self) -> &str {
        "context"
    }
    fn axis(&self) -> Axis {
        Axis::Context
    }
    fn validate(&self, model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError> {
        if plan.cp == 0 {
            return Err(ModelError::invalid(
                Key::plan("cp"),
                plan.cp,
                "must be a positive integer",
            ));
        }
        if plan.cp > 1 && !model.seq_len.is_multiple_of(2 * plan.cp as u64) {
            return Err(ModelError::invalid(
                Key::plan("cp"),
                plan.cp,
                format!(
                    "2 x plan.cp must divide model.seq_len = {} (load-balanced causal chunks)",
                    model.seq_len
                ),
            ));
        }
        Ok(())
    }
    fn split_layer(&self, plan: &PlanShape, split: &mut LayerSplit) {
        split.tokens *= plan.cp.max(1);
    }
    fn comms(&self, plan: &PlanShape, d: &LayerDims, out: &mut CommList) -> Result<(), ModelError> {
        if plan.cp <= 1 {
            return Ok(());
        }
        let t = plan.tp.max(1) as u64;
        let kv_dev = (d.kv_heads / t).max(1) as f64;
        let kv = 2.0 * tokens(plan, d) * kv_dev * d.head_dim as f64 * d.act_bytes;
        let c = CommClass::Context;
        let g = AxisSet::CONTEXT;
        if plan.cp_comm == CpComm::AllGather {
            // The whole sequence's K and V (the gathered buffer), gathered before the forward
            // and again before the backward; their gradients reduce-scattered after it.
            let full = kv * plan.cp as f64;
            let x = Overlap::Exposed;
            use CollectiveKind::*;
            out.push(op(c, Phase::Forward, AllGather, full, g, 1.0, x, true))?;
            out.push(op(c, Phase::Backward, AllGather, full, g, 1.0, x, false))?;
            return out.push(op(
                c,
                Phase::Backward,
                ReduceScatter,
                full,
                g,
                1.0,
                x,
                false,
            ));
        }
        let steps = (plan.cp - 1) as f64;
        let overlap = Overlap::Behind {
            window: Window::Attention,
            efficiency: self.params.overlap_efficiency,
        };
        out.push(op(
            c,
            Phase::Forward,
            CollectiveKind::SendRecv,
            kv,
            g,
            steps,
            overlap,
            true,
        ))?;
        out.push(op(
            c,
            Phase::Backward,
            CollectiveKind::SendRecv,
            2.0 * kv,
            g,
            steps,
            overlap,
            false,
        ))?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Pipeline parallel
// ---------------------------------------------------------------------------------------

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
    /// Overlap hand-offs with compute in interleaved schedules (Megatron-Core
    /// `--overlap-p2p-communication`); Megatron-LM of 2021-22 blocked on them. Default false.
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

// ---------------------------------------------------------------------------------------
// Data parallel
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// ZeRO / FSDP
// ---------------------------------------------------------------------------------------

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
    fn split_state(&self, plan: &PlanShape, split: &mut StateSplit) {
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
fn zero_named(name: &'static str, p: &serde_json::Value) -> Result<Component, PluginError> {
    let params: ZeroParams = params::parse(p)?;
    fraction("prefetch_efficiency", params.prefetch_efficiency)?;
    Ok(Component::ParallelStrategy(Arc::new(Zero { name, params })))
}

perfcast_core::builtin!(
    ParallelStrategy,
    "tensor",
    "Megatron tensor parallel: column/row split, 2 all-reduces fwd + 2 bwd per layer",
    tensor
);
perfcast_core::builtin!(
    ParallelStrategy,
    "sequence",
    "Megatron sequence parallel: norms/dropout split over TP, all-gather + reduce-scatter",
    |p| {
        params::parse::<NoParams>(p)?;
        Ok(Component::ParallelStrategy(Arc::new(Sequence)))
    }
);
perfcast_core::builtin!(
    ParallelStrategy,
    "context",
    "Context parallel: sequence split, ring K/V exchange overlapped with attention",
    context
);
perfcast_core::builtin!(
    ParallelStrategy,
    "pipeline",
    "Pipeline parallel: layers split into stages, activation hand-offs between them",
    pipeline
);
perfcast_core::builtin!(
    ParallelStrategy,
    "data",
    "Data parallel: gradient all-reduce (reduce-scatter with ZeRO), overlapped with backward",
    data
);

// `register(&mut Registry)`: this crate's built-ins, composed by `perfcast-builtins`.
perfcast_core::register_fn!();
perfcast_core::builtin!(
    ParallelStrategy,
    "zero",
    "ZeRO 1/2/3: optimizer, gradients, weights sharded over DP; parameter all-gathers",
    |p| zero_named("zero", p)
);
perfcast_core::builtin!(
    ParallelStrategy,
    "fsdp",
    "PyTorch FSDP (ZeRO with reshard_after_forward switch); plan.zero_stage 3 = FULL_SHARD",
    |p| zero_named("fsdp", p)
);

/// The strategies a training model uses by default, in mesh order.
pub const DEFAULT_STRATEGIES: [&str; 6] =
    ["tensor", "sequence", "context", "pipeline", "data", "zero"];

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::workload::FfnAct;

    fn model() -> ModelSpec {
        ModelSpec {
            name: String::new(),
            layers: 96,
            hidden: 12288,
            heads: 96,
            kv_heads: None,
            head_dim: None,
            ffn_hidden: 49152,
            ffn_act: FfnAct::Gelu,
            vocab: 51200,
            seq_len: 2048,
            tied_embeddings: true,
            norm: None,
            position: None,
            bias: None,
            moe: None,
        }
    }

    fn plan() -> PlanShape {
        PlanShape {
            tp: 8,
            pp: 16,
            dp: 8,
            cp: 1,
            ep: 1,
            vpp: 1,
            sp: false,
            zero_stage: 0,
            micro_batch: 1,
            global_batch: 1536,
            tp_comm_overlap: false,
            overlap_grad_reduce: true,
            overlap_param_gather: true,
            fp32_grad_accum: false,
            cp_comm: Default::default(),
        }
    }

    fn dims() -> LayerDims {
        LayerDims {
            micro_batch: 1,
            seq_len: 2048,
            hidden: 12288,
            heads: 96,
            kv_heads: 96,
            head_dim: 128,
            ffn_hidden: 49152,
            act_bytes: 2.0,
            layer_params: 1.0e9 / 8.0,
            device_params: 1.0e9,
            grad_bytes: 2.0,
            weight_bytes: 2.0,
            embedding_params: 51200.0 * 12288.0 / 8.0,
            tied_embeddings: true,
        }
    }

    fn all() -> Vec<Arc<dyn ParallelStrategy>> {
        DEFAULT_STRATEGIES
            .iter()
            .map(|n| {
                let c = match *n {
                    "tensor" => tensor(&serde_json::Value::Null),
                    "context" => context(&serde_json::Value::Null),
                    "data" => data(&serde_json::Value::Null),
                    "zero" => zero_named("zero", &serde_json::Value::Null),
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
        ok(&plan(), &model()).unwrap();
        for (i, (mutate, key)) in cases.into_iter().enumerate() {
            let (mut p, mut m) = (plan(), model());
            mutate(&mut p, &mut m);
            let e = ok(&p, &m).unwrap_err().to_string();
            assert!(e.contains(key), "case {i}: {e}");
        }
    }

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
            );
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

    /// Context parallelism: the ring (p2p) hides `cp - 1` K/V hand-offs behind attention; the
    /// all-gather variant moves the whole sequence's K/V in the critical path.
    #[test]
    fn context_exchange_by_comm_type() {
        let cx = Context {
            params: ContextParams {
                overlap_efficiency: 0.8,
            },
        };
        let base = PlanShape { cp: 4, ..plan() };
        let d = dims();
        let kv_dev = (d.kv_heads / base.tp as u64) as f64;
        let local = 2.0 * tokens(&base, &d) * kv_dev * d.head_dim as f64 * d.act_bytes;
        let mut ring = CommList::default();
        cx.comms(&base, &d, &mut ring).unwrap();
        assert_eq!(ring.len(), 2);
        assert!(ring
            .iter()
            .all(|c| c.kind == CollectiveKind::SendRecv
                && matches!(c.overlap, Overlap::Behind { .. })));
        let mut ag = CommList::default();
        let p = PlanShape {
            cp_comm: CpComm::AllGather,
            ..base
        };
        cx.comms(&p, &d, &mut ag).unwrap();
        let kinds: Vec<_> = ag.iter().map(|c| (c.phase, c.kind)).collect();
        assert_eq!(
            kinds,
            [
                (Phase::Forward, CollectiveKind::AllGather),
                (Phase::Backward, CollectiveKind::AllGather),
                (Phase::Backward, CollectiveKind::ReduceScatter),
            ]
        );
        for c in ag.iter() {
            assert_eq!(c.overlap, Overlap::Exposed);
            assert!((c.bytes.0 - 4.0 * local).abs() <= 1e-9 * c.bytes.0);
        }
    }

    #[test]
    fn params_are_checked() {
        assert!(tensor(&serde_json::json!({"overlap_efficiency": 1.5})).is_err());
        assert!(data(&serde_json::json!({"overlap": 0.5})).is_err());
        assert!(zero_named("zero", &serde_json::json!({"prefetch_efficiency": 0.5})).is_ok());
    }
}
