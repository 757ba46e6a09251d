// The grouped expert GEMMs (mma.sync baseline): declarations shared by gemm.cu and forward.cu.
#ifndef MOEFUSE_CUDA_GEMM_CUH
#define MOEFUSE_CUDA_GEMM_CUH

#include "common.cuh"

// The x row (token) of a plan row's id that is not padding: a routed row's id is token * top_k +
// slot, a fused shared expert's padding_id + 1 + token (the dispatch plan's numbering). One rule
// for every kernel that reads x through the plan.
__host__ __device__ __forceinline__ int64_t plan_id_token(int64_t id, int64_t padding_id, int64_t top_k) {
    return id < padding_id ? id / top_k : id - padding_id - 1;
}

// Tile of one thread block: BM plan rows x BN output columns, BK of the reduction per stage.
#define GEMM_BM MOE__CUDA_BLOCK_M
#define GEMM_BN 128
#define GEMM_BK 64
#define GEMM_STAGES 4
#define GEMM_THREADS 128
#define GEMM_GROUP_M 16 // row blocks per raster group (see gemm_kernel)
#define GEMM_SMEM_BYTES (GEMM_STAGES * (GEMM_BM + GEMM_BN) * GEMM_BK * 2)

enum gemm_mode {
    GEMM_UP = 0,   // GEMM1: gathered x rows . W13^T, epilogue bias + activation -> A2 rows (T dtype)
    GEMM_DOWN = 1  // GEMM2: A2 rows . W2^T, epilogue bias x routing weight -> rows of out (fp32/bf16)
};

// Row ids (the plan's): id < T*k is token id / k, slot id % k; id == T*k is padding; id > T*k
// is the shared expert's row of token id - T*k - 1. Its GEMM_DOWN output row is id (routed) or
// id - 1 (shared), so `out` holds T*k routed rows then T shared rows.
struct gemm_args {
    int mode;
    const void *a;    // GEMM_UP: x [T, lda] (rows gathered by id); GEMM_DOWN: A2 [rows, lda]
    int64_t lda;
    const void *b;    // [experts, n, k] stack
    int64_t experts;  // matrices in b (the Hopper path views b as one 2-D [experts * n, k] matrix)
    const float *bias; // [experts, n] or NULL
    int64_t n, k;
    const int32_t *sorted_ids;   // plan rows; NULL: identity over `rows` shared rows
    const int32_t *block_expert; // expert of each BM block; NULL: expert 0
    const int64_t *live_rows;    // device: rows in use (the plan's total); NULL: all `rows`
    const int64_t *expert_offsets; // Hopper tiles: the plan's [experts + 1] row offsets (units taken
                                   // expert by expert); NULL: the grouped raster over all blocks
    int64_t rows;                // host bound of plan rows (the grid covers it)
    int64_t tokens, top_k;
    const float *topk_weights;   // [T*k]
    const float *shared_scale;   // [T] (sigmoid shared gate) or NULL for weight 1
    int weight_on_input;
    int out_bf16;                // GEMM_DOWN: rows in bf16 (the fp32 value rounded once), else fp32;
                                 // the v1 kernels only behind a 16-bit A2 (v1 FP8 writes fp32 rows)
    void *out;                   // GEMM_UP: A2 [rows, ldo]; GEMM_DOWN: [T*k + T, ldo] fp32 or bf16
    int64_t ldo;
    int activation;              // moe_activation (GEMM_UP)
    float act_alpha, act_limit;
    // Hopper tiled grouped GEMM (bf16, A by TMA): two device ints, 0 at the launch (the kernel
    // leaves them 0): the ticket counter its CTAs take units from. NULL: units by a static stride.
    int *unit_counter;
    // Hopper GEMM_UP with A by TMA (hopper_gemm_launch): when x_fill is set, `a` (the permuted rows)
    // is written by the GEMM itself: its producer warpgroup's idle warps copy x_fill [T, ldx_fill]
    // rows into `a` in plan order (padding rows zero), as hopper_permute_launch would, while the
    // MMAs run: rows_ready[0] hands out the rows, rows_ready[1 + b] counts 128-row block b's (1 +
    // the plan's max blocks ints, all 0 at the launch); a block's tiles are loaded once its count
    // is 128. NULL: `a` is written.
    const void *x_fill;
    int64_t ldx_fill;
    int *rows_ready;
};

