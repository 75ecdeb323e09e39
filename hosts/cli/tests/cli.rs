//! End-to-end tests of the `perfcast` binary: every command, every output format, the
//! configuration layering as a user sees it, and every kind of bad input (each must exit
//! non-zero with a message naming the file and the key, and never panic).
//!
//! Commands run in a fresh temporary directory (the built-in presets must work from anywhere)
//! with every `PERFCAST_*` variable of the test's own environment removed.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common::{repo, Out};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn tmpdir() -> PathBuf {
    common::tmpdir("perfcast-cli")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn perfcast_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = common::command(dir, args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = common::output(&mut cmd);
    assert!(
        !out.stderr.contains("panicked") && !out.stderr.contains("internal error"),
        "perfcast {args:?} panicked:\n{}",
        out.stderr
    );
    for bad in ["NaN", "inf"] {
        assert!(
            !out.stdout
                .split(|c: char| !c.is_alphanumeric())
                .any(|w| w == bad),
            "perfcast {args:?} printed {bad}:\n{}",
            out.stdout
        );
    }
    out
}

fn perfcast(args: &[&str]) -> Out {
    perfcast_in(&tmpdir(), args, &[])
}

fn ok(o: &Out) {
    assert_eq!(o.code, 0, "stderr:\n{}\nstdout:\n{}", o.stderr, o.stdout);
}

/// Exit 1 with `error: ` and every fragment of `want` in the message.
fn fails(o: &Out, want: &[&str]) {
    assert_eq!(o.code, 1, "expected exit 1; stderr:\n{}", o.stderr);
    assert!(o.stderr.starts_with("error: "), "{}", o.stderr);
    for w in want {
        assert!(o.stderr.contains(w), "`{w}` missing from:\n{}", o.stderr);
    }
}

fn experiment() -> String {
    repo()
        .join("configs/experiments/roofline-a100.toml")
        .display()
        .to_string()
}

#[test]
fn plugins_lists_builtins_in_every_format() {
    let o = perfcast(&["plugins"]);
    ok(&o);
    for w in [
        "compute_unit",
        "gpu",
        "memory_tier",
        "hbm",
        "interconnect",
        "nvlink",
    ] {
        assert!(o.stdout.contains(w), "{w}:\n{}", o.stdout);
    }
    assert!(
        o.stdout.contains("built-in (perfcast-plugin-gpu)"),
        "{}",
        o.stdout
    );
    let o = perfcast(&["plugins", "--format", "json"]);
    ok(&o);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let gpu = v
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "gpu")
        .unwrap();
    assert_eq!(gpu["category"], "compute_unit");
    assert_eq!(gpu["abi"], "-");
    let o = perfcast(&["plugins", "--format", "csv"]);
    ok(&o);
    assert!(o
        .stdout
        .starts_with("category,name,origin,version,abi,description\n"));
}

#[test]
fn roofline_runs_the_shipped_experiment_in_every_format() {
    let exp = experiment();
    let o = perfcast(&["roofline", &exp]);
    ok(&o);
    for w in [
        "prefill.qkv",
        "decode.mlp_down",
        "a100_sxm4_80gb_hbm",
        "compute",
        "overhead",
    ] {
        assert!(o.stdout.contains(w), "{w}:\n{}", o.stdout);
    }
    let o = perfcast(&["roofline", &exp, "--format", "json"]);
    ok(&o);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let ops = v["ops"].as_array().unwrap();
    assert_eq!(ops.len(), 14);
    for op in ops {
        for k in ["flops", "bytes", "intensity", "ridge", "time_s"] {
            let x = op[k].as_f64().unwrap();
            assert!(x.is_finite() && x > 0.0, "{k} of {op}");
        }
        let i = op["flops"].as_f64().unwrap() / op["bytes"].as_f64().unwrap();
        assert!((op["intensity"].as_f64().unwrap() - i).abs() <= 1e-12 * i);
    }
    // Prefill GEMMs have hundreds of FLOP per byte: compute-bound on an A100.
    assert_eq!(ops[0]["name"], "prefill.qkv");
    assert_eq!(ops[0]["bound"], "compute");
    let d = tmpdir();
    let o = perfcast_in(&d, &["roofline", &exp, "--plot", "roof.svg"], &[]);
    ok(&o);
    // Where the plot went is said on stderr.
    assert!(
        o.stderr.contains("wrote the plot to roof.svg"),
        "{}",
        o.stderr
    );
    let svg = std::fs::read_to_string(d.join("roof.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for w in [
        "prefill.qkv",
        "decode.layernorm",
        "a100_sxm4_80gb_hbm",
        "matrix bf16 peak",
    ] {
        assert!(svg.contains(w), "{w} not in the plot");
    }
    assert!(!svg.contains("NaN") && !svg.contains("inf"));
    let o = perfcast_in(
        &d,
        &["roofline", &exp, "--plot", "no/such/dir/roof.svg"],
        &[],
    );
    fails(&o, &["no/such/dir/roof.svg"]);
    let o = perfcast(&["roofline", &exp, "--format", "csv"]);
    ok(&o);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 15);
    assert!(lines[0].starts_with("device,op,kind,shape,dtype,engine,flops,bytes"));
}

