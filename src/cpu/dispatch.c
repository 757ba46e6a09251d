/* The dispatch plan on the CPU: the rows of the grouped expert GEMMs, sorted by expert and
 * padded per expert to a multiple of `block`.
 *
 * Row r = token * k + slot is routed to expert ids[r]. Expert e owns rows
 * [offsets[e], offsets[e+1]); its counts[e] real rows come first, in ascending r, then
 * padding rows holding T*k (one past the last real row id), up to the next multiple of
 * block. Every row past offsets[E] up to max_rows holds T*k too, and each block of `block`
 * rows names its expert in block_expert (-1 past offsets[E]). max_rows bounds offsets[E]
 * whatever the routing: each expert adds at most block-1 padding rows. */
#include "cpu.h"

/* max_rows = T*k + E*(block-1), max_blocks = ceil(max_rows / block); the arguments must
 * already be checked. */
static void plan_sizes(int64_t T, int64_t k, int64_t E, int64_t block, int64_t *max_rows, int64_t *max_blocks) {
    *max_rows = T * k + E * (block - 1);
    *max_blocks = (*max_rows + block - 1) / block;
}

/* The checks shared by bounds and build; messages name `fn`. */
static moe_status check_plan_args(moe_context_t *ctx, const char *fn, int64_t T, int64_t k, int64_t E,
                                  int64_t block) {
    if (T < 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: num_tokens = %lld, expected >= 0", fn, (long long)T);
    if (E < 1)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: num_experts = %lld, expected >= 1", fn,
                          (long long)E);
    if (k < 1 || k > E)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: top_k = %lld, expected 1..num_experts (%lld)", fn,
                          (long long)k, (long long)E);
    if (block < 1)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: block = %lld, expected >= 1", fn, (long long)block);
    /* Row ids (token * k + slot, and the padding id T*k) are int32. */
    int64_t rows;
    if (!moe__mul64(T, k, &rows) || rows > INT32_MAX)
        return moe__error(ctx, MOE_STATUS_OVERFLOW,
                          "%s: num_tokens * top_k = %lld * %lld, expected <= 2^31-1 (row ids are int32)", fn,
                          (long long)T, (long long)k);
    int64_t padding, max_rows;
    if (!moe__mul64(E, block - 1, &padding) || !moe__add64(rows, padding, &max_rows) ||
        max_rows > INT64_MAX - block) /* room for the round-up of max_blocks */
        return moe__error(ctx, MOE_STATUS_OVERFLOW,
                          "%s: max_rows = T*k + E*(block-1) with E = %lld, block = %lld overflows int64", fn,
                          (long long)E, (long long)block);
    return MOE_STATUS_OK;
}

moe_status moe_dispatch_plan_bounds(int64_t num_tokens, int64_t top_k, int64_t num_experts, int64_t block,
                                    int64_t *max_rows, int64_t *max_blocks) {
    moe__clear_error(NULL);
    if (!max_rows) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "moe_dispatch_plan_bounds: max_rows is NULL");
    if (!max_blocks) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "moe_dispatch_plan_bounds: max_blocks is NULL");
    moe_status st = check_plan_args(NULL, "moe_dispatch_plan_bounds", num_tokens, top_k, num_experts, block);
    if (st != MOE_STATUS_OK) return st;
    plan_sizes(num_tokens, top_k, num_experts, block, max_rows, max_blocks);
    return MOE_STATUS_OK;
}

void moe__cpu_plan_build(const int32_t *ids, int64_t T, int64_t k, int64_t E, int64_t block,
                         moe_dispatch_plan *plan) {
    const int64_t rows = T * k;
    plan->num_tokens = T;
    plan->top_k = k;
    plan->num_experts = E;
    plan->block = block;
    plan_sizes(T, k, E, block, &plan->max_rows, &plan->max_blocks);
    int64_t *counts = plan->expert_counts, *offsets = plan->expert_offsets;

    for (int64_t e = 0; e < E; e++) counts[e] = 0;
    for (int64_t r = 0; r < rows; r++)
        if (ids[r] >= 0) counts[ids[r]]++; /* -1: no expert, no row */

    offsets[0] = 0;
    for (int64_t e = 0; e < E; e++) offsets[e + 1] = offsets[e] + (counts[e] + block - 1) / block * block;

    /* Every row starts as padding; then the real rows go to their expert's segment in
     * ascending r. counts[] is the fill cursor, so it ends as the count again. */
    for (int64_t i = 0; i < plan->max_rows; i++) plan->sorted_ids[i] = (int32_t)rows;
    for (int64_t e = 0; e < E; e++) counts[e] = 0;
    for (int64_t r = 0; r < rows; r++) {
        int32_t e = ids[r];
        if (e < 0) continue;
        plan->sorted_ids[offsets[e] + counts[e]] = (int32_t)r;
        counts[e]++;
    }

    for (int64_t b = 0; b < plan->max_blocks; b++) plan->block_expert[b] = -1;
    for (int64_t e = 0; e < E; e++)
        for (int64_t b = offsets[e] / block; b < offsets[e + 1] / block; b++) plan->block_expert[b] = (int32_t)e;
}

moe_status moe_dispatch_plan_build(moe_context_t *ctx, const int32_t *topk_ids, int64_t num_tokens, int64_t top_k,
                                   int64_t num_experts, int64_t block, moe_dispatch_plan *plan) {
    static const char fn[] = "moe_dispatch_plan_build";
    moe__clear_error(ctx);
    moe_status st = check_plan_args(ctx, fn, num_tokens, top_k, num_experts, block);
    if (st != MOE_STATUS_OK) return st;
    if (!plan) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan is NULL", fn);
    if (num_tokens > 0 && !topk_ids)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: topk_ids is NULL, expected [T, k] int32", fn);
    int64_t max_rows, max_blocks;
    plan_sizes(num_tokens, top_k, num_experts, block, &max_rows, &max_blocks);
    /* An array of zero elements may be NULL (malloc(0) can return NULL). */
    if (!plan->expert_counts)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan->expert_counts is NULL, expected [E] int64", fn);
    if (!plan->expert_offsets)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan->expert_offsets is NULL, expected [E+1] int64", fn);
    if (max_rows > 0 && !plan->sorted_ids)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan->sorted_ids is NULL, expected [max_rows = %lld] int32",
                          fn, (long long)max_rows);
    if (max_blocks > 0 && !plan->block_expert)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER,
                          "%s: plan->block_expert is NULL, expected [max_blocks = %lld] int32", fn,
                          (long long)max_blocks);
    for (int64_t t = 0; t < num_tokens; t++)
        for (int64_t j = 0; j < top_k; j++) {
            int32_t e = topk_ids[t * top_k + j];
            if (e < -1 || e >= num_experts)
                return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                                  "%s: topk_ids[token %lld, slot %lld] = %d, expected 0..%lld or -1 (none)", fn,
                                  (long long)t, (long long)j, (int)e, (long long)(num_experts - 1));
        }
    moe__cpu_plan_build(topk_ids, num_tokens, top_k, num_experts, block, plan);
    return MOE_STATUS_OK;
}
