/* test_ep: expert parallelism simulated on the CPU. R "ranks" run as threads; an all-to-all is
 * mimicked by shared buffers and barriers. Each rank routes its own tokens, plans and packs its
 * rows, "sends" them, runs the CPU moe_forward on the rows it received with weights holding only
 * its local experts, "returns" the outputs and combines. The combined result must be bitwise
 * equal to the single-device moe_forward on the same inputs: the expert side computes each row
 * exactly as the single-device forward does (same input row, same weights, the routing weight
 * applied before the output's rounding) and moe_ep_combine sums the slots in the same order.
 * Also: the planning pieces on their own (placement, send/receive plans, row records) and bad
 * arguments. Seed from time unless MOEFUSE_SEED is set. */
#include "moefuse.h"
#include "moefuse_ep.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- one problem: the layer, its weights, the tokens of every rank --------------------- */
typedef enum routing_kind {
    ROUTE_RANDOM,     /* distinct random experts per token */
    ROUTE_HOT,        /* 80% of slots on experts 0 and 1 (duplicates allowed) */
    ROUTE_ONE_EXPERT, /* every slot of every token on expert `hot_expert` */
    ROUTE_LOGITS      /* each rank scores its logits with moe_route; the reference from logits */
} routing_kind;

typedef struct ep_case {
    const char *name;
    moe_layer_spec spec;
    int32_t ranks;
    int max_tokens_per_rank;
    routing_kind routing;
    int64_t hot_expert;
    moe_dtype x_dtype;      /* F32 or BF16; y has the same dtype */
    moe_format w_format;    /* packed weight format, same on every rank */
    moe_format payload;     /* row record format */
    moe_format act_format;  /* w8a8 activations or F32 */
    int replicate_hot;      /* placement: experts 0 and 1 on every rank as well */
    int empty_rank;         /* rank 1 gets no tokens */
} ep_case;

typedef struct problem {
    const ep_case *c;
    int64_t E, H, I, k, Is, R13;
    int64_t T;            /* all ranks' tokens */
    int64_t *tok_offsets; /* [R+1] */
    float *x;             /* [T, H] fp32 (bf16-representable when x_dtype is BF16) */
    void *x_data;         /* x in x_dtype */
    float *logits;        /* [T, E] for ROUTE_LOGITS */
    int32_t *ids;         /* [T, k] (given routing) */
    float *wts;
    float *gate, *up, *down;        /* [E, I, H], [E, I, H], [E, H, I] */
    float *gate_b, *up_b, *down_b;  /* [E, I], [E, I], [E, H] when bias */
    float *corr;                    /* [E] correction bias */
    float *s_gate, *s_up, *s_down;  /* shared expert [Is, H], [Is, H], [H, Is] */
    float *s_gate_b, *s_up_b, *s_down_b;
    moe_ep_placement_t *placement;
    void *y_ref;          /* [T, H] x_dtype */
    void *y_ep;           /* [T, H] x_dtype, written by the ranks */
} problem;

static size_t dtype_size(moe_dtype d) { return d == MOE_DTYPE_F32 ? 4 : 2; }

static void fill(float *p, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) p[i] = rng_float(-scale, scale);
}

/* Distinct random experts for each token's k slots. */
static void random_distinct(int32_t *ids, int64_t E, int64_t k) {
    for (int64_t j = 0; j < k; j++) {
        int32_t e;
        int again;
        do {
            e = (int32_t)rng_below(E);
            again = 0;
            for (int64_t i = 0; i < j; i++) again |= ids[i] == e;
        } while (again);
        ids[j] = e;
    }
}

static void problem_init(problem *P, const ep_case *c) {
    memset(P, 0, sizeof *P);
    P->c = c;
    const moe_layer_spec *s = &c->spec;
    P->E = s->num_experts, P->H = s->hidden, P->I = s->intermediate, P->k = s->top_k;
    P->Is = s->num_shared_experts > 0 ? s->shared_intermediate : 0;
    const int gated = moe_activation_is_gated(s->activation);
    const int64_t R = c->ranks, E = P->E, H = P->H, I = P->I, k = P->k;

    P->tok_offsets = xmalloc((size_t)(R + 1) * sizeof *P->tok_offsets);
    P->tok_offsets[0] = 0;
    for (int64_t r = 0; r < R; r++) {
        int64_t n = rng_below(c->max_tokens_per_rank + 1);
        if (c->empty_rank && r == 1) n = 0;
        P->tok_offsets[r + 1] = P->tok_offsets[r] + n;
    }
    P->T = P->tok_offsets[R];
    const int64_t T = P->T;

    P->x = xmalloc((size_t)(T * H) * sizeof *P->x);
    P->x_data = xmalloc((size_t)(T * H) * dtype_size(c->x_dtype) + 1);
    fill(P->x, T * H, 1.0f);
    for (int64_t i = 0; i < T * H; i++) {
        if (c->x_dtype == MOE_DTYPE_BF16) {
            const uint16_t b = moe_float_to_bf16(P->x[i]);
            P->x[i] = moe_bf16_to_float(b);
            ((uint16_t *)P->x_data)[i] = b;
        } else {
            ((float *)P->x_data)[i] = P->x[i];
        }
    }

    P->ids = xmalloc((size_t)(T * k + 1) * sizeof *P->ids);
    P->wts = xmalloc((size_t)(T * k + 1) * sizeof *P->wts);
    for (int64_t t = 0; t < T; t++) {
        if (c->routing == ROUTE_HOT) {
            for (int64_t j = 0; j < k; j++)
                P->ids[t * k + j] = rng_uniform() < 0.8 ? (int32_t)rng_below(2) : (int32_t)rng_below(E);
        } else if (c->routing == ROUTE_ONE_EXPERT) {
            for (int64_t j = 0; j < k; j++) P->ids[t * k + j] = (int32_t)c->hot_expert;
        } else {
            random_distinct(P->ids + t * k, E, k);
        }
        for (int64_t j = 0; j < k; j++) P->wts[t * k + j] = rng_float(0.05f, 1.0f);
    }
    if (c->routing == ROUTE_LOGITS) {
        P->logits = xmalloc((size_t)(T * E + 1) * sizeof *P->logits);
        fill(P->logits, T * E, 3.0f);
    }
    if (s->use_correction_bias) {
        P->corr = xmalloc((size_t)E * sizeof *P->corr);
        fill(P->corr, E, 0.5f);
    }

    const float ws = 1.0f / sqrtf((float)H), ds = 1.0f / sqrtf((float)I);
    P->gate = xmalloc((size_t)(E * I * H) * sizeof(float));
    fill(P->gate, E * I * H, ws);
    if (gated) {
        P->up = xmalloc((size_t)(E * I * H) * sizeof(float));
        fill(P->up, E * I * H, ws);
    }
    P->down = xmalloc((size_t)(E * H * I) * sizeof(float));
    fill(P->down, E * H * I, ds);
    if (s->expert_has_bias) {
        P->gate_b = xmalloc((size_t)(E * I) * sizeof(float));
        fill(P->gate_b, E * I, 0.1f);
        if (gated) {
            P->up_b = xmalloc((size_t)(E * I) * sizeof(float));
            fill(P->up_b, E * I, 0.1f);
        }
        P->down_b = xmalloc((size_t)(E * H) * sizeof(float));
        fill(P->down_b, E * H, 0.1f);
    }
    if (P->Is > 0) {
        const int64_t Is = P->Is;
        P->s_gate = xmalloc((size_t)(Is * H) * sizeof(float));
        P->s_up = xmalloc((size_t)(Is * H) * sizeof(float));
        P->s_down = xmalloc((size_t)(H * Is) * sizeof(float));
        fill(P->s_gate, Is * H, ws), fill(P->s_up, Is * H, ws), fill(P->s_down, H * Is, 1.0f / sqrtf((float)Is));
        if (s->expert_has_bias) {
            P->s_gate_b = xmalloc((size_t)Is * sizeof(float));
            P->s_up_b = xmalloc((size_t)Is * sizeof(float));
            P->s_down_b = xmalloc((size_t)H * sizeof(float));
            fill(P->s_gate_b, Is, 0.1f), fill(P->s_up_b, Is, 0.1f), fill(P->s_down_b, H, 0.1f);
        }
    }
    const size_t ybytes = (size_t)(T * H) * dtype_size(c->x_dtype) + 1;
    P->y_ref = xmalloc(ybytes);
    P->y_ep = xmalloc(ybytes);
    memset(P->y_ep, 0xA5, ybytes); /* poison: an unwritten element fails the comparison */
}

