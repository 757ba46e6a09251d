// Grouped expert GEMM over the dispatch plan's row blocks, mma.sync m16n8k16 with fp32
// accumulate: the v1 baseline (the Hopper wgmma engine is a separate piece of work).
//
// One thread block computes a BM x BN tile of one expert: BM plan rows (all owned by one
// expert, since the plan pads each expert to a multiple of BM) times BN output columns.
// Four warps in a 2 x 2 arrangement, each a 32 x 64 sub-tile = 2 x 8 mma tiles.
// Operands stream through a GEMM_STAGES-deep ring of cp.async stages; A rows are gathered
// straight from x through the plan's row ids (GEMM_UP), so no permuted copy of x is made.
// Shared memory rows are BK = 64 elements = 128 bytes = 8 chunks of 16 bytes, chunk c of row
// r stored at chunk c ^ (r & 7) so that ldmatrix's eight row addresses hit distinct banks.
//
// Two kernels share the loaders' layout and the epilogue:
//  - gemm_kernel (the 64 x 128 tile above) for plans whose experts average many rows;
//  - decode_kernel for small T (few rows per expert), where the GEMMs stream weights and the
//    64 x 128 tile leaves most SMs idle and spends 63/64 of its MMAs on padding. See
//    gemm_choose below for the rule and the decode kernel's comment for its design.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.cuh"
#include "gemm_epilogue.cuh"

