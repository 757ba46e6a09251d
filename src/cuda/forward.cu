// The CUDA forward: the workspace layout and the launch sequence, all on args->stream.
//
//   [convert x]  when x is not the weights' dtype or not 16-byte-row aligned
//   routing      given ids/weights (copied only when strided), or logits (given, or
//                x . Wr^T in double) then the top-k kernel
//   [shared gate] sigmoid(x . w_sg) per token
//   plan         one kernel: counts, offsets, sorted ids, block owners (shared expert fused
//                in as expert E when its width is I); block 64 (v1), 128 (Hopper tiles) or
//                SWAP_BLOCK_ROWS (the swapped decode kernel)
//   [permute x]  Hopper path only: x rows copied into plan order (TMA cannot gather), token by token
//   GEMM1        gathered x rows . W13^T, bias + activation -> A2
//   GEMM2        A2 . W2^T, bias x routing weight -> rows out[token*k + slot]: bf16 when y is
//                bf16, else fp32 (rows_in_bf16)
// GEMM1/GEMM2 run on the v1 kernel (gemm.cu) or the Hopper engine (gemm_hopper.cu), chosen by
// moe__cuda_gemm_select (cuda_backend.h).
//   [shared]     GEMM1 + GEMM2 over all tokens when the shared width differs from I
//   combine      y[t] = sum of its rows in slot order (+ the shared row), in fp32
// With FP8 weights (w8a8, act_format fp8-row128 or fp8-tensor) the GEMM steps are forward_fp8's:
// x quantised once per token, GEMM1 on e4m3 codes -> fp32 A2, A2 quantised (or, opt-in, in
// GEMM1's epilogue on the Hopper path with fp8-row128), GEMM2 on e4m3 -> rows
// (rows_in_bf16) (gemm_hopper_fp8.cu, gemm_fp8_v1.cu, quant.cu); routing, plan and combine are
// the same.
//
// Nothing is read back to the host and nothing is allocated: grids come from host-known
// bounds (T*k + E*(BM-1) plan rows), blocks past the device-side total exit at once, and the
// whole sequence can be captured into a CUDA graph and replayed with new inputs.
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "kernels.cuh"
#include "hopper/grouped_api.h"

