//! One transformer layer's op program on one device (forward and backward), the embedding
//! and the LM head with the loss, timed op by op on the device's `ComputeUnit`.
//!
//! Bytes per element of the memory-bound ops are the compulsory traffic of the fused kernels
//! Megatron-LM/Apex/Transformer Engine run (read inputs once, write outputs once):
//! LayerNorm/RMSNorm forward reads x, writes y (`2e`); backward reads x and dy, writes dx
//! (`3e`); bias-GeLU reads and writes (`2e`), its backward reads x and dy, writes dx (`3e`);
//! SwiGLU reads gate and up, writes the product (`3e`), backward reads 3, writes 2 (`5e`);
//! bias-dropout-add reads x and the residual, writes the sum and a 1-byte mask (`3e + 1`),
//! backward reads dy and the mask, writes dx (`2e + 1`); RoPE reads and writes q, k (`2e`);
//! Megatron-LM's vocabulary-parallel cross entropy (`tensor_parallel/cross_entropy.py`) runs
//! as separate PyTorch ops on fp32 logits: cast to fp32 (`e + 4`), max (`4`), subtract
//! (`8`), exp (`8`), sum (`4`), normalise into the saved softmax (`8`): `e + 36` bytes per
//! logit in 6 kernels forward; backward scales the saved softmax by the loss gradient (`8`)
//! and casts back (`4 + e`): `12 + e` in 2 kernels. Low-precision GEMMs quantise their inputs
//! and weights (forward: every micro-batch, or once per step where the stack caches the
//! quantised weights, `LayerShape::weight_casts`), the output gradient, the saved input and
//! the weight's other orientation (backward) at the costs of the plan's
//! recipe ([`super::recipe`]; Transformer Engine's delayed scaling: `2 + 1` bytes per input
//! element, `2 + 1 + 1` for the gradient's cast and transposed copy, `1 + 1` for the saved
//! input's transpose).

use super::shape::LayerShape;
use super::timer::{ClassTimes, OpClass, Timer};
use perfcast_core::op::{Attention, ComputeOp, Gemm, GemmScaling, VectorOp, VectorOpKind};
use perfcast_core::workload::NormKind;
use perfcast_core::{DType, ModelError};

