"""The objects under fused_experts: presets and configs, LayerSpec, Weights, Context.forward,
route, the number-format codecs, threads."""

import ctypes
import json
import threading

import numpy as np
import pytest

import moefuse
import reference as ref
from moefuse import MoeError, Status, _lib


def test_version():
    v = moefuse.version()
    assert v == moefuse.__version__
    assert [int(p) for p in v.split(".")] == [0, 1, 0]


def test_presets_deepseek_v3():
    names = moefuse.presets()
    assert "deepseek-v3" in names and "qwen3-30b-a3b" in names
    for name in names:
        assert moefuse.preset(name).layer.num_experts >= 1
    c = moefuse.preset("deepseek-v3")
    s = c.layer
    assert (s.num_experts, s.hidden, s.intermediate, s.top_k) == (256, 7168, 2048, 8)
    assert (s.score, s.use_correction_bias, s.n_group, s.topk_group) == ("sigmoid", True, 8, 4)
    assert s.renormalize is True and s.routed_scale == 2.5 and s.activation == "swiglu"
    assert s.num_shared_experts == 1 and s.shared_intermediate == 2048
    assert c.is_moe and c.num_layers == 61 and len(c.layer_is_moe) == 61
    assert c.layer_is_moe[:4] == [False, False, False, True] and c.num_moe_layers == 58
    assert c.torch_dtype == "bf16" and c.model_type == "deepseek_v3"
    assert c.attention_window == 0 and c.layer_is_windowed == [False] * 61
    # The struct's tail crosses ctypes intact: GPT-OSS's sliding window in its even layers.
    g = moefuse.preset("gpt-oss-120b")
    assert g.attention_window == 128 and g.layer_is_windowed == [l % 2 == 0 for l in range(36)]


MIXTRAL_LIKE = {
    "model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128, "num_local_experts": 8,
    "num_experts_per_tok": 2, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 1000, "hidden_act": "silu", "torch_dtype": "float16",
}


def test_load_and_parse_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MIXTRAL_LIKE))
    for c in (moefuse.load_config(path), moefuse.load_config(str(tmp_path)), moefuse.parse_config(path.read_text())):
        s = c.layer
        assert (s.num_experts, s.hidden, s.intermediate, s.top_k) == (8, 64, 128, 2)
        assert c.is_moe and c.layer_is_moe == [True, True, True] and c.dense_intermediate == 0
        assert (c.num_heads, c.num_kv_heads, c.vocab_size) == (4, 2, 1000)
        assert c.torch_dtype == "f16" and c.model_type == "mixtral"


def test_layer_spec_defaults_match_the_library():
    c = _lib.MoeLayerSpec()
    _lib.lib().moe_layer_spec_init(ctypes.byref(c), 7, 64, 32, 3)
    assert moefuse.LayerSpec.from_c(c) == moefuse.LayerSpec(7, 64, 32, 3)
    assert moefuse.LayerSpec(7, 64, 32, 3).key() == tuple(getattr(c, n) for n, _ in c._fields_)


def test_layer_spec_round_trip():
    s = moefuse.LayerSpec(16, 64, 32, 4, score="sqrtsoftplus", use_correction_bias=True, n_group=4, topk_group=2,
                          renormalize=True, routed_scale=2.827, router_has_bias=True, activation="swiglu-oai",
                          act_alpha=1.5, act_limit=7.0, expert_has_bias=True, num_shared_experts=2,
                          shared_intermediate=64, shared_gate=True)
    assert moefuse.LayerSpec.from_c(s.to_c()) == s
    s.validate()
    assert s.to_c().activation == moefuse.Activation.SWIGLU_OAI and s.to_c().score == moefuse.Score.SQRTSOFTPLUS


