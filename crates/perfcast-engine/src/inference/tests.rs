//! Tests of the inference model on A100-like and H100-like systems: the testkit's
//! flat-efficiency GPU fixture on the built-in `sram`, `hbm`, `nvlink` and `infiniband`
//! plugins (`perfcast_testkit::flat`).

use super::*;
use perfcast_core::TimeBound;

use perfcast_core::hardware::{ComputeUnit, Engine, MemoryHierarchy};
use perfcast_core::{AttentionKind, ComputeOp, DType, FlopRate, Seconds};
use perfcast_testkit::flat::{a100, a100_launch, h100};
use perfcast_testkit::llama2;
use std::sync::Arc;

fn engine(size: u32, sys: System) -> Inference {
    Inference::new(llama2(size), sys, InferenceOptions::default()).unwrap()
}

/// Options with every serving-stack overhead off and a pure roofline.
fn lean() -> InferenceOptions {
    InferenceOptions {
        host_launch_us: 0.0,
        graph_launch_us: 0.0,
        collective_overhead_us: 0.0,
        step_overhead_us: 0.0,
        compute_memory_overlap: 1.0,
        ..InferenceOptions::default()
    }
}

fn plan(tp: u32, batch: u32, input: u32, output: u32) -> InferencePlan {
    InferencePlan {
        tp,
        ..InferencePlan::new(batch, input, output)
    }
}

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs()
}

/// KV cache per token = 2 x layers x kv_heads x head_dim x bytes / TP (seed digest §2.9:
/// Llama-2 7B 0.52 MB, 70B 0.33 MB at fp16); KV heads replicated when fewer than TP.
#[test]
fn kv_bytes_per_token_table() {
    // (model, tp, kv dtype, bytes per token per device)
    let table = [
        (7, 1, DType::Fp16, 524_288.0),
        (13, 1, DType::Fp16, 819_200.0),
        (70, 1, DType::Fp16, 327_680.0),
        (70, 8, DType::Fp16, 40_960.0),
        (70, 8, DType::Fp8, 20_480.0),
        // 8 KV heads over TP 16: each device keeps one (replicated) head.
        (70, 16, DType::Fp16, 40_960.0),
        (7, 4, DType::Int8, 65_536.0),
    ];
    for (size, tp, kv, want) in table {
        let inf = engine(size, h100(16));
        let mut p = plan(tp, 1, 128, 128);
        p.kv_dtype = kv;
        p.weight_dtype = DType::Fp16;
        p.activation_dtype = DType::Fp16;
        let r = inf.evaluate(&p).unwrap();
        assert_eq!(r.memory.kv_per_token.0, want, "{size}B tp{tp} {kv}");
        assert!(close(r.memory.kv_cache.0, want * 256.0, 1e-12));
    }
    assert!(close(524_288.0 / 1e6, 0.52, 0.01) && close(327_680.0 / 1e6, 0.33, 0.01));
}

/// Batch-1 decode streams every weight once per step: TPOT is never below weights / peak
/// bandwidth, and without overheads it is weights / achievable bandwidth within a few percent.
#[test]
fn weight_streaming_lower_bound() {
    // (model, tp)
    for (size, tp) in [(7, 1), (13, 2), (70, 4), (70, 8)] {
        let sys = a100_launch(8, 0.0);
        let peak_bw = sys.memory.device().unwrap().bandwidth().0;
        let eff_bw = sys.memory.device().unwrap().effective_bandwidth().0;
        let inf = Inference::new(llama2(size), sys, lean()).unwrap();
        let mut p = plan(tp, 1, 128, 64);
        p.weight_dtype = DType::Fp16;
        p.activation_dtype = DType::Fp16;
        p.kv_dtype = DType::Fp16;
        let r = inf.evaluate(&p).unwrap();
        let w = r.memory.weights.0;
        assert!(r.tpot.0 >= w / peak_bw, "{size}B tp{tp}");
        assert!(
            r.decode_bandwidth_utilization > 0.75 && r.decode_bandwidth_utilization <= 0.9 + 1e-9,
            "{size}B tp{tp}: {}",
            r.decode_bandwidth_utilization
        );
        let stream = w / eff_bw;
        assert!(
            close(r.tpot.0, stream, 0.12),
            "{size}B tp{tp}: tpot {} vs streaming {}",
            r.tpot.0,
            stream
        );
    }
}

