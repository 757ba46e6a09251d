/* The config.json reader: a Hugging Face model config of any MoE family we know (or a dense
 * one) into a moe_model_config. This file knows the field aliases; config_family.c what each
 * family means where its config is silent, and which it refuses; config_reader.h holds the
 * lookup both use. The built-in presets (presets.c) are config.json text read here too.
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
 * this reader does not model are refused (config_family.c), not read with the defaults. */
#include "config_reader.h"

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

/* Real config.json files are a few KiB; anything this big is not one. */
#define CONFIG_FILE_MAX ((size_t)64 << 20)

static void copy_name(char *dst, const char *src) {
    snprintf(dst, MOE_NAME_MAX, "%s", src ? src : "");
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

/* transformers' layer rule for the families whose config builds mlp_layer_types itself: given,
 * mlp_layer_types alone decides (transformers reads nothing else then); absent, the config's
 * legacy keys that transformers reads for that family, with its defaults: the first `dense`
 * layers dense (first_k_dense_replace where it reads that key), moe_layer_freq where it reads it
 * (dots3-note: also a per-layer list), Step-3.5's moe_layers_enum (the MoE layers' indices),
 * DeepSeek-V4: every layer MoE ("moe"; hash_moe layers are refused in moe__cfg_refuse_unread_variant). */
enum { LEGACY_FIRST = 1, LEGACY_FREQ = 2, LEGACY_FREQ_LIST = 4, LEGACY_ENUM = 8, ALL_MOE = 16 };
static const struct layer_rule {
    const char *type;
    int dense, legacy;
} layer_rules[] = {
    {"axk2", 1, LEGACY_FIRST | LEGACY_FREQ},
    {"minicpm5_moe", 1, LEGACY_FIRST},
    {"unlimited_ocr", 1, LEGACY_FIRST},
    {"unlimited_ocr_text", 1, LEGACY_FIRST},
    {"dots3_note", 1, LEGACY_FIRST | LEGACY_FREQ | LEGACY_FREQ_LIST},
    {"dots3_note_text", 1, LEGACY_FIRST | LEGACY_FREQ | LEGACY_FREQ_LIST},
    {"beam", 3, 0},
    {"laguna", 1, 0},
    {"glm5_next", 3, 0},
    {"glm5_next_text", 3, 0},
    {"step3p5", 3, LEGACY_ENUM},
    {"step3p7", 3, LEGACY_ENUM},
    {"deepseek_v4", 0, ALL_MOE},
};

static const struct layer_rule *find_layer_rule(const char *family) {
    for (size_t i = 0; family && i < sizeof layer_rules / sizeof layer_rules[0]; i++)
        if (strcmp(family, layer_rules[i].type) == 0) return &layer_rules[i];
    return NULL;
}

static moe_status read_family_layers(const reader *r, const struct layer_rule *rule, moe_model_config *cfg) {
    const int64_t n = cfg->num_layers;
    char what[64];
    moe_status st;
    const cJSON *types = find(r, "mlp_layer_types");
    if (types) {
        /* Step-3.5's released configs add num_nextn_predict_layers MTP entries, which transformers
         * cuts off. */
        int64_t extra = 0;
        if ((rule->legacy & LEGACY_ENUM) &&
            (st = get_int(r, "num_nextn_predict_layers", 0, &extra, NULL)) != MOE_STATUS_OK)
            return st;
        const int count = cJSON_IsArray(types) ? cJSON_GetArraySize(types) : -1;
        const bool all_moe = (rule->legacy & ALL_MOE) != 0;
        const char *sparse = all_moe ? "moe" : "sparse", *dense = all_moe ? NULL : "dense";
        if (count != n && (extra == 0 || count != n + extra))
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: mlp_layer_types = %s, expected an array of num_hidden_layers (%lld) \"%s\"%s%s%s "
                              "strings",
                              r->label, describe(types, what, sizeof what), (long long)n, sparse,
                              dense ? " / \"" : "", dense ? dense : "", dense ? "\"" : "");
        for (int64_t l = 0; l < n; l++) {
            const cJSON *item = cJSON_GetArrayItem(types, (int)l);
            const char *t = cJSON_IsString(item) ? item->valuestring : "";
            bool is_sparse = strcmp(t, sparse) == 0;
            if (!is_sparse && !(dense && strcmp(t, dense) == 0))
                return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                                  "%s: mlp_layer_types[%lld] = %s, expected \"%s\"%s%s%s", r->label, (long long)l,
                                  describe(item, what, sizeof what), sparse, dense ? " or \"" : "", dense ? dense : "",
                                  dense ? "\"" : "");
            cfg->layer_is_moe[l] = is_sparse ? 1 : 0;
        }
    } else if (rule->legacy & ALL_MOE) {
        for (int64_t l = 0; l < n; l++) cfg->layer_is_moe[l] = 1;
    } else if ((rule->legacy & LEGACY_ENUM) && find(r, "moe_layers_enum")) {
        /* "3,4,5,..." (or a list of indices): the MoE layers; indices past the last layer are MTP ones. */
        const cJSON *list = find(r, "moe_layers_enum");
        for (int64_t l = 0; l < n; l++) cfg->layer_is_moe[l] = 0;
        if (cJSON_IsString(list)) {
            /* as transformers splits it: entries between commas, blank ones skipped */
            for (const char *p = list->valuestring; *p;) {
                const char *comma = strchr(p, ',');
                size_t len = comma ? (size_t)(comma - p) : strlen(p);
                char token[32];
                size_t a = 0, b = len;
                while (a < b && (p[a] == ' ' || p[a] == '\t')) a++;
                while (b > a && (p[b - 1] == ' ' || p[b - 1] == '\t')) b--;
                if (b > a) {
                    char *end = NULL;
                    if (b - a < sizeof token) {
                        memcpy(token, p + a, b - a);
                        token[b - a] = '\0';
                        errno = 0;
                        long long v = strtoll(token, &end, 10);
                        if (*end == '\0' && errno == 0 && v >= 0 && v < n) cfg->layer_is_moe[v] = 1;
                    }
                    if (!end || *end != '\0')
                        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                                          "%s: moe_layers_enum = %s, expected comma-separated layer indices",
                                          r->label, describe(list, what, sizeof what));
                }
                p += len + (comma ? 1 : 0);
            }
        } else if (cJSON_IsArray(list)) {
            const cJSON *item;
            cJSON_ArrayForEach(item, list) {
                int64_t v = 0;
                if ((st = to_int(r, "moe_layers_enum[]", item, 0, &v)) != MOE_STATUS_OK) return st;
                if (v < n) cfg->layer_is_moe[v] = 1;
            }
        } else {
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: moe_layers_enum = %s, expected comma-separated layer indices", r->label,
                              describe(list, what, sizeof what));
        }
    } else {
        int64_t first = rule->dense, freq = 1;
        if ((rule->legacy & LEGACY_FIRST) &&
            (st = get_int(r, "first_k_dense_replace", 0, &first, NULL)) != MOE_STATUS_OK)
            return st;
        const cJSON *freqs = find(r, "moe_layer_freq");
        bool per_layer = (rule->legacy & LEGACY_FREQ_LIST) && cJSON_IsArray(freqs);
        if (per_layer && cJSON_GetArraySize(freqs) < n)
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: moe_layer_freq has %d entries, expected one per layer (num_hidden_layers = %lld)",
                              r->label, cJSON_GetArraySize(freqs), (long long)n);
        if (!per_layer && (rule->legacy & LEGACY_FREQ) &&
            (st = get_int(r, "moe_layer_freq", 1, &freq, NULL)) != MOE_STATUS_OK)
            return st;
        for (int64_t l = 0; l < n; l++) {
            bool moe = l >= first;
            if (per_layer) {
                const cJSON *item = cJSON_GetArrayItem(freqs, (int)l);
                if (!cJSON_IsBool(item) && !cJSON_IsNumber(item))
                    return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                                      "%s: moe_layer_freq[%lld] = %s, expected 0 / 1 or false / true", r->label,
                                      (long long)l, describe(item, what, sizeof what));
                moe = moe && (cJSON_IsTrue(item) || (cJSON_IsNumber(item) && item->valuedouble != 0));
            } else {
                moe = moe && l % freq == 0;
            }
            cfg->layer_is_moe[l] = moe ? 1 : 0;
        }
    }
    cfg->num_moe_layers = 0;
    for (int64_t l = 0; l < n; l++) cfg->num_moe_layers += cfg->layer_is_moe[l];
    return MOE_STATUS_OK;
}

