//! The parameters each built-in topology declares (`perfcast plugins --describe KIND`,
//! `docs/reference.md`), checked against what the builders accept by
//! `plugins/builtins/tests/declared_params.rs`.

use perfcast_core::{ParamSpec, ParamType};

const COLLECTIVES: ParamSpec = ParamSpec::derived(
    "collectives",
    ParamType::Table,
    "",
    "NCCL's tuning constants (algo.rs CollectiveParams::default)",
    "see algo.rs",
    "the collective algorithm model: algorithm, protocol, base and per-hop latencies per \
     protocol, protocol bandwidths, tree/NVLS/SHARP/network efficiencies",
    "NCCL src/graph/tuning.cc (baseLat, hwLat); fitted efficiencies on nccl-tests sweeps \
     (configs/validation/collectives.toml)",
);

const PRICES: ParamSpec = ParamSpec::derived(
    "prices",
    ParamType::Table,
    "USD",
    "switch port 400, optic 600, fibre 50, copper 100, NVLink switch tray 50000",
    ">= 0 each",
    "unit prices of the network cost report (switch_port_usd, optic_usd, fiber_usd, \
     copper_usd, nvlink_switch_tray_usd)",
    "modelling default: order-of-magnitude list prices, not quotes",
);

/// `hierarchical`: none.
pub static HIERARCHICAL: &[ParamSpec] = &[];

/// `fat-tree`, `rail-optimized`, `rail-only`, `nvl72`.
pub static SWITCHED: &[ParamSpec] = &[
    ParamSpec::with_default(
        "radix",
        ParamType::Integer,
        "ports",
        "64",
        ">= 2",
        "ports per switch of the scale-out Clos (per rail for rail-only)",
        "NVIDIA Quantum-2 QM9700: 64 NDR ports",
    ),
    ParamSpec::derived(
        "tiers",
        ParamType::Integer,
        "",
        "the fewest tiers that reach every endpoint",
        ">= 1",
        "switch tiers of the Clos",
        "folded-Clos sizing (radix^t / 2^(t-1) endpoints)",
    ),
    ParamSpec::with_default(
        "oversubscription",
        ParamType::List,
        "",
        "[]",
        ">= 1 each",
        "down:up port ratio of each tier below the top, leaf first (missing tiers: 1)",
        "modelling input (1 = full bisection)",
    ),
    ParamSpec::derived(
        "nvls",
        ParamType::Bool,
        "",
        "true for NVSwitch 3 and later scale-up domains",
        "true, false",
        "the scale-up switches reduce (NVLink SHARP)",
        "NVIDIA NVLink/NVSwitch documentation (HGX H100/H200/B200, NVL72)",
    ),
    ParamSpec::with_default(
        "sharp",
        ParamType::Bool,
        "",
        "false",
        "true, false",
        "the scale-out switches reduce (InfiniBand SHARP)",
        "NVIDIA Quantum-2 SHARPv3",
    ),
    ParamSpec::with_default(
        "scale_up",
        ParamType::String,
        "",
        "\"switch\"",
        "switch, mesh",
        "how the scale-up domain joins its devices (NVSwitch, or point-to-point as MI300X)",
        "NVIDIA HGX; AMD MI300X Infinity Fabric (7 links per GPU)",
    ),
    ParamSpec::derived(
        "cross_rail",
        ParamType::String,
        "",
        "nvlink for rail-optimized and nvl72",
        "nvlink, spine",
        "how traffic between rails travels (NCCL PXN forwarding through NVLink, or the spine)",
        "NCCL 2.12 release notes (PXN on by default)",
    ),
    ParamSpec::derived(
        "forwarding",
        ParamType::Bool,
        "",
        "true for rail-only",
        "true, false",
        "rail-only: the scale-up domain forwards traffic between rails",
        "Wang et al. 2023, arXiv 2307.12169",
    ),
    ParamSpec::derived(
        "rack",
        ParamType::Integer,
        "devices",
        "system.network[0]'s domain size",
        ">= 1",
        "nvl72: GPUs per rack (must equal the scale-up domain)",
        "NVIDIA GB200 NVL72 datasheet: 72 GPUs",
    ),
    COLLECTIVES,
    PRICES,
];

/// `torus`.
pub static TORUS: &[ParamSpec] = &[
    ParamSpec::required(
        "dims",
        ParamType::List,
        "nodes",
        ">= 2 each",
        "torus nodes along each dimension, x first (product x domain size = devices)",
        "the system's design",
    ),
    ParamSpec::required(
        "link_bandwidth_gbs",
        ParamType::Float,
        "GB/s",
        "1e-2 to 1e6",
        "bandwidth of one link, one direction",
        "the link's datasheet (e.g. TPU v4 ICI: 50 GB/s per direction per link)",
    ),
    ParamSpec::with_default(
        "efficiency",
        ParamType::Float,
        "",
        "0.9",
        "(0, 1]",
        "achievable fraction of the link rate after framing and protocol",
        "modelling default, as the torus interconnect level",
    ),
    ParamSpec::with_default(
        "hop_latency_us",
        ParamType::Float,
        "us",
        "1.0",
        ">= 0",
        "latency of one hop (link and router)",
        "modelling default (NCCL NVLink ring Simple step 3.4 us with software)",
    ),
    COLLECTIVES,
    PRICES,
];

/// `dragonfly`.
pub static DRAGONFLY: &[ParamSpec] = &[
    ParamSpec::required(
        "nics_per_router",
        ParamType::Integer,
        "",
        ">= 1",
        "NICs per router (p)",
        "Kim et al. 2008, Technology-Driven, Highly-Scalable Dragonfly Topology",
    ),
    ParamSpec::required(
        "routers_per_group",
        ParamType::Integer,
        "",
        ">= 1",
        "routers per group (a)",
        "Kim et al. 2008 (balanced: a = 2p = 2h)",
    ),
    ParamSpec::required(
        "global_links_per_router",
        ParamType::Integer,
        "",
        ">= 1",
        "global links per router (h)",
        "Kim et al. 2008 (balanced: a = 2p = 2h)",
    ),
    ParamSpec::derived(
        "local_bandwidth_gbs",
        ParamType::Float,
        "GB/s",
        "the NIC level's bandwidth",
        "> 0",
        "local (intra-group) link bandwidth, one direction",
        "the system's design",
    ),
    ParamSpec::derived(
        "global_bandwidth_gbs",
        ParamType::Float,
        "GB/s",
        "the NIC level's bandwidth",
        "> 0",
        "global (inter-group) link bandwidth, one direction",
        "the system's design",
    ),
    ParamSpec::with_default(
        "routing",
        ParamType::String,
        "",
        "\"adaptive\"",
        "minimal, valiant, adaptive",
        "routing: direct links, a random intermediate (Valiant), or the better of both (UGAL)",
        "Kim et al. 2008",
    ),
    ParamSpec::with_default(
        "nvls",
        ParamType::Bool,
        "",
        "false",
        "true, false",
        "the scale-up switches reduce (NVLink SHARP)",
        "NVIDIA NVLink/NVSwitch documentation",
    ),
    COLLECTIVES,
    PRICES,
];
