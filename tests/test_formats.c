/* test_formats — number formats.
 *
 * Everything is checked against values this file computes on its own, from the bit layouts
 * in REFERENCE.md §1, in double:
 *  - scalar codecs: every code of every 8-bit (and 16-bit) format decodes to the value of
 *    its bit fields and re-encodes to itself; for every pair of adjacent representable
 *    values the midpoint goes to the even code and its float neighbours to the nearer one;
 *    random floats encode as a brute-force nearest-even search over all values says;
 *  - quantisers: every block scale equals the format's rule computed here, every element code
 *    equals the brute-force nearest-even code of the exactly scaled element, every
 *    dequantised float equals decode(code) * scale, and the reconstruction error stays under
 *    a bound derived below from the format; moe__qmatrix_row gives moe_dequantize's floats
 *    bit for bit.
 * Fresh random inputs each run; MOEFUSE_SEED=<n> repeats a run. */
#include "internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h" /* CHECK, seed, PRNG, case lines */

static float float_from_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}
static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}
/* signbit's non-zero value differs between float and double: compare it as a bool */
#define SIGN(v) (signbit(v) != 0)

/* Same float, or both NaN. */
static bool same_float(float a, float b) { return (isnan(a) && isnan(b)) || bits_of(a) == bits_of(b); }

/* ---------------------------------------------------------------------------------------
 * Independent decoders, straight from the bit layouts.
 * ------------------------------------------------------------------------------------- */
