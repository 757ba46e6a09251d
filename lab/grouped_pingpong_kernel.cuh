// Lab copy (issue 4): the bf16 grouped expert GEMM with the two consumer warpgroups on
// alternate tiles ("pingpong"), so that one warpgroup's epilogue runs under the other's MMAs.
//
// Why: the shipped kernel (src/cuda/hopper/grouped_kernel.cuh) splits each 128 x 256 tile
// between its two consumer warpgroups (64 rows each), so both finish their MMAs together and
// both run the staged epilogue while the tensor cores idle: 4-7 us a tile, 20-40% of the tile
// time at the MoE shapes' small K (src/cuda/NOTES.md, sessions 11-12).
//
// What changes against the shipped kernel:
//  - Tile 128 x 128 (A 16 KB + B 16 KB a stage, 6 stages). Each consumer warpgroup owns whole
//    tiles: both 64-row halves (2 x m64n128k16 a k step), 2 x 64 = 128 accumulators a thread,
//    the registers the shipped kernel's 64 x 256 half used.
//  - The CTA's units alternate between the warpgroups: unit j of the CTA (j = 0, 1, ...) goes to
//    warpgroup j % 2. The producer fills the ring in unit order, so unit j's k-blocks occupy
//    ring positions j * num_kb .. j * num_kb + num_kb - 1, and each warpgroup starts its unit at
//    that position (skipping the other's stages).
//  - A turn barrier orders the mainloops: a warpgroup starts unit j's MMAs only after the other
//    has waited on every stage of unit j - 1. That keeps the tensor cores on one tile at a time,
//    and keeps a warpgroup's `full` waits at most one ring phase ahead of the fills (a parity
//    wait two phases ahead would pass early).
//  - Empty barriers count the 4 warps of one warpgroup (one reader per stage); the turn barriers
//    lane 0 of each of the other warpgroup's 4 warps.
// The epilogue is the shipped staged one (4 chunks of 32 columns a 64-row half); lab probes: from
// the fragment (EPI_REGS), none (EPI_NONE), the staged one's probes (EPI_STAGED_NOTABLE, _NOSTORE);
// TRACE records clock64() at 5 points of each unit.
//
// Outcome (session 13, bench/results/2026-12-03-h200-session13/, src/cuda/NOTES.md): no gain. The
// mainloop alone is within 3-7% of the shipped one on qwen3/gpt-oss/mixtral, but an epilogue that
// runs beside the other warpgroup's MMAs takes about twice as long as the same work a warp in the
// shipped kernel (trace, qwen3 T=16384: GEMM2 epilogue 11.8k cycles against a 6.1k-cycle
// mainloop), so the pair is bound by the epilogue. Forms tried and deleted: the ticket schedule
// (it hung; not debugged) and the row table loaded during the mainloop (no change).
#ifndef MOEFUSE_LAB_GROUPED_PINGPONG_KERNEL_CUH
#define MOEFUSE_LAB_GROUPED_PINGPONG_KERNEL_CUH

#include "hopper/grouped_kernel.cuh"

