//! Tests of the serving profiles and of the serving groups' accuracy.

use super::engines::attention_layout;
use super::*;
use crate::cases::CasesFile;
use crate::harness::model_spec;
use crate::report::Status;
use perfcast_serving::{Batching, KvAdmission};

/// The harness `validate` runs: the built-in plugins with the project's kernel tables.
fn harness() -> Harness {
    Harness::new(
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
    )
    .unwrap()
}

/// The public cases (the repository's copy, built in).
fn cases() -> CasesFile {
    CasesFile::parse(crate::BUILTIN_CASES, crate::BUILTIN_CASES_LABEL).unwrap()
}

#[test]
fn stacks_and_engine_settings() {
    let f = cases();
    let by_id = |id: &str| f.cases.iter().find(|c| c.id == id).unwrap();
    let online = by_id("trtllm_v014_llama31_70b_h100_tp4_467_256_qps2");
    let offline = by_id("trtllm_v017_llama31_8b_h100_tp1_128_2048");
    assert_eq!(ServingStack::of(online).stack, ServingStack::TritonTrtllm);
    assert_eq!(ServingStack::of(offline).stack, ServingStack::TrtllmBench);
    assert!(models_mode(Mode::Server) && !models_mode(Mode::Static));
    // trtllm-bench's heuristic for 8B FP8 on one H100 at 128/2048: 8 KV heads x 32
    // layers x 128 x 2 (K and V) x 1 byte = 64 KiB per token; (79.6 GiB - 7.48 GiB of FP8
    // weights) x 0.95 / (2176 x 64 KiB) = 516 requests -> 640 (rounded up to 128);
    // 640 x (1 + 128/2048) = 680 tokens -> 2048 (the floor). At 128/128: 4,383 requests,
    // capped at 4096; 4096 x 2 = 8192 tokens.
    let m = model_spec(offline, &perfcast_scenario::Stack::default());
    let (bs, mnt) = trtllm_bench_settings(&m, offline, 1, 1, 128, 2048, 85.5e9);
    assert_eq!((bs, mnt), (640, 2048));
    let (bs, mnt) = trtllm_bench_settings(&m, offline, 1, 1, 128, 128, 85.5e9);
    assert_eq!((bs, mnt), (4096, 8192));
    let w = workload(online).unwrap();
    assert_eq!(w.requests, 500);
    assert!(matches!(w.load, Load::Rate { rate, .. } if rate == 2.0));
}

/// Each engine family is matched from the software string (any case, any version); an
/// engine no rule knows runs with the fallback profile and says so, never refused.
#[test]
fn engine_families_and_the_fallback() {
    let f = cases();
    let base = f
        .cases
        .iter()
        .find(|c| c.group.starts_with("aic-sample-vllm-h100-llama31-70b"))
        .unwrap();
    for (software, stack, recognised) in [
        (
            "vLLM 0.18.0 (container vllm/vllm-openai:v0.18.0)",
            ServingStack::Vllm,
            true,
        ),
        (
            "vllm 0.25 (a version newer than any profile)",
            ServingStack::Vllm,
            true,
        ),
        (
            "SGLang v0.5.12 (lmsysorg/sglang)",
            ServingStack::Sglang,
            true,
        ),
        (
            "TensorRT-LLM 1.3.0rc14 (trtllm-serve)",
            ServingStack::TrtllmServe,
            true,
        ),
        (
            "TensorRT-LLM (version not recorded)",
            ServingStack::TrtllmServe,
            true,
        ),
        (
            "TensorRT-LLM v1.0 (trtllm-bench, PyTorch backend)",
            ServingStack::TrtllmBench,
            true,
        ),
        (
            "TensorRT-LLM v0.14.0 (Triton tensorrtllm_backend)",
            ServingStack::TritonTrtllm,
            true,
        ),
        ("LMDeploy 0.9 (TurboMind)", ServingStack::FALLBACK, false),
    ] {
        let mut c = base.clone();
        c.software = Some(software.into());
        assert_eq!(
            ServingStack::of(&c),
            StackChoice { stack, recognised },
            "{software}"
        );
    }
    let mut c = base.clone();
    c.software = None;
    assert!(!ServingStack::of(&c).recognised);
    assert!(crate::harness::unsupported_reason(&c).is_none());
}

