/* The config.json reader's family knowledge: which model_types run which router where their
 * config is silent, transformers' defaults for the keys a config may leave out, and the families
 * and variants whose layer the spec cannot express, refused by name (config_reader.h). */
#include "config_reader.h"

/* Families whose routing the config does not spell out: DeepSeek-V3's descendants select with
 * sigmoid scores plus the e_score_correction_bias (topk_method noaux_tc) and renormalise by
 * default; GLM-4.5's configs carry no scoring_func or topk_method at all. transformers runs the
 * same router (DeepseekV3TopkRouter's code) for GLM-5 (glm_moe_dsa), dots.llm1, Solar-Open and
 * MiMo-V2-Flash, and runs Sarvam-30B, Param2-MoE (as Glm4Moe) and Sarvam-105B (sarvam_mla, as
 * DeepseekV3) with those models' code. transformers 5.25 also runs that router and MoE block for
 * A.X-K2 (axk2: without groups; grouped configs are refused in read_routing), Beam (its
 * routed_scaling_factor applied to the expert sum, the same product), MiniCPM5-MoE, dots3-note
 * (its shared width is shared_experts_intermediate_size, read_routing) and GLM-5-Next (SwiGLU
 * clamped at swiglu_limit in the routed and the shared experts alike). */
bool moe__cfg_is_noaux_family(const char *type) {
    static const char *const types[] = {"deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe", "glm4_moe_lite",
                                        "glm4v_moe", "glm4v_moe_text", "glm_moe_dsa", "dots1", "solar_open",
                                        "sarvam_moe", "param2moe", "sarvam_mla", "mimo_v2_flash", "axk2",
                                        "beam", "minicpm5_moe", "dots3_note", "dots3_note_text", "glm5_next",
                                        "glm5_next_text"};
    return type_in(type, types, sizeof types / sizeof types[0]);
}

/* Families whose MoE block transformers 5.25 runs with DeepSeek-V2's router: softmax scores,
 * greedy (or group_limited_greedy) selection, routed_scaling_factor, and no renormalisation
 * whatever norm_topk_prob says (see read_routing). */
bool moe__cfg_is_v2_router_family(const char *type) {
    static const char *const types[] = {"deepseek_v2", "unlimited_ocr", "unlimited_ocr_text"};
    return type_in(type, types, sizeof types / sizeof types[0]);
}

/* Laguna and Step-3.5 / 3.7 (text model "step3p5"): sigmoid scores selected with
 * e_score_correction_bias, always renormalised, their own routed-scale key, and one shared
 * expert without a gate. */
bool moe__cfg_is_laguna(const char *type) { return type && strcmp(type, "laguna") == 0; }
bool moe__cfg_is_step3p5(const char *type) {
    static const char *const types[] = {"step3p5", "step3p7"};
    return type_in(type, types, sizeof types / sizeof types[0]);
}
bool moe__cfg_is_deepseek_v4(const char *type) { return type && strcmp(type, "deepseek_v4") == 0; }
bool moe__cfg_is_dots3_note(const char *type) {
    static const char *const types[] = {"dots3_note", "dots3_note_text"};
    return type_in(type, types, sizeof types / sizeof types[0]);
}

/* transformers' defaults of the families above for the routing keys a config may leave out
 * (-1 / 0: none, the generic reading's): experts per token, n_shared_experts, n_group /
 * topk_group, and the routed scale (under that family's key). */
static const struct moe__cfg_family_default family_defaults[] = {
    {"axk2", 8, 1, -1, -1, 2.5},
    {"beam", 8, -1, 8, 4, 2.5},
    {"minicpm5_moe", 16, 1, 1, 1, 3.66},
    {"dots3_note", 8, -1, 1, 1, 1.0},
    {"dots3_note_text", 8, -1, 1, 1, 1.0},
    {"glm5_next", 8, 1, 1, 1, 2.5},
    {"glm5_next_text", 8, 1, 1, 1, 2.5},
    {"unlimited_ocr", 6, 2, 1, 1, 1.0},
    {"unlimited_ocr_text", 6, 2, 1, 1, 1.0},
    {"laguna", 8, -1, -1, -1, 1.0},
    {"step3p5", 8, -1, -1, -1, 1.0},
    {"step3p7", 8, -1, -1, -1, 1.0},
    {"deepseek_v4", 6, -1, -1, -1, 1.5},
    {"qwen3_omni_moe_text", 8, -1, -1, -1, 1.0},
};

const struct moe__cfg_family_default *moe__cfg_find_family_default(const char *type) {
    for (size_t i = 0; type && i < sizeof family_defaults / sizeof family_defaults[0]; i++)
        if (strcmp(type, family_defaults[i].type) == 0) return &family_defaults[i];
    return NULL;
}

