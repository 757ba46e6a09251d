/* Number formats: scalar codecs, format names and layouts, and the block quantisers.
 *
 * Scale semantics everywhere: x ≈ decode(q) * s. This file is the reference: plain loops,
 * one element at a time (NVFP4's elements, the bulk of packing a large model, are encoded by
 * comparison with per-scale thresholds that are searched out with the very same rounding
 * expression, so the codes do not change; see quantize_nvfp4). moe_dequantize decodes
 * element by element through the scalar codecs; the fast row decoder of the packed weights
 * (moe__qmatrix_row, qmatrix.c) must give the same floats bit for bit, and the tests hold it
 * to that.
 *
 * Rounding: every scaled element (x / s, x / 2^e, x * S_enc / s_b) is formed in double,
 * where it is exact or off by far less than a rounding boundary can be close to it, and then
 * rounded once, to nearest even, into the element format. So an element is the correctly
 * rounded code of the exact quotient (no double rounding through fp32).
 *
 * Non-finite inputs to the quantisers (moe_quantize's comment in the header says the same):
 *  - Block amaxes (and the NVFP4 tensor amax) are taken over the finite values only.
 *  - +-inf saturates to the largest element code (+-448 for e4m3, +-6 for e2m1).
 *  - NaN: e4m3 has a NaN code, so in the FP8 and MXFP8 formats a NaN element decodes to NaN
 *    and its block neighbours are unaffected. E2M1 has no NaN, so MXFP4 stores the NaN E8M0
 *    scale (0xFF) and NVFP4 the NaN UE4M3 scale (0x7F) for a block holding a NaN: the whole
 *    block then decodes to NaN (the OCP MX convention).
 *
 * Other choices (also stated at moe_quantize in the header): an all-zero block gets FP8
 * scale 1, E8M0 code 127 (2^0) in both MX rules, UE4M3 code 0 in NVFP4 (its elements are then
 * code 0); an empty FP8_TENSOR matrix gets scale 1; moe_quantize writes 1 to a non-NULL
 * tensor_scale for the formats without one; NVFP4's S_enc is clamped to FLT_MAX when
 * 2688 / amax overflows. */
#include "internal.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Minifloat rounding, shared by f16, e4m3, e5m2, e2m1 and ue4m3.
 * ------------------------------------------------------------------------------------- */

/* Rounds |ax| (finite, >= 0) to the nearest value of a format with `mbits` mantissa bits and
 * exponent bias `bias` (IEEE-style: biased exponent 0 holds the subnormals), ties to even.
 * Returns the magnitude code (biased exponent << mbits | mantissa). The code runs past the
 * format's largest finite one when |ax| overflows it: the caller saturates or makes it inf.
 * Works on the bits of the double, so it does not depend on the FPU rounding mode. */
static uint64_t round_to_minifloat(double ax, int mbits, int bias) {
    uint64_t bits;
    memcpy(&bits, &ax, sizeof bits);
    bits &= ~(UINT64_C(1) << 63);
    int biased = (int)(bits >> 52);
    uint64_t significand = bits & ((UINT64_C(1) << 52) - 1);
    int exponent;      /* 2^exponent <= |ax| < 2^(exponent + 1) */
    int unit_exponent; /* |ax| = significand * 2^unit_exponent */
    if (biased == 0) {
        if (significand == 0) return 0;
        exponent = -1075; /* a double subnormal is below every target's smallest subnormal */
        unit_exponent = -1074;
    } else {
        significand |= UINT64_C(1) << 52;
        exponent = biased - 1023;
        unit_exponent = exponent - 52;
    }
    /* Below the target's smallest normal binade the spacing stays that of the subnormals. */
    const int min_exponent = 1 - bias;
    int e = exponent < min_exponent ? min_exponent : exponent;
    /* The target's spacing at |ax| is 2^(e - mbits); drop that many low bits, rounding. */
    int shift = (e - mbits) - unit_exponent; /* >= 52 - mbits > 0 */
    if (shift > 54) return 0;                /* |ax| < 2^53 units < half the spacing */
    uint64_t q = significand >> shift;
    uint64_t rem = significand & ((UINT64_C(1) << shift) - 1);
    uint64_t half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    /* q is the magnitude in units of the spacing: < 2^mbits in the subnormal range, else in
     * [2^mbits, 2^(mbits+1)] with the implicit bit set. Adding it to (biased exponent - 1)
     * << mbits gives the code, and a carry out of the mantissa bumps the exponent, as it
     * should; for subnormals (e == min_exponent) the exponent field adds nothing. */
    return ((uint64_t)(e + bias - 1) << mbits) + q;
}

