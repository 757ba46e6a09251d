/* Built-in model presets: each is the model's public config.json (the fields the reader
 * uses, with their published values), parsed by moe_config_parse like any file, so that
 * config.c stays the one place that knows what the fields mean. */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct preset {
    const char *name;
    const char *json;
} preset;

/* DeepSeek-V3 / V3.1 / R1 (deepseek-ai/DeepSeek-V3). */
static const char deepseek_v3[] =
    "{\"model_type\": \"deepseek_v3\", \"architectures\": [\"DeepseekV3ForCausalLM\"],"
    " \"hidden_size\": 7168, \"intermediate_size\": 18432, \"moe_intermediate_size\": 2048,"
    " \"num_hidden_layers\": 61, \"first_k_dense_replace\": 3, \"moe_layer_freq\": 1,"
    " \"n_routed_experts\": 256, \"n_shared_experts\": 1, \"num_experts_per_tok\": 8,"
    " \"n_group\": 8, \"topk_group\": 4, \"topk_method\": \"noaux_tc\", \"scoring_func\": \"sigmoid\","
    " \"norm_topk_prob\": true, \"routed_scaling_factor\": 2.5, \"hidden_act\": \"silu\","
    " \"num_attention_heads\": 128, \"num_key_value_heads\": 128,"
    " \"q_lora_rank\": 1536, \"kv_lora_rank\": 512, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64,"
    " \"v_head_dim\": 128, \"vocab_size\": 129280, \"tie_word_embeddings\": false,"
    " \"torch_dtype\": \"bfloat16\"}";

/* Kimi-K2 (moonshotai/Kimi-K2-Instruct): DeepSeek-V3's architecture, more experts, one group. */
static const char kimi_k2[] =
    "{\"model_type\": \"kimi_k2\", \"architectures\": [\"DeepseekV3ForCausalLM\"],"
    " \"hidden_size\": 7168, \"intermediate_size\": 18432, \"moe_intermediate_size\": 2048,"
    " \"num_hidden_layers\": 61, \"first_k_dense_replace\": 1, \"moe_layer_freq\": 1,"
    " \"n_routed_experts\": 384, \"n_shared_experts\": 1, \"num_experts_per_tok\": 8,"
    " \"n_group\": 1, \"topk_group\": 1, \"topk_method\": \"noaux_tc\", \"scoring_func\": \"sigmoid\","
    " \"norm_topk_prob\": true, \"routed_scaling_factor\": 2.827, \"hidden_act\": \"silu\","
    " \"num_attention_heads\": 64, \"num_key_value_heads\": 64,"
    " \"q_lora_rank\": 1536, \"kv_lora_rank\": 512, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64,"
    " \"v_head_dim\": 128, \"vocab_size\": 163840, \"tie_word_embeddings\": false,"
    " \"torch_dtype\": \"bfloat16\"}";

/* GLM-4.5 (zai-org/GLM-4.5). Its config names no scoring_func or topk_method: glm4_moe
 * routes by sigmoid with a correction bias, as DeepSeek-V3 does. */
static const char glm_4_5[] =
    "{\"model_type\": \"glm4_moe\", \"architectures\": [\"Glm4MoeForCausalLM\"],"
    " \"hidden_size\": 5120, \"intermediate_size\": 12288, \"moe_intermediate_size\": 1536,"
    " \"num_hidden_layers\": 92, \"first_k_dense_replace\": 3,"
    " \"n_routed_experts\": 160, \"n_shared_experts\": 1, \"num_experts_per_tok\": 8,"
    " \"n_group\": 1, \"topk_group\": 1, \"norm_topk_prob\": true, \"routed_scaling_factor\": 2.5,"
    " \"hidden_act\": \"silu\", \"num_attention_heads\": 96, \"num_key_value_heads\": 8, \"head_dim\": 128,"
    " \"vocab_size\": 151552, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}";

/* GLM-4.5-Air (zai-org/GLM-4.5-Air). */
static const char glm_4_5_air[] =
    "{\"model_type\": \"glm4_moe\", \"architectures\": [\"Glm4MoeForCausalLM\"],"
    " \"hidden_size\": 4096, \"intermediate_size\": 10944, \"moe_intermediate_size\": 1408,"
    " \"num_hidden_layers\": 46, \"first_k_dense_replace\": 1,"
    " \"n_routed_experts\": 128, \"n_shared_experts\": 1, \"num_experts_per_tok\": 8,"
    " \"n_group\": 1, \"topk_group\": 1, \"norm_topk_prob\": true, \"routed_scaling_factor\": 1.0,"
    " \"hidden_act\": \"silu\", \"num_attention_heads\": 96, \"num_key_value_heads\": 8, \"head_dim\": 128,"
    " \"vocab_size\": 151552, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}";

