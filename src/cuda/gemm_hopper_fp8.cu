// The grouped FP8 (w8a8) expert GEMMs on the Hopper engine: the kernel is in
// src/cuda/hopper/grouped_fp8_kernel.cuh; this file holds the permute of the quantised x rows
// (where the quantiser does not write them into plan order itself: fp8-tensor, a separate shared
// expert, MOEFUSE_HOPPER_FP8_X=permute) and the library's entry points (declared in
// gemm_fp8_v1.cuh beside the v1 FP8 ones).
#include <stdlib.h>
#include <string.h>

#include "gemm_fp8_v1.cuh"
// gemm_fp8_v1.cuh's tile macros (v1's FP8_BM, ...) would rewrite the Hopper engine's constants
// of the same names (moe_hopper::FP8_BM, ...); nothing below uses v1's.
#undef FP8_BM
#undef FP8_BN
#undef FP8_BK
#undef FP8_STAGES
#undef FP8_THREADS
#undef FP8_SMEM_BYTES
#include "hopper/decode_swap_kernel.cuh"
#include "hopper/grouped_api.h"

namespace {

using namespace moe_hopper;

// Quantised x rows in plan order: codes [rows, h] (16-byte copies, h % 16 == 0) and, for
// FP8_ROW128, their scales column-major [ceil(h/128)][ld_scales] (the GEMM's scale warp reads a
// tile's 128 rows of one k-block as 512 contiguous bytes). Padding rows: scale 0 and no codes
// written (the GEMMs drop their products; quant.cu says why). One block per plan row; rows past
// the live total are not written. A thread loads up to PERMUTE_BATCH pieces before it stores
// them (one load in flight at a time, and the padding rows zeroed, made deepseek-v3's T = 64
// permute, 512 live rows in 7104, take 22 us; K2's and K4's ncu).
constexpr int PERMUTE_THREADS = 128, PERMUTE_BATCH = 4;
__global__ void __launch_bounds__(PERMUTE_THREADS)
    fp8_permute_kernel(const uint4 *__restrict__ codes, uint4 *__restrict__ codes_out, int64_t h16,
                       const float *__restrict__ scales, float *__restrict__ scales_out, int64_t groups,
                       int64_t ld_scales, const int32_t *sorted_ids, const int64_t *live_rows, int64_t padding_id,
                       int64_t top_k) {
    pdl_wait();
    pdl_launch_dependents();
    const int64_t live = *live_rows;
    for (int64_t r = blockIdx.x; r < live; r += gridDim.x) {
        const int64_t id = sorted_ids[r];
        if (id == padding_id) {
            for (int64_t g = threadIdx.x; g < groups; g += PERMUTE_THREADS) scales_out[g * ld_scales + r] = 0.0f;
            continue;
        }
        const int64_t token = plan_id_token(id, padding_id, top_k);
        const uint4 *src = codes + token * h16;
        uint4 *dst = codes_out + r * h16;
        for (int64_t c0 = threadIdx.x; c0 < h16; c0 += PERMUTE_BATCH * PERMUTE_THREADS) {
            uint4 v[PERMUTE_BATCH];
#pragma unroll
            for (int j = 0; j < PERMUTE_BATCH; j++) {
                const int64_t c = c0 + j * PERMUTE_THREADS;
                v[j] = c < h16 ? src[c] : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int j = 0; j < PERMUTE_BATCH; j++)
                if (c0 + j * PERMUTE_THREADS < h16) dst[c0 + j * PERMUTE_THREADS] = v[j];
        }
        for (int64_t g = threadIdx.x; g < groups; g += PERMUTE_THREADS)
            scales_out[g * ld_scales + r] = scales[token * groups + g];
    }
}

// The kernel's parameters for one grouped GEMM (grouped_kernel.cuh's grouped_prepare for the
// FP8 tile and scales).
void fill_params(const fp8_gemm_args *a, int sms, int bn, grouped_fp8_params *p) {
    *p = grouped_fp8_params{}; // fields of grouped_params this kernel does not read stay zero
    const gemm_args *g = &a->g;
    grouped_plan_params(g, sms, bn, &p->g); // FP8_BM == BM (static_assert in the kernel)
    p->sa = a->a_scales;
    p->sa_rs = (long long)a->a_scale_rs;
    p->sa_ks = (long long)a->a_scale_ks;
    p->sa_bulk = fp8_scales_bulk_ok(p->sa, p->sa_rs, p->sa_ks);
    p->sw = a->w_scales;
    p->sw_expert = (long long)(a->w_scale_rows * a->w_scale_cols);
    p->sw_cols = (long long)a->w_scale_cols;
    p->sw_kind = a->w_scale_kind == FP8W_TENSOR ? GF8_W_TENSOR
                 : a->w_scale_kind == FP8W_BLOCK ? GF8_W_BLOCK
                                                 : GF8_W_PAIRED;
    p->g.out_bf16 = g->mode == GEMM_DOWN && g->out_bf16;
    const bool quant = g->mode == GEMM_UP && a->out_scales;
    p->tiles_per_unit = quant && g->activation != MOE_ACT_RELU2 ? 2 : 1;
    p->out_scales = quant ? a->out_scales : nullptr;
    p->out_scale_ks = (long long)a->out_scale_ks;
}

} // namespace