def test_weights_unpack_and_context_forward_with_router(rng):
    """Weights built by hand with a router; forward computes the logits itself."""
    E, H, I, k, T = 6, 32, 16, 2, 7
    w1 = rng.standard_normal((E, 2 * I, H)).astype(np.float32) / 6
    w2 = rng.standard_normal((E, H, I)).astype(np.float32) / 4
    router = rng.standard_normal((E, H)).astype(np.float32)
    spec = moefuse.LayerSpec(E, H, I, k, renormalize=True)
    with moefuse.Context("cpu") as ctx:
        assert ctx.backend == "cpu"
        w = moefuse.Weights(ctx, spec, w1, w2, format="f32", router=router)
        assert w.nbytes > 0 and w.spec == spec and w.format == moefuse.Format.F32 and "f32" in repr(w)
        for e in (0, E - 1):
            gate, up, down = w.unpack(e)
            np.testing.assert_array_equal(gate, w1[e, :I])
            np.testing.assert_array_equal(up, w1[e, I:])
            np.testing.assert_array_equal(down, w2[e])
        x = rng.standard_normal((T, H)).astype(np.float32)
        out_ids = np.full((T, k), -7, np.int32)
        out_weights = np.full((T, k), np.nan, np.float32)
        y = ctx.forward(w, x, out_topk_ids=out_ids, out_topk_weights=out_weights)
        logits = x.astype(np.float64) @ router.T.astype(np.float64)
        ids, weights = ref.route(logits, k, True)
        np.testing.assert_array_equal(out_ids, ids)
        np.testing.assert_allclose(out_weights, weights, rtol=1e-5)
        assert ref.rel_error(y, ref.experts(x, w1, w2, weights, ids)) < 1e-5
        w.close()
        w.close()
        with pytest.raises(ValueError, match="after close"):
            w.nbytes


def test_separate_layout(rng):
    E, H, I, k, T = 3, 16, 8, 1, 4
    gate = rng.standard_normal((E, I, H)).astype(np.float32)
    up = rng.standard_normal((E, I, H)).astype(np.float32)
    w2 = rng.standard_normal((E, H, I)).astype(np.float32)
    ctx = moefuse.Context("cpu")
    w = moefuse.Weights(ctx, moefuse.LayerSpec(E, H, I, k), w2=w2, gate=gate, up=up, layout="separate", format="f32")
    g, u, d = w.unpack(1)
    np.testing.assert_array_equal(g, gate[1])
    np.testing.assert_array_equal(u, up[1])
    x = rng.standard_normal((T, H)).astype(np.float32)
    ids = rng.integers(0, E, (T, 1)).astype(np.int32)
    weights = np.ones((T, 1), np.float32)
    y = ctx.forward(w, x, topk_ids=ids, topk_weights=weights)
    assert ref.rel_error(y, ref.experts(x, np.concatenate([gate, up], axis=1), w2, weights, ids)) < 1e-5
    with pytest.raises(MoeError, match="separate"):
        moefuse.Weights(ctx, moefuse.LayerSpec(E, H, I, k), np.zeros((E, 2 * I, H), np.float32), w2, layout="separate")


def test_contexts():
    assert moefuse.Context("auto").backend in ("cpu", "cuda")
    try:
        ctx = moefuse.Context("cuda")
    except MoeError as e:  # a CPU-only build or machine
        assert e.status in (Status.NO_DEVICE, Status.UNSUPPORTED) and e.message
    else:
        assert ctx.backend == "cuda"
    with pytest.raises(MoeError, match="backend"):
        moefuse.Context("tpu")


# ---------------------------------------------------------------------------------------
# Number formats, checked against their definitions (REFERENCE.md section 1) in numpy.
# ---------------------------------------------------------------------------------------


def e4m3_grid():
    """Every finite non-negative e4m3fn value: subnormals m/8 * 2^-6, normals (1 + m/8) 2^(e-7)."""
    values = [m / 8 * 2.0 ** -6 for m in range(8)]
    values += [(1 + m / 8) * 2.0 ** (e - 7) for e in range(1, 16) for m in range(8) if not (e == 15 and m == 7)]
    return np.array(sorted(values))


E2M1_GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])


def assert_nearest(scaled, decoded, grid):
    """Each decoded value (in scale units) is the grid point nearest to the input (saturated).
    Decoding multiplies by the scale in fp32, so the decoded value is a grid point only to
    within fp32 rounding; computing x / s here rounds too: both are far below a grid step."""
    scaled = np.asarray(scaled, np.float64)
    decoded = np.asarray(decoded, np.float64)
    point = grid[np.argmin(np.abs(np.abs(decoded)[..., None] - grid), axis=-1)]
    np.testing.assert_allclose(np.abs(decoded), point, rtol=1e-6, atol=0)
    mag = np.minimum(np.abs(scaled), grid[-1])
    gap = np.min(np.abs(mag[..., None] - grid), axis=-1)
    assert np.all(np.abs(point - mag) <= gap * (1 + 1e-6) + 1e-12)
    assert np.all((point == 0) | (np.sign(decoded) == np.sign(scaled)))


