/*
 * moefuse.h — the Mixture-of-Experts MLP block, fast on NVIDIA Hopper, exact on any CPU.
 *
 * This header is the manual. Conventions that hold everywhere:
 *  - Every call that can fail returns a moe_status. moe_status_string() names a status;
 *    moe_last_error(ctx) gives the detailed message of the last failure on that context
 *    (which argument, which value, what was expected). Calls that take no context (or a NULL
 *    one) leave their message in a per-thread buffer read by moe_last_error(NULL).
 *  - The library never prints, never exits, never aborts on bad input.
 *  - Opaque handles come in create/free pairs; free(NULL) is a no-op.
 *  - All sizes and offsets are 64-bit. Matrices are row-major; a weight matrix W of a
 *    linear layer in -> out is stored [out, in] (PyTorch's nn.Linear convention), so the
 *    reduction dimension is the contiguous one.
 *  - Memory is the caller's: the library allocates only inside *_create calls and says so.
 *
 * Shapes used below: T tokens, H hidden size, E routed experts, I expert intermediate size,
 * k experts per token (top_k).
 */
#ifndef MOEFUSE_H
#define MOEFUSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_VERSION_MAJOR 0
#define MOE_VERSION_MINOR 1
#define MOE_VERSION_PATCH 0
#define MOE_VERSION_NUMBER (MOE_VERSION_MAJOR * 10000 + MOE_VERSION_MINOR * 100 + MOE_VERSION_PATCH)

/* "0.1.0" */
const char *moe_version(void);

/* ---------------------------------------------------------------------------------------
 * Status codes. One table, so codes and strings cannot drift.
 * ------------------------------------------------------------------------------------- */
#define MOE_STATUS_LIST(X)                                                                  \
    X(MOE_STATUS_OK, 0, "ok")                                                               \
    X(MOE_STATUS_NULL_POINTER, 1, "a required pointer is NULL")                             \
    X(MOE_STATUS_INVALID_ARGUMENT, 2, "invalid argument")                                   \
    X(MOE_STATUS_SHAPE_MISMATCH, 3, "tensor shape or stride does not match")                \
    X(MOE_STATUS_DTYPE_MISMATCH, 4, "tensor dtype is not one this call accepts")            \
    X(MOE_STATUS_OVERFLOW, 5, "size too large: it would overflow")                          \
    X(MOE_STATUS_OUT_OF_MEMORY, 6, "out of memory")                                         \
    X(MOE_STATUS_WORKSPACE_TOO_SMALL, 7, "workspace too small")                             \
    X(MOE_STATUS_UNSUPPORTED, 8, "valid request, not supported by this backend or build")   \
    X(MOE_STATUS_NOT_FOUND, 9, "not found")                                                 \
    X(MOE_STATUS_IO_ERROR, 10, "file could not be read")                                    \
    X(MOE_STATUS_PARSE_ERROR, 11, "malformed input file")                                   \
    X(MOE_STATUS_NO_DEVICE, 12, "no usable GPU")                                            \
    X(MOE_STATUS_DEVICE_ERROR, 13, "the GPU runtime reported an error")                     \
    X(MOE_STATUS_INTERNAL, 14, "internal error (a bug in moefuse)")

typedef enum moe_status {
#define MOE__STATUS_ENUM(name, value, text) name = value,
    MOE_STATUS_LIST(MOE__STATUS_ENUM)
#undef MOE__STATUS_ENUM
    MOE_STATUS_COUNT_
} moe_status;

/* A static string naming the status; "unknown status" for values outside the table. */
const char *moe_status_string(moe_status status);

/* ---------------------------------------------------------------------------------------
 * Context: backend choice and the last error message.
 * ------------------------------------------------------------------------------------- */
typedef enum moe_backend {
    MOE_BACKEND_AUTO = 0, /* CUDA when built with it and a GPU is present, else CPU */
    MOE_BACKEND_CPU = 1,  /* the reference backend: plain loops, fp32, deterministic */
    MOE_BACKEND_CUDA = 2
} moe_backend;

typedef struct moe_context moe_context_t;

/* Creates a context on `backend` (device index `device` for CUDA; ignored for CPU).
 * MOE_STATUS_NO_DEVICE when CUDA is asked for and none is usable. */
moe_status moe_context_create(moe_backend backend, int device, moe_context_t **out);
void moe_context_free(moe_context_t *ctx);
/* The backend the context resolved to (never AUTO). */
moe_backend moe_context_backend(const moe_context_t *ctx);
/* CPU threads used by the CPU backend (0 = library default, the OpenMP default). Accepts 0 to
 * 4096; the backend runs at most 64 (and no more than the work has items), and
 * moe_forward_config's line says how many it uses. */
moe_status moe_context_set_threads(moe_context_t *ctx, int threads);
/* The message of the last failed call on ctx ("" if none); ctx NULL: this thread's last. The
 * string stays valid until the next call on the same context (or thread). */
const char *moe_last_error(const moe_context_t *ctx);
const char *moe_backend_name(moe_backend backend); /* "auto", "cpu", "cuda" */

