// The library's entry to the Hopper engine's FP8 block-scaled dense GEMM (gemm_fp8_kernel.cuh;
// docs/hopper_gemm.md, "FP8"). One instantiation: 128 x 128 tiles, 6 stages. Not yet called
// by the forward (the grouped FP8 path is the next step of issue 4).
#include "gemm_fp8_launch.cuh"

extern "C" moe_status moe__hopper_gemm_fp8(const moe__hopper_gemm_fp8_args *args, void *stream, char *why,
                                           size_t why_len) {
    return moe_hopper::fp8_launch<moe_hopper::fp8_config<6>>(args, (cudaStream_t)stream, why, why_len);
}
