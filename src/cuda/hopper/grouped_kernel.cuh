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
//    matrices in plan order, so TMA loads them as in the dense case. GATHER (GEMM1 only): no
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
// Epilogue variants (template argument EPI; the library ships EPI_STAGED, the others exist so
// that the lab can compare them in one run, see src/cuda/NOTES.md "GEMM1 epilogue"):
//  - EPI_STAGED: each consumer warp copies its 16 x 256 accumulator slice, 32 columns at a
//    time, into its own shared-memory buffer, then reads it back row-major and applies bias,
//    scale and activation in a rolled loop, with 4/8/16-byte stores of whole 32-byte sectors.
//    The activation is chosen once per chunk (a uniform branch), not per element. Small code:
//    the per-element epilogue below unrolls 64 element bodies, each with a switch over six
//    activations, into ~190 KB of SASS (GEMM1), which is what made GEMM1 slow (hypothesis).
//  - EPI_REGS: the first version: straight from the accumulator fragment, per element
//    `glu_activate(p.activation, ...)`, 2-byte stores (GEMM1) or 8-byte stores (GEMM2).
//  - EPI_REGS_ACT: EPI_REGS with the activation fixed at compile time (ACT): lab only.
//  - EPI_REGS_RAW: GEMM_UP only: the raw accumulator pairs as bf16 into [rows, n] (no
//    activation, no scale, no bias): lab only.
//  - EPI_NONE: no store unless an accumulator is NaN (keeps the mainloop alive): lab only; the
//    FP8 grouped kernel (grouped_fp8_kernel.cuh) takes EPI_STAGED (shipped) or EPI_NONE too.
//  - EPI_QUANT: FP8 grouped kernel, GEMM_UP only: A2 quantised to e4m3 in the epilogue
//    (grouped_fp8_kernel.cuh).
//  - EPI_ACT_FIRST: GEMM_UP, gated activations, bf16 A2 (RELU2 falls back to EPI_STAGED): the
//    activation straight from the fragment (a thread holds each (gate, up) pair it owns), then
//    only the bf16 outputs go through the warp's staging buffer (a quarter of EPI_STAGED's
//    bytes), read back row-major for 16-byte stores. See act_first_up_epilogue.
//  - EPI_BULK: the FP8 grouped kernel's 192-wide tiles (both GEMMs), and GEMM2 of this kernel
//    (3 stages; hopper_gemm2_bulk): the finished outputs of a warp's 16 rows in shared memory, each row sent
//    by one bulk copy that overlaps the next tile (bulk_epilogue).
//  - EPI_STAGED_NOSTORE, EPI_STAGED_NOTABLE: lab probes of what EPI_STAGED's time per tile is
//    made of: all of it but the output stores (a value is stored only if NaN), or all of it
//    with the row table made up (offset from the plan row, scale 1, every row live) instead of
//    loaded from the plan and the routing weights. Their outputs are not the GEMM's.
#ifndef MOEFUSE_CUDA_HOPPER_GROUPED_KERNEL_CUH
#define MOEFUSE_CUDA_HOPPER_GROUPED_KERNEL_CUH

#include "../gemm.cuh" // gemm_args, GEMM_UP / GEMM_DOWN, glu_activate
#include "gemm_launch.cuh"

