//! Built-in interconnect levels.
//!
//! All use the alpha-beta collective model of `perfcast_core::hardware::collective_time`
//! (ring or tree, whichever is faster for all-reduce as NCCL's tuner picks) plus a fixed
//! per-collective software cost (kernel launch and synchronisation):
//!
//! `t = base_latency + steps · latency + traffic_factor · S / (bandwidth · efficiency)`.
//!
//! - `nvlink`: an NVLink/NVSwitch domain. Bandwidth is quoted as vendors do, per GPU with both
//!   directions summed (A100 600 GB/s, H100 900 GB/s, B200 1800 GB/s); one direction is half.
//! - `infiniband` / `roce`: a switched scale-out fabric, NIC line rate per GPU in Gb/s
//!   (HDR 200, NDR 400, XDR 800); `oversubscription` divides it for tapered fabrics.
//! - `torus`: a k-dimensional torus (TPU ICI style): each device drives 2 links per dimension,
//!   so a bidirectional-ring collective uses 2·k links at once (Google TPU v4 paper, Jouppi et
//!   al. 2023, §2).

use perfcast_core::hardware::{collective_time, CollectiveAlgorithm};
use perfcast_core::op::Collective;
use perfcast_core::params::{
    self, fraction, non_negative, physical, BANDWIDTH_GBPS, BANDWIDTH_GBS,
};
use perfcast_core::registry::Component;
use perfcast_core::{Bandwidth, Interconnect, ParamSpec, ParamType, PluginError, Seconds};
use serde::Deserialize;
use std::sync::Arc;

/// An interconnect level described by numbers.
#[derive(Debug, Clone)]
pub struct Link {
    kind: &'static str,
    domain: u32,
    /// Achievable bandwidth per device, one direction.
    bandwidth: Bandwidth,
    latency: Seconds,
    base_latency: Seconds,
    algorithm: CollectiveAlgorithm,
}

impl Link {
    /// A level of `kind` joining `domain` devices: achievable `bandwidth` per device in one
    /// direction, `latency` per algorithm step, a fixed `base_latency` per collective, and the
    /// `algorithm` used when a caller asks for [`CollectiveAlgorithm::Auto`]. The values are
    /// taken as given: plugins check their parameters before building one.
    pub fn new(
        kind: &'static str,
        domain: u32,
        bandwidth: Bandwidth,
        latency: Seconds,
        base_latency: Seconds,
        algorithm: CollectiveAlgorithm,
    ) -> Link {
        Link {
            kind,
            domain,
            bandwidth,
            latency,
            base_latency,
            algorithm,
        }
    }
}

impl Interconnect for Link {
    fn kind(&self) -> &str {
        self.kind
    }
    fn domain_size(&self) -> u32 {
        self.domain
    }
    fn bandwidth(&self) -> Bandwidth {
        self.bandwidth
    }
    fn latency(&self) -> Seconds {
        self.latency
    }
    fn collective_overhead(&self) -> Seconds {
        self.base_latency
    }
    fn collective_time(&self, c: &Collective, algorithm: CollectiveAlgorithm) -> Seconds {
        if c.ranks <= 1 {
            return Seconds::ZERO;
        }
        let alg = if algorithm == CollectiveAlgorithm::Auto {
            self.algorithm
        } else {
            algorithm
        };
        self.base_latency + collective_time(c, self.bandwidth, self.latency, alg)
    }
}

/// Parameters of `nvlink`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvlinkParams {
    /// Per-GPU bandwidth, GB/s, both directions summed (as datasheets quote).
    pub bandwidth_gbs_bidir: f64,
    /// GPUs in one NVLink domain (8 for DGX/HGX, 72 for GB200 NVL72).
    pub domain_size: u32,
    /// Achievable fraction of the per-direction bandwidth (NCCL bus bandwidth / line rate).
    #[serde(default = "d_nvlink_eff")]
    pub efficiency: f64,
    /// Latency per algorithm step, microseconds.
    #[serde(default = "d_nvlink_lat")]
    pub latency_us: f64,
    /// Fixed cost per collective (launch, synchronisation), microseconds.
    #[serde(default = "d_base")]
    pub base_latency_us: f64,
    #[serde(default)]
    pub algorithm: CollectiveAlgorithm,
}

// nccl-tests all_reduce_perf on 8x A100 NVSwitch reports ~230 GB/s bus bandwidth for large
// messages against 300 GB/s per direction (NVIDIA, "Doubling all2all performance with NCCL
// 2.12" and DGX A100 user guide figures): ~0.77-0.8.
fn d_nvlink_eff() -> f64 {
    0.8
}
// Per-step and per-collective latencies are modelling defaults chosen so that a small-message
// all-reduce over 8 NVSwitch-connected GPUs takes ~10-15 us, the range nccl-tests
// all_reduce_perf reports for 8-byte messages on DGX A100/H100 (tree: 5 + 2*3*1 = 11 us).
fn d_nvlink_lat() -> f64 {
    1.0
}
fn d_base() -> f64 {
    5.0
}

