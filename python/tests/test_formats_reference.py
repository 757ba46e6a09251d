"""moefuse's number formats against independent references.

Element codecs: every code decoded, and a dense set of fp32 inputs encoded (every bf16 value,
every midpoint between neighbouring values of the target format and its fp32 neighbours, the
overflow threshold, specials, random bit patterns), compared with ml_dtypes' round to nearest
even. moefuse differs from ml_dtypes only where moefuse.h says it does (e4m3 and e5m2 saturate,
inf included, where ml_dtypes gives NaN or inf; e2m1 maps NaN to +6), and those inputs are
checked against the documented value.

Block formats: a plain numpy reference per format, written from the published conventions
(DeepSeek-V3's amax/448 FP8 scales, OCP MX v1.0, Transformer Engine's MXFP8 scale, NVFP4 with
its encode-side tensor scale S_enc = 448*6/amax), compared bit for bit with moe_quantize's codes,
scales and tensor scale and with moe_dequantize, on random data and on adversarial blocks.

ml_dtypes is required: without it this module fails to import (an error, not a skip).
"""

import ctypes
import math

import ml_dtypes  # noqa: F401  (required, see above)
import numpy as np
import pytest

from moefuse import _lib
from moefuse._lib import DType, Format, Status

E4M3, E5M2, E2M1 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float4_e2m1fn
E8M0, BF16 = ml_dtypes.float8_e8m0fnu, ml_dtypes.bfloat16
FLT_MAX = float(np.finfo(np.float32).max)


def C():
    return _lib.lib()


# ---------------------------------------------------------------------------------------
# Helpers.
# ---------------------------------------------------------------------------------------

def f32(bits):
    return np.asarray(bits, np.uint32).view(np.float32)


def bits32(x):
    return np.asarray(x, np.float32).view(np.uint32)


def assert_same_floats(got, want, what):
    """Bit-exact, except that any NaN matches any NaN of the same sign."""
    got, want = np.asarray(got, np.float32).ravel(), np.asarray(want, np.float32).ravel()
    assert got.shape == want.shape, what
    gn, wn = np.isnan(got), np.isnan(want)
    bad = np.flatnonzero((gn != wn) | (~gn & (bits32(got) != bits32(want))) |
                         (gn & wn & (np.signbit(got) != np.signbit(want))))
    assert bad.size == 0, (f"{what}: {bad.size} mismatches, first at {bad[:5]}: got {got[bad[:5]]}, "
                           f"want {want[bad[:5]]}")


def assert_same_codes(got, want, what, inputs=None):
    got, want = np.asarray(got).ravel(), np.asarray(want).ravel()
    bad = np.flatnonzero(got != want)
    extra = f" for inputs {np.asarray(inputs).ravel()[bad[:5]]}" if inputs is not None else ""
    assert bad.size == 0, f"{what}: {bad.size} mismatches at {bad[:5]}: got {got[bad[:5]]}, want {want[bad[:5]]}{extra}"


def decode_all(name, codes):
    return np.fromiter(map(getattr(C(), name), codes.tolist()), np.float32, count=len(codes))


def encode_all(name, x, dtype):
    return np.fromiter(map(getattr(C(), name), np.asarray(x, np.float32).tolist()), dtype, count=len(x))


def neighbours(v):
    """v and its fp32 neighbours either way."""
    v = np.asarray(v, np.float32)
    return np.concatenate([v, np.nextafter(v, np.float32(np.inf)), np.nextafter(v, np.float32(-np.inf))])


def dense_inputs(values, rng):
    """fp32 inputs for an encoder into a format whose finite values are `values` (float64)."""
    with np.errstate(over="ignore", invalid="ignore"):  # nextafter(max), 2 * bf16 max: inf on purpose
        return _dense_inputs(values, rng)


