// The Hopper grouped GEMM's entry points beyond gemm.cuh's (gemm_hopper.cu): GEMM1 with the
// A rows gathered by the kernel's producer instead of a permuted copy of x.
#ifndef MOEFUSE_CUDA_HOPPER_GROUPED_API_H
#define MOEFUSE_CUDA_HOPPER_GROUPED_API_H

#include "../gemm.cuh"

// How GEMM1 gets its A rows on the Hopper path: MOEFUSE_HOPPER_A=gather (the producer gathers
// x rows through the plan: no permute pass, no xperm traffic) or permute (the default: a
// permute kernel writes x rows in plan order, then TMA loads them).
bool hopper_a_gather(void);
// How the tiled bf16 grouped GEMMs (A by TMA) take their units when given a ticket counter
// (gemm_args.unit_counter): from it (the default), or by the static stride when
// MOEFUSE_HOPPER_SCHEDULE=static.
bool hopper_static_schedule(void);
// GEMM1 (args->mode GEMM_UP) with a = x [tokens, lda] itself (lda a multiple of 8, x 16-byte
// aligned): the same outputs as hopper_permute_launch + hopper_gemm_launch.
moe_status hopper_gemm1_gather_launch(moe_context_t *ctx, const gemm_args *args, cudaStream_t stream);

#endif
