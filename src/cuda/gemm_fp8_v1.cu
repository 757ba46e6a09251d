// Grouped FP8 (e4m3 x e4m3) expert GEMM over the dispatch plan: the v1 kernels of gemm.cu with
// e4m3 operands and block scales (the 64 x 128 tile, and the K-split decode kernel below). Same plan (64-row blocks), same gather of x rows through the
// plan's ids, same epilogues (bias, GLU, routing weight, shared gate) and the same fp32 output
// rows, so combine is unchanged; GEMM_UP writes A2 in fp32 (the quantiser reads it next).
//
// mma.sync.m16n8k32.e4m3.e4m3.f32. Its fragments hold, byte for byte, what the bf16 m16n8k16
// fragments hold (A: rows g / g+8, bytes 4q..4q+3 and 16+4q..; B likewise; C the same), so the
// smem layout, swizzle and ldmatrix addressing are v1's with 128-byte rows = 128 e4m3 = BK.
// (On sm_90 ptxas lowers it to F2FP.F16.E4M3 unpacks + HMMA.16816.F32: exact products, fp32
// accumulation; only wgmma has native FP8 on Hopper.)
//
// Scales: one K step of the pipeline is one 128-wide scale block kb, so its MMAs accumulate a
// fresh fp32 partial, then the partial is promoted:
//   total += partial * (a_scale(row, kb) * w_scale(n, kb)),
// which is the CPU oracle's sum over kb of (codes . codes) * scales, in another order.
// A tile's 128 columns lie in one 128-row weight block (one gate and one up block for the
// paired W13, since 128 divides 256), so each thread needs two weight scales per kb (its even
// columns, its odd columns) and one activation scale per row it holds.
// K (H or I) need not be a multiple of 128: the last block is short, its missing columns are
// zero-filled on both sides (zero codes add nothing) and it has its own scales, exactly as
// moe_quantize's short last group. K must be a multiple of 16 (whole 16-byte copies).
//
// The two kernels share the loaders, the MMAs of one 128-wide k-tile and the promotion; they
// differ in the tile, the ring and the order the promoted partials are summed in (see
// fp8_decode_kernel). fp8_gemm_launch picks one with gemm.cu's gemm_choose (same rule, same
// MOEFUSE_V1_TILE / MOEFUSE_V1_DECODE_MT overrides as the bf16 kernels).
#include <stdio.h>

#include "gemm_fp8_v1.cuh"
#include "gemm_epilogue.cuh"

