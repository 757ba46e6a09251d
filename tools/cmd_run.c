/* moefuse run: one model's MoE layer with random (or checkpoint) weights, timed.
 *
 * Steps: derive the layer spec, check that the run fits in memory, draw the weights with a
 * seeded PRNG (one stream per expert, so threads do not change the numbers), pack them in
 * the format of --dtype, draw x, run the forward once to warm up, then time it.
 * moefuse bench (tools/cmd_bench.c) builds its layer and buffers with the cli_layer_* and
 * cli_forward_* functions below (declared in cli.h), so both commands draw the same numbers. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const cli_dtype dtype_choices[] = {
    {"bf16", MOE_FORMAT_BF16, MOE_FORMAT_F32, MOE_DTYPE_BF16, MOE_DTYPE_BF16, "bf16 weights and activations"},
    {"f16", MOE_FORMAT_F16, MOE_FORMAT_F32, MOE_DTYPE_F16, MOE_DTYPE_F16, "f16 weights and activations"},
    {"f32", MOE_FORMAT_F32, MOE_FORMAT_F32, MOE_DTYPE_F32, MOE_DTYPE_F32, "f32 weights and activations"},
    {"fp8", MOE_FORMAT_FP8_BLOCK128, MOE_FORMAT_FP8_ROW128, MOE_DTYPE_E4M3, MOE_DTYPE_BF16,
     "w8a8: e4m3 weights in 128x128 blocks, activations in 1x128 groups (DeepSeek)"},
    {"fp8-tensor", MOE_FORMAT_FP8_TENSOR, MOE_FORMAT_FP8_TENSOR, MOE_DTYPE_BF16, MOE_DTYPE_BF16,
     "w8a8: e4m3 weights and activations, one scale per tensor"},
    {"mxfp8", MOE_FORMAT_MXFP8_TE, MOE_FORMAT_F32, MOE_DTYPE_BF16, MOE_DTYPE_BF16,
     "MXFP8 weights (e4m3, 1x32 e8m0 scales), bf16 activations"},
    {"mxfp4", MOE_FORMAT_MXFP4, MOE_FORMAT_F32, MOE_DTYPE_BF16, MOE_DTYPE_BF16,
     "MXFP4 weights (e2m1, 1x32 e8m0 scales), bf16 activations"},
    {"nvfp4", MOE_FORMAT_NVFP4, MOE_FORMAT_F32, MOE_DTYPE_BF16, MOE_DTYPE_BF16,
     "NVFP4 weights (e2m1, 1x16 ue4m3 scales + tensor scale), bf16 activations"},
};
#define NUM_DTYPES ((int)(sizeof dtype_choices / sizeof dtype_choices[0]))

#define MAX_TOKENS (INT64_C(1) << 31)

typedef struct run_options {
    const char *model, *config, *weights_path;
    int64_t tokens, layer, threads;
    uint64_t seed, mem_limit;
    const cli_dtype *dtype;
    moe_backend backend;
    int json, print_config;
} run_options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: moefuse run (--model NAME | --config PATH) [--tokens T] [--dtype D] [--backend B]\n"
            "                   [--weights DIR [--layer L]] [--seed S] [--threads N] [--mem-limit SIZE] [--json]\n"
            "                   [--print-config]\n\n"
            "Runs a model's MoE layer once to warm up, then times it, and prints what ran: the shape,\n"
            "time, TFLOP/s, GB/s and a checksum of the output. Weights are random (seeded, uniform,\n"
            "scaled by 1/sqrt(fan_in)) unless --weights names a checkpoint.\n\n"
            "  --model NAME      a built-in preset (moefuse models lists them)\n"
            "  --config PATH     a Hugging Face config.json, or a directory holding one\n"
            "  --tokens T        tokens in the batch, 0..2^31 (default 64)\n"
            "  --dtype D         bf16 (default), f16, f32: weights and activations in that type;\n"
            "                    fp8: e4m3 weights with 128x128 block scales and activations in 1x128\n"
            "                    groups (DeepSeek's w8a8); fp8-tensor: e4m3 weights and activations\n"
            "                    with one scale per tensor; mxfp8, mxfp4, nvfp4: weight-only, bf16 activations.\n"
            "                    Random fp8 weights are drawn as e4m3 codes with block scales, as DeepSeek's\n"
            "                    checkpoints store them (half the memory of drawing them in bf16)\n"
            "  --backend B       auto (default: CUDA if built with it and a GPU is there), cpu, cuda\n"
            "  --weights DIR     load the weights of layer L from a safetensors checkpoint\n"
            "  --layer L         the layer to load (must be an MoE layer; default: the first one)\n"
            "  --seed S          seed of the random weights and input (default 0); the same seed gives\n"
            "                    the same checksum\n"
            "  --threads N       CPU threads (default 0: the library's default). The library runs at most\n"
            "                    64; the JSON's \"threads\" is this option, \"config\" says how many ran\n"
            "  --mem-limit SIZE  host memory to stay within, e.g. 24G or 512M (default: MemAvailable)\n"
            "  --json            print one JSON object instead of text (its \"config\" field says what\n"
            "                    the forward runs: moe_forward_config's line)\n"
            "  --print-config    print that line to stderr before timing (also MOEFUSE_PRINT_CONFIG=1)\n\n"
            "TFLOP/s counts 2*T*k*H*(R13 + I) (R13 = 2I gated, I for relu2) plus the shared expert;\n"
            "GB/s counts the packed weights of the experts the batch touched, plus x and y.\n");
}

/* ---------------------------------------------------------------------------------------
 * Random numbers: xoshiro256** seeded through splitmix64, one stream per (tensor, index).
 * ------------------------------------------------------------------------------------- */
typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Streams: which tensor a generator draws, so that each gets its own numbers. */
enum { STREAM_GATE = 1, STREAM_UP, STREAM_DOWN, STREAM_SCALES, STREAM_GATE_BIAS, STREAM_UP_BIAS, STREAM_DOWN_BIAS,
       STREAM_ROUTER, STREAM_ROUTER_BIAS, STREAM_CORRECTION, STREAM_SHARED, STREAM_SHARED_GATE, STREAM_X };

