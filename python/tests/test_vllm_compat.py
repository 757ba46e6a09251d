"""Swap-in checks against vLLM's semantics that the review of the binding found broken:
expert parallelism with DeepSeek routing, other ranks' experts adding nothing, the positional
order of today's vLLM, global_num_experts, custom routing, torch's out-of-map ids, exact
per-tensor FP8 codes and quant_config."""

from types import SimpleNamespace

import numpy as np
import pytest

import moefuse
import reference as ref
from moefuse import MoeError, Status

E, H, I, K, T = 4, 32, 16, 2, 5


def layer(rng, E=E, H=H, I=I):
    w1 = (rng.standard_normal((E, 2 * I, H)) / np.sqrt(H)).astype(np.float32)
    w2 = (rng.standard_normal((E, H, I)) / np.sqrt(I)).astype(np.float32)
    x = rng.standard_normal((T, H)).astype(np.float32)
    return x, w1, w2


def test_fused_moe_expert_map_with_correction_bias(rng):
    x, w1, w2 = layer(rng)
    logits = rng.standard_normal((T, E)).astype(np.float32)
    bias = np.array([0, 0, 5, 5], np.float32)
    kw = dict(scoring_func="sigmoid", e_score_correction_bias=bias)
    y = moefuse.fused_moe(x, w1, w2, logits, K, True, **kw)
    y_ep = moefuse.fused_moe(x, w1, w2, logits, K, True, expert_map=np.arange(E, dtype=np.int32), **kw)
    np.testing.assert_array_equal(y, y_ep)


def test_expert_map_other_ranks_add_nothing(rng):
    # Global experts 0..5, this rank holds 2..5. A token on another rank's expert adds nothing, even
    # with the weight on the input and biases (run at weight 0 it would add W2 act(b1) + b2), and
    # even when its weight is NaN.
    x, w1, w2 = layer(rng)
    emap = np.array([-1, -1, 0, 1, 2, 3], np.int32)
    b1 = rng.standard_normal((E, 2 * I)).astype(np.float32)
    b2 = rng.standard_normal((E, H)).astype(np.float32)
    ids = np.array([[0], [2], [5], [1], [3]], np.int32)
    weights = np.array([[np.nan], [0.5], [0.7], [np.nan], [0.9]], np.float32)
    local = np.where(emap[ids] < 0, -1, emap[ids])
    for woi in (False, True):
        y = moefuse.fused_experts(x, w1, w2, weights, ids, apply_router_weight_on_input=woi, expert_map=emap,
                                  w1_bias=b1, w2_bias=b2)
        want = ref.experts(x, w1, w2, weights, local, weight_on_input=woi, w1_bias=b1, w2_bias=b2)
        assert np.isfinite(y).all() and ref.rel_error(y, want) < 1e-5
        assert not y[0].any() and not y[3].any()  # other ranks' only: nothing


def test_current_vllm_positional_order_is_named(rng):
    x, w1, w2 = layer(rng)
    ids = np.tile(np.arange(K, dtype=np.int32), (T, 1))
    weights = np.full((T, K), 0.5, np.float32)
    # today's vLLM: (..., apply_router_weight_on_input, global_num_experts, expert_map, quant_config)
    with pytest.raises(MoeError, match="use_fp8_w8a8 = -1, expected a bool"):
        moefuse.fused_experts(x, w1, w2, weights, ids, False, "silu", False, -1, None)


def test_global_num_experts_checked(rng):
    x, w1, w2 = layer(rng)
    ids = np.tile(np.arange(K, dtype=np.int32), (T, 1))
    weights = np.full((T, K), 0.5, np.float32)
    moefuse.fused_experts(x, w1, w2, weights, ids, global_num_experts=E)
    with pytest.raises(MoeError, match="global_num_experts = 8"):
        moefuse.fused_experts(x, w1, w2, weights, ids, global_num_experts=8)
    with pytest.raises(MoeError, match="expert_map's size"):
        moefuse.fused_experts(x, w1, w2, weights, ids, global_num_experts=16,
                              expert_map=np.arange(E, dtype=np.int32))


