/* The NCCL transport's entry points for a build without CUDA or without NCCL: each answers
 * MOE_STATUS_UNSUPPORTED. With both, src/cuda/ep_nccl.cu defines them instead. */
#include "ep_internal.h"

#ifndef MOEFUSE_HAVE_NCCL

static moe_status unsupported(moe_context_t *ctx, const char *fn) {
    moe__clear_error(ctx);
    return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "%s: this build of moefuse has no NCCL transport "
                      "(built without CUDA, or libnccl was not found at configure time)", fn);
}

int moe_ep_nccl_available(void) { return 0; }

moe_status moe_ep_nccl_comms_create(moe_context_t *ctx, int32_t num_devices, void **comms) {
    return unsupported(ctx, "moe_ep_nccl_comms_create");
}

void moe_ep_nccl_comm_free(void *comm) { (void)comm; }

moe_status moe_ep_nccl_exchange_counts(moe_context_t *ctx, void *comm, const int64_t *d_send_counts,
                                       int64_t *d_recv_counts, void *stream) {
    return unsupported(ctx, "moe_ep_nccl_exchange_counts");
}

moe_status moe_ep_nccl_exchange_rows(moe_context_t *ctx, void *comm, const void *d_send, const int64_t *send_counts,
                                     void *d_recv, const int64_t *recv_counts, size_t row_bytes, void *stream) {
    return unsupported(ctx, "moe_ep_nccl_exchange_rows");
}

moe_status moe_ep_nccl_exchange_slots(moe_context_t *ctx, void *comm, const void *d_send, void *d_recv,
                                      int64_t capacity, size_t row_bytes, void *stream) {
    return unsupported(ctx, "moe_ep_nccl_exchange_slots");
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int moe__ep_nccl_stub_unused;
#endif
