/* Options of the analysis, and the checks of a model config against them. */
#include "analysis_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void moe_shape_options_init(moe_shape_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->batch = 1;
    opt->seq = 1;
    opt->mode = MOE_STEP_TRAIN;
    opt->tp = 1;
    opt->ep = 1;
    opt->dtype = MOE_DTYPE_BF16;
}

/* A whole decimal integer, nothing after it. */
static int parse_int64(const char *text, int64_t *out) {
    if (!text || !*text) return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end) return 0;
    *out = (int64_t)v;
    return 1;
}

moe_status moe_shape_options_set(moe_context_t *ctx, moe_shape_options *opt, const char *name, const char *value) {
    moe__clear_error(ctx);
    if (!opt || !name || !value)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_shape_options_set: %s is NULL",
                          !opt ? "opt" : !name ? "name" : "value");
    if (!strcmp(name, "mode")) {
        for (int m = MOE_STEP_TRAIN; m <= MOE_STEP_DECODE; m++)
            if (!strcmp(value, moe_step_mode_name((moe_step_mode)m))) {
                opt->mode = (moe_step_mode)m;
                return MOE_STATUS_OK;
            }
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "--mode: got '%s', expected train, prefill or decode",
                          value);
    }
    if (!strcmp(name, "dtype")) {
        if (!strcmp(value, "bf16")) opt->dtype = MOE_DTYPE_BF16;
        else if (!strcmp(value, "fp8") || !strcmp(value, "e4m3")) opt->dtype = MOE_DTYPE_E4M3;
        else return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "--dtype: got '%s', expected bf16 or fp8", value);
        return MOE_STATUS_OK;
    }
    struct {
        const char *name;
        int64_t *field;
        int64_t min, max;
    } ints[] = {{"batch", &opt->batch, 1, MOE__ANALYSIS_TOKENS_MAX},
                {"seq", &opt->seq, 1, MOE__ANALYSIS_TOKENS_MAX},
                {"context", &opt->context, 0, MOE__ANALYSIS_TOKENS_MAX},
                {"tp", &opt->tp, 1, 4096},
                {"ep", &opt->ep, 1, 4096}}; /* the bounds moe__analysis_check_options holds them to */
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (strcmp(name, ints[i].name)) continue;
        int64_t v;
        if (!parse_int64(value, &v))
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "--%s: got '%s', expected a whole number", name, value);
        if (v < ints[i].min || v > ints[i].max)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "--%s: got %lld, expected %lld..%lld", name,
                              (long long)v, (long long)ints[i].min, (long long)ints[i].max);
        *ints[i].field = v;
        return MOE_STATUS_OK;
    }
    return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                      "option '%s' is not one of batch, seq, mode, context, tp, ep, dtype", name);
}

double moe__experts_touched(double tokens, double num_experts, double top_k) {
    if (tokens <= 0 || num_experts <= 0) return 0.0;
    if (top_k >= num_experts) return num_experts;
    /* 1 - (1-p)^T = -expm1(T log1p(-p)): exact even when p is tiny and T huge. */
    return num_experts * -expm1(tokens * log1p(-top_k / num_experts));
}

int moe__layer_is_moe(const moe_model_config *cfg, int64_t layer) {
    return cfg->is_moe && cfg->num_moe_layers > 0 && layer >= 0 && layer < cfg->num_layers &&
           cfg->layer_is_moe[layer] != 0;
}

int moe__attention_span_note(const moe_model_config *cfg, char *buf, size_t size) {
    int64_t windowed = 0;
    for (int64_t l = 0; l < cfg->num_layers && l < MOE_MAX_LAYERS; l++) windowed += cfg->layer_is_windowed[l] != 0;
    if (windowed == 0 || cfg->attention_window <= 0) return 0;
    snprintf(buf, size,
             "%lld of %lld layers attend at most %lld cached tokens (sliding window or chunk, from the config): KV "
             "traffic and attention FLOPs count min(context, %lld) for them (a chunked layer's bound)",
             (long long)windowed, (long long)cfg->num_layers, (long long)cfg->attention_window,
             (long long)cfg->attention_window);
    return 1;
}

