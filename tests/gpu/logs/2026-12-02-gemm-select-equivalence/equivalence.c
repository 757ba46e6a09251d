/* One-off check (not a ctest) that moving the grouped-GEMM path rule into the core library
 * (src/core/gemm_select.c, moe__gemm_select) changed no choice of the CUDA forward.
 *
 * old_cuda_gemm_select below is moe__cuda_gemm_select as it was in src/cuda/forward.cu at
 * a881025 (verbatim but for its name and `extern "C"`; HOPPER_BLOCK_M was 128 in gemm.cuh), and
 * old_block its plan block (forward.cu: HOPPER_BLOCK_M or MOE__CUDA_BLOCK_M = 64). They are set
 * against the library's moe__cuda_gemm_select (now moe__gemm_select with MOEFUSE_GEMM parsed by
 * moe__gemm_force_parse) and moe__gemm_block_rows on a grid of (T, k, E, H, I, dtype) under each
 * MOEFUSE_GEMM setting. It also counts where the analysis's choice changed: the old analysis
 * copy (src/analysis/roofline.c at a881025, rows per expert as a double, without the E*H / E*I
 * >= 256 and 2^31 conditions) against moe_grouped_kernel_select (now the core rule).
 *
 *   cc -std=c11 -O2 -Iinclude -Isrc/core -Isrc/cuda equivalence.c -o eq -LBUILD -lmoefuse && ./eq
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "moefuse_analysis.h"

#define HOPPER_BLOCK_M 128

static int old_cuda_gemm_select(int64_t routed_rows, int64_t E, int64_t H, int64_t I, moe_dtype dtype) {
    // +1: a fused shared expert is one more matrix of the stacks; 2I: W13's rows when gated.
    // E4M3 (FP8 weights, gemm_hopper_fp8.cu): K tails and N tails are handled there (TMA zero
    // fill, dropped columns), so H and I need only be multiples of 16 (16-byte rows; the upload
    // guarantees it) and >= 128 (one whole k-block box).
    const int64_t lim = (int64_t)1 << 31;
    const bool fp8 = dtype == MOE_DTYPE_E4M3;
    const int64_t mult = fp8 ? 16 : 64, least = fp8 ? 128 : 64;
    const bool can = (dtype == MOE_DTYPE_BF16 || fp8) && E >= 1 && H >= least && I >= least && H % mult == 0 &&
                     I % mult == 0 && E * H >= 256 && E * I >= 256 && H < lim / (E + 1) && 2 * I < lim / (E + 1);
    if (!can) return MOE__CUDA_GEMM_V1;
    const char *env = getenv("MOEFUSE_GEMM");
    if (env && !strcmp(env, "v1")) return MOE__CUDA_GEMM_V1;
    if (env && !strcmp(env, "hopper")) return MOE__CUDA_GEMM_HOPPER;
    // FP8: the wgmma path at every T. At decode v1 runs its K-split decode kernel
    // (gemm_fp8_v1.cu), but e4m3 mma.sync has no native instruction on sm_90 (ptxas unpacks
    // it to f16 conversions + HMMA) and on the H200 that kernel was slower than the wgmma path
    // at T = 8 and 64 on qwen3-30b-a3b (0.148 vs 0.136 ms, 0.327 vs 0.288) and gpt-oss-120b
    // T = 8 (0.284 vs 0.268), equal at qwen3 T = 1, faster only at gpt-oss T = 1 (0.072 vs
    // 0.074): bench/results/2026-12-02-h200-session3/fp8*/ (callC2 vs callB).
    if (fp8) return MOE__CUDA_GEMM_HOPPER;
    return routed_rows >= (int64_t)HOPPER_BLOCK_M * E ? MOE__CUDA_GEMM_HOPPER : MOE__CUDA_GEMM_V1;
}

static int64_t old_block(int path) { return path == MOE__CUDA_GEMM_HOPPER ? HOPPER_BLOCK_M : MOE__CUDA_BLOCK_M; }

/* src/analysis/roofline.c's moe_grouped_kernel_select at a881025, verbatim but for its name */
static moe_kernel_family old_analysis_select(moe_dtype dtype, double rows_per_expert, int64_t hidden,
                                             int64_t intermediate) {
    const int fp8 = dtype == MOE_DTYPE_E4M3;
    if (!fp8 && dtype != MOE_DTYPE_BF16) return MOE_KERNEL_LIBRARY;
    const int64_t mult = fp8 ? 16 : 64, least = fp8 ? 128 : 64;
    const int wgmma = hidden >= least && intermediate >= least && hidden % mult == 0 && intermediate % mult == 0;
    if (!wgmma) return MOE_KERNEL_V1;
    if (fp8) return MOE_KERNEL_HOPPER_FP8;
    return rows_per_expert >= 128 ? MOE_KERNEL_HOPPER_BF16 : MOE_KERNEL_V1;
}

