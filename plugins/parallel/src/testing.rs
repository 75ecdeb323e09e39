//! Test fixtures shared by the strategies' unit tests: GPT-3 175B on TP 8, PP 16, DP 8.

use perfcast_core::parallel::{LayerDims, PlanShape};
use perfcast_core::workload::{FfnAct, ModelSpec};

pub(crate) fn model() -> ModelSpec {
    ModelSpec {
        tied_embeddings: true,
        ..ModelSpec::dense(96, 12288, 96, 49152, FfnAct::Gelu, 51200, 2048)
    }
}

pub(crate) fn plan() -> PlanShape {
    PlanShape {
        tp: 8,
        pp: 16,
        dp: 8,
        cp: 1,
        ep: 1,
        etp: 1,
        moe_dispatcher: Default::default(),
        ep_comm_overlap: false,
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

pub(crate) fn dims() -> LayerDims {
    LayerDims {
        micro_batch: 1,
        seq_len: 2048,
        hidden: 12288,
        heads: 96,
        kv_heads: 96,
        head_dim: 128,
        ffn_hidden: 49152,
        act_bytes: 2.0,
        gather_bytes: 2.0,
        layer_params: 1.0e9 / 8.0,
        device_params: 1.0e9,
        grad_bytes: 2.0,
        weight_bytes: 2.0,
        embedding_params: 51200.0 * 12288.0 / 8.0,
        tied_embeddings: true,
        moe: None,
    }
}
