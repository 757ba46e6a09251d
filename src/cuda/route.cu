// Routing on the GPU: router logits, top-k selection, the shared-expert gate.
//
// The CPU oracle (src/cpu/route.c, src/cpu/forward.c) computes logits and scores in double
// and rounds once to fp32; these kernels do the same arithmetic in the same precision, so the
// selected experts match the CPU's exactly (a different summation order in double almost
// never changes the fp32 rounding), with the same total order: larger first, NaN behind every
// number, ties to the lower index.
#include "route.cuh"

#include <math.h>

namespace {

// ---- router logits = x . Wr^T (+ b), double accumulation, fp32 out ----------------------
#define RL_TILE 64
#define RL_BK 16
#define RL_THREADS 256

__global__ void __launch_bounds__(RL_THREADS)
router_logits_kernel(const void *x, int x_dtype, int64_t x_stride, const float *wr, const float *br, int64_t T,
                     int64_t E, int64_t H, float *logits) {
    __shared__ float xs[RL_BK][RL_TILE + 1];
    __shared__ float ws[RL_BK][RL_TILE + 1];
    pdl_wait();
    pdl_launch_dependents();
    const int64_t t0 = (int64_t)blockIdx.x * RL_TILE, e0 = (int64_t)blockIdx.y * RL_TILE;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    double acc[4][4] = {};
    for (int64_t h0 = 0; h0 < H; h0 += RL_BK) {
        // 64 rows x 16 columns of each operand: 4 elements per thread, columns fastest.
        for (int i = tid; i < RL_TILE * RL_BK; i += RL_THREADS) {
            int r = i / RL_BK, c = i % RL_BK;
            int64_t h = h0 + c, t = t0 + r, e = e0 + r;
            xs[c][r] = (t < T && h < H) ? load_as_float(x, t * x_stride + h, x_dtype) : 0.0f;
            ws[c][r] = (e < E && h < H) ? wr[e * H + h] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int c = 0; c < RL_BK; c++) {
            double a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = xs[c][ty * 4 + i];
                b[i] = ws[c][tx * 4 + i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int64_t t = t0 + ty * 4 + i, e = e0 + tx * 4 + j;
            if (t < T && e < E) logits[t * E + e] = (float)(acc[i][j] + (br ? (double)br[e] : 0.0));
        }
}

// ---- top-k ------------------------------------------------------------------------------
#define ROUTE_THREADS 128

// a ranks ahead of b (src/cpu/route.c's order).
__device__ __forceinline__ bool ranks_ahead(float va, int ia, float vb, int ib) {
    bool a_nan = isnan(va), b_nan = isnan(vb);
    if (a_nan != b_nan) return b_nan;
    if (!a_nan && va != vb) return va > vb;
    return ia < ib;
}

// The better of two candidates (index -1 = none).
__device__ __forceinline__ void take_better(float &v, int &i, float v2, int i2) {
    if (i2 >= 0 && (i < 0 || ranks_ahead(v2, i2, v, i))) {
        v = v2;
        i = i2;
    }
}

// Block-wide best candidate; every thread gets the answer. `red_v/red_i` hold one slot per warp.
__device__ void block_best(float &v, int &i, float *red_v, int *red_i) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) take_better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    __syncthreads(); // earlier readers of red_* are done
    if (lane == 0) {
        red_v[warp] = v;
        red_i[warp] = i;
    }
    __syncthreads();
    v = red_v[0];
    i = red_i[0];
    for (int w = 1; w < warps; w++) take_better(v, i, red_v[w], red_i[w]);
}

__device__ __forceinline__ float score_of(int score_fn, double l, double softmax_max, double softmax_sum) {
    switch (score_fn) {
    case MOE_SCORE_SOFTMAX: return (float)(exp(l - softmax_max) / softmax_sum);
    case MOE_SCORE_SIGMOID: return (float)(1.0 / (1.0 + exp(-l)));
    default: {
        double softplus = l > 20.0 ? l : log1p(exp(l));
        return (float)sqrt(softplus);
    }
    }
}

// One block per token. Shared memory: score[E], sel[E] floats, eligible[E] bytes, and for
// softmax exps[E] doubles (summed in index order by one thread, as the CPU sums).
__global__ void __launch_bounds__(ROUTE_THREADS) route_kernel(const route_args p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    pdl_wait();
    pdl_launch_dependents();
    const int E = (int)p.num_experts, k = (int)p.top_k;
    double *exps = (double *)smem_raw;
    float *score = (float *)(exps + (p.score == MOE_SCORE_SOFTMAX ? E : 0));
    float *sel = score + E;
    unsigned char *eligible = (unsigned char *)(sel + E);
    __shared__ float red_v[ROUTE_THREADS / 32];
    __shared__ int red_i[ROUTE_THREADS / 32];
    __shared__ double softmax_sum_s;
    __shared__ int picks[64];

    const int64_t t = blockIdx.x;
    const float *lrow = p.logits + t * p.logits_stride0;
    const int tid = threadIdx.x;

    // Scores. Softmax: max over the numbers (NaN skipped as `l > max` skips it), then the sum
    // of exp(l - max) in double in index order.
    double smax = 0.0, ssum = 1.0;
    if (p.score == MOE_SCORE_SOFTMAX) {
        float m = -INFINITY;
        for (int e = tid; e < E; e += blockDim.x) {
            float l = lrow[e * p.logits_stride1];
            if (l > m) m = l;
        }
        // Max-reduce with the same `>` rule (NaN never enters m).
        for (int o = 16; o > 0; o >>= 1) {
            float other = __shfl_xor_sync(0xffffffffu, m, o);
            if (other > m) m = other;
        }
        if ((tid & 31) == 0) red_v[tid >> 5] = m;
        __syncthreads();
        m = red_v[0];
        for (int w = 1; w < (int)(blockDim.x >> 5); w++)
            if (red_v[w] > m) m = red_v[w];
        smax = m;
        for (int e = tid; e < E; e += blockDim.x) exps[e] = exp((double)lrow[e * p.logits_stride1] - smax);
        __syncthreads();
        if (tid == 0) {
            double s = 0.0;
            for (int e = 0; e < E; e++) s += exps[e];
            softmax_sum_s = s;
        }
        __syncthreads();
        ssum = softmax_sum_s;
    }
    for (int e = tid; e < E; e += blockDim.x) {
        float s = score_of(p.score, (double)lrow[e * p.logits_stride1], smax, ssum);
        score[e] = s;
        sel[e] = p.correction_bias ? s + p.correction_bias[e] : s;
        eligible[e] = 1;
    }
    __syncthreads();

    // Group-limited selection: group scores in parallel (one thread per group), then one
    // thread keeps the topk_group best (groups are few), then every expert learns its group's fate.
    if (p.n_group > 1) {
        const int G = (int)p.n_group, gs = E / G;
        float *group_score = (float *)(eligible + E + (16 - E % 16) % 16); // E rounded up to 16 bytes: float-aligned
        unsigned char *group_kept = (unsigned char *)(group_score + G);
        for (int g = tid; g < G; g += blockDim.x) {
            // src/cpu/route.c's group_score: sum of the two best sel with a correction bias, else the best.
            int best = -1, second = -1;
            float bv = 0.0f, sv = 0.0f;
            for (int e = g * gs; e < (g + 1) * gs; e++) {
                float v = sel[e];
                if (best < 0 || ranks_ahead(v, e, bv, best)) {
                    second = best;
                    sv = bv;
                    best = e;
                    bv = v;
                } else if (second < 0 || ranks_ahead(v, e, sv, second)) {
                    second = e;
                    sv = v;
                }
            }
            group_score[g] = (p.correction_bias && second >= 0) ? bv + sv : bv;
            group_kept[g] = 0;
        }
        __syncthreads();
        if (tid == 0) {
            for (int rank = 0; rank < (int)p.topk_group; rank++) {
                int pick = -1;
                float pv = 0.0f;
                for (int g = 0; g < G; g++)
                    if (!group_kept[g]) take_better(pv, pick, group_score[g], g);
                if (pick >= 0) group_kept[pick] = 1;
            }
        }
        __syncthreads();
        for (int e = tid; e < E; e += blockDim.x) eligible[e] = group_kept[e / gs];
        __syncthreads();
    }

    // Top-k: k rounds of a block-wide best over the eligible experts not yet chosen.
    for (int j = 0; j < k; j++) {
        float v = 0.0f;
        int i = -1;
        for (int e = tid; e < E; e += blockDim.x)
            if (eligible[e]) take_better(v, i, sel[e], e);
        block_best(v, i, red_v, red_i);
        if (tid == 0) {
            picks[j] = i;
            if (i >= 0) eligible[i] = 0;
        }
        __syncthreads();
    }

    // Weights from the unbiased scores, summed in slot order in double.
    if (tid == 0) {
        double sum = 0.0;
        for (int j = 0; j < k; j++) sum += picks[j] >= 0 ? (double)score[picks[j]] : 0.0;
        for (int j = 0; j < k; j++) {
            int e = picks[j];
            double w = e >= 0 ? (double)score[e] : 0.0;
            if (p.renormalize && sum != 0.0) w /= sum;
            p.ids[t * k + j] = e;
            p.weights[t * k + j] = (float)(w * (double)p.routed_scale);
        }
    }
}

// ---- shared-expert gate: sigmoid(x . w_sg) per token, double dot, one warp per token -----
__global__ void shared_gate_kernel(const void *x, int x_dtype, int64_t x_stride, const float *wg, int64_t T,
                                   int64_t H, float *gate) {
    pdl_wait();
    pdl_launch_dependents();
    const int64_t t = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (t >= T) return;
    double s = 0.0;
    for (int64_t h = lane; h < H; h += 32) s += (double)load_as_float(x, t * x_stride + h, x_dtype) * wg[h];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) gate[t] = (float)(1.0 / (1.0 + exp(-s)));
}

} // namespace

