// v2: v1 in clusters of 2 CTAs along M: the two CTAs take adjacent 128-row blocks of the same
// 256-column block; each loads half of the B tile (128 x 64) and multicasts it to both, so
// every B byte is read from L2 once per two tiles. The `empty` barriers count the consumer
// warps of both CTAs (a stage may be refilled only when both are done with it).
#include "gemm_launch.cuh"
#include "lab.h"

extern "C" moe_status lab_gemm_v2(const moe__hopper_gemm_args *args, cudaStream_t stream, char *why, size_t why_len) {
    return moe_hopper::dense_launch<moe_hopper::dense_config<256, 4, 2>>(args, stream, why, why_len);
}