namespace {

#define WS_ALIGN 256
// The grouped GEMMs' ticket counter (grouped_params.unit_counter): its words at the start of `units`.
constexpr int TICKET_WORDS = 2;

// Byte offsets of the workspace arrays (from a 256-aligned base), and the sizes behind them.
struct ws_layout {
    int64_t T, H, E, k, I, Is, R13, R13s, rows, experts, shared_rows, max_rows, max_blocks;
    // FP8: rows of the k-block-major scale arrays (A2's, the permuted x's): fp8_kblock_scale_rows.
    int64_t scale_ld;
    bool shared, fused;
    bool fp8;       // FP8 weights: the w8a8 path (its arrays below; xc, a2, a2s and xperm empty)
    bool fp8_tensor; // act_format fp8-tensor (else 1x128 groups)
    bool a2_in_epilogue; // Hopper FP8, fp8-row128: GEMM1's epilogue quantises A2 (no fp32 A2)
    bool swap;      // Hopper at decode: both GEMMs on the kernel with the operands swapped
    int gemm;       // MOE__CUDA_GEMM_V1 / _HOPPER
    int64_t block;  // plan rows per block: 64 (v1), 128 (Hopper) or SWAP_BLOCK_ROWS (swap)
    int64_t xperm;  // Hopper bf16: x rows in plan order [max_rows, H] (0 bytes on v1 and FP8)
    int64_t units;  // Hopper tiles: the grouped GEMMs' ticket counter, then (bf16) GEMM1's row counts for
                    // MOEFUSE_HOPPER_A=fill, 1 + max_blocks ints (zeroed before GEMM1)
    int64_t xc, logits, ids, weights, gate, counts, offsets, sorted_ids, block_expert, a2, a2s;
    // GEMM2's rows [T*k (+T), H], reserved at 4 bytes an element: the workspace query does not see
    // y's dtype, and f32/f16 y keep fp32 rows; bf16 rows (rows_in_bf16) use the first half.
    int64_t out;
    // FP8: x codes [T, H] and scales; A2 fp32 [max_rows, I] (none when a2_in_epilogue), its codes
    // and scales (fp8-row128: column-major [ceil(I/128)][scale_ld], whether the quantiser or
    // GEMM1's epilogue writes them); the separate shared expert's A2 [T, Is] likewise; 4 amax words (x, routed
    // A2, fused shared A2, shared A2).
    // Hopper FP8 only: x codes in plan order [max_rows, H] and (fp8-row128) their scales
    // column-major [ceil(H/128)][scale_ld]. The Hopper path but fp8-tensor: each routed id's plan
    // row [T*k] (row_of) for the FP8 quantiser or the bf16 permute pass that write x straight into
    // plan order.
    int64_t xq, xq_scales, a2f, a2q, a2q_scales, a2sf, a2sq, a2sq_scales, amax, xpq, xpq_scales, row_of;
    int64_t total;
};

bool reserve(int64_t *cursor, int64_t count, int64_t elem, int64_t *offset) {
    int64_t start, bytes, end;
    if (!moe__add64(*cursor, WS_ALIGN - 1, &start)) return false;
    start -= start % WS_ALIGN;
    if (!moe__mul64(count, elem, &bytes) || !moe__add64(start, bytes, &end)) return false;
    *offset = start;
    *cursor = end;
    return true;
}

bool is_fp8_weights(moe_format f) { return f == MOE_FORMAT_FP8_TENSOR || f == MOE_FORMAT_FP8_BLOCK128; }

moe_dtype weights_dtype(const moe_weights_t *w) {
    const moe__cuda_weights *d = (const moe__cuda_weights *)w->device;
    if (d) return d->dtype;
    if (is_fp8_weights(w->format)) return MOE_DTYPE_E4M3;
    return w->format == MOE_FORMAT_F16 ? MOE_DTYPE_F16 : MOE_DTYPE_BF16;
}

// Scale elements of a [rows, cols] activation quantised per the FP8 path's act_format: one
// per row and 128-column group (fp8-row128); fp8-tensor keeps one per row (`per_row`: the plan
// rows of A2, whose tensor depends on the row) or a single one.
bool act_scale_count(const ws_layout *L, int64_t rows, int64_t cols, bool per_row, int64_t *out) {
    if (L->fp8_tensor) {
        *out = per_row ? rows : 1;
        return true;
    }
    return moe__mul64(rows, (cols + 127) / 128, out);
}

// The FP8 path's arrays, reserved after the common ones.
bool reserve_fp8(int64_t *c, ws_layout *L) {
    int64_t n, scales;
    const bool hopper = L->gemm == MOE__CUDA_GEMM_HOPPER;
    return moe__mul64(L->T, L->H, &n) && reserve(c, n, 1, &L->xq) && act_scale_count(L, L->T, L->H, false, &scales) &&
           reserve(c, scales, 4, &L->xq_scales) && moe__mul64(L->a2_in_epilogue ? 0 : L->max_rows, L->I, &n) &&
           reserve(c, n, 4, &L->a2f) && moe__mul64(L->max_rows, L->I, &n) && reserve(c, n, 1, &L->a2q) &&
           act_scale_count(L, L->fp8_tensor ? L->max_rows : L->scale_ld, L->I, true, &scales) &&
           reserve(c, scales, 4, &L->a2q_scales) && moe__mul64(L->T, L->Is, &n) && reserve(c, n, 4, &L->a2sf) &&
           reserve(c, n, 1, &L->a2sq) && act_scale_count(L, L->T, L->Is, false, &scales) &&
           reserve(c, scales, 4, &L->a2sq_scales) && reserve(c, 4, 4, &L->amax) &&
           moe__mul64(hopper ? L->max_rows : 0, L->H, &n) && reserve(c, n, 1, &L->xpq) &&
           moe__mul64(hopper && !L->fp8_tensor ? L->scale_ld : 0, (L->H + 127) / 128, &n) &&
           reserve(c, n, 4, &L->xpq_scales);
}

// How bf16 GEMM1 on the Hopper tiles gets its A rows (the forward and its description): its producer
// gathers them from x (hopper_a_gather: moe__hopper_gather_select's rule, or MOEFUSE_HOPPER_A); else
// GEMM1 reads a copy of x in plan order by TMA, written by GEMM1's own idle producer warps
// (hopper_a_fill), or by a permute pass before it, token by token (hopper_permute_scatter; at most
// 32 plan rows a token, a lane each) or in plan order. A_NONE: FP8, v1 or the swapped decode kernel.
enum a_rows { A_NONE, A_GATHER, A_FILL, A_SCATTER, A_PERMUTE };
a_rows bf16_a_rows(const ws_layout &L) {
    if (L.gemm != MOE__CUDA_GEMM_HOPPER || L.fp8 || L.swap) return A_NONE;
    if (hopper_a_gather(L.rows, L.E, L.I)) return A_GATHER;
    if (hopper_a_fill(hopper_ticket_schedule(true))) return A_FILL;
    if (hopper_permute_scatter() && L.k + (L.fused ? 1 : 0) <= 32) return A_SCATTER;
    return A_PERMUTE;
}

// Whether the Hopper FP8 forward quantises x straight into plan order (fp8_quant_args's scatter)
// instead of by token and then permuting the codes, but for x's own alignment
// (fp8_row128_vec_ok), which only the forward sees: 1x128 scales, the shared expert fused or
// absent, at most 32 destinations a token (a lane each), unless MOEFUSE_HOPPER_FP8_X=permute.
bool x_scatter_rule(const ws_layout &L) {
    return L.gemm == MOE__CUDA_GEMM_HOPPER && !L.fp8_tensor && !(L.shared && !L.fused) &&
           L.k + (L.fused ? 1 : 0) <= 32 && hopper_fp8_x_scatter();
}

// Whether the FP8 GEMM1 quantises A2 in its epilogue: the Hopper path with fp8-row128
// activations, when hopper_fp8_a2_in_epilogue says so.
bool a2_in_epilogue(const ws_layout *L, int activation) {
    return L->fp8 && !L->fp8_tensor && L->gemm == MOE__CUDA_GEMM_HOPPER && !L->swap &&
           hopper_fp8_a2_in_epilogue(L->R13, L->I, activation != MOE_ACT_RELU2);
}

// The path moe__cuda_gemm_select takes for T tokens (the analysis mirrors it).
int gemm_select_path(const moe_weights_t *w, int64_t T) {
    int64_t rows;
    if (!moe__mul64(T, w->spec.top_k, &rows)) return MOE__CUDA_GEMM_V1;
    return moe__cuda_gemm_select(rows, w->spec.num_experts, w->spec.hidden, w->spec.intermediate, weights_dtype(w));
}

// Whether the forward of T tokens runs both GEMMs on the decode kernel with the operands
// swapped: FP8 by gemm_hopper_fp8.cu's rule, bf16 by gemm_hopper.cu's where Hopper could run
// these shapes. Then the plan's blocks are its SWAP_BLOCK_ROWS rows (and
// FP8's A2 goes through the separate quantiser). Experts: those of the stack (a fused shared
// expert too).
bool swap_path(const moe_weights_t *w, int64_t T) {
    const bool fused = w->s13.count > 0 && w->spec.shared_intermediate == w->spec.intermediate;
    const int64_t experts = w->spec.num_experts + (fused ? 1 : 0);
    if (is_fp8_weights(w->format))
        return gemm_select_path(w, T) == MOE__CUDA_GEMM_HOPPER && hopper_fp8_swap_decode(T, w->spec.top_k, experts);
    const moe__gemm_force force = moe__gemm_force_parse(getenv("MOEFUSE_GEMM"));
    return weights_dtype(w) == MOE_DTYPE_BF16 && force != MOE__GEMM_FORCE_V1 &&
           moe__gemm_select(INT64_MAX, w->spec.num_experts, w->spec.hidden, w->spec.intermediate, MOE_DTYPE_BF16,
                            MOE__GEMM_AUTO) == MOE__CUDA_GEMM_HOPPER &&
           hopper_bf16_swap_decode(T, w->spec.top_k, experts);
}

// The forward's GEMM path: the selection's, or Hopper when the swapped decode kernel runs.
int gemm_path(const moe_weights_t *w, int64_t T) {
    return swap_path(w, T) ? MOE__CUDA_GEMM_HOPPER : gemm_select_path(w, T);
}

// The plan's rows per block for a forward on GEMM path `gemm`.
int64_t forward_block_rows(bool swap, int gemm) {
    return swap ? SWAP_BLOCK_ROWS : moe__gemm_block_rows(gemm);
}

bool layout_compute(const moe_weights_t *w, int64_t T, moe_format act_format, ws_layout *L) {
    const moe_layer_spec *s = &w->spec;
    memset(L, 0, sizeof *L);
    L->fp8 = is_fp8_weights(w->format);
    L->fp8_tensor = L->fp8 && act_format == MOE_FORMAT_FP8_TENSOR;
    L->T = T, L->H = s->hidden, L->E = s->num_experts, L->k = s->top_k, L->I = s->intermediate;
    L->shared = w->s13.count > 0;
    L->Is = L->shared ? s->shared_intermediate : 0;
    L->fused = L->shared && L->Is == L->I;
    L->R13 = moe__w13_rows(s, L->I);
    L->R13s = L->shared ? moe__w13_rows(s, L->Is) : 0;
    L->experts = L->E + (L->fused ? 1 : 0);
    L->shared_rows = L->fused ? T : 0;
    L->swap = swap_path(w, T);
    L->gemm = L->swap ? MOE__CUDA_GEMM_HOPPER : gemm_select_path(w, T); // gemm_path without a second swap_path
    L->block = forward_block_rows(L->swap, L->gemm);
    L->a2_in_epilogue = a2_in_epilogue(L, s->activation);
    const int64_t bm = L->block;
    int64_t pad, live, n, out_rows, c = 0;
    bool ok = moe__mul64(T, L->k, &L->rows) && moe__add64(L->rows, L->shared_rows, &live) && live < INT32_MAX &&
              moe__mul64(L->experts, bm - 1, &pad) && moe__add64(live, pad, &L->max_rows);
    if (!ok) return false;
    L->max_blocks = (L->max_rows + bm - 1) / bm;
    L->scale_ld = fp8_kblock_scale_rows(L->max_rows);
    const int64_t bf16 = L->fp8 ? 0 : 1; // the bf16 path's own arrays (xc, a2, a2s) vanish on FP8
    ok = moe__mul64(T * bf16, L->H, &n) && reserve(&c, n, 2, &L->xc) && moe__mul64(T, L->E, &n) &&
         reserve(&c, n, 4, &L->logits) && reserve(&c, L->rows, 4, &L->ids) && reserve(&c, L->rows, 4, &L->weights) &&
         reserve(&c, T, 4, &L->gate) && reserve(&c, L->experts, 8, &L->counts) &&
         reserve(&c, L->experts + 1, 8, &L->offsets) && reserve(&c, L->max_rows, 4, &L->sorted_ids) &&
         reserve(&c, L->max_blocks, 4, &L->block_expert) && moe__mul64(L->max_rows * bf16, L->I, &n) &&
         reserve(&c, n, 2, &L->a2) && moe__mul64(T * bf16, L->Is, &n) && reserve(&c, n, 2, &L->a2s) &&
         moe__add64(L->rows, L->shared ? T : 0, &out_rows) && moe__mul64(out_rows, L->H, &n) &&
         reserve(&c, n, 4, &L->out) && moe__mul64(L->gemm == MOE__CUDA_GEMM_HOPPER ? L->max_rows * bf16 : 0, L->H, &n) &&
         reserve(&c, n, 2, &L->xperm) &&
         reserve(&c, L->gemm == MOE__CUDA_GEMM_HOPPER && !L->fp8_tensor ? L->rows : 0, 4, &L->row_of) &&
         reserve(&c, L->gemm == MOE__CUDA_GEMM_HOPPER && !L->swap ? TICKET_WORDS + (L->fp8 ? 0 : 1 + L->max_blocks)
                                                                  : 0,
                 4, &L->units) &&
         (!L->fp8 || reserve_fp8(&c, L)) &&
         moe__add64(c, WS_ALIGN, &L->total); // room to align the base
    return ok && (uint64_t)L->total < (uint64_t)SIZE_MAX;
}

bool is_row_major(const moe_tensor *t, int64_t cols) {
    return moe__stride(t, 0) == cols && moe__stride(t, 1) == 1;
}

// The act_format / weight format pairs this backend runs: f32 (no activation quantisation)
// with bf16/f16 weights; fp8-row128 or fp8-tensor (w8a8) with fp8-tensor/fp8-block128 weights.
// The CPU oracle also runs the mixed pairs (w8a16, w16a8); here they are refused by name.
moe_status check_act_format(moe_context_t *ctx, const moe_weights_t *w, moe_format act) {
    if (is_fp8_weights(w->format)) {
        if (act == MOE_FORMAT_FP8_ROW128 || act == MOE_FORMAT_FP8_TENSOR) return MOE_STATUS_OK;
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                          "moe_forward: args.act_format = %s with %s weights on the cuda backend: FP8 weights run "
                          "w8a8 only, expected act_format fp8-row128 or fp8-tensor (the cpu backend also runs "
                          "them with f32 activations)",
                          moe_format_name(act), moe_format_name(w->format));
    }
    if (act == MOE_FORMAT_F32) return MOE_STATUS_OK;
    return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                      "moe_forward: args.act_format = %s with %s weights on the cuda backend: FP8 activations need "
                      "fp8-tensor or fp8-block128 weights here, expected act_format f32 (the cpu backend also "
                      "quantises activations for %s weights)",
                      moe_format_name(act), moe_format_name(w->format), moe_format_name(w->format));
}

