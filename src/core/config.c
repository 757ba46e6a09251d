/* The config.json reader: a Hugging Face model config of any MoE family we know (or a dense
 * one) into a moe_model_config. This file is the one place that knows the field aliases of
 * the families; the built-in presets (presets.c) are config.json text read by it too.
 *
 * The aliases (REFERENCE.md section 5):
 *   routed experts   n_routed_experts | num_experts | num_local_experts   (absent or 0: dense)
 *   top-k            num_experts_per_tok | experts_per_token
 *   expert width     moe_intermediate_size | intermediate_size
 *   dense width      intermediate_size (when moe_intermediate_size exists) | intermediate_size_mlp
 *   MoE layers       first_k_dense_replace + moe_layer_freq (DeepSeek, GLM), decoder_sparse_step
 *                    + mlp_only_layers (Qwen), interleave_moe_layer_step or moe_layers (Llama-4)
 *   shared experts   n_shared_experts (x expert width) | shared_expert_intermediate_size (gated)
 *   MoE layers, too  mlp_layer_types ("dense" / "sparse"), which must agree with the rules above
 * Multimodal configs hold the text model under "text_config". Families whose routing or layers
 * this file does not model are refused (refuse_unread_family), not read with the defaults. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Same bound as the layer spec: far beyond any model, and keeps products inside int64. */
#define DIM_MAX (INT64_C(1) << 40)
/* Real config.json files are a few KiB; anything this big is not one. */
#define CONFIG_FILE_MAX ((size_t)64 << 20)

/* Fields are looked up in `first` (the text model's object), then in `second` (the other
 * level of a multimodal config, which holds e.g. torch_dtype or tie_word_embeddings). */
typedef struct reader {
    moe_context_t *ctx;
    const char *label; /* names the input in messages: "config.json" or the file's path */
    const cJSON *first, *second;
} reader;

/* The value of key, or NULL when absent or JSON null (configs write null for "not set"). */
static const cJSON *find(const reader *r, const char *key) {
    const cJSON *objects[2] = {r->first, r->second};
    for (int i = 0; i < 2; i++) {
        if (!objects[i]) continue;
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(objects[i], key);
        if (item && !cJSON_IsNull(item)) return item;
    }
    return NULL;
}

/* A short text for a JSON value, for messages. */
static const char *describe(const cJSON *item, char *buf, size_t size) {
    if (cJSON_IsNumber(item)) snprintf(buf, size, "%.15g", item->valuedouble);
    else if (cJSON_IsString(item)) snprintf(buf, size, "\"%.40s%s\"", item->valuestring,
                                            strlen(item->valuestring) > 40 ? "..." : "");
    else if (cJSON_IsBool(item)) snprintf(buf, size, "%s", cJSON_IsTrue(item) ? "true" : "false");
    else if (cJSON_IsArray(item)) snprintf(buf, size, "an array");
    else if (cJSON_IsObject(item)) snprintf(buf, size, "an object");
    else snprintf(buf, size, "null");
    return buf;
}

/* Checks that a JSON value is an integer in min..2^40 (JSON numbers are doubles: 2.5, -1 and
 * 1e30 are all numbers, none a size). */
static moe_status to_int(const reader *r, const char *key, const cJSON *item, int64_t min, int64_t *out) {
    char what[64];
    double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
    if (!isfinite(v) || v != floor(v) || v < (double)min || v > (double)DIM_MAX)
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %s, expected an integer in %lld..2^40",
                          r->label, key, describe(item, what, sizeof what), (long long)min);
    *out = (int64_t)v;
    return MOE_STATUS_OK;
}

/* An optional integer field: *out is left alone (the caller's default) when absent. */
static moe_status get_int(const reader *r, const char *key, int64_t min, int64_t *out, bool *present) {
    const cJSON *item = find(r, key);
    if (present) *present = item != NULL;
    return item ? to_int(r, key, item, min, out) : MOE_STATUS_OK;
}

static moe_status require_int(const reader *r, const char *key, int64_t min, const char *meaning, int64_t *out) {
    bool present;
    moe_status st = get_int(r, key, min, out, &present);
    if (st == MOE_STATUS_OK && !present)
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: missing %s (%s)", r->label, key, meaning);
    return st;
}

/* An optional finite number >= min. */
static moe_status get_number(const reader *r, const char *key, double min, double *out, bool *present) {
    const cJSON *item = find(r, key);
    if (present) *present = item != NULL;
    if (!item) return MOE_STATUS_OK;
    char what[64];
    /* The spec holds these as floats: a value below float's normal range (1e-50) would become 0
     * and be blamed on the spec field. */
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble < min ||
        item->valuedouble > 1e30)
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %s, expected a number in %g..1e30",
                          r->label, key, describe(item, what, sizeof what), min);
    if (item->valuedouble != 0 && fabs(item->valuedouble) < FLT_MIN)
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "%s: %s = %s is below fp32's normal range (%g), expected 0 or a larger value", r->label, key,
                          describe(item, what, sizeof what), (double)FLT_MIN);
    *out = item->valuedouble;
    return MOE_STATUS_OK;
}

static moe_status get_bool(const reader *r, const char *key, int32_t *out, bool *present) {
    const cJSON *item = find(r, key);
    if (present) *present = item != NULL;
    if (!item) return MOE_STATUS_OK;
    char what[64];
    if (!cJSON_IsBool(item))
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %s, expected true or false", r->label,
                          key, describe(item, what, sizeof what));
    *out = cJSON_IsTrue(item) ? 1 : 0;
    return MOE_STATUS_OK;
}

/* An optional string field; *out stays NULL when absent. */
static moe_status get_string(const reader *r, const char *key, const char **out) {
    const cJSON *item = find(r, key);
    *out = NULL;
    if (!item) return MOE_STATUS_OK;
    char what[64];
    if (!cJSON_IsString(item))
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %s, expected a string", r->label, key,
                          describe(item, what, sizeof what));
    *out = item->valuestring;
    return MOE_STATUS_OK;
}

