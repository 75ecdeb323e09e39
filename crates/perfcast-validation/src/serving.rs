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
//!   attention). The **benchmark's scheduler** ([`ServingStack::of`], from the case's
//!   `software`): the engine limits, KV-cache fraction and capacity policy the benchmark
//!   tool's documentation gives (sources beside each value); `max_batch` when the case
//!   publishes it.
//!
//! Metrics: `ttft_ms`, `tpot_ms` (the token-weighted inter-token latency, which is what the
//! sources record there), `latency_s`, `tokens_per_s` (output), `tokens_per_s_per_gpu`,
//! `requests_per_s`, each the simulated run's mean or rate over the run.

use crate::cases::{Case, Metric, Mode};
use crate::harness::{inference_of, inference_plan, u32_of, Harness};
use crate::report::{CaseResult, MetricResult};
use crate::{Error, Result};
use perfcast_core::workload::ModelSpec;
use perfcast_engine::inference::Inference;
use perfcast_serving::{
    ArrivalProcess, Length, Load, Schedule, ServingConfig, ServingReport, Simulator, WorkloadSpec,
};

/// Requests of a case that does not say how many.
pub const DEFAULT_REQUESTS: u32 = 500;

/// The scheduler settings of a software stack for a benchmark.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ServingStack {
    /// TensorRT-LLM served through Triton's `tensorrtllm_backend` (in-flight batcher).
    TritonTrtllm,
    /// `trtllm-bench throughput`: an engine built by `trtllm-bench build --dataset` (its
    /// tuning heuristic picks `max_batch_size` and `max_num_tokens`), all requests queued.
    TrtllmBench,
}

impl ServingStack {
    /// The stack of a case, from its `software` field; `None` for a stack without a profile.
    pub fn of(case: &Case) -> Option<ServingStack> {
        let s = case.software.as_deref()?;
        // TensorRT-LLM's PyTorch workflow is benchmarked with `trtllm-bench` (its
        // performance guides and blogs run `trtllm-bench ... throughput`).
        if s.contains("trtllm-bench")
            || (s.contains("TensorRT-LLM") && s.contains("PyTorch workflow"))
        {
            Some(ServingStack::TrtllmBench)
        } else if s.contains("tensorrtllm_backend") || s.contains("Triton") {
            Some(ServingStack::TritonTrtllm)
        } else {
            None
        }
    }

