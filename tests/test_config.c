/* config.json reader and presets: every preset and fixture checked against numbers written
 * here (from the models' published config.json files), bad inputs with their status and
 * message, and seeded random round trips and mutations. */
#include "moefuse.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* ---- fixtures ---------------------------------------------------------------------- */

static char fixture_dir[1024];

static void find_fixtures(void) {
    const char *src = getenv("MOEFUSE_SOURCE_DIR");
    if (src && src[0]) {
        snprintf(fixture_dir, sizeof fixture_dir, "%s/tests/data/configs", src);
        return;
    }
    /* This file's directory: CMake compiles it by absolute path. */
    snprintf(fixture_dir, sizeof fixture_dir, "%s", __FILE__);
    char *slash = strrchr(fixture_dir, '/');
    if (slash) slash[1] = '\0';
    else fixture_dir[0] = '\0';
    strncat(fixture_dir, "data/configs", sizeof fixture_dir - strlen(fixture_dir) - 1);
}

static const char *fixture(const char *name) {
    static char path[1200];
    snprintf(path, sizeof path, "%s/%s", fixture_dir, name);
    return path;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

/* ---- expected values ----------------------------------------------------------------- */

typedef struct expect {
    const char *source; /* preset name, or "file:" + fixture name */
    const char *name, *model_type;
    int is_moe;
    int64_t E, H, I, k;
    moe_score score;
    int corr;
    int64_t n_group, topk_group;
    int renorm;
    double scale;
    int router_bias, on_input;
    moe_activation act;
    double alpha, limit;
    int expert_bias;
    int64_t n_shared, shared_I;
    int shared_gate;
    int64_t layers;
    const char *pattern; /* run-length: "3D58M" = 3 dense then 58 MoE; "24DM" = DM 24 times */
    int64_t dense_I, heads, kv, head_dim, vocab;
    int tie;
    int64_t q_lora, kv_lora, nope, rope, v_head;
    moe_dtype dtype;
} expect;

#define SM MOE_SCORE_SOFTMAX
#define SG MOE_SCORE_SIGMOID
#define SQ MOE_SCORE_SQRTSOFTPLUS
#define SWI MOE_ACT_SWIGLU
#define OAI MOE_ACT_SWIGLU_OAI
#define BF MOE_DTYPE_BF16

/* clang-format off */
static const expect expects[] = {
 /* source, name, model_type, moe, E, H, I, k, score, corr, n_group, topk_group, renorm, scale,
    router_bias, on_input, act, alpha, limit, expert_bias, n_shared, shared_I, shared_gate,
    layers, pattern, dense_I, heads, kv, head_dim, vocab, tie, q_lora, kv_lora, nope, rope, v_head, dtype */
 {"deepseek-v3", "deepseek-v3", "deepseek_v3", 1, 256, 7168, 2048, 8, SG, 1, 8, 4, 1, 2.5,
  0, 0, SWI, 1.702, 0, 0, 1, 2048, 0, 61, "3D58M", 18432, 128, 128, 56, 129280, 0, 1536, 512, 128, 64, 128, BF},
 {"kimi-k2", "kimi-k2", "kimi_k2", 1, 384, 7168, 2048, 8, SG, 1, 1, 1, 1, 2.827,
  0, 0, SWI, 1.702, 0, 0, 1, 2048, 0, 61, "1D60M", 18432, 64, 64, 112, 163840, 0, 1536, 512, 128, 64, 128, BF},
 {"glm-4.5", "glm-4.5", "glm4_moe", 1, 160, 5120, 1536, 8, SG, 1, 1, 1, 1, 2.5,
  0, 0, SWI, 1.702, 0, 0, 1, 1536, 0, 92, "3D89M", 12288, 96, 8, 128, 151552, 0, 0, 0, 0, 0, 0, BF},
 {"glm-4.5-air", "glm-4.5-air", "glm4_moe", 1, 128, 4096, 1408, 8, SG, 1, 1, 1, 1, 1.0,
  0, 0, SWI, 1.702, 0, 0, 1, 1408, 0, 46, "1D45M", 10944, 96, 8, 128, 151552, 0, 0, 0, 0, 0, 0, BF},
 {"qwen3-30b-a3b", "qwen3-30b-a3b", "qwen3_moe", 1, 128, 2048, 768, 8, SM, 0, 0, 0, 1, 1.0,
  0, 0, SWI, 1.702, 0, 0, 0, 0, 0, 48, "48M", 6144, 32, 4, 128, 151936, 0, 0, 0, 0, 0, 0, BF},
 {"qwen3-235b-a22b", "qwen3-235b-a22b", "qwen3_moe", 1, 128, 4096, 1536, 8, SM, 0, 0, 0, 1, 1.0,
  0, 0, SWI, 1.702, 0, 0, 0, 0, 0, 94, "94M", 12288, 64, 4, 128, 151936, 0, 0, 0, 0, 0, 0, BF},
 {"qwen3-next-80b-a3b", "qwen3-next-80b-a3b", "qwen3_next", 1, 512, 2048, 512, 10, SM, 0, 0, 0, 1, 1.0,
  0, 0, SWI, 1.702, 0, 0, 1, 512, 1, 48, "48M", 5120, 16, 2, 256, 151936, 0, 0, 0, 0, 0, 0, BF},
 {"gpt-oss-20b", "gpt-oss-20b", "gpt_oss", 1, 32, 2880, 2880, 4, SM, 0, 0, 0, 1, 1.0,
  1, 0, OAI, 1.702, 7.0, 1, 0, 0, 0, 24, "24M", 0, 64, 8, 64, 201088, 0, 0, 0, 0, 0, 0, BF},
 {"gpt-oss-120b", "gpt-oss-120b", "gpt_oss", 1, 128, 2880, 2880, 4, SM, 0, 0, 0, 1, 1.0,
  1, 0, OAI, 1.702, 7.0, 1, 0, 0, 0, 36, "36M", 0, 64, 8, 64, 201088, 0, 0, 0, 0, 0, 0, BF},
 {"mixtral-8x7b", "mixtral-8x7b", "mixtral", 1, 8, 4096, 14336, 2, SM, 0, 0, 0, 1, 1.0,
  0, 0, SWI, 1.702, 0, 0, 0, 0, 0, 32, "32M", 0, 32, 8, 128, 32000, 0, 0, 0, 0, 0, 0, BF},
 {"llama-4-scout", "llama-4-scout", "llama4", 1, 16, 5120, 8192, 1, SG, 0, 0, 0, 0, 1.0,
  0, 1, SWI, 1.702, 0, 0, 1, 8192, 0, 48, "48M", 16384, 40, 8, 128, 202048, 0, 0, 0, 0, 0, 0, BF},
 {"llama-4-maverick", "llama-4-maverick", "llama4", 1, 128, 5120, 8192, 1, SG, 0, 0, 0, 0, 1.0,
  0, 1, SWI, 1.702, 0, 0, 1, 8192, 0, 48, "24DM", 16384, 40, 8, 128, 202048, 0, 0, 0, 0, 0, 0, BF},

 /* Fixture files in the published formats (plus a few synthetic ones, marked in the file). */
 {"file:deepseek_v3.json", "deepseek_v3", "deepseek_v3", 1, 256, 7168, 2048, 8, SG, 1, 8, 4, 1, 2.5,
  0, 0, SWI, 1.702, 0, 0, 1, 2048, 0, 61, "3D58M", 18432, 128, 128, 56, 129280, 0, 1536, 512, 128, 64, 128, BF},
 {"file:deepseek_v2_lite.json", "deepseek_v2", "deepseek_v2", 1, 64, 2048, 1408, 6, SM, 0, 0, 0, 0, 1.0,
  0, 0, SWI, 1.702, 0, 0, 2, 2816, 0, 27, "1D26M", 10944, 16, 16, 128, 102400, 0, 0, 512, 128, 64, 128, BF},
 {"file:qwen3_30b_a3b.json", "qwen3_moe", "qwen3_moe", 1, 128, 2048, 768, 8, SM, 0, 0, 0, 1, 1.0,
  0, 0, SWI, 1.702, 0, 0, 0, 0, 0, 48, "48M", 6144, 32, 4, 128, 151936, 0, 0, 0, 0, 0, 0, BF},
 {"file:qwen3_moe_sparse_step.json", "qwen3_moe", "qwen3_moe", 1, 64, 1024, 256, 4, SM, 0, 0, 0, 0, 1.0,
  0, 0, SWI, 1.702, 0, 0, 0, 0, 0, 12, "1DM3D1M3DM", 3072, 16, 4, 64, 32000, 1, 0, 0, 0, 0, 0, MOE_DTYPE_F16},
 {"file:qwen1_5_moe_a2_7b.json", "qwen2_moe", "qwen2_moe", 1, 60, 2048, 1408, 4, SM, 0, 0, 0, 0, 1.0,
  0, 0, SWI, 1.702, 0, 0, 1, 5632, 1, 24, "24M", 5632, 16, 16, 128, 151936, 0, 0, 0, 0, 0, 0, BF},
 {"file:qwen3_next_80b_a3b.json", "qwen3_next", "qwen3_next", 1, 512, 2048, 512, 10, SM, 0, 0, 0, 1, 1.0,
  0, 0, SWI, 1.702, 0, 0, 1, 512, 1, 48, "48M", 5120, 16, 2, 256, 151936, 0, 0, 0, 0, 0, 0, BF},
 {"file:llama4_scout.json", "llama4", "llama4", 1, 16, 5120, 8192, 1, SG, 0, 0, 0, 0, 1.0,
  0, 1, SWI, 1.702, 0, 0, 1, 8192, 0, 48, "48M", 16384, 40, 8, 128, 202048, 0, 0, 0, 0, 0, 0, BF},
 {"file:llama4_maverick_moe_layers.json", "llama4", "llama4", 1, 128, 5120, 8192, 1, SG, 0, 0, 0, 0, 1.0,
  0, 1, SWI, 1.702, 0, 0, 1, 8192, 0, 48, "3DM41D1M", 16384, 40, 8, 128, 202048, 0, 0, 0, 0, 0, 0, BF},
 {"file:llama3_8b.json", "llama", "llama", 0, 1, 4096, 14336, 1, SM, 0, 0, 0, 0, 1.0,
  0, 0, SWI, 1.702, 0, 0, 0, 0, 0, 32, "32D", 14336, 32, 8, 128, 128256, 0, 0, 0, 0, 0, 0, BF},
 {"file:gpt_oss_120b.json", "gpt_oss", "gpt_oss", 1, 128, 2880, 2880, 4, SM, 0, 0, 0, 1, 1.0,
  1, 0, OAI, 1.702, 7.0, 1, 0, 0, 0, 36, "36M", 0, 64, 8, 64, 201088, 0, 0, 0, 0, 0, 0, BF},
 {"file:mixtral_8x7b.json", "mixtral", "mixtral", 1, 8, 4096, 14336, 2, SM, 0, 0, 0, 1, 1.0,
  0, 0, SWI, 1.702, 0, 0, 0, 0, 0, 32, "32M", 0, 32, 8, 128, 32000, 0, 0, 0, 0, 0, 0, BF},
 {"file:model_dir", "mixtral", "mixtral", 1, 8, 4096, 14336, 2, SM, 0, 0, 0, 1, 1.0,
  0, 0, SWI, 1.702, 0, 0, 0, 0, 0, 32, "32M", 0, 32, 8, 128, 32000, 0, 0, 0, 0, 0, 0, BF},
 {"file:glm_4_5_air.json", "glm4_moe", "glm4_moe", 1, 128, 4096, 1408, 8, SG, 1, 1, 1, 1, 1.0,
  0, 0, SWI, 1.702, 0, 0, 1, 1408, 0, 46, "1D45M", 10944, 96, 8, 128, 151552, 0, 0, 0, 0, 0, 0, BF},
 {"file:synthetic_sqrtsoftplus.json", "deepseek_v4_test", "deepseek_v4_test", 1, 64, 1024, 512, 6, SQ, 1, 8, 3, 1, 1.5,
  0, 0, SWI, 1.702, 10.0, 0, 2, 1024, 0, 10, "2D4MD", 4096, 8, 8, 128, 50000, 0, 0, 0, 0, 0, 0, BF},
 {"file:synthetic_dense_gelu.json", "gemma", "gemma", 0, 1, 2048, 16384, 1, SM, 0, 0, 0, 0, 1.0,
  0, 0, MOE_ACT_GEGLU_TANH, 1.702, 0, 0, 0, 0, 0, 18, "18D", 16384, 8, 1, 256, 256000, 1, 0, 0, 0, 0, 0,
  MOE_DTYPE_F32},
};
/* clang-format on */

/* Expands "3D58M" / "24DM" into one 'D' or 'M' per layer. */
static void expand_pattern(const char *p, char *out, size_t size) {
    size_t n = 0;
    while (*p) {
        long count = strtol(p, (char **)&p, 10);
        const char *letters = p;
        while (*p == 'D' || *p == 'M') p++;
        if (count == 0) count = 1;
        for (long c = 0; c < count; c++)
            for (const char *q = letters; q < p && n + 1 < size; q++) out[n++] = *q;
    }
    out[n] = '\0';
}

static int near(double a, double b) { return fabs(a - b) <= 1e-6 * fmax(1.0, fabs(b)); }

static void check_expect(const expect *e, const moe_model_config *c) {
    const moe_layer_spec *s = &c->layer;
    const char *src = e->source;
#define EQ(field, want) CHECK((long long)(field) == (long long)(want), "%s: %s = %lld, expected %lld", src, #field, \
                              (long long)(field), (long long)(want))
    CHECK(strcmp(c->name, e->name) == 0, "%s: name \"%s\", expected \"%s\"", src, c->name, e->name);
    CHECK(strcmp(c->model_type, e->model_type) == 0, "%s: model_type \"%s\", expected \"%s\"", src, c->model_type,
          e->model_type);
    EQ(c->is_moe, e->is_moe);
    EQ(s->num_experts, e->E);
    EQ(s->hidden, e->H);
    EQ(s->intermediate, e->I);
    EQ(s->top_k, e->k);
    EQ(s->score, e->score);
    EQ(s->use_correction_bias, e->corr);
    EQ(s->n_group, e->n_group);
    if (e->n_group > 1) EQ(s->topk_group, e->topk_group);
    EQ(s->renormalize, e->renorm);
    CHECK(near(s->routed_scale, e->scale), "%s: routed_scale %g, expected %g", src, (double)s->routed_scale, e->scale);
    EQ(s->router_has_bias, e->router_bias);
    EQ(s->weight_on_input, e->on_input);
    EQ(s->activation, e->act);
    CHECK(near(s->act_alpha, e->alpha), "%s: act_alpha %g, expected %g", src, (double)s->act_alpha, e->alpha);
    CHECK(near(s->act_limit, e->limit), "%s: act_limit %g, expected %g", src, (double)s->act_limit, e->limit);
    EQ(s->expert_has_bias, e->expert_bias);
    EQ(s->num_shared_experts, e->n_shared);
    if (e->n_shared) EQ(s->shared_intermediate, e->shared_I);
    EQ(s->shared_gate, e->shared_gate);
    EQ(c->num_layers, e->layers);
    char want[MOE_MAX_LAYERS + 1], got[MOE_MAX_LAYERS + 1];
    expand_pattern(e->pattern, want, sizeof want);
    int64_t moe_count = 0;
    for (int64_t l = 0; l < c->num_layers && l < MOE_MAX_LAYERS; l++) {
        got[l] = c->layer_is_moe[l] ? 'M' : 'D';
        moe_count += c->layer_is_moe[l] != 0;
    }
    got[c->num_layers < MOE_MAX_LAYERS ? c->num_layers : 0] = '\0';
    CHECK(strcmp(got, want) == 0, "%s: layers %s, expected %s", src, got, want);
    int64_t want_moe = 0;
    for (const char *q = want; *q; q++) want_moe += *q == 'M';
    EQ(c->num_moe_layers, want_moe);
    EQ(c->num_moe_layers, moe_count);
    EQ(c->dense_intermediate, e->dense_I);
    EQ(c->num_heads, e->heads);
    EQ(c->num_kv_heads, e->kv);
    EQ(c->head_dim, e->head_dim);
    EQ(c->vocab_size, e->vocab);
    EQ(c->tie_word_embeddings, e->tie);
    EQ(c->q_lora_rank, e->q_lora);
    EQ(c->kv_lora_rank, e->kv_lora);
    EQ(c->qk_nope_head_dim, e->nope);
    EQ(c->qk_rope_head_dim, e->rope);
    EQ(c->v_head_dim, e->v_head);
    EQ(c->torch_dtype, e->dtype);
    CHECK(moe_layer_spec_validate(NULL, s) == MOE_STATUS_OK, "%s: spec does not validate: %s", src,
          moe_last_error(NULL));
#undef EQ
}

