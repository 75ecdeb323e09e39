//! The engines' serving profiles: which one a case ran (from its `software`), and the
//! `[serving]` settings each gives from its documented defaults (sources beside each value),
//! with the benchmark launchers' overrides.

use super::*;

/// The scheduler settings of a serving engine (or a benchmark tool) as a case ran it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServingStack {
    /// TensorRT-LLM served through Triton's `tensorrtllm_backend` (in-flight batcher).
    TritonTrtllm,
    /// `trtllm-bench throughput`: an engine built by `trtllm-bench build --dataset` (its
    /// tuning heuristic picks `max_batch_size` and `max_num_tokens`), all requests queued.
    TrtllmBench,
    /// `trtllm-serve` (TensorRT-LLM 1.x, the PyTorch backend of the LLM API) behind a load
    /// generator, with the LLM API's defaults.
    TrtllmServe,
    /// vLLM's OpenAI-compatible server, V1 engine (0.8 on).
    Vllm,
    /// SGLang's server (`sglang.launch_server`, 0.4 on).
    Sglang,
}

/// The serving profile a case runs with, and whether its software string named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackChoice {
    /// The profile.
    pub stack: ServingStack,
    /// False when no rule recognised the engine: the profile is then the fallback
    /// ([`ServingStack::FALLBACK`]) and the case's result says so.
    pub recognised: bool,
}

impl ServingStack {
    /// The profile an engine no rule recognises runs with: vLLM's, the middle of the three
    /// families in how it schedules (chunked prefill mixed with decodes as TensorRT-LLM's
    /// in-flight batching does, KV allocated on demand as SGLang does) and the middle when
    /// each profile predicts the other engines' public points (configs/validation/
    /// CALIBRATION.md, 2026-12-07: TTFT 58.2% MAPE for vLLM's on SGLang's and TensorRT-LLM's
    /// 819, against 55.1% for SGLang's and 61.1% for `trtllm-serve`'s on the others).
    pub const FALLBACK: ServingStack = ServingStack::Vllm;

    /// Its name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            ServingStack::TritonTrtllm => "Triton tensorrtllm_backend",
            ServingStack::TrtllmBench => "trtllm-bench",
            ServingStack::TrtllmServe => "trtllm-serve",
            ServingStack::Vllm => "vLLM",
            ServingStack::Sglang => "SGLang",
        }
    }

    /// The profile of a case, from its `software` field (ignoring case): the benchmark tool
    /// when one is named (`trtllm-bench`, Triton), else the engine family; an engine no
    /// rule knows (or none named) gets [`ServingStack::FALLBACK`], never a refusal.
    pub fn of(case: &Case) -> StackChoice {
        let s = case.software.as_deref().unwrap_or("").to_lowercase();
        let has = |p: &str| s.contains(p);
        let known = |stack| StackChoice {
            stack,
            recognised: true,
        };
        // TensorRT-LLM's PyTorch workflow is benchmarked with `trtllm-bench` (its
        // performance guides and blogs run `trtllm-bench ... throughput`); a server run
        // names `trtllm-serve` or a load generator.
        if has("trtllm-bench") || (has("tensorrt-llm") && has("pytorch workflow")) {
            known(ServingStack::TrtllmBench)
        } else if has("tensorrtllm_backend") || has("triton") {
            known(ServingStack::TritonTrtllm)
        } else if has("trtllm-serve") || has("tensorrt-llm") || has("trtllm") {
            known(ServingStack::TrtllmServe)
        } else if has("vllm") {
            known(ServingStack::Vllm)
        } else if has("sglang") {
            known(ServingStack::Sglang)
        } else {
            StackChoice {
                stack: ServingStack::FALLBACK,
                recognised: false,
            }
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
            ServingStack::TrtllmServe => trtllm_serve(&mut c),
            ServingStack::Vllm => vllm(&mut c, case, model, capacity_bytes, (tp, pp)),
            ServingStack::Sglang => sglang(&mut c, case, model, capacity_bytes, (tp, pp)),
        }
        let s = case.software.as_deref().unwrap_or("").to_lowercase();
        if s.contains("aiconfigurator") {
            aic_benchmark(&mut c, self, case, isl);
        }
        if let Some(mb) = case.inference.as_ref().and_then(|i| i.max_batch) {
            // Under attention data parallelism every attention group schedules its own
            // requests: the published `--max_batch_size` is per group (per rank in
            // TensorRT-LLM's DeepSeek-R1 guide, whose groups are one rank each).
            let groups = attention_layout(case, tp).0 as u64;
            c.max_batch = (mb * groups).min(u32::MAX as u64) as u32;
        }
        c
    }
}

