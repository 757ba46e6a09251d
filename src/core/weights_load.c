/* moe_weights_load: finds one MoE layer's tensors in a checkpoint, reads them into host buffers
 * and hands them to moe_weights_create, which packs them.
 *
 * Where: the layer's root is one of
 *   model.layers.L.                  text models
 *   model.language_model.layers.L.   transformers 5's multimodal wrappers (Qwen3-VL-MoE,
 *                                    GLM-4.5V) as they save them and as the Hub holds them
 *   language_model.model.layers.L.   llava-style Hub checkpoints and what transformers 5 writes
 *                                    for them (Llama-4, Kimi-K2.5, Mistral-3 / Mistral-Small-4)
 *   language_model.model.blocks.L.   Kimi-K2.5 as transformers 5 saves it (its rename of the
 *                                    vision tower's blocks to layers is reverted over the text
 *                                    layers too)
 * whichever holds the layer's experts; a checkpoint with experts under more than one is refused.
 * Under the root, P is the MoE block: mlp., block_sparse_moe. or feed_forward.
 *
 * Layouts understood:
 *   per expert   mlp.experts.N.{gate,up,down}_proj.weight (+ .weight_scale_inv for FP8 E4M3,
 *                + .bias), router mlp.gate.weight; stacked here into [E, rows, cols] buffers in
 *                the checkpoint's dtype (nothing is converted)
 *   Mixtral      block_sparse_moe.experts.N.{w1,w3,w2}.weight, router block_sparse_moe.gate.weight
 *   fused        P experts.gate_up_proj and P experts.down_proj (mlp.: GPT-OSS, Mistral-4,
 *                Qwen3-VL-MoE; feed_forward.: Llama-4; block_sparse_moe.: Granite-MoE-SWA), or
 *                block_sparse_moe.{input,output}_linear.weight (Granite-MoE as on the Hub and
 *                as transformers 5 writes it), with P experts.{gate_up,down}_proj_bias, router
 *                P {gate,router,router.layer}.weight; handed over as strided views, not copied.
 *                Two orientations:
 *                  out x in  gate_up [E, 2I, H], down [E, H, I]: transformers 5's own experts
 *                            modules (Mistral-4, Granite, Qwen3-VL-MoE as it saves them)
 *                  in x out  gate_up [E, H, 2I], down [E, I, H]: GPT-OSS, Llama-4, and
 *                            Qwen3-VL-MoE's Hub checkpoints
 *                told apart by shape; where one tensor fits both (H == 2I for gate_up, H == I
 *                for down) the other decides, and where neither can (ungated, H == I) or they
 *                disagree the layer is refused. gate/up are gate then up (concatenated) except
 *                in x out with spec.activation SWIGLU_OAI, which is GPT-OSS's interleaved
 *                layout (gate in even, up in odd columns): transformers 5 writes every other
 *                family concatenated (use_experts_implementation's is_concatenated), and GPT-OSS
 *                is its only interleaved one. (OpenAI's privacy filter, concatenated with the
 *                same activation and names, cannot be told apart; the config reader refuses it.)
 *                The MXFP4 release (mlp.experts.*_blocks / *_scales) is decoded to fp32 here,
 *                since moe_weights_create takes no FP4 input.
 *   shared       P shared_experts.* (DeepSeek), P shared_expert.* + shared_expert_gate.weight
 *                (Qwen, Llama-4); FP8 shared weights are decoded to fp32 (the descriptor has no
 *                scales for the shared expert).
 * A tensor the spec does not ask for but the checkpoint has (biases, correction bias, shared
 * expert, shared gate, Granite's shared_mlp) is refused: loading without it would silently
 * compute something else. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_LEN 512
#define ROOT_LEN 64 /* "language_model.model.blocks.L." with L < MOE_MAX_LAYERS */
#define MAX_BUFFERS 48
#define FLOATS (MOE__DT(MOE_DTYPE_F32) | MOE__DT(MOE_DTYPE_F16) | MOE__DT(MOE_DTYPE_BF16))
#define WEIGHTS (FLOATS | MOE__DT(MOE_DTYPE_E4M3))

