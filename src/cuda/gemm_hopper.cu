// The grouped expert GEMMs on the Hopper engine: the kernel and its epilogues are in
// src/cuda/hopper/grouped_kernel.cuh (shared with the kernel lab, lab/grouped_lab.cu); this file
// holds the permute kernel and the library's entry points. Shipped epilogues: GEMM1 EPI_ACT_FIRST
// (EPI_STAGED where its shape checks fail, with the gathering producer on the static stride, or
// with MOEFUSE_HOPPER_EPI=staged), GEMM2 EPI_STAGED (src/cuda/NOTES.md, "GEMM1 epilogue" and
// sessions 13-14), or EPI_BULK (bulk copies of whole bf16 rows) where K <= 2048. GEMM1's A
// rows: gathered by its producer or permuted first, by moe__hopper_gather_select (hopper_a_gather);
// the permute pass stores x token by token (scatter_rows_kernel; hopper_permute_scatter); with
// MOEFUSE_HOPPER_A=fill the permuted copy is written by GEMM1 itself (hopper_a_fill).
#include <stdlib.h>
#include <string.h>

#include "gemm.cuh"
#include "hopper/decode_swap_kernel.cuh"
#include "hopper/grouped_api.h"
#include "hopper/grouped_kernel.cuh"

namespace {

using namespace moe_hopper;
constexpr int SHIPPED_EPI = EPI_STAGED;

// x rows in plan order; one block per row, 16-byte copies (H is a multiple of 8). Padding rows:
// zeros, or nothing when !zero_padding.
__global__ void permute_rows_kernel(const uint4 *x, int64_t ldx16, uint4 *a, int64_t h16, const int32_t *sorted_ids,
                                    const int64_t *live_rows, int64_t padding_id, int64_t top_k, bool zero_padding) {
    pdl_wait();
    pdl_launch_dependents();
    const int64_t live = *live_rows;
    for (int64_t r = blockIdx.x; r < live; r += gridDim.x) {
        const int64_t id = sorted_ids[r];
        uint4 *dst = a + r * h16;
        if (id == padding_id) {
            if (zero_padding)
                for (int64_t c = threadIdx.x; c < h16; c += blockDim.x) dst[c] = make_uint4(0, 0, 0, 0);
        } else {
            const int64_t token = plan_id_token(id, padding_id, top_k);
            const uint4 *src = x + token * ldx16;
            for (int64_t c = threadIdx.x; c < h16; c += blockDim.x) dst[c] = src[c];
        }
    }
}

// The same rows (padding rows zero) written token by token: a warp reads x's row t once and stores
// it to each of its plan rows, row_of[t * top_k + j] (j < top_k; -1: left out of the plan) and, with
// the shared expert fused, *shared_row0 + t; then the warps zero the padding rows. In plan order
// (permute_rows_kernel) each x row is read top_k times, and once x outgrows L2 mostly from DRAM:
// ncu of glm-4.5-air at T = 16384 on an H100 (bench/results/2026-12-05-session36/call1/prof_permute)
// read 981 MB for 134 MB of x, 744 us. The destinations sit one per lane and go to the warp by
// shuffles, as the FP8 quantiser's scatter (quant.cu's scatter_dest).
constexpr int SCATTER_THREADS = 256;
constexpr int SCATTER_UNROLL = 4; // 16-byte loads in flight per lane
__global__ void __launch_bounds__(SCATTER_THREADS)
    scatter_rows_kernel(const uint4 *x, int64_t ldx16, uint4 *a, int64_t h16, const int32_t *row_of,
                        const int64_t *shared_row0, int64_t tokens, int64_t top_k, const int32_t *sorted_ids,
                        const int64_t *live_rows, int64_t padding_id) {
    pdl_wait();
    pdl_launch_dependents();
    const int lane = threadIdx.x & 31;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const int dests = (int)top_k + (shared_row0 ? 1 : 0);
    const int64_t shared0 = shared_row0 ? *shared_row0 : 0;
    for (int64_t t = warp; t < tokens; t += warps) {
        int64_t dest = -1;
        if (lane < top_k) dest = row_of[t * top_k + lane];
        else if (lane == top_k && shared_row0) dest = shared0 + t;
        const uint4 *src = x + t * ldx16;
        // The trip count is the warp's, not the lane's: every lane reaches each shuffle (rows
        // narrower than a warp's 512 bytes hung with a per-lane bound: the suite's H = 128 case).
        for (int64_t c0 = 0; c0 < h16; c0 += 32 * SCATTER_UNROLL) {
            uint4 v[SCATTER_UNROLL];
#pragma unroll
            for (int u = 0; u < SCATTER_UNROLL; u++)
                if (c0 + 32 * u + lane < h16) v[u] = src[c0 + 32 * u + lane];
            for (int j = 0; j < dests; j++) {
                const int64_t row = __shfl_sync(0xFFFFFFFFu, dest, j);
                if (row < 0) continue; // the same for the whole warp
#pragma unroll
                for (int u = 0; u < SCATTER_UNROLL; u++)
                    if (c0 + 32 * u + lane < h16) a[row * h16 + c0 + 32 * u + lane] = v[u];
            }
        }
    }
    const int64_t live = *live_rows;
    for (int64_t base = warp * 32; base < live; base += warps * 32) {
        const bool pad = base + lane < live && sorted_ids[base + lane] == padding_id;
        for (unsigned m = __ballot_sync(0xFFFFFFFFu, pad); m; m &= m - 1) {
            uint4 *dst = a + (base + __ffs(m) - 1) * h16;
            for (int64_t c = lane; c < h16; c += 32) dst[c] = make_uint4(0, 0, 0, 0);
        }
    }
}

int hopper_sms = 0; // set by hopper_gemm_init

} // namespace