namespace {

// The decode kernel's ring: stages are added up to ~100 KB of shared memory per CTA (two CTAs
// per SM), at most 16 (cp.async.wait_group takes an immediate; 14 is the deepest wait used).
// The K-split variant's slots are 4x larger: ring + reduction area up to 112 KB per CTA.
#define DECODE_SMEM_TARGET (100 * 1024)
#define DECODE_MAX_STAGES 16
#define DECODE_KSPLIT_SMEM (112 * 1024)

__device__ __forceinline__ uint32_t tile_offset(int row, int chunk) {
    return (uint32_t)(row * GEMM_BK + ((chunk ^ (row & 7)) << 3)); // in elements
}


template <int MI, int NJ> __device__ __forceinline__ void zero_acc(float (&acc)[MI][NJ][4]) {
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int nj = 0; nj < NJ; nj++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[mi][nj][c] = 0.0f;
}

// One BM x BN output tile: row block m_block (owned by one expert), columns n0 .. n0+BN-1.
template <typename T>
__device__ __forceinline__ void gemm_tile(const gemm_args &p, T *smem, int64_t m_block, int64_t n0) {
    T *smem_a = smem;                                    // [STAGES][BM][BK]
    T *smem_b = smem + GEMM_STAGES * GEMM_BM * GEMM_BK;  // [STAGES][BN][BK]
    const int64_t m0 = m_block * GEMM_BM;
    const int64_t expert = p.block_expert ? p.block_expert[m_block] : 0;
    if (expert < 0) return;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t padding_id = p.tokens * p.top_k;
    const T *b_base = (const T *)p.b + expert * p.n * p.k;

    // Each thread copies 4 A chunks (rows tid/8 + 16i) and 8 B chunks (rows tid/8 + 16i),
    // all at chunk column tid % 8. Row sources are fixed for the block: compute them once.
    const int chunk = tid & 7, row0 = tid >> 3;
    const T *a_src[4];
    bool a_ok[4];
    for (int i = 0; i < 4; i++) {
        int64_t r = m0 + row0 + 16 * i;
        int64_t id = row_id(p, r);
        a_ok[i] = id != padding_id;
        int64_t a_row;
        if (p.mode == GEMM_UP) a_row = plan_id_token(id, padding_id, p.top_k);
        else a_row = r;
        a_src[i] = (const T *)p.a + (a_ok[i] ? a_row : 0) * p.lda + chunk * 8;
    }
    const T *b_src[8];
    bool b_ok[8];
    for (int i = 0; i < 8; i++) {
        int64_t nrow = n0 + row0 + 16 * i;
        b_ok[i] = nrow < p.n;
        b_src[i] = b_base + (b_ok[i] ? nrow : 0) * p.k + chunk * 8;
    }

    const int64_t k_tiles = (p.k + GEMM_BK - 1) / GEMM_BK;
    auto load_stage = [&](int stage, int64_t kt) {
        const int64_t k0 = kt * GEMM_BK;
        const bool k_ok = k0 + chunk * 8 < p.k; // K is a multiple of 8: whole chunks
        uint32_t sa = smem_address(smem_a + stage * GEMM_BM * GEMM_BK);
        uint32_t sb = smem_address(smem_b + stage * GEMM_BN * GEMM_BK);
        for (int i = 0; i < 4; i++) {
            bool ok = a_ok[i] && k_ok;
            cp_async_16(sa + 2 * tile_offset(row0 + 16 * i, chunk), ok ? (const void *)(a_src[i] + k0) : p.a, ok);
        }
        for (int i = 0; i < 8; i++) {
            bool ok = b_ok[i] && k_ok;
            cp_async_16(sb + 2 * tile_offset(row0 + 16 * i, chunk), ok ? (const void *)(b_src[i] + k0) : p.b, ok);
        }
    };

    float acc[2][8][4];
    for (int mi = 0; mi < 2; mi++)
        for (int nj = 0; nj < 8; nj++)
            for (int c = 0; c < 4; c++) acc[mi][nj][c] = 0.0f;

    // Prologue: fill STAGES-1 stages (empty commit groups past the end keep the count right).
    for (int s = 0; s < GEMM_STAGES - 1; s++) {
        if (s < k_tiles) load_stage(s, s);
        cp_async_commit();
    }

    const int warp_m = (warp >> 1) * 32, warp_n = (warp & 1) * 64;
    for (int64_t kt = 0; kt < k_tiles; kt++) {
        cp_async_wait<GEMM_STAGES - 2>();
        __syncthreads(); // stage kt landed for all threads; stage kt-1 is free to refill
        const int64_t next = kt + GEMM_STAGES - 1;
        if (next < k_tiles) load_stage((int)(next % GEMM_STAGES), next);
        cp_async_commit();

        const int stage = (int)(kt % GEMM_STAGES);
        const T *sa = smem_a + stage * GEMM_BM * GEMM_BK;
        const T *sb = smem_b + stage * GEMM_BN * GEMM_BK;
#pragma unroll
        for (int kk = 0; kk < GEMM_BK / 16; kk++) {
            uint32_t af[2][4], bf[8][2];
#pragma unroll
            for (int mi = 0; mi < 2; mi++) {
                int r = warp_m + mi * 16 + (lane & 15);
                ldmatrix_x4(smem_address(sa + tile_offset(r, kk * 2 + (lane >> 4))), af[mi][0], af[mi][1], af[mi][2],
                            af[mi][3]);
            }
#pragma unroll
            for (int nj = 0; nj < 4; nj++) {
                int r = warp_n + nj * 16 + ((lane >> 4) << 3) + (lane & 7);
                ldmatrix_x4(smem_address(sb + tile_offset(r, kk * 2 + ((lane >> 3) & 1))), bf[2 * nj][0],
                            bf[2 * nj][1], bf[2 * nj + 1][0], bf[2 * nj + 1][1]);
            }
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int nj = 0; nj < 8; nj++) mma_16816<T>(acc[mi][nj], af[mi], bf[nj]);
        }
    }
    cp_async_wait<0>();

    epilogue<T, 2, 8>(p, acc, expert, m0 + warp_m, n0 + warp_n);
}

// Persistent grid: each block loops over tiles. The number of live tiles is read on the
// device (the plan's total), so no block is spent on the host bound's dead rows, and the
// launch size stays small for any T.
template <typename T>
__global__ void __launch_bounds__(GEMM_THREADS, 1) gemm_kernel(const gemm_args p) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T *smem = (T *)smem_raw;
    pdl_wait();
    pdl_launch_dependents();
    const int64_t live = p.live_rows ? *p.live_rows : p.rows;
    const int64_t tiles_n = (p.n + GEMM_BN - 1) / GEMM_BN, m_blocks = (live + GEMM_BM - 1) / GEMM_BM;
    const int64_t tiles = m_blocks * tiles_n;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        // Grouped raster: GEMM_GROUP_M row blocks at a time, row block fastest, so the tiles
        // in flight together share a few W tiles and a few A blocks in L2 (row-block-major
        // order would stream a whole expert's W from memory again for every row block).
        const int64_t per_group = (int64_t)GEMM_GROUP_M * tiles_n, group = tile / per_group;
        const int64_t first_m = group * GEMM_GROUP_M, in_group = tile % per_group;
        const int64_t group_m = m_blocks - first_m < GEMM_GROUP_M ? m_blocks - first_m : GEMM_GROUP_M;
        gemm_tile<T>(p, smem, first_m + in_group % group_m, (in_group / group_m) * GEMM_BN);
        __syncthreads(); // the next tile's copies overwrite stages other warps may still read
    }
}