    /// The `[serving]` settings of this stack for `case` (`model` its model).
    pub fn config(self, case: &Case, model: &ModelSpec, capacity_bytes: f64) -> ServingConfig {
        let mut c = ServingConfig {
            // TensorRT-LLM's paged KV cache: 64 tokens per block (`tokens_per_block`
            // default); GUARANTEED_NO_EVICT is the default capacity scheduler policy of the
            // executor and of the Triton backend (tensorrtllm_backend docs/model_config.md
            // @v0.14.0, `batch_scheduler_policy`); TensorRT engines run without CUDA graphs
            // unless asked (`cuda_graph_mode` default false).
            kv_block_size: 64,
            cuda_graphs: false,
            ..ServingConfig::default()
        };
        let (isl, osl) = case
            .inference
            .as_ref()
            .map(|i| (i.input_len as u32, i.output_len as u32))
            .unwrap_or((1, 1));
        let (tp, pp) = case
            .inference_parallel()
            .map(|p| (p.tp as u32, p.pp as u32))
            .unwrap_or((1, 1));
        match self {
            ServingStack::TritonTrtllm => {
                // tensorrtllm_backend docs/model_config.md @v0.14.0: enable_chunked_context
                // default false, kv_cache_free_gpu_mem_fraction default 0.9. Engine limits
                // (not published for these runs): trtllm-build's defaults, max_num_tokens
                // 8192 and max_batch_size 2048 (`trtllm-build --help`, TensorRT-LLM 0.14).
                c.chunked_prefill = false;
                c.kv_memory_fraction = 0.9;
                c.max_num_tokens = 8192;
                c.max_batch = 2048;
            }
            ServingStack::TrtllmBench => {
                // perf-overview.md @258c7540c0: "--kv_cache_free_gpu_mem_fraction 0.95 in the
                // majority of cases". Chunked context on: without it the heuristic's
                // max_num_tokens (below the 5000- and 20000-token prompts of the grid) could
                // not schedule the long-prompt cells the source reports.
                c.kv_memory_fraction = 0.95;
                c.chunked_prefill = true;
                let (mb, mnt) =
                    trtllm_bench_settings(model, case, tp, pp, isl, osl, capacity_bytes);
                c.max_batch = mb;
                c.max_num_tokens = mnt;
                // TensorRT-LLM's PyTorch backend (1.x, and the "PyTorch workflow" of late 0.x)
                // replays decode-only steps as CUDA graphs by default
                // (`cuda_graph_config`; the v1.0 throughput tables: "CUDA graphs padded up to
                // batch 8192"); the TensorRT engine runtime does not.
                let s = case.software.as_deref().unwrap_or("");
                c.cuda_graphs = s.contains("PyTorch");
            }
        }
        if let Some(mb) = case.inference.as_ref().and_then(|i| i.max_batch) {
            // Under attention data parallelism every rank schedules its own requests: the
            // published `--max_batch_size` is per rank (TensorRT-LLM's DeepSeek-R1 guide).
            let ranks = if case.parallel.attention_dp == Some(true) {
                tp as u64
            } else {
                1
            };
            c.max_batch = (mb * ranks).min(u32::MAX as u64) as u32;
        }
        c
    }
}

/// `trtllm-bench build --dataset`'s engine settings (TensorRT-LLM
/// `tensorrt_llm/bench/build/tuning.py`, `calc_engine_setting` and `finetune_setting`):
/// the requests the KV cache holds at the dataset's lengths (95% of the memory the FP8
/// engine leaves, each GPU holding at least one KV head), capped at 4096 and divided over
/// the pipeline stages, rounded up (to 32 below 256, 128 below 1024, else 256; at least 64);
/// `max_num_tokens` = that batch x (1 + ISL/OSL), capped at 32768, rounded up (256 below
/// 4096, 512 below 8192, else 1024; at least 2048).
pub fn trtllm_bench_settings(
    model: &ModelSpec,
    case: &Case,
    tp: u32,
    pp: u32,
    isl: u32,
    osl: u32,
    capacity_bytes: f64,
) -> (u32, u32) {
    const GIB: f64 = (1u64 << 30) as f64;
    let (weights, kv) = case.inference.as_ref().map_or((2.0, 2.0), |i| {
        let w = i.precision.dtype().bytes();
        (w, crate::harness::kv_dtype(i).bytes())
    });
    let per_token = match &model.mla {
        // MLA: one latent and rotary key per token and layer, on every rank of the
        // attention's tensor-parallel group (none under attention data parallelism).
        Some(m) => {
            let copies = if case.parallel.attention_dp == Some(true) {
                1.0
            } else {
                tp as f64
            };
            copies * model.layers as f64 * (m.kv_lora_rank + m.qk_rope_head_dim) as f64 * kv / GIB
        }
        None => {
            let kv_heads = (tp as u64).max(model.kv_heads()) as f64;
            2.0 * model.layers as f64 * kv_heads * model.head_dim() as f64 * kv / GIB
        }
    };
    let gpus = (tp * pp) as f64;
    let engine = model.params() as f64 * weights / GIB;
    let available = capacity_bytes / GIB * gpus - engine;
    let cache = available * 0.95;
    let requests = (cache / (per_token * (isl + osl) as f64)).max(1.0);
    let raw_bs = requests.min(4096.0) / pp as f64;
    let raw_token = (raw_bs * (1.0 + isl as f64 / osl as f64)).min(32768.0);
    let up = |x: f64, m: f64| m * (x / m).ceil();
    let bs = if raw_bs < 256.0 {
        up(raw_bs, 32.0).max(64.0)
    } else if raw_bs < 1024.0 {
        up(raw_bs, 128.0)
    } else {
        up(raw_bs, 256.0)
    };
    let tokens = if raw_token < 4096.0 {
        up(raw_token, 256.0).max(2048.0)
    } else if raw_token < 8192.0 {
        up(raw_token, 512.0)
    } else {
        up(raw_token, 1024.0)
    };
    (bs as u32, tokens as u32)
}

