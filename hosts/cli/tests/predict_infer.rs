//! End-to-end tests of `perfcast predict`, `perfcast infer` and the model form of
//! `perfcast roofline`, on the shipped experiment configs: every output format, plausible
//! numbers, and every kind of bad input (non-zero exit, a message naming the key and the
//! rule, never a panic).

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common::{repo, Out};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn experiment(name: &str) -> String {
    repo()
        .join("configs/experiments")
        .join(name)
        .display()
        .to_string()
}

fn tmpdir() -> PathBuf {
    common::tmpdir("perfcast-predict")
}

/// Run perfcast in a fresh directory without any `PERFCAST_*` variable of the test's own
/// environment; a panic (exit 101) fails every test.
fn run_in(dir: &Path, args: &[&str]) -> Out {
    let out = common::output(&mut common::command(dir, args));
    assert_ne!(out.code, 101, "internal error: {}", out.stderr);
    for s in [&out.stdout, &out.stderr] {
        let lower = s.to_lowercase();
        // The word, not the letters (a source such as "Narayanan et al." is fine).
        let nan = lower
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w == "nan");
        assert!(!nan || lower.contains("finite"), "NaN in output: {s}");
        assert!(!lower.contains("inf "), "infinity in output: {s}");
    }
    out
}

fn run(args: &[&str]) -> Out {
    run_in(&tmpdir(), args)
}

fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(o.code, 0, "{args:?} failed: {}", o.stderr);
    o.stdout
}

fn json(args: &[&str]) -> Value {
    let text = ok(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {text}"))
}

/// Bad input: exit 1 with `error:` and each of `needles` on stderr.
fn fails(args: &[&str], needles: &[&str]) -> Out {
    let o = run(args);
    assert_eq!(
        o.code, 1,
        "{args:?}: expected exit 1, got {}: {}",
        o.code, o.stderr
    );
    assert!(o.stderr.starts_with("error:"), "{args:?}: {}", o.stderr);
    for n in needles {
        assert!(o.stderr.contains(n), "{args:?}: `{n}` not in: {}", o.stderr);
    }
    o
}

fn f(v: &Value, path: &str) -> f64 {
    let mut cur = v;
    for seg in path.split('.') {
        cur = &cur[seg];
    }
    let x = cur
        .as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number: {cur}"));
    assert!(x.is_finite(), "{path} = {x}");
    x
}

/// `metric,value,unit` CSV as (metric, value) pairs, every number finite.
fn csv_metrics(text: &str) -> Vec<(String, String)> {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("metric,value,unit"), "{text}");
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), 3, "{l}");
            if let Ok(x) = cells[1].parse::<f64>() {
                assert!(x.is_finite(), "{l}");
            }
            (cells[0].to_string(), cells[1].to_string())
        })
        .collect()
}

fn metric(rows: &[(String, String)], name: &str) -> f64 {
    rows.iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no `{name}` row"))
        .1
        .parse()
        .unwrap()
}

// ---- predict -------------------------------------------------------------------------------

