// FP8 (w8a8) pieces of the CUDA forward: the grouped e4m3 GEMM (gemm_fp8_v1.cu) and the
// activation quantiser (quant.cu). Declarations shared with forward.cu.
#ifndef MOEFUSE_CUDA_GEMM_FP8_V1_CUH
#define MOEFUSE_CUDA_GEMM_FP8_V1_CUH

#include "gemm.cuh"

// Tile of the FP8 v1 GEMM: the v1 tile (64 plan rows, so the plan is the v1 plan) with a K
// step of 128 e4m3 elements = 128 bytes per smem row, the same byte layout and swizzle as v1's
// 64 bf16. One K step is one 128-wide scale block, so each stage's partial sum is promoted
// (scaled into the fp32 total) right after its MMAs.
#define FP8_BM GEMM_BM
#define FP8_BN 128
#define FP8_BK 128
#define FP8_STAGES 4
#define FP8_THREADS 256 // 8 warps, 2 x 4, each a 32 x 32 sub-tile
#define FP8_SMEM_BYTES (FP8_STAGES * (FP8_BM + FP8_BN) * FP8_BK)

// How a weight stack's scale of output row n and K block kb is found (w_scales):
enum fp8_weight_scales {
    FP8W_TENSOR = 0,      // one scale per matrix: w_scales[expert]
    FP8W_BLOCK = 1,       // 128x128 blocks: scale row n / 128
    FP8W_BLOCK_PAIRED = 2 // W13 with gate/up rows interleaved: scale row 2 * ((n / 2) / 128) + n % 2
};

// gemm_args as gemm_launch takes them (the same plan, gather, epilogues and output rows), with
// a = e4m3 codes (x [T, lda] for GEMM_UP, A2 [rows, lda] for GEMM_DOWN), b = the e4m3 weight
// stack, and GEMM_UP writing A2 as fp32 (out [rows, ldo] floats: it is quantised next), plus
// the scales. The product of a row and a weight row is, per K block kb of 128,
//   partial(kb) * a_scale(row, kb) * w_scale(n, kb), summed over kb in fp32.
struct fp8_gemm_args {
    gemm_args g;
    // a_scale(row, kb) = a_scales[row * a_scale_rs + kb * a_scale_ks], row = the A row (token
    // for GEMM_UP, plan row for GEMM_DOWN). FP8_TENSOR x: rs = ks = 0; per-row tensor scales
    // (A2 with a fused shared expert): rs = 1, ks = 0; FP8_ROW128 by row (x, the separate shared
    // expert's A2): rs = ceil(K/128), ks = 1; k-block-major (A2 in plan order, the permuted x):
    // rs = 1, ks = the array's rows.
    const float *a_scales;
    int64_t a_scale_rs, a_scale_ks;
    const float *w_scales; // [experts, w_scale_rows, w_scale_cols]
    int64_t w_scale_rows, w_scale_cols;
    int w_scale_kind;      // fp8_weight_scales
    // Hopper path, GEMM_UP with fp8-row128 activations only (hopper_fp8_gemm_launch): when set,
    // GEMM1's epilogue quantises A2 itself: g.out receives the e4m3 codes [rows, g.ldo] (bytes),
    // out_scales the scale of (plan row r, 128-column group c) at out_scales[c * out_scale_ks + r].
    float *out_scales;
    int64_t out_scale_ks;
    // Hopper path: the decode kernel with the operands swapped instead of the 128 x 128 tiles; the
    // plan must then be built with blocks of SWAP_BLOCK_ROWS (the forward decides both:
    // hopper_fp8_swap_decode). Not with out_scales.
    int swap_decode;
};

// Launches the FP8 grouped GEMM on stream (moe__cuda_init must have run: fp8_gemm_init): the
// 64 x 128 x 128 kernel above, or, where gemm.cu's gemm_choose picks its decode kernel (touched
// experts average <= DECODE_MAX_AVG_ROWS rows; MOEFUSE_V1_TILE=wide|decode and
// MOEFUSE_V1_DECODE_MT=1|2 override), the FP8 decode kernel: always its K split (32 columns,
// 512-wide K slots, one 128-wide k-tile per warp; MOEFUSE_V1_DECODE_SPLIT and _BN do not apply).
cudaError_t fp8_gemm_launch(const fp8_gemm_args *args, cudaStream_t stream);
cudaError_t fp8_gemm_init(void);
// The kernel fp8_gemm_launch picks for these sizes, as one phrase for moe__cuda_forward_describe
// (gemm.cu's gemm_describe for the FP8 kernels); snprintf's return value.
int fp8_gemm_describe(int64_t rows, int64_t experts, int has_plan, int64_t routed_rows, int64_t n, char *buf,
                      size_t size);

