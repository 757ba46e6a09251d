/* The CUDA forward against the CPU oracle, through the public API on two contexts.
 *
 * For every case: the same host weights packed on a CPU and on a CUDA context; x and the
 * routing input in device buffers (cudaMalloc); y poisoned with NaN before each run; then
 *  - y vs the CPU's y: relative Frobenius error <= 1e-2 for bf16 weights (why: both sides
 *    use the same bf16 weights and inputs; the GPU rounds the GEMM1 output A2 to bf16,
 *    relative error <= 2^-9 per element, about 1e-3 in RMS, and y to bf16 once more; fp32
 *    instead of fp64 accumulation adds ~1e-6. 1e-2 leaves a 5x margin and still fails any
 *    indexing or epilogue bug, which gives errors of order 1). 2e-3 for f16 (2^-12 per
 *    rounding). Every y element must be finite (the poison must be overwritten);
 *  - the routing ids equal to the CPU's, weights to 1e-6 relative (both compute the scores
 *    in double from the same fp32 logits);
 *  - the device dispatch plan equal to moe_dispatch_plan_build's, element by element;
 *  - then the forward is captured in a CUDA graph, NEW inputs and routing are written into
 *    the same device buffers, y is poisoned again, the graph is replayed and checked again.
 * Large cases check the oracle on a subset of tokens (tokens are independent; the subset
 * takes the first, the last and evenly spaced ones), and use fewer experts than the real
 * model (the CPU packs and holds every expert); the GPU always runs all T tokens.
 *
 * Every model case runs once per grouped-GEMM path (MOEFUSE_GEMM=v1, then =hopper; the
 * weights are packed once): the Hopper engine only where moe__cuda_gemm_select allows it
 * (bf16, H and I multiples of 64, ...), elsewhere the forced run is v1 again. Each case line
 * names the path that ran; the last lines count the cases per path.
 *
 * FP8 (w8a8, fp8-tensor / fp8-block128 weights with fp8-tensor / fp8-row128 activations):
 * the device quantiser against moe_quantize bit for bit ("fp8 quantiser", double-rounding
 * traps included), the refusals of the pairs the cuda backend does not run ("fp8 refusals"),
 * and the forward cases "fp8-*" with weights and x at block-varying magnitudes (fp8_tolerance
 * says why y may differ by 4e-3 (bf16 y) or 1e-3 (f32, f16 y), plus one A2 code flip's worth).
 * FP8 models run on both paths too (the Hopper FP8 kernel where H and I are >= 128 and multiples
 * of 16); in the hopper pass a run that would take v1 again is skipped (it repeats the v1 pass).
 * A Hopper FP8 run is checked stage by stage (its wgmma accumulator flips a few A2 codes): A2
 * codes and scales read back from the workspace against the oracle's, y against the oracle
 * given the GPU's own A2, y end to end only coarsely (see below fp8_tolerance); one line per
 * check gives the stages' numbers. `--filter fp8` runs all of them and nothing else.
 *
 * Usage: test_gpu_forward [--quick] [--big] [--gemm v1|hopper|both] [--filter SUBSTRING]
 *        test_gpu_forward --selftest   (no GPU needed: the stage-wise FP8 analysis on readbacks
 *                                       made from the oracle, clean and with planted bugs)
 *   --quick  a reduced case list (for compute-sanitizer)
 *   --big    adds T = 262144 on deepseek-v3's H and I (64-bit offsets; needs ~80 GB)
 *   --gemm   the paths to run (default both)
 *   --perf [T,T,...]  only PERF.md's shapes, at the listed T (default all seven)
 * Exits 77 (ctest SKIP) without a CUDA device. Fresh random inputs each run; MOEFUSE_SEED
 * repeats one. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setenv */
#endif
#include <cuda_runtime.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_backend.h"
#include "moefuse.h"

/* ---- scaffolding -------------------------------------------------------------------- */
static int case_failures, cases_passed, cases_failed;
/* Per grouped-GEMM path that actually ran (MOE__CUDA_GEMM_V1 / _HOPPER); case_path: the
 * running case's. */
static int path_passed[2], path_failed[2], case_path;
static const char *gemm_paths[2] = {"v1", "hopper"};
static int first_path = 0, last_path = 1;
static bool perf_only;
static int64_t perf_T_arg[8];
static int n_perf_T_arg;

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            if (case_failures < 8) {                                                        \
                printf("    check failed at line %d: %s: ", __LINE__, #cond);               \
                printf(__VA_ARGS__);                                                        \
                printf("\n");                                                               \
            }                                                                               \
            case_failures++;                                                                \
        }                                                                                   \
    } while (0)