/* Families whose experts transformers clamps at swiglu_limit unconditionally (10 when the config
 * does not say): the layer spec's SWIGLU clamp, in the shared expert too. */
bool moe__cfg_clamps_always(const char *type) {
    static const char *const types[] = {"deepseek_v4", "glm5_next", "glm5_next_text"};
    return type_in(type, types, sizeof types / sizeof types[0]);
}

/* The refusal of a variant of a family this reader knows: a config value of that family asks
 * for what the layer spec does not model. */
moe_status moe__cfg_refuse_variant(const reader *r, const char *family, const char *key, const cJSON *item,
                                   const char *why) {
    char what[64];
    return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                      "%s: model_type \"%s\" with %s = %s is not supported (this reader does not model %s)", r->label,
                      family, key, describe(item, what, sizeof what), why);
}

/* Whether a JSON value turns a feature on: true, or a number other than 0. */
static bool is_on(const cJSON *item) {
    return item && (cJSON_IsTrue(item) || (cJSON_IsNumber(item) && item->valuedouble != 0));
}

/* Variants of the families read by model_type whose config asks for what the layer spec does not
 * model (transformers 5.25's code for each). */
moe_status moe__cfg_refuse_unread_variant(const reader *r, const char *family) {
    if (!family) return MOE_STATUS_OK;
    const cJSON *item;
    /* The number of layers, to look at per-layer lists (checked again, with its message, later). */
    int64_t n = MOE_MAX_LAYERS;
    item = find(r, "num_hidden_layers");
    if (cJSON_IsNumber(item) && item->valuedouble >= 1 && item->valuedouble < MOE_MAX_LAYERS)
        n = (int64_t)item->valuedouble;

    /* transformers' DeepSeek-V2 (and its OCR descendants), DeepSeek-V4 and Step-3.5 MLPs take
     * mlp_bias for the shared expert only: their routed experts have no bias. */
    if ((moe__cfg_is_v2_router_family(family) || moe__cfg_is_deepseek_v4(family) || moe__cfg_is_step3p5(family)) &&
        is_on(item = find(r, "mlp_bias")))
        return moe__cfg_refuse_variant(r, family, "mlp_bias", item,
                                       "biases on the shared expert but not on the routed ones");

    /* Step-3.5: swiglu_limits[l] / swiglu_limits_shared[l] clamp silu(gate) (after the activation;
     * the spec's SWIGLU clamps the gate before it) and up, one limit per layer; 0 or null is none. */
    if (moe__cfg_is_step3p5(family)) {
        static const char *const lists[] = {"swiglu_limits", "swiglu_limits_shared"};
        for (int i = 0; i < 2; i++) {
            const cJSON *list = find(r, lists[i]);
            if (!list) continue;
            if (!cJSON_IsArray(list)) {
                char what[64];
                return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %s, expected an array of per-layer "
                                  "limits", r->label, lists[i], describe(list, what, sizeof what));
            }
            int64_t l = 0;
            cJSON_ArrayForEach(item, list) {
                if (l++ < n && is_on(item))
                    return moe__cfg_refuse_variant(r, family, lists[i], list,
                                                   "Step-3.5's per-layer SwiGLU clamp of silu(gate) and up, after the "
                                                   "activation");
            }
        }
    }

    /* DeepSeek-V4's hash_moe layers pick their experts from the token id (a tid2eid table), not
     * from the scores; transformers makes the first num_hash_layers (3 unless said) layers so
     * when the config has no mlp_layer_types. */
    if (moe__cfg_is_deepseek_v4(family)) {
        const cJSON *types = find(r, "mlp_layer_types");
        if (cJSON_IsArray(types)) {
            int l = 0;
            cJSON_ArrayForEach(item, types) {
                if (cJSON_IsString(item) && strcmp(item->valuestring, "hash_moe") == 0) {
                    char key[48];
                    snprintf(key, sizeof key, "mlp_layer_types[%d]", l);
                    return moe__cfg_refuse_variant(r, family, key, item,
                                                   "DeepSeek-V4's hash_moe layers, whose experts a token-id "
                                                   "table picks");
                }
                l++;
            }
        } else if (!types) {
            item = find(r, "num_hash_layers");
            if (is_on(item))
                return moe__cfg_refuse_variant(r, family, "num_hash_layers", item,
                                               "DeepSeek-V4's hash_moe layers, whose experts a token-id table picks");
            if (!item)
                return moe__error(r->ctx, MOE_STATUS_UNSUPPORTED,
                                  "%s: model_type \"%s\" without mlp_layer_types or num_hash_layers (3 hash_moe "
                                  "layers in transformers) is not supported (this reader does not model DeepSeek-V4's "
                                  "hash_moe layers, whose experts a token-id table picks)",
                                  r->label, family);
        }
    }

    /* transformers clamps these experts at swiglu_limit whatever its value; the spec's 0 is no clamp. */
    if (moe__cfg_clamps_always(family) && cJSON_IsNumber(item = find(r, "swiglu_limit")) && item->valuedouble == 0)
        return moe__cfg_refuse_variant(r, family, "swiglu_limit", item,
                                       "a SwiGLU clamped at 0 (the layer spec's 0 is no clamp)");

    /* GLM-5-Next's routed experts apply silu whatever hidden_act says; its shared expert applies
     * hidden_act. */
    if ((strcmp(family, "glm5_next") == 0 || strcmp(family, "glm5_next_text") == 0) &&
        cJSON_IsString(item = find(r, "hidden_act")) && strcmp(item->valuestring, "silu") != 0 &&
        strcmp(item->valuestring, "swish") != 0)
        return moe__cfg_refuse_variant(r, family, "hidden_act", item,
                                       "routed experts (always silu) and a shared expert with "
                                       "different activations");

    /* Laguna: tanh soft-capping of the router logits; the routing weight on the expert input
     * (transformers itself refuses it). */
    if (moe__cfg_is_laguna(family)) {
        if (cJSON_IsNumber(item = find(r, "moe_router_logit_softcapping")) && item->valuedouble > 0)
            return moe__cfg_refuse_variant(r, family, "moe_router_logit_softcapping", item,
                                           "Laguna's tanh soft-capped router logits");
        if (is_on(item = find(r, "moe_apply_router_weight_on_input")))
            return moe__cfg_refuse_variant(r, family, "moe_apply_router_weight_on_input", item,
                                           "Laguna's routing weight on the expert input at top-k > 1");
    }

    /* A.X-K2 with groups: its router sets the scores of the dropped groups to 0 instead of
     * excluding them, so an expert there can still win over a kept one whose biased score is below
     * 0 (DeepSeek-V3's router, and the layer spec, exclude them). */
    if (strcmp(family, "axk2") == 0 && cJSON_IsNumber(item = find(r, "n_group")) && item->valuedouble > 1)
        return moe__cfg_refuse_variant(r, family, "n_group", item,
                                       "A.X-K2's grouped routing, which scores the dropped groups' experts 0 "
                                       "instead of excluding them");
    return MOE_STATUS_OK;
}

