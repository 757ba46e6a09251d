// v3: v1 with a 128 x 192 tile (wgmma m64n192k16, 96 accumulators a thread) and 5 stages (205 KB).
// At 8192^3 the 128 x 256 tiles make 2048 units, 15.5 waves on 132 SMs (the last one half full:
// 97% of the SM-time does work); 128 x 192 makes 2752 units of which the last column is 2/3 full,
// 20.85 waves (98.5%), for 11% more bytes per MAC from L2.
#include "gemm_launch.cuh"
#include "lab.h"

extern "C" moe_status lab_gemm_v3(const moe__hopper_gemm_args *args, cudaStream_t stream, char *why, size_t why_len) {
    return moe_hopper::dense_launch<moe_hopper::dense_config<192, 5, 1>>(args, stream, why, why_len);
}
