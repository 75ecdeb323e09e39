//! The analytical GEMM model against GEMM tables timed on silicon (`perfcast-kernels`): how
//! far a device's compute unit (its own model: `device.kernels = "none"`), at the rated power,
//! is from TensorRT-LLM's kernels on every shape of a table,
//! and the shape-aware GEMM parameters fitted to a table ([`fit_gemm`]).
//!
//! This is the seed paper's claim made testable: fit the model to the kernels of the GPUs
//! that exist and predict a GPU from its datasheet alone. [`FIT_PARAMS`] are the terms a
//! kernel timed alone contains: the GPU plugin's GEMM terms (`plugins/gpu/src/gemm.rs`: what
//! large GEMMs reach, `matmul_efficiency`; a tile's fixed cost in reduction steps, `k_half`;
//! the cost of a narrow column tile, `tile_n_half`), a kernel's fixed device-side cost
//! (`launch_overhead_us`: prologue, epilogue, the tail of the last wave), the fraction of the
//! HBM's peak a weight-bound GEMM streams (`efficiency` of the device-memory tier) and the
//! energy of a matrix FLOP (`matrix_pj_per_flop`: a big GEMM runs at the clock its power
//! draw leaves within the rated power, so a part rated at more watts runs it faster; with
//! it `matmul_efficiency` holds at the datasheet clock). The
//! objective is the mean absolute log error over the table's rows of one dtype (the kernel
//! measured on most shapes), every `stride`-th row, leaving out the shapes whose operands fit
//! in the device's on-chip memory: the tables time each shape in a loop on the same matrices,
//! so those run from a warm L2 (on H100, 1-row GEMMs with 4-16 MB of weights are measured
//! about 1.5x faster than HBM can stream the weights), which no layer of a model sees.

use crate::calibrate::optimize::{minimize, Settings};
use crate::presets::Hardware;
use crate::{Error, Result};
use perfcast_config::Plugins;
use perfcast_core::op::{ComputeOp, Gemm};
use perfcast_core::{DType, Engine, GemmScaling, System};
use perfcast_kernels::Timings;

/// Which component of the device a fitted parameter belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Compute,
    DeviceMemory,
}

/// The parameters a fit moves, each with its part and its box (the plugin's allowed range,
/// narrowed to what a GPU can plausibly have; searched in log space).
pub const FIT_PARAMS: [(Part, &str, f64, f64); 6] = [
    (Part::Compute, "matmul_efficiency", 0.4, 1.0),
    (Part::Compute, "k_half", 1.0, 1000.0),
    (Part::Compute, "tile_n_half", 1.0, 1000.0),
    (Part::Compute, "launch_overhead_us", 0.1, 20.0),
    (Part::DeviceMemory, "efficiency", 0.5, 1.0),
    (Part::Compute, "matrix_pj_per_flop", 0.05, 5.0),
];

/// Where a fit starts (box units): the presets' neighbourhood.
const FIT_START: [f64; 6] = [0.8, 0.5, 0.5, 0.5, 0.7, 0.5];

/// How the model does on a table's rows.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GemmCheck {
    pub rows: usize,
    /// Mean absolute percentage error of the predicted time.
    pub mape: f64,
    /// Mean signed error (predicted over measured, minus one).
    pub bias: f64,
    /// The same over the compute-bound rows (the table's kernel at half the dtype's peak or
    /// more).
    pub compute_bound_rows: usize,
    pub compute_bound_mape: f64,
}

/// The operand format and scaling of a table dtype.
fn format_of(dtype: &str) -> Option<(DType, GemmScaling)> {
    Some(match dtype {
        "bfloat16" => (DType::Bf16, GemmScaling::Tensor),
        "fp8" => (DType::Fp8, GemmScaling::Tensor),
        "fp8_block" => (DType::Fp8, GemmScaling::Block),
        "nvfp4" => (DType::Fp4, GemmScaling::Block),
        _ => return None,
    })
}

/// `(predicted, measured)` seconds of one row, and its FLOPs.
type Timed = (f64, f64, f64);

/// [`Timed`] of `system` on every `stride`-th row of `dtype` in `table`, and the dtype's
/// matrix peak.
fn timed(
    system: &System,
    table: &Timings,
    dtype: &str,
    stride: usize,
) -> Result<(Vec<Timed>, f64)> {
    let (fmt, scaling) = format_of(dtype)
        .ok_or_else(|| Error::KernelTable(format!("no GEMM format for table dtype `{dtype}`")))?;
    let kernel = table.main_kernel(&[dtype]).ok_or_else(|| {
        Error::KernelTable(format!("the {} table has no `{dtype}` rows", table.gpu()))
    })?;
    let t = table;
    let ids = [
        t.value_id(0, dtype).unwrap_or_default(),
        t.value_id(1, kernel).unwrap_or_default(),
    ];
    let peak = system
        .compute
        .peak(Engine::Matrix, fmt)
        .ok_or_else(|| Error::KernelTable(format!("the device has no {} matrix peak", fmt.name())))?
        .0;
    let mut out = Vec::new();
    let on_chip = system.memory.on_chip_capacity().0;
    let e = fmt.bytes();
    let rows = t
        .variant_rows(&ids)
        .map_err(|e| Error::KernelTable(e.to_string()))?;
    for r in rows.iter().step_by(stride.max(1)) {
        let [m, n, k] = [r.shape[0], r.shape[1], r.shape[2]];
        // A shape whose operands fit on chip is timed warm: the benchmark launches it again
        // and again on the same matrices, which stay in L2, as no layer of a model does.
        if ((m * k + k * n) as f64 * e + (m * n) as f64 * 2.0) <= on_chip {
            continue;
        }
        let op = ComputeOp::Gemm(Gemm {
            m,
            n,
            k,
            batch: 1,
            a: fmt,
            b: fmt,
            out: DType::Bf16,
            scaling,
        });
        let predicted = system.compute.op_time(&op, &system.memory)?.time.0;
        out.push((predicted, r.latency_ms * 1e-3, 2.0 * (m * n * k) as f64));
    }
    if out.is_empty() {
        return Err(Error::KernelTable(format!(
            "no `{dtype}` rows in the {} table",
            t.gpu()
        )));
    }
    Ok((out, peak))
}