/* ---------------------------------------------------------------------------------------
 * Tensors: a non-owning descriptor.
 * ------------------------------------------------------------------------------------- */
typedef enum moe_dtype {
    MOE_DTYPE_F32 = 0,
    MOE_DTYPE_F16 = 1,
    MOE_DTYPE_BF16 = 2,
    MOE_DTYPE_F64 = 3,
    MOE_DTYPE_E4M3 = 4,  /* FP8 e4m3fn: no inf, one NaN per sign, max 448 */
    MOE_DTYPE_E5M2 = 5,  /* FP8 e5m2: IEEE-like, max 57344 */
    MOE_DTYPE_E2M1 = 6,  /* FP4, two per byte, element 2i in the low nibble */
    MOE_DTYPE_E8M0 = 7,  /* unsigned power-of-two scale, 2^(e-127); 0xFF is NaN */
    MOE_DTYPE_UE4M3 = 8, /* e4m3 with sign 0, NVFP4 block scale */
    MOE_DTYPE_I32 = 9,
    MOE_DTYPE_I64 = 10,
    MOE_DTYPE_U8 = 11,
    MOE_DTYPE_COUNT_
} moe_dtype;

const char *moe_dtype_name(moe_dtype dtype); /* "f32", "bf16", "e4m3", ... */
/* Bits per element (4 for E2M1); 0 for values outside the enum. */
int moe_dtype_bits(moe_dtype dtype);

typedef enum moe_memory { MOE_MEMORY_HOST = 0, MOE_MEMORY_DEVICE = 1 } moe_memory;

#define MOE_MAX_DIMS 4

/* A strided view of memory the caller owns. Strides are in elements. If every stride is 0
 * the tensor is taken as contiguous row-major. data == NULL with ndim == 0 means "absent"
 * for optional arguments. E2M1 tensors must be contiguous (two elements share a byte). */
typedef struct moe_tensor {
    void *data;
    moe_dtype dtype;
    int32_t ndim;
    int64_t shape[MOE_MAX_DIMS];
    int64_t strides[MOE_MAX_DIMS];
    moe_memory memory;
} moe_tensor;

/* Contiguous descriptors; the helpers only fill the struct. */
moe_tensor moe_tensor_1d(void *data, moe_dtype dtype, int64_t n0);
moe_tensor moe_tensor_2d(void *data, moe_dtype dtype, int64_t n0, int64_t n1);
moe_tensor moe_tensor_3d(void *data, moe_dtype dtype, int64_t n0, int64_t n1, int64_t n2);
/* The absent tensor (all zero). */
moe_tensor moe_tensor_none(void);
/* 1 if t describes a tensor (data != NULL or ndim > 0), else 0. */
int moe_tensor_present(const moe_tensor *t);

/* ---------------------------------------------------------------------------------------
 * Number formats. Scalar codecs (round to nearest even, NaN stays NaN; the 8-bit and 4-bit
 * ones saturate to the largest finite value, f16 and bf16 overflow to inf) and block
 * quantisers.
 * ------------------------------------------------------------------------------------- */
float moe_bf16_to_float(uint16_t v);
uint16_t moe_float_to_bf16(float f); /* RNE; overflow to inf as IEEE does; NaN stays NaN */
float moe_f16_to_float(uint16_t v);
uint16_t moe_float_to_f16(float f); /* RNE; overflow to inf as IEEE does */
float moe_e4m3_to_float(uint8_t code);
uint8_t moe_float_to_e4m3(float f); /* saturates to +-448 */
float moe_e5m2_to_float(uint8_t code);
uint8_t moe_float_to_e5m2(float f); /* saturates to +-57344; inf saturates too */
float moe_e2m1_to_float(uint8_t code); /* low 4 bits used */
uint8_t moe_float_to_e2m1(float f);    /* saturates to +-6; NaN -> +6 (E2M1 has no NaN) */
float moe_e8m0_to_float(uint8_t code); /* 2^(code-127); 0xFF -> NaN */
float moe_ue4m3_to_float(uint8_t code); /* e4m3 of code & 0x7F: bit 7 is ignored */
uint8_t moe_float_to_ue4m3(float f);    /* |f|, saturating to 448 */

