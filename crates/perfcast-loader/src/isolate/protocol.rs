//! The messages of the plugin-host protocol (`perfcast-plugin-host/1`, see the module
//! above): one call host to child, one answer child to host, matched by id.

use perfcast_abi::c::{PcLayerActivations, PcRecomputePlan, PcScheduleInput, PcScheduleResult};
use perfcast_abi::rust_abi::{FfiGroupAxis, FfiLevel};
use perfcast_abi::strategy::{PcCommOp, PcLayerDims, PcLayerSplit, PcModel, PcPlan, PcStateSplit};
use perfcast_abi::TierProps;
use perfcast_core::topology::{LinkClass, LinkLoad, NetworkCost};
use perfcast_core::{Category, Collective, ComputeOp, OpTime, ParamSpec};
use serde::{Deserialize, Serialize};

/// One call, host to child.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Call {
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
        plan: PcPlan,
    },
    SplitLayer {
        handle: usize,
        plan: PcPlan,
        split: PcLayerSplit,
    },
    SplitState {
        handle: usize,
        plan: PcPlan,
        split: PcStateSplit,
    },
    Comms {
        handle: usize,
        plan: PcPlan,
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
pub(super) struct WireTier {
    pub(super) level: u32,
    pub(super) capacity: f64,
    pub(super) bandwidth: f64,
    pub(super) efficiency: f64,
    pub(super) latency: f64,
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
pub(super) struct WireComponent {
    pub(super) category: Category,
    pub(super) name: String,
    pub(super) description: String,
    pub(super) params: Option<Vec<ParamSpec>>,
}

/// What a build returns: the component's constant properties.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Built {
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
    /// A parallel strategy: its axis code.
    Strategy {
        axis: u32,
    },
    Schedule,
    Recompute,
    Topology,
}

/// One answer, child to host.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Answer {
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
pub(super) struct WireError {
    pub(super) code: i32,
    pub(super) path: String,
    pub(super) message: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Request {
    pub(super) id: u64,
    pub(super) call: Call,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Response {
    pub(super) id: u64,
    #[serde(default)]
    pub(super) ok: Option<Answer>,
    #[serde(default)]
    pub(super) err: Option<WireError>,
}