static void problem_free(problem *P) {
    free(P->tok_offsets), free(P->x), free(P->x_data), free(P->logits), free(P->ids), free(P->wts);
    free(P->gate), free(P->up), free(P->down), free(P->gate_b), free(P->up_b), free(P->down_b), free(P->corr);
    free(P->s_gate), free(P->s_up), free(P->s_down), free(P->s_gate_b), free(P->s_up_b), free(P->s_down_b);
    free(P->y_ref), free(P->y_ep);
    moe_ep_placement_free(P->placement);
}

/* Placement of the case: contiguous, or contiguous plus replicas of experts 0 and 1 on every
 * rank (listed after the rank's own experts, so the local order is not sorted by expert). */
static moe_status make_placement(moe_context_t *ctx, problem *P) {
    const ep_case *c = P->c;
    if (!c->replicate_hot) return moe_ep_placement_create_contiguous(ctx, P->E, c->ranks, &P->placement);
    const int32_t R = c->ranks;
    int64_t *offsets = xmalloc((size_t)(R + 1) * sizeof *offsets);
    int32_t *experts = xmalloc((size_t)(P->E + 2 * R) * sizeof *experts);
    int64_t n = 0;
    offsets[0] = 0;
    for (int32_t r = 0; r < R; r++) {
        const int64_t lo = (int64_t)r * P->E / R, hi = (int64_t)(r + 1) * P->E / R;
        for (int64_t e = hi - 1; e >= lo; e--) experts[n++] = (int32_t)e; /* descending, on purpose */
        for (int32_t hot = 0; hot < 2; hot++)
            if (hot < lo || hot >= hi) experts[n++] = hot;
        offsets[r + 1] = n;
    }
    moe_status st = moe_ep_placement_create(ctx, P->E, R, offsets, experts, &P->placement);
    free(offsets), free(experts);
    return st;
}

/* Weights of the listed experts only (local order), as the rank would load its shard. With
 * `shared_only` the shared expert as a one-expert routed layer (k = 1, its own width). */
static moe_status make_weights(moe_context_t *ctx, const problem *P, const int32_t *experts, int64_t count,
                               int shared_only, moe_weights_t **out) {
    const moe_layer_spec *gs = &P->c->spec;
    const int gated = moe_activation_is_gated(gs->activation);
    const int64_t H = P->H, I = shared_only ? P->Is : P->I, E = count;
    moe_layer_spec s;
    moe_layer_spec_init(&s, E, H, I, 1);
    s.activation = gs->activation, s.act_alpha = gs->act_alpha, s.act_limit = gs->act_limit;
    s.expert_has_bias = gs->expert_has_bias;
    s.weight_on_input = shared_only ? 0 : gs->weight_on_input;
    float *g = xmalloc((size_t)(E * I * H) * sizeof(float)), *u = gated ? xmalloc((size_t)(E * I * H) * sizeof(float)) : NULL;
    float *d = xmalloc((size_t)(E * H * I) * sizeof(float));
    float *gb = NULL, *ub = NULL, *db = NULL;
    if (s.expert_has_bias) {
        gb = xmalloc((size_t)(E * I) * sizeof(float)), db = xmalloc((size_t)(E * H) * sizeof(float));
        if (gated) ub = xmalloc((size_t)(E * I) * sizeof(float));
    }
    for (int64_t j = 0; j < E; j++) {
        if (shared_only) {
            memcpy(g, P->s_gate, (size_t)(I * H) * sizeof(float));
            if (u) memcpy(u, P->s_up, (size_t)(I * H) * sizeof(float));
            memcpy(d, P->s_down, (size_t)(H * I) * sizeof(float));
            if (gb) memcpy(gb, P->s_gate_b, (size_t)I * sizeof(float)), memcpy(db, P->s_down_b, (size_t)H * sizeof(float));
            if (ub) memcpy(ub, P->s_up_b, (size_t)I * sizeof(float));
            continue;
        }
        const int64_t e = experts[j];
        memcpy(g + j * I * H, P->gate + e * I * H, (size_t)(I * H) * sizeof(float));
        if (u) memcpy(u + j * I * H, P->up + e * I * H, (size_t)(I * H) * sizeof(float));
        memcpy(d + j * H * I, P->down + e * H * I, (size_t)(H * I) * sizeof(float));
        if (gb) {
            memcpy(gb + j * I, P->gate_b + e * I, (size_t)I * sizeof(float));
            memcpy(db + j * H, P->down_b + e * H, (size_t)H * sizeof(float));
            if (ub) memcpy(ub + j * I, P->up_b + e * I, (size_t)I * sizeof(float));
        }
    }
    moe_weights_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.layout = MOE_LAYOUT_SEPARATE;
    desc.gate = moe_tensor_3d(g, MOE_DTYPE_F32, E, I, H);
    if (u) desc.up = moe_tensor_3d(u, MOE_DTYPE_F32, E, I, H);
    desc.down = moe_tensor_3d(d, MOE_DTYPE_F32, E, H, I);
    if (gb) {
        desc.gate_bias = moe_tensor_2d(gb, MOE_DTYPE_F32, E, I);
        if (ub) desc.up_bias = moe_tensor_2d(ub, MOE_DTYPE_F32, E, I);
        desc.down_bias = moe_tensor_2d(db, MOE_DTYPE_F32, E, H);
    }
    moe_status st = moe_weights_create(ctx, &s, &desc, P->c->w_format, out);
    free(g), free(u), free(d), free(gb), free(ub), free(db);
    return st;
}

