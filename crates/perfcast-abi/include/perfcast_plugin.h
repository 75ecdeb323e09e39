/*
 * perfcast_plugin.h -- the perfcast C plugin ABI, major version 1.
 *
 * A C (or C++, Zig, ...) plugin is a shared library that exports ONE symbol:
 *
 *     const perfcast_plugin *perfcast_plugin_entry_v1(void);
 *
 * The ABI MAJOR is part of the symbol name: a host that speaks major 1 looks up
 * `perfcast_plugin_entry_v1` only, so a plugin built for another major is never misread (the
 * host reports "built for C ABI 2, this host speaks 1"). Within a major, the ABI evolves by
 * APPENDING fields at the end of structs (never removing, reordering or retyping):
 *
 *   - Every struct the plugin hands to the host (perfcast_plugin, perfcast_component, the
 *     vtables) starts with `struct_size` = sizeof() of the struct as the plugin was compiled.
 *     The host reads a field only if `struct_size` covers it; a field the plugin does not have
 *     takes the documented default. So a NEWER host loads an OLDER plugin (the direction that
 *     matters: the framework upgrades, the vendor's binary stays).
 *   - Every struct the host hands to the plugin (perfcast_op, perfcast_tier, perfcast_op_time)
 *     also starts with `struct_size` = the host's sizeof(). A plugin compiled against a NEWER
 *     minor than the host must not read (or write) fields beyond that size.
 *   - `abi_minor` in perfcast_plugin says which minor the plugin was compiled against.
 *     Compiling with -DPERFCAST_PLUGIN_ABI_MINOR=0 gives the 1.0 layout (used by the test suite
 *     to check that the current host still loads 1.0 plugins).
 *
 * Minor history (append-only):
 *   1.0  plugin descriptor, components, compute unit {peak, efficiency, launch_overhead},
 *        memory tier {properties}.
 *   1.1  compute unit vtable gains `gemm_tile` and `op_time` (both optional); a new category,
 *        PERFCAST_CATEGORY_INTERCONNECT (perfcast_interconnect_vtable, perfcast_link).
 *   1.2  perfcast_component gains `n_params` / `params`: the component's declared parameters
 *        (perfcast_param; optional: absent or NULL means "not declared").
 *   1.3  two new categories: PERFCAST_CATEGORY_PIPELINE_SCHEDULE (perfcast_pipeline_schedule_vtable,
 *        perfcast_schedule_input, perfcast_schedule_result) and PERFCAST_CATEGORY_RECOMPUTE_POLICY
 *        (perfcast_recompute_policy_vtable, perfcast_layer_activations, perfcast_recompute_plan):
 *        pipeline schedules and activation-recompute policies as plugins.
 *   1.4  a new category, PERFCAST_CATEGORY_PARALLEL_STRATEGY (perfcast_parallel_strategy_vtable,
 *        perfcast_plan, perfcast_model, perfcast_layer_dims, perfcast_layer_split,
 *        perfcast_state_split, perfcast_comm_op): parallel strategies as plugins, the same
 *        structs the Rust ABI (1.2) passes.
 *   1.5  network topologies: PERFCAST_CATEGORY_TOPOLOGY (perfcast_topology_vtable,
 *        perfcast_level, perfcast_group_axis, perfcast_link_class, perfcast_link_load).
 *   1.6  perfcast_pipeline_schedule_vtable gains `properties` (optional): the model-state copies
 *        a device holds and whether the schedule hides MoE expert communication
 *        (perfcast_schedule_properties), as the built-in DualPipe and combined 1F1B declare.
 *   1.7  declared mesh axes: perfcast_parallel_strategy_vtable gains `axes` (optional), which
 *        names the strategy's own axes (perfcast_axis_decl); the perfcast_plan a strategy is
 *        handed appends `batch_split`, `n_axes` and `axes` (their degrees); a collective's
 *        `group` may name the strategy's own axes (PERFCAST_GROUP_DECLARED(k)).
 *
 * Codes (dtype, engine, op kinds...) are plain uint32_t values; new values may be added in a
 * minor version, so plugins must answer PERFCAST_ERR_UNSUPPORTED for a code they do not know.
 *
 * Errors: every fallible function returns a status (PERFCAST_OK or a PERFCAST_ERR_* code) and,
 * on error, writes a NUL-terminated UTF-8 message into `err` (capacity `err_cap` >= 256 bytes,
 * zero-filled by the host; truncate longer messages). For PERFCAST_ERR_PARAMS the message must
 * name the offending key. The host never frees plugin memory and the plugin never frees host
 * memory; pointers passed into a call are valid for that call only.
 *
 * Threading: the host may call any function concurrently from several threads, for the same
 * or different instances. Instances must be immutable after `create` returns.
 *
 * Lifetime: the host never unloads a plugin (no dlclose). Strings and structs reachable from
 * perfcast_plugin_entry_v1() must stay valid for the life of the process (static storage).
 * The host calls `destroy` (if not NULL) exactly once per created instance when it drops it.
 *
 * Units: seconds, bytes, bytes/second, FLOP, FLOP/second (SI, no prefixes). Every number a
 * plugin returns must be finite and >= 0 (efficiencies in (0, 1]); the host rejects anything
 * else with an error naming the plugin and the value.
 */
