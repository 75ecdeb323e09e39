//! What a parallel strategy exchanges with the host (Rust ABI 1.2; declared axes 1.4), as
//! `#[repr(C)]` numbers: the plan ([`PcPlan`]; with the degrees of the strategy's own declared
//! axes, [`PcPlanAxes`]), the axes it declares ([`PcAxisDecl`]), the model's dimensions ([`PcModel`]), one layer's dimensions
//! ([`PcLayerDims`]), the splits ([`PcLayerSplit`], [`PcStateSplit`]) and the collectives
//! ([`PcCommOp`], written into a caller-provided array). Enums cross as the codes below;
//! booleans as `0`/`1`; an absent optional as `0`. Both sides convert with the functions here:
//! native to data is total, data to native checks every code and says which one is wrong.
//! The value checks on a plugin's answers (finite, non-negative, factors >= 1) are the host
//! adapter's (`perfcast-loader`'s `strategy` module).
//!
//! A loaded strategy sees the model as its dimensions: layers, widths, heads, vocabulary,
//! sequence, tied embeddings, multi-token-prediction layers and the MoE block. The attention
//! layout, multi-head latent attention and sliding windows do not cross (a strategy rebuilt
//! from [`PcModel`] sees them absent).
//!
//! The types also serialise (serde): an isolated plugin host passes them as JSON.

use abi_stable::StableAbi;
use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{
    Axis, AxisSet, CommClass, CommOp, CpComm, Dispatch, Dispatcher, LayerDims, LayerSplit, MoeDims,
    Overlap, Phase, PlanShape, StateSplit, Window, MAX_DECLARED_AXES,
};
use perfcast_core::workload::{FfnAct, ModelSpec, MoeSpec};
use serde::{Deserialize, Serialize};

use crate::codes::{collective_kind_code, collective_kind_from_code};

/// The mesh axes, in code order (`Axis` code = position).
pub const AXES: [Axis; 6] = [
    Axis::Tensor,
    Axis::Sequence,
    Axis::Context,
    Axis::Expert,
    Axis::Pipeline,
    Axis::Data,
];

/// The phases, in code order.
pub const PHASES: [Phase; 10] = [
    Phase::Forward,
    Phase::Backward,
    Phase::Step,
    Phase::Boundary,
    Phase::EmbeddingForward,
    Phase::EmbeddingBackward,
    Phase::HeadForward,
    Phase::HeadBackward,
    Phase::ExpertForward,
    Phase::ExpertBackward,
];

/// The token dispatchers, in code order.
pub const DISPATCHERS: [Dispatcher; 4] = [
    Dispatcher::Alltoall,
    Dispatcher::Allgather,
    Dispatcher::Deepep,
    Dispatcher::Hybridep,
];

/// The context-parallel K/V exchanges, in code order.
pub const CP_COMMS: [CpComm; 2] = [CpComm::P2p, CpComm::AllGather];

/// The feed-forward activations, in code order.
pub const FFN_ACTS: [FfnAct; 3] = [FfnAct::Gelu, FfnAct::Swiglu, FfnAct::Relu2];

/// The bits an [`AxisSet`] may carry across: every built-in group (`0xff`) and, since Rust
/// ABI 1.4 / C ABI 1.7, the strategy's own declared axes (`0x100 << k` for its `k`-th).
pub const AXIS_SET_BITS: u32 = 0xffff;

pub use crate::axes::*;

fn code_of<T: PartialEq>(all: &[T], v: &T) -> u32 {
    all.iter().position(|x| x == v).unwrap_or(0) as u32
}

fn from_code<T: Copy>(all: &[T], c: u32, what: &str) -> Result<T, String> {
    all.get(c as usize)
        .copied()
        .ok_or_else(|| format!("unknown {what} code {c}"))
}

/// The code of an axis.
pub fn axis_code(a: Axis) -> u32 {
    code_of(&AXES, &a)
}

/// The axis of a code.
pub fn axis_from_code(c: u32) -> Result<Axis, String> {
    from_code(&AXES, c, "axis")
}

fn flag(b: bool) -> u32 {
    u32::from(b)
}

fn bool_from(c: u32, what: &str) -> Result<bool, String> {
    match c {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(format!("{what} is {c}, not 0 or 1")),
    }
}

