// The FP8 block-scaled GEMM of the Hopper engine (DeepSeek-style scaling):
//
//   C[M,N] (bf16) = sum over k-blocks kb of  sa[m][kb] * sb[n/128][kb] * (A8[m, kb] . B8[n, kb])
//
// A8 [M, K] e4m3 with 1x128 fp32 scales sa[M, ceil(K/128)] (FP8_ROW128: activations), B8 [N, K]
// e4m3 with 128x128 fp32 scales sb[ceil(N/128), ceil(K/128)] (FP8_BLOCK128: weights); both
// K-major (wgmma's only layout for FP8), x = code * scale.
//
// Same skeleton as the bf16 kernel (gemm_kernel.cuh; persistent grid, grouped raster, one
// producer and two consumer warpgroups, a STAGES-deep mbarrier ring), with these changes:
//   - BK = 128 elements = 128 bytes: one k-block is exactly one 128-byte swizzle row and one
//     scale block, so a stage holds the A tile (128 x 128 B), the B tile (128 x 128 B) and the
//     stage's scales (128 A scales, one per tile row, and the tile's one B scale: BN = 128).
//   - The scales come from a second producer warp with 4-byte cp.async copies into shared
//     memory (TMA cannot box sa's strided column: a box's inner extent must be >= 16 bytes).
//     Each of its 32 lanes then makes a cp.async.mbarrier.arrive.noinc on `full`, which fires
//     when that lane's copies have landed, so `full` counts 1 + 32 arrivals, the warp never
//     stalls on load latency, and a consumer that waited on `full` reads the scales with
//     ordinary ld.shared.
//   - Promotion: per k-block each consumer warpgroup runs its 4 wgmma m64n128k32 into a fresh
//     register accumulator `part` (first one with accumulate = 0), waits for them, and adds
//     part * sa[row][kb] * sb[kb] into the fp32 accumulator `acc`. The tensor core's reduced-
//     precision accumulation thus never spans more than 128 of K, and every scale is applied
//     in fp32. The FMAs of one warpgroup run while the other warpgroup's wgmmas keep the
//     tensor core busy (the two consumers drift apart by about half a k-block).
//
// Fragment of m64n128 (per warp w of a consumer warpgroup, rows 16w..16w+15 of its 64-row
// half): part[4j + 2h + e] is row lane/4 + 8h, column 8j + 2*(lane%4) + e. So each thread
// needs two A scales per k-block (rows lane/4 and lane/4 + 8) and the one B scale.
#ifndef MOEFUSE_CUDA_HOPPER_GEMM_FP8_KERNEL_CUH
#define MOEFUSE_CUDA_HOPPER_GEMM_FP8_KERNEL_CUH

#include "gemm_kernel.cuh"

namespace moe_hopper {

constexpr int FP8_BM = 128;
constexpr int FP8_BN = 128;  // one B scale block per tile column block
constexpr int FP8_BK = 128;  // one scale block per k-block; 128 bytes = the swizzle row
constexpr int FP8_SCALE_SLOTS = 132;  // per stage: 128 A scales, the B scale, padding to 16 B

// OVERLAP: two partial accumulators per consumer (kb+1's wgmmas run while kb is promoted;
// 64 more registers per thread) instead of one (wait for each k-block, then promote).
template <int STAGES_, bool OVERLAP_ = false> struct fp8_config {
    static constexpr int STAGES = STAGES_;
    static constexpr bool OVERLAP = OVERLAP_;
    static constexpr int A_BYTES = FP8_BM * FP8_BK;  // 16 KB
    static constexpr int B_BYTES = FP8_BN * FP8_BK;  // 16 KB
    static constexpr int TMA_BYTES = A_BYTES + B_BYTES;
    static constexpr int SCALE_BYTES = FP8_SCALE_SLOTS * 4;
    static constexpr int FULL_ARRIVALS = 1 + 32;      // TMA thread + the scale warp's lanes
    static constexpr int EMPTY_ARRIVALS = 2 * 4;      // consumer warps
    static constexpr int SMEM_BYTES = 1024 + STAGES * (TMA_BYTES + SCALE_BYTES) + 2 * STAGES * 8;
    static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per CTA on sm_90");
    static_assert(SCALE_BYTES % 16 == 0, "keeps the barriers 8-byte aligned");
};

struct fp8_params {
    int m, n, k;
    const float *sa;      // [m, lds_a] fp32, column kb = k-block kb
    long long lds_a;
    const float *sb;      // [ceil(n/128), lds_b] fp32
    long long lds_b;
    dense_params out;     // C (bf16), ldc, pair_ok, raster group; out.m/n = m/n
};

// One k-block in flight in a consumer warpgroup: its stage (released after its wgmmas are
// done) and this thread's two combined scales sa[row] * sb for it.
struct fp8_kblock {
    int stage;
    float s_lo, s_hi;
};

// Waits for the next stage, issues its 4 wgmma k32 steps into `part` (overwriting it) as one
// commit group, reads the stage's scales while they run, and advances (stage, phase).
template <class CFG>
__device__ __forceinline__ fp8_kblock fp8_issue(float *part, uint8_t *smem_a, uint8_t *smem_b, const float *smem_scale,
                                                uint64_t *full, int &stage, uint32_t &phase, int half, int r_lo) {
    mbar_wait(&full[stage], phase);
    const uint64_t desc_a = smem_desc_k_sw128(smem_a + stage * CFG::A_BYTES + half * 64 * FP8_BK);
    const uint64_t desc_b = smem_desc_k_sw128(smem_b + stage * CFG::B_BYTES);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < FP8_BK / 32; ++kk)
        wgmma_m64n128k32_e4m3(part, smem_desc_advance(desc_a, kk * 32), smem_desc_advance(desc_b, kk * 32),
                              kk > 0 ? 1 : 0);
    wgmma_commit_group();
    // The stage stays ours (its scales too) until fp8_retire releases it.
    const float *sc = smem_scale + stage * FP8_SCALE_SLOTS;
    const float sb = sc[FP8_BM];
    fp8_kblock kb = {stage, sc[r_lo] * sb, sc[r_lo + 8] * sb};
    if (++stage == CFG::STAGES) {
        stage = 0;
        phase ^= 1;
    }
    return kb;
}

