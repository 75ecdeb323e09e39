//! Acme NPU9: an example dynamic Rust plugin for perfcast (a FICTIONAL accelerator; every
//! number in its configs is made up for the example and cites nothing).
//!
//! It provides
//! - `acme/npu9`, a compute unit whose GEMMs run on `cores` weight-stationary systolic arrays
//!   of `array_dim` x `array_dim` MACs, with its own utilisation model and op time, and
//! - `acme/hbm-x`, a memory tier whose bandwidth follows from its stacks and pin rate, and
//! - `acme/xlink`, an interconnect level (perfcast's alpha-beta collectives over its own
//!   bandwidth and latency).
//!
//! The model (what the loader's end-to-end test recomputes):
//!
//! GEMM utilisation of a weight-stationary array (Kung 1982; the fill/drain and tiling terms as
//! in SCALE-Sim, Samajdar et al. 2018): `B[k,n]` is cut into `ceil(k/D)*ceil(n/D)` tiles of D x D
//! (D = `array_dim`), each tile streams the m rows of A through the array in `m + 2D` cycles
//! (fill and drain), and the `batch * tiles` tile jobs are spread over `cores` arrays in waves:
//!
//! ```text
//! spatial  = (k * n) / (ceil(k/D) * D * ceil(n/D) * D)
//! temporal = m / (m + 2D)
//! waves    = jobs / (ceil(jobs / cores) * cores),   jobs = batch * ceil(k/D) * ceil(n/D)
//! efficiency = spatial * temporal * waves
//! ```
//!
//! Attention uses the same formula for its score GEMM (m = q_len, n = kv_len, k = head_dim,
//! batch = batch * heads); vector ops run at efficiency 1.
//!
//! Op time (`op_time`): the NPU keeps a whole GEMM's operand tiles in its scratchpad, so every
//! memory tier moves only the op's compulsory bytes (`ComputeOp::min_bytes`), and the DMA
//! engine overlaps transfers with compute:
//!
//! ```text
//! compute = flops / (peak(engine, dtype) * efficiency)
//! memory  = max over tiers of (min_bytes / (bandwidth * tier efficiency) + tier latency)
//! time    = max(compute, memory) + launch_us * 1e-6 * launches
//! ```
//!
//! Peaks: matrix engine `bf16_tflops` for bf16/fp16, `fp8_tops` for fp8/int8 (no fp32, tf32
//! or 4-bit matrix path); vector engine `vector_tflops` for every dtype.
//!
//! `acme/hbm-x` bandwidth = `stacks * 1024 pins * pin_gbps / 8` bytes/s (1024-bit stack
//! interface as in JEDEC HBM3, JESD238), capacity = `stacks * gib_per_stack` GiB.
//!
//! Test knobs: `panic_in_peak = true` makes `peak` panic, `nan_in_op_time = true` makes
//! `op_time` return NaN (to exercise the host's error paths; never set them in a real config).

use perfcast_core::params::{fraction, non_negative, positive};
use perfcast_core::{
    Bandwidth, Bytes, ComputeOp, ComputeUnit, DType, Engine, FlopRate, Interconnect,
    MemoryHierarchy, MemoryTier, ModelError, OpTime, PluginError, Seconds, TierLevel, TimeBound,
};
use serde::Deserialize;

/// Parameters of `acme/npu9`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NpuParams {
    /// Dense fp8/int8 throughput of the matrix engine, TOPS.
    pub fp8_tops: f64,
    /// Dense bf16/fp16 throughput of the matrix engine, TFLOP/s.
    pub bf16_tflops: f64,
    /// Vector-unit throughput, TFLOP/s.
    pub vector_tflops: f64,
    /// Systolic arrays (one per core).
    pub cores: u32,
    /// Edge of each systolic array, MACs.
    pub array_dim: u32,
    /// Kernel launch overhead, microseconds.
    #[serde(default = "default_launch_us")]
    pub launch_us: f64,
    #[serde(default)]
    pub panic_in_peak: bool,
    #[serde(default)]
    pub nan_in_op_time: bool,
}

fn default_launch_us() -> f64 {
    3.0
}

pub struct Npu9 {
    p: NpuParams,
}

