//! End to end through dynamic plugins: build the example Rust plugin (acme-npu, a cdylib) and
//! the example C plugin (c-vendor, with the system C compiler), run `perfcast roofline` on the
//! shipped example configs, and check that the numbers are the plugins' own models (recomputed
//! here from their documented formulas), and that the same ops on a built-in GPU give the
//! built-in's numbers. Selecting the device is a matter of configuration only.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_core::{ComputeOp, DType, Gemm, MemoryHierarchy, VectorOp, VectorOpKind};
use perfcast_testkit::plugins::{build_rust, c_vendor};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::common;
use crate::common::{repo, Out};

struct Libs {
    dir: PathBuf,
    acme: PathBuf,
    c: PathBuf,
    /// A Rust plugin built for a future, incompatible ABI major.
    abi_v2: PathBuf,
    /// The example topology plugin.
    dragonfly_plus: PathBuf,
}

/// Build both plugins once per test process (cargo's incremental build makes re-runs quick).
fn libs() -> &'static Libs {
    static L: OnceLock<Libs> = OnceLock::new();
    L.get_or_init(|| {
        let dir = common::tmpdir("perfcast-cli-plugins");
        let rust = build_rust(&["acme-npu", "abi-v2-fixture", "dragonfly-plus"], &dir);
        let c = c_vendor(&dir);
        Libs {
            dir,
            acme: rust[0].clone(),
            c,
            abi_v2: rust[1].clone(),
            dragonfly_plus: rust[2].clone(),
        }
    })
}

fn perfcast(args: &[&str]) -> Out {
    let out = common::output(&mut common::command(&repo(), args));
    assert!(
        !out.stderr.contains("panicked at") && !out.stderr.contains("internal error"),
        "{args:?}:\n{}",
        out.stderr
    );
    assert!(!out.stdout.contains("NaN"), "{args:?}:\n{}", out.stdout);
    out
}

