/*
 * sqrt_checkpoint.c -- an example third-party activation-recompute policy for perfcast, in C
 * (C ABI 1.3).
 *
 *   example/sqrt-checkpoint  segment checkpointing of Chen et al. 2016, "Training Deep Nets
 *                            with Sublinear Memory Cost" (arXiv:1604.06174), section 3: the
 *                            layers of a stage are cut into segments of k layers; only each
 *                            segment's input is kept, and the backward reruns a segment's
 *                            forward before going through it, so the stage keeps ceil(L/k)
 *                            layer inputs plus, while one segment runs its backward, that
 *                            segment's k layers of activations: O(L/k + k) memory, O(sqrt L)
 *                            at k = sqrt(L), for one extra forward (as full recompute).
 *                            Parameter `segment_layers` (default: ceil(sqrt(L)) per stage).
 *   example/full-c           perfcast's built-in `full` in C: the tests check that it gives
 *                            results bit-identical to the compiled-in policy.
 *
 * Build, load, use (from the repository root):
 *
 *   cc -shared -fPIC -O2 -I crates/perfcast-abi/include plugins/examples/sqrt-checkpoint/sqrt_checkpoint.c -o libsqrt_checkpoint.so -lm
 *   cargo run --release -p perfcast-cli -- plugins --load ./libsqrt_checkpoint.so --describe example/sqrt-checkpoint
 *   cargo run --release -p perfcast-cli -- predict configs/experiments/gpt3-175b-a100.toml \
 *       --load ./libsqrt_checkpoint.so --set 'plan.recompute="example/sqrt-checkpoint"'
 */
#include "perfcast_plugin.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sq {
    uint32_t segment; /* 0: ceil(sqrt(layers)) */
} sq;

static void set_err(char *err, size_t cap, const char *msg) { snprintf(err, cap, "%s", msg); }

/* `{}` or `{"segment_layers": n}` (a small reader for this one key). */
static int32_t sq_create(const char *json, void **out, char *err, size_t cap) {
    sq *s = malloc(sizeof *s);
    if (!s) {
        set_err(err, cap, "out of memory");
        return PERFCAST_ERR_FAILED;
    }
    s->segment = 0;
    const char *p = json;
    while (*p == ' ' || *p == '{') p++;
    if (*p != '}' && *p != '\0') {
        const char *key = "\"segment_layers\"";
        if (strncmp(p, key, strlen(key)) != 0) {
            set_err(err, cap, "unknown key (allowed: `segment_layers`)");
            free(s);
            return PERFCAST_ERR_PARAMS;
        }
        p += strlen(key);
        while (*p == ' ' || *p == ':') p++;
        char *end = NULL;
        double v = strtod(p, &end);
        while (end && *end == ' ') end++;
        if (end == p || !end || *end != '}' || !(v >= 1.0 && v <= 1e6) || v != floor(v)) {
            set_err(err, cap, "`segment_layers` must be a whole number of layers >= 1");
            free(s);
            return PERFCAST_ERR_PARAMS;
        }
        s->segment = (uint32_t)v;
    }
    *out = s;
    return PERFCAST_OK;
}

static void sq_destroy(void *self) { free(self); }

static int32_t no_params(const char *json, void **out, char *err, size_t cap) {
    const char *p = json;
    while (*p == ' ' || *p == '{') p++;
    if (*p != '}' && *p != '\0') {
        set_err(err, cap, "`example/full-c` takes no parameters");
        return PERFCAST_ERR_PARAMS;
    }
    *out = NULL;
    return PERFCAST_OK;
}

static double total(const perfcast_layer_activations *a) {
    return a->input + a->attention_core + a->other;
}

