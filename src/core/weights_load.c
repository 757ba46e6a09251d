/* moe_weights_load: finds one MoE layer's tensors in a checkpoint, reads them into host buffers
 * and hands them to moe_weights_create, which packs them.
 *
 * Layouts understood (P = "model.layers.L.mlp."):
 *   per expert   P experts.N.{gate,up,down}_proj.weight (+ .weight_scale_inv for FP8 E4M3,
 *                + .bias), router P gate.weight; stacked here into [E, rows, cols] buffers in
 *                the checkpoint's dtype (nothing is converted)
 *   Mixtral      model.layers.L.block_sparse_moe.experts.N.{w1,w3,w2}.weight, router
 *                block_sparse_moe.gate.weight
 *   GPT-OSS      P experts.gate_up_proj [E, H, 2I] (columns interleaved gate/up) and
 *                P experts.down_proj [E, I, H], with _bias, router P router.{weight,bias};
 *                handed over as strided views, not copied. The MXFP4 release
 *                (experts.*_blocks / *_scales) is decoded to fp32 here, since
 *                moe_weights_create takes no FP4 input.
 *   Llama-4      model.layers.L.feed_forward.experts.{gate_up_proj [E, H, 2I] (columns gate
 *                then up), down_proj [E, I, H]}, router feed_forward.router.weight, shared
 *                expert feed_forward.shared_expert.*; strided views as for GPT-OSS
 *   shared       P shared_experts.* (DeepSeek) or P shared_expert.* + shared_expert_gate.weight
 *                (Qwen); FP8 shared weights are decoded to fp32 (the descriptor has no scales
 *                for the shared expert).
 * A tensor the spec does not ask for but the checkpoint has (biases, correction bias, shared
 * expert, shared gate) is refused: loading without it would silently compute something else. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_LEN 512
#define MAX_BUFFERS 48
#define FLOATS (MOE__DT(MOE_DTYPE_F32) | MOE__DT(MOE_DTYPE_F16) | MOE__DT(MOE_DTYPE_BF16))
#define WEIGHTS (FLOATS | MOE__DT(MOE_DTYPE_E4M3))

typedef struct loader {
    moe_context_t *ctx;
    const moe_checkpoint_t *ck;
    const moe_layer_spec *spec;
    int64_t layer;
    char prefix[NAME_LEN]; /* "model.layers.L.mlp." or "model.layers.L.block_sparse_moe." */
    void *buffers[MAX_BUFFERS]; /* everything allocated here, freed at the end */
    int buffer_count;
} loader;

/* ---- helpers ---------------------------------------------------------------------------- */

static void *owned_alloc(loader *L, int64_t bytes, const char *what) {
    if (L->buffer_count == MAX_BUFFERS) {
        moe__error(L->ctx, MOE_STATUS_INTERNAL, "moe_weights_load: more than %d buffers", MAX_BUFFERS);
        return NULL;
    }
    if (bytes < 0 || (uint64_t)bytes > (uint64_t)SIZE_MAX) {
        moe__error(L->ctx, MOE_STATUS_OVERFLOW, "moe_weights_load: %s: size overflows", what);
        return NULL;
    }
    void *p = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (!p) {
        moe__error(L->ctx, MOE_STATUS_OUT_OF_MEMORY, "moe_weights_load: no memory for %s (%lld bytes)", what,
                   (long long)bytes);
        return NULL;
    }
    L->buffers[L->buffer_count++] = p;
    return p;
}

/* Status of the last owned_alloc failure (it recorded the message). */
static moe_status alloc_status(const loader *L) {
    return L->buffer_count == MAX_BUFFERS ? MOE_STATUS_INTERNAL : MOE_STATUS_OUT_OF_MEMORY;
}

static void name_of(char *out, const loader *L, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* prefix + formatted suffix. */
static void name_of(char *out, const loader *L, const char *fmt, ...) {
    size_t n = (size_t)snprintf(out, NAME_LEN, "%s", L->prefix);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, NAME_LEN - n, fmt, ap);
    va_end(ap);
}

/* Whether the checkpoint has a tensor of that name (asked without a context, so a miss leaves
 * no message on the caller's context). */
static int has(const loader *L, const char *name) {
    moe_tensor_info info;
    return moe_checkpoint_tensor_info(NULL, L->ck, name, &info) != MOE_STATUS_NOT_FOUND;
}

