//! A compute unit that times GEMMs from a GPU's measured table and everything else as the
//! unit it wraps: what a host builds for a device whose configuration names kernel tables
//! (`device.kernels`). The wrapped unit stays the plugin it is; this adapter only answers
//! [`ComputeUnit::op_time`] for the shapes the table covers.
//!
//! Which table rows stand for a GEMM (TensorRT-LLM's kernels, the ones its tables time):
//!
//! | operands (A / B), scaling      | table `dtype` |
//! |---|---|
//! | bf16 or fp16 / same            | `bfloat16` (fp16 runs the same tensor-core rate) |
//! | fp8 / fp8, per tensor or row   | `fp8` (cuBLAS per-tensor; row-wise scales run within a few percent of it) |
//! | fp8 / fp8, 1x128 / 128x128 blocks | `fp8_block` (DeepGEMM-style) |
//! | fp4 / fp4                      | `nvfp4` (16-element blocks) |
//! | bf16 / int8 or int4 (weight-only) | `int8_wo` / `int4_wo` (where the table has them) |
//!
//! of the kernel measured on the most shapes ([`Timings::main_kernel`]). A batched GEMM
//! (`batch > 1`: grouped expert GEMMs) is not a row of a dense-GEMM table (it reads `batch`
//! weight matrices), so it and every other op, and shapes outside the table, go to the
//! wrapped unit. A measured time is the kernel alone, at the GPU's default clocks and rated
//! power (AIConfigurator collects one kernel at a time): no launch overhead is added on top,
//! and a unit clocked below the measurements' clock (a power limit:
//! [`ComputeUnit::clock_ratio`]) takes the measured time over that ratio.
//!
//! The tables time each shape again and again on the same matrices, so a shape whose operands
//! fit in the on-chip memory runs from a warm L2 there (on H100, 1-row GEMMs with 4-16 MB of
//! weights are measured ~1.5x faster than HBM streams the weights), while in a model each
//! layer reads its own weights from device memory. For those shapes the time is at least the
//! wrapped unit's memory time (the roofline's device-memory traffic).

use crate::interp::{Path, Timings};
use perfcast_core::op::{ComputeOp, Gemm};
use perfcast_core::{
    ComputeUnit, DType, Engine, FlopRate, GemmScaling, MemoryHierarchy, ModelError, OpTime, Seconds,
};
use std::sync::Arc;

/// The table `dtype` that times a GEMM's operands and scaling, if any.
pub fn gemm_dtype(g: &Gemm) -> Option<&'static str> {
    Some(match (g.a, g.b, g.scaling) {
        (DType::Bf16 | DType::Fp16, DType::Bf16 | DType::Fp16, _) => "bfloat16",
        (DType::Fp8, DType::Fp8, GemmScaling::Block) => "fp8_block",
        (DType::Fp8, DType::Fp8, _) => "fp8",
        (DType::Fp4, DType::Fp4, _) => "nvfp4",
        (DType::Bf16 | DType::Fp16, DType::Int8, _) => "int8_wo",
        (DType::Bf16 | DType::Fp16, DType::Int4, _) => "int4_wo",
        _ => return None,
    })
}

/// A compute unit timing GEMMs from measured kernels.
pub struct MeasuredCompute {
    inner: Arc<dyn ComputeUnit>,
    gemm: Arc<Timings>,
    /// The main kernel of each table dtype, resolved once.
    kernels: Vec<(&'static str, Option<String>)>,
    /// The inner unit's clock relative to the measurements' ([`ComputeUnit::clock_ratio`]).
    clock: f64,
}

impl MeasuredCompute {
    pub fn new(inner: Arc<dyn ComputeUnit>, gemm: Arc<Timings>) -> Self {
        let kernels = [
            "bfloat16",
            "fp8",
            "fp8_block",
            "nvfp4",
            "int8_wo",
            "int4_wo",
        ]
        .into_iter()
        .map(|d| (d, gemm.main_kernel(&[d]).map(str::to_string)))
        .collect();
        let clock = inner.clock_ratio();
        MeasuredCompute {
            inner,
            gemm,
            kernels,
            clock: if clock.is_finite() && clock > 0.0 {
                clock
            } else {
                1.0
            },
        }
    }

    /// The table's GPU.
    pub fn gpu(&self) -> &str {
        &self.gemm.table.gpu
    }

