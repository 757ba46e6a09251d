/*
 * moefuse_analysis.h — what a model's shapes cost: every weight GEMM of one step (the shape
 * list), a roofline with tile and wave quantisation, MoE routing statistics, and a co-design
 * advisor. Pure arithmetic on a moe_model_config: no GPU, no printing.
 *
 * Conventions (they hold for every function below):
 *  - GEMMs are written M x K x N as in Transformer Engine's profiling guide. For a linear layer
 *    in -> out over T tokens:  Fprop  M = T,  K = in,  N = out
 *                              Dgrad  M = T,  K = out, N = in
 *                              Wgrad  M = in, K = T,   N = out
 *    FLOPs of one GEMM are 2·M·K·N.
 *  - Only weight GEMMs are listed. The attention score and value matmuls (Q·Kᵀ, P·V) and the
 *    softmax are not weight GEMMs and are left out.
 *  - Routed experts under uniform routing: each token picks k distinct experts of E, so the
 *    tokens n_e of one expert follow Binomial(T, k/E); a routed-expert row carries the expected
 *    count T·k/E as its token dimension (fractional in general) and one instance per expert.
 *  - Parallelism (shapes are per GPU; batch and seq describe one model replica):
 *      tp splits attention heads (q and o; kv heads too when kv_heads >= tp, else each rank
 *      keeps one replicated kv head, so tp must then be a multiple of kv_heads), the dense,
 *      shared and routed-expert intermediates, and the vocabulary of the LM head (ceil(V/tp)).
 *      MLA's down projections (q_a, kv_a) and the router are replicated.
 *      ep splits the routed experts: each rank holds E/ep of them; every expert still receives
 *      T·k/E tokens expected.
 *  - Bytes assume each operand is read once and the output written once: bf16 operands and
 *    outputs (2 bytes), or fp8 operands (1 byte) with bf16 outputs. For routed experts only
 *    the experts expected to be touched, E·(1-(1-k/E)^T), contribute weight bytes.
 */
#ifndef MOEFUSE_ANALYSIS_H
#define MOEFUSE_ANALYSIS_H

#include "moefuse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * The shape list.
 * ------------------------------------------------------------------------------------- */
typedef enum moe_step_mode {
    MOE_STEP_TRAIN = 0,   /* T = batch·seq tokens, Fprop + Dgrad + Wgrad */
    MOE_STEP_PREFILL = 1, /* T = batch·seq tokens, Fprop; LM head on the last token of each sequence */
    MOE_STEP_DECODE = 2   /* T = batch tokens (one new token per sequence), Fprop */
} moe_step_mode;
const char *moe_step_mode_name(moe_step_mode mode); /* "train", "prefill", "decode" */

typedef enum moe_gemm_kind {
    MOE_GEMM_ATTN_Q = 0, /* q projection (MLA: q_a and q_b) */
    MOE_GEMM_ATTN_KV,    /* k and v projections together (MLA: kv_a and kv_b) */
    MOE_GEMM_ATTN_O,
    MOE_GEMM_ROUTER,     /* router logits (and Qwen's shared-expert gate, H -> 1) */
    MOE_GEMM_EXPERT_GATE_UP,
    MOE_GEMM_EXPERT_DOWN,
    MOE_GEMM_SHARED_GATE_UP,
    MOE_GEMM_SHARED_DOWN,
    MOE_GEMM_DENSE_GATE_UP,
    MOE_GEMM_DENSE_DOWN,
    MOE_GEMM_LM_HEAD,
    MOE_GEMM_KIND_COUNT_
} moe_gemm_kind;
const char *moe_gemm_kind_name(moe_gemm_kind kind); /* "attn_q", ..., "lm_head" */

typedef enum moe_gemm_pass { MOE_PASS_FPROP = 0, MOE_PASS_DGRAD = 1, MOE_PASS_WGRAD = 2, MOE_PASS_COUNT_ } moe_gemm_pass;
const char *moe_gemm_pass_name(moe_gemm_pass pass); /* "fprop", "dgrad", "wgrad" */

typedef struct moe_shape_options {
    int64_t batch;   /* sequences, >= 1 */
    int64_t seq;     /* tokens per sequence, >= 1 (decode: the default context) */
    moe_step_mode mode;
    int64_t context; /* decode: tokens in the KV cache per sequence; 0 = seq. Used for the KV
                        traffic of the roofline and the advisor; no weight GEMM depends on it */
    int64_t tp, ep;  /* tensor and expert parallel degrees, >= 1 */
    moe_dtype dtype; /* BF16 (default) or E4M3 (fp8 operands, bf16 outputs) */
} moe_shape_options;

