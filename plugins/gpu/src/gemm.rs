//! Efficiency of a (batched) GEMM: the fraction of the matrix peak the device's libraries
//! reach on a shape.
//!
//! `e = matmul_efficiency(dtype) · max over tile widths [tile · wave · width] · depth`
//!
//! - `matmul_efficiency(dtype)`: what large, well-shaped GEMMs reach (the best shape of a
//!   search reaches it with every other term near one).
//! - tile and wave quantisation: output tiles of `tile_m x tile_n` are spread over the SMs
//!   in waves; a partial last wave idles SMs, dimensions that are not tile multiples waste
//!   the padding (NVIDIA, "Matrix Multiplication Background User's Guide", §"Wave
//!   quantization", §"Tile quantization"). Libraries pick among tile shapes for a problem
//!   (cuBLAS heuristics, CUTLASS profiler, DeepGEMM's block-N search over widths): the row
//!   tile is the next power of two of `m` clamped to [`min_tile_m`, `tile_m`], the column
//!   tile the best of `tile_n_choices`; a narrower tile reuses each loaded A tile over fewer
//!   columns, which costs `width(tn) = tn / (tn + tile_n_half)` relative to the widest.
//! - reduction depth: a tile's fixed cost (pipeline fill, epilogue) is amortised over `k`:
//!   `depth = k / (k + k_half)`, with `k_half` given for 16-bit and scaled by the dtype's peak
//!   (an 8-bit reduction step takes half the time, the fixed cost does not change).

use super::GpuParams;
use perfcast_core::DType;

/// The column tiles a GEMM may use: `tile_n_choices`, or `tile_n` alone.
fn widths(p: &GpuParams) -> &[u64] {
    if p.tile_n_choices.is_empty() {
        std::slice::from_ref(&p.tile_n)
    } else {
        &p.tile_n_choices
    }
}

/// Fraction of the peak a GEMM of `m x n x k`, `batch` times, in `dtype` reaches;
/// `peak_ratio` is the dtype's matrix peak over the 16-bit one.
pub fn efficiency(
    p: &GpuParams,
    m: u64,
    n: u64,
    k: u64,
    batch: u64,
    dtype: DType,
    peak_ratio: f64,
) -> f64 {
    let tm = m.max(1).next_power_of_two().clamp(p.min_tile_m, p.tile_m);
    let tiles_m = m.div_ceil(tm).max(1);
    let util_m = m as f64 / (tiles_m * tm) as f64;
    let sms = p.sm_count as f64;
    let widest = widths(p).iter().copied().max().unwrap_or(p.tile_n).max(1) as f64;
    let width = |tn: f64| (tn / (tn + p.tile_n_half)) / (widest / (widest + p.tile_n_half));
    let mut best = 0.0f64;
    for &tn in widths(p) {
        let tn = tn.max(1);
        let tiles_n = n.div_ceil(tn).max(1);
        let util_n = n as f64 / (tiles_n * tn) as f64;
        let tiles = (tiles_m * tiles_n * batch.max(1)) as f64;
        let waves = (tiles / sms).ceil();
        let wave = tiles / (waves * sms);
        best = best.max(util_m * util_n * wave * width(tn as f64));
    }
    let k_half = p.k_half * peak_ratio.max(1e-9);
    let depth = k as f64 / (k as f64 + k_half);
    (p.matmul_efficiency_of(dtype) * best * depth).clamp(1e-4, 1.0)
}