#ifndef PERFCAST_PLUGIN_H
#define PERFCAST_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PERFCAST_PLUGIN_ABI_MAJOR 1
/* The newest minor this header describes. */
#define PERFCAST_PLUGIN_ABI_MINOR_LATEST 7
/* The minor a plugin is compiled against (override with -DPERFCAST_PLUGIN_ABI_MINOR=0). */
#ifndef PERFCAST_PLUGIN_ABI_MINOR
#define PERFCAST_PLUGIN_ABI_MINOR PERFCAST_PLUGIN_ABI_MINOR_LATEST
#endif

/* ---- status codes ---------------------------------------------------------------------- */
#define PERFCAST_OK 0
/* The parameters were rejected; the message names the key. */
#define PERFCAST_ERR_PARAMS 1
/* Anything else went wrong; the message says what. */
#define PERFCAST_ERR_FAILED 2
/* The device has no such path (peak of an engine/dtype it lacks, an op kind it cannot run). */
#define PERFCAST_ERR_UNSUPPORTED 3

/* ---- data types: the values of perfcast_core::DType::code() ---------------------------- */
#define PERFCAST_DTYPE_FP32 0
#define PERFCAST_DTYPE_TF32 1
#define PERFCAST_DTYPE_BF16 2
#define PERFCAST_DTYPE_FP16 3
#define PERFCAST_DTYPE_FP8 4
#define PERFCAST_DTYPE_FP4 5
#define PERFCAST_DTYPE_INT8 6
#define PERFCAST_DTYPE_INT4 7

/* ---- engines (perfcast_core::Engine) ----------------------------------------------------- */
#define PERFCAST_ENGINE_MATRIX 0 /* tensor cores / systolic arrays: GEMM, attention */
#define PERFCAST_ENGINE_VECTOR 1 /* SIMD / vector units: everything else */

/* ---- component categories (perfcast_core::Category) --------------------------------------
 * A host ignores components of a category it does not support. */
#define PERFCAST_CATEGORY_COMPUTE_UNIT 0
#define PERFCAST_CATEGORY_MEMORY_TIER 1
#define PERFCAST_CATEGORY_INTERCONNECT 2 /* 1.1 */
#define PERFCAST_CATEGORY_TOPOLOGY 3           /* 1.5 (the Rust ABI's since 1.1) */
#define PERFCAST_CATEGORY_PIPELINE_SCHEDULE 4 /* 1.3 */
#define PERFCAST_CATEGORY_RECOMPUTE_POLICY 5   /* 1.3 */
#define PERFCAST_CATEGORY_PARALLEL_STRATEGY 6  /* 1.4 */

/* ---- op kinds (perfcast_core::ComputeOp) ------------------------------------------------- */
#define PERFCAST_OP_GEMM 0
#define PERFCAST_OP_ATTENTION 1
#define PERFCAST_OP_VECTOR 2

#define PERFCAST_ATTENTION_PLAIN 0
#define PERFCAST_ATTENTION_FLASH 1

/* perfcast_core::VectorOpKind */
#define PERFCAST_VECTOR_NORM 0
#define PERFCAST_VECTOR_SOFTMAX 1
#define PERFCAST_VECTOR_ACTIVATION 2
#define PERFCAST_VECTOR_DROPOUT 3
#define PERFCAST_VECTOR_ELEMENTWISE 4
#define PERFCAST_VECTOR_EMBEDDING 5
#define PERFCAST_VECTOR_LOSS 6
#define PERFCAST_VECTOR_CAST 7
#define PERFCAST_VECTOR_ROPE 8
#define PERFCAST_VECTOR_OPTIMIZER 9

/* ---- memory tier levels (perfcast_core::TierLevel) --------------------------------------- */
#define PERFCAST_TIER_ON_CHIP 0
#define PERFCAST_TIER_DEVICE 1
#define PERFCAST_TIER_HOST 2

/* ---- what bounds an op (perfcast_core::TimeBound) ---------------------------------------- */
#define PERFCAST_BOUND_COMPUTE 0
#define PERFCAST_BOUND_MEMORY 1 /* perfcast_op_time.bound_tier says which tier */
#define PERFCAST_BOUND_OVERHEAD 2

/* ---- collectives (perfcast_core::CollectiveKind, CollectiveAlgorithm), 1.1 ---------------- */
#define PERFCAST_COLLECTIVE_ALL_REDUCE 0
#define PERFCAST_COLLECTIVE_ALL_GATHER 1
#define PERFCAST_COLLECTIVE_REDUCE_SCATTER 2
#define PERFCAST_COLLECTIVE_ALL_TO_ALL 3
#define PERFCAST_COLLECTIVE_SEND_RECV 4
#define PERFCAST_COLLECTIVE_BROADCAST 5

#define PERFCAST_ALGORITHM_AUTO 0 /* whichever of ring and tree is faster */
#define PERFCAST_ALGORITHM_RING 1
#define PERFCAST_ALGORITHM_TREE 2

/* One compute op (host -> plugin). Only the block of `kind` is meaningful; the others are 0.
 * `flops`, `min_bytes`, `launches`, `engine` and `dtype` are precomputed by the host with
 * perfcast's own op accounting, so a plugin need not re-derive them. */
