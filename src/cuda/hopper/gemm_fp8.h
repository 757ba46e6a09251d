/* The Hopper engine's dense FP8 GEMM, C interface (internal to the CUDA backend). Block-scaled:
 *
 *   C[M, N] = sum_kb sa[m][kb] * sb[n/128][kb] * (A[m, kb-block] . B[n, kb-block])
 *
 * A [M, K] e4m3 codes with FP8_ROW128 scales sa [M, ceil(K/128)] (row stride lds_a floats);
 * B [N, K] e4m3 codes with FP8_BLOCK128 scales sb [ceil(N/128), ceil(K/128)] (row stride lds_b);
 * both K-major; x = code * scale (moe_quantize's layouts). C bf16, row-major. The wgmma partial
 * sums are promoted into fp32 (and scaled there) every 128 of K.
 * Per tensor (tensor_scales = 1): C = sa[0] * sb[0] * (A . B), one FP8_TENSOR scale per operand
 * (device pointers, read by the kernel: graph replays may change them); lds_a, lds_b unused. The
 * same promotion every 128 of K.
 *
 * Requirements (checked): a sm_90 device; M, N, K in [1, 2^31); lda, ldb multiples of 16 bytes
 * (TMA row strides) and >= K; A and B 16-byte aligned; lds_a, lds_b >= ceil(K/128); sa and sb
 * 4-byte aligned; ldc >= N; block_n 0, 128 or 192; cluster_m 0, 1 or 2 (2: the scales by TMA or per
 * tensor); tensor_scales 0 or 1 (lds_a, lds_b then unchecked).
 * Asynchronous on `stream`; no allocation, no sync, graph-capturable. Faster where lds_a and lds_b
 * are multiples of 4 and sa, sb 16-byte aligned: the tiles then take their scales by TMA, and large
 * outputs run in clusters of 2 (gemm_fp8.cu). */
#ifndef MOEFUSE_CUDA_HOPPER_GEMM_FP8_H
#define MOEFUSE_CUDA_HOPPER_GEMM_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "gemm_dense.h" /* moe__hopper_cluster_pairs, the cluster rule both engines share */
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
    int cluster_m;        /* 0: the rule below; 1 or 2 to force the CTAs a cluster (2: scales by TMA or per tensor) */
    int tensor_scales;    /* 0: the block scales above; 1: one scale per operand (a_scales[0], b_scales[0]) */
} moe__hopper_gemm_fp8_args;

/* The tile width the engine picks (block_n 0) for an M x N output on `sms` multiprocessors. The
 * persistent grid runs ceil(tiles / sms) waves of equal tiles; a 128 x 192 tile does 1.5x a 128 x
 * 128 tile's work at 1.10x its rate (MOE__HOPPER_FP8_WIDE_GAIN_X100; 8192^3, 21 against 32 waves:
 * 1.10-1.12 in session 25's lab calls Z1 and Z2), so 192 where its waves cost less:
 * waves_192 * 192 < waves_128 * 128 * 1.10. Lab checks of the rule (Y4, Z1, Z2; 7 rounds):
 * 4096^3 (6 against 8 waves) 128 is 4-10% faster; deepseek-v3's x16-expert GEMMs (11 / 16, 19 / 28
 * waves) 192 is 3-7% faster; one-wave shapes 128 is 18-26% faster; q_a_proj (4096 x 1536 x 7168,
 * 2 / 3 waves) 192 is 6% faster. Wrong at 4224 x 4096 x 1024 (6 / 8 waves, K = 1024): 192 is 3%
 * faster, the rule takes 128. (Until session 25 the rule was
 * "192 from 4 waves of 192-wide tiles", which picked 192 at 4096^3.) Inline plain C, so that the
 * analysis (src/analysis/roofline.c) models the tile the engine runs. */
#define MOE__HOPPER_FP8_BM 128
#define MOE__HOPPER_FP8_WIDE_GAIN_X100 110
static inline int moe__hopper_gemm_fp8_block_n(int64_t m, int64_t n, int64_t sms) {
    const int64_t rows = (m + MOE__HOPPER_FP8_BM - 1) / MOE__HOPPER_FP8_BM;
    const int64_t waves_192 = (rows * ((n + 191) / 192) + sms - 1) / sms;
    const int64_t waves_128 = (rows * ((n + 127) / 128) + sms - 1) / sms;
    return waves_192 * 192 * 100 < waves_128 * 128 * MOE__HOPPER_FP8_WIDE_GAIN_X100 ? 192 : 128;
}