/* The magnitude of a code of such a format (no special values). */
static double minifloat_value(uint32_t mag, int mbits, int bias) {
    uint32_t biased = mag >> mbits, mant = mag & ((1u << mbits) - 1);
    if (biased == 0) return ldexp((double)mant, 1 - bias - mbits);
    return ldexp((double)((1u << mbits) | mant), (int)biased - bias - mbits);
}

#define E4M3_MAX_CODE 0x7Eu /* 448 */
#define E5M2_MAX_CODE 0x7Bu /* 57344 */
#define E2M1_MAX_CODE 0x7u  /* 6 */
#define F16_MAX_CODE 0x7BFFu

static uint8_t encode_e4m3(double x) {
    uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x)) return sign | 0x7F;
    if (isinf(x)) return sign | E4M3_MAX_CODE;
    uint64_t mag = round_to_minifloat(fabs(x), 3, 7);
    return sign | (uint8_t)(mag > E4M3_MAX_CODE ? E4M3_MAX_CODE : mag);
}

static uint8_t encode_e5m2(double x) {
    uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x)) return sign | 0x7E; /* exponent 31, quiet-bit mantissa */
    if (isinf(x)) return sign | E5M2_MAX_CODE;
    uint64_t mag = round_to_minifloat(fabs(x), 2, 15);
    return sign | (uint8_t)(mag > E5M2_MAX_CODE ? E5M2_MAX_CODE : mag);
}

static uint8_t encode_e2m1(double x) {
    if (isnan(x)) return E2M1_MAX_CODE; /* no NaN in E2M1: +6, as the header says */
    uint8_t sign = signbit(x) ? 0x8 : 0;
    if (isinf(x)) return sign | E2M1_MAX_CODE;
    uint64_t mag = round_to_minifloat(fabs(x), 1, 1);
    return sign | (uint8_t)(mag > E2M1_MAX_CODE ? E2M1_MAX_CODE : mag);
}

static uint8_t encode_ue4m3(double x) {
    if (isnan(x)) return 0x7F;
    if (isinf(x)) return E4M3_MAX_CODE;
    uint64_t mag = round_to_minifloat(fabs(x), 3, 7);
    return (uint8_t)(mag > E4M3_MAX_CODE ? E4M3_MAX_CODE : mag);
}

/* ---------------------------------------------------------------------------------------
 * Scalar codecs (public).
 * ------------------------------------------------------------------------------------- */

float moe_bf16_to_float(uint16_t v) {
    uint32_t bits = (uint32_t)v << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t moe_float_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    /* NaN: keep sign and top payload bits, set the quiet bit so it cannot become inf. */
    if (isnan(f)) return (uint16_t)((bits >> 16) | 0x0040);
    /* RNE on the 16 dropped bits: add 0x7FFF plus the lowest kept bit. A carry out of the
     * mantissa bumps the exponent; past the largest finite bf16 it gives inf, as IEEE does. */
    bits += 0x7FFFu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

float moe_f16_to_float(uint16_t v) {
    float sign = (v & 0x8000) ? -1.0f : 1.0f;
    uint32_t biased = (v >> 10) & 0x1F, mant = v & 0x3FF;
    if (biased == 31) return mant ? copysignf(NAN, sign) : sign * INFINITY;
    return sign * (float)minifloat_value(v & 0x7FFF, 10, 15);
}

uint16_t moe_float_to_f16(float f) {
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isnan(f)) {
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        return sign | 0x7E00 | (uint16_t)((bits >> 13) & 0x3FF);
    }
    if (isinf(f)) return sign | 0x7C00;
    uint64_t mag = round_to_minifloat(fabs((double)f), 10, 15);
    return sign | (uint16_t)(mag > F16_MAX_CODE ? 0x7C00 : mag); /* overflow: inf */
}

float moe_e4m3_to_float(uint8_t code) {
    if ((code & 0x7F) == 0x7F) return (code & 0x80) ? -NAN : NAN;
    float mag = (float)minifloat_value(code & 0x7F, 3, 7);
    return (code & 0x80) ? -mag : mag;
}

uint8_t moe_float_to_e4m3(float f) { return encode_e4m3(f); }

float moe_e5m2_to_float(uint8_t code) {
    float sign = (code & 0x80) ? -1.0f : 1.0f;
    uint32_t biased = (code >> 2) & 0x1F;
    if (biased == 31) return (code & 3) ? copysignf(NAN, sign) : sign * INFINITY;
    return sign * (float)minifloat_value(code & 0x7F, 2, 15);
}

uint8_t moe_float_to_e5m2(float f) { return encode_e5m2(f); }