/* A CUDA runtime failure ends the run: nothing after it could be trusted. */
#define CUDA_OK(call)                                                                       \
    do {                                                                                    \
        cudaError_t err_ = (call);                                                          \
        if (err_ != cudaSuccess) {                                                          \
            printf("FATAL: %s failed at line %d: %s\n", #call, __LINE__, cudaGetErrorString(err_)); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

#define MOE_OK(ctx, call)                                                                   \
    do {                                                                                    \
        moe_status st_ = (call);                                                            \
        if (st_ != MOE_STATUS_OK) {                                                         \
            printf("FATAL: %s: %s: %s\n", #call, moe_status_string(st_), moe_last_error(ctx)); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        printf("FATAL: out of host memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static uint64_t rng_state;
static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float rng_uniform(float lo, float hi) { return lo + (hi - lo) * (float)((rng_next() >> 40) * 0x1.0p-24); }
static void fill_uniform(float *p, int64_t n, float amp) {
    for (int64_t i = 0; i < n; i++) p[i] = rng_uniform(-amp, amp);
}

static moe_context_t *cpu_ctx, *gpu_ctx;
static cudaStream_t stream;

/* ---- a model: spec, host weights, packed on both contexts ---------------------------- */
typedef struct model {
    char name[64];
    moe_layer_spec spec;
    moe_format format;
    moe_gate_up_layout layout;
    moe_dtype x_dtype, y_dtype;
    int64_t x_pad, y_pad; /* extra elements per row of x / y (strided rows) */
    float *arrays[24];
    int narrays;
    moe_weights_desc desc;
    moe_weights_t *w_cpu, *w_gpu;
    float *correction_bias; /* a copy kept for moe_route, or NULL */
    moe_format act_format;  /* F32, or FP8_ROW128 / FP8_TENSOR with FP8 weights (w8a8) */
    uint64_t salt;          /* of the block magnitudes of an FP8 model's weights and x */
} model;

static bool is_fp8_format(moe_format f) { return f == MOE_FORMAT_FP8_TENSOR || f == MOE_FORMAT_FP8_BLOCK128; }

/* FP8 models: a power of two in [1/4, 4] per 128 x 128 block (weights) or 1 x 128 group (x),
 * a hash of the block's coordinates. With plain uniform values every block's amax, hence
 * every scale, is nearly the same, and a kernel that read the wrong block's scale would
 * still pass; with these factors a wrong scale is off by 2x or more. */
static float block_factor(uint64_t salt, int64_t a, int64_t b, int64_t c, int64_t d) {
    uint64_t h = salt ^ ((uint64_t)a * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)b * 0xC2B2AE3D27D4EB4Full) ^
                 ((uint64_t)c * 0x165667B19E3779F9ull) ^ ((uint64_t)d * 0x27D4EB2F165667C5ull);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return ldexpf(1.0f, (int)(h % 5) - 2);
}

/* How a weight tensor's rows map to (gate/up half, row of that half). */
enum { ROWS_PLAIN, ROWS_CONCAT, ROWS_INTERLEAVED };

/* Scales [count, rows, cols] by block_factor of (matrix, half, row block, column block), the
 * blocks of the half each row belongs to (as moe_weights_create quantises gate and up). */
static void vary_blocks(const moe_tensor *t, int64_t half_rows, int kind, uint64_t salt) {
    if (!t->data) return;
    const int64_t count = t->ndim == 3 ? t->shape[0] : 1, rows = t->shape[t->ndim - 2], cols = t->shape[t->ndim - 1];
    float *p = t->data;
    for (int64_t e = 0; e < count; e++)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t half = kind == ROWS_CONCAT ? r / half_rows : kind == ROWS_INTERLEAVED ? r % 2 : 0;
            const int64_t i = kind == ROWS_CONCAT ? r % half_rows : kind == ROWS_INTERLEAVED ? r / 2 : r;
            for (int64_t c = 0; c < cols; c++) p[(e * rows + r) * cols + c] *= block_factor(salt, e, half, i / 128, c / 128);
        }
}

static float *model_array(model *m, int64_t n, float amp) {
    float *p = xmalloc((size_t)n * sizeof(float));
    fill_uniform(p, n, amp);
    m->arrays[m->narrays++] = p;
    return p;
}

/* Random weights scaled so that every stage's values are O(1). */
static void model_build(model *m) {
    const moe_layer_spec *s = &m->spec;
    const int64_t E = s->num_experts, H = s->hidden, I = s->intermediate, Is = s->shared_intermediate;
    const bool gated = moe_activation_is_gated(s->activation);
    const float a13 = 3.0f / sqrtf((float)H), a2 = 3.0f / sqrtf((float)I), bias = 0.1f;
    moe_weights_desc *d = &m->desc;
    memset(d, 0, sizeof *d);
    d->layout = m->layout;
    if (m->layout == MOE_LAYOUT_SEPARATE || !gated) {
        d->layout = gated ? m->layout : MOE_LAYOUT_SEPARATE;
        d->gate = moe_tensor_3d(model_array(m, E * I * H, a13), MOE_DTYPE_F32, E, I, H);
        if (gated) d->up = moe_tensor_3d(model_array(m, E * I * H, a13), MOE_DTYPE_F32, E, I, H);
        if (s->expert_has_bias) {
            d->gate_bias = moe_tensor_2d(model_array(m, E * I, bias), MOE_DTYPE_F32, E, I);
            if (gated) d->up_bias = moe_tensor_2d(model_array(m, E * I, bias), MOE_DTYPE_F32, E, I);
        }
    } else {
        d->gate_up = moe_tensor_3d(model_array(m, E * 2 * I * H, a13), MOE_DTYPE_F32, E, 2 * I, H);
        if (s->expert_has_bias)
            d->gate_up_bias = moe_tensor_2d(model_array(m, E * 2 * I, bias), MOE_DTYPE_F32, E, 2 * I);
    }
    d->down = moe_tensor_3d(model_array(m, E * H * I, a2), MOE_DTYPE_F32, E, H, I);
    const int gate_up_rows = d->layout == MOE_LAYOUT_CONCAT ? ROWS_CONCAT : ROWS_INTERLEAVED;
    if (s->expert_has_bias) d->down_bias = moe_tensor_2d(model_array(m, E * H, bias), MOE_DTYPE_F32, E, H);
    d->router = moe_tensor_2d(model_array(m, E * H, a13), MOE_DTYPE_F32, E, H);
    if (s->router_has_bias) d->router_bias = moe_tensor_1d(model_array(m, E, 0.5f), MOE_DTYPE_F32, E);
    if (s->use_correction_bias) d->correction_bias = moe_tensor_1d(model_array(m, E, 0.05f), MOE_DTYPE_F32, E);
    if (s->num_shared_experts > 0) {
        const float as2 = 3.0f / sqrtf((float)Is);
        if (d->layout == MOE_LAYOUT_SEPARATE) {
            d->shared_gate = moe_tensor_2d(model_array(m, Is * H, a13), MOE_DTYPE_F32, Is, H);
            if (gated) d->shared_up = moe_tensor_2d(model_array(m, Is * H, a13), MOE_DTYPE_F32, Is, H);
            if (s->expert_has_bias) {
                d->shared_gate_bias = moe_tensor_1d(model_array(m, Is, bias), MOE_DTYPE_F32, Is);
                if (gated) d->shared_up_bias = moe_tensor_1d(model_array(m, Is, bias), MOE_DTYPE_F32, Is);
            }
        } else {
            d->shared_gate_up = moe_tensor_2d(model_array(m, 2 * Is * H, a13), MOE_DTYPE_F32, 2 * Is, H);
            if (s->expert_has_bias)
                d->shared_gate_up_bias = moe_tensor_1d(model_array(m, 2 * Is, bias), MOE_DTYPE_F32, 2 * Is);
        }
        d->shared_down = moe_tensor_2d(model_array(m, H * Is, as2), MOE_DTYPE_F32, H, Is);
        if (s->expert_has_bias) d->shared_down_bias = moe_tensor_1d(model_array(m, H, bias), MOE_DTYPE_F32, H);
        if (s->shared_gate) d->shared_gate_weight = moe_tensor_1d(model_array(m, H, a13), MOE_DTYPE_F32, H);
    }
    if (is_fp8_format(m->format)) {
        m->salt = rng_next();
        vary_blocks(&d->gate, I, ROWS_PLAIN, m->salt + 1);
        vary_blocks(&d->up, I, ROWS_PLAIN, m->salt + 2);
        vary_blocks(&d->gate_up, I, gate_up_rows, m->salt + 3);
        vary_blocks(&d->down, H, ROWS_PLAIN, m->salt + 4);
        vary_blocks(&d->shared_gate, Is, ROWS_PLAIN, m->salt + 5);
        vary_blocks(&d->shared_up, Is, ROWS_PLAIN, m->salt + 6);
        vary_blocks(&d->shared_gate_up, Is, gate_up_rows, m->salt + 7);
        vary_blocks(&d->shared_down, H, ROWS_PLAIN, m->salt + 8);
    }
    MOE_OK(cpu_ctx, moe_weights_create(cpu_ctx, s, d, m->format, &m->w_cpu));
    MOE_OK(gpu_ctx, moe_weights_create(gpu_ctx, s, d, m->format, &m->w_gpu));
    if (s->use_correction_bias) {
        m->correction_bias = xmalloc((size_t)E * 4);
        memcpy(m->correction_bias, d->correction_bias.data, (size_t)E * 4);
    }
    /* The host sources are no longer needed: free them now (the big shapes hold GBs). */
    for (int i = 0; i < m->narrays; i++) free(m->arrays[i]);
    m->narrays = 0;
}

static void model_free(model *m) {
    moe_weights_free(m->w_cpu);
    moe_weights_free(m->w_gpu);
    free(m->correction_bias);
    m->w_cpu = m->w_gpu = NULL;
    m->correction_bias = NULL;
}

/* ---- routing inputs ----------------------------------------------------------------- */
enum routing {
    R_ROUTER,      /* neither ids nor logits: logits = x . Wr^T inside */
    R_LOGITS,      /* random logits given */
    R_LOGITS_TIES, /* logits from {-1, -0.5, 0, 0.5, 1}: many exact ties (lower index wins) */
    R_IDS,         /* random distinct ids and weights given */
    R_IDS_ONE,     /* every token on experts 0..k-1: expert 0 gets all T rows */
    R_IDS_FEW      /* ids from the first max(k, E/4) experts only: the others are empty */
};
static const char *routing_name(int r) {
    static const char *names[] = {"router", "logits", "logits-ties", "ids", "ids-one-expert", "ids-few-experts"};
    return names[r];
}
static bool routing_has_ids(int r) { return r >= R_IDS; }
static bool routing_has_logits(int r) { return r == R_LOGITS || r == R_LOGITS_TIES; }

/* One forward's host inputs. */
typedef struct inputs {
    int64_t T;
    int routing;
    uint16_t *x16; /* x in bf16/f16 [T, H + x_pad] */
    float *x32;    /* or f32 */
    float *logits; /* [T, E] */
    int32_t *ids;  /* [T, k] */
    float *weights;
} inputs;

static void draw_ids(const model *m, inputs *in, int routing) {
    const int64_t E = m->spec.num_experts, k = m->spec.top_k, T = in->T;
    int64_t pool = routing == R_IDS_FEW ? (E / 4 > k ? E / 4 : k) : E;
    int32_t *perm = xmalloc((size_t)E * sizeof(int32_t));
    for (int64_t t = 0; t < T; t++) {
        for (int64_t e = 0; e < pool; e++) perm[e] = (int32_t)e;
        for (int64_t j = 0; j < k; j++) {
            int64_t pick = j + (int64_t)(rng_next() % (uint64_t)(pool - j));
            int32_t tmp = perm[j];
            perm[j] = perm[pick];
            perm[pick] = tmp;
            in->ids[t * k + j] = routing == R_IDS_ONE ? (int32_t)j : perm[j];
            in->weights[t * k + j] = rng_uniform(0.05f, 1.0f);
        }
    }
    free(perm);
}

static void inputs_draw(const model *m, inputs *in, int64_t T, int routing) {
    const int64_t H = m->spec.hidden, E = m->spec.num_experts, k = m->spec.top_k, ld = H + m->x_pad;
    in->T = T;
    in->routing = routing;
    const int64_t n = T * ld;
    /* FP8 activations: each token's 128-column groups at their own magnitude (block_factor),
     * so that every group gets its own scale. The factors are powers of two: exact in bf16/f16. */
    const bool vary = m->act_format != MOE_FORMAT_F32;
    const uint64_t x_salt = rng_next();
    if (m->x_dtype == MOE_DTYPE_F32) {
        in->x32 = xmalloc((size_t)n * 4);
        fill_uniform(in->x32, n, 1.0f);
        if (vary)
            for (int64_t i = 0; i < n; i++) in->x32[i] *= block_factor(x_salt, i / ld, (i % ld) / 128, 0, 0);
    } else {
        in->x16 = xmalloc((size_t)n * 2);
        for (int64_t i = 0; i < n; i++) {
            float v = rng_uniform(-1.0f, 1.0f);
            if (vary) v *= block_factor(x_salt, i / ld, (i % ld) / 128, 0, 0);
            in->x16[i] = m->x_dtype == MOE_DTYPE_BF16 ? moe_float_to_bf16(v) : moe_float_to_f16(v);
        }
    }
    in->logits = xmalloc((size_t)(T * E) * 4);
    for (int64_t i = 0; i < T * E; i++)
        in->logits[i] = routing == R_LOGITS_TIES ? 0.5f * (float)((int)(rng_next() % 5) - 2) : rng_uniform(-3.0f, 3.0f);
    in->ids = xmalloc((size_t)(T * k) * 4);
    in->weights = xmalloc((size_t)(T * k) * 4);
    if (routing_has_ids(routing)) draw_ids(m, in, routing);
}

static void inputs_free(inputs *in) {
    free(in->x16);
    free(in->x32);
    free(in->logits);
    free(in->ids);
    free(in->weights);
    memset(in, 0, sizeof *in);
}

static float x_at(const model *m, const inputs *in, int64_t t, int64_t h) {
    const int64_t i = t * (m->spec.hidden + m->x_pad) + h;
    if (in->x32) return in->x32[i];
    return m->x_dtype == MOE_DTYPE_BF16 ? moe_bf16_to_float(in->x16[i]) : moe_f16_to_float(in->x16[i]);
}

/* The CPU's routing for all T tokens: the given ids and weights, or moe_route over the
 * given logits (the router path is checked through the CPU forward instead). */
static void cpu_routing(const model *m, const inputs *in, int32_t *ids, float *weights) {
    const int64_t T = in->T, k = m->spec.top_k;
    if (routing_has_ids(in->routing)) {
        memcpy(ids, in->ids, (size_t)(T * k) * 4);
        memcpy(weights, in->weights, (size_t)(T * k) * 4);
        return;
    }
    MOE_OK(cpu_ctx, moe_route(cpu_ctx, &m->spec, in->logits, T, m->correction_bias, ids, weights));
}

/* ---- one forward on each backend ------------------------------------------------------ */
typedef struct device_buffers {
    void *x, *y, *logits, *ids, *weights, *out_ids, *out_weights, *workspace;
    size_t workspace_size;
    moe_forward_args args;
} device_buffers;

static size_t x_bytes(const model *m, int64_t T) {
    return (size_t)(T * (m->spec.hidden + m->x_pad)) * (size_t)(moe_dtype_bits(m->x_dtype) / 8);
}
static size_t y_bytes(const model *m, int64_t T) {
    return (size_t)(T * (m->spec.hidden + m->y_pad)) * (size_t)(moe_dtype_bits(m->y_dtype) / 8);
}

static moe_tensor tensor_rows(void *data, moe_dtype dt, int64_t T, int64_t cols, int64_t ld, moe_memory mem) {
    moe_tensor t = moe_tensor_2d(data, dt, T, cols);
    if (ld != cols) {
        t.strides[0] = ld;
        t.strides[1] = 1;
    }
    t.memory = mem;
    return t;
}

static void device_alloc(const model *m, device_buffers *b, int64_t T, int routing) {
    const moe_layer_spec *s = &m->spec;
    const int64_t H = s->hidden, E = s->num_experts, k = s->top_k;
    memset(b, 0, sizeof *b);
    CUDA_OK(cudaMalloc(&b->x, x_bytes(m, T) + 16)); /* + 16: never a 0-byte allocation (T = 0) */
    CUDA_OK(cudaMalloc(&b->y, y_bytes(m, T) + 16));
    CUDA_OK(cudaMalloc(&b->logits, (size_t)(T * E) * 4 + 4));
    CUDA_OK(cudaMalloc(&b->ids, (size_t)(T * k) * 4 + 4));
    CUDA_OK(cudaMalloc(&b->weights, (size_t)(T * k) * 4 + 4));
    CUDA_OK(cudaMalloc(&b->out_ids, (size_t)(T * k) * 4 + 4));
    CUDA_OK(cudaMalloc(&b->out_weights, (size_t)(T * k) * 4 + 4));
    MOE_OK(gpu_ctx, moe_forward_workspace_size(gpu_ctx, m->w_gpu, T, m->act_format, &b->workspace_size));
    CUDA_OK(cudaMalloc(&b->workspace, b->workspace_size ? b->workspace_size : 1));
    moe_forward_args *a = &b->args;
    moe_forward_args_init(a);
    a->act_format = m->act_format;
    a->x = tensor_rows(b->x, m->x_dtype, T, H, H + m->x_pad, MOE_MEMORY_DEVICE);
    a->y = tensor_rows(b->y, m->y_dtype, T, H, H + m->y_pad, MOE_MEMORY_DEVICE);
    if (routing_has_ids(routing)) {
        a->topk_ids = tensor_rows(b->ids, MOE_DTYPE_I32, T, k, k, MOE_MEMORY_DEVICE);
        a->topk_weights = tensor_rows(b->weights, MOE_DTYPE_F32, T, k, k, MOE_MEMORY_DEVICE);
    } else if (routing_has_logits(routing)) {
        a->router_logits = tensor_rows(b->logits, MOE_DTYPE_F32, T, E, E, MOE_MEMORY_DEVICE);
    }
    a->out_topk_ids = tensor_rows(b->out_ids, MOE_DTYPE_I32, T, k, k, MOE_MEMORY_DEVICE);
    a->out_topk_weights = tensor_rows(b->out_weights, MOE_DTYPE_F32, T, k, k, MOE_MEMORY_DEVICE);
    a->workspace = b->workspace;
    a->workspace_size = b->workspace_size;
    a->stream = stream;
}

static void device_free(device_buffers *b) {
    void *all[] = {b->x, b->y, b->logits, b->ids, b->weights, b->out_ids, b->out_weights, b->workspace};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CUDA_OK(cudaFree(all[i]));
}

/* Writes a run's inputs into the device buffers and poisons every output (NaN y, -1 ids,
 * NaN weights): an element the forward does not write fails the checks. */
static void device_upload(const model *m, device_buffers *b, const inputs *in) {
    const int64_t T = in->T, E = m->spec.num_experts, k = m->spec.top_k;
    CUDA_OK(cudaMemcpyAsync(b->x, in->x32 ? (void *)in->x32 : (void *)in->x16, x_bytes(m, T), cudaMemcpyHostToDevice,
                            stream));
    CUDA_OK(cudaMemcpyAsync(b->logits, in->logits, (size_t)(T * E) * 4, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(b->ids, in->ids, (size_t)(T * k) * 4, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(b->weights, in->weights, (size_t)(T * k) * 4, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemsetAsync(b->y, 0xFF, y_bytes(m, T), stream)); /* all-ones bits: NaN in f32/f16/bf16 */
    CUDA_OK(cudaMemsetAsync(b->out_ids, 0xFF, (size_t)(T * k) * 4, stream));
    CUDA_OK(cudaMemsetAsync(b->out_weights, 0xFF, (size_t)(T * k) * 4, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
}

/* The oracle tokens: all of them up to `limit`, else the first and last limit/3 and
 * evenly spaced ones between. */
static int64_t oracle_tokens(int64_t T, int64_t limit, int64_t *tok) {
    if (T <= limit) {
        for (int64_t t = 0; t < T; t++) tok[t] = t;
        return T;
    }
    int64_t n = 0, edge = limit / 3;
    for (int64_t t = 0; t < edge; t++) tok[n++] = t;
    int64_t mid = limit - 2 * edge;
    for (int64_t i = 0; i < mid; i++) tok[n++] = edge + (T - 2 * edge) * (2 * i + 1) / (2 * mid);
    for (int64_t t = T - edge; t < T; t++) tok[n++] = t;
    return n;
}

/* The CPU forward on the tokens tok[0..S): y [S, H] fp32, its routing ids/weights [S, k]. With
 * an A2 exchange xa (not NULL) through moe__cpu_forward_a2 (src/core/internal.h), A2 read out
 * and/or given in: rows by the subset's ids i*k + slot ([S*k, I]; shared [S, Is]). */
static void cpu_forward_a2(const model *m, const inputs *in, const int64_t *tok, int64_t S, float *y, int32_t *ids,
                           float *weights, const moe__cpu_a2_exchange *xa) {
    const moe_layer_spec *s = &m->spec;
    const int64_t H = s->hidden, E = s->num_experts, k = s->top_k;
    float *x = xmalloc((size_t)(S * H) * 4), *logits = xmalloc((size_t)(S * E) * 4 + 4);
    int32_t *gids = xmalloc((size_t)(S * k) * 4 + 4);
    float *gw = xmalloc((size_t)(S * k) * 4 + 4);
    for (int64_t i = 0; i < S; i++) {
        for (int64_t h = 0; h < H; h++) x[i * H + h] = x_at(m, in, tok[i], h);
        for (int64_t e = 0; e < E; e++) logits[i * E + e] = in->logits[tok[i] * E + e];
        for (int64_t j = 0; j < k; j++) {
            gids[i * k + j] = in->ids[tok[i] * k + j];
            gw[i * k + j] = in->weights[tok[i] * k + j];
        }
    }
    /* x goes in as f32: it holds the exact values of the bf16/f16 input. */
    moe_forward_args a;
    moe_forward_args_init(&a);
    a.x = moe_tensor_2d(x, MOE_DTYPE_F32, S, H);
    a.y = moe_tensor_2d(y, MOE_DTYPE_F32, S, H);
    if (routing_has_ids(in->routing)) {
        a.topk_ids = moe_tensor_2d(gids, MOE_DTYPE_I32, S, k);
        a.topk_weights = moe_tensor_2d(gw, MOE_DTYPE_F32, S, k);
    } else if (routing_has_logits(in->routing)) {
        a.router_logits = moe_tensor_2d(logits, MOE_DTYPE_F32, S, E);
    }
    a.out_topk_ids = moe_tensor_2d(ids, MOE_DTYPE_I32, S, k);
    a.out_topk_weights = moe_tensor_2d(weights, MOE_DTYPE_F32, S, k);
    a.act_format = m->act_format;
    size_t ws = 0;
    MOE_OK(cpu_ctx, moe_forward_workspace_size(cpu_ctx, m->w_cpu, S, m->act_format, &ws));
    a.workspace = xmalloc(ws);
    a.workspace_size = ws;
    if (xa) MOE_OK(cpu_ctx, moe__cpu_forward_a2(cpu_ctx, m->w_cpu, &a, xa)); /* a as moe_forward takes it */
    else MOE_OK(cpu_ctx, moe_forward(cpu_ctx, m->w_cpu, &a));
    free(a.workspace);
    free(x);
    free(logits);
    free(gids);
    free(gw);
}

static void cpu_forward(const model *m, const inputs *in, const int64_t *tok, int64_t S, float *y, int32_t *ids,
                        float *weights) {
    cpu_forward_a2(m, in, tok, S, y, ids, weights, NULL);
}

static float y_at(const model *m, const void *y, int64_t t, int64_t h) {
    const int64_t i = t * (m->spec.hidden + m->y_pad) + h;
    switch (m->y_dtype) {
    case MOE_DTYPE_F32: return ((const float *)y)[i];
    case MOE_DTYPE_BF16: return moe_bf16_to_float(((const uint16_t *)y)[i]);
    default: return moe_f16_to_float(((const uint16_t *)y)[i]);
    }
}

/* Tolerance of y for the w8a8 FP8 path (relative Frobenius error against the CPU oracle).
 * The GPU multiplies the same e4m3 codes by the same scales as the CPU (x's codes are the
 * CPU's bit for bit, which the "fp8 quantiser" cases check), so before y's rounding the two
 * differ by fp32 vs fp64 accumulation: ~1e-7 (a host emulation of the kernel's arithmetic,
 * fp32 partials per 128-K block promoted with fmaf, measured 0.9-1.8e-7 against the oracle on
 * qwen3's shape, on H=320/I=208 tails and on all four weight/act format pairs; the first H200
 * run (lab/results/2026-12-02-h200-grouped/suite) measured 0.8-2.3e-7 for f32 y). On top:
 *  (1) A2 is quantised from the GPU's own fp32 A2: a value within ~1e-7 relative of an e4m3
 *      rounding midpoint can take the neighbouring code (1/8-1/16 of its size, ~1/12 on
 *      average), which moves its token's y by ~1/(12 sqrt(k I)) relative, and y over the S
 *      checked tokens by ~1/(12 sqrt(k I S)). At a flip rate p per A2 element (~3e-6 for
 *      A2 off by 1e-7) many flips add up to ~sqrt(p)/12 = 1.5e-4; but in a small case a single
 *      flip can be large (k I = 416, S = 1: 4e-3), so the tolerance admits one;
 *  (2) y's own rounding: bf16 1.6-1.75e-3 (emulation and H200 alike), f16 1.9-2.2e-4 (H200).
 * So one flip (1/(12 sqrt(k I S)), I the narrower of I and Is) on top of 1e-3 for f32/f16 y
 * and of 4e-3 for bf16 y (2.4x its rounding). What they must catch: x codes made by another
 * rounding or scale rule (every code may move by one step, ~4% of its size): 1e-2 and more;
 * a wrong block or group scale: 2x or more (block_factor). A rare single-code mismatch in x
 * hides below any y tolerance: the quantiser cases compare codes bit for bit, crafted
 * double-rounding traps included. */
/* The Hopper FP8 path (wgmma e4m3: the run's `wgmma` flag, case_path) is checked stage by stage.
 * Its tensor core keeps fewer bits than fp32 while it sums a 128-K block (partials are promoted
 * into fp32 per block), so GEMM1's fp32 A2 is off by up to ~1e-4 of sum |x w| (measured on the
 * H200 by tests/gpu/fp8_a2_probe.c, tests/gpu/logs/2026-12-02-fp8-a2-probe-h200: median 4.6e-6,
 * max 1.1e-4; v1: 3e-8), and an A2 element close to an e4m3 rounding midpoint gets the
 * neighbouring code, a "flip" (there 7-33 of 9504 codes per run, all one step). A flip moves its
 * element by one e4m3 step, up to 1/8 of it, and with relu2's heavy tail one element can carry
 * much of y: y against the oracle then has a tail (one run at 4.6e-2) that no tolerance both
 * admits and keeps meaningful. So after each forward (eager, graph replay) check_outputs reads
 * the A2 codes and scales back from the workspace (moe__cuda_fp8_workspace_view) and checks
 * (fp8_stages, a2_check; --selftest checks that analysis on the host):
 *  (a) y given A2: y against the oracle run on the GPU's own A2 (dequantised, given in by
 *      moe__cpu_forward_a2): GEMM2 + combine on identical inputs, so no flip term, only y's
 *      rounding as for v1 (bf16 y 4e-3, else 1e-3) (Y_GIVEN_A2_*);
 *  (b) the A2 codes against the oracle's own (its A2 before quantisation, moe_quantize'd as the
 *      oracle does): each code equal, one e4m3 step away, or (near zero) within A2_NEAR_Q of it
 *      in units of the scale; at most A2_FLIP_FRACTION of them (+ A2_FLIP_SLACK) not equal; each
 *      row's scales within A2_SCALE_REL of the oracle's; each row of the oracle's tokens in the
 *      plan exactly once (padding rows and rows past the live count ignored);
 * and y against the oracle only as a coarse sanity bound (fp8_tolerance: + WGMMA_FP8_ONE_FLIP).
 *
 * The bounds come from the probe and from a model of the accumulator (tests/gpu/fp8_wgmma_model.py:
 * each 32-product step aligns the running sum and the products to the largest exponent and keeps
 * 15 bits below it), which reproduces the probe's case: A2 error median 4.3e-6 and max 1.0e-4 of
 * sum |x w|, flips 0.12-0.22% of the codes (probe 0.07-0.35%), tensor scale off by <= 4.7e-4
 * (probe 6.4e-4). On the suite's Hopper FP8 shapes (relu2 H=256 I=144; swiglu H=320 I=208 and
 * H=256 I=128; row128 and tensor; T = 1..512), and on qwen3's and deepseek-v3's H and I, at 15
 * bits and, as the margin, at 14 (twice the error):
 *   flips        relu2 0.12-0.30% (14 bits: 0.24-0.50%); swiglu 0.36-0.83% (14: 0.65-1.4%, and
 *                7 of 416 codes, 1.7%, in one T = 1 run);
 *   > one step   never for relu2 (its A2 error shrinks with A2); swiglu: up to ~5 per 10^4 codes, all
 *                at |q| <= 0.5 (14 bits: 2.25), q = A2 / scale (448 at the top), off the oracle's
 *                q by <= 0.094 (20 runs of 2.1e5 codes; 14 bits: median 0.125, worst 0.75): an
 *                element near zero, silu(gate) * up with up ~ 0, whose error is absolute like the
 *                accumulator's (~1e-4 of the partial sums) where the e4m3 steps are 2^-9..2^-3;
 *   scales       <= 7.8e-4 relative (14 bits: 1.7e-3): the error of the group's (tensor's) amax;
 *   y given A2   <= 1.2e-4 (14 bits: 2.8e-4): GEMM2's own accumulation, below y's rounding.
 * Hence A2_FLIP_FRACTION 3% + A2_FLIP_SLACK 8 codes (8.5x the probe's worst, 3.6x the model's,
 * 2.1x at 14 bits; the 8 for small runs: 416 codes expect 1.6-4 flips), A2_NEAR_Q 2 (20x the
 * model's worst run, 2.7x the 14-bit one; it reaches past one step only for |q| < 16, below 4%
 * of the largest), A2_SCALE_REL 4e-3 (5x the model's, 2.4x at 14 bits, 6x the probe's). What
 * they still catch: another rounding rule (about half the codes move: 17x the fraction bound),
 * a scale off by 1% (A2_SCALE_REL 2.5x; ~11% of the codes flip too) or another group's, row's or
 * tensor's scale (2x and more with the block magnitudes), a stale amax (2^16), a wrong or stale
 * row (codes many steps off), a GEMM1 error (bias, K tail, column: many steps); in (a) any
 * GEMM2 or combine error above y's rounding. A rare wrong code one step off stays hidden among
 * the flips, as it did under y's tolerance: the quantiser cases check the rule bit for bit.
 * (tests/gpu/fp8_flip_tail.py, the emulation behind the flip term y's check had before, shows
 * the same tail in y.) */
#define A2_FLIP_FRACTION 0.03
#define A2_FLIP_SLACK 8
#define A2_NEAR_Q 2.0
#define A2_SCALE_REL 4e-3
/* y given A2: y's own rounding (see fp8_tolerance), no flip term: the A2 codes are the same. */
#define Y_GIVEN_A2_BF16 4e-3
#define Y_GIVEN_A2_OTHER 1e-3
/* The coarse end-to-end bound of a Hopper FP8 run: one flip moves its element by at most 1/8
 * (a normal e4m3 step; subnormal codes are below 2^-6/448 of their tensor's or group's largest
 * element and carry no weight in y), so y by at most 1/8 of the share of y that element
 * carries, <= 1/8 even when it carries all of y: no single flip can fail it. It still fails an
 * error of order one (a stale scale, wrong rows, NaN), should (a) or (b) ever be blind to it. */
#define WGMMA_FP8_ONE_FLIP 0.125
static double fp8_tolerance(const model *m, int64_t S, bool wgmma) {
    const int64_t I = m->spec.num_shared_experts > 0 && m->spec.shared_intermediate < m->spec.intermediate
                          ? m->spec.shared_intermediate : m->spec.intermediate;
    return (m->y_dtype == MOE_DTYPE_BF16 ? 4e-3 : 1e-3) + 1.0 / (12.0 * sqrt((double)(m->spec.top_k * I * S))) +
           (wgmma ? WGMMA_FP8_ONE_FLIP : 0.0);
}

/* ---- FP8 stage-wise checks: A2 read back, compared with the oracle's, y given A2 ------------- */

/* An FP8 activation tensor on the host: codes [rows, cols] and each row's scales [rows, groups]
 * (fp8-tensor: groups 1, the tensor's scale repeated on every row; fp8-row128: 128-col groups). */
typedef struct fp8_rows {
    int64_t rows, cols, groups;
    uint8_t *codes;
    float *scales;
} fp8_rows;

static fp8_rows fp8_rows_alloc(int64_t rows, int64_t cols, int64_t groups) {
    fp8_rows r = {rows, cols, groups, xmalloc((size_t)(rows * cols)), xmalloc((size_t)(rows * groups) * 4)};
    return r;
}

static void fp8_rows_free(fp8_rows *r) {
    free(r->codes);
    free(r->scales);
    memset(r, 0, sizeof *r);
}

static int64_t act_groups(moe_format act_format, int64_t cols) {
    return act_format == MOE_FORMAT_FP8_TENSOR ? 1 : (cols + 127) / 128;
}

/* The oracle's quantisation of its A2 [rows, cols]: moe_quantize, as src/cpu/forward.c does. */
static fp8_rows oracle_quantize(moe_format f, const float *a2, int64_t rows, int64_t cols) {
    fp8_rows r = fp8_rows_alloc(rows, cols, act_groups(f, cols));
    float *scales = xmalloc((size_t)(rows * r.groups) * 4 + 4);
    scales[0] = 1.0f;
    if (rows > 0 && cols > 0) MOE_OK(NULL, moe_quantize(f, a2, rows, cols, cols, r.codes, scales, NULL));
    for (int64_t i = 0; i < rows * r.groups; i++) r.scales[i] = f == MOE_FORMAT_FP8_TENSOR ? scales[0] : scales[i];
    free(scales);
    return r;
}

/* The values GEMM2 multiplies, codes times their row's scales: moe_dequantize row by row (a row
 * is a one-row matrix with its own scale or groups). A NaN code (a missing row) stays NaN. */
static void fp8_rows_dequantize(const fp8_rows *r, moe_format f, float *out) {
    for (int64_t i = 0; i < r->rows; i++)
        MOE_OK(NULL, moe_dequantize(f, r->codes + i * r->cols, r->scales + i * r->groups, 1.0f, 1, r->cols,
                                    out + i * r->cols, r->cols));
}

/* What a w8a8 forward left in its workspace, copied to the host: the live plan rows, their ids,
 * the A2 rows in plan order and, for a separate shared expert, its A2 [T, Is]. */
typedef struct a2_readback {
    int64_t live, padding_id;
    int32_t *sorted;  /* [live] */
    fp8_rows plan;    /* [live, I] */
    fp8_rows shared;  /* [T, Is], rows 0 when there is none or it is fused */
} a2_readback;

static fp8_rows fetch_act(const moe__cuda_fp8_act *a, int64_t rows) {
    fp8_rows r = fp8_rows_alloc(rows, a->cols, a->groups);
    const int64_t n = a->scale_row_stride ? rows * a->scale_row_stride : 1;
    float *scales = xmalloc((size_t)n * 4);
    CUDA_OK(cudaMemcpy(r.codes, a->codes, (size_t)(rows * a->cols), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(scales, a->scales, (size_t)n * 4, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t g = 0; g < a->groups; g++) r.scales[i * a->groups + g] = scales[i * a->scale_row_stride + g];
    free(scales);
    return r;
}

static a2_readback a2_fetch(const model *m, const device_buffers *b, int64_t T) {
    moe__cuda_fp8_view v;
    MOE_OK(gpu_ctx, moe__cuda_fp8_workspace_view(gpu_ctx, m->w_gpu, T, m->act_format, b->workspace, &v));
    a2_readback g;
    memset(&g, 0, sizeof g);
    CUDA_OK(cudaMemcpy(&g.live, v.offsets + v.experts, 8, cudaMemcpyDeviceToHost));
    if (g.live < 0 || g.live > v.max_rows) {
        printf("    the plan's live row count %lld is outside [0, %lld]: taken as 0\n", (long long)g.live,
               (long long)v.max_rows);
        g.live = 0;
    }
    g.padding_id = v.padding_id;
    g.sorted = xmalloc((size_t)g.live * 4 + 4);
    CUDA_OK(cudaMemcpy(g.sorted, v.sorted_ids, (size_t)g.live * 4, cudaMemcpyDeviceToHost));
    g.plan = fetch_act(&v.a2, g.live);
    if (v.shared_a2.rows > 0) g.shared = fetch_act(&v.shared_a2, v.shared_a2.rows);
    return g;
}

static void a2_readback_free(a2_readback *g) {
    free(g->sorted);
    fp8_rows_free(&g->plan);
    fp8_rows_free(&g->shared);
}

/* Stage (b)'s findings; a *_first string describes the first instance. */
typedef struct a2_report {
    int64_t codes, flips, far;                 /* codes compared, not equal, beyond a flip */
    int64_t bad_ids, rows_missing, rows_repeated;
    int64_t scales, scales_bad;
    double scale_rel_max;
    char far_first[200], rows_first[200], scale_first[200];
} a2_report;

/* Position of an e4m3 code on the e4m3 grid, in steps from zero (+0 and -0 both 0); NaN: none. */
static bool e4m3_position(uint8_t code, int *pos) {
    if ((code & 0x7F) == 0x7F) return false;
    *pos = code & 0x80 ? -(code & 0x7F) : code & 0x7F;
    return true;
}

/* Names row i of a tensor in the oracle's order ("routed" [S*k, I] or "shared" [S, Is]). */
static void row_label(char *buf, size_t size, bool routed, int64_t i, const int64_t *tok, int64_t k) {
    if (routed)
        snprintf(buf, size, "token %lld slot %lld", (long long)tok[i / k], (long long)(i % k));
    else
        snprintf(buf, size, "token %lld of the shared expert", (long long)tok[i]);
}

/* Compares the GPU's rows (in the oracle's order) with the oracle's, code by code and scale by
 * scale, skipping rows the GPU did not provide (a2_analyse counts those). */
static void a2_compare(a2_report *r, const fp8_rows *gpu, const bool *present, const fp8_rows *oracle, bool routed,
                       const int64_t *tok, int64_t k) {
    for (int64_t i = 0; i < oracle->rows; i++) {
        if (!present[i]) continue;
        for (int64_t c = 0; c < oracle->cols; c++) {
            const uint8_t g = gpu->codes[i * gpu->cols + c], o = oracle->codes[i * oracle->cols + c];
            int pg, po;
            r->codes++;
            const bool valid = e4m3_position(g, &pg) && e4m3_position(o, &po);
            if (valid && pg == po) continue;
            const double qg = moe_e4m3_to_float(g), qo = moe_e4m3_to_float(o);
            const bool flip = valid && (abs(pg - po) == 1 || fabs(qg - qo) <= A2_NEAR_Q);
            r->flips++;
            if (flip) continue;
            if (r->far++ == 0) {
                char row[80];
                row_label(row, sizeof row, routed, i, tok, k);
                snprintf(r->far_first, sizeof r->far_first, "%s column %lld: code 0x%02x (%g x scale), oracle "
                         "0x%02x (%g)", row, (long long)c, g, qg, o, qo);
            }
        }
        for (int64_t j = 0; j < oracle->groups; j++) {
            const double sg = gpu->scales[i * gpu->groups + j], so = oracle->scales[i * oracle->groups + j];
            const double rel = fabs(sg - so) / so, d = isnan(rel) ? INFINITY : rel;
            r->scales++;
            if (d > r->scale_rel_max) r->scale_rel_max = d;
            if (d <= A2_SCALE_REL) continue;
            if (r->scales_bad++ == 0) {
                char row[80];
                row_label(row, sizeof row, routed, i, tok, k);
                snprintf(r->scale_first, sizeof r->scale_first, "%s group %lld: %a, oracle %a", row, (long long)j, sg,
                         so);
            }
        }
    }
}

/* Whether the rows problem about to be counted is the report's first (to describe it). */
static bool first_rows_problem(const a2_report *r) { return r->bad_ids + r->rows_missing + r->rows_repeated == 0; }

/* Copies GPU row `src` of `from` to row `dst` of `to`, unless that row was filled already. */
static void take_row(a2_report *r, fp8_rows *to, bool *present, int64_t dst, const fp8_rows *from, int64_t src,
                     int64_t plan_row) {
    if (present[dst]) {
        if (first_rows_problem(r))
            snprintf(r->rows_first, sizeof r->rows_first, "%s row %lld holds a row already found (oracle row %lld)",
                     plan_row >= 0 ? "plan" : "shared", (long long)(plan_row >= 0 ? plan_row : src), (long long)dst);
        r->rows_repeated++;
        return;
    }
    present[dst] = true;
    memcpy(to->codes + dst * to->cols, from->codes + src * from->cols, (size_t)to->cols);
    memcpy(to->scales + dst * to->groups, from->scales + src * from->groups, (size_t)to->groups * 4);
}

/* Stage (b): the GPU's A2 rows put in the oracle's order for the oracle tokens tok[0..S) of T
 * (routed rows [S*k, I]: row i*k + slot; the shared expert's [S, Is]: row i, from the plan when
 * fused, else from the separate tensor), then compared with the oracle's. gpu_routed /
 * gpu_shared come out with the GPU's rows (NaN codes where one is missing). */
static a2_report a2_analyse(const a2_readback *g, const fp8_rows *o_routed, const fp8_rows *o_shared,
                            const int64_t *tok, int64_t S, int64_t T, int64_t k, fp8_rows *gpu_routed,
                            fp8_rows *gpu_shared) {
    a2_report r;
    memset(&r, 0, sizeof r);
    int64_t *index = xmalloc((size_t)T * 8 + 8); /* token -> its position among the oracle tokens, or -1 */
    for (int64_t t = 0; t < T; t++) index[t] = -1;
    for (int64_t i = 0; i < S; i++) index[tok[i]] = i;
    *gpu_routed = fp8_rows_alloc(o_routed->rows, o_routed->cols, o_routed->groups);
    *gpu_shared = fp8_rows_alloc(o_shared->rows, o_shared->cols, o_shared->groups);
    memset(gpu_routed->codes, 0x7F, (size_t)(gpu_routed->rows * gpu_routed->cols)); /* NaN until found */
    memset(gpu_shared->codes, 0x7F, (size_t)(gpu_shared->rows * gpu_shared->cols));
    for (int64_t i = 0; i < gpu_routed->rows * gpu_routed->groups; i++) gpu_routed->scales[i] = 1.0f;
    for (int64_t i = 0; i < gpu_shared->rows * gpu_shared->groups; i++) gpu_shared->scales[i] = 1.0f;
    bool *has_routed = xmalloc((size_t)o_routed->rows + 1), *has_shared = xmalloc((size_t)o_shared->rows + 1);
    memset(has_routed, 0, (size_t)o_routed->rows + 1);
    memset(has_shared, 0, (size_t)o_shared->rows + 1);
    const int64_t pad = g->padding_id;
    for (int64_t p = 0; p < g->live; p++) {
        const int64_t id = g->sorted[p];
        if (id == pad) continue;
        if (id >= 0 && id < pad) {
            const int64_t i = index[id / k];
            if (i >= 0) take_row(&r, gpu_routed, has_routed, i * k + id % k, &g->plan, p, p);
        } else if (id > pad && id - pad - 1 < T && o_shared->rows > 0 && g->shared.rows == 0) {
            const int64_t i = index[id - pad - 1];
            if (i >= 0) take_row(&r, gpu_shared, has_shared, i, &g->plan, p, p);
        } else {
            if (first_rows_problem(&r))
                snprintf(r.rows_first, sizeof r.rows_first, "plan row %lld holds id %lld, not a row id of this plan",
                         (long long)p, (long long)id);
            r.bad_ids++;
        }
    }
    for (int64_t i = 0; i < S && g->shared.rows > 0; i++)
        take_row(&r, gpu_shared, has_shared, i, &g->shared, tok[i], -1);
    for (int64_t i = 0; i < o_routed->rows + o_shared->rows; i++) {
        const bool routed = i < o_routed->rows, *has = routed ? has_routed : has_shared;
        const int64_t row = routed ? i : i - o_routed->rows;
        if (has[row]) continue;
        if (first_rows_problem(&r)) {
            char label[80];
            row_label(label, sizeof label, routed, row, tok, k);
            snprintf(r.rows_first, sizeof r.rows_first, "no live row holds %s", label);
        }
        r.rows_missing++;
    }
    a2_compare(&r, gpu_routed, has_routed, o_routed, true, tok, k);
    a2_compare(&r, gpu_shared, has_shared, o_shared, false, tok, k);
    free(index), free(has_routed), free(has_shared);
    return r;
}

/* The stages of (b) that a report fails: a bit each. */
enum { A2_ROWS = 1, A2_CODES = 2, A2_FLIPS = 4, A2_SCALES = 8 };
static int64_t a2_flip_bound(int64_t codes) { return (int64_t)(A2_FLIP_FRACTION * (double)codes) + A2_FLIP_SLACK; }
static unsigned a2_failures(const a2_report *r) {
    return (r->bad_ids || r->rows_missing || r->rows_repeated ? A2_ROWS : 0) | (r->far ? A2_CODES : 0) |
           (r->flips > a2_flip_bound(r->codes) ? A2_FLIPS : 0) | (r->scales_bad ? A2_SCALES : 0);
}

static void a2_check(const a2_report *r, const char *what) {
    const unsigned f = a2_failures(r);
    CHECK(!(f & A2_ROWS), "%s: A2 rows: %lld ids not of the plan, %lld rows of the oracle tokens missing, %lld "
          "repeated (first: %s)", what, (long long)r->bad_ids, (long long)r->rows_missing, (long long)r->rows_repeated,
          r->rows_first);
    CHECK(!(f & A2_CODES), "%s: A2 codes: %lld of %lld more than one e4m3 step (and more than %g x scale) from the "
          "oracle's (first: %s)", what, (long long)r->far, (long long)r->codes, A2_NEAR_Q, r->far_first);
    CHECK(!(f & A2_FLIPS), "%s: A2 codes: %lld of %lld differ from the oracle's (%.2f%%), more than %lld (%g%% + %d)",
          what, (long long)r->flips, (long long)r->codes, 100.0 * (double)r->flips / (double)(r->codes ? r->codes : 1),
          (long long)a2_flip_bound(r->codes), 100.0 * A2_FLIP_FRACTION, A2_FLIP_SLACK);
    CHECK(!(f & A2_SCALES), "%s: A2 scale: %lld of %lld scales off the oracle's by more than %.0e relative, max %.2e "
          "(first: %s)", what, (long long)r->scales_bad, (long long)r->scales, A2_SCALE_REL, r->scale_rel_max,
          r->scale_first);
}

/* Relative Frobenius error of the GPU's y on the oracle tokens against y_ref [S, H]. */
static double y_rel_err(const model *m, const void *y, const int64_t *tok, int64_t S, const float *y_ref) {
    const int64_t H = m->spec.hidden;
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < S; i++)
        for (int64_t h = 0; h < H; h++) {
            const double r = y_ref[i * H + h], g = y_at(m, y, tok[i], h);
            num += (g - r) * (g - r);
            den += r * r;
        }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* The oracle's A2 of one run, before quantisation (moe__cpu_forward_a2's a2_out). */
typedef struct oracle_a2 {
    float *routed; /* [S*k, I] */
    float *shared; /* [S, Is] or NULL */
} oracle_a2;

static oracle_a2 oracle_a2_alloc(const model *m, int64_t S) {
    const moe_layer_spec *s = &m->spec;
    oracle_a2 o = {xmalloc((size_t)(S * s->top_k * s->intermediate) * 4 + 4), NULL};
    if (s->num_shared_experts > 0) o.shared = xmalloc((size_t)(S * s->shared_intermediate) * 4 + 4);
    return o;
}

static void oracle_a2_free(oracle_a2 *o) {
    free(o->routed);
    free(o->shared);
}

/* Stages (a) and (b) of a Hopper FP8 run (above) from its readback g, on the oracle tokens
 * tok[0..S) of `in`; y: the GPU's y on the host; o: the oracle's A2 of the same inputs. Returns
 * (a)'s error (y against the oracle given the GPU's A2); *report gets (b)'s findings. */
static double fp8_stages(const model *m, const inputs *in, const int64_t *tok, int64_t S, const void *y,
                         const oracle_a2 *o, const a2_readback *g, a2_report *report) {
    const moe_layer_spec *s = &m->spec;
    const int64_t H = s->hidden, k = s->top_k, I = s->intermediate, Is = o->shared ? s->shared_intermediate : 0;
    const moe_format f = m->act_format;
    fp8_rows o_routed = oracle_quantize(f, o->routed, S * k, I);
    fp8_rows o_shared = oracle_quantize(f, o->shared, o->shared ? S : 0, Is);
    fp8_rows g_routed, g_shared;
    *report = a2_analyse(g, &o_routed, &o_shared, tok, S, in->T, k, &g_routed, &g_shared);
    /* (a): the oracle with the GPU's A2. */
    moe__cpu_a2_exchange xa = {xmalloc((size_t)(S * k * I) * 4 + 4), NULL, NULL, NULL};
    fp8_rows_dequantize(&g_routed, f, (float *)xa.a2_in);
    if (o->shared) {
        xa.shared_a2_in = xmalloc((size_t)(S * Is) * 4 + 4);
        fp8_rows_dequantize(&g_shared, f, (float *)xa.shared_a2_in);
    }
    float *y_given = xmalloc((size_t)(S * H) * 4 + 4);
    int32_t *ids = xmalloc((size_t)(S * k) * 4 + 4);
    float *weights = xmalloc((size_t)(S * k) * 4 + 4);
    cpu_forward_a2(m, in, tok, S, y_given, ids, weights, &xa);
    const double err = y_rel_err(m, y, tok, S, y_given);
    free((void *)xa.a2_in), free((void *)xa.shared_a2_in), free(y_given), free(ids), free(weights);
    fp8_rows_free(&o_routed), fp8_rows_free(&o_shared), fp8_rows_free(&g_routed), fp8_rows_free(&g_shared);
    return err;
}

/* Checks the GPU's outputs (in the device buffers) against the CPU oracle on up to
 * `oracle_limit` tokens; returns the relative error. */
static double check_outputs(const model *m, const device_buffers *b, const inputs *in, int64_t oracle_limit,
                            const char *what) {
    const moe_layer_spec *s = &m->spec;
    const int64_t T = in->T, H = s->hidden, k = s->top_k;
    void *y = xmalloc(y_bytes(m, T));
    int32_t *ids = xmalloc((size_t)(T * k) * 4);
    float *weights = xmalloc((size_t)(T * k) * 4);
    CUDA_OK(cudaMemcpy(y, b->y, y_bytes(m, T), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(ids, b->out_ids, (size_t)(T * k) * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(weights, b->out_weights, (size_t)(T * k) * 4, cudaMemcpyDeviceToHost));

    /* Every y element written (finite: the poison is NaN and the inputs are tame). */
    int64_t bad = 0, first_bad = -1;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++)
            if (!isfinite(y_at(m, y, t, h)) && bad++ == 0) first_bad = t * H + h;
    CHECK(bad == 0, "%s: %lld y elements not finite (first at token %lld, column %lld)", what, (long long)bad,
          (long long)(first_bad / H), (long long)(first_bad % H));

    /* Routing of all T tokens against moe_route on the host (given logits), or the given ids. */
    if (in->routing != R_ROUTER) {
        int32_t *rids = xmalloc((size_t)(T * k) * 4);
        float *rw = xmalloc((size_t)(T * k) * 4);
        cpu_routing(m, in, rids, rw);
        int64_t id_bad = 0, w_bad = 0;
        for (int64_t i = 0; i < T * k; i++) {
            if (ids[i] != rids[i] && id_bad++ == 0)
                printf("    %s: ids[%lld] = %d, cpu %d\n", what, (long long)i, ids[i], rids[i]);
            if (!(fabsf(weights[i] - rw[i]) <= 1e-6f * fabsf(rw[i])) && w_bad++ == 0)
                printf("    %s: weights[%lld] = %.9g, cpu %.9g\n", what, (long long)i, weights[i], rw[i]);
        }
        CHECK(id_bad == 0, "%s: %lld routing ids differ from the CPU's", what, (long long)id_bad);
        CHECK(w_bad == 0, "%s: %lld routing weights differ from the CPU's", what, (long long)w_bad);
        free(rids);
        free(rw);
    }

    /* y (and, for the router path, the routing) on the oracle tokens. fp8-tensor activations
     * are the exception: their scales are taken over the whole x [T, H] and the whole routed
     * A2 [T*k, I], so tokens are not independent and the CPU forward on a subset of them uses
     * other scales (measured on the CPU alone: 3.7e-2 between the subset's y and the same rows
     * of the full forward, 0 for fp8-row128): the oracle runs on all T tokens. */
    if (m->act_format == MOE_FORMAT_FP8_TENSOR && oracle_limit < T) oracle_limit = T;
    int64_t *tok = xmalloc((size_t)oracle_limit * 8 + 8);
    const int64_t S = oracle_tokens(T, oracle_limit, tok);
    float *yref = xmalloc((size_t)(S * H) * 4);
    int32_t *cids = xmalloc((size_t)(S * k) * 4);
    float *cw = xmalloc((size_t)(S * k) * 4);
    /* A Hopper FP8 run: the oracle's A2 comes out too, for the stage-wise checks. */
    const bool wgmma = m->act_format != MOE_FORMAT_F32 && case_path == MOE__CUDA_GEMM_HOPPER;
    oracle_a2 oa = {NULL, NULL};
    if (wgmma) {
        oa = oracle_a2_alloc(m, S);
        const moe__cpu_a2_exchange xa = {NULL, NULL, oa.routed, oa.shared};
        cpu_forward_a2(m, in, tok, S, yref, cids, cw, &xa);
    } else {
        cpu_forward(m, in, tok, S, yref, cids, cw);
    }
    int64_t id_bad = 0;
    for (int64_t i = 0; i < S; i++)
        for (int64_t j = 0; j < k; j++)
            if (ids[tok[i] * k + j] != cids[i * k + j]) id_bad++;
    CHECK(id_bad == 0, "%s: %lld routing ids differ from the CPU forward's on the oracle tokens", what,
          (long long)id_bad);
    const double err = y_rel_err(m, y, tok, S, yref);
    const double tol = m->act_format != MOE_FORMAT_F32 ? fp8_tolerance(m, S, wgmma)
                       : m->format == MOE_FORMAT_F16 ? 2e-3 : 1e-2;
    CHECK(err <= tol, "%s: y: relative error %.3e > %.3g%s", what, err, tol,
          wgmma ? " (Hopper FP8: the coarse end-to-end bound; the stage-wise checks are the precise ones)" : "");
    if (wgmma && S > 0) {
        a2_readback g = a2_fetch(m, b, T);
        a2_report rep;
        const double given = fp8_stages(m, in, tok, S, y, &oa, &g, &rep);
        const double tol_given = m->y_dtype == MOE_DTYPE_BF16 ? Y_GIVEN_A2_BF16 : Y_GIVEN_A2_OTHER;
        CHECK(given <= tol_given, "%s: y given the GPU's A2 (GEMM2 + combine on the same A2 codes): relative error "
              "%.3e > %.0e", what, given, tol_given);
        a2_check(&rep, what);
        printf("    %s: stages: y|A2 %.2e; A2 codes %lld, %lld differ (%.2f%%, bound %lld), %lld beyond a flip; "
               "scales max diff %.1e; rows: %lld missing, %lld repeated, %lld bad ids\n", what, given,
               (long long)rep.codes, (long long)rep.flips,
               100.0 * (double)rep.flips / (double)(rep.codes ? rep.codes : 1), (long long)a2_flip_bound(rep.codes),
               (long long)rep.far, rep.scale_rel_max, (long long)rep.rows_missing, (long long)rep.rows_repeated,
               (long long)rep.bad_ids);
        a2_readback_free(&g);
    }
    oracle_a2_free(&oa);
    free(tok);
    free(yref);
    free(cids);
    free(cw);
    free(y);
    free(ids);
    free(weights);
    return err;
}

/* The device plan (moe__cuda_plan_build) vs moe_dispatch_plan_build, for the ids in
 * d_ids [T, k] (device): block `block`; with shared_rows = T the fused shared expert's
 * rows (ids T*k + 1 + t, after the routed total) are checked too. */
static void check_plan(const int32_t *d_ids, int64_t T, int64_t k, int64_t E, int64_t block, int64_t shared_rows,
                       const char *what) {
    int64_t max_rows, max_blocks;
    MOE_OK(NULL, moe_dispatch_plan_bounds(T, k, E, block, &max_rows, &max_blocks));
    int32_t *ids = xmalloc((size_t)(T * k) * 4 + 4);
    CUDA_OK(cudaMemcpy(ids, d_ids, (size_t)(T * k) * 4, cudaMemcpyDeviceToHost));
    moe_dispatch_plan cp = {0};
    cp.expert_counts = xmalloc((size_t)E * 8);
    cp.expert_offsets = xmalloc((size_t)(E + 1) * 8);
    cp.sorted_ids = xmalloc((size_t)max_rows * 4 + 4);
    cp.block_expert = xmalloc((size_t)max_blocks * 4 + 4);
    MOE_OK(cpu_ctx, moe_dispatch_plan_build(cpu_ctx, ids, T, k, E, block, &cp));

    const int64_t experts = E + (shared_rows ? 1 : 0);
    const int64_t g_rows = T * k + shared_rows + experts * (block - 1), g_blocks = (g_rows + block - 1) / block;
    moe_dispatch_plan gp = {0}, hp = {0};
    CUDA_OK(cudaMalloc((void **)&gp.expert_counts, (size_t)experts * 8));
    CUDA_OK(cudaMalloc((void **)&gp.expert_offsets, (size_t)(experts + 1) * 8));
    CUDA_OK(cudaMalloc((void **)&gp.sorted_ids, (size_t)g_rows * 4 + 4));
    CUDA_OK(cudaMalloc((void **)&gp.block_expert, (size_t)g_blocks * 4 + 4));
    CUDA_OK(cudaMemset(gp.sorted_ids, 0x7F, (size_t)g_rows * 4 + 4)); /* poison */
    CUDA_OK(cudaMemset(gp.block_expert, 0x7F, (size_t)g_blocks * 4 + 4));
    MOE_OK(gpu_ctx, moe__cuda_plan_build(gpu_ctx, d_ids, T, k, E, block, shared_rows, &gp, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    CHECK(gp.max_rows == g_rows && gp.max_blocks == g_blocks, "%s: plan bounds %lld/%lld, expected %lld/%lld", what,
          (long long)gp.max_rows, (long long)gp.max_blocks, (long long)g_rows, (long long)g_blocks);
    hp.expert_counts = xmalloc((size_t)experts * 8);
    hp.expert_offsets = xmalloc((size_t)(experts + 1) * 8);
    hp.sorted_ids = xmalloc((size_t)g_rows * 4 + 4);
    hp.block_expert = xmalloc((size_t)g_blocks * 4 + 4);
    CUDA_OK(cudaMemcpy(hp.expert_counts, gp.expert_counts, (size_t)experts * 8, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hp.expert_offsets, gp.expert_offsets, (size_t)(experts + 1) * 8, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hp.sorted_ids, gp.sorted_ids, (size_t)g_rows * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hp.block_expert, gp.block_expert, (size_t)g_blocks * 4, cudaMemcpyDeviceToHost));

    int64_t bad = 0;
    for (int64_t e = 0; e < E; e++) bad += hp.expert_counts[e] != cp.expert_counts[e];
    for (int64_t e = 0; e <= E; e++) bad += hp.expert_offsets[e] != cp.expert_offsets[e];
    CHECK(bad == 0, "%s: %lld counts/offsets differ", what, (long long)bad);
    const int64_t routed_total = cp.expert_offsets[E], pad = T * k;
    bad = 0;
    if (!shared_rows) {
        for (int64_t i = 0; i < max_rows; i++) bad += hp.sorted_ids[i] != cp.sorted_ids[i];
        CHECK(bad == 0, "%s: %lld sorted ids differ", what, (long long)bad);
        bad = 0;
        for (int64_t i = 0; i < max_blocks; i++) bad += hp.block_expert[i] != cp.block_expert[i];
        CHECK(bad == 0, "%s: %lld block owners differ", what, (long long)bad);
    } else {
        const int64_t shared_end = routed_total + (T + block - 1) / block * block;
        CHECK(hp.expert_counts[E] == T && hp.expert_offsets[E + 1] == shared_end,
              "%s: shared expert count %lld offset %lld, expected %lld %lld", what, (long long)hp.expert_counts[E],
              (long long)hp.expert_offsets[E + 1], (long long)T, (long long)shared_end);
        for (int64_t i = 0; i < g_rows; i++) {
            int32_t want = i < routed_total ? cp.sorted_ids[i] : i < routed_total + T ? (int32_t)(pad + 1 + i - routed_total) : (int32_t)pad;
            bad += hp.sorted_ids[i] != want;
        }
        CHECK(bad == 0, "%s: %lld sorted ids differ (shared rows fused)", what, (long long)bad);
        bad = 0;
        for (int64_t b = 0; b < g_blocks; b++) {
            int32_t want = b * block < routed_total ? cp.block_expert[b] : b * block < shared_end ? (int32_t)E : -1;
            bad += hp.block_expert[b] != want;
        }
        CHECK(bad == 0, "%s: %lld block owners differ (shared rows fused)", what, (long long)bad);
    }
    CUDA_OK(cudaFree(gp.expert_counts));
    CUDA_OK(cudaFree(gp.expert_offsets));
    CUDA_OK(cudaFree(gp.sorted_ids));
    CUDA_OK(cudaFree(gp.block_expert));
    free(hp.expert_counts), free(hp.expert_offsets), free(hp.sorted_ids), free(hp.block_expert);
    free(cp.expert_counts), free(cp.expert_offsets), free(cp.sorted_ids), free(cp.block_expert);
    free(ids);
}

/* ---- one case: a model at T tokens ------------------------------------------------------ */
typedef struct run_spec {
    int64_t T;
    int routing, replay_routing; /* the replay's routing is of the same kind, new values */
    int64_t oracle_limit;
    bool graph;
} run_spec;

/* The stale-rows case's replay x is scaled by 2^-replay_x_shift (0: as drawn; set around
 * one run_model call only). */
static int replay_x_shift;

/* x of `in` scaled by 2^-shift in place (exact: a power of two, far from under/overflow). */
static void scale_x(const model *m, inputs *in, int shift) {
    const int64_t n = in->T * (m->spec.hidden + m->x_pad);
    for (int64_t i = 0; i < n; i++) {
        if (in->x32) in->x32[i] = ldexpf(in->x32[i], -shift);
        else if (m->x_dtype == MOE_DTYPE_BF16)
            in->x16[i] = moe_float_to_bf16(ldexpf(moe_bf16_to_float(in->x16[i]), -shift));
        else
            in->x16[i] = moe_float_to_f16(ldexpf(moe_f16_to_float(in->x16[i]), -shift));
    }
}

static void run_case(model *m, run_spec r) {
    char name[200];
    const char *forced = getenv("MOEFUSE_GEMM");
    const int path = moe__cuda_forward_gemm(m->w_gpu, r.T);
    case_path = path;
    snprintf(name, sizeof name, "%s T=%lld %s/%s [MOEFUSE_GEMM=%s ran %s]", m->name, (long long)r.T,
             routing_name(r.routing), r.graph ? routing_name(r.replay_routing) : "-", forced ? forced : "auto",
             moe__cuda_gemm_name(path));
    case_failures = 0;
    const moe_layer_spec *s = &m->spec;
    device_buffers b;
    device_alloc(m, &b, r.T, r.routing);
    inputs in = {0};
    inputs_draw(m, &in, r.T, r.routing);
    device_upload(m, &b, &in);

    cudaEvent_t t0, t1;
    CUDA_OK(cudaEventCreate(&t0));
    CUDA_OK(cudaEventCreate(&t1));
    CUDA_OK(cudaEventRecord(t0, stream));
    moe_status st = moe_forward(gpu_ctx, m->w_gpu, &b.args);
    CUDA_OK(cudaEventRecord(t1, stream));
    CHECK(st == MOE_STATUS_OK, "moe_forward: %s: %s", moe_status_string(st), moe_last_error(gpu_ctx));
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaGetLastError());
    float ms = 0.0f;
    CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
    double err = st == MOE_STATUS_OK ? check_outputs(m, &b, &in, r.oracle_limit, "eager") : NAN;
    /* The plan with the block this forward used (64, or 128 for the prefill tile). */
    const int64_t block = moe__cuda_forward_block_rows(m->w_gpu, r.T);
    CHECK(block == (path == MOE__CUDA_GEMM_HOPPER ? 128 : 64), "moe__cuda_forward_block_rows = %lld on path %s",
          (long long)block, moe__cuda_gemm_name(path));
    check_plan((const int32_t *)b.out_ids, r.T, s->top_k, s->num_experts, block, 0, "plan");
    if (s->num_shared_experts > 0 && s->shared_intermediate == s->intermediate)
        check_plan((const int32_t *)b.out_ids, r.T, s->top_k, s->num_experts, block, r.T, "plan+shared");

    double gerr = NAN;
    if (r.graph && st == MOE_STATUS_OK) {
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        st = moe_forward(gpu_ctx, m->w_gpu, &b.args);
        CUDA_OK(cudaStreamEndCapture(stream, &graph));
        CHECK(st == MOE_STATUS_OK, "moe_forward under capture: %s: %s", moe_status_string(st), moe_last_error(gpu_ctx));
        CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
        /* New x and new routing in the same buffers; the graph must follow them. */
        inputs_free(&in);
        inputs_draw(m, &in, r.T, r.replay_routing);
        if (replay_x_shift) scale_x(m, &in, replay_x_shift);
        device_upload(m, &b, &in);
        CUDA_OK(cudaGraphLaunch(exec, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        gerr = check_outputs(m, &b, &in, r.oracle_limit, "graph replay");
        check_plan((const int32_t *)b.out_ids, r.T, s->top_k, s->num_experts, block, 0, "replay plan");
        /* FP8: every step is deterministic (no float atomics; amax is an order-free atomicMax),
         * so y may depend on the inputs only: a second replay on the same inputs must give the
         * same bits. It fails when a run reads workspace words that the run itself rewrites
         * (an accumulator or amax not reset, a plan or A2 row left by the eager run's routing
         * that the first replay overwrote), however small the effect on the error. (Rows that
         * neither replay writes are the stale-rows case's job, fp8-relu2-stale-rows-tensor.) */
        if (m->act_format != MOE_FORMAT_F32) {
            void *y1 = xmalloc(y_bytes(m, r.T)), *y2 = xmalloc(y_bytes(m, r.T));
            CUDA_OK(cudaMemcpy(y1, b.y, y_bytes(m, r.T), cudaMemcpyDeviceToHost));
            CUDA_OK(cudaMemsetAsync(b.y, 0xFF, y_bytes(m, r.T), stream));
            CUDA_OK(cudaGraphLaunch(exec, stream));
            CUDA_OK(cudaStreamSynchronize(stream));
            CUDA_OK(cudaMemcpy(y2, b.y, y_bytes(m, r.T), cudaMemcpyDeviceToHost));
            CHECK(memcmp(y1, y2, y_bytes(m, r.T)) == 0,
                  "graph replay: y differs between two replays on the same inputs (workspace state leaks into y)");
            free(y1);
            free(y2);
        }
        CUDA_OK(cudaGraphExecDestroy(exec));
        CUDA_OK(cudaGraphDestroy(graph));
    }
    CUDA_OK(cudaEventDestroy(t0));
    CUDA_OK(cudaEventDestroy(t1));
    inputs_free(&in);
    device_free(&b);
    if (case_failures == 0) cases_passed++, path_passed[path]++;
    else cases_failed++, path_failed[path]++;
    printf("%s %s: block %lld, err %.2e, graph err %.2e, first call %.3f ms\n", case_failures ? "FAIL" : "ok  ", name,
           (long long)block, err, gerr, ms);
    fflush(stdout);
}

/* ---- the case list ------------------------------------------------------------------- */
static const char *filter;
static bool selected(const char *name) { return !filter || strstr(name, filter); }

static void model_init(model *m, const char *name, const moe_layer_spec *spec, moe_format format,
                       moe_gate_up_layout layout, moe_dtype x_dtype, moe_dtype y_dtype) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->spec = *spec;
    m->format = format;
    m->layout = layout;
    m->x_dtype = x_dtype;
    m->y_dtype = y_dtype;
}

/* A preset's routing and MLP options on small H and I (E, k and the grouping kept). */
static bool preset_small(const char *preset, moe_layer_spec *s) {
    moe_model_config cfg;
    if (moe_config_preset(cpu_ctx, preset, &cfg) != MOE_STATUS_OK) {
        printf("note: preset %s not found: %s\n", preset, moe_last_error(cpu_ctx));
        return false;
    }
    *s = cfg.layer;
    const bool fused = s->num_shared_experts > 0 && s->shared_intermediate == s->intermediate;
    s->hidden = 256;
    s->intermediate = 96; /* not a multiple of the 128-wide tile nor of BK = 64: tails covered */
    if (s->num_shared_experts > 0) s->shared_intermediate = fused ? 96 : 160;
    return true;
}

/* A PERF.md shape: the preset's options with its real H and I, and `experts` experts (the
 * CPU oracle packs and holds every expert; the GPU path is the same for any E). */
static bool preset_shape(const char *preset, int64_t experts, moe_layer_spec *s) {
    moe_model_config cfg;
    if (moe_config_preset(cpu_ctx, preset, &cfg) != MOE_STATUS_OK) return false;
    *s = cfg.layer;
    s->num_experts = experts;
    if (s->n_group > 1) {
        while (s->n_group > 1 && (experts % s->n_group != 0 || experts / s->n_group < 2)) s->n_group /= 2;
        if (s->topk_group > s->n_group) s->topk_group = s->n_group;
        while (s->topk_group * (experts / (s->n_group > 1 ? s->n_group : 1)) < s->top_k) s->topk_group++;
    }
    return moe_layer_spec_validate(cpu_ctx, s) == MOE_STATUS_OK;
}

/* The runs of a PERF.md shape: T = 1, 3, 8, 64, 129, 512, 4096 (or --perf's list), ids
 * given as in the benchmark, the router path at T = 64 and 512; the oracle on 48 tokens. */
static int perf_runs(run_spec r[8]) {
    static const int64_t perf_T[] = {1, 3, 8, 64, 129, 512, 4096};
    const int64_t *Ts = n_perf_T_arg ? perf_T_arg : perf_T;
    const int nT = n_perf_T_arg ? n_perf_T_arg : 7;
    for (int j = 0; j < nT; j++) {
        const int64_t T = Ts[j];
        const int routing = T == 64 || T == 512 ? R_ROUTER : R_IDS;
        const int replay = routing == R_ROUTER ? R_ROUTER : j % 2 ? R_IDS_ONE : R_IDS_FEW;
        r[j] = (run_spec){T, routing, replay, 48, true};
    }
    return nT;
}

static void run_model(model *m, const run_spec *runs, int nruns) {
    if (!selected(m->name)) return;
    MOE_OK(cpu_ctx, moe_layer_spec_validate(cpu_ctx, &m->spec));
    clock_t c0 = clock();
    model_build(m);
    printf("# %s: E=%lld H=%lld I=%lld k=%lld Is=%lld %s%s%s %s act=%s score=%s groups=%lld/%lld (weights packed in %.1f s cpu)\n",
           m->name, (long long)m->spec.num_experts, (long long)m->spec.hidden, (long long)m->spec.intermediate,
           (long long)m->spec.top_k, (long long)m->spec.shared_intermediate, moe_format_name(m->format),
           m->act_format != MOE_FORMAT_F32 ? " acts " : "",
           m->act_format != MOE_FORMAT_F32 ? moe_format_name(m->act_format) : "",
           moe_dtype_name(m->x_dtype), moe_activation_name(m->spec.activation), moe_score_name(m->spec.score),
           (long long)m->spec.n_group, (long long)m->spec.topk_group, (double)(clock() - c0) / CLOCKS_PER_SEC);
    for (int g = first_path; g <= last_path; g++) {
        setenv("MOEFUSE_GEMM", gemm_paths[g], 1);
        for (int i = 0; i < nruns; i++) {
            /* FP8: a forced-hopper run that falls back to v1 would repeat the v1 pass's case
             * (the FP8 oracle is the expensive part of the suite). */
            if (is_fp8_format(m->format) && g == 1 && first_path == 0 &&
                moe__cuda_forward_gemm(m->w_gpu, runs[i].T) != MOE__CUDA_GEMM_HOPPER)
                continue;
            run_case(m, runs[i]);
        }
    }
    unsetenv("MOEFUSE_GEMM");
    model_free(m);
}

static void plan_cases(bool quick) {
    static const struct {
        int64_t T, k, E, block;
    } cases[] = {{0, 2, 8, 64},   {1, 1, 1, 64},     {1, 8, 256, 64},   {3, 4, 4, 1},     {129, 2, 8, 7},
                 {1000, 8, 128, 64}, {4096, 8, 256, 128}, {20000, 6, 64, 64}, {65536, 8, 512, 64}};
    const int n = quick ? 5 : (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < n; c++) {
        const int64_t T = cases[c].T, k = cases[c].k, E = cases[c].E, block = cases[c].block;
        for (int pattern = 0; pattern < 3; pattern++) {
            char name[128];
            snprintf(name, sizeof name, "plan T=%lld k=%lld E=%lld block=%lld %s", (long long)T, (long long)k,
                     (long long)E, (long long)block, pattern == 0 ? "random" : pattern == 1 ? "one-expert" : "few-experts");
            if (!selected(name)) continue;
            case_failures = 0;
            int32_t *ids = xmalloc((size_t)(T * k) * 4 + 4);
            for (int64_t t = 0; t < T; t++)
                for (int64_t j = 0; j < k; j++) {
                    int64_t pool = pattern == 2 ? (E / 4 > k ? E / 4 : k) : E;
                    /* distinctness is not required by the plan: duplicates are legal rows */
                    ids[t * k + j] = pattern == 1 ? (int32_t)j : (int32_t)(rng_next() % (uint64_t)pool);
                }
            int32_t *d_ids;
            CUDA_OK(cudaMalloc((void **)&d_ids, (size_t)(T * k) * 4 + 4));
            CUDA_OK(cudaMemcpy(d_ids, ids, (size_t)(T * k) * 4, cudaMemcpyHostToDevice));
            check_plan(d_ids, T, k, E, block, 0, "plan");
            check_plan(d_ids, T, k, E, block, T, "plan+shared");
            CUDA_OK(cudaFree(d_ids));
            free(ids);
            if (case_failures == 0) cases_passed++;
            else cases_failed++;
            printf("%s %s\n", case_failures ? "FAIL" : "ok  ", name);
        }
    }
}

/* ---- FP8 (w8a8) ------------------------------------------------------------------------ */

/* An fp32 value whose quotient by s rounds, in fp32, onto an e4m3 rounding midpoint m (or
 * lands next to it): x = m * s rounded, then nudged by -2..2 ulps. Most such x have x / s !=
 * m exactly while fl32(x / s) == m: a quantiser that rounds the fp32 quotient again (double
 * rounding) then picks the wrong neighbour half of the time; moe_quantize forms the quotient in
 * double and never does. Magnitudes stay below amax. */
static float midpoint_trap(float s, float amax) {
    double m;
    if (rng_next() % 4 == 0) m = (double)(2 * (int)(rng_next() % 8) + 1) * 0x1p-10; /* subnormal midpoints */
    else m = ldexp(1.0 + ((double)(rng_next() % 8) + 0.5) / 8.0, (int)(rng_next() % 14) - 6);
    float x = (float)(m * s);
    for (int d = (int)(rng_next() % 5) - 2; d != 0; d += d > 0 ? -1 : 1) x = nextafterf(x, d > 0 ? INFINITY : 0.0f);
    if (x > amax) x = amax;
    return rng_next() & 1 ? -x : x;
}

/* Fills x [rows, cols] (fp32 values exact in `dtype`): pattern 0 uniform at a magnitude per
 * (row, 128-group), with zeros, -0, an all-zero group, +-inf and NaN sprinkled in; pattern 1
 * (f32 only) the midpoint traps against each group's scale (fp8-row128) or the matrix's
 * (fp8-tensor), the group's (matrix's) amax placed in its first element. */
static void fp8_fill(float *x, int64_t rows, int64_t cols, moe_dtype dtype, moe_format format, int pattern) {
    const uint64_t salt = rng_next();
    const float tensor_amax = rng_uniform(1.0f, 2.0f) * ldexpf(1.0f, (int)(rng_next() % 20) - 10);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c0 = 0; c0 < cols; c0 += 128) {
            const int64_t c1 = c0 + 128 < cols ? c0 + 128 : cols;
            const float amp = format == MOE_FORMAT_FP8_TENSOR ? tensor_amax
                                                              : rng_uniform(1.0f, 2.0f) * block_factor(salt, r, c0, 0, 0);
            for (int64_t c = c0; c < c1; c++) {
                float v = rng_uniform(-amp, amp);
                if (pattern == 1) v = c == c0 && (format != MOE_FORMAT_FP8_TENSOR || r == 0) ? amp
                                                                                         : midpoint_trap(amp / 448.0f, amp);
                x[r * cols + c] = v;
            }
        }
    if (pattern == 0) {
        for (int64_t i = 0; i < rows * cols; i += 37) x[i] = (i / 37) % 2 ? 0.0f : -0.0f;
        if (rows > 1) memset(x + cols, 0, (size_t)(cols < 128 ? cols : 128) * sizeof(float)); /* a zero group */
        if (rows * cols > 300) x[101] = INFINITY, x[202] = -INFINITY, x[299] = NAN;
    }
    for (int64_t i = 0; i < rows * cols; i++) /* the values the device reads */
        x[i] = dtype == MOE_DTYPE_BF16 ? moe_bf16_to_float(moe_float_to_bf16(x[i]))
               : dtype == MOE_DTYPE_F16 ? moe_f16_to_float(moe_float_to_f16(x[i])) : x[i];
}

/* The device activation quantiser (moe__cuda_fp8_quantize, the code moe_forward runs on x and
 * A2) against moe_quantize: codes and scales equal bit for bit. Before it, the encoder's host
 * build against moe_quantize on many trap groups (so a failure can be told apart: the rule, or
 * the device). */
static void fp8_quantizer_cases(bool quick) {
    if (!selected("fp8 quantiser")) return;
    case_failures = 0;
    int64_t n = 0, bad = 0, traps = 0;
    float x[128], scale;
    uint8_t codes[128];
    for (int it = 0; it < (quick ? 2000 : 20000); it++) {
        const float amp = rng_uniform(1.0f, 2.0f) * ldexpf(1.0f, (int)(rng_next() % 40) - 20), s = amp / 448.0f;
        x[0] = amp;
        for (int i = 1; i < 128; i++) {
            x[i] = midpoint_trap(s, amp);
            traps += (double)(x[i] / s) != (double)x[i] / s;
        }
        MOE_OK(NULL, moe_quantize(MOE_FORMAT_FP8_ROW128, x, 1, 128, 128, codes, &scale, NULL));
        for (int i = 0; i < 128; i++, n++)
            if (moe__cuda_fp8_encode_host(x[i], scale) != codes[i] && bad++ == 0)
                printf("    host encoder: x = %a, scale = %a: %02x, moe_quantize %02x\n", x[i], scale,
                       moe__cuda_fp8_encode_host(x[i], scale), codes[i]);
    }
    CHECK(bad == 0, "the encoder's host build differs from moe_quantize on %lld of %lld codes", (long long)bad,
          (long long)n);
    if (case_failures == 0) cases_passed++;
    else cases_failed++;
    printf("%s fp8 quantiser: encoder (host build) on %lld trap codes (%lld quotients inexact in fp32)\n",
           case_failures ? "FAIL" : "ok  ", (long long)n, (long long)traps);

    static const struct {
        int64_t rows, cols, pad;
    } shapes[] = {{1, 16, 0}, {3, 96, 8}, {5, 200, 0}, {64, 7168, 24}, {129, 2880, 0}, {4096, 2048, 0}};
    const moe_format formats[] = {MOE_FORMAT_FP8_ROW128, MOE_FORMAT_FP8_TENSOR};
    const moe_dtype dtypes[] = {MOE_DTYPE_F32, MOE_DTYPE_BF16, MOE_DTYPE_F16};
    const int nshapes = quick ? 4 : (int)(sizeof shapes / sizeof shapes[0]);
    for (int f = 0; f < 2; f++)
        for (int di = 0; di < 3; di++)
            for (int si = 0; si < nshapes; si++)
                for (int pattern = 0; pattern < (dtypes[di] == MOE_DTYPE_F32 ? 2 : 1); pattern++) {
                    const int64_t rows = shapes[si].rows, cols = shapes[si].cols, ld = cols + shapes[si].pad;
                    const moe_format format = formats[f];
                    const moe_dtype dtype = dtypes[di];
                    case_failures = 0;
                    moe_format_layout lay;
                    MOE_OK(NULL, moe_format_layout_get(format, rows, cols, &lay));
                    const int64_t nscales = lay.scale_rows * lay.scale_cols, esize = moe_dtype_bits(dtype) / 8;
                    float *xf = xmalloc((size_t)(rows * cols) * 4), *want_scales = xmalloc((size_t)nscales * 4);
                    float *got_scales = xmalloc((size_t)nscales * 4);
                    uint8_t *want = xmalloc((size_t)(rows * cols)), *got = xmalloc((size_t)(rows * cols));
                    uint8_t *xs = xmalloc((size_t)(rows * ld * esize));
                    fp8_fill(xf, rows, cols, dtype, format, pattern);
                    memset(xs, 0x55, (size_t)(rows * ld * esize)); /* row padding: never read */
                    for (int64_t r = 0; r < rows; r++)
                        for (int64_t c = 0; c < cols; c++) {
                            const float v = xf[r * cols + c];
                            const int64_t i = r * ld + c;
                            if (dtype == MOE_DTYPE_F32) memcpy(xs + i * 4, &v, 4);
                            else {
                                uint16_t h = dtype == MOE_DTYPE_BF16 ? moe_float_to_bf16(v) : moe_float_to_f16(v);
                                memcpy(xs + i * 2, &h, 2);
                            }
                        }
                    MOE_OK(NULL, moe_quantize(format, xf, rows, cols, cols, want, want_scales, NULL));
                    void *d_x, *d_codes, *d_scales, *d_amax;
                    CUDA_OK(cudaMalloc(&d_x, (size_t)(rows * ld * esize)));
                    CUDA_OK(cudaMalloc(&d_codes, (size_t)(rows * cols)));
                    CUDA_OK(cudaMalloc(&d_scales, (size_t)nscales * 4));
                    CUDA_OK(cudaMalloc(&d_amax, 4));
                    CUDA_OK(cudaMemcpy(d_x, xs, (size_t)(rows * ld * esize), cudaMemcpyHostToDevice));
                    CUDA_OK(cudaMemset(d_codes, 0xFF, (size_t)(rows * cols))); /* -NaN: never a wanted code here */
                    CUDA_OK(cudaMemset(d_scales, 0xFF, (size_t)nscales * 4));
                    CUDA_OK(cudaMemset(d_amax, 0x7F, 4)); /* the quantiser must zero it itself */
                    moe_status st = moe__cuda_fp8_quantize(gpu_ctx, format, d_x, dtype, rows, cols, ld, d_codes,
                                                           d_scales, d_amax, stream);
                    CHECK(st == MOE_STATUS_OK, "moe__cuda_fp8_quantize: %s", moe_last_error(gpu_ctx));
                    CUDA_OK(cudaStreamSynchronize(stream));
                    CUDA_OK(cudaMemcpy(got, d_codes, (size_t)(rows * cols), cudaMemcpyDeviceToHost));
                    CUDA_OK(cudaMemcpy(got_scales, d_scales, (size_t)nscales * 4, cudaMemcpyDeviceToHost));
                    int64_t code_bad = 0, scale_bad = 0;
                    for (int64_t i = 0; i < rows * cols; i++)
                        if (got[i] != want[i] && code_bad++ == 0)
                            printf("    code [%lld][%lld]: x = %a: %02x, moe_quantize %02x\n", (long long)(i / cols),
                                   (long long)(i % cols), xf[i], got[i], want[i]);
                    for (int64_t i = 0; i < nscales; i++)
                        if (memcmp(&got_scales[i], &want_scales[i], 4) != 0 && scale_bad++ == 0)
                            printf("    scale %lld: %a, moe_quantize %a\n", (long long)i, got_scales[i], want_scales[i]);
                    CHECK(code_bad == 0, "%lld of %lld codes differ", (long long)code_bad, (long long)(rows * cols));
                    CHECK(scale_bad == 0, "%lld of %lld scales differ", (long long)scale_bad, (long long)nscales);
                    CUDA_OK(cudaFree(d_x));
                    CUDA_OK(cudaFree(d_codes));
                    CUDA_OK(cudaFree(d_scales));
                    CUDA_OK(cudaFree(d_amax));
                    free(xf), free(want_scales), free(got_scales), free(want), free(got), free(xs);
                    if (case_failures == 0) cases_passed++;
                    else cases_failed++;
                    printf("%s fp8 quantiser %s %s [%lld x %lld, ld %lld] %s\n", case_failures ? "FAIL" : "ok  ",
                           moe_format_name(format), moe_dtype_name(dtype), (long long)rows, (long long)cols,
                           (long long)ld, pattern ? "midpoint traps" : "random + zeros/inf/NaN");
                }
}

/* What the FP8 path refuses, by name, and what moe_forward_config says of it. */
static void fp8_refusal_cases(void) {
    if (!selected("fp8 refusals")) return;
    case_failures = 0;
    moe_layer_spec s;
    moe_layer_spec_init(&s, 4, 128, 64, 2);
    model m;
    /* MXFP8 weights: not on the cuda backend. */
    model_init(&m, "fp8-refusal", &s, MOE_FORMAT_MXFP8_TE, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
    float *gu = xmalloc((size_t)(4 * 128 * 128) * 4), *dn = xmalloc((size_t)(4 * 128 * 64) * 4);
    fill_uniform(gu, 4 * 128 * 128, 0.1f);
    fill_uniform(dn, 4 * 128 * 64, 0.1f);
    moe_weights_desc d;
    memset(&d, 0, sizeof d);
    d.layout = MOE_LAYOUT_CONCAT;
    d.gate_up = moe_tensor_3d(gu, MOE_DTYPE_F32, 4, 128, 128);
    d.down = moe_tensor_3d(dn, MOE_DTYPE_F32, 4, 128, 64);
    moe_weights_t *w = NULL;
    moe_status st = moe_weights_create(gpu_ctx, &s, &d, MOE_FORMAT_MXFP8_TE, &w);
    CHECK(st == MOE_STATUS_UNSUPPORTED && strstr(moe_last_error(gpu_ctx), "mxfp8-te"),
          "mxfp8-te weights: %s: %s", moe_status_string(st), moe_last_error(gpu_ctx));
    moe_weights_free(w);
    /* FP8 weights with H not a multiple of 16. */
    moe_layer_spec s2;
    moe_layer_spec_init(&s2, 4, 120, 64, 2);
    d.gate_up = moe_tensor_3d(gu, MOE_DTYPE_F32, 4, 128, 120);
    d.down = moe_tensor_3d(dn, MOE_DTYPE_F32, 4, 120, 64);
    w = NULL;
    st = moe_weights_create(gpu_ctx, &s2, &d, MOE_FORMAT_FP8_BLOCK128, &w);
    CHECK(st == MOE_STATUS_UNSUPPORTED && strstr(moe_last_error(gpu_ctx), "multiples of 16"),
          "fp8 weights with H = 120: %s: %s", moe_status_string(st), moe_last_error(gpu_ctx));
    moe_weights_free(w);
    free(gu), free(dn);

    /* The mixed pairs the CPU runs: bf16 weights with fp8 activations, fp8 weights with f32. */
    const moe_format wf[] = {MOE_FORMAT_BF16, MOE_FORMAT_FP8_BLOCK128};
    const moe_format bad_act[] = {MOE_FORMAT_FP8_ROW128, MOE_FORMAT_F32};
    const moe_format good_act[] = {MOE_FORMAT_F32, MOE_FORMAT_FP8_ROW128};
    for (int i = 0; i < 2; i++) {
        model_init(&m, "fp8-refusal", &s, wf[i], MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        m.act_format = good_act[i];
        model_build(&m);
        device_buffers b;
        device_alloc(&m, &b, 8, R_IDS);
        inputs in = {0};
        inputs_draw(&m, &in, 8, R_IDS);
        device_upload(&m, &b, &in);
        b.args.act_format = bad_act[i];
        st = moe_forward(gpu_ctx, m.w_gpu, &b.args);
        CHECK(st == MOE_STATUS_UNSUPPORTED && strstr(moe_last_error(gpu_ctx), "act_format"),
              "%s weights with act_format %s: %s: %s", moe_format_name(wf[i]), moe_format_name(bad_act[i]),
              moe_status_string(st), moe_last_error(gpu_ctx));
        char line[MOE_FORWARD_CONFIG_MAX];
        MOE_OK(gpu_ctx, moe_forward_config(gpu_ctx, m.w_gpu, 8, bad_act[i], line, sizeof line));
        CHECK(strstr(line, "UNSUPPORTED") != NULL, "config of an unsupported pair: %s", line);
        MOE_OK(gpu_ctx, moe_forward_config(gpu_ctx, m.w_gpu, 8, good_act[i], line, sizeof line));
        CHECK(strstr(line, "UNSUPPORTED") == NULL, "config of a supported pair: %s", line);
        if (i == 1) {
            CHECK(strstr(line, "fp8 mma.sync") && strstr(line, "gemm=v1"), "config of the fp8 path: %s", line);
            printf("    %s\n", line);
        }
        inputs_free(&in);
        device_free(&b);
        model_free(&m);
    }
    if (case_failures == 0) cases_passed++;
    else cases_failed++;
    printf("%s fp8 refusals: mxfp8 weights, H %% 16, bf16 weights + fp8 acts, fp8 weights + f32 acts\n",
           case_failures ? "FAIL" : "ok  ");
}

/* The w8a8 forward against the CPU oracle: every weight/act format pair, K tails (H = 320 is
 * 2.5 blocks of 128, I = 208; the presets' I = 96 is one short block), the three W13 layouts,
 * x dtypes and strided rows, RELU2 (an unpaired W13), biases, every activation, the shared
 * expert fused (Is == I) and separate (Is != I, with its gate), weight_on_input, every
 * preset's routing and MLP options at small H and I, and PERF.md's shapes at T in
 * {1, 3, 8, 64, 129, 512, 4096}. Each case is also captured in a CUDA graph and replayed on
 * new inputs (run_case). Names start with "fp8-": --filter fp8 runs these alone. */
static void fp8_model_cases(bool quick) {
    const moe_format BLK = MOE_FORMAT_FP8_BLOCK128, TEN = MOE_FORMAT_FP8_TENSOR, ROW = MOE_FORMAT_FP8_ROW128;
    model m;
    moe_layer_spec s;
    if (!perf_only) {
        static const struct {
            const char *name;
            moe_format wf, af;
            moe_gate_up_layout layout;
            moe_dtype x, y;
            int bias;
        } pairs[] = {
            {"fp8-block-row128-tails", MOE_FORMAT_FP8_BLOCK128, MOE_FORMAT_FP8_ROW128, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16,
             MOE_DTYPE_BF16, 1},
            {"fp8-tensor-tensor-tails", MOE_FORMAT_FP8_TENSOR, MOE_FORMAT_FP8_TENSOR, MOE_LAYOUT_INTERLEAVED,
             MOE_DTYPE_BF16, MOE_DTYPE_F32, 0},
            {"fp8-block-tensor-tails", MOE_FORMAT_FP8_BLOCK128, MOE_FORMAT_FP8_TENSOR, MOE_LAYOUT_SEPARATE,
             MOE_DTYPE_F32, MOE_DTYPE_F32, 1},
            {"fp8-tensor-row128-tails", MOE_FORMAT_FP8_TENSOR, MOE_FORMAT_FP8_ROW128, MOE_LAYOUT_CONCAT, MOE_DTYPE_F16,
             MOE_DTYPE_F16, 0},
        };
        for (int i = 0; i < 4; i++) {
            moe_layer_spec_init(&s, 8, 320, 208, 2);
            s.renormalize = 1;
            s.expert_has_bias = pairs[i].bias;
            model_init(&m, pairs[i].name, &s, pairs[i].wf, pairs[i].layout, pairs[i].x, pairs[i].y);
            m.act_format = pairs[i].af;
            run_spec r[] = {{1, R_IDS, R_IDS, 64, true}, {3, R_LOGITS, R_LOGITS_TIES, 64, true},
                            {129, R_ROUTER, R_ROUTER, 64, true}, {512, R_IDS, R_IDS_ONE, 96, true}};
            run_model(&m, r, quick ? 2 : 4);
        }

        moe_layer_spec_init(&s, 16, 256, 128, 4); /* x and y rows strided, x rows not 16-byte aligned */
        model_init(&m, "fp8-x-strided", &s, BLK, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        m.act_format = ROW;
        m.x_pad = 4;
        m.y_pad = 8;
        run_spec rx[] = {{45, R_IDS, R_IDS, 128, true}};
        run_model(&m, rx, 1);

        for (int a = 0; a < 2; a++) { /* RELU2: W13 is W1 alone, its blocks not paired */
            moe_layer_spec_init(&s, 8, 256, 144, 2);
            s.activation = MOE_ACT_RELU2;
            s.expert_has_bias = 1;
            model_init(&m, a ? "fp8-relu2-bias-tensor" : "fp8-relu2-bias-row128", &s, BLK, MOE_LAYOUT_SEPARATE,
                       MOE_DTYPE_BF16, MOE_DTYPE_BF16);
            m.act_format = a ? TEN : ROW;
            run_spec r[] = {{33, R_IDS, R_IDS_ONE, 64, true}, {300, R_LOGITS, R_LOGITS, 128, true}};
            run_model(&m, r, quick ? 1 : 2);
        }

        /* Stale rows (regression case for the per-tensor A2 scale): the eager run routes 66
         * rows over all 8 experts (up to 8 plan blocks), the replay to experts 0 and 1 only (2
         * blocks) with x scaled by 2^-8. Without bias every step is homogeneous (relu(.)^2 of a
         * linear map; x's own tensor scale moves by exactly 2^-8), so the replay is the eager
         * computation 2^-16 smaller in A2 and must be as accurate; but the eager run's A2 rows
         * stay in the workspace as the replay's padding rows and rows past its live total (the
         * Hopper GEMM1 writes neither). An amax taken over any of them, or an amax word not
         * reset, makes the A2 scale 2^16 too large: every live code falls to a few subnormal
         * steps (448 / 2^16 < 2^-6), y off by O(0.1-1), far above any tolerance. */
        moe_layer_spec_init(&s, 8, 256, 144, 2);
        s.activation = MOE_ACT_RELU2;
        model_init(&m, "fp8-relu2-stale-rows-tensor", &s, BLK, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        m.act_format = TEN;
        run_spec rs[] = {{33, R_IDS, R_IDS_ONE, 64, true}};
        replay_x_shift = 8;
        run_model(&m, rs, 1);
        replay_x_shift = 0;

        if (!quick) {
            const moe_activation acts[] = {MOE_ACT_GEGLU, MOE_ACT_GEGLU_TANH, MOE_ACT_REGLU, MOE_ACT_SWIGLU_OAI};
            const char *act_names[] = {"fp8-geglu", "fp8-geglu-tanh", "fp8-reglu", "fp8-swiglu-oai-bias"};
            for (int a = 0; a < 4; a++) {
                moe_layer_spec_init(&s, 16, 192, 96, 3);
                s.activation = acts[a];
                s.renormalize = 1;
                if (acts[a] == MOE_ACT_SWIGLU_OAI) {
                    s.act_alpha = 1.702f;
                    s.act_limit = 7.0f;
                    s.expert_has_bias = 1;
                }
                model_init(&m, act_names[a], &s, a % 2 ? TEN : BLK, MOE_LAYOUT_INTERLEAVED, MOE_DTYPE_BF16,
                           MOE_DTYPE_BF16);
                m.act_format = a % 2 ? TEN : ROW;
                run_spec ra[] = {{77, R_LOGITS, R_LOGITS_TIES, 128, true}};
                run_model(&m, ra, 1);
            }
        }

        for (int a = 0; a < 2; a++) { /* a shared expert of another width (own A2 tensor), gated */
            moe_layer_spec_init(&s, 16, 256, 96, 4);
            s.num_shared_experts = 1;
            s.shared_intermediate = 160;
            s.shared_gate = 1;
            s.expert_has_bias = 1;
            model_init(&m, a ? "fp8-shared-separate-gate-tensor" : "fp8-shared-separate-gate-row128", &s, a ? TEN : BLK,
                       MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
            m.act_format = a ? TEN : ROW;
            run_spec r[] = {{1, R_IDS, R_IDS_FEW, 64, true}, {130, R_ROUTER, R_ROUTER, 160, true},
                            {600, R_ROUTER, R_ROUTER, 128, true}};
            run_model(&m, r, quick ? 1 : 3);
        }

        for (int a = 0; a < 2; a++) { /* weight_on_input, a fused gated shared expert (rows of its own tensor) */
            moe_layer_spec_init(&s, 8, 128, 64, 1);
            s.weight_on_input = 1;
            s.num_shared_experts = 1;
            s.shared_intermediate = 64;
            s.shared_gate = 1;
            s.expert_has_bias = 1;
            model_init(&m, a ? "fp8-woi-shared-fused-tensor" : "fp8-woi-shared-fused-row128", &s, BLK,
                       MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_F32);
            m.act_format = a ? TEN : ROW;
            run_spec r[] = {{500, R_ROUTER, R_ROUTER, 96, true}, {1, R_IDS, R_IDS, 1, true}};
            run_model(&m, r, quick ? 1 : 2);
        }

        /* Every preset's options at small H and I (quick: every sixth): alternately block +
         * row128 and tensor + tensor. */
        for (int p = 0; p < moe_preset_count(); p++) {
            const char *name = moe_preset_name(p);
            if (quick && p % 6 != 0) continue;
            if (!preset_small(name, &s)) continue;
            char mname[64];
            snprintf(mname, sizeof mname, "fp8-%s-small", name);
            model_init(&m, mname, &s, p % 2 ? TEN : BLK, p % 2 ? MOE_LAYOUT_SEPARATE : MOE_LAYOUT_CONCAT,
                       MOE_DTYPE_BF16, MOE_DTYPE_BF16);
            m.act_format = p % 2 ? TEN : ROW;
            run_spec r[] = {{1, R_ROUTER, R_ROUTER, 64, true}, {37, R_ROUTER, R_ROUTER, 64, true},
                            {64, R_LOGITS_TIES, R_LOGITS, 64, true}, {17, R_IDS_ONE, R_IDS_FEW, 64, true}};
            run_model(&m, r, quick ? 2 : 4);
        }
    }

    /* PERF.md's shapes (real H and I, fewer experts: the CPU packs and holds every one), as the
     * bf16 list runs them; block + row128 (DeepSeek's recipe) on all, tensor + tensor on qwen3
     * (its oracle runs on all T tokens, see check_outputs: ~0.3 TFLOP of CPU work at T=4096).
     * Named fp8-perf-*, so that the bf16 filters of run_on_device.sh's sanitizer stages
     * (qwen3-30b-a3b) do not pick them up. */
    static const struct {
        const char *preset, *name;
        int64_t experts;
        moe_format wf, af;
    } shapes[] = {{"qwen3-30b-a3b", "fp8-perf-qwen3", 16, MOE_FORMAT_FP8_BLOCK128, MOE_FORMAT_FP8_ROW128},
                  {"qwen3-30b-a3b", "fp8-perf-qwen3-tensor", 16, MOE_FORMAT_FP8_TENSOR, MOE_FORMAT_FP8_TENSOR},
                  {"gpt-oss-120b", "fp8-perf-gpt-oss", 8, MOE_FORMAT_FP8_BLOCK128, MOE_FORMAT_FP8_ROW128},
                  {"deepseek-v3", "fp8-perf-deepseek", 8, MOE_FORMAT_FP8_BLOCK128, MOE_FORMAT_FP8_ROW128}};
    for (int i = 0; i < 4 && !quick; i++) {
        if (!preset_shape(shapes[i].preset, shapes[i].experts, &s)) {
            printf("note: shape %s unavailable: %s\n", shapes[i].preset, moe_last_error(cpu_ctx));
            continue;
        }
        model_init(&m, shapes[i].name, &s, shapes[i].wf, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        m.act_format = shapes[i].af;
        run_spec r[8];
        run_model(&m, r, perf_runs(r));
    }
}

/* moe__cuda_gemm_select: the documented rule (cuda_backend.h), automatic and forced. */
static void selection_cases(void) {
    case_failures = 0;
    const int V1 = MOE__CUDA_GEMM_V1, HOP = MOE__CUDA_GEMM_HOPPER;
    unsetenv("MOEFUSE_GEMM");
    CHECK(moe__cuda_gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_BF16) == HOP, "qwen3 T=16384 auto");
    CHECK(moe__cuda_gemm_select(512 * 8, 128, 2048, 768, MOE_DTYPE_BF16) == V1, "qwen3 T=512 auto (32 rows/expert)");
    CHECK(moe__cuda_gemm_select(128 * 8, 8, 4096, 14336, MOE_DTYPE_BF16) == HOP, "128 rows/expert auto");
    CHECK(moe__cuda_gemm_select(16384 * 4, 128, 2880, 2880, MOE_DTYPE_BF16) == HOP, "gpt-oss (2880 = 45 x 64)");
    CHECK(moe__cuda_gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_F16) == V1, "f16 stays on v1");
    CHECK(moe__cuda_gemm_select(16384 * 8, 16, 256, 96, MOE_DTYPE_BF16) == V1, "I = 96 is not a multiple of 64");
    CHECK(moe__cuda_gemm_select(16384, 1, 128, 64, MOE_DTYPE_BF16) == V1, "E*I = 64 < 256");
    setenv("MOEFUSE_GEMM", "hopper", 1);
    CHECK(moe__cuda_gemm_select(1, 128, 2048, 768, MOE_DTYPE_BF16) == HOP, "forced hopper at T*k = 1");
    CHECK(moe__cuda_gemm_select(16384 * 8, 16, 256, 96, MOE_DTYPE_BF16) == V1, "forced hopper where it cannot run");
    setenv("MOEFUSE_GEMM", "v1", 1);
    CHECK(moe__cuda_gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_BF16) == V1, "forced v1");
    CHECK(moe__cuda_gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_E4M3) == V1, "forced v1, fp8");
    unsetenv("MOEFUSE_GEMM");
    /* FP8 (e4m3) weights: the Hopper FP8 kernel takes K and N tails, so H, I >= 128 and % 16.
     * Automatic: Hopper at every T (v1's FP8 decode kernel measured slower: forward.cu). */
    CHECK(moe__cuda_gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_E4M3) == HOP, "fp8 qwen3 T=16384 auto");
    CHECK(moe__cuda_gemm_select(512 * 8, 128, 2048, 768, MOE_DTYPE_E4M3) == HOP, "fp8 qwen3 T=512 auto");
    CHECK(moe__cuda_gemm_select(1 * 8, 128, 2048, 768, MOE_DTYPE_E4M3) == HOP, "fp8 qwen3 T=1 auto (every T)");
    CHECK(moe__cuda_gemm_select(64 * 2, 8, 4096, 14336, MOE_DTYPE_E4M3) == HOP, "fp8 mixtral T=64 auto (every T)");
    CHECK(moe__cuda_gemm_select(INT64_MAX, 128, 2048, 768, MOE_DTYPE_E4M3) == HOP, "fp8 at INT64_MAX rows (no overflow)");
    CHECK(moe__cuda_gemm_select(16384 * 4, 128, 2880, 2880, MOE_DTYPE_E4M3) == HOP, "fp8 gpt-oss (2880 = 22.5 x 128)");
    CHECK(moe__cuda_gemm_select(16384 * 8, 16, 320, 208, MOE_DTYPE_E4M3) == HOP, "fp8 H = 320, I = 208 (tails)");
    CHECK(moe__cuda_gemm_select(16384 * 8, 16, 256, 96, MOE_DTYPE_E4M3) == V1, "fp8 I = 96 < 128");
    setenv("MOEFUSE_GEMM", "hopper", 1);
    CHECK(moe__cuda_gemm_select(1, 128, 2048, 768, MOE_DTYPE_E4M3) == HOP, "fp8 forced hopper at T*k = 1");
    unsetenv("MOEFUSE_GEMM");
    if (case_failures == 0) cases_passed++;
    else cases_failed++;
    printf("%s gemm selection rule\n", case_failures ? "FAIL" : "ok  ");
}

/* ---- --selftest: the stage-wise analysis on the host, no GPU ---------------------------------- */

/* The readback a correct Hopper FP8 forward would leave, made from the oracle's own A2 codes and
 * scales (o_routed [T*k, I], o_shared [T, Is]): the plan of 128-row blocks as
 * moe_dispatch_plan_build makes it, a fused shared expert's rows after the routed ones (ids
 * T*k + 1 + t, as moe__cuda_plan_build puts them), a separate one's [T, Is] as it is; junk in
 * the padding rows, which the analysis must skip. */
static a2_readback oracle_readback(const model *m, const inputs *in, const fp8_rows *o_routed,
                                   const fp8_rows *o_shared) {
    const int64_t T = in->T, k = m->spec.top_k, E = m->spec.num_experts, block = 128, pad = T * k;
    const bool fused = o_shared->rows > 0 && m->spec.shared_intermediate == m->spec.intermediate;
    int64_t max_rows, max_blocks;
    MOE_OK(NULL, moe_dispatch_plan_bounds(T, k, E, block, &max_rows, &max_blocks));
    moe_dispatch_plan cp = {0};
    cp.expert_counts = xmalloc((size_t)E * 8);
    cp.expert_offsets = xmalloc((size_t)(E + 1) * 8);
    cp.sorted_ids = xmalloc((size_t)max_rows * 4);
    cp.block_expert = xmalloc((size_t)max_blocks * 4);
    MOE_OK(cpu_ctx, moe_dispatch_plan_build(cpu_ctx, in->ids, T, k, E, block, &cp));
    const int64_t routed = cp.expert_offsets[E];
    a2_readback g;
    memset(&g, 0, sizeof g);
    g.padding_id = pad;
    g.live = routed + (fused ? (T + block - 1) / block * block : 0);
    g.sorted = xmalloc((size_t)g.live * 4 + 4);
    g.plan = fp8_rows_alloc(g.live, o_routed->cols, o_routed->groups);
    for (int64_t p = 0; p < g.live; p++) {
        const int64_t id = p < routed ? cp.sorted_ids[p] : p - routed < T ? pad + 1 + (p - routed) : pad;
        g.sorted[p] = (int32_t)id;
        if (id == pad) { /* junk, never read */
            memset(g.plan.codes + p * g.plan.cols, 0x3C, (size_t)g.plan.cols);
            for (int64_t j = 0; j < g.plan.groups; j++) g.plan.scales[p * g.plan.groups + j] = 1e30f;
            continue;
        }
        const fp8_rows *src = id < pad ? o_routed : o_shared;
        const int64_t row = id < pad ? id : id - pad - 1;
        memcpy(g.plan.codes + p * g.plan.cols, src->codes + row * src->cols, (size_t)src->cols);
        memcpy(g.plan.scales + p * g.plan.groups, src->scales + row * src->groups, (size_t)src->groups * 4);
    }
    if (o_shared->rows > 0 && !fused) {
        g.shared = fp8_rows_alloc(o_shared->rows, o_shared->cols, o_shared->groups);
        memcpy(g.shared.codes, o_shared->codes, (size_t)(o_shared->rows * o_shared->cols));
        memcpy(g.shared.scales, o_shared->scales, (size_t)(o_shared->rows * o_shared->groups) * 4);
    }
    free(cp.expert_counts), free(cp.expert_offsets), free(cp.sorted_ids), free(cp.block_expert);
    return g;
}

/* A code moved by n steps toward zero (n < 0) or away from it (n > 0), staying finite. */
static uint8_t code_moved(uint8_t c, int n) {
    int mag = (c & 0x7F) + n;
    mag = mag < 0 ? 0 : mag > 0x7E ? 0x7E : mag;
    return (uint8_t)((c & 0x80) | mag);
}

/* What is planted into a correct readback, and which failures (a2_failures) it must give. */
enum { PLANT_NONE, PLANT_FLIPS_OK, PLANT_CODE, PLANT_TWO_STEPS, PLANT_ROUNDING, PLANT_SCALE, PLANT_STALE_ROW,
       PLANT_MISSING_ROW, PLANT_COUNT };
static const struct {
    const char *name;
    unsigned expect;
} stage_plants[PLANT_COUNT] = {
    {"clean (junk in the padding rows)", 0},
    {"every 200th code one step off (flips within the bound)", 0},
    {"one large code 3 steps off", A2_CODES},
    {"one large code 2 steps off (a two-step flip)", A2_CODES},
    {"every 5th code one step up (another rounding rule)", A2_FLIPS},
    {"one row's scales 1% off", A2_SCALES},
    {"a stale row (another token's codes and scales)", A2_CODES},
    {"a live row missing (its plan row holds the padding id)", A2_ROWS},
};

static void plant_bug(a2_readback *g, int what, int64_t k) {
    const int64_t cols = g->plan.cols, groups = g->plan.groups, pad = g->padding_id;
    /* The routed rows' largest code (first, big; a step there is >= 1/16 of 448, far above
     * A2_NEAR_Q), and a routed row of another token (other). */
    int64_t first = -1, big = 0, other = -1;
    for (int64_t p = 0; p < g->live; p++)
        for (int64_t c = 0; c < cols && g->sorted[p] < pad; c++)
            if (first < 0 || (g->plan.codes[p * cols + c] & 0x7F) > (g->plan.codes[first * cols + big] & 0x7F))
                first = p, big = c;
    for (int64_t p = 0; p < g->live && other < 0; p++)
        if (g->sorted[p] < pad && g->sorted[p] / k != g->sorted[first] / k) other = p;
    uint8_t *row = g->plan.codes + first * cols;
    int64_t n = 0;
    switch (what) {
    case PLANT_FLIPS_OK:
    case PLANT_ROUNDING:
        for (int64_t p = 0; p < g->live; p++) {
            if (g->sorted[p] == pad) continue;
            for (int64_t c = 0; c < cols; c++, n++)
                if (n % (what == PLANT_ROUNDING ? 5 : 200) == 0) {
                    uint8_t *q = &g->plan.codes[p * cols + c];
                    *q = code_moved(*q, (*q & 0x7F) < 0x7E ? 1 : -1);
                }
        }
        break;
    case PLANT_CODE: row[big] = code_moved(row[big], -3); break;
    case PLANT_TWO_STEPS: row[big] = code_moved(row[big], -2); break;
    case PLANT_SCALE:
        for (int64_t j = 0; j < groups; j++) g->plan.scales[first * groups + j] *= 1.01f;
        break;
    case PLANT_STALE_ROW:
        memcpy(row, g->plan.codes + other * cols, (size_t)cols);
        memcpy(g->plan.scales + first * groups, g->plan.scales + other * groups, (size_t)groups * 4);
        break;
    case PLANT_MISSING_ROW: g->sorted[first] = (int32_t)pad; break;
    default: break;
    }
}

/* Three models (relu2 with fp8-tensor, as the stale-rows case; swiglu with fp8-row128 and a
 * fused shared expert; swiglu with fp8-tensor and a separate shared expert), each with every
 * plant: a clean readback (and one with flips inside the bounds) must pass, y given its A2 must
 * be the oracle's y bit for bit (y is f32 here); each planted bug must fail its stage. The
 * row128 model also runs the oracle on a subset of the tokens, as large cases do. */
static int stage_selftest(void) {
    const char *env = getenv("MOEFUSE_SEED");
    rng_state = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    printf("test_gpu_forward --selftest: seed %llu (MOEFUSE_SEED repeats)\n", (unsigned long long)rng_state);
    MOE_OK(NULL, moe_context_create(MOE_BACKEND_CPU, 0, &cpu_ctx));
    gpu_ctx = cpu_ctx; /* model_build packs on both */
    int passed = 0, failed = 0;
    for (int c = 0; c < 3; c++) {
        moe_layer_spec s;
        moe_layer_spec_init(&s, 8, 256, c == 0 ? 144 : 128, 2);
        if (c == 0) s.activation = MOE_ACT_RELU2;
        if (c > 0) {
            s.num_shared_experts = 1;
            s.shared_intermediate = c == 1 ? 128 : 160;
            s.shared_gate = 1;
        }
        static const char *names[3] = {"relu2 fp8-tensor", "swiglu fp8-row128, shared fused",
                                        "swiglu fp8-tensor, shared separate"};
        model m;
        model_init(&m, names[c], &s, c == 2 ? MOE_FORMAT_FP8_TENSOR : MOE_FORMAT_FP8_BLOCK128,
                   c == 1 ? MOE_LAYOUT_CONCAT : MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_F32);
        m.act_format = c == 1 ? MOE_FORMAT_FP8_ROW128 : MOE_FORMAT_FP8_TENSOR;
        model_build(&m);
        const int64_t T = c == 0 ? 33 : c == 1 ? 40 : 20, H = s.hidden, k = s.top_k;
        inputs in = {0};
        inputs_draw(&m, &in, T, R_IDS);
        int64_t *tok = xmalloc((size_t)T * 8);
        for (int64_t t = 0; t < T; t++) tok[t] = t;
        float *y = xmalloc((size_t)(T * H) * 4); /* the oracle's y, standing in for the GPU's */
        int32_t *ids = xmalloc((size_t)(T * k) * 4);
        float *weights = xmalloc((size_t)(T * k) * 4);
        oracle_a2 oa = oracle_a2_alloc(&m, T);
        const moe__cpu_a2_exchange xa = {NULL, NULL, oa.routed, oa.shared};
        cpu_forward_a2(&m, &in, tok, T, y, ids, weights, &xa);
        fp8_rows o_routed = oracle_quantize(m.act_format, oa.routed, T * k, s.intermediate);
        fp8_rows o_shared = oracle_quantize(m.act_format, oa.shared, oa.shared ? T : 0, s.shared_intermediate);
        for (int p = 0; p < PLANT_COUNT; p++) {
            a2_readback g = oracle_readback(&m, &in, &o_routed, &o_shared);
            plant_bug(&g, p, k);
            a2_report rep;
            const double err = fp8_stages(&m, &in, tok, T, y, &oa, &g, &rep);
            const unsigned got = a2_failures(&rep), want = stage_plants[p].expect;
            const bool ok = want ? (got & want) == want : got == 0 && (p != PLANT_NONE || err == 0.0);
            if (ok) passed++;
            else failed++;
            printf("%s %s: %s: failures %s%s%s%s(want %s%s%s%s); y|A2 %.2e; codes %lld, %lld differ, %lld beyond a "
                   "flip; scale max diff %.1e; rows %lld missing %lld repeated %lld bad\n",
                   ok ? "ok  " : "FAIL", names[c], stage_plants[p].name, got & A2_ROWS ? "rows " : "",
                   got & A2_CODES ? "codes " : "", got & A2_FLIPS ? "flips " : "", got & A2_SCALES ? "scale " : "",
                   want & A2_ROWS ? "rows" : "", want & A2_CODES ? "codes" : "", want & A2_FLIPS ? "flips" : "",
                   want & A2_SCALES ? "scale" : want ? "" : "none", err, (long long)rep.codes, (long long)rep.flips,
                   (long long)rep.far, rep.scale_rel_max, (long long)rep.rows_missing, (long long)rep.rows_repeated,
                   (long long)rep.bad_ids);
            a2_readback_free(&g);
        }
        if (m.act_format == MOE_FORMAT_FP8_ROW128) {
            /* The oracle on every third token only, as check_outputs runs large cases (row128:
             * tokens are independent): the GPU's rows of the other tokens must be skipped, and
             * y given A2 must still be the full oracle's y on those tokens, bit for bit. */
            int64_t S = 0;
            for (int64_t t = 0; t < T; t += 3) tok[S++] = t;
            oracle_a2 os = oracle_a2_alloc(&m, S);
            float *ys = xmalloc((size_t)(S * H) * 4);
            const moe__cpu_a2_exchange xs = {NULL, NULL, os.routed, os.shared};
            cpu_forward_a2(&m, &in, tok, S, ys, ids, weights, &xs);
            a2_readback g = oracle_readback(&m, &in, &o_routed, &o_shared); /* all T tokens */
            a2_report rep;
            const double err = fp8_stages(&m, &in, tok, S, y, &os, &g, &rep);
            const bool ok = a2_failures(&rep) == 0 && err == 0.0 &&
                            rep.codes == S * (k * s.intermediate + s.shared_intermediate);
            if (ok) passed++;
            else failed++;
            printf("%s %s: clean, the oracle on %lld of %lld tokens: failures %u (want none); y|A2 %.2e (want 0); "
                   "codes %lld\n", ok ? "ok  " : "FAIL", names[c], (long long)S, (long long)T, a2_failures(&rep), err,
                   (long long)rep.codes);
            a2_readback_free(&g), oracle_a2_free(&os), free(ys);
        }
        fp8_rows_free(&o_routed), fp8_rows_free(&o_shared), oracle_a2_free(&oa);
        free(tok), free(y), free(ids), free(weights);
        inputs_free(&in);
        model_free(&m);
    }
    moe_context_free(cpu_ctx);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

int main(int argc, char **argv) {
    bool quick = false, big = false;
    if (argc == 2 && !strcmp(argv[1], "--selftest")) return stage_selftest(); /* host only */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--big")) big = true;
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--perf")) {
            perf_only = true;
            if (i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9') {
                for (const char *c = argv[++i]; *c && n_perf_T_arg < 8;) {
                    perf_T_arg[n_perf_T_arg++] = strtoll(c, (char **)&c, 10);
                    if (*c == ',') c++;
                    else if (*c) break;
                }
            }
        }
        else if (!strcmp(argv[i], "--gemm") && i + 1 < argc && !strcmp(argv[i + 1], "v1")) first_path = last_path = 0, i++;
        else if (!strcmp(argv[i], "--gemm") && i + 1 < argc && !strcmp(argv[i + 1], "hopper")) first_path = last_path = 1, i++;
        else if (!strcmp(argv[i], "--gemm") && i + 1 < argc && !strcmp(argv[i + 1], "both")) first_path = 0, last_path = 1, i++;
        else {
            printf("usage: %s [--quick] [--big] [--gemm v1|hopper|both] [--perf [T,...]] [--filter SUBSTRING] | "
                   "--selftest\n", argv[0]);
            return 2;
        }
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("test_gpu_forward: no CUDA device: SKIP\n");
        return 77;
    }
    const char *env = getenv("MOEFUSE_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    rng_state = seed;
    printf("test_gpu_forward: seed %llu (MOEFUSE_SEED=%llu repeats this run)%s\n", (unsigned long long)seed,
           (unsigned long long)seed, quick ? " --quick" : "");
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    MOE_OK(NULL, moe_context_create(MOE_BACKEND_CPU, 0, &cpu_ctx));
    MOE_OK(NULL, moe_context_create(MOE_BACKEND_CUDA, 0, &gpu_ctx));
    CUDA_OK(cudaStreamCreate(&stream));

    selection_cases();
    if (!perf_only) plan_cases(quick);
    if (!perf_only) fp8_quantizer_cases(quick);
    if (!perf_only) fp8_refusal_cases();

    model m;
    moe_layer_spec s;

    /* Synthetic edge cases. */
    if (!perf_only) {
        moe_layer_spec_init(&s, 4, 64, 32, 4); /* top_k == E */
        s.renormalize = 1;
        model_init(&m, "topk-eq-E", &s, MOE_FORMAT_BF16, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        run_spec r[] = {{0, R_IDS, R_IDS, 64, false}, {1, R_LOGITS, R_LOGITS_TIES, 64, true},
                        {100, R_ROUTER, R_ROUTER, 128, true}};
        run_model(&m, r, 3);

        moe_layer_spec_init(&s, 1, 128, 64, 1); /* E == 1: a dense MLP */
        model_init(&m, "dense-E1", &s, MOE_FORMAT_BF16, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_F32);
        run_spec r2[] = {{1, R_IDS, R_IDS, 64, true}, {65, R_ROUTER, R_ROUTER, 128, true},
                         {300, R_IDS, R_IDS, 128, true}};
        run_model(&m, r2, 3);

        moe_layer_spec_init(&s, 8, 128, 40, 2);
        s.activation = MOE_ACT_RELU2;
        s.expert_has_bias = 1;
        model_init(&m, "relu2-bias", &s, MOE_FORMAT_BF16, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        run_spec r3[] = {{33, R_IDS, R_IDS_ONE, 64, true}, {300, R_LOGITS, R_LOGITS, 128, true},
                         {600, R_IDS, R_IDS_FEW, 128, true}};
        run_model(&m, r3, 3);

        const moe_activation acts[] = {MOE_ACT_GEGLU, MOE_ACT_GEGLU_TANH, MOE_ACT_REGLU};
        const char *act_names[] = {"geglu", "geglu-tanh", "reglu"};
        for (int a = 0; a < 3; a++) {
            moe_layer_spec_init(&s, 16, 192, 72, 3);
            s.activation = acts[a];
            s.renormalize = 1;
            model_init(&m, act_names[a], &s, MOE_FORMAT_BF16, MOE_LAYOUT_INTERLEAVED, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
            run_spec ra[] = {{77, R_LOGITS, R_LOGITS_TIES, 128, true}};
            run_model(&m, ra, 1);
        }

        moe_layer_spec_init(&s, 32, 256, 64, 6); /* DeepSeek-V4-like: sqrt-softplus, clamp */
        s.score = MOE_SCORE_SQRTSOFTPLUS;
        s.act_limit = 7.0f;
        s.renormalize = 1;
        s.routed_scale = 1.5f;
        s.n_group = 4;
        s.topk_group = 2;
        model_init(&m, "sqrtsoftplus-swiglu-limit", &s, MOE_FORMAT_BF16, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16,
                   MOE_DTYPE_BF16);
        run_spec r4[] = {{50, R_LOGITS, R_LOGITS_TIES, 128, true}};
        run_model(&m, r4, 1);

        moe_layer_spec_init(&s, 16, 256, 64, 4); /* shared expert of another width, gated */
        s.num_shared_experts = 1;
        s.shared_intermediate = 200;
        s.shared_gate = 1;
        s.expert_has_bias = 1;
        model_init(&m, "shared-separate-gate", &s, MOE_FORMAT_BF16, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16,
                   MOE_DTYPE_BF16);
        run_spec r5[] = {{1, R_IDS, R_IDS_FEW, 64, true}, {130, R_ROUTER, R_ROUTER, 160, true},
                         {600, R_ROUTER, R_ROUTER, 128, true}};
        run_model(&m, r5, 3);

        moe_layer_spec_init(&s, 16, 256, 64, 4); /* f16 weights, f32 x with padded rows, f16 y */
        s.renormalize = 1;
        model_init(&m, "f16-x32-strided", &s, MOE_FORMAT_F16, MOE_LAYOUT_CONCAT, MOE_DTYPE_F32, MOE_DTYPE_F16);
        m.x_pad = 8;
        m.y_pad = 16;
        run_spec r6[] = {{70, R_ROUTER, R_ROUTER, 128, true}};
        run_model(&m, r6, 1);

        moe_layer_spec_init(&s, 16, 256, 64, 4); /* bf16 x rows padded by 4: not 16-byte aligned */
        model_init(&m, "x-unaligned-rows", &s, MOE_FORMAT_BF16, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_F32);
        m.x_pad = 4;
        run_spec r7[] = {{45, R_IDS, R_IDS, 128, true}};
        run_model(&m, r7, 1);

        moe_layer_spec_init(&s, 16, 256, 64, 4); /* f16 weights with f16 x: the direct path */
        model_init(&m, "f16", &s, MOE_FORMAT_F16, MOE_LAYOUT_SEPARATE, MOE_DTYPE_F16, MOE_DTYPE_F16);
        run_spec r8[] = {{200, R_LOGITS, R_LOGITS, 128, true}, {600, R_IDS, R_IDS_ONE, 128, true}};
        run_model(&m, r8, 2);
    }

    /* Shapes the Hopper path takes (H, I multiples of 64): every activation through its GLU
     * epilogue, biases, an expert with several 128-row blocks (ids-one-expert), empty experts
     * (ids-few-experts), and weight_on_input (top_k 1) with a fused gated shared expert. */
    if (!perf_only) {
        const moe_activation acts[] = {MOE_ACT_SWIGLU, MOE_ACT_GEGLU, MOE_ACT_GEGLU_TANH, MOE_ACT_REGLU,
                                       MOE_ACT_RELU2, MOE_ACT_SWIGLU_OAI};
        const char *act_names[] = {"tma-swiglu-bias", "tma-geglu", "tma-geglu-tanh", "tma-reglu", "tma-relu2-bias",
                                   "tma-swiglu-oai-bias"};
        for (int a = 0; a < 6; a++) {
            moe_layer_spec_init(&s, 8, 128, 64, 2);
            s.activation = acts[a];
            s.expert_has_bias = a == 0 || a == 4 || a == 5;
            if (acts[a] == MOE_ACT_SWIGLU_OAI) {
                s.act_alpha = 1.702f;
                s.act_limit = 7.0f;
            }
            model_init(&m, act_names[a], &s, MOE_FORMAT_BF16, a % 2 ? MOE_LAYOUT_INTERLEAVED : MOE_LAYOUT_CONCAT,
                       MOE_DTYPE_BF16, MOE_DTYPE_BF16);
            run_spec ra[] = {{300, R_IDS, R_IDS_ONE, 96, true}, {700, R_LOGITS, R_IDS_FEW, 96, true}};
            run_model(&m, ra, quick ? 1 : 2);
        }
        moe_layer_spec_init(&s, 8, 128, 64, 1);
        s.weight_on_input = 1;
        s.num_shared_experts = 1;
        s.shared_intermediate = 64; /* == I: fused into the stacks as expert E */
        s.shared_gate = 1;
        s.expert_has_bias = 1;
        model_init(&m, "tma-woi-shared-fused", &s, MOE_FORMAT_BF16, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16,
                   MOE_DTYPE_BF16);
        run_spec rw[] = {{500, R_ROUTER, R_ROUTER, 96, true}, {1, R_IDS, R_IDS, 1, true}};
        run_model(&m, rw, 2);
    }

    /* Every preset's routing and MLP options at small T (small H and I). */
    for (int p = 0; p < moe_preset_count(); p++) {
        const char *name = moe_preset_name(p);
        if (perf_only || (quick && p % 3 != 0)) continue;
        if (!preset_small(name, &s)) continue;
        char mname[64];
        snprintf(mname, sizeof mname, "%s-small", name);
        model_init(&m, mname, &s, MOE_FORMAT_BF16, p % 2 ? MOE_LAYOUT_SEPARATE : MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16,
                   MOE_DTYPE_BF16);
        run_spec r[] = {{1, R_ROUTER, R_ROUTER, 64, true}, {37, R_ROUTER, R_ROUTER, 64, true},
                        {64, R_LOGITS_TIES, R_LOGITS, 64, true}, {17, R_IDS_ONE, R_IDS_FEW, 64, true}};
        run_model(&m, r, quick ? 2 : 4);
    }

    /* PERF.md's shapes: real H and I, fewer experts; ids given as in the benchmark, the
     * router path at two sizes; big T checked on an oracle subset. */
    static const struct {
        const char *preset;
        int64_t experts;
    } shapes[] = {{"qwen3-30b-a3b", 16}, {"gpt-oss-120b", 8}, {"mixtral-8x7b", 4}, {"deepseek-v3", 16}};
    for (int i = 0; i < 4 && !quick; i++) {
        if (!preset_shape(shapes[i].preset, shapes[i].experts, &s)) {
            printf("note: shape %s unavailable: %s\n", shapes[i].preset, moe_last_error(cpu_ctx));
            continue;
        }
        model_init(&m, shapes[i].preset, &s, MOE_FORMAT_BF16, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        run_spec r[8];
        run_model(&m, r, perf_runs(r));
    }
    fp8_model_cases(quick);
    if (big && (!filter || strstr("deepseek-v3-big", filter))) {
        /* 64-bit offsets: T = 262144 on deepseek-v3's H and I (T*k*H = 1.5e10 fp32 rows > 2^32). */
        if (preset_shape("deepseek-v3", 16, &s)) {
            model_init(&m, "deepseek-v3-big", &s, MOE_FORMAT_BF16, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
            run_spec r[] = {{262144, R_IDS, R_IDS, 24, false}};
            run_model(&m, r, 1);
        }
    }

    CUDA_OK(cudaStreamDestroy(stream));
    moe_context_free(cpu_ctx);
    moe_context_free(gpu_ctx);
    printf("model cases that ran v1: %d passed, %d failed; ran hopper: %d passed, %d failed\n", path_passed[0],
           path_failed[0], path_passed[1], path_failed[1]);
    printf("%d passed, %d failed\n", cases_passed, cases_failed);
    return cases_failed ? 1 : 0;
}
