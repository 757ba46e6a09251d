/* moe_forward and friends: argument validation, then dispatch to the backend.
 *
 * Everything the backends may assume is checked here, once: shapes, dtypes, strides, memory
 * kinds, the routing source, the workspace, and the size products (T*H, T*k, ...) that the
 * backends compute without further checks. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

void moe_forward_args_init(moe_forward_args *args) {
    if (!args) return;
    memset(args, 0, sizeof *args); /* every tensor absent, no workspace, no stream */
    args->act_format = MOE_FORMAT_F32;
}

/* The backend's workspace query; SIZE_MAX means "does not fit in size_t". */
static size_t backend_workspace(const moe_context_t *ctx, const moe_weights_t *w, int64_t num_tokens,
                                moe_format act_format) {
    if (ctx->backend == MOE_BACKEND_CUDA) return moe__cuda_forward_workspace(w, num_tokens, act_format);
    return moe__cpu_forward_workspace(w, num_tokens, act_format);
}

/* act_format: F32 (no activation quantisation) or one of the two w8a8 FP8 recipes. */
static moe_status check_act_format(moe_context_t *ctx, const char *fn, moe_format f) {
    if ((unsigned)f >= MOE_FORMAT_COUNT_)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: act_format = %d is not a moe_format", fn, (int)f);
    if (f != MOE_FORMAT_F32 && f != MOE_FORMAT_FP8_TENSOR && f != MOE_FORMAT_FP8_ROW128)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "%s: act_format = %s, expected f32, fp8-tensor or fp8-row128",
                          fn, moe_format_name(f));
    return MOE_STATUS_OK;
}

/* T = num_tokens: every per-token buffer is sized by T*H, T*k, T*E, and the dispatch plan
 * numbers rows token*k + slot in int32 (T*k itself marks padding), so T*k must fit int32. */
static moe_status check_num_tokens(moe_context_t *ctx, const char *fn, const moe_layer_spec *s, int64_t T) {
    int64_t prod;
    if (T < 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: num_tokens = %lld, expected >= 0", fn, (long long)T);
    if (!moe__mul64(T, s->hidden, &prod))
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "%s: num_tokens * hidden = %lld * %lld overflows int64", fn,
                          (long long)T, (long long)s->hidden);
    if (!moe__mul64(T, s->num_experts, &prod))
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "%s: num_tokens * num_experts = %lld * %lld overflows int64", fn,
                          (long long)T, (long long)s->num_experts);
    if (!moe__mul64(T, s->top_k, &prod) || prod > INT32_MAX)
        return moe__error(ctx, MOE_STATUS_OVERFLOW,
                          "%s: num_tokens * top_k = %lld * %lld exceeds 2^31 - 1 (routed rows are numbered in int32)",
                          fn, (long long)T, (long long)s->top_k);
    return MOE_STATUS_OK;
}

moe_status moe_forward_workspace_size(moe_context_t *ctx, const moe_weights_t *w, int64_t num_tokens,
                                      moe_format act_format, size_t *bytes) {
    static const char fn[] = "moe_forward_workspace_size";
    if (!ctx) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: ctx is NULL", fn);
    moe__clear_error(ctx);
    if (!w) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: w is NULL", fn);
    if (!bytes) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: bytes is NULL", fn);
    *bytes = 0;
    moe_status st = check_act_format(ctx, fn, act_format);
    if (st != MOE_STATUS_OK) return st;
    st = check_num_tokens(ctx, fn, &w->spec, num_tokens);
    if (st != MOE_STATUS_OK) return st;
    size_t need = backend_workspace(ctx, w, num_tokens, act_format);
    if (need == SIZE_MAX)
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "%s: the workspace for num_tokens = %lld does not fit in size_t",
                          fn, (long long)num_tokens);
    *bytes = need;
    return MOE_STATUS_OK;
}

/* The CPU backend's line; its thread count is the CPU forward's (moe__team_size). */
static int cpu_describe(const moe_context_t *ctx, const moe_weights_t *w, int64_t T, moe_format act_format,
                        size_t workspace, char *buf, size_t size) {
    const char *source;
    int threads = moe__team_size(ctx, 0, &source);
    const moe_layer_spec *s = &w->spec;
    char shared[96] = "none";
    if (w->s13.count > 0)
        snprintf(shared, sizeof shared, "separate pass over all T tokens (Is = %lld)", (long long)s->shared_intermediate);
    return snprintf(buf, size,
                    "backend=cpu T=%lld weights=%s path=reference (plain loops, weights decoded per row to fp32, "
                    "fp64 dot products) threads=%d (%s); shared expert: %s; act_format=%s; workspace=%zu bytes",
                    (long long)T, moe_format_name(w->format), threads, source, shared, moe_format_name(act_format),
                    workspace);
}

