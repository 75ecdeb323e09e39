/*
 * c_vendor.c -- example perfcast C plugin (a FICTIONAL vendor "cvendor"; its numbers are made
 * up for the example and cite nothing).
 *
 * Components:
 *   cvendor/dsp1   compute unit: a DSP with a MAC array and a vector unit.
 *   cvendor/lpddr  memory tier: LPDDR attached to the DSP.
 *   cvendor/ring   interconnect (ABI 1.1 builds only): a DSP-to-DSP ring.
 *
 * Model of cvendor/dsp1 (what the loader's end-to-end test recomputes):
 *   peak:  matrix bf16/fp16 = bf16_tflops * 1e12; matrix fp8/int8 = int8_tops * 1e12 when
 *          int8_tops > 0; no fp32/tf32/4-bit matrix path; vector (any dtype) = vector_gflops * 1e9.
 *   efficiency: matrix ops mac_efficiency, vector ops 1.
 *   launch overhead: launch_us * 1e-6 s.
 *   op_time (ABI 1.1 builds only): the DSP has one blocking DMA engine, so transfers do NOT
 *   overlap compute:
 *       compute = flops / (peak * efficiency)
 *       memory  = max over tiers (min_bytes / (bandwidth * efficiency) + latency)
 *       time    = compute + memory + launch_us * 1e-6 * launches
 *   A 1.0 build (-DPERFCAST_PLUGIN_ABI_MINOR=0) has no op_time, so the host times its ops with
 *   perfcast's hierarchical roofline (overlapped) from peak/efficiency/launch overhead.
 *
 * Model of cvendor/lpddr: bandwidth = channels * bus_bits / 8 * mts * 1e6 bytes/s,
 * capacity = capacity_gib GiB, level = device.
 *
 * Model of cvendor/ring: the fabric is a physical ring, so every collective runs the ring
 * algorithm whatever the host asks for (Thakur, Rabenseifner & Gropp 2005):
 *     time = steps * latency + factor * bytes / bandwidth
 *     all-reduce: steps 2(p-1), factor 2(p-1)/p; all-gather, reduce-scatter, all-to-all:
 *     steps p-1, factor (p-1)/p; send/recv: 1, 1; broadcast: p-1, 1.
 * with bandwidth = bandwidth_gbs * 1e9 B/s and latency = latency_us * 1e-6 s; more ranks than
 * domain_size is an error.
 *
 * Parameters arrive as a flat JSON object of numbers (true/false read as 1/0); this file has
 * its own tiny parser and rejects unknown keys, naming them.
 *
 * Test knobs: fail_in_op_time = 1 makes op_time return an error; nan_efficiency = 1 makes
 * efficiency return NaN.
 *
 * Build:  cc -shared -fPIC -O2 -I crates/perfcast-abi/include plugins/examples/c-vendor/c_vendor.c \
 *            -o libc_vendor.so
 */
#include "perfcast_plugin.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CVENDOR_VERSION "1.2.0"

