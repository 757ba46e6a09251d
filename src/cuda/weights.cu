// The device copy of the packed weights (moe__cuda_weights, hung on moe_weights.device).
// All device memory of the backend is allocated here, at create time; forward allocates
// nothing.
#include <stdlib.h>
#include <string.h>

#include "kernels.cuh"

namespace {

// Copies `bytes` host bytes to a new device allocation *dst (NULL when src is NULL).
moe_status upload(moe_context_t *ctx, void **dst, const void *src, size_t bytes, const char *what) {
    *dst = NULL;
    if (!src || bytes == 0) return MOE_STATUS_OK;
    moe_status st = cuda_status(ctx, cudaMalloc(dst, bytes), what);
    if (st != MOE_STATUS_OK) return st;
    return cuda_status(ctx, cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice), what);
}

// A stack of `experts` matrices of `bytes_each`: the routed ones from `routed`, then (when
// fused) the shared one from `shared`, or zeros when the shared expert has none of this array.
moe_status upload_stack(moe_context_t *ctx, void **dst, const void *routed, int64_t E, const void *shared,
                        bool fused, size_t bytes_each, const char *what) {
    *dst = NULL;
    if (!routed) return MOE_STATUS_OK;
    const size_t routed_bytes = (size_t)E * bytes_each, total = routed_bytes + (fused ? bytes_each : 0);
    moe_status st = cuda_status(ctx, cudaMalloc(dst, total), what);
    if (st != MOE_STATUS_OK) return st;
    st = cuda_status(ctx, cudaMemcpy(*dst, routed, routed_bytes, cudaMemcpyHostToDevice), what);
    if (st != MOE_STATUS_OK || !fused) return st;
    char *tail = (char *)*dst + routed_bytes;
    if (shared) return cuda_status(ctx, cudaMemcpy(tail, shared, bytes_each, cudaMemcpyHostToDevice), what);
    return cuda_status(ctx, cudaMemset(tail, 0, bytes_each), what);
}

void release(moe__cuda_weights *d) {
    if (!d) return;
    void *all[] = {d->w13, d->w2, d->b13, d->b2, d->router, d->router_bias, d->correction_bias, d->shared_gate,
                   d->s13, d->s2, d->sb13, d->sb2, d->w13_scales.data, d->w2_scales.data, d->s13_scales.data,
                   d->s2_scales.data};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) cudaFree(all[i]);
    free(d);
}

bool is_fp8(moe_format f) { return f == MOE_FORMAT_FP8_TENSOR || f == MOE_FORMAT_FP8_BLOCK128; }

// The scale grid of a packed FP8 matrix (its scales go up beside the codes).
moe__cuda_fp8_scales scale_shape(const moe__qmatrix *m) {
    moe__cuda_fp8_scales s;
    memset(&s, 0, sizeof s);
    s.rows = m->layout.scale_rows;
    s.cols = m->layout.scale_cols;
    s.paired = m->paired_rows && m->format == MOE_FORMAT_FP8_BLOCK128;
    return s;
}

// Uploads the FP8 scales: the routed stacks' (with the fused shared expert's appended as
// matrix E, as its codes are) and a separate shared expert's.
moe_status upload_fp8_scales(moe_context_t *ctx, const moe_weights_t *w, moe__cuda_weights *d) {
    const bool shared = w->s13.count > 0, fused = d->shared_fused;
    const int64_t E = w->spec.num_experts;
    d->w13_scales = scale_shape(&w->w13);
    d->w2_scales = scale_shape(&w->w2);
    moe_status st = upload_stack(ctx, (void **)&d->w13_scales.data, w->w13.scales, E, fused ? w->s13.scales : NULL,
                                 fused, moe__qmatrix_scale_bytes(&w->w13), "uploading the W13 scales");
    if (st == MOE_STATUS_OK)
        st = upload_stack(ctx, (void **)&d->w2_scales.data, w->w2.scales, E, fused ? w->s2.scales : NULL, fused,
                          moe__qmatrix_scale_bytes(&w->w2), "uploading the W2 scales");
    if (st != MOE_STATUS_OK || !shared || fused) return st;
    d->s13_scales = scale_shape(&w->s13);
    d->s2_scales = scale_shape(&w->s2);
    st = upload(ctx, (void **)&d->s13_scales.data, w->s13.scales, moe__qmatrix_scale_bytes(&w->s13),
                "uploading the shared W13 scales");
    if (st == MOE_STATUS_OK)
        st = upload(ctx, (void **)&d->s2_scales.data, w->s2.scales, moe__qmatrix_scale_bytes(&w->s2),
                    "uploading the shared W2 scales");
    return st;
}

} // namespace

extern "C" moe_status moe__cuda_init(moe_context_t *ctx) {
    moe_status st = cuda_status(ctx, cudaSetDevice(ctx ? ctx->device : 0), "cudaSetDevice");
    if (st != MOE_STATUS_OK) return st;
    if ((st = cuda_status(ctx, gemm_init(), "cudaFuncSetAttribute(gemm)")) != MOE_STATUS_OK) return st;
    if ((st = cuda_status(ctx, fp8_gemm_init(), "cudaFuncSetAttribute(fp8 gemm)")) != MOE_STATUS_OK) return st;
    if ((st = cuda_status(ctx, route_init(), "cudaFuncSetAttribute(route)")) != MOE_STATUS_OK) return st;
    return cuda_status(ctx, plan_init(), "cudaFuncSetAttribute(plan)");
}