#[test]
fn predict_gpt3_175b_on_1024_a100_in_every_format() {
    let cfg = experiment("gpt3-175b-a100.toml");
    let j = json(&["predict", &cfg, "--format", "json"]);
    let r = &j["report"];
    let mfu = f(r, "mfu");
    assert!((0.30..=0.60).contains(&mfu), "MFU {mfu}");
    assert!(f(r, "hfu") >= mfu);
    assert_eq!(f(r, "devices"), 1024.0);
    assert_eq!(j["plan"]["dp"], 8);
    let t = f(r, "iteration_time");
    assert!((5.0..=120.0).contains(&t), "iteration {t} s");
    // The breakdown adds up to the iteration time.
    let b = &r["breakdown"];
    let compute: f64 = b["compute"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    let parts = compute
        + [
            "tp_comm",
            "cp_comm",
            "pp_comm",
            "dp_comm",
            "zero_comm",
            "bubble",
            "optimizer",
        ]
        .iter()
        .map(|k| f(b, k))
        .sum::<f64>();
    assert!((parts - t).abs() < 1e-6 * t, "{parts} vs {t}");
    // Every pipeline stage's memory, each under the capacity.
    let stages = j["memory_per_stage"].as_array().unwrap();
    assert_eq!(stages.len(), 16);
    let cap = f(r, "memory.capacity");
    for s in stages {
        let total = f(s, "total");
        assert!(total > 0.0 && total <= cap, "{s}");
    }
    assert!(!j["notes"].as_array().unwrap().is_empty());

    let table = ok(&["predict", &cfg]);
    for needle in [
        "iteration time",
        "MFU / HFU",
        "TFLOP/s per GPU",
        "exposed TP comm",
        "pipeline bubble",
        "Memory of every pipeline stage",
        "Notes",
    ] {
        assert!(table.contains(needle), "`{needle}` not in:\n{table}");
    }

    let rows = csv_metrics(&ok(&["predict", &cfg, "--format", "csv"]));
    assert!((metric(&rows, "mfu") - mfu).abs() < 1e-12);
    assert_eq!(metric(&rows, "plan.dp"), 8.0);
    assert!(metric(&rows, "memory.stage15.total") > 0.0);
}

#[test]
fn predict_other_shipped_configs() {
    // Korthikanti 2022 Table 5: measured 13.75 s, MFU 51.4%.
    let j = json(&[
        "predict",
        &experiment("korthikanti-175b-selective.toml"),
        "--format",
        "json",
    ]);
    let t = f(&j["report"], "iteration_time");
    assert!((10.0..=18.0).contains(&t), "iteration {t} s");
    assert_eq!(j["plan"]["dp"], 1, "dp derived from system.devices");
    assert_eq!(j["plan"]["schedule"], Value::Null);
    let j = json(&[
        "predict",
        &experiment("llama3-8b-h100.toml"),
        "--format",
        "json",
    ]);
    let mfu = f(&j["report"], "mfu");
    assert!((0.25..=0.75).contains(&mfu), "MFU {mfu}");
    assert_eq!(j["plan"]["dp"], 4);
    assert_eq!(j["report"]["memory"]["fits"], true);
}

/// LoRA (`plan.task = "lora"`): the shipped experiment fits and reports its task and
/// adapters; the adapters' state is a sliver of the base's weights; a higher rank costs FLOPs;
/// every bad fine-tuning key fails naming it.
#[test]
fn predict_lora_fine_tuning() {
    let cfg = experiment("llama2-70b-lora-h100.toml");
    let j = json(&["predict", &cfg, "--format", "json"]);
    assert_eq!(j["plan"]["task"], "lora");
    assert_eq!(j["plan"]["lora"]["rank"], 16);
    let r = &j["report"];
    assert_eq!(r["memory"]["fits"], true);
    let stage = &r["memory"]["first_stage"];
    assert!(f(stage, "grads") < 1e-2 * f(stage, "weights"));
    assert!(f(stage, "optimizer") < 2e-2 * f(stage, "weights"));
    let mfu = f(r, "mfu");
    assert!((0.1..=0.6).contains(&mfu), "MFU {mfu}");
    let text = ok(&["predict", &cfg]);
    assert!(
        text.contains("task=lora lora.rank=16 lora.targets=linear_qkv,linear_proj"),
        "{text}"
    );
    let wide = json(&[
        "predict",
        &cfg,
        "--set",
        "plan.lora.rank=256",
        "--format",
        "json",
    ]);
    assert!(f(&wide["report"], "model_flops") > f(r, "model_flops"));
    // (--set, fragments of the complaint)
    let bad: [(&str, &[&str]); 6] = [
        ("plan.task=\"prefix\"", &["plan.task", "prefix", "lora"]),
        ("plan.lora.rank=0", &["plan.lora.rank", ">= 1"]),
        ("plan.lora.rank=9000", &["plan.lora.rank", "9000", "8192"]),
        (
            "plan.lora.targets=[]",
            &["plan.lora.targets", "names no projection"],
        ),
        (
            "plan.lora.targets=[\"q_proj\"]",
            &["plan.lora.targets", "q_proj", "linear_qkv"],
        ),
        ("plan.task=\"sft\"", &["plan.lora", "sft", "plan.task"]),
    ];
    for (set, needles) in bad {
        fails(&["predict", &cfg, "--set", set], needles);
    }
}

/// `predict` says which stack timed the step and, per op class, how much of its time measured
/// kernels timed: on an H100 with kernel tables the GEMMs come from the tables (measured or
/// interpolated) and the rest from the analytical model; without tables everything is
/// analytical; the shares add up to each class's time in every format.
#[test]
fn predict_reports_the_kernel_paths_and_the_stack() {
    let cfg = experiment("llama2-70b-lora-h100.toml");
    let j = json(&["predict", &cfg, "--format", "json"]);
    assert_eq!(j["software"]["stack"], "megatron-core-2025");
    assert!(j["software"]["description"]
        .as_str()
        .unwrap()
        .contains("Megatron-Core"));
    let paths = j["kernel_paths"].as_array().unwrap();
    let class = |name: &str| {
        paths
            .iter()
            .find(|c| c["class"] == name)
            .unwrap_or_else(|| panic!("no {name} in {paths:?}"))
    };
    let gemm = class("gemm");
    assert!(f(gemm, "measured") + f(gemm, "interpolated") > 0.9 * f(gemm, "analytical").max(1e-12));
    assert_eq!(f(class("attention"), "measured"), 0.0);
    assert!(f(class("attention"), "analytical") > 0.0);
    let text = ok(&["predict", &cfg]);
    assert!(text.contains("Software: megatron-core-2025 ("), "{text}");
    assert!(text.contains("Kernel paths"), "{text}");
    let csv = ok(&["predict", &cfg, "--format", "csv"]);
    assert!(csv.contains("software.stack,megatron-core-2025,"), "{csv}");
    assert!(csv.contains("kernel_path.gemm.measured,"), "{csv}");
    let none = json(&[
        "predict",
        &cfg,
        "--set",
        "device.kernels=\"none\"",
        "--format",
        "json",
    ]);
    for c in none["kernel_paths"].as_array().unwrap() {
        assert_eq!(
            f(c, "measured") + f(c, "interpolated") + f(c, "scaled"),
            0.0,
            "{c}"
        );
    }
}

#[test]
fn predict_plot_draws_time_and_memory_stacks() {
    let dir = tmpdir();
    let svg = dir.join("step.svg");
    let o = run_in(
        &dir,
        &[
            "predict",
            &experiment("korthikanti-175b-selective.toml"),
            "--plot",
            svg.to_str().unwrap(),
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
    for needle in [
        "compute gemm",
        "pipeline bubble",
        "stage 7 optimizer",
        "capacity",
    ] {
        assert!(s.contains(needle), "`{needle}` not in the plot");
    }
    assert!(!s.contains("NaN") && !s.contains("inf"));
    // Both panels have a value scale: tick labels right-aligned on their axes, 0 on each and
    // the 80 GiB of the capacity on the memory axis (there were none).
    let ticks: Vec<&str> = s
        .split("<text")
        .filter(|t| t.contains("text-anchor=\"end\"") && !t.contains("font-size"))
        .filter_map(|t| t.split('>').nth(1)?.split('<').next())
        .collect();
    assert!(
        ticks.iter().filter(|t| **t == "0").count() >= 2,
        "{ticks:?}"
    );
    assert!(ticks.contains(&"80"), "{ticks:?}");
}

#[test]
fn predict_plan_that_does_not_fit_prints_the_report_and_fails() {
    let o = fails(
        &[
            "predict",
            &experiment("llama3-8b-h100.toml"),
            "--set",
            "plan.tp=1",
            "--set",
            "plan.sp=false",
        ],
        &[
            "does not fit",
            "pipeline stage 0",
            "GiB",
            "short by",
            "plan.recompute",
        ],
    );
    assert!(o.stdout.contains("DOES NOT FIT"), "{}", o.stdout);
}

#[test]
fn predict_reads_a_hugging_face_config_relative_to_the_file() {
    let dir = tmpdir();
    std::fs::create_dir_all(dir.join("hf")).unwrap();
    std::fs::write(
        dir.join("hf/config.json"),
        r#"{"model_type": "llama", "hidden_act": "silu", "hidden_size": 4096,
            "intermediate_size": 11008, "max_position_embeddings": 4096,
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
            "tie_word_embeddings": false, "vocab_size": 32000}"#,
    )
    .unwrap();
    let cfg = dir.join("exp.toml");
    std::fs::write(
        &cfg,
        "include = [\"preset:dgx-a100\"]\n[model]\nname = \"Llama-2-7B (hf)\"\nhf_config = \"hf/config.json\"\n\
         [plan]\ntp = 8\nglobal_batch = 8\nrecompute = \"full\"\n",
    )
    .unwrap();
    // Run from another directory: the path is relative to the config file.
    let j = json(&["predict", cfg.to_str().unwrap(), "--format", "json"]);
    assert_eq!(j["model"], "Llama-2-7B (hf)");
    assert!(f(&j["report"], "iteration_time") > 0.0);
    fails(
        &[
            "predict",
            cfg.to_str().unwrap(),
            "--set",
            "model.hf_config=\"missing.json\"",
        ],
        &["model.hf_config", "missing.json"],
    );
    fails(
        &["predict", cfg.to_str().unwrap(), "--set", "model.layers=4"],
        &["model.layers", "hf_config"],
    );
}

#[test]
fn predict_bad_inputs_name_the_key_and_the_rule() {
    let gpt3 = experiment("gpt3-175b-a100.toml");
    let k175 = experiment("korthikanti-175b-selective.toml");
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        // Heads by TP (64 devices: tp 64, pp 1, dp 1).
        (
            vec![
                &k175,
                "--set",
                "plan.tp=64",
                "--set",
                "plan.pp=1",
                "--set",
                "plan.vpp=1",
            ],
            vec!["plan.tp", "96"],
        ),
        // Layers by PP x virtual stages (uneven splits are allowed as long as no stage is
        // left empty: 96 layers cannot fill 8 x 13 model chunks).
        (
            vec![&k175, "--set", "plan.vpp=13"],
            vec!["plan.pp", "model.layers = 96", "8 x 13"],
        ),
        // The interleaved schedule without its degree (a stack without a default one).
        (
            vec![
                &k175,
                "--set",
                "plan.vpp=1",
                "--set",
                "plan.schedule=\"interleaved-1f1b\"",
            ],
            vec!["plan.vpp", "interleaved-1f1b", "1F1B"],
        ),
        // GPUs by TP x PP x DP.
        (
            vec![&gpt3, "--set", "plan.dp=4"],
            vec!["plan.dp", "512", "system.devices = 1024"],
        ),
        (
            vec![&k175, "--set", "system.devices=100"],
            vec!["system.devices", "multiple of 64"],
        ),
        // Global batch by micro-batch x DP.
        (
            vec![&gpt3, "--set", "plan.global_batch=1537"],
            vec!["plan.global_batch", "1537", "multiple of"],
        ),
        // Zero and negative sizes.
        (
            vec![&gpt3, "--set", "plan.micro_batch=0"],
            vec!["plan.micro_batch"],
        ),
        (vec![&gpt3, "--set", "plan.tp=-8"], vec!["plan.tp"]),
        (vec![&gpt3, "--set", "model.hidden=0"], vec!["model.hidden"]),
        (
            vec![&gpt3, "--set", "model.layers=-1"],
            vec!["model.layers"],
        ),
        // Unknown device component and unknown model preset.
        (
            vec![&gpt3, "--set", "device.compute=\"tpu9\""],
            vec!["device.compute", "tpu9"],
        ),
        (vec![&gpt3, "preset:gpt-5"], vec!["unknown preset", "gpt-5"]),
        // Unknown recompute policy and schedule: the registered ones are listed.
        (
            vec![&gpt3, "--set", "plan.recompute=\"sometimes\""],
            vec!["plan.recompute", "sometimes", "full", "none", "selective"],
        ),
        (
            vec![&gpt3, "--set", "plan.schedule=\"zigzag\""],
            vec![
                "plan.schedule",
                "zigzag",
                "1f1b",
                "gpipe",
                "interleaved-1f1b",
            ],
        ),
        // Unknown plan key, engine option out of range.
        (vec![&gpt3, "--set", "plan.tpp=2"], vec!["plan.tpp"]),
        (
            vec![&gpt3, "--set", "options.engine.runtime_reserve_gib=-1"],
            vec!["options.engine.runtime_reserve_gib"],
        ),
        // A config without a plan.
        (vec!["preset:llama2-70b", "preset:dgx-h100"], vec!["[plan]"]),
        // A config without a model.
        (vec!["preset:dgx-h100"], vec!["[model]"]),
    ];
    for (extra, needles) in cases {
        let mut args = vec!["predict"];
        args.extend(extra);
        fails(&args, &needles);
    }
}

#[test]
fn predict_derives_devices_from_the_plan_when_unset() {
    // No system.devices: the hardware preset's built-in default 1 becomes tp x pp x dp.
    let j = json(&[
        "predict",
        "preset:gpt3-175b",
        "preset:a100-sxm4-80gb",
        "--set",
        "plan={ tp = 8, pp = 8, dp = 2, global_batch = 64, recompute = \"full\" }",
        "--format",
        "json",
    ]);
    assert_eq!(f(&j["report"], "devices"), 128.0);
}

// ---- infer ---------------------------------------------------------------------------------

#[test]
fn infer_llama2_70b_on_h100_in_every_format() {
    let cfg = experiment("llama2-70b-h100.toml");
    let j = json(&["infer", &cfg, "--format", "json"]);
    let (ttft, tpot, latency) = (f(&j, "ttft"), f(&j, "tpot"), f(&j, "latency"));
    assert!((0.01..=5.0).contains(&ttft), "TTFT {ttft} s");
    assert!((0.001..=0.1).contains(&tpot), "TPOT {tpot} s");
    assert!((latency - (ttft + 127.0 * tpot)).abs() < 1e-6 * latency);
    assert!(f(&j, "tokens_per_s_per_gpu") > 0.0);
    assert_eq!(j["gpus"], 8);
    assert_eq!(j["memory"]["fits"], true);
    for phase in ["prefill", "decode"] {
        let p = &j[phase];
        let parts: f64 = [
            "gemm",
            "attention",
            "other_ops",
            "communication",
            "overheads",
        ]
        .iter()
        .map(|k| f(p, k))
        .sum();
        assert!(
            (parts - f(p, "total")).abs() <= 1e-9 + 1e-6 * parts,
            "{phase}"
        );
    }

    let table = ok(&["infer", &cfg]);
    for needle in [
        "time to first token",
        "time per output token",
        "end-to-end latency",
        "per GPU",
        "KV cache",
        "GiB",
        "Notes",
    ] {
        assert!(table.contains(needle), "`{needle}` not in:\n{table}");
    }
    // The CSV is full precision in SI units: the JSON's seconds and bytes exactly.
    let rows = csv_metrics(&ok(&["infer", &cfg, "--format", "csv"]));
    assert_eq!(metric(&rows, "ttft"), ttft);
    assert!(metric(&rows, "memory.weights") > 10e9);
}

#[test]
fn infer_max_batch() {
    let cfg = experiment("llama2-70b-h100.toml");
    let j = json(&["infer", &cfg, "--max-batch", "--format", "json"]);
    let n = j["max_batch"].as_u64().unwrap();
    assert!(n > 8, "max batch {n}");
    assert_eq!(j["memory"]["fits"], true);
    // One more sequence does not fit: the report is printed and the command fails.
    let over = format!("inference.batch={}", n + 1);
    let o = fails(
        &["infer", &cfg, "--set", &over],
        &[
            "does not fit",
            "KV cache",
            &format!("largest batch that fits these lengths is {n}"),
        ],
    );
    assert!(o.stdout.contains("DOES NOT FIT"), "{}", o.stdout);
    let table = ok(&["infer", &cfg, "--max-batch"]);
    assert!(table.contains("max_batch") && table.contains(&n.to_string()));
    let rows = csv_metrics(&ok(&["infer", &cfg, "--max-batch", "--format", "csv"]));
    assert_eq!(metric(&rows, "max_batch"), n as f64);
}

#[test]
fn infer_model_that_does_not_fit() {
    fails(
        &[
            "infer",
            &experiment("llama2-70b-h100.toml"),
            "--set",
            "inference.tp=1",
        ],
        &["does not fit", "weights", "not even a batch of 1 fits"],
    );
    fails(
        &[
            "infer",
            &experiment("llama2-70b-h100.toml"),
            "--set",
            "inference.tp=1",
            "--max-batch",
        ],
        &["inference.batch", "does not fit", "GB"],
    );
}

#[test]
fn infer_bad_inputs_name_the_key_and_the_rule() {
    let cfg = experiment("llama2-70b-h100.toml");
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["--set", "inference.batch=0"],
            vec!["inference.batch", ">= 1"],
        ),
        (
            vec!["--set", "inference.input_len=0"],
            vec!["inference.input_len"],
        ),
        (
            vec!["--set", "inference.output_len=0"],
            vec!["inference.output_len"],
        ),
        (
            vec!["--set", "inference.tp=3"],
            vec!["inference.tp", "must divide model.heads = 64"],
        ),
        // TP dividing the query heads but not the KV heads (48 heads, 12 KV heads, TP 8).
        (
            vec![
                "--set",
                "model.heads=48",
                "--set",
                "model.kv_heads=12",
                "--set",
                "model.head_dim=128",
            ],
            vec!["inference.tp", "model.kv_heads = 12"],
        ),
        (
            vec!["--set", "inference.tp=16"],
            vec!["inference.tp x inference.pp x inference.replicas", "8"],
        ),
        (
            vec!["--set", "inference.input_len=8000"],
            vec![
                "inference.input_len + inference.output_len",
                "model.seq_len = 4096",
            ],
        ),
        // fp8 on an A100: the device's formats are listed.
        (
            vec![
                "preset:a100-sxm4-80gb",
                "--set",
                "inference.weight_dtype=\"fp8\"",
                "--set",
                "inference.activation_dtype=\"fp8\"",
            ],
            vec!["inference.activation_dtype", "fp8", "bf16"],
        ),
        (
            vec!["--set", "inference.kv_dtype=\"fp5\""],
            vec!["inference.kv_dtype", "fp5"],
        ),
        (
            vec!["--set", "options.compute_memory_overlap=2.0"],
            vec!["options.compute_memory_overlap", "[0, 1]"],
        ),
        (vec!["--set", "inference.batch=-4"], vec!["inference.batch"]),
    ];
    for (extra, needles) in cases {
        let mut args = vec!["infer", cfg.as_str()];
        args.extend(extra);
        fails(&args, &needles);
    }
    fails(
        &["infer", "preset:llama2-70b", "preset:dgx-h100"],
        &["[inference]"],
    );
}