// The scale lookup of an FP8 weight stack for the GEMM (gemm_fp8_v1.cuh).
void set_weight_scales(fp8_gemm_args *g, const moe__cuda_fp8_scales *sc, moe_format format) {
    g->w_scales = sc->data;
    g->w_scale_rows = sc->rows;
    g->w_scale_cols = sc->cols;
    g->w_scale_kind = format == MOE_FORMAT_FP8_TENSOR ? FP8W_TENSOR : sc->paired ? FP8W_BLOCK_PAIRED : FP8W_BLOCK;
}

// a_scale(row, kb) of activations quantised by row as `L` says over K columns (gemm_fp8_v1.cuh):
// fp8-row128 [rows, ceil(K/128)]; fp8-tensor one scale, or one per row (`per_row`). The
// k-block-major arrays (A2's, the permuted x's) set their strides where they are used.
void set_act_scales(fp8_gemm_args *g, const ws_layout &L, const float *scales, int64_t K, bool per_row) {
    g->a_scales = scales;
    g->a_scale_rs = L.fp8_tensor ? (per_row ? 1 : 0) : (K + 127) / 128;
    g->a_scale_ks = L.fp8_tensor ? 0 : 1;
}

// The quantiser of `rows` rows of fp32/x activations into codes_field / scales_field.
fp8_quant_args quant_args(const ws_layout &L, const void *src, moe_dtype dtype, int64_t ld, int64_t rows,
                          int64_t cols, uint8_t *codes, float *scales, uint32_t *amax) {
    return fp8_quant_args_by_row(L.fp8_tensor ? MOE_FORMAT_FP8_TENSOR : MOE_FORMAT_FP8_ROW128, src, dtype, ld, rows,
                                 cols, codes, scales, amax); // by row; A2 overrides the scale strides (forward_fp8)
}

// A GEMM of the separate shared expert: weights b (one matrix) and bias, the identity plan over
// the T tokens (gemm_args: no sorted ids, rows = T).
void identity_plan(gemm_args *g, const void *b, const float *bias, int64_t T) {
    g->b = b;
    g->experts = 1;
    g->bias = bias;
    g->sorted_ids = NULL;
    g->block_expert = NULL;
    g->live_rows = NULL;
    g->rows = T;
}

// GEMM2's rows, which combine sums: bf16 when y is bf16 (half the store and the read of fp32
// rows; the value is the fp32 epilogue's, rounded once), else fp32: f32 and f16 y keep the
// precision a bf16 rounding of each contribution would take away. On the w8a8 path only where
// the Hopper FP8 kernel writes every row: the v1 FP8 kernels (and so a separate shared expert)
// write fp32.
bool rows_in_bf16(const ws_layout &L, moe_dtype y_dtype) {
    if (y_dtype != MOE_DTYPE_BF16) return false;
    return !L.fp8 || (L.gemm == MOE__CUDA_GEMM_HOPPER && !(L.shared && !L.fused));
}

