/* The Hopper engine's dense GEMM, C interface (internal to the CUDA backend, not installed).
 *
 *   C[M, N] = A[M, K] . B[N, K]^T    A, B bf16, both K-major (row-major with K contiguous);
 *                                    fp32 accumulation; C bf16 or fp32, row-major.
 *
 * Requirements (checked): a sm_90 device; M, N, K in [1, 2^31); lda, ldb multiples of 8
 * elements (TMA needs 16-byte row strides) and >= K; A and B 16-byte aligned; ldc >= N;
 * block_n 0, 128 or 256; cluster_m 0, 1 or 2 (2 with 256-wide tiles).
 * Runs on `stream` (a cudaStream_t), asynchronously; no allocation, no sync, graph-capturable. */
#ifndef MOEFUSE_CUDA_HOPPER_GEMM_DENSE_H
#define MOEFUSE_CUDA_HOPPER_GEMM_DENSE_H

#include <stddef.h>
#include <stdint.h>

#include "moefuse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct moe__hopper_gemm_args {
    const void *a; /* [M, lda] bf16 */
    int64_t lda;
    const void *b; /* [N, ldb] bf16 */
    int64_t ldb;
    void *c;       /* [M, ldc] of c_dtype */
    int64_t ldc;
    moe_dtype c_dtype; /* MOE_DTYPE_BF16 or MOE_DTYPE_F32 */
    int64_t m, n, k;
    int block_n;   /* 0: the heuristic's choice; 128 or 256 to force a tile width */
    int cluster_m; /* 0: the rule below; 1 or 2 to force the CTAs a cluster (2: 256-wide tiles, also with block_n 0) */
} moe__hopper_gemm_args;

/* Launches the GEMM. On failure returns the status and writes why (argument, value, what was
 * expected) into why[why_len] when why is not NULL; the backend turns it into moe__error. */
moe_status moe__hopper_gemm_dense(const moe__hopper_gemm_args *args, void *stream, char *why, size_t why_len);

/* The tile width the heuristic picks (block_n 0) for an M x N output on `sms` multiprocessors:
 * 256 unless the MOE__HOPPER_DENSE_BM x 256 tiles leave SMs idle in the only wave, then 128.
 * Inline plain C, so that the analysis (src/analysis/roofline.c, moe_dense_launch_time) models
 * the tile the engine runs with this very rule. */
#define MOE__HOPPER_DENSE_BM 128 /* tile rows: moe_hopper::BM (gemm_kernel.cuh) */
static inline int moe__hopper_gemm_dense_block_n(int64_t m, int64_t n, int64_t sms) {
    const int64_t tiles_256 = (m + MOE__HOPPER_DENSE_BM - 1) / MOE__HOPPER_DENSE_BM * ((n + 255) / 256);
    return tiles_256 < sms ? 128 : 256;
}

/* The CTAs a cluster the engine runs (cluster_m 0) for tiles of block_n columns: 2 (adjacent
 * 128-row blocks share each B tile by TMA multicast, the lab's v2) on 256-wide tiles from
 * MOE__HOPPER_DENSE_CLUSTER_MIN_WAVES waves, with an even count of row blocks or one whose idle
 * last cluster is under 2% of them; else 1. Lab v2 / v1 time, one process each (lab/results/
 * 2026-12-02-h200, bench/results/2026-12-03-h200-session15/callR2, 2026-12-04-h200-session22/callW4):
 * on the many-wave shapes 0.97-0.99 in all three runs (8192^3 0.991 / 0.993 / 0.974, 15.5 waves;
 * qwen3's K = 2048 dense-equivalent 0.968 / 0.987 / 0.967, 46 waves; mixtral's expert 0.994 / 0.970 /
 * 0.976, 27 waves); at 4096^3 (3.9 waves) 1.122 / 0.995 / 0.962, so below 4 waves: not shown. The
 * same threshold as the FP8 engine's (gemm_fp8.h). Taken into the engine in session 31, without
 * a GPU: the engine's own figure with it is not yet measured. */
#define MOE__HOPPER_DENSE_CLUSTER_MIN_WAVES 4
#define MOE__HOPPER_DENSE_CLUSTER_IDLE_PCT 2

/* The rule both dense engines' cluster choices share (this one and gemm_fp8.h's): 2 CTAs a cluster
 * (adjacent 128-row blocks) for `tiles` tiles over `rows` row blocks from min_waves waves on `sms`
 * multiprocessors, never on one row block, and on an odd count only where the last cluster's idle
 * CTA is under idle_pct percent of the row blocks; else 1. */
static inline int moe__hopper_cluster_pairs(int64_t rows, int64_t tiles, int64_t sms, int64_t min_waves,
                                            int64_t idle_pct) {
    const int idle_ok = rows % 2 == 0 || 100 < idle_pct * (rows + 1);
    return rows >= 2 && idle_ok && tiles >= min_waves * sms ? 2 : 1;
}

static inline int moe__hopper_gemm_dense_cluster_m(int64_t m, int64_t n, int block_n, int64_t sms) {
    const int64_t rows = (m + MOE__HOPPER_DENSE_BM - 1) / MOE__HOPPER_DENSE_BM;
    if (block_n != 256) return 1;
    return moe__hopper_cluster_pairs(rows, rows * ((n + 255) / 256), sms, MOE__HOPPER_DENSE_CLUSTER_MIN_WAVES,
                                     MOE__HOPPER_DENSE_CLUSTER_IDLE_PCT);
}

#ifdef __cplusplus
}
#endif
#endif