#[test]
fn roofline_follows_the_config_layers() {
    let exp = experiment();
    let base = perfcast(&["roofline", &exp, "--format", "json"]);
    ok(&base);
    let base: Value = serde_json::from_str(&base.stdout).unwrap();
    // A faster HBM (environment) and a bigger GEMM (--set) change the numbers they should.
    let o = perfcast_in(
        &tmpdir(),
        &[
            "roofline",
            &exp,
            "--format",
            "json",
            "--set",
            "components.a100_sxm4_80gb_hbm.bandwidth_tbs=4.078",
        ],
        &[(
            "PERFCAST_COMPONENTS__A100_SXM4_80GB_HBM__BANDWIDTH_TBS",
            "1.0",
        )],
    );
    ok(&o);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let ridge = |v: &Value| v["ops"][0]["ridge"].as_f64().unwrap();
    // --set (2x the preset's bandwidth) beat the environment (half of it): the ridge halves.
    assert!(
        (ridge(&base) / ridge(&v) - 2.0).abs() < 1e-9,
        "{} {}",
        ridge(&base),
        ridge(&v)
    );
}

#[test]
fn config_explain_shows_where_each_value_came_from() {
    let d = tmpdir();
    write(&d, "base.toml", "[plan]\ntp = 1\npp = 2\ndp = 3\n");
    write(&d, "top.yaml", "include: [base.toml]\nplan:\n  pp: 4\n");
    let o = perfcast_in(
        &d,
        &[
            "config",
            "explain",
            "top.yaml",
            "preset:h100-sxm5-80gb",
            "--set",
            "plan.tp=8",
            "--format",
            "json",
        ],
        &[("PERFCAST_PLAN__DP", "16"), ("PERFCAST_PLAN__TP", "2")],
    );
    ok(&o);
    let rows: Vec<Value> = serde_json::from_str(&o.stdout).unwrap();
    let row = |k: &str| {
        let r = rows
            .iter()
            .find(|r| r["key"] == k)
            .unwrap_or_else(|| panic!("{k}"));
        (
            r["value"].as_str().unwrap().to_string(),
            r["source"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(row("plan.tp"), ("8".into(), "--set plan.tp=8".into()));
    assert_eq!(
        row("plan.dp"),
        ("16".into(), "environment variable PERFCAST_PLAN__DP".into())
    );
    assert_eq!(row("plan.pp"), ("4".into(), "file top.yaml:3".into()));
    // A PERFCAST_* variable that sets no configuration key is ignored with a warning.
    let o = perfcast_in(
        &d,
        &["config", "explain", "top.yaml"],
        &[("PERFCAST_ROOT", "/somewhere"), ("PERFCAST_PLAN__DP", "16")],
    );
    ok(&o);
    assert!(
        o.stderr
            .contains("warning: ignoring environment variable PERFCAST_ROOT"),
        "{}",
        o.stderr
    );
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    let (_, src) = row("components.h100_sxm5_80gb.sm_count");
    assert!(src.starts_with("preset:h100-sxm5-80gb"), "{src}");
    assert_eq!(row("system.devices").1, "built-in default");
    let o = perfcast_in(&d, &["config", "explain", "top.yaml"], &[]);
    ok(&o);
    let line = o.stdout.lines().find(|l| l.starts_with("plan.dp")).unwrap();
    assert!(
        line.contains("file base.toml:4 (included by top.yaml)"),
        "{line}"
    );
    let o = perfcast(&["config", "presets"]);
    ok(&o);
    assert!(o.stdout.contains("preset:a100-sxm4-80gb"));
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["frobnicate"][..],
        &["roofline"],
        &["roofline", "x.toml", "--set", "no-equals"],
        &["roofline", "x.toml", "--format", "xml"],
        &["plugins", "--bogus"],
    ] {
        let o = perfcast(args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
    }
    let o = perfcast(&["--help"]);
    ok(&o);
    assert!(o.stdout.contains("roofline") && o.stdout.contains("plugins"));
}

#[test]
fn bad_files_name_the_file_and_the_position() {
    let d = tmpdir();
    write(&d, "syntax.toml", "[plan]\ntp = \n");
    write(&d, "syntax.yaml", "plan:\n  tp: [1,\n");
    write(&d, "syntax.json", "{\n  \"plan\": {\"tp\": }\n}");
    write(&d, "x.ini", "tp = 1");
    std::fs::create_dir_all(d.join("dir.toml")).unwrap();
    write(&d, "cycle_a.toml", "include = [\"cycle_b.toml\"]\n");
    write(&d, "cycle_b.toml", "include = [\"cycle_a.toml\"]\n");
    write(&d, "inc.toml", "include = [\"gone.toml\"]\n");
    write(&d, "preset.toml", "include = [\"preset:a101\"]\n");
    let cases: &[(&str, &[&str])] = &[
        ("missing.toml", &["missing.toml", "cannot read"]),
        ("dir.toml", &["dir.toml", "cannot read"]),
        (
            "syntax.toml",
            &["TOML syntax error", "syntax.toml", "line 2, column 6"],
        ),
        (
            "syntax.yaml",
            &["YAML syntax error", "syntax.yaml", "line 3"],
        ),
        (
            "syntax.json",
            &["JSON syntax error", "syntax.json", "line 2, column 18"],
        ),
        ("x.ini", &["x.ini", "unsupported config format"]),
        (
            "cycle_a.toml",
            &["include cycle", "cycle_a.toml -> ", "cycle_b.toml"],
        ),
        ("inc.toml", &["gone.toml", "included by inc.toml"]),
        ("preset.toml", &["unknown preset `a101`", "a100-sxm4-80gb"]),
    ];
    for (file, want) in cases {
        for cmd in ["roofline", "config explain"] {
            let mut args: Vec<&str> = cmd.split(' ').collect();
            args.push(file);
            fails(&perfcast_in(&d, &args, &[]), want);
        }
    }
}

/// A bad configuration: the arguments after `roofline` (split at spaces), the environment,
/// and the fragments the message must contain (separated by `|`).
type BadCase<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);

#[test]
fn bad_values_name_the_key_and_where_it_came_from() {
    let d = tmpdir();
    let ops = "[[ops]]\nop = \"gemm\"\nm = 64\nn = 64\nk = 64\ndtype = \"bf16\"\n";
    // Each on top of the A100 preset and one GEMM.
    let files = [
        (
            "kind",
            "[components.npu]\nkind = \"acme/npu9\"\n[device]\ncompute = \"npu\"",
        ),
        ("param", "[components.a100_sxm4_80gb]\nfp8_tops = 1979.0"),
        (
            "type",
            "[components.a100_sxm4_80gb_hbm]\ncapacity_gb = \"eighty\"",
        ),
        (
            "undef",
            "[device]\nmemory = [\"a100_sxm4_80gb_l2\", \"hbm9\"]",
        ),
        ("slot", "[device]\ncompute = \"a100_sxm4_80gb_nvlink\""),
        ("top", "[modle]\nlayers = 96"),
        ("devicekey", "[device]\nmemroy = []"),
        (
            "range",
            "[components.a100_sxm4_80gb]\nmatmul_efficiency = 1.5",
        ),
        // A power limit above the rated power (it would raise the clock).
        (
            "power",
            "[components.a100_sxm4_80gb]\npower_limit_w = 500.0",
        ),
        // A kernel table the host does not have.
        ("kernels", "[device]\nkernels = \"a100\""),
        // A file that is not a plugin library, named in a config.
        ("lib", "[[plugins]]\npath = \"notes.so\""),
        // An op the device cannot run names the op.
        (
            "fp8",
            "[[ops]]\nname = \"fp8_gemm\"\nop = \"gemm\"\nm = 64\nn = 64\nk = 64\ndtype = \"fp8\"",
        ),
    ];
    for (name, body) in files {
        let text = format!("include = [\"preset:a100-sxm4-80gb\"]\n{body}\n{ops}");
        write(&d, &format!("{name}.toml"), &text);
    }
    write(&d, "notes.so", "not a library");
    let sm_env = "PERFCAST_COMPONENTS__A100_SXM4_80GB__SM_COUNT";
    let cases: &[BadCase] = &[
        (
            "kind.toml",
            &[],
            "unknown kind `acme/npu9`|components.npu.kind|kind.toml|compute_unit: gpu",
        ),
        (
            "param.toml",
            &[],
            "components.a100_sxm4_80gb.fp8_tops|param.toml|unknown key|matrix_tflops",
        ),
        (
            "type.toml",
            &[],
            "components.a100_sxm4_80gb_hbm.capacity_gb|type.toml|expected a number, got \"eighty\"",
        ),
        (
            "undef.toml",
            &[],
            "device.memory[1]|`hbm9`|not defined|undef.toml",
        ),
        (
            "slot.toml",
            &[],
            "device.compute|interconnect|slot.toml|compute_unit kinds: gpu",
        ),
        ("top.toml", &[], "unknown top-level key `modle`|top.toml"),
        ("devicekey.toml", &[], "device.memroy|devicekey.toml"),
        (
            "range.toml",
            &[],
            "components.a100_sxm4_80gb.matmul_efficiency|range.toml|1.5",
        ),
        (
            "power.toml",
            &[],
            "components.a100_sxm4_80gb|power_limit_w|above the rated power 400",
        ),
        (
            "kernels.toml",
            &[],
            "device.kernels|kernels.toml|no kernel table for GPU `a100`|a100_sxm",
        ),
        (
            "param.toml --set components.a100_sxm4_80gb.sm_count=many",
            &[],
            "components.a100_sxm4_80gb",
        ),
        (
            "undef.toml --set device.memory=[\"a100_sxm4_80gb_hbm\"] \
             --set components.a100_sxm4_80gb.sm_count=-3",
            &[],
            "components.a100_sxm4_80gb.sm_count|--set components.a100_sxm4_80gb.sm_count=-3",
        ),
        (
            "undef.toml --set device.memory=[\"a100_sxm4_80gb_hbm\"]",
            &[(sm_env, "lots")],
            "components.a100_sxm4_80gb.sm_count|PERFCAST_COMPONENTS__A100_SXM4_80GB__SM_COUNT",
        ),
        (
            "undef.toml --set device.memory=[\"a100_sxm4_80gb_hbm\"] --set ops.0.m=0",
            &[],
            "ops",
        ),
        (
            "undef.toml --load nothere.so",
            &[],
            "nothere.so|does not exist|--load",
        ),
        ("lib.toml", &[], "notes.so|lib.toml"),
        ("fp8.toml", &[], "op `fp8_gemm`|ops[0]|fp8"),
    ];
    for (args, env, want) in cases {
        let mut a = vec!["roofline"];
        a.extend(args.split(' '));
        let want: Vec<&str> = want.split('|').collect();
        fails(&perfcast_in(&d, &a, env), &want);
    }
}

/// `config presets --format json` and `study --list --format json`: the lists as records (the
/// Python package's `presets()` and `studies()`), the same entries as the tables.
#[test]
fn presets_and_studies_list_as_json() {
    let o = perfcast(&["config", "presets", "--format", "json"]);
    ok(&o);
    let list: Vec<Value> = serde_json::from_str(&o.stdout).unwrap();
    let table = perfcast(&["config", "presets"]).stdout;
    assert_eq!(list.len(), table.lines().count() - 5, "{table}");
    let a100 = list.iter().find(|p| p["name"] == "a100-sxm4-80gb").unwrap();
    assert_eq!(a100["group"], "hardware");
    assert_eq!(a100["use"], "preset:a100-sxm4-80gb");
    assert!(a100["description"].is_null());
    let vllm = list.iter().find(|p| p["name"] == "vllm-2025").unwrap();
    assert_eq!(vllm["group"], "stacks");
    assert_eq!(vllm["use"], "stack = \"vllm-2025\"");
    assert!(vllm["description"].as_str().unwrap().starts_with("vLLM"));
    fails(
        &perfcast(&["config", "presets", "--format", "csv"]),
        &["`table` or `json`"],
    );
    fails(
        &perfcast(&["config", "presets", "vllm-2025", "--format", "json"]),
        &["list's"],
    );
    let o = perfcast(&["study", "--list", "--format", "json"]);
    ok(&o);
    let studies: Vec<Value> = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(studies[0]["name"], "memory-vs-recompute");
    assert_eq!(
        studies[0]["config"],
        "configs/studies/memory-vs-recompute.toml"
    );
    assert!(studies
        .iter()
        .all(|s| !s["title"].as_str().unwrap().is_empty()));
    assert_eq!(
        studies.len(),
        perfcast(&["study", "--list"]).stdout.lines().count() - 2
    );
}

/// Software stacks from the command line: listed, printed, selected by file, `--set` and
/// `PERFCAST_STACK`, shown by `config explain`; bad names and wrong kinds exit 1.
#[test]
fn stacks_are_selected_listed_and_explained() {
    let d = tmpdir();
    let o = perfcast(&["config", "presets"]);
    ok(&o);
    assert!(o.stdout.contains("stack = \"megatron-lm-2021\"") && o.stdout.contains("vllm-2025"));
    let o = perfcast(&["config", "presets", "torchtitan-compile-asynctp-2025"]);
    ok(&o);
    assert!(o.stdout.contains("tp_comm = \"on\""), "{}", o.stdout);
    let cfg = write(
        &d,
        "train.toml",
        "include = [\"preset:llama2-7b\", \"preset:dgx-a100\"]\n[plan]\ntp = 8\nglobal_batch = 8\nrecompute = \"full\"\n",
    )
    .display()
    .to_string();
    let explain = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["config", "explain", cfg.as_str()];
        args.extend_from_slice(extra);
        let o = perfcast_in(&d, &args, env);
        ok(&o);
        o.stdout
    };
    let out = explain(&["--set", "stack=megatron-lm-2022"], &[]);
    let line = out
        .lines()
        .find(|l| l.starts_with("software.recompute.selective"))
        .unwrap();
    assert!(line.contains("stack:megatron-lm-2022:"), "{line}");
    let out = explain(&[], &[("PERFCAST_STACK", "meta-llama3-2024")]);
    let line = out
        .lines()
        .find(|l| l.starts_with("software.overlap.cp_exchange"))
        .unwrap();
    assert!(
        line.contains("all_gather") && line.contains("stack:meta-llama3-2024:"),
        "{line}"
    );
    let line = out.lines().find(|l| l.starts_with("stack ")).unwrap();
    assert!(
        line.contains("environment variable PERFCAST_STACK"),
        "{line}"
    );
    // The stack changes the prediction; the user's explicit plan key wins over it.
    let o = perfcast_in(
        &d,
        &[
            "predict",
            &cfg,
            "--set",
            "stack=megatron-lm-2021",
            "--format",
            "json",
        ],
        &[],
    );
    ok(&o);
    let legacy: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(legacy["plan"]["attention"], "plain", "{}", o.stderr);
    let o = perfcast_in(
        &d,
        &[
            "predict",
            &cfg,
            "--set",
            "stack=megatron-lm-2021",
            "--set",
            "plan.attention=\"flash\"",
            "--format",
            "json",
        ],
        &[],
    );
    ok(&o);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["plan"]["attention"], "flash");
    assert!(
        legacy["report"]["iteration_time"].as_f64() > v["report"]["iteration_time"].as_f64(),
        "materialised attention is slower"
    );
    fails(
        &perfcast_in(&d, &["predict", &cfg, "--set", "stack=vllm"], &[]),
        &[
            "unknown stack `vllm`",
            "nearest: vllm-2025",
            "--set stack=vllm",
        ],
    );
    fails(
        &perfcast_in(&d, &["predict", &cfg, "--set", "stack=vllm-2025"], &[]),
        &["inference runtime", "training stack"],
    );
    // A sweep over stacks (the base config names one, so the key exists).
    write(
        &d,
        "base.toml",
        &format!("stack = \"generic\"\ninclude = [\"{cfg}\"]\n"),
    );
    write(
        &d,
        "stacks.toml",
        "configs = [\"base.toml\"]\nmode = \"evaluate\"\n[[points]]\nstack = \"megatron-lm-2021\"\n[[points]]\nstack = \"megatron-core-2024\"\n",
    );
    let o = perfcast_in(&d, &["sweep", "stacks.toml"], &[]);
    ok(&o);
    let rows: Vec<&str> = o.stdout.lines().collect();
    assert!(
        rows[0].starts_with("stack,") && rows.len() == 3,
        "{}",
        o.stdout
    );
    assert!(rows[1].starts_with("megatron-lm-2021,") && rows[2].starts_with("megatron-core-2024,"));
    write(&d, "bad-stack.toml", "[software.host]\ncuda_graph = true\n");
    fails(
        &perfcast_in(&d, &["predict", &cfg, "--set", "stack=bad-stack.toml"], &[]),
        &["software.host.cuda_graph", "bad-stack.toml:2"],
    );
}

