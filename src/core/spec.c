/* The layer spec: defaults, names, validation. */
#include "internal.h"

#include <math.h>
#include <string.h>

const char *moe_score_name(moe_score score) {
    switch (score) {
    case MOE_SCORE_SOFTMAX: return "softmax";
    case MOE_SCORE_SIGMOID: return "sigmoid";
    case MOE_SCORE_SQRTSOFTPLUS: return "sqrtsoftplus";
    }
    return "unknown";
}

const char *moe_activation_name(moe_activation act) {
    switch (act) {
    case MOE_ACT_SWIGLU: return "swiglu";
    case MOE_ACT_GEGLU: return "geglu";
    case MOE_ACT_GEGLU_TANH: return "geglu-tanh";
    case MOE_ACT_REGLU: return "reglu";
    case MOE_ACT_RELU2: return "relu2";
    case MOE_ACT_SWIGLU_OAI: return "swiglu-oai";
    }
    return "unknown";
}

int moe_activation_is_gated(moe_activation act) { return act != MOE_ACT_RELU2; }

int64_t moe__w13_rows(const moe_layer_spec *spec, int64_t intermediate) {
    return moe_activation_is_gated(spec->activation) ? 2 * intermediate : intermediate;
}

void moe_layer_spec_init(moe_layer_spec *spec, int64_t num_experts, int64_t hidden, int64_t intermediate,
                         int64_t top_k) {
    if (!spec) return;
    memset(spec, 0, sizeof *spec);
    spec->num_experts = num_experts;
    spec->hidden = hidden;
    spec->intermediate = intermediate;
    spec->top_k = top_k;
    spec->score = MOE_SCORE_SOFTMAX;
    spec->routed_scale = 1.0f;
    spec->activation = MOE_ACT_SWIGLU;
    spec->act_alpha = 1.702f;
    spec->act_limit = 0.0f;
}

/* Sizes past this are refused: 2^40 elements per dimension is far beyond any model and keeps
 * every product of two dimensions inside int64. */
#define MOE__DIM_MAX (INT64_C(1) << 40)

moe_status moe_layer_spec_validate(moe_context_t *ctx, const moe_layer_spec *s) {
    moe__clear_error(ctx);
    if (!s) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "layer spec is NULL");
    struct {
        const char *name;
        int64_t v;
    } dims[] = {{"num_experts", s->num_experts}, {"hidden", s->hidden}, {"intermediate", s->intermediate},
                {"top_k", s->top_k}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (dims[i].v < 1)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "spec.%s = %lld, expected >= 1", dims[i].name,
                              (long long)dims[i].v);
        if (dims[i].v > MOE__DIM_MAX)
            return moe__error(ctx, MOE_STATUS_OVERFLOW, "spec.%s = %lld, expected <= 2^40", dims[i].name,
                              (long long)dims[i].v);
    }
    if (s->top_k > s->num_experts)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "spec.top_k = %lld exceeds num_experts = %lld",
                          (long long)s->top_k, (long long)s->num_experts);
    if (s->top_k > 64)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "spec.top_k = %lld, at most 64 supported",
                          (long long)s->top_k);
    if ((unsigned)s->score > MOE_SCORE_SQRTSOFTPLUS)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "spec.score = %d, expected softmax (0), sigmoid (1) or sqrtsoftplus (2)", (int)s->score);
    if ((unsigned)s->activation > MOE_ACT_SWIGLU_OAI)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "spec.activation = %d, expected 0..5 (moe_activation)",
                          (int)s->activation);
    if (s->n_group < 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "spec.n_group = %lld, expected >= 0",
                          (long long)s->n_group);
    if (s->n_group > 1) {
        if (s->num_experts % s->n_group != 0)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "spec.n_group = %lld does not divide num_experts = %lld", (long long)s->n_group,
                              (long long)s->num_experts);
        if (s->topk_group < 1 || s->topk_group > s->n_group)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "spec.topk_group = %lld, expected 1..n_group (%lld)",
                              (long long)s->topk_group, (long long)s->n_group);
        if (s->top_k > s->topk_group * (s->num_experts / s->n_group))
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "spec.top_k = %lld exceeds the %lld experts in topk_group = %lld groups",
                              (long long)s->top_k, (long long)(s->topk_group * (s->num_experts / s->n_group)),
                              (long long)s->topk_group);
    }
    if (!isfinite(s->routed_scale) || s->routed_scale <= 0.0f)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "spec.routed_scale = %g, expected a finite value > 0",
                          (double)s->routed_scale);
    if (!isfinite(s->act_alpha))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "spec.act_alpha = %g, expected a finite value",
                          (double)s->act_alpha);
    if (!isfinite(s->act_limit) || s->act_limit < 0.0f)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "spec.act_limit = %g, expected a finite value >= 0",
                          (double)s->act_limit);
    if (s->activation == MOE_ACT_SWIGLU_OAI && s->act_limit <= 0.0f)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "spec.act_limit = %g: swiglu-oai needs a clamp limit > 0 (GPT-OSS uses 7)",
                          (double)s->act_limit);
    if (s->weight_on_input && s->top_k != 1)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "spec.weight_on_input needs top_k == 1 (got top_k = %lld)", (long long)s->top_k);
    if (s->num_shared_experts < 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "spec.num_shared_experts = %lld, expected >= 0",
                          (long long)s->num_shared_experts);
    if (s->num_shared_experts > 0 && (s->shared_intermediate < 1 || s->shared_intermediate > MOE__DIM_MAX))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "spec.shared_intermediate = %lld, expected 1..2^40 with num_shared_experts = %lld",
                          (long long)s->shared_intermediate, (long long)s->num_shared_experts);
    if (s->num_shared_experts == 0 && s->shared_gate)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "spec.shared_gate set without shared experts");
    return MOE_STATUS_OK;
}
