//! Hardware traits: compute units ([`ComputeUnit`]), memory tiers ([`MemoryTier`], ordered in
//! a [`MemoryHierarchy`]) and interconnect levels ([`Interconnect`], with the alpha-beta
//! [`collective_time`]); a [`System`] is identical devices joined by a network of levels.

use crate::dtype::DType;
use crate::error::{ModelError, PluginError};
use crate::op::{Collective, CollectiveKind, ComputeOp};
use crate::units::{Bandwidth, Bytes, FlopCount, FlopRate, Seconds};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Which engine of a compute unit runs an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Tensor cores / systolic arrays: GEMMs and attention.
    Matrix,
    /// SIMT / vector units: everything else.
    Vector,
}

impl Engine {
    /// The engine that runs `op`: GEMMs and attention on the matrix engine, vector ops on the
    /// vector engine.
    pub fn of(op: &ComputeOp) -> Engine {
        match op {
            ComputeOp::Gemm(_) | ComputeOp::Attention(_) => Engine::Matrix,
            ComputeOp::Vector(_) => Engine::Vector,
        }
    }
    /// Lowercase name (`matrix`, `vector`), as configurations and messages spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Engine::Matrix => "matrix",
            Engine::Vector => "vector",
        }
    }
}

/// What limits an op's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "bound", content = "tier")]
pub enum TimeBound {
    /// The engine's throughput: compute time is at least every tier's memory time.
    Compute,
    /// Bandwidth of the memory tier with this index in the `MemoryHierarchy`.
    Memory(u8),
    /// Fixed costs (kernel launches) exceed both compute and memory time.
    Overhead,
}

/// The result of timing one compute op.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OpTime {
    /// Total time, `overhead` included (the roofline's `max(compute, memory) + overhead`).
    pub time: Seconds,
    /// Time the engine needs at its achievable throughput (`flops / (peak · efficiency)`).
    /// A model that cannot split its time may leave this and `memory` at zero.
    pub compute: Seconds,
    /// Time of the slowest memory tier (transfer plus latency).
    pub memory: Seconds,
    /// Launch and other fixed overheads included in `time`.
    pub overhead: Seconds,
    /// What limits the op.
    pub bound: TimeBound,
    /// Operations the op performs ([`ComputeOp::flops`] for the roofline).
    pub flops: FlopCount,
    /// Bytes moved through device memory. The roofline reports the traffic at the farthest
    /// tier of the hierarchy (the device tier unless a host tier is listed after it).
    pub device_bytes: Bytes,
}

/// Levels of a memory hierarchy, closest to the compute first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TierLevel {
    /// On-chip SRAM: L2, shared memory, scratchpads.
    OnChip,
    /// Device memory: HBM, GDDR, LPDDR attached to the accelerator.
    Device,
    /// Host memory or pooled memory reached over a link (DDR, CXL).
    Host,
}

/// One tier of memory.
pub trait MemoryTier: Send + Sync {
    /// Registered kind (e.g. `hbm`).
    fn kind(&self) -> &str;
    /// Where the tier sits; a [`MemoryHierarchy`] orders its tiers by it.
    fn level(&self) -> TierLevel;
    /// Capacity seen by one device. The device tier's bounds what fits; an on-chip tier's
    /// sets the GEMM tile held in front of the next tier ([`crate::roofline`]).
    fn capacity(&self) -> Bytes;
    /// Peak bandwidth seen by one device.
    fn bandwidth(&self) -> Bandwidth;
    /// Achievable fraction of `bandwidth` for streaming kernels, in (0, 1]. Default 1.
    fn efficiency(&self) -> f64 {
        1.0
    }
    /// Access latency, added once per op to the time of its traffic through this tier
    /// (so it matters when this tier bounds the op). Default zero.
    fn latency(&self) -> Seconds {
        Seconds::ZERO
    }
    /// Achievable bandwidth: `bandwidth · efficiency` (what the roofline divides by).
    fn effective_bandwidth(&self) -> Bandwidth {
        self.bandwidth() * self.efficiency()
    }
}

