// The K-grouped GEMM of the Hopper engine: the weight gradients of the expert MLP (training).
//
//   dW[e][n][c] = beta * dW[e][n][c] + sum over r in R_e of G[r][n] * A[r][c]
//
// R_e: expert e's plan rows, offsets[e] .. offsets[e] + counts[e] (the forward's block-aligned
// plan; the padding rows after them are not read into the sums). G [rows, ldg] and A [rows, lda]
// bf16 in plan order (for dW2: G = dY rows, A = A2; for dW13: G = dA1, A = x rows). The reduction
// runs over rows, so both operands are MN-major in shared memory: TMA boxes of 64 rows x 64
// columns (128 bytes, the swizzle row), wgmma with both transpose bits set.
//
// Same skeleton as the dense kernel (gemm_kernel.cuh): one CTA per SM (persistent), a producer
// warpgroup whose one thread issues the TMA loads into a 4-stage ring, two consumer
// warpgroups each owning 64 of the tile's 128 dW rows (wgmma m64n256k16, 128 accumulators a
// thread). Units (expert, 128 rows of n, 256 columns of c) are walked expert-major, so that the
// CTAs working on one expert at a time share its rows of G and A in L2. Every dW element is
// written by exactly one unit (no split of the reduction): deterministic, no atomics.
//
// Stage (48 KB at the default k-block depth of 64 rows, wgrad_cfg): G's 64 rows x 128 columns as
// two 64-column slabs (WG h reads slab h as its A operand), A's 64 rows x 256 columns as four
// slabs (the B operand of both). A k-block of an expert's last rows may run past counts[e] into
// padding or the next expert's rows: the
// consumers zero those rows of the stage (both operands, so that NaN or Inf there cannot leak
// into the sums) before its wgmmas, once per unit at most.
//
// Epilogue, by tile: interior tiles (inside dW) store aligned pairs (wgrad_store_aligned, beta
// applied), or, where the caller asks for MOE__WGRAD_STORE_BULK and dW is fp32, beta 0 and rows
// 16-byte, go through 4 KB of staging a warp and bulk copies (wgrad_bulk_store_tile); edge tiles
// check every pair.
#ifndef MOEFUSE_CUDA_HOPPER_WGRAD_KERNEL_CUH
#define MOEFUSE_CUDA_HOPPER_WGRAD_KERNEL_CUH

#include "gemm_kernel.cuh"

