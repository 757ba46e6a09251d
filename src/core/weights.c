/* moe_weights_*: importing the caller's expert tensors (any checkpoint layout, strides and
 * float dtype, or e4m3 with 128x128 block scales), packing them for the backends, and
 * unpacking them again.
 *
 * Packing, per expert: an fp32 [R13, H] matrix is built with gate row i at row 2i and up row
 * i at row 2i+1 (RELU2: the I rows as they are), then quantised into slot e of w->w13 in the
 * requested format; down [H, I] goes to w->w2 the same way. The gated W13 is a paired stack
 * (internal.h, moe__qmatrix): the 2-D block formats (FP8_BLOCK128, NVFP4_2D) put their
 * blocks over gate [I, H] and up [I, H] each on its own, as a checkpoint does, never over a
 * mix of gate and up rows. Biases, the router, the correction bias and the shared-expert gate
 * stay fp32.
 *
 * An e4m3 input tensor X [E, rows, cols] comes with X_scale [E, ceil(rows/128),
 * ceil(cols/128)] fp32 (DeepSeek's weight_scale_inv): x = q * s over each 128x128 block of
 * X's own logical [rows, cols] (for a strided view, the view's rows and columns). Packed as
 * FP8_BLOCK128, such a tensor is copied as it is, codes and scales bit for bit, wherever its
 * blocks are the packed blocks: gate, up and down of SEPARATE, W1 of RELU2, and CONCAT's
 * gate_up when I is a multiple of 128 (else a block straddles gate and up). Packed as
 * FP8_TENSOR, an expert's matrix is copied, codes bit for bit and its one scale, when all its
 * block scales are one value (a per-tensor checkpoint broadcast over the blocks; for W13, the
 * same value for gate and up): re-quantising it to amax / 448 would change every code of a
 * matrix whose largest code is not 448. Anything else (INTERLEAVED e4m3, scales that vary, other
 * formats) is decoded to fp32 and quantised. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * The expert tensors of the descriptor, routed or shared, seen through one struct.
 * ------------------------------------------------------------------------------------- */
enum { SRC_GATE = 0, SRC_UP = 1, SRC_GATE_UP = 2 };

typedef struct expert_tensors {
    const char *prefix; /* "" or "shared_": field names are "desc.<prefix><field>" */
    int64_t E;          /* leading dimension of the routed tensors; 0 for the 2-D shared ones */
    int64_t I;          /* intermediate size (I or Is) */
    const moe_tensor *mat[3], *scale[3], *bias[3]; /* by SRC_*; scale NULL for shared */
    const moe_tensor *down, *down_scale, *down_bias;
} expert_tensors;

static const char *const src_field[3] = {"gate", "up", "gate_up"};

static expert_tensors routed_tensors(const moe_weights_desc *d, const moe_layer_spec *s) {
    expert_tensors x = {.prefix = "", .E = s->num_experts, .I = s->intermediate,
                        .mat = {&d->gate, &d->up, &d->gate_up},
                        .scale = {&d->gate_scale, &d->up_scale, &d->gate_up_scale},
                        .bias = {&d->gate_bias, &d->up_bias, &d->gate_up_bias},
                        .down = &d->down, .down_scale = &d->down_scale, .down_bias = &d->down_bias};
    return x;
}

static expert_tensors shared_tensors(const moe_weights_desc *d, const moe_layer_spec *s) {
    expert_tensors x = {.prefix = "shared_", .E = 0, .I = s->shared_intermediate,
                        .mat = {&d->shared_gate, &d->shared_up, &d->shared_gate_up},
                        .scale = {NULL, NULL, NULL},
                        .bias = {&d->shared_gate_bias, &d->shared_up_bias, &d->shared_gate_up_bias},
                        .down = &d->shared_down, .down_scale = NULL, .down_bias = &d->shared_down_bias};
    return x;
}

/* Where packed W13 row r comes from: which tensor (SRC_*) and which of its rows. */
static void w13_origin(moe_gate_up_layout layout, bool gated, int64_t I, int64_t r, int *which, int64_t *src_row) {
    if (!gated) { /* RELU2: W1's I rows, from gate (SEPARATE) or gate_up */
        *which = layout == MOE_LAYOUT_SEPARATE ? SRC_GATE : SRC_GATE_UP;
        *src_row = r;
    } else if (layout == MOE_LAYOUT_SEPARATE) { /* row 2i <- gate[i], row 2i+1 <- up[i] */
        *which = r % 2 ? SRC_UP : SRC_GATE;
        *src_row = r / 2;
    } else if (layout == MOE_LAYOUT_CONCAT) { /* gate_up: rows 0..I-1 gate, I..2I-1 up */
        *which = SRC_GATE_UP;
        *src_row = r % 2 ? I + r / 2 : r / 2;
    } else { /* INTERLEAVED: already in packed order */
        *which = SRC_GATE_UP;
        *src_row = r;
    }
}