impl LayerShape {
    pub(super) fn tokens(&self) -> u64 {
        self.b * self.sq
    }
    /// Tokens of the tensor-parallel region (the whole micro-batch's local sequence).
    pub(super) fn tokens_total(&self) -> u64 {
        self.b * self.sq
    }
    /// Tokens one rank holds outside the tensor-parallel region (the sequence-parallel
    /// shard): what enters an MoE block.
    pub(super) fn tokens_per_rank(&self) -> u64 {
        (self.b * self.sq).div_ceil(self.ps.max(1))
    }
    pub(super) fn gemm(&self, m: u64, n: u64, k: u64) -> ComputeOp {
        let out = if self.cast.is_some() {
            self.act_dtype
        } else {
            self.gemm_dtype
        };
        ComputeOp::Gemm(Gemm {
            m,
            n,
            k,
            batch: 1,
            a: self.gemm_dtype,
            b: self.gemm_dtype,
            out,
            scaling: self.scaling,
        })
    }
    pub(super) fn wgrad(&self, m: u64, n: u64, k: u64) -> ComputeOp {
        match self.gemm(m, n, k) {
            ComputeOp::Gemm(mut g) => {
                if self.fp32_grads {
                    g.out = DType::Fp32;
                }
                ComputeOp::Gemm(g)
            }
            other => other,
        }
    }
    pub(super) fn vec(
        &self,
        kind: VectorOpKind,
        elements: u64,
        flops: f64,
        bytes: f64,
    ) -> ComputeOp {
        ComputeOp::Vector(VectorOp {
            kind,
            elements,
            flops_per_element: flops,
            bytes_per_element: bytes,
            dtype: self.act_dtype,
            launches: 1,
        })
    }
    fn attention_op(&self, backward: bool) -> ComputeOp {
        ComputeOp::Attention(Attention {
            batch: self.b,
            heads: self.a_dev,
            kv_heads: self.kv_dev,
            q_len: self.sq,
            kv_len: self.s,
            head_dim: self.d,
            causal: true,
            kind: self.attention,
            dtype: self.act_dtype,
            backward,
        })
    }
    /// The attention core, booked under the attention class. FlashAttention is one fused
    /// kernel (`Attention` op). Plain attention is what Megatron-LM ran before FlashAttention
    /// (Shoeybi et al. 2019; Korthikanti 2022 §4.1): a batched QKᵀ GEMM writing the scores, a
    /// fused scale-mask-softmax kernel (reads and writes the scores), attention dropout
    /// (reads them, writes the output and a 1-byte mask), and a batched ·V GEMM reading them;
    /// backward: the two GEMMs' dX/dW counterparts, dropout backward (`2e + 1`) and softmax
    /// backward (reads output and gradient, writes the input gradient: `3e`). Without the
    /// fused kernel, the scale, the mask and the softmax are separate kernels (`2e` each
    /// forward; backward the softmax's `3e` and the scale's `2e`).
    fn attention(
        &self,
        timer: &Timer,
        acc: &mut ClassTimes,
        backward: bool,
    ) -> Result<f64, ModelError> {
        let class = OpClass::Attention;
        let windowed = [(self.window, false), (self.chunk, true)];
        if windowed
            .iter()
            .any(|(w, _)| w.is_some_and(|(share, w)| share > 0.0 && w < self.s))
        {
            // Sliding-window layers' queries attend over at most `w` keys: `q x w` scores,
            // no causal skipping left to do (w << s; the first w queries' triangle is
            // counted whole). Chunked layers' queries attend within their `w`-token chunk:
            // `s / w` causal `w x w` blocks, one causal op of `q x w`.
            let full = LayerShape {
                window: None,
                chunk: None,
                ..*self
            };
            let mut acc_full = ClassTimes::default();
            let t_full = full.attention(timer, &mut acc_full, backward)?;
            let narrow = windowed.map(|(w, causal)| (w.filter(|&(_, w)| w < self.s), causal));
            let rest = narrow
                .iter()
                .filter_map(|(w, _)| w.map(|(share, _)| share))
                .fold(1.0, |r, share| r - share);
            acc.add_scaled(&acc_full, rest);
            let mut t = rest * t_full;
            for (span, causal) in narrow {
                let Some((share, w)) = span else {
                    continue;
                };
                let mut win = self.attention_op(backward);
                if let ComputeOp::Attention(a) = &mut win {
                    a.kv_len = w;
                    a.causal = causal;
                }
                t += timer.add_as(acc, win, share, class)?;
            }
            return Ok(t);
        }
        if self.attention.is_flash() {
            return timer.add_as(acc, self.attention_op(backward), 1.0, class);
        }
        let e = self.e();
        let batch = self.b * self.a_dev;
        let (q, k, d) = (self.sq, self.s, self.d);
        let scores = batch * q * k;
        let bgemm = |m: u64, n: u64, kk: u64| {
            ComputeOp::Gemm(Gemm::new(m, n, kk, self.act_dtype).batched(batch))
        };
        let mut t = 0.0;
        if !backward {
            t += timer.add_as(acc, bgemm(q, k, d), 1.0, class)?;
            let (bytes, kernels) = if self.fused.softmax {
                (2.0 * e, 1)
            } else {
                (6.0 * e, 3)
            };
            let op = self.pointwise_op(VectorOpKind::Softmax, scores, 5.0, bytes, kernels);
            t += timer.add_as(acc, op, 1.0, class)?;
            if self.dropout {
                let op = self.vec(VectorOpKind::Dropout, scores, 2.0, 2.0 * e + 1.0);
                t += timer.add_as(acc, op, 1.0, class)?;
            }
            t += timer.add_as(acc, bgemm(q, d, k), 1.0, class)?;
        } else {
            // dP = dO·Vᵀ, dV = Pᵀ·dO
            t += timer.add_as(acc, bgemm(q, k, d), 1.0, class)?;
            t += timer.add_as(acc, bgemm(k, d, q), 1.0, class)?;
            if self.dropout {
                let op = self.vec(VectorOpKind::Dropout, scores, 1.0, 2.0 * e + 1.0);
                t += timer.add_as(acc, op, 1.0, class)?;
            }
            let (bytes, kernels) = if self.fused.softmax {
                (3.0 * e, 1)
            } else {
                (5.0 * e, 2)
            };
            let op = self.pointwise_op(VectorOpKind::Softmax, scores, 4.0, bytes, kernels);
            t += timer.add_as(acc, op, 1.0, class)?;
            // dQ = dS·K, dK = dSᵀ·Q
            t += timer.add_as(acc, bgemm(q, d, k), 1.0, class)?;
            t += timer.add_as(acc, bgemm(k, d, q), 1.0, class)?;
        }
        Ok(t)
    }
    pub(super) fn e(&self) -> f64 {
        self.act_dtype.bytes()
    }
    pub(super) fn norm_flops(&self) -> f64 {
        match self.norm {
            NormKind::LayerNorm => 5.0,
            NormKind::RmsNorm => 3.0,
        }
    }
    /// The GEMMs of a layer as `(m, n, k)` of the forward pass: the attention projections
    /// (QKV and output, or latent attention's five), then the dense MLP's up and down
    /// projections unless the layer is MoE (its block is timed by `ops_moe`); their count;
    /// and which of them read the normed layer input (bit `i`: the QKV projection, MLA's
    /// down-projections, the MLP's first), whose fp8 input a fused norm can write.
    pub(super) fn gemms(&self) -> ([(u64, u64, u64); 7], usize, u8) {
        let t = self.tokens();
        let mut g = [(0, 0, 0); 7];
        let mut n = 0;
        let mut fed = 0u8;
        let mut push = |x: (u64, u64, u64), norm_fed: bool| {
            g[n] = x;
            if norm_fed {
                fed |= 1 << n;
            }
            n += 1;
        };
        match &self.mla {
            None => {
                push((t, (self.a_dev + 2 * self.kv_dev) * self.d, self.h), true);
                push((t, self.h, self.a_dev * self.d), false);
            }
            Some(l) => {
                // Query down (or full) projection and key/value down-projection read the
                // normed input: the first and the third GEMM, or the first two without a
                // query latent.
                let kv_down = if l.q_rank > 0 { 2 } else { 1 };
                for (i, x) in l.gemms(t, self.h, self.a_dev).enumerate() {
                    push(x, i == 0 || i == kv_down);
                }
            }
        }
        if self.moe.is_none() {
            push((t, (self.mat - 1) * self.f_dev, self.h), true);
            push((t, self.h, self.f_dev), false);
        }
        (g, n, fed)
    }