/// The profiles' documented limits, and AIConfigurator's benchmark launcher's overrides
/// (engine limits from the benchmarked concurrency and prompt).
#[test]
fn profiles_and_the_benchmark_launcher() {
    let f = cases();
    let base = f
        .cases
        .iter()
        .find(|c| c.id == "aic_r3343_llama31_70b_h100_vllm_fp8_tp4_1024_1024_c16")
        .unwrap();
    let model = model_spec(base, &perfcast_scenario::Stack::default());
    let h100 = 79.6 * (1u64 << 30) as f64;
    let mut plain = base.clone();
    plain.software = Some("vLLM 0.12.0".into());
    let v = ServingStack::Vllm.config(&plain, &model, h100);
    assert_eq!(
        (v.max_batch, v.max_num_tokens, v.kv_block_size),
        (1024, 8192, 16)
    );
    assert_eq!(v.kv_admission, KvAdmission::OnDemand);
    assert_eq!(v.graph_batch_sizes.last(), Some(&512));
    // gpu_memory_utilization 0.9 of 79.6 GiB with 17.5 GB of FP8 weights per GPU: the KV
    // cache takes (0.9 C - W) / (C - W) of what the weights leave.
    let w = model.params() as f64 / 4.0;
    let want = (0.9 * h100 - w) / (h100 - w);
    assert!(
        (v.kv_memory_fraction - want).abs() < 1e-12,
        "{}",
        v.kv_memory_fraction
    );
    let s = ServingStack::Sglang.config(&plain, &model, h100);
    assert_eq!(s.batching, Batching::PrefillFirst);
    assert_eq!((s.chunk_size, s.kv_block_size), (Some(8192), 1));
    assert_eq!(
        s.graph_batch_sizes.last(),
        Some(&512),
        "TP 4: cuda_graph_max_bs 512"
    );
    assert!(s.admission_reserve > 0.0);
    let t = ServingStack::TrtllmServe.config(&plain, &model, h100);
    assert!(!t.chunked_prefill && t.max_num_tokens == 8192 && t.kv_block_size == 32);
    // AIConfigurator's benchmark: concurrency 16, prompt 1024 -> 16 + 1024 + 1500 tokens
    // (TensorRT-LLM: a multiple of 32), graphs at 1..=16.
    let v = ServingStack::Vllm.config(base, &model, h100);
    assert_eq!((v.max_batch, v.max_num_tokens), (16, 2540));
    assert_eq!(v.graph_batch_sizes, (1..=16).collect::<Vec<_>>());
    let t = ServingStack::TrtllmServe.config(base, &model, h100);
    assert_eq!(t.max_num_tokens, 2560);
    let s = ServingStack::Sglang.config(base, &model, h100);
    assert_eq!((s.batching, s.chunk_size), (Batching::Mixed, Some(2540)));
}

/// MXFP4/NVFP4 weights run weight-only (16-bit activations) where the GPU has no FP4
/// matrix units, natively where it has.
#[test]
fn fp4_weights_run_weight_only_without_fp4_units() {
    let f = cases();
    let c = f
        .cases
        .iter()
        .find(|c| c.group == "aic-sample-vllm-h100-gptoss120b")
        .unwrap();
    let stack = perfcast_scenario::Stack::default();
    let p = inference_plan(c, &stack).unwrap();
    assert_eq!(
        (p.weight_dtype, p.activation_dtype),
        (perfcast_core::DType::Fp4, perfcast_core::DType::Bf16)
    );
    let mut b = c.clone();
    b.system.gpu = "B200-SXM-180GB".into();
    let p = inference_plan(&b, &stack).unwrap();
    assert_eq!(p.activation_dtype, perfcast_core::DType::Fp4);
}

