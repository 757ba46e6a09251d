/* Internal declarations shared by the library's C files. Not installed. */
#ifndef MOEFUSE_INTERNAL_H
#define MOEFUSE_INTERNAL_H

#include "moefuse.h"

#include <stdarg.h>
#include <stdbool.h>

#define MOE__ERROR_MAX 1024

struct moe_context {
    moe_backend backend; /* resolved: CPU or CUDA */
    int device;
    int threads;
    char error[MOE__ERROR_MAX];
};

/* JSON checks (json.c) for what cJSON accepts and the readers refuse. moe__json_space: JSON's
 * whitespace. moe__json_control_byte: the offset of the first raw control byte other than tab,
 * newline and carriage return (invalid JSON, which cJSON skips as space), or -1.
 * moe__json_repeated_key: the first key that appears twice in the object (cJSON finds the
 * first, Python's json keeps the last), or NULL. */
struct cJSON;
bool moe__json_space(char c);
int64_t moe__json_control_byte(const char *text, size_t len);
const char *moe__json_repeated_key(const struct cJSON *object);

/* The OpenMP team of a CPU region: the context's thread count (0: OpenMP's default), at most
 * MOE__TEAM_MAX (a team the OS cannot supply ends the process inside libgomp, and the CPU
 * forward keeps that many per-thread slots) and, when work > 0, at most work (the items the
 * region splits). *source (if not NULL) says where the count came from. 1 without OpenMP. */
#define MOE__TEAM_MAX 64
int moe__team_size(const moe_context_t *ctx, int64_t work, const char **source);

/* Records a message for `status` on ctx (if any) and on this thread; returns status, so a
 * failing check reads `return moe__error(ctx, MOE_STATUS_..., "x: expected %d", v);`. */