def test_custom_routing_precedence_and_ignored_options(rng):
    x, w1, w2 = layer(rng)
    logits = rng.standard_normal((T, E)).astype(np.float32)

    def custom(*_):
        raise AssertionError("vLLM's fused_moe uses grouped top-k before a custom routing function")

    grouped = dict(use_grouped_topk=True, num_expert_group=2, topk_group=1)
    np.testing.assert_array_equal(moefuse.fused_moe(x, w1, w2, logits, K, True, custom_routing_function=custom,
                                                    **grouped),
                                  moefuse.fused_moe(x, w1, w2, logits, K, True, **grouped))
    with pytest.raises(MoeError, match="routed_scaling_factor with custom_routing_function"):
        moefuse.fused_moe(x, w1, w2, logits, K, True, routed_scaling_factor=2.5,
                          custom_routing_function=lambda h, g, k, r: (np.full((T, k), 0.5, np.float32),
                                                                      np.tile(np.arange(k, dtype=np.int32), (T, 1))))


torch = None


def _torch():
    return pytest.importorskip("torch")


def test_torch_ids_outside_expert_map(rng):
    torch = _torch()
    import moefuse.torch as mt

    x, w1, w2 = (torch.from_numpy(a) for a in layer(rng))
    emap = torch.tensor([-1, -1, -1, -1, 0, 1, 2, 3], dtype=torch.int32)
    weights = torch.full((T, K), 0.5)
    ids = torch.tensor([[4, 5]] * T)
    ids[0, 1] = 8  # raised a bare IndexError
    with pytest.raises(MoeError, match="expected global experts in 0..7 or -1"):
        mt.fused_experts(x, w1, w2, weights, ids, expert_map=emap)
    ids[0, 1] = -1  # no expert (it used to wrap around to expert_map[-1])
    y = mt.fused_experts(x, w1, w2, weights, ids, expert_map=emap)
    local = np.where(ids.numpy() < 0, -1, ids.numpy() - 4)
    want = ref.experts(x.double().numpy(), w1.double().numpy(), w2.double().numpy(), weights.double().numpy(), local)
    assert ref.rel_error(y.double().numpy(), want) < 1e-5


def test_torch_fp8_per_tensor_codes_used_as_given(rng):
    torch = _torch()
    import moefuse.torch as mt

    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("no float8_e4m3fn in this torch")
    E2, H2, I2 = 2, 128, 128  # W13 halves on 128-row boundaries
    x, w1, w2 = (torch.from_numpy(a) for a in layer(rng, E2, H2, I2))
    # Largest codes ~300, not 448 (FP8_TENSOR would re-quantise), and none past e4m3fn's 448 (NaN):
    # fixed scales (0.002, 0.0007 until session 37) put ~19 of expert 1's values past it.
    amax = torch.maximum(w1.abs().amax(dim=(1, 2)), w2.abs().amax(dim=(1, 2)))
    s = amax / 300.0
    c1 = (w1 / s[:, None, None]).to(torch.float8_e4m3fn)
    c2 = (w2 / s[:, None, None]).to(torch.float8_e4m3fn)
    ids = torch.tensor([[0, 1]] * T, dtype=torch.int32)
    weights = torch.full((T, K), 0.5)
    d1, d2 = (c.to(torch.float64) * s.double()[:, None, None] for c in (c1, c2))
    want = ref.experts(x.double().numpy(), d1.numpy(), d2.numpy(), weights.double().numpy(), ids.numpy())
    qc = SimpleNamespace(use_fp8_w8a8=True, w1_scale=s, w2_scale=s, block_shape=None, per_act_token_quant=False)
    for kw in (dict(use_fp8_w8a8=True, w1_scale=s, w2_scale=s), dict(quant_config=qc)):
        y = mt.fused_experts(x, c1, c2, weights, ids, act_format="f32", **kw)
        assert ref.rel_error(y.double().numpy(), want) < 1e-5


# ---- SGLang's fused_experts(hidden_states, w1, w2, topk_output, moe_runner_config, b1, b2, ...) ----

def _sglang_inputs(rng):
    x, w1, w2 = layer(rng)
    ids = np.stack([rng.permutation(E)[:K] for _ in range(T)]).astype(np.int32)
    weights = rng.uniform(0.2, 1.0, (T, K)).astype(np.float32)
    return x, w1, w2, weights, ids


def test_sglang_silu_scaling_and_inplace(rng):
    x, w1, w2, weights, ids = _sglang_inputs(rng)
    want = ref.experts(x, w1, w2, weights, ids)
    cfg = SimpleNamespace(activation="silu", is_gated=True, inplace=False, routed_scaling_factor=2.5)
    y = moefuse.sglang_fused_experts(x, w1, w2, (weights, ids, None), cfg)
    assert y is not x and ref.rel_error(y, 2.5 * want) < 1e-5
    # SGLang's default config (inplace=True, no scaling), topk_output as an object with fields.
    h = x.copy()
    out = moefuse.sglang_fused_experts(h, w1, w2, SimpleNamespace(topk_weights=weights, topk_ids=ids), None)
    assert out is h and ref.rel_error(h, want) < 1e-5


