/* Tests of moe_route and the dispatch plan (moe_dispatch_plan_bounds / _build).
 *
 * Routing is checked against an independent fp64 reference written here with different
 * code (qsort of (value, index) pairs instead of repeated scans). Ids must match exactly,
 * except on tokens where two relevant fp64 selection scores are closer than fp32 rounding
 * can resolve ("ambiguous": counted, must stay rare, and checked for validity and weights).
 * Weights must match to 1e-6 relative. The plan is checked by an independent verifier.
 * Fresh random inputs each run; the seed is printed (MOEFUSE_SEED=<n> repeats a run). */
#include "moefuse.h"
#include "../src/cpu/cpu.h" /* moe__cpu_route_rows, used by the forward on sub-ranges */

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static moe_context_t *ctx;

/* ---- the fp64 reference ---------------------------------------------------------------- */
typedef struct ranked {
    double v;
    int64_t i;
} ranked;

/* qsort order: numbers descending, NaN after every number, ties to the lower index. */
static int ranked_order(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    int a_nan = isnan(a->v), b_nan = isnan(b->v);
    if (a_nan != b_nan) return a_nan ? 1 : -1;
    if (!a_nan && a->v != b->v) return a->v > b->v ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* Could fp32 rounding in the library (which selects on fp32 scores) order a and b
 * differently from fp64? Exact ties are not ambiguous (identical inputs give identical values
 * in both); NaN never ties a number; values below fp32's normal range (1.2e-38) lose their
 * relative precision in fp32, hence the absolute term. */
static bool near_tie(double a, double b, double bias_max) {
    if (isnan(a) || isnan(b) || a == b) return false;
    return fabs(a - b) <= 1e-6 * (fabs(a) + fabs(b) + 2.0 * bias_max) + 1e-37;
}

static double ref_score(moe_score score, double l) {
    switch (score) {
    case MOE_SCORE_SIGMOID: return l >= 0 ? 1.0 / (1.0 + exp(-l)) : exp(l) / (1.0 + exp(l));
    case MOE_SCORE_SQRTSOFTPLUS: return sqrt(fmax(l, 0.0) + log1p(exp(-fabs(l))));
    default: return NAN;
    }
}

/* Routes one token in fp64. scores[E] receives the unbiased scores, sel[E] the selection
 * scores; returns true when the token is ambiguous (see near_tie). */
static bool ref_route(const moe_layer_spec *spec, const float *logits, const float *bias, int64_t *ids,
                      double *weights, double *scores, double *sel) {
    const int64_t E = spec->num_experts, k = spec->top_k;
    bool ambiguous = false;
    double bias_max = 0.0;
    if (spec->score == MOE_SCORE_SOFTMAX) {
        double max = -INFINITY, sum = 0.0;
        bool poisoned = false; /* NaN or +inf: the softmax is NaN everywhere */
        for (int64_t e = 0; e < E; e++) {
            if (isnan(logits[e]) || logits[e] == INFINITY) poisoned = true;
            if (logits[e] > max) max = logits[e];
        }
        for (int64_t e = 0; e < E; e++) sum += exp((double)logits[e] - max);
        for (int64_t e = 0; e < E; e++) scores[e] = poisoned ? NAN : exp((double)logits[e] - max) / sum;
    } else {
        for (int64_t e = 0; e < E; e++) scores[e] = ref_score(spec->score, logits[e]);
    }
    for (int64_t e = 0; e < E; e++) {
        sel[e] = scores[e] + (spec->use_correction_bias ? (double)bias[e] : 0.0);
        if (spec->use_correction_bias && fabs(bias[e]) > bias_max) bias_max = fabs(bias[e]);
    }

    const int64_t groups = spec->n_group > 1 ? spec->n_group : 1, size = E / groups;
    bool *eligible = xmalloc((size_t)E * sizeof *eligible);
    ranked *pairs = xmalloc((size_t)E * sizeof *pairs);
    if (groups == 1) {
        for (int64_t e = 0; e < E; e++) eligible[e] = true;
    } else {
        ranked *group_rank = xmalloc((size_t)groups * sizeof *group_rank);
        for (int64_t g = 0; g < groups; g++) {
            for (int64_t j = 0; j < size; j++) pairs[j] = (ranked){sel[g * size + j], g * size + j};
            qsort(pairs, (size_t)size, sizeof *pairs, ranked_order);
            double gs = pairs[0].v;
            if (spec->use_correction_bias && size >= 2) gs += pairs[1].v;
            group_rank[g] = (ranked){gs, g};
        }
        qsort(group_rank, (size_t)groups, sizeof *group_rank, ranked_order);
        for (int64_t e = 0; e < E; e++) eligible[e] = false;
        for (int64_t r = 0; r < spec->topk_group; r++)
            for (int64_t j = 0; j < size; j++) eligible[group_rank[r].i * size + j] = true;
        /* Only the boundary decides which groups are kept. */
        if (spec->topk_group < groups &&
            near_tie(group_rank[spec->topk_group - 1].v, group_rank[spec->topk_group].v, 2.0 * bias_max))
            ambiguous = true;
        free(group_rank);
    }

    int64_t n = 0;
    for (int64_t e = 0; e < E; e++)
        if (eligible[e]) pairs[n++] = (ranked){sel[e], e};
    qsort(pairs, (size_t)n, sizeof *pairs, ranked_order);
    for (int64_t j = 0; j < k && j + 1 < n; j++)
        if (near_tie(pairs[j].v, pairs[j + 1].v, bias_max)) ambiguous = true;

    double sum = 0.0;
    for (int64_t j = 0; j < k; j++) {
        ids[j] = pairs[j].i;
        sum += scores[ids[j]];
    }
    for (int64_t j = 0; j < k; j++) {
        double w = scores[ids[j]];
        if (spec->renormalize && sum != 0.0) w /= sum;
        weights[j] = w * spec->routed_scale;
    }
    free(eligible);
    free(pairs);
    return ambiguous;
}

static bool weight_close(float got, double want) {
    if (isnan(want)) return isnan(got);
    return fabs((double)got - want) <= 1e-6 * fabs(want) + 1e-30;
}

/* Routes T tokens with moe_route and compares each with the reference. Returns the number
 * of ambiguous tokens. */
static int64_t compare_with_reference(const moe_layer_spec *spec, const float *logits, int64_t T, const float *bias,
                                      const char *what) {
    const int64_t E = spec->num_experts, k = spec->top_k;
    int32_t *ids = xmalloc((size_t)(T * k) * sizeof *ids);
    float *w = xmalloc((size_t)(T * k) * sizeof *w);
    for (int64_t i = 0; i < T * k; i++) {
        ids[i] = -7777; /* poison: an unwritten output fails */
        w[i] = NAN;
    }
    moe_status st = moe_route(ctx, spec, logits, T, bias, ids, w);
    CHECK(st == MOE_STATUS_OK, "%s: moe_route -> %s: %s", what, moe_status_string(st), moe_last_error(ctx));

    int64_t ref_ids[64];
    double ref_w[64];
    double *scores = xmalloc((size_t)E * sizeof *scores), *sel = xmalloc((size_t)E * sizeof *sel);
    int64_t ambiguous = 0;
    for (int64_t t = 0; t < T && st == MOE_STATUS_OK; t++) {
        const int32_t *got = ids + t * k;
        const float *got_w = w + t * k;
        bool amb = ref_route(spec, logits + t * E, bias, ref_ids, ref_w, scores, sel);
        /* Always: k distinct experts in range. */
        for (int64_t j = 0; j < k; j++) {
            CHECK(got[j] >= 0 && got[j] < E, "%s: token %lld slot %lld: id %d out of [0, %lld)", what, (long long)t,
                  (long long)j, got[j], (long long)E);
            for (int64_t i = 0; i < j; i++)
                CHECK(got[i] != got[j], "%s: token %lld: expert %d chosen twice", what, (long long)t, got[j]);
        }
        if (amb) {
            /* fp32 may resolve a near tie either way: the weights must still be those of the
             * experts the library chose. */
            ambiguous++;
            double sum = 0.0;
            bool valid = true;
            for (int64_t j = 0; j < k; j++) valid = valid && got[j] >= 0 && got[j] < E;
            if (!valid) continue;
            for (int64_t j = 0; j < k; j++) sum += scores[got[j]];
            for (int64_t j = 0; j < k; j++) {
                double want = scores[got[j]];
                if (spec->renormalize && sum != 0.0) want /= sum;
                want *= spec->routed_scale;
                CHECK(weight_close(got_w[j], want), "%s: ambiguous token %lld slot %lld: weight %.9g, want %.9g",
                      what, (long long)t, (long long)j, (double)got_w[j], want);
            }
            continue;
        }
        for (int64_t j = 0; j < k; j++) {
            CHECK(got[j] == ref_ids[j], "%s: token %lld slot %lld: id %d, reference %lld (sel %.9g vs %.9g)", what,
                  (long long)t, (long long)j, got[j], (long long)ref_ids[j],
                  got[j] >= 0 && got[j] < E ? sel[got[j]] : NAN, sel[ref_ids[j]]);
            CHECK(weight_close(got_w[j], ref_w[j]), "%s: token %lld slot %lld: weight %.9g, reference %.9g", what,
                  (long long)t, (long long)j, (double)got_w[j], ref_w[j]);
        }
    }
    free(scores);
    free(sel);
    free(ids);
    free(w);
    return ambiguous;
}

static float *random_logits(int64_t n, double scale) {
    float *l = xmalloc((size_t)n * sizeof *l);
    for (int64_t i = 0; i < n; i++) l[i] = (float)(scale * rng_normal());
    return l;
}

static void spec_route(moe_layer_spec *s, int64_t E, int64_t k, moe_score score) {
    moe_layer_spec_init(s, E, 64, 32, k);
    s->score = score;
}

/* ---- routing cases --------------------------------------------------------------------- */
static void test_route_random_matrix(void) {
    /* (E, k, n_group, topk_group): plain, DeepSeek-V3, E 64 in 4 groups keeping 2, groups of
     * one expert, n_group = 1 (no grouping). */
    static const int64_t shapes[][4] = {{64, 6, 0, 0}, {256, 8, 8, 4}, {64, 6, 4, 2}, {16, 4, 16, 5}, {40, 3, 1, 1}};
    static const float scales[] = {1.0f, 2.5f};
    int64_t tokens = 0, ambiguous = 0;
    for (int score = 0; score < 3; score++)
        for (int renorm = 0; renorm < 2; renorm++)
            for (int use_bias = 0; use_bias < 2; use_bias++)
                for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
                    for (size_t sc = 0; sc < 2; sc++) {
                        moe_layer_spec s;
                        spec_route(&s, shapes[sh][0], shapes[sh][1], (moe_score)score);
                        s.n_group = shapes[sh][2];
                        s.topk_group = shapes[sh][3];
                        s.renormalize = renorm;
                        s.use_correction_bias = use_bias;
                        s.routed_scale = scales[sc];
                        const int64_t E = s.num_experts, T = rng_int(1, 160);
                        float *logits = random_logits(T * E, 2.0);
                        float *bias = NULL;
                        if (use_bias) {
                            /* Comparable to the scores, so the bias really moves the choice. */
                            double b = score == MOE_SCORE_SOFTMAX ? 2.0 / (double)E : 0.1;
                            bias = xmalloc((size_t)E * sizeof *bias);
                            for (int64_t e = 0; e < E; e++) bias[e] = (float)(b * (2.0 * rng_uniform() - 1.0));
                        }
                        char what[160];
                        snprintf(what, sizeof what, "%s renorm=%d bias=%d E=%lld k=%lld groups=%lld/%lld scale=%g",
                                 moe_score_name(s.score), renorm, use_bias, (long long)E, (long long)s.top_k,
                                 (long long)s.topk_group, (long long)s.n_group, (double)s.routed_scale);
                        ambiguous += compare_with_reference(&s, logits, T, bias, what);
                        tokens += T;
                        free(logits);
                        free(bias);
                    }
    printf("  %lld tokens, %lld ambiguous (near ties fp32 cannot resolve)\n", (long long)tokens, (long long)ambiguous);
    CHECK(ambiguous * 100 <= tokens, "too many ambiguous tokens: %lld of %lld", (long long)ambiguous,
          (long long)tokens);
}

/* Routes one token and checks the ids against a hand-derived answer. */
static void expect_ids(const moe_layer_spec *s, const float *logits, const float *bias, const int32_t *want,
                       const char *what) {
    int32_t ids[64];
    float w[64];
    for (int i = 0; i < 64; i++) ids[i] = -7777;
    moe_status st = moe_route(ctx, s, logits, 1, bias, ids, w);
    CHECK(st == MOE_STATUS_OK, "%s: %s", what, moe_last_error(ctx));
    for (int64_t j = 0; j < s->top_k; j++)
        CHECK(ids[j] == want[j], "%s: slot %lld: id %d, expected %d", what, (long long)j, ids[j], want[j]);
    /* And the reference agrees with the hand-derived answer. */
    compare_with_reference(s, logits, 1, bias, what);
}

static void test_route_ties(void) {
    moe_layer_spec s;
    /* All equal: the lowest indices, weight 1/E each. */
    spec_route(&s, 8, 3, MOE_SCORE_SOFTMAX);
    float equal[8] = {0.7f, 0.7f, 0.7f, 0.7f, 0.7f, 0.7f, 0.7f, 0.7f};
    expect_ids(&s, equal, NULL, (const int32_t[]){0, 1, 2}, "all equal");
    int32_t ids[3];
    float w[3];
    moe_route(ctx, &s, equal, 1, NULL, ids, w);
    for (int j = 0; j < 3; j++) CHECK(fabsf(w[j] - 0.125f) <= 1e-7f, "all equal: weight %.9g, expected 1/8", w[j]);

    /* Ties among the best, inside and across the top-k boundary. */
    spec_route(&s, 8, 4, MOE_SCORE_SIGMOID);
    float mixed[8] = {1, 3, 3, 2, 3, 0, 2, 1};
    expect_ids(&s, mixed, NULL, (const int32_t[]){1, 2, 4, 3}, "ties in top-k");

    /* Identical groups: group ties go to the lower group index. */
    spec_route(&s, 16, 4, MOE_SCORE_SIGMOID);
    s.n_group = 4;
    s.topk_group = 2;
    s.use_correction_bias = 1;
    float grouped[16] = {0.5f, 2, 2, -1, 0.5f, 2, 2, -1, 0.5f, 2, 2, -1, 0.5f, 2, 2, -1};
    float zero_bias[16] = {0};
    expect_ids(&s, grouped, zero_bias, (const int32_t[]){1, 2, 5, 6}, "tied groups");

    /* Group score: best only without bias (group 0 wins the tie at 3), best two with bias
     * (group 1: 3 + 2.9 beats 3 + 0). Grouping must then exclude the other group. */
    spec_route(&s, 4, 2, MOE_SCORE_SIGMOID);
    s.n_group = 2;
    s.topk_group = 1;
    float two_groups[4] = {3, 0, 3, 2.9f};
    expect_ids(&s, two_groups, NULL, (const int32_t[]){0, 1}, "group score = best");
    s.use_correction_bias = 1;
    expect_ids(&s, two_groups, zero_bias, (const int32_t[]){2, 3}, "group score = best two");

    /* The bias picks, the weights ignore it: expert 0 has the lower score but wins. */
    spec_route(&s, 3, 1, MOE_SCORE_SIGMOID);
    s.use_correction_bias = 1;
    float l3[3] = {0.0f, 1.0f, -1.0f}, b3[3] = {0.5f, 0.0f, 0.0f};
    expect_ids(&s, l3, b3, (const int32_t[]){0}, "bias selects");
    moe_route(ctx, &s, l3, 1, b3, ids, w);
    CHECK(fabsf(w[0] - 0.5f) <= 1e-7f, "bias selects: weight %.9g, expected sigmoid(0) = 0.5", w[0]);
}

static void test_route_top_k_equals_e(void) {
    for (int score = 0; score < 3; score++) {
        moe_layer_spec s;
        spec_route(&s, 8, 8, (moe_score)score);
        s.renormalize = 1;
        s.routed_scale = 2.5f;
        float *logits = random_logits(50 * 8, 2.0);
        compare_with_reference(&s, logits, 50, NULL, "top_k == E");
        int32_t ids[8];
        float w[8];
        moe_route(ctx, &s, logits, 1, NULL, ids, w);
        double sum = 0;
        for (int j = 0; j < 8; j++) sum += w[j];
        CHECK(fabs(sum - 2.5) <= 1e-5, "top_k == E, renormalised: weights sum to %.9g, expected 2.5", sum);
        /* Grouped, every group kept. */
        s.n_group = 4;
        s.topk_group = 4;
        s.use_correction_bias = 1;
        float bias[8];
        for (int e = 0; e < 8; e++) bias[e] = (float)(0.1 * rng_normal());
        compare_with_reference(&s, logits, 50, bias, "top_k == E grouped");
        free(logits);
    }
}

static void test_route_one_expert(void) {
    for (int score = 0; score < 3; score++)
        for (int renorm = 0; renorm < 2; renorm++) {
            moe_layer_spec s;
            spec_route(&s, 1, 1, (moe_score)score);
            s.renormalize = renorm;
            s.routed_scale = 1.5f;
            float *logits = random_logits(20, 3.0);
            compare_with_reference(&s, logits, 20, NULL, "E == 1");
            int32_t id;
            float w;
            moe_route(ctx, &s, logits, 1, NULL, &id, &w);
            CHECK(id == 0, "E == 1: id %d", id);
            if (score == MOE_SCORE_SOFTMAX || renorm)
                CHECK(fabsf(w - 1.5f) <= 1e-6f, "E == 1 (%s, renorm %d): weight %.9g, expected routed_scale 1.5",
                      moe_score_name(s.score), renorm, w);
            free(logits);
        }
}

static void test_route_token_counts(void) {
    moe_layer_spec s;
    spec_route(&s, 32, 4, MOE_SCORE_SIGMOID);
    /* T == 0: nothing read or written, NULL pointers allowed. */
    moe_status st = moe_route(ctx, &s, NULL, 0, NULL, NULL, NULL);
    CHECK(st == MOE_STATUS_OK, "T == 0 with NULL pointers: %s", moe_last_error(ctx));
    float *logits = random_logits(32, 2.0);
    compare_with_reference(&s, logits, 1, NULL, "T == 1");
    free(logits);
}

/* Same result on 1 thread and on several, and through moe__cpu_route_rows on a sub-range
 * (which must write only its rows). */
static void test_route_threads_and_rows(void) {
    moe_layer_spec s;
    spec_route(&s, 256, 8, MOE_SCORE_SIGMOID);
    s.n_group = 8;
    s.topk_group = 4;
    s.use_correction_bias = 1;
    s.renormalize = 1;
    s.routed_scale = 2.5f;
    const int64_t T = 300, E = 256, k = 8;
    float *logits = random_logits(T * E, 2.0), bias[256];
    for (int e = 0; e < 256; e++) bias[e] = (float)(0.1 * rng_normal());
    int32_t *ids1 = xmalloc(T * k * sizeof *ids1), *ids2 = xmalloc(T * k * sizeof *ids2);
    float *w1 = xmalloc(T * k * sizeof *w1), *w2 = xmalloc(T * k * sizeof *w2);
    moe_context_set_threads(ctx, 1);
    CHECK(moe_route(ctx, &s, logits, T, bias, ids1, w1) == MOE_STATUS_OK, "1 thread: %s", moe_last_error(ctx));
    moe_context_set_threads(ctx, 3);
    CHECK(moe_route(ctx, &s, logits, T, bias, ids2, w2) == MOE_STATUS_OK, "3 threads: %s", moe_last_error(ctx));
    moe_context_set_threads(ctx, 0);
    CHECK(memcmp(ids1, ids2, T * k * sizeof *ids1) == 0, "ids differ between 1 and 3 threads");
    CHECK(memcmp(w1, w2, T * k * sizeof *w1) == 0, "weights differ between 1 and 3 threads");

    for (int64_t i = 0; i < T * k; i++) {
        ids2[i] = -7777;
        w2[i] = -1.0f;
    }
    moe__cpu_route_rows(&s, logits, 100, 137, bias, ids2, w2);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++) {
            int64_t i = t * k + j;
            if (t >= 100 && t < 137) {
                CHECK(ids2[i] == ids1[i] && w2[i] == w1[i], "route_rows token %lld slot %lld differs", (long long)t,
                      (long long)j);
            } else {
                CHECK(ids2[i] == -7777 && w2[i] == -1.0f, "route_rows wrote token %lld outside [100, 137)",
                      (long long)t);
            }
        }
    free(logits);
    free(ids1);
    free(ids2);
    free(w1);
    free(w2);
}

