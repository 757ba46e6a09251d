// The library's entry to the Hopper engine's FP8 dense GEMM (gemm_fp8_kernel.cuh), block-scaled or
// per tensor (tensor_scales: the same configurations with FP8_SCALES_TENSOR). Block-scaled:
// 128 x 128 tiles, 6 stages, or 128 x 192, 5 stages, by moe__hopper_gemm_fp8_block_n (gemm_fp8.h),
// in clusters of 2 sharing B by multicast where moe__hopper_gemm_fp8_cluster_m says (many waves, the
// scales by TMA; session 25's lab call Z1). Both widths take their scales by TMA in the stage's
// transaction where the scale rows allow it (fp8_tma_scales_ok), else through the scale ring. Lab
// calls S3 and S4 of session 17 (bench/results/2026-12-04-h200-session17), each variant against
// the ring kernel of its width in the same run: 192 wide (fp8v4 / fp8v3, S3) 3-17% faster on every
// shape, 8192^3 0.810x cuBLASLt against 0.774x; 128 wide (fp8v4_128 / fp8v1, S4) 5-23% faster
// except deepseek-v3's one-expert GEMM2 (512 x 7168 x 2048), 2% slower. The consumers' order
// (fp8_order), session 24's lab calls Y2 and Y4 (bench/results/2026-12-04-h200-session24): 192
// wide ACQUIRE_FIRST, 1.04-1.09x fp8v4's speed on the six shapes the boxes take (8192^3 0.833-0.839x
// cuBLASLt against 0.800x; the old order with the uniform warpgroup index alone 1.00-1.02x); 128
// wide the old order with the uniform index (ISSUE_THEN_WAIT_U), 1.08-1.14x fp8v4_128 on four of
// the six shapes (ACQUIRE_FIRST 1.01-1.10x). The forward's grouped FP8 path has its own kernel
// (grouped_fp8_kernel.cuh).
#include "gemm_fp8_launch.cuh"

using namespace moe_hopper;

static_assert(FP8_BM == MOE__HOPPER_FP8_BM, "the tile-width rule counts tiles of the kernel's rows");

// The engine's configuration of a scale path in the stage (or none) for tile width bn and cm CTAs a
// cluster: 192 wide ACQUIRE_FIRST, 128 wide ISSUE_THEN_WAIT_U (fp8_order).
template <int PATH>
static moe_status fp8_launch_path(const moe__hopper_gemm_fp8_args *args, int bn, int cm, cudaStream_t s, char *why,
                                  size_t why_len) {
    using WIDE = fp8_config<5, false, 192, PATH, FP8_ACQUIRE_FIRST>;
    using NARROW = fp8_config<6, false, 128, PATH, FP8_ISSUE_THEN_WAIT_U>;
    using WIDE_PAIR = fp8_config<5, false, 192, PATH, FP8_ACQUIRE_FIRST, 2>;
    using NARROW_PAIR = fp8_config<6, false, 128, PATH, FP8_ISSUE_THEN_WAIT_U, 2>;
    if (cm == 2)
        return bn == 192 ? fp8_launch<WIDE_PAIR>(args, s, why, why_len) : fp8_launch<NARROW_PAIR>(args, s, why, why_len);
    return bn == 192 ? fp8_launch<WIDE>(args, s, why, why_len) : fp8_launch<NARROW>(args, s, why, why_len);
}

extern "C" moe_status moe__hopper_gemm_fp8(const moe__hopper_gemm_fp8_args *args, void *stream, char *why,
                                           size_t why_len) {
    const cudaStream_t s = (cudaStream_t)stream;
    moe_status st = check_fp8_args(args, why, why_len);
    if (st != MOE_STATUS_OK) return st;
    const bool tensor = args->tensor_scales != 0;
    const bool boxes = !tensor && fp8_tma_scales_ok(args); // the scales by TMA (else the ring: no clusters)
    int bn = args->block_n, cm = args->cluster_m;
    if (bn == 0 || cm == 0) {
        int sms = 0;
        if ((st = device_sms(&sms, why, why_len)) != MOE_STATUS_OK) return st;
        if (bn == 0) bn = moe__hopper_gemm_fp8_block_n(args->m, args->n, sms);
        if (cm == 0) cm = boxes || tensor ? moe__hopper_gemm_fp8_cluster_m(args->m, args->n, bn, sms) : 1;
    }
    // Per tensor: the block-scaled configurations' widths, orders and clusters, no scales in the stage.
    if (tensor) return fp8_launch_path<FP8_SCALES_TENSOR>(args, bn, cm, s, why, why_len);
    if (boxes) return fp8_launch_path<FP8_SCALES_BOXES>(args, bn, cm, s, why, why_len);
    if (cm == 2)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT,
                    "cluster_m: got 2, which needs the scales by TMA: lds_a, lds_b (got %lld, %lld) multiples of 4 and "
                    "a_scales, b_scales 16-byte aligned",
                    (long long)args->lds_a, (long long)args->lds_b);
    using RING_WIDE = fp8_config<5, false, 192, FP8_SCALES_RING, FP8_ACQUIRE_FIRST>;
    using RING_NARROW = fp8_config<6, false, 128, FP8_SCALES_RING, FP8_ISSUE_THEN_WAIT_U>;
    return bn == 192 ? fp8_launch<RING_WIDE>(args, s, why, why_len)
                     : fp8_launch<RING_NARROW>(args, s, why, why_len);
}