namespace moe_hopper {

enum grouped_epilogue {
    EPI_STAGED = 0,
    EPI_REGS = 1,
    EPI_REGS_ACT = 2,
    EPI_REGS_RAW = 3,
    EPI_NONE = 4,
    EPI_QUANT = 5,
    EPI_STAGED_NOSTORE = 6,
    EPI_STAGED_NOTABLE = 7,
    EPI_ACT_FIRST = 8,
    EPI_BULK = 9
};
// The epilogues that run staged_epilogue (the shipped one and its lab probes).
__host__ __device__ constexpr bool epi_staged(int epi) { return epi == EPI_STAGED || epi == EPI_STAGED_NOSTORE || epi == EPI_STAGED_NOTABLE; }
// The epilogues that need the per-warp staging buffers and row tables.
__host__ __device__ constexpr bool epi_uses_staging(int epi) { return epi_staged(epi) || epi == EPI_ACT_FIRST; }

using grouped_config = dense_config<256, 4, 1>;
constexpr int GBN = grouped_config::BN;
constexpr int GSTAGES = grouped_config::STAGES;
static_assert(BM == HOPPER_BLOCK_M, "the plan block must be the tile's rows");

// Staged epilogue geometry: per consumer warp, 16 rows x STAGE_COLS fp32 columns at a time,
// rows STAGE_LD floats apart. STAGE_LD = 40 (8 mod 32 banks per row) makes the fragment writes
// (8-byte, rows lane/4) and the row reads (16-byte, 8 lanes per row) free of bank conflicts.
constexpr int STAGE_COLS = 32;
constexpr int STAGE_LD = STAGE_COLS + 8;
// The staged chunks of a tile TILE_N columns wide (a 240-wide tile's last one is half a chunk).
__host__ __device__ constexpr int stage_chunks(int tile_n) { return (tile_n + STAGE_COLS - 1) / STAGE_COLS; }
constexpr int CONSUMER_WARPS = 8;
constexpr int STAGE_WARP_BYTES = 16 * STAGE_LD * 4;         // 2560
constexpr int ROWINFO_WARP_BYTES = 16 * 8 + 16 * 4;          // row offsets (int64) + scales
constexpr int STAGED_EXTRA_BYTES = CONSUMER_WARPS * (STAGE_WARP_BYTES + ROWINFO_WARP_BYTES);

// DYN: the stage headers that carry each unit's number from the producer to the consumers, then
// (GATHER) the two words through which the producer's thread 0 hands the next unit to the others.
constexpr int DYN_HEADER_BYTES = 16 * 4;
constexpr int DYN_NEXT_UNIT_WORD = 8;
static_assert(GSTAGES <= DYN_NEXT_UNIT_WORD && DYN_NEXT_UNIT_WORD + 2 <= DYN_HEADER_BYTES / 4,
              "one header int per stage, then the two next-unit words");
// EPI_BULK's buffers (bulk_epilogue below, both grouped kernels): per consumer warp 16 whole rows
// of a TILE_N-wide tile's outputs, rows bulk_ld bytes apart, from a 16-byte aligned start (the bulk
// copies need it; bulk_buffers), then per consumer warp a row table.
template <int TILE_N> __host__ __device__ constexpr int bulk_ld() { return 2 * TILE_N + 16; }
template <int TILE_N> __host__ __device__ constexpr int bulk_warp_bytes() { return 16 * bulk_ld<TILE_N>(); }
template <int TILE_N> constexpr int bulk_extra_bytes() {
    return 16 + CONSUMER_WARPS * (bulk_warp_bytes<TILE_N>() + ROWINFO_WARP_BYTES);
}
__device__ __forceinline__ uint8_t *bulk_buffers(void *end) {
    return (uint8_t *)(((uintptr_t)end + 15) & ~(uintptr_t)15);
}
// EPI_BULK (GEMM2): 3 stages, to make room for the buffers of a 256-wide tile.
constexpr int BULK_GSTAGES = 3;
using grouped_bulk_config = dense_config<256, BULK_GSTAGES, 1>;
template <int EPI, bool DYN = false> constexpr int grouped_smem_bytes() {
    return (EPI == EPI_BULK ? grouped_bulk_config::SMEM_BYTES + bulk_extra_bytes<GBN>()
                            : grouped_config::SMEM_BYTES + (epi_uses_staging(EPI) ? STAGED_EXTRA_BYTES : 0)) +
           (DYN ? DYN_HEADER_BYTES : 0);
}
static_assert(grouped_smem_bytes<EPI_STAGED>() <= 227 * 1024, "shared memory per CTA on sm_90");
static_assert(grouped_smem_bytes<EPI_STAGED, true>() <= 227 * 1024, "shared memory per CTA on sm_90");
static_assert(grouped_smem_bytes<EPI_BULK, true>() <= 227 * 1024, "shared memory per CTA on sm_90");

struct grouped_params {
    int n, k;                 // per expert: output columns (R13 or H), reduction (H or I)
    int tiles_n, group_m;
    int b_tail_rows;          // n % BN: the rows map_b_tail loads for a row's last tile (0: none)
    const int64_t *live_rows; // device: the plan's total (a multiple of 128)
    const int32_t *block_expert;
    // device: the plan's [experts + 1] block-aligned row offsets; set: the expert raster (below),
    // NULL: the grouped raster over all row blocks
    const int64_t *expert_offsets;
    const int32_t *sorted_ids;
    const float *bias;        // [experts, n] or NULL
    int64_t padding_id;       // T * k
    const float *topk_weights;
    const float *shared_scale;
    int weight_on_input;
    void *out;                // GEMM_UP: bf16 A2 [rows, ldo]; GEMM_DOWN: [T*k + T, ldo] fp32 or bf16
    int64_t ldo;
    int activation;
    float act_alpha, act_limit;
    int out_bf16;             // GEMM_DOWN, EPI_STAGED: rows in bf16, else fp32 (both kernels)
    // GATHER: A rows come from x [tokens, ldx] (bf16, 16-byte aligned rows) through sorted_ids.
    const __nv_bfloat16 *x;
    int64_t ldx, top_k;
    // DYN: [0] the next unit's ticket, [1] CTAs done taking tickets; both 0 at launch, and
    // the last CTA to take its final ticket puts them back to 0.
    int *unit_counter;
};

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

__device__ __forceinline__ int live_blocks(const grouped_params &p) {
    return (int)((*p.live_rows + BM - 1) / BM);
}

// Unit u's row block and column tile out of units_m x units_n, and the block's expert.
// The grouped raster over all row blocks (expert_offsets NULL) puts group_m blocks of several
// experts in a group: the n tiles that share a block's A rows are group_m tickets apart, so on the
// ticket schedule they start up to most of a unit apart and A comes from DRAM again (deepseek-v3
// GEMM1 at T=16384 read 32.7 GB for 15 GB of weights and 1.9 GB of A; bench/results/
// 2026-12-04-h200-session16/callS5). The expert raster keeps each expert's units together: the
// units of expert e are [units_n * first_e, units_n * first_{e+1}) (first_e: its first block), so
// block u / units_n is one of e's, and inside them the grouped raster runs over e's blocks alone
// (A sharers as many tickets apart as e has blocks, at most group_m).
__device__ __forceinline__ void unit_tile(const grouped_params &p, int u, int units_m, int units_n, int &m_block,
                                          int &n_unit, int &e) {
    if (p.expert_offsets == nullptr) {
        raster_unit(u, units_m, units_n, p.group_m, m_block, n_unit);
        e = p.block_expert[m_block];
        return;
    }
    e = p.block_expert[u / units_n];
    const int first = (int)(p.expert_offsets[e] / BM);
    const int blocks = (int)(p.expert_offsets[e + 1] / BM) - first;
    int m_local;
    raster_unit(u - first * units_n, blocks, units_n, p.group_m, m_local, n_unit);
    m_block = first + m_local;
}

// Where plan row `r`'s output goes and its scale: returns false for a padding row (dropped).
// GEMM_UP: A2 row r, scale = the routing weight when it multiplies the input, else 1.
// GEMM_DOWN: output row id (routed) or id - 1 (shared), scale = routing weight / shared gate.
// row_target_of: the same with the row's id already loaded (id = p.sorted_ids[r]).
template <int MODE>
__device__ __forceinline__ bool row_target_of(const grouped_params &p, int64_t r, int64_t id, int64_t &offset,
                                              float &scale) {
    if (id == p.padding_id) return false;
    const bool routed = id < p.padding_id;
    if (MODE == GEMM_UP) {
        scale = routed && p.weight_on_input ? p.topk_weights[id] : 1.0f;
        offset = r * p.ldo;
    } else {
        if (routed) scale = p.weight_on_input ? 1.0f : p.topk_weights[id];
        else scale = p.shared_scale ? p.shared_scale[id - p.padding_id - 1] : 1.0f;
        offset = (routed ? id : id - 1) * p.ldo;
    }
    return true;
}

template <int MODE>
__device__ __forceinline__ bool row_target(const grouped_params &p, int64_t r, int64_t &offset, float &scale) {
    return row_target_of<MODE>(p, r, p.sorted_ids[r], offset, scale);
}

// EPI_NONE (lab only, both grouped kernels): touch every accumulator and store only what is
// NaN (never, for finite inputs), so that the mainloop is not optimised away.
template <int N> __device__ __forceinline__ void keep_accumulators(const grouped_params &p, const float *acc) {
    bool nan = false;
#pragma unroll
    for (int i = 0; i < N; ++i) nan |= acc[i] != acc[i];
    if (nan) ((float *)p.out)[0] = acc[0];
}

// ---- EPI_REGS* / EPI_NONE: from the accumulator fragment --------------------------------
// One consumer thread: its rows (row, row + 8) x columns n0 + 8j + 2q (+1) of a fragment
// TILE_N columns wide.
template <int MODE, int EPI, int ACT, int TILE_N = GBN>
__device__ __forceinline__ void regs_epilogue(const grouped_params &p, const float *acc, int e, int64_t row, int n0,
                                              int q) {
    if (EPI == EPI_NONE) {
        keep_accumulators<TILE_N / 2>(p, acc);
        return;
    }
    const float *bias = p.bias ? p.bias + (int64_t)e * p.n : nullptr;
    const int act = EPI == EPI_REGS_ACT ? ACT : p.activation;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int64_t r = row + 8 * h;
        if (EPI == EPI_REGS_RAW) {
            __nv_bfloat16 *out_row = (__nv_bfloat16 *)p.out + r * p.ldo;
#pragma unroll
            for (int j = 0; j < TILE_N / 8; ++j) {
                const int col = n0 + 8 * j + 2 * q;
                if (col < p.n)
                    *(__nv_bfloat162 *)(out_row + col) =
                        __floats2bfloat162_rn(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
            }
            continue;
        }
        int64_t offset;
        float scale;
        if (!row_target<MODE>(p, r, offset, scale)) continue;
        if (MODE == GEMM_UP) {
            __nv_bfloat16 *out_row = (__nv_bfloat16 *)p.out + offset;
#pragma unroll
            for (int j = 0; j < TILE_N / 8; ++j) {
                const int col = n0 + 8 * j + 2 * q;
                if (col >= p.n) continue; // n is even: the pair is whole
                // Scaling the accumulator by the input weight = scaling the gathered row.
                float v0 = acc[4 * j + 2 * h] * scale, v1 = acc[4 * j + 2 * h + 1] * scale;
                if (bias) {
                    v0 += bias[col];
                    v1 += bias[col + 1];
                }
                if (act == MOE_ACT_RELU2) {
                    out_row[col] = __float2bfloat16_rn(glu_activate(MOE_ACT_RELU2, 0.0f, 0.0f, v0, 0.0f));
                    out_row[col + 1] = __float2bfloat16_rn(glu_activate(MOE_ACT_RELU2, 0.0f, 0.0f, v1, 0.0f));
                } else {
                    out_row[col >> 1] = __float2bfloat16_rn(glu_activate(act, p.act_alpha, p.act_limit, v0, v1));
                }
            }
        } else {
            float *out_row = (float *)p.out + offset;
#pragma unroll
            for (int j = 0; j < TILE_N / 8; ++j) {
                const int col = n0 + 8 * j + 2 * q;
                if (col >= p.n) continue;
                float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
                if (bias) {
                    v0 += bias[col];
                    v1 += bias[col + 1];
                }
                // n (= H) is a multiple of 64: the pair is 8-byte aligned.
                *(float2 *)(out_row + col) = make_float2(v0 * scale, v1 * scale);
            }
        }
    }
}

// ---- EPI_STAGED --------------------------------------------------------------------------
// Copies chunk c (columns 32c .. 32c+31 of the tile) of this lane's fragment into the warp's
// staging rows: acc[4j + 2h + e] is fragment row lane/4 + 8h, column 8j + 2*(lane%4) + e.
// The branch per chunk keeps every accumulator index a compile-time constant (registers),
// while the loop around the caller stays rolled. TILE_N: the fragment's width (a last chunk of a
// 240-wide tile holds 16 columns).
template <int TILE_N = GBN> __device__ __forceinline__ void stage_chunk(const float *acc, int c, float *stage, int lane) {
    constexpr int CHUNKS = stage_chunks(TILE_N);
    float *dst = stage + (lane / 4) * STAGE_LD + 2 * (lane % 4);
#pragma unroll
    for (int C = 0; C < CHUNKS; ++C) {
        if (C == c) {
#pragma unroll
            for (int jj = 0; jj < STAGE_COLS / 8; ++jj) {
                const int j = C * (STAGE_COLS / 8) + jj;
                if (j >= TILE_N / 8) break; // past the fragment (compile-time)
                *(float2 *)(dst + 8 * jj) = make_float2(acc[4 * j + 0], acc[4 * j + 1]);
                *(float2 *)(dst + 8 * STAGE_LD + 8 * jj) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
            }
        }
    }
}

// 4 and 2 consecutive values of a row packed as O for one store: fp32 (float4 / float2: 16- /
// 8-byte stores) or bf16 (each value rounded once: uint2 / __nv_bfloat162, 8- / 4-byte stores).
template <typename O> __device__ __forceinline__ auto pack4(float a, float b, float c, float d) {
    if constexpr (sizeof(O) == 4) {
        return make_float4(a, b, c, d);
    } else {
        const __nv_bfloat162 lo = __floats2bfloat162_rn(a, b);
        const __nv_bfloat162 hi = __floats2bfloat162_rn(c, d);
        return make_uint2(*(const uint32_t *)&lo, *(const uint32_t *)&hi);
    }
}
template <typename O> __device__ __forceinline__ auto pack2(float a, float b) {
    if constexpr (sizeof(O) == 4) return make_float2(a, b);
    else return __floats2bfloat162_rn(a, b);
}
// *(packed type *)dst = v: dst aligned to the store.
template <typename V, typename O> __device__ __forceinline__ void store_packed(O *dst, const V &v) { *(V *)dst = v; }

// The rows a lane handles in every chunk of a tile (4i + lane/8, i < 4): their output offsets
// (-1: padding) and scales, read from the row table once a tile.
struct lane_rows {
    int64_t off[4];
    float scale[4];
};

// The chunk bodies below load all four rows first and compute every row, padding too, storing
// only the live ones: no branch around a row's work, so the rows' loads, exponentials and
// reciprocals overlap (with a `continue` per padding row each row ran as its own dependent
// chain; session 23's stall samples put the staged epilogue at a quarter of GEMM1's time).

// GEMM_UP, one chunk, activation fixed: lane reads 4 columns (granule lane%8) of rows
// 4i + lane/8 of the warp's 16, i.e. 2 (gate, up) pairs -> 2 values of A2 (RELU2: 4 columns
// -> 4), in A2's type O: bf16, or fp32 on the FP8 path (quantised next).
template <int ACT, typename O = __nv_bfloat16, bool STORE = true>
__device__ __forceinline__ void staged_up_chunk(const grouped_params &p, const float *stage, const lane_rows &rows,
                                                float4 b, int col, int lane) {
    O *out = (O *)p.out;
    float4 v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = *(const float4 *)(stage + (4 * i + lane / 8) * STAGE_LD + 4 * (lane % 8));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int64_t off = rows.off[i];
        const float s = rows.scale[i];
        // Scaling the accumulator by the input weight = scaling the gathered row.
        const float x0 = v[i].x * s + b.x, x1 = v[i].y * s + b.y, x2 = v[i].z * s + b.z, x3 = v[i].w * s + b.w;
        if (ACT == MOE_ACT_RELU2) { // col % 4 == 0, ldo % 4 == 0: aligned
            const float y0 = glu_activate(ACT, 0.0f, 0.0f, x0, 0.0f), y1 = glu_activate(ACT, 0.0f, 0.0f, x1, 0.0f);
            const float y2 = glu_activate(ACT, 0.0f, 0.0f, x2, 0.0f), y3 = glu_activate(ACT, 0.0f, 0.0f, x3, 0.0f);
            const auto q = pack4<O>(y0, y1, y2, y3);
            if (off >= 0 && (STORE || y0 != y0)) store_packed(out + off + col, q);
        } else {
            const float y0 = glu_activate(ACT, p.act_alpha, p.act_limit, x0, x1);
            const float y1 = glu_activate(ACT, p.act_alpha, p.act_limit, x2, x3);
            const auto q = pack2<O>(y0, y1);
            if (off >= 0 && (STORE || y0 != y0)) store_packed(out + off + col / 2, q);
        }
    }
}

