//! The messages of the plugin-host protocol (`perfcast-plugin-host/4`, see the module
//! above): one call host to child, one answer child to host, matched by id.

use perfcast_abi::c::{
    PcLayerActivations, PcRecomputePlan, PcScheduleInput, PcScheduleProperties, PcScheduleResult,
};
use perfcast_abi::rust_abi::{FfiGroupAxis, FfiLevel};
use perfcast_abi::strategy::{
    PcAxisDecl, PcCommOp, PcLayerDims, PcLayerSplit, PcModel, PcPlan, PcPlanAxes, PcStateSplit,
};
use perfcast_abi::TierProps;
use perfcast_core::topology::{LinkClass, LinkLoad, NetworkCost};
use perfcast_core::{Category, Collective, ComputeOp, OpTime, ParamSpec};
use serde::{Deserialize, Serialize};

/// One call, host to child.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Call {
    Hello {
        protocol: String,
    },
    Build {
        category: Category,
        name: String,
        params: serde_json::Value,
    },
    Efficiency {
        handle: usize,
        op: ComputeOp,
    },
    OpTime {
        handle: usize,
        op: ComputeOp,
        tiers: Vec<(String, WireTier)>,
    },
    CollectiveTime {
        handle: usize,
        collective: Collective,
        algorithm: perfcast_core::CollectiveAlgorithm,
    },
    Validate {
        handle: usize,
        model: PcModel,
        plan: PcPlanAxes,
    },
    SplitLayer {
        handle: usize,
        plan: PcPlanAxes,
        split: PcLayerSplit,
    },
    SplitState {
        handle: usize,
        plan: PcPlanAxes,
        split: PcStateSplit,
    },
    Comms {
        handle: usize,
        plan: PcPlanAxes,
        dims: PcLayerDims,
        capacity: usize,
    },
    ScheduleValidate {
        handle: usize,
        plan: PcPlan,
    },
    Step {
        handle: usize,
        input: PcScheduleInput,
    },
    InFlight {
        handle: usize,
        input: PcScheduleInput,
        stage: u32,
    },
    PeakLayersHeld {
        handle: usize,
        input: PcScheduleInput,
        stage: u32,
        chunk_layers: Vec<f64>,
    },
    RecomputePlan {
        handle: usize,
        act: PcLayerActivations,
        layers: u32,
        recompute_layers: u32,
    },
    TopologyCheck {
        handle: usize,
        levels: Vec<FfiLevel>,
        devices: u64,
    },
    TopologyLinks {
        handle: usize,
        levels: Vec<FfiLevel>,
        devices: u64,
    },
    TopologyCost {
        handle: usize,
        levels: Vec<FfiLevel>,
        devices: u64,
    },
    TopologyCollective {
        handle: usize,
        levels: Vec<FfiLevel>,
        axes: Vec<FfiGroupAxis>,
        devices: u64,
        kind: u32,
        bytes: f64,
    },
}

/// A memory tier's properties on the wire (`TierProps`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct WireTier {
    pub(crate) level: u32,
    pub(crate) capacity: f64,
    pub(crate) bandwidth: f64,
    pub(crate) efficiency: f64,
    pub(crate) latency: f64,
}

impl From<TierProps> for WireTier {
    fn from(p: TierProps) -> Self {
        WireTier {
            level: p.level,
            capacity: p.capacity,
            bandwidth: p.bandwidth,
            efficiency: p.efficiency,
            latency: p.latency,
        }
    }
}