fn opt(v: Option<u64>) -> u64 {
    v.unwrap_or(0)
}

fn some(v: u64) -> Option<u64> {
    (v != 0).then_some(v)
}

/// `perfcast_plan`: the degrees and switches of a plan ([`PlanShape`]).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PcPlan {
    pub struct_size: u32,
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub cp: u32,
    pub ep: u32,
    pub etp: u32,
    pub vpp: u32,
    /// Code in [`DISPATCHERS`].
    pub moe_dispatcher: u32,
    /// Code in [`CP_COMMS`].
    pub cp_comm: u32,
    pub zero_stage: u32,
    pub micro_batch: u32,
    pub global_batch: u32,
    pub sp: u32,
    pub ep_comm_overlap: u32,
    pub tp_comm_overlap: u32,
    pub overlap_grad_reduce: u32,
    pub overlap_param_gather: u32,
    pub fp32_grad_accum: u32,
    pub reserved0: u32,
}

impl PcPlan {
    pub fn from_native(p: &PlanShape) -> Self {
        PcPlan {
            struct_size: std::mem::size_of::<PcPlan>() as u32,
            tp: p.tp,
            pp: p.pp,
            dp: p.dp,
            cp: p.cp,
            ep: p.ep,
            etp: p.etp,
            vpp: p.vpp,
            moe_dispatcher: code_of(&DISPATCHERS, &p.moe_dispatcher),
            cp_comm: code_of(&CP_COMMS, &p.cp_comm),
            zero_stage: p.zero_stage as u32,
            micro_batch: p.micro_batch,
            global_batch: p.global_batch,
            sp: flag(p.sp),
            ep_comm_overlap: flag(p.ep_comm_overlap),
            tp_comm_overlap: flag(p.tp_comm_overlap),
            overlap_grad_reduce: flag(p.overlap_grad_reduce),
            overlap_param_gather: flag(p.overlap_param_gather),
            fp32_grad_accum: flag(p.fp32_grad_accum),
            reserved0: 0,
        }
    }

    pub fn to_native(&self) -> Result<PlanShape, String> {
        Ok(PlanShape {
            tp: self.tp,
            pp: self.pp,
            dp: self.dp,
            cp: self.cp,
            ep: self.ep,
            etp: self.etp,
            moe_dispatcher: from_code(&DISPATCHERS, self.moe_dispatcher, "MoE dispatcher")?,
            ep_comm_overlap: bool_from(self.ep_comm_overlap, "ep_comm_overlap")?,
            vpp: self.vpp,
            sp: bool_from(self.sp, "sp")?,
            zero_stage: u8::try_from(self.zero_stage)
                .map_err(|_| format!("zero_stage {} out of range", self.zero_stage))?,
            micro_batch: self.micro_batch,
            global_batch: self.global_batch,
            tp_comm_overlap: bool_from(self.tp_comm_overlap, "tp_comm_overlap")?,
            overlap_grad_reduce: bool_from(self.overlap_grad_reduce, "overlap_grad_reduce")?,
            overlap_param_gather: bool_from(self.overlap_param_gather, "overlap_param_gather")?,
            fp32_grad_accum: bool_from(self.fp32_grad_accum, "fp32_grad_accum")?,
            cp_comm: from_code(&CP_COMMS, self.cp_comm, "context-parallel exchange")?,
            // The 1.4 plan carries no declared axes ([`PcPlanAxes`] does).
            axes: [1; MAX_DECLARED_AXES],
            batch_split: 1,
        })
    }
}

/// `perfcast_model`: the model's dimensions (see the module docs for what does not cross).
/// `kv_heads` and `head_dim` are the values in effect; `0` is "absent" for the optional
/// fields; the MoE fields count only with `has_moe = 1`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PcModel {
    pub struct_size: u32,
    /// Code in [`FFN_ACTS`].
    pub ffn_act: u32,
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub ffn_hidden: u64,
    pub vocab: u64,
    pub seq_len: u64,
    pub max_context: u64,
    pub mtp_layers: u64,
    pub tied_embeddings: u32,
    pub has_moe: u32,
    pub experts: u64,
    pub top_k: u64,
    pub expert_ffn_hidden: u64,
    pub shared_experts: u64,
    pub shared_expert_ffn_hidden: u64,
    pub dense_layers: u64,
    pub moe_layer_freq: u64,
    pub expert_groups: u64,
    pub group_top_k: u64,
    pub capacity_factor: f64,
    pub load_imbalance: f64,
}

