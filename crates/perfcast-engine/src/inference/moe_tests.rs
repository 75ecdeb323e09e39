//! Mixture-of-experts and latent-attention inference: KV bytes per token of MLA, the experts a
//! decode step reads, attention data parallelism, and the step-cost fast path agreeing with
//! `evaluate` on an MoE model.

use super::*;
use perfcast_core::op::RoutedExperts;
use perfcast_core::workload::{FfnAct, MoeSpec};
use perfcast_core::{ComputeOp, ComputeUnit, DType, ModelError};
use perfcast_testkit::deepseek_v3;
use perfcast_testkit::flat::h100;

/// Mixtral-8x7B: 32 layers, 8 experts of 14336, 2 per token, GQA 32/8.
fn mixtral() -> ModelSpec {
    let mut m = ModelSpec::dense(32, 4096, 32, 14336, FfnAct::Swiglu, 32000, 32768);
    m.kv_heads = Some(8);
    m.moe = Some(MoeSpec::new(8, 2, 14336));
    m
}

fn plan(tp: u32, ep: u32, dp: bool, batch: u32) -> InferencePlan {
    InferencePlan {
        tp,
        ep,
        attention_dp: dp,
        weight_dtype: DType::Fp8,
        activation_dtype: DType::Fp8,
        ..InferencePlan::new(batch, 1024, 64)
    }
}

/// MLA caches `(kv_lora_rank + rope)` elements per token and layer, the same on every rank:
/// DeepSeek-V3 in bf16 `(512 + 64) x 61 x 2` bytes, at any TP.
#[test]
fn mla_kv_bytes_per_token() {
    let inf = Inference::new(deepseek_v3(), h100(8), InferenceOptions::default()).unwrap();
    for tp in [1, 8] {
        let p = InferencePlan {
            kv_dtype: DType::Bf16,
            ..plan(tp, tp, false, 1)
        };
        let sh = inf.shard(&p).unwrap();
        assert_eq!(sh.kv_bytes_per_token(), (576 * 61 * 2) as f64, "tp {tp}");
    }
}

/// A decode step reads the weights of the experts its tokens touch: a batch of 1 reads 8 of
/// each rank's 32 (one per routed copy at most), so its expert bytes are far below a batch
/// of 256's, which touches nearly all; the prefill of 1,024-token prompts reads every one.
#[test]
fn decode_reads_the_touched_experts() {
    let inf = Inference::new(deepseek_v3(), h100(8), InferenceOptions::default()).unwrap();
    let sh = inf.shard(&plan(8, 8, true, 1)).unwrap();
    let moe = sh.moe.unwrap();
    assert_eq!((moe.local, moe.etp), (32, 1));
    let expert_bytes = |tokens: u64| -> f64 {
        sh.moe_ops(&moe, tokens, tokens.div_ceil(sh.dp), true)
            .iter()
            .filter_map(|(class, op)| match (class, op) {
                (
                    super::shard::OpClass::Gemm(GemmName::ExpertUp | GemmName::ExpertDown),
                    ComputeOp::Gemm(g),
                ) => Some((g.batch * g.n * g.k) as f64 * g.b.bytes()),
                _ => None,
            })
            .sum()
    };
    let one = expert_bytes(1);
    let many = expert_bytes(256);
    let all = (32 * 3 * 2048 * 7168) as f64;
    assert!(one <= 2.0 * all / 32.0 + 1.0, "{one} vs {all}");
    assert!(many > 0.9 * all && many <= all + 1.0, "{many} vs {all}");
    let r1 = inf.evaluate(&plan(8, 8, true, 8)).unwrap();
    let r256 = inf.evaluate(&plan(8, 8, true, 256)).unwrap();
    // Per output token, a large batch is far cheaper (weights amortised).
    assert!(r256.tokens_per_s > 8.0 * r1.tokens_per_s, "{r1:?} {r256:?}");
}

/// Attention data parallelism: each rank runs attention on its own sequences with the whole
/// attention weights and caches only its own KV, so an instance holds `tp` times the KV
/// tokens of tensor-parallel attention of a latent cache (MLA is replicated on TP ranks);
/// its MoE layers exchange the routed copies by all-to-all.
#[test]
fn attention_data_parallelism() {
    let inf = Inference::new(deepseek_v3(), h100(8), InferenceOptions::default()).unwrap();
    let tp = inf
        .serving_memory(&plan(8, 8, false, 1), 8192, 256)
        .unwrap();
    let dp = inf.serving_memory(&plan(8, 8, true, 1), 8192, 256).unwrap();
    assert!((tp.kv_per_token.0 / dp.kv_per_token.0 - 8.0).abs() < 1e-9);
    assert!(dp.weights.0 > tp.weights.0, "whole attention on every rank");
    let r_tp = inf.evaluate(&plan(8, 8, false, 64)).unwrap();
    let r_dp = inf.evaluate(&plan(8, 8, true, 64)).unwrap();
    assert!(r_dp.decode.communication.0 > 0.0 && r_tp.decode.communication.0 > 0.0);
    // 64 sequences: 8 per rank under DP; every rank attends over all 64 under TP.
    assert!(r_dp.decode.attention.0 < r_tp.decode.attention.0);
}

