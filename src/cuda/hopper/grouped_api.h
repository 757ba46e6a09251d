// The Hopper grouped GEMM's entry points beyond gemm.cuh's (gemm_hopper.cu): GEMM1 with the
// A rows gathered by the kernel's producer instead of a permuted copy of x.
#ifndef MOEFUSE_CUDA_HOPPER_GROUPED_API_H
#define MOEFUSE_CUDA_HOPPER_GROUPED_API_H

#include "../gemm.cuh"

// How bf16 GEMM1 on the tiles gets its A rows for routed_rows rows over `experts` experts of
// intermediate size I: gathered by the kernel's producer through the plan (no permute pass, no
// xperm traffic) where moe__hopper_gather_select says so on the ticket schedule, else TMA from a
// copy of x in plan order that a permute kernel writes. MOEFUSE_HOPPER_A=gather|permute forces
// either (gather on the static stride then too); MOEFUSE_HOPPER_A=fill never gathers.
bool hopper_a_gather(int64_t routed_rows, int64_t experts, int64_t intermediate);
// Where GEMM1 reads A by TMA (not gathered) on the ticket schedule: whether GEMM1 itself copies x into
// plan order (gemm_args.x_fill: its producer's idle warps, beside the MMAs) instead of a permute
// kernel before it. MOEFUSE_HOPPER_A=fill (an A/B switch, off by default; no gather then either).
bool hopper_a_fill(bool ticket_schedule);
// Whether the tiled grouped GEMMs (A by TMA, prefill) take their units from a ticket counter when
// given one (gemm_args.unit_counter), rather than by the static stride: `by_default` unless
// MOEFUSE_HOPPER_SCHEDULE=dyn|static forces either. The callers' defaults: bf16 always, FP8 where
// hopper_fp8_large_experts says so.
bool hopper_ticket_schedule(bool by_default);
// Whether the tiled grouped GEMMs walk their units expert by expert (the forward sets
// gemm_args.expert_offsets; grouped_common.cuh's unit_tile) rather than in the grouped raster over
// all row blocks: `by_default` unless MOEFUSE_HOPPER_RASTER=expert|blocks forces either. bf16 always
// (call S6 of session 16: deepseek-v3 T=4096 0.866 of the old time, gpt-oss-120b 0.93-0.96, the
// others 0.98-1.00), FP8 with its tickets (hopper_fp8_large_experts).
bool hopper_expert_raster(bool by_default);
// FP8: tickets and the expert-by-expert walk together where an expert's weights are large, H * I >=
// 7 MiB (W13 at least 14 MiB of codes): there an expert's m-blocks then start together and read each
// weight tile from L2 after the first. Session 20, call U2, FP8 forward, medians of 3 alternated
// rounds, default / both at T = 4096 and 16384: deepseek-v3 1.077 / 1.024, gpt-oss-120b 1.032 / 0.994,
// mixtral 1.041 (noisy) / 0.990, gpt-oss-20b 0.995 / 1.013; below the threshold qwen3-235b-a22b
// (H * I = 6 MiB) 0.993 / 0.997, glm-4.5-air 0.993 / 0.998, qwen3-30b-a3b 0.991 / 0.989 and
// qwen3-next-80b-a3b 0.957 / 0.933 (E = 512, 2.5 blocks an expert): there the static stride stays.
bool hopper_fp8_large_experts(int64_t hidden, int64_t intermediate);
// Whether bf16 GEMM1 (tiled) applies its activation straight from the accumulators (EPI_ACT_FIRST,
// the default) rather than through the staged epilogue: a gated activation, I a multiple of 8, not
// MOEFUSE_HOPPER_EPI=staged, and when the producer gathers A (gather), the ticket schedule. (The
// launch also checks the pointers' alignment, which the forward's workspace always has.)
bool hopper_gemm1_act_first(int activation, int64_t intermediate, bool gather, bool ticket_schedule);
// Whether bf16 GEMM1 (tiled, reduction k = H), taking the act-first epilogue (act_first) on the ticket
// schedule with tile_n = 256, stores its A2 tiles by TMA instead (EPI_ACT_TMA): where k >= 7168
// (session 32's H100 forward A/B: deepseek-v3 3.3-4.9% faster, smaller H not clear);
// MOEFUSE_HOPPER_EPI=tma wherever it can, =first never.
bool hopper_gemm1_act_tma(bool act_first, bool ticket_schedule, int tile_n, int64_t k);
// Whether bf16 GEMM1 (tiled) skips the second consumer warpgroup's MMAs on row blocks whose second
// 64 rows are all padding, as GEMM2 always does on the ticket schedule: only on that schedule and
// with MOEFUSE_HOPPER_SKIP_UP=1 (an A/B switch, off by default).
bool hopper_gemm1_skip_idle(bool ticket_schedule);
// The tiled grouped GEMM's tile width for n output columns: 240 where 240 divides n and 256 does
// not, on the ticket schedule and not for the gathering GEMM1; else 256. MOEFUSE_HOPPER_BN=256
// keeps 256.
int hopper_tile_n(int64_t n, bool ticket_schedule, bool gather);
// The bulk-copy epilogues' rule by K (bf16 GEMM2's, hopper_gemm2_bulk, and the FP8 128 x 192
// tiles', hopper_fp8_bulk_epilogue): where k <= 2048; the A/B switch named env_var =bulk takes it at
// every k, =staged never.
bool hopper_bulk_by_k(const char *env_var, int64_t k);
// Whether bf16 GEMM2 (tiled, k = I) takes the bulk-copy epilogue (EPI_BULK: each warp's finished
// bf16 rows sent by one bulk copy a row while the next tile runs; 3 stages instead of 4): bf16 rows,
// n and ldo multiples of 8, the ticket schedule, and k <= 2048 (MOEFUSE_HOPPER_EPI2=bulk: at every
// k; =staged: never).
bool hopper_gemm2_bulk(int64_t n, int64_t k, int64_t ldo, bool out_bf16, bool ticket_schedule);
// Whether the bulk GEMM2 loads its epilogue's row ids and weights during the tile's last MMAs
// (grouped_params.early_rows): with MOEFUSE_HOPPER_EARLY_ROWS=1 (an A/B switch, off by default).
bool hopper_gemm2_early_rows(void);
// GEMM1 (args->mode GEMM_UP) with a = x [tokens, lda] itself (lda a multiple of 8, x 16-byte
// aligned): the same outputs as hopper_permute_launch + hopper_gemm_launch.
moe_status hopper_gemm1_gather_launch(moe_context_t *ctx, const gemm_args *args, cudaStream_t stream);

#endif
