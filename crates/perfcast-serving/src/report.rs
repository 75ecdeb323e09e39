//! What a simulation reports: throughput, latency distributions, goodput under an SLO, KV
//! cache occupancy and preemptions, per pool. Every number is finite.

use crate::config::Slo;
use crate::deployment::PoolRole;
use crate::state::Run;
use crate::workload::Traffic;
use perfcast_core::Seconds;
use serde::Serialize;

/// A latency distribution over requests.
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Mean.
    pub mean: Seconds,
    /// Median.
    pub p50: Seconds,
    /// 90th percentile.
    pub p90: Seconds,
    /// 99th percentile.
    pub p99: Seconds,
    /// Largest.
    pub max: Seconds,
}

/// The `q`-quantile of sorted `v` by linear interpolation between closest ranks (the
/// default of NumPy's `percentile`, which the serving benchmarks use).
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let x = q * (v.len() - 1) as f64;
    let lo = x.floor() as usize;
    let hi = x.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
}

impl Stats {
    /// The distribution of `v` (sorted in place); zeros when empty.
    pub fn of(v: &mut [f64]) -> Stats {
        if v.is_empty() {
            return Stats::default();
        }
        v.sort_unstable_by(f64::total_cmp);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        Stats {
            mean: Seconds(mean),
            p50: Seconds(quantile(v, 0.5)),
            p90: Seconds(quantile(v, 0.9)),
            p99: Seconds(quantile(v, 0.99)),
            max: Seconds(v[v.len() - 1]),
        }
    }
}

/// One pool's part of a run.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct PoolReport {
    /// `aggregated`, `prefill` or `decode`.
    pub role: PoolRole,
    /// Tensor-parallel degree of an instance.
    pub tp: u32,
    /// Pipeline stages of an instance.
    pub pp: u32,
    /// Instances.
    pub instances: u32,
    /// Devices.
    pub gpus: u32,
    /// Sequences per micro-batch at most.
    pub max_batch: u32,
    /// Tokens per step at most.
    pub max_num_tokens: u32,
    /// KV blocks per instance.
    pub kv_blocks: u32,
    /// Tokens the KV cache of one instance holds.
    pub kv_tokens: u64,
    /// KV-cache memory per device, GB.
    pub kv_gb: f64,
    /// Steps run (all instances).
    pub steps: u64,
    /// Fraction of the run its lanes were busy (mean over instances and lanes).
    pub busy_fraction: f64,
    /// Sequences per step (mean).
    pub mean_batch: f64,
    /// Tokens per step (mean).
    pub mean_step_tokens: f64,
    /// Time-averaged fraction of the KV blocks in use (mean over instances).
    pub kv_mean_occupancy: f64,
    /// Largest fraction in use at any time (any instance).
    pub kv_peak_occupancy: f64,
}

/// Goodput under the `[slo]`.
#[derive(Serialize, Clone, Copy, Debug, PartialEq)]
pub struct SloReport {
    /// The objectives.
    pub slo: Slo,
    /// Fraction of the requests that met every limit.
    pub attainment: f64,
    /// Completed requests per second that met every limit.
    pub goodput_requests_per_s: f64,
    /// Whether `attainment >= slo.attainment`.
    pub met: bool,
    /// The smallest factor by which every limit would have to be multiplied for the load to
    /// meet the SLO: the largest, over the limits, of the metric's `slo.attainment`
    /// quantile over its limit (per limit; <= 1 when each limit alone is met; the joint
    /// attainment is `met`). Large for a load that never completes.
    pub factor: f64,
}