/* The single-device forward over all tokens: the oracle the ranks must reproduce. */
static moe_status reference_forward(moe_context_t *ctx, problem *P) {
    const ep_case *c = P->c;
    const moe_layer_spec *s = &c->spec;
    const int gated = moe_activation_is_gated(s->activation);
    const int64_t E = P->E, H = P->H, I = P->I, Is = P->Is, T = P->T, k = P->k;
    moe_weights_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.layout = MOE_LAYOUT_SEPARATE;
    desc.gate = moe_tensor_3d(P->gate, MOE_DTYPE_F32, E, I, H);
    if (gated) desc.up = moe_tensor_3d(P->up, MOE_DTYPE_F32, E, I, H);
    desc.down = moe_tensor_3d(P->down, MOE_DTYPE_F32, E, H, I);
    if (s->expert_has_bias) {
        desc.gate_bias = moe_tensor_2d(P->gate_b, MOE_DTYPE_F32, E, I);
        if (gated) desc.up_bias = moe_tensor_2d(P->up_b, MOE_DTYPE_F32, E, I);
        desc.down_bias = moe_tensor_2d(P->down_b, MOE_DTYPE_F32, E, H);
    }
    if (s->use_correction_bias) desc.correction_bias = moe_tensor_1d(P->corr, MOE_DTYPE_F32, E);
    if (Is > 0) {
        desc.shared_gate = moe_tensor_2d(P->s_gate, MOE_DTYPE_F32, Is, H);
        desc.shared_up = moe_tensor_2d(P->s_up, MOE_DTYPE_F32, Is, H);
        desc.shared_down = moe_tensor_2d(P->s_down, MOE_DTYPE_F32, H, Is);
        if (s->expert_has_bias) {
            desc.shared_gate_bias = moe_tensor_1d(P->s_gate_b, MOE_DTYPE_F32, Is);
            desc.shared_up_bias = moe_tensor_1d(P->s_up_b, MOE_DTYPE_F32, Is);
            desc.shared_down_bias = moe_tensor_1d(P->s_down_b, MOE_DTYPE_F32, H);
        }
    }
    moe_weights_t *w = NULL;
    moe_status st = moe_weights_create(ctx, s, &desc, c->w_format, &w);
    if (st != MOE_STATUS_OK) return st;
    moe_forward_args a;
    moe_forward_args_init(&a);
    a.x = moe_tensor_2d(P->x_data, c->x_dtype, T, H);
    a.y = moe_tensor_2d(P->y_ref, c->x_dtype, T, H);
    if (c->routing == ROUTE_LOGITS) {
        a.router_logits = moe_tensor_2d(P->logits, MOE_DTYPE_F32, T, E);
    } else {
        a.topk_ids = moe_tensor_2d(P->ids, MOE_DTYPE_I32, T, k);
        a.topk_weights = moe_tensor_2d(P->wts, MOE_DTYPE_F32, T, k);
    }
    a.act_format = c->act_format;
    size_t bytes = 0;
    st = moe_forward_workspace_size(ctx, w, T, c->act_format, &bytes);
    if (st == MOE_STATUS_OK) {
        a.workspace = xmalloc(bytes);
        a.workspace_size = bytes;
        st = moe_forward(ctx, w, &a);
        free(a.workspace);
    }
    moe_weights_free(w);
    return st;
}

/* Runs moe_forward of a one-slot layer: rows [n, H] fp32, ids/weights [n] -> out [n, H] fp32. */
static moe_status local_forward(moe_context_t *ctx, const moe_weights_t *w, const float *rows, const int32_t *ids,
                                const float *weights, int64_t n, int64_t H, moe_format act_format, float *out) {
    if (n == 0) return MOE_STATUS_OK;
    moe_forward_args a;
    moe_forward_args_init(&a);
    a.x = moe_tensor_2d((void *)rows, MOE_DTYPE_F32, n, H);
    a.y = moe_tensor_2d(out, MOE_DTYPE_F32, n, H);
    a.topk_ids = moe_tensor_2d((void *)ids, MOE_DTYPE_I32, n, 1);
    a.topk_weights = moe_tensor_2d((void *)weights, MOE_DTYPE_F32, n, 1);
    a.act_format = act_format;
    size_t bytes = 0;
    moe_status st = moe_forward_workspace_size(ctx, w, n, act_format, &bytes);
    if (st != MOE_STATUS_OK) return st;
    a.workspace = xmalloc(bytes);
    a.workspace_size = bytes;
    st = moe_forward(ctx, w, &a);
    free(a.workspace);
    return st;
}

/* ---- the simulated EP group ------------------------------------------------------------ */
typedef struct rank_state {
    int32_t rank;
    moe_ep_send_plan plan;
    moe_ep_recv_plan rplan;
    uint8_t *send_buf;  /* [T_r*k] records, visible to the other ranks after barrier 1 */
    float *out_rows;    /* [received, H] expert outputs in receive order, visible after barrier 2 */
    int64_t received;
    char error[512];    /* first failure of this rank, "" if none */
} rank_state;

typedef struct group {
    problem *P;
    moe_ep_row_layout layout;
    pthread_barrier_t barrier;
    rank_state *ranks;
    int64_t *counts; /* [R][R]: counts[s*R + d] rows s sends to d (the counts all-to-all) */
    _Atomic int abort_all; /* set by a failing rank; the others see it by the next barrier */
} group;

typedef struct rank_arg {
    group *g;
    int32_t rank;
} rank_arg;

#define RANK_FAIL(...)                                                                     \
    do {                                                                                   \
        if (!me->error[0]) snprintf(me->error, sizeof me->error, __VA_ARGS__);             \
        g->abort_all = 1;                                                                  \
    } while (0)

/* Rows of the expert side are permuted into the receive plan's expert-grouped order before the
 * forward and back after it, as a grouped GEMM would read them (harmless to the values: every
 * row is computed on its own). */