/* NaN (and inf) logits: no crash, valid distinct ids, NaN ranked last, same as the reference. */
static void test_route_nan(void) {
    static const int64_t shapes[][4] = {{64, 6, 0, 0}, {256, 8, 8, 4}, {16, 4, 16, 5}};
    for (int score = 0; score < 3; score++)
        for (int use_bias = 0; use_bias < 2; use_bias++)
            for (size_t sh = 0; sh < 3; sh++)
                for (int pattern = 0; pattern < 3; pattern++) {
                    moe_layer_spec s;
                    spec_route(&s, shapes[sh][0], shapes[sh][1], (moe_score)score);
                    s.n_group = shapes[sh][2];
                    s.topk_group = shapes[sh][3];
                    s.use_correction_bias = use_bias;
                    s.renormalize = 1;
                    const int64_t E = s.num_experts, T = 40;
                    float *logits = random_logits(T * E, 2.0);
                    for (int64_t i = 0; i < T * E; i++) {
                        double u = rng_uniform();
                        if (pattern == 0 && u < 0.2) logits[i] = NAN;          /* some NaN */
                        if (pattern == 1) logits[i] = NAN;                     /* all NaN */
                        if (pattern == 2 && u < 0.1) logits[i] = u < 0.05 ? INFINITY : -INFINITY;
                    }
                    float *bias = NULL;
                    if (use_bias) {
                        bias = xmalloc((size_t)E * sizeof *bias);
                        for (int64_t e = 0; e < E; e++) bias[e] = (float)(0.05 * rng_normal());
                    }
                    char what[128];
                    snprintf(what, sizeof what, "NaN pattern %d, %s bias=%d E=%lld", pattern, moe_score_name(s.score),
                             use_bias, (long long)E);
                    compare_with_reference(&s, logits, T, bias, what);
                    free(logits);
                    free(bias);
                }
    /* A NaN logit under sigmoid never beats a number. */
    moe_layer_spec s;
    spec_route(&s, 4, 2, MOE_SCORE_SIGMOID);
    float l[4] = {NAN, -5.0f, NAN, -6.0f};
    expect_ids(&s, l, NULL, (const int32_t[]){1, 3}, "NaN ranks last");
}

