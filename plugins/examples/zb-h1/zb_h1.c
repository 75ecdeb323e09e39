/*
 * zb_h1.c -- an example third-party pipeline schedule for perfcast, in C (C ABI 1.3).
 *
 * Two schedules:
 *
 *   example/zb-h1   ZB-H1 of Qi et al. 2023, "Zero Bubble Pipeline Parallelism"
 *                   (arXiv:2401.10241, ICLR 2024), section 3.1: the backward of each
 *                   micro-batch is split into B (the input gradient, on the critical path) and
 *                   W (the weight gradient, free to move), and the W passes fill the
 *                   1F1B schedule's cool-down. At the memory of 1F1B (stage i holds at most
 *                   p - i micro-batches) the bubble shrinks from 1F1B's (p - 1)(T_F + T_B + T_W)
 *                   to (p - 1)(T_F + T_B - T_W). perfcast gives the backward T_B + T_W as one
 *                   time; `weight_grad_share` is the W part of it (default 1/2: the paper's
 *                   profiled T_F ~ T_B ~ T_W, a backward twice the forward split evenly).
 *   example/1f1b-c  perfcast's built-in `1f1b` written against the C ABI: the test suite
 *                   checks that it gives bit-identical results to the compiled-in schedule.
 *
 * Build, load, use (from the repository root):
 *
 *   cc -shared -fPIC -O2 -I crates/perfcast-abi/include plugins/examples/zb-h1/zb_h1.c -o libzb_h1.so
 *   cargo run --release -p perfcast-cli -- plugins --load ./libzb_h1.so --describe example/zb-h1
 *   cargo run --release -p perfcast-cli -- predict configs/experiments/gpt3-175b-a100.toml \
 *       --load ./libzb_h1.so --set 'plan.schedule="example/zb-h1"'
 */
#include "perfcast_plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct zb {
    double w_share; /* W's share of the backward, [0, 1/2] */
} zb;

static void set_err(char *err, size_t cap, const char *msg) {
    snprintf(err, cap, "%s", msg);
}

/* Parse `{}` or `{"weight_grad_share": x}`: a deliberately small reader for this one key
 * (a real plugin would use a JSON library). */
static int32_t zb_create(const char *json, void **out, char *err, size_t cap) {
    zb *z = malloc(sizeof *z);
    if (!z) {
        set_err(err, cap, "out of memory");
        return PERFCAST_ERR_FAILED;
    }
    z->w_share = 0.5;
    const char *p = json;
    while (*p == ' ' || *p == '{') p++;
    if (*p != '}' && *p != '\0') {
        const char *key = "\"weight_grad_share\"";
        if (strncmp(p, key, strlen(key)) != 0) {
            set_err(err, cap, "unknown key (allowed: `weight_grad_share`)");
            free(z);
            return PERFCAST_ERR_PARAMS;
        }
        p += strlen(key);
        while (*p == ' ' || *p == ':') p++;
        char *end = NULL;
        double v = strtod(p, &end);
        while (end && *end == ' ') end++;
        if (end == p || !end || *end != '}' || !(v >= 0.0 && v <= 0.5)) {
            set_err(err, cap, "`weight_grad_share` must be a number in [0, 0.5]");
            free(z);
            return PERFCAST_ERR_PARAMS;
        }
        z->w_share = v;
    }
    *out = z;
    return PERFCAST_OK;
}

static void zb_destroy(void *self) { free(self); }

static int32_t no_params(const char *json, void **out, char *err, size_t cap) {
    const char *p = json;
    while (*p == ' ' || *p == '{') p++;
    if (*p != '}' && *p != '\0') {
        set_err(err, cap, "`example/1f1b-c` takes no parameters");
        return PERFCAST_ERR_PARAMS;
    }
    *out = NULL;
    return PERFCAST_OK;
}

static int32_t counts_ok(const perfcast_schedule_input *in, char *err, size_t cap) {
    if (in->stages == 0 || in->micro_batches == 0 || in->virtual_stages == 0) {
        set_err(err, cap, "pipeline stages, virtual stages and micro-batches must be positive");
        return PERFCAST_ERR_FAILED;
    }
    return PERFCAST_OK;
}

/* Both schedules run one model chunk per device. */
static int32_t one_chunk(const void *self, const perfcast_schedule_input *in, char *err,
                         size_t cap) {
    (void)self;
    if (in->virtual_stages > 1) {
        set_err(err, cap, "one model chunk per device: set plan.vpp = 1");
        return PERFCAST_ERR_FAILED;
    }
    return PERFCAST_OK;
}

