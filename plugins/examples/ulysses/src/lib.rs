//! `example/ulysses`: DeepSpeed-Ulysses sequence parallelism (Jacobs et al. 2023, "DeepSpeed
//! Ulysses: System Optimizations for Enabling Training of Extreme Long Sequence Transformer
//! Models", arXiv 2309.14509) as a perfcast parallel strategy on the context axis. Named in
//! `options.strategies` instead of the built-in `context` (ring attention), it splits the
//! sequence over `plan.cp` ranks like the ring does, but before attention an all-to-all
//! turns each rank's Q, K and V from "its tokens, all heads" into "all tokens, its heads",
//! and after attention another turns the output back (§3.1, Fig. 2). Each all-to-all moves
//! the rank's local tensor, `b·(s/cp)·heads·head_dim` elements for Q and the output, the KV
//! heads' share for K and V: with multi-head attention and no tensor parallelism the four of
//! one layer's forward carry `4·b·s·h/cp` elements per rank, the paper's `4Nh/P`. The
//! backward pass runs the transposes of the same four (output gradient in, Q/K/V gradients
//! out). None of them overlaps with compute: attention needs its inputs (§3.1).
//!
//! Heads are split: the heads on a tensor-parallel rank (`heads / tp`) must be a multiple of
//! `cp`. KV heads fewer than that are replicated up to the next multiple of `cp` before the
//! exchange (what grouped-query attention needs under Ulysses).

use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{
    Axis, AxisSet, CommClass, CommList, CommOp, LayerDims, LayerSplit, Overlap, ParallelStrategy,
    Phase, PlanShape,
};
use perfcast_core::workload::ModelSpec;
use perfcast_core::{Bytes, Key, ModelError, ParamSpec, ParamType, PluginError};
use serde::Deserialize;

/// Parameters of `example/ulysses`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UlyssesParams {
    /// Exchange Q, K and V in three all-to-alls (DeepSpeed's separate projections) instead of
    /// one over the fused QKV tensor. Same bytes, three times the per-collective latency.
    #[serde(default)]
    pub separate_qkv: bool,
}

/// The declared parameters (shown by `perfcast plugins --describe example/ulysses`).
pub static PARAMS: &[ParamSpec] = &[ParamSpec::with_default(
    "separate_qkv",
    ParamType::Bool,
    "",
    "false",
    "true or false",
    "exchange Q, K and V in three all-to-alls instead of one over the fused QKV tensor",
    "Jacobs et al. 2023 §3.1 (one all-to-all per projection)",
)];

/// DeepSpeed-Ulysses context parallelism.
pub struct Ulysses(UlyssesParams);

fn build(p: UlyssesParams) -> Result<Ulysses, PluginError> {
    Ok(Ulysses(p))
}

/// KV heads on one rank of the exchange: the tensor-parallel rank's, replicated up to a
/// multiple of `cp`.
fn kv_heads_exchanged(kv_heads: u64, tp: u64, cp: u64) -> u64 {
    let per_rank = (kv_heads / tp).max(1);
    per_rank.div_ceil(cp) * cp
}

impl ParallelStrategy for Ulysses {
    fn kind(&self) -> &str {
        "example/ulysses"
    }
    fn axis(&self) -> Axis {
        Axis::Context
    }
    fn validate(&self, model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError> {
        let (cp, tp) = (plan.cp as u64, plan.tp.max(1) as u64);
        if cp == 0 {
            return Err(ModelError::invalid(
                Key::plan("cp"),
                plan.cp,
                "must be a positive integer",
            ));
        }
        let heads = model.heads / tp;
        if !heads.is_multiple_of(cp) {
            return Err(ModelError::invalid(
                Key::plan("cp"),
                plan.cp,
                format!(
                    "must divide the heads of a tensor-parallel rank (model.heads / plan.tp = \
                     {heads}): Ulysses splits attention by heads"
                ),
            ));
        }
        if !model.seq_len.is_multiple_of(cp) {
            return Err(ModelError::invalid(
                Key::plan("cp"),
                plan.cp,
                format!("must divide model.seq_len = {}", model.seq_len),
            ));
        }
        Ok(())
    }
    fn split_layer(&self, plan: &PlanShape, split: &mut LayerSplit) -> Result<(), ModelError> {
        split.tokens *= plan.cp.max(1);
        Ok(())
    }
    fn comms(&self, plan: &PlanShape, d: &LayerDims, out: &mut CommList) -> Result<(), ModelError> {
        if plan.cp <= 1 {
            return Ok(());
        }
        let (cp, tp) = (plan.cp as u64, plan.tp.max(1) as u64);
        // One rank's tokens and the bytes of one head's worth of them.
        let tokens = d.micro_batch as f64 * d.seq_len as f64 / cp as f64;
        let per_head = tokens * d.head_dim as f64 * d.act_bytes;
        let q = (d.heads / tp) as f64 * per_head;
        let kv = kv_heads_exchanged(d.kv_heads, tp, cp) as f64 * per_head;
        let exchange = |phase, bytes: f64, count: f64, with_recompute| CommOp {
            class: CommClass::Context,
            phase,
            kind: CollectiveKind::AllToAll,
            bytes: Bytes(bytes),
            group: AxisSet::CONTEXT,
            count,
            overlap: Overlap::Exposed,
            with_recompute,
            dispatch: None,
        };
        for (phase, recompute) in [(Phase::Forward, true), (Phase::Backward, false)] {
            if self.0.separate_qkv {
                out.push(exchange(phase, q, 1.0, recompute))?;
                out.push(exchange(phase, kv, 2.0, recompute))?;
            } else {
                out.push(exchange(phase, q + 2.0 * kv, 1.0, recompute))?;
            }
            // The attention output (forward) or its gradient (backward).
            out.push(exchange(phase, q, 1.0, recompute))?;
        }
        Ok(())
    }
}

perfcast_abi::export_plugin! {
    name: "ulysses",
    version: env!("CARGO_PKG_VERSION"),
    parallel_strategies: [
        "example/ulysses" => build
            : "DeepSpeed-Ulysses context parallelism: all-to-all of heads instead of the ring (Jacobs et al. 2023)"
            [PARAMS],
    ],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_heads_are_replicated_up_to_a_multiple_of_cp() {
        // (kv heads, tp, cp, exchanged per rank)
        for (kv, tp, cp, want) in [
            (32, 1, 4, 32),
            (8, 1, 4, 8),
            (8, 2, 8, 8),
            (2, 1, 4, 4),
            (8, 8, 2, 2),
        ] {
            assert_eq!(kv_heads_exchanged(kv, tp, cp), want, "{kv} {tp} {cp}");
        }
    }
}
