//! `minimal/npu-rs`: the smallest useful accelerator plugin in Rust, a template to copy (the C
//! one is `plugins/examples/c-minimal`; a fuller one with its own op timing and memory and
//! link components is `plugins/examples/acme-npu`).
//!
//! A compute unit with a matrix engine (bf16/fp16 at `matrix_tflops`, fp8 at twice that), a
//! vector engine (16 to 32-bit at `vector_tflops`), one GEMM efficiency and a launch cost. The
//! device's memory tiers and links stay the configuration's built-in ones, and perfcast times
//! every op with its hierarchical roofline over these figures. Everything about it is made up.
//! Build and run: see README.md beside it.

use perfcast_core::param_spec::{ParamSpec, ParamType};
use perfcast_core::params::{fraction, non_negative, positive};
use perfcast_core::{ComputeOp, ComputeUnit, DType, Engine, FlopRate, PluginError, Seconds};
use serde::Deserialize;

/// The component's table of the configuration: serde reads it, and refuses a key it does not
/// know (`deny_unknown_fields`), naming it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    matrix_tflops: f64,
    vector_tflops: f64,
    efficiency: Option<f64>,
    launch_us: Option<f64>,
}

/// The parameters as `perfcast plugins --describe minimal/npu-rs` lists them.
#[rustfmt::skip]
static PARAMS: &[ParamSpec] = &[
    ParamSpec::required("matrix_tflops", ParamType::Float, "TFLOP/s", "> 0", "bf16/fp16 peak", "made up"),
    ParamSpec::required("vector_tflops", ParamType::Float, "TFLOP/s", "> 0", "vector peak", "made up"),
    ParamSpec::with_default("efficiency", ParamType::Float, "", "0.8", "(0, 1]", "of the GEMM peak", "made up"),
    ParamSpec::with_default("launch_us", ParamType::Float, "us", "3.0", ">= 0", "per kernel", "made up"),
];

/// The device: peaks in TFLOP/s, the GEMM efficiency, the launch cost.
pub struct Npu {
    matrix: f64,
    vector: f64,
    efficiency: f64,
    launch: Seconds,
}

/// Build it from its parameters, each checked (the error names the key and the range).
pub fn build(p: Params) -> Result<Npu, PluginError> {
    Ok(Npu {
        matrix: positive("matrix_tflops", p.matrix_tflops)?,
        vector: positive("vector_tflops", p.vector_tflops)?,
        efficiency: fraction("efficiency", p.efficiency.unwrap_or(0.8))?,
        launch: Seconds::from_micros(non_negative("launch_us", p.launch_us.unwrap_or(3.0))?),
    })
}

impl ComputeUnit for Npu {
    fn kind(&self) -> &str {
        "minimal/npu-rs"
    }

    fn peak(&self, engine: Engine, dtype: DType) -> Option<FlopRate> {
        let tflops = match (engine, dtype) {
            (Engine::Matrix, DType::Bf16 | DType::Fp16) => self.matrix,
            (Engine::Matrix, DType::Fp8) => 2.0 * self.matrix,
            (Engine::Vector, DType::Fp32 | DType::Tf32 | DType::Bf16 | DType::Fp16) => self.vector,
            _ => return None, // no such path: the host says so, naming the op
        };
        Some(FlopRate::from_tflops(tflops))
    }

    fn efficiency(&self, op: &ComputeOp) -> f64 {
        match op {
            ComputeOp::Vector(_) => 1.0,
            _ => self.efficiency,
        }
    }

    fn launch_overhead(&self) -> Seconds {
        self.launch
    }
}

perfcast_abi::export_plugin! {
    name: "minimal-rs",
    version: env!("CARGO_PKG_VERSION"),
    compute_units: [
        "minimal/npu-rs" => build : "a made-up NPU: matrix and vector peaks, one GEMM efficiency" [PARAMS],
    ],
}
