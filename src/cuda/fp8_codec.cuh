// The e4m3 encoder of the FP8 activation quantisers: quant.cu's kernels and the Hopper FP8
// GEMM1 epilogue that quantises A2 (hopper/grouped_fp8_kernel.cuh) produce the same codes.
//
// The CPU oracle quantises through moe_quantize (src/core/formats.c), and the GPU must produce
// the SAME codes: a code off by one step moves a product by 1/16 of its size. Its rule:
//   scale = amax / 448 in fp32 (amax over the finite values; 1 when the quotient is not > 0),
//   code  = x / scale formed in double and rounded once, to nearest even, into e4m3 (saturating
//           at 448; NaN -> sign | 0x7F, +-inf -> +-448).
// Here the quotient is formed in fp32 (correctly rounded) and rounded into e4m3 from its bits.
// That double rounding differs from the single one only when the fp32 quotient lands exactly on
// an e4m3 rounding midpoint while the exact quotient does not (a midpoint has at most 5
// significant bits, so it is an fp32 number, and no other fp32 rounding can cross it). Only in
// that case the quotient is formed again in double, which is on the same side of the midpoint
// as the exact one (the exact quotient is at least ~2^-30 relative away from a midpoint it
// does not equal, far more than double's 2^-53), and the fp32 quotient is nudged one ulp to
// that side. The encoder is __host__ __device__, so the host can test it (moe__cuda_fp8_encode_host).
#ifndef MOEFUSE_CUDA_FP8_CODEC_CUH
#define MOEFUSE_CUDA_FP8_CODEC_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>

namespace moe_fp8 {

__host__ __device__ __forceinline__ uint32_t bits_of(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
#endif
}

__host__ __device__ __forceinline__ float float_of(uint32_t b) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
#endif
}

__host__ __device__ __forceinline__ float div_rn(float x, float s) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(x, s);
#else
    return x / s;
#endif
}

#define F32_TWO_POW_MINUS_6 0x3C800000u // bits of 2^-6, e4m3's smallest normal

// The e4m3 magnitude code of a finite a >= 0: nearest, ties to even, saturating at 448 (0x7E).
__host__ __device__ __forceinline__ uint32_t e4m3_magnitude(float a) {
    if (a >= 448.0f) return 0x7Eu;
    const uint32_t b = bits_of(a);
    // Subnormal range: steps of 2^-9, so the code is a * 2^9 rounded (exact scaling); 8 is
    // code 0x08 = 2^-6, the first normal, as it should be.
    if (b < F32_TWO_POW_MINUS_6) return (uint32_t)rintf(a * 512.0f);
    // Normal: keep 3 of fp32's 23 mantissa bits, rounding on the 20 dropped; a carry out of
    // the mantissa moves to the next exponent, as it should.
    const uint32_t exponent = (b >> 23) - 127u + 7u, kept = (b >> 20) & 7u, dropped = b & 0xFFFFFu;
    uint32_t code = (exponent << 3) | kept;
    if (dropped > 0x80000u || (dropped == 0x80000u && (kept & 1u))) code++;
    return code > 0x7Eu ? 0x7Eu : code;
}

// Whether a finite 0 <= a < 448 is exactly halfway between two e4m3 magnitudes.
__host__ __device__ __forceinline__ bool e4m3_midpoint(float a) {
    const uint32_t b = bits_of(a);
    if (b < F32_TWO_POW_MINUS_6) { // midpoints are odd multiples of 2^-10
        const float t = a * 1024.0f;
        return t == floorf(t) && ((uint32_t)t & 1u);
    }
    return (b & 0xFFFFFu) == 0x80000u;
}

// The e4m3 code of x / s (s > 0 finite), exactly as formats.c's encode_e4m3((double)x / s).
__host__ __device__ __forceinline__ uint8_t fp8_encode(float x, float s) {
    const uint32_t xb = bits_of(x), mag = xb & 0x7FFFFFFFu;
    const uint8_t sign = (uint8_t)((xb >> 24) & 0x80u);
    if (mag > 0x7F800000u) return sign | 0x7Fu;  // NaN
    if (mag == 0x7F800000u) return sign | 0x7Eu; // inf saturates
    float q = fabsf(div_rn(x, s));
    if (q < 448.0f && e4m3_midpoint(q)) {
        // Settle the tie in double (see the top of the file); q is > 0 here.
        const double exact = fabs((double)x / (double)s);
        if (exact > (double)q) q = float_of(bits_of(q) + 1u);
        else if (exact < (double)q) q = float_of(bits_of(q) - 1u);
    }
    return sign | (uint8_t)e4m3_magnitude(q);
}

// The value of an e4m3 magnitude code c <= 0x7E.
__host__ __device__ __forceinline__ float e4m3_value(uint32_t c) {
    const uint32_t e = c >> 3, m = c & 7u;
    return e == 0 ? (float)m * 0x1p-9f : float_of(((e + 120u) << 23) | (m << 20));
}

