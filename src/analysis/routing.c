/* Routing statistics under uniform routing: the tokens n_e of one expert follow
 * Binomial(T, p = k/E) (each token picks k distinct experts of E). The expectations below are
 * exact sums over the pmf, walked outward from the mode until the terms vanish, not
 * formulas in the mean alone. */
#include "analysis_internal.h"

#include <math.h>

/* The window [lo, hi] of x outside which the Binomial(n, p) pmf is below 1e-30 of its peak,
 * and the pmf's value at lo relative to the peak. Terms outside add less than 1e-25 to any
 * expectation below (they decay geometrically past the window). */
typedef struct pmf_window {
    int64_t n, lo, hi, mode;
    double p, up_ratio, down_ratio; /* p/(1-p) and (1-p)/p */
    double lo_value, mass;          /* pmf(lo) / pmf(mode), Σ pmf / pmf(mode) */
} pmf_window;

#define PMF_CUTOFF 1e-30

/* pmf(x+1)/pmf(x) = (n-x)/(x+1) · p/(1-p). */
static pmf_window pmf_window_find(int64_t n, double p) {
    pmf_window w = {n, 0, 0, 0, p, p / (1.0 - p), (1.0 - p) / p, 1.0, 1.0};
    w.mode = (int64_t)floor((double)(n + 1) * p);
    if (w.mode > n) w.mode = n;
    double v = 1.0, mass = 1.0;
    int64_t x = w.mode;
    while (x < n) { /* upward */
        v *= (double)(n - x) / (double)(x + 1) * w.up_ratio;
        if (v < PMF_CUTOFF) break;
        x++;
        mass += v;
    }
    w.hi = x;
    v = 1.0;
    x = w.mode;
    while (x > 0) { /* downward */
        v *= (double)x / (double)(n - x + 1) * w.down_ratio;
        if (v < PMF_CUTOFF) break;
        x--;
        mass += v;
    }
    w.lo = x;
    /* recompute pmf(lo)/pmf(mode) exactly along the walk we kept */
    w.lo_value = 1.0;
    for (int64_t y = w.mode; y > w.lo; y--) w.lo_value *= (double)y / (double)(n - y + 1) * w.down_ratio;
    w.mass = mass;
    return w;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double moe_binomial_expected_ceil(int64_t n, double p, int64_t block) {
    if (n > MOE_BINOMIAL_N_MAX || isnan(p)) return NAN; /* outside the range: the sum's time grows as sqrt(n) */
    if (n <= 0 || block <= 0 || !(p > 0.0)) return 0.0;
    if (p >= 1.0) return (double)ceil_div(n, block);
    pmf_window w = pmf_window_find(n, p);
    double v = w.lo_value, sum = 0.0;
    for (int64_t x = w.lo; x <= w.hi; x++) {
        sum += v * (double)ceil_div(x, block);
        v *= (double)(n - x) / (double)(x + 1) * w.up_ratio;
    }
    return sum / w.mass;
}

/* E[max of E independent Binomial(n, p)] = Σ_{m>=0} P(max > m) = Σ_m 1 - (1 - S(m))^E with
 * S(m) = P(X > m) summed from the top so that small tails keep their precision. The real
 * counts share a fixed total: negatively associated, P(all <= m) <= F(m)^E, so this is a
 * lower bound of the true expected maximum (close when E is large). */
static double expected_max(int64_t n, double p, int64_t experts) {
    if (n <= 0 || !(p > 0.0)) return 0.0;
    if (p >= 1.0) return (double)n;
    pmf_window w = pmf_window_find(n, p);
    /* pmf(hi) relative to the peak, then walk down accumulating the tail. */
    double v = 1.0;
    for (int64_t y = w.mode; y < w.hi; y++) v *= (double)(n - y) / (double)(y + 1) * w.up_ratio;
    double tail = 0.0, sum = 0.0; /* tail = Σ_{x>m} pmf(x) / mass */
    for (int64_t m = w.hi; m >= w.lo; m--) {
        /* here tail = P(X > m) */
        double s = tail > 1.0 ? 1.0 : tail;
        sum += s >= 1.0 ? 1.0 : -expm1((double)experts * log1p(-s));
        tail += v / w.mass;
        if (m > 0) v *= (double)m / (double)(n - m + 1) * w.down_ratio;
    }
    /* below lo, P(X > m) = 1 to within the cutoff: each of those m adds 1 */
    return sum + (double)w.lo;
}

moe_status moe_routing_stats_compute(moe_context_t *ctx, int64_t tokens, int64_t num_experts, int64_t top_k,
                                     int64_t block, moe_routing_stats *out) {
    moe__clear_error(ctx);
    if (!out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_routing_stats_compute: out is NULL");
    if (tokens < 0 || tokens > MOE__ANALYSIS_TOKENS_MAX)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "tokens: got %lld, expected 0..2^32", (long long)tokens);
    if (num_experts < 1 || num_experts > (INT64_C(1) << 24))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "num_experts: got %lld, expected 1..2^24",
                          (long long)num_experts);
    if (top_k < 1 || top_k > num_experts)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "top_k: got %lld, expected 1..num_experts (%lld)",
                          (long long)top_k, (long long)num_experts);
    if (block < 1 || block > (INT64_C(1) << 20))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "block: got %lld, expected 1..2^20", (long long)block);
    double p = (double)top_k / (double)num_experts, E = (double)num_experts;
    out->mean = (double)tokens * p;
    out->experts_touched = moe__experts_touched((double)tokens, E, (double)top_k);
    out->expected_max_load = expected_max(tokens, p, num_experts);
    out->expected_blocks = E * moe_binomial_expected_ceil(tokens, p, block);
    out->padding_waste =
        out->expected_blocks > 0 ? 1.0 - (double)tokens * (double)top_k / ((double)block * out->expected_blocks) : 0.0;
    return MOE_STATUS_OK;
}
