/* Built when the library has no CUDA backend: it reports that, never a device. */
#include "internal.h"

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