/* Which layers hold the MoE block; every rule the config states must agree. */
static moe_status read_layer_pattern(const reader *r, const char *family, moe_model_config *cfg) {
    int64_t n = cfg->num_layers;
    for (int64_t l = 0; l < n; l++) cfg->layer_is_moe[l] = (uint8_t)cfg->is_moe;
    if (!cfg->is_moe) return MOE_STATUS_OK;
    const struct layer_rule *rule = find_layer_rule(family);
    if (rule) return read_family_layers(r, rule, cfg);

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
     * mlp_layer_types for glm4_moe_lite); for any other family a list with dense layers is refused
     * as a family this reader does not know (MOE_STATUS_UNSUPPORTED), since transformers writes it
     * for families whose routing the generic defaults here may get wrong. The families read with
     * their own layer rule (layer_rules: MiniCPM5-MoE, Step-3.5, ...) do not get here. */
    static const char *const rule_keys[] = {"first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step",
                                            "interleave_moe_layer_step", "moe_layers", "mlp_only_layers"};
    const bool has_rules = first_key(r, rule_keys, sizeof rule_keys / sizeof rule_keys[0]) != NULL;
    const bool must_agree = has_rules || !moe__cfg_is_noaux_family(family);
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
            /* No rule of the config's own to disagree with: the family is one this reader does not
             * know, whose transformers config makes the layers (and likely the routing) its way. */
            if (!has_rules && (strcmp(t, "sparse") == 0) != (cfg->layer_is_moe[l] != 0))
                return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                                  "%s: model_type \"%s\" is not supported (this reader does not model a family whose "
                                  "dense layers only mlp_layer_types gives: mlp_layer_types[%lld] = \"%s\")",
                                  r->label, family ? family : "absent", (long long)l, t);
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
                                        "qwen3_5_moe_text", "qwen3_omni_moe_text"};
    return type_in(type, types, sizeof types / sizeof types[0]);
}

