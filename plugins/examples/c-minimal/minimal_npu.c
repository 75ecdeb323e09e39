/* minimal/npu: the smallest useful accelerator plugin in C, a template to copy.
 *
 * A compute unit with a matrix engine (bf16/fp16 at `matrix_tflops`, fp8 at twice that) and a
 * vector engine (16 to 32-bit at `vector_tflops`), a GEMM efficiency and a launch cost; the
 * device's memory tiers and links stay the configuration's built-in ones, and perfcast times
 * every op with its hierarchical roofline over these figures. Everything about it is made up.
 *
 * Build and run: see README.md beside it.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "perfcast_params.h" /* includes perfcast_plugin.h */

#define NAME "minimal/npu"
typedef struct {
    double matrix, vector, efficiency, launch; /* FLOP/s, FLOP/s, (0, 1], s */
} npu;

static int32_t npu_create(const char *json, void **out, char *err, size_t cap) {
    static const char *const known[] = {"matrix_tflops", "vector_tflops", "efficiency",
                                        "launch_us"};
    npu p;
    if (perfcast_params_check(json, NAME, known, sizeof known / sizeof known[0], err, cap) ||
        /* required (NAN), positive (DBL_MIN) */
        perfcast_param_number(json, NAME, "matrix_tflops", NAN, DBL_MIN, 1e6, &p.matrix, err,
                              cap) ||
        perfcast_param_number(json, NAME, "vector_tflops", NAN, DBL_MIN, 1e6, &p.vector, err,
                              cap) ||
        /* optional, with a default */
        perfcast_param_number(json, NAME, "efficiency", 0.8, DBL_MIN, 1, &p.efficiency, err,
                              cap) ||
        perfcast_param_number(json, NAME, "launch_us", 3.0, 0, 1e6, &p.launch, err, cap))
        return PERFCAST_ERR_PARAMS;
    p.matrix *= 1e12, p.vector *= 1e12, p.launch *= 1e-6; /* to SI units */
    npu *self = malloc(sizeof *self);
    if (!self) return PERFCAST_ERR_FAILED;
    *self = p, *out = self;
    return PERFCAST_OK;
}

static void npu_destroy(void *self) { free(self); }

static int32_t npu_peak(const void *self, uint32_t engine, uint32_t dtype, double *out,
                        char *err, size_t cap) {
    const npu *p = self;
    (void)err, (void)cap;
    if (engine == PERFCAST_ENGINE_MATRIX && (dtype == PERFCAST_DTYPE_BF16 ||
                                             dtype == PERFCAST_DTYPE_FP16))
        return *out = p->matrix, PERFCAST_OK;
    if (engine == PERFCAST_ENGINE_MATRIX && dtype == PERFCAST_DTYPE_FP8)
        return *out = 2 * p->matrix, PERFCAST_OK;
    if (engine == PERFCAST_ENGINE_VECTOR && dtype != PERFCAST_DTYPE_FP8 &&
        dtype <= PERFCAST_DTYPE_FP16) /* fp32, tf32, bf16, fp16 */
        return *out = p->vector, PERFCAST_OK;
    return PERFCAST_ERR_UNSUPPORTED; /* no such path: the host says so, naming the op */
}

static int32_t npu_efficiency(const void *self, const perfcast_op *op, double *out, char *err,
                              size_t cap) {
    (void)err, (void)cap;
    *out = op->kind == PERFCAST_OP_VECTOR ? 1.0 : ((const npu *)self)->efficiency;
    return PERFCAST_OK;
}

static int32_t npu_launch(const void *self, double *out, char *err, size_t cap) {
    (void)err, (void)cap;
    return *out = ((const npu *)self)->launch, PERFCAST_OK;
}

static const perfcast_compute_unit_vtable npu_vtable = {
    .struct_size = sizeof(perfcast_compute_unit_vtable),
    .peak = npu_peak,
    .efficiency = npu_efficiency,
    .launch_overhead = npu_launch,
};

static const perfcast_component npu_component = {
    .struct_size = sizeof(perfcast_component),
    .category = PERFCAST_CATEGORY_COMPUTE_UNIT,
    .name = NAME,
    .description = "a made-up NPU: matrix and vector peaks, one GEMM efficiency",
    .create = npu_create,
    .destroy = npu_destroy,
    .vtable = &npu_vtable,
};

static const perfcast_component *const components[] = {&npu_component};
static const perfcast_plugin plugin = {
    .struct_size = sizeof(perfcast_plugin),
    .abi_major = PERFCAST_PLUGIN_ABI_MAJOR,
    .abi_minor = PERFCAST_PLUGIN_ABI_MINOR,
    .n_components = 1,
    .name = "minimal",
    .version = "0.1.0",
    .components = components,
};

const perfcast_plugin *perfcast_plugin_entry_v1(void) { return &plugin; }