/* batch 1, seq 1, train, context 0, tp 1, ep 1, bf16. */
void moe_shape_options_init(moe_shape_options *opt);
/* Sets one option from text, by the name the CLI uses without its dashes: "batch", "seq",
 * "mode" (train|prefill|decode), "context", "tp", "ep", "dtype" (bf16|fp8). The message names
 * the option and the value on failure. */
moe_status moe_shape_options_set(moe_context_t *ctx, moe_shape_options *opt, const char *name, const char *value);

#define MOE_GEMM_NAME_MAX 32
#define MOE_NOTE_MAX 8
#define MOE_NOTE_LEN 240

/* One line of the list: the same GEMM over a set of layers that is an arithmetic
 * progression first, first+step, ..., last (layer_first = -1 for the LM head). */
typedef struct moe_gemm_row {
    int64_t layer_first, layer_last, layer_step, layer_count;
    char name[MOE_GEMM_NAME_MAX]; /* "q_proj", "kv_b_proj", "experts.gate_up", "lm_head", ... */
    moe_gemm_kind kind;
    moe_gemm_pass pass;
    double m, k, n;     /* TE convention; routed experts' token dimension is the expected T·k/E */
    int64_t count;      /* instances per step (layers, times E/ep for routed experts) */
    double touched;     /* routed experts: expected instances with at least one token; else count */
    double flops;       /* 2·m·k·n·count */
    double bytes;       /* operand traffic of all instances (see the header's conventions) */
    double intensity;   /* flops / bytes */
} moe_gemm_row;

typedef struct moe_shape_list {
    moe_model_config config;
    moe_shape_options options; /* as given, context resolved */
    int64_t tokens;            /* T */
    int32_t is_mla;
    double tokens_per_expert;  /* T·k/E (0 without routed experts) */
    double experts_touched;    /* per MoE layer, all E: E·(1-(1-k/E)^T) */
    int64_t num_rows;
    moe_gemm_row *rows;
    double total_flops, total_bytes;
    double pass_flops[MOE_PASS_COUNT_], pass_bytes[MOE_PASS_COUNT_];
    int32_t num_notes; /* limitations and rules worth saying next to this model's list */
    char notes[MOE_NOTE_MAX][MOE_NOTE_LEN];
} moe_shape_list;

/* Builds the list of every weight GEMM of one step of the whole model. Allocates the list;
 * moe_shape_list_free releases it. MOE_STATUS_INVALID_ARGUMENT names a config field that is
 * missing or an option that does not fit the model (e.g. tp not dividing the heads). */
moe_status moe_shape_list_create(moe_context_t *ctx, const moe_model_config *cfg, const moe_shape_options *opt,
                                 moe_shape_list **out);
void moe_shape_list_free(moe_shape_list *list);

/* ---------------------------------------------------------------------------------------
 * Routing statistics (uniform routing, n_e ~ Binomial(T, k/E), exact sums over the pmf).
 * ------------------------------------------------------------------------------------- */
typedef struct moe_routing_stats {
    double mean;              /* T·k/E */
    double experts_touched;   /* E·(1-(1-k/E)^T) */
    double expected_max_load; /* E[max_e n_e], exact for independent Binomial counts; the real
                                 counts (fixed total) are negatively associated, which makes the
                                 true expectation slightly larger: a lower bound, about 3% low at
                                 T=64 E=16 k=1, 0.3% at T=4096 E=256 k=8 (Monte Carlo) */
    double expected_blocks;   /* E[Σ_e ⌈n_e/block⌉] */
    double padding_waste;     /* 1 - T·k / (block · expected_blocks); 0 when T = 0 */
} moe_routing_stats;
moe_status moe_routing_stats_compute(moe_context_t *ctx, int64_t tokens, int64_t num_experts, int64_t top_k,
                                     int64_t block, moe_routing_stats *out);
/* E[⌈X/block⌉] for X ~ Binomial(n, p), 0 <= p <= 1, n <= MOE_BINOMIAL_N_MAX (2^40: the
 * analysis' 2^32 tokens times k); NaN for a larger n or a NaN p, 0 for n <= 0 or block <= 0. */
