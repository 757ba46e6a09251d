// FP8 decode lab: a grouped GEMM with the operands swapped (docs/hopper_gemm.md, "The FP8 decode
// kernel with the operands swapped"). Written in session 7 without a GPU; first run in session 8
// (bench/results/2026-12-03-h200-session8/callJ1: --check 9/9, deepseek T=64 at 95% of the read
// ceiling); the library's version is src/cuda/hopper/decode_swap_kernel.cuh (plan-driven units).
//
// Y[r, n] = sum_kb (sum_k X[r, k] W_e[n, k]) * sx[kb][r] * sw[e][n / 128][kb] for the plan rows r of
// expert e: X e4m3 [rows, K] in plan order (rows sorted by expert), 1x128 scales k-block-major
// sx[kb][rows]; W e4m3 [E * N, K] with 128x128 block scales sw[E][ceil(N/128)][ceil(K/128)]; Y fp32
// [rows, N]. (GEMM2 of the FP8 forward without the routing weight and the scatter.)
//
// At decode an expert holds a few plan rows. The shipped grouped kernel computes 128-row tiles of
// them (mostly padding) and pays a fixed cost per 128 x 128 tile (~2.6 us, src/cuda/NOTES.md). Here
// the weights are wgmma's 64-row A operand (two consumer warpgroups: 128 weight rows per unit) and
// the expert's rows are B with N = NT = 8, 16 or 32, so no padding rows are computed and a unit
// moves 16 KB of weights per k-block for NT x 128 bytes of X.
//  - Unit = (expert e, chunk of NT of its rows, block of 128 weight rows); a persistent grid walks
//    the units expert by expert. Host-built unit list (a lab shortcut; the library would derive it
//    on the device from the plan's offsets).
//  - Producer warp (warp 0 of warpgroup 0): lane 0 loads the W box (128 rows x 128 B) and the X box
//    (NT rows x 128 B) by TMA; all 32 lanes copy the k-block's scales (NT of X, one of W) into the
//    stage's scale slot by cp.async, each arriving on its full barrier when its copy lands (1 + 32
//    arrivals).
//  - Consumers (warpgroups 1, 2: weight rows 0-63, 64-127 of the unit): per k-block four
//    m64nNTk32 wgmmas into `part`, wait, then acc += part * sw * sx[column] (the promotion into
//    fp32 every 128 of K); free the stage.
//  - Epilogue: the fragment is Y^T (weight row x plan row): thread (warp w, lane l) holds weight
//    rows 16w + l/4 (+8) and plan rows 8j + 2(l%4) (+1); stores of columns below the chunk's row
//    count, weight rows below N.
//
// Prediction (docs/hopper_gemm.md, before any run): at T <= 64 the weight stream at >= 85% of the
// read ceiling measured in the same process (the tiled decode instantiation streams at 55-79%:
// 3.35 TB/s in qwen3 T=64's GEMM1, 2.52 in its GEMM2). Outcome (J1): 95% deepseek, 87% gpt-oss,
// 73% qwen3 at T=64.
//
// --bf16 (session 8; first run session 9, K1: --check 9/9, 83/94/98% of the read ceiling at T=64 on
// qwen3/gpt-oss/deepseek): the same kernel on bf16 weights and rows, the wgmma m64nNTk16 bf16 form,
// 64 elements (128 bytes) per k-block and no scales (the accumulator takes every k-block), for the
// bf16 decode cells of issue 3; the library's BF16 form of decode_swap_kernel.cuh.
//
//   decode_swap_lab [--shapes qwen3,gptoss,deepseek] [--tokens 1,8,64] [--nt 8|16|32] [--bf16] [--check]
#include <cuda.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "gemm_fp8_launch.cuh" // make_tensor_map_e4m3, make_tensor_map (bf16)
#include "lab_util.h"
#include "ptx.cuh"

using namespace moe_hopper;