static void test_expected_configs(void) {
    for (size_t i = 0; i < sizeof expects / sizeof expects[0]; i++) {
        const expect *e = &expects[i];
        int before = checks_failed;
        moe_model_config cfg;
        memset(&cfg, 0xA5, sizeof cfg); /* poison: every field must be written */
        moe_status st;
        if (strncmp(e->source, "file:", 5) == 0) st = moe_config_load(NULL, fixture(e->source + 5), &cfg);
        else st = moe_config_preset(NULL, e->source, &cfg);
        CHECK(st == MOE_STATUS_OK, "%s: %s: %s", e->source, moe_status_string(st), moe_last_error(NULL));
        if (st == MOE_STATUS_OK) check_expect(e, &cfg);
        printf("%s %s\n", checks_failed == before ? "PASS" : "FAIL", e->source);
    }
}

static void test_preset_table(void) {
    int before = checks_failed;
    int n = moe_preset_count();
    CHECK(n >= 12, "moe_preset_count() = %d, expected >= 12", n);
    CHECK(moe_preset_name(-1) == NULL, "moe_preset_name(-1) not NULL");
    CHECK(moe_preset_name(n) == NULL, "moe_preset_name(count) not NULL");
    /* Every listed preset loads and appears in the table of expected values above. */
    for (int i = 0; i < n; i++) {
        const char *name = moe_preset_name(i);
        CHECK(name != NULL, "moe_preset_name(%d) is NULL", i);
        if (!name) continue;
        moe_model_config cfg;
        moe_status st = moe_config_preset(NULL, name, &cfg);
        CHECK(st == MOE_STATUS_OK, "preset %s: %s", name, moe_last_error(NULL));
        int listed = 0;
        for (size_t j = 0; j < sizeof expects / sizeof expects[0]; j++) listed |= strcmp(expects[j].source, name) == 0;
        CHECK(listed, "preset %s has no expected values in this test", name);
    }
    moe_model_config cfg;
    CHECK(moe_config_preset(NULL, "DeepSeek-V3", &cfg) == MOE_STATUS_OK && strcmp(cfg.name, "deepseek-v3") == 0,
          "preset names are case-insensitive");
    moe_context_t *ctx = NULL;
    CHECK(moe_context_create(MOE_BACKEND_CPU, 0, &ctx) == MOE_STATUS_OK, "context");
    moe_status st = moe_config_preset(ctx, "deepseek-v9", &cfg);
    CHECK(st == MOE_STATUS_NOT_FOUND, "unknown preset: %s", moe_status_string(st));
    CHECK(strstr(moe_last_error(ctx), "deepseek-v9") && strstr(moe_last_error(ctx), "deepseek-v3") &&
              strstr(moe_last_error(ctx), "llama-4-maverick"),
          "unknown preset message should name it and list the presets: %s", moe_last_error(ctx));
    CHECK(moe_config_preset(ctx, NULL, &cfg) == MOE_STATUS_NULL_POINTER, "NULL name");
    CHECK(moe_config_preset(ctx, "deepseek-v3", NULL) == MOE_STATUS_NULL_POINTER, "NULL out");
    CHECK(moe_config_preset(ctx, "mixtral-8x7b", &cfg) == MOE_STATUS_OK && moe_last_error(ctx)[0] == '\0',
          "success clears the message");
    moe_context_free(ctx);
    printf("%s preset table\n", checks_failed == before ? "PASS" : "FAIL");
}