/* How a matrix is stored: a plain dtype, or FP8/FP4 codes with block scales. Quantised
 * formats take a row-major [rows, cols] matrix; blocks run along cols (the reduction
 * dimension). Scale layouts (row-major arrays):
 *   FP8_TENSOR    e4m3 codes, 1 fp32 scale                        x = q * s
 *   FP8_ROW128    e4m3 codes, fp32 [rows, ceil(cols/128)]         1x128 groups (activations)
 *   FP8_BLOCK128  e4m3 codes, fp32 [ceil(rows/128), ceil(cols/128)] (weights, DeepSeek's
 *                 weight_scale_inv); FP8 scales are amax/448 (1 for an all-zero block)
 *   MXFP8_OCP     e4m3 codes, e8m0 [rows, ceil(cols/32)]; OCP MX v1.0 rule:
 *                 e = floor(log2(amax)) - 8, values saturate (the block max may clip)
 *   MXFP8_TE      same layout; Transformer Engine's rule: e = exponent of amax/448 rounded
 *                 up, so nothing clips
 *   MXFP4         e2m1 codes (2 per byte), e8m0 [rows, ceil(cols/32)], OCP rule (emax 2)
 *   NVFP4         e2m1 codes, ue4m3 [rows, ceil(cols/16)], plus one fp32 tensor scale
 *                 S_enc = 448*6/amax (1 if amax = 0); x = e2m1(q) * s_b / S_enc
 *   NVFP4_2D      as NVFP4 with 16x16 blocks: ue4m3 [ceil(rows/16), ceil(cols/16)]
 * E2M1 formats need an even number of columns. These are the layouts of one matrix as
 * moe_quantize writes it; packed weights (moe_weights_create) use them too, except that a
 * gated W13, stored with gate and up rows interleaved, has its FP8_BLOCK128 / NVFP4_2D
 * blocks over gate and up each on its own grid (as a checkpoint quantises them), never over
 * a mix of the two. */
typedef enum moe_format {
    MOE_FORMAT_F32 = 0,
    MOE_FORMAT_F16 = 1,
    MOE_FORMAT_BF16 = 2,
    MOE_FORMAT_FP8_TENSOR = 3,
    MOE_FORMAT_FP8_ROW128 = 4,
    MOE_FORMAT_FP8_BLOCK128 = 5,
    MOE_FORMAT_MXFP8_OCP = 6,
    MOE_FORMAT_MXFP8_TE = 7,
    MOE_FORMAT_MXFP4 = 8,
    MOE_FORMAT_NVFP4 = 9,
    MOE_FORMAT_NVFP4_2D = 10,
    MOE_FORMAT_COUNT_
} moe_format;

const char *moe_format_name(moe_format format); /* "bf16", "fp8-block128", "nvfp4", ... */
/* Parses a name as moe_format_name writes it (also "fp8" = fp8-block128, "mxfp8" = mxfp8-te). */
moe_status moe_format_from_name(const char *name, moe_format *out);

/* Storage of one [rows, cols] matrix in `format`: bytes of codes (or plain elements), number
 * of block scales and their dtype (F32, E8M0 or UE4M3; 0 scales for plain formats), and
 * whether there is a fp32 tensor scale (NVFP4). */
typedef struct moe_format_layout {
    size_t code_bytes;
    int64_t scale_rows, scale_cols; /* the scale array's shape */
    moe_dtype scale_dtype;
    int has_tensor_scale;
} moe_format_layout;
moe_status moe_format_layout_get(moe_format format, int64_t rows, int64_t cols, moe_format_layout *out);

/* Quantises a row-major fp32 [rows, cols] matrix (row stride ld >= cols, in elements).
 * `scales` receives the block scales as described above; `tensor_scale` the NVFP4 tensor
 * scale (may be NULL for other formats). Plain formats convert (F32, F16, BF16).
 * Rounding: FP8 scales (amax/448) and S_enc are fp32 quotients; each element is then rounded
 * once (RNE, saturating) from the exact x / s, x / 2^e or x * S_enc / s_b, not from an fp32
 * quotient (a kernel that divides in fp32 differs in about one element in a million).
 * Zero blocks: FP8 scale 1, E8M0 code 127 (2^0, both MX rules), UE4M3 code 0 (codes 0); the
 * MXFP8_TE code is 0 (2^-127) wherever amax/448 <= 2^-127; S_enc is clamped to FLT_MAX where
 * 2688/amax overflows. Non-finite inputs: block and tensor amaxes are over the finite values;
 * +-inf saturates to the largest element code; NaN gives the e4m3 NaN code in the FP8 and MXFP8
 * formats (its neighbours unaffected) and, E2M1 having no NaN, the NaN block scale in MXFP4
 * (0xFF) and NVFP4 (0x7F), so that whole block decodes to NaN. */
moe_status moe_quantize(moe_format format, const float *x, int64_t rows, int64_t cols, int64_t ld,
                        void *codes, void *scales, float *tensor_scale);
/* The inverse: decodes to fp32 [rows, cols] with row stride ld: decode(q) * s in fp32; NVFP4
 * as e2m1(q) * fl(s_b / S_enc) (the block's combined scale rounded to fp32 first, within an
 * ulp of e2m1(q) * s_b / S_enc). tensor_scale is S_enc, the encode-side scale (the reciprocal
 * of torchao's per_tensor_scale); INVALID_ARGUMENT unless it is finite and > 0 (NVFP4 only). */
moe_status moe_dequantize(moe_format format, const void *codes, const void *scales, float tensor_scale,
                          int64_t rows, int64_t cols, float *out, int64_t ld);

/* ---------------------------------------------------------------------------------------
 * The layer spec.
 * ------------------------------------------------------------------------------------- */
typedef enum moe_score {
    MOE_SCORE_SOFTMAX = 0,      /* softmax over all E logits */
    MOE_SCORE_SIGMOID = 1,      /* sigmoid(logit) */
    MOE_SCORE_SQRTSOFTPLUS = 2  /* sqrt(softplus(logit)) (DeepSeek-V4) */
} moe_score;
const char *moe_score_name(moe_score score); /* "softmax", "sigmoid", "sqrtsoftplus" */

