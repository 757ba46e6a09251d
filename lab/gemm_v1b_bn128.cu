// v1b: v1 with a 128 x 128 tile (wgmma m64n128k16, 64 accumulators per thread) and 6 stages.
// Twice the tiles: better SM fill for small grids, more shared-memory reads per flop.
#include "gemm_launch.cuh"
#include "lab.h"

extern "C" moe_status lab_gemm_v1b(const moe__hopper_gemm_args *args, cudaStream_t stream, char *why, size_t why_len) {
    return moe_hopper::dense_launch<moe_hopper::dense_config<128, 6, 1>>(args, stream, why, why_len);
}
