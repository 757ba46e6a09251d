// Every kernel launcher of the CUDA backend, for forward.cu and weights.cu.
#ifndef MOEFUSE_CUDA_KERNELS_CUH
#define MOEFUSE_CUDA_KERNELS_CUH

#include "gemm.cuh"
#include "gemm_fp8_v1.cuh"
#include "route.cuh"

// plan.cu: raises the plan kernel's shared-memory limit (once, outside graph capture).
cudaError_t plan_init(void);

// elementwise.cu
// dst [T, H] contiguous in dst_dtype <- src rows (row stride src_stride, columns contiguous).
cudaError_t convert_rows_launch(const void *src, moe_dtype src_dtype, int64_t src_stride, void *dst,
                                moe_dtype dst_dtype, int64_t T, int64_t H, cudaStream_t stream);
// Copies ids and weights [T, k] between strided layouts (strides in elements).
struct topk_view {
    int32_t *ids;
    float *weights;
    int64_t ids_s0, ids_s1, w_s0, w_s1;
};
cudaError_t copy_topk_launch(topk_view src, topk_view dst, int64_t T, int64_t k, cudaStream_t stream);
// Sets words[0 .. n) to 0, n >= 1 (the grouped GEMMs' ticket counter and GEMM1's row counts, the
// fp8-tensor quantiser's amax words): a kernel, not cudaMemsetAsync, so that the forward stays a chain of kernels, the only
// nodes a programmatic edge joins (pdl.cuh).
cudaError_t zero_words_launch(uint32_t *words, int n, cudaStream_t stream);
// y[t] = sum over slots of rows[t*k + slot] (rows whose id is in [0, E)), then + rows[T*k + t]
// when has_shared, in fp32; rounded to y's dtype. rows is [T*k (+T), H] of rows_dtype: F32, or
// BF16 (GEMM2's rows when y is bf16; forward.cu's rows_in_bf16).
struct combine_args {
    const void *rows;
    moe_dtype rows_dtype;
    const int32_t *ids;
    int64_t T, k, E, H;
    int has_shared;
    void *y;
    moe_dtype y_dtype;
    int64_t y_s0, y_s1;
};
cudaError_t combine_launch(const combine_args *args, cudaStream_t stream);

#endif
