//! The `[serving]` and `[slo]` sections as the engine reads them, and their resolution into a
//! [`Deployment`] (what runs where, how it is scheduled) and a [`WorkloadSpec`] (the traffic).

use crate::deployment::{Batching, Deployment, KvAdmission, Pool, PoolRole, Router, Speculative};
use crate::speculative::SpeculativeConfig;
use perfcast_core::{AttentionKind, DType, Key, ModelError};
use perfcast_engine::inference::InferencePlan;
use serde::{Deserialize, Serialize};

fn d_max_batch() -> u32 {
    256
}
fn d_max_num_tokens() -> u32 {
    8192
}
fn d_true() -> bool {
    true
}
fn d_block() -> u32 {
    64
}
fn d_kv_fraction() -> f64 {
    0.9
}
fn d_requests() -> u32 {
    1000
}
fn d_graph_sizes() -> Vec<u32> {
    // TensorRT-LLM's benchmark configuration (docs/source/performance/perf-overview.md,
    // `cuda_graph_config.batch_sizes`): powers of two, 384, then powers of two to 8192.
    vec![
        1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192,
    ]
}

/// A request length: fixed, or drawn uniformly from `min..=max` (seeded).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(untagged)]
pub enum Length {
    /// Every request has this many tokens.
    Fixed(u32),
    /// Uniform over `min..=max` tokens.
    Range {
        /// Fewest tokens.
        min: u32,
        /// Most tokens.
        max: u32,
    },
}

impl Length {
    /// The largest length drawn.
    pub fn max(&self) -> u32 {
        match *self {
            Length::Fixed(n) => n,
            Length::Range { max, .. } => max,
        }
    }
    /// The smallest length drawn.
    pub fn min(&self) -> u32 {
        match *self {
            Length::Fixed(n) => n,
            Length::Range { min, .. } => min,
        }
    }
    fn check(&self, key: Key) -> Result<(), ModelError> {
        if self.min() == 0 {
            return Err(ModelError::invalid(key, self.min(), "must be >= 1 token"));
        }
        if self.min() > self.max() {
            return Err(ModelError::invalid(
                key,
                format!("{{ min = {}, max = {} }}", self.min(), self.max()),
                "min must not exceed max",
            ));
        }
        Ok(())
    }
}

/// How requests arrive at a rate.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ArrivalProcess {
    /// Exponential inter-arrival times (a Poisson process), the load generators' default
    /// (vLLM `benchmark_serving.py`, SGLang `bench_serving.py`).
    #[default]
    Poisson,
    /// Evenly spaced arrivals.
    Constant,
}

/// One pool of a disaggregated deployment.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Tensor-parallel degree of each instance.
    #[serde(default = "one")]
    pub tp: u32,
    /// Pipeline stages of each instance.
    #[serde(default = "one")]
    pub pp: u32,
    /// Instances in the pool.
    #[serde(default = "one")]
    pub instances: u32,
    /// Sequences one instance schedules at most (default: `serving.max_batch`).
    #[serde(default)]
    pub max_batch: Option<u32>,
    /// Tokens one step processes at most (default: `serving.max_num_tokens`).
    #[serde(default)]
    pub max_num_tokens: Option<u32>,
    /// Expert parallelism of a mixture-of-experts model in this pool (default:
    /// `serving.ep`): a wide-EP decode pool beside a narrow prefill one.
    #[serde(default)]
    pub ep: Option<u32>,
    /// Attention data parallelism in this pool (default: `serving.attention_dp`).
    #[serde(default)]
    pub attention_dp: Option<bool>,
    /// Tensor parallelism inside each attention group of this pool (default:
    /// `serving.attention_tp`).
    #[serde(default)]
    pub attention_tp: Option<u32>,
}

fn one() -> u32 {
    1
}