def test_sglang_gptoss_alpha_limit_biases(rng):
    x, w1, w2, weights, ids = _sglang_inputs(rng)
    b1 = rng.standard_normal((E, 2 * I)).astype(np.float32)
    b2 = rng.standard_normal((E, H)).astype(np.float32)
    cfg = dict(activation="silu", is_gated=True, gemm1_alpha=1.702, gemm1_clamp_limit=7.0, inplace=False)
    y = moefuse.sglang_fused_experts(x, w1, w2, (weights, ids), cfg, b1, b2)
    want = ref.experts(x, w1, w2, weights, ids, activation="swigluoai", w1_bias=b1, w2_bias=b2)
    assert ref.rel_error(y, want) < 1e-5


def test_sglang_refusals(rng):
    x, w1, w2, weights, ids = _sglang_inputs(rng)
    for cfg, what in ((dict(no_combine=True), "no_combine"),
                      (dict(activation="silu", is_gated=False), "is_gated = False"),
                      (dict(activation="silu", gemm1_clamp_limit=7.0), "gemm1_clamp_limit without gemm1_alpha"),
                      (dict(activation="silu", gemm1_alpha=1.702), "gemm1_alpha without gemm1_clamp_limit"),
                      (dict(gemm1_alpha=1.702, gemm1_clamp_limit=7.0, gemm1_beta=0.5), "gemm1_beta")):
        with pytest.raises(MoeError, match=what):
            moefuse.sglang_fused_experts(x, w1, w2, (weights, ids), cfg)
    with pytest.raises(MoeError, match="topk_output"):
        moefuse.sglang_fused_experts(x, w1, w2, (weights,), {})


def test_torch_sglang_inplace_default(rng):
    torch = _torch()
    import moefuse.torch as mt

    x, w1, w2, weights, ids = (torch.from_numpy(a) for a in _sglang_inputs(rng))
    want = ref.experts(x.double().numpy(), w1.double().numpy(), w2.double().numpy(), weights.double().numpy(),
                       ids.numpy())
    h = x.clone()
    out = mt.sglang_fused_experts(h, w1, w2, (weights, ids, None), SimpleNamespace(routed_scaling_factor=1.0))
    assert out is h and ref.rel_error(h.double().numpy(), want) < 1e-5


# ---- session 37's review of the binding (numpy; the torch twins of these paths share _frontend) ----

def _slots(rng, E=E, k=K):
    ids = np.stack([rng.permutation(E)[:k] for _ in range(T)]).astype(np.int32)
    return rng.uniform(0.2, 1.0, (T, k)).astype(np.float32), ids


def test_correction_bias_and_logits_shapes_checked_on_every_routing_path(rng):
    # The host routing (the expert_map path) read E biases from whatever it was given.
    x, w1, w2 = layer(rng)
    logits = rng.standard_normal((T, E)).astype(np.float32)
    kw = dict(scoring_func="sigmoid", e_score_correction_bias=np.zeros(1, np.float32))
    for extra in ({}, dict(expert_map=np.arange(E, dtype=np.int32))):
        with pytest.raises(MoeError, match=rf"e_score_correction_bias has shape \(1,\), expected \({E},\)"):
            moefuse.fused_moe(x, w1, w2, logits, K, True, **kw, **extra)
        with pytest.raises(MoeError, match=r"gating_output has shape \(4,\), expected \[T, E\]"):
            moefuse.fused_moe(x, w1, w2, logits[0], K, True, **extra)
    spec = moefuse.LayerSpec(E, H, I, K, score="sigmoid", use_correction_bias=True)
    with pytest.raises(MoeError, match=rf"correction_bias shape \(1,\), expected \({E},\)"):
        moefuse.route(spec, logits, np.zeros(1, np.float32))


def test_expert_map_checked_against_gating_and_w1(rng):
    x, w1, w2 = layer(rng)
    logits = rng.standard_normal((T, 2 * E)).astype(np.float32)
    with pytest.raises(MoeError, match=rf"expert_map has {E} entries, expected {2 * E}"):
        moefuse.fused_moe(x, w1, w2, logits, K, True, expert_map=np.arange(E, dtype=np.int32))
    emap = np.array([-1] * E + [0, 1, 2, E], np.int32)  # E is past w1's experts
    with pytest.raises(MoeError, match=rf"expert_map: values in -1..{E}, expected local experts in 0..{E - 1}"):
        moefuse.fused_moe(x, w1, w2, logits, K, True, expert_map=emap)


