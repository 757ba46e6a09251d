/* fp8_a2_probe: where does the Hopper FP8 path's y error in fp8-relu2-stale-rows-tensor come
 * from? GEMM1's fp32 A2 off by wgmma's accumulation (precision), or a structured error (BUG)?
 *
 * The case of tests/gpu/test_gpu_forward.c (E=8 H=256 I=144 k=2, relu2, fp8-block128 weights,
 * fp8-tensor activations, bf16 x/y, T=33), drawn with that suite's own helpers (gpu_test.h,
 * gpu_test_data.c, linked in): eager routing "ids" with x as drawn (A), replay routing
 * "ids-one-expert" with x scaled by 2^-8 (B). Per trial (fresh weights and inputs), on each path
 * (MOEFUSE_GEMM=v1, =hopper), four runs in one workspace:
 *   A            eager on A (workspace zeroed first)
 *   B-graph      the forward captured, B uploaded, the graph replayed (the suite's replay)
 *   B-after-A    eager A again, then eager B (stale rows without a graph)
 *   B-clean      eager B on a zeroed workspace (no stale rows at all)
 * After each run the workspace is read back (where forward.cu's layout puts things, from
 * moe__cuda_fp8_workspace_view; checked: device plan = moe_dispatch_plan_build's, x codes =
 * moe_quantize's): plan order, the fp32 A2, its codes and per-row scales. On the host, from
 * the oracle's x codes and the packed weights: g = x.W1 (+b) in fp64 (as the CPU oracle),
 * A2 = relu(g)^2, the oracle's float A2, its codes and scale (moe_quantize over [T*k, I]).
 *
 * Per run one line:
 *   y     GPU y vs the CPU oracle (relative Frobenius; the suite's number)
 *   y|c   GPU y vs y recomputed on the host from the GPU's own A2 codes and scale (GEMM2 +
 *         combine in fp64): bf16 rounding (~1.7e-3) when GEMM2/combine are right
 *   c|o   that host y vs the oracle: the part of y's error due to the A2 codes (flips)
 *   A2 gerr  |sqrt(A2_gpu) - relu(g)| / sum_h |x_h w_h| (the accumulation's own scale): fp32
 *         accumulation ~1e-7, a reduced-precision accumulator ~1e-5..1e-4; a bug O(1)
 *   A2 rel   |A2_gpu - A2| / A2 over elements with A2 >= amax/1000 (max, median)
 *   amax/scale  GPU vs exact / oracle (relative); flips = codes != the oracle's (max step)
 * The worst run per path gets a table per 128-row (v1: 64-row) plan block and per 128-column
 * tile (columns 128..143 are the N tail) to show row- or tile-patterned errors. (H = 256: no K
 * tail in this case.)
 * Verdict per run and a last line: "VERDICT: precision" when every run's A2 gerr is < 2e-3,
 * codes agree with the GPU's own fp32 A2 and scale, the scale matches the oracle's, y|c is at
 * bf16 level (< 5e-3): then y's error is the flips' (c|o). Else "VERDICT: BUG <where>".
 *
 * Usage: fp8_a2_probe [trials] (default 6), or --selftest (host only, no GPU: the analysis on a
 * readback made from the oracle, clean and with two planted bugs); MOEFUSE_SEED repeats a run. Exit 0 precision, 1 BUG,
 * 77 no CUDA device. Built and run by tests/gpu/fp8_a2_probe.sh. */
#include "gpu_test.h"

/* The suite's fp8-relu2-stale-rows-tensor model (fp8_model_cases), built: weights drawn from
 * the rng and packed on both contexts. */
static void stale_rows_model(model *m) {
    moe_layer_spec s;
    moe_layer_spec_init(&s, 8, 256, 144, 2);
    s.activation = MOE_ACT_RELU2;
    model_init(m, "fp8-relu2-stale-rows-tensor", &s, MOE_FORMAT_FP8_BLOCK128, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16,
               MOE_DTYPE_BF16);
    m->act_format = MOE_FORMAT_FP8_TENSOR;
    model_build(m);
}

/* ---- the plan's shape: rows reserved and rows per block (the workspace itself is read through
 * moe__cuda_fp8_workspace_view, in forward.cu's own layout) ---- */
typedef struct plan_shape {
    int64_t max_rows, block;
} plan_shape;

