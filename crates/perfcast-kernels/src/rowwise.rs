//! A measured low-precision linear layer: torchao's float8 training with row-wise scaling
//! on H100, timed whole against the same layer in bfloat16 (pytorch/ao, the float8 README's
//! "Rowwise scaling" table, `docs/static/fp8-rowwise-perf.png` @fdddb2cfa, 2025-06-06,
//! PyTorch 2.8.0a0+git48807d5; reproduced by `benchmarks/float8/float8_roofline.py
//! --shape_gen_name sweep --float8_recipe_name rowwise`; torchao is BSD-3-Clause).
//!
//! What was timed: GPU kernel time of the forward and backward of a compiled
//! `LayerNorm -> Linear -> Sigmoid` block (`LNLinearSigmoid` in the script) by the linear's
//! forward `M`, `K`, `N` (1,024 to 32,768 each), the float8 version with dynamic row-wise
//! scales (one per row of the activations, per column of the weight; PyTorch `_scaled_mm`'s
//! CUTLASS row-scaled GEMMs), its quantisation fused by `torch.compile` where it can be. The
//! table is the speedup `s = (P + L16) / (P + L8)`: `P` the LayerNorm and Sigmoid, `L16`
//! the linear's three 16-bit GEMMs, `L8` its three row-scaled GEMMs with their
//! quantisation. Small linears run slower in float8 than in bfloat16 (`s` 0.4-0.6 at `N` =
//! 1,024): the quantisation is memory-bound work a small GEMM does not amortise, and the
//! row-scaled kernels reach less than the per-tensor ones (pytorch/pytorch#147971), the
//! cause of torchtitan#1207 (float8 rowwise with tensor parallelism below bfloat16).
//!
//! [`MeasuredCompute`](crate::MeasuredCompute) answers
//! `ComputeUnit::quantised_linear_ratio` from it on the GPU it was measured on: the linear's
//! own ratio `L8 / L16 = ((P + L16) / s - P) / L16` ([`linear_ratio`]), with `L16` and `P`
//! timed by the unit at the nearest measured shape (`P`: the compulsory traffic of a
//! LayerNorm over `M x K` and a Sigmoid over `M x N`, forward and backward: [`BLOCK_BYTES`]).
//! The speedup is interpolated linearly in `log s` over `log2` of each dimension, and the
//! ratio held at the table's edges beyond them (training's 65,536-131,072 tokens per
//! micro-batch read at 32,768, where the rows have levelled off: `M` 16,384 and 32,768 differ
//! by 8% on average; a tensor-parallel shard's 128-column key and value projections read at
//! 1,024 columns, a slowdown the table may understate).

use perfcast_core::op::{ComputeOp, Gemm, VectorOp, VectorOpKind};
use perfcast_core::{ComputeUnit, DType, Engine, GemmScaling, MemoryHierarchy, ModelError};

/// The kernel tables' GPU the measurements were taken on (`perfcast kernels list`).
pub const GPU: &str = "h100_sxm";

/// Bytes per element of the block's LayerNorm (over `M x K`) and Sigmoid (over `M x N`),
/// forward and backward, in 16 bits: the forward reads and writes (2 + 2), the backward
/// reads the saved tensor and the gradient and writes the gradient (2 + 2 + 2).
pub const BLOCK_BYTES: f64 = 10.0;

/// The measured dimensions: 2^10 ... 2^15.
const FIRST_LOG2: u32 = 10;
const POINTS: usize = 6;
/// The smallest and the largest measured dimension.
const SMALLEST: u64 = 1 << FIRST_LOG2;
const LARGEST: u64 = SMALLEST << (POINTS - 1);