def _dense_inputs(values, rng):
    v = np.unique(values[np.isfinite(values)])  # sorted, both signs
    mids = (v[:-1] + v[1:]) / 2
    assert np.all(mids.astype(np.float32) == mids), "midpoints are fp32 values"
    top = v[-1]
    over = top + (top - v[-2]) / 2  # the overflow threshold: half a top-binade step above the max
    specials = np.array([0.0, -0.0, np.inf, -np.inf, top, -top, over, -over, 2 * top, -2 * top,
                         FLT_MAX, -FLT_MAX], np.float32)
    nans = f32([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFBFFFFF, 0x7FA00000])
    all_bf16 = f32(np.arange(1 << 16, dtype=np.uint32) << 16)
    random_bits = f32(rng.integers(0, 1 << 32, 500_000, dtype=np.uint64).astype(np.uint32))
    tiny = float(v[v > 0].min())  # the smallest subnormal of the target
    random_range = (rng.choice([-1.0, 1.0], 500_000) *
                    np.exp(rng.uniform(math.log(tiny / 4), math.log(top * 4), 500_000))).astype(np.float32)
    return np.concatenate([neighbours(v), neighbours(mids), neighbours(specials), nans, all_bf16, random_bits,
                           random_range])


def codes_of(x64, dtype, limit):
    """Correctly rounded (RNE) codes of float64 values, saturated to +-limit; NaN stays NaN."""
    x64 = np.asarray(x64, np.float64)
    y = np.where(np.isnan(x64), x64, np.clip(x64, -limit, limit))
    return y.astype(dtype).view(np.uint8) & (0x0F if dtype is E2M1 else 0xFF)


def values_of(codes, dtype):
    codes = np.asarray(codes, np.uint8)
    return (codes & (0x0F if dtype is E2M1 else 0xFF)).view(dtype).astype(np.float64)


# ---------------------------------------------------------------------------------------
# 1. Element codecs.
# ---------------------------------------------------------------------------------------

def test_decode_every_8bit_code():
    codes = np.arange(256, dtype=np.uint8)
    assert_same_floats(decode_all("moe_e4m3_to_float", codes), codes.view(E4M3).astype(np.float32), "e4m3")
    assert_same_floats(decode_all("moe_e5m2_to_float", codes), codes.view(E5M2).astype(np.float32), "e5m2")
    # E8M0: 2^(code-127), code 0 = 2^-127 (an fp32 subnormal), 0xFF NaN.
    assert_same_floats(decode_all("moe_e8m0_to_float", codes), codes.view(E8M0).astype(np.float32), "e8m0")
    # E2M1: the low 4 bits (moefuse.h: "low 4 bits used").
    assert_same_floats(decode_all("moe_e2m1_to_float", codes), (codes & 15).view(E2M1).astype(np.float32), "e2m1")
    # UE4M3: e4m3 with sign 0; bit 7 is not part of the value and is ignored (moefuse.h).
    assert_same_floats(decode_all("moe_ue4m3_to_float", codes), (codes & 0x7F).view(E4M3).astype(np.float32),
                       "ue4m3")


def test_decode_every_16bit_code():
    codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    assert_same_floats(decode_all("moe_bf16_to_float", codes), codes.view(BF16).astype(np.float32), "bf16")
    assert_same_floats(decode_all("moe_f16_to_float", codes), codes.view(np.float16).astype(np.float32), "f16")


# name, ml_dtypes type, moefuse encoder, code dtype
ENCODERS = [
    ("e4m3", E4M3, "moe_float_to_e4m3", np.uint8),
    ("e5m2", E5M2, "moe_float_to_e5m2", np.uint8),
    ("e2m1", E2M1, "moe_float_to_e2m1", np.uint8),
    ("ue4m3", E4M3, "moe_float_to_ue4m3", np.uint8),
    ("bf16", BF16, "moe_float_to_bf16", np.uint16),
    ("f16", np.float16, "moe_float_to_f16", np.uint16),
]


