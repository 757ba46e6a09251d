// The library's entry to the Hopper engine's dense GEMM (see gemm_kernel.cuh for the design,
// docs/kernels/dense_bf16.md for its history). Three instantiations, to keep the build short:
// 128 x 256 tiles with 4 stages (the main one), the same in clusters of 2 sharing B by multicast
// (many waves: moe__hopper_gemm_dense_cluster_m), and 128 x 128 with 6 stages (small grids).
// The forward does not call it: the measured ceilings (measure.cu), the lab and the suite do.
#include "gemm_launch.cuh"

namespace {
using config_bn256 = moe_hopper::dense_config<256, 4, 1>;
using config_bn256_pair = moe_hopper::dense_config<256, 4, 2>;
using config_bn128 = moe_hopper::dense_config<128, 6, 1>;
static_assert(moe_hopper::BM == MOE__HOPPER_DENSE_BM, "the tile-width rule counts tiles of the kernel's rows");
} // namespace

extern "C" moe_status moe__hopper_gemm_dense(const moe__hopper_gemm_args *args, void *stream, char *why,
                                             size_t why_len) {
    moe_status st = moe_hopper::check_dense_args(args, why, why_len);
    if (st != MOE_STATUS_OK) return st;
    int block_n = args->block_n, cluster_m = args->cluster_m;
    if (block_n == 0 && cluster_m == 2) block_n = 256; // clusters run 256-wide tiles only
    if (block_n == 0 || cluster_m == 0) {
        int sms = 0;
        st = moe_hopper::device_sms(&sms, why, why_len);
        if (st != MOE_STATUS_OK) return st;
        if (block_n == 0) block_n = moe__hopper_gemm_dense_block_n(args->m, args->n, sms);
        if (cluster_m == 0) cluster_m = moe__hopper_gemm_dense_cluster_m(args->m, args->n, block_n, sms);
    }
    cudaStream_t s = (cudaStream_t)stream;
    if (block_n == 128) return moe_hopper::dense_launch<config_bn128>(args, s, why, why_len);
    return cluster_m == 2 ? moe_hopper::dense_launch<config_bn256_pair>(args, s, why, why_len)
                          : moe_hopper::dense_launch<config_bn256>(args, s, why, why_len);
}