pub fn build_npu(p: NpuParams) -> Result<Npu9, PluginError> {
    positive("fp8_tops", p.fp8_tops)?;
    positive("bf16_tflops", p.bf16_tflops)?;
    positive("vector_tflops", p.vector_tflops)?;
    positive("cores", p.cores as f64)?;
    positive("array_dim", p.array_dim as f64)?;
    non_negative("launch_us", p.launch_us)?;
    Ok(Npu9 { p })
}

/// Utilisation of `batch` GEMMs `m x k . k x n` on `cores` arrays of `d x d` (module docs).
pub fn systolic_efficiency(m: u64, n: u64, k: u64, batch: u64, d: u64, cores: u64) -> f64 {
    if m == 0 || n == 0 || k == 0 || batch == 0 {
        return 1.0;
    }
    let (kt, nt) = (k.div_ceil(d), n.div_ceil(d));
    let spatial = (k * n) as f64 / ((kt * d) * (nt * d)) as f64;
    let temporal = m as f64 / (m + 2 * d) as f64;
    let jobs = batch * kt * nt;
    let waves = jobs as f64 / (jobs.div_ceil(cores) * cores) as f64;
    spatial * temporal * waves
}

impl ComputeUnit for Npu9 {
    fn kind(&self) -> &str {
        "acme/npu9"
    }

    fn peak(&self, engine: Engine, dtype: DType) -> Option<FlopRate> {
        if self.p.panic_in_peak {
            panic!("acme/npu9: peak() panicked (panic_in_peak = true)");
        }
        match (engine, dtype) {
            (Engine::Matrix, DType::Bf16 | DType::Fp16) => {
                Some(FlopRate::from_tflops(self.p.bf16_tflops))
            }
            (Engine::Matrix, DType::Fp8 | DType::Int8) => {
                Some(FlopRate::from_tflops(self.p.fp8_tops))
            }
            (Engine::Matrix, _) => None,
            (Engine::Vector, _) => Some(FlopRate::from_tflops(self.p.vector_tflops)),
        }
    }

    fn efficiency(&self, op: &ComputeOp) -> f64 {
        let (d, cores) = (self.p.array_dim as u64, self.p.cores as u64);
        match op {
            ComputeOp::Gemm(g) => systolic_efficiency(g.m, g.n, g.k, g.batch, d, cores),
            ComputeOp::Attention(a) => {
                systolic_efficiency(a.q_len, a.kv_len, a.head_dim, a.batch * a.heads, d, cores)
            }
            ComputeOp::Vector(_) => 1.0,
        }
    }

    fn launch_overhead(&self) -> Seconds {
        Seconds::from_micros(self.p.launch_us)
    }

    fn op_time(&self, op: &ComputeOp, memory: &MemoryHierarchy) -> Result<OpTime, ModelError> {
        let engine = Engine::of(op);
        let dtype = op.dtype();
        let peak = self
            .peak(engine, dtype)
            .ok_or_else(|| ModelError::UnsupportedDType {
                device: self.kind().to_string(),
                engine: engine.name().to_string(),
                dtype: dtype.name().to_string(),
            })?;
        let flops = op.flops();
        let compute = if flops.0 > 0.0 {
            Seconds(flops.0 / (peak.0 * self.efficiency(op)))
        } else {
            Seconds::ZERO
        };
        let bytes = op.min_bytes();
        let mut mem = Seconds::ZERO;
        let mut bound_tier = 0u8;
        for (i, t) in memory.tiers.iter().enumerate() {
            let s = Seconds(bytes.0 / t.effective_bandwidth().0) + t.latency();
            if s.0 > mem.0 {
                mem = s;
                bound_tier = i as u8;
            }
        }
        let overhead = self.launch_overhead() * op.launches() as f64;
        let busy = compute.max(mem);
        let bound = if overhead.0 > busy.0 {
            TimeBound::Overhead
        } else if compute.0 >= mem.0 {
            TimeBound::Compute
        } else {
            TimeBound::Memory(bound_tier)
        };
        let time = if self.p.nan_in_op_time {
            Seconds(f64::NAN)
        } else {
            busy + overhead
        };
        Ok(OpTime {
            time,
            compute,
            memory: mem,
            overhead,
            bound,
            flops,
            device_bytes: bytes,
        })
    }
}

/// Parameters of `acme/hbm-x`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HbmParams {
    pub stacks: u32,
    /// Per-pin data rate, Gbit/s.
    pub pin_gbps: f64,
    pub gib_per_stack: f64,
    /// Achievable fraction of peak bandwidth for streaming kernels.
    #[serde(default = "default_efficiency")]
    pub efficiency: f64,
    #[serde(default)]
    pub latency_ns: f64,
}