/// A case's attention layout over its `tp` ranks: (data-parallel groups, tensor-parallel
/// ranks in each): `(tp / attention_tp, attention_tp)` under attention data parallelism,
/// else `(1, tp)`.
pub(super) fn attention_layout(case: &Case, tp: u32) -> (u32, u32) {
    if case.parallel.attention_dp == Some(true) {
        let atp = case
            .parallel
            .attention_tp
            .unwrap_or(1)
            .clamp(1, tp.max(1) as u64) as u32;
        (tp / atp, atp)
    } else {
        (1, tp)
    }
}

/// `trtllm-serve`'s limits and scheduling (the LLM API's defaults).
fn trtllm_serve(c: &mut ServingConfig) {
    // The LLM API's defaults (tensorrt_llm/llmapi/llm_args.py, 1.0-1.2):
    // `max_batch_size` 2048 and `max_num_tokens` 8192 (trtllm-serve's own CLI
    // defaults too), `KvCacheConfig.free_gpu_memory_fraction` 0.9,
    // `enable_chunked_prefill` false, the capacity scheduler's
    // GUARANTEED_NO_EVICT; the PyTorch backend pages the KV cache in blocks of 32
    // tokens (`KvCacheConfig.tokens_per_block`); `cuda_graph_config` on for
    // generation-only batches (`ScheduledRequests.can_run_cuda_graph`), its
    // `max_batch_size` 128 captured at 1 to 31, 32, 64 and 128
    // (`CudaGraphConfig._generate_cuda_graph_batch_sizes` without padding). With
    // `enable_padding` false a batch of 33 to 63 or 65 to 127 runs eagerly; the
    // simulator pads it to the next size (a modelling simplification).
    c.max_batch = 2048;
    c.max_num_tokens = 8192;
    c.kv_memory_fraction = 0.9;
    c.chunked_prefill = false;
    c.kv_block_size = 32;
    c.cuda_graphs = true;
    c.graph_batch_sizes = (1..=32).chain([64, 128]).collect();
}

/// vLLM's OpenAI server (V1 engine).
fn vllm(
    c: &mut ServingConfig,
    case: &Case,
    model: &ModelSpec,
    capacity_bytes: f64,
    (tp, pp): (u32, u32),
) {
    // vLLM V1 (vllm/engine/arg_utils.py `_set_default_args_v1`, 0.8 on): the
    // OpenAI server on a GPU of at least 70 GiB other than A100 gets
    // `max_num_batched_tokens` 8192 and `max_num_seqs` 1024 (2048 and 256 on
    // smaller ones); chunked prefill always on (V1), decodes first then prefill
    // chunks in the remaining budget; `block_size` 16; KV blocks allocated as
    // sequences grow, the newest preempted (recomputed) when the cache is full;
    // `gpu_memory_utilization` 0.9 of the whole device for weights, activations
    // and KV; CUDA graphs captured at 1, 2, 4, then multiples of 8 to 256, then of
    // 16 to 512 (`CompilationConfig`, `max_capture_size` 512).
    let large = capacity_bytes >= 70.0 * (1u64 << 30) as f64;
    c.max_batch = if large { 1024 } else { 256 };
    c.max_num_tokens = if large { 8192 } else { 2048 };
    c.chunked_prefill = true;
    c.kv_block_size = 16;
    c.kv_admission = KvAdmission::OnDemand;
    c.kv_memory_fraction = share_of_free(0.9, capacity_bytes, model, case, tp, pp);
    c.cuda_graphs = true;
    c.graph_batch_sizes = [1, 2, 4]
        .into_iter()
        .chain((8..=256).step_by(8))
        .chain((272..=512).step_by(16))
        .collect();
}

