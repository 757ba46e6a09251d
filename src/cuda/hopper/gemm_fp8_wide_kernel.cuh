// The FP8 block-scaled dense GEMM on tiles wider than 128 (gemm_fp8_kernel.cuh's kernel otherwise):
// 128 x BN tiles, BN = 192 in the engine (moe__hopper_gemm_fp8 takes it where the 192-wide tiles
// fill at least MOE__HOPPER_FP8_WIDE_MIN_WAVES waves; gemm_fp8.h), 160 and 144 in the kernel lab.
// Why: each byte a stage brings from L2 feeds more MMAs (0.0130 bytes per MAC at 192 against 0.0156
// at 128). Lab call S1 of session 16 (bench/results/2026-12-04-h200-session16/callS1): 8192^3
// 0.776x cuBLASLt against the 128-wide kernel's 0.674x (tensor pipe 61.8% vs 50.5% busy), the
// deepseek x16-expert shapes +4-8%, and 16-23% slower on one-wave shapes (hence the rule).
//
// What changes against gemm_fp8_kernel.cuh's kernel:
//  - B boxes of BN rows, 5 stages at BN = 192 (211 KB of shared memory with the scales), 6 at 160
//    and 144.
//  - wgmma m64nBNk32 (ptx.cuh's wgmma_e4m3_nt): 4 a k-block per consumer warpgroup into `part`
//    (BN / 2 registers), issued by the engine's fp8_issue.
//  - A tile spans two 128-wide B scale blocks: n0 = BN t starts at an offset of 0..112 into its
//    block (a multiple of 64, 32 or 16 for BN 192, 160, 144; never more than two blocks), so the
//    fragment column blocks j < (128 - offset) / 8 take the first block's scale and the rest the
//    second's. The scale warp copies both B scales (the second read as 0 past the last block:
//    those columns are past n, zero-filled by TMA and never stored); the promotion is compiled
//    for every split the width allows and chosen once per tile (register indices stay constants).
// Everything else (scale ring, persistent grid, grouped raster, epilogue straight from the
// registers) is the 128-wide kernel's.
#ifndef MOEFUSE_CUDA_HOPPER_GEMM_FP8_WIDE_KERNEL_CUH
#define MOEFUSE_CUDA_HOPPER_GEMM_FP8_WIDE_KERNEL_CUH

#include "gemm_fp8_kernel.cuh"

namespace moe_hopper {

template <int BN_, int STAGES_> struct fp8_wide_config {
    static constexpr int BN = BN_;
    static constexpr int STAGES = STAGES_;
    static constexpr int SCALE_STAGES = 2 * STAGES_;
    static constexpr int A_BYTES = FP8_BM * FP8_BK;
    static constexpr int B_BYTES = BN_ * FP8_BK;
    static constexpr int TMA_BYTES = A_BYTES + B_BYTES;
    static constexpr int SCALE_BYTES = FP8_SCALE_SLOTS * 4;
    static constexpr int FULL_ARRIVALS = 1;
    static constexpr int SCALE_FULL_ARRIVALS = 32;
    static constexpr int EMPTY_ARRIVALS = 2 * 4;
    static constexpr int SMEM_BYTES =
        1024 + STAGES * TMA_BYTES + SCALE_STAGES * SCALE_BYTES + 2 * (STAGES + SCALE_STAGES) * 8;
    static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per CTA on sm_90");
    static_assert(B_BYTES % 1024 == 0, "every stage stays 1024-aligned for the swizzle");
};
// The widths and their stage counts (the most that fit 227 KB): the engine's 192, the lab's 160 and 144.
template <int BN> using fp8_wide_cfg = fp8_wide_config<BN, BN == 192 ? 5 : 6>;
// The offsets of a tile's first column into its 128-wide scale block step by this many columns.
__host__ __device__ constexpr int wide_offset_step(int bn) { return bn % 128 & -(bn % 128); }
static_assert(wide_offset_step(192) == 64 && wide_offset_step(160) == 32 && wide_offset_step(144) == 16, "offset steps");
static_assert(128 - wide_offset_step(144) + 144 <= 256 && 128 - wide_offset_step(160) + 160 <= 256 &&
                  128 - wide_offset_step(192) + 192 <= 256,
              "a tile never spans three scale blocks");

// acc += part * scale, the first SPLIT column blocks with the first B scale block's products.
template <int BN, int SPLIT>
__device__ __forceinline__ void wide_promote(float *acc, const float *part, float lo0, float hi0, float lo1, float hi1) {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const float lo = j < SPLIT ? lo0 : lo1, hi = j < SPLIT ? hi0 : hi1;
        acc[4 * j + 0] = fmaf(part[4 * j + 0], lo, acc[4 * j + 0]);
        acc[4 * j + 1] = fmaf(part[4 * j + 1], lo, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(part[4 * j + 2], hi, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(part[4 * j + 3], hi, acc[4 * j + 3]);
    }
}

// The promotion for this tile's split: SPLIT = (128 - offset) / 8 column blocks, the offset a
// multiple of the width's step below 128 (a uniform branch chain once per k-block; each case
// straight-line code).
template <int BN, int OFF = 0>
__device__ __forceinline__ void wide_promote_split(int split, float *acc, const float *part, float lo0, float hi0,
                                                 float lo1, float hi1) {
    if constexpr (OFF < 128) {
        if (split == (128 - OFF) / 8) wide_promote<BN, (128 - OFF) / 8>(acc, part, lo0, hi0, lo1, hi1);
        else wide_promote_split<BN, OFF + wide_offset_step(BN)>(split, acc, part, lo0, hi0, lo1, hi1);
    }
}

template <int BN>
__global__ void __launch_bounds__(THREADS, 1)
    fp8_wide_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                 const fp8_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using CFG = fp8_wide_cfg<BN>;
    constexpr int W_BN = BN, W_J = BN / 8;
    extern __shared__ uint8_t smem_raw[];
    const fp8_smem s = fp8_carve<CFG>(smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023));