static void rng_seed(rng *r, uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t x = seed;
    uint64_t a = splitmix64(&x);
    x = a ^ (stream * UINT64_C(0xD1B54A32D192ED03)) ^ (index * UINT64_C(0xAEF17502108EF2D9));
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

/* A uniform float in [-1, 1) from 24 random bits. */
static float uniform_pm1(uint64_t bits24) { return (float)bits24 * (1.0f / 8388608.0f) - 1.0f; }

/* float -> bf16, round to nearest even (the values here are finite). */
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Writes n values uniform in [-scale, scale) of dtype F32, F16 or BF16: drawn 256 at a time
 * into a small fp32 buffer, then converted (this runs over billions of elements). */
static void fill_uniform(void *dst, moe_dtype dtype, int64_t n, float scale, rng *r) {
    float buf[256];
    for (int64_t i = 0; i < n; i += 256) {
        int m = n - i < 256 ? (int)(n - i) : 256;
        for (int j = 0; j < m; j += 2) {
            uint64_t bits = rng_next(r);
            buf[j] = uniform_pm1(bits >> 40) * scale;
            buf[j + 1] = uniform_pm1((bits >> 16) & 0xFFFFFFu) * scale; /* j + 1 < 256 always */
        }
        if (dtype == MOE_DTYPE_F32) memcpy((float *)dst + i, buf, (size_t)m * sizeof(float));
        else if (dtype == MOE_DTYPE_BF16)
            for (int j = 0; j < m; j++) ((uint16_t *)dst)[i + j] = to_bf16(buf[j]);
        else
            for (int j = 0; j < m; j++) ((uint16_t *)dst)[i + j] = moe_float_to_f16(buf[j]);
    }
}

/* e4m3 codes of 256 values evenly spread over [-448, 448]: a random byte picks one, so FP8
 * weights are drawn at a byte per element without converting each. */
static uint8_t e4m3_table[256];

static void e4m3_table_init(void) {
    for (int i = 0; i < 256; i++) e4m3_table[i] = moe_float_to_e4m3(((float)i + 0.5f) / 128.0f * 448.0f - 448.0f);
}

/* One [rows, cols] FP8 matrix: codes and fp32 128x128 block scales (weight_scale_inv, the
 * multiplier), values about uniform in [-scale, scale]. */
static void fill_e4m3(uint8_t *codes, float *scales, int64_t rows, int64_t cols, float scale, rng *r) {
    int64_t n = rows * cols;
    for (int64_t i = 0; i < n; i += 8) {
        uint64_t bits = rng_next(r);
        for (int j = 0; j < 8 && i + j < n; j++) codes[i + j] = e4m3_table[(bits >> (8 * j)) & 0xFF];
    }
    int64_t blocks = ((rows + 127) / 128) * ((cols + 127) / 128);
    for (int64_t b = 0; b < blocks; b++) /* blocks differ a little, as real ones do */
        scales[b] = scale / 448.0f * (0.75f + 0.25f * (uniform_pm1(rng_next(r) >> 40) + 1.0f));
}

/* ---------------------------------------------------------------------------------------
 * A parallel for over items (experts, row blocks): item i goes to worker i % workers. Each
 * item seeds its own generator, so the result does not depend on the number of workers.
 * ------------------------------------------------------------------------------------- */
typedef void (*item_fn)(void *arg, int64_t item);

typedef struct worker {
    pthread_t thread;
    item_fn fn;
    void *arg;
    int64_t first, count, step;
} worker;

static void *worker_main(void *p) {
    worker *w = p;
    for (int64_t i = w->first; i < w->count; i += w->step) w->fn(w->arg, i);
    return NULL;
}

static void parallel_for(int64_t count, int threads, item_fn fn, void *arg) {
    enum { MAX_WORKERS = 64 };
    worker workers[MAX_WORKERS];
    int n = threads < 1 ? 1 : threads > MAX_WORKERS ? MAX_WORKERS : threads;
    if (count < n) n = count < 1 ? 1 : (int)count;
    int started[MAX_WORKERS] = {0};
    for (int t = 0; t < n; t++) {
        workers[t] = (worker){.fn = fn, .arg = arg, .first = t, .count = count, .step = n};
        if (t > 0) started[t] = pthread_create(&workers[t].thread, NULL, worker_main, &workers[t]) == 0;
    }
    worker_main(&workers[0]);
    for (int t = 1; t < n; t++) {
        if (started[t]) pthread_join(workers[t].thread, NULL);
        else worker_main(&workers[t]); /* no thread: do its share here */
    }
}

/* ---------------------------------------------------------------------------------------
 * Memory: what the run needs, before anything big is allocated.
 * ------------------------------------------------------------------------------------- */
/* Bytes of one [rows, cols] matrix in `format`, codes and scales. */
static moe_status matrix_bytes(moe_format format, int64_t rows, int64_t cols, double *bytes) {
    moe_format_layout layout;
    moe_status st = moe_format_layout_get(format, rows, cols, &layout);
    if (st != MOE_STATUS_OK) return st;
    *bytes = (double)layout.code_bytes +
             (double)layout.scale_rows * (double)layout.scale_cols * moe_dtype_bits(layout.scale_dtype) / 8.0 +
             (layout.has_tensor_scale ? 4.0 : 0.0);
    return MOE_STATUS_OK;
}

static double dtype_size(moe_dtype dtype) { return moe_dtype_bits(dtype) / 8.0; }

static moe_status plan_memory(const moe_layer_spec *s, const cli_dtype *d, int64_t T, const moe_model_config *cfg,
                              int from_checkpoint, int threads, cli_memory_plan *p) {
    double E = (double)s->num_experts, H = (double)s->hidden, I = (double)s->intermediate, k = (double)s->top_k;
    int gated = moe_activation_is_gated(s->activation);
    double R13 = gated ? 2 * I : I;
    double Is = s->num_shared_experts > 0 ? (double)s->shared_intermediate : 0;
    double R13s = gated ? 2 * Is : Is;
    memset(p, 0, sizeof *p);

    double w13, w2;
    moe_status st = matrix_bytes(d->weights, (int64_t)R13, s->hidden, &w13);
    if (st == MOE_STATUS_OK) st = matrix_bytes(d->weights, s->hidden, s->intermediate, &w2);
    if (st != MOE_STATUS_OK) return st;
    p->expert = w13 + w2 + (s->expert_has_bias ? 4 * (R13 + H) : 0);
    if (Is > 0) {
        double s13, s2;
        st = matrix_bytes(d->weights, (int64_t)R13s, s->hidden, &s13);
        if (st == MOE_STATUS_OK) st = matrix_bytes(d->weights, s->hidden, s->shared_intermediate, &s2);
        if (st != MOE_STATUS_OK) return st;
        p->shared = s13 + s2 + (s->expert_has_bias ? 4 * (R13s + H) : 0) + (s->shared_gate ? 4 * H : 0);
    }
    /* Router, its bias and the correction bias stay fp32 once packed. */
    p->packed = E * p->expert + p->shared + 4 * E * H + 8 * E;

    double routed = E * (R13 * H + H * I), shared = R13s * H + H * Is;
    if (from_checkpoint) {
        /* moe_weights_load reads the layer's tensors in the checkpoint's dtype. */
        p->source = (routed + shared + E * H) * dtype_size(cfg->torch_dtype);
    } else if (d->source == MOE_DTYPE_E4M3) {
        double blocks = ceil(I / 128) * ceil(H / 128);
        p->source = routed + 4 * E * blocks * (gated ? 3 : 2) + (shared + E * H) * dtype_size(d->io);
    } else {
        p->source = (routed + shared) * dtype_size(d->source) + E * H * dtype_size(d->io);
    }
    p->source += 4 * (E * (R13 + H) + Is * 2 + H + 2 * E); /* biases, fp32 */
    /* moe_weights_create packs each expert through an fp32 matrix, one per thread. */
    double scratch = 4 * threads * fmax(R13 * H, fmax(H * I, R13s * H));

    p->io = 2 * T * H * dtype_size(d->io) + 8 * T * k;
    /* The CPU forward keeps per-row intermediates; a generous bound of what it may ask. */
    double rows = T * k + E * 127;
    p->workspace = 4 * (T * E + 2 * T * k + rows * (R13 + I + H) + T * (R13s + Is + H)) + 16 * rows + 16.0 * 1048576;
    /* Plus what no formula sees: the process itself, allocator rounding, the probe layer. */
    const double slack = 64.0 * 1048576;
    p->total = 1.01 * (p->packed + fmax(p->source + scratch, p->io + p->workspace)) + slack;
    p->device = 1.01 * (p->packed + p->io + p->workspace) + slack;
    return MOE_STATUS_OK;
}

/* Refuses a run that does not fit in `available` bytes of host memory (gpu = 0) or GPU
 * memory (gpu = 1), naming the --dtype that needs the least memory and fits. */
static int check_memory(const cli_layer_options *o, const moe_model_config *cfg, const cli_memory_plan *p,
                        double available, int from_checkpoint, int threads, int gpu) {
    double need = gpu ? p->device : p->total;
    if (need <= available) return 0;
    char need_text[32], avail[32], packed[32], source[32], alt[32];
    const cli_dtype *best = NULL;
    double best_need = 0;
    for (int i = 0; i < NUM_DTYPES; i++) {
        cli_memory_plan q;
        if (plan_memory(&cfg->layer, &dtype_choices[i], o->max_tokens, cfg, from_checkpoint, threads, &q) != MOE_STATUS_OK)
            continue;
        double q_need = gpu ? q.device : q.total;
        if (!best || q_need < best_need) {
            best = &dtype_choices[i];
            best_need = q_need;
        }
    }
    char advice[160] = "";
    if (best && best_need <= available)
        snprintf(advice, sizeof advice, "; --dtype %s needs %s", best->name,
                 cli_format_bytes(best_need, alt, sizeof alt));
    else if (best)
        snprintf(advice, sizeof advice, "; no --dtype fits (the smallest, %s, needs %s)%s", best->name,
                 cli_format_bytes(best_need, alt, sizeof alt),
                 p->io + p->workspace > p->packed ? ": try fewer --tokens" : "");
    char limit[64];
    cli_format_bytes(available, avail, sizeof avail);
    if (gpu) snprintf(limit, sizeof limit, "%s of GPU memory is free", avail);
    else if (o->mem_limit) snprintf(limit, sizeof limit, "--mem-limit is %s", avail);
    else snprintf(limit, sizeof limit, "%s is available", avail);
    cli_format_bytes(need, need_text, sizeof need_text);
    cli_format_bytes(p->packed, packed, sizeof packed);
    if (gpu)
        return cli_fail(1, "%s in %s needs %s of GPU memory (weights %s) but %s%s", cfg->name, o->dtype->name,
                        need_text, packed, limit, advice);
    return cli_fail(1, "%s in %s needs %s (weights %s packed + %s source while packing) but %s%s", cfg->name,
                    o->dtype->name, need_text, packed, cli_format_bytes(p->source, source, sizeof source), limit,
                    advice);
}

/* ---------------------------------------------------------------------------------------
 * Random weights.
 * ------------------------------------------------------------------------------------- */
typedef struct random_weights {
    const moe_layer_spec *spec;
    const cli_dtype *dtype;
    uint64_t seed;
    void *gate, *up, *down;                /* routed experts, [E, I, H], [E, I, H], [E, H, I] */
    float *gate_scale, *up_scale, *down_scale; /* FP8 source only */
    float *gate_bias, *up_bias, *down_bias;
    void *router;
    float *router_bias, *correction_bias;
    void *shared_gate, *shared_up, *shared_down;
    float *shared_gate_bias, *shared_up_bias, *shared_down_bias, *shared_gate_weight;
} random_weights;

static void *alloc_bytes(double bytes, int *failed) {
    if (bytes > (double)SIZE_MAX / 2) {
        *failed = 1;
        return NULL;
    }
    void *p = malloc(bytes < 1 ? 1 : (size_t)bytes);
    if (!p) *failed = 1;
    return p;
}

static void random_weights_free(random_weights *r) {
    void *all[] = {r->gate, r->up, r->down, r->gate_scale, r->up_scale, r->down_scale, r->gate_bias, r->up_bias,
                   r->down_bias, r->router, r->router_bias, r->correction_bias, r->shared_gate, r->shared_up,
                   r->shared_down, r->shared_gate_bias, r->shared_up_bias, r->shared_down_bias, r->shared_gate_weight};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    memset(r, 0, sizeof *r);
}

/* Draws expert e's matrices and biases (one item of the parallel for). */
static void draw_expert(void *arg, int64_t e) {
    random_weights *r = arg;
    const moe_layer_spec *s = r->spec;
    int64_t H = s->hidden, I = s->intermediate;
    int gated = moe_activation_is_gated(s->activation);
    float scale13 = 1.0f / sqrtf((float)H), scale2 = 1.0f / sqrtf((float)I);
    rng g;
    if (r->dtype->source == MOE_DTYPE_E4M3) {
        int64_t b13 = ((I + 127) / 128) * ((H + 127) / 128), b2 = b13;
        rng_seed(&g, r->seed, STREAM_GATE, (uint64_t)e);
        fill_e4m3((uint8_t *)r->gate + e * I * H, r->gate_scale + e * b13, I, H, scale13, &g);
        if (gated) {
            rng_seed(&g, r->seed, STREAM_UP, (uint64_t)e);
            fill_e4m3((uint8_t *)r->up + e * I * H, r->up_scale + e * b13, I, H, scale13, &g);
        }
        rng_seed(&g, r->seed, STREAM_DOWN, (uint64_t)e);
        fill_e4m3((uint8_t *)r->down + e * H * I, r->down_scale + e * b2, H, I, scale2, &g);
    } else {
        size_t elem = (size_t)moe_dtype_bits(r->dtype->source) / 8;
        rng_seed(&g, r->seed, STREAM_GATE, (uint64_t)e);
        fill_uniform((char *)r->gate + (size_t)(e * I * H) * elem, r->dtype->source, I * H, scale13, &g);
        if (gated) {
            rng_seed(&g, r->seed, STREAM_UP, (uint64_t)e);
            fill_uniform((char *)r->up + (size_t)(e * I * H) * elem, r->dtype->source, I * H, scale13, &g);
        }
        rng_seed(&g, r->seed, STREAM_DOWN, (uint64_t)e);
        fill_uniform((char *)r->down + (size_t)(e * H * I) * elem, r->dtype->source, H * I, scale2, &g);
    }
    if (s->expert_has_bias) {
        rng_seed(&g, r->seed, STREAM_GATE_BIAS, (uint64_t)e);
        fill_uniform(r->gate_bias + e * I, MOE_DTYPE_F32, I, 0.1f, &g);
        if (gated) {
            rng_seed(&g, r->seed, STREAM_UP_BIAS, (uint64_t)e);
            fill_uniform(r->up_bias + e * I, MOE_DTYPE_F32, I, 0.1f, &g);
        }
        rng_seed(&g, r->seed, STREAM_DOWN_BIAS, (uint64_t)e);
        fill_uniform(r->down_bias + e * H, MOE_DTYPE_F32, H, 0.1f, &g);
    }
}

/* Allocates and draws every tensor of the spec, and describes them in desc. */
static int draw_weights(const moe_layer_spec *s, const cli_dtype *d, uint64_t seed, int threads,
                        random_weights *r, moe_weights_desc *desc) {
    int64_t E = s->num_experts, H = s->hidden, I = s->intermediate;
    int gated = moe_activation_is_gated(s->activation);
    double src = dtype_size(d->source), io = dtype_size(d->io);
    int failed = 0;
    memset(r, 0, sizeof *r);
    memset(desc, 0, sizeof *desc);
    r->spec = s;
    r->dtype = d;
    r->seed = seed;

    double matrix = (double)E * (double)I * (double)H;
    r->gate = alloc_bytes(matrix * src, &failed);
    if (gated) r->up = alloc_bytes(matrix * src, &failed);
    r->down = alloc_bytes(matrix * src, &failed);
    int64_t blocks = ((I + 127) / 128) * ((H + 127) / 128);
    if (d->source == MOE_DTYPE_E4M3) {
        r->gate_scale = alloc_bytes(4.0 * E * blocks, &failed);
        if (gated) r->up_scale = alloc_bytes(4.0 * E * blocks, &failed);
        r->down_scale = alloc_bytes(4.0 * E * blocks, &failed);
    }
    if (s->expert_has_bias) {
        r->gate_bias = alloc_bytes(4.0 * E * I, &failed);
        if (gated) r->up_bias = alloc_bytes(4.0 * E * I, &failed);
        r->down_bias = alloc_bytes(4.0 * E * H, &failed);
    }
    r->router = alloc_bytes(io * E * H, &failed);
    if (s->router_has_bias) r->router_bias = alloc_bytes(4.0 * E, &failed);
    if (s->use_correction_bias) r->correction_bias = alloc_bytes(4.0 * E, &failed);
    int64_t Is = s->num_shared_experts > 0 ? s->shared_intermediate : 0;
    if (Is > 0) {
        r->shared_gate = alloc_bytes(io * Is * H, &failed);
        if (gated) r->shared_up = alloc_bytes(io * Is * H, &failed);
        r->shared_down = alloc_bytes(io * H * Is, &failed);
        if (s->expert_has_bias) {
            r->shared_gate_bias = alloc_bytes(4.0 * Is, &failed);
            if (gated) r->shared_up_bias = alloc_bytes(4.0 * Is, &failed);
            r->shared_down_bias = alloc_bytes(4.0 * H, &failed);
        }
        if (s->shared_gate) r->shared_gate_weight = alloc_bytes(4.0 * H, &failed);
    }
    if (failed) {
        random_weights_free(r);
        return cli_fail(1, "out of memory drawing the weights");
    }

    if (d->source == MOE_DTYPE_E4M3) e4m3_table_init();
    parallel_for(E, threads, draw_expert, r);

    /* The small tensors, on this thread. */
    rng g;
    rng_seed(&g, seed, STREAM_ROUTER, 0);
    fill_uniform(r->router, d->io, E * H, 1.0f / sqrtf((float)H), &g);
    if (r->router_bias) {
        rng_seed(&g, seed, STREAM_ROUTER_BIAS, 0);
        fill_uniform(r->router_bias, MOE_DTYPE_F32, E, 0.1f, &g);
    }
    if (r->correction_bias) {
        rng_seed(&g, seed, STREAM_CORRECTION, 0);
        fill_uniform(r->correction_bias, MOE_DTYPE_F32, E, 0.05f, &g);
    }
    if (Is > 0) {
        rng_seed(&g, seed, STREAM_SHARED, 0);
        fill_uniform(r->shared_gate, d->io, Is * H, 1.0f / sqrtf((float)H), &g);
        if (gated) fill_uniform(r->shared_up, d->io, Is * H, 1.0f / sqrtf((float)H), &g);
        fill_uniform(r->shared_down, d->io, H * Is, 1.0f / sqrtf((float)Is), &g);
        if (s->expert_has_bias) {
            fill_uniform(r->shared_gate_bias, MOE_DTYPE_F32, Is, 0.1f, &g);
            if (gated) fill_uniform(r->shared_up_bias, MOE_DTYPE_F32, Is, 0.1f, &g);
            fill_uniform(r->shared_down_bias, MOE_DTYPE_F32, H, 0.1f, &g);
        }
        if (r->shared_gate_weight) {
            rng_seed(&g, seed, STREAM_SHARED_GATE, 0);
            fill_uniform(r->shared_gate_weight, MOE_DTYPE_F32, H, 1.0f / sqrtf((float)H), &g);
        }
    }

    /* Separate gate and up, as most checkpoints store them. */
    desc->layout = MOE_LAYOUT_SEPARATE;
    desc->gate = moe_tensor_3d(r->gate, d->source, E, I, H);
    if (gated) desc->up = moe_tensor_3d(r->up, d->source, E, I, H);
    desc->down = moe_tensor_3d(r->down, d->source, E, H, I);
    if (d->source == MOE_DTYPE_E4M3) {
        int64_t bi = (I + 127) / 128, bh = (H + 127) / 128;
        desc->gate_scale = moe_tensor_3d(r->gate_scale, MOE_DTYPE_F32, E, bi, bh);
        if (gated) desc->up_scale = moe_tensor_3d(r->up_scale, MOE_DTYPE_F32, E, bi, bh);
        desc->down_scale = moe_tensor_3d(r->down_scale, MOE_DTYPE_F32, E, bh, bi);
    }
    if (s->expert_has_bias) {
        desc->gate_bias = moe_tensor_2d(r->gate_bias, MOE_DTYPE_F32, E, I);
        if (gated) desc->up_bias = moe_tensor_2d(r->up_bias, MOE_DTYPE_F32, E, I);
        desc->down_bias = moe_tensor_2d(r->down_bias, MOE_DTYPE_F32, E, H);
    }
    desc->router = moe_tensor_2d(r->router, d->io, E, H);
    if (r->router_bias) desc->router_bias = moe_tensor_1d(r->router_bias, MOE_DTYPE_F32, E);
    if (r->correction_bias) desc->correction_bias = moe_tensor_1d(r->correction_bias, MOE_DTYPE_F32, E);
    if (Is > 0) {
        desc->shared_gate = moe_tensor_2d(r->shared_gate, d->io, Is, H);
        if (gated) desc->shared_up = moe_tensor_2d(r->shared_up, d->io, Is, H);
        desc->shared_down = moe_tensor_2d(r->shared_down, d->io, H, Is);
        if (s->expert_has_bias) {
            desc->shared_gate_bias = moe_tensor_1d(r->shared_gate_bias, MOE_DTYPE_F32, Is);
            if (gated) desc->shared_up_bias = moe_tensor_1d(r->shared_up_bias, MOE_DTYPE_F32, Is);
            desc->shared_down_bias = moe_tensor_1d(r->shared_down_bias, MOE_DTYPE_F32, H);
        }
        if (r->shared_gate_weight) desc->shared_gate_weight = moe_tensor_1d(r->shared_gate_weight, MOE_DTYPE_F32, H);
    }
    return 0;
}

/* Asks the backend whether it packs --dtype for a layer of this kind, on a tiny layer with
 * the same routing, activation, biases and shared expert, before seconds or minutes go into
 * drawing and packing the real one (the CUDA backend packs fewer formats than the CPU). */
static int probe_format(moe_context_t *ctx, const moe_layer_spec *spec, const cli_dtype *d) {
    moe_layer_spec tiny = *spec;
    tiny.num_experts = 1, tiny.top_k = 1, tiny.hidden = 128, tiny.intermediate = 128;
    tiny.n_group = 0, tiny.topk_group = 0;
    if (tiny.num_shared_experts > 0) tiny.shared_intermediate = 128;
    random_weights r;
    moe_weights_desc desc;
    int rc = draw_weights(&tiny, d, 0, 1, &r, &desc);
    if (rc) return rc;
    moe_weights_t *w = NULL;
    moe_status st = moe_weights_create(ctx, &tiny, &desc, d->weights, &w);
    random_weights_free(&r);
    moe_weights_free(w);
    if (st != MOE_STATUS_OK) {
        char what[96];
        snprintf(what, sizeof what, "--dtype %s on the %s backend", d->name, moe_backend_name(moe_context_backend(ctx)));
        return cli_fail_status(ctx, st, what);
    }
    return 0;
}

/* x [T, H]: rows drawn in blocks of 256, each block its own stream. */
typedef struct input_job {
    void *x;
    moe_dtype dtype;
    int64_t tokens, hidden;
    uint64_t seed;
} input_job;

static void draw_input_block(void *arg, int64_t block) {
    input_job *j = arg;
    int64_t t0 = block * 256, t1 = t0 + 256 < j->tokens ? t0 + 256 : j->tokens;
    size_t elem = (size_t)moe_dtype_bits(j->dtype) / 8;
    rng g;
    rng_seed(&g, j->seed, STREAM_X, (uint64_t)block);
    fill_uniform((char *)j->x + (size_t)(t0 * j->hidden) * elem, j->dtype, (t1 - t0) * j->hidden, 1.0f, &g);
}

/* ---------------------------------------------------------------------------------------
 * Timing (shared with bench) and the options.
 * ------------------------------------------------------------------------------------- */
double cli_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *values, int n) {
    if (n <= 0) return NAN;
    qsort(values, (size_t)n, sizeof values[0], compare_doubles);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

int cli_parse_dtype(const char *text, const cli_dtype **out) {
    for (int d = 0; d < NUM_DTYPES; d++)
        if (!strcmp(text, dtype_choices[d].name)) {
            *out = &dtype_choices[d];
            return 0;
        }
    return cli_fail(2, "--dtype: unknown '%s' (valid: bf16, f16, f32, fp8, fp8-tensor, mxfp8, mxfp4, nvfp4)", text);
}

int cli_parse_backend(const char *text, moe_backend *out) {
    if (!strcmp(text, "auto")) *out = MOE_BACKEND_AUTO;
    else if (!strcmp(text, "cpu")) *out = MOE_BACKEND_CPU;
    else if (!strcmp(text, "cuda")) *out = MOE_BACKEND_CUDA;
    else return cli_fail(2, "--backend: unknown '%s' (valid: auto, cpu, cuda)", text);
    return 0;
}

static int parse_options(int argc, char **argv, run_options *o) {
    memset(o, 0, sizeof *o);
    o->tokens = 64;
    o->layer = -1;
    o->dtype = &dtype_choices[0];
    o->backend = MOE_BACKEND_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return -1;
        } else if (cli_option(argc, argv, &i, "--model", &v)) {
            if (!v) return 2;
            o->model = v;
        } else if (cli_option(argc, argv, &i, "--config", &v)) {
            if (!v) return 2;
            o->config = v;
        } else if (cli_option(argc, argv, &i, "--tokens", &v)) {
            if (!v || cli_parse_int64("--tokens", v, 0, MAX_TOKENS, &o->tokens)) return 2;
        } else if (cli_option(argc, argv, &i, "--dtype", &v)) {
            if (!v || cli_parse_dtype(v, &o->dtype)) return 2;
        } else if (cli_option(argc, argv, &i, "--backend", &v)) {
            if (!v || cli_parse_backend(v, &o->backend)) return 2;
        } else if (cli_option(argc, argv, &i, "--weights", &v)) {
            if (!v) return 2;
            o->weights_path = v;
        } else if (cli_option(argc, argv, &i, "--layer", &v)) {
            if (!v || cli_parse_int64("--layer", v, 0, MOE_MAX_LAYERS - 1, &o->layer)) return 2;
        } else if (cli_option(argc, argv, &i, "--seed", &v)) {
            if (!v || cli_parse_uint64("--seed", v, &o->seed)) return 2;
        } else if (cli_option(argc, argv, &i, "--threads", &v)) {
            if (!v || cli_parse_int64("--threads", v, 0, 4096, &o->threads)) return 2;
        } else if (cli_option(argc, argv, &i, "--mem-limit", &v)) {
            if (!v || cli_parse_size("--mem-limit", v, &o->mem_limit)) return 2;
            if (o->mem_limit == 0) return cli_fail(2, "--mem-limit: %s is zero", v);
        } else if (!strcmp(argv[i], "--json")) {
            o->json = 1;
        } else if (!strcmp(argv[i], "--print-config")) {
            o->print_config = 1;
        } else {
            return cli_fail(2, "run: unknown option '%s' (moefuse run --help)", argv[i]);
        }
    }
    if (o->model && o->config) return cli_fail(2, "give --model or --config, not both");
    if (!o->model && !o->config) return cli_fail(2, "give --model NAME (moefuse models lists them) or --config PATH");
    if (o->layer >= 0 && !o->weights_path) return cli_fail(2, "--layer needs --weights (random weights have no layers)");
    return 0;
}