/// Parameters of `infiniband` and `roce`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricParams {
    /// NIC line rate per GPU, Gb/s (HDR 200, NDR 400, XDR 800).
    pub bandwidth_gbps: f64,
    /// Achievable fraction of the line rate (protocol and header overheads).
    #[serde(default = "d_fabric_eff")]
    pub efficiency: f64,
    /// Latency per algorithm step, microseconds (switch hops + NIC + software).
    #[serde(default = "d_fabric_lat")]
    pub latency_us: f64,
    #[serde(default = "d_base")]
    pub base_latency_us: f64,
    /// Bandwidth taper of the fabric (1 = full bisection, 2 = 2:1 oversubscribed).
    #[serde(default = "d_one")]
    pub oversubscription: f64,
    /// Devices the fabric can reach (default: unlimited).
    #[serde(default)]
    pub domain_size: Option<u32>,
    #[serde(default)]
    pub algorithm: CollectiveAlgorithm,
}

// InfiniBand HDR/NDR deliver ~90-95% of line rate in ib_write_bw and NCCL inter-node bus
// bandwidth (NVIDIA "InfiniBand performance" / nccl-tests multi-node figures).
fn d_fabric_eff() -> f64 {
    0.9
}
// Modelling default: one inter-node step is a NIC + switch traversal (~1-2 us on InfiniBand,
// NVIDIA ConnectX/Quantum figures) plus NCCL's proxy and protocol overhead, ~5 us in total.
fn d_fabric_lat() -> f64 {
    5.0
}
fn d_one() -> f64 {
    1.0
}

/// Parameters of `torus`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TorusParams {
    /// Size of each dimension (e.g. [4, 4, 4]).
    pub dims: Vec<u32>,
    /// Bandwidth of one link, one direction, GB/s.
    pub link_bandwidth_gbs: f64,
    #[serde(default = "d_fabric_eff")]
    pub efficiency: f64,
    /// Latency per hop, microseconds.
    #[serde(default = "d_nvlink_lat")]
    pub latency_us: f64,
    #[serde(default = "d_base")]
    pub base_latency_us: f64,
}

fn build_nvlink(v: &serde_json::Value) -> Result<Component, PluginError> {
    let p: NvlinkParams = params::parse(v)?;
    if p.domain_size == 0 {
        return Err(PluginError::Params {
            path: "domain_size".into(),
            message: "must be >= 1".into(),
        });
    }
    let bw = physical("bandwidth_gbs_bidir", p.bandwidth_gbs_bidir, BANDWIDTH_GBS)? / 2.0;
    Ok(Component::Interconnect(Arc::new(Link {
        kind: "nvlink",
        domain: p.domain_size,
        bandwidth: Bandwidth::from_gbs(bw * fraction("efficiency", p.efficiency)?),
        latency: Seconds::from_micros(non_negative("latency_us", p.latency_us)?),
        base_latency: Seconds::from_micros(non_negative("base_latency_us", p.base_latency_us)?),
        algorithm: p.algorithm,
    })))
}

fn fabric(kind: &'static str, v: &serde_json::Value) -> Result<Component, PluginError> {
    let p: FabricParams = params::parse(v)?;
    let taper = p.oversubscription;
    if !(taper.is_finite() && taper >= 1.0) {
        return Err(PluginError::Params {
            path: "oversubscription".into(),
            message: format!("must be >= 1, got {taper}"),
        });
    }
    Ok(Component::Interconnect(Arc::new(Link {
        kind,
        domain: p.domain_size.unwrap_or(u32::MAX).max(1),
        bandwidth: Bandwidth::from_gbps(physical(
            "bandwidth_gbps",
            p.bandwidth_gbps,
            BANDWIDTH_GBPS,
        )?) * (fraction("efficiency", p.efficiency)? / taper),
        latency: Seconds::from_micros(non_negative("latency_us", p.latency_us)?),
        base_latency: Seconds::from_micros(non_negative("base_latency_us", p.base_latency_us)?),
        algorithm: p.algorithm,
    })))
}

fn build_ib(v: &serde_json::Value) -> Result<Component, PluginError> {
    fabric("infiniband", v)
}
fn build_roce(v: &serde_json::Value) -> Result<Component, PluginError> {
    fabric("roce", v)
}