float moe_e2m1_to_float(uint8_t code) {
    float mag = (float)minifloat_value(code & 0x7, 1, 1);
    return (code & 0x8) ? -mag : mag;
}

uint8_t moe_float_to_e2m1(float f) { return encode_e2m1(f); }

float moe_e8m0_to_float(uint8_t code) {
    if (code == 0xFF) return NAN;
    return ldexpf(1.0f, (int)code - 127); /* code 0 is 2^-127, a float subnormal: exact */
}

/* UE4M3 is unsigned: bit 7 is not part of the value and is ignored when decoding. */
float moe_ue4m3_to_float(uint8_t code) { return moe_e4m3_to_float(code & 0x7F); }

uint8_t moe_float_to_ue4m3(float f) { return encode_ue4m3(f); }

/* ---------------------------------------------------------------------------------------
 * Format names.
 * ------------------------------------------------------------------------------------- */

static const char *const format_names[MOE_FORMAT_COUNT_] = {
    [MOE_FORMAT_F32] = "f32",
    [MOE_FORMAT_F16] = "f16",
    [MOE_FORMAT_BF16] = "bf16",
    [MOE_FORMAT_FP8_TENSOR] = "fp8-tensor",
    [MOE_FORMAT_FP8_ROW128] = "fp8-row128",
    [MOE_FORMAT_FP8_BLOCK128] = "fp8-block128",
    [MOE_FORMAT_MXFP8_OCP] = "mxfp8-ocp",
    [MOE_FORMAT_MXFP8_TE] = "mxfp8-te",
    [MOE_FORMAT_MXFP4] = "mxfp4",
    [MOE_FORMAT_NVFP4] = "nvfp4",
    [MOE_FORMAT_NVFP4_2D] = "nvfp4-2d",
};

const char *moe_format_name(moe_format format) {
    if ((int)format < 0 || format >= MOE_FORMAT_COUNT_) return "unknown";
    return format_names[format];
}

moe_status moe_format_from_name(const char *name, moe_format *out) {
    moe__clear_error(NULL);
    if (!name) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "moe_format_from_name: name is NULL");
    if (!out) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "moe_format_from_name: out is NULL");
    for (int f = 0; f < MOE_FORMAT_COUNT_; f++) {
        if (strcmp(name, format_names[f]) == 0) {
            *out = (moe_format)f;
            return MOE_STATUS_OK;
        }
    }
    if (strcmp(name, "fp8") == 0) {
        *out = MOE_FORMAT_FP8_BLOCK128;
        return MOE_STATUS_OK;
    }
    if (strcmp(name, "mxfp8") == 0) {
        *out = MOE_FORMAT_MXFP8_TE;
        return MOE_STATUS_OK;
    }
    char valid[512] = "";
    for (int f = 0; f < MOE_FORMAT_COUNT_; f++) {
        strcat(valid, format_names[f]);
        strcat(valid, ", ");
    }
    return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT,
                      "moe_format_from_name: name \"%.64s\" is not a format; expected one of %sfp8 "
                      "(= fp8-block128), mxfp8 (= mxfp8-te)",
                      name, valid);
}

/* ---------------------------------------------------------------------------------------
 * Layouts.
 * ------------------------------------------------------------------------------------- */

static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static bool is_e2m1_format(moe_format f) {
    return f == MOE_FORMAT_MXFP4 || f == MOE_FORMAT_NVFP4 || f == MOE_FORMAT_NVFP4_2D;
}

static bool is_plain_format(moe_format f) {
    return f == MOE_FORMAT_F32 || f == MOE_FORMAT_F16 || f == MOE_FORMAT_BF16;
}