/// The result of one simulated run.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ServingReport {
    /// `burst`, `rate`, `concurrency` or `trace` (set by the caller that knows).
    pub load: String,
    /// Offered requests/s (rate loads).
    pub offered_rate: Option<f64>,
    /// Closed-loop clients (concurrency loads).
    pub concurrency: Option<u32>,
    /// Devices of the deployment.
    pub gpus: u32,
    /// Requests simulated.
    pub requests: u32,
    /// Requests completed (all, unless the simulation hit its bound).
    pub completed: u32,
    /// From the first arrival to the last completion.
    pub duration: Seconds,
    /// Completed requests per second.
    pub requests_per_s: f64,
    /// Output tokens per second (all instances).
    pub output_tokens_per_s: f64,
    /// Prompt tokens per second.
    pub input_tokens_per_s: f64,
    /// Output tokens per second per device.
    pub output_tokens_per_s_per_gpu: f64,
    /// Output tokens per second one user sees after the first token: the mean over
    /// requests of 1 / TPOT.
    pub tokens_per_s_per_user: f64,
    /// Time to first token.
    pub ttft: Stats,
    /// Time per output token after the first, per request.
    pub tpot: Stats,
    /// Mean inter-token latency over all tokens after the first of every request.
    pub itl_mean: Seconds,
    /// End-to-end latency.
    pub e2e: Stats,
    /// KV-cache transfers (disaggregated): from the end of the prefill to arrival.
    pub kv_transfer: Option<Stats>,
    /// Preemptions (recomputed sequences).
    pub preemptions: u64,
    /// Goodput under each SLO given (none: empty).
    pub slo: Vec<SloReport>,
    /// Per pool.
    pub pools: Vec<PoolReport>,
}

