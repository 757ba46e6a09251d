// Row-gather lab: can TMA gather a GEMM1 A tile one row at a time, straight into the 128-byte
// swizzled layout the wgmma descriptors read, and how fast, against the gathering producer's
// 16-byte cp.async (gather_a_stage) and the permuted copy's one 128-row box?
//
// Why: the gathering GEMM1 (MOEFUSE_HOPPER_A=gather) saves the permute pass (glm-4.5-air at
// T = 16384: 537 us, 7% of the forward) but ran 13-14% slower than the permuted one (session 32's
// H100 lab), more than the pass it saves. Its A arrives by cp.async (generic proxy), so every
// consumer thread runs a fence.proxy.async (MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S in the SASS) before
// each k-block's wgmmas, and 128 producer threads do the copying. A TMA load is in the async proxy
// (no fence) and one thread issues it, but TMA cannot gather rows on Hopper: unless each row is its
// own 1 x 64 box. Whether such a box lands swizzled as the tile's row r needs (16-byte chunk c at
// chunk c ^ (r % 8)) depends on whether the swizzle follows the shared-memory address (the stage
// is 1024-byte aligned, a row box at +128 r) or the box's own row index (always 0): part 1 looks.
//
// 1. layout: 128 rows of a uint16 matrix (element = row * 64 + column, a permutation of rows
//    gathered) loaded by 128 one-row boxes (SWIZZLE_128B) to stage + 128 r; the stage compared with
//    the address-based swizzle and with no swizzle at all. Prints which one it matches.
// 2. rate: a persistent grid (one CTA per SM) with a ring of 4 stages of 128 rows x 128 bytes,
//    walking units of 128 random rows of x [tokens, k] bf16 (k-block by k-block, as GEMM1's A);
//    one consumer warp frees each stage when it lands, after an optional spin standing in for the
//    MMAs (~1000 cycles a 128 x 256 x 64 stage at full rate). Variants:
//      rows     128 one-row TMA boxes a stage, one a producer thread (as GATHER_TMA_ROWS);
//      box      one 128-row box of a permuted copy (what the permuted GEMM1 reads; TMA's best);
//      cpasync  128 producer threads x 8 16-byte cp.async (gather_a_stage's pattern), completion by
//               cp.async.mbarrier.arrive.noinc, the consumer fencing the proxies after each wait.
//    Prints median ms of interleaved rounds and the A bytes' rate.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Isrc/cuda/hopper -Ilab -Iinclude \
//        -Isrc/core -Isrc/cuda -o /tmp/row_gather_lab lab/row_gather_lab.cu
//   /tmp/row_gather_lab [--tokens 16384] [--k 4096] [--units 1024] [--spin 0,1000]
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "gemm_launch.cuh"
#include "lab_util.h"
#include "ptx.cuh"

using namespace moe_hopper;

namespace {

constexpr int ROWS = 128;                 // rows of a stage (the tile's BM)
constexpr int ROW_BYTES = 128;            // 64 bf16 of K a row (BK)
constexpr int STAGE_BYTES = ROWS * ROW_BYTES;
constexpr int RING = 4;
constexpr int SMEM_BYTES = 1024 + RING * STAGE_BYTES + 2 * RING * 8;

enum { V_ROWS = 0, V_BOX = 1, V_CPASYNC = 2 };

// ---- 1. layout -------------------------------------------------------------------------------
__global__ void layout_kernel(const __grid_constant__ CUtensorMap map, const int32_t *rows, uint16_t *out) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *stage = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint64_t *bar = (uint64_t *)(stage + STAGE_BYTES);
    if (threadIdx.x == 0) {
        mbar_init(bar, 1);
        fence_mbarrier_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(bar, STAGE_BYTES);
        for (int r = 0; r < ROWS; ++r) tma_load_2d(stage + r * ROW_BYTES, &map, bar, 0, rows[r]);
    }
    mbar_wait(bar, 0);
    for (int i = threadIdx.x; i < STAGE_BYTES / 2; i += blockDim.x) out[i] = ((const uint16_t *)stage)[i];
}

// ---- 2. rate ---------------------------------------------------------------------------------
struct rate_args {
    const int32_t *unit_rows; // [units][128] token of each row
    const __nv_bfloat16 *x;   // [tokens, k]
    int units, k_blocks, spin;
    int64_t ldx;
    unsigned long long *sink;
};