/* The layout, with messages prefixed by the public function `fn` that asked. */
static moe_status layout_for(const char *fn, moe_format format, int64_t rows, int64_t cols,
                             moe_format_layout *out) {
    if ((int)format < 0 || format >= MOE_FORMAT_COUNT_)
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT, "%s: format %d is not a moe_format (0..%d)", fn,
                          (int)format, MOE_FORMAT_COUNT_ - 1);
    if (rows < 0)
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT, "%s: rows = %lld, expected >= 0", fn, (long long)rows);
    if (cols < 0)
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT, "%s: cols = %lld, expected >= 0", fn, (long long)cols);
    if (is_e2m1_format(format) && cols % 2 != 0)
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT,
                          "%s: cols = %lld is odd, expected an even number for %s (two e2m1 codes per byte)", fn,
                          (long long)cols, moe_format_name(format));
    int64_t elements;
    if (!moe__mul64(rows, cols, &elements))
        return moe__error(NULL, MOE_STATUS_OVERFLOW, "%s: rows * cols = %lld * %lld overflows int64", fn,
                          (long long)rows, (long long)cols);
    moe_format_layout l = {0, 0, 0, MOE_DTYPE_F32, 0};
    int64_t code_bits = 8; /* per element */
    switch (format) {
    case MOE_FORMAT_F32: code_bits = 32; break;
    case MOE_FORMAT_F16:
    case MOE_FORMAT_BF16: code_bits = 16; break;
    case MOE_FORMAT_FP8_TENSOR: l.scale_rows = 1, l.scale_cols = 1; break;
    case MOE_FORMAT_FP8_ROW128: l.scale_rows = rows, l.scale_cols = ceil_div(cols, 128); break;
    case MOE_FORMAT_FP8_BLOCK128: l.scale_rows = ceil_div(rows, 128), l.scale_cols = ceil_div(cols, 128); break;
    case MOE_FORMAT_MXFP8_OCP:
    case MOE_FORMAT_MXFP8_TE:
        l.scale_rows = rows, l.scale_cols = ceil_div(cols, 32), l.scale_dtype = MOE_DTYPE_E8M0;
        break;
    case MOE_FORMAT_MXFP4:
        code_bits = 4, l.scale_rows = rows, l.scale_cols = ceil_div(cols, 32), l.scale_dtype = MOE_DTYPE_E8M0;
        break;
    case MOE_FORMAT_NVFP4:
        code_bits = 4, l.scale_rows = rows, l.scale_cols = ceil_div(cols, 16), l.scale_dtype = MOE_DTYPE_UE4M3;
        l.has_tensor_scale = 1;
        break;
    case MOE_FORMAT_NVFP4_2D:
        code_bits = 4, l.scale_rows = ceil_div(rows, 16), l.scale_cols = ceil_div(cols, 16);
        l.scale_dtype = MOE_DTYPE_UE4M3, l.has_tensor_scale = 1;
        break;
    default: break;
    }
    int64_t bits;
    if (!moe__mul64(elements, code_bits, &bits) || (uint64_t)(bits / 8) > (uint64_t)SIZE_MAX)
        return moe__error(NULL, MOE_STATUS_OVERFLOW, "%s: %lld x %lld matrix of %s: code bytes overflow", fn,
                          (long long)rows, (long long)cols, moe_format_name(format));
    l.code_bytes = (size_t)(bits / 8); /* e2m1 cols are even, so this is exact */
    *out = l;
    return MOE_STATUS_OK;
}

moe_status moe_format_layout_get(moe_format format, int64_t rows, int64_t cols, moe_format_layout *out) {
    moe__clear_error(NULL);
    if (!out) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "moe_format_layout_get: out is NULL");
    return layout_for("moe_format_layout_get", format, rows, cols, out);
}

/* ---------------------------------------------------------------------------------------
 * Quantisers. Codes are dense row-major [rows, cols] (no row stride); x has stride ld.
 * ------------------------------------------------------------------------------------- */

static uint32_t float_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static float float_from_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

#define FLOAT_INF_BITS 0x7F800000u /* |x| bits above it are NaN, below it finite */

/* Largest |x| over the finite values of rows [r0, r1) x cols [c0, c1); sets *has_nan and
 * *has_inf (either may be NULL). Works on the bits of |x|, which order as the values do, so
 * that the loop has no branches and vectorises (every quantiser reads each element here once
 * more). */
static float finite_amax(const float *x, int64_t ld, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                         bool *has_nan, bool *has_inf) {
    int32_t amax = 0, nan = 0, inf = 0; /* signed: the bits of |x| are below 2^31, and SSE2 compares signed */
    for (int64_t r = r0; r < r1; r++) {
        const float *row = x + r * ld;
        for (int64_t c = c0; c < c1; c++) {
            const int32_t a = (int32_t)(float_bits(row[c]) & 0x7FFFFFFFu);
            nan |= a > (int32_t)FLOAT_INF_BITS;
            inf |= a == (int32_t)FLOAT_INF_BITS;
            const int32_t finite = a < (int32_t)FLOAT_INF_BITS ? a : 0;
            amax = finite > amax ? finite : amax;
        }
    }
    if (has_nan) *has_nan = nan != 0;
    if (has_inf) *has_inf = inf != 0;
    return float_from_bits((uint32_t)amax);
}

/* FP8 with fp32 scales over blocks of br x bc elements: s = amax / 448, or 1 when that is 0
 * (an all-zero block, or an amax so small the quotient underflows). Code row r starts at
 * codes + r * code_ld, scale row b at scales + b * scale_ld (dense: cols, ceil(cols / bc)). */