/// Attention tensor parallelism inside attention data parallelism (`attention_tp`): one
/// rank per group is plain attention DP, all `tp` ranks in one group is plain TP attention
/// (the same step times and memory); two per group on eight ranks sits between (four groups:
/// the KV of an instance's tokens on two ranks each, weights split two ways, an all-reduce
/// among the two). Bad values are refused with the key named.
#[test]
fn attention_tensor_parallelism_inside_data_parallelism() {
    let inf = Inference::new(deepseek_v3(), h100(8), InferenceOptions::default()).unwrap();
    let with = |atp: Option<u32>, dp: bool| InferencePlan {
        attention_tp: atp,
        ..plan(8, 8, dp, 64)
    };
    let same = |a: &InferencePlan, b: &InferencePlan| {
        let (ra, rb) = (inf.evaluate(a).unwrap(), inf.evaluate(b).unwrap());
        assert_eq!(ra.ttft.0, rb.ttft.0);
        assert_eq!(ra.tpot.0, rb.tpot.0);
        let (ma, mb) = (
            inf.serving_memory(a, 8192, 256).unwrap(),
            inf.serving_memory(b, 8192, 256).unwrap(),
        );
        assert_eq!((ma.kv_per_token, ma.weights), (mb.kv_per_token, mb.weights));
    };
    same(&with(Some(1), true), &with(None, true));
    same(&with(Some(8), true), &with(None, false));
    let p2 = with(Some(2), true);
    assert_eq!(p2.attention_ranks(), 4);
    let kv = |p: &InferencePlan| inf.serving_memory(p, 8192, 256).unwrap().kv_per_token.0;
    let (kv1, kv2, kv8) = (kv(&with(None, true)), kv(&p2), kv(&with(None, false)));
    assert!((kv2 / kv1 - 2.0).abs() < 1e-9 && (kv8 / kv2 - 4.0).abs() < 1e-9);
    let sh = inf.shard(&p2).unwrap();
    assert_eq!((sh.dp, sh.attn_tp), (4, 2));
    let r2 = inf.evaluate(&p2).unwrap();
    assert!(r2.tpot.0.is_finite() && r2.decode.communication.0 > 0.0);
    // (attention_tp, attention_dp, what the error says)
    for (atp, dp, want) in [
        (2, false, "set inference.attention_dp = true"),
        (3, true, "divide inference.tp = 8"),
        (0, true, "at least 1"),
    ] {
        let e = inf.evaluate(&with(Some(atp), dp)).unwrap_err().to_string();
        assert!(
            e.contains("inference.attention_tp") && e.contains(want),
            "{e}"
        );
    }
}

/// Mixtral with its experts split over TP (ep 1) or spread (ep 8): both evaluate, finite,
/// and a step of the fast path equals `step_time` and `evaluate`'s decode step.
#[test]
fn step_costs_agree_on_an_moe_model() {
    let inf = Inference::new(mixtral(), h100(8), InferenceOptions::default()).unwrap();
    for (ep, dp) in [(1, false), (8, false), (8, true)] {
        let p = InferencePlan {
            batch: 32,
            ..plan(8, ep, dp, 32)
        };
        let r = inf.evaluate(&p).unwrap();
        assert!(r.tpot.0 > 0.0 && r.tpot.0.is_finite(), "{ep} {dp}");
        let mut costs = inf.step_costs(&p).unwrap();
        let ctx = 32 * (1024 + 32);
        let b = StepBatch {
            decodes: 32,
            decode_context: ctx,
            ..StepBatch::default()
        };
        let fast = costs.time(&b).unwrap();
        let slow = inf.step_time(&p, &b).unwrap();
        assert_eq!(fast, slow, "{ep} {dp}");
        // Within the decode-sum's segment approximation of `evaluate`'s mean step.
        let mean = r.tpot.0;
        assert!(
            (fast / mean - 1.0).abs() < 0.05,
            "{ep} {dp}: {fast} vs {mean}"
        );
    }
}

/// A compute unit with a fixed measured time for every MoE layer's routed experts and every
/// attention core (or none), recording the experts it was asked about.
struct MeasuredExperts {
    inner: std::sync::Arc<dyn ComputeUnit>,
    time: Option<f64>,
    attention: Option<f64>,
    asked: std::sync::Mutex<Vec<RoutedExperts>>,
}