#define MOE_BINOMIAL_N_MAX (INT64_C(1) << 40)
double moe_binomial_expected_ceil(int64_t n, double p, int64_t block);

/* ---------------------------------------------------------------------------------------
 * GPU ceilings.
 * ------------------------------------------------------------------------------------- */
typedef struct moe_gpu_spec {
    char name[MOE_NAME_MAX];
    char source[128];    /* where the numbers come from: "measured (PERF.md)", "datasheet", a path */
    double bf16_flops;   /* dense FLOP/s */
    double fp8_flops;
    double read_bw;      /* bytes/s of streaming reads from HBM */
    int64_t sms;
    int64_t ctas_per_sm; /* resident GEMM CTAs per SM (1 for Hopper's big-tile kernels) */
    double l2_bytes;
    double launch_s;     /* fixed cost per GEMM call (launch, first tile's latency), added to each (0 if unknown) */
    double epilogue_exposed; /* 0..1: share of each wave's output store (its tiles x tm·tn x 2 B, or 4 B
                              * for split-K partials, at read_bw) not hidden behind the mainloop and
                              * added to the wave's time (0: perfect overlap, the plain model) */
    /* Sustained FLOP/s of moefuse's own kernels (the routed-expert grouped launches, and the
     * Hopper dense engine of moe_dense_launch_time), per kernel family (moe_kernel_family); 0: the
     * dtype's peak above. bf16_flops and fp8_flops are the libraries' (cuBLAS / cuBLASLt) rates
     * and stay the plain GEMMs' ceilings. */
    double hopper_bf16_flops; /* MOE_KERNEL_HOPPER_BF16 */
    double hopper_fp8_flops;  /* MOE_KERNEL_HOPPER_FP8 */
    double v1_flops;          /* MOE_KERNEL_V1 (bf16, and FP8 whose e4m3 MMAs run as f16 ones) */
    /* 0..1: the share of the board's power that streaming at read_bw takes from the tensor cores,
     * whose dtype peak above (bf16_flops, fp8_flops) is taken to be their rate at the power limit.
     * A launch then takes at least flops / peak + stream_power_share x bytes / read_bw: balanced
     * launches, which keep both the weight stream and the MMAs busy, slow down as the clock drops.
     * 0: no such bound (the plain roofline). */
    double stream_power_share;
} moe_gpu_spec;

/* Built-in: "h200" (measured on the project's H200: 751 / 1335 TFLOP/s, 4.19 TB/s), "h100"
 * and "b200" (vendor datasheet values, dense). */
moe_status moe_gpu_builtin(moe_context_t *ctx, const char *name, moe_gpu_spec *out);
int moe_gpu_builtin_count(void);
const char *moe_gpu_builtin_name(int index); /* NULL past the end */
/* A JSON object with keys (numbers): "bf16_tflops", "fp8_tflops", "read_tbps", "sms" (all
 * required), "l2_mb", "ctas_per_sm" (default 1), "launch_us" (default 0), "epilogue_exposed"
 * (0..1, default 0), "hopper_bf16_tflops", "hopper_fp8_tflops", "v1_tflops" (moefuse's kernel
 * families; default 0 = the dtype's peak); "name" (string, default the file name). */
moe_status moe_gpu_parse(moe_context_t *ctx, const char *json, size_t len, moe_gpu_spec *out);
moe_status moe_gpu_load(moe_context_t *ctx, const char *path, moe_gpu_spec *out);

/* ---------------------------------------------------------------------------------------
 * Roofline with tile and wave quantisation.
 *
 * For each tile tm x tn of the menu: tiles = ⌈M/tm⌉·⌈N/tn⌉ per launch, waves = ⌈tiles /
 * (SMs·ctas_per_sm)⌉, compute time = waves · 2·tm·tn·⌈K/tk⌉·tk / (peak / (SMs·ctas_per_sm)),
 * memory time = bytes / read_bw, time = max of the two (+ launch_s); the best tile wins. Plain
 * GEMMs may also split K over 2..32 CTAs per output tile (fp32 partials cost 2·split·M·N·4
 * bytes more), as decode-sized GEMMs need to fill the GPU, or run stream-K (all tiles' k-steps
 * dealt out evenly to the CTAs: no wave quantisation; a tile shared by several CTAs costs its
 * owner a read of each peer's fp32 partial).
 * Routed experts run as one grouped launch per layer: the row tiles are E[Σ_e ⌈n_e/tm⌉]
 * (Binomial), and Wgrad's reduction length is E[⌈n_e/tk⌉·tk] per touched expert. Routed Fprop
 * launches are moefuse's grouped kernels: the one tile of the kernel family the forward picks
 * (moe_grouped_kernel_select), its resident CTAs per SM, its plan block (= the tile's rows)
 * and its sustained rate (moe_gpu_spec's hopper_bf16_flops, ...). Routed Dgrad / Wgrad (moefuse
 * has no grouped backward kernel) and all other rows use the library menu and peaks.
 * ------------------------------------------------------------------------------------- */