/* ---- bad inputs ---------------------------------------------------------------------- */

typedef struct bad_case {
    const char *what;
    const char *json; /* text, or "file:" + fixture, or "path:" + path */
    moe_status status;
    const char *needle; /* the message must contain this */
} bad_case;

#define MIX_HEAD "{\"model_type\": \"mixtral\", \"num_hidden_layers\": 4, \"num_attention_heads\": 4, "
#define DS_HEAD "{\"model_type\": \"deepseek_v3\", \"num_hidden_layers\": 4, \"hidden_size\": 64, \"moe_intermediate_size\": 32, "

static const bad_case bad_cases[] = {
    {"garbled", "{\"hidden_size\": 64,, \"num_hidden_layers\": 2}", MOE_STATUS_PARSE_ERROR, "malformed JSON at byte"},
    {"empty", "", MOE_STATUS_PARSE_ERROR, "empty"},
    {"whitespace only", "  \n\t ", MOE_STATUS_PARSE_ERROR, "empty"},
    {"truncated", MIX_HEAD "\"hidden_size\": 64, \"intermediate_size\": 1", MOE_STATUS_PARSE_ERROR, "malformed JSON"},
    {"trailing garbage", "{\"hidden_size\": 64} x", MOE_STATUS_PARSE_ERROR, "byte 20"},
    {"array root", "[1, 2, 3]", MOE_STATUS_INVALID_ARGUMENT, "root"},
    {"array root file", "file:bad_array_root.json", MOE_STATUS_INVALID_ARGUMENT, "root"},
    {"string root", "\"config\"", MOE_STATUS_INVALID_ARGUMENT, "root"},
    {"missing hidden_size", MIX_HEAD "\"intermediate_size\": 128, \"num_local_experts\": 4, \"num_experts_per_tok\": 2}",
     MOE_STATUS_INVALID_ARGUMENT, "hidden_size"},
    {"missing num_hidden_layers", "{\"hidden_size\": 64, \"intermediate_size\": 128}", MOE_STATUS_INVALID_ARGUMENT,
     "num_hidden_layers"},
    {"string size", MIX_HEAD "\"hidden_size\": \"4096\", \"intermediate_size\": 128}", MOE_STATUS_INVALID_ARGUMENT,
     "hidden_size = \"4096\""},
    {"bool size", MIX_HEAD "\"hidden_size\": true, \"intermediate_size\": 128}", MOE_STATUS_INVALID_ARGUMENT,
     "hidden_size = true"},
    {"negative size", DS_HEAD "\"intermediate_size\": -5, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2}",
     MOE_STATUS_INVALID_ARGUMENT, "intermediate_size = -5"},
    {"negative expert width",
     "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"moe_intermediate_size\": -32, \"num_experts\": 8, "
     "\"num_experts_per_tok\": 2}",
     MOE_STATUS_INVALID_ARGUMENT, "moe_intermediate_size = -32"},
    {"1e30", MIX_HEAD "\"hidden_size\": 1e30, \"intermediate_size\": 128}", MOE_STATUS_INVALID_ARGUMENT,
     "hidden_size = 1e+30"},
    {"2^40 + 1", MIX_HEAD "\"hidden_size\": 1099511627777, \"intermediate_size\": 128}", MOE_STATUS_INVALID_ARGUMENT,
     "hidden_size = 1099511627777"},
    {"fractional top-k", MIX_HEAD "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_local_experts\": 8, "
                         "\"num_experts_per_tok\": 2.5}",
     MOE_STATUS_INVALID_ARGUMENT, "num_experts_per_tok = 2.5"},
    {"zero layers", "{\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 0}",
     MOE_STATUS_INVALID_ARGUMENT, "num_hidden_layers = 0"},
    {"too many layers", "{\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2000}",
     MOE_STATUS_UNSUPPORTED, "num_hidden_layers = 2000"},
    {"n_group not dividing E", DS_HEAD "\"n_routed_experts\": 256, \"num_experts_per_tok\": 8, \"n_group\": 3, "
                               "\"topk_group\": 2, \"intermediate_size\": 64}",
     MOE_STATUS_INVALID_ARGUMENT, "n_group = 3"},
    {"topk_group > n_group", DS_HEAD "\"n_routed_experts\": 64, \"num_experts_per_tok\": 4, \"n_group\": 4, "
                             "\"topk_group\": 5, \"intermediate_size\": 64}",
     MOE_STATUS_INVALID_ARGUMENT, "topk_group = 5"},
    {"top_k beyond the kept groups", DS_HEAD "\"n_routed_experts\": 64, \"num_experts_per_tok\": 12, \"n_group\": 8, "
                                     "\"topk_group\": 1, \"intermediate_size\": 64}",
     MOE_STATUS_INVALID_ARGUMENT, "num_experts_per_tok = 12"},
    {"top_k > E", MIX_HEAD "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_local_experts\": 8, "
                  "\"num_experts_per_tok\": 9}",
     MOE_STATUS_INVALID_ARGUMENT, "num_experts_per_tok = 9"},
    {"missing top_k", MIX_HEAD "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_local_experts\": 8}",
     MOE_STATUS_INVALID_ARGUMENT, "num_experts_per_tok"},
    {"missing expert width", "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_experts\": 8, "
                             "\"num_experts_per_tok\": 2}",
     MOE_STATUS_INVALID_ARGUMENT, "moe_intermediate_size"},
    {"dense layers without a dense width",
     "{\"hidden_size\": 64, \"num_hidden_layers\": 4, \"moe_intermediate_size\": 32, \"num_experts\": 8, "
     "\"num_experts_per_tok\": 2, \"mlp_only_layers\": [0]}",
     MOE_STATUS_INVALID_ARGUMENT, "intermediate_size"},
    {"mlp_only_layers out of range",
     "{\"hidden_size\": 64, \"num_hidden_layers\": 4, \"intermediate_size\": 128, \"moe_intermediate_size\": 32, "
     "\"num_experts\": 8, \"num_experts_per_tok\": 2, \"mlp_only_layers\": [4]}",
     MOE_STATUS_INVALID_ARGUMENT, "mlp_only_layers"},
    {"mlp_only_layers not an array",
     "{\"hidden_size\": 64, \"num_hidden_layers\": 4, \"intermediate_size\": 128, \"moe_intermediate_size\": 32, "
     "\"num_experts\": 8, \"num_experts_per_tok\": 2, \"mlp_only_layers\": 3}",
     MOE_STATUS_INVALID_ARGUMENT, "mlp_only_layers = 3"},
    {"unknown activation", MIX_HEAD "\"hidden_size\": 64, \"intermediate_size\": 128, \"hidden_act\": \"mish\"}",
     MOE_STATUS_UNSUPPORTED, "hidden_act = \"mish\""},
    {"unknown activation file", "file:bad_unknown_activation.json", MOE_STATUS_UNSUPPORTED, "hidden_act = \"mish\""},
    {"activation not a string", MIX_HEAD "\"hidden_size\": 64, \"intermediate_size\": 128, \"hidden_act\": 7}",
     MOE_STATUS_INVALID_ARGUMENT, "hidden_act = 7"},
    {"unknown scoring_func", DS_HEAD "\"n_routed_experts\": 8, \"num_experts_per_tok\": 2, \"scoring_func\": \"tanh\", "
                             "\"intermediate_size\": 64}",
     MOE_STATUS_UNSUPPORTED, "scoring_func = \"tanh\""},
    {"unknown topk_method", DS_HEAD "\"n_routed_experts\": 8, \"num_experts_per_tok\": 2, \"topk_method\": \"magic\", "
                            "\"intermediate_size\": 64}",
     MOE_STATUS_UNSUPPORTED, "topk_method = \"magic\""},
    {"zero routed_scaling_factor", DS_HEAD "\"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
                                   "\"routed_scaling_factor\": 0, \"intermediate_size\": 64}",
     MOE_STATUS_INVALID_ARGUMENT, "routed_scaling_factor"},
    {"norm_topk_prob not a bool", DS_HEAD "\"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
                                  "\"norm_topk_prob\": \"yes\", \"intermediate_size\": 64}",
     MOE_STATUS_INVALID_ARGUMENT, "norm_topk_prob"},
    {"unknown torch_dtype", MIX_HEAD "\"hidden_size\": 64, \"intermediate_size\": 128, \"torch_dtype\": \"int4\"}",
     MOE_STATUS_UNSUPPORTED, "torch_dtype = \"int4\""},
    {"negative swiglu_limit", MIX_HEAD "\"hidden_size\": 64, \"intermediate_size\": 128, \"swiglu_limit\": -1}",
     MOE_STATUS_INVALID_ARGUMENT, "swiglu_limit"},
    {"model_type not a string", "{\"model_type\": 3, \"hidden_size\": 64, \"intermediate_size\": 128, "
                                "\"num_hidden_layers\": 2}",
     MOE_STATUS_INVALID_ARGUMENT, "model_type = 3"},
    {"llama4 with top-2", "{\"model_type\": \"llama4\", \"text_config\": {\"hidden_size\": 64, \"intermediate_size\": 32, "
                          "\"num_hidden_layers\": 2, \"num_local_experts\": 4, \"num_experts_per_tok\": 2}}",
     MOE_STATUS_UNSUPPORTED, "num_experts_per_tok = 2"},
    /* Families whose routing or layers this reader does not model (session 37's review): refused,
     * not read with the generic defaults. */
    {"phimoe", "{\"model_type\": \"phimoe\", \"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2, "
               "\"num_local_experts\": 4, \"num_experts_per_tok\": 2}",
     MOE_STATUS_UNSUPPORTED, "model_type \"phimoe\" is not supported"},
    {"ERNIE keys", "{\"model_type\": \"ernie_next\", \"hidden_size\": 64, \"intermediate_size\": 128, "
                   "\"num_hidden_layers\": 2, \"moe_num_experts\": 8, \"moe_k\": 2}",
     MOE_STATUS_UNSUPPORTED, "moe_num_experts is a key of ERNIE-4.5"},
    {"Granite shared expert", MIX_HEAD "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_local_experts\": 4, "
                              "\"num_experts_per_tok\": 2, \"shared_intermediate_size\": 256}",
     MOE_STATUS_UNSUPPORTED, "shared_intermediate_size is a key of Granite"},
    {"text model under thinker_config", "{\"model_type\": \"x_omni\", \"thinker_config\": {\"text_config\": "
                                        "{\"hidden_size\": 64}}}",
     MOE_STATUS_UNSUPPORTED, "under thinker_config"},
    {"mlp_layer_types disagrees", DS_HEAD "\"intermediate_size\": 128, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
                                  "\"first_k_dense_replace\": 1, \"mlp_layer_types\": [\"sparse\", \"sparse\", "
                                  "\"sparse\", \"sparse\"]}",
     MOE_STATUS_INVALID_ARGUMENT, "mlp_layer_types[0] = \"sparse\", but the config's other layer rules make layer 0 dense"},
    /* A family this reader does not know whose dense layers only mlp_layer_types gives: refused as
     * such, not blamed on layer rules the config does not have (it was INVALID_ARGUMENT, "the
     * config's other layer rules make layer 0 MoE"). */
    {"mlp_layer_types alone, family not known by model_type",
     "{\"model_type\": \"x_future_moe\", \"num_hidden_layers\": 3, \"hidden_size\": 64, \"intermediate_size\": 128, "
     "\"moe_intermediate_size\": 32, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
     "\"mlp_layer_types\": [\"dense\", \"sparse\", \"sparse\"]}",
     MOE_STATUS_UNSUPPORTED, "model_type \"x_future_moe\" is not supported (this reader does not model a family whose "
                             "dense layers only mlp_layer_types gives: mlp_layer_types[0] = \"dense\")"},
    {"Mistral-4 with n_group > 1", "{\"model_type\": \"mistral4\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
                                   "\"moe_intermediate_size\": 32, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
                                   "\"n_group\": 2, \"topk_group\": 1}",
     MOE_STATUS_UNSUPPORTED, "sum of their two best softmax scores"},
    {"mlp_layer_types too short", DS_HEAD "\"intermediate_size\": 128, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
                                  "\"mlp_layer_types\": [\"sparse\"]}",
     MOE_STATUS_INVALID_ARGUMENT, "expected an array of num_hidden_layers (4)"},
    {"raw control byte", "{\"hidden_size\": 64,\x01 \"num_hidden_layers\": 2, \"intermediate_size\": 128}",
     MOE_STATUS_PARSE_ERROR, "a raw control byte 0x01 at byte 19"},
    {"routed_scaling_factor below float", DS_HEAD "\"intermediate_size\": 128, \"n_routed_experts\": 8, "
                                          "\"num_experts_per_tok\": 2, \"routed_scaling_factor\": 1e-50}",
     MOE_STATUS_INVALID_ARGUMENT, "routed_scaling_factor = 1e-50 is below fp32's normal range"},
    {"duplicate key", "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"intermediate_size\": 128, \"hidden_size\": 128}",
     MOE_STATUS_PARSE_ERROR, "key \"hidden_size\" appears twice"},
    {"duplicate key in text_config", "{\"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 2, "
                                     "\"num_experts\": 4, \"num_experts\": 8}}",
     MOE_STATUS_PARSE_ERROR, "key \"num_experts\" in text_config appears twice"},
    {"missing file", "path:/nonexistent/moefuse/config.json", MOE_STATUS_IO_ERROR, "/nonexistent/moefuse/config.json"},
    {"directory without config.json", "path:/", MOE_STATUS_IO_ERROR, "/config.json"},
};

