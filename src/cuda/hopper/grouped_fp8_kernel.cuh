// The grouped FP8 (w8a8) expert GEMM of the Hopper engine: the dense FP8 kernel's mainloop
// (gemm_fp8_kernel.cuh: TMA producer + scale warp, two wgmma e4m3 consumer warpgroups, fp32
// promotion every 128 of K) walking the dispatch plan's 128-row blocks like the bf16 grouped
// kernel (grouped_kernel.cuh: block owners and the live total read on the device, B tiles from
// one tensor map over the weight stack [experts * N, K], A rows already in plan order), with
// that kernel's staged epilogue shape. Used by src/cuda/gemm_hopper_fp8.cu.
//
//   out(r, n) = sum over k-blocks kb of a_scale(r, kb) * w_scale(e, n, kb) * (A8[r, kb] . B8[e*N + n, kb])
//
// Tile 128 x 128 x 128 (FP8_BM x FP8_BN x FP8_BK): one k-block is one scale block on both sides.
//  - A scales: a_scale(r, kb) = sa[r * sa_rs + kb * sa_ks] for plan row r: FP8_ROW128 permuted x
//    and A2 k-block-major (rs 1, ks rows), FP8_TENSOR x (0, 0) or A2 with one scale per plan row
//    (1, 0). Where a k-block's 128 scales are contiguous (sa_bulk) one bulk copy fetches them.
//  - B scales of expert e at sw + e * sw_expert, by kind (gemm_fp8_v1.cuh's fp8_weight_scales):
//    tensor: one; block: row n0/128; paired W13 (gate/up rows interleaved, each half on its own
//    128-row grid): the tile's 128 interleaved rows are 64 (gate, up) pairs of one gate block
//    and one up block, scale rows 2*(n0/256) (even columns) and 2*(n0/256)+1 (odd columns).
//    So each scale slot carries two B scales (even, odd; equal unless paired), and the promotion
//    multiplies the fragment's even and odd columns by their own.
//  - N need not be a multiple of 128 (gpt-oss H = 2880): columns past N of a tile read the next
//    expert's rows (or TMA zeros) and are dropped by the epilogue. K need not be either: the
//    last k-block's missing columns are TMA zeros on both sides and it has its own scales.
//  - Epilogue EPI_QUANT (GEMM_UP with fp8-row128 activations, opt-in: MOEFUSE_FP8_A2=epilogue):
//    A2 quantised to e4m3 with 1x128 scales right here (below), no fp32 A2 and no quantiser pass.
//    Measured ~1% slower in total than the pass (src/cuda/NOTES.md), so not the default.
//  - Epilogue EPI_STAGED (fp8-tensor GEMM1, and GEMM2; the lab's EPI_NONE stores nothing):
//    grouped_epilogue.cuh's staged_epilogue over the 128-wide tile (4 chunks of 32 columns), with A2 in fp32: GEMM_UP:
//    (x routing weight when weight_on_input) + bias, GLU of the interleaved pairs (or RELU2 per
//    column) -> fp32 A2 [rows, ldo] (quantised next, as the CPU oracle does); GEMM_DOWN: (acc +
//    bias) x routing weight / shared gate -> rows out[id] (or id - 1), fp32 or (out_bf16) bf16,
//    the fp32 value rounded once. Padding rows are not written.
//  - Epilogue EPI_BULK (128 x 192 tiles, 4 stages; the library's where K <= 2048, gemm_hopper_fp8.cu's
//    hopper_fp8_bulk_epilogue): the same values as EPI_STAGED (GEMM2's rows in bf16 only, GEMM1 gated),
//    finished in registers, each warp's 16 rows written to shared memory and each row sent by one bulk
//    copy while the next tile's mainloop runs (grouped_epilogue.cuh's bulk_epilogue).
#ifndef MOEFUSE_CUDA_HOPPER_GROUPED_FP8_KERNEL_CUH
#define MOEFUSE_CUDA_HOPPER_GROUPED_FP8_KERNEL_CUH

#include "../fp8_codec.cuh"
#include "gemm_fp8_launch.cuh"
#include "grouped_kernel.cuh"