    /// The measured or interpolated time of GEMM `g`, if the table covers it.
    pub fn gemm_time(&self, g: &Gemm) -> Option<(f64, Path)> {
        if g.batch > 1 {
            return None;
        }
        let dtype = gemm_dtype(g)?;
        let kernel = self
            .kernels
            .iter()
            .find(|(d, _)| *d == dtype)
            .and_then(|(_, k)| k.as_deref())?;
        let l = self.gemm.time(&[dtype, kernel], &[g.m, g.n, g.k])?;
        // Measured at the rated power's clock: a unit clocked lower (a power limit) takes
        // proportionally longer (its matrix engine's throughput scales with the clock).
        Some((l.latency_ms * 1e-3 / self.clock, l.path))
    }
}

impl ComputeUnit for MeasuredCompute {
    fn kind(&self) -> &str {
        self.inner.kind()
    }

    fn peak(&self, engine: Engine, dtype: DType) -> Option<FlopRate> {
        self.inner.peak(engine, dtype)
    }

    fn efficiency(&self, op: &ComputeOp) -> f64 {
        if let ComputeOp::Gemm(g) = op {
            if let (Some((t, _)), Some(peak)) = (
                self.gemm_time(g),
                self.inner.peak(Engine::Matrix, op.dtype()),
            ) {
                let e = op.flops().0 / (t * peak.0);
                if e.is_finite() && e > 0.0 {
                    return e.min(1.0);
                }
            }
        }
        self.inner.efficiency(op)
    }

    fn launch_overhead(&self) -> Seconds {
        self.inner.launch_overhead()
    }

    fn clock_ratio(&self) -> f64 {
        self.inner.clock_ratio()
    }

    fn gemm_tile(&self) -> u64 {
        self.inner.gemm_tile()
    }

    fn derived(&self) -> serde_json::Value {
        let mut d = self.inner.derived();
        if let serde_json::Value::Object(m) = &mut d {
            m.insert(
                "kernel_table".into(),
                serde_json::Value::String(format!(
                    "{} ({})",
                    self.gpu(),
                    self.gemm.table.provenance.framework
                )),
            );
        }
        d
    }

