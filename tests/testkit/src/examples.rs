//! Parameters and ops for the example plugins of `plugins/examples` (acme-npu in Rust,
//! c-vendor in C), shared by the loader's tests and the ABI compatibility tests. The numbers
//! are fictional, like the plugins.

use perfcast_core::{ComputeOp, DType, Gemm, VectorOp, VectorOpKind};
use serde_json::{json, Value};

/// `acme/npu9`: 900 TFLOP/s bf16 on 8 cores of 128x128 arrays, 2.5 us per launch.
pub fn npu_params() -> Value {
    json!({
        "fp8_tops": 1800.0, "bf16_tflops": 900.0, "vector_tflops": 60.0,
        "cores": 8, "array_dim": 128, "launch_us": 2.5
    })
}

/// `acme/hbm-x`: 6 stacks of 1024 pins at 8 Gb/s, 24 GiB each.
pub fn hbm_x_params() -> Value {
    json!({ "stacks": 6, "pin_gbps": 8.0, "gib_per_stack": 24.0, "efficiency": 0.9, "latency_ns": 600.0 })
}

/// `cvendor/dsp1` with `extra` keys set on top (e.g. `{"nan_efficiency": 1}`).
pub fn dsp_params(extra: Value) -> Value {
    let mut p = json!({
        "bf16_tflops": 50.0, "int8_tops": 100.0, "vector_gflops": 2000.0,
        "mac_efficiency": 0.8, "launch_us": 4.0, "tile": 32
    });
    if let Some(extra) = extra.as_object() {
        for (k, v) in extra {
            p[k] = v.clone();
        }
    }
    p
}

/// `cvendor/lpddr`: 8 channels of 16 bits at 6400 MT/s, 32 GiB.
pub fn lpddr_params() -> Value {
    json!({"channels": 8, "bus_bits": 16, "mts": 6400, "capacity_gib": 32, "efficiency": 0.75, "latency_ns": 120})
}

/// A decode-step QKV GEMM (one row).
pub fn decode_qkv() -> ComputeOp {
    ComputeOp::Gemm(Gemm::new(1, 12288, 4096, DType::Bf16))
}

/// A large square GEMM (compute-bound everywhere).
pub fn big_gemm() -> ComputeOp {
    ComputeOp::Gemm(Gemm::new(4096, 4096, 4096, DType::Bf16))
}

/// A residual add over 8 Mi elements (memory-bound everywhere).
pub fn residual() -> ComputeOp {
    ComputeOp::Vector(VectorOp {
        kind: VectorOpKind::Elementwise,
        elements: 8_388_608,
        flops_per_element: 1.0,
        bytes_per_element: 6.0,
        dtype: DType::Bf16,
        launches: 1,
    })
}
