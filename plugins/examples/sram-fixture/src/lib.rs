//! Test fixture (the smallest Rust plugin): one memory tier, `fixture/sram`, built from its
//! parameters as given. Loaded next to acme-npu it checks that per-file loading keeps two Rust
//! plugins apart (abi_stable's `load_from_file` would hand back the first one's module).

use perfcast_core::params::{fraction, non_negative, positive};
use perfcast_core::{Bandwidth, Bytes, MemoryTier, PluginError, Seconds, TierLevel};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SramParams {
    pub capacity_mib: f64,
    pub bandwidth_tbs: f64,
    #[serde(default = "one")]
    pub efficiency: f64,
    #[serde(default)]
    pub latency_ns: f64,
}

fn one() -> f64 {
    1.0
}

pub struct Sram(SramParams);

pub fn build(p: SramParams) -> Result<Sram, PluginError> {
    positive("capacity_mib", p.capacity_mib)?;
    positive("bandwidth_tbs", p.bandwidth_tbs)?;
    fraction("efficiency", p.efficiency)?;
    non_negative("latency_ns", p.latency_ns)?;
    Ok(Sram(p))
}

impl MemoryTier for Sram {
    fn kind(&self) -> &str {
        "fixture/sram"
    }
    fn level(&self) -> TierLevel {
        TierLevel::OnChip
    }
    fn capacity(&self) -> Bytes {
        Bytes(self.0.capacity_mib * 1048576.0)
    }
    fn bandwidth(&self) -> Bandwidth {
        Bandwidth::from_tbs(self.0.bandwidth_tbs)
    }
    fn efficiency(&self) -> f64 {
        self.0.efficiency
    }
    fn latency(&self) -> Seconds {
        Seconds::from_nanos(self.0.latency_ns)
    }
}

perfcast_abi::export_plugin! {
    name: "sram-fixture",
    version: env!("CARGO_PKG_VERSION"),
    memory_tiers: [ "fixture/sram" => build ],
}
