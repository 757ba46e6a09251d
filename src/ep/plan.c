/* Rank-local plans of the expert-parallel exchange: the row record, the send plan and the
 * packing of the send buffer, the receive plan. Host code, plain loops; the order of every
 * list depends only on the routing, never on timing, so every rank can predict what the
 * others send and the result is reproducible. */
#include "ep_internal.h"

#include <math.h>
#include <string.h>

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

moe_status moe_ep_row_layout_get(moe_context_t *ctx, moe_format format, int64_t hidden, moe_ep_row_layout *out) {
    static const char fn[] = "moe_ep_row_layout_get";
    moe__clear_error(ctx);
    if (!out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    /* 2^40 elements per row is far past any model and keeps every byte count below 2^43. */
    if (hidden < 1 || hidden > ((int64_t)1 << 40))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: hidden = %lld, expected 1..2^40", fn,
                          (long long)hidden);
    size_t elem;
    switch (format) {
    case MOE_FORMAT_F32: elem = 4; break;
    case MOE_FORMAT_F16:
    case MOE_FORMAT_BF16: elem = 2; break;
    case MOE_FORMAT_FP8_ROW128: elem = 1; break;
    default:
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: format = %s, expected f32, f16, bf16 or fp8-row128",
                          fn, moe_format_name(format));
    }
    out->format = format;
    out->hidden = hidden;
    out->payload_bytes = elem * (size_t)hidden;
    out->scale_offset = align_up(out->payload_bytes, 4);
    out->scale_bytes = format == MOE_FORMAT_FP8_ROW128 ? 4 * (size_t)((hidden + 127) / 128) : 0;
    out->meta_offset = align_up(out->scale_offset + out->scale_bytes, 4);
    out->row_bytes = align_up(out->meta_offset + 8, 16);
    return MOE_STATUS_OK;
}

/* A layout the caller passes back must be one moe_ep_row_layout_get wrote. */
static moe_status check_layout(moe_context_t *ctx, const char *fn, const moe_ep_row_layout *layout) {
    if (!layout) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: layout is NULL", fn);
    moe_ep_row_layout want;
    /* Field by field: a layout filled by hand may differ in the struct's padding bytes. */
    if (moe_ep_row_layout_get(ctx, layout->format, layout->hidden, &want) != MOE_STATUS_OK ||
        want.payload_bytes != layout->payload_bytes || want.scale_offset != layout->scale_offset ||
        want.scale_bytes != layout->scale_bytes || want.meta_offset != layout->meta_offset ||
        want.row_bytes != layout->row_bytes)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "%s: layout (format %d, hidden %lld, row_bytes %zu) is not one moe_ep_row_layout_get wrote",
                          fn, (int)layout->format, (long long)layout->hidden, layout->row_bytes);
    return MOE_STATUS_OK;
}

/* Checks the scalar fields and arrays of a send plan (after a successful build, or filled by
 * the caller). Row counts: T*k rows, T*k <= INT32_MAX. */
static moe_status check_send_plan(moe_context_t *ctx, const char *fn, const moe_ep_send_plan *plan, int64_t *rows) {
    if (!plan) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan is NULL", fn);
    if (plan->num_ranks < 1 || plan->num_ranks > MOE__EP_MAX_RANKS)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: plan.num_ranks = %d, expected 1..%d", fn,
                          plan->num_ranks, MOE__EP_MAX_RANKS);
    if (plan->rank < 0 || plan->rank >= plan->num_ranks)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: plan.rank = %d, expected 0..%d", fn, plan->rank,
                          plan->num_ranks - 1);
    if (plan->num_tokens < 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: plan.num_tokens = %lld, expected >= 0", fn,
                          (long long)plan->num_tokens);
    if (plan->top_k < 1)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: plan.top_k = %lld, expected >= 1", fn,
                          (long long)plan->top_k);
    if (!moe__mul64(plan->num_tokens, plan->top_k, rows) || *rows > INT32_MAX)
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "%s: plan.num_tokens * plan.top_k = %lld * %lld, expected <= %d",
                          fn, (long long)plan->num_tokens, (long long)plan->top_k, INT32_MAX);
    if (!plan->send_counts) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan.send_counts is NULL", fn);
    if (!plan->send_offsets) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan.send_offsets is NULL", fn);
    if (*rows > 0) {
        if (!plan->send_row_ids) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan.send_row_ids is NULL", fn);
        if (!plan->send_local_expert)
            return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan.send_local_expert is NULL", fn);
        if (!plan->row_position) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan.row_position is NULL", fn);
    }
    return MOE_STATUS_OK;
}

