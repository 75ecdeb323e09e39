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

use super::shape::LayerShape;
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
    let e = x.e();
    let h = x.h;
    let mut bt = BlockTime::default();
    // The router stays in the 16-bit format (Megatron-Core's fp32/bf16 router; DeepSeek-V3
    // §3.3.1 keeps the gating in BF16/FP32).
    let router = LayerShape {
        gemm_dtype: x.act_dtype,
        scaling: perfcast_core::GemmScaling::Tensor,
        cast: None,
        ..*x
    };
    let (_, act_pw, _, _) = x.pointwise();
    let rows = m.routed * h;
    // Permutes, casts and the router's softmax, booked as elementwise (casts as casts).
    let vec = |acc: &mut ClassTimes, kind: VectorOpKind, el: u64, fl: f64, by: f64| {
        let class = if kind == VectorOpKind::Cast {
            OpClass::Cast
        } else {
            OpClass::Elementwise
        };
        timer.add_as(acc, x.vec(kind, el, fl, by), 1.0, class)
    };
    // Router: scores, top-k softmax (fp32 in, fp32 out).
    let t = m.tokens;
    if !backward {
        let g = timer.add(acc, router.gemm(t, m.experts, h), 1.0)?;
        bt.total += g;
        bt.gemm += g;
        bt.total += vec(acc, VectorOpKind::Softmax, t * m.experts, 6.0, 8.0)?;
        if !m.fused_permute {
            // One copy of each token per routed expert.
            bt.total += vec(
                acc,
                VectorOpKind::Elementwise,
                t * m.top_k * h,
                0.0,
                2.0 * e,
            )?;
        }
        if m.local_experts > 1 {
            bt.total += vec(acc, VectorOpKind::Elementwise, rows, 0.0, 2.0 * e)?;
        }
    } else {
        let g = timer.add(acc, router.gemm(t, h, m.experts), 1.0)?
            + timer.add(acc, router.wgrad(h, m.experts, t), 1.0)?;
        bt.total += g;
        bt.gemm += g;
        bt.total += vec(acc, VectorOpKind::Softmax, t * m.experts, 4.0, 12.0)?;
        if !m.fused_permute {
            // The weighted un-permute's gradient: each token's gradient to its k copies.
            bt.total += vec(
                acc,
                VectorOpKind::Elementwise,
                t * m.top_k * h,
                2.0,
                2.0 * e,
            )?;
        }
        if m.local_experts > 1 {
            bt.total += vec(acc, VectorOpKind::Elementwise, rows, 0.0, 2.0 * e)?;
        }
    }
    // The low-precision recipe's quantisations around `groups` GEMMs of `(mm, nn, kk)`, as
    // the dense layer's (`ops::layer`): forward the input and the weights; backward the
    // output gradient, the input and the weights laid out for the other GEMMs.
    let casts = |acc: &mut ClassTimes,
                 groups: u64,
                 mm: u64,
                 nn: u64,
                 kk: u64,
                 backward: bool|
     -> Result<f64, ModelError> {
        let Some(c) = x.cast else { return Ok(0.0) };
        let mut t = 0.0;
        if !backward {
            let input = x.cast_op(groups * mm * kk, c.amax + c.cast, c.scale, c.kernels);
            t += timer.add(acc, input, 1.0)?;
            let w = x.cast_op(groups * kk * nn, c.amax + c.cast, c.scale, c.kernels);
            t += timer.add(acc, w, 1.0)?;
        } else {
            let grad = x.cast_op(
                groups * mm * nn,
                c.amax + c.grad_cast,
                2.0 * c.scale,
                c.kernels,
            );
            t += timer.add(acc, grad, 1.0)?;
            t += timer.add(
                acc,
                x.cast_op(groups * mm * kk, c.transpose, c.scale, 1),
                1.0,
            )?;
            t += timer.add(
                acc,
                x.cast_op(groups * kk * nn, c.transpose, c.scale, 1),
                1.0,
            )?;
        }
        Ok(t)
    };
    // The experts: grouped GEMMs, one group per local expert.
    let (g, r) = (m.local_experts, m.rows_per_expert);
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
    let mlp = [(r, up_n, h), (r, h, m.f_dev)];
    for (mm, nn, kk) in mlp {
        if !backward {
            let t = timer.add(acc, grouped(mm, nn, kk, false), 1.0)?;
            bt.total += t;
            bt.gemm += t;
            bt.total += casts(acc, g, mm, nn, kk, false)?;
        } else {
            let t = timer.add(acc, grouped(mm, kk, nn, false), 1.0)?
                + timer.add(acc, grouped(kk, nn, mm, true), 1.0)?;
            bt.total += t;
            bt.gemm += t;
            bt.total += casts(acc, g, mm, nn, kk, true)?;
        }
    }
    // The activation as the dense MLP's (fused or the framework's kernels).
    let (act_kind, fl, by, kernels) = if backward {
        (
            VectorOpKind::Activation,
            10.0,
            act_pw.bwd,
            act_pw.bwd_kernels,
        )
    } else {
        (
            VectorOpKind::Activation,
            8.0,
            act_pw.fwd,
            act_pw.fwd_kernels,
        )
    };
    let t_act = timer.add(
        acc,
        x.pointwise_op(act_kind, m.routed * m.f_dev, fl, by, kernels),
        1.0,
    )?;
    bt.total += t_act;
    if m.local_experts > 1 {
        bt.total += vec(acc, VectorOpKind::Elementwise, rows, 0.0, 2.0 * e)?;
    }
    if !m.fused_permute {
        let k = m.top_k as f64;
        if !backward {
            // Weighted sum of each token's k expert outputs.
            bt.total += vec(
                acc,
                VectorOpKind::Elementwise,
                t * h,
                2.0 * k,
                (k + 1.0) * e,
            )?;
        } else {
            bt.total += vec(
                acc,
                VectorOpKind::Elementwise,
                t * m.top_k * h,
                0.0,
                2.0 * e,
            )?;
        }
    }
    // Shared experts: a dense MLP over the layer's tokens.
    if m.shared_f_dev > 0 {
        let st = m.shared_tokens;
        let up = (x.mat - 1) * m.shared_f_dev;
        for (mm, nn, kk) in [(st, up, h), (st, h, m.shared_f_dev)] {
            let t = if !backward {
                timer.add(acc, x.gemm(mm, nn, kk), 1.0)?
            } else {
                timer.add(acc, x.gemm(mm, kk, nn), 1.0)?
                    + timer.add(acc, x.wgrad(kk, nn, mm), 1.0)?
            };
            bt.total += casts(acc, 1, mm, nn, kk, backward)?;
            bt.total += t;
            bt.gemm += t;
        }
        let op = x.pointwise_op(act_kind, st * m.shared_f_dev, fl, by, kernels);
        let t = timer.add(acc, op, 1.0)?;
        bt.total += t;
    }
    Ok(bt)
}
