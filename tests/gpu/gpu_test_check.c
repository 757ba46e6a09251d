/* test_gpu_forward (gpu_test.h): a forward's outputs against the CPU: y finite everywhere, the
 * routing against moe_route, y and the routing on the oracle tokens against the CPU forward (the
 * Hopper FP8 path's stage-wise checks in gpu_test_fp8.c), and the device dispatch plan against
 * moe_dispatch_plan_build. */
#include "gpu_test.h"

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

/* Relative Frobenius error of the GPU's y on the oracle tokens against y_ref [S, H]. */
double y_rel_err(const model *m, const void *y, const int64_t *tok, int64_t S, const float *y_ref) {
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

/* Checks the GPU's outputs (in the device buffers) against the CPU oracle on up to
 * `oracle_limit` tokens; returns the relative error. */
double check_outputs(const model *m, const device_buffers *b, const inputs *in, int64_t oracle_limit,
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
            const bool both_nan = isnan(weights[i]) && isnan(rw[i]); /* (R_IDS_NONE's -1 slots) */
            if (!both_nan && !(fabsf(weights[i] - rw[i]) <= 1e-6f * fabsf(rw[i])) && w_bad++ == 0)
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
    /* An FP8 run (either path): the oracle's A2 comes out too, for the stage-wise checks. */
    const bool staged = m->act_format != MOE_FORMAT_F32, wgmma = staged && case_path == MOE__CUDA_GEMM_HOPPER;
    oracle_a2 oa = {NULL, NULL};
    if (staged) {
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
    const double tol = staged ? fp8_tolerance(m, S)
                       : m->format == MOE_FORMAT_F16 ? 2e-3 : 1e-2;
    CHECK(err <= tol, "%s: y: relative error %.3e > %.3g%s", what, err, tol,
          staged ? " (FP8: the coarse end-to-end bound; the stage-wise checks are the precise ones)" : "");
    if (staged && S > 0) fp8_stage_checks(m, b, in, tok, S, y, &oa, what, wgmma);
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

/* The device plan of host ids [T, k] of which some lie outside [0, E) (the CPU plan refuses
 * those; the device leaves them out): each expert's count is its in-range ids, each in-range id
 * sits at row_of[id] inside its expert's rows and sorted_ids there holds it, each left-out id has
 * row_of -1, and no row of the plan holds a left-out id. */
void check_plan_left_out(const int32_t *ids, int64_t T, int64_t k, int64_t E, int64_t block) {
    const int64_t rows = T * k, max_rows = rows + E * (block - 1), max_blocks = (max_rows + block - 1) / block;
    int32_t *d_ids, *d_row_of;
    moe_dispatch_plan gp = {0};
    CUDA_OK(cudaMalloc((void **)&d_ids, (size_t)rows * 4 + 4));
    CUDA_OK(cudaMalloc((void **)&d_row_of, (size_t)rows * 4 + 4));
    CUDA_OK(cudaMalloc((void **)&gp.expert_counts, (size_t)E * 8));
    CUDA_OK(cudaMalloc((void **)&gp.expert_offsets, (size_t)(E + 1) * 8));
    CUDA_OK(cudaMalloc((void **)&gp.sorted_ids, (size_t)max_rows * 4 + 4));
    CUDA_OK(cudaMalloc((void **)&gp.block_expert, (size_t)max_blocks * 4 + 4));
    CUDA_OK(cudaMemcpy(d_ids, ids, (size_t)rows * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(d_row_of, 0x7F, (size_t)rows * 4 + 4)); /* poison */
    CUDA_OK(cudaMemset(gp.sorted_ids, 0x7F, (size_t)max_rows * 4 + 4));
    MOE_OK(gpu_ctx, moe__cuda_plan_build(gpu_ctx, d_ids, T, k, E, block, 0, &gp, d_row_of, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    int64_t *counts = xmalloc((size_t)E * 8), *offsets = xmalloc((size_t)(E + 1) * 8), *want = xmalloc((size_t)E * 8);
    int32_t *sorted = xmalloc((size_t)max_rows * 4 + 4), *row_of = xmalloc((size_t)rows * 4 + 4);
    CUDA_OK(cudaMemcpy(counts, gp.expert_counts, (size_t)E * 8, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(offsets, gp.expert_offsets, (size_t)(E + 1) * 8, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(sorted, gp.sorted_ids, (size_t)max_rows * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(row_of, d_row_of, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    for (int64_t e = 0; e < E; e++) want[e] = 0;
    for (int64_t i = 0; i < rows; i++)
        if (ids[i] >= 0 && ids[i] < E) want[ids[i]]++;
    int64_t bad = 0;
    for (int64_t e = 0; e < E; e++) bad += counts[e] != want[e];
    CHECK(bad == 0, "plan with left-out ids: %lld expert counts differ from the in-range ids'", (long long)bad);
    bad = 0;
    for (int64_t i = 0; i < rows; i++) {
        const int32_t e = ids[i], r = row_of[i];
        if (e >= 0 && e < E)
            bad += !(r >= offsets[e] && r < offsets[e] + counts[e] && sorted[r] == (int32_t)i);
        else bad += r != -1;
    }
    CHECK(bad == 0, "plan with left-out ids: %lld ids' plan rows (row_of) wrong", (long long)bad);
    bad = 0;
    for (int64_t r = 0; r < offsets[E] && r < max_rows; r++)
        bad += sorted[r] >= 0 && sorted[r] < rows && !(ids[sorted[r]] >= 0 && ids[sorted[r]] < E);
    CHECK(bad == 0, "plan with left-out ids: %lld plan rows hold a left-out id", (long long)bad);
    free(counts), free(offsets), free(want), free(sorted), free(row_of);
    CUDA_OK(cudaFree(d_ids));
    CUDA_OK(cudaFree(d_row_of));
    CUDA_OK(cudaFree(gp.expert_counts));
    CUDA_OK(cudaFree(gp.expert_offsets));
    CUDA_OK(cudaFree(gp.sorted_ids));
    CUDA_OK(cudaFree(gp.block_expert));
}

/* The device plan (moe__cuda_plan_build) vs moe_dispatch_plan_build, for the ids in
 * d_ids [T, k] (device): block `block`; with shared_rows = T the fused shared expert's
 * rows (ids T*k + 1 + t, after the routed total) are checked too. */
void check_plan(const int32_t *d_ids, int64_t T, int64_t k, int64_t E, int64_t block, int64_t shared_rows,
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
    int32_t *d_row_of = NULL; /* the inverse of sorted_ids, asked for as the FP8 forward does */
    CUDA_OK(cudaMalloc((void **)&d_row_of, (size_t)(T * k) * 4 + 4));
    CUDA_OK(cudaMemset(d_row_of, 0x7F, (size_t)(T * k) * 4 + 4));
    MOE_OK(gpu_ctx, moe__cuda_plan_build(gpu_ctx, d_ids, T, k, E, block, shared_rows, &gp, d_row_of, stream));
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
    /* row_of: each routed id's plan row holds that id; an id left out of the plan (outside
     * [0, E)) has -1. */
    int32_t *row_of = xmalloc((size_t)(T * k) * 4 + 4);
    CUDA_OK(cudaMemcpy(row_of, d_row_of, (size_t)(T * k) * 4, cudaMemcpyDeviceToHost));
    bad = 0;
    for (int64_t i = 0; i < T * k; i++) {
        const bool in_plan = ids[i] >= 0 && ids[i] < E;
        const int32_t r = row_of[i];
        bad += in_plan ? !(r >= 0 && r < routed_total && hp.sorted_ids[r] == (int32_t)i) : r != -1;
    }
    CHECK(bad == 0, "%s: %lld ids' plan rows (row_of) wrong", what, (long long)bad);
    free(row_of);
    CUDA_OK(cudaFree(d_row_of));
    CUDA_OK(cudaFree(gp.expert_counts));
    CUDA_OK(cudaFree(gp.expert_offsets));
    CUDA_OK(cudaFree(gp.sorted_ids));
    CUDA_OK(cudaFree(gp.block_expert));
    free(hp.expert_counts), free(hp.expert_offsets), free(hp.sorted_ids), free(hp.block_expert);
    free(cp.expert_counts), free(cp.expert_offsets), free(cp.sorted_ids), free(cp.block_expert);
    free(ids);
}