// The w8a8 GEMM steps (FP8 weights; act_format fp8-row128 or fp8-tensor), as the CPU oracle
// defines them (src/cpu/forward.c): x quantised once over [T, H] (per token for row128; one
// scale for tensor), GEMM1 on the codes with the GLU epilogue -> A2 in fp32, A2 quantised (the
// routed rows [T*k, I] as one tensor, the shared expert's [T, Is] as another, fused or not),
// GEMM2 on its codes -> the rows combine reads (rows_in_bf16). The routed (and fused shared) GEMMs run
// on the Hopper FP8 kernel (gemm_hopper_fp8.cu: x codes and scales in plan order first, as TMA
// cannot gather rows: written there by the quantiser, or permuted after it) when L.gemm says so,
// else on the v1 FP8 kernel; a separate shared expert always on v1. A2 is quantised by a separate pass, or in the Hopper GEMM1's
// epilogue when L.a2_in_epilogue (MOEFUSE_FP8_A2=epilogue; same rule, same codes; scales
// column-major).
moe_status forward_fp8(moe_context_t *ctx, const moe_weights_t *w, const ws_layout &L, uint8_t *base,
                       const moe_forward_args *args, const moe_dispatch_plan &plan, const float *weights,
                       const float *gate, cudaStream_t stream) {
    const moe__cuda_weights *d = (const moe__cuda_weights *)w->device;
    const moe_layer_spec *s = &w->spec;
    const moe_tensor *x = &args->x;
    uint8_t *xq = base + L.xq, *a2q = base + L.a2q, *a2sq = base + L.a2sq;
    float *xq_scales = (float *)(base + L.xq_scales), *a2f = (float *)(base + L.a2f);
    float *a2q_scales = (float *)(base + L.a2q_scales), *a2sf = (float *)(base + L.a2sf);
    float *a2sq_scales = (float *)(base + L.a2sq_scales);
    uint32_t *amax = (uint32_t *)(base + L.amax); // [0] x, [1..2] plan A2, [3] separate shared A2
    moe_status st;

    // x, once per token (the routed rows and the shared expert read the same codes). On the
    // Hopper path with 1x128 scales and the shared expert fused or absent, the codes go straight
    // to their plan rows (the permute TMA needs, folded into the quantiser: x_scatter_rule).
    const bool hopper = L.gemm == MOE__CUDA_GEMM_HOPPER;
    fp8_quant_args qx = quant_args(L, x->data, x->dtype, moe__stride(x, 0), L.T, L.H, xq, xq_scales, amax);
    const bool scatter = x_scatter_rule(L) && fp8_row128_vec_ok(&qx);
    if (scatter) {
        qx.codes = NULL; // nothing reads x's codes by token
        qx.plan_row_of = (const int32_t *)(base + L.row_of);
        qx.top_k = L.k;
        qx.shared_row0 = L.fused ? plan.expert_offsets + L.E : NULL;
        qx.plan_codes = base + L.xpq;
        qx.plan_scales = (float *)(base + L.xpq_scales);
        qx.plan_scale_ld = L.scale_ld;
    }
    if ((st = cuda_status(ctx, fp8_quantize_launch(&qx, stream), "quantise x to fp8")) != MOE_STATUS_OK) return st;

    fp8_gemm_args g1;
    memset(&g1, 0, sizeof g1);
    g1.g.mode = GEMM_UP;
    g1.g.a = xq;
    g1.g.lda = L.H;
    g1.g.b = d->w13;
    g1.g.experts = L.experts;
    g1.g.bias = d->b13;
    g1.g.n = L.R13;
    g1.g.k = L.H;
    g1.g.sorted_ids = plan.sorted_ids;
    g1.g.block_expert = plan.block_expert;
    g1.g.live_rows = plan.expert_offsets + L.experts;
    g1.g.rows = L.max_rows;
    g1.g.tokens = L.T;
    g1.g.top_k = L.k;
    g1.g.topk_weights = weights;
    g1.g.shared_scale = gate;
    g1.g.weight_on_input = s->weight_on_input;
    g1.g.out = a2f;
    g1.g.ldo = L.I;
    g1.g.activation = s->activation;
    g1.g.act_alpha = s->act_alpha;
    g1.g.act_limit = s->act_limit;
    set_act_scales(&g1, L, xq_scales, L.H, false);
    set_weight_scales(&g1, &d->w13_scales, d->format);
    g1.swap_decode = L.swap; // g2 and the separate shared expert's copies: v1 ignores it
    if (hopper) {
        // TMA loads A tiles: the x codes (and their row scales) in plan order first.
        uint8_t *xpq = base + L.xpq;
        float *xpq_scales = (float *)(base + L.xpq_scales);
        const int64_t groups = L.fp8_tensor ? 0 : (L.H + 127) / 128;
        if (!scatter &&
            (st = cuda_status(ctx,
                              hopper_fp8_permute_launch(&g1.g, xq_scales, groups, xpq, xpq_scales, L.scale_ld, stream),
                              "permute the x codes")) != MOE_STATUS_OK)
            return st;
        const bool large = hopper_fp8_large_experts(L.H, L.I);
        if (!L.swap && hopper_expert_raster(large)) g1.g.expert_offsets = plan.expert_offsets; // g2 copies g1
        if (!L.swap && hopper_ticket_schedule(large)) {
            // The tiled GEMMs' ticket counter (the launch uses it at prefill only): 0 for GEMM1,
            // which leaves it 0 for GEMM2 (g2 copies g1).
            if ((st = cuda_status(ctx, zero_words_launch((uint32_t *)(base + L.units), TICKET_WORDS, stream),
                                  "zero the GEMMs' ticket counter")) != MOE_STATUS_OK)
                return st;
            g1.g.unit_counter = (int *)(base + L.units);
        }
        fp8_gemm_args h1 = g1;
        h1.g.a = xpq;
        if (!L.fp8_tensor) { // scale of (plan row r, k-block kb) at xpq_scales[kb * scale_ld + r]
            h1.a_scales = xpq_scales;
            h1.a_scale_rs = 1;
            h1.a_scale_ks = L.scale_ld;
        }
        if (L.a2_in_epilogue) { // codes [max_rows, I]; scale of (r, group c) at a2q_scales[c * scale_ld + r]
            h1.g.out = a2q;
            h1.out_scales = a2q_scales;
            h1.out_scale_ks = L.scale_ld;
        }
        if ((st = hopper_fp8_gemm_launch(ctx, &h1, stream)) != MOE_STATUS_OK) return st;
    } else if ((st = cuda_status(ctx, fp8_gemm_launch(&g1, stream), "fp8 GEMM1 (W13)")) != MOE_STATUS_OK) {
        return st;
    }

    // A2 in plan order: live rows only; ids above T*k (the fused shared expert) are a tensor of
    // their own for fp8-tensor.
    if (!L.a2_in_epilogue) {
        fp8_quant_args qa = quant_args(L, a2f, MOE_DTYPE_F32, L.I, L.max_rows, L.I, a2q, a2q_scales, amax + 1);
        qa.sorted_ids = plan.sorted_ids;
        qa.live_rows = plan.expert_offsets + L.experts;
        qa.padding_id = L.rows;
        qa.scale_rs = 1; // k-block-major, as GEMM1's epilogue writes them: contiguous per k-block
        qa.scale_ks = L.scale_ld;
        if ((st = cuda_status(ctx, fp8_quantize_launch(&qa, stream), "quantise A2 to fp8")) != MOE_STATUS_OK)
            return st;
    }

    fp8_gemm_args g2 = g1;
    g2.g.mode = GEMM_DOWN;
    g2.g.a = a2q;
    g2.g.lda = L.I;
    g2.g.b = d->w2;
    g2.g.bias = d->b2;
    g2.g.n = L.H;
    g2.g.k = L.I;
    g2.g.out = base + L.out;
    g2.g.ldo = L.H;
    g2.g.out_bf16 = rows_in_bf16(L, args->y.dtype);
    set_act_scales(&g2, L, a2q_scales, L.I, true);
    if (!L.fp8_tensor) { // k-block-major [ceil(I/128)][scale_ld], from the quantiser or GEMM1's epilogue
        g2.a_scale_rs = 1;
        g2.a_scale_ks = L.scale_ld;
    }
    set_weight_scales(&g2, &d->w2_scales, d->format);
    if (hopper) {
        if ((st = hopper_fp8_gemm_launch(ctx, &g2, stream)) != MOE_STATUS_OK) return st;
    } else if ((st = cuda_status(ctx, fp8_gemm_launch(&g2, stream), "fp8 GEMM2 (W2)")) != MOE_STATUS_OK) {
        return st;
    }

    if (!L.shared || L.fused) return MOE_STATUS_OK;
    // The separate shared expert (Is != I): an identity plan over the T tokens.
    fp8_gemm_args sg1 = g1;
    identity_plan(&sg1.g, d->s13, d->sb13, L.T);
    sg1.g.n = L.R13s;
    sg1.g.out = a2sf;
    sg1.g.ldo = L.Is;
    set_weight_scales(&sg1, &d->s13_scales, d->format);
    if ((st = cuda_status(ctx, fp8_gemm_launch(&sg1, stream), "fp8 shared GEMM1")) != MOE_STATUS_OK) return st;
    fp8_quant_args qs = quant_args(L, a2sf, MOE_DTYPE_F32, L.Is, L.T, L.Is, a2sq, a2sq_scales, amax + 3);
    if ((st = cuda_status(ctx, fp8_quantize_launch(&qs, stream), "quantise the shared A2 to fp8")) != MOE_STATUS_OK)
        return st;
    fp8_gemm_args sg2 = g2;
    identity_plan(&sg2.g, d->s2, d->sb2, L.T);
    sg2.g.a = a2sq;
    sg2.g.lda = L.Is;
    sg2.g.k = L.Is;
    set_act_scales(&sg2, L, a2sq_scales, L.Is, false);
    set_weight_scales(&sg2, &d->s2_scales, d->format);
    return cuda_status(ctx, fp8_gemm_launch(&sg2, stream), "fp8 shared GEMM2");
}

