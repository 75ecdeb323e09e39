//! Parallel strategies from shared libraries (Rust ABI 1.2; declared axes 1.4), end to end:
//! the built-in strategies compiled as a library (`execution-builtins-lib`: `lib/tensor`, ...)
//! give the compiled-in evaluations bit for bit, dense and mixture-of-experts, and so does the
//! example `example/hsdp` on its declared axis against its own crate compiled in; the example
//! `example/ulysses` (DeepSpeed-Ulysses) adds the all-to-alls of Jacobs et al. 2023 and
//! refuses the plans the paper cannot run, naming the plugin and the key; the C example
//! `example/tp2d` (2-D tensor parallelism, C ABI 1.7) declares the axis `col` and moves the
//! SUMMA panels of Xu et al. 2021 over it and over `tensor`.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{CommClass, CommList, LayerDims, Phase, PlanShape};
use perfcast_core::Registry;
use perfcast_engine::{Training, TrainingOptions, TrainingPlan};
use perfcast_loader::load_library;
use perfcast_testkit::plugins::{build_rust, cc_shared};
use perfcast_testkit::process::workspace_root;
use perfcast_testkit::{a100_from_registry, deepseek_v3, gpt};
use serde_json::json;
use std::path::PathBuf;
use std::sync::OnceLock;

const BUILTINS: [&str; 7] = [
    "tensor", "sequence", "context", "expert", "pipeline", "data", "zero",
];

struct Libs {
    builtins: PathBuf,
    ulysses: PathBuf,
    tp2d: PathBuf,
    hsdp: PathBuf,
}

fn libs() -> &'static Libs {
    static L: OnceLock<Libs> = OnceLock::new();
    L.get_or_init(|| {
        let dir = perfcast_testkit::tmpdir("perfcast-strategy-plugins");
        let v = build_rust(&["execution-builtins-lib", "ulysses", "hsdp"], &dir);
        let src = workspace_root().join("plugins/examples/tp2d/tp2d.c");
        Libs {
            builtins: v[0].clone(),
            ulysses: v[1].clone(),
            tp2d: cc_shared(&dir, &src, "libtp2d.so", &[]),
            hsdp: v[2].clone(),
        }
    })
}

/// The built-ins and the three libraries.
fn registry() -> Registry {
    let mut r = perfcast_builtins::registry().unwrap();
    load_library(&libs().builtins, None, &mut r).unwrap();
    load_library(&libs().ulysses, None, &mut r).unwrap();
    load_library(&libs().tp2d, None, &mut r).unwrap();
    r
}

/// A plan shape with every degree 1 but `tp` and `cp`.
fn shape(tp: u32, cp: u32) -> PlanShape {
    PlanShape {
        tp,
        cp,
        global_batch: 8,
        ..PlanShape::default()
    }
}

/// One layer of `seq` tokens, `hidden` wide, `heads` query and `kv_heads` KV heads of 128,
/// bf16 activations.
fn dims(seq: u64, hidden: u64, heads: u64, kv_heads: u64) -> LayerDims {
    LayerDims {
        micro_batch: 1,
        seq_len: seq,
        hidden,
        heads,
        kv_heads,
        head_dim: 128,
        ffn_hidden: 4 * hidden,
        act_bytes: 2.0,
        gather_bytes: 2.0,
        layer_params: 1e9,
        device_params: 1e10,
        grad_bytes: 2.0,
        weight_bytes: 2.0,
        embedding_params: 1e9,
        tied_embeddings: false,
        moe: None,
    }
}

fn options(names: &[String], params: serde_json::Value) -> TrainingOptions {
    serde_json::from_value(json!({"strategies": names, "strategy_params": params})).unwrap()
}

