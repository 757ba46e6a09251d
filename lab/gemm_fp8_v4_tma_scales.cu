// Lab entries of the FP8 dense kernel with its scales by TMA in the tile stage's transaction
// (src/cuda/hopper/gemm_fp8_kernel.cuh, fp8_config's FP8_SCALES_BOXES: no scale warp, no scale ring):
// fp8v4 = 128 x 192 tiles, 5 stages (fp8v3 / the engine at large shapes, scales by TMA),
// fp8v4_128 = 128 x 128, 6 stages (fp8v1, scales by TMA). Both need lds_a and lds_b multiples of 4
// (the boxes' 16-byte rows); the launch refuses other shapes with INVALID_ARGUMENT.
#include "gemm_fp8_launch.cuh"
#include "lab_fp8.h"

using namespace moe_hopper;

extern "C" moe_status lab_gemm_fp8_v4(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len) {
    using CFG = fp8_config<5, false, 192, FP8_SCALES_BOXES>;
    return fp8_launch<CFG>(args, stream, why, why_len);
}
extern "C" moe_status lab_gemm_fp8_v4_128(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len) {
    using CFG = fp8_config<6, false, 128, FP8_SCALES_BOXES>;
    return fp8_launch<CFG>(args, stream, why, why_len);
}
