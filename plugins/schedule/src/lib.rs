//! Built-in pipeline schedules: `gpipe`, `1f1b`, `interleaved-1f1b`,
//! `flexible-interleaved-1f1b`, `dualpipe` (its own module).
//!
//! All compose one stage's per-micro-batch forward time `t_f` and backward time `t_b`
//! (the slowest stage's, recompute included) over `m` micro-batches on `p` stages:
//!
//! * GPipe (Huang et al. 2019) and 1F1B / PipeDream-Flush (Narayanan et al. 2021, §2.2.1):
//!   `(m + p - 1)·(t_f + t_b)`, bubble fraction `(p - 1)/m`. They differ in memory: GPipe
//!   keeps all `m` micro-batches in flight, 1F1B at most `p - i` on stage `i`.
//! * Interleaved 1F1B with `v` model chunks per device (Narayanan et al. 2021, §2.2.2):
//!   `(m + (p - 1)/v)·(t_f + t_b)`, bubble `(p - 1)/(v·m)`, `v` times the hand-offs; stage
//!   0 holds `p + (p - 1)/v` micro-batches' worth of activations, i.e. the 1F1B figure times
//!   `1 + (p - 1)/(p·v)` (Korthikanti et al. 2022, §4.2.3).
//! * Flexible interleaved 1F1B (Llama 3; PyTorch's flexible interleaved schedule): the same
//!   with rounds of `n = m / max(1, m div p)` micro-batches instead of `p`, so `m` need not
//!   be a multiple of `p`; fewer micro-batches than stages add stalls at each chunk change.
//!
//! Point-to-point hand-offs: with blocking sends (Megatron's default) each of the
//! `m + p - 1` (interleaved: `v·m + p - 1`) time slots of a stage waits for one forward and
//! one backward hand-off.

mod combined;
mod dualpipe;

pub use combined::Combined1F1B;
pub use dualpipe::DualPipe;
use perfcast_core::parallel::{PipelineSchedule, PlanShape, ScheduleInput, ScheduleResult};
use perfcast_core::registry::Component;
use perfcast_core::{Key, ModelError, PluginError};
use serde::Deserialize;
use std::sync::Arc;

/// No parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

