//! The hierarchical roofline (Williams, Waterman & Patterson 2009; extended to several memory
//! levels as in DeepFlow, Isaev et al. 2023): an op takes the longest of its compute time at
//! the achievable throughput and, for each memory tier, the traffic through that tier over the
//! tier's achievable bandwidth plus its latency; kernel launch overhead is added on top.

use crate::error::ModelError;
use crate::hardware::{ComputeUnit, Engine, MemoryHierarchy, OpTime, TimeBound};
use crate::op::{ComputeOp, Gemm};
use crate::units::{Bytes, Seconds};

/// Traffic of a tiled GEMM through a memory level when the level in front of it holds output
/// tiles of `tile` x `tile` elements: A is streamed once per column of tiles, B once per row
/// of tiles, C written once (the standard blocked-GEMM traffic count, e.g. Hong & Kung 1981;
/// DeepFlow's `getNumAccesses`). Never less than the compulsory traffic.
pub fn gemm_traffic(g: &Gemm, tile: u64) -> Bytes {
    let t = tile.max(1);
    let (m, n, k) = (g.m as f64, g.n as f64, g.k as f64);
    let col_tiles = g.n.div_ceil(t) as f64;
    let row_tiles = g.m.div_ceil(t) as f64;
    let bytes = g.batch as f64
        * (m * k * col_tiles * g.a.bytes()
            + k * n * row_tiles * g.b.bytes()
            + m * n * g.out.bytes());
    Bytes(bytes.max(g.min_bytes().0))
}

/// The square output tile that fits in `capacity` bytes of on-chip memory when a third is
/// used for the output tile in fp32 accumulators (the rest double-buffers the operands).
pub fn tile_for_capacity(capacity: Bytes) -> u64 {
    ((capacity.0 / 3.0 / 4.0).sqrt().floor() as u64).max(1)
}

/// Time `op` on `unit` with `memory` by the hierarchical roofline.
pub fn hierarchical<C: ComputeUnit + ?Sized>(
    unit: &C,
    op: &ComputeOp,
    memory: &MemoryHierarchy,
) -> Result<OpTime, ModelError> {
    let engine = Engine::of(op);
    let dtype = op.dtype();
    let peak = unit
        .peak(engine, dtype)
        .ok_or_else(|| ModelError::UnsupportedDType {
            device: unit.kind().to_string(),
            engine: engine.name().to_string(),
            dtype: dtype.name().to_string(),
        })?;
    let eff = unit.efficiency(op);
    if !(eff > 0.0 && eff <= 1.0 && peak.0 > 0.0 && peak.0.is_finite()) {
        return Err(ModelError::NonFinite {
            what: format!("{} peak·efficiency of `{}`", dtype, unit.kind()),
            value: peak.0 * eff,
        });
    }
    let flops = op.flops();
    let compute = Seconds(flops.0 / (peak.0 * eff));

    let mut mem_time = Seconds::ZERO;
    let mut bound_tier = None;
    let mut device_bytes = op.min_bytes();
    // Tile held in front of each tier: the core's tile for the first, the capacity of the
    // previous on-chip tier after that.
    let mut front_tile = unit.gemm_tile();
    for (i, tier) in memory.tiers.iter().enumerate() {
        let bytes = match op {
            ComputeOp::Gemm(g) => gemm_traffic(g, front_tile),
            _ => op.min_bytes(),
        };
        let bw = tier.effective_bandwidth();
        if !(bw.0 > 0.0 && bw.0.is_finite()) {
            return Err(ModelError::NonFinite {
                what: format!("bandwidth of memory tier `{}`", tier.kind()),
                value: bw.0,
            });
        }
        let t = Seconds(bytes.0 / bw.0) + tier.latency();
        if t.0 > mem_time.0 {
            mem_time = t;
            bound_tier = Some(i as u8);
        }
        device_bytes = bytes;
        front_tile = tile_for_capacity(tier.capacity()).max(front_tile);
    }

    let overhead = unit.launch_overhead() * op.launches() as f64;
    let busy = compute.max(mem_time);
    let bound = if overhead.0 > busy.0 {
        TimeBound::Overhead
    } else if compute.0 >= mem_time.0 {
        TimeBound::Compute
    } else {
        TimeBound::Memory(bound_tier.unwrap_or(0))
    };
    Ok(OpTime {
        time: busy + overhead,
        compute,
        memory: mem_time,
        overhead,
        bound,
        flops,
        device_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::hardware::{MemoryTier, TierLevel};
    use crate::op::{VectorOp, VectorOpKind};
    use crate::units::{Bandwidth, FlopRate};
    use std::sync::Arc;

    struct Dev;
    impl ComputeUnit for Dev {
        fn kind(&self) -> &str {
            "test"
        }
        fn peak(&self, e: Engine, d: DType) -> Option<FlopRate> {
            match (e, d) {
                (Engine::Matrix, DType::Bf16) => Some(FlopRate::from_tflops(100.0)),
                (Engine::Vector, _) => Some(FlopRate::from_tflops(10.0)),
                _ => None,
            }
        }
        fn launch_overhead(&self) -> Seconds {
            Seconds::from_micros(1.0)
        }
    }
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

    fn mem() -> MemoryHierarchy {
        MemoryHierarchy::new(vec![
            Arc::new(Tier(TierLevel::Device, 80e9, 1e12)),
            Arc::new(Tier(TierLevel::OnChip, 40e6, 5e12)),
        ])
    }

    #[test]
    fn big_gemm_is_compute_bound() {
        let op = ComputeOp::Gemm(Gemm::new(8192, 8192, 8192, DType::Bf16));
        let t = hierarchical(&Dev, &op, &mem()).unwrap();
        assert_eq!(t.bound, TimeBound::Compute);
        assert!((t.compute.0 - 2.0 * 8192f64.powi(3) / 100e12).abs() < 1e-12);
        assert!((t.time.0 - t.compute.0 - 1e-6).abs() < 1e-12);
    }

    #[test]
    fn skinny_gemm_is_device_memory_bound() {
        // Decode-like: m = 1. Intensity ~1 FLOP/B, ridge 100 FLOP/B.
        let op = ComputeOp::Gemm(Gemm::new(1, 8192, 8192, DType::Bf16));
        let m = mem();
        let t = hierarchical(&Dev, &op, &m).unwrap();
        assert_eq!(t.bound, TimeBound::Memory(m.device_index().unwrap() as u8));
        assert!(t.device_bytes.0 >= 2.0 * 8192.0 * 8192.0);
    }

    #[test]
    fn tiny_vector_op_is_overhead_bound_and_missing_dtype_errors() {
        let op = ComputeOp::Vector(VectorOp {
            kind: VectorOpKind::Norm,
            elements: 1000,
            flops_per_element: 5.0,
            bytes_per_element: 4.0,
            dtype: DType::Bf16,
            launches: 1,
        });
        assert_eq!(
            hierarchical(&Dev, &op, &mem()).unwrap().bound,
            TimeBound::Overhead
        );
        let fp8 = ComputeOp::Gemm(Gemm::new(64, 64, 64, DType::Fp8));
        assert!(matches!(
            hierarchical(&Dev, &fp8, &mem()),
            Err(ModelError::UnsupportedDType { .. })
        ));
    }

    #[test]
    fn gemm_traffic_never_below_compulsory() {
        let g = Gemm::new(4096, 4096, 4096, DType::Bf16);
        assert!(gemm_traffic(&g, 1 << 20).0 >= g.min_bytes().0);
        assert!(gemm_traffic(&g, 64).0 > gemm_traffic(&g, 256).0);
    }
}