namespace {

constexpr int KB = FP8_BK;     // bytes (e4m3 elements) of K per k-block = per box row (128)
constexpr int W_ROWS = 128;    // weight rows per unit
constexpr int STAGES = 8;
constexpr int THREADS = 384;   // producer warpgroup (one warp used) + two consumer warpgroups

struct unit_t {
    int expert, row0, rows, n0; // plan rows row0 .. row0 + rows - 1 (rows <= NT), weight rows n0 ..
};

struct swap_params {
    const unit_t *units;
    int num_units, n, k, num_kb, rows_total; // num_kb: k-blocks of 128 bytes (128 e4m3 or 64 bf16)
    const float *sx;  // [num_kb][rows_total]
    const float *sw;  // [E][ceil(n / 128)][num_kb]
    float *y;         // [rows_total, n]
};

template <int NT> struct swap_layout {
    static constexpr int W_BYTES = W_ROWS * KB;                          // 16 KB
    static constexpr int X_BYTES = ((NT * KB + 1023) / 1024) * 1024;     // a 1024-aligned box
    static constexpr int SCALE_FLOATS = 64;                              // NT of X, then W's
    static constexpr int STAGE_BYTES = W_BYTES + X_BYTES + SCALE_FLOATS * 4;
    static constexpr int STAGE_STRIDE = ((STAGE_BYTES + 1023) / 1024) * 1024;
    static constexpr int SMEM = 1024 + STAGES * STAGE_STRIDE + 2 * STAGES * 8;
};

template <int NT, bool BF16>
__global__ void __launch_bounds__(THREADS, 1)
    swap_kernel(const __grid_constant__ CUtensorMap map_w, const __grid_constant__ CUtensorMap map_x,
                const swap_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using L = swap_layout<NT>;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint64_t *full = (uint64_t *)(smem + STAGES * L::STAGE_STRIDE);
    uint64_t *empty = full + STAGES;
    const int warpgroup = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int tiles_n = (p.n + W_ROWS - 1) / W_ROWS;
    if (threadIdx.x == 0) ring_init(full, empty, STAGES, 1 + 32, 8);
    __syncthreads();

    if (warpgroup == 0) {
        setmaxnreg_dec<40>();
        if (warp != 0) return;
        int stage = 0;
        uint32_t phase = 0;
        for (int u = blockIdx.x; u < p.num_units; u += gridDim.x) {
            const unit_t t = p.units[u];
            const float *sw_unit = p.sw + ((int64_t)t.expert * tiles_n + t.n0 / W_ROWS) * p.num_kb;
            for (int kb = 0; kb < p.num_kb; ++kb) {
                mbar_wait(&empty[stage], phase ^ 1);
                uint8_t *st = smem + stage * L::STAGE_STRIDE;
                if (lane == 0) {
                    mbar_arrive_expect_tx(&full[stage], L::W_BYTES + NT * KB);
                    const int k0 = kb * (BF16 ? KB / 2 : KB); // in elements
                    tma_load_2d(st, &map_w, &full[stage], k0, t.expert * p.n + t.n0);
                    tma_load_2d(st + L::W_BYTES, &map_x, &full[stage], k0, t.row0);
                }
                // The scales by cp.async (zeros past the chunk's rows), each lane's arrival when its
                // copy lands, so the producer never waits for a load.
                float *scales = (float *)(st + L::W_BYTES + L::X_BYTES);
                if (!BF16 && lane < NT) {
                    const bool live = lane < t.rows;
                    cp_async_4(scales + lane, live ? p.sx + (int64_t)kb * p.rows_total + t.row0 + lane : p.sx,
                               live ? 4u : 0u);
                }
                if (!BF16 && lane == 0) cp_async_4(scales + NT, sw_unit + kb, 4u);
                cp_async_mbar_arrive_noinc(&full[stage]);
                if (++stage == STAGES) {
                    stage = 0;
                    phase ^= 1;
                }
            }
        }
        cp_async_wait_all(); // no thread exits with copies in flight
    } else {
        setmaxnreg_inc<232>();
        const int half = warpgroup - 1; // weight rows half * 64 .. + 63 of the unit
        float acc[NT / 2], part[NT / 2];
        int stage = 0;
        uint32_t phase = 0;
        for (int u = blockIdx.x; u < p.num_units; u += gridDim.x) {
            const unit_t t = p.units[u];
#pragma unroll
            for (int i = 0; i < NT / 2; ++i) acc[i] = 0.0f;
            for (int kb = 0; kb < p.num_kb; ++kb) {
                mbar_wait(&full[stage], phase);
                uint8_t *st = smem + stage * L::STAGE_STRIDE;
                const uint64_t desc_w = smem_desc_k_sw128(st + half * 64 * KB);
                const uint64_t desc_x = smem_desc_k_sw128(st + L::W_BYTES);
                wgmma_fence();
                if constexpr (BF16) { // 4 k16 steps of 32 bytes straight into the accumulator
#pragma unroll
                    for (int kk = 0; kk < KB / 32; ++kk)
                        wgmma_bf16_nt<NT>(acc, smem_desc_advance(desc_w, kk * 32), smem_desc_advance(desc_x, kk * 32),
                                          kb > 0 || kk > 0);
                    wgmma_commit_group();
                    wgmma_wait_group<0>();
                    fence_registers<NT / 2>(acc);
                } else {
#pragma unroll
                    for (int kk = 0; kk < KB / 32; ++kk)
                        wgmma_e4m3_nt<NT>(part, smem_desc_advance(desc_w, kk * 32), smem_desc_advance(desc_x, kk * 32),
                                          kk > 0);
                    wgmma_commit_group();
                    wgmma_wait_group<0>();
                    fence_registers<NT / 2>(part);
                    const float *scales = (const float *)(st + L::W_BYTES + L::X_BYTES);
                    promote_swapped<NT>(acc, part, scales, scales[NT], lane);
                }
                __syncwarp();
                if (lane == 0) mbar_arrive(&empty[stage]);
                if (++stage == STAGES) {
                    stage = 0;
                    phase ^= 1;
                }
            }
            const int wrow = t.n0 + half * 64 + warp * 16 + lane / 4;
#pragma unroll
            for (int j = 0; j < NT / 8; ++j)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int col = 8 * j + 2 * (lane % 4) + c;
                    if (col >= t.rows) continue;
                    float *yrow = p.y + (int64_t)(t.row0 + col) * p.n;
                    if (wrow < p.n) yrow[wrow] = acc[4 * j + c];
                    if (wrow + 8 < p.n) yrow[wrow + 8] = acc[4 * j + 2 + c];
                }
        }
    }
#endif
}