static plan_shape plan_shape_of(const model *m, int64_t T, bool hopper) {
    plan_shape o;
    o.block = hopper ? moe__cuda_forward_block_rows(m->w_gpu, T) : 64; /* 128, or 32 (FP8 swapped decode) */
    o.max_rows = T * m->spec.top_k + m->spec.num_experts * (o.block - 1);
    return o;
}

/* ---- the host side: dequantised weights, the exact GEMM1, GEMM2 from given A2 codes ---- */
typedef struct host_model {
    int64_t E, H, I, k;
    float *w1;  /* [E, I, H] dequantised W13 (relu2: W1) */
    float *w2;  /* [E, H, I] */
} host_model;

static host_model host_model_make(const model *m) {
    host_model h = {m->spec.num_experts, m->spec.hidden, m->spec.intermediate, m->spec.top_k, NULL, NULL};
    h.w1 = xmalloc((size_t)(h.E * h.I * h.H) * 4);
    h.w2 = xmalloc((size_t)(h.E * h.H * h.I) * 4);
    for (int64_t e = 0; e < h.E; e++) {
        for (int64_t u = 0; u < h.I; u++) moe__qmatrix_row(&m->w_cpu->w13, e, u, h.w1 + (e * h.I + u) * h.H);
        for (int64_t c = 0; c < h.H; c++) moe__qmatrix_row(&m->w_cpu->w2, e, c, h.w2 + (e * h.H + c) * h.I);
    }
    return h;
}

/* One input set's exact GEMM1 and the oracle's A2 quantisation, rows in id order t*k + j. */
typedef struct exact_a2 {
    int64_t rows;
    uint8_t *xcodes; /* [T, H] the oracle's x codes */
    double *g, *acc; /* [rows, I] g = x.w (+b), acc = sum |x w| */
    float *a2;       /* [rows, I] the oracle's float A2 */
    uint8_t *codes;  /* [rows, I] its codes */
    float xscale;    /* the oracle's x scale */
    float scale, amax;
    double amax_exact;
    float *y;        /* [T, H] the CPU forward */
} exact_a2;

static exact_a2 exact_make(const model *m, const host_model *h, const inputs *in) {
    const int64_t T = in->T, H = h->H, I = h->I, k = h->k;
    exact_a2 x = {T * k, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, NULL};
    float *xf = xmalloc((size_t)(T * H) * 4);
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < H; c++) xf[t * H + c] = x_at(m, in, t, c);
    x.xcodes = xmalloc((size_t)(T * H));
    MOE_OK(NULL, moe_quantize(MOE_FORMAT_FP8_TENSOR, xf, T, H, H, x.xcodes, &x.xscale, NULL));
    MOE_OK(NULL, moe_dequantize(MOE_FORMAT_FP8_TENSOR, x.xcodes, &x.xscale, 1.0f, T, H, xf, H));
    x.g = xmalloc((size_t)(x.rows * I) * 8);
    x.acc = xmalloc((size_t)(x.rows * I) * 8);
    x.a2 = xmalloc((size_t)(x.rows * I) * 4);
    x.codes = xmalloc((size_t)(x.rows * I));
    const float *b13 = m->w_cpu->b13;
    for (int64_t id = 0; id < x.rows; id++) {
        const int64_t e = in->ids[id], t = id / k;
        for (int64_t u = 0; u < I; u++) {
            const float *w = h->w1 + (e * I + u) * H;
            double g = b13 ? b13[e * I + u] : 0.0, acc = fabs(b13 ? b13[e * I + u] : 0.0);
            for (int64_t c = 0; c < H; c++) {
                g += (double)xf[t * H + c] * w[c];
                acc += fabs((double)xf[t * H + c] * w[c]);
            }
            x.g[id * I + u] = g;
            x.acc[id * I + u] = acc;
            x.a2[id * I + u] = moe__activate(&m->spec, (float)g, 0.0f);
            const double r = g > 0 ? g * g : 0.0;
            if (r > x.amax_exact) x.amax_exact = r;
            if (x.a2[id * I + u] > x.amax) x.amax = x.a2[id * I + u];
        }
    }
    MOE_OK(NULL, moe_quantize(MOE_FORMAT_FP8_TENSOR, x.a2, x.rows, I, I, x.codes, &x.scale, NULL));
    x.y = xmalloc((size_t)(T * H) * 4);
    int64_t *tok = xmalloc((size_t)T * 8);
    int32_t *ids = xmalloc((size_t)(T * k) * 4);
    float *wts = xmalloc((size_t)(T * k) * 4);
    for (int64_t t = 0; t < T; t++) tok[t] = t;
    cpu_forward(m, in, tok, T, x.y, ids, wts);
    free(tok), free(ids), free(wts), free(xf);
    return x;
}