/// The online group: every case runs; below saturation (offered rate under the measured
/// maximum) TTFT and TPOT within the 25%, output throughput within 15% over
/// every rate. The offline grid: the dense cases run (MoE ones are unsupported until the
/// inference engine routes experts), output throughput within 15% MAPE.
#[test]
fn serving_groups_reach_their_targets() {
    let f = cases();
    let h = harness();
    let mut err: std::collections::BTreeMap<(&str, &str), Vec<f64>> = Default::default();
    for c in f
        .cases
        .iter()
        .filter(|c| c.group.starts_with("trtllm-v01") && c.group != "trtllm-v05-ttft")
    {
        let r = h.run_case(c);
        assert_eq!(r.status, Status::Ok, "{}: {:?}", c.id, r.reason);
        let i = c.inference.as_ref().unwrap();
        let below = i.request_rate.is_some_and(|rate| {
            let series = f.cases.iter().find(|o| {
                o.group == c.group
                    && o.model.name == c.model.name
                    && o.system.gpu == c.system.gpu
                    && o.inference.as_ref().is_some_and(|x| {
                        x.mode == Mode::OfflineMaxThroughput
                            && x.input_len == i.input_len
                            && x.output_len == i.output_len
                    })
            });
            series
                .and_then(|s| s.measured.requests_per_s)
                .is_some_and(|sat| rate < sat)
        });
        for m in &r.metrics {
            let Some(e) = m.rel_error else { continue };
            let key = match m.name {
                Metric::TtftMs | Metric::TpotMs if !below => continue,
                Metric::TtftMs => "ttft below saturation",
                Metric::TpotMs => "tpot below saturation",
                Metric::TokensPerS => "output throughput",
                _ => continue,
            };
            err.entry((c.group.as_str(), key))
                .or_default()
                .push(e.abs());
        }
    }
    let mape = |g: &str, k: &str| {
        let v = &err[&(g, k)];
        v.iter().sum::<f64>() / v.len() as f64
    };
    for (g, k, target) in [
        ("trtllm-v014-online", "output throughput", 0.15),
        ("trtllm-v014-online", "ttft below saturation", 0.25),
        ("trtllm-v014-online", "tpot below saturation", 0.25),
        ("trtllm-v017-offline", "output throughput", 0.15),
    ] {
        let m = mape(g, k);
        assert!(
            m <= target,
            "{g} {k}: MAPE {:.1}% > {:.0}%",
            100.0 * m,
            100.0 * target
        );
    }
}

/// A case scores the statistic it names (the mean by default); a statistic where no
/// per-request latency is published is a schema error naming the key.
#[test]
fn the_named_statistic_is_scored() {
    let f = cases();
    let h = harness();
    let base = f
        .cases
        .iter()
        .find(|c| c.group == "aic-sample-vllm-h100-llama31-70b")
        .unwrap();
    let ttft = |s: Option<crate::cases::Statistic>| {
        let mut c = base.clone();
        c.measured.statistic = s;
        let r = h.run_case(&c);
        assert_eq!(r.status, Status::Ok, "{:?}", r.reason);
        let m = r.metrics.iter().find(|m| m.name == Metric::TtftMs).unwrap();
        m.predicted.unwrap()
    };
    use crate::cases::Statistic::*;
    let (mean, median, p99) = (ttft(None), ttft(Some(Median)), ttft(Some(P99)));
    assert_eq!(mean, ttft(Some(Mean)));
    assert!(
        p99 >= median && p99 >= mean && mean > 0.0,
        "{mean} {median} {p99}"
    );
    let text = crate::BUILTIN_CASES.replacen(
        "[case.measured]\n",
        "[case.measured]\nstatistic = \"p90\"\n",
        1,
    );
    let e = CasesFile::parse(&text, "x.toml").unwrap_err().to_string();
    assert!(e.contains("measured.statistic = \"p90\""), "{e}");
}

/// `[case.parallel] attention_tp` reaches the serving run: a DeepSeek-R1 DEP8 point of the
/// public file as four attention groups of two ranks predicts a different TPOT, and its
/// per-rank published `max_batch` counts once per group.
#[test]
fn attention_tensor_parallelism_reaches_a_case() {
    let f = cases();
    let h = harness();
    let base = f
        .cases
        .iter()
        .find(|c| {
            c.group == "aic-sample-trtllm-h200-dsr1"
                && c.parallel.attention_dp == Some(true)
                && c.parallel.tp == Some(8)
        })
        .unwrap();
    assert_eq!(attention_layout(base, 8), (8, 1));
    let mut groups = base.clone();
    groups.parallel.attention_tp = Some(2);
    assert_eq!(attention_layout(&groups, 8), (4, 2));
    let tpot = |c: &crate::cases::Case| {
        let r = h.run_case(c);
        assert_eq!(r.status, Status::Ok, "{:?}", r.reason);
        let m = r.metrics.iter().find(|m| m.name == Metric::TpotMs).unwrap();
        m.predicted.unwrap()
    };
    let (a, b) = (tpot(base), tpot(&groups));
    assert!(a > 0.0 && b > 0.0 && a != b, "{a} {b}");
}