    /// Elements the rotary embedding rotates: the queries' and keys' rotary parts.
    pub(super) fn rope_elements(&self) -> u64 {
        let t = self.tokens();
        match &self.mla {
            None => t * (self.a_dev + self.kv_dev) * self.d,
            Some(l) => t * (self.a_dev + 1) * l.rope,
        }
    }
}

/// Times of one pass of one layer.
#[derive(Debug, Clone, Copy, Default)]
pub struct PassTimes {
    pub classes: ClassTimes,
    pub gemm: f64,
    pub attention: f64,
    pub total: f64,
}

/// Times of one layer for one micro-batch.
#[derive(Debug, Clone, Copy, Default)]
pub struct LayerTimes {
    pub fwd: PassTimes,
    pub bwd: PassTimes,
    /// What `selective` recompute reruns of the forward, per class: the attention core
    /// (Megatron), or every op but the saved ones (torchtitan's per-op SAC).
    pub selective: ClassTimes,
    /// Compute time of the MoE block (router, permutes, experts, shared experts) forward and
    /// backward; 0 for a dense layer.
    pub block_fwd: f64,
    pub block_bwd: f64,
}

/// Bytes per element and kernels of one element-wise op, forward and backward.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pointwise {
    pub fwd: f64,
    pub fwd_kernels: u32,
    pub bwd: f64,
    pub bwd_kernels: u32,
}