extern "C" moe_status moe__cuda_weights_upload(moe_context_t *ctx, moe_weights_t *w) {
    if (!w) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe__cuda_weights_upload: w is NULL");
    const moe_layer_spec *s = &w->spec;
    const bool fp8 = is_fp8(w->format);
    if (w->format != MOE_FORMAT_BF16 && w->format != MOE_FORMAT_F16 && !fp8)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                          "moe_weights_create: format %s on the cuda backend: this version runs bf16, f16, "
                          "fp8-tensor and fp8-block128 weights (MXFP8 and the 4-bit formats run on the cpu backend)",
                          moe_format_name(w->format));
    const bool shared = w->s13.count > 0;
    const int64_t H = s->hidden, I = s->intermediate, Is = shared ? s->shared_intermediate : 0, E = s->num_experts;
    // 16-byte cp.async rows and paired epilogue stores need every GEMM dimension to be a
    // multiple of 8 elements (true of every published MoE config); 16 for the 1-byte FP8 codes.
    const int64_t multiple = fp8 ? 16 : 8;
    if (H % multiple != 0 || I % multiple != 0 || Is % multiple != 0)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                          "moe_weights_create: hidden = %lld, intermediate = %lld, shared_intermediate = %lld: "
                          "the cuda backend needs multiples of %lld for %s weights",
                          (long long)H, (long long)I, (long long)Is, (long long)multiple, moe_format_name(w->format));
    if (route_smem_bytes(E, s->score, s->n_group) > ROUTE_MAX_SMEM)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                          "moe_weights_create: num_experts = %lld is more than the cuda routing kernel holds",
                          (long long)E);

    // Kernel attributes are set here, once per weights, never inside forward (which may be
    // under graph capture).
    moe_status st = moe__cuda_init(ctx);
    if (st != MOE_STATUS_OK) return st;

    moe__cuda_weights *d = (moe__cuda_weights *)calloc(1, sizeof *d);
    if (!d) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "moe_weights_create: out of host memory");
    d->dtype = fp8 ? MOE_DTYPE_E4M3 : w->format == MOE_FORMAT_BF16 ? MOE_DTYPE_BF16 : MOE_DTYPE_F16;
    d->format = w->format;
    d->shared_fused = shared && Is == I;
    d->experts = E + (d->shared_fused ? 1 : 0);
    const bool fused = d->shared_fused;
    const int64_t R13 = w->w13.rows;

    st = upload_stack(ctx, &d->w13, w->w13.codes, E, fused ? w->s13.codes : NULL, fused, w->w13.layout.code_bytes,
                      "uploading W13");
    if (st == MOE_STATUS_OK)
        st = upload_stack(ctx, &d->w2, w->w2.codes, E, fused ? w->s2.codes : NULL, fused, w->w2.layout.code_bytes,
                          "uploading W2");
    if (st == MOE_STATUS_OK)
        st = upload_stack(ctx, (void **)&d->b13, w->b13, E, fused ? w->sb13 : NULL, fused, (size_t)R13 * 4,
                          "uploading the W13 biases");
    if (st == MOE_STATUS_OK)
        st = upload_stack(ctx, (void **)&d->b2, w->b2, E, fused ? w->sb2 : NULL, fused, (size_t)H * 4,
                          "uploading the W2 biases");
    if (st == MOE_STATUS_OK)
        st = upload(ctx, (void **)&d->router, w->router, (size_t)(E * H) * 4, "uploading the router");
    if (st == MOE_STATUS_OK)
        st = upload(ctx, (void **)&d->router_bias, w->router_bias, (size_t)E * 4, "uploading the router bias");
    if (st == MOE_STATUS_OK)
        st = upload(ctx, (void **)&d->correction_bias, w->correction_bias, (size_t)E * 4,
                    "uploading the correction bias");
    if (st == MOE_STATUS_OK)
        st = upload(ctx, (void **)&d->shared_gate, w->shared_gate, (size_t)H * 4, "uploading the shared gate");
    if (st == MOE_STATUS_OK && shared && !fused) {
        const int64_t R13s = w->s13.rows;
        st = upload(ctx, &d->s13, w->s13.codes, w->s13.layout.code_bytes, "uploading the shared W13");
        if (st == MOE_STATUS_OK) st = upload(ctx, &d->s2, w->s2.codes, w->s2.layout.code_bytes, "uploading the shared W2");
        if (st == MOE_STATUS_OK)
            st = upload(ctx, (void **)&d->sb13, w->sb13, (size_t)R13s * 4, "uploading the shared W13 bias");
        if (st == MOE_STATUS_OK) st = upload(ctx, (void **)&d->sb2, w->sb2, (size_t)H * 4, "uploading the shared W2 bias");
    }
    if (st == MOE_STATUS_OK && fp8) st = upload_fp8_scales(ctx, w, d);
    if (st != MOE_STATUS_OK) {
        release(d);
        return st;
    }
    w->device = d;
    return MOE_STATUS_OK;
}

extern "C" void moe__cuda_weights_free(moe_weights_t *w) {
    if (!w || !w->device) return;
    release((moe__cuda_weights *)w->device);
    w->device = NULL;
}
