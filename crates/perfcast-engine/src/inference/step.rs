//! One engine step of a mixed batch, as continuous-batching runtimes run it (TensorRT-LLM
//! in-flight batching, vLLM and SGLang chunked prefill): prefill chunks of some sequences and
//! one new token of every decoding sequence go through the model in one forward pass.
//!
//! The step is timed by the same op model as [`Inference::evaluate`]: every op of the layer,
//! the edges and the collectives on `M` tokens (the sum of the chunks' tokens and the decode
//! tokens), the LM head and sampling on the `L` rows that need logits, and the attention
//! cores per sequence shape (chunks with the same length and prior context share one op,
//! decodes share one op over their mean context). Nothing is fitted here.
//!
//! Fast path: the pass splits exactly into a part that depends only on `M`
//! ([`StepCosts`]'s token table) and a part that depends only on `L` (its logits table),
//! each memoised the first time a value is needed, so a simulator that times a million steps
//! evaluates each distinct `M` and `L` once; the attention cores depend on the sequences and
//! are timed for every step (one or two plugin calls). [`StepCosts::time`] equals
//! [`Inference::step_time`] exactly (same code, tested), and a step of `b` whole prompts or of
//! `b` decodes equals `evaluate`'s prefill pass or decode step to rounding (tested).

use super::plan::InferencePlan;
use super::shard::Shard;
use super::time::{Acc, Adjust, Pass, Timed};
use super::Inference;
use perfcast_core::op::{Collective, CollectiveKind, ComputeOp};
use perfcast_core::workload::LayerSpans;
use perfcast_core::ModelError;

use perfcast_core::hash::MixState;
use perfcast_core::Bytes;
use std::collections::HashMap;

/// A prefill chunk of one sequence in a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefillChunk {
    /// New prompt tokens processed in this step (at least 1).
    pub tokens: u32,
    /// Tokens of the sequence already in its KV cache (earlier chunks, a cached prefix).
    pub prior: u32,
    /// The chunk ends the prompt: the step samples the sequence's next token (logits).
    pub last: bool,
}

/// What one engine step processes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepBatch<'a> {
    /// Prefill chunks (any lengths and prior contexts).
    pub chunks: &'a [PrefillChunk],
    /// Sequences in decode.
    pub decodes: u32,
    /// Sum over the decoding sequences of the positions each attends to: its cached tokens
    /// plus its new ones.
    pub decode_context: u64,
    /// New tokens per decoding sequence: 1, or `draft_len + 1` when a speculative draft is
    /// verified (every one needs logits). 0 is read as 1.
    pub decode_tokens: u32,
    /// A decode-only step replayed as a captured CUDA graph padded to this many sequences
    /// (no host launch cost per kernel, one graph launch; the padded rows are computed, the
    /// attention runs on the real sequences only). `None`: eager.
    pub graph_batch: Option<u32>,
}

impl StepBatch<'_> {
    fn decode_q(&self) -> u64 {
        self.decode_tokens.max(1) as u64
    }
    /// Tokens through the linear layers (`M`), graph padding excluded.
    pub fn tokens(&self) -> u64 {
        self.chunks.iter().map(|c| c.tokens as u64).sum::<u64>()
            + self.decodes as u64 * self.decode_q()
    }
    /// Rows that need logits (`L`).
    pub fn logits(&self) -> u64 {
        self.chunks.iter().filter(|c| c.last).count() as u64 + self.decodes as u64 * self.decode_q()
    }
}

/// Device memory of one serving instance on its most loaded device, for a token budget per
/// step (the activation workspace) and a maximum batch (the logits buffers).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServingMemory {
    /// Weights of the largest pipeline stage's shard.
    pub weights: Bytes,
    /// Activation workspace of a step of `max_num_tokens` tokens, and the fp32 logits.
    pub workspace: Bytes,
    /// `options.runtime_reserve_gib`.
    pub reserve: Bytes,
    /// The device tier's whole capacity (the KV cache takes a fraction of what is left).
    pub capacity: Bytes,
    /// The part of `weights` outside the layers (embedding, LM head, final norm): what a
    /// multi-token-prediction module shares with its model.
    pub shared_weights: Bytes,
    /// KV cache per token on this device, were every layer caching it.
    pub kv_per_token: Bytes,
    /// What the largest stage's layers attend over: sliding-window and chunked layers keep
    /// at most their span of a sequence.
    pub kv_spans: LayerSpans,
}

impl ServingMemory {
    /// KV-cache blocks of `block` tokens one sequence of `tokens` tokens holds: whole
    /// blocks of the positions its layers keep ([`LayerSpans::kv_positions`]), counted in
    /// blocks of every layer (a model whose layers all attend fully: `⌈tokens / block⌉`).
    pub fn kv_blocks(&self, tokens: u32, block: u32) -> u32 {
        let s = &self.kv_spans;
        if s.all_full() {
            return tokens.div_ceil(block);
        }
        let per_block = s.layers().max(1) * block as u64;
        s.kv_positions(tokens as u64).div_ceil(per_block) as u32
    }