// GEMM_DOWN, one chunk: (acc + bias) x scale -> 4 values of one row per lane and row, in R:
// float, 16-byte stores; __nv_bfloat16 (each value rounded once), 8-byte stores, so a warp's
// 8 lanes still cover whole 32-byte sectors of a row. col % 4 == 0 and ldo % 4 == 0: aligned.
template <typename R = float, bool STORE = true>
__device__ __forceinline__ void staged_down_chunk(const grouped_params &p, const float *stage, const lane_rows &rows,
                                                  float4 b, int col, int lane) {
    R *out = (R *)p.out;
    float4 v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = *(const float4 *)(stage + (4 * i + lane / 8) * STAGE_LD + 4 * (lane % 8));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float s = rows.scale[i];
        const float y0 = (v[i].x + b.x) * s, y1 = (v[i].y + b.y) * s, y2 = (v[i].z + b.z) * s, y3 = (v[i].w + b.w) * s;
        const auto q = pack4<R>(y0, y1, y2, y3);
        if (rows.off[i] >= 0 && (STORE || y0 != y0)) store_packed(out + rows.off[i] + col, q);
    }
}

// The row table of one consumer warp's 16 output rows, in `info`: row_off[i] the element offset
// of row warp_row + i's output (-1: padding, nothing stored), row_scale[i] its epilogue scale.
// Returns whether any of the 16 rows is live (at decode most warps hold only padding).
// Shared by the bf16 and FP8 staged epilogues.
template <int MODE, bool MADE_UP = false>
__device__ __forceinline__ bool fill_row_table(const grouped_params &p, int64_t warp_row, int lane, uint8_t *info,
                                               int64_t *&row_off, float *&row_scale) {
    row_off = (int64_t *)info;
    row_scale = (float *)(info + 16 * 8);
    __syncwarp(); // the previous tile's reads of the row table are done
    bool live = false;
    if (lane < 16) {
        int64_t off = -1;
        float s = 1.0f;
        if (MADE_UP) // EPI_STAGED_NOTABLE: no plan or weight loads; GEMM2's rows kept inside out
            off = (MODE == GEMM_UP ? warp_row + lane : (warp_row + lane) % p.padding_id) * p.ldo;
        else if (!row_target<MODE>(p, warp_row + lane, off, s))
            off = -1;
        row_off[lane] = off;
        row_scale[lane] = s;
        live = off >= 0;
    }
    return __any_sync(0xFFFFFFFFu, live);
}