static int32_t sq_plan(const void *self, const perfcast_layer_activations *act, uint32_t layers,
                       uint32_t recompute_layers, perfcast_recompute_plan *out, char *err,
                       size_t cap) {
    const sq *s = self;
    if (recompute_layers != 0) {
        set_err(err, cap,
                "example/sqrt-checkpoint reruns every layer: leave plan.recompute_layers unset");
        return PERFCAST_ERR_FAILED;
    }
    if (layers == 0) {
        out->full_layers = 0.0;
        out->attention_layers = 0.0;
        out->kept = 0.0;
        out->working = 0.0;
        return PERFCAST_OK;
    }
    uint32_t k = s->segment ? s->segment : (uint32_t)ceil(sqrt((double)layers));
    if (k > layers) k = layers;
    uint32_t segments = (layers + k - 1) / k;
    out->full_layers = layers;
    out->attention_layers = 0.0;
    out->kept = act->input * segments;
    /* The segment being rebuilt: its layers' activations (the first of them is a kept input). */
    out->working = total(act) * k;
    return PERFCAST_OK;
}

/* The built-in `full`: n = recompute_layers (all when 0) keep their input, the rest all. */
static int32_t full_plan(const void *self, const perfcast_layer_activations *act,
                         uint32_t layers, uint32_t recompute_layers,
                         perfcast_recompute_plan *out, char *err, size_t cap) {
    (void)self;
    uint32_t n = recompute_layers ? recompute_layers : layers;
    if (n > layers) {
        snprintf(err, cap, "plan.recompute_layers = %u: must be in 1..=%u", n, layers);
        return PERFCAST_ERR_FAILED;
    }
    double kept_layers = (double)(layers - n);
    out->full_layers = (double)n;
    out->attention_layers = 0.0;
    out->kept = act->input * (double)n + total(act) * kept_layers;
    out->working = total(act);
    return PERFCAST_OK;
}

static const perfcast_recompute_policy_vtable sq_vt = {
    .struct_size = sizeof(perfcast_recompute_policy_vtable),
    .plan = sq_plan,
};
static const perfcast_recompute_policy_vtable full_vt = {
    .struct_size = sizeof(perfcast_recompute_policy_vtable),
    .plan = full_plan,
};

static const perfcast_param segment = {
    .struct_size = sizeof(perfcast_param),
    .type = PERFCAST_PARAM_INTEGER,
    .default_kind = PERFCAST_DEFAULT_DERIVED,
    .name = "segment_layers",
    .unit = "layers",
    .default_value = "ceil(sqrt(layers of the stage))",
    .range = ">= 1",
    .doc = "layers per checkpointed segment (only each segment's input is kept)",
    .source = "Chen et al. 2016 (arXiv:1604.06174): sqrt(n) segments minimise memory",
};
static const perfcast_param *const sq_params[] = {&segment};

static const perfcast_component sq_comp = {
    .struct_size = sizeof(perfcast_component),
    .category = PERFCAST_CATEGORY_RECOMPUTE_POLICY,
    .name = "example/sqrt-checkpoint",
    .description = "segment checkpointing (Chen et al. 2016): keep one input per segment of layers",
    .create = sq_create,
    .destroy = sq_destroy,
    .vtable = &sq_vt,
    .n_params = 1,
    .params = sq_params,
};

static const perfcast_param *const no_param_list[] = {NULL};
static const perfcast_component full_comp = {
    .struct_size = sizeof(perfcast_component),
    .category = PERFCAST_CATEGORY_RECOMPUTE_POLICY,
    .name = "example/full-c",
    .description = "perfcast's built-in full recompute, written against the C ABI (for the tests)",
    .create = no_params,
    .vtable = &full_vt,
    .n_params = 0,
    .params = no_param_list,
};

static const perfcast_component *const comps[] = {&sq_comp, &full_comp};

static const perfcast_plugin plugin = {
    .struct_size = sizeof(perfcast_plugin),
    .abi_major = PERFCAST_PLUGIN_ABI_MAJOR,
    .abi_minor = PERFCAST_PLUGIN_ABI_MINOR,
    .n_components = 2,
    .name = "example-recompute",
    .version = "0.1.0",
    .components = comps,
};

const perfcast_plugin *perfcast_plugin_entry_v1(void) { return &plugin; }