/* A FIFO with no writer reads as empty instead of blocking the call forever (fopen did). */
static void test_fifo_does_not_block(void) {
    char dir[] = "/tmp/moefuse-fifo-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[64];
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(mkfifo(path, 0600) == 0, "mkfifo %s", path);
    alarm(20); /* a hang fails the test (SIGALRM) instead of stalling CI */
    moe_model_config cfg;
    moe_status st = moe_config_load(NULL, dir, &cfg);
    alarm(0);
    CHECK(st == MOE_STATUS_PARSE_ERROR && strstr(moe_last_error(NULL), "empty input"), "FIFO: %s",
          moe_last_error(NULL));
    unlink(path);
    rmdir(dir);
}

/* Routing that a family's config leaves unsaid (session 37's review found these read wrongly). */
static void test_family_defaults(void) {
    static const struct {
        const char *what, *json;
        moe_score score;
        int corr, renorm, moe_layers;
    } cases[] = {
        {"MiniMax-M2: use_routing_bias is the correction bias",
         "{\"model_type\": \"minimax_m2\", \"hidden_size\": 64, \"intermediate_size\": 32, \"num_hidden_layers\": 2, "
         "\"num_local_experts\": 8, \"num_experts_per_tok\": 2, \"scoring_func\": \"sigmoid\", "
         "\"use_routing_bias\": true, \"shared_intermediate_size\": 0}",
         MOE_SCORE_SIGMOID, 1, 1, 2},
        {"GLM-4.7-Flash: noaux_tc with sigmoid scores, layers as mlp_layer_types says",
         "{\"model_type\": \"glm4_moe_lite\", \"hidden_size\": 64, \"intermediate_size\": 128, "
         "\"moe_intermediate_size\": 32, \"num_hidden_layers\": 3, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
         "\"topk_method\": \"noaux_tc\", \"first_k_dense_replace\": 1, "
         "\"mlp_layer_types\": [\"dense\", \"sparse\", \"sparse\"]}",
         MOE_SCORE_SIGMOID, 1, 1, 2},
        /* Configs as transformers 5.25 writes them (tools/hf_parity.py): */
        {"GLM-4.7-Flash: mlp_layer_types alone (no first_k_dense_replace)",
         "{\"model_type\": \"glm4_moe_lite\", \"hidden_size\": 64, \"intermediate_size\": 128, "
         "\"moe_intermediate_size\": 32, \"num_hidden_layers\": 3, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
         "\"mlp_layer_types\": [\"dense\", \"sparse\", \"sparse\"]}",
         MOE_SCORE_SIGMOID, 1, 1, 2},
        {"MiniMax-M2: neither scoring_func nor use_routing_bias",
         "{\"model_type\": \"minimax_m2\", \"hidden_size\": 64, \"intermediate_size\": 32, \"num_hidden_layers\": 2, "
         "\"num_local_experts\": 8, \"num_experts_per_tok\": 2}",
         MOE_SCORE_SIGMOID, 1, 1, 2},
        {"DeepSeek-V3 at top-1: norm_topk_prob still renormalises (transformers, vLLM)",
         "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"intermediate_size\": 128, "
         "\"moe_intermediate_size\": 32, \"num_hidden_layers\": 2, \"n_routed_experts\": 8, \"num_experts_per_tok\": 1, "
         "\"norm_topk_prob\": true}",
         MOE_SCORE_SIGMOID, 1, 1, 2},
        {"Qwen3.5-MoE: renormalises without norm_topk_prob",
         "{\"model_type\": \"qwen3_5_moe\", \"text_config\": {\"model_type\": \"qwen3_5_moe_text\", \"hidden_size\": 64, "
         "\"moe_intermediate_size\": 32, \"num_hidden_layers\": 2, \"num_experts\": 8, \"num_experts_per_tok\": 2}}",
         MOE_SCORE_SOFTMAX, 0, 1, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        moe_model_config cfg;
        moe_status st = moe_config_parse(NULL, cases[i].json, strlen(cases[i].json), &cfg);
        CHECK(st == MOE_STATUS_OK, "%s: %s", cases[i].what, moe_last_error(NULL));
        if (st != MOE_STATUS_OK) continue;
        CHECK(cfg.layer.score == cases[i].score && cfg.layer.use_correction_bias == cases[i].corr &&
                  cfg.layer.renormalize == cases[i].renorm && cfg.num_moe_layers == cases[i].moe_layers,
              "%s: score %d corr %d renorm %d moe layers %lld", cases[i].what, (int)cfg.layer.score,
              (int)cfg.layer.use_correction_bias, (int)cfg.layer.renormalize, (long long)cfg.num_moe_layers);
    }
}

/* Families that transformers runs with DeepSeek-V3's router (or as Glm4Moe / DeepseekV3 models)
 * while their configs say nothing of it: sigmoid scores, correction bias, renormalised. */
static void test_noaux_families(void) {
    static const char *const types[] = {"glm_moe_dsa", "dots1",     "solar_open",   "sarvam_moe",
                                        "param2moe",   "sarvam_mla", "mimo_v2_flash"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"model_type\": \"%s\", \"hidden_size\": 64, \"intermediate_size\": 128, "
                 "\"moe_intermediate_size\": 32, \"num_hidden_layers\": 3, \"n_routed_experts\": 8, "
                 "\"num_experts_per_tok\": 2, \"n_group\": 1, \"topk_group\": 1, \"first_k_dense_replace\": 1, "
                 "\"routed_scaling_factor\": 2.5}",
                 types[i]);
        moe_model_config cfg;
        moe_status st = moe_config_parse(NULL, json, strlen(json), &cfg);
        CHECK(st == MOE_STATUS_OK, "%s: %s", types[i], moe_last_error(NULL));
        if (st != MOE_STATUS_OK) continue;
        CHECK(cfg.layer.score == MOE_SCORE_SIGMOID && cfg.layer.use_correction_bias && cfg.layer.renormalize &&
                  cfg.layer.routed_scale == 2.5f && cfg.num_moe_layers == 2,
              "%s: score %d corr %d renorm %d scale %g moe layers %lld", types[i], (int)cfg.layer.score,
              (int)cfg.layer.use_correction_bias, (int)cfg.layer.renormalize, (double)cfg.layer.routed_scale,
              (long long)cfg.num_moe_layers);
    }
    /* GPT-OSS's swiglu_alpha (transformers' GptOssConfig) is read, not fixed at 1.702. */
    const char *oss = "{\"model_type\": \"gpt_oss\", \"hidden_size\": 64, \"intermediate_size\": 32, "
                      "\"num_hidden_layers\": 2, \"num_local_experts\": 8, \"num_experts_per_tok\": 2, "
                      "\"swiglu_alpha\": 1.25, \"swiglu_limit\": 5.0}";
    moe_model_config cfg;
    moe_status st = moe_config_parse(NULL, oss, strlen(oss), &cfg);
    CHECK(st == MOE_STATUS_OK && cfg.layer.activation == MOE_ACT_SWIGLU_OAI && cfg.layer.act_alpha == 1.25f &&
              cfg.layer.act_limit == 5.0f,
          "gpt_oss swiglu_alpha: %s alpha %g limit %g", moe_last_error(NULL), (double)cfg.layer.act_alpha,
          (double)cfg.layer.act_limit);
    const char *oss_default = "{\"model_type\": \"gpt_oss\", \"hidden_size\": 64, \"intermediate_size\": 32, "
                              "\"num_hidden_layers\": 2, \"num_local_experts\": 8, \"num_experts_per_tok\": 2}";
    st = moe_config_parse(NULL, oss_default, strlen(oss_default), &cfg);
    CHECK(st == MOE_STATUS_OK && cfg.layer.act_alpha == 1.702f && cfg.layer.act_limit == 7.0f,
          "gpt_oss defaults: %s alpha %g limit %g", moe_last_error(NULL), (double)cfg.layer.act_alpha,
          (double)cfg.layer.act_limit);
}

