//! The parts of a layer's op program that latent attention and mixture-of-experts add: MLA's
//! projections and the MoE block ([`moe_block`]; their shapes are [`super::shape`]'s).
//!
//! The MoE block on one rank, forward (Megatron-Core's MoELayer; DeepSeek-V3 §3.2.2): the
//! router GEMM (`tokens x experts x hidden`, kept in the 16-bit format as FP8 recipes keep
//! it) and its top-k softmax; with an unfused dispatcher a permute that copies each token once
//! per routed expert (read and write `e` bytes per element) before the all-to-all; after the
//! dispatch a local sort into expert order (with more than one local expert); the experts as
//! grouped GEMMs (one batched GEMM of `local experts` groups of `rows per expert`, the busiest
//! rank's, for the up and the down projection, with the activation between); the sort undone;
//! with an unfused dispatcher the weighted un-permute after the combine (reads `top_k` rows
//! and writes one); the shared experts as a dense MLP on the layer's tokens. Backward: the
//! same ops' gradients (dX and dW GEMMs; the weight gradient of a grouped GEMM contracts each
//! expert's own rows). Token dispatch and combine themselves are collectives of the `expert`
//! strategy. With FP8, each expert GEMM input is cast as the dense GEMMs' are.

use super::modules::RecomputeModules;
use super::shape::{LayerShape, MoeShape};
use super::timer::{ClassTimes, OpClass, Timer};
use perfcast_core::op::{ComputeOp, Gemm, VectorOpKind};
use perfcast_core::ModelError;

/// The time of a block's ops and of its GEMMs.
#[derive(Debug, Clone, Copy, Default)]
pub struct BlockTime {
    pub total: f64,
    pub gemm: f64,
}

/// Time the MoE block of `x` (nothing for a dense layer), booking its ops into `acc`.
pub fn moe_block(
    timer: &Timer,
    x: &LayerShape,
    acc: &mut ClassTimes,
    backward: bool,
) -> Result<BlockTime, ModelError> {
    let Some(m) = &x.moe else {
        return Ok(BlockTime::default());
    };
    let b = Block {
        timer,
        x,
        m,
        backward,
    };
    let mut bt = BlockTime::default();
    b.router(acc, &mut bt)?;
    b.experts(acc, &mut bt)?;
    b.shared_experts(acc, &mut bt)?;
    Ok(bt)
}

/// What module recompute reruns of the MoE block's forward (`moe_act`: the routed experts'
/// activation; `shared_experts`: the shared experts' MLP), booked into `acc`.
pub fn rerun(
    timer: &Timer,
    x: &LayerShape,
    modules: RecomputeModules,
    acc: &mut ClassTimes,
) -> Result<(), ModelError> {
    let Some(m) = &x.moe else { return Ok(()) };
    let b = Block {
        timer,
        x,
        m,
        backward: false,
    };
    if modules.contains(RecomputeModules::MOE_ACT) {
        b.activation(acc, m.routed * m.f_dev)?;
    }
    if modules.contains(RecomputeModules::SHARED_EXPERTS) {
        b.shared_experts(acc, &mut BlockTime::default())?;
    }
    Ok(())
}

/// One MoE block's op program on one rank, forward or backward. Its parts add into one
/// [`BlockTime`] in program order.
struct Block<'a> {
    timer: &'a Timer<'a>,
    x: &'a LayerShape,
    m: &'a MoeShape,
    backward: bool,
}

