// Host side of the FP8 block-scaled GEMM: argument checks, e4m3 tensor maps, persistent launch.
// Templated over the kernel configuration so that the library and the kernel lab launch the
// same code.
#ifndef MOEFUSE_CUDA_HOPPER_GEMM_FP8_LAUNCH_CUH
#define MOEFUSE_CUDA_HOPPER_GEMM_FP8_LAUNCH_CUH

#include "gemm_fp8.h"
#include "gemm_fp8_kernel.cuh"
#include "gemm_launch.cuh"

namespace moe_hopper {

// An e4m3 matrix [rows, cols] with row stride ld bytes, read in boxes of box_rows (default 128)
// rows x 128 bytes with the 128-byte swizzle; elements outside the matrix read as zero (code 0 =
// +0.0).
inline CUresult make_tensor_map_e4m3(CUtensorMap *map, const void *base, int64_t rows, int64_t cols, int64_t ld,
                                     int box_rows = 128) {
    return make_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, base, rows, cols, ld, FP8_BK, box_rows,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// FP8_SCALES_BOXES: fp32 scales [rows, kblocks] with row stride ld floats, read in boxes of box_rows
// rows x 4 k-blocks (16 bytes, the least a box row may be), no swizzle; outside the matrix zeros.
inline CUresult make_tensor_map_scales(CUtensorMap *map, const float *base, int64_t rows, int64_t kblocks, int64_t ld,
                                       int box_rows) {
    return make_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, base, rows, kblocks, ld * 4, 4, box_rows,
                              CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE);
}

// Whether the scales can come by TMA (FP8_SCALES_BOXES): rows of 16-byte multiples, 16-byte bases.
inline bool fp8_tma_scales_ok(const moe__hopper_gemm_fp8_args *a) {
    return a->lds_a % 4 == 0 && a->lds_b % 4 == 0 && ((uintptr_t)a->a_scales | (uintptr_t)a->b_scales) % 16 == 0;
}

inline moe_status check_fp8_args(const moe__hopper_gemm_fp8_args *a, char *why, size_t why_len) {
    if (!a) return fail(why, why_len, MOE_STATUS_NULL_POINTER, "args: got NULL, expected a moe__hopper_gemm_fp8_args");
    if (!a->a || !a->b || !a->c || !a->a_scales || !a->b_scales)
        return fail(why, why_len, MOE_STATUS_NULL_POINTER,
                    "a/a_scales/b/b_scales/c: got %p/%p/%p/%p/%p, expected device pointers", a->a, (void *)a->a_scales,
                    a->b, (void *)a->b_scales, a->c);
    const int64_t lim = (int64_t)1 << 31;
    if (a->m < 1 || a->m >= lim || a->n < 1 || a->n >= lim || a->k < 1 || a->k >= lim)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT,
                    "m, n, k: got %lld, %lld, %lld, expected each in [1, 2^31)", (long long)a->m, (long long)a->n,
                    (long long)a->k);
    if (a->lda < a->k || a->lda % 16 != 0 || a->lda >= ((int64_t)1 << 40))
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT,
                    "lda: got %lld, expected a multiple of 16 (16-byte rows for TMA), >= k = %lld", (long long)a->lda,
                    (long long)a->k);
    if (a->ldb < a->k || a->ldb % 16 != 0 || a->ldb >= ((int64_t)1 << 40))
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT,
                    "ldb: got %lld, expected a multiple of 16 (16-byte rows for TMA), >= k = %lld", (long long)a->ldb,
                    (long long)a->k);
    if (a->tensor_scales != 0 && a->tensor_scales != 1)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT,
                    "tensor_scales: got %d, expected 0 (block scales) or 1 (one scale per operand)", a->tensor_scales);
    const int64_t kblocks = (a->k + 127) / 128;
    if (!a->tensor_scales && (a->lds_a < kblocks || a->lds_b < kblocks))
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "lds_a, lds_b: got %lld, %lld, expected >= ceil(k/128) = %lld",
                    (long long)a->lds_a, (long long)a->lds_b, (long long)kblocks);
    if (a->ldc < a->n)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "ldc: got %lld, expected >= n = %lld", (long long)a->ldc,
                    (long long)a->n);
    if (((uintptr_t)a->a | (uintptr_t)a->b) % 16 != 0)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "a/b: got %p/%p, expected 16-byte aligned addresses",
                    a->a, a->b);
    if (a->block_n != 0 && a->block_n != 128 && a->block_n != 192)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "block_n: got %d, expected 0 (the rule), 128 or 192",
                    a->block_n);
    if (a->cluster_m != 0 && a->cluster_m != 1 && a->cluster_m != 2)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "cluster_m: got %d, expected 0 (the rule), 1 or 2",
                    a->cluster_m);
    if (((uintptr_t)a->a_scales | (uintptr_t)a->b_scales) % 4 != 0)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT,
                    "a_scales/b_scales: got %p/%p, expected 4-byte aligned addresses", (void *)a->a_scales,
                    (void *)a->b_scales);
    return MOE_STATUS_OK;
}