moe_status moe_ep_send_plan_build(moe_context_t *ctx, const moe_ep_placement_t *p, int32_t rank,
                                  const int32_t *topk_ids, int64_t num_tokens, int64_t top_k,
                                  moe_ep_send_plan *plan) {
    static const char fn[] = "moe_ep_send_plan_build";
    moe__clear_error(ctx);
    if (!p) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: p is NULL", fn);
    if (!plan) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan is NULL", fn);
    if (rank < 0 || rank >= p->num_ranks)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: rank = %d, expected 0..%d", fn, rank,
                          p->num_ranks - 1);
    if (num_tokens < 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: num_tokens = %lld, expected >= 0", fn,
                          (long long)num_tokens);
    if (top_k < 1 || top_k > p->num_experts)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: top_k = %lld, expected 1..%lld (num_experts)", fn,
                          (long long)top_k, (long long)p->num_experts);
    plan->num_ranks = p->num_ranks;
    plan->rank = rank;
    plan->num_tokens = num_tokens;
    plan->top_k = top_k;
    int64_t rows;
    moe_status st = check_send_plan(ctx, fn, plan, &rows);
    if (st != MOE_STATUS_OK) return st;
    if (rows > 0 && !topk_ids) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: topk_ids is NULL", fn);
    for (int64_t id = 0; id < rows; id++)
        if (topk_ids[id] < 0 || topk_ids[id] >= p->num_experts)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "%s: topk_ids[%lld][%lld] = %d, expected an expert in 0..%lld", fn,
                              (long long)(id / top_k), (long long)(id % top_k), topk_ids[id],
                              (long long)p->num_experts - 1);

    /* Two passes over the rows (the replica choice is cheap to redo): count per destination,
     * then place each row at its destination's cursor. Walking ids in ascending order keeps
     * them ascending within a destination. */
    const int32_t R = p->num_ranks;
    for (int32_t d = 0; d < R; d++) plan->send_counts[d] = 0;
    int32_t dst, local;
    for (int64_t id = 0; id < rows; id++) {
        moe__ep_choose(p, topk_ids[id], rank, id / top_k, &dst, &local);
        plan->send_counts[dst]++;
    }
    plan->send_offsets[0] = 0;
    for (int32_t d = 0; d < R; d++) plan->send_offsets[d + 1] = plan->send_offsets[d] + plan->send_counts[d];
    for (int32_t d = 0; d < R; d++) plan->send_counts[d] = 0; /* reused as cursors, restored below */
    for (int64_t id = 0; id < rows; id++) {
        moe__ep_choose(p, topk_ids[id], rank, id / top_k, &dst, &local);
        const int64_t at = plan->send_offsets[dst] + plan->send_counts[dst]++;
        plan->send_row_ids[at] = (int32_t)id;
        plan->send_local_expert[at] = local;
        plan->row_position[id] = at;
    }
    return MOE_STATUS_OK;
}

/* Reads elements [c0, c0 + n) of row t of a host float tensor as fp32. */
static void load_range(const moe_tensor *x, int64_t t, int64_t c0, int64_t n, float *out) {
    const int64_t s0 = moe__stride(x, 0), s1 = moe__stride(x, 1);
    for (int64_t i = 0; i < n; i++) {
        const int64_t off = t * s0 + (c0 + i) * s1;
        switch (x->dtype) {
        case MOE_DTYPE_F32: out[i] = ((const float *)x->data)[off]; break;
        case MOE_DTYPE_F16: out[i] = moe_f16_to_float(((const uint16_t *)x->data)[off]); break;
        case MOE_DTYPE_BF16: out[i] = moe_bf16_to_float(((const uint16_t *)x->data)[off]); break;
        default: out[i] = NAN; break;
        }
    }
}

/* Writes one record's payload from a host tensor row, `GROUP` elements at a time through a
 * stack buffer (128: one FP8 scale group, so each group is quantised exactly as moe_quantize
 * quantises that group of a whole [T, H] matrix in FP8_ROW128). */