moe_status moe__error(moe_context_t *ctx, moe_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Clears the message of ctx and of this thread (start of a public call). */
void moe__clear_error(moe_context_t *ctx);

/* a * b and a + b for non-negative sizes; false on overflow of int64. */
bool moe__mul64(int64_t a, int64_t b, int64_t *out);
bool moe__add64(int64_t a, int64_t b, int64_t *out);

/* Bytes of n elements of dtype (E2M1: n rounded up to whole bytes); -1 on overflow. */
int64_t moe__dtype_bytes(moe_dtype dtype, int64_t n);

/* Checks a tensor argument: present, data non-NULL, ndim, each dim (-1 = any value, else
 * must equal), strides non-negative and not overlapping rows, dtype in `dtype_mask`
 * (bit (1 << dtype)). The message names the argument `name`. */
moe_status moe__check_tensor(moe_context_t *ctx, const moe_tensor *t, const char *name, int32_t ndim,
                             const int64_t *dims, uint32_t dtype_mask);
#define MOE__DT(d) (1u << (d))
#define MOE__FLOAT_DTYPES (MOE__DT(MOE_DTYPE_F32) | MOE__DT(MOE_DTYPE_F16) | MOE__DT(MOE_DTYPE_BF16))

/* Effective stride of dim i (contiguous row-major when all strides are 0). */
int64_t moe__stride(const moe_tensor *t, int32_t i);
/* Reads element at a multi-index (up to 4 dims) of a host tensor of float dtype as float. */
float moe__tensor_get(const moe_tensor *t, const int64_t *index);
/* Writes a float to a host tensor element of float dtype (F32/F16/BF16/F64). */
void moe__tensor_set(const moe_tensor *t, const int64_t *index, float v);

/* A stack of `count` matrices [rows, cols] in one format (codes, block scales, tensor
 * scales), as packed for the kernels. See moe_format in moefuse.h for the layouts.
 *
 * paired_rows = 1 (the W13 of a gated activation): the rows are gate/up pairs, row 2i = gate
 * row i and row 2i+1 = up row i, and the 2-D block formats lay their blocks over each half
 * on its own, the way a checkpoint quantises gate [I, H] and up [I, H]: a block never mixes
 * gate and up rows. Codes stay interleaved by rows as always; the scale array gets one scale
 * row per (block row, half), in the order gate block-row 0, up block-row 0, gate block-row
 * 1, up block-row 1, ...:
 *   FP8_BLOCK128  scales fp32 [2 * ceil(I/128), ceil(cols/128)]; row r = 2i + s (s = 0 gate,
 *                 1 up) uses scale row 2 * (i / 128) + s, i.e. 2 * (r / 256) + (r % 2)
 *   NVFP4_2D      scales ue4m3 [2 * ceil(I/16), ceil(cols/16)]; row r uses scale row
 *                 2 * (i / 16) + s, i.e. 2 * (r / 32) + (r % 2); the one fp32 tensor scale
 *                 S_enc is shared by both halves (448*6 / amax over the whole W13)
 * (layout.scale_rows says the count.) So scale row b covers interleaved rows r with
 * r % 2 == b % 2 in [256 * (b / 2), 256 * (b / 2) + 256) (FP8_BLOCK128; 32 for NVFP4_2D).
 * For a kernel: a tile of interleaved rows [r0, r0 + n), n <= 256 dividing r0 (FP8_BLOCK128),
 * needs per column block just two scales, scale rows 2 * (r0 / 256) (its even, gate rows)
 * and 2 * (r0 / 256) + 1 (its odd, up rows); likewise with 32 for NVFP4_2D. Every other
 * format is unchanged by the pairing: its scales are per row or per matrix (FP8_TENSOR's one
 * scale and NVFP4's S_enc cover the whole W13). moe__qmatrix_scale_row gives the scale row
 * of any row, in any format. The shared expert's s13 is paired the same way. */
typedef struct moe__qmatrix {
    moe_format format;
    int64_t count, rows, cols;
    int32_t paired_rows;      /* 1: gate/up pairs, blocks over each half (see above); else 0 */
    moe_format_layout layout; /* of one matrix (with paired_rows, the paired scale grid) */
    uint8_t *codes;           /* count * layout.code_bytes */
    void *scales;             /* count * scale_rows * scale_cols elements of layout.scale_dtype */
    float *tensor_scales;     /* count, or NULL */
} moe__qmatrix;

/* Bytes of one matrix's block scales. */
size_t moe__qmatrix_scale_bytes(const moe__qmatrix *m);
/* The row of the scale array that row `row` of a matrix uses (0 for FP8_TENSOR and the
 * plain formats). */
int64_t moe__qmatrix_scale_row(const moe__qmatrix *m, int64_t row);
/* Dequantises row `row` of matrix `index` into out[cols] (fp32). */
void moe__qmatrix_row(const moe__qmatrix *m, int64_t index, int64_t row, float *out);
/* Allocation and filling (qmatrix.c). alloc zero-fills codes and scales (tensor scales 1)
 * for `count` matrices of [rows, cols]; on failure m is left zeroed. set quantises a
 * row-major fp32 [rows, cols] matrix x into slot `index`. free(NULL) and double free are safe. */
moe_status moe__qmatrix_alloc(moe__qmatrix *m, moe_format f, int64_t count, int64_t rows, int64_t cols);
/* As moe__qmatrix_alloc, with paired_rows = 1 (rows = 2I, even); set then takes x in the
 * interleaved row order and quantises each half on its own grid. */
moe_status moe__qmatrix_alloc_paired(moe__qmatrix *m, moe_format f, int64_t count, int64_t rows, int64_t cols);
void moe__qmatrix_free(moe__qmatrix *m);
moe_status moe__qmatrix_set(moe__qmatrix *m, int64_t index, const float *x);

/* The block quantisers behind moe_quantize (formats.c), for packing halves of a matrix:
 * FP8_ROW128, FP8_BLOCK128, NVFP4 and NVFP4_2D only (others: nothing is written), NVFP4
 * with the tensor scale given. Code row r starts code_ld elements after row 0 (an even
 * count for E2M1), scale row b scale_ld scale elements after scale row 0. No argument
 * checks: the caller passes what moe_quantize would have accepted. */
void moe__quantize_blocks(moe_format format, const float *x, int64_t rows, int64_t cols, int64_t ld,
                          float tensor_scale, void *codes, int64_t code_ld, void *scales, int64_t scale_ld);
/* NVFP4's S_enc = 448*6 / amax of a matrix (1 for amax 0), as moe_quantize computes it. */
float moe__nvfp4_tensor_scale(const float *x, int64_t rows, int64_t cols, int64_t ld);

/* Packed weights. W13 holds gate and up interleaved by rows (row 2i gate i, row 2i+1 up i)
 * for the gated activations, with paired_rows = 1 (2-D blocks over each half, scale rows
 * interleaved: see moe__qmatrix), or the I rows of W1 for RELU2 (paired_rows = 0; W2 too).
 * Host memory for the CPU backend; the CUDA backend keeps a device copy beside it. */
struct moe_weights {
    moe_layer_spec spec;
    moe_format format;
    moe_backend backend;
    moe__qmatrix w13; /* [E, R13, H], R13 = 2I gated, I for RELU2 */
    moe__qmatrix w2;  /* [E, H, I] */
    float *b13;       /* [E, R13] interleaved like w13, or NULL */
    float *b2;        /* [E, H] or NULL */
    float *router;    /* [E, H] or NULL */
    float *router_bias;     /* [E] or NULL */
    float *correction_bias; /* [E] or NULL */
    moe__qmatrix s13, s2;   /* shared expert, count 1 (count 0 when none) */
    float *sb13, *sb2;      /* shared biases or NULL */
    float *shared_gate;     /* [H] or NULL */
    size_t bytes;
    void *device; /* backend-private state (CUDA copies), NULL on the CPU */
};

/* Rows of W13 per expert for an activation (2I gated, I for RELU2). */
int64_t moe__w13_rows(const moe_layer_spec *spec, int64_t intermediate);

/* The activation of one GLU pair (or of h alone for RELU2, up ignored). */
float moe__activate(const moe_layer_spec *spec, float gate, float up);

/* CPU backend entry points (src/cpu/). */
moe_status moe__cpu_forward(moe_context_t *ctx, const moe_weights_t *w, const moe_forward_args *args);
size_t moe__cpu_forward_workspace(const moe_weights_t *w, int64_t num_tokens, moe_format act_format);
/* The CPU forward with its A2 (the activation's output, GEMM2's input) exchanged, for the GPU
 * test's stage-wise FP8 checks (tests/gpu/gpu_test_fp8.c); not public API. Any pointer may
 * be NULL; all NULL (or a2 NULL) is moe__cpu_forward.
 *   a2_out, shared_a2_out: receive A2 as GEMM1 + activation made it, before act_format's
 *     quantisation: routed [T*k, I] by row id token*k + slot, shared [T, Is] (if any);
 *   a2_in, shared_a2_in: GEMM2 uses these values (same layouts) as A2 instead, as given:
 *     neither computed (that GEMM1 is skipped) nor quantised here.
 * args as moe_forward has validated them: nothing is checked here. */
typedef struct moe__cpu_a2_exchange {
    const float *a2_in, *shared_a2_in;
    float *a2_out, *shared_a2_out;
} moe__cpu_a2_exchange;
moe_status moe__cpu_forward_a2(moe_context_t *ctx, const moe_weights_t *w, const moe_forward_args *args,
                               const moe__cpu_a2_exchange *a2);

/* The K-grouped weight-gradient GEMM (src/cpu/wgrad.c), the oracle of the Hopper engine's
 * (src/cuda/hopper/gemm_wgrad.h, the same formula): for every expert e, with R_e the rows
 * offsets[e] .. offsets[e] + counts[e] - 1 of g [rows, ldg] and a [rows, lda],
 *   dw[e * n * lddw + i * lddw + c] = beta * (that value) + sum over r in R_e of g[r][i] * a[r][c]
 * for i < n, c < k; sums in fp64 in row order; the old value is not read when beta is 0. Rows
 * outside every R_e are never read. Nothing is checked. */
void moe__cpu_wgrad(int64_t experts, int64_t n, int64_t k, const int64_t *offsets, const int64_t *counts,
                    const float *g, int64_t ldg, const float *a, int64_t lda, float beta, float *dw, int64_t lddw);

/* CUDA backend entry points (src/cuda/). Without CUDA (src/core/nocuda.c) the device count is
 * -1 and the others answer MOE_STATUS_UNSUPPORTED. */
int moe__cuda_device_count(void);
/* Copies the packed host weights of w to the device (w->device); called by
 * moe_weights_create for a CUDA context. */
moe_status moe__cuda_weights_upload(moe_context_t *ctx, moe_weights_t *w);
void moe__cuda_weights_free(moe_weights_t *w);
moe_status moe__cuda_forward(moe_context_t *ctx, const moe_weights_t *w, const moe_forward_args *args);
size_t moe__cuda_forward_workspace(const moe_weights_t *w, int64_t num_tokens, moe_format act_format);
/* The CUDA backend's line for moe_forward_config: snprintf's return, or -1 when the
 * workspace layout overflows. */
int moe__cuda_forward_describe(const moe_weights_t *w, int64_t num_tokens, moe_format act_format, char *buf,
                               size_t size);

/* The grouped GEMM paths of the CUDA forward (GEMM1 and GEMM2 of the routed experts) and the
 * rule that picks one (gemm_select.c). Here, with no CUDA in it, so that the backend that runs
 * the kernels and the analysis that models them (moe_grouped_kernel_select) share one rule.
 *   MOE__CUDA_GEMM_V1      mma.sync + cp.async, x rows gathered in the kernel (src/cuda/gemm.cu);
 *                          tile and plan block MOE__CUDA_BLOCK_M rows;
 *   MOE__CUDA_GEMM_HOPPER  TMA + wgmma engine over a permuted copy of x (src/cuda/gemm_hopper.cu,
 *                          gemm_hopper_fp8.cu); tile and plan block MOE__CUDA_HOPPER_BLOCK_M rows
 *                          (a tile must not straddle experts). */
enum { MOE__CUDA_GEMM_V1 = 0, MOE__CUDA_GEMM_HOPPER = 1 };
#define MOE__CUDA_BLOCK_M 64
#define MOE__CUDA_HOPPER_BLOCK_M 128
/* A forced path (the CUDA backend reads it from the environment variable MOEFUSE_GEMM, for tests
 * and benchmarks): moe__gemm_force_parse("v1") and ("hopper") force one; anything else, NULL
 * included, is automatic. */
typedef enum moe__gemm_force { MOE__GEMM_AUTO = 0, MOE__GEMM_FORCE_V1 = 1, MOE__GEMM_FORCE_HOPPER = 2 } moe__gemm_force;
moe__gemm_force moe__gemm_force_parse(const char *value);
/* The path for routed_rows = T*k rows over E experts of hidden size H and intermediate I with
 * weights of `dtype`. Hopper runs only where it is implemented: bf16 weights, H and I multiples
 * of 64 (TMA needs 16-byte row strides; multiples of 64 also keep every K-block whole), E*H and
 * E*I >= 256 (the weight stack is at least one tile of B rows) and coordinates below 2^31; or
 * E4M3 (FP8) weights with H and I multiples of 16 and >= 128 instead (K and N tails are handled
 * by the FP8 kernel); otherwise v1, whatever `force` says. Where Hopper can run, `force` decides;
 * automatic: bf16 on Hopper when the experts average more than MOE__BF16_HOPPER_MIN_AVG_ROWS rows
 * (T*k > 16*E; at up to 16 the forward runs the swapped decode kernel from half a row on), else
 * v1; FP8 on Hopper at every T (faster than v1's emulated e4m3 mma.sync at every T measured). */
#define MOE__BF16_HOPPER_MIN_AVG_ROWS MOE__FP8_SWAP_MAX_AVG_ROWS /* where the swapped kernel ends */
int moe__gemm_select(int64_t routed_rows, int64_t E, int64_t H, int64_t I, moe_dtype dtype, moe__gemm_force force);
/* Rows of the tile and of the dispatch plan's blocks on `path`. */
int64_t moe__gemm_block_rows(int path);
/* FP8 on the Hopper path at decode: whether the grouped GEMMs take the kernel with the operands
 * swapped (src/cuda/hopper/decode_swap_kernel.cuh) instead of the 128 x 128 tiles: routed rows
 * averaging at most MOE__FP8_SWAP_MAX_AVG_ROWS per expert (E: the stack's matrices). Its plan
 * blocks are MOE__FP8_SWAP_BLOCK_ROWS rows (the kernel's N). Automatic rule; the CUDA backend
 * lets MOEFUSE_FP8_DECODE=swap|tiles override it. */
#define MOE__FP8_SWAP_MAX_AVG_ROWS 16
#define MOE__FP8_SWAP_BLOCK_ROWS 32
int moe__fp8_swap_select(int64_t routed_rows, int64_t E);
/* bf16 where Hopper can run the shapes: whether the grouped GEMMs at decode take the same swapped
 * kernel instead of v1's kernels: routed rows averaging from half a row up to
 * MOE__FP8_SWAP_MAX_AVG_ROWS per expert. Automatic rule; the CUDA backend lets
 * MOEFUSE_BF16_DECODE=swap|off override it (swap: below half a row too). */
int moe__bf16_swap_select(int64_t routed_rows, int64_t E);
/* bf16 on the Hopper tiles (ticket schedule): whether GEMM1's producer gathers its A rows from x
 * (cp.async) instead of TMA from a permuted copy: routed rows averaging at most
 * MOE__HOPPER_GATHER_MAX_AVG_ROWS per expert, or I at most MOE__HOPPER_GATHER_MAX_I. Automatic
 * rule; MOEFUSE_HOPPER_A=gather|permute overrides it. */
#define MOE__HOPPER_GATHER_MAX_AVG_ROWS 256
#define MOE__HOPPER_GATHER_MAX_I 1024
int moe__hopper_gather_select(int64_t routed_rows, int64_t E, int64_t I);

#endif
