/* The CPU reference forward: the oracle every GPU kernel is checked against.
 *
 * Plain loops, fp32 storage, double accumulation of every dot product (the products of two
 * floats are exact in double, so the only rounding is in the sum, and the result is far
 * closer to the exact value than fp32 accumulation over H = 7168 would be). moe_forward
 * (src/core/forward.c) has validated every argument before we get here.
 *
 * Determinism: each output element is computed by exactly one thread, in an order that
 * depends only on the problem (never on the thread count or schedule), so y is bitwise
 * identical for any number of threads. Per-row intermediates are indexed by the row id
 * (token * k + slot), not by position in a thread's work list.
 *
 * Memory: only the caller's workspace; no allocation on this path. */
#include "cpu.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Per-thread row decode buffers live in the workspace, whose size cannot depend on the
 * thread count (the query takes no context), so the thread count is capped at this. */
#define CPU_THREAD_SLOTS 64
_Static_assert(CPU_THREAD_SLOTS >= MOE__TEAM_MAX, "a slot for every thread of a team");
/* Work units per parallel item: GLU pairs (or RELU2 rows) of W13, output rows of W2. */
#define W13_CHUNK 16
#define W2_CHUNK 32
#define ALIGN 64

/* Where each array lives in the workspace (byte offsets), and the sizes they are built from. */
typedef struct cpu_layout {
    int64_t T, H, E, k, I, Is, rows; /* rows = T * k */
    int64_t decode_len;              /* floats per decode buffer: max(H, I, Is) */
    int64_t x_f, ids, weights, logits, gate_scale;
    int64_t counts, offsets, sorted_ids, block_expert;
    int64_t shared_rows, a2, out_rows, a2s, outs;
    int64_t qcodes, qscales;
    int64_t decode; /* CPU_THREAD_SLOTS * 2 buffers */
    int64_t total;
} cpu_layout;

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Reserves count * elem bytes at the next 64-byte boundary after *cursor; false on overflow. */
static bool reserve(int64_t *cursor, int64_t count, int64_t elem, int64_t *offset) {
    int64_t start, bytes, end;
    if (!moe__add64(*cursor, ALIGN - 1, &start)) return false;
    start -= start % ALIGN;
    if (!moe__mul64(count, elem, &bytes) || !moe__add64(start, bytes, &end)) return false;
    *offset = start;
    *cursor = end;
    return true;
}

/* Elements of the FP8 scale array of a [rows, cols] matrix quantised in 1x128 groups. */
static bool row128_scales(int64_t rows, int64_t cols, int64_t *out) {
    return moe__mul64(rows, (cols + 127) / 128, out);
}

static bool layout_compute(const moe_weights_t *w, int64_t T, moe_format act_format, cpu_layout *L) {
    const moe_layer_spec *s = &w->spec;
    const bool shared = w->s13.count > 0;
    memset(L, 0, sizeof *L);
    L->T = T, L->H = s->hidden, L->E = s->num_experts, L->k = s->top_k, L->I = s->intermediate;
    L->Is = shared ? s->shared_intermediate : 0;
    L->decode_len = max64(L->H, max64(L->I, L->Is));
    int64_t c = 0, n, TH, rowsI, rowsH, sharedI;
    bool ok = moe__mul64(T, L->k, &L->rows) && moe__mul64(T, L->H, &TH) && reserve(&c, TH, 4, &L->x_f) &&
              reserve(&c, L->rows, 4, &L->ids) && reserve(&c, L->rows, 4, &L->weights) &&
              moe__mul64(T, L->E, &n) && reserve(&c, n, 4, &L->logits) && reserve(&c, T, 4, &L->gate_scale);
    /* The dispatch plan with block 1: max_rows = max_blocks = T*k (moe_dispatch_plan_bounds). */
    ok = ok && reserve(&c, L->E, 8, &L->counts) && reserve(&c, L->E + 1, 8, &L->offsets) &&
         reserve(&c, L->rows, 4, &L->sorted_ids) && reserve(&c, L->rows, 4, &L->block_expert);
    ok = ok && moe__mul64(L->rows, L->I, &rowsI) && moe__mul64(L->rows, L->H, &rowsH) &&
         moe__mul64(T, L->Is, &sharedI) && reserve(&c, rowsI, 4, &L->a2) &&
         reserve(&c, rowsH, 4, &L->out_rows);
    if (ok && shared)
        ok = reserve(&c, T, 4, &L->shared_rows) && reserve(&c, sharedI, 4, &L->a2s) &&
             reserve(&c, TH, 4, &L->outs);
    if (ok && act_format != MOE_FORMAT_F32) {
        /* One code buffer and one scale buffer, reused for x, A2 and the shared A2. */
        int64_t s1, s2, s3;
        ok = row128_scales(T, L->H, &s1) && row128_scales(L->rows, L->I, &s2) && row128_scales(T, L->Is, &s3) &&
             reserve(&c, max64(TH, max64(rowsI, sharedI)), 1, &L->qcodes) &&
             reserve(&c, max64(1, max64(s1, max64(s2, s3))), 4, &L->qscales);
    }
    ok = ok && moe__mul64(L->decode_len, 2 * CPU_THREAD_SLOTS, &n) && reserve(&c, n, 4, &L->decode);
    /* ALIGN - 1 spare bytes: the caller's pointer need not be aligned; we round it up. */
    ok = ok && moe__add64(c, ALIGN - 1, &L->total);
    return ok && (uint64_t)L->total < (uint64_t)SIZE_MAX;
}

