/* Packed matrix stacks (moe__qmatrix): allocation, quantising a slot, and the fast row
 * decoder that the CPU forward calls for every weight row it touches. A paired stack (W13
 * of a gated activation: gate/up row pairs) has the 2-D blocks of FP8_BLOCK128 / NVFP4_2D
 * over each half; internal.h describes its scale layout, moe__qmatrix_scale_row encodes it.
 *
 * The row decoder must give exactly the floats moe_dequantize gives (formats.c decodes one
 * element at a time through the scalar codecs); it is faster by decoding with lookup tables
 * and hoisting each block's scale out of the inner loop. The tables are built at compile time
 * from the bit layouts (REFERENCE.md §1), so they need no initialisation and no lock. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Repeat F(code) for codes 0..255 (or 0..15) as an initializer list. */
#define REP4(F, b) F(b), F((b) + 1), F((b) + 2), F((b) + 3)
#define REP16(F, b) REP4(F, b), REP4(F, (b) + 4), REP4(F, (b) + 8), REP4(F, (b) + 12)
#define REP64(F, b) REP16(F, b), REP16(F, (b) + 16), REP16(F, (b) + 32), REP16(F, (b) + 48)
#define REP256(F) REP64(F, 0), REP64(F, 64), REP64(F, 128), REP64(F, 192)

#define SIGNED(c, mag) (((c) & 0x80) ? -(mag) : (mag))

/* e4m3fn: bias 7; exponent 0 is m/8 * 2^-6; (1 + m/8) * 2^(e-7) = (8 + m) * 2^e / 1024;
 * S.1111.111 is NaN. */
#define E4M3_EXP(c) (((c) >> 3) & 15)
#define E4M3_MAG(c) \
    (E4M3_EXP(c) == 0 ? ((c) & 7) / 512.0 : (8 + ((c) & 7)) * (double)(1u << E4M3_EXP(c)) / 1024.0)
#define E4M3_VALUE(c) (((c) & 0x7F) == 0x7F ? (double)NAN : SIGNED(c, E4M3_MAG(c)))
static const float e4m3_values[256] = {REP256(E4M3_VALUE)};

/* e2m1 (low nibble): bias 1; exponent 0 is m * 0.5; else (1 + m/2) * 2^(e-1). Bit 3 = sign. */
#define E2M1_EXP(c) (((c) >> 1) & 3)
#define E2M1_MAG(c) (E2M1_EXP(c) == 0 ? ((c) & 1) * 0.5 : (2 + ((c) & 1)) * (double)(1u << E2M1_EXP(c)) / 4.0)
#define E2M1_VALUE(c) (((c) & 8) ? -E2M1_MAG(c) : E2M1_MAG(c))
static const float e2m1_values[16] = {REP16(E2M1_VALUE, 0)};

/* UE4M3: e4m3 with the sign bit ignored (as moe_ue4m3_to_float does). */
#define UE4M3_VALUE(c) (((c) & 0x7F) == 0x7F ? (double)NAN : E4M3_MAG((c) & 0x7F))
static const float ue4m3_values[256] = {REP256(UE4M3_VALUE)};