namespace {

// Byte offset of 16-byte chunk `chunk` of smem row `row` (v1's XOR swizzle).
__device__ __forceinline__ uint32_t fp8_tile_offset(int row, int chunk) {
    return (uint32_t)(row * FP8_BK + ((chunk ^ (row & 7)) << 4));
}

__device__ __forceinline__ void mma_fp8_16832(float *d, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The A row of plan row r with id `id` (not padding): the token for GEMM_UP, r for GEMM_DOWN.
__device__ __forceinline__ int64_t fp8_a_row(const gemm_args &p, int64_t r, int64_t id) {
    return p.mode != GEMM_UP ? r : plan_id_token(id, p.tokens * p.top_k, p.top_k);
}

// ---- pieces shared by the two kernels --------------------------------------------------------

// Where chunk column `chunk` of plan row r's A codes starts; ok = the row is not padding.
__device__ __forceinline__ const uint8_t *fp8_a_source(const gemm_args &p, int64_t r, int chunk, bool &ok) {
    const int64_t id = row_id(p, r);
    ok = id != p.tokens * p.top_k;
    return (const uint8_t *)p.a + (ok ? fp8_a_row(p, r, id) : 0) * p.lda + chunk * 16;
}

// Where chunk column `chunk` of weight row nrow of `expert` starts; ok = nrow < n.
__device__ __forceinline__ const uint8_t *fp8_b_source(const gemm_args &p, int64_t expert, int64_t nrow, int chunk,
                                                       bool &ok) {
    ok = nrow < p.n;
    return (const uint8_t *)p.b + expert * p.n * p.k + (ok ? nrow : 0) * p.k + chunk * 16;
}

// One thread's cp.async copies of a 128-wide k-tile at K offset k0: N rows (smem rows row0,
// row0 + step, ...) at chunk column `chunk` into the tile at shared address `tile`. Rows that
// are not ok and chunks past K (K is a multiple of 16: whole chunks) are zero-filled.
template <int N>
__device__ __forceinline__ void fp8_copy_rows(uint32_t tile, int row0, int step, int chunk,
                                              const uint8_t *const (&src)[N], const bool (&ok)[N], int64_t k0,
                                              int64_t k, const void *any_valid) {
    const bool k_ok = k0 + chunk * 16 < k;
#pragma unroll
    for (int i = 0; i < N; i++) {
        const bool valid = ok[i] && k_ok;
        cp_async_16(tile + fp8_tile_offset(row0 + step * i, chunk), valid ? (const void *)(src[i] + k0) : any_valid,
                    valid);
    }
}

// A warp's MMAs over one 128-wide k-tile into fresh partials: MI m16 tiles of A (smem rows
// a_row0 + 16 mi ..) times NJ n8 tiles of B (smem rows b_row0 + 8 nj .., NJ even).
template <int MI, int NJ>
__device__ __forceinline__ void fp8_ktile_mma(float (&part)[MI][NJ][4], const uint8_t *sa, int a_row0,
                                              const uint8_t *sb, int b_row0) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int kk = 0; kk < FP8_BK / 32; kk++) {
        uint32_t af[MI][4], bf[NJ][2];
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
            const int r = a_row0 + mi * 16 + (lane & 15);
            ldmatrix_x4(smem_address(sa + fp8_tile_offset(r, kk * 2 + (lane >> 4))), af[mi][0], af[mi][1], af[mi][2],
                        af[mi][3]);
        }
#pragma unroll
        for (int nj = 0; nj < NJ / 2; nj++) {
            const int r = b_row0 + nj * 16 + ((lane >> 4) << 3) + (lane & 7);
            ldmatrix_x4(smem_address(sb + fp8_tile_offset(r, kk * 2 + ((lane >> 3) & 1))), bf[2 * nj][0],
                        bf[2 * nj][1], bf[2 * nj + 1][0], bf[2 * nj + 1][1]);
        }
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int nj = 0; nj < NJ; nj++) mma_fp8_16832(part[mi][nj], af[mi], bf[nj]);
    }
}

// The activation-scale rows of the 2 MI accumulator rows a thread holds (epilogue layout:
// entry mi * 2 + half is row row0 + 16 mi + 8 half + g). A dead row gets scale 0: its partials
// are 0 and its scale memory may be anything.
template <int MI> struct fp8_a_scales {
    const float *row[2 * MI];
    bool ok[2 * MI];
};
template <int MI>
__device__ __forceinline__ void fp8_a_scales_init(const fp8_gemm_args &P, int64_t row0, fp8_a_scales<MI> &s) {
    const int g = (threadIdx.x & 31) >> 2;
    const int64_t padding_id = P.g.tokens * P.g.top_k;
#pragma unroll
    for (int i = 0; i < 2 * MI; i++) {
        const int64_t r = row0 + (i >> 1) * 16 + (i & 1) * 8 + g, id = row_id(P.g, r);
        s.ok[i] = id != padding_id;
        s.row[i] = P.a_scales + (s.ok[i] ? fp8_a_row(P.g, r, id) : 0) * P.a_scale_rs;
    }
}

// The weight scales of a thread's even and odd columns of a tile at n0 (tiles of 32 or 128
// columns lie in one 128-row scale block, one gate and one up block when paired).
struct fp8_w_scales {
    const float *even, *odd;
    int64_t ks; // stride between K blocks (0: one scale per matrix)
};
__device__ __forceinline__ fp8_w_scales fp8_w_scales_at(const fp8_gemm_args &P, int64_t expert, int64_t n0) {
    fp8_w_scales w;
    w.even = P.w_scales + expert * P.w_scale_rows * P.w_scale_cols;
    w.ks = 1;
    if (P.w_scale_kind == FP8W_TENSOR) {
        w.ks = 0;
        w.odd = w.even;
    } else if (P.w_scale_kind == FP8W_BLOCK) {
        w.even += (n0 / 128) * P.w_scale_cols;
        w.odd = w.even;
    } else {
        w.even += 2 * (n0 / 256) * P.w_scale_cols;
        w.odd = w.even + P.w_scale_cols;
    }
    return w;
}