typedef struct perfcast_op {
    uint32_t struct_size; /* host's sizeof(perfcast_op) */
    uint32_t kind;        /* PERFCAST_OP_* */
    uint32_t engine;      /* PERFCAST_ENGINE_* the op runs on */
    uint32_t dtype;       /* compute format (GEMM: the wider of a and b) */
    double flops;         /* total FLOPs (a multiply-add counts 2) */
    double min_bytes;     /* compulsory device-memory traffic, bytes */
    uint32_t launches;    /* kernel launches */
    uint32_t reserved0;
    /* PERFCAST_OP_GEMM: C[m,n] = A[m,k] . B[k,n], `batch` times */
    uint64_t m, n, k, batch;
    /* reserved1: the operands' scaling, 0 per tensor (or none), 1 per row, 2 1x128/128x128
     * blocks, 3 MX 32-element blocks, 4 NVFP4 16-element blocks (0 from older hosts) */
    uint32_t a_dtype, b_dtype, out_dtype, reserved1;
    /* PERFCAST_OP_ATTENTION */
    uint64_t att_batch, heads, kv_heads, q_len, kv_len, head_dim;
    /* attention_kind: 0 plain, 1 flash (tiled); reserved2: the flash kernel family, 0 for
     * FlashAttention-2 or unspecified, 2 FlashAttention-3, 3 cuDNN fused attention (a plugin
     * may ignore it: it is 0 from hosts older than the families) */
    uint32_t causal, attention_kind, backward, reserved2;
    /* PERFCAST_OP_VECTOR */
    uint64_t elements;
    double flops_per_element, bytes_per_element;
    uint32_t vector_kind, reserved3;
} perfcast_op;

/* One memory tier, as plain data (host -> plugin in op_time; plugin -> host in properties). */
typedef struct perfcast_tier {
    uint32_t struct_size; /* sizeof(perfcast_tier) of whoever allocated it (the host) */
    uint32_t level;       /* PERFCAST_TIER_* */
    const char *kind;     /* registered name, NUL-terminated; NULL when the plugin fills it */
    double capacity;      /* bytes */
    double bandwidth;     /* peak, bytes/s */
    double efficiency;    /* achievable fraction of bandwidth, (0, 1] */
    double latency;       /* seconds, added once per op bound by this tier */
} perfcast_tier;

/* The time of one op (plugin -> host, written into a host-allocated struct). */
typedef struct perfcast_op_time {
    uint32_t struct_size; /* host's sizeof(perfcast_op_time) */
    uint32_t bound;       /* PERFCAST_BOUND_* */
    uint32_t bound_tier;  /* index into the `tiers` array when bound == PERFCAST_BOUND_MEMORY */
    uint32_t reserved0;
    double time;          /* total seconds, overhead included */
    double compute;       /* seconds at the achievable throughput */
    double memory;        /* seconds of the slowest tier (transfer + latency) */
    double overhead;      /* launch overhead included in `time`, seconds */
    double flops;         /* FLOPs executed */
    double device_bytes;  /* bytes moved at the farthest tier */
} perfcast_op_time;

/* Compute unit functions. `self` is what the component's `create` returned. */
typedef struct perfcast_compute_unit_vtable {
    uint32_t struct_size; /* sizeof() as compiled by the plugin */
    uint32_t reserved0;
    /* 1.0, REQUIRED. Peak dense throughput of `engine` in `dtype`, FLOP/s (> 0). Return
     * PERFCAST_ERR_UNSUPPORTED when the device has no such path. */
    int32_t (*peak)(const void *self, uint32_t engine, uint32_t dtype, double *out_flops_per_s,
                    char *err, size_t err_cap);
    /* 1.0, optional (NULL: 1.0). Achievable fraction of peak for `op`, in (0, 1]. */
    int32_t (*efficiency)(const void *self, const perfcast_op *op, double *out, char *err,
                          size_t err_cap);
    /* 1.0, optional (NULL: 0). Fixed cost of one kernel launch, seconds. */
    int32_t (*launch_overhead)(const void *self, double *out_s, char *err, size_t err_cap);
#if PERFCAST_PLUGIN_ABI_MINOR >= 1
    /* 1.1, optional (absent or NULL: 128). Output-tile edge (elements) a core keeps on chip. */
    int32_t (*gemm_tile)(const void *self, uint64_t *out, char *err, size_t err_cap);
    /* 1.1, optional (absent or NULL: the host times the op with perfcast's hierarchical
     * roofline using peak/efficiency/launch_overhead/gemm_tile). `tiers` lists the device's
     * memory tiers closest first; write every field of `out` (its struct_size is preset). */
    int32_t (*op_time)(const void *self, const perfcast_op *op, const perfcast_tier *tiers,
                       size_t n_tiers, perfcast_op_time *out, char *err, size_t err_cap);
#endif
} perfcast_compute_unit_vtable;

/* Memory tier functions. */
typedef struct perfcast_memory_tier_vtable {
    uint32_t struct_size;
    uint32_t reserved0;
    /* 1.0, REQUIRED. Fill level, capacity, bandwidth, efficiency and latency of `out` (its
     * struct_size is preset; leave `kind` alone). Called once per instance. */
    int32_t (*properties)(const void *self, perfcast_tier *out, char *err, size_t err_cap);
} perfcast_memory_tier_vtable;

/* An interconnect level as plain data (plugin -> host), 1.1. */
typedef struct perfcast_link {
    uint32_t struct_size; /* host's sizeof(perfcast_link) */
    uint32_t domain_size; /* devices one domain connects (UINT32_MAX: no limit) */
    double bandwidth;     /* achievable bytes/s per device, one direction */
    double latency;       /* seconds per algorithm step */
} perfcast_link;

