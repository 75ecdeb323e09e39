//! A resolved deployment: pools of instances with their plans, the scheduler's limits, the
//! KV cache policy and the options; and its check against the model and the system (memory
//! per instance, KV blocks, one request fitting).

use perfcast_core::{Bytes, Key, ModelError};
use perfcast_engine::inference::{Inference, InferencePlan, ServingMemory};
use serde::{Deserialize, Serialize};

/// What an instance of a pool does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolRole {
    /// Prefill and decode (aggregated serving).
    #[serde(rename = "aggregated")]
    Both,
    /// Prefill only; the KV cache then goes to a decode instance.
    Prefill,
    /// Decode only.
    Decode,
}

impl PoolRole {
    /// Name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            PoolRole::Both => "aggregated",
            PoolRole::Prefill => "prefill",
            PoolRole::Decode => "decode",
        }
    }
}

/// KV-cache admission policy (see `serving.kv_admission`).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum KvAdmission {
    /// Reserve the whole context at admission; never preempt.
    #[default]
    Guaranteed,
    /// Allocate blocks as the context grows; preempt by recompute when full.
    OnDemand,
}

/// What one step of an instance holds (see `serving.batching`).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Batching {
    /// Decodes and prefill chunks in one step (in-flight batching: TensorRT-LLM, vLLM V1,
    /// Sarathi-Serve).
    #[default]
    Mixed,
    /// A step of prefills (new requests and continued chunks) whenever one can be formed,
    /// the running decodes paused; decode steps otherwise (SGLang's scheduler without
    /// `enable_mixed_chunk`).
    PrefillFirst,
}

/// How arrivals are spread over the instances of the first pool.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Router {
    /// The instance with the fewest requests in it (waiting or running; ties: lowest index).
    #[default]
    LeastLoaded,
    /// In turn.
    RoundRobin,
}

/// Speculative decoding, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Speculative {
    /// Draft tokens per step.
    pub draft_len: u32,
    /// Per-token acceptance probability.
    pub acceptance_rate: f64,
    /// Drafting step time over a target decode step (`method = "ratio"`).
    pub draft_cost: f64,
    /// How drafts are made: an MTP module or a draft model is timed on the devices,
    /// `ratio` costs `draft_cost` x a target step.
    pub method: crate::speculative::DraftMethod,
}

impl Speculative {
    /// The draft runs a model the simulator times.
    pub fn timed(&self) -> bool {
        self.method != crate::speculative::DraftMethod::Ratio
    }

    /// Expected tokens gained per verification step: `(1 - a^(k+1)) / (1 - a)` (Leviathan et
    /// al. 2023, eq. 1).
    pub fn expected_tokens(&self) -> f64 {
        let a = self.acceptance_rate;
        let k = self.draft_len as i32;
        if a >= 1.0 {
            (k + 1) as f64
        } else {
            (1.0 - a.powi(k + 1)) / (1.0 - a)
        }
    }
}

/// One pool of identical instances.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pool {
    /// What its instances do.
    pub role: PoolRole,
    /// Parallel plan and formats of one instance (`batch`, `input_len`, `output_len` bound
    /// the context only; `replicas` is 1).
    pub plan: InferencePlan,
    /// Instances.
    pub instances: u32,
    /// Sequences one micro-batch schedules at most.
    pub max_batch: u32,
    /// Tokens one step processes at most.
    pub max_num_tokens: u32,
}

impl Pool {
    /// Devices of the pool.
    pub fn gpus(&self) -> u32 {
        self.plan.gpus_per_replica().saturating_mul(self.instances)
    }
}

/// A serving deployment (see `[serving]` for each field's meaning).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Deployment {
    /// One pool (aggregated), or a prefill pool then a decode pool.
    pub pools: Vec<Pool>,
    /// Prompts split into chunks.
    pub chunked_prefill: bool,
    /// Largest chunk of one sequence per step.
    pub chunk_size: u32,
    /// Tokens per KV block.
    pub kv_block_size: u32,
    /// Fraction of the free memory the KV cache takes.
    pub kv_memory_fraction: f64,
    /// KV admission policy.
    pub kv_admission: KvAdmission,
    /// What a step holds.
    pub batching: Batching,
    /// Share of the running sequences' remaining output kept free at admission (on-demand).
    pub admission_reserve: f64,
    /// Decode-only steps as CUDA graphs.
    pub cuda_graphs: bool,
    /// Captured batch sizes, ascending.
    pub graph_batch_sizes: Vec<u32>,
    /// Per-step host cost, µs.
    pub scheduler_overhead_us: f64,
    /// Per-sequence per-step host cost, µs.
    pub per_sequence_overhead_us: f64,
    /// Prefix-cache hit rate.
    pub prefix_cache_hit_rate: f64,
    /// Request routing.
    pub router: Router,
    /// Speculative decoding.
    pub speculative: Option<Speculative>,
    /// Fixed cost per KV transfer (disaggregated), µs.
    pub transfer_overhead_us: f64,
}