static void shape_text(char *out, size_t cap, int32_t ndim, const int64_t *dims) {
    size_t n = (size_t)snprintf(out, cap, "[");
    for (int32_t d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(out + n, cap - n, "%s%lld", d ? ", " : "", (long long)dims[d]);
    if (n < cap) snprintf(out + n, cap - n, "]");
}

static void dtype_list(char *out, size_t cap, uint32_t mask) {
    size_t n = 0;
    out[0] = '\0';
    for (int d = 0; d < MOE_DTYPE_COUNT_ && n < cap; d++)
        if (mask & MOE__DT(d)) n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? " or " : "", moe_dtype_name(d));
}

/* Describes a tensor and checks its shape (dims[i] == -1: any) and dtype. */
static moe_status info_checked(loader *L, const char *name, int32_t ndim, const int64_t *dims, uint32_t mask,
                               moe_tensor_info *info) {
    moe_status st = moe_checkpoint_tensor_info(L->ctx, L->ck, name, info);
    if (st == MOE_STATUS_NOT_FOUND)
        return moe__error(L->ctx, st, "moe_weights_load: layer %lld: tensor '%s' not found in the checkpoint",
                          (long long)L->layer, name);
    if (st != MOE_STATUS_OK) return st;
    int ok = info->ndim == ndim;
    for (int32_t d = 0; ok && d < ndim; d++) ok = dims[d] < 0 || info->shape[d] == dims[d];
    if (!ok) {
        char got[160], want[160];
        shape_text(got, sizeof got, info->ndim, info->shape);
        shape_text(want, sizeof want, ndim, dims);
        return moe__error(L->ctx, MOE_STATUS_SHAPE_MISMATCH,
                          "moe_weights_load: layer %lld: tensor '%s' has shape %s, expected %s", (long long)L->layer,
                          name, got, want);
    }
    if (!(mask & MOE__DT(info->dtype))) {
        char want[96];
        dtype_list(want, sizeof want, mask);
        return moe__error(L->ctx, MOE_STATUS_DTYPE_MISMATCH,
                          "moe_weights_load: layer %lld: tensor '%s' has dtype %s, expected %s", (long long)L->layer,
                          name, moe_dtype_name(info->dtype), want);
    }
    return MOE_STATUS_OK;
}

/* Reads a whole tensor of the expected shape into a new buffer. */
static moe_status load_tensor(loader *L, const char *name, int32_t ndim, const int64_t *dims, uint32_t mask,
                              moe_tensor *out) {
    moe_tensor_info info;
    moe_status st = info_checked(L, name, ndim, dims, mask, &info);
    if (st != MOE_STATUS_OK) return st;
    void *buf = owned_alloc(L, (int64_t)info.bytes, name);
    if (!buf) return alloc_status(L);
    st = moe_checkpoint_read(L->ctx, L->ck, name, buf, info.bytes);
    if (st != MOE_STATUS_OK) return st;
    memset(out, 0, sizeof *out);
    out->data = buf;
    out->dtype = info.dtype;
    out->ndim = info.ndim;
    for (int32_t d = 0; d < info.ndim; d++) out->shape[d] = info.shape[d];
    out->memory = MOE_MEMORY_HOST;
    return MOE_STATUS_OK;
}