template <int V>
__global__ void __launch_bounds__(160, 1)
    rate_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_xp, rate_args a) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *ring = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint64_t *full = (uint64_t *)(ring + RING * STAGE_BYTES);
    uint64_t *empty = full + RING;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        for (int s = 0; s < RING; ++s) {
            mbar_init(&full[s], V == V_CPASYNC ? 128 : 1);
            mbar_init(&empty[s], 1);
        }
        fence_mbarrier_init();
    }
    __syncthreads();
    if (warp < 4) { // producer: warp 0 (box) or warps 0-3 (rows, cpasync)
        if (V == V_BOX && warp != 0) return;
        int stage = 0;
        uint32_t phase = 0;
        for (int u = blockIdx.x; u < a.units; u += gridDim.x) {
            const int32_t *ur = a.unit_rows + (int64_t)u * ROWS;
            const int t = threadIdx.x, row0 = (t / 32) * 32 + (t % 32) / 8, chunk = t % 8;
            const int32_t tok = V == V_ROWS ? ur[t] : 0;
            int32_t ctok[8];
            if (V == V_CPASYNC)
                for (int i = 0; i < 8; ++i) ctok[i] = ur[row0 + 4 * i];
            for (int kb = 0; kb < a.k_blocks; ++kb) {
                mbar_wait(&empty[stage], phase ^ 1);
                uint8_t *st = ring + stage * STAGE_BYTES;
                if (V == V_ROWS) {
                    if (t == 0) mbar_arrive_expect_tx(&full[stage], STAGE_BYTES);
                    tma_load_2d(st + t * ROW_BYTES, &map_x, &full[stage], kb * 64, tok);
                } else if (V == V_BOX) {
                    if (lane == 0) {
                        mbar_arrive_expect_tx(&full[stage], STAGE_BYTES);
                        tma_load_2d(st, &map_xp, &full[stage], kb * 64, u * ROWS);
                    }
                } else {
                    const __nv_bfloat16 *col = a.x + kb * 64 + chunk * 8;
                    for (int i = 0; i < 8; ++i) {
                        const int r = row0 + 4 * i;
                        cp_async_16(st + r * 128 + ((chunk ^ (r % 8)) << 4), col + (int64_t)ctok[i] * a.ldx, 16u);
                    }
                    cp_async_mbar_arrive_noinc(&full[stage]);
                }
                if (++stage == RING) {
                    stage = 0;
                    phase ^= 1;
                }
            }
        }
        if (V == V_CPASYNC) cp_async_wait_all();
    } else { // consumer warp 4
        int stage = 0;
        uint32_t phase = 0;
        unsigned long long acc = 0;
        for (int u = blockIdx.x; u < a.units; u += gridDim.x)
            for (int kb = 0; kb < a.k_blocks; ++kb) {
                mbar_wait(&full[stage], phase);
                if (V == V_CPASYNC) fence_proxy_async_shared();
                // One word of the stage, so that the loads cannot be skipped; then the stand-in.
                acc += ((const uint32_t *)(ring + stage * STAGE_BYTES))[lane];
                if (a.spin) {
                    const long long t0 = clock64();
                    while (clock64() - t0 < a.spin) {
                    }
                }
                __syncwarp();
                if (lane == 0) mbar_arrive(&empty[stage]);
                if (++stage == RING) {
                    stage = 0;
                    phase ^= 1;
                }
            }
        if (acc == 0x5A5A5A5A5A5A5A5Aull) *a.sink = acc; // never, in practice
    }
}

