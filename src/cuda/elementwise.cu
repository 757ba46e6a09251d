// The small memory-bound kernels around the GEMMs: dtype conversion of x, copies of the
// routing arrays between layouts, and the deterministic combine.
#include "kernels.cuh"

namespace {

__global__ void convert_rows_kernel(const void *src, int src_dtype, int64_t src_stride, void *dst, int dst_dtype,
                                    int64_t T, int64_t H) {
    const int64_t n = T * H;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / H, h = i % H;
        store_from_float(dst, i, dst_dtype, load_as_float(src, t * src_stride + h, src_dtype));
    }
}

__global__ void copy_topk_kernel(topk_view src, topk_view dst, int64_t T, int64_t k) {
    const int64_t n = T * k;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / k, j = i % k;
        if (dst.ids) dst.ids[t * dst.ids_s0 + j * dst.ids_s1] = src.ids[t * src.ids_s0 + j * src.ids_s1];
        if (dst.weights) dst.weights[t * dst.w_s0 + j * dst.w_s1] = src.weights[t * src.w_s0 + j * src.w_s1];
    }
}

// One thread per 4 consecutive columns of one token (H is a multiple of 8): 16-byte loads of
// the fp32 rows, summed in slot order, the shared row last.
__global__ void combine_kernel(const combine_args p) {
    const int64_t quads = p.H / 4, n = p.T * quads;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / quads, h = (i % quads) * 4;
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int64_t j = 0; j < p.k; j++) {
            const int64_t row = t * p.k + j;
            const int32_t e = p.ids[row];
            if (e < 0 || e >= p.E) continue; // left out of the plan: contributes nothing
            const float4 v = *(const float4 *)(p.out + row * p.H + h);
            acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
        }
        if (p.has_shared) {
            const float4 v = *(const float4 *)(p.out + (p.T * p.k + t) * p.H + h);
            acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
        }
        const int64_t base = t * p.y_s0 + h * p.y_s1;
        store_from_float(p.y, base, p.y_dtype, acc.x);
        store_from_float(p.y, base + p.y_s1, p.y_dtype, acc.y);
        store_from_float(p.y, base + 2 * p.y_s1, p.y_dtype, acc.z);
        store_from_float(p.y, base + 3 * p.y_s1, p.y_dtype, acc.w);
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
    convert_rows_kernel<<<grid_for(T * H, 256), 256, 0, stream>>>(src, (int)src_dtype, src_stride, dst,
                                                                   (int)dst_dtype, T, H);
    return cudaGetLastError();
}

cudaError_t copy_topk_launch(topk_view src, topk_view dst, int64_t T, int64_t k, cudaStream_t stream) {
    if (T * k == 0) return cudaSuccess;
    copy_topk_kernel<<<grid_for(T * k, 256), 256, 0, stream>>>(src, dst, T, k);
    return cudaGetLastError();
}

cudaError_t combine_launch(const combine_args *args, cudaStream_t stream) {
    const int64_t n = args->T * (args->H / 4);
    if (n == 0) return cudaSuccess;
    combine_kernel<<<grid_for(n, 256), 256, 0, stream>>>(*args);
    return cudaGetLastError();
}