static double ref_e4m3(unsigned c) {
    int s = (c >> 7) & 1, e = (c >> 3) & 15, m = c & 7;
    if (e == 15 && m == 7) return NAN;
    double v = e == 0 ? m / 8.0 * pow(2, -6) : (1 + m / 8.0) * pow(2, e - 7);
    return s ? -v : v;
}
static double ref_e5m2(unsigned c) {
    int s = (c >> 7) & 1, e = (c >> 2) & 31, m = c & 3;
    if (e == 31) return m ? NAN : (s ? -INFINITY : INFINITY);
    double v = e == 0 ? m / 4.0 * pow(2, -14) : (1 + m / 4.0) * pow(2, e - 15);
    return s ? -v : v;
}
static double ref_e2m1(unsigned c) {
    static const double mags[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (c & 8) ? -mags[c & 7] : mags[c & 7];
}
static double ref_e8m0(unsigned c) { return c == 255 ? NAN : pow(2, (int)c - 127); }
static double ref_ue4m3(unsigned c) { return ref_e4m3(c & 0x7F); } /* unsigned: bit 7 not used */
static double ref_f16(unsigned c) {
    int s = (c >> 15) & 1, e = (c >> 10) & 31, m = c & 1023;
    if (e == 31) return m ? NAN : (s ? -INFINITY : INFINITY);
    double v = e == 0 ? m * pow(2, -24) : (1 + m / 1024.0) * pow(2, e - 15);
    return s ? -v : v;
}
static double ref_bf16(unsigned c) {
    int s = (c >> 15) & 1, e = (c >> 7) & 255, m = c & 127;
    if (e == 255) return m ? NAN : (s ? -INFINITY : INFINITY);
    double v = e == 0 ? m / 128.0 * pow(2, -126) : (1 + m / 128.0) * pow(2, e - 127);
    return s ? -v : v;
}

/* ---------------------------------------------------------------------------------------
 * Independent encoders: brute-force nearest over the sorted finite magnitudes, whose codes
 * are 0..n-1 in every format here, so "even code" is "even index".
 * ------------------------------------------------------------------------------------- */
typedef struct format_table {
    const char *name;
    int n;                /* finite magnitude codes 0..n-1 */
    uint32_t sign_bit;    /* 0 for unsigned */
    int64_t overflow_code; /* -1: saturate to n-1; else the code past max + half ulp (inf) */
    double *mag;
    uint32_t (*encode)(float);
    double (*decode)(unsigned);
} format_table;

static uint32_t enc_e4m3(float f) { return moe_float_to_e4m3(f); }
static uint32_t enc_e5m2(float f) { return moe_float_to_e5m2(f); }
static uint32_t enc_e2m1(float f) { return moe_float_to_e2m1(f); }
static uint32_t enc_ue4m3(float f) { return moe_float_to_ue4m3(f); }
static uint32_t enc_f16(float f) { return moe_float_to_f16(f); }
static uint32_t enc_bf16(float f) { return moe_float_to_bf16(f); }

static format_table T_E4M3 = {"e4m3", 0x7F, 0x80, -1, NULL, enc_e4m3, ref_e4m3};
static format_table T_E5M2 = {"e5m2", 0x7C, 0x80, -1, NULL, enc_e5m2, ref_e5m2};
static format_table T_E2M1 = {"e2m1", 8, 0x8, -1, NULL, enc_e2m1, ref_e2m1};
static format_table T_UE4M3 = {"ue4m3", 0x7F, 0, -1, NULL, enc_ue4m3, ref_ue4m3};
static format_table T_F16 = {"f16", 0x7C00, 0x8000, 0x7C00, NULL, enc_f16, ref_f16};
static format_table T_BF16 = {"bf16", 0x7F80, 0x8000, 0x7F80, NULL, enc_bf16, ref_bf16};
static format_table *const ALL_TABLES[] = {&T_E4M3, &T_E5M2, &T_E2M1, &T_UE4M3, &T_F16, &T_BF16};

static void build_tables(void) {
    for (size_t t = 0; t < sizeof ALL_TABLES / sizeof ALL_TABLES[0]; t++) {
        format_table *ft = ALL_TABLES[t];
        ft->mag = malloc((size_t)ft->n * sizeof(double));
        for (int i = 0; i < ft->n; i++) ft->mag[i] = ft->decode((unsigned)i);
    }
}

/* Nearest magnitude code of ax >= 0 (finite), ties to the even code; saturating, or the
 * overflow code where the format overflows to inf (IEEE: at max + half an ulp and above). */
static uint32_t ref_nearest(const format_table *ft, double ax) {
    const double *m = ft->mag;
    const int n = ft->n;
    if (ft->overflow_code >= 0 && ax >= m[n - 1] + (m[n - 1] - m[n - 2]) / 2) return (uint32_t)ft->overflow_code;
    if (ax >= m[n - 1]) return (uint32_t)(n - 1);
    int lo = 0, hi = n - 1; /* m[lo] <= ax < m[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (m[mid] <= ax) lo = mid;
        else hi = mid;
    }
    double d_lo = ax - m[lo], d_hi = m[hi] - ax;
    if (d_lo < d_hi) return (uint32_t)lo;
    if (d_hi < d_lo) return (uint32_t)hi;
    return (uint32_t)(lo % 2 == 0 ? lo : hi);
}

/* The code the header promises for x: NaN -> a NaN code (ref returns UINT32_MAX, meaning "any
 * code that decodes to NaN"; E2M1: +6), inf -> saturate or inf, else nearest even. */
static uint32_t ref_encode(const format_table *ft, double x) {
    uint32_t sign = (ft->sign_bit && signbit(x)) ? ft->sign_bit : 0;
    if (isnan(x)) return ft == &T_E2M1 ? 7u : UINT32_MAX;
    if (isinf(x)) return sign | (ft->overflow_code >= 0 ? (uint32_t)ft->overflow_code : (uint32_t)(ft->n - 1));
    return sign | ref_nearest(ft, fabs(x));
}

static bool code_matches(const format_table *ft, uint32_t got, uint32_t want) {
    if (want == UINT32_MAX) return isnan(ft->decode(got));
    return got == want;
}

/* ---------------------------------------------------------------------------------------
 * Scalar codecs.
 * ------------------------------------------------------------------------------------- */

/* Every code decodes to its bit-field value and re-encodes to itself. */
static void check_all_codes(const format_table *ft, float (*dec)(uint16_t), int ncodes) {
    for (int c = 0; c < ncodes; c++) {
        double want = ft->decode((unsigned)c);
        float got = dec((uint16_t)c);
        if (isnan(want)) {
            CHECK(isnan(got), "%s code 0x%x: got %g, expected NaN", ft->name, c, got);
            CHECK(isnan(ft->decode(ft->encode(got))), "%s NaN code 0x%x re-encodes to 0x%x, not a NaN", ft->name,
                  c, ft->encode(got));
            continue;
        }
        CHECK(got == (float)want && SIGN(got) == SIGN(want), "%s code 0x%x: got %.9g, expected %.9g",
              ft->name, c, got, want);
        uint32_t back = ft->encode(got);
        uint32_t want_back = (uint32_t)c;
        if (isinf(want) && ft->overflow_code < 0) want_back = (c & ft->sign_bit) | (uint32_t)(ft->n - 1);
        CHECK(back == want_back, "%s code 0x%x (%.9g) re-encodes to 0x%x, expected 0x%x", ft->name, c, got, back,
              want_back);
    }
}

static float dec_e4m3(uint16_t c) { return moe_e4m3_to_float((uint8_t)c); }
static float dec_e5m2(uint16_t c) { return moe_e5m2_to_float((uint8_t)c); }
static float dec_e2m1(uint16_t c) { return moe_e2m1_to_float((uint8_t)c); }
static float dec_ue4m3(uint16_t c) { return moe_ue4m3_to_float((uint8_t)c); }

static void case_fp8_codes(void) {
    check_all_codes(&T_E4M3, dec_e4m3, 256);
    check_all_codes(&T_E5M2, dec_e5m2, 256);
}

static void case_e2m1_codes(void) {
    check_all_codes(&T_E2M1, dec_e2m1, 16);
    static const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6}; /* the spec's list */
    for (int c = 0; c < 16; c++) {
        float want = (c & 8) ? -mags[c & 7] : mags[c & 7];
        CHECK(bits_of(moe_e2m1_to_float((uint8_t)c)) == bits_of(want), "e2m1 code %d", c);
        CHECK(moe_e2m1_to_float((uint8_t)(c | 0xF0)) == want, "e2m1 code 0x%x: high bits must be ignored",
              c | 0xF0);
    }
}

static void case_e8m0_ue4m3_codes(void) {
    for (int c = 0; c < 256; c++) {
        double want = ref_e8m0((unsigned)c);
        float got = moe_e8m0_to_float((uint8_t)c);
        CHECK(isnan(want) ? isnan(got) : got == (float)want, "e8m0 code %d: got %g, expected %g", c, got, want);
    }
    CHECK(moe_e8m0_to_float(0) > 0, "e8m0 code 0 is 2^-127, not zero");
    check_all_codes(&T_UE4M3, dec_ue4m3, 128);
    for (int c = 128; c < 256; c++)
        CHECK(same_float(moe_ue4m3_to_float((uint8_t)c), moe_ue4m3_to_float((uint8_t)(c & 0x7F))),
              "ue4m3 code 0x%x: bit 7 must be ignored", c);
    for (int c = 0; c < 0x7F; c++) {
        float v = (float)ref_e4m3((unsigned)c);
        CHECK(moe_float_to_ue4m3(-v) == c, "ue4m3(-%g) = 0x%x, expected |f| -> 0x%x", v, moe_float_to_ue4m3(-v), c);
    }
    CHECK(moe_float_to_ue4m3(1e9f) == 0x7E, "ue4m3(1e9) saturates to 448");
    CHECK(moe_float_to_ue4m3(-1e9f) == 0x7E, "ue4m3(-1e9) saturates to 448");
    CHECK(moe_float_to_ue4m3(INFINITY) == 0x7E, "ue4m3(inf) saturates to 448");
    CHECK(moe_float_to_ue4m3(NAN) == 0x7F, "ue4m3(NaN) = 0x7F");
}

static void case_f16_bf16_codes(void) {
    check_all_codes(&T_F16, moe_f16_to_float, 65536);
    check_all_codes(&T_BF16, moe_bf16_to_float, 65536);
}

/* For every pair of adjacent representable magnitudes a < b: the midpoint rounds to the even
 * code, the float just above it to b, just below to a; the same with the sign set; a and b
 * map to themselves. Then past the maximum. */
static void check_midpoints(const format_table *ft) {
    const int n = ft->n;
    for (int i = 0; i + 1 < n; i++) {
        float a = (float)ft->mag[i], b = (float)ft->mag[i + 1];
        float mid = (float)((ft->mag[i] + ft->mag[i + 1]) / 2);
        CHECK((double)mid == (ft->mag[i] + ft->mag[i + 1]) / 2, "%s: midpoint not exact in float", ft->name);
        uint32_t even = (uint32_t)(i % 2 == 0 ? i : i + 1);
        CHECK(ft->encode(a) == (uint32_t)i, "%s(%g) = 0x%x, expected 0x%x", ft->name, a, ft->encode(a), i);
        CHECK(ft->encode(b) == (uint32_t)i + 1, "%s(%g)", ft->name, b);
        CHECK(ft->encode(mid) == even, "%s(midpoint %.9g) = 0x%x, expected even 0x%x", ft->name, mid,
              ft->encode(mid), even);
        CHECK(ft->encode(nextafterf(mid, INFINITY)) == (uint32_t)i + 1, "%s(just above %.9g) = 0x%x, expected 0x%x",
              ft->name, mid, ft->encode(nextafterf(mid, INFINITY)), i + 1);
        CHECK(ft->encode(nextafterf(mid, 0)) == (uint32_t)i, "%s(just below %.9g) = 0x%x, expected 0x%x", ft->name,
              mid, ft->encode(nextafterf(mid, 0)), i);
        uint32_t s = ft->sign_bit;
        CHECK(ft->encode(-mid) == (s | even), "%s(-%.9g) = 0x%x, expected 0x%x", ft->name, mid, ft->encode(-mid),
              s | even);
        CHECK(ft->encode(-nextafterf(mid, INFINITY)) == (s | (uint32_t)(i + 1)), "%s(-just above %.9g)", ft->name,
              mid);
    }
    /* Past the largest finite value: saturate, or inf from max + half an ulp (IEEE). */
    double max = ft->mag[n - 1], ulp = max - ft->mag[n - 2];
    float past = (float)(max + ulp / 2);
    uint32_t top = ft->overflow_code >= 0 ? (uint32_t)ft->overflow_code : (uint32_t)(n - 1);
    CHECK(ft->encode(past) == top, "%s(%.9g) = 0x%x, expected 0x%x", ft->name, past, ft->encode(past), top);
    CHECK(ft->encode(nextafterf(past, 0)) == (uint32_t)(n - 1), "%s(just below max + ulp/2)", ft->name);
    CHECK(ft->encode(nextafterf((float)max, INFINITY)) == (uint32_t)(n - 1), "%s(just above max)", ft->name);
}

static void case_midpoints(void) {
    for (size_t t = 0; t < sizeof ALL_TABLES / sizeof ALL_TABLES[0]; t++) check_midpoints(ALL_TABLES[t]);
}

/* Random floats of every exponent, and random values around each format's range, against the
 * brute-force encoder. */
static void case_random_vs_reference(void) {
    for (size_t t = 0; t < sizeof ALL_TABLES / sizeof ALL_TABLES[0]; t++) {
        const format_table *ft = ALL_TABLES[t];
        double max = ft->mag[ft->n - 1], min_sub = ft->mag[1];
        for (int k = 0; k < 200000; k++) {
            float f;
            if (k % 2 == 0) {
                f = float_from_bits((uint32_t)rng_next());
            } else { /* log-uniform from a quarter of the smallest subnormal to twice the max */
                double lo = log2(min_sub / 4), hi = log2(max * 2);
                f = (float)(exp2(lo + (hi - lo) * rng_uniform()) * (rng_next() & 1 ? -1 : 1));
            }
            uint32_t got = ft->encode(f), want = ref_encode(ft, f);
            CHECK(code_matches(ft, got, want), "%s(%.9g = 0x%08x) = 0x%x, expected 0x%x", ft->name, f, bits_of(f), got,
                  want);
        }
    }
}

static void case_special_values(void) {
    /* saturation and NaN */
    CHECK(moe_float_to_e4m3(1e9f) == 0x7E && moe_float_to_e4m3(-1e9f) == 0xFE, "e4m3 saturates +-1e9 to +-448");
    CHECK(moe_float_to_e4m3(INFINITY) == 0x7E && moe_float_to_e4m3(-INFINITY) == 0xFE, "e4m3 saturates +-inf");
    CHECK(moe_float_to_e4m3(464.0f) == 0x7E, "e4m3(464), the tie past 448, saturates");
    CHECK(isnan(moe_e4m3_to_float(moe_float_to_e4m3(NAN))) && isnan(moe_e4m3_to_float(moe_float_to_e4m3(-NAN))),
          "e4m3 NaN stays NaN");
    CHECK(moe_float_to_e5m2(1e9f) == 0x7B && moe_float_to_e5m2(-1e9f) == 0xFB, "e5m2 saturates +-1e9 to +-57344");
    CHECK(moe_float_to_e5m2(INFINITY) == 0x7B && moe_float_to_e5m2(-INFINITY) == 0xFB, "e5m2 saturates inf");
    CHECK(moe_float_to_e5m2(61440.0f) == 0x7B, "e5m2(61440), the tie past 57344, saturates");
    CHECK(isnan(moe_e5m2_to_float(moe_float_to_e5m2(NAN))), "e5m2 NaN stays NaN");
    CHECK(moe_float_to_e2m1(1e9f) == 0x7 && moe_float_to_e2m1(-1e9f) == 0xF, "e2m1 saturates +-1e9 to +-6");
    CHECK(moe_float_to_e2m1(INFINITY) == 0x7 && moe_float_to_e2m1(-INFINITY) == 0xF, "e2m1 saturates inf");
    CHECK(moe_float_to_e2m1(NAN) == 0x7 && moe_float_to_e2m1(-NAN) == 0x7, "e2m1(NaN) = +6 per the header");
    /* E2M1 thresholds of REFERENCE.md §1 */
    static const float thr[][2] = {{0.25f, 0}, {0.2500001f, 0.5f}, {0.7499999f, 0.5f}, {0.75f, 1}, {1.25f, 1},
                                   {1.2500001f, 1.5f}, {1.7499999f, 1.5f}, {1.75f, 2}, {2.5f, 2}, {2.5000002f, 3},
                                   {3.4999998f, 3}, {3.5f, 4}, {5.0f, 4}, {5.0000005f, 6}, {7.0f, 6}};
    for (size_t i = 0; i < sizeof thr / sizeof thr[0]; i++)
        CHECK(moe_e2m1_to_float(moe_float_to_e2m1(thr[i][0])) == thr[i][1], "e2m1(%.9g) -> %g, expected %g",
              thr[i][0], moe_e2m1_to_float(moe_float_to_e2m1(thr[i][0])), thr[i][1]);
    /* f16: overflow to inf, NaN (including a signalling NaN, whose payload is in the low bits
     * that f16 drops) stays NaN, subnormals and ties */
    CHECK(moe_float_to_f16(1e9f) == 0x7C00 && moe_float_to_f16(-1e9f) == 0xFC00, "f16 overflows to inf");
    CHECK(moe_float_to_f16(INFINITY) == 0x7C00, "f16(inf)");
    CHECK(moe_float_to_f16(65519.0f) == 0x7BFF && moe_float_to_f16(65520.0f) == 0x7C00, "f16 overflow boundary");
    CHECK(isnan(moe_f16_to_float(moe_float_to_f16(float_from_bits(0x7F800001u)))), "f16 keeps a signalling NaN NaN");
    CHECK(isnan(moe_f16_to_float(moe_float_to_f16(NAN))), "f16 NaN");
    CHECK(moe_float_to_f16(0x1p-24f) == 0x0001 && moe_float_to_f16(0x1p-25f) == 0x0000, "f16 smallest subnormal");
    CHECK(moe_float_to_f16(0x1.8p-25f) == 0x0001, "f16 0.75 ulp rounds up");
    CHECK(moe_float_to_f16(0x1.8p-24f) == 0x0002 && moe_float_to_f16(0x1.4p-23f) == 0x0002, "f16 subnormal ties");
    CHECK(moe_float_to_f16(0x1p-14f - 0x1p-25f) == 0x0400, "f16 tie between largest subnormal and smallest normal");
    CHECK(moe_float_to_f16(-0.0f) == 0x8000, "f16(-0)");
    CHECK(moe_float_to_f16(1.0f + 0x1p-11f) == 0x3C00 && moe_float_to_f16(1.0f + 0x1.8p-10f) == 0x3C02,
          "f16 ties to even");
    /* bf16 */
    CHECK(moe_float_to_bf16(1.0f + 0x1p-8f) == 0x3F80 && moe_float_to_bf16(1.0f + 0x1.8p-7f) == 0x3F82,
          "bf16 ties to even");
    CHECK(isnan(moe_bf16_to_float(moe_float_to_bf16(float_from_bits(0x7F800001u)))),
          "bf16 keeps a signalling NaN NaN (not inf)");
    CHECK(moe_float_to_bf16(float_from_bits(0xFF800001u)) >> 15 == 1 &&
              isnan(moe_bf16_to_float(moe_float_to_bf16(float_from_bits(0xFF800001u)))),
          "bf16 negative NaN keeps sign");
    CHECK(moe_float_to_bf16(INFINITY) == 0x7F80 && moe_float_to_bf16(-INFINITY) == 0xFF80, "bf16 inf");
    CHECK(moe_float_to_bf16(FLT_MAX) == 0x7F80, "bf16(FLT_MAX) rounds to inf (RNE, IEEE)");
    CHECK(moe_float_to_bf16(0x1p-133f) == 0x0001 && moe_float_to_bf16(0x1p-134f) == 0x0000, "bf16 subnormals");
    CHECK(moe_float_to_bf16(0x1.8p-133f) == 0x0002, "bf16 subnormal tie to even");
    CHECK(moe_float_to_e4m3(-0.0f) == 0x80 && moe_float_to_e5m2(-0.0f) == 0x80 && moe_float_to_e2m1(-0.0f) == 0x8,
          "-0 keeps its sign");
}

/* ---------------------------------------------------------------------------------------
 * Names and layouts.
 * ------------------------------------------------------------------------------------- */
static const char *const NAMES[MOE_FORMAT_COUNT_] = {"f32",       "f16",      "bf16",  "fp8-tensor",
                                                      "fp8-row128", "fp8-block128", "mxfp8-ocp", "mxfp8-te",
                                                      "mxfp4",     "nvfp4",    "nvfp4-2d"};

static void case_names(void) {
    for (int f = 0; f < MOE_FORMAT_COUNT_; f++) {
        CHECK(strcmp(moe_format_name((moe_format)f), NAMES[f]) == 0, "format %d named %s, expected %s", f,
              moe_format_name((moe_format)f), NAMES[f]);
        moe_format got = MOE_FORMAT_COUNT_;
        CHECK(moe_format_from_name(NAMES[f], &got) == MOE_STATUS_OK && got == (moe_format)f, "parse %s", NAMES[f]);
    }
    moe_format got;
    CHECK(moe_format_from_name("fp8", &got) == MOE_STATUS_OK && got == MOE_FORMAT_FP8_BLOCK128, "alias fp8");
    CHECK(moe_format_from_name("mxfp8", &got) == MOE_STATUS_OK && got == MOE_FORMAT_MXFP8_TE, "alias mxfp8");
    CHECK(moe_format_from_name("bogus4", &got) == MOE_STATUS_INVALID_ARGUMENT, "unknown name");
    const char *msg = moe_last_error(NULL);
    CHECK(strstr(msg, "bogus4") != NULL, "message names the bad name: %s", msg);
    for (int f = 0; f < MOE_FORMAT_COUNT_; f++) CHECK(strstr(msg, NAMES[f]) != NULL, "message lists %s: %s", NAMES[f], msg);
    CHECK(moe_format_from_name("", &got) == MOE_STATUS_INVALID_ARGUMENT, "empty name");
    CHECK(moe_format_from_name(NULL, &got) == MOE_STATUS_NULL_POINTER && strstr(moe_last_error(NULL), "name"),
          "NULL name: %s", moe_last_error(NULL));
    CHECK(moe_format_from_name("f32", NULL) == MOE_STATUS_NULL_POINTER && strstr(moe_last_error(NULL), "out"),
          "NULL out: %s", moe_last_error(NULL));
    CHECK(strcmp(moe_format_name((moe_format)99), "unknown") == 0 &&
              strcmp(moe_format_name((moe_format)-1), "unknown") == 0,
          "out-of-range format name");
}

static void case_layouts(void) {
    struct {
        moe_format f;
        int64_t rows, cols;
        size_t code_bytes;
        int64_t sr, sc;
        moe_dtype dt;
        int ts;
    } want[] = {
        {MOE_FORMAT_F32, 37, 300, 37 * 300 * 4, 0, 0, MOE_DTYPE_F32, 0},
        {MOE_FORMAT_F16, 37, 300, 37 * 300 * 2, 0, 0, MOE_DTYPE_F32, 0},
        {MOE_FORMAT_BF16, 37, 300, 37 * 300 * 2, 0, 0, MOE_DTYPE_F32, 0},
        {MOE_FORMAT_FP8_TENSOR, 37, 300, 37 * 300, 1, 1, MOE_DTYPE_F32, 0},
        {MOE_FORMAT_FP8_ROW128, 37, 300, 37 * 300, 37, 3, MOE_DTYPE_F32, 0},
        {MOE_FORMAT_FP8_BLOCK128, 37, 300, 37 * 300, 1, 3, MOE_DTYPE_F32, 0},
        {MOE_FORMAT_FP8_BLOCK128, 129, 256, 129 * 256, 2, 2, MOE_DTYPE_F32, 0},
        {MOE_FORMAT_MXFP8_OCP, 37, 300, 37 * 300, 37, 10, MOE_DTYPE_E8M0, 0},
        {MOE_FORMAT_MXFP8_TE, 37, 300, 37 * 300, 37, 10, MOE_DTYPE_E8M0, 0},
        {MOE_FORMAT_MXFP8_TE, 37, 301, 37 * 301, 37, 10, MOE_DTYPE_E8M0, 0},
        {MOE_FORMAT_MXFP4, 37, 300, 37 * 150, 37, 10, MOE_DTYPE_E8M0, 0},
        {MOE_FORMAT_NVFP4, 37, 300, 37 * 150, 37, 19, MOE_DTYPE_UE4M3, 1},
        {MOE_FORMAT_NVFP4_2D, 37, 300, 37 * 150, 3, 19, MOE_DTYPE_UE4M3, 1},
        {MOE_FORMAT_FP8_TENSOR, 0, 0, 0, 1, 1, MOE_DTYPE_F32, 0},
        {MOE_FORMAT_NVFP4_2D, 0, 8, 0, 0, 1, MOE_DTYPE_UE4M3, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        moe_format_layout l;
        moe_status st = moe_format_layout_get(want[i].f, want[i].rows, want[i].cols, &l);
        CHECK(st == MOE_STATUS_OK && l.code_bytes == want[i].code_bytes && l.scale_rows == want[i].sr &&
                  l.scale_cols == want[i].sc && (want[i].sr * want[i].sc == 0 || l.scale_dtype == want[i].dt) &&
                  l.has_tensor_scale == want[i].ts,
              "layout of %s %lldx%lld: st %d bytes %zu scales %lldx%lld dtype %d ts %d", NAMES[want[i].f],
              (long long)want[i].rows, (long long)want[i].cols, st, l.code_bytes, (long long)l.scale_rows,
              (long long)l.scale_cols, l.scale_dtype, l.has_tensor_scale);
    }
    moe_format_layout l;
    moe_format fp4[] = {MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4, MOE_FORMAT_NVFP4_2D};
    for (int i = 0; i < 3; i++)
        CHECK(moe_format_layout_get(fp4[i], 4, 7, &l) == MOE_STATUS_INVALID_ARGUMENT &&
                  strstr(moe_last_error(NULL), "cols = 7"),
              "odd cols for %s: %s", NAMES[fp4[i]], moe_last_error(NULL));
    CHECK(moe_format_layout_get(MOE_FORMAT_MXFP8_OCP, 4, 7, &l) == MOE_STATUS_OK, "odd cols fine for mxfp8");
    CHECK(moe_format_layout_get(MOE_FORMAT_F32, -1, 7, &l) == MOE_STATUS_INVALID_ARGUMENT &&
              strstr(moe_last_error(NULL), "rows = -1"),
          "negative rows: %s", moe_last_error(NULL));
    CHECK(moe_format_layout_get(MOE_FORMAT_F32, 1, -2, &l) == MOE_STATUS_INVALID_ARGUMENT &&
              strstr(moe_last_error(NULL), "cols = -2"),
          "negative cols: %s", moe_last_error(NULL));
    CHECK(moe_format_layout_get((moe_format)99, 1, 2, &l) == MOE_STATUS_INVALID_ARGUMENT &&
              strstr(moe_last_error(NULL), "format 99"),
          "bad format: %s", moe_last_error(NULL));
    CHECK(moe_format_layout_get(MOE_FORMAT_F32, INT64_MAX / 2, 4, &l) == MOE_STATUS_OVERFLOW &&
              strstr(moe_last_error(NULL), "overflow"),
          "overflow: %s", moe_last_error(NULL));
    CHECK(moe_format_layout_get(MOE_FORMAT_F32, INT64_MAX / 16, 4, &l) == MOE_STATUS_OVERFLOW, "byte overflow");
    CHECK(moe_format_layout_get(MOE_FORMAT_F32, 1, 1, NULL) == MOE_STATUS_NULL_POINTER &&
              strstr(moe_last_error(NULL), "out"),
          "NULL out");
}

/* ---------------------------------------------------------------------------------------
 * Quantisers, against an independent re-computation.
 * ------------------------------------------------------------------------------------- */
static bool is_fp4(moe_format f) {
    return f == MOE_FORMAT_MXFP4 || f == MOE_FORMAT_NVFP4 || f == MOE_FORMAT_NVFP4_2D;
}
static bool is_plain(moe_format f) { return f <= MOE_FORMAT_BF16; }
static bool is_mx(moe_format f) {
    return f == MOE_FORMAT_MXFP8_OCP || f == MOE_FORMAT_MXFP8_TE || f == MOE_FORMAT_MXFP4;
}
static bool is_nvfp4(moe_format f) { return f == MOE_FORMAT_NVFP4 || f == MOE_FORMAT_NVFP4_2D; }

static void block_dims(moe_format f, int64_t rows, int64_t cols, int64_t *br, int64_t *bc) {
    switch (f) {
    case MOE_FORMAT_FP8_TENSOR: *br = rows > 0 ? rows : 1, *bc = cols > 0 ? cols : 1; return;
    case MOE_FORMAT_FP8_ROW128: *br = 1, *bc = 128; return;
    case MOE_FORMAT_FP8_BLOCK128: *br = 128, *bc = 128; return;
    case MOE_FORMAT_NVFP4: *br = 1, *bc = 16; return;
    case MOE_FORMAT_NVFP4_2D: *br = 16, *bc = 16; return;
    default: *br = 1, *bc = 32; return; /* MX */
    }
}

static double region_amax(const float *x, int64_t ld, int64_t r0, int64_t r1, int64_t c0, int64_t c1, bool *nan) {
    double amax = 0;
    *nan = false;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++) {
            float v = x[r * ld + c];
            if (isnan(v)) *nan = true;
            else if (isfinite(v) && fabs(v) > amax) amax = fabs(v);
        }
    return amax;
}

static bool region_has_inf(const float *x, int64_t ld, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++)
            if (isinf(x[r * ld + c])) return true;
    return false;
}