fn default_efficiency() -> f64 {
    0.9
}

pub struct HbmX {
    p: HbmParams,
}

/// Pins per HBM stack (1024-bit interface, JEDEC JESD238 HBM3).
pub const PINS_PER_STACK: f64 = 1024.0;

pub fn build_hbm(p: HbmParams) -> Result<HbmX, PluginError> {
    positive("stacks", p.stacks as f64)?;
    positive("pin_gbps", p.pin_gbps)?;
    positive("gib_per_stack", p.gib_per_stack)?;
    fraction("efficiency", p.efficiency)?;
    non_negative("latency_ns", p.latency_ns)?;
    Ok(HbmX { p })
}

impl MemoryTier for HbmX {
    fn kind(&self) -> &str {
        "acme/hbm-x"
    }
    fn level(&self) -> TierLevel {
        TierLevel::Device
    }
    fn capacity(&self) -> Bytes {
        Bytes(self.p.stacks as f64 * self.p.gib_per_stack * (1u64 << 30) as f64)
    }
    fn bandwidth(&self) -> Bandwidth {
        Bandwidth(self.p.stacks as f64 * PINS_PER_STACK * self.p.pin_gbps * 1e9 / 8.0)
    }
    fn efficiency(&self) -> f64 {
        self.p.efficiency
    }
    fn latency(&self) -> Seconds {
        Seconds::from_nanos(self.p.latency_ns)
    }
}

/// Parameters of `acme/xlink`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkParams {
    /// NPUs one xlink domain connects.
    pub domain_size: u32,
    /// Per-NPU bandwidth, one direction, GB/s.
    pub bandwidth_gbs: f64,
    /// Per-step latency, microseconds.
    pub latency_us: f64,
}

/// The NPU-to-NPU link: the standard alpha-beta collective model of `perfcast_core` (the
/// trait's default `collective_time`) over its own bandwidth and latency.
pub struct XLink {
    p: LinkParams,
}

pub fn build_link(p: LinkParams) -> Result<XLink, PluginError> {
    positive("domain_size", p.domain_size as f64)?;
    positive("bandwidth_gbs", p.bandwidth_gbs)?;
    non_negative("latency_us", p.latency_us)?;
    Ok(XLink { p })
}

impl Interconnect for XLink {
    fn kind(&self) -> &str {
        "acme/xlink"
    }
    fn domain_size(&self) -> u32 {
        self.p.domain_size
    }
    fn bandwidth(&self) -> Bandwidth {
        Bandwidth::from_gbs(self.p.bandwidth_gbs)
    }
    fn latency(&self) -> Seconds {
        Seconds::from_micros(self.p.latency_us)
    }
}

use perfcast_core::{ParamSpec, ParamType};

/// The parameters of `acme/npu9` (`perfcast plugins --describe acme/npu9`).
static NPU_PARAMS: &[ParamSpec] = &[
    ParamSpec::required(
        "fp8_tops",
        ParamType::Float,
        "TOPS",
        "> 0",
        "dense fp8/int8 throughput of the matrix engine",
        "Acme NPU9 datasheet (fictional)",
    ),
    ParamSpec::required(
        "bf16_tflops",
        ParamType::Float,
        "TFLOP/s",
        "> 0",
        "dense bf16/fp16 throughput of the matrix engine",
        "Acme NPU9 datasheet (fictional)",
    ),
    ParamSpec::required(
        "vector_tflops",
        ParamType::Float,
        "TFLOP/s",
        "> 0",
        "vector-unit throughput",
        "Acme NPU9 datasheet (fictional)",
    ),
    ParamSpec::required(
        "cores",
        ParamType::Integer,
        "",
        ">= 1",
        "systolic arrays (one per core)",
        "Acme NPU9 datasheet (fictional)",
    ),
    ParamSpec::required(
        "array_dim",
        ParamType::Integer,
        "MACs",
        ">= 1",
        "edge of each systolic array",
        "Acme NPU9 datasheet (fictional)",
    ),
    ParamSpec::with_default(
        "launch_us",
        ParamType::Float,
        "us",
        "3.0",
        ">= 0",
        "kernel launch overhead",
        "modelling default (fictional)",
    ),
    ParamSpec::with_default(
        "panic_in_peak",
        ParamType::Bool,
        "",
        "false",
        "",
        "test switch: panic inside `peak`",
        "-",
    ),
    ParamSpec::with_default(
        "nan_in_op_time",
        ParamType::Bool,
        "",
        "false",
        "",
        "test switch: return a non-finite time from `op_time`",
        "-",
    ),
];

