//! The walk: candidate deployments enumerated from the space, step tables warmed per pool
//! plan, every candidate simulated at its load points in parallel, then the Pareto front, the
//! top points and the best (or closest) per SLO.

use super::ServingSearch;
use crate::SearchError;
use perfcast_engine::inference::{InferencePlan, StepCosts};
use perfcast_scenario::serving::Requests;
use perfcast_serving::{
    DisaggregatedConfig, Length, Load, PoolConfig, ServingConfig, ServingReport, Simulator, Slo,
    WorkloadSpec,
};
use rayon::prelude::*;
use serde::Serialize;

/// One deployment at one load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchPoint {
    /// The deployment in words (`agg tp2 pp1 x4 mb128 mnt8192 chunk2048`, `disagg 2 x tp1
    /// + 3 x tp2 mb128 mnt8192`).
    pub label: String,
    /// Prefill and decode in separate pools.
    pub disaggregated: bool,
    /// TP of an (aggregated or decode) instance.
    pub tp: u32,
    /// PP of an instance.
    pub pp: u32,
    /// Expert parallelism and attention data parallelism of an (aggregated) instance.
    pub ep: u32,
    pub attention_dp: bool,
    /// Instances (aggregated) or decode instances.
    pub instances: u32,
    /// Prefill instances and their TP (disaggregated).
    pub prefill: Option<(u32, u32)>,
    /// Sequences per instance at most.
    pub max_batch: u32,
    /// Tokens per step at most.
    pub max_num_tokens: u32,
    /// Prefill chunk size.
    pub chunk_size: u32,
    /// Devices.
    pub gpus: u32,
    /// Closed-loop clients of this load point (all instances).
    pub clients: u32,
    /// Output tokens per second per GPU.
    pub tokens_per_s_per_gpu: f64,
    /// Output tokens per second one user sees (mean 1 / TPOT).
    pub tokens_per_s_per_user: f64,
    /// Output tokens per second of the deployment.
    pub output_tokens_per_s: f64,
    /// TTFT, ms.
    pub ttft_p50_ms: f64,
    /// TTFT, ms.
    pub ttft_p90_ms: f64,
    /// TPOT, ms.
    pub tpot_p50_ms: f64,
    /// TPOT, ms.
    pub tpot_p90_ms: f64,
    /// Per SLO: met.
    pub slo_met: Vec<bool>,
    /// Per SLO: the factor its limits would need (<= 1: met limit by limit).
    pub slo_factor: Vec<f64>,
}

/// The best point for one SLO.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BestForSlo {
    /// The SLO.
    pub slo: Slo,
    /// The point with the most tokens/s per GPU among those that meet it.
    pub best: Option<SearchPoint>,
    /// When none does: the point that comes closest (smallest factor).
    pub closest: Option<SearchPoint>,
}

/// What a deployment search returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServingSearchResult {
    /// Deployments enumerated.
    pub configurations: usize,
    /// Of which the engine refused (memory, KV cache, degrees), with the first reasons.
    pub refused: usize,
    /// Up to five distinct reasons.
    pub refusals: Vec<String>,
    /// Load points simulated.
    pub points: usize,
    /// Requests simulated in all.
    pub requests: u64,
    /// The Pareto front of tokens/s per GPU against tokens/s per user, by tokens/s per user.
    pub pareto: Vec<SearchPoint>,
    /// The points with the most tokens/s per GPU that meet the first SLO (all points when
    /// none is given).
    pub top: Vec<SearchPoint>,
    /// Per SLO.
    pub best: Vec<BestForSlo>,
    /// Wall time of the search.
    pub seconds: f64,
    /// Worker threads.
    pub threads: usize,
}

/// A deployment to simulate.
#[derive(Debug, Clone)]
struct Candidate {
    cfg: ServingConfig,
    point: SearchPoint,
    /// The next smaller `max_batch` of the space (0 for the smallest): loads of at most this
    /// many clients per instance run the same at that `max_batch` and are simulated there.
    below: u32,
}

fn powers_of_two(max: u32) -> Vec<u32> {
    (0..32)
        .map(|i| 1u32 << i)
        .take_while(|&p| p <= max)
        .collect()
}

