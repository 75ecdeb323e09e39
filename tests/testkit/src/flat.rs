//! A flat-efficiency GPU fixture for the inference and serving tests: dense peaks per dtype,
//! one GEMM efficiency for every op, a launch overhead, on the built-in `sram`, `hbm`,
//! `nvlink` and `infiniband` plugins (so expected times are closed forms).

use crate::systems::{link, tier};
use perfcast_core::hardware::{ComputeUnit, Engine, MemoryHierarchy};
use perfcast_core::{ComputeOp, DType, FlopRate, Seconds, System};
use serde_json::json;
use std::sync::Arc;

/// GPU fixture: dense peaks per dtype, one flat GEMM efficiency, a launch overhead.
pub struct Gpu {
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

/// A100-SXM4-80GB (NVIDIA A100 Tensor Core GPU datasheet, 2021): 312 TFLOP/s dense
/// bf16/fp16, 624 TOPS int8, 19.5 TFLOP/s fp32; 80 GB HBM2e at 2,039 GB/s; 40 MB L2
/// (7.05 TB/s, DeepFlow a100 config, seed digest §2.3); NVLink 3 600 GB/s = 300 GB/s per
/// direction, 8 GPUs per NVSwitch domain (DGX A100); HDR InfiniBand 200 Gb/s per GPU.
/// Efficiencies are fixture values: GEMMs 0.8 of peak, HBM 0.9, links 0.8.
pub fn a100(devices: u32) -> System {
    a100_launch(devices, 3.0)
}

/// [`a100`] with a chosen kernel launch overhead (0 for pure-roofline checks).
pub fn a100_launch(devices: u32, launch_us: f64) -> System {
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
        launch_us,
    )
}

/// H100-SXM5-80GB (NVIDIA H100 Tensor Core GPU datasheet, sparse figures halved): 989 TFLOP/s
/// dense bf16/fp16, 1,979 TFLOP/s fp8 and TOPS int8, 67 TFLOP/s fp32; 80 GB HBM3 at
/// 3.35 TB/s; 50 MB L2 (8.14 TB/s, DeepFlow H100 config); NVLink 4 900 GB/s = 450 GB/s per
/// direction, 8 GPUs per domain (DGX H100); NDR InfiniBand 400 Gb/s per GPU.
pub fn h100(devices: u32) -> System {
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
        3.0,
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
    launch_us: f64,
) -> System {
    System {
        name: name.to_string(),
        compute: Arc::new(Gpu {
            name,
            matrix,
            vector_tflops,
            efficiency: 0.8,
            launch_us,
        }),
        memory: MemoryHierarchy::new(vec![
            tier(
                "sram",
                json!({"capacity_mb": l2_mb, "bandwidth_tbs": l2_tbs, "efficiency": 0.8}),
            ),
            // No access latency: the tests' rooflines are bandwidth-only.
            tier(
                "hbm",
                json!({"capacity_gb": hbm_gb, "bandwidth_tbs": hbm_tbs, "efficiency": 0.9,
                       "latency_ns": 0.0}),
            ),
        ]),
        network: vec![
            link(
                "nvlink",
                json!({"bandwidth_gbs_bidir": 2.0 * nvlink_gbs, "domain_size": 8,
                       "efficiency": 0.8, "latency_us": 1.0, "base_latency_us": 0.0}),
            ),
            link(
                "infiniband",
                json!({"bandwidth_gbps": 400.0, "efficiency": 0.9, "latency_us": 5.0,
                       "base_latency_us": 0.0}),
            ),
        ],
        topology: None,
        devices,
    }
}