// combine: y[t] = its routed rows in slot order (+ the shared row), in y's dtype.
moe_status launch_combine(moe_context_t *ctx, const ws_layout &L, uint8_t *base, const int32_t *ids,
                          const moe_forward_args *args, cudaStream_t stream) {
    combine_args c;
    c.rows = base + L.out;
    c.rows_dtype = rows_in_bf16(L, args->y.dtype) ? MOE_DTYPE_BF16 : MOE_DTYPE_F32;
    c.ids = ids;
    c.T = L.T;
    c.k = L.k;
    c.E = L.E;
    c.H = L.H;
    c.has_shared = L.shared;
    c.y = args->y.data;
    c.y_dtype = args->y.dtype;
    c.y_s0 = moe__stride(&args->y, 0);
    c.y_s1 = moe__stride(&args->y, 1);
    return cuda_status(ctx, combine_launch(&c, stream), "combine");
}

} // namespace

extern "C" int moe__cuda_gemm_select(int64_t routed_rows, int64_t E, int64_t H, int64_t I, moe_dtype dtype) {
    return moe__gemm_select(routed_rows, E, H, I, dtype, moe__gemm_force_parse(getenv("MOEFUSE_GEMM")));
}

extern "C" const char *moe__cuda_gemm_name(int path) {
    return path == MOE__CUDA_GEMM_HOPPER ? "hopper" : "v1";
}

extern "C" int moe__cuda_forward_gemm(const moe_weights_t *w, int64_t num_tokens) {
    return gemm_path(w, num_tokens);
}

extern "C" int64_t moe__cuda_forward_block_rows(const moe_weights_t *w, int64_t num_tokens) {
    return forward_block_rows(swap_path(w, num_tokens), gemm_select_path(w, num_tokens)); // gemm unread on swap
}

