/* The shape list: every weight GEMM of one step of a whole model, as M x K x N. */
#include "analysis_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *moe_step_mode_name(moe_step_mode mode) {
    switch (mode) {
    case MOE_STEP_TRAIN: return "train";
    case MOE_STEP_PREFILL: return "prefill";
    case MOE_STEP_DECODE: return "decode";
    }
    return "unknown";
}

const char *moe_gemm_kind_name(moe_gemm_kind kind) {
    static const char *const names[MOE_GEMM_KIND_COUNT_] = {
        "attn_q",         "attn_kv",        "attn_o",         "router",
        "expert_gate_up", "expert_down",    "shared_gate_up", "shared_down",
        "dense_gate_up",  "dense_down",     "lm_head"};
    if ((unsigned)kind >= MOE_GEMM_KIND_COUNT_) return "unknown";
    return names[kind];
}

const char *moe_gemm_pass_name(moe_gemm_pass pass) {
    switch (pass) {
    case MOE_PASS_FPROP: return "fprop";
    case MOE_PASS_DGRAD: return "dgrad";
    case MOE_PASS_WGRAD: return "wgrad";
    default: break;
    }
    return "unknown";
}

/* ------------------------------------------------------------------------------------- */
/* The list under construction. */
typedef struct builder {
    moe_context_t *ctx;
    moe_shape_list *list;
    int64_t capacity;
    double in_bytes, out_bytes;
} builder;

/* A set of layers first, first+step, ..., last. */
typedef struct layer_run {
    int64_t first, last, step, count;
} layer_run;

static moe_status push_row(builder *b, const moe_gemm_row *row) {
    moe_shape_list *l = b->list;
    if (l->num_rows == b->capacity) {
        int64_t cap = b->capacity ? 2 * b->capacity : 64;
        moe_gemm_row *rows = realloc(l->rows, (size_t)cap * sizeof *rows);
        if (!rows) return moe__error(b->ctx, MOE_STATUS_OUT_OF_MEMORY, "shape list: out of host memory");
        l->rows = rows;
        b->capacity = cap;
    }
    l->rows[l->num_rows++] = *row;
    return MOE_STATUS_OK;
}

/* Adds one linear layer in -> out over `tokens` rows, for every pass of the mode.
 * `per_layer` instances per layer of the run (E/ep for routed experts), of which `touched`
 * are expected to see a token (their weights are the only ones read or written). */
static moe_status add_linear(builder *b, layer_run run, const char *name, moe_gemm_kind kind, double tokens,
                             int64_t in, int64_t out, int64_t per_layer, double touched_per_layer) {
    int passes = b->list->options.mode == MOE_STEP_TRAIN ? 3 : 1;
    for (int p = 0; p < passes; p++) {
        moe_gemm_row r;
        memset(&r, 0, sizeof r);
        r.layer_first = run.first;
        r.layer_last = run.last;
        r.layer_step = run.step;
        r.layer_count = run.count;
        snprintf(r.name, sizeof r.name, "%s", name);
        r.kind = kind;
        r.pass = (moe_gemm_pass)p;
        int64_t layers = run.count > 0 ? run.count : 1; /* the LM head: one instance, no layer */
        r.count = layers * per_layer;
        r.touched = (double)layers * touched_per_layer;
        double act, weight; /* bytes of one instance: activations (and gradients), weights */
        switch (r.pass) {
        case MOE_PASS_FPROP: /* Y[T,out] = X[T,in] W^T */
            r.m = tokens, r.k = (double)in, r.n = (double)out;
            act = r.m * r.k * b->in_bytes + r.m * r.n * b->out_bytes;
            weight = r.k * r.n * b->in_bytes;
            break;
        case MOE_PASS_DGRAD: /* dX[T,in] = dY[T,out] W */
            r.m = tokens, r.k = (double)out, r.n = (double)in;
            act = r.m * r.k * b->in_bytes + r.m * r.n * b->out_bytes;
            weight = r.k * r.n * b->in_bytes;
            break;
        default: /* dW[in,out] = X^T dY: the reduction runs over the tokens */
            r.m = (double)in, r.k = tokens, r.n = (double)out;
            act = r.m * r.k * b->in_bytes + r.k * r.n * b->in_bytes;
            weight = r.m * r.n * b->out_bytes;
            break;
        }
        r.flops = 2.0 * r.m * r.k * r.n * (double)r.count;
        r.bytes = (double)r.count * act + r.touched * weight;
        r.intensity = r.bytes > 0 ? r.flops / r.bytes : 0.0;
        moe_status st = push_row(b, &r);
        if (st != MOE_STATUS_OK) return st;
    }
    return MOE_STATUS_OK;
}