/* 2^(code - 127) built from its bits; 0xFF is NaN, code 0 is the subnormal 2^-127. */
static float e8m0_value(uint8_t code) {
    uint32_t bits = code == 0xFF ? 0x7FC00000u : code == 0 ? 0x00400000u : (uint32_t)code << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* IEEE half from its bits (moe_f16_to_float goes through ldexp; this is the fast path).
 * The 15 magnitude bits shifted into a float's place read as the half's value times 2^-112,
 * subnormals included, so one exact multiply rebiases; exponent 31 (inf, NaN) is set apart.
 * Written as selects on bits so that the row loop vectorises. */
static inline float f16_value(uint16_t h) {
    const uint32_t mag = (uint32_t)(h & 0x7FFFu) << 13;
    float f;
    memcpy(&f, &mag, sizeof f);
    f *= 0x1p112f;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    const uint32_t special = 0u - (uint32_t)((h & 0x7C00u) == 0x7C00u); /* all ones for inf/NaN */
    bits = (bits & ~special) | ((0x7F800000u | mag) & special); /* inf, or NaN with its payload */
    bits |= (uint32_t)(h & 0x8000u) << 16;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static int64_t scale_dtype_bytes(moe_dtype d) { return d == MOE_DTYPE_F32 ? 4 : 1; }

size_t moe__qmatrix_scale_bytes(const moe__qmatrix *m) {
    return (size_t)(m->layout.scale_rows * m->layout.scale_cols * scale_dtype_bytes(m->layout.scale_dtype));
}

/* Rows per block of the 2-D block formats; 0 for the others. */
static int64_t block_rows_2d(moe_format f) {
    return f == MOE_FORMAT_FP8_BLOCK128 ? 128 : f == MOE_FORMAT_NVFP4_2D ? 16 : 0;
}

int64_t moe__qmatrix_scale_row(const moe__qmatrix *m, int64_t row) {
    const int64_t br = block_rows_2d(m->format);
    if (br > 0) /* paired: half s = row % 2, its row row / 2, one scale row per (block row, half) */
        return m->paired_rows ? 2 * ((row / 2) / br) + row % 2 : row / br;
    switch (m->format) {
    case MOE_FORMAT_FP8_ROW128:
    case MOE_FORMAT_MXFP8_OCP:
    case MOE_FORMAT_MXFP8_TE:
    case MOE_FORMAT_MXFP4:
    case MOE_FORMAT_NVFP4: return row;
    default: return 0; /* FP8_TENSOR's one scale; plain formats have none */
    }
}

/* E4M3 codes times one scale per run of `block` columns (the last run may be short). */
static void decode_e4m3_row(const uint8_t *q, int64_t cols, int64_t block, const float *block_scales, float *out) {
    for (int64_t c0 = 0, b = 0; c0 < cols; c0 += block, b++) {
        const float s = block_scales[b];
        const int64_t c1 = c0 + block < cols ? c0 + block : cols;
        for (int64_t c = c0; c < c1; c++) out[c] = e4m3_values[q[c]] * s;
    }
}

/* Packed E2M1 codes (element 2i in the low nibble) times one scale per `block` columns;
 * block and cols are even. */
static void decode_e2m1_row(const uint8_t *q, int64_t cols, int64_t block, const float *block_scales, float *out) {
    for (int64_t c0 = 0, b = 0; c0 < cols; c0 += block, b++) {
        const float s = block_scales[b];
        const int64_t c1 = c0 + block < cols ? c0 + block : cols;
        for (int64_t c = c0; c < c1; c += 2) {
            const uint8_t byte = q[c / 2];
            out[c] = e2m1_values[byte & 15] * s;
            out[c + 1] = e2m1_values[byte >> 4] * s;
        }
    }
}

/* Block scales of one row decoded to fp32 (at most ceil(cols/16) of them) live in a small
 * buffer: on the stack for rows up to 64K columns, else on the heap. */
#define ROW_SCALES_STACK 4096

void moe__qmatrix_row(const moe__qmatrix *m, int64_t index, int64_t row, float *out) {
    const int64_t cols = m->cols;
    const uint8_t *codes = m->codes + (size_t)index * m->layout.code_bytes;
    const uint8_t *scales = (const uint8_t *)m->scales + (size_t)index * moe__qmatrix_scale_bytes(m);
    const int64_t scale_cols = m->layout.scale_cols;

    switch (m->format) {
    case MOE_FORMAT_F32: memcpy(out, (const float *)codes + row * cols, (size_t)cols * sizeof(float)); return;
    case MOE_FORMAT_F16: {
        const uint16_t *q = (const uint16_t *)codes + row * cols;
        for (int64_t c = 0; c < cols; c++) out[c] = f16_value(q[c]);
        return;
    }
    case MOE_FORMAT_BF16: {
        const uint16_t *q = (const uint16_t *)codes + row * cols;
        for (int64_t c = 0; c < cols; c++) {
            uint32_t bits = (uint32_t)q[c] << 16;
            memcpy(&out[c], &bits, sizeof bits);
        }
        return;
    }
    case MOE_FORMAT_FP8_TENSOR:
        decode_e4m3_row(codes + row * cols, cols, cols > 0 ? cols : 1, (const float *)scales, out);
        return;
    case MOE_FORMAT_FP8_ROW128:
    case MOE_FORMAT_FP8_BLOCK128:
        decode_e4m3_row(codes + row * cols, cols, 128,
                        (const float *)scales + moe__qmatrix_scale_row(m, row) * scale_cols, out);
        return;
    default: break;
    }

    /* The 1-byte-scale formats: decode the row's block scales to fp32 first. For NVFP4 that
     * is the block's combined scale s_b / S_enc, exactly as moe_dequantize forms it. */
    float stack_scales[ROW_SCALES_STACK];
    float *s = stack_scales;
    if (scale_cols > ROW_SCALES_STACK) {
        s = malloc((size_t)scale_cols * sizeof *s);
        if (!s) { /* cannot happen for any real row; fall back to NaNs rather than crash */
            for (int64_t c = 0; c < cols; c++) out[c] = NAN;
            return;
        }
    }
    switch (m->format) {
    case MOE_FORMAT_MXFP8_OCP:
    case MOE_FORMAT_MXFP8_TE:
    case MOE_FORMAT_MXFP4: {
        const uint8_t *srow = scales + moe__qmatrix_scale_row(m, row) * scale_cols;
        for (int64_t b = 0; b < scale_cols; b++) s[b] = e8m0_value(srow[b]);
        if (m->format == MOE_FORMAT_MXFP4) decode_e2m1_row(codes + row * cols / 2, cols, 32, s, out);
        else decode_e4m3_row(codes + row * cols, cols, 32, s, out);
        break;
    }
    case MOE_FORMAT_NVFP4:
    case MOE_FORMAT_NVFP4_2D: {
        const uint8_t *srow = scales + moe__qmatrix_scale_row(m, row) * scale_cols;
        const float s_enc = m->tensor_scales[index];
        for (int64_t b = 0; b < scale_cols; b++) s[b] = ue4m3_values[srow[b]] / s_enc;
        decode_e2m1_row(codes + row * cols / 2, cols, 16, s, out);
        break;
    }
    default:
        for (int64_t c = 0; c < cols; c++) out[c] = NAN;
        break;
    }
    if (s != stack_scales) free(s);
}

/* ---------------------------------------------------------------------------------------
 * Allocation and filling.
 * ------------------------------------------------------------------------------------- */

void moe__qmatrix_free(moe__qmatrix *m) {
    if (!m) return;
    free(m->codes);
    free(m->scales);
    free(m->tensor_scales);
    memset(m, 0, sizeof *m);
}

/* calloc of count * each bytes, at least 1 byte so that an empty array is still a valid
 * non-NULL pointer; false on overflow or failure. */
static bool alloc_array(int64_t count, int64_t each, void **out) {
    int64_t bytes;
    *out = NULL;
    if (!moe__mul64(count, each, &bytes) || (uint64_t)bytes > (uint64_t)SIZE_MAX) return false;
    *out = calloc(bytes > 0 ? (size_t)bytes : 1, 1);
    return *out != NULL;
}

/* The allocation behind both public forms; fn names the caller in messages. */
static moe_status qmatrix_alloc(const char *fn, moe__qmatrix *m, moe_format f, int64_t count, int64_t rows,
                                int64_t cols, bool paired) {
    if (!m) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: m is NULL", fn);
    memset(m, 0, sizeof *m);
    if (count < 0)
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT, "%s: count = %lld, expected >= 0", fn,
                          (long long)count);
    if (paired && (rows < 0 || rows % 2 != 0))
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT,
                          "%s: rows = %lld, expected an even count >= 0 (gate/up pairs)", fn, (long long)rows);
    moe_format_layout layout;
    moe_status st = moe_format_layout_get(f, rows, cols, &layout);
    if (st != MOE_STATUS_OK) return st; /* its message names rows, cols or the format */
    if (paired && block_rows_2d(f) > 0) { /* each half has its own block rows */
        moe_format_layout half;
        st = moe_format_layout_get(f, rows / 2, cols, &half);
        if (st != MOE_STATUS_OK) return st;
        layout.scale_rows = 2 * half.scale_rows;
    }

    int64_t code_bytes = (int64_t)layout.code_bytes, scale_elems, total;
    if (!moe__mul64(layout.scale_rows, layout.scale_cols, &scale_elems) ||
        !moe__mul64(scale_elems, scale_dtype_bytes(layout.scale_dtype), &scale_elems) ||
        !moe__mul64(count, code_bytes, &total) || !moe__mul64(count, scale_elems, &total) ||
        (uint64_t)code_bytes != layout.code_bytes)
        return moe__error(NULL, MOE_STATUS_OVERFLOW, "%s: %lld matrices of %lld x %lld in %s: size overflows", fn,
                          (long long)count, (long long)rows, (long long)cols, moe_format_name(f));

    m->format = f, m->count = count, m->rows = rows, m->cols = cols, m->layout = layout;
    m->paired_rows = paired;
    void *codes = NULL, *scales = NULL, *tensor_scales = NULL;
    bool ok = alloc_array(count, code_bytes, &codes) && alloc_array(count, scale_elems, &scales) &&
              (!layout.has_tensor_scale || alloc_array(count, (int64_t)sizeof(float), &tensor_scales));
    m->codes = codes, m->scales = scales, m->tensor_scales = tensor_scales;
    if (!ok) {
        moe__qmatrix_free(m);
        return moe__error(NULL, MOE_STATUS_OUT_OF_MEMORY,
                          "%s: out of host memory for %lld matrices of %lld x %lld in %s (%lld code bytes each)", fn,
                          (long long)count, (long long)rows, (long long)cols, moe_format_name(f),
                          (long long)code_bytes);
    }
    if (tensor_scales)
        for (int64_t i = 0; i < count; i++) m->tensor_scales[i] = 1.0f; /* valid before any set */
    return MOE_STATUS_OK;
}