/// The memory tiers a device sees, ordered from the closest to the compute to the farthest.
#[derive(Clone, Default)]
pub struct MemoryHierarchy {
    /// The tiers, closest first ([`MemoryHierarchy::new`] sorts them; [`TimeBound::Memory`]
    /// indexes this list).
    pub tiers: Vec<Arc<dyn MemoryTier>>,
}

impl MemoryHierarchy {
    /// A hierarchy of `tiers`, sorted by [`TierLevel`] (stable: tiers of one level keep their
    /// order).
    pub fn new(mut tiers: Vec<Arc<dyn MemoryTier>>) -> Self {
        tiers.sort_by_key(|t| t.level());
        MemoryHierarchy { tiers }
    }
    /// The first device-level tier (HBM); the one whose capacity bounds what fits.
    pub fn device(&self) -> Option<&dyn MemoryTier> {
        self.tiers
            .iter()
            .find(|t| t.level() == TierLevel::Device)
            .map(|t| t.as_ref())
    }
    /// Index of the device tier in `tiers`.
    pub fn device_index(&self) -> Option<usize> {
        self.tiers
            .iter()
            .position(|t| t.level() == TierLevel::Device)
    }
    /// Capacity of the largest on-chip tier (what a GEMM can tile into), zero if none.
    pub fn on_chip_capacity(&self) -> Bytes {
        self.tiers
            .iter()
            .filter(|t| t.level() == TierLevel::OnChip)
            .map(|t| t.capacity())
            .fold(Bytes::ZERO, Bytes::max)
    }
}

impl std::fmt::Debug for MemoryHierarchy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.tiers
                    .iter()
                    .map(|t| (t.kind().to_string(), t.capacity())),
            )
            .finish()
    }
}

/// What timed an op: a row of a kernel table, a shape between its rows, a shape scaled beyond
/// its largest, or the compute unit's own (analytical) model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelPath {
    /// A row of a kernel table.
    Measured,
    /// Between rows of a kernel table.
    Interpolated,
    /// Scaled from a kernel table's largest row along a dimension the time scales with.
    Scaled,
    /// The compute unit's own model.
    Analytical,
}

impl KernelPath {
    /// Every path, in the reports' order.
    pub const ALL: [KernelPath; 4] = [
        KernelPath::Measured,
        KernelPath::Interpolated,
        KernelPath::Scaled,
        KernelPath::Analytical,
    ];
    /// The path's name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            KernelPath::Measured => "measured",
            KernelPath::Interpolated => "interpolated",
            KernelPath::Scaled => "scaled",
            KernelPath::Analytical => "analytical",
        }
    }
}