// The whole epilogue of one consumer warp: rows warp_row .. +15 of the tile, columns n0 .. n0 +
// TILE_N - 1 (those below n; the bf16 tile is 256 wide, or 240, the FP8 one 128). `stage` is the
// warp's staging buffer, `info` its row table. A2T: GEMM_UP's output type (bf16; fp32 on the FP8
// path); GEMM_DOWN rows are fp32, or bf16 when out_bf16.
template <int MODE, int TILE_N = GBN, typename A2T = __nv_bfloat16, int PROBE = EPI_STAGED>
__device__ __forceinline__ void staged_epilogue(const grouped_params &p, const float *acc, int e, int64_t warp_row,
                                                int n0, int lane, float *stage, uint8_t *info) {
    constexpr int CHUNKS = stage_chunks(TILE_N);
    int64_t *row_off;
    float *row_scale;
    if (!fill_row_table<MODE, PROBE == EPI_STAGED_NOTABLE>(p, warp_row, lane, info, row_off, row_scale)) return; // all padding
    constexpr bool ST = PROBE != EPI_STAGED_NOSTORE;
    const float *bias = p.bias ? p.bias + (int64_t)e * p.n : nullptr;
    lane_rows rows;
    __syncwarp(); // the row table's writes (lanes 0-15) are visible
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        rows.off[i] = row_off[4 * i + lane / 8];
        rows.scale[i] = row_scale[4 * i + lane / 8];
    }
