//! A simple A100-like system built from the core traits, and the models the papers use, for
//! the engine's tests and benches. Hosts and validation use the calibrated built-in GPU,
//! memory and network plugins instead.
//!
//! Numbers: NVIDIA A100 Tensor Core GPU datasheet (2021): 312 TFLOP/s dense fp16/bf16
//! tensor core, 19.5 TFLOP/s fp32 (vector), 80 GB HBM2e at 2,039 GB/s, 40 MB L2; NVLink 3
//! 600 GB/s total = 300 GB/s per direction through NVSwitch, 8 GPUs per DGX A100; one
//! 200 Gb/s HDR InfiniBand NIC per GPU (DGX A100 user guide) = 25 GB/s.
//! Efficiencies are fixture values (not calibrated): GEMMs reach `matmul_efficiency` of peak,
//! HBM streams at 0.85 of peak, NVLink and IB reach 0.8 of their line rate.

use perfcast_core::hardware::{ComputeUnit, Engine, Interconnect, MemoryHierarchy, MemoryTier};
use perfcast_core::workload::{FfnAct, ModelSpec};
use perfcast_core::{Bandwidth, Bytes, ComputeOp, DType, FlopRate, Seconds, System, TierLevel};
use std::sync::Arc;

/// A100-like compute unit.
pub struct TestGpu {
    pub matmul_efficiency: f64,
    pub launch_overhead: Seconds,
}

impl ComputeUnit for TestGpu {
    fn kind(&self) -> &str {
        "test-a100"
    }
    fn peak(&self, engine: Engine, dtype: DType) -> Option<FlopRate> {
        match (engine, dtype) {
            (Engine::Matrix, DType::Bf16 | DType::Fp16) => Some(FlopRate::from_tflops(312.0)),
            (Engine::Matrix, DType::Tf32) => Some(FlopRate::from_tflops(156.0)),
            (Engine::Matrix, DType::Int8) => Some(FlopRate::from_tflops(624.0)),
            (Engine::Vector, _) => Some(FlopRate::from_tflops(19.5)),
            _ => None,
        }
    }
    fn efficiency(&self, op: &ComputeOp) -> f64 {
        match op {
            ComputeOp::Gemm(_) | ComputeOp::Attention(_) => self.matmul_efficiency,
            ComputeOp::Vector(_) => 1.0,
        }
    }
    fn launch_overhead(&self) -> Seconds {
        self.launch_overhead
    }
}

/// A memory tier with fixed numbers.
pub struct Tier {
    pub kind: &'static str,
    pub level: TierLevel,
    pub capacity: Bytes,
    pub bandwidth: Bandwidth,
    pub efficiency: f64,
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
}

/// A network level with fixed numbers.
pub struct Link {
    kind: &'static str,
    domain: u32,
    bandwidth: Bandwidth,
    latency: Seconds,
}

impl Link {
    /// `gbs`: achievable GB/s per device per direction; `latency_us` per step.
    pub fn new(kind: &'static str, domain: u32, gbs: f64, latency_us: f64) -> Self {
        Link::with_bandwidth(
            kind,
            domain,
            Bandwidth::from_gbs(gbs),
            Seconds::from_micros(latency_us),
        )
    }