// ---- the Hopper FP8 path (gemm_hopper_fp8.cu: TMA + wgmma e4m3, 128 x 128 x 128 tiles) -----
// Needs the plan built with block HOPPER_BLOCK_M (SWAP_BLOCK_ROWS for swap_decode). x codes [T, k] (args->a, lda = k, k % 16 == 0)
// into plan order: codes_out [rows, k] and, when groups > 0 (FP8_ROW128: groups = ceil(k/128)
// scales per row in x_scales [T, groups]), scales_out column-major [groups][scales_ld]
// (scales_ld >= rows). Padding rows get zero codes and scales; rows past *live_rows are not written.
// Rows of a k-block-major scale array [groups][rows] (the permuted x's, A2's): `rows` rounded up
// to a multiple of 4, so every k-block's column starts 16-byte aligned and the Hopper kernel can
// fetch a tile's 128 scales with one bulk copy (fp8_scales_bulk_ok).
inline int64_t fp8_kblock_scale_rows(int64_t rows) { return (rows + 3) / 4 * 4; }
cudaError_t hopper_fp8_permute_launch(const gemm_args *args, const float *x_scales, int64_t groups,
                                      uint8_t *codes_out, float *scales_out, int64_t scales_ld, cudaStream_t stream);
// fp8_gemm_launch's GEMMs with A in plan order for both modes (GEMM_UP: the permuted codes, the
// a_scale row = the plan row); n, k multiples of 16, lda == k; out and bias 16-byte aligned.
// With out_scales (GEMM_UP): A2 quantised in the epilogue; needs ldo % 16 == 0 and, for a gated
// activation, n % 128 == 0.
moe_status hopper_fp8_gemm_launch(moe_context_t *ctx, const fp8_gemm_args *args, cudaStream_t stream);
// Whether the forward's Hopper GEMM1 (fp8-row128 activations) quantises A2 in its epilogue:
// only when MOEFUSE_FP8_A2=epilogue asks for it (opt-in: on the H200 it was ~1% slower in total
// than the separate quantiser pass, faster only at T = 16384 on some shapes and up to 80% slower
// at T <= 64, a fixed cost per work unit: src/cuda/NOTES.md) and its sizes allow it (n = W13's
// rows: 2I gated, I for relu2; ldo = A2's row stride). The workspace query and the forward must
// see the same value.
bool hopper_fp8_a2_in_epilogue(int64_t n, int64_t ldo, int gated);
// Whether the Hopper FP8 GEMMs of a forward with these sizes run the decode kernel with the
// operands swapped (gemm_hopper_fp8.cu; MOEFUSE_FP8_DECODE=swap|tiles overrides). Its plan
// blocks are SWAP_BLOCK_ROWS rows (the kernel's N: one block, one pass over the weights).
#define SWAP_BLOCK_ROWS MOE__FP8_SWAP_BLOCK_ROWS
bool hopper_fp8_swap_decode(int64_t tokens, int64_t top_k, int64_t experts);
// Whether the Hopper FP8 tiles of a launch with these sizes may take their units from a ticket
// counter: prefill only (the decode instantiation, under 64 routed rows per expert, reads a unit
// ahead). They do when the caller gives one (gemm_args.unit_counter): the forward does where
// hopper_ticket_schedule(hopper_fp8_large_experts(H, I)) (gemm_hopper.cu).
bool hopper_fp8_ticket_tiles(int64_t tokens, int64_t top_k, int64_t experts);
// Whether the Hopper FP8 tiles of a launch with these sizes are 128 x 192 (the scales in the tile
// stage) rather than 128 x 128 (the scale ring): prefill (on either schedule), not with A2
// quantised in the epilogue (quant); the launch also needs k-block-major A scales.
// MOEFUSE_HOPPER_FP8_BN=128 forces 128.
bool hopper_fp8_wide_tiles(int64_t tokens, int64_t top_k, int64_t experts, bool quant);
// The epilogue a 128 x 192 launch of this GEMM (mode GEMM_UP / GEMM_DOWN, n, k, ldo, activation,
// GEMM2 rows in bf16) takes: the bulk-copy one (EPI_BULK) where K <= 2048 and the sizes allow, else
// the staged one; MOEFUSE_HOPPER_FP8_EPI=bulk at every K, =staged never.
bool hopper_fp8_bulk_epilogue(int mode, int64_t n, int64_t k, int64_t ldo, int activation, bool out_bf16);
// Whether the forward's Hopper FP8 path (1x128 scales, no separate shared expert) quantises x
// straight into plan order (fp8_quant_args's scatter) instead of by token and then permuting the
// codes: unless MOEFUSE_HOPPER_FP8_X=permute.
bool hopper_fp8_x_scatter(void);

