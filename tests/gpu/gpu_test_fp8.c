/* test_gpu_forward (gpu_test.h): the FP8 (w8a8) tolerances, the Hopper FP8 path's stage-wise
 * checks (A2 read back from the workspace against the oracle's, y given the GPU's A2) and
 * --selftest, that analysis on readbacks made from the oracle, clean and with planted bugs. */
#include "gpu_test.h"

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
/* Every FP8 run is checked stage by stage: the Hopper path (wgmma e4m3: the `wgmma` flag, case_path)
 * because of the reasons below, v1 because a single flip of a large element (a per-tensor scale's
 * elements near the amax) exceeds the one-flip term above (A2_FLIP_FRACTION_V1).
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
 * and y against the oracle only as a coarse sanity bound (fp8_tolerance: + FP8_ONE_FLIP).
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
/* v1 (mma.sync, fp32 accumulation) runs the same stages: its A2 is off by ~3e-8 (the probe), so
 * its flips are ~1e-6 of the codes: the same slack, a fraction 300x smaller. (Before session 9
 * v1 had only y's tolerance, whose one-flip term assumed a flip of average size: a per-tensor
 * A2 flip near the tensor's amax, 10-20x the rms, failed it, seed 1796295150's
 * fp8-woi-shared-fused-tensor T=500: y 2.7e-3 > 1.27e-3.) */
#define A2_FLIP_FRACTION_V1 1e-4
#define A2_FLIP_SLACK 8
#define A2_NEAR_Q 2.0
#define A2_SCALE_REL 4e-3
/* y given A2: y's own rounding (see fp8_tolerance), no flip term: the A2 codes are the same.
 * With bf16 y the Hopper path also rounds each of GEMM2's rows to bf16 before combine sums them
 * (forward.cu's rows_in_bf16, as the bf16 path does): another rounding of about y's size in
 * quadrature, ~2.4e-3 expected where rows do not cancel, still under the bound (not raised). */
#define Y_GIVEN_A2_BF16 4e-3
#define Y_GIVEN_A2_OTHER 1e-3
/* The coarse end-to-end bound of an FP8 run (either path; stages (a) and (b) are the precise
 * checks): one flip moves its element by at most 1/8 (a normal e4m3 step; subnormal codes are
 * below 2^-6/448 of their tensor's or group's largest element and carry no weight in y), so y
 * by at most 1/8 of the share of y that element carries, <= 1/8 even when it carries all of y:
 * no single flip can fail it. It still fails an error of order one (a stale scale, wrong rows,
 * NaN), should (a) or (b) ever be blind to it. */