impl ComputeUnit for MeasuredExperts {
    fn kind(&self) -> &str {
        self.inner.kind()
    }
    fn peak(&self, engine: perfcast_core::Engine, dtype: DType) -> Option<perfcast_core::FlopRate> {
        self.inner.peak(engine, dtype)
    }
    fn efficiency(&self, op: &ComputeOp) -> f64 {
        self.inner.efficiency(op)
    }
    fn launch_overhead(&self) -> perfcast_core::Seconds {
        self.inner.launch_overhead()
    }
    fn op_time(
        &self,
        op: &ComputeOp,
        memory: &perfcast_core::MemoryHierarchy,
    ) -> Result<perfcast_core::OpTime, ModelError> {
        self.inner.op_time(op, memory)
    }
    fn routed_experts_time(
        &self,
        e: &RoutedExperts,
    ) -> Result<Option<perfcast_core::Seconds>, ModelError> {
        if let Ok(mut a) = self.asked.lock() {
            a.push(*e);
        }
        Ok(self.time.map(perfcast_core::Seconds))
    }
    fn inference_attention_time(
        &self,
        _a: &perfcast_core::Attention,
        _kv: DType,
        _memory: &perfcast_core::MemoryHierarchy,
    ) -> Result<Option<perfcast_core::Seconds>, ModelError> {
        Ok(self.attention.map(perfcast_core::Seconds))
    }
}

/// A compute unit that measures fused MoE blocks times each MoE layer's routed experts whole:
/// every millisecond it reports adds one per MoE layer and pass (58 of DeepSeek-V3's 61
/// layers), in prefill and in every decode step, where the grouped GEMMs it stands for no
/// longer count; it is asked with the tokens the expert-parallel group routes and the busiest
/// rank's load; `options.measured_moe = false` (TensorRT-LLM's 0.x engines) ignores it.
#[test]
fn measured_moe_blocks_replace_the_grouped_gemms() {
    let run = |time: Option<f64>, measured_moe: bool| {
        let mut system = h100(8);
        let unit = std::sync::Arc::new(MeasuredExperts {
            inner: system.compute.clone(),
            time,
            attention: None,
            asked: std::sync::Mutex::new(Vec::new()),
        });
        system.compute = unit.clone();
        let options = InferenceOptions {
            measured_moe,
            ..InferenceOptions::default()
        };
        let inf = Inference::new(deepseek_v3(), system, options).unwrap();
        let r = inf.evaluate(&plan(8, 8, true, 64)).unwrap();
        let asked = unit.asked.lock().unwrap().clone();
        (r, asked)
    };
    let (none, asked) = run(None, true);
    let (one, _) = run(Some(1e-3), true);
    let (two, _) = run(Some(2e-3), true);
    let (off, asked_off) = run(Some(1e-3), false);
    assert_eq!(off.decode, none.decode);
    assert_eq!(off.prefill, none.prefill);
    assert!(asked_off.is_empty());
    for (phase, a, b, c) in [
        ("prefill", &none.prefill, &one.prefill, &two.prefill),
        ("decode", &none.decode, &one.decode, &two.decode),
    ] {
        let per_pass = 58e-3 * a.steps as f64;
        let d = c.gemm.0 - b.gemm.0;
        assert!(
            (d / per_pass - 1.0).abs() < 1e-9,
            "{phase}: {d} vs {per_pass}"
        );
        // The grouped GEMMs' own time is gone: without the measured blocks the GEMMs take
        // less than the analytical pass, which times them.
        assert!(b.gemm.0 - per_pass < a.gemm.0, "{phase}");
    }
    // A decode step of 64 requests over 8 attention ranks: the group routes 64 tokens.
    let e = asked
        .iter()
        .find(|e| e.tokens == 64)
        .copied()
        .expect("a decode step asked");
    assert_eq!(
        (e.hidden, e.ffn, e.top_k, e.experts, e.tp, e.ep, e.gated),
        (7168, 2048, 8, 256, 1, 8, true)
    );
    assert_eq!((e.act, e.weight), (DType::Fp8, DType::Fp8));
    assert!(
        e.load_factor > 1.0 && e.load_factor < 2.0,
        "{}",
        e.load_factor
    );
}

/// A compute unit that measures the runtime's attention kernels times every multi-head or
/// grouped-query attention core whole (one per layer and pass, prefill and decode), unless
/// `options.measured_attention` is off; MLA's latent attention stays the analytical model's.
#[test]
fn measured_attention_times_the_cores() {
    let run = |model: ModelSpec, attention: Option<f64>, measured_attention: bool| {
        let mut system = h100(8);
        system.compute = std::sync::Arc::new(MeasuredExperts {
            inner: system.compute.clone(),
            time: None,
            attention,
            asked: std::sync::Mutex::new(Vec::new()),
        });
        let options = InferenceOptions {
            measured_attention,
            ..InferenceOptions::default()
        };
        let inf = Inference::new(model, system, options).unwrap();
        inf.evaluate(&plan(8, 8, false, 16)).unwrap()
    };
    let measured = run(mixtral(), Some(1e-3), true);
    // 32 layers, 1 ms each, per pass.
    assert!((measured.prefill.attention.0 - 32e-3).abs() < 1e-12);
    let steps = measured.decode.steps as f64;
    assert!((measured.decode.attention.0 - 32e-3 * steps).abs() < 1e-9);
    assert_eq!(
        run(mixtral(), Some(1e-3), false),
        run(mixtral(), None, true)
    );
    assert_eq!(
        run(deepseek_v3(), Some(1e-3), true).decode,
        run(deepseek_v3(), None, true).decode
    );
}
