//! Plugin ABI compatibility across crates: the ABI contract of `perfcast-abi` (its C header and
//! its Rust root module) as `perfcast-loader` enforces it against libraries built separately:
//! the Rust fixtures declaring another ABI major (`abi-v2-fixture`), a minor older than the
//! oldest this host loads (`abi-v1-2-fixture`) or another layout (`abi-mismatch-fixture`), the
//! previous minor's layout (`abi-v1-3-fixture`, which loads), the example C plugin compiled
//! for the current C ABI and 1.0, a C library of another major, and the C header's layout
//! against the Rust mirrors. The loader's own
//! behaviour (origins, pins, errors, threads) is tested beside it, in
//! `crates/perfcast-loader/tests/e2e.rs`.

use perfcast_abi::rust_abi::RUST_ABI_MINOR;
use perfcast_core::{DType, Engine, FlopRate, MemoryHierarchy, Registry, TimeBound};
use perfcast_loader::{load_library, LoadError};
use perfcast_testkit::examples::{decode_qkv, dsp_params, lpddr_params, residual};
use perfcast_testkit::plugins::{
    build_rust, c_vendor, c_vendor_abi1_0, cc_plugin_source, cc_program,
};
use perfcast_testkit::process::output;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

struct Fixtures {
    dir: PathBuf,
    abi_v2: PathBuf,
    abi_mismatch: PathBuf,
    abi_v1_2: PathBuf,
    abi_v1_3: PathBuf,
    builtins_lib: PathBuf,
    c_v1_1: PathBuf,
    c_v1_0: PathBuf,
    c_major2: PathBuf,
}