/// `[serving.disaggregated]`: prefill and decode in separate pools (DistServe, Zhong et al.
/// 2024; Splitwise, Patel et al. 2024), the KV cache of each prompt sent from its prefill
/// instance to a decode instance over the network.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DisaggregatedConfig {
    /// The prefill pool.
    pub prefill: PoolConfig,
    /// The decode pool.
    pub decode: PoolConfig,
    /// Fixed cost of one KV-cache transfer beyond the network's time (connection set-up,
    /// block gathering), µs. Default 0.
    #[serde(default)]
    pub transfer_overhead_us: f64,
}

/// `[serving]`: the deployment (parallel plan and formats; `[inference]` gives the defaults),
/// the scheduler, the KV cache, the runtime's fixed costs, the options, and the workload.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServingConfig {
    /// Tensor-parallel degree (default: `inference.tp`, else 1).
    #[serde(default)]
    pub tp: Option<u32>,
    /// Pipeline stages (default: `inference.pp`, else 1); each instance keeps `pp`
    /// micro-batches in flight.
    #[serde(default)]
    pub pp: Option<u32>,
    /// Instances behind the router (default: `inference.replicas`, else 1).
    #[serde(default)]
    pub replicas: Option<u32>,
    /// Weight format (default: `inference.weight_dtype`, else bf16).
    #[serde(default)]
    pub weight_dtype: Option<DType>,
    /// Activation format (default: `inference.activation_dtype`, else bf16).
    #[serde(default)]
    pub activation_dtype: Option<DType>,
    /// KV-cache format (default: `inference.kv_dtype`, else bf16).
    #[serde(default)]
    pub kv_dtype: Option<DType>,
    /// Attention kernels (default: `inference.attention`, else flash).
    #[serde(default)]
    pub attention: Option<AttentionKind>,
    /// Expert parallelism of a mixture-of-experts model (default: `inference.ep`, else 1).
    #[serde(default)]
    pub ep: Option<u32>,
    /// Attention data parallelism (default: `inference.attention_dp`, else false): each pool's
    /// experts are then spread over all its `tp` ranks (`ep = tp`).
    #[serde(default)]
    pub attention_dp: Option<bool>,
    /// Tensor parallelism inside each attention data-parallel group (default:
    /// `inference.attention_tp`, else 1; SGLang `--tp N --dp D`: N / D).
    #[serde(default)]
    pub attention_tp: Option<u32>,
    /// Format of the routed experts' weights (default: `inference.expert_dtype`, else the
    /// weight format).
    #[serde(default)]
    pub expert_dtype: Option<DType>,

    /// Sequences one instance (one pipeline micro-batch) schedules at most (TensorRT-LLM
    /// `max_batch_size`, vLLM `max_num_seqs`). Default 256 (vLLM's default).
    #[serde(default = "d_max_batch")]
    pub max_batch: u32,
    /// Tokens one step processes at most, prefill chunks and decodes together (TensorRT-LLM
    /// `max_num_tokens`, vLLM `max_num_batched_tokens`). Default 8192 (trtllm-build's).
    #[serde(default = "d_max_num_tokens")]
    pub max_num_tokens: u32,
    /// Split prompts into chunks mixed with decodes (Sarathi-Serve, Agrawal et al. 2024;
    /// TensorRT-LLM `enable_chunked_context`); without it a prompt is prefilled whole and
    /// must fit in `max_num_tokens`. Default true.
    #[serde(default = "d_true")]
    pub chunked_prefill: bool,
    /// Largest prefill chunk of one sequence per step (default: `max_num_tokens`).
    #[serde(default)]
    pub chunk_size: Option<u32>,
    /// Tokens per KV-cache block (paged attention, Kwon et al. 2023). Default 64
    /// (TensorRT-LLM `tokens_per_block`; vLLM uses 16).
    #[serde(default = "d_block")]
    pub kv_block_size: u32,
    /// Fraction of the device memory left after weights, workspace and reserve that the KV
    /// cache takes (TensorRT-LLM `kv_cache_free_gpu_mem_fraction`, default 0.9).
    #[serde(default = "d_kv_fraction")]
    pub kv_memory_fraction: f64,
    /// When KV blocks are taken: `guaranteed` reserves a request's whole context at admission
    /// and never preempts (TensorRT-LLM `GUARANTEED_NO_EVICT`, its default); `on-demand`
    /// allocates as the context grows and preempts the latest-admitted request by recompute
    /// when the cache is full (vLLM; TensorRT-LLM `MAX_UTILIZATION`).
    #[serde(default)]
    pub kv_admission: KvAdmission,
    /// What one step holds: `mixed` runs the decodes and prefill chunks together (TensorRT-LLM,
    /// vLLM); `prefill-first` runs a step of prefills whenever requests wait to be prefilled
    /// and the running decodes then pause (SGLang). Default `mixed`.
    #[serde(default)]
    pub batching: Batching,
    /// Under `on-demand` admission, the share of each running sequence's remaining output
    /// (and all of its remaining prompt) whose KV blocks must stay free before a waiting
    /// request is admitted, in [0, 1]: SGLang's conservative admission (`new_token_ratio`,
    /// initially 0.7, in `PrefillAdder`); 0 admits whenever the next chunk fits (vLLM).
    /// Default 0.
    #[serde(default)]
    pub admission_reserve: f64,
    /// Decode-only steps replayed as captured CUDA graphs, padded up to the next size of
    /// `graph_batch_sizes` (vLLM, SGLang and TensorRT-LLM's PyTorch runtime capture decode);
    /// mixed steps and batches above the largest size run eagerly. Default false (the
    /// TensorRT engine runtime's default).
    #[serde(default)]
    pub cuda_graphs: bool,
    /// Captured graph batch sizes (default TensorRT-LLM's benchmark list: 1, 2, 4, ..., 256,
    /// 384, 512, ..., 8192).
    #[serde(default = "d_graph_sizes")]
    pub graph_batch_sizes: Vec<u32>,
    /// Host cost of one scheduler iteration beyond the forward pass's own
    /// `options.step_overhead_us` (request bookkeeping, batch assembly), µs. Default 0.
    #[serde(default)]
    pub scheduler_overhead_us: f64,
    /// Host cost per scheduled sequence per step (input preparation, detokenisation and
    /// response streaming), µs. Default 0.
    #[serde(default)]
    pub per_sequence_overhead_us: f64,
    /// Fraction of each prompt found in the prefix cache (whole blocks), in [0, 1): those
    /// tokens are not prefilled (attention still reads them). Their blocks are counted per
    /// request (no sharing assumed). Default 0.
    #[serde(default)]
    pub prefix_cache_hit_rate: f64,
    /// How arriving requests are spread over instances. Default `least-loaded`.
    #[serde(default)]
    pub router: Router,
    /// Speculative decoding (absent: none).
    #[serde(default)]
    pub speculative: Option<SpeculativeConfig>,
    /// Prefill and decode in separate pools (absent: every instance does both).
    #[serde(default)]
    pub disaggregated: Option<DisaggregatedConfig>,

    /// Prompt tokens per request (default: `inference.input_len`).
    #[serde(default)]
    pub input_len: Option<Length>,
    /// Generated tokens per request, the first included (default: `inference.output_len`).
    #[serde(default)]
    pub output_len: Option<Length>,
    /// Requests simulated. Default 1000.
    #[serde(default = "d_requests")]
    pub requests: u32,
    /// Offered load, requests/s (absent, with no `concurrency` or `trace`: every request
    /// arrives at once, the offline maximum-throughput benchmark).
    #[serde(default)]
    pub rate: Option<f64>,
    /// Arrival process at `rate`. Default `poisson`.
    #[serde(default)]
    pub arrivals: ArrivalProcess,
    /// Closed loop of this many clients, each sending its next request when the previous
    /// one completes.
    #[serde(default)]
    pub concurrency: Option<u32>,
    /// A trace of requests (CSV with a header, or JSON lines, of `arrival_s`, `input_len`,
    /// `output_len`), relative to the file that names it.
    #[serde(default)]
    pub trace: Option<String>,
    /// Seed of every random draw (arrivals, lengths, draft acceptance). Default 0.
    #[serde(default)]
    pub seed: u64,
}

