//! Deployment search for serving: every deployment of a `[serving_search]` space (TP, PP,
//! replicas, `max_batch`, `max_num_tokens`, chunk size; aggregated, and disaggregated splits
//! of the GPU budget into prefill and decode pools), each simulated at several loads (closed
//! loops of clients) with [`perfcast_serving`]; the Pareto front of output tokens/s
//! per GPU against tokens/s per user, and the best deployment per SLO (the highest tokens/s
//! per GPU among the loads that meet it; when none does, the closest).
//!
//! How it is fast: a deployment's step times depend only on its pool plans (TP, PP,
//! formats), so the step tables of every plan are computed once, in parallel, before the walk
//! ([`perfcast_engine::inference::StepCosts::warm`]) and cloned into each worker; a load point
//! simulates `requests_per_client x clients` requests (at least `min_requests`), enough for a
//! closed loop to reach its steady state.
//!
//! Invariants: results do not depend on the thread count (every simulation is deterministic
//! and the points are sorted by deployment and load before anything is selected); every bad
//! input is an error naming the key; a deployment the engine refuses (memory, KV cache, a
//! degree that does not divide) is counted and left out, never fatal.

mod walk;

#[cfg(test)]
mod tests;

pub use walk::{search, BestForSlo, SearchPoint, ServingSearchResult};

use crate::SearchError;
use perfcast_config::Config;
use perfcast_scenario::ServingScenario;
use perfcast_serving::Slo;
use serde::{Deserialize, Serialize};

/// The config's top-level section this module reads.
pub const SECTION: &str = "serving_search";

/// `[serving_search]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServingSearchConfig {
    /// GPUs the deployment may use. Default: `system.devices`.
    pub gpus: Option<u32>,
    /// Tensor-parallel degrees of an instance. Default: powers of two up to the NVLink domain
    /// and the budget.
    pub tp: Option<Vec<u32>>,
    /// Pipeline stages of an instance. Default `[1]`.
    pub pp: Option<Vec<u32>>,
    /// Expert-parallel degrees of a mixture-of-experts model (each must divide the instance's
    /// `tp` and the experts; others are skipped). Default: 1 and `tp` (the experts split over
    /// every rank, or spread whole). Ignored for a dense model.
    pub ep: Option<Vec<u32>>,
    /// Attention data parallelism on or off (with it the experts spread over every rank:
    /// `ep = tp`). Default: both for a mixture-of-experts model, off for a dense one.
    pub attention_dp: Option<Vec<bool>>,
    /// Instances (aggregated). Default: as many as the budget holds.
    pub replicas: Option<Vec<u32>>,
    /// Sequences per instance. Default `[64, 128, 256, 512]`.
    pub max_batch: Option<Vec<u32>>,
    /// Tokens per step. Default `[2048, 8192]`.
    pub max_num_tokens: Option<Vec<u32>>,
    /// Prefill chunk sizes (chunked prefill; each at most the step's `max_num_tokens`).
    /// Default: one chunk of `max_num_tokens`.
    pub chunk_size: Option<Vec<u32>>,
    /// Walk aggregated deployments. Default true.
    pub aggregated: Option<bool>,
    /// Also walk disaggregated ones: every split of the budget into prefill and decode
    /// instances of the `prefill_tp` and `decode_tp` degrees. Default false.
    pub disaggregated: Option<bool>,
    /// TP degrees of prefill instances. Default: `tp`'s.
    pub prefill_tp: Option<Vec<u32>>,
    /// TP degrees of decode instances. Default: `tp`'s.
    pub decode_tp: Option<Vec<u32>>,
    /// Closed-loop clients per instance (decode instance when disaggregated) at which each
    /// deployment is simulated, besides `max_batch` itself (the full load). Default `[1, 4,
    /// 16, 64, 256]`. A load is simulated at the smallest `max_batch` of the space that holds
    /// it (a larger limit that is never reached changes nothing but a little memory).
    pub concurrency: Option<Vec<u32>>,
    /// Requests per client of a load point. Default 4.
    pub requests_per_client: Option<u32>,
    /// Fewest requests of a load point. Default 32.
    pub min_requests: Option<u32>,
    /// More SLOs to pick a best deployment for, beside `[slo]`.
    pub slos: Option<Vec<Slo>>,
    /// Load points reported in the top list. Default 10.
    pub top: Option<usize>,
}

/// A resolved deployment search.
pub struct ServingSearch {
    /// The model, system, `[serving]` template and workload lengths.
    pub scenario: ServingScenario,
    /// The space and settings.
    pub config: ServingSearchConfig,
    /// The budget.
    pub gpus: u32,
    /// The SLOs (`[slo]` first).
    pub slos: Vec<Slo>,
}

/// Resolve a deployment search from `cfg` (load it with [`SECTION`] and the serving sections
/// among the allowed ones).
pub fn load(cfg: &Config) -> Result<ServingSearch, SearchError> {
    let scenario = ServingScenario::from_config(cfg)?;
    let config: ServingSearchConfig = cfg.extract_opt(SECTION)?.unwrap_or_default();
    let invalid = |key: &str, m: &str| SearchError::from(cfg.invalid(key, m));
    let gpus = config.gpus.unwrap_or(scenario.inference.system().devices);
    if gpus == 0 {
        return Err(invalid("serving_search.gpus", "must be >= 1"));
    }
    if gpus > scenario.inference.system().devices {
        return Err(invalid(
            "serving_search.gpus",
            &format!(
                "{gpus} is more than system.devices = {}",
                scenario.inference.system().devices
            ),
        ));
    }
    for (key, list) in [
        ("serving_search.tp", &config.tp),
        ("serving_search.pp", &config.pp),
        ("serving_search.replicas", &config.replicas),
        ("serving_search.max_batch", &config.max_batch),
        ("serving_search.max_num_tokens", &config.max_num_tokens),
        ("serving_search.chunk_size", &config.chunk_size),
        ("serving_search.prefill_tp", &config.prefill_tp),
        ("serving_search.decode_tp", &config.decode_tp),
        ("serving_search.concurrency", &config.concurrency),
    ] {
        if let Some(l) = list {
            if l.is_empty() || l.contains(&0) {
                return Err(invalid(key, "must be a non-empty list of integers >= 1"));
            }
        }
    }
    for (key, v) in [
        (
            "serving_search.requests_per_client",
            config.requests_per_client,
        ),
        ("serving_search.min_requests", config.min_requests),
    ] {
        if v == Some(0) {
            return Err(invalid(key, "must be >= 1"));
        }
    }
    if config.top == Some(0) {
        return Err(invalid("serving_search.top", "must be >= 1"));
    }
    if config.aggregated == Some(false) && config.disaggregated != Some(true) {
        return Err(invalid(
            "serving_search.aggregated",
            "false with no disaggregated deployments leaves nothing to search; set serving_search.disaggregated = true",
        ));
    }
    let mut slos: Vec<Slo> = scenario.slo.iter().copied().collect();
    for (i, s) in config.slos.iter().flatten().enumerate() {
        s.validate().map_err(|e| {
            invalid(
                &format!("serving_search.slos[{i}]"),
                &e.to_string().replace("slo.", ""),
            )
        })?;
        slos.push(*s);
    }
    Ok(ServingSearch {
        scenario,
        config,
        gpus,
        slos,
    })
}