size_t moe__cpu_forward_workspace(const moe_weights_t *w, int64_t num_tokens, moe_format act_format) {
    cpu_layout L;
    if (!layout_compute(w, num_tokens, act_format, &L)) return SIZE_MAX;
    return (size_t)L.total;
}

/* Σ a[j] b[j] in double. Four partial sums by j mod 4, combined as (s0 + s1) + (s2 + s3):
 * a fixed order that depends only on n (and lets the compiler keep four chains in flight). */
static double dot(const float *a, const float *b, int64_t n) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        s0 += (double)a[j] * b[j];
        s1 += (double)a[j + 1] * b[j + 1];
        s2 += (double)a[j + 2] * b[j + 2];
        s3 += (double)a[j + 3] * b[j + 3];
    }
    for (; j < n; j++) s0 += (double)a[j] * b[j];
    return (s0 + s1) + (s2 + s3);
}

/* One expert's share of the work: which weights, which rows, where their results go. A
 * row is an (input, output) pair: for routed expert e the rows are the ids token*k + slot
 * the plan assigned to e; for the shared expert they are the tokens 0..T-1 (k_div = 1). */
typedef struct expert_job {
    const moe__qmatrix *w13, *w2;
    int64_t index;       /* matrix index in w13 / w2 */
    const float *b13;    /* [R13] or NULL */
    const float *b2;     /* [H] or NULL */
    const int32_t *rows; /* row ids */
    int64_t nrows;
    int64_t k_div;       /* token = row id / k_div */
    const float *row_weight; /* routing weight by row id, NULL for weight 1 */
    int64_t inter;       /* I or Is */
    float *a2;           /* [row id][inter] */
    float *out;          /* [row id][H] */
} expert_job;

typedef struct cpu_state {
    const moe_weights_t *w;
    cpu_layout L;
    const float *x_f;
    const float *weights;
    const moe_dispatch_plan *plan;
    const int32_t *shared_rows;
    float *a2, *out_rows, *a2s, *outs;
    float *decode;
} cpu_state;

/* Job j: routed experts 0..E-1, then the shared expert (j == E) when there is one. */
static expert_job job_of(const cpu_state *st, int64_t j) {
    const moe_weights_t *w = st->w;
    const cpu_layout *L = &st->L;
    expert_job job;
    if (j < L->E) {
        const int64_t r13 = w->w13.rows;
        job = (expert_job){.w13 = &w->w13, .w2 = &w->w2, .index = j,
                           .b13 = w->b13 ? w->b13 + j * r13 : NULL, .b2 = w->b2 ? w->b2 + j * L->H : NULL,
                           .rows = st->plan->sorted_ids + st->plan->expert_offsets[j],
                           .nrows = st->plan->expert_counts[j], .k_div = L->k, .row_weight = st->weights,
                           .inter = L->I, .a2 = st->a2, .out = st->out_rows};
    } else {
        job = (expert_job){.w13 = &w->s13, .w2 = &w->s2, .index = 0, .b13 = w->sb13, .b2 = w->sb2,
                           .rows = st->shared_rows, .nrows = L->T, .k_div = 1, .row_weight = NULL,
                           .inter = L->Is, .a2 = st->a2s, .out = st->outs};
    }
    return job;
}