/* The first of several alias keys that is present (NULL if none). */
static const char *first_key(const reader *r, const char *const *keys, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (find(r, keys[i])) return keys[i];
    return NULL;
}

static void copy_name(char *dst, const char *src) {
    snprintf(dst, MOE_NAME_MAX, "%s", src ? src : "");
}

/* Whether model_type `type` (NULL: none) is one of `types`. */
static bool type_in(const char *type, const char *const *types, size_t count) {
    for (size_t i = 0; type && i < count; i++)
        if (strcmp(type, types[i]) == 0) return true;
    return false;
}

/* Families whose routing the config does not spell out: DeepSeek-V3's descendants select with
 * sigmoid scores plus the e_score_correction_bias (topk_method noaux_tc) and renormalise by
 * default; GLM-4.5's configs carry no scoring_func or topk_method at all. transformers runs the
 * same router (DeepseekV3TopkRouter's code) for GLM-5 (glm_moe_dsa), dots.llm1, Solar-Open and
 * MiMo-V2-Flash, and runs Sarvam-30B, Param2-MoE (as Glm4Moe) and Sarvam-105B (sarvam_mla, as
 * DeepseekV3) with those models' code. */
static bool is_noaux_family(const char *type) {
    static const char *const types[] = {"deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe", "glm4_moe_lite",
                                        "glm4v_moe", "glm4v_moe_text", "glm_moe_dsa", "dots1", "solar_open",
                                        "sarvam_moe", "param2moe", "sarvam_mla", "mimo_v2_flash"};
    return type_in(type, types, sizeof types / sizeof types[0]);
}

/* MoE families whose routing or layer layout this reader does not model. Their configs look
 * like the ones it reads (an expert count, a top-k, a width), so reading them with the generic
 * defaults would give a layer other than the model's, silently: they are refused. By
 * model_type where the keys alone do not tell (Phi-3.5-MoE's sparsemixer weights and Jamba's
 * layers use Mixtral's keys), else by a key of their own. */
static moe_status refuse_unread_family(const reader *r, const char *family) {
    static const struct {
        const char *type, *why;
    } types[] = {
        {"phimoe", "Phi-3.5-MoE's sparsemixer routing weights"},
        {"jamba", "Jamba's every-other-layer experts (expert_layer_period)"},
        {"nemotron_h", "Nemotron-H's hybrid layers and ungated relu2 experts"},
        {"ernie4_5_moe", "ERNIE-4.5's moe_* keys and expert bias"},
        {"dbrx", "DBRX's ffn_config"},
        {"hunyuan_v1_moe", "Hunyuan's per-layer expert lists"},
        {"bailing_moe", "Ling's score_function and expert bias"},
        {"bailing_moe_v2", "Ling's score_function and expert bias"},
        {"granitemoeshared", "Granite's shared expert (shared_intermediate_size)"},
        {"granitemoehybrid", "Granite's shared expert (shared_intermediate_size)"},
        {"kimi_linear", "Kimi-Linear's moe_router_activation_func and shared experts"},
        /* Found by tools/hf_parity.py against transformers 5.25, which accepts these configs: */
        {"jetmoe", "JetMoE's output bias on the expert sum"},
        {"doge", "Doge's product-key retrieval experts"},
        {"zaya", "ZAYA's MLP router"},
        {"lfm2_moe", "LFM2-MoE's sigmoid routing with expert_bias and num_dense_layers"},
        {"kolibri1", "Kolibri's selection on logits plus e_score_correction_bias and ungated shared expert"},
        {"flint", "Flint's sigmoid top-k and ungated shared expert"},
        {"lara_mini", "Lara's ungated shared expert"},
        {"inkling_text", "Inkling's shared experts scored inside the router"},
        {"inkling_mm_model", "Inkling's shared experts scored inside the router"},
        {"inkling2", "Inkling-2's always-renormalised biased sigmoid routing"},
        {"inkling2_text", "Inkling-2's always-renormalised biased sigmoid routing"},
        {"inkling2_loop", "Inkling-2's always-renormalised biased sigmoid routing"},
        {"inkling2_loop_text", "Inkling-2's always-renormalised biased sigmoid routing"},
        {"muse_spark", "Muse-Spark's router output_multiplier and post-expert norm"},
        {"muse_spark_text", "Muse-Spark's router output_multiplier and post-expert norm"},
        {"openai_privacy_filter", "the privacy filter's clamped SwiGLU over concatenated gate/up"},
    };
    static const struct {
        const char *key, *family;
    } keys[] = {
        {"moe_num_experts", "ERNIE-4.5 or DBRX"}, {"moe_k", "ERNIE-4.5"},
        {"ffn_config", "DBRX"},                   {"hybrid_override_pattern", "Nemotron-H"},
        {"mlp_hidden_act", "Nemotron-H"},         {"moe_shared_expert_intermediate_size", "Nemotron-H"},
        {"shared_intermediate_size", "Granite"},  {"score_function", "Ling"},
        {"moe_router_enable_expert_bias", "Ling"}, {"num_shared_experts", "Ling or Kimi-Linear"},
        {"expert_layer_period", "Jamba"},         {"num_experts_per_token", "Kimi-Linear"},
        {"moe_router_activation_func", "Kimi-Linear"}, {"moe_topk", "Hunyuan"},
    };
    for (size_t i = 0; family && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(family, types[i].type) == 0)
            return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                              "%s: model_type \"%s\" is not supported (this reader does not model %s)", r->label,
                              family, types[i].why);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *item = find(r, keys[i].key); /* 0 or false: the feature is off (MiniMax-M2's 0) */
        if (item && !cJSON_IsFalse(item) && !(cJSON_IsNumber(item) && item->valuedouble == 0))
            return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                              "%s: %s is a key of %s's MoE configs, which this reader does not model (model_type "
                              "\"%s\")",
                              r->label, keys[i].key, keys[i].family, family ? family : "absent");
    }
    /* Multimodal wrappers other than text_config (Qwen3-Omni's thinker, DeepSeek-VL2's language
     * model) would otherwise end in "missing hidden_size". */
    static const char *const wrappers[] = {"thinker_config", "language_config", "llm_config"};
    for (size_t i = 0; i < sizeof wrappers / sizeof wrappers[0]; i++)
        if (!find(r, "hidden_size") && cJSON_IsObject(find(r, wrappers[i])))
            return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                              "%s: the text model sits under %s, which this reader does not open (it reads the "
                              "top level or text_config)",
                              r->label, wrappers[i]);
    return MOE_STATUS_OK;
}

