//! The models the papers use, as `ModelSpec`s.

use perfcast_core::workload::{FfnAct, ModelSpec};

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