static int thread_slot(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* GEMM1 + activation for GLU units [u0, u1) of a job: decode each W13 row once, dot it
 * with every row's input, A2[row][u] = act(gate + b, up + b). With weight_on_input the
 * routed input is x times the routing weight: (w x) . W = w (x . W), applied before the
 * bias and the activation. */
static void gemm1_units(const cpu_state *st, const expert_job *job, int64_t u0, int64_t u1) {
    const moe_layer_spec *s = &st->w->spec;
    const bool gated = moe_activation_is_gated(s->activation);
    const bool scale_input = s->weight_on_input && job->row_weight;
    const int64_t H = st->L.H;
    float *gate_row = st->decode + (int64_t)thread_slot() * 2 * st->L.decode_len;
    float *up_row = gate_row + st->L.decode_len;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t gate_r = gated ? 2 * u : u; /* W13 rows: gate 2u, up 2u+1 (RELU2: row u) */
        moe__qmatrix_row(job->w13, job->index, gate_r, gate_row);
        if (gated) moe__qmatrix_row(job->w13, job->index, gate_r + 1, up_row);
        const double gate_bias = job->b13 ? job->b13[gate_r] : 0.0;
        const double up_bias = job->b13 && gated ? job->b13[gate_r + 1] : 0.0;
        for (int64_t r = 0; r < job->nrows; r++) {
            const int64_t id = job->rows[r];
            const float *x = st->x_f + (id / job->k_div) * H;
            const double scale = scale_input ? job->row_weight[id] : 1.0;
            const double gate = scale * dot(x, gate_row, H) + gate_bias;
            const double up = gated ? scale * dot(x, up_row, H) + up_bias : 0.0;
            job->a2[id * job->inter + u] = moe__activate(s, (float)gate, (float)up);
        }
    }
}

/* GEMM2 for output columns [h0, h1) of a job: out[row][h] = (A2[row] . W2[h] + b2[h]) times
 * the routing weight (unless it was applied to the input). */
static void gemm2_units(const cpu_state *st, const expert_job *job, int64_t h0, int64_t h1) {
    const bool scale_output = !st->w->spec.weight_on_input && job->row_weight;
    const int64_t H = st->L.H;
    float *down_row = st->decode + (int64_t)thread_slot() * 2 * st->L.decode_len;
    for (int64_t h = h0; h < h1; h++) {
        moe__qmatrix_row(job->w2, job->index, h, down_row);
        const double bias = job->b2 ? job->b2[h] : 0.0;
        for (int64_t r = 0; r < job->nrows; r++) {
            const int64_t id = job->rows[r];
            double v = dot(job->a2 + id * job->inter, down_row, job->inter) + bias;
            if (scale_output) v *= job->row_weight[id];
            job->out[id * H + h] = (float)v;
        }
    }
}

/* x = dequant(quant(x)) in place for a w8a8 act_format: FP8_TENSOR one scale over the whole
 * [rows, cols] matrix, FP8_ROW128 1x128 groups along each row, through the public quantiser
 * (so the GPU path and the tests can reproduce it bit for bit). */
static moe_status fake_quantize(moe_context_t *ctx, moe_format f, float *x, int64_t rows, int64_t cols,
                                uint8_t *codes, float *scales, const char *what) {
    if (rows == 0 || cols == 0) return MOE_STATUS_OK;
    moe_status st = moe_quantize(f, x, rows, cols, cols, codes, scales, NULL);
    if (st == MOE_STATUS_OK) st = moe_dequantize(f, codes, scales, 1.0f, rows, cols, x, cols);
    if (st != MOE_STATUS_OK) {
        char inner[MOE__ERROR_MAX]; /* a copy: moe__error rewrites the buffer it points to */
        snprintf(inner, sizeof inner, "%s", moe_last_error(NULL));
        return moe__error(ctx, MOE_STATUS_INTERNAL, "moe_forward: quantising %s to %s failed: %s", what,
                          moe_format_name(f), inner);
    }
    return MOE_STATUS_OK;
}