static void quantize_fp8_blocks(const float *x, int64_t rows, int64_t cols, int64_t ld, int64_t br, int64_t bc,
                                uint8_t *codes, int64_t code_ld, float *scales, int64_t scale_ld) {
    for (int64_t r0 = 0; r0 < rows; r0 += br) {
        for (int64_t c0 = 0; c0 < cols; c0 += bc) {
            int64_t r1 = min64(r0 + br, rows), c1 = min64(c0 + bc, cols);
            float s = finite_amax(x, ld, r0, r1, c0, c1, NULL, NULL) / 448.0f;
            if (!(s > 0.0f)) s = 1.0f;
            scales[(r0 / br) * scale_ld + c0 / bc] = s;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++) codes[r * code_ld + c] = encode_e4m3((double)x[r * ld + c] / s);
        }
    }
}

/* The E8M0 scale code of an MX block. All-zero (or all non-finite) blocks get 127 (2^0):
 * any scale decodes zeros to zeros, and 1 is the neutral one. */
static uint8_t mx_scale_code(float amax, int elem_emax, bool te_rule) {
    if (!(amax > 0.0f)) return 127;
    if (te_rule) {
        /* Transformer Engine: the biased exponent of amax / 448, plus one when its mantissa is
         * non-zero, so 2^(code-127) >= amax / 448 and nothing clips. A subnormal quotient
         * <= 2^-127 (bits <= 0x00400000) keeps code 0, 2^-127, already >= it: the round-up to
         * E8M0 that TE's float_to_e8m0 and cvt.rp.satfinite.ue8m0 give. */
        float v = amax / 448.0f;
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        uint32_t code = (bits >> 23) & 0xFF;
        if ((bits & 0x7FFFFF) && bits > 0x00400000u) code++;
        return (uint8_t)code; /* amax / 448 < 2^119, so code <= 246 */
    }
    /* OCP MX v1.0: shared_exp = floor(log2(amax)) - emax of the element format. */
    int exponent;
    frexpf(amax, &exponent); /* amax = m * 2^exponent, m in [0.5, 1) */
    int shared_exp = (exponent - 1) - elem_emax;
    int code = shared_exp + 127;
    return (uint8_t)(code < 0 ? 0 : code > 254 ? 254 : code);
}

/* MXFP8 (e4m3 elements) and MXFP4 (e2m1 elements): 1x32 blocks along each row. */
static void quantize_mx(moe_format format, const float *x, int64_t rows, int64_t cols, int64_t ld, uint8_t *codes,
                        uint8_t *scales) {
    const bool fp4 = format == MOE_FORMAT_MXFP4;
    const int64_t scale_cols = ceil_div(cols, 32);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c0 = 0; c0 < cols; c0 += 32) {
            int64_t c1 = min64(c0 + 32, cols);
            bool has_nan;
            float amax = finite_amax(x, ld, r, r + 1, c0, c1, &has_nan, NULL);
            uint8_t code = mx_scale_code(amax, fp4 ? 2 : 8, format == MOE_FORMAT_MXFP8_TE);
            int shift = 127 - (int)code; /* element = x / 2^(code - 127), exact in double */
            for (int64_t c = c0; c < c1; c++) {
                double y = ldexp((double)x[r * ld + c], shift);
                if (!fp4) {
                    codes[r * cols + c] = encode_e4m3(y);
                } else {
                    uint8_t *byte = &codes[(r * cols + c) / 2];
                    uint8_t nibble = encode_e2m1(y);
                    /* element 2i in the low nibble; c0 and cols are even, so pairs align */
                    *byte = (c % 2 == 0) ? nibble : (uint8_t)((*byte & 0x0F) | (nibble << 4));
                }
            }
            /* E2M1 cannot hold NaN: mark the block with the NaN scale instead. */
            scales[r * scale_cols + c0 / 32] = (fp4 && has_nan) ? 0xFF : code;
        }
    }
}

/* NVFP4's elements without a division per element. The magnitude code of x is
 * encode_e2m1(|x| * S_enc / s_b), a non-decreasing function of |x|, and so of the bits of |x|
 * (they order as the values do). So for each block scale s_b it is the number of thresholds
 * t_1..t_7 that bits(|x|) reaches, t_m being the smallest bits whose code is >= m. The
 * thresholds are found by searching with that very expression, so the codes are the
 * reference's bit for bit; a matrix has one S_enc and at most 126 non-zero block scales, so
 * each scale's thresholds are searched once per matrix, when first needed. */