int main(void) {
    static const int64_t T[] = {1, 2, 7, 8, 15, 16, 31, 32, 63, 64, 100, 127, 128, 129, 255, 256, 257, 511, 512, 513,
                                1000, 1023, 1024, 1025, 2048, 4095, 4096, 4097, 8192, 16384, 32768, 65536, 1 << 20,
                                (int64_t)1 << 30, INT32_MAX};
    static const int64_t K[] = {1, 2, 3, 4, 6, 8, 10, 16};
    static const int64_t E[] = {1, 2, 3, 4, 5, 8, 16, 32, 60, 64, 100, 128, 160, 256, 257, 384, 512, 1024, 4096,
                                1 << 16, 1 << 20, 1 << 21, 1 << 24};
    static const int64_t D[] = {0, 1, 8, 16, 32, 48, 63, 64, 65, 96, 112, 120, 127, 128, 129, 144, 192, 208, 256, 320,
                                512, 576, 704, 768, 1000, 1024, 1408, 1536, 2048, 2560, 2880, 4096, 5120, 7168, 8192,
                                14336, 16384, 1 << 20, (int64_t)1 << 30, INT32_MAX};
    static const char *const env[] = {NULL, "v1", "hopper", "", "auto", "V1", "Hopper", "hopper ", "v1x"};
    const int nT = sizeof T / sizeof T[0], nK = sizeof K / sizeof K[0], nE = sizeof E / sizeof E[0];
    const int nD = sizeof D / sizeof D[0], nenv = sizeof env / sizeof env[0];
    long long cases = 0, differ = 0, block_differ = 0, hopper = 0, analysis_cases = 0, analysis_differ = 0;
    long long why_small = 0, why_2g = 0, why_other = 0; /* analysis changes: small stack, 2^31, anything else */
    long long by_dtype[MOE_DTYPE_COUNT_] = {0};
    for (int v = 0; v < nenv; v++) {
        if (env[v]) setenv("MOEFUSE_GEMM", env[v], 1);
        else unsetenv("MOEFUSE_GEMM");
        for (int dt = 0; dt < MOE_DTYPE_COUNT_; dt++)
            for (int e = 0; e < nE; e++)
                for (int h = 0; h < nD; h++)
                    for (int i = 0; i < nD; i++)
                        for (int t = -1; t < nT; t++)
                            for (int k = 0; k < (t < 0 ? 1 : nK); k++) {
                                /* t = -1: routed rows INT64_MAX (how moe__cuda_forward_describe asks) */
                                const int64_t rows = t < 0 ? INT64_MAX : T[t] * K[k];
                                const int a = old_cuda_gemm_select(rows, E[e], D[h], D[i], (moe_dtype)dt);
                                const int b = moe__cuda_gemm_select(rows, E[e], D[h], D[i], (moe_dtype)dt);
                                cases++;
                                by_dtype[dt]++;
                                hopper += b == MOE__CUDA_GEMM_HOPPER;
                                if (a != b) {
                                    if (differ < 10)
                                        printf("DIFFER: env %s rows %lld E %lld H %lld I %lld dtype %d: old %d new %d\n",
                                               env[v] ? env[v] : "(unset)", (long long)rows, (long long)E[e],
                                               (long long)D[h], (long long)D[i], dt, a, b);
                                    differ++;
                                }
                                block_differ += old_block(a) != moe__gemm_block_rows(b);
                                if (v == 0 && t >= 0 && (D[h] > 0 && D[i] > 0)) {
                                    const moe_kernel_family x = old_analysis_select(
                                        (moe_dtype)dt, (double)T[t] * ((double)K[k] / (double)E[e]), D[h], D[i]);
                                    const moe_kernel_family y =
                                        moe_grouped_kernel_select((moe_dtype)dt, rows, E[e], D[h], D[i]);
                                    analysis_cases++;
                                    if (x != y) {
                                        const int64_t lim = (int64_t)1 << 31;
                                        analysis_differ++;
                                        if (E[e] * D[h] < 256 || E[e] * D[i] < 256) why_small++;
                                        else if (D[h] >= lim / (E[e] + 1) || 2 * D[i] >= lim / (E[e] + 1)) why_2g++;
                                        else why_other++;
                                    }
                                }
                            }
    }
    printf("CUDA forward's choice: %lld cases (%d MOEFUSE_GEMM settings x %d dtypes x %d E x %d H x %d I x (%d T x %d "
           "k + rows INT64_MAX)), %lld on hopper; old != new: %lld; plan block old != new: %lld\n",
           cases, nenv, (int)MOE_DTYPE_COUNT_, nE, nD, nD, nT, nK, hopper, differ, block_differ);
    for (int dt = 0; dt < MOE_DTYPE_COUNT_; dt++) printf("  dtype %s: %lld cases\n", moe_dtype_name((moe_dtype)dt), by_dtype[dt]);
    printf("analysis's choice (MOEFUSE_GEMM unset, H and I >= 1, rows T*k): %lld cases, old copy != core rule: %lld "
           "(E*H or E*I < 256: %lld; (E+1)*H or (E+1)*2I past 2^31: %lld; other: %lld)\n",
           analysis_cases, analysis_differ, why_small, why_2g, why_other);
    return differ || block_differ ? 1 : 0;
}