// ---- roofline of a model -------------------------------------------------------------------

fn gemms(extra: &[&str]) -> (String, Vec<Value>) {
    let cfg = experiment("roofline-llama2-70b.toml");
    let mut args = vec!["roofline", cfg.as_str()];
    args.extend(extra);
    args.extend(["--format", "json"]);
    let j = json(&args);
    let system = j["system"].as_str().unwrap().to_string();
    (system, j["gemms"].as_array().unwrap().clone())
}

#[test]
fn model_roofline_decode_is_memory_bound_large_prefill_gemms_compute_bound() {
    for (preset, device) in [(None, "A100"), (Some("preset:h100-sxm5-80gb"), "H100")] {
        let extra: Vec<&str> = preset.into_iter().collect();
        let (system, points) = gemms(&extra);
        assert!(system.contains(device), "{system}");
        let named = |phase: &str, name: &str| {
            points
                .iter()
                .find(|p| p["phase"] == phase && p["name"] == name)
                .unwrap_or_else(|| panic!("no {phase} {name} on {device}"))
                .clone()
        };
        for name in ["qkv_proj", "out_proj", "mlp_up", "mlp_down", "lm_head"] {
            let d = named("decode", name);
            assert!(
                d["limiter"].as_str().unwrap().starts_with("memory"),
                "{device} decode {name}: {d}"
            );
            assert!(
                f(&d, "intensity") < f(&d, "ridge"),
                "{device} decode {name}"
            );
            assert_eq!(d["m"], 1, "batch 1 decodes one row");
        }
        for name in ["qkv_proj", "mlp_up", "mlp_down"] {
            let p = named("prefill", name);
            assert_eq!(p["limiter"], "compute", "{device} prefill {name}: {p}");
            // The widest ones sit right of the datasheet ridge too (the bound above comes
            // from the timing model, whose achievable peak is below the datasheet's).
            if name != "qkv_proj" {
                assert!(
                    f(&p, "intensity") > f(&p, "ridge"),
                    "{device} prefill {name}"
                );
            }
            assert_eq!(p["m"], 2048);
        }
        for phase in ["prefill", "decode"] {
            let share: f64 = points
                .iter()
                .filter(|p| p["phase"] == phase)
                .map(|p| f(p, "share_of_phase_time"))
                .sum();
            assert!(
                share > 0.3 && share <= 1.0 + 1e-9,
                "{device} {phase}: {share}"
            );
        }
    }
}

