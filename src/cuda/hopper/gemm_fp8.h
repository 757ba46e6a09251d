/* The Hopper engine's dense FP8 block-scaled GEMM, C interface (internal to the CUDA backend).
 *
 *   C[M, N] = sum_kb sa[m][kb] * sb[n/128][kb] * (A[m, kb-block] . B[n, kb-block])
 *
 * A [M, K] e4m3 codes with FP8_ROW128 scales sa [M, ceil(K/128)] (row stride lds_a floats);
 * B [N, K] e4m3 codes with FP8_BLOCK128 scales sb [ceil(N/128), ceil(K/128)] (row stride lds_b);
 * both K-major; x = code * scale (moe_quantize's layouts). C bf16, row-major. The wgmma partial
 * sums are promoted into fp32 (and scaled there) every 128 of K.
 *
 * Requirements (checked): a sm_90 device; M, N, K in [1, 2^31); lda, ldb multiples of 16 bytes
 * (TMA row strides) and >= K; A and B 16-byte aligned; lds_a, lds_b >= ceil(K/128); sa and sb
 * 4-byte aligned; ldc >= N. Asynchronous on `stream`; no allocation, no sync, graph-capturable. */
#ifndef MOEFUSE_CUDA_HOPPER_GEMM_FP8_H
#define MOEFUSE_CUDA_HOPPER_GEMM_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "moefuse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct moe__hopper_gemm_fp8_args {
    const void *a;        /* [M, lda] e4m3 */
    int64_t lda;          /* bytes = elements */
    const float *a_scales; /* [M, lds_a] */
    int64_t lds_a;
    const void *b;        /* [N, ldb] e4m3 */
    int64_t ldb;
    const float *b_scales; /* [ceil(N/128), lds_b] */
    int64_t lds_b;
    void *c;              /* [M, ldc] bf16 */
    int64_t ldc;
    int64_t m, n, k;
} moe__hopper_gemm_fp8_args;

/* Launches the GEMM; on failure returns the status and writes why (argument, value, what was
 * expected) into why[why_len] when why is not NULL. */
moe_status moe__hopper_gemm_fp8(const moe__hopper_gemm_fp8_args *args, void *stream, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
