//! Declared axes: a strategy's own mesh axis numbered, placed and checked by the engine.

use super::*;
use perfcast_core::parallel::{
    Axis, AxisDecl, AxisPlace, AxisSet, CommList, Divides, LayerDims, LayerSplit, ParallelStrategy,
    PlanShape, StateSplit,
};
use perfcast_core::registry::{Category, Component, Origin, PluginInfo, Registry};
use perfcast_core::workload::ModelSpec;
use perfcast_core::{ModelError, PluginError};
use perfcast_testkit::{a100_system, gpt};
use serde_json::json;
use std::sync::Arc;

/// The built-in `data` and `zero` strategies moved onto a declared axis `replica` placed
/// outside `data`: with `plan.dp = 1` the axis sits where `data` would, so a plan with
/// `axes.replica = N` must give the built-in's report for `dp = N` bit for bit.
struct Relabel {
    inner: [Arc<dyn ParallelStrategy>; 2],
}

impl Relabel {
    fn view(plan: &PlanShape) -> PlanShape {
        PlanShape {
            dp: plan.dp * plan.axes[0],
            batch_split: 1,
            ..*plan
        }
    }
}

impl ParallelStrategy for Relabel {
    fn kind(&self) -> &str {
        "test/relabel"
    }
    fn axis(&self) -> Axis {
        Axis::Data
    }
    fn axes(&self) -> Vec<AxisDecl> {
        vec![AxisDecl {
            name: "replica".into(),
            place: AxisPlace::Outside(Axis::Data),
            divides: Divides {
                batch: true,
                ..Divides::default()
            },
        }]
    }
    fn validate(&self, model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError> {
        self.inner
            .iter()
            .try_for_each(|s| s.validate(model, &Self::view(plan)))
    }
    fn split_layer(&self, plan: &PlanShape, split: &mut LayerSplit) -> Result<(), ModelError> {
        self.inner
            .iter()
            .try_for_each(|s| s.split_layer(&Self::view(plan), split))
    }
    fn split_state(&self, plan: &PlanShape, split: &mut StateSplit) -> Result<(), ModelError> {
        self.inner
            .iter()
            .try_for_each(|s| s.split_state(&Self::view(plan), split))
    }
    fn comms(&self, plan: &PlanShape, d: &LayerDims, out: &mut CommList) -> Result<(), ModelError> {
        let start = out.len();
        for s in &self.inner {
            s.comms(&Self::view(plan), d, out)?;
        }
        for op in out.ops_mut_from(start) {
            if op.group.intersects(AxisSet::DATA) {
                op.group = AxisSet(op.group.0 & !AxisSet::DATA.0).union(AxisSet::declared(0));
            }
        }
        Ok(())
    }
}

/// A strategy that declares what its parameters say and, with `comm_on = k`, adds one
/// collective on its `k`-th declared axis (for the bad-input table).
struct Probe {
    axes: Vec<AxisDecl>,
    comm_on: Option<usize>,
}

impl ParallelStrategy for Probe {
    fn kind(&self) -> &str {
        "test/probe"
    }
    fn axis(&self) -> Axis {
        Axis::Tensor
    }
    fn axes(&self) -> Vec<AxisDecl> {
        self.axes.clone()
    }
    fn validate(&self, _: &ModelSpec, _: &PlanShape) -> Result<(), ModelError> {
        Ok(())
    }
    fn comms(&self, _: &PlanShape, _: &LayerDims, out: &mut CommList) -> Result<(), ModelError> {
        if let Some(k) = self.comm_on {
            out.push(perfcast_core::parallel::CommOp {
                class: perfcast_core::parallel::CommClass::Tensor,
                phase: perfcast_core::parallel::Phase::Forward,
                kind: perfcast_core::op::CollectiveKind::AllReduce,
                bytes: perfcast_core::Bytes(1e6),
                group: AxisSet::declared(k),
                count: 1.0,
                overlap: perfcast_core::parallel::Overlap::Exposed,
                with_recompute: false,
                dispatch: None,
            })?;
        }
        Ok(())
    }
}

fn info(name: &str) -> PluginInfo {
    PluginInfo {
        category: Category::ParallelStrategy,
        name: name.into(),
        origin: Origin::BuiltIn("perfcast-engine tests".into()),
        version: "0".into(),
        abi_version: None,
        description: "test strategy".into(),
        params: None,
    }
}

fn registry() -> Registry {
    let mut r = perfcast_testkit::registry();
    hsdp::register(&mut r).unwrap();
    let base = perfcast_testkit::registry();
    let null = serde_json::Value::Null;
    let inner = [
        base.parallel_strategy("data", &null).unwrap(),
        base.parallel_strategy("zero", &null).unwrap(),
    ];
    r.register(
        info("test/relabel"),
        Arc::new(move |_| {
            Ok(Component::ParallelStrategy(Arc::new(Relabel {
                inner: inner.clone(),
            })))
        }),
    )
    .unwrap();
    for name in ["test/probe", "test/probe2"] {
        r.register(
            info(name),
            Arc::new(|v: &serde_json::Value| {
                let bad = |e: serde_json::Error| PluginError::Params {
                    path: String::new(),
                    message: e.to_string(),
                };
                let axes = serde_json::from_value(v["axes"].clone()).map_err(bad)?;
                let comm_on = serde_json::from_value(v["comm_on"].clone()).map_err(bad)?;
                Ok(Component::ParallelStrategy(Arc::new(Probe {
                    axes,
                    comm_on,
                })))
            }),
        )
        .unwrap();
    }
    r
}

const RELABELLED: [&str; 6] = [
    "tensor",
    "sequence",
    "context",
    "expert",
    "pipeline",
    "test/relabel",
];

fn options(strategies: &[&str], params: serde_json::Value) -> TrainingOptions {
    TrainingOptions {
        strategies: Some(strategies.iter().map(|s| s.to_string()).collect()),
        strategy_params: serde_json::from_value(params).unwrap(),
        ..TrainingOptions::default()
    }
}

fn training(opts: &TrainingOptions, devices: u32) -> Result<Training, ModelError> {
    Training::with_options(gpt(8, 2048, 16), a100_system(devices), &registry(), opts)
}

fn plan(tp: u32, pp: u32, dp: u32, axes: &[(&str, u32)]) -> TrainingPlan {
    TrainingPlan {
        tp,
        pp,
        dp,
        zero_stage: 1,
        micro_batch: 1,
        global_batch: 64,
        axes: axes.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        ..TrainingPlan::default()
    }
}

/// `got` (a run whose one declared axis carries what the built-in `data` and `zero` do) is
/// `want` (the built-in's) bit for bit, but for where the data-parallel collectives are
/// booked: `got`'s axis ledger and what is left of its `dp_comm + zero_comm` add up to
/// `want`'s `dp_comm + zero_comm` (to rounding: the ledgers are timed apart). A dense model
/// leaves nothing (all its data-parallel collectives are on the axis); a mixture-of-experts
/// model keeps its experts' own, on the expert mesh.
fn same_but_ledgers(got: &TrainingReport, want: &TrainingReport, what: &str) {
    let (gb, wb) = (&got.breakdown, &want.breakdown);
    if gb.ep_comm.0 == 0.0 {
        assert_eq!((gb.dp_comm.0, gb.zero_comm.0), (0.0, 0.0), "{what}");
    }
    let moved = wb.dp_comm.0 + wb.zero_comm.0;
    let ledger = gb.axes.total().0 + gb.dp_comm.0 + gb.zero_comm.0;
    assert!(
        (ledger - moved).abs() <= 1e-12 * moved,
        "{what}: {ledger} vs {moved}"
    );
    assert_eq!(gb.axes.iter().count(), 1, "{what}");
    let folded = TrainingReport {
        breakdown: TimeBreakdown {
            dp_comm: wb.dp_comm,
            zero_comm: wb.zero_comm,
            axes: Default::default(),
            ..*gb
        },
        bottleneck: want.bottleneck,
        ..*got
    };
    assert_eq!(&folded, want, "{what}");
    assert!((gb.total().0 - got.iteration_time.0).abs() <= 1e-12 * got.iteration_time.0);
}

/// The built-in data-parallel strategy on a declared axis gives the built-in's report bit for
/// bit (its collectives booked on the axis's ledger): the axis is numbered, placed where `data` would be (across nodes: the DP group leaves
/// the 8-GPU node), counted in the devices and splits the batch into the same micro-batches.
#[test]
fn a_strategy_on_a_declared_axis_matches_the_built_in() {
    let builtin = training(&TrainingOptions::default(), 64).unwrap();
    let relabel = training(&options(&RELABELLED, json!({})), 64).unwrap();
    for (tp, pp, dp, zero) in [(2, 2, 16, 1), (8, 2, 4, 1), (4, 1, 16, 3), (1, 4, 16, 0)] {
        let want = builtin
            .evaluate(&TrainingPlan {
                zero_stage: zero,
                ..plan(tp, pp, dp, &[])
            })
            .unwrap();
        let declared = TrainingPlan {
            zero_stage: zero,
            ..plan(tp, pp, 1, &[("replica", dp)])
        };
        assert_eq!(declared.devices(), 64);
        let got = relabel.evaluate(&declared).unwrap();
        same_but_ledgers(&got, &want, &format!("tp {tp} pp {pp} dp {dp} zero {zero}"));
        assert!(
            want.breakdown.dp_comm.0 > 0.0 || zero == 3,
            "{:?}",
            want.breakdown
        );
    }
}

/// A declared axis inside `data` (a shard group) is laid out inside it: with `tp = 2`, `dp =
/// 2` and the axis at 4, its group is 4 ranks 2 apart, inside one 8-GPU node, and `data` steps
/// over it (one member per node); placed outside `data` it is 4 ranks 4 apart, 2 per node.
#[test]
fn a_declared_axis_is_placed_next_to_its_anchor() {
    use crate::network::{DeclaredDim, Mesh};
    let mut m = Mesh::new(2, 1, 1, 2);
    let dim = |outside| DeclaredDim {
        degree: 4,
        slot: 3,
        outside,
        batch: true,
    };
    m.declare(0, dim(false));
    assert_eq!(m.devices(), 16);
    let shard = m.placement(AxisSet::declared(0)).unwrap();
    assert_eq!((shard.ranks(), shard.members_within(8)), (4, 4));
    let data = m.placement(AxisSet::DATA).unwrap();
    assert_eq!((data.ranks(), data.members_within(8)), (2, 1));
    m.declare(0, dim(true));
    let shard = m.placement(AxisSet::declared(0)).unwrap();
    assert_eq!((shard.ranks(), shard.members_within(8)), (4, 2));
    let data = m.placement(AxisSet::DATA).unwrap();
    assert_eq!((data.ranks(), data.members_within(8)), (2, 2));
    // Inside tensor: TP's ranks now step over the declared axis's.
    let mut m = Mesh::new(4, 1, 2, 1);
    m.declare(
        1,
        DeclaredDim {
            degree: 2,
            slot: 0,
            outside: false,
            batch: false,
        },
    );
    let tp = m.placement(AxisSet::TENSOR).unwrap();
    assert_eq!((tp.ranks(), tp.members_within(4)), (4, 2));
    let both = m
        .placement(AxisSet::TENSOR.union(AxisSet::declared(1)))
        .unwrap();
    assert_eq!((both.ranks(), both.members_within(8)), (8, 8));
    let pp = m.placement(AxisSet::PIPELINE).unwrap();
    assert_eq!(pp.members_within(8), 1);
}

/// The expert mesh is carved out of TP, CP, DP and a declared axis that splits the batch, in
/// their layout order: TP 2 x a shard of 4 inside DP 2 (16 devices) with EP 8 makes the
/// expert group the 8 ranks of a node (TP's 2 and the shard's 4) and the expert data group
/// the 2 replicas, 8 apart; the shard placed outside `data` puts DP inside it instead.
#[test]
fn the_expert_mesh_is_carved_out_of_a_batch_splitting_declared_axis() {
    use crate::network::{DeclaredDim, Mesh};
    let mesh = |outside| {
        let mut m = Mesh::new(2, 1, 1, 2);
        m.ep = 8;
        m.declare(
            0,
            DeclaredDim {
                degree: 4,
                slot: 3,
                outside,
                batch: true,
            },
        );
        m
    };
    let m = mesh(false);
    let ep = m.placement(AxisSet::EXPERT).unwrap();
    assert_eq!((ep.ranks(), ep.members_within(8)), (8, 8));
    let edp = m.placement(AxisSet::EXPERT_DATA).unwrap();
    assert_eq!((edp.ranks(), edp.members_within(8)), (2, 1));
    // Outside `data`: TP 2 x DP 2 x 2 of the shard's 4 (stride 4) in the expert group.
    let m = mesh(true);
    let ep = m.placement(AxisSet::EXPERT).unwrap();
    assert_eq!((ep.ranks(), ep.members_within(8)), (8, 8));
    let edp = m.placement(AxisSet::EXPERT_DATA).unwrap();
    assert_eq!((edp.ranks(), edp.members_within(8)), (2, 1));
}

/// With expert parallelism, `data` and `zero` on a declared axis (`test/relabel`, outside
/// `data` with `dp = 1`) give the built-in report of a mixture-of-experts model bit for bit
/// (their collectives on the axis's ledger): the expert mesh counts the axis's ranks as
/// data-parallel ones, in the same places. So does the example `hsdp` with one replica
/// (its shard inside `data`) against ZeRO-3.
#[test]
fn expert_parallelism_over_a_batch_splitting_declared_axis_matches_the_built_in() {
    let moe = ModelSpec {
        moe: Some(perfcast_core::workload::MoeSpec::new(8, 2, 4096)),
        ..gpt(8, 2048, 16)
    };
    let t = |opts: &TrainingOptions| {
        Training::with_options(moe.clone(), a100_system(64), &registry(), opts).unwrap()
    };
    let (builtin, relabel, hsdp) = (
        t(&TrainingOptions::default()),
        t(&options(&RELABELLED, json!({}))),
        t(&options(&hsdp::STRATEGIES, json!({}))),
    );
    for (tp, pp, dp, ep) in [(2, 2, 16, 8), (1, 4, 16, 4), (2, 1, 32, 8)] {
        let moe_plan = |dp, axes: &[(&str, u32)]| TrainingPlan {
            sp: tp > 1,
            ep,
            ..plan(tp, pp, dp, axes)
        };
        let want = builtin.evaluate(&moe_plan(dp, &[])).unwrap();
        assert!(want.breakdown.ep_comm.0 > 0.0, "{:?}", want.breakdown);
        let got = relabel.evaluate(&moe_plan(1, &[("replica", dp)])).unwrap();
        same_but_ledgers(&got, &want, &format!("tp {tp} pp {pp} dp {dp} ep {ep}"));
        // The example hsdp with one replica: ZeRO-3 over its shard, with EP over it.
        let zero3 = |dp, axes: &[(&str, u32)]| TrainingPlan {
            zero_stage: 3,
            ..moe_plan(dp, axes)
        };
        let want = builtin.evaluate(&zero3(dp, &[])).unwrap();
        let got = hsdp.evaluate(&zero3(1, &[("shard", dp)])).unwrap();
        same_but_ledgers(
            &got,
            &want,
            &format!("hsdp tp {tp} pp {pp} dp {dp} ep {ep}"),
        );
    }
}

/// With expert parallelism a declared axis that does not split the batch, or a second one that
/// does, is refused naming its key, its strategy and the reason; at degree 1 either is fine.
#[test]
fn expert_parallelism_refuses_other_declared_axes() {
    let moe = ModelSpec {
        moe: Some(perfcast_core::workload::MoeSpec::new(8, 2, 4096)),
        ..gpt(8, 2048, 16)
    };
    let mut names: Vec<&str> = DEFAULT_STRATEGIES.to_vec();
    names.push("test/probe");
    let params = json!({ "test/probe": probe(json!([
        axis("col", json!({"outside": "tensor"}), json!({"heads": true})),
        axis("rep", json!({"outside": "data"}), json!({"batch": true})),
        axis("rep2", json!({"outside": "data"}), json!({"batch": true})),
    ])) });
    let t = Training::with_options(moe, a100_system(64), &registry(), &options(&names, params))
        .unwrap();
    let with = |dp, axes: &[(&str, u32)]| TrainingPlan {
        ep: 2,
        ..plan(1, 1, dp, axes)
    };
    // (dp, axes over the 64 GPUs, the key, what the error says)
    type Row<'a> = (u32, &'a [(&'a str, u32)], &'a str, &'a str);
    let table: [Row; 2] = [
        (
            32,
            &[("col", 2)],
            "plan.axes.col",
            "`col` of strategy `test/probe` does not split",
        ),
        (
            8,
            &[("rep", 2), ("rep2", 4)],
            "plan.axes.rep2",
            "a second declared axis that splits the batch (after `rep`)",
        ),
    ];
    for (dp, axes, key, want) in table {
        let e = t.evaluate(&with(dp, axes)).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(want), "{axes:?}: {e}");
    }
    let ok = t.evaluate(&with(8, &[("rep", 8), ("col", 1), ("rep2", 1)]));
    assert!(ok.is_ok(), "{ok:?}");
}

fn probe(axes: serde_json::Value) -> serde_json::Value {
    json!({ "axes": axes, "comm_on": null })
}

fn axis(name: &str, place: serde_json::Value, divides: serde_json::Value) -> serde_json::Value {
    json!({ "name": name, "place": place, "divides": divides })
}

/// Every bad declaration or plan is an error naming the key, the strategy and the value.
#[test]
fn bad_declared_axes() {
    let shard = axis("shard", json!({"inside": "data"}), json!({"heads": true}));
    let with_probe = |params: serde_json::Value| {
        let mut names: Vec<&str> = DEFAULT_STRATEGIES.to_vec();
        names.push("test/probe");
        training(&options(&names, json!({ "test/probe": params })), 64)
    };
    // Declarations: (probe parameters, what the error says).
    let nine: Vec<_> = (0..9)
        .map(|i| axis(&format!("a{i}"), json!({"outside": "data"}), json!({})))
        .collect();
    let declarations = [
        (
            probe(json!([axis("tp", json!({"inside": "data"}), json!({}))])),
            "built-in",
        ),
        (
            probe(json!([axis("Shard", json!({"inside": "data"}), json!({}))])),
            "`Shard`",
        ),
        (
            probe(json!([axis("x", json!({"inside": "expert"}), json!({}))])),
            "next to `expert`",
        ),
        (probe(json!([shard.clone(), shard.clone()])), "declares too"),
        (probe(json!(nine)), "at most 8 axes"),
    ];
    for (params, want) in declarations {
        let e = with_probe(params.clone())
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("options.strategies") && e.contains("test/probe") && e.contains(want),
            "{params}: {e}"
        );
    }
    // Two strategies claiming one axis.
    let mut names: Vec<&str> = DEFAULT_STRATEGIES.to_vec();
    names.extend(["test/probe", "test/probe2"]);
    let e = training(
        &options(
            &names,
            json!({"test/probe": probe(json!([shard])), "test/probe2": probe(json!([shard]))}),
        ),
        64,
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(
        e.contains("test/probe2") && e.contains("`shard`") && e.contains("test/probe"),
        "{e}"
    );

    // Plans: (strategy parameters, plan, what the error says).
    let t = with_probe(probe(json!([shard]))).unwrap();
    let plans = [
        (plan(8, 1, 2, &[("shrad", 4)]), "plan.axes.shrad"),
        (plan(8, 1, 2, &[("shrad", 4)]), "did you mean `shard`"),
        (plan(8, 1, 8, &[("shard", 0)]), "plan.axes.shard"),
        (plan(8, 1, 8, &[("shard", 4)]), "system's devices = 64"),
    ];
    for (p, want) in plans {
        let e = t.evaluate(&p).unwrap_err().to_string();
        assert!(e.contains(want), "{:?}: {e}", p.axes);
    }
    t.evaluate(&plan(8, 1, 2, &[("shard", 4)])).unwrap();
    // 16 heads: a shard degree of 3 does not divide them.
    let mut names: Vec<&str> = DEFAULT_STRATEGIES.to_vec();
    names.push("test/probe");
    let t24 = training(
        &options(&names, json!({ "test/probe": probe(json!([shard])) })),
        24,
    );
    let e = t24
        .unwrap()
        .evaluate(&plan(8, 1, 1, &[("shard", 3)]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("plan.axes.shard") && e.contains("must divide model.heads = 16"),
        "{e}"
    );
    let e = training(&TrainingOptions::default(), 64)
        .unwrap()
        .evaluate(&plan(8, 1, 2, &[("shard", 4)]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("plan.axes.shard") && e.contains("no strategy in use declares"),
        "{e}"
    );
    // A batch-splitting axis whose product with micro_batch x dp does not divide the batch.
    let batch = axis("shard", json!({"inside": "data"}), json!({"batch": true}));
    let t = with_probe(probe(json!([batch]))).unwrap();
    let e = t
        .evaluate(&TrainingPlan {
            global_batch: 12,
            ..plan(8, 1, 2, &[("shard", 4)])
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("plan.global_batch") && e.contains("= 8"), "{e}");

    // Expert parallelism beside a declared axis of degree > 1 (not laid out yet).
    let moe = Training::with_options(
        super::tests_moe::dsv3_small(),
        a100_system(64),
        &registry(),
        &options(&names, json!({ "test/probe": probe(json!([shard])) })),
    )
    .unwrap();
    let e = moe
        .evaluate(&TrainingPlan {
            ep: 8,
            ..plan(8, 1, 2, &[("shard", 4)])
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("plan.axes.shard") && e.contains("expert parallelism"),
        "{e}"
    );

    // A collective on an axis the strategy did not declare.
    let t = with_probe(json!({ "axes": [], "comm_on": 0 })).unwrap();
    let e = t.evaluate(&plan(8, 1, 8, &[])).unwrap_err().to_string();
    assert!(
        e.contains("test/probe") && e.contains("does not declare"),
        "{e}"
    );
    let t = with_probe(json!({ "axes": [shard], "comm_on": 1 })).unwrap();
    let e = t
        .evaluate(&plan(8, 1, 2, &[("shard", 4)]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not declare"), "{e}");
    let t = with_probe(json!({ "axes": [shard], "comm_on": 0 })).unwrap();
    t.evaluate(&plan(8, 1, 2, &[("shard", 4)])).unwrap();
}

/// The example `hsdp` (`plugins/examples/hsdp`, compiled in) with one replica is ZeRO-3 over
/// its shard group: the report of `dp = 1, axes.shard = N` is the built-in `data` + `zero`
/// report of `dp = N` bit for bit (its collectives on the `shard` ledger). With replicas the
/// state is sharded over the shard group only, so a device holds more of it than under
/// ZeRO-3 over every rank, with the same micro-batches.
#[test]
fn hsdp_with_one_replica_is_zero_3_over_its_shard() {
    let hsdp = training(&options(&hsdp::STRATEGIES, json!({})), 64).unwrap();
    let builtin = training(&TrainingOptions::default(), 64).unwrap();
    for (tp, pp, n) in [(2, 2, 16), (8, 1, 8), (1, 4, 16)] {
        let zero3 = |dp, axes: &[(&str, u32)]| TrainingPlan {
            zero_stage: 3,
            ..plan(tp, pp, dp, axes)
        };
        let want = builtin.evaluate(&zero3(n, &[])).unwrap();
        let got = hsdp.evaluate(&zero3(1, &[("shard", n)])).unwrap();
        same_but_ledgers(&got, &want, &format!("tp {tp} pp {pp} shard {n}"));
    }
    // 8 x 8 devices: shard 8 inside the node, 2 x 4 replicas. The state is sharded 8 ways
    // instead of 64 (ZeRO-3 over every rank), so more memory per device.
    let full = builtin
        .evaluate(&TrainingPlan {
            zero_stage: 3,
            ..plan(1, 1, 64, &[])
        })
        .unwrap();
    let hybrid = hsdp
        .evaluate(&TrainingPlan {
            zero_stage: 3,
            ..plan(1, 1, 8, &[("shard", 8)])
        })
        .unwrap();
    assert!(hybrid.memory.peak.0 > full.memory.peak.0);
    assert_eq!(hybrid.micro_batches, full.micro_batches);
    // The gathers and reduce-scatters inside the shard are its ledger's; the all-reduce
    // over the replicas stays data parallelism's.
    let b = &hybrid.breakdown;
    let ledger: Vec<(&str, f64)> = b.axes.iter().map(|(n, t)| (n, t.0)).collect();
    assert!(
        ledger.len() == 1 && ledger[0].0 == "shard" && ledger[0].1 > 0.0,
        "{ledger:?}"
    );
    assert!(b.dp_comm.0 > 0.0 && b.zero_comm.0 == 0.0, "{b:?}");
    assert!((b.total().0 - hybrid.iteration_time.0).abs() <= 1e-12 * hybrid.iteration_time.0);
}
