//! Technology-scaling plugins: hardware derived from a process node and from memory and
//! network generations, for design-space exploration (seed-paper digest §3.5: the paper's
//! 12 nm -> 1 nm study separates logic, memory and network scaling).
//!
//! | kind | category | derives |
//! |---|---|---|
//! | `tech/node-scaled-gpu` | compute unit | matrix/vector peaks from logic density, energy per op and supply limits under the reference die's area and power ([`node`]) |
//! | `tech/node-sram` | memory tier | on-chip SRAM capacity from SRAM density under the reference SRAM area |
//! | `tech/dram-generation` | memory tier | device memory from a DRAM generation and a stack count ([`generations`]) |
//! | `tech/link-generation` | interconnect | a scale-up or scale-out level from a link generation |
//!
//! The GPU it derives is the built-in `gpu` model ([`perfcast_plugin_gpu::Gpu`]) with derived
//! peaks, so the GEMM efficiency terms (wave and tile quantisation, reduction depth) are the
//! same as for shipped devices.

pub mod declared;
pub mod generations;
pub mod node;

use generations::{dram_generation, link_generation, LinkFamily};
use node::{builtin_node, operating_point, NodeScaling, OperatingLimits, OperatingPoint};
use perfcast_core::hardware::CollectiveAlgorithm;
use perfcast_core::op::ComputeOp;
use perfcast_core::params::{self, fraction, non_negative, positive};
use perfcast_core::registry::Component;
use perfcast_core::{
    Bandwidth, Bytes, ComputeUnit, DType, Engine, FlopRate, PluginError, Seconds, TierLevel,
};
use perfcast_plugin_gpu::{Gpu, GpuParams};
use perfcast_plugin_memory::Tier;
use perfcast_plugin_network::Link;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

pub use node::{Limit, ReferenceGpu};

/// Parameters of `tech/node-scaled-gpu`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGpuParams {
    #[serde(default)]
    pub name: String,
    /// A built-in node (12, 7, 5, 3, 2, 1); ignored when `node` is given.
    #[serde(default)]
    pub node_nm: Option<f64>,
    /// An explicit node row (relative to the reference node).
    #[serde(default)]
    pub node: Option<NodeScaling>,
    /// The device the scaling starts from (default: A100-SXM4 on N7).
    #[serde(default)]
    pub reference: ReferenceGpu,
    #[serde(default)]
    pub limits: OperatingLimits,
    /// Matrix formats the node adds beyond the reference's, as multiples of the derived bf16
    /// peak (e.g. `{ fp8 = 2.0, fp4 = 4.0 }` for a Hopper/Blackwell-class tensor core).
    #[serde(default)]
    pub extra_formats: BTreeMap<DType, f64>,
    /// Passed to the `gpu` model (its documented defaults otherwise).
    #[serde(default)]
    pub matmul_efficiency: Option<f64>,
    #[serde(default)]
    pub vector_efficiency: Option<f64>,
    #[serde(default)]
    pub launch_overhead_us: Option<f64>,
}