    /// KV-cache bytes of one sequence of `tokens` tokens on this device.
    pub fn kv_bytes(&self, tokens: u32) -> f64 {
        let s = &self.kv_spans;
        if s.all_full() {
            return self.kv_per_token.0 * tokens as f64;
        }
        self.kv_per_token.0 * s.kv_positions(tokens as u64) as f64 / s.layers().max(1) as f64
    }
    /// Capacity left after weights, workspace and reserve (negative when they do not fit).
    pub fn free(&self) -> f64 {
        self.capacity.0 - self.weights.0 - self.workspace.0 - self.reserve.0
    }
}

/// The step-time model of one plan with memoised per-`M` and per-`L` costs (see the module
/// documentation). Owns copies of what it needs; clone it to share warmed tables.
#[derive(Clone, Debug)]
pub struct StepCosts<'a> {
    inf: &'a Inference,
    sh: Shard,
    plan: InferencePlan,
    /// Per-`M` part of an eager pass (index `M`), NaN until computed.
    tokens_eager: Vec<f64>,
    tokens_graph: Vec<f64>,
    logits_eager: Vec<f64>,
    logits_graph: Vec<f64>,
    /// Chunk groups of the step being timed (reused buffer).
    groups: Vec<(u32, u32, u64)>,
    /// Attention cores already timed: (sequences, new tokens each, prior or attended
    /// context, decode kernel, eager) -> (busy, overhead) of one layer.
    attention: HashMap<AttentionKey, (f64, f64), MixState>,
}

/// (sequences, new tokens each, prior or attended context, decode kernel, eager).
type AttentionKey = (u64, u64, u64, bool, bool);

fn memo(
    table: &mut Vec<f64>,
    i: u64,
    f: impl FnOnce() -> Result<f64, ModelError>,
) -> Result<f64, ModelError> {
    let i = i as usize;
    if i >= table.len() {
        table.resize((i + 1).next_power_of_two(), f64::NAN);
    }
    let v = table[i];
    if !v.is_nan() {
        return Ok(v);
    }
    let v = f()?;
    table[i] = v;
    Ok(v)
}

impl<'a> StepCosts<'a> {
    /// The plan's shape, checked as [`Inference::evaluate`] checks it (`batch`, `input_len`
    /// and `output_len` only bound the context length).
    pub fn plan(&self) -> &InferencePlan {
        &self.plan
    }

    /// Compute the per-token table up to `max_tokens` and the per-logit table up to
    /// `max_logits` (eager steps) now, e.g. once before the table is cloned into parallel
    /// simulations.
    pub fn warm(&mut self, max_tokens: u64, max_logits: u64) -> Result<(), ModelError> {
        let inf = self.inf;
        let (sh, plan) = (self.sh, &self.plan);
        for m in 1..=max_tokens {
            memo(&mut self.tokens_eager, m, || {
                inf.tokens_part(&sh, plan, m, true)
            })?;
        }
        for l in 1..=max_logits {
            memo(&mut self.logits_eager, l, || inf.logits_part(&sh, l, true))?;
        }
        Ok(())
    }

