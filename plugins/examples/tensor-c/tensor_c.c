/*
 * tensor_c.c -- perfcast's built-in `tensor` parallel strategy written against the C ABI (1.4),
 * as `example/tensor-c`: Megatron tensor parallelism (Shoeybi et al. 2019) with sequence
 * parallelism's collectives (Korthikanti et al. 2022). The test suite checks that it gives
 * bit-identical results to the compiled-in strategy (plugins/parallel/src/tensor.rs), so every
 * expression below is the Rust one, in the same order.
 *
 * Build, load, use (from the repository root):
 *
 *   cc -shared -fPIC -O2 -I crates/perfcast-abi/include plugins/examples/tensor-c/tensor_c.c -o libtensor_c.so
 *   cargo run --release -p perfcast-cli -- plugins --load ./libtensor_c.so --describe example/tensor-c
 *   cargo run --release -p perfcast-cli -- predict configs/experiments/gpt3-175b-a100.toml \
 *       --load ./libtensor_c.so \
 *       --set 'options.strategies=["example/tensor-c","sequence","context","expert","pipeline","data","zero"]'
 */
#include "perfcast_plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tensor {
    double overlap_efficiency; /* (0, 1], see the built-in's TensorParams */
} tensor;

static void set_err(char *err, size_t cap, const char *msg) { snprintf(err, cap, "%s", msg); }

/* Parse `{}` or `{"overlap_efficiency": x}` (a deliberately small reader for this one key). */
static int32_t tc_create(const char *json, void **out, char *err, size_t cap) {
    tensor *t = malloc(sizeof *t);
    if (!t) {
        set_err(err, cap, "out of memory");
        return PERFCAST_ERR_FAILED;
    }
    t->overlap_efficiency = 1.0;
    const char *p = json;
    while (*p == ' ' || *p == '{') p++;
    if (*p != '}' && *p != '\0') {
        const char *key = "\"overlap_efficiency\"";
        if (strncmp(p, key, strlen(key)) != 0) {
            set_err(err, cap, "unknown key (allowed: `overlap_efficiency`)");
            free(t);
            return PERFCAST_ERR_PARAMS;
        }
        p += strlen(key);
        while (*p == ' ' || *p == ':') p++;
        char *end = NULL;
        double v = strtod(p, &end);
        while (end && *end == ' ') end++;
        if (end == p || !end || *end != '}' || !(v > 0.0 && v <= 1.0)) {
            set_err(err, cap, "`overlap_efficiency` must be a number in (0, 1]");
            free(t);
            return PERFCAST_ERR_PARAMS;
        }
        t->overlap_efficiency = v;
    }
    *out = t;
    return PERFCAST_OK;
}

static void tc_destroy(void *self) { free(self); }

static int32_t tc_axis(const void *self, uint32_t *out, char *err, size_t cap) {
    (void)self;
    (void)err;
    (void)cap;
    *out = PERFCAST_AXIS_TENSOR;
    return PERFCAST_OK;
}

static int32_t tc_validate(const void *self, const perfcast_model *m, const perfcast_plan *plan,
                           char *err, size_t cap) {
    (void)self;
    uint64_t t = plan->tp;
    if (t == 0) {
        set_err(err, cap, "invalid `plan.tp`: must be a positive integer");
        return PERFCAST_ERR_FAILED;
    }
    if (m->heads % t != 0) {
        snprintf(err, cap, "invalid `plan.tp` = %u: must divide model.heads = %llu", plan->tp,
                 (unsigned long long)m->heads);
        return PERFCAST_ERR_FAILED;
    }
    if (!(m->kv_heads % t == 0 || t % m->kv_heads == 0)) {
        snprintf(err, cap,
                 "invalid `plan.tp` = %u: must divide model.kv_heads = %llu or be a multiple of "
                 "it (KV heads replicated)",
                 plan->tp, (unsigned long long)m->kv_heads);
        return PERFCAST_ERR_FAILED;
    }
    if (m->ffn_hidden % t != 0) {
        snprintf(err, cap, "invalid `plan.tp` = %u: must divide model.ffn_hidden = %llu",
                 plan->tp, (unsigned long long)m->ffn_hidden);
        return PERFCAST_ERR_FAILED;
    }
    return PERFCAST_OK;
}

static int32_t tc_split_layer(const void *self, const perfcast_plan *plan,
                              perfcast_layer_split *split, char *err, size_t cap) {
    (void)self;
    (void)err;
    (void)cap;
    split->weights *= plan->tp > 1 ? plan->tp : 1;
    return PERFCAST_OK;
}

/* The writer of collectives into the host's array. */
typedef struct writer {
    perfcast_comm_op *out;
    size_t cap, n;
} writer;

static int push(writer *w, uint32_t phase, uint32_t kind, double bytes, double count,
                uint32_t exposed, double efficiency, uint32_t with_recompute) {
    if (w->n == w->cap) return 0;
    perfcast_comm_op *o = &w->out[w->n++];
    uint32_t size = o->struct_size; /* preset by the host */
    memset(o, 0, size < sizeof *o ? size : sizeof *o);
    o->struct_size = size;
    o->klass = PERFCAST_CLASS_TENSOR;
    o->phase = phase;
    o->kind = kind;
    o->group = PERFCAST_GROUP_TENSOR;
    o->exposed = exposed;
    o->bytes = bytes;
    o->count = count;
    o->window = PERFCAST_WINDOW_LAYER_GEMMS;
    o->efficiency = efficiency;
    o->with_recompute = with_recompute;
    return 1;
}