// The v1 kernel's tile for a launch: a pure function of host-known sizes (rows = the host
// bound of plan rows, experts in the stack, whether rows come from a plan or are the identity,
// routed rows T*k, n) and of the SM count (132 until gemm_init has seen the device).
//   live = rows - experts*63 (plan) or rows; touched = min(experts, live) (plan) or 1;
//   avg = ceil(live / touched) rows per touched expert;
//   blocks = min((live + 63*touched) / 64, live) (plan) or ceil(rows / 64): live 64-row blocks;
//   wide_tiles = blocks * ceil(n / 128): the 64 x 128 kernel's CTAs.
//   The decode kernel iff avg <= DECODE_MAX_AVG_ROWS, else the 64 x 128 x 64 kernel (4 stages).
//   H200, bench_gpu_forward at T = 1, 8, 64 on PERF.md's four shapes (every cell has avg <= 16;
//   bench/results/2026-12-02-h200-call4/bench/decode_*.log): the K-split decode kernel was the
//   fastest v1 variant in all 12 cells (e.g. qwen3 T=1 0.040 ms vs 0.064 with the 64 x 128 kernel,
//   deepseek T=64 4.64 vs 5.12, mixtral T=64 (avg 16) 0.688 vs 0.776; qwen3 T=64 0.367 vs 0.366).
//   Above 16 rows per expert it has not been measured, so the 64 x 128 kernel keeps those.
//   Decode tile: rows in passes of 16 (MT = 1), or 32 (MT = 2) when avg > 6 or a fused shared
//   expert holds > 16 rows. K split (default): BN = 32, slots of 4 k-tiles (one per warp), 3-4
//   stages in 112 KB with the reduction area. N split: BN in {128, 64, 32} minimising
//   ceil(items / SMs) * BN with items = blocks * ceil(n / BN), ties to the narrower; stages: as
//   many 64-wide k-tiles as fit ~100 KB (at most 16).
// Environment (tests, tuning): MOEFUSE_V1_TILE=wide|decode forces the kernel;
// MOEFUSE_V1_DECODE_SPLIT=n|k the decode variant; MOEFUSE_V1_DECODE_BN=32|64|128 (N split
// only) and MOEFUSE_V1_DECODE_MT=1|2 the decode tile.
#define DECODE_MAX_AVG_ROWS 16
#define DECODE_MT1_MAX_AVG 6
#define DECODE_KSPLIT 4         // k-tiles per ring slot of the K-split variant (one per warp)
#define DECODE_DEFAULT_SPLIT DECODE_KSPLIT // K split: fastest in every measured cell (above)
struct gemm_choice {
    int decode;          // 1: decode_kernel, 0: the 64 x 128 kernel
    int bn, mt, stages;  // N tile, m16 tiles per pass (the 64 x 128 kernel: 128, 4, 4)
    int ksplit;          // decode: 1 (N split) or DECODE_KSPLIT (K split); the 64 x 128 kernel: 1
    int64_t items;       // estimated work items (host bound for the 64 x 128 kernel)
    int64_t live_rows, avg_rows;
    int64_t wide_tiles;  // the 64 x 128 kernel's CTAs for the live-block bound
};
gemm_choice gemm_choose(int64_t rows, int64_t experts, int has_plan, int64_t routed_rows, int64_t n);
// One phrase for moe__cuda_forward_describe, e.g. "decode 16x32x64 tile (rows in passes of
// 16, N split over the 4 warps), 16 stages, ~384 items"; snprintf's return value.
int gemm_describe(int64_t rows, int64_t experts, int has_plan, int64_t routed_rows, int64_t n, char *buf,
                  size_t size);

// Launches the GEMM for element type dtype (BF16 / F16) on stream.
cudaError_t gemm_launch(moe_dtype dtype, const gemm_args *args, cudaStream_t stream);
// Raises the kernels' dynamic shared-memory limit (once, at weight upload).
cudaError_t gemm_init(void);

// ---- the Hopper path (gemm_hopper.cu): TMA + wgmma, warp-specialised, persistent ----------
// Needs the plan built with block HOPPER_BLOCK_M (a 128-row tile never straddles experts),
// bf16 operands, and rows that TMA can load (see moe__cuda_gemm_select).
#define HOPPER_BLOCK_M MOE__CUDA_HOPPER_BLOCK_M
// x rows gathered in plan order into a [rows, H] bf16 buffer (padding rows zero, or not written
// when !zero_padding: the swapped decode kernel drops their columns), so that GEMM1 can load A
// tiles with TMA (TMA cannot gather rows). Rows past the live total (*args->live_rows, read on
// the device) are not written. Uses a: x [T, lda], sorted_ids, live_rows, rows, tokens, top_k; k = H.
cudaError_t hopper_permute_launch(const gemm_args *args, void *a_perm, bool zero_padding, cudaStream_t stream);
// The same rows (padding rows zero) written token by token, each x row read once: row_of [T*k]
// the plan row of each routed id (-1: left out; moe__cuda_plan_build's row_of), shared_row0 the
// device offset of the fused shared expert's rows (token t at *shared_row0 + t) or NULL. Needs
// top_k (+1 with shared_row0) <= 32. The forward's prefill pass unless hopper_permute_scatter says
// otherwise (MOEFUSE_HOPPER_PERMUTE=rows: hopper_permute_launch's plan order).
cudaError_t hopper_scatter_launch(const gemm_args *args, void *a_perm, const int32_t *row_of,
                                  const int64_t *shared_row0, cudaStream_t stream);
bool hopper_permute_scatter(void);
// GEMM_UP with a = the permuted rows [rows, k] (lda = k), or GEMM_DOWN as in gemm_launch.
// Same outputs as gemm_launch for the same arguments.
moe_status hopper_gemm_launch(moe_context_t *ctx, const gemm_args *args, cudaStream_t stream);
// The same two GEMMs at decode on the kernel with the operands swapped
// (hopper/decode_swap_kernel.cuh), for a plan of SWAP_BLOCK_ROWS-row blocks.
moe_status hopper_swap_decode_launch(moe_context_t *ctx, const gemm_args *args, cudaStream_t stream);
// Whether the bf16 forward of tokens x top_k routed rows over `experts` takes it:
// moe__bf16_swap_select's rule; MOEFUSE_BF16_DECODE=off never, =swap up to moe__fp8_swap_select's
// rows per expert.
bool hopper_bf16_swap_decode(int64_t tokens, int64_t top_k, int64_t experts);
// Shared-memory limits of the Hopper kernels and the tensor-map encoder (once, at upload).
cudaError_t hopper_gemm_init(void);

#endif
