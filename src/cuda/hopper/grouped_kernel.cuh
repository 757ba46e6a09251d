// The grouped expert GEMM kernel of the Hopper engine (used by src/cuda/gemm_hopper.cu and by
// the grouped kernel lab, lab/grouped_lab.cu): the dense kernel's mainloop (TMA producer
// warpgroup, two wgmma consumer warpgroups, mbarrier ring, persistent grid, grouped raster)
// walking the dispatch plan's row blocks, with the forward's epilogues fused in.
//
//  - Row block b (128 plan rows, all of one expert: the plan is built with block 128) is
//    owned by expert e = block_expert[b]. The live blocks are offsets[experts] / 128, read on
//    the device by every CTA at start: the grid is the host bound (#SMs), no host sync. Units
//    (row block, column tile) in the grouped raster order; each CTA takes the next from a ticket
//    counter (DYN, below) or, without one, every gridDim.x-th.
//  - A tiles: GEMM1 reads the permuted copy of x, GEMM2 reads A2; both are plain [rows, K]
//    matrices in plan order, so TMA loads them as in the dense case (A_FILL, a runtime choice:
//    GEMM1's idle producer warps write that copy while the MMAs run, fill_a_rows). GATHER (GEMM1 only): no
//    permuted copy; the whole producer warpgroup gathers the tile's x rows itself (see
//    gather_a_stage), and only B comes by TMA; with DYN its thread 0 takes the tickets and hands
//    them to the other 127 through shared memory and a named barrier.
//  - B tiles: one tensor map over the whole weight stack viewed as 2-D [experts * N, K]; the
//    tile of expert e at column n0 starts at row e * N + n0. The last tile of a row when N is not
//    a multiple of 256 (gpt-oss: 2880 = 11 x 256 + 64) loads only N % 256 rows through a second
//    map (map_b_tail), so no weight bytes of the next expert are read; the tile's other columns
//    are computed on whatever the stage held and dropped by the epilogue (an output column
//    depends on its own B row only).
//  - Epilogues. GEMM1 (GEMM_UP): (x routing weight when weight_on_input) + bias, activation of
//    the interleaved (gate, up) column pairs -> A2 [rows, I] bf16 (RELU2: not gated, A2 has the
//    tile's columns). GEMM2 (GEMM_DOWN): + bias, x routing weight (or shared gate) -> rows
//    out[id] (routed) or out[id - 1] (shared), fp32, or bf16 when out_bf16 (the fp32 value
//    rounded once; EPI_STAGED only, the lab's other epilogues write fp32). Padding rows are not
//    written.
//
// The epilogue variants (template argument EPI): grouped_epilogue.cuh; the parameters, the
// shared-memory budget and the plan lookups: grouped_common.cuh.
#ifndef MOEFUSE_CUDA_HOPPER_GROUPED_KERNEL_CUH
#define MOEFUSE_CUDA_HOPPER_GROUPED_KERNEL_CUH

#include "grouped_epilogue.cuh"

