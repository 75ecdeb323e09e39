//! Properties of the training and inference models over random models, plans and systems
//! (proptest; the systems are the built-in `gpu`, `sram`, `hbm`, `nvlink` and `infiniband`
//! plugins with random parameters):
//!
//! - evaluation never panics and every number of a report is finite (or it is an error);
//! - each stage's memory is the sum of its parts;
//! - step time never grows when a bandwidth (device memory, NVLink, the NIC) or the matrix
//!   peak grows;
//! - weak scaling inside one NVLink domain (twice the data-parallel degree and twice the
//!   global batch, the per-device plan shape fixed, pipeline of one stage): tokens/s never
//!   drops, since the only cost that grows is the ring all-reduce, by less than 2x.
//!
//! `PROPTEST_CASES` (default 48 here, to keep `cargo test` quick) sets the number of cases and
//! `PROPTEST_RNG_SEED` the seed (default fixed, so that `cargo test` is deterministic; set
//! another to explore). Known counterexample of the third property, left to fix: with TP
//! overlap and ZeRO-3 prefetch both hidden behind one layer's compute, the engine pools each
//! overlap window on its own (time.rs `pool`) and adds their exposed parts, so a faster matrix
//! engine can shrink both windows at once and lengthen the step by ~0.01% (e.g. a 1-layer model,
//! tp 4, dp 4, zero 3, tp_comm_overlap, twice the bf16 peak); `PROPTEST_CASES=1500` finds it.

use perfcast_core::workload::{FfnAct, ModelSpec};
use perfcast_core::{MemoryHierarchy, Registry, System};
use perfcast_engine::inference::{Inference, InferenceOptions, InferencePlan};
use perfcast_engine::training::{Training, TrainingPlan, TrainingReport};
use proptest::prelude::*;
use serde_json::json;
use std::sync::OnceLock;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| perfcast_builtins::registry().expect("built-in registry"))
}

/// Hardware parameters of one random system.
#[derive(Debug, Clone)]
struct Hw {
    bf16_tflops: f64,
    sm_count: u32,
    l2_mb: f64,
    l2_tbs: f64,
    hbm_gb: f64,
    hbm_tbs: f64,
    nvlink_gbs: f64,
    nic_gbps: f64,
}

fn hw() -> impl Strategy<Value = Hw> {
    (
        50.0..3000.0f64,
        16u32..200,
        8.0..128.0f64,
        2.0..20.0f64,
        16.0..256.0f64,
        0.5..10.0f64,
        100.0..2000.0f64,
        50.0..1000.0f64,
    )
        .prop_map(
            |(bf16_tflops, sm_count, l2_mb, l2_tbs, hbm_gb, hbm_tbs, nvlink_gbs, nic_gbps)| Hw {
                bf16_tflops,
                sm_count,
                l2_mb,
                l2_tbs,
                hbm_gb,
                hbm_tbs,
                nvlink_gbs,
                nic_gbps,
            },
        )
}

fn system(h: &Hw, devices: u32) -> System {
    let r = registry();
    let gpu = r
        .compute_unit(
            "gpu",
            &json!({"matrix_tflops": {"bf16": h.bf16_tflops, "fp16": h.bf16_tflops},
                    "vector_tflops": {"fp32": h.bf16_tflops / 16.0}, "sm_count": h.sm_count}),
        )
        .expect("gpu");
    let l2 = r
        .memory_tier(
            "sram",
            &json!({"capacity_mb": h.l2_mb, "bandwidth_tbs": h.l2_tbs}),
        )
        .expect("sram");
    let hbm = r
        .memory_tier(
            "hbm",
            &json!({"capacity_gb": h.hbm_gb, "bandwidth_tbs": h.hbm_tbs}),
        )
        .expect("hbm");
    let nvlink = r
        .interconnect(
            "nvlink",
            &json!({"bandwidth_gbs_bidir": h.nvlink_gbs, "domain_size": 8}),
        )
        .expect("nvlink");
    let nic = r
        .interconnect("infiniband", &json!({"bandwidth_gbps": h.nic_gbps}))
        .expect("infiniband");
    System {
        name: "random".into(),
        compute: gpu,
        memory: MemoryHierarchy::new(vec![l2, hbm]),
        network: vec![nvlink, nic],
        topology: None,
        devices,
    }
}

fn model() -> impl Strategy<Value = ModelSpec> {
    (
        1u64..24,
        prop::sample::select(vec![4u64, 8, 16]),
        prop::sample::select(vec![32u64, 64, 128]),
        prop::sample::select(vec![1u64, 2, 4]),
        prop::sample::select(vec![2u64, 4]),
        1000u64..60000,
        prop::sample::select(vec![128u64, 512, 2048]),
        any::<bool>(),
    )
        .prop_map(
            |(layers, heads, head_dim, kv_div, ffn_mult, vocab, seq_len, swiglu)| {
                let hidden = heads * head_dim;
                ModelSpec {
                    name: "random".into(),
                    kv_heads: Some((heads / kv_div).max(1)),
                    tied_embeddings: !swiglu,
                    ..ModelSpec::dense(
                        layers,
                        hidden,
                        heads,
                        hidden * ffn_mult,
                        if swiglu { FfnAct::Swiglu } else { FfnAct::Gelu },
                        vocab,
                        seq_len,
                    )
                }
            },
        )
}