// A streaming read of `bytes` (a multiple of 16): the ceiling the kernel's weight stream is
// compared with, measured in the same process.
__global__ void read_kernel(const uint4 *src, int64_t n16, unsigned *sink) {
    uint32_t x = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n16; i += (int64_t)gridDim.x * blockDim.x) {
        const uint4 v = src[i];
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x9e3779b9u) atomicAdd(sink, 1u); // never (in practice): keeps the loads
}

struct shape_t {
    const char *name;
    int experts, n, k, top_k;
};
const shape_t SHAPES[] = {
    {"qwen3", 128, 2048, 768, 8},     // GEMM2 (down): N = H, K = I
    {"gptoss", 128, 2880, 2880, 4},   // GEMM2; N and K not multiples of 128
    {"deepseek", 256, 7168, 2048, 8}, // GEMM2
};

uint64_t rng_state = 88172645463325252ull;
uint32_t rng() {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
float urand() { return (rng() >> 8) * (1.0f / 16777216.0f); }

// e4m3 codes of finite values in [-4, 4] (no NaN codes 0x7f / 0xff), and every code's value.
struct e4m3_tables {
    uint8_t allowed[256];
    int count;
    float value[256];
};
e4m3_tables make_tables() {
    e4m3_tables t;
    t.count = 0;
    for (int c = 0; c < 256; ++c) {
        __nv_fp8_e4m3 q;
        q.__x = (__nv_fp8_storage_t)c;
        t.value[c] = (float)q;
        if ((c & 0x7f) != 0x7f && fabsf(t.value[c]) <= 4.0f) t.allowed[t.count++] = (uint8_t)c;
    }
    return t;
}
const e4m3_tables TABLES = make_tables();
uint8_t random_e4m3() { return TABLES.allowed[rng() % TABLES.count]; }

// The weights are too many to make on the host (deepseek: 3.8 GB): byte i of W is the allowed
// code hash(i) picks, made on the device and recomputed on the host for the rows checked.
__host__ __device__ inline uint32_t hash64(uint64_t x) { return (uint32_t)(lab_splitmix64(x) >> 32); }
__global__ void fill_weights(uint8_t *w, int64_t bytes, const uint8_t *allowed, int count, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < bytes; i += (int64_t)gridDim.x * blockDim.x)
        w[i] = allowed[hash64(seed + (uint64_t)i) % count];
}
uint8_t weight_code(int64_t i, uint64_t seed) { return TABLES.allowed[hash64(seed + (uint64_t)i) % TABLES.count]; }