// ---- the decode kernel ---------------------------------------------------------------------
// At small T each expert owns a few rows (1-8 at decode) and the GEMMs stream the touched
// experts' weights. The kernel: rows in passes of BMD = 16 * MT (MT = 1 or 2 m16 tiles), a
// narrow N tile (BN = 32, 64 or 128 columns, from gemm_choose), and a cp.async ring that runs
// on across passes and items: the copies of the CTA's next pass are issued while the current
// one finishes, so the ring never drains between items.
//
// A work item is (64-row plan block, BN columns): items are the live blocks x the N tiles,
// block fastest (all items live: the blocks of a plan are live up to its total). An item's rows
// are covered by passes of BMD rows while a pass's first row is a live one (live rows precede
// padding inside a block), each pass a full sweep over K into one set of accumulators.
//
// How the four warps share a ring slot (KS, from gemm_choose / MOEFUSE_V1_DECODE_SPLIT):
//  - KS = 1, "N split" (first version): a slot is one 64-wide k-tile; the warps split the BN
//    columns (BN/4 each) and all read the pass's A rows, so the epilogue runs straight from
//    registers. Every output is one warp's fp32 sum in K order.
//  - KS = 4, "K split" (BN = 32): a slot is four 64-wide k-tiles (256 of K); warp w multiplies
//    k-tile w of the slot over all 32 columns, so a block-wide step moves 16 KB of weights
//    instead of 4 KB. At the pass's end the four partial sums meet in shared memory and warp v
//    adds them in warp order 0..3 (fixed, so the result is deterministic) for its 8 columns.
//    Why: the first H200 run streamed 2.0-2.8 TB/s with KS = 1 at BN = 32 while the ring held
//    far more bytes than needed, i.e. the step rate (barrier, issue, a dependent chain of 4
//    MMAs per warp) bounded it at ~4 KB per step; KS = 4 moves 4x the bytes per step with 4
//    independent MMA chains per warp, at the same item count (parallelism) as BN = 32.
// No split-K across blocks and no workspace in either variant.
// The reduction area of the K-split kernel: 4 warps' partial tiles, one float4 per lane per
// mma tile (the fragment layout, so the reading warp finds its lane's values in place).
__host__ __device__ constexpr int decode_red_bytes(int bn, int mt, int ks) {
    return ks == 1 ? 0 : 4 * mt * (bn / 8) * 32 * 16;
}
// Ring stages: KS = 1 as many 64-wide k-tiles as fit DECODE_SMEM_TARGET (at most the
// maximum); KS = 4 as many 256-wide slots as fit DECODE_KSPLIT_SMEM with the reduction area
// (112 KB: two CTAs, each with its 1 KB reserve, still fit the SM's 228 KB).
__host__ __device__ constexpr int decode_stages(int bn, int mt, int ks) {
    return ks != 1 ? (DECODE_KSPLIT_SMEM - decode_red_bytes(bn, mt, ks)) / (ks * (16 * mt + bn) * GEMM_BK * 2)
           : DECODE_SMEM_TARGET / ((16 * mt + bn) * GEMM_BK * 2) < DECODE_MAX_STAGES
               ? DECODE_SMEM_TARGET / ((16 * mt + bn) * GEMM_BK * 2)
               : DECODE_MAX_STAGES;
}
__host__ __device__ constexpr int decode_smem(int bn, int mt, int ks) {
    return decode_stages(bn, mt, ks) * ks * (16 * mt + bn) * GEMM_BK * 2 + decode_red_bytes(bn, mt, ks);
}