moe_status moe_forward_config(moe_context_t *ctx, const moe_weights_t *w, int64_t num_tokens, moe_format act_format,
                              char *buf, size_t buf_size) {
    static const char fn[] = "moe_forward_config";
    if (!ctx) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: ctx is NULL", fn);
    moe__clear_error(ctx);
    if (!w) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: w is NULL", fn);
    if (!buf) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: buf is NULL (buf_size = %zu)", fn, buf_size);
    if (buf_size == 0)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: buf_size = 0, expected room for the line (%d bytes "
                          "always suffice: MOE_FORWARD_CONFIG_MAX)", fn, MOE_FORWARD_CONFIG_MAX);
    buf[0] = '\0';
    if (ctx->backend == MOE_BACKEND_CUDA && !w->device)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "%s: the weights were created on a %s context; a cuda context needs weights created on one",
                          fn, moe_backend_name(w->backend));
    moe_status st = check_act_format(ctx, fn, act_format);
    if (st != MOE_STATUS_OK) return st;
    st = check_num_tokens(ctx, fn, &w->spec, num_tokens);
    if (st != MOE_STATUS_OK) return st;
    const size_t workspace = backend_workspace(ctx, w, num_tokens, act_format);
    if (workspace == SIZE_MAX)
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "%s: the workspace for num_tokens = %lld does not fit in size_t",
                          fn, (long long)num_tokens);
    char line[MOE_FORWARD_CONFIG_MAX];
    int len = ctx->backend == MOE_BACKEND_CUDA
                  ? moe__cuda_forward_describe(w, num_tokens, act_format, line, sizeof line)
                  : cpu_describe(ctx, w, num_tokens, act_format, workspace, line, sizeof line);
    if (len < 0 || (size_t)len >= sizeof line)
        return moe__error(ctx, MOE_STATUS_INTERNAL, "%s: the description did not fit in %d bytes", fn,
                          MOE_FORWARD_CONFIG_MAX);
    if ((size_t)len >= buf_size)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: buf_size = %zu, expected >= %d (the line and its NUL)",
                          fn, buf_size, len + 1);
    memcpy(buf, line, (size_t)len + 1);
    return MOE_STATUS_OK;
}

/* The memory kind the backend reads and writes. */
static moe_memory backend_memory(const moe_context_t *ctx) {
    return ctx->backend == MOE_BACKEND_CUDA ? MOE_MEMORY_DEVICE : MOE_MEMORY_HOST;
}

static moe_status check_memory(moe_context_t *ctx, const moe_tensor *t, const char *name) {
    moe_memory want = backend_memory(ctx);
    if (t->memory != want)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "moe_forward: %s is in %s memory, expected %s memory for the %s backend", name,
                          t->memory == MOE_MEMORY_HOST ? "host" : "device", want == MOE_MEMORY_HOST ? "host" : "device",
                          moe_backend_name(ctx->backend));
    return MOE_STATUS_OK;
}

/* moe__check_tensor plus the memory kind. */
static moe_status check_arg(moe_context_t *ctx, const moe_tensor *t, const char *name, int64_t d0, int64_t d1,
                            uint32_t dtypes) {
    const int64_t dims[2] = {d0, d1};
    moe_status st = moe__check_tensor(ctx, t, name, 2, dims, dtypes);
    if (st != MOE_STATUS_OK) return st;
    return check_memory(ctx, t, name);
}

/* Host topk_ids: every id in [0, E), or -1 (no expert). (Device ids cannot be read without a
 * sync; the CUDA backend treats them as trusted and leaves ids outside [0, E) out of the plan.) */
static moe_status check_ids_in_range(moe_context_t *ctx, const moe_tensor *ids, int64_t T, int64_t k, int64_t E) {
    const int32_t *p = ids->data;
    const int64_t s0 = moe__stride(ids, 0), s1 = moe__stride(ids, 1);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++) {
            int32_t id = p[t * s0 + j * s1];
            if (id < -1 || id >= E)
                return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                                  "moe_forward: args.topk_ids[%lld][%lld] = %d, expected an expert in 0..%lld or -1 "
                                  "(none)",
                                  (long long)t, (long long)j, (int)id, (long long)E - 1);
        }
    return MOE_STATUS_OK;
}