static void *rank_main(void *varg) {
    const rank_arg *arg = varg;
    group *g = arg->g;
    problem *P = g->P;
    const ep_case *c = P->c;
    const int32_t R = c->ranks, r = arg->rank;
    rank_state *me = &g->ranks[r];
    const int64_t H = P->H, k = P->k, E = P->E;
    const int64_t t0 = P->tok_offsets[r], T = P->tok_offsets[r + 1] - t0, rows = T * k;
    const size_t rb = g->layout.row_bytes;
    moe_context_t *ctx = NULL;
    moe_weights_t *w_local = NULL, *w_shared = NULL;
    int32_t *ids = xmalloc((size_t)rows * sizeof *ids);
    float *wts = xmalloc((size_t)rows * sizeof *wts);
    int64_t n_local = 0;
    const int32_t *local_experts = NULL;
    moe_status st = moe_context_create(MOE_BACKEND_CPU, 0, &ctx);
    if (st == MOE_STATUS_OK) st = moe_context_set_threads(ctx, 1);
    if (st != MOE_STATUS_OK) RANK_FAIL("context: %s", moe_last_error(NULL));

    /* 1. Route locally, plan, pack; publish the counts. */
    if (!g->abort_all) {
        if (c->routing == ROUTE_LOGITS) {
            st = moe_route(ctx, &c->spec, P->logits + t0 * E, T, P->corr, ids, wts);
            if (st != MOE_STATUS_OK) RANK_FAIL("moe_route: %s", moe_last_error(ctx));
        } else {
            memcpy(ids, P->ids + t0 * k, (size_t)rows * sizeof *ids);
            memcpy(wts, P->wts + t0 * k, (size_t)rows * sizeof *wts);
        }
    }
    if (!g->abort_all) {
        st = moe_ep_send_plan_build(ctx, P->placement, r, ids, T, k, &me->plan);
        if (st != MOE_STATUS_OK) RANK_FAIL("send plan: %s", moe_last_error(ctx));
    }
    if (!g->abort_all) {
        moe_tensor x = moe_tensor_2d((uint8_t *)P->x_data + (size_t)(t0 * H) * dtype_size(c->x_dtype), c->x_dtype,
                                     T, H);
        st = moe_ep_pack(ctx, &me->plan, &g->layout, &x, wts, me->send_buf, (size_t)rows * rb);
        if (st != MOE_STATUS_OK) RANK_FAIL("pack: %s", moe_last_error(ctx));
        for (int32_t d = 0; d < R; d++) g->counts[r * R + d] = me->plan.send_counts[d];
    }
    if (!g->abort_all) {
        st = moe_ep_placement_local_experts(ctx, P->placement, r, &n_local, &local_experts);
        if (st == MOE_STATUS_OK && n_local > 0) st = make_weights(ctx, P, local_experts, n_local, 0, &w_local);
        if (st == MOE_STATUS_OK && P->Is > 0) st = make_weights(ctx, P, NULL, 1, 1, &w_shared);
        if (st != MOE_STATUS_OK) RANK_FAIL("local weights: %s", moe_last_error(ctx));
    }
    pthread_barrier_wait(&g->barrier); /* ---- barrier 1: counts and rows are "sent" ---- */

    /* 2. Receive: counts from every source, then the rows, source by source. */
    int64_t recv_counts[64];
    int64_t total = 0;
    for (int32_t s = 0; s < R; s++) total += recv_counts[s] = g->counts[s * R + r];
    uint8_t *recv_buf = xmalloc((size_t)total * rb);
    float *x_recv = xmalloc((size_t)(total * H) * sizeof(float)), *x_sorted = xmalloc((size_t)(total * H) * sizeof(float));
    float *y_sorted = xmalloc((size_t)(total * H) * sizeof(float));
    int32_t *lexp = xmalloc((size_t)total * sizeof *lexp), *lexp_sorted = xmalloc((size_t)total * sizeof *lexp_sorted);
    float *lw = xmalloc((size_t)total * sizeof *lw), *lw_sorted = xmalloc((size_t)total * sizeof *lw_sorted);
    me->out_rows = xmalloc((size_t)(total * H) * sizeof(float));
    me->received = total;
    me->rplan.recv_offsets = xmalloc((size_t)(R + 1) * sizeof(int64_t));
    me->rplan.expert_counts = xmalloc((size_t)(n_local + 1) * sizeof(int64_t));
    me->rplan.expert_offsets = xmalloc((size_t)(n_local + 1) * sizeof(int64_t));
    me->rplan.sorted_rows = xmalloc((size_t)total * sizeof(int64_t));
    if (!g->abort_all) {
        int64_t at = 0;
        for (int32_t s = 0; s < R; s++) {
            const rank_state *src = &g->ranks[s];
            memcpy(recv_buf + (size_t)at * rb, src->send_buf + (size_t)src->plan.send_offsets[r] * rb,
                   (size_t)recv_counts[s] * rb);
            at += recv_counts[s];
        }
        st = moe_ep_unpack(ctx, &g->layout, recv_buf, total, x_recv, lexp, lw);
        if (st == MOE_STATUS_OK)
            st = moe_ep_recv_plan_build(ctx, R, recv_counts, n_local, lexp, total, &me->rplan);
        if (st != MOE_STATUS_OK) RANK_FAIL("receive: %s", moe_last_error(ctx));
    }
    /* 3. Local expert GEMMs on the received rows, in expert-grouped order. */
    if (!g->abort_all && total > 0) {
        for (int64_t i = 0; i < total; i++) {
            const int64_t src = me->rplan.sorted_rows[i];
            memcpy(x_sorted + i * H, x_recv + src * H, (size_t)H * sizeof(float));
            lexp_sorted[i] = lexp[src], lw_sorted[i] = lw[src];
        }
        st = local_forward(ctx, w_local, x_sorted, lexp_sorted, lw_sorted, total, H, c->act_format, y_sorted);
        if (st != MOE_STATUS_OK) RANK_FAIL("local forward: %s", moe_last_error(ctx));
        for (int64_t i = 0; i < total; i++)
            memcpy(me->out_rows + me->rplan.sorted_rows[i] * H, y_sorted + i * H, (size_t)H * sizeof(float));
    }
    pthread_barrier_wait(&g->barrier); /* ---- barrier 2: outputs are "sent back" ---- */

    /* 4. Receive the outputs (the mirror of the dispatch) and combine. */
    float *returned = xmalloc((size_t)(rows * H) * sizeof(float));
    float *shared = P->Is > 0 ? xmalloc((size_t)(T * H) * sizeof(float)) : NULL;
    if (!g->abort_all) {
        for (int32_t d = 0; d < R; d++) {
            const rank_state *dst = &g->ranks[d];
            memcpy(returned + me->plan.send_offsets[d] * H, dst->out_rows + dst->rplan.recv_offsets[r] * H,
                   (size_t)(me->plan.send_counts[d] * H) * sizeof(float));
        }
        if (shared && T > 0) {
            /* The shared expert runs where its tokens are: weight 1, no traffic. */
            int32_t *zero = xcalloc((size_t)T, sizeof *zero);
            float *one = xmalloc((size_t)T * sizeof *one);
            for (int64_t t = 0; t < T; t++) one[t] = 1.0f;
            st = local_forward(ctx, w_shared, P->x + t0 * H, zero, one, T, H, c->act_format, shared);
            free(zero), free(one);
            if (st != MOE_STATUS_OK) RANK_FAIL("shared forward: %s", moe_last_error(ctx));
        }
    }
    if (!g->abort_all) {
        moe_tensor ret = moe_tensor_2d(returned, MOE_DTYPE_F32, rows, H);
        moe_tensor y = moe_tensor_2d((uint8_t *)P->y_ep + (size_t)(t0 * H) * dtype_size(c->x_dtype), c->x_dtype, T, H);
        st = moe_ep_combine(ctx, &me->plan, &ret, shared, NULL, &y);
        if (st != MOE_STATUS_OK) RANK_FAIL("combine: %s", moe_last_error(ctx));
    }
    pthread_barrier_wait(&g->barrier); /* ---- barrier 3: nobody reads out_rows any more ---- */
    free(ids), free(wts), free(recv_buf), free(x_recv), free(x_sorted), free(y_sorted), free(lexp), free(lexp_sorted);
    free(lw), free(lw_sorted), free(returned), free(shared);
    moe_weights_free(w_local);
    moe_weights_free(w_shared);
    moe_context_free(ctx);
    return NULL;
}

