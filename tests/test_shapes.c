/* Golden tests of the shape list (moe_shape_list_create) and of the routing statistics.
 *
 * Each model's expected GEMM list is written out below, row by row, with its derivation from
 * the published config.json numbers in the comments; nothing expected is produced by the
 * code under test. Each model is checked twice: from a config filled in here by hand, and
 * from the library's preset of the same name (so a preset that disagrees with the published
 * config fails here too). The whole list must match: every expected row present with its
 * M, K, N and count, no extra rows, FLOPs and bytes per row and the totals.
 *
 * Step of the golden lists: batch 2 x seq 2048, train (Fprop, Dgrad, Wgrad), so T = 4096.
 * Convention (Transformer Engine): Fprop M=T K=in N=out; Dgrad M=T K=out N=in; Wgrad M=in K=T N=out.
 * Bytes (the header's rule, re-derived here): bf16 everywhere; fprop/dgrad read A (m x k) and
 * the weight (k x n) and write C (m x n); wgrad reads X^T (m x k) and dY (k x n) and writes
 * dW (m x n); routed experts' weight traffic counts only the expected touched experts,
 * E*(1-(1-k/E)^T) per layer.
 *
 * The routing statistics are checked against direct pmf sums written here (small cases), the
 * published DeepSeek-V3 padding figures, and a Monte Carlo simulation of top-k routing (seed
 * printed; MOEFUSE_SEED=<n> repeats a run). */
#include "moefuse.h"
#include "moefuse_analysis.h"
#include "../src/cuda/hopper/gemm_dense.h" /* the bf16 dense engine's cluster rule (plain C, inline) */
#include "../src/cuda/hopper/gemm_fp8.h"   /* the FP8 dense engine's tile rule (plain C, inline) */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static int close_rel(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(1.0, fmax(fabs(a), fabs(b))); }

/* ---- expected rows --------------------------------------------------------------------- */
enum { F = 0, D = 1, W = 2 }; /* passes */

typedef struct expect {
    int64_t first, last, step; /* layers; -1, -1, 0 for the LM head */
    const char *name, *kind;
    int pass;
    double m, k, n;
    int64_t count;
} expect;

#define LM -1, -1, 0

/* What the test knows about the routed experts of the model (for the touched-expert bytes). */
typedef struct model_case {
    const char *preset;
    moe_model_config cfg; /* filled by hand */
    const expect *rows;
    int num_rows;
    double tokens, experts, top_k; /* T, E, k (E = 0: no routed experts) */
} model_case;

static double touched_per_layer(const model_case *mc) {
    return mc->experts > 0 ? mc->experts * (1.0 - pow(1.0 - mc->top_k / mc->experts, mc->tokens)) : 0.0;
}

static double expect_bytes(const model_case *mc, const expect *e) {
    int routed = !strcmp(e->kind, "expert_gate_up") || !strcmp(e->kind, "expert_down");
    double layers = e->first < 0 ? 1.0 : (double)((e->last - e->first) / e->step + 1);
    double touched = routed ? layers * touched_per_layer(mc) : (double)e->count;
    double c = (double)e->count;
    if (e->pass == W) return c * 2.0 * (e->m * e->k + e->k * e->n) + touched * 2.0 * e->m * e->n;
    return c * 2.0 * (e->m * e->k + e->m * e->n) + touched * 2.0 * e->k * e->n;
}

static void check_list(const model_case *mc, const moe_shape_list *l, const char *which) {
    int used[1024] = {0};
    CHECK(l->num_rows == mc->num_rows, "%s %s: %lld rows, expected %d", mc->preset, which, (long long)l->num_rows,
          mc->num_rows);
    double flops = 0, bytes = 0;
    for (int i = 0; i < mc->num_rows; i++) {
        const expect *e = &mc->rows[i];
        double ef = 2.0 * e->m * e->k * e->n * (double)e->count, eb = expect_bytes(mc, e);
        flops += ef;
        bytes += eb;
        int found = -1;
        for (int64_t j = 0; j < l->num_rows && j < 1024; j++) {
            const moe_gemm_row *r = &l->rows[j];
            if (!used[j] && !strcmp(r->name, e->name) && (int)r->pass == e->pass && r->layer_first == e->first &&
                r->layer_last == e->last && (e->first < 0 || r->layer_count == 1 || r->layer_step == e->step)) {
                found = (int)j;
                break;
            }
        }
        CHECK(found >= 0, "%s %s: no row %s %s layers %lld-%lld", mc->preset, which, e->name,
              moe_gemm_pass_name((moe_gemm_pass)e->pass), (long long)e->first, (long long)e->last);
        if (found < 0) continue;
        used[found] = 1;
        const moe_gemm_row *r = &l->rows[found];
        CHECK(!strcmp(moe_gemm_kind_name(r->kind), e->kind), "%s %s %s: kind %s, expected %s", mc->preset, which,
              e->name, moe_gemm_kind_name(r->kind), e->kind);
        CHECK(close_rel(r->m, e->m, 1e-12) && close_rel(r->k, e->k, 1e-12) && close_rel(r->n, e->n, 1e-12),
              "%s %s %s %s: %g x %g x %g, expected %g x %g x %g", mc->preset, which, e->name,
              moe_gemm_pass_name((moe_gemm_pass)e->pass), r->m, r->k, r->n, e->m, e->k, e->n);
        CHECK(r->count == e->count, "%s %s %s: count %lld, expected %lld", mc->preset, which, e->name,
              (long long)r->count, (long long)e->count);
        CHECK(close_rel(r->flops, ef, 1e-12), "%s %s %s: flops %.6g, expected %.6g", mc->preset, which, e->name,
              r->flops, ef);
        CHECK(close_rel(r->bytes, eb, 1e-9), "%s %s %s %s: bytes %.9g, expected %.9g", mc->preset, which, e->name,
              moe_gemm_pass_name((moe_gemm_pass)e->pass), r->bytes, eb);
        CHECK(close_rel(r->intensity, ef / eb, 1e-9), "%s %s %s: intensity %g, expected %g", mc->preset, which,
              e->name, r->intensity, ef / eb);
    }
    for (int64_t j = 0; j < l->num_rows && j < 1024; j++)
        CHECK(used[j], "%s %s: extra row %s %s layers %lld-%lld", mc->preset, which, l->rows[j].name,
              moe_gemm_pass_name(l->rows[j].pass), (long long)l->rows[j].layer_first,
              (long long)l->rows[j].layer_last);
    CHECK(close_rel(l->total_flops, flops, 1e-12), "%s %s: total flops %.9g, expected %.9g", mc->preset, which,
          l->total_flops, flops);
    CHECK(close_rel(l->total_bytes, bytes, 1e-9), "%s %s: total bytes %.9g, expected %.9g", mc->preset, which,
          l->total_bytes, bytes);
    /* A training step is three equal-FLOP passes of the same GEMMs. */
    for (int p = 0; p < 3; p++)
        CHECK(close_rel(l->pass_flops[p], flops / 3.0, 1e-12), "%s %s: %s flops %.9g, expected a third of %.9g",
              mc->preset, which, moe_gemm_pass_name((moe_gemm_pass)p), l->pass_flops[p], flops);
    CHECK(l->tokens == 4096, "%s: T = %lld, expected 2*2048", mc->preset, (long long)l->tokens);
}

static void check_model(const model_case *mc) {
    moe_context_t *ctx = NULL;
    CHECK(moe_context_create(MOE_BACKEND_CPU, 0, &ctx) == MOE_STATUS_OK, "context");
    moe_shape_options opt;
    moe_shape_options_init(&opt);
    opt.batch = 2;
    opt.seq = 2048;
    opt.mode = MOE_STEP_TRAIN;
    moe_shape_list *l = NULL;
    moe_status st = moe_shape_list_create(ctx, &mc->cfg, &opt, &l);
    CHECK(st == MOE_STATUS_OK, "%s hand config: %s: %s", mc->preset, moe_status_string(st), moe_last_error(ctx));
    if (l) check_list(mc, l, "hand config");
    moe_shape_list_free(l);
    l = NULL;

    moe_model_config preset;
    st = moe_config_preset(ctx, mc->preset, &preset);
    CHECK(st == MOE_STATUS_OK, "preset %s: %s: %s", mc->preset, moe_status_string(st), moe_last_error(ctx));
    if (st == MOE_STATUS_OK) {
        st = moe_shape_list_create(ctx, &preset, &opt, &l);
        CHECK(st == MOE_STATUS_OK, "%s preset: %s: %s", mc->preset, moe_status_string(st), moe_last_error(ctx));
        if (l) check_list(mc, l, "preset");
        moe_shape_list_free(l);
    }
    moe_context_free(ctx);
}

/* A config with the fields the shape list reads, as published. */
static moe_model_config base_config(const char *name, const char *type, int64_t layers, int64_t hidden,
                                    int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t vocab) {
    moe_model_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    snprintf(c.model_type, sizeof c.model_type, "%s", type);
    moe_layer_spec_init(&c.layer, 1, hidden, 1, 1);
    c.num_layers = layers;
    c.num_heads = heads;
    c.num_kv_heads = kv_heads;
    c.head_dim = head_dim;
    c.vocab_size = vocab;
    c.torch_dtype = MOE_DTYPE_BF16;
    return c;
}

static void set_moe(moe_model_config *c, int64_t E, int64_t I, int64_t k, int64_t first_moe, int64_t every) {
    c->is_moe = 1;
    c->layer.num_experts = E;
    c->layer.intermediate = I;
    c->layer.top_k = k;
    c->num_moe_layers = 0;
    for (int64_t l = 0; l < c->num_layers; l++) {
        c->layer_is_moe[l] = l >= first_moe && (l - first_moe) % every == 0;
        c->num_moe_layers += c->layer_is_moe[l];
    }
}

#define NROWS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- DeepSeek-V3 ------------------------------------------------------------------------
 * config.json: hidden_size 7168, num_hidden_layers 61, first_k_dense_replace 3 (layers 0-2
 * dense, 3-60 MoE: 58 layers), intermediate_size 18432 (dense), moe_intermediate_size 2048,
 * n_routed_experts 256, num_experts_per_tok 8, n_shared_experts 1 (one shared MLP 1 x 2048),
 * num_attention_heads 128, q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128,
 * qk_rope_head_dim 64, v_head_dim 128, vocab_size 129280. SwiGLU: gate_up N = 2 x width.
 * T = 2*2048 = 4096; tokens per expert = 4096*8/256 = 128. */
static const expect deepseek_rows[] = {
    /* q_a_proj: H 7168 -> q_lora_rank 1536, all 61 layers */
    {0, 60, 1, "q_a_proj", "attn_q", F, 4096, 7168, 1536, 61},
    {0, 60, 1, "q_a_proj", "attn_q", D, 4096, 1536, 7168, 61},
    {0, 60, 1, "q_a_proj", "attn_q", W, 7168, 4096, 1536, 61},
    /* q_b_proj: 1536 -> heads*(nope+rope) = 128*(128+64) = 24576 */
    {0, 60, 1, "q_b_proj", "attn_q", F, 4096, 1536, 24576, 61},
    {0, 60, 1, "q_b_proj", "attn_q", D, 4096, 24576, 1536, 61},
    {0, 60, 1, "q_b_proj", "attn_q", W, 1536, 4096, 24576, 61},
    /* kv_a_proj: H 7168 -> kv_lora_rank + rope = 512 + 64 = 576 */
    {0, 60, 1, "kv_a_proj", "attn_kv", F, 4096, 7168, 576, 61},
    {0, 60, 1, "kv_a_proj", "attn_kv", D, 4096, 576, 7168, 61},
    {0, 60, 1, "kv_a_proj", "attn_kv", W, 7168, 4096, 576, 61},
    /* kv_b_proj: 512 -> heads*(nope+v) = 128*(128+128) = 32768 */
    {0, 60, 1, "kv_b_proj", "attn_kv", F, 4096, 512, 32768, 61},
    {0, 60, 1, "kv_b_proj", "attn_kv", D, 4096, 32768, 512, 61},
    {0, 60, 1, "kv_b_proj", "attn_kv", W, 512, 4096, 32768, 61},
    /* o_proj: heads*v = 128*128 = 16384 -> 7168 */
    {0, 60, 1, "o_proj", "attn_o", F, 4096, 16384, 7168, 61},
    {0, 60, 1, "o_proj", "attn_o", D, 4096, 7168, 16384, 61},
    {0, 60, 1, "o_proj", "attn_o", W, 16384, 4096, 7168, 61},
    /* dense MLP, layers 0-2: gate_up 7168 -> 2*18432 = 36864; down 18432 -> 7168; count 3 */
    {0, 2, 1, "mlp.gate_up", "dense_gate_up", F, 4096, 7168, 36864, 3},
    {0, 2, 1, "mlp.gate_up", "dense_gate_up", D, 4096, 36864, 7168, 3},
    {0, 2, 1, "mlp.gate_up", "dense_gate_up", W, 7168, 4096, 36864, 3},
    {0, 2, 1, "mlp.down", "dense_down", F, 4096, 18432, 7168, 3},
    {0, 2, 1, "mlp.down", "dense_down", D, 4096, 7168, 18432, 3},
    {0, 2, 1, "mlp.down", "dense_down", W, 18432, 4096, 7168, 3},
    /* router, layers 3-60 (58): 7168 -> E 256 */
    {3, 60, 1, "router", "router", F, 4096, 7168, 256, 58},
    {3, 60, 1, "router", "router", D, 4096, 256, 7168, 58},
    {3, 60, 1, "router", "router", W, 7168, 4096, 256, 58},
    /* shared expert (1 x 2048): gate_up 7168 -> 4096; down 2048 -> 7168; every token */
    {3, 60, 1, "shared.gate_up", "shared_gate_up", F, 4096, 7168, 4096, 58},
    {3, 60, 1, "shared.gate_up", "shared_gate_up", D, 4096, 4096, 7168, 58},
    {3, 60, 1, "shared.gate_up", "shared_gate_up", W, 7168, 4096, 4096, 58},
    {3, 60, 1, "shared.down", "shared_down", F, 4096, 2048, 7168, 58},
    {3, 60, 1, "shared.down", "shared_down", D, 4096, 7168, 2048, 58},
    {3, 60, 1, "shared.down", "shared_down", W, 2048, 4096, 7168, 58},
    /* routed experts: 128 tokens each; gate_up 7168 -> 2*2048 = 4096; count 58*256 = 14848 */
    {3, 60, 1, "experts.gate_up", "expert_gate_up", F, 128, 7168, 4096, 14848},
    {3, 60, 1, "experts.gate_up", "expert_gate_up", D, 128, 4096, 7168, 14848},
    {3, 60, 1, "experts.gate_up", "expert_gate_up", W, 7168, 128, 4096, 14848},
    /* experts.down: 2048 -> 7168 */
    {3, 60, 1, "experts.down", "expert_down", F, 128, 2048, 7168, 14848},
    {3, 60, 1, "experts.down", "expert_down", D, 128, 7168, 2048, 14848},
    {3, 60, 1, "experts.down", "expert_down", W, 2048, 128, 7168, 14848},
    /* LM head once: 7168 -> vocab 129280 */
    {LM, "lm_head", "lm_head", F, 4096, 7168, 129280, 1},
    {LM, "lm_head", "lm_head", D, 4096, 129280, 7168, 1},
    {LM, "lm_head", "lm_head", W, 7168, 4096, 129280, 1},
};