/* Interconnect functions, 1.1 (a component of PERFCAST_CATEGORY_INTERCONNECT). */
typedef struct perfcast_interconnect_vtable {
    uint32_t struct_size;
    uint32_t reserved0;
    /* REQUIRED. Fill domain_size, bandwidth and latency of `out` (struct_size is preset).
     * Called once per instance. */
    int32_t (*properties)(const void *self, perfcast_link *out, char *err, size_t err_cap);
    /* Optional (NULL: perfcast's ring/tree alpha-beta model over `properties`). Seconds of a
     * collective of `kind` over `ranks` devices of one domain; `bytes` is the full buffer
     * (all-reduce: the tensor; all-gather: the gathered output; send/recv: the message). */
    int32_t (*collective_time)(const void *self, uint32_t kind, double bytes, uint32_t ranks,
                               uint32_t algorithm, double *out_s, char *err, size_t err_cap);
} perfcast_interconnect_vtable;

/* ---- pipeline schedules (perfcast_core::parallel::PipelineSchedule), 1.3 ----------------- */

/* What a schedule composes (host -> plugin). The times are the slowest stage's, per
 * micro-batch, in seconds; in_flight and validate get zero times (memory is sized without
 * them). */
typedef struct perfcast_schedule_input {
    uint32_t struct_size;    /* host's sizeof(perfcast_schedule_input) */
    uint32_t stages;         /* pipeline stages p (>= 1) */
    uint32_t virtual_stages; /* model chunks per stage v (>= 1; 1 unless interleaved) */
    uint32_t micro_batches;  /* micro-batches m per optimizer step on one pipeline (>= 1) */
    double forward;          /* forward time of one micro-batch through one stage */
    double backward;         /* backward time (recompute included) of one micro-batch */
    double p2p;              /* exposed time of one hand-off between stages, one direction */
} perfcast_schedule_input;

/* What a schedule returns (plugin -> host, written into a host-allocated struct). Every
 * value finite and >= 0; bubble and p2p are parts of time. */
typedef struct perfcast_schedule_result {
    uint32_t struct_size;  /* host's sizeof(perfcast_schedule_result) */
    uint32_t reserved0;
    double time;           /* first forward to last backward of the step, seconds */
    double bubble;         /* idle time of a stage in that span, seconds */
    double p2p;            /* hand-off time on the critical path, seconds */
    double peak_in_flight; /* micro-batches the first stage holds at its peak (informational) */
} perfcast_schedule_result;

/* What a schedule instance is (plugin -> host, written into a host-allocated struct whose
 * fields hold the defaults), 1.6. Asked once, when the instance is created. */
typedef struct perfcast_schedule_properties {
    uint32_t struct_size;          /* host's sizeof(perfcast_schedule_properties) */
    /* 1 if the schedule runs one micro-batch's forward beside another's backward, so that an
     * MoE layer's dispatch and combine hide behind the other's compute (DualPipe, combined
     * 1F1B): the engine then times the expert all-to-all as `plan.ep_comm_overlap` does.
     * 0 (default) otherwise; any other value is an error. */
    uint32_t overlaps_expert_comm;
    /* Copies of its stage's model state (weights, gradients, optimizer) a device holds: 1
     * (default), or 2 for a bidirectional schedule such as DualPipe. Finite and >= 1. */
    double model_copies;
} perfcast_schedule_properties;

/* Pipeline schedule functions, 1.3 (a component of PERFCAST_CATEGORY_PIPELINE_SCHEDULE; use it
 * with `plan.schedule = "NAME"`). */
typedef struct perfcast_pipeline_schedule_vtable {
    uint32_t struct_size;
    uint32_t reserved0;
    /* REQUIRED. Compose the stage times over the micro-batches into `out` (struct_size is
     * preset). Must not decrease when forward + backward grows (the search's bound). */
    int32_t (*step)(const void *self, const perfcast_schedule_input *in,
                    perfcast_schedule_result *out, char *err, size_t err_cap);
    /* REQUIRED. Micro-batches (whole-stage units) stage `stage` (0-based, < stages) holds at
     * its peak; from the counts of `in` only (its times are zero). */
    int32_t (*in_flight)(const void *self, const perfcast_schedule_input *in, uint32_t stage,
                         double *out, char *err, size_t err_cap);
    /* Optional (NULL: any plan). Refuse a plan the schedule cannot run (e.g. virtual stages
     * it does not interleave) with PERFCAST_ERR_FAILED and a message saying why. */
    int32_t (*validate)(const void *self, const perfcast_schedule_input *in, char *err,
                        size_t err_cap);
#if PERFCAST_PLUGIN_ABI_MINOR >= 6
    /* Optional, 1.6 (absent or NULL: the defaults of perfcast_schedule_properties). Write the
     * instance's properties into `out` (struct_size and the defaults are preset). */
    int32_t (*properties)(const void *self, perfcast_schedule_properties *out, char *err,
                          size_t err_cap);
#endif
} perfcast_pipeline_schedule_vtable;

/* ---- activation-recompute policies (perfcast_core::parallel::RecomputePolicy), 1.3 ------- */

/* What one transformer layer keeps for its backward without recompute, bytes per
 * micro-batch (host -> plugin). */
typedef struct perfcast_layer_activations {
    uint32_t struct_size; /* host's sizeof(perfcast_layer_activations) */
    uint32_t reserved0;
    double input;          /* the layer's input (what full recompute keeps) */
    double attention_core; /* scores, softmax, dropout mask (what selective recompute drops) */
    double other;          /* everything else the backward needs */
} perfcast_layer_activations;

/* What a policy decides for one pipeline stage (plugin -> host, host-allocated). */
typedef struct perfcast_recompute_plan {
    uint32_t struct_size; /* host's sizeof(perfcast_recompute_plan) */
    uint32_t reserved0;
    double full_layers;      /* layers that keep their input and rerun their forward, 0..layers */
    double attention_layers; /* layers that drop and rerun the attention core, 0..layers */
    double kept;             /* activation bytes the stage keeps per micro-batch (all layers) */
    double working;          /* extra bytes live while a recomputed layer runs its backward */
} perfcast_recompute_plan;