impl Deployment {
    /// Devices of the whole deployment.
    pub fn gpus(&self) -> u32 {
        // Saturating, as each pool's count: 2^31 decode instances of TP 4 beside a prefill
        // pool of 4 once wrapped to 3 devices and passed the system's count (the command
        // campaign of tests/fuzz/commands.rs; then a simulation of 2^31 instances hung).
        self.pools
            .iter()
            .map(Pool::gpus)
            .fold(0, u32::saturating_add)
    }

    /// Whether prefill and decode run in separate pools.
    pub fn disaggregated(&self) -> bool {
        self.pools.len() > 1
    }

    /// The captured graph batch for a decode-only step of `n` sequences, if any.
    pub fn graph_batch(&self, n: u32) -> Option<u32> {
        if !self.cuda_graphs {
            return None;
        }
        self.graph_batch_sizes.iter().copied().find(|&s| s >= n)
    }

    /// Tokens a request of `ctx` tokens of context (prompt plus output) reserves when
    /// admitted under the guaranteed policy (draft verification needs `draft_len` more).
    pub fn reserved_tokens(&self, ctx: u32) -> u32 {
        ctx + self.speculative.map(|s| s.draft_len).unwrap_or(0)
    }
}

/// The KV cache of one instance.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct KvCache {
    /// Blocks.
    pub blocks: u32,
    /// Tokens per block.
    pub block_size: u32,
    /// Bytes per block on the most loaded device.
    pub block_bytes: Bytes,
    /// Memory of the instance's most loaded device.
    #[serde(skip)]
    pub memory: ServingMemory,
}

fn pool_key(d: &Deployment, i: usize, field: &'static str) -> Key {
    if d.disaggregated() {
        let pool = if i == 0 { "prefill" } else { "decode" };
        Key::owned(
            perfcast_core::error::Section::Serving,
            format!("disaggregated.{pool}.{field}"),
        )
    } else {
        Key::serving(field)
    }
}

/// The deployment's devices against the system's, its chunk against every pool's token
/// budget, and its KV block against the model's context.
fn check_sizes(inf: &Inference, d: &Deployment) -> Result<(), ModelError> {
    // The context window a model declares (a preset's `max_position_embeddings`), not a
    // training length standing in for it.
    let context = inf.model().max_context.unwrap_or(0);
    if context > 0 && !context.is_multiple_of(d.kv_block_size as u64) {
        return Err(ModelError::invalid(
            Key::serving("kv_block_size"),
            d.kv_block_size,
            format!(
                "does not divide the model's context of {context} tokens (model.max_context): engines page the KV cache in blocks that tile it (vLLM 16, TensorRT-LLM 32 or 64, SGLang 1)"
            ),
        ));
    }
    let system_devices = inf.system().devices;
    if d.gpus() > system_devices {
        return Err(ModelError::invalid(
            pool_key(
                d,
                0,
                if d.disaggregated() {
                    "instances"
                } else {
                    "replicas"
                },
            ),
            d.gpus(),
            format!(
                "the deployment uses {} devices, more than system `{}` has ({system_devices})",
                d.gpus(),
                inf.system().name
            ),
        ));
    }
    if d.chunk_size
        > d.pools
            .iter()
            .map(|p| p.max_num_tokens)
            .min()
            .unwrap_or(u32::MAX)
    {
        return Err(ModelError::invalid(
            Key::serving("max_num_tokens"),
            d.pools.iter().map(|p| p.max_num_tokens).min().unwrap_or(0),
            format!(
                "is smaller than one prefill chunk (serving.chunk_size = {}): a step must hold at least one chunk",
                d.chunk_size
            ),
        ));
    }
    Ok(())
}

/// An engine error about a pool's own plan field (`tp`, `pp`, `ep`, `attention_dp`,
/// `attention_tp`), named as the disaggregated pool's key that sets it; any other error as it
/// is.
fn pool_error(d: &Deployment, i: usize, e: ModelError) -> ModelError {
    let field = match &e {
        ModelError::Invalid { key, .. }
            if d.disaggregated() && key.section == perfcast_core::error::Section::Inference =>
        {
            ["tp", "pp", "ep", "attention_dp", "attention_tp"]
                .into_iter()
                .find(|f| *f == key.path)
        }
        _ => None,
    };
    match (e, field) {
        (ModelError::Invalid { value, rule, .. }, Some(field)) => ModelError::Invalid {
            key: pool_key(d, i, field),
            value,
            rule,
        },
        (e, _) => e,
    }
}