/* ---------------------------------------------------------------------------------------
 * Validation.
 * ------------------------------------------------------------------------------------- */
static const char *layout_name(moe_gate_up_layout l) {
    return l == MOE_LAYOUT_SEPARATE ? "SEPARATE" : l == MOE_LAYOUT_CONCAT ? "CONCAT" : "INTERLEAVED";
}

static moe_status check_host(moe_context_t *ctx, const moe_tensor *t, const char *name) {
    if (t->memory == MOE_MEMORY_DEVICE)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                          "moe_weights_create: %s is in device memory; this version needs host tensors", name);
    return MOE_STATUS_OK;
}

/* t must be absent; `why` completes "given, but ...". */
static moe_status check_absent(moe_context_t *ctx, const moe_tensor *t, const char *name, const char *why) {
    if (t && moe_tensor_present(t))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "moe_weights_create: %s: given, but %s", name, why);
    return MOE_STATUS_OK;
}

/* A present host tensor of `ndim` dims (a dim of -1 is free) and a dtype in `dtypes`. */
static moe_status check_present(moe_context_t *ctx, const moe_tensor *t, const char *name, int32_t ndim,
                                const int64_t *dims, uint32_t dtypes) {
    moe_status st = moe__check_tensor(ctx, t, name, ndim, dims, dtypes);
    if (st != MOE_STATUS_OK) return st;
    return check_host(ctx, t, name);
}

/* A weight matrix [E, rows, cols] (or [rows, cols] when E == 0), float dtype or e4m3 with its
 * block scale tensor (routed tensors only: scale != NULL). */
static moe_status check_matrix(moe_context_t *ctx, const expert_tensors *x, const char *field, const moe_tensor *t,
                               const moe_tensor *scale, int64_t rows, int64_t cols) {
    char name[80], scale_name[80];
    snprintf(name, sizeof name, "desc.%s%s", x->prefix, field);
    snprintf(scale_name, sizeof scale_name, "desc.%s%s_scale", x->prefix, field);
    const int64_t dims3[3] = {x->E, rows, cols}, dims2[2] = {rows, cols};
    const uint32_t dtypes = MOE__FLOAT_DTYPES | (scale ? MOE__DT(MOE_DTYPE_E4M3) : 0);
    moe_status st = x->E > 0 ? check_present(ctx, t, name, 3, dims3, dtypes)
                             : check_present(ctx, t, name, 2, dims2, dtypes);
    if (st != MOE_STATUS_OK) return st;
    if (!scale) return MOE_STATUS_OK;
    if (t->dtype != MOE_DTYPE_E4M3) return check_absent(ctx, scale, scale_name, "the weight is not e4m3");
    const int64_t sdims[3] = {x->E, (rows + 127) / 128, (cols + 127) / 128};
    if ((st = check_present(ctx, scale, scale_name, 3, sdims, MOE__DT(MOE_DTYPE_F32))) != MOE_STATUS_OK) return st;
    /* A NaN, infinite or negative scale (a corrupt checkpoint) would turn its whole block into
     * garbage with a status of OK. Zero is a zero block's scale. */
    for (int64_t e = 0; e < sdims[0]; e++)
        for (int64_t r = 0; r < sdims[1]; r++)
            for (int64_t c = 0; c < sdims[2]; c++) {
                const int64_t at[3] = {e, r, c};
                const float v = moe__tensor_get(scale, at);
                if (!(v >= 0.0f) || isinf(v))
                    return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                                      "%s[%lld][%lld][%lld] = %g, expected a finite scale >= 0", scale_name,
                                      (long long)e, (long long)r, (long long)c, (double)v);
            }
    return MOE_STATUS_OK;
}

/* The bias of `field` (desc.<prefix><field>_bias): [E, n], or [n] when E == 0. */
static moe_status check_bias(moe_context_t *ctx, const expert_tensors *x, const char *field, const moe_tensor *t,
                             int64_t n) {
    char name[80];
    snprintf(name, sizeof name, "desc.%s%s_bias", x->prefix, field);
    const int64_t dims2[2] = {x->E, n}, dims1[1] = {n};
    return x->E > 0 ? check_present(ctx, t, name, 2, dims2, MOE__FLOAT_DTYPES)
                    : check_present(ctx, t, name, 1, dims1, MOE__FLOAT_DTYPES);
}

static moe_status check_absent_field(moe_context_t *ctx, const expert_tensors *x, const char *field,
                                     const char *suffix, const moe_tensor *t, const char *why) {
    char name[80];
    snprintf(name, sizeof name, "desc.%s%s%s", x->prefix, field, suffix);
    return check_absent(ctx, t, name, why);
}

