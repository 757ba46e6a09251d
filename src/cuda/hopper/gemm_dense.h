/* The Hopper engine's dense GEMM, C interface (internal to the CUDA backend, not installed).
 *
 *   C[M, N] = A[M, K] . B[N, K]^T    A, B bf16, both K-major (row-major with K contiguous);
 *                                    fp32 accumulation; C bf16 or fp32, row-major.
 *
 * Requirements (checked): a sm_90 device; M, N, K in [1, 2^31); lda, ldb multiples of 8
 * elements (TMA needs 16-byte row strides) and >= K; A and B 16-byte aligned; ldc >= N.
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

#ifdef __cplusplus
}
#endif
#endif
