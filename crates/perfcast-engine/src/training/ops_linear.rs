//! Low-precision linear layers a compute unit has measured whole
//! (`ComputeUnit::quantised_linear_ratio`, e.g. torchao's row-scaled float8 linears on H100:
//! `perfcast_kernels::rowwise`): the layer program books each at the unit's ratio times its
//! three 16-bit GEMMs, its quantisation included, instead of timing the GEMMs and the casts op
//! by op.

use super::ops::LayerProgram;
use super::shape::LayerShape;
use super::timer::ClassTimes;
use perfcast_core::op::{ComputeOp, Gemm, GemmScaling};
use perfcast_core::ModelError;

impl LayerShape {
    /// The 16-bit GEMM a measured low-precision one is timed against.
    pub(super) fn gemm16(&self, m: u64, n: u64, k: u64) -> ComputeOp {
        let d = self.act_dtype;
        ComputeOp::Gemm(Gemm {
            m,
            n,
            k,
            batch: 1,
            a: d,
            b: d,
            out: d,
            scaling: GemmScaling::Tensor,
        })
    }
}

impl LayerProgram<'_> {
    /// The forward GEMM of a linear the unit has measured whole, booked in `f`: its time, or
    /// `None` to time it op by op (out of the layer program's loop: its hot path stays
    /// small).
    #[inline(never)]
    pub(super) fn measured_forward(
        &self,
        f: &mut ClassTimes,
        (m, n, k): (u64, u64, u64),
    ) -> Result<Option<f64>, ModelError> {
        let x = self.x;
        let Some(r) = self.measured_linear(m, n, k)? else {
            return Ok(None);
        };
        (self.timer)
            .add_measured(f, x.gemm(m, n, k), x.gemm16(m, n, k), r)
            .map(Some)
    }

    /// The data- and weight-gradient GEMMs of a linear the unit has measured whole, booked
    /// in `b`: their time, or `None` to time them op by op.
    #[inline(never)]
    pub(super) fn measured_backward(
        &self,
        b: &mut ClassTimes,
        (m, n, k): (u64, u64, u64),
    ) -> Result<Option<f64>, ModelError> {
        let (x, timer) = (self.x, self.timer);
        let Some(r) = self.measured_linear(m, n, k)? else {
            return Ok(None);
        };
        let dgrad = timer.add_measured(b, x.gemm(m, k, n), x.gemm16(m, k, n), r)?;
        let wgrad = timer.add_measured(b, x.wgrad(k, n, m), x.gemm16(k, n, m), r)?;
        Ok(Some(dgrad + wgrad))
    }

    /// A low-precision linear of forward GEMM `(m, n, k)` the unit has measured whole
    /// (`ComputeUnit::quantised_linear_ratio`): its time over its three 16-bit GEMMs'. A
    /// fused GEMM of a framework that keeps its projections apart (`fused.projections`
    /// false) takes its parts' ratios, weighted by their FLOPs. `None`: its GEMMs and
    /// quantisation are timed op by op. Called only with a recipe (`x.cast`).
    fn measured_linear(&self, m: u64, n: u64, k: u64) -> Result<Option<f64>, ModelError> {
        let (x, timer) = (self.x, self.timer);
        let (q, kv) = (x.a_dev * x.d, x.kv_dev * x.d);
        let parts: &[u64] = match () {
            _ if x.fused.projections || k != x.h => &[n],
            _ if x.mla.is_none() && n == q + 2 * kv => &[q, kv, kv],
            _ if x.moe.is_none() && x.mat > 2 && n == (x.mat - 1) * x.f_dev => &[x.f_dev; 2],
            _ => &[n],
        };
        let mut sum = 0.0;
        for &p in parts {
            let measured = timer
                .unit
                .quantised_linear_ratio(x.scaling, [m, p, k], timer.memory)?;
            let Some(r) = measured else { return Ok(None) };
            sum += r * p as f64;
        }
        Ok(Some(sum / n as f64))
    }
}