/// Build every fixture once per test process.
fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| {
        let dir = perfcast_testkit::tmpdir("perfcast-abi-compat");
        let rust = build_rust(
            &[
                "abi-v2-fixture",
                "abi-mismatch-fixture",
                "abi-v1-2-fixture",
                "execution-builtins-lib",
                "abi-v1-3-fixture",
            ],
            &dir,
        );
        let (c_v1_1, c_v1_0) = (c_vendor(&dir), c_vendor_abi1_0(&dir));
        let c_major2 = cc_plugin_source(
            &dir,
            "major2",
            "const void *perfcast_plugin_entry_v2(void) { return 0; }",
        );
        Fixtures {
            dir,
            abi_v2: rust[0].clone(),
            abi_mismatch: rust[1].clone(),
            abi_v1_2: rust[2].clone(),
            builtins_lib: rust[3].clone(),
            abi_v1_3: rust[4].clone(),
            c_v1_1,
            c_v1_0,
            c_major2,
        }
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

fn load_err(path: &Path) -> LoadError {
    load_library(path, None, &mut Registry::new()).expect_err("load must fail")
}

#[test]
fn c_plugin_numbers_and_the_old_abi_through_compatibility() {
    let f = fixtures();
    let lp_bw = 8.0 * 16.0 / 8.0 * 6400e6;
    let lp_lat = 120e-9;
    let mut times = Vec::new();
    for (path, abi, tile) in [(&f.c_v1_1, "c 1.7", 32), (&f.c_v1_0, "c 1.0", 128)] {
        let mut r = Registry::new();
        let lib = load_library(path, None, &mut r).unwrap();
        assert_eq!(lib.abi, abi);
        // Parameter declarations are C ABI 1.2: a 1.0 library's components are "not
        // declared", the current one declares dsp1's (and leaves lpddr undeclared).
        let declared = |name: &str| {
            r.info(perfcast_core::Category::ComputeUnit, name)
                .or_else(|| r.info(perfcast_core::Category::MemoryTier, name))
                .and_then(|i| i.params.as_ref().map(Vec::len))
        };
        assert_eq!(declared("cvendor/dsp1"), (abi != "c 1.0").then_some(8));
        assert_eq!(declared("cvendor/lpddr"), None);
        let dsp = r
            .compute_unit("cvendor/dsp1", &dsp_params(json!({})))
            .unwrap();
        let lp = r.memory_tier("cvendor/lpddr", &lpddr_params()).unwrap();
        assert!(close(lp.bandwidth().0, lp_bw));
        assert!(close(lp.capacity().0, 32.0 * 1073741824.0));
        assert_eq!(lp.efficiency(), 0.75);
        assert_eq!(
            dsp.peak(Engine::Matrix, DType::Int8),
            Some(FlopRate(100e12))
        );
        assert_eq!(dsp.peak(Engine::Matrix, DType::Fp32), None);
        // 1.0 has no gemm_tile: the documented default (128) applies.
        assert_eq!(dsp.gemm_tile(), tile);
        let mem = MemoryHierarchy::new(vec![lp]);
        let op = residual();
        let t = dsp.op_time(&op, &mem).unwrap();
        let compute = op.flops().0 / 2000e9;
        let memory = op.min_bytes().0 / (lp_bw * 0.75) + lp_lat;
        let want = if abi != "c 1.0" {
            // The plugin's own op_time: no overlap of DMA and compute.
            compute + memory + 4e-6
        } else {
            // No op_time in 1.0: the host's roofline (overlapped).
            compute.max(memory) + 4e-6
        };
        assert!(close(t.time.0, want), "{abi}: {} vs {want}", t.time.0);
        assert_eq!(t.bound, TimeBound::Memory(0));
        let g = dsp.op_time(&decode_qkv(), &mem).unwrap();
        assert!(close(g.compute.0, decode_qkv().flops().0 / (50e12 * 0.8)));
        times.push(t.time.0);
    }
    assert!(times[0] > times[1]);
}

#[test]
fn incompatible_rust_abi_is_rejected_in_a_few_lines() {
    let f = fixtures();
    let e = load_err(&f.abi_v2);
    let msg = e.to_string();
    assert!(matches!(e, LoadError::IncompatibleAbi { .. }), "{msg}");
    assert!(msg.lines().count() < 10, "{msg}");
    assert!(msg.contains(&f.abi_v2.display().to_string()), "{msg}");
    assert!(
        msg.contains("2.0.0") && msg.contains("1.x"),
        "both versions: {msg}"
    );
}

/// A plugin built against the previous minor (Rust ABI 1.3: a strategy trait without
/// declared axes, handed the 1.4 plan) still loads on this host: its tensor strategy
/// declares no axes and gives the compiled-in evaluations bit for bit.
#[test]
fn a_rust_strategy_of_the_previous_minor_loads_without_declared_axes() {
    use perfcast_engine::{Training, TrainingOptions, TrainingPlan};
    let f = fixtures();
    let mut r = perfcast_builtins::registry().unwrap();
    let old = load_library(&f.abi_v1_3, None, &mut r).unwrap();
    assert_eq!(old.abi, "rust-abi_stable 1.3");
    let s = r.parallel_strategy("fixture13/tensor", &json!({})).unwrap();
    assert!(s.axes().is_empty());
    let training = |tensor: &str| {
        let names = [
            tensor, "sequence", "context", "expert", "pipeline", "data", "zero",
        ];
        let options: TrainingOptions =
            serde_json::from_value(json!({ "strategies": names })).unwrap();
        let model = perfcast_testkit::gpt(96, 12288, 96);
        let system = perfcast_testkit::a100_from_registry(&r, 1024).unwrap();
        Training::with_options(model, system, &r, &options).unwrap()
    };
    let (builtin, lib) = (training("tensor"), training("fixture13/tensor"));
    let plan = TrainingPlan {
        tp: 8,
        pp: 8,
        dp: 16,
        micro_batch: 1,
        global_batch: 512,
        sp: true,
        tp_comm_overlap: true,
        recompute: "selective".into(),
        ..TrainingPlan::default()
    };
    assert_eq!(
        serde_json::to_string(&builtin.evaluate(&plan).unwrap()).unwrap(),
        serde_json::to_string(&lib.evaluate(&plan).unwrap()).unwrap()
    );
}

/// A plugin built against a minor older than the minor before the current one (here 1.2,
/// whose frozen root module is no longer kept) is refused in one line that names its minor and
/// the oldest this host loads; abi_stable's layout report is kept for a log.
#[test]
fn a_rust_plugin_of_an_older_minor_is_refused_naming_both_minors() {
    use perfcast_abi::rust_abi::RUST_ABI_OLDEST_MINOR;
    let f = fixtures();
    let e = load_err(&f.abi_v1_2);
    let msg = e.to_string();
    assert!(matches!(e, LoadError::IncompatibleAbi { .. }), "{msg}");
    assert_eq!(msg.lines().count(), 1, "{msg}");
    assert!(msg.contains("libabi_v1_2_fixture.so"), "{msg}");
    assert!(msg.contains("built for Rust ABI 1.2.0"), "{msg}");
    assert!(
        msg.contains(&format!(
            "1.2 is older than the oldest minor it loads, 1.{RUST_ABI_OLDEST_MINOR}"
        )),
        "{msg}"
    );
    assert!(e.details().is_some_and(|d| d.lines().count() > 5));
}

/// The schedule trait's `properties` (Rust ABI 1.3) cross: the built-in DualPipe compiled as
/// a library declares its two model copies and its overlap as the compiled-in one does, and
/// steps the same.
#[test]
fn a_rust_schedule_s_properties_cross_the_abi() {
    let f = fixtures();
    let mut r = perfcast_builtins::registry().unwrap();
    let lib = load_library(&f.builtins_lib, None, &mut r).unwrap();
    assert_eq!(lib.abi, format!("rust-abi_stable 1.{RUST_ABI_MINOR}"));
    let schedule = |name: &str| r.pipeline_schedule(name, &json!({})).unwrap();
    let (native, lib) = (schedule("dualpipe"), schedule("lib/dualpipe"));
    let input = perfcast_core::parallel::ScheduleInput {
        stages: 8,
        virtual_stages: 1,
        micro_batches: 32,
        forward: perfcast_core::Seconds(1e-3),
        backward: perfcast_core::Seconds(2e-3),
        p2p: perfcast_core::Seconds(1e-5),
    };
    assert_eq!(lib.step(&input).unwrap(), native.step(&input).unwrap());
    // (schedule, model copies, overlaps expert communication)
    let table = [
        (&native, 2.0, true),
        (&lib, 2.0, true),
        (&schedule("lib/combined-1f1b"), 1.0, true),
        (&schedule("lib/1f1b"), 1.0, false),
    ];
    for (s, copies, overlaps) in table {
        assert_eq!(s.model_copies(), copies, "{}", s.kind());
        assert_eq!(s.overlaps_expert_comm(), overlaps, "{}", s.kind());
    }
}

#[test]
fn a_layout_mismatch_is_summarised_and_the_report_kept() {
    let f = fixtures();
    let e = load_err(&f.abi_mismatch);
    let msg = e.to_string();
    assert!(matches!(e, LoadError::IncompatibleAbi { .. }), "{msg}");
    assert_eq!(msg.lines().count(), 1, "{msg}");
    // abi_stable's own last error, on the same line.
    assert!(
        msg.contains("mismatched package Expected: perfcast-abi Found: abi-mismatch-fixture"),
        "{msg}"
    );
    assert!(msg.len() < 400, "{msg}");
    assert!(msg.contains("libabi_mismatch_fixture.so"), "{msg}");
    assert!(
        msg.contains("built for Rust ABI 1.4.0 with a different layout"),
        "{msg}"
    );
    let details = e.details().expect("the full report is kept");
    assert!(details.lines().count() > 20, "{details}");
}

#[test]
fn c_plugin_of_another_major_is_rejected() {
    let f = fixtures();
    let e = load_err(&f.c_major2).to_string();
    assert!(e.contains("C ABI 2") && e.contains("C ABI 1.x"), "{e}");
    assert!(e.contains("libmajor2.so"), "{e}");
}

/// The Rust mirrors in `perfcast_abi::c` have the header's layout: compile a C program that
/// prints sizeof/offsetof and compare.
#[test]
fn c_header_layout_matches_the_rust_mirrors() {
    use perfcast_abi::c::*;
    use perfcast_abi::strategy::*;
    use std::mem::{offset_of, size_of};
    let f = fixtures();
    let src = f.dir.join("layout.c");
    std::fs::write(
        &src,
        r#"#include <stdio.h>
#include <stddef.h>
#include "perfcast_plugin.h"
#define S(t) printf(#t " %zu\n", sizeof(t));
#define O(t, f) printf(#t "." #f " %zu\n", offsetof(t, f));
int main(void) {
  S(perfcast_op) O(perfcast_op, flops) O(perfcast_op, m) O(perfcast_op, att_batch)
  O(perfcast_op, elements) O(perfcast_op, vector_kind)
  S(perfcast_tier) O(perfcast_tier, kind) O(perfcast_tier, latency)
  S(perfcast_op_time) O(perfcast_op_time, time) O(perfcast_op_time, device_bytes)
  S(perfcast_compute_unit_vtable) O(perfcast_compute_unit_vtable, op_time)
  S(perfcast_memory_tier_vtable) S(perfcast_component) O(perfcast_component, vtable)
  S(perfcast_plugin) O(perfcast_plugin, components)
  S(perfcast_link) O(perfcast_link, latency)
  S(perfcast_interconnect_vtable) O(perfcast_interconnect_vtable, collective_time)
  O(perfcast_component, params) S(perfcast_param) O(perfcast_param, name)
  O(perfcast_param, source)
  S(perfcast_schedule_input) O(perfcast_schedule_input, forward) O(perfcast_schedule_input, p2p)
  S(perfcast_schedule_result) O(perfcast_schedule_result, time)
  O(perfcast_schedule_result, peak_in_flight)
  S(perfcast_pipeline_schedule_vtable) O(perfcast_pipeline_schedule_vtable, in_flight)
  O(perfcast_pipeline_schedule_vtable, validate) O(perfcast_pipeline_schedule_vtable, properties)
  S(perfcast_schedule_properties) O(perfcast_schedule_properties, model_copies)
  S(perfcast_layer_activations) O(perfcast_layer_activations, other)
  S(perfcast_recompute_plan) O(perfcast_recompute_plan, working)
  S(perfcast_recompute_policy_vtable) O(perfcast_recompute_policy_vtable, plan)
  S(perfcast_plan) O(perfcast_plan, global_batch) O(perfcast_plan, fp32_grad_accum)
  O(perfcast_plan, batch_split) O(perfcast_plan, n_axes) O(perfcast_plan, axes)
  S(perfcast_axis_decl) O(perfcast_axis_decl, divides) O(perfcast_axis_decl, name)
  S(perfcast_model) O(perfcast_model, tied_embeddings) O(perfcast_model, group_top_k)
  O(perfcast_model, load_imbalance)
  S(perfcast_layer_dims) O(perfcast_layer_dims, act_bytes) O(perfcast_layer_dims, has_moe)
  O(perfcast_layer_dims, expert_params)
  S(perfcast_layer_split) O(perfcast_layer_split, expert_weights)
  S(perfcast_state_split) O(perfcast_state_split, expert_optimizer)
  S(perfcast_comm_op) O(perfcast_comm_op, bytes) O(perfcast_comm_op, window)
  O(perfcast_comm_op, efficiency) O(perfcast_comm_op, dispatch_hierarchical)
  S(perfcast_parallel_strategy_vtable) O(perfcast_parallel_strategy_vtable, axis)
  O(perfcast_parallel_strategy_vtable, comms) O(perfcast_parallel_strategy_vtable, axes)
  S(perfcast_level) O(perfcast_level, overhead) S(perfcast_group_axis)
  S(perfcast_link_class) O(perfcast_link_class, name) O(perfcast_link_class, bandwidth)
  S(perfcast_link_load) O(perfcast_link_load, busy)
  S(perfcast_topology_vtable) O(perfcast_topology_vtable, collective)
  return 0;
}
"#,
    )
    .unwrap();
    let exe = cc_program(&f.dir, &src, "layout");
    let out = output(&mut Command::new(&exe));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let want = [
        ("perfcast_op", size_of::<PcOp>()),
        ("perfcast_op.flops", offset_of!(PcOp, flops)),
        ("perfcast_op.m", offset_of!(PcOp, m)),
        ("perfcast_op.att_batch", offset_of!(PcOp, att_batch)),
        ("perfcast_op.elements", offset_of!(PcOp, elements)),
        ("perfcast_op.vector_kind", offset_of!(PcOp, vector_kind)),
        ("perfcast_tier", size_of::<PcTier>()),
        ("perfcast_tier.kind", offset_of!(PcTier, kind)),
        ("perfcast_tier.latency", offset_of!(PcTier, latency)),
        ("perfcast_op_time", size_of::<PcOpTime>()),
        ("perfcast_op_time.time", offset_of!(PcOpTime, time)),
        (
            "perfcast_op_time.device_bytes",
            offset_of!(PcOpTime, device_bytes),
        ),
        (
            "perfcast_compute_unit_vtable",
            size_of::<PcComputeUnitVtable>(),
        ),
        (
            "perfcast_compute_unit_vtable.op_time",
            offset_of!(PcComputeUnitVtable, op_time),
        ),
        (
            "perfcast_memory_tier_vtable",
            size_of::<PcMemoryTierVtable>(),
        ),
        ("perfcast_component", size_of::<PcComponent>()),
        ("perfcast_component.vtable", offset_of!(PcComponent, vtable)),
        ("perfcast_plugin", size_of::<PcPlugin>()),
        (
            "perfcast_plugin.components",
            offset_of!(PcPlugin, components),
        ),
        ("perfcast_link", size_of::<PcLink>()),
        ("perfcast_link.latency", offset_of!(PcLink, latency)),
        (
            "perfcast_interconnect_vtable",
            size_of::<PcInterconnectVtable>(),
        ),
        (
            "perfcast_interconnect_vtable.collective_time",
            offset_of!(PcInterconnectVtable, collective_time),
        ),
        ("perfcast_component.params", offset_of!(PcComponent, params)),
        ("perfcast_param", size_of::<PcParam>()),
        ("perfcast_param.name", offset_of!(PcParam, name)),
        ("perfcast_param.source", offset_of!(PcParam, source)),
        ("perfcast_schedule_input", size_of::<PcScheduleInput>()),
        (
            "perfcast_schedule_input.forward",
            offset_of!(PcScheduleInput, forward),
        ),
        (
            "perfcast_schedule_input.p2p",
            offset_of!(PcScheduleInput, p2p),
        ),
        ("perfcast_schedule_result", size_of::<PcScheduleResult>()),
        (
            "perfcast_schedule_result.time",
            offset_of!(PcScheduleResult, time),
        ),
        (
            "perfcast_schedule_result.peak_in_flight",
            offset_of!(PcScheduleResult, peak_in_flight),
        ),
        (
            "perfcast_pipeline_schedule_vtable",
            size_of::<PcPipelineScheduleVtable>(),
        ),
        (
            "perfcast_pipeline_schedule_vtable.in_flight",
            offset_of!(PcPipelineScheduleVtable, in_flight),
        ),
        (
            "perfcast_pipeline_schedule_vtable.validate",
            offset_of!(PcPipelineScheduleVtable, validate),
        ),
        (
            "perfcast_pipeline_schedule_vtable.properties",
            offset_of!(PcPipelineScheduleVtable, properties),
        ),
        (
            "perfcast_schedule_properties",
            size_of::<PcScheduleProperties>(),
        ),
        (
            "perfcast_schedule_properties.model_copies",
            offset_of!(PcScheduleProperties, model_copies),
        ),
        (
            "perfcast_layer_activations",
            size_of::<PcLayerActivations>(),
        ),
        (
            "perfcast_layer_activations.other",
            offset_of!(PcLayerActivations, other),
        ),
        ("perfcast_recompute_plan", size_of::<PcRecomputePlan>()),
        (
            "perfcast_recompute_plan.working",
            offset_of!(PcRecomputePlan, working),
        ),
        (
            "perfcast_recompute_policy_vtable",
            size_of::<PcRecomputePolicyVtable>(),
        ),
        (
            "perfcast_recompute_policy_vtable.plan",
            offset_of!(PcRecomputePolicyVtable, plan),
        ),
        // The 1.7 `perfcast_plan` is the 1.4 one (`PcPlan`) with the declared axes appended.
        ("perfcast_plan", size_of::<PcPlanAxes>()),
        (
            "perfcast_plan.global_batch",
            offset_of!(PcPlan, global_batch),
        ),
        (
            "perfcast_plan.fp32_grad_accum",
            offset_of!(PcPlan, fp32_grad_accum),
        ),
        (
            "perfcast_plan.batch_split",
            offset_of!(PcPlanAxes, batch_split),
        ),
        ("perfcast_plan.n_axes", offset_of!(PcPlanAxes, n_axes)),
        ("perfcast_plan.axes", offset_of!(PcPlanAxes, axes)),
        ("perfcast_axis_decl", size_of::<PcAxisDecl>()),
        (
            "perfcast_axis_decl.divides",
            offset_of!(PcAxisDecl, divides),
        ),
        ("perfcast_axis_decl.name", offset_of!(PcAxisDecl, name)),
        ("perfcast_model", size_of::<PcModel>()),
        (
            "perfcast_model.tied_embeddings",
            offset_of!(PcModel, tied_embeddings),
        ),
        (
            "perfcast_model.group_top_k",
            offset_of!(PcModel, group_top_k),
        ),
        (
            "perfcast_model.load_imbalance",
            offset_of!(PcModel, load_imbalance),
        ),
        ("perfcast_layer_dims", size_of::<PcLayerDims>()),
        (
            "perfcast_layer_dims.act_bytes",
            offset_of!(PcLayerDims, act_bytes),
        ),
        (
            "perfcast_layer_dims.has_moe",
            offset_of!(PcLayerDims, has_moe),
        ),
        (
            "perfcast_layer_dims.expert_params",
            offset_of!(PcLayerDims, expert_params),
        ),
        ("perfcast_layer_split", size_of::<PcLayerSplit>()),
        (
            "perfcast_layer_split.expert_weights",
            offset_of!(PcLayerSplit, expert_weights),
        ),
        ("perfcast_state_split", size_of::<PcStateSplit>()),
        (
            "perfcast_state_split.expert_optimizer",
            offset_of!(PcStateSplit, expert_optimizer),
        ),
        ("perfcast_comm_op", size_of::<PcCommOp>()),
        ("perfcast_comm_op.bytes", offset_of!(PcCommOp, bytes)),
        ("perfcast_comm_op.window", offset_of!(PcCommOp, window)),
        (
            "perfcast_comm_op.efficiency",
            offset_of!(PcCommOp, efficiency),
        ),
        (
            "perfcast_comm_op.dispatch_hierarchical",
            offset_of!(PcCommOp, dispatch_hierarchical),
        ),
        (
            "perfcast_parallel_strategy_vtable",
            size_of::<PcParallelStrategyVtable>(),
        ),
        (
            "perfcast_parallel_strategy_vtable.axis",
            offset_of!(PcParallelStrategyVtable, axis),
        ),
        (
            "perfcast_parallel_strategy_vtable.comms",
            offset_of!(PcParallelStrategyVtable, comms),
        ),
        (
            "perfcast_parallel_strategy_vtable.axes",
            offset_of!(PcParallelStrategyVtable, axes),
        ),
        ("perfcast_level", size_of::<PcLevel>()),
        ("perfcast_level.overhead", offset_of!(PcLevel, overhead)),
        ("perfcast_group_axis", size_of::<PcGroupAxis>()),
        ("perfcast_link_class", size_of::<PcLinkClass>()),
        ("perfcast_link_class.name", offset_of!(PcLinkClass, name)),
        (
            "perfcast_link_class.bandwidth",
            offset_of!(PcLinkClass, bandwidth),
        ),
        ("perfcast_link_load", size_of::<PcLinkLoad>()),
        ("perfcast_link_load.busy", offset_of!(PcLinkLoad, busy)),
        ("perfcast_topology_vtable", size_of::<PcTopologyVtable>()),
        (
            "perfcast_topology_vtable.collective",
            offset_of!(PcTopologyVtable, collective),
        ),
    ]
    .iter()
    .map(|(k, v)| format!("{k} {v}\n"))
    .collect::<String>();
    assert_eq!(out.stdout, want);
}

/// The user guide's category x ABI table (docs/commands/plugins.md) is
/// `perfcast_abi::codes::SUPPORT`, the table the loaders follow (regenerate it from
/// `perfcast_abi::codes::support_table()`).
#[test]
fn the_guide_s_support_table_is_the_code_s() {
    let page = std::fs::read_to_string(
        perfcast_testkit::workspace_root().join("docs/commands/plugins.md"),
    )
    .unwrap();
    let start = page.find("<!-- support-table:start -->\n").unwrap();
    let end = page.find("<!-- support-table:end -->").unwrap();
    let shown = &page[start + "<!-- support-table:start -->\n".len()..end];
    assert_eq!(
        shown,
        perfcast_abi::codes::support_table(),
        "docs/commands/plugins.md's support table is stale"
    );
}