/* Checks the invariants of the plans the ranks built (beyond the end result). */
static void check_plans(const group *g) {
    const problem *P = g->P;
    const int32_t R = P->c->ranks;
    for (int32_t r = 0; r < R; r++) {
        const rank_state *me = &g->ranks[r];
        const moe_ep_send_plan *p = &me->plan;
        const int64_t rows = p->num_tokens * p->top_k;
        int ok = p->send_offsets[0] == 0 && p->send_offsets[R] == rows;
        for (int32_t d = 0; d < R && ok; d++) {
            ok = p->send_offsets[d + 1] - p->send_offsets[d] == p->send_counts[d];
            for (int64_t i = p->send_offsets[d]; i < p->send_offsets[d + 1] && ok; i++) {
                const int32_t id = p->send_row_ids[i];
                ok = p->row_position[id] == i && (i == p->send_offsets[d] || p->send_row_ids[i - 1] < id);
                /* The local expert at d is the row's global expert. */
                int64_t n;
                const int32_t *experts;
                ok = ok && moe_ep_placement_local_experts(NULL, P->placement, d, &n, &experts) == MOE_STATUS_OK &&
                     p->send_local_expert[i] >= 0 && p->send_local_expert[i] < n;
            }
        }
        CHECK(ok, "%s R=%d rank %d: send plan invariants", P->c->name, R, r);
        const moe_ep_recv_plan *q = &me->rplan;
        ok = q->total_rows == me->received && q->expert_offsets[0] == 0 &&
             q->expert_offsets[q->num_local_experts] == q->total_rows;
        for (int64_t e = 0; e < q->num_local_experts && ok; e++)
            for (int64_t i = q->expert_offsets[e] + 1; i < q->expert_offsets[e + 1] && ok; i++)
                ok = q->sorted_rows[i - 1] < q->sorted_rows[i];
        CHECK(ok, "%s R=%d rank %d: receive plan invariants", P->c->name, R, r);
    }
}

/* Runs one case on R ranks; returns the number of differing elements (or -1 on an error). */
static void run_case(const ep_case *c0, int32_t R) {
    ep_case c = *c0;
    c.ranks = R;
    if (c.empty_rank && R < 2) c.empty_rank = 0;
    problem P;
    problem_init(&P, &c);
    moe_context_t *ctx = NULL;
    moe_status st = moe_context_create(MOE_BACKEND_CPU, 0, &ctx);
    if (st == MOE_STATUS_OK) st = make_placement(ctx, &P);
    if (st == MOE_STATUS_OK) st = reference_forward(ctx, &P);
    CHECK(st == MOE_STATUS_OK, "%s R=%d: setup: %s", c.name, R, moe_last_error(ctx));
    if (st != MOE_STATUS_OK) {
        moe_context_free(ctx);
        problem_free(&P);
        return;
    }

    group g;
    memset(&g, 0, sizeof g);
    g.P = &P;
    st = moe_ep_row_layout_get(ctx, c.payload, P.H, &g.layout);
    CHECK(st == MOE_STATUS_OK, "%s: layout: %s", c.name, moe_last_error(ctx));
    g.ranks = xcalloc((size_t)R, sizeof *g.ranks);
    g.counts = xcalloc((size_t)(R * R), sizeof *g.counts);
    pthread_barrier_init(&g.barrier, NULL, (unsigned)R);
    for (int32_t r = 0; r < R; r++) {
        rank_state *s = &g.ranks[r];
        const int64_t rows = (P.tok_offsets[r + 1] - P.tok_offsets[r]) * P.k;
        s->rank = r;
        s->plan.send_counts = xmalloc((size_t)R * sizeof(int64_t));
        s->plan.send_offsets = xmalloc((size_t)(R + 1) * sizeof(int64_t));
        s->plan.send_row_ids = xmalloc((size_t)rows * sizeof(int32_t));
        s->plan.send_local_expert = xmalloc((size_t)rows * sizeof(int32_t));
        s->plan.row_position = xmalloc((size_t)rows * sizeof(int64_t));
        s->send_buf = xmalloc((size_t)rows * g.layout.row_bytes);
    }
    pthread_t threads[64];
    rank_arg args[64];
    for (int32_t r = 0; r < R; r++) {
        args[r] = (rank_arg){&g, r};
        pthread_create(&threads[r], NULL, rank_main, &args[r]);
    }
    for (int32_t r = 0; r < R; r++) pthread_join(threads[r], NULL);
    pthread_barrier_destroy(&g.barrier);

    int errors = 0;
    for (int32_t r = 0; r < R; r++)
        if (g.ranks[r].error[0]) {
            errors++;
            CHECK(0, "%s R=%d rank %d: %s", c.name, R, r, g.ranks[r].error);
        }
    if (!errors) {
        check_plans(&g);
        const size_t es = dtype_size(c.x_dtype);
        int64_t diff = 0, first = -1;
        double worst = 0.0;
        for (int64_t i = 0; i < P.T * P.H; i++)
            if (memcmp((uint8_t *)P.y_ref + i * es, (uint8_t *)P.y_ep + i * es, es) != 0) {
                if (first < 0) first = i;
                diff++;
                float a, b;
                if (es == 4) memcpy(&a, (uint8_t *)P.y_ref + i * es, 4), memcpy(&b, (uint8_t *)P.y_ep + i * es, 4);
                else a = moe_bf16_to_float(((uint16_t *)P.y_ref)[i]), b = moe_bf16_to_float(((uint16_t *)P.y_ep)[i]);
                const double rel = fabs((double)a - b) / (fabs((double)a) + 1e-30);
                if (rel > worst) worst = rel;
            }
        int64_t busiest = 0, idle = 0;
        for (int32_t r = 0; r < R; r++) {
            if (g.ranks[r].received > busiest) busiest = g.ranks[r].received;
            idle += g.ranks[r].received == 0;
        }
        CHECK(diff == 0, "%s R=%d: %lld of %lld elements differ from the single-device forward (first %lld, worst rel %.3g)",
              c.name, R, (long long)diff, (long long)(P.T * P.H), (long long)first, worst);
        printf("  %-22s R=%d T=%-4lld rows=%-5lld busiest rank %-5lld idle ranks %d: %s\n", c.name, R, (long long)P.T,
               (long long)(P.T * P.k), (long long)busiest, (int)idle, diff == 0 ? "bitwise equal" : "DIFFERENT");
    }
    for (int32_t r = 0; r < R; r++) {
        rank_state *s = &g.ranks[r];
        free(s->plan.send_counts), free(s->plan.send_offsets), free(s->plan.send_row_ids);
        free(s->plan.send_local_expert), free(s->plan.row_position), free(s->send_buf), free(s->out_rows);
        free(s->rplan.recv_offsets), free(s->rplan.expert_counts), free(s->rplan.expert_offsets);
        free(s->rplan.sorted_rows);
    }
    free(g.ranks), free(g.counts);
    moe_context_free(ctx);
    problem_free(&P);
}

