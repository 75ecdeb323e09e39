//! The `server` and `offline-max-throughput` modes: a case mapped to a serving deployment,
//! its workload and its software stack's scheduler, simulated by
//! [`perfcast_serving`], and every published metric compared.
//!
//! Mapping (shared by every case; nothing keys on a group or an id):
//!
//! * **Deployment**: the case's `tp`, `pp` and `dp` (replicas), formats as the static modes
//!   map them ([`crate::harness::inference_plan`]'s rules).
//! * **Workload**: `num_requests` requests (default 500) of the case's uniform lengths;
//!   `server` at `request_rate` (a Poisson process: the sources do not state theirs, and
//!   Poisson is the load generators' default), or a closed loop of `concurrency` clients;
//!   `offline-max-throughput` with every request at once. Seed 0.
//! * **Software stack**: the kernels and host costs are the case's stack of
//!   `configs/validation/stacks.toml`, as for the static modes (TensorRT-LLM 0.x: XQA decode
//!   attention). The **engine's scheduler** ([`ServingStack::of`], from the case's
//!   `software`: Triton's TensorRT-LLM backend, `trtllm-bench`, `trtllm-serve`, vLLM or
//!   SGLang, any version; an engine no rule knows takes [`ServingStack::FALLBACK`] and the
//!   result says so): the engine limits, batching policy, KV-cache block size, fraction and
//!   admission, and CUDA-graph sizes its documentation and source give (`engines.rs`,
//!   sources beside each value), with the benchmark launcher's overrides where the
//!   `software` names one (AIConfigurator's); `max_batch` when the case publishes it.
//!
//! Metrics: `ttft_ms`, `tpot_ms` (the token-weighted inter-token latency, which is what the
//! sources record there), `latency_s`, `tokens_per_s` (output), `tokens_per_s_per_gpu`,
//! `requests_per_s`, each the simulated run's mean or rate over the run; the per-request
//! latencies as the statistic the case names (`measured.statistic`: median, p90, p99).

use crate::cases::{Case, Metric, Mode, Statistic};
use crate::harness::{inference_of, inference_plan, u32_of, Harness};
use crate::report::{CaseResult, MetricResult};
use crate::{Error, Result};
use perfcast_core::workload::ModelSpec;
use perfcast_engine::inference::Inference;
use perfcast_serving::{
    ArrivalProcess, Batching, KvAdmission, Length, Load, Schedule, ServingConfig, ServingReport,
    Simulator, WorkloadSpec,
};

/// Requests of a case that does not say how many (at least two per client of a closed loop:
/// [`workload`]).
pub const DEFAULT_REQUESTS: u32 = 500;

mod engines;
pub use engines::{trtllm_bench_settings, ServingStack, StackChoice};

/// Whether this module models the case's mode.
pub fn models_mode(mode: Mode) -> bool {
    matches!(mode, Mode::Server | Mode::OfflineMaxThroughput)
}

/// The workload of a case.
pub fn workload(case: &Case) -> Result<WorkloadSpec> {
    let i = inference_of(case)?;
    let load = match (i.mode, i.concurrency, i.request_rate) {
        (_, Some(c), _) => Load::Concurrency(u32_of("inference.concurrency", c)?),
        (Mode::Server, None, Some(r)) if r >= perfcast_serving::MIN_RATE => Load::Rate {
            rate: r,
            process: ArrivalProcess::Poisson,
        },
        (Mode::Server, None, Some(r)) => {
            return Err(Error::invalid(format!(
                "inference.request_rate = {r:e}: {}",
                perfcast_serving::MIN_RATE_RULE
            )))
        }
        _ => Load::Burst,
    };
    let requests = match i.num_requests {
        Some(n) => u32_of("inference.num_requests", n)?,
        // Unsaid: 500, and two requests per client of a closed loop above 250 clients
        // (each client's second request arrives as its first completes, past the first
        // wave that starts all at once).
        None => match load {
            Load::Concurrency(c) => DEFAULT_REQUESTS.max(c.saturating_mul(2)),
            _ => DEFAULT_REQUESTS,
        },
    };
    // (the cases file's check says so first, naming the key)
    if requests > perfcast_serving::MAX_REQUESTS {
        return Err(Error::invalid(format!(
            "{requests} requests: {}",
            perfcast_serving::MAX_REQUESTS_RULE
        )));
    }
    Ok(WorkloadSpec {
        input_len: Length::Fixed(u32_of("inference.input_len", i.input_len)?),
        output_len: Length::Fixed(u32_of("inference.output_len", i.output_len)?),
        requests,
        load,
        seed: 0,
    })
}

