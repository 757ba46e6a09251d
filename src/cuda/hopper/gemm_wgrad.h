/* The Hopper engine's K-grouped GEMM, C interface (internal to the CUDA backend, not installed):
 * the expert MLP's weight gradients for training (docs/hopper_gemm.md, "The K-grouped launch").
 *
 *   dW[e][n][c] = beta * dW[e][n][c] + sum over r in [offsets[e], offsets[e] + counts[e]) of
 *                 G[r][n] * A[r][c]                       for every expert e, n < N, c < K
 *
 *   G [rows, ldg], A [rows, lda]: bf16, row-major, rows in the forward plan's order (dW2: G = dY,
 *   A = A2; dW13: G = dA1 in W13's interleaved order, A = x); rows past an expert's count (the
 *   plan's padding) are never read into a sum, whatever they hold. fp32 accumulation.
 *   dW [experts, N, lddw] fp32 or bf16; expert e's matrix starts at e * N * lddw.
 *   offsets, counts: the plan's expert_offsets [experts + 1] and expert_counts [experts], on the
 *   device (read there: no host sync); an expert with no rows gets beta * dW (0 when beta = 0).
 *
 * Requirements (checked): a sm_90 device; N, K, rows in [1, 2^31); experts in [1, 2^20];
 * ldg >= N and lda >= K, multiples of 8 (16-byte rows for TMA); G, A 16-byte aligned;
 * lddw >= K; beta finite; store one of the MOE__WGRAD_STORE_* below. Runs on `stream` asynchronously; no allocation, no sync,
 * graph-capturable. Deterministic: each dW element is written by one thread, its sum in a fixed
 * order. Not yet called by the library's forward or any backward (the backward is its own issue). */
#ifndef MOEFUSE_CUDA_HOPPER_GEMM_WGRAD_H
#define MOEFUSE_CUDA_HOPPER_GEMM_WGRAD_H

#include <stddef.h>
#include <stdint.h>

#include "moefuse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How interior tiles' dW leave the registers (edge tiles always take checked stores):
 *   PAIRS (the default, 0): two adjacent elements a store where lddw and dw allow it;
 *   BULK: through 4 KB of shared staging a consumer warp and bulk copies, where dW is fp32,
 *         beta is 0, lddw a multiple of 4 and dw 16-byte aligned (else PAIRS), so that a warp
 *         starts its next unit while the copies drain.
 * Session 22's call W5 (three processes, one draw): PAIRS 1-6% faster than BULK on all four
 * PERF.md-shaped gradients (bench/results/2026-12-04-h200-session22/callW5/out/wgrad_*_perf.log).
 * Until session 31 BULK was the default: that call's summary had read the two arms swapped. */
enum { MOE__WGRAD_STORE_PAIRS = 0, MOE__WGRAD_STORE_BULK = 1 };

typedef struct moe__hopper_wgrad_args {
    const void *g;   /* [rows, ldg] bf16 */
    int64_t ldg;
    const void *a;   /* [rows, lda] bf16 */
    int64_t lda;
    int64_t rows;    /* rows of G and A (the plan's total, padding included) */
    const int64_t *offsets; /* device [experts + 1] */
    const int64_t *counts;  /* device [experts] */
    int64_t experts, n, k;
    void *dw;        /* [experts, n, lddw] of dw_dtype */
    int64_t lddw;
    moe_dtype dw_dtype; /* MOE_DTYPE_F32 or MOE_DTYPE_BF16 */
    float beta;
    int store;       /* MOE__WGRAD_STORE_PAIRS (0) or MOE__WGRAD_STORE_BULK */
} moe__hopper_wgrad_args;

moe_status moe__hopper_wgrad(const moe__hopper_wgrad_args *args, void *stream, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