/// Every evaluation of `plans` on `model` with the compiled-in strategies equals the one
/// with every strategy from the library, field for field (the JSON of the whole result).
fn assert_bit_identical(
    model: perfcast_core::workload::ModelSpec,
    devices: u32,
    plans: &[TrainingPlan],
) {
    let r = registry();
    let builtin: Vec<String> = BUILTINS.map(String::from).to_vec();
    let lib: Vec<String> = BUILTINS.map(|n| format!("lib/{n}")).to_vec();
    let params = |prefix: &str| {
        json!({
            format!("{prefix}tensor"): {"overlap_efficiency": 0.7},
            format!("{prefix}data"): {"overlap_efficiency": 0.9},
        })
    };
    let a = Training::with_options(
        model.clone(),
        a100_from_registry(&r, devices).unwrap(),
        &r,
        &options(&builtin, params("")),
    )
    .unwrap();
    let b = Training::with_options(
        model,
        a100_from_registry(&r, devices).unwrap(),
        &r,
        &options(&lib, params("lib/")),
    )
    .unwrap();
    for p in plans {
        let x = a.evaluate(p).map_err(|e| e.to_string());
        let y = b.evaluate(p).map_err(|e| e.to_string());
        match (x, y) {
            (Ok(x), Ok(y)) => assert_eq!(
                serde_json::to_string(&x).unwrap(),
                serde_json::to_string(&y).unwrap(),
                "{p:?}"
            ),
            // A refused plan is refused by both, for the same reason (the library's under
            // its component's name).
            (Err(x), Err(y)) => assert!(y.ends_with(&x) && y.contains("plugin `lib/"), "{x} / {y}"),
            (x, y) => panic!("{p:?}: compiled-in {x:?}, library {y:?}"),
        }
    }
}

#[test]
fn the_builtins_compiled_as_a_library_are_bit_identical_dense() {
    let base = TrainingPlan {
        tp: 8,
        pp: 8,
        dp: 16,
        micro_batch: 1,
        global_batch: 512,
        recompute: "selective".into(),
        ..TrainingPlan::default()
    };
    let plans = [
        base.clone(),
        TrainingPlan {
            sp: true,
            tp_comm_overlap: true,
            overlap_grad_reduce: true,
            overlap_param_gather: true,
            zero_stage: 1,
            vpp: 2,
            ..base.clone()
        },
        TrainingPlan {
            tp: 4,
            cp: 2,
            zero_stage: 3,
            recompute: "full".into(),
            ..base.clone()
        },
        // Refused by the tensor strategy's own check (96 heads, tp 64).
        TrainingPlan {
            tp: 64,
            pp: 1,
            dp: 16,
            ..base
        },
    ];
    assert_bit_identical(gpt(96, 12288, 96), 1024, &plans);
}

#[test]
fn the_builtins_compiled_as_a_library_are_bit_identical_moe() {
    let plans = [
        TrainingPlan {
            tp: 1,
            pp: 8,
            dp: 64,
            ep: 64,
            micro_batch: 1,
            global_batch: 1024,
            zero_stage: 1,
            recompute: "full".into(),
            ..TrainingPlan::default()
        },
        TrainingPlan {
            tp: 2,
            pp: 8,
            dp: 32,
            ep: 16,
            etp: 2,
            micro_batch: 1,
            global_batch: 1024,
            sp: true,
            recompute: "selective".into(),
            ..TrainingPlan::default()
        },
    ];
    assert_bit_identical(deepseek_v3(), 512, &plans);
}