impl PcModel {
    pub fn from_native(m: &ModelSpec) -> Self {
        let moe = m.moe.unwrap_or(MoeSpec {
            experts: 0,
            top_k: 0,
            expert_ffn_hidden: 0,
            shared_experts: 0,
            shared_expert_ffn_hidden: None,
            dense_layers: 0,
            moe_layer_freq: 0,
            expert_groups: None,
            group_top_k: None,
            capacity_factor: None,
            load_imbalance: None,
        });
        PcModel {
            struct_size: std::mem::size_of::<PcModel>() as u32,
            ffn_act: code_of(&FFN_ACTS, &m.ffn_act),
            layers: m.layers,
            hidden: m.hidden,
            heads: m.heads,
            kv_heads: m.kv_heads(),
            head_dim: m.head_dim(),
            ffn_hidden: m.ffn_hidden,
            vocab: m.vocab,
            seq_len: m.seq_len,
            max_context: opt(m.max_context),
            mtp_layers: m.mtp_layers,
            tied_embeddings: flag(m.tied_embeddings),
            has_moe: flag(m.moe.is_some()),
            experts: moe.experts,
            top_k: moe.top_k,
            expert_ffn_hidden: moe.expert_ffn_hidden,
            shared_experts: moe.shared_experts,
            shared_expert_ffn_hidden: opt(moe.shared_expert_ffn_hidden),
            dense_layers: moe.dense_layers,
            moe_layer_freq: moe.moe_layer_freq,
            expert_groups: opt(moe.expert_groups),
            group_top_k: opt(moe.group_top_k),
            capacity_factor: moe.capacity_factor.unwrap_or(0.0),
            load_imbalance: moe.load_imbalance.unwrap_or(0.0),
        }
    }

    pub fn to_native(&self) -> Result<ModelSpec, String> {
        let moe = match bool_from(self.has_moe, "has_moe")? {
            false => None,
            true => Some(MoeSpec {
                experts: self.experts,
                top_k: self.top_k,
                expert_ffn_hidden: self.expert_ffn_hidden,
                shared_experts: self.shared_experts,
                shared_expert_ffn_hidden: some(self.shared_expert_ffn_hidden),
                dense_layers: self.dense_layers,
                moe_layer_freq: self.moe_layer_freq,
                expert_groups: some(self.expert_groups),
                group_top_k: some(self.group_top_k),
                capacity_factor: (self.capacity_factor != 0.0).then_some(self.capacity_factor),
                load_imbalance: (self.load_imbalance != 0.0).then_some(self.load_imbalance),
            }),
        };
        Ok(ModelSpec {
            name: String::new(),
            layers: self.layers,
            hidden: self.hidden,
            heads: self.heads,
            kv_heads: Some(self.kv_heads),
            head_dim: Some(self.head_dim),
            ffn_hidden: self.ffn_hidden,
            ffn_act: from_code(&FFN_ACTS, self.ffn_act, "feed-forward activation")?,
            vocab: self.vocab,
            seq_len: self.seq_len,
            max_context: some(self.max_context),
            tied_embeddings: bool_from(self.tied_embeddings, "tied_embeddings")?,
            norm: None,
            position: None,
            bias: None,
            moe,
            attention: None,
            mla: None,
            sliding_window: None,
            sliding_window_layers: None,
            layer_pattern: None,
            attention_chunk: None,
            mtp_layers: self.mtp_layers,
        })
    }
}

/// `perfcast_layer_dims`: one layer as the strategies see it ([`LayerDims`]); the MoE fields
/// count only with `has_moe = 1`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PcLayerDims {
    pub struct_size: u32,
    pub tied_embeddings: u32,
    pub micro_batch: u64,
    pub seq_len: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub ffn_hidden: u64,
    pub act_bytes: f64,
    pub gather_bytes: f64,
    pub layer_params: f64,
    pub device_params: f64,
    pub grad_bytes: f64,
    pub weight_bytes: f64,
    pub embedding_params: f64,
    pub has_moe: u32,
    pub reserved0: u32,
    pub experts: u64,
    pub top_k: u64,
    pub expert_groups: u64,
    pub group_top_k: u64,
    pub moe_tokens: f64,
    pub moe_routed: f64,
    pub dispatch_bytes: f64,
    pub expert_layer_params: f64,
    pub expert_params: f64,
}