@pytest.mark.parametrize("name, ref_type, fn, code_type", ENCODERS, ids=[e[0] for e in ENCODERS])
def test_encode_dense_against_ml_dtypes(rng, name, ref_type, fn, code_type):
    nbits = 16 if code_type == np.uint16 else 8
    all_codes = np.arange(1 << nbits, dtype=np.uint32).astype(code_type)
    if name == "e2m1":
        all_codes = all_codes[:16]
    with np.errstate(invalid="ignore"):  # the NaN codes
        x = dense_inputs(all_codes.view(ref_type).astype(np.float64), rng)
    if name == "ue4m3":
        x = np.abs(x)  # the reference below takes |f|; moefuse gets the signed inputs too (next line)
    got = encode_all(fn, x, code_type)
    if name == "ue4m3":
        assert_same_codes(encode_all(fn, -x, code_type), got, "ue4m3 of -f = ue4m3 of f")
    with np.errstate(over="ignore", invalid="ignore"):  # ml_dtypes' overflow to NaN or inf
        ref = x.astype(ref_type).view(code_type) & (0x0F if name == "e2m1" else (1 << nbits) - 1)
    ref_value = ref.view(ref_type).astype(np.float64) if name != "e2m1" else values_of(ref, E2M1)
    nan_in = np.isnan(x)
    neg = np.signbit(x)
    special = nan_in.copy()
    if name in ("e4m3", "ue4m3"):
        # ml_dtypes: anything that rounds past 448 (|x| > 464, 464 ties to 448) and inf give NaN;
        # moefuse.h: saturates to +-448.
        over = ~nan_in & np.isnan(ref_value)
        assert np.array_equal(over, ~nan_in & (np.abs(x) > 464)), "ml_dtypes' e4m3 overflow threshold"
        sat = np.where(neg, 0xFE, 0x7E)
        assert_same_codes(got[over], sat[over], f"{name} saturation", x[over])
        special |= over
    if name == "e5m2":
        # ml_dtypes (IEEE): |x| >= 61440 and inf give inf; moefuse.h: saturates to +-57344, inf too.
        over = ~nan_in & np.isinf(ref_value)
        assert np.array_equal(over, ~nan_in & (np.abs(x) >= 61440)), "ml_dtypes' e5m2 overflow threshold"
        assert_same_codes(got[over], np.where(neg, 0xFB, 0x7B)[over], "e5m2 saturation", x[over])
        special |= over
    if name == "e2m1":
        # E2M1 has no NaN: moefuse.h says NaN -> +6 (code 7); ml_dtypes gives a zero.
        assert_same_codes(got[nan_in], np.full(nan_in.sum(), 7), "e2m1 of NaN")
        assert np.all(np.isfinite(ref_value)), "ml_dtypes' e2m1 saturates too"
    else:
        # NaN stays NaN, with its sign.
        dec = got.view(ref_type).astype(np.float32)[nan_in]
        assert np.all(np.isnan(dec)), f"{name}: NaN must stay NaN"
        if name != "ue4m3":
            assert np.array_equal(np.signbit(dec), neg[nan_in]), f"{name}: NaN keeps its sign"
    keep = ~special
    assert_same_codes(got[keep], ref[keep], f"{name} vs ml_dtypes RNE", x[keep])


# ---------------------------------------------------------------------------------------
# 2. Block formats: layouts, then one reference quantiser per format.
# ---------------------------------------------------------------------------------------

