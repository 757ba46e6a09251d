/* Expert placement over EP ranks: contiguous ranges or a table with replicas, and the rule
 * that picks the replica a token uses. */
#include "ep_internal.h"

#include <stdlib.h>
#include <string.h>

void moe_ep_placement_free(moe_ep_placement_t *p) {
    if (!p) return;
    free(p->rank_offsets);
    free(p->rank_experts);
    free(p->replica_offsets);
    free(p->replica_ranks);
    free(p->replica_local);
    free(p);
}

int64_t moe_ep_placement_num_experts(const moe_ep_placement_t *p) { return p ? p->num_experts : 0; }
int32_t moe_ep_placement_num_ranks(const moe_ep_placement_t *p) { return p ? p->num_ranks : 0; }

static moe_status check_sizes(moe_context_t *ctx, const char *fn, int64_t num_experts, int32_t num_ranks) {
    if (num_experts < 1 || num_experts > INT32_MAX)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: num_experts = %lld, expected 1..%d", fn,
                          (long long)num_experts, INT32_MAX);
    if (num_ranks < 1 || num_ranks > MOE__EP_MAX_RANKS)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: num_ranks = %d, expected 1..%d", fn, num_ranks,
                          MOE__EP_MAX_RANKS);
    return MOE_STATUS_OK;
}

/* Builds the placement from a table already checked by the caller: copies it and derives
 * the replica lists (a counting sort by expert; ranks come out ascending because the table
 * is walked rank by rank). */
static moe_status build(moe_context_t *ctx, const char *fn, int64_t E, int32_t R, const int64_t *rank_offsets,
                        const int32_t *rank_experts, moe_ep_placement_t **out) {
    const int64_t slots = rank_offsets[R];
    moe_ep_placement_t *p = calloc(1, sizeof *p);
    if (!p) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: placement allocation failed", fn);
    p->num_experts = E;
    p->num_ranks = R;
    p->rank_offsets = malloc((size_t)(R + 1) * sizeof *p->rank_offsets);
    p->rank_experts = malloc((size_t)(slots > 0 ? slots : 1) * sizeof *p->rank_experts);
    p->replica_offsets = calloc((size_t)E + 1, sizeof *p->replica_offsets);
    p->replica_ranks = malloc((size_t)(slots > 0 ? slots : 1) * sizeof *p->replica_ranks);
    p->replica_local = malloc((size_t)(slots > 0 ? slots : 1) * sizeof *p->replica_local);
    if (!p->rank_offsets || !p->rank_experts || !p->replica_offsets || !p->replica_ranks || !p->replica_local) {
        moe_ep_placement_free(p);
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: placement tables of %lld slots: allocation failed", fn,
                          (long long)slots);
    }
    memcpy(p->rank_offsets, rank_offsets, (size_t)(R + 1) * sizeof *p->rank_offsets);
    if (slots > 0) memcpy(p->rank_experts, rank_experts, (size_t)slots * sizeof *p->rank_experts);

    for (int64_t i = 0; i < slots; i++) p->replica_offsets[rank_experts[i] + 1]++;
    for (int64_t e = 0; e < E; e++) p->replica_offsets[e + 1] += p->replica_offsets[e];
    int64_t *fill = malloc((size_t)E * sizeof *fill);
    if (!fill) {
        moe_ep_placement_free(p);
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: placement allocation failed", fn);
    }
    memcpy(fill, p->replica_offsets, (size_t)E * sizeof *fill);
    for (int32_t r = 0; r < R; r++)
        for (int64_t i = rank_offsets[r]; i < rank_offsets[r + 1]; i++) {
            const int64_t at = fill[rank_experts[i]]++;
            p->replica_ranks[at] = r;
            p->replica_local[at] = (int32_t)(i - rank_offsets[r]);
        }
    free(fill);
    *out = p;
    return MOE_STATUS_OK;
}

