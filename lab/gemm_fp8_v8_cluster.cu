// Lab entries of the FP8 dense kernel in clusters of 2 (fp8_config's CLUSTER_M: adjacent row blocks
// share the B tile by TMA multicast, each CTA loading half), on the engine's session-24 orders:
// fp8v8 = fp8v6 (128 x 192, ACQUIRE_FIRST) in clusters; fp8v8_128 = fp8v4u_128 (128 x 128,
// ISSUE_THEN_WAIT_U) in clusters, cuBLASLt's same-work configuration. Session 21 measured the
// clusters on the old order: 0.996 (192) and 0.975 (128) of the single CTA's time.
#include "gemm_fp8_launch.cuh"
#include "lab_fp8.h"

using namespace moe_hopper;

extern "C" moe_status lab_gemm_fp8_v8(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len) {
    return fp8_launch<fp8_config<5, false, 192, FP8_SCALES_BOXES, FP8_ACQUIRE_FIRST, 2>>(args, stream, why, why_len);
}
extern "C" moe_status lab_gemm_fp8_v8_128(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len) {
    return fp8_launch<fp8_config<6, false, 128, FP8_SCALES_BOXES, FP8_ISSUE_THEN_WAIT_U, 2>>(args, stream, why,
                                                                                          why_len);
}