#[test]
fn model_roofline_on_every_device_formats_and_phase() {
    let cfg = experiment("roofline-llama2-70b.toml");
    let mut ridges = Vec::new();
    for preset in ["preset:h200-sxm-141gb", "preset:b200-sxm-180gb"] {
        let (_, points) = gemms(&[preset]);
        ridges.push(f(&points[0], "ridge"));
    }
    assert!(ridges[0] != ridges[1], "{ridges:?}");
    let (_, decode) = gemms(&["--phase", "decode"]);
    assert!(!decode.is_empty() && decode.iter().all(|p| p["phase"] == "decode"));

    let table = ok(&["roofline", &cfg]);
    for needle in [
        "prefill", "decode", "qkv_proj", "FLOP/B", "ridge", "share %", "compute",
    ] {
        assert!(table.contains(needle), "`{needle}` not in:\n{table}");
    }
    let csv = ok(&["roofline", &cfg, "--format", "csv"]);
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("model,system,phase,gemm,"), "{header}");
    assert_eq!(lines.count(), 12, "6 ops x 2 phases:\n{csv}");

    let dir = tmpdir();
    let svg = dir.join("gemms.svg");
    let o = run_in(&dir, &["roofline", &cfg, "--plot", svg.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.contains("decode.mlp_up") && !s.contains("NaN"));
}