impl NodeGpuParams {
    /// The node row in effect.
    pub fn node_row(&self) -> Result<NodeScaling, PluginError> {
        match (&self.node, self.node_nm) {
            (Some(n), _) => Ok(*n),
            (None, Some(nm)) => builtin_node(nm).ok_or_else(|| PluginError::Params {
                path: "node_nm".into(),
                message: format!(
                    "no built-in node {nm} nm; built-in: {} (or give an explicit `node` table)",
                    node::BUILTIN_NODES
                        .iter()
                        .map(|n| n.node_nm.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
            (None, None) => Err(PluginError::Params {
                path: "node_nm".into(),
                message: "set `node_nm` (a built-in node) or an explicit `node` table".into(),
            }),
        }
    }
}

/// Derive the GPU of `p`: the built-in `gpu` model with scaled peaks, and the operating point.
pub fn derive_gpu(p: &NodeGpuParams) -> Result<(Gpu, OperatingPoint), PluginError> {
    let row = p.node_row()?;
    let point = operating_point(&row, &p.limits)?;
    let r = &p.reference;
    positive("reference.clock_ghz", r.clock_ghz)?;
    let bf16 = r
        .matrix_tflops
        .get(&DType::Bf16)
        .copied()
        .ok_or_else(|| PluginError::Params {
            path: "reference.matrix_tflops.bf16".into(),
            message: "the reference needs a bf16 peak (extra formats are multiples of it)".into(),
        })?;
    let scale = point.throughput;
    let mut matrix: BTreeMap<DType, f64> = r
        .matrix_tflops
        .iter()
        .map(|(d, v)| (*d, v * scale))
        .collect();
    for (d, k) in &p.extra_formats {
        positive(&format!("extra_formats.{d}"), *k)?;
        matrix.insert(*d, bf16 * scale * k);
    }
    let vector = r
        .vector_tflops
        .iter()
        .map(|(d, v)| (*d, v * scale))
        .collect();
    let name = if p.name.is_empty() {
        format!("{} scaled to {} nm", r.name, row.node_nm)
    } else {
        p.name.clone()
    };
    // The gpu plugin's documented defaults for everything the node does not set.
    let mut gp: GpuParams = params::parse(&serde_json::json!({
        "matrix_tflops": {"bf16": 1.0}, "vector_tflops": {"fp32": 1.0}, "sm_count": 1
    }))?;
    gp.name = name;
    gp.matrix_tflops = matrix;
    gp.vector_tflops = vector;
    gp.sm_count = ((r.sm_count as f64 * point.mac_units).round() as u32).max(1);
    gp.clock_ghz = r.clock_ghz * point.clock;
    if let Some(e) = p.matmul_efficiency {
        gp.matmul_efficiency = e;
    }
    if let Some(e) = p.vector_efficiency {
        gp.vector_efficiency = e;
    }
    if let Some(l) = p.launch_overhead_us {
        gp.launch_overhead_us = l;
    }
    Ok((Gpu::new(gp)?, point))
}

/// The compute unit of `tech/node-scaled-gpu`: the built-in GPU model with the derived
/// peaks, and the operating point it was derived at (reported by [`ComputeUnit::derived`]).
struct NodeGpu {
    gpu: Gpu,
    point: OperatingPoint,
}

impl ComputeUnit for NodeGpu {
    fn kind(&self) -> &str {
        self.gpu.kind()
    }
    fn peak(&self, engine: Engine, dtype: DType) -> Option<FlopRate> {
        self.gpu.peak(engine, dtype)
    }
    fn efficiency(&self, op: &ComputeOp) -> f64 {
        self.gpu.efficiency(op)
    }
    fn launch_overhead(&self) -> Seconds {
        self.gpu.launch_overhead()
    }
    fn gemm_tile(&self) -> u64 {
        self.gpu.gemm_tile()
    }
    /// The operating point: `node_nm`, `mac_units`, `voltage` (V), `clock` and `throughput`
    /// (relative to the reference), `clock_ghz` (the derived clock), `active` (fraction of
    /// MACs powered), `power` (relative to the budget) and `limit` (which limit set it, in
    /// words).
    fn derived(&self) -> serde_json::Value {
        let p = &self.point;
        serde_json::json!({
            "node_nm": p.node_nm,
            "mac_units": p.mac_units,
            "voltage": p.voltage,
            "clock": p.clock,
            "clock_ghz": self.gpu.params.clock_ghz,
            "active": p.active,
            "power": p.power,
            "throughput": p.throughput,
            "limit": p.limit.name(),
        })
    }
}

fn build_node_gpu(v: &serde_json::Value) -> Result<Component, PluginError> {
    let p: NodeGpuParams = params::parse(v)?;
    let (gpu, point) = derive_gpu(&p)?;
    Ok(Component::ComputeUnit(Arc::new(NodeGpu { gpu, point })))
}

/// Parameters of `tech/dram-generation`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DramGenParams {
    /// A generation of [`generations::DRAM_GENERATIONS`] (HBM2 .. HBM4e, GDDR7, LPDDR5X).
    pub generation: String,
    /// Stacks (HBM), chips (GDDR) or packages (LPDDR) on the package.
    pub units: u32,
    /// Override of the per-unit bandwidth, GB/s (e.g. a slower speed bin).
    #[serde(default)]
    pub unit_bandwidth_gbs: Option<f64>,
    /// Override of the per-unit capacity, GB.
    #[serde(default)]
    pub unit_capacity_gb: Option<f64>,
    /// Default: the `hbm` plugin's (STREAM-like kernels reach ~85-92 % of the datasheet peak;
    /// Jia et al. 2021; Luo et al. 2024).
    #[serde(default = "perfcast_plugin_memory::default_dram_efficiency")]
    pub efficiency: f64,
    /// Default: the `hbm` plugin's.
    #[serde(default = "perfcast_plugin_memory::default_dram_latency_ns")]
    pub latency_ns: f64,
}

/// Build the device-memory tier of `p`.
pub fn dram_tier(p: &DramGenParams) -> Result<Tier, PluginError> {
    let g = dram_generation(&p.generation)?;
    if p.units == 0 {
        return Err(PluginError::Params {
            path: "units".into(),
            message: "must be >= 1".into(),
        });
    }
    let bw = positive(
        "unit_bandwidth_gbs",
        p.unit_bandwidth_gbs.unwrap_or(g.unit_bandwidth_gbs),
    )?;
    let cap = positive(
        "unit_capacity_gb",
        p.unit_capacity_gb.unwrap_or(g.unit_capacity_gb),
    )?;
    Ok(Tier::new(
        "tech/dram-generation",
        TierLevel::Device,
        Bytes::from_gb(cap * p.units as f64),
        Bandwidth::from_gbs(bw * p.units as f64),
        fraction("efficiency", p.efficiency)?,
        Seconds::from_nanos(non_negative("latency_ns", p.latency_ns)?),
        format!("{} x {}", g.name, p.units),
    ))
}

fn build_dram(v: &serde_json::Value) -> Result<Component, PluginError> {
    let p: DramGenParams = params::parse(v)?;
    Ok(Component::MemoryTier(Arc::new(dram_tier(&p)?)))
}

fn d_ref_mb() -> f64 {
    // A100 L2: 40 MB (NVIDIA A100 whitepaper).
    40.0
}
fn d_ref_tbs() -> f64 {
    // A100 L2 bandwidth, DeepFlow a100 config (seed digest §2.3).
    7.05
}

/// Parameters of `tech/node-sram`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSramParams {
    /// A built-in node; ignored when `node` is given.
    #[serde(default)]
    pub node_nm: Option<f64>,
    #[serde(default)]
    pub node: Option<NodeScaling>,
    #[serde(default)]
    pub limits: OperatingLimits,
    /// The reference SRAM (same area at every node). Default: A100 L2.
    #[serde(default = "d_ref_mb")]
    pub reference_capacity_mb: f64,
    #[serde(default = "d_ref_tbs")]
    pub reference_bandwidth_tbs: f64,
    /// Default: the `sram` plugin's.
    #[serde(default = "perfcast_plugin_memory::default_sram_efficiency")]
    pub efficiency: f64,
}

/// Build the on-chip tier of `p`: capacity scales with SRAM density (fixed SRAM area);
/// bandwidth with the derived matrix throughput, i.e. the reference's on-chip bytes per FLOP
/// are kept (ASSUMPTION: designers widen L2/L1 ports with the MAC array, as A100 -> H100
/// roughly did; not a published law).
pub fn sram_tier(p: &NodeSramParams) -> Result<Tier, PluginError> {
    let row = match (&p.node, p.node_nm) {
        (Some(n), _) => *n,
        (None, Some(nm)) => builtin_node(nm).ok_or_else(|| PluginError::Params {
            path: "node_nm".into(),
            message: format!("no built-in node {nm} nm"),
        })?,
        (None, None) => {
            return Err(PluginError::Params {
                path: "node_nm".into(),
                message: "set `node_nm` or an explicit `node` table".into(),
            })
        }
    };
    let op = operating_point(&row, &p.limits)?;
    let cap = positive("reference_capacity_mb", p.reference_capacity_mb)? * row.sram_density;
    let bw = positive("reference_bandwidth_tbs", p.reference_bandwidth_tbs)? * op.throughput;
    Ok(Tier::new(
        "tech/node-sram",
        TierLevel::OnChip,
        Bytes(cap * 1e6),
        Bandwidth::from_tbs(bw),
        fraction("efficiency", p.efficiency)?,
        Seconds::ZERO,
        format!("SRAM at {} nm", row.node_nm),
    ))
}

fn build_sram(v: &serde_json::Value) -> Result<Component, PluginError> {
    let p: NodeSramParams = params::parse(v)?;
    Ok(Component::MemoryTier(Arc::new(sram_tier(&p)?)))
}

/// Parameters of `tech/link-generation`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkGenParams {
    /// A generation of [`generations::LINK_GENERATIONS`] (nvlink2..nvlink7, edr..3.2t).
    pub generation: String,
    /// Devices in one domain (scale-up: NVLink domain; scale-out: default unlimited).
    #[serde(default)]
    pub domain_size: Option<u32>,
    /// Achievable fraction of the per-direction bandwidth (default: the `nvlink` plugin's
    /// 0.8 for scale-up, the `infiniband` plugin's 0.9 for scale-out).
    #[serde(default)]
    pub efficiency: Option<f64>,
    /// Latency per algorithm step, µs (default: 1 scale-up, 5 scale-out, as the network plugin).
    #[serde(default)]
    pub latency_us: Option<f64>,
    /// Fixed cost per collective, µs (default 5, as the network plugin).
    #[serde(default)]
    pub base_latency_us: Option<f64>,
}

/// A network level built from a link generation: the `nvlink`/`infiniband` plugins' level
/// ([`Link`]: alpha-beta collectives) and the generation it came from.
#[derive(Debug, Clone)]
pub struct GenLink {
    pub link: Link,
    pub generation: String,
}

/// Build the network level of `p`.
pub fn link(p: &LinkGenParams) -> Result<GenLink, PluginError> {
    let g = link_generation(&p.generation)?;
    let (eff, lat, domain) = match g.family {
        LinkFamily::ScaleUp => (0.8, 1.0, p.domain_size.unwrap_or(8)),
        LinkFamily::ScaleOut => (0.9, 5.0, p.domain_size.unwrap_or(u32::MAX)),
    };
    if domain == 0 {
        return Err(PluginError::Params {
            path: "domain_size".into(),
            message: "must be >= 1".into(),
        });
    }
    let eff = fraction("efficiency", p.efficiency.unwrap_or(eff))?;
    let link = Link::new(
        "tech/link-generation",
        domain,
        Bandwidth::from_gbs(g.bandwidth_gbs * eff),
        Seconds::from_micros(non_negative("latency_us", p.latency_us.unwrap_or(lat))?),
        Seconds::from_micros(non_negative(
            "base_latency_us",
            p.base_latency_us.unwrap_or(5.0),
        )?),
        // `Auto` lets the caller's choice through (ring or tree, whichever is faster).
        CollectiveAlgorithm::Auto,
    );
    Ok(GenLink {
        link,
        generation: g.name.to_string(),
    })
}

fn build_link(v: &serde_json::Value) -> Result<Component, PluginError> {
    let p: LinkGenParams = params::parse(v)?;
    Ok(Component::Interconnect(Arc::new(link(&p)?.link)))
}

perfcast_core::builtin!(
    ComputeUnit,
    "tech/node-scaled-gpu",
    "GPU derived from a process node (logic density, energy per op, supply limits) under the reference die's area and power",
    build_node_gpu,
    params = declared::NODE_GPU
);
perfcast_core::builtin!(
    MemoryTier,
    "tech/node-sram",
    "on-chip SRAM sized by a node's SRAM density in the reference SRAM area",
    build_sram,
    params = declared::NODE_SRAM
);
perfcast_core::builtin!(
    MemoryTier,
    "tech/dram-generation",
    "device memory from a DRAM generation (HBM2..HBM4e, GDDR7, LPDDR5X) and a stack count",
    build_dram,
    params = declared::DRAM_GENERATION
);
perfcast_core::builtin!(
    Interconnect,
    "tech/link-generation",
    "network level from a link generation (NVLink 2..7, InfiniBand EDR..3.2T)",
    build_link,
    params = declared::LINK_GENERATION
);

// `register(&mut Registry)`: this crate's built-ins, composed by `perfcast-builtins`.
perfcast_core::register_fn!();

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::{ComputeUnit, Engine, Interconnect, MemoryTier};
    use serde_json::json;