/* Splits the layers where want(cfg, l) into arithmetic runs, greedily: regular patterns (a
 * dense prefix, every other layer) come out as one run each. Returns the number of runs. */
static int64_t layer_runs(const moe_model_config *cfg, int want_moe, layer_run *runs) {
    int64_t idx[MOE_MAX_LAYERS], n = 0, nruns = 0;
    for (int64_t l = 0; l < cfg->num_layers; l++)
        if (want_moe < 0 || moe__layer_is_moe(cfg, l) == want_moe) idx[n++] = l;
    for (int64_t i = 0; i < n;) {
        layer_run r = {idx[i], idx[i], 1, 1};
        if (i + 1 < n) {
            r.step = idx[i + 1] - idx[i];
            int64_t j = i + 1;
            while (j < n && idx[j] - idx[j - 1] == r.step) j++;
            r.last = idx[j - 1];
            r.count = j - i;
        }
        runs[nruns++] = r;
        i += r.count;
    }
    return nruns;
}

static void add_note(moe_shape_list *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void add_note(moe_shape_list *l, const char *fmt, ...) {
    if (l->num_notes >= MOE_NOTE_MAX) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->notes[l->num_notes++], MOE_NOTE_LEN, fmt, ap);
    va_end(ap);
}

static int is_qwen3_next(const moe_model_config *cfg) {
    return !strcmp(cfg->model_type, "qwen3_next") || strstr(cfg->name, "qwen3-next") != NULL ||
           strstr(cfg->name, "qwen3_next") != NULL;
}

/* The attention projections of one run of layers. */
static moe_status add_attention(builder *b, layer_run run, double T) {
    const moe_model_config *c = &b->list->config;
    int64_t H = c->layer.hidden, tp = b->list->options.tp;
    int64_t heads = c->num_heads / tp;
    moe_status st;
    if (c->kv_lora_rank > 0) { /* MLA */
        int64_t qk = c->qk_nope_head_dim + c->qk_rope_head_dim;
        if (c->q_lora_rank > 0) {
            if ((st = add_linear(b, run, "q_a_proj", MOE_GEMM_ATTN_Q, T, H, c->q_lora_rank, 1, 1))) return st;
            if ((st = add_linear(b, run, "q_b_proj", MOE_GEMM_ATTN_Q, T, c->q_lora_rank, heads * qk, 1, 1)))
                return st;
        } else if ((st = add_linear(b, run, "q_proj", MOE_GEMM_ATTN_Q, T, H, heads * qk, 1, 1))) {
            return st;
        }
        if ((st = add_linear(b, run, "kv_a_proj", MOE_GEMM_ATTN_KV, T, H, c->kv_lora_rank + c->qk_rope_head_dim, 1,
                             1)))
            return st;
        if ((st = add_linear(b, run, "kv_b_proj", MOE_GEMM_ATTN_KV, T, c->kv_lora_rank,
                             heads * (c->qk_nope_head_dim + c->v_head_dim), 1, 1)))
            return st;
        return add_linear(b, run, "o_proj", MOE_GEMM_ATTN_O, T, heads * c->v_head_dim, H, 1, 1);
    }
    int64_t hd = c->head_dim > 0 ? c->head_dim : H / c->num_heads;
    int64_t kv = c->num_kv_heads >= tp ? c->num_kv_heads / tp : 1; /* replicated below tp */
    if ((st = add_linear(b, run, "q_proj", MOE_GEMM_ATTN_Q, T, H, heads * hd, 1, 1))) return st;
    if ((st = add_linear(b, run, "kv_proj", MOE_GEMM_ATTN_KV, T, H, 2 * kv * hd, 1, 1))) return st;
    return add_linear(b, run, "o_proj", MOE_GEMM_ATTN_O, T, heads * hd, H, 1, 1);
}

