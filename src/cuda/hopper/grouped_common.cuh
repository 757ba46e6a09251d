// The grouped GEMM kernels' shared pieces (grouped_kernel.cuh, grouped_fp8_kernel.cuh and their
// epilogues, grouped_epilogue.cuh): the epilogue kinds, the shared-memory budget of each, the
// kernel parameters (the dispatch plan's view), and the plan lookups every part makes: the live
// row blocks, a unit's tile and expert, a plan row's output row and scale.
#ifndef MOEFUSE_CUDA_HOPPER_GROUPED_COMMON_CUH
#define MOEFUSE_CUDA_HOPPER_GROUPED_COMMON_CUH

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
    EPI_BULK = 9,
    EPI_ACT_TMA = 10
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
// EPI_ACT_TMA (GEMM1, 256 wide): per consumer warpgroup its 64 rows x 128 A2 columns in bf16 as two
// TMA boxes of 64 x 64 in the 128-byte swizzle (8 KB each), right after the B ring (1024-byte
// aligned there); the ring keeps its 4 stages.
constexpr int ACT_TMA_BOX_BYTES = 64 * 128;
constexpr int ACT_TMA_WG_BYTES = 2 * ACT_TMA_BOX_BYTES;
constexpr int ACT_TMA_BYTES = 2 * ACT_TMA_WG_BYTES;
template <int EPI, bool DYN = false> constexpr int grouped_smem_bytes() {
    return (EPI == EPI_BULK      ? grouped_bulk_config::SMEM_BYTES + bulk_extra_bytes<GBN>()
            : EPI == EPI_ACT_TMA ? grouped_config::SMEM_BYTES + ACT_TMA_BYTES
                                 : grouped_config::SMEM_BYTES + (epi_uses_staging(EPI) ? STAGED_EXTRA_BYTES : 0)) +
           (DYN ? DYN_HEADER_BYTES : 0);
}
static_assert(grouped_smem_bytes<EPI_STAGED>() <= 227 * 1024, "shared memory per CTA on sm_90");
static_assert(grouped_smem_bytes<EPI_STAGED, true>() <= 227 * 1024, "shared memory per CTA on sm_90");
static_assert(grouped_smem_bytes<EPI_BULK, true>() <= 227 * 1024, "shared memory per CTA on sm_90");
static_assert(grouped_smem_bytes<EPI_ACT_TMA, true>() <= 227 * 1024, "shared memory per CTA on sm_90");

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
    // a_fill (GEMM1 with A by TMA): the same x rows are copied into the permuted rows a_fill
    // [rows, k] by the producer warpgroup's warps 1-3 (fill_a_rows); rows_ready[0] is the next row
    // to copy, rows_ready[1 + b] block b's rows copied; NULL: A is already in plan order.
    const __nv_bfloat16 *x;
    uint4 *a_fill;
    int *rows_ready;
    int64_t ldx, top_k;
    // DYN: [0] the next unit's ticket, [1] CTAs done taking tickets; both 0 at launch, and
    // the last CTA to take its final ticket puts them back to 0.
    int *unit_counter;
    // DYN: the producer flags a unit whose row block's second 64 rows are all padding (an expert's
    // last block holding at most 64 rows) and the second consumer warpgroup skips its MMAs.
    // grouped_plan_params sets it for GEMM2; GEMM1 takes it on request (hopper_gemm1_skip_idle).
    int skip_idle;
    // EPI_BULK (bf16 GEMM2): the epilogue's row ids and routing weights are loaded while the tile's
    // last MMAs run instead of after them (hopper_gemm2_early_rows).
    int early_rows;
};

// One row of a consumer warp's row table (lanes 0-15 each hold one): where the row's outputs go
// (-1: padding, not stored) and the scale they take.
struct row_entry {
    int64_t off;
    float scale;
};

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

// DYN, p.skip_idle: whether row block m_block's second 64 rows are all padding (a block's live rows
// come first), so the second consumer warpgroup can skip its MMAs.
__device__ __forceinline__ bool lower_half_idle(const grouped_params &p, int64_t m_block) {
    return p.skip_idle && p.sorted_ids[m_block * BM + BM / 2] == p.padding_id;
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

} // namespace moe_hopper

#endif
