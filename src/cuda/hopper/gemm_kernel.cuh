// The dense bf16 GEMM of the Hopper engine: C[M,N] = A[M,K] . B[N,K]^T, both operands K-major,
// fp32 accumulation, bf16 or fp32 output.
//
// One CTA per SM (persistent), 384 threads in three warpgroups:
//   warpgroup 0      producer: one thread issues TMA loads of the A tile (128 x 64) and the B
//                    tile (BN x 64) of each k-block into a STAGES-deep ring of shared-memory
//                    stages; registers lowered to PRODUCER_REGS (setmaxnreg.dec).
//   warpgroups 1, 2  consumers: each runs wgmma m64nBNk16 on its 64-row half of the 128 x BN
//                    tile (4 per k-block), accumulators in registers (BN/2 floats per thread),
//                    registers raised to CONSUMER_REGS; then the epilogue stores its half.
// Two mbarriers per stage: `full` (1 producer arrival + the stage's TMA bytes) and `empty`
// (one arrival per consumer warp, of every CTA that reads the stage, once its wgmmas on the
// stage have completed). No __syncthreads inside the tile loop: the roles meet only there.
//
// Tiles are walked in units of CLUSTER_M row blocks x 1 column block (one unit per cluster
// at a time), in a grouped raster: `group_m` unit rows side by side share each B column
// block while it is hot in L2. With CLUSTER_M = 2 the two CTAs of a cluster take adjacent
// row blocks of the same column block, and each loads half of the B tile and multicasts it
// to both (B read once from L2 for two CTAs).
#ifndef MOEFUSE_CUDA_HOPPER_GEMM_KERNEL_CUH
#define MOEFUSE_CUDA_HOPPER_GEMM_KERNEL_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "ptx.cuh"

