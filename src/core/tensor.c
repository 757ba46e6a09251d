/* Tensor descriptors, dtype facts, size arithmetic and argument checks. */
#include "internal.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    int bits;
} dtype_facts[MOE_DTYPE_COUNT_] = {
    [MOE_DTYPE_F32] = {"f32", 32},   [MOE_DTYPE_F16] = {"f16", 16},    [MOE_DTYPE_BF16] = {"bf16", 16},
    [MOE_DTYPE_F64] = {"f64", 64},   [MOE_DTYPE_E4M3] = {"e4m3", 8},   [MOE_DTYPE_E5M2] = {"e5m2", 8},
    [MOE_DTYPE_E2M1] = {"e2m1", 4},  [MOE_DTYPE_E8M0] = {"e8m0", 8},   [MOE_DTYPE_UE4M3] = {"ue4m3", 8},
    [MOE_DTYPE_I32] = {"i32", 32},   [MOE_DTYPE_I64] = {"i64", 64},    [MOE_DTYPE_U8] = {"u8", 8},
};

const char *moe_dtype_name(moe_dtype dtype) {
    return (unsigned)dtype < MOE_DTYPE_COUNT_ ? dtype_facts[dtype].name : "unknown";
}

int moe_dtype_bits(moe_dtype dtype) { return (unsigned)dtype < MOE_DTYPE_COUNT_ ? dtype_facts[dtype].bits : 0; }

bool moe__mul64(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0) return false;
    if (a != 0 && b > INT64_MAX / a) return false;
    *out = a * b;
    return true;
}

bool moe__add64(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || a > INT64_MAX - b) return false;
    *out = a + b;
    return true;
}

int64_t moe__dtype_bytes(moe_dtype dtype, int64_t n) {
    int bits = moe_dtype_bits(dtype);
    int64_t total;
    if (bits == 0 || !moe__mul64(n, bits, &total) || total > INT64_MAX - 7) return -1;
    return (total + 7) / 8;
}

static moe_tensor make(void *data, moe_dtype dtype, int32_t ndim, const int64_t *shape) {
    moe_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.ndim = ndim;
    for (int32_t i = 0; i < ndim; i++) t.shape[i] = shape[i];
    t.memory = MOE_MEMORY_HOST;
    return t;
}

moe_tensor moe_tensor_1d(void *data, moe_dtype dtype, int64_t n0) { return make(data, dtype, 1, &n0); }

moe_tensor moe_tensor_2d(void *data, moe_dtype dtype, int64_t n0, int64_t n1) {
    int64_t s[2] = {n0, n1};
    return make(data, dtype, 2, s);
}

moe_tensor moe_tensor_3d(void *data, moe_dtype dtype, int64_t n0, int64_t n1, int64_t n2) {
    int64_t s[3] = {n0, n1, n2};
    return make(data, dtype, 3, s);
}

moe_tensor moe_tensor_none(void) {
    moe_tensor t;
    memset(&t, 0, sizeof t);
    return t;
}

int moe_tensor_present(const moe_tensor *t) { return t && (t->data != NULL || t->ndim > 0); }

int64_t moe__stride(const moe_tensor *t, int32_t i) {
    bool contiguous = true;
    for (int32_t d = 0; d < t->ndim; d++)
        if (t->strides[d] != 0) contiguous = false;
    if (!contiguous) return t->strides[i];
    int64_t s = 1;
    for (int32_t d = t->ndim - 1; d > i; d--) s *= t->shape[d];
    return s;
}