/* Qwen3-30B-A3B (Qwen/Qwen3-30B-A3B). */
static const char qwen3_30b_a3b[] =
    "{\"model_type\": \"qwen3_moe\", \"architectures\": [\"Qwen3MoeForCausalLM\"],"
    " \"hidden_size\": 2048, \"intermediate_size\": 6144, \"moe_intermediate_size\": 768,"
    " \"num_hidden_layers\": 48, \"decoder_sparse_step\": 1, \"mlp_only_layers\": [],"
    " \"num_experts\": 128, \"num_experts_per_tok\": 8, \"norm_topk_prob\": true, \"hidden_act\": \"silu\","
    " \"num_attention_heads\": 32, \"num_key_value_heads\": 4, \"head_dim\": 128,"
    " \"vocab_size\": 151936, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}";

/* Qwen3-235B-A22B (Qwen/Qwen3-235B-A22B). */
static const char qwen3_235b_a22b[] =
    "{\"model_type\": \"qwen3_moe\", \"architectures\": [\"Qwen3MoeForCausalLM\"],"
    " \"hidden_size\": 4096, \"intermediate_size\": 12288, \"moe_intermediate_size\": 1536,"
    " \"num_hidden_layers\": 94, \"decoder_sparse_step\": 1, \"mlp_only_layers\": [],"
    " \"num_experts\": 128, \"num_experts_per_tok\": 8, \"norm_topk_prob\": true, \"hidden_act\": \"silu\","
    " \"num_attention_heads\": 64, \"num_key_value_heads\": 4, \"head_dim\": 128,"
    " \"vocab_size\": 151936, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}";

/* Qwen3-Next-80B-A3B (Qwen/Qwen3-Next-80B-A3B-Instruct): one gated shared expert. */
static const char qwen3_next_80b_a3b[] =
    "{\"model_type\": \"qwen3_next\", \"architectures\": [\"Qwen3NextForCausalLM\"],"
    " \"hidden_size\": 2048, \"intermediate_size\": 5120, \"moe_intermediate_size\": 512,"
    " \"shared_expert_intermediate_size\": 512, \"num_hidden_layers\": 48, \"decoder_sparse_step\": 1,"
    " \"mlp_only_layers\": [], \"num_experts\": 512, \"num_experts_per_tok\": 10, \"norm_topk_prob\": true,"
    " \"hidden_act\": \"silu\", \"num_attention_heads\": 16, \"num_key_value_heads\": 2, \"head_dim\": 256,"
    " \"vocab_size\": 151936, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}";

/* GPT-OSS (openai/gpt-oss-20b, openai/gpt-oss-120b): clamped SwiGLU with biases; a 128-token sliding
 * window in every other layer (the family default of layer_types). */
static const char gpt_oss_20b[] =
    "{\"model_type\": \"gpt_oss\", \"architectures\": [\"GptOssForCausalLM\"],"
    " \"hidden_size\": 2880, \"intermediate_size\": 2880, \"num_hidden_layers\": 24,"
    " \"num_local_experts\": 32, \"num_experts_per_tok\": 4, \"experts_per_token\": 4,"
    " \"swiglu_limit\": 7.0, \"hidden_act\": \"silu\", \"num_attention_heads\": 64, \"num_key_value_heads\": 8,"
    " \"head_dim\": 64, \"sliding_window\": 128, \"vocab_size\": 201088, \"tie_word_embeddings\": false,"
    " \"torch_dtype\": \"bfloat16\"}";

static const char gpt_oss_120b[] =
    "{\"model_type\": \"gpt_oss\", \"architectures\": [\"GptOssForCausalLM\"],"
    " \"hidden_size\": 2880, \"intermediate_size\": 2880, \"num_hidden_layers\": 36,"
    " \"num_local_experts\": 128, \"num_experts_per_tok\": 4, \"experts_per_token\": 4,"
    " \"swiglu_limit\": 7.0, \"hidden_act\": \"silu\", \"num_attention_heads\": 64, \"num_key_value_heads\": 8,"
    " \"head_dim\": 64, \"sliding_window\": 128, \"vocab_size\": 201088, \"tie_word_embeddings\": false,"
    " \"torch_dtype\": \"bfloat16\"}";

