//! Built-in pipeline schedules: `gpipe`, `1f1b`, `interleaved-1f1b`.
//!
//! All three compose one stage's per-micro-batch forward time `t_f` and backward time `t_b`
//! (the slowest stage's, recompute included) over `m` micro-batches on `p` stages:
//!
//! * GPipe (Huang et al. 2019) and 1F1B / PipeDream-Flush (Narayanan et al. 2021, §2.2.1):
//!   `(m + p - 1)·(t_f + t_b)`, bubble fraction `(p - 1)/m`. They differ in memory: GPipe
//!   keeps all `m` micro-batches in flight, 1F1B at most `p - i` on stage `i`.
//! * Interleaved 1F1B with `v` model chunks per device (Narayanan et al. 2021, §2.2.2):
//!   `(m + (p - 1)/v)·(t_f + t_b)`, bubble `(p - 1)/(v·m)`, `v` times the hand-offs; stage
//!   0 holds `p + (p - 1)/v` micro-batches' worth of activations, i.e. the 1F1B figure times
//!   `1 + (p - 1)/(p·v)` (Korthikanti et al. 2022, §4.2.3).
//!
//! Point-to-point hand-offs: with blocking sends (Megatron's default) each of the
//! `m + p - 1` (interleaved: `v·m + p - 1`) time slots of a stage waits for one forward and
//! one backward hand-off.

use perfcast_core::parallel::{PipelineSchedule, PlanShape, ScheduleInput, ScheduleResult};
use perfcast_core::registry::Component;
use perfcast_core::{ModelError, PluginError};
use serde::Deserialize;
use std::sync::Arc;

/// No parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

fn check(input: &ScheduleInput) -> Result<(f64, f64, f64), ModelError> {
    if input.stages == 0 || input.micro_batches == 0 || input.virtual_stages == 0 {
        return Err(ModelError::invalid(
            "plan",
            format!(
                "pp={}, vpp={}, micro-batches={}",
                input.stages, input.virtual_stages, input.micro_batches
            ),
            "pipeline stages, virtual stages and micro-batches must be positive",
        ));
    }
    Ok((
        input.stages as f64,
        input.micro_batches as f64,
        input.virtual_stages as f64,
    ))
}

/// Flushed schedule over `m` micro-batches with `v` chunks: shared by all three.
fn flushed(input: &ScheduleInput, v: f64) -> Result<ScheduleResult, ModelError> {
    let (p, m, _) = check(input)?;
    let slot = input.forward + input.backward;
    let bubble = slot * ((p - 1.0) / v);
    let hand_offs = if input.stages > 1 {
        2.0 * (v * m + p - 1.0)
    } else {
        0.0
    };
    let p2p = input.p2p * hand_offs;
    Ok(ScheduleResult {
        time: slot * m + bubble + p2p,
        bubble,
        p2p,
        peak_in_flight: 0.0,
    })
}

/// GPipe: all forwards, then all backwards.
#[derive(Debug, Clone, Default)]
pub struct GPipe;

impl PipelineSchedule for GPipe {
    fn kind(&self) -> &str {
        "gpipe"
    }
    fn step(&self, input: &ScheduleInput) -> Result<ScheduleResult, ModelError> {
        let mut r = flushed(input, 1.0)?;
        r.peak_in_flight = self.in_flight(input, 0);
        Ok(r)
    }
    fn in_flight(&self, input: &ScheduleInput, _stage: u32) -> f64 {
        input.micro_batches as f64
    }
}

/// 1F1B (PipeDream-Flush).
#[derive(Debug, Clone, Default)]
pub struct OneFOneB;

impl PipelineSchedule for OneFOneB {
    fn kind(&self) -> &str {
        "1f1b"
    }
    fn validate(&self, plan: &PlanShape) -> Result<(), ModelError> {
        if plan.vpp > 1 {
            return Err(ModelError::invalid(
                "plan.vpp",
                plan.vpp,
                "virtual stages > 1 need schedule = \"interleaved-1f1b\"",
            ));
        }
        Ok(())
    }
    fn step(&self, input: &ScheduleInput) -> Result<ScheduleResult, ModelError> {
        let mut r = flushed(input, 1.0)?;
        r.peak_in_flight = self.in_flight(input, 0);
        Ok(r)
    }
    fn in_flight(&self, input: &ScheduleInput, stage: u32) -> f64 {
        let left = input.stages.saturating_sub(stage).max(1);
        left.min(input.micro_batches.max(1)) as f64
    }
}

/// Interleaved 1F1B with `v` model chunks per device.
#[derive(Debug, Clone, Default)]
pub struct Interleaved;