static moe_status build(builder *b) {
    moe_shape_list *l = b->list;
    const moe_model_config *c = &l->config;
    const moe_layer_spec *s = &c->layer;
    const moe_shape_options *o = &l->options;
    int64_t H = s->hidden, tp = o->tp, ep = o->ep;
    double T = (double)l->tokens;
    int gated = moe_activation_is_gated(s->activation);
    layer_run runs[MOE_MAX_LAYERS];
    moe_status st;

    /* Attention: every layer. */
    int64_t n = layer_runs(c, -1, runs);
    for (int64_t i = 0; i < n; i++)
        if ((st = add_attention(b, runs[i], T))) return st;

    /* Dense MLP layers (DeepSeek's first_k_dense_replace, Llama-4's interleave, dense models). */
    n = layer_runs(c, 0, runs);
    int64_t Id = moe__dense_intermediate(c) / tp;
    for (int64_t i = 0; i < n; i++) {
        if ((st = add_linear(b, runs[i], "mlp.gate_up", MOE_GEMM_DENSE_GATE_UP, T, H, gated ? 2 * Id : Id, 1, 1)))
            return st;
        if ((st = add_linear(b, runs[i], "mlp.down", MOE_GEMM_DENSE_DOWN, T, Id, H, 1, 1))) return st;
    }

    /* MoE layers: router, shared expert, routed experts. */
    n = layer_runs(c, 1, runs);
    int64_t E = s->num_experts, I = s->intermediate / tp, Is = s->shared_intermediate / tp;
    double per_expert = T * (double)s->top_k / (double)E;
    double touched = l->experts_touched / (double)ep;
    for (int64_t i = 0; i < n; i++) {
        if ((st = add_linear(b, runs[i], "router", MOE_GEMM_ROUTER, T, H, E, 1, 1))) return st;
        if (s->num_shared_experts > 0 && s->shared_intermediate > 0) {
            if (s->shared_gate && (st = add_linear(b, runs[i], "shared_expert_gate", MOE_GEMM_ROUTER, T, H, 1, 1, 1)))
                return st;
            if ((st = add_linear(b, runs[i], "shared.gate_up", MOE_GEMM_SHARED_GATE_UP, T, H, gated ? 2 * Is : Is,
                                 1, 1)))
                return st;
            if ((st = add_linear(b, runs[i], "shared.down", MOE_GEMM_SHARED_DOWN, T, Is, H, 1, 1))) return st;
        }
        if ((st = add_linear(b, runs[i], "experts.gate_up", MOE_GEMM_EXPERT_GATE_UP, per_expert, H,
                             gated ? 2 * I : I, E / ep, touched)))
            return st;
        if ((st = add_linear(b, runs[i], "experts.down", MOE_GEMM_EXPERT_DOWN, per_expert, I, H, E / ep, touched)))
            return st;
    }

    /* LM head: once; in prefill only the last position of each sequence needs logits. */
    int64_t V = (c->vocab_size + tp - 1) / tp;
    double head_tokens = o->mode == MOE_STEP_PREFILL ? (double)o->batch : T;
    layer_run none = {-1, -1, 0, 0};
    return add_linear(b, none, "lm_head", MOE_GEMM_LM_HEAD, head_tokens, H, V, 1, 1);
}