static void set_err(char *err, size_t cap, const char *fmt, ...) {
    if (!err || cap == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* ---- a tiny flat-JSON parser ------------------------------------------------------------ */

typedef struct param_spec {
    const char *key;
    double *dst;
    int required;
    int seen;
} param_spec;

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

static int known_keys(const param_spec *specs, size_t n, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", specs[i].key);
        if (w < 0 || (size_t)w >= cap - used) break;
        used += (size_t)w;
    }
    return 0;
}

/* Parse `{"key": number, ...}` into `specs`. Returns PERFCAST_OK or PERFCAST_ERR_PARAMS. */
static int parse_params(const char *json, const char *component, param_spec *specs, size_t n,
                        char *err, size_t cap) {
    const char *p = skip_ws(json ? json : "{}");
    if (*p != '{') {
        set_err(err, cap, "%s: parameters must be a JSON object", component);
        return PERFCAST_ERR_PARAMS;
    }
    p = skip_ws(p + 1);
    if (*p == '}') goto done;
    for (;;) {
        char key[64];
        size_t len = 0;
        if (*p != '"') {
            set_err(err, cap, "%s: expected a key at `%.20s`", component, p);
            return PERFCAST_ERR_PARAMS;
        }
        p++;
        while (*p && *p != '"') {
            if (*p == '\\' || len + 1 >= sizeof key) {
                set_err(err, cap, "%s: unsupported key near `%.20s`", component, p);
                return PERFCAST_ERR_PARAMS;
            }
            key[len++] = *p++;
        }
        key[len] = 0;
        if (*p != '"') {
            set_err(err, cap, "%s: unterminated key", component);
            return PERFCAST_ERR_PARAMS;
        }
        p = skip_ws(p + 1);
        if (*p != ':') {
            set_err(err, cap, "%s: expected `:` after key `%s`", component, key);
            return PERFCAST_ERR_PARAMS;
        }
        p = skip_ws(p + 1);
        param_spec *spec = NULL;
        for (size_t i = 0; i < n; i++)
            if (strcmp(specs[i].key, key) == 0) spec = &specs[i];
        if (!spec) {
            char known[512];
            known_keys(specs, n, known, sizeof known);
            set_err(err, cap, "%s: unknown parameter `%s`; expected one of %s", component, key,
                    known);
            return PERFCAST_ERR_PARAMS;
        }
        double v;
        if (strncmp(p, "true", 4) == 0) {
            v = 1.0;
            p += 4;
        } else if (strncmp(p, "false", 5) == 0) {
            v = 0.0;
            p += 5;
        } else {
            char *end = NULL;
            v = strtod(p, &end);
            if (end == p) {
                set_err(err, cap, "%s: parameter `%s` must be a number", component, key);
                return PERFCAST_ERR_PARAMS;
            }
            p = end;
        }
        *spec->dst = v;
        spec->seen = 1;
        p = skip_ws(p);
        if (*p == ',') {
            p = skip_ws(p + 1);
            continue;
        }
        if (*p == '}') break;
        set_err(err, cap, "%s: expected `,` or `}` after parameter `%s`", component, key);
        return PERFCAST_ERR_PARAMS;
    }
done:
    for (size_t i = 0; i < n; i++) {
        if (specs[i].required && !specs[i].seen) {
            set_err(err, cap, "%s: missing parameter `%s`", component, specs[i].key);
            return PERFCAST_ERR_PARAMS;
        }
    }
    return PERFCAST_OK;
}

static int check_positive(const char *component, const char *key, double v, char *err,
                          size_t cap) {
    if (!(v > 0.0) || isinf(v)) {
        set_err(err, cap, "%s: parameter `%s` must be a finite number > 0, got %g", component,
                key, v);
        return PERFCAST_ERR_PARAMS;
    }
    return PERFCAST_OK;
}

/* ---- cvendor/dsp1 ------------------------------------------------------------------------ */

typedef struct dsp1 {
    double bf16_tflops, int8_tops, vector_gflops, mac_efficiency, launch_us, tile;
    double fail_in_op_time, nan_efficiency;
} dsp1;

static int dsp1_create(const char *json, void **out, char *err, size_t cap) {
    dsp1 d = {0};
    d.mac_efficiency = 0.85;
    d.launch_us = 5.0;
    d.tile = 64.0;
    param_spec specs[] = {
        {"bf16_tflops", &d.bf16_tflops, 1, 0},
        {"int8_tops", &d.int8_tops, 0, 0},
        {"vector_gflops", &d.vector_gflops, 1, 0},
        {"mac_efficiency", &d.mac_efficiency, 0, 0},
        {"launch_us", &d.launch_us, 0, 0},
        {"tile", &d.tile, 0, 0},
        {"fail_in_op_time", &d.fail_in_op_time, 0, 0},
        {"nan_efficiency", &d.nan_efficiency, 0, 0},
    };
    int rc = parse_params(json, "cvendor/dsp1", specs, sizeof specs / sizeof specs[0], err, cap);
    if (rc) return rc;
    if ((rc = check_positive("cvendor/dsp1", "bf16_tflops", d.bf16_tflops, err, cap))) return rc;
    if ((rc = check_positive("cvendor/dsp1", "vector_gflops", d.vector_gflops, err, cap)))
        return rc;
    if ((rc = check_positive("cvendor/dsp1", "tile", d.tile, err, cap))) return rc;
    if (!(d.mac_efficiency > 0.0 && d.mac_efficiency <= 1.0)) {
        set_err(err, cap, "cvendor/dsp1: parameter `mac_efficiency` must be in (0, 1], got %g",
                d.mac_efficiency);
        return PERFCAST_ERR_PARAMS;
    }
    if (!(d.launch_us >= 0.0) || isinf(d.launch_us) || !(d.int8_tops >= 0.0)) {
        set_err(err, cap, "cvendor/dsp1: `launch_us` and `int8_tops` must be finite and >= 0");
        return PERFCAST_ERR_PARAMS;
    }
    dsp1 *heap = malloc(sizeof *heap);
    if (!heap) {
        set_err(err, cap, "cvendor/dsp1: out of memory");
        return PERFCAST_ERR_FAILED;
    }
    *heap = d;
    *out = heap;
    return PERFCAST_OK;
}

static int dsp1_peak(const void *self, uint32_t engine, uint32_t dtype, double *out, char *err,
                     size_t cap) {
    const dsp1 *d = self;
    if (engine == PERFCAST_ENGINE_VECTOR) {
        *out = d->vector_gflops * 1e9;
        return PERFCAST_OK;
    }
    if (engine == PERFCAST_ENGINE_MATRIX) {
        switch (dtype) {
        case PERFCAST_DTYPE_BF16:
        case PERFCAST_DTYPE_FP16:
            *out = d->bf16_tflops * 1e12;
            return PERFCAST_OK;
        case PERFCAST_DTYPE_FP8:
        case PERFCAST_DTYPE_INT8:
            if (d->int8_tops > 0.0) {
                *out = d->int8_tops * 1e12;
                return PERFCAST_OK;
            }
            break;
        default:
            break;
        }
    }
    set_err(err, cap, "cvendor/dsp1 has no engine %u path for dtype %u", engine, dtype);
    return PERFCAST_ERR_UNSUPPORTED;
}

static int dsp1_efficiency(const void *self, const perfcast_op *op, double *out, char *err,
                           size_t cap) {
    const dsp1 *d = self;
    (void)err;
    (void)cap;
    if (d->nan_efficiency != 0.0) {
        *out = NAN;
        return PERFCAST_OK;
    }
    *out = op->engine == PERFCAST_ENGINE_MATRIX ? d->mac_efficiency : 1.0;
    return PERFCAST_OK;
}

static int dsp1_launch_overhead(const void *self, double *out, char *err, size_t cap) {
    (void)err;
    (void)cap;
    *out = ((const dsp1 *)self)->launch_us * 1e-6;
    return PERFCAST_OK;
}

#if PERFCAST_PLUGIN_ABI_MINOR >= 1
static int dsp1_gemm_tile(const void *self, uint64_t *out, char *err, size_t cap) {
    (void)err;
    (void)cap;
    *out = (uint64_t)((const dsp1 *)self)->tile;
    return PERFCAST_OK;
}

static int dsp1_op_time(const void *self, const perfcast_op *op, const perfcast_tier *tiers,
                        size_t n_tiers, perfcast_op_time *out, char *err, size_t cap) {
    const dsp1 *d = self;
    if (d->fail_in_op_time != 0.0) {
        set_err(err, cap, "cvendor/dsp1: op_time failed on purpose (fail_in_op_time = 1)");
        return PERFCAST_ERR_FAILED;
    }
    double peak, eff;
    int rc = dsp1_peak(self, op->engine, op->dtype, &peak, err, cap);
    if (rc) return rc;
    rc = dsp1_efficiency(self, op, &eff, err, cap);
    if (rc) return rc;
    double compute = op->flops > 0.0 ? op->flops / (peak * eff) : 0.0;
    double memory = 0.0;
    uint32_t bound_tier = 0;
    for (size_t i = 0; i < n_tiers; i++) {
        double t = op->min_bytes / (tiers[i].bandwidth * tiers[i].efficiency) + tiers[i].latency;
        if (t > memory) {
            memory = t;
            bound_tier = (uint32_t)i;
        }
    }
    double overhead = d->launch_us * 1e-6 * (double)op->launches;
    double busy = compute > memory ? compute : memory;
    out->bound = overhead > busy      ? PERFCAST_BOUND_OVERHEAD
                 : compute >= memory ? PERFCAST_BOUND_COMPUTE
                                     : PERFCAST_BOUND_MEMORY;
    out->bound_tier = out->bound == PERFCAST_BOUND_MEMORY ? bound_tier : 0;
    out->time = compute + memory + overhead;
    out->compute = compute;
    out->memory = memory;
    out->overhead = overhead;
    out->flops = op->flops;
    out->device_bytes = op->min_bytes;
    return PERFCAST_OK;
}
#endif

static const perfcast_compute_unit_vtable dsp1_vtable = {
    .struct_size = sizeof(perfcast_compute_unit_vtable),
    .peak = dsp1_peak,
    .efficiency = dsp1_efficiency,
    .launch_overhead = dsp1_launch_overhead,
#if PERFCAST_PLUGIN_ABI_MINOR >= 1
    .gemm_tile = dsp1_gemm_tile,
    .op_time = dsp1_op_time,
#endif
};

/* ---- cvendor/lpddr ----------------------------------------------------------------------- */

typedef struct lpddr {
    double channels, bus_bits, mts, capacity_gib, efficiency, latency_ns;
} lpddr;

static int lpddr_create(const char *json, void **out, char *err, size_t cap) {
    lpddr m = {0};
    m.bus_bits = 16.0;
    m.efficiency = 0.8;
    m.latency_ns = 100.0;
    param_spec specs[] = {
        {"channels", &m.channels, 1, 0},   {"bus_bits", &m.bus_bits, 0, 0},
        {"mts", &m.mts, 1, 0},             {"capacity_gib", &m.capacity_gib, 1, 0},
        {"efficiency", &m.efficiency, 0, 0}, {"latency_ns", &m.latency_ns, 0, 0},
    };
    int rc = parse_params(json, "cvendor/lpddr", specs, sizeof specs / sizeof specs[0], err, cap);
    if (rc) return rc;
    if ((rc = check_positive("cvendor/lpddr", "channels", m.channels, err, cap))) return rc;
    if ((rc = check_positive("cvendor/lpddr", "bus_bits", m.bus_bits, err, cap))) return rc;
    if ((rc = check_positive("cvendor/lpddr", "mts", m.mts, err, cap))) return rc;
    if ((rc = check_positive("cvendor/lpddr", "capacity_gib", m.capacity_gib, err, cap)))
        return rc;
    if (!(m.efficiency > 0.0 && m.efficiency <= 1.0)) {
        set_err(err, cap, "cvendor/lpddr: parameter `efficiency` must be in (0, 1], got %g",
                m.efficiency);
        return PERFCAST_ERR_PARAMS;
    }
    if (!(m.latency_ns >= 0.0) || isinf(m.latency_ns)) {
        set_err(err, cap, "cvendor/lpddr: parameter `latency_ns` must be finite and >= 0");
        return PERFCAST_ERR_PARAMS;
    }
    lpddr *heap = malloc(sizeof *heap);
    if (!heap) {
        set_err(err, cap, "cvendor/lpddr: out of memory");
        return PERFCAST_ERR_FAILED;
    }
    *heap = m;
    *out = heap;
    return PERFCAST_OK;
}

static int lpddr_properties(const void *self, perfcast_tier *out, char *err, size_t cap) {
    const lpddr *m = self;
    (void)err;
    (void)cap;
    out->level = PERFCAST_TIER_DEVICE;
    out->capacity = m->capacity_gib * 1073741824.0;
    out->bandwidth = m->channels * m->bus_bits / 8.0 * m->mts * 1e6;
    out->efficiency = m->efficiency;
    out->latency = m->latency_ns * 1e-9;
    return PERFCAST_OK;
}

static const perfcast_memory_tier_vtable lpddr_vtable = {
    .struct_size = sizeof(perfcast_memory_tier_vtable),
    .properties = lpddr_properties,
};

/* ---- cvendor/ring (ABI 1.1) -------------------------------------------------------------- */

#if PERFCAST_PLUGIN_ABI_MINOR >= 1
typedef struct ring {
    double domain_size, bandwidth_gbs, latency_us;
} ring;

static int ring_create(const char *json, void **out, char *err, size_t cap) {
    ring r = {0};
    r.latency_us = 1.0;
    param_spec specs[] = {
        {"domain_size", &r.domain_size, 1, 0},
        {"bandwidth_gbs", &r.bandwidth_gbs, 1, 0},
        {"latency_us", &r.latency_us, 0, 0},
    };
    int rc = parse_params(json, "cvendor/ring", specs, sizeof specs / sizeof specs[0], err, cap);
    if (rc) return rc;
    if ((rc = check_positive("cvendor/ring", "domain_size", r.domain_size, err, cap))) return rc;
    if ((rc = check_positive("cvendor/ring", "bandwidth_gbs", r.bandwidth_gbs, err, cap)))
        return rc;
    if (!(r.latency_us >= 0.0) || isinf(r.latency_us)) {
        set_err(err, cap, "cvendor/ring: parameter `latency_us` must be finite and >= 0");
        return PERFCAST_ERR_PARAMS;
    }
    ring *heap = malloc(sizeof *heap);
    if (!heap) {
        set_err(err, cap, "cvendor/ring: out of memory");
        return PERFCAST_ERR_FAILED;
    }
    *heap = r;
    *out = heap;
    return PERFCAST_OK;
}

static int ring_properties(const void *self, perfcast_link *out, char *err, size_t cap) {
    const ring *r = self;
    (void)err;
    (void)cap;
    out->domain_size = (uint32_t)r->domain_size;
    out->bandwidth = r->bandwidth_gbs * 1e9;
    out->latency = r->latency_us * 1e-6;
    return PERFCAST_OK;
}

static int ring_collective_time(const void *self, uint32_t kind, double bytes, uint32_t ranks,
                                uint32_t algorithm, double *out, char *err, size_t cap) {
    const ring *r = self;
    (void)algorithm; /* a physical ring: always the ring algorithm */
    if ((double)ranks > r->domain_size) {
        set_err(err, cap, "cvendor/ring: %u ranks exceed the ring's domain_size %g", ranks,
                r->domain_size);
        return PERFCAST_ERR_FAILED;
    }
    if (ranks <= 1 || bytes <= 0.0) {
        *out = 0.0;
        return PERFCAST_OK;
    }
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
        factor = 1.0;
        break;
    default:
        set_err(err, cap, "cvendor/ring: unknown collective kind %u", kind);
        return PERFCAST_ERR_UNSUPPORTED;
    }
    *out = steps * r->latency_us * 1e-6 + factor * bytes / (r->bandwidth_gbs * 1e9);
    return PERFCAST_OK;
}

