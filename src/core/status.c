/* Status strings, the context, and error messages. */
#include "internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char thread_error[MOE__ERROR_MAX];

const char *moe_version(void) {
#define MOE__STR2(x) #x
#define MOE__STR(x) MOE__STR2(x)
    return MOE__STR(MOE_VERSION_MAJOR) "." MOE__STR(MOE_VERSION_MINOR) "." MOE__STR(MOE_VERSION_PATCH);
}

const char *moe_status_string(moe_status status) {
    switch (status) {
#define MOE__STATUS_CASE(name, value, text) \
    case name:                              \
        return text;
        MOE_STATUS_LIST(MOE__STATUS_CASE)
#undef MOE__STATUS_CASE
    default:
        return "unknown status";
    }
}

moe_status moe__error(moe_context_t *ctx, moe_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(thread_error, sizeof thread_error, fmt, ap);
    va_end(ap);
    if (ctx) memcpy(ctx->error, thread_error, sizeof ctx->error);
    return status;
}

void moe__clear_error(moe_context_t *ctx) {
    thread_error[0] = '\0';
    if (ctx) ctx->error[0] = '\0';
}

const char *moe_last_error(const moe_context_t *ctx) {
    return ctx ? ctx->error : thread_error;
}

const char *moe_backend_name(moe_backend backend) {
    switch (backend) {
    case MOE_BACKEND_AUTO: return "auto";
    case MOE_BACKEND_CPU: return "cpu";
    case MOE_BACKEND_CUDA: return "cuda";
    }
    return "unknown";
}

moe_status moe_context_create(moe_backend backend, int device, moe_context_t **out) {
    moe__clear_error(NULL);
    if (!out) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "moe_context_create: out is NULL");
    *out = NULL;
    if (backend != MOE_BACKEND_AUTO && backend != MOE_BACKEND_CPU && backend != MOE_BACKEND_CUDA)
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT,
                          "moe_context_create: backend %d is not one of AUTO (0), CPU (1), CUDA (2)", (int)backend);
    int gpus = moe__cuda_device_count();
    moe_backend resolved = backend;
    if (backend == MOE_BACKEND_AUTO) resolved = gpus > 0 ? MOE_BACKEND_CUDA : MOE_BACKEND_CPU;
    if (resolved == MOE_BACKEND_CUDA) {
        if (gpus <= 0)
            return moe__error(NULL, MOE_STATUS_NO_DEVICE,
                              "moe_context_create: backend cuda asked for, but %s",
                              gpus < 0 ? "this build of moefuse has no CUDA support (built with MOEFUSE_CUDA=OFF or without nvcc)"
                                       : "no CUDA device is visible");
        if (device < 0 || device >= gpus)
            return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT,
                              "moe_context_create: device %d out of range: %d CUDA device(s) visible", device, gpus);
    }
    moe_context_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return moe__error(NULL, MOE_STATUS_OUT_OF_MEMORY, "moe_context_create: out of host memory");
    ctx->backend = resolved;
    ctx->device = resolved == MOE_BACKEND_CUDA ? device : 0;
    *out = ctx;
    return MOE_STATUS_OK;
}

void moe_context_free(moe_context_t *ctx) { free(ctx); }

moe_backend moe_context_backend(const moe_context_t *ctx) { return ctx ? ctx->backend : MOE_BACKEND_CPU; }

int moe__team_size(const moe_context_t *ctx, int64_t work, const char **source) {
    int threads = 1;
    const char *from = "no OpenMP: 1";
    if (ctx && ctx->threads > 0) threads = ctx->threads, from = "moe_context_set_threads";
#ifdef _OPENMP
    else threads = omp_get_max_threads(), from = "OpenMP default";
#endif
    if (threads > MOE__TEAM_MAX) threads = MOE__TEAM_MAX;
    if (work > 0 && threads > work) threads = (int)work;
    if (source) *source = from;
    return threads;
}

moe_status moe_context_set_threads(moe_context_t *ctx, int threads) {
    if (!ctx) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "moe_context_set_threads: ctx is NULL");
    moe__clear_error(ctx);
    if (threads < 0 || threads > 4096)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "moe_context_set_threads: threads = %d, expected 0 (default) to 4096", threads);
    ctx->threads = threads;
    return MOE_STATUS_OK;
}