// Promotion of K block kb: total += partial * a_scale * w_scale (one fmaf each), partial = 0.
template <int MI, int NJ>
__device__ __forceinline__ void fp8_promote(const fp8_gemm_args &P, float (&acc)[MI][NJ][4],
                                            float (&part)[MI][NJ][4], const fp8_a_scales<MI> &as,
                                            const fp8_w_scales &ws, int64_t kb) {
    float a_scale[2 * MI];
#pragma unroll
    for (int i = 0; i < 2 * MI; i++) a_scale[i] = as.ok[i] ? as.row[i][kb * P.a_scale_ks] : 0.0f;
    const float w_even = ws.even[kb * ws.ks], w_odd = ws.odd[kb * ws.ks];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const float scale = a_scale[mi * 2 + (c >> 1)] * ((c & 1) ? w_odd : w_even);
#pragma unroll
            for (int nj = 0; nj < NJ; nj++) {
                acc[mi][nj][c] = fmaf(part[mi][nj][c], scale, acc[mi][nj][c]);
                part[mi][nj][c] = 0.0f;
            }
        }
}

template <int MI, int NJ> __device__ __forceinline__ void fp8_zero(float (&v)[MI][NJ][4]) {
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int nj = 0; nj < NJ; nj++)
#pragma unroll
            for (int c = 0; c < 4; c++) v[mi][nj][c] = 0.0f;
}

// ---- the 64 x 128 kernel -------------------------------------------------------------------

// One BM x BN output tile: row block m_block (owned by one expert), columns n0 .. n0+BN-1.
// Every output is one warp's promoted partials summed in K-block order 0, 1, 2, ...
__device__ __forceinline__ void fp8_tile(const fp8_gemm_args &P, uint8_t *smem, int64_t m_block, int64_t n0) {
    const gemm_args &p = P.g;
    uint8_t *smem_a = smem;                               // [STAGES][BM][BK]
    uint8_t *smem_b = smem + FP8_STAGES * FP8_BM * FP8_BK; // [STAGES][BN][BK]
    const int64_t m0 = m_block * FP8_BM;
    const int64_t expert = p.block_expert ? p.block_expert[m_block] : 0;
    if (expert < 0) return;

    const int tid = threadIdx.x, warp = tid >> 5;

    // Copies: each thread 2 A chunks and 4 B chunks of 16 bytes (rows tid/8 + 32i, chunk tid%8).
    const int chunk = tid & 7, row0 = tid >> 3;
    const uint8_t *a_src[2];
    bool a_ok[2];
#pragma unroll
    for (int i = 0; i < 2; i++) a_src[i] = fp8_a_source(p, m0 + row0 + 32 * i, chunk, a_ok[i]);
    const uint8_t *b_src[4];
    bool b_ok[4];
#pragma unroll
    for (int i = 0; i < 4; i++) b_src[i] = fp8_b_source(p, expert, n0 + row0 + 32 * i, chunk, b_ok[i]);

    const int64_t k_tiles = (p.k + FP8_BK - 1) / FP8_BK; // = K blocks of 128
    auto load_stage = [&](int stage, int64_t kt) {
        const int64_t k0 = kt * FP8_BK;
        fp8_copy_rows<2>(smem_address(smem_a + stage * FP8_BM * FP8_BK), row0, 32, chunk, a_src, a_ok, k0, p.k, p.a);
        fp8_copy_rows<4>(smem_address(smem_b + stage * FP8_BN * FP8_BK), row0, 32, chunk, b_src, b_ok, k0, p.k, p.b);
    };

    const int warp_m = (warp >> 2) * 32, warp_n = (warp & 3) * 32;
    fp8_a_scales<2> a_scales;
    fp8_a_scales_init<2>(P, m0 + warp_m, a_scales);
    const fp8_w_scales w_scales = fp8_w_scales_at(P, expert, n0);

    float acc[2][4][4], part[2][4][4];
    fp8_zero(acc);
    fp8_zero(part);

    // Prologue: STAGES-1 stages in flight (empty commit groups past the end keep the count).
    for (int s = 0; s < FP8_STAGES - 1; s++) {
        if (s < k_tiles) load_stage(s, s);
        cp_async_commit();
    }

    for (int64_t kt = 0; kt < k_tiles; kt++) {
        cp_async_wait<FP8_STAGES - 2>();
        __syncthreads(); // stage kt landed for all threads; stage kt-1 is free to refill
        const int64_t next = kt + FP8_STAGES - 1;
        if (next < k_tiles) load_stage((int)(next % FP8_STAGES), next);
        cp_async_commit();

        const int stage = (int)(kt % FP8_STAGES);
        fp8_ktile_mma<2, 4>(part, smem_a + stage * FP8_BM * FP8_BK, warp_m, smem_b + stage * FP8_BN * FP8_BK, warp_n);
        fp8_promote<2, 4>(P, acc, part, a_scales, w_scales, kt);
    }
    cp_async_wait<0>();

    // Epilogue: gemm.cu's, with GEMM_UP writing fp32 A2 (T = float).
    epilogue<float, 2, 4>(p, acc, expert, m0 + warp_m, n0 + warp_n);
}