typedef struct nvfp4_thresholds {
    float s_enc;
    bool known[128];         /* by UE4M3 scale code */
    uint32_t bits[128][7];   /* t_1..t_7 for that scale */
} nvfp4_thresholds;

static uint8_t nvfp4_magnitude(uint32_t abs_bits, float s_enc, float s_b) {
    return encode_e2m1((double)float_from_bits(abs_bits) * s_enc / s_b) & 7u;
}

/* The smallest bits in [0, inf] whose magnitude code is >= m (inf's code is 7 >= m). */
static uint32_t nvfp4_threshold(int m, float s_enc, float s_b) {
    uint32_t lo = 0, hi = FLOAT_INF_BITS; /* code(hi) >= m; the answer is in [lo, hi] */
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (nvfp4_magnitude(mid, s_enc, s_b) >= m) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

static const uint32_t *nvfp4_thresholds_for(nvfp4_thresholds *t, uint8_t scale_code) {
    if (!t->known[scale_code]) {
        const float s_b = moe_ue4m3_to_float(scale_code);
        for (int m = 1; m <= 7; m++) t->bits[scale_code][m - 1] = nvfp4_threshold(m, t->s_enc, s_b);
        t->known[scale_code] = true;
    }
    return t->bits[scale_code];
}

/* The e2m1 code of x for the thresholds of its block: the magnitude counts the thresholds
 * that bits(|x|) reaches; a NaN (above every threshold) gets 7 without a sign, as
 * encode_e2m1 gives it, and every other value keeps its sign. */
static inline uint8_t nvfp4_code(float x, const uint32_t *t) {
    const uint32_t bits = float_bits(x), a = bits & 0x7FFFFFFFu;
    const uint32_t mag = (a >= t[0]) + (a >= t[1]) + (a >= t[2]) + (a >= t[3]) + (a >= t[4]) + (a >= t[5]) +
                         (a >= t[6]);
    const uint32_t sign = a <= FLOAT_INF_BITS ? (bits >> 28) & 8u : 0;
    return (uint8_t)(sign | mag);
}

/* NVFP4's tensor scale S_enc = 448*6 / amax of a matrix (1 if amax = 0). */
static float nvfp4_tensor_scale(const float *x, int64_t rows, int64_t cols, int64_t ld) {
    float g = finite_amax(x, ld, 0, rows, 0, cols, NULL, NULL);
    float s_enc = g > 0.0f ? (448.0f * 6.0f) / g : 1.0f;
    return isinf(s_enc) ? FLT_MAX : s_enc; /* amax below ~8e-36: keep the scale finite */
}

/* NVFP4 with tensor scale s_enc: UE4M3 block scales over br x 16 blocks (br = 1 for NVFP4,
 * 16 for NVFP4_2D). Code row r starts at byte r * code_ld / 2 (code_ld even), scale row b
 * at scales + b * scale_ld (dense: cols, ceil(cols / 16)). */
static void quantize_nvfp4(const float *x, int64_t rows, int64_t cols, int64_t ld, int64_t br, float s_enc,
                           uint8_t *codes, int64_t code_ld, uint8_t *scales, int64_t scale_ld) {
    nvfp4_thresholds thresholds; /* 4 KB */
    thresholds.s_enc = s_enc;
    memset(thresholds.known, 0, sizeof thresholds.known);
    for (int64_t r0 = 0; r0 < rows; r0 += br) {
        for (int64_t c0 = 0; c0 < cols; c0 += 16) {
            int64_t r1 = min64(r0 + br, rows), c1 = min64(c0 + 16, cols);
            bool has_nan, has_inf;
            float block_amax = finite_amax(x, ld, r0, r1, c0, c1, &has_nan, &has_inf);
            uint8_t scale_code = encode_ue4m3((double)block_amax * s_enc / 6.0);
            /* An infinity saturates to +-6 s_b. In a block whose finite values give a zero scale
             * (none, or tiny next to the tensor's amax) it would vanish with its sign: the block
             * takes the largest scale instead, so it reads as +-the tensor's largest finite
             * magnitude (the block's finite values are below one step of either scale). */
            if (scale_code == 0 && has_inf) scale_code = E4M3_MAX_CODE;
            scales[(r0 / br) * scale_ld + c0 / 16] = has_nan ? 0x7F : scale_code;
            for (int64_t r = r0; r < r1; r++) {
                uint8_t *qr = codes + r * code_ld / 2;
                if (scale_code == 0) { /* a zero block scale (zero block, or tiny next to the tensor's amax) */
                    memset(qr + c0 / 2, 0, (size_t)(c1 - c0) / 2);
                    continue;
                }
                const uint32_t *t = nvfp4_thresholds_for(&thresholds, scale_code);
                const float *xr = x + r * ld;
                uint8_t nibbles[16];
                for (int64_t c = c0; c < c1; c++) nibbles[c - c0] = nvfp4_code(xr[c], t);
                for (int64_t c = c0; c < c1; c += 2)
                    qr[c / 2] = (uint8_t)(nibbles[c - c0] | (nibbles[c - c0 + 1] << 4));
            }
        }
    }
}

float moe__nvfp4_tensor_scale(const float *x, int64_t rows, int64_t cols, int64_t ld) {
    return nvfp4_tensor_scale(x, rows, cols, ld);
}

void moe__quantize_blocks(moe_format format, const float *x, int64_t rows, int64_t cols, int64_t ld,
                          float tensor_scale, void *codes, int64_t code_ld, void *scales, int64_t scale_ld) {
    switch (format) {
    case MOE_FORMAT_FP8_ROW128: quantize_fp8_blocks(x, rows, cols, ld, 1, 128, codes, code_ld, scales, scale_ld); break;
    case MOE_FORMAT_FP8_BLOCK128:
        quantize_fp8_blocks(x, rows, cols, ld, 128, 128, codes, code_ld, scales, scale_ld);
        break;
    case MOE_FORMAT_NVFP4: quantize_nvfp4(x, rows, cols, ld, 1, tensor_scale, codes, code_ld, scales, scale_ld); break;
    case MOE_FORMAT_NVFP4_2D:
        quantize_nvfp4(x, rows, cols, ld, 16, tensor_scale, codes, code_ld, scales, scale_ld);
        break;
    default: break; /* not a format with blocks of this kind: the caller checked */
    }
}

/* Checks the arguments shared by moe_quantize and moe_dequantize: format, sizes, ld, and
 * that the strided fp32 matrix's extent (rows - 1) * ld + cols fits. */
static moe_status check_matrix_args(const char *fn, moe_format format, int64_t rows, int64_t cols, int64_t ld,
                                    moe_format_layout *layout) {
    moe_status st = layout_for(fn, format, rows, cols, layout);
    if (st != MOE_STATUS_OK) return st;
    if (ld < cols)
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT, "%s: ld = %lld, expected >= cols = %lld", fn,
                          (long long)ld, (long long)cols);
    int64_t extent;
    if (rows > 0 && (!moe__mul64(rows - 1, ld, &extent) || !moe__add64(extent, cols, &extent) ||
                     (uint64_t)extent > (uint64_t)(SIZE_MAX / sizeof(float))))
        return moe__error(NULL, MOE_STATUS_OVERFLOW, "%s: (rows - 1) * ld + cols = (%lld - 1) * %lld + %lld overflows",
                          fn, (long long)rows, (long long)ld, (long long)cols);
    return MOE_STATUS_OK;
}