/* Routing, shared experts and the activation variant of a MoE config. */
static moe_status read_routing(const reader *r, const char *type, const char *experts_key, moe_layer_spec *spec) {
    bool llama4 = type && strncmp(type, "llama4", 6) == 0;
    bool gpt_oss = type && strcmp(type, "gpt_oss") == 0;
    bool noaux = moe__cfg_is_noaux_family(type);
    bool minimax_m2 = type && strcmp(type, "minimax_m2") == 0;
    bool v2 = moe__cfg_is_v2_router_family(type), v4 = moe__cfg_is_deepseek_v4(type);
    /* Routers that take no topk_method, groups or norm_topk_prob: selection on the scores plus
     * e_score_correction_bias, always renormalised (DeepSeek-V4: sqrtsoftplus unless scoring_func
     * says otherwise; Laguna, Step-3.5: sigmoid). */
    bool fixed = v4 || moe__cfg_is_laguna(type) || moe__cfg_is_step3p5(type);
    moe_status st;

    /* Score function. */
    const char *scoring = NULL;
    if (!fixed || v4)
        if ((st = get_string(r, "scoring_func", &scoring)) != MOE_STATUS_OK) return st;
    if (!scoring) scoring = v4 ? "sqrtsoftplus" : (noaux || llama4 || minimax_m2 || fixed) ? "sigmoid" : "softmax";
    /* transformers' DeepSeek-V2 router takes a softmax whatever scoring_func says (DeepSeek's own
     * code refuses anything else, vLLM honours it): such a config is not read. */
    if (v2 && strcmp(scoring, "softmax") != 0)
        return moe__cfg_refuse_variant(r, type, "scoring_func", find(r, "scoring_func"),
                                       "a scoring_func other than softmax (transformers' DeepSeek-V2 router "
                                       "ignores it)");
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
    if (!fixed && (st = get_string(r, "topk_method", &method)) != MOE_STATUS_OK) return st;
    if (!method) method = fixed || noaux ? "noaux_tc" : v2 ? "greedy" : "group_limited_greedy";
    if (v2 && strcmp(method, "noaux_tc") == 0)
        return moe__cfg_refuse_variant(r, type, "topk_method", find(r, "topk_method"),
                                       "noaux_tc under transformers' DeepSeek-V2 router, which has only greedy and "
                                       "group_limited_greedy");
    bool grouped = !fixed;
    if (strcmp(method, "noaux_tc") == 0) spec->use_correction_bias = 1;
    else if (strcmp(method, "greedy") == 0) grouped = false;
    else if (strcmp(method, "group_limited_greedy") != 0)
        return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                          "%s: topk_method = \"%.60s\" is not supported (known: noaux_tc, greedy, "
                          "group_limited_greedy)",
                          r->label, method);

    /* MiniMax-M2 says use_routing_bias: its router selects on sigmoid + e_score_correction_bias,
     * as noaux_tc does, without groups. transformers' MiniMaxM2Config has neither key (its router
     * always does that), so a config it writes says nothing: the family decides. */
    int32_t routing_bias = minimax_m2;
    if (!fixed && (st = get_bool(r, "use_routing_bias", &routing_bias, NULL)) != MOE_STATUS_OK) return st;
    if (routing_bias) spec->use_correction_bias = 1;

    const struct moe__cfg_family_default *fd = moe__cfg_find_family_default(type);
    int64_t n_group = fd && fd->n_group > 0 ? fd->n_group : 0;
    int64_t topk_group = fd && fd->topk_group > 0 ? fd->topk_group : 0;
    bool has_topk_group = topk_group > 0;
    if (grouped && (st = get_int(r, "n_group", 0, &n_group, NULL)) != MOE_STATUS_OK) return st;
    bool said_topk_group = false;
    if (grouped && (st = get_int(r, "topk_group", 0, &topk_group, &said_topk_group)) != MOE_STATUS_OK) return st;
    has_topk_group |= said_topk_group;
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
    int32_t norm = noaux || fixed || strcmp(experts_key, "num_local_experts") == 0 || renormalizes_by_default(type);
    /* DeepSeek-V2: transformers' DeepseekV2TopkRouter never renormalises (its config keeps
     * norm_topk_prob, default false, but the router does not read it) and always multiplies by
     * routed_scaling_factor. DeepSeek's own V2 code renormalises at top_k > 1 when it is true and
     * then skips routed_scaling_factor; vLLM renormalises and scales. The released V2 / V2-Lite /
     * V2.5 configs all say false, where the three agree; this reader follows transformers, which
     * tools/hf_parity.py checks against. The routers of fixed families ignore the key too. */
    if (!v2 && !fixed && (st = get_bool(r, "norm_topk_prob", &norm, NULL)) != MOE_STATUS_OK) return st;
    spec->renormalize = v2 ? 0 : norm;

    /* Laguna and Step-3.5 name the routed scale their own way (applied to the expert sum: the
     * same product). */
    const char *scale_key = moe__cfg_is_laguna(type)    ? "moe_routed_scaling_factor"
                            : moe__cfg_is_step3p5(type) ? "moe_router_scaling_factor"
                                               : "routed_scaling_factor";
    double scale = fd ? fd->scale : 1.0;
    if ((st = get_number(r, scale_key, 0.0, &scale, NULL)) != MOE_STATUS_OK) return st;
    if (!(scale > 0.0))
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %g, expected > 0", r->label, scale_key,
                          scale);
    spec->routed_scale = (float)scale;

    /* Shared experts. */
    int64_t n_shared = fd && fd->n_shared > 0 ? fd->n_shared : 0, shared_width = 0;
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

    /* Shared experts of the families with their own keys: one ungated MLP. DeepSeek-V4 always has
     * one as wide as a routed expert (transformers ignores n_shared_experts); Laguna's is
     * shared_expert_intermediate_size wide (512 unless said), Step-3.5's share_expert_dim (1280
     * unless said); dots3-note's is n_shared_experts times shared_experts_intermediate_size (its
     * released configs: moe_shared_expert_intermediate_size; 1536 unless said). */
    int64_t own_width = -1, own_count = 1;
    if (v4) own_width = spec->intermediate;
    if (moe__cfg_is_laguna(type))
        own_width = (shared_width > 0 || find(r, "shared_expert_intermediate_size")) ? shared_width : 512;
    if (moe__cfg_is_step3p5(type)) {
        own_width = 1280;
        const char *key = find(r, "share_expert_dim") ? "share_expert_dim" : "share_expert_dims";
        if ((st = get_int(r, key, 0, &own_width, NULL)) != MOE_STATUS_OK) return st;
    }
    if (moe__cfg_is_dots3_note(type)) {
        own_width = 1536;
        own_count = 1; /* DeepseekV32Config's default */
        const char *key = find(r, "moe_shared_expert_intermediate_size") ? "moe_shared_expert_intermediate_size"
                                                                         : "shared_experts_intermediate_size";
        if ((st = get_int(r, key, 0, &own_width, NULL)) != MOE_STATUS_OK) return st;
        if ((st = get_int(r, "n_shared_experts", 0, &own_count, NULL)) != MOE_STATUS_OK) return st;
        if (!moe__mul64(own_count, own_width, &own_width) || own_width > DIM_MAX)
            return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: n_shared_experts = %lld times %s exceeds 2^40", r->label, (long long)own_count,
                              key);
    }
    if (own_width >= 0) {
        spec->num_shared_experts = own_width > 0 ? 1 : 0;
        spec->shared_intermediate = own_width;
        spec->shared_gate = 0;
        if (moe__cfg_is_dots3_note(type) && own_width > 0) spec->num_shared_experts = own_count;
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
                          "%s: %s = \"%.60s\" is not supported (known: bfloat16, float16, float32)", r->label, key,
                          name);
    return MOE_STATUS_OK;
}