impl From<WireTier> for TierProps {
    fn from(p: WireTier) -> Self {
        TierProps {
            level: p.level,
            capacity: p.capacity,
            bandwidth: p.bandwidth,
            efficiency: p.efficiency,
            latency: p.latency,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WireComponent {
    pub(crate) category: Category,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) params: Option<Vec<ParamSpec>>,
}

/// What a build returns: the component's constant properties.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Built {
    Compute {
        /// `(engine code, dtype code, FLOP/s)` of every path the device has.
        peaks: Vec<(u32, u32, f64)>,
        launch_overhead: f64,
        gemm_tile: u64,
    },
    Tier(WireTier),
    Link {
        domain_size: u32,
        bandwidth: f64,
        latency: f64,
    },
    /// A parallel strategy: its axis code and the axes it declares.
    Strategy {
        axis: u32,
        axes: Vec<PcAxisDecl>,
    },
    /// A pipeline schedule: what it declared of itself.
    Schedule {
        properties: PcScheduleProperties,
    },
    Recompute,
    Topology,
}

/// One answer, child to host.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Answer {
    Hello {
        protocol: String,
        plugin: String,
        version: String,
        abi: String,
        components: Vec<WireComponent>,
    },
    Built {
        handle: usize,
        built: Built,
    },
    Number(f64),
    OpTime(OpTime),
    Done,
    LayerSplit(PcLayerSplit),
    StateSplit(PcStateSplit),
    Comms(Vec<PcCommOp>),
    ScheduleResult(PcScheduleResult),
    RecomputePlan(PcRecomputePlan),
    Links(Vec<LinkClass>),
    Cost(Option<NetworkCost>),
    CollectiveCost {
        time: f64,
        loads: Vec<LinkLoad>,
    },
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireError {
    pub(crate) code: i32,
    pub(crate) path: String,
    pub(crate) message: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Request {
    pub(crate) id: u64,
    pub(crate) call: Call,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Response {
    pub(crate) id: u64,
    #[serde(default)]
    pub(crate) ok: Option<Answer>,
    #[serde(default)]
    pub(crate) err: Option<WireError>,
}

#[cfg(test)]
mod tests {
    //! Snapshots of every message, one per variant, in
    //! `crates/perfcast-loader/tests/protocol_snapshots/` (as nushell keeps its plugin
    //! protocol's): a change to the wire format shows up as a diff to review, and the
    //! protocol string must change with it. `UPDATE_GOLDEN=1 cargo test -p perfcast-loader
    //! protocol` rewrites them.
    use super::*;
    use perfcast_abi::strategy::PcPlan;
    use perfcast_core::op::{CollectiveKind, Gemm};
    use perfcast_core::topology::{CostItem, LinkLoad};
    use perfcast_core::{
        Bandwidth, Bytes, CollectiveAlgorithm, DType, FlopCount, Seconds, TimeBound,
    };
    use std::path::PathBuf;

    fn plan() -> PcPlan {
        PcPlan {
            struct_size: 80,
            tp: 8,
            pp: 4,
            dp: 2,
            cp: 1,
            ep: 1,
            etp: 1,
            vpp: 1,
            micro_batch: 1,
            global_batch: 64,
            ..PcPlan::default()
        }
    }

    /// The plan a strategy with one declared axis of degree 4 sees.
    fn plan_axes() -> PcPlanAxes {
        let mut p = PcPlanAxes {
            plan: plan(),
            batch_split: 4,
            n_axes: 1,
            ..PcPlanAxes::default()
        };
        p.plan.struct_size = 120;
        p.axes[0] = 4;
        p
    }

    fn input() -> PcScheduleInput {
        PcScheduleInput {
            struct_size: 40,
            stages: 4,
            virtual_stages: 1,
            micro_batches: 32,
            forward: 0.01,
            backward: 0.02,
            p2p: 0.0005,
        }
    }

    fn level() -> FfiLevel {
        FfiLevel {
            domain_size: 8,
            bandwidth: 4.5e11,
            latency: 2e-6,
            overhead: 1e-5,
        }
    }

    fn calls() -> Vec<(&'static str, Call)> {
        let op = ComputeOp::Gemm(Gemm::new(4096, 4096, 4096, DType::Bf16));
        let tier = WireTier {
            level: 1,
            capacity: 8.5e10,
            bandwidth: 3.35e12,
            efficiency: 0.9,
            latency: 5e-7,
        };
        vec![
            (
                "hello",
                Call::Hello {
                    protocol: "perfcast-plugin-host/3".into(),
                },
            ),
            (
                "build",
                Call::Build {
                    category: Category::ParallelStrategy,
                    name: "example/ulysses".into(),
                    params: serde_json::json!({"separate_qkv": true}),
                },
            ),
            ("efficiency", Call::Efficiency { handle: 0, op }),
            (
                "op_time",
                Call::OpTime {
                    handle: 0,
                    op,
                    tiers: vec![("hbm3".into(), tier)],
                },
            ),
            (
                "collective_time",
                Call::CollectiveTime {
                    handle: 1,
                    collective: Collective {
                        kind: CollectiveKind::AllReduce,
                        bytes: Bytes(1e8),
                        ranks: 8,
                    },
                    algorithm: CollectiveAlgorithm::Ring,
                },
            ),
            (
                "validate",
                Call::Validate {
                    handle: 2,
                    model: PcModel::default(),
                    plan: plan_axes(),
                },
            ),
            (
                "split_layer",
                Call::SplitLayer {
                    handle: 2,
                    plan: plan_axes(),
                    split: PcLayerSplit::default(),
                },
            ),
            (
                "split_state",
                Call::SplitState {
                    handle: 2,
                    plan: plan_axes(),
                    split: PcStateSplit::default(),
                },
            ),
            (
                "comms",
                Call::Comms {
                    handle: 2,
                    plan: plan_axes(),
                    dims: PcLayerDims::default(),
                    capacity: 32,
                },
            ),
            (
                "schedule_validate",
                Call::ScheduleValidate {
                    handle: 3,
                    plan: plan(),
                },
            ),
            (
                "step",
                Call::Step {
                    handle: 3,
                    input: input(),
                },
            ),
            (
                "in_flight",
                Call::InFlight {
                    handle: 3,
                    input: input(),
                    stage: 1,
                },
            ),
            (
                "peak_layers_held",
                Call::PeakLayersHeld {
                    handle: 3,
                    input: input(),
                    stage: 0,
                    chunk_layers: vec![12.0],
                },
            ),
            (
                "recompute_plan",
                Call::RecomputePlan {
                    handle: 4,
                    act: PcLayerActivations {
                        struct_size: 32,
                        reserved0: 0,
                        input: 1e8,
                        attention_core: 5e8,
                        other: 3e8,
                    },
                    layers: 12,
                    recompute_layers: 0,
                },
            ),
            (
                "topology_check",
                Call::TopologyCheck {
                    handle: 5,
                    levels: vec![level()],
                    devices: 64,
                },
            ),
            (
                "topology_links",
                Call::TopologyLinks {
                    handle: 5,
                    levels: vec![level()],
                    devices: 64,
                },
            ),
            (
                "topology_cost",
                Call::TopologyCost {
                    handle: 5,
                    levels: vec![level()],
                    devices: 64,
                },
            ),
            (
                "topology_collective",
                Call::TopologyCollective {
                    handle: 5,
                    levels: vec![level()],
                    axes: vec![FfiGroupAxis {
                        degree: 8,
                        stride: 1,
                    }],
                    devices: 64,
                    kind: 0,
                    bytes: 1e8,
                },
            ),
        ]
    }

    fn answers() -> Vec<(&'static str, Answer)> {
        vec![
            (
                "hello",
                Answer::Hello {
                    protocol: "perfcast-plugin-host/3".into(),
                    plugin: "ulysses".into(),
                    version: "0.1.0".into(),
                    abi: "rust-abi_stable 1.2".into(),
                    components: vec![WireComponent {
                        category: Category::ParallelStrategy,
                        name: "example/ulysses".into(),
                        description: "DeepSpeed-Ulysses".into(),
                        params: Some(Vec::new()),
                    }],
                },
            ),
            (
                "built_compute",
                Answer::Built {
                    handle: 0,
                    built: Built::Compute {
                        peaks: vec![(0, 2, 9.89e14)],
                        launch_overhead: 4e-6,
                        gemm_tile: 128,
                    },
                },
            ),
            (
                "built_strategy",
                Answer::Built {
                    handle: 2,
                    built: Built::Strategy {
                        axis: 0,
                        axes: vec![PcAxisDecl::from_native(&perfcast_core::parallel::AxisDecl {
                            name: "col".into(),
                            place: perfcast_core::parallel::AxisPlace::Outside(
                                perfcast_core::parallel::Axis::Tensor,
                            ),
                            divides: perfcast_core::parallel::Divides {
                                heads: true,
                                ..Default::default()
                            },
                        })
                        .unwrap()],
                    },
                },
            ),
            (
                "built_schedule",
                Answer::Built {
                    handle: 3,
                    built: Built::Schedule {
                        properties: PcScheduleProperties {
                            model_copies: 2.0,
                            overlaps_expert_comm: 1,
                            ..Default::default()
                        },
                    },
                },
            ),
            ("number", Answer::Number(0.75)),
            (
                "op_time",
                Answer::OpTime(OpTime {
                    time: Seconds(1e-3),
                    compute: Seconds(9e-4),
                    memory: Seconds(2e-4),
                    overhead: Seconds(4e-6),
                    bound: TimeBound::Compute,
                    flops: FlopCount(1.37e11),
                    device_bytes: Bytes(1e8),
                }),
            ),
            ("done", Answer::Done),
            ("layer_split", Answer::LayerSplit(PcLayerSplit::default())),
            ("state_split", Answer::StateSplit(PcStateSplit::default())),
            ("comms", Answer::Comms(vec![PcCommOp::default()])),
            (
                "schedule_result",
                Answer::ScheduleResult(PcScheduleResult::default()),
            ),
            (
                "recompute_plan",
                Answer::RecomputePlan(PcRecomputePlan::default()),
            ),
            (
                "links",
                Answer::Links(vec![LinkClass {
                    name: "leaf-spine".into(),
                    count: 64.0,
                    bandwidth: Bandwidth(5e10),
                }]),
            ),
            (
                "cost",
                Answer::Cost(Some(NetworkCost {
                    switches: 4.0,
                    switch_ports: 256.0,
                    optics: 128.0,
                    items: vec![CostItem {
                        item: "switch".into(),
                        count: 4.0,
                        unit_usd: 25000.0,
                    }],
                })),
            ),
            (
                "collective_cost",
                Answer::CollectiveCost {
                    time: 1e-3,
                    loads: vec![LinkLoad {
                        class: 0,
                        links: 8.0,
                        busy: Seconds(1e-3),
                    }],
                },
            ),
        ]
    }

    fn snapshot(file: &str, items: Vec<(&'static str, String)>) {
        let text: String = items.iter().map(|(n, j)| format!("{n}: {j}\n")).collect();
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/protocol_snapshots")
            .join(file);
        if let Err(e) = perfcast_testkit::golden::compare(&path, &text) {
            panic!("{e}\n(UPDATE_GOLDEN=1 cargo test -p perfcast-loader protocol)");
        }
    }

    #[test]
    fn protocol_messages_match_their_snapshots_and_round_trip() {
        let calls: Vec<(&str, String)> = calls()
            .into_iter()
            .map(|(n, c)| {
                let j = serde_json::to_string(&Request { id: 7, call: c }).unwrap();
                let back: Request = serde_json::from_str(&j).unwrap();
                assert_eq!(serde_json::to_string(&back).unwrap(), j, "{n}");
                (n, j)
            })
            .collect();
        snapshot("calls.txt", calls);
        let answers: Vec<(&str, String)> = answers()
            .into_iter()
            .map(|(n, a)| {
                let r = Response {
                    id: 7,
                    ok: Some(a),
                    err: None,
                };
                let j = serde_json::to_string(&r).unwrap();
                let back: Response = serde_json::from_str(&j).unwrap();
                assert_eq!(serde_json::to_string(&back).unwrap(), j, "{n}");
                (n, j)
            })
            .collect();
        let mut answers = answers;
        let err = Response {
            id: 7,
            ok: None,
            err: Some(WireError {
                code: 1,
                path: "separate_qkv".into(),
                message: "expected a boolean".into(),
            }),
        };
        answers.push(("error", serde_json::to_string(&err).unwrap()));
        snapshot("answers.txt", answers);
    }
}
