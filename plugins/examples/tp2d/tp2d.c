/*
 * tp2d.c -- 2-D tensor parallelism on a new mesh axis, written against the C ABI 1.7, as
 * `example/tp2d`: Optimus (Xu et al. 2021, "An Efficient 2D Method for Training Super-Large
 * Deep Learning Models", arXiv:2104.05343), which multiplies every weight matrix with SUMMA
 * (van de Geijn & Watts 1997) on a q x q grid of devices.
 *
 * The grid's rows are the built-in tensor axis (plan.tp = q) and its columns a declared axis,
 * `col` (plan.axes.col = q), outside `tensor` in the mesh. Every activation and every weight
 * matrix is cut into q x q blocks, so a device holds 1/q^2 of each and does 1/q^2 of every
 * GEMM (the layer split's `weights` and `pointwise` are multiplied by q^2). For C = A B with A
 * the activation (M x K) and B the weight (K x N), SUMMA's q steps broadcast A's blocks along
 * the grid's rows and B's along its columns; over the q steps a device receives its row's A
 * panel, M K / q elements, and its column's B panel, K N / q: the volume of an all-gather of
 * that panel in a group of q, which is how it is counted here (q broadcasts of a block each).
 * The backward multiplies twice (dA = dC B^T, dB = A^T dC), each broadcasting one operand and
 * reducing the product: per GEMM an all-gather and a reduce-scatter of each panel.
 *
 * Per layer and micro-batch, with M = micro_batch x seq_len / cp tokens, K_A = 2 hidden +
 * heads x head_dim + ffn_hidden (the inputs of QKV, the projection, the MLP's first and its
 * second matrices) and W the layer's weights (layer_params x q^2):
 *   forward:  all-gather M K_A / q activations over `col`, all-gather W / q weights over `tensor`;
 *   backward: the same two, plus reduce-scatters of the same sizes (activation gradients over
 *             `col`, weight gradients over `tensor`).
 * The embedding and the head are split over all q^2 devices as 1-D tensor parallelism splits
 * them over tp: an all-reduce of the embedding's output and of the head's input gradient, and
 * of the loss's three per-token numbers. Nothing hides behind compute (SUMMA's broadcasts
 * could be pipelined with its steps; Optimus does not).
 *
 * Build, load, use (from the repository root):
 *
 *   cc -shared -fPIC -O2 -I crates/perfcast-abi/include plugins/examples/tp2d/tp2d.c -o libtp2d.so
 *   perfcast plugins --load ./libtp2d.so --describe example/tp2d
 *   perfcast predict configs/experiments/gpt3-175b-a100.toml --load ./libtp2d.so \
 *       --set 'options.strategies=["example/tp2d","sequence","context","expert","pipeline","data","zero"]' \
 *       --set plan.tp=4 --set plan.axes.col=4 --set plan.dp=4
 */
#include "perfcast_plugin.h"

#include <stdio.h>
#include <string.h>

#if PERFCAST_PLUGIN_ABI_MINOR < 7
#error "tp2d needs C ABI 1.7 (declared axes)"
#endif

static void set_err(char *err, size_t cap, const char *msg) { snprintf(err, cap, "%s", msg); }

static int32_t create(const char *json, void **out, char *err, size_t cap) {
    const char *p = json;
    while (*p == ' ' || *p == '{') p++;
    if (*p != '}' && *p != '\0') {
        set_err(err, cap, "example/tp2d takes no parameters");
        return PERFCAST_ERR_PARAMS;
    }
    *out = NULL;
    return PERFCAST_OK;
}

static int32_t axis(const void *self, uint32_t *out, char *err, size_t cap) {
    (void)self, (void)err, (void)cap;
    *out = PERFCAST_AXIS_TENSOR;
    return PERFCAST_OK;
}