impl PcLayerDims {
    pub fn from_native(d: &LayerDims) -> Self {
        let m = d.moe.unwrap_or(MoeDims {
            experts: 0,
            top_k: 0,
            expert_groups: 0,
            group_top_k: 0,
            tokens: 0.0,
            routed: 0.0,
            dispatch_bytes: 0.0,
            expert_layer_params: 0.0,
            expert_params: 0.0,
        });
        PcLayerDims {
            struct_size: std::mem::size_of::<PcLayerDims>() as u32,
            tied_embeddings: flag(d.tied_embeddings),
            micro_batch: d.micro_batch,
            seq_len: d.seq_len,
            hidden: d.hidden,
            heads: d.heads,
            kv_heads: d.kv_heads,
            head_dim: d.head_dim,
            ffn_hidden: d.ffn_hidden,
            act_bytes: d.act_bytes,
            gather_bytes: d.gather_bytes,
            layer_params: d.layer_params,
            device_params: d.device_params,
            grad_bytes: d.grad_bytes,
            weight_bytes: d.weight_bytes,
            embedding_params: d.embedding_params,
            has_moe: flag(d.moe.is_some()),
            reserved0: 0,
            experts: m.experts,
            top_k: m.top_k,
            expert_groups: m.expert_groups,
            group_top_k: m.group_top_k,
            moe_tokens: m.tokens,
            moe_routed: m.routed,
            dispatch_bytes: m.dispatch_bytes,
            expert_layer_params: m.expert_layer_params,
            expert_params: m.expert_params,
        }
    }

    pub fn to_native(&self) -> Result<LayerDims, String> {
        let moe = bool_from(self.has_moe, "has_moe")?.then_some(MoeDims {
            experts: self.experts,
            top_k: self.top_k,
            expert_groups: self.expert_groups,
            group_top_k: self.group_top_k,
            tokens: self.moe_tokens,
            routed: self.moe_routed,
            dispatch_bytes: self.dispatch_bytes,
            expert_layer_params: self.expert_layer_params,
            expert_params: self.expert_params,
        });
        Ok(LayerDims {
            micro_batch: self.micro_batch,
            seq_len: self.seq_len,
            hidden: self.hidden,
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            ffn_hidden: self.ffn_hidden,
            act_bytes: self.act_bytes,
            gather_bytes: self.gather_bytes,
            layer_params: self.layer_params,
            device_params: self.device_params,
            grad_bytes: self.grad_bytes,
            weight_bytes: self.weight_bytes,
            embedding_params: self.embedding_params,
            tied_embeddings: bool_from(self.tied_embeddings, "tied_embeddings")?,
            moe,
        })
    }
}

/// `perfcast_comm_op`: one collective a strategy adds ([`CommOp`]). `window` and
/// `efficiency` count only with `exposed = 0`; the dispatch fields only with
/// `has_dispatch = 1`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PcCommOp {
    pub struct_size: u32,
    /// `CommClass::index()`.
    pub class: u32,
    /// Code in [`PHASES`].
    pub phase: u32,
    /// `codes::collective_kind_code`.
    pub kind: u32,
    /// [`AxisSet`] bits (within [`AXIS_SET_BITS`]).
    pub group: u32,
    pub exposed: u32,
    pub bytes: f64,
    pub count: f64,
    /// `Window::index()`.
    pub window: u32,
    pub with_recompute: u32,
    pub efficiency: f64,
    pub has_dispatch: u32,
    pub dispatch_top_k: u32,
    pub dispatch_experts: u32,
    pub dispatch_expert_groups: u32,
    pub dispatch_group_top_k: u32,
    pub dispatch_hierarchical: u32,
}