cudaError_t hopper_gemm_init(void) {
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&hopper_sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_UP, SHIPPED_EPI>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_DOWN, SHIPPED_EPI>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_UP, SHIPPED_EPI, 0, true>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_UP, SHIPPED_EPI, 0, true, true>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_UP, EPI_ACT_FIRST, 0, true, true>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_UP, SHIPPED_EPI, 0, false, true>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_DOWN, SHIPPED_EPI, 0, false, true>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_UP, EPI_ACT_FIRST>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_UP, EPI_ACT_FIRST, 0, false, true>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_UP, EPI_ACT_FIRST, 0, false, true, 240>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_UP, SHIPPED_EPI, 0, false, true, 240>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_DOWN, SHIPPED_EPI, 0, false, true, 240>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_DOWN, EPI_BULK, 0, false, true>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_DOWN, EPI_BULK, 0, false, true, 240>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_UP, EPI_ACT_TMA, 0, false, true>();
    if (err == cudaSuccess) err = grouped_set_smem<GEMM_UP, EPI_ACT_TMA, 0, true, true>();
    (void)tensor_map_encoder(); // resolve the driver entry point now, not under a graph capture
    return err;
}

cudaError_t hopper_permute_launch(const gemm_args *g, void *a_perm, bool zero_padding, cudaStream_t stream) {
    if (g->rows == 0) return cudaSuccess;
    if (hopper_sms <= 0) return cudaErrorInitializationError;
    const int64_t cap = (int64_t)hopper_sms * 16;
    const unsigned blocks = (unsigned)(g->rows < cap ? g->rows : cap);
    return launch_kernel(permute_rows_kernel, blocks, 128, 0, stream, (const uint4 *)g->a, g->lda / 8, (uint4 *)a_perm,
                         g->k / 8, g->sorted_ids, g->live_rows, g->tokens * g->top_k, g->top_k, zero_padding);
}