static void test_deepseek_v3(void) {
    model_case mc = {"deepseek-v3", base_config("deepseek-v3", "deepseek_v3", 61, 7168, 128, 128, 0, 129280),
                     deepseek_rows, NROWS(deepseek_rows), 4096, 256, 8};
    set_moe(&mc.cfg, 256, 2048, 8, 3, 1);
    mc.cfg.dense_intermediate = 18432;
    mc.cfg.layer.num_shared_experts = 1;
    mc.cfg.layer.shared_intermediate = 2048;
    mc.cfg.q_lora_rank = 1536;
    mc.cfg.kv_lora_rank = 512;
    mc.cfg.qk_nope_head_dim = 128;
    mc.cfg.qk_rope_head_dim = 64;
    mc.cfg.v_head_dim = 128;
    check_model(&mc);
}

/* ---- Qwen3-30B-A3B ----------------------------------------------------------------------
 * config.json: hidden_size 2048, num_hidden_layers 48 (all MoE: decoder_sparse_step 1,
 * mlp_only_layers []), num_attention_heads 32, num_key_value_heads 4, head_dim 128,
 * num_experts 128, num_experts_per_tok 8, moe_intermediate_size 768, vocab_size 151936.
 * T = 4096; tokens per expert = 4096*8/128 = 256. */
static const expect qwen3_rows[] = {
    /* q_proj: 2048 -> heads*head_dim = 32*128 = 4096 (not hidden: Qwen3 widens q) */
    {0, 47, 1, "q_proj", "attn_q", F, 4096, 2048, 4096, 48},
    {0, 47, 1, "q_proj", "attn_q", D, 4096, 4096, 2048, 48},
    {0, 47, 1, "q_proj", "attn_q", W, 2048, 4096, 4096, 48},
    /* kv_proj (k and v): 2048 -> 2*kv_heads*head_dim = 2*4*128 = 1024 */
    {0, 47, 1, "kv_proj", "attn_kv", F, 4096, 2048, 1024, 48},
    {0, 47, 1, "kv_proj", "attn_kv", D, 4096, 1024, 2048, 48},
    {0, 47, 1, "kv_proj", "attn_kv", W, 2048, 4096, 1024, 48},
    /* o_proj: 4096 -> 2048 */
    {0, 47, 1, "o_proj", "attn_o", F, 4096, 4096, 2048, 48},
    {0, 47, 1, "o_proj", "attn_o", D, 4096, 2048, 4096, 48},
    {0, 47, 1, "o_proj", "attn_o", W, 4096, 4096, 2048, 48},
    /* router: 2048 -> 128 */
    {0, 47, 1, "router", "router", F, 4096, 2048, 128, 48},
    {0, 47, 1, "router", "router", D, 4096, 128, 2048, 48},
    {0, 47, 1, "router", "router", W, 2048, 4096, 128, 48},
    /* expert_gate_up: 256 tokens per expert; K = H = 2048; N = 2I = 1536; count 48*128 = 6144 */
    {0, 47, 1, "experts.gate_up", "expert_gate_up", F, 256, 2048, 1536, 6144},
    {0, 47, 1, "experts.gate_up", "expert_gate_up", D, 256, 1536, 2048, 6144},
    {0, 47, 1, "experts.gate_up", "expert_gate_up", W, 2048, 256, 1536, 6144},
    /* expert_down: 768 -> 2048 */
    {0, 47, 1, "experts.down", "expert_down", F, 256, 768, 2048, 6144},
    {0, 47, 1, "experts.down", "expert_down", D, 256, 2048, 768, 6144},
    {0, 47, 1, "experts.down", "expert_down", W, 768, 256, 2048, 6144},
    /* LM head: 2048 -> 151936 */
    {LM, "lm_head", "lm_head", F, 4096, 2048, 151936, 1},
    {LM, "lm_head", "lm_head", D, 4096, 151936, 2048, 1},
    {LM, "lm_head", "lm_head", W, 2048, 4096, 151936, 1},
};

static void test_qwen3_30b(void) {
    model_case mc = {"qwen3-30b-a3b", base_config("qwen3-30b-a3b", "qwen3_moe", 48, 2048, 32, 4, 128, 151936),
                     qwen3_rows, NROWS(qwen3_rows), 4096, 128, 8};
    set_moe(&mc.cfg, 128, 768, 8, 0, 1);
    check_model(&mc);
}

/* ---- GPT-OSS-120B -----------------------------------------------------------------------
 * config.json: hidden_size 2880, num_hidden_layers 36 (all MoE), num_attention_heads 64,
 * num_key_value_heads 8, head_dim 64, num_local_experts 128, experts_per_token 4,
 * intermediate_size 2880 (per expert), vocab_size 201088. Clamped SwiGLU (gated: 2I).
 * T = 4096; tokens per expert = 4096*4/128 = 128. Biases do not change the shapes. */
static const expect gptoss_rows[] = {
    /* q_proj: 2880 -> 64*64 = 4096 */
    {0, 35, 1, "q_proj", "attn_q", F, 4096, 2880, 4096, 36},
    {0, 35, 1, "q_proj", "attn_q", D, 4096, 4096, 2880, 36},
    {0, 35, 1, "q_proj", "attn_q", W, 2880, 4096, 4096, 36},
    /* kv_proj: 2880 -> 2*8*64 = 1024 */
    {0, 35, 1, "kv_proj", "attn_kv", F, 4096, 2880, 1024, 36},
    {0, 35, 1, "kv_proj", "attn_kv", D, 4096, 1024, 2880, 36},
    {0, 35, 1, "kv_proj", "attn_kv", W, 2880, 4096, 1024, 36},
    /* o_proj: 4096 -> 2880 */
    {0, 35, 1, "o_proj", "attn_o", F, 4096, 4096, 2880, 36},
    {0, 35, 1, "o_proj", "attn_o", D, 4096, 2880, 4096, 36},
    {0, 35, 1, "o_proj", "attn_o", W, 4096, 4096, 2880, 36},
    /* router: 2880 -> 128 */
    {0, 35, 1, "router", "router", F, 4096, 2880, 128, 36},
    {0, 35, 1, "router", "router", D, 4096, 128, 2880, 36},
    {0, 35, 1, "router", "router", W, 2880, 4096, 128, 36},
    /* experts: 128 tokens; gate_up 2880 -> 5760; count 36*128 = 4608 */
    {0, 35, 1, "experts.gate_up", "expert_gate_up", F, 128, 2880, 5760, 4608},
    {0, 35, 1, "experts.gate_up", "expert_gate_up", D, 128, 5760, 2880, 4608},
    {0, 35, 1, "experts.gate_up", "expert_gate_up", W, 2880, 128, 5760, 4608},
    /* down: 2880 -> 2880 */
    {0, 35, 1, "experts.down", "expert_down", F, 128, 2880, 2880, 4608},
    {0, 35, 1, "experts.down", "expert_down", D, 128, 2880, 2880, 4608},
    {0, 35, 1, "experts.down", "expert_down", W, 2880, 128, 2880, 4608},
    /* LM head: 2880 -> 201088 */
    {LM, "lm_head", "lm_head", F, 4096, 2880, 201088, 1},
    {LM, "lm_head", "lm_head", D, 4096, 201088, 2880, 1},
    {LM, "lm_head", "lm_head", W, 2880, 4096, 201088, 1},
};

static void test_gpt_oss_120b(void) {
    model_case mc = {"gpt-oss-120b", base_config("gpt-oss-120b", "gpt_oss", 36, 2880, 64, 8, 64, 201088),
                     gptoss_rows, NROWS(gptoss_rows), 4096, 128, 4};
    set_moe(&mc.cfg, 128, 2880, 4, 0, 1);
    mc.cfg.layer.activation = MOE_ACT_SWIGLU_OAI;
    mc.cfg.layer.router_has_bias = 1;
    mc.cfg.layer.expert_has_bias = 1;
    check_model(&mc);
}

/* ---- Mixtral-8x7B -----------------------------------------------------------------------
 * config.json: hidden_size 4096, num_hidden_layers 32 (all MoE), num_attention_heads 32,
 * num_key_value_heads 8, no head_dim (4096/32 = 128), num_local_experts 8,
 * num_experts_per_tok 2, intermediate_size 14336, vocab_size 32000.
 * T = 4096; tokens per expert = 4096*2/8 = 1024. */
static const expect mixtral_rows[] = {
    /* q_proj: 4096 -> 32*128 = 4096 */
    {0, 31, 1, "q_proj", "attn_q", F, 4096, 4096, 4096, 32},
    {0, 31, 1, "q_proj", "attn_q", D, 4096, 4096, 4096, 32},
    {0, 31, 1, "q_proj", "attn_q", W, 4096, 4096, 4096, 32},
    /* kv_proj: 4096 -> 2*8*128 = 2048 */
    {0, 31, 1, "kv_proj", "attn_kv", F, 4096, 4096, 2048, 32},
    {0, 31, 1, "kv_proj", "attn_kv", D, 4096, 2048, 4096, 32},
    {0, 31, 1, "kv_proj", "attn_kv", W, 4096, 4096, 2048, 32},
    /* o_proj: 4096 -> 4096 */
    {0, 31, 1, "o_proj", "attn_o", F, 4096, 4096, 4096, 32},
    {0, 31, 1, "o_proj", "attn_o", D, 4096, 4096, 4096, 32},
    {0, 31, 1, "o_proj", "attn_o", W, 4096, 4096, 4096, 32},
    /* router: 4096 -> 8 */
    {0, 31, 1, "router", "router", F, 4096, 4096, 8, 32},
    {0, 31, 1, "router", "router", D, 4096, 8, 4096, 32},
    {0, 31, 1, "router", "router", W, 4096, 4096, 8, 32},
    /* experts: 1024 tokens; gate_up 4096 -> 2*14336 = 28672; count 32*8 = 256 */
    {0, 31, 1, "experts.gate_up", "expert_gate_up", F, 1024, 4096, 28672, 256},
    {0, 31, 1, "experts.gate_up", "expert_gate_up", D, 1024, 28672, 4096, 256},
    {0, 31, 1, "experts.gate_up", "expert_gate_up", W, 4096, 1024, 28672, 256},
    /* down: 14336 -> 4096 */
    {0, 31, 1, "experts.down", "expert_down", F, 1024, 14336, 4096, 256},
    {0, 31, 1, "experts.down", "expert_down", D, 1024, 4096, 14336, 256},
    {0, 31, 1, "experts.down", "expert_down", W, 14336, 1024, 4096, 256},
    /* LM head: 4096 -> 32000 */
    {LM, "lm_head", "lm_head", F, 4096, 4096, 32000, 1},
    {LM, "lm_head", "lm_head", D, 4096, 32000, 4096, 1},
    {LM, "lm_head", "lm_head", W, 4096, 4096, 32000, 1},
};

static void test_mixtral(void) {
    model_case mc = {"mixtral-8x7b", base_config("mixtral-8x7b", "mixtral", 32, 4096, 32, 8, 128, 32000),
                     mixtral_rows, NROWS(mixtral_rows), 4096, 8, 2};
    set_moe(&mc.cfg, 8, 14336, 2, 0, 1);
    check_model(&mc);
}

/* ---- Llama-4-Scout-17B-16E ---------------------------------------------------------------
 * text_config: hidden_size 5120, num_hidden_layers 48, interleave_moe_layer_step 1 (all 48
 * MoE), num_attention_heads 40, num_key_value_heads 8, head_dim 128, num_local_experts 16,
 * num_experts_per_tok 1, intermediate_size 8192 (per expert; the one shared expert is as
 * wide), intermediate_size_mlp 16384 (dense layers: Scout has none), vocab_size 202048.
 * T = 4096; tokens per expert = 4096*1/16 = 256. */
static const expect scout_rows[] = {
    /* q_proj: 5120 -> 40*128 = 5120 */
    {0, 47, 1, "q_proj", "attn_q", F, 4096, 5120, 5120, 48},
    {0, 47, 1, "q_proj", "attn_q", D, 4096, 5120, 5120, 48},
    {0, 47, 1, "q_proj", "attn_q", W, 5120, 4096, 5120, 48},
    /* kv_proj: 5120 -> 2*8*128 = 2048 */
    {0, 47, 1, "kv_proj", "attn_kv", F, 4096, 5120, 2048, 48},
    {0, 47, 1, "kv_proj", "attn_kv", D, 4096, 2048, 5120, 48},
    {0, 47, 1, "kv_proj", "attn_kv", W, 5120, 4096, 2048, 48},
    /* o_proj: 5120 -> 5120 */
    {0, 47, 1, "o_proj", "attn_o", F, 4096, 5120, 5120, 48},
    {0, 47, 1, "o_proj", "attn_o", D, 4096, 5120, 5120, 48},
    {0, 47, 1, "o_proj", "attn_o", W, 5120, 4096, 5120, 48},
    /* router: 5120 -> 16 */
    {0, 47, 1, "router", "router", F, 4096, 5120, 16, 48},
    {0, 47, 1, "router", "router", D, 4096, 16, 5120, 48},
    {0, 47, 1, "router", "router", W, 5120, 4096, 16, 48},
    /* shared expert (8192 wide): gate_up 5120 -> 16384; down 8192 -> 5120 */
    {0, 47, 1, "shared.gate_up", "shared_gate_up", F, 4096, 5120, 16384, 48},
    {0, 47, 1, "shared.gate_up", "shared_gate_up", D, 4096, 16384, 5120, 48},
    {0, 47, 1, "shared.gate_up", "shared_gate_up", W, 5120, 4096, 16384, 48},
    {0, 47, 1, "shared.down", "shared_down", F, 4096, 8192, 5120, 48},
    {0, 47, 1, "shared.down", "shared_down", D, 4096, 5120, 8192, 48},
    {0, 47, 1, "shared.down", "shared_down", W, 8192, 4096, 5120, 48},
    /* routed experts: 256 tokens; gate_up 5120 -> 16384; count 48*16 = 768 */
    {0, 47, 1, "experts.gate_up", "expert_gate_up", F, 256, 5120, 16384, 768},
    {0, 47, 1, "experts.gate_up", "expert_gate_up", D, 256, 16384, 5120, 768},
    {0, 47, 1, "experts.gate_up", "expert_gate_up", W, 5120, 256, 16384, 768},
    /* down: 8192 -> 5120 */
    {0, 47, 1, "experts.down", "expert_down", F, 256, 8192, 5120, 768},
    {0, 47, 1, "experts.down", "expert_down", D, 256, 5120, 8192, 768},
    {0, 47, 1, "experts.down", "expert_down", W, 8192, 256, 5120, 768},
    /* LM head: 5120 -> 202048 */
    {LM, "lm_head", "lm_head", F, 4096, 5120, 202048, 1},
    {LM, "lm_head", "lm_head", D, 4096, 202048, 5120, 1},
    {LM, "lm_head", "lm_head", W, 5120, 4096, 202048, 1},
};