#define MOE_TILE_MENU_MAX 8
typedef struct moe_tile { int32_t m, n; } moe_tile;
/* The tile menu assumed for a library's (cuBLAS-like) Hopper kernels: 128x128, 128x256, 256x128
 * (k step 64 for bf16, 128 for fp8). Returns the count written (<= MOE_TILE_MENU_MAX). */
int moe_tile_menu(moe_dtype dtype, moe_tile *tiles, int32_t *tile_k);

/* Which kernel a row's launch is modelled as. */
typedef enum moe_kernel_family {
    MOE_KERNEL_LIBRARY = 0,     /* a library kernel: the tile menu, split-K / stream-K, the dtype's peak */
    MOE_KERNEL_HOPPER_BF16 = 1, /* moefuse's wgmma kernels, 1 CTA per SM: grouped 128 x 256 x 64; the dense
                                 * engine 128 x 256 or 128 x 128 (x 64) */
    MOE_KERNEL_HOPPER_FP8 = 2,  /* moefuse's FP8 wgmma kernels (grouped, dense engine), 128 x 128 x 128, 1 CTA per SM */
    MOE_KERNEL_V1 = 3,          /* moefuse's grouped mma.sync kernel, 64 x 128 x 64, 2 CTAs per SM */
    MOE_KERNEL_HOPPER_FP8_DECODE = 4, /* moefuse's FP8 decode kernel with the operands swapped: 32 plan rows
                                       * (the plan block) x 128 weight rows x 128, 1 CTA per SM, at the
                                       * FP8 wgmma rate */
    MOE_KERNEL_HOPPER_BF16_DECODE = 5 /* the same kernel on bf16: 32 plan rows x 128 weight rows x 64, 1 CTA
                                       * per SM, at the bf16 wgmma rate */
} moe_kernel_family;
/* "library", "hopper", "hopper-fp8", "v1", "hopper-fp8-decode", "hopper-bf16-decode" */
const char *moe_kernel_family_name(moe_kernel_family kernel);
/* The grouped kernel the cuda forward runs, by the forward's own rule (the library's
 * moe__gemm_select, which the CUDA backend calls, and at decode moe__fp8_swap_select for FP8,
 * moe__bf16_swap_select for bf16; automatic, as without MOEFUSE_GEMM, MOEFUSE_FP8_DECODE or
 * MOEFUSE_BF16_DECODE): weights' dtype bf16 or e4m3, routed rows T·k over
 * `experts` experts, the layer's hidden and intermediate sizes. MOE_KERNEL_LIBRARY for other
 * dtypes. */
moe_kernel_family moe_grouped_kernel_select(moe_dtype dtype, int64_t routed_rows, int64_t experts, int64_t hidden,
                                            int64_t intermediate);
/* One grouped launch as `moefuse roofline --measure` times it: `rows` routed rows spread as evenly
 * as possible over `experts` experts (each gets ⌊rows/experts⌋ or one more), per expert K x N, on
 * kernel family `kernel` (not MOE_KERNEL_LIBRARY), operands in `dtype` (bf16 or e4m3); *seconds =
 * the predicted time, launch_s included. */
moe_status moe_grouped_launch_time(moe_context_t *ctx, const moe_gpu_spec *gpu, moe_dtype dtype,
                                   moe_kernel_family kernel, int64_t experts, int64_t rows, int64_t k, int64_t n,
                                   double *seconds);
/* One plain GEMM M x K x N as `moefuse roofline --measure` times it on moefuse's Hopper dense
 * engine (moe_analysis_measure_dense): persistent, one CTA per SM taking the output tiles in turn
 * (waves = ⌈tiles / SMs⌉; no split-K, no stream-K), bf16 on 128 x 256 x 64 tiles, or 128 x 128 x 64
 * where 128 x 256 tiles would leave SMs idle in the only wave (the engine's own rule), at
 * hopper_bf16_flops; e4m3 (row- and 128-block scales) on 128 x 128 x 128 tiles at
 * hopper_fp8_flops; bf16 output. *seconds = the predicted time, launch_s included. */