/* Every tensor of one expert stack (routed or shared) for the layout and activation. */
static moe_status check_expert_tensors(moe_context_t *ctx, const moe_layer_spec *s, moe_gate_up_layout layout,
                                       const expert_tensors *x) {
    const bool gated = moe_activation_is_gated(s->activation);
    const int64_t H = s->hidden, I = x->I, R13 = moe__w13_rows(s, I);
    char why[96];
    moe_status st;
    /* Which of gate, up, gate_up the layout uses, and their row counts. */
    bool used[3] = {false, false, false};
    int64_t rows[3] = {I, I, R13};
    if (layout == MOE_LAYOUT_SEPARATE) used[SRC_GATE] = true, used[SRC_UP] = gated;
    else used[SRC_GATE_UP] = true;
    for (int i = 0; i < 3; i++) {
        if (used[i]) {
            st = check_matrix(ctx, x, src_field[i], x->mat[i], x->scale[i], rows[i], H);
            if (st != MOE_STATUS_OK) return st;
            continue;
        }
        if (i == SRC_UP && layout == MOE_LAYOUT_SEPARATE)
            snprintf(why, sizeof why, "activation %s is not gated (no up projection)",
                     moe_activation_name(s->activation));
        else snprintf(why, sizeof why, "layout is %s", layout_name(layout));
        st = check_absent_field(ctx, x, src_field[i], "", x->mat[i], why);
        if (st == MOE_STATUS_OK && x->scale[i])
            st = check_absent_field(ctx, x, src_field[i], "_scale", x->scale[i], why);
        if (st == MOE_STATUS_OK) st = check_absent_field(ctx, x, src_field[i], "_bias", x->bias[i], why);
        if (st != MOE_STATUS_OK) return st;
    }
    st = check_matrix(ctx, x, "down", x->down, x->down_scale, H, I);
    if (st != MOE_STATUS_OK) return st;

    /* Biases iff spec.expert_has_bias. */
    for (int i = 0; i < 3; i++) {
        if (!used[i]) continue;
        st = s->expert_has_bias
                 ? check_bias(ctx, x, src_field[i], x->bias[i], rows[i])
                 : check_absent_field(ctx, x, src_field[i], "_bias", x->bias[i], "spec.expert_has_bias = 0");
        if (st != MOE_STATUS_OK) return st;
    }
    return s->expert_has_bias ? check_bias(ctx, x, "down", x->down_bias, H)
                              : check_absent_field(ctx, x, "down", "_bias", x->down_bias, "spec.expert_has_bias = 0");
}

/* Every shared-expert tensor must be absent (no shared experts in the spec). */
static moe_status check_no_shared(moe_context_t *ctx, const moe_weights_desc *d) {
    const struct {
        const moe_tensor *t;
        const char *name;
    } all[] = {{&d->shared_gate, "desc.shared_gate"},           {&d->shared_up, "desc.shared_up"},
               {&d->shared_gate_up, "desc.shared_gate_up"},     {&d->shared_down, "desc.shared_down"},
               {&d->shared_gate_bias, "desc.shared_gate_bias"}, {&d->shared_up_bias, "desc.shared_up_bias"},
               {&d->shared_gate_up_bias, "desc.shared_gate_up_bias"},
               {&d->shared_down_bias, "desc.shared_down_bias"}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        moe_status st = check_absent(ctx, all[i].t, all[i].name, "spec.num_shared_experts = 0");
        if (st != MOE_STATUS_OK) return st;
    }
    return MOE_STATUS_OK;
}

