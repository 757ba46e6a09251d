// fp8v1: the engine's FP8 block-scaled kernel as first written (src/cuda/hopper/
// gemm_fp8_kernel.cuh): 128 x 128 x 128 tile, 6-stage ring (TMA for the e4m3 tiles, cp.async
// with mbarrier arrivals for the fp32 scales), 2 consumer warpgroups of wgmma m64n128k32
// e4m3, promotion of each k-block's partial sums into fp32 with sa * sb, persistent grid,
// grouped raster, epilogue from registers to global (bf16).
#include "gemm_fp8_launch.cuh"
#include "lab_fp8.h"

extern "C" moe_status lab_gemm_fp8_v1(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len) {
    return moe_hopper::fp8_launch<moe_hopper::fp8_config<6>>(args, stream, why, why_len);
}
