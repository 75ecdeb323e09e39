//! Test fixtures for plugin authors and perfcast's own tests (feature `fixtures`): the models
//! the papers use as `ModelSpec`s, and GPT-3 175B's plan and layer as the parallel strategies
//! see them. A plugin crate tests against them with
//! `perfcast-core = { version = "...", features = ["fixtures"] }` among its dev-dependencies.

use crate::parallel::{LayerDims, PlanShape};
use crate::workload::{AttentionLayout, FfnAct, MlaSpec, ModelSpec, MoeSpec};

/// A GPT-style model of `l` layers, hidden size `h` and `a` heads as Megatron-LM builds them
/// (Narayanan et al. 2021, Table 1): GeLU MLP of `4h`, vocabulary 51,200, sequence 2,048,
/// tied input and output embeddings.
pub fn gpt(l: u64, h: u64, a: u64) -> ModelSpec {
    ModelSpec {
        tied_embeddings: true,
        ..ModelSpec::dense(l, h, a, 4 * h, FfnAct::Gelu, 51200, 2048)
    }
}

/// Llama-2 (Touvron et al. 2023, Table 1 and the released configs): 7B, 13B, 70B (GQA, 8 KV
/// heads); any other `size` is the 70B.
pub fn llama2(size: u32) -> ModelSpec {
    let (layers, hidden, heads, kv, ffn) = match size {
        7 => (32, 4096, 32, 32, 11008),
        13 => (40, 5120, 40, 40, 13824),
        _ => (80, 8192, 64, 8, 28672),
    };
    ModelSpec {
        name: format!("llama2-{size}b"),
        kv_heads: Some(kv),
        ..ModelSpec::dense(layers, hidden, heads, ffn, FfnAct::Swiglu, 32000, 4096)
    }
}

/// DeepSeek-V3 / R1 (DeepSeek-AI 2024, Table and config.json): 61 layers of which the first 3
/// dense, 256 routed experts of 2048 with 8 per token and one shared, MLA with a 512-rank
/// latent and a 64-wide rotary key.
pub fn deepseek_v3() -> ModelSpec {
    let mut m = ModelSpec::dense(61, 7168, 128, 18432, FfnAct::Swiglu, 129280, 4096);
    m.max_context = Some(163840);
    m.attention = Some(AttentionLayout::Mla);
    m.mla = Some(MlaSpec {
        q_lora_rank: 1536,
        kv_lora_rank: 512,
        qk_nope_head_dim: 128,
        qk_rope_head_dim: 64,
        v_head_dim: 128,
    });
    let mut moe = MoeSpec::new(256, 8, 2048);
    moe.shared_experts = 1;
    moe.dense_layers = 3;
    m.moe = Some(moe);
    m
}

/// GPT-3 175B's plan of Narayanan et al. 2021 (Table 1): TP 8, PP 16, DP 8, micro-batch 1,
/// global batch 1,536, gradient reduction and parameter gathers overlapped.
pub fn gpt3_plan() -> PlanShape {
    PlanShape {
        tp: 8,
        pp: 16,
        dp: 8,
        global_batch: 1536,
        overlap_grad_reduce: true,
        overlap_param_gather: true,
        ..PlanShape::default()
    }
}

/// One GPT-3 175B layer as the strategies see it under [`gpt3_plan`] (bf16; the parameter
/// counts are round figures: 1e9 per device, an eighth of it per layer).
pub fn gpt3_layer_dims() -> LayerDims {
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
