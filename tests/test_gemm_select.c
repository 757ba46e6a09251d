/* The grouped-GEMM path rules of src/core/gemm_select.c, on the CPU (CI runs them on every build;
 * test_gpu_forward checks the CUDA backend's environment overrides on top of them).
 *
 * Each check is a point the H200 measurements behind a rule name (the comments above each rule in
 * gemm_select.c), or one side of a boundary the rule states: the expected values are written here
 * from the rules' documented thresholds, not computed by the code under test. */
#include "moefuse.h"
#include "internal.h"

#include <stdint.h>

#include "harness.h"

enum { V1 = MOE__CUDA_GEMM_V1, HOP = MOE__CUDA_GEMM_HOPPER };

/* moe__gemm_select: Hopper tiles for bf16 above 16 routed rows per expert where the shapes allow
 * (H, I multiples of 64, E*H and E*I >= 256), FP8 at every T (H, I >= 128 and % 16); f16 on v1. */
static void path_rule(void) {
    const moe__gemm_force A = MOE__GEMM_AUTO;
    CHECK(moe__gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_BF16, A) == HOP, "bf16 qwen3 T=16384");
    CHECK(moe__gemm_select(16 * 128 + 1, 128, 2048, 768, MOE_DTYPE_BF16, A) == HOP, "bf16 above 16 rows/expert");
    CHECK(moe__gemm_select(16 * 128, 128, 2048, 768, MOE_DTYPE_BF16, A) == V1, "bf16 at 16 rows/expert: v1 (swap range)");
    CHECK(moe__gemm_select(4096 * 10, 512, 2048, 512, MOE_DTYPE_BF16, A) == HOP, "bf16 qwen3-next T=4096 (80 rows/expert)");
    CHECK(moe__gemm_select(1, 128, 2048, 768, MOE_DTYPE_BF16, A) == V1, "bf16 at T*k = 1");
    CHECK(moe__gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_F16, A) == V1, "f16 stays on v1");
    CHECK(moe__gemm_select(16384 * 8, 16, 256, 96, MOE_DTYPE_BF16, A) == V1, "bf16 I = 96: not a multiple of 64");
    CHECK(moe__gemm_select(16384, 1, 128, 64, MOE_DTYPE_BF16, A) == V1, "bf16 E*I = 64 < 256");
    CHECK(moe__gemm_select(16384 * 4, 128, 2880, 2880, MOE_DTYPE_BF16, A) == HOP, "bf16 gpt-oss (2880 = 45 x 64)");
    CHECK(moe__gemm_select(1, 128, 2048, 768, MOE_DTYPE_E4M3, A) == HOP, "fp8 at T*k = 1");
    CHECK(moe__gemm_select(16384 * 8, 16, 320, 208, MOE_DTYPE_E4M3, A) == HOP, "fp8 H = 320, I = 208 (multiples of 16)");
    CHECK(moe__gemm_select(16384 * 8, 16, 256, 96, MOE_DTYPE_E4M3, A) == V1, "fp8 I = 96 < 128");
    CHECK(moe__gemm_select(INT64_MAX, 128, 2048, 768, MOE_DTYPE_BF16, A) == HOP, "INT64_MAX rows: no overflow");
    CHECK(moe__gemm_select(1, 128, 2048, 768, MOE_DTYPE_BF16, MOE__GEMM_FORCE_HOPPER) == HOP, "forced hopper");
    CHECK(moe__gemm_select(16384 * 8, 16, 256, 96, MOE_DTYPE_BF16, MOE__GEMM_FORCE_HOPPER) == V1,
          "forced hopper where it cannot run");
    CHECK(moe__gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_E4M3, MOE__GEMM_FORCE_V1) == V1, "forced v1, fp8");
    CHECK(moe__gemm_force_parse("v1") == MOE__GEMM_FORCE_V1 && moe__gemm_force_parse("hopper") == MOE__GEMM_FORCE_HOPPER &&
              moe__gemm_force_parse("auto") == MOE__GEMM_AUTO && moe__gemm_force_parse(NULL) == MOE__GEMM_AUTO,
          "MOEFUSE_GEMM values");
    CHECK(moe__gemm_block_rows(HOP) == 128 && moe__gemm_block_rows(V1) == 64, "plan blocks: 128 Hopper, 64 v1");
}

