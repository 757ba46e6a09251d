// The FP8 activation quantiser of the w8a8 forward: x (once per token, before the GEMMs) and
// A2 (the GLU output, before GEMM2) to e4m3 codes with fp32 scales, on the device, sync-free.
// The rounding rule, shared with the Hopper FP8 GEMM1 epilogue that quantises A2 itself, is in
// fp8_codec.cuh: both encode with fp8_encode_fast (the GPU suite's quantiser cases, double-
// rounding traps included, check its codes bit for bit against the CPU's).
//
// FP8_ROW128: one warp per (row, four 128-column groups). FP8_TENSOR: an amax pass (atomicMax of the
// bits of |x|, which order as the values do; order-free, so deterministic) into a zeroed device
// word, then the quantise pass reads it: nothing goes back to the host.
#include <stdlib.h>
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

// The scatter (fp8_quant_args's plan_row_of): lane j < top_k's destination is slot j's plan row of
// source row r, lane top_k's the fused shared expert's row, -1 for none. Loaded beside the row's
// values, then broadcast by shuffles (S3 of session 18: a load per destination inside the store
// loop left the pass at ~1.5 TB/s).
__device__ __forceinline__ int64_t scatter_dest(const fp8_quant_args &p, int64_t r, int lane) {
    int64_t dest = -1;
    if (lane < p.top_k) dest = p.plan_row_of[r * p.top_k + lane];
    else if (lane == p.top_k && p.shared_row0) dest = *p.shared_row0 + r;
    return dest;
}

// Stores a lane's codes `word` (column c; `in`: inside the row) into every destination row of the
// warp's source row (dest: scatter_dest's). Every lane of the warp calls it.
template <typename W>
__device__ __forceinline__ void scatter_codes(const fp8_quant_args &p, int64_t dest, int64_t c, bool in, W word) {
    const int dests = (int)p.top_k + (p.shared_row0 ? 1 : 0);
    for (int j = 0; j < dests; j++) {
        const int64_t row = __shfl_sync(0xFFFFFFFFu, dest, j);
        if (row >= 0 && in) *(W *)(p.plan_codes + row * p.codes_ld + c) = word;
    }
}

// Work is split into (row, span of columns) items whose loads a thread issues together, so that
// a few wide live rows (decode: 1-2 rows of I = 14336) spread over many warps with several loads
// in flight each. (Before session 9 a block walked a whole row one load at a time: mixtral's A2
// amax pass at T = 1 took 25 us, its quantise pass 16 us; K2's ncu.)
constexpr int QUANT_THREADS = 256;
constexpr int TENSOR_SPAN = QUANT_THREADS * 4; // columns per item of the fp8-tensor passes (a block's)

// A padding row of a plan (dead, but inside a block the GEMM reads) gets scale 0 and its codes
// are not written: every GEMM drops a padding row's products (its output row, or with the
// operands swapped its column, is not stored, and no other row's value depends on it), so
// whatever bytes the workspace holds there reach nothing. (Zeroing them cost more than the live
// rows at decode: deepseek-v3 T = 64 has 512 live rows in 7104 plan rows of 32-row blocks.)
// The GPU suite poisons the workspace before a case's first run.