namespace moe_hopper {

constexpr int PP_BN = 128;
constexpr int PP_STAGES = 6;
constexpr int PP_A_BYTES = BM * BK * 2;
constexpr int PP_B_BYTES = PP_BN * BK * 2;
// Ring, then full/empty barriers, 2 turn barriers and the staged epilogue's buffers; 1024 of
// slack to align the ring.
constexpr int PP_SMEM_BYTES = 1024 + PP_STAGES * (PP_A_BYTES + PP_B_BYTES) + (2 * PP_STAGES + 2) * 8 +
                              STAGED_EXTRA_BYTES;
static_assert(PP_SMEM_BYTES <= 227 * 1024, "shared memory per CTA on sm_90");

// A ring position -> (stage, parity of its fill).
__device__ __forceinline__ void pp_position(int64_t it, int &stage, uint32_t &phase) {
    stage = (int)(it % PP_STAGES);
    phase = (uint32_t)((it / PP_STAGES) & 1);
}

// The tile's epilogue for one warpgroup: EPI_STAGED (the shipped one), EPI_REGS (from the
// fragment, no shared memory; the activation chosen once a tile) or EPI_NONE (lab probes).
template <int MODE, int EPI>
__device__ __forceinline__ void pp_epilogue(const grouped_params &p, float (&acc)[2][PP_BN / 2], int e, int m_block,
                                            int n0, int warp, int lane, float *stage_buf, uint8_t *info) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int64_t warp_row = (int64_t)m_block * BM + h * 64 + warp * 16;
        if (epi_staged(EPI)) {
            staged_epilogue<MODE, PP_BN, __nv_bfloat16, EPI>(p, acc[h], e, warp_row, n0, lane, stage_buf, info);
        } else if (EPI == EPI_NONE || MODE == GEMM_DOWN) {
            regs_epilogue<MODE, EPI, 0, PP_BN>(p, acc[h], e, warp_row + lane / 4, n0, lane % 4);
        } else {
            switch (p.activation) {
            case MOE_ACT_SWIGLU: regs_epilogue<MODE, EPI_REGS_ACT, MOE_ACT_SWIGLU, PP_BN>(p, acc[h], e, warp_row + lane / 4, n0, lane % 4); break;
            case MOE_ACT_GEGLU: regs_epilogue<MODE, EPI_REGS_ACT, MOE_ACT_GEGLU, PP_BN>(p, acc[h], e, warp_row + lane / 4, n0, lane % 4); break;
            case MOE_ACT_GEGLU_TANH: regs_epilogue<MODE, EPI_REGS_ACT, MOE_ACT_GEGLU_TANH, PP_BN>(p, acc[h], e, warp_row + lane / 4, n0, lane % 4); break;
            case MOE_ACT_REGLU: regs_epilogue<MODE, EPI_REGS_ACT, MOE_ACT_REGLU, PP_BN>(p, acc[h], e, warp_row + lane / 4, n0, lane % 4); break;
            case MOE_ACT_RELU2: regs_epilogue<MODE, EPI_REGS_ACT, MOE_ACT_RELU2, PP_BN>(p, acc[h], e, warp_row + lane / 4, n0, lane % 4); break;
            case MOE_ACT_SWIGLU_OAI: regs_epilogue<MODE, EPI_REGS_ACT, MOE_ACT_SWIGLU_OAI, PP_BN>(p, acc[h], e, warp_row + lane / 4, n0, lane % 4); break;
            }
        }
    }
}

// TRACE (lab): thread 0 of each consumer warpgroup of CTAs 0 .. PP_TRACE_CTAS - 1 writes clock64()
// at 5 points of each of its units into pp_trace: loop top (before the turn wait), after the turn
// wait, after the k-loop's issue, after the final wgmma wait, after the epilogue.
constexpr int PP_TRACE_CTAS = 4, PP_TRACE_UNITS = 256, PP_TRACE_POINTS = 5;
__device__ long long pp_trace[PP_TRACE_CTAS][2][PP_TRACE_UNITS][PP_TRACE_POINTS];

