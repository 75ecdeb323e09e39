/* perfcast_params.h: read a component's parameters in C without a JSON library.
 *
 * `create` receives the component's table of the configuration as a JSON object, which the
 * host writes itself (`{}` when there are none). These helpers read its top-level keys:
 * numbers, strings and booleans, and check that every key is one the component knows, so a
 * misspelt parameter is an error naming it. Header-only (every function `static inline`);
 * include it after perfcast_plugin.h. Not part of the ABI: copy it if you like.
 *
 *     double peak;
 *     static const char *const known[] = {"peak_tflops", "efficiency"};
 *     if (perfcast_params_check(json, "minimal/npu", known, 2, err, cap) ||
 *         perfcast_param_number(json, "minimal/npu", "peak_tflops", NAN, DBL_MIN, INFINITY,
 *                               &peak, err, cap))
 *         return PERFCAST_ERR_PARAMS;
 *
 * A number given with `fallback` NAN is required; one outside [lo, hi] is an error naming
 * the key, its value and the range (DBL_MIN as `lo`: positive). Keys with escapes in their
 * names are not matched (perfcast's keys have none).
 */
#ifndef PERFCAST_PARAMS_H
#define PERFCAST_PARAMS_H

#include "perfcast_plugin.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline const char *perfcast_json_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* The end of the JSON string at `p` (after its closing quote), or NULL. */
static inline const char *perfcast_json_string_end(const char *p) {
    if (*p != '"') return NULL;
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && !*++p) return NULL;
    return *p == '"' ? p + 1 : NULL;
}

/* The end of the JSON value at `p`, or NULL. */
static inline const char *perfcast_json_value_end(const char *p) {
    p = perfcast_json_ws(p);
    if (*p == '"') return perfcast_json_string_end(p);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (*p) {
            if (*p == '"') {
                if (!(p = perfcast_json_string_end(p))) return NULL;
                continue;
            }
            if (*p == '{' || *p == '[') depth++;
            if ((*p == '}' || *p == ']') && --depth == 0) return p + 1;
            p++;
        }
        return NULL;
    }
    const char *start = p;
    while (*p && !strchr(",}] \t\r\n", *p)) p++;
    return p == start ? NULL : p;
}

/* Walk the top-level keys of `json`: from `*at` (NULL to start), the next key (unquoted, in
 * `key` of `cap` bytes) and its value (`*value`). 1: a key; 0: no more; -1: malformed. */
static inline int perfcast_json_next(const char *json, const char **at, char *key, size_t cap,
                                     const char **value) {
    const char *p = *at;
    if (!p) {
        p = perfcast_json_ws(json ? json : "{}");
        if (*p++ != '{') return -1;
        p = perfcast_json_ws(p);
        if (*p == '}') return 0;
    } else {
        p = perfcast_json_ws(p);
        if (*p == '}') return 0;
        if (*p++ != ',') return -1;
        p = perfcast_json_ws(p);
    }
    const char *end = perfcast_json_string_end(p);
    if (!end || (size_t)(end - p - 2) >= cap) return -1;
    memcpy(key, p + 1, (size_t)(end - p - 2));
    key[end - p - 2] = '\0';
    p = perfcast_json_ws(end);
    if (*p++ != ':') return -1;
    *value = perfcast_json_ws(p);
    if (!(*at = perfcast_json_value_end(*value))) return -1;
    return 1;
}

/* The value of top-level `key` (NULL: absent); *bad is set when the object is malformed. */
static inline const char *perfcast_json_find(const char *json, const char *key, int *bad) {
    char k[128];
    const char *at = NULL, *value = NULL;
    int r;
    while ((r = perfcast_json_next(json, &at, k, sizeof k, &value)) == 1)
        if (strcmp(k, key) == 0) return value;
    *bad = r < 0;
    return NULL;
}

/* 0 when every key of `json` is one of the `n` names of `known`; else PERFCAST_ERR_PARAMS
 * with a message naming the key, the component and the names it takes. */