// One line for moe_forward_config (src/core/forward.c): the path moe__cuda_gemm_select takes
// and why, its tiles, the plan block, the shared expert, GEMM2's row dtype and the workspace.
// Returns the line's length as snprintf does (the caller sizes buf), or -1 when the layout
// overflows (the caller has checked T first). Tiles: v1 from gemm.cuh; Hopper is
// gemm_hopper.cu's grouped_config (128 x 256 x 64, 4 stages), written out here because that
// file keeps it private.
extern "C" int moe__cuda_forward_describe(const moe_weights_t *w, int64_t T, moe_format act_format, char *buf,
                                          size_t size) {
    ws_layout L;
    if (!layout_compute(w, T, act_format, &L)) return -1;
    const moe_dtype dt = weights_dtype(w);
    const bool hopper = L.gemm == MOE__CUDA_GEMM_HOPPER;
    // Whether Hopper can run at all on these weights: the selection with every row count
    // large enough, unless MOEFUSE_GEMM=v1 hides it (then the override is the reason anyway).
    const char *env = getenv("MOEFUSE_GEMM");
    const moe__gemm_force force = moe__gemm_force_parse(env);
    const bool force_v1 = force == MOE__GEMM_FORCE_V1, force_hopper = force == MOE__GEMM_FORCE_HOPPER;
    const bool can = hopper || (!force_v1 && moe__cuda_gemm_select(INT64_MAX, L.E, L.H, L.I, dt) ==
                                                 MOE__CUDA_GEMM_HOPPER);
    const int64_t threshold = (int64_t)MOE__BF16_HOPPER_MIN_AVG_ROWS * L.E;
    const char *bf16_decode = getenv("MOEFUSE_BF16_DECODE");
    const bool bf16_env = bf16_decode && !strcmp(bf16_decode, "swap");
    char why[256];
    if (force_v1)
        snprintf(why, sizeof why, "forced by MOEFUSE_GEMM=v1");
    else if (L.swap && !L.fp8)
        snprintf(why, sizeof why, "%s and T*k=%lld <= %d x %lld experts = %lld (the swapped decode kernel)%s",
                 bf16_env ? "MOEFUSE_BF16_DECODE=swap" : "2*T*k >= experts", (long long)L.rows,
                 MOE__FP8_SWAP_MAX_AVG_ROWS, (long long)L.experts, (long long)MOE__FP8_SWAP_MAX_AVG_ROWS * L.experts,
                 force_hopper ? "; MOEFUSE_GEMM=hopper" : "");
    else if (force_hopper && hopper)
        snprintf(why, sizeof why, "forced by MOEFUSE_GEMM=hopper (the rule alone: T*k=%lld %s %d*E=%lld)",
                 (long long)L.rows, L.rows > threshold ? ">" : "<=", MOE__BF16_HOPPER_MIN_AVG_ROWS, (long long)threshold);
    else if (!can)
        snprintf(why, sizeof why,
                 "hopper cannot run here (needs bf16 weights with H and I multiples of 64, or fp8 weights with H "
                 "and I >= 128, and E*H, E*I >= 256; got %s, H=%lld, I=%lld, E=%lld)%s",
                 moe_dtype_name(dt), (long long)L.H, (long long)L.I, (long long)L.E,
                 force_hopper ? ", MOEFUSE_GEMM=hopper ignored" : "");
    else if (L.fp8)
        snprintf(why, sizeof why,
                 "fp8 weights run the wgmma path at every T%s%s%s",
                 env ? " (MOEFUSE_GEMM=" : "",
                 env ? env : "", env ? " is neither v1 nor hopper: automatic)" : "");
    else
        snprintf(why, sizeof why, "T*k=%lld %s %d*E=%lld%s%s%s%s", (long long)L.rows, hopper ? ">" : "<=",
                 MOE__BF16_HOPPER_MIN_AVG_ROWS, (long long)threshold,
                 hopper ? ""
                 : bf16_decode && !strcmp(bf16_decode, "off") ? ", MOEFUSE_BF16_DECODE=off"
                 : L.rows <= (int64_t)MOE__FP8_SWAP_MAX_AVG_ROWS * L.experts
                     ? ", 2*T*k < experts (the swapped decode kernel from half a row per expert)"
                     : "",
                 env ? " (MOEFUSE_GEMM=" : "", env ? env : "", env ? " is neither v1 nor hopper: automatic)" : "");
    // v1: the kernel its launch picks for GEMM1 (the 64-row tile, or the decode kernel).
    char v1[128];
    if (L.fp8) fp8_gemm_describe(L.max_rows, L.experts, 1, L.rows, L.R13, v1, sizeof v1);
    else gemm_describe(L.max_rows, L.experts, 1, L.rows, L.R13, v1, sizeof v1);
    char tiles[512];
    if (L.fp8 && hopper) { // gemm_hopper_fp8.cu's choices (grouped_fp8_config and the decode kernel)
        const bool large = hopper_fp8_large_experts(L.H, L.I);
        const bool tickets = hopper_fp8_ticket_tiles(L.T, L.k, L.experts) && hopper_ticket_schedule(large);
        // GEMM1's A scales are k-block-major only with 1x128 x scales (fp8-tensor: one per tensor).
        const bool wide1 = !L.fp8_tensor && hopper_fp8_wide_tiles(L.T, L.k, L.experts, L.a2_in_epilogue);
        const bool wide2 = hopper_fp8_wide_tiles(L.T, L.k, L.experts, false);
        // The bulk-copy epilogue (4 stages instead of 5): GEMM2 only when its rows are bf16 (bf16 y).
        const bool bulk1 =
            wide1 && hopper_fp8_bulk_epilogue(GEMM_UP, L.R13, L.H, L.I, w->spec.activation, false);
        const bool bulk2 = wide2 && hopper_fp8_bulk_epilogue(GEMM_DOWN, L.H, L.I, L.H, 0, rows_in_bf16(L, MOE_DTYPE_BF16));
        char tile[224];
        snprintf(tile, sizeof tile, "tiles 128x%dx128 (GEMM1%s) and 128x%dx128 (GEMM2), %s%s", wide1 ? 192 : 128,
                 L.a2_in_epilogue ? ", A2 quantised in its epilogue" : "", wide2 ? 192 : 128,
                 wide1 && wide2   ? "5 stages, scales in the tile stage"
                 : wide1 || wide2 ? "5 stages with scales in the tile stage (192 wide), 6 with a scale ring (128)"
                                  : "6 stages, scales by a ring",
                 bulk1 && bulk2 ? "; both epilogues by bulk copies, 4 stages (GEMM2's when y is bf16)"
                 : bulk1        ? "; GEMM1's epilogue by bulk copies, 4 stages"
                 : bulk2        ? "; GEMM2's epilogue by bulk copies when y is bf16, 4 stages"
                                : "");
        const bool scatter = x_scatter_rule(L) && L.H % 4 == 0; // x's own alignment is not known here
        snprintf(tiles, sizeof tiles, "fp8 TMA+wgmma e4m3, %s%s%s, %s, partials promoted into fp32 per 128-K block",
                 L.swap ? "both GEMMs on the decode kernel with the operands swapped (128 weight rows x 32 plan "
                          "rows x 128 K, 8 stages)"
                        : tile,
                 L.swap ? "" : tickets ? ", tiles from a ticket counter" : ", tiles by a static stride",
                 L.swap ? "" : hopper_expert_raster(large) ? ", expert by expert" : ", grouped raster over all blocks",
                 scatter ? "x quantised straight into plan order (when its rows are 4-element aligned)"
                         : "x codes and scales permuted");
    }
    else if (L.fp8)
        snprintf(tiles, sizeof tiles,
                 "fp8 mma.sync m16n8k32 e4m3 (f16 HMMA on sm_90), %s, x codes gathered, scales promoted per "
                 "128-K block", v1);
    else if (hopper && L.swap)
        snprintf(tiles, sizeof tiles, "TMA+wgmma bf16, both GEMMs on the decode kernel with the operands swapped (128 "
                 "weight rows x 32 plan rows x 64 K, 8 stages), x rows permuted");
    else if (hopper) {
        // The choices gemm_hopper.cu's grouped_launch makes, by the same functions.
        const a_rows rows = bf16_a_rows(L);
        const bool tickets = hopper_ticket_schedule(true), gather = rows == A_GATHER;
        const bool act_first = hopper_gemm1_act_first(w->spec.activation, L.I, gather, tickets);
        const bool bulk2 = hopper_gemm2_bulk(L.H, L.I, L.H, rows_in_bf16(L, MOE_DTYPE_BF16), tickets);
        const char *skip = !tickets ? ""
                           : hopper_gemm1_skip_idle(tickets) ? ", both GEMMs skip the MMAs of all-padding half blocks"
                                                             : ", GEMM2 skips the MMAs of all-padding half blocks";
        snprintf(tiles, sizeof tiles, "TMA+wgmma, tiles %dx%dx64 (GEMM1) and %dx%dx64 (GEMM2), 4 stages, %s, %s%s, %s%s%s%s",
                 HOPPER_BLOCK_M, hopper_tile_n(L.R13, tickets, gather), HOPPER_BLOCK_M,
                 hopper_tile_n(L.H, tickets, false),
                 gather              ? "x rows gathered by the producer"
                 : rows == A_FILL    ? "x rows copied into plan order by GEMM1's idle producer warps"
                 : rows == A_SCATTER ? "x rows scattered into plan order token by token"
                                     : "x rows permuted in plan order",
                 tickets ? "tiles from a ticket counter" : "tiles by a static stride",
                 hopper_expert_raster(true) ? " expert by expert" : " in the grouped raster over all blocks",
                 !act_first ? "GEMM1's staged epilogue"
                 : hopper_gemm1_act_tma(act_first, tickets, hopper_tile_n(L.R13, tickets, gather), L.H)
                     ? "GEMM1's activation from the accumulators, its A2 tiles stored by TMA"
                     : "GEMM1's activation from the accumulators",
                 bulk2 ? ", GEMM2's rows by bulk copies when y is bf16 (3 stages)" : "",
                 bulk2 && hopper_gemm2_early_rows() ? ", its row table loaded during the last MMAs" : "", skip);
    }
    else
        snprintf(tiles, sizeof tiles, "mma.sync, %s, x rows gathered", v1);
    char shared[160];
    if (!L.shared)
        snprintf(shared, sizeof shared, "none");
    else if (L.fused)
        snprintf(shared, sizeof shared, "fused as expert %lld of the grouped GEMMs (Is = I = %lld)", (long long)L.E,
                 (long long)L.I);
    else
        snprintf(shared, sizeof shared, "separate (Is = %lld != I = %lld), its GEMMs on v1", (long long)L.Is,
                 (long long)L.I);
    const bool act_ok = L.fp8 ? act_format == MOE_FORMAT_FP8_ROW128 || act_format == MOE_FORMAT_FP8_TENSOR
                              : act_format == MOE_FORMAT_F32;
    const char *act_note = !act_ok ? (L.fp8 ? " (unsupported on cuda: FP8 weights need act_format fp8-row128 or "
                                              "fp8-tensor; moe_forward returns UNSUPPORTED)"
                                            : " (unsupported on cuda: activation quantisation needs FP8 weights; "
                                              "moe_forward returns UNSUPPORTED)")
                           : L.a2_in_epilogue ? " (x quantised once per token, A2 in GEMM1's epilogue)"
                           : L.fp8 ? " (x quantised once per token, A2 by a separate kernel after GEMM1)"
                                   : "";
    return snprintf(buf, size, "backend=cuda T=%lld weights=%s gemm=%s (%s) because %s; plan block=%lld rows; "
                               "shared expert: %s; act_format=%s%s; GEMM2 rows %s; workspace=%lld bytes",
                    (long long)T, L.fp8 ? moe_format_name(w->format) : moe_dtype_name(dt), moe__cuda_gemm_name(L.gemm),
                    tiles, why, (long long)L.block,
                    shared, moe_format_name(act_format), act_note,
                    rows_in_bf16(L, MOE_DTYPE_BF16) ? "bf16 when y is bf16, else fp32" : "fp32",
                    (long long)moe__cuda_forward_workspace(w, T, act_format));
}