template <int BN, int MT, int KS> struct decode_cfg {
    static constexpr int BMD = 16 * MT;                        // rows per pass
    static constexpr int WN = KS == 1 ? BN / 4 : BN;           // columns per warp
    static constexpr int NJ = WN / 8;                          // n8 mma tiles per warp
    static constexpr int TILE_ELEMS = (BMD + BN) * GEMM_BK;    // one 64-wide k-tile: A then B rows
    static constexpr int SLOT_ELEMS = KS * TILE_ELEMS;         // one ring slot: KS k-tiles
    static constexpr int STAGES = decode_stages(BN, MT, KS);
    static constexpr int B_COPIES = BN / 16;                   // B chunks per thread per k-tile
    static_assert(BN % 32 == 0 && NJ >= 1, "BN: 32, 64 or 128");
    static_assert(KS == 1 || (KS == 4 && NJ % 4 == 0), "K split: one k-tile per warp, NJ a multiple of 4");
    static_assert(STAGES >= 3, "the ring needs >= 3 stages");
};

// Where one thread of the CTA stands in the sequence of (item, pass, slot) steps. The
// producer (cp.async issue) runs STAGES - 1 steps ahead of the consumer (MMA); each thread
// keeps both cursors, and both walk the same sequence since every thread reads the same plan.
struct decode_cursor {
    int64_t item;   // >= items: past the end
    int64_t m0;     // first plan row of the current pass
    int64_t n0, expert;
    int pass, passes;
    int64_t kt;     // ring slot (KS k-tiles) within the pass
};

struct decode_grid {
    int64_t items, live_blocks, k_slots, padding_id;
};

// Moves c to the first item >= item that has rows (passes > 0), striding by the grid.
template <int BMD>
__device__ __forceinline__ void decode_seek(const gemm_args &p, const decode_grid &gd, decode_cursor &c,
                                            int64_t item, int bn) {
    for (; item < gd.items; item += gridDim.x) {
        const int64_t blk = item % gd.live_blocks;
        const int64_t expert = p.block_expert ? p.block_expert[blk] : 0;
        if (expert < 0) continue;
        int passes = 0;
#pragma unroll
        for (int j = 0; j < GEMM_BM / BMD; j++) passes += row_id(p, blk * GEMM_BM + j * BMD) != gd.padding_id;
        if (passes == 0) continue;
        c.m0 = blk * GEMM_BM;
        c.n0 = item / gd.live_blocks * bn;
        c.expert = expert;
        c.pass = 0;
        c.passes = passes;
        c.kt = 0;
        break;
    }
    c.item = item;
}

template <int BMD>
__device__ __forceinline__ void decode_advance(const gemm_args &p, const decode_grid &gd, decode_cursor &c, int bn) {
    if (++c.kt < gd.k_slots) return;
    c.kt = 0;
    if (++c.pass < c.passes) {
        c.m0 += BMD;
        return;
    }
    decode_seek<BMD>(p, gd, c, c.item + gridDim.x, bn);
}