/// A pool's memory with a timed draft's beside it: the draft's weights share the devices,
/// and its KV cache grows with each sequence beside the target's (counted per token, as the
/// target's).
fn with_draft(mut mem: ServingMemory, draft: Option<ServingMemory>) -> ServingMemory {
    if let Some(dm) = draft {
        mem.weights = Bytes(mem.weights.0 + dm.weights.0);
        mem.workspace = Bytes(mem.workspace.0.max(dm.workspace.0));
        mem.kv_per_token = Bytes(mem.kv_per_token.0 + dm.kv_per_token.0);
    }
    mem
}

/// Check `d` against the engine and size each pool's KV cache: weights and workspace must
/// fit, the cache must hold the longest request (`max_context` tokens of prompt plus output)
/// alone, and without chunked prefill the longest prompt (`max_input`) must fit in one step.
/// Errors say how much is missing.
pub fn kv_caches(
    inf: &Inference,
    d: &Deployment,
    max_input: u32,
    max_context: u32,
    draft: &[Option<ServingMemory>],
) -> Result<Vec<KvCache>, ModelError> {
    check_sizes(inf, d)?;
    let mut out = Vec::with_capacity(d.pools.len());
    for (i, pool) in d.pools.iter().enumerate() {
        if let Some(s) = d.speculative {
            if s.draft_len + 1 > pool.max_num_tokens {
                return Err(ModelError::invalid(
                    pool_key(d, i, "max_num_tokens"),
                    pool.max_num_tokens,
                    format!(
                        "cannot hold one draft verification (serving.speculative.draft_len + 1 = {} tokens)",
                        s.draft_len + 1
                    ),
                ));
            }
        }
        if !d.chunked_prefill && pool.role != PoolRole::Decode && max_input > pool.max_num_tokens {
            return Err(ModelError::invalid(
                pool_key(d, i, "max_num_tokens"),
                pool.max_num_tokens,
                format!(
                    "is smaller than the longest prompt ({max_input} tokens) and chunked prefill is off: the prompt could never be scheduled; raise max_num_tokens or set serving.chunked_prefill = true"
                ),
            ));
        }
        let mem = with_draft(
            inf.serving_memory(&pool.plan, pool.max_num_tokens, pool.max_batch)
                .map_err(|e| pool_error(d, i, e))?,
            draft.get(i).copied().flatten(),
        );
        let block_bytes = mem.kv_per_token.0 * d.kv_block_size as f64;
        let free = mem.free();
        if free <= 0.0 {
            return Err(ModelError::invalid(
                pool_key(d, i, "tp"),
                pool.plan.tp,
                format!(
                    "weights {:.2} GB + workspace {:.2} GB + reserve {:.2} GB exceed the device's {:.2} GB by {:.2} GB: no memory is left for the KV cache; raise tp or pp, narrow weight_dtype, or lower max_num_tokens",
                    mem.weights.gb(),
                    mem.workspace.gb(),
                    mem.reserve.gb(),
                    mem.capacity.gb(),
                    -free / 1e9
                ),
            ));
        }
        let kv_bytes = free * d.kv_memory_fraction;
        let blocks = (kv_bytes / block_bytes).floor().min(u32::MAX as f64) as u32;
        // The longest request alone: prompt and output (a prefill instance keeps only the
        // prompt, plus the first token).
        let ctx = match pool.role {
            PoolRole::Prefill => max_input,
            _ => d.reserved_tokens(max_context),
        };
        let need = mem.kv_blocks(ctx, d.kv_block_size);
        if blocks < need {
            let missing = (need - blocks) as f64 * block_bytes;
            return Err(ModelError::invalid(
                Key::serving("kv_memory_fraction"),
                d.kv_memory_fraction,
                format!(
                    "leaves {blocks} KV blocks of {} tokens ({:.3} GB of {:.2} GB free after weights {:.2} GB, workspace {:.2} GB and reserve {:.2} GB), but the longest request ({ctx} tokens) needs {need} blocks: {:.3} GB missing per device; raise kv_memory_fraction or tp/pp, narrow kv_dtype, or shorten the requests",
                    d.kv_block_size,
                    blocks as f64 * block_bytes / 1e9,
                    free / 1e9,
                    mem.weights.gb(),
                    mem.workspace.gb(),
                    mem.reserve.gb(),
                    missing / 1e9
                ),
            ));
        }
        out.push(KvCache {
            blocks,
            block_size: d.kv_block_size,
            block_bytes: Bytes(block_bytes),
            memory: mem,
        });
    }
    Ok(out)
}