cudaError_t hopper_fp8_permute_launch(const gemm_args *g, const float *x_scales, int64_t groups, uint8_t *codes_out,
                                      float *scales_out, int64_t scales_ld, cudaStream_t stream) {
    if (g->rows == 0) return cudaSuccess;
    int device = 0, sms = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err != cudaSuccess) return err;
    const int64_t cap = (int64_t)sms * 16;
    const unsigned blocks = (unsigned)(g->rows < cap ? g->rows : cap);
    return launch_kernel(fp8_permute_kernel, blocks, PERMUTE_THREADS, 0, stream, (const uint4 *)g->a,
                         (uint4 *)codes_out, g->k / 16, x_scales, scales_out, groups, scales_ld, g->sorted_ids,
                         g->live_rows, g->tokens * g->top_k, g->top_k);
}

// The decode kernel with the operands swapped (decode_swap_kernel.cuh) instead of the 128 x 128
// tiles: moe__fp8_swap_select's rule (src/core/gemm_select.c, shared with the analysis), unless
// MOEFUSE_FP8_DECODE=swap or =tiles forces one (tests, A/B runs).
bool hopper_fp8_swap_decode(int64_t tokens, int64_t top_k, int64_t experts) {
    const char *env = getenv("MOEFUSE_FP8_DECODE");
    if (env && !strcmp(env, "swap")) return true;
    if (env && !strcmp(env, "tiles")) return false;
    return moe__fp8_swap_select(tokens * top_k, experts) != 0;
}

// Under 64 routed rows per expert on average most blocks have an all-padding half: the tiles'
// decode instantiation (SKIP_IDLE) skips them.
static bool fp8_tiles_decode(int64_t tokens, int64_t top_k, int64_t experts) {
    return tokens * top_k < 64 * experts;
}

bool hopper_fp8_ticket_tiles(int64_t tokens, int64_t top_k, int64_t experts) {
    return !fp8_tiles_decode(tokens, top_k, experts);
}

static bool a2_epilogue_sizes_ok(int64_t n, int64_t ldo, bool gated) {
    return ldo % 16 == 0 && (gated ? n % 128 == 0 : n % 16 == 0);
}

bool hopper_fp8_a2_in_epilogue(int64_t n, int64_t ldo, int gated) {
    const char *env = getenv("MOEFUSE_FP8_A2");
    return env && !strcmp(env, "epilogue") && a2_epilogue_sizes_ok(n, ldo, gated != 0);
}