moe_status moe__check_tensor(moe_context_t *ctx, const moe_tensor *t, const char *name, int32_t ndim,
                             const int64_t *dims, uint32_t dtype_mask) {
    if (!t || !moe_tensor_present(t)) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: tensor is absent", name);
    if ((unsigned)t->dtype >= MOE_DTYPE_COUNT_)
        return moe__error(ctx, MOE_STATUS_DTYPE_MISMATCH, "%s: dtype %d is not a moe_dtype", name, (int)t->dtype);
    if (!(dtype_mask & MOE__DT(t->dtype))) {
        char want[256] = "";
        for (int d = 0; d < MOE_DTYPE_COUNT_; d++)
            if (dtype_mask & MOE__DT(d)) {
                if (want[0]) strncat(want, "/", sizeof want - strlen(want) - 1);
                strncat(want, moe_dtype_name((moe_dtype)d), sizeof want - strlen(want) - 1);
            }
        return moe__error(ctx, MOE_STATUS_DTYPE_MISMATCH, "%s: dtype %s, expected %s", name, moe_dtype_name(t->dtype),
                          want);
    }
    if (t->memory != MOE_MEMORY_HOST && t->memory != MOE_MEMORY_DEVICE)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: memory %d is neither HOST (0) nor DEVICE (1)", name,
                          (int)t->memory);
    if (t->ndim != ndim)
        return moe__error(ctx, MOE_STATUS_SHAPE_MISMATCH, "%s: %d dimensions, expected %d", name, (int)t->ndim,
                          (int)ndim);
    int64_t elems = 1;
    for (int32_t i = 0; i < ndim; i++) {
        if (t->shape[i] < 0)
            return moe__error(ctx, MOE_STATUS_SHAPE_MISMATCH, "%s: shape[%d] = %lld is negative", name, (int)i,
                              (long long)t->shape[i]);
        if (dims && dims[i] >= 0 && t->shape[i] != dims[i])
            return moe__error(ctx, MOE_STATUS_SHAPE_MISMATCH, "%s: shape[%d] = %lld, expected %lld", name, (int)i,
                              (long long)t->shape[i], (long long)dims[i]);
        if (!moe__mul64(elems, t->shape[i], &elems))
            return moe__error(ctx, MOE_STATUS_OVERFLOW, "%s: element count overflows int64", name);
    }
    if (elems > 0 && !t->data) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: data is NULL", name);
    bool contiguous = true;
    for (int32_t d = 0; d < ndim; d++)
        if (t->strides[d] != 0) contiguous = false;
    if (!contiguous) {
        if (t->dtype == MOE_DTYPE_E2M1)
            return moe__error(ctx, MOE_STATUS_SHAPE_MISMATCH, "%s: e2m1 tensors must be contiguous (strides all 0)",
                              name);
        for (int32_t d = 0; d < ndim; d++)
            if (t->strides[d] < 1)
                return moe__error(ctx, MOE_STATUS_SHAPE_MISMATCH, "%s: strides[%d] = %lld, expected >= 1", name,
                                  (int)d, (long long)t->strides[d]);
        /* No two elements may share an address: sort dims by stride and require each stride to
         * cover the extent of the smaller ones. */
        int32_t order[MOE_MAX_DIMS];
        for (int32_t d = 0; d < ndim; d++) order[d] = d;
        for (int32_t a = 0; a < ndim; a++)
            for (int32_t b = a + 1; b < ndim; b++)
                if (t->strides[order[b]] < t->strides[order[a]]) {
                    int32_t tmp = order[a];
                    order[a] = order[b];
                    order[b] = tmp;
                }
        int64_t extent = 1;
        for (int32_t j = 0; j < ndim; j++) {
            int32_t d = order[j];
            if (t->shape[d] <= 1) continue;
            if (t->strides[d] < extent)
                return moe__error(ctx, MOE_STATUS_SHAPE_MISMATCH,
                                  "%s: strides[%d] = %lld makes elements overlap (needs >= %lld)", name, (int)d,
                                  (long long)t->strides[d], (long long)extent);
            int64_t span;
            if (!moe__mul64(t->strides[d], t->shape[d], &span))
                return moe__error(ctx, MOE_STATUS_OVERFLOW, "%s: strided extent overflows int64", name);
            extent = span;
        }
    }
    return MOE_STATUS_OK;
}

static int64_t offset_of(const moe_tensor *t, const int64_t *index) {
    int64_t off = 0;
    for (int32_t d = 0; d < t->ndim; d++) off += index[d] * moe__stride(t, d);
    return off;
}

float moe__tensor_get(const moe_tensor *t, const int64_t *index) {
    int64_t off = offset_of(t, index);
    switch (t->dtype) {
    case MOE_DTYPE_F32: return ((const float *)t->data)[off];
    case MOE_DTYPE_F64: return (float)((const double *)t->data)[off];
    case MOE_DTYPE_F16: return moe_f16_to_float(((const uint16_t *)t->data)[off]);
    case MOE_DTYPE_BF16: return moe_bf16_to_float(((const uint16_t *)t->data)[off]);
    case MOE_DTYPE_E4M3: return moe_e4m3_to_float(((const uint8_t *)t->data)[off]);
    case MOE_DTYPE_E5M2: return moe_e5m2_to_float(((const uint8_t *)t->data)[off]);
    default: return NAN;
    }
}

void moe__tensor_set(const moe_tensor *t, const int64_t *index, float v) {
    int64_t off = offset_of(t, index);
    switch (t->dtype) {
    case MOE_DTYPE_F32: ((float *)t->data)[off] = v; break;
    case MOE_DTYPE_F64: ((double *)t->data)[off] = v; break;
    case MOE_DTYPE_F16: ((uint16_t *)t->data)[off] = moe_float_to_f16(v); break;
    case MOE_DTYPE_BF16: ((uint16_t *)t->data)[off] = moe_float_to_bf16(v); break;
    default: break;
    }
}
