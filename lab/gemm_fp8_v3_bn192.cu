// Lab entries of the FP8 dense kernel on wide tiles (src/cuda/hopper/gemm_fp8_kernel.cuh,
// fp8_wide_cfg; fp8v3 of session 15, in the engine since session 16 at 192 wide): fp8v3 = 192 wide (what the engine launches on
// large shapes), fp8v3_160 and fp8v3_144 the other widths of the sweep (144 is cuBLASLt's at 8192^3).
#include "gemm_fp8_launch.cuh"
#include "lab_fp8.h"

using namespace moe_hopper;

extern "C" moe_status lab_gemm_fp8_v3(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len) {
    return fp8_launch<fp8_wide_cfg<192>>(args, stream, why, why_len);
}
extern "C" moe_status lab_gemm_fp8_v3_160(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len) {
    return fp8_launch<fp8_wide_cfg<160>>(args, stream, why, why_len);
}
extern "C" moe_status lab_gemm_fp8_v3_144(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len) {
    return fp8_launch<fp8_wide_cfg<144>>(args, stream, why, why_len);
}

