/* Internal interface of the CUDA backend (src/cuda/). Plain C, so that the GPU tests (C) can
 * call the device plan builder directly and compare it with the CPU's element by element.
 * Not installed. */
#ifndef MOEFUSE_CUDA_BACKEND_H
#define MOEFUSE_CUDA_BACKEND_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rows per block of the grouped GEMMs: the `block` of the dispatch plan the forward builds,
 * MOE__CUDA_BLOCK_M (v1) or MOE__CUDA_HOPPER_BLOCK_M (internal.h, moe__gemm_block_rows).
 * moe__cuda_forward_block_rows gives the block the forward uses for T tokens on these weights
 * (it follows moe__cuda_forward_gemm). */
int64_t moe__cuda_block_rows(void);
int64_t moe__cuda_forward_block_rows(const moe_weights_t *w, int64_t num_tokens);

/* The grouped GEMM path of the forward (GEMM1 and GEMM2 of the routed experts; a shared
 * expert of another width always runs on v1): MOE__CUDA_GEMM_V1 or MOE__CUDA_GEMM_HOPPER
 * (internal.h). moe__cuda_gemm_select is moe__gemm_select's rule (internal.h, the core's
 * gemm_select.c, which the analysis calls too) for (routed rows T*k, E, H, I, weight dtype),
 * with the path forced by the environment variable MOEFUSE_GEMM ("v1" or "hopper", for tests
 * and benchmarks; anything else or unset: automatic) where Hopper can run.
 * The library never prints: tests and benchmarks print moe__cuda_gemm_name of the choice. */
int moe__cuda_gemm_select(int64_t routed_rows, int64_t E, int64_t H, int64_t I, moe_dtype dtype);
const char *moe__cuda_gemm_name(int path);
/* The path moe_forward takes for T tokens on these CUDA weights. */
int moe__cuda_forward_gemm(const moe_weights_t *w, int64_t num_tokens);

/* The device copy of the packed weights, hung on moe_weights.device. When the shared expert
 * has the routed experts' width (Is == I) it is stored as one more expert, index E, of the
 * same stacks, so the grouped GEMMs run it with the routed ones; else it has its own arrays. */
/* FP8 weights: the block scales of a stack of matrices, as the host qmatrix packs them
 * (src/core/internal.h): fp32 [matrices, rows, cols] on the device. FP8_TENSOR: 1 x 1 per
 * matrix; FP8_BLOCK128: [ceil(R/128), ceil(K/128)], or for a paired W13 (gate/up rows
 * interleaved) [2 * ceil(I/128), ceil(K/128)] with row r on scale row 2 * ((r/2)/128) + r%2. */
typedef struct moe__cuda_fp8_scales {
    float *data;        /* NULL for bf16/f16 weights */
    int64_t rows, cols; /* of one matrix's scale array */
    int paired;         /* 1: the paired W13 grid above */
} moe__cuda_fp8_scales;

typedef struct moe__cuda_weights {
    moe_dtype dtype;    /* element type of w13/w2: BF16, F16, or E4M3 (FP8 formats: codes) */
    moe_format format;  /* the packed format: BF16, F16, FP8_TENSOR or FP8_BLOCK128 */
    int64_t experts;    /* matrices in w13/w2: E, or E + 1 with the shared expert fused in */
    int shared_fused;   /* 1 when expert E of the stacks is the shared expert */
    void *w13, *w2;     /* [experts, R13, H], [experts, H, I] */
    float *b13, *b2;    /* [experts, R13], [experts, H] or NULL */
    float *router;      /* [E, H] or NULL */
    float *router_bias; /* [E] or NULL */
    float *correction_bias; /* [E] or NULL */
    float *shared_gate;     /* [H] or NULL */
    void *s13, *s2;         /* separate shared expert (Is != I): [R13s, H], [H, Is]; else NULL */
    float *sb13, *sb2;      /* its biases or NULL */
    /* FP8 formats only: scales of w13/w2 (the fused shared expert's appended as matrix E)
     * and of the separate shared expert's s13/s2. */
    moe__cuda_fp8_scales w13_scales, w2_scales, s13_scales, s2_scales;
} moe__cuda_weights;

/* Sets the kernels' launch attributes (shared-memory limits) on the context's device. The
 * weight upload calls it; code that hangs device weights on a moe_weights by hand (the
 * benchmark) must call it before the first moe_forward, outside any graph capture. */
moe_status moe__cuda_init(moe_context_t *ctx);