#pragma unroll 1
    for (int c = 0; c < CHUNKS; ++c) {
        const int chunk_col = n0 + c * STAGE_COLS;
        if (chunk_col >= p.n) break; // the rest of the tile is past n (uniform)
        __syncwarp(); // the previous chunk's reads (and the row table writes) are done
        stage_chunk<TILE_N>(acc, c, stage, lane);
        __syncwarp();
        const int col = chunk_col + 4 * (lane % 8);
        if (col >= p.n) continue; // n % 4 == 0: a granule is wholly inside or outside (rare: N tails)
        if (TILE_N % STAGE_COLS != 0 && col >= n0 + TILE_N) continue; // the next tile's (a partial last chunk)
        const float4 b = bias ? *(const float4 *)(bias + col) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (MODE == GEMM_DOWN) {
            if (p.out_bf16)
                staged_down_chunk<__nv_bfloat16, ST>(p, stage, rows, b, col, lane);
            else
                staged_down_chunk<float, ST>(p, stage, rows, b, col, lane);
        } else {
            // One uniform branch per chunk, each case a specialised straight-line body.
            switch (p.activation) {
            case MOE_ACT_SWIGLU: staged_up_chunk<MOE_ACT_SWIGLU, A2T, ST>(p, stage, rows, b, col, lane); break;
            case MOE_ACT_GEGLU: staged_up_chunk<MOE_ACT_GEGLU, A2T, ST>(p, stage, rows, b, col, lane); break;
            case MOE_ACT_GEGLU_TANH:
                staged_up_chunk<MOE_ACT_GEGLU_TANH, A2T, ST>(p, stage, rows, b, col, lane);
                break;
            case MOE_ACT_REGLU: staged_up_chunk<MOE_ACT_REGLU, A2T, ST>(p, stage, rows, b, col, lane); break;
            case MOE_ACT_RELU2: staged_up_chunk<MOE_ACT_RELU2, A2T, ST>(p, stage, rows, b, col, lane); break;
            case MOE_ACT_SWIGLU_OAI:
                staged_up_chunk<MOE_ACT_SWIGLU_OAI, A2T, ST>(p, stage, rows, b, col, lane);
                break;
            }
        }
    }
}

// ---- EPI_ACT_FIRST ------------------------------------------------------------------------
// GEMM_UP with a gated activation into bf16 A2. Fragment column pair (8j + 2q, 8j + 2q + 1) of a
// thread is one (gate, up) pair, so A2 column n0/2 + 4j + q of rows lane/4 and lane/4 + 8 is
// computed where the accumulators are. Neighbour lanes (q, q ^ 1) swap one value so that each
// writes two adjacent A2 columns of one row (even lanes the upper row, odd lanes the lower) into
// the warp's staging buffer, 64 A2 columns (a pass, 4 chunks of 4 j) at a time, rows
// ACT_STAGE_LD apart; the pass is read back row-major, 16 bytes a lane, for 16-byte stores.
// Requires n / 2 and ldo multiples of 8 and out 16-byte aligned (grouped_act_first_ok).
constexpr int ACT_STAGE_LD = 72;        // bf16: 144-byte rows (16-byte aligned for the read-back)
constexpr int ACT_PASS_CHUNKS = 4;      // chunks of STAGE_COLS tile columns a pass: 64 A2 columns
static_assert(16 * ACT_STAGE_LD * 2 <= STAGE_WARP_BYTES, "a pass fits the warp's staging buffer");

// v[4jj + 2h + e] = acc[4(4c + jj) + 2h + e]: chunk c's 16 fragment values (0 past a fragment
// TILE_N wide), register moves under a uniform branch (keeps the caller's loop over chunks
// rolled, as stage_chunk does).
template <int TILE_N = GBN> __device__ __forceinline__ void chunk_fragment(const float *acc, int c, float (&v)[16]) {
    constexpr int CHUNKS = stage_chunks(TILE_N);
#pragma unroll
    for (int C = 0; C < CHUNKS; ++C) {
        if (C == c) {
#pragma unroll
            for (int i = 0; i < 16; ++i) v[i] = 16 * C + i < TILE_N / 2 ? acc[16 * C + i] : 0.0f;
        }
    }
}

