//! Tests of loading, layering, provenance and composition (data-driven where the cases are a
//! table). Files go to a fresh temporary directory per test.

use crate::layers::LayerOrigin;
use crate::{Config, HostError, LibraryPolicy, Plugins, Sources};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The built-in plugins, as a host hands them in.
fn builtins() -> Plugins {
    Plugins::new(perfcast_builtins::DefaultPlugins::new())
        .with_kernels(perfcast_kernel_data::shared().expect("kernel tables"))
}

/// A fresh directory under the target directory (not `$TMPDIR`).
fn tmpdir() -> PathBuf {
    perfcast_testkit::tmpdir("perfcast-config-test")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, text).unwrap();
    p
}

fn load(files: &[PathBuf], sets: &[&str]) -> Result<Config, HostError> {
    Config::load(
        &Sources::files(&builtins(), files.iter().cloned())
            .with_sets(sets.iter().map(|s| s.to_string()))
            .without_env(),
    )
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Plan {
    tp: u32,
    #[serde(default)]
    pp: u32,
}

/// (files, --sets, plan.tp, plan.pp, origin of tp, origin of pp)
type LayerCase<'a> = (&'a [&'a PathBuf], &'a [&'a str], u32, u32, &'a str, &'a str);

#[test]
fn later_files_then_sets_win_and_keep_their_origin() {
    let d = tmpdir();
    let a = write(&d, "a.toml", "[plan]\ntp = 1\npp = 2\n");
    let b = write(&d, "b.yaml", "plan:\n  tp: 2\n");
    let c = write(&d, "c.json", "{\"plan\": {\"pp\": 8}}");
    let cases: &[LayerCase] = &[
        (&[&a], &[], 1, 2, "a.toml", "a.toml"),
        (&[&a, &b], &[], 2, 2, "b.yaml:2", "a.toml:3"),
        (&[&a, &b, &c], &[], 2, 8, "b.yaml:2", "c.json"),
        (&[&a, &b], &["plan.tp=4"], 4, 2, "--set plan.tp=4", "a.toml"),
        (
            &[&a],
            &["plan.tp=4", "plan.tp=16"],
            16,
            2,
            "--set plan.tp=16",
            "a.toml",
        ),
    ];
    for (files, sets, tp, pp, tp_from, pp_from) in cases {
        let files: Vec<PathBuf> = files.iter().map(|p| (*p).clone()).collect();
        let cfg = load(&files, sets).unwrap();
        assert_eq!(
            cfg.extract::<Plan>("plan").unwrap(),
            Plan { tp: *tp, pp: *pp }
        );
        let origin = cfg.origin_of("plan.tp").unwrap();
        assert!(origin.contains(tp_from), "{origin} vs {tp_from}");
        let origin = cfg.origin_of("plan.pp").unwrap();
        assert!(origin.contains(pp_from), "{origin} vs {pp_from}");
        // The layer alone: the origin without its line.
        for key in ["plan.tp", "plan.pp"] {
            let (layer, origin) = (cfg.layer_of(key).unwrap(), cfg.origin_of(key).unwrap());
            assert!(origin.starts_with(layer), "{origin} vs {layer}");
        }
    }
    // A built-in default's layer is the defaults'.
    let cfg = load(&[], &[]).unwrap();
    let key = "system.devices";
    assert_eq!(cfg.layer_of(key), cfg.origin_of(key).as_deref());
    assert_eq!(
        cfg.layer_of(key),
        Some(LayerOrigin::Default.label().as_str())
    );
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's closure returns figment::Error
fn environment_sits_between_files_and_sets() {
    figment::Jail::expect_with(|jail| {
        jail.create_file("x.toml", "[plan]\ntp = 1\npp = 2\n")?;
        jail.set_env("PERFCAST_PLAN__TP", "3");
        let cfg = Config::load(&Sources::files(&Plugins::none(), ["x.toml"])).unwrap();
        assert_eq!(cfg.extract::<Plan>("plan").unwrap(), Plan { tp: 3, pp: 2 });
        assert_eq!(
            cfg.origin_of("plan.tp").unwrap(),
            "environment variable PERFCAST_PLAN__TP"
        );
        let cfg =
            Config::load(&Sources::files(&Plugins::none(), ["x.toml"]).with_sets(["plan.tp=5"]))
                .unwrap();
        assert_eq!(cfg.extract::<Plan>("plan").unwrap().tp, 5);
        let explained = cfg.explain();
        let row = explained.iter().find(|e| e.key == "plan.tp").unwrap();
        assert_eq!(
            (row.value.as_str(), row.source.as_str()),
            ("5", "--set plan.tp=5")
        );
        let row = explained
            .iter()
            .find(|e| e.key == "system.devices")
            .unwrap();
        assert_eq!(row.source, "built-in default");
        // Without the environment layer the file wins again.
        let cfg =
            Config::load(&Sources::files(&Plugins::none(), ["x.toml"]).without_env()).unwrap();
        assert_eq!(cfg.extract::<Plan>("plan").unwrap().tp, 1);
        // A mistyped environment value names the variable.
        jail.set_env("PERFCAST_PLAN__TP", "lots");
        let e = Config::load(&Sources::files(&Plugins::none(), ["x.toml"]))
            .unwrap()
            .extract::<Plan>("plan")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("plan.tp") && e.contains("PERFCAST_PLAN__TP"),
            "{e}"
        );
        // A variable that sets no allowed top-level key is left out and reported, not an
        // "unknown top-level key" error.
        jail.set_env("PERFCAST_PLAN__TP", "3");
        jail.set_env("PERFCAST_ROOT", "/somewhere");
        let cfg = Config::load(&Sources::files(&Plugins::none(), ["x.toml"])).unwrap();
        assert_eq!(cfg.ignored_env(), ["PERFCAST_ROOT"]);
        assert!(!cfg.contains("root"));
        assert_eq!(cfg.extract::<Plan>("plan").unwrap().tp, 3);
        Ok(())
    });
}

#[test]
fn includes_are_relative_beneath_and_cycles_fail() {
    let d = tmpdir();
    write(&d, "hw/base.toml", "[plan]\ntp = 1\npp = 4\n");
    write(
        &d,
        "hw/mid.toml",
        "include = [\"base.toml\"]\n[plan]\ntp = 2\n",
    );
    let top = write(
        &d,
        "exp/top.toml",
        "include = [\"../hw/mid.toml\"]\n[plan]\ntp = 8\n",
    );
    let cfg = load(std::slice::from_ref(&top), &[]).unwrap();
    assert_eq!(cfg.extract::<Plan>("plan").unwrap(), Plan { tp: 8, pp: 4 });
    let pp = cfg.origin_of("plan.pp").unwrap();
    assert!(
        pp.contains("base.toml") && pp.contains("included by"),
        "{pp}"
    );
    assert!(!cfg.contains("include"));

    // Diamond: the same file twice is fine; a cycle is not.
    write(&d, "d/a.toml", "include = [\"b.toml\", \"c.toml\"]\n");
    write(&d, "d/b.toml", "include = [\"c.toml\"]\n");
    write(&d, "d/c.toml", "[plan]\ntp = 3\n");
    assert!(load(&[d.join("d/a.toml")], &[]).is_ok());
    write(&d, "d/c.toml", "include = [\"a.toml\"]\n");
    let e = load(&[d.join("d/a.toml")], &[]).unwrap_err();
    assert!(matches!(e, HostError::IncludeCycle { .. }), "{e}");
    assert!(e.to_string().contains("a.toml -> "), "{e}");

    // A missing include names the including file.
    let bad = write(&d, "bad.toml", "include = [\"nope.toml\"]\n");
    let e = load(&[bad], &[]).unwrap_err().to_string();
    assert!(e.contains("nope.toml") && e.contains("included by"), "{e}");
}

/// Includes are bounded: a chain of 1,000 files stops at the nesting limit (it used to
/// overflow the stack); 31 files each including the next twice (2^31 paths to the last) read
/// each file once (they used to exhaust memory); a file including 4,100 others stops at the
/// layer limit; the errors name a file and the limit.
#[test]
fn include_chains_and_diamonds_are_bounded() {
    let d = tmpdir();
    for i in 0..1000 {
        write(
            &d,
            &format!("chain/f{i}.toml"),
            &format!("include = [\"f{}.toml\"]\n", i + 1),
        );
    }
    write(&d, "chain/f1000.toml", "[plan]\ntp = 1\n");
    let e = load(&[d.join("chain/f0.toml")], &[]).unwrap_err();
    assert!(
        matches!(e, HostError::TooManyIncludes { limit: 64, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("nested 65 deep"), "{e}");
    for i in 0..31 {
        let next = format!("g{}.toml", i + 1);
        write(
            &d,
            &format!("diamond/g{i}.toml"),
            &format!("include = [\"{next}\", \"{next}\"]\n"),
        );
    }
    write(&d, "diamond/g31.toml", "[plan]\ntp = 1\n");
    let layers = crate::layers::read_config(&d.join("diamond/g0.toml")).unwrap();
    assert_eq!(layers.len(), 32);
    let names: Vec<String> = (0..4100).map(|i| format!("w{i}.toml")).collect();
    for n in &names {
        write(&d, &format!("wide/{n}"), "");
    }
    write(
        &d,
        "wide/top.toml",
        &format!("include = {names:?}\n[plan]\ntp = 1\n"),
    );
    let e = load(&[d.join("wide/top.toml")], &[]).unwrap_err();
    assert!(
        matches!(e, HostError::TooManyIncludes { limit: 4096, .. }),
        "{e}"
    );
}

/// A file reached by two paths is merged once, at its first place: what the first includer
/// set over it stands, and the second includer does not undo it by including it again.
#[test]
fn a_shared_include_is_merged_once() {
    let d = tmpdir();
    write(&d, "base.toml", "[plan]\ntp = 1\npp = 1\n");
    write(&d, "a.toml", "include = [\"base.toml\"]\n[plan]\ntp = 2\n");
    write(&d, "b.toml", "include = [\"base.toml\"]\n[plan]\npp = 4\n");
    write(&d, "top.toml", "include = [\"a.toml\", \"b.toml\"]\n");
    assert_eq!(
        crate::layers::read_config(&d.join("top.toml"))
            .unwrap()
            .len(),
        4
    );
    let cfg = load(&[d.join("top.toml")], &[]).unwrap();
    assert_eq!(cfg.extract::<Plan>("plan").unwrap(), Plan { tp: 2, pp: 4 });
    assert!(cfg.origin_of("plan.tp").unwrap().contains("a.toml"));
}

/// A config that is not a regular file (a symlink to `/dev/zero`, which read forever) or is
/// larger than any configuration needs (a sparse 17 MB file) is refused at once, naming it.
#[cfg(unix)]
#[test]
fn devices_and_huge_files_are_not_read_as_configs() {
    let d = tmpdir();
    let zero = d.join("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let e = load(std::slice::from_ref(&zero), &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("zero.toml") && e.contains("not a regular file"),
        "{e}"
    );
    let big = d.join("big.toml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(17 << 20)
        .unwrap();
    let e = load(std::slice::from_ref(&big), &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("big.toml") && e.contains("more than a configuration"),
        "{e}"
    );
    // Included, the message names the including file too.
    let top = write(&d, "top.toml", "include = [\"zero.toml\"]\n");
    let e = load(&[top], &[]).unwrap_err().to_string();
    assert!(e.contains("included by") && e.contains("top.toml"), "{e}");
}

fn a100_with(extra: &str) -> PathBuf {
    let d = tmpdir();
    write(
        &d,
        "x.toml",
        &format!("include = [\"preset:a100-sxm4-80gb\"]\n{extra}"),
    )
}

#[test]
fn bad_components_name_the_key_and_the_file() {
    // (extra config, --set, expected fragments)
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "[components.a100_sxm4_80gb]\nfp8_tops = 3\n",
            &[],
            &[
                "components.a100_sxm4_80gb.fp8_tops",
                "x.toml",
                "unknown key `fp8_tops`",
            ],
        ),
        (
            "[components.a100_sxm4_80gb]\nsm_count = \"many\"\n",
            &[],
            &[
                "components.a100_sxm4_80gb.sm_count",
                "x.toml",
                "expected a non-negative integer (at most 4294967295), got \"many\"",
            ],
        ),
        (
            "",
            &["components.a100_sxm4_80gb.sm_count=-1"],
            &["components.a100_sxm4_80gb.sm_count", "--set"],
        ),
        (
            "[device]\ncompute = \"a100_sxm4_80gb_nic\"\n",
            &[],
            &["device.compute", "interconnect", "compute_unit kinds: gpu"],
        ),
        (
            "[device]\nmemory = [\"a100_sxm4_80gb_hbm\", \"hbm3\"]\n",
            &[],
            &[
                "device.memory[1]",
                "`hbm3`",
                "not defined",
                "a100_sxm4_80gb_l2",
            ],
        ),
        (
            "[components.npu]\nkind = \"acme/npu9\"\n[device]\ncompute = \"npu\"\n",
            &[],
            &[
                "unknown kind `acme/npu9`",
                "components.npu.kind",
                "x.toml",
                "compute_unit: gpu",
                "registered by a plugin library: load it with `--load PATH`",
            ],
        ),
        (
            "[components.spare]\nkind = \"hbm\"\ncapacity_gb = \"big\"\n",
            &[],
            &["components.spare.capacity_gb", "x.toml"],
        ),
        (
            "[device]\ncomputer = \"x\"\n",
            &[],
            &["device.computer", "x.toml", "unknown key"],
        ),
        (
            "[components.a100_sxm4_80gb_hbm]\nkind = 3\n",
            &[],
            &["components.a100_sxm4_80gb_hbm.kind", "x.toml"],
        ),
    ];
    for (extra, sets, want) in cases {
        let cfg = load(&[a100_with(extra)], sets).unwrap();
        let e = cfg.device().unwrap_err().to_string();
        for w in *want {
            assert!(e.contains(w), "`{w}` missing from: {e}");
        }
    }
}

#[test]
fn unknown_top_level_keys_and_bad_values_fail_at_load() {
    let e = load(&[a100_with("[sytem]\ndevices = 8\n")], &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`sytem`") && e.contains("x.toml") && e.contains("system"),
        "{e}"
    );
    let e = load(&[a100_with("")], &["modle.layers=3"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`modle`") && e.contains("--set modle.layers=3"),
        "{e}"
    );
    let e = load(
        &[a100_with("[[plugins]]\npath = \"lib.so\"\nsha = \"x\"\n")],
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("plugins") && e.contains("sha"), "{e}");
    let e = load(&[a100_with("[[plugins]]\npath = \"libnothere.so\"\n")], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("libnothere.so") && e.contains("x.toml"), "{e}");
}

#[test]
fn system_and_ops_from_a_preset() {
    let f = a100_with(
        "[[ops]]\nname = \"big\"\nop = \"gemm\"\nm = 8192\nn = 8192\nk = 8192\ndtype = \"bf16\"\n\
         [[ops]]\nop = \"vector\"\nkind = \"norm\"\nelements = 100000000\nflops_per_element = 4.0\nbytes_per_element = 4.0\ndtype = \"bf16\"\n",
    );
    let cfg = load(&[f], &["system.devices=64"]).unwrap();
    let sys = cfg.system().unwrap();
    assert_eq!(sys.devices, 64);
    assert_eq!(sys.network.len(), 2);
    assert_eq!(sys.network[0].kind(), "nvlink");
    let dev = cfg.device().unwrap();
    assert_eq!(
        dev.memory_names,
        ["a100_sxm4_80gb_l2", "a100_sxm4_80gb_hbm"]
    );
    let ops = cfg.ops().unwrap();
    assert_eq!(ops[1].name, "op1");
}

#[test]
fn bad_ops_name_the_entry() {
    let cases: &[(&str, &[&str])] = &[
        (
            "[[ops]]\nop = \"gemm\"\nm = 0\nn = 1\nk = 1\ndtype = \"bf16\"\n",
            &["ops[0].m", "at least 1", "x.toml"],
        ),
        (
            "[[ops]]\nop = \"gemm\"\nm = 1\nn = 1\nk = 1\ndtype = \"bf12\"\n",
            &["ops[0].dtype", "bf12"],
        ),
        (
            "[[ops]]\nop = \"gemm\"\nm = 1\nn = 1\nkk = 1\ndtype = \"bf16\"\n",
            &["ops[0].kk", "unknown key"],
        ),
        ("[[ops]]\nop = \"conv\"\n", &["ops[0].op", "gemm, vector, attention"]),
        (
            "[[ops]]\nop = \"vector\"\nkind = \"norm\"\nelements = 1\nflops_per_element = 1.0\nbytes_per_element = 0.0\ndtype = \"bf16\"\n",
            &["ops[0].bytes_per_element", "> 0"],
        ),
        (
            "[[ops]]\nop = \"gemm\"\nm = 1\nn = 1\nk = 1\n",
            &["ops[0].dtype", "missing"],
        ),
    ];
    for (extra, want) in cases {
        let cfg = load(&[a100_with(extra)], &[]).unwrap();
        let e = cfg.ops().unwrap_err().to_string();
        for w in *want {
            assert!(e.contains(w), "`{w}` missing from: {e}");
        }
    }
}

#[test]
fn spare_components_of_unloaded_plugins_are_left_alone() {
    // A component no slot uses, whose plugin library is not loaded, does not stop the device;
    // a spare component of a known kind must still build.
    let cfg = load(
        &[a100_with(
            "[components.spare]\nkind = \"acme/npu9\"\nfp8_tops = 1.0\n",
        )],
        &[],
    )
    .unwrap();
    assert!(cfg.device().is_ok());
    let cfg = load(
        &[a100_with(
            "[components.spare]\nkind = \"hbm\"\nbandwidth_tbs = -1.0\ncapacity_gb = 1.0\n",
        )],
        &[],
    )
    .unwrap();
    let e = cfg.device().unwrap_err().to_string();
    assert!(e.contains("components.spare.bandwidth_tbs"), "{e}");
}

#[test]
fn non_finite_numbers_are_rejected_at_load() {
    for (extra, sets, key) in [
        ("[plan]\ntp = nan\n", &[][..], "plan.tp"),
        (
            "",
            &["components.a100_sxm4_80gb.clock_ghz=inf"][..],
            "components.a100_sxm4_80gb.clock_ghz",
        ),
        (
            "[[ops]]\nflops_per_element = -inf\n",
            &[][..],
            "ops[0].flops_per_element",
        ),
    ] {
        let e = load(&[a100_with(extra)], sets).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains("finite"), "{e}");
    }
}

/// `with_sets` is `load` with the sets appended: the same values, origins and errors, the
/// files not read again; sets below `plugins` are refused.
#[test]
fn with_sets_equals_loading_with_the_sets() {
    let base = ["preset:h100-sxm5-80gb".into()];
    let sets = [
        "components.h100_sxm5_80gb.matmul_efficiency=0.5",
        "system.devices=16",
    ];
    let loaded = load(&base, &sets).unwrap();
    let derived = load(&base, &[]).unwrap().with_sets(&sets).unwrap();
    assert_eq!(loaded.value(), derived.value());
    assert_eq!(loaded.layers(), derived.layers());
    let key = "components.h100_sxm5_80gb.matmul_efficiency";
    assert_eq!(loaded.origin_of(key), derived.origin_of(key));
    let s = derived.system().unwrap();
    assert_eq!(s.devices, 16);
    let bad = load(&base, &[])
        .unwrap()
        .with_sets(&["components.h100_sxm5_80gb.matmul_efficiency=2.0"])
        .unwrap()
        .system()
        .unwrap_err()
        .to_string();
    assert!(
        bad.contains("matmul_efficiency") && bad.contains("--set"),
        "{bad}"
    );
    let base_cfg = load(&base, &[]).unwrap();
    for (set, want) in [
        ("nosuch.key=1", "nosuch"),
        ("plugins=[]", "plugin libraries"),
        ("system.devices=nan", "finite"),
    ] {
        let e = base_cfg.with_sets(&[set]).unwrap_err().to_string();
        assert!(e.contains(want), "{set}: {e}");
    }
    // Nor does `--set` load one when the configuration is first read: refused before any
    // library code runs, naming the argument.
    let set = "plugins=[{path = \"libx.so\"}]";
    let e = load(&base, &[set]).unwrap_err().to_string();
    assert!(
        e.contains("invalid `plugins` (from --set plugins=")
            && e.contains("load only from `[[plugins]]` in a config file or from `--load PATH`"),
        "{e}"
    );
}

/// `with_values` is `with_sets` of the same keys and values, parsed: the same values,
/// layers and origins.
#[test]
fn with_values_equals_with_sets() {
    let base = load(&["preset:h100-sxm5-80gb".into()], &[]).unwrap();
    let sets = base
        .with_sets(&[
            "components.h100_sxm5_80gb_hbm.bandwidth_tbs=4.0",
            "system.devices=16",
            "system.name=\"x\"",
        ])
        .unwrap();
    let (bw, n, name) = (
        toml::Value::Float(4.0),
        toml::Value::Integer(16),
        toml::Value::String("x".into()),
    );
    let values = base
        .with_values(&[
            ("components.h100_sxm5_80gb_hbm.bandwidth_tbs", &bw),
            ("system.devices", &n),
            ("system.name", &name),
        ])
        .unwrap();
    assert_eq!(sets.value(), values.value());
    assert_eq!(sets.layers(), values.layers());
    for key in ["components.h100_sxm5_80gb_hbm.bandwidth_tbs", "system.name"] {
        assert_eq!(sets.origin_of(key), values.origin_of(key), "{key}");
    }
    let e = base
        .with_values(&[("system.devices", &toml::Value::Float(f64::NAN))])
        .unwrap_err()
        .to_string();
    assert!(e.contains("system.devices") && e.contains("finite"), "{e}");
}

/// A configuration derived with `with_sets` builds again only the components its sets
/// change: the others (the compute unit with its kernel memo) are the ones built before,
/// and a spare component a set breaks is still refused.
#[test]
fn derived_configurations_rebuild_only_the_components_their_sets_change() {
    let f = write(
        &tmpdir(),
        "spare.toml",
        "include = [\"preset:h100-sxm5-80gb\"]\n[components.spare]\nkind = \"hbm\"\n\
         bandwidth_tbs = 1.0\ncapacity_gb = 1.0\n",
    );
    let base = load(&[f], &[]).unwrap();
    let s0 = base.system().unwrap();
    let hbm = |s: &perfcast_core::System| s.memory.device().unwrap().bandwidth().0;
    let s1 = base
        .with_sets(&["components.h100_sxm5_80gb_hbm.bandwidth_tbs=4.0"])
        .unwrap()
        .system()
        .unwrap();
    assert!(Arc::ptr_eq(&s0.compute, &s1.compute));
    assert!(Arc::ptr_eq(&s0.network[0], &s1.network[0]));
    assert_eq!((hbm(&s0), hbm(&s1)), (3.35e12, 4.0e12));
    let s2 = base
        .with_sets(&["components.h100_sxm5_80gb.matmul_efficiency=0.5"])
        .unwrap()
        .system()
        .unwrap();
    assert!(!Arc::ptr_eq(&s0.compute, &s2.compute));
    // Back to the base's values: the base's components again.
    let s3 = base
        .with_sets(&["components.h100_sxm5_80gb_hbm.bandwidth_tbs=3.35"])
        .unwrap()
        .system()
        .unwrap();
    assert!(Arc::ptr_eq(&s0.memory.tiers[1], &s3.memory.tiers[1]));
    let e = base
        .with_sets(&["components.spare.bandwidth_tbs=-1.0"])
        .unwrap()
        .system()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("components.spare.bandwidth_tbs") && e.contains("--set"),
        "{e}"
    );
}

/// The plugins come from the host: with none handed in, a configuration still reads (its
/// data needs no plugin), and resolving a component says what is missing instead of listing
/// no kinds; with the built-ins handed in, the same file composes.
#[test]
fn components_resolve_in_the_plugins_the_host_hands_in() {
    let f = a100_with("");
    let bare = Config::load(&Sources::files(&Plugins::none(), [f.clone()]).without_env()).unwrap();
    let compute: String = bare.extract("device.compute").unwrap();
    assert_eq!(compute, "a100_sxm4_80gb");
    let e = bare.device().unwrap_err().to_string();
    assert!(
        e.contains("unknown kind `gpu`") && e.contains("no plugins were handed"),
        "{e}"
    );
    let cfg = Config::load(&Sources::files(&builtins(), [f]).without_env()).unwrap();
    assert!(cfg.device().is_ok());
    assert!(cfg
        .plugins()
        .registry()
        .unwrap()
        .contains(perfcast_core::Category::ComputeUnit, "gpu"));
}

/// `[[plugins]]` of an included file is refused before any check under the default policy
/// (naming the file, its includer and the opt-in), checked under `IncludedToo`; under
/// `CheckOnly` every entry is still checked and none is loaded.
#[test]
fn the_loading_policy_decides_which_entries_load() {
    let d = tmpdir();
    let lib = write(&d, "lib.toml", "[[plugins]]\npath = \"libnothere.so\"\n");
    let top = write(
        &d,
        "top.toml",
        "include = [\"preset:a100-sxm4-80gb\", \"lib.toml\"]\n",
    );
    let with = |files: &[PathBuf], policy: LibraryPolicy| {
        Config::load(
            &Sources::files(&builtins(), files.iter().cloned())
                .without_env()
                .with_policy(policy),
        )
    };
    let e = with(std::slice::from_ref(&top), LibraryPolicy::Named)
        .unwrap_err()
        .to_string();
    for w in [
        "plugins",
        "lib.toml",
        "top.toml",
        "--allow-included-plugins",
    ] {
        assert!(e.contains(w), "{w}: {e}");
    }
    assert!(!e.contains("libnothere"), "{e}");
    for policy in [LibraryPolicy::IncludedToo, LibraryPolicy::CheckOnly] {
        let e = with(std::slice::from_ref(&top), policy)
            .unwrap_err()
            .to_string();
        assert!(e.contains("libnothere.so"), "{policy:?}: {e}");
    }
    // The file given names it: loaded under the default policy (here: checked, and missing).
    let e = with(&[lib], LibraryPolicy::Named).unwrap_err().to_string();
    assert!(e.contains("libnothere.so"), "{e}");
    // No entry: nothing unloaded.
    let cfg = with(&[a100_with("")], LibraryPolicy::CheckOnly).unwrap();
    assert!(cfg.unloaded().is_empty() && cfg.libraries().is_empty());
}
