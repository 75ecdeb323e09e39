//! End-to-end tests of `perfcast serve` and the deployment search (`perfcast search` with
//! `[serving_search]`) on the shipped serving configs: every output format, the JSON shape,
//! determinism, the plot, and bad input (exit codes, messages naming the key, the file and
//! the line; never a panic).

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common::{repo, Out};
use serde_json::Value;
use std::path::Path;

fn config(name: &str) -> String {
    repo()
        .join("configs/serving")
        .join(name)
        .display()
        .to_string()
}

fn run(args: &[&str]) -> Out {
    common::output(&mut common::command(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        args,
    ))
}

fn serve(extra: &[&str]) -> Out {
    let c = config("llama3.1-8b-h100.toml");
    let mut args = vec!["serve", c.as_str(), "--requests", "40"];
    args.extend_from_slice(extra);
    run(&args)
}

/// A mixture-of-experts model with latent attention served with attention data parallelism
/// (the shipped DeepSeek-R1 example): every request completes; the plan carries the expert
/// parallelism; each rank caches its own requests' latent KV, so the node holds `tp` times the
/// tokens it would with tensor-parallel attention (where every rank holds every latent).
/// A wide expert-parallel decode pool beside a narrow prefill one on one GB200 NVL72 (the
/// shipped DeepSeek-R1 example): each pool carries its own EP and attention DP, every request
/// completes, and a pool's bad EP is named by the pool's key.
#[test]
fn disaggregated_pools_with_their_own_expert_parallelism() {
    let c = config("deepseek-r1-gb200-nvl72-wide-ep.toml");
    let o = run(&[
        "serve",
        c.as_str(),
        "--requests",
        "64",
        "--concurrency",
        "64",
        "--format",
        "json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let pools = v["deployment"]["pools"].as_array().unwrap();
    let layout: Vec<_> = pools
        .iter()
        .map(|p| (p["plan"]["tp"].as_u64(), p["plan"]["ep"].as_u64()))
        .collect();
    assert_eq!(layout, [(Some(4), Some(4)), (Some(64), Some(64))]);
    assert_eq!(v["runs"][0]["completed"].as_u64(), Some(64));
    for (set, key) in [
        (
            "serving.disaggregated.decode={tp=64,ep=3,instances=1,attention_dp=false}",
            "`serving.disaggregated.decode.ep`",
        ),
        (
            "serving.disaggregated.prefill={tp=4,ep=0,instances=2}",
            "`serving.disaggregated.prefill.ep`",
        ),
    ] {
        let o = run(&["serve", c.as_str(), "--set", set]);
        assert_ne!(o.code, 0, "{set}");
        assert!(o.stderr.contains(key), "{set}: {}", o.stderr);
    }
}

/// Speculative decoding whose draft is timed on the devices: DeepSeek-R1's own MTP module
/// (one more MoE layer, its embedding and LM head shared) drafting 3 tokens accepted at the
/// published 0.85 halves TPOT but costs more than a free draft, and takes KV memory; a
/// separate draft model (Llama 3.1 8B for 70B) likewise; the bad inputs name their key.
#[test]
fn speculative_drafts_timed_on_the_devices() {
    let c = config("deepseek-r1-h200-dep8.toml");
    let json = |cfg: &str, extra: &[&str]| -> Value {
        let mut args = vec!["serve", cfg, "--requests", "64", "--format", "json"];
        args.extend_from_slice(&["--set", "serving.concurrency=16"]);
        args.extend_from_slice(extra);
        let o = run(&args);
        assert_eq!(o.code, 0, "{}", o.stderr);
        serde_json::from_str(&o.stdout).unwrap()
    };
    let tpot = |v: &Value| v["runs"][0]["tpot"]["mean"].as_f64().unwrap();
    let blocks = |v: &Value| v["runs"][0]["pools"][0]["kv_blocks"].as_f64().unwrap();
    let none = json(&c, &[]);
    let mtp = json(
        &c,
        &["--set", "serving.speculative={draft_len=3,method=\"mtp\"}"],
    );
    let spec = &mtp["deployment"]["speculative"];
    assert_eq!(spec["method"].as_str(), Some("mtp"));
    assert_eq!(spec["acceptance_rate"].as_f64(), Some(0.85));
    let free = json(
        &c,
        &[
            "--set",
            "serving.speculative={draft_len=3,acceptance_rate=0.85}",
        ],
    );
    assert!(
        tpot(&mtp) < 0.7 * tpot(&none),
        "{} {}",
        tpot(&mtp),
        tpot(&none)
    );
    assert!(tpot(&mtp) > tpot(&free), "{} {}", tpot(&mtp), tpot(&free));
    assert!(blocks(&mtp) < blocks(&free) && blocks(&mtp) > 0.8 * blocks(&free));

    // Llama 3.1 70B on 4 H100 from the presets alone.
    let l70 = "preset:llama3.1-70b";
    let l70_args = [
        "preset:h100-sxm5-80gb",
        "--set",
        "system.devices=4",
        "--set",
        "serving={tp=4,max_batch=64,max_num_tokens=8192,cuda_graphs=true,input_len=1024,\
         output_len=256}",
    ];
    let base = json(l70, &l70_args);
    let drafted = json(
        l70,
        &[
            &l70_args[..],
            &["--set"],
            &["serving.speculative={draft_len=4,method=\"draft_model\",\
             draft_model=\"llama3.1-8b\",acceptance_rate=0.8}"],
        ]
        .concat(),
    );
    assert!(
        tpot(&drafted) < tpot(&base),
        "{} {}",
        tpot(&drafted),
        tpot(&base)
    );
    // The 8B draft's weights and KV cache (32 of 80 layers' worth per token) take memory.
    let r = blocks(&drafted) / blocks(&base);
    assert!(r > 0.5 && r < 0.8, "{r}");

    for (set, key, what) in [
        (
            "serving.speculative={draft_len=2,method=\"mtp\"}",
            "serving.speculative.method",
            "no multi-token-prediction module",
        ),
        (
            "serving.speculative={draft_len=2,method=\"draft_model\",draft_model=\"lama3.1-8b\",acceptance_rate=0.7}",
            "serving.speculative.draft_model",
            "did you mean `llama3.1-8b`",
        ),
        (
            "serving.speculative={draft_len=2,method=\"draft_model\",draft_model=\"llama2-7b\",acceptance_rate=0.7}",
            "serving.speculative.draft_model",
            "share the target's tokenizer",
        ),
        (
            "serving.speculative={draft_len=2,method=\"draft_model\",acceptance_rate=0.7}",
            "serving.speculative.draft_model",
            "is required",
        ),
        (
            "serving.speculative={draft_len=2}",
            "serving.speculative.acceptance_rate",
            "is required",
        ),
        (
            "serving.speculative={draft_len=2,method=\"draft_model\",draft_model=\"llama3.1-8b\",acceptance_rate=0.7,draft_cost=0.1}",
            "serving.speculative.draft_cost",
            "is for method = \"ratio\"",
        ),
    ] {
        let o = run(&[&["serve", l70][..], &l70_args, &["--set", set]].concat());
        assert_ne!(o.code, 0, "{set}");
        assert!(
            o.stderr.contains(key) && o.stderr.contains(what),
            "{set}: {}",
            o.stderr
        );
    }
}

#[test]
fn moe_serving_with_attention_data_parallelism() {
    let c = config("deepseek-r1-h200-dep8.toml");
    let json = |extra: &[&str]| -> Value {
        let mut args = vec![
            "serve",
            c.as_str(),
            "--requests",
            "32",
            "--concurrency",
            "32",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert_eq!(o.code, 0, "{}", o.stderr);
        serde_json::from_str(&o.stdout).unwrap()
    };
    let dep = json(&[]);
    let plan = &dep["deployment"]["pools"][0]["plan"];
    assert_eq!(
        (plan["ep"].as_u64(), plan["attention_dp"].as_bool()),
        (Some(8), Some(true))
    );
    let r = &dep["runs"][0];
    assert_eq!(r["completed"].as_u64(), Some(32));
    assert!(r["output_tokens_per_s"].as_f64().unwrap() > 0.0);
    let tp = json(&["--set", "serving.attention_dp=false"]);
    let tokens = |v: &Value| v["runs"][0]["pools"][0]["kv_tokens"].as_f64().unwrap();
    // The whole attention on every rank leaves less memory: more than 8x, not far from it.
    let ratio = tokens(&dep) / tokens(&tp);
    assert!(ratio > 5.0 && ratio < 8.5, "{ratio}");
    // Expert parallelism that does not divide the tensor-parallel ranks is refused by name.
    let o = run(&[
        "serve",
        c.as_str(),
        "--set",
        "serving.attention_dp=false",
        "--set",
        "serving.ep=3",
    ]);
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains("`serving.ep` (from --set serving.ep=3)")
            && o.stderr.contains("must divide inference.tp = 8"),
        "{}",
        o.stderr
    );
}

#[test]
fn serve_formats_shape_and_determinism() {
    let o = serve(&["--format", "json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["model"], "Llama-3.1-8B");
    let r = &v["runs"][0];
    assert_eq!(
        (r["requests"].as_u64(), r["completed"].as_u64()),
        (Some(40), Some(40))
    );
    assert_eq!(r["load"], "rate");
    assert_eq!(r["offered_rate"].as_f64(), Some(8.0));
    assert!(r["ttft"]["p99"].as_f64().unwrap() >= r["ttft"]["p50"].as_f64().unwrap());
    assert_eq!(r["slo"][0]["slo"]["ttft_ms"].as_f64(), Some(200.0));
    assert_eq!(v["deployment"]["pools"][0]["role"], "aggregated");
    assert!(v["config"]["serving"].is_object());
    // Same seed, same bytes; another seed, other arrivals.
    assert_eq!(serve(&["--format", "json"]).stdout, o.stdout);
    assert_ne!(serve(&["--format", "json", "--seed", "3"]).stdout, o.stdout);
    let t = serve(&[]);
    assert_eq!(t.code, 0, "{}", t.stderr);
    for want in [
        "ttft.p90",
        "tpot.mean",
        "slo.goodput",
        "aggregated.kv_mean_occupancy",
    ] {
        assert!(t.stdout.contains(want), "{want}: {}", t.stdout);
    }
    let c = serve(&["--format", "csv", "--concurrency", "8"]);
    assert_eq!(c.code, 0, "{}", c.stderr);
    let lines: Vec<&str> = c.stdout.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("load,offered_rps,requests_per_s"));
    assert!(lines[1].starts_with("concurrency 8,"));
    // One unit across formats (issue 44): the CSV's TTFT is the JSON's, in seconds.
    let j = serve(&["--format", "json", "--concurrency", "8"]);
    let v: Value = serde_json::from_str(&j.stdout).unwrap();
    let col = lines[0]
        .split(',')
        .position(|h| h == "ttft_mean_s")
        .unwrap();
    let csv_ttft: f64 = lines[1].split(',').nth(col).unwrap().parse().unwrap();
    assert_eq!(csv_ttft, v["runs"][0]["ttft"]["mean"].as_f64().unwrap());
}

#[test]
fn serve_rates_curve_plot_and_trace() {
    let dir = common::tmpdir("perfcast-serve");
    let svg = dir.join("curve.svg");
    let svg_s = svg.display().to_string();
    let o = serve(&["--rates", "2,16,inf", "--plot", &svg_s, "--format", "json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[2]["load"], "burst");
    let ttft = |i: usize| runs[i]["ttft"]["mean"].as_f64().unwrap();
    assert!(ttft(0) < ttft(2));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("latency vs throughput"));
    let table = serve(&["--rates", "1,2"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert_eq!(
        table
            .stdout
            .lines()
            .filter(|l| l.starts_with("rate "))
            .count(),
        2
    );
    let trace = config("trace-example.csv");
    let t = serve(&["--trace", &trace, "--format", "json"]);
    // --requests does not apply to a trace.
    assert_eq!(t.code, 1);
    assert!(t.stderr.contains("do not apply to a trace"), "{}", t.stderr);
    let c = config("llama3.1-8b-h100.toml");
    let t = run(&["serve", &c, "--trace", &trace, "--format", "json"]);
    assert_eq!(t.code, 0, "{}", t.stderr);
    let v: Value = serde_json::from_str(&t.stdout).unwrap();
    assert_eq!(v["runs"][0]["completed"].as_u64(), Some(10));
    assert_eq!(v["runs"][0]["load"], "trace");
    let d = config("llama3.1-70b-dgx-h100-disaggregated.toml");
    let o = run(&["serve", &d, "--requests", "20", "--format", "json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["runs"][0]["pools"].as_array().unwrap().len(), 2);
    assert!(v["runs"][0]["kv_transfer"]["mean"].as_f64().unwrap() > 0.0);
    // 2^31 decode instances of TP 4: the device count saturates, it does not wrap to a few
    // devices that fit the system (and a simulation of 2^31 instances).
    let o = run(&[
        "serve",
        &d,
        "--set",
        "serving.disaggregated.decode.instances=2147483648",
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("more than system"), "{}", o.stderr);
}

#[test]
fn serve_bad_input() {
    let dir = common::tmpdir("perfcast-serve-bad");
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "arrival_s,input_len,output_len\n0,10,4\n0.5,-3,4\n").unwrap();
    let bad_s = bad.display().to_string();
    let c = config("llama3.1-8b-h100.toml");
    for (args, code, want) in [
        (vec!["--rate", "0"], 2, "a rate must be a finite number"),
        (vec!["--rate", "-2"], 2, "a rate must be a finite number"),
        (
            vec!["--rate", "fast"],
            2,
            "not a number of requests per second",
        ),
        (
            vec!["--rate", "2", "--concurrency", "3"],
            2,
            "cannot be used with",
        ),
        (vec!["--concurrency", "0"], 1, "--concurrency 0"),
        (vec!["--set", "serving.rate=0.0"], 1, "serving.rate"),
        (
            vec!["--set", "serving.kv_memory_fraction=0.0005"],
            1,
            "missing per device",
        ),
        (
            vec!["--set", "serving.chunk_size=10000"],
            1,
            "smaller than one prefill chunk",
        ),
        (vec!["--set", "serving.max_btach=4"], 1, "max_btach"),
        (
            vec![
                "--set",
                "serving.chunked_prefill=false",
                "--set",
                "serving.max_num_tokens=100",
            ],
            1,
            "chunked prefill is off",
        ),
        (vec!["--set", "slo.tpot_ms=0.0"], 1, "slo.tpot_ms"),
        // A KV block that does not tile the model's context (Llama 3.1: 131,072 tokens).
        (
            vec!["--set", "serving.kv_block_size=48"],
            1,
            "does not divide the model's context of 131072 tokens",
        ),
        // More clients in a closed loop than requests, from the command line or the file.
        (
            vec!["--concurrency", "6"],
            1,
            "concurrency 6 (from --concurrency): above the 5 requests simulated (from --requests)",
        ),
        (
            vec![
                "--set",
                "serving.concurrency=8",
                "--set",
                "serving.requests=7",
            ],
            1,
            "is above serving.requests = 7",
        ),
    ] {
        let mut a = vec!["serve", c.as_str(), "--requests", "5"];
        a.extend(args.iter().copied());
        let o = run(&a);
        assert_eq!(o.code, code, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(want), "{args:?}: {}", o.stderr);
        assert!(!o.stderr.contains("internal error"), "{}", o.stderr);
    }
    // `[inference]`'s lengths read for an unset `serving.input_len`/`output_len` are checked as
    // `infer` checks them (a zero printed NaN for TTFT and TPOT with exit 0).
    let roofline = repo().join("configs/experiments/roofline-llama2-70b.toml");
    for key in ["input_len", "output_len"] {
        let set = format!("inference.{key}=0");
        let o = run(&["serve", roofline.to_str().unwrap(), "--set", &set]);
        assert_eq!(o.code, 1, "{set}: {}", o.stderr);
        assert!(
            o.stderr.contains(&format!("`inference.{key}`"))
                && o.stderr
                    .contains(&format!("for serving.{key}, which is unset")),
            "{set}: {}",
            o.stderr
        );
    }
    // 10^8 requests asked for one 8.8 GB allocation before a request ran.
    for (args, want) in [
        (
            ["--requests", "100000000"],
            "`--requests 100000000`: must be at most 10000000",
        ),
        (
            ["--set", "serving.requests=100000000"],
            "must be at most 10000000",
        ),
    ] {
        let o = run(&["serve", &c, args[0], args[1]]);
        assert_eq!(o.code, 1, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(want), "{args:?}: {}", o.stderr);
    }
    let o = run(&["serve", &c, "--trace", &bad_s]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .contains("bad.csv: line 3: `input_len` = -3 is negative"),
        "{}",
        o.stderr
    );
    // A config without [serving] says what it needs.
    let exp = repo().join("configs/experiments/gpt3-175b-a100.toml");
    let o = run(&["serve", &exp.display().to_string()]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("no `[serving]`"), "{}", o.stderr);
}

#[test]
fn deployment_search_outputs_and_infeasible_slo() {
    let c = config("llama3.1-70b-dgx-h100-search.toml");
    let small = [
        "--set",
        "serving_search.tp=[4, 8]",
        "--set",
        "serving_search.max_batch=[32]",
        "--set",
        "serving_search.max_num_tokens=[4096]",
        "--set",
        "serving_search.chunk_size=[4096]",
        "--set",
        "serving_search.prefill_tp=[4]",
        "--set",
        "serving_search.decode_tp=[4]",
        "--set",
        "serving.output_len=20",
    ];
    let mut a = vec!["search", c.as_str(), "--format", "json"];
    a.extend(small);
    let o = run(&a);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    // TP 4 x2 and TP 8 x1 aggregated, 1 + 1 disaggregated.
    assert_eq!(v["configurations"].as_u64(), Some(3));
    assert!(!v["pareto"].as_array().unwrap().is_empty());
    assert_eq!(v["best"].as_array().unwrap().len(), 2);
    let mut t = vec!["search", c.as_str()];
    t.extend(small);
    let o = run(&t);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o
        .stdout
        .contains("Pareto front, tokens/s per GPU vs tokens/s per user"));
    assert!(
        o.stdout.contains("best under TTFT <= 2000 ms"),
        "{}",
        o.stdout
    );
    let mut csv = vec!["search", c.as_str(), "--format", "csv"];
    csv.extend(small);
    let o = run(&csv);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("list,deployment,disaggregated,tp"));
    // An SLO nothing meets: the report, then an error naming the closest deployment.
    let mut bad = vec!["search", c.as_str(), "--set", "slo.ttft_ms=0.01"];
    bad.extend(small);
    let o = run(&bad);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stdout.contains("no deployment meets"), "{}", o.stdout);
    assert!(
        o.stderr.contains("the closest is `") && o.stderr.contains("relaxed"),
        "{}",
        o.stderr
    );
    let mut obj = vec!["search", c.as_str(), "--objective", "time"];
    obj.extend(small);
    let o = run(&obj);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("--objective applies to training"),
        "{}",
        o.stderr
    );
}

/// The shipped DeepSeek-R1 rack search, narrowed: every aggregated TP walks its expert layouts
/// (EP 1, EP = TP, attention DP), each disaggregated pool its own, and the best deployment
/// under the SLO is one of them.
#[test]
fn moe_rack_search_walks_the_expert_layouts() {
    let c = config("deepseek-r1-gb200-nvl72-search.toml");
    let o = run(&[
        "search",
        c.as_str(),
        "--format",
        "json",
        "--set",
        "serving_search.tp=[8]",
        "--set",
        "serving_search.max_batch=[64]",
        "--set",
        "serving_search.max_num_tokens=[8192]",
        "--set",
        "serving_search.prefill_tp=[8]",
        "--set",
        "serving_search.decode_tp=[64]",
        "--set",
        "serving_search.concurrency=[16]",
        "--set",
        "serving.output_len=16",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    // 3 aggregated layouts of TP 8 (x9 instances); 3 prefill x 3 decode layouts of the one
    // split that fits (1 x TP 8 + 1 x TP 64).
    assert_eq!(v["configurations"].as_u64(), Some(12), "{}", o.stdout);
    let labels = o.stdout;
    for layout in ["tp8 ep1", "tp8 ep8", "tp8 dep8", "tp64 dep64"] {
        assert!(labels.contains(layout), "{layout} missing");
    }
}

/// SGLang's scheduling from the command line: prefill-first batching and the admission
/// reserve are named in the deployment line and change the run; out-of-range or unknown
/// values are errors naming the key, with a non-zero exit.
#[test]
fn engine_scheduling_policies_from_the_command_line() {
    let c = config("llama3.1-8b-h100.toml");
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", c.as_str(), "--requests", "200"];
        args.extend_from_slice(extra);
        run(&args)
    };
    let plain = serve(&[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let sglang = serve(&[
        "--set",
        "serving.batching=\"prefill-first\"",
        "--set",
        "serving.kv_admission=\"on-demand\"",
        "--set",
        "serving.admission_reserve=0.7",
    ]);
    assert_eq!(sglang.code, 0, "{}", sglang.stderr);
    assert!(
        sglang.stdout.contains("prefill-first batching")
            && sglang
                .stdout
                .contains("keeping 0.7 of the running outputs free"),
        "{}",
        sglang.stdout
    );
    assert!(!plain.stdout.contains("prefill-first"));
    assert_ne!(plain.stdout, sglang.stdout);
    for (set, says) in [
        ("serving.admission_reserve=1.5", "must be in [0, 1]"),
        ("serving.batching=\"first\"", "prefill-first"),
    ] {
        let o = serve(&["--set", set]);
        assert_ne!(o.code, 0, "{set}");
        assert!(
            o.stderr.contains(set.split('=').next().unwrap()) && o.stderr.contains(says),
            "{set}: {}",
            o.stderr
        );
    }
}

/// Attention tensor parallelism inside attention data parallelism from a serving config:
/// DeepSeek-R1 on eight H200 as four attention groups of two ranks (SGLang `--tp 8 --dp 4
/// --enable-dp-attention`), named in the deployment line and between plain DEP8 and TP8 in
/// KV capacity; `attention_tp` that does not divide `tp`, or without `attention_dp`, is refused
/// with the key named.
#[test]
fn attention_tensor_parallelism_inside_data_parallelism_from_a_config() {
    let c = config("deepseek-r1-h200-dep8.toml");
    let serve = |extra: &[&str]| {
        let mut args = vec![
            "serve",
            c.as_str(),
            "--requests",
            "64",
            "--concurrency",
            "64",
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let dep8 = serve(&[]);
    assert_eq!(dep8.code, 0, "{}", dep8.stderr);
    assert!(
        dep8.stdout.contains("tp8 pp1 ep8 (attention dp8 x tp1)"),
        "{}",
        dep8.stdout
    );
    let groups = serve(&["--set", "serving.attention_tp=2"]);
    assert_eq!(groups.code, 0, "{}", groups.stderr);
    assert!(
        groups.stdout.contains("(attention dp4 x tp2)"),
        "{}",
        groups.stdout
    );
    assert_ne!(dep8.stdout, groups.stdout);
    for (sets, says) in [
        (
            &["--set", "serving.attention_tp=3"][..],
            "divide inference.tp = 8",
        ),
        (
            &[
                "--set",
                "serving.attention_tp=2",
                "--set",
                "serving.attention_dp=false",
            ][..],
            "set inference.attention_dp = true",
        ),
    ] {
        let o = serve(sets);
        assert_ne!(o.code, 0, "{sets:?}");
        assert!(
            o.stderr.contains("attention_tp") && o.stderr.contains(says),
            "{sets:?}: {}",
            o.stderr
        );
    }
}