// Persistent grid over the live tiles with gemm.cu's grouped raster (GEMM_GROUP_M row blocks).
__global__ void __launch_bounds__(FP8_THREADS, 1) fp8_gemm_kernel(const fp8_gemm_args P) {
    extern __shared__ __align__(128) unsigned char fp8_smem[];
    const gemm_args &p = P.g;
    pdl_wait();
    pdl_launch_dependents();
    const int64_t live = p.live_rows ? *p.live_rows : p.rows;
    const int64_t tiles_n = (p.n + FP8_BN - 1) / FP8_BN, m_blocks = (live + FP8_BM - 1) / FP8_BM;
    const int64_t tiles = m_blocks * tiles_n;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int64_t per_group = (int64_t)GEMM_GROUP_M * tiles_n, group = tile / per_group;
        const int64_t first_m = group * GEMM_GROUP_M, in_group = tile % per_group;
        const int64_t group_m = m_blocks - first_m < GEMM_GROUP_M ? m_blocks - first_m : GEMM_GROUP_M;
        fp8_tile(P, fp8_smem, first_m + in_group % group_m, (in_group / group_m) * FP8_BN);
        __syncthreads(); // the next tile's copies overwrite stages other warps may still read
    }
}

// ---- the decode kernel (K split) -------------------------------------------------------------
// At small T (gemm_choose: <= 16 rows per touched expert on average) the GEMMs stream the
// touched experts' weights, and the 64 x 128 tile spends most of its MMAs on padding rows and
// leaves SMs idle. The FP8 counterpart of gemm.cu's K-split decode kernel:
//  - work item = (64-row plan block, 32 output columns), block fastest; an item's rows are
//    covered by passes of BMD = 16 MT rows while a pass's first row is live (live rows precede
//    padding in a block); each pass is a full sweep over K;
//  - 4 warps, a ring slot = 4 k-tiles of 128 (512 of K, 4 scale blocks): warp w multiplies
//    k-tile w of the slot, i.e. K block kb = 4 * slot + w, over all BMD rows and 32 columns,
//    and promotes that block's partial into its own fp32 totals (fp8_promote: the per-128-K
//    promotion is the 64 x 128 kernel's, same MMAs and same fmaf);
//  - the ring runs on across passes and items (the next item's copies are issued while the
//    current one finishes), so it never drains;
//  - at a pass's end the 4 warps' totals meet in shared memory and warp v adds them for its 8
//    columns in warp order: y = ((S0 + S1) + S2) + S3, where Sw = the fmaf chain over
//    kb = w, w + 4, w + 8, ... in increasing kb. (The 64 x 128 kernel sums over kb = 0, 1, 2, ...
//    in one chain: the same promoted terms, another fp32 order; both are deterministic.)
// Bytes in flight (H200: ~4.8 TB/s over 132 SMs = ~36 B/ns per SM; at ~1 us of loaded DRAM
// latency ~36 KB per SM must be in flight to stream at the floor): a slot moves 32 x 512 =
// 16 KB of weights (+ BMD x 512 bytes of A, mostly L2 hits); STAGES - 1 slots are in flight per
// CTA: MT = 1: 4 stages x 24 KB + 8 KB reduction = 104 KB, 3 x 16 = 48 KB of weights in flight;
// MT = 2: 3 stages x 32 KB + 16 KB = 112 KB, 2 x 16 = 32 KB. Two CTAs per SM (<= 112 KB + 1 KB
// reserve each in 228 KB): 64-96 KB of weights in flight per SM, ~2-3x the need, with 4 KB of
// weights per warp per step (as the bf16 K-split kernel, whose slot is 4 x 64 bf16 = 16 KB).
// Grid: the host bound of items (every 64-row block of the bound x ceil(n / 32)), capped at
// the resident CTAs (2 per SM); CTAs stride over the items, skipping dead ones on the device.
// No split-K across CTAs and no workspace.
#define FP8D_BN 32
#define FP8D_KS 4              // k-tiles (128 of K) per ring slot: one per warp
#define FP8D_THREADS 128
#define FP8D_SMEM (112 * 1024) // ring + reduction area, at most (two CTAs per SM)

