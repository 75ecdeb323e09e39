//! End to end: build the example plugins (the acme-npu and sram-fixture Rust cdylibs, the C
//! plugin at ABI 1.1 and 1.0, broken C descriptors), load them into a registry that also holds
//! a built-in, and check what comes out, including every error path. The builds run once per
//! test process (a `OnceLock`); cargo's incremental build makes re-runs take a second or two.
//! Compatibility with other ABI versions and layouts (the ABI fixtures, the C header against
//! the Rust mirrors) is tested across crates in `tests/abi_compat.rs`.

use perfcast_core::registry::{Factory, RegistryError};
use perfcast_core::{
    Bandwidth, Bytes, Category, Collective, CollectiveAlgorithm, CollectiveKind, Component,
    ComputeOp, ComputeUnit, DType, Engine, FlopRate, Gemm, MemoryHierarchy, ModelError, Origin,
    PluginError, PluginInfo, Registry, Seconds, TierLevel, TimeBound,
};
use perfcast_loader::{load_library, sha256_file, LoadError};
use perfcast_testkit::examples::{
    big_gemm, decode_qkv, dsp_params, hbm_x_params, lpddr_params, npu_params, residual,
};
use perfcast_testkit::plugins::{build_rust, c_vendor, c_vendor_abi1_0, cc_plugin_source};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

struct Fixtures {
    dir: PathBuf,
    acme: PathBuf,
    acme_copy: PathBuf,
    sram: PathBuf,
    c_v1_1: PathBuf,
    c_v1_0: PathBuf,
    not_plugin_so: PathBuf,
    /// C plugins with broken descriptors: (library, what the error must say).
    malformed: Vec<(PathBuf, &'static str)>,
    text: PathBuf,
}

/// Build every fixture once per test process: the Rust cdylibs with the workspace's cargo, the
/// C ones with `cc` (perfcast-testkit's helpers).
fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| {
        let dir = perfcast_testkit::tmpdir("perfcast-loader-e2e");
        let rust = build_rust(&["acme-npu", "sram-fixture"], &dir);
        let (acme, sram) = (rust[0].clone(), rust[1].clone());
        let acme_copy = dir.join("libacme_npu_copy.so");
        std::fs::copy(&acme, &acme_copy).unwrap();
        let (c_v1_1, c_v1_0) = (c_vendor(&dir), c_vendor_abi1_0(&dir));
        let not_plugin_so = cc_plugin_source(&dir, "nothing", "int nothing(void) { return 0; }");
        let components = MALFORMED_COMPONENTS
            .iter()
            .map(|(vtable, fields, want)| (one_component_plugin(vtable, fields), *want));
        let malformed = MALFORMED
            .iter()
            .map(|(body, want)| (body.to_string(), *want))
            .chain(components)
            .enumerate()
            .map(|(i, (body, want))| {
                let lib = cc_plugin_source(&dir, &format!("malformed{i}"), &body);
                (lib, want)
            })
            .collect();
        let text = dir.join("notes.txt");
        std::fs::write(&text, "not a library\n").unwrap();
        Fixtures {
            dir,
            acme,
            acme_copy,
            sram,
            c_v1_1,
            c_v1_0,
            not_plugin_so,
            malformed,
            text,
        }
    })
}