/// SGLang's server.
fn sglang(
    c: &mut ServingConfig,
    case: &Case,
    model: &ModelSpec,
    capacity_bytes: f64,
    (tp, pp): (u32, u32),
) {
    // SGLang's server defaults (python/sglang/srt/server_args.py, 0.5.4-0.5.9,
    // `_handle_gpu_memory_settings`): `chunked_prefill_size` 8192 below 160 GiB
    // (H100, H200), 16384 above (B200); a prefill batch of at most
    // `max_prefill_tokens` 16384; `cuda_graph_max_bs` 256 below TP 4, 512 from
    // it, captured at 1, 2, 4, 8, 12, multiples of 8 to 256, of 16 to 512
    // (`cuda_graph_runner.py`); `mem_fraction_static` = 1 - reserved / C with
    // reserved = 512 MiB + 1.5 x chunk + 2 x graph batch + TP x PP x 128 MiB, at
    // least 10 GiB. The scheduler runs a prefill batch whenever one can be formed
    // and decodes otherwise (`get_next_batch_to_run`, `enable_mixed_chunk` false);
    // it admits a request only while the KV pool keeps `new_token_ratio` (0.7 at
    // first, `init_new_token_ratio`) of the running requests' remaining output
    // free (`PrefillAdder`), and retracts (recomputes) requests when it runs out;
    // `page_size` 1.
    const GIB: f64 = (1u64 << 30) as f64;
    let chunk: u32 = if capacity_bytes >= 160.0 * GIB {
        16384
    } else {
        8192
    };
    let graph_max: u32 = if tp >= 4 { 512 } else { 256 };
    let reserved_mib =
        512.0 + 1.5 * chunk as f64 + 2.0 * graph_max as f64 + (tp * pp) as f64 * 128.0;
    let reserved = (reserved_mib / 1024.0 * GIB).max(10.0 * GIB);
    // Bounded so that a device smaller than twice the reserve still gets a share (a guard,
    // not a source value: SGLang would refuse to start there).
    let util = (1.0 - reserved / capacity_bytes.max(reserved * 2.0)).clamp(0.05, 0.95);
    c.chunked_prefill = true;
    c.chunk_size = Some(chunk);
    c.max_num_tokens = 16384;
    // `max_running_requests` unset: the request pool, at most 4096
    // (`min(max(max_total_tokens / context_len x 512, 2048), 4096)`, model_runner.py);
    // the KV pool bounds the batch below that.
    c.max_batch = 4096;
    c.batching = Batching::PrefillFirst;
    c.admission_reserve = 0.7;
    c.kv_block_size = 1;
    c.kv_admission = KvAdmission::OnDemand;
    c.kv_memory_fraction = share_of_free(util, capacity_bytes, model, case, tp, pp);
    c.cuda_graphs = true;
    c.graph_batch_sizes = [1, 2, 4, 8, 12]
        .into_iter()
        .chain((16..=256).step_by(8))
        .chain((272..=512).step_by(16))
        .filter(|&b| b <= graph_max)
        .collect();
}

/// The engine limits NVIDIA AIConfigurator's benchmark launcher sets for an aggregated worker
/// (ai-dynamo/aiconfigurator `src/aiconfigurator/generator/rule_plugin/benchmark/
/// {trtllm,vllm,sglang}.rule` @581e459): `max_batch_size` the benchmarked concurrency,
/// `max_num_tokens` (SGLang `max_prefill_tokens`) that batch plus the prompt plus 1500 (a
/// multiple of TensorRT-LLM's 32-token blocks), CUDA graphs captured at every batch size
/// from 1 to the concurrency, and SGLang's `enable_mixed_chunk` on. What the sample's rows
/// ran with when the CSV records only the layout and the concurrency.
fn aic_benchmark(c: &mut ServingConfig, stack: ServingStack, case: &Case, isl: u32) {
    let Some(batch) = case.inference.as_ref().and_then(|i| i.concurrency) else {
        return;
    };
    let batch = batch.clamp(1, u32::MAX as u64 / 4) as u32;
    let tokens = batch.saturating_add(isl).saturating_add(1500);
    c.max_batch = batch;
    c.graph_batch_sizes = (1..=batch).collect();
    match stack {
        ServingStack::TrtllmServe => c.max_num_tokens = tokens.div_ceil(32) * 32,
        ServingStack::Vllm => c.max_num_tokens = tokens,
        ServingStack::Sglang => {
            c.max_num_tokens = tokens;
            c.chunk_size = c.chunk_size.map(|k| k.min(tokens));
            c.batching = Batching::Mixed;
        }
        ServingStack::TritonTrtllm | ServingStack::TrtllmBench => {}
    }
}

/// The share of the memory left after the weights that an engine sizing its KV cache as a
/// fraction `util` of the whole device (vLLM `gpu_memory_utilization`, SGLang
/// `mem_fraction_static`: weights and KV together within `util`) gives the KV cache:
/// `(util x C - W) / (C - W)`, with `W` the weights each of the `tp x pp` devices holds.
fn share_of_free(
    util: f64,
    capacity: f64,
    model: &ModelSpec,
    case: &Case,
    tp: u32,
    pp: u32,
) -> f64 {
    let bytes = case
        .inference
        .as_ref()
        .map_or(2.0, |i| i.precision.dtype().bytes());
    let w = model.params() as f64 * bytes / (tp * pp) as f64;
    if capacity <= w {
        return util;
    }
    // At least 5% (a guard: weights near `util x C` leave the engine almost no cache, and the
    // deployment check then says what is missing).
    ((util * capacity - w) / (capacity - w)).clamp(0.05, 1.0)
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
        // attention's tensor-parallel group (its `attention_tp` ranks under attention data
        // parallelism).
        Some(m) => {
            let copies = attention_layout(case, tp).1 as f64;
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