/// Run `perfcast args` with stdout or stderr connected to a pipe whose reading end is already
/// closed (as in `perfcast ... 2>&1 | true`): every write fails with EPIPE.
fn with_closed(stream: &str, args: &[&str]) -> i32 {
    with_closed_env(stream, args, &[])
}

fn with_closed_env(stream: &str, args: &[&str], env: &[(&str, &str)]) -> i32 {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = common::command(&tmpdir(), args);
    cmd.envs(env.iter().copied());
    match stream {
        "stdout" => cmd.stdout(writer).stderr(std::process::Stdio::null()),
        _ => cmd.stderr(writer).stdout(std::process::Stdio::null()),
    };
    common::spawn(&mut cmd)
        .wait(common::DEADLINE)
        .code()
        .unwrap_or(-1)
}

#[test]
fn a_closed_stdout_or_stderr_ends_quietly_with_the_documented_exit_code() {
    // An error reported to a closed stderr still exits 1 (it used to abort: 134).
    assert_eq!(with_closed("stderr", &["predict", "missing.toml"]), 1);
    // A usage error, likewise 2; a successful command whose output nobody reads, 0.
    assert_eq!(with_closed("stderr", &["predict", "--bogus"]), 2);
    assert_eq!(with_closed("stdout", &["config", "presets"]), 0);
    assert_eq!(with_closed("stdout", &["predict", "--help"]), 0);
    let exp = experiment();
    assert_eq!(with_closed("stdout", &["roofline", &exp]), 0);
    // A warning (an ignored PERFCAST_* variable) that nobody can read does not fail a command.
    let env = [("PERFCAST_ROOT", "/x")];
    assert_eq!(with_closed_env("stderr", &["roofline", &exp], &env), 0);
}