// The workspace for T tokens: the layout's, and no less than that of any smaller T. Each path's
// layout grows with T, but where the path changes it may shrink (the swapped decode kernel keeps a
// permuted x that v1 does not; v1's 64-row blocks pad more than its 32-row ones), so the layouts
// just below each change of path at or below T count too: the last T within the swapped kernel's
// rows-per-expert limit (moe__fp8_swap_select) and the last T below its bf16 lower bound
// (moe__bf16_swap_select; v1 -> Hopper tiles only grows). A caller sizing for its largest T can then run
// every smaller T.
extern "C" size_t moe__cuda_forward_workspace(const moe_weights_t *w, int64_t num_tokens, moe_format act_format) {
    ws_layout L;
    if (!layout_compute(w, num_tokens, act_format, &L)) return SIZE_MAX;
    int64_t total = L.total;
    const int64_t k = L.k, experts = L.experts;
    const int64_t half = (experts + 1) / 2; // 2 T*k >= experts <=> T*k >= half
    const int64_t below[2] = {(int64_t)MOE__FP8_SWAP_MAX_AVG_ROWS * experts / k, (half + k - 1) / k - 1};
    for (int i = 0; i < 2; i++) {
        ws_layout B;
        if (below[i] >= 1 && below[i] < num_tokens && layout_compute(w, below[i], act_format, &B) && B.total > total)
            total = B.total;
    }
    return (size_t)total;
}

extern "C" moe_status moe__cuda_forward(moe_context_t *ctx, const moe_weights_t *w, const moe_forward_args *args) {
    static const char fn[] = "moe_forward";
    const moe__cuda_weights *d = (const moe__cuda_weights *)w->device;
    const moe_layer_spec *s = &w->spec;
    const moe_status act_st = check_act_format(ctx, w, args->act_format);
    if (act_st != MOE_STATUS_OK) return act_st;
    const int64_t T = args->x.shape[0];
    ws_layout L;
    if (!layout_compute(w, T, args->act_format, &L))
        return moe__error(ctx, MOE_STATUS_INTERNAL, "%s: workspace layout overflowed after validation", fn);
    if (T == 0) return MOE_STATUS_OK;
    const int64_t H = L.H, E = L.E, k = L.k;
    cudaStream_t stream = (cudaStream_t)args->stream;
    moe_status st;

    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess || current != ctx->device) {
        if ((st = cuda_status(ctx, cudaSetDevice(ctx->device), "cudaSetDevice")) != MOE_STATUS_OK) return st;
    }
    uint8_t *base = (uint8_t *)(((uintptr_t)args->workspace + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN);
#define WS(type, field) ((type *)(base + L.field))

#define LAUNCH(call, what)                                                                    \
    do {                                                                                      \
        if ((st = cuda_status(ctx, (call), what)) != MOE_STATUS_OK) return st;                \
    } while (0)

    // x for the GEMM: used in place when it already is 16-byte-aligned rows of the weights'
    // dtype, else converted once into the workspace.
    const moe_tensor *x = &args->x;
    const int64_t x_stride = moe__stride(x, 0);
    const void *xg = x->data;
    int64_t ldx = x_stride;
    if (!L.fp8 && (x->dtype != d->dtype || x_stride % 8 != 0 || (uintptr_t)x->data % 16 != 0)) {
        LAUNCH(convert_rows_launch(x->data, x->dtype, x_stride, WS(void, xc), d->dtype, T, H, stream), "convert x");
        xg = WS(void, xc);
        ldx = H;
    }

    // Routing: ids [T*k] and weights [T*k], contiguous.
    const int32_t *ids;
    const float *weights;
    if (moe_tensor_present(&args->topk_ids)) {
        const moe_tensor *ti = &args->topk_ids, *tw = &args->topk_weights;
        if (is_row_major(ti, k) && is_row_major(tw, k)) {
            ids = (const int32_t *)ti->data;
            weights = (const float *)tw->data;
        } else {
            topk_view src = {(int32_t *)ti->data, (float *)tw->data, moe__stride(ti, 0), moe__stride(ti, 1),
                             moe__stride(tw, 0), moe__stride(tw, 1)};
            topk_view dst = {WS(int32_t, ids), WS(float, weights), k, 1, k, 1};
            LAUNCH(copy_topk_launch(src, dst, T, k, stream), "copy topk_ids/topk_weights");
            ids = dst.ids;
            weights = dst.weights;
        }
    } else {
        route_args r;
        memset(&r, 0, sizeof r);
        if (moe_tensor_present(&args->router_logits)) {
            r.logits = (const float *)args->router_logits.data;
            r.logits_stride0 = moe__stride(&args->router_logits, 0);
            r.logits_stride1 = moe__stride(&args->router_logits, 1);
        } else {
            LAUNCH(router_logits_launch(x->data, x->dtype, x_stride, d->router, d->router_bias, T, E, H,
                                        WS(float, logits), stream),
                   "router logits");
            r.logits = WS(float, logits);
            r.logits_stride0 = E;
            r.logits_stride1 = 1;
        }
        r.num_experts = E;
        r.top_k = k;
        r.score = s->score;
        r.correction_bias = s->use_correction_bias ? d->correction_bias : NULL;
        r.n_group = s->n_group;
        r.topk_group = s->topk_group;
        r.renormalize = s->renormalize;
        r.routed_scale = s->routed_scale;
        r.ids = WS(int32_t, ids);
        r.weights = WS(float, weights);
        LAUNCH(route_launch(&r, T, stream), "route");
        ids = r.ids;
        weights = r.weights;
    }
    const bool out_ids = moe_tensor_present(&args->out_topk_ids), out_w = moe_tensor_present(&args->out_topk_weights);
    if (out_ids || out_w) {
        topk_view src = {(int32_t *)ids, (float *)weights, k, 1, k, 1};
        topk_view dst = {out_ids ? (int32_t *)args->out_topk_ids.data : NULL,
                         out_w ? (float *)args->out_topk_weights.data : NULL,
                         out_ids ? moe__stride(&args->out_topk_ids, 0) : 0,
                         out_ids ? moe__stride(&args->out_topk_ids, 1) : 0,
                         out_w ? moe__stride(&args->out_topk_weights, 0) : 0,
                         out_w ? moe__stride(&args->out_topk_weights, 1) : 0};
        LAUNCH(copy_topk_launch(src, dst, T, k, stream), "copy out_topk_ids/out_topk_weights");
    }
    const float *gate = NULL;
    if (L.shared && d->shared_gate) {
        LAUNCH(shared_gate_launch(x->data, x->dtype, x_stride, d->shared_gate, T, H, WS(float, gate), stream),
               "shared gate");
        gate = WS(float, gate);
    }

    // The plan (the shared expert fused in as expert E when its width is I).
    moe_dispatch_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.expert_counts = WS(int64_t, counts);
    plan.expert_offsets = WS(int64_t, offsets);
    plan.sorted_ids = WS(int32_t, sorted_ids);
    plan.block_expert = WS(int32_t, block_expert);
    // How bf16 GEMM1 gets its A rows (bf16_a_rows); the swapped decode kernel's are permuted.
    const bool hopper = L.gemm == MOE__CUDA_GEMM_HOPPER;
    const bool tickets = hopper && !L.swap && hopper_ticket_schedule(true);
    const a_rows a_from = bf16_a_rows(L);
    const bool gather = a_from == A_GATHER, fill = a_from == A_FILL, scatter = a_from == A_SCATTER;
    // Each routed id's plan row too for the scatter, bf16's or the FP8 x quantiser's (1x128 scales).
    int32_t *row_of = scatter || (L.fp8 && !L.fp8_tensor && hopper) ? WS(int32_t, row_of) : NULL;
    st = moe__cuda_plan_build(ctx, ids, T, k, E, L.block, L.shared_rows, &plan, row_of, stream);
    if (st != MOE_STATUS_OK) return st;

    if (L.fp8) { // w8a8: its own GEMM steps
        st = forward_fp8(ctx, w, L, base, args, plan, weights, gate, stream);
        if (st != MOE_STATUS_OK) return st;
        return launch_combine(ctx, L, base, ids, args, stream);
    }

    // The two grouped GEMMs over the plan.
    gemm_args g;
    memset(&g, 0, sizeof g);
    g.mode = GEMM_UP;
    g.a = xg;
    g.lda = ldx;
    g.b = d->w13;
    g.experts = L.experts;
    g.bias = d->b13;
    g.n = L.R13;
    g.k = H;
    g.sorted_ids = plan.sorted_ids;
    g.block_expert = plan.block_expert;
    g.live_rows = plan.expert_offsets + L.experts;
    g.rows = L.max_rows;
    g.tokens = T;
    g.top_k = k;
    g.topk_weights = weights;
    g.shared_scale = gate;
    g.weight_on_input = s->weight_on_input;
    g.out = WS(void, a2);
    g.ldo = L.I;
    g.activation = s->activation;
    g.act_alpha = s->act_alpha;
    g.act_limit = s->act_limit;
    if (hopper && !L.swap && hopper_expert_raster(true)) g.expert_offsets = plan.expert_offsets; // g2 copies g
    if (tickets) {
        // The tiled GEMMs' ticket counter: 0 for GEMM1, which leaves it 0 for GEMM2; then, with
        // fill, GEMM1's next row to copy and each block's rows copied.
        LAUNCH(zero_words_launch(WS(uint32_t, units), TICKET_WORDS + (fill ? 1 + (int)L.max_blocks : 0), stream),
               "zero the GEMMs' ticket counter");
        g.unit_counter = WS(int, units);
    }
    if (gather) {
        if ((st = hopper_gemm1_gather_launch(ctx, &g, stream)) != MOE_STATUS_OK) return st;
    } else if (hopper) {
        // TMA loads A tiles from x's rows in plan order (the selection guarantees bf16 and
        // H % 64 == 0, and x is 16-byte-aligned rows here).
        if (scatter)
            LAUNCH(hopper_scatter_launch(&g, WS(void, xperm), row_of, L.fused ? plan.expert_offsets + L.E : NULL, stream),
                   "scatter x rows into plan order");
        else if (!fill)
            LAUNCH(hopper_permute_launch(&g, WS(void, xperm), !L.swap, stream), "permute x rows");
        gemm_args gp = g;
        gp.a = WS(void, xperm);
        gp.lda = H;
        if (fill) {
            gp.x_fill = g.a;
            gp.ldx_fill = g.lda;
            gp.rows_ready = WS(int, units) + TICKET_WORDS;
        }
        st = L.swap ? hopper_swap_decode_launch(ctx, &gp, stream) : hopper_gemm_launch(ctx, &gp, stream);
        if (st != MOE_STATUS_OK) return st;
    } else {
        LAUNCH(gemm_launch(d->dtype, &g, stream), "GEMM1 (W13)");
    }

    gemm_args g2 = g;
    g2.mode = GEMM_DOWN;
    g2.a = WS(void, a2);
    g2.lda = L.I;
    g2.b = d->w2;
    g2.bias = d->b2;
    g2.n = H;
    g2.k = L.I;
    g2.out = WS(void, out);
    g2.out_bf16 = rows_in_bf16(L, args->y.dtype);
    g2.ldo = H;
    if (hopper) {
        st = L.swap ? hopper_swap_decode_launch(ctx, &g2, stream) : hopper_gemm_launch(ctx, &g2, stream);
        if (st != MOE_STATUS_OK) return st;
    } else {
        LAUNCH(gemm_launch(d->dtype, &g2, stream), "GEMM2 (W2)");
    }

    if (L.shared && !L.fused) {
        // The shared expert on its own: an identity plan over the T tokens.
        gemm_args sg = g;
        sg.b = d->s13;
        sg.bias = d->sb13;
        sg.n = L.R13s;
        sg.sorted_ids = NULL;
        sg.block_expert = NULL;
        sg.live_rows = NULL;
        sg.rows = T;
        sg.out = WS(void, a2s);
        sg.ldo = L.Is;
        LAUNCH(gemm_launch(d->dtype, &sg, stream), "shared GEMM1");
        gemm_args sg2 = g2;
        sg2.a = WS(void, a2s);
        sg2.lda = L.Is;
        sg2.b = d->s2;
        sg2.bias = d->sb2;
        sg2.k = L.Is;
        sg2.sorted_ids = NULL;
        sg2.block_expert = NULL;
        sg2.live_rows = NULL;
        sg2.rows = T;
        LAUNCH(gemm_launch(d->dtype, &sg2, stream), "shared GEMM2");
    }

#undef LAUNCH
#undef WS
    return launch_combine(ctx, L, base, ids, args, stream);
}