/* Writes v into element (t, h) of a float tensor (F32/F16/BF16), one rounding. */
static void store(const moe_tensor *y, int64_t t, int64_t h, int64_t s0, int64_t s1, float v) {
    const int64_t off = t * s0 + h * s1;
    switch (y->dtype) {
    case MOE_DTYPE_F32: ((float *)y->data)[off] = v; break;
    case MOE_DTYPE_F16: ((uint16_t *)y->data)[off] = moe_float_to_f16(v); break;
    case MOE_DTYPE_BF16: ((uint16_t *)y->data)[off] = moe_float_to_bf16(v); break;
    default: break; /* moe_forward admits only the three */
    }
}

/* Reads element (t, h) of a float tensor (F32/F16/BF16). */
static float load(const moe_tensor *x, int64_t t, int64_t h, int64_t s0, int64_t s1) {
    const int64_t off = t * s0 + h * s1;
    switch (x->dtype) {
    case MOE_DTYPE_F32: return ((const float *)x->data)[off];
    case MOE_DTYPE_F16: return moe_f16_to_float(((const uint16_t *)x->data)[off]);
    case MOE_DTYPE_BF16: return moe_bf16_to_float(((const uint16_t *)x->data)[off]);
    default: return NAN;
    }
}

/* The forward, with the A2 exchange of moe__cpu_forward_a2 (all NULL: moe__cpu_forward). */
static moe_status cpu_forward(moe_context_t *ctx, const moe_weights_t *w, const moe_forward_args *args,
                              const moe__cpu_a2_exchange *xa) {
    const moe_layer_spec *spec = &w->spec;
    cpu_state st;
    memset(&st, 0, sizeof st);
    st.w = w;
    const int64_t T = args->x.shape[0];
    if (!layout_compute(w, T, args->act_format, &st.L))
        return moe__error(ctx, MOE_STATUS_INTERNAL, "moe_forward: workspace layout overflowed after validation");
    const cpu_layout *L = &st.L;
    const int64_t H = L->H, E = L->E, k = L->k;
    if (T == 0) return MOE_STATUS_OK; /* nothing to write */
    const bool shared = w->s13.count > 0;

    uint8_t *base = (uint8_t *)args->workspace + (ALIGN - (uintptr_t)args->workspace % ALIGN) % ALIGN;
    float *x_f = (float *)(base + L->x_f);
    int32_t *ids = (int32_t *)(base + L->ids);
    float *weights = (float *)(base + L->weights);
    float *logits = (float *)(base + L->logits);
    float *gate_scale = (float *)(base + L->gate_scale);
    moe_dispatch_plan plan = {.expert_counts = (int64_t *)(base + L->counts),
                              .expert_offsets = (int64_t *)(base + L->offsets),
                              .sorted_ids = (int32_t *)(base + L->sorted_ids),
                              .block_expert = (int32_t *)(base + L->block_expert)};
    uint8_t *qcodes = base + L->qcodes;
    float *qscales = (float *)(base + L->qscales);
    st.x_f = x_f, st.weights = weights, st.plan = &plan;
    st.a2 = (float *)(base + L->a2), st.out_rows = (float *)(base + L->out_rows);
    st.decode = (float *)(base + L->decode);
    if (shared) {
        int32_t *shared_rows = (int32_t *)(base + L->shared_rows);
        for (int64_t t = 0; t < T; t++) shared_rows[t] = (int32_t)t;
        st.shared_rows = shared_rows;
        st.a2s = (float *)(base + L->a2s), st.outs = (float *)(base + L->outs);
    }

    int threads = moe__team_size(ctx, 0, NULL); /* at most CPU_THREAD_SLOTS */
    (void)threads;                              /* unused without OpenMP */
    moe_status status;

    /* (a) x to fp32 rows x_f [T, H]. */
    {
        const int64_t s0 = moe__stride(&args->x, 0), s1 = moe__stride(&args->x, 1);
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) x_f[t * H + h] = load(&args->x, t, h, s0, s1);
    }

    /* (b) Routing, from the unquantised x: ids and weights given, or logits given, or
     * logits = x_f . W_r^T (+ b_r) in double rounded to fp32; then top-k per token. The
     * shared-expert gate sigmoid(x . w_sg) is a router-like projection too: also from x_f. */
    if (moe_tensor_present(&args->topk_ids)) {
        const moe_tensor *ti = &args->topk_ids, *tw = &args->topk_weights;
        const int64_t i0 = moe__stride(ti, 0), i1 = moe__stride(ti, 1);
        const int64_t w0 = moe__stride(tw, 0), w1 = moe__stride(tw, 1);
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < k; j++) {
                ids[t * k + j] = ((const int32_t *)ti->data)[t * i0 + j * i1];
                weights[t * k + j] = ((const float *)tw->data)[t * w0 + j * w1];
            }
    } else {
        if (moe_tensor_present(&args->router_logits)) {
            const moe_tensor *tl = &args->router_logits;
            const int64_t l0 = moe__stride(tl, 0), l1 = moe__stride(tl, 1);
            for (int64_t t = 0; t < T; t++)
                for (int64_t e = 0; e < E; e++) logits[t * E + e] = ((const float *)tl->data)[t * l0 + e * l1];
        } else {
#pragma omp parallel for num_threads(threads) schedule(static)
            for (int64_t t = 0; t < T; t++)
                for (int64_t e = 0; e < E; e++) {
                    double v = dot(x_f + t * H, w->router + e * H, H);
                    if (w->router_bias) v += w->router_bias[e];
                    logits[t * E + e] = (float)v;
                }
        }
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t t = 0; t < T; t++)
            moe__cpu_route_rows(spec, logits, t, t + 1, w->correction_bias, ids, weights);
    }
    if (moe_tensor_present(&args->out_topk_ids)) {
        const moe_tensor *o = &args->out_topk_ids;
        const int64_t s0 = moe__stride(o, 0), s1 = moe__stride(o, 1);
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < k; j++) ((int32_t *)o->data)[t * s0 + j * s1] = ids[t * k + j];
    }
    if (moe_tensor_present(&args->out_topk_weights)) {
        const moe_tensor *o = &args->out_topk_weights;
        const int64_t s0 = moe__stride(o, 0), s1 = moe__stride(o, 1);
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < k; j++) ((float *)o->data)[t * s0 + j * s1] = weights[t * k + j];
    }
    if (shared && w->shared_gate) {
        for (int64_t t = 0; t < T; t++)
            gate_scale[t] = (float)(1.0 / (1.0 + exp(-dot(x_f + t * H, w->shared_gate, H))));
    }

    /* (a, continued) w8a8: the expert GEMMs see x quantised to FP8 and back. With
     * weight_on_input the routing weight multiplies this quantised x (in step d). */
    if (args->act_format != MOE_FORMAT_F32) {
        status = fake_quantize(ctx, args->act_format, x_f, T, H, qcodes, qscales, "x");
        if (status != MOE_STATUS_OK) return status;
    }

    /* (c) The dispatch plan, block 1: each expert's row ids, ascending. A slot with no expert
     * (-1) has no row: its A2 and output rows are zero (A2's FP8_TENSOR scale sees only rows
     * that exist) and combine leaves it out. */
    moe__cpu_plan_build(ids, T, k, E, 1, &plan);
    for (int64_t r = 0; r < T * k; r++)
        if (ids[r] < 0) {
            memset(st.a2 + r * L->I, 0, (size_t)L->I * sizeof(float));
            memset(st.out_rows + r * H, 0, (size_t)H * sizeof(float));
        }

    /* (d) GEMM1 + activation. Items are (job, chunk of W13_CHUNK units); every item writes
     * its own A2 columns, and each element is one fixed-order dot product. An A2 the caller
     * gives (moe__cpu_forward_a2) is copied in instead, and its GEMM1 skipped. */
    const int64_t jobs = E + (shared ? 1 : 0);
    if (xa->a2_in) memcpy(st.a2, xa->a2_in, (size_t)(L->rows * L->I) * sizeof(float));
    if (shared && xa->shared_a2_in) memcpy(st.a2s, xa->shared_a2_in, (size_t)(T * L->Is) * sizeof(float));
    {
        const int64_t chunks = (max64(L->I, L->Is) + W13_CHUNK - 1) / W13_CHUNK;
        const int64_t items = jobs * chunks;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (int64_t item = 0; item < items; item++) {
            const expert_job job = job_of(&st, item / chunks);
            const int64_t u0 = (item % chunks) * W13_CHUNK;
            const bool given = item / chunks < E ? xa->a2_in != NULL : xa->shared_a2_in != NULL;
            if (job.nrows == 0 || u0 >= job.inter || given) continue;
            gemm1_units(&st, &job, u0, u0 + W13_CHUNK < job.inter ? u0 + W13_CHUNK : job.inter);
        }
    }

    /* (d, continued) w8a8: A2 quantised to FP8 and back before the down projection. The
     * routed A2 [T*k, I] (every row is live: each (token, slot) is one row) and the shared
     * A2 [T, Is] are separate tensors with their own FP8_TENSOR scale. The test hook may take
     * a copy of A2 first, and an A2 it gave is used as it is. */
    if (xa->a2_out) memcpy(xa->a2_out, st.a2, (size_t)(L->rows * L->I) * sizeof(float));
    if (shared && xa->shared_a2_out) memcpy(xa->shared_a2_out, st.a2s, (size_t)(T * L->Is) * sizeof(float));
    if (args->act_format != MOE_FORMAT_F32) {
        status = MOE_STATUS_OK;
        if (!xa->a2_in)
            status = fake_quantize(ctx, args->act_format, st.a2, L->rows, L->I, qcodes, qscales, "the routed A2");
        if (status == MOE_STATUS_OK && shared && !xa->shared_a2_in)
            status = fake_quantize(ctx, args->act_format, st.a2s, T, L->Is, qcodes, qscales, "the shared A2");
        if (status != MOE_STATUS_OK) return status;
    }

    /* (e) GEMM2: out_rows[row][h], times the routing weight, one thread per element. */
    {
        const int64_t chunks = (H + W2_CHUNK - 1) / W2_CHUNK;
        const int64_t items = jobs * chunks;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (int64_t item = 0; item < items; item++) {
            const expert_job job = job_of(&st, item / chunks);
            const int64_t h0 = (item % chunks) * W2_CHUNK;
            if (job.nrows == 0) continue;
            gemm2_units(&st, &job, h0, h0 + W2_CHUNK < H ? h0 + W2_CHUNK : H);
        }
    }

    /* (f) Combine: y[t] = Σ_{slot 0..k-1} out_rows[t*k + slot] in slot order, + the shared
     * expert's output (times its gate), summed in double and rounded once to fp32, then to
     * y's dtype (for f16/bf16 y that is a second rounding of an fp32 value, as a kernel with
     * an fp32 accumulator would do). */
    {
        const moe_tensor *y = &args->y;
        const int64_t s0 = moe__stride(y, 0), s1 = moe__stride(y, 1);
        const float *out_rows = st.out_rows, *outs = st.outs;
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t t = 0; t < T; t++) {
            const double g = shared && w->shared_gate ? gate_scale[t] : 1.0;
            for (int64_t h = 0; h < H; h++) {
                double acc = 0.0;
                for (int64_t j = 0; j < k; j++)
                    if (ids[t * k + j] >= 0) acc += out_rows[(t * k + j) * H + h];
                if (shared) acc += g * outs[t * H + h];
                store(y, t, h, s0, s1, (float)acc);
            }
        }
    }
    return MOE_STATUS_OK;
}

moe_status moe__cpu_forward(moe_context_t *ctx, const moe_weights_t *w, const moe_forward_args *args) {
    return moe__cpu_forward_a2(ctx, w, args, NULL);
}

moe_status moe__cpu_forward_a2(moe_context_t *ctx, const moe_weights_t *w, const moe_forward_args *args,
                               const moe__cpu_a2_exchange *a2) {
    const moe__cpu_a2_exchange none = {NULL, NULL, NULL, NULL};
    return cpu_forward(ctx, w, args, a2 ? a2 : &none);
}