/// Decode GEMMs move their weights once per step: intensity ~ batch FLOP/B at 16 bits, far
/// below the A100 ridge (~136 FLOP/B achievable), so they are memory-bound.
#[test]
fn decode_gemm_intensity_is_batch() {
    for batch in [1u32, 4, 16] {
        let inf = engine(7, a100(1));
        let mut p = plan(1, batch, 512, 32);
        p.weight_dtype = DType::Fp16;
        p.activation_dtype = DType::Fp16;
        let pts = inf.gemm_roofline(&p).unwrap();
        for g in pts
            .iter()
            .filter(|g| g.phase == Phase::Decode && g.name != "attention")
        {
            assert!(
                close(g.intensity, batch as f64, 0.15),
                "batch {batch} {}: {}",
                g.name,
                g.intensity
            );
            assert!(g.intensity < g.ridge, "{}", g.name);
            assert!(matches!(g.bound, TimeBound::Memory(_)), "{}", g.name);
        }
        let share: f64 = pts
            .iter()
            .filter(|g| g.phase == Phase::Decode)
            .map(|g| g.share_of_phase_time)
            .sum();
        assert!(share > 0.5 && share <= 1.0 + 1e-9, "{share}");
    }
}

/// A long prompt's prefill is compute-bound: TTFT ~ FLOPs / (peak x efficiency), and its
/// FLOPs are 2 x matmul weights x tokens plus the causal attention term (schema FLOP rule).
#[test]
fn compute_bound_prefill_ttft() {
    let m = llama2(7);
    let (b, s) = (4u64, 2048u64);
    let inf = Inference::new(m.clone(), a100_launch(1, 0.0), lean()).unwrap();
    let mut p = plan(1, b as u32, s as u32, 1);
    p.weight_dtype = DType::Fp16;
    p.activation_dtype = DType::Fp16;
    let r = inf.evaluate(&p).unwrap();
    let tokens = (b * s) as f64;
    let layer_w = (m.attention_weights() + m.mlp_weights()) as f64;
    let attn = 4.0 * b as f64 * (s * s) as f64 * m.hidden as f64 / 2.0;
    let want = m.layers as f64 * (2.0 * tokens * layer_w + attn)
        + 2.0 * b as f64 * (m.vocab * m.hidden) as f64;
    assert!(
        close(r.prefill.flops, want, 0.01),
        "{} vs {want}",
        r.prefill.flops
    );
    let ideal = want / (312e12 * 0.8);
    assert!(close(r.ttft.0, ideal, 0.08), "{} vs {ideal}", r.ttft.0);
    assert!(close(r.prefill_mfu, 0.8, 0.08), "{}", r.prefill_mfu);
    assert_eq!(r.decode.steps, 0);
    assert_eq!(r.tpot.0, 0.0);
}

/// The segment sum of decode attention equals the step-by-step sum.
#[test]
fn decode_sum_matches_token_by_token() {
    for (size, batch, input, n, reread) in [(7, 8, 100, 300, 0.5), (70, 32, 2000, 127, 1.0)] {
        let options = InferenceOptions {
            decode_kv_group_reread: reread,
            ..InferenceOptions::default()
        };
        let inf = Inference::new(llama2(size), h100(8), options).unwrap();
        let p = plan(8, batch, input, n as u32 + 1);
        let sh = inf.shard(&p).unwrap();
        let pass = Pass {
            tokens: batch as u64,
            logits: batch as u64,
            eager: true,
        };
        let seg = inf
            .decode_attention_sum(&sh, pass, batch as u64, input as u64, n)
            .unwrap();
        let mut exact = Acc::default();
        for j in 1..=n {
            let a = inf
                .attention(&sh, pass, batch as u64, 1, input as u64 + j)
                .unwrap();
            exact.add_scaled(&a, 1.0);
        }
        assert!(
            close(seg.total(), exact.total(), 1e-3),
            "{} vs {}",
            seg.total(),
            exact.total()
        );
        assert!(close(seg.bytes, exact.bytes, 1e-9));
    }
}