moe_status moe_dense_launch_time(moe_context_t *ctx, const moe_gpu_spec *gpu, moe_dtype dtype, int64_t m, int64_t k,
                                 int64_t n, double *seconds);

typedef struct moe_roofline_row {
    int32_t compute_bound; /* 1 when the ideal compute time exceeds the ideal memory time */
    double ideal_s;        /* max(flops/peak, bytes/bw) over all instances: the plain roofline */
    double time_s;         /* predicted, all instances, with tiles and waves */
    moe_kernel_family kernel; /* the kernel its launches are modelled as */
    moe_tile tile;         /* the best tile */
    int32_t split_k;       /* and its split-K factor (1: none; 0: stream-K, waves then fractional; routed: 1) */
    double tiles, waves;   /* per launch (routed experts: expected values) */
    double tile_efficiency, wave_efficiency;
    double achieved_flops; /* flops / time_s */
    /* routed experts only (0 elsewhere): */
    double padding_waste;     /* with 128-row blocks */
    double expected_max_load; /* tokens on the busiest expert */
    double experts_touched;   /* per layer, all E */
} moe_roofline_row;

typedef struct moe_roofline {
    moe_gpu_spec gpu;
    double peak_flops;     /* bf16 or fp8 peak, by the list's dtype */
    double ridge;          /* peak_flops / read_bw, FLOP per byte */
    int64_t num_rows;      /* = the shape list's, same order */
    moe_roofline_row *rows;
    double total_time_s, ideal_time_s, compute_bound_time_s, memory_bound_time_s;
    double pass_time_s[MOE_PASS_COUNT_];
    double kind_time_s[MOE_GEMM_KIND_COUNT_];
    double kv_cache_bytes; /* decode: KV cache read per step (not a GEMM; not in the totals) */
    double kv_cache_s;
} moe_roofline;

/* Allocates the result; moe_roofline_free releases it. */
moe_status moe_roofline_create(moe_context_t *ctx, const moe_shape_list *list, const moe_gpu_spec *gpu,
                               moe_roofline **out);
void moe_roofline_free(moe_roofline *roof);

/* Bytes of KV cache one token keeps in one layer (GQA: 2·kv_heads·head_dim; MLA: the
 * latent kv_lora_rank + rope dim), per GPU under tp, at 2 bytes per element. */
double moe_kv_bytes_per_token_layer(const moe_model_config *cfg, int64_t tp);
/* Cached tokens one new token attends, summed over the layers, at `context` tokens of context:
 * context in a full-attention layer, min(context, attention_window) in a windowed one
 * (moe_model_config.layer_is_windowed; for a chunked layer that is its bound, the chunk then
 * holding 1..window of them). num_layers x context when no layer is windowed. The decode KV
 * read is this x batch x moe_kv_bytes_per_token_layer. */
double moe_attended_tokens(const moe_model_config *cfg, int64_t context);

/* ---------------------------------------------------------------------------------------
 * The co-design advisor.
 * ------------------------------------------------------------------------------------- */
#define MOE_ADVICE_DIMS_MAX 24
#define MOE_ADVICE_POINTS_MAX 24

typedef struct moe_dim_advice {
    char name[48];           /* "hidden", "expert intermediate", "q heads x head_dim", ... */
    int64_t value;           /* per GPU (after tp) */
    int32_t multiple_of;     /* largest of 512, 256, 128 dividing value; 0 if none */
    double efficiency_128;   /* value / (⌈value/128⌉·128): tile efficiency along this dim */
    double efficiency_256;
    int64_t below_128, above_128; /* nearest multiples of 128 around value (equal if aligned) */
    int64_t above_256;
} moe_dim_advice;

typedef struct moe_padding_point {
    int64_t tokens;
    double tokens_per_expert, experts_touched, expected_max_load;
    double waste_64, waste_128; /* padding waste with 64- and 128-row blocks */
} moe_padding_point;