    fn op_time(&self, op: &ComputeOp, memory: &MemoryHierarchy) -> Result<OpTime, ModelError> {
        let analytical = self.inner.op_time(op, memory)?;
        let ComputeOp::Gemm(g) = op else {
            return Ok(analytical);
        };
        let Some((mut t, _)) = self.gemm_time(g) else {
            return Ok(analytical);
        };
        let e = |d: DType| d.bytes();
        let operands = (g.m * g.k) as f64 * e(g.a)
            + (g.k * g.n) as f64 * e(g.b)
            + (g.m * g.n) as f64 * e(g.out);
        if operands <= memory.on_chip_capacity().0 {
            t = t.max(analytical.memory.0);
        }
        // The measured kernel: its time whole, compute-bound where the roofline's memory
        // time is below it.
        Ok(OpTime {
            time: Seconds(t),
            compute: Seconds(t),
            overhead: Seconds::ZERO,
            bound: if analytical.memory.0 >= t {
                analytical.bound
            } else {
                perfcast_core::TimeBound::Compute
            },
            ..analytical
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Op;
    use crate::table::{Provenance, TableBuilder};

    /// A unit at 100 TFLOP/s in every format, no memory traffic modelled.
    struct Flat;
    impl ComputeUnit for Flat {
        fn kind(&self) -> &str {
            "flat"
        }
        fn peak(&self, _: Engine, _: DType) -> Option<FlopRate> {
            Some(FlopRate(100e12))
        }
    }

    /// [`Flat`] under a power limit that lowers its clock to 80%.
    struct Capped;
    impl ComputeUnit for Capped {
        fn kind(&self) -> &str {
            "capped"
        }
        fn peak(&self, _: Engine, _: DType) -> Option<FlopRate> {
            Some(FlopRate(80e12))
        }
        fn clock_ratio(&self) -> f64 {
            0.8
        }
    }

    #[test]
    fn a_unit_clocked_below_the_measurements_takes_longer_in_proportion() {
        let table = unit().gemm.clone();
        let u = MeasuredCompute::new(Arc::new(Capped), table);
        let mem = MemoryHierarchy::new(Vec::new());
        let t = u
            .op_time(&ComputeOp::Gemm(gemm(64, 1, DType::Bf16)), &mem)
            .unwrap()
            .time
            .0;
        assert!((t - 64e-6 / 0.8).abs() < 1e-12, "{t}");
        assert_eq!(u.clock_ratio(), 0.8);
    }

    fn unit() -> MeasuredCompute {
        let mut b = TableBuilder::new("toy", Op::Gemm, Provenance::default());
        let mut line = 0;
        for m in [64u64, 128] {
            for (kernel, scale) in [("cublas", 1.0), ("rare", 0.5)] {
                line += 1;
                b.push(
                    "t",
                    line,
                    &["bfloat16", kernel],
                    &[m, 1024, 1024],
                    scale * m as f64 * 1e-3,
                )
                .unwrap();
            }
        }
        // Only one shape for "rare": cublas is the main kernel.
        let mut t = b.finish("t").unwrap();
        t.rows.retain(|r| !(r.cat[1] == 1 && r.shape[0] == 128));
        MeasuredCompute::new(Arc::new(Flat), Arc::new(Timings::new(t)))
    }

    fn gemm(m: u64, batch: u64, dtype: DType) -> Gemm {
        Gemm {
            m,
            n: 1024,
            k: 1024,
            batch,
            a: dtype,
            b: dtype,
            out: DType::Bf16,
            scaling: GemmScaling::Tensor,
        }
    }

    #[test]
    fn table_shapes_are_measured_the_rest_is_the_wrapped_units() {
        let u = unit();
        let mem = MemoryHierarchy::new(Vec::new());
        let t = |g: Gemm| u.op_time(&ComputeOp::Gemm(g), &mem).unwrap().time.0;
        let flat = |g: Gemm| Flat.op_time(&ComputeOp::Gemm(g), &mem).unwrap().time.0;
        // The main kernel's rows (cublas): 64 -> 64 µs, 128 -> 128 µs, 96 between them.
        assert!((t(gemm(64, 1, DType::Bf16)) - 64e-6).abs() < 1e-12);
        let mid = t(gemm(96, 1, DType::Bf16));
        assert!(mid > 64e-6 && mid < 128e-6, "{mid}");
        assert_eq!(
            u.gemm_time(&gemm(96, 1, DType::Bf16)).unwrap().1,
            Path::Interpolated
        );
        // fp16 runs as bf16; batched GEMMs, other formats and shapes outside the table do not
        // come from it.
        assert!((t(gemm(64, 1, DType::Fp16)) - 64e-6).abs() < 1e-12);
        for g in [
            gemm(64, 2, DType::Bf16),
            gemm(64, 1, DType::Fp8),
            gemm(256, 1, DType::Bf16),
        ] {
            assert_eq!(t(g), flat(g), "{g:?}");
        }
    }

    #[test]
    fn a_shape_the_table_timed_warm_in_l2_streams_from_memory() {
        use perfcast_core::{Bandwidth, Bytes, MemoryTier, TierLevel};
        struct Tier(TierLevel, f64, f64);
        impl MemoryTier for Tier {
            fn kind(&self) -> &str {
                "t"
            }
            fn level(&self) -> TierLevel {
                self.0
            }
            fn capacity(&self) -> Bytes {
                Bytes(self.1)
            }
            fn bandwidth(&self) -> Bandwidth {
                Bandwidth(self.2)
            }
        }
        let u = unit();
        // 64 x 1024 x 1024 bf16: 2.3 MB of operands. A 1 GB/s memory streams them in ~2 ms,
        // far above the table's 64 µs; with 1 MB of L2 they do not fit and the table stands.
        let slow = |l2: f64| {
            MemoryHierarchy::new(vec![
                Arc::new(Tier(TierLevel::OnChip, l2, 1e15)) as Arc<dyn MemoryTier>,
                Arc::new(Tier(TierLevel::Device, 1e12, 1e9)),
            ])
        };
        let op = ComputeOp::Gemm(gemm(64, 1, DType::Bf16));
        let warm = u.op_time(&op, &slow(50e6)).unwrap().time.0;
        assert!(warm > 1e-3, "{warm}");
        let cold = u.op_time(&op, &slow(1e6)).unwrap().time.0;
        assert!((cold - 64e-6).abs() < 1e-12, "{cold}");
    }

    #[test]
    fn operand_formats_map_onto_the_tables_dtypes() {
        let mut g = gemm(1, 1, DType::Fp8);
        assert_eq!(gemm_dtype(&g), Some("fp8"));
        g.scaling = GemmScaling::Block;
        assert_eq!(gemm_dtype(&g), Some("fp8_block"));
        g.b = DType::Int4;
        g.a = DType::Bf16;
        assert_eq!(gemm_dtype(&g), Some("int4_wo"));
        g.a = DType::Fp32;
        g.b = DType::Fp32;
        assert_eq!(gemm_dtype(&g), None);
    }
}