static moe_status read_activation(const reader *r, moe_layer_spec *spec) {
    static const struct {
        const char *name;
        moe_activation act;
    } table[] = {
        {"silu", MOE_ACT_SWIGLU},      {"swish", MOE_ACT_SWIGLU},
        {"gelu", MOE_ACT_GEGLU},       {"gelu_pytorch_tanh", MOE_ACT_GEGLU_TANH},
        {"gelu_new", MOE_ACT_GEGLU_TANH}, {"relu", MOE_ACT_REGLU},
        {"relu2", MOE_ACT_RELU2},
    };
    const char *key = find(r, "hidden_act") ? "hidden_act" : "hidden_activation";
    const char *name = NULL;
    moe_status st = get_string(r, key, &name);
    if (st != MOE_STATUS_OK) return st;
    if (!name) return MOE_STATUS_OK; /* unsaid: SiLU, the default of every family here */
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(name, table[i].name) == 0) {
            spec->activation = table[i].act;
            return MOE_STATUS_OK;
        }
    return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                      "%s: %s = \"%.60s\" is not supported (known: silu, gelu, gelu_pytorch_tanh, gelu_new, relu, "
                      "relu2)",
                      r->label, key, name);
}

/* Which layers hold the MoE block; every rule the config states must agree. */
static moe_status read_layer_pattern(const reader *r, const char *family, moe_model_config *cfg) {
    int64_t n = cfg->num_layers;
    for (int64_t l = 0; l < n; l++) cfg->layer_is_moe[l] = (uint8_t)cfg->is_moe;
    if (!cfg->is_moe) return MOE_STATUS_OK;

    /* DeepSeek, GLM: layer l is MoE when l >= first_k_dense_replace and l % moe_layer_freq == 0. */
    int64_t first_dense = 0, freq = 1, sparse_step = 1, interleave = 1;
    moe_status st;
    if ((st = get_int(r, "first_k_dense_replace", 0, &first_dense, NULL)) != MOE_STATUS_OK) return st;
    if ((st = get_int(r, "moe_layer_freq", 1, &freq, NULL)) != MOE_STATUS_OK) return st;
    /* Qwen: MoE when (l + 1) % decoder_sparse_step == 0 and l is not in mlp_only_layers. */
    if ((st = get_int(r, "decoder_sparse_step", 1, &sparse_step, NULL)) != MOE_STATUS_OK) return st;
    /* Llama-4: MoE every interleave_moe_layer_step layers, the last of each step. */
    if ((st = get_int(r, "interleave_moe_layer_step", 1, &interleave, NULL)) != MOE_STATUS_OK) return st;
    for (int64_t l = 0; l < n; l++) {
        bool moe = l >= first_dense && l % freq == 0 && (l + 1) % sparse_step == 0 && (l + 1) % interleave == 0;
        cfg->layer_is_moe[l] = moe ? 1 : 0;
    }

    /* Lists of layer indices: moe_layers (Llama-4: the MoE ones, replacing the interleave
     * rule when given), then mlp_only_layers (Qwen: dense whatever the step says). */
    const char *lists[] = {"moe_layers", "mlp_only_layers"};
    for (int which = 0; which < 2; which++) {
        const cJSON *list = find(r, lists[which]);
        if (!list) continue;
        char what[64];
        if (!cJSON_IsArray(list))
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %s, expected an array of layer indices",
                              r->label, lists[which], describe(list, what, sizeof what));
        bool is_moe_list = which == 0;
        if (is_moe_list)
            for (int64_t l = 0; l < n; l++) cfg->layer_is_moe[l] = 0;
        const cJSON *item;
        cJSON_ArrayForEach(item, list) {
            int64_t layer = 0;
            if ((st = to_int(r, lists[which], item, 0, &layer)) != MOE_STATUS_OK) return st;
            if (layer >= n)
                return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                                  "%s: %s holds layer %lld, expected 0..%lld (num_hidden_layers = %lld)", r->label,
                                  lists[which], (long long)layer, (long long)(n - 1), (long long)n);
            cfg->layer_is_moe[layer] = is_moe_list ? 1 : 0;
        }
    }
    /* transformers' per-layer list ("dense" / "sparse"; GLM-4.7-Flash) must say the same as the
     * rules above where the config states any. Where it states none, the list alone decides for
     * the families whose router this reader knows by model_type (transformers 5 writes only
     * mlp_layer_types for glm4_moe_lite); for any other family such a config stays refused, since
     * transformers writes it for families (MiniCPM5-MoE, Step-3.5, ...) whose routing the generic
     * defaults here would get wrong. */
    static const char *const rule_keys[] = {"first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step",
                                            "interleave_moe_layer_step", "moe_layers", "mlp_only_layers"};
    const bool must_agree =
        first_key(r, rule_keys, sizeof rule_keys / sizeof rule_keys[0]) != NULL || !is_noaux_family(family);
    const cJSON *types = find(r, "mlp_layer_types");
    if (types) {
        char what[64];
        if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != n)
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: mlp_layer_types = %s, expected an array of num_hidden_layers (%lld) \"dense\" / "
                              "\"sparse\" strings",
                              r->label, describe(types, what, sizeof what), (long long)n);
        int64_t l = 0;
        const cJSON *item;
        cJSON_ArrayForEach(item, types) {
            const char *t = cJSON_IsString(item) ? item->valuestring : "";
            if (strcmp(t, "dense") != 0 && strcmp(t, "sparse") != 0)
                return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                                  "%s: mlp_layer_types[%lld] = %s, expected \"dense\" or \"sparse\"", r->label,
                                  (long long)l, describe(item, what, sizeof what));
            if (!must_agree) cfg->layer_is_moe[l] = strcmp(t, "sparse") == 0 ? 1 : 0;
            if ((strcmp(t, "sparse") == 0) != (cfg->layer_is_moe[l] != 0))
                return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                                  "%s: mlp_layer_types[%lld] = \"%s\", but the config's other layer rules make layer "
                                  "%lld %s",
                                  r->label, (long long)l, t, (long long)l, cfg->layer_is_moe[l] ? "MoE" : "dense");
            l++;
        }
    }
    cfg->num_moe_layers = 0;
    for (int64_t l = 0; l < n; l++) cfg->num_moe_layers += cfg->layer_is_moe[l];
    return MOE_STATUS_OK;
}