static void exact_free(exact_a2 *x) {
    free(x->xcodes), free(x->g), free(x->acc), free(x->a2), free(x->codes), free(x->y);
}

/* y [T, H] from A2 codes in id order with one scale: the oracle's GEMM2 and combine in fp64. */
static void host_y_from_codes(const model *m, const host_model *h, const inputs *in, const uint8_t *codes,
                              float scale, double *y) {
    const int64_t T = in->T, H = h->H, I = h->I, k = h->k;
    float *a2 = xmalloc((size_t)(T * k * I) * 4);
    MOE_OK(NULL, moe_dequantize(MOE_FORMAT_FP8_TENSOR, codes, &scale, 1.0f, T * k, I, a2, I));
    const float *b2 = m->w_cpu->b2;
    memset(y, 0, (size_t)(T * H) * 8);
    for (int64_t id = 0; id < T * k; id++) {
        const int64_t e = in->ids[id], t = id / k;
        for (int64_t c = 0; c < H; c++) {
            const float *w = h->w2 + (e * H + c) * I;
            double v = b2 ? b2[e * H + c] : 0.0;
            for (int64_t u = 0; u < I; u++) v += (double)a2[id * I + u] * w[u];
            y[t * H + c] += v * in->weights[id];
        }
    }
    free(a2);
}

static double rel_err(const double *a, const double *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int64_t n) {
    if (n == 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}
/* The median of the v[i] with tag[i] == want (tag NULL: all), via tmp[n]. */
static double median_of(const double *v, const int *tag, int want, int64_t n, double *tmp) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!tag || tag[i] == want) tmp[m++] = v[i];
    return median(tmp, m);
}

/* ---- one run's analysis ---------------------------------------------------------------- */
#define MAX_BLOCKS 64
typedef struct run_result {
    double y_err, y_vs_codes, codes_vs_oracle, self_check;
    double gerr_max, gerr_med, rel_max, rel_med, scale_gpu;
    float amax_gpu; /* over the routed rows of the GPU's fp32 A2 */
    int64_t flips, max_step, inconsistent, scale_rows_bad, layout_bad, worst_row, worst_col;
    char bug[200];
    /* per plan block / per column tile: max gerr, flips, routed rows */
    double block_gerr[MAX_BLOCKS], tile_gerr[4], block_med[MAX_BLOCKS], tile_med[4];
    int64_t block_flips[MAX_BLOCKS], block_rows[MAX_BLOCKS], block_owner[MAX_BLOCKS], tile_flips[4], nblocks;
} run_result;

static int code_step(uint8_t a, uint8_t b) { /* e4m3 codes of one sign are monotone in value */
    if ((a ^ b) & 0x80) return 99;
    const int d = (int)(a & 0x7F) - (int)(b & 0x7F);
    return d < 0 ? -d : d;
}

/* What a run leaves in the workspace (and y), read back to the host. */
typedef struct readback {
    int64_t *offsets;   /* [E + 1] */
    int32_t *sorted;    /* [max_rows] */
    uint8_t *xq, *a2q;  /* [T, H], [max_rows, I] */
    float xs, *a2f, *scales; /* x's scale, [max_rows, I], [max_rows] */
    void *y;            /* [T, H + y_pad] in y's dtype */
} readback;

static readback readback_alloc(const model *m, int64_t T, const plan_shape *o) {
    const int64_t E = m->spec.num_experts, H = m->spec.hidden, I = m->spec.intermediate, R = o->max_rows;
    readback w;
    w.offsets = xmalloc((size_t)(E + 1) * 8);
    w.sorted = xmalloc((size_t)R * 4);
    w.xq = xmalloc((size_t)(T * H));
    w.a2q = xmalloc((size_t)(R * I));
    w.a2f = xmalloc((size_t)(R * I) * 4);
    w.scales = xmalloc((size_t)R * 4);
    w.xs = 0.0f;
    w.y = xmalloc(y_bytes(m, T));
    return w;
}

static void readback_free(readback *w) {
    free(w->offsets), free(w->sorted), free(w->xq), free(w->a2q), free(w->a2f), free(w->scales), free(w->y);
}