namespace moe_hopper {

// ---- GATHER: the producer warpgroup loads A rows itself --------------------------------------
// TMA cannot gather rows, so 128 threads copy the 128 x 64 bf16 A tile of a stage with 16-byte
// cp.async into the layout TMA's 128-byte swizzle would have written (16-byte chunk c of tile
// row r at chunk c ^ (r % 8) of the row's 128 bytes; the stage base is 1024-byte aligned), so
// the wgmma descriptors are unchanged. Thread t copies chunk t % 8 of rows 32 (t / 32) +
// (t % 32) / 8 + 4i, i = 0..7: each warp instruction covers 4 whole 128-byte rows. Padding rows
// (and columns past k) are zero-filled (src-size 0). Completion: one cp.async.mbarrier.arrive
// .noinc per thread on the stage's `full` barrier (initialised for 1 + 128 arrivals; the 1 is
// the B load's arrive.expect_tx).
constexpr int GATHER_ROWS_PER_THREAD = 8;
// The gathering producer holds its rows' tokens and smem addresses: 56 registers instead of 40
// (40 spilled ~7 words); the consumers, which use ~161 of their 232, give 8 back:
// 128 x 56 + 256 x 224 = 64512 <= 65536.
constexpr int GATHER_PRODUCER_REGS = 56;
constexpr int GATHER_CONSUMER_REGS = 224;

// The x row (token) of each of this thread's rows of the tile starting at plan row m0, or -1
// for padding rows. int32 (tokens < 2^31) to stay inside the producer's 40 registers.
__device__ __forceinline__ void gather_rows_of_tile(const grouped_params &p, int64_t m0, int t,
                                                    int32_t (&token)[GATHER_ROWS_PER_THREAD]) {
    const int row0 = (t / 32) * 32 + (t % 32) / 8;
#pragma unroll
    for (int i = 0; i < GATHER_ROWS_PER_THREAD; ++i) {
        const int64_t id = p.sorted_ids[m0 + row0 + 4 * i];
        token[i] = id == p.padding_id ? -1 : (int32_t)plan_id_token(id, p.padding_id, p.top_k);
    }
}

__device__ __forceinline__ void gather_a_stage(const grouped_params &p, uint8_t *a_stage, int kb, int t,
                                               const int32_t (&token)[GATHER_ROWS_PER_THREAD]) {
    const int row0 = (t / 32) * 32 + (t % 32) / 8, chunk = t % 8;
    const int col = kb * BK + chunk * 8;
    const bool in_k = col < p.k; // k % 8 == 0: a chunk is wholly in or out
    const __nv_bfloat16 *x_col = p.x + col;
#pragma unroll
    for (int i = 0; i < GATHER_ROWS_PER_THREAD; ++i) {
        const int r = row0 + 4 * i;
        const bool live = token[i] >= 0 && in_k;
        cp_async_16(a_stage + r * 128 + ((chunk ^ (r % 8)) << 4), live ? x_col + (int64_t)token[i] * p.ldx : p.x,
                    live ? 16u : 0u);
    }
}

// ---- A_FILL: the permute pass inside GEMM1 ------------------------------------------------------
// With A by TMA, only the producer's thread 0 works; its warps 1-3 (96 threads x #CTAs) copy x's
// rows into the permuted rows p.a_fill while the consumers' MMAs run, instead of a permute kernel
// before the GEMM (537 us, 7% of glm-4.5-air's forward at T = 16384 on the H200: memory-bound work
// that overlaps compute-bound work here). A warp takes the next plan row from a counter
// (rows_ready[0]), so the rows are copied in plan order, the order the tickets reach the blocks,
// and the running CTAs copy every row even if others have not started (no CTA waits on one that
// may not be resident). After a row each lane fences its stores for the async proxy and lane 0
// counts the row in rows_ready[1 + block] with a release; thread 0 acquires a block's count of BM
// before its first A load (wait_rows_ready). The copying warps never wait on anything.
constexpr int FILL_WARPS = 3;       // producer warps 1-3
constexpr int FILL_UNROLL = 4;      // 16-byte loads in flight a lane (the producer has 40 registers)

__device__ __forceinline__ void fill_a_rows(const grouped_params &p) {
    // int32 rows and ids (the plan's, < 2^31) to stay inside the producer's 40 registers.
    const int lane = threadIdx.x % 32;
    const int live = (int)*p.live_rows;
    const int row16 = p.k / 8;              // 16-byte pieces of a row (k % 8 == 0)
    const int pad = (int)p.padding_id;
    const int64_t ldx16 = p.ldx / 8;
    const uint4 *x = (const uint4 *)p.x;
    int r = __shfl_sync(0xFFFFFFFFu, lane == 0 ? atomicAdd(&p.rows_ready[0], 1) : 0, 0);
    while (r < live) {
        // The next row's ticket is taken now; its latency hides behind this row's copy.
        const int next = lane == 0 ? atomicAdd(&p.rows_ready[0], 1) : 0;
        const int id = p.sorted_ids[r];
        uint4 *dst = p.a_fill + (int64_t)r * row16;
        if (id == pad) {
#pragma unroll 1
            for (int c = lane; c < row16; c += 32) dst[c] = make_uint4(0, 0, 0, 0);
        } else {
            const uint4 *src = x + plan_id_token(id, p.padding_id, p.top_k) * ldx16;
            int c = lane;
#pragma unroll 1
            for (; c + 32 * (FILL_UNROLL - 1) < row16; c += 32 * FILL_UNROLL) {
                uint4 v[FILL_UNROLL];
#pragma unroll
                for (int i = 0; i < FILL_UNROLL; ++i) v[i] = src[c + 32 * i];
#pragma unroll
                for (int i = 0; i < FILL_UNROLL; ++i) dst[c + 32 * i] = v[i];
            }
#pragma unroll 1
            for (; c < row16; c += 32) dst[c] = src[c];
        }
        fence_proxy_async_global(); // this lane's stores, before the TMA loads that read them
        __syncwarp();
        if (lane == 0) red_release_gpu_add(&p.rows_ready[1 + r / BM], 1);
        r = __shfl_sync(0xFFFFFFFFu, next, 0);
    }
}

// Thread 0, before the first A load of a unit on row block m_block: all BM of its rows copied (the
// plan pads every expert to whole blocks, so a live block has BM rows).
__device__ __forceinline__ void wait_rows_ready(const grouped_params &p, int m_block) {
    while (ld_acquire_gpu(&p.rows_ready[1 + m_block]) < BM) __nanosleep(100);
    fence_proxy_async_global(); // the acquired stores, before this thread's TMA loads of them
}

// The B box of tile column n_block (map and bytes): the whole BN rows, or the tail's.
template <int BN = GBN>
__device__ __forceinline__ const CUtensorMap *b_box(const grouped_params &p, int n_block, const CUtensorMap *map_b,
                                                    const CUtensorMap *map_b_tail, uint32_t &bytes) {
    const bool tail = p.b_tail_rows > 0 && n_block == p.tiles_n - 1;
    bytes = (uint32_t)(tail ? p.b_tail_rows : BN) * BK * 2;
    return tail ? map_b_tail : map_b;
}

// DYN: called once per CTA by the thread that took its tickets, after its last one. Every CTA has
// taken its last ticket once all have counted themselves here: the last one resets the counters
// for the next launch. The fences order this CTA's last ticket before its count, and every count
// before the reset (relaxed atomics on two words).
__device__ __forceinline__ void dyn_counter_release(int *unit_counter) {
    __threadfence();
    if (atomicAdd(&unit_counter[1], 1) == (int)gridDim.x - 1) {
        __threadfence();
        atomicExch(&unit_counter[0], 0);
        atomicExch(&unit_counter[1], 0);
    }
}

// DYN (the library's tiled path when the forward gives a counter): units are taken in order from a
// ticket counter (unit_counter) instead of the static stride u += gridDim.x, so that units next to
// each other (the m-blocks of one expert that share a weight tile) start when their CTAs free up,
// at nearly the same time, and read the tile's k-slices from L2 after the first of them (deepseek
// GEMM1 at T=16384: 59.9 -> 37 GB of DRAM reads; src/cuda/NOTES.md, session 11). The producer
// passes each unit's number to the consumers in a header of the unit's first stage (-1: none left),
// with a flag (p.skip_idle: GEMM2, and GEMM1 on request) for a block whose second half is all
// padding (an expert's last block holding at most 64 rows), whose MMAs the second consumer
// warpgroup then skips.
// BN: the tile's columns, 256, or 240 where it divides n (gpt-oss's 2880: no tail tile).
// map_out: EPI_ACT_TMA's A2 map (grouped_act_tma_map); the other epilogues get a copy of map_b, never read.
template <int MODE, int EPI, int ACT, bool GATHER = false, bool DYN = false, int BN = GBN>
__global__ void __launch_bounds__(THREADS, 1)
    grouped_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                        const __grid_constant__ CUtensorMap map_b_tail, const __grid_constant__ CUtensorMap map_out,
                        const grouped_params p) {
    static_assert(!GATHER || MODE == GEMM_UP, "GATHER: GEMM1 only (GEMM2's A2 is already in plan order)");
    static_assert(BN == GBN || BN == 240, "BN: 256, or 240 (the wgmma wrappers and the shared memory sized for 256)");
    static_assert(EPI != EPI_BULK || (MODE == GEMM_DOWN && !GATHER), "EPI_BULK: GEMM2 (bf16 rows)");
    static_assert(EPI != EPI_ACT_TMA || (MODE == GEMM_UP && BN == GBN && DYN),
                  "EPI_ACT_TMA: GEMM1, 256-wide tiles (a 240-wide tile's second box would reach the next tile's "
                  "columns), on tickets");
    constexpr int B_BYTES = BN * BK * 2; // 1024-byte multiple: every stage stays aligned for the swizzle
    constexpr bool BULK = EPI == EPI_BULK;
    constexpr bool ACT_TMA = EPI == EPI_ACT_TMA;
    constexpr int STAGES = BULK ? BULK_GSTAGES : GSTAGES;
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using CFG = grouped_config; // A_BYTES and EMPTY_ARRIVALS (the same at any stage count)
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint8_t *smem_a = smem;                         // [STAGES][BM rows][128 bytes]
    uint8_t *smem_b = smem + STAGES * CFG::A_BYTES; // [STAGES][BN rows][128 bytes]
    // ACT_TMA: the two warpgroups' A2 boxes, 1024-byte aligned after the ring; then the barriers.
    uint8_t *act_tma_buf = smem_b + STAGES * B_BYTES;
    uint64_t *full = (uint64_t *)(smem_b + STAGES * B_BYTES + (ACT_TMA ? ACT_TMA_BYTES : 0));
    uint64_t *empty = full + STAGES;
    // EPI_STAGED: per consumer warp a staging buffer, then per consumer warp a row table. EPI_BULK:
    // per consumer warp 16 whole rows (16-byte aligned for the bulk copies), then the row tables.
    constexpr int WARP_BYTES = BULK ? bulk_warp_bytes<GBN>() : STAGE_WARP_BYTES;
    uint8_t *staging = BULK ? bulk_buffers(empty + STAGES) : (uint8_t *)(empty + STAGES);
    uint8_t *row_info = staging + CONSUMER_WARPS * WARP_BYTES;
    // DYN: after the epilogue's buffers (grouped_smem_bytes counts them for the staged and bulk EPIs).
    int *stage_unit =
        (int *)(epi_uses_staging(EPI) || BULK ? row_info + CONSUMER_WARPS * ROWINFO_WARP_BYTES : (uint8_t *)staging);

    pdl_wait(); // the plan and A come from the kernels before (pdl.cuh)
    pdl_launch_dependents();
    const int warpgroup = threadIdx.x / 128;
    const int units_m = live_blocks(p);
    const int units = units_m * p.tiles_n;
    const int num_kb = (p.k + BK - 1) / BK;

    if (threadIdx.x == 0) {
        ring_init(full, empty, STAGES, GATHER ? 1 + 128 : 1, CFG::EMPTY_ARRIVALS);
    }
    __syncthreads();

    if (warpgroup == 0) {
        // ---- producer ----
        if (GATHER) {
            setmaxnreg_dec<GATHER_PRODUCER_REGS>();
            // Every producer thread copies its share of A; thread 0 also loads B by TMA.
            const int t = threadIdx.x;
            if (t == 0) {
                tma_prefetch_map(&map_b);
                tma_prefetch_map(&map_b_tail);
                if (ACT_TMA) tma_prefetch_map(&map_out);
            }
            int stage = 0;
            uint32_t phase = 0;
            int slot = 0; // DYN: which of the two next-unit words is next
            for (int u = blockIdx.x; u < units;) {
                int m_block, n_block, e;
                unit_tile(p, u, units_m, p.tiles_n, m_block, n_block, e);
                const int b_row = e * p.n + n_block * BN;
                uint32_t b_bytes;
                const CUtensorMap *mb = b_box<BN>(p, n_block, &map_b, &map_b_tail, b_bytes);
                int32_t token[GATHER_ROWS_PER_THREAD];
                gather_rows_of_tile(p, (int64_t)m_block * BM, t, token);
                // The half-idle flag (see the TMA producer below); only thread 0 writes the header.
                const bool lower_idle = DYN && t == 0 && lower_half_idle(p, m_block);
                for (int kb = 0; kb < num_kb; ++kb) {
                    mbar_wait(&empty[stage], phase ^ 1);
                    if (t == 0) {
                        if (DYN && kb == 0) stage_unit[stage] = 2 * u + (lower_idle ? 1 : 0);
                        mbar_arrive_expect_tx(&full[stage], b_bytes);
                        tma_load_2d(smem_b + stage * B_BYTES, mb, &full[stage], kb * BK, b_row);
                    }
                    gather_a_stage(p, smem_a + stage * CFG::A_BYTES, kb, t, token);
                    cp_async_mbar_arrive_noinc(&full[stage]);
                    if (++stage == STAGES) {
                        stage = 0;
                        phase ^= 1;
                    }
                }
                if (DYN) {
                    // Thread 0 takes the next ticket and hands it to the warpgroup through one of
                    // two words: a word is written again two units later, after every thread has
                    // passed the next unit's barrier, so after it has read this one.
                    if (t == 0) stage_unit[DYN_NEXT_UNIT_WORD + slot] = (int)gridDim.x + atomicAdd(&p.unit_counter[0], 1);
                    named_barrier_sync(1, 128);
                    u = stage_unit[DYN_NEXT_UNIT_WORD + slot];
                    slot ^= 1;
                } else {
                    u += (int)gridDim.x;
                }
            }
            if (DYN) {
                // The end marker, in the stage the next unit would have started in: the full
                // barrier takes its 1 + 128 arrivals as plain ones.
                mbar_wait(&empty[stage], phase ^ 1);
                if (t == 0) {
                    stage_unit[stage] = -1;
                    mbar_arrive(&full[stage]);
                }
                mbar_arrive(&full[stage]);
            }
            cp_async_wait_all(); // no thread exits with copies in flight
            if (DYN && t == 0) dyn_counter_release(p.unit_counter);
        } else {
            setmaxnreg_dec<PRODUCER_REGS>();
            if (threadIdx.x == 0) {
                tma_prefetch_map(&map_a);
                tma_prefetch_map(&map_b);
                tma_prefetch_map(&map_b_tail);
                if (ACT_TMA) tma_prefetch_map(&map_out);
                int stage = 0;
                uint32_t phase = 0;
                for (int u = blockIdx.x; u < units;) {
                    int m_block, n_block, e;
                    unit_tile(p, u, units_m, p.tiles_n, m_block, n_block, e);
                    const int m0 = m_block * BM;
                    // Read beside block_expert; the header tells the second consumer warpgroup to skip
                    // the unit's MMAs (GEMM1 only on request: hopper_gemm1_skip_idle).
                    const bool lower_idle = DYN && lower_half_idle(p, m_block);
                    const int b_row = e * p.n + n_block * BN;
                    uint32_t b_bytes;
                    const CUtensorMap *mb = b_box<BN>(p, n_block, &map_b, &map_b_tail, b_bytes);
                    for (int kb = 0; kb < num_kb; ++kb) {
                        mbar_wait(&empty[stage], phase ^ 1);
                        if (DYN && kb == 0) stage_unit[stage] = 2 * u + (lower_idle ? 1 : 0); // the stage is free now
                        mbar_arrive_expect_tx(&full[stage], CFG::A_BYTES + b_bytes);
                        if (MODE == GEMM_UP && p.a_fill && kb == 0) wait_rows_ready(p, m_block);
                        tma_load_2d(smem_a + stage * CFG::A_BYTES, &map_a, &full[stage], kb * BK, m0);
                        tma_load_2d(smem_b + stage * B_BYTES, mb, &full[stage], kb * BK, b_row);
                        if (++stage == STAGES) {
                            stage = 0;
                            phase ^= 1;
                        }
                    }
                    // DYN: the next ticket after the unit's last load is issued, while the consumers
                    // still have the ring's stages to work on (taken at the unit's start, the
                    // atomic's latency stalled the producer's k-loop: ptxas waits on it at the loop
                    // head; lab call M4, 3-4% on the short-K shapes).
                    u = DYN ? (int)gridDim.x + atomicAdd(&p.unit_counter[0], 1) : u + (int)gridDim.x;
                }
                if (DYN) {
                    // The end marker, in the stage the next unit would have started in.
                    mbar_wait(&empty[stage], phase ^ 1);
                    stage_unit[stage] = -1;
                    mbar_arrive(&full[stage]);
                    dyn_counter_release(p.unit_counter);
                }
            } else if (MODE == GEMM_UP && p.a_fill && threadIdx.x >= 32) {
                fill_a_rows(p); // warps 1-3: the permute pass
            }
        }
    } else {
        // ---- consumers ----
        if (GATHER) setmaxnreg_inc<GATHER_CONSUMER_REGS>();
        else setmaxnreg_inc<CONSUMER_REGS>();
        const int half = consumer_half(); // rows half*64 .. half*64+63 of the tile
        const int warp = (threadIdx.x / 32) % 4;
        const int lane = threadIdx.x % 32;
        const int cw = half * 4 + warp; // consumer warp 0..7
        float acc[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
        int stage = 0;
        uint32_t phase = 0;
        for (int u = blockIdx.x; DYN || u < units; u += gridDim.x) {
            if (DYN) {
                // The unit's first stage: its header names the unit (-1: none left). Lane 0 reads it
                // (the warp's own release of the stage comes later, from lane 0) and shares it.
                mbar_wait(&full[stage], phase);
                int v = 0;
                if (lane == 0) v = stage_unit[stage];
                v = __shfl_sync(0xFFFFFFFFu, v, 0);
                if (v < 0) break;
                u = v >> 1;
                if (half == 1 && (v & 1)) {
                    // All 64 rows of this warpgroup are padding: free the unit's stages as they
                    // fill, no MMAs and no epilogue (nothing of these rows is stored anyway), so
                    // the other warpgroup has the tensor cores to itself.
                    for (int kb = 0; kb < num_kb; ++kb) {
                        mbar_wait(&full[stage], phase);
                        release_stage<1>(&empty[stage], lane);
                        if (++stage == STAGES) {
                            stage = 0;
                            phase ^= 1;
                        }
                    }
                    continue;
                }
            }
            // Loaded here, used by the epilogue: the loads' latency hides behind the mainloop.
            int m_block, n_block, e;
            unit_tile(p, u, units_m, p.tiles_n, m_block, n_block, e);
            const int m0 = m_block * BM;
            const int n0 = n_block * BN;
            const int64_t warp_row = (int64_t)m0 + half * 64 + warp * 16;
            // BULK, p.early_rows: lanes 0-15 load their row's id during the last k-block and its
            // routing weight before the last wait, so the epilogue does not start with two
            // dependent loads (a uniform branch: the flag is a kernel parameter).
            const bool early = BULK && p.early_rows;
            int32_t early_id = 0;
            int prev_stage = 0;
            for (int kb = 0; kb < num_kb; ++kb) {
                mbar_wait(&full[stage], phase);
                // GATHER: A arrived through cp.async (generic proxy); wgmma reads it through the
                // async proxy, so order the two in this thread after the barrier's acquire. A lab
                // build without it ran no faster (session 35: docs/kernels/grouped_bf16.md).
                if (GATHER) fence_proxy_async_shared();
                const uint64_t desc_a = smem_desc_k_sw128(smem_a + stage * CFG::A_BYTES + half * 64 * BK * 2);
                const uint64_t desc_b = smem_desc_k_sw128(smem_b + stage * B_BYTES);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk)
                    wgmma_bf16<BN>(acc, smem_desc_advance(desc_a, kk * 32), smem_desc_advance(desc_b, kk * 32),
                                    (kb > 0 || kk > 0) ? 1 : 0);
                wgmma_commit_group();
                if (early && kb == num_kb - 1 && lane < 16) early_id = p.sorted_ids[warp_row + lane];
                wgmma_wait_group<1>();
                if (kb > 0) release_stage<1>(&empty[prev_stage], lane);
                prev_stage = stage;
                if (++stage == STAGES) {
                    stage = 0;
                    phase ^= 1;
                }
            }
            row_entry early_row{-1, 1.0f}; // a padding row keeps these (row_target_of leaves them)
            if (early && lane < 16) row_target_of<MODE>(p, warp_row + lane, early_id, early_row.off, early_row.scale);
            wgmma_wait_group<0>();
            fence_registers<BN / 2>(acc);
            release_stage<1>(&empty[prev_stage], lane);

            if constexpr (EPI == EPI_ACT_FIRST && MODE == GEMM_UP)
                act_first_epilogue<BN>(p, acc, e, warp_row, n0, lane, (float *)(staging + cw * STAGE_WARP_BYTES),
                                   row_info + cw * ROWINFO_WARP_BYTES);
            else if constexpr (epi_staged(EPI))
                staged_epilogue<MODE, BN, __nv_bfloat16, EPI>(p, acc, e, warp_row, n0, lane,
                                                               (float *)(staging + cw * STAGE_WARP_BYTES),
                                                               row_info + cw * ROWINFO_WARP_BYTES);
            else if constexpr (BULK)
                bulk_epilogue<MODE, BN>(p, acc, e, warp_row, n0, lane, staging + cw * WARP_BYTES,
                                        row_info + cw * ROWINFO_WARP_BYTES, early, early_row);
            else if constexpr (ACT_TMA)
                act_tma_epilogue(p, &map_out, acc, e, (int64_t)m0 + half * 64, n0, warp, lane,
                                 act_tma_buf + half * ACT_TMA_WG_BYTES, 2 + half); // barriers 2, 3 (1: gather)
            else
                regs_epilogue<MODE, EPI, ACT, BN>(p, acc, e, warp_row + lane / 4, n0, lane % 4);
        }
        // BULK, ACT_TMA: the shared memory stays until the last copies have read it.
        if (BULK && lane < 16) bulk_wait_read<0>();
        if (ACT_TMA && warp == 0 && lane == 0) bulk_wait_read<0>();
    }
#endif
}

