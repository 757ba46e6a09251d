// fp8v3 (session 15; written without a GPU, compile-checked only): the FP8 block-scaled kernel
// with 128 x 192 tiles instead of 128 x 128 (fp8v3_160, fp8v3_144: 160- and 144-wide ones, the
// width cuBLASLt picks), so that each byte a stage brings from L2 feeds more MMAs. Why (bench/results/2026-12-03-h200-session15/callR5/out/prof/, ncu at 8192^3, clocks as
// found): the engine's fp8_gemm_kernel keeps the tensor pipe ~50% busy where cuBLASLt's
// nvjet_sm90_qqtst_144x128_128x6_1x2 kernel keeps it 92% busy; both sit at ~70% of a memory
// throughput ceiling, and cuBLASLt's 144-wide tiles in clusters of 2 (one operand multicast) need
// ~0.011 bytes from L2 per MAC against our 0.0156. A 128 x 192 tile needs 0.0130 (-17%) without
// clusters; the promotion still fits the registers (96 partial + 96 accumulators a thread, where a
// 256-wide tile would need 256).
//
// What changes against the engine's kernel (src/cuda/hopper/gemm_fp8_kernel.cuh):
//  - B boxes of BN rows, 5 stages at BN = 192 (211 KB of shared memory with the scales), 6 at 160
//    and 144.
//  - wgmma m64nBNk32: 4 a k-block per consumer warpgroup into `part` (BN / 2 registers).
//  - A tile spans two 128-wide B scale blocks: n0 = BN t starts at an offset of 0..112 into its
//    block (a multiple of 64, 32 or 16 for BN 192, 160, 144; never more than two blocks), so the
//    fragment column blocks j < (128 - offset) / 8 take the first block's scale and the rest the
//    second's. The scale warp copies both B scales (the second read as 0 past the last block:
//    those columns are past n, zero-filled by TMA and never stored); the promotion is compiled
//    for every split the width allows and chosen once per tile (register indices stay constants).
// Everything else (scale ring, persistent grid, grouped raster, epilogue straight from the
// registers) is the engine's.
#include "gemm_fp8_launch.cuh"
#include "lab_fp8.h"