static int floor_log2(double a) { /* a > 0 */
    int k = 0;
    while (ldexp(1.0, k) > a) k--;
    while (ldexp(1.0, k + 1) <= a) k++;
    return k;
}

/* The E8M0 scale code by the format's rule (for amax / 448 in float's normal range). */
static unsigned ref_mx_code(moe_format f, double amax) {
    if (amax == 0) return 127; /* documented choice: 2^0 for a zero block */
    if (f == MOE_FORMAT_MXFP8_TE) {
        /* the smallest E8M0 power of two >= fl(amax / 448): 2^-127 (code 0) for a quotient
         * <= 2^-127, as TE's float_to_e8m0 gives */
        double v = (float)amax / 448.0f;
        if (v == 0) return 0;
        int k = floor_log2(v);
        if (ldexp(1.0, k) < v) k++;
        return (unsigned)(k + 127 < 0 ? 0 : k + 127);
    }
    int code = floor_log2(amax) - (f == MOE_FORMAT_MXFP4 ? 2 : 8) + 127; /* OCP: floor(log2 amax) - emax */
    return (unsigned)(code < 0 ? 0 : code > 254 ? 254 : code);
}

/* One element's reference: its expected code, the fp32 scale it is multiplied by, and the
 * element format's table. */
typedef struct expected {
    uint32_t code;   /* UINT32_MAX: any NaN code */
    float scale;     /* decode(code) * scale is the dequantised value (plain formats: 1) */
    bool check_code; /* false inside an FP4 block marked NaN by its scale */
} expected;

typedef struct quant_ref {
    moe_format f;
    int64_t rows, cols, ld, br, bc, scale_cols;
    const float *x;
    float s_enc;       /* NVFP4 tensor scale */
    float *fp8_scales;   /* per block */
    unsigned *scale_codes; /* MX and NVFP4, per block (as stored) */
    float *block_scale;  /* per block: the fp32 scale elements are multiplied by */
} quant_ref;

/* s_enc_given > 0: NVFP4's tensor scale as given (a half of a paired W13 shares the whole
 * matrix's), else derived from x. */
static void quant_ref_build_with(quant_ref *q, moe_format f, const float *x, int64_t rows, int64_t cols, int64_t ld,
                                 float s_enc_given) {
    memset(q, 0, sizeof *q);
    q->f = f, q->x = x, q->rows = rows, q->cols = cols, q->ld = ld;
    block_dims(f, rows, cols, &q->br, &q->bc);
    int64_t scale_rows = (rows + q->br - 1) / q->br;
    q->scale_cols = (cols + q->bc - 1) / q->bc;
    size_t nblocks = (size_t)(scale_rows * q->scale_cols) + 1;
    q->scale_codes = calloc(nblocks, sizeof(unsigned));
    q->block_scale = calloc(nblocks, sizeof(float));
    if (is_nvfp4(f)) {
        bool nan;
        double g = region_amax(x, ld, 0, rows, 0, cols, &nan);
        q->s_enc = g > 0 ? 2688.0f / (float)g : 1.0f; /* S_enc = 448 * 6 / amax */
        if (isinf(q->s_enc)) q->s_enc = FLT_MAX;       /* documented: amax < ~8e-36 */
        if (s_enc_given > 0) q->s_enc = s_enc_given;
    }
    if (is_plain(f)) return;
    if (f == MOE_FORMAT_FP8_TENSOR) q->block_scale[0] = 1.0f; /* the one scale of an empty matrix */
    for (int64_t bi = 0; bi < scale_rows; bi++)
        for (int64_t bj = 0; bj < q->scale_cols; bj++) {
            int64_t r0 = bi * q->br, c0 = bj * q->bc;
            int64_t r1 = r0 + q->br < rows ? r0 + q->br : rows, c1 = c0 + q->bc < cols ? c0 + q->bc : cols;
            bool nan;
            double amax = region_amax(x, ld, r0, r1, c0, c1, &nan);
            size_t b = (size_t)(bi * q->scale_cols + bj);
            if (f <= MOE_FORMAT_FP8_BLOCK128) {
                float s = (float)amax / 448.0f; /* amax / 448, 1 for a zero block */
                q->block_scale[b] = s > 0 ? s : 1.0f;
            } else if (is_mx(f)) {
                unsigned code = ref_mx_code(f, amax);
                q->block_scale[b] = (float)ref_e8m0(code);
                q->scale_codes[b] = (f == MOE_FORMAT_MXFP4 && nan) ? 0xFF : code;
            } else {
                unsigned code = ref_encode(&T_UE4M3, amax * q->s_enc / 6.0);
                if (code == 0 && region_has_inf(x, ld, r0, r1, c0, c1)) code = 0x7E; /* inf keeps its sign */
                q->block_scale[b] = (float)ref_ue4m3(code);
                q->scale_codes[b] = nan ? 0x7F : code;
            }
        }
}