/// Every candidate of the space.
fn candidates(s: &ServingSearch) -> Vec<Candidate> {
    let c = &s.config;
    let base = &s.scenario.config;
    let domain = s
        .scenario
        .inference
        .system()
        .network
        .first()
        .map(|l| l.domain_size())
        .unwrap_or(1);
    let tps =
        c.tp.clone()
            .unwrap_or_else(|| powers_of_two(domain.min(s.gpus)));
    let pps = c.pp.clone().unwrap_or_else(|| vec![1]);
    let mut mbs = c
        .max_batch
        .clone()
        .unwrap_or_else(|| vec![64, 128, 256, 512]);
    mbs.sort_unstable();
    mbs.dedup();
    let mnts = c.max_num_tokens.clone().unwrap_or_else(|| vec![2048, 8192]);
    let empty = SearchPoint {
        label: String::new(),
        disaggregated: false,
        tp: 1,
        pp: 1,
        ep: 1,
        attention_dp: false,
        instances: 1,
        prefill: None,
        max_batch: 1,
        max_num_tokens: 1,
        chunk_size: 1,
        gpus: 0,
        clients: 0,
        tokens_per_s_per_gpu: 0.0,
        tokens_per_s_per_user: 0.0,
        output_tokens_per_s: 0.0,
        ttft_p50_ms: 0.0,
        ttft_p90_ms: 0.0,
        tpot_p50_ms: 0.0,
        tpot_p90_ms: 0.0,
        slo_met: Vec::new(),
        slo_factor: Vec::new(),
    };
    let mut out = Vec::new();
    let mut below = 0;
    for &mb in &mbs {
        for &mnt in &mnts {
            let chunks = c.chunk_size.clone().unwrap_or_else(|| vec![mnt]);
            for &chunk in chunks.iter().filter(|&&x| x <= mnt) {
                let sched = Sched {
                    cfg: ServingConfig {
                        max_batch: mb,
                        max_num_tokens: mnt,
                        chunk_size: Some(chunk),
                        chunked_prefill: true,
                        disaggregated: None,
                        ..base.clone()
                    },
                    point: SearchPoint {
                        max_batch: mb,
                        max_num_tokens: mnt,
                        chunk_size: chunk,
                        ..empty.clone()
                    },
                    suffix: format!("mb{mb} mnt{mnt} chunk{chunk}"),
                    below,
                };
                if c.aggregated != Some(false) {
                    aggregated(s, &tps, &pps, &sched, &mut out);
                }
                if c.disaggregated == Some(true) {
                    disaggregated(s, &tps, &sched, &mut out);
                }
            }
        }
        below = mb;
    }
    out
}

/// The scheduler limits of a group of candidates.
struct Sched {
    cfg: ServingConfig,
    point: SearchPoint,
    suffix: String,
    below: u32,
}

/// The expert layouts of an instance of `tp` ranks: `(ep, attention_dp)` pairs of the
/// space that the model allows (a dense model: `(1, false)` alone).
fn expert_layouts(s: &ServingSearch, tp: u32) -> Vec<(u32, bool)> {
    let Some(moe) = &s.scenario.inference.model().moe else {
        return vec![(1, false)];
    };
    let eps = s.config.ep.clone().unwrap_or_else(|| vec![1, tp]);
    let dps = s
        .config
        .attention_dp
        .clone()
        .unwrap_or_else(|| vec![false, true]);
    let mut out = Vec::new();
    for &dp in &dps {
        for &ep in &eps {
            let ok = ep >= 1
                && tp.is_multiple_of(ep)
                && moe.experts.is_multiple_of(ep as u64)
                && (!dp || ep == tp);
            if ok && !out.contains(&(ep, dp)) {
                out.push((ep, dp));
            }
        }
    }
    out
}

