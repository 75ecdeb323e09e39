//! Built-in GPU compute unit (`kind = "gpu"`).
//!
//! A GPU is a matrix engine (tensor cores) and a vector engine (SIMT cores), each with a
//! dense peak per dtype, spread over `sm_count` streaming multiprocessors. Achievable GEMM
//! throughput is the peak times named efficiency terms:
//!
//! - `matmul_efficiency`: the fraction of peak large, well-shaped GEMMs reach (cuBLAS/cuBLASLt
//!   on big square problems); the one calibrated constant per device.
//! - wave quantisation: output tiles of `tile_m x tile_n` are spread over the SMs in waves;
//!   a partial last wave idles SMs (NVIDIA, "Matrix Multiplication Background User's Guide",
//!   §"Wave quantization").
//! - tile quantisation: dimensions that are not multiples of the tile waste the padded part
//!   (same guide, §"Tile quantization"). Libraries pick narrower tiles for GEMMs with few rows
//!   (decode, small batches), down to the smallest row count of the MMA instruction
//!   (`min_tile_m`: 16 for Ampere's `mma.sync.m16n8k16`, 64 for Hopper's `wgmma.m64nNk16`,
//!   PTX ISA §9.7.13 and §9.7.15), so the row tile is the next power of two of `m` clamped to
//!   [`min_tile_m`, `tile_m`].
//! - reduction depth: a short k amortises each tile's prologue/epilogue poorly; efficiency
//!   scales as k / (k + `k_half`).
//!
//! Libraries choose among tile widths (`tile_n_choices`), and the efficiency per dtype may
//! differ (`matmul_efficiency_by_dtype`): see [`gemm`]. Flash attention kernels have their
//! own model per kernel family (`attention`, [`attention`]); a device without an entry for
//! a family times flash attention as a GEMM of depth `head_dim` (the model before the
//! families). Under a power limit below the rated power every engine's throughput scales with
//! the clock the limit leaves ([`power`]); with `matrix_pj_per_flop` the matrix engines run at
//! the clock their own power draw leaves ([`power::MatrixPower`]), so a big GEMM is throttled
//! and a small one is not.
//!
//! Vector ops run at the vector engine's peak for their dtype (fp32 if the table has no entry
//! for it); they are memory-bound in practice, so the memory tier's efficiency dominates.
//! Every kernel pays `launch_overhead_us` (CUDA launch plus prologue; overlapped with work
//! only when kernels are queued back to back, which the engine accounts for separately).

pub mod attention;
pub mod gemm;
pub mod power;

pub use attention::AttentionParams;
pub use power::PowerParams;