static void quant_ref_build(quant_ref *q, moe_format f, const float *x, int64_t rows, int64_t cols, int64_t ld) {
    quant_ref_build_with(q, f, x, rows, cols, ld, 0.0f);
}

static void quant_ref_free(quant_ref *q) {
    free(q->scale_codes);
    free(q->block_scale);
}

static expected quant_ref_element(const quant_ref *q, int64_t r, int64_t c) {
    expected e = {0, 1.0f, true};
    double x = q->x[r * q->ld + c];
    switch (q->f) {
    case MOE_FORMAT_F32: e.code = bits_of((float)x); return e;
    case MOE_FORMAT_F16: e.code = ref_encode(&T_F16, x); return e;
    case MOE_FORMAT_BF16: e.code = ref_encode(&T_BF16, x); return e;
    default: break;
    }
    size_t b = (size_t)((r / q->br) * q->scale_cols + c / q->bc);
    float s = q->block_scale[b];
    if (q->f <= MOE_FORMAT_MXFP8_TE) {
        e.code = ref_encode(&T_E4M3, x / s);
        e.scale = q->f <= MOE_FORMAT_FP8_BLOCK128 ? s : (float)ref_e8m0(q->scale_codes[b]);
    } else if (q->f == MOE_FORMAT_MXFP4) {
        e.code = ref_encode(&T_E2M1, x / s);
        e.scale = (float)ref_e8m0(q->scale_codes[b]);
        e.check_code = q->scale_codes[b] != 0xFF;
    } else {
        e.code = s > 0 ? ref_encode(&T_E2M1, x * q->s_enc / s) : 0; /* zero block scale: code 0 */
        e.scale = (float)ref_ue4m3(q->scale_codes[b]) / q->s_enc;  /* s_b / S_enc, rounded once */
        e.check_code = q->scale_codes[b] != 0x7F;
    }
    return e;
}

static uint32_t stored_code(moe_format f, const void *codes, int64_t i) {
    const uint8_t *q8 = codes;
    if (f == MOE_FORMAT_F32) return ((const uint32_t *)codes)[i];
    if (f == MOE_FORMAT_F16 || f == MOE_FORMAT_BF16) return ((const uint16_t *)codes)[i];
    if (is_fp4(f)) return (q8[i / 2] >> (4 * (i % 2))) & 15u; /* element 2i in the low nibble */
    return q8[i];
}

static const format_table *element_table(moe_format f) {
    return f == MOE_FORMAT_F16 ? &T_F16 : f == MOE_FORMAT_BF16 ? &T_BF16 : is_fp4(f) ? &T_E2M1 : &T_E4M3;
}

/* The reconstruction error bound, given the element's fp32 scale s (y = x / s is what was
 * rounded). Derivations:
 *  - f16: 11 significant bits, so RNE is off by at most half an ulp <= 2^-11 |x| for normals
 *    (|x| >= 2^-14) and half the subnormal step, 2^-25, below. bf16: 8 bits, 2^-8 |x|, and
 *    half its subnormal step 2^-134 below 2^-126. f32: exact.
 *  - e4m3 elements: 4 significant bits: half an ulp <= 2^-4 |y| for |y| >= 2^-6, and half the
 *    subnormal step 2^-9, i.e. 2^-10, below. In x units multiply by s. |y| <= 448 for the FP8
 *    scales (s = amax/448: y can only pass 448 by fp32's rounding of s, by 448 * 2^-24, which
 *    saturation absorbs within the same bound) and for MXFP8-TE (scale >= amax/448).
 *    MXFP8-OCP: |y| < 2^9 = 512; the part above 448 clips: x' = +-448 * s exactly.
 *  - e2m1 elements: spacing 0.5 on [0, 2), 1 on [2, 4), 2 on [4, 6], so the error is at most
 *    0.25, 0.5, 1: <= max(0.25, |y|/4). Above 6 it clips to +-6 (MXFP4: |y| < 8; NVFP4 with
 *    a normal UE4M3 block scale: s_b >= (1 - 2^-4) * amax_b * S / 6, so |y| <= 6.4).
 *  - plus the fp32 rounding of the decode product (and of NVFP4's s_b / S_enc): 2^-22 |x'|. */
static double error_bound(moe_format f, double x, float s, double xq, bool *clipped) {
    double ax = fabs(x), y = fabs(x / s), dec_round = 0x1p-22 * fabs(xq);
    *clipped = false;
    switch (f) {
    case MOE_FORMAT_F32: return 0;
    case MOE_FORMAT_F16: return fmax(0x1p-11 * ax, 0x1p-25);
    case MOE_FORMAT_BF16: return fmax(0x1p-8 * ax, 0x1p-134);
    case MOE_FORMAT_MXFP4:
    case MOE_FORMAT_NVFP4:
    case MOE_FORMAT_NVFP4_2D:
        if (y > 6) *clipped = true;
        return fmax(0.25, y / 4) * s + dec_round;
    default:
        if (y > 448 * (1 + 0x1p-20)) *clipped = true;
        return fmax(0x1p-4 * y, 0x1p-10) * s + dec_round;
    }
}

/* How far |y| may go past the element max (clipping) in each format, given the element's
 * scale (for NVFP4 the block scale s_b itself):
 *  - FP8 scales s = fl(amax / 448): fp32 rounding only, 2^-24 relative for a normal s, an
 *    absolute 2^-150 for a subnormal one; MXFP8-TE: none (2^e >= amax / 448).
 *  - MXFP8-OCP: amax / 2^(floor(log2 amax) - 8) < 512; MXFP4: likewise < 8.
 *  - NVFP4: s_b = RNE(t), t = amax_b * S / 6, is off by at most max(2^-4 s_b, 2^-10) (half an
 *    ulp, or half the subnormal step 2^-9), so |y| <= 6 t / s_b <= 6 (1 + max(2^-4, 2^-10/s_b)). */
static double clip_limit(moe_format f, double s) {
    switch (f) {
    case MOE_FORMAT_MXFP8_OCP: return 512;
    case MOE_FORMAT_MXFP4: return 8;
    case MOE_FORMAT_NVFP4:
    case MOE_FORMAT_NVFP4_2D: return 6 * (1 + fmax(0x1p-4, 0x1p-10 / s)) * (1 + 0x1p-20);
    case MOE_FORMAT_MXFP8_TE: return 448;
    default: return 448 * (1 + 0x1p-23 + 0x1p-149 / s);
    }
}

/* Quantises x [rows, cols] (row stride ld) in format f and checks everything against the
 * reference. Returns the dequantised matrix (rows x cols, contiguous) for extra checks; the
 * caller frees it. Also hands back the codes/scales/tensor scale if asked. */
typedef struct quant_out {
    uint8_t *codes, *scales;
    float tensor_scale;
    float *deq;
    moe_format_layout layout;
} quant_out;

static void quant_out_free(quant_out *o) {
    free(o->codes);
    free(o->scales);
    free(o->deq);
}

static size_t scale_elem_bytes(const moe_format_layout *l) { return l->scale_dtype == MOE_DTYPE_F32 ? 4 : 1; }