/// The parameters of `acme/hbm-x`.
static HBM_PARAMS: &[ParamSpec] = &[
    ParamSpec::required(
        "stacks",
        ParamType::Integer,
        "",
        ">= 1",
        "HBM stacks on the package",
        "Acme NPU9 datasheet (fictional)",
    ),
    ParamSpec::required(
        "pin_gbps",
        ParamType::Float,
        "Gbit/s",
        "> 0",
        "per-pin data rate",
        "Acme NPU9 datasheet (fictional)",
    ),
    ParamSpec::required(
        "gib_per_stack",
        ParamType::Float,
        "GiB",
        "> 0",
        "capacity of one stack",
        "Acme NPU9 datasheet (fictional)",
    ),
    ParamSpec::with_default(
        "efficiency",
        ParamType::Float,
        "",
        "0.9",
        "(0, 1]",
        "achievable fraction of the peak for streaming kernels",
        "modelling default (fictional)",
    ),
    ParamSpec::with_default(
        "latency_ns",
        ParamType::Float,
        "ns",
        "0.0",
        ">= 0",
        "access latency",
        "modelling default (fictional)",
    ),
];

/// The parameters of `acme/xlink`.
static LINK_PARAMS: &[ParamSpec] = &[
    ParamSpec::required(
        "domain_size",
        ParamType::Integer,
        "devices",
        ">= 1",
        "NPUs one xlink domain connects",
        "Acme NPU9 datasheet (fictional)",
    ),
    ParamSpec::required(
        "bandwidth_gbs",
        ParamType::Float,
        "GB/s",
        "> 0",
        "per-NPU bandwidth, one direction",
        "Acme NPU9 datasheet (fictional)",
    ),
    ParamSpec::required(
        "latency_us",
        ParamType::Float,
        "us",
        ">= 0",
        "per-step latency",
        "Acme NPU9 datasheet (fictional)",
    ),
];

perfcast_abi::export_plugin! {
    name: "acme",
    version: env!("CARGO_PKG_VERSION"),
    compute_units: [
        "acme/npu9" => build_npu : "Acme NPU9 (fictional): systolic-array utilisation model" [NPU_PARAMS],
    ],
    memory_tiers: [
        "acme/hbm-x" => build_hbm : "Acme HBM-X (fictional): stacks x 1024 pins x pin rate" [HBM_PARAMS],
    ],
    interconnects: [
        "acme/xlink" => build_link : "Acme xlink (fictional): NPU-to-NPU scale-up link" [LINK_PARAMS],
    ],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systolic_table() {
        // (m, n, k, batch, d, cores, expected)
        let table = [
            // Perfect fit, long stream: only fill/drain is lost.
            (1024, 128, 128, 1, 128, 1, 1024.0 / 1280.0),
            // Decode (m = 1): one row per 2D+1 cycles.
            (1, 128, 128, 1, 128, 1, 1.0 / 257.0),
            // n = 192 needs 2 column tiles of 128: 75 % spatial.
            (1024, 192, 128, 1, 128, 2, 0.75 * 1024.0 / 1280.0),
            // 3 jobs on 2 cores: 2 waves, 75 % busy.
            (1024, 384, 128, 1, 128, 2, 1024.0 / 1280.0 * 0.75),
        ];
        for (m, n, k, b, d, c, want) in table {
            let got = systolic_efficiency(m, n, k, b, d, c);
            assert!((got - want).abs() < 1e-12, "{m}x{n}x{k}: {got} vs {want}");
        }
    }

    #[test]
    fn hbm_bandwidth_from_pins() {
        let h = build_hbm(HbmParams {
            stacks: 6,
            pin_gbps: 6.4,
            gib_per_stack: 16.0,
            efficiency: 0.9,
            latency_ns: 0.0,
        })
        .unwrap();
        assert!((h.bandwidth().0 - 6.0 * 1024.0 * 6.4e9 / 8.0).abs() < 1.0);
        assert_eq!(h.capacity().0, 96.0 * (1u64 << 30) as f64);
    }
}