/* MoE families transformers 5.25 implements whose routing or experts the layer spec does not
 * model (tools/hf_parity.py): refused by model_type, not read with the generic defaults. */
static void test_refused_families(void) {
    static const char *const types[] = {"jetmoe",       "doge",      "zaya",          "lfm2_moe",
                                        "kolibri1",     "flint",     "lara_mini",     "inkling_text",
                                        "inkling2_text", "muse_spark_text", "openai_privacy_filter",
                                        /* were INVALID_ARGUMENT with a layer-rule message, or not checked: */
                                        "axk1", "hy_v4", "hy_v4_vl", "hy_v4_vl_text", "qwen3_omni_moe",
                                        /* were refused by a key of another family (Ling, ERNIE): */
                                        "ergo", "ernie4_5_vl_moe", "hy_v3"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"model_type\": \"%s\", \"hidden_size\": 64, \"intermediate_size\": 128, "
                 "\"num_hidden_layers\": 2, \"num_experts\": 8, \"num_experts_per_tok\": 2}",
                 types[i]);
        moe_model_config cfg;
        moe_status st = moe_config_parse(NULL, json, strlen(json), &cfg);
        CHECK(st == MOE_STATUS_UNSUPPORTED && strstr(moe_last_error(NULL), types[i]) &&
                  strstr(moe_last_error(NULL), "is not supported"),
              "%s: %d %s", types[i], (int)st, moe_last_error(NULL));
    }
}

/* The MoE families of transformers 5.25 that this reader now reads by model_type (they were
 * refused with INVALID_ARGUMENT and a layer-rule or field message, or read with the generic
 * defaults): each config as transformers writes it (or as the release ships it, "hub") and the
 * spec its MoE block computes, checked end to end against transformers by tools/hf_parity.py. */
typedef struct family_case {
    const char *what, *json;
    int64_t k;
    moe_score score;
    int corr;
    int64_t n_group, topk_group;
    int renorm;
    double scale;
    int64_t n_shared, shared_I;
    double limit;
    const char *pattern;
} family_case;

#define T64 "\"hidden_size\": 64, \"intermediate_size\": 96, \"moe_intermediate_size\": 32, \"num_attention_heads\": 4, "
#define SQ3 MOE_SCORE_SQRTSOFTPLUS
static const family_case family_cases[] = {
    {"axk2 (A.X-K2-Light: no groups)",
     "{\"model_type\": \"axk2\", " T64 "\"num_hidden_layers\": 3, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
     "\"n_group\": null, \"topk_group\": null, \"n_shared_experts\": 1, \"routed_scaling_factor\": 2.5, "
     "\"norm_topk_prob\": true, \"mlp_layer_types\": [\"dense\", \"sparse\", \"sparse\"]}",
     2, SG, 1, 0, 0, 1, 2.5, 1, 32, 0, "DMM"},
    {"axk2, legacy layer keys and transformers' defaults (1 shared, scale 2.5, top-8)",
     "{\"model_type\": \"axk2\", " T64 "\"num_hidden_layers\": 5, \"n_routed_experts\": 16, "
     "\"first_k_dense_replace\": 1, \"moe_layer_freq\": 2}",
     8, SG, 1, 0, 0, 1, 2.5, 1, 32, 0, "DDMDM"},
    {"beam: grouped, no shared expert",
     "{\"model_type\": \"beam\", " T64 "\"num_hidden_layers\": 4, \"num_experts\": 16, \"num_experts_per_tok\": 2, "
     "\"n_group\": 4, \"topk_group\": 2, \"routed_scaling_factor\": 1.5, \"norm_topk_prob\": true, "
     "\"mlp_layer_types\": [\"dense\", \"dense\", \"dense\", \"sparse\"]}",
     2, SG, 1, 4, 2, 1, 1.5, 0, 0, 0, "DDDM"},
    {"beam, transformers' defaults (n_group 8, topk_group 4, scale 2.5, top-8, 3 dense layers)",
     "{\"model_type\": \"beam\", " T64 "\"num_hidden_layers\": 5, \"num_experts\": 64}",
     8, SG, 1, 8, 4, 1, 2.5, 0, 0, 0, "3D2M"},
    {"minicpm5_moe",
     "{\"model_type\": \"minicpm5_moe\", " T64 "\"num_hidden_layers\": 3, \"n_routed_experts\": 8, "
     "\"num_experts_per_tok\": 2, \"n_shared_experts\": 2, \"routed_scaling_factor\": 3.66, \"n_group\": 1, "
     "\"topk_group\": 1, \"mlp_layer_types\": [\"dense\", \"sparse\", \"sparse\"]}",
     2, SG, 1, 1, 1, 1, 3.66, 2, 64, 0, "DMM"},
    {"minicpm5_moe hub: first_k_dense_replace unsaid is 1, scale 3.66, 1 shared",
     "{\"model_type\": \"minicpm5_moe\", " T64 "\"num_hidden_layers\": 3, \"n_routed_experts\": 8, "
     "\"num_experts_per_tok\": 2}",
     2, SG, 1, 1, 1, 1, 3.66, 1, 32, 0, "DMM"},
    {"dots3_note: shared width shared_experts_intermediate_size x n_shared_experts",
     "{\"model_type\": \"dots3_note\", \"text_config\": {\"model_type\": \"dots3_note_text\", " T64
     "\"num_hidden_layers\": 3, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, \"n_shared_experts\": 2, "
     "\"shared_experts_intermediate_size\": 48, \"routed_scaling_factor\": 1.0, \"n_group\": 1, \"topk_group\": 1, "
     "\"mlp_layer_types\": [\"dense\", \"sparse\", \"sparse\"]}}",
     2, SG, 1, 1, 1, 1, 1.0, 2, 96, 0, "DMM"},
    {"dots3_note hub: text model at the top, moe_shared_expert_intermediate_size, per-layer moe_layer_freq",
     "{\"model_type\": \"dots3_note\", " T64 "\"num_hidden_layers\": 6, \"n_routed_experts\": 8, "
     "\"num_experts_per_tok\": 2, \"moe_shared_expert_intermediate_size\": 40, \"first_k_dense_replace\": 2, "
     "\"moe_layer_freq\": [0, 0, 1, 0, 1, 1, 1]}",
     2, SG, 1, 1, 1, 1, 1.0, 1, 40, 0, "DDMDMM"},
    {"glm5_next: head_dim 0 (dropped by transformers), swiglu_limit 10 unless said, shared expert clamped too",
     "{\"model_type\": \"glm5_next\", \"text_config\": {\"model_type\": \"glm5_next_text\", " T64
     "\"num_key_value_heads\": 4, \"head_dim\": 0, \"qk_rope_head_dim\": 0, \"num_hidden_layers\": 4, "
     "\"n_routed_experts\": 8, \"num_experts_per_tok\": 2, \"n_shared_experts\": 1, \"routed_scaling_factor\": 2.5, "
     "\"n_group\": 1, \"topk_group\": 1, \"mlp_layer_types\": [\"dense\", \"dense\", \"dense\", \"sparse\"]}}",
     2, SG, 1, 1, 1, 1, 2.5, 1, 32, 10.0, "DDDM"},
    {"laguna: sigmoid + correction bias, always renormalised, moe_routed_scaling_factor, ungated shared expert",
     "{\"model_type\": \"laguna\", " T64 "\"num_hidden_layers\": 3, \"num_experts\": 8, \"num_experts_per_tok\": 2, "
     "\"shared_expert_intermediate_size\": 40, \"moe_routed_scaling_factor\": 2.5, \"norm_topk_prob\": false, "
     "\"moe_router_logit_softcapping\": 0.0, \"mlp_layer_types\": [\"dense\", \"sparse\", \"sparse\"]}",
     2, SG, 1, 0, 0, 1, 2.5, 1, 40, 0, "DMM"},
    {"step3p7 (text model step3p5): share_expert_dim, moe_router_scaling_factor, no clamps",
     "{\"model_type\": \"step3p7\", \"text_config\": {\"model_type\": \"step3p5\", " T64
     "\"num_hidden_layers\": 4, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, \"share_expert_dim\": 40, "
     "\"moe_router_scaling_factor\": 3.0, \"swiglu_limits\": null, \"swiglu_limits_shared\": null, "
     "\"mlp_bias\": false, \"mlp_layer_types\": [\"dense\", \"dense\", \"dense\", \"sparse\"]}}",
     2, SG, 1, 0, 0, 1, 3.0, 1, 40, 0, "DDDM"},
    {"step3p5 hub: moe_num_experts, moe_top_k, moe_layers_enum, share_expert_dims, swigluoai, an MTP layer's "
     "clamp",
     "{\"model_type\": \"step3p5\", " T64 "\"num_hidden_layers\": 5, \"moe_num_experts\": 8, \"moe_top_k\": 2, "
     "\"moe_layers_enum\": \"2,3, 4,\", \"share_expert_dims\": 40, \"hidden_act\": \"swigluoai\", "
     "\"num_nextn_predict_layers\": 1, \"swiglu_limits\": [0, 0, 0, 0, 0, 7.0]}",
     2, SG, 1, 0, 0, 1, 1.0, 1, 40, 0, "2D3M"},
    {"unlimited_ocr: DeepSeek-V2's router (no renormalisation whatever norm_topk_prob says), 2 shared unless said",
     "{\"model_type\": \"unlimited_ocr\", \"text_config\": {\"model_type\": \"unlimited_ocr_text\", " T64
     "\"num_hidden_layers\": 3, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, \"topk_method\": \"greedy\", "
     "\"norm_topk_prob\": true, \"mlp_layer_types\": [\"dense\", \"sparse\", \"sparse\"]}}",
     2, SM, 0, 0, 0, 0, 1.0, 2, 64, 0, "DMM"},
    {"deepseek_v4 without hash layers: sqrtsoftplus, always renormalised, one shared expert, clamp 10",
     "{\"model_type\": \"deepseek_v4\", " T64 "\"num_hidden_layers\": 3, \"n_routed_experts\": 8, "
     "\"num_experts_per_tok\": 2, \"n_shared_experts\": 2, \"norm_topk_prob\": false, \"n_group\": 4, "
     "\"topk_group\": 2, \"mlp_layer_types\": [\"moe\", \"moe\", \"moe\"]}",
     2, SQ3, 1, 0, 0, 1, 1.5, 1, 32, 10.0, "3M"},
    {"deepseek_v4 hub: num_hash_layers 0",
     "{\"model_type\": \"deepseek_v4\", " T64 "\"num_hidden_layers\": 2, \"n_routed_experts\": 8, "
     "\"num_experts_per_tok\": 2, \"num_hash_layers\": 0, \"swiglu_limit\": 7.0, \"routed_scaling_factor\": 2.0, "
     "\"scoring_func\": \"sqrtsoftplus\"}",
     2, SQ3, 1, 0, 0, 1, 2.0, 1, 32, 7.0, "2M"},
    {"deepseek_v2: norm_topk_prob true is not applied (transformers' DeepseekV2 router ignores it)",
     "{\"model_type\": \"deepseek_v2\", " T64 "\"num_hidden_layers\": 2, \"n_routed_experts\": 8, "
     "\"num_experts_per_tok\": 2, \"n_shared_experts\": 1, \"topk_method\": \"greedy\", \"norm_topk_prob\": true, "
     "\"routed_scaling_factor\": 16.0}",
     2, SM, 0, 0, 0, 0, 16.0, 1, 32, 0, "2M"},
    {"qwen3_omni_moe_thinker: Qwen3-Omni's text model renormalises unless norm_topk_prob says otherwise",
     "{\"model_type\": \"qwen3_omni_moe_thinker\", \"text_config\": {\"model_type\": \"qwen3_omni_moe_text\", " T64
     "\"num_hidden_layers\": 2, \"num_experts\": 8, \"num_experts_per_tok\": 2, \"decoder_sparse_step\": 1}}",
     2, SM, 0, 0, 0, 1, 1.0, 0, 0, 0, "2M"},
};
#undef T64
#undef SQ3