#[test]
fn model_roofline_bad_inputs() {
    fails(
        &["roofline", "preset:llama2-70b", "preset:h100-sxm5-80gb"],
        &["[inference]"],
    );
    fails(
        &[
            "roofline",
            &experiment("roofline-llama2-70b.toml"),
            "--set",
            "inference.tp=5",
        ],
        &["inference.tp", "model.heads = 64"],
    );
    fails(
        &[
            "roofline",
            &experiment("roofline-a100.toml"),
            "--phase",
            "decode",
        ],
        &["[model]"],
    );
}

/// A JSON report carries the configuration that produced it; fed back as a config file it
/// gives the same report (training and inference).
#[test]
fn json_reports_carry_a_reproducible_config() {
    let d = tmpdir();
    for (cmd, file, report_of) in [
        ("predict", "gpt3-175b-a100.toml", "report"),
        ("infer", "llama2-70b-h100.toml", ""),
    ] {
        let first = json(&[cmd, &experiment(file), "--format", "json"]);
        let config = &first["config"];
        assert!(config["model"]["layers"].as_u64().is_some(), "{config}");
        let path = d.join(format!("{cmd}.json"));
        std::fs::write(&path, serde_json::to_string(config).unwrap()).unwrap();
        let again = json(&[cmd, path.to_str().unwrap(), "--format", "json"]);
        let part = |v: &Value| {
            let mut v = v.clone();
            if let Some(o) = v.as_object_mut() {
                o.remove("config");
            }
            if report_of.is_empty() {
                v
            } else {
                v[report_of].clone()
            }
        };
        assert_eq!(part(&first), part(&again), "{cmd}");
    }
}