/// The model of `system` against the rows of `dtype` in `table` (every `stride`-th one).
pub fn gemm_check(
    system: &System,
    table: &Timings,
    dtype: &str,
    stride: usize,
) -> Result<GemmCheck> {
    let (rows, peak) = timed(system, table, dtype, stride)?;
    let (mut c, mut sum, mut bias, mut cb) = (GemmCheck::default(), 0.0, 0.0, 0.0);
    for (predicted, measured, flops) in rows {
        let err = predicted / measured - 1.0;
        c.rows += 1;
        sum += err.abs();
        bias += err;
        if flops / measured >= 0.5 * peak {
            c.compute_bound_rows += 1;
            cb += err.abs();
        }
    }
    c.mape = sum / c.rows as f64;
    c.bias = bias / c.rows as f64;
    c.compute_bound_mape = cb / c.compute_bound_rows.max(1) as f64;
    Ok(c)
}

/// `hw` at the rated power with no end-to-end fit and the GEMM parameters `values` (in
/// [`FIT_PARAMS`] order; `None` keeps the preset's).
pub fn kernel_level(hw: &Hardware, plugins: &Plugins, values: Option<&[f64]>) -> Result<System> {
    let mut hw = hw.clone();
    let config = hw.config(&Plugins::none())?;
    let compute: String = config.extract("device.compute")?;
    let memory: Vec<String> = config.extract("device.memory")?;
    // The device tier: the memory component of a DRAM kind.
    let dram = memory
        .iter()
        .find(|m| {
            config
                .extract_opt::<String>(&format!("components.{m}.kind"))
                .ok()
                .flatten()
                .is_some_and(|k| matches!(k.as_str(), "hbm" | "gddr" | "lpddr"))
        })
        .cloned();
    // The compute unit's own model, not the tables the preset names.
    hw.set("device.kernels", "none");
    if let Some(v) = values {
        for ((part, name, _, _), x) in FIT_PARAMS.iter().zip(v) {
            let component = match part {
                Part::Compute => &compute,
                Part::DeviceMemory => dram.as_ref().ok_or_else(|| {
                    Error::KernelTable("the device has no HBM, GDDR or LPDDR tier".into())
                })?,
            };
            hw.set(&format!("components.{component}.{name}"), *x);
        }
    }
    hw.system(plugins)
}

/// The [`FIT_PARAMS`] values that minimise the mean absolute log error of the GEMMs of every
/// `(hardware, table)` pair of `targets` on the table's `dtype` rows (one parameter set shared
/// by all: fit on several GPUs, it is the generation's), and the check of each at them.
pub fn fit_gemm(
    targets: &[(Hardware, &Timings)],
    plugins: &Plugins,
    dtype: &str,
    stride: usize,
) -> Result<(Vec<f64>, Vec<GemmCheck>)> {
    let to_value = |u: &[f64]| -> Vec<f64> {
        FIT_PARAMS
            .iter()
            .zip(u)
            .map(|((_, _, lo, hi), x)| lo * (hi / lo).powf(*x))
            .collect()
    };
    let objective = |u: &[f64]| -> f64 {
        let values = to_value(u);
        let mut total = 0.0;
        for (hw, table) in targets {
            let Ok(system) = kernel_level(hw, plugins, Some(&values)) else {
                return f64::INFINITY;
            };
            match log_error(&system, table, dtype, stride) {
                Ok(e) => total += e,
                Err(_) => return f64::INFINITY,
            }
        }
        total / targets.len().max(1) as f64
    };
    let settings = Settings {
        max_evals: 600,
        ..Settings::default()
    };
    let best = minimize(objective, &FIT_START, &settings);
    let values = to_value(&best.x);
    let checks = targets
        .iter()
        .map(|(hw, table)| {
            gemm_check(
                &kernel_level(hw, plugins, Some(&values))?,
                table,
                dtype,
                stride,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((values, checks))
}

/// The mean absolute log error of `system`'s GEMM times on the table's rows.
fn log_error(system: &System, table: &Timings, dtype: &str, stride: usize) -> Result<f64> {
    let (rows, _) = timed(system, table, dtype, stride)?;
    let n = rows.len() as f64;
    Ok(rows.iter().map(|(p, m, _)| (p / m).ln().abs()).sum::<f64>() / n)
}