// The kernel's parameters for tiles FP8_BM x bn on `sms` multiprocessors (grouped raster as in
// the bf16 engine: g = sqrt(bn * SMs / BM) tile rows per group). Shared with the lab's FP8 variants.
// cm: the CTAs a cluster (the raster group counts units of cm row blocks, as dense_launch's).
inline fp8_params fp8_dense_params(const moe__hopper_gemm_fp8_args *args, int sms, int bn, int cm) {
    fp8_params p;
    p.m = (int)args->m;
    p.n = (int)args->n;
    p.k = (int)args->k;
    p.sa = args->a_scales;
    p.lds_a = (long long)args->lds_a;
    p.sb = args->b_scales;
    p.lds_b = (long long)args->lds_b;
    p.out.m = p.m;
    p.out.n = p.n;
    p.out.k = p.k;
    p.out.c = args->c;
    p.out.ldc = (long long)args->ldc;
    p.out.c_f32 = 0;
    p.out.pair_ok = args->ldc % 2 == 0 && (uintptr_t)args->c % 4 == 0;
    const int group = (int)lround(sqrt((double)bn * sms / FP8_BM) / cm);
    p.out.group_m = group < 1 ? 1 : group;
    return p;
}

// Checks the arguments, builds the tensor maps (B boxes of CFG::BN rows; the scale boxes with
// FP8_SCALES_BOXES) and launches fp8_gemm_kernel<CFG> on a persistent grid. The engine's entry
// (gemm_fp8.cu) and the lab's FP8 variants launch through it.
template <class CFG>
moe_status fp8_launch(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why, size_t why_len) {
    constexpr int bn = CFG::BN;
    const auto kernel = fp8_gemm_kernel<CFG>;
    moe_status st = check_fp8_args(args, why, why_len);
    if (st != MOE_STATUS_OK) return st;
    constexpr bool boxes = CFG::SCALE_PATH == FP8_SCALES_BOXES;
    if ((args->tensor_scales != 0) != CFG::TENSOR_SCALES)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT,
                    "tensor_scales: got %d, expected %d for this kernel configuration", args->tensor_scales,
                    CFG::TENSOR_SCALES ? 1 : 0);
    if (boxes && !fp8_tma_scales_ok(args))
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT,
                    "lds_a, lds_b, a_scales, b_scales: got %lld, %lld, %p, %p, expected multiples of 4 and 16-byte "
                    "aligned addresses (scales by TMA)",
                    (long long)args->lds_a, (long long)args->lds_b, (void *)args->a_scales, (void *)args->b_scales);
    int sms = 0;
    st = device_sms(&sms, why, why_len);
    if (st != MOE_STATUS_OK) return st;

    CUtensorMap map_a, map_b, map_sa, map_sb;
    CUresult cr = make_tensor_map_e4m3(&map_a, args->a, args->m, args->k, args->lda);
    if (cr == CUDA_SUCCESS) cr = make_tensor_map_e4m3(&map_b, args->b, args->n, args->k, args->ldb, CFG::B_BOX_ROWS);
    map_sa = map_sb = map_a; // never read unless boxes
    const int64_t kblocks = (args->k + FP8_BK - 1) / FP8_BK;
    if (boxes && cr == CUDA_SUCCESS)
        cr = make_tensor_map_scales(&map_sa, args->a_scales, args->m, kblocks, args->lds_a, FP8_BM);
    if (boxes && cr == CUDA_SUCCESS)
        cr = make_tensor_map_scales(&map_sb, args->b_scales, (args->n + 127) / 128, kblocks, args->lds_b,
                                    CFG::B_SCALE_ROWS);
    if (cr != CUDA_SUCCESS) return tensor_map_fail(cr, why, why_len);

    const fp8_params p = fp8_dense_params(args, sms, bn, CFG::CLUSTER_M);
    constexpr int CM = CFG::CLUSTER_M;
    const long long units = (long long)((p.m + FP8_BM - 1) / FP8_BM + CM - 1) / CM * ((p.n + bn - 1) / bn);
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, CFG::SMEM_BYTES);
    if (err != cudaSuccess)
        return fail(why, why_len, MOE_STATUS_DEVICE_ERROR, "cudaFuncSetAttribute(%d bytes of shared memory): %s",
                    CFG::SMEM_BYTES, cudaGetErrorString(err));
    // As dense_launch: one CTA per SM, or clusters of CM, as many as can be resident.
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[2];
    long long ctas = 0;
    st = persistent_launch_config(kernel, CM, CFG::SMEM_BYTES, stream, sms, units, &cfg, attr, &ctas, why, why_len);
    if (st != MOE_STATUS_OK) return st;
    err = launched(cudaLaunchKernelEx(&cfg, kernel, map_a, map_b, map_sa, map_sb, p));
    if (err != cudaSuccess)
        return fail(why, why_len, MOE_STATUS_DEVICE_ERROR, "FP8 GEMM launch (%lld CTAs, %d stages): %s", ctas,
                    CFG::STAGES, cudaGetErrorString(err));
    return MOE_STATUS_OK;
}

} // namespace moe_hopper

#endif
