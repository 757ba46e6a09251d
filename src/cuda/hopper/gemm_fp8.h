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
 * 4-byte aligned; ldc >= N; block_n 0, 128 or 192. Asynchronous on `stream`; no allocation, no sync,
 * graph-capturable. Faster where lds_a and lds_b are multiples of 4 and sa, sb 16-byte aligned: the
 * tiles then take their scales by TMA (gemm_fp8.cu). */
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
    int block_n;          /* 0: the rule below; 128 or 192 to force a tile width */
} moe__hopper_gemm_fp8_args;

/* The tile width the engine picks (block_n 0) for an M x N output on `sms` multiprocessors: 192
 * where the 128 x 192 tiles make at least MOE__HOPPER_FP8_WIDE_MIN_WAVES waves, else 128. Lab call
 * S1 of session 16: 192 is faster by 3-15% from 704 tiles (4096^3) up, slower by 16-23% at 48-152
 * tiles (one-wave shapes, where the wider tile leaves SMs idle or adds a partial wave). Inline plain
 * C, so that the analysis (src/analysis/roofline.c) models the tile the engine runs. */
#define MOE__HOPPER_FP8_BM 128
#define MOE__HOPPER_FP8_WIDE_MIN_WAVES 4
static inline int moe__hopper_gemm_fp8_block_n(int64_t m, int64_t n, int64_t sms) {
    const int64_t tiles_192 = (m + MOE__HOPPER_FP8_BM - 1) / MOE__HOPPER_FP8_BM * ((n + 191) / 192);
    return tiles_192 >= MOE__HOPPER_FP8_WIDE_MIN_WAVES * sms ? 192 : 128;
}

/* Launches the GEMM; on failure returns the status and writes why (argument, value, what was
 * expected) into why[why_len] when why is not NULL. */
moe_status moe__hopper_gemm_fp8(const moe__hopper_gemm_fp8_args *args, void *stream, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