def test_quantize_f16_bf16_exact(rng):
    x = (rng.standard_normal((5, 37)) * 10.0 ** rng.integers(-3, 4, (5, 37))).astype(np.float32)
    q = moefuse.quantize(x, "f16")
    assert q.codes.dtype == np.float16 and q.scales is None and q.tensor_scale is None
    np.testing.assert_array_equal(q.codes, x.astype(np.float16))
    np.testing.assert_array_equal(moefuse.dequantize(q), x.astype(np.float16).astype(np.float32))
    # bf16: round to nearest even on the top 16 bits of the fp32 pattern.
    bits = x.view(np.uint32).astype(np.uint64)
    rne = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    q = moefuse.quantize(x, "bf16")
    np.testing.assert_array_equal(q.codes, rne)
    np.testing.assert_array_equal(moefuse.dequantize(q), (rne.astype(np.uint32) << 16).view(np.float32))


def test_quantize_fp8_tensor_and_block(rng):
    x = rng.standard_normal((130, 300)).astype(np.float32) * 3
    q = moefuse.quantize(x, "fp8-tensor")
    assert q.codes.shape == (130, 300) and q.codes.dtype == np.uint8 and q.scales.shape == (1, 1)
    s = q.scales[0, 0]
    assert s == pytest.approx(np.abs(x).max() / 448, rel=1e-6)
    d = moefuse.dequantize(q)
    assert_nearest(x / s, d / s, e4m3_grid())

    q = moefuse.quantize(x, "fp8-block128")
    assert q.scales.shape == (2, 3)
    d = moefuse.dequantize(q)
    for bi in range(2):
        for bj in range(3):
            blk = (slice(128 * bi, 128 * bi + 128), slice(128 * bj, 128 * bj + 128))
            s = q.scales[bi, bj]
            assert s == pytest.approx(np.abs(x[blk]).max() / 448, rel=1e-6)
            assert_nearest(x[blk] / s, d[blk] / s, e4m3_grid())
    # The explicit form of dequantize takes the same pieces.
    d2 = moefuse.dequantize(q.codes, format="fp8-block128", scales=q.scales, shape=x.shape)
    np.testing.assert_array_equal(d, d2)


def test_quantize_mxfp4(rng):
    x = rng.standard_normal((4, 64)).astype(np.float32)
    q = moefuse.quantize(x, "mxfp4")
    assert q.codes.shape == (4, 32) and q.scales.shape == (4, 2) and q.scales.dtype == np.uint8
    d = moefuse.dequantize(q)
    for r in range(4):
        for b in range(2):
            blk = x[r, 32 * b:32 * b + 32]
            # OCP rule: shared exponent floor(log2(amax)) - 2 (E2M1's emax), stored biased by 127.
            e = int(np.floor(np.log2(np.abs(blk).max()))) - 2
            assert int(q.scales[r, b]) == e + 127
            assert_nearest(blk / 2.0 ** e, d[r, 32 * b:32 * b + 32] / 2.0 ** e, E2M1_GRID)


def test_quantize_errors():
    with pytest.raises(MoeError, match="2"):
        moefuse.quantize(np.zeros(8, np.float32), "fp8-tensor")
    with pytest.raises(MoeError) as info:
        moefuse.quantize(np.zeros((2, 3), np.float32), "nvfp4")  # E2M1 needs an even column count
    assert info.value.status == Status.INVALID_ARGUMENT or info.value.status == Status.SHAPE_MISMATCH
    with pytest.raises(MoeError, match="bytes"):
        moefuse.dequantize(np.zeros(5, np.uint8), format="fp8-tensor", scales=np.ones(1), shape=(2, 3))


def test_threads_have_their_own_contexts(rng):
    E, H, I, k, T = 4, 32, 16, 2, 16
    w1 = rng.standard_normal((E, 2 * I, H)).astype(np.float32) / 6
    w2 = rng.standard_normal((E, H, I)).astype(np.float32) / 4
    x = rng.standard_normal((T, H)).astype(np.float32)
    logits = rng.standard_normal((T, E)).astype(np.float32)
    want = moefuse.fused_moe(x, w1, w2, logits, k, True)
    results, errors = [None] * 4, []

    def work(i):
        try:
            for _ in range(20):
                results[i] = moefuse.fused_moe(x, w1, w2, logits, k, True)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        np.testing.assert_array_equal(r, want)  # the CPU backend is deterministic