namespace moe_hopper {

constexpr int BM = 128;     // tile rows: two consumer warpgroups x 64
constexpr int BK = 64;      // K per stage: one 128-byte swizzle row of bf16
constexpr int THREADS = 384;
constexpr int PRODUCER_REGS = 40;  // 128 x 40 + 256 x 232 = 64512 <= 65536 registers per SM
constexpr int CONSUMER_REGS = 232;

template <int BN_, int STAGES_, int CLUSTER_M_> struct dense_config {
    static constexpr int BN = BN_;
    static constexpr int STAGES = STAGES_;
    static constexpr int CLUSTER_M = CLUSTER_M_;
    static constexpr int A_BYTES = BM * BK * 2;
    static constexpr int B_BYTES = BN * BK * 2;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;  // what lands on each CTA's `full` per stage
    static constexpr int B_BOX_ROWS = BN / CLUSTER_M;      // rows of B one CTA loads (and multicasts)
    static constexpr int EMPTY_ARRIVALS = 2 * 4 * CLUSTER_M; // consumer warps reading each stage
    // 1024: slack to align the ring (the 128-byte swizzle pattern repeats every 1024 bytes).
    static constexpr int SMEM_BYTES = 1024 + STAGES * STAGE_BYTES + 2 * STAGES * 8;
    static_assert(BN == 128 || BN == 192 || BN == 256, "BN: the wgmma wrappers exist for 128, 192 and 256");
    static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 or 2 CTAs");
    static_assert(B_BOX_ROWS % 8 == 0 && B_BOX_ROWS <= 256, "TMA box rows");
    static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per CTA on sm_90");
};

struct dense_params {
    int m, n, k;
    void *c;
    long long ldc;  // elements
    int c_f32;      // 1: fp32 output, 0: bf16
    int pair_ok;    // two adjacent outputs can be stored as one 4- or 8-byte access
    int group_m;    // unit rows per raster group
};

// Unit u of the grouped raster -> (unit row, column block). Inside a group, consecutive
// units go down the rows first, so the CTAs of one wave share few B column blocks.
__device__ __forceinline__ void raster_unit(int u, int units_m, int tiles_n, int group_m, int &unit_m,
                                            int &n_block) {
    const int per_group = group_m * tiles_n;
    const int group = u / per_group;
    const int first = group * group_m;
    const int rows = min(units_m - first, group_m);
    const int in_group = u - group * per_group;
    unit_m = first + in_group % rows;
    n_block = in_group / rows;
}

// Two adjacent outputs (row, col) and (row, col + 1) of the tile, bounds-checked.
__device__ __forceinline__ void store_pair(const dense_params &p, int row, int col, float v0, float v1) {
    if (row >= p.m || col >= p.n) return;
    const long long at = (long long)row * p.ldc + col;
    const bool both = col + 1 < p.n;
    if (p.c_f32) {
        float *c = (float *)p.c + at;
        if (both && p.pair_ok) {
            *(float2 *)c = make_float2(v0, v1);
        } else {
            c[0] = v0;
            if (both) c[1] = v1;
        }
    } else {
        __nv_bfloat16 *c = (__nv_bfloat16 *)p.c + at;
        if (both && p.pair_ok) {
            *(__nv_bfloat162 *)c = __floats2bfloat162_rn(v0, v1);
        } else {
            c[0] = __float2bfloat16_rn(v0);
            if (both) c[1] = __float2bfloat16_rn(v1);
        }
    }
}

// A consumer thread's accumulator fragment to C: acc[4j + 2h + e] is row row0 + 8h, column
// col0 + 8j + e (j < J). interior (uniform: the whole tile inside C, C bf16, pairs aligned): one
// plain 4-byte store a pair; otherwise each pair bounds-checked (store_pair, ~10 instructions a
// store). Session 22 (bench/results/2026-12-04-h200-session22, W1-W3): the checked stores were 9%
// of the dense FP8 kernel's stall samples at 8192^3, yet its time did not move without them; the
// K-grouped GEMM's counterpart (wgrad_store_aligned) gained 1.4-1.9x.
template <int J>
__device__ __forceinline__ void store_fragment(const dense_params &p, const float *acc, int row0, int col0,
                                               bool interior) {
    if (interior) {
        __nv_bfloat16 *c = (__nv_bfloat16 *)p.c + (long long)row0 * p.ldc + col0;
        const long long down = 8 * p.ldc;
#pragma unroll
        for (int j = 0; j < J; ++j) {
            *(__nv_bfloat162 *)(c + 8 * j) = __floats2bfloat162_rn(acc[4 * j + 0], acc[4 * j + 1]);
            *(__nv_bfloat162 *)(c + down + 8 * j) = __floats2bfloat162_rn(acc[4 * j + 2], acc[4 * j + 3]);
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < J; ++j) {
        store_pair(p, row0, col0 + 8 * j, acc[4 * j + 0], acc[4 * j + 1]);
        store_pair(p, row0 + 8, col0 + 8 * j, acc[4 * j + 2], acc[4 * j + 3]);
    }
}

// Whether a tile of rows m0 .. m0 + bm - 1 and columns n0 .. n0 + bn - 1 takes store_fragment's
// unchecked stores.
__device__ __forceinline__ bool tile_interior(const dense_params &p, int m0, int n0, int bm, int bn) {
    return m0 + bm <= p.m && n0 + bn <= p.n && p.pair_ok && !p.c_f32;
}

// A position in a ring of `stages` slots: the slot and the parity its barriers are in.
struct ring_pos {
    int slot;
    uint32_t phase;
};

__device__ __forceinline__ void ring_next(ring_pos &r, int stages) {
    if (++r.slot == stages) {
        r.slot = 0;
        r.phase ^= 1;
    }
}

// A consumer thread's warpgroup among the two consumers (0 or 1; the producer is warpgroup 0), read
// from lane 0 so that ptxas knows it warp-uniform and keeps the arithmetic of the shared-memory
// descriptors that depend on it in uniform registers. Worth 8-14% to the dense 128-wide FP8 kernel
// on its own (session 24, lab call Y4: fp8v4u_128 against fp8v4_128).
__device__ __forceinline__ int consumer_half() { return __shfl_sync(0xFFFFFFFFu, (int)threadIdx.x / 128 - 1, 0); }

// A consumer warp is done reading `stage`: tell the producer of every CTA that wrote into it.
template <int CLUSTER_M> __device__ __forceinline__ void release_stage(uint64_t *empty, int lane) {
    if (CLUSTER_M == 1) {
        if (lane == 0) mbar_arrive(empty);
    } else {
        if (lane < CLUSTER_M) mbar_arrive_cluster(empty, (uint32_t)lane);
    }
}

template <class CFG>
__global__ void __launch_bounds__(THREADS, 1)
    dense_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                      const dense_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BN = CFG::BN, STAGES = CFG::STAGES, CLUSTER_M = CFG::CLUSTER_M;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint8_t *smem_a = smem;                          // [STAGES][BM rows][128 bytes]
    uint8_t *smem_b = smem + STAGES * CFG::A_BYTES;  // [STAGES][BN rows][128 bytes]
    uint64_t *full = (uint64_t *)(smem_b + STAGES * CFG::B_BYTES);
    uint64_t *empty = full + STAGES;

    const int warpgroup = threadIdx.x / 128;
    const int tiles_m = (p.m + BM - 1) / BM;
    const int tiles_n = (p.n + BN - 1) / BN;
    const int units_m = (tiles_m + CLUSTER_M - 1) / CLUSTER_M;
    const int units = units_m * tiles_n;
    const int num_kb = (p.k + BK - 1) / BK;
    const int cluster_id = blockIdx.x / CLUSTER_M;
    const int clusters = gridDim.x / CLUSTER_M;
    const uint32_t cta_rank = CLUSTER_M > 1 ? cluster_cta_rank() : 0;

    if (threadIdx.x == 0) {
        ring_init(full, empty, STAGES, 1, CFG::EMPTY_ARRIVALS);
    }
    // The peer CTA's barriers must exist before our multicast signals them.
    if (CLUSTER_M > 1) cluster_sync();
    else __syncthreads();
    pdl_wait(); // A and B may come from the kernel before (pdl.cuh)
    pdl_launch_dependents();

    if (warpgroup == 0) {
        // ---- producer ----
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(&map_a);
            tma_prefetch_map(&map_b);
            ring_pos r = {0, 0};
            for (int u = cluster_id; u < units; u += clusters) {
                int unit_m, n_block;
                raster_unit(u, units_m, tiles_n, p.group_m, unit_m, n_block);
                const int m0 = (unit_m * CLUSTER_M + (int)cta_rank) * BM;
                const int n0 = n_block * BN;
                for (int kb = 0; kb < num_kb; ++kb) {
                    mbar_wait(&empty[r.slot], r.phase ^ 1);
                    mbar_arrive_expect_tx(&full[r.slot], CFG::STAGE_BYTES);
                    tma_load_2d(smem_a + r.slot * CFG::A_BYTES, &map_a, &full[r.slot], kb * BK, m0);
                    if (CLUSTER_M == 1) {
                        tma_load_2d(smem_b + r.slot * CFG::B_BYTES, &map_b, &full[r.slot], kb * BK, n0);
                    } else {
                        const int part = (int)cta_rank * CFG::B_BOX_ROWS;
                        tma_load_2d_multicast(smem_b + r.slot * CFG::B_BYTES + part * BK * 2, &map_b, &full[r.slot],
                                              kb * BK, n0 + part, (uint16_t)((1u << CLUSTER_M) - 1));
                    }
                    ring_next(r, STAGES);
                }
            }
        }
    } else {
        // ---- consumers ----
        setmaxnreg_inc<CONSUMER_REGS>();
        const int half = consumer_half(); // rows half*64 .. half*64+63 of the tile
        const int warp = (threadIdx.x / 32) % 4;
        const int lane = threadIdx.x % 32;
        float acc[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
        ring_pos r = {0, 0};
        for (int u = cluster_id; u < units; u += clusters) {
            int unit_m, n_block;
            raster_unit(u, units_m, tiles_n, p.group_m, unit_m, n_block);
            const int m0 = (unit_m * CLUSTER_M + (int)cta_rank) * BM;
            const int n0 = n_block * BN;
            int prev_stage = 0;
            for (int kb = 0; kb < num_kb; ++kb) {
                mbar_wait(&full[r.slot], r.phase);
                const uint64_t desc_a = smem_desc_k_sw128(smem_a + r.slot * CFG::A_BYTES + half * 64 * BK * 2);
                const uint64_t desc_b = smem_desc_k_sw128(smem_b + r.slot * CFG::B_BYTES);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk)
                    wgmma_bf16<BN>(acc, smem_desc_advance(desc_a, kk * 32), smem_desc_advance(desc_b, kk * 32),
                                   (kb > 0 || kk > 0) ? 1 : 0);
                wgmma_commit_group();
                // Keep this k-block's wgmmas in flight; the previous block's are done now.
                wgmma_wait_group<1>();
                if (kb > 0) release_stage<CLUSTER_M>(&empty[prev_stage], lane);
                prev_stage = r.slot;
                ring_next(r, STAGES);
            }
            wgmma_wait_group<0>();
            fence_registers<BN / 2>(acc);
            release_stage<CLUSTER_M>(&empty[prev_stage], lane);

            // ---- epilogue: registers -> global ----
            // Accumulator fragment of m64nN (per warp: rows 16*warp .. +15 of the half):
            // acc[4j + 2h + e] is row lane/4 + 8h, column 8j + 2*(lane%4) + e.
            store_fragment<BN / 8>(p, acc, m0 + half * 64 + warp * 16 + lane / 4, n0 + 2 * (lane % 4),
                                   tile_interior(p, m0, n0, BM, BN));
        }
    }
    // No CTA may leave while its peer can still multicast into it or arrive on its barriers.
    // (The producer warp diverged around its one issuing thread: reconverge before the
    // warp-aligned cluster barrier.)
    if (CLUSTER_M > 1) {
        __syncwarp();
        cluster_sync();
    }
#endif
}

} // namespace moe_hopper

#endif