namespace moe_hopper {

// STAGE_SCALES (the library runs it only with BN = 192; 128-wide tiles keep the ring, S1 of
// session 18 measured the stage scales alone at 0.94-1.04 of it in the FP8 forward): the
// k-block's 128 A scales come by one bulk copy in the tile stage's own transaction (the TMA thread;
// no scale warp, no scale ring), and each consumer reads its tile's two B scales per k-block from
// global memory (the same two addresses for all 256 consumer threads: L1 broadcasts), as the
// dense kernel's BOXES do for the same reason (session 17: the ring cost 12-17% of the dense
// kernel's time). Needs k-block-major A scales (sa_bulk); prefill only (not SKIP_IDLE). With DYN
// the TMA thread alone takes the tickets (there is no scale warp to tell).
// ptxas: no spills in the EPI_STAGED instantiations (the ring's spill 24 bytes), 40 bytes with
// EPI_QUANT (the ring's 48).
// BN (192 with STAGE_SCALES: the library's prefill default since session 18, gemm_hopper_fp8.cu's
// hopper_fp8_wide_tiles; forward 0.88-0.98 of the 128-wide ring at T >= 4096): 128 x 192 tiles, 5
// stages, as the dense kernel's wide tiles (session 16: +4-17% on its large shapes); see
// wide_b_scales below. Their shared memory fits only without the scale ring (225 of the 227 KB;
// with the ring 228).
// BULK (EPI_BULK, 192 wide only): 4 stages, so that each consumer warp's 16 finished rows fit
// beside them (BULK_WARP_BYTES; grouped_epilogue.cuh's bulk_epilogue).
// CM (lab only; measured in session 29, not shipped): clusters of 2, see pair_unit_tiles.
template <bool STAGE_SCALES = false, int BN = FP8_BN, bool BULK = false, int CM = 1>
using grouped_fp8_config = fp8_config<BN == FP8_BN ? 6 : BULK ? 4 : 5, false, BN,
                                      STAGE_SCALES ? FP8_SCALES_KMAJOR : FP8_SCALES_RING, FP8_ISSUE_THEN_WAIT, CM>;
static_assert(FP8_BM == BM, "the plan block must be the tile's rows");
static_assert(FP8_SCALE_SLOTS >= FP8_BM + 2, "a scale slot holds 128 A scales and two B scales");

// DYN: the unit ring's barriers and slots and the tile stages' headers (fp8_dyn_carve).
constexpr int GF8_DYN_BYTES = 128;
template <bool DYN = false, bool STAGE_SCALES = false, int BN = FP8_BN, bool BULK = false>
constexpr int grouped_fp8_smem_bytes() {
    return grouped_fp8_config<STAGE_SCALES, BN, BULK>::SMEM_BYTES + (DYN ? GF8_DYN_BYTES : 0) +
           (BULK ? bulk_extra_bytes<192>() : STAGED_EXTRA_BYTES);
}
static_assert(grouped_fp8_smem_bytes<true>() <= 227 * 1024, "shared memory per CTA on sm_90");
static_assert(grouped_fp8_smem_bytes<false, true>() <= 227 * 1024, "shared memory per CTA on sm_90");
static_assert(grouped_fp8_smem_bytes<false, true, 192>() <= 227 * 1024, "shared memory per CTA on sm_90");
static_assert(grouped_fp8_smem_bytes<false, true, 192, true>() <= 227 * 1024, "shared memory per CTA on sm_90");
static_assert(grouped_fp8_smem_bytes<true, true, 192>() <= 227 * 1024, "shared memory per CTA on sm_90");
static_assert(grouped_fp8_smem_bytes<true, true, 192, true>() <= 227 * 1024, "shared memory per CTA on sm_90");

// DYN (as the bf16 kernel's; the forward's tickets, hopper_fp8_large_experts): the TMA thread
// takes units from the ticket counter g.unit_counter and publishes each in the header of the
// unit's first tile stage, which the consumers read, and (scale ring only) in a ring of 2 slots
// that the scale warp reads (unit_full / unit_empty, one arrival each). -1: no units left.
struct fp8_dyn {
    uint64_t *unit_full, *unit_empty; // [2]
    int *unit_slot;                   // [2]
    int *tile_unit;                   // [STAGES]
};
__device__ __forceinline__ fp8_dyn fp8_dyn_carve(uint8_t *p) {
    fp8_dyn d;
    d.unit_full = (uint64_t *)p; // 8-byte aligned: past the row tables
    d.unit_empty = d.unit_full + 2;
    d.unit_slot = (int *)(d.unit_empty + 2);
    d.tile_unit = d.unit_slot + 2;
    static_assert(4 * 8 + 2 * 4 + grouped_fp8_config<>::STAGES * 4 <= GF8_DYN_BYTES, "GF8_DYN_BYTES");
    return d;
}

enum { GF8_W_TENSOR = 0, GF8_W_BLOCK = 1, GF8_W_PAIRED = 2 }; // = FP8W_TENSOR / _BLOCK / _BLOCK_PAIRED
static_assert((int)GF8_W_TENSOR == (int)MOE__FP8_WSCALE_TENSOR && (int)GF8_W_BLOCK == (int)MOE__FP8_WSCALE_BLOCK &&
                  (int)GF8_W_PAIRED == (int)MOE__FP8_WSCALE_PAIRED,
              "gemm_fp8.h's scale kinds");

struct grouped_fp8_params {
    grouped_params g;          // n, k, tiles_n (128-wide), group_m, the plan, the epilogue; out fp32
    const float *sa;           // a_scale(r, kb) = sa[r * sa_rs + kb * sa_ks]
    long long sa_rs, sa_ks;
    int sa_bulk;               // fp8_scales_bulk_ok: a k-block's 128 A scales in one bulk copy
    const float *sw;           // expert e's scales at sw + e * sw_expert
    long long sw_expert, sw_cols; // sw_cols: scale columns (k-blocks) per scale row
    int sw_kind;               // GF8_W_*
    // The W13 / W2 tiles (128 wide) of one work unit: 1, or 2 with EPI_QUANT and a gated
    // activation (the two tiles of one 128-column group of A2).
    int tiles_per_unit;
    // EPI_QUANT: g.out holds A2's e4m3 codes [rows, g.ldo] (bytes), and the scale of (plan row r,
    // 128-column group c) goes to out_scales[c * out_scale_ks + r].
    float *out_scales;
    long long out_scale_ks;
};

// Whether the A scales of a k-block (rows m0 .. m0 + 127, m0 a multiple of 128) are 512
// contiguous, 16-byte aligned bytes: k-block-major (permuted x, A2 as the forward writes it) or
// one scale per row; then the scale warp fetches them with one bulk copy instead of 128 4-byte
// cp.async (which cost the LSU pipe and 128 L2 requests per k-block: docs/hopper_gemm.md).
inline bool fp8_scales_bulk_ok(const float *sa, long long rs, long long ks) {
    return rs == 1 && ks % 4 == 0 && (uintptr_t)sa % 16 == 0;
}

// Work units along n: tiles_n tiles taken tiles_per_unit at a time (the kernel and its launch).
__host__ __device__ __forceinline__ int units_along_n(int tiles_n, int tiles_per_unit) {
    return (tiles_n + tiles_per_unit - 1) / tiles_per_unit;
}

// Unit u's row block and its tiles n_first .. n_first + n_count - 1 (p.tiles_per_unit at most).
__device__ __forceinline__ void unit_tiles(const grouped_fp8_params &p, int u, int units_m, int &m_block,
                                           int &n_first, int &n_count, int &e) {
    const int per = p.tiles_per_unit, units_n = units_along_n(p.g.tiles_n, per);
    int n_unit;
    unit_tile(p.g, u, units_m, units_n, m_block, n_unit, e);
    n_first = n_unit * per;
    n_count = min(per, p.g.tiles_n - n_first);
}

// ---- EPI_QUANT: A2 quantised in GEMM1's epilogue -----------------------------------------
// A 1x128 group of A2 is the GLU of 256 interleaved W13 columns (two tiles) when the activation
// is gated, of 128 (one tile) for RELU2. A unit is the tiles of one group: the consumers keep
// the first tile's 32 GLU values per thread in registers through the second tile's mainloop;
// then each row's amax is reduced over the 4 lanes that hold the row (quad shuffles), the codes
// go through the warp's staging buffer as bytes and leave in 16-byte stores of whole row
// segments, and one lane per row stores the scale. The rule is the separate quantiser's
// (fp8_codec.cuh): same values, same codes. Padding rows: zero codes and scale 0, as the
// quantiser writes them (GEMM2 reads every row of a live block). Columns past n (a RELU2 tile's
// tail) count as 0 and are not stored.
constexpr int QSTAGE_LD = 144; // bytes per staged row: 128 codes + 16 (rows 4 banks apart)
static_assert(16 * QSTAGE_LD <= STAGE_WARP_BYTES, "a warp's 16 rows of codes fit its staging buffer");

// Gated tile: out[2j + h] = act(gate, up) of row lane/4 + 8h, A2 column 4j + lane%4 of the
// tile's 64 (W13 columns 8j + 2*(lane%4), +1). bias_q: the expert's bias at the tile's column
// 2*(lane%4), or null.
template <int ACT>
__device__ __forceinline__ void glu_tile(const grouped_params &p, const float *acc, const float *bias_q, float s_lo,
                                         float s_hi, int cols_left, int q, float (&out)[32]) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const bool in = 8 * j + 2 * q < cols_left; // the pair is whole (n is even)
        const float2 b = bias_q && in ? *(const float2 *)(bias_q + 8 * j) : make_float2(0.0f, 0.0f);
        const float g0 = acc[4 * j + 0] * s_lo + b.x, u0 = acc[4 * j + 1] * s_lo + b.y;
        const float g1 = acc[4 * j + 2] * s_hi + b.x, u1 = acc[4 * j + 3] * s_hi + b.y;
        out[2 * j + 0] = in ? glu_activate(ACT, p.act_alpha, p.act_limit, g0, u0) : 0.0f;
        out[2 * j + 1] = in ? glu_activate(ACT, p.act_alpha, p.act_limit, g1, u1) : 0.0f;
    }
}