/// Whether this module models the case's mode.
pub fn models_mode(mode: Mode) -> bool {
    matches!(mode, Mode::Server | Mode::OfflineMaxThroughput)
}

/// Why a serving case cannot be modelled (before simulating), if it cannot.
pub fn unsupported_reason(case: &Case) -> Option<String> {
    if ServingStack::of(case).is_none() {
        let mode = case.inference.as_ref().map_or("?", |i| i.mode.name());
        return Some(format!(
            "inference mode \"{mode}\" is simulated for known serving stacks, and software `{}` has no serving-stack profile (profiles: Triton tensorrtllm_backend, trtllm-bench)",
            case.software.as_deref().unwrap_or("(none)")
        ));
    }
    None
}

/// The workload of a case.
pub fn workload(case: &Case) -> Result<WorkloadSpec> {
    let i = inference_of(case)?;
    let load = match (i.mode, i.concurrency, i.request_rate) {
        (_, Some(c), _) => Load::Concurrency(u32_of("inference.concurrency", c)?),
        (Mode::Server, None, Some(r)) => Load::Rate {
            rate: r,
            process: ArrivalProcess::Poisson,
        },
        _ => Load::Burst,
    };
    Ok(WorkloadSpec {
        input_len: Length::Fixed(u32_of("inference.input_len", i.input_len)?),
        output_len: Length::Fixed(u32_of("inference.output_len", i.output_len)?),
        requests: i
            .num_requests
            .map(|n| u32_of("inference.num_requests", n))
            .transpose()?
            .unwrap_or(DEFAULT_REQUESTS),
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
) -> Result<(ServingReport, ServingStack)> {
    let stack = ServingStack::of(case).ok_or_else(|| Error::invalid("no serving-stack profile"))?;
    let model = inf.model();
    let capacity = inf
        .system()
        .memory
        .device()
        .map(|d| d.capacity().0)
        .unwrap_or(0.0);
    let plan = inference_plan_for_serving(case, h.stack_of(case))?;
    let cfg = stack.config(case, model, capacity);
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
    for (metric, measured) in case.measured.metrics() {
        let predicted = match metric {
            Metric::TtftMs => Some(rep.ttft.mean.millis()),
            Metric::TpotMs => Some(rep.itl_mean.millis()),
            Metric::LatencyS => Some(rep.e2e.mean.0),
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
    if rep.completed < rep.requests {
        r.reason = Some(format!(
            "serving simulation ({stack:?} profile): only {} of {} requests completed",
            rep.completed, rep.requests
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::CasesFile;
    use crate::harness::model_spec;
    use crate::report::Status;

    /// The public cases (the repository's copy, built in).
    fn cases() -> CasesFile {
        CasesFile::parse(crate::BUILTIN_CASES, crate::BUILTIN_CASES_LABEL).unwrap()
    }

    #[test]
    fn stacks_and_engine_settings() {
        let f = cases();
        let by_id = |id: &str| f.cases.iter().find(|c| c.id == id).unwrap();
        let online = by_id("trtllm_v014_llama31_70b_h100_tp4_467_256_qps2");
        let offline = by_id("trtllm_v017_llama31_8b_h100_tp1_128_2048");
        assert_eq!(ServingStack::of(online), Some(ServingStack::TritonTrtllm));
        assert_eq!(ServingStack::of(offline), Some(ServingStack::TrtllmBench));
        assert!(models_mode(Mode::Server) && !models_mode(Mode::Static));
        // trtllm-bench's heuristic for 8B FP8 on one H100 at 128/2048: 8 KV heads x 32
        // layers x 128 x 2 (K and V) x 1 byte = 64 KiB per token; (79.6 GiB - 7.48 GiB of FP8
        // weights) x 0.95 / (2176 x 64 KiB) = 516 requests -> 640 (rounded up to 128);
        // 640 x (1 + 128/2048) = 680 tokens -> 2048 (the floor). At 128/128: 4,383 requests,
        // capped at 4096; 4096 x 2 = 8192 tokens.
        let m = model_spec(offline, &perfcast_scenario::Stack::default());
        let (bs, mnt) = trtllm_bench_settings(&m, offline, 1, 1, 128, 2048, 85.5e9);
        assert_eq!((bs, mnt), (640, 2048));
        let (bs, mnt) = trtllm_bench_settings(&m, offline, 1, 1, 128, 128, 85.5e9);
        assert_eq!((bs, mnt), (4096, 8192));
        let w = workload(online).unwrap();
        assert_eq!(w.requests, 500);
        assert!(matches!(w.load, Load::Rate { rate, .. } if rate == 2.0));
        let mut c = offline.clone();
        c.software = Some("an unknown server".into());
        assert!(unsupported_reason(&c)
            .unwrap()
            .contains("no serving-stack profile"));
    }

    /// The online group: every case runs; below saturation (offered rate under the measured
    /// maximum) TTFT and TPOT within the 25%, output throughput within 15% over
    /// every rate. The offline grid: the dense cases run (MoE ones are unsupported until the
    /// inference engine routes experts), output throughput within 15% MAPE.
    #[test]
    fn serving_groups_reach_their_targets() {
        let f = cases();
        let h = Harness::new(
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
        )
        .unwrap();
        let mut err: std::collections::BTreeMap<(&str, &str), Vec<f64>> = Default::default();
        for c in f
            .cases
            .iter()
            .filter(|c| c.group.starts_with("trtllm-v01") && c.group != "trtllm-v05-ttft")
        {
            let r = h.run_case(c);
            assert_eq!(r.status, Status::Ok, "{}: {:?}", c.id, r.reason);
            let i = c.inference.as_ref().unwrap();
            let below = i.request_rate.is_some_and(|rate| {
                let series = f.cases.iter().find(|o| {
                    o.group == c.group
                        && o.model.name == c.model.name
                        && o.system.gpu == c.system.gpu
                        && o.inference.as_ref().is_some_and(|x| {
                            x.mode == Mode::OfflineMaxThroughput
                                && x.input_len == i.input_len
                                && x.output_len == i.output_len
                        })
                });
                series
                    .and_then(|s| s.measured.requests_per_s)
                    .is_some_and(|sat| rate < sat)
            });
            for m in &r.metrics {
                let Some(e) = m.rel_error else { continue };
                let key = match m.name {
                    Metric::TtftMs | Metric::TpotMs if !below => continue,
                    Metric::TtftMs => "ttft below saturation",
                    Metric::TpotMs => "tpot below saturation",
                    Metric::TokensPerS => "output throughput",
                    _ => continue,
                };
                err.entry((c.group.as_str(), key))
                    .or_default()
                    .push(e.abs());
            }
        }
        let mape = |g: &str, k: &str| {
            let v = &err[&(g, k)];
            v.iter().sum::<f64>() / v.len() as f64
        };
        for (g, k, target) in [
            ("trtllm-v014-online", "output throughput", 0.15),
            ("trtllm-v014-online", "ttft below saturation", 0.25),
            ("trtllm-v014-online", "tpot below saturation", 0.25),
            ("trtllm-v017-offline", "output throughput", 0.15),
        ] {
            let m = mape(g, k);
            assert!(
                m <= target,
                "{g} {k}: MAPE {:.1}% > {:.0}%",
                100.0 * m,
                100.0 * target
            );
        }
    }
}