/* Qwen families that renormalise without saying so: Qwen3-Next's config defaults
 * norm_topk_prob to true; Qwen3-VL-MoE's and Qwen3.5-MoE's router always renormalises (their
 * configs dropped the key). */
static bool renormalizes_by_default(const char *type) {
    static const char *const types[] = {"qwen3_next", "qwen3_vl_moe", "qwen3_vl_moe_text", "qwen3_5_moe",
                                        "qwen3_5_moe_text"};
    return type_in(type, types, sizeof types / sizeof types[0]);
}

/* Routing, shared experts and the activation variant of a MoE config. */
static moe_status read_routing(const reader *r, const char *type, const char *experts_key, moe_layer_spec *spec) {
    bool llama4 = type && strncmp(type, "llama4", 6) == 0;
    bool gpt_oss = type && strcmp(type, "gpt_oss") == 0;
    bool noaux = is_noaux_family(type);
    bool minimax_m2 = type && strcmp(type, "minimax_m2") == 0;
    moe_status st;

    /* Score function. */
    const char *scoring = NULL;
    if ((st = get_string(r, "scoring_func", &scoring)) != MOE_STATUS_OK) return st;
    if (!scoring) scoring = (noaux || llama4 || minimax_m2) ? "sigmoid" : "softmax";
    if (strcmp(scoring, "softmax") == 0) spec->score = MOE_SCORE_SOFTMAX;
    else if (strcmp(scoring, "sigmoid") == 0) spec->score = MOE_SCORE_SIGMOID;
    else if (strcmp(scoring, "sqrtsoftplus") == 0) spec->score = MOE_SCORE_SQRTSOFTPLUS;
    else
        return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                          "%s: scoring_func = \"%.60s\" is not supported (known: softmax, sigmoid, sqrtsoftplus)",
                          r->label, scoring);

    /* Selection: noaux_tc adds e_score_correction_bias for selection only; greedy ignores
     * the groups; group_limited_greedy uses them with a group's best score. */
    const char *method = NULL;
    if ((st = get_string(r, "topk_method", &method)) != MOE_STATUS_OK) return st;
    if (!method) method = noaux ? "noaux_tc" : "group_limited_greedy";
    bool grouped = true;
    if (strcmp(method, "noaux_tc") == 0) spec->use_correction_bias = 1;
    else if (strcmp(method, "greedy") == 0) grouped = false;
    else if (strcmp(method, "group_limited_greedy") != 0)
        return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                          "%s: topk_method = \"%.60s\" is not supported (known: noaux_tc, greedy, group_limited_greedy)",
                          r->label, method);

    /* MiniMax-M2 says use_routing_bias: its router selects on sigmoid + e_score_correction_bias,
     * as noaux_tc does, without groups. transformers' MiniMaxM2Config has neither key (its router
     * always does that), so a config it writes says nothing: the family decides. */
    int32_t routing_bias = minimax_m2;
    if ((st = get_bool(r, "use_routing_bias", &routing_bias, NULL)) != MOE_STATUS_OK) return st;
    if (routing_bias) spec->use_correction_bias = 1;

    int64_t n_group = 0, topk_group = 0;
    bool has_topk_group;
    if ((st = get_int(r, "n_group", 0, &n_group, NULL)) != MOE_STATUS_OK) return st;
    if ((st = get_int(r, "topk_group", 0, &topk_group, &has_topk_group)) != MOE_STATUS_OK) return st;
    if (grouped && n_group > 1) {
        /* Mistral-4 / Mistral-Large-3 rank groups by the sum of their two best softmax scores;
         * the spec sums two only with a correction bias. */
        if (type && (strcmp(type, "mistral4") == 0 || strncmp(type, "mistral_large4", 14) == 0) &&
            !spec->use_correction_bias)
            return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                              "%s: n_group = %lld: model_type \"%s\" ranks expert groups by the sum of their two "
                              "best softmax scores, which the layer spec does not model (n_group 1 is supported)",
                              r->label, (long long)n_group, type);
        if (spec->num_experts % n_group != 0)
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: n_group = %lld does not divide %s = %lld",
                              r->label, (long long)n_group, experts_key, (long long)spec->num_experts);
        if (!has_topk_group)
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: missing topk_group (n_group = %lld)",
                              r->label, (long long)n_group);
        if (topk_group < 1 || topk_group > n_group)
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: topk_group = %lld, expected 1..n_group (%lld)",
                              r->label, (long long)topk_group, (long long)n_group);
        int64_t eligible = topk_group * (spec->num_experts / n_group);
        if (spec->top_k > eligible)
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: num_experts_per_tok = %lld exceeds the %lld experts in topk_group = %lld of "
                              "n_group = %lld groups",
                              r->label, (long long)spec->top_k, (long long)eligible, (long long)topk_group,
                              (long long)n_group);
        spec->n_group = n_group;
        spec->topk_group = topk_group;
    } else {
        /* One group (or none) is no grouping. */
        spec->n_group = grouped && n_group == 1 ? 1 : 0;
        spec->topk_group = spec->n_group;
    }

    /* Renormalisation. Mixtral renormalises its top-k softmax weights (it has no key for it);
     * GPT-OSS takes a softmax over the selected logits, which is the same thing. norm_topk_prob
     * holds at every top_k, top-1 included, as transformers' DeepSeek/GLM routers and vLLM's
     * grouped_topk apply it (DeepSeek's own remote code skips it at top-1; no released model of
     * theirs is top-1, and tools/hf_parity.py compares with transformers). */
    int32_t norm = noaux || strcmp(experts_key, "num_local_experts") == 0 || renormalizes_by_default(type);
    if ((st = get_bool(r, "norm_topk_prob", &norm, NULL)) != MOE_STATUS_OK) return st;
    spec->renormalize = norm;

    double scale = 1.0;
    if ((st = get_number(r, "routed_scaling_factor", 0.0, &scale, NULL)) != MOE_STATUS_OK) return st;
    if (!(scale > 0.0))
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: routed_scaling_factor = %g, expected > 0", r->label,
                          scale);
    spec->routed_scale = (float)scale;

    /* Shared experts. */
    int64_t n_shared = 0, shared_width = 0;
    if ((st = get_int(r, "n_shared_experts", 0, &n_shared, NULL)) != MOE_STATUS_OK) return st;
    if ((st = get_int(r, "shared_expert_intermediate_size", 0, &shared_width, NULL)) != MOE_STATUS_OK) return st;
    if (n_shared > 0) {
        /* DeepSeek's shared experts are one MLP n_shared times as wide as a routed expert. */
        int64_t width;
        if (!moe__mul64(n_shared, spec->intermediate, &width) || width > DIM_MAX)
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: n_shared_experts = %lld times the expert width %lld exceeds 2^40", r->label,
                              (long long)n_shared, (long long)spec->intermediate);
        spec->num_shared_experts = n_shared;
        spec->shared_intermediate = width;
    } else if (shared_width > 0) {
        /* Qwen2-MoE / Qwen3-Next: one shared expert behind a per-token sigmoid gate. */
        spec->num_shared_experts = 1;
        spec->shared_intermediate = shared_width;
        spec->shared_gate = 1;
    }

    if (llama4) {
        /* Llama-4: top-1 by sigmoid of the logit, weight applied to the expert's input, and
         * one shared expert as wide as a routed one. */
        if (spec->top_k != 1)
            return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                              "%s: num_experts_per_tok = %lld: llama4 applies the routing weight to the expert "
                              "input, which is defined for top-1 only",
                              r->label, (long long)spec->top_k);
        spec->score = MOE_SCORE_SIGMOID;
        spec->renormalize = 0;
        spec->weight_on_input = 1;
        spec->num_shared_experts = 1;
        spec->shared_intermediate = spec->intermediate;
        spec->shared_gate = 0;
    }
    if (gpt_oss) {
        /* transformers' GptOssConfig has swiglu_alpha (1.702 unless said) beside swiglu_limit. */
        double alpha = 1.702;
        if ((st = get_number(r, "swiglu_alpha", 0.0, &alpha, NULL)) != MOE_STATUS_OK) return st;
        spec->activation = MOE_ACT_SWIGLU_OAI;
        spec->act_alpha = (float)alpha;
        spec->act_limit = 7.0f;
        spec->expert_has_bias = 1;
        spec->router_has_bias = 1;
        spec->renormalize = 1;
    }
    return MOE_STATUS_OK;
}