// Four adjacent source elements as floats (one 16-byte load for fp32, 8 bytes for 16-bit types).
template <typename S> __device__ __forceinline__ void load4_as_float(const S *src, float *v);
template <> __device__ __forceinline__ void load4_as_float<float>(const float *src, float *v) {
    const float4 q = *(const float4 *)src;
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
template <> __device__ __forceinline__ void load4_as_float<__nv_bfloat16>(const __nv_bfloat16 *src, float *v) {
    const uint2 q = *(const uint2 *)src;
    const float2 a = __bfloat1622float2(*(const __nv_bfloat162 *)&q.x), b = __bfloat1622float2(*(const __nv_bfloat162 *)&q.y);
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
template <> __device__ __forceinline__ void load4_as_float<__half>(const __half *src, float *v) {
    const uint2 q = *(const uint2 *)src;
    const float2 a = __half22float2(*(const __half2 *)&q.x), b = __half22float2(*(const __half2 *)&q.y);
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}

// FP8_ROW128: one warp per (row, GPI groups) item; lane holds columns g * 128 + lane + 32 j,
// j < 4, of each group g, all loaded before the first group's reduction. GPI = 1 where the
// items of one group take the GPU's warps in about one pass, else 4: a warp's groups are a
// serial chain of reductions and encodes (x at T = 1 took 5.6 us with GPI = 4 against 3.0 with
// one group; GPI = 16, tried in K5, added ~14 us to gpt-oss's and deepseek-v3's T = 1 forward,
// whose few live A2 rows each became one warp's 16-group chain).
// VEC (the default where fp8_row128_vec_ok, for items of 4 groups only where the 16-wide form
// below does not apply; MOEFUSE_FP8_QUANT=scalar forces the scalar form): lane holds the 4
// adjacent columns g * 128 + 4 lane .. + 3 instead, loaded as one S[4] and stored as one 4-byte word of codes: a
// quarter of the loads and stores (S5 of session 16: the scalar form moves qwen3-30b-a3b's A2 at
// ~2 TB/s, half of what the DRAM gives). The codes are the same bit for bit: a code depends only on
// its value and its group's scale, and the group's amax is the same maximum over the same values.
// Measured in S1 of session 17 (bench/results/2026-12-04-h200-session17/callS1): the suite's
// --quick passes with it; ncu qwen3-30b-a3b T=16384: A2 254 -> 209 us, x 81 -> 63 us; FP8 forward
// vec/scalar 0.95-1.00 over PERF.md's shapes at T = 512, 4096, 16384.
// SCATTER (VEC only): x straight into plan order, fp8_quant_args's plan_row_of (the permute of the
// quantised rows folded into the quantiser: x is read once and each code written where GEMM1 reads it).
template <int GPI, bool VEC = false, typename S = float, bool SCATTER = false>
__global__ void __launch_bounds__(QUANT_THREADS) quant_row128_kernel(const fp8_quant_args p) {
    static_assert(!SCATTER || VEC, "the scatter stores whole words of codes");
    pdl_wait();
    pdl_launch_dependents();
    const int64_t groups = (p.cols + 127) / 128, per_row = (groups + GPI - 1) / GPI;
    const int64_t items = live_rows_of(p) * per_row;
    const int lane = threadIdx.x & 31, warps_per_block = blockDim.x >> 5;
    const int64_t warps = (int64_t)gridDim.x * warps_per_block;
    for (int64_t item = (int64_t)blockIdx.x * warps_per_block + (threadIdx.x >> 5); item < items; item += warps) {
        const int64_t r = item / per_row, g0 = item % per_row * GPI;
        const int64_t g1 = g0 + GPI < groups ? g0 + GPI : groups;
        if (row_kind(p, r) < 0) { // the same for the whole warp
            if (lane < g1 - g0) p.scales[r * p.scale_rs + (g0 + lane) * p.scale_ks] = 0.0f;
            continue;
        }
        int64_t dest = -1;
        if constexpr (SCATTER) dest = scatter_dest(p, r, lane);
        float v[GPI][4];
#pragma unroll
        for (int i = 0; i < GPI; i++) {
            if constexpr (VEC) {
                const int64_t c = (g0 + i) * 128 + 4 * lane; // cols % 4 == 0: all four in or all out
                if (c < p.cols) load4_as_float<S>((const S *)p.src + r * p.src_ld + c, v[i]);
                else v[i][0] = v[i][1] = v[i][2] = v[i][3] = 0.0f;
            } else {
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int64_t c = (g0 + i) * 128 + lane + 32 * j;
                    v[i][j] = c < p.cols ? load_as_float(p.src, r * p.src_ld + c, p.src_dtype) : 0.0f;
                }
            }
        }
#pragma unroll
        for (int i = 0; i < GPI; i++) {
            const int64_t g = g0 + i;
            if (g >= g1) break; // the same for the whole warp
            uint32_t amax = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) amax = max(amax, finite_abs_bits(v[i][j]));
            amax = __reduce_max_sync(0xFFFFFFFFu, amax);
            const float s = fp8_scale(amax);
            const fp8_divisor div = fp8_divisor_of(s);
            if constexpr (VEC) {
                const int64_t c = g * 128 + 4 * lane;
                uint32_t word = 0; // little-endian: column c's code in the lowest byte
#pragma unroll
                for (int j = 0; j < 4; j++) word |= (uint32_t)fp8_encode_fast(v[i][j], div) << (8 * j);
                if (c < p.cols && (!SCATTER || p.codes)) *(uint32_t *)(p.codes + r * p.codes_ld + c) = word;
                if constexpr (SCATTER) {
                    if (dest >= 0) p.plan_scales[g * p.plan_scale_ld + dest] = s; // each lane its slot's
                    scatter_codes(p, dest, c, c < p.cols, word);
                }
            } else {
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int64_t c = g * 128 + lane + 32 * j;
                    if (c < p.cols) p.codes[r * p.codes_ld + c] = fp8_encode_fast(v[i][j], div);
                }
            }
            if (lane == 0 && (!SCATTER || p.codes)) p.scales[r * p.scale_rs + g * p.scale_ks] = s;
        }
    }
}