    /// Time of one step, seconds (the same number as [`Inference::step_time`]).
    pub fn time(&mut self, b: &StepBatch) -> Result<f64, ModelError> {
        let q = b.decode_q();
        let (m, l, eager) = match b.graph_batch {
            Some(p) if b.chunks.is_empty() && p >= b.decodes && b.decodes > 0 => {
                (p as u64 * q, p as u64 * q, false)
            }
            _ => (b.tokens(), b.logits(), true),
        };
        if m == 0 {
            return Ok(0.0);
        }
        let inf = self.inf;
        // Borrow the fields apart (the shard is large: not copied per step).
        let StepCosts {
            sh,
            plan,
            tokens_eager,
            tokens_graph,
            logits_eager,
            logits_graph,
            ..
        } = self;
        let (tt, lt) = if eager {
            (tokens_eager, logits_eager)
        } else {
            (tokens_graph, logits_graph)
        };
        let mut t = memo(tt, m, || inf.tokens_part(sh, plan, m, eager))?;
        if l > 0 {
            t += memo(lt, l, || inf.logits_part(sh, l, eager))?;
        }
        if !eager {
            t += inf.options.graph_launch_us * 1e-6;
        }
        let pass = Pass {
            tokens: m,
            logits: l,
            eager,
        };
        let layers = self.sh.layers as f64;
        t += self.step_attention(pass, b)? * layers;
        Ok(t)
    }
    /// One layer's attention cores of a step. Context (prefill) kernels run all chunks in one
    /// launch: chunks of equal length and prior context form one op (its batch), each
    /// group's busy time counts, the launch overhead once (the largest). Decodes are one op
    /// over their mean context (the KV bytes and FLOPs of a decode kernel are linear in the
    /// summed context). Each distinct op is timed once (memoised, exact).
    fn step_attention(&mut self, pass: Pass, b: &StepBatch) -> Result<f64, ModelError> {
        let inf = self.inf;
        let StepCosts {
            sh,
            attention: memo,
            groups,
            ..
        } = self;
        let mut timed =
            |n: u64, q: u64, ctx: u64, decode: bool| -> Result<(f64, f64), ModelError> {
                let key = (n, q, ctx, decode, pass.eager);
                if let Some(v) = memo.get(&key) {
                    return Ok(*v);
                }
                // `decode` with `q` > 1: a draft verified, `q` tokens after `ctx` cached.
                let v = if !sh.spans.all_full() {
                    // Per layer kind, weighted by its share of the layers (the caller
                    // multiplies by the layers).
                    let prior = if decode && q == 1 { ctx - 1 } else { ctx };
                    let a = inf.layers_attention(sh, pass, n, q, prior)?;
                    let layers = sh.layers as f64;
                    (a.attention / layers, a.overhead / layers)
                } else if decode && q == 1 {
                    let a = inf.attention_timed(sh, pass, n, 1, ctx)?.1;
                    (a.busy, a.overhead)
                } else if let (true, Some(mla)) = (decode, &sh.mla) {
                    // The generation kernel over the latent, as a decode (not a context
                    // chunk's decompressed keys and values).
                    let a = inf.mla_decode_attention(sh, mla, pass, n, q, ctx + q)?.1;
                    (a.busy, a.overhead)
                } else {
                    let a = inf.chunk_attention(sh, pass, n, q, ctx)?;
                    (a.busy, a.overhead)
                };
                memo.insert(key, v);
                Ok(v)
            };
        let mut t = 0.0;
        if !b.chunks.is_empty() {
            groups.clear();
            groups.extend(b.chunks.iter().map(|c| (c.tokens, c.prior, 1u64)));
            groups.sort_unstable();
            groups.dedup_by(|x, y| {
                let same = x.0 == y.0 && x.1 == y.1;
                if same {
                    y.2 += x.2;
                }
                same
            });
            let mut overhead = 0.0f64;
            for &(q, prior, n) in groups.iter() {
                // Under attention data parallelism the busiest rank's share.
                let n = n.div_ceil(sh.dp);
                let (busy, o) = timed(n, q as u64, prior as u64, false)?;
                t += busy;
                overhead = overhead.max(o);
            }
            t += overhead;
        }
        if b.decodes > 0 {
            let all = b.decodes as u64;
            let q = b.decode_q();
            let kv = (b.decode_context + all / 2) / all;
            let n = all.div_ceil(sh.dp);
            let (busy, o) = if q == 1 {
                timed(n, 1, kv.max(1), true)?
            } else {
                // Verifying a draft: `q` new tokens after `kv - q` cached ones.
                timed(n, q, kv.saturating_sub(q), true)?
            };
            t += busy + o;
        }
        Ok(t)
    }
}