namespace moe_hopper {

constexpr int WG_BN = 256; // dW tile columns (c)

// The kernel's configuration by its k-block depth BR (reduction rows a stage): 64, 4 stages of 48 KB,
// 4 KB of epilogue staging a consumer warp (its 16 dW rows x 64 fp32 columns at a time, so a tile's
// bulk copies go out in 4 rounds). 32-row k-blocks with a whole 16 x 256 part of the tile staged a
// warp (all of a tile's copies at once, draining under the next unit's MMAs) were correct and
// 6-14% slower on all four --perf shapes (session 23, bench/results/2026-12-04-h200-session23/callX1;
// commit 712fe6e^ has them).
template <int BR_> struct wgrad_cfg {
    static constexpr int BR = BR_;
    static constexpr int STAGES = 4;
    static constexpr int SLAB_BYTES = 64 * BR * 2; // 64 columns x BR rows of bf16
    static constexpr int G_BYTES = (BM / 64) * SLAB_BYTES;
    static constexpr int A_BYTES = (WG_BN / 64) * SLAB_BYTES;
    static constexpr int STAGE_BYTES = G_BYTES + A_BYTES;
    static constexpr int CHUNK_COLS = 64; // staging columns a warp
    static constexpr int STAGING_FLOATS = 16 * CHUNK_COLS;
    static constexpr int STAGING_BYTES = 8 * STAGING_FLOATS * 4;
    static constexpr int SMEM_BYTES = 1024 + STAGES * STAGE_BYTES + STAGING_BYTES + 2 * STAGES * 8;
    static_assert(BR % 16 == 0, "k-blocks of whole 16-row k steps (two 8-row swizzle atoms)");
    static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per CTA on sm_90");
};

struct wgrad_params {
    int n, k;                        // dW [experts, n, k]
    int tiles_n, tiles_k, units;     // units = experts * tiles_n * tiles_k
    const int64_t *offsets, *counts; // the plan's, on the device
    void *dw;
    long long lddw;                  // elements between rows of dW; an expert's dW is n * lddw
    int dw_f32;                      // 1: fp32 dW, 0: bf16
    int pair_ok;                     // dW's (row, c), (row, c + 1) for even c are one aligned 8- or 4-byte access
    int bulk;                        // interior tiles by bulk copies (asked for; fp32 dW, beta 0, 16-byte rows and base)
    float beta;                      // 0: dW overwritten (never read)
};

// The MN-major descriptor of a stage's operand: 64-column slabs SLAB_BYTES apart along MN (the
// leading byte offset), 8-row atoms 1024 bytes apart along the reduction (the stride byte offset).
// Session 21 (bench/results/2026-12-04-h200-session21/callV5) ran both readings: this one matched
// the oracle, the swapped one did not.
template <class CFG> __device__ __forceinline__ uint64_t wgrad_desc(const uint8_t *tile) {
    return smem_desc_mn_sw128(tile, CFG::SLAB_BYTES, 1024);
}

// Unit u -> (expert, first dW row, first dW column).
__device__ __forceinline__ void wgrad_unit(const wgrad_params &p, int u, int &e, int &n0, int &c0) {
    const int per_expert = p.tiles_n * p.tiles_k;
    e = u / per_expert;
    const int in_expert = u - e * per_expert;
    n0 = (in_expert / p.tiles_k) * BM;
    c0 = (in_expert % p.tiles_k) * WG_BN;
}

// dW's (row, c) and (row, c + 1), bounds-checked; beta * the old values added when beta != 0.
__device__ __forceinline__ void wgrad_store_pair(const wgrad_params &p, int64_t base, int row, int c, float v0,
                                                 float v1) {
    if (row >= p.n || c >= p.k) return;
    const int64_t at = base + (int64_t)row * p.lddw + c;
    const bool both = c + 1 < p.k;
    if (p.dw_f32) {
        float *d = (float *)p.dw + at;
        d[0] = p.beta != 0.0f ? fmaf(p.beta, d[0], v0) : v0;
        if (both) d[1] = p.beta != 0.0f ? fmaf(p.beta, d[1], v1) : v1;
    } else {
        __nv_bfloat16 *d = (__nv_bfloat16 *)p.dw + at;
        d[0] = __float2bfloat16_rn(p.beta != 0.0f ? fmaf(p.beta, __bfloat162float(d[0]), v0) : v0);
        if (both) d[1] = __float2bfloat16_rn(p.beta != 0.0f ? fmaf(p.beta, __bfloat162float(d[1]), v1) : v1);
    }
}

// Before a k-block's wgmmas, by both consumer warpgroups (t: 0 .. 255), when fewer than BR of the
// expert's rows are left (`left`, uniform): rows left .. BR - 1 of every slab zeroed, the zeros
// ordered before the wgmmas' (async proxy) reads, and named barrier 1 waited for by all 256. A row
// of a slab is one 128-byte line whatever the swizzle (it permutes chunks within the row).
template <class CFG> __device__ __forceinline__ void wgrad_mask_tail(uint8_t *stage, int64_t left, int t) {
    constexpr int SLABS = CFG::STAGE_BYTES / CFG::SLAB_BYTES, NT = 256;
    if (left >= CFG::BR) return;
    const int valid = (int)left;
    const int chunks = (CFG::BR - valid) * 8; // 16-byte chunks per slab
    for (int i = t; i < SLABS * chunks; i += NT) {
        const int slab = i / chunks, c = i % chunks;
        *(uint4 *)(stage + slab * CFG::SLAB_BYTES + valid * 128 + c * 16) = make_uint4(0, 0, 0, 0);
    }
    fence_proxy_async_shared();
    named_barrier_sync(1, NT);
}

// The producer thread: each of the CTA's units' k-blocks into the ring, the two G slabs of its
// 128 dW rows, then the four A slabs.
template <class CFG>
__device__ __forceinline__ void wgrad_produce(const wgrad_params &p, uint8_t *smem, uint64_t *full, uint64_t *empty,
                                              const CUtensorMap *map_g, const CUtensorMap *map_a) {
    tma_prefetch_map(map_g);
    tma_prefetch_map(map_a);
    ring_pos r = {0, 0};
    for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
        int e, n0, c0;
        wgrad_unit(p, u, e, n0, c0);
        const int64_t first = p.offsets[e];
        const int blocks = (int)((p.counts[e] + CFG::BR - 1) / CFG::BR);
        for (int i = 0; i < blocks; ++i) {
            const int row = (int)(first + (int64_t)i * CFG::BR);
            mbar_wait(&empty[r.slot], r.phase ^ 1);
            mbar_arrive_expect_tx(&full[r.slot], CFG::STAGE_BYTES);
            uint8_t *st = smem + r.slot * CFG::STAGE_BYTES;
#pragma unroll
            for (int s = 0; s < BM / 64; ++s)
                tma_load_2d(st + s * CFG::SLAB_BYTES, map_g, &full[r.slot], n0 + 64 * s, row);
#pragma unroll
            for (int s = 0; s < WG_BN / 64; ++s)
                tma_load_2d(st + (BM / 64 + s) * CFG::SLAB_BYTES, map_a, &full[r.slot], c0 + 64 * s, row);
            ring_next(r, CFG::STAGES);
        }
    }
}

