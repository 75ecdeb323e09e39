//! Built-in memory tiers.
//!
//! - `hbm` / `dram`: device memory (HBM2e..HBM4, GDDR7, LPDDR5X): capacity in decimal GB
//!   and peak bandwidth in TB/s as vendors quote them; `efficiency` is the fraction of the
//!   peak that streaming kernels reach (STREAM-like copies on A100/H100 reach about 85-92%
//!   of the datasheet figure: Jia et al. 2021 "Dissecting the Ampere GPU architecture via
//!   microbenchmarking"; Luo et al. 2024 "Benchmarking and Dissecting the Nvidia Hopper GPU
//!   Architecture").
//! - `sram`: on-chip memory (L2, shared memory): capacity in MB, bandwidth in TB/s.
//! - `host-dram`: host memory reached over a link (PCIe, NVLink-C2C), for offload.

use perfcast_core::params::{
    self, fraction, non_negative, physical, BANDWIDTH_TBS, CAPACITY_GB, CAPACITY_MB,
};
use perfcast_core::registry::Component;
use perfcast_core::{
    Bandwidth, Bytes, MemoryTier, ParamSpec, ParamType, PluginError, Seconds, TierLevel,
};
use serde::Deserialize;
use std::sync::Arc;

/// Parameters of device memory (`hbm`, `dram`) and host memory (`host-dram`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DramParams {
    /// Capacity, decimal GB.
    pub capacity_gb: f64,
    /// Peak bandwidth, decimal TB/s.
    pub bandwidth_tbs: f64,
    /// Achievable fraction of the peak for streaming kernels.
    #[serde(default = "default_dram_efficiency")]
    pub efficiency: f64,
    /// Access latency, nanoseconds (added once per op bound by this tier).
    #[serde(default = "default_dram_latency_ns")]
    pub latency_ns: f64,
    /// Technology label for reports (HBM2e, HBM3, HBM3e, HBM4, GDDR7, LPDDR5X...).
    #[serde(default)]
    pub technology: String,
}

/// Default `efficiency` of device and host memory: STREAM-like copies reach about 85-92% of
/// the datasheet peak (module documentation).
pub fn default_dram_efficiency() -> f64 {
    0.9
}
/// Default `latency_ns` of device and host memory.
pub fn default_dram_latency_ns() -> f64 {
    // DRAM access latency seen by a GPU load, order 500-700 ns end to end; the op-level
    // pipeline hides most of it, so we charge a fraction (Jia et al. 2021 measure ~400-600 ns).
    500.0
}

/// Parameters of `sram`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SramParams {
    /// Capacity, MB (decimal, as quoted).
    pub capacity_mb: f64,
    /// Aggregate bandwidth, TB/s.
    pub bandwidth_tbs: f64,
    #[serde(default = "default_sram_efficiency")]
    pub efficiency: f64,
    #[serde(default)]
    pub latency_ns: f64,
}

/// Default `efficiency` of on-chip SRAM.
pub fn default_sram_efficiency() -> f64 {
    0.8
}

/// A memory tier described by numbers.
#[derive(Debug, Clone)]
pub struct Tier {
    kind: &'static str,
    level: TierLevel,
    capacity: Bytes,
    bandwidth: Bandwidth,
    efficiency: f64,
    latency: Seconds,
    pub technology: String,
}

impl Tier {
    /// A tier of `kind` at `level`: `capacity`, peak `bandwidth`, the `efficiency` fraction of
    /// the peak that streaming kernels reach, `latency` added once per op bound by the tier,
    /// and a `technology` label for reports. The values are taken as given: plugins check
    /// their parameters (`perfcast_core::params`) before building one.
    pub fn new(
        kind: &'static str,
        level: TierLevel,
        capacity: Bytes,
        bandwidth: Bandwidth,
        efficiency: f64,
        latency: Seconds,
        technology: impl Into<String>,
    ) -> Tier {
        Tier {
            kind,
            level,
            capacity,
            bandwidth,
            efficiency,
            latency,
            technology: technology.into(),
        }
    }
}

impl MemoryTier for Tier {
    fn kind(&self) -> &str {
        self.kind
    }
    fn level(&self) -> TierLevel {
        self.level
    }
    fn capacity(&self) -> Bytes {
        self.capacity
    }
    fn bandwidth(&self) -> Bandwidth {
        self.bandwidth
    }
    fn efficiency(&self) -> f64 {
        self.efficiency
    }
    fn latency(&self) -> Seconds {
        self.latency
    }
}

fn dram(
    kind: &'static str,
    level: TierLevel,
    v: &serde_json::Value,
) -> Result<Component, PluginError> {
    let p: DramParams = params::parse(v)?;
    Ok(Component::MemoryTier(Arc::new(Tier {
        kind,
        level,
        capacity: Bytes::from_gb(physical("capacity_gb", p.capacity_gb, CAPACITY_GB)?),
        bandwidth: Bandwidth::from_tbs(physical("bandwidth_tbs", p.bandwidth_tbs, BANDWIDTH_TBS)?),
        efficiency: fraction("efficiency", p.efficiency)?,
        latency: Seconds::from_nanos(non_negative("latency_ns", p.latency_ns)?),
        technology: p.technology,
    })))
}