typedef struct moe_decode_point {
    int64_t batch;
    double gemm_bytes;       /* per step, per GPU: operands of every GEMM (weights of the
                                attention, dense and shared layers, the router, the LM head and
                                the experts expected to be touched, plus activations) */
    double kv_bytes;         /* KV cache read: layers x batch x context x bytes per token */
    double flops;            /* GEMMs plus the attention score and value products */
    double step_s;           /* max((gemm_bytes + kv_bytes) / read_bw, flops / peak) */
    int32_t memory_bound;
    double tokens_per_s_user; /* 1 / step */
    double tokens_per_s_gpu;  /* batch / step / GPUs (tp·ep) */
} moe_decode_point;

typedef struct moe_advice {
    char model[MOE_NAME_MAX];
    moe_shape_options options; /* as used (context resolved) */
    moe_gpu_spec gpu;
    int64_t num_dims;
    moe_dim_advice dims[MOE_ADVICE_DIMS_MAX];
    int64_t num_padding;
    moe_padding_point padding[MOE_ADVICE_POINTS_MAX]; /* tokens 1, 4, 16, ..., 65536 */
    int64_t num_decode;
    moe_decode_point decode[MOE_ADVICE_POINTS_MAX];   /* batch 1, 2, 4, ..., 1024 */
    /* MoE Wgrad: tokens per expert (= the K of the expert Wgrad GEMMs) at a training step of
     * wgrad_tokens tokens, and the smallest step whose K reaches 128, 256, 512. */
    int64_t wgrad_tokens;
    double wgrad_k;
    int64_t wgrad_tokens_for_k[3];
    int32_t num_notes;
    char notes[MOE_NOTE_MAX][MOE_NOTE_LEN];
} moe_advice;

/* opt gives tp, ep, dtype (weights and peak), context (KV length of the decode curve; 0 =
 * seq) and batch·seq (the training step of the Wgrad advice). */
moe_status moe_advice_compute(moe_context_t *ctx, const moe_model_config *cfg, const moe_shape_options *opt,
                              const moe_gpu_spec *gpu, moe_advice *out);

/* ---------------------------------------------------------------------------------------
 * Charts: SVG documents, hand-written (log-log axes labelled with units, every point
 * labelled, labels placed so that none overlaps another, a marker or a line label; a label
 * with no room becomes a number with its text in a footnote). *svg is malloc'd NUL-terminated
 * text: release it with free().
 * ------------------------------------------------------------------------------------- */
/* Arithmetic intensity [FLOP/B] against predicted throughput [TFLOP/s], one point per GEMM
 * (rows of equal position merged into one label), under the memory and compute roofs. */
moe_status moe_roofline_svg(moe_context_t *ctx, const moe_shape_list *list, const moe_roofline *roof, char **svg);
/* The decode curve: tokens/s per user against tokens/s per GPU, one point per batch size. */
moe_status moe_advice_svg(moe_context_t *ctx, const moe_advice *advice, char **svg);

/* ---------------------------------------------------------------------------------------
 * Measurement on the GPU (roofline --measure). The only calls of this header that touch a
 * device.
 * ------------------------------------------------------------------------------------- */
/* Times one plain GEMM y[m,n] = x[m,k] · W[n,k]^T (a linear layer in the TE convention) on
 * ctx's GPU with cuBLAS: dtype BF16 (cublasGemmEx, fp32 compute, bf16 output) or E4M3
 * (cublasLtMatmul, per-tensor scales, default promoting accumulation, bf16 output). Fresh random inputs;
 * operand sets rotated when one set fits in twice the L2; warm-up; *ms = the median of
 * `reps` (1..10000) launches, each timed with its own events. Allocates and frees device
 * memory within the call. ctx must be a CUDA context (MOE_STATUS_UNSUPPORTED otherwise, and
 * always in a build without CUDA); m, k, n in 1..INT32_MAX; MOE_STATUS_UNSUPPORTED too when
 * cuBLASLt has no FP8 algorithm for the shape (it needs leading dimensions of 16-byte multiples:
 * k a multiple of 16, n of 8). */
moe_status moe_analysis_measure_gemm(moe_context_t *ctx, int64_t m, int64_t k, int64_t n, moe_dtype dtype,
                                     int32_t reps, double *ms);

/* moefuse's own kernels, timed with the same protocol (fresh random inputs, sets rotated
 * through twice the L2, warm-up, median of `reps` launches behind a spin kernel). */