/* MoE families whose routing or layer layout this reader does not model. Their configs look
 * like the ones it reads (an expert count, a top-k, a width), so reading them with the generic
 * defaults would give a layer other than the model's, silently: they are refused. By
 * model_type where the keys alone do not tell (Phi-3.5-MoE's sparsemixer weights and Jamba's
 * layers use Mixtral's keys), else by a key of their own. */
moe_status moe__cfg_refuse_unread_family(const reader *r, const char *family) {
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
        {"ergo", "Ergo's per-expert RMSNorm on each expert's output and its relu2 experts with a normed shared "
                 "expert"},
        {"ernie4_5_vl_moe", "ERNIE-4.5-VL's separate text and vision expert stacks chosen per token type"},
        {"ernie4_5_vl_moe_text", "ERNIE-4.5-VL's separate text and vision expert stacks chosen per token type"},
        {"hy_v3", "Hunyuan-V3's router_scaling_factor and num_shared_experts keys (not read yet)"},
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
        /* transformers 5.25's own code for these, read against the layer spec: */
        {"axk1", "A.X-K1's RMSNorm on the MoE block's output (post_mlp_layernorm, on the MoE layers only)"},
        {"hy_v4", "HY-V4's routed SwiGLU clamped at swiglu_limit beside an unclamped shared expert"},
        {"hy_v4_vl", "HY-V4's routed SwiGLU clamped at swiglu_limit beside an unclamped shared expert"},
        {"hy_v4_vl_text", "HY-V4's routed SwiGLU clamped at swiglu_limit beside an unclamped shared expert"},
        {"qwen3_omni_moe", "Qwen3-Omni's two MoE stacks, the thinker's (thinker_config.text_config) and the "
                           "talker's with a gated shared expert (talker_config.text_config); a thinker config "
                           "saved alone (qwen3_omni_moe_thinker) is read"},
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
    moe_status st = moe__cfg_refuse_unread_variant(r, family);
    if (st != MOE_STATUS_OK) return st;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        /* dots3-note's released configs name its shared width so (transformers reads it) */
        if (moe__cfg_is_dots3_note(family) && strcmp(keys[i].key, "moe_shared_expert_intermediate_size") == 0) continue;
        if (moe__cfg_is_step3p5(family) && strcmp(keys[i].key, "moe_num_experts") == 0) continue; /* an alias there */
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
