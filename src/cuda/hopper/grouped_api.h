// The Hopper grouped GEMM's entry points beyond gemm.cuh's (gemm_hopper.cu): GEMM1 with the
// A rows gathered by the kernel's producer instead of a permuted copy of x.
#ifndef MOEFUSE_CUDA_HOPPER_GROUPED_API_H
#define MOEFUSE_CUDA_HOPPER_GROUPED_API_H

#include "../gemm.cuh"

// How bf16 GEMM1 on the tiles gets its A rows for routed_rows rows over `experts` experts of
// intermediate size I: gathered by the kernel's producer through the plan (no permute pass, no
// xperm traffic) where moe__hopper_gather_select says so on the ticket schedule, else TMA from a
// copy of x in plan order that a permute kernel writes. MOEFUSE_HOPPER_A=gather|permute forces
// either (gather on the static stride then too).
bool hopper_a_gather(int64_t routed_rows, int64_t experts, int64_t intermediate);
// Whether the tiled grouped GEMMs (A by TMA, prefill) take their units from a ticket counter when
// given one (gemm_args.unit_counter), rather than by the static stride: bf16 by default, FP8 only
// with MOEFUSE_HOPPER_SCHEDULE=dyn (not yet measured in the forward); =static: neither.
bool hopper_ticket_schedule(bool fp8);
// Whether the tiled grouped GEMMs walk their units expert by expert (the forward sets
// gemm_args.expert_offsets; grouped_kernel.cuh's unit_tile) rather than in the grouped raster over
// all row blocks: bf16 by default (call S6 of session 16: deepseek-v3 T=4096 0.866 of the old time,
// gpt-oss-120b 0.93-0.96, the others 0.98-1.00), FP8 not (0.99-1.01: its static stride already
// runs an expert's units in one wave); MOEFUSE_HOPPER_RASTER=blocks|expert forces either.
bool hopper_expert_raster(bool fp8);
// Whether bf16 GEMM1 (tiled) applies its activation straight from the accumulators (EPI_ACT_FIRST,
// the default) rather than through the staged epilogue: a gated activation, I a multiple of 8, not
// MOEFUSE_HOPPER_EPI=staged, and when the producer gathers A (gather), the ticket schedule. (The
// launch also checks the pointers' alignment, which the forward's workspace always has.)
bool hopper_gemm1_act_first(int activation, int64_t intermediate, bool gather, bool ticket_schedule);
// The tiled grouped GEMM's tile width for n output columns: 240 where 240 divides n and 256 does
// not, on the ticket schedule and not for the gathering GEMM1; else 256. MOEFUSE_HOPPER_BN=256
// keeps 256.
int hopper_tile_n(int64_t n, bool ticket_schedule, bool gather);
// Whether bf16 GEMM2 (tiled, k = I) takes the bulk-copy epilogue (EPI_BULK: each warp's finished
// bf16 rows sent by one bulk copy a row while the next tile runs; 3 stages instead of 4): bf16 rows,
// n and ldo multiples of 8, the ticket schedule, and k <= 2048 (MOEFUSE_HOPPER_EPI2=bulk: at every
// k; =staged: never).
bool hopper_gemm2_bulk(int64_t n, int64_t k, int64_t ldo, bool out_bf16, bool ticket_schedule);
// GEMM1 (args->mode GEMM_UP) with a = x [tokens, lda] itself (lda a multiple of 8, x 16-byte
// aligned): the same outputs as hopper_permute_launch + hopper_gemm_launch.
moe_status hopper_gemm1_gather_launch(moe_context_t *ctx, const gemm_args *args, cudaStream_t stream);

#endif