static const perfcast_interconnect_vtable ring_vtable = {
    .struct_size = sizeof(perfcast_interconnect_vtable),
    .properties = ring_properties,
    .collective_time = ring_collective_time,
};
#endif

/* ---- descriptor -------------------------------------------------------------------------- */

static void destroy(void *self) { free(self); }

#if PERFCAST_PLUGIN_ABI_MINOR >= 2
/* The parameters of cvendor/dsp1 (C ABI 1.2), as `perfcast plugins --describe cvendor/dsp1`
 * shows them. lpddr and ring declare none: the host shows them as "not declared". */
#define PARAM(n, t, u, k, d, r, doc, src)                                                      \
    static const perfcast_param n = {sizeof(perfcast_param), t, k, 0, #n, u, d, r, doc, src}
PARAM(bf16_tflops, PERFCAST_PARAM_FLOAT, "TFLOP/s", PERFCAST_DEFAULT_REQUIRED, "", "> 0",
      "dense bf16 throughput of the MAC array", "cvendor DSP1 datasheet (fictional)");
PARAM(int8_tops, PERFCAST_PARAM_FLOAT, "TOPS", PERFCAST_DEFAULT_DERIVED, "no int8 path", "> 0",
      "dense int8 throughput (left out: the device has no int8 path)",
      "cvendor DSP1 datasheet (fictional)");
PARAM(vector_gflops, PERFCAST_PARAM_FLOAT, "GFLOP/s", PERFCAST_DEFAULT_REQUIRED, "", "> 0",
      "vector-unit throughput", "cvendor DSP1 datasheet (fictional)");
PARAM(mac_efficiency, PERFCAST_PARAM_FLOAT, "", PERFCAST_DEFAULT_VALUE, "0.85", "(0, 1]",
      "fraction of the MAC peak a GEMM reaches", "modelling default (fictional)");
PARAM(launch_us, PERFCAST_PARAM_FLOAT, "us", PERFCAST_DEFAULT_VALUE, "5.0", ">= 0",
      "fixed cost per kernel launch", "modelling default (fictional)");
PARAM(tile, PERFCAST_PARAM_FLOAT, "elements", PERFCAST_DEFAULT_VALUE, "64.0", ">= 1",
      "output-tile edge kept on chip", "modelling default (fictional)");
PARAM(fail_in_op_time, PERFCAST_PARAM_FLOAT, "", PERFCAST_DEFAULT_VALUE, "0.0", "0 or 1",
      "test switch: fail inside op_time", "-");
PARAM(nan_efficiency, PERFCAST_PARAM_FLOAT, "", PERFCAST_DEFAULT_VALUE, "0.0", "0 or 1",
      "test switch: return a non-finite efficiency", "-");
static const perfcast_param *const dsp1_params[] = {
    &bf16_tflops, &int8_tops, &vector_gflops, &mac_efficiency,
    &launch_us, &tile, &fail_in_op_time, &nan_efficiency,
};
#endif

static const perfcast_component dsp1_component = {
    .struct_size = sizeof(perfcast_component),
    .category = PERFCAST_CATEGORY_COMPUTE_UNIT,
    .name = "cvendor/dsp1",
    .description = "cvendor DSP1 (fictional): MAC array, blocking DMA (no overlap)",
    .create = dsp1_create,
    .destroy = destroy,
    .vtable = &dsp1_vtable,
#if PERFCAST_PLUGIN_ABI_MINOR >= 2
    .n_params = sizeof dsp1_params / sizeof dsp1_params[0],
    .params = dsp1_params,
#endif
};

static const perfcast_component lpddr_component = {
    .struct_size = sizeof(perfcast_component),
    .category = PERFCAST_CATEGORY_MEMORY_TIER,
    .name = "cvendor/lpddr",
    .description = "cvendor LPDDR (fictional): channels x bus width x transfer rate",
    .create = lpddr_create,
    .destroy = destroy,
    .vtable = &lpddr_vtable,
};

#if PERFCAST_PLUGIN_ABI_MINOR >= 1
static const perfcast_component ring_component = {
    .struct_size = sizeof(perfcast_component),
    .category = PERFCAST_CATEGORY_INTERCONNECT,
    .name = "cvendor/ring",
    .description = "cvendor ring (fictional): DSP-to-DSP ring, ring collectives only",
    .create = ring_create,
    .destroy = destroy,
    .vtable = &ring_vtable,
};
#endif

static const perfcast_component *const components[] = {
    &dsp1_component,
    &lpddr_component,
#if PERFCAST_PLUGIN_ABI_MINOR >= 1
    &ring_component,
#endif
};

static const perfcast_plugin plugin = {
    .struct_size = sizeof(perfcast_plugin),
    .abi_major = PERFCAST_PLUGIN_ABI_MAJOR,
    .abi_minor = PERFCAST_PLUGIN_ABI_MINOR,
    .n_components = sizeof components / sizeof components[0],
    .name = "cvendor",
    .version = CVENDOR_VERSION,
    .components = components,
};

const perfcast_plugin *perfcast_plugin_entry_v1(void) { return &plugin; }