template <typename T, int BN, int MT, int KS>
__global__ void __launch_bounds__(GEMM_THREADS) decode_kernel(const gemm_args p) {
    using cfg = decode_cfg<BN, MT, KS>;
    constexpr int BMD = cfg::BMD;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T *smem = (T *)smem_raw; // [STAGES][KS][BMD + BN][BK]: each k-tile A rows then B rows

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    pdl_wait();
    pdl_launch_dependents();
    decode_grid gd;
    const int64_t live = p.live_rows ? *p.live_rows : p.rows;
    gd.live_blocks = (live + GEMM_BM - 1) / GEMM_BM;
    gd.items = gd.live_blocks * ((p.n + BN - 1) / BN);
    gd.k_slots = ((p.k + GEMM_BK - 1) / GEMM_BK + KS - 1) / KS;
    gd.padding_id = p.tokens * p.top_k;

    // The producer's per-pass sources: thread copies MT A chunks and B_COPIES B chunks per
    // k-tile, rows tid/8 + 16i, chunk column tid % 8 (as the 64 x 128 kernel).
    const int chunk = tid & 7, row0 = tid >> 3;
    const T *a_src[MT];
    bool a_ok[MT];
    const T *b_src[cfg::B_COPIES];
    bool b_ok[cfg::B_COPIES];
    decode_cursor prod, cons;
    decode_seek<BMD>(p, gd, prod, blockIdx.x, BN);
    cons = prod;

    auto issue = [&](int stage) {
        if (prod.kt == 0) { // a new pass: its rows (and, cheaply, the item's B rows again)
#pragma unroll
            for (int i = 0; i < MT; i++) {
                const int64_t r = prod.m0 + row0 + 16 * i;
                const int64_t id = row_id(p, r);
                a_ok[i] = id != gd.padding_id;
                int64_t a_row;
                if (p.mode == GEMM_UP) a_row = plan_id_token(id, gd.padding_id, p.top_k);
                else a_row = r;
                a_src[i] = (const T *)p.a + (a_ok[i] ? a_row : 0) * p.lda + chunk * 8;
            }
            const T *b_base = (const T *)p.b + prod.expert * p.n * p.k;
#pragma unroll
            for (int j = 0; j < cfg::B_COPIES; j++) {
                const int64_t nrow = prod.n0 + row0 + 16 * j;
                b_ok[j] = nrow < p.n;
                b_src[j] = b_base + (b_ok[j] ? nrow : 0) * p.k + chunk * 8;
            }
        }
#pragma unroll
        for (int s = 0; s < KS; s++) {
            const int64_t k0 = (prod.kt * KS + s) * GEMM_BK;
            const bool k_ok = k0 + chunk * 8 < p.k; // K is a multiple of 8: whole chunks
            const uint32_t sa = smem_address(smem + stage * cfg::SLOT_ELEMS + s * cfg::TILE_ELEMS);
            const uint32_t sb = sa + 2 * BMD * GEMM_BK;
#pragma unroll
            for (int i = 0; i < MT; i++) {
                const bool ok = a_ok[i] && k_ok;
                cp_async_16(sa + 2 * tile_offset(row0 + 16 * i, chunk), ok ? (const void *)(a_src[i] + k0) : p.a,
                            ok);
            }
#pragma unroll
            for (int j = 0; j < cfg::B_COPIES; j++) {
                const bool ok = b_ok[j] && k_ok;
                cp_async_16(sb + 2 * tile_offset(row0 + 16 * j, chunk), ok ? (const void *)(b_src[j] + k0) : p.b,
                            ok);
            }
        }
        decode_advance<BMD>(p, gd, prod, BN);
    };

    // Prologue: STAGES - 1 steps (possibly spanning passes and items); empty groups past the
    // end keep the wait count right.
    for (int s = 0; s < cfg::STAGES - 1; s++) {
        if (prod.item < gd.items) issue(s);
        cp_async_commit();
    }

    float acc[MT][cfg::NJ][4];
    zero_acc(acc);

    // N split: warp w's columns; K split: warp w's k-tile of each slot, all columns.
    const int warp_n = KS == 1 ? warp * cfg::WN : 0;
    const int warp_tile = KS == 1 ? 0 : warp;
    int stage = 0, fill = cfg::STAGES - 1;
    while (cons.item < gd.items) {
        cp_async_wait<cfg::STAGES - 2>();
        __syncthreads(); // this step's slot landed for all threads; the previous one is free
        if (prod.item < gd.items) issue(fill);
        cp_async_commit();
        fill = fill + 1 == cfg::STAGES ? 0 : fill + 1;

        const T *sa = smem + stage * cfg::SLOT_ELEMS + warp_tile * cfg::TILE_ELEMS;
        const T *sb = sa + BMD * GEMM_BK;
        uint32_t bf_next_0 = 0, bf_next_1 = 0; // NJ == 1: the odd kk's B, loaded on the even kk
#pragma unroll
        for (int kk = 0; kk < GEMM_BK / 16; kk++) {
            uint32_t af[MT][4], bf[cfg::NJ][2];
#pragma unroll
            for (int mi = 0; mi < MT; mi++) {
                const int r = mi * 16 + (lane & 15);
                ldmatrix_x4(smem_address(sa + tile_offset(r, kk * 2 + (lane >> 4))), af[mi][0], af[mi][1], af[mi][2],
                            af[mi][3]);
            }
            if constexpr (cfg::NJ == 1) {
                // 8 columns per warp: one x4 load holds this kk's and the next kk's B fragments;
                // issued on even kk (lanes 8j..8j+7 address k chunk 2kk + j of rows 0-7).
                if (kk % 2 == 0) {
                    uint32_t b0, b1, b2, b3;
                    const int r = warp_n + (lane & 7);
                    ldmatrix_x4(smem_address(sb + tile_offset(r, kk * 2 + (lane >> 3))), b0, b1, b2, b3);
                    bf[0][0] = b0, bf[0][1] = b1;
                    bf_next_0 = b2, bf_next_1 = b3;
                } else {
                    bf[0][0] = bf_next_0, bf[0][1] = bf_next_1;
                }
            } else {
#pragma unroll
                for (int nj = 0; nj < cfg::NJ / 2; nj++) {
                    const int r = warp_n + nj * 16 + ((lane >> 4) << 3) + (lane & 7);
                    ldmatrix_x4(smem_address(sb + tile_offset(r, kk * 2 + ((lane >> 3) & 1))), bf[2 * nj][0],
                                bf[2 * nj][1], bf[2 * nj + 1][0], bf[2 * nj + 1][1]);
                }
            }
#pragma unroll
            for (int mi = 0; mi < MT; mi++)
#pragma unroll
                for (int nj = 0; nj < cfg::NJ; nj++) mma_16816<T>(acc[mi][nj], af[mi], bf[nj]);
        }
        stage = stage + 1 == cfg::STAGES ? 0 : stage + 1;

        if (cons.kt + 1 == gd.k_slots) { // the pass is complete: its rows out, fresh sums
            if constexpr (KS == 1) {
                epilogue<T, MT, cfg::NJ>(p, acc, cons.expert, cons.m0, cons.n0 + warp_n);
            } else {
                // Every thread holds the same cursor, so the whole CTA reaches this barrier. The
                // area is written again only after the next step's barrier, i.e. after all reads.
                float4 *red = (float4 *)(smem_raw + cfg::STAGES * cfg::SLOT_ELEMS * sizeof(T));
#pragma unroll
                for (int mi = 0; mi < MT; mi++)
#pragma unroll
                    for (int nj = 0; nj < cfg::NJ; nj++)
                        red[((warp * MT + mi) * cfg::NJ + nj) * 32 + lane] =
                            make_float4(acc[mi][nj][0], acc[mi][nj][1], acc[mi][nj][2], acc[mi][nj][3]);
                __syncthreads();
#pragma unroll
                for (int j = 0; j < cfg::NJ / 4; j++) {
                    const int nj = j * 4 + warp; // this warp's 8 columns of the tile
                    float sum[MT][1][4];
#pragma unroll
                    for (int mi = 0; mi < MT; mi++) {
                        float4 s = red[(mi * cfg::NJ + nj) * 32 + lane]; // warp 0's partial first
#pragma unroll
                        for (int w = 1; w < 4; w++) {
                            const float4 v = red[((w * MT + mi) * cfg::NJ + nj) * 32 + lane];
                            s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
                        }
                        sum[mi][0][0] = s.x, sum[mi][0][1] = s.y, sum[mi][0][2] = s.z, sum[mi][0][3] = s.w;
                    }
                    epilogue<T, MT, 1>(p, sum, cons.expert, cons.m0, cons.n0 + nj * 8);
                }
            }
            zero_acc(acc);
        }
        decode_advance<BMD>(p, gd, cons, BN);
    }
    cp_async_wait<0>();
}

} // namespace

