/* The co-design advisor: dimension alignment, MoE Wgrad reduction lengths, padding waste by
 * token count, and the decode curve (tokens/s per user against tokens/s per GPU). */
#include "analysis_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void add_dim(moe_advice *a, const char *name, int64_t v) {
    if (v <= 0 || a->num_dims >= MOE_ADVICE_DIMS_MAX) return;
    moe_dim_advice *d = &a->dims[a->num_dims++];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->value = v;
    d->multiple_of = v % 512 == 0 ? 512 : v % 256 == 0 ? 256 : v % 128 == 0 ? 128 : 0;
    d->efficiency_128 = (double)v / (double)(((v + 127) / 128) * 128);
    d->efficiency_256 = (double)v / (double)(((v + 255) / 256) * 256);
    d->below_128 = (v / 128) * 128;
    d->above_128 = ((v + 127) / 128) * 128;
    d->above_256 = ((v + 255) / 256) * 256;
}

static void note(moe_advice *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void note(moe_advice *a, const char *fmt, ...) {
    if (a->num_notes >= MOE_NOTE_MAX) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->notes[a->num_notes++], MOE_NOTE_LEN, fmt, ap);
    va_end(ap);
}

/* Weight GEMM dimensions as each GPU sees them. */
static void collect_dims(moe_advice *a, const moe_model_config *c, int64_t tp) {
    add_dim(a, "hidden H", c->layer.hidden);
    int has_moe = c->is_moe && c->num_moe_layers > 0, has_dense = c->num_moe_layers < c->num_layers || !has_moe;
    if (has_moe) add_dim(a, "expert intermediate I", c->layer.intermediate / tp);
    if (has_moe && c->layer.num_shared_experts > 0) add_dim(a, "shared intermediate", c->layer.shared_intermediate / tp);
    if (has_dense) add_dim(a, "dense intermediate", moe__dense_intermediate(c) / tp);
    int64_t heads = c->num_heads / tp;
    if (c->kv_lora_rank > 0) {
        if (c->q_lora_rank > 0) add_dim(a, "q_lora_rank", c->q_lora_rank);
        add_dim(a, "heads x (nope+rope) (q)", heads * (c->qk_nope_head_dim + c->qk_rope_head_dim));
        add_dim(a, "kv_lora_rank + rope (kv_a N)", c->kv_lora_rank + c->qk_rope_head_dim);
        add_dim(a, "kv_lora_rank (kv_b K)", c->kv_lora_rank);
        add_dim(a, "heads x (nope+v) (kv_b N)", heads * (c->qk_nope_head_dim + c->v_head_dim));
        add_dim(a, "heads x v (o K)", heads * c->v_head_dim);
    } else {
        int64_t hd = c->head_dim > 0 ? c->head_dim : c->layer.hidden / c->num_heads;
        int64_t kv = c->num_kv_heads >= tp ? c->num_kv_heads / tp : 1;
        add_dim(a, "heads x head_dim (q N, o K)", heads * hd);
        add_dim(a, "2 x kv heads x head_dim (kv N)", 2 * kv * hd);
    }
    if (has_moe) add_dim(a, "experts E (router N)", c->layer.num_experts);
    add_dim(a, "vocab (LM head N)", (c->vocab_size + tp - 1) / tp);
}

/* Attention score and value FLOPs of one decode step per GPU (not weight GEMMs): each new token's
 * query against the cached positions it attends (moe_attended_tokens: all `context` of them in a
 * full-attention layer, no causal halving at decode; at most the window in a windowed one),
 * 2 FLOPs per multiply-add. GQA: Q.K^T and P.V, 2·head_dim each per head and cached position.
 * MLA: the cache holds the latent (kv_lora_rank) and the rope key (moe_kv_bytes_per_token_layer),
 * so attention runs on them with kv_b_proj absorbed into the query and the output (the absorbed
 * products cost what the kv_b_proj row of the new tokens already counts): scores
 * 2·(kv_lora_rank + qk_rope_head_dim), values 2·kv_lora_rank per head and cached position. */
static double attention_flops(const moe_model_config *c, int64_t batch, int64_t context, int64_t tp) {
    double heads = (double)(c->num_heads / tp), per_head;
    if (c->kv_lora_rank > 0)
        per_head = 2.0 * (double)(c->kv_lora_rank + c->qk_rope_head_dim) + 2.0 * (double)c->kv_lora_rank;
    else per_head = 4.0 * (double)(c->head_dim > 0 ? c->head_dim : c->layer.hidden / c->num_heads);
    return moe_attended_tokens(c, context) * (double)batch * heads * per_head;
}