template <int MODE, int EPI = EPI_STAGED, bool TRACE = false>
__global__ void __launch_bounds__(THREADS, 1)
    grouped_pingpong_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                            const __grid_constant__ CUtensorMap map_b_tail, const grouped_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint8_t *smem_a = smem;                            // [STAGES][128 rows][128 bytes]
    uint8_t *smem_b = smem + PP_STAGES * PP_A_BYTES;   // [STAGES][128 rows][128 bytes]
    uint64_t *full = (uint64_t *)(smem_b + PP_STAGES * PP_B_BYTES);
    uint64_t *empty = full + PP_STAGES;
    uint64_t *turn = empty + PP_STAGES; // turn[w]: warpgroup w may start its next mainloop
    uint8_t *staging = (uint8_t *)(turn + 2);
    uint8_t *row_info = staging + CONSUMER_WARPS * STAGE_WARP_BYTES;

    const int warpgroup = threadIdx.x / 128;
    const int units_m = live_blocks(p);
    const int units = units_m * p.tiles_n;
    const int num_kb = (p.k + BK - 1) / BK;

    if (threadIdx.x == 0) {
        ring_init(full, empty, PP_STAGES, 1, 4);
        mbar_init(&turn[0], 4); // lane 0 of each warp of the other warpgroup
        mbar_init(&turn[1], 4);
        fence_mbarrier_init();
    }
    __syncthreads();

    if (warpgroup == 0) {
        // ---- producer: one thread, every unit's k-blocks in order ----
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(&map_a);
            tma_prefetch_map(&map_b);
            tma_prefetch_map(&map_b_tail);
            int stage = 0;
            uint32_t phase = 0;
            for (int u = blockIdx.x; u < units;) {
                int m_block, n_block;
                raster_unit(u, units_m, p.tiles_n, p.group_m, m_block, n_block);
                const int e = p.block_expert[m_block];
                const bool tail = p.b_tail_rows > 0 && n_block == p.tiles_n - 1;
                const uint32_t b_bytes = (uint32_t)(tail ? p.b_tail_rows : PP_BN) * BK * 2;
                const CUtensorMap *mb = tail ? &map_b_tail : &map_b;
                const int b_row = e * p.n + n_block * PP_BN;
                for (int kb = 0; kb < num_kb; ++kb) {
                    mbar_wait(&empty[stage], phase ^ 1);
                    mbar_arrive_expect_tx(&full[stage], PP_A_BYTES + b_bytes);
                    tma_load_2d(smem_a + stage * PP_A_BYTES, &map_a, &full[stage], kb * BK, m_block * BM);
                    tma_load_2d(smem_b + stage * PP_B_BYTES, mb, &full[stage], kb * BK, b_row);
                    if (++stage == PP_STAGES) {
                        stage = 0;
                        phase ^= 1;
                    }
                }
                u += (int)gridDim.x;
            }
        }
    } else {
        // ---- consumers: warpgroup wg takes the CTA's units wg, wg + 2, ... ----
        setmaxnreg_inc<CONSUMER_REGS>();
        const int wg = warpgroup - 1;
        const int warp = (threadIdx.x / 32) % 4;
        const int lane = threadIdx.x % 32;
        const int cw = wg * 4 + warp;
        float acc[2][PP_BN / 2]; // [64-row half][m64n128 fragment]
        uint32_t turn_phase = 0;
        const bool tracer = TRACE && threadIdx.x % 128 == 0 && blockIdx.x < PP_TRACE_CTAS;
        for (int j = wg;; j += 2) {
            int u = blockIdx.x + j * (int)gridDim.x;
            if (u >= units) break;
            long long *tr = tracer && j / 2 < PP_TRACE_UNITS ? pp_trace[blockIdx.x][wg][j / 2] : nullptr;
            if (tr) tr[0] = clock64();
            if (j > 0) { // the other warpgroup has waited on every stage of unit j - 1
                mbar_wait(&turn[wg], turn_phase);
                turn_phase ^= 1;
            }
            if (tr) tr[1] = clock64();
            int stage; // the ring position of this unit's first k-block: j * num_kb
            uint32_t phase;
            pp_position((int64_t)j * num_kb, stage, phase);
            int m_block, n_block;
            raster_unit(u, units_m, p.tiles_n, p.group_m, m_block, n_block);
            int prev_stage = 0;
            for (int kb = 0; kb < num_kb; ++kb) {
                mbar_wait(&full[stage], phase);
                const uint64_t desc_a0 = smem_desc_k_sw128(smem_a + stage * PP_A_BYTES);
                const uint64_t desc_a1 = smem_desc_k_sw128(smem_a + stage * PP_A_BYTES + 64 * BK * 2);
                const uint64_t desc_b = smem_desc_k_sw128(smem_b + stage * PP_B_BYTES);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk) {
                    const int accumulate = (kb > 0 || kk > 0) ? 1 : 0;
                    wgmma_bf16<PP_BN>(acc[0], smem_desc_advance(desc_a0, kk * 32), smem_desc_advance(desc_b, kk * 32),
                                      accumulate);
                    wgmma_bf16<PP_BN>(acc[1], smem_desc_advance(desc_a1, kk * 32), smem_desc_advance(desc_b, kk * 32),
                                      accumulate);
                }
                wgmma_commit_group();
                wgmma_wait_group<1>();
                if (kb > 0) release_stage<1>(&empty[prev_stage], lane);
                prev_stage = stage;
                if (++stage == PP_STAGES) {
                    stage = 0;
                    phase ^= 1;
                }
            }
            // Every stage of this unit has been waited on: the other warpgroup's turn.
            if (tr) tr[2] = clock64();
            if (lane == 0) mbar_arrive(&turn[wg ^ 1]);
            wgmma_wait_group<0>();
            fence_registers<PP_BN / 2>(acc[0]);
            fence_registers<PP_BN / 2>(acc[1]);
            if (tr) tr[3] = clock64();
            release_stage<1>(&empty[prev_stage], lane);

            pp_epilogue<MODE, EPI>(p, acc, p.block_expert[m_block], m_block, n_block * PP_BN, warp, lane,
                                   (float *)(staging + cw * STAGE_WARP_BYTES), row_info + cw * ROWINFO_WARP_BYTES);
            if (tr) tr[4] = clock64();
        }
    }