impl Default for ServingConfig {
    fn default() -> Self {
        ServingConfig {
            tp: None,
            pp: None,
            replicas: None,
            weight_dtype: None,
            activation_dtype: None,
            kv_dtype: None,
            attention: None,
            ep: None,
            attention_dp: None,
            attention_tp: None,
            expert_dtype: None,
            max_batch: d_max_batch(),
            max_num_tokens: d_max_num_tokens(),
            chunked_prefill: true,
            chunk_size: None,
            kv_block_size: d_block(),
            kv_memory_fraction: d_kv_fraction(),
            kv_admission: KvAdmission::default(),
            batching: Batching::default(),
            admission_reserve: 0.0,
            cuda_graphs: false,
            graph_batch_sizes: d_graph_sizes(),
            scheduler_overhead_us: 0.0,
            per_sequence_overhead_us: 0.0,
            prefix_cache_hit_rate: 0.0,
            router: Router::default(),
            speculative: None,
            disaggregated: None,
            input_len: None,
            output_len: None,
            requests: d_requests(),
            rate: None,
            arrivals: ArrivalProcess::default(),
            concurrency: None,
            trace: None,
            seed: 0,
        }
    }
}

/// `[slo]`: latency objectives. A request meets them when its TTFT, its TPOT and its
/// end-to-end latency are each within the limits given; a load meets them when at least
/// `attainment` of its requests do (DistServe's SLO attainment, Zhong et al. 2024).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    /// Time to first token, ms.
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// Time per output token after the first, ms.
    #[serde(default)]
    pub tpot_ms: Option<f64>,
    /// End-to-end latency, ms.
    #[serde(default)]
    pub e2e_ms: Option<f64>,
    /// Fraction of requests that must meet every limit. Default 0.9.
    #[serde(default = "d_attainment")]
    pub attainment: f64,
}