/// Broken C descriptors (C source after the header include) and what the error must say.
const MALFORMED: [(&str, &str); 5] = [
    (
        "static const perfcast_plugin p = { .struct_size = 8, .abi_major = 1 };
         const perfcast_plugin *perfcast_plugin_entry_v1(void) { return &p; }",
        "struct_size is 8",
    ),
    (
        "const perfcast_plugin *perfcast_plugin_entry_v1(void) { return 0; }",
        "returned NULL",
    ),
    (
        "static const perfcast_plugin p = { .struct_size = sizeof p, .abi_major = 3,
             .name = \"x\" };
         const perfcast_plugin *perfcast_plugin_entry_v1(void) { return &p; }",
        "built for C ABI 3.0, this host expects C ABI 1.x",
    ),
    (
        "static int create(const char *j, void **o, char *e, size_t n) {
             (void)j; (void)e; (void)n; *o = 0; return 0; }
         static int props(const void *s, perfcast_tier *t, char *e, size_t n) {
             (void)s; (void)t; (void)e; (void)n; return 0; }
         static const perfcast_memory_tier_vtable vt = { .struct_size = sizeof vt,
             .properties = props };
         static const perfcast_component c = { .struct_size = sizeof c,
             .category = PERFCAST_CATEGORY_MEMORY_TIER, .name = \"sram\", .create = create,
             .vtable = &vt };
         static const perfcast_component *const cs[] = { &c };
         static const perfcast_plugin p = { .struct_size = sizeof p, .abi_major = 1,
             .n_components = 1, .name = \"x\", .version = \"1\", .components = cs };
         const perfcast_plugin *perfcast_plugin_entry_v1(void) { return &p; }",
        "must be namespaced",
    ),
    (
        "static const perfcast_component *const cs[] = { 0 };
         static const perfcast_plugin p = { .struct_size = sizeof p, .abi_major = 1,
             .n_components = 1, .name = \"x\", .components = cs };
         const perfcast_plugin *perfcast_plugin_entry_v1(void) { return &p; }",
        "component 0 is NULL",
    ),
];

/// Broken components of an otherwise well-formed C plugin (checked before any of its code
/// runs): (the vtable's definition, the component's fields, what the error must say).
const MALFORMED_COMPONENTS: [(&str, &str, &str); 4] = [
    (
        "static const perfcast_memory_tier_vtable vt = { .struct_size = sizeof vt };",
        ".category = PERFCAST_CATEGORY_MEMORY_TIER, .name = \"x/t\"",
        "component `x/t` has no create function",
    ),
    (
        "static const perfcast_compute_unit_vtable vt = { .struct_size = sizeof vt };",
        ".category = PERFCAST_CATEGORY_COMPUTE_UNIT, .name = \"x/cu\", .create = create",
        "`x/cu`: vtable has no peak function",
    ),
    (
        "static const perfcast_memory_tier_vtable vt = { .struct_size = 4 };",
        ".category = PERFCAST_CATEGORY_MEMORY_TIER, .name = \"x/t\", .create = create",
        "`x/t`: memory tier vtable struct_size 4 is below the 1.0 layout",
    ),
    (
        "static const perfcast_interconnect_vtable vt = { .struct_size = sizeof vt };",
        ".category = PERFCAST_CATEGORY_INTERCONNECT, .name = \"x/l\", .create = create",
        "`x/l`: vtable has no properties function",
    ),
];

/// The C source of a plugin with one component: `vtable` defines `vt`; `fields` are the
/// component's category, name and (when it has one) `.create = create`.
fn one_component_plugin(vtable: &str, fields: &str) -> String {
    format!(
        "int create(const char *j, void **o, char *e, size_t n) {{
             (void)j; (void)e; (void)n; *o = 0; return 0; }}
         {vtable}
         static const perfcast_component c = {{ .struct_size = sizeof c, {fields},
             .vtable = &vt }};
         static const perfcast_component *const cs[] = {{ &c }};
         static const perfcast_plugin p = {{ .struct_size = sizeof p, .abi_major = 1,
             .n_components = 1, .name = \"x\", .components = cs }};
         const perfcast_plugin *perfcast_plugin_entry_v1(void) {{ return &p; }}"
    )
}

/// A native compute unit standing in for a built-in plugin.
struct FakeGpu;
impl ComputeUnit for FakeGpu {
    fn kind(&self) -> &str {
        "fake/gpu"
    }
    fn peak(&self, _: Engine, _: DType) -> Option<FlopRate> {
        Some(FlopRate::from_tflops(100.0))
    }
}

fn builtin(name: &str) -> (PluginInfo, Factory) {
    (
        PluginInfo {
            category: Category::ComputeUnit,
            name: name.to_string(),
            origin: Origin::BuiltIn("fake-builtin".into()),
            version: "0.0.1".into(),
            abi_version: None,
            description: "fake built-in".into(),
            params: None,
        },
        Arc::new(|_| Ok(Component::ComputeUnit(Arc::new(FakeGpu)))),
    )
}

fn registry_with_builtin(name: &str) -> Registry {
    let mut r = Registry::new();
    let (info, f) = builtin(name);
    r.register(info, f).unwrap();
    r
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

fn load_err(path: &Path, sha: Option<&str>) -> LoadError {
    let mut r = registry_with_builtin("fake/gpu");
    load_library(path, sha, &mut r).expect_err("load must fail")
}

#[test]
fn lists_components_origins_and_versions() {
    let f = fixtures();
    let mut r = registry_with_builtin("fake/gpu");
    let acme = load_library(&f.acme, None, &mut r).unwrap();
    assert_eq!(acme.plugin, "acme");
    assert_eq!(acme.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(acme.abi, "rust-abi_stable 1.4");
    assert_eq!(acme.path, f.acme);
    assert_eq!(
        acme.components,
        vec![
            (Category::ComputeUnit, "acme/npu9".to_string()),
            (Category::MemoryTier, "acme/hbm-x".to_string()),
            (Category::Interconnect, "acme/xlink".to_string()),
        ]
    );
    let c = load_library(&f.c_v1_1, None, &mut r).unwrap();
    assert_eq!(
        (c.plugin.as_str(), c.version.as_str(), c.abi.as_str()),
        ("cvendor", "1.2.0", "c 1.7")
    );
    assert_eq!(
        c.components,
        vec![
            (Category::ComputeUnit, "cvendor/dsp1".to_string()),
            (Category::MemoryTier, "cvendor/lpddr".to_string()),
            (Category::Interconnect, "cvendor/ring".to_string()),
        ]
    );
    // The 1.0 build has no interconnect (a 1.1 category).
    let mut r0 = Registry::new();
    let old = load_library(&f.c_v1_0, None, &mut r0).unwrap();
    assert_eq!(old.abi, "c 1.0");
    assert_eq!(old.components.len(), 2);
    assert_eq!(
        r.names(Category::ComputeUnit),
        ["acme/npu9", "cvendor/dsp1", "fake/gpu"]
    );
    let info = r.info(Category::ComputeUnit, "acme/npu9").unwrap();
    assert_eq!(info.origin, Origin::Library(f.acme.clone()));
    assert_eq!(info.abi_version.as_deref(), Some("rust-abi_stable 1.4"));
    assert!(info.description.contains("systolic"), "{info:?}");
    let info = r.info(Category::MemoryTier, "cvendor/lpddr").unwrap();
    assert_eq!(info.origin, Origin::Library(f.c_v1_1.clone()));
    assert_eq!(info.version, "1.2.0");
    assert_eq!(info.abi_version.as_deref(), Some("c 1.7"));
    let fake = r.info(Category::ComputeUnit, "fake/gpu").unwrap();
    assert_eq!(fake.origin, Origin::BuiltIn("fake-builtin".into()));
    assert_eq!(fake.abi_version, None);
}

/// The acme model of `plugins/examples/acme-npu/src/lib.rs`, recomputed here.
fn acme_expected(op: &ComputeOp, peak: f64, hbm_bw: f64, hbm_lat: f64) -> f64 {
    let (d, cores) = (128u64, 8u64);
    let eff = match op {
        ComputeOp::Gemm(g) => {
            let (kt, nt) = (g.k.div_ceil(d), g.n.div_ceil(d));
            let spatial = (g.k * g.n) as f64 / ((kt * d) * (nt * d)) as f64;
            let temporal = g.m as f64 / (g.m + 2 * d) as f64;
            let jobs = g.batch * kt * nt;
            let waves = jobs as f64 / (jobs.div_ceil(cores) * cores) as f64;
            spatial * temporal * waves
        }
        _ => 1.0,
    };
    let compute = op.flops().0 / (peak * eff);
    let memory = op.min_bytes().0 / (hbm_bw * 0.9) + hbm_lat;
    compute.max(memory) + 2.5e-6
}

#[test]
fn acme_numbers_are_the_plugins_own_model() {
    let f = fixtures();
    let mut r = registry_with_builtin("fake/gpu");
    load_library(&f.acme, None, &mut r).unwrap();
    let npu = r.compute_unit("acme/npu9", &npu_params()).unwrap();
    let hbm = r.memory_tier("acme/hbm-x", &hbm_x_params()).unwrap();
    // HBM-X: stacks x 1024 pins x pin rate / 8; stacks x GiB per stack.
    let bw = 6.0 * 1024.0 * 8.0e9 / 8.0;
    assert!(close(hbm.bandwidth().0, bw));
    assert!(close(hbm.capacity().0, 6.0 * 24.0 * 1073741824.0));
    assert_eq!(hbm.level(), TierLevel::Device);
    assert!(close(hbm.latency().0, 600e-9));
    assert_eq!(npu.kind(), "acme/npu9");
    assert_eq!(
        npu.peak(Engine::Matrix, DType::Fp8),
        Some(FlopRate(1800e12))
    );
    assert_eq!(npu.peak(Engine::Matrix, DType::Fp32), None);
    assert!(close(npu.launch_overhead().0, 2.5e-6));
    let mem = MemoryHierarchy::new(vec![hbm]);
    for op in [decode_qkv(), big_gemm(), residual()] {
        let t = npu.op_time(&op, &mem).unwrap();
        let peak = if matches!(op, ComputeOp::Vector(_)) {
            60e12
        } else {
            900e12
        };
        let want = acme_expected(&op, peak, bw, 600e-9);
        assert!(close(t.time.0, want), "{op:?}: {} vs {want}", t.time.0);
        assert!(close(t.overhead.0, 2.5e-6));
        assert_eq!(t.flops, op.flops());
    }
    // Identifiably not the default roofline: the systolic utilisation of a decode GEMM.
    let big = npu.op_time(&big_gemm(), &mem).unwrap();
    assert_eq!(big.bound, TimeBound::Compute);
    let roofline = perfcast_core::roofline::hierarchical(&FakeGpu, &big_gemm(), &mem).unwrap();
    assert!(big.time.0 != roofline.time.0);
    // Decode (m = 1): k and n are multiples of 128 and 3072 tile jobs fill 8 cores, so only
    // the fill/drain term is left: 1 / (1 + 2 * 128).
    assert!(close(npu.efficiency(&decode_qkv()), 1.0 / 257.0));
    // fp32 has no matrix path on the NPU: an UnsupportedDType error, not a plugin failure.
    let fp32 = ComputeOp::Gemm(Gemm::new(64, 64, 64, DType::Fp32));
    assert!(matches!(
        npu.op_time(&fp32, &mem),
        Err(ModelError::UnsupportedDType { .. })
    ));
}

#[test]
fn two_rust_plugins_do_not_alias() {
    let f = fixtures();
    let mut r = Registry::new();
    load_library(&f.acme, None, &mut r).unwrap();
    // With abi_stable's `load_from_file` this would return acme's module again (and fail as a
    // duplicate of acme/npu9); per-file loading gives the second plugin's own.
    let sram = load_library(&f.sram, None, &mut r).unwrap();
    assert_eq!(
        (sram.plugin.as_str(), sram.version.as_str()),
        ("sram-fixture", "0.3.0")
    );
    assert_eq!(
        sram.components,
        vec![(Category::MemoryTier, "fixture/sram".to_string())]
    );
    let t = r
        .memory_tier(
            "fixture/sram",
            &json!({"capacity_mib": 96, "bandwidth_tbs": 40, "latency_ns": 5}),
        )
        .unwrap();
    assert_eq!(t.level(), TierLevel::OnChip);
    assert!(close(t.capacity().0, 96.0 * 1048576.0));
    assert!(close(t.bandwidth().0, 40e12));
    // And acme still answers as acme, next to it.
    let npu = r.compute_unit("acme/npu9", &npu_params()).unwrap();
    let hbm = r.memory_tier("acme/hbm-x", &hbm_x_params()).unwrap();
    let both = MemoryHierarchy::new(vec![hbm, t]);
    assert_eq!(both.tiers[0].kind(), "fixture/sram");
    assert!(npu.op_time(&residual(), &both).is_ok());
}

#[test]
fn plugins_are_callable_from_many_threads() {
    let f = fixtures();
    let mut r = Registry::new();
    load_library(&f.acme, None, &mut r).unwrap();
    load_library(&f.c_v1_1, None, &mut r).unwrap();
    let units = [
        r.compute_unit("acme/npu9", &npu_params()).unwrap(),
        r.compute_unit("cvendor/dsp1", &dsp_params(json!({})))
            .unwrap(),
    ];
    let mem = MemoryHierarchy::new(vec![r
        .memory_tier("cvendor/lpddr", &lpddr_params())
        .unwrap()]);
    let ops = [decode_qkv(), big_gemm(), residual()];
    let want: Vec<Vec<f64>> = units
        .iter()
        .map(|u| {
            ops.iter()
                .map(|o| u.op_time(o, &mem).unwrap().time.0)
                .collect()
        })
        .collect();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..200 {
                    for (u, w) in units.iter().zip(&want) {
                        for (o, t) in ops.iter().zip(w) {
                            assert_eq!(u.op_time(o, &mem).unwrap().time.0, *t);
                        }
                    }
                }
            });
        }
    });
}