cudaError_t hopper_scatter_launch(const gemm_args *g, void *a_perm, const int32_t *row_of, const int64_t *shared_row0,
                                  cudaStream_t stream) {
    if (g->rows == 0) return cudaSuccess;
    if (hopper_sms <= 0) return cudaErrorInitializationError;
    if (!row_of || g->top_k + (shared_row0 ? 1 : 0) > 32) return cudaErrorInvalidValue;
    const int64_t per_block = SCATTER_THREADS / 32, cap = (int64_t)hopper_sms * 8;
    const int64_t want = (g->tokens + per_block - 1) / per_block;
    const unsigned blocks = (unsigned)(want < 1 ? 1 : want < cap ? want : cap);
    return launch_kernel(scatter_rows_kernel, blocks, SCATTER_THREADS, 0, stream, (const uint4 *)g->a, g->lda / 8,
                         (uint4 *)a_perm, g->k / 8, row_of, shared_row0, g->tokens, g->top_k, g->sorted_ids,
                         g->live_rows, g->tokens * g->top_k);
}

// The prefill permute pass token by token (scatter_rows_kernel) unless MOEFUSE_HOPPER_PERMUTE=rows
// asks for the plan-order kernel (permute_rows_kernel, which the swapped decode kernel keeps). Session
// 36 (bench/results/2026-12-05-session36/call4/fwd/ab.md, one H100, bench_gpu_forward, 6 rounds in
// rotated order), scatter / plan-order forward time where GEMM1 permutes: glm-4.5-air 0.977 / 0.974
// at T = 8192 / 16384, qwen3-235b-a22b 0.988 / 0.980, mixtral-8x7b (k = 2) 0.992 / 0.999,
// deepseek-v3 and gpt-oss-120b 0.978 and 0.962 at 16384 (call 3, before a fix for narrow rows: the
// same within 0.02). ncu of glm-4.5-air T = 16384: the pass 744 -> 485 us.
bool hopper_permute_scatter(void) {
    const char *env = getenv("MOEFUSE_HOPPER_PERMUTE");
    return !(env && !strcmp(env, "rows"));
}

// MOEFUSE_HOPPER_A=fill: GEMM1 reads A by TMA (never gathers) and, on tickets, its own idle producer
// warps copy x into plan order (gemm_args.x_fill) instead of a permute kernel before it. An A/B
// switch, off.
bool hopper_a_fill(bool ticket_schedule) {
    const char *env = getenv("MOEFUSE_HOPPER_A");
    return ticket_schedule && env && !strcmp(env, "fill");
}

bool hopper_a_gather(int64_t routed_rows, int64_t experts, int64_t intermediate) {
    const char *env = getenv("MOEFUSE_HOPPER_A");
    if (env && !strcmp(env, "gather")) return true;
    if (env && (!strcmp(env, "permute") || !strcmp(env, "fill"))) return false;
    return hopper_ticket_schedule(true) && moe__hopper_gather_select(routed_rows, experts, intermediate) != 0;
}

// MOEFUSE_HOPPER_SCHEDULE=static|dyn overrides the caller's default, for A/B runs (src/cuda/NOTES.md,
// session 11).
bool hopper_ticket_schedule(bool by_default) {
    const char *env = getenv("MOEFUSE_HOPPER_SCHEDULE");
    if (env && !strcmp(env, "static")) return false;
    if (env && !strcmp(env, "dyn")) return true;
    return by_default;
}

bool hopper_expert_raster(bool by_default) {
    const char *env = getenv("MOEFUSE_HOPPER_RASTER");
    if (env && !strcmp(env, "blocks")) return false;
    if (env && !strcmp(env, "expert")) return true;
    return by_default;
}

bool hopper_fp8_large_experts(int64_t hidden, int64_t intermediate) {
    return hidden * intermediate >= ((int64_t)7 << 20);
}

// MOEFUSE_HOPPER_EPI=staged: GEMM1 keeps EPI_STAGED instead of EPI_ACT_FIRST (A/B runs). The
// gathering kernel has it on the ticket schedule only (its static-stride form is the older A/B arm).
bool hopper_gemm1_act_first(int activation, int64_t intermediate, bool gather, bool ticket_schedule) {
    const char *env = getenv("MOEFUSE_HOPPER_EPI");
    return !(env && !strcmp(env, "staged")) && activation != MOE_ACT_RELU2 && intermediate % 8 == 0 &&
           (!gather || ticket_schedule);
}