static void test_family_reading(void) {
    for (size_t i = 0; i < sizeof family_cases / sizeof family_cases[0]; i++) {
        const family_case *c = &family_cases[i];
        int before = checks_failed;
        moe_model_config cfg;
        moe_status st = moe_config_parse(NULL, c->json, strlen(c->json), &cfg);
        CHECK(st == MOE_STATUS_OK, "%s: %s: %s", c->what, moe_status_string(st), moe_last_error(NULL));
        if (st == MOE_STATUS_OK) {
            const moe_layer_spec *s = &cfg.layer;
            char want[MOE_MAX_LAYERS + 1], got[MOE_MAX_LAYERS + 1];
            expand_pattern(c->pattern, want, sizeof want);
            for (int64_t l = 0; l < cfg.num_layers; l++) got[l] = cfg.layer_is_moe[l] ? 'M' : 'D';
            got[cfg.num_layers] = '\0';
            CHECK(s->top_k == c->k && s->score == c->score && s->use_correction_bias == c->corr &&
                      s->n_group == c->n_group && (c->n_group <= 1 || s->topk_group == c->topk_group) &&
                      s->renormalize == c->renorm && near(s->routed_scale, c->scale) &&
                      s->num_shared_experts == c->n_shared && s->shared_intermediate == c->shared_I &&
                      s->shared_gate == 0 && s->activation == MOE_ACT_SWIGLU && near(s->act_limit, c->limit) &&
                      strcmp(got, want) == 0,
                  "%s: k %lld score %d corr %d groups %lld/%lld renorm %d scale %g shared %lld x %lld gate %d act %d "
                  "limit %g layers %s (expected %s)",
                  c->what, (long long)s->top_k, (int)s->score, (int)s->use_correction_bias, (long long)s->n_group,
                  (long long)s->topk_group, (int)s->renormalize, (double)s->routed_scale,
                  (long long)s->num_shared_experts, (long long)s->shared_intermediate, (int)s->shared_gate,
                  (int)s->activation, (double)s->act_limit, got, want);
        }
        printf("%s family %s\n", checks_failed == before ? "PASS" : "FAIL", c->what);
    }
}

/* Variants of those families that ask for what the layer spec does not model: refused as
 * MOE_STATUS_UNSUPPORTED with a message naming the family and the key (they were read with the
 * generic defaults, or refused with a field message). */
static void test_refused_variants(void) {
#define V64 "\"hidden_size\": 64, \"intermediate_size\": 96, \"moe_intermediate_size\": 32, "
    static const struct {
        const char *what, *json, *needle;
    } cases[] = {
        {"deepseek_v4, hash layers by default",
         "{\"model_type\": \"deepseek_v4\", " V64 "\"num_hidden_layers\": 4, \"n_routed_experts\": 8, "
         "\"num_experts_per_tok\": 2}",
         "model_type \"deepseek_v4\" without mlp_layer_types or num_hash_layers"},
        {"deepseek_v4, hash_moe in mlp_layer_types",
         "{\"model_type\": \"deepseek_v4\", " V64 "\"num_hidden_layers\": 2, \"n_routed_experts\": 8, "
         "\"num_experts_per_tok\": 2, \"mlp_layer_types\": [\"moe\", \"hash_moe\"]}",
         "model_type \"deepseek_v4\" with mlp_layer_types[1] = \"hash_moe\" is not supported"},
        {"deepseek_v4, num_hash_layers",
         "{\"model_type\": \"deepseek_v4\", " V64 "\"num_hidden_layers\": 4, \"n_routed_experts\": 8, "
         "\"num_experts_per_tok\": 2, \"num_hash_layers\": 2}",
         "model_type \"deepseek_v4\" with num_hash_layers = 2 is not supported"},
        {"axk2 with groups",
         "{\"model_type\": \"axk2\", " V64 "\"num_hidden_layers\": 2, \"n_routed_experts\": 8, "
         "\"num_experts_per_tok\": 2, \"n_group\": 4, \"topk_group\": 2}",
         "model_type \"axk2\" with n_group = 4 is not supported"},
        {"laguna, soft-capped router logits",
         "{\"model_type\": \"laguna\", " V64 "\"num_hidden_layers\": 2, \"num_experts\": 8, \"num_experts_per_tok\": 2, "
         "\"moe_router_logit_softcapping\": 30.0}",
         "model_type \"laguna\" with moe_router_logit_softcapping = 30 is not supported"},
        {"laguna, routing weight on the input",
         "{\"model_type\": \"laguna\", " V64 "\"num_hidden_layers\": 2, \"num_experts\": 8, \"num_experts_per_tok\": 2, "
         "\"moe_apply_router_weight_on_input\": true}",
         "model_type \"laguna\" with moe_apply_router_weight_on_input = true is not supported"},
        {"step3p5, a layer's clamp after the activation",
         "{\"model_type\": \"step3p5\", " V64 "\"num_hidden_layers\": 3, \"n_routed_experts\": 8, "
         "\"num_experts_per_tok\": 2, \"swiglu_limits\": [0, 0, 7.0]}",
         "model_type \"step3p5\" with swiglu_limits = an array is not supported"},
        {"step3p5, shared expert clamp",
         "{\"model_type\": \"step3p7\", \"text_config\": {\"model_type\": \"step3p5\", " V64 "\"num_hidden_layers\": 3, "
         "\"n_routed_experts\": 8, \"num_experts_per_tok\": 2, \"swiglu_limits_shared\": [0, 16.0, 0]}}",
         "model_type \"step3p5\" with swiglu_limits_shared = an array is not supported"},
        {"step3p5, biased shared expert",
         "{\"model_type\": \"step3p5\", " V64 "\"num_hidden_layers\": 3, \"n_routed_experts\": 8, "
         "\"num_experts_per_tok\": 2, \"mlp_bias\": true}",
         "model_type \"step3p5\" with mlp_bias = true is not supported"},
        {"deepseek_v2, biased shared expert",
         "{\"model_type\": \"deepseek_v2\", " V64 "\"num_hidden_layers\": 2, \"n_routed_experts\": 8, "
         "\"num_experts_per_tok\": 2, \"n_shared_experts\": 1, \"mlp_bias\": true}",
         "model_type \"deepseek_v2\" with mlp_bias = true is not supported"},
        {"deepseek_v2, sigmoid scores (its router takes a softmax)",
         "{\"model_type\": \"deepseek_v2\", " V64 "\"num_hidden_layers\": 2, \"n_routed_experts\": 8, "
         "\"num_experts_per_tok\": 2, \"scoring_func\": \"sigmoid\"}",
         "model_type \"deepseek_v2\" with scoring_func = \"sigmoid\" is not supported"},
        {"deepseek_v2, noaux_tc",
         "{\"model_type\": \"deepseek_v2\", " V64 "\"num_hidden_layers\": 2, \"n_routed_experts\": 8, "
         "\"num_experts_per_tok\": 2, \"topk_method\": \"noaux_tc\"}",
         "model_type \"deepseek_v2\" with topk_method = \"noaux_tc\" is not supported"},
        {"unlimited_ocr, biased shared expert",
         "{\"model_type\": \"unlimited_ocr\", \"text_config\": {\"model_type\": \"unlimited_ocr_text\", " V64
         "\"num_hidden_layers\": 2, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, \"mlp_bias\": true}}",
         "model_type \"unlimited_ocr_text\" with mlp_bias = true is not supported"},
        {"glm5_next, clamp at 0",
         "{\"model_type\": \"glm5_next_text\", " V64 "\"num_hidden_layers\": 2, \"n_routed_experts\": 8, "
         "\"num_experts_per_tok\": 2, \"swiglu_limit\": 0}",
         "model_type \"glm5_next_text\" with swiglu_limit = 0 is not supported"},
        {"glm5_next, GELU shared expert beside SiLU routed ones",
         "{\"model_type\": \"glm5_next_text\", " V64 "\"num_hidden_layers\": 2, \"n_routed_experts\": 8, "
         "\"num_experts_per_tok\": 2, \"hidden_act\": \"gelu\"}",
         "model_type \"glm5_next_text\" with hidden_act = \"gelu\" is not supported"},
    };
#undef V64
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        moe_model_config cfg;
        moe_status st = moe_config_parse(NULL, cases[i].json, strlen(cases[i].json), &cfg);
        CHECK(st == MOE_STATUS_UNSUPPORTED && strstr(moe_last_error(NULL), cases[i].needle),
              "%s: %s: %s (expected UNSUPPORTED with \"%s\")", cases[i].what, moe_status_string(st),
              moe_last_error(NULL), cases[i].needle);
    }
}