/// Jacobs et al. 2023 §3.1: with multi-head attention and no tensor parallelism, one layer's
/// forward moves `4·N·h/P` elements per rank (Q, K, V and the output), and the backward the
/// same; GQA's KV heads move their share.
#[test]
fn ulysses_moves_what_the_paper_says() {
    let r = registry();
    let s = r
        .parallel_strategy("example/ulysses", &serde_json::Value::Null)
        .unwrap();
    let (b, seq, h, cp) = (1u64, 32768u64, 12288u64, 8u32);
    let mut out = CommList::default();
    s.comms(&shape(1, cp), &dims(seq, h, 96, 96), &mut out)
        .unwrap();
    let bytes = |phase| -> f64 {
        out.iter()
            .filter(|o| o.phase == phase)
            .inspect(|o| {
                assert_eq!(
                    (o.class, o.kind),
                    (CommClass::Context, CollectiveKind::AllToAll)
                );
            })
            .map(|o| o.bytes.0 * o.count)
            .sum()
    };
    let want = 4.0 * (b * seq * h) as f64 / cp as f64 * 2.0;
    assert_eq!(bytes(Phase::Forward), want);
    assert_eq!(bytes(Phase::Backward), want);
    // Llama 2 70B (64 heads, 8 KV heads of 128), tp 2, cp 4: Q and the output carry 32
    // heads, K and V the 4 KV heads of the rank (a multiple of cp: not replicated).
    let mut out = CommList::default();
    s.comms(&shape(2, 4), &dims(16384, 8192, 64, 8), &mut out)
        .unwrap();
    let per_head = 16384.0 / 4.0 * 128.0 * 2.0;
    let fwd: f64 = out
        .iter()
        .filter(|o| o.phase == Phase::Forward)
        .map(|o| o.bytes.0 * o.count)
        .sum();
    assert_eq!(fwd, (32.0 + 2.0 * 4.0 + 32.0) * per_head);
}

/// In a whole evaluation Ulysses replaces the ring: the same compute, its own (exposed)
/// all-to-alls; a plan whose heads per TP rank `cp` does
/// not divide is refused naming the plugin and `plan.cp`; its parameter is checked by name.
#[test]
fn ulysses_replaces_the_ring_in_an_evaluation() {
    let r = registry();
    let with = |cp_strategy: &str, params: serde_json::Value| {
        let mut names: Vec<String> = BUILTINS.map(String::from).to_vec();
        names[2] = cp_strategy.to_string();
        Training::with_options(
            gpt(96, 12288, 96),
            a100_from_registry(&r, 1024).unwrap(),
            &r,
            &options(&names, params),
        )
    };
    let plan = TrainingPlan {
        tp: 8,
        pp: 8,
        cp: 2,
        dp: 8,
        micro_batch: 1,
        global_batch: 512,
        recompute: "selective".into(),
        ..TrainingPlan::default()
    };
    let ring = with("context", json!({})).unwrap().evaluate(&plan).unwrap();
    let ulysses = with("example/ulysses", json!({})).unwrap();
    let u = ulysses.evaluate(&plan).unwrap();
    // On two ranks Ulysses sends half of its four tensors per pass (8 tensor-halves a step
    // in all) where the ring sends K and V forward and K, V and their gradients backward
    // (6 whole tensors): less, but all of it exposed.
    assert!(u.breakdown.cp_comm.0 > 0.0 && u.breakdown.cp_comm != ring.breakdown.cp_comm);
    assert!(u.iteration_time.0.is_finite());
    assert_eq!(u.breakdown.compute_total(), ring.breakdown.compute_total());
    // 96 heads / tp 8 = 12 per rank: cp 8 does not divide them.
    let bad = TrainingPlan {
        cp: 8,
        dp: 2,
        ..plan
    };
    let e = ulysses.evaluate(&bad).unwrap_err().to_string();
    assert!(
        e.contains("example/ulysses") && e.contains("plan.cp"),
        "{e}"
    );
    let e = with(
        "example/ulysses",
        json!({"example/ulysses": {"separate_qkv": 3}}),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("separate_qkv"), "{e}");
}

