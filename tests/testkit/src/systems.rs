//! Systems for tests and benches, built from the real built-in plugins.
//!
//! Memory tiers and network levels always come from the built-in `sram`, `hbm`, `nvlink` and
//! `infiniband` plugins through [`registry`]; a test that needs other numbers passes other
//! parameters, never a re-implemented tier or link. The compute unit is either [`TestGpu`]
//! (one flat GEMM efficiency, so that tests can check the engine's composition against closed
//! forms) or the built-in `gpu` ([`a100_from_registry`]).
//!
//! Numbers: NVIDIA A100 Tensor Core GPU datasheet (2021): 312 TFLOP/s dense fp16/bf16 tensor
//! core, 19.5 TFLOP/s fp32 (vector), 80 GB HBM2e at 2,039 GB/s, 40 MB L2; NVLink 3 600 GB/s
//! total = 300 GB/s per direction through NVSwitch, 8 GPUs per DGX A100; one 200 Gb/s HDR
//! InfiniBand NIC per GPU (DGX A100 user guide) = 25 GB/s.

use perfcast_core::hardware::{ComputeUnit, Engine, Interconnect, MemoryHierarchy, MemoryTier};
use perfcast_core::registry::RegistryError;
use perfcast_core::{ComputeOp, DType, FlopRate, Key, ModelError, Registry, Seconds, System};
use serde_json::{json, Value};
use std::sync::Arc;

/// Every built-in plugin (`perfcast_builtins::registry()`).
pub fn registry() -> Registry {
    perfcast_builtins::registry().unwrap_or_else(|e| panic!("built-in registry: {e}"))
}

/// A memory tier of the built-in plugin `kind` (`sram`, `hbm`, `dram`, `host-dram`).
pub fn tier(kind: &str, params: Value) -> Arc<dyn MemoryTier> {
    registry()
        .memory_tier(kind, &params)
        .unwrap_or_else(|e| panic!("memory tier {kind} {params}: {e}"))
}

/// A network level of the built-in plugin `kind` (`nvlink`, `infiniband`, `roce`, `torus`).
pub fn link(kind: &str, params: Value) -> Arc<dyn Interconnect> {
    registry()
        .interconnect(kind, &params)
        .unwrap_or_else(|e| panic!("interconnect {kind} {params}: {e}"))
}

/// An A100-like compute unit with the datasheet's dense peaks and one flat efficiency for
/// GEMMs and attention (vector ops run at peak), so that expected times are closed forms.
/// Not a model of the built-in `gpu` (which adds wave and tile quantisation).
pub struct TestGpu {
    /// Fraction of the matrix peak every GEMM and attention core reaches.
    pub matmul_efficiency: f64,
    /// Fixed cost per kernel.
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

/// `devices` A100-like GPUs ([`TestGpu`] at 0.7 of peak, 4 us per kernel), 8 per NVLink
/// domain, InfiniBand between nodes. The tiers and links are the built-in plugins with fixture
/// efficiencies (not calibrated): L2 (40 MiB, 7.05 TB/s) at the `sram` default 0.8, HBM at
/// 0.85 with no access latency, NVLink and InfiniBand at 0.8 of their line rate with 5 us and
/// 8 us per step and no fixed cost per collective.
pub fn a100_system(devices: u32) -> System {
    System {
        name: format!("test-a100 x{devices}"),
        compute: Arc::new(TestGpu {
            matmul_efficiency: 0.7,
            launch_overhead: Seconds::from_micros(4.0),
        }),
        memory: MemoryHierarchy::new(vec![
            // 40 MiB, in the plugin's decimal MB.
            tier(
                "sram",
                json!({"capacity_mb": 40.0 * 1.048576, "bandwidth_tbs": 7.05, "efficiency": 0.8}),
            ),
            tier(
                "hbm",
                json!({"technology": "HBM2e", "capacity_gb": 80.0, "bandwidth_tbs": 2.039,
                       "efficiency": 0.85, "latency_ns": 0.0}),
            ),
        ]),
        network: vec![
            link(
                "nvlink",
                json!({"bandwidth_gbs_bidir": 600.0, "domain_size": 8, "efficiency": 0.8,
                       "latency_us": 5.0, "base_latency_us": 0.0}),
            ),
            link(
                "infiniband",
                json!({"bandwidth_gbps": 200.0, "efficiency": 0.8, "latency_us": 8.0,
                       "base_latency_us": 0.0}),
            ),
        ],
        topology: None,
        devices,
    }
}

/// `devices` A100-SXM4-80GB built from the built-in `gpu`, `sram`, `hbm`, `nvlink` and
/// `infiniband` plugins through `registry`, with the numbers of
/// `configs/hardware/a100-sxm4-80gb.toml` (A100 datasheet: 312 TFLOP/s bf16/fp16 dense,
/// 19.5 TFLOP/s fp32, 108 SMs at 1.41 GHz, 80 GB HBM2e at 2.039 TB/s, 40 MB L2 at
/// 7.05 TB/s (DeepFlow), NVLink 3 600 GB/s bidirectional in domains of 8, one 200 Gb/s HDR
/// NIC per GPU) and the plugins' default efficiencies.
pub fn a100_from_registry(registry: &Registry, devices: u32) -> Result<System, ModelError> {
    let err = |e: RegistryError| {
        ModelError::invalid(
            Key::other("registry"),
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
        topology: None,
        devices,
    })
}