/* Scores that underflow fp32: selection sees ties (lowest indices win), the weights come
 * from the double scores; scores that are exactly 0 leave a zero sum, and zero weights. */
static void test_route_tiny_scores(void) {
    moe_layer_spec s;
    spec_route(&s, 8, 3, MOE_SCORE_SIGMOID);
    s.renormalize = 1;
    s.routed_scale = 2.0f;
    float logits[8];
    for (int e = 0; e < 8; e++) logits[e] = (float)(-130.0 + 10.0 * rng_uniform()); /* e^-120 < fp32's least */
    compare_with_reference(&s, logits, 1, NULL, "sigmoid underflowing fp32");
    int32_t ids[3];
    float w[3];
    CHECK(moe_route(ctx, &s, logits, 1, NULL, ids, w) == MOE_STATUS_OK, "%s", moe_last_error(ctx));
    CHECK(ids[0] == 0 && ids[1] == 1 && ids[2] == 2, "fp32 ties: ids %d %d %d, expected 0 1 2", ids[0], ids[1],
          ids[2]);
    double sum = (double)w[0] + w[1] + w[2];
    CHECK(fabs(sum - 2.0) <= 1e-6, "renormalised tiny weights sum to %.9g, expected routed_scale 2", sum);

    for (int e = 0; e < 8; e++) logits[e] = -1000.0f; /* sigmoid is exactly 0 even in double */
    for (int score = MOE_SCORE_SIGMOID; score <= MOE_SCORE_SQRTSOFTPLUS; score++) {
        s.score = (moe_score)score;
        CHECK(moe_route(ctx, &s, logits, 1, NULL, ids, w) == MOE_STATUS_OK, "%s", moe_last_error(ctx));
        for (int j = 0; j < 3; j++)
            CHECK(ids[j] == j && w[j] == 0.0f, "%s, zero scores: slot %d id %d weight %.9g, expected id %d weight 0",
                  moe_score_name(s.score), j, ids[j], w[j], j);
    }
}