/* ---- the planning pieces on their own ---------------------------------------------------- */
static void test_placement(void) {
    moe_ep_placement_t *p = NULL;
    moe_status st = moe_ep_placement_create_contiguous(NULL, 10, 4, &p);
    CHECK(st == MOE_STATUS_OK, "contiguous 10/4: %s", moe_last_error(NULL));
    if (st != MOE_STATUS_OK) return;
    const int64_t want_lo[4] = {0, 2, 5, 7}, want_n[4] = {2, 3, 2, 3};
    for (int32_t r = 0; r < 4; r++) {
        int64_t n;
        const int32_t *e;
        st = moe_ep_placement_local_experts(NULL, p, r, &n, &e);
        CHECK(st == MOE_STATUS_OK && n == want_n[r] && e[0] == want_lo[r] && e[n - 1] == want_lo[r] + n - 1,
              "contiguous 10/4 rank %d: %lld experts from %d", r, (long long)n, n > 0 ? e[0] : -1);
    }
    for (int64_t e = 0; e < 10; e++) {
        int32_t n, dst, local;
        const int32_t *ranks, *ids;
        st = moe_ep_placement_replicas(NULL, p, e, &n, &ranks, &ids);
        int ok = st == MOE_STATUS_OK && n == 1;
        for (int32_t src = 0; src < 4 && ok; src++)
            ok = moe_ep_placement_choose(NULL, p, e, src, rng_below(1000), &dst, &local) == MOE_STATUS_OK &&
                 dst == ranks[0] && local == ids[0] && want_lo[dst] + local == e;
        CHECK(ok, "contiguous 10/4 expert %lld: one replica, always chosen", (long long)e);
    }
    moe_ep_placement_free(p);

    /* R > E: every other rank holds nothing. */
    st = moe_ep_placement_create_contiguous(NULL, 3, 8, &p);
    int64_t held = 0, empty = 0;
    for (int32_t r = 0; r < 8 && st == MOE_STATUS_OK; r++) {
        int64_t n;
        const int32_t *e;
        moe_ep_placement_local_experts(NULL, p, r, &n, &e);
        held += n, empty += n == 0;
    }
    CHECK(st == MOE_STATUS_OK && held == 3 && empty == 5, "contiguous 3/8: %lld held, %lld empty ranks", (long long)held,
          (long long)empty);
    moe_ep_placement_free(p);

    /* A table with replicas: expert 0 on ranks 0, 2, 3; the replica rule. */
    const int64_t off[5] = {0, 2, 3, 5, 7};
    const int32_t tab[7] = {0, 1, /* r1 */ 2, /* r2 */ 3, 0, /* r3 */ 0, 1};
    st = moe_ep_placement_create(NULL, 4, 4, off, tab, &p);
    CHECK(st == MOE_STATUS_OK, "table: %s", moe_last_error(NULL));
    if (st != MOE_STATUS_OK) return;
    int32_t n, dst, local;
    const int32_t *ranks, *ids;
    st = moe_ep_placement_replicas(NULL, p, 0, &n, &ranks, &ids);
    CHECK(st == MOE_STATUS_OK && n == 3 && ranks[0] == 0 && ranks[1] == 2 && ranks[2] == 3 && ids[0] == 0 &&
              ids[1] == 1 && ids[2] == 0,
          "table: replicas of expert 0");
    int ok = 1;
    for (int64_t t = 0; t < 50; t++) {
        /* Sources holding a replica keep the row; rank 1 (no replica) spreads by (t + 1) % 3. */
        for (int32_t src = 0; src < 4; src++) {
            moe_ep_placement_choose(NULL, p, 0, src, t, &dst, &local);
            const int32_t want = src != 1 ? src : ranks[(t + 1) % 3];
            ok &= dst == want && local == (dst == 2 ? 1 : 0);
        }
    }
    CHECK(ok, "table: replica rule (own replica first, else (token + src) mod count)");
    moe_ep_placement_free(p);
}

static void test_records(void) {
    const int64_t T = 7, k = 3, H = 300; /* H not a multiple of 128: a short last FP8 group */
    moe_ep_placement_t *p = NULL;
    moe_status st = moe_ep_placement_create_contiguous(NULL, 6, 3, &p);
    int32_t ids[21];
    float wts[21];
    float *x = xmalloc((size_t)(T * H) * sizeof *x);
    for (int64_t t = 0; t < T; t++) random_distinct(ids + t * k, 6, k);
    for (int64_t i = 0; i < T * k; i++) wts[i] = rng_float(0, 1);
    fill(x, T * H, 4.0f);
    int64_t counts[3], offsets[4], pos[21];
    int32_t rid[21], lex[21];
    moe_ep_send_plan plan = {.send_counts = counts, .send_offsets = offsets, .send_row_ids = rid,
                             .send_local_expert = lex, .row_position = pos};
    if (st == MOE_STATUS_OK) st = moe_ep_send_plan_build(NULL, p, 1, ids, T, k, &plan);
    CHECK(st == MOE_STATUS_OK, "records: plan: %s", moe_last_error(NULL));
    const moe_format formats[4] = {MOE_FORMAT_F32, MOE_FORMAT_BF16, MOE_FORMAT_F16, MOE_FORMAT_FP8_ROW128};
    for (int f = 0; f < 4 && st == MOE_STATUS_OK; f++) {
        moe_ep_row_layout L;
        st = moe_ep_row_layout_get(NULL, formats[f], H, &L);
        CHECK(st == MOE_STATUS_OK && L.row_bytes % 16 == 0 && L.meta_offset % 4 == 0 &&
                  L.meta_offset + 8 <= L.row_bytes && L.scale_offset >= L.payload_bytes,
              "layout %s: row_bytes %zu", moe_format_name(formats[f]), L.row_bytes);
        uint8_t *buf = xmalloc((size_t)(T * k) * L.row_bytes);
        float *back = xmalloc((size_t)(T * k * H) * sizeof *back), *want = xmalloc((size_t)(T * H) * sizeof *want);
        int32_t got_e[21];
        float got_w[21];
        moe_tensor xt = moe_tensor_2d(x, MOE_DTYPE_F32, T, H);
        st = moe_ep_pack(NULL, &plan, &L, &xt, wts, buf, (size_t)(T * k) * L.row_bytes);
        if (st == MOE_STATUS_OK) st = moe_ep_unpack(NULL, &L, buf, T * k, back, got_e, got_w);
        CHECK(st == MOE_STATUS_OK, "records %s: %s", moe_format_name(formats[f]), moe_last_error(NULL));
        /* What each row should decode to: the whole x through the format at once. */
        for (int64_t i = 0; i < T * H; i++) {
            if (formats[f] == MOE_FORMAT_BF16) want[i] = moe_bf16_to_float(moe_float_to_bf16(x[i]));
            else if (formats[f] == MOE_FORMAT_F16) want[i] = moe_f16_to_float(moe_float_to_f16(x[i]));
            else want[i] = x[i];
        }
        if (formats[f] == MOE_FORMAT_FP8_ROW128) {
            uint8_t *codes = xmalloc((size_t)(T * H));
            float *scales = xmalloc((size_t)(T * 3) * sizeof *scales);
            moe_quantize(MOE_FORMAT_FP8_ROW128, x, T, H, H, codes, scales, NULL);
            moe_dequantize(MOE_FORMAT_FP8_ROW128, codes, scales, 1.0f, T, H, want, H);
            free(codes), free(scales);
        }
        int ok = st == MOE_STATUS_OK;
        for (int64_t i = 0; i < T * k && ok; i++) {
            const int32_t id = rid[i];
            ok = memcmp(back + i * H, want + (id / k) * H, (size_t)H * sizeof(float)) == 0 && got_e[i] == lex[i] &&
                 got_w[i] == wts[id];
        }
        CHECK(ok, "records %s: unpack(pack(x)) equals x through the format, metadata intact",
              moe_format_name(formats[f]));
        free(buf), free(back), free(want);
    }
    free(x);
    moe_ep_placement_free(p);
}

