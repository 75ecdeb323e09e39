//! Tests of the training model against the papers' formulas and tables.

use super::*;
use crate::testsupport::a100_system;
use perfcast_core::workload::{FfnAct, ModelSpec};

fn gpt(l: u64, h: u64, a: u64) -> ModelSpec {
    ModelSpec {
        name: String::new(),
        layers: l,
        hidden: h,
        heads: a,
        kv_heads: None,
        head_dim: None,
        ffn_hidden: 4 * h,
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

fn training(m: ModelSpec, devices: u32) -> Training {
    let r = Registry::with_builtins().unwrap();
    Training::new(m, a100_system(devices), &r).unwrap()
}

fn plan(tp: u32, pp: u32, dp: u32, mb: u32, gb: u32, recompute: &str) -> TrainingPlan {
    TrainingPlan {
        tp,
        pp,
        dp,
        micro_batch: mb,
        global_batch: gb,
        recompute: recompute.into(),
        attention: perfcast_core::AttentionKind::Plain,
        ..TrainingPlan::default()
    }
}

#[test]
fn gpt3_175b_smoke() {
    let t = training(gpt(96, 12288, 96), 1024);
    let r = t.evaluate(&plan(8, 16, 8, 1, 1536, "full")).unwrap();
    println!("{}", r.to_table());
    assert!(r.iteration_time.0 > 0.0);
    assert!((r.breakdown.total().0 / r.iteration_time.0 - 1.0).abs() < 1e-9);
}