static void check_quantized(moe_format f, const float *x, int64_t rows, int64_t cols, int64_t ld, const char *label,
                            quant_out *keep) {
    if (keep) memset(keep, 0, sizeof *keep);
    moe_format_layout l;
    if (moe_format_layout_get(f, rows, cols, &l) != MOE_STATUS_OK) {
        CHECK(0, "%s %s: layout failed: %s", NAMES[f], label, moe_last_error(NULL));
        return;
    }
    const size_t guard = 16;
    size_t scale_bytes = (size_t)(l.scale_rows * l.scale_cols) * scale_elem_bytes(&l);
    uint8_t *codes = malloc(l.code_bytes + guard), *scales = malloc(scale_bytes + guard);
    memset(codes, 0xA5, l.code_bytes + guard);
    memset(scales, 0xA5, scale_bytes + guard);
    float ts = -7.0f;
    moe_status st = moe_quantize(f, x, rows, cols, ld, codes, is_plain(f) ? NULL : scales, &ts);
    CHECK(st == MOE_STATUS_OK, "%s %s: moe_quantize: %s", NAMES[f], label, moe_last_error(NULL));
    for (size_t i = 0; i < guard; i++) {
        CHECK(codes[l.code_bytes + i] == 0xA5, "%s %s: write past the codes", NAMES[f], label);
        CHECK(scales[scale_bytes + i] == 0xA5, "%s %s: write past the scales", NAMES[f], label);
    }

    quant_ref q;
    quant_ref_build(&q, f, x, rows, cols, ld);
    if (is_nvfp4(f)) CHECK(bits_of(ts) == bits_of(q.s_enc), "%s %s: S_enc %.9g, expected %.9g", NAMES[f], label, ts, q.s_enc);
    else CHECK(ts == 1.0f, "%s %s: tensor_scale set to %g, expected 1 for formats without one", NAMES[f], label, ts);
    /* block scales */
    for (int64_t b = 0; b < l.scale_rows * l.scale_cols; b++) {
        if (l.scale_dtype == MOE_DTYPE_F32) {
            float got;
            memcpy(&got, scales + 4 * b, 4);
            CHECK(bits_of(got) == bits_of(q.block_scale[b]), "%s %s: scale %lld = %.9g, expected %.9g", NAMES[f],
                  label, (long long)b, got, q.block_scale[b]);
        } else {
            CHECK(scales[b] == q.scale_codes[b], "%s %s: scale code %lld = 0x%02x, expected 0x%02x", NAMES[f], label,
                  (long long)b, scales[b], q.scale_codes[b]);
        }
    }

    /* dequantise into a wider buffer whose padding must stay untouched */
    const int64_t ldo = cols + 3;
    float *out = malloc((size_t)(rows * ldo + 1) * sizeof(float));
    for (int64_t i = 0; i < rows * ldo + 1; i++) out[i] = 12345.0f;
    st = moe_dequantize(f, codes, is_plain(f) ? NULL : scales, ts, rows, cols, out, ldo);
    CHECK(st == MOE_STATUS_OK, "%s %s: moe_dequantize: %s", NAMES[f], label, moe_last_error(NULL));

    const format_table *et = element_table(f);
    int clipped_count = 0;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = cols; c < ldo; c++) CHECK(out[r * ldo + c] == 12345.0f, "%s %s: padding written", NAMES[f], label);
        for (int64_t c = 0; c < cols; c++) {
            expected e = quant_ref_element(&q, r, c);
            uint32_t got = stored_code(f, codes, r * cols + c);
            float xv = x[r * ld + c], xq = out[r * ldo + c];
            if (e.check_code)
                CHECK(f == MOE_FORMAT_F32 ? got == e.code : code_matches(et, got, e.code),
                      "%s %s: (%lld,%lld) x=%.9g code 0x%x, expected 0x%x", NAMES[f], label, (long long)r,
                      (long long)c, xv, got, e.code);
            float want = f == MOE_FORMAT_F32 ? float_from_bits(got) : (float)et->decode(got) * e.scale;
            CHECK(same_float(xq, want), "%s %s: (%lld,%lld) dequantised %.9g, expected decode * scale = %.9g",
                  NAMES[f], label, (long long)r, (long long)c, xq, want);
            if (!isfinite(xv) || !isfinite(want)) continue;
            bool clipped;
            double s = is_plain(f) ? 1.0 : e.scale, s_b = 0;
            if (is_nvfp4(f)) {
                s_b = ref_ue4m3(q.scale_codes[(r / q.br) * q.scale_cols + c / q.bc]);
                s = s_b / q.s_enc;
                if (s_b == 0) { /* t = amax_b * S / 6 rounded to 0: t <= 2^-10, and all decode to 0 */
                    CHECK(xq == 0 && fabs(xv) <= 6 * 0x1p-10 / q.s_enc, "%s %s: (%lld,%lld) zero block scale for %.9g",
                          NAMES[f], label, (long long)r, (long long)c, xv);
                    continue;
                }
            }
            double bound = error_bound(f, xv, (float)s, xq, &clipped);
            if (clipped) {
                clipped_count++;
                double y = fabs(xv / s);
                double top = f <= MOE_FORMAT_MXFP8_TE ? 448 : 6;
                double limit = clip_limit(f, is_nvfp4(f) ? s_b : s);
                CHECK(y <= limit, "%s %s: (%lld,%lld) |x/s| = %.9g clips past %.9g", NAMES[f], label, (long long)r,
                      (long long)c, y, limit);
                CHECK(fabs(fabs(xq) - top * s) <= 0x1p-22 * top * s && SIGN(xq) == SIGN(xv),
                      "%s %s: (%lld,%lld) clipped %.9g to %.9g, expected +-%g * %g", NAMES[f], label, (long long)r,
                      (long long)c, xv, xq, top, s);
            } else {
                CHECK(fabs(xv - xq) <= bound, "%s %s: (%lld,%lld) |%.9g - %.9g| = %.3g > bound %.3g", NAMES[f],
                      label, (long long)r, (long long)c, xv, xq, fabs(xv - xq), bound);
            }
        }
    }

    /* the packed stack: moe__qmatrix_set writes what moe_quantize wrote, and moe__qmatrix_row
     * decodes exactly what moe_dequantize decoded */
    float *xc = malloc((size_t)(rows * cols + 1) * sizeof(float));
    for (int64_t r = 0; r < rows; r++) memcpy(xc + r * cols, x + r * ld, (size_t)cols * sizeof(float));
    moe__qmatrix m;
    st = moe__qmatrix_alloc(&m, f, 3, rows, cols);
    CHECK(st == MOE_STATUS_OK, "%s %s: qmatrix_alloc: %s", NAMES[f], label, moe_last_error(NULL));
    if (st == MOE_STATUS_OK) {
        CHECK(moe__qmatrix_scale_bytes(&m) == scale_bytes, "%s %s: scale bytes %zu, expected %zu", NAMES[f], label,
              moe__qmatrix_scale_bytes(&m), scale_bytes);
        st = moe__qmatrix_set(&m, 1, xc);
        CHECK(st == MOE_STATUS_OK, "%s %s: qmatrix_set: %s", NAMES[f], label, moe_last_error(NULL));
        CHECK(memcmp(m.codes + l.code_bytes, codes, l.code_bytes) == 0, "%s %s: qmatrix codes differ", NAMES[f], label);
        CHECK(memcmp((uint8_t *)m.scales + scale_bytes, scales, scale_bytes) == 0, "%s %s: qmatrix scales differ",
              NAMES[f], label);
        if (l.has_tensor_scale) CHECK(m.tensor_scales[1] == ts, "%s %s: qmatrix tensor scale", NAMES[f], label);
        float *row = malloc((size_t)(cols + 1) * sizeof(float));
        for (int64_t r = 0; r < rows; r++) {
            moe__qmatrix_row(&m, 1, r, row);
            for (int64_t c = 0; c < cols; c++)
                CHECK(same_float(row[c], out[r * ldo + c]), "%s %s: qmatrix_row (%lld,%lld) = %.9g, dequantize %.9g",
                      NAMES[f], label, (long long)r, (long long)c, row[c], out[r * ldo + c]);
        }
        free(row);
        moe__qmatrix_free(&m);
    }
    free(xc);

    if (keep) {
        keep->codes = codes, keep->scales = scales, keep->tensor_scale = ts, keep->layout = l;
        keep->deq = malloc((size_t)(rows * cols + 1) * sizeof(float));
        for (int64_t r = 0; r < rows; r++) memcpy(keep->deq + r * cols, out + r * ldo, (size_t)cols * sizeof(float));
    } else {
        free(codes);
        free(scales);
    }
    (void)clipped_count;
    free(out);
    quant_ref_free(&q);
}

/* Random matrix with row stride ld: Gaussian values, each row at its own magnitude 2^k
 * (k in [-6, 6]) so blocks differ, some exact zeros, and padding that would change any
 * scale if it were read. */
static float *random_matrix(int64_t rows, int64_t cols, int64_t ld) {
    float *x = malloc((size_t)(rows * ld + 1) * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        double mag = ldexp(1.0, (int)rng_int(-6, 6));
        for (int64_t c = 0; c < ld; c++)
            x[r * ld + c] = c >= cols ? 1e30f : (rng_next() % 20 == 0) ? 0.0f : (float)(rng_normal() * mag);
    }
    return x;
}

static void case_quantize_random(void) {
    static const int64_t shapes[][2] = {{37, 300}, {130, 258}, {1, 2}, {16, 16}, {33, 64}, {17, 34}, {0, 8}, {3, 0}};
    for (int f = 0; f < MOE_FORMAT_COUNT_; f++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t rows = shapes[s][0], cols = shapes[s][1], ld = cols + rng_int(0, 3);
            float *x = random_matrix(rows, cols, ld);
            char label[64];
            snprintf(label, sizeof label, "random %lldx%lld ld %lld", (long long)rows, (long long)cols, (long long)ld);
            check_quantized((moe_format)f, x, rows, cols, ld, label, NULL);
            free(x);
        }
    }
}

/* Zero blocks, all-equal blocks, one huge outlier, tiny and huge magnitudes. */
static void case_quantize_special_blocks(void) {
    const int64_t rows = 40, cols = 288;
    for (int f = 0; f < MOE_FORMAT_COUNT_; f++) {
        /* all zero */
        float *x = calloc((size_t)(rows * cols), sizeof(float));
        quant_out o;
        check_quantized((moe_format)f, x, rows, cols, cols, "all zero", &o);
        for (int64_t i = 0; i < rows * cols; i++) CHECK(bits_of(o.deq[i]) == 0, "%s: zero matrix decodes to +0", NAMES[f]);
        if (f >= MOE_FORMAT_FP8_TENSOR && f <= MOE_FORMAT_FP8_BLOCK128)
            CHECK(((float *)o.scales)[0] == 1.0f, "%s: zero block scale 1", NAMES[f]);
        if (is_mx((moe_format)f)) CHECK(o.scales[0] == 127, "%s: zero block scale code 127", NAMES[f]);
        if (is_nvfp4((moe_format)f)) CHECK(o.tensor_scale == 1.0f && o.scales[0] == 0, "%s: zero NVFP4", NAMES[f]);
        quant_out_free(&o);

        /* random with zero blocks carved out (rows 0..15, cols 32..63 and 128..255) */
        free(x);
        x = random_matrix(rows, cols, cols);
        for (int64_t r = 0; r < 16; r++)
            for (int64_t c = 0; c < cols; c++)
                if ((c >= 32 && c < 64) || (c >= 128 && c < 256)) x[r * cols + c] = 0;
        check_quantized((moe_format)f, x, rows, cols, cols, "zero blocks", &o);
        for (int64_t r = 0; r < 16; r++)
            for (int64_t c = 32; c < 64; c++)
                CHECK(bits_of(o.deq[r * cols + c]) == 0, "%s: zero block decodes to +0", NAMES[f]);
        quant_out_free(&o);

        /* all equal: 3.7 everywhere, and -2.5e-3 */
        const float equal[2] = {3.7f, -2.5e-3f};
        for (int k = 0; k < 2; k++) {
            for (int64_t i = 0; i < rows * cols; i++) x[i] = equal[k];
            check_quantized((moe_format)f, x, rows, cols, cols, "all equal", &o);
            if (f >= MOE_FORMAT_FP8_TENSOR && f <= MOE_FORMAT_FP8_BLOCK128) {
                /* x / (x / 448) = 448 up to fp32 rounding of the scale: every code is +-448 and
                 * the value comes back to within a few fp32 ulps */
                for (int64_t i = 0; i < rows * cols; i++) {
                    CHECK((o.codes[i] & 0x7F) == 0x7E, "%s: all-equal code 0x%x", NAMES[f], o.codes[i]);
                    CHECK(fabsf(o.deq[i] - equal[k]) <= 0x1p-22f * fabsf(equal[k]), "%s: all-equal %.9g -> %.9g",
                          NAMES[f], equal[k], o.deq[i]);
                }
            }
            if (is_nvfp4((moe_format)f)) {
                /* S = 2688 / |v|, block scale 448, elements 6: v comes back within fp32 rounding */
                for (int64_t i = 0; i < rows * cols; i++)
                    CHECK(fabsf(o.deq[i] - equal[k]) <= 0x1p-21f * fabsf(equal[k]), "%s: all-equal %.9g -> %.9g",
                          NAMES[f], equal[k], o.deq[i]);
            }
            quant_out_free(&o);
        }

        /* one huge outlier in a block of ordinary values */
        free(x);
        x = random_matrix(rows, cols, cols);
        x[5 * cols + 7] = 1e4f;
        x[20 * cols + 200] = -3e5f;
        check_quantized((moe_format)f, x, rows, cols, cols, "outlier", &o);
        quant_out_free(&o);

        /* tiny values: FP8 scales go subnormal, the OCP E8M0 code clamps at 0, the TE quotient
         * amax / 448 is subnormal, NVFP4's S_enc would overflow */
        for (int64_t i = 0; i < rows * cols; i++) x[i] = (float)(rng_normal() * 1e-37);
        check_quantized((moe_format)f, x, rows, cols, cols, "tiny", &o);
        if (f == MOE_FORMAT_MXFP8_OCP) CHECK(o.scales[0] == 0, "OCP code clamps at 0: 0x%x", o.scales[0]);
        if (f == MOE_FORMAT_MXFP8_TE) /* amax / 448 ~ 2^-130: rounded up to E8M0's 2^-127 */
            CHECK(o.scales[0] == 0, "TE code for a subnormal amax/448: 0x%x", o.scales[0]);
        if (is_nvfp4((moe_format)f)) CHECK(o.tensor_scale == FLT_MAX, "S_enc clamps to FLT_MAX: %g", o.tensor_scale);
        quant_out_free(&o);

        /* magnitudes near the ends of fp32's range */
        for (int64_t i = 0; i < rows * cols; i++) x[i] = (float)(rng_normal() * (i % 2 ? 1e30 : 1e-30));
        if (f != MOE_FORMAT_F16 && f != MOE_FORMAT_BF16) /* f16/bf16 over/underflow: not a bound case */
            check_quantized((moe_format)f, x, rows, cols, cols, "wide range", NULL);
        free(x);
    }
}

