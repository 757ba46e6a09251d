// FP8 ablations (timing only): the engine's dense FP8 kernel (src/cuda/hopper/gemm_fp8_kernel.cuh,
// = fp8v1) with parts taken out, to find which part holds its tensor pipe at ~45% active while
// cuBLASLt's kernel of the same tile, stages and warpgroup split reaches ~80% (Nsight Compute,
// bench/results/2026-12-02-h200-session4/callE1/ncu/). These compute a different function from
// the block-scaled GEMM, so the driver times them without checking them (impl.ablation):
//   fp8a-noscale: no scale copies (`full` counts the TMA thread only); promotion by 1.0.
//   fp8a-nopromo: scales copied and read, but no per-k-block wait and promotion: one wgmma
//                 accumulator over all of K (wait_group 1 releases the previous stage), scaled
//                 once at the end: the loop of a per-tensor FP8 GEMM.
//   fp8a-plain:   both: a plain FP8 GEMM mainloop in this skeleton.
// And one candidate fix, checked like any variant (it computes the block-scaled GEMM):
//   fp8v4:        fp8v1 with the two consumer warpgroups issuing their k-blocks in strict turn
//                 (named barriers 1 and 2): if the tensor pipe runs queued wgmmas in order, one
//                 warpgroup's wait + promotion then overlaps the other's wgmmas instead of both
//                 waiting at the same time (the lockstep hypothesis).
// A copy of the kernel body, kept only until the run is read (then deleted or moved into the
// engine, outcome in docs/hopper_gemm.md).
#include "gemm_fp8_launch.cuh"
#include "lab_fp8.h"

namespace moe_hopper {

__device__ __forceinline__ void named_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <bool SCALES, bool PROMOTE, bool ORDERED>
__global__ void __launch_bounds__(THREADS, 1)
    fp8_ablate_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                      const fp8_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using CFG = fp8_config<6>;
    constexpr int STAGES = CFG::STAGES;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint8_t *smem_a = smem;
    uint8_t *smem_b = smem + STAGES * CFG::A_BYTES;
    float *smem_scale = (float *)(smem_b + STAGES * CFG::B_BYTES);
    uint64_t *full = (uint64_t *)(smem_scale + STAGES * FP8_SCALE_SLOTS);
    uint64_t *empty = full + STAGES;

    const int warpgroup = threadIdx.x / 128;
    const int warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    const int tiles_m = (p.m + FP8_BM - 1) / FP8_BM;
    const int tiles_n = (p.n + FP8_BN - 1) / FP8_BN;
    const int units = tiles_m * tiles_n;
    const int num_kb = (p.k + FP8_BK - 1) / FP8_BK;

    if (threadIdx.x == 0) ring_init(full, empty, STAGES, SCALES ? CFG::FULL_ARRIVALS : 1, CFG::EMPTY_ARRIVALS);
    __syncthreads();