#[test]
fn suspicious_hardware_is_a_note_once_never_silent() {
    let exp = &experiment("gpt3-175b-a100.toml");
    let cases: &[(&str, &str)] = &[
        (
            "device.memory=[\"a100_sxm4_80gb_hbm\"]",
            "no on-chip memory tier",
        ),
        (
            "components.a100_sxm4_80gb_hbm.bandwidth_tbs=2039",
            "the device-memory bandwidth 2039 TB/s is outside the plausible range",
        ),
        (
            "components.a100_sxm4_80gb.matrix_tflops.bf16=312000",
            "matrix peak 312000 TFLOP/s is outside the plausible range",
        ),
    ];
    for (set, want) in cases {
        let o = ok(&["predict", exp, "--set", set]);
        let notes = o.split("Notes\n").nth(1).unwrap_or("");
        assert_eq!(notes.matches(want).count(), 1, "{set}:\n{o}");
        let v = json(&["predict", exp, "--set", set, "--format", "json"]);
        let n = v["notes"].as_array().unwrap();
        assert_eq!(
            n.iter()
                .filter(|x| x.as_str().unwrap().contains(want))
                .count(),
            1
        );
    }
    // The ridge point of the mistyped bandwidth is far from every known device too.
    let o = ok(&["predict", exp, "--set", cases[1].0]);
    assert!(o.contains("the ridge point"), "{o}");
    // The shipped experiment has none.
    assert!(!ok(&["predict", exp]).contains("suspicious"));
}