static moe_status check_desc(moe_context_t *ctx, const moe_layer_spec *s, const moe_weights_desc *d) {
    const int64_t E = s->num_experts, H = s->hidden;
    if ((unsigned)d->layout > MOE_LAYOUT_INTERLEAVED)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "moe_weights_create: desc.layout = %d, expected SEPARATE (0), CONCAT (1) or INTERLEAVED (2)",
                          (int)d->layout);
    expert_tensors routed = routed_tensors(d, s);
    moe_status st = check_expert_tensors(ctx, s, d->layout, &routed);
    if (st != MOE_STATUS_OK) return st;

    /* Router side: all fp32 after packing; the router itself is optional. */
    const int64_t dims_EH[2] = {E, H}, dims_E[1] = {E};
    if (moe_tensor_present(&d->router)) {
        st = check_present(ctx, &d->router, "desc.router", 2, dims_EH, MOE__FLOAT_DTYPES);
        if (st != MOE_STATUS_OK) return st;
    }
    st = s->router_has_bias ? check_present(ctx, &d->router_bias, "desc.router_bias", 1, dims_E, MOE__FLOAT_DTYPES)
                            : check_absent(ctx, &d->router_bias, "desc.router_bias", "spec.router_has_bias = 0");
    if (st != MOE_STATUS_OK) return st;
    st = s->use_correction_bias
             ? check_present(ctx, &d->correction_bias, "desc.correction_bias", 1, dims_E, MOE__FLOAT_DTYPES)
             : check_absent(ctx, &d->correction_bias, "desc.correction_bias", "spec.use_correction_bias = 0");
    if (st != MOE_STATUS_OK) return st;

    /* Shared expert. */
    if (s->num_shared_experts > 0) {
        expert_tensors shared = shared_tensors(d, s);
        st = check_expert_tensors(ctx, s, d->layout, &shared);
    } else {
        st = check_no_shared(ctx, d);
    }
    if (st != MOE_STATUS_OK) return st;
    if (!s->shared_gate)
        return check_absent(ctx, &d->shared_gate_weight, "desc.shared_gate_weight", "spec.shared_gate = 0");
    const moe_tensor *g = &d->shared_gate_weight;
    if (moe_tensor_present(g) && g->ndim == 2) {
        const int64_t dims_1H[2] = {1, H};
        return check_present(ctx, g, "desc.shared_gate_weight", 2, dims_1H, MOE__FLOAT_DTYPES);
    }
    const int64_t dims_H[1] = {H};
    return check_present(ctx, g, "desc.shared_gate_weight", 1, dims_H, MOE__FLOAT_DTYPES);
}

/* ---------------------------------------------------------------------------------------
 * Reading the caller's tensors.
 * ------------------------------------------------------------------------------------- */

/* Row r of matrix e of t ([E, rows, cols], or [rows, cols] when 2-D; e ignored) as fp32,
 * dequantised with `scale` [E, ceil(rows/128), ceil(cols/128)] when t is e4m3. */
static void read_row(const moe_tensor *t, const moe_tensor *scale, int64_t e, int64_t r, float *out) {
    const int32_t nd = t->ndim;
    const int64_t cols = t->shape[nd - 1], sc = moe__stride(t, nd - 1);
    const int64_t base = (nd == 3 ? e * moe__stride(t, 0) : 0) + r * moe__stride(t, nd - 2);
    switch (t->dtype) {
    case MOE_DTYPE_F32:
        for (int64_t c = 0; c < cols; c++) out[c] = ((const float *)t->data)[base + c * sc];
        break;
    case MOE_DTYPE_F16:
        for (int64_t c = 0; c < cols; c++) out[c] = moe_f16_to_float(((const uint16_t *)t->data)[base + c * sc]);
        break;
    case MOE_DTYPE_BF16: /* bf16 is the top half of a float: moe_bf16_to_float, inlined */
        for (int64_t c = 0; c < cols; c++) {
            const uint32_t bits = (uint32_t)((const uint16_t *)t->data)[base + c * sc] << 16;
            memcpy(&out[c], &bits, sizeof bits);
        }
        break;
    case MOE_DTYPE_E4M3:
        for (int64_t c = 0; c < cols; c += 128) {
            const int64_t idx[3] = {e, r / 128, c / 128};
            const float s = moe__tensor_get(scale, idx);
            const int64_t c1 = c + 128 < cols ? c + 128 : cols;
            for (int64_t j = c; j < c1; j++) out[j] = moe_e4m3_to_float(((const uint8_t *)t->data)[base + j * sc]) * s;
        }
        break;
    default: /* excluded by validation */
        for (int64_t c = 0; c < cols; c++) out[c] = 0.0f;
        break;
    }
}

/* Element i of a bias row: [E, n] tensor at (e, i), or [n] at (i). */
static float read_bias(const moe_tensor *t, int64_t e, int64_t i) {
    const int64_t idx2[2] = {e, i}, idx1[1] = {i};
    return moe__tensor_get(t, t->ndim == 2 ? idx2 : idx1);
}

/* Expert e's fp32 W13 [R13, H] in packed row order, and its bias [R13] (dst or b13 may be
 * NULL: only the other is built). */
static void build_w13(const moe_layer_spec *s, moe_gate_up_layout layout, const expert_tensors *x, int64_t e,
                      float *dst, float *b13) {
    const bool gated = moe_activation_is_gated(s->activation);
    const int64_t R13 = moe__w13_rows(s, x->I), H = s->hidden;
    for (int64_t r = 0; r < R13; r++) {
        int which;
        int64_t src_row;
        w13_origin(layout, gated, x->I, r, &which, &src_row);
        if (dst) read_row(x->mat[which], x->scale[which], e, src_row, dst + r * H);
        if (b13) b13[r] = read_bias(x->bias[which], e, src_row);
    }
}