/* Bad arguments: the right status, and a message naming the culprit. */
static void expect_error(moe_status got, moe_status want, const char *needle, const char *what) {
    const char *msg = moe_last_error(NULL);
    CHECK(got == want && strstr(msg, needle) != NULL, "%s: got %s \"%s\", expected %s naming \"%s\"", what,
          moe_status_string(got), msg, moe_status_string(want), needle);
}

static void test_errors(void) {
    moe_ep_placement_t *p = NULL;
    expect_error(moe_ep_placement_create_contiguous(NULL, 0, 2, &p), MOE_STATUS_INVALID_ARGUMENT, "num_experts = 0",
                 "E = 0");
    expect_error(moe_ep_placement_create_contiguous(NULL, 8, 0, &p), MOE_STATUS_INVALID_ARGUMENT, "num_ranks = 0",
                 "R = 0");
    expect_error(moe_ep_placement_create_contiguous(NULL, 8, 2, NULL), MOE_STATUS_NULL_POINTER, "out", "out NULL");
    const int64_t off[3] = {0, 2, 3};
    const int32_t bad_range[3] = {0, 1, 4}, dup[3] = {0, 0, 1}, missing[3] = {0, 1, 1};
    expect_error(moe_ep_placement_create(NULL, 3, 2, off, bad_range, &p), MOE_STATUS_INVALID_ARGUMENT,
                 "rank_experts[2] = 4", "expert out of range");
    expect_error(moe_ep_placement_create(NULL, 3, 2, off, dup, &p), MOE_STATUS_INVALID_ARGUMENT, "rank_experts[1] = 0",
                 "duplicate on a rank");
    expect_error(moe_ep_placement_create(NULL, 3, 2, off, missing, &p), MOE_STATUS_INVALID_ARGUMENT, "expert 2",
                 "expert without replica");
    const int64_t back[3] = {0, 2, 1};
    expect_error(moe_ep_placement_create(NULL, 3, 2, back, dup, &p), MOE_STATUS_INVALID_ARGUMENT, "rank_offsets[2]",
                 "decreasing offsets");
    CHECK(p == NULL, "failed create leaves *out NULL");

    moe_ep_placement_create_contiguous(NULL, 4, 2, &p);
    int32_t dst, local;
    expect_error(moe_ep_placement_choose(NULL, p, 4, 0, 0, &dst, &local), MOE_STATUS_INVALID_ARGUMENT, "expert = 4",
                 "choose: expert");
    expect_error(moe_ep_placement_choose(NULL, p, 1, 2, 0, &dst, &local), MOE_STATUS_INVALID_ARGUMENT,
                 "src_rank = 2", "choose: src_rank");
    int64_t counts[2], offsets[3], pos[4];
    int32_t rid[4], lex[4];
    moe_ep_send_plan plan = {.send_counts = counts, .send_offsets = offsets, .send_row_ids = rid,
                             .send_local_expert = lex, .row_position = pos};
    const int32_t ids[4] = {0, 3, 1, 9};
    expect_error(moe_ep_send_plan_build(NULL, p, 0, ids, 2, 2, &plan), MOE_STATUS_INVALID_ARGUMENT,
                 "topk_ids[1][1] = 9", "plan: id out of range");
    expect_error(moe_ep_send_plan_build(NULL, p, 5, ids, 2, 2, &plan), MOE_STATUS_INVALID_ARGUMENT, "rank = 5",
                 "plan: rank");
    plan.row_position = NULL;
    expect_error(moe_ep_send_plan_build(NULL, p, 0, ids, 2, 2, &plan), MOE_STATUS_NULL_POINTER, "plan.row_position",
                 "plan: NULL array");
    plan.row_position = pos;
    const int32_t good[4] = {0, 3, 1, 2};
    moe_status st = moe_ep_send_plan_build(NULL, p, 0, good, 2, 2, &plan);
    CHECK(st == MOE_STATUS_OK && counts[0] == 2 && counts[1] == 2 && rid[0] == 0 && rid[1] == 2 && rid[2] == 1 &&
              rid[3] == 3 && lex[0] == 0 && lex[1] == 1 && lex[2] == 1 && lex[3] == 0,
          "plan of 2 tokens on 2 ranks: counts %lld %lld", (long long)counts[0], (long long)counts[1]);

    moe_ep_row_layout L;
    expect_error(moe_ep_row_layout_get(NULL, MOE_FORMAT_NVFP4, 64, &L), MOE_STATUS_INVALID_ARGUMENT, "format = nvfp4",
                 "layout: format");
    expect_error(moe_ep_row_layout_get(NULL, MOE_FORMAT_BF16, 0, &L), MOE_STATUS_INVALID_ARGUMENT, "hidden = 0",
                 "layout: hidden");
    moe_ep_row_layout_get(NULL, MOE_FORMAT_F32, 8, &L);
    float x[16] = {0}, w[4] = {0};
    uint8_t buf[4 * 48];
    moe_tensor xt = moe_tensor_2d(x, MOE_DTYPE_F32, 2, 8);
    expect_error(moe_ep_pack(NULL, &plan, &L, &xt, w, buf, 10), MOE_STATUS_WORKSPACE_TOO_SMALL, "send_bytes = 10",
                 "pack: small buffer");
    moe_tensor xbad = moe_tensor_2d(x, MOE_DTYPE_F32, 3, 8);
    expect_error(moe_ep_pack(NULL, &plan, &L, &xbad, w, buf, sizeof buf), MOE_STATUS_SHAPE_MISMATCH, "x",
                 "pack: x shape");
    /* The same layout filled field by field over junk padding bytes is the layout (it was refused). */
    moe_ep_row_layout by_fields;
    memset(&by_fields, 0xAB, sizeof by_fields);
    by_fields.format = L.format, by_fields.hidden = L.hidden, by_fields.payload_bytes = L.payload_bytes;
    by_fields.scale_offset = L.scale_offset, by_fields.scale_bytes = L.scale_bytes;
    by_fields.meta_offset = L.meta_offset, by_fields.row_bytes = L.row_bytes;
    CHECK(moe_ep_pack(NULL, &plan, &by_fields, &xt, w, buf, sizeof buf) == MOE_STATUS_OK, "pack, layout by fields: %s",
          moe_last_error(NULL));
    moe_ep_row_layout forged = L;
    forged.row_bytes = 8;
    expect_error(moe_ep_pack(NULL, &plan, &forged, &xt, w, buf, sizeof buf), MOE_STATUS_INVALID_ARGUMENT, "layout",
                 "pack: forged layout");

    int64_t rc[2] = {3, 1}, ro[3], ec[3], eo[4], sr[4];
    int32_t le[4] = {0, 1, 2, 0};
    moe_ep_recv_plan rp = {.recv_offsets = ro, .expert_counts = ec, .expert_offsets = eo, .sorted_rows = sr};
    expect_error(moe_ep_recv_plan_build(NULL, 2, rc, 2, le, 4, &rp), MOE_STATUS_INVALID_ARGUMENT,
                 "recv_local_expert[2] = 2", "recv plan: expert out of range");
    expect_error(moe_ep_recv_plan_build(NULL, 2, rc, 3, le, 3, &rp), MOE_STATUS_WORKSPACE_TOO_SMALL, "capacity = 3",
                 "recv plan: capacity");
    rc[1] = -1;
    expect_error(moe_ep_recv_plan_build(NULL, 2, rc, 3, le, 4, &rp), MOE_STATUS_INVALID_ARGUMENT, "recv_counts[1] = -1",
                 "recv plan: negative count");
    rc[1] = 1;
    expect_error(moe_ep_recv_plan_build(NULL, 2, rc, 0, le, 4, &rp), MOE_STATUS_INVALID_ARGUMENT,
                 "num_local_experts = 0", "recv plan: rows at a rank without experts");
    st = moe_ep_recv_plan_build(NULL, 2, rc, 3, le, 4, &rp);
    CHECK(st == MOE_STATUS_OK && ro[1] == 3 && ro[2] == 4 && ec[0] == 2 && ec[1] == 1 && ec[2] == 1 && sr[0] == 0 &&
              sr[1] == 3 && sr[2] == 1 && sr[3] == 2,
          "recv plan of 4 rows: grouped by expert, ascending");

    int64_t bound;
    st = moe_ep_recv_bound(8, 4096, 8, &bound);
    CHECK(st == MOE_STATUS_OK && bound == 8 * 4096 * 8, "recv bound 8 x 4096 x 8 = %lld", (long long)bound);
    expect_error(moe_ep_recv_bound(8, (int64_t)1 << 30, 8, &bound), MOE_STATUS_OVERFLOW, "tokens", "recv bound overflow");

    float ret[4 * 8] = {0};
    moe_tensor rt = moe_tensor_2d(ret, MOE_DTYPE_F32, 4, 8), yt = moe_tensor_2d(x, MOE_DTYPE_F32, 2, 8);
    moe_tensor rbad = moe_tensor_2d(ret, MOE_DTYPE_F32, 3, 8);
    expect_error(moe_ep_combine(NULL, &plan, &rbad, NULL, NULL, &yt), MOE_STATUS_SHAPE_MISMATCH, "returned",
                 "combine: returned shape");
    expect_error(moe_ep_combine(NULL, &plan, &rt, NULL, w, &yt), MOE_STATUS_INVALID_ARGUMENT, "shared_scale",
                 "combine: scale without shared");
    moe_ep_placement_free(p);

    /* The transport: UNSUPPORTED without NCCL; with it, a NULL communicator is refused. */
    int64_t dummy[1];
    st = moe_ep_nccl_exchange_counts(NULL, NULL, dummy, dummy, NULL);
    if (moe_ep_nccl_available())
        expect_error(st, MOE_STATUS_NULL_POINTER, "comm", "nccl counts: NULL comm");
    else
        expect_error(st, MOE_STATUS_UNSUPPORTED, "NCCL", "nccl counts without NCCL");
    printf("  NCCL transport in this build: %s\n", moe_ep_nccl_available() ? "yes" : "no");
}