fn d_attainment() -> f64 {
    0.9
}

impl Slo {
    /// Reject limits that are not positive finite numbers and attainments outside (0, 1].
    pub fn validate(&self) -> Result<(), ModelError> {
        for (key, v) in [
            (Key::slo("ttft_ms"), self.ttft_ms),
            (Key::slo("tpot_ms"), self.tpot_ms),
            (Key::slo("e2e_ms"), self.e2e_ms),
        ] {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0) {
                    return Err(ModelError::invalid(key, v, "must be a number > 0 (ms)"));
                }
            }
        }
        if self.ttft_ms.is_none() && self.tpot_ms.is_none() && self.e2e_ms.is_none() {
            return Err(ModelError::invalid(
                Key::slo(""),
                "{}",
                "sets no limit: give ttft_ms, tpot_ms or e2e_ms",
            ));
        }
        let a = self.attainment;
        if !(a.is_finite() && a > 0.0 && a <= 1.0) {
            return Err(ModelError::invalid(
                Key::slo("attainment"),
                a,
                "must be in (0, 1]",
            ));
        }
        Ok(())
    }

    /// Whether one request's latencies (seconds) meet every limit.
    pub fn met(&self, ttft: f64, tpot: f64, e2e: f64) -> bool {
        let ok = |lim: Option<f64>, v: f64| lim.is_none_or(|l| v * 1e3 <= l);
        ok(self.ttft_ms, ttft) && ok(self.tpot_ms, tpot) && ok(self.e2e_ms, e2e)
    }
}

/// The traffic of a simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSpec {
    /// Prompt tokens per request.
    pub input_len: Length,
    /// Generated tokens per request.
    pub output_len: Length,
    /// Requests simulated.
    pub requests: u32,
    /// How they arrive.
    pub load: Load,
    /// Seed of every random draw.
    pub seed: u64,
}