typedef struct loader {
    moe_context_t *ctx;
    const moe_checkpoint_t *ck;
    const moe_layer_spec *spec;
    int64_t layer;
    char root[ROOT_LEN];   /* the layer's root: "model.layers.L.", "model.language_model.layers.L.", ... */
    char prefix[NAME_LEN]; /* root + the MoE block: "model.layers.L.mlp.", "...block_sparse_moe.", ... */
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

/* MOE_STATUS_DTYPE_MISMATCH, naming the dtypes `mask` allows, unless dtype is one of them. */
static moe_status dtype_checked(loader *L, const char *name, moe_dtype dtype, uint32_t mask) {
    if (mask & MOE__DT(dtype)) return MOE_STATUS_OK;
    char want[96];
    dtype_list(want, sizeof want, mask);
    return moe__error(L->ctx, MOE_STATUS_DTYPE_MISMATCH,
                      "moe_weights_load: layer %lld: tensor '%s' has dtype %s, expected %s", (long long)L->layer, name,
                      moe_dtype_name(dtype), want);
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
    return dtype_checked(L, name, info->dtype, mask);
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

/* ---- fused experts (GPT-OSS, Llama-4, transformers 5's experts, Granite) ----------------- */

/* The tensor names of a fused layout, after the block prefix. */
typedef struct fused_names {
    const char *gate_up, *down, *gate_up_bias, *down_bias;
} fused_names;

static const fused_names EXPERTS_NAMES = {"experts.gate_up_proj", "experts.down_proj", "experts.gate_up_proj_bias",
                                          "experts.down_proj_bias"};
static const fused_names GRANITE_NAMES = {"input_linear.weight", "output_linear.weight", "input_linear.bias",
                                          "output_linear.bias"};

/* How a [E, a, b] tensor fits a weight of `rows` outputs and `cols` inputs. */
enum { FIT_NONE = 0, FIT_OUT_IN = 1, FIT_IN_OUT = 2, FIT_BOTH = 3 };

static int fit_of(const moe_tensor_info *t, int64_t E, int64_t rows, int64_t cols) {
    if (t->ndim != 3 || t->shape[0] != E) return FIT_NONE;
    return (t->shape[1] == rows && t->shape[2] == cols ? FIT_OUT_IN : 0) |
           (t->shape[1] == cols && t->shape[2] == rows ? FIT_IN_OUT : 0);
}

/* Describes a fused tensor (any float dtype, shape checked by the caller). */
static moe_status fused_info(loader *L, const char *name, moe_tensor_info *info) {
    moe_status st = moe_checkpoint_tensor_info(L->ctx, L->ck, name, info);
    if (st == MOE_STATUS_NOT_FOUND)
        return moe__error(L->ctx, st, "moe_weights_load: layer %lld: tensor '%s' not found in the checkpoint",
                          (long long)L->layer, name);
    if (st != MOE_STATUS_OK) return st;
    return dtype_checked(L, name, info->dtype, FLOATS);
}

static moe_status fit_error(loader *L, const char *name, const moe_tensor_info *t, int64_t E, int64_t rows,
                            int64_t cols) {
    char got[160], a[160], b[160];
    shape_text(got, sizeof got, t->ndim, t->shape);
    shape_text(a, sizeof a, 3, (const int64_t[]){E, rows, cols});
    shape_text(b, sizeof b, 3, (const int64_t[]){E, cols, rows});
    return moe__error(L->ctx, MOE_STATUS_SHAPE_MISMATCH,
                      "moe_weights_load: layer %lld: tensor '%s' has shape %s, expected %s (out x in) or %s (in x out)",
                      (long long)L->layer, name, got, a, b);
}

/* Which orientation the pair is stored in: FIT_OUT_IN (gate_up [E, R, H], down [E, H, I]) or
 * FIT_IN_OUT ([E, H, R], [E, I, H]); a tensor that fits both (square) takes the other's. */
static moe_status orientation(loader *L, const char *gu_name, const moe_tensor_info *gu, const char *dn_name,
                              const moe_tensor_info *dn, int *out) {
    const moe_layer_spec *s = L->spec;
    int64_t E = s->num_experts, H = s->hidden, I = s->intermediate, R = moe__w13_rows(s, I);
    int fg = fit_of(gu, E, R, H), fd = fit_of(dn, E, H, I);
    if (fg == FIT_NONE) return fit_error(L, gu_name, gu, E, R, H);
    if (fd == FIT_NONE) return fit_error(L, dn_name, dn, E, H, I);
    int both = fg & fd;
    if (both == FIT_OUT_IN || both == FIT_IN_OUT) {
        *out = both;
        return MOE_STATUS_OK;
    }
    char g[160], d[160];
    shape_text(g, sizeof g, gu->ndim, gu->shape);
    shape_text(d, sizeof d, dn->ndim, dn->shape);
    if (both == FIT_BOTH) /* ungated with H == I: both square */
        return moe__error(L->ctx, MOE_STATUS_UNSUPPORTED,
                          "moe_weights_load: layer %lld: tensors '%s' %s and '%s' %s each fit both [E, I, H] (out x "
                          "in) and [E, H, I] (in x out), as H == I = %lld; the orientation cannot be told from the "
                          "checkpoint (give the tensors to moe_weights_create)",
                          (long long)L->layer, gu_name, g, dn_name, d, (long long)H);
    return moe__error(L->ctx, MOE_STATUS_SHAPE_MISMATCH,
                      "moe_weights_load: layer %lld: tensor '%s' %s is %s but '%s' %s is %s; expected both out x in "
                      "([E, %lld, %lld] and [E, %lld, %lld]) or both in x out ([E, %lld, %lld] and [E, %lld, %lld])",
                      (long long)L->layer, gu_name, g, fg == FIT_OUT_IN ? "out x in" : "in x out", dn_name, d,
                      fd == FIT_OUT_IN ? "out x in" : "in x out", (long long)R, (long long)H, (long long)H,
                      (long long)I, (long long)H, (long long)R, (long long)I, (long long)H);
}

/* Reads a whole tensor already described (shape checked by the caller) into a new buffer. */
static moe_status read_described(loader *L, const char *name, const moe_tensor_info *info, void **data) {
    void *buf = owned_alloc(L, (int64_t)info->bytes, name);
    if (!buf) return alloc_status(L);
    *data = buf;
    return moe_checkpoint_read(L->ctx, L->ck, name, buf, info->bytes);
}

/* The gate_up / down pair, as strided views of what was read. Sets *interleaved when the
 * layout is GPT-OSS's (see the header comment for the rule). */
static moe_status load_fused(loader *L, const fused_names *n, moe_weights_desc *desc, int *interleaved) {
    const moe_layer_spec *s = L->spec;
    int64_t E = s->num_experts, H = s->hidden, I = s->intermediate, R = moe__w13_rows(s, I);
    int gated = moe_activation_is_gated(s->activation);
    char gu_name[NAME_LEN], dn_name[NAME_LEN];
    name_of(gu_name, L, "%s", n->gate_up);
    name_of(dn_name, L, "%s", n->down);
    moe_tensor_info gu, dn;
    moe_status st = fused_info(L, gu_name, &gu);
    if (st == MOE_STATUS_OK) st = fused_info(L, dn_name, &dn);
    int orient = 0;
    if (st == MOE_STATUS_OK) st = orientation(L, gu_name, &gu, dn_name, &dn, &orient);
    void *gu_data = NULL, *dn_data = NULL;
    if (st == MOE_STATUS_OK) st = read_described(L, gu_name, &gu, &gu_data);
    if (st == MOE_STATUS_OK) st = read_described(L, dn_name, &dn, &dn_data);
    if (st != MOE_STATUS_OK) return st;
    size_t esz = (size_t)(moe_dtype_bits(gu.dtype) / 8);
    *interleaved = gated && orient == FIT_IN_OUT && s->activation == MOE_ACT_SWIGLU_OAI;
    /* gate_up as W13 [E, R, H]: in x out, element [e][h][r] is W13[e][r][h] (strides {H*R, 1,
     * R}); out x in, it is W13 itself (strides {R*H, H, 1}). Concatenated rows are handed over
     * as two such views, gate (rows 0..I-1) and up (I..2I-1), in the SEPARATE layout, so that a
     * shared expert's separate gate and up fit beside them. */
    int64_t row_stride = orient == FIT_IN_OUT ? 1 : H, col_stride = orient == FIT_IN_OUT ? R : 1;
    moe_tensor *w13 = *interleaved ? &desc->gate_up : &desc->gate;
    *w13 = moe_tensor_3d(gu_data, gu.dtype, E, gated && !*interleaved ? I : R, H);
    w13->strides[0] = H * R;
    w13->strides[1] = row_stride;
    w13->strides[2] = col_stride;
    if (gated && !*interleaved) {
        desc->up = *w13;
        desc->up.data = (uint8_t *)gu_data + (size_t)(I * row_stride) * esz;
    }
    desc->layout = *interleaved ? MOE_LAYOUT_INTERLEAVED : MOE_LAYOUT_SEPARATE;
    /* down as W2 [E, H, I]: in x out, element [e][i][h] is W2[e][h][i] (strides {I*H, 1, H}). */
    desc->down = moe_tensor_3d(dn_data, dn.dtype, E, H, I);
    desc->down.strides[0] = I * H;
    desc->down.strides[1] = orient == FIT_IN_OUT ? 1 : I;
    desc->down.strides[2] = orient == FIT_IN_OUT ? H : 1;
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

/* Fused experts and their biases; mxfp4: GPT-OSS's MXFP4 release (names n are EXPERTS_NAMES). */
static moe_status load_fused_experts(loader *L, int mxfp4, const fused_names *n, moe_weights_desc *desc) {
    const moe_layer_spec *s = L->spec;
    int64_t E = s->num_experts, H = s->hidden, I = s->intermediate, R = moe__w13_rows(s, I);
    int gated = moe_activation_is_gated(s->activation);
    int interleaved = gated;
    moe_status st;
    if (mxfp4) {
        st = load_mxfp4(L, "gate_up_proj", R, H, gated ? &desc->gate_up : &desc->gate);
        if (st == MOE_STATUS_OK) st = load_mxfp4(L, "down_proj", H, I, &desc->down);
        desc->layout = gated ? MOE_LAYOUT_INTERLEAVED : MOE_LAYOUT_SEPARATE;
    } else {
        st = load_fused(L, n, desc, &interleaved);
    }
    if (st != MOE_STATUS_OK) return st;
    char name[NAME_LEN], down_bias[NAME_LEN];
    name_of(name, L, "%s", n->gate_up_bias);
    name_of(down_bias, L, "%s", n->down_bias);
    if (!s->expert_has_bias) {
        if (has(L, name)) return refuse_unasked(L, name, "expert_has_bias");
        return has(L, down_bias) ? refuse_unasked(L, down_bias, "expert_has_bias") : MOE_STATUS_OK;
    }
    if (gated && !interleaved) /* no family has them (the privacy filter's are refused by the config reader) */
        return moe__error(L->ctx, MOE_STATUS_UNSUPPORTED,
                          "moe_weights_load: layer %lld: expert biases with concatenated gate/up ('%s'): this loader "
                          "does not split a concatenated bias",
                          (long long)L->layer, name);
    st = load_tensor(L, name, 2, (const int64_t[]){E, R}, FLOATS, gated ? &desc->gate_up_bias : &desc->gate_bias);
    if (st != MOE_STATUS_OK) return st;
    return load_tensor(L, down_bias, 2, (const int64_t[]){E, H}, FLOATS, &desc->down_bias);
}

/* ---- router and shared expert ----------------------------------------------------------- */

static moe_status load_router(loader *L, moe_weights_desc *desc) {
    const moe_layer_spec *s = L->spec;
    int64_t E = s->num_experts, H = s->hidden;
    char name[NAME_LEN];
    /* gate (most), router (GPT-OSS, Llama-4, Granite-MoE-SWA) or router.layer (Granite-MoE) */
    static const char *const bases[] = {"gate", "router", "router.layer"};
    const char *base = bases[0];
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        name_of(name, L, "%s.weight", bases[i]);
        if (has(L, name)) {
            base = bases[i];
            break;
        }
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

    /* DeepSeek-V3 keeps it beside the router weight; some checkpoints put it in the mlp (MiniMax)
     * or with the experts (Laguna); Ling's descendants (Sarvam-30B, Param2-MoE) call it
     * gate.expert_bias. */
    name_of(name, L, "%s.e_score_correction_bias", base);
    char alt[3][NAME_LEN];
    name_of(alt[0], L, "e_score_correction_bias");
    name_of(alt[1], L, "experts.e_score_correction_bias");
    name_of(alt[2], L, "%s.expert_bias", base);
    for (int i = 0; i < 3 && !has(L, name); i++)
        if (has(L, alt[i])) memcpy(name, alt[i], sizeof name);
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
    /* Granite-MoE-Shared keeps its shared MLP beside the MoE block: not read here. */
    char granite[NAME_LEN];
    snprintf(granite, sizeof granite, "%sshared_mlp.input_linear.weight", L->root);
    if (has(L, granite))
        return s->num_shared_experts == 0
                   ? refuse_unasked(L, granite, "num_shared_experts")
                   : moe__error(L->ctx, MOE_STATUS_UNSUPPORTED,
                                "moe_weights_load: layer %lld: Granite's shared MLP '%s' is not read by this loader",
                                (long long)L->layer, granite);
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

/* Where a layer may live (the root is ROOTS[r] + "L.") and which layouts are probed under it,
 * in order: the first tensor found decides. */
static const char *const ROOTS[] = {"model.layers.", "model.language_model.layers.", "language_model.model.layers.",
                                    "language_model.model.blocks."};
enum { ROOT_COUNT = (int)(sizeof ROOTS / sizeof ROOTS[0]) };

typedef enum { LAY_PER_EXPERT, LAY_MIXTRAL, LAY_FUSED, LAY_MXFP4, LAY_GRANITE } layout_kind;

typedef struct layout_probe {
    const char *block; /* the MoE block under the root */
    const char *probe; /* a tensor only that layout has */
    layout_kind kind;
} layout_probe;

static const layout_probe PROBES[] = {
    {"mlp.", "experts.down_proj", LAY_FUSED}, /* GPT-OSS, Mistral-4, Qwen3-VL-MoE */
    {"mlp.", "experts.down_proj_blocks", LAY_MXFP4},
    {"mlp.", "experts.0.down_proj.weight", LAY_PER_EXPERT},
    {"block_sparse_moe.", "experts.0.w2.weight", LAY_MIXTRAL},
    {"block_sparse_moe.", "experts.down_proj", LAY_FUSED},     /* Granite-MoE-SWA */
    {"block_sparse_moe.", "output_linear.weight", LAY_GRANITE}, /* Granite-MoE */
    {"feed_forward.", "experts.down_proj", LAY_FUSED},         /* Llama-4 */
};
enum { PROBE_COUNT = (int)(sizeof PROBES / sizeof PROBES[0]) };

/* The first layout found under root r of the layer, or -1. */
static int probe_root(const loader *L, int r, int64_t layer) {
    char root[ROOT_LEN], name[NAME_LEN];
    snprintf(root, sizeof root, "%s%lld.", ROOTS[r], (long long)layer);
    for (int p = 0; p < PROBE_COUNT; p++) {
        snprintf(name, sizeof name, "%s%s%s", root, PROBES[p].block, PROBES[p].probe);
        if (has(L, name)) return p;
    }
    return -1;
}

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

    /* Which root holds the layer, and in which layout: probe each. */
    int found_root = -1, found = -1;
    for (int r = 0; r < ROOT_COUNT; r++) {
        int p = probe_root(&L, r, layer);
        if (p < 0) continue;
        if (found_root >= 0) {
            char a[ROOT_LEN], b[ROOT_LEN];
            snprintf(a, sizeof a, "%s%lld.", ROOTS[found_root], (long long)layer);
            snprintf(b, sizeof b, "%s%lld.", ROOTS[r], (long long)layer);
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "moe_weights_load: layer %lld: the checkpoint has experts of this layer under both "
                              "'%s%s%s' and '%s%s%s'; it holds more than one model, and this loader does not choose",
                              (long long)layer, a, PROBES[found].block, PROBES[found].probe, b, PROBES[p].block,
                              PROBES[p].probe);
        }
        found_root = r;
        found = p;
    }
    if (found < 0) {
        char tried[512];
        size_t n = 0;
        tried[0] = '\0';
        for (int r = 0; r < ROOT_COUNT && n < sizeof tried; r++) {
            char root[ROOT_LEN];
            snprintf(root, sizeof root, "%s%lld.", ROOTS[r], (long long)layer);
            n += (size_t)snprintf(tried + n, sizeof tried - n, "%s'%s'", r ? ", " : "", root);
        }
        return moe__error(ctx, MOE_STATUS_NOT_FOUND,
                          "moe_weights_load: layer %lld: tensor 'model.layers.%lld.mlp.experts.0.down_proj.weight' "
                          "not found in the checkpoint, nor any other layout of the layer: tried under %s each of "
                          "mlp.experts.0.down_proj.weight, mlp.experts.down_proj[_blocks] (GPT-OSS, transformers 5's "
                          "fused experts), block_sparse_moe.experts.0.w2.weight (Mixtral), "
                          "block_sparse_moe.{experts.down_proj,output_linear.weight} (Granite), "
                          "feed_forward.experts.down_proj (Llama-4)",
                          (long long)layer, (long long)layer, tried);
    }
    snprintf(L.root, sizeof L.root, "%s%lld.", ROOTS[found_root], (long long)layer);
    snprintf(L.prefix, sizeof L.prefix, "%s%s", L.root, PROBES[found].block);

    switch (PROBES[found].kind) {
    case LAY_MIXTRAL: st = load_per_expert(&L, "w1", "w3", "w2", &desc); break;
    case LAY_PER_EXPERT: st = load_per_expert(&L, "gate_proj", "up_proj", "down_proj", &desc); break;
    case LAY_FUSED: st = load_fused_experts(&L, 0, &EXPERTS_NAMES, &desc); break;
    case LAY_MXFP4: st = load_fused_experts(&L, 1, &EXPERTS_NAMES, &desc); break;
    case LAY_GRANITE: st = load_fused_experts(&L, 0, &GRANITE_NAMES, &desc); break;
    }
    if (st == MOE_STATUS_OK) st = load_router(&L, &desc);
    if (st == MOE_STATUS_OK) st = load_shared(&L, &desc);
    if (st == MOE_STATUS_OK) st = moe_weights_create(ctx, spec, &desc, format, out);
    for (int i = 0; i < L.buffer_count; i++) free(L.buffers[i]);
    return st;
}