template <int ACT, int TILE_N = GBN>
__device__ __forceinline__ void act_first_up_epilogue(const grouped_params &p, const float *acc, int e, int n0, int lane,
                                                      __nv_bfloat16 *stage, const int64_t *row_off,
                                                      const float *row_scale) {
    const int q = lane % 4, r0 = lane / 4;
    const bool odd = q & 1;
    __syncwarp(); // the row table's writes (lanes 0-15) are visible
    const float s0 = row_scale[r0], s1 = row_scale[r0 + 8];
    const float *bias = p.bias ? p.bias + (int64_t)e * p.n : nullptr;
    const int half_n = p.n / 2;
    __nv_bfloat16 *out = (__nv_bfloat16 *)p.out;
    constexpr int CHUNKS = stage_chunks(TILE_N);
#pragma unroll 1
    for (int pass = 0; pass < (CHUNKS + ACT_PASS_CHUNKS - 1) / ACT_PASS_CHUNKS; ++pass) {
        const int a2_col0 = n0 / 2 + pass * (ACT_PASS_CHUNKS * STAGE_COLS / 2);
        if (a2_col0 >= half_n) break; // the rest of the tile is past n (uniform)
        __syncwarp();                 // the previous pass's reads (and the row table writes) are done
#pragma unroll 1
        for (int cc = 0; cc < ACT_PASS_CHUNKS; ++cc) {
            const int c = pass * ACT_PASS_CHUNKS + cc;
            float v[16];
            chunk_fragment<TILE_N>(acc, c, v);
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) {
                const int col = n0 + 8 * (4 * c + jj) + 2 * q; // the gate's tile column; n is even
                const float2 b = bias && col < p.n ? *(const float2 *)(bias + col) : make_float2(0.0f, 0.0f);
                // Scaling the accumulator by the input weight = scaling the gathered row.
                const float y0 = glu_activate(ACT, p.act_alpha, p.act_limit, v[4 * jj] * s0 + b.x, v[4 * jj + 1] * s0 + b.y);
                const float y1 =
                    glu_activate(ACT, p.act_alpha, p.act_limit, v[4 * jj + 2] * s1 + b.x, v[4 * jj + 3] * s1 + b.y);
                const float got = __shfl_xor_sync(0xFFFFFFFFu, odd ? y0 : y1, 1);
                const __nv_bfloat162 pair = odd ? __floats2bfloat162_rn(got, y1) : __floats2bfloat162_rn(y0, got);
                const int row = odd ? r0 + 8 : r0;
                *(__nv_bfloat162 *)(stage + row * ACT_STAGE_LD + 4 * (4 * cc + jj) + (q & ~1)) = pair;
            }
        }
        __syncwarp();
        const int g = lane % 8; // 8 A2 columns (16 bytes) of rows 4i + lane / 8
        const int col = a2_col0 + 8 * g;
        // (a 240-wide tile's 120 A2 columns end inside the second pass)
        if (col < half_n && (TILE_N % (2 * ACT_PASS_CHUNKS * STAGE_COLS) == 0 || col < n0 / 2 + TILE_N / 2)) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int rr = 4 * i + lane / 8;
                const int64_t off = row_off[rr];
                if (off < 0) continue;
                *(uint4 *)(out + off + col) = *(const uint4 *)(stage + rr * ACT_STAGE_LD + 8 * g);
            }
        }
    }
}

// EPI_ACT_FIRST for one consumer warp: the row table, then the activation's specialisation
// (RELU2, not gated, takes the staged epilogue). TILE_N: the tile's width.
template <int TILE_N = GBN>
__device__ __forceinline__ void act_first_epilogue(const grouped_params &p, const float *acc, int e, int64_t warp_row,
                                                   int n0, int lane, float *stage, uint8_t *info) {
    if (p.activation == MOE_ACT_RELU2) {
        staged_epilogue<GEMM_UP, TILE_N>(p, acc, e, warp_row, n0, lane, stage, info);
        return;
    }
    int64_t *row_off;
    float *row_scale;
    if (!fill_row_table<GEMM_UP>(p, warp_row, lane, info, row_off, row_scale)) return; // all padding
    __nv_bfloat16 *st = (__nv_bfloat16 *)stage;
    switch (p.activation) {
    case MOE_ACT_SWIGLU: act_first_up_epilogue<MOE_ACT_SWIGLU, TILE_N>(p, acc, e, n0, lane, st, row_off, row_scale); break;
    case MOE_ACT_GEGLU: act_first_up_epilogue<MOE_ACT_GEGLU, TILE_N>(p, acc, e, n0, lane, st, row_off, row_scale); break;
    case MOE_ACT_GEGLU_TANH: act_first_up_epilogue<MOE_ACT_GEGLU_TANH, TILE_N>(p, acc, e, n0, lane, st, row_off, row_scale); break;
    case MOE_ACT_REGLU: act_first_up_epilogue<MOE_ACT_REGLU, TILE_N>(p, acc, e, n0, lane, st, row_off, row_scale); break;
    case MOE_ACT_SWIGLU_OAI: act_first_up_epilogue<MOE_ACT_SWIGLU_OAI, TILE_N>(p, acc, e, n0, lane, st, row_off, row_scale); break;
    }
}

// ---- EPI_BULK -----------------------------------------------------------------------------
// Each consumer warp writes its 16 rows of the tile's outputs, finished (bias, scale, activation,
// rounding), from the fragment into its own shared buffer, and lanes 0-15 then hand one row each
// to the TMA unit as one bulk copy (cp.async.bulk shared -> global) and go on to the next tile's
// mainloop without waiting for it: the stores leave while the next tile's MMAs run. A row of
// outputs is 2 * TILE_N bytes either way: GEMM2's TILE_N columns in bf16 (out_bf16 only), or GEMM1's
// TILE_N / 2 A2 values (gated activations) in fp32 (the FP8 kernel's A2). The buffer is read back
// only by the copies; before it is rewritten (the next tile), the lanes that issued them wait until
// their copies have read it (the wait is long over by then). Users: the FP8 kernel's 128 x 192
// tiles (both GEMMs, 4 stages instead of 5 to make room) and the bf16 kernel's GEMM2 (3 stages
// instead of 4). Rows 16 bytes longer than their data: 4 (192, 256 wide) or 28 (240) banks apart,
// so the fragment's writes (lane/4 picks the row, lane%4 the word) are free of bank conflicts;
// 16-byte aligned, as the copies need.
constexpr int BULK_WARP_BYTES = bulk_warp_bytes<192>(); // 6400: the FP8 kernel's
static_assert(BULK_WARP_BYTES >= STAGE_WARP_BYTES, "the staged epilogue (RELU2) can use a bulk buffer");