#[test]
fn c_interconnect_runs_its_own_ring_model() {
    let f = fixtures();
    let mut r = Registry::new();
    load_library(&f.c_v1_1, None, &mut r).unwrap();
    let ring = r
        .interconnect(
            "cvendor/ring",
            &json!({"domain_size": 8, "bandwidth_gbs": 50.0, "latency_us": 3.0}),
        )
        .unwrap();
    assert_eq!(ring.domain_size(), 8);
    assert!(close(ring.bandwidth().0, 50e9));
    for kind in [
        CollectiveKind::AllReduce,
        CollectiveKind::AllGather,
        CollectiveKind::SendRecv,
    ] {
        let c = Collective {
            kind,
            bytes: Bytes(64e6),
            ranks: 8,
        };
        // Ring whatever the algorithm asked for: the plugin's documented model.
        let want = perfcast_core::hardware::collective_time(
            &c,
            Bandwidth(50e9),
            Seconds(3e-6),
            CollectiveAlgorithm::Ring,
        );
        for alg in [CollectiveAlgorithm::Auto, CollectiveAlgorithm::Tree] {
            assert!(close(ring.collective_time(&c, alg).0, want.0), "{kind:?}");
        }
    }
    // More ranks than the ring holds: `try_collective_time` (what the engines call) returns
    // the plugin's message; the infallible `collective_time` gives NaN.
    let too_many = Collective {
        kind: CollectiveKind::AllReduce,
        bytes: Bytes(1e6),
        ranks: 16,
    };
    let e = ring
        .try_collective_time(&too_many, CollectiveAlgorithm::Ring)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cvendor/ring") && e.contains("16 ranks exceed"),
        "{e}"
    );
    assert!(ring
        .collective_time(&too_many, CollectiveAlgorithm::Ring)
        .0
        .is_nan());
}