def test_numpy_bools_none_defaults_and_flag_types(rng):
    x, w1, w2 = layer(rng)
    weights, ids = _slots(rng)
    logits = rng.standard_normal((T, E)).astype(np.float32)
    want = moefuse.fused_experts(x, w1, w2, weights, ids)
    h = x.copy()
    assert moefuse.fused_experts(h, w1, w2, weights, ids, inplace=np.True_) is h  # numpy 2's numpy.bool
    np.testing.assert_array_equal(h, want)
    np.testing.assert_array_equal(moefuse.fused_experts(x, w1, w2, weights, ids, global_num_experts=None), want)
    np.testing.assert_array_equal(moefuse.fused_moe(x, w1, w2, logits, K, True, routed_scaling_factor=None),
                                  moefuse.fused_moe(x, w1, w2, logits, K, True))
    with pytest.raises(MoeError, match="renormalize = 'no', expected a bool"):
        moefuse.fused_moe(x, w1, w2, logits, K, "no")


def test_custom_routing_with_an_array_bias_is_refused_by_name(rng):
    x, w1, w2 = layer(rng)
    logits = rng.standard_normal((T, E)).astype(np.float32)
    with pytest.raises(MoeError, match="e_score_correction_bias with custom_routing_function"):
        moefuse.fused_moe(x, w1, w2, logits, K, True, e_score_correction_bias=np.zeros(E, np.float32),
                          custom_routing_function=lambda *a: _slots(rng))


def test_activation_enum_and_vllm_names(rng):
    import enum

    class MoEActivation(enum.Enum):  # vLLM's members carry the name as their value
        SILU = "silu"

    x, w1, w2 = layer(rng)
    weights, ids = _slots(rng)
    np.testing.assert_array_equal(moefuse.fused_experts(x, w1, w2, weights, ids, activation=MoEActivation.SILU),
                                  moefuse.fused_experts(x, w1, w2, weights, ids))
    np.testing.assert_array_equal(moefuse.fused_experts(x, w1, w2, weights, ids, activation="gelu_pytorch_tanh"),
                                  moefuse.fused_experts(x, w1, w2, weights, ids, activation="gelu_tanh"))
    # swigluoai_uninterleave: gpt-oss's form on gate rows then up rows.
    y = moefuse.fused_experts(x, w1, w2, weights, ids, activation="swigluoai_uninterleave")
    want = ref.experts(x, w1, w2, weights, ids, activation="swigluoai", layout="concat")
    assert ref.rel_error(y, want) < 1e-5
    with pytest.raises(MoeError, match=f"w1 has {2 * I} rows an expert, expected {I} for activation = 'relu2'"):
        moefuse.fused_experts(x, w1, w2, weights, ids, activation="relu2")


def test_mixed_weight_dtypes_refused(rng):
    x, w1, w2 = layer(rng)
    weights, ids = _slots(rng)
    with pytest.raises(MoeError, match="w1 is f16 and w2 f32, expected one dtype for both"):
        moefuse.fused_experts(x, w1.astype(np.float16), w2, weights, ids)


def test_scale_given_as_a_number_is_named(rng):
    x, w1, w2 = layer(rng)
    weights, ids = _slots(rng)
    codes = np.zeros(w1.shape, np.uint8), np.zeros(w2.shape, np.uint8)
    with pytest.raises(TypeError, match="w1_scale: expected a numpy array, got float"):
        moefuse.fused_experts(x, *codes, weights, ids, use_fp8_w8a8=True, w1_scale=1.0,
                              w2_scale=np.ones(E, np.float32))


