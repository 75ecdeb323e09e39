//! Test fixture (not an example to copy): a compute unit `fuzz/gpu`, a memory tier
//! `fuzz/hbm` and an interconnect `fuzz/link` whose every answer is drawn from a seeded
//! random sequence: mostly plausible numbers, otherwise NaN, infinity, a negative number,
//! zero, 1e300, 1e-300 or a panic. `seed` picks the sequence (each call advances it), and
//! `bad` is the chance that an answer is one of the bad kinds. The plugin-boundary fuzz
//! (`tests/fuzz.rs`) checks that whatever it answers, perfcast reports an error or finite
//! numbers, and never panics or aborts.

use perfcast_core::{
    Bandwidth, Bytes, Collective, CollectiveAlgorithm, ComputeOp, ComputeUnit, DType, Engine,
    FlopRate, Interconnect, MemoryTier, PluginError, Seconds, TierLevel,
};
use serde::Deserialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Parameters of every fuzz component.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FuzzParams {
    pub seed: u64,
    /// Probability of a bad answer, [0, 1].
    #[serde(default = "d_bad")]
    pub bad: f64,
}

fn d_bad() -> f64 {
    0.05
}

/// A random sequence shared by one component's calls (atomic: the host may call from
/// several threads).
pub struct Answers {
    state: AtomicU64,
    bad: f64,
}

impl Answers {
    fn new(p: &FuzzParams) -> Self {
        Answers {
            state: AtomicU64::new(p.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            bad: p.bad.clamp(0.0, 1.0),
        }
    }
    /// splitmix64 over a counter: uniform in [0, 1).
    fn next(&self) -> f64 {
        let mut z = self
            .state
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
    /// A plausible value in `[lo, hi]`, or (with probability `bad`) a bad one.
    fn value(&self, lo: f64, hi: f64) -> f64 {
        if self.next() >= self.bad {
            return lo + (hi - lo) * self.next();
        }
        match (self.next() * 8.0) as u32 {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => -lo.max(1e-9),
            3 => 0.0,
            4 => 1e300,
            5 => 1e-300,
            6 => f64::NEG_INFINITY,
            _ => panic!("fuzz-fixture: a panic by design"),
        }
    }
}

pub struct Gpu(Answers);
pub struct Hbm(Answers);
pub struct Link(Answers);

pub fn build_gpu(p: FuzzParams) -> Result<Gpu, PluginError> {
    Ok(Gpu(Answers::new(&p)))
}
pub fn build_hbm(p: FuzzParams) -> Result<Hbm, PluginError> {
    Ok(Hbm(Answers::new(&p)))
}
pub fn build_link(p: FuzzParams) -> Result<Link, PluginError> {
    Ok(Link(Answers::new(&p)))
}

impl ComputeUnit for Gpu {
    fn kind(&self) -> &str {
        "fuzz/gpu"
    }
    fn peak(&self, engine: Engine, _dtype: DType) -> Option<FlopRate> {
        match engine {
            Engine::Matrix => Some(FlopRate::from_tflops(self.0.value(100.0, 2000.0))),
            Engine::Vector => Some(FlopRate::from_tflops(self.0.value(10.0, 100.0))),
        }
    }
    fn efficiency(&self, _op: &ComputeOp) -> f64 {
        self.0.value(0.3, 1.0)
    }
    fn launch_overhead(&self) -> Seconds {
        Seconds::from_micros(self.0.value(1.0, 10.0))
    }
}

impl MemoryTier for Hbm {
    fn kind(&self) -> &str {
        "fuzz/hbm"
    }
    fn level(&self) -> TierLevel {
        TierLevel::Device
    }
    fn capacity(&self) -> Bytes {
        Bytes::from_gb(self.0.value(40.0, 200.0))
    }
    fn bandwidth(&self) -> Bandwidth {
        Bandwidth::from_tbs(self.0.value(1.0, 8.0))
    }
    fn efficiency(&self) -> f64 {
        self.0.value(0.5, 1.0)
    }
    fn latency(&self) -> Seconds {
        Seconds::from_nanos(self.0.value(0.0, 600.0))
    }
}

impl Interconnect for Link {
    fn kind(&self) -> &str {
        "fuzz/link"
    }
    fn domain_size(&self) -> u32 {
        8
    }
    fn bandwidth(&self) -> Bandwidth {
        Bandwidth::from_gbs(self.0.value(25.0, 900.0))
    }
    fn latency(&self) -> Seconds {
        Seconds::from_micros(self.0.value(0.5, 10.0))
    }
    fn collective_time(&self, c: &Collective, _algorithm: CollectiveAlgorithm) -> Seconds {
        if c.ranks <= 1 {
            return Seconds::ZERO;
        }
        // bytes / a random bandwidth, plus a random latency.
        Seconds(c.bytes.0 / (self.0.value(25.0, 900.0) * 1e9) + self.0.value(1e-6, 1e-4))
    }
}

perfcast_abi::export_plugin! {
    name: "fuzz-fixture",
    version: env!("CARGO_PKG_VERSION"),
    compute_units: [ "fuzz/gpu" => build_gpu ],
    memory_tiers: [ "fuzz/hbm" => build_hbm ],
    interconnects: [ "fuzz/link" => build_link ],
}