/* NaN and inf inputs: no crash, NaN where the format can say NaN, inf saturates. */
static void case_quantize_nonfinite(void) {
    const int64_t rows = 20, cols = 96;
    for (int f = 0; f < MOE_FORMAT_COUNT_; f++) {
        float *x = random_matrix(rows, cols, cols);
        x[0 * cols + 3] = NAN;
        x[1 * cols + 40] = INFINITY;
        x[2 * cols + 70] = -INFINITY;
        quant_out o;
        check_quantized((moe_format)f, x, rows, cols, cols, "nan/inf", &o);
        moe_format fm = (moe_format)f;
        CHECK(isnan(o.deq[3]), "%s: NaN element decodes to NaN", NAMES[f]);
        if (f == MOE_FORMAT_MXFP4) /* the whole block (0, 0..31) */
            for (int c = 0; c < 32; c++) CHECK(isnan(o.deq[c]), "%s: NaN block decodes to NaN", NAMES[f]);
        if (is_nvfp4(fm)) /* block 0..15 of row 0 (rows 0..15 too for 2-D) */
            for (int r = 0; r < (fm == MOE_FORMAT_NVFP4_2D ? 16 : 1); r++)
                for (int c = 0; c < 16; c++) CHECK(isnan(o.deq[r * cols + c]), "%s: NaN block decodes to NaN", NAMES[f]);
        if (f <= MOE_FORMAT_MXFP8_TE) /* a NaN code per element: the neighbours stay finite */
            CHECK(isfinite(o.deq[4]) && isfinite(o.deq[2]), "%s: NaN's neighbours stay finite", NAMES[f]);
        if (is_plain(fm)) {
            CHECK(o.deq[1 * cols + 40] == INFINITY && o.deq[2 * cols + 70] == -INFINITY, "%s keeps inf", NAMES[f]);
        } else {
            CHECK(isfinite(o.deq[1 * cols + 40]) && o.deq[1 * cols + 40] > 0, "%s: +inf saturates: %g", NAMES[f],
                  o.deq[1 * cols + 40]);
            CHECK(isfinite(o.deq[2 * cols + 70]) && o.deq[2 * cols + 70] < 0, "%s: -inf saturates: %g", NAMES[f],
                  o.deq[2 * cols + 70]);
        }
        int nan_count = 0;
        for (int64_t i = 0; i < rows * cols; i++) nan_count += isnan(o.deq[i]);
        int want_nan = f == MOE_FORMAT_MXFP4 ? 32 : f == MOE_FORMAT_NVFP4 ? 16 : f == MOE_FORMAT_NVFP4_2D ? 256 : 1;
        CHECK(nan_count == want_nan, "%s: %d NaNs out, expected %d", NAMES[f], nan_count, want_nan);
        quant_out_free(&o);
        /* +-inf in a block of zeros (a zero scale from its finite values): signs kept, saturated */
        for (int64_t i = 0; i < rows * cols; i++) x[i] = i % cols < 32 ? 0.0f : x[i];
        x[5 * cols + 1] = INFINITY;
        x[5 * cols + 2] = -INFINITY;
        check_quantized(fm, x, rows, cols, cols, "inf among zeros", &o);
        if (!is_plain(fm))
            CHECK(isfinite(o.deq[5 * cols + 1]) && o.deq[5 * cols + 1] > 0 && o.deq[5 * cols + 2] == -o.deq[5 * cols + 1],
                  "%s: +-inf among zeros decode to %g, %g, expected +-a finite saturation", NAMES[f],
                  o.deq[5 * cols + 1], o.deq[5 * cols + 2]);
        quant_out_free(&o);
        /* all NaN: no crash, all NaN back, NVFP4 tensor scale 1 */
        for (int64_t i = 0; i < rows * cols; i++) x[i] = NAN;
        check_quantized(fm, x, rows, cols, cols, "all NaN", &o);
        for (int64_t i = 0; i < rows * cols; i++) CHECK(isnan(o.deq[i]), "%s: all-NaN matrix decodes to NaN", NAMES[f]);
        quant_out_free(&o);
        free(x);
    }
}

/* MXFP8: the OCP and TE rules give the same scale exactly when OCP clips nothing (the block
 * amax's mantissa <= 1.75, since 448 = 1.75 * 2^8); otherwise TE's scale is twice OCP's and
 * only OCP saturates the block maximum. */
static void case_mxfp8_ocp_vs_te(void) {
    const int64_t rows = 64, cols = 96;
    static const double mantissas[] = {1.0, 1.25, 1.5, 1.75, 1.75 + 0x1p-20, 1.8125, 1.8, 1.999, -1};
    float *x = malloc((size_t)(rows * cols) * sizeof(float));
    int nblocks = 0, same = 0, differ = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c0 = 0; c0 < cols; c0 += 32, nblocks++) {
            double m = mantissas[nblocks % 9];
            if (m < 0) m = 1 + rng_uniform();
            double amax = ldexp(m, (int)rng_int(-20, 20));
            for (int64_t c = c0; c < c0 + 32; c++) x[r * cols + c] = (float)(amax * 0.99 * (2 * rng_uniform() - 1));
            x[r * cols + c0 + rng_int(0, 31)] = (float)(rng_next() & 1 ? amax : -amax);
        }
    quant_out ocp, te;
    check_quantized(MOE_FORMAT_MXFP8_OCP, x, rows, cols, cols, "ocp vs te", &ocp);
    check_quantized(MOE_FORMAT_MXFP8_TE, x, rows, cols, cols, "ocp vs te", &te);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < cols / 32; b++) {
            bool nan;
            double amax = region_amax(x, cols, r, r + 1, b * 32, b * 32 + 32, &nan);
            unsigned so = ocp.scales[r * 3 + b], st = te.scales[r * 3 + b];
            double y_ocp = amax / ref_e8m0(so), y_te = amax / ref_e8m0(st);
            CHECK(y_te <= 448, "te block (%lld,%lld) clips: amax/scale = %g", (long long)r, (long long)b, y_te);
            if (y_ocp <= 448) {
                same++;
                CHECK(so == st, "block (%lld,%lld): OCP does not clip, yet scales differ 0x%x 0x%x", (long long)r,
                      (long long)b, so, st);
                CHECK(memcmp(ocp.codes + r * cols + b * 32, te.codes + r * cols + b * 32, 32) == 0,
                      "block (%lld,%lld): same scale, different codes", (long long)r, (long long)b);
            } else {
                differ++;
                CHECK(st == so + 1, "block (%lld,%lld): OCP clips (y %g), TE code 0x%x, expected 0x%x", (long long)r,
                      (long long)b, y_ocp, st, so + 1);
                int saturated = 0;
                for (int64_t c = b * 32; c < b * 32 + 32; c++) {
                    if (fabs(x[r * cols + c]) == amax) {
                        saturated += (ocp.codes[r * cols + c] & 0x7F) == 0x7E;
                        CHECK(fabsf(ocp.deq[r * cols + c]) < amax, "OCP clips the block max");
                    }
                }
                CHECK(saturated >= 1, "block (%lld,%lld): OCP block max not saturated", (long long)r, (long long)b);
            }
        }
    CHECK(same > 0 && differ > 0, "both kinds of block seen: %d same, %d differ", same, differ);
    quant_out_free(&ocp);
    quant_out_free(&te);
    free(x);
}

/* NVFP4 1-D and 2-D: tensor scale, the 2-D block geometry, scale invariance. */
static void case_nvfp4(void) {
    const int64_t rows = 37, cols = 50; /* partial blocks both ways */
    float *x = random_matrix(rows, cols, cols);
    for (int64_t c = 0; c < cols; c++) x[9 * cols + c] *= 100; /* one loud row sets the tensor amax */
    quant_out o1, o2;
    check_quantized(MOE_FORMAT_NVFP4, x, rows, cols, cols, "nvfp4", &o1);
    check_quantized(MOE_FORMAT_NVFP4_2D, x, rows, cols, cols, "nvfp4", &o2);
    bool nan;
    double g = region_amax(x, cols, 0, rows, 0, cols, &nan);
    CHECK(o1.tensor_scale == 2688.0f / (float)g && o2.tensor_scale == o1.tensor_scale, "S_enc = 448*6/amax");
    CHECK(o2.layout.scale_rows == 3 && o2.layout.scale_cols == 4, "2-D scale grid %lldx%lld",
          (long long)o2.layout.scale_rows, (long long)o2.layout.scale_cols);
    /* 2-D block (2, 3): rows 32..36, cols 48..49 */
    double amax = region_amax(x, cols, 32, 37, 48, 50, &nan);
    CHECK(o2.scales[2 * 4 + 3] == ref_encode(&T_UE4M3, amax * o2.tensor_scale / 6.0), "2-D corner block scale");
    /* a 16x16 block's amax covers its rows' 1x16 amaxes, so its scale is never smaller */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < 4; b++)
            CHECK(ref_ue4m3(o2.scales[(r / 16) * 4 + b]) >= ref_ue4m3(o1.scales[r * 4 + b]), "2-D scale >= 1-D scale");
    /* scaling x by 2^j scales S_enc by 2^-j and changes no code */
    float *x2 = malloc((size_t)(rows * cols) * sizeof(float));
    for (int64_t i = 0; i < rows * cols; i++) x2[i] = ldexpf(x[i], 5);
    quant_out o3;
    check_quantized(MOE_FORMAT_NVFP4, x2, rows, cols, cols, "nvfp4 x 32", &o3);
    CHECK(o3.tensor_scale == ldexpf(o1.tensor_scale, -5), "S_enc scales by 2^-5");
    CHECK(memcmp(o3.codes, o1.codes, o1.layout.code_bytes) == 0, "codes invariant under 2^j scaling");
    CHECK(memcmp(o3.scales, o1.scales, (size_t)(rows * 4)) == 0, "block scales invariant under 2^j scaling");
    quant_out_free(&o1);
    quant_out_free(&o2);
    quant_out_free(&o3);
    free(x);
    free(x2);
}

/* NVFP4 elements exactly on e2m1 midpoints (and one float either side), over many block
 * scales: ties must go to the even code, as the reference's nearest-even search says. With
 * tensor amax 5.25, S_enc = 2688 / 5.25 = 512 exactly; a block whose amax is v * 6 / 512
 * gets block scale v (any UE4M3 value: the quotient is exactly v), and x = mid * v / 512 is
 * exact in fp32, so x * S_enc / s_b lands exactly on the midpoint. */
static void case_nvfp4_midpoints(void) {
    static const double mids[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
    const int64_t rows = 64, cols = 160; /* 16-row groups: the 2-D blocks see the same scale */
    float *x = malloc((size_t)(rows * cols) * sizeof(float));
    int on_midpoint = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += 16)
        for (int64_t c0 = 0; c0 < cols; c0 += 16) {
            /* a UE4M3 scale code per 16x16 block: 0x7E (448, the tensor amax) for the first */
            unsigned code = (r0 == 0 && c0 == 0) ? 0x7E : (unsigned)rng_int(1, 0x7E);
            double v = ref_ue4m3(code);
            for (int64_t r = r0; r < r0 + 16; r++)
                for (int64_t c = c0; c < c0 + 16; c++) {
                    float mid = (float)(mids[rng_int(0, 6)] * v / 512.0);
                    int64_t step = rng_int(-1, 1);
                    float y = step == 0 ? mid : nextafterf(mid, step > 0 ? INFINITY : 0.0f);
                    on_midpoint += step == 0;
                    x[r * cols + c] = rng_next() & 1 ? -y : y;
                }
            x[r0 * cols + c0] = (float)(v * 6.0 / 512.0); /* the block amax: scale v exactly */
        }
    quant_out o1, o2;
    check_quantized(MOE_FORMAT_NVFP4, x, rows, cols, cols, "midpoints", &o1);
    check_quantized(MOE_FORMAT_NVFP4_2D, x, rows, cols, cols, "midpoints", &o2);
    CHECK(o1.tensor_scale == 512.0f && o2.tensor_scale == 512.0f, "S_enc %g %g, expected 512", o1.tensor_scale,
          o2.tensor_scale);
    CHECK(on_midpoint > rows * cols / 4, "only %d elements on a midpoint", on_midpoint);
    quant_out_free(&o1);
    quant_out_free(&o2);
    free(x);
}