/* Picks and checks the checkpoint layer: --layer, else the first MoE layer. */
static int choose_layer(run_options *o, const moe_model_config *cfg) {
    int64_t n = cfg->num_layers < MOE_MAX_LAYERS ? cfg->num_layers : MOE_MAX_LAYERS;
    char runs[512];
    if (o->layer < 0) {
        for (int64_t i = 0; i < n && o->layer < 0; i++)
            if (cfg->layer_is_moe[i]) o->layer = i;
        if (o->layer < 0) return cli_fail(1, "--weights: %s has no MoE layer", cfg->name);
        return 0;
    }
    if (o->layer >= n)
        return cli_fail(2, "--layer %lld: %s has layers 0-%lld", (long long)o->layer, cfg->name, (long long)n - 1);
    if (!cfg->layer_is_moe[o->layer])
        return cli_fail(2, "--layer %lld is a dense layer of %s (layers %s)", (long long)o->layer, cfg->name,
                        cli_layer_runs(cfg, runs, sizeof runs));
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Shared with moefuse bench (declared in cli.h): the layer, the forward's buffers, the work.
 * ------------------------------------------------------------------------------------- */
int cli_layer_build(moe_context_t *ctx, const moe_model_config *cfg, const cli_layer_options *o, cli_layer *l) {
    memset(l, 0, sizeof *l);
    l->cfg = cfg;
    l->dtype = o->dtype;
    l->gpu = moe_context_backend(ctx) == MOE_BACKEND_CUDA;
    moe_status st = moe_layer_spec_validate(ctx, &cfg->layer);
    if (st != MOE_STATUS_OK) return cli_fail_status(ctx, st, cfg->name);

    /* Memory first: refuse before allocating anything big. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    l->threads = o->threads > 0 ? (int)o->threads : cpus > 0 ? (int)cpus : 1;
    const int from_checkpoint = o->weights_path != NULL;
    if ((st = plan_memory(&cfg->layer, o->dtype, o->max_tokens, cfg, from_checkpoint, l->threads, &l->plan)) !=
        MOE_STATUS_OK) {
        char what[128];
        snprintf(what, sizeof what, "--dtype %s for %s", o->dtype->name, cfg->name);
        return cli_fail_status(NULL, st, what);
    }
    l->available = o->mem_limit ? (double)o->mem_limit : (double)cli_memory_available();
    if (l->available <= 0) l->available = INFINITY; /* unknown: let malloc decide */
    int rc = check_memory(o, cfg, &l->plan, l->available, from_checkpoint, l->threads, 0);
    if (rc || (rc = probe_format(ctx, &cfg->layer, o->dtype))) return rc;
    uint64_t gpu_free = l->gpu ? cli_device_free_memory() : 0;
    if (gpu_free && (rc = check_memory(o, cfg, &l->plan, (double)gpu_free, from_checkpoint, l->threads, 1)))
        return rc;

    if (o->weights_path) {
        moe_checkpoint_t *ckpt = NULL;
        char what[1100];
        if ((st = moe_checkpoint_open(ctx, o->weights_path, &ckpt)) != MOE_STATUS_OK) {
            snprintf(what, sizeof what, "--weights %s", o->weights_path);
            return cli_fail_status(ctx, st, what);
        }
        st = moe_weights_load(ctx, ckpt, &cfg->layer, o->layer, o->dtype->weights, &l->weights);
        if (st != MOE_STATUS_OK) {
            snprintf(what, sizeof what, "%s layer %lld", o->weights_path, (long long)o->layer);
            rc = cli_fail_status(ctx, st, what);
        }
        moe_checkpoint_close(ckpt);
        return rc;
    }
    random_weights source;
    moe_weights_desc desc;
    if ((rc = draw_weights(&cfg->layer, o->dtype, o->seed, l->threads, &source, &desc))) return rc;
    st = moe_weights_create(ctx, &cfg->layer, &desc, o->dtype->weights, &l->weights);
    random_weights_free(&source); /* packed now: the source goes before x, y, workspace */
    if (st != MOE_STATUS_OK) return cli_fail_status(ctx, st, "moe_weights_create");
    return 0;
}

void cli_layer_free(cli_layer *l) {
    moe_weights_free(l->weights);
    l->weights = NULL;
}

void cli_forward_free(cli_forward *f) {
    if (f->gpu) {
        cli_device_release(f->x);
        cli_device_release(f->y);
        cli_device_release(f->ids);
        cli_device_release(f->weights);
        cli_device_release(f->workspace);
    } else {
        free(f->weights);
        free(f->workspace);
    }
    free(f->host_x);
    free(f->host_y);
    free(f->host_ids);
    memset(f, 0, sizeof *f);
}

/* x, y, the routing outputs and the workspace: host memory for the CPU backend, GPU memory
 * for CUDA (with host copies of x, y and the ids). */
static int forward_buffers_alloc(cli_forward *f) {
    int failed = 0;
    f->host_x = alloc_bytes(f->x_bytes, &failed);
    f->host_y = alloc_bytes(f->x_bytes, &failed);
    f->host_ids = alloc_bytes(f->ids_bytes, &failed);
    if (failed) return cli_fail(1, "out of host memory for x and y");
    if (!f->gpu) {
        f->x = f->host_x, f->y = f->host_y, f->ids = f->host_ids;
        f->weights = alloc_bytes(f->ids_bytes, &failed);
        f->workspace = alloc_bytes((double)f->workspace_size, &failed);
        if (failed) return cli_fail(1, "out of host memory for the workspace");
        return 0;
    }
    if (!(f->x = cli_device_alloc((size_t)f->x_bytes)) || !(f->y = cli_device_alloc((size_t)f->x_bytes)) ||
        !(f->ids = cli_device_alloc((size_t)f->ids_bytes)) || !(f->weights = cli_device_alloc((size_t)f->ids_bytes)) ||
        !(f->workspace = cli_device_alloc(f->workspace_size)))
        return cli_fail(1, "GPU memory for x, y and the workspace: %s", cli_device_error());
    return 0;
}

int cli_forward_setup(moe_context_t *ctx, const cli_layer *l, int64_t tokens, uint64_t seed, cli_forward *f) {
    const moe_layer_spec *s = moe_weights_spec(l->weights);
    int64_t T = tokens, H = s->hidden, k = s->top_k;
    moe_dtype io = l->dtype->io;
    memset(f, 0, sizeof *f);
    f->gpu = l->gpu;
    f->tokens = T;
    f->x_bytes = (double)T * H * dtype_size(io);
    f->ids_bytes = 4.0 * T * k;
    moe_status st = moe_forward_workspace_size(ctx, l->weights, T, l->dtype->acts, &f->workspace_size);
    if (st != MOE_STATUS_OK) return cli_fail_status(ctx, st, "moe_forward_workspace_size");
    /* The estimate let the run start; the real size must fit too. */
    double need = (double)moe_weights_bytes(l->weights) + l->plan.io + (double)f->workspace_size;
    double have = l->available;
    if (f->gpu) { /* the weights are on the GPU already */
        uint64_t free_bytes = cli_device_free_memory();
        have = free_bytes ? (double)free_bytes + (double)moe_weights_bytes(l->weights) : INFINITY;
    }
    if (need > have) {
        char a[32], b[32], c[32];
        return cli_fail(1, "%s: the forward's workspace needs %s, %s in all, but %s %s", l->cfg->name,
                        cli_format_bytes((double)f->workspace_size, a, sizeof a), cli_format_bytes(need, b, sizeof b),
                        cli_format_bytes(have, c, sizeof c), f->gpu ? "of GPU memory is free" : "is available");
    }
    int rc = forward_buffers_alloc(f);
    if (rc) {
        cli_forward_free(f);
        return rc;
    }
    input_job job = {f->host_x, io, T, H, seed};
    parallel_for((T + 255) / 256, l->threads, draw_input_block, &job);
    /* y starts as NaN (all bits set, in every io dtype): an element the forward leaves unwritten
     * shows in the checksum, and a layer whose output is all zeros is told apart from one that
     * wrote nothing. */
    memset(f->host_y, 0xFF, (size_t)f->x_bytes);
    if (f->gpu && (cli_copy_to_device(f->x, f->host_x, (size_t)f->x_bytes) ||
                   cli_copy_to_device(f->y, f->host_y, (size_t)f->x_bytes))) {
        cli_forward_free(f);
        return cli_fail(1, "copying x and y to the GPU: %s", cli_device_error());
    }

    moe_forward_args *args = &f->args;
    moe_forward_args_init(args);
    args->x = moe_tensor_2d(f->x, io, T, H);
    args->y = moe_tensor_2d(f->y, io, T, H);
    args->out_topk_ids = moe_tensor_2d(f->ids, MOE_DTYPE_I32, T, k);
    args->out_topk_weights = moe_tensor_2d(f->weights, MOE_DTYPE_F32, T, k);
    moe_tensor *tensors[] = {&args->x, &args->y, &args->out_topk_ids, &args->out_topk_weights};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        tensors[i]->memory = f->gpu ? MOE_MEMORY_DEVICE : MOE_MEMORY_HOST;
    args->act_format = l->dtype->acts;
    args->workspace = f->workspace;
    args->workspace_size = f->workspace_size;
    return 0;
}

int cli_forward_fetch(cli_forward *f) {
    if (f->gpu && (cli_copy_to_host(f->host_y, f->y, (size_t)f->x_bytes) ||
                   cli_copy_to_host(f->host_ids, f->ids, (size_t)f->ids_bytes)))
        return cli_fail(1, "copying y from the GPU: %s", cli_device_error());
    return 0;
}

static double checksum_of(const void *y, moe_dtype dtype, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        if (dtype == MOE_DTYPE_F32) sum += ((const float *)y)[i];
        else if (dtype == MOE_DTYPE_BF16) sum += moe_bf16_to_float(((const uint16_t *)y)[i]);
        else sum += moe_f16_to_float(((const uint16_t *)y)[i]);
    }
    return sum;
}