/// An accelerator's compute engines.
pub trait ComputeUnit: Send + Sync {
    /// Registered kind (e.g. `gpu`, `acme/npu9`).
    fn kind(&self) -> &str;
    /// Peak dense throughput (no sparsity) of `engine` in `dtype`; `None` when the device has
    /// no such path. The roofline then fails with [`ModelError::UnsupportedDType`], and the
    /// engines refuse a plan whose precision has no matrix-engine peak.
    fn peak(&self, engine: Engine, dtype: DType) -> Option<FlopRate>;
    /// Achievable fraction of peak for this op, in (0, 1] (the roofline refuses other values).
    /// Default 1: peak is reached.
    fn efficiency(&self, _op: &ComputeOp) -> f64 {
        1.0
    }
    /// Fixed cost of launching one kernel; the roofline adds it once per
    /// [`ComputeOp::launches`]. Default zero.
    fn launch_overhead(&self) -> Seconds {
        Seconds::ZERO
    }
    /// The clock this unit runs at relative to the clock its measured kernels were timed at
    /// (the rated power's): below 1 under a power limit. A host that times ops from measured
    /// kernels ([`ComputeUnit::op_time`] of a table-backed unit) divides those times by it.
    /// Default 1 (the plugin ABIs do not carry it: a loaded unit runs at its measurements'
    /// clock).
    fn clock_ratio(&self) -> f64 {
        1.0
    }
    /// Edge of the output tile (elements) one core keeps on chip while it streams a GEMM's
    /// operands from the closest memory tier: sets the on-chip traffic of a GEMM
    /// ([`crate::roofline::gemm_traffic`]). Default 128.
    fn gemm_tile(&self) -> u64 {
        128
    }
    /// What the plugin derived from its parameters that reports and studies may show (e.g. a
    /// technology model's supply voltage, clock and active MAC fraction), as a JSON object
    /// of named values; `Null` (the default) when it derives nothing beyond its peaks. Not
    /// called by the engines.
    fn derived(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    /// What [`ComputeUnit::op_time`] times `op` with: a kernel table's measurements
    /// (measured, interpolated or scaled) or the unit's own model (`Analytical`, the default).
    /// For reports; not called on the engines' hot path.
    fn kernel_path(&self, _op: &ComputeOp) -> KernelPath {
        KernelPath::Analytical
    }
    /// The busiest device's time for one MoE layer's routed experts when the unit has
    /// measurements of whole fused MoE blocks (a kernel table), at the unit's clock; `None`
    /// (the default, and a shape the measurements do not cover) lets the engines time the
    /// grouped GEMMs op by op with [`ComputeUnit::op_time`]. An error when the measurements
    /// cannot be read.
    fn routed_experts_time(
        &self,
        _experts: &crate::op::RoutedExperts,
    ) -> Result<Option<Seconds>, ModelError> {
        Ok(None)
    }
    /// The time of one inference attention core when the unit has measurements of an
    /// inference runtime's attention kernels (kernel tables), at the unit's clock: `a` is a
    /// prefill of `a.q_len` new tokens per sequence over `a.kv_len` positions (causal; the
    /// first `kv_len - q_len` cached before) or a decode step (`q_len` 1) of `a.batch`
    /// sequences, with `a.heads` query and `a.kv_heads` KV heads on this device, its KV cache
    /// in `kv`. `None` (the default, and a shape the measurements do not cover) lets the
    /// engine time it with [`ComputeUnit::op_time`]. An error when the measurements cannot
    /// be read.
    fn inference_attention_time(
        &self,
        _a: &crate::op::Attention,
        _kv: DType,
        _memory: &MemoryHierarchy,
    ) -> Result<Option<Seconds>, ModelError> {
        Ok(None)
    }
    /// The time of a whole low-precision linear layer over its three GEMMs' in 16 bits, when
    /// the unit has measurements of such layers timed whole (a kernel table): its 8-bit
    /// operands scaled by `scaling`, its forward GEMM `gemm` = `[m, n, k]` (`m x k` by
    /// `k x n`, as [`crate::op::Gemm`]). The ratio covers
    /// the forward, data-gradient and weight-gradient GEMMs and the quantisation of their
    /// operands, forward and backward, at the unit's clock. `None` (the default, and a shape
    /// or scaling the measurements do not cover) lets the engines time the GEMMs and the
    /// quantisation op by op. An error when the 16-bit GEMMs cannot be timed.
    fn quantised_linear_ratio(
        &self,
        _scaling: crate::op::GemmScaling,
        _gemm: [u64; 3],
        _memory: &MemoryHierarchy,
    ) -> Result<Option<f64>, ModelError> {
        Ok(None)
    }
    /// Time one op. The default is the hierarchical roofline
    /// ([`crate::roofline::hierarchical`]); a plugin with a model of its own (a simulator, a
    /// lookup table) overrides this. The engines time each op of a device's program with it
    /// and refuse a time that is not finite and non-negative.
    fn op_time(&self, op: &ComputeOp, memory: &MemoryHierarchy) -> Result<OpTime, ModelError> {
        crate::roofline::hierarchical(self, op, memory)
    }
}

/// Collective algorithms an interconnect level may implement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveAlgorithm {
    /// Whichever of ring and tree is faster for the message (as NCCL's tuner picks);
    /// [`collective_time`] compares them for all-reduce and broadcast, and uses ring for the
    /// other kinds.
    #[default]
    Auto,
    /// Ring: `p - 1` latency steps (all-reduce `2(p - 1)`, send/recv 1).
    Ring,
    /// Double binary tree: log-depth latency, same bandwidth term as ring for large messages.
    Tree,
}