moe_status moe__qmatrix_alloc(moe__qmatrix *m, moe_format f, int64_t count, int64_t rows, int64_t cols) {
    return qmatrix_alloc("moe__qmatrix_alloc", m, f, count, rows, cols, false);
}

moe_status moe__qmatrix_alloc_paired(moe__qmatrix *m, moe_format f, int64_t count, int64_t rows, int64_t cols) {
    return qmatrix_alloc("moe__qmatrix_alloc_paired", m, f, count, rows, cols, true);
}

moe_status moe__qmatrix_set(moe__qmatrix *m, int64_t index, const float *x) {
    static const char fn[] = "moe__qmatrix_set";
    if (!m) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: m is NULL", fn);
    if (!x) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: x is NULL", fn);
    if (!m->codes || !m->scales)
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT, "%s: m is not allocated (use moe__qmatrix_alloc)", fn);
    if (index < 0 || index >= m->count)
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT, "%s: index = %lld, expected 0..%lld", fn,
                          (long long)index, (long long)m->count - 1);
    uint8_t *codes = m->codes + (size_t)index * m->layout.code_bytes;
    uint8_t *scales = (uint8_t *)m->scales + (size_t)index * moe__qmatrix_scale_bytes(m);
    float *tensor_scale = m->tensor_scales ? &m->tensor_scales[index] : NULL;
    if (!m->paired_rows || block_rows_2d(m->format) == 0)
        return moe_quantize(m->format, x, m->rows, m->cols, m->cols, codes, scales, tensor_scale);

    /* Paired 2-D blocks: half s is the rows s, s+2, s+4, ... of x (row stride 2 * cols), and
     * goes to the code rows of the same parity and the scale rows of parity s. NVFP4_2D's
     * S_enc comes from the whole matrix, so that both halves share it. moe_quantize checked
     * the same sizes when the layout was made (alloc), so the sizes are known good here. */
    const int64_t half_rows = m->rows / 2, cols = m->cols, scale_cols = m->layout.scale_cols;
    const size_t code_row_bytes = m->format == MOE_FORMAT_NVFP4_2D ? (size_t)cols / 2 : (size_t)cols;
    const size_t scale_row_bytes = (size_t)scale_cols * (size_t)scale_dtype_bytes(m->layout.scale_dtype);
    float s_enc = 1.0f;
    if (tensor_scale) *tensor_scale = s_enc = moe__nvfp4_tensor_scale(x, m->rows, cols, cols);
    for (int64_t s = 0; s < 2; s++)
        moe__quantize_blocks(m->format, x + s * cols, half_rows, cols, 2 * cols, s_enc, codes + s * code_row_bytes,
                             2 * cols, scales + s * scale_row_bytes, 2 * scale_cols);
    return MOE_STATUS_OK;
}