const fn pw(fwd: f64, fwd_kernels: u32, bwd: f64, bwd_kernels: u32) -> Pointwise {
    Pointwise {
        fwd,
        fwd_kernels,
        bwd,
        bwd_kernels,
    }
}

impl LayerShape {
    /// The traffic of the layer's element-wise ops, fused or not (`e` bytes per activation
    /// element; per element of the op's output). Fused: the module's compulsory traffic.
    /// Unfused, each op of eager PyTorch a kernel reading its operands and writing its result
    /// (torchtitan's `models/llama3/model.py` and PyTorch's composite ops; modelling estimates
    /// from the op sequence):
    /// * RMSNorm `x * rsqrt(mean(x²) + eps) * w`: pow (`2e`), mean (`e`), two multiplies
    ///   (`2e` each) = `7e` in 4 kernels; backward, autograd of each op (the two multiplies'
    ///   input gradients `3e` each and weight/row reductions `2e` each, pow and mean `2e` each,
    ///   the branch sum `3e`) = `17e` in 8 kernels. LayerNorm adds the mean subtraction (`2e`
    ///   forward, `3e` backward, one kernel each).
    /// * SwiGLU `silu(a) * b`: silu (`2e`), product (`3e`) = `5e` in 2; backward: the
    ///   product's two gradients (`3e` each), silu's (`3e`) = `9e` in 3. Bias-GeLU: bias add
    ///   and GeLU `2e` each (`4e` in 2); backward GeLU's gradient (`3e`) and the bias
    ///   reduction (`e`) = `4e` in 2.
    /// * Rotary embedding in fp32 complex arithmetic (`apply_rotary_emb`): upcast (`e + 4`),
    ///   complex multiply (`8`), cast back (`4 + e`) = `2e + 16` in 3 kernels, the backward the
    ///   same chain.
    /// * Bias-dropout-add: dropout (`2e` + mask) and the add (`3e`) in 2 kernels; backward
    ///   dropout's gradient (`2e` + mask) beside the add's pass-through.
    pub fn pointwise(&self) -> (Pointwise, Pointwise, Pointwise, Pointwise) {
        let e = self.e();
        let f = &self.fused;
        let layernorm = self.norm == NormKind::LayerNorm;
        let norm = if f.norm {
            pw(2.0 * e, 1, 3.0 * e, 1)
        } else if layernorm {
            pw(9.0 * e, 5, 20.0 * e, 9)
        } else {
            pw(7.0 * e, 4, 17.0 * e, 8)
        };
        let act = match (f.activation, self.swiglu) {
            (true, true) => pw(3.0 * e, 1, 5.0 * e, 1),
            (true, false) => pw(2.0 * e, 1, 3.0 * e, 1),
            (false, true) => pw(5.0 * e, 2, 9.0 * e, 3),
            (false, false) => pw(4.0 * e, 2, 4.0 * e, 2),
        };
        let rope = if f.rope {
            pw(2.0 * e, 1, 2.0 * e, 1)
        } else {
            pw(2.0 * e + 16.0, 3, 2.0 * e + 16.0, 3)
        };
        let mask = if self.dropout { 1.0 } else { 0.0 };
        let bda = if f.residual || !self.dropout {
            pw(3.0 * e + mask, 1, 2.0 * e + mask, 1)
        } else {
            pw(5.0 * e + mask, 2, 2.0 * e + mask, 1)
        };
        (norm, act, rope, bda)
    }

    pub(super) fn pointwise_op(
        &self,
        kind: VectorOpKind,
        el: u64,
        flops: f64,
        b: f64,
        k: u32,
    ) -> ComputeOp {
        match self.vec(kind, el, flops, b) {
            ComputeOp::Vector(mut v) => {
                v.launches = k;
                ComputeOp::Vector(v)
            }
            op => op,
        }
    }