// One k-block's wgmmas of a consumer warpgroup, as one commit group: its 64 dW rows from the G
// slab at g, the 256 columns from the four A slabs at a; the first k step overwrites acc when
// `first`.
template <class CFG>
__device__ __forceinline__ void wgrad_mma(float *acc, const uint8_t *g, const uint8_t *a, bool first) {
    const uint64_t desc_g = wgrad_desc<CFG>(g);
    const uint64_t desc_a = wgrad_desc<CFG>(a);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < CFG::BR / 16; ++kk) // 16 rows = two 1024-byte atoms a step
        wgmma_m64n256k16_bf16<1, 1>(acc, smem_desc_advance(desc_g, kk * 2048), smem_desc_advance(desc_a, kk * 2048),
                                    (!first || kk > 0) ? 1 : 0);
    wgmma_commit_group();
}

// dW's pair at d (c even, pair_ok): v0, v1, plus beta times the old pair when beta != 0.
__device__ __forceinline__ void wgrad_store_aligned(const wgrad_params &p, void *d, float v0, float v1) {
    if (p.dw_f32) {
        float2 *q = (float2 *)d;
        if (p.beta != 0.0f) {
            const float2 old = *q;
            v0 = fmaf(p.beta, old.x, v0);
            v1 = fmaf(p.beta, old.y, v1);
        }
        *q = make_float2(v0, v1);
    } else {
        __nv_bfloat162 *q = (__nv_bfloat162 *)d;
        if (p.beta != 0.0f) {
            const float2 old = __bfloat1622float2(*q);
            v0 = fmaf(p.beta, old.x, v0);
            v1 = fmaf(p.beta, old.y, v1);
        }
        *q = __floats2bfloat162_rn(v0, v1);
    }
}