typedef enum moe_activation {
    MOE_ACT_SWIGLU = 0,         /* silu(gate) * up; with act_limit > 0: gate = min(gate, limit),
                                   up = clamp(up, -limit, limit) first (DeepSeek-V4) */
    MOE_ACT_GEGLU = 1,          /* gelu(gate) * up, exact erf GELU */
    MOE_ACT_GEGLU_TANH = 2,     /* gelu_tanh(gate) * up */
    MOE_ACT_REGLU = 3,          /* relu(gate) * up */
    MOE_ACT_RELU2 = 4,          /* relu(h)^2, not gated: W13 has I rows, not 2I */
    MOE_ACT_SWIGLU_OAI = 5      /* GPT-OSS: g = min(gate, limit), u = clamp(up, -limit, limit),
                                   g * sigmoid(alpha * g) * (u + 1) */
} moe_activation;
const char *moe_activation_name(moe_activation act); /* "swiglu", "geglu", ... */
/* 1 for the GLU activations (gate and up), 0 for RELU2. */
int moe_activation_is_gated(moe_activation act);

typedef struct moe_layer_spec {
    int64_t num_experts;  /* E, routed experts, >= 1 */
    int64_t hidden;       /* H */
    int64_t intermediate; /* I, per routed expert */
    int64_t top_k;        /* k, 1..E and at most 64 (MOE_STATUS_UNSUPPORTED above) */

    /* Routing. Scores s = score(logits). Selection uses s + correction_bias when the spec
     * says so (the bias never enters the weights). With n_group > 0, experts form n_group
     * equal groups; a group's score is the sum of its two best selection scores when a
     * correction bias is used, else its best; the topk_group best groups stay eligible.
     * Ties go to the lower expert index. Weights are the unbiased scores of the chosen
     * experts, divided by their sum when renormalize, then times routed_scale. */
    moe_score score;
    int32_t use_correction_bias;
    int64_t n_group;    /* 0 or 1: no grouping */
    int64_t topk_group; /* groups kept, 1..n_group */
    int32_t renormalize;
    float routed_scale; /* 1 for none */
    int32_t router_has_bias; /* router logits = x W_r^T + b_r (GPT-OSS) */
    /* Multiply the expert *input* by the routing weight instead of its output (Llama-4;
     * vLLM's apply_router_weight_on_input). Needs top_k == 1. */
    int32_t weight_on_input;

    /* Expert MLP. */
    moe_activation activation;
    float act_alpha; /* SWIGLU_OAI alpha (1.702 for GPT-OSS) */
    float act_limit; /* SWIGLU_OAI / SWIGLU clamp limit; 0 = none (SWIGLU) */
    int32_t expert_has_bias; /* biases on W13 rows [E, 2I] and W2 rows [E, H] */

    /* Shared experts: one always-on MLP of width shared_intermediate (DeepSeek: the
     * n_shared_experts experts fused, width n_shared * I), weight 1, same activation and
     * bias setting as the routed experts. With shared_gate, its output is scaled per token
     * by sigmoid(x . w_sg) (Qwen2/Qwen3-Next's shared_expert_gate). */
    int64_t num_shared_experts; /* as the config says; 0 = none */
    int64_t shared_intermediate;
    int32_t shared_gate;
} moe_layer_spec;

/* Defaults: softmax, no bias, no groups, no renormalisation, routed_scale 1, SwiGLU with no
 * clamp, act_alpha 1.702, no shared experts. */
void moe_layer_spec_init(moe_layer_spec *spec, int64_t num_experts, int64_t hidden, int64_t intermediate,
                         int64_t top_k);
/* Checks every field; the message names the first bad one. */
moe_status moe_layer_spec_validate(moe_context_t *ctx, const moe_layer_spec *spec);

/* ---------------------------------------------------------------------------------------
 * Weights: imported once from the caller's tensors (any checkpoint layout, any float dtype,
 * or FP8 with 128x128 block scales), packed for the backend in a chosen format.
 * ------------------------------------------------------------------------------------- */
typedef enum moe_gate_up_layout {
    MOE_LAYOUT_SEPARATE = 0,   /* gate [E, I, H] and up [E, I, H] (per-expert checkpoints) */
    MOE_LAYOUT_CONCAT = 1,     /* gate_up [E, 2I, H]: rows 0..I-1 gate, I..2I-1 up (vLLM w1) */
    MOE_LAYOUT_INTERLEAVED = 2 /* gate_up [E, 2I, H]: even rows gate, odd rows up (GPT-OSS;
                                  its checkpoint's [E, H, 2I] is this as a strided view) */
} moe_gate_up_layout;

/* What the caller hands over; every tensor is read during moe_weights_create only.
 * Tensors may be host or device memory, any strides, dtype F32/F16/BF16 (or E4M3 with
 * the matching *_scale tensor [E, ceil(rows/128), ceil(cols/128)] fp32 of weight_scale_inv
 * values). With RELU2 (not gated) `gate`/`gate_up` is [E, I, H] and `up` is absent. */