// MOEFUSE_HOPPER_SKIP_UP=1: GEMM1 also skips the second warpgroup's MMAs on half-idle blocks (A/B
// runs). Off by default since session 14's lab call Q1 (3 rounds, each arm in one block, before the
// lab's interleaved timing; bench/results/2026-12-03-h200-session14/callQ1/out/lab/ab_skip.md):
// skip/base GEMM1 at T = 16384 deepseek 1.074, gpt-oss 0.929, qwen3 0.989, mixtral 0.995. To be
// re-measured interleaved (bench/results/next-session/session32_gemm1.sh).
bool hopper_gemm1_skip_idle(bool ticket_schedule) {
    const char *env = getenv("MOEFUSE_HOPPER_SKIP_UP");
    return ticket_schedule && env && !strcmp(env, "1");
}

// GEMM1's act-first epilogue stores its A2 tile by TMA (EPI_ACT_TMA) where it can (256-wide tiles on
// tickets) and K = H >= 7168. Session 32 (bench/results/2026-12-05-session32/call3/fwd/, one H100,
// bench_gpu_forward at T = 16384, 6 rounds in rotated order), default / tma time: deepseek-v3
// 1.033-1.049 in every round (its default arm spread 0.998-1.007); glm-4.5-air (H = 4096) 0.982-1.042,
// qwen3-30b-a3b (2048) 0.983-1.045, qwen3-next-80b-a3b (2048) 0.979-1.002: not clear below 7168.
// MOEFUSE_HOPPER_EPI=tma takes it wherever it can, =first never.
bool hopper_gemm1_act_tma(bool act_first, bool ticket_schedule, int tile_n, int64_t k) {
    const char *env = getenv("MOEFUSE_HOPPER_EPI");
    if (!act_first || !ticket_schedule || tile_n != GBN || (env && !strcmp(env, "first"))) return false;
    return (env && !strcmp(env, "tma")) || k >= 7168;
}

// 240-wide tiles where they divide n and 256 does not (gpt-oss: H = 2880, 2I = 5760), so no tile
// is a 64-column tail computed 256 wide: lab call Q1 (session 14), GEMM2 0.97 and GEMM1 0.96 of
// the 256-wide time at T=16384, even at 4096. The ticket schedule only (the static stride and the
// gathering producer were not measured with it, and the gathering kernel is built 256 wide only).
// MOEFUSE_HOPPER_BN=256 keeps 256 (A/B runs).
int hopper_tile_n(int64_t n, bool ticket_schedule, bool gather) {
    const char *env = getenv("MOEFUSE_HOPPER_BN");
    if (gather || (env && !strcmp(env, "256"))) return GBN;
    return ticket_schedule && n % 240 == 0 && n % GBN != 0 ? 240 : GBN;
}

// GEMM2's bulk-copy epilogue where K <= 2048, as the FP8 kernel's (gemm_hopper_fp8.cu): a short
// mainloop leaves the epilogue a large share of each tile, and the lost fourth stage a small one.
// Session 20, call U1 (bench/results/2026-12-04-h200-session20/), bf16 forward, medians of 3
// alternated rounds, staged / bulk time at T = 4096 and 16384: qwen3-30b-a3b 1.008 / 1.046,
// qwen3-next-80b-a3b 1.016 / 1.034, qwen3-235b-a22b 1.042 / 1.011, glm-4.5-air 0.997 / 1.014,
// deepseek-v3 0.998 / 1.010; past K = 2048 gpt-oss-120b 0.995 / 0.984, gpt-oss-20b 0.988 / 1.010,
// mixtral 1.003 / 1.003 (its GEMM2 alone, in the lab, 0.85 of the staged time; the forward does not
// show it). In the lab at T = 16384 the qwen3 GEMM2 took 0.751 ms against 0.793 staged.
bool hopper_gemm2_bulk(int64_t n, int64_t k, int64_t ldo, bool out_bf16, bool ticket_schedule) {
    return hopper_bulk_by_k("MOEFUSE_HOPPER_EPI2", k) && out_bf16 && n % 8 == 0 && ldo % 8 == 0 && ticket_schedule;
}

