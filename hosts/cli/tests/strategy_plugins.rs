//! Parallel strategies from a library through the command line: on every shipped training
//! experiment, `predict` and `search` with the seven built-in strategies loaded from
//! `execution-builtins-lib` (Rust ABI 1.2, named `lib/...` in `options.strategies`), and with
//! the built-in `tensor` written in C (`plugins/examples/tensor-c`, C ABI 1.4), print what the
//! compiled-in ones print; the examples `ulysses` and `tp2d` (a declared axis from C, C ABI
//! 1.7) run from their READMEs' commands, and a search walks `tp2d`'s axis; bad strategy
//! names, plans, parameters and answers are errors naming the key and the plugin.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_testkit::plugins::{build_rust, c_one_component, cc_plugin_source, cc_shared};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::common;
use crate::common::{repo, Out};

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
    dragonfly_plus: String,
    hsdp: String,
}

fn libs() -> &'static Libs {
    static L: OnceLock<Libs> = OnceLock::new();
    L.get_or_init(|| {
        let dir = common::tmpdir("perfcast-cli-strategy-plugins");
        let v: Vec<PathBuf> = build_rust(
            &[
                "execution-builtins-lib",
                "ulysses",
                "dragonfly-plus",
                "hsdp",
            ],
            &dir,
        );
        let s = |i: usize| v[i].to_str().unwrap().to_string();
        Libs {
            builtins: s(0),
            ulysses: s(1),
            dragonfly_plus: s(2),
            hsdp: s(3),
        }
    })
}