static bool last_error_has(const char *text) { return strstr(moe_last_error(ctx), text) != NULL; }

static void test_route_bad_inputs(void) {
    moe_layer_spec s;
    spec_route(&s, 8, 2, MOE_SCORE_SIGMOID);
    float logits[16] = {0}, bias[8] = {0};
    int32_t ids[4] = {-7777, -7777, -7777, -7777};
    float w[4];
    moe_status st;

    st = moe_route(ctx, NULL, logits, 2, NULL, ids, w);
    CHECK(st == MOE_STATUS_NULL_POINTER, "NULL spec -> %s", moe_status_string(st));
    st = moe_route(ctx, &s, NULL, 2, NULL, ids, w);
    CHECK(st == MOE_STATUS_NULL_POINTER && last_error_has("logits"), "NULL logits -> %s: %s", moe_status_string(st),
          moe_last_error(ctx));
    st = moe_route(ctx, &s, logits, 2, NULL, NULL, w);
    CHECK(st == MOE_STATUS_NULL_POINTER && last_error_has("topk_ids"), "NULL ids -> %s: %s", moe_status_string(st),
          moe_last_error(ctx));
    st = moe_route(ctx, &s, logits, 2, NULL, ids, NULL);
    CHECK(st == MOE_STATUS_NULL_POINTER && last_error_has("topk_weights"), "NULL weights -> %s: %s",
          moe_status_string(st), moe_last_error(ctx));
    st = moe_route(ctx, &s, logits, -1, NULL, ids, w);
    CHECK(st == MOE_STATUS_INVALID_ARGUMENT && last_error_has("num_tokens") && last_error_has("-1"),
          "T = -1 -> %s: %s", moe_status_string(st), moe_last_error(ctx));
    st = moe_route(ctx, &s, logits, 2, bias, ids, w);
    CHECK(st == MOE_STATUS_INVALID_ARGUMENT && last_error_has("correction_bias"),
          "bias without use_correction_bias -> %s: %s", moe_status_string(st), moe_last_error(ctx));

    s.use_correction_bias = 1;
    st = moe_route(ctx, &s, logits, 2, NULL, ids, w);
    CHECK(st == MOE_STATUS_NULL_POINTER && last_error_has("correction_bias"), "missing correction_bias -> %s: %s",
          moe_status_string(st), moe_last_error(ctx));
    /* Also with no context: the message goes to the thread's buffer. */
    st = moe_route(NULL, &s, logits, 2, NULL, ids, w);
    CHECK(st == MOE_STATUS_NULL_POINTER && strstr(moe_last_error(NULL), "correction_bias"),
          "missing correction_bias, NULL ctx -> %s: %s", moe_status_string(st), moe_last_error(NULL));
    s.use_correction_bias = 0;

    s.top_k = 9;
    st = moe_route(ctx, &s, logits, 2, NULL, ids, w);
    CHECK(st == MOE_STATUS_INVALID_ARGUMENT && last_error_has("top_k"), "top_k > E -> %s: %s",
          moe_status_string(st), moe_last_error(ctx));
    s.top_k = 2;
    s.n_group = 3;
    s.topk_group = 1;
    st = moe_route(ctx, &s, logits, 2, NULL, ids, w);
    CHECK(st == MOE_STATUS_INVALID_ARGUMENT && last_error_has("n_group"), "n_group 3 with E 8 -> %s: %s",
          moe_status_string(st), moe_last_error(ctx));
    s.n_group = 0;
    s.score = (moe_score)7;
    st = moe_route(ctx, &s, logits, 2, NULL, ids, w);
    CHECK(st == MOE_STATUS_INVALID_ARGUMENT && last_error_has("score"), "score 7 -> %s: %s", moe_status_string(st),
          moe_last_error(ctx));
    s.score = MOE_SCORE_SIGMOID;
    s.num_experts = INT64_C(1) << 40;
    s.top_k = 1;
    st = moe_route(ctx, &s, logits, INT64_C(1) << 30, NULL, ids, w);
    CHECK(st == MOE_STATUS_OVERFLOW, "T * E overflowing int64 -> %s: %s", moe_status_string(st), moe_last_error(ctx));
    for (int i = 0; i < 4; i++) CHECK(ids[i] == -7777, "a failed call wrote ids[%d]", i);

    /* A good call after failures clears the message. */
    s.num_experts = 8;
    s.top_k = 2;
    st = moe_route(ctx, &s, logits, 2, NULL, ids, w);
    CHECK(st == MOE_STATUS_OK && moe_last_error(ctx)[0] == '\0', "good call -> %s, message '%s'",
          moe_status_string(st), moe_last_error(ctx));
}