/* 1F1B's peak: stage i holds min(p - i, m) micro-batches (at least 1). ZB-H1 keeps it. */
static int32_t in_flight(const void *self, const perfcast_schedule_input *in, uint32_t stage,
                         double *out, char *err, size_t cap) {
    (void)self;
    (void)err;
    (void)cap;
    uint32_t left = in->stages > stage ? in->stages - stage : 0;
    if (left < 1) left = 1;
    uint32_t m = in->micro_batches > 1 ? in->micro_batches : 1;
    *out = (double)(left < m ? left : m);
    return PERFCAST_OK;
}

/* Blocking hand-offs as perfcast's built-in flushed schedules: each of the m + p - 1 slots of
 * a stage waits for one forward and one backward hand-off. */
static double hand_offs(const perfcast_schedule_input *in, double p, double m) {
    return in->stages > 1 ? 2.0 * (1.0 * m + p - 1.0) : 0.0;
}

static int32_t onefoneb_step(const void *self, const perfcast_schedule_input *in,
                             perfcast_schedule_result *out, char *err, size_t cap) {
    int32_t rc = counts_ok(in, err, cap);
    if (rc != PERFCAST_OK) return rc;
    double p = in->stages, m = in->micro_batches;
    double slot = in->forward + in->backward;
    double bubble = slot * ((p - 1.0) / 1.0);
    double p2p = in->p2p * hand_offs(in, p, m);
    out->time = slot * m + bubble + p2p;
    out->bubble = bubble;
    out->p2p = p2p;
    return in_flight(self, in, 0, &out->peak_in_flight, err, cap);
}

static int32_t zb_step(const void *self, const perfcast_schedule_input *in,
                       perfcast_schedule_result *out, char *err, size_t cap) {
    int32_t rc = counts_ok(in, err, cap);
    if (rc != PERFCAST_OK) return rc;
    const zb *z = self;
    double p = in->stages, m = in->micro_batches;
    double t_w = z->w_share * in->backward;
    double t_b = in->backward - t_w;
    double idle = in->forward + t_b - t_w; /* >= 0: t_w <= t_b */
    double bubble = (p - 1.0) * idle;
    double p2p = in->p2p * hand_offs(in, p, m);
    out->time = (in->forward + in->backward) * m + bubble + p2p;
    out->bubble = bubble;
    out->p2p = p2p;
    return in_flight(self, in, 0, &out->peak_in_flight, err, cap);
}

static const perfcast_pipeline_schedule_vtable zb_vt = {
    .struct_size = sizeof(perfcast_pipeline_schedule_vtable),
    .step = zb_step,
    .in_flight = in_flight,
    .validate = one_chunk,
};

static const perfcast_pipeline_schedule_vtable onefoneb_vt = {
    .struct_size = sizeof(perfcast_pipeline_schedule_vtable),
    .step = onefoneb_step,
    .in_flight = in_flight,
    .validate = one_chunk,
};

static const perfcast_param w_share = {
    .struct_size = sizeof(perfcast_param),
    .type = PERFCAST_PARAM_FLOAT,
    .default_kind = PERFCAST_DEFAULT_VALUE,
    .name = "weight_grad_share",
    .unit = "",
    .default_value = "0.5",
    .range = "[0, 0.5]",
    .doc = "share of each backward that is the weight-gradient pass W (T_W / (T_B + T_W))",
    .source = "Qi et al. 2023 (arXiv:2401.10241) profile T_F ~ T_B ~ T_W",
};
static const perfcast_param *const zb_params[] = {&w_share};

static const perfcast_component zb_comp = {
    .struct_size = sizeof(perfcast_component),
    .category = PERFCAST_CATEGORY_PIPELINE_SCHEDULE,
    .name = "example/zb-h1",
    .description = "ZB-H1 zero-bubble schedule (Qi et al. 2023): W passes fill 1F1B's bubble",
    .create = zb_create,
    .destroy = zb_destroy,
    .vtable = &zb_vt,
    .n_params = 1,
    .params = zb_params,
};

static const perfcast_param *const no_param_list[] = {NULL};
static const perfcast_component onefoneb_comp = {
    .struct_size = sizeof(perfcast_component),
    .category = PERFCAST_CATEGORY_PIPELINE_SCHEDULE,
    .name = "example/1f1b-c",
    .description = "perfcast's built-in 1F1B, written against the C ABI (for the tests)",
    .create = no_params,
    .destroy = NULL,
    .vtable = &onefoneb_vt,
    .n_params = 0,
    .params = no_param_list,
};

static const perfcast_component *const comps[] = {&zb_comp, &onefoneb_comp};

static const perfcast_plugin plugin = {
    .struct_size = sizeof(perfcast_plugin),
    .abi_major = PERFCAST_PLUGIN_ABI_MAJOR,
    .abi_minor = PERFCAST_PLUGIN_ABI_MINOR,
    .n_components = 2,
    .name = "example-schedules",
    .version = "0.1.0",
    .components = comps,
};

const perfcast_plugin *perfcast_plugin_entry_v1(void) { return &plugin; }