impl PipelineSchedule for Interleaved {
    fn kind(&self) -> &str {
        "interleaved-1f1b"
    }
    fn validate(&self, plan: &PlanShape) -> Result<(), ModelError> {
        if plan.pp > 1 && plan.vpp > 1 && !plan.micro_batches().is_multiple_of(plan.pp) {
            return Err(ModelError::invalid(
                "plan.global_batch",
                plan.global_batch,
                format!(
                    "interleaved 1F1B needs the micro-batches per step ({}) to be a multiple \
                     of plan.pp = {} (Megatron-LM requirement)",
                    plan.micro_batches(),
                    plan.pp
                ),
            ));
        }
        Ok(())
    }
    fn step(&self, input: &ScheduleInput) -> Result<ScheduleResult, ModelError> {
        let v = input.virtual_stages.max(1) as f64;
        let mut r = flushed(input, v)?;
        r.peak_in_flight = self.in_flight(input, 0);
        Ok(r)
    }
    /// Megatron's warm-up count for rank `i`: `2·(p - i - 1) + (v - 1)·p` chunks, plus the
    /// one in its first 1F1B step; divided by `v` for whole-stage units.
    fn in_flight(&self, input: &ScheduleInput, stage: u32) -> f64 {
        let p = input.stages.max(1) as f64;
        let v = input.virtual_stages.max(1) as f64;
        let i = (stage.min(input.stages.saturating_sub(1))) as f64;
        let m = input.micro_batches.max(1) as f64;
        if input.stages <= 1 {
            return 1.0;
        }
        let chunks = 2.0 * (p - i - 1.0) + (v - 1.0) * p + 1.0;
        (chunks / v).min(m)
    }
    /// Megatron runs the warm-up forwards in groups of `p` micro-batches, chunk 0 first:
    /// after `k` forwards (the count above, at most `m·v`), chunk `c` holds `R·p` micro-batches
    /// of the `R = k div (v·p)` full rounds plus `clamp(k mod (v·p) - c·p, 0, p)`.
    fn chunk_in_flight(&self, input: &ScheduleInput, stage: u32, chunk: u32) -> f64 {
        if input.stages <= 1 || input.virtual_stages <= 1 {
            return self.in_flight(input, stage);
        }
        let p = input.stages as f64;
        let v = input.virtual_stages as f64;
        let i = (stage.min(input.stages - 1)) as f64;
        let m = input.micro_batches.max(1) as f64;
        let k = (2.0 * (p - i - 1.0) + (v - 1.0) * p + 1.0).min(m * v);
        let rounds = (k / (v * p)).floor();
        let rest = k - rounds * v * p;
        rounds * p + (rest - chunk.min(input.virtual_stages - 1) as f64 * p).clamp(0.0, p)
    }
}

fn params_none(p: &serde_json::Value) -> Result<(), PluginError> {
    perfcast_core::params::parse::<NoParams>(p).map(|_| ())
}

perfcast_core::builtin!(
    PipelineSchedule,
    "gpipe",
    "GPipe: all forwards then all backwards; bubble (p-1)/m, m micro-batches in flight",
    |p| {
        params_none(p)?;
        Ok(Component::PipelineSchedule(Arc::new(GPipe)))
    }
);
perfcast_core::builtin!(
    PipelineSchedule,
    "1f1b",
    "1F1B (PipeDream-Flush): bubble (p-1)/m, stage i holds p-i micro-batches",
    |p| {
        params_none(p)?;
        Ok(Component::PipelineSchedule(Arc::new(OneFOneB)))
    }
);
perfcast_core::builtin!(
    PipelineSchedule,
    "interleaved-1f1b",
    "Interleaved 1F1B with vpp chunks: bubble (p-1)/(v·m), in-flight x(1+(p-1)/(p·v))",
    |p| {
        params_none(p)?;
        Ok(Component::PipelineSchedule(Arc::new(Interleaved)))
    }
);