/* Expert e's fp32 down [H, I] and its bias [H] (dst or b2 may be NULL). */
static void build_w2(const moe_layer_spec *s, const expert_tensors *x, int64_t e, float *dst, float *b2) {
    for (int64_t h = 0; h < s->hidden; h++) {
        if (dst) read_row(x->down, x->down_scale, e, h, dst + h * x->I);
        if (b2) b2[h] = read_bias(x->down_bias, e, h);
    }
}

/* ---------------------------------------------------------------------------------------
 * E4M3 checkpoints into FP8_BLOCK128 without re-quantising.
 * ------------------------------------------------------------------------------------- */

/* A run of n consecutive rows of a source tensor (rows src_row0 .. src_row0 + n - 1), bound
 * for packed rows first, first + step, first + 2 * step, ... (step 2: one half of a paired
 * W13; 1: a whole matrix). */
typedef struct source_run {
    int which; /* SRC_* (W13), unused for W2 */
    int64_t src_row0, n, first, step;
} source_run;

/* The runs that make up W13: gate then up for a gated activation (none for an INTERLEAVED
 * source, whose rows alternate), W1 for RELU2. Returns their count. */
static int w13_runs(moe_gate_up_layout layout, bool gated, int64_t I, source_run runs[2]) {
    if (!gated) {
        runs[0] = (source_run){layout == MOE_LAYOUT_SEPARATE ? SRC_GATE : SRC_GATE_UP, 0, I, 0, 1};
        return 1;
    }
    if (layout == MOE_LAYOUT_SEPARATE) {
        runs[0] = (source_run){SRC_GATE, 0, I, 0, 2};
        runs[1] = (source_run){SRC_UP, 0, I, 1, 2};
        return 2;
    }
    if (layout == MOE_LAYOUT_CONCAT) {
        runs[0] = (source_run){SRC_GATE_UP, 0, I, 0, 2};
        runs[1] = (source_run){SRC_GATE_UP, I, I, 1, 2};
        return 2;
    }
    return 0;
}

/* Whether a run of e4m3 tensor t can be copied into FP8_BLOCK128 as it is: its 128x128
 * blocks must be the packed ones, so it starts on a block boundary and ends on one or at
 * the tensor's end (else its last block holds rows of something else: CONCAT's up rows). */
static bool run_copyable(moe_format format, const moe_tensor *t, const source_run *run) {
    if (t->dtype != MOE_DTYPE_E4M3) return false;
    if (format == MOE_FORMAT_FP8_TENSOR) return true; /* one scale: see scales_uniform */
    if (format != MOE_FORMAT_FP8_BLOCK128) return false;
    const int64_t rows = t->shape[t->ndim - 2];
    return run->src_row0 % 128 == 0 && (run->n % 128 == 0 || run->src_row0 + run->n == rows);
}

/* FP8_TENSOR: whether matrix e's block scales in all n scale tensors [E, rows/128, cols/128] are
 * one value, so that its codes can be copied under that one scale (copy_run writes it). */
static bool scales_uniform(const moe_tensor *const *scales, int n, int64_t e) {
    bool have = false;
    float v = 0.0f;
    for (int i = 0; i < n; i++)
        for (int64_t r = 0; r < scales[i]->shape[1]; r++)
            for (int64_t c = 0; c < scales[i]->shape[2]; c++) {
                const int64_t at[3] = {e, r, c};
                const float x = moe__tensor_get(scales[i], at);
                if (have && x != v) return false;
                v = x, have = true;
            }
    return have;
}

/* Copies a run of matrix e of e4m3 tensor t into slot `index` of m (FP8_BLOCK128, FP8_TENSOR): each code
 * byte as it is, and each block row's scales from `scale` [E, ceil(rows/128), ceil(cols/128)]
 * to the scale row that moe__qmatrix_scale_row names for the run's packed rows. */
