//! Attention of layers that do not attend over the whole context: sliding-window layers
//! (the latest `window` positions) and chunked local layers (the positions of their own
//! `chunk`-sized chunk), costed per layer kind ([`perfcast_core::workload::LayerSpans`]).
//!
//! A run of `q` new tokens after `prior` cached ones splits, per kind, into pieces the
//! full-attention costs already describe:
//! * full: a decode over `prior + 1` positions, else the causal chunk after `prior`;
//! * sliding: the tokens whose position is still inside the first window attend causally
//!   after `prior` (as full); the rest attend over exactly `window` positions each, one
//!   non-causal `q x window` op (a decode: over `min(prior + 1, window)`);
//! * chunked: the part of the run in the current chunk attends after `prior mod chunk`,
//!   every whole chunk after it causally from its start, the remainder likewise (a decode:
//!   over `prior mod chunk + 1`).

use super::shard::Shard;
use super::time::{Acc, Adjust, Pass, Timed};
use super::Inference;
use perfcast_core::op::ComputeOp;
use perfcast_core::workload::AttentionSpan;
use perfcast_core::ModelError;

impl Inference {
    /// One layer of kind `span`: `batch` sequences each adding `q` tokens after `prior`
    /// cached ones (`q = 1`: a decode step).
    pub(super) fn span_attention(
        &self,
        sh: &Shard,
        pass: Pass,
        span: AttentionSpan,
        batch: u64,
        q: u64,
        prior: u64,
    ) -> Result<Acc, ModelError> {
        let spans = &sh.spans;
        match span {
            AttentionSpan::Full => self.full_attention(sh, pass, batch, q, prior),
            AttentionSpan::Sliding => {
                let w = spans.window;
                if q == 1 {
                    return self.attention(sh, pass, batch, 1, (prior + 1).min(w));
                }
                let inside = q.min(w.saturating_sub(prior));
                let mut acc = Acc::default();
                if inside > 0 {
                    acc.add_scaled(&self.full_attention(sh, pass, batch, inside, prior)?, 1.0);
                }
                if q > inside {
                    acc.add_scaled(&self.banded_attention(sh, pass, batch, q - inside, w)?, 1.0);
                }
                Ok(acc)
            }
            AttentionSpan::Chunked => {
                let c = spans.chunk.max(1);
                let start = prior % c;
                if q == 1 {
                    return self.attention(sh, pass, batch, 1, start + 1);
                }
                let first = q.min(c - start);
                let mut acc = self.full_attention(sh, pass, batch, first, start)?;
                let (whole, rest) = ((q - first) / c, (q - first) % c);
                if whole > 0 {
                    acc.add_scaled(&self.full_attention(sh, pass, batch * whole, c, 0)?, 1.0);
                }
                if rest > 0 {
                    acc.add_scaled(&self.full_attention(sh, pass, batch, rest, 0)?, 1.0);
                }
                Ok(acc)
            }
        }
    }

    /// Every layer of the model (`sh.spans`): `batch` sequences each adding `q` tokens after
    /// `prior` cached ones, the kinds' costs weighted by their layer counts.
    pub(super) fn layers_attention(
        &self,
        sh: &Shard,
        pass: Pass,
        batch: u64,
        q: u64,
        prior: u64,
    ) -> Result<Acc, ModelError> {
        let mut acc = Acc::default();
        for (span, count, _) in sh.spans.kinds() {
            if count > 0 {
                let a = self.span_attention(sh, pass, span, batch, q, prior)?;
                acc.add_scaled(&a, count as f64);
            }
        }
        Ok(acc)
    }

