// Lab entries of the dense FP8 kernel on per-tensor operands (fp8_config's FP8_SCALES_TENSOR: one
// fp32 scale per operand, their product applied at every promotion, nothing but the A and B tiles
// in a stage): the engine's configurations forced one by one (fp8pt = 128 x 192, ACQUIRE_FIRST;
// fp8pt_128 = 128 x 128, ISSUE_THEN_WAIT_U; _c2 = in clusters of 2 with B multicast), and 7 stages
// at 128 wide, which fit once the stage carries no scales. The driver checks them against the
// per-tensor reference, the operands cuBLASLt's "cublaslt" row computes with.
#include "gemm_fp8_launch.cuh"
#include "lab_fp8.h"

using namespace moe_hopper;

extern "C" moe_status lab_gemm_fp8_pt(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len) {
    return fp8_launch<fp8_config<5, false, 192, FP8_SCALES_TENSOR, FP8_ACQUIRE_FIRST>>(args, stream, why, why_len);
}
extern "C" moe_status lab_gemm_fp8_pt_128(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len) {
    return fp8_launch<fp8_config<6, false, 128, FP8_SCALES_TENSOR, FP8_ISSUE_THEN_WAIT_U>>(args, stream, why,
                                                                                        why_len);
}
extern "C" moe_status lab_gemm_fp8_pt_c2(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                         size_t why_len) {
    return fp8_launch<fp8_config<5, false, 192, FP8_SCALES_TENSOR, FP8_ACQUIRE_FIRST, 2>>(args, stream, why,
                                                                                       why_len);
}
extern "C" moe_status lab_gemm_fp8_pt_128_c2(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                             size_t why_len) {
    return fp8_launch<fp8_config<6, false, 128, FP8_SCALES_TENSOR, FP8_ISSUE_THEN_WAIT_U, 2>>(args, stream, why,
                                                                                           why_len);
}
extern "C" moe_status lab_gemm_fp8_pt_128_s7_c2(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                                size_t why_len) {
    return fp8_launch<fp8_config<7, false, 128, FP8_SCALES_TENSOR, FP8_ISSUE_THEN_WAIT_U, 2>>(args, stream, why,
                                                                                           why_len);
}