template <int MT> struct fp8d_cfg {
    static constexpr int BMD = 16 * MT;                            // rows per pass
    static constexpr int NJ = FP8D_BN / 8;                         // n8 tiles per warp (all 32 columns)
    static constexpr int TILE_BYTES = (BMD + FP8D_BN) * FP8_BK;    // one k-tile: A rows then B rows
    static constexpr int SLOT_BYTES = FP8D_KS * TILE_BYTES;
    static constexpr int RED_BYTES = 4 * MT * NJ * 32 * 16;        // 4 warps' totals, a float4 per lane per tile
    static constexpr int STAGES = (FP8D_SMEM - RED_BYTES) / SLOT_BYTES;
    static constexpr int SMEM = STAGES * SLOT_BYTES + RED_BYTES;
    static_assert(STAGES >= 3, "the ring needs >= 3 stages");
    static_assert(NJ == 4, "the reduction gives each of the 4 warps one n8 tile");
};

// The CTA's walk over its steps: items striding by the grid, each item's passes, each pass's
// K slots. Every thread walks the same sequence (it reads the same plan), once as the producer
// (copies, STAGES - 1 steps ahead) and once as the consumer (MMAs). A pass is taken while its
// first row is live (live rows precede padding in a block), found when the previous one ends.
struct fp8d_walk {
    int64_t item;      // >= items: done
    int64_t m0;        // the pass's first plan row
    int64_t n0, expert;
    int pass, slot;
};
struct fp8d_sizes {
    int64_t items, live_blocks, padding_id;
    int k_slots, k_blocks;
};

// Moves w to the first pass of the first item >= item (striding by the grid) whose block is
// owned and starts with a live row.
__device__ __forceinline__ void fp8d_start(const gemm_args &p, const fp8d_sizes &z, fp8d_walk &w, int64_t item) {
    for (; item < z.items; item += gridDim.x) {
        const int64_t first_row = item % z.live_blocks * FP8_BM;
        const int64_t expert = p.block_expert ? p.block_expert[first_row / FP8_BM] : 0;
        if (expert >= 0 && row_id(p, first_row) != z.padding_id) {
            w.m0 = first_row;
            w.n0 = item / z.live_blocks * FP8D_BN;
            w.expert = expert;
            w.pass = w.slot = 0;
            break;
        }
    }
    w.item = item;
}

template <int BMD>
__device__ __forceinline__ void fp8d_next(const gemm_args &p, const fp8d_sizes &z, fp8d_walk &w) {
    if (++w.slot < z.k_slots) return;
    w.slot = 0;
    if (++w.pass < FP8_BM / BMD && row_id(p, w.m0 + BMD) != z.padding_id) {
        w.m0 += BMD;
        return;
    }
    fp8d_start(p, z, w, w.item + gridDim.x);
}