static moe_status read_dtype(const reader *r, moe_dtype *out) {
    const char *key = find(r, "torch_dtype") ? "torch_dtype" : "dtype";
    const char *name = NULL;
    moe_status st = get_string(r, key, &name);
    if (st != MOE_STATUS_OK) return st;
    *out = MOE_DTYPE_BF16;
    if (!name || strcmp(name, "bfloat16") == 0) return MOE_STATUS_OK;
    if (strcmp(name, "float16") == 0) *out = MOE_DTYPE_F16;
    else if (strcmp(name, "float32") == 0) *out = MOE_DTYPE_F32;
    else
        return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                          "%s: %s = \"%.60s\" is not supported (known: bfloat16, float16, float32)", r->label, key, name);
    return MOE_STATUS_OK;
}

static moe_status read_attention(const reader *r, moe_model_config *cfg) {
    moe_status st;
    bool has_heads, has_kv, has_head_dim;
    if ((st = get_int(r, "num_attention_heads", 1, &cfg->num_heads, &has_heads)) != MOE_STATUS_OK) return st;
    if ((st = get_int(r, "num_key_value_heads", 1, &cfg->num_kv_heads, &has_kv)) != MOE_STATUS_OK) return st;
    if (!has_kv) cfg->num_kv_heads = cfg->num_heads;
    if ((st = get_int(r, "head_dim", 1, &cfg->head_dim, &has_head_dim)) != MOE_STATUS_OK) return st;
    if (!has_head_dim && has_heads) cfg->head_dim = cfg->layer.hidden / cfg->num_heads;
    if ((st = get_int(r, "vocab_size", 1, &cfg->vocab_size, NULL)) != MOE_STATUS_OK) return st;
    if ((st = get_bool(r, "tie_word_embeddings", &cfg->tie_word_embeddings, NULL)) != MOE_STATUS_OK) return st;
    /* Multi-head latent attention; q_lora_rank is null in DeepSeek-V2-Lite (no query LoRA). */
    struct {
        const char *key;
        int64_t *field;
    } mla[] = {{"q_lora_rank", &cfg->q_lora_rank},
               {"kv_lora_rank", &cfg->kv_lora_rank},
               {"qk_nope_head_dim", &cfg->qk_nope_head_dim},
               {"qk_rope_head_dim", &cfg->qk_rope_head_dim},
               {"v_head_dim", &cfg->v_head_dim}};
    for (size_t i = 0; i < sizeof mla / sizeof mla[0]; i++)
        if ((st = get_int(r, mla[i].key, 0, mla[i].field, NULL)) != MOE_STATUS_OK) return st;
    return MOE_STATUS_OK;
}

