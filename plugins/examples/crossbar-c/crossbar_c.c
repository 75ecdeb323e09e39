/*
 * crossbar_c.c -- an example network topology for perfcast in C (C ABI 1.5): `example/crossbar-c`,
 * every network level a non-blocking crossbar (full bisection, no link shared between groups).
 * A group runs its collective as a ring on the innermost level one of whose domains holds it
 * (the span of its members, sum of (degree - 1) x stride + 1, within the level's domain size),
 * else on the last level (the NIC), with the alpha-beta cost of a ring:
 *
 *     time = overhead + steps x latency + factor x bytes / bandwidth
 *
 * all-reduce: steps 2(p - 1), factor 2(p - 1)/p; all-gather, reduce-scatter, all-to-all:
 * p - 1 and (p - 1)/p; send/recv: 1 and 1; broadcast: p - 1 and 1 (Thakur et al. 2005; NCCL's
 * bus-bandwidth factors), p the ranks of the group. Links: one class per level, one link per
 * device. A crossbar shares nothing, so a collective reports no link loads.
 *
 * Build, load, use (from the repository root):
 *
 *   cc -shared -fPIC -O2 -I crates/perfcast-abi/include plugins/examples/crossbar-c/crossbar_c.c -o libcrossbar_c.so
 *   cargo run --release -p perfcast-cli -- plugins --load ./libcrossbar_c.so --describe example/crossbar-c
 *   cargo run --release -p perfcast-cli -- predict configs/experiments/gpt3-175b-a100.toml \
 *       --load ./libcrossbar_c.so --set 'components.xbar.kind="example/crossbar-c"' \
 *       --set 'system.topology="xbar"'
 */
#include "perfcast_plugin.h"

#include <stdio.h>
#include <string.h>

static void set_err(char *err, size_t cap, const char *msg) { snprintf(err, cap, "%s", msg); }

static int32_t xb_create(const char *json, void **out, char *err, size_t cap) {
    const char *p = json;
    while (*p == ' ' || *p == '{') p++;
    if (*p != '}' && *p != '\0') {
        set_err(err, cap, "`example/crossbar-c` takes no parameters");
        return PERFCAST_ERR_PARAMS;
    }
    *out = NULL;
    return PERFCAST_OK;
}

static int32_t xb_check(const void *self, const perfcast_level *levels, size_t n, uint64_t devices,
                        char *err, size_t cap) {
    (void)self;
    (void)devices;
    if (n == 0) {
        set_err(err, cap, "a crossbar needs at least one network level");
        return PERFCAST_ERR_FAILED;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(levels[i].bandwidth > 0.0)) {
            set_err(err, cap, "every level needs a positive bandwidth");
            return PERFCAST_ERR_FAILED;
        }
    }
    return PERFCAST_OK;
}

static int32_t xb_links(const void *self, const perfcast_level *levels, size_t n, uint64_t devices,
                        perfcast_link_class *out, size_t cap, size_t *n_out, char *err,
                        size_t err_cap) {
    (void)self;
    if (n > cap) {
        set_err(err, err_cap, "more levels than the host's array of link classes");
        return PERFCAST_ERR_FAILED;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(out[i].name, sizeof out[i].name, "level-%zu", i);
        out[i].count = (double)devices;
        out[i].bandwidth = levels[i].bandwidth;
    }
    *n_out = n;
    return PERFCAST_OK;
}

static int32_t xb_collective(const void *self, const perfcast_level *levels, size_t n_levels,
                             const perfcast_group_axis *axes, size_t n_axes, uint64_t devices,
                             uint32_t kind, double bytes, double *out_time,
                             perfcast_link_load *loads, size_t cap, size_t *n_loads, char *err,
                             size_t err_cap) {
    (void)self;
    (void)devices;
    (void)loads;
    (void)cap;
    if (n_levels == 0) {
        set_err(err, err_cap, "no network level");
        return PERFCAST_ERR_FAILED;
    }
    uint64_t ranks = 1, span = 1;
    for (size_t i = 0; i < n_axes; i++) {
        ranks *= axes[i].degree;
        span += (axes[i].degree - 1) * axes[i].stride;
    }
    size_t at = n_levels - 1;
    for (size_t i = 0; i < n_levels; i++) {
        if (span <= levels[i].domain_size) {
            at = i;
            break;
        }
    }
    const perfcast_level *l = &levels[at];
    double p = (double)ranks, steps, factor;
    switch (kind) {
    case PERFCAST_COLLECTIVE_ALL_REDUCE:
        steps = 2.0 * (p - 1.0);
        factor = 2.0 * (p - 1.0) / p;
        break;
    case PERFCAST_COLLECTIVE_ALL_GATHER:
    case PERFCAST_COLLECTIVE_REDUCE_SCATTER:
    case PERFCAST_COLLECTIVE_ALL_TO_ALL:
        steps = p - 1.0;
        factor = (p - 1.0) / p;
        break;
    case PERFCAST_COLLECTIVE_SEND_RECV:
        steps = 1.0;
        factor = 1.0;
        break;
    case PERFCAST_COLLECTIVE_BROADCAST:
        steps = p - 1.0;
        factor = ranks > 1 ? 1.0 : 0.0;
        break;
    default:
        set_err(err, err_cap, "unknown collective kind");
        return PERFCAST_ERR_UNSUPPORTED;
    }
    *out_time = ranks <= 1 ? 0.0 : l->overhead + steps * l->latency + factor * bytes / l->bandwidth;
    *n_loads = 0;
    return PERFCAST_OK;
}

static const perfcast_topology_vtable xb_vt = {
    .struct_size = sizeof(perfcast_topology_vtable),
    .check = xb_check,
    .links = xb_links,
    .collective = xb_collective,
};

static const perfcast_param *const no_params[] = {NULL};

static const perfcast_component xb_comp = {
    .struct_size = sizeof(perfcast_component),
    .category = PERFCAST_CATEGORY_TOPOLOGY,
    .name = "example/crossbar-c",
    .description = "every level a non-blocking crossbar: a ring on the innermost level that holds the group (C ABI 1.5)",
    .create = xb_create,
    .destroy = NULL,
    .vtable = &xb_vt,
    .n_params = 0,
    .params = no_params,
};

static const perfcast_component *const comps[] = {&xb_comp};

static const perfcast_plugin plugin = {
    .struct_size = sizeof(perfcast_plugin),
    .abi_major = PERFCAST_PLUGIN_ABI_MAJOR,
    .abi_minor = PERFCAST_PLUGIN_ABI_MINOR,
    .n_components = 1,
    .name = "example-crossbar-c",
    .version = "0.1.0",
    .components = comps,
};

const perfcast_plugin *perfcast_plugin_entry_v1(void) { return &plugin; }