/* The decode kernel with the operands swapped: FP8 up to 16 routed rows per expert; bf16 from half
 * a row per expert up to 16 (session 10). */
static void decode_rules(void) {
    CHECK(moe__fp8_swap_select(16 * 128, 128) && !moe__fp8_swap_select(16 * 128 + 1, 128), "fp8: up to 16 rows/expert");
    CHECK(moe__fp8_swap_select(1, 128), "fp8: at T*k = 1");
    CHECK(!moe__fp8_swap_select(1, 0), "fp8: no experts");
    CHECK(moe__bf16_swap_select(8 * 8, 128), "bf16: qwen3 T=8 (0.5 rows/expert)");
    CHECK(!moe__bf16_swap_select(1 * 8, 128), "bf16: not at qwen3 T=1");
    CHECK(!moe__bf16_swap_select(8 * 4, 128), "bf16: not at gpt-oss T=8 (0.25 rows/expert)");
    CHECK(moe__bf16_swap_select(64 * 4, 128), "bf16: gpt-oss T=64");
    CHECK(moe__bf16_swap_select(128 * 8, 64) && !moe__bf16_swap_select(128 * 8 + 1, 64), "bf16: up to 16 rows/expert");
    CHECK(moe__bf16_swap_select(1, 2) && !moe__bf16_swap_select(1, 3), "bf16: 2 T*k >= E, odd E");
}

/* bf16 GEMM1 on the tiles gathers its rows up to 256 routed rows per expert, or at I <= 1024
 * (session 14, Q5-Q6). */
static void gather_rule(void) {
    CHECK(moe__hopper_gather_select(4096 * 8, 256, 2048), "deepseek T=4096 (128 rows/expert)");
    CHECK(!moe__hopper_gather_select(16384 * 8, 256, 2048), "not at deepseek T=16384 (512 rows/expert)");
    CHECK(moe__hopper_gather_select(4096 * 4, 128, 2880), "gpt-oss T=4096 (128 rows/expert)");
    CHECK(!moe__hopper_gather_select(16384 * 4, 128, 2880), "not at gpt-oss T=16384");
    CHECK(moe__hopper_gather_select(16384 * 8, 128, 768), "qwen3 T=16384 (I = 768)");
    CHECK(moe__hopper_gather_select(16384 * 10, 512, 512), "qwen3-next T=16384 (I = 512)");
    CHECK(!moe__hopper_gather_select(4096 * 2, 8, 14336), "not at mixtral T=4096 (1024 rows/expert)");
    CHECK(moe__hopper_gather_select(512 * 2, 8, 14336), "mixtral T=512 (128 rows/expert)");
    CHECK(moe__hopper_gather_select(256 * 64, 64, 4096) && !moe__hopper_gather_select(256 * 64 + 1, 64, 4096),
          "up to 256 rows/expert");
    CHECK(moe__hopper_gather_select(INT64_MAX / 2, 128, 1024) && !moe__hopper_gather_select(INT64_MAX / 2, 128, 1025),
          "I <= 1024 at any T");
    CHECK(!moe__hopper_gather_select(1, 0, 512), "no experts");
}

int main(void) {
    harness_run_case("gemm path rule (moe__gemm_select)", path_rule);
    harness_run_case("decode rules (moe__fp8_swap_select, moe__bf16_swap_select)", decode_rules);
    harness_run_case("gather rule (moe__hopper_gather_select)", gather_rule);
    return harness_finish(cases_passed, cases_failed);
}