typedef struct moe_weights_desc {
    moe_gate_up_layout layout;
    moe_tensor gate, up;         /* SEPARATE */
    moe_tensor gate_up;          /* CONCAT / INTERLEAVED */
    moe_tensor down;             /* [E, H, I] */
    moe_tensor gate_scale, up_scale, gate_up_scale, down_scale; /* FP8 inputs only */
    moe_tensor gate_bias, up_bias; /* SEPARATE with bias: [E, I] each */
    moe_tensor gate_up_bias;       /* CONCAT / INTERLEAVED with bias: [E, 2I], same layout */
    moe_tensor down_bias;          /* [E, H] */
    moe_tensor router;             /* [E, H]; needed only when forward computes logits */
    moe_tensor router_bias;        /* [E] when spec.router_has_bias */
    moe_tensor correction_bias;    /* [E] when spec.use_correction_bias */
    /* Shared expert (when spec.num_shared_experts > 0): same layout rules with Is rows. */
    moe_tensor shared_gate, shared_up, shared_gate_up, shared_down; /* [Is,H],[Is,H],[2Is,H],[H,Is] */
    moe_tensor shared_gate_up_bias, shared_gate_bias, shared_up_bias, shared_down_bias;
    moe_tensor shared_gate_weight; /* [H] (or [1, H]) when spec.shared_gate */
} moe_weights_desc;

typedef struct moe_weights moe_weights_t;

/* Copies, re-lays out (gate and up interleaved) and quantises the expert weights into
 * `format` for the context's backend; allocates host (CPU) or device (CUDA) memory that
 * moe_weights_free releases. Router, biases and shared-gate weights stay fp32. Gate and up
 * are quantised each on its own block grid. E4M3 weights with their 128x128 scales packed
 * as FP8_BLOCK128 keep their codes and scales bit for bit (gate, up, down, RELU2's W1, and
 * CONCAT's gate_up when I is a multiple of 128); packed as FP8_TENSOR, an expert's matrix whose
 * block scales are all one value (a per-tensor checkpoint's scale broadcast over the blocks; for
 * W13 the same for gate and up) keeps its codes and that scale. Where the blocks cannot match
 * (INTERLEAVED, CONCAT with other I, scales that vary), and for every other format, they are
 * decoded and quantised anew. */
moe_status moe_weights_create(moe_context_t *ctx, const moe_layer_spec *spec, const moe_weights_desc *desc,
                              moe_format format, moe_weights_t **out);
void moe_weights_free(moe_weights_t *w);
const moe_layer_spec *moe_weights_spec(const moe_weights_t *w);
moe_format moe_weights_format(const moe_weights_t *w);
/* Bytes the packed weights occupy. */
size_t moe_weights_bytes(const moe_weights_t *w);
/* Writes expert e's weights back in the original orientation as fp32 (dequantised):
 * gate [I, H] and up [I, H] (up NULL for RELU2), down [H, I]; e = -1 for the shared expert
 * (Is rows). Host pointers. */
moe_status moe_weights_unpack(moe_context_t *ctx, const moe_weights_t *w, int64_t expert, float *gate, float *up,
                              float *down);

/* ---------------------------------------------------------------------------------------
 * Forward.
 * ------------------------------------------------------------------------------------- */
typedef struct moe_forward_args {
    moe_tensor x; /* [T, H] F32/F16/BF16 */
    moe_tensor y; /* [T, H] same dtype family (F32/F16/BF16), written whole */
    /* Routing input, one of:
     *  - topk_ids [T, k] I32 and topk_weights [T, k] F32: routing done by the caller
     *    (vLLM's fused_experts); used as given. An id of -1 is no expert: the slot is left out
     *    of the plan and adds nothing (expert parallelism: another rank's expert). Any other
     *    id outside 0..E-1 is an error on host ids; device ids are not read back (no sync),
     *    and the CUDA backend leaves every id outside 0..E-1 out as it does -1.
     *  - router_logits [T, E] F32: scored and selected here (fused_moe).
     *  - neither: logits = x W_r^T (+ b_r) from the router weights. */
    moe_tensor topk_ids, topk_weights;
    moe_tensor router_logits;
    /* Optional outputs of the routing step: [T, k] I32 and F32. */
    moe_tensor out_topk_ids, out_topk_weights;
    /* Activation quantisation for w8a8: F32 (none), FP8_TENSOR (one dynamic scale for x and
     * one for the intermediate), or FP8_ROW128 (dynamic 1x128 groups). The intermediate is
     * quantised the same way before the down projection. */
    moe_format act_format;
    void *workspace; /* moe_forward_workspace_size bytes, host or device per backend */
    size_t workspace_size;
    void *stream; /* cudaStream_t for CUDA; ignored by the CPU backend */
} moe_forward_args;

/* Initialises args to "nothing set" (act_format F32). */
void moe_forward_args_init(moe_forward_args *args);
/* The workspace moe_forward needs for num_tokens tokens. It never shrinks as num_tokens grows
 * (same weights, act_format and environment), so a workspace sized for the largest T you run also
 * runs every smaller T. */
