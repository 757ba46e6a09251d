/* The expert activations (moe_activation in moefuse.h), one GLU pair at a time.
 *
 * Computed in double and rounded once to float: the CPU backend is the oracle, so its
 * activation should be the correctly rounded value as nearly as libm allows.
 * NaN propagates: every clamp and relu below is written so that a NaN input stays NaN
 * (fminf/fmaxf would silently replace it by the limit), as PyTorch's clamp and relu do. */
#include "internal.h"

#include <math.h>

/* min(v, hi), NaN stays NaN. */
static double clamp_above(double v, double hi) { return v > hi ? hi : v; }

/* clamp(v, -limit, limit), NaN stays NaN. */
static double clamp_both(double v, double limit) { return v > limit ? limit : v < -limit ? -limit : v; }

/* max(v, 0), NaN stays NaN. */
static double relu(double v) { return v < 0.0 ? 0.0 : v; }

static double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

/* silu(x) = x / (1 + exp(-x)); for very negative finite x exp overflows to inf and the
 * quotient is -0, as it should be. */
static double silu(double v) { return v / (1.0 + exp(-v)); }

/* Exact GELU: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)). */
static double gelu_erf(double v) { return 0.5 * v * (1.0 + erf(v * 0.70710678118654752440)); }

/* GELU's tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static double gelu_tanh(double v) {
    const double sqrt_2_over_pi = 0.79788456080286535588;
    return 0.5 * v * (1.0 + tanh(sqrt_2_over_pi * (v + 0.044715 * v * v * v)));
}

float moe__activate(const moe_layer_spec *spec, float gate, float up) {
    double g = gate, u = up;
    const double limit = spec->act_limit;
    switch (spec->activation) {
    case MOE_ACT_SWIGLU:
        if (limit > 0.0) { /* DeepSeek-V4's swiglu_limit; 0 means no clamp */
            g = clamp_above(g, limit);
            u = clamp_both(u, limit);
        }
        return (float)(silu(g) * u);
    case MOE_ACT_GEGLU: return (float)(gelu_erf(g) * u);
    case MOE_ACT_GEGLU_TANH: return (float)(gelu_tanh(g) * u);
    case MOE_ACT_REGLU: return (float)(relu(g) * u);
    case MOE_ACT_RELU2: { /* not gated: `gate` is the one projection, `up` unused */
        double r = relu(g);
        return (float)(r * r);
    }
    case MOE_ACT_SWIGLU_OAI: /* GPT-OSS: g * sigmoid(alpha g) * (u + 1) after clamping */
        g = clamp_above(g, limit);
        u = clamp_both(u, limit);
        return (float)(g * sigmoid((double)spec->act_alpha * g) * (u + 1.0));
    }
    return NAN; /* unreachable for a validated spec */
}