/* ---- dispatch plan --------------------------------------------------------------------- */
#define CANARY 8 /* extra elements past each array, which the build must not touch */

typedef struct plan_buffers {
    moe_dispatch_plan plan;
    int64_t max_rows, max_blocks;
} plan_buffers;

static bool plan_alloc(plan_buffers *b, int64_t T, int64_t k, int64_t E, int64_t block) {
    moe_status st = moe_dispatch_plan_bounds(T, k, E, block, &b->max_rows, &b->max_blocks);
    CHECK(st == MOE_STATUS_OK, "bounds(T %lld, k %lld, E %lld, block %lld): %s", (long long)T, (long long)k,
          (long long)E, (long long)block, moe_last_error(NULL));
    if (st != MOE_STATUS_OK) return false;
    memset(&b->plan, 0, sizeof b->plan);
    b->plan.expert_counts = xmalloc((size_t)(E + CANARY) * sizeof(int64_t));
    b->plan.expert_offsets = xmalloc((size_t)(E + 1 + CANARY) * sizeof(int64_t));
    b->plan.sorted_ids = xmalloc((size_t)(b->max_rows + CANARY) * sizeof(int32_t));
    b->plan.block_expert = xmalloc((size_t)(b->max_blocks + CANARY) * sizeof(int32_t));
    /* Poison everything, canaries included. */
    for (int64_t i = 0; i < E + CANARY; i++) b->plan.expert_counts[i] = -99;
    for (int64_t i = 0; i < E + 1 + CANARY; i++) b->plan.expert_offsets[i] = -99;
    for (int64_t i = 0; i < b->max_rows + CANARY; i++) b->plan.sorted_ids[i] = -99;
    for (int64_t i = 0; i < b->max_blocks + CANARY; i++) b->plan.block_expert[i] = -99;
    return true;
}