/* The CTAs a cluster the engine runs (cluster_m 0) for tiles of block_n columns: 2 (adjacent row
 * blocks share each B tile by TMA multicast, halving B's L2 reads) from MOE__HOPPER_FP8_CLUSTER_MIN_WAVES
 * waves of tiles, else 1. Session 25's lab calls Z1 and Z2 (2 and 3 rounds): clusters 2-6% faster
 * at 8192^3 and deepseek-v3's x16-expert shapes at both widths (ncu at 8192^3: tensor pipe 71 ->
 * 76% at 192 wide, 61 -> 67% at 128), level at 4096^3 (8 waves of 128-wide tiles), 1-3% slower on
 * the one-wave single-expert shapes. An odd row-block count leaves one CTA of each column's last
 * cluster idle, 1 / (rows + 1) of the work: 4.5% slower at 33 x 32 tiles of 128 (4224 x 4096 x
 * 1024, Z2), so odd counts cluster only where that share is under the least gain measured
 * (MOE__HOPPER_FP8_CLUSTER_IDLE_PCT). */
#define MOE__HOPPER_FP8_CLUSTER_MIN_WAVES 4
#define MOE__HOPPER_FP8_CLUSTER_IDLE_PCT 2
static inline int moe__hopper_gemm_fp8_cluster_m(int64_t m, int64_t n, int block_n, int64_t sms) {
    const int64_t rows = (m + MOE__HOPPER_FP8_BM - 1) / MOE__HOPPER_FP8_BM;
    return moe__hopper_cluster_pairs(rows, rows * ((n + block_n - 1) / block_n), sms,
                                     MOE__HOPPER_FP8_CLUSTER_MIN_WAVES, MOE__HOPPER_FP8_CLUSTER_IDLE_PCT);
}

/* Callable from CUDA device code too (the grouped kernel's use below) and from the C tests. */
#if defined(__CUDACC__)
#define MOE__HOST_DEVICE __host__ __device__
#else
#define MOE__HOST_DEVICE
#endif

/* How an expert's FP8 weight scales are laid out (the grouped kernel's sw_kind): one per tensor;
 * 128x128 blocks, row r of the scale matrix for weight rows 128r ..; or paired W13 (gate and up
 * rows interleaved, each half on its own 128-row grid): scale row 2g for the gate rows of block g,
 * 2g + 1 for its up rows. */
enum { MOE__FP8_WSCALE_TENSOR = 0, MOE__FP8_WSCALE_BLOCK = 1, MOE__FP8_WSCALE_PAIRED = 2 };

/* The grouped FP8 kernel's 128 x 192 tiles (grouped_fp8_kernel.cuh, the prefill default): the
 * scale rows that the tile at weight row (output column) n0 of one expert reads, relative to the
 * expert's first scale row (rows_per_expert of them), and where it switches between them. A tile
 * spans two 128-row scale blocks: rows[0], rows[1] are the first's for the fragment's even and odd
 * columns (the same but for paired W13), rows[2], rows[3] the second's (the first's again where the
 * expert has no second: those columns are past N); *split: the fragment's column blocks of 8 that
 * take the first (8, 16, or 24 = all). Plain C: tests/test_shapes.c checks it column by column. */
static inline MOE__HOST_DEVICE void moe__fp8_wide_b_scale_rows(int kind, int64_t n0, int64_t rows_per_expert,
                                                               int64_t rows[4], int *split) {
    int64_t first = 0, second = 0; /* of the even columns; the odd ones' are +1 when paired */
    int s = 24;
    if (kind == MOE__FP8_WSCALE_BLOCK) {
        first = n0 / 128;
        second = first + 1;
        s = (int)((128 - n0 % 128) / 8);
    } else if (kind == MOE__FP8_WSCALE_PAIRED) {
        first = 2 * (n0 / 256); /* the gate block of pair n0 / 2 */
        second = first + 2;
        s = (int)((128 - (n0 / 2) % 128) / 4);
    }
    const int64_t odd = kind == MOE__FP8_WSCALE_PAIRED ? 1 : 0;
    if (second + odd >= rows_per_expert) second = first;
    rows[0] = first;
    rows[1] = first + odd;
    rows[2] = second;
    rows[3] = second + odd;
    *split = s < 24 ? s : 24;
}

/* Launches the GEMM; on failure returns the status and writes why (argument, value, what was
 * expected) into why[why_len] when why is not NULL. */
moe_status moe__hopper_gemm_fp8(const moe__hopper_gemm_fp8_args *args, void *stream, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