moe_status moe_forward_workspace_size(moe_context_t *ctx, const moe_weights_t *w, int64_t num_tokens,
                                      moe_format act_format, size_t *bytes);
/* y = MoE(x). Sync-free on CUDA: nothing is read back to the host. */
moe_status moe_forward(moe_context_t *ctx, const moe_weights_t *w, const moe_forward_args *args);

/* Describes, in one NUL-terminated line written to buf, what moe_forward would run for
 * num_tokens tokens on these weights with this act_format: the backend; on CUDA the grouped
 * GEMM path (v1 mma.sync, 64-row plan blocks, or Hopper TMA+wgmma: 128-row tiles, or at decode
 * the kernel with the operands swapped on 32-row blocks), its tile sizes and why it was chosen
 * (the rule T*k > 16*E, or the MOEFUSE_GEMM override, named when set), the plan block, how the
 * shared expert runs (fused as expert E, or separate) and the workspace bytes; on the CPU the
 * thread count and the reference path. A pure function of its arguments and of MOEFUSE_GEMM,
 * MOEFUSE_FP8_DECODE, MOEFUSE_BF16_DECODE and the Hopper A/B switches MOEFUSE_HOPPER_A (=gather or
 * =permute: how GEMM1 gets its rows, else a rule of rows per expert and I), MOEFUSE_HOPPER_SCHEDULE
 * (tile order), MOEFUSE_HOPPER_RASTER (=blocks or =expert: tiles in the grouped raster over all row
 * blocks, or expert by expert; bf16 takes the latter by default, FP8 where H * I >= 7 MiB),
 * MOEFUSE_HOPPER_EPI (=staged:
 * GEMM1's staged epilogue instead of the activation from the accumulators; =tma: that activation
 * with its A2 tiles stored by TMA wherever it can, not only where H >= 7168; =first: never by TMA),
 * MOEFUSE_HOPPER_EPI2
 * (=bulk or =staged: bf16 GEMM2's rows by bulk copies, 3 stages, at every K or at none, instead of
 * where K <= 2048), MOEFUSE_HOPPER_SKIP_UP (=1: bf16 GEMM1 also skips the MMAs of row blocks whose
 * second half is all padding, as GEMM2 does), MOEFUSE_HOPPER_BN
 * (=256: no 240-wide tiles), MOEFUSE_HOPPER_FP8_BN (=128: the FP8 grouped GEMMs' 128 x 128 tiles
 * with a scale ring instead of 128 x 192 with the scales in the tile stage), MOEFUSE_HOPPER_FP8_EPI
 * (=bulk or =staged: the 128 x 192 tiles' bulk-copy epilogue at every K or at none, instead of
 * where K <= 2048) and MOEFUSE_HOPPER_FP8_X (=permute: x quantised by token, then its codes
 * permuted into plan order, instead of quantised straight into plan order); nothing is printed or
 * launched. (MOEFUSE_FP8_QUANT=scalar, the scalar form of the 1x128 activation quantiser instead of
 * the vector one, is an A/B switch that the line does not name.)
 * Errors: NULL ctx/w/buf (NULL_POINTER); buf_size too small for the line (INVALID_ARGUMENT, the
 * message gives the size needed; MOE_FORWARD_CONFIG_MAX always suffices); num_tokens < 0 (INVALID_ARGUMENT) or
 * too large (OVERFLOW), as moe_forward_workspace_size. */
#define MOE_FORWARD_CONFIG_MAX 1024
moe_status moe_forward_config(moe_context_t *ctx, const moe_weights_t *w, int64_t num_tokens, moe_format act_format,
                              char *buf, size_t buf_size);

/* ---------------------------------------------------------------------------------------
 * The pieces of the forward, exposed so that each can be checked on its own.
 * ------------------------------------------------------------------------------------- */
/* Scores and selects: logits [T, E] fp32 -> ids [T, k] and weights [T, k], slots ordered by
 * descending selection score. correction_bias [E] or NULL (needed iff the spec uses it).
 * Always runs on the host, on host pointers, whatever the context's backend. Non-finite logits
 * are not refused: the ids stay valid, and the weights are what the arithmetic gives (a +inf
 * logit under softmax makes that token's weights NaN, as torch.softmax does). */
moe_status moe_route(moe_context_t *ctx, const moe_layer_spec *spec, const float *logits, int64_t num_tokens,
                     const float *correction_bias, int32_t *topk_ids, float *topk_weights);

/* The dispatch plan: rows of the grouped GEMMs, sorted by expert, each expert's rows padded
 * to a multiple of `block`. A row's id is token * k + slot; padding rows hold T * k. */
typedef struct moe_dispatch_plan {
    int64_t num_tokens, top_k, num_experts, block;
    int64_t max_rows;   /* host-known bound: T*k + E*(block-1) */
    int64_t max_blocks; /* ceil(max_rows / block) */
    int64_t *expert_counts;  /* [E] rows routed to each expert */
    int64_t *expert_offsets; /* [E+1] block-aligned start row of each expert; [E] = total */
    int32_t *sorted_ids;     /* [max_rows]; rows past the total also hold T*k */
    int32_t *block_expert;   /* [max_blocks]; -1 for blocks past the total */
} moe_dispatch_plan;