/// How a serving case's run is had: simulated; simulated, recording its schedule where it
/// does not depend on step times; or that schedule re-timed on the engine (what a
/// calibration evaluates hundreds of times: [`perfcast_serving::Schedule`]).
#[derive(Debug, Default)]
pub enum ServingRun<'s> {
    /// Simulate.
    #[default]
    Simulate,
    /// Simulate, and leave the schedule here (`None` where it depends on step times).
    Record(Option<Box<Schedule>>),
    /// Re-time this schedule, recorded on the same case.
    Replay(&'s Schedule),
}

/// Run a serving case on `inf` (the case's inference engine: its model, its system and the
/// options of its software stack, with any overlay applied) as `how` says: the report and
/// the serving profile used.
pub fn simulate(
    h: &Harness,
    case: &Case,
    inf: &Inference,
    how: &mut ServingRun,
) -> Result<(ServingReport, StackChoice)> {
    let stack = ServingStack::of(case);
    let model = inf.model();
    let capacity = inf
        .system()
        .memory
        .device()
        .map(|d| d.capacity().0)
        .unwrap_or(0.0);
    let plan = inference_plan_for_serving(case, h.stack_of(case))?;
    let cfg = stack.stack.config(case, model, capacity);
    let wl = workload(case)?;
    let traffic = wl.traffic();
    let d = cfg.deployment(Some(&plan), traffic.max_context())?;
    let mut sim = Simulator::new(inf);
    let rep = match how {
        ServingRun::Simulate => sim.run(&d, &traffic, wl.seed, &[])?,
        ServingRun::Record(slot) => {
            let (rep, schedule) = sim.run_recorded(&d, &traffic, wl.seed, &[])?;
            *slot = schedule.map(Box::new);
            rep
        }
        ServingRun::Replay(schedule) => sim.replay(&d, &traffic, schedule, &[])?,
    };
    Ok((rep, stack))
}

/// The static-mode plan of a case with its engine-chosen batch replaced by 1 (the serving
/// simulation takes the parallelism and formats only).
fn inference_plan_for_serving(
    case: &Case,
    stack: &perfcast_scenario::Stack,
) -> Result<perfcast_engine::inference::InferencePlan> {
    let mut c = case.clone();
    if let Some(i) = c.inference.as_mut() {
        i.batch = crate::cases::Batch::Fixed(1);
    }
    inference_plan(&c, stack)
}

/// Predict every published metric of a serving case into `r`.
pub fn predict(
    h: &Harness,
    case: &Case,
    inf: &Inference,
    r: &mut CaseResult,
    how: &mut ServingRun,
) -> Result<()> {
    let (rep, stack) = simulate(h, case, inf, how)?;
    // The statistic the case publishes (the mean unless it names another): TPOT's mean is
    // the token-weighted inter-token latency, its percentiles those of each request's TPOT.
    let stat = case.measured.statistic.unwrap_or_default();
    let pick = |s: &perfcast_serving::Stats| match stat {
        Statistic::Mean => s.mean.0,
        Statistic::Median => s.p50.0,
        Statistic::P90 => s.p90.0,
        Statistic::P99 => s.p99.0,
    };
    let tpot = match stat {
        Statistic::Mean => rep.itl_mean.0,
        _ => pick(&rep.tpot),
    };
    for (metric, measured) in case.measured.metrics() {
        let predicted = match metric {
            Metric::TtftMs => Some(pick(&rep.ttft) * 1e3),
            Metric::TpotMs => Some(tpot * 1e3),
            Metric::LatencyS => Some(pick(&rep.e2e)),
            Metric::TokensPerS => Some(rep.output_tokens_per_s),
            Metric::TokensPerSPerGpu => Some(rep.output_tokens_per_s_per_gpu),
            Metric::RequestsPerS => Some(rep.requests_per_s),
            _ => None,
        };
        r.metrics
            .push(MetricResult::new(metric, predicted, measured));
    }
    let pool = rep.pools.first();
    r.breakdown = vec![
        ("duration s".into(), rep.duration.0),
        ("req/s".into(), rep.requests_per_s),
        ("batch".into(), pool.map_or(0.0, |p| p.mean_batch)),
        ("step tok".into(), pool.map_or(0.0, |p| p.mean_step_tokens)),
        ("kv occ".into(), pool.map_or(0.0, |p| p.kv_mean_occupancy)),
        ("max_batch".into(), pool.map_or(0.0, |p| p.max_batch as f64)),
        (
            "max_tokens".into(),
            pool.map_or(0.0, |p| p.max_num_tokens as f64),
        ),
    ];
    let mut notes = Vec::new();
    if !stack.recognised {
        notes.push(format!(
            "no serving-engine profile recognises software `{}`: predicted with the {} profile (the fallback)",
            case.software.as_deref().unwrap_or("(none)"),
            stack.stack.name()
        ));
    }
    if rep.completed < rep.requests {
        notes.push(format!(
            "serving simulation ({} profile): only {} of {} requests completed",
            stack.stack.name(),
            rep.completed,
            rep.requests
        ));
    }
    if !notes.is_empty() {
        r.reason = Some(notes.join("; "));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