// ---- host side ---------------------------------------------------------------------------
// The fields of grouped_params that the bf16 and the FP8 grouped GEMMs fill alike: sizes, the
// tile raster for a tile `bn` wide, the plan and the epilogue's inputs and output.
inline void grouped_plan_params(const gemm_args *g, int sms, int bn, grouped_params *p) {
    p->n = (int)g->n;
    p->k = (int)g->k;
    p->tiles_n = (int)((g->n + bn - 1) / bn);
    const int group = (int)lround(sqrt((double)bn * sms / BM));
    p->group_m = group < 1 ? 1 : group;
    p->live_rows = g->live_rows;
    p->block_expert = g->block_expert;
    p->expert_offsets = g->expert_offsets;
    p->sorted_ids = g->sorted_ids;
    p->bias = g->bias;
    p->padding_id = g->tokens * g->top_k;
    p->topk_weights = g->topk_weights;
    p->shared_scale = g->shared_scale;
    p->weight_on_input = g->weight_on_input;
    p->out = g->out;
    p->ldo = g->ldo;
    p->activation = g->activation;
    p->act_alpha = g->act_alpha;
    p->act_limit = g->act_limit;
    p->skip_idle = g->mode == GEMM_DOWN; // the bf16 grouped kernel's (DYN); GEMM1 on request
    p->early_rows = 0;                   // the bf16 GEMM2 on request (hopper_gemm2_early_rows)
    p->a_fill = nullptr;                 // the bf16 GEMM1 on request (grouped_prepare)
    p->rows_ready = nullptr;
}