// Two adjacent 16-bit source elements (one 32-bit word) as floats.
template <typename S> __device__ __forceinline__ float2 word_as_float2(uint32_t w);
template <> __device__ __forceinline__ float2 word_as_float2<__nv_bfloat16>(uint32_t w) {
    return __bfloat1622float2(*(const __nv_bfloat162 *)&w);
}
template <> __device__ __forceinline__ float2 word_as_float2<__half>(uint32_t w) {
    return __half22float2(*(const __half2 *)&w);
}

// Sixteen adjacent source elements as floats (16-byte loads: two for 16-bit types, four for fp32).
template <typename S> __device__ __forceinline__ void load16_as_float(const S *src, float *v) {
    if constexpr (sizeof(S) == 4) {
#pragma unroll
        for (int i = 0; i < 4; i++) load4_as_float<S>(src + 4 * i, v + 4 * i);
    } else {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint4 q = ((const uint4 *)src)[h];
            const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float2 f = word_as_float2<S>(w[i]);
                v[8 * h + 2 * i] = f.x, v[8 * h + 2 * i + 1] = f.y;
            }
        }
    }
}

// The 16-wide form (where fp8_row128_v16_ok; items of 4 groups): lane l holds the 16 adjacent
// columns of group l / 8 of its item, 16 (l % 8) .. + 15, so the warp's four groups are loaded,
// reduced (over each group's 8 lanes) and stored at once, 16 codes a lane in one 16-byte store. The
// 4-wide form's stores are 4 bytes a lane and its groups a serial chain: S4 of session 18 measured
// its scatter at ~1.7 TB/s on deepseek-v3's x. Same codes and scales bit for bit (the same values
// and group maxima). SCATTER as quant_row128_kernel's: an item is 4 groups of one row, whose lanes
// carry the row's destinations. Otherwise an item is the next 4 of all rows' groups in a row
// (row-major), which may span two rows, so that a row's group count need not be a multiple of 4:
// qwen3-30b-a3b's A2 has 6, and items of one row left a quarter of the lanes idle (its A2 pass at
// T = 16384 under ncu: 208 -> 172 us; bench/results/2026-12-04-h200-session23/callX6).
template <typename S, bool SCATTER>
__global__ void __launch_bounds__(QUANT_THREADS) quant_row128_v16_kernel(const fp8_quant_args p) {
    pdl_wait();
    pdl_launch_dependents();
    const int64_t groups = (p.cols + 127) / 128, per_row = (groups + 3) / 4, live = live_rows_of(p);
    const int64_t items = SCATTER ? live * per_row : (live * groups + 3) / 4;
    const int lane = threadIdx.x & 31, warps_per_block = blockDim.x >> 5;
    const int64_t warps = (int64_t)gridDim.x * warps_per_block;
    for (int64_t item = (int64_t)blockIdx.x * warps_per_block + (threadIdx.x >> 5); item < items; item += warps) {
        int64_t r, g, g0 = 0;
        if (SCATTER) {
            r = item / per_row;
            g0 = item % per_row * 4;
            g = g0 + (lane >> 3);
        } else {
            const int64_t f = item * 4 + (lane >> 3);
            r = f / groups;
            g = f % groups;
        }
        const bool on = SCATTER ? g < groups : r < live; // this lane's 8-lane set has a group
        const int64_t c = g * 128 + 16 * (lane & 7);
        const bool leader = (lane & 7) == 0 && on; // writes its group's scale
        if (SCATTER && row_kind(p, r) < 0) { // the same for the whole warp
            if (leader) p.scales[r * p.scale_rs + g * p.scale_ks] = 0.0f;
            continue;
        }
        // Not SCATTER: a padding row's group (the same for its 8 lanes) gets scale 0, no codes.
        const bool dead = !SCATTER && on && row_kind(p, r) < 0;
        const bool in = on && !dead && c < p.cols; // cols % 16 == 0: all 16 columns in or all out
        int64_t dest = -1;
        if constexpr (SCATTER) dest = scatter_dest(p, r, lane);
        float v[16];
        if (in) load16_as_float<S>((const S *)p.src + r * p.src_ld + c, v);
        else
#pragma unroll
            for (int j = 0; j < 16; j++) v[j] = 0.0f;
        uint32_t amax = 0;
#pragma unroll
        for (int j = 0; j < 16; j++) amax = max(amax, finite_abs_bits(v[j]));
#pragma unroll
        for (int m = 1; m < 8; m <<= 1) amax = max(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, m));
        const float s = fp8_scale(amax);
        const fp8_divisor div = fp8_divisor_of(s);
        uint32_t w[4] = {0, 0, 0, 0}; // little-endian: column c + 4 i + j's code in byte j of w[i]
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) w[i] |= (uint32_t)fp8_encode_fast(v[4 * i + j], div) << (8 * j);
        const uint4 codes = make_uint4(w[0], w[1], w[2], w[3]);
        if (!SCATTER || p.codes) {
            if (in) *(uint4 *)(p.codes + r * p.codes_ld + c) = codes;
            if (leader) p.scales[r * p.scale_rs + g * p.scale_ks] = dead ? 0.0f : s;
        }
        if constexpr (SCATTER) {
#pragma unroll
            for (int q = 0; q < 4; q++) { // each lane its slot's scale of each group
                const float sq = __shfl_sync(0xFFFFFFFFu, s, 8 * q);
                if (dest >= 0 && g0 + q < groups) p.plan_scales[(g0 + q) * p.plan_scale_ld + dest] = sq;
            }
            scatter_codes(p, dest, c, c < p.cols, codes);
        }
    }
}