/// One level of the network: a scale-up domain (NVLink/NVSwitch), a scale-out fabric
/// (InfiniBand, RoCE), a torus...
pub trait Interconnect: Send + Sync {
    /// Registered kind (e.g. `nvlink`, `infiniband`).
    fn kind(&self) -> &str;
    /// Devices one domain of this level connects (`u32::MAX` for a fabric without a limit).
    /// At least 1; a [`System`] lists its levels smallest domain first (the training engine
    /// refuses other orders).
    fn domain_size(&self) -> u32;
    /// Achievable bandwidth per device, one direction (the `B` of [`collective_time`]).
    fn bandwidth(&self) -> Bandwidth;
    /// Latency of one algorithm step (per message hop, software included; the `α` of
    /// [`collective_time`]).
    fn latency(&self) -> Seconds;
    /// Fixed cost of one collective on this level (kernel launch, synchronisation), beside
    /// the per-step [`Interconnect::latency`]: what a [`crate::Topology`] that runs its own
    /// algorithms over the level's bandwidth adds once per collective. Default zero.
    fn collective_overhead(&self) -> Seconds {
        Seconds::ZERO
    }
    /// Time of a collective over `c.ranks` devices all inside one domain of this level (the
    /// training engine splits a group that spans levels into one collective per level).
    /// Default: [`collective_time`] of `bandwidth` and `latency`.
    fn collective_time(&self, c: &Collective, algorithm: CollectiveAlgorithm) -> Seconds {
        collective_time(c, self.bandwidth(), self.latency(), algorithm)
    }
    /// `collective_time`, or why the level cannot answer (a dynamic plugin's failing call or
    /// invalid answer). The engines call this one, so that the plugin's own message reaches
    /// the user; native levels keep the default, which checks that the time is finite and
    /// non-negative ([`PluginError::BadValue`] otherwise).
    fn try_collective_time(
        &self,
        c: &Collective,
        algorithm: CollectiveAlgorithm,
    ) -> Result<Seconds, PluginError> {
        let t = self.collective_time(c, algorithm);
        if t.0.is_finite() && t.0 >= 0.0 {
            Ok(t)
        } else {
            Err(PluginError::BadValue {
                plugin: self.kind().to_string(),
                what: format!(
                    "collective time ({} of {} B over {} ranks)",
                    c.kind.name(),
                    c.bytes.0,
                    c.ranks
                ),
                value: t.0,
            })
        }
    }
}