fn build_torus(v: &serde_json::Value) -> Result<Component, PluginError> {
    let p: TorusParams = params::parse(v)?;
    if p.dims.is_empty() || p.dims.contains(&0) {
        return Err(PluginError::Params {
            path: "dims".into(),
            message: format!("needs one or more sizes >= 1, got {:?}", p.dims),
        });
    }
    let domain = p
        .dims
        .iter()
        .try_fold(1u32, |a, &d| a.checked_mul(d))
        .ok_or_else(|| PluginError::Params {
            path: "dims".into(),
            message: "product overflows".into(),
        })?;
    // Dimensions of size > 1 each contribute two links (both ring directions).
    let links = 2.0 * p.dims.iter().filter(|&&d| d > 1).count().max(1) as f64;
    Ok(Component::Interconnect(Arc::new(Link {
        kind: "torus",
        domain,
        bandwidth: Bandwidth::from_gbs(
            physical("link_bandwidth_gbs", p.link_bandwidth_gbs, BANDWIDTH_GBS)? * links,
        ) * fraction("efficiency", p.efficiency)?,
        latency: Seconds::from_micros(non_negative("latency_us", p.latency_us)?),
        base_latency: Seconds::from_micros(non_negative("base_latency_us", p.base_latency_us)?),
        algorithm: CollectiveAlgorithm::Ring,
    })))
}

const ALGORITHM: ParamSpec = ParamSpec::with_default(
    "algorithm",
    ParamType::String,
    "",
    "\"auto\"",
    "one of: auto, ring, tree",
    "collective algorithm when the caller asks for auto (auto: whichever of ring and tree is faster, as NCCL's tuner picks)",
    "NCCL",
);
const BASE_LATENCY: ParamSpec = ParamSpec::with_default(
    "base_latency_us",
    ParamType::Float,
    "us",
    "5.0",
    ">= 0",
    "fixed cost per collective (launch, synchronisation)",
    "modelling default: an 8-GPU small-message all-reduce of ~10-15 us (nccl-tests all_reduce_perf, DGX A100/H100)",
);

/// The parameters of `nvlink`.
pub static NVLINK_PARAMS: &[ParamSpec] = &[
    ParamSpec::required(
        "bandwidth_gbs_bidir",
        ParamType::Float,
        "GB/s",
        "1e-2 to 1e6",
        "per-GPU bandwidth, both directions summed (as datasheets quote)",
        "the device's datasheet (A100 600, H100 900, B200 1800)",
    ),
    ParamSpec::required(
        "domain_size",
        ParamType::Integer,
        "devices",
        ">= 1",
        "GPUs in one NVLink domain (8 for DGX/HGX, 72 for GB200 NVL72)",
        "the system's datasheet",
    ),
    ParamSpec::with_default(
        "efficiency",
        ParamType::Float,
        "",
        "0.8",
        "(0, 1]",
        "achievable fraction of the per-direction bandwidth (NCCL bus bandwidth / line rate)",
        "nccl-tests on 8x A100 NVSwitch: ~230 of 300 GB/s per direction",
    ),
    ParamSpec::with_default(
        "latency_us",
        ParamType::Float,
        "us",
        "1.0",
        ">= 0",
        "latency per algorithm step",
        "modelling default (see base_latency_us)",
    ),
    BASE_LATENCY,
    ALGORITHM,
];

/// The parameters of `infiniband` and `roce`.
pub static FABRIC_PARAMS: &[ParamSpec] = &[
    ParamSpec::required(
        "bandwidth_gbps",
        ParamType::Float,
        "Gb/s",
        "1e-1 to 1e7",
        "NIC line rate per GPU (HDR 200, NDR 400, XDR 800)",
        "the NIC's datasheet",
    ),
    ParamSpec::with_default(
        "efficiency",
        ParamType::Float,
        "",
        "0.9",
        "(0, 1]",
        "achievable fraction of the line rate (protocol and header overheads)",
        "InfiniBand HDR/NDR ib_write_bw and nccl-tests multi-node: ~90-95% of line rate",
    ),
    ParamSpec::with_default(
        "latency_us",
        ParamType::Float,
        "us",
        "5.0",
        ">= 0",
        "latency per algorithm step (switch hops + NIC + software)",
        "modelling default: ~1-2 us NIC + switch (ConnectX/Quantum) plus NCCL proxy overhead",
    ),
    BASE_LATENCY,
    ParamSpec::with_default(
        "oversubscription",
        ParamType::Float,
        "",
        "1.0",
        ">= 1",
        "bandwidth taper of the fabric (1 = full bisection, 2 = 2:1 oversubscribed)",
        "the fabric's design",
    ),
    ParamSpec::derived(
        "domain_size",
        ParamType::Integer,
        "devices",
        "unlimited",
        ">= 1",
        "devices the fabric can reach",
        "the fabric's design",
    ),
    ALGORITHM,
];