/* Recompute policy functions, 1.3 (a component of PERFCAST_CATEGORY_RECOMPUTE_POLICY; use it
 * with `plan.recompute = "NAME"`). */
typedef struct perfcast_recompute_policy_vtable {
    uint32_t struct_size;
    uint32_t reserved0;
    /* REQUIRED. Decide for a stage of `layers` layers, each keeping `act`. `recompute_layers`
     * is the plan's per-stage layer count (`plan.recompute_layers`, 1..layers) or 0 when the
     * plan gives none. Called for the first, a middle and the last stage of each plan. */
    int32_t (*plan)(const void *self, const perfcast_layer_activations *act, uint32_t layers,
                    uint32_t recompute_layers, perfcast_recompute_plan *out, char *err,
                    size_t err_cap);
} perfcast_recompute_policy_vtable;

/* ---- parallel strategies (perfcast_core::parallel::ParallelStrategy), 1.4 ---------------- */

/* Mesh axes (perfcast_core::parallel::Axis): what a strategy says it shards. */
#define PERFCAST_AXIS_TENSOR 0
#define PERFCAST_AXIS_SEQUENCE 1
#define PERFCAST_AXIS_CONTEXT 2
#define PERFCAST_AXIS_EXPERT 3
#define PERFCAST_AXIS_PIPELINE 4
#define PERFCAST_AXIS_DATA 5

/* Groups of a collective: a bit set of the mesh's axes (perfcast_core::parallel::AxisSet). */
#define PERFCAST_GROUP_TENSOR 1u
#define PERFCAST_GROUP_CONTEXT 2u
#define PERFCAST_GROUP_PIPELINE 4u
#define PERFCAST_GROUP_DATA 8u
#define PERFCAST_GROUP_PIPELINE_ENDS 16u /* the first and the last stage */
#define PERFCAST_GROUP_EXPERT 32u
#define PERFCAST_GROUP_EXPERT_TENSOR 64u
#define PERFCAST_GROUP_EXPERT_DATA 128u
/* 1.7: the k-th axis the strategy declares (k < PERFCAST_MAX_DECLARED_AXES). */
#define PERFCAST_GROUP_DECLARED(k) (256u << (k))

/* The report ledger of a collective (perfcast_core::parallel::CommClass). */
#define PERFCAST_CLASS_TENSOR 0
#define PERFCAST_CLASS_CONTEXT 1
#define PERFCAST_CLASS_PIPELINE 2
#define PERFCAST_CLASS_DATA 3
#define PERFCAST_CLASS_ZERO 4
#define PERFCAST_CLASS_EXPERT 5

/* When a collective runs (perfcast_core::parallel::Phase). */
#define PERFCAST_PHASE_FORWARD 0            /* per layer per micro-batch */
#define PERFCAST_PHASE_BACKWARD 1           /* per layer per micro-batch */
#define PERFCAST_PHASE_STEP 2               /* per optimizer step */
#define PERFCAST_PHASE_BOUNDARY 3           /* per micro-batch per stage boundary */
#define PERFCAST_PHASE_EMBEDDING_FORWARD 4  /* per micro-batch, first stage */
#define PERFCAST_PHASE_EMBEDDING_BACKWARD 5
#define PERFCAST_PHASE_HEAD_FORWARD 6       /* per micro-batch, last stage */
#define PERFCAST_PHASE_HEAD_BACKWARD 7
#define PERFCAST_PHASE_EXPERT_FORWARD 8     /* per MoE layer per micro-batch */
#define PERFCAST_PHASE_EXPERT_BACKWARD 9

/* The compute a collective may hide behind (perfcast_core::parallel::Window). */
#define PERFCAST_WINDOW_LAYER_GEMMS 0
#define PERFCAST_WINDOW_ATTENTION 1
#define PERFCAST_WINDOW_LAYER_COMPUTE 2
#define PERFCAST_WINDOW_LAST_BACKWARD 3
#define PERFCAST_WINDOW_FIRST_FORWARD 4

/* MoE token dispatchers, context-parallel exchanges, feed-forward activations. */
#define PERFCAST_DISPATCHER_ALLTOALL 0
#define PERFCAST_DISPATCHER_ALLGATHER 1
#define PERFCAST_DISPATCHER_DEEPEP 2
#define PERFCAST_DISPATCHER_HYBRIDEP 3
#define PERFCAST_CP_COMM_P2P 0
#define PERFCAST_CP_COMM_ALL_GATHER 1
#define PERFCAST_FFN_GELU 0
#define PERFCAST_FFN_SWIGLU 1
#define PERFCAST_FFN_RELU2 2

/* The degrees and switches of a plan (host -> plugin). Booleans are 0 or 1. */
typedef struct perfcast_plan {
    uint32_t struct_size; /* host's sizeof(perfcast_plan) */
    uint32_t tp, pp, dp, cp, ep, etp, vpp;
    uint32_t moe_dispatcher; /* PERFCAST_DISPATCHER_* */
    uint32_t cp_comm;        /* PERFCAST_CP_COMM_* */
    uint32_t zero_stage;     /* 0..3 */
    uint32_t micro_batch;    /* sequences per micro-batch */
    uint32_t global_batch;   /* sequences per optimizer step */
    uint32_t sp, ep_comm_overlap, tp_comm_overlap, overlap_grad_reduce, overlap_param_gather;
    uint32_t fp32_grad_accum;
    uint32_t reserved0;
#if PERFCAST_PLUGIN_ABI_MINOR >= 7
    /* 1.7, in the plan a parallel strategy is handed (check struct_size before reading: other
     * calls may hand the 1.4 struct). The product of the degrees of every declared axis that
     * splits the batch (the sequences per optimizer step are split over dp x batch_split). */
    uint32_t batch_split;
    /* How many of axes[] are this strategy's: the degrees of the axes it declares, in the
     * order of its `axes` answer (the rest are 1). */
    uint32_t n_axes;
    uint32_t axes[8]; /* PERFCAST_MAX_DECLARED_AXES */
#endif
} perfcast_plan;

