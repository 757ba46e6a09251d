/* Which grouped GEMM path the CUDA forward runs (internal.h): the one rule that the backend
 * (src/cuda/forward.cu, measure.cu) and the analysis (src/analysis/roofline.c) both call. */
#include "internal.h"

#include <string.h>

moe__gemm_force moe__gemm_force_parse(const char *value) {
    if (value && !strcmp(value, "v1")) return MOE__GEMM_FORCE_V1;
    if (value && !strcmp(value, "hopper")) return MOE__GEMM_FORCE_HOPPER;
    return MOE__GEMM_AUTO;
}

int moe__gemm_select(int64_t routed_rows, int64_t E, int64_t H, int64_t I, moe_dtype dtype, moe__gemm_force force) {
    /* +1: a fused shared expert is one more matrix of the stacks; 2I: W13's rows when gated.
     * E4M3 (FP8 weights, gemm_hopper_fp8.cu): K tails and N tails are handled there (TMA zero
     * fill, dropped columns), so H and I need only be multiples of 16 (16-byte rows; the upload
     * guarantees it) and >= 128 (one whole k-block box). */
    const int64_t lim = (int64_t)1 << 31;
    const bool fp8 = dtype == MOE_DTYPE_E4M3;
    const int64_t mult = fp8 ? 16 : 64, least = fp8 ? 128 : 64;
    const bool can = (dtype == MOE_DTYPE_BF16 || fp8) && E >= 1 && H >= least && I >= least && H % mult == 0 &&
                     I % mult == 0 && E * H >= 256 && E * I >= 256 && H < lim / (E + 1) && 2 * I < lim / (E + 1);
    if (!can) return MOE__CUDA_GEMM_V1;
    if (force == MOE__GEMM_FORCE_V1) return MOE__CUDA_GEMM_V1;
    if (force == MOE__GEMM_FORCE_HOPPER) return MOE__CUDA_GEMM_HOPPER;
    /* FP8: the wgmma path at every T. At decode v1 runs its K-split decode kernel
     * (gemm_fp8_v1.cu), but e4m3 mma.sync has no native instruction on sm_90 (ptxas unpacks
     * it to f16 conversions + HMMA) and on the H200 that kernel was slower than the wgmma path
     * at T = 8 and 64 on qwen3-30b-a3b (0.148 vs 0.136 ms, 0.327 vs 0.288) and gpt-oss-120b
     * T = 8 (0.284 vs 0.268), equal at qwen3 T = 1, faster only at gpt-oss T = 1 (0.072 vs
     * 0.074): bench/results/2026-12-02-h200-session3/, the fp8 folders (callC2 vs callB). */
    if (fp8) return MOE__CUDA_GEMM_HOPPER;
    /* bf16: the Hopper tiles above MOE__BF16_HOPPER_MIN_AVG_ROWS routed rows per expert, where
     * the swapped decode kernel's range ends (moe__bf16_swap_select); v1 below (its decode kernel
     * under half a row per expert). H200, session 15 (bench/results/2026-12-03-h200-session15/
     * callR4, bench_gpu_forward, both paths in one process, 2 rounds), forward time Hopper / v1 at
     * 24-96 rows per expert: 0.84-0.93 at 24-32 rows (qwen3, deepseek, gpt-oss, mixtral,
     * glm-4.5-air, qwen3-next), 0.58-0.80 at 40-64, 0.51-0.52 at 96, so the 128-row threshold of
     * the first Hopper kernels left up to 2x on the table there. 17-23 rows were not measured. */
    return routed_rows > (int64_t)MOE__BF16_HOPPER_MIN_AVG_ROWS * E ? MOE__CUDA_GEMM_HOPPER : MOE__CUDA_GEMM_V1;
}

/* H200, session 8 (bench/results/2026-12-03-h200-session8/callJ4): the swapped kernel was faster
 * at 1-16 rows per expert (forward 0.81-0.92x of the tiles' time at T <= 64, 0.83-0.91x at 16 rows)
 * and slower at 32 (1.16x) and 128 (2.25x), where an expert's rows span several 32-row blocks that
 * each stream its weights again. */
int moe__fp8_swap_select(int64_t routed_rows, int64_t E) {
    return E >= 1 && routed_rows <= (int64_t)MOE__FP8_SWAP_MAX_AVG_ROWS * E;
}

/* H200, session 10 (bench/results/2026-12-03-h200-session10/, callL1 to L4): the bf16 swapped
 * kernel against v1's kernels, forward time. Faster from half a row per expert: qwen3 T = 8 0.95x,
 * T = 64 0.90x, gpt-oss T = 64 0.94x (L1); at 4-16 rows (T = 128-512, L3) deepseek 0.90-1.00x
 * (0.995 at 4 rows, 0.897 at 16), gpt-oss 0.88-0.98x, qwen3 0.87-0.88x. Slower below half a row
 * (T = 1 1.04-1.19x, gpt-oss and deepseek T = 8 1.07x and 1.02x: with one row per touched expert
 * both kernels only stream the weights, v1 gathers x where the swapped kernel needs a permuted
 * copy, and few 128-row units fill the SMs' last wave worse: mixtral T = 1's GEMM2 is 64 units for
 * 132 SMs). Left slower by this rule: mixtral T = 8 (2 rows, 1.04x), deepseek T = 64 (1.01x, where
 * v1 is at the memory floor already) and mixtral T = 64 (16 rows: 1.01x in L1, 1.02x in L4). The
 * L3 and L4 figures were recomputed in session 31: the summaries of those calls had pooled each
 * log's forced-v1 and forced-hopper rows (tools/ab_summary.py keyed on shape and T alone) and
 * reported 0.88-0.92x at 4-16 rows and 0.96x for mixtral T = 64. Above 16 rows an expert's rows
 * span several 32-row blocks, each streaming its weights again (moe__fp8_swap_select). */
int moe__bf16_swap_select(int64_t routed_rows, int64_t E) {
    return moe__fp8_swap_select(routed_rows, E) && 2 * routed_rows >= E;
}

/* H200, session 14 (bench/results/2026-12-03-h200-session14/callQ5): bf16 GEMM1 with its A rows
 * gathered by the producer (cp.async from x) against TMA from a permuted copy of x, both on the
 * ticket schedule with the act-first epilogue, forward time gather/permute: at 128-256 routed rows
 * per expert (T = 4096) deepseek 0.942, gpt-oss 0.922, qwen3 0.932 (the GEMM1 there is bound by
 * the weight stream, and the permuted copy's DRAM reads and the pass itself are saved); at 512 and
 * more the cp.async producer makes GEMM1 8-13% slower (lab), which the saved pass repays only where
 * I is small against H: qwen3 (I = 768) T = 16384 0.938, but deepseek (I = 2048) 1.035, gpt-oss
 * (2880) 1.044, mixtral (14336, 1024-4096 rows) 1.063-1.069. The permuted copy costs 4H bytes a
 * routed row, GEMM1 4HI flops: the pass's share falls as 1/I. */
int moe__hopper_gather_select(int64_t routed_rows, int64_t E, int64_t I) {
    return E >= 1 && (routed_rows <= (int64_t)MOE__HOPPER_GATHER_MAX_AVG_ROWS * E || I <= MOE__HOPPER_GATHER_MAX_I);
}

int64_t moe__gemm_block_rows(int path) {
    return path == MOE__CUDA_GEMM_HOPPER ? MOE__CUDA_HOPPER_BLOCK_M : MOE__CUDA_BLOCK_M;
}
