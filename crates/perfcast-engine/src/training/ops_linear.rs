//! What the layer program adds around its linear layers: low-precision linears a compute
//! unit has measured whole (`ComputeUnit::quantised_linear_ratio`, e.g. torchao's row-scaled
//! float8 linears on H100: `perfcast_kernels::rowwise`), booked at the unit's ratio times
//! their three 16-bit GEMMs, quantisation included, instead of the GEMMs and casts op by op;
//! the quantisation ops themselves (and the share of a weight's cast a micro-batch runs); and
//! LoRA's adapters beside a targeted projection ([`super::lora`]).

use super::lora::LoraTarget;
use super::ops::LayerProgram;
use super::shape::LayerShape;
use super::timer::{ClassTimes, Timer};
use perfcast_core::op::{ComputeOp, Gemm, GemmScaling, VectorOp, VectorOpKind};
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
        if x.frozen() {
            return Ok(Some(dgrad));
        }
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

impl LayerShape {
    /// A quantisation of `elements` moving `bytes` per element (plus the recipe's scales) in
    /// `kernels` kernels.
    pub(super) fn cast_op(&self, elements: u64, bytes: f64, scale: f64, kernels: u32) -> ComputeOp {
        ComputeOp::Vector(VectorOp {
            kind: VectorOpKind::Cast,
            elements,
            flops_per_element: if bytes > 0.0 { 1.0 } else { 0.0 },
            bytes_per_element: bytes + scale,
            dtype: self.act_dtype,
            launches: kernels,
        })
    }
    /// Book weight-gradient GEMM `op` in `acc`: its time, or 0 (nothing booked) for a frozen
    /// weight.
    pub(super) fn weight_grad(
        &self,
        timer: &Timer,
        acc: &mut ClassTimes,
        op: ComputeOp,
    ) -> Result<f64, ModelError> {
        if self.frozen() {
            return Ok(0.0);
        }
        timer.add(acc, op, 1.0)
    }
    /// The share of a weight's quantisation one micro-batch runs (`weight_casts`).
    pub(super) fn weight_cast_share(&self) -> f64 {
        1.0 / self.weight_casts.max(1) as f64
    }
    /// The LoRA target GEMM `i` of [`LayerShape::gemms`] computes (`None`: a projection
    /// adapters cannot target: latent attention's down- and up-projections).
    pub(super) fn lora_target(&self, i: usize) -> Option<LoraTarget> {
        let attention = match &self.mla {
            None => 2,
            Some(l) => 4 + (l.q_rank > 0) as usize,
        };
        match i {
            _ if i + 1 < attention => self.mla.is_none().then_some(LoraTarget::LinearQkv),
            _ if i + 1 == attention => Some(LoraTarget::LinearProj),
            _ if i == attention => Some(LoraTarget::LinearFc1),
            _ => Some(LoraTarget::LinearFc2),
        }
    }
}

impl LayerProgram<'_> {
    /// The LoRA adapters of the layer's GEMM `i` (forward `(m, n, k)`, rank `r`), booked in
    /// `acc`: their GEMM time (0 without adapters there). Forward `xA` (`m x r x k`), its
    /// product with `B` (`m x n x r`) and the sum into the output; backward `dB = (xA)ᵀ·dY`,
    /// `d(xA) = dY·Bᵀ`, `dA = xᵀ·d(xA)`, `dx = d(xA)·Aᵀ` and the sum into the input's
    /// gradient. In the activations' precision, each adapter split over tensor parallelism
    /// as [`super::lora`] says.
    pub(super) fn adapter(
        &self,
        acc: &mut ClassTimes,
        i: usize,
        (m, n, k): (u64, u64, u64),
        backward: bool,
    ) -> Result<f64, ModelError> {
        let (x, timer) = (self.x, self.timer);
        let Some(l) = x.lora else { return Ok(0.0) };
        let Some(target) = x.lora_target(i).filter(|t| l.has(*t)) else {
            return Ok(0.0);
        };
        let a = LayerShape {
            gemm_dtype: x.act_dtype,
            scaling: GemmScaling::Tensor,
            cast: None,
            ..*x
        };
        let r = l.rank;
        // On this device: `A` is `k x ra`, `B` is `r x nb` (`super::lora`'s split).
        let (ra, nb) = if target.column_parallel() {
            (r.div_ceil(l.split.max(1)), n)
        } else {
            (r, n.div_ceil(l.split.max(1)))
        };
        let e = x.e();
        let (gemm, sum) = if !backward {
            let g =
                timer.add(acc, a.gemm(m, ra, k), 1.0)? + timer.add(acc, a.gemm(m, nb, r), 1.0)?;
            (g, m * n)
        } else {
            let g = timer.add(acc, a.wgrad(r, nb, m), 1.0)?
                + timer.add(acc, a.gemm(m, r, nb), 1.0)?
                + timer.add(acc, a.wgrad(k, ra, m), 1.0)?
                + timer.add(acc, a.gemm(m, k, ra), 1.0)?;
            (g, m * k)
        };
        timer.add(
            acc,
            x.vec(VectorOpKind::Elementwise, sum, 1.0, 3.0 * e),
            1.0,
        )?;
        Ok(gemm)
    }
}
