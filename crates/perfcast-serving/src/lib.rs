//! Serving under load: an event-driven, iteration-level simulation of continuous batching.
//!
//! Requests arrive (a Poisson or evenly spaced process at a rate, a closed loop of clients, a
//! trace, or all at once); a router spreads them over instances; each instance's scheduler
//! forms one engine step at a time (in-flight batching under `max_batch` and
//! `max_num_tokens`, chunked prefill mixing prompt chunks with decodes, first-come
//! first-served; [`schedule`](self) documents the order); a paged KV cache admits requests
//! and, under the on-demand policy, preempts the latest-admitted one by recompute when full;
//! each step takes the time the inference op model gives for that step's exact composition
//! ([`perfcast_engine::inference::StepCosts`]: prefill chunks and decode contexts, CUDA-graph padding of
//! decode-only steps) plus the runtime's host costs. Speculative decoding (draft length,
//! acceptance rate, drafting cost) and a prefix-cache hit rate are options.
//!
//! - **Pipeline parallelism**: an instance with `pp` stages keeps `pp` micro-batches (lanes)
//!   in flight, each with its own running set of up to `max_batch` sequences, sharing the
//!   waiting queue and the KV cache (vLLM's virtual engines, TensorRT-LLM's micro-batches); a
//!   lane's step takes the full pass through every stage. Stage contention between lanes is
//!   not modelled: exact for lanes of equal steps, optimistic otherwise.
//! - **Disaggregated serving** (DistServe, Zhong et al. 2024; Splitwise, Patel et al. 2024):
//!   a prefill pool and a decode pool with their own plans and instance counts; a prompt's
//!   KV cache goes from its prefill instance to the least-loaded decode instance over the
//!   innermost network level that holds both (devices numbered pool by pool), every sending
//!   device sending its own shard at once; transfers into and out of one instance queue on
//!   its links. The first token comes from the prefill instance (TTFT ends there).
//! - **Memory**: each instance's most loaded device holds the weights, a workspace for a
//!   step of `max_num_tokens` tokens and the logits of `max_batch` sequences, the runtime
//!   reserve, and a KV cache of `kv_memory_fraction` of what is left, in blocks of
//!   `kv_block_size` tokens.
//! - **Metrics**: TTFT (arrival to the first token), TPOT (per request: decode time over its
//!   tokens after the first), the token-weighted inter-token latency, end-to-end latency,
//!   throughput over the run (first arrival to last completion, as benchmark clients count
//!   it), goodput and attainment under an SLO, KV occupancy and preemptions per pool.
//!
//! Deterministic for a seed: no clock, no threads, ties broken by insertion order.
//!
//! Not modelled: mixture-of-experts models (the inference engine is dense; once its step
//! model learns expert routing, serving inherits it) and attention data parallelism, prefix
//! sharing of KV blocks between requests, the network time of tokens to the clients.

mod config;
mod deployment;
mod replay;
mod report;
mod rng;
mod schedule;
mod sim;
mod speculative;
mod state;
mod workload;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_batching;

pub use config::{
    check_rate, ArrivalProcess, DisaggregatedConfig, InferenceDefaults, Length, Load, PoolConfig,
    ServingConfig, Slo, WorkloadSpec, MAX_REQUESTS, MAX_REQUESTS_RULE, MIN_RATE, MIN_RATE_RULE,
};
pub use deployment::{
    kv_caches, Batching, Deployment, KvAdmission, KvCache, Pool, PoolRole, Router, Speculative,
};
pub use replay::Schedule;
pub use report::{ttft_knee, PoolReport, ServingReport, SloReport, Stats};
pub use rng::Rng;
pub use sim::Simulator;
pub use speculative::{DraftMethod, SpeculativeConfig, MTP_ACCEPTANCE_RATE};
pub use workload::{
    parse_trace, Request, TraceError, TraceFormat, Traffic, MAX_TRACE_SPAN_S, TRACE_FIELDS,
};