fn json(args: &[&str]) -> Value {
    let o = perfcast(args);
    assert_eq!(o.code, 0, "{args:?}:\n{}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// The `[[ops]]` of a shipped config as core ops (all bf16 GEMMs and vector ops).
fn config_ops(file: &str) -> (toml::Table, Vec<ComputeOp>) {
    let text = std::fs::read_to_string(repo().join(file)).unwrap();
    let t: toml::Table = toml::from_str(&text).unwrap();
    let ops = t["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let u = |k: &str| o[k].as_integer().unwrap() as u64;
            let f = |k: &str| o[k].as_float().unwrap();
            assert_eq!(o["dtype"].as_str(), Some("bf16"));
            match o["op"].as_str().unwrap() {
                "gemm" => ComputeOp::Gemm(Gemm::new(u("m"), u("n"), u("k"), DType::Bf16)),
                "vector" => ComputeOp::Vector(VectorOp {
                    kind: VectorOpKind::Elementwise,
                    elements: u("elements"),
                    flops_per_element: f("flops_per_element"),
                    bytes_per_element: f("bytes_per_element"),
                    dtype: DType::Bf16,
                    launches: 1,
                }),
                other => panic!("op {other}"),
            }
        })
        .collect();
    (t, ops)
}

fn param(t: &toml::Table, component: &str, key: &str) -> f64 {
    let v = &t["components"][component][key];
    v.as_float()
        .or_else(|| v.as_integer().map(|i| i as f64))
        .unwrap()
}

/// acme-npu's model (plugins/examples/acme-npu/src/lib.rs docs): systolic utilisation,
/// compute and HBM time overlapped, plus launch overhead.
fn acme_time(t: &toml::Table, op: &ComputeOp) -> f64 {
    let p = |k| param(t, "npu9", k);
    let h = |k| param(t, "npu9_hbm", k);
    let (d, cores) = (p("array_dim") as u64, p("cores") as u64);
    let (peak, eff) = match op {
        ComputeOp::Gemm(g) => {
            let (kt, nt) = (g.k.div_ceil(d), g.n.div_ceil(d));
            let spatial = (g.k * g.n) as f64 / ((kt * d) * (nt * d)) as f64;
            let temporal = g.m as f64 / (g.m + 2 * d) as f64;
            let jobs = g.batch * kt * nt;
            let waves = jobs as f64 / (jobs.div_ceil(cores) * cores) as f64;
            (p("bf16_tflops") * 1e12, spatial * temporal * waves)
        }
        _ => (p("vector_tflops") * 1e12, 1.0),
    };
    let bw = h("stacks") * 1024.0 * h("pin_gbps") * 1e9 / 8.0;
    let compute = op.flops().0 / (peak * eff);
    let memory = op.min_bytes().0 / (bw * h("efficiency")) + h("latency_ns") * 1e-9;
    compute.max(memory) + p("launch_us") * 1e-6
}

/// c-vendor's model (plugins/examples/c-vendor/c_vendor.c header): no overlap of DMA and
/// compute.
fn c_time(t: &toml::Table, op: &ComputeOp) -> f64 {
    let p = |k| param(t, "dsp1", k);
    let m = |k| param(t, "dsp1_lpddr", k);
    let (peak, eff) = match op {
        ComputeOp::Gemm(_) => (p("bf16_tflops") * 1e12, p("mac_efficiency")),
        _ => (p("vector_gflops") * 1e9, 1.0),
    };
    let bw = m("channels") * m("bus_bits") / 8.0 * m("mts") * 1e6;
    let compute = op.flops().0 / (peak * eff);
    let memory = op.min_bytes().0 / (bw * m("efficiency")) + m("latency_ns") * 1e-9;
    compute + memory + p("launch_us") * 1e-6
}

fn check_rows(v: &Value, ops: &[ComputeOp], want_time: impl Fn(&ComputeOp) -> f64) {
    let rows = v["ops"].as_array().unwrap();
    assert_eq!(rows.len(), ops.len());
    for (row, op) in rows.iter().zip(ops) {
        let got = row["time_s"].as_f64().unwrap();
        let want = want_time(op);
        assert!(close(got, want), "{}: {got} vs {want}", row["name"]);
        assert!(close(row["flops"].as_f64().unwrap(), op.flops().0));
    }
}

#[test]
fn plugins_lists_library_components_with_origin_and_abi() {
    let l = libs();
    let v = json(&[
        "plugins",
        "--load",
        l.acme.to_str().unwrap(),
        "--load",
        l.c.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let row = |name: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {v}"))
            .clone()
    };
    let npu = row("acme/npu9");
    assert_eq!(npu["category"], "compute_unit");
    assert_eq!(npu["origin"], l.acme.display().to_string());
    assert_eq!(npu["abi"], "rust-abi_stable 1.4");
    let dsp = row("cvendor/dsp1");
    assert_eq!(dsp["origin"], l.c.display().to_string());
    assert_eq!(
        (dsp["abi"].as_str(), dsp["version"].as_str()),
        (Some("c 1.7"), Some("1.2.0"))
    );
    assert_eq!(row("acme/xlink")["category"], "interconnect");
    assert_eq!(row("gpu")["abi"], "-");
}

#[test]
fn rust_plugin_numbers_are_its_own_model() {
    let l = libs();
    let (t, ops) = config_ops("configs/examples/acme-npu.toml");
    let v = json(&[
        "roofline",
        "configs/examples/acme-npu.toml",
        "--load",
        l.acme.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(v["compute_kind"], "acme/npu9");
    assert_eq!(v["device_tier"], "npu9_hbm");
    check_rows(&v, &ops, |op| acme_time(&t, op));
    // Prefill is compute-bound, the residual add bound by the NPU's HBM.
    assert_eq!(v["ops"][1]["bound"], "compute");
    assert_eq!(v["ops"][2]["bound"], "npu9_hbm");
}

#[test]
fn c_plugin_numbers_are_its_own_model() {
    let l = libs();
    let (t, ops) = config_ops("configs/examples/c-vendor.toml");
    let v = json(&[
        "roofline",
        "configs/examples/c-vendor.toml",
        "--load",
        l.c.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(v["compute_kind"], "cvendor/dsp1");
    check_rows(&v, &ops, |op| c_time(&t, op));
}

#[test]
fn same_ops_on_a_builtin_gpu_give_the_builtins_numbers() {
    let l = libs();
    let (_, ops) = config_ops("configs/examples/acme-npu.toml");
    // The acme config's ops, the A100 preset's device: a later config file wins. The
    // built-in model times every op (not the kernel tables the preset names).
    let v = json(&[
        "roofline",
        "configs/examples/acme-npu.toml",
        "preset:a100-sxm4-80gb",
        "--set",
        "device.kernels=\"none\"",
        "--load",
        l.acme.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(v["compute_kind"], "gpu");
    // The built-in models, built straight from the preset file's parameters.
    let text =
        std::fs::read_to_string(repo().join("configs/hardware/a100-sxm4-80gb.toml")).unwrap();
    let t: toml::Table = toml::from_str(&text).unwrap();
    let params = |name: &str| {
        let mut c = t["components"][name].as_table().unwrap().clone();
        c.remove("kind");
        serde_json::to_value(c).unwrap()
    };
    let r = perfcast_builtins::registry().unwrap();
    let gpu = r.compute_unit("gpu", &params("a100_sxm4_80gb")).unwrap();
    let mem = MemoryHierarchy::new(vec![
        r.memory_tier("sram", &params("a100_sxm4_80gb_l2")).unwrap(),
        r.memory_tier("hbm", &params("a100_sxm4_80gb_hbm")).unwrap(),
    ]);
    check_rows(&v, &ops, |op| gpu.op_time(op, &mem).unwrap().time.0);
    let rows = v["ops"].as_array().unwrap();
    for (row, op) in rows.iter().zip(&ops) {
        let want = gpu.op_time(op, &mem).unwrap();
        assert!(close(row["bytes"].as_f64().unwrap(), want.device_bytes.0));
    }
}

#[test]
fn libraries_named_in_a_config_with_a_sha256_pin() {
    let l = libs();
    let sha = perfcast_loader::sha256_file(&l.acme).unwrap();
    let example = repo().join("configs/examples/acme-npu.toml");
    let write = |name: &str, pin: &str| {
        let p = l.dir.join(name);
        std::fs::write(
            &p,
            format!(
                "include = [{:?}]\n[[plugins]]\npath = \"libacme_npu.so\"\nsha256 = \"{pin}\"\n",
                example.display().to_string()
            ),
        )
        .unwrap();
        p.display().to_string()
    };
    let good = write("pinned.toml", &sha);
    let v = json(&["roofline", &good, "--format", "json"]);
    assert_eq!(v["compute_kind"], "acme/npu9");
    let bad = write("badpin.toml", &"0".repeat(64));
    let o = perfcast(&["roofline", &bad]);
    assert_eq!(o.code, 1);
    for w in ["libacme_npu.so", "sha256", "badpin.toml"] {
        assert!(o.stderr.contains(w), "{w}: {}", o.stderr);
    }
}

/// `--load PATH --sha256 HEX`: the pin is checked on the file opened, in process and again
/// in an isolated plugin host; pins and libraries pair in order.
#[test]
fn load_pins_on_the_command_line() {
    let l = libs();
    let acme = l.acme.to_str().unwrap();
    let c = l.c.to_str().unwrap();
    let sha = perfcast_loader::sha256_file(&l.acme).unwrap();
    let sha_c = perfcast_loader::sha256_file(&l.c).unwrap();
    let cfg = "configs/examples/acme-npu.toml";
    let base = ["roofline", cfg, "--load", acme, "--format", "csv"];
    let plain = perfcast(&base);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    for extra in [&[][..], &["--isolate"][..]] {
        let mut args = base.to_vec();
        args.extend(["--sha256", &sha]);
        args.extend(extra);
        let o = perfcast(&args);
        assert_eq!(o.code, 0, "{extra:?}: {}", o.stderr);
        assert_eq!(o.stdout, plain.stdout, "{extra:?}");
        let mut args = base.to_vec();
        let zeros = "0".repeat(64);
        args.extend(["--sha256", &zeros]);
        args.extend(extra);
        let o = perfcast(&args);
        assert_eq!(o.code, 1, "{extra:?}");
        assert!(
            o.stderr.contains("sha256 mismatch") && o.stderr.contains("libacme_npu.so"),
            "{extra:?}: {}",
            o.stderr
        );
    }
    // Two libraries, two pins in the same order; a pin count that is not the library count
    // is refused before anything loads.
    let o = perfcast(&[
        "plugins", "--load", acme, "--load", c, "--sha256", &sha, "--sha256", &sha_c,
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = perfcast(&["plugins", "--load", acme, "--load", c, "--sha256", &sha]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("1 --sha256 for 2 --load"), "{}", o.stderr);
    let o = perfcast(&[
        "plugins", "--load", c, "--load", acme, "--sha256", &sha, "--sha256", &sha_c,
    ]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("sha256 mismatch"), "{}", o.stderr);
}

/// The shipped example plugins run their example configs without a warning (both printed
/// "suspicious hardware": no on-chip tier; the DSP's LPDDR below every accelerator's).
#[test]
fn the_shipped_examples_print_no_warning() {
    let l = libs();
    for (cfg, lib) in [
        ("configs/examples/acme-npu.toml", &l.acme),
        ("configs/examples/c-vendor.toml", &l.c),
    ] {
        let o = perfcast(&["roofline", cfg, "--load", lib.to_str().unwrap()]);
        assert_eq!(o.code, 0, "{cfg}: {}", o.stderr);
        assert!(!o.stderr.contains("warning"), "{cfg}: {}", o.stderr);
    }
}

/// A spare component of a library's kind (no slot uses it) is checked against the
/// parameters the library declared, without building it: a typo is an error naming the key
/// and the nearest, a value only the build would judge (a negative peak) is not, since no
/// library code runs for a component nothing uses.
#[test]
fn spare_library_components_are_checked_not_built() {
    let l = libs();
    let acme = l.acme.to_str().unwrap();
    let example = repo().join("configs/examples/acme-npu.toml");
    let write = |name: &str, spare: &str| {
        let p = l.dir.join(name);
        std::fs::write(
            &p,
            format!(
                "include = [{:?}]\n[components.spare]\nkind = \"acme/npu9\"\n{spare}\n",
                example.display().to_string()
            ),
        )
        .unwrap();
        p.display().to_string()
    };
    let typo = write("spare-typo.toml", "fp8_tps = 1.0");
    let o = perfcast(&["roofline", &typo, "--load", acme]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("components.spare.fp8_tps")
            && o.stderr.contains("did you mean `fp8_tops`")
            && o.stderr.contains("spare-typo.toml"),
        "{}",
        o.stderr
    );
    let wrong_type = write("spare-type.toml", "cores = \"eight\"");
    let o = perfcast(&["roofline", &wrong_type, "--load", acme]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("components.spare.cores") && o.stderr.contains("expected integer"),
        "{}",
        o.stderr
    );
    let negative = write(
        "spare-negative.toml",
        "fp8_tops = 1.0\nbf16_tflops = -5.0\nvector_tflops = 1.0\ncores = 1\narray_dim = 8",
    );
    let o = perfcast(&["roofline", &negative, "--load", acme]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

/// Every library entry is checked before any library's code runs: a first library whose
/// constructor leaves a mark, then a missing second one, fails naming the second, and the
/// first never ran (it did: entries were checked and loaded one by one).
#[cfg(target_os = "linux")]
#[test]
fn library_entries_are_all_checked_before_any_loads() {
    let dir = common::tmpdir("perfcast-cli-precheck");
    let mark = dir.join("constructor-ran");
    let body = format!(
        "#include <stdio.h>\n\
         __attribute__((constructor)) static void mark(void) {{\n\
           FILE *f = fopen(\"{}\", \"w\"); if (f) fclose(f);\n\
         }}\n\
         const perfcast_plugin *perfcast_plugin_entry_v1(void) {{ return 0; }}\n",
        mark.display()
    );
    let lib = perfcast_testkit::plugins::cc_plugin_source(&dir, "marks", &body);
    let cfg = dir.join("two.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[plugins]]\npath = {:?}\n[[plugins]]\npath = \"no-such-lib.so\"\n",
            lib.display().to_string()
        ),
    )
    .unwrap();
    let o = perfcast(&["config", "explain", cfg.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("no-such-lib.so"), "{}", o.stderr);
    assert!(!mark.exists(), "the first library's constructor ran");
    // The rest of the configuration is checked first too: a bad model value, a plan value
    // of the wrong type, a bad serving key (each ran the constructor first).
    let lib_arg = lib.to_str().unwrap();
    let training = "configs/experiments/gpt3-175b-a100.toml";
    let serving = "configs/serving/llama3.1-8b-h100.toml";
    for (command, config, set, key) in [
        ("predict", training, "model.layers=0", "model.layers"),
        ("predict", training, "plan.tp=\"eight\"", "plan.tp"),
        ("serve", serving, "serving.no_such_key=1", "no_such_key"),
    ] {
        let o = perfcast(&[command, config, "--set", set, "--load", lib_arg]);
        assert_eq!(o.code, 1, "{set}: {}", o.stderr);
        assert!(o.stderr.contains(key), "{set}: {}", o.stderr);
        assert!(!mark.exists(), "{set}: the library's constructor ran");
    }
    // The same library alone does run (the test would pass vacuously otherwise).
    let o = perfcast(&["plugins", "--load", lib.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(mark.exists());
}

/// Only config files and `--load` name libraries: `PERFCAST_PLUGINS` and `--set plugins=...`
/// are refused, naming where the key came from, before any library code runs.
#[test]
fn the_environment_and_set_cannot_load_a_library() {
    let l = libs();
    let entry = format!("[{{path = {:?}}}]", l.acme.display().to_string());
    let cfg = "configs/examples/acme-npu.toml";
    let set = format!("plugins={entry}");
    let o = perfcast(&["roofline", cfg, "--set", &set]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("from --set plugins=") && o.stderr.contains("load only from"),
        "{}",
        o.stderr
    );
    let o = common::output(
        common::command(&repo(), &["roofline", cfg]).env("PERFCAST_PLUGINS", &entry),
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("from the environment (PERFCAST_PLUGINS")
            && o.stderr.contains("load only from"),
        "{}",
        o.stderr
    );
}

#[test]
fn misbehaving_plugins_are_errors_not_crashes() {
    let l = libs();
    let acme = l.acme.to_str().unwrap();
    let c = l.c.to_str().unwrap();
    let cfg_a = "configs/examples/acme-npu.toml";
    let cfg_c = "configs/examples/c-vendor.toml";
    // (arguments, fragments of the message)
    let cases: &[(&[&str], &[&str])] = &[
        // The plugin is not loaded: its kinds are unknown.
        (
            &[cfg_a],
            &[
                "unknown kind `acme/npu9`",
                "components.npu9.kind",
                "acme-npu.toml",
            ],
        ),
        (
            &[
                cfg_a,
                "--load",
                acme,
                "--set",
                "components.npu9.nan_in_op_time=true",
            ],
            &["decode_qkv", "time", "NaN"],
        ),
        (
            &[
                cfg_a,
                "--load",
                acme,
                "--set",
                "components.npu9.panic_in_peak=true",
            ],
            &["acme/npu9", "panic"],
        ),
        (
            &[cfg_a, "--load", acme, "--set", "components.npu9.fp8_topz=1"],
            &["components.npu9", "fp8_topz"],
        ),
        (
            &[
                cfg_c,
                "--load",
                c,
                "--set",
                "components.dsp1.fail_in_op_time=1",
            ],
            &["decode_qkv", "failed on purpose"],
        ),
        (
            &[cfg_c, "--load", c, "--set", "components.dsp1.bogus=1"],
            &["components.dsp1", "bogus"],
        ),
        (
            &[
                cfg_c,
                "--load",
                c,
                "--set",
                "components.dsp1.nan_efficiency=1",
            ],
            &["decode_qkv"],
        ),
        // A training step whose data-parallel group (16 ranks) exceeds the ring's domain (8):
        // the plugin's own error, naming the plugin and the network level.
        (
            &[
                "predict",
                cfg_c,
                "preset:megatron-gpt-1.7b",
                "--load",
                c,
                "--set",
                "system.devices=16",
                "--set",
                "plan.dp=16",
                "--set",
                "plan.global_batch=64",
            ],
            &[
                "cvendor/ring",
                "16 ranks exceed the ring's domain_size 8",
                "system.network[0]",
            ],
        ),
    ];
    for (args, want) in cases {
        let mut a = if args[0] == "predict" {
            vec![]
        } else {
            vec!["roofline"]
        };
        a.extend_from_slice(args);
        let o = perfcast(&a);
        assert_eq!(o.code, 1, "{a:?}: {}\n{}", o.stderr, o.stdout);
        assert!(o.stderr.starts_with("error: "), "{}", o.stderr);
        for w in *want {
            assert!(
                o.stderr.contains(w),
                "{a:?}: `{w}` missing from:\n{}",
                o.stderr
            );
        }
    }
}

#[test]
fn a_plugin_for_another_abi_is_a_short_error() {
    let l = libs();
    let v2 = l.abi_v2.to_str().unwrap();
    for args in [
        vec!["plugins", "--load", v2],
        vec!["roofline", "configs/examples/acme-npu.toml", "--load", v2],
    ] {
        let o = perfcast(&args);
        assert_eq!(o.code, 1, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains("libabi_v2_fixture.so"), "{}", o.stderr);
        assert!(o.stderr.contains("2.0"), "{}", o.stderr);
        assert!(o.stderr.lines().count() <= 4, "not short:\n{}", o.stderr);
    }
}

/// The example topology plugin: `predict` on the example config with `--load` (the topology
/// changes the communication, not the compute), listed by `plugins`; without the library the
/// config's kind is an error naming it.
#[test]
fn predict_over_the_example_topology_plugin() {
    let l = libs();
    let lib = l.dragonfly_plus.to_str().unwrap();
    let cfg = "plugins/examples/dragonfly-plus/gpt3-175b-dragonfly-plus.toml";
    let with = json(&["predict", cfg, "--load", lib, "--format", "json"]);
    let base = json(&[
        "predict",
        "configs/experiments/gpt3-175b-a100.toml",
        "--format",
        "json",
    ]);
    let t = |v: &Value| v["report"]["iteration_time"].as_f64().unwrap();
    assert!(t(&with) > 0.0 && t(&with).is_finite());
    assert_ne!(t(&with), t(&base));
    let list = perfcast(&["plugins", "--load", lib]);
    assert!(
        list.stdout.contains("example/dragonfly-plus"),
        "{}",
        list.stdout
    );
    let without = perfcast(&["predict", cfg]);
    assert_eq!(without.code, 1);
    assert!(
        without.stderr.contains("example/dragonfly-plus") && without.stderr.contains("topology"),
        "{}",
        without.stderr
    );
}

/// The `topologies` study loads a library topology with `--load` (issue 44: it could not) and
/// runs it as `predict` does: the library's row is `predict`'s step on the example config.
/// A study config without the rail-only paper's `[paper]` figures runs too.
#[test]
fn the_topologies_study_loads_a_library_topology() {
    let l = libs();
    let lib = l.dragonfly_plus.to_str().unwrap();
    let dir = common::tmpdir("perfcast-cli-study-library-topology");
    let configs = repo().join("configs");
    let study = format!(
        r#"study = "topologies"
model = "{models}/gpt3-175b.toml"
system = "{systems}/dgx-a100.toml"
stack = "megatron-lm-2021"
gpus = 1024

[plan]
tp = 8
pp = 16
dp = 8
micro_batch = 1
global_batch = 1536
recompute = "full"
precision = "fp16"
attention = "plain"

[all_to_all]
ranks = 64
bytes = 1048576.0

[[topologies]]
label = "fat-tree"
component = {{ kind = "fat-tree" }}

[[topologies]]
label = "dragonfly+"
component = {{ kind = "example/dragonfly-plus", nics_per_leaf = 32, leaves_per_group = 8, spines_per_group = 8, global_links_per_spine = 8 }}
"#,
        models = configs.join("models").display(),
        systems = configs.join("systems").display(),
    );
    let file = dir.join("study.toml");
    std::fs::write(&file, study).unwrap();
    let (file, out) = (file.to_str().unwrap(), dir.join("out"));
    let o = perfcast(&[
        "study",
        "topologies",
        "--config",
        file,
        "--load",
        lib,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let csv = std::fs::read_to_string(out.join("topologies.csv")).unwrap();
    let row = csv.lines().find(|l| l.starts_with("dragonfly+,")).unwrap();
    let study: f64 = row.split(',').nth(2).unwrap().parse().unwrap();
    let cfg = "plugins/examples/dragonfly-plus/gpt3-175b-dragonfly-plus.toml";
    let v = json(&["predict", cfg, "--load", lib, "--format", "json"]);
    let predict = v["report"]["iteration_time"].as_f64().unwrap();
    assert!(
        (study - predict).abs() <= 1e-5 * predict,
        "study {study} s, predict {predict} s"
    );
    // Without the library the kind is an error naming the study config's key.
    let o = perfcast(&["study", "topologies", "--config", file]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stderr.contains("topologies[1].component") && o.stderr.contains("example/dragonfly-plus"),
        "{}",
        o.stderr
    );
}

#[test]
fn load_takes_a_bare_file_name_in_the_working_directory() {
    // `--load libacme_npu.so` (no `/`) is the file in the working directory, not a name for
    // dlopen's search path.
    // (A copy under a name of its own: cargo's LD_LIBRARY_PATH holds the original's directory.)
    let l = libs();
    let dir = common::tmpdir("perfcast-cli-bare-load");
    std::fs::copy(&l.acme, dir.join("libacme_bare.so")).unwrap();
    let mut cmd = common::command(&dir, &["plugins", "--load", "libacme_bare.so"]);
    let o = common::output(cmd.env_remove("LD_LIBRARY_PATH"));
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("acme/npu9"), "{}", o.stdout);
}

#[test]
fn libraries_declare_their_parameters_through_both_abis() {
    let l = libs();
    let (acme, c) = (l.acme.to_str().unwrap(), l.c.to_str().unwrap());
    let v = json(&[
        "plugins",
        "--load",
        acme,
        "--describe",
        "acme/npu9",
        "--format",
        "json",
    ]);
    let params = v[0]["params"].as_array().unwrap();
    let launch = params.iter().find(|p| p["name"] == "launch_us").unwrap();
    assert_eq!(launch["default"], "3.0");
    assert_eq!(launch["unit"], "us");
    let v = json(&[
        "plugins",
        "--load",
        c,
        "--describe",
        "cvendor/dsp1",
        "--format",
        "json",
    ]);
    let names: Vec<&str> = v[0]["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"mac_efficiency") && names.len() == 8,
        "{names:?}"
    );
    // A component that declares nothing is shown as such.
    let o = perfcast(&["plugins", "--load", c, "--describe", "cvendor/lpddr"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("parameters not declared"), "{}", o.stdout);
    // config explain --all fills a library component's defaults from its declaration.
    let o = perfcast(&[
        "config",
        "explain",
        "configs/examples/acme-npu.toml",
        "--load",
        acme,
        "--all",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let line = o
        .stdout
        .lines()
        .find(|l| l.starts_with("components.npu9.nan_in_op_time"))
        .unwrap_or_else(|| panic!("{}", o.stdout));
    assert!(
        line.contains("false") && line.contains("default of compute_unit `acme/npu9`"),
        "{line}"
    );
}

/// A C plugin whose compute unit's `efficiency` does `misbehave` first (built by the test).
fn crashing_plugin(dir: &std::path::Path, name: &str, misbehave: &str) -> PathBuf {
    plugin_with(dir, name, misbehave, "")
}

/// The `crash/dev` library with `misbehave` in its efficiency call and `extra` appended.
fn plugin_with(dir: &std::path::Path, name: &str, misbehave: &str, extra: &str) -> PathBuf {
    let body = format!(
        r#"
#include <stdio.h>
#include <stdlib.h>
static int create(const char *json, void **out, char *err, size_t cap) {{
    (void)json; (void)err; (void)cap; *out = (void *)1; return PERFCAST_OK;
}}
static int32_t peak(const void *self, uint32_t engine, uint32_t dtype, double *out, char *err,
                    size_t cap) {{
    (void)self; (void)engine; (void)dtype; (void)err; (void)cap; *out = 1e14; return PERFCAST_OK;
}}
static int32_t efficiency(const void *self, const perfcast_op *op, double *out, char *err,
                          size_t cap) {{
    (void)self; (void)op; (void)err; (void)cap;
    {misbehave}
    *out = 0.5; return PERFCAST_OK;
}}
static const perfcast_compute_unit_vtable vt = {{
    .struct_size = sizeof(perfcast_compute_unit_vtable), .peak = peak, .efficiency = efficiency,
}};
static const perfcast_component comp = {{
    .struct_size = sizeof(perfcast_component), .category = PERFCAST_CATEGORY_COMPUTE_UNIT,
    .name = "crash/dev", .description = "misbehaves in efficiency", .create = create,
    .vtable = &vt,
}};
static const perfcast_component *const comps[] = {{&comp}};
static const perfcast_plugin plugin = {{
    .struct_size = sizeof(perfcast_plugin), .abi_major = PERFCAST_PLUGIN_ABI_MAJOR,
    .abi_minor = PERFCAST_PLUGIN_ABI_MINOR, .n_components = 1, .name = "crash",
    .version = "0.0.1", .components = comps,
}};
const perfcast_plugin *perfcast_plugin_entry_v1(void) {{ return &plugin; }}
{extra}
"#
    );
    perfcast_testkit::plugins::cc_plugin_source(dir, name, &body)
}

const CRASH_CONFIG: &str = r#"
[components.dev]
kind = "crash/dev"
[components.mem]
kind = "hbm"
capacity_gb = 80.0
bandwidth_tbs = 2.0
[device]
compute = "dev"
memory = ["mem"]
[[ops]]
name = "g"
op = "gemm"
m = 1024
n = 1024
k = 1024
dtype = "bf16"
"#;

#[test]
fn an_isolated_plugin_that_crashes_hangs_exits_or_babbles_is_a_one_line_error() {
    let dir = common::tmpdir("perfcast-cli-isolate");
    let cfg = dir.join("crash.toml");
    std::fs::write(&cfg, CRASH_CONFIG).unwrap();
    let cfg = cfg.to_str().unwrap().to_string();
    let cases: &[(&str, &str, &str)] = &[
        ("segv", "*(volatile int *)0 = 1;", "SIGSEGV"),
        ("exits", "exit(3);", "exited with status 3"),
        (
            "babbles",
            "printf(\"hello from the plugin\\n\"); fflush(stdout);",
            "garbage",
        ),
        (
            "hangs",
            "volatile int spin = 1; while (spin) {}",
            "did not answer `op_time` within 0.5 s",
        ),
    ];
    for (name, misbehave, want) in cases {
        let lib = crashing_plugin(&dir, name, misbehave);
        let lib = lib.to_str().unwrap();
        let o = perfcast(&[
            "roofline",
            &cfg,
            "--load",
            lib,
            "--isolate",
            "--plugin-timeout",
            "0.5",
        ]);
        assert_eq!(o.code, 1, "{name}: {}", o.stderr);
        let first = o
            .stderr
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or_default();
        assert!(
            first.contains(want) && first.contains(lib) && first.contains("op_time"),
            "{name}: {}",
            o.stderr
        );
        assert_eq!(
            o.stderr.lines().filter(|l| l.starts_with("error:")).count(),
            1
        );
    }
    // Without isolation a crash takes perfcast down (what --isolate is for), in a call or in
    // the library's constructor, and the signal's exit status stays; one line says why.
    let in_process: &[(&str, PathBuf)] = &[
        (
            "SIGSEGV",
            crashing_plugin(&dir, "segv2", "*(volatile int *)0 = 1;"),
        ),
        (
            "SIGABRT",
            plugin_with(
                &dir,
                "aborts_at_load",
                "",
                "__attribute__((constructor)) static void boom(void) { abort(); }",
            ),
        ),
    ];
    for (signal, lib) in in_process {
        let lib = lib.to_str().unwrap();
        let o = common::output(&mut common::command(
            &repo(),
            &["roofline", &cfg, "--load", lib],
        ));
        assert!(o.code != 0 && o.code != 1, "{signal}: {}", o.code);
        let errors: Vec<&str> = o
            .stderr
            .lines()
            .filter(|l| l.starts_with("error:"))
            .collect();
        assert_eq!(errors.len(), 1, "{signal}: {}", o.stderr);
        for w in [*signal, lib, "--isolate"] {
            assert!(errors[0].contains(w), "{w}: {}", o.stderr);
        }
    }
}

/// The `perfcast plugin-host` processes serving `lib` (Linux: from /proc).
#[cfg(target_os = "linux")]
fn plugin_hosts_of(lib: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        (cmd.contains("plugin-host") && cmd.contains(lib)).then_some(pid)
    })
    .collect()
}

/// The CPU time process `pid` has used, in clock ticks (user and system; 100 a second on
/// Linux), 0 once it is gone (Linux: from /proc/PID/stat).
#[cfg(target_os = "linux")]
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

/// A plugin host whose plugin runs forever does not outlive perfcast, however perfcast dies
/// (SIGKILL: no cleanup runs; SIGTERM, SIGINT: the default actions): its request reader sees
/// the pipe close and ends the process, within 2 s.
#[cfg(target_os = "linux")]
#[test]
fn a_plugin_host_dies_with_its_host() {
    let dir = common::tmpdir("perfcast-cli-isolate-orphan");
    let cfg = dir.join("crash.toml");
    std::fs::write(&cfg, CRASH_CONFIG).unwrap();
    // One library spins in a call, the other in its constructor, before the plugin host
    // has answered anything.
    let spins = crashing_plugin(&dir, "spins", "volatile int spin = 1; while (spin) {}");
    let at_load = plugin_with(
        &dir,
        "spins-at-load",
        "",
        "__attribute__((constructor)) static void spin_at_load(void) {\n    \
         volatile int spin = 1; while (spin) {}\n}",
    );
    for lib in [&spins, &at_load] {
        host_dies_with_perfcast(&cfg, lib.to_str().unwrap());
    }
}

fn host_dies_with_perfcast(cfg: &std::path::Path, lib: &str) {
    let wait_for = |want: bool, limit: f64| {
        let start = std::time::Instant::now();
        while start.elapsed().as_secs_f64() < limit {
            if plugin_hosts_of(lib).is_empty() != want {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    };
    // The child starts with the default action for each signal (common::spawn resets them),
    // whatever the shell that started `cargo test` left ignored; its wait has a deadline, and
    // the product's own plugin timeout (60 s) outlasts the test's window.
    for signal in ["KILL", "TERM", "INT"] {
        let mut child = common::spawn(
            common::command(
                &repo(),
                &[
                    "roofline",
                    cfg.to_str().unwrap(),
                    "--load",
                    lib,
                    "--isolate",
                    "--plugin-timeout",
                    "60",
                ],
            )
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
        );
        assert!(
            wait_for(true, 20.0),
            "{signal}: no plugin host of {lib} started"
        );
        // Let the host reach the spinning call: it has burnt 200 ms of CPU.
        let start = std::time::Instant::now();
        while plugin_hosts_of(lib).into_iter().map(cpu_ticks).max() < Some(20) {
            assert!(
                start.elapsed().as_secs() < 20,
                "{signal}: the plugin host of {lib} did not spin within 20 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.signal(signal);
        let status = child.wait(std::time::Duration::from_secs(15));
        assert!(!status.success(), "{signal}: {status:?}");
        if !wait_for(false, 2.0) {
            // Kill what outlived its host before failing, so that it spins no longer.
            let left = plugin_hosts_of(lib);
            for pid in &left {
                let _ = common::output(
                    std::process::Command::new("kill").args(["-KILL", &pid.to_string()]),
                );
            }
            panic!("{signal}: the plugin host of {lib} outlived its host by 2 s: {left:?}");
        }
    }
}

#[test]
fn an_isolated_library_gives_the_in_process_numbers() {
    let l = libs();
    let acme = l.acme.to_str().unwrap();
    let cfg = "configs/examples/acme-npu.toml";
    let a = perfcast(&["roofline", cfg, "--load", acme, "--format", "csv"]);
    let b = perfcast(&[
        "roofline",
        cfg,
        "--load",
        acme,
        "--isolate",
        "--format",
        "csv",
    ]);
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert_eq!(b.code, 0, "{}", b.stderr);
    assert_eq!(a.stdout, b.stdout);
    let v = json(&["plugins", "--load", acme, "--isolate", "--format", "json"]);
    let npu = v
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "acme/npu9")
        .unwrap();
    assert_eq!(npu["abi"], "rust-abi_stable 1.4, isolated");
    // A config entry asks for isolation itself.
    let dir = common::tmpdir("perfcast-cli-isolate-cfg");
    let c = dir.join("iso.toml");
    std::fs::write(
        &c,
        format!(
            "include = [\"{}\"]\n[[plugins]]\npath = \"{acme}\"\nisolate = true\ntimeout_s = 5\n",
            repo().join(cfg).display()
        ),
    )
    .unwrap();
    let o = perfcast(&["roofline", c.to_str().unwrap(), "--format", "csv"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout, a.stdout);
}

/// A truncated library (a copy cut short) is refused before it is mapped, naming the file
/// and what is missing; it used to kill perfcast with SIGBUS in-process.
#[test]
fn a_truncated_library_is_an_error_not_a_bus_error() {
    let dir = common::tmpdir("perfcast-cli-truncated");
    let src = repo().join("plugins/examples/tensor-c/tensor_c.c");
    let lib = perfcast_testkit::plugins::cc_shared(&dir, &src, "libwhole.so", &[]);
    let bytes = std::fs::read(&lib).unwrap();
    for (name, keep) in [("libcut.so", bytes.len() * 3 / 4), ("libhead.so", 40)] {
        let cut = dir.join(name);
        std::fs::write(&cut, &bytes[..keep]).unwrap();
        for isolate in [false, true] {
            let mut args = vec!["plugins", "--load", cut.to_str().unwrap()];
            if isolate {
                args.push("--isolate");
            }
            let o = perfcast(&args);
            assert_eq!(o.code, 1, "{name} {isolate}: {}", o.stderr);
            assert!(
                o.stderr.contains("truncated") && o.stderr.contains(name),
                "{name} {isolate}: {}",
                o.stderr
            );
        }
    }
}

/// `sweep --load`: every point loads the library (in process or isolated, the same rows);
/// without it the points cannot resolve its components.
#[test]
fn a_sweep_loads_its_libraries_at_every_point() {
    let l = libs();
    let dir = common::tmpdir("perfcast-cli-sweep-load");
    std::fs::write(
        dir.join("plan.toml"),
        "include = [\"preset:megatron-gpt-1.7b\"]\n\
         [plan]\ntp = 8\npp = 1\ndp = 1\nmicro_batch = 1\nglobal_batch = 8\n",
    )
    .unwrap();
    let cfg = repo().join("configs/examples/c-vendor.toml");
    let sweep = dir.join("s.toml");
    std::fs::write(
        &sweep,
        format!(
            "configs = [\"{}\", \"plan.toml\"]\nmode = \"evaluate\"\n\
             [grid]\n\"components.dsp1.bf16_tflops\" = [25.0, 50.0]\n",
            cfg.display()
        ),
    )
    .unwrap();
    let (s, c) = (sweep.to_str().unwrap(), l.c.to_str().unwrap());
    let o = perfcast(&["sweep", s]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("unknown kind `cvendor/dsp1`"),
        "{}",
        o.stderr
    );
    let rows = |extra: &[&str]| -> Vec<String> {
        let o = perfcast(&[&["sweep", s, "--load", c][..], extra].concat());
        assert_eq!(o.code, 0, "{extra:?}: {}", o.stderr);
        // (the last column is the point's wall time)
        o.stdout
            .lines()
            .map(|l| l.rsplit_once(',').unwrap().0.to_string())
            .collect()
    };
    let in_process = rows(&[]);
    assert_eq!(in_process.len(), 3);
    // A faster MAC array is never slower.
    let time = |l: &str| l.split(',').nth(2).unwrap().parse::<f64>().unwrap();
    assert!(time(&in_process[2]) < time(&in_process[1]));
    assert_eq!(rows(&["--isolate"]), in_process);
}

/// The loading policy (docs/commands/plugins.md, "Which libraries load"): a library named in
/// an included file runs only with `--allow-included-plugins` (run and sweep alike); `config
/// explain` checks the libraries and runs none unless `--load-plugins`; `plugins --describe`
/// loads only what `--load` names. The library's constructor leaves a file behind, so each
/// route shows whether its code ran.
#[test]
fn library_code_runs_only_where_the_policy_says() {
    let dir = common::tmpdir("perfcast-cli-policy");
    let marker = dir.join("ran");
    let lib = plugin_with(
        &dir,
        "marks",
        "",
        &format!(
            "__attribute__((constructor)) static void ran(void) {{ FILE *f = fopen({:?}, \"w\"); \
             if (f) fclose(f); }}",
            marker.display().to_string()
        ),
    );
    let entry = format!("[[plugins]]\npath = {:?}\n", lib.display().to_string());
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let base = write("base.toml", CRASH_CONFIG);
    write("lib.toml", &entry);
    let lib = lib.display().to_string();
    let included = write("top.toml", "include = [\"base.toml\", \"lib.toml\"]\n");
    let named = write("named.toml", &format!("include = [\"base.toml\"]\n{entry}"));
    let sweep = write(
        "s.toml",
        "configs = [\"top.toml\"]\nmode = \"evaluate\"\n\
         [grid]\n\"components.mem.bandwidth_tbs\" = [2.0, 3.0]\n",
    );
    // (route, arguments, exit code, whether the library's code ran)
    let routes: &[(&[&str], i32, bool)] = &[
        (&["roofline", &included], 1, false),
        (&["sweep", &sweep], 1, false),
        (&["config", "explain", &included], 0, false),
        (&["config", "explain", &named, "--all"], 0, false),
        (&["plugins", "--describe", "crash/dev"], 1, false),
        (&["config", "explain", &named, "--load-plugins"], 0, true),
        (&["config", "explain", &base, "--load", &lib], 0, true),
        (&["roofline", &named], 0, true),
        (
            &["roofline", &included, "--allow-included-plugins"],
            0,
            true,
        ),
    ];
    for (args, code, ran) in routes {
        let _ = std::fs::remove_file(&marker);
        let o = perfcast(args);
        assert_eq!(o.code, *code, "{args:?}: {}", o.stderr);
        assert_eq!(marker.exists(), *ran, "{args:?}: {}", o.stderr);
        if *code == 1 && args[0] != "plugins" {
            for w in ["lib.toml", "top.toml", "--allow-included-plugins"] {
                assert!(o.stderr.contains(w), "{args:?} {w}: {}", o.stderr);
            }
        }
        if args[0] == "config" && !ran {
            assert!(o.stderr.contains("not loaded"), "{args:?}: {}", o.stderr);
        }
    }
}

/// The C template (issue 44: a C vendor started from a 568-line example and wrote its own
/// JSON parser): `plugins/examples/c-minimal` is at most 100 lines, builds warning-free,
/// predicts, and its parameters are read by `perfcast_params.h`, whose every refusal names
/// the key.
#[test]
fn the_minimal_c_template_predicts_and_names_bad_parameters() {
    let dir = common::tmpdir("perfcast-cli-c-minimal");
    let src = repo().join("plugins/examples/c-minimal/minimal_npu.c");
    let lines = std::fs::read_to_string(&src).unwrap().lines().count();
    assert!(lines <= 100, "the template grew to {lines} lines");
    let lib = perfcast_testkit::plugins::cc_shared(
        &dir,
        &src,
        "libminimal_npu.so",
        &["-Wextra", "-std=c11"],
    );
    let lib = lib.to_str().unwrap();
    let cfg = "plugins/examples/c-minimal/minimal-npu.toml";
    let v = json(&[
        "predict",
        "preset:llama3-8b-h100",
        cfg,
        "--load",
        lib,
        "--format",
        "json",
    ]);
    let mfu = v["report"]["mfu"].as_f64().unwrap();
    assert!(mfu > 0.0 && mfu < 1.0, "{mfu}");
    for (set, said) in [
        (
            "components.npu.eficiency=0.5",
            "unknown parameter `eficiency`; it takes: matrix_tflops",
        ),
        (
            "components.npu.efficiency=1.5",
            "`efficiency` = 1.5 must be in (0, 1]",
        ),
        (
            "components.npu.efficiency=\"high\"",
            "`efficiency` must be a number",
        ),
    ] {
        let o = perfcast(&[
            "predict",
            "preset:llama3-8b-h100",
            cfg,
            "--load",
            lib,
            "--set",
            set,
        ]);
        assert_eq!(o.code, 1, "{set}: {}", o.stdout);
        assert!(o.stderr.contains(said), "{set}: {}", o.stderr);
    }
    let without = dir.join("minimal-npu-without-peak.toml");
    let text = std::fs::read_to_string(repo().join(cfg))
        .unwrap()
        .replace("matrix_tflops = 1200.0", "");
    std::fs::write(&without, text).unwrap();
    let o = perfcast(&[
        "predict",
        "preset:llama3-8b-h100",
        without.to_str().unwrap(),
        "--load",
        lib,
    ]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("missing parameter `matrix_tflops`"),
        "{}",
        o.stderr
    );
}

/// `perfcast_params.h` on the JSON the host writes and on what it must refuse: keys inside
/// nested objects, strings holding commas, braces and escaped quotes, arrays, booleans,
/// absent keys and defaults, and malformed objects.
#[test]
fn the_c_parameter_helpers_read_what_the_host_writes() {
    let dir = common::tmpdir("perfcast-cli-c-params");
    let src = dir.join("params_test.c");
    std::fs::write(
        &src,
        r#"#include <stdio.h>
#include "perfcast_params.h"
static int failed = 0;
#define CHECK(c) do { if (!(c)) { printf("line %d: %s\n", __LINE__, #c); failed = 1; } } while (0)
int main(void) {
    char err[256], s[16];
    double x = 0;
    int b = -1;
    const char *j = "{\"a\":{\"x\":1,\"y\":\"}\"},\"s\":\"p,q}\\\"r\",\"x\":2.5e3,\"l\":[1,{\"x\":3}],\"t\":true,\"n\":\"plain\"}";
    CHECK(perfcast_param_number(j, "c", "x", NAN, 0, 1e9, &x, err, sizeof err) == 0 && x == 2500.0);
    CHECK(perfcast_param_number(j, "c", "absent", 7.0, 0, 10, &x, err, sizeof err) == 0 && x == 7.0);
    CHECK(perfcast_param_number(j, "c", "absent", NAN, 0, 10, &x, err, sizeof err) == PERFCAST_ERR_PARAMS);
    CHECK(strstr(err, "missing parameter `absent`") != NULL);
    CHECK(perfcast_param_number(j, "c", "x", NAN, 0, 10, &x, err, sizeof err) == PERFCAST_ERR_PARAMS);
    CHECK(strstr(err, "`x` = 2500 must be in [0, 10]") != NULL);
    CHECK(perfcast_param_number(j, "c", "s", NAN, 0, 10, &x, err, sizeof err) == PERFCAST_ERR_PARAMS);
    CHECK(perfcast_param_bool(j, "c", "t", 0, &b, err, sizeof err) == 0 && b == 1);
    CHECK(perfcast_param_bool(j, "c", "absent", 0, &b, err, sizeof err) == 0 && b == 0);
    CHECK(perfcast_param_bool(j, "c", "x", 0, &b, err, sizeof err) == PERFCAST_ERR_PARAMS);
    CHECK(perfcast_param_string(j, "c", "n", "", s, sizeof s, err, sizeof err) == 0 && strcmp(s, "plain") == 0);
    CHECK(perfcast_param_string(j, "c", "absent", "dflt", s, sizeof s, err, sizeof err) == 0 && strcmp(s, "dflt") == 0);
    CHECK(perfcast_param_string(j, "c", "s", "", s, sizeof s, err, sizeof err) == PERFCAST_ERR_PARAMS);
    const char *const known[] = {"a", "s", "x", "l", "t", "n"};
    CHECK(perfcast_params_check(j, "c", known, 6, err, sizeof err) == 0);
    CHECK(perfcast_params_check(j, "c", known, 5, err, sizeof err) == PERFCAST_ERR_PARAMS);
    CHECK(strstr(err, "unknown parameter `n`; it takes: a s x l t") != NULL);
    CHECK(perfcast_params_check("{}", "c", known, 6, err, sizeof err) == 0);
    CHECK(perfcast_params_check(NULL, "c", known, 6, err, sizeof err) == 0);
    CHECK(perfcast_params_check("{\"a\" 1}", "c", known, 6, err, sizeof err) == PERFCAST_ERR_PARAMS);
    CHECK(perfcast_params_check("[1]", "c", known, 6, err, sizeof err) == PERFCAST_ERR_PARAMS);
    CHECK(perfcast_param_number("{\"x\":1", "c", "y", NAN, 0, 9, &x, err, sizeof err) == PERFCAST_ERR_PARAMS);
    return failed;
}
"#,
    )
    .unwrap();
    let exe = perfcast_testkit::plugins::cc_program(&dir, &src, "params_test");
    let o = common::output(&mut std::process::Command::new(&exe));
    assert_eq!(o.code, 0, "{}", o.stdout);
}

/// The Rust template (`plugins/examples/minimal-rust`, at most 100 lines) is the C one's
/// device: the same step, and a misspelt key or a range refused, naming the key.
#[test]
fn the_minimal_rust_template_predicts_as_the_c_one() {
    let dir = common::tmpdir("perfcast-cli-minimal-rust");
    let src = repo().join("plugins/examples/minimal-rust/src/lib.rs");
    let lines = std::fs::read_to_string(&src).unwrap().lines().count();
    assert!(lines <= 100, "the template grew to {lines} lines");
    let rust = build_rust(&["minimal-rust"], &dir).remove(0);
    let c = perfcast_testkit::plugins::cc_shared(
        &dir,
        &repo().join("plugins/examples/c-minimal/minimal_npu.c"),
        "libminimal_npu.so",
        &[],
    );
    let step = |cfg: &str, lib: &std::path::Path| {
        let v = json(&[
            "predict",
            "preset:llama3-8b-h100",
            cfg,
            "--load",
            lib.to_str().unwrap(),
            "--format",
            "json",
        ]);
        v["report"]["iteration_time"].as_f64().unwrap()
    };
    let in_rust = step("plugins/examples/minimal-rust/minimal-npu-rs.toml", &rust);
    let in_c = step("plugins/examples/c-minimal/minimal-npu.toml", &c);
    assert!(
        (in_rust - in_c).abs() <= 1e-9 * in_c,
        "Rust {in_rust} s, C {in_c} s"
    );
    for (set, said) in [
        ("components.npu.eficiency=0.5", "eficiency"),
        ("components.npu.efficiency=1.5", "efficiency"),
    ] {
        let o = perfcast(&[
            "predict",
            "preset:llama3-8b-h100",
            "plugins/examples/minimal-rust/minimal-npu-rs.toml",
            "--load",
            rust.to_str().unwrap(),
            "--set",
            set,
        ]);
        assert_eq!(o.code, 1, "{set}: {}", o.stdout);
        assert!(o.stderr.contains(said), "{set}: {}", o.stderr);
    }
}