#[test]
fn rust_interconnect_crosses_too() {
    let f = fixtures();
    let mut r = Registry::new();
    load_library(&f.acme, None, &mut r).unwrap();
    let link = r
        .interconnect(
            "acme/xlink",
            &json!({"domain_size": 16, "bandwidth_gbs": 400.0, "latency_us": 2.0}),
        )
        .unwrap();
    assert_eq!(link.domain_size(), 16);
    let c = Collective {
        kind: CollectiveKind::AllReduce,
        bytes: Bytes(1e9),
        ranks: 8,
    };
    let want = perfcast_core::hardware::collective_time(
        &c,
        Bandwidth::from_gbs(400.0),
        Seconds::from_micros(2.0),
        CollectiveAlgorithm::Ring,
    );
    assert!(close(
        link.collective_time(&c, CollectiveAlgorithm::Ring).0,
        want.0
    ));
}

/// A library is loaded through its checked open descriptor, which stays open for good; the
/// same file loaded again (a sweep's every point) keeps no second one.
#[cfg(target_os = "linux")]
#[test]
fn loading_a_library_again_keeps_no_new_descriptor() {
    let f = fixtures();
    let target = f.acme.canonicalize().unwrap();
    // Descriptors of this process open on the library's file.
    let on_file = || {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|t| *t == target)
            .count()
    };
    load_library(&f.acme, None, &mut Registry::new()).unwrap();
    assert!(on_file() >= 1);
    for _ in 0..50 {
        load_library(&f.acme, None, &mut Registry::new()).unwrap();
    }
    // One kept; other tests of this binary may hold one briefly while checking the file.
    assert!(
        on_file() <= 3,
        "{} descriptors on {}",
        on_file(),
        target.display()
    );
}