/* E2M1 packing: element 2i in the low nibble. */
static void case_e2m1_packing(void) {
    const float x[6] = {0.5f, 1.0f, -2.0f, 6.0f, 0.0f, -0.5f};
    /* MXFP4: amax 6, floor(log2 6) - 2 = 0, scale 2^0 (code 127): codes 1, 2, 0xC, 7, 0, 9 */
    uint8_t codes[3] = {0}, scales[1] = {0};
    float ts = 0;
    CHECK(moe_quantize(MOE_FORMAT_MXFP4, x, 1, 6, 6, codes, scales, &ts) == MOE_STATUS_OK, "mxfp4 quantize");
    CHECK(scales[0] == 127, "mxfp4 scale code %d", scales[0]);
    CHECK(codes[0] == 0x21 && codes[1] == 0x7C && codes[2] == 0x90, "mxfp4 bytes %02x %02x %02x, expected 21 7c 90",
          codes[0], codes[1], codes[2]);
    /* NVFP4: S = 2688/6 = 448, block scale ue4m3(6 * 448 / 6) = 448 (0x7E), y = x: same bytes */
    memset(codes, 0, sizeof codes);
    CHECK(moe_quantize(MOE_FORMAT_NVFP4, x, 1, 6, 6, codes, scales, &ts) == MOE_STATUS_OK, "nvfp4 quantize");
    CHECK(ts == 448.0f && scales[0] == 0x7E, "nvfp4 S %g scale 0x%x", ts, scales[0]);
    CHECK(codes[0] == 0x21 && codes[1] == 0x7C && codes[2] == 0x90, "nvfp4 bytes %02x %02x %02x, expected 21 7c 90",
          codes[0], codes[1], codes[2]);
    /* and back */
    const uint8_t byte[1] = {0xA3}, s127[1] = {127};
    float out[2];
    CHECK(moe_dequantize(MOE_FORMAT_MXFP4, byte, s127, 1.0f, 1, 2, out, 2) == MOE_STATUS_OK, "mxfp4 dequantize");
    CHECK(out[0] == 1.5f && out[1] == -1.0f, "0xA3 -> low 3 (1.5), high 0xA (-1): got %g %g", out[0], out[1]);
}

/* Every code through moe__qmatrix_row's tables, against the scalar codecs and the bit layouts. */
static void case_qmatrix_all_codes(void) {
    moe__qmatrix m;
    /* e4m3: 1 x 256 FP8_TENSOR, scale 1 */
    CHECK(moe__qmatrix_alloc(&m, MOE_FORMAT_FP8_TENSOR, 1, 1, 256) == MOE_STATUS_OK, "alloc");
    for (int c = 0; c < 256; c++) m.codes[c] = (uint8_t)c;
    ((float *)m.scales)[0] = 1.0f;
    float row[4096];
    moe__qmatrix_row(&m, 0, 0, row);
    for (int c = 0; c < 256; c++)
        CHECK(same_float(row[c], (float)ref_e4m3((unsigned)c)) && SIGN(row[c]) == SIGN(ref_e4m3((unsigned)c)),
              "qmatrix e4m3 code 0x%x: %g", c, row[c]);
    moe__qmatrix_free(&m);
    moe__qmatrix_free(&m); /* twice is safe */
    /* e8m0: 256 rows of MXFP8, elements 1.0 (0x38), row r has scale code r */
    CHECK(moe__qmatrix_alloc(&m, MOE_FORMAT_MXFP8_OCP, 1, 256, 32) == MOE_STATUS_OK, "alloc");
    memset(m.codes, 0x38, m.layout.code_bytes);
    for (int r = 0; r < 256; r++) ((uint8_t *)m.scales)[r] = (uint8_t)r;
    for (int r = 0; r < 256; r++) {
        moe__qmatrix_row(&m, 0, r, row);
        CHECK(same_float(row[31], (float)ref_e8m0((unsigned)r)), "qmatrix e8m0 code %d: %g", r, row[31]);
    }
    moe__qmatrix_free(&m);
    /* e2m1: every byte, MXFP4 scale 2^0 */
    CHECK(moe__qmatrix_alloc(&m, MOE_FORMAT_MXFP4, 1, 1, 512) == MOE_STATUS_OK, "alloc");
    for (int b = 0; b < 256; b++) m.codes[b] = (uint8_t)b;
    memset(m.scales, 127, 16);
    moe__qmatrix_row(&m, 0, 0, row);
    for (int b = 0; b < 256; b++)
        CHECK(row[2 * b] == (float)ref_e2m1(b & 15u) && row[2 * b + 1] == (float)ref_e2m1((unsigned)b >> 4),
              "qmatrix e2m1 byte 0x%02x: %g %g", b, row[2 * b], row[2 * b + 1]);
    moe__qmatrix_free(&m);
    /* ue4m3: every scale code, NVFP4 elements 1.0 (0x22), tensor scale 1 */
    CHECK(moe__qmatrix_alloc(&m, MOE_FORMAT_NVFP4, 1, 1, 4096) == MOE_STATUS_OK, "alloc");
    memset(m.codes, 0x22, m.layout.code_bytes);
    for (int b = 0; b < 256; b++) ((uint8_t *)m.scales)[b] = (uint8_t)b;
    CHECK(m.tensor_scales[0] == 1.0f, "fresh tensor scale is 1");
    moe__qmatrix_row(&m, 0, 0, row);
    for (int b = 0; b < 256; b++)
        CHECK(same_float(row[16 * b + 5], (float)ref_ue4m3((unsigned)b)), "qmatrix ue4m3 code 0x%x: %g", b, row[16 * b + 5]);
    moe__qmatrix_free(&m);
    /* f16 and bf16: every code */
    for (int which = 0; which < 2; which++) {
        moe_format f = which ? MOE_FORMAT_BF16 : MOE_FORMAT_F16;
        CHECK(moe__qmatrix_alloc(&m, f, 2, 16, 4096) == MOE_STATUS_OK, "alloc");
        uint16_t *q = (uint16_t *)m.codes + 16 * 4096; /* matrix 1 */
        for (int i = 0; i < 65536; i++) q[i] = (uint16_t)i;
        for (int r = 0; r < 16; r++) {
            moe__qmatrix_row(&m, 1, r, row);
            for (int c = 0; c < 4096; c++) {
                unsigned code = (unsigned)(r * 4096 + c);
                double want = which ? ref_bf16(code) : ref_f16(code);
                CHECK(same_float(row[c], (float)want) && (isnan(want) || SIGN(row[c]) == SIGN(want)),
                      "qmatrix %s code 0x%04x: %g, expected %g", NAMES[f], code, row[c], want);
            }
        }
        moe__qmatrix_free(&m);
    }
}

/* Paired stacks (a gated W13: row 2i gate i, row 2i+1 up i). The 2-D block formats quantise
 * each half on its own grid, against the reference built on that half alone (NVFP4_2D with
 * the S_enc of the whole matrix), scale row 2b + s holding half s's block row b; every other
 * format stores exactly what moe_quantize writes for the whole interleaved matrix. And
 * moe__qmatrix_row decodes each row as decode(code) * its block's scale. */
static void case_qmatrix_paired(void) {
    static const int64_t halves[] = {136, 40, 1, 17, 256};
    for (int f = 0; f < MOE_FORMAT_COUNT_; f++) {
        for (size_t k = 0; k < sizeof halves / sizeof halves[0]; k++) {
            const moe_format fm = (moe_format)f;
            const int64_t I = halves[k], rows = 2 * I, cols = k % 2 ? 34 : 160;
            const bool two_d = fm == MOE_FORMAT_FP8_BLOCK128 || fm == MOE_FORMAT_NVFP4_2D;
            const int64_t br = fm == MOE_FORMAT_FP8_BLOCK128 ? 128 : 16;
            float *x = random_matrix(rows, cols, cols);
            moe__qmatrix m;
            moe_status st = moe__qmatrix_alloc_paired(&m, fm, 2, rows, cols);
            CHECK(st == MOE_STATUS_OK, "%s I %lld: alloc_paired: %s", NAMES[f], (long long)I, moe_last_error(NULL));
            if (st != MOE_STATUS_OK) {
                free(x);
                continue;
            }
            st = moe__qmatrix_set(&m, 1, x);
            CHECK(st == MOE_STATUS_OK, "%s I %lld: set: %s", NAMES[f], (long long)I, moe_last_error(NULL));
            moe_format_layout whole;
            moe_format_layout_get(fm, rows, cols, &whole);
            const int64_t want_sr = two_d ? 2 * ((I + br - 1) / br) : whole.scale_rows;
            CHECK(m.paired_rows == 1 && m.layout.scale_rows == want_sr && m.layout.scale_cols == whole.scale_cols &&
                      m.layout.code_bytes == whole.code_bytes,
                  "%s I %lld: paired layout %lld x %lld scales, expected %lld x %lld", NAMES[f], (long long)I,
                  (long long)m.layout.scale_rows, (long long)m.layout.scale_cols, (long long)want_sr,
                  (long long)whole.scale_cols);
            const uint8_t *codes = m.codes + m.layout.code_bytes;
            const uint8_t *scales = (const uint8_t *)m.scales + moe__qmatrix_scale_bytes(&m);
            const size_t sbytes = (size_t)(whole.scale_rows * whole.scale_cols) * scale_elem_bytes(&whole);
            float *row = malloc((size_t)cols * sizeof(float));
            if (!two_d) { /* byte for byte what moe_quantize writes for the whole matrix */
                uint8_t *wc = malloc(whole.code_bytes + 1), *ws = malloc(sbytes + 4);
                float ts = 0;
                moe_quantize(fm, x, rows, cols, cols, wc, ws, &ts);
                CHECK(memcmp(codes, wc, whole.code_bytes) == 0 && memcmp(scales, ws, sbytes) == 0 &&
                          (!whole.has_tensor_scale || m.tensor_scales[1] == ts),
                      "%s I %lld: paired differs from moe_quantize of the whole", NAMES[f], (long long)I);
                float *out = malloc((size_t)(rows * cols + 1) * sizeof(float));
                moe_dequantize(fm, wc, ws, ts, rows, cols, out, cols);
                for (int64_t r = 0; r < rows; r++) {
                    moe__qmatrix_row(&m, 1, r, row);
                    for (int64_t c = 0; c < cols; c++)
                        CHECK(same_float(row[c], out[r * cols + c]), "%s I %lld: row %lld col %lld", NAMES[f],
                              (long long)I, (long long)r, (long long)c);
                }
                free(out), free(wc), free(ws), free(row), free(x);
                moe__qmatrix_free(&m);
                continue;
            }
            /* 2-D: each half against its own reference */
            float s_enc = 0;
            if (fm == MOE_FORMAT_NVFP4_2D) {
                bool nan;
                double g = region_amax(x, cols, 0, rows, 0, cols, &nan);
                s_enc = g > 0 ? 2688.0f / (float)g : 1.0f;
                CHECK(bits_of(m.tensor_scales[1]) == bits_of(s_enc), "%s I %lld: S_enc %.9g, expected %.9g (whole W13)",
                      NAMES[f], (long long)I, m.tensor_scales[1], s_enc);
            }
            const format_table *et = element_table(fm);
            for (int64_t half = 0; half < 2; half++) {
                quant_ref q;
                quant_ref_build_with(&q, fm, x + half * cols, I, cols, 2 * cols, s_enc);
                const int64_t nbr = (I + br - 1) / br;
                for (int64_t b = 0; b < nbr; b++)
                    for (int64_t j = 0; j < q.scale_cols; j++) {
                        const int64_t at = (2 * b + half) * q.scale_cols + j, ref_at = b * q.scale_cols + j;
                        if (fm == MOE_FORMAT_FP8_BLOCK128) {
                            float got;
                            memcpy(&got, scales + 4 * at, 4);
                            CHECK(bits_of(got) == bits_of(q.block_scale[ref_at]),
                                  "%s I %lld half %lld: scale (%lld,%lld)", NAMES[f], (long long)I, (long long)half,
                                  (long long)b, (long long)j);
                        } else {
                            CHECK(scales[at] == q.scale_codes[ref_at], "%s I %lld half %lld: scale code (%lld,%lld)",
                                  NAMES[f], (long long)I, (long long)half, (long long)b, (long long)j);
                        }
                    }
                for (int64_t i = 0; i < I; i++) {
                    const int64_t r = 2 * i + half;
                    CHECK(moe__qmatrix_scale_row(&m, r) == 2 * (i / br) + half, "%s: scale row of row %lld", NAMES[f],
                          (long long)r);
                    moe__qmatrix_row(&m, 1, r, row);
                    for (int64_t c = 0; c < cols; c++) {
                        expected e = quant_ref_element(&q, i, c);
                        const uint32_t got = stored_code(fm, codes, r * cols + c);
                        if (e.check_code)
                            CHECK(code_matches(et, got, e.code), "%s I %lld: (%lld,%lld) code 0x%x, expected 0x%x",
                                  NAMES[f], (long long)I, (long long)r, (long long)c, got, e.code);
                        const float want = (float)et->decode(got) * e.scale;
                        CHECK(same_float(row[c], want), "%s I %lld: row (%lld,%lld) = %.9g, expected %.9g", NAMES[f],
                              (long long)I, (long long)r, (long long)c, row[c], want);
                    }
                }
                quant_ref_free(&q);
            }
            free(row), free(x);
            moe__qmatrix_free(&m);
        }
    }
    moe__qmatrix m;
    CHECK(moe__qmatrix_alloc_paired(&m, MOE_FORMAT_FP8_BLOCK128, 1, 7, 4) == MOE_STATUS_INVALID_ARGUMENT &&
              strstr(moe_last_error(NULL), "rows = 7"),
          "odd rows refused: %s", moe_last_error(NULL));
    CHECK(moe__qmatrix_alloc(&m, MOE_FORMAT_FP8_BLOCK128, 1, 300, 4) == MOE_STATUS_OK && m.paired_rows == 0 &&
              moe__qmatrix_scale_row(&m, 299) == 2,
          "unpaired: scale row r / 128");
    moe__qmatrix_free(&m);
}