int64_t moe__dense_intermediate(const moe_model_config *cfg) {
    if (cfg->dense_intermediate > 0) return cfg->dense_intermediate;
    return cfg->is_moe ? 0 : cfg->layer.intermediate;
}

double moe__operand_bytes(moe_dtype dtype) { return dtype == MOE_DTYPE_E4M3 ? 1.0 : 2.0; }
double moe__output_bytes(moe_dtype dtype) {
    (void)dtype;
    return 2.0;
}

/* Dimensions past this are refused (no model is near it; products stay exact in doubles). */
#define DIM_MAX (INT64_C(1) << 24)

#define NEED(cond, ...)                                                          \
    do {                                                                         \
        if (!(cond)) return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, __VA_ARGS__); \
    } while (0)

static moe_status check_dim(moe_context_t *ctx, const char *name, int64_t v) {
    NEED(v >= 1, "config: %s missing or %lld, expected >= 1", name, (long long)v);
    NEED(v <= DIM_MAX, "config: %s = %lld, expected <= 2^24", name, (long long)v);
    return MOE_STATUS_OK;
}

moe_status moe__analysis_check_config(moe_context_t *ctx, const moe_model_config *c) {
    if (!c) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "model config is NULL");
    moe_status st;
    NEED(c->num_layers >= 1 && c->num_layers <= MOE_MAX_LAYERS, "config: num_layers missing or %lld, expected 1..%d",
         (long long)c->num_layers, MOE_MAX_LAYERS);
    if ((st = check_dim(ctx, "hidden_size", c->layer.hidden))) return st;
    if ((st = check_dim(ctx, "num_attention_heads", c->num_heads))) return st;
    if ((st = check_dim(ctx, "vocab_size", c->vocab_size))) return st;
    if (c->kv_lora_rank > 0) {
        if ((st = check_dim(ctx, "kv_lora_rank", c->kv_lora_rank))) return st;
        if ((st = check_dim(ctx, "v_head_dim", c->v_head_dim))) return st;
        if ((st = check_dim(ctx, "qk_nope_head_dim + qk_rope_head_dim", c->qk_nope_head_dim + c->qk_rope_head_dim)))
            return st;
        NEED(c->qk_nope_head_dim >= 0 && c->qk_rope_head_dim >= 0 && c->q_lora_rank >= 0,
             "config: negative MLA dimension (q_lora_rank %lld, qk_nope_head_dim %lld, qk_rope_head_dim %lld)",
             (long long)c->q_lora_rank, (long long)c->qk_nope_head_dim, (long long)c->qk_rope_head_dim);
    } else {
        if ((st = check_dim(ctx, "num_key_value_heads", c->num_kv_heads))) return st;
        NEED(c->num_heads % c->num_kv_heads == 0,
             "config: num_attention_heads %lld is not a multiple of num_key_value_heads %lld", (long long)c->num_heads,
             (long long)c->num_kv_heads);
        if (c->head_dim == 0)
            NEED(c->layer.hidden % c->num_heads == 0,
                 "config: head_dim missing and hidden_size %lld not a multiple of num_attention_heads %lld",
                 (long long)c->layer.hidden, (long long)c->num_heads);
        else if ((st = check_dim(ctx, "head_dim", c->head_dim)))
            return st;
    }
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < c->num_layers; l++) moe_layers += c->layer_is_moe[l] != 0;
    if (c->is_moe && c->num_moe_layers > 0) {
        NEED(moe_layers == c->num_moe_layers, "config: num_moe_layers is %lld but layer_is_moe marks %lld layers",
             (long long)c->num_moe_layers, (long long)moe_layers);
        if ((st = check_dim(ctx, "num_experts", c->layer.num_experts))) return st;
        if ((st = check_dim(ctx, "moe_intermediate_size", c->layer.intermediate))) return st;
        NEED(c->layer.top_k >= 1 && c->layer.top_k <= c->layer.num_experts,
             "config: num_experts_per_tok = %lld, expected 1..num_experts (%lld)", (long long)c->layer.top_k,
             (long long)c->layer.num_experts);
        if (c->layer.num_shared_experts > 0)
            if ((st = check_dim(ctx, "shared expert intermediate", c->layer.shared_intermediate))) return st;
    }
    int has_dense = 0;
    for (int64_t l = 0; l < c->num_layers; l++) has_dense |= !moe__layer_is_moe(c, l);
    if (has_dense && (st = check_dim(ctx, "intermediate_size (of the dense layers)", moe__dense_intermediate(c))))
        return st;
    return MOE_STATUS_OK;
}