/// The parameters of `torus`.
pub static TORUS_PARAMS: &[ParamSpec] = &[
    ParamSpec::required(
        "dims",
        ParamType::List,
        "devices",
        "sizes >= 1, at least one",
        "size of each dimension (e.g. [4, 4, 4])",
        "the system's design",
    ),
    ParamSpec::required(
        "link_bandwidth_gbs",
        ParamType::Float,
        "GB/s",
        "1e-2 to 1e6",
        "bandwidth of one link, one direction",
        "the device's datasheet",
    ),
    ParamSpec::with_default(
        "efficiency",
        ParamType::Float,
        "",
        "0.9",
        "(0, 1]",
        "achievable fraction of the link bandwidth",
        "as infiniband's default",
    ),
    ParamSpec::with_default(
        "latency_us",
        ParamType::Float,
        "us",
        "1.0",
        ">= 0",
        "latency per hop",
        "modelling default (as nvlink's)",
    ),
    BASE_LATENCY,
];

perfcast_core::builtin!(
    Interconnect,
    "nvlink",
    "NVLink/NVSwitch scale-up domain",
    build_nvlink,
    params = NVLINK_PARAMS
);
perfcast_core::builtin!(
    Interconnect,
    "infiniband",
    "InfiniBand scale-out fabric",
    build_ib,
    params = FABRIC_PARAMS
);
perfcast_core::builtin!(
    Interconnect,
    "roce",
    "RoCE (Ethernet RDMA) scale-out fabric",
    build_roce,
    params = FABRIC_PARAMS
);
perfcast_core::builtin!(
    Interconnect,
    "torus",
    "k-dimensional torus of point-to-point links",
    build_torus,
    params = TORUS_PARAMS
);

// `register(&mut Registry)`: this crate's built-ins, composed by `perfcast-builtins`.
perfcast_core::register_fn!();

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::op::CollectiveKind;
    use perfcast_core::Bytes;
    use serde_json::json;

    fn ic(c: Component) -> Arc<dyn Interconnect> {
        match c {
            Component::Interconnect(i) => i,
            _ => panic!("not an interconnect"),
        }
    }

    #[test]
    fn nvlink_large_all_reduce_is_bandwidth_bound() {
        // DGX A100: 600 GB/s bidirectional per GPU (NVIDIA A100 datasheet).
        let n = ic(build_nvlink(&json!({"bandwidth_gbs_bidir": 600.0, "domain_size": 8})).unwrap());
        assert_eq!(n.domain_size(), 8);
        let c = Collective {
            kind: CollectiveKind::AllReduce,
            bytes: Bytes(1e9),
            ranks: 8,
        };
        let t = n.collective_time(&c, CollectiveAlgorithm::Auto).0;
        let beta = 1.75 * 1e9 / (300e9 * 0.8);
        assert!(t > beta && t < beta * 1.01, "{t} vs {beta}");
    }

    #[test]
    fn fabric_units_and_taper() {
        let f = ic(build_ib(
            &json!({"bandwidth_gbps": 200.0, "efficiency": 1.0, "oversubscription": 2.0}),
        )
        .unwrap());
        assert!((f.bandwidth().0 - 12.5e9).abs() < 1.0);
        assert_eq!(f.domain_size(), u32::MAX);
    }

    #[test]
    fn torus_uses_two_links_per_dimension() {
        let t = ic(build_torus(
            &json!({"dims": [4, 4, 4], "link_bandwidth_gbs": 50.0, "efficiency": 1.0}),
        )
        .unwrap());
        assert_eq!(t.domain_size(), 64);
        assert!((t.bandwidth().0 - 300e9).abs() < 1.0);
    }

    type Factory = fn(&serde_json::Value) -> Result<Component, PluginError>;

    #[test]
    fn bad_params() {
        let cases: [(Factory, serde_json::Value, &str); 4] = [
            (
                build_nvlink,
                json!({"bandwidth_gbs_bidir": 600.0, "domain_size": 0}),
                "domain_size",
            ),
            (
                build_ib,
                json!({"bandwidth_gbps": 200.0, "oversubscription": 0.5}),
                "oversubscription",
            ),
            (
                build_torus,
                json!({"dims": [4, 0], "link_bandwidth_gbs": 1.0}),
                "dims",
            ),
            (
                build_roce,
                json!({"bandwidth_gbps": -1.0}),
                "bandwidth_gbps",
            ),
        ];
        for (f, v, key) in cases {
            let e = f(&v).err().unwrap().to_string();
            assert!(e.contains(key), "{e}");
        }
    }
}
