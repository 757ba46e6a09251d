// v1: the engine's dense kernel as first written (src/cuda/hopper/gemm_kernel.cuh): 128 x 256
// tile, BK 64, 4-stage TMA/mbarrier ring, 1 producer + 2 consumer warpgroups (setmaxnreg
// 40/232), wgmma m64n256k16, persistent grid of #SMs CTAs, grouped raster, epilogue from
// registers straight to global memory.
#include "gemm_launch.cuh"
#include "lab.h"

extern "C" moe_status lab_gemm_v1(const moe__hopper_gemm_args *args, cudaStream_t stream, char *why, size_t why_len) {
    return moe_hopper::dense_launch<moe_hopper::dense_config<256, 4, 1>>(args, stream, why, why_len);
}