static moe_status check_split(moe_context_t *ctx, const char *opt, int64_t by, const char *what, int64_t v) {
    if (v % by)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "--%s %lld does not divide %s (%lld)", opt, (long long)by,
                          what, (long long)v);
    return MOE_STATUS_OK;
}

moe_status moe__analysis_check_options(moe_context_t *ctx, const moe_model_config *c, const moe_shape_options *o) {
    NEED(o->batch >= 1 && o->batch <= MOE__ANALYSIS_TOKENS_MAX, "--batch: got %lld, expected 1..2^32",
         (long long)o->batch);
    NEED(o->seq >= 1 && o->seq <= MOE__ANALYSIS_TOKENS_MAX, "--seq: got %lld, expected 1..2^32", (long long)o->seq);
    NEED(o->context >= 0 && o->context <= MOE__ANALYSIS_TOKENS_MAX, "--context: got %lld, expected 0..2^32",
         (long long)o->context);
    NEED((unsigned)o->mode <= MOE_STEP_DECODE, "mode: got %d, expected train (0), prefill (1) or decode (2)",
         (int)o->mode);
    NEED(o->dtype == MOE_DTYPE_BF16 || o->dtype == MOE_DTYPE_E4M3, "dtype: got %s, expected bf16 or e4m3 (fp8)",
         moe_dtype_name(o->dtype));
    NEED(o->tp >= 1 && o->tp <= 4096, "--tp: got %lld, expected 1..4096", (long long)o->tp);
    NEED(o->ep >= 1 && o->ep <= 4096, "--ep: got %lld, expected 1..4096", (long long)o->ep);
    int64_t tokens; /* a decode step's tokens are the batch (seq is then its context) */
    NEED(o->mode == MOE_STEP_DECODE || (moe__mul64(o->batch, o->seq, &tokens) && tokens <= MOE__ANALYSIS_TOKENS_MAX),
         "--batch %lld x --seq %lld tokens: expected at most 2^32", (long long)o->batch, (long long)o->seq);

    moe_status st;
    int64_t tp = o->tp;
    if ((st = check_split(ctx, "tp", tp, "num_attention_heads", c->num_heads))) return st;
    if (c->kv_lora_rank == 0) {
        if (c->num_kv_heads >= tp) {
            if ((st = check_split(ctx, "tp", tp, "num_key_value_heads", c->num_kv_heads))) return st;
        } else if (tp % c->num_kv_heads) {
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "--tp %lld is neither a divisor nor a multiple of num_key_value_heads (%lld)",
                              (long long)tp, (long long)c->num_kv_heads);
        }
    }
    int has_dense = 0, has_moe = 0;
    for (int64_t l = 0; l < c->num_layers; l++) {
        has_moe |= moe__layer_is_moe(c, l);
        has_dense |= !moe__layer_is_moe(c, l);
    }
    if (has_dense && (st = check_split(ctx, "tp", tp, "the dense intermediate_size", moe__dense_intermediate(c))))
        return st;
    if (has_moe) {
        if ((st = check_split(ctx, "tp", tp, "the expert intermediate size", c->layer.intermediate))) return st;
        if (c->layer.num_shared_experts > 0 &&
            (st = check_split(ctx, "tp", tp, "the shared expert intermediate size", c->layer.shared_intermediate)))
            return st;
        if ((st = check_split(ctx, "ep", o->ep, "the number of routed experts", c->layer.num_experts))) return st;
    } else {
        NEED(o->ep == 1, "--ep %lld: the model has no routed experts to split", (long long)o->ep);
    }
    return MOE_STATUS_OK;
}
