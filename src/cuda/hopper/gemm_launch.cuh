// Host side of the dense GEMM: argument checks, TMA tensor maps, the persistent launch.
// Templated over the kernel configuration so that the library and the kernel lab launch the
// same code (the lab instantiates the variants, the library one or two configurations).
#ifndef MOEFUSE_CUDA_HOPPER_GEMM_LAUNCH_CUH
#define MOEFUSE_CUDA_HOPPER_GEMM_LAUNCH_CUH

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "gemm_dense.h"
#include "gemm_kernel.cuh"

namespace moe_hopper {

inline moe_status fail(char *why, size_t why_len, moe_status st, const char *fmt, ...) {
    if (why && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return st;
}

// cuTensorMapEncodeTiled through the runtime's driver entry point: no -lcuda needed.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
        return (err == cudaSuccess && q == cudaDriverEntryPointSuccess) ? (PFN_cuTensorMapEncodeTiled_v12000)p
                                                                         : nullptr;
    }();
    return fn;
}

// A 2-D row-major matrix [rows, cols] of `type` with row stride ld_bytes, read in boxes of
// box_rows x box_cols elements; elements outside the matrix read as zero. The engine's maps below
// (and gemm_fp8_launch.cuh's) differ only in these arguments.
inline CUresult make_tensor_map_2d(CUtensorMap *map, CUtensorMapDataType type, const void *base, int64_t rows,
                                   int64_t cols, int64_t ld_bytes, int box_cols, int box_rows,
                                   CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion) {
    PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (!encode) return CUDA_ERROR_NOT_FOUND;
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)ld_bytes};
    cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
    cuuint32_t elem_strides[2] = {1, 1};
    return encode(map, type, 2, const_cast<void *>(base), dims, strides, box, elem_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// A bf16 matrix [rows, cols] with row stride ld elements, read in boxes of box_rows x BK
// with the 128-byte swizzle; elements outside the matrix read as zero.
inline CUresult make_tensor_map(CUtensorMap *map, const void *base, int64_t rows, int64_t cols, int64_t ld,
                                int box_rows) {
    return make_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base, rows, cols, ld * 2, BK, box_rows,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// A bf16 operand's row stride as TMA reads it: at least its `cols` (named cols_name), a multiple of
// 8 elements (16-byte rows), below 2^36.
inline moe_status check_tma_ld(const char *name, int64_t ld, const char *cols_name, int64_t cols, char *why,
                               size_t why_len) {
    if (ld < cols || ld % 8 != 0 || ld >= ((int64_t)1 << 36))
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT,
                    "%s: got %lld, expected a multiple of 8 (16-byte rows for TMA), >= %s = %lld", name, (long long)ld,
                    cols_name, (long long)cols);
    return MOE_STATUS_OK;
}

// Checks that do not depend on the tile configuration.
inline moe_status check_dense_args(const moe__hopper_gemm_args *a, char *why, size_t why_len) {
    if (!a) return fail(why, why_len, MOE_STATUS_NULL_POINTER, "args: got NULL, expected a moe__hopper_gemm_args");
    if (!a->a || !a->b || !a->c)
        return fail(why, why_len, MOE_STATUS_NULL_POINTER, "a/b/c: got %p/%p/%p, expected device pointers", a->a,
                    a->b, a->c);
    const int64_t lim = (int64_t)1 << 31;
    if (a->m < 1 || a->m >= lim || a->n < 1 || a->n >= lim || a->k < 1 || a->k >= lim)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "m, n, k: got %lld, %lld, %lld, expected each in [1, 2^31)",
                    (long long)a->m, (long long)a->n, (long long)a->k);
    moe_status st = check_tma_ld("lda", a->lda, "k", a->k, why, why_len);
    if (st == MOE_STATUS_OK) st = check_tma_ld("ldb", a->ldb, "k", a->k, why, why_len);
    if (st != MOE_STATUS_OK) return st;
    if (a->ldc < a->n)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "ldc: got %lld, expected >= n = %lld",
                    (long long)a->ldc, (long long)a->n);
    if (((uintptr_t)a->a | (uintptr_t)a->b) % 16 != 0)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "a/b: got %p/%p, expected 16-byte aligned addresses",
                    a->a, a->b);
    if (a->c_dtype != MOE_DTYPE_BF16 && a->c_dtype != MOE_DTYPE_F32)
        return fail(why, why_len, MOE_STATUS_DTYPE_MISMATCH, "c_dtype: got %d, expected MOE_DTYPE_BF16 or MOE_DTYPE_F32",
                    (int)a->c_dtype);
    if (a->block_n != 0 && a->block_n != 128 && a->block_n != 256)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "block_n: got %d, expected 0, 128 or 256", a->block_n);
    if (a->cluster_m != 0 && a->cluster_m != 1 && a->cluster_m != 2)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "cluster_m: got %d, expected 0 (the rule), 1 or 2",
                    a->cluster_m);
    if (a->cluster_m == 2 && a->block_n == 128)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT,
                    "cluster_m: got 2 with block_n 128, expected clusters of 2 on 256-wide tiles only (block_n 0 or 256)");
    return MOE_STATUS_OK;
}

// The status and message of a failed tensor-map encode (CUDA_ERROR_NOT_FOUND: the driver has no
// cuTensorMapEncodeTiled).
inline moe_status tensor_map_fail(CUresult cr, char *why, size_t why_len) {
    return fail(why, why_len, cr == CUDA_ERROR_NOT_FOUND ? MOE_STATUS_UNSUPPORTED : MOE_STATUS_DEVICE_ERROR,
                "cuTensorMapEncodeTiled: %s (error %d)",
                cr == CUDA_ERROR_NOT_FOUND ? "not found in the driver" : "rejected the tensor map", (int)cr);
}