moe_status moe_quantize(moe_format format, const float *x, int64_t rows, int64_t cols, int64_t ld, void *codes,
                        void *scales, float *tensor_scale) {
    static const char fn[] = "moe_quantize";
    moe__clear_error(NULL);
    moe_format_layout layout;
    moe_status st = check_matrix_args(fn, format, rows, cols, ld, &layout);
    if (st != MOE_STATUS_OK) return st;
    if (!x) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: x is NULL", fn);
    if (!codes) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: codes is NULL", fn);
    if (!is_plain_format(format) && !scales)
        return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: scales is NULL, but format %s has block scales", fn,
                          moe_format_name(format));
    if (layout.has_tensor_scale && !tensor_scale)
        return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: tensor_scale is NULL, but format %s has a tensor scale",
                          fn, moe_format_name(format));
    if (tensor_scale && !layout.has_tensor_scale) *tensor_scale = 1.0f;

    uint8_t *q8 = codes;
    uint16_t *q16 = codes;
    switch (format) {
    case MOE_FORMAT_F32:
        for (int64_t r = 0; r < rows; r++) memcpy((float *)codes + r * cols, x + r * ld, (size_t)cols * sizeof(float));
        break;
    case MOE_FORMAT_F16:
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) q16[r * cols + c] = moe_float_to_f16(x[r * ld + c]);
        break;
    case MOE_FORMAT_BF16:
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) q16[r * cols + c] = moe_float_to_bf16(x[r * ld + c]);
        break;
    case MOE_FORMAT_FP8_TENSOR:
        ((float *)scales)[0] = 1.0f; /* stays 1 for an empty matrix */
        quantize_fp8_blocks(x, rows, cols, ld, rows > 0 ? rows : 1, cols > 0 ? cols : 1, q8, cols, scales, 1);
        break;
    case MOE_FORMAT_FP8_ROW128:
    case MOE_FORMAT_FP8_BLOCK128:
    case MOE_FORMAT_NVFP4:
    case MOE_FORMAT_NVFP4_2D:
        if (tensor_scale && layout.has_tensor_scale) *tensor_scale = nvfp4_tensor_scale(x, rows, cols, ld);
        moe__quantize_blocks(format, x, rows, cols, ld, tensor_scale ? *tensor_scale : 1.0f, codes, cols, scales,
                             layout.scale_cols);
        break;
    case MOE_FORMAT_MXFP8_OCP:
    case MOE_FORMAT_MXFP8_TE:
    case MOE_FORMAT_MXFP4: quantize_mx(format, x, rows, cols, ld, q8, scales); break;
    default: return moe__error(NULL, MOE_STATUS_INTERNAL, "%s: format %d not handled", fn, (int)format);
    }
    return MOE_STATUS_OK;
}