def cdiv(a, b):
    return -(-a // b)


# format: (code bits, (block rows, block cols) or None, scale dtype, tensor scale)
FORMATS = {
    Format.F32: (32, None, None, 0), Format.F16: (16, None, None, 0), Format.BF16: (16, None, None, 0),
    Format.FP8_TENSOR: (8, "tensor", DType.F32, 0), Format.FP8_ROW128: (8, (1, 128), DType.F32, 0),
    Format.FP8_BLOCK128: (8, (128, 128), DType.F32, 0), Format.MXFP8_OCP: (8, (1, 32), DType.E8M0, 0),
    Format.MXFP8_TE: (8, (1, 32), DType.E8M0, 0), Format.MXFP4: (4, (1, 32), DType.E8M0, 0),
    Format.NVFP4: (4, (1, 16), DType.UE4M3, 1), Format.NVFP4_2D: (4, (16, 16), DType.UE4M3, 1),
}


def layout(fmt, rows, cols):
    lay = _lib.MoeFormatLayout()
    _lib.check(C().moe_format_layout_get(int(fmt), rows, cols, ctypes.byref(lay)))
    return lay


def test_every_format_is_covered():
    assert set(FORMATS) == set(Format)


@pytest.mark.parametrize("fmt", list(Format), ids=[f.name for f in Format])
def test_layout(fmt):
    bits, block, sdt, has_ts = FORMATS[fmt]
    for rows, cols in [(0, 0), (1, 2), (3, 40), (130, 260), (16, 32), (129, 128)]:
        lay = layout(fmt, rows, cols)
        assert lay.code_bytes == rows * cols * bits // 8
        if block is None:
            want = (0, 0)
        elif block == "tensor":
            want = (1, 1)
        else:
            want = (cdiv(rows, block[0]), cdiv(cols, block[1]))
        assert (lay.scale_rows, lay.scale_cols) == want, (rows, cols)
        if sdt is not None:
            assert lay.scale_dtype == sdt
        assert lay.has_tensor_scale == has_ts


def quantize(fmt, x):
    x = np.ascontiguousarray(x, np.float32)
    rows, cols = x.shape
    lay = layout(fmt, rows, cols)
    codes = np.zeros(max(lay.code_bytes, 1), np.uint8)
    sdt = np.float32 if lay.scale_dtype == DType.F32 else np.uint8
    scales = np.zeros((lay.scale_rows, lay.scale_cols), sdt)
    buf = scales if scales.size else np.zeros(1, sdt)  # scales must not be NULL for a block format
    ts = ctypes.c_float(-1.0)
    _lib.check(C().moe_quantize(int(fmt), x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), rows, cols, cols,
                                codes.ctypes.data, buf.ctypes.data, ctypes.byref(ts)))
    return codes[:lay.code_bytes], scales, ts.value


def dequantize(fmt, codes, scales, ts, rows, cols):
    out = np.empty((rows, cols), np.float32)
    if scales.size == 0 and FORMATS[fmt][1] is not None:
        scales = np.zeros(1, scales.dtype)  # must not be NULL for a block format
    st = C().moe_dequantize(int(fmt), codes.ctypes.data, scales.ctypes.data if scales.size else None, ts, rows,
                            cols, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), cols)
    _lib.check(st)
    return out


def finite_amax(block):
    a = np.abs(np.asarray(block, np.float64))
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 0.0


def pack_e2m1(c):
    return (c[:, 0::2] | (c[:, 1::2] << 4)).astype(np.uint8).ravel()