/// Speedup over bfloat16 by (`M`, `K`) row and `N` column (1,024 ... 32,768 each).
#[rustfmt::skip]
const SPEEDUP: [[f64; POINTS]; POINTS * POINTS] = [
    // M 1024; K 1024 ... 32768
    [0.42, 0.42, 0.50, 0.51, 0.56, 0.56],
    [0.40, 0.38, 0.42, 0.50, 0.50, 0.56],
    [0.48, 0.43, 0.46, 0.53, 0.57, 0.60],
    [0.45, 0.48, 0.54, 0.62, 0.60, 0.62],
    [0.46, 0.48, 0.54, 0.60, 0.60, 0.61],
    [0.45, 0.50, 0.55, 0.60, 0.62, 0.65],
    // M 2048
    [0.43, 0.43, 0.48, 0.55, 0.62, 0.65],
    [0.38, 0.45, 0.58, 0.65, 0.72, 0.75],
    [0.43, 0.50, 0.68, 0.78, 0.81, 0.82],
    [0.46, 0.58, 0.73, 0.82, 0.87, 0.89],
    [0.48, 0.62, 0.75, 0.83, 0.84, 0.85],
    [0.50, 0.64, 0.75, 0.84, 0.83, 0.99],
    // M 4096
    [0.45, 0.47, 0.57, 0.66, 0.72, 0.76],
    [0.43, 0.53, 0.70, 0.83, 0.90, 0.91],
    [0.44, 0.64, 0.84, 1.01, 1.01, 1.04],
    [0.53, 0.72, 0.91, 1.01, 1.07, 1.13],
    [0.53, 0.74, 0.92, 1.05, 1.10, 1.18],
    [0.54, 0.75, 0.93, 1.02, 1.17, 1.18],
    // M 8192
    [0.48, 0.52, 0.65, 0.77, 0.83, 0.84],
    [0.45, 0.64, 0.82, 1.01, 1.03, 1.06],
    [0.52, 0.76, 1.00, 1.13, 1.17, 1.19],
    [0.59, 0.85, 1.05, 1.20, 1.31, 1.41],
    [0.58, 0.82, 1.03, 1.22, 1.37, 1.40],
    [0.59, 0.82, 1.04, 1.30, 1.36, 1.46],
    // M 16384
    [0.48, 0.58, 0.73, 0.86, 0.85, 0.89],
    [0.51, 0.70, 0.90, 1.05, 1.07, 1.15],
    [0.57, 0.79, 1.02, 1.20, 1.26, 1.40],
    [0.61, 0.87, 1.08, 1.33, 1.39, 1.49],
    [0.59, 0.83, 1.07, 1.34, 1.42, 1.55],
    [0.60, 0.85, 1.16, 1.35, 1.48, 1.72],
    // M 32768
    [0.51, 0.62, 0.77, 0.87, 0.88, 0.94],
    [0.54, 0.73, 0.91, 1.08, 1.14, 1.27],
    [0.59, 0.81, 1.04, 1.28, 1.35, 1.49],
    [0.63, 0.87, 1.11, 1.41, 1.50, 1.62],
    [0.60, 0.83, 1.16, 1.39, 1.49, 1.73],
    [0.63, 0.93, 1.16, 1.48, 1.70, 1.52],
];

/// Grid cell and fraction of `x` along one measured dimension (held at the edges).
fn axis(x: u64) -> (usize, f64) {
    let l = ((x.max(1) as f64).log2() - FIRST_LOG2 as f64).clamp(0.0, (POINTS - 1) as f64);
    let i = (l.floor() as usize).min(POINTS - 2);
    (i, l - i as f64)
}

/// The measured speedup of the block whose linear's forward is `m x k` by `k x n`.
pub fn speedup(m: u64, k: u64, n: u64) -> f64 {
    let (im, fm) = axis(m);
    let (ik, fk) = axis(k);
    let (jn, fn_) = axis(n);
    let mut log = 0.0;
    for (dm, wm) in [(0, 1.0 - fm), (1, fm)] {
        for (dk, wk) in [(0, 1.0 - fk), (1, fk)] {
            for (dn, wn) in [(0, 1.0 - fn_), (1, fn_)] {
                let w = wm * wk * wn;
                if w > 0.0 {
                    log += w * SPEEDUP[(im + dm) * POINTS + ik + dk][jn + dn].ln();
                }
            }
        }
    }
    log.exp()
}