// MOEFUSE_HOPPER_EARLY_ROWS=1: the bulk GEMM2 loads its epilogue's row ids and routing weights during
// the tile's last MMAs (grouped_params.early_rows). Off until timed against the default (session 33:
// an A/B switch; session 7's earlier form, loads at the unit's start, was slower on deepseek).
bool hopper_gemm2_early_rows(void) {
    const char *env = getenv("MOEFUSE_HOPPER_EARLY_ROWS");
    return env && !strcmp(env, "1");
}

bool hopper_bulk_by_k(const char *env_var, int64_t k) {
    const char *env = getenv(env_var);
    if (env && !strcmp(env, "staged")) return false;
    return (env && !strcmp(env, "bulk")) || k <= 2048;
}

// The checks and launch shared by both entry points; gather: GEMM1 with a = x itself.
static moe_status grouped_launch(moe_context_t *ctx, const gemm_args *g, bool gather, cudaStream_t stream) {
    if (g->rows == 0) return MOE_STATUS_OK;
    if (hopper_sms <= 0)
        return moe__error(ctx, MOE_STATUS_INTERNAL, "Hopper GEMM: hopper_gemm_init (moe__cuda_init) was not called");
    if (gather && !grouped_gather_ok(g))
        return moe__error(ctx, MOE_STATUS_INTERNAL,
                          "Hopper GEMM1 (gather): needs GEMM_UP, k and lda multiples of 8 (lda >= k) and x 16-byte "
                          "aligned; got mode %d, k = %lld, lda = %lld, x %p",
                          g->mode, (long long)g->k, (long long)g->lda, g->a);
    if (g->x_fill && (gather || !grouped_fill_ok(g)))
        return moe__error(ctx, MOE_STATUS_INTERNAL,
                          "Hopper GEMM1 (rows copied in the kernel): needs GEMM_UP with A by TMA, the rows' counters, "
                          "x's row stride a multiple of 8 and >= k, x and the permuted rows 16-byte aligned; got mode "
                          "%d, gather %d, counters %p, k = %lld, ldx = %lld, x %p, rows %p",
                          g->mode, (int)gather, (void *)g->rows_ready, (long long)g->k, (long long)g->ldx_fill,
                          g->x_fill, g->a);
    if (!g->sorted_ids || !g->block_expert || !g->live_rows || g->n % 2 != 0 || g->k % 8 != 0 ||
        (!gather && g->lda != g->k))
        return moe__error(ctx, MOE_STATUS_INTERNAL,
                          "Hopper GEMM: needs a plan (sorted ids, block owners, live rows), even n and k %% 8 == 0 "
                          "with lda == k; got n = %lld, k = %lld, lda = %lld",
                          (long long)g->n, (long long)g->k, (long long)g->lda);
    if (!grouped_staged_ok(g))
        return moe__error(ctx, MOE_STATUS_INTERNAL,
                          "Hopper GEMM: the staged epilogue needs n and ldo multiples of 4 and 16-byte aligned out and "
                          "bias; got n = %lld, ldo = %lld, out %p, bias %p",
                          (long long)g->n, (long long)g->ldo, g->out, (const void *)g->bias);
    // Units from the ticket counter when the caller gave one.
    const bool dyn = g->unit_counter && hopper_ticket_schedule(true);
    const int bn = hopper_tile_n(g->n, dyn, gather);
    CUtensorMap map_a, map_b, map_b_tail;
    grouped_params p;
    unsigned ctas = 0;
    const CUresult cr = grouped_prepare(g, hopper_sms, &map_a, &map_b, &map_b_tail, &p, &ctas, gather, bn);
    if (cr != CUDA_SUCCESS)
        return moe__error(ctx, cr == CUDA_ERROR_NOT_FOUND ? MOE_STATUS_UNSUPPORTED : MOE_STATUS_DEVICE_ERROR,
                          "Hopper GEMM: cuTensorMapEncodeTiled %s (error %d) for rows %lld, n %lld, k %lld",
                          cr == CUDA_ERROR_NOT_FOUND ? "not found in the driver" : "rejected the tensor map", (int)cr,
                          (long long)g->rows, (long long)g->n, (long long)g->k);
    if (g->mode == GEMM_UP) p.skip_idle = hopper_gemm1_skip_idle(dyn);
    const bool act_first = g->mode == GEMM_UP && hopper_gemm1_act_first(g->activation, g->n / 2, gather, dyn) &&
                           grouped_act_first_ok(g);
    CUtensorMap map_out;
    const bool act_tma =
        hopper_gemm1_act_tma(act_first, dyn, bn, g->k) && grouped_act_tma_map(g, &map_out) == CUDA_SUCCESS;
    const bool bulk = g->mode == GEMM_DOWN && hopper_gemm2_bulk(g->n, g->k, g->ldo, g->out_bf16 != 0, dyn) &&
                      (uintptr_t)g->out % 16 == 0;
    p.early_rows = bulk && hopper_gemm2_early_rows();
    cudaError_t err;
    if (bulk) // bulk: dyn
        err = bn == 240 ? grouped_kernel_launch<GEMM_DOWN, EPI_BULK, 0, false, true, 240>(map_a, map_b, map_b_tail, p,
                                                                                          ctas, stream)
                        : grouped_kernel_launch<GEMM_DOWN, EPI_BULK, 0, false, true>(map_a, map_b, map_b_tail, p, ctas,
                                                                                     stream);
    else if (gather && act_tma) // act_tma: dyn
        err = grouped_kernel_launch<GEMM_UP, EPI_ACT_TMA, 0, true, true>(map_a, map_b, map_b_tail, p, ctas, stream,
                                                                         &map_out);
    else if (gather && act_first) // act_first: dyn
        err = grouped_kernel_launch<GEMM_UP, EPI_ACT_FIRST, 0, true, true>(map_a, map_b, map_b_tail, p, ctas, stream);
    else if (gather && dyn)
        err = grouped_kernel_launch<GEMM_UP, SHIPPED_EPI, 0, true, true>(map_a, map_b, map_b_tail, p, ctas, stream);
    else if (gather)
        err = grouped_kernel_launch<GEMM_UP, SHIPPED_EPI, 0, true>(map_a, map_b, map_b_tail, p, ctas, stream);
    else if (bn == 240 && act_first) // bn 240: dyn
        err = grouped_kernel_launch<GEMM_UP, EPI_ACT_FIRST, 0, false, true, 240>(map_a, map_b, map_b_tail, p, ctas, stream);
    else if (bn == 240 && g->mode == GEMM_UP)
        err = grouped_kernel_launch<GEMM_UP, SHIPPED_EPI, 0, false, true, 240>(map_a, map_b, map_b_tail, p, ctas, stream);
    else if (bn == 240)
        err = grouped_kernel_launch<GEMM_DOWN, SHIPPED_EPI, 0, false, true, 240>(map_a, map_b, map_b_tail, p, ctas, stream);
    else if (act_tma)
        err = grouped_kernel_launch<GEMM_UP, EPI_ACT_TMA, 0, false, true>(map_a, map_b, map_b_tail, p, ctas, stream,
                                                                          &map_out);
    else if (act_first)
        err = dyn ? grouped_kernel_launch<GEMM_UP, EPI_ACT_FIRST, 0, false, true>(map_a, map_b, map_b_tail, p, ctas, stream)
                  : grouped_kernel_launch<GEMM_UP, EPI_ACT_FIRST>(map_a, map_b, map_b_tail, p, ctas, stream);
    else if (g->mode == GEMM_UP)
        err = dyn ? grouped_kernel_launch<GEMM_UP, SHIPPED_EPI, 0, false, true>(map_a, map_b, map_b_tail, p, ctas, stream)
                  : grouped_kernel_launch<GEMM_UP, SHIPPED_EPI>(map_a, map_b, map_b_tail, p, ctas, stream);
    else
        err = dyn ? grouped_kernel_launch<GEMM_DOWN, SHIPPED_EPI, 0, false, true>(map_a, map_b, map_b_tail, p, ctas, stream)
                  : grouped_kernel_launch<GEMM_DOWN, SHIPPED_EPI>(map_a, map_b, map_b_tail, p, ctas, stream);
    return cuda_status(ctx, err,
                       gather ? "Hopper GEMM1 (gather) launch"
                              : g->mode == GEMM_UP ? "Hopper GEMM1 launch" : "Hopper GEMM2 launch");
}