/* Bounds for the plan's arrays. MOE_STATUS_OVERFLOW when T*k does not fit in int32. */
moe_status moe_dispatch_plan_bounds(int64_t num_tokens, int64_t top_k, int64_t num_experts, int64_t block,
                                    int64_t *max_rows, int64_t *max_blocks);
/* Fills a plan whose arrays the caller allocated to the bounds; within an expert, rows keep
 * ascending id order (so the plan is deterministic). A topk_ids entry of -1 (no expert) has no
 * row; any other id outside 0..E-1 is an error. */
moe_status moe_dispatch_plan_build(moe_context_t *ctx, const int32_t *topk_ids, int64_t num_tokens, int64_t top_k,
                                   int64_t num_experts, int64_t block, moe_dispatch_plan *plan);

/* ---------------------------------------------------------------------------------------
 * Backward (training). Declared so the API has its shape; not implemented in this version:
 * moe_backward returns MOE_STATUS_UNSUPPORTED.
 * ------------------------------------------------------------------------------------- */
typedef struct moe_backward_args {
    moe_tensor x, dy;                          /* [T, H] */
    moe_tensor topk_ids, topk_weights;         /* the forward's routing */
    moe_tensor router_logits;                  /* when routing was done inside */
    moe_tensor dx;                             /* [T, H] */
    moe_tensor d_gate_up, d_down;              /* [E, 2I, H], [E, H, I] fp32, original layout */
    moe_tensor d_topk_weights, d_router_logits; /* [T, k], [T, E] */
    moe_tensor d_router;                       /* [E, H] */
    void *workspace;
    size_t workspace_size;
    void *stream;
} moe_backward_args;
moe_status moe_backward(moe_context_t *ctx, const moe_weights_t *w, const moe_backward_args *args);

/* ---------------------------------------------------------------------------------------
 * Model configs: Hugging Face config.json, and built-in presets.
 * ------------------------------------------------------------------------------------- */
#define MOE_MAX_LAYERS 1024
#define MOE_NAME_MAX 64

typedef struct moe_model_config {
    char name[MOE_NAME_MAX];       /* preset name, or the file's model_type */
    char model_type[MOE_NAME_MAX]; /* config.json's model_type ("" if absent) */
    moe_layer_spec layer;          /* the MoE layer (E = 1, top-1 for a dense model) */
    int32_t is_moe;                /* 0 for a dense model */
    int64_t num_layers;
    int64_t num_moe_layers;
    uint8_t layer_is_moe[MOE_MAX_LAYERS]; /* per layer, first num_layers entries */
    int64_t dense_intermediate; /* intermediate_size of the dense MLP layers (0 if none) */
    /* Attention and embeddings, for the shape profiler. head_dim is num_heads * head_dim's
     * factor (not hidden / heads where the config says otherwise). */
    int64_t num_heads, num_kv_heads, head_dim, vocab_size;
    int32_t tie_word_embeddings;
    /* Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2); all 0 otherwise. */
    int64_t q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    moe_dtype torch_dtype; /* checkpoint dtype; BF16 if unsaid */
    /* Attention span, for the decode analysis: the layers with layer_is_windowed[l] = 1 attend at
     * most attention_window past tokens (a sliding window: GPT-OSS, Mistral, Qwen's
     * use_sliding_window; or a chunk: Llama-4's chunked layers). 0 and all zero when every layer
     * attends the whole context. Read from layer_types ("sliding_attention", "chunked_attention";
     * other types count as full), sliding_window, attention_chunk_size, no_rope_layers,
     * use_sliding_window and max_window_layers, with each family's defaults. */
    int64_t attention_window;
    uint8_t layer_is_windowed[MOE_MAX_LAYERS];
} moe_model_config;

/* Parses config.json text (len bytes, need not be NUL-terminated); fields it does not need
 * are ignored. MOE_STATUS_PARSE_ERROR for malformed JSON, MOE_STATUS_INVALID_ARGUMENT for a
 * config without the needed fields (named in the message), MOE_STATUS_UNSUPPORTED for a MoE
 * family whose routing or layers the reader does not model (Phi-3.5-MoE, Jamba, Nemotron-H,
 * ERNIE-4.5, DBRX, Hunyuan, Ling, Granite's shared expert, Kimi-Linear, JetMoE, LFM2-MoE,
 * Mistral-4's grouped routing and others: by model_type or by a key of theirs; config.c's table
 * names each with the reason) rather than a layer read with the generic defaults. Checked end to
 * end against transformers' own MoE blocks by tools/hf_parity.py. */
moe_status moe_config_parse(moe_context_t *ctx, const char *json, size_t len, moe_model_config *out);
/* Reads a file: a config.json, or a directory holding one. */
moe_status moe_config_load(moe_context_t *ctx, const char *path, moe_model_config *out);
/* Built-in presets by name ("deepseek-v3", "qwen3-30b-a3b", ...). */
moe_status moe_config_preset(moe_context_t *ctx, const char *name, moe_model_config *out);
int moe_preset_count(void);
const char *moe_preset_name(int index); /* NULL past the end */

