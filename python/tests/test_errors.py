"""Every failure is a moefuse.MoeError carrying the library's status and message."""

import os
import subprocess
import sys

import numpy as np
import pytest

import moefuse
from moefuse import MoeError, Status

E, H, I, K, T = 4, 16, 8, 2, 5


@pytest.fixture
def layer(rng):
    w1 = rng.standard_normal((E, 2 * I, H)).astype(np.float32)
    w2 = rng.standard_normal((E, H, I)).astype(np.float32)
    x = rng.standard_normal((T, H)).astype(np.float32)
    ids = np.stack([rng.permutation(E)[:K] for _ in range(T)]).astype(np.int32)
    weights = rng.uniform(0.1, 1, (T, K)).astype(np.float32)
    return x, w1, w2, weights, ids


def raises(status, *fragments):
    """pytest.raises for a MoeError of `status` whose message holds every fragment."""

    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(MoeError)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            swallowed = self.ctx.__exit__(*exc)
            err = self.info.value
            assert err.status == status, f"status {err.name}, expected {Status(status).name}: {err.message}"
            assert err.name == "MOE_STATUS_" + Status(status).name
            for f in fragments:
                assert f in err.message, f"{f!r} not in {err.message!r}"
            assert err.message in str(err)
            return swallowed

    return Check()


def test_hidden_size_mismatch(layer):
    x, w1, w2, weights, ids = layer
    bad_x = np.zeros((T, H + 1), np.float32)
    with raises(Status.SHAPE_MISMATCH, "args.x", f"{H + 1}", f"{H}"):
        moefuse.fused_experts(bad_x, w1, w2, weights, ids)


def test_weight_shape_mismatch(layer):
    x, w1, w2, weights, ids = layer
    with raises(Status.SHAPE_MISMATCH, f"w1 has {2 * I + 1} rows", f"expected {2 * I}", "'silu'"):  # not 2 * w2's I
        moefuse.fused_experts(x, np.zeros((E, 2 * I + 1, H), np.float32), w2, weights, ids)
    with raises(Status.SHAPE_MISMATCH, "w1"):
        moefuse.fused_experts(x, w1[0], w2, weights, ids)


def test_topk_ids_out_of_range(layer):
    x, w1, w2, weights, ids = layer
    bad = ids.copy()
    bad[3, 1] = E
    with raises(Status.INVALID_ARGUMENT, "topk_ids[3][1]", f"= {E}", f"0..{E - 1}"):
        moefuse.fused_experts(x, w1, w2, weights, bad)
    bad[3, 1] = -2  # (-1 is no expert)
    with raises(Status.INVALID_ARGUMENT, "topk_ids[3][1] = -2", "or -1"):
        moefuse.fused_experts(x, w1, w2, weights, bad)
    # An int64 id past int32 is refused, not wrapped around to a valid expert.
    big = ids.astype(np.int64)
    big[0, 0] = 2 ** 32 + 1
    with raises(Status.INVALID_ARGUMENT, "topk_ids", "int32"):
        moefuse.fused_experts(x, w1, w2, weights, big)


def test_wrong_dtypes(layer):
    x, w1, w2, weights, ids = layer
    with raises(Status.DTYPE_MISMATCH, "args.x", "f64"):
        moefuse.fused_experts(x.astype(np.float64), w1, w2, weights, ids)
    with raises(Status.DTYPE_MISMATCH, "int16"):
        moefuse.fused_experts(x.astype(np.int16), w1, w2, weights, ids)
    with raises(Status.DTYPE_MISMATCH, "desc.gate_up", "f64"):
        moefuse.fused_experts(x, w1.astype(np.float64), w2, weights, ids)
    with raises(Status.DTYPE_MISMATCH, "topk_ids", "float32"):
        moefuse.fused_experts(x, w1, w2, weights, ids.astype(np.float32))


def test_routing_shapes(layer):
    x, w1, w2, weights, ids = layer
    with raises(Status.SHAPE_MISMATCH, "topk_ids", "topk_weights"):
        moefuse.fused_experts(x, w1, w2, weights[:, :1], ids)
    with raises(Status.SHAPE_MISMATCH, "args.topk_ids"):  # T of the routing != T of x
        moefuse.fused_experts(x, w1, w2, weights[:2], ids[:2])
    with raises(Status.SHAPE_MISMATCH, "router_logits"):
        moefuse.fused_moe(x, w1, w2, np.zeros((T, E + 1), np.float32), K, True)