static void test_llama4_scout(void) {
    model_case mc = {"llama-4-scout", base_config("llama-4-scout", "llama4", 48, 5120, 40, 8, 128, 202048),
                     scout_rows, NROWS(scout_rows), 4096, 16, 1};
    set_moe(&mc.cfg, 16, 8192, 1, 0, 1);
    mc.cfg.dense_intermediate = 16384;
    mc.cfg.layer.num_shared_experts = 1;
    mc.cfg.layer.shared_intermediate = 8192;
    mc.cfg.layer.weight_on_input = 1;
    check_model(&mc);
}

/* ---- Qwen3-Next-80B-A3B -----------------------------------------------------------------
 * config.json: hidden_size 2048, num_hidden_layers 48 (all MoE), num_attention_heads 16,
 * num_key_value_heads 2, head_dim 256, num_experts 512, num_experts_per_tok 10,
 * moe_intermediate_size 512, shared_expert_intermediate_size 512 (one shared expert behind
 * a sigmoid gate, shared_expert_gate: 2048 -> 1), vocab_size 151936.
 * KNOWN LIMITATION: 36 of the 48 layers (3 of every 4, full_attention_interval 4) use linear
 * attention (Gated DeltaNet), which moe_model_config cannot express, and full attention's
 * q_proj also carries an output gate (N doubled). The list treats every layer as plain full
 * attention; the expected rows below say the same, and the library must say so in a note.
 * T = 4096; tokens per expert = 4096*10/512 = 80. */
static const expect qnext_rows[] = {
    /* q_proj: 2048 -> 16*256 = 4096 (limitation above) */
    {0, 47, 1, "q_proj", "attn_q", F, 4096, 2048, 4096, 48},
    {0, 47, 1, "q_proj", "attn_q", D, 4096, 4096, 2048, 48},
    {0, 47, 1, "q_proj", "attn_q", W, 2048, 4096, 4096, 48},
    /* kv_proj: 2048 -> 2*2*256 = 1024 */
    {0, 47, 1, "kv_proj", "attn_kv", F, 4096, 2048, 1024, 48},
    {0, 47, 1, "kv_proj", "attn_kv", D, 4096, 1024, 2048, 48},
    {0, 47, 1, "kv_proj", "attn_kv", W, 2048, 4096, 1024, 48},
    /* o_proj: 4096 -> 2048 */
    {0, 47, 1, "o_proj", "attn_o", F, 4096, 4096, 2048, 48},
    {0, 47, 1, "o_proj", "attn_o", D, 4096, 2048, 4096, 48},
    {0, 47, 1, "o_proj", "attn_o", W, 4096, 4096, 2048, 48},
    /* router: 2048 -> 512 */
    {0, 47, 1, "router", "router", F, 4096, 2048, 512, 48},
    {0, 47, 1, "router", "router", D, 4096, 512, 2048, 48},
    {0, 47, 1, "router", "router", W, 2048, 4096, 512, 48},
    /* shared_expert_gate: 2048 -> 1 (listed with the router kind) */
    {0, 47, 1, "shared_expert_gate", "router", F, 4096, 2048, 1, 48},
    {0, 47, 1, "shared_expert_gate", "router", D, 4096, 1, 2048, 48},
    {0, 47, 1, "shared_expert_gate", "router", W, 2048, 4096, 1, 48},
    /* shared expert 512 wide: gate_up 2048 -> 1024; down 512 -> 2048 */
    {0, 47, 1, "shared.gate_up", "shared_gate_up", F, 4096, 2048, 1024, 48},
    {0, 47, 1, "shared.gate_up", "shared_gate_up", D, 4096, 1024, 2048, 48},
    {0, 47, 1, "shared.gate_up", "shared_gate_up", W, 2048, 4096, 1024, 48},
    {0, 47, 1, "shared.down", "shared_down", F, 4096, 512, 2048, 48},
    {0, 47, 1, "shared.down", "shared_down", D, 4096, 2048, 512, 48},
    {0, 47, 1, "shared.down", "shared_down", W, 512, 4096, 2048, 48},
    /* routed experts: 80 tokens; gate_up 2048 -> 1024; count 48*512 = 24576 */
    {0, 47, 1, "experts.gate_up", "expert_gate_up", F, 80, 2048, 1024, 24576},
    {0, 47, 1, "experts.gate_up", "expert_gate_up", D, 80, 1024, 2048, 24576},
    {0, 47, 1, "experts.gate_up", "expert_gate_up", W, 2048, 80, 1024, 24576},
    /* down: 512 -> 2048 */
    {0, 47, 1, "experts.down", "expert_down", F, 80, 512, 2048, 24576},
    {0, 47, 1, "experts.down", "expert_down", D, 80, 2048, 512, 24576},
    {0, 47, 1, "experts.down", "expert_down", W, 512, 80, 2048, 24576},
    /* LM head: 2048 -> 151936 */
    {LM, "lm_head", "lm_head", F, 4096, 2048, 151936, 1},
    {LM, "lm_head", "lm_head", D, 4096, 151936, 2048, 1},
    {LM, "lm_head", "lm_head", W, 2048, 4096, 151936, 1},
};

