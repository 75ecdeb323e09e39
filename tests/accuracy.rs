//! Accuracy on the repository's public validation set (configs/validation/cases.toml), on each
//! case's first published metric, with the hardware of configs/hardware/ (GEMMs from the
//! kernel tables), the software stacks of configs/stacks/ and the engines' defaults (shared
//! by every case).
//!
//! The issue targets (issue 3 item 9 for training, issue 4 for inference) are in `TARGETS`.
//! Where a group does not meet its target yet, `BOUNDS` holds what currently holds honestly
//! (the measured MAPE and worst case plus a small margin) so that a regression fails, and the
//! gap is named here and in the closing report. Tighten a bound to its target as soon as the
//! model meets it.
//!
//! Cross-crate: it runs the whole stack a user runs (host presets, built-in plugins, engine,
//! validation harness) on the shipped cases, so it lives in the top-level tests crate.

use perfcast_validation::report::Status;

/// (group, MAPE target, worst-case target): the issues' accuracy targets.
const TARGETS: &[(&str, f64, f64)] = &[
    ("narayanan2021-table1", 0.10, 0.25),
    ("korthikanti2022-table4", 0.10, 0.25),
    ("korthikanti2022-table5", 0.10, 0.25),
    ("korthikanti2022-abstract", 0.10, 0.25),
    ("mcore-h100-weak-scaling", 0.10, 0.25),
    ("llama3-405b-pretrain", 0.10, 0.25),
    ("llama2-e2e-latency-a100", 0.15, 0.35),
    ("trtllm-v05-ttft", 0.15, 0.35),
    ("trtllm-v061-static", 0.15, 0.35),
    // Issue 11: mixture-of-experts training (the MoE layer group on forward and backward).
    ("automodel-h100", 0.15, 0.30),
    ("mcore-moe-layer-h100", 0.15, 0.30),
    ("mlm-dsv3-gb200-2025", 0.15, 0.30),
    ("deepseek-v3-report", 0.15, 0.30),
    // Issue 21: mixture-of-experts inference (offline throughput of TensorRT-LLM).
    ("trtllm-v10-offline-moe", 0.15, 0.35),
    ("trtllm-dsr1-blog", 0.15, 0.35),
    // Issue 20: every dense group within 12%, no training case worse than 25%.
    ("torchtitan-h100-2024", 0.12, 0.25),
    ("torchtitan-h100-asynctp-2025", 0.12, 0.25),
    ("torchtitan-h200-2025", 0.12, 0.25),
    ("torchtitan-blackwell-lowprec", 0.12, 0.25),
    ("trtllm-v014-online", 0.12, 0.35),
    ("trtllm-v017-offline", 0.12, 0.35),
];