use perfcast_core::op::{AttentionKind, ComputeOp, GemmScaling};
use perfcast_core::params::{self, fraction, non_negative, physical, positive, PEAK_TFLOPS};
use perfcast_core::registry::Component;
use perfcast_core::{
    ComputeUnit, DType, Engine, FlopRate, ParamSpec, ParamType, PluginError, Seconds,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Parameters of `kind = "gpu"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuParams {
    /// Device name for reports.
    #[serde(default)]
    pub name: String,
    /// Dense matrix-engine peak per dtype, TFLOP/s (TOPS for integers), no sparsity.
    pub matrix_tflops: BTreeMap<DType, f64>,
    /// Vector-engine peak per dtype, TFLOP/s; `fp32` is the fallback for other dtypes.
    pub vector_tflops: BTreeMap<DType, f64>,
    /// Streaming multiprocessors (for wave quantisation).
    pub sm_count: u32,
    /// Boost clock, GHz (informational; the peaks already include it).
    #[serde(default)]
    pub clock_ghz: f64,
    /// Fraction of the matrix peak that large GEMMs reach.
    #[serde(default = "d_matmul_eff")]
    pub matmul_efficiency: f64,
    /// Fraction of the vector peak reached by vector ops.
    #[serde(default = "d_vector_eff")]
    pub vector_efficiency: f64,
    /// GEMM output tile (elements) one SM computes at a time.
    #[serde(default = "d_tile")]
    pub tile_m: u64,
    #[serde(default = "d_tile")]
    pub tile_n: u64,
    /// Smallest row tile kernels use for GEMMs with few rows.
    #[serde(default = "d_min_tile_m")]
    pub min_tile_m: u64,
    /// Reduction depth at which GEMM efficiency halves.
    #[serde(default = "d_k_half")]
    pub k_half: f64,
    /// Fixed cost per kernel launch, microseconds.
    #[serde(default = "d_launch")]
    pub launch_overhead_us: f64,
    /// `matmul_efficiency` per matrix dtype where it differs (e.g. `fp8`, whose kernels reach
    /// a smaller fraction of their doubled peak); other dtypes use `matmul_efficiency`.
    #[serde(default)]
    pub matmul_efficiency_by_dtype: BTreeMap<DType, f64>,
    /// Efficiency of 8- and 4-bit GEMMs per operand scaling relative to one scale per tensor
    /// (`matmul_efficiency_by_dtype` is the tensor-scaled kernels'): the scales a kernel
    /// applies in its main loop (block scaling on Hopper promotes and rescales the
    /// accumulator every 128 elements of K) or epilogue (row scaling) cost issue slots and
    /// registers. Default 1 (tensor cores that apply block scales in hardware, Blackwell's
    /// MX and NVFP4 formats, have no such cost).
    #[serde(default)]
    pub matmul_scaling_efficiency: BTreeMap<GemmScaling, f64>,
    /// Column-tile widths the GEMM libraries choose from per problem (default: `tile_n`
    /// alone).
    #[serde(default)]
    pub tile_n_choices: Vec<u64>,
    /// Width at which a narrow column tile's operand reuse halves its efficiency (0: no cost
    /// for narrow tiles).
    #[serde(default)]
    pub tile_n_half: f64,
    /// Edge of the square output tile whose operand reuse equals the kernels' from the
    /// on-chip tier (what sets a GEMM's L2 traffic in the roofline; default
    /// `max(tile_m, tile_n)`). With TMA multicast in a cluster, a cluster of CTAs shares
    /// operand loads: e.g. a 2x1 cluster of 256x256 two-SM tiles reads A once per 256 columns
    /// and B once per 512 rows, the reuse of a square tile of 2 / (1/256 + 1/512) = 341.
    #[serde(default)]
    pub l2_tile: Option<u64>,
    /// Flash attention per kernel family (`flash`, `flash3`, `cudnn`).
    #[serde(default)]
    pub attention: BTreeMap<AttentionKind, AttentionParams>,
    /// The power the peaks and efficiencies hold at (the TDP), W ([`power`]).
    #[serde(default)]
    pub rated_power_w: Option<f64>,
    /// The power limit the device runs under, W (default: the rated power).
    #[serde(default)]
    pub power_limit_w: Option<f64>,
    /// The clock-independent part of the rated power, as a fraction of it (default
    /// [`power::DEFAULT_STATIC_FRACTION`]).
    #[serde(default)]
    pub static_power_fraction: Option<f64>,
    /// Dynamic energy of one 16-bit matrix FLOP at the datasheet clock, pJ: with it the
    /// matrix engines' efficiencies hold at the datasheet clock and a GEMM runs at the clock
    /// its power draw leaves within the rated power or the limit ([`power::MatrixPower`]);
    /// without it they hold at the rated power (what a preset fitted to kernels measured there
    /// has) and only a limit moves the clock.
    #[serde(default)]
    pub matrix_pj_per_flop: Option<f64>,
}

// Defaults for a device without calibrated values (the presets in configs/hardware set their
// own where the validation cases calibrate them; see configs/validation/CALIBRATION.md).
//
// Large fp16/bf16 GEMMs reach about 80% of the tensor peak on A100 (NVIDIA Deep Learning
// Performance Guide, "Matrix Multiplication Background": ~250 of 312 TFLOP/s at 8192^3).
fn d_matmul_eff() -> f64 {
    0.8
}
// Modelling default, not a measurement: vector ops are memory-bound on every preset, so their
// time comes from the memory tier and this rarely matters.
fn d_vector_eff() -> f64 {
    0.8
}
// CUTLASS's default sm80 threadblock tile is 128x128 (CUTLASS "Efficient GEMM in CUDA").
fn d_tile() -> u64 {
    128
}
// Ampere's smallest tensor-core MMA has 16 rows (mma.sync.m16n8k16, PTX ISA §9.7.13).
fn d_min_tile_m() -> u64 {
    16
}
// Modelling parameter (a tile's fixed prologue/epilogue cost in units of reduction depth),
// fitted on the per-layer times of Korthikanti et al. 2022, Table 4 (A100).
fn d_k_half() -> f64 {
    64.0
}
// A CUDA kernel launch costs a few microseconds of host and device time (NVIDIA blog "Getting
// Started with CUDA Graphs", 2019: ~2-4 us per short kernel without graphs).
fn d_launch() -> f64 {
    3.0
}

/// The built-in GPU model.
#[derive(Debug, Clone)]
pub struct Gpu {
    pub params: GpuParams,
    matrix: [Option<f64>; 8],
    vector: [Option<f64>; 8],
    /// Clock relative to the kernel measurements' (the rated power's): the power limit's.
    clock: f64,
    /// The matrix engines' clock under their own power draw (`matrix_pj_per_flop`).
    matrix_power: Option<power::MatrixPower>,
    /// `params.attention` by kind code (no map lookup on the hot path).
    attention: [Option<AttentionParams>; 4],
    /// `params.matmul_scaling_efficiency` by scaling code.
    scaling: [f64; 5],
}

impl GpuParams {
    /// `matmul_efficiency` for GEMMs in `dtype`.
    pub fn matmul_efficiency_of(&self, dtype: DType) -> f64 {
        self.matmul_efficiency_by_dtype
            .get(&dtype)
            .copied()
            .unwrap_or(self.matmul_efficiency)
    }
}

impl Gpu {
    pub fn new(p: GpuParams) -> Result<Self, PluginError> {
        if p.matrix_tflops.is_empty() {
            return Err(PluginError::Params {
                path: "matrix_tflops".into(),
                message: "needs at least one dtype".into(),
            });
        }
        if !p.vector_tflops.contains_key(&DType::Fp32) {
            return Err(PluginError::Params {
                path: "vector_tflops".into(),
                message: "needs an `fp32` entry (the fallback for other dtypes)".into(),
            });
        }
        let mut matrix = [None; 8];
        for (d, v) in &p.matrix_tflops {
            matrix[d.code() as usize] =
                Some(physical(&format!("matrix_tflops.{d}"), *v, PEAK_TFLOPS)? * 1e12);
        }
        let mut vector = [None; 8];
        for (d, v) in &p.vector_tflops {
            vector[d.code() as usize] =
                Some(physical(&format!("vector_tflops.{d}"), *v, PEAK_TFLOPS)? * 1e12);
        }
        if p.sm_count == 0 {
            return Err(PluginError::Params {
                path: "sm_count".into(),
                message: "must be >= 1".into(),
            });
        }
        fraction("matmul_efficiency", p.matmul_efficiency)?;
        fraction("vector_efficiency", p.vector_efficiency)?;
        non_negative("k_half", p.k_half)?;
        non_negative("launch_overhead_us", p.launch_overhead_us)?;
        if p.tile_m == 0 || p.tile_n == 0 {
            return Err(PluginError::Params {
                path: "tile_m".into(),
                message: "tiles must be >= 1".into(),
            });
        }
        for (d, v) in &p.matmul_efficiency_by_dtype {
            fraction(&format!("matmul_efficiency_by_dtype.{d}"), *v)?;
        }
        let mut scaling = [1.0; 5];
        for (s, v) in &p.matmul_scaling_efficiency {
            scaling[*s as usize] =
                fraction(&format!("matmul_scaling_efficiency.{}", s.name()), *v)?;
        }
        if p.tile_n_choices.contains(&0) {
            return Err(PluginError::Params {
                path: "tile_n_choices".into(),
                message: "tile widths must be >= 1".into(),
            });
        }
        non_negative("tile_n_half", p.tile_n_half)?;
        if p.l2_tile == Some(0) {
            return Err(PluginError::Params {
                path: "l2_tile".into(),
                message: "must be >= 1".into(),
            });
        }
        for (kind, a) in &p.attention {
            if !kind.is_flash() {
                return Err(PluginError::Params {
                    path: format!("attention.{}", kind.name()),
                    message: "attention efficiencies are for flash kernel families (flash, \
                              flash3, cudnn); plain attention is timed as GEMMs"
                        .into(),
                });
            }
            a.validate(&format!("attention.{}", kind.name()))?;
        }
        let power = PowerParams {
            rated_power_w: p.rated_power_w,
            power_limit_w: p.power_limit_w,
            static_power_fraction: p.static_power_fraction,
        };
        let clock = power.clock_ratio()?;
        let matrix_power = match p.matrix_pj_per_flop {
            None => None,
            Some(pj) => {
                positive("matrix_pj_per_flop", pj)?;
                let peak16 = matrix[DType::Bf16.code() as usize]
                    .or(matrix[DType::Fp16.code() as usize])
                    .ok_or_else(|| PluginError::Params {
                        path: "matrix_pj_per_flop".into(),
                        message: "needs a bf16 or fp16 matrix peak (the energy is per 16-bit FLOP)"
                            .into(),
                    })?;
                Some(power.matrix_power(pj * 1e-12 * peak16)?)
            }
        };
        if p.min_tile_m == 0 || p.min_tile_m > p.tile_m {
            return Err(PluginError::Params {
                path: "min_tile_m".into(),
                message: format!(
                    "must be in [1, tile_m = {}], got {}",
                    p.tile_m, p.min_tile_m
                ),
            });
        }
        let mut attention = [None; 4];
        for (kind, a) in &p.attention {
            attention[*kind as usize] = Some(*a);
        }
        Ok(Gpu {
            params: p,
            matrix,
            vector,
            clock,
            matrix_power,
            attention,
            scaling,
        })
    }

    /// Fraction of the matrix peak a GEMM of shape (m, n, k) x batch in `dtype` reaches at
    /// the rated clock ([`gemm::efficiency`]).
    pub fn gemm_efficiency(&self, m: u64, n: u64, k: u64, batch: u64, dtype: DType) -> f64 {
        gemm::efficiency(&self.params, m, n, k, batch, dtype, self.peak_ratio(dtype))
    }

    /// The matrix peak of `dtype` over the 16-bit one (1 when either is missing).
    fn peak_ratio(&self, dtype: DType) -> f64 {
        let base =
            self.matrix[DType::Bf16.code() as usize].or(self.matrix[DType::Fp16.code() as usize]);
        match (self.matrix[dtype.code() as usize], base) {
            (Some(p), Some(b)) => p / b,
            _ => 1.0,
        }
    }
}

impl ComputeUnit for Gpu {
    fn kind(&self) -> &str {
        "gpu"
    }

    fn peak(&self, engine: Engine, dtype: DType) -> Option<FlopRate> {
        let i = dtype.code() as usize;
        match engine {
            Engine::Matrix => self.matrix[i].map(FlopRate),
            Engine::Vector => self.vector[i]
                .or(self.vector[DType::Fp32.code() as usize])
                .map(FlopRate),
        }
    }

    fn efficiency(&self, op: &ComputeOp) -> f64 {
        let e = match op {
            ComputeOp::Gemm(g) => {
                let d = g.compute_dtype();
                let scaled = if d.bytes() < 2.0 {
                    self.scaling[g.scaling as usize]
                } else {
                    1.0
                };
                self.gemm_efficiency(g.m, g.n, g.k, g.batch, d) * scaled
            }
            ComputeOp::Attention(a) => match &self.attention[a.kind as usize] {
                Some(p) => p.efficiency(a, self.params.sm_count),
                // Plain attention, or a family the device has no data for: score tiles per
                // (batch, head), reduction over head_dim (the forward QKᵀ) as a GEMM.
                None => {
                    self.gemm_efficiency(a.q_len, a.kv_len, a.head_dim, a.batch * a.heads, a.dtype)
                }
            },
            ComputeOp::Vector(_) => {
                return (self.params.vector_efficiency * self.clock).clamp(1e-4, 1.0)
            }
        };
        // The matrix engines: at the clock their own draw leaves, or the limit's.
        let clock = match &self.matrix_power {
            Some(m) => m.clock(e),
            None => self.clock,
        };
        (e * clock).clamp(1e-4, 1.0)
    }

    fn launch_overhead(&self) -> Seconds {
        Seconds::from_micros(self.params.launch_overhead_us)
    }

    /// The power limit's clock ratio ([`power`]; 1 without a limit below the rating).
    fn clock_ratio(&self) -> f64 {
        self.clock
    }

    fn gemm_tile(&self) -> u64 {
        self.params
            .l2_tile
            .unwrap_or(self.params.tile_m.max(self.params.tile_n))
    }
}

fn build(params: &serde_json::Value) -> Result<Component, PluginError> {
    let p: GpuParams = params::parse(params)?;
    Ok(Component::ComputeUnit(Arc::new(Gpu::new(p)?)))
}

/// The parameters of `kind = "gpu"` (`perfcast plugins --describe gpu`), defaults and sources
/// as in [`GpuParams`]'s default functions.
pub static PARAMS: &[ParamSpec] = &[
    ParamSpec::with_default("name", ParamType::String, "", "\"\"", "", "device name for reports", "-"),
    ParamSpec::required(
        "matrix_tflops",
        ParamType::Table,
        "TFLOP/s (TOPS for integers)",
        "a dtype -> 1e-3 to 1e7 table, at least one entry",
        "dense matrix-engine (tensor core) peak per dtype, no sparsity",
        "the device's datasheet (configs/hardware cites each)",
    ),
    ParamSpec::required(
        "vector_tflops",
        ParamType::Table,
        "TFLOP/s",
        "a dtype -> 1e-3 to 1e7 table with an `fp32` entry",
        "vector-engine (SIMT) peak per dtype; fp32 is the fallback for other dtypes",
        "the device's datasheet",
    ),
    ParamSpec::required("sm_count", ParamType::Integer, "", ">= 1", "streaming multiprocessors (for wave quantisation)", "the device's datasheet"),
    ParamSpec::with_default("clock_ghz", ParamType::Float, "GHz", "0.0", ">= 0", "boost clock (informational: the peaks already include it)", "the device's datasheet"),
    ParamSpec::with_default(
        "matmul_efficiency",
        ParamType::Float,
        "",
        "0.8",
        "(0, 1]",
        "fraction of the matrix peak large, well-shaped GEMMs reach",
        "NVIDIA Deep Learning Performance Guide, Matrix Multiplication Background: ~250 of 312 TFLOP/s at 8192^3 on A100",
    ),
    ParamSpec::with_default("vector_efficiency", ParamType::Float, "", "0.8", "(0, 1]", "fraction of the vector peak reached by vector ops", "modelling default (vector ops are memory-bound on every preset)"),
    ParamSpec::with_default("tile_m", ParamType::Integer, "elements", "128", ">= 1", "GEMM output-tile rows one SM computes at a time", "CUTLASS default sm80 threadblock tile 128x128"),
    ParamSpec::with_default("tile_n", ParamType::Integer, "elements", "128", ">= 1", "GEMM output-tile columns one SM computes at a time", "CUTLASS default sm80 threadblock tile 128x128"),
    ParamSpec::with_default("min_tile_m", ParamType::Integer, "elements", "16", "[1, tile_m]", "smallest row tile kernels use for GEMMs with few rows", "Ampere mma.sync.m16n8k16, PTX ISA 9.7.13 (64 for Hopper wgmma)"),
    ParamSpec::with_default("k_half", ParamType::Float, "elements", "64.0", ">= 0", "reduction depth at which GEMM efficiency halves", "fitted on Korthikanti et al. 2022, Table 4 per-layer times (A100)"),
    ParamSpec::with_default("launch_overhead_us", ParamType::Float, "us", "3.0", ">= 0", "fixed cost per kernel launch", "NVIDIA blog Getting Started with CUDA Graphs (2019): ~2-4 us per short kernel"),
    ParamSpec::with_default("matmul_efficiency_by_dtype", ParamType::Table, "", "{}", "a dtype -> (0, 1] table", "matmul_efficiency per matrix dtype where it differs (e.g. fp8); other dtypes use matmul_efficiency", "fitted per die on configs/validation/kernels.toml"),
    ParamSpec::with_default("matmul_scaling_efficiency", ParamType::Table, "", "{}", "an operand scaling -> (0, 1] table (tensor, row, block, ...)", "efficiency of 8- and 4-bit GEMMs per operand scaling relative to one scale per tensor (empty: 1, scales applied in hardware)", "fitted per die on configs/validation/kernels.toml (Hopper block scaling rescales every 128 of K)"),
        ParamSpec::with_default("tile_n_choices", ParamType::List, "elements", "[]", "widths >= 1", "column-tile widths the GEMM libraries choose from per problem (empty: tile_n alone)", "CUTLASS/cuBLAS kernel families"),
    ParamSpec::with_default("tile_n_half", ParamType::Float, "elements", "0.0", ">= 0", "width at which a narrow column tile's operand reuse halves its efficiency (0: no cost)", "fitted on configs/validation/kernels.toml"),
    ParamSpec::derived("l2_tile", ParamType::Integer, "elements", "max(tile_m, tile_n)", ">= 1", "edge of the square output tile whose operand reuse sets a GEMM's L2 traffic (e.g. 341 for 2x1 clusters of 256x256 two-SM tiles)", "NVIDIA Hopper/Blackwell TMA multicast in clusters"),
    ParamSpec::with_default("attention", ParamType::Table, "", "{}", "tables per kernel family: flash, flash3, cudnn", "flash-attention efficiency per kernel family (forward, backward, head_dim_half, kv_overhead, q_tile, ...)", "fitted per die on configs/validation/kernels.toml"),
    ParamSpec::derived("rated_power_w", ParamType::Float, "W", "none: no power model", "> 0", "the power the peaks and efficiencies hold at (the TDP)", "the device's datasheet"),
    ParamSpec::derived("power_limit_w", ParamType::Float, "W", "the rated power", "(0, rated_power_w]", "the power limit the device runs under (a limit only lowers the clock)", "the system's configuration"),
    ParamSpec::derived("matrix_pj_per_flop", ParamType::Float, "pJ", "none: the efficiencies hold at the rated power", "> 0; needs rated_power_w", "dynamic energy of a 16-bit matrix FLOP at the datasheet clock: the efficiencies then hold at that clock and a GEMM runs at the clock its power draw leaves within the rated power or the limit", "fitted to kernel tables with the GEMM terms (crates/perfcast-validation/src/kernel_tables.rs)"),
    ParamSpec::derived("static_power_fraction", ParamType::Float, "", "0.15 (power::DEFAULT_STATIC_FRACTION)", "[0, 1)", "the clock-independent part of the rated power", "bounded by idle draw at full clocks: H100 SXM 100-145 W of 700 W (0.14-0.21; wilicc/gpu-burn#114, NVIDIA-NeMo#9291), A100 62 W of 400 W (0.16); the clock at 500 W of 700 W moves 0.88-0.86 over 0.10-0.20"),
];

perfcast_core::builtin!(
    ComputeUnit,
    "gpu",
    "GPU: matrix and vector engines, peak per dtype, GEMM wave/tile efficiency, launch overhead",
    build,
    params = PARAMS
);

// `register(&mut Registry)`: this crate's built-ins, composed by `perfcast-builtins`.
perfcast_core::register_fn!();

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::op::Gemm;
    use serde_json::json;

    /// A100-SXM4 dense peaks: NVIDIA A100 Tensor Core GPU datasheet (r4), Table 1.
    fn a100() -> Gpu {
        let p = params::parse(&json!({
            "matrix_tflops": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "int8": 624.0},
            "vector_tflops": {"fp32": 19.5, "fp16": 78.0, "bf16": 39.0},
            "sm_count": 108
        }))
        .unwrap();
        Gpu::new(p).unwrap()
    }

    #[test]
    fn peaks_and_fallbacks() {
        let g = a100();
        assert_eq!(g.peak(Engine::Matrix, DType::Bf16).unwrap().tflops(), 312.0);
        assert!(g.peak(Engine::Matrix, DType::Fp8).is_none());
        // Vector fp8 falls back to fp32.
        assert_eq!(g.peak(Engine::Vector, DType::Fp8).unwrap().tflops(), 19.5);
    }

    #[test]
    fn efficiency_table() {
        let g = a100();
        // (m, n, k, batch, lower, upper)
        let table = [
            // Large square: close to matmul_efficiency (wave tail of 1024 tiles on 108 SMs).
            (8192, 8192, 8192, 1, 0.70, 0.80),
            // One full wave exactly: 108 tiles of 128x128.
            (128 * 12, 128 * 9, 4096, 1, 0.78, 0.80),
            // 109 tiles: a second wave with one tile -> about half.
            (128 * 109, 128, 4096, 1, 0.39, 0.41),
            // Decode-like m = 1: the 16-row tile wastes 15/16 of it, and its 64 tiles fill
            // 64 of 108 SMs: 0.8 x 1/16 x 64/108 x 8192/8256.
            (1, 8192, 8192, 1, 0.029, 0.030),
            // m = 16 fills the narrow tile; the single partial wave remains.
            (16, 8192, 8192, 1, 0.46, 0.48),
        ];
        for (m, n, k, b, lo, hi) in table {
            let e = g.efficiency(&ComputeOp::Gemm(Gemm::new(m, n, k, DType::Bf16).batched(b)));
            assert!(e >= lo && e <= hi, "{m}x{n}x{k}: {e}");
        }
    }

    #[test]
    fn bad_params_name_the_key() {
        let e = build(&json!({"matrix_tflops": {"bf16": 1.0}, "vector_tflops": {"fp32": 1.0}, "sm_count": 1, "matmul_efficiency": 1.5}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("matmul_efficiency"), "{e}");
        let e = build(
            &json!({"matrix_tflops": {"bf17": 1.0}, "vector_tflops": {"fp32": 1.0}, "sm_count": 1}),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("matrix_tflops"), "{e}");
        let e = build(&json!({"matrix_tflops": {"bf16": -1.0}, "vector_tflops": {"fp32": 1.0}, "sm_count": 1}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("matrix_tflops.bf16"), "{e}");
        let e = build(&json!({"matrix_tflops": {"bf16": 1.0}, "vector_tflops": {"fp32": 1.0}, "sm_count": 1, "smcount": 2}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("smcount"), "{e}");
        // The matrix power model: (params, what the error names).
        let table = [
            (json!({"matrix_pj_per_flop": 1.0}), "rated_power_w"),
            (
                json!({"matrix_pj_per_flop": -1.0, "rated_power_w": 700.0}),
                "matrix_pj_per_flop",
            ),
            (
                json!({"matrix_pj_per_flop": 1.0, "rated_power_w": 700.0, "power_limit_w": 800.0}),
                "power_limit_w",
            ),
        ];
        for (extra, what) in table {
            let mut p = json!({"matrix_tflops": {"bf16": 1000.0}, "vector_tflops": {"fp32": 60.0}, "sm_count": 132});
            for (k, v) in extra.as_object().unwrap() {
                p[k] = v.clone();
            }
            let e = build(&p).err().unwrap().to_string();
            assert!(e.contains(what), "{extra}: {e}");
        }
        let e = build(&json!({"matrix_tflops": {"fp8": 1000.0}, "vector_tflops": {"fp32": 60.0}, "sm_count": 132, "matrix_pj_per_flop": 1.0, "rated_power_w": 700.0}))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("bf16 or fp16"), "{e}");
    }

    /// With the matrix engines' power draw, a big GEMM runs at the clock its draw leaves and a
    /// small one at the datasheet clock; without it, at the rated power's.
    #[test]
    fn matrix_power_throttles_big_gemms_only() {
        let p = |pj: Option<f64>| {
            let mut p = json!({"matrix_tflops": {"bf16": 1000.0}, "vector_tflops": {"fp32": 60.0},
                "sm_count": 132, "matmul_efficiency": 0.9, "rated_power_w": 700.0});
            if let Some(pj) = pj {
                p["matrix_pj_per_flop"] = json!(pj);
            }
            Gpu::new(params::parse(&p).unwrap()).unwrap()
        };
        let gemm = |m: u64, n: u64, k: u64| {
            ComputeOp::Gemm(perfcast_core::Gemm {
                m,
                n,
                k,
                batch: 1,
                a: DType::Bf16,
                b: DType::Bf16,
                out: DType::Bf16,
                scaling: perfcast_core::GemmScaling::Tensor,
            })
        };
        // 1 pJ x 1000 TFLOP/s = 1000 W at the peak; 595 W of budget (700 W less 15%).
        let (plain, hot) = (p(None), p(Some(1.0)));
        let big = gemm(8192, 8192, 8192);
        let e0 = plain.efficiency(&big);
        let want = e0 * (595.0f64 / (1000.0 * e0)).cbrt();
        assert!((hot.efficiency(&big) - want).abs() < 1e-12, "{want}");
        let small = gemm(16, 1024, 1024);
        assert_eq!(hot.efficiency(&small), plain.efficiency(&small));
        let v = ComputeOp::Vector(perfcast_core::VectorOp {
            kind: perfcast_core::VectorOpKind::Elementwise,
            elements: 1 << 20,
            flops_per_element: 1.0,
            bytes_per_element: 4.0,
            dtype: DType::Fp32,
            launches: 1,
        });
        assert_eq!(hot.efficiency(&v), plain.efficiency(&v));
    }
}