static void plan_free(plan_buffers *b) {
    free(b->plan.expert_counts);
    free(b->plan.expert_offsets);
    free(b->plan.sorted_ids);
    free(b->plan.block_expert);
}

/* Checks every property of a built plan from first principles. */
static void verify_plan(const int32_t *ids, int64_t T, int64_t k, int64_t E, int64_t block, const plan_buffers *b,
                        const char *what) {
    const moe_dispatch_plan *p = &b->plan;
    const int64_t rows = T * k, pad = T * k;
    CHECK(p->num_tokens == T && p->top_k == k && p->num_experts == E && p->block == block,
          "%s: plan header %lld %lld %lld %lld", what, (long long)p->num_tokens, (long long)p->top_k,
          (long long)p->num_experts, (long long)p->block);
    CHECK(p->max_rows == T * k + E * (block - 1), "%s: max_rows %lld", what, (long long)p->max_rows);
    CHECK(p->max_blocks == (p->max_rows + block - 1) / block, "%s: max_blocks %lld", what, (long long)p->max_blocks);
    CHECK(b->max_rows == p->max_rows && b->max_blocks == p->max_blocks, "%s: bounds and plan disagree", what);

    int64_t *count = calloc((size_t)E, sizeof *count);
    int *seen = calloc((size_t)(rows + 1), sizeof *seen);
    for (int64_t r = 0; r < rows; r++)
        if (ids[r] >= 0) count[ids[r]]++; /* -1: no expert, no row */
    CHECK(p->expert_offsets[0] == 0, "%s: offsets[0] = %lld", what, (long long)p->expert_offsets[0]);
    for (int64_t e = 0; e < E; e++) {
        int64_t lo = p->expert_offsets[e], hi = p->expert_offsets[e + 1];
        CHECK(p->expert_counts[e] == count[e], "%s: counts[%lld] = %lld, expected %lld", what, (long long)e,
              (long long)p->expert_counts[e], (long long)count[e]);
        CHECK(hi - lo == (count[e] + block - 1) / block * block && lo % block == 0,
              "%s: expert %lld segment [%lld, %lld) for %lld rows, block %lld", what, (long long)e, (long long)lo,
              (long long)hi, (long long)count[e], (long long)block);
        if (hi < lo || hi > p->max_rows) break; /* the checks below would read out of range */
        for (int64_t i = lo; i < hi; i++) {
            int32_t r = p->sorted_ids[i];
            if (i < lo + count[e]) {
                bool ok = r >= 0 && r < rows && ids[r] == e && (i == lo || r > p->sorted_ids[i - 1]);
                CHECK(ok, "%s: expert %lld row %lld holds %d (not its next id in ascending order)", what, (long long)e,
                      (long long)i, r);
                if (r >= 0 && r < rows) seen[r]++;
            } else {
                CHECK(r == pad, "%s: padding row %lld holds %d, expected T*k = %lld", what, (long long)i, r,
                      (long long)pad);
            }
        }
        for (int64_t blk = lo / block; blk < hi / block; blk++)
            CHECK(p->block_expert[blk] == e, "%s: block %lld owner %d, expected %lld", what, (long long)blk,
                  p->block_expert[blk], (long long)e);
    }
    for (int64_t r = 0; r < rows; r++)
        CHECK(seen[r] == (ids[r] >= 0 ? 1 : 0), "%s: row id %lld (expert %d) appears %d times", what, (long long)r,
              ids[r], seen[r]);
    int64_t total = p->expert_offsets[E];
    CHECK(total >= 0 && total <= p->max_rows, "%s: total %lld past max_rows %lld", what, (long long)total,
          (long long)p->max_rows);
    for (int64_t i = total; i < p->max_rows; i++)
        CHECK(p->sorted_ids[i] == pad, "%s: tail row %lld holds %d, expected %lld", what, (long long)i,
              p->sorted_ids[i], (long long)pad);
    for (int64_t blk = total / block; blk < p->max_blocks; blk++)
        CHECK(p->block_expert[blk] == -1, "%s: tail block %lld owner %d, expected -1", what, (long long)blk,
              p->block_expert[blk]);
    for (int i = 0; i < CANARY; i++) {
        CHECK(p->expert_counts[E + i] == -99 && p->expert_offsets[E + 1 + i] == -99 &&
                  p->sorted_ids[p->max_rows + i] == -99 && p->block_expert[p->max_blocks + i] == -99,
              "%s: wrote past an array's end", what);
    }
    free(count);
    free(seen);
}

static void build_and_verify(const int32_t *ids, int64_t T, int64_t k, int64_t E, int64_t block, const char *what) {
    plan_buffers b;
    if (!plan_alloc(&b, T, k, E, block)) return;
    moe_status st = moe_dispatch_plan_build(ctx, ids, T, k, E, block, &b.plan);
    CHECK(st == MOE_STATUS_OK, "%s: build -> %s: %s", what, moe_status_string(st), moe_last_error(ctx));
    if (st == MOE_STATUS_OK) verify_plan(ids, T, k, E, block, &b, what);
    plan_free(&b);
}