static readback readback_device(const model *m, const device_buffers *b, int64_t T, const plan_shape *o) {
    const int64_t E = m->spec.num_experts, H = m->spec.hidden, I = m->spec.intermediate, R = o->max_rows;
    readback w = readback_alloc(m, T, o);
    moe__cuda_fp8_view v; /* fp8-tensor: x has one scale, A2 one per plan row */
    MOE_OK(gpu_ctx, moe__cuda_fp8_workspace_view(gpu_ctx, m->w_gpu, T, m->act_format, b->workspace, &v));
    CUDA_OK(cudaMemcpy(w.offsets, v.offsets, (size_t)(E + 1) * 8, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(w.sorted, v.sorted_ids, (size_t)R * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(w.xq, v.x.codes, (size_t)(T * H), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&w.xs, v.x.scales, 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(w.a2f, v.a2.values, (size_t)(R * I) * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(w.a2q, v.a2.codes, (size_t)(R * I), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(w.scales, v.a2.scales, (size_t)R * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(w.y, b->y, y_bytes(m, T), cudaMemcpyDeviceToHost));
    return w;
}

static run_result analyse(const model *m, const host_model *h, const inputs *in, const exact_a2 *x,
                          const plan_shape *o, const readback *w) {
    const int64_t T = in->T, H = h->H, I = h->I, k = h->k, E = h->E, rows = T * k;
    run_result r;
    memset(&r, 0, sizeof r);
    r.worst_row = r.worst_col = -1;
    const int64_t *offsets = w->offsets;
    const int32_t *sorted = w->sorted;
    const uint8_t *xq = w->xq, *a2q = w->a2q;
    const float *a2f = w->a2f, *scales = w->scales;

    /* The offsets are right if the plan is the CPU's and the x codes are moe_quantize's. */
    moe_dispatch_plan cp = {0};
    int64_t max_rows, max_blocks;
    MOE_OK(NULL, moe_dispatch_plan_bounds(T, k, E, o->block, &max_rows, &max_blocks));
    cp.expert_counts = xmalloc((size_t)E * 8);
    cp.expert_offsets = xmalloc((size_t)(E + 1) * 8);
    cp.sorted_ids = xmalloc((size_t)max_rows * 4);
    cp.block_expert = xmalloc((size_t)max_blocks * 4);
    MOE_OK(cpu_ctx, moe_dispatch_plan_build(cpu_ctx, in->ids, T, k, E, o->block, &cp));
    const int64_t live = cp.expert_offsets[E];
    r.layout_bad = offsets[E] != live;
    for (int64_t p = 0; p < live && !r.layout_bad; p++) r.layout_bad += sorted[p] != cp.sorted_ids[p];
    for (int64_t i = 0; i < T * H; i++) r.layout_bad += xq[i] != x->xcodes[i];
    r.layout_bad += w->xs != x->xscale;

    /* A2 per routed plan row against the exact one; codes against the oracle's. */
    uint8_t *gpu_codes = xmalloc((size_t)(rows * I)); /* in id order, for the host GEMM2 */
    memset(gpu_codes, 0, (size_t)(rows * I));
    double *gerr = xmalloc((size_t)(rows * I) * 8), *rel = xmalloc((size_t)(rows * I) * 8);
    double *tmp = xmalloc((size_t)(rows * I) * 8);
    int *tag_block = xmalloc((size_t)(rows * I) * sizeof(int)), *tag_tile = xmalloc((size_t)(rows * I) * sizeof(int));
    int64_t ng = 0, nrel = 0;
    r.scale_gpu = NAN;
    r.nblocks = (live + o->block - 1) / o->block;
    if (r.nblocks > MAX_BLOCKS) r.nblocks = MAX_BLOCKS;
    for (int64_t bl = 0; bl < r.nblocks; bl++) r.block_owner[bl] = cp.block_expert[bl];
    for (int64_t p = 0; p < live; p++) {
        const int64_t id = sorted[p], bl = p / o->block;
        if (id < 0 || id >= rows) continue; /* padding */
        if (bl < MAX_BLOCKS) r.block_rows[bl]++;
        if (isnan(r.scale_gpu)) r.scale_gpu = scales[p];
        if (scales[p] != r.scale_gpu) r.scale_rows_bad++;
        for (int64_t u = 0; u < I; u++) {
            const float a = a2f[p * I + u];
            const double g = x->g[id * I + u], ex = g > 0 ? g * g : 0.0;
            double ge = fabs((a > 0 ? sqrt((double)a) : 0.0) - (g > 0 ? g : 0.0)) / x->acc[id * I + u];
            if (isnan(ge)) ge = INFINITY;
            if (a > r.amax_gpu) r.amax_gpu = a;
            if (g > 0) { /* medians over A2 > 0 only: relu2 zeros are exact on every path */
                tag_block[ng] = (int)bl;
                tag_tile[ng] = (int)(u / 128 < 3 ? u / 128 : 3);
                gerr[ng++] = ge;
            }
            if (ge > r.gerr_max || r.worst_row < 0) r.gerr_max = ge, r.worst_row = p, r.worst_col = u;
            if (ex >= x->amax_exact * 1e-3) {
                rel[nrel] = fabs(a - ex) / ex;
                if (rel[nrel] > r.rel_max) r.rel_max = rel[nrel];
                nrel++;
            }
            const uint8_t c = a2q[p * I + u];
            gpu_codes[id * I + u] = c;
            if (c != moe__cuda_fp8_encode_host(a, scales[p])) r.inconsistent++;
            const int step = code_step(c, x->codes[id * I + u]);
            if (step) {
                r.flips++;
                if (bl < MAX_BLOCKS) r.block_flips[bl]++;
                r.tile_flips[u / 128 < 3 ? u / 128 : 3]++;
            }
            if (step > r.max_step) r.max_step = step;
            if (bl < MAX_BLOCKS && ge > r.block_gerr[bl]) r.block_gerr[bl] = ge;
            if (ge > r.tile_gerr[u / 128 < 3 ? u / 128 : 3]) r.tile_gerr[u / 128 < 3 ? u / 128 : 3] = ge;
        }
    }
    /* Structure: a plan block or a column tile whose median error stands out from the rest. */
    r.gerr_med = median_of(gerr, NULL, 0, ng, tmp);
    r.rel_med = median(rel, nrel);
    int64_t odd_block = -1, odd_tile = -1;
    for (int64_t bl = 0; bl < r.nblocks; bl++) {
        r.block_med[bl] = r.block_rows[bl] ? median_of(gerr, tag_block, (int)bl, ng, tmp) : 0.0;
        if (odd_block < 0 && r.block_med[bl] > 10 * r.gerr_med && r.block_med[bl] > 1e-6) odd_block = bl;
    }
    for (int t = 0; t < 4; t++) {
        r.tile_med[t] = median_of(gerr, tag_tile, t, ng, tmp);
        if (odd_tile < 0 && r.tile_med[t] > 10 * r.gerr_med && r.tile_med[t] > 1e-6) odd_tile = t;
    }

    /* y: the GPU's, the host's from the GPU codes, the host's from the oracle codes, the oracle. */
    const void *y = w->y;
    double *yg = xmalloc((size_t)(T * H) * 8), *yo = xmalloc((size_t)(T * H) * 8);
    double *yc = xmalloc((size_t)(T * H) * 8), *yr = xmalloc((size_t)(T * H) * 8);
    for (int64_t i = 0; i < T * H; i++) yg[i] = y_at(m, y, i / H, i % H), yo[i] = x->y[i];
    host_y_from_codes(m, h, in, gpu_codes, isnan(r.scale_gpu) ? 1.0f : r.scale_gpu, yc);
    host_y_from_codes(m, h, in, x->codes, x->scale, yr);
    r.y_err = rel_err(yg, yo, T * H);
    r.y_vs_codes = rel_err(yg, yc, T * H);
    r.codes_vs_oracle = rel_err(yc, yo, T * H);
    r.self_check = rel_err(yr, yo, T * H);

    /* The verdict of this run. */
    if (r.layout_bad || r.self_check > 1e-5)
        snprintf(r.bug, sizeof r.bug,
                 "device plan / x codes / x scale differ from the CPU's in %lld places (a bug, or the probe's offsets "
                 "are stale), or the host GEMM2 self-check is off (%.1e)", (long long)r.layout_bad, r.self_check);
    else if (r.gerr_max > 2e-3)
        snprintf(r.bug, sizeof r.bug, "A2 off at plan row %lld (block %lld, expert %d) column %lld (tile %lld)",
                 (long long)r.worst_row, (long long)(r.worst_row / o->block), cp.block_expert[r.worst_row / o->block],
                 (long long)r.worst_col, (long long)(r.worst_col / 128));
    else if (odd_block >= 0 || odd_tile >= 0)
        snprintf(r.bug, sizeof r.bug, "A2 error structured: %s %lld median %.1e vs %.1e overall",
                 odd_block >= 0 ? "plan block" : "column tile", (long long)(odd_block >= 0 ? odd_block : odd_tile),
                 odd_block >= 0 ? r.block_med[odd_block] : r.tile_med[odd_tile], r.gerr_med);
    else if (r.scale_rows_bad || r.scale_gpu != (float)(r.amax_gpu / 448.0f) || fabs(r.scale_gpu - x->scale) > 1e-2 * x->scale)
        snprintf(r.bug, sizeof r.bug,
                 "A2 scale %.6e: own amax/448 %.6e, oracle %.6e (%lld routed rows with another scale)", r.scale_gpu,
                 (float)(r.amax_gpu / 448.0f), x->scale, (long long)r.scale_rows_bad);
    else if (r.inconsistent)
        snprintf(r.bug, sizeof r.bug, "%lld A2 codes are not the GPU's own fp32 A2 / scale", (long long)r.inconsistent);
    else if (r.y_vs_codes > 5e-3)
        snprintf(r.bug, sizeof r.bug, "GEMM2/combine: y vs y from the GPU's A2 codes %.2e", r.y_vs_codes);
    free(gpu_codes), free(gerr), free(rel), free(tmp), free(tag_block), free(tag_tile);
    free(yg), free(yo), free(yc), free(yr);
    free(cp.expert_counts), free(cp.expert_offsets), free(cp.sorted_ids), free(cp.block_expert);
    return r;
}

static void print_run(const char *path, int trial, const char *what, const run_result *r, const exact_a2 *x) {
    printf("%-6s trial %d %-9s y %.2e y|c %.2e c|o %.2e | A2 gerr max %.1e med %.1e rel max %.1e med %.1e | "
           "amax %.3e/%.3e scale %+.1e | flips %lld (step<=%lld) | %s\n",
           path, trial, what, r->y_err, r->y_vs_codes, r->codes_vs_oracle, r->gerr_max, r->gerr_med, r->rel_max,
           r->rel_med, r->amax_gpu, x->amax_exact, (r->scale_gpu - x->scale) / x->scale, (long long)r->flips,
           (long long)r->max_step, r->bug[0] ? r->bug : "ok");
}

static void print_tables(const char *path, int trial, const char *what, const run_result *r, int64_t block) {
    printf("  worst %s run (trial %d %s): per %lld-row plan block: block expert rows gerr-max gerr-median flips\n", path, trial,
           what, (long long)block);
    for (int64_t bl = 0; bl < r->nblocks; bl++)
        printf("    %3lld %3lld %4lld %.1e %.1e %lld\n", (long long)bl, (long long)r->block_owner[bl],
               (long long)r->block_rows[bl], r->block_gerr[bl], r->block_med[bl], (long long)r->block_flips[bl]);
    printf("  per column tile: cols 0-127 gerr max %.1e median %.1e flips %lld; cols 128-143 (N tail) gerr max %.1e "
           "median %.1e flips %lld\n", r->tile_gerr[0], r->tile_med[0], (long long)r->tile_flips[0], r->tile_gerr[1],
           r->tile_med[1], (long long)r->tile_flips[1]);
}

static run_result analyse_device(const model *m, const host_model *h, const device_buffers *b, const inputs *in,
                                 const exact_a2 *x, const plan_shape *o) {
    readback w = readback_device(m, b, in->T, o);
    const run_result r = analyse(m, h, in, x, o, &w);
    readback_free(&w);
    return r;
}

/* The probe checked on the host (--selftest, no GPU): a readback made from the oracle itself
 * (the CPU plan, the oracle's A2, codes and scale in plan order, padding rows poisoned, y = the
 * oracle's rounded to bf16) must read "ok"; with plan block 1's A2 1% high it must name block 1;
 * with every A2 scale 2^16 too large (a stale amax) it must name the scale. */
static readback fake_readback(const model *m, const inputs *in, const exact_a2 *x, const plan_shape *o, int plant) {
    const int64_t T = in->T, H = m->spec.hidden, I = m->spec.intermediate, E = m->spec.num_experts, k = m->spec.top_k;
    readback w = readback_alloc(m, T, o);
    moe_dispatch_plan cp = {0};
    cp.expert_counts = w.offsets; /* scratch, overwritten below */
    cp.expert_offsets = xmalloc((size_t)(E + 1) * 8);
    cp.sorted_ids = w.sorted;
    cp.block_expert = xmalloc((size_t)o->max_rows * 4);
    for (int64_t i = 0; i < o->max_rows; i++) w.sorted[i] = (int32_t)(T * k);
    MOE_OK(cpu_ctx, moe_dispatch_plan_build(cpu_ctx, in->ids, T, k, E, o->block, &cp));
    memcpy(w.offsets, cp.expert_offsets, (size_t)(E + 1) * 8);
    memcpy(w.xq, x->xcodes, (size_t)(T * H));
    w.xs = x->xscale;
    const float scale = plant == 2 ? ldexpf(x->scale, 16) : x->scale;
    for (int64_t p = 0; p < o->max_rows; p++) {
        const int64_t id = w.sorted[p];
        w.scales[p] = scale;
        for (int64_t u = 0; u < I; u++) {
            float a = id < T * k ? x->a2[id * I + u] : 1e30f;
            if (plant == 1 && p / o->block == 1) a *= 1.01f;
            w.a2f[p * I + u] = a;
            w.a2q[p * I + u] = moe__cuda_fp8_encode_host(a, scale);
        }
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < H; c++) ((uint16_t *)w.y)[t * H + c] = moe_float_to_bf16(x->y[t * H + c]);
    free(cp.expert_offsets), free(cp.block_expert);
    return w;
}

static int selftest(void) {
    MOE_OK(NULL, moe_context_create(MOE_BACKEND_CPU, 0, &cpu_ctx));
    gpu_ctx = cpu_ctx; /* model_build packs on both */
    rng_state = 12345;
    model m;
    stale_rows_model(&m);
    host_model h = host_model_make(&m);
    inputs A = {0};
    inputs_draw(&m, &A, 33, R_IDS);
    exact_a2 xa = exact_make(&m, &h, &A);
    const char *expect[3] = {NULL, "plan block 1", "scale"}, *names[3] = {"as-oracle", "block1+1%", "scale*2^16"};
    int failed = 0;
    for (int hopper = 0; hopper < 2; hopper++)
        for (int plant = 0; plant < 3; plant++) {
            const plan_shape o = plan_shape_of(&m, 33, hopper);
            readback w = fake_readback(&m, &A, &xa, &o, plant);
            const run_result r = analyse(&m, &h, &A, &xa, &o, &w);
            print_run(hopper ? "hopper" : "v1", 0, names[plant], &r, &xa);
            const bool ok = expect[plant] ? strstr(r.bug, expect[plant]) != NULL : r.bug[0] == 0;
            if (!ok) failed++;
            printf("%s selftest %s %s\n", ok ? "ok  " : "FAIL", hopper ? "hopper" : "v1", names[plant]);
            readback_free(&w);
        }
    exact_free(&xa), inputs_free(&A), free(h.w1), free(h.w2), model_free(&m);
    moe_context_free(cpu_ctx);
    printf("%d passed, %d failed\n", 6 - failed, failed);
    return failed ? 1 : 0;
}

/* One forward on `in` in b's workspace: eagerly, or (graph) captured first and replayed on it. */
static void forward_on(const model *m, device_buffers *b, const inputs *in, bool graph, bool zero_ws) {
    if (zero_ws) CUDA_OK(cudaMemset(b->workspace, 0, b->workspace_size));
    if (!graph) {
        device_upload(m, b, in);
        MOE_OK(gpu_ctx, moe_forward(gpu_ctx, m->w_gpu, &b->args));
    } else {
        cudaGraph_t g;
        cudaGraphExec_t exec;
        CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        MOE_OK(gpu_ctx, moe_forward(gpu_ctx, m->w_gpu, &b->args));
        CUDA_OK(cudaStreamEndCapture(stream, &g));
        CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
        device_upload(m, b, in);
        CUDA_OK(cudaGraphLaunch(exec, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        CUDA_OK(cudaGraphExecDestroy(exec));
        CUDA_OK(cudaGraphDestroy(g));
    }
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaGetLastError());
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--selftest")) return selftest();
    const int trials = argc > 1 ? atoi(argv[1]) : 6;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("fp8_a2_probe: no CUDA device: SKIP\n");
        return 77;
    }
    const char *env = getenv("MOEFUSE_SEED");
    const uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    rng_state = seed;
    printf("fp8_a2_probe: seed %llu (MOEFUSE_SEED repeats), %d trials of fp8-relu2-stale-rows-tensor T=33\n",
           (unsigned long long)seed, trials);
    MOE_OK(NULL, moe_context_create(MOE_BACKEND_CPU, 0, &cpu_ctx));
    MOE_OK(NULL, moe_context_create(MOE_BACKEND_CUDA, 0, &gpu_ctx));
    CUDA_OK(cudaStreamCreate(&stream));

    int bugs[2] = {0, 0};
    char first_bug[2][300] = {"", ""};
    double worst_y[2] = {-1, -1};
    char worst_run[2][200] = {"", ""};
    for (int trial = 0; trial < trials; trial++) {
        model m;
        stale_rows_model(&m);
        host_model h = host_model_make(&m);
        inputs A = {0}, B = {0};
        inputs_draw(&m, &A, 33, R_IDS);
        inputs_draw(&m, &B, 33, R_IDS_ONE);
        scale_x(&m, &B, 8);
        exact_a2 xa = exact_make(&m, &h, &A), xb = exact_make(&m, &h, &B);
        for (int p = 0; p < 2; p++) {
            setenv("MOEFUSE_GEMM", gemm_paths[p], 1);
            const bool hopper = moe__cuda_forward_gemm(m.w_gpu, 33) == MOE__CUDA_GEMM_HOPPER;
            device_buffers b;
            device_alloc(&m, &b, 33, R_IDS);
            const plan_shape o = plan_shape_of(&m, 33, hopper);
            moe__cuda_fp8_view v;
            MOE_OK(gpu_ctx, moe__cuda_fp8_workspace_view(gpu_ctx, m.w_gpu, 33, m.act_format, b.workspace, &v));
            if (v.max_rows != o.max_rows || v.block != o.block) {
                printf("FATAL: the forward's plan has %lld rows in blocks of %lld, the probe expects %lld in blocks of "
                       "%lld\n", (long long)v.max_rows, (long long)v.block, (long long)o.max_rows, (long long)o.block);
                return 1;
            }
            const char *names[4] = {"A", "B-graph", "B-after-A", "B-clean"};
            run_result rr[4];
            forward_on(&m, &b, &A, false, true);
            rr[0] = analyse_device(&m, &h, &b, &A, &xa, &o);
            forward_on(&m, &b, &B, true, false);
            rr[1] = analyse_device(&m, &h, &b, &B, &xb, &o);
            forward_on(&m, &b, &A, false, true);
            forward_on(&m, &b, &B, false, false);
            rr[2] = analyse_device(&m, &h, &b, &B, &xb, &o);
            forward_on(&m, &b, &B, false, true);
            rr[3] = analyse_device(&m, &h, &b, &B, &xb, &o);
            int worst = 0;
            const char *path = hopper ? "hopper" : "v1";
            for (int i = 0; i < 4; i++) {
                print_run(path, trial, names[i], &rr[i], i ? &xb : &xa);
                if (rr[i].y_err > rr[worst].y_err) worst = i;
                if (rr[i].bug[0] && bugs[p]++ == 0)
                    snprintf(first_bug[p], sizeof first_bug[p], "%s trial %d %s: %s", path, trial, names[i], rr[i].bug);
            }
            if (rr[worst].y_err > worst_y[p] || rr[worst].bug[0]) {
                worst_y[p] = rr[worst].y_err;
                snprintf(worst_run[p], sizeof worst_run[p], "%s trial %d %s: y %.2e, y|c %.2e, c|o %.2e, %lld flips",
                         path, trial, names[worst], rr[worst].y_err, rr[worst].y_vs_codes, rr[worst].codes_vs_oracle,
                         (long long)rr[worst].flips);
                print_tables(path, trial, names[worst], &rr[worst], o.block);
            }
            device_free(&b);
        }
        unsetenv("MOEFUSE_GEMM");
        exact_free(&xa), exact_free(&xb);
        inputs_free(&A), inputs_free(&B);
        free(h.w1), free(h.w2);
        model_free(&m);
        fflush(stdout);
    }
    printf("v1: %d runs flagged%s%s; hopper: %d runs flagged%s%s\n", bugs[0], bugs[0] ? ", first: " : "",
           first_bug[0], bugs[1], bugs[1] ? ", first: " : "", first_bug[1]);
    if (bugs[1] || bugs[0])
        printf("VERDICT: BUG %s\n", bugs[1] ? first_bug[1] : first_bug[0]);
    else
        printf("VERDICT: precision (every run: A2 error small and unstructured, codes = the GPU's own A2 and scale, "
               "scale = the oracle's, y|c at bf16 level: y's error is the A2 code flips, c|o); worst: %s; %s\n",
               worst_run[1], worst_run[0]);
    CUDA_OK(cudaStreamDestroy(stream));
    moe_context_free(cpu_ctx);
    moe_context_free(gpu_ctx);
    return bugs[0] || bugs[1] ? 1 : 0;
}