#[test]
fn published_figures_are_shown_beside_the_prediction() {
    let exp = experiment("korthikanti-175b-selective.toml");
    let t = ok(&["predict", &exp]);
    let line = t
        .lines()
        .find(|l| l.trim_start().starts_with("iteration time") && l.contains("published"))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(line.contains("13.75") && line.contains('%'), "{line}");
    assert!(t.contains("Korthikanti et al. 2022"), "{t}");
    let v = json(&["predict", &exp, "--format", "json"]);
    let c = &v["reference"]["compared"][0];
    assert_eq!(c["key"], "iteration_time_s");
    let (p, q) = (
        c["predicted"].as_f64().unwrap(),
        c["published"].as_f64().unwrap(),
    );
    assert_eq!(q, 13.75);
    assert!((c["difference"].as_f64().unwrap() - (p - q) / q).abs() < 1e-12);
    assert!((p - v["report"]["iteration_time"].as_f64().unwrap()).abs() < 1e-12);
    let rows = csv_metrics(&ok(&["predict", &exp, "--format", "csv"]));
    assert_eq!(metric(&rows, "reference.mfu"), 0.514);
    // Serving figures beside infer's metrics; a bad or unknown figure names its key.
    let inf = experiment("llama2-70b-h100.toml");
    let set = [
        "--set",
        "reference.source=\"a test\"",
        "--set",
        "reference.ttft_ms=800",
    ];
    let mut args = vec!["infer", inf.as_str()];
    args.extend(set);
    let t = ok(&args);
    assert!(
        t.contains("time to first token") && t.contains("published"),
        "{t}"
    );
    fails(
        &["predict", &exp, "--set", "reference.mfu=-1"],
        &["reference.mfu", "positive normal number"],
    );
    // A utilisation above 1 (it was shown as "published 200 %"), a subnormal figure (the
    // difference was +inf%).
    fails(
        &["predict", &exp, "--set", "reference.mfu=2"],
        &["reference.mfu", "at most 1"],
    );
    fails(
        &[
            "predict",
            &exp,
            "--set",
            "reference.iteration_time_s=1e-320",
        ],
        &[
            "reference.iteration_time_s",
            "1e-320",
            "positive normal number",
        ],
    );
    // A built-in component's value outside physics (it printed a 300-digit step time).
    for v in ["1e-300", "1e300"] {
        fails(
            &[
                "predict",
                &exp,
                "--set",
                &format!("components.a100_sxm4_80gb_hbm.bandwidth_tbs={v}"),
            ],
            &["bandwidth_tbs", "between 1e-4 and 1e4 TB/s", v],
        );
    }
    fails(
        &["predict", &exp, "--set", "reference.tflops=1"],
        &["reference.tflops", "did you mean"],
    );
}