/// Assemble the report of a finished run.
pub(super) fn build(run: &Run, traffic: &Traffic, slos: &[Slo]) -> ServingReport {
    let done: Vec<_> = run.seqs.iter().filter(|s| s.done()).collect();
    let t0 = run
        .seqs
        .iter()
        .map(|s| s.arrival)
        .fold(f64::INFINITY, f64::min);
    let t1 = done.iter().map(|s| s.finish).fold(0.0f64, f64::max);
    let duration = if t0.is_finite() {
        (t1 - t0).max(0.0)
    } else {
        0.0
    };
    let per_s = |x: f64| if duration > 0.0 { x / duration } else { 0.0 };
    let out_tokens: f64 = done.iter().map(|s| s.output as f64).sum();
    let in_tokens: f64 = done.iter().map(|s| s.input as f64).sum();
    let mut ttft: Vec<f64> = done.iter().map(|s| s.first - s.arrival).collect();
    let mut e2e: Vec<f64> = done.iter().map(|s| s.finish - s.arrival).collect();
    let tpot_of = |s: &crate::state::Seq| (s.finish - s.first) / (s.output - 1) as f64;
    let mut tpot: Vec<f64> = done
        .iter()
        .filter(|s| s.output > 1)
        .map(|s| tpot_of(s))
        .collect();
    let gaps: f64 = done.iter().map(|s| (s.output - 1) as f64).sum();
    let gap_time: f64 = done
        .iter()
        .filter(|s| s.output > 1)
        .map(|s| s.finish - s.first)
        .sum();
    let per_user = {
        let v: Vec<f64> = tpot.iter().filter(|t| **t > 0.0).map(|t| 1.0 / t).collect();
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let mut transfer: Vec<f64> = done
        .iter()
        .filter(|s| !s.received.is_nan())
        .map(|s| s.received - s.first)
        .collect();
    let slo = slos
        .iter()
        .map(|slo| {
            let met = done
                .iter()
                .filter(|s| {
                    let tp = if s.output > 1 { tpot_of(s) } else { 0.0 };
                    slo.met(s.first - s.arrival, tp, s.finish - s.arrival)
                })
                .count();
            let n = run.seqs.len().max(1) as f64;
            let attainment = met as f64 / n;
            // Requests that never completed count as infinitely late: the quantile is over all
            // requests, so an incomplete run needs an unbounded factor (reported as 1e9).
            let q = |v: &[f64], lim: Option<f64>| -> f64 {
                let Some(l) = lim else { return 0.0 };
                let k = (slo.attainment * n).ceil().max(1.0) as usize;
                if k > v.len() {
                    return 1e9;
                }
                let mut w = v.to_vec();
                w.sort_by(f64::total_cmp);
                w[k - 1] * 1e3 / l
            };
            let tp: Vec<f64> = done
                .iter()
                .map(|s| if s.output > 1 { tpot_of(s) } else { 0.0 })
                .collect();
            let factor = q(&ttft, slo.ttft_ms)
                .max(q(&tp, slo.tpot_ms))
                .max(q(&e2e, slo.e2e_ms))
                .min(1e9);
            SloReport {
                slo: *slo,
                attainment,
                goodput_requests_per_s: per_s(met as f64),
                met: attainment >= slo.attainment,
                factor,
            }
        })
        .collect();
    let gpus = run.d.gpus();
    let (offered_rate, concurrency) = match traffic {
        Traffic::Closed { clients, .. } => (None, Some(*clients)),
        Traffic::Open(_) => (None, None),
    };
    ServingReport {
        load: String::new(),
        offered_rate,
        concurrency,
        gpus,
        requests: run.seqs.len() as u32,
        completed: done.len() as u32,
        duration: Seconds(duration),
        requests_per_s: per_s(done.len() as f64),
        output_tokens_per_s: per_s(out_tokens),
        input_tokens_per_s: per_s(in_tokens),
        output_tokens_per_s_per_gpu: per_s(out_tokens) / gpus.max(1) as f64,
        tokens_per_s_per_user: per_user,
        ttft: Stats::of(&mut ttft),
        tpot: Stats::of(&mut tpot),
        itl_mean: Seconds(if gaps > 0.0 { gap_time / gaps } else { 0.0 }),
        e2e: Stats::of(&mut e2e),
        kv_transfer: (!transfer.is_empty()).then(|| Stats::of(&mut transfer)),
        preemptions: run.preemptions,
        slo,
        pools: pools(run, duration),
    }
}

fn pools(run: &Run, duration: f64) -> Vec<PoolReport> {
    run.d
        .pools
        .iter()
        .enumerate()
        .map(|(pi, p)| {
            let insts: Vec<_> = run.insts.iter().filter(|i| i.pool == pi).collect();
            let kv = &run.kv[pi];
            let steps: u64 = insts.iter().map(|i| i.steps).sum();
            let seqs: u64 = insts.iter().map(|i| i.seqs_in_steps).sum();
            let tokens: u64 = insts.iter().map(|i| i.tokens_in_steps).sum();
            let lanes = (insts.len() as f64 * p.plan.pp as f64).max(1.0);
            let busy: f64 = insts.iter().map(|i| i.busy_time).sum();
            let frac = |x: f64, d: f64| if d > 0.0 { x / d } else { 0.0 };
            let total = kv.blocks.max(1) as f64;
            let occ: f64 = insts
                .iter()
                .map(|i| frac(i.kv_area, duration * total))
                .sum::<f64>()
                / insts.len().max(1) as f64;
            let peak = insts.iter().map(|i| i.kv_peak).max().unwrap_or(0) as f64 / total;
            PoolReport {
                role: p.role,
                tp: p.plan.tp,
                pp: p.plan.pp,
                instances: p.instances,
                gpus: p.gpus(),
                max_batch: p.max_batch,
                max_num_tokens: p.max_num_tokens,
                kv_blocks: kv.blocks,
                kv_tokens: kv.blocks as u64 * kv.block_size as u64,
                kv_gb: kv.blocks as f64 * kv.block_bytes.0 / 1e9,
                steps,
                busy_fraction: frac(busy, duration * lanes).min(1.0),
                mean_batch: frac(seqs as f64, steps as f64),
                mean_step_tokens: frac(tokens as f64, steps as f64),
                kv_mean_occupancy: occ.min(1.0),
                kv_peak_occupancy: peak,
            }
        })
        .collect()
}

/// Where TTFT explodes over a sweep of offered rates: the first offered rate whose mean TTFT
/// exceeds five times the lowest rate's (runs without an offered rate are left out).
pub fn ttft_knee(runs: &[ServingReport]) -> Option<f64> {
    let mut rated: Vec<&ServingReport> = runs.iter().filter(|r| r.offered_rate.is_some()).collect();
    rated.sort_by(|a, b| {
        a.offered_rate
            .partial_cmp(&b.offered_rate)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let base = rated.first()?.ttft.mean.0;
    rated
        .iter()
        .find(|r| r.ttft.mean.0 > 5.0 * base)
        .and_then(|r| r.offered_rate)
}