// RELU2 tile: out[i] = relu2 of fragment element i (A2 column = the tile's column).
__device__ __forceinline__ void relu2_tile(const float *acc, const float *bias_q, float s_lo, float s_hi,
                                           int cols_left, int q, float (&out)[64]) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const bool in = 8 * j + 2 * q < cols_left; // n % 16 == 0: the pair is whole
        const float2 b = bias_q && in ? *(const float2 *)(bias_q + 8 * j) : make_float2(0.0f, 0.0f);
        const float x[4] = {acc[4 * j + 0] * s_lo + b.x, acc[4 * j + 1] * s_lo + b.y, acc[4 * j + 2] * s_hi + b.x,
                            acc[4 * j + 3] * s_hi + b.y};
#pragma unroll
        for (int i = 0; i < 4; ++i) out[4 * j + i] = in ? glu_activate(MOE_ACT_RELU2, 0.0f, 0.0f, x[i], 0.0f) : 0.0f;
    }
}

// One uniform switch per tile, each case a straight-line body (see staged_epilogue).
__device__ __forceinline__ void glu_tile_any(const grouped_params &p, const float *acc, const float *bias_q,
                                             float s_lo, float s_hi, int cols_left, int q, float (&out)[32]) {
    switch (p.activation) {
    case MOE_ACT_SWIGLU: glu_tile<MOE_ACT_SWIGLU>(p, acc, bias_q, s_lo, s_hi, cols_left, q, out); break;
    case MOE_ACT_GEGLU: glu_tile<MOE_ACT_GEGLU>(p, acc, bias_q, s_lo, s_hi, cols_left, q, out); break;
    case MOE_ACT_GEGLU_TANH: glu_tile<MOE_ACT_GEGLU_TANH>(p, acc, bias_q, s_lo, s_hi, cols_left, q, out); break;
    case MOE_ACT_REGLU: glu_tile<MOE_ACT_REGLU>(p, acc, bias_q, s_lo, s_hi, cols_left, q, out); break;
    case MOE_ACT_SWIGLU_OAI: glu_tile<MOE_ACT_SWIGLU_OAI>(p, acc, bias_q, s_lo, s_hi, cols_left, q, out); break;
    }
}