/* Builds the dispatch plan on the device, in one kernel on `stream`, from ids [T, k] (device,
 * contiguous): the same plan moe_dispatch_plan_build makes on the CPU. The plan's four arrays
 * are device pointers sized for `experts` = E + (shared_rows > 0) and for
 * max_rows = T*k + shared_rows + experts*(block-1) rows. With shared_rows = T > 0 expert E
 * is the fused shared expert: T more rows after the routed ones, ids T*k + 1 + t. Ids outside
 * [0, E) are left out of the plan (the device cannot report them without a sync). Host fields
 * of the plan (sizes) are filled here. row_of: NULL, or [T*k] device ints that receive the
 * inverse of sorted_ids for the routed ids (id i sits at plan row row_of[i]; -1: left out). */
moe_status moe__cuda_plan_build(moe_context_t *ctx, const int32_t *ids, int64_t T, int64_t k, int64_t E,
                                int64_t block, int64_t shared_rows, moe_dispatch_plan *plan, int32_t *row_of,
                                void *stream);

/* The FP8 activation quantiser of the w8a8 forward (quant.cu), exposed for the GPU test:
 * x [rows, cols] (device; F32, F16 or BF16; row stride ld elements, columns contiguous) ->
 * e4m3 codes [rows, cols] (row stride cols) and fp32 scales laid out as moe_quantize writes
 * them (FP8_ROW128 [rows, ceil(cols/128)], FP8_TENSOR [1]), the same codes and scales bit for
 * bit. amax: one 4-byte device word of scratch (FP8_TENSOR's amax).
 * Sync-free on `stream`. */
moe_status moe__cuda_fp8_quantize(moe_context_t *ctx, moe_format format, const void *x, moe_dtype dtype,
                                  int64_t rows, int64_t cols, int64_t ld, uint8_t *codes, float *scales,
                                  uint32_t *amax, void *stream);
/* Where the w8a8 forward (FP8 weights) leaves its quantised activations in its workspace, for
 * the GPU tests' stage-wise checks (tests/gpu/gpu_test_fp8.c, fp8_a2_probe.c); not public
 * API. Device pointers into `workspace`, as moe_forward lays it out for T tokens on w with
 * act_format (forward.cu's own layout; ask under the MOEFUSE_GEMM the forward ran with: the
 * path sets the plan block). What they hold is that of the last forward run in it.
 * One activation: codes [rows, cols] e4m3 (row stride cols); the scale of (row r, 128-column
 * group g) at scales[r * scale_row_stride + g * scale_group_stride], g < groups (fp8-tensor:
 * groups 1, and scale_row_stride 0 when the tensor has one scale); values: the fp32 matrix that
 * was quantised, [rows, cols] (NULL for x, and for A2 quantised in GEMM1's epilogue). */
typedef struct moe__cuda_fp8_act {
    const uint8_t *codes;
    const float *scales;
    const float *values;
    int64_t rows, cols, groups, scale_row_stride, scale_group_stride;
} moe__cuda_fp8_act;

typedef struct moe__cuda_fp8_view {
    int gemm;                  /* the path the layout is for: MOE__CUDA_GEMM_V1 or _HOPPER */
    int64_t block, experts;    /* plan block; E, or E + 1 with the shared expert fused (expert E) */
    int64_t max_rows;          /* plan rows reserved */
    /* Row ids of the plan: T*k is padding; ids in [0, T*k) are routed rows token*k + slot; an
     * id above T*k is the fused shared expert's row of token id - (T*k + 1). */
    int64_t padding_id;
    const int64_t *offsets;    /* [experts + 1]; offsets[experts] = the live plan rows */
    const int32_t *sorted_ids; /* [max_rows] */
    moe__cuda_fp8_act x;       /* [T, H]: one scale (fp8-tensor) or [T, ceil(H/128)] */
    /* A2 in plan order [max_rows, I], rows past the live count and padding rows unused;
     * fp8-tensor: one scale per plan row (scale_row_stride 1), that of the row's tensor (the
     * routed rows', or the fused shared rows'); fp8-row128: k-block-major [ceil(I/128)][max_rows]
     * (scale_row_stride 1, scale_group_stride max_rows). */
    moe__cuda_fp8_act a2;
    /* The separate shared expert's A2 (Is != I), [T, Is] by token: one scale or
     * [T, ceil(Is/128)]. rows = 0 (all NULL) when there is none or it is fused. */
    moe__cuda_fp8_act shared_a2;
} moe__cuda_fp8_view;

moe_status moe__cuda_fp8_workspace_view(moe_context_t *ctx, const moe_weights_t *w, int64_t T, moe_format act_format,
                                        void *workspace, moe__cuda_fp8_view *out);

/* The e4m3 code of x / s by the reference encoder (fp8_codec.cuh's fp8_encode, compiled for the
 * host), the rule the device quantisers reproduce: for tests against moe_quantize without a GPU. */
uint8_t moe__cuda_fp8_encode_host(float x, float s);
/* The same code by the quantisers' fast encoder (fp8_codec.cuh), its hardware conversion emulated. */
uint8_t moe__cuda_fp8_encode_fast_host(float x, float s);

#ifdef __cplusplus
}
#endif
#endif