moe_status hopper_gemm_launch(moe_context_t *ctx, const gemm_args *g, cudaStream_t stream) {
    return grouped_launch(ctx, g, false, stream);
}

moe_status hopper_gemm1_gather_launch(moe_context_t *ctx, const gemm_args *g, cudaStream_t stream) {
    return grouped_launch(ctx, g, true, stream);
}

bool hopper_bf16_swap_decode(int64_t tokens, int64_t top_k, int64_t experts) {
    const char *env = getenv("MOEFUSE_BF16_DECODE");
    if (env && !strcmp(env, "off")) return false;
    if (env && !strcmp(env, "swap")) return moe__fp8_swap_select(tokens * top_k, experts) != 0;
    return moe__bf16_swap_select(tokens * top_k, experts) != 0;
}

moe_status hopper_swap_decode_launch(moe_context_t *ctx, const gemm_args *g, cudaStream_t stream) {
    if (g->rows == 0) return MOE_STATUS_OK;
    if (hopper_sms <= 0)
        return moe__error(ctx, MOE_STATUS_INTERNAL, "Hopper decode GEMM: hopper_gemm_init (moe__cuda_init) was not called");
    if (!g->sorted_ids || !g->block_expert || !g->live_rows || g->k < 8 || g->k % 8 != 0 || g->lda != g->k ||
        g->x_fill)
        return moe__error(ctx, MOE_STATUS_INTERNAL,
                          "Hopper decode GEMM: needs a plan (sorted ids, block owners, live rows), k >= 8, k %% 8 == 0 "
                          "with lda == k, and rows already in plan order (no x_fill); got k = %lld, lda = %lld, x_fill "
                          "%p", (long long)g->k, (long long)g->lda, g->x_fill);
    // The rows' map: a plan block's SWAP_NT rows (the kernel's B); the weights': 128 rows (its A).
    CUtensorMap map_x, map_w;
    CUresult cr = make_tensor_map(&map_x, g->a, g->rows, g->k, g->lda, SWAP_NT);
    if (cr == CUDA_SUCCESS) cr = make_tensor_map(&map_w, g->b, g->experts * g->n, g->k, g->k, SWAP_W_ROWS);
    if (cr != CUDA_SUCCESS)
        return moe__error(ctx, cr == CUDA_ERROR_NOT_FOUND ? MOE_STATUS_UNSUPPORTED : MOE_STATUS_DEVICE_ERROR,
                          "Hopper decode GEMM: cuTensorMapEncodeTiled %s (error %d) for rows %lld, n %lld, k %lld",
                          cr == CUDA_ERROR_NOT_FOUND ? "not found in the driver" : "rejected the tensor map", (int)cr,
                          (long long)g->rows, (long long)g->n, (long long)g->k);
    grouped_fp8_params p = {}; // the FP8 scale fields stay zero: the bf16 kernel reads none
    grouped_plan_params(g, hopper_sms, SWAP_W_ROWS, &p.g);
    p.g.out_bf16 = g->mode == GEMM_DOWN && g->out_bf16;
    return cuda_status(ctx, swap_decode_launch<true>(g->mode, map_w, map_x, p, g->rows, hopper_sms, stream),
                       g->mode == GEMM_UP ? "Hopper decode GEMM1 launch" : "Hopper decode GEMM2 launch");
}