def unpack_e2m1(codes, rows, cols):
    c = np.asarray(codes, np.uint8).reshape(rows, cols // 2)
    out = np.empty((rows, cols), np.uint8)
    out[:, 0::2], out[:, 1::2] = c & 15, c >> 4
    return out


def ref_fp8(x, br, bc):
    """DeepSeek-V3 block FP8: scale = amax/448 in fp32 (the dequant multiplier, as its
    weight_scale_inv), codes = e4m3(x / scale) saturated. moefuse.h: 1 for an all-zero block."""
    rows, cols = x.shape
    s = np.ones((cdiv(rows, br), cdiv(cols, bc)), np.float32)
    q = np.zeros((rows, cols), np.uint8)
    deq = np.zeros((rows, cols), np.float32)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            blk = (slice(i * br, (i + 1) * br), slice(j * bc, (j + 1) * bc))
            scale = np.float32(finite_amax(x[blk])) / np.float32(448.0)
            if not scale > 0:
                scale = np.float32(1.0)
            s[i, j] = scale
            q[blk] = codes_of(x[blk].astype(np.float64) / np.float64(scale), E4M3, 448)
            deq[blk] = q[blk].view(E4M3).astype(np.float32) * scale
    return q.ravel(), s, deq


def e8m0_ocp(amax, emax):
    """OCP MX v1.0: X = 2^(floor(log2(amax)) - emax_elem), clamped to E8M0's 2^-127..2^127."""
    _, e = math.frexp(amax)  # amax = m 2^e, m in [0.5, 1): floor(log2(amax)) = e - 1
    return min(max(e - 1 - emax + 127, 0), 254)


def e8m0_te(amax):
    """Transformer Engine's float_to_e8m0(amax / 448): round the fp32 quotient up to a power of
    two (cvt.rp.satfinite.ue8m0): the biased exponent, +1 for a non-zero mantissa, except that
    a subnormal quotient <= 2^-127 takes code 0 (2^-127 is already >= it)."""
    v = np.float32(amax) / np.float32(448.0)
    b = int(bits32(v))
    e, m = b >> 23, b & 0x7FFFFF
    if m and not (e == 0 and m <= 0x400000):
        e += 1
    return min(e, 254)


def ref_mx(x, fmt):
    fp4 = fmt == Format.MXFP4
    dt, limit = (E2M1, 6.0) if fp4 else (E4M3, 448.0)
    rows, cols = x.shape
    s = np.zeros((rows, cdiv(cols, 32)), np.uint8)
    q = np.zeros((rows, cols), np.uint8)
    for r in range(rows):
        for j in range(s.shape[1]):
            blk = x[r, j * 32:(j + 1) * 32].astype(np.float64)
            amax = finite_amax(blk)
            if amax == 0:
                code = 127  # moefuse's choice for an all-zero block (any scale decodes 0 to 0)
            elif fmt == Format.MXFP8_TE:
                code = e8m0_te(amax)
            else:
                code = e8m0_ocp(amax, 2 if fp4 else 8)
            q[r, j * 32:(j + 1) * 32] = codes_of(blk * 2.0 ** (127 - code), dt, limit)
            # E2M1 has no NaN: a block holding one gets the NaN scale (OCP: X = NaN -> all NaN).
            s[r, j] = 0xFF if fp4 and np.isnan(blk).any() else code
    deq = (values_of(q, dt) * np.repeat(s.view(E8M0).astype(np.float64), 32, axis=1)[:, :cols]).astype(np.float32)
    return (pack_e2m1(q) if fp4 else q.ravel()), s, deq


def nvfp4_tensor_scale(x):
    g = finite_amax(x)
    if g == 0:
        return np.float32(1.0)
    with np.errstate(over="ignore"):
        s = np.float32(448.0 * 6.0) / np.float32(g)
    return np.float32(FLT_MAX) if np.isinf(s) else s


def ref_nvfp4(x, br):
    """NVFP4 (moefuse.h, TensorRT-LLM's convention): S_enc = 448*6/amax (fp32, the encode-side
    global scale); s_b = ue4m3(block_amax * S_enc / 6); q = e2m1(x * S_enc / s_b), both rounded
    once from the exact quotient; x ~ e2m1(q) * (s_b / S_enc), the combined scale in fp32."""
    rows, cols = x.shape
    s_enc = nvfp4_tensor_scale(x)
    s = np.zeros((cdiv(rows, br), cdiv(cols, 16)), np.uint8)
    q = np.zeros((rows, cols), np.uint8)
    deq = np.zeros((rows, cols), np.float32)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            blk = (slice(i * br, (i + 1) * br), slice(j * 16, (j + 1) * 16))
            v = x[blk].astype(np.float64)
            code = int(codes_of(finite_amax(v) * np.float64(s_enc) / 6.0, E4M3, 448))
            if code == 0 and np.isinf(v).any():
                code = 0x7E  # documented in formats.c: an inf must not vanish with a zero scale
            sb = float(values_of(code, E4M3))
            q[blk] = codes_of(v * np.float64(s_enc) / sb, E2M1, 6.0) if code else 0
            s[i, j] = 0x7F if np.isnan(v).any() else code
            combined = np.float32(values_of(s[i, j], E4M3)) / s_enc
            deq[blk] = (values_of(q[blk], E2M1) * np.float64(combined)).astype(np.float32)
    return pack_e2m1(q), s, s_enc, deq


def reference(fmt, x):
    """(codes, scales, tensor scale, dequantized) as the published convention gives them."""
    if fmt == Format.FP8_TENSOR:
        if x.size == 0:  # moefuse.h: one scale, 1 for an empty matrix
            return np.zeros(0, np.uint8), np.ones((1, 1), np.float32), 1.0, np.zeros(x.shape, np.float32)
        q, s, d = ref_fp8(x, *x.shape)
        return q, s, 1.0, d
    if fmt in (Format.FP8_ROW128, Format.FP8_BLOCK128):
        q, s, d = ref_fp8(x, 1 if fmt == Format.FP8_ROW128 else 128, 128)
        return q, s, 1.0, d
    if fmt in (Format.MXFP8_OCP, Format.MXFP8_TE, Format.MXFP4):
        q, s, d = ref_mx(x, fmt)
        return q, s, 1.0, d
    q, s, ts, d = ref_nvfp4(x, 1 if fmt == Format.NVFP4 else 16)
    return q, s, ts, d


BLOCK_FORMATS = [f for f in Format if FORMATS[f][1] is not None]


def check_against_reference(fmt, x, what):
    rows, cols = x.shape
    codes, scales, ts = quantize(fmt, x)
    rq, rs, rts, rdeq = reference(fmt, x)
    if scales.dtype == np.float32:
        assert_same_floats(scales, rs, f"{what}: {fmt.name} scales")
    else:
        assert_same_codes(scales, rs, f"{what}: {fmt.name} scales")
    assert bits32(np.float32(ts)) == bits32(np.float32(rts)), f"{what}: {fmt.name} tensor scale {ts} != {rts}"
    if FORMATS[fmt][0] == 4:
        # Blocks with the NaN scale decode to NaN whatever their codes: compare the others.
        br, bc = FORMATS[fmt][1]
        nan_block = np.repeat(np.repeat(rs == (0xFF if fmt == Format.MXFP4 else 0x7F), br, 0), bc, 1)[:rows, :cols]
        got, want = unpack_e2m1(codes, rows, cols), unpack_e2m1(rq, rows, cols)
        assert_same_codes(got[~nan_block], want[~nan_block], f"{what}: {fmt.name} codes", x[~nan_block])
    else:
        assert_same_codes(codes, rq, f"{what}: {fmt.name} codes", x)
    deq = dequantize(fmt, codes, scales, ts, rows, cols)
    assert_same_floats(deq, rdeq, f"{what}: {fmt.name} dequantize")
    return deq


def random_matrix(rng, rows, cols):
    """Gaussian rows at magnitudes spread over 2^-30..2^30, some rows with outliers."""
    x = rng.standard_normal((rows, cols)) * np.exp2(rng.uniform(-30, 30, (rows, 1)))
    out = rng.random((rows, cols)) < 0.01
    x[out] *= 1000.0
    return x.astype(np.float32)


@pytest.mark.parametrize("fmt", BLOCK_FORMATS, ids=[f.name for f in BLOCK_FORMATS])
def test_block_format_random(rng, fmt):
    for rows, cols in [(40, 256), (130, 288), (17, 48), (1, 2), (0, 0)]:
        x = random_matrix(rng, rows, cols)
        check_against_reference(fmt, x, f"random {rows}x{cols}")


E4M3_POS = np.arange(0x7F, dtype=np.uint8).view(E4M3).astype(np.float64)  # 0 .. 448
E4M3_MIDS = (E4M3_POS[:-1] + E4M3_POS[1:]) / 2  # 126 midpoints
E2M1_POS = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
E2M1_MIDS = (E2M1_POS[:-1] + E2M1_POS[1:]) / 2


def padded(rows_list, cols):
    out = np.zeros((len(rows_list), cols), np.float64)
    for i, r in enumerate(rows_list):
        r = np.resize(np.asarray(r, np.float64), cols) if len(r) < cols else np.asarray(r[:cols], np.float64)
        out[i] = r
    return out.astype(np.float32)


def adversarial_rows(rng, cols):
    """Rows (blocks along them of 16, 32 and 128) that sit on the edges of every rule."""
    sign = rng.choice([-1.0, 1.0], cols)
    rows = [
        np.zeros(cols), np.full(cols, -0.0),                       # zero and negative-zero blocks
        np.r_[1e30, rng.standard_normal(cols - 1)],                # one huge value
        np.r_[-3e38, 1e-30 * rng.standard_normal(cols - 1)],      # near FLT_MAX next to tiny
        1e-40 * rng.standard_normal(cols),                         # fp32 subnormals only
        np.full(cols, 2.0 ** -149), np.r_[2.0 ** -126, np.full(cols - 1, 2.0 ** -140)],
        2.0 ** -100 * rng.standard_normal(cols),                   # E8M0 scales near the bottom
        np.r_[448.0, 2.0 ** -15 * rng.standard_normal(cols - 1)],  # e4m3 subnormal elements
        np.r_[6.0, 0.01 * rng.standard_normal(cols - 1)],          # e2m1 underflow to zero
    ]
    for k in (-20, 0, 7):
        t = 2.0 ** k
        # e4m3 midpoints with amax = 448 * 2^k (FP8: s = 2^k exact; MX: X = 2^k in both rules);
        # the amax repeats at the start of every 32-block, so each block sees it.
        rows.append(np.tile(np.r_[448.0 * t, sign[:31] * E4M3_MIDS[:31] * t], cols // 32 + 1)[:cols])
        rows.append(np.tile(np.r_[448.0 * t, sign[:31] * E4M3_MIDS[95:126] * t], cols // 32 + 1)[:cols])
        rows.append(np.r_[448.0 * t, sign[:127] * np.r_[E4M3_MIDS, 0.0] * t, np.zeros(max(cols - 128, 0))])
        # e2m1 midpoints with amax = 6 * 2^k (MXFP4: X = 2^k)
        rows.append(np.tile(np.r_[6.0 * t, np.tile(E2M1_MIDS, 5)[:31] * sign[:31] * t], cols // 32 + 1)[:cols])
        # amax exactly a power of two, and just below one (OCP: the block max clips)
        rows.append(np.tile(np.r_[t, 0.999 * t, 0.75 * t, -0.5 * t, 0.1 * t], cols))
        below = float(np.nextafter(np.float32(t), np.float32(0)))
        rows.append(np.tile(np.r_[below, below * 0.97, -below * 0.9, 0.5 * t], cols))
        rows.append(np.tile(np.r_[t * 500 / 256, t * 464 / 256, t * 465 / 256, t], cols))  # OCP clip region
        # TE: amax / 448 a power of two, and one ulp above
        above = float(np.nextafter(np.float32(448.0 * t), np.float32(np.inf)))
        rows.append(np.tile(np.r_[above, -448.0 * t, 0.3 * t], cols))
    # specials: inf, -inf, NaN alone and with finite neighbours
    inf_row = rng.standard_normal(cols)
    inf_row[::7] = np.inf
    inf_row[3::11] = -np.inf
    nan_row = rng.standard_normal(cols)
    nan_row[5::13] = np.nan
    rows += [inf_row, nan_row, np.full(cols, np.inf), np.full(cols, np.nan), np.r_[-np.inf, np.zeros(cols - 1)],
             np.r_[np.nan, -np.inf, 1e-30 * np.ones(cols - 2)]]
    return padded(rows, cols)


@pytest.mark.parametrize("fmt", BLOCK_FORMATS, ids=[f.name for f in BLOCK_FORMATS])
def test_block_format_adversarial(rng, fmt):
    x = adversarial_rows(rng, 256)
    with np.errstate(invalid="ignore", over="ignore"):
        if FORMATS[fmt][1] in ("tensor", (128, 128), (16, 16)):
            # 2-D blocks mix these rows: also check each row on its own (one 1 x cols matrix).
            for i in range(x.shape[0]):
                check_against_reference(fmt, x[i:i + 1], f"adversarial row {i}")
        check_against_reference(fmt, x, "adversarial rows")


def nvfp4_exact_grid(rng, j):
    """A matrix where S_enc = 2^-j exactly (global amax 2688 * 2^j), block scales land on e4m3
    values and on e4m3 midpoints, and elements land on e2m1 midpoints."""
    rows = []
    sbs = E4M3_POS[1:] if j >= 0 else E4M3_POS[40:]
    for sb in sbs[:: max(1, len(sbs) // 24)]:
        row = np.r_[6.0, E2M1_MIDS, E2M1_POS[1:], -E2M1_MIDS[:1]] * sb * 2.0 ** j  # 16 values
        rows.append(np.tile(row * rng.choice([-1, 1], 16), 2))
    for m in E4M3_MIDS[::5]:  # block scale exactly at an e4m3 midpoint
        rows.append(np.tile(np.r_[6.0 * m * 2.0 ** j, np.zeros(15)], 2))
    rows.append(np.tile(np.r_[2688.0 * 2.0 ** j, np.zeros(15)], 2))
    return padded(rows, 32)


@pytest.mark.parametrize("fmt", [Format.NVFP4, Format.NVFP4_2D], ids=["NVFP4", "NVFP4_2D"])
def test_nvfp4_on_exact_grids(rng, fmt):
    for j in (-10, 0, 12):
        x = nvfp4_exact_grid(rng, j)
        codes, scales, ts = quantize(fmt, x)
        assert ts == 2.0 ** -j, "S_enc = 448 * 6 / amax"
        deq = check_against_reference(fmt, x, f"exact grid 2^{j}")
        if fmt == Format.NVFP4:
            # With S_enc a power of two, e2m1(q) * s_b / S_enc is exact: the values that are an
            # e2m1 value times their block's scale come back unchanged.
            sb = np.repeat(values_of(scales, E4M3), 16, axis=1) * 2.0 ** j
            on_grid = np.isin(np.abs(x) / np.where(sb > 0, sb, np.nan), E2M1_POS)
            assert on_grid.sum() > x.size // 2
            assert np.array_equal(deq[on_grid], x[on_grid])


def test_nvfp4_decode_is_codes_times_block_scale_over_global(rng):
    """moe_dequantize = e2m1(q) * fp32(s_b / S_enc): the tensor scale moefuse stores is the encode
    side one (448*6/amax, TensorRT-LLM's "global scale"), the reciprocal of torchao's
    per_tensor_scale = amax / (448*6). Rounding the combined scale first differs from the
    once-rounded e2m1(q) * s_b / S_enc by at most one ulp."""
    x = random_matrix(rng, 64, 64)
    codes, scales, ts = quantize(Format.NVFP4, x)
    deq = dequantize(Format.NVFP4, codes, scales, ts, 64, 64)
    q = values_of(unpack_e2m1(codes, 64, 64), E2M1)
    sb = np.repeat(values_of(scales, E4M3), 16, axis=1)
    exact = (q * sb / np.float64(ts)).astype(np.float32)  # correctly rounded
    ulps = np.abs(bits32(deq).astype(np.int64) - bits32(exact).astype(np.int64))
    assert ulps.max() <= 1
    torchao_style = np.float32(finite_amax(x) / 2688.0)
    assert abs(float(torchao_style) * float(ts) - 1.0) < 1e-6


def test_plain_formats_match_the_codecs(rng):
    x = dense_inputs(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64),
                     rng)[:100_000].reshape(1000, 100)
    for fmt, ref in [(Format.F16, np.float16), (Format.BF16, BF16)]:
        codes, _, _ = quantize(fmt, x)
        with np.errstate(over="ignore", invalid="ignore"):
            want = x.astype(ref).view(np.uint16).ravel()
        got = codes.view(np.uint16)
        nan = np.isnan(x.ravel())
        assert_same_codes(got[~nan], want[~nan], fmt.name)
        assert_same_floats(dequantize(fmt, codes, np.zeros(0, np.float32), 1.0, 1000, 100),
                           got.view(ref).astype(np.float32), f"{fmt.name} dequantize")
    codes, _, ts = quantize(Format.F32, x)
    assert ts == 1.0 and np.array_equal(codes.view(np.uint32), bits32(x).ravel())


def test_documented_errors():
    x = np.ones((2, 3), np.float32)
    lay = _lib.MoeFormatLayout()
    assert C().moe_format_layout_get(int(Format.NVFP4), 2, 3, ctypes.byref(lay)) == Status.INVALID_ARGUMENT
    codes = np.zeros(16, np.uint8)
    scales = np.zeros(4, np.uint8)
    ts = ctypes.c_float(0)
    st = C().moe_quantize(int(Format.MXFP4), x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 2, 3, 3,
                          codes.ctypes.data, scales.ctypes.data, ctypes.byref(ts))
    assert st == Status.INVALID_ARGUMENT  # odd cols for two-per-byte e2m1
    out = np.zeros((2, 2), np.float32)
    for bad in (0.0, -1.0, math.inf, math.nan):
        st = C().moe_dequantize(int(Format.NVFP4), codes.ctypes.data, scales.ctypes.data, bad, 2, 2,
                                out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 2)
        assert st == Status.INVALID_ARGUMENT, bad