static moe_status refuse_unasked(loader *L, const char *name, const char *field) {
    return moe__error(L->ctx, MOE_STATUS_INVALID_ARGUMENT,
                      "moe_weights_load: layer %lld: the checkpoint has '%s' but spec.%s is 0; set it, or the layer "
                      "would compute without it",
                      (long long)L->layer, name, field);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- per-expert stacks ------------------------------------------------------------------- */

/* Stacks tensor `<base>N.<proj>.<suffix>` of experts N = 0..count-1, each of shape dims
 * (ndim 1 or 2), into one [count, dims...] buffer of the first expert's dtype. */
static moe_status stack(loader *L, const char *base, int64_t count, const char *proj, const char *suffix,
                        int32_t ndim, const int64_t *dims, uint32_t mask, moe_tensor *out) {
    char name[NAME_LEN];
    uint8_t *buf = NULL;
    size_t each = 0;
    moe_dtype dtype = MOE_DTYPE_F32;
    for (int64_t e = 0; e < count; e++) {
        name_of(name, L, "%s%lld.%s.%s", base, (long long)e, proj, suffix);
        moe_tensor_info info;
        moe_status st = info_checked(L, name, ndim, dims, mask, &info);
        if (st != MOE_STATUS_OK) return st;
        if (e > 0 && info.dtype != dtype)
            return moe__error(L->ctx, MOE_STATUS_DTYPE_MISMATCH,
                              "moe_weights_load: layer %lld: tensor '%s' has dtype %s, expected %s like expert 0's "
                              "(the experts are stacked into one tensor)",
                              (long long)L->layer, name, moe_dtype_name(info.dtype), moe_dtype_name(dtype));
        if (e == 0) {
            dtype = info.dtype;
            each = info.bytes;
            int64_t total;
            if (!moe__mul64(count, (int64_t)each, &total))
                return moe__error(L->ctx, MOE_STATUS_OVERFLOW, "moe_weights_load: stack of '%s' overflows", name);
            if (!(buf = owned_alloc(L, total, name))) return alloc_status(L);
        }
        st = moe_checkpoint_read(L->ctx, L->ck, name, buf + (size_t)e * each, each);
        if (st != MOE_STATUS_OK) return st;
    }
    memset(out, 0, sizeof *out);
    out->data = buf;
    out->dtype = dtype;
    out->ndim = ndim + 1;
    out->shape[0] = count;
    for (int32_t d = 0; d < ndim; d++) out->shape[d + 1] = dims[d];
    out->memory = MOE_MEMORY_HOST;
    return MOE_STATUS_OK;
}

/* One projection of every routed expert: weights [E, rows, cols], FP8 block scales when the
 * weights are E4M3, and the [E, rows] bias when the spec asks for biases. */
static moe_status load_projection(loader *L, const char *base, const char *proj, int64_t rows, int64_t cols,
                                  moe_tensor *w, moe_tensor *scale, moe_tensor *bias) {
    int64_t E = L->spec->num_experts;
    int64_t dims[2] = {rows, cols};
    moe_status st = stack(L, base, E, proj, "weight", 2, dims, WEIGHTS, w);
    if (st != MOE_STATUS_OK) return st;
    if (w->dtype == MOE_DTYPE_E4M3) {
        int64_t sdims[2] = {ceil_div(rows, 128), ceil_div(cols, 128)};
        st = stack(L, base, E, proj, "weight_scale_inv", 2, sdims, MOE__DT(MOE_DTYPE_F32), scale);
        if (st != MOE_STATUS_OK) return st;
    }
    char name[NAME_LEN];
    name_of(name, L, "%s0.%s.bias", base, proj);
    if (L->spec->expert_has_bias) return stack(L, base, E, proj, "bias", 1, &rows, FLOATS, bias);
    if (has(L, name)) return refuse_unasked(L, name, "expert_has_bias");
    return MOE_STATUS_OK;
}

/* Routed experts stored one by one (HF per-expert names, or Mixtral's w1/w3/w2). */
static moe_status load_per_expert(loader *L, const char *gate, const char *up, const char *down,
                                  moe_weights_desc *desc) {
    const moe_layer_spec *s = L->spec;
    int64_t E = s->num_experts, H = s->hidden, I = s->intermediate;
    char name[NAME_LEN];
    name_of(name, L, "experts.%lld.%s.weight", (long long)E, down);
    if (has(L, name))
        return moe__error(L->ctx, MOE_STATUS_SHAPE_MISMATCH,
                          "moe_weights_load: layer %lld: the checkpoint has '%s', more than spec.num_experts = %lld",
                          (long long)L->layer, name, (long long)E);
    desc->layout = MOE_LAYOUT_SEPARATE;
    moe_status st;
    if (moe_activation_is_gated(s->activation)) {
        st = load_projection(L, "experts.", gate, I, H, &desc->gate, &desc->gate_scale, &desc->gate_bias);
        if (st == MOE_STATUS_OK)
            st = load_projection(L, "experts.", up, I, H, &desc->up, &desc->up_scale, &desc->up_bias);
    } else {
        /* Not gated: one input projection. Checkpoints call it up_proj (Nemotron) or gate_proj. */
        name_of(name, L, "experts.0.%s.weight", up);
        const char *w1 = has(L, name) ? up : gate;
        st = load_projection(L, "experts.", w1, I, H, &desc->gate, &desc->gate_scale, &desc->gate_bias);
    }
    if (st == MOE_STATUS_OK)
        st = load_projection(L, "experts.", down, H, I, &desc->down, &desc->down_scale, &desc->down_bias);
    return st;
}

/* ---- GPT-OSS fused experts ---------------------------------------------------------------- */

/* The [E, H, R] / [E, I, H] bf16 (or f32/f16) tensors, as strided views of what was read. The
 * R = 2I columns are gate/up interleaved (GPT-OSS) or gate then up (concat: Llama-4). */
static moe_status load_fused(loader *L, int concat, moe_weights_desc *desc) {
    const moe_layer_spec *s = L->spec;
    int64_t E = s->num_experts, H = s->hidden, I = s->intermediate, R = moe__w13_rows(s, I);
    int gated = moe_activation_is_gated(s->activation);
    char name[NAME_LEN];
    moe_tensor gate_up, down;
    name_of(name, L, "experts.gate_up_proj");
    moe_status st = load_tensor(L, name, 3, (const int64_t[]){E, H, R}, FLOATS, &gate_up);
    if (st != MOE_STATUS_OK) return st;
    name_of(name, L, "experts.down_proj");
    st = load_tensor(L, name, 3, (const int64_t[]){E, I, H}, FLOATS, &down);
    if (st != MOE_STATUS_OK) return st;
    /* gate_up[e][h][r] is W13[e][r][h]: shape [E, R, H], strides {H*R, 1, R}. Concatenated
     * columns are handed over as two such views, gate (columns 0..I-1) and up (I..2I-1), in the
     * SEPARATE layout, so that a shared expert's separate gate and up fit beside them. */
    moe_tensor *w13 = gated && !concat ? &desc->gate_up : &desc->gate;
    *w13 = moe_tensor_3d(gate_up.data, gate_up.dtype, E, gated && concat ? I : R, H);
    w13->strides[0] = H * R;
    w13->strides[1] = 1;
    w13->strides[2] = R;
    if (gated && concat) {
        desc->up = *w13;
        desc->up.data = (uint8_t *)gate_up.data + (size_t)I * (size_t)(moe_dtype_bits(gate_up.dtype) / 8);
    }
    desc->layout = gated && !concat ? MOE_LAYOUT_INTERLEAVED : MOE_LAYOUT_SEPARATE;
    /* down[e][i][h] is W2[e][h][i]: shape [E, H, I], strides {I*H, 1, H}. */
    desc->down = moe_tensor_3d(down.data, down.dtype, E, H, I);
    desc->down.strides[0] = I * H;
    desc->down.strides[1] = 1;
    desc->down.strides[2] = H;
    return MOE_STATUS_OK;
}

/* The MXFP4 release: <w>_blocks [E, rows, cols/32, 16] u8 (two e2m1 codes a byte, low nibble
 * first) and <w>_scales [E, rows, cols/32] u8 (e8m0) — exactly moefuse's MXFP4 layout, so each
 * expert decodes with moe_dequantize into fp32 [E, rows, cols], already in W13/W2 orientation. */
static moe_status load_mxfp4(loader *L, const char *w, int64_t rows, int64_t cols, moe_tensor *out) {
    int64_t E = L->spec->num_experts;
    char name[NAME_LEN];
    if (cols % 32 != 0)
        return moe__error(L->ctx, MOE_STATUS_SHAPE_MISMATCH,
                          "moe_weights_load: layer %lld: MXFP4 %s needs a multiple of 32 columns, spec gives %lld",
                          (long long)L->layer, w, (long long)cols);
    moe_tensor blocks, scales;
    name_of(name, L, "experts.%s_blocks", w);
    moe_status st = load_tensor(L, name, 4, (const int64_t[]){E, rows, cols / 32, 16}, MOE__DT(MOE_DTYPE_U8), &blocks);
    if (st != MOE_STATUS_OK) return st;
    name_of(name, L, "experts.%s_scales", w);
    st = load_tensor(L, name, 3, (const int64_t[]){E, rows, cols / 32}, MOE__DT(MOE_DTYPE_U8), &scales);
    if (st != MOE_STATUS_OK) return st;
    /* e8m0 0xFF is NaN: a corrupt release would decode to whole NaN blocks with status OK. */
    const uint8_t *codes = scales.data;
    for (int64_t i = 0; i < E * rows * (cols / 32); i++)
        if (codes[i] == 0xFF)
            return moe__error(L->ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "moe_weights_load: %s[%lld][%lld][%lld] = 0xff (e8m0 NaN), expected a finite scale",
                              name, (long long)(i / (rows * (cols / 32))), (long long)(i / (cols / 32) % rows),
                              (long long)(i % (cols / 32)));
    int64_t per, bytes;
    if (!moe__mul64(rows, cols, &per) || !moe__mul64(per, E * (int64_t)sizeof(float), &bytes))
        return moe__error(L->ctx, MOE_STATUS_OVERFLOW, "moe_weights_load: %s: size overflows", name);
    float *f = owned_alloc(L, bytes, name);
    if (!f) return alloc_status(L);
    for (int64_t e = 0; e < E && st == MOE_STATUS_OK; e++)
        st = moe_dequantize(MOE_FORMAT_MXFP4, (const uint8_t *)blocks.data + e * rows * (cols / 2),
                            (const uint8_t *)scales.data + e * rows * (cols / 32), 1.0f, rows, cols, f + e * per, cols);
    if (st != MOE_STATUS_OK) return st;
    *out = moe_tensor_3d(f, MOE_DTYPE_F32, E, rows, cols);
    return MOE_STATUS_OK;
}

static moe_status load_gpt_oss(loader *L, int mxfp4, int concat, moe_weights_desc *desc) {
    const moe_layer_spec *s = L->spec;
    int64_t E = s->num_experts, H = s->hidden, I = s->intermediate, R = moe__w13_rows(s, I);
    int gated = moe_activation_is_gated(s->activation);
    moe_status st;
    if (mxfp4) {
        st = load_mxfp4(L, "gate_up_proj", R, H, gated ? &desc->gate_up : &desc->gate);
        if (st == MOE_STATUS_OK) st = load_mxfp4(L, "down_proj", H, I, &desc->down);
        desc->layout = gated ? MOE_LAYOUT_INTERLEAVED : MOE_LAYOUT_SEPARATE;
    } else {
        st = load_fused(L, concat, desc);
    }
    if (st != MOE_STATUS_OK) return st;
    char name[NAME_LEN];
    name_of(name, L, "experts.gate_up_proj_bias");
    if (!s->expert_has_bias) return has(L, name) ? refuse_unasked(L, name, "expert_has_bias") : MOE_STATUS_OK;
    if (concat) /* Llama-4 has no expert biases; this loader does not split a concatenated one */
        return moe__error(L->ctx, MOE_STATUS_UNSUPPORTED,
                          "moe_weights_load: layer %lld: expert biases with Llama-4's concatenated gate_up_proj",
                          (long long)L->layer);
    st = load_tensor(L, name, 2, (const int64_t[]){E, R}, FLOATS, gated ? &desc->gate_up_bias : &desc->gate_bias);
    if (st != MOE_STATUS_OK) return st;
    name_of(name, L, "experts.down_proj_bias");
    return load_tensor(L, name, 2, (const int64_t[]){E, H}, FLOATS, &desc->down_bias);
}

/* ---- router and shared expert ----------------------------------------------------------- */

static moe_status load_router(loader *L, moe_weights_desc *desc) {
    const moe_layer_spec *s = L->spec;
    int64_t E = s->num_experts, H = s->hidden;
    char name[NAME_LEN];
    const char *base = "gate";
    name_of(name, L, "gate.weight");
    if (!has(L, name)) {
        name_of(name, L, "router.weight");
        if (has(L, name)) base = "router"; /* GPT-OSS */
    }
    name_of(name, L, "%s.weight", base);
    moe_status st = load_tensor(L, name, 2, (const int64_t[]){E, H}, FLOATS, &desc->router);
    if (st != MOE_STATUS_OK) return st;

    name_of(name, L, "%s.bias", base);
    if (s->router_has_bias)
        st = load_tensor(L, name, 1, &E, FLOATS, &desc->router_bias);
    else if (has(L, name))
        st = refuse_unasked(L, name, "router_has_bias");
    if (st != MOE_STATUS_OK) return st;

    /* DeepSeek-V3 keeps it beside the router weight; some checkpoints put it in the mlp (MiniMax);
     * Ling's descendants (Sarvam-30B, Param2-MoE) call it gate.expert_bias. */
    name_of(name, L, "%s.e_score_correction_bias", base);
    if (!has(L, name)) {
        char alt[NAME_LEN];
        name_of(alt, L, "e_score_correction_bias");
        if (!has(L, alt)) name_of(alt, L, "%s.expert_bias", base);
        if (has(L, alt)) memcpy(name, alt, sizeof name);
    }
    if (s->use_correction_bias) return load_tensor(L, name, 1, &E, FLOATS, &desc->correction_bias);
    if (has(L, name)) return refuse_unasked(L, name, "use_correction_bias");
    return MOE_STATUS_OK;
}

/* One shared-expert weight [rows, cols]; E4M3 ones are decoded to fp32 with their 128x128
 * weight_scale_inv, since the descriptor carries no shared-expert scales. */
static moe_status load_shared_weight(loader *L, const char *base, const char *proj, int64_t rows, int64_t cols,
                                     moe_tensor *out) {
    char name[NAME_LEN];
    name_of(name, L, "%s.%s.weight", base, proj);
    moe_status st = load_tensor(L, name, 2, (const int64_t[]){rows, cols}, WEIGHTS, out);
    if (st != MOE_STATUS_OK || out->dtype != MOE_DTYPE_E4M3) return st;
    moe_tensor scale;
    name_of(name, L, "%s.%s.weight_scale_inv", base, proj);
    st = load_tensor(L, name, 2, (const int64_t[]){ceil_div(rows, 128), ceil_div(cols, 128)},
                     MOE__DT(MOE_DTYPE_F32), &scale);
    if (st != MOE_STATUS_OK) return st;
    int64_t bytes;
    if (!moe__mul64(rows, cols, &bytes) || !moe__mul64(bytes, (int64_t)sizeof(float), &bytes))
        return moe__error(L->ctx, MOE_STATUS_OVERFLOW, "moe_weights_load: %s: size overflows", name);
    float *f = owned_alloc(L, bytes, name);
    if (!f) return alloc_status(L);
    st = moe_dequantize(MOE_FORMAT_FP8_BLOCK128, out->data, scale.data, 1.0f, rows, cols, f, cols);
    if (st != MOE_STATUS_OK) return st;
    *out = moe_tensor_2d(f, MOE_DTYPE_F32, rows, cols);
    return MOE_STATUS_OK;
}

static moe_status load_shared_bias(loader *L, const char *base, const char *proj, int64_t n, moe_tensor *out) {
    char name[NAME_LEN];
    name_of(name, L, "%s.%s.bias", base, proj);
    return load_tensor(L, name, 1, &n, FLOATS, out);
}

static moe_status load_shared(loader *L, moe_weights_desc *desc) {
    const moe_layer_spec *s = L->spec;
    int64_t H = s->hidden, Is = s->shared_intermediate;
    int gated = moe_activation_is_gated(s->activation);
    char probe[NAME_LEN], gate_w[NAME_LEN];
    const char *base = "shared_experts"; /* DeepSeek */
    name_of(probe, L, "%s.down_proj.weight", base);
    if (!has(L, probe)) base = "shared_expert"; /* Qwen */
    name_of(probe, L, "%s.down_proj.weight", base);
    name_of(gate_w, L, "shared_expert_gate.weight");
    if (s->num_shared_experts == 0) {
        if (has(L, probe)) return refuse_unasked(L, probe, "num_shared_experts");
        if (has(L, gate_w)) return refuse_unasked(L, gate_w, "shared_gate");
        return MOE_STATUS_OK;
    }
    const char *w1 = "gate_proj";
    name_of(probe, L, "%s.up_proj.weight", base);
    if (!gated && has(L, probe)) w1 = "up_proj";
    moe_status st = load_shared_weight(L, base, w1, Is, H, &desc->shared_gate);
    if (st == MOE_STATUS_OK && gated) st = load_shared_weight(L, base, "up_proj", Is, H, &desc->shared_up);
    if (st == MOE_STATUS_OK) st = load_shared_weight(L, base, "down_proj", H, Is, &desc->shared_down);
    if (st == MOE_STATUS_OK && s->expert_has_bias) {
        st = load_shared_bias(L, base, w1, Is, &desc->shared_gate_bias);
        if (st == MOE_STATUS_OK && gated) st = load_shared_bias(L, base, "up_proj", Is, &desc->shared_up_bias);
        if (st == MOE_STATUS_OK) st = load_shared_bias(L, base, "down_proj", H, &desc->shared_down_bias);
    }
    if (st != MOE_STATUS_OK) return st;
    if (s->shared_gate) return load_tensor(L, gate_w, 2, (const int64_t[]){1, H}, FLOATS, &desc->shared_gate_weight);
    if (has(L, gate_w)) return refuse_unasked(L, gate_w, "shared_gate");
    return MOE_STATUS_OK;
}

/* ---- entry point --------------------------------------------------------------------------- */

moe_status moe_weights_load(moe_context_t *ctx, const moe_checkpoint_t *ckpt, const moe_layer_spec *spec,
                            int64_t layer, moe_format format, moe_weights_t **out) {
    moe__clear_error(ctx);
    if (!out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_weights_load: out is NULL");
    *out = NULL;
    if (!ctx) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_weights_load: ctx is NULL"); /* before any I/O */
    if (!ckpt) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_weights_load: ckpt is NULL");
    moe_status st = moe_layer_spec_validate(ctx, spec);
    if (st != MOE_STATUS_OK) return st;
    if (layer < 0 || layer >= MOE_MAX_LAYERS)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "moe_weights_load: layer = %lld, expected 0..%d",
                          (long long)layer, MOE_MAX_LAYERS - 1);

    loader L;
    memset(&L, 0, sizeof L);
    L.ctx = ctx;
    L.ck = ckpt;
    L.spec = spec;
    L.layer = layer;
    moe_weights_desc desc;
    memset(&desc, 0, sizeof desc);

    /* Which layout: probe the first tensor of each. */
    char mlp[NAME_LEN], probe[NAME_LEN];
    snprintf(mlp, sizeof mlp, "model.layers.%lld.mlp.", (long long)layer);
    memcpy(L.prefix, mlp, sizeof mlp);
    int per_expert = 0, fused = 0, mxfp4 = 0, mixtral = 0, llama4 = 0;
    name_of(probe, &L, "experts.0.down_proj.weight");
    per_expert = has(&L, probe);
    name_of(probe, &L, "experts.down_proj");
    fused = has(&L, probe);
    name_of(probe, &L, "experts.down_proj_blocks");
    mxfp4 = has(&L, probe);
    if (!per_expert && !fused && !mxfp4) {
        snprintf(L.prefix, sizeof L.prefix, "model.layers.%lld.block_sparse_moe.", (long long)layer);
        name_of(probe, &L, "experts.0.w2.weight");
        mixtral = has(&L, probe);
        if (!mixtral) {
            snprintf(L.prefix, sizeof L.prefix, "model.layers.%lld.feed_forward.", (long long)layer);
            name_of(probe, &L, "experts.down_proj");
            llama4 = has(&L, probe);
        }
        if (!mixtral && !llama4) memcpy(L.prefix, mlp, sizeof mlp);
    }

    if (mixtral)
        st = load_per_expert(&L, "w1", "w3", "w2", &desc);
    else if (llama4)
        st = load_gpt_oss(&L, 0, 1, &desc);
    else if (fused || mxfp4)
        st = load_gpt_oss(&L, mxfp4 && !fused, 0, &desc);
    else if (per_expert)
        st = load_per_expert(&L, "gate_proj", "up_proj", "down_proj", &desc);
    else
        st = moe__error(ctx, MOE_STATUS_NOT_FOUND,
                        "moe_weights_load: layer %lld: tensor '%sexperts.0.down_proj.weight' not found in the "
                        "checkpoint (nor GPT-OSS '%sexperts.down_proj[_blocks]', nor Mixtral "
                        "'model.layers.%lld.block_sparse_moe.experts.0.w2.weight', nor Llama-4 "
                        "'model.layers.%lld.feed_forward.experts.down_proj')",
                        (long long)layer, mlp, mlp, (long long)layer, (long long)layer);
    if (st == MOE_STATUS_OK) st = load_router(&L, &desc);
    if (st == MOE_STATUS_OK) st = load_shared(&L, &desc);
    if (st == MOE_STATUS_OK) st = moe_weights_create(ctx, spec, &desc, format, out);
    for (int i = 0; i < L.buffer_count; i++) free(L.buffers[i]);
    return st;
}