impl Inference {
    /// The fast step-time model of `plan` (checked as [`Inference::evaluate`] checks it).
    pub fn step_costs(&self, plan: &InferencePlan) -> Result<StepCosts<'_>, ModelError> {
        let sh = self.shard(plan)?;
        Ok(StepCosts {
            inf: self,
            sh,
            plan: plan.clone(),
            tokens_eager: Vec::new(),
            tokens_graph: Vec::new(),
            logits_eager: Vec::new(),
            logits_graph: Vec::new(),
            groups: Vec::new(),
            attention: HashMap::default(),
        })
    }

    /// Time of one engine step of `batch` under `plan`'s parallelism and formats, seconds:
    /// the op model evaluated for this composition (no table).
    pub fn step_time(&self, plan: &InferencePlan, batch: &StepBatch) -> Result<f64, ModelError> {
        self.step_costs(plan)?.time(batch)
    }

    /// Device memory of one instance of `plan` serving steps of up to `max_num_tokens`
    /// tokens and `max_batch` sequences.
    pub fn serving_memory(
        &self,
        plan: &InferencePlan,
        max_num_tokens: u32,
        max_batch: u32,
    ) -> Result<ServingMemory, ModelError> {
        let sh = self.shard(plan)?;
        let m = max_num_tokens as f64;
        let e = sh.base.bytes();
        // The widest chunk's live tensors (flash attention: no score matrix), as
        // `workspace_bytes` counts a prefill chunk, and fp32 logits for every sequence.
        let attn = m * sh.qkv_n() as f64 * e;
        let mlp = m * (sh.up_n + sh.ffn) as f64 * e;
        let logits = 2.0 * max_batch as f64 * sh.vocab_full as f64 * 4.0;
        let workspace = 2.0 * m * sh.hidden as f64 * e + attn.max(mlp) + logits;
        let capacity = self
            .system
            .memory
            .device()
            .map(|d| d.capacity().0)
            .unwrap_or(0.0);
        let (weights, shared) = self.weight_parts(&sh);
        Ok(ServingMemory {
            weights: Bytes(weights),
            shared_weights: Bytes(shared),
            workspace: Bytes(workspace),
            reserve: Bytes::from_gib(self.options.runtime_reserve_gib),
            capacity: Bytes(capacity),
            // Per token of the instance: under attention data parallelism each of the `dp`
            // ranks caches its own sequences, so the instance holds `dp` times as many.
            kv_per_token: Bytes(sh.kv_bytes_per_token() / sh.dp as f64),
            kv_spans: sh.stage_spans,
        })
    }

    /// The part of a forward pass that depends only on its `m` tokens: every layer's ops and
    /// its two all-reduces, the embedding lookup and its all-reduce, the pipeline hand-offs
    /// and the per-pass overhead (as [`Inference::pass_without_attention`] times them).
    pub(super) fn tokens_part(
        &self,
        sh: &Shard,
        plan: &InferencePlan,
        m: u64,
        eager: bool,
    ) -> Result<f64, ModelError> {
        let pass = Pass {
            tokens: m,
            logits: 0,
            eager,
        };
        let mut acc = self.layers(sh, pass)?;
        let rank = Pass {
            tokens: m.div_ceil(sh.dp),
            ..pass
        };
        let act_bytes = rank.tokens as f64 * sh.hidden as f64 * sh.base.bytes();
        let all_reduce = Collective {
            kind: CollectiveKind::AllReduce,
            bytes: perfcast_core::Bytes(act_bytes),
            ranks: sh.attn_tp as u32,
        };
        let [(class, embedding), ..] = sh.edge_ops(rank.tokens, 1);
        self.add_compute(class, &embedding, rank, &mut acc)?;
        self.collective(all_reduce, rank, &mut acc)?;
        self.pipeline_handoffs(plan, act_bytes, rank, &mut acc)?;
        acc.overhead += self.options.step_overhead_us * 1e-6;
        let t = acc.total();
        perfcast_core::units::ensure_finite("step time", t)?;
        Ok(t)
    }

    /// The part that depends only on the `l` rows needing logits: final norm, LM head,
    /// sampling and the logits all-gather.
    pub(super) fn logits_part(&self, sh: &Shard, l: u64, eager: bool) -> Result<f64, ModelError> {
        // Under attention data parallelism the busiest rank's rows.
        let l = l.div_ceil(sh.dp);
        let pass = Pass {
            tokens: l,
            logits: l,
            eager,
        };
        let mut acc = Acc::default();
        let [_, rest @ ..] = sh.edge_ops(l, l);
        for (class, op) in rest {
            self.add_compute(class, &op, pass, &mut acc)?;
        }
        self.collective(
            Collective {
                kind: CollectiveKind::AllGather,
                bytes: perfcast_core::Bytes(l as f64 * sh.vocab_full as f64 * 4.0),
                ranks: sh.attn_tp as u32,
            },
            pass,
            &mut acc,
        )?;
        let t = acc.total();
        perfcast_core::units::ensure_finite("step time", t)?;
        Ok(t)
    }

    /// `n` chunks of `q` new tokens after `prior` cached ones: causal over the new tokens,
    /// full over the prior ones. With no prior context it is the prefill's own op; otherwise
    /// the op is a non-causal one over `prior + q/2` positions (the same FLOPs as the causal
    /// chunk: `q·prior + q²/2` score entries per head) with its device traffic rescaled to
    /// the whole `prior + q` positions read.
    pub(super) fn chunk_attention(
        &self,
        sh: &Shard,
        pass: Pass,
        n: u64,
        q: u64,
        prior: u64,
    ) -> Result<Timed, ModelError> {
        if prior == 0 {
            return Ok(self.attention_timed(sh, pass, n, q, q)?.1);
        }
        if let Some((_, t)) = self.measured_attention(sh, pass, n, q, prior + q)? {
            return Ok(t);
        }
        let mut a = sh.attention_op(n, q, prior + q.div_ceil(2));
        a.causal = false;
        let truth = sh.attention_op(n, q, prior + q);
        let op = ComputeOp::Attention(a);
        let bytes = sh.attention_bytes(&truth, 1.0);
        self.compute_adjusted(&op, pass, Adjust::traffic(&op, bytes, None))
    }
}
