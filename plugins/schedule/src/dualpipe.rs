//! DualPipe (DeepSeek-AI 2024, arXiv:2412.19437 §3.2.1; deepseek-ai/DualPipe): micro-batches
//! fed from both ends of the pipeline at once, each rank holding its stage of the forward
//! direction and the mirrored stage of the reverse one, a forward chunk of one direction
//! overlapped with a backward chunk of the other (and with its expert all-to-all), weight
//! gradients deferred into the bubbles as zero-bubble schedules do.
//!
//! The report's Table 2 gives, per device, bubble `(p/2 - 1)·(F&B + B - 3W)`, parameters 2x
//! and activations of `p + 1` micro-batches (1F1B: `(p - 1)·(F + B)`, 1x, `p`). With the
//! engine's per-stage forward `F` and backward `B`:
//! * `F&B`, a forward and a backward chunk overlapped, is `F + B`: they share the device's
//!   compute, and what the overlap hides is communication: the expert all-to-all, which the
//!   engine times hidden for a schedule that overlaps two micro-batches
//!   (`overlaps_expert_comm`);
//! * `W`, the weight-gradient part of a backward, is `B / 2`: a GEMM's weight gradient costs
//!   what its input gradient does (ASSUMPTION: the attention core has no weight gradient,
//!   so this slightly overstates `W` and understates the bubble);
//!
//! so the bubble is `(p/2 - 1)·(F + B/2)`. A rank runs `m/2` micro-batches through each of
//! its two stages, `m` stage passes in all, as 1F1B. The reference implementation needs an
//! even number of ranks and an even number of micro-batches of at least twice the ranks
//! (`dualpipe.py`, `DualPipe.step`), and one chunk per stage direction (no `vpp`).

use perfcast_core::parallel::{PipelineSchedule, PlanShape, ScheduleInput, ScheduleResult};
use perfcast_core::{Key, ModelError};

/// DualPipe (module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DualPipe;

impl PipelineSchedule for DualPipe {
    fn kind(&self) -> &str {
        "dualpipe"
    }
    fn validate(&self, plan: &PlanShape) -> Result<(), ModelError> {
        if plan.vpp > 1 {
            return Err(ModelError::invalid(
                Key::plan("vpp"),
                plan.vpp,
                "must be 1 with schedule = \"dualpipe\" (each rank already holds one stage of \
                 each direction)",
            ));
        }
        if plan.pp < 2 || !plan.pp.is_multiple_of(2) {
            return Err(ModelError::invalid(
                Key::plan("pp"),
                plan.pp,
                "must be even with schedule = \"dualpipe\" (its two directions fold the \
                 pipeline in half)",
            ));
        }
        let m = plan.micro_batches();
        if !m.is_multiple_of(2) || m < 2 * plan.pp {
            return Err(ModelError::invalid(
                Key::plan("micro_batch"),
                plan.micro_batch,
                format!(
                    "leaves {m} micro-batches per step; schedule = \"dualpipe\" needs an even \
                     number of at least 2 x plan.pp = {} (half from each end)",
                    2 * plan.pp
                ),
            ));
        }
        Ok(())
    }
    fn step(&self, input: &ScheduleInput) -> Result<ScheduleResult, ModelError> {
        let (p, m, _) = crate::check(input)?;
        let (f, b) = (input.forward, input.backward);
        let bubble = (f + b * 0.5) * (p / 2.0 - 1.0).max(0.0);
        let hand_offs = if input.stages > 1 {
            2.0 * (m + p - 1.0)
        } else {
            0.0
        };
        let p2p = input.p2p * hand_offs;
        Ok(ScheduleResult {
            time: (f + b) * m + bubble + p2p,
            bubble,
            p2p,
            peak_in_flight: self.in_flight(input, 0),
        })
    }
    /// `p + 1` micro-batches' activations on every rank (Table 2), at most all of them.
    fn in_flight(&self, input: &ScheduleInput, _stage: u32) -> f64 {
        (input.stages as f64 + 1.0).min(input.micro_batches.max(1) as f64)
    }
    fn model_copies(&self) -> f64 {
        2.0
    }
    fn overlaps_expert_comm(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::Seconds;

    fn input(p: u32, m: u32) -> ScheduleInput {
        ScheduleInput {
            stages: p,
            virtual_stages: 1,
            micro_batches: m,
            forward: Seconds(1.0),
            backward: Seconds(2.0),
            p2p: Seconds(0.0),
        }
    }

    /// DeepSeek-V3's layout, PP 16, against 1F1B: `(8 - 1)·(1 + 1)` = 14 s of bubble
    /// instead of `15·3` = 45; activations of 17 micro-batches, parameters twice.
    #[test]
    fn bubble_in_flight_and_copies() {
        for (p, m, bubble) in [(16u32, 32u32, 14.0), (8, 20, 6.0), (2, 4, 0.0)] {
            let r = DualPipe.step(&input(p, m)).unwrap();
            assert_eq!(r.bubble.0, bubble, "pp {p}");
            assert_eq!(r.time.0, 3.0 * m as f64 + bubble);
            assert_eq!(r.peak_in_flight, p as f64 + 1.0);
            let one = crate::OneFOneB.step(&input(p, m)).unwrap();
            assert!(r.time.0 <= one.time.0);
        }
        assert_eq!(DualPipe.model_copies(), 2.0);
        assert!(DualPipe.overlaps_expert_comm());
    }

    /// Plans the reference implementation refuses: errors naming the key.
    #[test]
    fn refuses_what_dualpipe_cannot_run() {
        let plan = |pp: u32, vpp: u32, mb: u32| crate::tests::shape(pp, vpp, mb, 32);
        DualPipe.validate(&plan(16, 1, 1)).unwrap();
        for (p, key) in [
            (plan(16, 2, 1), "plan.vpp"),
            (plan(3, 1, 1), "plan.pp"),
            (plan(1, 1, 1), "plan.pp"),
            (plan(16, 1, 2), "plan.micro_batch"),
        ] {
            let e = DualPipe.validate(&p).unwrap_err().to_string();
            assert!(e.contains(key), "{key}: {e}");
        }
    }
}