static void test_plan_patterns(void) {
    static const int64_t blocks[] = {1, 4, 16, 128};
    for (size_t bi = 0; bi < 4; bi++) {
        int64_t block = blocks[bi];
        char what[96];
        /* All tokens on one expert (k 1, and k 3 with every slot on it). */
        int32_t *ids = xmalloc(300 * 3 * sizeof *ids);
        for (int i = 0; i < 300 * 3; i++) ids[i] = 5;
        snprintf(what, sizeof what, "all on expert 5, k 1, block %lld", (long long)block);
        build_and_verify(ids, 300, 1, 8, block, what);
        snprintf(what, sizeof what, "all on expert 5, k 3, block %lld", (long long)block);
        build_and_verify(ids, 300, 3, 8, block, what);
        /* Empty experts: only even experts get rows; counts rarely divide the block. */
        for (int i = 0; i < 77 * 2; i++) ids[i] = (int32_t)(2 * rng_int(0, 7));
        snprintf(what, sizeof what, "even experts only, block %lld", (long long)block);
        build_and_verify(ids, 77, 2, 16, block, what);
        /* Exactly one block per expert, and one row past it. */
        for (int i = 0; i < 8 * (int)block && i < 900; i++) ids[i] = i % 8;
        if (8 * block <= 900) {
            snprintf(what, sizeof what, "counts == block, block %lld", (long long)block);
            build_and_verify(ids, 8 * block, 1, 8, block, what);
        }
        /* T == 0 (ids NULL allowed) and T == 1. */
        snprintf(what, sizeof what, "T == 0, block %lld", (long long)block);
        build_and_verify(NULL, 0, 2, 8, block, what);
        ids[0] = 3;
        ids[1] = 0;
        snprintf(what, sizeof what, "T == 1, block %lld", (long long)block);
        build_and_verify(ids, 1, 2, 8, block, what);
        /* One expert. */
        for (int i = 0; i < 50; i++) ids[i] = 0;
        snprintf(what, sizeof what, "E == 1, block %lld", (long long)block);
        build_and_verify(ids, 50, 1, 1, block, what);
        /* Slots with no expert (-1, another rank's under expert parallelism): no rows; one token
         * with none at all. */
        for (int i = 0; i < 90 * 3; i++) ids[i] = rng_int(0, 3) == 0 ? -1 : (int32_t)rng_int(0, 5);
        ids[3] = ids[4] = ids[5] = -1;
        snprintf(what, sizeof what, "some slots -1, block %lld", (long long)block);
        build_and_verify(ids, 90, 3, 6, block, what);
        free(ids);
    }
}

/* Plans of real routings: moe_route on random logits, then the plan. */
static void test_plan_random_routing(void) {
    static const int64_t shapes[][2] = {{8, 2}, {64, 6}, {256, 8}, {128, 1}};
    static const int64_t blocks[] = {1, 3, 64, 128};
    for (size_t sh = 0; sh < 4; sh++)
        for (size_t bi = 0; bi < 4; bi++) {
            moe_layer_spec s;
            spec_route(&s, shapes[sh][0], shapes[sh][1], MOE_SCORE_SOFTMAX);
            const int64_t E = s.num_experts, k = s.top_k, T = rng_int(1, 400);
            float *logits = random_logits(T * E, 2.0);
            int32_t *ids = xmalloc((size_t)(T * k) * sizeof *ids);
            float *w = xmalloc((size_t)(T * k) * sizeof *w);
            CHECK(moe_route(ctx, &s, logits, T, NULL, ids, w) == MOE_STATUS_OK, "route: %s", moe_last_error(ctx));
            char what[96];
            snprintf(what, sizeof what, "random T %lld E %lld k %lld block %lld", (long long)T, (long long)E,
                     (long long)k, (long long)blocks[bi]);
            build_and_verify(ids, T, k, E, blocks[bi], what);
            free(logits);
            free(ids);
            free(w);
        }
}

static void test_plan_bounds(void) {
    int64_t rows = -1, blocks = -1;
    CHECK(moe_dispatch_plan_bounds(3, 1, 2, 4, &rows, &blocks) == MOE_STATUS_OK && rows == 9 && blocks == 3,
          "bounds(3,1,2,4) = %lld rows, %lld blocks; expected 9 (3 + 2*3) and 3 (ceil)", (long long)rows,
          (long long)blocks);
    CHECK(moe_dispatch_plan_bounds(0, 1, 4, 1, &rows, &blocks) == MOE_STATUS_OK && rows == 0 && blocks == 0,
          "bounds(0,1,4,1) = %lld, %lld", (long long)rows, (long long)blocks);
    CHECK(moe_dispatch_plan_bounds(4096, 8, 256, 128, &rows, &blocks) == MOE_STATUS_OK &&
              rows == 4096 * 8 + 256 * 127 && blocks == (rows + 127) / 128,
          "bounds DeepSeek prefill = %lld, %lld", (long long)rows, (long long)blocks);
    /* The largest T*k that fits int32 is accepted; one more is not. */
    CHECK(moe_dispatch_plan_bounds(INT32_MAX, 1, 1, 1, &rows, &blocks) == MOE_STATUS_OK,
          "T*k = 2^31-1 refused: %s", moe_last_error(NULL));
}