#[test]
fn unknown_names_suggest_the_nearest_and_values_say_the_rule() {
    let exp = repo()
        .join("configs/experiments/gpt3-175b-a100.toml")
        .display()
        .to_string();
    // (arguments after `predict EXPERIMENT`, fragments of the message)
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--set", "plan.global_bacth=4"],
            &["plan.global_bacth", "did you mean `global_batch`?"],
        ),
        (&["preset:llama-3-8b"], &["did you mean `llama3-8b`?"]),
        (
            &["--set", "components.a100_sxm4_80gb.kind=\"gpuu\""],
            &["did you mean `gpu`?"],
        ),
        (
            &["--set", "device.compute=\"a100_sxm4_80gbb\""],
            &["did you mean `a100_sxm4_80gb`"],
        ),
        (&["--set", "modle.x=1"], &["did you mean `model`?"]),
        (
            &["--set", "components.a100_sxm4_80gb.sm_cont=3"],
            &["unknown key `sm_cont`; did you mean `sm_count`?"],
        ),
        (
            &["--set", "plan.recompute=\"ful\""],
            &["did you mean `full`?"],
        ),
        (
            &["--set", "plan.precision=\"bf61\""],
            &["unknown value `bf61`; did you mean `bf16`?"],
        ),
        (
            &["--set", "plan.tp=-4"],
            &[
                "`plan.tp`",
                "expected a non-negative integer (at most 4294967295), got -4",
            ],
        ),
        (&["--set", "plan.sp=3"], &["expected true or false, got 3"]),
        (
            &["--set", "components.a100_sxm4_80gb.sm_count=\"many\""],
            &["expected a non-negative integer (at most 4294967295), got \"many\""],
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["predict", exp.as_str()];
        args.extend_from_slice(extra);
        let o = perfcast(&args);
        fails(&o, want);
        for serde in [
            "signed int",
            "expected u32",
            "unknown field",
            "unknown variant",
        ] {
            assert!(
                !o.stderr.contains(serde),
                "{args:?}: serde wording:\n{}",
                o.stderr
            );
        }
    }
    fails(
        &perfcast(&["study", "memory-vs-recomput"]),
        &["did you mean `memory-vs-recompute`?"],
    );
}