size_t route_smem_bytes(int64_t num_experts, int score, int64_t n_group) {
    const int64_t E = num_experts, eligible_padded = E + (16 - E % 16) % 16;
    const int64_t groups = n_group > 1 ? n_group : 0;
    return (size_t)(E * ((score == MOE_SCORE_SOFTMAX ? 8 : 0) + 4 + 4) + eligible_padded + groups * 5);
}

cudaError_t route_init(void) {
    return cudaFuncSetAttribute(route_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ROUTE_MAX_SMEM);
}

cudaError_t router_logits_launch(const void *x, moe_dtype x_dtype, int64_t x_stride, const float *wr,
                                 const float *br, int64_t T, int64_t E, int64_t H, float *logits, cudaStream_t stream) {
    if (T == 0) return cudaSuccess;
    dim3 grid((unsigned)ceil_div64(T, RL_TILE), (unsigned)ceil_div64(E, RL_TILE));
    return launch_kernel(router_logits_kernel, grid, RL_THREADS, 0, stream, x, (int)x_dtype, x_stride, wr, br, T, E, H,
                         logits);
}

cudaError_t route_launch(const route_args *args, int64_t T, cudaStream_t stream) {
    if (T == 0) return cudaSuccess;
    size_t smem = route_smem_bytes(args->num_experts, args->score, args->n_group);
    return launch_kernel(route_kernel, (unsigned)T, ROUTE_THREADS, smem, stream, *args);
}

cudaError_t shared_gate_launch(const void *x, moe_dtype x_dtype, int64_t x_stride, const float *wg, int64_t T,
                               int64_t H, float *gate, cudaStream_t stream) {
    if (T == 0) return cudaSuccess;
    const int warps = 8;
    return launch_kernel(shared_gate_kernel, (unsigned)ceil_div64(T, warps), warps * 32, 0, stream, x, (int)x_dtype,
                         x_stride, wg, T, H, gate);
}
