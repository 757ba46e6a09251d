/* test_gpu_forward (gpu_test.h): what a case runs on. The models (random weights at O(1) scale,
 * block-varying magnitudes for FP8, packed on the CPU and the CUDA context), one forward's inputs
 * (x and the routing kinds, enum routing), the device buffers moe_forward reads and writes, and
 * the CPU oracle's forward on a subset of the tokens. tests/gpu/fp8_a2_probe.c links this file
 * alone. */
#include "gpu_test.h"

uint64_t rng_state;
moe_context_t *cpu_ctx, *gpu_ctx;
cudaStream_t stream;
const char *gemm_paths[2] = {"v1", "hopper"};

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        printf("FATAL: out of host memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

saved_env env_save(const char *name) {
    saved_env s = {name, false, ""};
    const char *env = getenv(name);
    s.had = env != NULL;
    if (env) snprintf(s.value, sizeof s.value, "%s", env);
    return s;
}

void env_restore(const saved_env *s) {
    if (s->had) setenv(s->name, s->value, 1);
    else unsetenv(s->name);
}

uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
float rng_uniform(float lo, float hi) { return lo + (hi - lo) * (float)((rng_next() >> 40) * 0x1.0p-24); }
void fill_uniform(float *p, int64_t n, float amp) {
    for (int64_t i = 0; i < n; i++) p[i] = rng_uniform(-amp, amp);
}

/* ---- a model: spec, host weights, packed on both contexts ---------------------------- */
bool is_fp8_format(moe_format f) { return f == MOE_FORMAT_FP8_TENSOR || f == MOE_FORMAT_FP8_BLOCK128; }

/* FP8 models: a power of two in [1/4, 4] per 128 x 128 block (weights) or 1 x 128 group (x),
 * a hash of the block's coordinates. With plain uniform values every block's amax, hence
 * every scale, is nearly the same, and a kernel that read the wrong block's scale would
 * still pass; with these factors a wrong scale is off by 2x or more. */
float block_factor(uint64_t salt, int64_t a, int64_t b, int64_t c, int64_t d) {
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
void model_build(model *m) {
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

void model_free(model *m) {
    moe_weights_free(m->w_cpu);
    moe_weights_free(m->w_gpu);
    free(m->correction_bias);
    m->w_cpu = m->w_gpu = NULL;
    m->correction_bias = NULL;
}

void model_init(model *m, const char *name, const moe_layer_spec *spec, moe_format format,
                moe_gate_up_layout layout, moe_dtype x_dtype, moe_dtype y_dtype) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->spec = *spec;
    m->format = format;
    m->layout = layout;
    m->x_dtype = x_dtype;
    m->y_dtype = y_dtype;
}

/* ---- routing inputs ----------------------------------------------------------------- */
const char *routing_name(int r) {
    static const char *names[] = {"router", "logits", "logits-ties", "ids", "ids-one-expert", "ids-few-experts",
                                  "ids-some-none"};
    return names[r];
}
bool routing_has_ids(int r) { return r >= R_IDS; }
int routing_kind(int r) { return r == R_ROUTER ? 0 : routing_has_ids(r) ? 2 : 1; }
static bool routing_has_logits(int r) { return r == R_LOGITS || r == R_LOGITS_TIES; }

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
            if (routing == R_IDS_NONE && ((t * k + j) % 3 == 0 || t == 1))
                in->ids[t * k + j] = -1, in->weights[t * k + j] = NAN;
        }
    }
    free(perm);
}