/// A plan of degrees (tp, pp, dp) and its other choices; `mb` micro-batch, `k` micro-batches
/// per data-parallel rank.
fn plan() -> impl Strategy<Value = TrainingPlan> {
    (
        prop::sample::select(vec![1u32, 2, 4]),
        prop::sample::select(vec![1u32, 2, 4]),
        prop::sample::select(vec![1u32, 2, 4]),
        1u32..4,
        1u32..8,
        prop::sample::select(vec!["none", "selective", "full"]),
        0u8..4,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(tp, pp, dp, mb, k, recompute, zero, sp, tpo)| TrainingPlan {
                tp,
                pp,
                dp,
                micro_batch: mb,
                global_batch: dp * mb * k,
                recompute: recompute.into(),
                zero_stage: zero,
                sp,
                tp_comm_overlap: tpo,
                ..TrainingPlan::default()
            },
        )
}

/// Every number of a report is finite (the text renderings show them all).
fn finite(r: &TrainingReport) -> Result<(), TestCaseError> {
    for text in [
        perfcast_report::training::csv(r),
        perfcast_report::training::table(r),
    ] {
        let bad = text
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w.eq_ignore_ascii_case("nan") || w.eq_ignore_ascii_case("inf"));
        prop_assert!(!bad, "non-finite number in:\n{text}");
    }
    prop_assert!(r.iteration_time.0.is_finite() && r.iteration_time.0 > 0.0);
    Ok(())
}

fn time(m: &ModelSpec, h: &Hw, p: &TrainingPlan) -> Option<f64> {
    let t = Training::new(m.clone(), system(h, p.devices() as u32), registry()).ok()?;
    t.evaluate(p).ok().map(|r| r.iteration_time.0)
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(48);
    let seed = std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0x5eed_2026);
    ProptestConfig {
        cases,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(seed),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn training_reports_are_finite_and_memory_is_the_sum_of_its_parts(
        m in model(), h in hw(), p in plan()
    ) {
        let devices = p.devices() as u32;
        let Ok(t) = Training::new(m, system(&h, devices), registry()) else { return Ok(()) };
        let Ok(r) = t.evaluate(&p) else { return Ok(()) };
        finite(&r)?;
        for st in t.memory_per_stage(&p).expect("memory of an evaluated plan") {
            let parts = st.weights.0 + st.grads.0 + st.optimizer.0 + st.activations.0
                + st.temp.0 + st.reserved.0;
            prop_assert!((st.total.0 - parts).abs() <= 1e-9 * st.total.0, "{st:?}");
            prop_assert!(st.total.0.is_finite() && st.total.0 > 0.0);
        }
    }

    #[test]
    fn more_bandwidth_or_peak_is_never_slower(
        m in model(), h in hw(), p in plan(), which in 0usize..4
    ) {
        let Some(t0) = time(&m, &h, &p) else { return Ok(()) };
        let mut faster = h.clone();
        match which {
            0 => faster.hbm_tbs *= 2.0,
            1 => faster.nvlink_gbs *= 2.0,
            2 => faster.nic_gbps *= 2.0,
            _ => faster.bf16_tflops *= 2.0,
        }
        let t1 = time(&m, &faster, &p).expect("the faster system evaluates the same plan");
        prop_assert!(t1 <= t0 * (1.0 + 1e-12), "{which}: {t0} -> {t1}");
    }

    #[test]
    fn weak_scaling_inside_a_domain_never_loses_throughput(
        m in model(), h in hw(), p in plan()
    ) {
        let p = TrainingPlan { pp: 1, ..p };
        if p.tp * p.dp * 2 > 8 {
            return Ok(());
        }
        let run = |p: &TrainingPlan| {
            let t = Training::new(m.clone(), system(&h, p.devices() as u32), registry()).ok()?;
            t.evaluate(p).ok().map(|r| r.tokens_per_s)
        };
        let Some(s1) = run(&p) else { return Ok(()) };
        let wide = TrainingPlan { dp: p.dp * 2, global_batch: p.global_batch * 2, ..p.clone() };
        let s2 = run(&wide).expect("twice the devices run the same per-device plan");
        prop_assert!(s2 >= s1 * (1.0 - 1e-12), "{s1} -> {s2} tokens/s");
    }

    #[test]
    fn inference_reports_are_finite(
        m in model(), h in hw(), tp in prop::sample::select(vec![1u32, 2, 4]),
        batch in 1u32..64, input in 1u32..4096, output in 1u32..512, graph in any::<bool>()
    ) {
        let plan: InferencePlan = serde_json::from_value(json!({
            "tp": tp, "batch": batch, "input_len": input, "output_len": output,
            "graph_capture": graph
        })).expect("plan");
        let Ok(inf) = Inference::new(m, system(&h, tp), InferenceOptions::default()) else {
            return Ok(())
        };
        let Ok(r) = inf.evaluate(&plan) else { return Ok(()) };
        for x in [r.ttft.0, r.tpot.0, r.latency.0, r.tokens_per_s, r.memory.total.0] {
            prop_assert!(x.is_finite() && x >= 0.0, "{x} in {r:?}");
        }
        prop_assert!(r.ttft.0 <= r.latency.0 * (1.0 + 1e-12));
    }
}