/// The linear's own time over its 16-bit GEMMs' from the block's speedup `s`: `l16` the
/// 16-bit GEMMs' time, `p` the LayerNorm's and Sigmoid's; at least `floor` (the linear
/// cannot beat its GEMMs at the 8-bit peak).
pub fn linear_ratio(s: f64, l16: f64, p: f64, floor: f64) -> f64 {
    (((p + l16) / s - p) / l16).max(floor)
}

/// `L8 / L16` of a row-scaled float8 linear whose forward GEMM is `[m, n, k]`, inferred at
/// the nearest measured shape (each dimension held within the table's, where the block's
/// LayerNorm and Sigmoid weighed what they weighed in the measurement) and held beyond it:
/// the 16-bit GEMMs and the LayerNorm and Sigmoid timed by `unit` (at its clock: the ratio
/// of times holds at any).
pub fn measured_ratio(
    unit: &dyn ComputeUnit,
    gemm: [u64; 3],
    memory: &MemoryHierarchy,
) -> Result<f64, ModelError> {
    let [m, n, k] = gemm.map(|x| x.clamp(SMALLEST, LARGEST));
    let gemm = |m, n, k| {
        ComputeOp::Gemm(Gemm {
            m,
            n,
            k,
            batch: 1,
            a: DType::Bf16,
            b: DType::Bf16,
            out: DType::Bf16,
            scaling: GemmScaling::Tensor,
        })
    };
    // Forward, data gradient, weight gradient.
    let mut l16 = 0.0;
    for op in [gemm(m, n, k), gemm(m, k, n), gemm(k, n, m)] {
        l16 += unit.op_time(&op, memory)?.time.0;
    }
    let pointwise = |kind, elements| {
        ComputeOp::Vector(VectorOp {
            kind,
            elements,
            flops_per_element: 8.0,
            bytes_per_element: BLOCK_BYTES,
            dtype: DType::Bf16,
            launches: 2,
        })
    };
    let mut p = 0.0;
    for op in [
        pointwise(VectorOpKind::Norm, m * k),
        pointwise(VectorOpKind::Activation, m * n),
    ] {
        p += unit.op_time(&op, memory)?.time.0;
    }
    let peak = |d| unit.peak(Engine::Matrix, d).map(|r| r.0);
    let floor = match (peak(DType::Bf16), peak(DType::Fp8)) {
        (Some(b), Some(f)) if f > 0.0 => b / f,
        // A unit without both peaks: H100's, 989 and 1,979 TFLOP/s dense (NVIDIA H100
        // datasheet), the GPU the table was measured on.
        _ => 989.0 / 1979.0,
    };
    Ok(linear_ratio(speedup(m, k, n), l16, p, floor))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's own points come back, and the edges hold.
    #[test]
    fn speedup_reproduces_the_table() {
        let table = [
            // (m, k, n, speedup)
            (1024, 1024, 1024, 0.42),
            (2048, 32768, 32768, 0.99),
            (8192, 8192, 8192, 1.20),
            (16384, 32768, 32768, 1.72),
            (32768, 32768, 32768, 1.52),
            (32768, 1024, 4096, 0.77),
            (4096, 16384, 2048, 0.74),
            // Beyond the edges: held.
            (131072, 8192, 8192, 1.41),
            (512, 512, 512, 0.42),
            (65536, 4096, 128, 0.59),
        ];
        for (m, k, n, want) in table {
            let got = speedup(m, k, n);
            assert!((got - want).abs() < 1e-12, "{m} {k} {n}: {got}");
        }
    }

    /// Between two points: their geometric mean at the midpoint (in log2).
    #[test]
    fn speedup_interpolates_in_log_space() {
        let mid = (2048.0f64 * 4096.0).sqrt().round() as u64;
        let got = speedup(8192, 8192, mid);
        let want = (0.85f64 * 1.05).sqrt();
        assert!((got - want).abs() < 1e-3, "{got} {want}");
    }

    /// The linear's ratio: `s` = 1 gives 1; with no LayerNorm or Sigmoid it is `1 / s`; the
    /// block's other ops make the linear's slowdown larger than the block's; the floor holds.
    #[test]
    fn linear_ratio_removes_the_blocks_other_ops() {
        let table = [
            // (s, l16, p, floor, ratio)
            (1.0, 1.0, 0.5, 0.5, 1.0),
            (0.5, 1.0, 0.0, 0.5, 2.0),
            (0.5, 1.0, 1.0, 0.5, 3.0),
            (1.25, 1.0, 0.0, 0.5, 0.8),
            (2.0, 1.0, 1.0, 0.5, 0.5),
        ];
        for (s, l16, p, floor, want) in table {
            let got = linear_ratio(s, l16, p, floor);
            assert!((got - want).abs() < 1e-12, "{s} {l16} {p}: {got}");
        }
    }

    /// The measured unit answers for row-scaled linears on the table's GPU only: the
    /// linear's ratio from its own 16-bit GEMMs and the block's LayerNorm and Sigmoid; other
    /// scalings and GPUs are the wrapped unit's (none here).
    #[test]
    fn a_unit_answers_on_the_measured_gpu_only() {
        use crate::op::Op;
        use crate::table::{Provenance, TableBuilder};
        use crate::{MeasuredCompute, Timings};
        use perfcast_core::FlopRate;
        use std::sync::Arc;
        /// 100 TFLOP/s in 16 bits, 200 in 8, 10 on the vector engine.
        struct Flat;
        impl ComputeUnit for Flat {
            fn kind(&self) -> &str {
                "flat"
            }
            fn peak(&self, e: Engine, d: DType) -> Option<FlopRate> {
                Some(FlopRate(match (e, d) {
                    (Engine::Vector, _) => 10e12,
                    (_, DType::Fp8) => 200e12,
                    _ => 100e12,
                }))
            }
        }
        let on = |gpu: &str| {
            let mut b = TableBuilder::new(gpu, Op::Gemm, Provenance::default());
            b.push("t", 1, &["bfloat16", "k"], &[64, 64, 64], 1.0)
                .unwrap();
            MeasuredCompute::new(
                Arc::new(Flat),
                Arc::new(Timings::new(b.finish("t").unwrap())),
            )
        };
        let mem = MemoryHierarchy::new(Vec::new());
        let (m, n, k) = (8192u64, 1024u64, 4096u64);
        let ratio = |u: &MeasuredCompute, s| u.quantised_linear_ratio(s, [m, n, k], &mem).unwrap();
        let h100 = on(GPU);
        // Three GEMMs of 2mnk FLOPs at 100 TFLOP/s; 8 FLOPs per element of m(k + n) at 10.
        let l16 = 3.0 * 2.0 * (m * n * k) as f64 / 100e12;
        let p = 8.0 * (m * (k + n)) as f64 / 10e12;
        let want = linear_ratio(speedup(m, k, n), l16, p, 0.5);
        let got = ratio(&h100, GemmScaling::Row).unwrap();
        assert!((got - want).abs() < 1e-9 * want, "{got} {want}");
        assert!(got > 1.0 / speedup(m, k, n), "{got}");
        // Beyond the table, the ratio of the nearest measured shape.
        let at = |g: [u64; 3]| {
            h100.quantised_linear_ratio(GemmScaling::Row, g, &mem)
                .unwrap()
        };
        assert_eq!(at([131072, 128, 4096]), at([32768, 1024, 4096]));
        assert_eq!(ratio(&h100, GemmScaling::Tensor), None);
        assert_eq!(ratio(&on("b200_sxm"), GemmScaling::Row), None);
    }
}