/// Aggregated candidates: every TP x PP instance (and expert layout) that fits, replicated.
fn aggregated(
    s: &ServingSearch,
    tps: &[u32],
    pps: &[u32],
    sched: &Sched,
    out: &mut Vec<Candidate>,
) {
    for &tp in tps {
        for &pp in pps {
            let g = tp * pp;
            if g > s.gpus {
                continue;
            }
            let reps = s
                .config
                .replicas
                .clone()
                .unwrap_or_else(|| vec![s.gpus / g]);
            for (ep, dp) in expert_layouts(s, tp) {
                let layout = match (s.scenario.inference.model().moe.is_some(), dp) {
                    (false, _) => String::new(),
                    (true, false) => format!(" ep{ep}"),
                    (true, true) => format!(" dep{ep}"),
                };
                for &r in reps.iter().filter(|&&r| r * g <= s.gpus) {
                    out.push(Candidate {
                        cfg: ServingConfig {
                            tp: Some(tp),
                            pp: Some(pp),
                            replicas: Some(r),
                            ep: Some(ep),
                            attention_dp: Some(dp),
                            ..sched.cfg.clone()
                        },
                        point: SearchPoint {
                            label: format!("agg tp{tp}{layout} pp{pp} x{r} {}", sched.suffix),
                            tp,
                            pp,
                            ep,
                            attention_dp: dp,
                            instances: r,
                            gpus: g * r,
                            ..sched.point.clone()
                        },
                        below: sched.below,
                    });
                }
            }
        }
    }
}

/// Disaggregated candidates: for every prefill and decode TP (and, for a mixture-of-experts
/// model, every expert layout of each pool), every split of the budget into at least one
/// prefill instance and as many decode instances as the rest holds.
fn disaggregated(s: &ServingSearch, tps: &[u32], sched: &Sched, out: &mut Vec<Candidate>) {
    let ptps = s.config.prefill_tp.clone().unwrap_or_else(|| tps.to_vec());
    let dtps = s.config.decode_tp.clone().unwrap_or_else(|| tps.to_vec());
    let moe = s.scenario.inference.model().moe.is_some();
    let pool = |tp, instances, (ep, dp): (u32, bool)| PoolConfig {
        tp,
        pp: 1,
        instances,
        max_batch: None,
        max_num_tokens: None,
        ep: moe.then_some(ep),
        attention_dp: moe.then_some(dp),
        // `serving.attention_tp`, when set, holds for every pool the search tries.
        attention_tp: None,
    };
    let name = |(ep, dp): (u32, bool)| match (moe, dp) {
        (false, _) => String::new(),
        (true, false) => format!(" ep{ep}"),
        (true, true) => format!(" dep{ep}"),
    };
    let overhead = s
        .scenario
        .config
        .disaggregated
        .map_or(0.0, |d| d.transfer_overhead_us);
    for &tp_p in &ptps {
        for &tp_d in &dtps {
            for lp in expert_layouts(s, tp_p) {
                for ld in expert_layouts(s, tp_d) {
                    let mut np = 1;
                    while np * tp_p + tp_d <= s.gpus {
                        let nd = (s.gpus - np * tp_p) / tp_d;
                        out.push(Candidate {
                            cfg: ServingConfig {
                                disaggregated: Some(DisaggregatedConfig {
                                    prefill: pool(tp_p, np, lp),
                                    decode: pool(tp_d, nd, ld),
                                    transfer_overhead_us: overhead,
                                }),
                                ..sched.cfg.clone()
                            },
                            point: SearchPoint {
                                label: format!(
                                    "disagg {np} x tp{tp_p}{} + {nd} x tp{tp_d}{} {}",
                                    name(lp),
                                    name(ld),
                                    sched.suffix
                                ),
                                disaggregated: true,
                                tp: tp_d,
                                ep: ld.0,
                                attention_dp: ld.1,
                                instances: nd,
                                prefill: Some((np, tp_p)),
                                gpus: np * tp_p + nd * tp_d,
                                ..sched.point.clone()
                            },
                            below: sched.below,
                        });
                        np += 1;
                    }
                }
            }
        }
    }
}

/// The lengths of the scenario's requests.
fn lengths(s: &ServingSearch) -> Result<(Length, Length, u64), SearchError> {
    match &s.scenario.requests {
        Requests::Generated(w) => Ok((w.input_len, w.output_len, w.seed)),
        Requests::Trace { .. } => Err(SearchError::Invalid {
            key: "serving.trace".into(),
            message: "a deployment search simulates closed loops of clients: give serving.input_len and serving.output_len instead of a trace".into(),
        }),
    }
}