impl Block<'_> {
    /// A permute, a cast or the router's softmax: booked as elementwise (casts as casts).
    fn vec(
        &self,
        acc: &mut ClassTimes,
        kind: VectorOpKind,
        el: u64,
        fl: f64,
        by: f64,
    ) -> Result<f64, ModelError> {
        let class = if kind == VectorOpKind::Cast {
            OpClass::Cast
        } else {
            OpClass::Elementwise
        };
        self.timer
            .add_as(acc, self.x.vec(kind, el, fl, by), 1.0, class)
    }

    /// The router (scores and top-k softmax, fp32 in and out), the permute that copies each
    /// token once per routed expert, and the local sort into expert order.
    fn router(&self, acc: &mut ClassTimes, bt: &mut BlockTime) -> Result<(), ModelError> {
        let (x, m, timer) = (self.x, self.m, self.timer);
        let (e, h, t) = (x.e(), x.h, m.tokens);
        // The router stays in the 16-bit format (Megatron-Core's fp32/bf16 router; DeepSeek-V3
        // §3.3.1 keeps the gating in BF16/FP32).
        let router = LayerShape {
            gemm_dtype: x.act_dtype,
            scaling: perfcast_core::GemmScaling::Tensor,
            cast: None,
            ..*x
        };
        let g = if !self.backward {
            timer.add(acc, router.gemm(t, m.experts, h), 1.0)?
        } else {
            timer.add(acc, router.gemm(t, h, m.experts), 1.0)?
                + x.weight_grad(timer, acc, router.wgrad(h, m.experts, t))?
        };
        bt.total += g;
        bt.gemm += g;
        let (fl, by) = if self.backward {
            (4.0, 12.0)
        } else {
            (6.0, 8.0)
        };
        bt.total += self.vec(acc, VectorOpKind::Softmax, t * m.experts, fl, by)?;
        if !m.fused_permute {
            // Forward one copy of each token per routed expert; backward the weighted
            // un-permute's gradient, each token's gradient to its k copies.
            let fl = if self.backward { 2.0 } else { 0.0 };
            let copies = t * m.top_k * h;
            bt.total += self.vec(acc, VectorOpKind::Elementwise, copies, fl, 2.0 * e)?;
        }
        self.local_sort(acc, bt)
    }

    /// The sort into (or out of) expert order with more than one local expert.
    fn local_sort(&self, acc: &mut ClassTimes, bt: &mut BlockTime) -> Result<(), ModelError> {
        if self.m.local_experts > 1 {
            let rows = self.m.routed * self.x.h;
            let by = 2.0 * self.x.e();
            bt.total += self.vec(acc, VectorOpKind::Elementwise, rows, 0.0, by)?;
        }
        Ok(())
    }

    /// The low-precision recipe's quantisations around `groups` GEMMs of `(mm, nn, kk)`, as
    /// the dense layer's (`ops::layer`): forward the input and the weights; backward the
    /// output gradient, the input and the weights laid out for the other GEMMs.
    fn casts(
        &self,
        acc: &mut ClassTimes,
        groups: u64,
        (mm, nn, kk): (u64, u64, u64),
    ) -> Result<f64, ModelError> {
        let (x, timer) = (self.x, self.timer);
        let Some(c) = x.cast else { return Ok(0.0) };
        let mut t = 0.0;
        if !self.backward {
            let input = x.cast_op(groups * mm * kk, c.amax + c.cast, c.scale, c.kernels);
            t += timer.add(acc, input, 1.0)?;
            let w = x.cast_op(groups * kk * nn, c.amax + c.cast, c.scale, c.kernels);
            t += timer.add(acc, w, x.weight_cast_share())?;
        } else {
            let grad = x.cast_op(
                groups * mm * nn,
                c.amax + c.grad_cast,
                2.0 * c.scale,
                c.kernels,
            );
            t += timer.add(acc, grad, 1.0)?;
            if !x.frozen() {
                let input = x.cast_op(groups * mm * kk, c.transpose, c.scale, 1);
                t += timer.add(acc, input, 1.0)?;
            }
            let w = x.cast_op(groups * kk * nn, c.transpose, c.scale, 1);
            t += timer.add(acc, w, x.weight_cast_share())?;
        }
        Ok(t)
    }

    /// The activation as the dense MLP's (fused or the framework's kernels) over `el`
    /// elements.
    fn activation(&self, acc: &mut ClassTimes, el: u64) -> Result<f64, ModelError> {
        let (_, act_pw, _, _) = self.x.pointwise();
        let (fl, by, kernels) = if self.backward {
            (10.0, act_pw.bwd, act_pw.bwd_kernels)
        } else {
            (8.0, act_pw.fwd, act_pw.fwd_kernels)
        };
        let op = self
            .x
            .pointwise_op(VectorOpKind::Activation, el, fl, by, kernels);
        self.timer.add(acc, op, 1.0)
    }

    /// The routed experts: grouped GEMMs, one group per local expert, the activation between
    /// them, the sort undone and (unfused) the weighted combine of each token's k outputs.
    fn experts(&self, acc: &mut ClassTimes, bt: &mut BlockTime) -> Result<(), ModelError> {
        let (x, m, timer) = (self.x, self.m, self.timer);
        let (g, r, h) = (m.local_experts, m.rows_per_expert, x.h);
        let grouped = |mm: u64, nn: u64, kk: u64, wgrad: bool| {
            let op = if wgrad {
                x.wgrad(mm, nn, kk)
            } else {
                x.gemm(mm, nn, kk)
            };
            match op {
                ComputeOp::Gemm(gm) => ComputeOp::Gemm(Gemm { batch: g, ..gm }),
                other => other,
            }
        };
        let up_n = (x.mat - 1) * m.f_dev;
        for (mm, nn, kk) in [(r, up_n, h), (r, h, m.f_dev)] {
            let t = if !self.backward {
                timer.add(acc, grouped(mm, nn, kk, false), 1.0)?
            } else {
                timer.add(acc, grouped(mm, kk, nn, false), 1.0)?
                    + x.weight_grad(timer, acc, grouped(kk, nn, mm, true))?
            };
            bt.total += t;
            bt.gemm += t;
            bt.total += self.casts(acc, g, (mm, nn, kk))?;
        }
        bt.total += self.activation(acc, m.routed * m.f_dev)?;
        self.local_sort(acc, bt)?;
        if !m.fused_permute {
            let (e, k, t) = (x.e(), m.top_k as f64, m.tokens);
            bt.total += if !self.backward {
                // Weighted sum of each token's k expert outputs.
                let by = (k + 1.0) * e;
                self.vec(acc, VectorOpKind::Elementwise, t * h, 2.0 * k, by)?
            } else {
                let copies = t * m.top_k * h;
                self.vec(acc, VectorOpKind::Elementwise, copies, 0.0, 2.0 * e)?
            };
        }
        Ok(())
    }

    /// The shared experts: a dense MLP over the layer's tokens.
    fn shared_experts(&self, acc: &mut ClassTimes, bt: &mut BlockTime) -> Result<(), ModelError> {
        let (x, m, timer) = (self.x, self.m, self.timer);
        if m.shared_f_dev == 0 {
            return Ok(());
        }
        let (st, h) = (m.shared_tokens, x.h);
        let up = (x.mat - 1) * m.shared_f_dev;
        for (mm, nn, kk) in [(st, up, h), (st, h, m.shared_f_dev)] {
            let t = if !self.backward {
                timer.add(acc, x.gemm(mm, nn, kk), 1.0)?
            } else {
                timer.add(acc, x.gemm(mm, kk, nn), 1.0)?
                    + x.weight_grad(timer, acc, x.wgrad(kk, nn, mm))?
            };
            bt.total += self.casts(acc, 1, (mm, nn, kk))?;
            bt.total += t;
            bt.gemm += t;
        }
        bt.total += self.activation(acc, st * m.shared_f_dev)?;
        Ok(())
    }
}