/// `plugins/examples/tensor-c/tensor_c.c`, built without floating-point contraction (so that
/// its arithmetic is the Rust code's, operation for operation, on every target).
fn tensor_c() -> &'static String {
    static L: OnceLock<String> = OnceLock::new();
    L.get_or_init(|| {
        let dir = common::tmpdir("perfcast-cli-tensor-c");
        let src = repo().join("plugins/examples/tensor-c/tensor_c.c");
        let lib = cc_shared(&dir, &src, "libtensor_c.so", &["-ffp-contract=off"]);
        lib.to_str().unwrap().to_string()
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
    // The strategies by name (`predict` reports them: `lib/tensor` is not `tensor`); the
    // rest of the network section must agree.
    if let Some(n) = obj.get_mut("network").and_then(Value::as_object_mut) {
        n.remove("strategies");
    }
    v
}

#[test]
fn the_builtins_from_a_library_print_what_the_compiled_in_ones_print() {
    let l = libs();
    let lib_names: Vec<String> = BUILTINS.map(|n| format!("lib/{n}")).to_vec();
    let set = strategies(&lib_names);
    // The library also registers the built-in schedules and policies (as `lib/...`), which a
    // search walks by default: name the built-in policies so both walk the same plans.
    let policies = "search.recompute=[\"none\",\"selective\",\"full\"]";
    for name in EXPERIMENTS {
        let config = format!("configs/experiments/{name}.toml");
        for command in ["predict", "search"] {
            let same = ["--set", policies];
            let a = json(command, &config, &same);
            let b = json(
                command,
                &config,
                &["--load", &l.builtins, "--set", &set, "--set", policies],
            );
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
    assert_eq!(v["network"]["strategies"][2], "example/ulysses");
    // The table names the loaded strategy and not the built-in ring's `cp_comm` (issue 44).
    let table = perfcast(&[
        "predict",
        config,
        "--load",
        &l.ulysses,
        "--set",
        "plan.cp=2",
        "--set",
        &set,
    ]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    let head: String = table.stdout.lines().take(3).collect::<Vec<_>>().join("\n");
    assert!(
        head.contains("strategies: tensor, sequence, example/ulysses") && !head.contains("cp_comm"),
        "{head}"
    );
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

/// The experiment `name` with `body` appended (TOML), as a config file.
fn config_with(name: &str, tag: &str, body: &str) -> String {
    let dir = common::tmpdir(&format!("perfcast-cli-strategy-cfg-{tag}"));
    let cfg = dir.join("cfg.toml");
    let text = format!(
        "include = [\"{}\"]\n{body}\n",
        repo()
            .join(format!("configs/experiments/{name}.toml"))
            .display()
    );
    std::fs::write(&cfg, text).unwrap();
    cfg.to_str().unwrap().to_string()
}

#[test]
fn tensor_in_c_prints_what_the_compiled_in_tensor_prints() {
    let lib = tensor_c();
    let mut names: Vec<String> = BUILTINS.map(String::from).to_vec();
    names[0] = "example/tensor-c".into();
    let set = strategies(&names);
    let from_c = ["--load", lib.as_str(), "--set", set.as_str()];
    for name in EXPERIMENTS {
        let config = format!("configs/experiments/{name}.toml");
        for command in ["predict", "search"] {
            let a = json(command, &config, &[]);
            let b = json(command, &config, &from_c);
            assert!(a == b, "{command} {name}: the C strategy's output differs");
        }
    }
    // Sequence parallelism and decomposed overlap at a partial efficiency, the parameter
    // given to each under its own name.
    let plan = [
        "--set",
        "plan.sp=true",
        "--set",
        "plan.tp_comm_overlap=true",
    ];
    let builtin = config_with(
        "gpt3-175b-a100",
        "builtin",
        "[options.strategy_params.tensor]\noverlap_efficiency = 0.6",
    );
    let c = config_with(
        "gpt3-175b-a100",
        "c",
        "[options.strategy_params.\"example/tensor-c\"]\noverlap_efficiency = 0.6",
    );
    let a = json("predict", &builtin, &plan);
    let mut args = plan.to_vec();
    args.extend(from_c);
    let b = json("predict", &c, &args);
    assert!(a == b, "sp + overlap: the C strategy's output differs");
    assert!(a["report"]["breakdown"]["hidden_comm"].as_f64().unwrap() > 0.0);
    // Built against earlier minors (C ABI 1.4, the first with strategies; 1.6, the one before
    // declared axes, whose plan it reads as the 1.4 prefix), it loads as such on this host
    // and prints the same.
    let dir = common::tmpdir("perfcast-cli-tensor-c-old");
    let src = repo().join("plugins/examples/tensor-c/tensor_c.c");
    let config = "configs/experiments/gpt3-175b-a100.toml";
    let want = json("predict", config, &[]);
    for minor in [4, 6] {
        let old = cc_shared(
            &dir,
            &src,
            &format!("libtensor_c_1_{minor}.so"),
            &[
                "-ffp-contract=off",
                &format!("-DPERFCAST_PLUGIN_ABI_MINOR={minor}"),
            ],
        );
        let old = old.to_str().unwrap();
        let listed = perfcast(&["plugins", "--load", old]);
        let abi = format!("c 1.{minor}");
        assert!(
            listed
                .stdout
                .lines()
                .any(|l| l.contains("example/tensor-c") && l.contains(&abi)),
            "{}",
            listed.stdout
        );
        assert!(json("predict", config, &["--load", old, "--set", &set]) == want);
    }
}

/// A C strategy whose `comms` answers `body` (C statements filling `out[0]`), built here.
fn misbehaving(name: &str, axis: u32, body: &str) -> String {
    let dir = common::tmpdir(&format!("perfcast-cli-strategy-{name}"));
    let src = format!(
        r#"
static int32_t axis(const void *self, uint32_t *out, char *err, size_t cap) {{
    (void)self; (void)err; (void)cap; *out = {axis}; return PERFCAST_OK;
}}
static int32_t comms(const void *self, const perfcast_plan *plan, const perfcast_layer_dims *d,
                     perfcast_comm_op *out, size_t cap, size_t *n, char *err, size_t ecap) {{
    (void)self; (void)plan; (void)d; (void)cap; (void)err; (void)ecap;
    out[0].klass = PERFCAST_CLASS_TENSOR; out[0].phase = PERFCAST_PHASE_FORWARD;
    out[0].kind = PERFCAST_COLLECTIVE_ALL_REDUCE; out[0].group = PERFCAST_GROUP_TENSOR;
    out[0].exposed = 1; out[0].bytes = 1e6; out[0].count = 1.0;
    *n = 1;
    {body}
    return PERFCAST_OK;
}}
static const perfcast_parallel_strategy_vtable vt = {{
    .struct_size = sizeof(perfcast_parallel_strategy_vtable), .axis = axis, .comms = comms,
}};
"#
    ) + &c_one_component("PERFCAST_CATEGORY_PARALLEL_STRATEGY", "bad/tp", "bad");
    cc_plugin_source(&dir, name, &src)
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn bad_c_strategies_and_parameters_are_errors_naming_the_plugin() {
    let mut names: Vec<String> = BUILTINS.map(String::from).to_vec();
    names[0] = "bad/tp".into();
    let set = strategies(&names);
    let config = "configs/experiments/gpt3-175b-a100.toml";
    let cases = [
        ("nan", 0, "out[0].bytes = 0.0 / 0.0;", "bytes"),
        ("negative", 0, "out[0].count = -2.0;", "count"),
        ("group", 0, "out[0].group = 0;", "group"),
        ("many", 0, "*n = cap + 1;", "collectives"),
        ("axis", 42, "", "axis code 42"),
    ];
    for (name, axis, body, want) in cases {
        let lib = misbehaving(name, axis, body);
        let o = perfcast(&["predict", config, "--load", &lib, "--set", &set]);
        assert_ne!(o.code, 0, "{name}");
        assert!(
            o.stderr.contains("bad/tp") && o.stderr.contains(want),
            "{name}: {}",
            o.stderr
        );
    }
    // The C copy of tensor: a parameter out of range and a plan it refuses.
    let mut names: Vec<String> = BUILTINS.map(String::from).to_vec();
    names[0] = "example/tensor-c".into();
    let set = strategies(&names);
    let bad_param = config_with(
        "gpt3-175b-a100",
        "bad-param",
        "[options.strategy_params.\"example/tensor-c\"]\noverlap_efficiency = 1.5",
    );
    let o = perfcast(&["predict", &bad_param, "--load", tensor_c(), "--set", &set]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("overlap_efficiency"), "{}", o.stderr);
    let o = perfcast(&[
        "predict",
        config,
        "--load",
        tensor_c(),
        "--set",
        &set,
        "--set",
        "plan.tp=64",
        "--set",
        "plan.pp=1",
        "--set",
        "plan.dp=16",
    ]);
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains("example/tensor-c") && o.stderr.contains("model.heads = 96"),
        "{}",
        o.stderr
    );
}

/// Isolated (`--isolate`: a child plugin host), every execution category prints what it
/// prints in process: the Rust and C example strategies (declared axes too), the C schedule, policy and
/// topology examples, the built-in strategies, schedules and policies compiled as a
/// library, and the Rust example topology.
#[test]
fn isolated_execution_plugins_print_what_they_print_in_process() {
    let l = libs();
    let same = |config: &str, args: &[&str]| {
        let in_process = json("predict", config, args);
        let mut iso = args.to_vec();
        iso.push("--isolate");
        assert!(
            json("predict", config, &iso) == in_process,
            "{config} {args:?}: isolated differs"
        );
    };
    let mut names: Vec<String> = BUILTINS.map(String::from).to_vec();
    names[2] = "example/ulysses".into();
    let set = strategies(&names);
    let llama = "configs/experiments/llama3-8b-h100.toml";
    same(
        llama,
        &["--load", &l.ulysses, "--set", "plan.cp=2", "--set", &set],
    );
    let lib_names: Vec<String> = BUILTINS.map(|n| format!("lib/{n}")).to_vec();
    let lib_set = strategies(&lib_names);
    let gpt = "configs/experiments/gpt3-175b-a100.toml";
    same(
        gpt,
        &[
            "--load",
            &l.builtins,
            "--set",
            &lib_set,
            "--set",
            "plan.schedule=\"lib/interleaved-1f1b\"",
            "--set",
            "plan.vpp=2",
            "--set",
            "plan.recompute=\"lib/selective\"",
        ],
    );
    let dir = common::tmpdir("perfcast-cli-isolate-c");
    let zb = cc_shared(
        &dir,
        &repo().join("plugins/examples/zb-h1/zb_h1.c"),
        "libzb_h1.so",
        &[],
    );
    let zb = zb.to_str().unwrap();
    same(
        gpt,
        &["--load", zb, "--set", "plan.schedule=\"example/zb-h1\""],
    );
    // The C strategy, recompute policy and topology examples.
    let c_example = |folder: &str, file: &str| {
        let src = repo().join(format!("plugins/examples/{folder}/{file}.c"));
        let lib = cc_shared(&dir, &src, &format!("lib{file}.so"), &[]);
        lib.to_str().unwrap().to_string()
    };
    let mut c_names: Vec<String> = BUILTINS.map(String::from).to_vec();
    c_names[0] = "example/tensor-c".into();
    same(gpt, &["--load", tensor_c(), "--set", &strategies(&c_names)]);
    // Strategies on declared axes: `tp2d` from C (1.7), `hsdp` from Rust (1.4).
    let tp2d = c_example("tp2d", "tp2d");
    let mut tp2d_names: Vec<String> = BUILTINS.map(String::from).to_vec();
    tp2d_names[0] = "example/tp2d".into();
    let tp2d_set = strategies(&tp2d_names);
    same(
        gpt,
        &[
            "--load",
            &tp2d,
            "--set",
            &tp2d_set,
            "--set",
            "plan.tp=2",
            "--set",
            "plan.axes.col=2",
            "--set",
            "plan.dp=16",
        ],
    );
    let hsdp_set = strategies(
        &[
            "tensor",
            "sequence",
            "context",
            "expert",
            "pipeline",
            "example/hsdp",
        ]
        .map(String::from),
    );
    same(
        gpt,
        &[
            "--load",
            &l.hsdp,
            "--set",
            &hsdp_set,
            "--set",
            "plan.zero_stage=3",
            "--set",
            "plan.axes.shard=4",
            "--set",
            "plan.dp=2",
        ],
    );
    let sqrt = c_example("sqrt-checkpoint", "sqrt_checkpoint");
    same(
        gpt,
        &[
            "--load",
            &sqrt,
            "--set",
            "plan.recompute=\"example/sqrt-checkpoint\"",
        ],
    );
    let xbar = c_example("crossbar-c", "crossbar_c");
    same(
        gpt,
        &[
            "--load",
            &xbar,
            "--set",
            "components.xbar.kind=\"example/crossbar-c\"",
            "--set",
            "system.topology=\"xbar\"",
        ],
    );
    let listed = perfcast(&[
        "plugins",
        "--isolate",
        "--load",
        &l.ulysses,
        "--load",
        zb,
        "--load",
        tensor_c(),
        "--load",
        &sqrt,
        "--load",
        &xbar,
    ]);
    for name in [
        "example/ulysses",
        "example/zb-h1",
        "example/tensor-c",
        "example/sqrt-checkpoint",
        "example/crossbar-c",
    ] {
        assert!(
            listed
                .stdout
                .lines()
                .any(|x| x.contains(name) && x.contains("isolated")),
            "{}",
            listed.stdout
        );
    }
    same(
        "plugins/examples/dragonfly-plus/gpt3-175b-dragonfly-plus.toml",
        &["--load", &l.dragonfly_plus],
    );
}

/// `plugins/examples/tp2d/tp2d.c` (C ABI 1.7): its README's `predict` runs on a 2 x 2 grid
/// and labels the plan with its axis; a search over `search.axes.col` finds plans on the
/// grid only; a key of an axis nobody declares and a plan off the grid are refused with a
/// non-zero exit naming the key.
#[test]
fn tp2d_runs_from_its_readme_and_its_axis_is_searched() {
    let dir = common::tmpdir("perfcast-cli-tp2d");
    let src = repo().join("plugins/examples/tp2d/tp2d.c");
    let lib = cc_shared(&dir, &src, "libtp2d.so", &[]);
    let lib = lib.to_str().unwrap();
    let mut names: Vec<String> = BUILTINS.map(String::from).to_vec();
    names[0] = "example/tp2d".into();
    let set = strategies(&names);
    let config = "configs/experiments/gpt3-175b-a100.toml";
    let grid = [
        "--set",
        "plan.tp=2",
        "--set",
        "plan.axes.col=2",
        "--set",
        "plan.dp=16",
    ];
    let mut args = vec!["predict", config, "--load", lib, "--set", set.as_str()];
    args.extend(grid);
    let o = perfcast(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("tp=2")
            && o.stdout.contains("axes.col=2")
            && o.stdout.contains("exposed col comm"),
        "{}",
        o.stdout
    );
    // The user guide's figures (docs/parallel-strategies.md): the 2 x 2 grid against 1-D TP
    // over 4 GPUs.
    let mut grid_args = vec!["--load", lib, "--set", set.as_str()];
    grid_args.extend(grid);
    let two_d = json("predict", config, &grid_args);
    let one_d = json(
        "predict",
        config,
        &["--set", "plan.tp=4", "--set", "plan.dp=16"],
    );
    let at = |v: &Value, path: &[&str]| {
        let x = path.iter().fold(&v["report"], |v, k| &v[*k]);
        x.as_f64().unwrap()
    };
    let f = |v: &Value, path: &[&str]| format!("{:.2}", at(v, path));
    let both = at(&two_d, &["breakdown", "tp_comm"]) + at(&two_d, &["breakdown", "axes", "col"]);
    let said = format!(
        "this step takes {} s against {} s for 1-D tensor parallelism over the same 4 GPUs \
         (`--set plan.tp=4 --set plan.dp=16`): the same GEMMs ({} s), but {both:.2} s of exposed \
         tensor-parallel communication instead of {} s ({} s of weight panels over `tensor`, \
         reported as TP comm, and {} s of activation panels, reported on the `col` axis's own \
         ledger)",
        f(&two_d, &["iteration_time"]),
        f(&one_d, &["iteration_time"]),
        f(&two_d, &["breakdown", "compute", "gemm"]),
        f(&one_d, &["breakdown", "tp_comm"]),
        f(&two_d, &["breakdown", "tp_comm"]),
        f(&two_d, &["breakdown", "axes", "col"]),
    );
    let fold = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let guide = fold(&std::fs::read_to_string(repo().join("docs/parallel-strategies.md")).unwrap());
    assert!(
        guide.contains(&fold(&said)),
        "docs/parallel-strategies.md should say: {said}"
    );
    assert_eq!(
        f(&two_d, &["breakdown", "compute", "gemm"]),
        f(&one_d, &["breakdown", "compute", "gemm"])
    );
    let v = json(
        "search",
        config,
        &[
            "--load",
            lib,
            "--set",
            &set,
            "--set",
            "search.tp=[1,2]",
            "--set",
            "search.axes.col=[1,2]",
        ],
    );
    let plans = v["plans"].as_array().unwrap();
    assert!(!plans.is_empty());
    // The guide: the search prefers micro-batches of 6 (29.76 s).
    let best = &plans[0];
    assert_eq!(best["plan"]["micro_batch"], 6, "{best}");
    let t = format!("{:.2}", best["objective"].as_f64().unwrap());
    assert!(
        guide.contains(&format!("prefers micro-batches of 6 ({t} s)")),
        "{t}"
    );
    for p in plans {
        let plan = &p["plan"];
        let col = plan["axes"]["col"].as_u64().unwrap_or(1);
        assert_eq!(plan["tp"].as_u64().unwrap(), col, "{plan}");
    }
    for (extra, want) in [
        ("plan.axes.row=2", "plan.axes.row"),
        ("plan.axes.col=4", "must equal plan.tp = 2"),
    ] {
        let mut args = vec!["predict", config, "--load", lib, "--set", set.as_str()];
        args.extend(["--set", "plan.tp=2", "--set", extra, "--set", "plan.dp=8"]);
        let o = perfcast(&args);
        assert_ne!(o.code, 0, "{extra}");
        assert!(o.stderr.contains(want), "{extra}: {}", o.stderr);
    }
}