// --bf16: values n/64 with |n| <= 127 (exact in bf16), element i of W from hash(i) as above.
__host__ __device__ inline float small_value(uint32_t h) { return (float)((int)(h % 255u) - 127) / 64.0f; }
__global__ void fill_weights_bf16(__nv_bfloat16 *w, int64_t count, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x)
        w[i] = __float2bfloat16(small_value(hash64(seed + (uint64_t)i)));
}
float bf16_value(const uint8_t *bytes, size_t i) {
    uint16_t b;
    memcpy(&b, bytes + 2 * i, 2);
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

template <int NT, bool BF16>
int run_shape(const shape_t &s, int tokens, bool check_only, int sms, double read_tbps, const uint8_t *dw,
              uint64_t w_seed, void *flush, size_t flush_bytes) {
    using L = swap_layout<NT>;
    constexpr int ELEM = BF16 ? 2 : 1, KE = KB / ELEM; // bytes per element, elements per k-block
    const int num_kb = (s.k + KE - 1) / KE, tiles_n = (s.n + W_ROWS - 1) / W_ROWS;
    // Routing: each token to top_k distinct experts; plan rows sorted by expert.
    std::vector<int> count(s.experts, 0);
    for (int t = 0; t < tokens; ++t) {
        std::vector<int> chosen;
        while ((int)chosen.size() < s.top_k) {
            const int e = (int)(rng() % s.experts);
            if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
        }
        for (int e : chosen) count[e]++;
    }
    std::vector<int> offset(s.experts + 1, 0);
    for (int e = 0; e < s.experts; ++e) offset[e + 1] = offset[e] + count[e];
    const int rows = offset[s.experts];
    std::vector<unit_t> units;
    int touched = 0;
    for (int e = 0; e < s.experts; ++e) {
        if (!count[e]) continue;
        ++touched;
        for (int r = 0; r < count[e]; r += NT)
            for (int nb = 0; nb < tiles_n; ++nb)
                units.push_back({e, offset[e] + r, std::min(NT, count[e] - r), nb * W_ROWS});
    }
    // Data: X [rows + NT, K] (NT rows of slack: a box may run past the last row); W (dw) made once
    // per shape by fill_weights (fill_weights_bf16).
    const int64_t x_rows = rows + NT;
    std::vector<uint8_t> hx((size_t)x_rows * s.k * ELEM);
    if (BF16) {
        for (size_t i = 0; i < hx.size() / 2; ++i) {
            const __nv_bfloat16 v = __float2bfloat16(small_value(rng()));
            memcpy(&hx[2 * i], &v, 2);
        }
    } else {
        for (auto &c : hx) c = random_e4m3();
    }
    std::vector<float> hsx((size_t)num_kb * rows), hsw((size_t)s.experts * tiles_n * num_kb);
    for (auto &v : hsx) v = 0.5f + urand();
    for (auto &v : hsw) v = (0.5f + urand()) / s.k;
    uint8_t *dx;
    float *dsx, *dsw, *dy;
    unit_t *du;
    CUDA_OK(cudaMalloc(&dx, hx.size()));
    CUDA_OK(cudaMalloc(&dsx, std::max<size_t>(1, hsx.size()) * 4));
    CUDA_OK(cudaMalloc(&dsw, hsw.size() * 4));
    CUDA_OK(cudaMalloc(&dy, std::max<size_t>(1, (size_t)rows * s.n) * 4));
    CUDA_OK(cudaMalloc(&du, std::max<size_t>(1, units.size()) * sizeof(unit_t)));
    CUDA_OK(cudaMemcpy(dx, hx.data(), hx.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dsx, hsx.data(), hsx.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dsw, hsw.data(), hsw.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(du, units.data(), units.size() * sizeof(unit_t), cudaMemcpyHostToDevice));
    CUtensorMap map_w, map_x;
    const bool maps_ok =
        BF16 ? make_tensor_map(&map_w, dw, (int64_t)s.experts * s.n, s.k, s.k, W_ROWS) == CUDA_SUCCESS &&
                   make_tensor_map(&map_x, dx, x_rows, s.k, s.k, NT) == CUDA_SUCCESS
             : make_tensor_map_e4m3(&map_w, dw, (int64_t)s.experts * s.n, s.k, s.k, W_ROWS) == CUDA_SUCCESS &&
                   make_tensor_map_e4m3(&map_x, dx, x_rows, s.k, s.k, NT) == CUDA_SUCCESS;
    if (!maps_ok) {
        printf("%s T=%d: tensor map encoding failed\n", s.name, tokens);
        return 1;
    }
    swap_params p = {du, (int)units.size(), s.n, s.k, num_kb, rows, dsx, dsw, dy};
    CUDA_OK(cudaFuncSetAttribute(swap_kernel<NT, BF16>, cudaFuncAttributeMaxDynamicSharedMemorySize, L::SMEM));
    const int grid = std::min<int>(sms, std::max<int>(1, (int)units.size()));
    // Check: output poisoned (0xff bytes: NaN), one launch, then the checks below.
    CUDA_OK(cudaMemset(dy, 0xff, (size_t)rows * s.n * 4));
    swap_kernel<NT, BF16><<<grid, THREADS, L::SMEM>>>(map_w, map_x, p);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> hy((size_t)rows * s.n);
    CUDA_OK(cudaMemcpy(hy.data(), dy, hy.size() * 4, cudaMemcpyDeviceToHost));
    // Every live output must be written (the NaN poison gone); the values of the weight rows n with
    // n % 7 == 0 and the last 8 (the N tail) against an fp64 reference, |got - ref| <= 2e-3 x
    // max(|ref|, rms of the checked refs).
    int bad = 0;
    for (int r = 0; r < rows; ++r)
        for (int n = 0; n < s.n; ++n)
            if (!(fabsf(hy[(size_t)r * s.n + n]) < 1e30f)) {
                if (bad < 5) printf("  unwritten or non-finite %s row %d col %d: %g\n", s.name, r, n, hy[(size_t)r * s.n + n]);
                ++bad;
            }
    std::vector<float> xdec((size_t)rows * s.k), wdec(s.k);
    for (size_t i = 0; i < xdec.size(); ++i) xdec[i] = BF16 ? bf16_value(hx.data(), i) : TABLES.value[hx[i]];
    std::vector<double> ref;
    std::vector<size_t> at;
    for (int e = 0; e < s.experts; ++e) {
        if (!count[e]) continue;
        for (int n = 0; n < s.n; ++n) {
            if (n % 7 != 0 && n < s.n - 8) continue;
            for (int k = 0; k < s.k; ++k) {
                const int64_t i = ((int64_t)e * s.n + n) * s.k + k;
                wdec[k] = BF16 ? small_value(hash64(w_seed + (uint64_t)i)) : TABLES.value[weight_code(i, w_seed)];
            }
            for (int r = offset[e]; r < offset[e + 1]; ++r) {
                double v = 0.0;
                for (int kb = 0; kb < num_kb; ++kb) {
                    double sum = 0.0;
                    for (int k = kb * KE; k < std::min(s.k, (kb + 1) * KE); ++k)
                        sum += (double)xdec[(size_t)r * s.k + k] * wdec[k];
                    v += BF16 ? sum
                              : sum * hsx[(size_t)kb * rows + r] * hsw[((size_t)e * tiles_n + n / W_ROWS) * num_kb + kb];
                }
                ref.push_back(v);
                at.push_back((size_t)r * s.n + n);
            }
        }
    }
    double rms = 0.0;
    for (double v : ref) rms += v * v;
    rms = ref.empty() ? 1.0 : sqrt(rms / ref.size());
    double max_err = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double err = fabs(hy[at[i]] - ref[i]) / std::max(fabs(ref[i]), rms);
        if (!(err <= 2e-3)) {
            if (bad < 5)
                printf("  mismatch %s row %zu col %zu: got %g expected %g\n", s.name, at[i] / s.n, at[i] % s.n, hy[at[i]],
                       ref[i]);
            ++bad;
        }
        if (err > max_err) max_err = err;
    }
    double ms = 0.0;
    if (!check_only) {
        cudaEvent_t a, b;
        CUDA_OK(cudaEventCreate(&a));
        CUDA_OK(cudaEventCreate(&b));
        std::vector<float> t;
        for (int i = 0; i < 23; ++i) {
            // L2 emptied of the weights first (decode weights of one layer can fit in its 50 MB;
            // in a model the other layers have evicted them).
            CUDA_OK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
            CUDA_OK(cudaEventRecord(a));
            swap_kernel<NT, BF16><<<grid, THREADS, L::SMEM>>>(map_w, map_x, p);
            CUDA_OK(cudaEventRecord(b));
            CUDA_OK(cudaEventSynchronize(b));
            float x;
            CUDA_OK(cudaEventElapsedTime(&x, a, b));
            if (i >= 3) t.push_back(x);
        }
        std::sort(t.begin(), t.end());
        ms = t[t.size() / 2];
    }
    const double w_bytes = (double)touched * s.n * s.k * ELEM;
    printf("%s %-9s T=%-3d NT=%-2d rows %4d experts %3d units %6zu  %s (max rel err %.1e)  %.4f ms  %.2f TB/s = %.0f%% of "
           "the read\n",
           BF16 ? "bf16" : "fp8 ", s.name, tokens, NT, rows, touched, units.size(), bad ? "FAIL" : "pass", max_err, ms,
           ms > 0 ? w_bytes / ms / 1e9 : 0.0, ms > 0 ? 100.0 * w_bytes / ms / 1e9 / read_tbps : 0.0);
    cudaFree(dx), cudaFree(dsx), cudaFree(dsw), cudaFree(dy), cudaFree(du);
    return bad ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
    const char *shapes = "qwen3,gptoss,deepseek", *tokens = "1,8,64";
    int nt = 32;
    bool check_only = false, bf16 = false;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = argv[++i];
        else if (!strcmp(argv[i], "--nt") && i + 1 < argc) nt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--check")) check_only = true;
        else if (!strcmp(argv[i], "--bf16")) bf16 = true;
        else {
            fprintf(stderr, "usage: decode_swap_lab [--shapes qwen3,gptoss,deepseek] [--tokens 1,8,64] [--nt 8|16|32] "
                            "[--bf16] [--check]\n");
            return 2;
        }
    }
    if (nt != 8 && nt != 16 && nt != 32) {
        fprintf(stderr, "--nt: got %d, expected 8, 16 or 32\n", nt);
        return 2;
    }
    int sms;
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    // The read ceiling of this run: 2 GiB streamed, median of 5.
    const int64_t read_bytes = (int64_t)2 << 30;
    void *buf;
    unsigned *sink;
    CUDA_OK(cudaMalloc(&buf, read_bytes));
    CUDA_OK(cudaMalloc(&sink, 4));
    CUDA_OK(cudaMemset(buf, 1, read_bytes));
    std::vector<float> rt;
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    for (int i = 0; i < 6; ++i) {
        CUDA_OK(cudaEventRecord(a));
        read_kernel<<<sms * 8, 512>>>((const uint4 *)buf, read_bytes / 16, sink);
        CUDA_OK(cudaEventRecord(b));
        CUDA_OK(cudaEventSynchronize(b));
        float x;
        CUDA_OK(cudaEventElapsedTime(&x, a, b));
        if (i) rt.push_back(x);
    }
    std::sort(rt.begin(), rt.end());
    const double read_tbps = read_bytes / rt[rt.size() / 2] / 1e9;
    CUDA_OK(cudaFree(buf));
    printf("decode_swap_lab: %d SMs, read ceiling %.3f TB/s (2 GiB, median of 5); W bytes = touched experts x N x K x "
           "%d\n",
           sms, read_tbps, bf16 ? 2 : 1);
    const size_t flush_bytes = (size_t)256 << 20;
    void *flush;
    uint8_t *d_allowed;
    CUDA_OK(cudaMalloc(&flush, flush_bytes));
    CUDA_OK(cudaMalloc(&d_allowed, 256));
    CUDA_OK(cudaMemcpy(d_allowed, TABLES.allowed, 256, cudaMemcpyHostToDevice));
    int failed = 0, passed = 0;
    for (const shape_t &s : SHAPES) {
        if (!strstr(shapes, s.name)) continue;
        const int64_t w_count = (int64_t)s.experts * s.n * s.k;
        const uint64_t w_seed = 0x5eed0000ull + (uint64_t)s.experts * s.n;
        uint8_t *dw;
        CUDA_OK(cudaMalloc(&dw, w_count * (bf16 ? 2 : 1)));
        if (bf16) fill_weights_bf16<<<sms * 8, 256>>>((__nv_bfloat16 *)dw, w_count, w_seed);
        else fill_weights<<<sms * 8, 256>>>(dw, w_count, d_allowed, TABLES.count, w_seed);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaDeviceSynchronize());
        for (const char *c = tokens; *c;) {
            const int t = atoi(c);
            auto run = bf16 ? (nt == 8 ? run_shape<8, true> : nt == 16 ? run_shape<16, true> : run_shape<32, true>)
                            : (nt == 8 ? run_shape<8, false> : nt == 16 ? run_shape<16, false> : run_shape<32, false>);
            const int r = run(s, t, check_only, sms, read_tbps, dw, w_seed, flush, flush_bytes);
            (r ? failed : passed)++;
            c = strchr(c, ',');
            if (!c) break;
            ++c;
        }
        CUDA_OK(cudaFree(dw));
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
