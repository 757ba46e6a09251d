// Lab entries of the FP8 dense kernel with the consumers' other orders (gemm_fp8_kernel.cuh,
// fp8_order), scales by TMA in the stage as fp8v4: fp8v6 = 128 x 192, 5 stages, ACQUIRE_FIRST (each
// k-block's stage waited for and its scales read while the previous k-block's wgmmas run, then the
// previous one promoted and this one issued: the order of cuBLASLt's generated block-scaled kernel;
// the engine's 192-wide kernel); fp8v6_128 = the same at 128 x 128, 6 stages; fp8v4u / fp8v4u_128 =
// fp8v4's order with the warp-uniform warpgroup index alone (ISSUE_THEN_WAIT_U; the engine's 128-wide
// kernel).
#include "gemm_fp8_launch.cuh"
#include "lab_fp8.h"

using namespace moe_hopper;

extern "C" moe_status lab_gemm_fp8_v6(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len) {
    return fp8_launch<fp8_config<5, false, 192, FP8_SCALES_BOXES, FP8_ACQUIRE_FIRST>>(args, stream, why, why_len);
}
extern "C" moe_status lab_gemm_fp8_v6_128(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len) {
    return fp8_launch<fp8_config<6, false, 128, FP8_SCALES_BOXES, FP8_ACQUIRE_FIRST>>(args, stream, why, why_len);
}
extern "C" moe_status lab_gemm_fp8_v4u(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                       size_t why_len) {
    return fp8_launch<fp8_config<5, false, 192, FP8_SCALES_BOXES, FP8_ISSUE_THEN_WAIT_U>>(args, stream, why, why_len);
}
extern "C" moe_status lab_gemm_fp8_v4u_128(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                           size_t why_len) {
    return fp8_launch<fp8_config<6, false, 128, FP8_SCALES_BOXES, FP8_ISSUE_THEN_WAIT_U>>(args, stream, why, why_len);
}