/* Mixtral-8x7B (mistralai/Mixtral-8x7B-v0.1). */
static const char mixtral_8x7b[] =
    "{\"model_type\": \"mixtral\", \"architectures\": [\"MixtralForCausalLM\"],"
    " \"hidden_size\": 4096, \"intermediate_size\": 14336, \"num_hidden_layers\": 32,"
    " \"num_local_experts\": 8, \"num_experts_per_tok\": 2, \"hidden_act\": \"silu\","
    " \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"vocab_size\": 32000,"
    " \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}";

/* Llama-4 (meta-llama/Llama-4-Scout-17B-16E, Llama-4-Maverick-17B-128E): multimodal configs
 * with the text model under text_config; chunked attention (8192 tokens) in 3 of every 4 layers (the
 * family default of no_rope_layers). */
static const char llama_4_scout[] =
    "{\"model_type\": \"llama4\", \"architectures\": [\"Llama4ForConditionalGeneration\"],"
    " \"text_config\": {\"model_type\": \"llama4_text\", \"hidden_size\": 5120, \"intermediate_size\": 8192,"
    " \"intermediate_size_mlp\": 16384, \"num_hidden_layers\": 48, \"interleave_moe_layer_step\": 1,"
    " \"num_local_experts\": 16, \"num_experts_per_tok\": 1, \"hidden_act\": \"silu\","
    " \"num_attention_heads\": 40, \"num_key_value_heads\": 8, \"head_dim\": 128, \"attention_chunk_size\": 8192,"
    " \"vocab_size\": 202048,"
    " \"torch_dtype\": \"bfloat16\"},"
    " \"vision_config\": {\"model_type\": \"llama4_vision_model\", \"hidden_size\": 1408},"
    " \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}";

static const char llama_4_maverick[] =
    "{\"model_type\": \"llama4\", \"architectures\": [\"Llama4ForConditionalGeneration\"],"
    " \"text_config\": {\"model_type\": \"llama4_text\", \"hidden_size\": 5120, \"intermediate_size\": 8192,"
    " \"intermediate_size_mlp\": 16384, \"num_hidden_layers\": 48, \"interleave_moe_layer_step\": 2,"
    " \"num_local_experts\": 128, \"num_experts_per_tok\": 1, \"hidden_act\": \"silu\","
    " \"num_attention_heads\": 40, \"num_key_value_heads\": 8, \"head_dim\": 128, \"attention_chunk_size\": 8192,"
    " \"vocab_size\": 202048,"
    " \"torch_dtype\": \"bfloat16\"},"
    " \"vision_config\": {\"model_type\": \"llama4_vision_model\", \"hidden_size\": 1408},"
    " \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}";

static const preset presets[] = {
    {"deepseek-v3", deepseek_v3},
    {"kimi-k2", kimi_k2},
    {"glm-4.5", glm_4_5},
    {"glm-4.5-air", glm_4_5_air},
    {"qwen3-30b-a3b", qwen3_30b_a3b},
    {"qwen3-235b-a22b", qwen3_235b_a22b},
    {"qwen3-next-80b-a3b", qwen3_next_80b_a3b},
    {"gpt-oss-20b", gpt_oss_20b},
    {"gpt-oss-120b", gpt_oss_120b},
    {"mixtral-8x7b", mixtral_8x7b},
    {"llama-4-scout", llama_4_scout},
    {"llama-4-maverick", llama_4_maverick},
};
#define PRESET_COUNT ((int)(sizeof presets / sizeof presets[0]))

int moe_preset_count(void) { return PRESET_COUNT; }

const char *moe_preset_name(int index) { return index >= 0 && index < PRESET_COUNT ? presets[index].name : NULL; }

moe_status moe_config_preset(moe_context_t *ctx, const char *name, moe_model_config *out) {
    moe__clear_error(ctx);
    if (!name) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_config_preset: name is NULL");
    if (!out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_config_preset: out is NULL");
    for (int i = 0; i < PRESET_COUNT; i++) {
        if (strcasecmp(name, presets[i].name) != 0) continue;
        moe_status st = moe_config_parse(ctx, presets[i].json, strlen(presets[i].json), out);
        if (st != MOE_STATUS_OK) return st; /* a broken preset: the test suite parses them all */
        snprintf(out->name, sizeof out->name, "%s", presets[i].name);
        return MOE_STATUS_OK;
    }
    char names[512] = "";
    for (int i = 0; i < PRESET_COUNT; i++) {
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", presets[i].name);
    }
    return moe__error(ctx, MOE_STATUS_NOT_FOUND, "moe_config_preset: no preset named \"%.64s\" (known: %s)", name,
                      names);
}