moe_status moe_advice_compute(moe_context_t *ctx, const moe_model_config *cfg, const moe_shape_options *opt,
                              const moe_gpu_spec *gpu, moe_advice *out) {
    moe__clear_error(ctx);
    if (!cfg || !opt || !gpu || !out)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_advice_compute: %s is NULL",
                          !cfg ? "cfg" : !opt ? "opt" : !gpu ? "gpu" : "out");
    moe_status st = moe__analysis_check_config(ctx, cfg);
    if (st == MOE_STATUS_OK) st = moe__analysis_check_options(ctx, cfg, opt);
    if (st != MOE_STATUS_OK) return st;
    if ((st = moe__gpu_check(ctx, gpu)) != MOE_STATUS_OK) return st;
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "%s", cfg->name);
    out->options = *opt;
    if (out->options.context == 0) out->options.context = opt->seq;
    out->gpu = *gpu;
    const moe_layer_spec *s = &cfg->layer;
    int has_moe = cfg->is_moe && cfg->num_moe_layers > 0;

    collect_dims(out, cfg, opt->tp);

    /* MoE Wgrad: K = tokens per expert = T k / E for a training step of batch x seq tokens */
    out->wgrad_tokens = opt->batch * opt->seq;
    if (has_moe) {
        out->wgrad_k = (double)out->wgrad_tokens * (double)s->top_k / (double)s->num_experts;
        const int64_t targets[3] = {128, 256, 512};
        for (int i = 0; i < 3; i++) /* smallest T with T k / E >= target */
            out->wgrad_tokens_for_k[i] = (targets[i] * s->num_experts + s->top_k - 1) / s->top_k;
    }

    /* Padding and load by tokens: 1, 4, 16, ..., 65536 */
    if (has_moe)
        for (int64_t T = 1; T <= 65536 && out->num_padding < MOE_ADVICE_POINTS_MAX; T *= 4) {
            moe_padding_point *p = &out->padding[out->num_padding++];
            moe_routing_stats r64, r128;
            if ((st = moe_routing_stats_compute(ctx, T, s->num_experts, s->top_k, 64, &r64)) ||
                (st = moe_routing_stats_compute(ctx, T, s->num_experts, s->top_k, 128, &r128)))
                return st;
            p->tokens = T;
            p->tokens_per_expert = r128.mean;
            p->experts_touched = r128.experts_touched;
            p->expected_max_load = r128.expected_max_load;
            p->waste_64 = r64.padding_waste;
            p->waste_128 = r128.padding_waste;
        }

    /* Decode curve: batch 1, 2, 4, ..., 1024 */
    double peak = opt->dtype == MOE_DTYPE_E4M3 ? gpu->fp8_flops : gpu->bf16_flops;
    int64_t context = out->options.context, gpus = opt->tp * opt->ep;
    for (int64_t b = 1; b <= 1024 && out->num_decode < MOE_ADVICE_POINTS_MAX; b *= 2) {
        moe_shape_options d = *opt;
        d.mode = MOE_STEP_DECODE;
        d.batch = b;
        d.context = context;
        moe_shape_list *list = NULL;
        if ((st = moe_shape_list_create(ctx, cfg, &d, &list)) != MOE_STATUS_OK) return st;
        moe_decode_point *p = &out->decode[out->num_decode++];
        p->batch = b;
        p->gemm_bytes = list->total_bytes;
        p->kv_bytes = moe_attended_tokens(cfg, context) * (double)b * moe_kv_bytes_per_token_layer(cfg, opt->tp);
        p->flops = list->total_flops + attention_flops(cfg, b, context, opt->tp);
        moe_shape_list_free(list);
        double memory = (p->gemm_bytes + p->kv_bytes) / gpu->read_bw, compute = p->flops / peak;
        p->memory_bound = memory >= compute;
        p->step_s = fmax(memory, compute);
        p->tokens_per_s_user = 1.0 / p->step_s;
        p->tokens_per_s_gpu = (double)b / p->step_s / (double)gpus;
    }

    /* The notes say what the tables mean for this model (the decode curve's limits first). */
    char span[256];
    if (moe__attention_span_note(cfg, span, sizeof span)) note(out, "%s", span);
    for (int64_t i = 0; i < out->num_dims; i++) {
        const moe_dim_advice *d = &out->dims[i];
        if (d->multiple_of == 0 && d->value >= 64)
            note(out,
                 "%s = %lld is not a multiple of 128: tile efficiency %.1f%% at 128-wide tiles, %.1f%% at 256; "
                 "%lld or %lld would fill the tiles",
                 d->name, (long long)d->value, 100 * d->efficiency_128, 100 * d->efficiency_256,
                 (long long)d->below_128, (long long)d->above_128);
    }
    int32_t tile_k = 64; /* the k step of the dtype's tiles: 64 bf16, 128 fp8 */
    moe_tile_menu(opt->dtype, NULL, &tile_k);
    if (has_moe && out->wgrad_k < 256)
        note(out,
             "MoE Wgrad: K = T*k/E = %.4g tokens per expert at a %lld-token step: short K loops (%.4g k-steps of %d) "
             "leave the prologue/epilogue exposed; K reaches 256 at T >= %lld",
             out->wgrad_k, (long long)out->wgrad_tokens, out->wgrad_k / tile_k, (int)tile_k,
             (long long)out->wgrad_tokens_for_k[1]);
    if (opt->ep > 1 || opt->tp > 1)
        note(out, "parallel model: every GPU sees the whole batch; tp splits heads and widths, ep the experts");
    return MOE_STATUS_OK;
}