/// Bounds asserted where the target is not met yet: (group, MAPE bound, worst-case bound,
/// why the target is not met).
const BOUNDS: &[(&str, f64, f64, &str)] = &[
    (
        "mlm-dsv3-gb200-2025",
        0.97,
        1.56,
        "the baseline is host-bound (the source: CPU launch overhead) and the optimised run \
         30% below the modelled device time: host costs and CUDA graphs are the software \
         stack profiles' (not modelled in training yet); with the Megatron-Core loss fitted on \
         all 152 of its cases (0.902, was 0.724 on 23) the modelled device time is shorter \
         still (Blackwell predicted too fast, CALIBRATION.md 2026-12-07)",
    ),
    (
        "mcore-h100-weak-scaling",
        0.19,
        0.28,
        "bf16 GPT 1.7B-462B predicted 9-27% fast since the Megatron-Core loss is fitted on all \
         152 of its cases (0.902; 0.724 when these and two other groups were the only ones): \
         one loss cannot hold bf16 and fp8 together (DGX Cloud bf16 -6 to -10%, fp8 -0.5 to \
         -4%); the held-out figures chose the refit (CALIBRATION.md 2026-12-07)",
    ),
    (
        "mcore-moe-layer-h100",
        0.16,
        0.29,
        "the MoE layer's forward and backward predicted 15% fast on average with the \
         Megatron-Core loss fitted on all 152 of its cases (0.902; 0.724 before): the fp8 \
         DeepEP rows worst (28% fast)",
    ),
    (
        "trtllm-v10-offline-moe",
        0.22,
        0.80,
        "MoE inference (issue 21), routed experts and attention from the kernel tables: \
         Blackwell within 13% below 5K-token prompts; Qwen3-235B predicted 17-25% slow on \
         H200 (and 32% fast on H100 at 128/2048), Llama 4 Maverick on H100 up to 79% fast, \
         and the 20K-token prompts 25-53% slow; trtllm-bench's engine-chosen batch and token \
         limits (per rank under attention data parallelism) are not published",
    ),
    (
        "trtllm-dsr1-blog",
        0.24,
        0.33,
        "DeepSeek-R1 max-throughput points predicted 11-32% fast: the FP8 checkpoint's \
         block-scaled experts are not a shape of the H200's fp8 MoE table (its fp8_block rows \
         need a scaling the case schema does not carry), MLA decode attention at the \
         analytical model's efficiency, per-rank max_num_tokens not modelled",
    ),
    (
        "torchtitan-h100-2024",
        0.10,
        0.27,
        "Llama 3.1 8B with context parallelism 8 over 256K-token sequences predicted 26% fast: \
         the all-gather rotation of PyTorch's context parallelism is modelled as hidden behind \
         attention (the stack's `p2p` exchange); no profile of the run is published",
    ),
    (
        "torchtitan-blackwell-lowprec",
        0.14,
        0.40,
        "NVFP4 training of Llama 3 8B on GB200 predicted 39% fast: the 4-bit GEMMs at the \
         kernel table's NVFP4 rate and the quantisation (two-level scales) as compulsory \
         traffic; no measurement of torchao's NVFP4 linears was found to time them whole",
    ),
    (
        "deepseek-v3-report",
        0.31,
        0.31,
        "the whole-run average (180K GPU hours per trillion tokens) predicted 30% slow with the \
         case as published (on DualPipe), on the fallback stack (DeepSeek's HAI-LLM is no stack \
         the rules know: the cross-validated middle of the known stacks' efficiencies): no \
         dispatcher is given (NCCL all-to-all assumed, DeepSeek's own kernels are DeepEP's \
         scheme), routing is not group-limited in the case data although config_671B.json is \
         (n_group 8, topk_group 4); 24% of the step is exposed all-to-all",
    ),
];