static int gemm_grid_cap = 0; // resident 64 x 128 blocks on the whole GPU, set by gemm_init
static int gemm_sm_count = 0; // SMs of the device, set by gemm_init (0: not yet, e.g. describe on a host)

// The decode kernels: N split BN in {32, 64, 128} x MT in {1, 2}, K split BN 32 x MT in {1, 2},
// each for bf16 and f16; variant index 0-5 (N split: bn index * 2 + mt - 1) and 6-7 (K split).
typedef void (*decode_fn)(const gemm_args);
static const int decode_bns[3] = {32, 64, 128};
static int decode_variant(int bn, int mt, int ks) {
    if (ks != 1) return 6 + (mt - 1);
    return (bn == 32 ? 0 : bn == 64 ? 1 : 2) * 2 + (mt - 1);
}

template <typename T> static decode_fn decode_pick(int bn, int mt, int ks) {
    switch (decode_variant(bn, mt, ks)) {
    case 0: return decode_kernel<T, 32, 1, 1>;
    case 1: return decode_kernel<T, 32, 2, 1>;
    case 2: return decode_kernel<T, 64, 1, 1>;
    case 3: return decode_kernel<T, 64, 2, 1>;
    case 4: return decode_kernel<T, 128, 1, 1>;
    case 5: return decode_kernel<T, 128, 2, 1>;
    case 6: return decode_kernel<T, 32, 1, DECODE_KSPLIT>;
    default: return decode_kernel<T, 32, 2, DECODE_KSPLIT>;
    }
}
static int decode_cap[8]; // resident CTAs on the GPU per variant, set by gemm_init