// Parameters, tensor maps and grid of one grouped GEMM (a = [rows, k] in plan order, lda = k).
// Returns CUDA_SUCCESS, or the tensor-map encoder's error (CUDA_ERROR_NOT_FOUND: no encoder).
// gather (GEMM1): g->a is x [tokens, lda] itself, gathered by the producer (no A tensor map:
// map_a is a copy of map_b, never read). map_b_tail: boxes of n % bn rows (a copy of map_b
// when n is a multiple of bn, never read). bn: the kernel's BN (256, or 240).
inline CUresult grouped_prepare(const gemm_args *g, int sms, CUtensorMap *map_a, CUtensorMap *map_b,
                                CUtensorMap *map_b_tail, grouped_params *p, unsigned *ctas, bool gather = false,
                                int bn = GBN) {
    const int tail = (int)(g->n % bn);
    CUresult cr = make_tensor_map(map_b, g->b, g->experts * g->n, g->k, g->k, bn);
    if (cr == CUDA_SUCCESS) {
        if (tail) cr = make_tensor_map(map_b_tail, g->b, g->experts * g->n, g->k, g->k, tail);
        else *map_b_tail = *map_b;
    }
    if (cr == CUDA_SUCCESS) {
        if (gather) *map_a = *map_b;
        else cr = make_tensor_map(map_a, g->a, g->rows, g->k, g->lda, BM);
    }
    if (cr != CUDA_SUCCESS) return cr;
    grouped_plan_params(g, sms, bn, p);
    p->b_tail_rows = tail;
    // x: gathered from (GATHER), or copied into the permuted rows g->a by the GEMM (A_FILL).
    const bool fill = !gather && g->x_fill != nullptr;
    p->x = (const __nv_bfloat16 *)(gather ? g->a : fill ? g->x_fill : nullptr);
    p->ldx = fill ? g->ldx_fill : g->lda;
    p->a_fill = fill ? (uint4 *)g->a : nullptr;
    p->rows_ready = fill ? g->rows_ready : nullptr;
    p->unit_counter = g->unit_counter;
    p->top_k = g->top_k;
    p->out_bf16 = g->out_bf16;
    // Persistent: at most one CTA per SM, and no more than the host bound of tiles.
    const int64_t bound = (g->rows + BM - 1) / BM * p->tiles_n;
    *ctas = (unsigned)(bound < sms ? bound : sms);
    return CUDA_SUCCESS;
}

