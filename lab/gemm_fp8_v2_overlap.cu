// fp8v2: fp8v1 with two partial accumulators per consumer warpgroup (fp8_config OVERLAP):
// k-block kb+1's wgmmas are issued before kb's partial sums are promoted (wgmma.wait_group 1),
// so a warpgroup's own promotion FMAs overlap its tensor-core work instead of relying on the
// other warpgroup to fill the gap. 64 more registers per consumer thread (192 accumulators).
#include "gemm_fp8_launch.cuh"
#include "lab_fp8.h"

extern "C" moe_status lab_gemm_fp8_v2(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len) {
    return moe_hopper::fp8_launch<moe_hopper::fp8_config<6, true>>(args, stream, why, why_len);
}