/// A new directory outside the repository (the tests' own temporary directories are inside
/// its `target/`, where a search of the parents would find `configs/`).
fn outside_repo(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("perfcast-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn studies_and_validation_cases_are_built_in_and_name_no_build_path() {
    let d = outside_repo("portable");
    let root = repo().display().to_string();
    for study in ["matmul-boundedness", "memory-vs-recompute"] {
        let o = perfcast_in(&d, &["study", study, "--out", "out"], &[]);
        ok(&o);
        let md = std::fs::read_to_string(d.join(format!("out/{study}.md"))).unwrap();
        assert!(md.contains("(built-in)"), "{md}");
        for text in [&md, &o.stdout] {
            assert!(
                !text.contains(&root) && !text.contains("../"),
                "a build path in:\n{text}"
            );
        }
    }
    let o = perfcast_in(
        &d,
        &[
            "validate",
            "--group",
            "korthikanti2022-abstract",
            "--format",
            "json",
        ],
        &[],
    );
    ok(&o);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["cases"].as_array().unwrap().len(), 2);
    // A named file overrides the built-in copy, relative to the working directory.
    std::fs::copy(
        repo().join("configs/validation/cases.toml"),
        d.join("mine.toml"),
    )
    .unwrap();
    let o = perfcast_in(&d, &["validate", "mine.toml", "--group", "x"], &[]);
    fails(&o, &["mine.toml", "no case of group `x`"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn plugin_parameters_are_described_and_defaults_explained() {
    let o = perfcast(&["plugins", "--describe", "nvlink"]);
    ok(&o);
    for w in [
        "bandwidth_gbs_bidir",
        "required",
        "latency_us",
        "1.0",
        "us",
        "nccl-tests",
    ] {
        assert!(o.stdout.contains(w), "{w}:\n{}", o.stdout);
    }
    let o = perfcast(&["plugins", "--describe", "gpu", "--format", "json"]);
    ok(&o);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let eff = v[0]["params"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "matmul_efficiency")
        .unwrap();
    assert_eq!(eff["default"], "0.8");
    assert_eq!(eff["range"], "(0, 1]");
    let o = perfcast(&["plugins", "--describe", "gpu", "--format", "csv"]);
    ok(&o);
    assert!(o
        .stdout
        .starts_with("category,kind,parameter,type,unit,default,allowed,meaning,source\n"));
    fails(
        &perfcast(&["plugins", "--describe", "hbn"]),
        &["no plugin kind `hbn`", "did you mean `hbm`?"],
    );
    let o = perfcast(&["plugins", "--reference"]);
    ok(&o);
    assert_eq!(
        o.stdout,
        std::fs::read_to_string(repo().join("docs/reference.md")).unwrap()
    );
    // Every value in force: the experiment's own, then the defaults with their origin.
    let exp = repo().join("configs/experiments/gpt3-175b-a100.toml");
    let o = perfcast(&["config", "explain", exp.to_str().unwrap(), "--all"]);
    ok(&o);
    let line = |key: &str| {
        o.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("{key} missing:\n{}", o.stdout))
            .to_string()
    };
    assert!(line("components.a100_sxm4_80gb_nvlink.latency_us")
        .contains("default of interconnect `nvlink`"));
    assert!(line("components.a100_sxm4_80gb.launch_overhead_us").contains("3.0"));
    assert!(line("options.strategy_params.tensor.overlap_efficiency").contains("1.0"));
    assert!(line("plan.vpp").contains("built-in default (TrainingPlan)"));
    assert!(line("plan.tp").contains("gpt3-175b-a100.toml:26"));
    // Without --all only what the configuration sets.
    let o = perfcast(&["config", "explain", exp.to_str().unwrap()]);
    ok(&o);
    assert!(!o.stdout.contains("plan.vpp") && o.stdout.contains("plan.tp"));
}

/// `perfcast_cli::run_captured` (the Python package's way in) prints exactly what the binary
/// prints, and says what kind of failure a bad input is, with the binary's message and what
/// was printed before it (the report of a plan that does not fit).
#[test]
fn in_process_runs_print_what_the_binary_prints_and_classify_failures() {
    use perfcast_cli::{run_captured, FailureKind};
    let root = repo();
    let at = |p: &str| root.join(p).display().to_string();
    let gpt3 = at("configs/experiments/gpt3-175b-a100.toml");
    let llama = at("configs/experiments/llama2-70b-h100.toml");
    let serving = at("configs/serving/llama3.1-8b-h100.toml");
    let roof = at("configs/experiments/roofline-a100.toml");
    let runs: [&[&str]; 5] = [
        &["predict", &gpt3, "--format", "json"],
        &["infer", &llama, "--format", "csv"],
        &["roofline", &roof],
        &[
            "serve",
            &serving,
            "--rates",
            "2,8",
            "--requests",
            "50",
            "--format",
            "json",
        ],
        &["config", "presets"],
    ];
    for args in runs {
        let o = perfcast(args);
        ok(&o);
        assert_eq!(run_captured(args).unwrap(), o.stdout, "{args:?}");
    }
    let cases: [(&[&str], FailureKind, &str); 6] = [
        (
            &["predict", &gpt3, "--set", "plan.tpp=2"],
            FailureKind::Config,
            "plan.tpp",
        ),
        (
            &["predict", &gpt3, "--format", "yaml"],
            FailureKind::Usage,
            "yaml",
        ),
        (
            &["predict", &gpt3, "--load", "no-such-lib.so"],
            FailureKind::Plugin,
            "no-such-lib.so",
        ),
        (
            &[
                "predict",
                &gpt3,
                "--set",
                "plan.recompute=\"none\"",
                "--set",
                "plan.tp=2",
                "--set",
                "plan.pp=1",
                "--set",
                "plan.dp=512",
            ],
            FailureKind::Infeasible,
            "does not fit",
        ),
        (&["validate", &gpt3], FailureKind::Validation, "schema"),
        (
            &["plugin-host", "x.so"],
            FailureKind::Usage,
            "started by perfcast",
        ),
    ];
    for (args, kind, needle) in cases {
        let f = run_captured(args).unwrap_err();
        assert_eq!(f.kind, kind, "{args:?}: {}", f.message);
        assert!(f.message.contains(needle), "{args:?}: {}", f.message);
        if kind == FailureKind::Infeasible {
            assert!(f.output.contains("iteration time"), "{}", f.output);
        }
        if kind != FailureKind::Usage {
            let o = perfcast(args);
            assert_eq!(
                o.stderr.trim_end(),
                format!("error: {}", f.message),
                "{args:?}"
            );
        }
    }
}

/// Every input perfcast reads whole is refused unless it is a regular file: a config that is a
/// symlink to `/dev/zero` (`sweep` and `validate` read it until memory ran out) and a FIFO
/// (they blocked, as `--load` did), with the path named and exit 1, never a hang.
#[cfg(unix)]
#[test]
fn devices_and_fifos_are_refused_by_every_reader() {
    let dir = tmpdir();
    let zero = dir.join("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let fifo = dir.join("fifo.toml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    let mut inputs = vec![zero];
    if made.is_ok_and(|s| s.success()) {
        inputs.push(fifo);
    }
    let exp = experiment();
    for input in &inputs {
        let p = input.to_str().unwrap();
        for args in [
            vec!["validate", p],
            vec!["calibrate", p],
            vec!["sweep", p],
            vec!["predict", p],
            vec!["predict", exp.as_str(), "--load", p],
        ] {
            let o = perfcast(&args);
            assert_eq!(o.code, 1, "{args:?}: {}", o.stderr);
            assert!(
                o.stderr.contains("not a regular file") && o.stderr.contains(p),
                "{args:?}: {}",
                o.stderr
            );
        }
    }
}

/// Shell completion and manual pages come from the command line's own definition (issue 44):
/// every command is in them; a shell nobody supports is a usage error (2), a manual directory
/// that cannot be made an error naming it (1).
#[test]
fn completions_and_manual_pages() {
    let dir = tmpdir();
    for shell in ["bash", "zsh", "fish"] {
        // Not `perfcast_in`: a shell script may hold the word `inf`.
        let o = common::output(&mut common::command(&dir, &["completions", shell]));
        assert_eq!(o.code, 0, "{shell}: {}", o.stderr);
        for command in ["predict", "search", "serve", "study"] {
            assert!(o.stdout.contains(command), "{shell} lacks {command}");
        }
    }
    let bad = perfcast_in(&dir, &["completions", "tcsh"], &[]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    let page = perfcast_in(&dir, &["man"], &[]);
    assert_eq!(page.code, 0, "{}", page.stderr);
    assert!(page.stdout.contains(".TH perfcast 1"), "{}", page.stdout);
    let out = dir.join("man");
    let o = perfcast_in(&dir, &["man", "--out", out.to_str().unwrap()], &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let predict = std::fs::read_to_string(out.join("perfcast-predict.1")).unwrap();
    assert!(predict.contains("format"), "{predict}");
    let file = write(&dir, "not-a-dir", "x");
    let o = perfcast_in(&dir, &["man", "--out", file.to_str().unwrap()], &[]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stderr.contains("not-a-dir"), "{}", o.stderr);
}