def test_quant_config_gemm1_fields(rng):
    x, w1, w2 = layer(rng)
    weights, ids = _slots(rng)
    # swigluoai: alpha and limit from quant_config, as vLLM's gpt-oss layers pass them.
    qc = SimpleNamespace(gemm1_alpha=1.5, gemm1_clamp_limit=0.5, gemm1_beta=1.0)
    y = moefuse.fused_experts(x, w1, w2, weights, ids, activation="swigluoai", quant_config=qc)
    want = ref.experts(x, w1, w2, weights, ids, activation="swigluoai", alpha=1.5, limit=0.5)
    assert ref.rel_error(y, want) < 1e-5
    for qc, what in ((SimpleNamespace(gemm1_clamp_limit=10.0), "gemm1_clamp_limit with activation = 'silu'"),
                     (SimpleNamespace(gemm1_alpha=1.702, gemm1_beta=0.5), "gemm1_beta = 0.5")):
        act = "silu" if "silu" in what else "swigluoai"
        with pytest.raises(MoeError, match=what):
            moefuse.fused_experts(x, w1, w2, weights, ids, activation=act, quant_config=qc)
    with pytest.raises(MoeError, match="disagree"):
        moefuse.fused_experts(x, w1, w2, weights, ids, activation="swigluoai", act_limit=7.0,
                              quant_config=SimpleNamespace(gemm1_clamp_limit=0.5))


def test_sglang_swiglu_limit_and_split_gate_up(rng):
    x, w1, w2, weights, ids = _sglang_inputs(rng)
    limit = 0.05  # below most pre-activations of this layer: the clamp shows
    y = moefuse.sglang_fused_experts(x, w1, w2, (weights, ids), dict(swiglu_limit=limit, inplace=False))
    want = ref.experts(x, w1, w2, weights, ids, limit=limit)
    assert ref.rel_error(y, want) < 1e-5 and ref.rel_error(y, ref.experts(x, w1, w2, weights, ids)) > 1e-2
    cfg = dict(gemm1_alpha=1.702, gemm1_clamp_limit=7.0, gate_up_interleaved=False, inplace=False)
    y = moefuse.sglang_fused_experts(x, w1, w2, (weights, ids), cfg)
    assert ref.rel_error(y, ref.experts(x, w1, w2, weights, ids, activation="swigluoai", layout="concat")) < 1e-5
    with pytest.raises(MoeError, match="swiglu_limit with activation = 'gelu'"):
        moefuse.sglang_fused_experts(x, w1, w2, (weights, ids), dict(activation="gelu", swiglu_limit=limit))


def test_cache_repack_replaces_the_older_packing():
    cache = moefuse._frontend.PackCache()
    a = np.zeros(4)
    cache.get(("k", 1), ("slot",), [a], lambda: "v1")
    assert cache.get(("k", 1), ("slot",), [a], lambda: "unused") == "v1"
    assert cache.get(("k", 2), ("slot",), [a], lambda: "v2") == "v2"  # a's version moved
    assert cache.info() == {"entries": 1, "packs": 2, "hits": 1}
    del a  # its entry leaves with it
    assert cache.info()["entries"] == 0


def test_fused_moe_takes_quant_config(rng):
    # vLLM's test helper: fused_moe(x, w1, w2, score, topk, renormalize=False, quant_config=...).
    x, w1, w2 = layer(rng)
    logits = rng.standard_normal((T, E)).astype(np.float32)
    qc = SimpleNamespace(gemm1_alpha=1.5, gemm1_clamp_limit=0.5)
    y = moefuse.fused_moe(x, w1, w2, logits, K, activation="swigluoai", quant_config=qc)
    np.testing.assert_array_equal(y, moefuse.fused_moe(x, w1, w2, logits, K, False, activation="swigluoai",
                                                        act_alpha=1.5, act_limit=0.5))
    with pytest.raises(MoeError, match="use_int8_w8a16 is not supported"):
        moefuse.fused_moe(x, w1, w2, logits, K, quant_config=SimpleNamespace(use_int8_w8a16=True))


def test_views_made_each_call_are_packed_once(rng):
    # A view made anew each call keys as its memory: w1[:] (the EP tests' form) and per-layer
    # slices of one stacked array, alternated, each pack once.
    x, w1, w2 = layer(rng)
    weights, ids = _slots(rng, E=2)
    w1s = np.concatenate([w1[:2], w1[2:]])  # "two layers" of 2 experts in one array
    w2s = np.concatenate([w2[:2], w2[2:]])
    moefuse.clear_cache()
    before = moefuse.cache_info()
    ys = [moefuse.fused_experts(x, w1s[2 * l:2 * l + 2], w2s[2 * l:2 * l + 2], weights, ids) for l in (0, 1, 0, 1)]
    info = moefuse.cache_info()
    assert (info["packs"] - before["packs"], info["hits"] - before["hits"], info["entries"]) == (2, 2, 2)
    np.testing.assert_array_equal(ys[0], ys[2])
    want = ref.experts(x, w1s[2:4], w2s[2:4], weights, ids)
    assert ref.rel_error(ys[1], want) < 1e-5
