//! Combined 1F1B (Megatron-Core `--overlap-moe-expert-parallel-comm`): the 1F1B schedule
//! whose steady state runs each micro-batch's forward merged with another micro-batch's
//! backward, layer by layer, so that one's expert dispatch and combine run while the other
//! computes (the batch-level overlap DeepSeek-V3 §3.2.1 describes for its chunks, without
//! DualPipe's two directions).
//!
//! Bubble, hand-offs and activations are 1F1B's: the merge reorders work inside the steady
//! state, it adds no stage pass (ASSUMPTION: the transient extra micro-batch a merged pair
//! holds while its backward frees memory is not counted). What it changes is the expert
//! all-to-all, which the engine times hidden when a schedule says it overlaps two
//! micro-batches ([`PipelineSchedule::overlaps_expert_comm`]), as `plan.ep_comm_overlap`
//! does under any schedule. One chunk per device (`vpp = 1`) and at least two micro-batches
//! (a partner for every merged step).

use perfcast_core::parallel::{PipelineSchedule, PlanShape, ScheduleInput, ScheduleResult};
use perfcast_core::{Key, ModelError};

/// Combined 1F1B (module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Combined1F1B;

impl PipelineSchedule for Combined1F1B {
    fn kind(&self) -> &str {
        "combined-1f1b"
    }
    fn validate(&self, plan: &PlanShape) -> Result<(), ModelError> {
        crate::one_chunk(plan)?;
        let m = plan.micro_batches();
        if m < 2 {
            return Err(ModelError::invalid(
                Key::plan("micro_batch"),
                plan.micro_batch,
                format!(
                    "leaves {m} micro-batch per step; schedule = \"combined-1f1b\" merges one \
                     micro-batch's forward with another's backward and needs at least 2"
                ),
            ));
        }
        Ok(())
    }
    fn step(&self, input: &ScheduleInput) -> Result<ScheduleResult, ModelError> {
        crate::OneFOneB.step(input)
    }
    fn in_flight(&self, input: &ScheduleInput, stage: u32) -> f64 {
        crate::OneFOneB.in_flight(input, stage)
    }
    fn overlaps_expert_comm(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::Seconds;

    /// 1F1B's time and memory, the expert all-to-all overlapped.
    #[test]
    fn as_1f1b_with_the_overlap() {
        for (p, m) in [(1u32, 2u32), (4, 8), (16, 64)] {
            let input = ScheduleInput {
                stages: p,
                virtual_stages: 1,
                micro_batches: m,
                forward: Seconds(1.0),
                backward: Seconds(2.0),
                p2p: Seconds(0.01),
            };
            let (a, b) = (
                Combined1F1B.step(&input).unwrap(),
                crate::OneFOneB.step(&input).unwrap(),
            );
            assert_eq!((a.time, a.bubble, a.p2p), (b.time, b.bubble, b.p2p));
            for s in 0..p {
                assert_eq!(
                    Combined1F1B.in_flight(&input, s),
                    crate::OneFOneB.in_flight(&input, s)
                );
            }
        }
        assert!(Combined1F1B.overlaps_expert_comm());
        assert!(!crate::OneFOneB.overlaps_expert_comm());
        assert_eq!(Combined1F1B.model_copies(), 1.0);
    }

    #[test]
    fn refuses_virtual_stages_and_a_lone_micro_batch() {
        let plan = |pp: u32, vpp: u32, mb: u32, gb: u32| crate::tests::shape(pp, vpp, mb, gb);
        Combined1F1B.validate(&plan(4, 1, 1, 32)).unwrap();
        for (p, key) in [
            (plan(4, 2, 1, 32), "plan.vpp"),
            (plan(1, 1, 32, 32), "plan.micro_batch"),
        ] {
            let e = Combined1F1B.validate(&p).unwrap_err().to_string();
            assert!(e.contains(key), "{key}: {e}");
        }
    }
}
