// The FP8 activation quantiser of the w8a8 forward: x (once per token, before the GEMMs) and
// A2 (the GLU output, before GEMM2) to e4m3 codes with fp32 scales, on the device, sync-free.
// The rounding rule, shared with the Hopper FP8 GEMM1 epilogue that quantises A2 itself, is in
// fp8_codec.cuh: both encode with fp8_encode_fast (the GPU suite's quantiser cases, double-
// rounding traps included, check its codes bit for bit against the CPU's).
//
// FP8_ROW128: one warp per (row, 128-column group). FP8_TENSOR: an amax pass (atomicMax of the
// bits of |x|, which order as the values do; order-free, so deterministic) into a zeroed device
// word, then the quantise pass reads it: nothing goes back to the host.
#include <string.h>

#include "fp8_codec.cuh"
#include "kernels.cuh"

namespace {

using namespace moe_fp8;

__device__ __forceinline__ int64_t live_rows_of(const fp8_quant_args &p) {
    if (!p.sorted_ids) return p.rows;
    const int64_t live = *p.live_rows;
    return live < p.rows ? live : p.rows;
}

// -1: a dead row (padding, or past the plan's total); 0: a routed row (or any row without a
// plan); 1: a fused shared-expert row (id above padding_id).
__device__ __forceinline__ int row_kind(const fp8_quant_args &p, int64_t r) {
    if (!p.sorted_ids) return 0;
    const int64_t id = p.sorted_ids[r];
    return id == p.padding_id ? -1 : id > p.padding_id ? 1 : 0;
}

// A padding row of a plan (dead, but inside a block the GEMM reads): zero codes and scale 0,
// as the x permute writes them (gemm_hopper_fp8.cu), so GEMM2 never reads unwritten or stale
// workspace; its products are dropped by the epilogue anyway. Here one warp's (row, group).
__device__ __forceinline__ void zero_dead_group(const fp8_quant_args &p, int64_t r, int64_t c0, int64_t g,
                                                int lane) {
    for (int j = 0; j < 4; j++) {
        const int64_t c = c0 + lane + 32 * j;
        if (c < p.cols) p.codes[r * p.codes_ld + c] = 0;
    }
    if (lane == 0) p.scales[r * p.scale_rs + g * p.scale_ks] = 0.0f;
}

// FP8_ROW128: one warp per (row, group); lane holds columns c0 + lane + 32 j, j < 4.
__global__ void quant_row128_kernel(const fp8_quant_args p) {
    const int64_t groups = (p.cols + 127) / 128, live = live_rows_of(p), items = live * groups;
    const int lane = threadIdx.x & 31, warps_per_block = blockDim.x >> 5;
    const int64_t warps = (int64_t)gridDim.x * warps_per_block;
    for (int64_t item = (int64_t)blockIdx.x * warps_per_block + (threadIdx.x >> 5); item < items; item += warps) {
        const int64_t r = item / groups, g = item % groups, c0 = g * 128;
        if (row_kind(p, r) < 0) { // the same for the whole warp
            zero_dead_group(p, r, c0, g, lane);
            continue;
        }
        float v[4];
        uint32_t amax = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t c = c0 + lane + 32 * j;
            v[j] = c < p.cols ? load_as_float(p.src, r * p.src_ld + c, p.src_dtype) : 0.0f;
            amax = max(amax, finite_abs_bits(v[j]));
        }
        amax = __reduce_max_sync(0xFFFFFFFFu, amax);
        const float s = fp8_scale(amax);
        const fp8_divisor div = fp8_divisor_of(s);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t c = c0 + lane + 32 * j;
            if (c < p.cols) p.codes[r * p.codes_ld + c] = fp8_encode_fast(v[j], div);
        }
        if (lane == 0) p.scales[r * p.scale_rs + g * p.scale_ks] = s;
    }
}

// FP8_TENSOR, pass 1: amax of each tensor (routed/plain rows, fused shared rows) into
// p.amax[kind]. One block per row (grid-stride over rows), one atomicMax per warp.
__global__ void amax_kernel(const fp8_quant_args p) {
    const int64_t live = live_rows_of(p);
    uint32_t amax[2] = {0u, 0u};
    for (int64_t r = blockIdx.x; r < live; r += gridDim.x) {
        const int kind = row_kind(p, r);
        if (kind < 0) continue;
        uint32_t m = 0;
        for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x)
            m = max(m, finite_abs_bits(load_as_float(p.src, r * p.src_ld + c, p.src_dtype)));
        amax[kind] = max(amax[kind], m);
    }
    for (int kind = 0; kind < 2; kind++) {
        const uint32_t m = __reduce_max_sync(0xFFFFFFFFu, amax[kind]);
        if ((threadIdx.x & 31) == 0 && m > 0) atomicMax(&p.amax[kind], m);
    }
}