/* The model's dimensions (host -> plugin). kv_heads and head_dim are the values in effect;
 * 0 means "absent" for max_context, shared_expert_ffn_hidden, expert_groups, group_top_k,
 * capacity_factor and load_imbalance; the MoE fields count only with has_moe = 1. */
typedef struct perfcast_model {
    uint32_t struct_size; /* host's sizeof(perfcast_model) */
    uint32_t ffn_act;     /* PERFCAST_FFN_* */
    uint64_t layers, hidden, heads, kv_heads, head_dim, ffn_hidden, vocab, seq_len;
    uint64_t max_context, mtp_layers;
    uint32_t tied_embeddings, has_moe;
    uint64_t experts, top_k, expert_ffn_hidden, shared_experts, shared_expert_ffn_hidden;
    uint64_t dense_layers, moe_layer_freq, expert_groups, group_top_k;
    double capacity_factor, load_imbalance;
} perfcast_model;

/* One transformer layer as the strategies see it (host -> plugin): sizes of the whole model
 * (unsharded), parameter counts per device, bytes per element. */
typedef struct perfcast_layer_dims {
    uint32_t struct_size; /* host's sizeof(perfcast_layer_dims) */
    uint32_t tied_embeddings;
    uint64_t micro_batch, seq_len, hidden, heads, kv_heads, head_dim, ffn_hidden;
    double act_bytes;        /* one activation element */
    double gather_bytes;     /* one element as the forward all-gathers it */
    double layer_params;     /* one layer's parameters on one device */
    double device_params;    /* parameters on the device of the stage with the most */
    double grad_bytes;       /* one gradient element as reduced */
    double weight_bytes;     /* one weight element as stored for compute */
    double embedding_params; /* the word embedding's on one device */
    uint32_t has_moe, reserved0;
    uint64_t experts, top_k, expert_groups, group_top_k;
    double moe_tokens, moe_routed, dispatch_bytes, expert_layer_params, expert_params;
} perfcast_layer_dims;

/* How the strategies divide one layer's work on a device (in: the factors so far; out: times
 * this strategy's, each a whole multiple of what came in). */
typedef struct perfcast_layer_split {
    uint32_t struct_size; /* host's sizeof(perfcast_layer_split) */
    uint32_t tokens;      /* divides the tokens every op sees (context parallel) */
    uint32_t weights;     /* divides the weights, heads and MLP width (tensor parallel) */
    uint32_t pointwise;   /* divides the ops outside the TP region (sequence parallel) */
    uint32_t experts;     /* divides the routed experts (expert parallel) */
    uint32_t expert_weights; /* divides each expert's matrices (expert tensor parallel) */
} perfcast_layer_split;

/* How the model state is sharded beyond TP and PP (divisors; in and out as above). */
typedef struct perfcast_state_split {
    uint32_t struct_size; /* host's sizeof(perfcast_state_split) */
    uint32_t weights, grads, optimizer;
    uint32_t expert_weights, expert_grads, expert_optimizer;
    uint32_t reserved0;
} perfcast_state_split;

/* One collective a strategy adds (plugin -> host, written into the host's array). `bytes` is
 * the full buffer (all-reduce: the tensor; all-gather: the gathered output; reduce-scatter:
 * the input; all-to-all: the rank's buffer; send/recv: the message); `count` how many times
 * it is issued each time its phase comes round. With exposed = 0 it hides behind `window`,
 * `efficiency` (in [0, 1]) of it. The dispatch fields only with has_dispatch = 1 (a MoE
 * token dispatch or combine). */
typedef struct perfcast_comm_op {
    uint32_t struct_size; /* host's sizeof(perfcast_comm_op): write only within it */
    uint32_t klass;       /* PERFCAST_CLASS_* */
    uint32_t phase;       /* PERFCAST_PHASE_* */
    uint32_t kind;        /* PERFCAST_COLLECTIVE_* */
    uint32_t group;       /* PERFCAST_GROUP_* bits, at least one */
    uint32_t exposed;     /* 1: on the critical path; 0: behind `window` */
    double bytes;
    double count;
    uint32_t window;         /* PERFCAST_WINDOW_* */
    uint32_t with_recompute; /* 1: issued again when full recompute reruns the forward */
    double efficiency;
    uint32_t has_dispatch, dispatch_top_k, dispatch_experts, dispatch_expert_groups;
    uint32_t dispatch_group_top_k, dispatch_hierarchical;
} perfcast_comm_op;

#if PERFCAST_PLUGIN_ABI_MINOR >= 7
/* ---- declared mesh axes (perfcast_core::parallel::AxisDecl), 1.7 ------------------------- */
#define PERFCAST_MAX_DECLARED_AXES 8
#define PERFCAST_AXIS_NAME_BYTES 32
/* Where a declared axis sits: its consecutive ranks are closer than the next rank of the
 * anchor (INSIDE), or it steps over every rank of the anchor (OUTSIDE). */