#endif
}

// grouped_prepare for the 128-wide tile: B boxes of 128 rows (the tail's n % 128), tiles_n and
// the raster group for 128 columns.
inline CUresult grouped_pingpong_prepare(const gemm_args *g, int sms, CUtensorMap *map_a, CUtensorMap *map_b,
                                         CUtensorMap *map_b_tail, grouped_params *p, unsigned *ctas) {
    const int tail = (int)(g->n % PP_BN);
    CUresult cr = make_tensor_map(map_b, g->b, g->experts * g->n, g->k, g->k, PP_BN);
    if (cr == CUDA_SUCCESS) {
        if (tail) cr = make_tensor_map(map_b_tail, g->b, g->experts * g->n, g->k, g->k, tail);
        else *map_b_tail = *map_b;
    }
    if (cr == CUDA_SUCCESS) cr = make_tensor_map(map_a, g->a, g->rows, g->k, g->lda, BM);
    if (cr != CUDA_SUCCESS) return cr;
    grouped_plan_params(g, sms, PP_BN, p);
    p->b_tail_rows = tail;
    p->x = nullptr;
    p->unit_counter = nullptr;
    p->ldx = g->lda;
    p->top_k = g->top_k;
    p->out_bf16 = g->out_bf16;
    const int64_t bound = (g->rows + BM - 1) / BM * p->tiles_n;
    *ctas = (unsigned)(bound < sms ? bound : sms);
    return CUDA_SUCCESS;
}

template <int MODE, int EPI = EPI_STAGED, bool TRACE = false>
cudaError_t grouped_pingpong_launch(const CUtensorMap &map_a, const CUtensorMap &map_b, const CUtensorMap &map_b_tail,
                                    const grouped_params &p, unsigned ctas, cudaStream_t stream) {
    static bool ready = false;
    if (!ready) {
        cudaError_t err = cudaFuncSetAttribute(grouped_pingpong_kernel<MODE, EPI, TRACE>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, PP_SMEM_BYTES);
        if (err != cudaSuccess) return err;
        ready = true;
    }
    grouped_pingpong_kernel<MODE, EPI, TRACE><<<ctas, THREADS, PP_SMEM_BYTES, stream>>>(map_a, map_b, map_b_tail, p);
    return cudaGetLastError();
}

} // namespace moe_hopper

#endif