static void test_bad_inputs(void) {
    moe_context_t *ctx = NULL;
    CHECK(moe_context_create(MOE_BACKEND_CPU, 0, &ctx) == MOE_STATUS_OK, "context");
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *b = &bad_cases[i];
        int before = checks_failed;
        moe_model_config cfg;
        moe_status st;
        /* Alternate between a context and none: both must carry the message. */
        moe_context_t *use = (i % 2) ? ctx : NULL;
        if (strncmp(b->json, "file:", 5) == 0) st = moe_config_load(use, fixture(b->json + 5), &cfg);
        else if (strncmp(b->json, "path:", 5) == 0) st = moe_config_load(use, b->json + 5, &cfg);
        else {
            /* An exact-size heap copy without a NUL: reading past it would be caught by ASan. */
            size_t len = strlen(b->json);
            char *copy = malloc(len ? len : 1);
            memcpy(copy, b->json, len);
            st = moe_config_parse(use, copy, len, &cfg);
            free(copy);
        }
        const char *msg = moe_last_error(use);
        CHECK(st == b->status, "%s: status %s, expected %s (%s)", b->what, moe_status_string(st),
              moe_status_string(b->status), msg);
        CHECK(strstr(msg, b->needle) != NULL, "%s: message \"%s\" lacks \"%s\"", b->what, msg, b->needle);
        printf("%s bad input: %s -> %s: %s\n", checks_failed == before ? "PASS" : "FAIL", b->what, moe_status_string(st), msg);
    }
    /* The offset points at the bad byte (19, the second comma; cJSON may say one past it). */
    const char *garbled = "{\"hidden_size\": 64,, \"num_hidden_layers\": 2}";
    moe_model_config cfg;
    moe_status st = moe_config_parse(ctx, garbled, strlen(garbled), &cfg);
    unsigned long offset = 0;
    const char *at = strstr(moe_last_error(ctx), "at byte ");
    CHECK(st == MOE_STATUS_PARSE_ERROR && at && sscanf(at, "at byte %lu", &offset) == 1 && offset >= 19 &&
              offset <= 20,
          "garbled JSON offset: %s", moe_last_error(ctx));
    /* The file's path prefixes messages of a file that fails to parse. */
    st = moe_config_load(ctx, fixture("bad_unknown_activation.json"), &cfg);
    CHECK(st == MOE_STATUS_UNSUPPORTED && strstr(moe_last_error(ctx), "bad_unknown_activation.json"),
          "load message names the file: %s", moe_last_error(ctx));
    CHECK(moe_config_parse(ctx, NULL, 4, &cfg) == MOE_STATUS_NULL_POINTER, "NULL json");
    CHECK(moe_config_parse(ctx, "{}", 2, NULL) == MOE_STATUS_NULL_POINTER, "NULL out");
    CHECK(moe_config_load(ctx, NULL, &cfg) == MOE_STATUS_NULL_POINTER, "NULL path");
    /* A length shorter than the string: only len bytes count. */
    const char *text = "{\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2} garbage";
    st = moe_config_parse(ctx, text, strlen(text) - 8, &cfg);
    CHECK(st == MOE_STATUS_OK && cfg.layer.hidden == 64 && cfg.num_layers == 2, "len bounds the input: %s",
          moe_last_error(ctx));
    /* A byte order mark is skipped; offsets still count it. */
    const char *bom = "\xEF\xBB\xBF{\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2}";
    CHECK(moe_config_parse(ctx, bom, strlen(bom), &cfg) == MOE_STATUS_OK, "BOM: %s", moe_last_error(ctx));
    moe_context_free(ctx);
}

/* ---- random round trips and mutations ------------------------------------------------ */

/* Random DeepSeek-style configs written as text, read back, fields compared with what was
 * written. Random whitespace and unknown fields between the real ones. The model_type is one the
 * reader knows no family rules for, so every key is read as written (deepseek_v2's router, as
 * transformers runs it, ignores norm_topk_prob and scoring_func). */
static void test_random_round_trip(void) {
    int before = checks_failed;
    for (int iter = 0; iter < 300; iter++) {
        int64_t groups_options[] = {1, 2, 4, 8};
        int64_t n_group = groups_options[rng_next() % 4];
        int64_t E = n_group * rng_int(1, 32);
        int64_t topk_group = rng_int(1, n_group);
        int64_t k = rng_int(1, topk_group * (E / n_group) < 64 ? topk_group * (E / n_group) : 64);
        int64_t H = rng_int(1, 1 << 16), I = rng_int(1, 1 << 15), dense_I = rng_int(1, 1 << 16);
        int64_t L = rng_int(1, MOE_MAX_LAYERS), first_dense = rng_int(0, 4), freq = rng_int(1, 3);
        int64_t shared = rng_int(0, 3), heads = rng_int(1, 128), vocab = rng_int(1, 300000);
        int norm = (int)(rng_next() % 2), sigmoid = (int)(rng_next() % 2);
        double scale = (double)rng_int(1, 4000) / 1000.0;
        const char *ws[] = {"", " ", "\n  ", "\t"};
        char json[4096];
        int n = snprintf(json, sizeof json,
                         "{%s\"model_type\":%s\"x_deepseek_like\",%s\"hidden_size\": %lld,\"x_unknown\": [1, {\"a\": "
                         "null}],%s\"intermediate_size\": %lld, \"moe_intermediate_size\": %lld,"
                         "\"num_hidden_layers\": %lld, \"first_k_dense_replace\": %lld, \"moe_layer_freq\": %lld,"
                         "%s\"n_routed_experts\": %lld, \"num_experts_per_tok\": %lld, \"n_group\": %lld, "
                         "\"topk_group\": %lld, \"topk_method\": \"%s\", \"scoring_func\": \"%s\", "
                         "\"norm_topk_prob\": %s, \"routed_scaling_factor\": %.3f, \"n_shared_experts\": %lld, "
                         "\"num_attention_heads\": %lld, \"vocab_size\": %lld, \"q_lora_rank\": null%s}",
                         ws[rng_next() % 4], ws[rng_next() % 4], ws[rng_next() % 4], (long long)H, ws[rng_next() % 4], (long long)dense_I,
                         (long long)I, (long long)L, (long long)first_dense, (long long)freq, ws[rng_next() % 4],
                         (long long)E, (long long)k, (long long)n_group, (long long)topk_group,
                         sigmoid ? "noaux_tc" : "group_limited_greedy", sigmoid ? "sigmoid" : "softmax",
                         norm ? "true" : "false", scale, (long long)shared, (long long)heads, (long long)vocab,
                         ws[rng_next() % 4]);
        moe_model_config cfg;
        moe_status st = moe_config_parse(NULL, json, (size_t)n, &cfg);
        CHECK(st == MOE_STATUS_OK, "round trip %d: %s: %s\n%s", iter, moe_status_string(st), moe_last_error(NULL),
              json);
        if (st != MOE_STATUS_OK) continue;
        const moe_layer_spec *s = &cfg.layer;
        int64_t want_moe = 0;
        int pattern_ok = 1;
        for (int64_t l = 0; l < L; l++) {
            int m = l >= first_dense && l % freq == 0;
            want_moe += m;
            pattern_ok &= cfg.layer_is_moe[l] == m;
        }
        int ok = s->num_experts == E && s->top_k == k && s->hidden == H && s->intermediate == I &&
                 cfg.dense_intermediate == dense_I && cfg.num_layers == L && cfg.num_moe_layers == want_moe &&
                 pattern_ok && (n_group > 1 ? s->n_group == n_group && s->topk_group == topk_group : s->n_group <= 1) &&
                 s->use_correction_bias == sigmoid && s->score == (sigmoid ? MOE_SCORE_SIGMOID : MOE_SCORE_SOFTMAX) &&
                 s->renormalize == norm && fabs(s->routed_scale - scale) < 1e-6 &&
                 s->num_shared_experts == shared && (shared == 0 || s->shared_intermediate == shared * I) &&
                 cfg.num_heads == heads && cfg.num_kv_heads == heads && cfg.head_dim == H / heads &&
                 cfg.vocab_size == vocab && cfg.q_lora_rank == 0;
        CHECK(ok, "round trip %d: fields differ from the text:\n%s", iter, json);
    }
    printf("%s random round trips\n", checks_failed == before ? "PASS" : "FAIL");
}

/* Random byte edits and truncations of the fixtures: never a crash, a known status, a
 * message on failure, and a valid spec on success. */