gemm_choice gemm_choose(int64_t rows, int64_t experts, int has_plan, int64_t routed_rows, int64_t n) {
    gemm_choice c;
    memset(&c, 0, sizeof c);
    const int64_t sms = gemm_sm_count > 0 ? gemm_sm_count : 132;
    // Live rows: the plan's host bound is live + experts * (BM - 1) (forward.cu's layout).
    int64_t live = has_plan ? rows - experts * (GEMM_BM - 1) : rows;
    if (live < 1) live = rows > 0 ? rows : 1;
    const int64_t touched = has_plan ? (experts < live ? experts : live) : 1;
    const int64_t avg = (live + touched - 1) / touched;
    const int64_t shared = has_plan && live > routed_rows ? live - routed_rows : 0; // one expert's rows
    c.live_rows = live;
    c.avg_rows = avg;
    // Plan blocks with a live row (bound): each touched expert pads to whole 64-row blocks.
    const int64_t blocks = has_plan ? ((live + (GEMM_BM - 1) * touched) / GEMM_BM < live
                                           ? (live + (GEMM_BM - 1) * touched) / GEMM_BM
                                           : live)
                                    : (rows + GEMM_BM - 1) / GEMM_BM;
    c.wide_tiles = blocks * ((n + GEMM_BN - 1) / GEMM_BN);
    const char *env = getenv("MOEFUSE_V1_TILE");
    if (env && !strcmp(env, "wide")) c.decode = 0;
    else if (env && !strcmp(env, "decode")) c.decode = 1;
    else c.decode = avg <= DECODE_MAX_AVG_ROWS;
    if (!c.decode) {
        c.bn = GEMM_BN, c.mt = GEMM_BM / 16, c.stages = GEMM_STAGES, c.ksplit = 1;
        c.items = (rows + GEMM_BM - 1) / GEMM_BM * ((n + GEMM_BN - 1) / GEMM_BN);
        return c;
    }
    c.mt = avg > DECODE_MT1_MAX_AVG || shared > 16 ? 2 : 1;
    const char *env_mt = getenv("MOEFUSE_V1_DECODE_MT");
    if (env_mt && (!strcmp(env_mt, "1") || !strcmp(env_mt, "2"))) c.mt = atoi(env_mt);
    const char *env_split = getenv("MOEFUSE_V1_DECODE_SPLIT");
    c.ksplit = env_split && !strcmp(env_split, "k") ? DECODE_KSPLIT
               : env_split && !strcmp(env_split, "n") ? 1
                                                      : DECODE_DEFAULT_SPLIT;
    if (c.ksplit != 1) { // the K-split kernel has one tile: 32 columns
        c.bn = 32;
        c.items = blocks * ((n + 31) / 32);
        c.stages = decode_stages(c.bn, c.mt, c.ksplit);
        return c;
    }
    // N tile: the fewest weight columns on the busiest SM (items spread evenly over the SMs),
    // ties to the narrower tile: finer items still balance when fewer experts are touched than
    // the bound assumes, and the ring runs on across items, so more of them cost little.
    int64_t best = INT64_MAX;
    for (int i = 0; i < 3; i++) {
        const int64_t bn = decode_bns[i], items = blocks * ((n + bn - 1) / bn);
        const int64_t cost = (items + sms - 1) / sms * bn;
        if (cost < best) best = cost, c.bn = (int)bn, c.items = items;
    }
    const char *env_bn = getenv("MOEFUSE_V1_DECODE_BN");
    if (env_bn && (!strcmp(env_bn, "32") || !strcmp(env_bn, "64") || !strcmp(env_bn, "128"))) {
        c.bn = atoi(env_bn);
        c.items = blocks * ((n + c.bn - 1) / c.bn);
    }
    c.stages = decode_stages(c.bn, c.mt, 1);
    return c;
}