static int32_t axes(const void *self, perfcast_axis_decl *out, size_t cap, size_t *n_out,
                    char *err, size_t err_cap) {
    (void)self;
    if (cap < 1) {
        set_err(err, err_cap, "no room for the axis `col`");
        return PERFCAST_ERR_FAILED;
    }
    out[0].place = PERFCAST_PLACE_OUTSIDE;
    out[0].anchor = PERFCAST_AXIS_TENSOR;
    out[0].divides = PERFCAST_DIVIDES_HEADS;
    snprintf(out[0].name, sizeof out[0].name, "col");
    *n_out = 1;
    return PERFCAST_OK;
}

/* The grid's edge q, or 0 when the host's plan does not carry the axis (an older host). */
static uint64_t edge(const perfcast_plan *plan) {
    if (plan->struct_size < sizeof(perfcast_plan) || plan->n_axes < 1) return 0;
    return plan->tp;
}

static int32_t validate(const void *self, const perfcast_model *m, const perfcast_plan *plan,
                        char *err, size_t cap) {
    (void)self;
    uint64_t q = edge(plan);
    if (q == 0) {
        set_err(err, cap, "the host did not hand over plan.axes.col (it needs C ABI 1.7)");
        return PERFCAST_ERR_FAILED;
    }
    if (plan->axes[0] != q) {
        snprintf(err, cap, "invalid `plan.axes.col` = %u: must equal plan.tp = %u (a q x q grid)",
                 plan->axes[0], plan->tp);
        return PERFCAST_ERR_FAILED;
    }
    if (plan->sp) {
        set_err(err, cap, "invalid `plan.sp`: 2-D tensor parallelism splits the activations itself");
        return PERFCAST_ERR_FAILED;
    }
    uint64_t q2 = q * q;
    if (m->heads % q2 != 0 || m->ffn_hidden % q2 != 0 || m->hidden % q != 0) {
        snprintf(err, cap,
                 "invalid `plan.tp` = `plan.axes.col` = %llu: q^2 = %llu must divide model.heads "
                 "= %llu and model.ffn_hidden = %llu, and q model.hidden = %llu",
                 (unsigned long long)q, (unsigned long long)q2, (unsigned long long)m->heads,
                 (unsigned long long)m->ffn_hidden, (unsigned long long)m->hidden);
        return PERFCAST_ERR_FAILED;
    }
    if (!(m->kv_heads % q2 == 0 || q2 % m->kv_heads == 0)) {
        snprintf(err, cap, "invalid `plan.tp` = %llu: q^2 must divide model.kv_heads = %llu or "
                 "be a multiple of it", (unsigned long long)q, (unsigned long long)m->kv_heads);
        return PERFCAST_ERR_FAILED;
    }
    return PERFCAST_OK;
}

static int32_t split_layer(const void *self, const perfcast_plan *plan,
                           perfcast_layer_split *split, char *err, size_t cap) {
    (void)self, (void)err, (void)cap;
    uint32_t q = (uint32_t)edge(plan);
    if (q > 1) {
        split->weights *= q * q;
        split->pointwise *= q * q;
    }
    return PERFCAST_OK;
}

typedef struct writer {
    perfcast_comm_op *out;
    size_t cap, n;
} writer;

static int push(writer *w, uint32_t phase, uint32_t kind, uint32_t group, double bytes,
                double count, uint32_t with_recompute) {
    if (w->n == w->cap) return 0;
    perfcast_comm_op *o = &w->out[w->n++];
    uint32_t size = o->struct_size; /* preset by the host */
    memset(o, 0, size < sizeof *o ? size : sizeof *o);
    o->struct_size = size;
    o->klass = PERFCAST_CLASS_TENSOR;
    o->phase = phase;
    o->kind = kind;
    o->group = group;
    o->exposed = 1;
    o->bytes = bytes;
    o->count = count;
    o->with_recompute = with_recompute;
    return 1;
}