    /// Decode attention of every layer summed over steps j = 1..=n (context `input_len + j`),
    /// each kind over the positions it attends: a window's contexts stop growing at the
    /// window, a chunk's restart at every chunk (each run of growing contexts summed as
    /// [`Inference::decode_attention_sum`] sums them; whole chunks once, times their count).
    pub(super) fn layers_decode_sum(
        &self,
        sh: &Shard,
        pass: Pass,
        batch: u64,
        input_len: u64,
        n: u64,
    ) -> Result<Acc, ModelError> {
        let mut acc = Acc::default();
        let spans = sh.spans;
        for (span, count, _) in spans.kinds() {
            if count == 0 {
                continue;
            }
            let mut one = Acc::default();
            match span {
                AttentionSpan::Full => {
                    one = self.decode_attention_sum(sh, pass, batch, input_len, n)?;
                }
                AttentionSpan::Sliding => {
                    let w = spans.window;
                    let growing = n.min(w.saturating_sub(input_len));
                    if growing > 0 {
                        let a = self.decode_attention_sum(sh, pass, batch, input_len, growing)?;
                        one.add_scaled(&a, 1.0);
                    }
                    if n > growing {
                        let a = self.attention(sh, pass, batch, 1, w)?;
                        one.add_scaled(&a, (n - growing) as f64);
                    }
                }
                AttentionSpan::Chunked => {
                    let c = spans.chunk.max(1);
                    let mut whole: Option<Acc> = None;
                    let (mut ctx, last) = (input_len + 1, input_len + n);
                    while ctx <= last {
                        // Positions attended at context `ctx`: its place in its chunk.
                        let e = (ctx - 1) % c + 1;
                        let run = (c - e + 1).min(last - ctx + 1);
                        let a = if e == 1 && run == c {
                            *whole.get_or_insert(self.decode_attention_sum(sh, pass, batch, 0, c)?)
                        } else {
                            self.decode_attention_sum(sh, pass, batch, e - 1, run)?
                        };
                        one.add_scaled(&a, 1.0);
                        ctx += run;
                    }
                }
            }
            acc.add_scaled(&one, count as f64);
        }
        Ok(acc)
    }

    /// A run of `q` tokens after `prior` cached ones attending over everything before them.
    fn full_attention(
        &self,
        sh: &Shard,
        pass: Pass,
        batch: u64,
        q: u64,
        prior: u64,
    ) -> Result<Acc, ModelError> {
        if q == 1 {
            return self.attention(sh, pass, batch, 1, prior + 1);
        }
        if prior == 0 {
            return self.attention(sh, pass, batch, q, q);
        }
        let t = self.chunk_attention(sh, pass, batch, q, prior)?;
        Ok(Acc::attention(&t, 1.0))
    }

    /// `q` queries each attending over exactly `w` positions (a sliding window past its
    /// first `w` positions): one non-causal `q x w` op, timed by the analytical path (the
    /// measured tables time causal prefills only); its device traffic is the queries, the
    /// `q + w` keys and values they span and the output.
    fn banded_attention(
        &self,
        sh: &Shard,
        pass: Pass,
        batch: u64,
        q: u64,
        w: u64,
    ) -> Result<Acc, ModelError> {
        let (op, t) = self.banded_op(sh, pass, batch, q, w)?;
        Ok(Acc::attention(&t, op.launches() as f64))
    }

    fn banded_op(
        &self,
        sh: &Shard,
        pass: Pass,
        batch: u64,
        q: u64,
        w: u64,
    ) -> Result<(ComputeOp, Timed), ModelError> {
        let mut a = sh.attention_op(batch, q, w);
        a.causal = false;
        let mut spanned = a;
        spanned.kv_len = q + w;
        let op = ComputeOp::Attention(a);
        let bytes = sh.attention_bytes(&spanned, 1.0);
        let t = self.compute_adjusted(&op, pass, Adjust::traffic(&op, bytes, None))?;
        Ok((op, t))
    }

    /// One op standing for a layer of kind `span` over `batch` sequences of `q` queries
    /// whose last attends over `kv` positions, for the roofline's listing: a decode over the
    /// positions its kind attends; a prefill inside the window or one chunk as full; past
    /// the window the non-causal `q x window` op; past one chunk `⌈q / chunk⌉` causal chunks.
    pub(super) fn span_op(
        &self,
        sh: &Shard,
        pass: Pass,
        span: AttentionSpan,
        batch: u64,
        q: u64,
        kv: u64,
    ) -> Result<(ComputeOp, Timed), ModelError> {
        let spans = &sh.spans;
        match span {
            AttentionSpan::Sliding if q == 1 => {
                self.attention_timed(sh, pass, batch, 1, kv.min(spans.window))
            }
            AttentionSpan::Sliding if kv > spans.window => {
                self.banded_op(sh, pass, batch, q, spans.window)
            }
            AttentionSpan::Chunked if q == 1 => {
                let c = spans.chunk.max(1);
                self.attention_timed(sh, pass, batch, 1, (kv.max(1) - 1) % c + 1)
            }
            AttentionSpan::Chunked if q > spans.chunk => {
                let c = spans.chunk.max(1);
                self.attention_timed(sh, pass, batch * q.div_ceil(c), c, c)
            }
            _ => self.attention_timed(sh, pass, batch, q, kv),
        }
    }
}