#define FP8_ONE_FLIP 0.125
double fp8_tolerance(const model *m, int64_t S) {
    const int64_t I = m->spec.num_shared_experts > 0 && m->spec.shared_intermediate < m->spec.intermediate
                          ? m->spec.shared_intermediate : m->spec.intermediate;
    return (m->y_dtype == MOE_DTYPE_BF16 ? 4e-3 : 1e-3) + 1.0 / (12.0 * sqrt((double)(m->spec.top_k * I * S))) +
           FP8_ONE_FLIP;
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
    CUDA_OK(cudaMemcpy(r.codes, a->codes, (size_t)(rows * a->cols), cudaMemcpyDeviceToHost));
    if (a->scale_row_stride == 1 && a->scale_group_stride > 1) {
        /* Column-major [groups][scale_group_stride]: only the first `rows` of each column hold
         * scales (the plan's live rows); the rest was never written, so it is not read. */
        float *col = xmalloc((size_t)rows * 4 + 4);
        for (int64_t g = 0; g < a->groups; g++) {
            const float *src = a->scales + g * a->scale_group_stride;
            CUDA_OK(cudaMemcpy(col, src, (size_t)rows * 4, cudaMemcpyDeviceToHost));
            for (int64_t i = 0; i < rows; i++) r.scales[i * a->groups + g] = col[i];
        }
        free(col);
        return r;
    }
    /* Row-major, one per row, or a single scale: one past the last scale read. */
    const int64_t n = rows > 0 ? (rows - 1) * a->scale_row_stride + (a->groups - 1) * a->scale_group_stride + 1 : 1;
    float *scales = xmalloc((size_t)n * 4);
    CUDA_OK(cudaMemcpy(scales, a->scales, (size_t)n * 4, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t g = 0; g < a->groups; g++)
            r.scales[i * a->groups + g] = scales[i * a->scale_row_stride + g * a->scale_group_stride];
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
    double flip_fraction;                      /* the flip bound's fraction of the codes */
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
    r.flip_fraction = A2_FLIP_FRACTION; /* the Hopper path's; fp8_stage_checks sets v1's */
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
static int64_t a2_flip_bound(const a2_report *r) {
    return (int64_t)(r->flip_fraction * (double)r->codes) + A2_FLIP_SLACK;
}
static unsigned a2_failures(const a2_report *r) {
    return (r->bad_ids || r->rows_missing || r->rows_repeated ? A2_ROWS : 0) | (r->far ? A2_CODES : 0) |
           (r->flips > a2_flip_bound(r) ? A2_FLIPS : 0) | (r->scales_bad ? A2_SCALES : 0);
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
          (long long)a2_flip_bound(r), 100.0 * r->flip_fraction, A2_FLIP_SLACK);
    CHECK(!(f & A2_SCALES), "%s: A2 scale: %lld of %lld scales off the oracle's by more than %.0e relative, max %.2e "
          "(first: %s)", what, (long long)r->scales_bad, (long long)r->scales, A2_SCALE_REL, r->scale_rel_max,
          r->scale_first);
}

oracle_a2 oracle_a2_alloc(const model *m, int64_t S) {
    const moe_layer_spec *s = &m->spec;
    oracle_a2 o = {xmalloc((size_t)(S * s->top_k * s->intermediate) * 4 + 4), NULL};
    if (s->num_shared_experts > 0) o.shared = xmalloc((size_t)(S * s->shared_intermediate) * 4 + 4);
    return o;
}

void oracle_a2_free(oracle_a2 *o) {
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

/* Stages (a) and (b) of an FP8 run, checked after a forward (check_outputs): the run's
 * readback from b's workspace against the oracle's A2 o of the oracle tokens tok[0..S); y: the
 * GPU's y on the host; wgmma: the Hopper path ran (else v1: its smaller flip bound). One line
 * of the stages' numbers. */
void fp8_stage_checks(const model *m, const device_buffers *b, const inputs *in, const int64_t *tok, int64_t S,
                      const void *y, const oracle_a2 *o, const char *what, bool wgmma) {
    a2_readback g = a2_fetch(m, b, in->T);
    a2_report rep;
    const double given = fp8_stages(m, in, tok, S, y, o, &g, &rep);
    rep.flip_fraction = wgmma ? A2_FLIP_FRACTION : A2_FLIP_FRACTION_V1;
    const double tol_given = m->y_dtype == MOE_DTYPE_BF16 ? Y_GIVEN_A2_BF16 : Y_GIVEN_A2_OTHER;
    CHECK(given <= tol_given, "%s: y given the GPU's A2 (GEMM2 + combine on the same A2 codes): relative error "
          "%.3e > %.0e", what, given, tol_given);
    a2_check(&rep, what);
    printf("    %s: stages: y|A2 %.2e; A2 codes %lld, %lld differ (%.2f%%, bound %lld), %lld beyond a flip; "
           "scales max diff %.1e; rows: %lld missing, %lld repeated, %lld bad ids\n", what, given,
           (long long)rep.codes, (long long)rep.flips,
           100.0 * (double)rep.flips / (double)(rep.codes ? rep.codes : 1), (long long)a2_flip_bound(&rep),
           (long long)rep.far, rep.scale_rel_max, (long long)rep.rows_missing, (long long)rep.rows_repeated,
           (long long)rep.bad_ids);
    a2_readback_free(&g);
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

/* The quantisers' fast encoder (moe__cuda_fp8_encode_fast_host: fp8_codec.cuh's code, the
 * hardware conversion emulated) against the reference encoder, per binade of the scale from
 * 2^-149 to 2^119 (fp8_scale's whole range, tiny scales included): x one ulp around (and on)
 * every e4m3 midpoint times the scale, random x up to the group's amax (448 x scale), zero and
 * the specials. Returns the number of mismatches (the first few printed). */
static int64_t encoder_selftest(int64_t *checks) {
    int64_t bad = 0, n = 0;
    const float specials[] = {0.0f, INFINITY, NAN};
    for (int e = -149; e <= 119; e++) {
        for (int i = 0; i < 300; i++) {
            const float s = ldexpf(1.0f + (float)(rng_next() >> 41) * 0x1p-23f, e);
            float xs[3 + 7 + 2];
            int nx = 0;
            for (int j = 0; j < 3; j++) xs[nx++] = specials[j];
            const uint32_t c = (uint32_t)(rng_next() % 0x7E); /* the midpoint between codes c and c + 1 */
            const double m = 0.5 * ((double)moe_e4m3_to_float((uint8_t)c) + moe_e4m3_to_float((uint8_t)(c + 1)));
            const float x0 = (float)(m * s);
            for (int k = -3; k <= 3; k++) {
                uint32_t b;
                memcpy(&b, &x0, 4);
                b += (uint32_t)k;
                memcpy(&xs[nx++], &b, 4);
            }
            xs[nx++] = rng_uniform(0.0f, 448.0f) * s;
            xs[nx++] = 448.0f * s;
            for (int j = 0; j < nx; j++)
                for (int sign = 0; sign < 2; sign++) {
                    const float x = sign ? -xs[j] : xs[j];
                    const uint8_t want = moe__cuda_fp8_encode_host(x, s), got = moe__cuda_fp8_encode_fast_host(x, s);
                    n++;
                    if (got != want && bad++ < 5)
                        printf("    encoder: x %a scale %a: fast %02x, reference %02x\n", x, s, got, want);
                }
        }
    }
    *checks = n;
    return bad;
}

/* Three models (relu2 with fp8-tensor, as the stale-rows case; swiglu with fp8-row128 and a
 * fused shared expert; swiglu with fp8-tensor and a separate shared expert), each with every
 * plant: a clean readback (and one with flips inside the bounds) must pass, y given its A2 must
 * be the oracle's y bit for bit (y is f32 here); each planted bug must fail its stage. The
 * row128 model also runs the oracle on a subset of the tokens, as large cases do. */
int stage_selftest(void) {
    const char *env = getenv("MOEFUSE_SEED");
    rng_state = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    printf("test_gpu_forward --selftest: seed %llu (MOEFUSE_SEED repeats)\n", (unsigned long long)rng_state);
    MOE_OK(NULL, moe_context_create(MOE_BACKEND_CPU, 0, &cpu_ctx));
    gpu_ctx = cpu_ctx; /* model_build packs on both */
    int passed = 0, failed = 0;
    int64_t checks;
    const int64_t enc_bad = encoder_selftest(&checks);
    if (enc_bad == 0) passed++;
    else failed++;
    printf("%s the fast e4m3 encoder against the reference: %lld inputs, %lld differ\n", enc_bad ? "FAIL" : "ok  ",
           (long long)checks, (long long)enc_bad);
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