template <bool SCATTER> cudaError_t launch_row128_v16(const fp8_quant_args *p, unsigned grid, cudaStream_t stream) {
    if (p->src_dtype == MOE_DTYPE_BF16)
        return launch_kernel(quant_row128_v16_kernel<__nv_bfloat16, SCATTER>, grid, QUANT_THREADS, 0, stream, *p);
    if (p->src_dtype == MOE_DTYPE_F16)
        return launch_kernel(quant_row128_v16_kernel<__half, SCATTER>, grid, QUANT_THREADS, 0, stream, *p);
    return launch_kernel(quant_row128_v16_kernel<float, SCATTER>, grid, QUANT_THREADS, 0, stream, *p);
}

template <int GPI, bool SCATTER>
cudaError_t launch_row128_vec(const fp8_quant_args *p, unsigned grid, cudaStream_t stream) {
    if (p->src_dtype == MOE_DTYPE_BF16)
        return launch_kernel(quant_row128_kernel<GPI, true, __nv_bfloat16, SCATTER>, grid, QUANT_THREADS, 0, stream,
                             *p);
    if (p->src_dtype == MOE_DTYPE_F16)
        return launch_kernel(quant_row128_kernel<GPI, true, __half, SCATTER>, grid, QUANT_THREADS, 0, stream, *p);
    return launch_kernel(quant_row128_kernel<GPI, true, float, SCATTER>, grid, QUANT_THREADS, 0, stream, *p);
}