/// Every built-in pipeline schedule and recompute policy compiled as a library gives the
/// compiled-in evaluation bit for bit (the schedules' memory answers included: interleaved
/// plans hold layers by chunk), and refuses what it refuses, under its own name.
#[test]
fn the_builtin_schedules_and_policies_as_a_library_are_bit_identical() {
    let r = registry();
    let t = Training::new(
        gpt(96, 12288, 96),
        a100_from_registry(&r, 1024).unwrap(),
        &r,
    )
    .unwrap();
    let base = TrainingPlan {
        tp: 8,
        pp: 8,
        dp: 16,
        micro_batch: 1,
        global_batch: 512,
        ..TrainingPlan::default()
    };
    let mut checked = 0;
    for schedule in [
        "gpipe",
        "1f1b",
        "interleaved-1f1b",
        "flexible-interleaved-1f1b",
    ] {
        for recompute in ["none", "selective", "full"] {
            for (vpp, layers, batch) in [(1, None, 512), (2, Some(6), 512), (3, None, 520)] {
                let plan = |prefix: &str| TrainingPlan {
                    vpp,
                    global_batch: batch,
                    recompute_layers: layers,
                    schedule: Some(format!("{prefix}{schedule}")),
                    recompute: format!("{prefix}{recompute}"),
                    ..base.clone()
                };
                let x = t.evaluate(&plan("")).map_err(|e| e.to_string());
                let y = t.evaluate(&plan("lib/")).map_err(|e| e.to_string());
                match (x, y) {
                    (Ok(x), Ok(y)) => {
                        assert_eq!(
                            serde_json::to_string(&x).unwrap(),
                            serde_json::to_string(&y).unwrap(),
                            "{schedule} {recompute} vpp {vpp}"
                        );
                        checked += 1;
                    }
                    (Err(x), Err(y)) => assert!(
                        y.contains("lib/") && y.contains(&x) || y.ends_with(&x),
                        "{x} / {y}"
                    ),
                    (x, y) => panic!("{schedule} {recompute} vpp {vpp}: {x:?} / {y:?}"),
                }
            }
        }
    }
    // Evaluated on both sides: gpipe and 1f1b at vpp 1, the interleaved ones at vpp 2 and 3
    // where the micro-batches allow (at vpp 1 both refuse, naming plan.vpp).
    assert!(checked >= 8, "{checked}");
}

/// A loaded schedule or policy that cannot be built without parameters (the fuzz fixture's
/// need a `seed`) does not break every training: only a plan naming it is refused, with the
/// reason.
#[test]
fn a_plugin_that_needs_parameters_only_fails_the_plans_that_use_it() {
    let dir = perfcast_testkit::tmpdir("perfcast-strategy-plugins-unbuilt");
    let lib = build_rust(&["fuzz-fixture"], &dir).remove(0);
    let mut r = perfcast_builtins::registry().unwrap();
    load_library(&lib, None, &mut r).unwrap();
    let t = Training::new(
        gpt(96, 12288, 96),
        a100_from_registry(&r, 1024).unwrap(),
        &r,
    )
    .unwrap();
    let base = TrainingPlan {
        tp: 8,
        pp: 8,
        dp: 16,
        micro_batch: 1,
        global_batch: 512,
        ..TrainingPlan::default()
    };
    t.evaluate(&base).unwrap();
    for (schedule, recompute) in [(Some("fuzz/sched"), "selective"), (None, "fuzz/policy")] {
        let plan = TrainingPlan {
            schedule: schedule.map(String::from),
            recompute: recompute.into(),
            ..base.clone()
        };
        let e = t.evaluate(&plan).unwrap_err().to_string();
        let name = schedule.unwrap_or(recompute);
        assert!(
            e.contains(name) && e.contains("cannot be built") && e.contains("seed"),
            "{e}"
        );
    }
}