static moe_status pack_payload(moe_context_t *ctx, const moe_ep_row_layout *L, const moe_tensor *x, int64_t t,
                               uint8_t *record) {
    enum { GROUP = 128 };
    float buf[GROUP];
    const int64_t H = L->hidden;
    for (int64_t c0 = 0; c0 < H; c0 += GROUP) {
        const int64_t n = H - c0 < GROUP ? H - c0 : GROUP;
        load_range(x, t, c0, n, buf);
        switch (L->format) {
        case MOE_FORMAT_F32: memcpy(record + 4 * c0, buf, 4 * (size_t)n); break;
        case MOE_FORMAT_F16:
        case MOE_FORMAT_BF16:
            for (int64_t i = 0; i < n; i++) {
                const uint16_t v = L->format == MOE_FORMAT_F16 ? moe_float_to_f16(buf[i]) : moe_float_to_bf16(buf[i]);
                memcpy(record + 2 * (c0 + i), &v, 2);
            }
            break;
        case MOE_FORMAT_FP8_ROW128: {
            float scale;
            if (moe_quantize(MOE_FORMAT_FP8_ROW128, buf, 1, n, n, record + c0, &scale, NULL) != MOE_STATUS_OK)
                return moe__error(ctx, MOE_STATUS_INTERNAL, "moe_ep_pack: quantising row %lld failed: %s",
                                  (long long)t, moe_last_error(NULL));
            memcpy(record + L->scale_offset + 4 * (size_t)(c0 / GROUP), &scale, 4);
            break;
        }
        default: return moe__error(ctx, MOE_STATUS_INTERNAL, "moe_ep_pack: format %d", (int)L->format);
        }
    }
    return MOE_STATUS_OK;
}

moe_status moe_ep_pack(moe_context_t *ctx, const moe_ep_send_plan *plan, const moe_ep_row_layout *layout,
                       const moe_tensor *x, const float *topk_weights, void *send_buf, size_t send_bytes) {
    static const char fn[] = "moe_ep_pack";
    moe__clear_error(ctx);
    int64_t rows;
    moe_status st = check_send_plan(ctx, fn, plan, &rows);
    if (st == MOE_STATUS_OK) st = check_layout(ctx, fn, layout);
    if (st != MOE_STATUS_OK) return st;
    const int64_t dims[2] = {plan->num_tokens, layout->hidden};
    st = moe__check_tensor(ctx, x, "moe_ep_pack: x", 2, dims, MOE__FLOAT_DTYPES);
    if (st != MOE_STATUS_OK) return st;
    if (x->memory != MOE_MEMORY_HOST)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: x is device memory, expected host", fn);
    if (rows > 0 && !topk_weights) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: topk_weights is NULL", fn);
    if (rows > 0 && !send_buf) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: send_buf is NULL", fn);
    /* rows <= 2^31 and row_bytes < 2^44: the product fits in 64 bits. */
    const uint64_t need = (uint64_t)rows * layout->row_bytes;
    if (need > SIZE_MAX || send_bytes < (size_t)need)
        return moe__error(ctx, MOE_STATUS_WORKSPACE_TOO_SMALL, "%s: send_bytes = %zu, expected >= %llu (%lld rows x %zu)",
                          fn, send_bytes, (unsigned long long)need, (long long)rows, layout->row_bytes);

    for (int64_t pos = 0; pos < rows; pos++) {
        uint8_t *record = (uint8_t *)send_buf + (size_t)pos * layout->row_bytes;
        const int32_t id = plan->send_row_ids[pos];
        if (id < 0 || id >= rows)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: plan.send_row_ids[%lld] = %d, expected 0..%lld",
                              fn, (long long)pos, id, (long long)rows - 1);
        /* Zero the record first so the padding bytes sent over the wire are defined. */
        memset(record, 0, layout->row_bytes);
        st = pack_payload(ctx, layout, x, id / plan->top_k, record);
        if (st != MOE_STATUS_OK) return st;
        memcpy(record + layout->meta_offset, &plan->send_local_expert[pos], 4);
        memcpy(record + layout->meta_offset + 4, &topk_weights[id], 4);
    }
    return MOE_STATUS_OK;
}