template <int MT>
__global__ void __launch_bounds__(FP8D_THREADS) fp8_decode_kernel(const fp8_gemm_args P) {
    using cfg = fp8d_cfg<MT>;
    constexpr int BMD = cfg::BMD, NJ = cfg::NJ;
    extern __shared__ __align__(128) unsigned char fp8_smem[]; // [STAGES][KS][BMD + BN][128], reduction
    const gemm_args &p = P.g;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    pdl_wait();
    pdl_launch_dependents();

    fp8d_sizes z;
    const int64_t live = p.live_rows ? *p.live_rows : p.rows;
    z.live_blocks = (live + FP8_BM - 1) / FP8_BM;
    z.items = z.live_blocks * ((p.n + FP8D_BN - 1) / FP8D_BN);
    z.padding_id = p.tokens * p.top_k;
    z.k_blocks = (int)((p.k + FP8_BK - 1) / FP8_BK);
    z.k_slots = (z.k_blocks + FP8D_KS - 1) / FP8D_KS;

    // The producer: per k-tile each thread copies MT A chunks and 2 B chunks (rows tid/8 + 16i,
    // chunk column tid % 8); sources set at each pass's first slot.
    const int chunk = tid & 7, row0 = tid >> 3;
    const uint8_t *a_src[MT], *b_src[2];
    bool a_ok[MT], b_ok[2];
    fp8d_walk prod, cons;
    fp8d_start(p, z, prod, blockIdx.x);
    cons = prod;

    auto issue = [&](int stage) {
        if (prod.slot == 0) {
#pragma unroll
            for (int i = 0; i < MT; i++) a_src[i] = fp8_a_source(p, prod.m0 + row0 + 16 * i, chunk, a_ok[i]);
#pragma unroll
            for (int j = 0; j < 2; j++) b_src[j] = fp8_b_source(p, prod.expert, prod.n0 + row0 + 16 * j, chunk, b_ok[j]);
        }
#pragma unroll
        for (int s = 0; s < FP8D_KS; s++) {
            const int64_t k0 = (int64_t)(prod.slot * FP8D_KS + s) * FP8_BK;
            const uint32_t sa = smem_address(fp8_smem + stage * cfg::SLOT_BYTES + s * cfg::TILE_BYTES);
            fp8_copy_rows<MT>(sa, row0, 16, chunk, a_src, a_ok, k0, p.k, p.a);
            fp8_copy_rows<2>(sa + BMD * FP8_BK, row0, 16, chunk, b_src, b_ok, k0, p.k, p.b);
        }
        fp8d_next<BMD>(p, z, prod);
    };

    // Prologue: STAGES - 1 steps (possibly spanning passes and items); empty groups past the
    // end keep the wait count right.
    for (int s = 0; s < cfg::STAGES - 1; s++) {
        if (prod.item < z.items) issue(s);
        cp_async_commit();
    }

    float acc[MT][NJ][4], part[MT][NJ][4];
    fp8_zero(acc);
    fp8_zero(part);
    fp8_a_scales<MT> a_scales;
    fp8_w_scales w_scales;
    int stage = 0, fill = cfg::STAGES - 1;
    while (cons.item < z.items) {
        const int slot = cons.slot;
        if (slot == 0) { // a new pass: its rows' activation scales, the item's weight scales
            fp8_a_scales_init<MT>(P, cons.m0, a_scales);
            w_scales = fp8_w_scales_at(P, cons.expert, cons.n0);
        }
        cp_async_wait<cfg::STAGES - 2>();
        __syncthreads(); // this step's slot landed for all threads; the previous one is free
        if (prod.item < z.items) issue(fill);
        cp_async_commit();
        fill = fill + 1 == cfg::STAGES ? 0 : fill + 1;

        const int kb = slot * FP8D_KS + warp; // this warp's K block (none past K: no MMAs, no scales)
        if (kb < z.k_blocks) {
            const uint8_t *sa = fp8_smem + stage * cfg::SLOT_BYTES + warp * cfg::TILE_BYTES;
            fp8_ktile_mma<MT, NJ>(part, sa, 0, sa + BMD * FP8_BK, 0);
            fp8_promote<MT, NJ>(P, acc, part, a_scales, w_scales, kb);
        }
        stage = stage + 1 == cfg::STAGES ? 0 : stage + 1;

        if (slot + 1 == z.k_slots) { // the pass is complete: the 4 warps' totals, its rows out
            // Every thread holds the same walk, so the whole CTA reaches this barrier. The area
            // is written again only after the next step's barrier, i.e. after all reads.
            float4 *red = (float4 *)(fp8_smem + cfg::STAGES * cfg::SLOT_BYTES);
#pragma unroll
            for (int mi = 0; mi < MT; mi++)
#pragma unroll
                for (int nj = 0; nj < NJ; nj++)
                    red[((warp * MT + mi) * NJ + nj) * 32 + lane] =
                        make_float4(acc[mi][nj][0], acc[mi][nj][1], acc[mi][nj][2], acc[mi][nj][3]);
            __syncthreads();
            float sum[MT][1][4]; // warp v's n8 tile nj = v, the warps' totals added in order 0..3
#pragma unroll
            for (int mi = 0; mi < MT; mi++) {
                float4 s = red[(mi * NJ + warp) * 32 + lane];
#pragma unroll
                for (int w = 1; w < 4; w++) {
                    const float4 v = red[((w * MT + mi) * NJ + warp) * 32 + lane];
                    s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
                }
                sum[mi][0][0] = s.x, sum[mi][0][1] = s.y, sum[mi][0][2] = s.z, sum[mi][0][3] = s.w;
            }
            epilogue<float, MT, 1>(p, sum, cons.expert, cons.m0, cons.n0 + warp * 8);
            fp8_zero(acc);
        }
        fp8d_next<BMD>(p, z, cons);
    }
    cp_async_wait<0>();
}

} // namespace