int cli_forward_measure(const cli_layer *l, const cli_forward *f, cli_work *out) {
    const moe_layer_spec *s = moe_weights_spec(l->weights);
    double T = (double)f->tokens, H = (double)s->hidden, k = (double)s->top_k;
    /* FLOPs of the routed and shared experts. */
    double I = (double)s->intermediate;
    double R13 = moe_activation_is_gated(s->activation) ? 2 * I : I;
    double Is = s->num_shared_experts > 0 ? (double)s->shared_intermediate : 0;
    double R13s = moe_activation_is_gated(s->activation) ? 2 * Is : Is;
    out->flops = 2.0 * T * k * H * R13 + 2.0 * T * k * I * H + 2.0 * T * H * R13s + 2.0 * T * Is * H;
    /* Bytes: the packed weights of the experts the batch touched, plus x and y. */
    char *seen = calloc((size_t)s->num_experts, 1);
    if (!seen) return cli_fail(1, "out of host memory");
    out->touched = 0;
    for (int64_t i = 0; i < f->tokens * s->top_k; i++) {
        int32_t id = f->host_ids[i];
        if (id >= 0 && id < s->num_experts && !seen[id]) {
            seen[id] = 1;
            out->touched++;
        }
    }
    free(seen);
    out->bytes = (double)out->touched * l->plan.expert + (f->tokens > 0 ? l->plan.shared : 0) + 2.0 * f->x_bytes;
    out->checksum = checksum_of(f->host_y, l->dtype->io, f->tokens * s->hidden);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The command.
 * ------------------------------------------------------------------------------------- */
/* The outcome of the timed runs. */
typedef struct run_result {
    double seconds;
    int runs;
    cli_work work;
    size_t weights_bytes, workspace_bytes;
    char config[MOE_FORWARD_CONFIG_MAX]; /* moe_forward_config's line */
} run_result;

/* One forward; on the GPU it waits for the result, so that the clock measures the work. */
static int forward_once(moe_context_t *ctx, const moe_weights_t *w, const moe_forward_args *args, int gpu,
                        double *seconds) {
    double t0 = cli_now_seconds();
    moe_status st = moe_forward(ctx, w, args);
    if (st != MOE_STATUS_OK) return cli_fail_status(ctx, st, "moe_forward");
    if (gpu && cli_device_sync()) return cli_fail(1, "moe_forward: %s", cli_device_error());
    *seconds = cli_now_seconds() - t0;
    return 0;
}

/* Draws x, runs the forward (once to warm up, then timed) and fills `res`. */
static int forward_and_time(moe_context_t *ctx, const cli_layer *l, const run_options *o, run_result *res) {
    cli_forward f;
    int rc = cli_forward_setup(ctx, l, o->tokens, o->seed, &f);
    if (rc) return rc;
    if ((rc = cli_forward_config(ctx, l, o->tokens, res->config, sizeof res->config))) goto done;
    if (cli_print_config_wanted(o->print_config)) fprintf(stderr, "config   %s\n", res->config);
    double warm = 0;
    if ((rc = forward_once(ctx, l->weights, &f.args, l->gpu, &warm))) goto done;
    /* Median of several runs when they are quick, one run when each takes a second or more. */
    enum { MAX_RUNS = 21 };
    double times[MAX_RUNS];
    int runs = warm >= 1.0 ? 1 : warm * 5 >= 1.0 ? 5 : warm > 0 ? (int)fmin(MAX_RUNS, fmax(5, 1.0 / warm)) : MAX_RUNS;
    if (runs % 2 == 0) runs--;
    for (int r = 0; r < runs; r++)
        if ((rc = forward_once(ctx, l->weights, &f.args, l->gpu, &times[r]))) goto done;
    res->seconds = cli_median(times, runs);
    res->runs = runs;
    if ((rc = cli_forward_fetch(&f)) || (rc = cli_forward_measure(l, &f, &res->work))) goto done;
    res->weights_bytes = moe_weights_bytes(l->weights);
    res->workspace_bytes = f.workspace_size;
done:
    cli_forward_free(&f);
    return rc;
}

static void print_result(const run_options *o, const moe_model_config *cfg, moe_backend backend, const run_result *r) {
    const moe_layer_spec *s = &cfg->layer;
    double ms = r->seconds * 1e3;
    double tflops = r->seconds > 0 ? r->work.flops / r->seconds * 1e-12 : 0;
    double gbps = r->seconds > 0 ? r->work.bytes / r->seconds * 1e-9 : 0;
    if (o->json) {
        printf("{\"model\": ");
        cli_json_string(stdout, cfg->name);
        printf(", \"tokens\": %lld, \"experts\": %lld, \"hidden\": %lld, \"intermediate\": %lld, \"top_k\": %lld",
               (long long)o->tokens, (long long)s->num_experts, (long long)s->hidden, (long long)s->intermediate,
               (long long)s->top_k);
        printf(", \"shared_intermediate\": %lld",
               (long long)(s->num_shared_experts > 0 ? s->shared_intermediate : 0));
        printf(", \"score\": \"%s\", \"activation\": \"%s\", \"backend\": \"%s\", \"dtype\": \"%s\"",
               moe_score_name(s->score), moe_activation_name(s->activation), moe_backend_name(backend), o->dtype->name);
        printf(", \"weight_format\": \"%s\", \"act_format\": \"%s\"", moe_format_name(o->dtype->weights),
               moe_format_name(o->dtype->acts));
        printf(", \"weights\": ");
        if (o->weights_path) cli_json_string(stdout, o->weights_path);
        else printf("\"random\"");
        printf(", \"layer\": ");
        if (o->weights_path) printf("%lld", (long long)o->layer);
        else printf("null");
        printf(", \"seed\": %llu, \"threads\": %lld, \"runs\": %d", (unsigned long long)o->seed,
               (long long)o->threads, r->runs);
        printf(", \"time_ms\": ");
        cli_json_number(stdout, ms);
        printf(", \"tflops\": ");
        cli_json_number(stdout, tflops);
        printf(", \"gbps\": ");
        cli_json_number(stdout, gbps);
        printf(", \"flops\": ");
        cli_json_number(stdout, r->work.flops);
        printf(", \"bytes\": ");
        cli_json_number(stdout, r->work.bytes);
        printf(", \"experts_touched\": %lld, \"weights_bytes\": %zu, \"workspace_bytes\": %zu", (long long)r->work.touched,
               r->weights_bytes, r->workspace_bytes);
        printf(", \"checksum\": ");
        cli_json_number(stdout, r->work.checksum);
        printf(", \"config\": ");
        cli_json_string(stdout, r->config);
        printf("}\n");
        return;
    }
    char packed[32];
    printf("%s: E=%lld H=%lld I=%lld k=%lld, %s, %s", cfg->name, (long long)s->num_experts, (long long)s->hidden,
           (long long)s->intermediate, (long long)s->top_k, moe_score_name(s->score), moe_activation_name(s->activation));
    if (s->num_shared_experts > 0) printf(", shared %lld", (long long)s->shared_intermediate);
    printf("\n");
    printf("ran      %lld tokens on %s, %s", (long long)o->tokens, moe_backend_name(backend), o->dtype->name);
    if (strcmp(o->dtype->name, moe_format_name(o->dtype->weights)) != 0 || o->dtype->acts != MOE_FORMAT_F32) {
        printf(" (weights %s", moe_format_name(o->dtype->weights));
        if (o->dtype->acts != MOE_FORMAT_F32) printf(", activations %s", moe_format_name(o->dtype->acts));
        printf(")");
    }
    printf(", ");
    if (o->weights_path) printf("layer %lld of %s\n", (long long)o->layer, o->weights_path);
    else printf("random weights (seed %llu)\n", (unsigned long long)o->seed);
    printf("time     %.3f ms (median of %d)   %.3f TFLOP/s   %.1f GB/s\n", ms, r->runs, tflops, gbps);
    printf("touched  %lld of %lld experts; packed weights %s\n", (long long)r->work.touched, (long long)s->num_experts,
           cli_format_bytes((double)r->weights_bytes, packed, sizeof packed));
    printf("checksum %.9g\n", r->work.checksum);
}

int cmd_run(int argc, char **argv) {
    run_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;

    moe_context_t *ctx = NULL;
    cli_layer layer;
    memset(&layer, 0, sizeof layer);
    moe_status st = moe_context_create(o.backend, 0, &ctx);
    if (st != MOE_STATUS_OK) return cli_fail_status(NULL, st, "--backend");
    if (o.threads > 0 && (st = moe_context_set_threads(ctx, (int)o.threads)) != MOE_STATUS_OK) {
        rc = cli_fail_status(ctx, st, "--threads");
        goto done;
    }
    if (moe_context_backend(ctx) == MOE_BACKEND_CUDA && cli_device_open(0)) {
        rc = cli_fail(1, "--backend cuda: %s", cli_device_error());
        goto done;
    }
    moe_model_config cfg;
    rc = cli_load_model(ctx, o.model, o.config, &cfg);
    if (rc) goto done;
    if (o.weights_path && (rc = choose_layer(&o, &cfg))) goto done;

    cli_layer_options lo = {.dtype = o.dtype, .max_tokens = o.tokens, .seed = o.seed, .mem_limit = o.mem_limit,
                            .threads = o.threads, .weights_path = o.weights_path, .layer = o.layer};
    if ((rc = cli_layer_build(ctx, &cfg, &lo, &layer))) goto done;

    run_result result;
    memset(&result, 0, sizeof result);
    if ((rc = forward_and_time(ctx, &layer, &o, &result))) goto done;
    print_result(&o, &cfg, moe_context_backend(ctx), &result);
done:
    cli_layer_free(&layer);
    moe_context_free(ctx);
    return rc;
}