#define PERFCAST_PLACE_INSIDE 0
#define PERFCAST_PLACE_OUTSIDE 1
/* What a declared axis's degree divides (bits). BATCH: it replicates the model over parts of
 * the batch, as data parallelism does. */
#define PERFCAST_DIVIDES_BATCH 1u
#define PERFCAST_DIVIDES_HEADS 2u
#define PERFCAST_DIVIDES_KV_HEADS 4u
#define PERFCAST_DIVIDES_SEQUENCE 8u
#define PERFCAST_DIVIDES_EXPERTS 16u

/* One mesh axis a strategy declares (plugin -> host, written into the host's array). Its
 * name is the plan key `plan.axes.NAME` and the search key `axes.NAME`: lowercase letters,
 * digits and `_`, starting with a letter, not a built-in axis's name or key. */
typedef struct perfcast_axis_decl {
    uint32_t struct_size; /* host's sizeof(perfcast_axis_decl): write only within it */
    uint32_t place;       /* PERFCAST_PLACE_* */
    uint32_t anchor;      /* PERFCAST_AXIS_TENSOR, _CONTEXT, _PIPELINE or _DATA */
    uint32_t divides;     /* PERFCAST_DIVIDES_* bits */
    char name[PERFCAST_AXIS_NAME_BYTES]; /* NUL-terminated UTF-8 */
} perfcast_axis_decl;
#endif

/* Parallel strategy functions, 1.4 (a component of PERFCAST_CATEGORY_PARALLEL_STRATEGY; use
 * it by naming it in `options.strategies`, in place of the built-in on its axis, or beside
 * the built-ins when it owns axes of its own). */
typedef struct perfcast_parallel_strategy_vtable {
    uint32_t struct_size;
    uint32_t reserved0;
    /* REQUIRED. The axis it shards (PERFCAST_AXIS_*). Called once per instance. */
    int32_t (*axis)(const void *self, uint32_t *out, char *err, size_t err_cap);
    /* Optional (NULL: any plan). Refuse a plan with PERFCAST_ERR_FAILED and a message naming
     * the key (e.g. "plan.tp = 64 must divide model.heads = 96"). */
    int32_t (*validate)(const void *self, const perfcast_model *model, const perfcast_plan *plan,
                        char *err, size_t err_cap);
    /* Optional (NULL: no split). Multiply this axis's factors into `split`. */
    int32_t (*split_layer)(const void *self, const perfcast_plan *plan,
                           perfcast_layer_split *split, char *err, size_t err_cap);
    /* Optional (NULL: no sharding). Multiply this axis's divisors into `split`. */
    int32_t (*split_state)(const void *self, const perfcast_plan *plan,
                           perfcast_state_split *split, char *err, size_t err_cap);
    /* Optional (NULL: none). Write this axis's collectives into out[0..cap) (each entry's
     * struct_size is preset) and their number into *n_out; more than `cap` is an error. */
    int32_t (*comms)(const void *self, const perfcast_plan *plan, const perfcast_layer_dims *dims,
                     perfcast_comm_op *out, size_t cap, size_t *n_out, char *err, size_t err_cap);
#if PERFCAST_PLUGIN_ABI_MINOR >= 7
    /* 1.7, optional (absent or NULL: none). Write the axes the strategy declares into
     * out[0..cap) (each entry's struct_size is preset; cap is PERFCAST_MAX_DECLARED_AXES) and
     * their number into *n_out. Called once per instance. */
    int32_t (*axes)(const void *self, perfcast_axis_decl *out, size_t cap, size_t *n_out,
                    char *err, size_t err_cap);
#endif
} perfcast_parallel_strategy_vtable;

/* ---- network topologies (perfcast_core::Topology), 1.5 ----------------------------------- */

/* One network level of the system, as the host hands it over (scale-up domain first, the NIC
 * last). */
typedef struct perfcast_level {
    uint32_t struct_size; /* host's sizeof(perfcast_level) */
    uint32_t domain_size; /* devices one domain of this level connects */
    double bandwidth;     /* bytes/s per device, one direction */
    double latency;       /* seconds per algorithm step */
    double overhead;      /* seconds per collective */
} perfcast_level;

/* One axis of a group: `degree` ranks `stride` devices apart (device ids, 0-based). A
 * group's members are the sums of one multiple of each axis' stride; the system has `devices`
 * devices and every sibling group (the other offsets) runs the same collective at once. */
typedef struct perfcast_group_axis {
    uint64_t degree;
    uint64_t stride;
} perfcast_group_axis;

/* One class of links the topology builds (plugin -> host, written into the host's array). */
typedef struct perfcast_link_class {
    uint32_t struct_size; /* host's sizeof(perfcast_link_class): write only within it */
    uint32_t reserved0;
    char name[64];        /* NUL-terminated UTF-8, e.g. "leaf-spine" */
    double count;         /* links of the class in the system (> 0) */
    double bandwidth;     /* bytes/s of one link, one direction (> 0) */
} perfcast_link_class;

/* The links of one class one group keeps busy during a collective (plugin -> host). */
typedef struct perfcast_link_load {
    uint32_t struct_size; /* host's sizeof(perfcast_link_load) */
    uint32_t klass;       /* index into what `links` returned */
    double links;         /* links of the class this group loads */
    double busy;          /* seconds each of them is busy */
} perfcast_link_load;

/* Topology functions, 1.5 (a component of PERFCAST_CATEGORY_TOPOLOGY; use it with
 * `[system] topology = "NAME"`). A C topology has no bill of materials (no cost). */