/// Run the search.
pub fn search(s: &ServingSearch) -> Result<ServingSearchResult, SearchError> {
    let start = std::time::Instant::now();
    let (input_len, output_len, seed) = lengths(s)?;
    let max_context = input_len.max() + output_len.max();
    let cands = candidates(s);
    if cands.is_empty() {
        return Err(SearchError::Empty {
            reason: format!(
                "no deployment of the serving_search space fits the {} GPUs (every TP x PP, or prefill and decode instance, is larger)",
                s.gpus
            ),
        });
    }
    let warmed = warm_costs(s, &cands, max_context);
    let results: Vec<Result<Vec<(SearchPoint, u64)>, String>> = cands
        .par_iter()
        .map(|cand| simulate(s, cand, &warmed, (input_len, output_len, seed)))
        .collect();
    let mut points = Vec::new();
    let mut refused = 0;
    let mut refusals: Vec<String> = Vec::new();
    let mut requests = 0u64;
    for r in results {
        match r {
            Ok(v) => {
                for (p, n) in v {
                    requests += n;
                    points.push(p);
                }
            }
            Err(e) => {
                refused += 1;
                if refusals.len() < 5 && !refusals.contains(&e) {
                    refusals.push(e);
                }
            }
        }
    }
    if points.is_empty() {
        return Err(SearchError::Empty {
            reason: format!(
                "the engine refused all {} deployments: {}",
                cands.len(),
                refusals.join("; ")
            ),
        });
    }
    points.sort_by(|a, b| a.label.cmp(&b.label).then(a.clients.cmp(&b.clients)));
    let top_n = s.config.top.unwrap_or(10);
    Ok(ServingSearchResult {
        configurations: cands.len(),
        refused,
        refusals,
        points: points.len(),
        requests,
        pareto: pareto(&points),
        top: top(&points, top_n),
        best: s
            .slos
            .iter()
            .enumerate()
            .map(|(i, slo)| best(&points, i, *slo))
            .collect(),
        seconds: start.elapsed().as_secs_f64(),
        threads: rayon::current_num_threads(),
    })
}

/// The step costs of the distinct pool plans of `cands`, each warmed for the largest step
/// and batch it must time (a plan the engine refuses is left out: its deployments are
/// refused when simulated).
fn warm_costs<'a>(
    s: &'a ServingSearch,
    cands: &[Candidate],
    max_context: u32,
) -> Vec<StepCosts<'a>> {
    let defaults = Some(&s.scenario.plan);
    let mut plans: Vec<(InferencePlan, u64, u64)> = Vec::new();
    for c in cands {
        if let Ok(d) = c.cfg.deployment(defaults, max_context) {
            for p in &d.pools {
                let mut plan = p.plan.clone();
                plan.input_len = max_context.max(2) - 1;
                plan.output_len = 1;
                let logits =
                    p.max_batch as u64 * d.speculative.map_or(1, |x| x.draft_len as u64 + 1);
                match plans.iter_mut().find(|(q, _, _)| *q == plan) {
                    Some(e) => {
                        e.1 = e.1.max(p.max_num_tokens as u64);
                        e.2 = e.2.max(logits);
                    }
                    None => plans.push((plan, p.max_num_tokens as u64, logits)),
                }
            }
        }
    }
    let inf = &s.scenario.inference;
    plans
        .par_iter()
        .filter_map(|(plan, m, l)| {
            let mut c = inf.step_costs(plan).ok()?;
            c.warm(*m, *l).ok()?;
            Some(c)
        })
        .collect()
}

/// Simulate one candidate deployment at each load of the space up to its `max_batch`
/// clients per instance: its points and the requests each simulated.
fn simulate(
    s: &ServingSearch,
    cand: &Candidate,
    warmed: &[StepCosts],
    (input_len, output_len, seed): (Length, Length, u64),
) -> Result<Vec<(SearchPoint, u64)>, String> {
    let max_context = input_len.max() + output_len.max();
    let d = cand
        .cfg
        .deployment(Some(&s.scenario.plan), max_context)
        .map_err(|e| e.to_string())?;
    let costs: Vec<StepCosts> = warmed
        .iter()
        .filter(|w| d.pools.iter().any(|p| same_plan(w.plan(), &p.plan)))
        .cloned()
        .collect();
    let mut sim =
        Simulator::with_costs(&s.scenario.inference, costs).with_draft(s.scenario.draft.as_ref());
    let conc = s
        .config
        .concurrency
        .as_deref()
        .unwrap_or(&[1, 4, 16, 64, 256]);
    let per_client = s.config.requests_per_client.unwrap_or(4);
    let min_requests = s.config.min_requests.unwrap_or(32);
    let mb = cand.point.max_batch;
    let mut loads: Vec<u32> = conc
        .iter()
        .copied()
        .chain([mb])
        .filter(|&c| c > cand.below && c <= mb)
        .collect();
    loads.sort_unstable();
    loads.dedup();
    let mut out = Vec::new();
    for c in loads {
        let clients = c * cand.point.instances;
        let requests = (per_client * clients).max(min_requests);
        let w = WorkloadSpec {
            input_len,
            output_len,
            requests,
            load: Load::Concurrency(clients),
            seed,
        };
        let r = sim
            .run(&d, &w.traffic(), seed, &s.slos)
            .map_err(|e| e.to_string())?;
        out.push((point(&cand.point, clients, &r), requests as u64));
    }
    Ok(out)
}

