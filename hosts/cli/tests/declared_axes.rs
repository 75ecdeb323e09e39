//! Declared axes through the command line: the example `hsdp` strategy
//! (`plugins/examples/hsdp`, loaded with `--load` as its README says) and its `shard` axis
//! (`plan.axes.shard`) on a shipped experiment, `config explain --all` listing the axis, bad
//! axis keys and degrees as errors naming the key, and inference, serving and the deployment
//! search refusing declared axes.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::sync::OnceLock;

use crate::common;
use crate::common::{repo, Out};

const CONFIG: &str = "configs/experiments/llama3-8b-h100.toml";
const HSDP: &str =
    r#"options.strategies=["tensor","sequence","context","expert","pipeline","example/hsdp"]"#;

/// The example library, built once.
fn lib() -> &'static str {
    static L: OnceLock<String> = OnceLock::new();
    L.get_or_init(|| {
        let dir = common::tmpdir("perfcast-cli-declared-axes");
        let lib = perfcast_testkit::plugins::build_rust(&["hsdp"], &dir).remove(0);
        lib.to_str().unwrap().to_string()
    })
}

/// `example/hsdp` in use, ZeRO-3, and `plan.axes.shard = N`.
fn hsdp_args(shard: &str) -> Vec<String> {
    [
        HSDP,
        "plan.zero_stage=3",
        &format!("plan.axes.shard={shard}"),
    ]
    .iter()
    .flat_map(|s| ["--set".to_string(), s.to_string()])
    .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `perfcast ARGS --load LIB`.
fn perfcast(args: &[&str]) -> Out {
    let mut args = args.to_vec();
    args.extend(["--load", lib()]);
    let out = common::output(&mut common::command(&repo(), &args));
    assert!(!out.stderr.contains("panicked at"), "{}", out.stderr);
    out
}

fn report(extra: &[&str]) -> Value {
    let mut args = vec!["predict", CONFIG, "--format", "json"];
    args.extend(extra);
    let o = perfcast(&args);
    assert_eq!(o.code, 0, "perfcast {}: {}", args.join(" "), o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    v["report"].clone()
}

/// The experiment runs TP 2 on 8 GPUs: one shard group of 4 (`dp` derived as 1) is ZeRO-3
/// over 4 data-parallel ranks, bit for bit (its collectives on the `shard` ledger); 2
/// replicas of shard groups of 2 run (the plan line names the axis) and shard the weights 2
/// ways instead of 4 (Zhao et al. 2023's hand count); the example's README says what the
/// command prints.
#[test]
fn hsdp_from_the_command_line() {
    let zero3 = report(&["--set", "plan.zero_stage=3"]);
    let mut one_group = report(&strs(&hsdp_args("4")));
    // The same report, but the gathers and reduce-scatters are booked on the `shard` ledger.
    let b = &mut one_group["breakdown"];
    let moved = zero3["breakdown"]["dp_comm"].as_f64().unwrap()
        + zero3["breakdown"]["zero_comm"].as_f64().unwrap();
    let shard = b["axes"]["shard"].as_f64().unwrap();
    assert!((shard - moved).abs() <= 1e-12 * moved, "{shard} vs {moved}");
    assert_eq!(
        (b["dp_comm"].as_f64(), b["zero_comm"].as_f64()),
        (Some(0.0), Some(0.0))
    );
    b["dp_comm"] = zero3["breakdown"]["dp_comm"].clone();
    b["zero_comm"] = zero3["breakdown"]["zero_comm"].clone();
    b.as_object_mut().unwrap().remove("axes");
    one_group["bottleneck"] = zero3["bottleneck"].clone();
    assert_eq!(one_group, zero3);
    let two = hsdp_args("2");
    let mut args = vec!["predict", CONFIG];
    args.extend(strs(&two));
    let o = perfcast(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("dp=2 ") && o.stdout.contains("axes.shard=2"),
        "{}",
        o.stdout
    );
    let hybrid = report(&strs(&two));
    let weights = |r: &Value| r["memory"]["first_stage"]["weights"].as_f64().unwrap();
    assert_eq!(weights(&hybrid), 2.0 * weights(&zero3));
    let gib = |b: f64| b / (1u64 << 30) as f64;
    let at = |r: &Value, k: &[&str]| k.iter().fold(r, |v, k| &v[*k]).as_f64().unwrap();
    let said = format!(
        "the shard group of 2 with 2 replicas takes {:.2} s a step, within 0.1% of ZeRO-3 \
         over 4 data-parallel ranks ({:.2} s); each device holds {:.2} GiB of weights \
         instead of {:.2} (the state sharded 2 ways instead of 4: Zhao et al.'s trade of memory \
         for traffic kept inside the node), and the report books {:.2} s of exposed gathers and \
         reduce-scatters on the `shard` ledger and {:.2} s of the replicas' all-reduce as DP \
         comm. With one group of 4 (`plan.axes.shard=4`, `dp` derived as 1) it prints what \
         ZeRO-3 over 4 ranks prints, bit for bit, with the {:.2} s of ZeRO-3's gathers and \
         reduce-scatters on the `shard` ledger.",
        at(&hybrid, &["iteration_time"]),
        at(&zero3, &["iteration_time"]),
        gib(weights(&hybrid)),
        gib(weights(&zero3)),
        at(&hybrid, &["breakdown", "axes", "shard"]),
        at(&hybrid, &["breakdown", "dp_comm"]),
        shard,
    );
    let (a, z) = (
        at(&hybrid, &["iteration_time"]),
        at(&zero3, &["iteration_time"]),
    );
    assert!((a / z - 1.0).abs() < 1e-3, "{a} vs {z}");
    let fold = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let readme = std::fs::read_to_string(repo().join("plugins/examples/hsdp/README.md")).unwrap();
    assert!(
        fold(&readme).contains(&fold(&said)),
        "plugins/examples/hsdp/README.md should say: {said}"
    );
}

/// The README's "load" command: the library's strategy, its parameters and their sources.
#[test]
fn the_example_describes_itself() {
    let o = perfcast(&["plugins", "--describe", "example/hsdp"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for part in [
        "parallel_strategy `example/hsdp`",
        "prefetch_efficiency",
        "reshard_after_forward",
        "PyTorch FSDP reshard_after_forward",
    ] {
        assert!(o.stdout.contains(part), "{part}: {}", o.stdout);
    }
}

#[test]
fn explain_lists_an_absent_axis_at_degree_one() {
    let o = perfcast(&["config", "explain", "--all", CONFIG, "--set", HSDP]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let line = o
        .stdout
        .lines()
        .find(|l| l.starts_with("plan.axes.shard"))
        .unwrap_or_else(|| panic!("{}", o.stdout));
    assert!(
        line.contains("declared by strategy `example/hsdp`"),
        "{line}"
    );
}

/// (arguments, what stderr says): each a non-zero exit naming the key.
#[test]
fn bad_axes_are_errors_naming_the_key() {
    let table: [(&[&str], &str); 5] = [
        (
            &[
                "--set",
                HSDP,
                "--set",
                "plan.zero_stage=3",
                "--set",
                "plan.axes.shrad=2",
            ],
            "did you mean `shard`",
        ),
        (
            &["--set", "plan.axes.shard=2"],
            "no strategy in use declares an axis",
        ),
        (
            &[
                "--set",
                HSDP,
                "--set",
                "plan.zero_stage=3",
                "--set",
                "plan.axes.shard=0",
            ],
            "plan.axes.shard",
        ),
        (
            &["--set", HSDP, "--set", "plan.axes.shard=2"],
            "plan.zero_stage",
        ),
        (
            &[
                "--set",
                HSDP,
                "--set",
                "plan.zero_stage=3",
                "--set",
                "plan.axes.shard=2",
                "--set",
                "plan.dp=3",
            ],
            "x plan.axes.shard = 2 x 1 x 3 x 1 x 2 = 12",
        ),
    ];
    for (extra, want) in table {
        let mut args = vec!["predict", CONFIG];
        args.extend(extra);
        let o = perfcast(&args);
        assert_ne!(o.code, 0, "{}", args.join(" "));
        assert!(o.stderr.contains(want), "{}: {}", args.join(" "), o.stderr);
    }
}

/// `[search] axes.shard` from the command line: the CSV gains an `axes` column naming each
/// plan's degree, and every plan's shard groups and replicas fill the 8 GPUs.
#[test]
fn search_walks_the_shard_axis() {
    let o = perfcast(&[
        "search",
        CONFIG,
        "--set",
        HSDP,
        "--set",
        "search.axes.shard=[2,4,8]",
        "--set",
        "search.zero_stage=[3]",
        "--set",
        "search.tp=[1]",
        "--set",
        "plan.zero_stage=3",
        "--top",
        "20",
        "--format",
        "csv",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let mut lines = o.stdout.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (dp, pp, axes) = (col("dp"), col("pp"), col("axes"));
    let mut seen = Vec::new();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let shard: u32 = cells[axes].trim_start_matches("shard=").parse().unwrap();
        let dp: u32 = cells[dp].parse().unwrap();
        let pp: u32 = cells[pp].parse().unwrap();
        assert_eq!(dp * pp * shard, 8, "{line}");
        seen.push(shard);
    }
    assert!(!seen.is_empty());
    let o = perfcast(&["search", CONFIG, "--set", "search.axes.shard=[2]"]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("search.axes.shard"), "{}", o.stderr);
}

/// Declared axes are training's: `infer`, `serve` and the deployment search refuse them (and
/// the strategies) with a non-zero exit naming the key and saying so, even with a strategy
/// that declares one loaded.
#[test]
fn inference_and_serving_refuse_declared_axes() {
    let infer = "configs/experiments/llama2-70b-h100.toml";
    let serve = "configs/serving/llama3.1-8b-h100.toml";
    let deploy = "configs/serving/llama3.1-70b-dgx-h100-search.toml";
    // (arguments, the key stderr names, what it says)
    let table: [(&[&str], &str, &str); 5] = [
        (
            &["infer", infer, "--set", "inference.axes.shard=2"],
            "`inference.axes`",
            "declared axes are for training",
        ),
        (
            &["infer", infer, "--set", HSDP],
            "`options.strategies`",
            "parallel strategies are chosen for training",
        ),
        (
            &["serve", serve, "--set", "serving.axes.shard=2"],
            "`serving.axes`",
            "declared axes are for training",
        ),
        (
            &["search", deploy, "--set", "serving_search.axes.shard=[2]"],
            "`serving_search.axes`",
            "declared axes are for training",
        ),
        (
            &["search", deploy, "--set", "search.axes.shard=[2]"],
            "`search` (from --set search.axes.shard=[2])",
            "declared axes (`search.axes.NAME`) are for training only",
        ),
    ];
    for (args, key, why) in table {
        let o = perfcast(args);
        assert_ne!(o.code, 0, "{}", args.join(" "));
        assert!(
            o.stderr.contains(key) && o.stderr.contains(why),
            "{}: {}",
            args.join(" "),
            o.stderr
        );
    }
}