typedef struct perfcast_topology_vtable {
    uint32_t struct_size;
    uint32_t reserved0;
    /* Optional (NULL: any system). Refuse a system the topology cannot wire. */
    int32_t (*check)(const void *self, const perfcast_level *levels, size_t n_levels,
                     uint64_t devices, char *err, size_t err_cap);
    /* Optional (NULL: none). Write the link classes into out[0..cap) (struct_size preset) and
     * their number into *n_out. */
    int32_t (*links)(const void *self, const perfcast_level *levels, size_t n_levels,
                     uint64_t devices, perfcast_link_class *out, size_t cap, size_t *n_out,
                     char *err, size_t err_cap);
    /* REQUIRED. Seconds of a collective of `kind` (PERFCAST_COLLECTIVE_*) on `bytes` (the full
     * buffer) in one group (`axes`), its sibling groups running at once, into *out_time; the
     * links it keeps busy into loads[0..cap) and their number into *n_loads (0: none). */
    int32_t (*collective)(const void *self, const perfcast_level *levels, size_t n_levels,
                          const perfcast_group_axis *axes, size_t n_axes, uint64_t devices,
                          uint32_t kind, double bytes, double *out_time,
                          perfcast_link_load *loads, size_t cap, size_t *n_loads, char *err,
                          size_t err_cap);
} perfcast_topology_vtable;

/* ---- declared parameters (perfcast_core::ParamType, ParamDefault), 1.2 ------------------ */
#define PERFCAST_PARAM_FLOAT 0
#define PERFCAST_PARAM_INTEGER 1
#define PERFCAST_PARAM_BOOL 2
#define PERFCAST_PARAM_STRING 3
#define PERFCAST_PARAM_TABLE 4
#define PERFCAST_PARAM_LIST 5

#define PERFCAST_DEFAULT_REQUIRED 0 /* must be given; default_value is ignored */
#define PERFCAST_DEFAULT_VALUE 1    /* default_value is the default, as TOML ("0.8", "true") */
#define PERFCAST_DEFAULT_DERIVED 2  /* computed when left out; default_value says how */

/* One parameter of a component (plugin -> host, static storage), 1.2. Strings are
 * NUL-terminated UTF-8; NULL reads as "". */
typedef struct perfcast_param {
    uint32_t struct_size;       /* sizeof(perfcast_param) as compiled by the plugin */
    uint32_t type;              /* PERFCAST_PARAM_* */
    uint32_t default_kind;      /* PERFCAST_DEFAULT_* */
    uint32_t reserved0;
    const char *name;           /* the key in the component's table */
    const char *unit;           /* e.g. "TFLOP/s", "GB", "us"; "" for none */
    const char *default_value;  /* see default_kind */
    const char *range;          /* the values allowed, e.g. "> 0", "(0, 1]"; "" for any */
    const char *doc;            /* one line on what it means */
    const char *source;         /* where the default comes from (datasheet, paper, ...) */
} perfcast_param;

/* One component the plugin provides. */
typedef struct perfcast_component {
    uint32_t struct_size;
    uint32_t category;       /* PERFCAST_CATEGORY_* */
    const char *name;        /* namespaced registered name, e.g. "cvendor/dsp1" */
    const char *description; /* one line */
    /* REQUIRED. Build an instance from `params_json`, a NUL-terminated JSON object holding the
     * component's parameters (the host never passes `null`: no parameters is `{}`). Reject
     * unknown keys with PERFCAST_ERR_PARAMS and a message naming the key. */
    int32_t (*create)(const char *params_json, void **out_self, char *err, size_t err_cap);
    /* Optional. Free an instance. */
    void (*destroy)(void *self);
    /* REQUIRED. perfcast_compute_unit_vtable*, perfcast_memory_tier_vtable*, (1.1)
     * perfcast_interconnect_vtable*, (1.3) perfcast_pipeline_schedule_vtable* /
     * perfcast_recompute_policy_vtable*, (1.4) perfcast_parallel_strategy_vtable* or (1.5)
     * perfcast_topology_vtable* by category. */
    const void *vtable;
#if PERFCAST_PLUGIN_ABI_MINOR >= 2
    /* 1.2, optional. The component's parameters: an array of n_params pointers (pointers,
     * so perfcast_param can grow). `params == NULL` means "not declared"; a component that
     * takes no parameters declares that with n_params = 0 and a non-NULL `params`. */
    uint32_t n_params;
    uint32_t reserved1;
    const perfcast_param *const *params;
#endif
} perfcast_component;

/* What perfcast_plugin_entry_v1() returns. */
typedef struct perfcast_plugin {
    uint32_t struct_size;
    uint32_t abi_major;    /* PERFCAST_PLUGIN_ABI_MAJOR */
    uint32_t abi_minor;    /* PERFCAST_PLUGIN_ABI_MINOR the plugin was compiled with */
    uint32_t n_components; /* entries in `components` */
    const char *name;      /* plugin name, e.g. "cvendor" */
    const char *version;   /* plugin version, e.g. "1.4.2" */
    /* Array of n_components pointers (pointers, so perfcast_component can grow). */
    const perfcast_component *const *components;
} perfcast_plugin;

/* The entry point. Must be cheap and side-effect free; may be called more than once. */
typedef const perfcast_plugin *(*perfcast_plugin_entry_fn)(void);
#define PERFCAST_PLUGIN_ENTRY_SYMBOL "perfcast_plugin_entry_v1"

#ifdef __cplusplus
}
#endif

#endif /* PERFCAST_PLUGIN_H */