/* ---------------------------------------------------------------------------------------
 * Bad arguments: the right status, and a message naming the argument.
 * ------------------------------------------------------------------------------------- */
#define CHECK_ERR(call, status, text)                                                                   \
    do {                                                                                              \
        moe_status st_ = (call);                                                                      \
        CHECK(st_ == (status) && strstr(moe_last_error(NULL), (text)) != NULL,                        \
              "%s: got %s (\"%s\"), expected %s naming \"%s\"", #call, moe_status_string(st_),          \
              moe_last_error(NULL), moe_status_string(status), text);                                 \
    } while (0)

static void case_bad_arguments(void) {
    float x[64] = {0}, out[64], ts = 0;
    uint8_t codes[256], scales[64];
    CHECK_ERR(moe_quantize(MOE_FORMAT_FP8_ROW128, NULL, 2, 8, 8, codes, scales, NULL), MOE_STATUS_NULL_POINTER, "x is NULL");
    CHECK_ERR(moe_quantize(MOE_FORMAT_FP8_ROW128, x, 2, 8, 8, NULL, scales, NULL), MOE_STATUS_NULL_POINTER, "codes is NULL");
    CHECK_ERR(moe_quantize(MOE_FORMAT_FP8_ROW128, x, 2, 8, 8, codes, NULL, NULL), MOE_STATUS_NULL_POINTER, "scales is NULL");
    CHECK_ERR(moe_quantize(MOE_FORMAT_NVFP4, x, 2, 8, 8, codes, scales, NULL), MOE_STATUS_NULL_POINTER, "tensor_scale is NULL");
    CHECK(moe_quantize(MOE_FORMAT_BF16, x, 2, 8, 8, codes, NULL, NULL) == MOE_STATUS_OK, "plain formats need no scales");
    CHECK(moe_quantize(MOE_FORMAT_MXFP8_TE, x, 2, 8, 8, codes, scales, NULL) == MOE_STATUS_OK, "tensor_scale optional");
    CHECK_ERR(moe_quantize(MOE_FORMAT_F32, x, -1, 8, 8, codes, scales, &ts), MOE_STATUS_INVALID_ARGUMENT, "rows = -1");
    CHECK_ERR(moe_quantize(MOE_FORMAT_F32, x, 1, -8, 8, codes, scales, &ts), MOE_STATUS_INVALID_ARGUMENT, "cols = -8");
    CHECK_ERR(moe_quantize(MOE_FORMAT_F32, x, 2, 8, 7, codes, scales, &ts), MOE_STATUS_INVALID_ARGUMENT, "ld = 7");
    CHECK_ERR(moe_quantize(MOE_FORMAT_MXFP4, x, 2, 7, 8, codes, scales, &ts), MOE_STATUS_INVALID_ARGUMENT, "cols = 7");
    CHECK_ERR(moe_quantize(MOE_FORMAT_NVFP4_2D, x, 2, 5, 8, codes, scales, &ts), MOE_STATUS_INVALID_ARGUMENT, "cols = 5");
    CHECK_ERR(moe_quantize((moe_format)42, x, 2, 8, 8, codes, scales, &ts), MOE_STATUS_INVALID_ARGUMENT, "format 42");
    CHECK_ERR(moe_quantize(MOE_FORMAT_FP8_TENSOR, x, INT64_C(1) << 40, INT64_C(1) << 30, INT64_C(1) << 30, codes, scales, &ts),
              MOE_STATUS_OVERFLOW, "rows * cols");
    CHECK_ERR(moe_quantize(MOE_FORMAT_FP8_TENSOR, x, INT64_C(1) << 32, 4, INT64_C(1) << 40, codes, scales, &ts),
              MOE_STATUS_OVERFLOW, "ld");
    CHECK_ERR(moe_dequantize(MOE_FORMAT_FP8_ROW128, NULL, scales, 1, 2, 8, out, 8), MOE_STATUS_NULL_POINTER, "codes is NULL");
    CHECK_ERR(moe_dequantize(MOE_FORMAT_FP8_ROW128, codes, NULL, 1, 2, 8, out, 8), MOE_STATUS_NULL_POINTER, "scales is NULL");
    CHECK_ERR(moe_dequantize(MOE_FORMAT_FP8_ROW128, codes, scales, 1, 2, 8, NULL, 8), MOE_STATUS_NULL_POINTER, "out is NULL");
    CHECK_ERR(moe_dequantize(MOE_FORMAT_FP8_ROW128, codes, scales, 1, 2, 8, out, 4), MOE_STATUS_INVALID_ARGUMENT, "ld = 4");
    CHECK_ERR(moe_dequantize(MOE_FORMAT_MXFP4, codes, scales, 1, 2, 3, out, 4), MOE_STATUS_INVALID_ARGUMENT, "cols = 3");
    CHECK_ERR(moe_dequantize(MOE_FORMAT_NVFP4, codes, scales, 0.0f, 2, 8, out, 8), MOE_STATUS_INVALID_ARGUMENT, "tensor_scale");
    CHECK_ERR(moe_dequantize(MOE_FORMAT_NVFP4, codes, scales, NAN, 2, 8, out, 8), MOE_STATUS_INVALID_ARGUMENT, "tensor_scale");
    CHECK_ERR(moe_dequantize(MOE_FORMAT_NVFP4, codes, scales, INFINITY, 2, 8, out, 8), MOE_STATUS_INVALID_ARGUMENT, "tensor_scale");
    CHECK_ERR(moe_dequantize(MOE_FORMAT_F16, codes, scales, 1, -2, 8, out, 8), MOE_STATUS_INVALID_ARGUMENT, "rows = -2");
    /* qmatrix helpers */
    moe__qmatrix m;
    CHECK_ERR(moe__qmatrix_alloc(NULL, MOE_FORMAT_F32, 1, 1, 1), MOE_STATUS_NULL_POINTER, "m is NULL");
    CHECK_ERR(moe__qmatrix_alloc(&m, MOE_FORMAT_F32, -1, 1, 1), MOE_STATUS_INVALID_ARGUMENT, "count = -1");
    CHECK(m.codes == NULL, "failed alloc leaves m zeroed");
    CHECK_ERR(moe__qmatrix_alloc(&m, MOE_FORMAT_NVFP4, 2, 4, 9), MOE_STATUS_INVALID_ARGUMENT, "cols = 9");
    CHECK_ERR(moe__qmatrix_alloc(&m, MOE_FORMAT_F32, INT64_C(1) << 45, 1024, 1024), MOE_STATUS_OVERFLOW, "overflow");
    CHECK(moe__qmatrix_alloc(&m, MOE_FORMAT_FP8_BLOCK128, 0, 4, 4) == MOE_STATUS_OK, "count 0 is fine");
    CHECK_ERR(moe__qmatrix_set(&m, 0, x), MOE_STATUS_INVALID_ARGUMENT, "index = 0");
    moe__qmatrix_free(&m);
    CHECK(moe__qmatrix_alloc(&m, MOE_FORMAT_FP8_BLOCK128, 2, 4, 4) == MOE_STATUS_OK, "alloc");
    CHECK_ERR(moe__qmatrix_set(&m, 2, x), MOE_STATUS_INVALID_ARGUMENT, "index = 2");
    CHECK_ERR(moe__qmatrix_set(&m, -1, x), MOE_STATUS_INVALID_ARGUMENT, "index = -1");
    CHECK_ERR(moe__qmatrix_set(&m, 0, NULL), MOE_STATUS_NULL_POINTER, "x is NULL");
    CHECK_ERR(moe__qmatrix_set(NULL, 0, x), MOE_STATUS_NULL_POINTER, "m is NULL");
    moe__qmatrix_free(&m);
    moe__qmatrix_free(NULL);
}

/* ---------------------------------------------------------------------------------------
 * Main.
 * ------------------------------------------------------------------------------------- */
typedef struct test_case {
    const char *name;
    void (*fn)(void);
} test_case;

int main(int argc, char **argv) {
    harness_seed("test_formats");
    harness_print_limit = 10;
    build_tables();
    static const test_case cases[] = {
        {"fp8_codes", case_fp8_codes},
        {"e2m1_codes", case_e2m1_codes},
        {"e8m0_ue4m3_codes", case_e8m0_ue4m3_codes},
        {"f16_bf16_codes", case_f16_bf16_codes},
        {"midpoints", case_midpoints},
        {"random_vs_reference", case_random_vs_reference},
        {"special_values", case_special_values},
        {"names", case_names},
        {"layouts", case_layouts},
        {"quantize_random", case_quantize_random},
        {"quantize_special_blocks", case_quantize_special_blocks},
        {"quantize_nonfinite", case_quantize_nonfinite},
        {"mxfp8_ocp_vs_te", case_mxfp8_ocp_vs_te},
        {"nvfp4", case_nvfp4},
        {"nvfp4_midpoints", case_nvfp4_midpoints},
        {"e2m1_packing", case_e2m1_packing},
        {"qmatrix_all_codes", case_qmatrix_all_codes},
        {"qmatrix_paired", case_qmatrix_paired},
        {"bad_arguments", case_bad_arguments},
    };
    const char *filter = argc > 1 ? argv[1] : NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (filter && !strstr(cases[i].name, filter)) continue;
        harness_case_begin();
        clock_t t0 = clock();
        cases[i].fn();
        char took[32];
        snprintf(took, sizeof took, " (%.0f ms)", 1000.0 * (double)(clock() - t0) / CLOCKS_PER_SEC);
        harness_case_end(cases[i].name, took);
    }
    for (size_t t = 0; t < sizeof ALL_TABLES / sizeof ALL_TABLES[0]; t++) free(ALL_TABLES[t]->mag);
    return harness_finish(cases_passed, cases_failed);
}