// Value i of a thread's 64 (v below): its row (0: lane/4, 1: lane/4 + 8) and its column in
// the group. GATED: v[2j + h] (j < 32) is column 4j + q (the first tile's 64 columns, then the
// second's); RELU2: v[4j + 2h + e] is column 8j + 2q + e.
template <bool GATED> __device__ __forceinline__ int quant_row(int i) { return GATED ? i % 2 : (i / 2) % 2; }
template <bool GATED> __device__ __forceinline__ int quant_col(int i, int q) {
    return GATED ? 4 * (i / 2) + q : 8 * (i / 4) + 2 * q + i % 2;
}

// Quantises one consumer warp's 16 rows (warp_row ..) of A2 group `group` from the values v
// of each lane's two rows; live_*: the rows are not padding.
template <bool GATED>
__device__ __forceinline__ void quantise_group(const grouped_fp8_params &p, const float (&v)[64], int64_t warp_row,
                                               int group, int lane, bool live_lo, bool live_hi, uint8_t *stage) {
    using namespace moe_fp8;
    const int q = lane % 4, r = lane / 4;
    uint32_t amax[2] = {0u, 0u};
#pragma unroll
    for (int i = 0; i < 64; ++i) amax[quant_row<GATED>(i)] = max(amax[quant_row<GATED>(i)], finite_abs_bits(v[i]));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        amax[h] = max(amax[h], __shfl_xor_sync(0xFFFFFFFFu, amax[h], 1));
        amax[h] = max(amax[h], __shfl_xor_sync(0xFFFFFFFFu, amax[h], 2));
    }
    const float s[2] = {fp8_scale(amax[0]), fp8_scale(amax[1])};
    const fp8_divisor div[2] = {fp8_divisor_of(s[0]), fp8_divisor_of(s[1])};
    const bool live[2] = {live_lo, live_hi};
    __syncwarp(); // the previous group's reads of the staging buffer are done
#pragma unroll
    for (int i = 0; i < 64; ++i) {
        const int h = quant_row<GATED>(i);
        const uint8_t code = fp8_encode_fast(v[i], div[h]);
        stage[(r + 8 * h) * QSTAGE_LD + quant_col<GATED>(i, q)] = live[h] ? code : (uint8_t)0;
    }
    if (q == 0) {
        float *sc = p.out_scales + (long long)group * p.out_scale_ks + warp_row + r;
        sc[0] = live_lo ? s[0] : 0.0f;
        sc[8] = live_hi ? s[1] : 0.0f;
    }
    __syncwarp();
    // 16 rows x 8 segments of 16 bytes: 4 per lane; a group's last columns may be past A2's.
    const int a2_cols = GATED ? p.g.n / 2 : p.g.n;
    const int width = min(128, a2_cols - 128 * group);
    uint8_t *out = (uint8_t *)p.g.out + 128LL * group;
#pragma unroll
    for (int it = 0; it < 4; ++it) {
        const int row = 4 * it + lane / 8, seg = lane % 8;
        if (16 * seg < width) {
            const uint4 codes = *(const uint4 *)(stage + row * QSTAGE_LD + 16 * seg);
            *(uint4 *)(out + (warp_row + row) * p.g.ldo + 16 * seg) = codes;
        }
    }
}

// CM = 2 (lab only; see the end of this comment): a cluster of 2 takes unit u = (a
// pair of plan blocks 2j, 2j + 1; one n unit), rank r the block 2j + r, so both CTAs read the same
// weight tiles at the same time. Where both blocks are one expert's (`shared`) each CTA loads half
// of the B tile and multicasts it to both, as the dense kernel's clusters; where the pair straddles
// two experts each loads its own whole B tile. Either way both CTAs run the same k-blocks and every
// consumer warp releases each stage to both CTAs, so the two rings stay in step and each `full`
// barrier expects the same bytes. An odd live block count leaves the last pair's rank 1 a `ghost`:
// it loads its pair's first block again (addresses in bounds), computes, and stores nothing. The
// raster runs over pairs (no expert raster, no tickets).
// Session 29 (bench/results/2026-12-05-h200-session29/call2, two rounds at T = 16384): correct,
// memcheck and racecheck clean; the mainloop alone 2-11% faster in clusters, but the full kernels
// (with their epilogues) 0.96-1.08x of the single CTA's speed, slower on qwen3 (bulk epilogues) and
// gpt-oss, faster on mixtral: not a consistent gain, so the library keeps single CTAs. Those clustered
// arms carried per-launch host setup; without it (session 35, an H100, two orders) the mainloop alone
// ran 0.89-0.98 of the single CTA's time and the full kernels 0.89-1.05: the same verdict.
__device__ __forceinline__ void pair_unit_tiles(const grouped_fp8_params &p, int u, int units_m, uint32_t rank,
                                                int &m_block, int &n_first, int &n_count, int &e, bool &ghost,
                                                bool &shared) {
    const int per = p.tiles_per_unit, units_n = units_along_n(p.g.tiles_n, per), pairs_m = (units_m + 1) / 2;
    int pair, n_unit;
    raster_unit(u, pairs_m, units_n, p.g.group_m, pair, n_unit);
    n_first = n_unit * per;
    n_count = min(per, p.g.tiles_n - n_first);
    const int first = 2 * pair;
    const bool has_second = first + 1 < units_m;
    const int e_first = p.g.block_expert[first], e_second = has_second ? p.g.block_expert[first + 1] : -1;
    shared = e_first == e_second;
    ghost = rank == 1 && !has_second;
    m_block = ghost ? first : first + (int)rank;
    e = rank == 0 || ghost ? e_first : e_second;
}