/* Which layers attend a bounded span (moe_model_config.attention_window). transformers' rules:
 * layer_types when given; else GPT-OSS alternates sliding (even layers) and full; Llama-4 chunks
 * the layers that use RoPE (no_rope_layers[l] = 1; an empty list means 3 of every 4, the last of
 * each no_rope_layer_interval being full); Qwen's use_sliding_window windows layers from
 * max_window_layers on; Mistral and Mixtral window every layer when sliding_window is set. */
static moe_status read_attention_span(const reader *r, const char *family, moe_model_config *cfg) {
    moe_status st;
    if (!family) family = ""; /* no model_type */
    int64_t n = cfg->num_layers, window = 0, chunk = 0;
    bool has_window, has_chunk;
    /* transformers writes "sliding_window": 0 beside use_sliding_window false (Qwen2-MoE): no window */
    if ((st = get_int(r, "sliding_window", 0, &window, &has_window)) != MOE_STATUS_OK) return st;
    has_window = has_window && window > 0;
    if ((st = get_int(r, "attention_chunk_size", 1, &chunk, &has_chunk)) != MOE_STATUS_OK) return st;
    cfg->attention_window = 0;
    memset(cfg->layer_is_windowed, 0, sizeof cfg->layer_is_windowed);
    char what[64];
    const cJSON *types = find(r, "layer_types");
    if (types) {
        if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != n)
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: layer_types = %s, expected an array of num_hidden_layers = %lld strings", r->label,
                              describe(types, what, sizeof what), (long long)n);
        bool sliding = false, chunked = false;
        for (int64_t l = 0; l < n; l++) {
            const cJSON *item = cJSON_GetArrayItem(types, (int)l);
            if (!cJSON_IsString(item))
                return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: layer_types[%lld] = %s, expected a string",
                                  r->label, (long long)l, describe(item, what, sizeof what));
            bool s = strcmp(item->valuestring, "sliding_attention") == 0;
            bool c = strcmp(item->valuestring, "chunked_attention") == 0;
            sliding |= s, chunked |= c;
            cfg->layer_is_windowed[l] = (uint8_t)(s || c);
        }
        if ((sliding && !has_window) || (chunked && !has_chunk))
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: layer_types has %s layers but no %s", r->label,
                              sliding ? "sliding_attention" : "chunked_attention",
                              sliding ? "sliding_window" : "attention_chunk_size");
        if (sliding && chunked && window != chunk)
            return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                              "%s: layer_types mixes sliding (sliding_window = %lld) and chunked (attention_chunk_size = "
                              "%lld) layers; one span per model is modelled",
                              r->label, (long long)window, (long long)chunk);
        cfg->attention_window = sliding ? window : chunked ? chunk : 0;
    } else if (strcmp(family, "gpt_oss") == 0 && has_window) {
        for (int64_t l = 0; l < n; l++) cfg->layer_is_windowed[l] = l % 2 == 0;
        cfg->attention_window = window;
    } else if (strncmp(family, "llama4", 6) == 0 && has_chunk) {
        int64_t interval = 4;
        if ((st = get_int(r, "no_rope_layer_interval", 1, &interval, NULL)) != MOE_STATUS_OK) return st;
        const cJSON *rope = find(r, "no_rope_layers");
        int count = rope && cJSON_IsArray(rope) ? cJSON_GetArraySize(rope) : 0;
        if (rope && (!cJSON_IsArray(rope) || (count != 0 && count != n)))
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: no_rope_layers = %s, expected an empty array or num_hidden_layers = %lld flags",
                              r->label, describe(rope, what, sizeof what), (long long)n);
        for (int64_t l = 0; l < n; l++) {
            int64_t uses_rope = (l + 1) % interval != 0;
            if (count) {
                const cJSON *item = cJSON_GetArrayItem(rope, (int)l);
                if ((st = to_int(r, "no_rope_layers[]", item, 0, &uses_rope)) != MOE_STATUS_OK) return st;
            }
            cfg->layer_is_windowed[l] = uses_rope != 0;
        }
        cfg->attention_window = chunk;
    } else if (has_window) {
        int32_t use = 0;
        bool has_use;
        if ((st = get_bool(r, "use_sliding_window", &use, &has_use)) != MOE_STATUS_OK) return st;
        bool mistral = strcmp(family, "mistral") == 0 || strcmp(family, "mixtral") == 0;
        if (has_use ? use : mistral) {
            int64_t from = 0;
            if (has_use && (st = get_int(r, "max_window_layers", 0, &from, NULL)) != MOE_STATUS_OK) return st;
            for (int64_t l = from; l < n; l++) cfg->layer_is_windowed[l] = 1;
            cfg->attention_window = window;
        }
    }
    bool any = false; /* a span only where some layer has one */
    for (int64_t l = 0; l < n; l++) any |= cfg->layer_is_windowed[l] != 0;
    if (!any) cfg->attention_window = 0;
    return MOE_STATUS_OK;
}