fn check(input: &ScheduleInput) -> Result<(f64, f64, f64), ModelError> {
    if input.stages == 0 || input.micro_batches == 0 || input.virtual_stages == 0 {
        return Err(ModelError::invalid(
            Key::plan(""),
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

/// Flushed schedule over `m` micro-batches with `v` chunks: shared by all four.
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

/// Non-interleaved schedules run one model chunk per device.
fn one_chunk(plan: &PlanShape) -> Result<(), ModelError> {
    if plan.vpp > 1 {
        return Err(ModelError::invalid(
            Key::plan("vpp"),
            plan.vpp,
            "virtual stages > 1 need schedule = \"interleaved-1f1b\" or \
             \"flexible-interleaved-1f1b\"",
        ));
    }
    Ok(())
}

/// GPipe: all forwards, then all backwards.
#[derive(Debug, Clone, Default)]
pub struct GPipe;

impl PipelineSchedule for GPipe {
    fn kind(&self) -> &str {
        "gpipe"
    }
    fn validate(&self, plan: &PlanShape) -> Result<(), ModelError> {
        one_chunk(plan)
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
        one_chunk(plan)
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

/// Forward chunk-passes stage `i` runs before its first backward, interleaving in rounds of
/// `n` micro-batches: `(v - 1)·n + 2·(p - 1 - i)`, at most `m·v` (Megatron-LM with `n = p`;
/// PyTorch's flexible interleaved 1F1B with its round size); with one chunk, 1F1B's
/// `p - 1 - i`.
fn warm_up(input: &ScheduleInput, stage: u32, n: u32) -> u64 {
    let p = input.stages.max(1) as u64;
    let v = input.virtual_stages.max(1) as u64;
    let i = stage.min(input.stages.saturating_sub(1)) as u64;
    let m = input.micro_batches.max(1) as u64;
    if v == 1 {
        // One chunk: plain 1F1B's warm-up.
        return (p - 1 - i).min(m);
    }
    ((v - 1) * n as u64 + 2 * (p - 1 - i)).min(m * v)
}

/// Micro-batches (whole-stage units) stage `stage` holds at its peak: the warm-up's chunk
/// passes plus the forward of its first 1F1B step (at most all `m·v`), over `v`.
fn round_in_flight(input: &ScheduleInput, stage: u32, n: u32) -> f64 {
    if input.stages <= 1 {
        return 1.0;
    }
    let v = input.virtual_stages.max(1) as u64;
    let all = input.micro_batches.max(1) as u64 * v;
    (warm_up(input, stage, n) + 1).min(all) as f64 / v as f64
}

/// Peak layer-micro-batches of a stage whose chunks hold `chunk_layers(c)` layers.
///
/// Forwards run round by round, `n` micro-batches of chunk 0, then of chunk 1, ...;
/// backwards in the same rounds with the chunks reversed. After the `W` warm-up forwards, each
/// 1F1B step runs one forward, then one backward, so the stage holds
/// `g(k) = S_f(W + k + 1) - S_b(k)` at step `k`, `S_f`/`S_b` the layers of the first forwards
/// / backwards. `g` is linear between the points where either changes chunk, so its maximum
/// is at one of them; and `g(k + v·n) = g(k)` (both sums grow by a round's `n` times the
/// stage's layers), so the points of the first `v·n` steps are all there is to look at: `O(v)`
/// with the chunks' prefix sums, whatever the micro-batch count (an exact replay over the
/// steps cost a plan search of Megatron 530B 20x that of GPT-3). Equal chunks give
/// `round_in_flight` times the stage's layers.
fn round_peak_held(
    input: &ScheduleInput,
    stage: u32,
    n: u32,
    chunk_layers: &dyn Fn(u32) -> f64,
) -> f64 {
    let vu = input.virtual_stages.max(1);
    let layers: Vec<f64> = (0..vu).map(chunk_layers).collect();
    let total: f64 = layers.iter().sum();
    if input.stages <= 1 || vu == 1 {
        return round_in_flight(input, stage, n) * total;
    }
    let v = vu as u64;
    let n = n.max(1) as u64;
    let all = input.micro_batches.max(1) as u64 * v;
    let w = warm_up(input, stage, n as u32);
    // `n` passes of each chunk, summed from the first chunk and from the last.
    let prefix = |reversed: bool| -> Vec<f64> {
        let mut out = Vec::with_capacity(layers.len() + 1);
        let mut s = 0.0;
        out.push(s);
        for j in 0..layers.len() {
            s += n as f64 * layers[if reversed { layers.len() - 1 - j } else { j }];
            out.push(s);
        }
        out
    };
    let (fwd, bwd) = (prefix(false), prefix(true));
    // Layers of the first `x` passes, chunks in order or reversed.
    let passes = |x: u64, reversed: bool| -> f64 {
        let blocks = ((x / n) % v) as usize;
        let (pre, chunk) = if reversed {
            (&bwd, layers[layers.len() - 1 - blocks])
        } else {
            (&fwd, layers[blocks])
        };
        let mut s = (x / (v * n)) as f64 * n as f64 * total + pre[blocks];
        if !x.is_multiple_of(n) {
            s += (x % n) as f64 * chunk;
        }
        s
    };
    if w >= all {
        return passes(all, false);
    }
    let last = all - w - 1; // the last step with a forward
    let g = |k: u64| passes(w + k + 1, false) - passes(k, true);
    let mut best = g(0).max(g(last));
    // Steps where the forward or the backward sequence changes chunk, over one period: at
    // `k = j·n` the backwards have run `j` whole chunks and the forwards `w + 1 + j·n =
    // (q + j)·n + r` passes; at `k = j·n + shift` (`shift = n - r`, when `r > 0`) the
    // backwards are `shift` into chunk `j` and the forwards `(q + j + 1)·n`. The forwards'
    // chunk `a mod v` and round `a div v` advance with `a` (no division in the loop).
    let (q, r) = ((w + 1) / n, (w + 1) % n);
    let shift = (n - r) % n;
    let nf = n as f64;
    let fwd_at = |round: u64, chunk: usize, rem: u64| {
        let s = round as f64 * nf * total + fwd[chunk];
        if rem > 0 {
            s + rem as f64 * layers[chunk]
        } else {
            s
        }
    };
    let (mut round, mut chunk) = (q / v, (q % v) as usize);
    let mut j = 0;
    while j < v && j * n <= last {
        let jj = j as usize;
        best = best.max(fwd_at(round, chunk, r) - bwd[jj]);
        if shift > 0 && j * n + shift <= last {
            let (round1, chunk1) = if chunk + 1 == layers.len() {
                (round + 1, 0)
            } else {
                (round, chunk + 1)
            };
            let back = bwd[jj] + shift as f64 * layers[layers.len() - 1 - jj];
            best = best.max(fwd_at(round1, chunk1, 0) - back);
        }
        chunk += 1;
        if chunk == layers.len() {
            chunk = 0;
            round += 1;
        }
        j += 1;
    }
    best
}

/// Interleaved 1F1B with `v` model chunks per device, in rounds of `n` micro-batches.
///
/// * Megatron-LM's (`interleaved-1f1b`, Narayanan et al. 2021 §2.2.2): rounds of `n = p`, so
///   the micro-batches per step must be a multiple of `p`.
/// * Llama 3's flexible one (`flexible-interleaved-1f1b`, Dubey et al. 2024 §3.3.2, Figure 6),
///   as PyTorch's flexible interleaved 1F1B implements it: the `m` micro-batches run in
///   `R = max(1, m div p)` rounds of `n = m / R`, so `m` need only be a multiple of `R`.
///
/// Bubble `(p - 1)/(v·m)`; with fewer micro-batches than stages (`n < p`) each of the `v - 1`
/// chunk changes also waits `p - n` chunk slots, forward and backward, for the first
/// micro-batch to come round.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Interleaved {
    pub flexible: bool,
}

impl Interleaved {
    pub const MEGATRON: Interleaved = Interleaved { flexible: false };
    pub const FLEXIBLE: Interleaved = Interleaved { flexible: true };

    /// Micro-batches per round.
    fn round(&self, input: &ScheduleInput) -> u32 {
        if !self.flexible {
            return input.stages;
        }
        let m = input.micro_batches.max(1);
        let rounds = (m / input.stages.max(1)).max(1);
        m / rounds
    }
}

impl PipelineSchedule for Interleaved {
    fn kind(&self) -> &str {
        if self.flexible {
            "flexible-interleaved-1f1b"
        } else {
            "interleaved-1f1b"
        }
    }
    fn validate(&self, plan: &PlanShape) -> Result<(), ModelError> {
        if plan.pp <= 1 {
            return Ok(());
        }
        if plan.vpp <= 1 {
            // Megatron-LM runs plain 1F1B without `--num-layers-per-virtual-pipeline-stage`:
            // a plan that names the interleaved schedule without its degree is ambiguous.
            return Err(ModelError::invalid(
                Key::plan("vpp"),
                plan.vpp,
                format!(
                    "{} needs plan.vpp >= 2 model chunks per device (with one it is 1F1B): \
                     set plan.vpp, or schedule = \"1f1b\"",
                    self.kind()
                ),
            ));
        }
        let m = plan.micro_batches();
        if !self.flexible && !m.is_multiple_of(plan.pp) {
            return Err(ModelError::invalid(
                Key::plan("global_batch"),
                plan.global_batch,
                format!(
                    "interleaved 1F1B needs the micro-batches per step ({m}) to be a multiple \
                     of plan.pp = {} (Megatron-LM requirement; flexible-interleaved-1f1b \
                     lifts it)",
                    plan.pp
                ),
            ));
        }
        let rounds = (m / plan.pp).max(1);
        if self.flexible && !m.is_multiple_of(rounds) {
            return Err(ModelError::invalid(
                Key::plan("global_batch"),
                plan.global_batch,
                format!(
                    "flexible interleaved 1F1B runs the {m} micro-batches per step in \
                     max(1, {m} div plan.pp) = {rounds} equal rounds: they must be a \
                     multiple of {rounds}"
                ),
            ));
        }
        Ok(())
    }
    fn step(&self, input: &ScheduleInput) -> Result<ScheduleResult, ModelError> {
        let v = input.virtual_stages.max(1) as f64;
        let mut r = flushed(input, v)?;
        let n = self.round(input);
        if n < input.stages {
            let wait = (v - 1.0) * (input.stages - n) as f64 / v;
            let stall = (input.forward + input.backward) * wait;
            r.bubble += stall;
            r.time += stall;
        }
        r.peak_in_flight = self.in_flight(input, 0);
        Ok(r)
    }
    fn in_flight(&self, input: &ScheduleInput, stage: u32) -> f64 {
        round_in_flight(input, stage, self.round(input))
    }
    fn peak_layers_held(
        &self,
        input: &ScheduleInput,
        stage: u32,
        chunk_layers: &dyn Fn(u32) -> f64,
    ) -> f64 {
        round_peak_held(input, stage, self.round(input), chunk_layers)
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
    },
    params = &[]
);
perfcast_core::builtin!(
    PipelineSchedule,
    "1f1b",
    "1F1B (PipeDream-Flush): bubble (p-1)/m, stage i holds p-i micro-batches",
    |p| {
        params_none(p)?;
        Ok(Component::PipelineSchedule(Arc::new(OneFOneB)))
    },
    params = &[]
);
perfcast_core::builtin!(
    PipelineSchedule,
    "flexible-interleaved-1f1b",
    "Llama 3 / PyTorch interleaved 1F1B: any micro-batch count in max(1, m div p) rounds",
    |p| {
        params_none(p)?;
        Ok(Component::PipelineSchedule(Arc::new(Interleaved::FLEXIBLE)))
    },
    params = &[]
);
perfcast_core::builtin!(
    PipelineSchedule,
    "interleaved-1f1b",
    "Interleaved 1F1B with vpp chunks: bubble (p-1)/(v·m), in-flight x(1+(p-1)/(p·v))",
    |p| {
        params_none(p)?;
        Ok(Component::PipelineSchedule(Arc::new(Interleaved::MEGATRON)))
    },
    params = &[]
);

perfcast_core::builtin!(
    PipelineSchedule,
    "dualpipe",
    "DeepSeek-V3's DualPipe: both directions at once; bubble (p/2-1)(F+B/2), 2x model state, p+1 in flight",
    |p| {
        params_none(p)?;
        Ok(Component::PipelineSchedule(Arc::new(DualPipe)))
    },
    params = &[]
);

perfcast_core::builtin!(
    PipelineSchedule,
    "combined-1f1b",
    "Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm): 1F1B with each forward merged with another micro-batch's backward, the expert all-to-all hidden",
    |p| {
        params_none(p)?;
        Ok(Component::PipelineSchedule(Arc::new(Combined1F1B)))
    },
    params = &[]
);

// `register(&mut Registry)`: this crate's built-ins, composed by `perfcast-builtins`.
perfcast_core::register_fn!();

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::Seconds;

    /// A plan of `pp` stages, `vpp` chunks and `global_batch / micro_batch` micro-batches
    /// on one data-parallel rank, everything else off.
    pub(crate) fn shape(pp: u32, vpp: u32, micro_batch: u32, global_batch: u32) -> PlanShape {
        PlanShape {
            pp,
            vpp,
            micro_batch,
            global_batch,
            overlap_grad_reduce: true,
            overlap_param_gather: true,
            ..PlanShape::default()
        }
    }

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
        let scheds: [&dyn PipelineSchedule; 3] = [&GPipe, &OneFOneB, &Interleaved::MEGATRON];
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

    /// Replay of the interleaved order (forwards round by round, chunk 0 first; backwards
    /// with the chunks reversed; after the warm-up one forward then one backward per step):
    /// the peak of layers held, each chunk weighted by its layers.
    fn replay(p: u32, v: u32, m: u32, n: u32, i: u32, layers: &[f64]) -> f64 {
        let mut fwd = Vec::new();
        let mut bwd = Vec::new();
        for _ in 0..m / n {
            for c in 0..v {
                fwd.extend(std::iter::repeat_n(c, n as usize));
                bwd.extend(std::iter::repeat_n(v - 1 - c, n as usize));
            }
        }
        let w = (((v - 1) * n + 2 * (p - 1 - i)) as usize).min(fwd.len());
        let mut held: f64 = fwd[..w].iter().map(|&c| layers[c as usize]).sum();
        let mut peak = held;
        for k in 0..bwd.len() {
            if w + k < fwd.len() {
                held += layers[fwd[w + k] as usize];
                peak = peak.max(held);
            }
            held -= layers[bwd[k] as usize];
        }
        peak
    }

    /// `peak_layers_held` equals the replay for equal and uneven chunks (Llama 3's
    /// embedding-only first and head-only last chunk), and with equal chunks it is
    /// `in_flight` times the stage's layers.
    #[test]
    fn peak_layers_held_replays_the_schedule() {
        let scheds: [(&dyn PipelineSchedule, bool); 2] = [
            (&Interleaved::MEGATRON, false),
            (&Interleaved::FLEXIBLE, true),
        ];
        for (p, v, m) in [
            (16, 8, 32),
            (16, 8, 16),
            (8, 2, 64),
            (4, 3, 8),
            (4, 2, 8),
            (4, 2, 10),
            (4, 2, 3),
            (16, 2, 20),
            // Many rounds: the peak is looked for over one period of the steps.
            (8, 4, 64),
            (6, 5, 36),
            (5, 7, 23),
            (3, 9, 100),
        ] {
            let inp = input(p, v, m);
            for (s, flexible) in scheds {
                if !flexible && m % p != 0 {
                    continue;
                }
                let n = if flexible {
                    Interleaved::FLEXIBLE.round(&inp)
                } else {
                    p
                };
                for i in 0..p {
                    let equal = vec![2.0; v as usize];
                    let mut first = equal.clone();
                    first[0] = 0.0;
                    let mut last = equal.clone();
                    last[v as usize - 1] = 1.0;
                    for layers in [&equal, &first, &last] {
                        let got = s.peak_layers_held(&inp, i, &|c| layers[c as usize]);
                        let want = replay(p, v, m, n, i, layers);
                        assert_eq!(
                            got,
                            want,
                            "{} p{p} v{v} m{m} stage {i} {layers:?}",
                            s.kind()
                        );
                    }
                    let whole = s.in_flight(&inp, i) * 2.0 * v as f64;
                    let got = s.peak_layers_held(&inp, i, &|_| 2.0);
                    assert!((got - whole).abs() < 1e-9, "p{p} v{v} m{m} stage {i}");
                }
            }
        }
        // Llama 3 405B (p 16, v 8, m 32, one layer per chunk): the first stage's extra
        // warm-up forwards are in its embedding-only chunk (112 = 16 x 7); the last stage's
        // head-only chunk runs first in the backward, so a forward into a layer chunk comes
        // before the first backward that frees one (113).
        let inp = input(16, 8, 32);
        let first = |c: u32| if c == 0 { 0.0 } else { 1.0 };
        let last = |c: u32| if c == 7 { 0.0 } else { 1.0 };
        assert_eq!(
            Interleaved::MEGATRON.peak_layers_held(&inp, 0, &first),
            112.0
        );
        assert_eq!(
            Interleaved::MEGATRON.peak_layers_held(&inp, 15, &last),
            113.0
        );
        assert_eq!(
            Interleaved::MEGATRON.peak_layers_held(&input(4, 2, 8), 3, &|c| 1.0 - c as f64),
            5.0
        );
        // Non-interleaved schedules: in-flight micro-batches times the layers.
        assert_eq!(
            OneFOneB.peak_layers_held(&input(8, 1, 64), 3, &|_| 3.0),
            15.0
        );
    }

    /// One chunk per device: both interleaved schedules are plain 1F1B.
    #[test]
    fn interleaved_with_one_chunk_is_1f1b() {
        for (p, m) in [(8, 64), (16, 8), (4, 4)] {
            let inp = input(p, 1, m);
            for s in [Interleaved::MEGATRON, Interleaved::FLEXIBLE] {
                assert_eq!(s.step(&inp).unwrap(), OneFOneB.step(&inp).unwrap());
                for i in 0..p {
                    assert_eq!(
                        s.in_flight(&inp, i),
                        OneFOneB.in_flight(&inp, i),
                        "p{p} m{m}"
                    );
                    assert_eq!(
                        s.peak_layers_held(&inp, i, &|_| 3.0),
                        OneFOneB.in_flight(&inp, i) * 3.0
                    );
                }
            }
        }
    }

    /// Flexible interleaving: Megatron's rounds when `p` divides `m`; otherwise rounds of
    /// `m / max(1, m div p)` micro-batches, with stalls when a round is shorter than `p`.
    #[test]
    fn flexible_interleaved_rounds() {
        let f = Interleaved::FLEXIBLE;
        // p divides m: identical to Megatron's interleaving.
        for (p, v, m) in [(16, 8, 32), (8, 2, 64), (4, 3, 8)] {
            let inp = input(p, v, m);
            assert_eq!(
                f.step(&inp).unwrap(),
                Interleaved::MEGATRON.step(&inp).unwrap()
            );
            for i in 0..p {
                assert_eq!(
                    f.in_flight(&inp, i),
                    Interleaved::MEGATRON.in_flight(&inp, i)
                );
            }
        }
        // (p, v, m, bubble in slots of t_f + t_b, stage-0 in-flight)
        let table: [(u32, u32, u32, f64, f64); 3] = [
            // One round of 20: warm-up 20 + 30 + 1 > 40, everything in flight.
            (16, 2, 20, 15.0 / 2.0, 20.0),
            // Two rounds of 5: warm-up 5 + 6 + 1 = 12 chunk passes.
            (4, 2, 10, 3.0 / 2.0, 6.0),
            // Three micro-batches on four stages: the chunk change waits one slot of v = 2.
            (4, 2, 3, 3.0 / 2.0 + 1.0 / 2.0, 3.0),
        ];
        for (p, v, m, bubble, fl) in table {
            let inp = input(p, v, m);
            let r = f.step(&inp).unwrap();
            assert!(
                (r.bubble.0 / 3.0 - bubble).abs() < 1e-12,
                "p{p} v{v} m{m}: {r:?}"
            );
            assert!((r.time.0 - 3.0 * m as f64 - r.bubble.0).abs() < 1e-9);
            assert_eq!(f.in_flight(&inp, 0), fl, "p{p} v{v} m{m}");
        }
        // Validation: m a multiple of the round count, whatever p.
        let plan = |pp: u32, vpp: u32, global_batch: u32| shape(pp, vpp, 1, global_batch);
        assert!(f.validate(&plan(4, 2, 10)).is_ok());
        assert!(Interleaved::MEGATRON.validate(&plan(4, 2, 10)).is_err());
        assert!(f.validate(&plan(4, 2, 3)).is_ok());
        let e = f.validate(&plan(4, 2, 11)).unwrap_err().to_string();
        assert!(
            e.contains("plan.global_batch") && e.contains("multiple of 2"),
            "{e}"
        );
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
        let plan = shape(4, 2, 1, 6);
        for s in [&OneFOneB as &dyn PipelineSchedule, &GPipe] {
            assert!(s
                .validate(&plan)
                .unwrap_err()
                .to_string()
                .contains("plan.vpp"));
        }
        let e = Interleaved::MEGATRON
            .validate(&plan)
            .unwrap_err()
            .to_string();
        assert!(e.contains("plan.global_batch"), "{e}");
        assert!(Interleaved::MEGATRON
            .validate(&PlanShape {
                global_batch: 8,
                ..plan
            })
            .is_ok());
        // An interleaved schedule without its degree is refused, naming plan.vpp (one
        // pipeline stage: nothing to interleave, accepted).
        for s in [Interleaved::MEGATRON, Interleaved::FLEXIBLE] {
            let e = s.validate(&shape(4, 1, 1, 8)).unwrap_err().to_string();
            assert!(e.contains("plan.vpp") && e.contains(s.kind()), "{e}");
            assert!(s.validate(&shape(1, 1, 1, 8)).is_ok());
        }
    }
}