fn build_hbm(v: &serde_json::Value) -> Result<Component, PluginError> {
    dram("hbm", TierLevel::Device, v)
}
fn build_dram(v: &serde_json::Value) -> Result<Component, PluginError> {
    dram("dram", TierLevel::Device, v)
}
fn build_host(v: &serde_json::Value) -> Result<Component, PluginError> {
    dram("host-dram", TierLevel::Host, v)
}
fn build_sram(v: &serde_json::Value) -> Result<Component, PluginError> {
    let p: SramParams = params::parse(v)?;
    Ok(Component::MemoryTier(Arc::new(Tier {
        kind: "sram",
        level: TierLevel::OnChip,
        capacity: Bytes(physical("capacity_mb", p.capacity_mb, CAPACITY_MB)? * 1e6),
        bandwidth: Bandwidth::from_tbs(physical("bandwidth_tbs", p.bandwidth_tbs, BANDWIDTH_TBS)?),
        efficiency: fraction("efficiency", p.efficiency)?,
        latency: Seconds::from_nanos(non_negative("latency_ns", p.latency_ns)?),
        technology: "SRAM".into(),
    })))
}

const EFFICIENCY_SOURCE: &str =
    "STREAM-like copies reach ~85-92% of the datasheet peak on A100/H100 \
     (Jia et al. 2021; Luo et al. 2024)";

/// The parameters of `hbm`, `dram` and `host-dram` (defaults: [`default_dram_efficiency`],
/// [`default_dram_latency_ns`]).
pub static DRAM_PARAMS: &[ParamSpec] = &[
    ParamSpec::required(
        "capacity_gb",
        ParamType::Float,
        "GB",
        "1e-3 to 1e6",
        "capacity, decimal GB as vendors quote it",
        "the device's datasheet",
    ),
    ParamSpec::required(
        "bandwidth_tbs",
        ParamType::Float,
        "TB/s",
        "1e-4 to 1e4",
        "peak bandwidth, decimal TB/s",
        "the device's datasheet",
    ),
    ParamSpec::with_default(
        "efficiency",
        ParamType::Float,
        "",
        "0.9",
        "(0, 1]",
        "achievable fraction of the peak for streaming kernels",
        EFFICIENCY_SOURCE,
    ),
    ParamSpec::with_default(
        "latency_ns",
        ParamType::Float,
        "ns",
        "500.0",
        ">= 0",
        "access latency, added once per op bound by this tier",
        "Jia et al. 2021 measure ~400-600 ns GPU DRAM load latency",
    ),
    ParamSpec::with_default(
        "technology",
        ParamType::String,
        "",
        "\"\"",
        "",
        "technology label for reports (HBM3, GDDR7, LPDDR5X...)",
        "-",
    ),
];

/// The parameters of `sram` (default efficiency: [`default_sram_efficiency`]).
pub static SRAM_PARAMS: &[ParamSpec] = &[
    ParamSpec::required(
        "capacity_mb",
        ParamType::Float,
        "MB",
        "1e-3 to 1e6",
        "capacity, decimal MB as quoted",
        "the device's datasheet or whitepaper",
    ),
    ParamSpec::required(
        "bandwidth_tbs",
        ParamType::Float,
        "TB/s",
        "1e-4 to 1e4",
        "aggregate bandwidth",
        "the device's whitepaper or a microbenchmark",
    ),
    ParamSpec::with_default(
        "efficiency",
        ParamType::Float,
        "",
        "0.8",
        "(0, 1]",
        "achievable fraction of the peak",
        "modelling default",
    ),
    ParamSpec::with_default(
        "latency_ns",
        ParamType::Float,
        "ns",
        "0.0",
        ">= 0",
        "access latency, added once per op bound by this tier",
        "modelling default",
    ),
];

perfcast_core::builtin!(
    MemoryTier,
    "hbm",
    "High-bandwidth device memory (HBM2e..HBM4)",
    build_hbm,
    params = DRAM_PARAMS
);
perfcast_core::builtin!(
    MemoryTier,
    "dram",
    "Other device DRAM (GDDR, LPDDR)",
    build_dram,
    params = DRAM_PARAMS
);
perfcast_core::builtin!(
    MemoryTier,
    "host-dram",
    "Host memory over a link (offload tier)",
    build_host,
    params = DRAM_PARAMS
);
perfcast_core::builtin!(
    MemoryTier,
    "sram",
    "On-chip SRAM (L2 cache, scratchpad)",
    build_sram,
    params = SRAM_PARAMS
);

// `register(&mut Registry)`: this crate's built-ins, composed by `perfcast-builtins`.
perfcast_core::register_fn!();

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builds_and_converts_units() {
        let Component::MemoryTier(t) =
            build_hbm(&json!({"capacity_gb": 80.0, "bandwidth_tbs": 2.039})).unwrap()
        else {
            panic!("not a memory tier")
        };
        assert_eq!(t.capacity().0, 80e9);
        assert!((t.effective_bandwidth().0 - 0.9 * 2.039e12).abs() < 1.0);
        assert_eq!(t.level(), TierLevel::Device);
        let Component::MemoryTier(s) =
            build_sram(&json!({"capacity_mb": 40.0, "bandwidth_tbs": 7.0})).unwrap()
        else {
            panic!("not a memory tier")
        };
        assert_eq!(s.level(), TierLevel::OnChip);
    }

    #[test]
    fn bad_params() {
        let cases = [
            (
                json!({"capacity_gb": 0.0, "bandwidth_tbs": 1.0}),
                "capacity_gb",
            ),
            (
                json!({"capacity_gb": 1.0, "bandwidth_tbs": 1.0, "efficiency": 0.0}),
                "efficiency",
            ),
            (json!({"capacity_gb": 1.0}), "bandwidth_tbs"),
            (
                json!({"capacity_gb": 1.0, "bandwidth_tbs": 1.0, "bw": 2}),
                "bw",
            ),
        ];
        for (v, key) in cases {
            let e = build_hbm(&v).err().unwrap().to_string();
            assert!(e.contains(key), "{e}");
        }
    }
}