static void copy_run(moe__qmatrix *m, int64_t index, const source_run *run, const moe_tensor *t,
                     const moe_tensor *scale, int64_t e) {
    const int64_t cols = m->cols, scale_cols = m->layout.scale_cols;
    uint8_t *codes = m->codes + (size_t)index * m->layout.code_bytes;
    float *scales = (float *)m->scales + (size_t)index * (size_t)(m->layout.scale_rows * scale_cols);
    const uint8_t *src = t->data;
    const float *src_scales = scale->data;
    const int64_t t_e = moe__stride(t, 0), t_r = moe__stride(t, 1), t_c = moe__stride(t, 2);
    const int64_t s_e = moe__stride(scale, 0), s_r = moe__stride(scale, 1), s_c = moe__stride(scale, 2);
    for (int64_t i = 0; i < run->n; i++) {
        const int64_t r = run->first + run->step * i, src_row = run->src_row0 + i;
        const uint8_t *in = src + e * t_e + src_row * t_r;
        for (int64_t c = 0; c < cols; c++) codes[r * cols + c] = in[c * t_c];
        if (i % 128 == 0) { /* the first row of a block row: its scales */
            float *out = scales + moe__qmatrix_scale_row(m, r) * scale_cols;
            for (int64_t b = 0; b < scale_cols; b++) out[b] = src_scales[e * s_e + (src_row / 128) * s_r + b * s_c];
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * Allocation, packing, free.
 * ------------------------------------------------------------------------------------- */

static size_t qmatrix_bytes(const moe__qmatrix *m) {
    if (m->count == 0) return 0;
    size_t each = m->layout.code_bytes + moe__qmatrix_scale_bytes(m) + (m->tensor_scales ? sizeof(float) : 0);
    return (size_t)m->count * each;
}

/* n floats (n >= 0; at least one byte so the pointer is never NULL); false on overflow. */
static bool alloc_floats(int64_t n, float **out, size_t *bytes) {
    int64_t b;
    *out = NULL;
    if (!moe__mul64(n, (int64_t)sizeof(float), &b) || (uint64_t)b > (uint64_t)SIZE_MAX) return false;
    *out = malloc(b > 0 ? (size_t)b : 1);
    if (*out) *bytes += (size_t)b;
    return *out != NULL;
}

/* A [n] or [1, n] float tensor to fp32. */
static void read_vector(const moe_tensor *t, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) {
        const int64_t idx2[2] = {0, i}, idx1[1] = {i};
        out[i] = moe__tensor_get(t, t->ndim == 2 ? idx2 : idx1);
    }
}

void moe_weights_free(moe_weights_t *w) {
    if (!w) return;
    if (w->device) moe__cuda_weights_free(w);
    moe__qmatrix_free(&w->w13);
    moe__qmatrix_free(&w->w2);
    moe__qmatrix_free(&w->s13);
    moe__qmatrix_free(&w->s2);
    free(w->b13);
    free(w->b2);
    free(w->router);
    free(w->router_bias);
    free(w->correction_bias);
    free(w->sb13);
    free(w->sb2);
    free(w->shared_gate);
    free(w);
}

/* Wraps a failure of a helper that reported on this thread only (the qmatrix functions). */
static moe_status packing_failed(moe_context_t *ctx, moe_status st, const char *what) {
    char inner[MOE__ERROR_MAX]; /* a copy: moe__error rewrites the buffer moe_last_error(NULL) points to */
    snprintf(inner, sizeof inner, "%s", moe_last_error(NULL));
    return moe__error(ctx, st, "moe_weights_create: packing %s: %s", what, inner);
}

/* Quantises every expert of one stack: W13 into w13 and W2 into w2 (slots 0..count-1), the
 * biases into b13/b2 when given. Experts are independent, so they are packed in parallel,
 * each thread with its own fp32 scratch matrix. */
static moe_status pack_experts(moe_context_t *ctx, const moe_layer_spec *s, moe_gate_up_layout layout,
                               const expert_tensors *x, int64_t count, moe__qmatrix *w13, moe__qmatrix *w2,
                               float *b13, float *b2) {
    const int64_t H = s->hidden, R13 = w13->rows;
    int64_t w13_elems, w2_elems, scratch_bytes;
    if (!moe__mul64(R13, H, &w13_elems) || !moe__mul64(H, x->I, &w2_elems) ||
        !moe__mul64(w13_elems > w2_elems ? w13_elems : w2_elems, (int64_t)sizeof(float), &scratch_bytes) ||
        (uint64_t)scratch_bytes > (uint64_t)SIZE_MAX)
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "moe_weights_create: one expert's fp32 matrix overflows size_t");
    /* Which parts go over as they are (e4m3 into FP8_BLOCK128); W13 is quantised from fp32
     * unless all its runs are copied, and copied runs then overwrite what was quantised. */
    const bool gated = moe_activation_is_gated(s->activation);
    source_run runs[2];
    const int nruns = w13_runs(layout, gated, x->I, runs);
    bool copy13[2] = {false, false}, copy13_all = nruns > 0;
    for (int i = 0; i < nruns; i++) {
        copy13[i] = run_copyable(w13->format, x->mat[runs[i].which], &runs[i]);
        copy13_all &= copy13[i];
    }
    const source_run down_run = {0, 0, H, 0, 1};
    const bool copy2 = run_copyable(w2->format, x->down, &down_run);

    int threads = moe__team_size(ctx, count, NULL);
    (void)threads; /* used only by the OpenMP pragma */
    moe_status failed = MOE_STATUS_OK;
    char message[MOE__ERROR_MAX] = "";
#pragma omp parallel num_threads(threads)
    {
        float *scratch = malloc((size_t)scratch_bytes);
#pragma omp for schedule(dynamic, 1)
        for (int64_t e = 0; e < count; e++) {
            moe_status st = MOE_STATUS_OUT_OF_MEMORY;
            const char *msg = "out of host memory for the packing scratch matrix";
            if (scratch) {
                /* FP8_TENSOR has one scale a matrix: W13 is copied whole or not at all, and only
                 * where this expert's scales are one value. */
                bool c13_all = copy13_all, c13[2] = {copy13[0], copy13[1]}, c2 = copy2;
                if (w13->format == MOE_FORMAT_FP8_TENSOR) {
                    if (c13_all) { /* (then every run is an e4m3 tensor with its scales) */
                        const moe_tensor *sc13[2] = {x->scale[runs[0].which], x->scale[runs[nruns - 1].which]};
                        c13_all = scales_uniform(sc13, nruns, e);
                    }
                    c13[0] = c13[1] = c13_all;
                }
                if (w2->format == MOE_FORMAT_FP8_TENSOR) c2 = c2 && scales_uniform(&x->down_scale, 1, e);
                build_w13(s, layout, x, e, c13_all ? NULL : scratch, b13 ? b13 + e * R13 : NULL);
                st = c13_all ? MOE_STATUS_OK : moe__qmatrix_set(w13, e, scratch);
                for (int i = 0; i < nruns && st == MOE_STATUS_OK; i++)
                    if (c13[i]) copy_run(w13, e, &runs[i], x->mat[runs[i].which], x->scale[runs[i].which], e);
                if (st == MOE_STATUS_OK) {
                    build_w2(s, x, e, c2 ? NULL : scratch, b2 ? b2 + e * H : NULL);
                    if (c2) copy_run(w2, e, &down_run, x->down, x->down_scale, e);
                    else st = moe__qmatrix_set(w2, e, scratch);
                }
                msg = moe_last_error(NULL);
            }
            if (st != MOE_STATUS_OK) {
#pragma omp critical(moe_weights_pack_error)
                if (failed == MOE_STATUS_OK) {
                    failed = st;
                    snprintf(message, sizeof message, "expert %lld: %s", (long long)e, msg);
                }
            }
        }
        free(scratch);
    }
    if (failed != MOE_STATUS_OK)
        return moe__error(ctx, failed, "moe_weights_create: packing the %sexperts: %s", x->prefix, message);
    return MOE_STATUS_OK;
}

moe_status moe_weights_create(moe_context_t *ctx, const moe_layer_spec *spec, const moe_weights_desc *desc,
                              moe_format format, moe_weights_t **out) {
    static const char fn[] = "moe_weights_create";
    if (!ctx) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: ctx is NULL", fn);
    moe__clear_error(ctx);
    if (!out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: out is NULL", fn);
    *out = NULL;
    if (!spec) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: spec is NULL", fn);
    if (!desc) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: desc is NULL", fn);
    moe_status st = moe_layer_spec_validate(ctx, spec);
    if (st != MOE_STATUS_OK) return st;
    if ((unsigned)format >= MOE_FORMAT_COUNT_)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: format = %d is not a moe_format", fn, (int)format);
    st = check_desc(ctx, spec, desc);
    if (st != MOE_STATUS_OK) return st;

    const int64_t E = spec->num_experts, H = spec->hidden, I = spec->intermediate;
    const int64_t R13 = moe__w13_rows(spec, I);
    const bool shared = spec->num_shared_experts > 0;
    const int64_t Is = shared ? spec->shared_intermediate : 0, R13s = shared ? moe__w13_rows(spec, Is) : 0;
    moe_weights_t *w = calloc(1, sizeof *w);
    if (!w) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
    w->spec = *spec;
    w->format = format;
    w->backend = ctx->backend;

    /* Allocate everything first, so that a failure frees and returns before any work. */
    size_t bytes = 0;
    int64_t n;
    /* W13 of a gated activation holds gate/up pairs: 2-D blocks over each half. */
    const bool gated = moe_activation_is_gated(spec->activation);
    if ((st = gated ? moe__qmatrix_alloc_paired(&w->w13, format, E, R13, H)
                    : moe__qmatrix_alloc(&w->w13, format, E, R13, H)) != MOE_STATUS_OK) {
        st = packing_failed(ctx, st, "W13 [E, R13, H]");
        goto fail;
    }
    if ((st = moe__qmatrix_alloc(&w->w2, format, E, H, I)) != MOE_STATUS_OK) {
        st = packing_failed(ctx, st, "W2 [E, H, I]");
        goto fail;
    }
    if (shared && (st = gated ? moe__qmatrix_alloc_paired(&w->s13, format, 1, R13s, H)
                              : moe__qmatrix_alloc(&w->s13, format, 1, R13s, H)) != MOE_STATUS_OK) {
        st = packing_failed(ctx, st, "the shared W13 [R13s, H]");
        goto fail;
    }
    if (shared && (st = moe__qmatrix_alloc(&w->s2, format, 1, H, Is)) != MOE_STATUS_OK) {
        st = packing_failed(ctx, st, "the shared W2 [H, Is]");
        goto fail;
    }
    bool ok = true;
    if (spec->expert_has_bias) {
        ok = moe__mul64(E, R13, &n) && alloc_floats(n, &w->b13, &bytes) && moe__mul64(E, H, &n) &&
             alloc_floats(n, &w->b2, &bytes);
        if (ok && shared) ok = alloc_floats(R13s, &w->sb13, &bytes) && alloc_floats(H, &w->sb2, &bytes);
    }
    if (ok && moe_tensor_present(&desc->router)) ok = moe__mul64(E, H, &n) && alloc_floats(n, &w->router, &bytes);
    if (ok && spec->router_has_bias) ok = alloc_floats(E, &w->router_bias, &bytes);
    if (ok && spec->use_correction_bias) ok = alloc_floats(E, &w->correction_bias, &bytes);
    if (ok && spec->shared_gate) ok = alloc_floats(H, &w->shared_gate, &bytes);
    if (!ok) {
        st = moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of host memory for the biases and router", fn);
        goto fail;
    }

    /* Pack the experts. */
    expert_tensors routed = routed_tensors(desc, spec);
    st = pack_experts(ctx, spec, desc->layout, &routed, E, &w->w13, &w->w2, w->b13, w->b2);
    if (st != MOE_STATUS_OK) goto fail;
    if (shared) {
        expert_tensors sh = shared_tensors(desc, spec);
        st = pack_experts(ctx, spec, desc->layout, &sh, 1, &w->s13, &w->s2, w->sb13, w->sb2);
        if (st != MOE_STATUS_OK) goto fail;
    }

    /* The fp32 side: router, its bias, the correction bias, the shared gate. */
    if (w->router)
        for (int64_t e = 0; e < E; e++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t at[2] = {e, h};
                w->router[e * H + h] = moe__tensor_get(&desc->router, at);
            }
    if (w->router_bias) read_vector(&desc->router_bias, E, w->router_bias);
    if (w->correction_bias) read_vector(&desc->correction_bias, E, w->correction_bias);
    if (w->shared_gate) read_vector(&desc->shared_gate_weight, H, w->shared_gate);

    w->bytes = bytes + qmatrix_bytes(&w->w13) + qmatrix_bytes(&w->w2) + qmatrix_bytes(&w->s13) +
               qmatrix_bytes(&w->s2);
    if (ctx->backend == MOE_BACKEND_CUDA) {
        st = moe__cuda_weights_upload(ctx, w);
        if (st != MOE_STATUS_OK) goto fail;
    }
    *out = w;
    return MOE_STATUS_OK;

fail:
    moe_weights_free(w);
    return st;
}

const moe_layer_spec *moe_weights_spec(const moe_weights_t *w) { return w ? &w->spec : NULL; }

moe_format moe_weights_format(const moe_weights_t *w) { return w ? w->format : MOE_FORMAT_F32; }

size_t moe_weights_bytes(const moe_weights_t *w) { return w ? w->bytes : 0; }

moe_status moe_weights_unpack(moe_context_t *ctx, const moe_weights_t *w, int64_t expert, float *gate, float *up,
                              float *down) {
    static const char fn[] = "moe_weights_unpack";
    moe__clear_error(ctx);
    if (!w) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: w is NULL", fn);
    const moe_layer_spec *s = &w->spec;
    const bool gated = moe_activation_is_gated(s->activation);
    if (!gate) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: gate is NULL", fn);
    if (!up && gated)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: up is NULL, but activation %s is gated", fn,
                          moe_activation_name(s->activation));
    if (!down) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: down is NULL", fn);
    const moe__qmatrix *w13 = &w->w13, *w2 = &w->w2;
    int64_t index = expert;
    if (expert == -1) {
        if (w->s13.count == 0)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: expert = -1 asks for the shared expert, but the weights have none", fn);
        w13 = &w->s13, w2 = &w->s2, index = 0;
    } else if (expert < 0 || expert >= s->num_experts) {
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: expert = %lld, expected -1 (shared) or 0..%lld", fn,
                          (long long)expert, (long long)s->num_experts - 1);
    }
    const int64_t H = s->hidden, units = gated ? w13->rows / 2 : w13->rows;
    for (int64_t i = 0; i < units; i++) {
        if (gated) {
            moe__qmatrix_row(w13, index, 2 * i, gate + i * H);
            moe__qmatrix_row(w13, index, 2 * i + 1, up + i * H);
        } else {
            moe__qmatrix_row(w13, index, i, gate + i * H); /* RELU2: `up` is not written */
        }
    }
    for (int64_t h = 0; h < H; h++) moe__qmatrix_row(w2, index, h, down + h * w2->cols);
    return MOE_STATUS_OK;
}