/// How requests arrive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Load {
    /// All at time zero (offline maximum throughput).
    Burst,
    /// At `rate` requests/s.
    Rate {
        /// Requests per second (> 0).
        rate: f64,
        /// Spacing.
        process: ArrivalProcess,
    },
    /// A closed loop of this many clients.
    Concurrency(u32),
}

/// What `[inference]` contributes to `[serving]` when present: the plan's fields the
/// serving section leaves out.
pub type InferenceDefaults<'a> = Option<&'a InferencePlan>;

impl ServingConfig {
    /// The counts (sizes, degrees, requests and clients) at least 1, the requests bounded and
    /// the clients of a closed loop at most the requests.
    fn validate_counts(&self) -> Result<(), ModelError> {
        for (key, v) in [
            (Key::serving("tp"), self.tp),
            (Key::serving("pp"), self.pp),
            (Key::serving("replicas"), self.replicas),
            (Key::serving("chunk_size"), self.chunk_size),
            (Key::serving("concurrency"), self.concurrency),
        ] {
            if v == Some(0) {
                return Err(ModelError::invalid(key, 0, "must be >= 1"));
            }
        }
        for (key, v) in [
            (Key::serving("max_batch"), self.max_batch),
            (Key::serving("max_num_tokens"), self.max_num_tokens),
            (Key::serving("kv_block_size"), self.kv_block_size),
            (Key::serving("requests"), self.requests),
        ] {
            if v == 0 {
                return Err(ModelError::invalid(key, 0, "must be >= 1"));
            }
        }
        if let Some(c) = self.concurrency.filter(|&c| c > self.requests) {
            return Err(ModelError::invalid(
                Key::serving("concurrency"),
                c,
                format!(
                    "is above serving.requests = {}: a closed loop of more clients than requests never has them all in flight; lower concurrency or raise requests",
                    self.requests
                ),
            ));
        }
        if self.requests > MAX_REQUESTS {
            return Err(ModelError::invalid(
                Key::serving("requests"),
                self.requests,
                MAX_REQUESTS_RULE,
            ));
        }
        Ok(())
    }