/// A bare model and system (no `[plan]`) predict with the fastest plan a search finds, said
/// so (issue 44: `predict preset:llama3.1-70b preset:dgx-h100` said "no [plan]"): the step is
/// `perfcast search`'s best for the same global batch, and the plan is in the output. When no
/// plan fits, the error says why and what to change; a config for `infer` is still refused.
#[test]
fn a_bare_model_and_system_predict_with_the_searched_plan() {
    let dir = tmpdir();
    let base = [
        "preset:llama3-8b",
        "preset:dgx-h100",
        "--set",
        "system.devices=16",
    ];
    let mut args = vec!["predict"];
    args.extend_from_slice(&base);
    let table = run_in(&dir, &args);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table.stdout.contains("no [plan]: this is the fastest of")
            && table
                .stdout
                .contains("perfcast's default of about 4M tokens per step"),
        "{}",
        table.stdout
    );
    args.extend_from_slice(&["--format", "json"]);
    let v: Value = serde_json::from_str(&run_in(&dir, &args).stdout).unwrap();
    let predicted = v["report"]["iteration_time"].as_f64().unwrap();
    // 4M tokens of 8,192-token sequences: 512.
    assert_eq!(v["plan"]["global_batch"], 512);
    let mut search = vec!["search"];
    search.extend_from_slice(&base);
    search.extend_from_slice(&["--set", "search.global_batch=512", "--format", "json"]);
    let s = run_in(&dir, &search);
    assert_eq!(s.code, 0, "{}", s.stderr);
    let s: Value = serde_json::from_str(&s.stdout).unwrap();
    let best = s["plans"][0]["report"]["iteration_time"].as_f64().unwrap();
    assert_eq!(predicted, best);

    let big = run_in(
        &dir,
        &["predict", "preset:llama3.1-405b", "preset:dgx-h100"],
    );
    assert_eq!(big.code, 1, "{}", big.stdout);
    assert!(
        big.stderr.contains("no [plan] was given") && big.stderr.contains("more devices"),
        "{}",
        big.stderr
    );
    let infer = run_in(&dir, &["predict", &experiment("llama2-70b-h100.toml")]);
    assert_eq!(infer.code, 1);
    assert!(infer.stderr.contains("[plan]"), "{}", infer.stderr);
}

/// The shipped experiments are presets (what the wheel's command runs without the
/// repository): `preset:NAME` from any directory predicts what the file does.
#[test]
fn a_shipped_experiment_runs_as_a_preset_from_anywhere() {
    let from_file = json(&[
        "predict",
        &experiment("gpt3-175b-a100.toml"),
        "--format",
        "json",
    ]);
    let from_preset = json(&["predict", "preset:gpt3-175b-a100", "--format", "json"]);
    assert_eq!(from_file["report"], from_preset["report"]);
    let list = ok(&["config", "presets"]);
    assert!(
        list.lines()
            .any(|l| l.contains("preset:gpt3-175b-a100") && l.contains("experiments")),
        "{list}"
    );
}

/// Error bars on an accelerator no case measured say so (issue 44: the bars of measured GPUs
/// were put on an imagined one without a word); a shipped one gets no such note.
#[test]
fn error_bars_on_an_imagined_accelerator_say_what_they_are() {
    let dir = tmpdir();
    let h100 = std::fs::read_to_string(repo().join("configs/hardware/h100-sxm5-80gb.toml"))
        .unwrap()
        .replace("h100_sxm5_80gb", "x1")
        .replace(
            "name = \"NVIDIA H100-SXM5-80GB\"",
            "name = \"Imaginary X1\"",
        );
    let x1 = dir.join("x1.toml");
    std::fs::write(&x1, h100).unwrap();
    let imagined = ok(&["predict", "preset:llama3-8b-h100", x1.to_str().unwrap()]);
    assert!(
        imagined.contains("`Imaginary X1` is no accelerator of the validation cases"),
        "{imagined}"
    );
    let shipped = ok(&["predict", "preset:llama3-8b-h100"]);
    assert!(!shipped.contains("no accelerator"), "{shipped}");
}

/// Every JSON result says its layout's version first (issue 44: "JSON has no version"):
/// `"schema": "perfcast/KIND/1"`.
#[test]
fn json_results_carry_their_schema_version() {
    let serving = repo().join("configs/serving/llama3.1-8b-h100.toml");
    let serving = serving.to_str().unwrap();
    let (gpt3, llama2) = (
        experiment("gpt3-175b-a100.toml"),
        experiment("llama2-70b-h100.toml"),
    );
    let (roofline, llama3) = (
        experiment("roofline-a100.toml"),
        experiment("llama3-8b-h100.toml"),
    );
    for (args, kind) in [
        (vec!["predict", &gpt3], "predict"),
        (vec!["infer", &llama2], "infer"),
        (vec!["infer", &llama2, "--max-batch"], "infer-max-batch"),
        (vec!["roofline", &roofline], "roofline"),
        (vec!["search", &llama3], "search"),
        (vec!["serve", serving], "serve"),
    ] {
        let mut a: Vec<&str> = args;
        a.extend(["--format", "json"]);
        let text = ok(&a);
        let want = format!("{{\n  \"schema\": \"perfcast/{kind}/1\",\n");
        assert!(
            text.starts_with(&want),
            "{a:?}: {}",
            &text[..text.len().min(120)]
        );
    }
}