// Multiprocessor count of the current device, or a status if it is not a Hopper (sm_90).
inline moe_status device_sms(int *sms, char *why, size_t why_len) {
    int dev = 0, major = 0, minor = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev);
    if (err != cudaSuccess)
        return fail(why, why_len, MOE_STATUS_DEVICE_ERROR, "device query failed: %s", cudaGetErrorString(err));
    if (major != 9 || minor != 0)
        return fail(why, why_len, MOE_STATUS_UNSUPPORTED, "device: compute capability %d.%d, expected 9.0 (sm_90a code)",
                    major, minor);
    return MOE_STATUS_OK;
}

// The launch of a persistent kernel over `units` work units, a unit per cluster of `cluster` CTAs
// along x (1: no cluster attribute): as many clusters as units, but no more than can be resident at
// once (one CTA per SM without clusters). Fills cfg (attr: the caller's storage for its two
// attributes, the cluster's and PDL's: pdl.cuh) and *ctas.
template <class KERNEL>
moe_status persistent_launch_config(KERNEL kernel, int cluster, int smem, cudaStream_t stream, int sms,
                                    long long units, cudaLaunchConfig_t *cfg, cudaLaunchAttribute *attr,
                                    long long *ctas, char *why, size_t why_len) {
    *cfg = cudaLaunchConfig_t{};
    cfg->blockDim = dim3(THREADS, 1, 1);
    cfg->dynamicSmemBytes = smem;
    cfg->stream = stream;
    long long slots = sms; // clusters that can be resident at once, times cluster
    if (cluster > 1) {
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = cluster;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg->attrs = attr;
        cfg->numAttrs = 1;
        cfg->gridDim = dim3((unsigned)(sms / cluster * cluster), 1, 1);
        int clusters = 0;
        const cudaError_t err = cudaOccupancyMaxActiveClusters(&clusters, kernel, cfg);
        if (err != cudaSuccess || clusters < 1)
            return fail(why, why_len, MOE_STATUS_DEVICE_ERROR, "cudaOccupancyMaxActiveClusters: %s, %d clusters",
                        cudaGetErrorString(err), clusters);
        slots = (long long)clusters * cluster;
    }
    *ctas = (units < slots / cluster ? units : slots / cluster) * cluster;
    cfg->gridDim = dim3((unsigned)*ctas, 1, 1);
    pdl_add_attribute(cfg, attr);
    return MOE_STATUS_OK;
}

// Launches configuration CFG: one CTA per SM (or per resident cluster slot) at most.
template <class CFG>
moe_status dense_launch(const moe__hopper_gemm_args *args, cudaStream_t stream, char *why, size_t why_len) {
    moe_status st = check_dense_args(args, why, why_len);
    if (st != MOE_STATUS_OK) return st;
    int sms = 0;
    st = device_sms(&sms, why, why_len);
    if (st != MOE_STATUS_OK) return st;

    CUtensorMap map_a, map_b;
    CUresult cr = make_tensor_map(&map_a, args->a, args->m, args->k, args->lda, BM);
    if (cr == CUDA_SUCCESS) cr = make_tensor_map(&map_b, args->b, args->n, args->k, args->ldb, CFG::B_BOX_ROWS);
    if (cr != CUDA_SUCCESS) return tensor_map_fail(cr, why, why_len);

    dense_params p;
    p.m = (int)args->m;
    p.n = (int)args->n;
    p.k = (int)args->k;
    p.c = args->c;
    p.ldc = (long long)args->ldc;
    p.c_f32 = args->c_dtype == MOE_DTYPE_F32;
    const size_t pair_bytes = p.c_f32 ? 8 : 4;
    p.pair_ok = args->ldc % 2 == 0 && (uintptr_t)args->c % pair_bytes == 0;

    const int tiles_m = (p.m + BM - 1) / BM;
    const int tiles_n = (p.n + CFG::BN - 1) / CFG::BN;
    const int units_m = (tiles_m + CFG::CLUSTER_M - 1) / CFG::CLUSTER_M;
    const long long units = (long long)units_m * tiles_n;
    // A wave of `sms` CTAs over g unit rows touches g*CLUSTER_M*BM rows of A and
    // sms/(g*CLUSTER_M)*BN rows of B; their sum is least at g = sqrt(BN*sms/BM)/CLUSTER_M
    // (16 for BN 256 on 132 SMs).
    const int group = (int)lround(sqrt((double)CFG::BN * sms / BM) / CFG::CLUSTER_M);
    p.group_m = group < 1 ? 1 : group;

    auto kernel = dense_gemm_kernel<CFG>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, CFG::SMEM_BYTES);
    if (err != cudaSuccess)
        return fail(why, why_len, MOE_STATUS_DEVICE_ERROR, "cudaFuncSetAttribute(%d bytes of shared memory): %s",
                    CFG::SMEM_BYTES, cudaGetErrorString(err));

    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[2];
    long long ctas = 0;
    st = persistent_launch_config(kernel, CFG::CLUSTER_M, CFG::SMEM_BYTES, stream, sms, units, &cfg, attr, &ctas, why,
                                  why_len);
    if (st != MOE_STATUS_OK) return st;
    err = launched(cudaLaunchKernelEx(&cfg, kernel, map_a, map_b, p));
    if (err != cudaSuccess)
        return fail(why, why_len, MOE_STATUS_DEVICE_ERROR, "dense GEMM launch (%lld CTAs, BN %d, %d stages, cluster %d): %s",
                    ctas, CFG::BN, CFG::STAGES, CFG::CLUSTER_M, cudaGetErrorString(err));
    return MOE_STATUS_OK;
}

} // namespace moe_hopper

#endif