moe_status moe_ep_placement_create_contiguous(moe_context_t *ctx, int64_t num_experts, int32_t num_ranks,
                                              moe_ep_placement_t **out) {
    static const char fn[] = "moe_ep_placement_create_contiguous";
    moe__clear_error(ctx);
    if (!out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: out is NULL", fn);
    *out = NULL;
    moe_status st = check_sizes(ctx, fn, num_experts, num_ranks);
    if (st != MOE_STATUS_OK) return st;
    int64_t *offsets = malloc((size_t)(num_ranks + 1) * sizeof *offsets);
    int32_t *experts = malloc((size_t)num_experts * sizeof *experts);
    if (!offsets || !experts) {
        free(offsets);
        free(experts);
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: allocation failed", fn);
    }
    /* r*E fits in int64: E < 2^31 and R <= 2^16. */
    for (int32_t r = 0; r <= num_ranks; r++) offsets[r] = (int64_t)r * num_experts / num_ranks;
    for (int64_t e = 0; e < num_experts; e++) experts[e] = (int32_t)e;
    st = build(ctx, fn, num_experts, num_ranks, offsets, experts, out);
    free(offsets);
    free(experts);
    return st;
}

moe_status moe_ep_placement_create(moe_context_t *ctx, int64_t num_experts, int32_t num_ranks,
                                   const int64_t *rank_offsets, const int32_t *rank_experts,
                                   moe_ep_placement_t **out) {
    static const char fn[] = "moe_ep_placement_create";
    moe__clear_error(ctx);
    if (!out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: out is NULL", fn);
    *out = NULL;
    moe_status st = check_sizes(ctx, fn, num_experts, num_ranks);
    if (st != MOE_STATUS_OK) return st;
    if (!rank_offsets) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: rank_offsets is NULL", fn);
    if (rank_offsets[0] != 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: rank_offsets[0] = %lld, expected 0", fn,
                          (long long)rank_offsets[0]);
    for (int32_t r = 0; r < num_ranks; r++) {
        const int64_t held = rank_offsets[r + 1] - rank_offsets[r];
        /* A rank holds each expert at most once, so at most E of them. */
        if (rank_offsets[r + 1] < rank_offsets[r] || held > num_experts)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: rank_offsets[%d] = %lld after rank_offsets[%d] = %lld, expected a step of 0..%lld",
                              fn, r + 1, (long long)rank_offsets[r + 1], r, (long long)rank_offsets[r],
                              (long long)num_experts);
    }
    const int64_t slots = rank_offsets[num_ranks];
    if (slots > 0 && !rank_experts) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: rank_experts is NULL", fn);

    /* Every entry in range, no expert twice on one rank, every expert somewhere. */
    int64_t *seen_on = malloc((size_t)num_experts * sizeof *seen_on); /* last rank + 1 that held it */
    if (!seen_on) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: allocation failed", fn);
    memset(seen_on, 0, (size_t)num_experts * sizeof *seen_on);
    for (int32_t r = 0; r < num_ranks && st == MOE_STATUS_OK; r++)
        for (int64_t i = rank_offsets[r]; i < rank_offsets[r + 1]; i++) {
            const int32_t e = rank_experts[i];
            if (e < 0 || e >= num_experts) {
                st = moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                                "%s: rank_experts[%lld] = %d (rank %d), expected an expert in 0..%lld", fn,
                                (long long)i, e, r, (long long)num_experts - 1);
                break;
            }
            if (seen_on[e] == (int64_t)r + 1) {
                st = moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                                "%s: rank_experts[%lld] = %d: rank %d already holds expert %d, expected each "
                                "expert at most once per rank", fn, (long long)i, e, r, e);
                break;
            }
            seen_on[e] = (int64_t)r + 1;
        }
    for (int64_t e = 0; e < num_experts && st == MOE_STATUS_OK; e++)
        if (seen_on[e] == 0)
            st = moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                            "%s: expert %lld is held by no rank, expected at least one replica of every expert", fn,
                            (long long)e);
    free(seen_on);
    if (st != MOE_STATUS_OK) return st;
    return build(ctx, fn, num_experts, num_ranks, rank_offsets, rank_experts, out);
}

moe_status moe_ep_placement_local_experts(moe_context_t *ctx, const moe_ep_placement_t *p, int32_t rank,
                                          int64_t *count, const int32_t **experts) {
    static const char fn[] = "moe_ep_placement_local_experts";
    moe__clear_error(ctx);
    if (!p) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: p is NULL", fn);
    if (!count) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: count is NULL", fn);
    if (!experts) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: experts is NULL", fn);
    if (rank < 0 || rank >= p->num_ranks)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: rank = %d, expected 0..%d", fn, rank,
                          p->num_ranks - 1);
    *count = p->rank_offsets[rank + 1] - p->rank_offsets[rank];
    *experts = p->rank_experts + p->rank_offsets[rank];
    return MOE_STATUS_OK;
}

moe_status moe_ep_placement_replicas(moe_context_t *ctx, const moe_ep_placement_t *p, int64_t expert,
                                     int32_t *count, const int32_t **ranks, const int32_t **local_ids) {
    static const char fn[] = "moe_ep_placement_replicas";
    moe__clear_error(ctx);
    if (!p) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: p is NULL", fn);
    if (!count) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: count is NULL", fn);
    if (!ranks) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: ranks is NULL", fn);
    if (!local_ids) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: local_ids is NULL", fn);
    if (expert < 0 || expert >= p->num_experts)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: expert = %lld, expected 0..%lld", fn,
                          (long long)expert, (long long)p->num_experts - 1);
    const int64_t first = p->replica_offsets[expert];
    *count = (int32_t)(p->replica_offsets[expert + 1] - first);
    *ranks = p->replica_ranks + first;
    *local_ids = p->replica_local + first;
    return MOE_STATUS_OK;
}

void moe__ep_choose(const moe_ep_placement_t *p, int64_t expert, int32_t src_rank, int64_t token, int32_t *dst_rank,
                    int32_t *local_expert) {
    const int64_t first = p->replica_offsets[expert];
    const int64_t n = p->replica_offsets[expert + 1] - first;
    int64_t pick = -1;
    for (int64_t i = 0; i < n; i++)
        if (p->replica_ranks[first + i] == src_rank) pick = i;
    /* token + src_rank cannot overflow: token < 2^31 (T*k fits int32), src_rank < 2^16. */
    if (pick < 0) pick = (token + src_rank) % n;
    *dst_rank = p->replica_ranks[first + pick];
    *local_expert = p->replica_local[first + pick];
}

moe_status moe_ep_placement_choose(moe_context_t *ctx, const moe_ep_placement_t *p, int64_t expert,
                                   int32_t src_rank, int64_t token, int32_t *dst_rank, int32_t *local_expert) {
    static const char fn[] = "moe_ep_placement_choose";
    moe__clear_error(ctx);
    if (!p) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: p is NULL", fn);
    if (!dst_rank) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: dst_rank is NULL", fn);
    if (!local_expert) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: local_expert is NULL", fn);
    if (expert < 0 || expert >= p->num_experts)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: expert = %lld, expected 0..%lld", fn,
                          (long long)expert, (long long)p->num_experts - 1);
    if (src_rank < 0 || src_rank >= p->num_ranks)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: src_rank = %d, expected 0..%d", fn, src_rank,
                          p->num_ranks - 1);
    if (token < 0 || token > INT32_MAX)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: token = %lld, expected 0..%d", fn,
                          (long long)token, INT32_MAX);
    moe__ep_choose(p, expert, src_rank, token, dst_rank, local_expert);
    return MOE_STATUS_OK;
}
