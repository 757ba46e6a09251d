/* Built when the library has no CUDA backend: it reports that, never a device. */
#include "internal.h"

#include <stdio.h>

int moe__cuda_device_count(void) { return -1; }

moe_status moe__cuda_weights_upload(moe_context_t *ctx, moe_weights_t *w) {
    (void)w;
    return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "this build of moefuse has no CUDA backend");
}

void moe__cuda_weights_free(moe_weights_t *w) { (void)w; }

moe_status moe__cuda_forward(moe_context_t *ctx, const moe_weights_t *w, const moe_forward_args *args) {
    (void)w;
    (void)args;
    return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "this build of moefuse has no CUDA backend");
}

size_t moe__cuda_forward_workspace(const moe_weights_t *w, int64_t num_tokens, moe_format act_format) {
    (void)w;
    (void)num_tokens;
    (void)act_format;
    return 0;
}

/* Unreachable (no cuda context can exist), but moe_forward_config links against it. */
int moe__cuda_forward_describe(const moe_weights_t *w, int64_t num_tokens, moe_format act_format, char *buf,
                               size_t size) {
    (void)w, (void)num_tokens, (void)act_format;
    return snprintf(buf, size, "backend=cuda: this build of moefuse has no CUDA backend");
}

/* --- moe_analysis_measure_gemm (added by the roofline --measure work; src/cuda/measure.cu is
 * the real one): without CUDA nothing can be timed. */
#include "moefuse_analysis.h"

moe_status moe_analysis_measure_gemm(moe_context_t *ctx, int64_t m, int64_t k, int64_t n, moe_dtype dtype,
                                     int32_t reps, double *ms) {
    (void)m, (void)k, (void)n, (void)dtype, (void)reps;
    moe__clear_error(ctx);
    if (ms) *ms = 0.0;
    return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "moe_analysis_measure_gemm: this build of moefuse has no CUDA "
                                                   "backend");
}

moe_status moe_analysis_measure_dense(moe_context_t *ctx, int64_t m, int64_t k, int64_t n, moe_dtype dtype,
                                      int32_t reps, double *ms) {
    (void)m, (void)k, (void)n, (void)dtype, (void)reps;
    moe__clear_error(ctx);
    if (ms) *ms = 0.0;
    return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "moe_analysis_measure_dense: this build of moefuse has no CUDA "
                                                   "backend");
}

moe_status moe_analysis_measure_grouped(moe_context_t *ctx, moe_dtype dtype, int32_t reps, moe_grouped_measure *g) {
    (void)dtype, (void)reps;
    moe__clear_error(ctx);
    if (!g) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_analysis_measure_grouped: g is NULL");
    g->ms = 0.0;
    g->path = -1;
    g->path_name[0] = '\0';
    g->block = g->plan_rows = 0;
    g->rows_bf16 = 0;
    return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "moe_analysis_measure_grouped: this build of moefuse has no CUDA "
                                                   "backend");
}
