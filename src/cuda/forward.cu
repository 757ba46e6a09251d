// CUDA backend entry points declared in src/core/internal.h (placeholder until the kernels land).
extern "C" {
#include "internal.h"
}

extern "C" moe_status moe__cuda_weights_upload(moe_context_t *ctx, moe_weights_t *w) {
    (void)w;
    return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "CUDA backend: weight upload is not implemented yet");
}

extern "C" void moe__cuda_weights_free(moe_weights_t *w) { (void)w; }

extern "C" moe_status moe__cuda_forward(moe_context_t *ctx, const moe_weights_t *w, const moe_forward_args *args) {
    (void)w;
    (void)args;
    return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "CUDA backend: forward is not implemented yet");
}

extern "C" size_t moe__cuda_forward_workspace(const moe_weights_t *w, int64_t num_tokens, moe_format act_format) {
    (void)w;
    (void)num_tokens;
    (void)act_format;
    return 0;
}