int gemm_describe(int64_t rows, int64_t experts, int has_plan, int64_t routed_rows, int64_t n, char *buf,
                  size_t size) {
    const gemm_choice c = gemm_choose(rows, experts, has_plan, routed_rows, n);
    if (!c.decode)
        return snprintf(buf, size, "%dx%dx%d tile, %d stages", GEMM_BM, GEMM_BN, GEMM_BK, GEMM_STAGES);
    return snprintf(buf, size, "decode %dx%dx%d tile (rows in passes of %d, %s), %d stages, ~%lld items",
                    16 * c.mt, c.bn, GEMM_BK * c.ksplit, 16 * c.mt,
                    c.ksplit != 1 ? "K split over the 4 warps" : "N split over the 4 warps", c.stages,
                    (long long)c.items);
}

template <typename T> static cudaError_t decode_init_one(int bn, int mt, int ks, int sms) {
    decode_fn f = decode_pick<T>(bn, mt, ks);
    const int smem = decode_smem(bn, mt, ks);
    cudaError_t err = cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    int per_sm = 0;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, GEMM_THREADS, smem);
    if (err != cudaSuccess) return err;
    decode_cap[decode_variant(bn, mt, ks)] = sms * (per_sm > 0 ? per_sm : 1);
    return cudaSuccess;
}

cudaError_t gemm_init(void) {
    int device = 0, sms = 0, per_sm = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(gemm_kernel<__nv_bfloat16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           GEMM_SMEM_BYTES);
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(gemm_kernel<__half>, cudaFuncAttributeMaxDynamicSharedMemorySize, GEMM_SMEM_BYTES);
    if (err != cudaSuccess) return err;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemm_kernel<__nv_bfloat16>, GEMM_THREADS,
                                                        GEMM_SMEM_BYTES);
    if (err != cudaSuccess) return err;
    // The N-split kernels at every (BN, MT), then the K-split ones (BN 32).
    for (int v = 0; v < 8 && err == cudaSuccess; v++) {
        const int bn = v < 6 ? decode_bns[v / 2] : 32, mt = v % 2 + 1, ks = v < 6 ? 1 : DECODE_KSPLIT;
        err = decode_init_one<__nv_bfloat16>(bn, mt, ks, sms);
        if (err == cudaSuccess) err = decode_init_one<__half>(bn, mt, ks, sms);
    }
    if (err != cudaSuccess) return err;
    gemm_grid_cap = sms * (per_sm > 0 ? per_sm : 1);
    gemm_sm_count = sms;
    return hopper_gemm_init();
}

cudaError_t gemm_launch(moe_dtype dtype, const gemm_args *args, cudaStream_t stream) {
    if (args->rows <= 0 || args->n <= 0) return cudaSuccess;
    if (gemm_grid_cap <= 0) return cudaErrorInitializationError; // moe__cuda_init not called
    const gemm_choice c =
        gemm_choose(args->rows, args->experts, args->sorted_ids != NULL, args->tokens * args->top_k, args->n);
    if (c.decode) {
        // The host bound of items: every 64-row block of the bound x the N tiles.
        int64_t blocks = (args->rows + GEMM_BM - 1) / GEMM_BM * ((args->n + c.bn - 1) / c.bn);
        const int cap = decode_cap[decode_variant(c.bn, c.mt, c.ksplit)];
        if (blocks > cap) blocks = cap;
        const int smem = decode_smem(c.bn, c.mt, c.ksplit);
        decode_fn f = dtype == MOE_DTYPE_BF16 ? decode_pick<__nv_bfloat16>(c.bn, c.mt, c.ksplit)
                                              : decode_pick<__half>(c.bn, c.mt, c.ksplit);
        return launch_kernel(f, (unsigned)blocks, GEMM_THREADS, smem, stream, *args);
    }
    const int64_t tiles_n = (args->n + GEMM_BN - 1) / GEMM_BN;
    int64_t blocks = (args->rows + GEMM_BM - 1) / GEMM_BM * tiles_n; // the host bound of tiles
    if (blocks > gemm_grid_cap) blocks = gemm_grid_cap;
    const unsigned grid = (unsigned)blocks;
    if (dtype == MOE_DTYPE_BF16)
        return launch_kernel(gemm_kernel<__nv_bfloat16>, grid, GEMM_THREADS, GEMM_SMEM_BYTES, stream, *args);
    return launch_kernel(gemm_kernel<__half>, grid, GEMM_THREADS, GEMM_SMEM_BYTES, stream, *args);
}