impl PcCommOp {
    pub fn from_native(c: &CommOp) -> Self {
        let (exposed, window, efficiency) = match c.overlap {
            Overlap::Exposed => (1, 0, 0.0),
            Overlap::Behind { window, efficiency } => (0, window.index() as u32, efficiency),
        };
        let d = c.dispatch.unwrap_or(Dispatch {
            top_k: 0,
            experts: 0,
            expert_groups: 0,
            group_top_k: 0,
            hierarchical: false,
        });
        PcCommOp {
            struct_size: std::mem::size_of::<PcCommOp>() as u32,
            class: c.class.index() as u32,
            phase: code_of(&PHASES, &c.phase),
            kind: collective_kind_code(c.kind),
            group: c.group.0 as u32,
            exposed,
            bytes: c.bytes.0,
            count: c.count,
            window,
            with_recompute: flag(c.with_recompute),
            efficiency,
            has_dispatch: flag(c.dispatch.is_some()),
            dispatch_top_k: d.top_k,
            dispatch_experts: d.experts,
            dispatch_expert_groups: d.expert_groups,
            dispatch_group_top_k: d.group_top_k,
            dispatch_hierarchical: flag(d.hierarchical),
        }
    }

    /// The collective, every code checked (its numbers are the host adapter's to check).
    pub fn to_native(&self) -> Result<CommOp, String> {
        let class = from_code(&CommClass::ALL, self.class, "communication class")?;
        let phase = from_code(&PHASES, self.phase, "phase")?;
        let kind: CollectiveKind = collective_kind_from_code(self.kind)
            .ok_or_else(|| format!("unknown collective kind code {}", self.kind))?;
        if self.group == 0 || self.group & !AXIS_SET_BITS != 0 {
            return Err(format!(
                "group {:#x} is not a non-empty set of the mesh's axes (bits {AXIS_SET_BITS:#x})",
                self.group
            ));
        }
        let overlap = match bool_from(self.exposed, "exposed")? {
            true => Overlap::Exposed,
            false => Overlap::Behind {
                window: from_code(&Window::ALL, self.window, "window")?,
                efficiency: self.efficiency,
            },
        };
        let dispatch = match bool_from(self.has_dispatch, "has_dispatch")? {
            false => None,
            true => Some(Dispatch {
                top_k: self.dispatch_top_k,
                experts: self.dispatch_experts,
                expert_groups: self.dispatch_expert_groups,
                group_top_k: self.dispatch_group_top_k,
                hierarchical: bool_from(self.dispatch_hierarchical, "dispatch_hierarchical")?,
            }),
        };
        Ok(CommOp {
            class,
            phase,
            kind,
            bytes: perfcast_core::Bytes(self.bytes),
            group: AxisSet(self.group as u16),
            count: self.count,
            overlap,
            with_recompute: bool_from(self.with_recompute, "with_recompute")?,
            dispatch,
        })
    }
}

/// `perfcast_layer_split`: [`LayerSplit`]'s factors.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcLayerSplit {
    pub struct_size: u32,
    pub tokens: u32,
    pub weights: u32,
    pub pointwise: u32,
    pub experts: u32,
    pub expert_weights: u32,
}

impl PcLayerSplit {
    pub fn from_native(s: &LayerSplit) -> Self {
        PcLayerSplit {
            struct_size: std::mem::size_of::<PcLayerSplit>() as u32,
            tokens: s.tokens,
            weights: s.weights,
            pointwise: s.pointwise,
            experts: s.experts,
            expert_weights: s.expert_weights,
        }
    }
    pub fn to_native(&self) -> LayerSplit {
        LayerSplit {
            tokens: self.tokens,
            weights: self.weights,
            pointwise: self.pointwise,
            experts: self.experts,
            expert_weights: self.expert_weights,
        }
    }
    /// `(name, factor)` of every field, for checks and messages.
    pub fn fields(&self) -> [(&'static str, u32); 5] {
        [
            ("tokens", self.tokens),
            ("weights", self.weights),
            ("pointwise", self.pointwise),
            ("experts", self.experts),
            ("expert_weights", self.expert_weights),
        ]
    }
}

/// `perfcast_state_split`: [`StateSplit`]'s divisors.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcStateSplit {
    pub struct_size: u32,
    pub weights: u32,
    pub grads: u32,
    pub optimizer: u32,
    pub expert_weights: u32,
    pub expert_grads: u32,
    pub expert_optimizer: u32,
    pub reserved0: u32,
}

