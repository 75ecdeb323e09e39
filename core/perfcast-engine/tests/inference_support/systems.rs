// Shared by the inference bench and integration tests (included with `#[path]`/`include!`):
// A100-SXM4-80GB and H100-SXM5-80GB systems built through the registry from the built-in
// `gpu`, `sram`, `hbm`, `nvlink` and `infiniband` plugins with their calibrated defaults, the
// same parameters as configs/hardware/{a100-sxm4-80gb,h100-sxm5-80gb}.toml.

use perfcast_core::hardware::MemoryHierarchy;
use perfcast_core::registry::Registry;
use perfcast_core::System;
use serde_json::json;

/// Which reference GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gpu {
    A100,
    H100,
}

/// `devices` GPUs of the given kind, 8 per NVLink domain, InfiniBand between nodes.
pub fn builtin_system(registry: &Registry, gpu: Gpu, devices: u32) -> System {
    let (name, compute, l2, hbm, nvlink, nic) = match gpu {
        // NVIDIA A100 datasheet r4: dense tensor peaks, 108 SMs at 1.41 GHz, 40 MB L2,
        // 80 GB HBM2e at 2.039 TB/s, NVLink 3 600 GB/s bidirectional, DGX A100 HDR 200 Gb/s.
        // L2 bandwidth 7.05 TB/s: DeepFlow a100 config (seed digest §2.3).
        Gpu::A100 => (
            "A100-SXM4-80GB",
            json!({"name": "NVIDIA A100-SXM4-80GB", "sm_count": 108, "clock_ghz": 1.41,
                   "matrix_tflops": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "int8": 624.0},
                   "vector_tflops": {"fp32": 19.5}}),
            json!({"capacity_mb": 40.0, "bandwidth_tbs": 7.05}),
            json!({"technology": "HBM2e", "capacity_gb": 80.0, "bandwidth_tbs": 2.039}),
            json!({"bandwidth_gbs_bidir": 600.0, "domain_size": 8}),
            json!({"bandwidth_gbps": 200.0}),
        ),
        // NVIDIA H100 datasheet (sparse figures halved): 132 SMs at 1.98 GHz, 50 MB L2,
        // 80 GB HBM3 at 3.35 TB/s, NVLink 4 900 GB/s bidirectional, DGX H100 NDR 400 Gb/s.
        // L2 bandwidth 8.14 TB/s: DeepFlow H100 config (NCU L2 peak, seed digest §2.3).
        Gpu::H100 => (
            "H100-SXM5-80GB",
            json!({"name": "NVIDIA H100-SXM5-80GB", "sm_count": 132, "clock_ghz": 1.98,
                   "matrix_tflops": {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp8": 1978.9, "int8": 1978.9},
                   "vector_tflops": {"fp32": 66.9}}),
            json!({"capacity_mb": 50.0, "bandwidth_tbs": 8.14}),
            json!({"technology": "HBM3", "capacity_gb": 80.0, "bandwidth_tbs": 3.35}),
            json!({"bandwidth_gbs_bidir": 900.0, "domain_size": 8}),
            json!({"bandwidth_gbps": 400.0}),
        ),
    };
    System {
        name: name.to_string(),
        compute: registry.compute_unit("gpu", &compute).expect("gpu plugin"),
        memory: MemoryHierarchy::new(vec![
            registry.memory_tier("sram", &l2).expect("sram plugin"),
            registry.memory_tier("hbm", &hbm).expect("hbm plugin"),
        ]),
        network: vec![
            registry
                .interconnect("nvlink", &nvlink)
                .expect("nvlink plugin"),
            registry
                .interconnect("infiniband", &nic)
                .expect("infiniband plugin"),
        ],
        devices,
    }
}