    /// The layer's matmuls in the order a per-op SAC policy counts them (torchtitan's Llama:
    /// `wq`, `wk`, `wv`, `wo`, `w1`, `w3`, `w2`; GPT: `q`, `k`, `v`, `o`, `fc1`, `fc2`), each as
    /// (which of [`Self::gemms`] computes it, its share of that GEMM's work).
    pub(super) fn matmuls(&self) -> ([(usize, f64); 7], usize) {
        let qkv = (self.a_dev + 2 * self.kv_dev) as f64;
        let (q, kv) = (self.a_dev as f64 / qkv, self.kv_dev as f64 / qkv);
        let attn = [(0, q), (0, kv), (0, kv), (1, 1.0)];
        if self.mat == 3 {
            (
                [
                    attn[0],
                    attn[1],
                    attn[2],
                    attn[3],
                    (2, 0.5),
                    (2, 0.5),
                    (3, 1.0),
                ],
                7,
            )
        } else {
            (
                [
                    attn[0],
                    attn[1],
                    attn[2],
                    attn[3],
                    (2, 1.0),
                    (3, 1.0),
                    (0, 0.0),
                ],
                6,
            )
        }
    }
}

/// Build and time one layer's forward and backward op program.
///
/// `selective` recompute reruns the attention core (Korthikanti 2022 §5) or, as torchtitan's
/// per-op SAC (`op_sac`), every forward op except what its policy saves: the outputs of the
/// attention kernel and of every second matmul (the 1st, 3rd, ...: torchtitan
/// `parallelize_llama.py`, `_save_list` and the `mm` counter), so the even-numbered matmuls,
/// the norms, activations, rotary embedding, residual ops and quantisations run again.
pub fn layer(timer: &Timer, x: &LayerShape) -> Result<LayerTimes, ModelError> {
    let (gemm_list, n_gemms, norm_fed) = x.gemms();
    let (norm, act, rope, bda) = x.pointwise();
    let tok = x.tokens();
    let p = LayerProgram {
        timer,
        x,
        gemms: &gemm_list[..n_gemms],
        norm_fed,
        tok,
        pwe: tok * x.h / x.ps,
        norm,
        act,
        rope,
        bda,
        bda_kind: if x.dropout {
            VectorOpKind::Dropout
        } else {
            VectorOpKind::Elementwise
        },
        // An MoE layer's activations are its block's (`ops_moe`).
        act_el: if x.moe.is_none() { tok * x.f_dev } else { 0 },
    };

    timer.part.set("layer forward");
    let mut f = ClassTimes::default();
    let (mut gemm_f, gemm_t, attn_f) = p.forward(&mut f)?;
    let selective = p.selective(f, &gemm_t, attn_f)?;
    // The MoE block after what selective recompute reruns: neither the attention core nor
    // per-op SAC (which saves the expert GEMMs' outputs) reruns it.
    let block_f = super::ops_moe::moe_block(timer, x, &mut f, false)?;
    gemm_f += block_f.gemm;

    timer.part.set("layer backward");
    let mut b = ClassTimes::default();
    let (mut gemm_b, attn_b) = p.backward(&mut b)?;
    let block_b = super::ops_moe::moe_block(timer, x, &mut b, true)?;
    gemm_b += block_b.gemm;

    Ok(LayerTimes {
        fwd: PassTimes {
            total: f.total(),
            classes: f,
            gemm: gemm_f,
            attention: attn_f,
        },
        bwd: PassTimes {
            total: b.total(),
            classes: b,
            gemm: gemm_b,
            attention: attn_b,
        },
        selective,
        block_fwd: block_f.total,
        block_bwd: block_b.total,
    })
}

/// One layer's dense op program (everything but the MoE block), with what its forward and
/// backward passes share.
pub(super) struct LayerProgram<'a> {
    pub(super) timer: &'a Timer<'a>,
    pub(super) x: &'a LayerShape,
    /// The layer's GEMMs `(m, n, k)`, and which of them take their input from a norm.
    pub(super) gemms: &'a [(u64, u64, u64)],
    pub(super) norm_fed: u8,
    pub(super) tok: u64,
    /// Elements of one pointwise op over the (sequence-parallel) activations.
    pub(super) pwe: u64,
    pub(super) norm: Pointwise,
    pub(super) act: Pointwise,
    pub(super) rope: Pointwise,
    pub(super) bda: Pointwise,
    pub(super) bda_kind: VectorOpKind,
    pub(super) act_el: u64,
}