// ---- the activation quantiser (quant.cu) --------------------------------------------------
// Rows of `cols` elements (src: F32/F16/BF16, row stride src_ld, columns contiguous) to e4m3
// codes (row stride codes_ld) and fp32 scales, with moe_quantize's rule: scale = amax / 448
// over the finite values (1 if that is not > 0), code = x / scale rounded once to nearest
// even, saturating. Rows in plan order (sorted_ids != NULL) are live when r < *live_rows and
// their id is not padding_id; the others are left untouched. Ids above padding_id are the fused
// shared expert's rows: for FP8_TENSOR they form a tensor of their own (their own amax).
struct fp8_quant_args {
    int format;              // MOE_FORMAT_FP8_ROW128 or MOE_FORMAT_FP8_TENSOR
    const void *src;
    int src_dtype;
    int64_t src_ld, rows, cols;
    const int32_t *sorted_ids; // NULL: rows 0..rows-1 all live, one tensor
    const int64_t *live_rows;  // with sorted_ids
    int64_t padding_id;
    uint8_t *codes;
    int64_t codes_ld;
    // FP8_ROW128: the scale of (row r, 128-column group g) at scales[r * scale_rs + g * scale_ks]
    // (by row: [rows, ceil(cols/128)]; A2 in plan order: k-block-major [ceil(cols/128)][rows]).
    // FP8_TENSOR: scales[0] (sorted_ids NULL), or one scale per plan row, the scale of its
    // tensor (sorted_ids set; 0 for a dead row, whose codes are not written).
    float *scales;
    int64_t scale_rs, scale_ks;
    uint32_t *amax;          // FP8_TENSOR: 2 words of scratch (routed, shared), zeroed here
    // FP8_ROW128 scatter (plan_row_of set, no sorted_ids, top_k (+1 shared) <= 32; the vector form
    // only, fp8_row128_vec_ok):
    // source row r (a token) is also written to its plan rows plan_row_of[r * top_k + j], j < top_k
    // (-1: left out of the plan), and to *shared_row0 + r when shared_row0 is set (the fused shared
    // expert's rows): codes at plan_codes + row * codes_ld, scales k-block-major at
    // plan_scales[g * plan_scale_ld + row]. With codes NULL the by-row codes and scales are not
    // written. Plan rows no token writes (padding) keep what they held.
    const int32_t *plan_row_of;
    int64_t top_k;
    const int64_t *shared_row0;
    uint8_t *plan_codes;
    float *plan_scales;
    int64_t plan_scale_ld;
};
// The quantiser's arguments for `rows` plain rows (no plan) of src [rows, ld] into codes [rows, cols]
// and scales by row; callers set the plan fields and other scale strides after.
fp8_quant_args fp8_quant_args_by_row(int format, const void *src, moe_dtype dtype, int64_t ld, int64_t rows,
                                     int64_t cols, uint8_t *codes, float *scales, uint32_t *amax);
cudaError_t fp8_quantize_launch(const fp8_quant_args *args, cudaStream_t stream);
// Whether FP8_ROW128 takes the quantiser's vector form (4 adjacent columns a lane; the scatter
// needs it): not MOEFUSE_FP8_QUANT=scalar, cols and leading dimensions multiples of 4, aligned bases.
bool fp8_row128_vec_ok(const fp8_quant_args *args);

#endif