// A consumer warp's part of the epilogue: acc[4j + 2h + v] is dW row row0 + 8h, column col0 + 8j + v
// of expert e (row0: the warp's first row + lane / 4; col0: the unit's first column + 2 (lane % 4)).
// interior (uniform: the unit's 128 x 256 tile inside dW and pair_ok): one aligned access a pair,
// no bounds checks.
__device__ __forceinline__ void wgrad_store_tile(const wgrad_params &p, const float *acc, int e, int row0, int col0,
                                                 bool interior) {
    const int64_t base = (int64_t)e * p.n * p.lddw;
    if (interior) {
        const int64_t at = base + (int64_t)row0 * p.lddw + col0, down = 8 * p.lddw;
        const int size = p.dw_f32 ? 4 : 2;
#pragma unroll
        for (int j = 0; j < WG_BN / 8; ++j) {
            wgrad_store_aligned(p, (char *)p.dw + (at + 8 * j) * size, acc[4 * j + 0], acc[4 * j + 1]);
            wgrad_store_aligned(p, (char *)p.dw + (at + down + 8 * j) * size, acc[4 * j + 2], acc[4 * j + 3]);
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < WG_BN / 8; ++j) {
        wgrad_store_pair(p, base, row0, col0 + 8 * j, acc[4 * j + 0], acc[4 * j + 1]);
        wgrad_store_pair(p, base, row0 + 8, col0 + 8 * j, acc[4 * j + 2], acc[4 * j + 3]);
    }
}

// The bulk-store epilogue of one consumer warp (p.bulk, interior tiles): its 16 dW rows (from
// warp_row0) x the unit's 256 columns go through its staging CFG::CHUNK_COLS columns at a time,
// each chunk written to shared memory and then copied to dW by bulk copies (lanes 0-15, one row
// each) that run on while the warp goes on (to the next chunk, or its next unit). Before a chunk
// is written, the lanes wait until their previous copies have read the buffer. Staging rows are a
// multiple of 256 bytes apart, so the fragment's stores meet 8-way bank conflicts (~500 cycles a
// tile, against the several thousand the tile's 128 KB take to reach DRAM).
template <class CFG>
__device__ __forceinline__ void wgrad_bulk_store_tile(const wgrad_params &p, const float *acc, int e, int warp_row0,
                                                      int c0, float *buf, int lane) {
    constexpr int W = CFG::CHUNK_COLS;
    const int r = lane / 4, q = lane % 4;
    float *dst = (float *)p.dw + ((int64_t)e * p.n + warp_row0 + (lane & 15)) * p.lddw + c0;
#pragma unroll
    for (int c = 0; c < WG_BN / W; ++c) {
        if (lane < 16) bulk_wait_read<0>();
        __syncwarp();
#pragma unroll
        for (int jj = 0; jj < W / 8; ++jj) {
            const int j = W / 8 * c + jj;
            *(float2 *)(buf + r * W + 8 * jj + 2 * q) = make_float2(acc[4 * j + 0], acc[4 * j + 1]);
            *(float2 *)(buf + (r + 8) * W + 8 * jj + 2 * q) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
        }
        fence_proxy_async_shared();
        __syncwarp();
        if (lane < 16) {
            bulk_copy_s2g(dst + W * c, buf + (lane & 15) * W, W * 4);
            bulk_commit();
        }
    }
}

template <class CFG>
__global__ void __launch_bounds__(THREADS, 1)
    wgrad_kernel(const __grid_constant__ CUtensorMap map_g, const __grid_constant__ CUtensorMap map_a,
                 const wgrad_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    float *staging = (float *)(smem + CFG::STAGES * CFG::STAGE_BYTES);
    uint64_t *full = (uint64_t *)(smem + CFG::STAGES * CFG::STAGE_BYTES + CFG::STAGING_BYTES);
    uint64_t *empty = full + CFG::STAGES;
    const int warpgroup = threadIdx.x / 128;

    if (threadIdx.x == 0) ring_init(full, empty, CFG::STAGES, 1, 2 * 4);
    __syncthreads();
    pdl_wait(); // the gradients and activations come from the kernels before (pdl.cuh)
    pdl_launch_dependents();

    if (warpgroup == 0) {
        // ---- producer ----
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) wgrad_produce<CFG>(p, smem, full, empty, &map_g, &map_a);
    } else {
        // ---- consumers ----
        setmaxnreg_inc<CONSUMER_REGS>();
        const int half = consumer_half(); // dW rows half*64 .. half*64+63 of the tile
        const int t = threadIdx.x - 128;
        const int warp = (threadIdx.x / 32) % 4;
        const int lane = threadIdx.x % 32;
        float acc[WG_BN / 2];
        ring_pos r = {0, 0};
        for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
            int e, n0, c0;
            wgrad_unit(p, u, e, n0, c0);
            const int64_t count = p.counts[e];
            const int blocks = (int)((count + CFG::BR - 1) / CFG::BR);
#pragma unroll
            for (int i = 0; i < WG_BN / 2; ++i) acc[i] = 0.0f;
            int prev_stage = 0;
            for (int i = 0; i < blocks; ++i) {
                mbar_wait(&full[r.slot], r.phase);
                uint8_t *st = smem + r.slot * CFG::STAGE_BYTES;
                wgrad_mask_tail<CFG>(st, count - (int64_t)i * CFG::BR, t);
                wgrad_mma<CFG>(acc, st + half * CFG::SLAB_BYTES, st + CFG::G_BYTES, i == 0);
                wgmma_wait_group<1>();
                if (i > 0) release_stage<1>(&empty[prev_stage], lane);
                prev_stage = r.slot;
                ring_next(r, CFG::STAGES);
            }
            wgmma_wait_group<0>();
            fence_registers<WG_BN / 2>(acc);
            if (blocks > 0) release_stage<1>(&empty[prev_stage], lane);

            // ---- epilogue ----
            const bool interior = n0 + BM <= p.n && c0 + WG_BN <= p.k;
            if (interior && p.bulk)
                wgrad_bulk_store_tile<CFG>(p, acc, e, n0 + half * 64 + warp * 16, c0,
                                           staging + (t / 32) * CFG::STAGING_FLOATS, lane);
            else
                wgrad_store_tile(p, acc, e, n0 + half * 64 + warp * 16 + lane / 4, c0 + 2 * (lane % 4),
                                 interior && p.pair_ok);
        }
        // The staging stays until the last bulk copies have read it.
        if (lane < 16) bulk_wait_read<0>();
    }
#endif
}

} // namespace moe_hopper

#endif
