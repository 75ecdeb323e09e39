//! `context`: context parallelism (Megatron-Core ring attention; Llama 3's all-gather).

use crate::common::{op, tokens};
use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{
    Axis, AxisSet, CommClass, CommList, CpComm, LayerDims, LayerSplit, Overlap, ParallelStrategy,
    Phase, PlanShape, Window,
};
use perfcast_core::workload::ModelSpec;
use perfcast_core::Key;
use perfcast_core::ModelError;
use serde::Deserialize;

/// Parameters of `context`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextParams {
    /// Fraction of the attention core's time that hides the ring K/V exchange. Default 0.8,
    /// RAPID-LLM's CP overlap fraction (Korthikanti validation config).
    #[serde(default = "d_cp_overlap")]
    pub overlap_efficiency: f64,
}

fn d_cp_overlap() -> f64 {
    0.8
}

/// Context parallelism (Megatron-Core; ring attention, Liu et al. 2023): the sequence is split
/// over `cp` ranks (load-balanced causal chunks); attention passes each rank's K and V around
/// the ring in `cp - 1` steps overlapped with the attention of the previous chunk; the
/// backward pass circulates K, V and their gradients (twice the bytes). With
/// `plan.cp_comm = all_gather` (Llama 3) K and V are all-gathered instead, exposed. Gradients
/// are reduced over `dp x cp` (by `data`).
#[derive(Debug, Clone)]
pub struct Context {
    pub params: ContextParams,
}

impl ParallelStrategy for Context {
    fn kind(&self) -> &str {
        "context"
    }
    fn axis(&self) -> Axis {
        Axis::Context
    }
    fn validate(&self, model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError> {
        if plan.cp == 0 {
            return Err(ModelError::invalid(
                Key::plan("cp"),
                plan.cp,
                "must be a positive integer",
            ));
        }
        if plan.cp > 1 && !model.seq_len.is_multiple_of(2 * plan.cp as u64) {
            return Err(ModelError::invalid(
                Key::plan("cp"),
                plan.cp,
                format!(
                    "2 x plan.cp must divide model.seq_len = {} (load-balanced causal chunks)",
                    model.seq_len
                ),
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
        let t = plan.tp.max(1) as u64;
        let kv_dev = (d.kv_heads / t).max(1) as f64;
        let kv = 2.0 * tokens(plan, d) * kv_dev * d.head_dim as f64 * d.act_bytes;
        let c = CommClass::Context;
        let g = AxisSet::CONTEXT;
        if plan.cp_comm == CpComm::AllGather {
            // The whole sequence's K and V (the gathered buffer), gathered before the forward
            // and again before the backward; their gradients reduce-scattered after it.
            let full = kv * plan.cp as f64;
            let x = Overlap::Exposed;
            use CollectiveKind::*;
            out.push(op(c, Phase::Forward, AllGather, full, g, 1.0, x, true))?;
            out.push(op(c, Phase::Backward, AllGather, full, g, 1.0, x, false))?;
            return out.push(op(
                c,
                Phase::Backward,
                ReduceScatter,
                full,
                g,
                1.0,
                x,
                false,
            ));
        }
        let steps = (plan.cp - 1) as f64;
        let overlap = Overlap::Behind {
            window: Window::Attention,
            efficiency: self.params.overlap_efficiency,
        };
        out.push(op(
            c,
            Phase::Forward,
            CollectiveKind::SendRecv,
            kv,
            g,
            steps,
            overlap,
            true,
        ))?;
        out.push(op(
            c,
            Phase::Backward,
            CollectiveKind::SendRecv,
            2.0 * kv,
            g,
            steps,
            overlap,
            false,
        ))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::fixtures::{gpt3_layer_dims as dims, gpt3_plan as plan};

    /// Context parallelism: the ring (p2p) hides `cp - 1` K/V hand-offs behind attention; the
    /// all-gather variant moves the whole sequence's K/V in the critical path.
    #[test]
    fn context_exchange_by_comm_type() {
        let cx = Context {
            params: ContextParams {
                overlap_efficiency: 0.8,
            },
        };
        let base = PlanShape { cp: 4, ..plan() };
        let d = dims();
        let kv_dev = (d.kv_heads / base.tp as u64) as f64;
        let local = 2.0 * tokens(&base, &d) * kv_dev * d.head_dim as f64 * d.act_bytes;
        let mut ring = CommList::default();
        cx.comms(&base, &d, &mut ring).unwrap();
        assert_eq!(ring.len(), 2);
        assert!(ring
            .iter()
            .all(|c| c.kind == CollectiveKind::SendRecv
                && matches!(c.overlap, Overlap::Behind { .. })));
        let mut ag = CommList::default();
        let p = PlanShape {
            cp_comm: CpComm::AllGather,
            ..base
        };
        cx.comms(&p, &d, &mut ag).unwrap();
        let kinds: Vec<_> = ag.iter().map(|c| (c.phase, c.kind)).collect();
        assert_eq!(
            kinds,
            [
                (Phase::Forward, CollectiveKind::AllGather),
                (Phase::Backward, CollectiveKind::AllGather),
                (Phase::Backward, CollectiveKind::ReduceScatter),
            ]
        );
        for c in ag.iter() {
            assert_eq!(c.overlap, Overlap::Exposed);
            assert!((c.bytes.0 - 4.0 * local).abs() <= 1e-9 * c.bytes.0);
        }
    }
}
