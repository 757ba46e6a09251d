"""moefuse.torch: CPU tensors through the CPU backend (always, when torch is installed), CUDA
tensors through the CUDA backend (when a GPU and a CUDA build are there), against the float64
reference and against the numpy path."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import moefuse  # noqa: E402
import moefuse.torch as mt  # noqa: E402
import reference as ref  # noqa: E402
from moefuse import MoeError, Status  # noqa: E402

E, H, I, K, T = 6, 64, 32, 2, 9


def f64(t):
    return t.detach().to("cpu", torch.float64).numpy()


def make(rng, dtype, device="cpu", E=E, H=H, I=I, T=T, k=K):
    def tensor(a):
        return torch.from_numpy(np.ascontiguousarray(a, np.float32)).to(device=device, dtype=dtype)

    w1 = tensor(rng.standard_normal((E, 2 * I, H)) / np.sqrt(H))
    w2 = tensor(rng.standard_normal((E, H, I)) / np.sqrt(I))
    x = tensor(rng.standard_normal((T, H)))
    ids = np.array([rng.permutation(E)[:k] for _ in range(T)], np.int64).reshape(T, k)
    ids = torch.from_numpy(ids).to(device)
    weights = torch.from_numpy(rng.uniform(0.1, 1, (T, k)).astype(np.float32)).to(device)
    return x, w1, w2, weights, ids


def reference(x, w1, w2, weights, ids, **kw):
    return ref.experts(f64(x), f64(w1), f64(w2), f64(weights), ids.cpu().numpy(), **kw)


# Output rounding of y (the intermediates are fp32 on the CPU backend): see test_forward_numpy.
CPU_TOL = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 5e-3}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cpu_fused_experts(rng, dtype):
    x, w1, w2, weights, ids = make(rng, dtype)
    y = mt.fused_experts(x, w1, w2, weights, ids)
    assert y.dtype == dtype and y.shape == x.shape and y.device == x.device
    assert ref.rel_error(f64(y), reference(x, w1, w2, weights, ids)) < CPU_TOL[dtype]


def test_cpu_same_as_numpy(rng):
    x, w1, w2, weights, ids = make(rng, torch.float32)
    y = mt.fused_experts(x, w1, w2, weights, ids)
    want = moefuse.fused_experts(x.numpy(), w1.numpy(), w2.numpy(), weights.numpy(), ids.numpy())
    np.testing.assert_array_equal(y.numpy(), want)  # one library, one deterministic backend


def test_cpu_fused_moe_and_options(rng):
    x, w1, w2, _, _ = make(rng, torch.float32)
    logits = torch.from_numpy(rng.standard_normal((T, E)).astype(np.float32)).to(torch.bfloat16)
    y = mt.fused_moe(x, w1, w2, logits, K, True)
    ids, weights = ref.route(f64(logits), K, True)
    assert ref.rel_error(f64(y), ref.experts(f64(x), f64(w1), f64(w2), weights, ids)) < 1e-5

    # inplace and [*, H]
    x3 = x.reshape(3, 3, H).clone()
    out = mt.fused_moe(x3, w1, w2, logits, K, True, inplace=True)
    assert out is x3
    torch.testing.assert_close(x3.reshape(T, H), y, rtol=0, atol=0)

    # expert_map: this rank holds global experts 1..3
    emap = torch.full((E,), -1, dtype=torch.int32)
    emap[1:4] = torch.arange(3, dtype=torch.int32)
    keep = (ids >= 1) & (ids < 4)
    want = ref.experts(f64(x), f64(w1), f64(w2), np.where(keep, weights, 0.0), ids)
    y = mt.fused_moe(x, w1[1:4], w2[1:4], logits, K, True, expert_map=emap)
    assert ref.rel_error(f64(y), want) < 1e-5


def test_cpu_errors(rng):
    x, w1, w2, weights, ids = make(rng, torch.float32)
    bad = ids.clone()
    bad[2, 0] = E
    with pytest.raises(MoeError) as info:
        mt.fused_experts(x, w1, w2, weights, bad)
    assert info.value.status == Status.INVALID_ARGUMENT and "topk_ids[2][0]" in info.value.message
    with pytest.raises(MoeError) as info:
        mt.fused_experts(x[:, 1:], w1, w2, weights, ids)
    assert info.value.status == Status.SHAPE_MISMATCH and "args.x" in info.value.message
    with pytest.raises(MoeError) as info:
        mt.fused_experts(x, w1, w2, weights, ids.float())
    assert info.value.status == Status.DTYPE_MISMATCH
    with pytest.raises(TypeError, match="torch.Tensor"):
        mt.fused_experts(x.numpy(), w1, w2, weights, ids)


def test_cpu_cache_follows_in_place_updates(rng):
    x, w1, w2, weights, ids = make(rng, torch.float32)
    mt.clear_cache()
    before = mt.cache_info()
    y1 = mt.fused_experts(x, w1, w2, weights, ids)
    mt.fused_experts(x, w1, w2, weights, ids)
    info = mt.cache_info()
    assert (info["packs"], info["hits"]) == (before["packs"] + 1, before["hits"] + 1)
    packs = info["packs"]
    with torch.no_grad():
        w1.mul_(2.0)  # bumps the tensor's version counter: the packed copy is stale
    y2 = mt.fused_experts(x, w1, w2, weights, ids)
    assert mt.cache_info()["packs"] == packs + 1
    assert mt.cache_info()["entries"] == 1  # the repack replaced the stale packing
    assert not torch.equal(y1, y2)
    assert ref.rel_error(f64(y2), reference(x, w1, w2, weights, ids)) < 1e-5


def test_cpu_cache_keys_views_by_their_memory(rng):
    x, w1, w2, weights, ids = make(rng, torch.float32)
    mt.clear_cache()
    before = mt.cache_info()
    y1 = mt.fused_experts(x, w1[:], w2[:], weights, ids)  # a new view object each call
    mt.fused_experts(x, w1[:], w2[:], weights, ids)
    info = mt.cache_info()
    assert (info["packs"] - before["packs"], info["hits"] - before["hits"], info["entries"]) == (1, 1, 1)
    with torch.no_grad():
        w1[:].mul_(2.0)  # through a view: the base's version counter moves too
    y2 = mt.fused_experts(x, w1[:], w2[:], weights, ids)
    info = mt.cache_info()
    assert (info["packs"] - before["packs"], info["entries"]) == (2, 1)
    assert not torch.equal(y1, y2)
    assert ref.rel_error(f64(y2), reference(x, w1, w2, weights, ids)) < 1e-5


def test_cpu_host_routing_and_expert_map_checks(rng):
    # fused_moe with expert_map routes on the host over gating_output's experts.
    x, w1, w2, weights, ids = make(rng, torch.float32)
    logits = torch.from_numpy(rng.standard_normal((T, E)).astype(np.float32))
    emap = torch.arange(E, dtype=torch.int32)
    kw = dict(scoring_func="sigmoid", expert_map=emap)
    with pytest.raises(MoeError, match=rf"e_score_correction_bias has shape \(1,\), expected \({E},\)"):
        mt.fused_moe(x, w1, w2, logits, K, True, e_score_correction_bias=torch.zeros(1), **kw)
    y = mt.fused_moe(x, w1, w2, logits, K, True, e_score_correction_bias=torch.zeros(E), **kw)
    want = mt.fused_moe(x, w1, w2, logits, K, True, e_score_correction_bias=torch.zeros(E), scoring_func="sigmoid")
    assert ref.rel_error(f64(y), f64(want)) < 1e-6
    bad = emap.clone()
    bad[0] = E
    with pytest.raises(MoeError, match=rf"expert_map: values in 1..{E}, expected local experts in 0..{E - 1}"):
        mt.fused_experts(x, w1, w2, weights, ids, expert_map=bad)


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="this torch has no float8_e4m3fn")
def test_cpu_fp8_block_matches_numpy_codes(rng):
    x, w1f, w2f, weights, ids = make(rng, torch.float32, E=3, H=256, I=128)
    quantized = []
    for w in (w1f, w2f):
        qs = [moefuse.quantize(w[e].numpy(), "fp8-block128") for e in range(3)]
        codes = np.stack([q.codes for q in qs])
        scales = np.stack([q.scales for q in qs]).astype(np.float32)
        quantized.append((codes, scales))
    (c1, s1), (c2, s2) = quantized
    fp8 = dict(use_fp8_w8a8=True, block_shape=[128, 128])
    want = moefuse.fused_experts(x.numpy(), c1, c2, weights.numpy(), ids.numpy(), w1_scale=s1, w2_scale=s2, **fp8)
    t1 = torch.from_numpy(c1).view(torch.float8_e4m3fn)
    t2 = torch.from_numpy(c2).view(torch.float8_e4m3fn)
    y = mt.fused_experts(x, t1, t2, weights, ids, w1_scale=torch.from_numpy(s1), w2_scale=torch.from_numpy(s2), **fp8)
    np.testing.assert_array_equal(y.numpy(), want)


# ---------------------------------------------------------------------------------------
# CUDA.
# ---------------------------------------------------------------------------------------


def _cuda_ready():
    if not torch.cuda.is_available():
        return "no CUDA device visible to torch"
    try:
        moefuse.Context("cuda")
    except MoeError as e:
        return f"the library has no usable CUDA backend: {e}"
    return None


cuda = pytest.mark.skipif(_cuda_ready() is not None, reason=str(_cuda_ready()))
# bf16 operands with fp32 accumulation, the intermediate rounded to bf16 between the GEMMs and
# y rounded once more: a few bf16 unit roundoffs (2^-8) on the relative Frobenius error.
GPU_TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}


def run_cuda(fn, *args, **kw):
    """fn on CUDA tensors; an UNSUPPORTED answer from the backend is a SKIP, never a PASS."""
    try:
        return fn(*args, **kw)
    except MoeError as e:
        if e.status == Status.UNSUPPORTED:
            pytest.skip(f"cuda backend: {e.message}")
        raise


@cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cuda_fused_experts(rng, dtype):
    x, w1, w2, weights, ids = make(rng, dtype, "cuda", T=37)
    y = run_cuda(mt.fused_experts, x, w1, w2, weights, ids)
    assert y.device == x.device and y.dtype == dtype
    assert ref.rel_error(f64(y), reference(x, w1, w2, weights, ids)) < GPU_TOL[dtype]


@cuda
def test_cuda_fused_moe_on_a_side_stream(rng):
    x, w1, w2, _, _ = make(rng, torch.bfloat16, "cuda", T=70)
    logits = torch.randn(70, E, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        y = run_cuda(mt.fused_moe, x, w1, w2, logits, K, True)
    stream.synchronize()
    ids, weights = ref.route(f64(logits), K, True)
    want = ref.experts(f64(x), f64(w1), f64(w2), weights, ids)
    assert ref.rel_error(f64(y), want) < GPU_TOL[torch.bfloat16]


@cuda
def test_cuda_matches_cpu_backend(rng):
    x, w1, w2, weights, ids = make(rng, torch.bfloat16, "cuda", T=129)
    y = run_cuda(mt.fused_experts, x, w1, w2, weights, ids)
    y_cpu = mt.fused_experts(x.cpu(), w1.cpu(), w2.cpu(), weights.cpu(), ids.cpu())
    assert ref.rel_error(f64(y), f64(y_cpu)) < GPU_TOL[torch.bfloat16]


@cuda
def test_cuda_graph_replay_with_new_routing(rng):
    x, w1, w2, weights, ids = make(rng, torch.bfloat16, "cuda", T=64)
    ids = ids.to(torch.int32)
    run_cuda(mt.fused_experts, x, w1, w2, weights, ids)  # packs the weights outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = mt.fused_experts(x, w1, w2, weights, ids)
    for _ in range(3):
        new_x, _, _, new_weights, new_ids = make(rng, torch.bfloat16, "cuda", T=64)
        x.copy_(new_x)
        weights.copy_(new_weights)
        ids.copy_(new_ids.to(torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        eager = mt.fused_experts(x, w1, w2, weights, ids)
        torch.testing.assert_close(y, eager, rtol=0, atol=0)  # same kernels, same inputs
        assert ref.rel_error(f64(y), reference(x, w1, w2, weights, ids)) < GPU_TOL[torch.bfloat16]


@cuda
def test_cuda_empty_batch(rng):
    x, w1, w2, weights, ids = make(rng, torch.bfloat16, "cuda", T=0)
    y = run_cuda(mt.fused_experts, x, w1, w2, weights, ids)
    assert y.shape == (0, H)


@cuda
def test_cuda_fused_moe_deepseek_routing(rng):
    """Grouped sigmoid routing with a correction bias (packed with the weights) on the GPU."""
    x, w1, w2, _, _ = make(rng, torch.bfloat16, "cuda", E=16, T=50, k=4)
    logits = torch.randn(50, 16, device="cuda")
    bias = 0.5 * torch.randn(16, device="cuda")
    y = run_cuda(mt.fused_moe, x, w1, w2, logits, 4, True, use_grouped_topk=True, num_expert_group=4, topk_group=2,
                 scoring_func="sigmoid", e_score_correction_bias=bias, routed_scaling_factor=2.5)
    ids, weights = ref.route(f64(logits), 4, True, score="sigmoid", correction_bias=f64(bias), n_group=4,
                             topk_group=2, routed_scale=2.5)
    want = ref.experts(f64(x), f64(w1), f64(w2), weights, ids)
    assert ref.rel_error(f64(y), want) < GPU_TOL[torch.bfloat16]


@cuda
@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="this torch has no float8_e4m3fn")
def test_cuda_fp8_w8a8_block(rng):
    x, w1f, w2f, weights, ids = make(rng, torch.bfloat16, "cuda", E=3, H=256, I=128, T=33)
    parts = []
    for w in (w1f, w2f):
        qs = [moefuse.quantize(w[e].float().cpu().numpy(), "fp8-block128") for e in range(3)]
        codes = torch.from_numpy(np.stack([q.codes for q in qs])).view(torch.float8_e4m3fn).cuda()
        parts.append((codes, torch.from_numpy(np.stack([q.scales for q in qs]).astype(np.float32)).cuda()))
    (c1, s1), (c2, s2) = parts
    fp8 = dict(use_fp8_w8a8=True, block_shape=[128, 128], w1_scale=s1, w2_scale=s2)
    y = run_cuda(mt.fused_experts, x, c1, c2, weights, ids, **fp8)
    want = mt.fused_experts(x.cpu(), c1.cpu(), c2.cpu(), weights.cpu(), ids.cpu(), **fp8)  # the CPU oracle
    assert ref.rel_error(f64(y), f64(want)) < 2e-2  # bf16 output and intermediates on top of the same FP8 steps