/// Bad inputs: an error naming the key and the rule, never a panic.
#[test]
fn a_request_may_reach_max_context_beyond_the_training_length() {
    let m = ModelSpec {
        max_context: Some(8192),
        ..llama2(7)
    };
    let inf = Inference::new(m, a100(8), InferenceOptions::default()).unwrap();
    let r = inf.evaluate(&plan(1, 1, 6000, 100)).unwrap();
    assert!(r.ttft.0 > 0.0);
}

#[test]
fn bad_inputs_name_the_key() {
    let mut gqa = llama2(7);
    gqa.heads = 12;
    gqa.kv_heads = Some(4);
    gqa.hidden = 1536;
    gqa.ffn_hidden = 4608;
    // (model, system, plan edit, key expected in the message)
    type Edit = fn(&mut InferencePlan);
    let cases: Vec<(ModelSpec, System, Edit, &str)> = vec![
        (llama2(7), a100(8), |p| p.batch = 0, "inference.batch"),
        (
            llama2(7),
            a100(8),
            |p| p.input_len = 0,
            "inference.input_len",
        ),
        (
            llama2(7),
            a100(8),
            |p| p.output_len = 0,
            "inference.output_len",
        ),
        (llama2(7), a100(8), |p| p.replicas = 0, "inference.replicas"),
        (llama2(7), a100(8), |p| p.tp = 3, "model.heads"),
        (gqa.clone(), a100(8), |p| p.tp = 3, "model.kv_heads"),
        (gqa.clone(), a100(8), |p| p.tp = 6, "model.kv_heads"),
        (llama2(7), a100(8), |p| p.pp = 33, "model.layers"),
        (llama2(7), a100(8), |p| p.input_len = 4090, "model.seq_len"),
        (
            ModelSpec {
                max_context: Some(8192),
                ..llama2(7)
            },
            a100(8),
            |p| p.input_len = 8190,
            "model.max_context",
        ),
        (llama2(7), a100(2), |p| p.tp = 4, "devices"),
        (
            llama2(7),
            a100(8),
            |p| {
                p.weight_dtype = DType::Fp8;
                p.activation_dtype = DType::Fp8;
            },
            "inference.activation_dtype",
        ),
        (
            llama2(7),
            a100(8),
            |p| p.kv_dtype = DType::Fp8,
            "inference.kv_dtype",
        ),
        (
            llama2(7),
            h100(8),
            |p| {
                p.weight_dtype = DType::Fp4;
                p.activation_dtype = DType::Fp4;
            },
            "inference.activation_dtype",
        ),
        (
            llama2(7),
            h100(8),
            |p| p.weight_dtype = DType::Fp32,
            "inference.weight_dtype",
        ),
    ];
    for (i, (model, sys, edit, key)) in cases.into_iter().enumerate() {
        let inf = Inference::new(model, sys, InferenceOptions::default()).unwrap();
        let mut p = plan(1, 1, 128, 16);
        edit(&mut p);
        let e = inf.evaluate(&p).unwrap_err().to_string();
        assert!(e.contains(key), "case {i}: `{e}` lacks `{key}`");
        assert!(inf.max_batch(&p).is_err(), "case {i}");
        assert!(inf.gemm_roofline(&p).is_err(), "case {i}");
    }
    // Weight-only int4 on A100 is fine (bf16 engine, half-byte weights).
    let inf = engine(7, a100(1));
    let mut p = plan(1, 1, 128, 16);
    p.weight_dtype = DType::Int4;
    assert!(inf.evaluate(&p).is_ok());
    // Options and models out of range.
    let bad = InferenceOptions {
        compute_memory_overlap: 1.5,
        ..InferenceOptions::default()
    };
    let e = Inference::new(llama2(7), a100(1), bad)
        .unwrap_err()
        .to_string();
    assert!(e.contains("options.compute_memory_overlap"), "{e}");
    let nan = InferenceOptions {
        host_launch_us: f64::NAN,
        ..InferenceOptions::default()
    };
    assert!(Inference::new(llama2(7), a100(1), nan).is_err());
    // Expert parallelism and attention data parallelism: (model has experts, plan edit, what
    // the message says).
    let mut moe = llama2(7);
    moe.moe = Some(perfcast_core::workload::MoeSpec::new(8, 2, 1024));
    let cases: [(bool, Edit, &str); 6] = [
        (false, |p| p.ep = 2, "inference.ep"),
        (false, |p| p.attention_dp = true, "inference.attention_dp"),
        (true, |p| p.ep = 3, "must divide inference.tp"),
        (true, |p| p.ep = 0, "must be >= 1"),
        (
            true,
            |p| {
                p.ep = 2;
                p.attention_dp = true
            },
            "must equal inference.tp",
        ),
        (
            false,
            |p| p.expert_dtype = Some(DType::Fp4),
            "inference.expert_dtype",
        ),
    ];
    for (experts, edit, want) in cases {
        let m = if experts { moe.clone() } else { llama2(7) };
        let inf = Inference::new(m, a100(8), InferenceOptions::default()).unwrap();
        let mut p = plan(4, 1, 128, 16);
        edit(&mut p);
        let e = inf.evaluate(&p).unwrap_err().to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
    let mut wide = moe.clone();
    wide.moe = Some(perfcast_core::workload::MoeSpec::new(6, 2, 1024));
    let inf = Inference::new(wide, a100(8), InferenceOptions::default()).unwrap();
    let mut p = plan(4, 1, 128, 16);
    p.ep = 4;
    let e = inf.evaluate(&p).unwrap_err().to_string();
    assert!(e.contains("model.moe.experts = 6"), "{e}");
}

/// A model or KV cache that does not fit is reported with the sizes.
#[test]
fn memory_that_does_not_fit() {
    let inf = engine(70, a100(8));
    let p = plan(1, 1, 128, 128);
    let r = inf.evaluate(&p).unwrap();
    assert!(!r.memory.fits);
    assert!(r.memory.weights.gb() > 130.0, "{}", r.memory.weights.gb());
    assert!(close(
        r.memory.shortfall.0,
        r.memory.total.0 - r.memory.capacity.0,
        1e-12
    ));
    let e = inf.max_batch(&p).unwrap_err().to_string();
    assert!(
        e.contains("inference.batch") && e.contains("GB") && e.contains("weights"),
        "{e}"
    );
    // KV cache too large for the batch: fits at max_batch, not one above.
    let p8 = plan(8, 1, 2048, 2048);
    let max = inf.max_batch(&p8).unwrap();
    assert!(max > 1);
    let at = |b: u32| {
        inf.evaluate(&InferencePlan {
            batch: b,
            ..p8.clone()
        })
        .unwrap()
        .memory
    };
    assert!(at(max).fits);
    let over = at(max + 1);
    assert!(!over.fits && over.shortfall.0 > 0.0);
}

/// TP: batch-1 decode gets faster with TP while communication and fixed costs take a growing
/// share (seed digest §3.2: at TP 8 most of the step is not weight streaming); graph capture
/// removes host launch cost; replicas scale throughput, not latency; PP adds hand-offs.
#[test]
fn parallelism_and_overheads() {
    let inf = engine(70, a100(16));
    let mut tpot = f64::MAX;
    let mut fixed_share = 0.0;
    for tp in [2, 4, 8] {
        let r = inf.evaluate(&plan(tp, 1, 200, 200)).unwrap();
        assert!(r.tpot.0 < tpot, "tp{tp}");
        let d = &r.decode;
        let share = (d.communication.0 + d.overheads.0) / d.total.0;
        assert!(share > fixed_share, "tp{tp}: {share}");
        tpot = r.tpot.0;
        fixed_share = share;
    }
    let r8 = inf.evaluate(&plan(8, 1, 200, 200)).unwrap();
    let stream = r8.memory.weights.0 / inf.system().memory.device().unwrap().bandwidth().0;
    assert!(stream / r8.tpot.0 < 0.5, "{}", stream / r8.tpot.0);
    assert!(r8.decode_bandwidth_utilization < 0.5);

    let mut g = plan(8, 1, 200, 200);
    g.graph_capture = true;
    let rg = inf.evaluate(&g).unwrap();
    assert!(rg.tpot.0 < r8.tpot.0 && rg.ttft == r8.ttft);

    let mut rep = plan(8, 4, 200, 200);
    let one = inf.evaluate(&rep).unwrap();
    rep.replicas = 2;
    let two = inf.evaluate(&rep).unwrap();
    assert_eq!(two.latency, one.latency);
    assert!(close(two.tokens_per_s, 2.0 * one.tokens_per_s, 1e-12));
    assert_eq!(two.tokens_per_s_per_gpu, one.tokens_per_s_per_gpu);
    assert_eq!(two.gpus, 16);

    let mut pp = plan(4, 4, 200, 200);
    let flat = inf.evaluate(&pp).unwrap();
    pp.pp = 2;
    let piped = inf.evaluate(&pp).unwrap();
    assert!(piped.latency.0 > flat.latency.0);
    assert!(piped.memory.weights.0 < 0.6 * flat.memory.weights.0);
    assert!(close(
        piped.tokens_per_s_per_gpu,
        flat.tokens_per_s_per_gpu * flat.latency.0 / piped.latency.0 / 2.0,
        1e-9
    ));
}

/// Precision: int4 weight-only halves-of-bytes weights at bf16 peak; fp8 doubles the H100
/// peak; plain attention moves the score matrix.
#[test]
fn precision_and_attention_kind() {
    let inf = engine(7, a100(1));
    let bf16 = inf.evaluate(&plan(1, 1, 128, 64)).unwrap();
    let mut p4 = plan(1, 1, 128, 64);
    p4.weight_dtype = DType::Int4;
    let int4 = inf.evaluate(&p4).unwrap();
    assert!(
        int4.tpot.0 < 0.6 * bf16.tpot.0,
        "{} vs {}",
        int4.tpot.0,
        bf16.tpot.0
    );
    assert!(int4.memory.weights.0 < 0.35 * bf16.memory.weights.0);
    let pts = inf.gemm_roofline(&p4).unwrap();
    let qkv = pts.iter().find(|g| g.name == "qkv_proj").unwrap();
    assert_eq!((qkv.dtype, qkv.weight_dtype), (DType::Bf16, DType::Int4));

    let h = engine(70, h100(8));
    let mut f16 = plan(8, 8, 2048, 1);
    let r16 = h.evaluate(&f16).unwrap();
    f16.weight_dtype = DType::Fp8;
    f16.activation_dtype = DType::Fp8;
    let r8 = h.evaluate(&f16).unwrap();
    assert!(r8.prefill.gemm.0 < 0.6 * r16.prefill.gemm.0);

    let mut plain = plan(1, 1, 2048, 1);
    plain.attention = AttentionKind::Plain;
    let rp = inf.evaluate(&plain).unwrap();
    let rf = inf.evaluate(&plan(1, 1, 2048, 1)).unwrap();
    assert!(rp.prefill.attention.0 > rf.prefill.attention.0);
    assert!(rp.memory.workspace.0 > rf.memory.workspace.0);
}

/// Reports: every number finite, table and CSV carry the metrics, plans parse strictly.
#[test]
fn report_rendering_and_plan_parsing() {
    let inf = engine(13, a100(8));
    let r = inf.evaluate(&plan(2, 4, 512, 64)).unwrap();
    let json = serde_json::to_value(&r).unwrap();
    fn finite(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Number(n) => n.as_f64().is_some_and(f64::is_finite),
            serde_json::Value::Array(a) => a.iter().all(finite),
            serde_json::Value::Object(o) => o.values().all(finite),
            _ => true,
        }
    }
    assert!(finite(&json));
    let sum = r.decode.gemm.0
        + r.decode.attention.0
        + r.decode.other_ops.0
        + r.decode.communication.0
        + r.decode.overheads.0;
    assert!(close(sum, r.decode.total.0, 1e-12));
    assert!(close(r.latency.0, r.ttft.0 + r.tpot.0 * 63.0, 1e-12));
    let pts = inf.gemm_roofline(&plan(2, 4, 512, 64)).unwrap();
    assert_eq!(pts.len(), 12);
    assert!(pts.iter().any(|p| p.name == "mlp_down"));

    let p: InferencePlan =
        serde_json::from_str(r#"{"tp": 2, "batch": 4, "input_len": 512, "output_len": 64}"#)
            .unwrap();
    assert_eq!(p, plan(2, 4, 512, 64));
    let e = serde_json::from_str::<InferencePlan>(
        r#"{"batch": 1, "input_len": 1, "output_len": 1, "bacth": 2}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("bacth"), "{e}");
    let o: InferenceOptions = serde_json::from_str("{}").unwrap();
    assert_eq!(o, InferenceOptions::default());
}

/// A sweep over plans and formats: every evaluation is an error or a finite report, never a
/// panic; a report's phases add up.
#[test]
fn sweep_never_panics_and_stays_finite() {
    let dtypes = [
        DType::Bf16,
        DType::Fp8,
        DType::Int8,
        DType::Int4,
        DType::Fp4,
    ];
    let mut ok = 0;
    for size in [7, 70] {
        for sys in [a100(16), h100(16)] {
            let inf = engine(size, sys);
            for (tp, pp) in [(1, 1), (2, 2), (8, 1), (16, 1), (4, 4)] {
                for &(b, s, o) in &[(1, 1, 1), (3, 17, 5), (64, 2048, 128), (1, 4000, 96)] {
                    for w in dtypes {
                        for kind in [AttentionKind::Flash, AttentionKind::Plain] {
                            let p = InferencePlan {
                                tp,
                                pp,
                                weight_dtype: w,
                                kv_dtype: if w == DType::Int4 { DType::Bf16 } else { w },
                                activation_dtype: if w == DType::Int4 { DType::Bf16 } else { w },
                                attention: kind,
                                graph_capture: b > 1,
                                ..InferencePlan::new(b, s, o)
                            };
                            match inf.evaluate(&p) {
                                Ok(r) => {
                                    ok += 1;
                                    assert!(r.latency.0.is_finite() && r.latency.0 > 0.0);
                                    assert!(close(r.latency.0, r.ttft.0 + r.decode.total.0, 1e-12));
                                    assert!(r.tokens_per_s_per_gpu.is_finite());
                                    assert!(inf.gemm_roofline(&p).is_ok());
                                }
                                Err(e) => assert!(e.to_string().contains("inference."), "{e}"),
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(ok > 200, "{ok}");
}

/// A compute unit with its own timing model that reports only a total time per op, 10 µs,
/// at a matrix and vector peak of `.0` TFLOP/s.
struct Table(f64);

impl ComputeUnit for Table {
    fn kind(&self) -> &str {
        "table"
    }
    fn peak(&self, _: Engine, _: DType) -> Option<FlopRate> {
        Some(FlopRate::from_tflops(self.0))
    }
    fn op_time(
        &self,
        op: &ComputeOp,
        _: &MemoryHierarchy,
    ) -> Result<perfcast_core::OpTime, ModelError> {
        Ok(perfcast_core::OpTime {
            time: Seconds::from_micros(10.0),
            compute: Seconds::ZERO,
            memory: Seconds::ZERO,
            overhead: Seconds::ZERO,
            bound: TimeBound::Compute,
            flops: op.flops(),
            device_bytes: op.min_bytes(),
        })
    }
}

/// Llama 2 7B on one A100 whose compute unit is `unit`, without host or step overheads.
fn on_unit(unit: Arc<dyn ComputeUnit>) -> Inference {
    let mut sys = a100(1);
    sys.compute = unit;
    let options = InferenceOptions {
        host_launch_us: 0.0,
        step_overhead_us: 0.0,
        ..InferenceOptions::default()
    };
    Inference::new(llama2(7), sys, options).unwrap()
}

/// A compute unit that reports only a total time per op: the engine uses that total (no
/// compute/memory split to adjust).
#[test]
fn plugin_reporting_only_totals() {
    // A peak high enough that 10 µs per op is physically possible (prefill MFU <= 1).
    let inf = on_unit(Arc::new(Table(10_000.0)));
    let r = inf.evaluate(&plan(1, 1, 64, 1)).unwrap();
    // 32 layers x (8 ops + attention) + 4 edge ops, 10 µs each.
    assert!(
        close(r.ttft.0, (32.0 * 9.0 + 4.0) * 10e-6, 1e-9),
        "{}",
        r.ttft.0
    );
}

/// A compute unit whose own model adds time beyond its compute and memory parts (here, as
/// much again as their maximum): `infer` keeps that total as `predict` does, rather than
/// rebuilding the op's time from the parts alone.
#[test]
fn a_plugin_total_above_its_parts_is_kept() {
    struct Slow(Arc<dyn ComputeUnit>);
    impl ComputeUnit for Slow {
        fn kind(&self) -> &str {
            "slow"
        }
        fn peak(&self, e: Engine, d: DType) -> Option<FlopRate> {
            self.0.peak(e, d)
        }
        fn efficiency(&self, op: &ComputeOp) -> f64 {
            self.0.efficiency(op)
        }
        fn launch_overhead(&self) -> Seconds {
            self.0.launch_overhead()
        }
        fn clock_ratio(&self) -> f64 {
            self.0.clock_ratio()
        }
        fn gemm_tile(&self) -> u64 {
            self.0.gemm_tile()
        }
        fn op_time(
            &self,
            op: &ComputeOp,
            memory: &MemoryHierarchy,
        ) -> Result<perfcast_core::OpTime, ModelError> {
            let mut t = self.0.op_time(op, memory)?;
            t.time += t.compute.max(t.memory);
            Ok(t)
        }
    }
    assert!(InferenceOptions::default().compute_memory_overlap < 1.0);
    let a100_unit = a100(1).compute;
    let plain = on_unit(a100_unit.clone())
        .evaluate(&plan(1, 1, 64, 1))
        .unwrap();
    let slow = on_unit(Arc::new(Slow(a100_unit)))
        .evaluate(&plan(1, 1, 64, 1))
        .unwrap();
    // Every op's busy time goes from max + 0.26 min of its parts (the engine's overlap) to
    // the plugin's 2 max: at least 1.5x (no collectives on one device, no host time).
    for (what, a, b) in [
        ("ttft", plain.ttft.0, slow.ttft.0),
        ("decode", plain.decode.total.0, slow.decode.total.0),
    ] {
        assert!(b >= 1.5 * a, "{what}: {b} against {a}");
    }
}

/// A compute unit whose ops finish faster than its own peak allows gives an error naming the
/// law, not a prefill MFU above 1 (in-process units are not behind the foreign adapter's
/// per-op checks).
#[test]
fn a_prefill_faster_than_the_peak_is_refused() {
    let e = on_unit(Arc::new(Table(100.0)))
        .evaluate(&plan(1, 1, 64, 1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("prefill MFU = 2.8") && e.contains("breaks a physical law"),
        "{e}"
    );
}
