// The v1 GEMMs' shared device pieces (gemm.cu's bf16/f16 kernels and gemm_fp8_v1.cu's FP8
// kernel): the plan row's id and the epilogue from the mma accumulator fragments.
#ifndef MOEFUSE_CUDA_GEMM_EPILOGUE_CUH
#define MOEFUSE_CUDA_GEMM_EPILOGUE_CUH

#include "gemm.cuh"

namespace {

// The plan row's id (see gemm_args): sorted_ids, or the identity plan of a separate shared
// expert (ids padding + 1 + r).
__device__ __forceinline__ int64_t row_id(const gemm_args &p, int64_t r) {
    if (p.sorted_ids) return p.sorted_ids[r];
    int64_t padding = p.tokens * p.top_k;
    return r < p.rows ? padding + 1 + r : padding;
}

// Epilogue of a warp's MI x NJ mma tiles at rows row0.., columns col0.. . Thread holds, per
// mma tile, rows g and g+8 and columns 2q, 2q+1 (g = lane/4, q = lane%4): with W13's rows
// interleaved, columns 2q and 2q+1 are one (gate, up) pair.
template <typename T, int MI, int NJ>
__device__ __forceinline__ void epilogue(const gemm_args &p, const float (&acc)[MI][NJ][4], int64_t expert,
                                         int64_t row0, int64_t col0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int64_t padding_id = p.tokens * p.top_k;
    const float *bias = p.bias ? p.bias + expert * p.n : nullptr;
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int64_t r = row0 + mi * 16 + g + half * 8;
            const int64_t id = row_id(p, r);
            if (id == padding_id) continue;
            const bool routed = id < padding_id;
            if (p.mode == GEMM_UP) {
                const float in_scale = routed && p.weight_on_input ? p.topk_weights[id] : 1.0f;
                T *out_row = (T *)p.out + r * p.ldo;
#pragma unroll
                for (int nj = 0; nj < NJ; nj++) {
                    const int64_t col = col0 + nj * 8 + 2 * q;
                    if (col >= p.n) continue;
                    // x.(w W)^T = w (x W^T): the input weight scales the accumulator, before
                    // the bias, which is the same product as scaling the gathered A row.
                    float v0 = acc[mi][nj][half * 2] * in_scale, v1 = acc[mi][nj][half * 2 + 1] * in_scale;
                    if (bias) {
                        v0 += bias[col];
                        if (col + 1 < p.n) v1 += bias[col + 1];
                    }
                    if (p.activation == MOE_ACT_RELU2) {
                        out_row[col] = from_float<T>(glu_activate(MOE_ACT_RELU2, 0.0f, 0.0f, v0, 0.0f));
                        if (col + 1 < p.n) out_row[col + 1] = from_float<T>(glu_activate(MOE_ACT_RELU2, 0.0f, 0.0f, v1, 0.0f));
                    } else {
                        out_row[col >> 1] = from_float<T>(glu_activate(p.activation, p.act_alpha, p.act_limit, v0, v1));
                    }
                }
            } else {
                float w;
                if (routed) w = p.weight_on_input ? 1.0f : p.topk_weights[id];
                else w = p.shared_scale ? p.shared_scale[id - padding_id - 1] : 1.0f;
                const int64_t out_row_index = routed ? id : id - 1;
                // bf16 rows only behind a 16-bit A2 (T = float is the FP8 kernel's fp32 A2: its
                // rows stay fp32, and this test folds away there).
                const bool rows_bf16 = sizeof(T) == 2 && p.out_bf16;
                float *out_row = (float *)p.out + out_row_index * p.ldo;
                __nv_bfloat16 *out_row_bf16 = (__nv_bfloat16 *)p.out + out_row_index * p.ldo;
#pragma unroll
                for (int nj = 0; nj < NJ; nj++) {
                    const int64_t col = col0 + nj * 8 + 2 * q;
                    if (col >= p.n) continue;
                    float v0 = acc[mi][nj][half * 2], v1 = acc[mi][nj][half * 2 + 1];
                    if (bias) {
                        v0 += bias[col];
                        v1 += bias[col + 1];
                    }
                    // n (= H) is a multiple of 8, so col + 1 < n and the pair is aligned.
                    if (rows_bf16)
                        *(__nv_bfloat162 *)(out_row_bf16 + col) = __floats2bfloat162_rn(v0 * w, v1 * w);
                    else
                        *(float2 *)(out_row + col) = make_float2(v0 * w, v1 * w);
                }
            }
        }
}

} // namespace

#endif
