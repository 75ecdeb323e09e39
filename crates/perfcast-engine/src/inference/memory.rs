//! Device memory of the most loaded device: weights, KV cache, workspace, reserve.

use super::plan::InferencePlan;
use super::report::MemoryReport;
use super::shard::Shard;
use super::Inference;
use perfcast_core::workload::PositionKind;
use perfcast_core::Bytes;

impl Inference {
    /// Weight bytes of the most loaded device: its stage's layers (linear weights in
    /// `weight_dtype`, norms and biases in the base format, replicated across TP), plus the
    /// embedding (first stage) and/or LM head and final norm (last stage), vocab-parallel.
    pub(crate) fn weight_bytes(&self, sh: &Shard) -> f64 {
        self.weight_parts(sh).0
    }

    /// [`Inference::weight_bytes`], and its part outside the layers: the embedding (and
    /// learned positions), the LM head and the final norm on the stages that hold them.
    pub(crate) fn weight_parts(&self, sh: &Shard) -> (f64, f64) {
        let m = &self.model;
        let base = sh.base.bytes();
        let layer = sh.layer_matmul_weights() as f64 * sh.weight.bytes()
            + m.layer_small_params() as f64 * base;
        let layers = match &sh.moe {
            None => sh.stage_layers as f64 * layer,
            Some(moe) => {
                // Every layer's attention, the dense layers' MLPs, the MoE layers' experts (in
                // their own format), shared experts and router; the largest stage's share.
                let attention = sh.attention_matmul_weights() as f64 * sh.weight.bytes()
                    + m.layer_small_params() as f64 * base;
                let mlp = ((sh.up_n + sh.ffn) * sh.hidden) as f64 * sh.weight.bytes();
                let (routed, rest) = moe.weights(sh.hidden);
                let experts = routed * moe.weight.bytes() + rest * sh.weight.bytes();
                let all = sh.layers as f64 * attention
                    + sh.dense_layers as f64 * mlp
                    + sh.moe_layers as f64 * experts;
                all * sh.stage_layers as f64 / sh.layers.max(1) as f64
            }
        };
        let table = (sh.vocab * sh.hidden) as f64 * base;
        let positions = match m.position() {
            PositionKind::Learned => (m.context_limit() * m.hidden) as f64 * base,
            PositionKind::Rope => 0.0,
        };
        let first = table + positions;
        // A tied LM head shares the table on a single stage; a last stage elsewhere keeps a
        // copy (Megatron).
        let last = if m.tied_embeddings && sh.pp == 1 {
            0.0
        } else {
            table
        } + m.hidden as f64 * base;
        let outside = if sh.pp == 1 {
            first + last
        } else {
            first.max(last)
        };
        (layers + outside, outside)
    }

    /// Activation workspace: the largest prefill chunk's live tensors (residual stream,
    /// normed input, the wider of the QKV output plus plain attention scores and the MLP's
    /// intermediate) and the fp32 logits.
    pub(crate) fn workspace_bytes(&self, sh: &Shard, plan: &InferencePlan, batch: u64) -> f64 {
        let s = plan.input_len as u64;
        let cap = self.options.max_prefill_tokens as u64;
        let seqs = (cap / s).clamp(1, batch);
        let m = (seqs * s) as f64;
        let e = sh.base.bytes();
        let h = sh.hidden as f64;
        let scores = if sh.attention.is_flash() {
            0.0
        } else {
            2.0 * seqs as f64 * sh.q_heads as f64 * (s * s) as f64 * e
        };
        let attn = m * sh.qkv_n() as f64 * e + scores;
        let mlp = m * (sh.up_n + sh.ffn) as f64 * e;
        let logits = 2.0 * batch as f64 * sh.vocab_full as f64 * 4.0;
        2.0 * m * h * e + attn.max(mlp) + logits
    }

    pub(crate) fn memory_report(
        &self,
        sh: &Shard,
        plan: &InferencePlan,
        batch: u64,
    ) -> MemoryReport {
        let weights = self.weight_bytes(sh);
        // Under attention data parallelism a rank caches its own sequences only.
        let seqs = batch.div_ceil(sh.dp);
        let len = plan.input_len as u64 + plan.output_len as u64;
        let kv_per_token = sh.kv_bytes_per_token();
        let kv = if sh.stage_spans.all_full() {
            seqs as f64 * (plan.input_len as f64 + plan.output_len as f64) * kv_per_token
        } else {
            // Sliding-window and chunked layers keep at most their span.
            seqs as f64 * sh.kv_bytes(len)
        };
        let workspace = self.workspace_bytes(sh, plan, batch);
        let reserve = Bytes::from_gib(self.options.runtime_reserve_gib).0;
        let total = weights + kv + workspace + reserve;
        let capacity = self
            .system
            .memory
            .device()
            .map(|d| d.capacity().0)
            .unwrap_or(0.0)
            * self.options.usable_memory_fraction;
        MemoryReport {
            weights: Bytes(weights),
            kv_cache: Bytes(kv),
            workspace: Bytes(workspace),
            reserve: Bytes(reserve),
            total: Bytes(total),
            capacity: Bytes(capacity),
            fits: total <= capacity,
            shortfall: Bytes((total - capacity).max(0.0)),
            kv_per_token: Bytes(kv_per_token),
            kv_spans: sh.stage_spans,
        }
    }
}
