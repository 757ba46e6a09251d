/* Routing on the CPU: router logits -> top-k expert ids and weights, one token at a time.
 *
 * Per token (the spec's comment in moefuse.h is the contract):
 *  1. scores s_e = softmax over the E logits | sigmoid(l_e) | sqrt(softplus(l_e)), computed
 *     in double;
 *  2. selection scores sel_e = fp32(s_e) + correction_bias[e] (an fp32 add) when the spec
 *     uses the bias, else fp32(s_e): selection works on fp32 values, as a GPU kernel does;
 *     the bias never enters the weights;
 *  3. with n_group > 1: experts form n_group equal groups; a group's score is the sum of its
 *     two best sel (bias used; a group of one expert has its best only) or its best sel (no
 *     bias); the topk_group best groups stay eligible;
 *  4. the top_k eligible experts by sel, slots in descending order;
 *  5. weights = s_e of the chosen, from the double scores (rounded once, at the end, so an
 *     fp32 underflow of tiny scores cannot turn their ratios into 0/0); divided by their sum
 *     when renormalize (a sum of exactly 0 is left alone: the weights stay 0); times
 *     routed_scale.
 *
 * Every ranking (experts and groups) uses one strict total order over (value, index):
 * larger value first, NaN behind every number, ties and NaN-vs-NaN to the lower index. So
 * NaN logits can never make the selection read out of range or repeat an expert: the ids
 * are always top_k distinct experts in [0, E), and NaN flows into the weights as the math
 * says (one NaN logit under softmax makes every score, hence every weight, NaN).
 *
 * The code keeps no per-expert arrays: a score is recomputed from its logit whenever it is
 * needed (deterministically, so always to the same value), and the k-th pick is "the best
 * candidate ranking strictly behind pick k-1". That needs no scratch memory for any E and
 * keeps each step a plain loop; the cost, O(k * E) score evaluations per token, is small
 * next to the expert GEMMs. */
#include "cpu.h"

#include <math.h>
#include <stdbool.h>

/* What one token's routing needs to evaluate any expert's score. */
typedef struct token_router {
    const moe_layer_spec *spec;
    const float *logits; /* [E], this token's row */
    const float *bias;   /* [E] when selection is biased, else NULL */
    double softmax_max;  /* softmax only: the largest logit (NaN ignored), and */
    double softmax_sum;  /* the sum of exp(l - max) over all E logits */
    int64_t groups;      /* n_group when grouped, else 1 (one group of all experts) */
    int64_t group_size;  /* E / groups */
} token_router;

/* a ranks ahead of b. A strict total order for distinct indices. */
static bool ranks_ahead(float va, int64_t ia, float vb, int64_t ib) {
    bool a_nan = isnan(va), b_nan = isnan(vb);
    if (a_nan != b_nan) return b_nan; /* the number goes first */
    if (!a_nan && va != vb) return va > vb;
    return ia < ib;
}

/* Step 1: s_e, in double. */
static double expert_score(const token_router *r, int64_t e) {
    double l = r->logits[e];
    switch (r->spec->score) {
    case MOE_SCORE_SOFTMAX:
        return exp(l - r->softmax_max) / r->softmax_sum;
    case MOE_SCORE_SIGMOID:
        return 1.0 / (1.0 + exp(-l));
    case MOE_SCORE_SQRTSOFTPLUS: {
        /* softplus(l) = log(1 + e^l); past 20 it equals l to double precision and exp
         * would only risk overflow. */
        double softplus = l > 20.0 ? l : log1p(exp(l));
        return sqrt(softplus);
    }
    }
    return NAN; /* unreachable for a valid spec */
}

/* Step 2: sel_e, fp32. */
static float selection_score(const token_router *r, int64_t e) {
    float s = (float)expert_score(r, e);
    return r->bias ? s + r->bias[e] : s;
}

/* Step 3: the score of group g (only called when grouped). */
static float group_score(const token_router *r, int64_t g) {
    int64_t first = g * r->group_size;
    int64_t best = -1, second = -1;
    float best_sel = 0.0f, second_sel = 0.0f;
    for (int64_t e = first; e < first + r->group_size; e++) {
        float v = selection_score(r, e);
        if (best < 0 || ranks_ahead(v, e, best_sel, best)) {
            second = best;
            second_sel = best_sel;
            best = e;
            best_sel = v;
        } else if (second < 0 || ranks_ahead(v, e, second_sel, second)) {
            second = e;
            second_sel = v;
        }
    }
    if (r->bias && second >= 0) return best_sel + second_sel;
    return best_sel;
}

/* Step 3: the kept groups are the first topk_group in rank order. Returns the last of them
 * (and its score): group g is kept iff it is that group or ranks ahead of it. */
static int64_t last_kept_group(const token_router *r, float *last_score) {
    int64_t last = -1;
    float last_sc = 0.0f;
    for (int64_t rank = 0; rank < r->spec->topk_group; rank++) {
        int64_t pick = -1;
        float pick_sc = 0.0f;
        for (int64_t g = 0; g < r->groups; g++) {
            float sc = group_score(r, g);
            if (last >= 0 && !ranks_ahead(last_sc, last, sc, g)) continue; /* kept already */
            if (pick < 0 || ranks_ahead(sc, g, pick_sc, pick)) {
                pick = g;
                pick_sc = sc;
            }
        }
        last = pick;
        last_sc = pick_sc;
    }
    *last_score = last_sc;
    return last;
}