// The TENSOR_SPAN columns of item (r, c0) that thread t loads: c0 + t + QUANT_THREADS j.
__device__ __forceinline__ void load_span(const fp8_quant_args &p, int64_t r, int64_t c0, float *v) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int64_t c = c0 + threadIdx.x + QUANT_THREADS * j;
        v[j] = c < p.cols ? load_as_float(p.src, r * p.src_ld + c, p.src_dtype) : 0.0f;
    }
}

// FP8_TENSOR, pass 1: amax of each tensor (routed/plain rows, fused shared rows) into
// p.amax[kind]. One block per (row, span) item (grid-stride), one atomicMax per warp.
__global__ void __launch_bounds__(QUANT_THREADS) amax_kernel(const fp8_quant_args p) {
    pdl_wait();
    pdl_launch_dependents();
    const int64_t spans = (p.cols + TENSOR_SPAN - 1) / TENSOR_SPAN, items = live_rows_of(p) * spans;
    uint32_t routed = 0u, shared = 0u; // by kind (two scalars: an indexed pair would live in memory)
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int64_t r = item / spans;
        const int kind = row_kind(p, r);
        if (kind < 0) continue;
        float v[4];
        load_span(p, r, item % spans * TENSOR_SPAN, v);
        uint32_t m = 0u;
#pragma unroll
        for (int j = 0; j < 4; j++) m = max(m, finite_abs_bits(v[j]));
        if (kind == 0) routed = max(routed, m);
        else shared = max(shared, m);
    }
    routed = __reduce_max_sync(0xFFFFFFFFu, routed);
    shared = __reduce_max_sync(0xFFFFFFFFu, shared);
    if ((threadIdx.x & 31) == 0 && routed > 0) atomicMax(&p.amax[0], routed);
    if ((threadIdx.x & 31) == 0 && shared > 0) atomicMax(&p.amax[1], shared);
}

// FP8_TENSOR, pass 2: codes with the scale of the row's tensor; the scale itself to scales[0]
// (no plan) or to each plan row's scales[r] (0 for a padding row).
__global__ void __launch_bounds__(QUANT_THREADS) quant_tensor_kernel(const fp8_quant_args p) {
    pdl_wait();
    pdl_launch_dependents();
    const int64_t spans = (p.cols + TENSOR_SPAN - 1) / TENSOR_SPAN, items = live_rows_of(p) * spans;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int64_t r = item / spans, c0 = item % spans * TENSOR_SPAN;
        const int kind = row_kind(p, r);
        const bool first = c0 == 0 && threadIdx.x == 0; // writes the row's scale
        if (kind < 0) {
            if (first) p.scales[r] = 0.0f;
            continue;
        }
        float v[4];
        load_span(p, r, c0, v);
        const float s = fp8_scale(p.amax[kind]);
        const fp8_divisor div = fp8_divisor_of(s);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t c = c0 + threadIdx.x + QUANT_THREADS * j;
            if (c < p.cols) p.codes[r * p.codes_ld + c] = fp8_encode_fast(v[j], div);
        }
        if (first && (p.sorted_ids || r == 0)) p.scales[p.sorted_ids ? r : 0] = s;
    }
}