// The plan id of the first row of warpgroup `half`'s 64 rows in unit u's row block.
__device__ __forceinline__ int64_t half_first_row_id(const grouped_fp8_params &p, int u, int units_m, int half) {
    int m_block, n_first, n_count, e;
    unit_tiles(p, u, units_m, m_block, n_first, n_count, e);
    return p.g.sorted_ids[(int64_t)m_block * FP8_BM + half * 64];
}

// Offsets (from sw) of the even- and odd-column B scales of k-block 0 of expert e's tile at
// column n0, and their stride per k-block.
__device__ __forceinline__ void b_scale_offsets(const grouped_fp8_params &p, int e, int n0, long long &even,
                                                long long &odd, int &ks) {
    even = (long long)e * p.sw_expert;
    ks = 1;
    if (p.sw_kind == GF8_W_TENSOR) {
        ks = 0;
        odd = even;
    } else if (p.sw_kind == GF8_W_BLOCK) {
        even += (long long)(n0 / FP8_BN) * p.sw_cols;
        odd = even;
    } else {
        even += (long long)(2 * (n0 / 256)) * p.sw_cols;
        odd = even + p.sw_cols;
    }
}

// A 192-wide tile's B scales (BN = 192): off[0..3], the offsets from sw of k-block 0's scales for
// the even and odd columns of the two 128-row scale blocks the tile spans; ks, their stride per
// k-block; split, the fragment's column blocks that take the first block's
// (moe__fp8_wide_b_scale_rows, gemm_fp8.h).
__device__ __forceinline__ void wide_b_scales(const grouped_fp8_params &p, int e, int n0, long long (&off)[4],
                                              int &ks, int &split) {
    int64_t rows[4];
    moe__fp8_wide_b_scale_rows(p.sw_kind, n0, p.sw_cols > 0 ? p.sw_expert / p.sw_cols : 1, rows, &split);
    for (int i = 0; i < 4; ++i) off[i] = (long long)e * p.sw_expert + (long long)rows[i] * p.sw_cols;
    ks = p.sw_kind == GF8_W_TENSOR ? 0 : 1;
}

// acc += part * scale over a 192-wide fragment: column block j < SPLIT with the first block's
// even/odd scales of rows lo and hi (s[0..3] = lo even, lo odd, hi even, hi odd), the rest with
// the second's (s[4..7]).
template <int SPLIT>
__device__ __forceinline__ void wide_paired_promote(float *acc, const float *part, const float (&s)[8]) {
#pragma unroll
    for (int j = 0; j < 24; ++j) {
        const int b = j < SPLIT ? 0 : 4;
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[4 * j + i] = fmaf(part[4 * j + i], s[b + i], acc[4 * j + i]);
    }
}

// SKIP_IDLE: the decode instantiation, which looks for all-padding warpgroups (below). EPI:
// EPI_QUANT (GEMM_UP, fp8-row128), EPI_STAGED or EPI_BULK (the library's), or EPI_NONE
// (lab/grouped_lab.cu: the mainloop without the store), or the staged epilogue's probes
// EPI_STAGED_NOSTORE / EPI_STAGED_NOTABLE (lab, 192 wide). STAGE_SCALES: see grouped_fp8_config.
template <int MODE, bool SKIP_IDLE, int EPI = EPI_STAGED, bool DYN = false, bool STAGE_SCALES = false,
          int BN = FP8_BN, int CM = 1>