/// Ring / tree collective time (alpha-beta model): `steps·α + factor·S/B`.
///
/// Ring volumes per rank: all-reduce 2(p-1)/p·S, all-gather and reduce-scatter (p-1)/p·S
/// (Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009). Tree all-reduce: 2·log2(p)
/// latency steps and the same bandwidth term (NCCL double binary tree, Sanders et al. 2009).
pub fn collective_time(
    c: &Collective,
    bandwidth: Bandwidth,
    latency: Seconds,
    algorithm: CollectiveAlgorithm,
) -> Seconds {
    if c.ranks <= 1 || c.bytes.0 <= 0.0 {
        return Seconds::ZERO;
    }
    let beta = c.bytes.0 * c.kind.ring_traffic_factor(c.ranks) / bandwidth.0;
    let ring = latency.0 * c.kind.ring_steps(c.ranks) + beta;
    let tree = || {
        let depth = (c.ranks as f64).log2().ceil();
        let steps = match c.kind {
            CollectiveKind::AllReduce => 2.0 * depth,
            CollectiveKind::SendRecv => 1.0,
            _ => depth,
        };
        latency.0 * steps + beta
    };
    Seconds(match algorithm {
        CollectiveAlgorithm::Ring => ring,
        CollectiveAlgorithm::Tree => tree(),
        CollectiveAlgorithm::Auto => match c.kind {
            CollectiveKind::AllReduce | CollectiveKind::Broadcast => ring.min(tree()),
            _ => ring,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A level whose model answers NaN: `try_collective_time` names it and the collective.
    #[test]
    fn invalid_collective_time_is_an_error_naming_the_level() {
        struct Broken;
        impl Interconnect for Broken {
            fn kind(&self) -> &str {
                "broken-link"
            }
            fn domain_size(&self) -> u32 {
                8
            }
            fn bandwidth(&self) -> Bandwidth {
                Bandwidth(f64::NAN)
            }
            fn latency(&self) -> Seconds {
                Seconds(1e-6)
            }
        }
        let c = Collective {
            kind: CollectiveKind::AllGather,
            bytes: Bytes(1e6),
            ranks: 4,
        };
        let e = Broken
            .try_collective_time(&c, CollectiveAlgorithm::Ring)
            .unwrap_err()
            .to_string();
        for w in ["broken-link", "all_gather", "4 ranks", "NaN"] {
            assert!(e.contains(w), "{w}: {e}");
        }
    }

    #[test]
    fn ring_all_reduce_alpha_beta() {
        let c = Collective {
            kind: CollectiveKind::AllReduce,
            bytes: Bytes(1e9),
            ranks: 8,
        };
        let t = collective_time(
            &c,
            Bandwidth::from_gbs(100.0),
            Seconds::from_micros(5.0),
            CollectiveAlgorithm::Ring,
        );
        let want = 14.0 * 5e-6 + 1.75 * 1e9 / 100e9;
        assert!((t.0 - want).abs() < 1e-12);
        // Tiny message: the tree's log-depth latency wins under Auto.
        let small = Collective {
            bytes: Bytes(1024.0),
            ranks: 64,
            ..c
        };
        let auto = collective_time(
            &small,
            Bandwidth::from_gbs(100.0),
            Seconds::from_micros(5.0),
            CollectiveAlgorithm::Auto,
        );
        assert!(auto.0 < 126.0 * 5e-6);
        let one = Collective { ranks: 1, ..c };
        assert_eq!(
            collective_time(
                &one,
                Bandwidth(1.0),
                Seconds(1.0),
                CollectiveAlgorithm::Auto
            )
            .0,
            0.0
        );
    }
}

/// A cluster: identical devices (a compute unit with its memory hierarchy) connected by a
/// network of levels, innermost (scale-up) first, wired as its topology says.
#[derive(Clone)]
pub struct System {
    /// Name for reports and messages.
    pub name: String,
    /// Each device's compute unit.
    pub compute: Arc<dyn ComputeUnit>,
    /// The memory tiers each device sees.
    pub memory: MemoryHierarchy,
    /// Network levels, innermost first (e.g. NVLink domain, then InfiniBand fabric): the
    /// link technologies.
    pub network: Vec<Arc<dyn Interconnect>>,
    /// How the levels are wired (`[system] topology`); `None` is the hierarchical network of
    /// levels ([`crate::topology::Hierarchical`]).
    pub topology: Option<Arc<dyn crate::Topology>>,
    /// Devices in the cluster.
    pub devices: u32,
}

impl std::fmt::Debug for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("System")
            .field("name", &self.name)
            .field("compute", &self.compute.kind())
            .field("memory", &self.memory)
            .field(
                "network",
                &self
                    .network
                    .iter()
                    .map(|n| n.kind().to_string())
                    .collect::<Vec<_>>(),
            )
            .field(
                "topology",
                &self.topology.as_ref().map(|t| t.kind().to_string()),
            )
            .field("devices", &self.devices)
            .finish()
    }
}