/* ---------------------------------------------------------------------------------------
 * Dequantisation, one element at a time (the reference for moe__qmatrix_row).
 * ------------------------------------------------------------------------------------- */

static float e2m1_at(const uint8_t *codes, int64_t i) { return moe_e2m1_to_float((uint8_t)(codes[i / 2] >> (4 * (i % 2)))); }

/* Element (r, c). NVFP4 decodes as e2m1(q) * (s_b / S_enc): the block's combined scale is
 * rounded to fp32 once, then multiplied (what a kernel does per block). */
static float dequantize_element(moe_format format, const void *codes, const void *scales, float tensor_scale,
                                int64_t cols, int64_t scale_cols, int64_t r, int64_t c) {
    const int64_t i = r * cols + c;
    const uint8_t *q8 = codes;
    const float *fs = scales;
    const uint8_t *s8 = scales;
    switch (format) {
    case MOE_FORMAT_F32: return ((const float *)codes)[i];
    case MOE_FORMAT_F16: return moe_f16_to_float(((const uint16_t *)codes)[i]);
    case MOE_FORMAT_BF16: return moe_bf16_to_float(((const uint16_t *)codes)[i]);
    case MOE_FORMAT_FP8_TENSOR: return moe_e4m3_to_float(q8[i]) * fs[0];
    case MOE_FORMAT_FP8_ROW128: return moe_e4m3_to_float(q8[i]) * fs[r * scale_cols + c / 128];
    case MOE_FORMAT_FP8_BLOCK128: return moe_e4m3_to_float(q8[i]) * fs[(r / 128) * scale_cols + c / 128];
    case MOE_FORMAT_MXFP8_OCP:
    case MOE_FORMAT_MXFP8_TE: return moe_e4m3_to_float(q8[i]) * moe_e8m0_to_float(s8[r * scale_cols + c / 32]);
    case MOE_FORMAT_MXFP4: return e2m1_at(q8, i) * moe_e8m0_to_float(s8[r * scale_cols + c / 32]);
    case MOE_FORMAT_NVFP4: return e2m1_at(q8, i) * (moe_ue4m3_to_float(s8[r * scale_cols + c / 16]) / tensor_scale);
    case MOE_FORMAT_NVFP4_2D:
        return e2m1_at(q8, i) * (moe_ue4m3_to_float(s8[(r / 16) * scale_cols + c / 16]) / tensor_scale);
    default: return NAN;
    }
}

moe_status moe_dequantize(moe_format format, const void *codes, const void *scales, float tensor_scale, int64_t rows,
                          int64_t cols, float *out, int64_t ld) {
    static const char fn[] = "moe_dequantize";
    moe__clear_error(NULL);
    moe_format_layout layout;
    moe_status st = check_matrix_args(fn, format, rows, cols, ld, &layout);
    if (st != MOE_STATUS_OK) return st;
    if (!codes) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: codes is NULL", fn);
    if (!is_plain_format(format) && !scales)
        return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: scales is NULL, but format %s has block scales", fn,
                          moe_format_name(format));
    if (!out) return moe__error(NULL, MOE_STATUS_NULL_POINTER, "%s: out is NULL", fn);
    if (layout.has_tensor_scale && !(isfinite(tensor_scale) && tensor_scale > 0.0f))
        return moe__error(NULL, MOE_STATUS_INVALID_ARGUMENT,
                          "%s: tensor_scale = %g, expected a finite value > 0 (S_enc as moe_quantize wrote it)", fn,
                          (double)tensor_scale);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            out[r * ld + c] = dequantize_element(format, codes, scales, tensor_scale, cols, layout.scale_cols, r, c);
    return MOE_STATUS_OK;
}