__global__ void __launch_bounds__(THREADS, 1)
    grouped_fp8_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                       const grouped_fp8_params p) {
    static_assert(epi_staged(EPI) || EPI == EPI_NONE || EPI == EPI_BULK || (EPI == EPI_QUANT && MODE == GEMM_UP),
                  "the FP8 grouped kernel's epilogues: staged (or its probes), bulk, none, or A2 quantised (GEMM1)");
    static_assert(EPI == EPI_STAGED || !epi_staged(EPI) || BN == 192, "the staged probes: 192-wide tiles");
    static_assert(!(DYN && SKIP_IDLE), "DYN: prefill only (the decode instantiation reads a unit ahead)");
    static_assert(!(STAGE_SCALES && SKIP_IDLE), "STAGE_SCALES: prefill only");
    constexpr bool BULK = EPI == EPI_BULK;
    static_assert(BN == FP8_BN || (BN == 192 && STAGE_SCALES && (epi_staged(EPI) || BULK || EPI == EPI_NONE)),
                  "192-wide tiles: stage scales and the staged, bulk or (lab) no epilogue only");
    static_assert(!BULK || BN == 192, "EPI_BULK: 192-wide tiles");
    static_assert(CM == 1 || (CM == 2 && BN == 192 && STAGE_SCALES && !DYN && !SKIP_IDLE),
                  "clusters of 2 (pair_unit_tiles): 192-wide tiles, stage scales, the static stride");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using CFG = grouped_fp8_config<STAGE_SCALES, BN, BULK, CM>;
    extern __shared__ uint8_t smem_raw[];
    const fp8_smem s = fp8_carve<CFG>(smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023));
    // Per consumer warp a staging buffer (BULK: 16-byte aligned for the bulk copies), then per
    // consumer warp a row table.
    uint8_t *staging = BULK ? bulk_buffers(s.end) : s.end;
    uint8_t *row_info = staging + CONSUMER_WARPS * (BULK ? BULK_WARP_BYTES : STAGE_WARP_BYTES);
    const fp8_dyn dy = fp8_dyn_carve(row_info + CONSUMER_WARPS * ROWINFO_WARP_BYTES); // DYN only

    const int warpgroup = threadIdx.x / 128;
    const int warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    pdl_wait(); // the plan, the rows and their scales come from the kernels before (pdl.cuh)
    pdl_launch_dependents();
    const int units_m = live_blocks(p.g);
    const int units = (units_m + CM - 1) / CM * units_along_n(p.g.tiles_n, p.tiles_per_unit); // CM: pairs x n
    const uint32_t rank = CM > 1 ? cluster_cta_rank() : 0;
    const int num_kb = (p.g.k + FP8_BK - 1) / FP8_BK;

    if (threadIdx.x == 0) {
        if (DYN)
            for (int j = 0; j < 2; ++j) {
                mbar_init(&dy.unit_full[j], 1);
                mbar_init(&dy.unit_empty[j], 1);
            }
        fp8_rings_init<CFG>(s); // (its fence covers the two above)
    }
    // CM: the peer CTA's barriers must exist before our multicast signals them.
    if (CM > 1) cluster_sync();
    else __syncthreads();

    if (warpgroup == 0) {
        // ---- producer: warp 0 lane 0 issues the TMA loads, warp 1 copies the scales ----
        setmaxnreg_dec<PRODUCER_REGS>();
        if (warp == 0 && lane == 0) {
            tma_prefetch_map(&map_a);
            tma_prefetch_map(&map_b);
        }
        if ((warp == 0 && lane == 0) || (warp == 1 && CFG::RING_SCALES)) {
            ring_pos r = {0, 0};  // warp 0: the tiles' ring; warp 1: the scale ring
            ring_pos ur = {0, 0}; // DYN: the unit ring
            for (int u = (int)blockIdx.x / CM;;) {
                if (DYN && CFG::RING_SCALES) { // (no scale warp: the TMA thread alone needs u)
                    if (warp == 0) { // publish u (or the end) to the scale warp
                        mbar_wait(&dy.unit_empty[ur.slot], ur.phase ^ 1);
                        dy.unit_slot[ur.slot] = u < units ? u : -1;
                        mbar_arrive(&dy.unit_full[ur.slot]);
                    } else {
                        mbar_wait(&dy.unit_full[ur.slot], ur.phase);
                        u = dy.unit_slot[ur.slot];
                        __syncwarp(); // every lane has read the slot before lane 0 frees it
                        if (lane == 0) mbar_arrive(&dy.unit_empty[ur.slot]);
                        if (u < 0) break;
                    }
                    ring_next(ur, 2);
                }
                if (u >= units) break;
                int m_block, n_first, n_count, e;
                bool ghost = false, shared = false;
                if constexpr (CM == 1) unit_tiles(p, u, units_m, m_block, n_first, n_count, e);
                else pair_unit_tiles(p, u, units_m, rank, m_block, n_first, n_count, e, ghost, shared);
                const int m0 = m_block * FP8_BM;
                for (int t = 0; t < n_count; ++t) {
                    const int n0 = (n_first + t) * BN;
                    long long sb_even, sb_odd;
                    int sb_ks;
                    b_scale_offsets(p, e, n0, sb_even, sb_odd, sb_ks);
                    for (int kb = 0; kb < num_kb; ++kb) {
                        if (warp == 0) {
                            mbar_wait(&s.empty[r.slot], r.phase ^ 1);
                            if (DYN && t == 0 && kb == 0) dy.tile_unit[r.slot] = u; // for the consumers
                            mbar_arrive_expect_tx(&s.full[r.slot], CFG::TMA_BYTES);
                            tma_load_2d(s.a + r.slot * CFG::A_BYTES, &map_a, &s.full[r.slot], kb * FP8_BK, m0);
                            uint8_t *b_dst = s.b + r.slot * CFG::B_BYTES;
                            if constexpr (CM == 1) {
                                tma_load_2d(b_dst, &map_b, &s.full[r.slot], kb * FP8_BK, e * p.g.n + n0);
                            } else if (shared) { // our half of B into both CTAs' stage
                                const int half_b = (int)rank * CFG::B_BOX_ROWS;
                                tma_load_2d_multicast(b_dst + half_b * FP8_BK, &map_b, &s.full[r.slot], kb * FP8_BK,
                                                      e * p.g.n + n0 + half_b, (uint16_t)0x3);
                            } else { // the pair straddles two experts: our whole B tile, by halves
                                for (int h = 0; h < CM; ++h)
                                    tma_load_2d(b_dst + h * CFG::B_BOX_ROWS * FP8_BK, &map_b, &s.full[r.slot],
                                                kb * FP8_BK, e * p.g.n + n0 + h * CFG::B_BOX_ROWS);
                            }
                            if constexpr (CFG::STAGE_SCALES) // the k-block's 128 A scales, 512 contiguous bytes
                                bulk_copy_g2s(s.scale + r.slot * CFG::SCALE_SLOT_FLOATS,
                                              p.sa + m0 + (long long)kb * p.sa_ks, CFG::SA_STAGE_BYTES,
                                              &s.full[r.slot]);
                            ring_next(r, CFG::STAGES);
                        } else if constexpr (CFG::RING_SCALES) {
                            // cp.async copies that arrive on the slot's barrier when they land (see the
                            // dense kernel).
                            mbar_wait(&s.scale_empty[r.slot], r.phase ^ 1);
                            float *dst = s.scale + r.slot * FP8_SCALE_SLOTS;
                            if (p.sa_bulk) {
                                // Lane 0 announces the bytes before its own arrival below, so the
                                // slot cannot complete before they land. The fence orders the
                                // consumers' ld.shared reads of the slot (generic proxy) before
                                // the bulk copy's writes (async proxy).
                                if (lane == 0) {
                                    fence_proxy_async_shared();
                                    mbar_expect_tx(&s.scale_full[r.slot], FP8_BM * 4);
                                    bulk_copy_g2s(dst, p.sa + m0 + (long long)kb * p.sa_ks, FP8_BM * 4,
                                                  &s.scale_full[r.slot]);
                                }
                            } else {
#pragma unroll
                                for (int i = 0; i < 4; ++i) {
                                    const int row = lane + 32 * i;
                                    cp_async_4(dst + row,
                                               p.sa + (long long)(m0 + row) * p.sa_rs + (long long)kb * p.sa_ks, 4u);
                                }
                            }
                            if (lane < 2)
                                cp_async_4(dst + FP8_BM + lane,
                                           p.sw + (lane ? sb_odd : sb_even) + (long long)kb * sb_ks, 4u);
                            cp_async_mbar_arrive_noinc(&s.scale_full[r.slot]);
                            ring_next(r, CFG::SCALE_STAGES);
                        }
                    }
                }
                // DYN: the TMA thread's next ticket, after the unit's last load (see the bf16 kernel).
                if (!DYN) u += (int)gridDim.x / CM;
                else if (warp == 0) u = (int)gridDim.x + atomicAdd(&p.g.unit_counter[0], 1);
            }
            if (DYN && warp == 0) {
                // The consumers' end marker, in the tile stage the next unit would have used;
                // then the counters' reset by the last CTA (see the bf16 kernel).
                mbar_wait(&s.empty[r.slot], r.phase ^ 1);
                dy.tile_unit[r.slot] = -1;
                mbar_arrive(&s.full[r.slot]);
                __threadfence(); // as the bf16 kernel: the last ticket before the count before the reset
                if (atomicAdd(&p.g.unit_counter[1], 1) == (int)gridDim.x - 1) {
                    __threadfence();
                    atomicExch(&p.g.unit_counter[0], 0);
                    atomicExch(&p.g.unit_counter[1], 0);
                }
            }
        }
    } else {
        // ---- consumers ----
        setmaxnreg_inc<CONSUMER_REGS>();
        const int half = consumer_half();                  // rows half*64 .. half*64+63 of the tile
        const int r_lo = half * 64 + warp * 16 + lane / 4; // this thread's rows: r_lo, r_lo + 8
        const int cw = half * 4 + warp;                    // consumer warp 0..7
        float acc[BN / 2], part[BN / 2];
        ring_pos tiles = {0, 0}, scales = {0, 0};
        // SKIP_IDLE: the id of the first row of this warpgroup's half of each unit's block, loaded
        // one unit ahead so that its latency (~1 us) hides behind the current unit's mainloop.
        int64_t half_first_id =
            SKIP_IDLE && (int)blockIdx.x < units ? half_first_row_id(p, blockIdx.x, units_m, half) : 0;
        for (int u = (int)blockIdx.x / CM; DYN || u < units; u += (int)gridDim.x / CM) {
            if (DYN) { // the unit's first tile stage names it (-1: none left); lane 0 reads, shares
                mbar_wait(&s.full[tiles.slot], tiles.phase);
                int v = 0;
                if (lane == 0) v = dy.tile_unit[tiles.slot];
                u = __shfl_sync(0xFFFFFFFFu, v, 0);
                if (u < 0) break;
            }
            int m_block, n_first, n_count, e;
            bool ghost = false, shared = false; // CM: see pair_unit_tiles (consumers need only ghost)
            if constexpr (CM == 1) unit_tiles(p, u, units_m, m_block, n_first, n_count, e);
            else pair_unit_tiles(p, u, units_m, rank, m_block, n_first, n_count, e, ghost, shared);
            const int m0 = m_block * FP8_BM;
            // A warpgroup whose 64 rows are all padding (a block's live rows come first, so it is
            // enough that row m0 + 64 * half is padding) only takes and releases the stages and
            // scale slots: at decode most blocks hold a few live rows, and this halves the
            // tensor-core work. A separate instantiation: the id's load at every tile's start cost
            // 5-9% at T = 16384, and with a runtime flag the prefill loop still compiled
            // differently (src/cuda/NOTES.md).
            const bool idle = SKIP_IDLE && half_first_id == p.g.padding_id;
            if (SKIP_IDLE && u + (int)gridDim.x < units)
                half_first_id = half_first_row_id(p, u + gridDim.x, units_m, half);
            const int64_t warp_row = (int64_t)m0 + half * 64 + warp * 16;
            // EPI_QUANT: this thread's two rows, live or padding, and their input scale (the
            // routing weight when it multiplies the input), loaded before the mainloop.
            bool live_lo = false, live_hi = false;
            float s_lo = 1.0f, s_hi = 1.0f;
            if constexpr (EPI == EPI_QUANT) {
                const int64_t id_lo = p.g.sorted_ids[m0 + r_lo], id_hi = p.g.sorted_ids[m0 + r_lo + 8];
                live_lo = id_lo != p.g.padding_id;
                live_hi = id_hi != p.g.padding_id;
                if (p.g.weight_on_input) {
                    if (live_lo && id_lo < p.g.padding_id) s_lo = p.g.topk_weights[id_lo];
                    if (live_hi && id_hi < p.g.padding_id) s_hi = p.g.topk_weights[id_hi];
                }
            }
            float held[EPI == EPI_QUANT ? 32 : 1]; // EPI_QUANT, gated: the first tile's GLU values
            for (int t = 0; t < n_count; ++t) {
                const int n0 = (n_first + t) * BN;
                long long sb_even = 0, sb_odd = 0; // STAGE_SCALES, 128 wide: the tile's B scales in global memory
                int sb_ks = 0;
                if constexpr (CFG::STAGE_SCALES && BN == FP8_BN) b_scale_offsets(p, e, n0, sb_even, sb_odd, sb_ks);
#pragma unroll
                for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
                if constexpr (BN != FP8_BN) { // 192 wide: two B scale blocks a tile (wide_b_scales)
                    long long off[4];
                    int ks, split;
                    wide_b_scales(p, e, n0, off, ks, split);
                    for (int kb = 0; kb < num_kb; ++kb) {
                        const long long at = (long long)kb * ks;
                        float b[4];
#pragma unroll
                        for (int i = 0; i < 4; ++i) b[i] = __ldg(p.sw + off[i] + at);
                        // B scales 1: now's products are this thread's two A scales themselves.
                        const fp8_kblock now =
                            fp8_issue<CFG, true>(part, s, tiles, scales, half, r_lo, kb, make_float2(1.0f, 1.0f));
                        const float sc[8] = {now.s_lo * b[0], now.s_lo * b[1], now.s_hi * b[0], now.s_hi * b[1],
                                             now.s_lo * b[2], now.s_lo * b[3], now.s_hi * b[2], now.s_hi * b[3]};
                        wgmma_wait_group<0>();
                        fence_registers<BN / 2>(part);
                        release_stage<CM>(&s.empty[now.stage], lane);
                        if (split == 8) wide_paired_promote<8>(acc, part, sc);
                        else if (split == 16) wide_paired_promote<16>(acc, part, sc);
                        else wide_paired_promote<24>(acc, part, sc);
                    }
                } else {
                    for (int kb = 0; kb < num_kb; ++kb) {
                        if (SKIP_IDLE && idle) {
                            mbar_wait(&s.full[tiles.slot], tiles.phase);
                            release_stage<1>(&s.empty[tiles.slot], lane);
                            if constexpr (CFG::RING_SCALES) {
                                mbar_wait(&s.scale_full[scales.slot], scales.phase);
                                mbar_arrive(&s.scale_empty[scales.slot]); // each thread's (fp8_scales)
                            }
                            ring_next(tiles, CFG::STAGES);
                            if constexpr (CFG::RING_SCALES) ring_next(scales, CFG::SCALE_STAGES);
                            continue;
                        }
                        float2 b = make_float2(1.0f, 1.0f);
                        if constexpr (CFG::STAGE_SCALES) {
                            const long long at = (long long)kb * sb_ks;
                            b = make_float2(__ldg(p.sw + sb_even + at), __ldg(p.sw + sb_odd + at));
                        }
                        const fp8_kblock now = fp8_issue<CFG, true>(part, s, tiles, scales, half, r_lo, kb, b);
                        wgmma_wait_group<0>();
                        fp8_retire<true>(acc, part, now, s.empty, lane);
                    }
                }
                if (CM > 1 && ghost) {
                    // the pair's missing second block: nothing to store
                } else if constexpr (EPI == EPI_NONE) {
                    keep_accumulators<BN / 2>(p.g, acc);
                } else if constexpr (BULK) {
                    bulk_epilogue<MODE>(p.g, acc, e, warp_row, n0, lane, staging + cw * BULK_WARP_BYTES,
                                        row_info + cw * ROWINFO_WARP_BYTES);
                } else if constexpr (epi_staged(EPI)) {
                    staged_epilogue<MODE, BN, float, EPI>(p.g, acc, e, warp_row, n0, lane,
                                                     (float *)(staging + cw * STAGE_WARP_BYTES),
                                                     row_info + cw * ROWINFO_WARP_BYTES);
                } else {
                    const int q = lane % 4, cols_left = p.g.n - n0;
                    const float *bias_q = p.g.bias ? p.g.bias + (int64_t)e * p.g.n + n0 + 2 * q : nullptr;
                    uint8_t *stage = staging + cw * STAGE_WARP_BYTES;
                    float v[64];
                    if (p.g.activation == MOE_ACT_RELU2) { // one tile per group
                        relu2_tile(acc, bias_q, s_lo, s_hi, cols_left, q, v);
                        quantise_group<false>(p, v, warp_row, n_first, lane, live_lo, live_hi, stage);
                        continue;
                    }
                    float cur[32];
                    glu_tile_any(p.g, acc, bias_q, s_lo, s_hi, cols_left, q, cur);
                    if (t == 0) {
#pragma unroll
                        for (int i = 0; i < 32; ++i) held[i] = cur[i];
                    }
                    if (t + 1 < n_count) continue;
                    // The group's 128 columns: the first tile's 64, then the second's (or
                    // zeros where A2 ends at the first: I % 128 == 64).
#pragma unroll
                    for (int i = 0; i < 32; ++i) {
                        v[i] = held[i];
                        v[32 + i] = n_count == 2 ? cur[i] : 0.0f;
                    }
                    quantise_group<true>(p, v, warp_row, n_first / 2, lane, live_lo, live_hi, stage);
                }
            }
        }
        // BULK: the shared memory stays until the last copies have read it.
        if (BULK && lane < 16) bulk_wait_read<0>();
    }
    // CM: no CTA may leave while its peer can still multicast into it or arrive on its barriers
    // (the producer's warps diverged around their issuing lanes: reconverge first).
    if (CM > 1) {
        __syncwarp();
        cluster_sync();
    }
#endif
}

} // namespace moe_hopper

#endif