static void add_notes(moe_shape_list *l) {
    const moe_model_config *c = &l->config;
    const moe_shape_options *o = &l->options;
    if (c->is_moe && c->num_moe_layers > 0)
        add_note(l,
                 "routed experts: tokens per expert n_e ~ Binomial(T, k/E); M (Wgrad: K) is the expected "
                 "T*k/E = %lld*%lld/%lld = %.6g; count = layers x E/ep = layers x %lld",
                 (long long)l->tokens, (long long)c->layer.top_k, (long long)c->layer.num_experts,
                 l->tokens_per_expert, (long long)(c->layer.num_experts / o->ep));
    if (o->mode == MOE_STEP_DECODE)
        add_note(l, "decode: T = batch = %lld (one new token per sequence); the context (%lld) only sets KV traffic",
                 (long long)o->batch, (long long)o->context);
    if (o->mode == MOE_STEP_PREFILL)
        add_note(l, "prefill: the LM head runs on the last token of each sequence only (M = batch)");
    if (c->kv_lora_rank == 0 && c->head_dim == 0)
        add_note(l, "config has no head_dim: taken as hidden / num_heads = %lld",
                 (long long)(c->layer.hidden / c->num_heads));
    if (c->kv_lora_rank == 0 && c->num_kv_heads < o->tp)
        add_note(l, "tp %lld > kv heads %lld: each rank keeps one replicated kv head", (long long)o->tp,
                 (long long)c->num_kv_heads);
    char span[256];
    if (o->mode == MOE_STEP_DECODE && moe__attention_span_note(c, span, sizeof span)) add_note(l, "%s", span);
    if (is_qwen3_next(c))
        add_note(l,
                 "known limitation: Qwen3-Next uses linear attention (Gated DeltaNet) in 3 of every 4 layers, which "
                 "the config struct cannot express; every layer is listed as full attention, and q_proj without its "
                 "output gate (which doubles its N)");
}

void moe_shape_list_free(moe_shape_list *list) {
    if (!list) return;
    free(list->rows);
    free(list);
}

moe_status moe_shape_list_create(moe_context_t *ctx, const moe_model_config *cfg, const moe_shape_options *opt,
                                 moe_shape_list **out) {
    moe__clear_error(ctx);
    if (!out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_shape_list_create: out is NULL");
    *out = NULL;
    if (!opt) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_shape_list_create: opt is NULL");
    moe_status st = moe__analysis_check_config(ctx, cfg);
    if (st != MOE_STATUS_OK) return st;
    if ((st = moe__analysis_check_options(ctx, cfg, opt)) != MOE_STATUS_OK) return st;

    moe_shape_list *l = calloc(1, sizeof *l);
    if (!l) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "shape list: out of host memory");
    l->config = *cfg;
    l->options = *opt;
    if (l->options.context == 0) l->options.context = opt->seq;
    l->tokens = opt->mode == MOE_STEP_DECODE ? opt->batch : opt->batch * opt->seq; /* checked for overflow */
    l->is_mla = cfg->kv_lora_rank > 0;
    if (cfg->is_moe && cfg->num_moe_layers > 0) {
        const moe_layer_spec *s = &cfg->layer;
        l->tokens_per_expert = (double)l->tokens * (double)s->top_k / (double)s->num_experts;
        l->experts_touched = moe__experts_touched((double)l->tokens, (double)s->num_experts, (double)s->top_k);
    }
    builder b = {ctx, l, 0, moe__operand_bytes(opt->dtype), moe__output_bytes(opt->dtype)};
    if ((st = build(&b)) != MOE_STATUS_OK) {
        moe_shape_list_free(l);
        return st;
    }
    for (int64_t i = 0; i < l->num_rows; i++) {
        const moe_gemm_row *r = &l->rows[i];
        l->total_flops += r->flops;
        l->total_bytes += r->bytes;
        l->pass_flops[r->pass] += r->flops;
        l->pass_bytes[r->pass] += r->bytes;
    }
    add_notes(l);
    *out = l;
    return MOE_STATUS_OK;
}