    /// Check every value against its documented range, naming the key.
    pub fn validate(&self) -> Result<(), ModelError> {
        self.validate_counts()?;
        if let Some(c) = self.chunk_size {
            if c > self.max_num_tokens {
                return Err(ModelError::invalid(
                    Key::serving("max_num_tokens"),
                    self.max_num_tokens,
                    format!(
                        "is smaller than one prefill chunk (serving.chunk_size = {c}): a step must hold at least one chunk; raise max_num_tokens or lower chunk_size"
                    ),
                ));
            }
        }
        let r = self.admission_reserve;
        if !(r.is_finite() && (0.0..=1.0).contains(&r)) {
            return Err(ModelError::invalid(
                Key::serving("admission_reserve"),
                r,
                "must be in [0, 1]",
            ));
        }
        let f = self.kv_memory_fraction;
        if !(f.is_finite() && f > 0.0 && f <= 1.0) {
            return Err(ModelError::invalid(
                Key::serving("kv_memory_fraction"),
                f,
                "must be in (0, 1]",
            ));
        }
        for (key, v) in [
            (
                Key::serving("scheduler_overhead_us"),
                self.scheduler_overhead_us,
            ),
            (
                Key::serving("per_sequence_overhead_us"),
                self.per_sequence_overhead_us,
            ),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ModelError::invalid(key, v, "must be a finite number >= 0"));
            }
        }
        let h = self.prefix_cache_hit_rate;
        if !(h.is_finite() && (0.0..1.0).contains(&h)) {
            return Err(ModelError::invalid(
                Key::serving("prefix_cache_hit_rate"),
                h,
                "must be in [0, 1)",
            ));
        }
        if self.graph_batch_sizes.contains(&0) {
            return Err(ModelError::invalid(
                Key::serving("graph_batch_sizes"),
                0,
                "sizes must be >= 1",
            ));
        }
        if let Some(r) = self.rate {
            check_rate(r, Key::serving("rate"))?;
        }
        let loads = [
            self.rate.is_some(),
            self.concurrency.is_some(),
            self.trace.is_some(),
        ];
        if loads.iter().filter(|x| **x).count() > 1 {
            return Err(ModelError::invalid(
                Key::serving("rate"),
                "several",
                "give at most one of serving.rate, serving.concurrency and serving.trace",
            ));
        }
        if let Some(s) = &self.speculative {
            s.validate()?;
        }
        if let Some(d) = &self.disaggregated {
            d.validate()?;
        }
        for (key, l) in [
            (Key::serving("input_len"), self.input_len),
            (Key::serving("output_len"), self.output_len),
        ] {
            if let Some(l) = l {
                l.check(key)?;
            }
        }
        Ok(())
    }

    /// The deployment: plan fields from this section, else from `inference`, else the
    /// defaults; the longest request (`max_context` tokens) bounds the context.
    pub fn deployment(
        &self,
        inference: InferenceDefaults,
        max_context: u32,
    ) -> Result<Deployment, ModelError> {
        self.validate()?;
        let mut plan = InferencePlan::new(1, max_context.max(2) - 1, 1);
        if let Some(i) = inference {
            plan.tp = i.tp;
            plan.pp = i.pp;
            plan.replicas = i.replicas;
            plan.weight_dtype = i.weight_dtype;
            plan.activation_dtype = i.activation_dtype;
            plan.kv_dtype = i.kv_dtype;
            plan.attention = i.attention;
            plan.ep = i.ep;
            plan.attention_dp = i.attention_dp;
            plan.attention_tp = i.attention_tp;
            plan.expert_dtype = i.expert_dtype;
        }
        plan.tp = self.tp.unwrap_or(plan.tp);
        plan.pp = self.pp.unwrap_or(plan.pp);
        plan.replicas = 1;
        plan.weight_dtype = self.weight_dtype.unwrap_or(plan.weight_dtype);
        plan.activation_dtype = self.activation_dtype.unwrap_or(plan.activation_dtype);
        plan.kv_dtype = self.kv_dtype.unwrap_or(plan.kv_dtype);
        plan.attention = self.attention.unwrap_or(plan.attention);
        plan.ep = self.ep.unwrap_or(plan.ep);
        plan.attention_dp = self.attention_dp.unwrap_or(plan.attention_dp);
        plan.attention_tp = self.attention_tp.or(plan.attention_tp);
        plan.expert_dtype = self.expert_dtype.or(plan.expert_dtype);
        let replicas = self.replicas.or(inference.map(|i| i.replicas)).unwrap_or(1);
        let chunk = self.chunk_size.unwrap_or(self.max_num_tokens);
        let pool = |role, c: &PoolConfig| {
            let mut p = plan.clone();
            p.tp = c.tp;
            p.pp = c.pp;
            p.ep = c.ep.unwrap_or(p.ep);
            p.attention_dp = c.attention_dp.unwrap_or(p.attention_dp);
            p.attention_tp = c.attention_tp.or(p.attention_tp);
            if p.attention_dp {
                p.ep = c.tp;
            }
            Pool {
                role,
                plan: p,
                instances: c.instances,
                max_batch: c.max_batch.unwrap_or(self.max_batch),
                max_num_tokens: c.max_num_tokens.unwrap_or(self.max_num_tokens),
            }
        };
        let pools = match &self.disaggregated {
            None => vec![pool(
                PoolRole::Both,
                &PoolConfig {
                    tp: plan.tp,
                    pp: plan.pp,
                    instances: replicas,
                    max_batch: None,
                    max_num_tokens: None,
                    ep: None,
                    attention_dp: None,
                    attention_tp: None,
                },
            )],
            Some(d) => vec![
                pool(PoolRole::Prefill, &d.prefill),
                pool(PoolRole::Decode, &d.decode),
            ],
        };
        let mut graph_sizes = self.graph_batch_sizes.clone();
        graph_sizes.sort_unstable();
        graph_sizes.dedup();
        Ok(Deployment {
            pools,
            chunked_prefill: self.chunked_prefill,
            chunk_size: chunk,
            kv_block_size: self.kv_block_size,
            kv_memory_fraction: self.kv_memory_fraction,
            kv_admission: self.kv_admission,
            batching: self.batching,
            admission_reserve: self.admission_reserve,
            cuda_graphs: self.cuda_graphs,
            graph_batch_sizes: graph_sizes,
            scheduler_overhead_us: self.scheduler_overhead_us,
            per_sequence_overhead_us: self.per_sequence_overhead_us,
            prefix_cache_hit_rate: self.prefix_cache_hit_rate,
            router: self.router,
            speculative: self.speculative.as_ref().map(|s| Speculative {
                draft_len: s.draft_len,
                acceptance_rate: s.acceptance().unwrap_or(0.0),
                draft_cost: s.draft_cost.unwrap_or(0.0),
                method: s.method,
            }),
            transfer_overhead_us: self
                .disaggregated
                .map(|d| d.transfer_overhead_us)
                .unwrap_or(0.0),
        })
    }
}