moe_status moe_ep_unpack(moe_context_t *ctx, const moe_ep_row_layout *layout, const void *recv_buf,
                         int64_t num_rows, float *x_out, int32_t *local_expert, float *weight) {
    static const char fn[] = "moe_ep_unpack";
    moe__clear_error(ctx);
    moe_status st = check_layout(ctx, fn, layout);
    if (st != MOE_STATUS_OK) return st;
    if (num_rows < 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: num_rows = %lld, expected >= 0", fn,
                          (long long)num_rows);
    if (num_rows == 0) return MOE_STATUS_OK;
    if (!recv_buf) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: recv_buf is NULL", fn);
    if (!x_out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: x_out is NULL", fn);
    const int64_t H = layout->hidden;
    for (int64_t r = 0; r < num_rows; r++) {
        const uint8_t *record = (const uint8_t *)recv_buf + (size_t)r * layout->row_bytes;
        float *out = x_out + r * H;
        switch (layout->format) {
        case MOE_FORMAT_F32: memcpy(out, record, 4 * (size_t)H); break;
        case MOE_FORMAT_F16:
        case MOE_FORMAT_BF16:
            for (int64_t h = 0; h < H; h++) {
                uint16_t v;
                memcpy(&v, record + 2 * h, 2);
                out[h] = layout->format == MOE_FORMAT_F16 ? moe_f16_to_float(v) : moe_bf16_to_float(v);
            }
            break;
        case MOE_FORMAT_FP8_ROW128:
            if (moe_dequantize(MOE_FORMAT_FP8_ROW128, record, record + layout->scale_offset, 1.0f, 1, H, out, H) !=
                MOE_STATUS_OK)
                return moe__error(ctx, MOE_STATUS_INTERNAL, "%s: dequantising row %lld failed: %s", fn, (long long)r,
                                  moe_last_error(NULL));
            break;
        default: return moe__error(ctx, MOE_STATUS_INTERNAL, "%s: format %d", fn, (int)layout->format);
        }
        if (local_expert) memcpy(&local_expert[r], record + layout->meta_offset, 4);
        if (weight) memcpy(&weight[r], record + layout->meta_offset + 4, 4);
    }
    return MOE_STATUS_OK;
}

moe_status moe_ep_recv_bound(int32_t num_ranks, int64_t max_tokens, int64_t top_k, int64_t *max_rows) {
    static const char fn[] = "moe_ep_recv_bound";
    moe__clear_error(NULL);
    if (!max_rows) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: max_rows is NULL", fn);
    *max_rows = 0;
    if (num_ranks < 1 || num_ranks > MOE__EP_MAX_RANKS)
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT, "%s: num_ranks = %d, expected 1..%d", fn, num_ranks,
                          MOE__EP_MAX_RANKS);
    if (max_tokens < 0)
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT, "%s: max_tokens = %lld, expected >= 0", fn,
                          (long long)max_tokens);
    if (top_k < 1)
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT, "%s: top_k = %lld, expected >= 1", fn, (long long)top_k);
    int64_t per_peer, total;
    if (!moe__mul64(max_tokens, top_k, &per_peer) || per_peer > INT32_MAX ||
        !moe__mul64(per_peer, num_ranks, &total))
        return moe__error(NULL, MOE_STATUS_OVERFLOW,
                          "%s: %d ranks x %lld tokens x top_k %lld, expected tokens x top_k <= %d", fn, num_ranks,
                          (long long)max_tokens, (long long)top_k, INT32_MAX);
    *max_rows = total;
    return MOE_STATUS_OK;
}

moe_status moe_ep_recv_plan_build(moe_context_t *ctx, int32_t num_ranks, const int64_t *recv_counts,
                                  int64_t num_local_experts, const int32_t *recv_local_expert, int64_t capacity,
                                  moe_ep_recv_plan *plan) {
    static const char fn[] = "moe_ep_recv_plan_build";
    moe__clear_error(ctx);
    if (!plan) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan is NULL", fn);
    if (num_ranks < 1 || num_ranks > MOE__EP_MAX_RANKS)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: num_ranks = %d, expected 1..%d", fn, num_ranks,
                          MOE__EP_MAX_RANKS);
    if (!recv_counts) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: recv_counts is NULL", fn);
    if (num_local_experts < 0 || num_local_experts > INT32_MAX)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: num_local_experts = %lld, expected 0..%d", fn,
                          (long long)num_local_experts, INT32_MAX);
    if (capacity < 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: capacity = %lld, expected >= 0", fn,
                          (long long)capacity);
    if (!plan->recv_offsets) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan.recv_offsets is NULL", fn);
    if (num_local_experts > 0 && !plan->expert_counts)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan.expert_counts is NULL", fn);
    if (!plan->expert_offsets) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan.expert_offsets is NULL", fn);

    int64_t total = 0;
    for (int32_t s = 0; s < num_ranks; s++) {
        /* A source sends at most T*k <= INT32_MAX rows. */
        if (recv_counts[s] < 0 || recv_counts[s] > INT32_MAX)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: recv_counts[%d] = %lld, expected 0..%d", fn, s,
                              (long long)recv_counts[s], INT32_MAX);
        total += recv_counts[s]; /* <= 2^16 * 2^31: no overflow */
    }
    if (total > capacity)
        return moe__error(ctx, MOE_STATUS_WORKSPACE_TOO_SMALL, "%s: %lld rows arrive, capacity = %lld", fn,
                          (long long)total, (long long)capacity);
    if (total > 0 && num_local_experts == 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "%s: %lld rows arrive at a rank with num_local_experts = 0, expected none", fn,
                          (long long)total);
    if (total > 0 && !recv_local_expert)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: recv_local_expert is NULL", fn);
    if (total > 0 && !plan->sorted_rows)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: plan.sorted_rows is NULL", fn);
    for (int64_t r = 0; r < total; r++)
        if (recv_local_expert[r] < 0 || recv_local_expert[r] >= num_local_experts)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: recv_local_expert[%lld] = %d, expected 0..%lld",
                              fn, (long long)r, recv_local_expert[r], (long long)num_local_experts - 1);

    plan->num_ranks = num_ranks;
    plan->num_local_experts = num_local_experts;
    plan->total_rows = total;
    plan->recv_offsets[0] = 0;
    for (int32_t s = 0; s < num_ranks; s++) plan->recv_offsets[s + 1] = plan->recv_offsets[s] + recv_counts[s];
    /* Counting sort by local expert; walking positions in order keeps them ascending. */
    for (int64_t e = 0; e < num_local_experts; e++) plan->expert_counts[e] = 0;
    for (int64_t r = 0; r < total; r++) plan->expert_counts[recv_local_expert[r]]++;
    plan->expert_offsets[0] = 0;
    for (int64_t e = 0; e < num_local_experts; e++)
        plan->expert_offsets[e + 1] = plan->expert_offsets[e] + plan->expert_counts[e];
    for (int64_t e = 0; e < num_local_experts; e++) plan->expert_counts[e] = 0; /* cursors, restored below */
    for (int64_t r = 0; r < total; r++) {
        const int32_t e = recv_local_expert[r];
        plan->sorted_rows[plan->expert_offsets[e] + plan->expert_counts[e]++] = r;
    }
    return MOE_STATUS_OK;
}