#[test]
fn missing_unreadable_and_non_plugin_files() {
    let f = fixtures();
    let missing = f.dir.join("libnope.so");
    let e = load_err(&missing, None);
    assert!(matches!(e, LoadError::NotFound { .. }));
    assert!(e.to_string().contains("libnope.so") && e.to_string().contains("does not exist"));
    let e = load_err(&f.dir, None);
    assert!(matches!(e, LoadError::Unreadable { .. }), "{e}");
    for p in [&f.text, &f.not_plugin_so] {
        let e = load_err(p, None);
        let msg = e.to_string();
        assert!(matches!(e, LoadError::NotAPlugin { .. }), "{msg}");
        assert!(msg.contains(&p.display().to_string()), "{msg}");
        // The loader is handed the checked open file, but the message names the file.
        assert!(!msg.contains("/proc/self/fd"), "{msg}");
        assert_eq!(msg.lines().count(), 1, "{msg}");
    }
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    if libc.exists() {
        let e = load_err(libc, None).to_string();
        assert!(e.contains("not a perfcast plugin"), "{e}");
    }
}

#[test]
fn malformed_c_descriptors_are_rejected_by_name() {
    let f = fixtures();
    for (lib, want) in &f.malformed {
        let e = load_err(lib, None).to_string();
        assert!(e.contains(want), "{e} (wanted {want})");
        assert!(e.contains(&lib.display().to_string()), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}

#[test]
fn sha256_pins() {
    let f = fixtures();
    // Known vector: sha256("abc").
    let abc = f.dir.join("abc.txt");
    std::fs::write(&abc, "abc").unwrap();
    assert_eq!(
        sha256_file(&abc).unwrap(),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let good = sha256_file(&f.c_v1_1).unwrap();
    let mut r = Registry::new();
    load_library(&f.c_v1_1, Some(&good.to_uppercase()), &mut r).unwrap();
    let bad = "0".repeat(64);
    let e = load_err(&f.c_v1_1, Some(&bad));
    let msg = e.to_string();
    assert!(matches!(e, LoadError::Sha256Mismatch { .. }), "{msg}");
    assert!(msg.contains(&bad) && msg.contains(&good), "{msg}");
    let e = load_err(&f.c_v1_1, Some("abc"));
    assert!(matches!(e, LoadError::InvalidPin { .. }), "{e}");
}

#[test]
fn a_panicking_plugin_is_an_error_not_an_abort() {
    let f = fixtures();
    let mut r = Registry::new();
    load_library(&f.acme, None, &mut r).unwrap();
    let mut p = npu_params();
    p["panic_in_peak"] = json!(true);
    let e = r.compute_unit("acme/npu9", &p).err().expect("must fail");
    match &e {
        RegistryError::Build {
            source: PluginError::Failed { message, .. },
            ..
        } => assert!(
            message.contains("panicked")
                && message.contains("panic_in_peak")
                && message.contains("acme-npu/src/lib.rs:"),
            "{e}"
        ),
        other => panic!("expected a plugin failure, got {other}"),
    }
    // The process and the plugin are still fine.
    assert!(r.compute_unit("acme/npu9", &npu_params()).is_ok());
}

#[test]
fn nan_and_plugin_errors_surface_from_op_time() {
    let f = fixtures();
    let mut r = Registry::new();
    load_library(&f.acme, None, &mut r).unwrap();
    let mut p = npu_params();
    p["nan_in_op_time"] = json!(true);
    let npu = r.compute_unit("acme/npu9", &p).unwrap();
    let hbm = r.memory_tier("acme/hbm-x", &hbm_x_params()).unwrap();
    let mem = MemoryHierarchy::new(vec![hbm]);
    match npu.op_time(&decode_qkv(), &mem) {
        Err(ModelError::Plugin(PluginError::BadValue { what, value, .. })) => {
            assert_eq!(what, "op_time.time");
            assert!(value.is_nan());
        }
        other => panic!("expected BadValue, got {other:?}"),
    }
    // C plugin, 1.1 (its own op_time) and 1.0 (host roofline calling efficiency): NaN
    // efficiency is an error either way; an error code comes back with its message.
    for path in [&f.c_v1_1, &f.c_v1_0] {
        let mut r = Registry::new();
        load_library(path, None, &mut r).unwrap();
        let lp = r.memory_tier("cvendor/lpddr", &lpddr_params()).unwrap();
        let mem = MemoryHierarchy::new(vec![lp]);
        let dsp = r
            .compute_unit("cvendor/dsp1", &dsp_params(json!({"nan_efficiency": 1})))
            .unwrap();
        let e = dsp.op_time(&decode_qkv(), &mem).unwrap_err();
        assert!(
            matches!(e, ModelError::Plugin(PluginError::BadValue { .. })),
            "{}: {e}",
            path.display()
        );
    }
    let mut r = Registry::new();
    load_library(&f.c_v1_1, None, &mut r).unwrap();
    let lp = r.memory_tier("cvendor/lpddr", &lpddr_params()).unwrap();
    let dsp = r
        .compute_unit(
            "cvendor/dsp1",
            &dsp_params(json!({"fail_in_op_time": true})),
        )
        .unwrap();
    let e = dsp
        .op_time(&residual(), &MemoryHierarchy::new(vec![lp]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("fail_in_op_time"), "{e}");
}

#[test]
fn unknown_parameter_keys_are_named() {
    let f = fixtures();
    let mut r = Registry::new();
    load_library(&f.acme, None, &mut r).unwrap();
    load_library(&f.c_v1_1, None, &mut r).unwrap();
    let mut p = npu_params();
    p["bf16_tflopz"] = json!(1.0);
    let e = r.compute_unit("acme/npu9", &p).err().unwrap();
    assert!(
        matches!(
            e,
            RegistryError::Build {
                source: PluginError::Params { .. },
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("bf16_tflopz"), "{e}");
    // A bad value keeps its key path.
    let mut p = npu_params();
    p["cores"] = json!(-3);
    let e = r.compute_unit("acme/npu9", &p).err().unwrap().to_string();
    assert!(e.contains("cores"), "{e}");
    let e = r
        .compute_unit("cvendor/dsp1", &dsp_params(json!({"bogus_key": 1})))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("bogus_key"), "{e}");
    let e = r
        .memory_tier("cvendor/lpddr", &json!({"channels": 8}))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("missing parameter `mts`"), "{e}");
}

#[test]
fn duplicates_name_both_origins_and_register_nothing() {
    let f = fixtures();
    let mut r = registry_with_builtin("acme/npu9");
    let e = load_library(&f.acme, None, &mut r).unwrap_err().to_string();
    assert!(e.contains("built-in (fake-builtin)"), "{e}");
    assert!(e.contains(&f.acme.display().to_string()), "{e}");
    assert!(!r.contains(Category::MemoryTier, "acme/hbm-x"));
    // Two copies of one plugin.
    let mut r = Registry::new();
    load_library(&f.acme, None, &mut r).unwrap();
    let e = load_library(&f.acme_copy, None, &mut r)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("libacme_npu.so") && e.contains("libacme_npu_copy.so"),
        "{e}"
    );
}