/// A rate must be a finite number > 0 (an infinite one is the burst load, asked for by
/// leaving the rate out).
pub fn check_rate(r: f64, key: Key) -> Result<(), ModelError> {
    if !(r.is_finite() && r > 0.0) {
        return Err(ModelError::invalid(
            key,
            r,
            "must be a finite number of requests per second > 0 (leave it out, or pass `--rate inf`, for all requests at once)",
        ));
    }
    if r < MIN_RATE {
        return Err(ModelError::invalid(key, r, MIN_RATE_RULE));
    }
    Ok(())
}

/// The most requests one serving run simulates. The simulator keeps each request (about
/// 200 bytes, measured: 10^6 requests of `configs/serving/llama3.1-8b-h100.toml` at 50/s take
/// 217 MB and 2.2 s in a release build), so 10^7 is about 2 GB and 20 s; 10^8 asked for one
/// 8.8 GB allocation before a request ran.
pub const MAX_REQUESTS: u32 = 10_000_000;

/// Why more than [`MAX_REQUESTS`] requests are refused.
pub const MAX_REQUESTS_RULE: &str = "must be at most 10000000 (the simulator keeps every \
     request: about 2 GB and 20 s at that limit)";

/// The slowest arrival rate served, requests per second. Below it the servers idle between
/// requests (every request meets an empty system), and the simulator's clock, f64 seconds
/// counted from the first arrival, reaches 10^9 s and more, where latencies lose digits (a
/// rate of 1e-12 gave a time to first token of 21.6 ms for a true 17.0).
pub const MIN_RATE: f64 = 1e-3;

/// Why a rate below [`MIN_RATE`] is refused.
pub const MIN_RATE_RULE: &str = "must be at least 0.001 requests per second (one request per \
     17 minutes): slower arrivals meet an idle system every time, and the simulator's clock \
     loses the precision of the latencies";

impl DisaggregatedConfig {
    fn validate(&self) -> Result<(), ModelError> {
        for (pool, p) in [("prefill", &self.prefill), ("decode", &self.decode)] {
            for (field, v) in [
                ("tp", Some(p.tp)),
                ("pp", Some(p.pp)),
                ("instances", Some(p.instances)),
                ("max_batch", p.max_batch),
                ("max_num_tokens", p.max_num_tokens),
                ("ep", p.ep),
            ] {
                if v == Some(0) {
                    return Err(ModelError::invalid(
                        Key::owned(
                            perfcast_core::error::Section::Serving,
                            format!("disaggregated.{pool}.{field}"),
                        ),
                        0,
                        "must be >= 1",
                    ));
                }
            }
        }
        let o = self.transfer_overhead_us;
        if !(o.is_finite() && o >= 0.0) {
            return Err(ModelError::invalid(
                Key::serving("disaggregated.transfer_overhead_us"),
                o,
                "must be a finite number >= 0",
            ));
        }
        Ok(())
    }
}