impl LayerProgram<'_> {
    /// The forward pass: its GEMM time, each GEMM's time and the attention core's.
    fn forward(&self, f: &mut ClassTimes) -> Result<(f64, [f64; 7], f64), ModelError> {
        let (timer, x) = (self.timer, self.x);
        let bda = self.bda;
        let fused_cast = x.cast.is_some() && x.fused.fp8_cast;
        timer.add(f, self.norm_fwd(), 2.0)?;
        let bda_f = x.pointwise_op(self.bda_kind, self.pwe, 2.0, bda.fwd, bda.fwd_kernels);
        timer.add(f, bda_f, 2.0)?;
        let mut gemm_f = 0.0;
        let mut gemm_t = [0.0; 7];
        for (i, &(m, n, k)) in self.gemms.iter().enumerate() {
            gemm_f += self.adapter(f, i, (m, n, k), false)?;
            if x.cast.is_some() {
                // A linear timed whole, its quantisation included.
                if let Some(t) = self.measured_forward(f, (m, n, k))? {
                    gemm_t[i] = t;
                    gemm_f += t;
                    continue;
                }
            }
            gemm_t[i] = timer.add(f, x.gemm(m, n, k), 1.0)?;
            gemm_f += gemm_t[i];
            if let Some(c) = x.cast {
                if !(fused_cast && self.norm_fed & (1 << i) != 0) {
                    let op = x.cast_op(m * k, c.amax + c.cast, c.scale, c.kernels);
                    timer.add(f, op, 1.0)?;
                }
                // The weight, quantised for this micro-batch's forward (or once for the
                // step's micro-batches that share it).
                let w = x.cast_op(k * n, c.amax + c.cast, c.scale, c.kernels);
                timer.add(f, w, x.weight_cast_share())?;
            }
        }
        if let Some(op) = self.latent_norms_fwd() {
            timer.add(f, op, 1.0)?;
        }
        if let Some(op) = self.rope_fwd() {
            timer.add(f, op, 1.0)?;
        }
        timer.add(f, self.act_fwd(), 1.0)?;
        let attn_f = x.attention(timer, f, false)?;
        Ok((gemm_f, gemm_t, attn_f))
    }

    /// The forward of one of the two norms. Norm-fed GEMMs (QKV and the MLP's first) take
    /// their fp8 input from the norm when the stack fuses the cast into it (one more byte
    /// written by the norm).
    pub(super) fn norm_fwd(&self) -> ComputeOp {
        let x = self.x;
        let fused_cast = x.cast.is_some() && x.fused.fp8_cast;
        let extra = if fused_cast { 1.0 } else { 0.0 };
        x.pointwise_op(
            VectorOpKind::Norm,
            self.pwe,
            x.norm_flops(),
            self.norm.fwd + extra,
            self.norm.fwd_kernels,
        )
    }

    /// The forward of latent attention's RMSNorms of its latents.
    pub(super) fn latent_norms_fwd(&self) -> Option<ComputeOp> {
        let l = self.x.mla.as_ref()?;
        let el = self.tok * (l.q_rank + l.kv_rank);
        let n = self.norm;
        Some(
            self.x
                .pointwise_op(VectorOpKind::Norm, el, 3.0, n.fwd, n.fwd_kernels),
        )
    }

    /// The forward of the rotary embedding (none without rotary positions).
    pub(super) fn rope_fwd(&self) -> Option<ComputeOp> {
        let (x, r) = (self.x, self.rope);
        x.rope.then(|| {
            x.pointwise_op(
                VectorOpKind::Rope,
                x.rope_elements(),
                6.0,
                r.fwd,
                r.fwd_kernels,
            )
        })
    }

    /// The forward of the dense MLP's activation.
    pub(super) fn act_fwd(&self) -> ComputeOp {
        let a = self.act;
        self.x.pointwise_op(
            VectorOpKind::Activation,
            self.act_el,
            8.0,
            a.fwd,
            a.fwd_kernels,
        )
    }

    /// The backward pass: its GEMM time and the attention core's.
    fn backward(&self, b: &mut ClassTimes) -> Result<(f64, f64), ModelError> {
        let (timer, x) = (self.timer, self.x);
        let (norm, act, rope, bda) = (self.norm, self.act, self.rope, self.bda);
        let norm_b = x.pointwise_op(
            VectorOpKind::Norm,
            self.pwe,
            2.0 * x.norm_flops(),
            norm.bwd,
            norm.bwd_kernels,
        );
        timer.add(b, norm_b, 2.0)?;
        let bda_b = x.pointwise_op(self.bda_kind, self.pwe, 1.0, bda.bwd, bda.bwd_kernels);
        timer.add(b, bda_b, 2.0)?;
        // Residual-branch gradient sums.
        let sums = x.vec(VectorOpKind::Elementwise, self.pwe, 1.0, 3.0 * x.e());
        timer.add(b, sums, 2.0)?;
        let mut gemm_b = 0.0;
        for (i, &(m, n, k)) in self.gemms.iter().enumerate() {
            gemm_b += self.adapter(b, i, (m, n, k), true)?;
            if x.cast.is_some() {
                if let Some(t) = self.measured_backward(b, (m, n, k))? {
                    gemm_b += t;
                    continue;
                }
            }
            gemm_b += timer.add(b, x.gemm(m, k, n), 1.0)?; // dX = dY·Wᵀ
            gemm_b += x.weight_grad(timer, b, x.wgrad(k, n, m))?; // dW = Xᵀ·dY
            if let Some(c) = x.cast {
                let grad = x.cast_op(m * n, c.amax + c.grad_cast, 2.0 * c.scale, c.kernels);
                timer.add(b, grad, 1.0)?;
                if !x.frozen() {
                    // The saved input laid out for the weight gradient.
                    timer.add(b, x.cast_op(m * k, c.transpose, c.scale, 1), 1.0)?;
                }
                // The weight laid out for the data gradient.
                let w = x.cast_op(k * n, c.transpose, c.scale, 1);
                timer.add(b, w, x.weight_cast_share())?;
            }
        }
        if let Some(l) = &x.mla {
            let el = self.tok * (l.q_rank + l.kv_rank);
            let op = x.pointwise_op(VectorOpKind::Norm, el, 6.0, norm.bwd, norm.bwd_kernels);
            timer.add(b, op, 1.0)?;
        }
        if x.rope {
            let el = x.rope_elements();
            let op = x.pointwise_op(VectorOpKind::Rope, el, 6.0, rope.bwd, rope.bwd_kernels);
            timer.add(b, op, 1.0)?;
        }
        let act_b = x.pointwise_op(
            VectorOpKind::Activation,
            self.act_el,
            10.0,
            act.bwd,
            act.bwd_kernels,
        );
        timer.add(b, act_b, 1.0)?;
        let attn_b = x.attention(timer, b, true)?;
        Ok((gemm_b, attn_b))
    }
}