// 128 x 192 tiles with the scales in the tile stage (grouped_fp8_config's BN and STAGE_SCALES: the
// k-block's A scales by one bulk copy in the stage's transaction, the B scales read by the
// consumers, no scale warp or ring) at prefill (on the static stride, or on tickets where the
// forward gives a counter: hopper_fp8_large_experts), without A2 quantised in the epilogue (the
// 192-wide kernel has no EPI_QUANT). Measured in S1 of session 18
// (bench/results/2026-12-04-h200-session18/callS1): FP8 forward 192/128-ring 0.88-0.98 at T = 4096
// and 16384 on eight shapes, 0.86-1.02 at T = 512; the stage scales on 128-wide tiles alone were
// 0.94-1.04, mostly above 1, so 128-wide tiles keep the ring. MOEFUSE_HOPPER_FP8_BN=128 forces
// the 128 x 128 tiles. The launch also needs k-block-major A scales (fp8_scales_bulk_ok) and not
// the swapped decode kernel.
bool hopper_fp8_wide_tiles(int64_t tokens, int64_t top_k, int64_t experts, bool quant) {
    const char *env = getenv("MOEFUSE_HOPPER_FP8_BN");
    if (env && !strcmp(env, "128")) return false;
    return !fp8_tiles_decode(tokens, top_k, experts) && !quant;
}

// EPI_BULK on the 128 x 192 tiles (grouped_epilogue.cuh's bulk_epilogue: a warp's finished rows in
// shared memory, one bulk copy a row that overlaps the next tile; 4 stages instead of 5): GEMM2 with
// bf16 rows, GEMM1 with a gated activation (fp32 A2), whole 16-byte pieces of every row (n % 8, ldo
// % 8 for bf16 or % 4 for fp32). By default where K <= 2048 (at most 16 k-blocks a tile: there the
// epilogue is a large share of a tile, and the fifth stage a small one). Session 19
// (bench/results/2026-12-04-h200-session19/), FP8 forward, medians of 3 alternated rounds, against
// the staged epilogue: this rule 0.935-0.981 on qwen3-30b-a3b, qwen3-next-80b-a3b, qwen3-235b-a22b
// and glm-4.5-air (calls T2 and T4), 0.97-1.00 on mixtral, 0.996-1.004 on gpt-oss and deepseek-v3
// (T2). Bulk at every K gained on gpt-oss-20b (0.942 at T = 16384, a point that spreads by 10%) but
// lost on deepseek-v3 (1.014) and, in T1, gpt-oss-120b (1.023, noisy); the lab put the long-K GEMMs
// (gpt-oss K 2880, deepseek-v3's GEMM1 K 7168) 3-18% slower with it. A form that keeps the fifth
// stage (a third of a row a round through the staging buffer, each round waiting for the last
// one's copies) was no faster than the staged epilogue anywhere (T4) and is gone. Nor is code size
// what costs the lab's gpt-oss GEMM1: with GEMM1's activations in a rolled loop (half the SASS), the
// FP8 forward was 1-3% slower than with this unrolled form on every shape (session 20, call U1).
// MOEFUSE_HOPPER_FP8_EPI=bulk takes it at every K, =staged never.
bool hopper_fp8_bulk_epilogue(int mode, int64_t n, int64_t k, int64_t ldo, int activation, bool out_bf16) {
    if (!hopper_bulk_by_k("MOEFUSE_HOPPER_FP8_EPI", k) || n % 8 != 0) return false;
    return mode == GEMM_DOWN ? out_bf16 && ldo % 8 == 0 : activation != MOE_ACT_RELU2 && ldo % 4 == 0;
}

bool hopper_fp8_x_scatter(void) {
    const char *env = getenv("MOEFUSE_HOPPER_FP8_X");
    return !(env && !strcmp(env, "permute"));
}