void inputs_draw(const model *m, inputs *in, int64_t T, int routing) {
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

void inputs_free(inputs *in) {
    free(in->x16);
    free(in->x32);
    free(in->logits);
    free(in->ids);
    free(in->weights);
    memset(in, 0, sizeof *in);
}

float x_at(const model *m, const inputs *in, int64_t t, int64_t h) {
    const int64_t i = t * (m->spec.hidden + m->x_pad) + h;
    if (in->x32) return in->x32[i];
    return m->x_dtype == MOE_DTYPE_BF16 ? moe_bf16_to_float(in->x16[i]) : moe_f16_to_float(in->x16[i]);
}

/* x of `in` scaled by 2^-shift in place (exact: a power of two, far from under/overflow). */
void scale_x(const model *m, inputs *in, int shift) {
    const int64_t n = in->T * (m->spec.hidden + m->x_pad);
    for (int64_t i = 0; i < n; i++) {
        if (in->x32) in->x32[i] = ldexpf(in->x32[i], -shift);
        else if (m->x_dtype == MOE_DTYPE_BF16)
            in->x16[i] = moe_float_to_bf16(ldexpf(moe_bf16_to_float(in->x16[i]), -shift));
        else
            in->x16[i] = moe_float_to_f16(ldexpf(moe_f16_to_float(in->x16[i]), -shift));
    }
}

/* ---- one forward's device buffers ------------------------------------------------------ */
static size_t x_bytes(const model *m, int64_t T) {
    return (size_t)(T * (m->spec.hidden + m->x_pad)) * (size_t)(moe_dtype_bits(m->x_dtype) / 8);
}
size_t y_bytes(const model *m, int64_t T) {
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

size_t device_alloc_bytes(const model *m, int64_t T) {
    const int64_t E = m->spec.num_experts, k = m->spec.top_k;
    size_t ws = 0;
    MOE_OK(gpu_ctx, moe_forward_workspace_size(gpu_ctx, m->w_gpu, T, m->act_format, &ws));
    return x_bytes(m, T) + 16 + y_bytes(m, T) + 16 + (size_t)(T * E) * 4 + 4 + 4 * ((size_t)(T * k) * 4 + 4) +
           (ws ? ws : 1);
}

void device_alloc(const model *m, device_buffers *b, int64_t T, int routing) {
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
    /* The first run of a case finds all-ones bytes (NaN floats and e4m3 codes, id -1) wherever
     * it reads what it did not write: they may reach only outputs it drops (a plan's padding
     * rows, whose codes the forward does not write). Later runs find the earlier runs' rows
     * (the stale-rows case's premise). */
    CUDA_OK(cudaMemset(b->workspace, 0xFF, b->workspace_size ? b->workspace_size : 1));
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

void device_free(device_buffers *b) {
    void *all[] = {b->x, b->y, b->logits, b->ids, b->weights, b->out_ids, b->out_weights, b->workspace};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CUDA_OK(cudaFree(all[i]));
}

/* Writes a run's inputs into the device buffers and poisons every output (NaN y, -1 ids,
 * NaN weights): an element the forward does not write fails the checks. */
void device_upload(const model *m, device_buffers *b, const inputs *in) {
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

/* ---- the CPU oracle ---------------------------------------------------------------------- */
/* The CPU forward on the tokens tok[0..S): y [S, H] fp32, its routing ids/weights [S, k]. With
 * an A2 exchange xa (not NULL) through moe__cpu_forward_a2 (src/core/internal.h), A2 read out
 * and/or given in: rows by the subset's ids i*k + slot ([S*k, I]; shared [S, Is]). */
void cpu_forward_a2(const model *m, const inputs *in, const int64_t *tok, int64_t S, float *y, int32_t *ids,
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

void cpu_forward(const model *m, const inputs *in, const int64_t *tok, int64_t S, float *y, int32_t *ids,
                 float *weights) {
    cpu_forward_a2(m, in, tok, S, y, ids, weights, NULL);
}

float y_at(const model *m, const void *y, int64_t t, int64_t h) {
    const int64_t i = t * (m->spec.hidden + m->y_pad) + h;
    switch (m->y_dtype) {
    case MOE_DTYPE_F32: return ((const float *)y)[i];
    case MOE_DTYPE_BF16: return moe_bf16_to_float(((const uint16_t *)y)[i]);
    default: return moe_f16_to_float(((const uint16_t *)y)[i]);
    }
}