/* Fills cfg from the parsed root object. */
static moe_status read_config(moe_context_t *ctx, const char *label, const cJSON *root, moe_model_config *cfg) {
    reader r = {ctx, label, root, NULL};
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (!cJSON_GetObjectItemCaseSensitive(root, "hidden_size") && cJSON_IsObject(text)) {
        r.first = text;
        r.second = root;
    }
    moe_status st;

    /* model_type of the whole file names it; the text model's may say more (llama4_text). */
    const char *type = NULL, *text_type = NULL;
    reader top = {ctx, label, root, NULL};
    if ((st = get_string(&top, "model_type", &type)) != MOE_STATUS_OK) return st;
    if ((st = get_string(&r, "model_type", &text_type)) != MOE_STATUS_OK) return st;
    if (!type) type = text_type;
    copy_name(cfg->model_type, type);
    copy_name(cfg->name, type);
    /* Family rules go by the text model's type when it has one, else the file's. */
    const char *family = text_type ? text_type : type;
    if ((st = refuse_unread_family(&r, family)) != MOE_STATUS_OK) return st;

    int64_t hidden = 0, layers = 0;
    if ((st = require_int(&r, "hidden_size", 1, "the model width", &hidden)) != MOE_STATUS_OK) return st;
    if ((st = require_int(&r, "num_hidden_layers", 1, "the number of layers", &layers)) != MOE_STATUS_OK) return st;
    if (layers > MOE_MAX_LAYERS)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "%s: num_hidden_layers = %lld, at most %d supported", label,
                          (long long)layers, MOE_MAX_LAYERS);
    cfg->num_layers = layers;

    static const char *const expert_keys[] = {"n_routed_experts", "num_experts", "num_local_experts"};
    const char *experts_key = first_key(&r, expert_keys, 3);
    int64_t experts = 0;
    if (experts_key && (st = get_int(&r, experts_key, 0, &experts, NULL)) != MOE_STATUS_OK) return st;
    cfg->is_moe = experts > 0;

    /* Widths: a separate moe_intermediate_size makes intermediate_size the dense MLP's. */
    int64_t expert_width = 0, dense_width = 0, width_mlp = 0;
    bool has_moe_width, has_width, has_width_mlp;
    if ((st = get_int(&r, "moe_intermediate_size", 1, &expert_width, &has_moe_width)) != MOE_STATUS_OK) return st;
    if ((st = get_int(&r, "intermediate_size", 1, &dense_width, &has_width)) != MOE_STATUS_OK) return st;
    if ((st = get_int(&r, "intermediate_size_mlp", 1, &width_mlp, &has_width_mlp)) != MOE_STATUS_OK) return st;

    int64_t top_k = 1;
    if (cfg->is_moe) {
        if (!has_moe_width) {
            if (!has_width)
                return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                                  "%s: missing moe_intermediate_size (or intermediate_size), the expert width", label);
            expert_width = dense_width;
            dense_width = 0; /* Mixtral, GPT-OSS, Llama-4: intermediate_size is the experts' */
        }
        if (has_width_mlp) dense_width = width_mlp;
        static const char *const k_keys[] = {"num_experts_per_tok", "experts_per_token"};
        const char *k_key = first_key(&r, k_keys, 2);
        if (!k_key)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: missing num_experts_per_tok (experts per token; the config has %s = %lld)", label,
                              experts_key, (long long)experts);
        if ((st = get_int(&r, k_key, 1, &top_k, NULL)) != MOE_STATUS_OK) return st;
        if (top_k > experts)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %lld exceeds %s = %lld", label, k_key,
                              (long long)top_k, experts_key, (long long)experts);
    } else {
        /* A dense model is one expert as wide as its MLP, top-1, weight 1. */
        if (!has_width)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: missing intermediate_size (a dense model's MLP width; no expert count found either)",
                              label);
        expert_width = dense_width;
        experts = 1;
    }
    cfg->dense_intermediate = dense_width;

    moe_layer_spec *spec = &cfg->layer;
    moe_layer_spec_init(spec, experts, hidden, expert_width, top_k);
    if ((st = read_activation(&r, spec)) != MOE_STATUS_OK) return st;
    /* DeepSeek-V4 clamps its SwiGLU; GPT-OSS's limit is set with its activation below. */
    double limit = 0.0;
    if ((st = get_number(&r, "swiglu_limit", 0.0, &limit, NULL)) != MOE_STATUS_OK) return st;
    spec->act_limit = (float)limit;
    if (cfg->is_moe && (st = read_routing(&r, family, experts_key, spec)) != MOE_STATUS_OK) return st;
    if (limit > 0.0) spec->act_limit = (float)limit;

    if ((st = read_layer_pattern(&r, family, cfg)) != MOE_STATUS_OK) return st;
    if (cfg->num_moe_layers < cfg->num_layers && cfg->dense_intermediate == 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "%s: %lld of %lld layers are dense but the config gives no dense MLP width "
                          "(intermediate_size)",
                          label, (long long)(cfg->num_layers - cfg->num_moe_layers), (long long)cfg->num_layers);

    if ((st = read_attention(&r, cfg)) != MOE_STATUS_OK) return st;
    if ((st = read_attention_span(&r, family, cfg)) != MOE_STATUS_OK) return st;
    return read_dtype(&r, &cfg->torch_dtype);
}

/* A key twice in the root or in text_config (the objects the reader looks into): cJSON finds
 * the first, Python's json (which transformers uses) keeps the last, so either reading could be
 * the wrong one. */