// After a wgmma wait proved `part`'s group complete: release its stage to the producer and
// promote: acc += part * scale, in fp32.
__device__ __forceinline__ void fp8_retire(float *acc, float *part, const fp8_kblock &kb, uint64_t *empty, int lane) {
    fence_registers<64>(part);
    release_stage<1>(&empty[kb.stage], lane);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        acc[4 * j + 0] = fmaf(part[4 * j + 0], kb.s_lo, acc[4 * j + 0]);
        acc[4 * j + 1] = fmaf(part[4 * j + 1], kb.s_lo, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(part[4 * j + 2], kb.s_hi, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(part[4 * j + 3], kb.s_hi, acc[4 * j + 3]);
    }
}

template <class CFG>
__global__ void __launch_bounds__(THREADS, 1)
    fp8_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                    const fp8_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int STAGES = CFG::STAGES;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint8_t *smem_a = smem;                                     // [STAGES][128 rows][128 bytes]
    uint8_t *smem_b = smem + STAGES * CFG::A_BYTES;             // [STAGES][128 rows][128 bytes]
    float *smem_scale = (float *)(smem_b + STAGES * CFG::B_BYTES);  // [STAGES][FP8_SCALE_SLOTS]
    uint64_t *full = (uint64_t *)(smem_scale + STAGES * FP8_SCALE_SLOTS);
    uint64_t *empty = full + STAGES;

    const int warpgroup = threadIdx.x / 128;
    const int warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    const int tiles_m = (p.m + FP8_BM - 1) / FP8_BM;
    const int tiles_n = (p.n + FP8_BN - 1) / FP8_BN;
    const int units = tiles_m * tiles_n;
    const int num_kb = (p.k + FP8_BK - 1) / FP8_BK;

    if (threadIdx.x == 0) {
        ring_init(full, empty, STAGES, CFG::FULL_ARRIVALS, CFG::EMPTY_ARRIVALS);
    }
    __syncthreads();

    if (warpgroup == 0) {
        // ---- producer: warp 0 lane 0 issues the TMA loads, warp 1 loads the scales ----
        setmaxnreg_dec<PRODUCER_REGS>();
        if (warp == 0 && lane == 0) {
            tma_prefetch_map(&map_a);
            tma_prefetch_map(&map_b);
        }
        if ((warp == 0 && lane == 0) || warp == 1) {
            int stage = 0;
            uint32_t phase = 0;
            for (int u = blockIdx.x; u < units; u += gridDim.x) {
                int m_block, n_block;
                raster_unit(u, tiles_m, tiles_n, p.out.group_m, m_block, n_block);
                const int m0 = m_block * FP8_BM, n0 = n_block * FP8_BN;
                for (int kb = 0; kb < num_kb; ++kb) {
                    mbar_wait(&empty[stage], phase ^ 1);
                    if (warp == 0) {
                        mbar_arrive_expect_tx(&full[stage], CFG::TMA_BYTES);
                        tma_load_2d(smem_a + stage * CFG::A_BYTES, &map_a, &full[stage], kb * FP8_BK, m0);
                        tma_load_2d(smem_b + stage * CFG::B_BYTES, &map_b, &full[stage], kb * FP8_BK, n0);
                    } else {
                        // Asynchronous copies that arrive on `full` when they land: the warp
                        // never waits on a global load's latency (~1 us, two k-blocks of math).
                        float *dst = smem_scale + stage * FP8_SCALE_SLOTS;
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            const int r = lane + 32 * i;
                            const int row = m0 + r;
                            // Rows past M read as 0: their products are zero-filled by TMA and never stored.
                            const bool in = row < p.m;
                            cp_async_4(dst + r, in ? p.sa + (long long)row * p.lds_a + kb : p.sa, in ? 4u : 0u);
                        }
                        if (lane == 0) cp_async_4(dst + FP8_BM, p.sb + (long long)(n0 / FP8_BN) * p.lds_b + kb, 4u);
                        cp_async_mbar_arrive_noinc(&full[stage]);
                    }
                    if (++stage == STAGES) {
                        stage = 0;
                        phase ^= 1;
                    }
                }
            }
        }
    } else {
        // ---- consumers ----
        setmaxnreg_inc<CONSUMER_REGS>();
        const int half = warpgroup - 1;           // rows half*64 .. half*64+63 of the tile
        const int r_lo = half * 64 + warp * 16 + lane / 4;  // this thread's rows: r_lo, r_lo + 8
        float acc[64], part[64];
        float part2[CFG::OVERLAP ? 64 : 1];  // the second partial accumulator (OVERLAP only)
        int stage = 0;
        uint32_t phase = 0;
        for (int u = blockIdx.x; u < units; u += gridDim.x) {
            int m_block, n_block;
            raster_unit(u, tiles_m, tiles_n, p.out.group_m, m_block, n_block);
            const int m0 = m_block * FP8_BM, n0 = n_block * FP8_BN;
#pragma unroll
            for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
            if constexpr (!CFG::OVERLAP) {
                for (int kb = 0; kb < num_kb; ++kb) {
                    fp8_kblock kb_now = fp8_issue<CFG>(part, smem_a, smem_b, smem_scale, full, stage, phase, half, r_lo);
                    wgmma_wait_group<0>();
                    fp8_retire(acc, part, kb_now, empty, lane);
                }
            } else {
                // Two partial accumulators: k-block kb+1's wgmmas run while kb's are promoted.
                // Straight-line steady state (every wait_group 1 leaves exactly one group in
                // flight) and an explicit tail, so that ptxas can prove which accumulators
                // are complete when they are read (it serialises the wgmmas otherwise: C7514).
                fp8_kblock even = fp8_issue<CFG>(part, smem_a, smem_b, smem_scale, full, stage, phase, half, r_lo);
                int kb = 0;
                for (; kb + 2 < num_kb; kb += 2) {
                    fp8_kblock odd = fp8_issue<CFG>(part2, smem_a, smem_b, smem_scale, full, stage, phase, half, r_lo);
                    wgmma_wait_group<1>();
                    fp8_retire(acc, part, even, empty, lane);
                    even = fp8_issue<CFG>(part, smem_a, smem_b, smem_scale, full, stage, phase, half, r_lo);
                    wgmma_wait_group<1>();
                    fp8_retire(acc, part2, odd, empty, lane);
                }
                if (kb + 1 < num_kb) {
                    fp8_kblock odd = fp8_issue<CFG>(part2, smem_a, smem_b, smem_scale, full, stage, phase, half, r_lo);
                    wgmma_wait_group<1>();
                    fp8_retire(acc, part, even, empty, lane);
                    wgmma_wait_group<0>();
                    fp8_retire(acc, part2, odd, empty, lane);
                } else {
                    wgmma_wait_group<0>();
                    fp8_retire(acc, part, even, empty, lane);
                }
            }

            // ---- epilogue: registers -> global (bf16) ----
            const int row0 = m0 + r_lo;
            const int col0 = n0 + 2 * (lane % 4);
#pragma unroll
            for (int j = 0; j < 16; ++j) {
                store_pair(p.out, row0, col0 + 8 * j, acc[4 * j + 0], acc[4 * j + 1]);
                store_pair(p.out, row0 + 8, col0 + 8 * j, acc[4 * j + 2], acc[4 * j + 3]);
            }
        }
    }
#endif
}

} // namespace moe_hopper

#endif