    if (warpgroup == 0) {
        setmaxnreg_dec<PRODUCER_REGS>();
        if (warp == 0 && lane == 0) {
            tma_prefetch_map(&map_a);
            tma_prefetch_map(&map_b);
        }
        if ((warp == 0 && lane == 0) || (SCALES && warp == 1)) {
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
                        float *dst = smem_scale + stage * FP8_SCALE_SLOTS;
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            const int row = m0 + lane + 32 * i;
                            const bool in = row < p.m;
                            cp_async_4(dst + lane + 32 * i, in ? p.sa + (long long)row * p.lds_a + kb : p.sa,
                                       in ? 4u : 0u);
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
        setmaxnreg_inc<CONSUMER_REGS>();
        const int half = warpgroup - 1;
        const int r_lo = half * 64 + warp * 16 + lane / 4;
        float acc[64], part[64];
        bool first_issue = true; // ORDERED: warpgroup 0's first issue waits for nobody
        int stage = 0;
        uint32_t phase = 0;
        for (int u = blockIdx.x; u < units; u += gridDim.x) {
            int m_block, n_block;
            raster_unit(u, tiles_m, tiles_n, p.out.group_m, m_block, n_block);
            const int m0 = m_block * FP8_BM, n0 = n_block * FP8_BN;
#pragma unroll
            for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
            if constexpr (PROMOTE) {
                for (int kb = 0; kb < num_kb; ++kb) {
                    if (ORDERED && !(half == 0 && first_issue)) named_sync(1 + half, 256);
                    first_issue = false;
                    fp8_kblock now = fp8_issue<CFG>(part, smem_a, smem_b, smem_scale, full, stage, phase, half, r_lo);
                    if (ORDERED) named_arrive(2 - half, 256); // the other warpgroup's turn
                    if (!SCALES) now.s_lo = now.s_hi = 1.0f; // the slots were never written
                    wgmma_wait_group<0>();
                    fp8_retire(acc, part, now, empty, lane);
                }
            } else {
                float s = 0.0f;
                int prev = 0;
                for (int kb = 0; kb < num_kb; ++kb) {
                    mbar_wait(&full[stage], phase);
                    const uint64_t da = smem_desc_k_sw128(smem_a + stage * CFG::A_BYTES + half * 64 * FP8_BK);
                    const uint64_t db = smem_desc_k_sw128(smem_b + stage * CFG::B_BYTES);
                    wgmma_fence();
#pragma unroll
                    for (int kk = 0; kk < FP8_BK / 32; ++kk)
                        wgmma_m64n128k32_e4m3(acc, smem_desc_advance(da, kk * 32), smem_desc_advance(db, kk * 32), 1);
                    wgmma_commit_group();
                    if (SCALES) s += smem_scale[stage * FP8_SCALE_SLOTS + r_lo] * smem_scale[stage * FP8_SCALE_SLOTS + FP8_BM];
                    wgmma_wait_group<1>();
                    if (kb > 0) release_stage<1>(&empty[prev], lane);
                    prev = stage;
                    if (++stage == STAGES) {
                        stage = 0;
                        phase ^= 1;
                    }
                }
                wgmma_wait_group<0>();
                fence_registers<64>(acc);
                release_stage<1>(&empty[prev], lane);
                const float f = SCALES ? s : 1.0f;
#pragma unroll
                for (int i = 0; i < 64; ++i) acc[i] *= f;
            }
            const int row0 = m0 + r_lo;
            const int col0 = n0 + 2 * (lane % 4);
#pragma unroll
            for (int j = 0; j < 16; ++j) {
                store_pair(p.out, row0, col0 + 8 * j, acc[4 * j + 0], acc[4 * j + 1]);
                store_pair(p.out, row0 + 8, col0 + 8 * j, acc[4 * j + 2], acc[4 * j + 3]);
            }
        }
        // Warpgroup 1's last turn handed to warpgroup 0 is taken here, so no arrival is left over.
        if (ORDERED && half == 0 && !first_issue) named_sync(1, 256);
    }
#endif
}

template <bool SCALES, bool PROMOTE, bool ORDERED = false>
moe_status ablate_launch(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why, size_t why_len) {
    return fp8_launch_kernel<fp8_config<6>>(fp8_ablate_kernel<SCALES, PROMOTE, ORDERED>, args, stream, why, why_len);
}

} // namespace moe_hopper

extern "C" moe_status lab_gemm_fp8_ablate_noscale(const moe__hopper_gemm_fp8_args *a, cudaStream_t s, char *w, size_t n) {
    return moe_hopper::ablate_launch<false, true>(a, s, w, n);
}
extern "C" moe_status lab_gemm_fp8_ablate_nopromo(const moe__hopper_gemm_fp8_args *a, cudaStream_t s, char *w, size_t n) {
    return moe_hopper::ablate_launch<true, false>(a, s, w, n);
}
extern "C" moe_status lab_gemm_fp8_v4(const moe__hopper_gemm_fp8_args *a, cudaStream_t s, char *w, size_t n) {
    return moe_hopper::ablate_launch<true, true, true>(a, s, w, n);
}
extern "C" moe_status lab_gemm_fp8_ablate_plain(const moe__hopper_gemm_fp8_args *a, cudaStream_t s, char *w, size_t n) {
    return moe_hopper::ablate_launch<false, false>(a, s, w, n);
}