    const int warpgroup = threadIdx.x / 128;
    const int warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    const int tiles_m = (p.m + FP8_BM - 1) / FP8_BM;
    const int tiles_n = (p.n + W_BN - 1) / W_BN;
    const int units = tiles_m * tiles_n;
    const int num_kb = (p.k + FP8_BK - 1) / FP8_BK;
    const int scale_blocks_n = (p.n + 127) / 128;

    if (threadIdx.x == 0) fp8_rings_init<CFG>(s);
    __syncthreads();

    if (warpgroup == 0) {
        // ---- producer: warp 0 lane 0 issues the TMA loads, warp 1 copies the scales ----
        setmaxnreg_dec<PRODUCER_REGS>();
        if (warp == 0 && lane == 0) {
            tma_prefetch_map(&map_a);
            tma_prefetch_map(&map_b);
        }
        if ((warp == 0 && lane == 0) || warp == 1) {
            ring_pos r = {0, 0};
            for (int u = blockIdx.x; u < units; u += gridDim.x) {
                int m_block, n_block;
                raster_unit(u, tiles_m, tiles_n, p.out.group_m, m_block, n_block);
                const int m0 = m_block * FP8_BM, n0 = n_block * W_BN;
                for (int kb = 0; kb < num_kb; ++kb) {
                    if (warp == 0) {
                        mbar_wait(&s.empty[r.slot], r.phase ^ 1);
                        mbar_arrive_expect_tx(&s.full[r.slot], CFG::TMA_BYTES);
                        tma_load_2d(s.a + r.slot * CFG::A_BYTES, &map_a, &s.full[r.slot], kb * FP8_BK, m0);
                        tma_load_2d(s.b + r.slot * CFG::B_BYTES, &map_b, &s.full[r.slot], kb * FP8_BK, n0);
                        ring_next(r, CFG::STAGES);
                    } else {
                        mbar_wait(&s.scale_empty[r.slot], r.phase ^ 1);
                        float *dst = s.scale + r.slot * FP8_SCALE_SLOTS;
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            const int row = m0 + lane + 32 * i;
                            const bool in = row < p.m; // rows past M read as 0 and are never stored
                            cp_async_4(dst + lane + 32 * i, in ? p.sa + (long long)row * p.lds_a + kb : p.sa,
                                       in ? 4u : 0u);
                        }
                        if (lane < 2) { // the two B scale blocks the tile spans (the second may be past n)
                            const int nb = n0 / 128 + lane;
                            const bool in = nb < scale_blocks_n;
                            cp_async_4(dst + FP8_BM + lane, in ? p.sb + (long long)nb * p.lds_b + kb : p.sb, in ? 4u : 0u);
                        }
                        cp_async_mbar_arrive_noinc(&s.scale_full[r.slot]);
                        ring_next(r, CFG::SCALE_STAGES);
                    }
                }
            }
        }
    } else {
        // ---- consumers ----
        setmaxnreg_inc<CONSUMER_REGS>();
        const int half = warpgroup - 1;
        const int r_lo = half * 64 + warp * 16 + lane / 4; // this thread's rows: r_lo, r_lo + 8
        float acc[4 * W_J], part[4 * W_J];
        ring_pos tiles = {0, 0}, scales = {0, 0};
        for (int u = blockIdx.x; u < units; u += gridDim.x) {
            int m_block, n_block;
            raster_unit(u, tiles_m, tiles_n, p.out.group_m, m_block, n_block);
            const int m0 = m_block * FP8_BM, n0 = n_block * W_BN;
            const int split = (128 - n0 % 128) / 8; // column blocks of 8 in the first scale block
#pragma unroll
            for (int i = 0; i < 4 * W_J; ++i) acc[i] = 0.0f;
            for (int kb = 0; kb < num_kb; ++kb) {
                // The engine's k-block issue; PAIRED: the scale slot's second B scale (the next
                // 128-column block) comes back as odd_lo / odd_hi.
                const fp8_kblock now = fp8_issue<CFG, true>(part, s, tiles, scales, half, r_lo, lane);
                wgmma_wait_group<0>();
                fence_registers<4 * W_J>(part);
                release_stage<1>(&s.empty[now.stage], lane);
                wide_promote_split<BN>(split, acc, part, now.s_lo, now.s_hi, now.odd_lo, now.odd_hi);
            }
            // ---- epilogue: registers -> global (bf16) ----
            const int row0 = m0 + r_lo;
            const int col0 = n0 + 2 * (lane % 4);
#pragma unroll
            for (int j = 0; j < W_J; ++j) {
                store_pair(p.out, row0, col0 + 8 * j, acc[4 * j + 0], acc[4 * j + 1]);
                store_pair(p.out, row0 + 8, col0 + 8 * j, acc[4 * j + 2], acc[4 * j + 3]);
            }
        }
    }
#endif
}

} // namespace moe_hopper

#endif