fn same_plan(a: &InferencePlan, b: &InferencePlan) -> bool {
    (
        a.tp,
        a.pp,
        a.weight_dtype,
        a.activation_dtype,
        a.kv_dtype,
        a.attention,
        a.ep,
        a.attention_dp,
        a.expert_dtype,
    ) == (
        b.tp,
        b.pp,
        b.weight_dtype,
        b.activation_dtype,
        b.kv_dtype,
        b.attention,
        b.ep,
        b.attention_dp,
        b.expert_dtype,
    )
}

fn point(t: &SearchPoint, clients: u32, r: &ServingReport) -> SearchPoint {
    SearchPoint {
        clients,
        tokens_per_s_per_gpu: r.output_tokens_per_s_per_gpu,
        tokens_per_s_per_user: r.tokens_per_s_per_user,
        output_tokens_per_s: r.output_tokens_per_s,
        ttft_p50_ms: r.ttft.p50.millis(),
        ttft_p90_ms: r.ttft.p90.millis(),
        tpot_p50_ms: r.tpot.p50.millis(),
        tpot_p90_ms: r.tpot.p90.millis(),
        slo_met: r.slo.iter().map(|s| s.met).collect(),
        slo_factor: r.slo.iter().map(|s| s.factor).collect(),
        ..t.clone()
    }
}

/// Points no other point beats on both tokens/s per GPU and tokens/s per user, by tokens/s
/// per user descending.
fn pareto(points: &[SearchPoint]) -> Vec<SearchPoint> {
    let mut v: Vec<&SearchPoint> = points.iter().collect();
    v.sort_by(|a, b| {
        b.tokens_per_s_per_user
            .total_cmp(&a.tokens_per_s_per_user)
            .then(b.tokens_per_s_per_gpu.total_cmp(&a.tokens_per_s_per_gpu))
            .then(a.label.cmp(&b.label))
            .then(a.clients.cmp(&b.clients))
    });
    let mut out: Vec<SearchPoint> = Vec::new();
    let mut best = f64::NEG_INFINITY;
    for p in v {
        if p.tokens_per_s_per_gpu > best {
            best = p.tokens_per_s_per_gpu;
            out.push(p.clone());
        }
    }
    out
}

fn by_gpu_throughput(a: &&SearchPoint, b: &&SearchPoint) -> std::cmp::Ordering {
    b.tokens_per_s_per_gpu
        .total_cmp(&a.tokens_per_s_per_gpu)
        .then(a.gpus.cmp(&b.gpus))
        .then(a.label.cmp(&b.label))
        .then(a.clients.cmp(&b.clients))
}

fn top(points: &[SearchPoint], n: usize) -> Vec<SearchPoint> {
    let mut v: Vec<&SearchPoint> = points
        .iter()
        .filter(|p| p.slo_met.first().copied().unwrap_or(true))
        .collect();
    v.sort_by(by_gpu_throughput);
    v.into_iter().take(n).cloned().collect()
}

fn best(points: &[SearchPoint], i: usize, slo: Slo) -> BestForSlo {
    let mut met: Vec<&SearchPoint> = points.iter().filter(|p| p.slo_met[i]).collect();
    met.sort_by(by_gpu_throughput);
    let best = met.first().map(|p| (*p).clone());
    let closest = if best.is_none() {
        points
            .iter()
            .min_by(|a, b| {
                a.slo_factor[i]
                    .total_cmp(&b.slo_factor[i])
                    .then(b.tokens_per_s_per_gpu.total_cmp(&a.tokens_per_s_per_gpu))
                    .then(a.label.cmp(&b.label))
            })
            .cloned()
    } else {
        None
    };
    BestForSlo { slo, best, closest }
}
