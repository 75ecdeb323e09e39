//! Parallel strategies from a library through the command line: on every shipped training
//! experiment, `predict` and `search` with the seven built-in strategies loaded from
//! `parallel-builtins-lib` (named `lib/...` in `options.strategies`) print what the
//! compiled-in ones print; the example `ulysses` runs from its README's command; bad
//! strategy names and plans are errors naming the key and the plugin.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_testkit::plugins::build_rust;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::OnceLock;

mod common;
use common::{repo, Out};

/// The shipped experiments with a training plan (`tests/golden` keeps their outputs).
const EXPERIMENTS: [&str; 5] = [
    "gpt3-175b-a100",
    "korthikanti-175b-selective",
    "llama3-8b-h100",
    "llama3.1-70b-a100-search",
    "llama3.1-70b-h100-search",
];

const BUILTINS: [&str; 7] = [
    "tensor", "sequence", "context", "expert", "pipeline", "data", "zero",
];

struct Libs {
    builtins: String,
    ulysses: String,
}

fn libs() -> &'static Libs {
    static L: OnceLock<Libs> = OnceLock::new();
    L.get_or_init(|| {
        let dir = common::tmpdir("perfcast-cli-strategy-plugins");
        let v: Vec<PathBuf> = build_rust(&["parallel-builtins-lib", "ulysses"], &dir);
        Libs {
            builtins: v[0].to_str().unwrap().to_string(),
            ulysses: v[1].to_str().unwrap().to_string(),
        }
    })
}

fn perfcast(args: &[&str]) -> Out {
    let out = common::output(&mut common::command(&repo(), args));
    assert!(!out.stderr.contains("panicked at"), "{}", out.stderr);
    out
}

/// `--set options.strategies=[...]` naming `names`.
fn strategies(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    format!("options.strategies=[{}]", quoted.join(","))
}

/// `command config --format json` with `extra` arguments, minus the echoed configuration
/// and the search's timing.
fn json(command: &str, config: &str, extra: &[&str]) -> Value {
    let mut args = vec![command, config, "--format", "json"];
    args.extend(extra);
    let o = perfcast(&args);
    assert_eq!(o.code, 0, "perfcast {}: {}", args.join(" "), o.stderr);
    let mut v: Value = serde_json::from_str(&o.stdout).unwrap();
    let obj = v.as_object_mut().unwrap();
    obj.remove("config");
    obj.remove("summary");
    v
}

#[test]
fn the_builtins_from_a_library_print_what_the_compiled_in_ones_print() {
    let l = libs();
    let lib_names: Vec<String> = BUILTINS.map(|n| format!("lib/{n}")).to_vec();
    let set = strategies(&lib_names);
    let from_lib = ["--load", l.builtins.as_str(), "--set", set.as_str()];
    for name in EXPERIMENTS {
        let config = format!("configs/experiments/{name}.toml");
        for command in ["predict", "search"] {
            let a = json(command, &config, &[]);
            let b = json(command, &config, &from_lib);
            assert!(a == b, "{command} {name}: the library's output differs");
        }
    }
}

#[test]
fn ulysses_runs_from_its_readme_and_bad_plans_name_the_plugin() {
    let l = libs();
    let mut names: Vec<String> = BUILTINS.map(String::from).to_vec();
    names[2] = "example/ulysses".into();
    let set = strategies(&names);
    let config = "configs/experiments/llama3-8b-h100.toml";
    let run = |cp: &str| {
        let cp = format!("plan.cp={cp}");
        perfcast(&[
            "predict", config, "--load", &l.ulysses, "--set", &cp, "--set", &set, "--format",
            "json",
        ])
    };
    let ok = run("2");
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    let v: Value = serde_json::from_str(&ok.stdout).unwrap();
    assert!(v["report"]["breakdown"]["cp_comm"].as_f64().unwrap() > 0.0);
    // 20 heads of 128 on one tensor-parallel rank: cp 8 (all 8 devices) does not divide
    // them, which only Ulysses minds.
    let bad = perfcast(&[
        "predict",
        config,
        "--load",
        &l.ulysses,
        "--set",
        "plan.tp=1",
        "--set",
        "plan.cp=8",
        "--set",
        "plan.dp=1",
        "--set",
        "model.heads=20",
        "--set",
        "model.head_dim=128",
        "--set",
        "model.kv_heads=4",
        "--set",
        &set,
    ]);
    assert_ne!(bad.code, 0);
    assert!(
        bad.stderr.contains("example/ulysses") && bad.stderr.contains("plan.cp"),
        "{}",
        bad.stderr
    );
    // A strategy name nobody registered, without the library: the key and the names known.
    let missing = perfcast(&["predict", config, "--set", &set]);
    assert_ne!(missing.code, 0);
    assert!(
        missing.stderr.contains("example/ulysses") && missing.stderr.contains("context"),
        "{}",
        missing.stderr
    );
}