static void test_qwen3_next(void) {
    model_case mc = {"qwen3-next-80b-a3b",
                     base_config("qwen3-next-80b-a3b", "qwen3_next", 48, 2048, 16, 2, 256, 151936), qnext_rows,
                     NROWS(qnext_rows), 4096, 512, 10};
    set_moe(&mc.cfg, 512, 512, 10, 0, 1);
    mc.cfg.dense_intermediate = 5120;
    mc.cfg.layer.num_shared_experts = 1;
    mc.cfg.layer.shared_intermediate = 512;
    mc.cfg.layer.shared_gate = 1;
    check_model(&mc);
    /* The limitation is said next to the list. */
    moe_shape_options opt;
    moe_shape_options_init(&opt);
    moe_shape_list *l = NULL;
    CHECK(moe_shape_list_create(NULL, &mc.cfg, &opt, &l) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    int said = 0;
    for (int i = 0; l && i < l->num_notes; i++) said |= strstr(l->notes[i], "linear attention") != NULL;
    CHECK(said, "no note on Qwen3-Next's linear-attention layers");
    moe_shape_list_free(l);
}

/* ---- decode and parallelism -----------------------------------------------------------
 * qwen3-30b-a3b (numbers above), decode, batch 8, context 4096, tp 4, ep 2:
 *   T = batch = 8 (one new token per sequence), Fprop only.
 *   q_proj 2048 -> (32/4)*128 = 1024; kv_proj: kv heads 4/4 = 1 -> 2*1*128 = 256;
 *   o_proj 1024 -> 2048; router 2048 -> 128 (replicated);
 *   experts: tokens per expert 8*8/128 = 0.5; gate_up 2048 -> 2*768/4 = 384, down 192 -> 2048,
 *   count 48 * 128/2 = 3072; LM head 2048 -> 151936/4 = 37984, M = 8. */
static void test_decode_tp_ep(void) {
    moe_model_config c = base_config("qwen3-30b-a3b", "qwen3_moe", 48, 2048, 32, 4, 128, 151936);
    set_moe(&c, 128, 768, 8, 0, 1);
    static const expect rows[] = {
        {0, 47, 1, "q_proj", "attn_q", F, 8, 2048, 1024, 48},
        {0, 47, 1, "kv_proj", "attn_kv", F, 8, 2048, 256, 48},
        {0, 47, 1, "o_proj", "attn_o", F, 8, 1024, 2048, 48},
        {0, 47, 1, "router", "router", F, 8, 2048, 128, 48},
        {0, 47, 1, "experts.gate_up", "expert_gate_up", F, 0.5, 2048, 384, 3072},
        {0, 47, 1, "experts.down", "expert_down", F, 0.5, 192, 2048, 3072},
        {LM, "lm_head", "lm_head", F, 8, 2048, 37984, 1},
    };
    moe_shape_options opt;
    moe_shape_options_init(&opt);
    opt.batch = 8;
    opt.seq = 1;
    opt.context = 4096;
    opt.mode = MOE_STEP_DECODE;
    opt.tp = 4;
    opt.ep = 2;
    moe_shape_list *l = NULL;
    moe_status st = moe_shape_list_create(NULL, &c, &opt, &l);
    CHECK(st == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    if (!l) return;
    CHECK(l->num_rows == NROWS(rows), "%lld rows, expected %d", (long long)l->num_rows, NROWS(rows));
    CHECK(l->tokens == 8, "T = %lld", (long long)l->tokens);
    /* touched experts per layer on this GPU: 128*(1-(1-8/128)^8)/2 */
    double touched = 128.0 * (1.0 - pow(1.0 - 8.0 / 128.0, 8)) / 2.0;
    for (int i = 0; i < NROWS(rows) && i < l->num_rows; i++) {
        const moe_gemm_row *r = &l->rows[i];
        const expect *e = &rows[i];
        CHECK(!strcmp(r->name, e->name) && r->pass == MOE_PASS_FPROP, "row %d: %s, expected %s", i, r->name, e->name);
        CHECK(r->m == e->m && r->k == e->k && r->n == e->n && r->count == e->count,
              "%s: %g x %g x %g x %lld, expected %g x %g x %g x %lld", e->name, r->m, r->k, r->n, (long long)r->count,
              e->m, e->k, e->n, (long long)e->count);
        int routed = !strncmp(e->name, "experts.", 8);
        double t = routed ? 48.0 * touched : (double)e->count;
        double eb = 2.0 * ((double)e->count * (e->m * e->k + e->m * e->n) + t * e->k * e->n);
        CHECK(close_rel(r->bytes, eb, 1e-9), "%s: bytes %.9g, expected %.9g", e->name, r->bytes, eb);
    }
    /* tp 8 > kv heads 4: one replicated kv head per rank, kv_proj N stays 2*1*128 = 256 */
    moe_shape_list_free(l);
    l = NULL;
    opt.tp = 8;
    opt.ep = 1;
    CHECK(moe_shape_list_create(NULL, &c, &opt, &l) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    if (l) {
        CHECK(l->rows[0].n == 512 && l->rows[1].n == 256, "tp 8: q N %g (expected 32/8*128 = 512), kv N %g (256)",
              l->rows[0].n, l->rows[1].n);
        CHECK(l->rows[4].n == 192, "tp 8: expert gate_up N %g, expected 2*768/8 = 192", l->rows[4].n);
    }
    moe_shape_list_free(l);
    /* prefill: LM head on the last token of each sequence only, M = batch = 8 */
    l = NULL;
    opt.tp = 1;
    opt.mode = MOE_STEP_PREFILL;
    opt.seq = 512;
    CHECK(moe_shape_list_create(NULL, &c, &opt, &l) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    if (l) {
        const moe_gemm_row *head = &l->rows[l->num_rows - 1];
        CHECK(!strcmp(head->name, "lm_head") && head->m == 8, "prefill lm_head M %g, expected 8", head->m);
        CHECK(l->rows[0].m == 8 * 512, "prefill q_proj M %g, expected 4096", l->rows[0].m);
    }
    moe_shape_list_free(l);
}

/* A Llama-4-Maverick-like interleave: MoE on odd layers (interleave_moe_layer_step 2, the
 * last of each pair), dense on even ones: one run each, "0-46/2" and "1-47/2". */
static void test_interleave(void) {
    moe_model_config c = base_config("maverick", "llama4", 48, 5120, 40, 8, 128, 202048);
    set_moe(&c, 128, 8192, 1, 1, 2);
    c.dense_intermediate = 16384;
    c.layer.num_shared_experts = 1;
    c.layer.shared_intermediate = 8192;
    moe_shape_options opt;
    moe_shape_options_init(&opt);
    opt.mode = MOE_STEP_PREFILL;
    moe_shape_list *l = NULL;
    CHECK(moe_shape_list_create(NULL, &c, &opt, &l) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    int dense = 0, experts = 0;
    for (int64_t i = 0; l && i < l->num_rows; i++) {
        const moe_gemm_row *r = &l->rows[i];
        if (r->kind == MOE_GEMM_DENSE_GATE_UP) {
            dense++;
            CHECK(r->layer_first == 0 && r->layer_last == 46 && r->layer_step == 2 && r->layer_count == 24 &&
                      r->n == 32768,
                  "dense run %lld-%lld/%lld x%lld N %g", (long long)r->layer_first, (long long)r->layer_last,
                  (long long)r->layer_step, (long long)r->layer_count, r->n);
        }
        if (r->kind == MOE_GEMM_EXPERT_GATE_UP) {
            experts++;
            CHECK(r->layer_first == 1 && r->layer_last == 47 && r->layer_step == 2 && r->count == 24 * 128,
                  "expert run %lld-%lld/%lld count %lld", (long long)r->layer_first, (long long)r->layer_last,
                  (long long)r->layer_step, (long long)r->count);
        }
    }
    CHECK(dense == 1 && experts == 1, "%d dense and %d expert gate_up rows, expected one each", dense, experts);
    moe_shape_list_free(l);
}

/* Bad options and configs: one failing status with a message naming the culprit. */
static void test_errors(void) {
    moe_model_config c = base_config("deepseek-v3", "deepseek_v3", 61, 7168, 128, 128, 0, 129280);
    set_moe(&c, 256, 2048, 8, 3, 1);
    c.dense_intermediate = 18432;
    c.kv_lora_rank = 512, c.q_lora_rank = 1536, c.qk_nope_head_dim = 128, c.qk_rope_head_dim = 64, c.v_head_dim = 128;
    moe_shape_options opt;
    moe_shape_options_init(&opt);
    moe_shape_list *l = NULL;
    moe_context_t *ctx = NULL;
    moe_context_create(MOE_BACKEND_CPU, 0, &ctx);

    /* batch x seq is a step's token count for train and prefill only: decode's is the batch. */
    opt.batch = 2, opt.seq = INT64_C(1) << 32, opt.mode = MOE_STEP_PREFILL;
    CHECK(moe_shape_list_create(ctx, &c, &opt, &l) == MOE_STATUS_INVALID_ARGUMENT && !l &&
              strstr(moe_last_error(ctx), "--batch 2 x --seq 4294967296"),
          "prefill of 2^33 tokens: %s", moe_last_error(ctx));
    opt.mode = MOE_STEP_DECODE;
    CHECK(moe_shape_list_create(ctx, &c, &opt, &l) == MOE_STATUS_OK && l && l->tokens == 2, "decode, batch 2: %s",
          moe_last_error(ctx));
    moe_shape_list_free(l);
    l = NULL;
    moe_shape_options_init(&opt);

    opt.tp = 3; /* 128 heads */
    CHECK(moe_shape_list_create(ctx, &c, &opt, &l) == MOE_STATUS_INVALID_ARGUMENT && !l, "tp 3 accepted");
    CHECK(strstr(moe_last_error(ctx), "--tp 3") && strstr(moe_last_error(ctx), "num_attention_heads"), "message: %s",
          moe_last_error(ctx));
    opt.tp = 1;
    opt.ep = 3; /* 256 experts */
    CHECK(moe_shape_list_create(ctx, &c, &opt, &l) == MOE_STATUS_INVALID_ARGUMENT, "ep 3 accepted");
    CHECK(strstr(moe_last_error(ctx), "--ep 3"), "message: %s", moe_last_error(ctx));
    opt.ep = 1;
    opt.batch = 0;
    CHECK(moe_shape_list_create(ctx, &c, &opt, &l) == MOE_STATUS_INVALID_ARGUMENT, "batch 0 accepted");
    CHECK(strstr(moe_last_error(ctx), "batch"), "message: %s", moe_last_error(ctx));
    opt.batch = 1;
    CHECK(moe_shape_options_set(ctx, &opt, "batch", "0") == MOE_STATUS_INVALID_ARGUMENT, "set batch 0 accepted");
    CHECK(moe_shape_options_set(ctx, &opt, "batch", "12x") == MOE_STATUS_INVALID_ARGUMENT, "set batch 12x accepted");
    CHECK(moe_shape_options_set(ctx, &opt, "mode", "infer") == MOE_STATUS_INVALID_ARGUMENT, "mode infer accepted");
    CHECK(moe_shape_options_set(ctx, &opt, "tp", "8") == MOE_STATUS_OK && opt.tp == 8, "set tp 8");
    opt.tp = 1;
    moe_model_config bad = c;
    bad.num_heads = 0;
    CHECK(moe_shape_list_create(ctx, &bad, &opt, &l) == MOE_STATUS_INVALID_ARGUMENT, "no heads accepted");
    CHECK(strstr(moe_last_error(ctx), "num_attention_heads"), "message: %s", moe_last_error(ctx));
    bad = c;
    bad.dense_intermediate = 0; /* dense layers 0-2 need a width */
    CHECK(moe_shape_list_create(ctx, &bad, &opt, &l) == MOE_STATUS_INVALID_ARGUMENT, "no dense width accepted");
    bad = c;
    bad.num_moe_layers = 61; /* disagrees with the mask (58) */
    CHECK(moe_shape_list_create(ctx, &bad, &opt, &l) == MOE_STATUS_INVALID_ARGUMENT, "bad mask accepted");
    CHECK(moe_shape_list_create(ctx, NULL, &opt, &l) == MOE_STATUS_NULL_POINTER, "NULL config accepted");
    moe_context_free(ctx);
}

/* ---- routing statistics ---------------------------------------------------------------- */

/* Binomial pmf by its definition, in log space (independent of the library's recurrence). */
static double pmf(int64_t n, int64_t x, double p) {
    return exp(lgamma((double)n + 1) - lgamma((double)x + 1) - lgamma((double)(n - x) + 1) + (double)x * log(p) +
               (double)(n - x) * log(1.0 - p));
}

static void test_routing_small(void) {
    /* E[ceil(X/B)] and E[max of E iid] by direct sums over x = 0..n. */
    const struct { int64_t n, E, k, B; } cases[] = {{20, 8, 2, 4}, {64, 256, 8, 128}, {1, 16, 1, 128},
                                                   {300, 32, 4, 16}, {1000, 128, 8, 64}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t n = cases[c].n, E = cases[c].E, k = cases[c].k, B = cases[c].B;
        double p = (double)k / (double)E, ceil_sum = 0, max_sum = 0, cdf = 0;
        for (int64_t x = 0; x <= n; x++) ceil_sum += pmf(n, x, p) * (double)((x + B - 1) / B);
        for (int64_t m = 0; m <= n; m++) { /* P(max > m) = 1 - F(m)^E */
            cdf += pmf(n, m, p);
            max_sum += 1.0 - pow(fmin(cdf, 1.0), (double)E);
        }
        moe_routing_stats s;
        CHECK(moe_routing_stats_compute(NULL, n, E, k, B, &s) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
        CHECK(close_rel(moe_binomial_expected_ceil(n, p, B), ceil_sum, 1e-9), "n %lld: E[ceil] %.12g, expected %.12g",
              (long long)n, moe_binomial_expected_ceil(n, p, B), ceil_sum);
        CHECK(close_rel(s.expected_blocks, (double)E * ceil_sum, 1e-9), "n %lld: blocks %.12g", (long long)n,
              s.expected_blocks);
        CHECK(close_rel(s.expected_max_load, max_sum, 1e-7), "n %lld: max load %.12g, expected %.12g", (long long)n,
              s.expected_max_load, max_sum);
        CHECK(close_rel(s.mean, (double)n * p, 1e-15), "mean");
        CHECK(close_rel(s.experts_touched, (double)E * (1.0 - pow(1.0 - p, (double)n)), 1e-12), "touched %.12g",
              s.experts_touched);
        double waste = 1.0 - (double)(n * k) / ((double)B * (double)E * ceil_sum);
        CHECK(close_rel(s.padding_waste, waste, 1e-9), "waste %.12g, expected %.12g", s.padding_waste, waste);
    }
    /* T = 0: nothing routed, nothing wasted. top_k = E: every expert gets every token. */
    moe_routing_stats s;
    CHECK(moe_routing_stats_compute(NULL, 0, 8, 2, 128, &s) == MOE_STATUS_OK && s.expected_blocks == 0 &&
              s.padding_waste == 0 && s.experts_touched == 0,
          "T = 0");
    CHECK(moe_routing_stats_compute(NULL, 200, 8, 8, 128, &s) == MOE_STATUS_OK && s.expected_blocks == 16 &&
              s.expected_max_load == 200 && s.experts_touched == 8,
          "top_k = E: blocks %g max %g", s.expected_blocks, s.expected_max_load);
    CHECK(moe_routing_stats_compute(NULL, 10, 8, 9, 128, &s) == MOE_STATUS_INVALID_ARGUMENT, "k > E accepted");
    CHECK(moe_routing_stats_compute(NULL, 10, 8, 2, 0, &s) == MOE_STATUS_INVALID_ARGUMENT, "block 0 accepted");
}

/* REFERENCE.md §4: DeepSeek-V3 (E 256, k 8) with 128-row blocks wastes 98% at T=64, 32% at
 * T=4096, 11% at T=16384. */
static void test_routing_deepseek(void) {
    const struct { int64_t T; double waste; } ref[] = {{64, 0.98}, {4096, 0.32}, {16384, 0.11}};
    for (int i = 0; i < 3; i++) {
        moe_routing_stats s;
        CHECK(moe_routing_stats_compute(NULL, ref[i].T, 256, 8, 128, &s) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
        CHECK(fabs(s.padding_waste - ref[i].waste) < 0.01, "T %lld: waste %.4f, published %.2f", (long long)ref[i].T,
              s.padding_waste, ref[i].waste);
    }
}

/* Monte Carlo: route T tokens to k distinct experts of E uniformly, count blocks and the max. */
static void test_routing_monte_carlo(void) {
    const struct { int64_t T, E, k, B; } cases[] = {{4096, 256, 8, 128}, {512, 128, 8, 128}, {64, 16, 1, 16}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t T = cases[c].T, E = cases[c].E, k = cases[c].k, B = cases[c].B;
        const int trials = 400;
        double blocks = 0, blocks2 = 0, maxl = 0, maxl2 = 0, touched = 0;
        int64_t *count = calloc((size_t)E, sizeof *count);
        int64_t *pick = calloc((size_t)E, sizeof *pick);
        for (int t = 0; t < trials; t++) {
            memset(count, 0, (size_t)E * sizeof *count);
            /* partial Fisher-Yates on any permutation picks a uniform k-subset: no reset needed */
            for (int64_t e = 0; e < E; e++) pick[e] = e;
            for (int64_t tok = 0; tok < T; tok++) {
                for (int64_t j = 0; j < k; j++) { /* partial Fisher-Yates: k distinct experts */
                    int64_t r = j + (int64_t)(rng_next() % (uint64_t)(E - j));
                    int64_t tmp = pick[j];
                    pick[j] = pick[r];
                    pick[r] = tmp;
                    count[pick[j]]++;
                }
            }
            double b = 0, mx = 0, used = 0;
            for (int64_t e = 0; e < E; e++) {
                b += (double)((count[e] + B - 1) / B);
                mx = fmax(mx, (double)count[e]);
                used += count[e] > 0;
            }
            blocks += b, blocks2 += b * b, maxl += mx, maxl2 += mx * mx, touched += used;
        }
        free(count);
        free(pick);
        double mean_b = blocks / trials, sd_b = sqrt(fmax(blocks2 / trials - mean_b * mean_b, 1e-12));
        moe_routing_stats s;
        CHECK(moe_routing_stats_compute(NULL, T, E, k, B, &s) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
        /* blocks: the sum is exact in expectation; 5 standard errors */
        CHECK(fabs(s.expected_blocks - mean_b) < 5.0 * sd_b / sqrt((double)trials) + 1e-9,
              "T %lld E %lld: blocks %.4f, simulated %.4f (sd %.3f)", (long long)T, (long long)E, s.expected_blocks,
              mean_b, sd_b);
        CHECK(fabs(s.experts_touched - touched / trials) < 0.02 * (double)E, "touched %.3f, simulated %.3f",
              s.experts_touched, touched / trials);
        /* max load: the independence formula is a lower bound (the real counts, with their fixed
         * total, are negatively associated), and a close one: at most 4 standard errors above
         * the simulation, at most 5% (+ 4 standard errors) below it */
        double sim_max = maxl / trials;
        double se_max = sqrt(fmax(maxl2 / trials - sim_max * sim_max, 0.0) / trials);
        CHECK(s.expected_max_load < sim_max + 4.0 * se_max && s.expected_max_load > sim_max * 0.95 - 4.0 * se_max,
              "T %lld E %lld: max load %.3f, simulated %.3f (standard error %.3f)", (long long)T, (long long)E,
              s.expected_max_load, sim_max, se_max);
    }
}

/* ---- GPU ceilings ---------------------------------------------------------------------- */
static void test_gpu_specs(void) {
    moe_gpu_spec g;
    CHECK(moe_gpu_builtin(NULL, "h200", &g) == MOE_STATUS_OK, "h200");
    /* PERF.md's measured H200 figures */
    CHECK(g.bf16_flops == 751e12 && g.fp8_flops == 1335e12 && g.read_bw == 4.19e12 && g.sms == 132 && g.l2_bytes == 60e6,
          "h200: %g %g %g %lld %g", g.bf16_flops, g.fp8_flops, g.read_bw, (long long)g.sms, g.l2_bytes);
    CHECK(moe_gpu_builtin(NULL, "H100", &g) == MOE_STATUS_OK && strstr(g.source, "datasheet"), "h100 labelled datasheet");
    CHECK(moe_gpu_builtin(NULL, "b200", &g) == MOE_STATUS_OK && strstr(g.source, "datasheet"), "b200 labelled datasheet");
    CHECK(moe_gpu_builtin(NULL, "a100", &g) == MOE_STATUS_NOT_FOUND, "a100 found");
    CHECK(moe_gpu_builtin_count() == 3 && moe_gpu_builtin_name(3) == NULL, "builtin count");
    const char *ok = "{\"name\": \"mine\", \"bf16_tflops\": 500, \"fp8_tflops\": 1000, \"read_tbps\": 3, \"sms\": 100,"
                     " \"l2_mb\": 40, \"launch_us\": 2.5}";
    CHECK(moe_gpu_parse(NULL, ok, strlen(ok), &g) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    CHECK(!strcmp(g.name, "mine") && g.bf16_flops == 500e12 && g.fp8_flops == 1000e12 && g.read_bw == 3e12 &&
              g.sms == 100 && g.ctas_per_sm == 1 && g.l2_bytes == 40e6 && fabs(g.launch_s - 2.5e-6) < 1e-18,
          "parsed %s %g %g %g %lld %lld %g %g", g.name, g.bf16_flops, g.fp8_flops, g.read_bw, (long long)g.sms,
          (long long)g.ctas_per_sm, g.l2_bytes, g.launch_s);
    const char *missing = "{\"bf16_tflops\": 500, \"fp8_tflops\": 1000, \"sms\": 100}";
    CHECK(moe_gpu_parse(NULL, missing, strlen(missing), &g) == MOE_STATUS_INVALID_ARGUMENT &&
              strstr(moe_last_error(NULL), "read_tbps"),
          "missing key: %s", moe_last_error(NULL));
    const char *negative = "{\"bf16_tflops\": -5, \"fp8_tflops\": 1000, \"read_tbps\": 3, \"sms\": 100}";
    CHECK(moe_gpu_parse(NULL, negative, strlen(negative), &g) == MOE_STATUS_INVALID_ARGUMENT, "negative accepted");
    CHECK(moe_gpu_parse(NULL, "{\"bf16", 6, &g) == MOE_STATUS_PARSE_ERROR, "malformed accepted");
    CHECK(moe_gpu_load(NULL, "/nonexistent/gpu.json", &g) == MOE_STATUS_IO_ERROR, "missing file");
    char fifo[] = "/tmp/moefuse-gpu-fifo-XXXXXX"; /* no writer: fopen would wait for one forever */
    if (mkdtemp(fifo)) {
        char path[64];
        snprintf(path, sizeof path, "%s/gpu.json", fifo);
        if (mkfifo(path, 0600) == 0) {
            alarm(20);
            CHECK(moe_gpu_load(NULL, path, &g) == MOE_STATUS_IO_ERROR && strstr(moe_last_error(NULL), "not a regular file"),
                  "GPU file on a FIFO: %s", moe_last_error(NULL));
            alarm(0);
            unlink(path);
        }
        rmdir(fifo);
    }
    /* Session 37's review: values a model would turn into inf, 0 or garbage, named by key. */
    static const struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"bf16_tflops\": 1e300, \"fp8_tflops\": 1000, \"read_tbps\": 3, \"sms\": 100}", "bf16_tflops = 1e+300 is too large"},
        {"{\"bf16_tflops\": 500, \"fp8_tflops\": 1000, \"read_tbps\": 1e-7, \"sms\": 100}", "read_tbps = 1e-07 is below"},
        {"{\"bf16_tflops\": 500, \"fp8_tflops\": 1000, \"read_tbps\": 3, \"sms\": 100, \"launch_usec\": 9}",
         "unknown key \"launch_usec\""},
        {"{\"bf16_tflops\": 500, \"fp8_tflops\": 1000, \"read_tbps\": 3, \"sms\": 100, \"sms\": 50}", "\"sms\" appears twice"},
        {"{\"bf16_tflops\": 500, \"fp8_tflops\": 1000, \"read_tbps\": 3, \"sms\": 100} {\"x\": 1}", "text after the JSON"},
        {"{\"bf16_tflops\": 500, \"fp8_tflops\": 1000, \"read_tbps\": 3, \"sms\": 100, \"hopper_bf16_tflops\": 600}",
         "hopper_bf16_flops = 6e+14 FLOP/s, expected 0 (the dtype's peak) to bf16_flops"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(moe_gpu_parse(NULL, bad[i].json, strlen(bad[i].json), &g) != MOE_STATUS_OK &&
                  strstr(moe_last_error(NULL), bad[i].needle),
              "bad GPU file %zu: %s", i, moe_last_error(NULL));
    moe_gpu_spec nan_launch;
    CHECK(moe_gpu_builtin(NULL, "h200", &nan_launch) == MOE_STATUS_OK, "h200");
    nan_launch.launch_s = NAN;
    double seconds = 0;
    CHECK(moe_dense_launch_time(NULL, &nan_launch, MOE_DTYPE_BF16, 128, 128, 128, &seconds) == MOE_STATUS_INVALID_ARGUMENT,
          "a NaN launch_s accepted: %s", moe_last_error(NULL));
    CHECK(isnan(moe_binomial_expected_ceil(MOE_BINOMIAL_N_MAX + 1, 0.5, 128)) &&
              isnan(moe_binomial_expected_ceil(100, NAN, 128)),
          "moe_binomial_expected_ceil outside its range is not NaN");
}

/* ---- roofline: hand-built one-row lists ------------------------------------------------- */
static moe_shape_list one_row(moe_gemm_row *row, double m, double k, double n, int64_t count) {
    moe_shape_list l;
    memset(&l, 0, sizeof l);
    memset(row, 0, sizeof *row);
    moe_shape_options_init(&l.options);
    l.config.num_layers = 1;
    l.tokens = (int64_t)m;
    snprintf(row->name, sizeof row->name, "test");
    row->kind = MOE_GEMM_ATTN_O, row->pass = MOE_PASS_FPROP;
    row->m = m, row->k = k, row->n = n, row->count = count, row->touched = (double)count;
    row->layer_first = 0, row->layer_last = count - 1, row->layer_step = 1, row->layer_count = count;
    row->flops = 2.0 * m * k * n * (double)count;
    row->bytes = (double)count * 2.0 * (m * k + k * n + m * n);
    row->intensity = row->flops / row->bytes;
    l.num_rows = 1;
    l.rows = row;
    l.total_flops = row->flops;
    l.total_bytes = row->bytes;
    return l;
}

static void test_roofline_dense(void) {
    moe_gpu_spec h200;
    moe_gpu_builtin(NULL, "h200", &h200);
    /* the hand computations below leave the launch cost and the exposed epilogue out; both are
     * tested last */
    h200.launch_s = 0;
    h200.epilogue_exposed = 0;
    const double rate = 751e12 / 132; /* FLOP/s of one SM (one CTA per SM) */
    moe_gemm_row row;
    moe_roofline *rf = NULL;

    /* A: 1536 x 8192 x 1408 = (12 x 128) x 8192 x (11 x 128): 132 tiles of 128x128, exactly one
     * wave; split-K and the other tiles only tie. Compute 2*128*128*8192 / rate = 47.18 us >
     * memory 2*(1536*8192 + 8192*1408 + 1536*1408) B / 4.19 TB/s = 12.5 us. */
    moe_shape_list l = one_row(&row, 1536, 8192, 1408, 1);
    /* A hand-made row out of range is refused (it indexed per-pass arrays); so is a negative count. */
    row.pass = (moe_gemm_pass)7;
    CHECK(moe_roofline_create(NULL, &l, &h200, &rf) == MOE_STATUS_INVALID_ARGUMENT && !rf &&
              strstr(moe_last_error(NULL), "rows[0] has pass 7"),
          "pass 7: %s", moe_last_error(NULL));
    row.pass = MOE_PASS_FPROP;
    l.num_rows = -5;
    CHECK(moe_roofline_create(NULL, &l, &h200, &rf) == MOE_STATUS_INVALID_ARGUMENT && !rf, "num_rows -5 accepted");
    l.num_rows = 1;
    CHECK(moe_roofline_create(NULL, &l, &h200, &rf) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    if (rf) {
        const moe_roofline_row *o = &rf->rows[0];
        double t = 2.0 * 128 * 128 * 8192 / rate;
        CHECK(close_rel(o->time_s, t, 1e-12), "A: %.6g s, expected %.6g", o->time_s, t);
        CHECK(o->tile.m == 128 && o->tile.n == 128 && o->split_k == 1, "A: tile %dx%d/k%d", o->tile.m, o->tile.n,
              o->split_k);
        CHECK(o->tiles == 132 && o->waves == 1 && close_rel(o->tile_efficiency, 1, 1e-12) &&
                  close_rel(o->wave_efficiency, 1, 1e-12),
              "A: %g tiles %g waves, eff %g %g", o->tiles, o->waves, o->tile_efficiency, o->wave_efficiency);
        CHECK(o->compute_bound && close_rel(o->ideal_s, 2.0 * 1536 * 8192 * 1408 / 751e12, 1e-12), "A: ideal %g",
              o->ideal_s);
        CHECK(close_rel(rf->ridge, 751e12 / 4.19e12, 1e-12), "ridge %g", rf->ridge);
    }
    moe_roofline_free(rf);
    rf = NULL;

    /* B: one row more, 1537 x 8192 x 1408. By hand (waves x per-CTA K, relative to A's 8192):
     *   128x128: 13*11 = 143 tiles -> 2 waves (2x); 128x256: 78 -> 1 wave of a double tile (2x);
     *   256x128: 77 -> 2x.
     *   split-K of 128x128: k2 286 -> 3 waves x 1/2 = 1.5x; k4 572 -> 5 x 1/4 = 1.25x;
     *   k8 1144 -> 9 x 1/8 = 1.125x; k16 2288 -> 18 x 1/16 = 1.125x (ties go to the smaller split);
     *   k32 4576 -> 35 x 1/32 = 1.094x, but its fp32 partials, 2*32*1537*1408*4 B = 554 MB, take 132 us.
     *   k8's partials: 2*8*1537*1408*4 B = 138.5 MB + 52.6 MB operands -> 45.6 us < compute 53.1 us.
     *   (128x256 and 256x128 splits: k8 624 / 616 -> 5 waves x 2/8 = 1.25x, k16 -> 10 x 2/16 = 1.25x,
     *   k32 -> 19 x 2/32 = 1.19x: no better.)
     * So 128x128 split 8: 9 waves x 2*128*128*1024 / rate. */
    l = one_row(&row, 1537, 8192, 1408, 1);
    CHECK(moe_roofline_create(NULL, &l, &h200, &rf) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    if (rf) {
        const moe_roofline_row *o = &rf->rows[0];
        double t = 9.0 * 2.0 * 128 * 128 * 1024 / rate;
        CHECK(o->tile.m == 128 && o->tile.n == 128 && o->split_k == 8, "B: tile %dx%d/k%d, expected 128x128/k8",
              o->tile.m, o->tile.n, o->split_k);
        CHECK(close_rel(o->time_s, t, 1e-12), "B: %.6g s, expected %.6g", o->time_s, t);
    }
    moe_roofline_free(rf);
    rf = NULL;

    /* C: decode GEMV-like 1 x 8192 x 8192, 10 instances: memory-bound, 2*(8192 + 8192^2 + 8192) B
     * per instance at 4.19 TB/s = 32.04 us. One wave of 64 128x128 tiles would compute 47.2 us;
     * split-K 2 (128 tiles, 23.6 us) hides the compute under the memory time, plus its fp32
     * partials, 2*2*1*8192*4 B; more splits only add partials. */
    l = one_row(&row, 1, 8192, 8192, 10);
    CHECK(moe_roofline_create(NULL, &l, &h200, &rf) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    if (rf) {
        const moe_roofline_row *o = &rf->rows[0];
        double ideal = 10 * 2.0 * (8192.0 + 8192.0 * 8192.0 + 8192.0) / 4.19e12;
        double t = ideal + 10 * 2.0 * 2 * 8192.0 * 4 / 4.19e12;
        CHECK(!o->compute_bound && close_rel(o->time_s, t, 1e-12) && close_rel(o->ideal_s, ideal, 1e-12),
              "C: %.6g s (ideal %.6g), expected %.6g memory-bound", o->time_s, o->ideal_s, t);
        CHECK(o->tile.m == 128 && o->tile.n == 128 && o->split_k == 2, "C: tile %dx%d/k%d, expected 128x128/k2",
              o->tile.m, o->tile.n, o->split_k);
        CHECK(close_rel(rf->total_time_s, t, 1e-12) && rf->memory_bound_time_s == rf->total_time_s, "C: totals");
    }
    moe_roofline_free(rf);
    rf = NULL;

    /* launch_s adds per launch: 10 launches x 5 us */
    h200.launch_s = 5e-6;
    CHECK(moe_roofline_create(NULL, &l, &h200, &rf) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    if (rf) {
        double t = 10 * (2.0 * (8192.0 + 8192.0 * 8192.0 + 8192.0 + 2 * 8192.0 * 4) / 4.19e12 + 5e-6);
        CHECK(close_rel(rf->rows[0].time_s, t, 1e-12), "launch: %.6g s, expected %.6g", rf->rows[0].time_s, t);
    }
    moe_roofline_free(rf);
    rf = NULL;

    /* epilogue_exposed 1 (the built-in h200's): A again, 1536 x 8192 x 1408, one wave of 132
     * 128x128 tiles, now + the wave's output store 132 * 128*128 * 2 B / 4.19 TB/s = 1.032 us
     * after its mainloop (47.18 us); still compute-bound, same tile, no split (a split's store
     * is of fp32 partials, twice the bytes, on top of more waves). Plus launch 5 us. */
    h200.epilogue_exposed = 1;
    l = one_row(&row, 1536, 8192, 1408, 1);
    CHECK(moe_roofline_create(NULL, &l, &h200, &rf) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    if (rf) {
        const moe_roofline_row *o = &rf->rows[0];
        double t = 2.0 * 128 * 128 * 8192 / rate + 132.0 * 128 * 128 * 2 / 4.19e12 + 5e-6;
        CHECK(close_rel(o->time_s, t, 1e-12) && o->split_k == 1 && o->tile.m == 128 && o->tile.n == 128,
              "epilogue: %.6g s %dx%d/k%d, expected %.6g 128x128", o->time_s, o->tile.m, o->tile.n, o->split_k, t);
    }
    moe_roofline_free(rf);
    h200.epilogue_exposed = 1.5;
    CHECK(moe_roofline_create(NULL, &l, &h200, &rf) == MOE_STATUS_INVALID_ARGUMENT, "epilogue_exposed 1.5 accepted");
    h200.epilogue_exposed = 0;
    h200.launch_s = -1;
    CHECK(moe_roofline_create(NULL, &l, &h200, &rf) == MOE_STATUS_INVALID_ARGUMENT, "negative launch accepted");
}

/* Routed experts in a real list: qwen3-30b-a3b prefill, T = 4096 (1 x 4096). */
static void test_roofline_experts(void) {
    moe_model_config c;
    CHECK(moe_config_preset(NULL, "qwen3-30b-a3b", &c) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    moe_shape_options opt;
    moe_shape_options_init(&opt);
    opt.batch = 1, opt.seq = 4096, opt.mode = MOE_STEP_PREFILL;
    moe_shape_list *l = NULL;
    moe_roofline *rf = NULL;
    moe_gpu_spec h200;
    moe_gpu_builtin(NULL, "h200", &h200);
    CHECK(moe_shape_list_create(NULL, &c, &opt, &l) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    if (l) CHECK(moe_roofline_create(NULL, l, &h200, &rf) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    if (!rf) {
        moe_shape_list_free(l);
        return;
    }
    moe_routing_stats st;
    moe_routing_stats_compute(NULL, 4096, 128, 8, 128, &st);
    double expert_s = 0;
    for (int64_t i = 0; i < l->num_rows; i++) {
        const moe_gemm_row *r = &l->rows[i];
        const moe_roofline_row *o = &rf->rows[i];
        if (r->kind != MOE_GEMM_EXPERT_GATE_UP && r->kind != MOE_GEMM_EXPERT_DOWN) {
            CHECK(o->padding_waste == 0 && o->experts_touched == 0, "%s: routing fields set", r->name);
            continue;
        }
        expert_s += o->time_s;
        CHECK(close_rel(o->padding_waste, st.padding_waste, 1e-12) && close_rel(o->experts_touched, 128, 1e-9) &&
                  close_rel(o->expected_max_load, st.expected_max_load, 1e-12),
              "%s: waste %g touched %g max %g", r->name, o->padding_waste, o->experts_touched, o->expected_max_load);
        /* row tiles: 128 experts x E[ceil(n_e / tm)], n_e ~ Binomial(4096, 1/16) */
        double row_tiles = 128.0 * moe_binomial_expected_ceil(4096, 8.0 / 128.0, o->tile.m);
        double expect_tiles = row_tiles * ceil(r->n / o->tile.n);
        CHECK(close_rel(o->tiles, expect_tiles, 1e-12), "%s: %g tiles, expected %g", r->name, o->tiles, expect_tiles);
        /* 256 rows per expert: the forward's Hopper bf16 kernel, its one tile */
        CHECK(o->kernel == MOE_KERNEL_HOPPER_BF16 && o->tile.m == 128 && o->tile.n == 256 && o->split_k == 1,
              "%s: kernel %s, tile %dx%d/%d", r->name, moe_kernel_family_name(o->kernel), o->tile.m, o->tile.n,
              o->split_k);
        CHECK(o->time_s >= o->ideal_s * (1 - 1e-12), "%s: predicted below the roofline", r->name);
    }
    /* PERF.md: the bf16 compute floor of this MoE layer at T = 4096 is 0.412 ms (6*T*k*H*I at
     * 751 TFLOP/s). With the padding of the row tiles the prediction must lie above it,
     * and below the slowest peer measured there (torch._grouped_mm, 1.78 ms). */
    double per_layer = expert_s / 48.0;
    CHECK(per_layer > 0.412e-3 && per_layer < 1.78e-3, "expert MLP per layer %.4f ms, expected within (0.412, 1.78)",
          per_layer * 1e3);
    printf("  qwen3-30b-a3b T=4096 expert MLP predicted %.4f ms per layer (PERF.md floor 0.412, padding %.1f%%)\n",
           per_layer * 1e3, 100 * st.padding_waste);
    /* the SVG: axes with units, every point's label present, well formed ends */
    char *svg = NULL;
    CHECK(moe_roofline_svg(NULL, l, rf, &svg) == MOE_STATUS_OK && svg, "%s", moe_last_error(NULL));
    if (svg) {
        CHECK(!strncmp(svg, "<svg ", 5) && strstr(svg, "</svg>\n") && strstr(svg, "[FLOP/byte]") &&
                  strstr(svg, "[TFLOP/s]"),
              "svg frame or axis units missing");
        CHECK(strstr(svg, "experts.gate_up F") && strstr(svg, "lm_head F") && strstr(svg, "router F"),
              "point labels missing");
    }
    free(svg);
    moe_roofline_free(rf);
    moe_shape_list_free(l);
}

/* moefuse's grouped kernels: the forward's choice, and one launch as roofline --measure times it
 * (rows spread evenly over the experts), derived by hand from the kernels' tiles. */
static void test_roofline_grouped(void) {
    /* the forward's rule (cuda_backend.h): FP8 on wgmma at every T; bf16 above T*k = 16*E, where
     * wgmma can run (bf16: H, I multiples of 64, E*H and E*I >= 256, (E+1)*H and (E+1)*2I below 2^31) */
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_BF16, 4096, 128, 2048, 768) == MOE_KERNEL_HOPPER_BF16, "bf16 32 rows: hopper");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_BF16, 1023, 8, 7168, 2048) == MOE_KERNEL_HOPPER_BF16,
          "bf16 127.9 rows: hopper");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_BF16, INT64_MAX, 8, 7168, 2048) == MOE_KERNEL_HOPPER_BF16,
          "bf16 INT64_MAX rows: hopper");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_BF16, 4096, 8, 1000, 2048) == MOE_KERNEL_V1, "bf16 H 1000: v1");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_BF16, 4096, 2, 64, 64) == MOE_KERNEL_V1, "bf16 E*H 128 < 256: v1");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_BF16, INT64_MAX, 4, 64, 64) == MOE_KERNEL_HOPPER_BF16,
          "bf16 E*H 256: hopper");
    /* 2048 * (E + 1) = 2^31 + 2048 with E = 2^20: the weight stack's rows pass 2^31 */
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_BF16, INT64_MAX, 1 << 20, 2048, 64) == MOE_KERNEL_V1,
          "bf16 stack over 2^31 rows: v1");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_E4M3, 2048, 128, 2880, 2880) == MOE_KERNEL_HOPPER_FP8_DECODE,
          "fp8 16 rows per expert: the decode kernel with the operands swapped");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_E4M3, 2049, 128, 2880, 2880) == MOE_KERNEL_HOPPER_FP8,
          "fp8 just over 16 rows per expert: the 128 x 128 tiles");
    /* bf16 at decode: the swapped kernel from half a row per expert (2 x rows >= E) up to 16 */
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_BF16, 128, 8, 7168, 2048) == MOE_KERNEL_HOPPER_BF16_DECODE,
          "bf16 16 rows per expert: the decode kernel with the operands swapped");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_BF16, 129, 8, 7168, 2048) == MOE_KERNEL_HOPPER_BF16,
          "bf16 just over 16 rows per expert: the Hopper tiles");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_BF16, 64, 128, 2048, 768) == MOE_KERNEL_HOPPER_BF16_DECODE,
          "bf16 half a row per expert (qwen3 T = 8): the swapped kernel");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_BF16, 63, 128, 2048, 768) == MOE_KERNEL_V1,
          "bf16 under half a row per expert: v1");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_BF16, 128, 8, 1000, 2048) == MOE_KERNEL_V1,
          "bf16 16 rows per expert, H 1000 (Hopper cannot run it): v1");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_E4M3, 4096, 8, 2880, 120) == MOE_KERNEL_V1, "fp8 I 120: v1");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_E4M3, 4096, 8, 320, 208) == MOE_KERNEL_HOPPER_FP8,
          "fp8 H 320, I 208 (multiples of 16): hopper");
    CHECK(moe_grouped_kernel_select(MOE_DTYPE_F32, 4096, 8, 2048, 768) == MOE_KERNEL_LIBRARY, "f32: library");

    moe_gpu_spec h200;
    moe_gpu_builtin(NULL, "h200", &h200);
    const double bw = 4.19e12, launch = 5.5e-6, share = 0.5;
    CHECK(h200.stream_power_share == share, "h200 stream_power_share %g", h200.stream_power_share);
    /* deepseek-v3 GEMM1 at T = 4096: 32768 rows on 256 experts, 128 each: one 128-row block each;
     * 16 columns of 256 (N 4096): 4096 tiles of 128x256x7168 on 132 CTAs = 32 waves, each a tile's
     * math at 724/132 TFLOP/s plus the wave's exposed store (132 tiles of 128x256 bf16). Memory:
     * A 32768x7168 + out 32768x4096 + 256 W of 7168x4096, 2 B each. The power limit: the 4096
     * tiles' MMAs at the bf16 peak (751) plus half the memory time; it exceeds both. */
    double s = 0;
    CHECK(moe_grouped_launch_time(NULL, &h200, MOE_DTYPE_BF16, MOE_KERNEL_HOPPER_BF16, 256, 32768, 7168, 4096, &s) ==
              MOE_STATUS_OK, "%s", moe_last_error(NULL));
    double compute = 32 * (2.0 * 128 * 256 * 7168 / (724e12 / 132) + 132.0 * 128 * 256 * 2 / bw);
    double memory = (32768.0 * 7168 * 2 + 32768.0 * 4096 * 2 + 256.0 * 7168 * 4096 * 2) / bw;
    double power = 4096.0 * 2 * 128 * 256 * 7168 / 751e12 + share * memory;
    CHECK(power > memory && memory > compute && close_rel(s, power + launch, 1e-12),
          "hopper bf16: %.6g s, expected %.6g", s, power + launch);
    /* deepseek-v3 GEMM2 at T = 512 in FP8 on v1: 4096 rows on 252 experts (64 of them get 17, the
     * rest 16): 252 blocks of 64 rows, 56 columns of 128 (N 7168): 14112 tiles of 64x128 (K 2048,
     * 16 k-steps of 128) on 2 x 132 CTAs = 54 waves at 224/264 TFLOP/s each, plus each wave's store
     * (264 tiles of 64x128 bf16). Memory: A 4096x2048 fp8 + out 4096x7168 bf16 + 252 W of 2048x7168
     * fp8: compute-bound. */
    CHECK(moe_grouped_launch_time(NULL, &h200, MOE_DTYPE_E4M3, MOE_KERNEL_V1, 252, 4096, 2048, 7168, &s) ==
              MOE_STATUS_OK, "%s", moe_last_error(NULL));
    compute = 54 * (2.0 * 64 * 128 * 2048 / (224e12 / 264) + 264.0 * 64 * 128 * 2 / bw);
    memory = (4096.0 * 2048 + 4096.0 * 7168 * 2 + 252.0 * 2048 * 7168) / bw;
    power = 14112.0 * 2 * 64 * 128 * 2048 / 751e12 + share * memory; /* f16 MMAs: the bf16 peak */
    CHECK(compute > memory && compute > power && close_rel(s, compute + launch, 1e-12),
          "v1 fp8: %.6g s, expected %.6g", s, compute + launch);
    /* the same on the FP8 wgmma kernel: 252 blocks of 128 rows x 56 columns of 128 = 14112 tiles of
     * 128x128x2048 on 132 CTAs = 107 waves (106.9) at 834/132 TFLOP/s, store 132 tiles of 128x128 */
    CHECK(moe_grouped_launch_time(NULL, &h200, MOE_DTYPE_E4M3, MOE_KERNEL_HOPPER_FP8, 252, 4096, 2048, 7168, &s) ==
              MOE_STATUS_OK, "%s", moe_last_error(NULL));
    compute = 107 * (2.0 * 128 * 128 * 2048 / (834e12 / 132) + 132.0 * 128 * 128 * 2 / bw);
    power = 14112.0 * 2 * 128 * 128 * 2048 / 1335e12 + share * memory;
    CHECK(close_rel(s, fmax(fmax(compute, memory), power) + launch, 1e-12), "hopper fp8: %.6g s, expected %.6g", s,
          fmax(fmax(compute, memory), power) + launch);
    /* the same on the FP8 decode kernel: plan blocks of 32 rows, one per expert (16 or 17 rows):
     * 252 x 56 = 14112 units of 32x128x2048 on 132 CTAs = 107 waves at 834/132 TFLOP/s, store 132
     * units of 32x128: memory-bound (the weight stream). bf16 is not its dtype. */
    CHECK(moe_grouped_launch_time(NULL, &h200, MOE_DTYPE_E4M3, MOE_KERNEL_HOPPER_FP8_DECODE, 252, 4096, 2048, 7168,
                                  &s) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    compute = 107 * (2.0 * 32 * 128 * 2048 / (834e12 / 132) + 132.0 * 32 * 128 * 2 / bw);
    power = 14112.0 * 2 * 32 * 128 * 2048 / 1335e12 + share * memory;
    CHECK(memory > compute && memory > power && close_rel(s, memory + launch, 1e-12),
          "hopper fp8 decode: %.6g s, expected %.6g", s, memory + launch);
    CHECK(moe_grouped_launch_time(NULL, &h200, MOE_DTYPE_BF16, MOE_KERNEL_HOPPER_FP8_DECODE, 252, 4096, 2048, 7168,
                                  &s) == MOE_STATUS_INVALID_ARGUMENT, "bf16 on the fp8 decode kernel: refused");
    /* its bf16 form: the same 14112 units of 32x128x2048 in 107 waves at 724/132 TFLOP/s, store 132
     * units of 32x128 bf16; memory A 4096x2048 + out 4096x7168 + 252 W of 2048x7168, 2 B each */
    CHECK(moe_grouped_launch_time(NULL, &h200, MOE_DTYPE_BF16, MOE_KERNEL_HOPPER_BF16_DECODE, 252, 4096, 2048, 7168,
                                  &s) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    compute = 107 * (2.0 * 32 * 128 * 2048 / (724e12 / 132) + 132.0 * 32 * 128 * 2 / bw);
    memory = (4096.0 * 2048 * 2 + 4096.0 * 7168 * 2 + 252.0 * 2048 * 7168 * 2) / bw;
    power = 14112.0 * 2 * 32 * 128 * 2048 / 751e12 + share * memory;
    CHECK(memory > compute && memory > power && close_rel(s, memory + launch, 1e-12),
          "hopper bf16 decode: %.6g s, expected %.6g", s, memory + launch);
    CHECK(moe_grouped_launch_time(NULL, &h200, MOE_DTYPE_E4M3, MOE_KERNEL_HOPPER_BF16_DECODE, 252, 4096, 2048, 7168,
                                  &s) == MOE_STATUS_INVALID_ARGUMENT, "e4m3 on the bf16 decode kernel: refused");
    /* an uneven spread: 300 rows on 2 experts of K 64, N 256 -> 150 each, 2 blocks of 128 each:
     * 4 tiles on hopper bf16, one wave */
    CHECK(moe_grouped_launch_time(NULL, &h200, MOE_DTYPE_BF16, MOE_KERNEL_HOPPER_BF16, 2, 300, 64, 256, &s) ==
              MOE_STATUS_OK, "%s", moe_last_error(NULL));
    compute = 2.0 * 128 * 256 * 64 / (724e12 / 132) + 4.0 * 128 * 256 * 2 / bw;
    memory = (300.0 * 64 * 2 + 300.0 * 256 * 2 + 2.0 * 64 * 256 * 2) / bw;
    power = 4.0 * 2 * 128 * 256 * 64 / 751e12 + share * memory;
    CHECK(close_rel(s, fmax(fmax(compute, memory), power) + launch, 1e-12), "uneven: %.6g s, expected %.6g", s,
          fmax(fmax(compute, memory), power) + launch);
    /* a GPU without kernel rates (h100: datasheet) runs the kernels at its peaks */
    moe_gpu_spec h100;
    moe_gpu_builtin(NULL, "h100", &h100);
    CHECK(moe_grouped_launch_time(NULL, &h100, MOE_DTYPE_BF16, MOE_KERNEL_HOPPER_BF16, 2, 300, 64, 256, &s) ==
              MOE_STATUS_OK, "%s", moe_last_error(NULL));
    compute = 2.0 * 128 * 256 * 64 / (989.4e12 / 132) + 4.0 * 128 * 256 * 2 / 3.35e12 * h100.epilogue_exposed;
    memory = (300.0 * 64 * 2 + 300.0 * 256 * 2 + 2.0 * 64 * 256 * 2) / 3.35e12;
    CHECK(close_rel(s, fmax(compute, memory) + h100.launch_s, 1e-12), "h100: %.6g s", s);
    /* bad arguments */
    CHECK(moe_grouped_launch_time(NULL, &h200, MOE_DTYPE_BF16, MOE_KERNEL_LIBRARY, 2, 300, 64, 256, &s) ==
              MOE_STATUS_INVALID_ARGUMENT, "library kernel accepted");
    CHECK(moe_grouped_launch_time(NULL, &h200, MOE_DTYPE_F32, MOE_KERNEL_V1, 2, 300, 64, 256, &s) ==
              MOE_STATUS_INVALID_ARGUMENT, "f32 accepted");
    CHECK(moe_grouped_launch_time(NULL, &h200, MOE_DTYPE_BF16, MOE_KERNEL_V1, 0, 300, 64, 256, &s) ==
              MOE_STATUS_INVALID_ARGUMENT, "0 experts accepted");
    /* the GPU file's kernel rates */
    const char *file = "{\"bf16_tflops\": 751, \"fp8_tflops\": 1335, \"read_tbps\": 4.19, \"sms\": 132, "
                       "\"hopper_bf16_tflops\": 724, \"hopper_fp8_tflops\": 834, \"v1_tflops\": 224}";
    moe_gpu_spec g;
    CHECK(moe_gpu_parse(NULL, file, strlen(file), &g) == MOE_STATUS_OK && g.hopper_bf16_flops == 724e12 &&
              g.hopper_fp8_flops == 834e12 && g.v1_flops == 224e12,
          "kernel rates: %s", moe_last_error(NULL));
    const char *negative = "{\"bf16_tflops\": 751, \"fp8_tflops\": 1335, \"read_tbps\": 4.19, \"sms\": 132, "
                           "\"v1_tflops\": -1}";
    CHECK(moe_gpu_parse(NULL, negative, strlen(negative), &g) == MOE_STATUS_INVALID_ARGUMENT, "negative v1 accepted");
    CHECK(moe_gpu_parse(NULL, file, strlen(file), &g) == MOE_STATUS_OK && g.stream_power_share == 0.0,
          "stream_power_share defaults to 0 (no power bound)");
    const char *share_file = "{\"bf16_tflops\": 751, \"fp8_tflops\": 1335, \"read_tbps\": 4.19, \"sms\": 132, "
                             "\"stream_power_share\": 0.25}";
    CHECK(moe_gpu_parse(NULL, share_file, strlen(share_file), &g) == MOE_STATUS_OK && g.stream_power_share == 0.25,
          "stream_power_share 0.25: %s", moe_last_error(NULL));
    const char *share_big = "{\"bf16_tflops\": 751, \"fp8_tflops\": 1335, \"read_tbps\": 4.19, \"sms\": 132, "
                            "\"stream_power_share\": 1.5}";
    CHECK(moe_gpu_parse(NULL, share_big, strlen(share_big), &g) == MOE_STATUS_INVALID_ARGUMENT &&
              strstr(moe_last_error(NULL), "stream_power_share"),
          "stream_power_share 1.5 accepted or not named: %s", moe_last_error(NULL));
}

/* moefuse's Hopper dense engine (roofline --measure's timing of non-routed shapes): its tile, one
 * persistent CTA per SM taking the tiles in turn, no split-K or stream-K, its family's rate;
 * derived by hand from src/cuda/hopper/gemm_dense.cu and gemm_fp8.cu. */
static void test_roofline_dense_engine(void) {
    moe_gpu_spec h200;
    moe_gpu_builtin(NULL, "h200", &h200);
    const double bw = 4.19e12, launch = 5.5e-6;
    /* deepseek-v3 q_a_proj at T = 4096, bf16: 32 x 6 = 192 tiles of 128 x 256 (not fewer than the
     * 132 SMs, so the wide tile) = 2 waves, each a tile's 128x256x7168 at 724/132 TFLOP/s plus the
     * wave's exposed store (132 tiles of 128x256 bf16). Memory: x 4096x7168 + W 1536x7168 + out
     * 4096x1536, 2 B each: compute-bound. */
    double s = 0;
    CHECK(moe_dense_launch_time(NULL, &h200, MOE_DTYPE_BF16, 4096, 7168, 1536, &s) == MOE_STATUS_OK, "%s",
          moe_last_error(NULL));
    double compute = 2 * (2.0 * 128 * 256 * 7168 / (724e12 / 132) + 132.0 * 128 * 256 * 2 / bw);
    double memory = ((4096.0 + 1536) * 7168 * 2 + 4096.0 * 1536 * 2) / bw;
    CHECK(compute > memory && close_rel(s, compute + launch, 1e-12), "bf16 wide: %.6g s, expected %.6g", s,
          compute + launch);
    /* gpt-oss 512 x 2880 x 2880, bf16: 4 x 12 = 48 tiles of 128 x 256 would leave SMs idle, so
     * 128 x 128: 4 x 23 = 92 tiles, one wave, K 2880 = 45 k-steps of 64; store 92 tiles */
    CHECK(moe_dense_launch_time(NULL, &h200, MOE_DTYPE_BF16, 512, 2880, 2880, &s) == MOE_STATUS_OK, "%s",
          moe_last_error(NULL));
    compute = 2.0 * 128 * 128 * 2880 / (724e12 / 132) + 92.0 * 128 * 128 * 2 / bw;
    memory = ((512.0 + 2880) * 2880 * 2 + 512.0 * 2880 * 2) / bw;
    CHECK(close_rel(s, fmax(compute, memory) + launch, 1e-12), "bf16 narrow: %.6g s, expected %.6g", s,
          fmax(compute, memory) + launch);
    /* the q_a_proj in FP8: 32 x 8 = 256 tiles of 128 x 192 = 2 waves (1.9; 128 x 128 would take 3,
     * 2 * 192 < 3 * 128 * 1.10) at 834/132 TFLOP/s, K 7168 = 56 k-steps; x and W 1 B, out bf16 */
    CHECK(moe_dense_launch_time(NULL, &h200, MOE_DTYPE_E4M3, 4096, 7168, 1536, &s) == MOE_STATUS_OK, "%s",
          moe_last_error(NULL));
    compute = 2 * (2.0 * 128 * 192 * 7168 / (834e12 / 132) + 132.0 * 128 * 192 * 2 / bw);
    memory = ((4096.0 + 1536) * 7168 + 4096.0 * 1536 * 2) / bw;
    CHECK(close_rel(s, fmax(compute, memory) + launch, 1e-12), "fp8: %.6g s, expected %.6g", s,
          fmax(compute, memory) + launch);
    /* FP8 8192^3: 64 x 43 = 2752 tiles of 128 x 192 = 21 waves (20.8), against 32 (31.03) of 128 x
     * 128: the wide tile, 21 * 192 < 32 * 128 * 1.10; each wave with its exposed store of 132 tiles
     * of 128 x 192 */
    CHECK(moe__hopper_gemm_fp8_block_n(8192, 8192, 132) == 192, "fp8 tile rule: %d at 8192^2",
          moe__hopper_gemm_fp8_block_n(8192, 8192, 132));
    /* 4096^2: 704 tiles of 192 = 6 waves, 1024 of 128 = 8: 1152 >= 1126.4, narrow (the lab: 128
     * 4-10% faster); deepseek's x16-expert GEMM1 8192 x 4096: 11 against 16 waves, wide; one wave of
     * either (512 x 4096): narrow */
    CHECK(moe__hopper_gemm_fp8_block_n(4096, 4096, 132) == 128 && moe__hopper_gemm_fp8_block_n(8192, 4096, 132) == 192 &&
              moe__hopper_gemm_fp8_block_n(512, 4096, 132) == 128,
          "fp8 tile rule: %d at 4096^2, %d at 8192 x 4096, %d at 512 x 4096", moe__hopper_gemm_fp8_block_n(4096, 4096, 132),
          moe__hopper_gemm_fp8_block_n(8192, 4096, 132), moe__hopper_gemm_fp8_block_n(512, 4096, 132));
    /* the rule's edge, N = 192 (one tile of 192 a row block, two of 128): r row blocks make
     * ceil(r / 132) against ceil(2r / 132) waves; 132 rows: 1 vs 2, wide; 133: 2 vs 3 (384 <
     * 422.4), wide; 66: 1 vs 1, narrow; 67: 1 vs 2, wide */
    CHECK(moe__hopper_gemm_fp8_block_n(128 * 132, 192, 132) == 192 && moe__hopper_gemm_fp8_block_n(128 * 133, 192, 132) == 192 &&
              moe__hopper_gemm_fp8_block_n(128 * 66, 192, 132) == 128 && moe__hopper_gemm_fp8_block_n(128 * 67, 192, 132) == 192,
          "fp8 tile rule at N = 192");
    /* clusters of 2 from 4 waves (528 tiles) of the chosen width, never on one row block, on an odd
     * row-block count only from 51 (an idle CTA's share under 2%) */
    CHECK(moe__hopper_gemm_fp8_cluster_m(8192, 8192, 192, 132) == 2 && moe__hopper_gemm_fp8_cluster_m(512, 4096, 128, 132) == 1 &&
              moe__hopper_gemm_fp8_cluster_m(128, 1 << 20, 128, 132) == 1 &&
              moe__hopper_gemm_fp8_cluster_m(128 * 34, 128 * 16, 128, 132) == 2 &&
              moe__hopper_gemm_fp8_cluster_m(128 * 34, 128 * 15, 128, 132) == 1 &&
              moe__hopper_gemm_fp8_cluster_m(128 * 33, 128 * 32, 128, 132) == 1 &&
              moe__hopper_gemm_fp8_cluster_m(128 * 50 + 1, 128 * 11, 128, 132) == 2 &&
              moe__hopper_gemm_fp8_cluster_m(128 * 48 + 1, 128 * 16, 128, 132) == 1,
          "fp8 cluster rule");
    /* bf16: clusters of 2 on 256-wide tiles only, from 4 waves (528 tiles), never on one row block, on an
     * odd row-block count only from 51; 4096^2 is 512 tiles (3.9 waves): none */
    CHECK(moe__hopper_gemm_dense_cluster_m(8192, 8192, 256, 132) == 2 && moe__hopper_gemm_dense_cluster_m(4096, 4096, 256, 132) == 1 &&
              moe__hopper_gemm_dense_cluster_m(131072, 1536, 256, 132) == 2 &&
              moe__hopper_gemm_dense_cluster_m(131072, 1536, 128, 132) == 1 &&
              moe__hopper_gemm_dense_cluster_m(128, 1 << 20, 256, 132) == 1 &&
              moe__hopper_gemm_dense_cluster_m(128 * 33, 256 * 16, 256, 132) == 1 &&
              moe__hopper_gemm_dense_cluster_m(128 * 51, 256 * 11, 256, 132) == 2,
          "bf16 cluster rule");
    CHECK(moe_dense_launch_time(NULL, &h200, MOE_DTYPE_E4M3, 8192, 8192, 8192, &s) == MOE_STATUS_OK, "%s",
          moe_last_error(NULL));
    compute = 21 * (2.0 * 128 * 192 * 8192 / (834e12 / 132) + 132.0 * 128 * 192 * 2 / bw);
    memory = ((8192.0 + 8192) * 8192 + 8192.0 * 8192 * 2) / bw;
    CHECK(close_rel(s, fmax(compute, memory) + launch, 1e-12), "fp8 8192^3: %.6g s, expected %.6g", s,
          fmax(compute, memory) + launch);
    /* a memory-bound decode-sized GEMM keeps its one wave of 128 x 128 tiles (no split-K to fill
     * the GPU): 16 x 7168 x 4096 fp8 = 32 tiles, one wave */
    CHECK(moe_dense_launch_time(NULL, &h200, MOE_DTYPE_E4M3, 16, 7168, 4096, &s) == MOE_STATUS_OK, "%s",
          moe_last_error(NULL));
    compute = 2.0 * 128 * 128 * 7168 / (834e12 / 132) + 32.0 * 128 * 128 * 2 / bw;
    memory = ((16.0 + 4096) * 7168 + 16.0 * 4096 * 2) / bw;
    CHECK(close_rel(s, fmax(compute, memory) + launch, 1e-12), "fp8 M 16: %.6g s, expected %.6g", s,
          fmax(compute, memory) + launch);
    /* bad arguments */
    CHECK(moe_dense_launch_time(NULL, &h200, MOE_DTYPE_F32, 16, 64, 64, &s) == MOE_STATUS_INVALID_ARGUMENT,
          "f32 accepted");
    CHECK(moe_dense_launch_time(NULL, &h200, MOE_DTYPE_BF16, 0, 64, 64, &s) == MOE_STATUS_INVALID_ARGUMENT,
          "m 0 accepted");
    CHECK(moe_dense_launch_time(NULL, NULL, MOE_DTYPE_BF16, 16, 64, 64, &s) == MOE_STATUS_NULL_POINTER,
          "NULL gpu accepted");
}

/* The model against measurements: PERF.md's "dense-equiv cuBLAS" column timed on the project's
 * H200 the two expert GEMMs of a MoE forward as plain GEMMs with all T*k rows:
 * [T*k, H] x [H, 2I] then [T*k, I] x [I, H]. The roofline of those two GEMMs must predict each
 * measured time within +-25% at T >= 4096 (where the fixed launch cost is small);
 * the T = 512 rows are printed, not asserted. */
static double predict_plain(const moe_gpu_spec *g, double m, double k, double n) {
    moe_gemm_row row;
    moe_shape_list l = one_row(&row, m, k, n, 1);
    moe_roofline *rf = NULL;
    double t = -1;
    if (moe_roofline_create(NULL, &l, g, &rf) == MOE_STATUS_OK) t = rf->rows[0].time_s;
    moe_roofline_free(rf);
    return t;
}

static void test_roofline_vs_perf(void) {
    moe_gpu_spec h200;
    moe_gpu_builtin(NULL, "h200", &h200);
    const struct { const char *name; double H, I, k, T, ms; } m[] = {
        {"qwen3-30b-a3b", 2048, 768, 8, 512, 0.076},    {"qwen3-30b-a3b", 2048, 768, 8, 4096, 0.450},
        {"qwen3-30b-a3b", 2048, 768, 8, 16384, 1.801},  {"gpt-oss-120b", 2880, 2880, 4, 4096, 1.381},
        {"gpt-oss-120b", 2880, 2880, 4, 16384, 5.154},  {"mixtral-8x7b", 4096, 14336, 2, 512, 0.510},
        {"mixtral-8x7b", 4096, 14336, 2, 16384, 16.85}, {"deepseek-v3", 7168, 2048, 8, 4096, 4.438},
        {"deepseek-v3", 7168, 2048, 8, 16384, 17.19}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        double rows = m[i].T * m[i].k;
        double t = predict_plain(&h200, rows, m[i].H, 2 * m[i].I) + predict_plain(&h200, rows, m[i].I, m[i].H);
        double ratio = t * 1e3 / m[i].ms;
        printf("  %-14s T=%-6.0f predicted %8.4f ms, measured (cuBLAS) %8.4f ms: ratio %.3f%s\n", m[i].name, m[i].T,
               t * 1e3, m[i].ms, ratio, m[i].T < 4096 ? " (not asserted)" : "");
        if (m[i].T >= 4096)
            CHECK(ratio > 0.75 && ratio < 1.25, "%s T=%.0f: predicted/measured %.3f", m[i].name, m[i].T, ratio);
    }
}

/* ---- advisor ---------------------------------------------------------------------------- */
static void test_advice(void) {
    moe_model_config c;
    CHECK(moe_config_preset(NULL, "gpt-oss-120b", &c) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    moe_shape_options opt;
    moe_shape_options_init(&opt);
    opt.seq = 4096;
    moe_gpu_spec h200;
    moe_gpu_builtin(NULL, "h200", &h200);
    static moe_advice a;
    CHECK(moe_advice_compute(NULL, &c, &opt, &h200, &a) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    /* REFERENCE.md §3: 2880 = 64*45: 2880/2944 = 97.8% at 128-wide tiles, 2880/3072 = 93.75% at 256 */
    int found = 0;
    for (int64_t i = 0; i < a.num_dims; i++)
        if (a.dims[i].value == 2880) {
            found++;
            CHECK(a.dims[i].multiple_of == 0 && close_rel(a.dims[i].efficiency_128, 2880.0 / 2944.0, 1e-12) &&
                      close_rel(a.dims[i].efficiency_256, 0.9375, 1e-12) && a.dims[i].below_128 == 2816 &&
                      a.dims[i].above_128 == 2944 && a.dims[i].above_256 == 3072,
                  "2880: %d %g %g", a.dims[i].multiple_of, a.dims[i].efficiency_128, a.dims[i].efficiency_256);
        } else if (a.dims[i].value == 4096) {
            CHECK(a.dims[i].multiple_of == 512, "4096 multiple_of %d", a.dims[i].multiple_of);
        }
    CHECK(found == 2, "2880 listed %d times (hidden and expert intermediate)", found);
    /* Wgrad: K = 4096*4/128 = 128; K reaches 128, 256, 512 at T = 4096, 8192, 16384 */
    CHECK(a.wgrad_k == 128 && a.wgrad_tokens_for_k[0] == 4096 && a.wgrad_tokens_for_k[1] == 8192 &&
              a.wgrad_tokens_for_k[2] == 16384,
          "wgrad %g %lld %lld %lld", a.wgrad_k, (long long)a.wgrad_tokens_for_k[0], (long long)a.wgrad_tokens_for_k[1],
          (long long)a.wgrad_tokens_for_k[2]);
    CHECK(a.num_padding == 9 && a.padding[0].tokens == 1 && a.padding[8].tokens == 65536, "padding points");
    /* T = 1: one token on k = 4 experts, each alone in a block: waste 1 - 4/(4*128) */
    CHECK(close_rel(a.padding[0].waste_128, 1.0 - 1.0 / 128.0, 1e-12) && close_rel(a.padding[0].experts_touched, 4, 1e-12),
          "T=1 waste %g touched %g", a.padding[0].waste_128, a.padding[0].experts_touched);
    CHECK(a.num_decode == 11 && a.decode[0].batch == 1 && a.decode[10].batch == 1024, "decode points");
    for (int64_t i = 0; i < a.num_decode; i++) {
        const moe_decode_point *d = &a.decode[i];
        double mem = (d->gemm_bytes + d->kv_bytes) / 4.19e12, comp = d->flops / 751e12;
        CHECK(close_rel(d->step_s, fmax(mem, comp), 1e-12), "B=%lld: step %g", (long long)d->batch, d->step_s);
        CHECK(close_rel(d->tokens_per_s_gpu * d->step_s, (double)d->batch, 1e-12), "B=%lld: tok/s/GPU", (long long)d->batch);
        /* KV: (18 full layers x 4096 + 18 sliding layers x 128) x B x (2 x 8 heads x 64 x 2 bytes) */
        CHECK(close_rel(d->kv_bytes, (18.0 * 4096 + 18.0 * 128) * d->batch * 2048, 1e-12), "B=%lld: kv %g",
              (long long)d->batch, d->kv_bytes);
        if (i > 0) {
            CHECK(d->tokens_per_s_user < a.decode[i - 1].tokens_per_s_user, "per-user rate rises with batch");
            CHECK(d->tokens_per_s_gpu > a.decode[i - 1].tokens_per_s_gpu, "per-GPU rate falls with batch");
        }
    }
    /* B=1 bytes: at least the 4 touched experts' weights of 36 layers, 36*4*3*2880*2880*2 B */
    CHECK(a.decode[0].gemm_bytes > 36.0 * 4 * 3 * 2880 * 2880 * 2, "B=1 bytes %g", a.decode[0].gemm_bytes);
    char *svg = NULL;
    CHECK(moe_advice_svg(NULL, &a, &svg) == MOE_STATUS_OK && svg && strstr(svg, "tokens/s per user") &&
              strstr(svg, "tokens/s per GPU") && strstr(svg, "B=1024"),
          "advice svg");
    free(svg);
    /* Points the chart cannot hold: more than its table (a stack overflow before), a zero rate (a log
     * axis from -inf: the grid loop never ended). */
    static moe_advice bad;
    bad = a;
    bad.num_decode = MOE_ADVICE_POINTS_MAX + 1;
    CHECK(moe_advice_svg(NULL, &bad, &svg) == MOE_STATUS_INVALID_ARGUMENT && !svg, "num_decode past the table accepted");
    bad = a;
    bad.decode[0].tokens_per_s_user = 0;
    CHECK(moe_advice_svg(NULL, &bad, &svg) == MOE_STATUS_INVALID_ARGUMENT && !svg &&
              strstr(moe_last_error(NULL), "expected finite positive values"),
          "a zero rate: %s", moe_last_error(NULL));
}

/* The decode curve's FLOPs are the step's weight GEMMs (the shape list, checked above) plus the
 * attention score and value products of each new token against the whole context (no causal
 * halving at decode), 2 FLOPs per multiply-add. Here the attention part alone, hand-derived:
 * advice FLOPs minus the same decode step's shape-list FLOPs. */
static double advice_attention_flops(const moe_model_config *c, const moe_shape_options *opt, const moe_advice *a,
                                     int64_t i) {
    moe_shape_options d = *opt;
    d.mode = MOE_STEP_DECODE;
    d.batch = a->decode[i].batch;
    d.context = a->options.context;
    moe_shape_list *l = NULL;
    CHECK(moe_shape_list_create(NULL, c, &d, &l) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    double gemm = l ? l->total_flops : 0.0;
    moe_shape_list_free(l);
    return a->decode[i].flops - gemm;
}

static void test_advice_attention(void) {
    moe_gpu_spec h200;
    moe_gpu_builtin(NULL, "h200", &h200);
    static moe_advice a;
    moe_shape_options opt;
    /* DeepSeek-V3 (MLA): the cache holds the latent and the rope key, 2*(512 + 64) = 1152 bytes per
     * token and layer, so attention runs on them with kv_b_proj absorbed: per head and cached
     * position, scores 2*(kv_lora_rank + qk_rope) = 2*(512 + 64) = 1152 and values
     * 2*kv_lora_rank = 1024 FLOPs, 2176 in all. Batch 1, context 4096, tp 1:
     * 61 layers * 4096 * 128 heads * 2176 = 69,591,891,968 FLOPs. (Before the fix the advisor
     * counted decompressed heads, 2*(128 + 64) + 2*128 = 640 per head: 20,468,203,520, with the
     * compressed cache's bytes: 3.4x too few FLOPs for what it read.) */
    moe_model_config c;
    CHECK(moe_config_preset(NULL, "deepseek-v3", &c) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    moe_shape_options_init(&opt);
    opt.seq = 4096;
    CHECK(moe_advice_compute(NULL, &c, &opt, &h200, &a) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    CHECK(a.num_decode > 0 && a.decode[0].batch == 1, "decode points");
    double att = advice_attention_flops(&c, &opt, &a, 0);
    CHECK(close_rel(att, 69591891968.0, 1e-12), "deepseek-v3 B=1 attention FLOPs %.17g, expected 69591891968", att);
    /* KV: 61 layers * 1 * 4096 * 1152 B = 287,834,112 B */
    CHECK(close_rel(a.decode[0].kv_bytes, 287834112.0, 1e-12), "deepseek-v3 B=1 kv bytes %.17g", a.decode[0].kv_bytes);
    /* tp 8: 128/8 = 16 heads per GPU, each still over the whole latent: 61 * 4096 * 16 * 2176 */
    opt.tp = 8;
    CHECK(moe_advice_compute(NULL, &c, &opt, &h200, &a) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    att = advice_attention_flops(&c, &opt, &a, 0);
    CHECK(close_rel(att, 69591891968.0 / 8, 1e-12), "deepseek-v3 tp 8 B=1 attention FLOPs %.17g, expected %.17g", att,
          69591891968.0 / 8);

    /* Qwen3-30B-A3B (GQA): per head and cached position Q.K^T 2*128 + P.V 2*128 = 512 FLOPs.
     * tp 4: 32/4 = 8 query heads per GPU; batch 2 (decode[1]), context 1024:
     * 48 layers * 2 * 1024 * 8 * 512 = 402,653,184 FLOPs. KV: 4 kv heads / tp 4 = 1 per GPU,
     * 48 * 2 * 1024 * (2 * 1 * 128 * 2 B) = 50,331,648 B. */
    CHECK(moe_config_preset(NULL, "qwen3-30b-a3b", &c) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    moe_shape_options_init(&opt);
    opt.seq = 4096;
    opt.context = 1024;
    opt.tp = 4;
    CHECK(moe_advice_compute(NULL, &c, &opt, &h200, &a) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    CHECK(a.num_decode > 1 && a.decode[1].batch == 2, "decode points");
    att = advice_attention_flops(&c, &opt, &a, 1);
    CHECK(close_rel(att, 402653184.0, 1e-12), "qwen3 tp 4 B=2 attention FLOPs %.17g, expected 402653184", att);
    CHECK(close_rel(a.decode[1].kv_bytes, 50331648.0, 1e-12), "qwen3 tp 4 B=2 kv bytes %.17g", a.decode[1].kv_bytes);

    /* GPT-OSS: 128-token sliding windows in its 18 even layers, full attention in the 18 odd ones.
     * Batch 1, context 4096, tp 1: 64 query heads x 4*64 = 256 FLOPs per head and cached token over
     * (18 x 4096 + 18 x 128) = 76,032 attended tokens: 1,245,708,288 FLOPs; KV 76,032 x 2048 B
     * (2 x 8 kv heads x 64 x 2 B) = 155,713,536 B. The advisor says which layers are windowed. */
    CHECK(moe_config_preset(NULL, "gpt-oss-120b", &c) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    CHECK(c.attention_window == 128 && c.layer_is_windowed[0] && !c.layer_is_windowed[1] && c.layer_is_windowed[34] &&
              !c.layer_is_windowed[35],
          "gpt-oss window %lld", (long long)c.attention_window);
    moe_shape_options_init(&opt);
    opt.seq = 4096;
    CHECK(moe_advice_compute(NULL, &c, &opt, &h200, &a) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    att = advice_attention_flops(&c, &opt, &a, 0);
    CHECK(close_rel(att, 1245708288.0, 1e-12), "gpt-oss B=1 attention FLOPs %.17g, expected 1245708288", att);
    CHECK(close_rel(a.decode[0].kv_bytes, 155713536.0, 1e-12), "gpt-oss B=1 kv bytes %.17g", a.decode[0].kv_bytes);
    int said = 0;
    for (int i = 0; i < a.num_notes; i++) said |= strstr(a.notes[i], "18 of 36 layers attend at most 128") != NULL;
    CHECK(said, "no note on GPT-OSS's sliding-window layers");
    /* Llama-4-Scout: chunks of 8192 in layers 0-2 of every 4 (36 of 48), full in the other 12.
     * Context 32768, batch 1: attended (36 x 8192 + 12 x 32768) = 688,128 tokens; 40 heads x
     * 4*128 = 512 FLOPs each: 14,092,861,440 FLOPs; KV 688,128 x (2 x 8 x 128 x 2 B = 4096 B) =
     * 2,818,572,288 B. At context 4096 no chunk binds: 48 x 4096 = 196,608 tokens. */
    CHECK(moe_config_preset(NULL, "llama-4-scout", &c) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    CHECK(c.attention_window == 8192 && c.layer_is_windowed[0] && c.layer_is_windowed[2] && !c.layer_is_windowed[3] &&
              !c.layer_is_windowed[47],
          "llama-4 window %lld", (long long)c.attention_window);
    CHECK(close_rel(moe_attended_tokens(&c, 4096), 196608.0, 1e-12), "llama-4 ctx 4096: %g", moe_attended_tokens(&c, 4096));
    moe_shape_options_init(&opt);
    opt.seq = 32768;
    CHECK(moe_advice_compute(NULL, &c, &opt, &h200, &a) == MOE_STATUS_OK, "%s", moe_last_error(NULL));
    att = advice_attention_flops(&c, &opt, &a, 0);
    CHECK(close_rel(att, 14092861440.0, 1e-12), "llama-4 B=1 attention FLOPs %.17g, expected 14092861440", att);
    CHECK(close_rel(a.decode[0].kv_bytes, 2818572288.0, 1e-12), "llama-4 B=1 kv bytes %.17g", a.decode[0].kv_bytes);
}

/* The grouped FP8 kernel's 192-wide tiles read each fragment column's B scale from the row
 * moe__fp8_wide_b_scale_rows gives for its block (first or second, by split) and parity: here every
 * column of every tile of several expert widths against the column's own scale row (its 128-row
 * block; paired W13: the gate or up block of its pair). */
static void test_fp8_wide_scale_rows(void) {
    static const int64_t widths[] = {4096, 1536, 5760, 2880, 2048, 7168, 1408, 3072, 1024, 192, 208, 320};
    static const int kinds[] = {MOE__FP8_WSCALE_TENSOR, MOE__FP8_WSCALE_BLOCK, MOE__FP8_WSCALE_PAIRED};
    int64_t checked = 0, bad = 0;
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
        for (int k = 0; k < 3; k++) {
            const int kind = kinds[k];
            const int64_t n = widths[w];
            const int64_t rows = kind == MOE__FP8_WSCALE_TENSOR ? 1
                                 : kind == MOE__FP8_WSCALE_BLOCK ? (n + 127) / 128
                                                                 : 2 * ((n / 2 + 127) / 128);
            for (int64_t n0 = 0; n0 < n; n0 += 192) {
                int64_t r[4];
                int split = -1;
                moe__fp8_wide_b_scale_rows(kind, n0, rows, r, &split);
                CHECK(split == 8 || split == 16 || split == 24, "kind %d n %lld n0 %lld: split %d", kind,
                      (long long)n, (long long)n0, split);
                for (int i = 0; i < 4; i++)
                    CHECK(r[i] >= 0 && r[i] < rows, "kind %d n %lld n0 %lld: row %lld of %lld", kind, (long long)n,
                          (long long)n0, (long long)r[i], (long long)rows);
                for (int64_t c = 0; c < 192 && n0 + c < n; c++) {
                    const int64_t col = n0 + c, pair_block = col / 2 / 128;
                    const int64_t want = kind == MOE__FP8_WSCALE_TENSOR  ? 0
                                         : kind == MOE__FP8_WSCALE_BLOCK ? col / 128
                                                                         : 2 * pair_block + col % 2;
                    const int64_t got = r[(c / 8 < split ? 0 : 2) + c % 2];
                    checked++;
                    if (got != want && bad++ < 4)
                        printf("    kind %d n %lld n0 %lld column %lld: scale row %lld, expected %lld\n", kind,
                               (long long)n, (long long)n0, (long long)c, (long long)got, (long long)want);
                }
            }
        }
    CHECK(bad == 0, "%lld of %lld tile columns read another scale row", (long long)bad, (long long)checked);
    int64_t columns = 0;
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) columns += 3 * widths[w];
    CHECK(checked == columns, "checked %lld columns, expected %lld", (long long)checked, (long long)columns);
}

int main(void) {
    harness_seed("test_shapes");
    harness_print_limit = 12;
    harness_run_case("shapes deepseek-v3 train B=2 S=2048", test_deepseek_v3);
    harness_run_case("shapes qwen3-30b-a3b train B=2 S=2048", test_qwen3_30b);
    harness_run_case("shapes gpt-oss-120b train B=2 S=2048", test_gpt_oss_120b);
    harness_run_case("shapes mixtral-8x7b train B=2 S=2048", test_mixtral);
    harness_run_case("shapes llama-4-scout train B=2 S=2048", test_llama4_scout);
    harness_run_case("shapes qwen3-next-80b-a3b train B=2 S=2048", test_qwen3_next);
    harness_run_case("shapes decode with tp and ep, prefill LM head", test_decode_tp_ep);
    harness_run_case("shapes interleaved dense/MoE layers", test_interleave);
    harness_run_case("shapes bad options and configs", test_errors);
    harness_run_case("routing stats vs direct pmf sums", test_routing_small);
    harness_run_case("routing stats vs DeepSeek-V3 published padding", test_routing_deepseek);
    harness_run_case("routing stats vs Monte Carlo", test_routing_monte_carlo);
    harness_run_case("gpu specs: built in, JSON", test_gpu_specs);
    harness_run_case("roofline: tiles, waves, split-K, memory-bound (hand-derived)", test_roofline_dense);
    harness_run_case("roofline: routed experts (qwen3-30b-a3b T=4096 vs PERF.md floor), chart", test_roofline_experts);
    harness_run_case("roofline: moefuse's grouped kernels (choice, launch as timed, hand-derived)", test_roofline_grouped);
    harness_run_case("roofline: moefuse's dense engine (tile, persistent waves, hand-derived)",
                     test_roofline_dense_engine);
    harness_run_case("roofline vs PERF.md dense-equiv cuBLAS times on the H200 (+-25%)", test_roofline_vs_perf);
    harness_run_case("advise: alignment, wgrad K, padding, decode curve", test_advice);
    harness_run_case("advise: decode attention FLOPs, GQA and MLA (hand-derived)", test_advice_attention);
    harness_run_case("grouped FP8 192-wide tiles: every column's B scale row", test_fp8_wide_scale_rows);
    return harness_finish(cases_passed, cases_failed);
}