impl PcStateSplit {
    pub fn from_native(s: &StateSplit) -> Self {
        PcStateSplit {
            struct_size: std::mem::size_of::<PcStateSplit>() as u32,
            weights: s.weights,
            grads: s.grads,
            optimizer: s.optimizer,
            expert_weights: s.expert_weights,
            expert_grads: s.expert_grads,
            expert_optimizer: s.expert_optimizer,
            reserved0: 0,
        }
    }
    pub fn to_native(&self) -> StateSplit {
        StateSplit {
            weights: self.weights,
            grads: self.grads,
            optimizer: self.optimizer,
            expert_weights: self.expert_weights,
            expert_grads: self.expert_grads,
            expert_optimizer: self.expert_optimizer,
        }
    }
    /// `(name, divisor)` of every field, for checks and messages.
    pub fn fields(&self) -> [(&'static str, u32); 6] {
        [
            ("weights", self.weights),
            ("grads", self.grads),
            ("optimizer", self.optimizer),
            ("expert_weights", self.expert_weights),
            ("expert_grads", self.expert_grads),
            ("expert_optimizer", self.expert_optimizer),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::Bytes;

    fn plan() -> PlanShape {
        PlanShape {
            tp: 8,
            pp: 4,
            dp: 16,
            cp: 2,
            ep: 8,
            moe_dispatcher: Dispatcher::Deepep,
            ep_comm_overlap: true,
            vpp: 2,
            sp: true,
            zero_stage: 1,
            global_batch: 1024,
            tp_comm_overlap: true,
            overlap_grad_reduce: true,
            fp32_grad_accum: true,
            cp_comm: CpComm::AllGather,
            ..PlanShape::default()
        }
    }

    #[test]
    fn every_type_round_trips() {
        let p = plan();
        assert_eq!(PcPlan::from_native(&p).to_native().unwrap(), p);
        for c in 0..AXES.len() as u32 {
            assert_eq!(axis_code(axis_from_code(c).unwrap()), c);
        }
        let op = CommOp {
            class: CommClass::Expert,
            phase: Phase::ExpertBackward,
            kind: CollectiveKind::AllToAll,
            bytes: Bytes(3.5e6),
            group: AxisSet::EXPERT,
            count: 2.0,
            overlap: Overlap::Behind {
                window: Window::LayerCompute,
                efficiency: 0.7,
            },
            with_recompute: false,
            dispatch: Some(Dispatch {
                top_k: 8,
                experts: 256,
                expert_groups: 8,
                group_top_k: 4,
                hierarchical: true,
            }),
        };
        assert_eq!(PcCommOp::from_native(&op).to_native().unwrap(), op);
        let s = LayerSplit {
            tokens: 2,
            weights: 8,
            pointwise: 8,
            experts: 4,
            expert_weights: 1,
        };
        assert_eq!(PcLayerSplit::from_native(&s).to_native(), s);
        let st = StateSplit {
            optimizer: 16,
            ..StateSplit::default()
        };
        assert_eq!(PcStateSplit::from_native(&st).to_native(), st);
    }

    #[test]
    fn bad_codes_are_named() {
        let mut op = PcCommOp::from_native(&CommOp {
            class: CommClass::Tensor,
            phase: Phase::Forward,
            kind: CollectiveKind::AllReduce,
            bytes: Bytes(1.0),
            group: AxisSet::TENSOR,
            count: 1.0,
            overlap: Overlap::Exposed,
            with_recompute: true,
            dispatch: None,
        });
        type Spoil = fn(&mut PcCommOp);
        let table: [(Spoil, &str); 6] = [
            (|o| o.class = 9, "communication class code 9"),
            (|o| o.phase = 99, "phase code 99"),
            (|o| o.kind = 77, "collective kind code 77"),
            (|o| o.group = 0, "group 0x0"),
            (|o| o.group = 0x10000, "group 0x10000"),
            (|o| o.exposed = 2, "exposed is 2"),
        ];
        for (spoil, want) in table {
            let mut o = op;
            spoil(&mut o);
            let e = o.to_native().unwrap_err();
            assert!(e.contains(want), "{e} / {want}");
        }
        op.exposed = 0;
        op.window = 5;
        assert!(op.to_native().unwrap_err().contains("window code 5"));
        let mut p = PcPlan::from_native(&plan());
        p.cp_comm = 2;
        assert!(p.to_native().unwrap_err().contains("context-parallel"));
    }
}