#[test]
fn public_validation_set_meets_targets_or_bounds() {
    let report = report();
    eprintln!("{}", perfcast_report::validation::table(report));
    let mut failures = Vec::new();
    for (group, mape_target, worst_target) in TARGETS {
        let s = report
            .summary
            .groups
            .get(*group)
            .unwrap_or_else(|| panic!("group {group} missing from the report"));
        let (mape_bound, worst_bound, why) = BOUNDS
            .iter()
            .find(|b| b.0 == *group)
            .map(|b| (b.1, b.2, b.3))
            .unwrap_or((*mape_target, *worst_target, "issue target"));
        if s.scored == 0 {
            // Nothing scored: every case must still be listed, each with its reason.
            for c in report.cases.iter().filter(|c| c.group == *group) {
                if c.status == Status::Ok {
                    failures.push(format!("{group}: case {} ok but not scored", c.id));
                }
                if c.reason.as_deref().unwrap_or("").is_empty() {
                    failures.push(format!("{group}: case {} has no reason", c.id));
                }
            }
            eprintln!("{group}: no case scored (see the reasons above)");
            continue;
        }
        let mape = s.mape.unwrap();
        let worst = s.max_abs_error.unwrap();
        eprintln!(
            "{group}: MAPE {:.1}% (bound {:.0}%), worst {:.1}% (bound {:.0}%) [{why}]",
            100.0 * mape,
            100.0 * mape_bound,
            100.0 * worst,
            100.0 * worst_bound
        );
        if mape > mape_bound {
            failures.push(format!(
                "{group}: MAPE {:.1}% > {:.0}%",
                100.0 * mape,
                100.0 * mape_bound
            ));
        }
        if worst > worst_bound {
            failures.push(format!(
                "{group}: worst case {} at {:.1}% > {:.0}%",
                s.worst_case.as_deref().unwrap_or("?"),
                100.0 * worst,
                100.0 * worst_bound
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Server-mode cases of each group the debug build scores (the first in file order): the
/// ~1,350 closed-loop and rate-driven serving simulations take minutes unoptimised, so the
/// debug tier sees every serving group on this fixed sample, and the release tier
/// (`cargo test --release -p perfcast-tests --test e2e accuracy::`, run by `.ci/run`) the whole file.
const SERVER_SAMPLE_PER_GROUP: usize = 3;

/// The public cases file: whole in a release build; in a debug build every case but the
/// server-mode ones past the first [`SERVER_SAMPLE_PER_GROUP`] of each group.
fn cases_file() -> std::path::PathBuf {
    let path = perfcast_testkit::workspace_root().join("configs/validation/cases.toml");
    if !cfg!(debug_assertions) {
        return path;
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let mut parts = text.split("\n[[case]]\n");
    let mut out = parts.next().unwrap().to_string();
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for case in parts {
        let server = case.lines().any(|l| l.trim() == "mode = \"server\"");
        let group = case.lines().find_map(|l| l.strip_prefix("group = "));
        let n = seen.entry(group.unwrap_or("").to_string()).or_default();
        if server {
            *n += 1;
        }
        if !server || *n <= SERVER_SAMPLE_PER_GROUP {
            out.push_str("\n[[case]]\n");
            out.push_str(case);
        }
    }
    let dir = std::env::temp_dir().join(format!("perfcast-accuracy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sample = dir.join("cases-sample.toml");
    std::fs::write(&sample, out).unwrap();
    sample
}

/// The validation report of [`cases_file`], run once for every test here.
fn report() -> &'static perfcast_validation::report::Report {
    static REPORT: std::sync::OnceLock<perfcast_validation::report::Report> =
        std::sync::OnceLock::new();
    REPORT.get_or_init(|| {
        perfcast_validation::validate(
            Some(&cases_file()),
            None,
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
        )
        .unwrap()
    })
}

/// Server-mode serving per engine family on AIConfigurator's points (groups
/// `aic-sample-ENGINE-GPU-MODEL`; the statistic is each metric's MAPE over every case of the
/// family): (engine, TTFT bound, TPOT bound). The issue 43 targets are 25% and 15%; these are
/// the measured figures plus a margin (configs/validation/CALIBRATION.md, 2026-12-07), so a
/// regression fails: TTFT is predicted too short (the benchmark's queueing is open).
const SERVING_BOUNDS: &[(&str, f64, f64)] = &[
    ("vllm", 0.53, 0.28),
    ("sglang", 0.71, 0.37),
    ("trtllm", 0.62, 0.24),
];

/// Every server-mode point is predicted but what does not fit (issue 43: coverage >= 95%, no
/// engine refused), and each engine family's TTFT and TPOT stay within [`SERVING_BOUNDS`]: on
/// the whole file in the release tier; the debug build's sample is too small for the figures.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release tier: the whole file's serving points, run optimised by .ci/run"
)]
fn serving_engines_cover_and_hold_their_bounds() {
    use perfcast_validation::cases::Metric;
    let report = report();
    let serving: Vec<_> = report
        .cases
        .iter()
        .filter(|c| c.group.starts_with("aic-sample-") || c.group.starts_with("inferencex-"))
        .collect();
    let ok = serving.iter().filter(|c| c.status == Status::Ok).count();
    assert!(serving.len() > 1300, "{}", serving.len());
    assert!(
        ok as f64 >= 0.95 * serving.len() as f64,
        "{ok} of {}",
        serving.len()
    );
    let mut failures = Vec::new();
    for (engine, ttft_bound, tpot_bound) in SERVING_BOUNDS {
        let prefix = format!("aic-sample-{engine}-");
        for (metric, bound) in [(Metric::TtftMs, ttft_bound), (Metric::TpotMs, tpot_bound)] {
            let errors: Vec<f64> = serving
                .iter()
                .filter(|c| c.group.starts_with(&prefix))
                .flat_map(|c| &c.metrics)
                .filter(|m| m.name == metric)
                .filter_map(|m| m.rel_error)
                .map(f64::abs)
                .collect();
            assert!(errors.len() > 100, "{engine}: {} scored", errors.len());
            let mape = errors.iter().sum::<f64>() / errors.len() as f64;
            eprintln!(
                "{engine} {metric:?}: MAPE {:.1}% over {} (bound {:.0}%)",
                100.0 * mape,
                errors.len(),
                100.0 * bound
            );
            if mape > *bound {
                failures.push(format!("{engine} {metric:?}: {:.1}%", 100.0 * mape));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