/// Times of the input embedding (first stage) and of the LM head with the loss (last stage),
/// one micro-batch each.
#[derive(Debug, Clone, Copy, Default)]
pub struct EndTimes {
    pub embedding_fwd: PassTimes,
    pub embedding_bwd: PassTimes,
    pub head_fwd: PassTimes,
    pub head_bwd: PassTimes,
}

fn pass(c: ClassTimes, gemm: f64) -> PassTimes {
    PassTimes {
        total: c.total(),
        classes: c,
        gemm,
        attention: 0.0,
    }
}

pub fn ends(timer: &Timer, x: &LayerShape) -> Result<EndTimes, ModelError> {
    let tok = x.tokens();
    let e = x.e();
    let mask = if x.dropout { 1.0 } else { 0.0 };
    let pw = tok * x.h / x.ps;

    timer.part.set("embedding forward");
    let mut ef = ClassTimes::default();
    timer.add(
        &mut ef,
        x.vec(VectorOpKind::Embedding, tok * x.h, 0.0, 2.0 * e),
        1.0,
    )?;
    if x.learned_positions {
        timer.add(
            &mut ef,
            x.vec(VectorOpKind::Elementwise, tok * x.h, 1.0, 3.0 * e),
            1.0,
        )?;
    }
    if x.dropout {
        timer.add(
            &mut ef,
            x.vec(VectorOpKind::Dropout, pw, 2.0, 2.0 * e + mask),
            1.0,
        )?;
    }
    timer.part.set("embedding backward");
    let mut eb = ClassTimes::default();
    // Scatter-add of the output gradient into the (fp32) embedding gradient rows (none into
    // a frozen table: no gradient reaches it).
    if !x.frozen() {
        timer.add(
            &mut eb,
            x.vec(VectorOpKind::Embedding, tok * x.h, 1.0, e + 8.0),
            1.0,
        )?;
    }
    if x.dropout && !x.frozen() {
        timer.add(
            &mut eb,
            x.vec(VectorOpKind::Dropout, pw, 1.0, 2.0 * e + mask),
            1.0,
        )?;
    }

    // LM head in the activation precision (Transformer Engine recipes keep the output layer
    // out of fp8).
    let head = LayerShape {
        gemm_dtype: x.act_dtype,
        scaling: GemmScaling::Tensor,
        cast: None,
        ..*x
    };
    let v = x.vocab_dev;
    timer.part.set("head forward");
    let mut hf = ClassTimes::default();
    let (norm, ..) = x.pointwise();
    let norm_f = x.pointwise_op(
        VectorOpKind::Norm,
        pw,
        x.norm_flops(),
        norm.fwd,
        norm.fwd_kernels,
    );
    timer.add(&mut hf, norm_f, 1.0)?;
    let g_f = timer.add(&mut hf, head.gemm(tok, v, x.h), 1.0)?;
    // A fused cross entropy (Inductor, a single-kernel loss) reads the logits twice
    // forward (the row maximum, then the sum of exponentials) and once backward, writing the
    // gradient; otherwise Megatron-LM's separate fp32 kernels (module docs).
    let (loss_f, loss_b) = if x.fused.cross_entropy {
        (
            x.pointwise_op(VectorOpKind::Loss, tok * v, 5.0, 2.0 * e, 2),
            x.pointwise_op(VectorOpKind::Loss, tok * v, 2.0, 2.0 * e, 1),
        )
    } else {
        (
            x.pointwise_op(VectorOpKind::Loss, tok * v, 5.0, e + 36.0, 6),
            x.pointwise_op(VectorOpKind::Loss, tok * v, 2.0, e + 12.0, 2),
        )
    };
    timer.add(&mut hf, loss_f, 1.0)?;
    timer.part.set("head backward");
    let mut hb = ClassTimes::default();
    timer.add(&mut hb, loss_b, 1.0)?;
    let mut g_b = timer.add(&mut hb, head.gemm(tok, x.h, v), 1.0)?;
    g_b += head.weight_grad(timer, &mut hb, head.wgrad(x.h, v, tok))?;
    let norm_b = x.pointwise_op(
        VectorOpKind::Norm,
        pw,
        2.0 * x.norm_flops(),
        norm.bwd,
        norm.bwd_kernels,
    );
    timer.add(&mut hb, norm_b, 1.0)?;

    Ok(EndTimes {
        embedding_fwd: pass(ef, 0.0),
        embedding_bwd: pass(eb, 0.0),
        head_fwd: pass(hf, g_f),
        head_bwd: pass(hb, g_b),
    })
}

/// The Adam update over `params` parameters on one device: reads and writes fp32 master
/// weights, momentum and variance (24 B), reads the gradient, writes the 16-bit weight (2 B),
/// plus one more read of the gradient for the global-norm clip.
pub fn optimizer(timer: &Timer, params: f64, grad_bytes: f64) -> Result<f64, ModelError> {
    timer.part.set("optimizer");
    let mut acc = ClassTimes::default();
    let op = ComputeOp::Vector(VectorOp {
        kind: VectorOpKind::Optimizer,
        elements: params.max(0.0) as u64,
        flops_per_element: 12.0,
        bytes_per_element: 24.0 + 2.0 * grad_bytes + 2.0,
        dtype: DType::Fp32,
        launches: 1,
    });
    timer.add(&mut acc, op, 1.0)
}