/* ---------------------------------------------------------------------------------------
 * Checkpoints: safetensors, one file or sharded with model.safetensors.index.json.
 * ------------------------------------------------------------------------------------- */
typedef struct moe_checkpoint moe_checkpoint_t;

/* `path` is a .safetensors file, an index .json, or a directory holding either (model.safetensors
 * first, then model.safetensors.index.json, as transformers loads them; else its only
 * *.safetensors file). Reads and
 * checks the headers only, as the safetensors reference reader does (UTF-8 JSON; tensors
 * covering the data exactly, no holes; sizes matching dtype and shape): MOE_STATUS_PARSE_ERROR
 * naming the file and tensor otherwise. Tensor data is read on demand. */
moe_status moe_checkpoint_open(moe_context_t *ctx, const char *path, moe_checkpoint_t **out);
void moe_checkpoint_close(moe_checkpoint_t *ckpt);

typedef struct moe_tensor_info {
    moe_dtype dtype;
    int32_t ndim;
    int64_t shape[MOE_MAX_DIMS];
    size_t bytes;
} moe_tensor_info;

int64_t moe_checkpoint_tensor_count(const moe_checkpoint_t *ckpt);
const char *moe_checkpoint_tensor_name(const moe_checkpoint_t *ckpt, int64_t index); /* NULL past the end */
/* MOE_STATUS_NOT_FOUND when the checkpoint has no tensor of that name. MOE_STATUS_UNSUPPORTED,
 * naming the dtype or rank, for a tensor of a dtype with no moe_dtype (BOOL, I8, I16, U16, U32,
 * U64, C64, F4, F6_E2M3, F6_E3M2, F8_E4M3FNUZ, F8_E5M2FNUZ) or of more than MOE_MAX_DIMS
 * dimensions (also from moe_checkpoint_read); such tensors are listed and the rest reads. */
moe_status moe_checkpoint_tensor_info(moe_context_t *ctx, const moe_checkpoint_t *ckpt, const char *name,
                                      moe_tensor_info *info);
/* Copies the raw little-endian bytes of a tensor into dst (dst_bytes >= info.bytes). */
moe_status moe_checkpoint_read(moe_context_t *ctx, const moe_checkpoint_t *ckpt, const char *name, void *dst,
                               size_t dst_bytes);

/* Loads layer `layer`'s MoE weights and packs them as moe_weights_create does. The layer's
 * root R is model.layers.L., model.language_model.layers.L. (Qwen3-VL-MoE, GLM-4.5V),
 * language_model.model.layers.L. (Llama-4, Kimi-K2.5, Mistral-3 Hub files) or
 * language_model.model.blocks.L. (Kimi-K2.5 as transformers 5 saves it), whichever holds its
 * experts (more than one: MOE_STATUS_INVALID_ARGUMENT). Understands, under R:
 *   mlp.experts.N.{gate,up,down}_proj.weight        (+ .weight_scale_inv for FP8: F32
 *       [ceil(rows/128), ceil(cols/128)], x = q * s, the last block partial as DeepSeek's
 *       weight_dequant reads it)
 *   block_sparse_moe.experts.N.{w1,w3,w2}.weight    (Mixtral)
 *   {mlp,feed_forward,block_sparse_moe}.experts.{gate_up_proj,down_proj}[_bias], or
 *   block_sparse_moe.{input,output}_linear.weight   (Granite): [E,2I,H] and [E,H,I] (out x in,
 *       transformers 5's experts) or [E,H,2I] and [E,I,H] (in x out: GPT-OSS, Llama-4,
 *       Qwen3-VL-MoE's Hub files), told by shape (a square one by the other; ungated with
 *       H == I: MOE_STATUS_UNSUPPORTED); gate rows then up, except in x out with
 *       MOE_ACT_SWIGLU_OAI (GPT-OSS: interleaved); or the MXFP4 release's _blocks
 *       [E, rows, cols/32, 16] and _scales [E, rows, cols/32] (out x in, gate_up rows
 *       interleaved; element 2j in the low nibble of byte j, scale 2^(s - 127)), decoded to
 *       fp32 bit for bit as transformers' convert_moe_packed_tensors does
 *   <block>.{gate,router,router.layer}.weight [E,H] (+ bias; the correction bias as
 *       gate.e_score_correction_bias, mlp.e_score_correction_bias,
 *       mlp.experts.e_score_correction_bias (Laguna) or gate.expert_bias)
 *   <block>.shared_expert(s).{gate,up,down}_proj.weight, shared_expert_gate.weight
 * A tensor the spec does not ask for (biases, correction bias, shared expert) is refused.
 * MOE_STATUS_NOT_FOUND names the first tensor that is missing. */
moe_status moe_weights_load(moe_context_t *ctx, const moe_checkpoint_t *ckpt, const moe_layer_spec *spec,
                            int64_t layer, moe_format format, moe_weights_t **out);

#ifdef __cplusplus
}
#endif
#endif /* MOEFUSE_H */
