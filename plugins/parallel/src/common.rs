//! What the strategies share: a collective built from its fields, and the tokens of one
//! micro-batch on one device.

use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{AxisSet, CommClass, CommOp, LayerDims, Overlap, Phase, PlanShape};
use perfcast_core::Bytes;

#[allow(clippy::too_many_arguments)] // one field each: a struct literal by another name
pub(crate) fn op(
    class: CommClass,
    phase: Phase,
    kind: CollectiveKind,
    bytes: f64,
    group: AxisSet,
    count: f64,
    overlap: Overlap,
    with_recompute: bool,
) -> CommOp {
    CommOp {
        class,
        phase,
        kind,
        bytes: Bytes(bytes),
        group,
        count,
        overlap,
        with_recompute,
        dispatch: None,
    }
}

/// Tokens of one micro-batch on one device (context parallel splits the sequence).
pub(crate) fn tokens(plan: &PlanShape, d: &LayerDims) -> f64 {
    d.micro_batch as f64 * d.seq_len as f64 / plan.cp.max(1) as f64
}