static moe_status read_attention(const reader *r, const char *family, moe_model_config *cfg) {
    moe_status st;
    bool has_heads, has_kv, has_head_dim = false;
    if ((st = get_int(r, "num_attention_heads", 1, &cfg->num_heads, &has_heads)) != MOE_STATUS_OK) return st;
    if ((st = get_int(r, "num_key_value_heads", 1, &cfg->num_kv_heads, &has_kv)) != MOE_STATUS_OK) return st;
    if (!has_kv) cfg->num_kv_heads = cfg->num_heads;
    /* GLM-5-Next's config drops the head_dim it is given (transformers writes 0: its MLA layers
     * have no RoPE part); its head size is not that key's. */
    static const char *const no_head_dim[] = {"glm5_next", "glm5_next_text"};
    if (!type_in(family, no_head_dim, 2) &&
        (st = get_int(r, "head_dim", 1, &cfg->head_dim, &has_head_dim)) != MOE_STATUS_OK)
        return st;
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
                              "%s: layer_types mixes sliding (sliding_window = %lld) and chunked "
                              "(attention_chunk_size = "
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
    if ((st = moe__cfg_refuse_unread_family(&r, family)) != MOE_STATUS_OK) return st;

    int64_t hidden = 0, layers = 0;
    if ((st = require_int(&r, "hidden_size", 1, "the model width", &hidden)) != MOE_STATUS_OK) return st;
    if ((st = require_int(&r, "num_hidden_layers", 1, "the number of layers", &layers)) != MOE_STATUS_OK) return st;
    if (layers > MOE_MAX_LAYERS)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "%s: num_hidden_layers = %lld, at most %d supported", label,
                          (long long)layers, MOE_MAX_LAYERS);
    cfg->num_layers = layers;

    /* Step-3.5's released configs say moe_num_experts / moe_top_k (aliases in transformers'
     * config); elsewhere they are other families' keys (refused above). */
    static const char *const expert_keys[] = {"n_routed_experts", "num_experts", "num_local_experts",
                                              "moe_num_experts"};
    const char *experts_key = first_key(&r, expert_keys, moe__cfg_is_step3p5(family) ? 4 : 3);
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
        static const char *const k_keys[] = {"num_experts_per_tok", "experts_per_token", "moe_top_k"};
        const char *k_key = first_key(&r, k_keys, moe__cfg_is_step3p5(family) ? 3 : 2);
        const struct moe__cfg_family_default *fd = moe__cfg_find_family_default(family);
        if (!k_key && fd && fd->top_k > 0) top_k = fd->top_k; /* transformers' default for the family */
        else if (!k_key)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: missing num_experts_per_tok (experts per token; the config has %s = %lld)", label,
                              experts_key, (long long)experts);
        if (k_key && (st = get_int(&r, k_key, 1, &top_k, NULL)) != MOE_STATUS_OK) return st;
        if (top_k > experts)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %lld exceeds %s = %lld", label,
                              k_key ? k_key : "num_experts_per_tok (the family's default)", (long long)top_k,
                              experts_key, (long long)experts);
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
    /* Step-3.5's configs say "swigluoai", which transformers replaces by silu (its experts are a
     * plain SwiGLU; the clamps are refused above). */
    if (!moe__cfg_is_step3p5(family) && (st = read_activation(&r, spec)) != MOE_STATUS_OK) return st;
    /* DeepSeek-V4 clamps its SwiGLU; GPT-OSS's limit is set with its activation below. */
    double limit = moe__cfg_clamps_always(family) ? 10.0 : 0.0; /* transformers' default for those */
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

    if ((st = read_attention(&r, family, cfg)) != MOE_STATUS_OK) return st;
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