def test_invalid_options(layer):
    x, w1, w2, weights, ids = layer
    with raises(Status.INVALID_ARGUMENT, "activation", "'tanh'"):
        moefuse.fused_experts(x, w1, w2, weights, ids, activation="tanh")
    with raises(Status.INVALID_ARGUMENT, "weight_on_input"):  # needs top_k == 1
        moefuse.fused_experts(x, w1, w2, weights, ids, apply_router_weight_on_input=True)
    with raises(Status.INVALID_ARGUMENT, "top_k"):
        moefuse.fused_moe(x, w1, w2, np.zeros((T, E), np.float32), E + 1, True)
    with raises(Status.INVALID_ARGUMENT, "format"):
        moefuse.fused_experts(x, w1, w2, weights, ids, format="fp7")
    with raises(Status.INVALID_ARGUMENT, "w1_scale"):
        moefuse.fused_experts(x, w1, w2, weights, ids, w1_scale=np.ones(E, np.float32))


@pytest.mark.parametrize("option", ["use_int8_w8a16", "use_int4_w4a16", "use_int8_w8a8", "per_channel_quant"])
def test_unsupported_vllm_options(layer, option):
    x, w1, w2, weights, ids = layer
    with raises(Status.UNSUPPORTED, option):
        moefuse.fused_experts(x, w1, w2, weights, ids, **{option: True})


def test_unsupported_static_scales_and_blocks(layer):
    x, w1, w2, weights, ids = layer
    with raises(Status.UNSUPPORTED, "a1_scale"):
        moefuse.fused_experts(x, w1, w2, weights, ids, a1_scale=np.ones(1, np.float32))
    codes = np.zeros((E, 2 * I, H), np.uint8)
    with raises(Status.UNSUPPORTED, "block_shape"):
        moefuse.fused_experts(x, codes, w2, weights, ids, use_fp8_w8a8=True, w1_scale=np.ones(1),
                              w2_scale=np.ones(1), block_shape=[64, 64])


def test_not_numpy(layer):
    x, w1, w2, weights, ids = layer
    with pytest.raises(TypeError, match="numpy array"):
        moefuse.fused_experts(x.tolist(), w1, w2, weights, ids)


def test_spec_config_and_context_errors():
    with raises(Status.INVALID_ARGUMENT, "num_experts"):
        moefuse.LayerSpec(0, H, I, 1).validate()
    with raises(Status.INVALID_ARGUMENT, "score", "'cosine'"):
        moefuse.LayerSpec(E, H, I, 1, score="cosine").to_c()
    with raises(Status.NOT_FOUND, "no-such-model"):
        moefuse.preset("no-such-model")
    with raises(Status.IO_ERROR, "/no/such/dir"):
        moefuse.load_config("/no/such/dir/config.json")
    with raises(Status.PARSE_ERROR):
        moefuse.parse_config("{not json")
    ctx = moefuse.Context("cpu")
    ctx.close()
    ctx.close()  # idempotent
    with pytest.raises(ValueError, match="after close"):
        ctx.backend


def test_moe_error_is_a_runtime_error_and_pickles():
    import pickle

    err = MoeError(Status.SHAPE_MISMATCH, "MOE_STATUS_SHAPE_MISMATCH", "args.x: shape[1] = 3, expected 4")
    assert isinstance(err, RuntimeError)
    again = pickle.loads(pickle.dumps(err))
    assert (again.status, again.name, again.message) == (err.status, err.name, err.message)


def test_library_not_found_is_lazy_and_explains(tmp_path):
    """Importing works without the library; the first call names what was searched."""
    missing = tmp_path / "nowhere" / "libmoefuse.so"
    code = ("import moefuse\n"
            "try:\n"
            "    moefuse.version()\n"
            "except moefuse.LibraryNotFoundError as e:\n"
            "    print('RAISED', e)\n")
    env = dict(os.environ, MOEFUSE_LIB=str(missing),
               PYTHONPATH=os.path.dirname(os.path.dirname(moefuse.__file__)))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "RAISED" in out.stdout
    assert str(missing) in out.stdout and "MOEFUSE_LIB" in out.stdout and "make build" in out.stdout


def test_torch_module_without_torch():
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed: test_torch.py covers moefuse.torch")
    with pytest.raises(ImportError, match="needs PyTorch"):
        import moefuse.torch  # noqa: F401