/* ---- the cases ---------------------------------------------------------------------------- */
int main(void) {
    harness_seed("test_ep");

    test_placement();
    test_records();
    test_errors();

    ep_case cases[12];
    int n = 0;
    ep_case base;
    memset(&base, 0, sizeof base);
    moe_layer_spec_init(&base.spec, 16, 160, 48, 4);
    base.max_tokens_per_rank = 24;
    base.routing = ROUTE_RANDOM;
    base.x_dtype = MOE_DTYPE_F32;
    base.w_format = MOE_FORMAT_F32;
    base.payload = MOE_FORMAT_F32;
    base.act_format = MOE_FORMAT_F32;

    ep_case c = base;
    c.name = "swiglu f32";
    c.empty_rank = 1;
    cases[n++] = c;

    c = base;
    c.name = "geglu bias bf16";
    c.spec.activation = MOE_ACT_GEGLU;
    c.spec.expert_has_bias = 1;
    c.x_dtype = MOE_DTYPE_BF16;
    c.payload = MOE_FORMAT_BF16; /* lossless: x is bf16 */
    c.w_format = MOE_FORMAT_BF16;
    cases[n++] = c;

    c = base;
    c.name = "hot replicas";
    moe_layer_spec_init(&c.spec, 8, 128, 32, 2);
    c.routing = ROUTE_HOT;
    c.replicate_hot = 1;
    cases[n++] = c;

    c = base;
    c.name = "all on one expert";
    moe_layer_spec_init(&c.spec, 8, 96, 32, 2);
    c.routing = ROUTE_ONE_EXPERT;
    c.hot_expert = 5;
    cases[n++] = c;

    c = base;
    c.name = "more ranks than experts";
    moe_layer_spec_init(&c.spec, 3, 64, 16, 2);
    cases[n++] = c;

    c = base;
    c.name = "fp8 dispatch w8a8";
    c.payload = MOE_FORMAT_FP8_ROW128;
    c.act_format = MOE_FORMAT_FP8_ROW128;
    c.w_format = MOE_FORMAT_FP8_BLOCK128;
    cases[n++] = c;

    c = base;
    c.name = "relu2 weight on input";
    moe_layer_spec_init(&c.spec, 12, 128, 40, 1);
    c.spec.activation = MOE_ACT_RELU2;
    c.spec.weight_on_input = 1;
    c.w_format = MOE_FORMAT_NVFP4;
    cases[n++] = c;

    c = base;
    c.name = "shared expert oai mxfp4";
    c.spec.activation = MOE_ACT_SWIGLU_OAI;
    c.spec.act_limit = 7.0f;
    c.spec.expert_has_bias = 1;
    c.spec.num_shared_experts = 1;
    c.spec.shared_intermediate = 40;
    c.w_format = MOE_FORMAT_MXFP4;
    cases[n++] = c;

    c = base;
    c.name = "routed from logits";
    moe_layer_spec_init(&c.spec, 16, 128, 32, 4);
    c.spec.score = MOE_SCORE_SIGMOID;
    c.spec.use_correction_bias = 1;
    c.spec.n_group = 4;
    c.spec.topk_group = 2;
    c.spec.renormalize = 1;
    c.spec.routed_scale = 2.5f;
    c.routing = ROUTE_LOGITS;
    c.replicate_hot = 1;
    cases[n++] = c;

    const int32_t rank_counts[4] = {1, 2, 4, 8};
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 4; j++) run_case(&cases[i], rank_counts[j]);

    return harness_finish(checks_passed, checks_failed); /* this test counts checks */
}