static void test_random_mutations(void) {
    int before = checks_failed;
    const char *files[] = {"deepseek_v3.json", "llama4_scout.json", "qwen3_moe_sparse_step.json", "gpt_oss_120b.json",
                           "deepseek_v2_lite.json"};
    const char alphabet[] = "{}[]\",:-.0123456789eEtruefalsnl \n\\";
    int ok_count = 0, total = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t len;
        char *text = slurp(fixture(files[f]), &len);
        CHECK(text != NULL, "cannot read fixture %s", files[f]);
        if (!text) continue;
        for (int iter = 0; iter < 400; iter++) {
            char *buf = malloc(len ? len : 1);
            memcpy(buf, text, len);
            size_t use = len;
            int edits = (int)rng_int(1, 4);
            for (int e = 0; e < edits; e++) {
                size_t at = (size_t)(rng_next() % len);
                switch (rng_next() % 3) {
                case 0: buf[at] = alphabet[rng_next() % (sizeof alphabet - 1)]; break;
                case 1: buf[at] = (char)(rng_next() & 0xff); break;
                default: use = at; break; /* truncate */
                }
            }
            moe_model_config cfg;
            moe_status st = moe_config_parse(NULL, buf, use, &cfg);
            total++;
            if (st == MOE_STATUS_OK) {
                ok_count++;
                int64_t count = 0;
                for (int64_t l = 0; l < cfg.num_layers; l++) count += cfg.layer_is_moe[l] != 0;
                CHECK(moe_layer_spec_validate(NULL, &cfg.layer) == MOE_STATUS_OK && count == cfg.num_moe_layers &&
                          cfg.num_layers >= 1 && cfg.num_layers <= MOE_MAX_LAYERS,
                      "mutation of %s accepted with an inconsistent result", files[f]);
            } else {
                CHECK(st == MOE_STATUS_PARSE_ERROR || st == MOE_STATUS_INVALID_ARGUMENT ||
                          st == MOE_STATUS_UNSUPPORTED || st == MOE_STATUS_OVERFLOW,
                      "mutation of %s: unexpected status %s", files[f], moe_status_string(st));
                CHECK(moe_last_error(NULL)[0] != '\0', "mutation of %s: %s without a message", files[f],
                      moe_status_string(st));
            }
            free(buf);
        }
        free(text);
    }
    printf("%s random mutations (%d of %d still parsed)\n", checks_failed == before ? "PASS" : "FAIL", ok_count, total);
}

/* Which layers attend a bounded span: layer_types, the family defaults, Qwen's use_sliding_window /
 * max_window_layers, and the refusals. The real configs in tests/data/configs first. */
static void test_attention_span(void) {
    int before = checks_failed;
    static const struct {
        const char *file;
        int64_t window, windowed, first_windowed, first_full;
    } files[] = {
        {"gpt_oss_120b.json", 128, 18, 0, 1},   /* layer_types: sliding, full, sliding, ... */
        {"llama4_scout.json", 8192, 36, 0, 3},  /* no_rope_layers []: layers 3, 7, ... are full */
        {"mixtral_8x7b.json", 0, 0, -1, 0},     /* sliding_window null */
        {"qwen1_5_moe_a2_7b.json", 0, 0, -1, 0}, /* sliding_window 32768 but use_sliding_window false */
        {"deepseek_v3.json", 0, 0, -1, 0},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        moe_model_config cfg;
        moe_status st = moe_config_load(NULL, fixture(files[i].file), &cfg);
        CHECK(st == MOE_STATUS_OK, "%s: %s", files[i].file, moe_last_error(NULL));
        if (st != MOE_STATUS_OK) continue;
        int64_t windowed = 0;
        for (int64_t l = 0; l < cfg.num_layers; l++) windowed += cfg.layer_is_windowed[l];
        CHECK(cfg.attention_window == files[i].window && windowed == files[i].windowed &&
                  (files[i].first_windowed < 0 || cfg.layer_is_windowed[files[i].first_windowed]) &&
                  !cfg.layer_is_windowed[files[i].first_full],
              "%s: window %lld, %lld windowed layers", files[i].file, (long long)cfg.attention_window,
              (long long)windowed);
    }
    static const struct {
        const char *what, *json;
        moe_status status;
        int64_t window;
        const char *mask; /* layer_is_windowed of layers 0-3 */
    } cases[] = {
        {"Qwen: windows from max_window_layers on",
         "{\"model_type\": \"qwen2_moe\", \"hidden_size\": 64, \"moe_intermediate_size\": 32, \"num_hidden_layers\": 4, "
         "\"num_experts\": 8, \"num_experts_per_tok\": 2, \"use_sliding_window\": true, \"sliding_window\": 4096, "
         "\"max_window_layers\": 2}",
         MOE_STATUS_OK, 4096, "0011"},
        {"Mixtral with a window: every layer",
         "{\"model_type\": \"mixtral\", \"hidden_size\": 64, \"intermediate_size\": 32, \"num_hidden_layers\": 4, "
         "\"num_local_experts\": 8, \"num_experts_per_tok\": 2, \"sliding_window\": 4096}",
         MOE_STATUS_OK, 4096, "1111"},
        {"Qwen2-MoE as transformers writes it: sliding_window 0, use_sliding_window false",
         "{\"model_type\": \"qwen2_moe\", \"hidden_size\": 64, \"moe_intermediate_size\": 32, \"num_hidden_layers\": 4, "
         "\"num_experts\": 8, \"num_experts_per_tok\": 2, \"use_sliding_window\": false, \"sliding_window\": 0, "
         "\"max_window_layers\": 2}",
         MOE_STATUS_OK, 0, "0000"},
        {"another family's unused sliding_window is ignored",
         "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"moe_intermediate_size\": 32, \"num_hidden_layers\": 4, "
         "\"num_experts\": 8, \"num_experts_per_tok\": 2, \"sliding_window\": 4096}",
         MOE_STATUS_OK, 0, "0000"},
        {"Llama-4's explicit no_rope_layers",
         "{\"model_type\": \"llama4_text\", \"hidden_size\": 64, \"intermediate_size\": 32, \"num_hidden_layers\": 4, "
         "\"num_local_experts\": 8, \"num_experts_per_tok\": 1, \"attention_chunk_size\": 512, "
         "\"no_rope_layers\": [0, 1, 1, 0]}",
         MOE_STATUS_OK, 512, "0110"},
        {"Llama-4 whose no_rope_layers use no RoPE anywhere: no span",
         "{\"model_type\": \"llama4_text\", \"hidden_size\": 64, \"intermediate_size\": 32, \"num_hidden_layers\": 4, "
         "\"num_local_experts\": 8, \"num_experts_per_tok\": 1, \"attention_chunk_size\": 512, "
         "\"no_rope_layers\": [0, 0, 0, 0]}",
         MOE_STATUS_OK, 0, "0000"},
        {"Qwen: max_window_layers past the last layer: no span",
         "{\"model_type\": \"qwen2_moe\", \"hidden_size\": 64, \"moe_intermediate_size\": 32, \"num_hidden_layers\": 4, "
         "\"num_experts\": 8, \"num_experts_per_tok\": 2, \"use_sliding_window\": true, \"sliding_window\": 4096, "
         "\"max_window_layers\": 9}",
         MOE_STATUS_OK, 0, "0000"},
        {"layer_types: chunked, full and linear (counted full)",
         "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"moe_intermediate_size\": 32, \"num_hidden_layers\": 4, "
         "\"num_experts\": 8, \"num_experts_per_tok\": 2, \"attention_chunk_size\": 256, \"layer_types\": "
         "[\"chunked_attention\", \"full_attention\", \"linear_attention\", \"chunked_attention\"]}",
         MOE_STATUS_OK, 256, "1001"},
        {"layer_types of the wrong length",
         "{\"model_type\": \"gpt_oss\", \"hidden_size\": 64, \"intermediate_size\": 32, \"num_hidden_layers\": 4, "
         "\"num_local_experts\": 8, \"num_experts_per_tok\": 2, \"sliding_window\": 128, "
         "\"layer_types\": [\"sliding_attention\", \"full_attention\"]}",
         MOE_STATUS_INVALID_ARGUMENT, 0, NULL},
        {"sliding layers without sliding_window",
         "{\"model_type\": \"gpt_oss\", \"hidden_size\": 64, \"intermediate_size\": 32, \"num_hidden_layers\": 2, "
         "\"num_local_experts\": 8, \"num_experts_per_tok\": 2, "
         "\"layer_types\": [\"sliding_attention\", \"full_attention\"]}",
         MOE_STATUS_INVALID_ARGUMENT, 0, NULL},
        {"sliding and chunked layers of different spans",
         "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"moe_intermediate_size\": 32, \"num_hidden_layers\": 2, "
         "\"num_experts\": 8, \"num_experts_per_tok\": 2, \"sliding_window\": 128, \"attention_chunk_size\": 256, "
         "\"layer_types\": [\"sliding_attention\", \"chunked_attention\"]}",
         MOE_STATUS_UNSUPPORTED, 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        moe_model_config cfg;
        moe_status st = moe_config_parse(NULL, cases[i].json, strlen(cases[i].json), &cfg);
        CHECK(st == cases[i].status, "%s: %s (%s), expected %s", cases[i].what, moe_status_string(st),
              moe_last_error(NULL), moe_status_string(cases[i].status));
        if (st != MOE_STATUS_OK || !cases[i].mask) continue;
        char mask[5] = {0};
        for (int l = 0; l < 4; l++) mask[l] = cfg.layer_is_windowed[l] ? '1' : '0';
        CHECK(cfg.attention_window == cases[i].window && strcmp(mask, cases[i].mask) == 0,
              "%s: window %lld, layers %s, expected %lld, %s", cases[i].what, (long long)cfg.attention_window, mask,
              (long long)cases[i].window, cases[i].mask);
    }
    printf("%s attention span\n", checks_failed == before ? "PASS" : "FAIL");
}

int main(void) {
    harness_seed("test_config");
    find_fixtures();
    printf("fixtures in %s\n", fixture_dir);

    test_expected_configs();
    test_preset_table();
    test_family_defaults();
    test_noaux_families();
    test_refused_families();
    test_family_reading();
    test_refused_variants();
    test_attention_span();
    test_fifo_does_not_block();
    test_bad_inputs();
    test_random_round_trip();
    test_random_mutations();

    return harness_finish(checks_passed, checks_failed); /* this test counts checks */
}