static void test_plan_bad_inputs(void) {
    int64_t rows, blocks;
    moe_status st;
    struct {
        int64_t T, k, E, block;
        moe_status want;
        const char *text;
    } bad[] = {
        {10, 2, 8, 0, MOE_STATUS_INVALID_ARGUMENT, "block"},
        {10, 2, 8, -3, MOE_STATUS_INVALID_ARGUMENT, "block"},
        {-1, 2, 8, 16, MOE_STATUS_INVALID_ARGUMENT, "num_tokens"},
        {10, 0, 8, 16, MOE_STATUS_INVALID_ARGUMENT, "top_k"},
        {10, 9, 8, 16, MOE_STATUS_INVALID_ARGUMENT, "top_k"},
        {10, 1, 0, 16, MOE_STATUS_INVALID_ARGUMENT, "num_experts"},
        {INT64_C(1) << 31, 1, 8, 16, MOE_STATUS_OVERFLOW, "int32"},
        {INT64_C(1) << 30, 2, 8, 16, MOE_STATUS_OVERFLOW, "int32"},
        {INT64_C(1) << 40, INT64_C(1) << 30, INT64_C(1) << 40, 16, MOE_STATUS_OVERFLOW, "num_tokens"},
        {10, 2, INT64_C(1) << 40, INT64_C(1) << 40, MOE_STATUS_OVERFLOW, "max_rows"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st = moe_dispatch_plan_bounds(bad[i].T, bad[i].k, bad[i].E, bad[i].block, &rows, &blocks);
        CHECK(st == bad[i].want && strstr(moe_last_error(NULL), bad[i].text),
              "bounds case %zu -> %s: '%s' (expected %s naming %s)", i, moe_status_string(st), moe_last_error(NULL),
              moe_status_string(bad[i].want), bad[i].text);
        moe_dispatch_plan plan = {0};
        st = moe_dispatch_plan_build(ctx, NULL, bad[i].T, bad[i].k, bad[i].E, bad[i].block, &plan);
        CHECK(st == bad[i].want && last_error_has(bad[i].text), "build case %zu -> %s: '%s'", i,
              moe_status_string(st), moe_last_error(ctx));
    }
    st = moe_dispatch_plan_bounds(10, 2, 8, 16, NULL, &blocks);
    CHECK(st == MOE_STATUS_NULL_POINTER && strstr(moe_last_error(NULL), "max_rows"), "bounds NULL max_rows -> %s",
          moe_status_string(st));
    st = moe_dispatch_plan_bounds(10, 2, 8, 16, &rows, NULL);
    CHECK(st == MOE_STATUS_NULL_POINTER && strstr(moe_last_error(NULL), "max_blocks"), "bounds NULL max_blocks -> %s",
          moe_status_string(st));

    /* Build: ids out of range name token, slot and value. */
    int32_t ids[6] = {0, 1, 2, 3, 4, 5};
    plan_buffers b;
    if (!plan_alloc(&b, 3, 2, 8, 4)) return;
    ids[3] = 8;
    st = moe_dispatch_plan_build(ctx, ids, 3, 2, 8, 4, &b.plan);
    CHECK(st == MOE_STATUS_INVALID_ARGUMENT && last_error_has("token 1") && last_error_has("slot 1") &&
              last_error_has("= 8"),
          "id 8 with E 8 -> %s: '%s'", moe_status_string(st), moe_last_error(ctx));
    ids[3] = 3;
    ids[4] = -2; /* (-1 is no expert) */
    st = moe_dispatch_plan_build(ctx, ids, 3, 2, 8, 4, &b.plan);
    CHECK(st == MOE_STATUS_INVALID_ARGUMENT && last_error_has("token 2") && last_error_has("slot 0") &&
              last_error_has("-2") && last_error_has("or -1"),
          "id -2 -> %s: '%s'", moe_status_string(st), moe_last_error(ctx));
    CHECK(b.plan.expert_counts[0] == -99 && b.plan.sorted_ids[0] == -99, "a refused build wrote the plan");
    ids[4] = 4;

    /* NULL pointers. */
    st = moe_dispatch_plan_build(ctx, ids, 3, 2, 8, 4, NULL);
    CHECK(st == MOE_STATUS_NULL_POINTER && last_error_has("plan"), "NULL plan -> %s", moe_status_string(st));
    st = moe_dispatch_plan_build(ctx, NULL, 3, 2, 8, 4, &b.plan);
    CHECK(st == MOE_STATUS_NULL_POINTER && last_error_has("topk_ids"), "NULL ids -> %s", moe_status_string(st));
    static const char *const names[] = {"expert_counts", "expert_offsets", "sorted_ids", "block_expert"};
    for (int i = 0; i < 4; i++) {
        moe_dispatch_plan p = b.plan;
        if (i == 0) p.expert_counts = NULL;
        if (i == 1) p.expert_offsets = NULL;
        if (i == 2) p.sorted_ids = NULL;
        if (i == 3) p.block_expert = NULL;
        st = moe_dispatch_plan_build(ctx, ids, 3, 2, 8, 4, &p);
        CHECK(st == MOE_STATUS_NULL_POINTER && last_error_has(names[i]), "NULL %s -> %s: '%s'", names[i],
              moe_status_string(st), moe_last_error(ctx));
    }
    /* Zero-sized arrays may be NULL: T == 0 and block 1 leave no rows and no blocks. */
    moe_dispatch_plan p = b.plan;
    p.sorted_ids = NULL;
    p.block_expert = NULL;
    st = moe_dispatch_plan_build(ctx, NULL, 0, 2, 8, 1, &p);
    CHECK(st == MOE_STATUS_OK && p.expert_offsets[8] == 0, "T == 0, block 1, NULL row arrays -> %s: '%s'",
          moe_status_string(st), moe_last_error(ctx));
    plan_free(&b);
}

int main(void) {
    harness_seed("test_route");
    harness_print_limit = 10;
    if (moe_context_create(MOE_BACKEND_CPU, 0, &ctx) != MOE_STATUS_OK) {
        printf("cannot create a CPU context: %s\n0 passed, 1 failed\n", moe_last_error(NULL));
        return 1;
    }
    harness_run_case("route: random logits vs fp64 reference (scores x renorm x bias x groups x scale)",
             test_route_random_matrix);
    harness_run_case("route: ties go to the lower index (experts and groups)", test_route_ties);
    harness_run_case("route: top_k == E", test_route_top_k_equals_e);
    harness_run_case("route: E == 1", test_route_one_expert);
    harness_run_case("route: T == 0 and T == 1", test_route_token_counts);
    harness_run_case("route: thread count and moe__cpu_route_rows sub-ranges", test_route_threads_and_rows);
    harness_run_case("route: NaN and inf logits", test_route_nan);
    harness_run_case("route: scores underflowing fp32, zero sums", test_route_tiny_scores);
    harness_run_case("route: bad inputs", test_route_bad_inputs);
    harness_run_case("plan: adversarial patterns", test_plan_patterns);
    harness_run_case("plan: random routings", test_plan_random_routing);
    harness_run_case("plan: bounds", test_plan_bounds);
    harness_run_case("plan: bad inputs", test_plan_bad_inputs);
    moe_context_free(ctx);
    return harness_finish(cases_passed, cases_failed);
}