/// A strategy on a declared axis crosses the Rust ABI (1.4): `example/hsdp`
/// (`plugins/examples/hsdp`) loaded as a library declares its axis `shard` across the
/// boundary, is handed the axis's degree with every call, names the axis in its collectives'
/// groups, and gives the evaluations of the same crate compiled in bit for bit; a plan the
/// compiled-in one refuses it refuses for the same reason, under the library's name.
#[test]
fn a_strategy_on_a_declared_axis_from_a_library_is_bit_identical() {
    let names = hsdp::STRATEGIES.map(String::from).to_vec();
    let training = |r: &Registry| {
        Training::with_options(
            gpt(96, 12288, 96),
            a100_from_registry(r, 1024).unwrap(),
            r,
            &options(&names, json!({})),
        )
        .unwrap()
    };
    let mut compiled_in = perfcast_builtins::registry().unwrap();
    hsdp::register(&mut compiled_in).unwrap();
    let mut loaded = perfcast_builtins::registry().unwrap();
    load_library(&libs().hsdp, None, &mut loaded).unwrap();
    let (builtin, lib) = (training(&compiled_in), training(&loaded));
    let axes: Vec<_> = lib.declared_axes().collect();
    assert_eq!(axes, builtin.declared_axes().collect::<Vec<_>>());
    assert_eq!(axes[0].name, "shard");
    let plan = |tp, pp, dp, shard, zero_stage| TrainingPlan {
        tp,
        pp,
        dp,
        micro_batch: 1,
        global_batch: 512,
        zero_stage,
        recompute: "selective".into(),
        axes: [("shard".to_string(), shard)].into(),
        ..TrainingPlan::default()
    };
    for p in [
        plan(8, 8, 2, 8, 3),
        plan(8, 4, 4, 8, 3),
        plan(4, 8, 8, 4, 3),
        plan(8, 8, 16, 1, 3),
        // Refused by hsdp's own check: it shards with ZeRO-3 only.
        plan(8, 8, 2, 8, 1),
    ] {
        match (builtin.evaluate(&p), lib.evaluate(&p)) {
            (Ok(x), Ok(y)) => assert_eq!(
                serde_json::to_string(&x).unwrap(),
                serde_json::to_string(&y).unwrap(),
                "{p:?}"
            ),
            (Err(x), Err(y)) => {
                let (x, y) = (x.to_string(), y.to_string());
                assert!(y.ends_with(&x) && y.contains("example/hsdp"), "{x} / {y}");
            }
            (x, y) => panic!("{p:?}: compiled-in {x:?}, library {y:?}"),
        }
    }
}

/// `example/tp2d` (C ABI 1.7) declares `col` outside `tensor` across the C boundary and, on a
/// 2 x 2 grid, moves by hand: per layer forward an all-gather of the activation panels
/// M K_A / q over `col` (M = 4,096 tokens, K_A = 2 x 4,096 + 32 x 128 + 16,384 = 28,672,
/// q = 2: 58,720,256 elements, 2 bytes each) and of the weight panels W / q over `tensor`
/// (W = 5e7 x q^2 = 2e8: 1e8 elements); the backward the same two plus reduce-scatters of the
/// same panels (the weight gradients at 4 bytes); the embedding, head and loss all-reduces
/// over the whole grid.
#[test]
fn tp2d_in_c_declares_its_axis_and_moves_the_summa_panels() {
    use perfcast_core::parallel::{Axis, AxisPlace, AxisSet, LayerSplit};
    let r = registry();
    let s = r.parallel_strategy("example/tp2d", &json!({})).unwrap();
    let axes = s.axes();
    assert_eq!(axes.len(), 1);
    assert_eq!(axes[0].name, "col");
    assert_eq!(axes[0].place, AxisPlace::Outside(Axis::Tensor));
    assert!(axes[0].divides.heads && !axes[0].divides.batch);
    let mut plan = shape(2, 1);
    plan.axes[0] = 2;
    let mut split = LayerSplit::default();
    s.split_layer(&plan, &mut split).unwrap();
    assert_eq!((split.weights, split.pointwise, split.tokens), (4, 4, 1));
    let mut d = dims(4096, 4096, 32, 8);
    d.ffn_hidden = 16384;
    d.layer_params = 5e7;
    d.grad_bytes = 4.0;
    let mut l = CommList::default();
    s.comms(&plan, &d, &mut l).unwrap();
    let (row, col) = (AxisSet::TENSOR, AxisSet::declared(0));
    let acts = 4096.0 * 28672.0 / 2.0 * 2.0;
    let w = 5e7 * 4.0 / 2.0;
    let grid = row.union(col);
    use CollectiveKind::{AllGather, AllReduce, ReduceScatter};
    let want = [
        (Phase::Forward, AllGather, col, acts),
        (Phase::Forward, AllGather, row, w * 2.0),
        (Phase::Backward, AllGather, col, acts),
        (Phase::Backward, AllGather, row, w * 2.0),
        (Phase::Backward, ReduceScatter, col, acts),
        (Phase::Backward, ReduceScatter, row, w * 4.0),
        (
            Phase::EmbeddingForward,
            AllReduce,
            grid,
            4096.0 * 4096.0 * 2.0,
        ),
        (Phase::HeadBackward, AllReduce, grid, 4096.0 * 4096.0 * 2.0),
        (Phase::HeadForward, AllReduce, grid, 4096.0 * 4.0),
    ];
    let got: Vec<_> = l
        .iter()
        .map(|c| (c.phase, c.kind, c.group, c.bytes.0))
        .collect();
    assert_eq!(got, want);
    assert!(l.iter().all(|c| c.class == CommClass::Tensor));
}