// What EPI_STAGED needs beyond the other epilogues (granules of 4 columns: 16-byte stores, 8
// for bf16 rows): n and ldo multiples of 4, out and bias 16-byte aligned. The forward's shapes
// (H, I multiples of 64, 256-aligned workspace and cudaMalloc'd biases) always pass.
inline bool grouped_staged_ok(const gemm_args *g) {
    return g->n % 4 == 0 && g->ldo % 4 == 0 && (uintptr_t)g->out % 16 == 0 && (uintptr_t)g->bias % 16 == 0;
}

// What EPI_ACT_FIRST needs beyond EPI_STAGED: A2 rows and the tile's A2 columns in whole 16-byte
// granules (n / 2 and ldo multiples of 8). The forward's shapes (I a multiple of 64) always pass.
inline bool grouped_act_first_ok(const gemm_args *g) {
    return grouped_staged_ok(g) && g->mode == GEMM_UP && (g->n / 2) % 8 == 0 && g->ldo % 8 == 0;
}

// What A_FILL needs (g->x_fill set): GEMM1 with A by TMA, the counters, x's row stride a multiple
// of 8 and at least k, x and the permuted rows 16-byte aligned (16-byte copies).
inline bool grouped_fill_ok(const gemm_args *g) {
    return g->mode == GEMM_UP && g->rows_ready && g->ldx_fill % 8 == 0 && g->ldx_fill >= g->k &&
           (uintptr_t)g->x_fill % 16 == 0 && (uintptr_t)g->a % 16 == 0;
}