static moe_status refuse_duplicate_keys(moe_context_t *ctx, const char *label, const cJSON *root) {
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    const char *key = moe__json_repeated_key(root), *where = "";
    if (!key && cJSON_IsObject(text)) key = moe__json_repeated_key(text), where = " in text_config";
    if (key) return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: key \"%.60s\"%s appears twice", label, key, where);
    return MOE_STATUS_OK;
}

/* Parses `len` bytes with `label` naming the input in messages. */
static moe_status parse_labelled(moe_context_t *ctx, const char *label, const char *json, size_t len,
                                 moe_model_config *out) {
    size_t start = 0;
    if (len >= 3 && memcmp(json, "\xEF\xBB\xBF", 3) == 0) start = 3; /* a UTF-8 byte order mark */
    /* Raw control bytes are invalid JSON (cJSON would skip them as spaces), as the checkpoint
     * reader refuses them. */
    const int64_t control = moe__json_control_byte(json + start, len - start);
    if (control >= 0)
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: a raw control byte 0x%02x at byte %zu", label,
                          (unsigned char)json[start + (size_t)control], start + (size_t)control);
    size_t first = start;
    while (first < len && moe__json_space(json[first])) first++;
    if (first >= len)
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: empty input, expected a JSON object", label);

    /* cJSON gets a NUL-terminated copy: it then never reads past our bytes, whatever the
     * length handling of the installed version. */
    char *text = malloc(len - start + 1);
    if (!text) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory copying %zu bytes", label, len);
    memcpy(text, json + start, len - start);
    text[len - start] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len - start, &end, 0);
    size_t stop = end ? (size_t)(end - text) : 0;
    if (root) {
        /* Trailing bytes after the value: cJSON stops at the end of the value. */
        while (stop < len - start && moe__json_space(text[stop])) stop++;
        if (stop < len - start) {
            cJSON_Delete(root);
            root = NULL;
        }
    }
    if (!root) {
        /* cJSON's offset can be one past the offending byte: show a little before it. */
        size_t offset = start + stop;
        char near[32];
        size_t n = 0;
        for (size_t i = offset > 10 ? offset - 10 : 0; i < len && n < 20; i++)
            near[n++] = (json[i] >= 0x20 && json[i] < 0x7f) ? json[i] : '?';
        near[n] = '\0';
        free(text);
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: malformed JSON at byte %zu of %zu (near `%s`)", label,
                          offset, len, near);
    }
    free(text);

    moe_status st;
    if (!cJSON_IsObject(root)) {
        char what[64];
        st = moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: the JSON root is %s, expected an object", label,
                        describe(root, what, sizeof what));
    } else if ((st = refuse_duplicate_keys(ctx, label, root)) == MOE_STATUS_OK) {
        moe_model_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.torch_dtype = MOE_DTYPE_BF16;
        st = read_config(ctx, label, root, &cfg);
        if (st == MOE_STATUS_OK) {
            st = moe_layer_spec_validate(ctx, &cfg.layer);
            if (st == MOE_STATUS_OK) *out = cfg;
        }
    }
    cJSON_Delete(root);
    return st;
}

moe_status moe_config_parse(moe_context_t *ctx, const char *json, size_t len, moe_model_config *out) {
    moe__clear_error(ctx);
    if (!json) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_config_parse: json is NULL");
    if (!out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_config_parse: out is NULL");
    return parse_labelled(ctx, "config.json", json, len, out);
}

/* Reads a whole file (at most CONFIG_FILE_MAX bytes) into a malloc'd buffer. */
static moe_status read_file(moe_context_t *ctx, const char *path, char **data, size_t *size) {
    /* Opened without blocking: a FIFO with no writer (fopen would wait for one forever) then
     * reads as empty. Reads block again after the open, so a pipe with a writer (--config
     * <(...)) is read to its end. */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: cannot open: %s", path, strerror(errno));
    int flags = fcntl(fd, F_GETFL);
    FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        int saved = errno;
        close(fd);
        return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: cannot open: %s", path, strerror(saved));
    }
    size_t cap = 16384, used = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    for (;;) {
        if (used == cap) {
            if (cap >= CONFIG_FILE_MAX) {
                free(buf);
                fclose(f);
                return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: larger than %zu MiB, not a config.json", path,
                                  CONFIG_FILE_MAX >> 20);
            }
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                fclose(f);
                return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + used, 1, cap - used, f);
        used += got;
        if (got == 0) break;
    }
    int failed = ferror(f);
    int saved = errno;
    fclose(f);
    if (failed) {
        free(buf);
        return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: read failed: %s", path, strerror(saved));
    }
    *data = buf;
    *size = used;
    return MOE_STATUS_OK;
}

moe_status moe_config_load(moe_context_t *ctx, const char *path, moe_model_config *out) {
    moe__clear_error(ctx);
    if (!path) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_config_load: path is NULL");
    if (!out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_config_load: out is NULL");
    struct stat info;
    if (stat(path, &info) != 0)
        return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: cannot open: %s", path, strerror(errno));

    /* A model directory: its config.json. */
    char *joined = NULL;
    const char *file = path;
    if (S_ISDIR(info.st_mode)) {
        size_t n = strlen(path);
        joined = malloc(n + sizeof "/config.json");
        if (!joined) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "moe_config_load: out of memory");
        snprintf(joined, n + sizeof "/config.json", "%s%sconfig.json", path,
                 n > 0 && path[n - 1] == '/' ? "" : "/");
        file = joined;
        if (stat(file, &info) == 0 && S_ISDIR(info.st_mode)) {
            moe_status st = moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: is a directory, expected a file", file);
            free(joined);
            return st;
        }
    }
    char *data = NULL;
    size_t size = 0;
    moe_status st = read_file(ctx, file, &data, &size);
    if (st == MOE_STATUS_OK) {
        st = parse_labelled(ctx, file, data, size, out);
        free(data);
    }
    free(joined);
    return st;
}