unsigned capped_grid(int64_t blocks, int64_t cap) {
    return (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

} // namespace

// Whether the vector form applies: not MOEFUSE_FP8_QUANT=scalar, rows of whole 4-element words
// (cols and both leading dimensions multiples of 4) and bases aligned to a word of each.
bool fp8_row128_vec_ok(const fp8_quant_args *p) {
    const char *env = getenv("MOEFUSE_FP8_QUANT");
    if (env && strcmp(env, "scalar") == 0) return false;
    const int64_t elem = p->src_dtype == MOE_DTYPE_BF16 || p->src_dtype == MOE_DTYPE_F16 ? 2 : 4;
    return p->cols % 4 == 0 && p->src_ld % 4 == 0 && p->codes_ld % 4 == 0 && (uintptr_t)p->src % (4 * elem) == 0 &&
           (uintptr_t)p->codes % 4 == 0;
}

// Whether the 16-wide form applies on top: not MOEFUSE_FP8_QUANT=vec4, rows of whole 16-element
// pieces, 16-byte aligned sources and codes (the scatter's too).
static bool fp8_row128_v16_ok(const fp8_quant_args *p) {
    const char *env = getenv("MOEFUSE_FP8_QUANT");
    if (env && strcmp(env, "vec4") == 0) return false;
    const int64_t elem = p->src_dtype == MOE_DTYPE_BF16 || p->src_dtype == MOE_DTYPE_F16 ? 2 : 4;
    return fp8_row128_vec_ok(p) && p->cols % 16 == 0 && p->src_ld % (16 / elem) == 0 && p->codes_ld % 16 == 0 &&
           (uintptr_t)p->src % 16 == 0 && (uintptr_t)p->codes % 16 == 0 && (uintptr_t)p->plan_codes % 16 == 0;
}

cudaError_t fp8_quantize_launch(const fp8_quant_args *p, cudaStream_t stream) {
    if (p->rows == 0 || p->cols == 0) return cudaSuccess;
    const int64_t cap = 132 * 16; // enough blocks to fill an H200 several times over
    if (p->format == MOE_FORMAT_FP8_ROW128) {
        const int64_t per_block = QUANT_THREADS / 32, groups = (p->cols + 127) / 128;
        const int gpi = p->rows * groups <= cap * per_block ? 1 : 4;
        const int64_t items = p->rows * ((groups + gpi - 1) / gpi);
        const unsigned grid = capped_grid((items + per_block - 1) / per_block, cap);
        if (p->plan_row_of) { // the scatter: vector form, rows without a plan of their own, a lane a slot
            if (!fp8_row128_vec_ok(p) || p->sorted_ids || !p->plan_codes || !p->plan_scales ||
                p->top_k + (p->shared_row0 ? 1 : 0) > 32)
                return cudaErrorInvalidValue;
            if (gpi == 1) return launch_row128_vec<1, true>(p, grid, stream);
            if (fp8_row128_v16_ok(p)) return launch_row128_v16<true>(p, grid, stream);
            return launch_row128_vec<4, true>(p, grid, stream);
        }
        if (fp8_row128_vec_ok(p)) {
            if (gpi == 1) return launch_row128_vec<1, false>(p, grid, stream);
            if (fp8_row128_v16_ok(p)) return launch_row128_v16<false>(p, grid, stream);
            return launch_row128_vec<4, false>(p, grid, stream);
        }
        if (gpi == 1) return launch_kernel(quant_row128_kernel<1>, grid, QUANT_THREADS, 0, stream, *p);
        return launch_kernel(quant_row128_kernel<4>, grid, QUANT_THREADS, 0, stream, *p);
    }
    if (p->plan_row_of) return cudaErrorInvalidValue; // fp8-tensor: no scatter form
    cudaError_t err = zero_words_launch(p->amax, p->sorted_ids ? 2 : 1, stream);
    if (err != cudaSuccess) return err;
    const unsigned grid = capped_grid(p->rows * ((p->cols + TENSOR_SPAN - 1) / TENSOR_SPAN), cap);
    if ((err = launch_kernel(amax_kernel, grid, QUANT_THREADS, 0, stream, *p)) != cudaSuccess) return err;
    return launch_kernel(quant_tensor_kernel, grid, QUANT_THREADS, 0, stream, *p);
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