/// Keeps the crate linked when a host names it.
pub const NAMES: [&str; 3] = ["gpipe", "1f1b", "interleaved-1f1b"];

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::Seconds;

    fn input(p: u32, v: u32, m: u32) -> ScheduleInput {
        ScheduleInput {
            stages: p,
            virtual_stages: v,
            micro_batches: m,
            forward: Seconds(1.0),
            backward: Seconds(2.0),
            p2p: Seconds(0.0),
        }
    }

    /// (schedule, p, v, m, bubble fraction of the ideal m·(tf+tb), stage-0 in-flight)
    #[test]
    fn bubble_and_in_flight_table() {
        let scheds: [&dyn PipelineSchedule; 3] = [&GPipe, &OneFOneB, &Interleaved];
        let table: [(usize, u32, u32, u32, f64, f64); 7] = [
            (0, 8, 1, 64, 7.0 / 64.0, 64.0),
            (1, 8, 1, 64, 7.0 / 64.0, 8.0),
            (1, 1, 1, 4, 0.0, 1.0),
            (1, 16, 1, 8, 15.0 / 8.0, 8.0),
            (2, 8, 2, 64, 7.0 / 128.0, 8.0 + 3.5),
            (2, 64, 2, 512, 63.0 / 1024.0, 64.0 * (1.0 + 63.0 / 128.0)),
            (2, 4, 3, 8, 3.0 / 24.0, 4.0 + 1.0),
        ];
        for (i, (s, p, v, m, frac, fl)) in table.into_iter().enumerate() {
            let inp = input(p, v, m);
            let r = scheds[s].step(&inp).unwrap();
            let ideal = m as f64 * 3.0;
            assert!((r.bubble.0 / ideal - frac).abs() < 1e-12, "case {i}");
            assert!((r.time.0 - ideal - r.bubble.0).abs() < 1e-9, "case {i}");
            assert!(
                (r.peak_in_flight - fl).abs() < 1e-12,
                "case {i}: {}",
                r.peak_in_flight
            );
        }
        // 1F1B: stage i holds p - i.
        let inp = input(8, 1, 64);
        for i in 0..8 {
            assert_eq!(OneFOneB.in_flight(&inp, i), (8 - i) as f64);
        }
    }

    /// Per-chunk warm-up counts: Llama 3 405B's layout (p 16, v 8, m 32); their mean is
    /// `in_flight` for every stage and shape.
    #[test]
    fn interleaved_chunk_in_flight() {
        let inp = input(16, 8, 32);
        let first: Vec<f64> = (0..8)
            .map(|c| Interleaved.chunk_in_flight(&inp, 0, c))
            .collect();
        assert_eq!(first, [31.0, 16.0, 16.0, 16.0, 16.0, 16.0, 16.0, 16.0]);
        let last: Vec<f64> = (0..8)
            .map(|c| Interleaved.chunk_in_flight(&inp, 15, c))
            .collect();
        assert_eq!(last, [16.0, 16.0, 16.0, 16.0, 16.0, 16.0, 16.0, 1.0]);
        for (p, v, m) in [
            (16, 8, 32),
            (16, 8, 16),
            (8, 2, 64),
            (4, 3, 8),
            (64, 2, 512),
        ] {
            let inp = input(p, v, m);
            for i in 0..p {
                let sum: f64 = (0..v)
                    .map(|c| Interleaved.chunk_in_flight(&inp, i, c))
                    .sum();
                let want = Interleaved.in_flight(&inp, i);
                assert!(
                    (sum / v as f64 - want).abs() < 1e-12,
                    "p{p} v{v} m{m} stage {i}"
                );
            }
        }
        // Non-interleaved schedules: every chunk holds the stage's count.
        let inp = input(8, 1, 64);
        assert_eq!(OneFOneB.chunk_in_flight(&inp, 3, 0), 5.0);
    }

    #[test]
    fn p2p_hand_offs_and_validation() {
        let mut inp = input(4, 1, 8);
        inp.p2p = Seconds(0.5);
        let r = OneFOneB.step(&inp).unwrap();
        assert!((r.p2p.0 - 0.5 * 2.0 * 11.0).abs() < 1e-12);
        let inp = input(1, 1, 8);
        assert_eq!(OneFOneB.step(&inp).unwrap().p2p.0, 0.0);
        assert!(OneFOneB.step(&input(0, 1, 8)).is_err());
        let plan = PlanShape {
            tp: 1,
            pp: 4,
            dp: 1,
            cp: 1,
            ep: 1,
            vpp: 2,
            sp: false,
            zero_stage: 0,
            micro_batch: 1,
            global_batch: 6,
            tp_comm_overlap: false,
            overlap_grad_reduce: false,
            overlap_param_gather: false,
            fp32_grad_accum: false,
            cp_comm: Default::default(),
        };
        assert!(OneFOneB
            .validate(&plan)
            .unwrap_err()
            .to_string()
            .contains("plan.vpp"));
        let e = Interleaved.validate(&plan).unwrap_err().to_string();
        assert!(e.contains("plan.global_batch"), "{e}");
        assert!(Interleaved
            .validate(&PlanShape {
                global_batch: 8,
                ..plan
            })
            .is_ok());
    }
}
