// The epilogues of the grouped GEMM kernels (grouped_kernel.cuh, grouped_fp8_kernel.cuh): each
// consumer warp's 16 rows of a finished tile, from the fp32 accumulators to where the forward
// reads them (GEMM1: A2; GEMM2: the rows combine sums), with bias, routing weight and activation.
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
#ifndef MOEFUSE_CUDA_HOPPER_GROUPED_EPILOGUE_CUH
#define MOEFUSE_CUDA_HOPPER_GROUPED_EPILOGUE_CUH

#include "grouped_common.cuh"

namespace moe_hopper {

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
// use_early: lanes 0-15 hold their entries already, in `early` (the bf16 GEMM2's p.early_rows).
template <int MODE, bool MADE_UP = false>
__device__ __forceinline__ bool fill_row_table(const grouped_params &p, int64_t warp_row, int lane, uint8_t *info,
                                               int64_t *&row_off, float *&row_scale, bool use_early = false,
                                               row_entry early = row_entry{-1, 1.0f}) {
    row_off = (int64_t *)info;
    row_scale = (float *)(info + 16 * 8);
    __syncwarp(); // the previous tile's reads of the row table are done
    bool live = false;
    if (lane < 16) {
        int64_t off = -1;
        float s = 1.0f;
        if (MADE_UP) // EPI_STAGED_NOTABLE: no plan or weight loads; GEMM2's rows kept inside out
            off = (MODE == GEMM_UP ? warp_row + lane : (warp_row + lane) % p.padding_id) * p.ldo;
        else if (use_early) {
            off = early.off;
            s = early.scale;
        } else if (!row_target<MODE>(p, warp_row + lane, off, s))
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

// One lane's two A2 values of a fragment column group: v[0..3] the (gate, up) pairs of rows lane/4
// (scale s0) and lane/4 + 8 (s1) at the group's column, b the bias pair. Neighbour lanes (q, q ^ 1)
// swap one activation so that an even lane returns A2 columns (4j + q, +1) of the upper row and an
// odd lane (4j + q - 1, +1) of the lower row. (Scaling the accumulator by the input weight =
// scaling the gathered row.)
template <int ACT>
__device__ __forceinline__ __nv_bfloat162 act_pair(const grouped_params &p, const float *v, float2 b, float s0,
                                                   float s1, bool odd) {
    const float y0 = glu_activate(ACT, p.act_alpha, p.act_limit, v[0] * s0 + b.x, v[1] * s0 + b.y);
    const float y1 = glu_activate(ACT, p.act_alpha, p.act_limit, v[2] * s1 + b.x, v[3] * s1 + b.y);
    const float got = __shfl_xor_sync(0xFFFFFFFFu, odd ? y0 : y1, 1);
    return odd ? __floats2bfloat162_rn(got, y1) : __floats2bfloat162_rn(y0, got);
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
                const __nv_bfloat162 pair = act_pair<ACT>(p, v + 4 * jj, b, s0, s1, odd);
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

// ---- EPI_ACT_TMA --------------------------------------------------------------------------
// GEMM_UP with a gated activation into bf16 A2, 256-wide tiles, stored by TMA. A2's rows are plan
// rows, so a warpgroup's 64 rows x 128 A2 columns are one rectangle of A2: each thread writes its
// activations (act_first_up_epilogue's pairing of lanes q, q ^ 1) straight into the warpgroup's two
// 64 x 64 boxes in the 128-byte swizzle, and one thread stores both with cp.async.bulk.tensor and
// goes on; the stores leave while the next tile's MMAs run. No row table: padding rows are written
// too (GEMM2 computes on them and drops their results, as it does with whatever they held before),
// and nothing is loaded per row unless the routing weight multiplies the input. Columns past n / 2
// are not written (outside the map). Before the boxes are rewritten, the thread that stored them
// waits until the stores have read them (long over by then). Rows lane/4 and lane/4 + 8 of a warp
// are 8 swizzle rows apart, so their 4-byte writes meet in pairs on a bank (two wavefronts).
// Host: grouped_act_tma_map; needs n / 2 and ldo multiples of 8, out 16-byte aligned.
template <int ACT>
__device__ __forceinline__ void act_tma_values(const grouped_params &p, const float *acc, const float *bias, int n0,
                                               int lane, int r0, float s0, float s1, uint8_t *wg_buf) {
    const int q = lane % 4;
    const bool odd = q & 1;
    const int row = odd ? r0 + 8 : r0; // this lane's row of the warpgroup's 64
    uint8_t *line = wg_buf + row * 128;
    const int sw = row % 8;
#pragma unroll 1
    for (int c = 0; c < stage_chunks(GBN); ++c) {
        float v[16];
        chunk_fragment<GBN>(acc, c, v);
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
            const int j = 4 * c + jj;
            const int col = n0 + 8 * j + 2 * q; // the gate's tile column; n is even
            const float2 b = bias && col < p.n ? *(const float2 *)(bias + col) : make_float2(0.0f, 0.0f);
            const __nv_bfloat162 pair = act_pair<ACT>(p, v + 4 * jj, b, s0, s1, odd);
            // A2 column 4j + (q & ~1) of the tile: box j / 16, byte 8 (j % 16) + 2 (q & ~1) of its line,
            // in 16-byte chunk (byte / 16) ^ (row % 8).
            const int byte = 8 * (j % 16) + 2 * (q & ~1);
            *(__nv_bfloat162 *)(line + (j / 16) * ACT_TMA_BOX_BYTES + (((byte >> 4) ^ sw) << 4) + (byte & 15)) = pair;
        }
    }
}

// One consumer warpgroup's EPI_ACT_TMA epilogue: rows wg_row .. + 63 of the plan (its half of the
// tile), tile columns n0 ..; wg_buf its ACT_TMA_WG_BYTES (1024-byte aligned); bar_id its named
// barrier (all 128 threads call this).
__device__ __forceinline__ void act_tma_epilogue(const grouped_params &p, const CUtensorMap *map_out, const float *acc,
                                                 int e, int64_t wg_row, int n0, int warp, int lane, uint8_t *wg_buf,
                                                 int bar_id) {
    const bool leader = warp == 0 && lane == 0;
    if (leader) bulk_wait_read<0>(); // the previous tile's stores have read the boxes
    named_barrier_sync(bar_id, 128);
    const int r0 = warp * 16 + lane / 4;
    float s0 = 1.0f, s1 = 1.0f;
    if (p.weight_on_input) { // the rows' scales as the other epilogues take them (padding rows keep 1)
        int64_t offset;
        row_target<GEMM_UP>(p, wg_row + r0, offset, s0);
        row_target<GEMM_UP>(p, wg_row + r0 + 8, offset, s1);
    }
    const float *bias = p.bias ? p.bias + (int64_t)e * p.n : nullptr;
    switch (p.activation) {
    case MOE_ACT_SWIGLU: act_tma_values<MOE_ACT_SWIGLU>(p, acc, bias, n0, lane, r0, s0, s1, wg_buf); break;
    case MOE_ACT_GEGLU: act_tma_values<MOE_ACT_GEGLU>(p, acc, bias, n0, lane, r0, s0, s1, wg_buf); break;
    case MOE_ACT_GEGLU_TANH: act_tma_values<MOE_ACT_GEGLU_TANH>(p, acc, bias, n0, lane, r0, s0, s1, wg_buf); break;
    case MOE_ACT_REGLU: act_tma_values<MOE_ACT_REGLU>(p, acc, bias, n0, lane, r0, s0, s1, wg_buf); break;
    case MOE_ACT_SWIGLU_OAI: act_tma_values<MOE_ACT_SWIGLU_OAI>(p, acc, bias, n0, lane, r0, s0, s1, wg_buf); break;
    default: __trap(); // RELU2 is not gated: hopper_gemm1_act_tma never picks this epilogue for it
    }
    fence_proxy_async_shared(); // the writes above, before the async proxy reads them
    named_barrier_sync(bar_id, 128);
    if (leader) {
        const int a2_col = n0 / 2;
        tma_store_2d(map_out, wg_buf, a2_col, (int32_t)wg_row);
        if (a2_col + 64 < p.n / 2) tma_store_2d(map_out, wg_buf + ACT_TMA_BOX_BYTES, a2_col + 64, (int32_t)wg_row);
        bulk_commit();
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
// use_early, early: as fill_row_table's.
template <int MODE, int TILE_N = 192>
__device__ __forceinline__ void bulk_epilogue(const grouped_params &p, const float *acc, int e, int64_t warp_row,
                                              int n0, int lane, uint8_t *buf, uint8_t *info,
                                              bool use_early = false, row_entry early = row_entry{-1, 1.0f}) {
    constexpr int J = TILE_N / 8, LD = bulk_ld<TILE_N>();
    if (lane < 16) bulk_wait_read<0>(); // the previous tile's copies are done with buf
    if (MODE == GEMM_UP && p.activation == MOE_ACT_RELU2) { // not gated: TILE_N fp32 a row, staged
        staged_epilogue<GEMM_UP, TILE_N, float>(p, acc, e, warp_row, n0, lane, (float *)buf, info);
        return;
    }
    int64_t *row_off;
    float *row_scale;
    if (!fill_row_table<MODE>(p, warp_row, lane, info, row_off, row_scale, use_early, early)) return; // all padding
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

} // namespace moe_hopper

#endif