/* The Hopper engine's dense GEMM on the same plain GEMM y[m,n] = x[m,k] · W[n,k]^T: BF16
 * (src/cuda/hopper/gemm_dense.h: fp32 accumulation, bf16 output) or E4M3
 * (src/cuda/hopper/gemm_fp8.h: x with FP8_ROW128 scales, W with FP8_BLOCK128 scales, bf16
 * output). MOE_STATUS_UNSUPPORTED without CUDA, on a GPU other than sm_90 (the engine's own
 * check), or when k is not a multiple of 8 (bf16) / 16 (fp8): TMA needs 16-byte rows. */
moe_status moe_analysis_measure_dense(moe_context_t *ctx, int64_t m, int64_t k, int64_t n, moe_dtype dtype,
                                      int32_t reps, double *ms);

/* One grouped expert GEMM launch as moe_forward runs it: `experts` weight matrices, a
 * dispatch plan built on the host (moe_dispatch_plan_build) from tokens x top_k routed rows,
 * row r = token·top_k + slot sent to expert r % experts (so each expert gets
 * tokens·top_k/experts rows, a few one more), blocks of the path's plan block, uploaded once.
 * The path (v1 mma.sync or the Hopper TMA+wgmma engine) is moe__cuda_gemm_select's for
 * (tokens·top_k, num_experts, hidden, intermediate, dtype), as the forward picks it (the
 * environment variable MOEFUSE_GEMM included). BF16: bf16 x and weights [experts, n, k].
 * E4M3: e4m3 codes, x / A2 with FP8_ROW128 scales, weights with FP8_BLOCK128 scales (W13's
 * gate/up rows interleaved, the paired grid, when the activation is gated).
 *   GEMM1 (down = 0): x rows . W13^T [experts, R13, H] (R13 = 2I gated, else I), bias and the
 *     activation in the epilogue -> A2 [plan rows, I] (bf16; fp32 for E4M3). On the Hopper
 *     path the A rows are already in plan order (the forward's permute pass is not timed).
 *   GEMM2 (down = 1): A2 [plan rows, I] . W2^T [experts, H, I], bias x routing weight ->
 *     the output rows [tokens·top_k, H] (bf16 on the BF16 path when the kernels offer bf16
 *     rows, as the forward writes them for bf16 y; else fp32).
 * The fused shared expert and the routing, plan, permute, quantisation and combine passes are
 * not in the launch. */
typedef struct moe_grouped_measure {
    /* in */
    int32_t down;                 /* 0: GEMM1 (W13), 1: GEMM2 (W2) */
    int64_t num_experts;          /* E of the layer on this GPU: the path selection's E */
    int64_t experts;              /* weight matrices in the launch, 1..num_experts */
    int64_t tokens, top_k;        /* top_k in 1..experts; tokens·top_k < 2^31 */
    int64_t hidden, intermediate; /* H and I of one expert, 1..2^31-1 */
    moe_activation activation;    /* GEMM1's epilogue (the model's) */
    float act_alpha, act_limit;
    int32_t has_bias;             /* bias rows in the epilogue (expert_has_bias) */
    /* out (path, block and plan_rows are set once chosen, also when the timing then fails); path_name
     * "decode": the Hopper path's decode kernel with the operands swapped, FP8 or bf16 (block 32) */
    double ms;                    /* median of the timed launches */
    int32_t path;                 /* MOE__CUDA_GEMM_V1 (0) or _HOPPER (1); -1 before the choice */
    char path_name[16];           /* "v1", "hopper", "decode" ("" before the choice) */
    int64_t block;                /* plan rows per block: 64 (v1), 128 (Hopper) or 32 (decode) */
    int64_t plan_rows;            /* live plan rows, padding included */
    int32_t rows_bf16;            /* GEMM2: output rows written in bf16 (else fp32) */
} moe_grouped_measure;

/* Times the launch g describes in dtype BF16 or E4M3; fills g's outputs. Allocates and frees
 * device memory within the call. ctx must be a CUDA context (MOE_STATUS_UNSUPPORTED
 * otherwise, and always in a build without CUDA); MOE_STATUS_UNSUPPORTED too when H or I is
 * not a multiple of 8 (bf16) / 16 (fp8), as the weight upload refuses them. */
moe_status moe_analysis_measure_grouped(moe_context_t *ctx, moe_dtype dtype, int32_t reps, moe_grouped_measure *g);

#ifdef __cplusplus
}
#endif
#endif /* MOEFUSE_ANALYSIS_H */