static int fp8_grid_cap = 0;       // resident 64 x 128 blocks on the whole GPU, set by fp8_gemm_init
static int fp8_decode_cap[2] = {}; // resident decode CTAs per MT (1, 2)

template <int MT> static cudaError_t fp8_decode_init(int sms) {
    const int smem = fp8d_cfg<MT>::SMEM;
    cudaError_t err = cudaFuncSetAttribute(fp8_decode_kernel<MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    int per_sm = 0;
    if (err == cudaSuccess)
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fp8_decode_kernel<MT>, FP8D_THREADS, smem);
    fp8_decode_cap[MT - 1] = sms * (per_sm > 0 ? per_sm : 1);
    return err;
}

cudaError_t fp8_gemm_init(void) {
    int device = 0, sms = 0, per_sm = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(fp8_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, FP8_SMEM_BYTES);
    if (err == cudaSuccess)
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fp8_gemm_kernel, FP8_THREADS, FP8_SMEM_BYTES);
    if (err == cudaSuccess) err = fp8_decode_init<1>(sms);
    if (err == cudaSuccess) err = fp8_decode_init<2>(sms);
    if (err != cudaSuccess) return err;
    fp8_grid_cap = sms * (per_sm > 0 ? per_sm : 1);
    return cudaSuccess;
}

int fp8_gemm_describe(int64_t rows, int64_t experts, int has_plan, int64_t routed_rows, int64_t n, char *buf,
                      size_t size) {
    const gemm_choice c = gemm_choose(rows, experts, has_plan, routed_rows, n);
    if (!c.decode)
        return snprintf(buf, size, "tile %dx%dx%d, %d stages", FP8_BM, FP8_BN, FP8_BK, FP8_STAGES);
    return snprintf(buf, size, "decode %dx%dx%d tile (rows in passes of %d, K split over the 4 warps), %d stages",
                    16 * c.mt, FP8D_BN, FP8D_KS * FP8_BK, 16 * c.mt,
                    c.mt == 1 ? fp8d_cfg<1>::STAGES : fp8d_cfg<2>::STAGES);
}

cudaError_t fp8_gemm_launch(const fp8_gemm_args *args, cudaStream_t stream) {
    const gemm_args &g = args->g;
    if (g.rows <= 0 || g.n <= 0) return cudaSuccess;
    if (fp8_grid_cap <= 0) return cudaErrorInitializationError; // moe__cuda_init not called
    // gemm.cu's rule (the same plan blocks): the decode kernel iff touched experts average
    // <= DECODE_MAX_AVG_ROWS rows, MT from the average; MOEFUSE_V1_TILE / _DECODE_MT override.
    const gemm_choice c = gemm_choose(g.rows, g.experts, g.sorted_ids != NULL, g.tokens * g.top_k, g.n);
    if (c.decode) {
        int64_t blocks = (g.rows + FP8_BM - 1) / FP8_BM * ((g.n + FP8D_BN - 1) / FP8D_BN); // host bound of items
        if (blocks > fp8_decode_cap[c.mt - 1]) blocks = fp8_decode_cap[c.mt - 1];
        const unsigned grid = (unsigned)blocks;
        if (c.mt == 1) return launch_kernel(fp8_decode_kernel<1>, grid, FP8D_THREADS, fp8d_cfg<1>::SMEM, stream, *args);
        return launch_kernel(fp8_decode_kernel<2>, grid, FP8D_THREADS, fp8d_cfg<2>::SMEM, stream, *args);
    }
    const int64_t tiles_n = (g.n + FP8_BN - 1) / FP8_BN;
    int64_t blocks = (g.rows + FP8_BM - 1) / FP8_BM * tiles_n; // the host bound of tiles
    if (blocks > fp8_grid_cap) blocks = fp8_grid_cap;
    return launch_kernel(fp8_gemm_kernel, (unsigned)blocks, FP8_THREADS, FP8_SMEM_BYTES, stream, *args);
}