moe_status moe_forward(moe_context_t *ctx, const moe_weights_t *w, const moe_forward_args *args) {
    static const char fn[] = "moe_forward";
    if (!ctx) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: ctx is NULL", fn);
    moe__clear_error(ctx);
    if (!w) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: w is NULL", fn);
    if (!args) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: args is NULL", fn);
    if (ctx->backend == MOE_BACKEND_CUDA && !w->device)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "%s: the weights were created on a %s context; a cuda context needs weights created on one",
                          fn, moe_backend_name(w->backend));
    const moe_layer_spec *s = &w->spec;
    const int64_t H = s->hidden, E = s->num_experts, k = s->top_k;
    moe_status st;

    /* x [T, H], rows contiguous (the row stride may exceed H). */
    st = check_arg(ctx, &args->x, "args.x", -1, H, MOE__FLOAT_DTYPES);
    if (st != MOE_STATUS_OK) return st;
    const int64_t T = args->x.shape[0];
    if (T > 0 && H > 1 && moe__stride(&args->x, 1) != 1)
        return moe__error(ctx, MOE_STATUS_SHAPE_MISMATCH, "%s: args.x: strides[1] = %lld, expected 1 (rows contiguous)",
                          fn, (long long)moe__stride(&args->x, 1));
    st = check_num_tokens(ctx, fn, s, T);
    if (st != MOE_STATUS_OK) return st;
    st = check_arg(ctx, &args->y, "args.y", T, H, MOE__FLOAT_DTYPES);
    if (st != MOE_STATUS_OK) return st;

    /* Routing: exactly one source. */
    const bool has_ids = moe_tensor_present(&args->topk_ids), has_weights = moe_tensor_present(&args->topk_weights);
    const bool has_logits = moe_tensor_present(&args->router_logits);
    if (has_ids != has_weights)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: args.%s given without args.%s (pass both or neither)",
                          fn, has_ids ? "topk_ids" : "topk_weights", has_ids ? "topk_weights" : "topk_ids");
    if (has_ids && has_logits)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "%s: both args.topk_ids/topk_weights and args.router_logits given; pass one routing input",
                          fn);
    if (has_ids) {
        st = check_arg(ctx, &args->topk_ids, "args.topk_ids", T, k, MOE__DT(MOE_DTYPE_I32));
        if (st != MOE_STATUS_OK) return st;
        st = check_arg(ctx, &args->topk_weights, "args.topk_weights", T, k, MOE__DT(MOE_DTYPE_F32));
        if (st != MOE_STATUS_OK) return st;
    } else if (has_logits) {
        st = check_arg(ctx, &args->router_logits, "args.router_logits", T, E, MOE__DT(MOE_DTYPE_F32));
        if (st != MOE_STATUS_OK) return st;
    } else if (!w->router) {
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: no routing input and the weights have no router", fn);
    }
    if (moe_tensor_present(&args->out_topk_ids)) {
        st = check_arg(ctx, &args->out_topk_ids, "args.out_topk_ids", T, k, MOE__DT(MOE_DTYPE_I32));
        if (st != MOE_STATUS_OK) return st;
    }
    if (moe_tensor_present(&args->out_topk_weights)) {
        st = check_arg(ctx, &args->out_topk_weights, "args.out_topk_weights", T, k, MOE__DT(MOE_DTYPE_F32));
        if (st != MOE_STATUS_OK) return st;
    }

    /* Activation format and workspace. */
    st = check_act_format(ctx, fn, args->act_format);
    if (st != MOE_STATUS_OK) return st;
    const size_t need = backend_workspace(ctx, w, T, args->act_format);
    if (need == SIZE_MAX)
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "%s: the workspace for num_tokens = %lld does not fit in size_t",
                          fn, (long long)T);
    if (need > 0 && args->workspace_size < need)
        return moe__error(ctx, MOE_STATUS_WORKSPACE_TOO_SMALL,
                          "%s: args.workspace_size = %zu bytes, expected >= %zu (moe_forward_workspace_size)", fn,
                          args->workspace_size, need);
    if (need > 0 && !args->workspace)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: args.workspace is NULL, expected %zu bytes", fn, need);

    if (has_ids && backend_memory(ctx) == MOE_MEMORY_HOST) {
        st = check_ids_in_range(ctx, &args->topk_ids, T, k, E);
        if (st != MOE_STATUS_OK) return st;
    }

    if (ctx->backend == MOE_BACKEND_CUDA) return moe__cuda_forward(ctx, w, args);
    return moe__cpu_forward(ctx, w, args);
}

moe_status moe_backward(moe_context_t *ctx, const moe_weights_t *w, const moe_backward_args *args) {
    (void)w;
    (void)args;
    if (ctx) moe__clear_error(ctx);
    return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "moe_backward: not implemented in this version");
}