/// In an evaluation, `example/tp2d` on a 1 x 1 grid is no tensor parallelism (the built-in's
/// report at tp 1, bit for bit); on a 2 x 2 grid it runs the GEMMs of 1-D tensor parallelism
/// over 4 and adds its panels as exposed tensor-parallel communication; plans off the grid
/// are refused naming the key.
#[test]
fn tp2d_runs_in_an_evaluation_and_refuses_plans_off_its_grid() {
    let r = registry();
    let names = |tensor: &str| -> Vec<String> {
        [
            tensor, "sequence", "context", "expert", "pipeline", "data", "zero",
        ]
        .map(String::from)
        .to_vec()
    };
    let training = |tensor: &str| {
        Training::with_options(
            gpt(96, 12288, 96),
            a100_from_registry(&r, 1024).unwrap(),
            &r,
            &options(&names(tensor), json!({})),
        )
        .unwrap()
    };
    let (builtin, tp2d) = (training("tensor"), training("example/tp2d"));
    let plan = |tp, col, dp| TrainingPlan {
        tp,
        pp: 16,
        dp,
        micro_batch: 1,
        global_batch: 1536,
        recompute: "full".into(),
        axes: [("col".to_string(), col)].into(),
        ..TrainingPlan::default()
    };
    let one = TrainingPlan {
        axes: Default::default(),
        ..plan(1, 1, 64)
    };
    assert_eq!(
        serde_json::to_string(&builtin.evaluate(&one).unwrap()).unwrap(),
        serde_json::to_string(&tp2d.evaluate(&plan(1, 1, 64)).unwrap()).unwrap()
    );
    let d1 = builtin
        .evaluate(&TrainingPlan {
            axes: Default::default(),
            ..plan(4, 1, 16)
        })
        .unwrap();
    let d2 = tp2d.evaluate(&plan(2, 2, 16)).unwrap();
    assert_eq!(d2.breakdown.compute.gemm, d1.breakdown.compute.gemm);
    assert!(d2.breakdown.tp_comm.0 > d1.breakdown.tp_comm.0);
    for (p, want) in [
        (plan(2, 4, 8), "plan.axes.col` = 4: must equal plan.tp = 2"),
        (
            TrainingPlan {
                sp: true,
                ..plan(2, 2, 16)
            },
            "plan.sp",
        ),
        (plan(8, 8, 1), "q^2 = 64 must divide model.heads = 96"),
    ] {
        let e = tp2d.evaluate(&p).unwrap_err().to_string();
        assert!(e.contains("example/tp2d") && e.contains(want), "{e}");
    }
}