// What GATHER needs: GEMM1, k and the row stride multiples of 8 and x 16-byte aligned (16-byte
// cp.async), ids of at most 2^31 rows.
inline bool grouped_gather_ok(const gemm_args *g) {
    return g->mode == GEMM_UP && g->k % 8 == 0 && g->lda % 8 == 0 && g->lda >= g->k && (uintptr_t)g->a % 16 == 0;
}

// The shared memory is sized for BN = 256 (a 240-wide tile's stages are smaller).
template <int MODE, int EPI, int ACT = 0, bool GATHER = false, bool DYN = false, int BN = GBN>
cudaError_t grouped_set_smem() {
    return cudaFuncSetAttribute(grouped_gemm_kernel<MODE, EPI, ACT, GATHER, DYN, BN>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, grouped_smem_bytes<EPI, DYN>());
}

// EPI_ACT_TMA's map of A2 (g->out, [rows, n / 2] bf16, row stride ldo), written in 64 x 64 boxes
// in the 128-byte swizzle.
inline CUresult grouped_act_tma_map(const gemm_args *g, CUtensorMap *map) {
    return make_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, g->out, g->rows, g->n / 2, g->ldo * 2, 64, 64,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE);
}

// DYN: p.unit_counter must point at two ints that are 0 (the kernel leaves them so). map_out:
// EPI_ACT_TMA's (grouped_act_tma_map); NULL for the other epilogues.
template <int MODE, int EPI, int ACT = 0, bool GATHER = false, bool DYN = false, int BN = GBN>
cudaError_t grouped_kernel_launch(const CUtensorMap &map_a, const CUtensorMap &map_b, const CUtensorMap &map_b_tail,
                                  const grouped_params &p, unsigned ctas, cudaStream_t stream,
                                  const CUtensorMap *map_out = nullptr) {
    if ((EPI == EPI_ACT_TMA) != (map_out != nullptr)) return cudaErrorInvalidValue;
    return launch_kernel(grouped_gemm_kernel<MODE, EPI, ACT, GATHER, DYN, BN>, ctas, THREADS,
                         grouped_smem_bytes<EPI, DYN>(), stream, map_a, map_b, map_b_tail, map_out ? *map_out : map_b,
                         p);
}

} // namespace moe_hopper

#endif