    #[test]
    fn reference_node_reproduces_a100() {
        let p: NodeGpuParams = params::parse(&json!({"node_nm": 7})).unwrap();
        let (g, op) = derive_gpu(&p).unwrap();
        assert_eq!(op.limit, Limit::Area);
        let bf16 = g.peak(Engine::Matrix, DType::Bf16).unwrap().tflops();
        assert!((bf16 - 312.0).abs() < 1e-9, "{bf16}");
        assert!(g.peak(Engine::Matrix, DType::Fp8).is_none());
    }

    #[test]
    fn extra_formats_and_unknown_node() {
        let p: NodeGpuParams =
            params::parse(&json!({"node_nm": 3, "extra_formats": {"fp8": 2.0}})).unwrap();
        let (g, _) = derive_gpu(&p).unwrap();
        let bf = g.peak(Engine::Matrix, DType::Bf16).unwrap().0;
        let f8 = g.peak(Engine::Matrix, DType::Fp8).unwrap().0;
        assert!((f8 / bf - 2.0).abs() < 1e-12);
        let e = build_node_gpu(&json!({"node_nm": 4})).err().unwrap();
        assert!(
            e.to_string().contains("node_nm") && e.to_string().contains("12"),
            "{e}"
        );
        let e = build_node_gpu(&json!({"node_nm": 7, "nodes": 1}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("nodes"), "{e}");
    }

    #[test]
    fn dram_and_link_tiers() {
        let t = dram_tier(&params::parse(&json!({"generation": "HBM3e", "units": 8})).unwrap())
            .unwrap();
        assert!((t.bandwidth().0 - 8.0 * 1228.8e9).abs() < 1.0);
        assert_eq!(t.level(), TierLevel::Device);
        let e = build_dram(&json!({"generation": "HBM3e", "units": 0}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("units"), "{e}");
        let l = link(&params::parse(&json!({"generation": "nvlink5", "domain_size": 72})).unwrap())
            .unwrap();
        assert_eq!(l.link.domain_size(), 72);
        assert!((l.link.bandwidth().gbs() - 720.0).abs() < 1e-9);
        let ib = link(&params::parse(&json!({"generation": "ndr"})).unwrap()).unwrap();
        assert_eq!(ib.link.domain_size(), u32::MAX);
    }

    #[test]
    fn sram_follows_density() {
        let s7 = sram_tier(&params::parse(&json!({"node_nm": 7})).unwrap()).unwrap();
        let s2 = sram_tier(&params::parse(&json!({"node_nm": 2})).unwrap()).unwrap();
        assert!((s7.capacity().0 - 40e6).abs() < 1.0);
        assert!(s2.capacity().0 > s7.capacity().0);
    }
}