static inline int perfcast_params_check(const char *json, const char *component,
                                        const char *const *known, size_t n, char *err,
                                        size_t cap) {
    char k[128];
    const char *at = NULL, *value = NULL;
    int r;
    while ((r = perfcast_json_next(json, &at, k, sizeof k, &value)) == 1) {
        size_t i = 0;
        while (i < n && strcmp(known[i], k) != 0) i++;
        if (i == n) {
            int w = snprintf(err, cap, "%s: unknown parameter `%s`; it takes:", component, k);
            for (i = 0; i < n && w >= 0 && (size_t)w < cap; i++)
                w += snprintf(err + w, cap - (size_t)w, " %s", known[i]);
            return PERFCAST_ERR_PARAMS;
        }
    }
    if (r < 0) {
        snprintf(err, cap, "%s: the parameters are not a JSON object", component);
        return PERFCAST_ERR_PARAMS;
    }
    return 0;
}

/* Number `key` into *out: `fallback` when absent (NAN: required), checked against
 * lo <= v <= hi. 0, or PERFCAST_ERR_PARAMS with a message naming the key. */
static inline int perfcast_param_number(const char *json, const char *component,
                                        const char *key, double fallback, double lo, double hi,
                                        double *out, char *err, size_t cap) {
    int bad = 0;
    const char *v = perfcast_json_find(json, key, &bad);
    if (!v) {
        if (bad || isnan(fallback)) {
            snprintf(err, cap, "%s: missing parameter `%s`", component, key);
            return PERFCAST_ERR_PARAMS;
        }
        *out = fallback;
        return 0;
    }
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || !strchr(",} \t\r\n", *end) || !isfinite(x)) {
        snprintf(err, cap, "%s: parameter `%s` must be a number", component, key);
        return PERFCAST_ERR_PARAMS;
    }
    if (!(x >= lo && x <= hi)) {
        /* DBL_MIN as the lower bound reads "> 0"; an infinite upper bound is left out. */
        char low[32], high[32] = "";
        snprintf(low, sizeof low, lo == DBL_MIN ? "(0" : "[%g", lo);
        if (isfinite(hi)) snprintf(high, sizeof high, "%g]", hi);
        snprintf(err, cap, "%s: parameter `%s` = %g must be in %s, %s", component, key, x, low,
                 isfinite(hi) ? high : "inf)");
        return PERFCAST_ERR_PARAMS;
    }
    *out = x;
    return 0;
}

/* Boolean `key` into *out (1 or 0): `fallback` when absent. 0, or PERFCAST_ERR_PARAMS. */
static inline int perfcast_param_bool(const char *json, const char *component, const char *key,
                                      int fallback, int *out, char *err, size_t cap) {
    int bad = 0;
    const char *v = perfcast_json_find(json, key, &bad);
    if (!v && !bad) {
        *out = fallback;
        return 0;
    }
    if (v && strncmp(v, "true", 4) == 0) return *out = 1, 0;
    if (v && strncmp(v, "false", 5) == 0) return *out = 0, 0;
    snprintf(err, cap, "%s: parameter `%s` must be true or false", component, key);
    return PERFCAST_ERR_PARAMS;
}

/* String `key` (without escapes) into `buf` of `size` bytes: `fallback` when absent. 0, or
 * PERFCAST_ERR_PARAMS (not a string, an escape, or longer than the buffer). */
static inline int perfcast_param_string(const char *json, const char *component,
                                        const char *key, const char *fallback, char *buf,
                                        size_t size, char *err, size_t cap) {
    int bad = 0;
    const char *v = perfcast_json_find(json, key, &bad);
    if (!v && !bad) {
        snprintf(buf, size, "%s", fallback);
        return 0;
    }
    const char *end = v ? perfcast_json_string_end(v) : NULL;
    size_t len = end ? (size_t)(end - v - 2) : 0;
    if (!end || memchr(v + 1, '\\', len) || len >= size) {
        snprintf(err, cap, "%s: parameter `%s` must be a string (of at most %zu bytes)",
                 component, key, size ? size - 1 : 0);
        return PERFCAST_ERR_PARAMS;
    }
    memcpy(buf, v + 1, len);
    buf[len] = '\0';
    return 0;
}

#endif /* PERFCAST_PARAMS_H */