// Two floats >= 0 (or NaN) to e4m3, nearest, ties to even, saturating at 448: the low byte of
// the result is lo's code, the high byte hi's. On the GPU the hardware conversion; on the host
// (tests) the same rounding by e4m3_magnitude.
__host__ __device__ __forceinline__ uint32_t e4m3x2_rn(float hi, float lo) {
#ifdef __CUDA_ARCH__
    uint16_t d;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
    return d;
#else
    const uint32_t c_hi = hi != hi ? 0x7Fu : e4m3_magnitude(hi), c_lo = lo != lo ? 0x7Fu : e4m3_magnitude(lo);
    return (c_hi << 8) | c_lo;
#endif
}

// What fp8_encode_fast needs of a scale, once per scale: k, a power of two that lifts a tiny
// scale (below 2^-64) to where 1/s is a normal float and the fma below cannot underflow (both
// fail for scales near fp32's bottom: ~1e-36 and below, i.e. groups whose largest value is
// ~1e-33 or less); s = scale * k (exact) and r = 1/s rounded. x * k is exact too and, as |x| <=
// 448 * scale for the values of the group, finite.
struct fp8_divisor {
    float k, s, r;
};
__host__ __device__ __forceinline__ fp8_divisor fp8_divisor_of(float scale) {
    fp8_divisor d;
    d.k = scale < 0x1p-64f ? 0x1p64f : 1.0f;
    d.s = scale * d.k;
#ifdef __CUDA_ARCH__
    d.r = __frcp_rn(d.s);
#else
    d.r = 1.0f / d.s;
#endif
    return d;
}

// fp8_encode(x, scale), the same code for every x and every scale fp8_scale returns (2^-149 ..
// 2^120), without a division or a branch on the common path; d = fp8_divisor_of(scale). With
// a = |x| * k: a * r is within 2^-23 (relative) of the exact a / s = |x| / scale, so the exact
// quotient lies in [lo, hi] = a * r * (1 -+ 2^-22) (each product rounded once more, which
// keeps it inside). Rounding into e4m3 is monotone, so when lo and hi take the same code the
// exact quotient takes it too. Otherwise the interval holds the midpoint m of the two adjacent
// codes (the interval is 2^-21 wide; codes are >= 2^-4 apart relative), and the side of it the
// exact quotient is on is the sign of a - m * s, which one fma gives exactly (m has at most 5
// significant bits, so m * s is exact in the fma's product; a nonzero difference is at least
// s * 2^-29 in size, far above fp32's smallest subnormal once s >= 2^-85, and the one rounding
// keeps its sign; zero: a tie, to the even code). Saturation (quotients above 448) and
// subnormal codes follow the same argument; quotients below 2^-126 have code 0 either way; NaN
// and inf as fp8_encode. Checked on the host against fp8_encode (test_gpu_forward --selftest,
// the hardware conversion emulated) and on the GPU by the suite's bit-exact quantiser cases.
__host__ __device__ __forceinline__ uint8_t fp8_encode_fast(float x, const fp8_divisor &d) {
    const uint32_t xb = bits_of(x), mag = xb & 0x7FFFFFFFu;
    const uint32_t sign = (xb >> 24) & 0x80u;
    const float a = float_of(mag) * d.k, q = a * d.r;
    const uint32_t both = e4m3x2_rn(q * (1.0f + 0x1p-22f), q * (1.0f - 0x1p-22f));
    const uint32_t c_lo = both & 0xFFu, c_hi = both >> 8;
    uint32_t code = c_lo;
    if (c_lo != c_hi) { // rare: a midpoint within 2^-22 of the quotient
        const float m = 0.5f * (e4m3_value(c_lo) + e4m3_value(c_hi));
        const float diff = fmaf(-m, d.s, a);
        code = diff > 0.0f ? c_hi : diff < 0.0f ? c_lo : (c_lo & 1u ? c_hi : c_lo);
    }
    if (mag >= 0x7F800000u) code = mag == 0x7F800000u ? 0x7Eu : 0x7Fu; // inf saturates, NaN
    return (uint8_t)(sign | code);
}

// The bits of |v| when v is finite, else 0 (formats.c's finite_amax works on the same bits).
__device__ __forceinline__ uint32_t finite_abs_bits(float v) {
    const uint32_t a = bits_of(v) & 0x7FFFFFFFu;
    return a < 0x7F800000u ? a : 0u;
}

// scale = amax / 448, or 1 when that is not > 0.
__device__ __forceinline__ float fp8_scale(uint32_t amax_bits) {
    const float s = div_rn(float_of(amax_bits), 448.0f);
    return s > 0.0f ? s : 1.0f;
}

} // namespace moe_fp8

#endif