// The 128 x 192 kernel of one GEMM (mode), epilogue (bulk or staged) and schedule (dyn: tickets),
// and (*smem) the shared memory it needs.
typedef decltype(&grouped_fp8_kernel<GEMM_UP, false>) fp8_kernel_fn;
static fp8_kernel_fn wide_kernel(int mode, bool bulk, bool dyn, int *smem) {
    *smem = dyn ? (bulk ? grouped_fp8_smem_bytes<true, true, 192, true>() : grouped_fp8_smem_bytes<true, true, 192>())
                : (bulk ? grouped_fp8_smem_bytes<false, true, 192, true>() : grouped_fp8_smem_bytes<false, true, 192>());
    if (mode == GEMM_DOWN)
        return bulk ? (dyn ? grouped_fp8_kernel<GEMM_DOWN, false, EPI_BULK, true, true, 192>
                           : grouped_fp8_kernel<GEMM_DOWN, false, EPI_BULK, false, true, 192>)
                    : (dyn ? grouped_fp8_kernel<GEMM_DOWN, false, EPI_STAGED, true, true, 192>
                           : grouped_fp8_kernel<GEMM_DOWN, false, EPI_STAGED, false, true, 192>);
    return bulk ? (dyn ? grouped_fp8_kernel<GEMM_UP, false, EPI_BULK, true, true, 192>
                       : grouped_fp8_kernel<GEMM_UP, false, EPI_BULK, false, true, 192>)
                : (dyn ? grouped_fp8_kernel<GEMM_UP, false, EPI_STAGED, true, true, 192>
                       : grouped_fp8_kernel<GEMM_UP, false, EPI_STAGED, false, true, 192>);
}

