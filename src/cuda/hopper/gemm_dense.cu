// The library's entry to the Hopper engine's dense GEMM (see gemm_kernel.cuh for the design,
// docs/hopper_gemm.md for the plan). Two instantiations only, to keep the build short:
// 128 x 256 tiles with 4 stages (the main one) and 128 x 128 with 6 stages (small grids).
// Not yet called by the forward: the grouped MoE path is the next step of issue 4.
#include "gemm_launch.cuh"

namespace {
using config_bn256 = moe_hopper::dense_config<256, 4, 1>;
using config_bn128 = moe_hopper::dense_config<128, 6, 1>;
static_assert(moe_hopper::BM == MOE__HOPPER_DENSE_BM, "the tile-width rule counts tiles of the kernel's rows");
} // namespace

extern "C" moe_status moe__hopper_gemm_dense(const moe__hopper_gemm_args *args, void *stream, char *why,
                                             size_t why_len) {
    moe_status st = moe_hopper::check_dense_args(args, why, why_len);
    if (st != MOE_STATUS_OK) return st;
    int block_n = args->block_n;
    if (block_n == 0) {
        int sms = 0;
        st = moe_hopper::device_sms(&sms, why, why_len);
        if (st != MOE_STATUS_OK) return st;
        block_n = moe__hopper_gemm_dense_block_n(args->m, args->n, sms);
    }
    cudaStream_t s = (cudaStream_t)stream;
    return block_n == 128 ? moe_hopper::dense_launch<config_bn128>(args, s, why, why_len)
                          : moe_hopper::dense_launch<config_bn256>(args, s, why, why_len);
}