static void route_token(const moe_layer_spec *spec, const float *logits, const float *correction_bias,
                        int32_t *ids, float *weights) {
    const int64_t E = spec->num_experts, k = spec->top_k;
    token_router r = {0};
    r.spec = spec;
    r.logits = logits;
    r.bias = spec->use_correction_bias ? correction_bias : NULL;
    r.groups = spec->n_group > 1 ? spec->n_group : 1;
    r.group_size = E / r.groups;

    if (spec->score == MOE_SCORE_SOFTMAX) {
        /* Subtract the max so exp cannot overflow; NaN compares false and is skipped here,
         * but then makes the sum, and so every score, NaN. */
        float max = -INFINITY;
        for (int64_t e = 0; e < E; e++)
            if (logits[e] > max) max = logits[e];
        double sum = 0.0;
        for (int64_t e = 0; e < E; e++) sum += exp((double)logits[e] - max);
        r.softmax_max = max;
        r.softmax_sum = sum;
    }

    int64_t last_group = 0;
    float last_group_score = 0.0f;
    if (r.groups > 1) last_group = last_kept_group(&r, &last_group_score);

    /* Step 4: pick j is the best eligible expert ranking strictly behind pick j-1. */
    int64_t prev = -1;
    float prev_sel = 0.0f;
    int64_t chosen = 0;
    for (; chosen < k; chosen++) {
        int64_t pick = -1;
        float pick_sel = 0.0f;
        for (int64_t g = 0; g < r.groups; g++) {
            if (r.groups > 1 && g != last_group &&
                !ranks_ahead(group_score(&r, g), g, last_group_score, last_group))
                continue; /* group not kept */
            for (int64_t e = g * r.group_size; e < (g + 1) * r.group_size; e++) {
                float v = selection_score(&r, e);
                if (prev >= 0 && !ranks_ahead(prev_sel, prev, v, e)) continue; /* chosen already */
                if (pick < 0 || ranks_ahead(v, e, pick_sel, pick)) {
                    pick = e;
                    pick_sel = v;
                }
            }
        }
        if (pick < 0) break; /* fewer eligible experts than top_k: impossible for a valid spec */
        ids[chosen] = (int32_t)pick;
        prev = pick;
        prev_sel = pick_sel;
    }

    /* Step 5: weights from the unbiased scores, summed in slot order in double. */
    double sum = 0.0;
    for (int64_t j = 0; j < chosen; j++) sum += expert_score(&r, ids[j]);
    for (int64_t j = 0; j < chosen; j++) {
        double w = expert_score(&r, ids[j]);
        if (spec->renormalize && sum != 0.0) w /= sum;
        weights[j] = (float)(w * spec->routed_scale);
    }
}

void moe__cpu_route_rows(const moe_layer_spec *spec, const float *logits, int64_t t0, int64_t t1,
                         const float *correction_bias, int32_t *ids, float *weights) {
    const int64_t E = spec->num_experts, k = spec->top_k;
    for (int64_t t = t0; t < t1; t++)
        route_token(spec, logits + t * E, correction_bias, ids + t * k, weights + t * k);
}

/* Tokens below this run on one thread: starting a team costs more than routing them. */
#define ROUTE_PARALLEL_MIN_TOKENS 64

moe_status moe_route(moe_context_t *ctx, const moe_layer_spec *spec, const float *logits, int64_t num_tokens,
                     const float *correction_bias, int32_t *topk_ids, float *topk_weights) {
    moe__clear_error(ctx);
    moe_status st = moe_layer_spec_validate(ctx, spec);
    if (st != MOE_STATUS_OK) return st;
    if (num_tokens < 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "moe_route: num_tokens = %lld, expected >= 0",
                          (long long)num_tokens);
    if (spec->use_correction_bias && !correction_bias)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER,
                          "moe_route: correction_bias is NULL, expected [E] floats since spec.use_correction_bias is set");
    if (!spec->use_correction_bias && correction_bias)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "moe_route: correction_bias given, expected NULL since spec.use_correction_bias is 0");
    int64_t logits_count, ids_count;
    if (!moe__mul64(num_tokens, spec->num_experts, &logits_count) ||
        !moe__mul64(num_tokens, spec->top_k, &ids_count))
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "moe_route: num_tokens = %lld times num_experts = %lld overflows",
                          (long long)num_tokens, (long long)spec->num_experts);
    if (num_tokens == 0) return MOE_STATUS_OK;
    if (!logits) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_route: logits is NULL, expected [T, E] floats");
    if (!topk_ids) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_route: topk_ids is NULL, expected [T, k] int32");
    if (!topk_weights)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_route: topk_weights is NULL, expected [T, k] floats");

    /* Always host memory, whatever the context's backend. Tokens are independent and each
     * is routed by the same code, so the result does not depend on the thread count. */
#ifdef _OPENMP
    int threads = moe__team_size(ctx, num_tokens, NULL);
#pragma omp parallel for schedule(static) if (num_tokens >= ROUTE_PARALLEL_MIN_TOKENS) num_threads(threads)
#endif
    for (int64_t t = 0; t < num_tokens; t++)
        moe__cpu_route_rows(spec, logits, t, t + 1, correction_bias, topk_ids, topk_weights);
    return MOE_STATUS_OK;
}