moe_status hopper_fp8_gemm_launch(moe_context_t *ctx, const fp8_gemm_args *a, cudaStream_t stream) {
    const gemm_args *g = &a->g;
    if (g->rows == 0) return MOE_STATUS_OK;
    const bool quant = g->mode == GEMM_UP && a->out_scales;
    if (quant && (!a2_epilogue_sizes_ok(g->n, g->ldo, g->activation != MOE_ACT_RELU2) ||
                  a->out_scale_ks < g->rows || (uintptr_t)a->out_scales % 4 != 0))
        return moe__error(ctx, MOE_STATUS_INTERNAL,
                          "Hopper FP8 GEMM1 with A2 quantised in its epilogue: needs ldo a multiple of 16, n a "
                          "multiple of 128 (gated) or 16 (relu2) and out_scale_ks >= rows; got n = %lld, ldo = %lld, "
                          "out_scale_ks = %lld, rows = %lld",
                          (long long)g->n, (long long)g->ldo, (long long)a->out_scale_ks, (long long)g->rows);
    if (quant && a->swap_decode)
        return moe__error(ctx, MOE_STATUS_INTERNAL,
                          "Hopper FP8 decode GEMM: A2 quantised in the epilogue needs the 128 x 128 tiles");
    if (!g->sorted_ids || !g->block_expert || !g->live_rows || g->n % 16 != 0 || g->k % 16 != 0 ||
        g->lda != g->k || g->ldo % 4 != 0 || (uintptr_t)g->out % 16 != 0 || (uintptr_t)g->bias % 16 != 0 ||
        (uintptr_t)g->a % 16 != 0 || (uintptr_t)g->b % 16 != 0)
        return moe__error(ctx, MOE_STATUS_INTERNAL,
                          "Hopper FP8 GEMM: needs a plan (sorted ids, block owners, live rows), n and k multiples of "
                          "16 with lda == k, ldo a multiple of 4 and 16-byte aligned a, b, out and bias; got n = "
                          "%lld, k = %lld, lda = %lld, ldo = %lld, a %p, b %p, out %p, bias %p",
                          (long long)g->n, (long long)g->k, (long long)g->lda, (long long)g->ldo, g->a, g->b, g->out,
                          (const void *)g->bias);
    char why[256] = "";
    int sms = 0;
    moe_status st = device_sms(&sms, why, sizeof why);
    if (st != MOE_STATUS_OK) return moe__error(ctx, st, "Hopper FP8 GEMM: %s", why);

    // The kernel: the decode instantiation (SKIP_IDLE), tickets (DYN), or the 192-wide tiles.
    const bool decode = fp8_tiles_decode(g->tokens, g->top_k, g->experts);
    const bool dyn = g->unit_counter && hopper_fp8_ticket_tiles(g->tokens, g->top_k, g->experts);
    const bool wide = !a->swap_decode && hopper_fp8_wide_tiles(g->tokens, g->top_k, g->experts, quant) &&
                      fp8_scales_bulk_ok(a->a_scales, (long long)a->a_scale_rs, (long long)a->a_scale_ks);
    const int bn = wide ? 192 : FP8_BN;
    const bool bulk = wide && hopper_fp8_bulk_epilogue(g->mode, g->n, g->k, g->ldo, g->activation, g->out_bf16 != 0);

    // The rows' map: 128-row tiles, or the swapped decode kernel's 32-row plan blocks (its B); the
    // weights' map: boxes of the tile's width (the swapped kernel's A: 128 rows).
    CUtensorMap map_a, map_b;
    CUresult cr = make_tensor_map_e4m3(&map_a, g->a, g->rows, g->k, g->lda, a->swap_decode ? SWAP_NT : FP8_BM);
    if (cr == CUDA_SUCCESS) cr = make_tensor_map_e4m3(&map_b, g->b, g->experts * g->n, g->k, g->k, bn);
    if (cr != CUDA_SUCCESS)
        return moe__error(ctx, cr == CUDA_ERROR_NOT_FOUND ? MOE_STATUS_UNSUPPORTED : MOE_STATUS_DEVICE_ERROR,
                          "Hopper FP8 GEMM: cuTensorMapEncodeTiled %s (error %d) for rows %lld, n %lld, k %lld",
                          cr == CUDA_ERROR_NOT_FOUND ? "not found in the driver" : "rejected the tensor map", (int)cr,
                          (long long)g->rows, (long long)g->n, (long long)g->k);
    grouped_fp8_params p;
    fill_params(a, sms, bn, &p);
    if (a->swap_decode) {
        // map_b's boxes (128 weight rows) are the swapped kernel's A; map_a's (a plan block) its B.
        return cuda_status(ctx, swap_decode_launch<false>(g->mode, map_b, map_a, p, g->rows, sms, stream),
                           g->mode == GEMM_UP ? "Hopper FP8 decode GEMM1 launch" : "Hopper FP8 decode GEMM2 launch");
    }
    // Persistent: at most one CTA per SM, and no more than the host bound of work units.
    const int64_t bound = (g->rows + FP8_BM - 1) / FP8_BM * units_along_n(p.g.tiles_n, p.tiles_per_unit);
    const unsigned ctas = (unsigned)(bound < sms ? bound : sms);
    p.g.unit_counter = dyn ? g->unit_counter : nullptr;
    // The shared-memory limit is set at each launch (allowed under graph capture; the dense FP8
    // launch does the same), so that no init hook outside this file is needed.
    int wide_smem = 0;
    auto kernel = wide  ? wide_kernel(g->mode, bulk, dyn, &wide_smem)
                  : dyn ? (g->mode == GEMM_DOWN ? grouped_fp8_kernel<GEMM_DOWN, false, EPI_STAGED, true>
                         : quant              ? grouped_fp8_kernel<GEMM_UP, false, EPI_QUANT, true>
                                              : grouped_fp8_kernel<GEMM_UP, false, EPI_STAGED, true>)
                  : g->mode == GEMM_DOWN
                      ? (decode ? grouped_fp8_kernel<GEMM_DOWN, true> : grouped_fp8_kernel<GEMM_DOWN, false>)
                  : quant ? (decode ? grouped_fp8_kernel<GEMM_UP, true, EPI_QUANT>
                                    : grouped_fp8_kernel<GEMM_UP, false, EPI_QUANT>)
                          : (decode ? grouped_fp8_kernel<GEMM_UP, true> : grouped_fp8_kernel<GEMM_UP, false>);
    const int smem = wide ? wide_smem : dyn ? grouped_fp8_smem_bytes<true>() : grouped_fp8_smem_bytes();
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err == cudaSuccess) {
        err = launch_kernel(kernel, ctas, THREADS, smem, stream, map_a, map_b, p);
    }
    return cuda_status(ctx, err, g->mode == GEMM_UP ? "Hopper FP8 GEMM1 launch" : "Hopper FP8 GEMM2 launch");
}