// FP8_TENSOR, pass 2: codes with the scale of the row's tensor; the scale itself to scales[0]
// (no plan) or to each live plan row's scales[r].
__global__ void quant_tensor_kernel(const fp8_quant_args p) {
    const int64_t live = live_rows_of(p);
    for (int64_t r = blockIdx.x; r < live; r += gridDim.x) {
        const int kind = row_kind(p, r);
        if (kind < 0) {
            for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) p.codes[r * p.codes_ld + c] = 0;
            if (threadIdx.x == 0) p.scales[r] = 0.0f;
            continue;
        }
        const float s = fp8_scale(p.amax[kind]);
        const fp8_divisor div = fp8_divisor_of(s);
        for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
            const float v = load_as_float(p.src, r * p.src_ld + c, p.src_dtype);
            p.codes[r * p.codes_ld + c] = fp8_encode_fast(v, div);
        }
        if (threadIdx.x == 0 && (p.sorted_ids || r == 0)) p.scales[p.sorted_ids ? r : 0] = s;
    }
}

unsigned capped_grid(int64_t blocks, int64_t cap) {
    return (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

} // namespace

cudaError_t fp8_quantize_launch(const fp8_quant_args *p, cudaStream_t stream) {
    if (p->rows == 0 || p->cols == 0) return cudaSuccess;
    const int threads = 256;
    const int64_t cap = 132 * 16; // enough blocks to fill an H200 several times over
    if (p->format == MOE_FORMAT_FP8_ROW128) {
        const int64_t warps = p->rows * ((p->cols + 127) / 128);
        quant_row128_kernel<<<capped_grid((warps + 7) / 8, cap), threads, 0, stream>>>(*p);
        return cudaGetLastError();
    }
    cudaError_t err = cudaMemsetAsync(p->amax, 0, (p->sorted_ids ? 2 : 1) * sizeof(uint32_t), stream);
    if (err != cudaSuccess) return err;
    amax_kernel<<<capped_grid(p->rows, cap), threads, 0, stream>>>(*p);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    quant_tensor_kernel<<<capped_grid(p->rows, cap), threads, 0, stream>>>(*p);
    return cudaGetLastError();
}

fp8_quant_args fp8_quant_args_by_row(int format, const void *src, moe_dtype dtype, int64_t ld, int64_t rows,
                                     int64_t cols, uint8_t *codes, float *scales, uint32_t *amax) {
    fp8_quant_args q;
    memset(&q, 0, sizeof q);
    q.format = format;
    q.src = src;
    q.src_dtype = dtype;
    q.src_ld = ld;
    q.rows = rows;
    q.cols = cols;
    q.codes = codes;
    q.codes_ld = cols;
    q.scales = scales;
    q.scale_rs = (cols + 127) / 128; // [rows, ceil(cols/128)]
    q.scale_ks = 1;
    q.amax = amax;
    return q;
}

extern "C" uint8_t moe__cuda_fp8_encode_host(float x, float s) { return fp8_encode(x, s); }
extern "C" uint8_t moe__cuda_fp8_encode_fast_host(float x, float s) { return fp8_encode_fast(x, fp8_divisor_of(s)); }

extern "C" moe_status moe__cuda_fp8_quantize(moe_context_t *ctx, moe_format format, const void *x, moe_dtype dtype,
                                             int64_t rows, int64_t cols, int64_t ld, uint8_t *codes, float *scales,
                                             uint32_t *amax, void *stream) {
    static const char fn[] = "moe__cuda_fp8_quantize";
    if (format != MOE_FORMAT_FP8_ROW128 && format != MOE_FORMAT_FP8_TENSOR)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: format = %s, expected fp8-row128 or fp8-tensor", fn,
                          moe_format_name(format));
    if (dtype != MOE_DTYPE_F32 && dtype != MOE_DTYPE_F16 && dtype != MOE_DTYPE_BF16)
        return moe__error(ctx, MOE_STATUS_DTYPE_MISMATCH, "%s: dtype = %s, expected f32, f16 or bf16", fn,
                          moe_dtype_name(dtype));
    if (rows < 0 || cols < 0 || ld < cols)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: rows = %lld, cols = %lld, ld = %lld: expected rows, "
                          "cols >= 0 and ld >= cols", fn, (long long)rows, (long long)cols, (long long)ld);
    if (rows * cols > 0 && (!x || !codes || !scales || (format == MOE_FORMAT_FP8_TENSOR && !amax)))
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: x, codes, scales (and amax for fp8-tensor) must be set",
                          fn);
    const fp8_quant_args p = fp8_quant_args_by_row(format, x, dtype, ld, rows, cols, codes, scales, amax);
    return cuda_status(ctx, fp8_quantize_launch(&p, (cudaStream_t)stream), "the fp8 quantiser");
}