    /// `bandwidth`: achievable per device per direction; `latency` per step.
    pub fn with_bandwidth(
        kind: &'static str,
        domain: u32,
        bandwidth: Bandwidth,
        latency: Seconds,
    ) -> Self {
        Link {
            kind,
            domain,
            bandwidth,
            latency,
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
}

/// A GPT-style model of `l` layers, hidden size `h` and `a` heads as Megatron-LM builds them
/// (Narayanan et al. 2021, Table 1): GeLU MLP of `4h`, vocabulary 51,200, sequence 2,048,
/// tied input and output embeddings.
pub fn gpt(l: u64, h: u64, a: u64) -> ModelSpec {
    ModelSpec {
        name: String::new(),
        layers: l,
        hidden: h,
        heads: a,
        kv_heads: None,
        head_dim: None,
        ffn_hidden: 4 * h,
        ffn_act: FfnAct::Gelu,
        vocab: 51200,
        seq_len: 2048,
        tied_embeddings: true,
        norm: None,
        position: None,
        bias: None,
        moe: None,
    }
}

/// Llama-2 (Touvron et al. 2023, Table 1 and the released configs): 7B, 13B, 70B (GQA, 8 KV
/// heads); any other `size` is the 70B.
pub fn llama2(size: u32) -> ModelSpec {
    let (layers, hidden, heads, kv, ffn) = match size {
        7 => (32, 4096, 32, 32, 11008),
        13 => (40, 5120, 40, 40, 13824),
        _ => (80, 8192, 64, 8, 28672),
    };
    ModelSpec {
        name: format!("llama2-{size}b"),
        layers,
        hidden,
        heads,
        kv_heads: Some(kv),
        head_dim: None,
        ffn_hidden: ffn,
        ffn_act: FfnAct::Swiglu,
        vocab: 32000,
        seq_len: 4096,
        tied_embeddings: false,
        norm: None,
        position: None,
        bias: None,
        moe: None,
    }
}

/// `devices` A100-like GPUs, 8 per NVLink domain, IB between nodes.
pub fn a100_system(devices: u32) -> System {
    System {
        name: format!("test-a100 x{devices}"),
        compute: Arc::new(TestGpu {
            matmul_efficiency: 0.7,
            launch_overhead: Seconds::from_micros(4.0),
        }),
        memory: MemoryHierarchy::new(vec![
            Arc::new(Tier {
                kind: "l2",
                level: TierLevel::OnChip,
                capacity: Bytes::from_mib(40.0),
                bandwidth: Bandwidth::from_gbs(7050.0),
                efficiency: 0.8,
            }),
            Arc::new(Tier {
                kind: "hbm2e",
                level: TierLevel::Device,
                capacity: Bytes::from_gb(80.0),
                bandwidth: Bandwidth::from_gbs(2039.0),
                efficiency: 0.85,
            }),
        ]),
        network: vec![
            Arc::new(Link::new("nvlink", 8, 300.0 * 0.8, 5.0)),
            Arc::new(Link::new("infiniband", u32::MAX, 25.0 * 0.8, 8.0)),
        ],
        devices,
    }
}

/// `devices` A100-SXM4-80GB built from the built-in `gpu`, `sram`, `hbm`, `nvlink` and
/// `infiniband` plugins through `registry`, with the numbers of
/// `configs/hardware/a100-sxm4-80gb.toml` (A100 datasheet: 312 TFLOP/s bf16/fp16 dense,
/// 19.5 TFLOP/s fp32, 108 SMs at 1.41 GHz, 80 GB HBM2e at 2.039 TB/s, 40 MB L2 at
/// 7.05 TB/s (DeepFlow), NVLink 3 600 GB/s bidirectional in domains of 8, one 200 Gb/s HDR
/// NIC per GPU) and the plugins' default efficiencies. The binary must link the plugin crates.
pub fn a100_from_registry(
    registry: &perfcast_core::Registry,
    devices: u32,
) -> Result<System, perfcast_core::ModelError> {
    use serde_json::json;
    let err = |e: perfcast_core::registry::RegistryError| {
        perfcast_core::ModelError::invalid(
            perfcast_core::Key::other("registry"),
            e.to_string(),
            "built-in plugin missing",
        )
    };
    let gpu = registry
        .compute_unit(
            "gpu",
            &json!({
                "name": "NVIDIA A100-SXM4-80GB",
                "sm_count": 108,
                "clock_ghz": 1.41,
                "matrix_tflops": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "int8": 624.0},
                "vector_tflops": {"fp32": 19.5}
            }),
        )
        .map_err(err)?;
    let l2 = registry
        .memory_tier("sram", &json!({"capacity_mb": 40.0, "bandwidth_tbs": 7.05}))
        .map_err(err)?;
    let hbm = registry
        .memory_tier(
            "hbm",
            &json!({"technology": "HBM2e", "capacity_gb": 80.0, "bandwidth_tbs": 2.039}),
        )
        .map_err(err)?;
    let nvlink = registry
        .interconnect(
            "nvlink",
            &json!({"bandwidth_gbs_bidir": 600.0, "domain_size": 8}),
        )
        .map_err(err)?;
    let ib = registry
        .interconnect("infiniband", &json!({"bandwidth_gbps": 200.0}))
        .map_err(err)?;
    Ok(System {
        name: format!("A100-SXM4-80GB x{devices}"),
        compute: gpu,
        memory: MemoryHierarchy::new(vec![l2, hbm]),
        network: vec![nvlink, ib],
        devices,
    })
}