namespace moe_hopper {

// D[64 x N] (+)= A[64 x 32] . B[N x 32]^T, N = 144, 160 or 192: e4m3 from shared memory (both
// K-major), N / 2 fp32 accumulators per thread in the m64nN fragment layout (column 8j + 2*(lane%4) + e
// of rows lane/4 + 8h in d[4j + 2h + e]). accumulate = 0 overwrites D.
template <int N> __device__ __forceinline__ void wgmma_e4m3_wide(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate);
template <> __device__ __forceinline__ void wgmma_e4m3_wide<144>(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %74, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n144k32.f32.e4m3.e4m3 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71}, "
                 "%72, %73, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
template <> __device__ __forceinline__ void wgmma_e4m3_wide<160>(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n160k32.f32.e4m3.e4m3 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}, "
                 "%80, %81, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
template <> __device__ __forceinline__ void wgmma_e4m3_wide<192>(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, "
                 "%96, %97, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <int BN_, int STAGES_> struct fp8w_config {
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
// The lab's widths and their stage counts (the most that fit 227 KB).
template <int BN> using fp8v3_config = fp8w_config<BN, BN == 192 ? 5 : 6>;
// The offsets of a tile's first column into its 128-wide scale block step by this many columns.
__host__ __device__ constexpr int v3_offset_step(int bn) { return bn % 128 & -(bn % 128); }
static_assert(v3_offset_step(192) == 64 && v3_offset_step(160) == 32 && v3_offset_step(144) == 16, "offset steps");
static_assert(128 - v3_offset_step(144) + 144 <= 256 && 128 - v3_offset_step(160) + 160 <= 256 &&
                  128 - v3_offset_step(192) + 192 <= 256,
              "a tile never spans three scale blocks");

// acc += part * scale, the first SPLIT column blocks with the first B scale block's products.
template <int BN, int SPLIT>
__device__ __forceinline__ void v3_promote(float *acc, const float *part, float lo0, float hi0, float lo1, float hi1) {
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
__device__ __forceinline__ void v3_promote_split(int split, float *acc, const float *part, float lo0, float hi0,
                                                 float lo1, float hi1) {
    if constexpr (OFF < 128) {
        if (split == (128 - OFF) / 8) v3_promote<BN, (128 - OFF) / 8>(acc, part, lo0, hi0, lo1, hi1);
        else v3_promote_split<BN, OFF + v3_offset_step(BN)>(split, acc, part, lo0, hi0, lo1, hi1);
    }
}

template <int BN>
__global__ void __launch_bounds__(THREADS, 1)
    fp8v3_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                 const fp8_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using CFG = fp8v3_config<BN>;
    constexpr int V3_BN = BN, V3_J = BN / 8;
    extern __shared__ uint8_t smem_raw[];
    const fp8_smem s = fp8_carve<CFG>(smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023));

    const int warpgroup = threadIdx.x / 128;
    const int warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    const int tiles_m = (p.m + FP8_BM - 1) / FP8_BM;
    const int tiles_n = (p.n + V3_BN - 1) / V3_BN;
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
                const int m0 = m_block * FP8_BM, n0 = n_block * V3_BN;
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
        float acc[4 * V3_J], part[4 * V3_J];
        ring_pos tiles = {0, 0}, scales = {0, 0};
        for (int u = blockIdx.x; u < units; u += gridDim.x) {
            int m_block, n_block;
            raster_unit(u, tiles_m, tiles_n, p.out.group_m, m_block, n_block);
            const int m0 = m_block * FP8_BM, n0 = n_block * V3_BN;
            const int split = (128 - n0 % 128) / 8; // column blocks of 8 in the first scale block
#pragma unroll
            for (int i = 0; i < 4 * V3_J; ++i) acc[i] = 0.0f;
            for (int kb = 0; kb < num_kb; ++kb) {
                mbar_wait(&s.full[tiles.slot], tiles.phase);
                const uint64_t desc_a = smem_desc_k_sw128(s.a + tiles.slot * CFG::A_BYTES + half * 64 * FP8_BK);
                const uint64_t desc_b = smem_desc_k_sw128(s.b + tiles.slot * CFG::B_BYTES);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < FP8_BK / 32; ++kk)
                    wgmma_e4m3_wide<BN>(part, smem_desc_advance(desc_a, kk * 32), smem_desc_advance(desc_b, kk * 32),
                                          kk > 0 ? 1 : 0);
                wgmma_commit_group();
                // While the wgmmas run: this k-block's scales, then the scale slot back.
                mbar_wait(&s.scale_full[scales.slot], scales.phase);
                const float *sc = s.scale + scales.slot * FP8_SCALE_SLOTS;
                const float a_lo = sc[r_lo], a_hi = sc[r_lo + 8], sb0 = sc[FP8_BM], sb1 = sc[FP8_BM + 1];
                float lo0 = a_lo * sb0, hi0 = a_hi * sb0, lo1 = a_lo * sb1, hi1 = a_hi * sb1;
                asm volatile("" : "+f"(lo0), "+f"(hi0), "+f"(lo1), "+f"(hi1)::"memory");
                release_stage<1>(&s.scale_empty[scales.slot], lane);
                ring_next(scales, CFG::SCALE_STAGES);
                const int stage = tiles.slot;
                ring_next(tiles, CFG::STAGES);
                wgmma_wait_group<0>();
                fence_registers<4 * V3_J>(part);
                release_stage<1>(&s.empty[stage], lane);
                v3_promote_split<BN>(split, acc, part, lo0, hi0, lo1, hi1);
            }
            // ---- epilogue: registers -> global (bf16) ----
            const int row0 = m0 + r_lo;
            const int col0 = n0 + 2 * (lane % 4);
#pragma unroll
            for (int j = 0; j < V3_J; ++j) {
                store_pair(p.out, row0, col0 + 8 * j, acc[4 * j + 0], acc[4 * j + 1]);
                store_pair(p.out, row0 + 8, col0 + 8 * j, acc[4 * j + 2], acc[4 * j + 3]);
            }
        }
    }
#endif
}

} // namespace moe_hopper

using namespace moe_hopper;

extern "C" moe_status lab_gemm_fp8_v3(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len) {
    return fp8_launch_kernel<fp8v3_config<192>>(fp8v3_kernel<192>, 192, args, stream, why, why_len);
}
extern "C" moe_status lab_gemm_fp8_v3_160(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len) {
    return fp8_launch_kernel<fp8v3_config<160>>(fp8v3_kernel<160>, 160, args, stream, why, why_len);
}
extern "C" moe_status lab_gemm_fp8_v3_144(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len) {
    return fp8_launch_kernel<fp8v3_config<144>>(fp8v3_kernel<144>, 144, args, stream, why, why_len);
}
