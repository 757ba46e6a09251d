// The small memory-bound kernels around the GEMMs: dtype conversion of x, copies of the
// routing arrays between layouts, and the deterministic combine of GEMM2's rows (fp32, or
// bf16 when y is bf16).
#include "kernels.cuh"

namespace {

__global__ void convert_rows_kernel(const void *src, int src_dtype, int64_t src_stride, void *dst, int dst_dtype,
                                    int64_t T, int64_t H) {
    pdl_wait();
    pdl_launch_dependents();
    const int64_t n = T * H;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / H, h = i % H;
        store_from_float(dst, i, dst_dtype, load_as_float(src, t * src_stride + h, src_dtype));
    }
}

__global__ void copy_topk_kernel(topk_view src, topk_view dst, int64_t T, int64_t k) {
    pdl_wait();
    pdl_launch_dependents();
    const int64_t n = T * k;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / k, j = i % k;
        if (dst.ids) dst.ids[t * dst.ids_s0 + j * dst.ids_s1] = src.ids[t * src.ids_s0 + j * src.ids_s1];
        if (dst.weights) dst.weights[t * dst.w_s0 + j * dst.w_s1] = src.weights[t * src.w_s0 + j * src.w_s1];
    }
}

__global__ void zero_words_kernel(uint32_t *words, int n) {
    pdl_wait();
    pdl_launch_dependents();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) words[i] = 0u;
}

// 16 bytes of a row as floats: 4 fp32 or 8 bf16 (bf16 -> fp32 is exact).
__device__ __forceinline__ void row_chunk_to_float(uint4 raw, float (&v)[4]) {
    v[0] = __uint_as_float(raw.x);
    v[1] = __uint_as_float(raw.y);
    v[2] = __uint_as_float(raw.z);
    v[3] = __uint_as_float(raw.w);
}
__device__ __forceinline__ void row_chunk_to_float(uint4 raw, float (&v)[8]) {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; i++) { // little-endian: the lower column in the low half
        v[2 * i] = __uint_as_float(w[i] << 16);
        v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

// One thread per 16 bytes of a row (4 fp32 or 8 bf16 columns: R's; H is a multiple of 8) of
// one token: 16-byte loads of its rows, summed in fp32 in slot order, the shared row last. The
// slots' ids, then their rows, are loaded COMBINE_BATCH at a time before any is summed (a chain
// of one id and one row per slot made deepseek-v3's combine, k = 8, take 7.5 us at T = 64).
constexpr int COMBINE_BATCH = 8;
template <typename R> __global__ void combine_kernel(const combine_args p) {
    pdl_wait();
    pdl_launch_dependents();
    constexpr int COLS = 16 / sizeof(R);
    const R *rows = (const R *)p.rows;
    const int64_t chunks = p.H / COLS, n = p.T * chunks;
    // bf16 rows go with bf16 y: contiguous 16-byte-aligned y rows take packed stores.
    const bool y_packed = p.y_dtype == MOE_DTYPE_BF16 && p.y_s1 == 1 && p.y_s0 % 8 == 0 && (uintptr_t)p.y % 16 == 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / chunks, h = (i % chunks) * COLS;
        float acc[COLS], v[COLS];
#pragma unroll
        for (int c = 0; c < COLS; c++) acc[c] = 0.0f;
        for (int64_t j0 = 0; j0 < p.k; j0 += COMBINE_BATCH) {
            bool use[COMBINE_BATCH];
            uint4 raw[COMBINE_BATCH];
#pragma unroll
            for (int b = 0; b < COMBINE_BATCH; b++) {
                const int32_t e = j0 + b < p.k ? p.ids[t * p.k + j0 + b] : -1;
                use[b] = e >= 0 && e < p.E; // left out of the plan: contributes nothing
            }
#pragma unroll
            for (int b = 0; b < COMBINE_BATCH; b++)
                raw[b] = use[b] ? *(const uint4 *)(rows + (t * p.k + j0 + b) * p.H + h) : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int b = 0; b < COMBINE_BATCH; b++) {
                if (!use[b]) continue;
                row_chunk_to_float(raw[b], v);
#pragma unroll
                for (int c = 0; c < COLS; c++) acc[c] += v[c];
            }
        }
        if (p.has_shared) {
            row_chunk_to_float(*(const uint4 *)(rows + (p.T * p.k + t) * p.H + h), v);
#pragma unroll
            for (int c = 0; c < COLS; c++) acc[c] += v[c];
        }
        const int64_t base = t * p.y_s0 + h * p.y_s1;
        if (COLS == 8 && y_packed) { // 8 bf16 of y in one 16-byte store
            __nv_bfloat162 y2[4];
#pragma unroll
            for (int c = 0; c < 4; c++) y2[c] = __floats2bfloat162_rn(acc[2 * c], acc[2 * c + 1]);
            *(uint4 *)((__nv_bfloat16 *)p.y + base) = *(const uint4 *)y2;
        } else {
#pragma unroll
            for (int c = 0; c < COLS; c++) store_from_float(p.y, base + c * p.y_s1, p.y_dtype, acc[c]);
        }
    }
}

// Grid for a grid-stride loop over n items: enough blocks to fill the GPU, no more.
unsigned grid_for(int64_t n, int threads) {
    int64_t blocks = (n + threads - 1) / threads;
    const int64_t cap = 132 * 16;
    return (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

} // namespace

cudaError_t convert_rows_launch(const void *src, moe_dtype src_dtype, int64_t src_stride, void *dst,
                                moe_dtype dst_dtype, int64_t T, int64_t H, cudaStream_t stream) {
    if (T * H == 0) return cudaSuccess;
    return launch_kernel(convert_rows_kernel, grid_for(T * H, 256), 256, 0, stream, src, (int)src_dtype, src_stride,
                         dst, (int)dst_dtype, T, H);
}

cudaError_t copy_topk_launch(topk_view src, topk_view dst, int64_t T, int64_t k, cudaStream_t stream) {
    if (T * k == 0) return cudaSuccess;
    return launch_kernel(copy_topk_kernel, grid_for(T * k, 256), 256, 0, stream, src, dst, T, k);
}

cudaError_t zero_words_launch(uint32_t *words, int n, cudaStream_t stream) {
    if (n < 1) return cudaErrorInvalidValue;
    const int threads = n <= 32 ? 32 : 256; // one warp for the few words of the counters
    return launch_kernel(zero_words_kernel, grid_for(n, threads), threads, 0, stream, words, n);
}

cudaError_t combine_launch(const combine_args *args, cudaStream_t stream) {
    const bool bf16 = args->rows_dtype == MOE_DTYPE_BF16;
    if (!bf16 && args->rows_dtype != MOE_DTYPE_F32) return cudaErrorInvalidValue;
    const int64_t n = args->T * (args->H / (bf16 ? 8 : 4));
    if (n == 0) return cudaSuccess;
    return bf16 ? launch_kernel(combine_kernel<__nv_bfloat16>, grid_for(n, 256), 256, 0, stream, *args)
                : launch_kernel(combine_kernel<float>, grid_for(n, 256), 256, 0, stream, *args);
}
