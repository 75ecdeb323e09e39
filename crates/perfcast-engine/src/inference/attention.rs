//! The attention core: prefill's `Attention` op, decode's GQA-folded dot products over the
//! KV cache, and the closed-form sum of decode attention over a growing context.

use super::shard::Shard;
use super::time::{Acc, Adjust, Pass, Timed};
use super::Inference;
use perfcast_core::op::ComputeOp;
use perfcast_core::{ModelError, TimeBound};

impl Inference {
    /// Passes over each KV head a decode attention kernel makes (`q_len == 1`).
    pub(super) fn kv_passes(&self, sh: &Shard, q_len: u64) -> f64 {
        if q_len == 1 {
            1.0 + self.options.decode_kv_group_reread * (sh.group() - 1) as f64
        } else {
            1.0
        }
    }

    /// One layer's attention core, as the op handed to the plugin and its time.
    ///
    /// Prefill: the core `Attention` op. Decode (one query row per head): the query heads
    /// that share a KV head are folded into the M dimension (`q_len = group`, one "head" per
    /// KV head, no causal mask), as GQA decode kernels do (TensorRT-LLM XQA, FlashInfer); the
    /// dot products run on the matrix engine or on the vector units, whichever is faster
    /// (masked multi-head attention kernels use CUDA cores for a single query row). The
    /// device-memory time is rescaled to the KV-cache format and to `kv_passes` passes.
    pub(super) fn attention_timed(
        &self,
        sh: &Shard,
        pass: Pass,
        batch: u64,
        q_len: u64,
        kv_len: u64,
    ) -> Result<(ComputeOp, Timed), ModelError> {
        let decode = q_len == 1;
        if let (true, Some(mla)) = (decode, &sh.mla) {
            return self.mla_decode_attention(sh, mla, pass, batch, 1, kv_len);
        }
        if let Some(t) = self.measured_attention(sh, pass, batch, q_len, kv_len)? {
            return Ok(t);
        }
        let a = if decode {
            let mut a = sh.attention_op(batch, sh.group(), kv_len);
            a.heads = sh.kv_heads;
            a.causal = false;
            a
        } else {
            sh.attention_op(batch, q_len, kv_len)
        };
        let op = ComputeOp::Attention(a);
        let compute = if decode {
            self.vector_time(a.flops().0, sh.base, batch * sh.q_heads * kv_len)
        } else {
            None
        };
        let bytes = sh.attention_bytes(&a, self.kv_passes(sh, q_len));
        let t = self.compute_adjusted(&op, pass, Adjust::traffic(&op, bytes, compute))?;
        Ok((op, t))
    }

    /// The attention core timed whole by the compute unit when it measures the runtime's
    /// attention kernels ([`perfcast_core::ComputeUnit::inference_attention_time`]) and
    /// `options.measured_attention` allows it: `batch` sequences of `q_len` new tokens over
    /// `kv_len` positions (`q_len` 1: a decode step), multi-head and grouped-query attention
    /// (not MLA, whose latent the tables do not hold). `None` otherwise.
    pub(super) fn measured_attention(
        &self,
        sh: &Shard,
        pass: Pass,
        batch: u64,
        q_len: u64,
        kv_len: u64,
    ) -> Result<Option<(ComputeOp, Timed)>, ModelError> {
        if !self.options.measured_attention || sh.mla.is_some() {
            return Ok(None);
        }
        let a = sh.attention_op(batch, q_len, kv_len);
        let sys = &self.system;
        let Some(t) = sys
            .compute
            .inference_attention_time(&a, sh.kv, &sys.memory)?
        else {
            return Ok(None);
        };
        perfcast_core::units::ensure_finite("attention time", t.0)?;
        let op = ComputeOp::Attention(a);
        let host = if pass.eager {
            op.launches() as f64 * self.options.host_launch_us * 1e-6
        } else {
            0.0
        };
        let overhead = (host - t.0).max(0.0);
        let timed = Timed {
            busy: t.0,
            overhead,
            flops: op.flops().0,
            bytes: sh.attention_bytes(&a, 1.0),
            bound: if overhead > t.0 {
                TimeBound::Overhead
            } else {
                TimeBound::Compute
            },
        };
        Ok(Some((op, timed)))
    }

    /// MLA's decode attention in the absorbed form (DeepSeek-AI 2024 §2.1.1; FlashMLA,
    /// TensorRT-LLM): every query head attends over the one cached latent and rotary key
    /// (`kv_lora_rank + rope` wide) of each position, so the heads fold into the M dimension
    /// of one product per sequence (`q_len = heads x q`, one "KV head"; `q` > 1 when a
    /// speculative draft is verified, which the generation kernels run too), and the cache
    /// is read once, in `kv_dtype`, for all heads.
    pub(super) fn mla_decode_attention(
        &self,
        sh: &Shard,
        mla: &perfcast_core::workload::MlaSpec,
        pass: Pass,
        batch: u64,
        q: u64,
        kv_len: u64,
    ) -> Result<(ComputeOp, Timed), ModelError> {
        let d = mla.kv_lora_rank + mla.qk_rope_head_dim;
        let mut a = sh.attention_op(batch, sh.q_heads * q, kv_len);
        a.heads = 1;
        a.kv_heads = 1;
        a.head_dim = d;
        a.causal = false;
        let op = ComputeOp::Attention(a);
        let b = batch as f64;
        let bytes = b * kv_len as f64 * d as f64 * sh.kv.bytes()
            + 2.0 * b * (sh.q_heads * q) as f64 * d as f64 * sh.base.bytes();
        let t = self.compute_adjusted(&op, pass, Adjust::traffic(&op, bytes, None))?;
        Ok((op, t))
    }

    /// One layer's attention core, accumulated.
    pub(super) fn attention(
        &self,
        sh: &Shard,
        pass: Pass,
        batch: u64,
        q_len: u64,
        kv_len: u64,
    ) -> Result<Acc, ModelError> {
        let (op, t) = self.attention_timed(sh, pass, batch, q_len, kv_len)?;
        Ok(Acc::attention(&t, op.launches() as f64))
    }

    /// Attention of one layer summed over decode steps j = 1..=n (context input_len + j), in
    /// `decode_segments` segments; within a segment the sum of an affine function over
    /// integer points is `count x (first + last) / 2`, exact.
    pub(super) fn decode_attention_sum(
        &self,
        sh: &Shard,
        pass: Pass,
        batch: u64,
        input_len: u64,
        n: u64,
    ) -> Result<Acc, ModelError> {
        let segments = (self.options.decode_segments as u64).min(n).max(1);
        let mut acc = Acc::default();
        let mut lo = 1u64;
        for i in 0..segments {
            let hi = n * (i + 1) / segments;
            if hi < lo {
                continue;
            }
            let count = (hi - lo + 1) as f64;
            let first = self.attention(sh, pass, batch, 1, input_len + lo)?;
            if hi == lo {
                acc.add_scaled(&first, 1.0);
            } else {
                let last = self.attention(sh, pass, batch, 1, input_len + hi)?;
                acc.add_scaled(&first, count / 2.0);
                acc.add_scaled(&last, count / 2.0);
            }
            lo = hi + 1;
        }
        Ok(acc)
    }
}