static int32_t comms(const void *self, const perfcast_plan *plan, const perfcast_layer_dims *d,
                     perfcast_comm_op *out, size_t cap, size_t *n_out, char *err, size_t err_cap) {
    (void)self;
    writer w = {out, cap, 0};
    *n_out = 0;
    uint64_t q = edge(plan);
    if (q <= 1) return PERFCAST_OK;
    const uint32_t row = PERFCAST_GROUP_TENSOR, col = PERFCAST_GROUP_DECLARED(0);
    double tokens = (double)d->micro_batch * (double)d->seq_len / (double)(plan->cp > 1 ? plan->cp : 1);
    double k_a = 2.0 * (double)d->hidden + (double)(d->heads * d->head_dim) + (double)d->ffn_hidden;
    double acts = tokens * k_a / (double)q;                 /* elements of the A panels */
    double weights = d->layer_params * (double)(q * q) / (double)q; /* of the B panels */
    int ok = 1;
    ok &= push(&w, PERFCAST_PHASE_FORWARD, PERFCAST_COLLECTIVE_ALL_GATHER, col, acts * d->act_bytes, 1.0, 1);
    ok &= push(&w, PERFCAST_PHASE_FORWARD, PERFCAST_COLLECTIVE_ALL_GATHER, row, weights * d->weight_bytes, 1.0, 1);
    ok &= push(&w, PERFCAST_PHASE_BACKWARD, PERFCAST_COLLECTIVE_ALL_GATHER, col, acts * d->act_bytes, 1.0, 0);
    ok &= push(&w, PERFCAST_PHASE_BACKWARD, PERFCAST_COLLECTIVE_ALL_GATHER, row, weights * d->weight_bytes, 1.0, 0);
    ok &= push(&w, PERFCAST_PHASE_BACKWARD, PERFCAST_COLLECTIVE_REDUCE_SCATTER, col, acts * d->act_bytes, 1.0, 0);
    ok &= push(&w, PERFCAST_PHASE_BACKWARD, PERFCAST_COLLECTIVE_REDUCE_SCATTER, row, weights * d->grad_bytes, 1.0, 0);
    double s = tokens * (double)d->hidden * d->act_bytes;
    ok &= push(&w, PERFCAST_PHASE_EMBEDDING_FORWARD, PERFCAST_COLLECTIVE_ALL_REDUCE, row | col, s, 1.0, 0);
    ok &= push(&w, PERFCAST_PHASE_HEAD_BACKWARD, PERFCAST_COLLECTIVE_ALL_REDUCE, row | col, s, 1.0, 0);
    ok &= push(&w, PERFCAST_PHASE_HEAD_FORWARD, PERFCAST_COLLECTIVE_ALL_REDUCE, row | col, tokens * 4.0, 3.0, 0);
    if (!ok) {
        set_err(err, err_cap, "the host's collective array is full");
        return PERFCAST_ERR_FAILED;
    }
    *n_out = w.n;
    return PERFCAST_OK;
}

static const perfcast_parallel_strategy_vtable vt = {
    .struct_size = sizeof(perfcast_parallel_strategy_vtable),
    .axis = axis,
    .validate = validate,
    .split_layer = split_layer,
    .comms = comms,
    .axes = axes,
};

static const perfcast_component comp = {
    .struct_size = sizeof(perfcast_component),
    .category = PERFCAST_CATEGORY_PARALLEL_STRATEGY,
    .name = "example/tp2d",
    .description = "2-D tensor parallelism (Optimus, SUMMA on a q x q grid: plan.tp x plan.axes.col)",
    .create = create,
    .destroy = NULL,
    .vtable = &vt,
};

static const perfcast_component *const comps[] = {&comp};

static const perfcast_plugin plugin = {
    .struct_size = sizeof(perfcast_plugin),
    .abi_major = PERFCAST_PLUGIN_ABI_MAJOR,
    .abi_minor = PERFCAST_PLUGIN_ABI_MINOR,
    .n_components = 1,
    .name = "example-tp2d",
    .version = "0.1.0",
    .components = comps,
};

const perfcast_plugin *perfcast_plugin_entry_v1(void) { return &plugin; }