// The FP8 path's activations in a forward's workspace, from this file's own ws_layout (see
// cuda_backend.h): the GPU tests read them back for their stage-wise checks.
extern "C" moe_status moe__cuda_fp8_workspace_view(moe_context_t *ctx, const moe_weights_t *w, int64_t T,
                                                   moe_format act_format, void *workspace,
                                                   moe__cuda_fp8_view *out) {
    static const char fn[] = "moe__cuda_fp8_workspace_view";
    if (!w || !workspace || !out)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: w, workspace and out must be set", fn);
    memset(out, 0, sizeof *out);
    if (!is_fp8_weights(w->format))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: weights format %s, expected fp8-tensor or "
                          "fp8-block128 (only the w8a8 path quantises its activations)", fn, moe_format_name(w->format));
    if (act_format != MOE_FORMAT_FP8_ROW128 && act_format != MOE_FORMAT_FP8_TENSOR)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: act_format %s, expected fp8-row128 or fp8-tensor", fn,
                          moe_format_name(act_format));
    ws_layout L;
    if (T < 0 || !layout_compute(w, T, act_format, &L))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: T = %lld: expected T >= 0 with a workspace layout "
                          "that fits in 64 bits", fn, (long long)T);
    uint8_t *base = (uint8_t *)(((uintptr_t)workspace + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN);
    const bool tensor = L.fp8_tensor;
    out->gemm = L.gemm;
    out->block = L.block;
    out->experts = L.experts;
    out->max_rows = L.max_rows;
    out->padding_id = L.rows;
    out->offsets = (const int64_t *)(base + L.offsets);
    out->sorted_ids = (const int32_t *)(base + L.sorted_ids);
    // x: one scale (tensor), or [T, ceil(H/128)] (row128).
    const int64_t gh = (L.H + 127) / 128, gi = (L.I + 127) / 128, gs = (L.Is + 127) / 128;
    out->x = moe__cuda_fp8_act{base + L.xq, (const float *)(base + L.xq_scales), NULL, T, L.H, tensor ? 1 : gh,
                               tensor ? 0 : gh, tensor ? 0 : 1};
    // A2 in plan order: one scale per plan row (tensor; that row's tensor: routed or fused
    // shared), or k-block-major [ceil(I/128)][scale_ld] (row128; no fp32 values when GEMM1's
    // epilogue quantised it). See forward_fp8 and quant.cu.
    out->a2 = moe__cuda_fp8_act{base + L.a2q, (const float *)(base + L.a2q_scales),
                                L.a2_in_epilogue ? NULL : (const float *)(base + L.a2f), L.max_rows, L.I,
                                tensor ? 1 : gi, 1, tensor ? 0 : L.scale_ld};
    // The separate shared expert (Is != I): [T, Is] by token, one scale or [T, ceil(Is/128)].
    if (L.shared && !L.fused)
        out->shared_a2 = moe__cuda_fp8_act{base + L.a2sq, (const float *)(base + L.a2sq_scales),
                                           (const float *)(base + L.a2sf), T, L.Is, tensor ? 1 : gs,
                                           tensor ? 0 : gs, tensor ? 0 : 1};
    return MOE_STATUS_OK;
}