template <int ACT, int J>
__device__ __forceinline__ void bulk_up_rows(const grouped_params &p, const float *acc, const float *bias_t,
                                             int cols_left, float s_lo, float s_hi, int q, float *lo, float *hi) {
#pragma unroll
    for (int j = 0; j < J; ++j) {
        const int c = 8 * j + 2 * q; // the gate's tile column; n is even
        const float2 b = bias_t && c < cols_left ? *(const float2 *)(bias_t + c) : make_float2(0.0f, 0.0f);
        lo[4 * j + q] = glu_activate(ACT, p.act_alpha, p.act_limit, acc[4 * j] * s_lo + b.x, acc[4 * j + 1] * s_lo + b.y);
        hi[4 * j + q] =
            glu_activate(ACT, p.act_alpha, p.act_limit, acc[4 * j + 2] * s_hi + b.x, acc[4 * j + 3] * s_hi + b.y);
    }
}

// One consumer warp's epilogue of a 128 x TILE_N tile (acc: its TILE_N / 2 fragment values), rows
// warp_row .. + 15, tile columns n0 ..; `buf` its bulk_warp_bytes<TILE_N>(), `info` its row table.
// Needs (checked on the host) n % 8 == 0, ldo % 8 (GEMM2, bf16 rows) or % 4 (GEMM1, fp32) == 0 and
// out 16-byte aligned.
template <int MODE, int TILE_N = 192>
__device__ __forceinline__ void bulk_epilogue(const grouped_params &p, const float *acc, int e, int64_t warp_row,
                                              int n0, int lane, uint8_t *buf, uint8_t *info) {
    constexpr int J = TILE_N / 8, LD = bulk_ld<TILE_N>();
    if (lane < 16) bulk_wait_read<0>(); // the previous tile's copies are done with buf
    if (MODE == GEMM_UP && p.activation == MOE_ACT_RELU2) { // not gated: TILE_N fp32 a row, staged
        staged_epilogue<GEMM_UP, TILE_N, float>(p, acc, e, warp_row, n0, lane, (float *)buf, info);
        return;
    }
    int64_t *row_off;
    float *row_scale;
    if (!fill_row_table<MODE>(p, warp_row, lane, info, row_off, row_scale)) return; // all padding
    __syncwarp(); // the row table is visible
    const int q = lane % 4, r = lane / 4, cols_left = p.n - n0;
    const float s_lo = row_scale[r], s_hi = row_scale[r + 8];
    const float *bias_t = p.bias ? p.bias + (int64_t)e * p.n + n0 : nullptr;
    if (MODE == GEMM_DOWN) {
        uint32_t *lo = (uint32_t *)(buf + r * LD), *hi = (uint32_t *)(buf + (r + 8) * LD);
#pragma unroll
        for (int j = 0; j < J; ++j) {
            const int c = 8 * j + 2 * q;
            const float2 b = bias_t && c < cols_left ? *(const float2 *)(bias_t + c) : make_float2(0.0f, 0.0f);
            const __nv_bfloat162 v0 = __floats2bfloat162_rn((acc[4 * j] + b.x) * s_lo, (acc[4 * j + 1] + b.y) * s_lo);
            const __nv_bfloat162 v1 =
                __floats2bfloat162_rn((acc[4 * j + 2] + b.x) * s_hi, (acc[4 * j + 3] + b.y) * s_hi);
            lo[4 * j + q] = *(const uint32_t *)&v0;
            hi[4 * j + q] = *(const uint32_t *)&v1;
        }
    } else {
        float *lo = (float *)(buf + r * LD), *hi = (float *)(buf + (r + 8) * LD);
        // One uniform switch per tile, each case a straight-line body (see staged_epilogue).
        switch (p.activation) {
        case MOE_ACT_SWIGLU: bulk_up_rows<MOE_ACT_SWIGLU, J>(p, acc, bias_t, cols_left, s_lo, s_hi, q, lo, hi); break;
        case MOE_ACT_GEGLU: bulk_up_rows<MOE_ACT_GEGLU, J>(p, acc, bias_t, cols_left, s_lo, s_hi, q, lo, hi); break;
        case MOE_ACT_GEGLU_TANH:
            bulk_up_rows<MOE_ACT_GEGLU_TANH, J>(p, acc, bias_t, cols_left, s_lo, s_hi, q, lo, hi);
            break;
        case MOE_ACT_REGLU: bulk_up_rows<MOE_ACT_REGLU, J>(p, acc, bias_t, cols_left, s_lo, s_hi, q, lo, hi); break;
        case MOE_ACT_SWIGLU_OAI:
            bulk_up_rows<MOE_ACT_SWIGLU_OAI, J>(p, acc, bias_t, cols_left, s_lo, s_hi, q, lo, hi);
            break;
        }
    }
    fence_proxy_async_shared(); // the writes above, before the async proxy reads them
    __syncwarp();
    if (lane < 16) {
        const int64_t off = row_off[lane];
        // Output elements of this tile's row that exist: GEMM2 columns n0 .., GEMM1 A2 columns n0/2 ..
        const int cols = MODE == GEMM_DOWN ? min(TILE_N, cols_left) : min(TILE_N / 2, cols_left / 2);
        const int elem = MODE == GEMM_DOWN ? 2 : 4;
        if (off >= 0 && cols > 0)
            bulk_copy_s2g((uint8_t *)p.out + (off + (MODE == GEMM_DOWN ? n0 : n0 / 2)) * elem, buf + lane * LD,
                          (uint32_t)(cols * elem));
        bulk_commit();
    }
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
// with a flag (GEMM2) for a block whose second half is all padding (an expert's last block holding
// at most 64 rows), whose MMAs the second consumer warpgroup then skips.
// BN: the tile's columns, 256, or 240 where it divides n (gpt-oss's 2880: no tail tile).
template <int MODE, int EPI, int ACT, bool GATHER = false, bool DYN = false, int BN = GBN>
__global__ void __launch_bounds__(THREADS, 1)
    grouped_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                        const __grid_constant__ CUtensorMap map_b_tail, const grouped_params p) {
    static_assert(!GATHER || MODE == GEMM_UP, "GATHER: GEMM1 only (GEMM2's A2 is already in plan order)");
    static_assert(BN == GBN || BN == 240, "BN: 256, or 240 (the wgmma wrappers and the shared memory sized for 256)");
    static_assert(EPI != EPI_BULK || (MODE == GEMM_DOWN && !GATHER), "EPI_BULK: GEMM2 (bf16 rows)");
    constexpr int B_BYTES = BN * BK * 2; // 1024-byte multiple: every stage stays aligned for the swizzle
    constexpr bool BULK = EPI == EPI_BULK;
    constexpr int STAGES = BULK ? BULK_GSTAGES : GSTAGES;
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using CFG = grouped_config; // A_BYTES and EMPTY_ARRIVALS (the same at any stage count)
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint8_t *smem_a = smem;                         // [STAGES][BM rows][128 bytes]
    uint8_t *smem_b = smem + STAGES * CFG::A_BYTES; // [STAGES][BN rows][128 bytes]
    uint64_t *full = (uint64_t *)(smem_b + STAGES * B_BYTES);
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
                for (int kb = 0; kb < num_kb; ++kb) {
                    mbar_wait(&empty[stage], phase ^ 1);
                    if (t == 0) {
                        if (DYN && kb == 0) stage_unit[stage] = 2 * u; // GEMM1: no half-idle flag
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
                int stage = 0;
                uint32_t phase = 0;
                for (int u = blockIdx.x; u < units;) {
                    int m_block, n_block, e;
                    unit_tile(p, u, units_m, p.tiles_n, m_block, n_block, e);
                    const int m0 = m_block * BM;
                    // DYN, GEMM2: whether the block's second 64 rows are all padding (a block's live
                    // rows come first), read beside block_expert: the header tells the second
                    // consumer warpgroup to skip the unit's MMAs. Not GEMM1: there it made deepseek
                    // (K = 7168) 7% slower (src/cuda/NOTES.md, session 14).
                    const bool lower_idle = DYN && MODE == GEMM_DOWN && p.sorted_ids[m0 + BM / 2] == p.padding_id;
                    const int b_row = e * p.n + n_block * BN;
                    uint32_t b_bytes;
                    const CUtensorMap *mb = b_box<BN>(p, n_block, &map_b, &map_b_tail, b_bytes);
                    for (int kb = 0; kb < num_kb; ++kb) {
                        mbar_wait(&empty[stage], phase ^ 1);
                        if (DYN && kb == 0) stage_unit[stage] = 2 * u + (lower_idle ? 1 : 0); // the stage is free now
                        mbar_arrive_expect_tx(&full[stage], CFG::A_BYTES + b_bytes);
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
                if (MODE == GEMM_DOWN && half == 1 && (v & 1)) {
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
            int prev_stage = 0;
            for (int kb = 0; kb < num_kb; ++kb) {
                mbar_wait(&full[stage], phase);
                // GATHER: A arrived through cp.async (generic proxy); wgmma reads it through the
                // async proxy, so order the two in this thread after the barrier's acquire.
                if (GATHER) fence_proxy_async_shared();
                const uint64_t desc_a = smem_desc_k_sw128(smem_a + stage * CFG::A_BYTES + half * 64 * BK * 2);
                const uint64_t desc_b = smem_desc_k_sw128(smem_b + stage * B_BYTES);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk)
                    wgmma_bf16<BN>(acc, smem_desc_advance(desc_a, kk * 32), smem_desc_advance(desc_b, kk * 32),
                                    (kb > 0 || kk > 0) ? 1 : 0);
                wgmma_commit_group();
                wgmma_wait_group<1>();
                if (kb > 0) release_stage<1>(&empty[prev_stage], lane);
                prev_stage = stage;
                if (++stage == STAGES) {
                    stage = 0;
                    phase ^= 1;
                }
            }
            wgmma_wait_group<0>();
            fence_registers<BN / 2>(acc);
            release_stage<1>(&empty[prev_stage], lane);

            const int64_t warp_row = (int64_t)m0 + half * 64 + warp * 16;
            if constexpr (EPI == EPI_ACT_FIRST && MODE == GEMM_UP)
                act_first_epilogue<BN>(p, acc, e, warp_row, n0, lane, (float *)(staging + cw * STAGE_WARP_BYTES),
                                   row_info + cw * ROWINFO_WARP_BYTES);
            else if constexpr (epi_staged(EPI))
                staged_epilogue<MODE, BN, __nv_bfloat16, EPI>(p, acc, e, warp_row, n0, lane,
                                                               (float *)(staging + cw * STAGE_WARP_BYTES),
                                                               row_info + cw * ROWINFO_WARP_BYTES);
            else if constexpr (BULK)
                bulk_epilogue<MODE, BN>(p, acc, e, warp_row, n0, lane, staging + cw * WARP_BYTES,
                                        row_info + cw * ROWINFO_WARP_BYTES);
            else
                regs_epilogue<MODE, EPI, ACT, BN>(p, acc, e, warp_row + lane / 4, n0, lane % 4);
        }
        // BULK: the shared memory stays until the last copies have read it.
        if (BULK && lane < 16) bulk_wait_read<0>();
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
    p->x = gather ? (const __nv_bfloat16 *)g->a : nullptr;
    p->unit_counter = g->unit_counter;
    p->ldx = g->lda;
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

// DYN: p.unit_counter must point at two ints that are 0 (the kernel leaves them so).
template <int MODE, int EPI, int ACT = 0, bool GATHER = false, bool DYN = false, int BN = GBN>
cudaError_t grouped_kernel_launch(const CUtensorMap &map_a, const CUtensorMap &map_b, const CUtensorMap &map_b_tail,
                                  const grouped_params &p, unsigned ctas, cudaStream_t stream) {
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[1];
    launch_config(&cfg, attr, ctas, THREADS, grouped_smem_bytes<EPI, DYN>(), stream);
    return cudaLaunchKernelEx(&cfg, grouped_gemm_kernel<MODE, EPI, ACT, GATHER, DYN, BN>, map_a, map_b, map_b_tail, p);
}

} // namespace moe_hopper

#endif