template <int V> void set_smem() {
    CUDA_OK(cudaFuncSetAttribute(rate_kernel<V>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
}

} // namespace

int main(int argc, char **argv) {
    int64_t tokens = 16384, k = 4096;
    int units = 1024;
    const char *spins = "0,1000";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--k") && i + 1 < argc) k = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--units") && i + 1 < argc) units = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--spin") && i + 1 < argc) spins = argv[++i];
        else {
            fprintf(stderr, "usage: row_gather_lab [--tokens N] [--k K (a multiple of 64)] [--units U] [--spin LIST]\n"
                            "unknown or incomplete argument: %s\n", argv[i]);
            return 2;
        }
    }
    if (tokens < ROWS || k < 64 || k % 64 != 0 || units < 1) {
        fprintf(stderr, "row_gather_lab: need --tokens >= 128, --k a positive multiple of 64, --units >= 1\n");
        return 2;
    }
    int dev = 0, sms = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s, %d SMs\n", prop.name, sms);

    // ---- 1. layout ----
    int failures = 0;
    {
        const int R = 1024;
        std::vector<uint16_t> h((size_t)R * 64);
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < 64; ++c) h[(size_t)r * 64 + c] = (uint16_t)(r * 64 + c);
        std::vector<int32_t> rows(ROWS);
        for (int r = 0; r < ROWS; ++r) rows[r] = (int32_t)((r * 389 + 17) % R);
        uint16_t *d_x, *d_out;
        int32_t *d_rows;
        CUDA_OK(cudaMalloc(&d_x, h.size() * 2));
        CUDA_OK(cudaMalloc(&d_out, STAGE_BYTES));
        CUDA_OK(cudaMalloc(&d_rows, ROWS * 4));
        CUDA_OK(cudaMemcpy(d_x, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(d_rows, rows.data(), ROWS * 4, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemset(d_out, 0xFF, STAGE_BYTES));
        CUtensorMap map;
        const CUresult cr = make_tensor_map_2d(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, d_x, R, 64, 128, 64, 1,
                                               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE);
        if (cr != CUDA_SUCCESS) {
            printf("layout: the one-row box map was refused (%d)\n", (int)cr);
            return 1;
        }
        CUDA_OK(cudaFuncSetAttribute(layout_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 2048 + STAGE_BYTES));
        layout_kernel<<<1, 128, 2048 + STAGE_BYTES>>>(map, d_rows, d_out);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint16_t> out(STAGE_BYTES / 2);
        CUDA_OK(cudaMemcpy(out.data(), d_out, STAGE_BYTES, cudaMemcpyDeviceToHost));
        int bad_swizzled = 0, bad_plain = 0;
        for (int r = 0; r < ROWS; ++r)
            for (int c = 0; c < 64; ++c) {
                const uint16_t want = (uint16_t)(rows[r] * 64 + c);
                if (out[(size_t)r * 64 + ((c / 8) ^ (r % 8)) * 8 + c % 8] != want) ++bad_swizzled;
                if (out[(size_t)r * 64 + c] != want) ++bad_plain;
            }
        printf("layout: %d of %d elements differ from the address-swizzled layout, %d from the unswizzled one: %s\n",
               bad_swizzled, ROWS * 64, bad_plain,
               bad_swizzled == 0 ? "one-row boxes land as the wgmma tile's rows (address-based swizzle)"
               : bad_plain == 0  ? "one-row boxes land unswizzled (the swizzle follows the box's row)"
                                 : "neither layout");
        if (bad_swizzled != 0) ++failures;
        CUDA_OK(cudaFree(d_x));
        CUDA_OK(cudaFree(d_out));
        CUDA_OK(cudaFree(d_rows));
    }

    // ---- 2. rate ----
    const int k_blocks = (int)(k / 64);
    __nv_bfloat16 *d_x, *d_xp;
    int32_t *d_unit_rows;
    unsigned long long *d_sink;
    const size_t x_bytes = (size_t)tokens * k * 2, xp_bytes = (size_t)units * ROWS * k * 2;
    CUDA_OK(cudaMalloc(&d_x, x_bytes));
    CUDA_OK(cudaMalloc(&d_xp, xp_bytes));
    CUDA_OK(cudaMemset(d_x, 0x3C, x_bytes));
    CUDA_OK(cudaMemset(d_xp, 0x3C, xp_bytes));
    std::vector<int32_t> ur((size_t)units * ROWS);
    for (size_t i = 0; i < ur.size(); ++i) ur[i] = (int32_t)(lab_splitmix64(i + 12345) % (uint64_t)tokens);
    CUDA_OK(cudaMalloc(&d_unit_rows, ur.size() * 4));
    CUDA_OK(cudaMemcpy(d_unit_rows, ur.data(), ur.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMalloc(&d_sink, 8));
    CUtensorMap map_x, map_xp;
    if (make_tensor_map_2d(&map_x, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, d_x, tokens, k, k * 2, 64, 1,
                           CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B) != CUDA_SUCCESS ||
        make_tensor_map_2d(&map_xp, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, d_xp, (int64_t)units * ROWS, k, k * 2, 64, ROWS,
                           CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B) != CUDA_SUCCESS) {
        printf("rate: tensor map refused\n");
        return 1;
    }
    set_smem<V_ROWS>();
    set_smem<V_BOX>();
    set_smem<V_CPASYNC>();
    const int grid = units < sms ? units : sms;
    const char *names[3] = {"rows", "box", "cpasync"};
    const double a_bytes = (double)units * ROWS * k * 2;
    printf("rate: %d units of 128 random rows of x [%lld, %lld] bf16, %d k-blocks each (%.0f MB of A), grid %d\n", units,
           (long long)tokens, (long long)k, k_blocks, a_bytes / 1e6, grid);
    printf("%-8s %6s %10s %8s\n", "variant", "spin", "ms", "TB/s");
    for (const char *p = spins; *p;) {
        const int spin = atoi(p);
        rate_args a{d_unit_rows, d_x, units, k_blocks, spin, k, d_sink};
        std::vector<std::function<void()>> launch = {
            [&]() { rate_kernel<V_ROWS><<<grid, 160, SMEM_BYTES>>>(map_x, map_xp, a); },
            [&]() { rate_kernel<V_BOX><<<grid, 160, SMEM_BYTES>>>(map_x, map_xp, a); },
            [&]() { rate_kernel<V_CPASYNC><<<grid, 160, SMEM_BYTES>>>(map_x, map_xp, a); },
        };
        for (auto &l : launch) l();
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaDeviceSynchronize());
        const std::vector<double> med = lab_interleaved_medians(launch, 0, 2, 9, 3, 1.0);
        for (int v = 0; v < 3; ++v) printf("%-8s %6d %10.4f %8.3f\n", names[v], spin, med[v], a_bytes / (med[v] * 1e9));
        p += strcspn(p, ",");
        if (*p == ',') ++p;
    }
    CUDA_OK(cudaFree(d_x));
    CUDA_OK(cudaFree(d_xp));
    CUDA_OK(cudaFree(d_unit_rows));
    CUDA_OK(cudaFree(d_sink));
    printf("%s\n", failures ? "FAIL: the layout check" : "PASS");
    return failures ? 1 : 0;
}
