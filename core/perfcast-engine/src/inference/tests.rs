//! Tests of the inference model on A100-like and H100-like systems built from the core traits.

use super::*;
use perfcast_core::hardware::{ComputeUnit, Engine, Interconnect, MemoryHierarchy, MemoryTier};
use perfcast_core::workload::FfnAct;
use perfcast_core::{
    AttentionKind, Bandwidth, Bytes, ComputeOp, DType, FlopRate, Seconds, TierLevel,
};
use std::sync::Arc;

/// GPU fixture: dense peaks per dtype, one flat GEMM efficiency, a launch overhead.
pub(crate) struct Gpu {
    name: &'static str,
    /// (dtype, dense TFLOP/s)
    matrix: &'static [(DType, f64)],
    vector_tflops: f64,
    efficiency: f64,
    launch_us: f64,
}

impl ComputeUnit for Gpu {
    fn kind(&self) -> &str {
        self.name
    }
    fn peak(&self, engine: Engine, dtype: DType) -> Option<FlopRate> {
        match engine {
            Engine::Matrix => self
                .matrix
                .iter()
                .find(|(d, _)| *d == dtype)
                .map(|(_, t)| FlopRate::from_tflops(*t)),
            Engine::Vector => Some(FlopRate::from_tflops(self.vector_tflops)),
        }
    }
    fn efficiency(&self, _op: &ComputeOp) -> f64 {
        self.efficiency
    }
    fn launch_overhead(&self) -> Seconds {
        Seconds::from_micros(self.launch_us)
    }
}

pub(crate) struct Tier {
    kind: &'static str,
    level: TierLevel,
    capacity: Bytes,
    bandwidth: Bandwidth,
    efficiency: f64,
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

pub(crate) struct Link {
    kind: &'static str,
    domain: u32,
    bandwidth: Bandwidth,
    latency: Seconds,
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

/// A100-SXM4-80GB (NVIDIA A100 Tensor Core GPU datasheet, 2021): 312 TFLOP/s dense
/// bf16/fp16, 624 TOPS int8, 19.5 TFLOP/s fp32; 80 GB HBM2e at 2,039 GB/s; 40 MB L2
/// (7.05 TB/s, DeepFlow a100 config, seed digest §2.3); NVLink 3 600 GB/s = 300 GB/s per
/// direction, 8 GPUs per NVSwitch domain (DGX A100); HDR InfiniBand 200 Gb/s per GPU.
/// Efficiencies are fixture values: GEMMs 0.8 of peak, HBM 0.9, links 0.8.
pub(crate) fn a100(devices: u32) -> System {
    system(
        "test-a100",
        &[
            (DType::Bf16, 312.0),
            (DType::Fp16, 312.0),
            (DType::Tf32, 156.0),
            (DType::Int8, 624.0),
        ],
        19.5,
        (40.0, 7.05),
        (80.0, 2.039),
        300.0,
        devices,
    )
}

/// H100-SXM5-80GB (NVIDIA H100 Tensor Core GPU datasheet, sparse figures halved): 989 TFLOP/s
/// dense bf16/fp16, 1,979 TFLOP/s fp8 and TOPS int8, 67 TFLOP/s fp32; 80 GB HBM3 at
/// 3.35 TB/s; 50 MB L2 (8.14 TB/s, DeepFlow H100 config); NVLink 4 900 GB/s = 450 GB/s per
/// direction, 8 GPUs per domain (DGX H100); NDR InfiniBand 400 Gb/s per GPU.
pub(crate) fn h100(devices: u32) -> System {
    system(
        "test-h100",
        &[
            (DType::Bf16, 989.0),
            (DType::Fp16, 989.0),
            (DType::Tf32, 494.7),
            (DType::Fp8, 1979.0),
            (DType::Int8, 1979.0),
        ],
        66.9,
        (50.0, 8.14),
        (80.0, 3.35),
        450.0,
        devices,
    )
}

#[allow(clippy::too_many_arguments)]
fn system(
    name: &'static str,
    matrix: &'static [(DType, f64)],
    vector_tflops: f64,
    (l2_mb, l2_tbs): (f64, f64),
    (hbm_gb, hbm_tbs): (f64, f64),
    nvlink_gbs: f64,
    devices: u32,
) -> System {
    System {
        name: name.to_string(),
        compute: Arc::new(Gpu {
            name,
            matrix,
            vector_tflops,
            efficiency: 0.8,
            launch_us: 3.0,
        }),
        memory: MemoryHierarchy::new(vec![
            Arc::new(Tier {
                kind: "l2",
                level: TierLevel::OnChip,
                capacity: Bytes(l2_mb * 1e6),
                bandwidth: Bandwidth::from_tbs(l2_tbs),
                efficiency: 0.8,
            }),
            Arc::new(Tier {
                kind: "hbm",
                level: TierLevel::Device,
                capacity: Bytes::from_gb(hbm_gb),
                bandwidth: Bandwidth::from_tbs(hbm_tbs),
                efficiency: 0.9,
            }),
        ]),
        network: vec![
            Arc::new(Link {
                kind: "nvlink",
                domain: 8,
                bandwidth: Bandwidth::from_gbs(nvlink_gbs * 0.8),
                latency: Seconds::from_micros(1.0),
            }),
            Arc::new(Link {
                kind: "infiniband",
                domain: u32::MAX,
                bandwidth: Bandwidth::from_gbps(400.0 * 0.9),
                latency: Seconds::from_micros(5.0),
            }),
        ],
        devices,
    }
}

/// Llama-2 (Touvron et al. 2023, Table 1 and the released configs): 7B, 13B, 70B (GQA, 8 KV
/// heads).
pub(crate) fn llama2(size: u32) -> ModelSpec {
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

fn engine(size: u32, sys: System) -> Inference {
    Inference::new(llama2(size), sys, InferenceOptions::default()).unwrap()
}

#[test]
fn evaluates_a_plan() {
    let inf = engine(70, a100(8));
    let mut plan = InferencePlan::new(1, 200, 200);
    plan.tp = 8;
    let r = inf.evaluate(&plan).unwrap();
    assert!(r.ttft.0 > 0.0 && r.tpot.0 > 0.0 && r.latency.0 > r.ttft.0);
    assert!(r.memory.fits);
    let _ = AttentionKind::Plain;
}