static int32_t tc_comms(const void *self, const perfcast_plan *plan,
                        const perfcast_layer_dims *d, perfcast_comm_op *out, size_t cap,
                        size_t *n_out, char *err, size_t err_cap) {
    const tensor *t = self;
    writer w = {out, cap, 0};
    *n_out = 0;
    if (plan->tp <= 1) return PERFCAST_OK;
    double tokens = (double)d->micro_batch * (double)d->seq_len / (double)(plan->cp > 1 ? plan->cp : 1);
    double s = tokens * (double)d->hidden * d->act_bytes;
    double gathered = tokens * (double)d->hidden * d->gather_bytes;
    /* With overlap, the first of `tp` chunks is exposed, overlap_efficiency of the rest
     * behind the GEMMs. */
    double first = 1.0;
    if (plan->tp_comm_overlap) {
        double chunked = 1.0 - 1.0 / (double)plan->tp;
        double e = t->overlap_efficiency < 0.0 ? 0.0 : t->overlap_efficiency > 1.0 ? 1.0 : t->overlap_efficiency;
        first = 1.0 - chunked * e;
    }
    uint32_t behind = plan->tp_comm_overlap ? 0 : 1;
    int ok = 1;
    uint32_t phases[2] = {PERFCAST_PHASE_FORWARD, PERFCAST_PHASE_BACKWARD};
    for (int i = 0; i < 2; i++) {
        uint32_t ph = phases[i];
        uint32_t kinds[2];
        double bytes[2];
        int n;
        if (plan->sp) {
            kinds[0] = PERFCAST_COLLECTIVE_ALL_GATHER;
            bytes[0] = ph == PERFCAST_PHASE_FORWARD ? gathered : s;
            kinds[1] = PERFCAST_COLLECTIVE_REDUCE_SCATTER;
            bytes[1] = s;
            n = 2;
        } else {
            kinds[0] = PERFCAST_COLLECTIVE_ALL_REDUCE;
            bytes[0] = s;
            n = 1;
        }
        for (int k = 0; k < n; k++) {
            ok &= push(&w, ph, kinds[k], bytes[k] * first, 2.0, 1, 0.0, 1);
            if (first < 1.0)
                ok &= push(&w, ph, kinds[k], bytes[k] * (1.0 - first), 2.0, behind, 1.0, 1);
        }
    }
    if (plan->sp) {
        ok &= push(&w, PERFCAST_PHASE_EMBEDDING_FORWARD, PERFCAST_COLLECTIVE_REDUCE_SCATTER, s, 1.0, 1, 0.0, 0);
        ok &= push(&w, PERFCAST_PHASE_EMBEDDING_BACKWARD, PERFCAST_COLLECTIVE_ALL_GATHER, s, 1.0, 1, 0.0, 0);
        ok &= push(&w, PERFCAST_PHASE_HEAD_FORWARD, PERFCAST_COLLECTIVE_ALL_GATHER, s, 1.0, 1, 0.0, 0);
        ok &= push(&w, PERFCAST_PHASE_HEAD_BACKWARD, PERFCAST_COLLECTIVE_REDUCE_SCATTER, s, 1.0, 1, 0.0, 0);
    } else {
        ok &= push(&w, PERFCAST_PHASE_EMBEDDING_FORWARD, PERFCAST_COLLECTIVE_ALL_REDUCE, s, 1.0, 1, 0.0, 0);
        ok &= push(&w, PERFCAST_PHASE_HEAD_BACKWARD, PERFCAST_COLLECTIVE_ALL_REDUCE, s, 1.0, 1, 0.0, 0);
    }
    double loss = tokens * 4.0;
    ok &= push(&w, PERFCAST_PHASE_HEAD_FORWARD, PERFCAST_COLLECTIVE_ALL_REDUCE, loss, 3.0, 1, 0.0, 0);
    if (!ok) {
        set_err(err, err_cap, "the host's collective array is full");
        return PERFCAST_ERR_FAILED;
    }
    *n_out = w.n;
    return PERFCAST_OK;
}

static const perfcast_parallel_strategy_vtable tc_vt = {
    .struct_size = sizeof(perfcast_parallel_strategy_vtable),
    .axis = tc_axis,
    .validate = tc_validate,
    .split_layer = tc_split_layer,
    .split_state = NULL,
    .comms = tc_comms,
};

static const perfcast_param overlap = {
    .struct_size = sizeof(perfcast_param),
    .type = PERFCAST_PARAM_FLOAT,
    .default_kind = PERFCAST_DEFAULT_VALUE,
    .name = "overlap_efficiency",
    .unit = "",
    .default_value = "1.0",
    .range = "(0, 1]",
    .doc = "with plan.tp_comm_overlap: fraction of the TP collectives' chunks after the first that hides behind the layer's GEMMs",
    .source = "as the built-in tensor (Wang et al. 2022, ASPLOS'23)",
};
static const perfcast_param *const tc_params[] = {&overlap};

static const perfcast_component tc_comp = {
    .struct_size = sizeof(perfcast_component),
    .category = PERFCAST_CATEGORY_PARALLEL_STRATEGY,
    .name = "example/tensor-c",
    .description = "perfcast's built-in tensor parallelism, written against the C ABI (for the tests)",
    .create = tc_create,
    .destroy = tc_destroy,
    .vtable = &tc_vt,
    .n_params = 1,
    .params = tc_params,
};

static const perfcast_component *const comps[] = {&tc_comp};

static const perfcast_plugin plugin = {
    .struct_size = sizeof(perfcast_plugin),
    .abi_major = PERFCAST_PLUGIN_ABI_MAJOR,
    .abi_minor = PERFCAST_PLUGIN_ABI_MINOR,
    .n_components = 1,
    .name = "example-tensor-c",
    .version = "0.1.0",
    .components = comps,
};

const perfcast_plugin *perfcast_plugin_entry_v1(void) { return &plugin; }