/* Reads element (r, h) of a host float tensor. */
static double element(const moe_tensor *t, int64_t r, int64_t h) {
    const int64_t off = r * moe__stride(t, 0) + h * moe__stride(t, 1);
    switch (t->dtype) {
    case MOE_DTYPE_F32: return ((const float *)t->data)[off];
    case MOE_DTYPE_F16: return moe_f16_to_float(((const uint16_t *)t->data)[off]);
    case MOE_DTYPE_BF16: return moe_bf16_to_float(((const uint16_t *)t->data)[off]);
    default: return NAN;
    }
}

moe_status moe_ep_combine(moe_context_t *ctx, const moe_ep_send_plan *plan, const moe_tensor *returned,
                          const float *shared, const float *shared_scale, const moe_tensor *y) {
    static const char fn[] = "moe_ep_combine";
    moe__clear_error(ctx);
    int64_t rows;
    moe_status st = check_send_plan(ctx, fn, plan, &rows);
    if (st != MOE_STATUS_OK) return st;
    const int64_t T = plan->num_tokens, k = plan->top_k;
    const int64_t ydims[2] = {T, -1};
    st = moe__check_tensor(ctx, y, "moe_ep_combine: y", 2, ydims, MOE__FLOAT_DTYPES);
    if (st != MOE_STATUS_OK) return st;
    const int64_t H = y->shape[1];
    const int64_t rdims[2] = {rows, H};
    st = moe__check_tensor(ctx, returned, "moe_ep_combine: returned", 2, rdims, MOE__FLOAT_DTYPES);
    if (st != MOE_STATUS_OK) return st;
    if (y->memory != MOE_MEMORY_HOST || returned->memory != MOE_MEMORY_HOST)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s is device memory, expected host", fn,
                          y->memory != MOE_MEMORY_HOST ? "y" : "returned");
    if (shared_scale && !shared)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: shared_scale given without shared", fn);
    for (int64_t id = 0; id < rows; id++)
        if (plan->row_position[id] < 0 || plan->row_position[id] >= rows)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: plan.row_position[%lld] = %lld, expected 0..%lld",
                              fn, (long long)id, (long long)plan->row_position[id], (long long)rows - 1);

    /* The CPU forward's combine, term for term: slots in order, then the shared expert times
     * its scale (a double product of two floats, exact), one rounding to fp32. */
    for (int64_t t = 0; t < T; t++) {
        const double g = shared_scale ? shared_scale[t] : 1.0;
        for (int64_t h = 0; h < H; h++) {
            double acc = 0.0;
            for (int64_t j = 0; j < k; j++) acc += element(returned, plan->row_position[t * k + j], h);
            if (shared) acc += g * shared[t * H + h];
            const int64_t index[2] = {t, h};
            moe__tensor_set(y, index, (float)acc);
        }
    }
    return MOE_STATUS_OK;
}
