"""moefuse.Checkpoint and Weights.load (moe_checkpoint_* and moe_weights_load) on safetensors
files written here by hand (numpy only): the loaded layer against the same weights given to
Weights directly, and the errors (missing file, wrong layer, missing tensor)."""

import json
import struct

import numpy as np
import pytest

import moefuse
from moefuse import MoeError, Status

E, H, I, IS, K = 4, 32, 16, 24, 2


def bf16_bits(x):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path, tensors):
    """tensors: name -> (safetensors dtype, numpy array holding the raw values)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def qwen_layer(rng, layer=1):
    """A Qwen2-MoE-like layer in the per-expert names (bf16 experts, f32 router and shared gate):
    the tensors to write and the fp32 values they hold."""
    vals = {
        "gate": rng.standard_normal((E, I, H)).astype(np.float32) * 0.2,
        "up": rng.standard_normal((E, I, H)).astype(np.float32) * 0.2,
        "down": rng.standard_normal((E, H, I)).astype(np.float32) * 0.2,
        "router": rng.standard_normal((E, H)).astype(np.float32),
        "s_gate": rng.standard_normal((IS, H)).astype(np.float32) * 0.2,
        "s_up": rng.standard_normal((IS, H)).astype(np.float32) * 0.2,
        "s_down": rng.standard_normal((H, IS)).astype(np.float32) * 0.2,
        "s_gw": rng.standard_normal((1, H)).astype(np.float32) * 0.2,
    }
    p = f"model.layers.{layer}.mlp."
    tensors = {}
    for key in ("gate", "up", "down"):
        bits = bf16_bits(vals[key])
        vals[key] = bf16_values(bits)
        proj = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}[key]
        for e in range(E):
            tensors[f"{p}experts.{e}.{proj}.weight"] = ("BF16", bits[e])
    tensors[p + "gate.weight"] = ("F32", vals["router"])
    for key, name in (("s_gate", "gate_proj"), ("s_up", "up_proj"), ("s_down", "down_proj")):
        tensors[f"{p}shared_expert.{name}.weight"] = ("F16", vals[key].astype(np.float16))
        vals[key] = vals[key].astype(np.float16).astype(np.float32)
    tensors[p + "shared_expert_gate.weight"] = ("F32", vals["s_gw"])
    return tensors, vals


def qwen_spec():
    return moefuse.LayerSpec(E, H, I, K, renormalize=True, num_shared_experts=1, shared_intermediate=IS,
                             shared_gate=True)


@pytest.fixture
def ctx():
    with moefuse.Context("cpu") as c:
        yield c


def test_checkpoint_names_info_read(tmp_path, rng):
    tensors, vals = qwen_layer(rng)
    tensors["model.norm.weight"] = ("F64", rng.standard_normal(H))
    path = tmp_path / "model.safetensors"
    write_safetensors(path, tensors)
    with moefuse.Checkpoint(path) as ck:
        assert len(ck) == len(tensors) and ck.names() == sorted(tensors) and list(ck) == sorted(tensors)
        assert "model.layers.1.mlp.gate.weight" in ck and "model.layers.9.mlp.gate.weight" not in ck
        assert ck.info("model.layers.1.mlp.experts.2.up_proj.weight") == moefuse.TensorInfo("bf16", (I, H), I * H * 2)
        assert ck.info("model.layers.1.mlp.gate.weight") == moefuse.TensorInfo("f32", (E, H), E * H * 4)
        np.testing.assert_array_equal(ck.read("model.layers.1.mlp.gate.weight"), vals["router"])
        np.testing.assert_array_equal(ck.read("model.norm.weight"), tensors["model.norm.weight"][1])
        up2 = ck.read("model.layers.1.mlp.experts.2.up_proj.weight")  # bf16: ml_dtypes or raw bits
        np.testing.assert_array_equal(up2.view(np.uint16), tensors["model.layers.1.mlp.experts.2.up_proj.weight"][1])
        assert repr(ck) == f"moefuse.Checkpoint({str(path)!r}, {len(tensors)} tensors)"
    assert repr(ck) == "moefuse.Checkpoint(closed)"
    with pytest.raises(ValueError, match="after close"):
        ck.names()
    # A directory holding model.safetensors (what save_pretrained writes) opens too.
    with moefuse.Checkpoint(tmp_path) as ck:
        assert len(ck) == len(tensors)


def test_loaded_layer_matches_direct_weights(tmp_path, rng, ctx):
    tensors, v = qwen_layer(rng)
    write_safetensors(tmp_path / "model.safetensors", tensors)
    spec = qwen_spec()
    direct = moefuse.Weights(ctx, spec, gate=v["gate"], up=v["up"], w2=v["down"], layout="separate", format="f32",
                             router=v["router"], shared_gate=v["s_gate"], shared_up=v["s_up"],
                             shared_w2=v["s_down"], shared_gate_weight=v["s_gw"][0])
    x = rng.standard_normal((13, H)).astype(np.float32)
    want = ctx.forward(direct, x)
    with moefuse.Checkpoint(tmp_path) as ck:
        loaded = moefuse.Weights.load(ctx, ck, spec, 1, "f32")
        also = ck.load_weights(ctx, spec, 1, "f32")
    by_path = moefuse.load_weights(ctx, tmp_path / "model.safetensors", spec, 1, "f32")
    for w in (loaded, also, by_path):  # the weights outlive the checkpoint they came from
        assert w.spec == spec and w.format == moefuse.Format.F32
        np.testing.assert_array_equal(ctx.forward(w, x), want)
        for e in (-1, 0, E - 1):
            for got, exp in zip(w.unpack(e), direct.unpack(e)):
                np.testing.assert_array_equal(got, exp)
    # Routing from given logits and the top-k the forward reports agree with moefuse.route.
    logits = x @ v["router"].T
    ids, wts = np.empty((13, K), np.int32), np.empty((13, K), np.float32)
    y = ctx.forward(loaded, x, router_logits=logits, out_topk_ids=ids, out_topk_weights=wts)
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-6 * np.abs(want).max())
    ref_ids, ref_w = moefuse.route(spec, logits)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_allclose(wts, ref_w, rtol=1e-6)
    # A ModelConfig stands for its layer spec.
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "qwen2_moe", "hidden_size": H, "intermediate_size": 64, "moe_intermediate_size": I,
        "num_hidden_layers": 2, "num_experts": E, "num_experts_per_tok": K, "norm_topk_prob": True,
        "shared_expert_intermediate_size": IS}))
    cfg = moefuse.load_config(tmp_path)
    np.testing.assert_array_equal(ctx.forward(moefuse.Weights.load(ctx, tmp_path, cfg, 1, "f32"), x), want)


def test_load_bf16_format(tmp_path, rng, ctx):
    tensors, v = qwen_layer(rng)
    write_safetensors(tmp_path / "model.safetensors", tensors)
    w = moefuse.Weights.load(ctx, tmp_path, qwen_spec(), 1)  # format bf16 by default
    assert w.format == moefuse.Format.BF16
    gate, up, down = w.unpack(0)  # the checkpoint's bf16 experts come back exactly
    np.testing.assert_array_equal(gate, v["gate"][0])
    np.testing.assert_array_equal(down, v["down"][0])


def test_errors(tmp_path, rng, ctx):
    tensors, _ = qwen_layer(rng)
    path = tmp_path / "model.safetensors"
    write_safetensors(path, tensors)
    spec = qwen_spec()

    missing = tmp_path / "nope" / "model.safetensors"
    with pytest.raises(MoeError) as e:
        moefuse.Checkpoint(missing)
    assert e.value.status == Status.IO_ERROR and str(missing) in e.value.message
    with pytest.raises(MoeError) as e:
        moefuse.Weights.load(ctx, missing, spec, 1)
    assert e.value.status == Status.IO_ERROR

    with moefuse.Checkpoint(path) as ck:
        with pytest.raises(MoeError) as e:
            ck.info("model.layers.1.mlp.nothing")
        assert e.value.status == Status.NOT_FOUND
        with pytest.raises(MoeError) as e:  # layer 0 has no MoE tensors
            moefuse.Weights.load(ctx, ck, spec, 0)
        assert e.value.status == Status.NOT_FOUND and "model.layers.0.mlp.experts.0.down_proj.weight" in e.value.message
        with pytest.raises(MoeError) as e:
            moefuse.Weights.load(ctx, ck, spec, -1)
        assert e.value.status == Status.INVALID_ARGUMENT and "layer = -1" in e.value.message
        with pytest.raises(MoeError) as e:  # the checkpoint has a shared expert the spec forgets
            moefuse.Weights.load(ctx, ck, moefuse.LayerSpec(E, H, I, K), 1)
        assert e.value.status == Status.INVALID_ARGUMENT and "num_shared_experts" in e.value.message
        with pytest.raises(MoeError) as e:  # wrong width
            moefuse.Weights.load(ctx, ck, moefuse.LayerSpec(E, H, I + 8, K, num_shared_experts=1,
                                                             shared_intermediate=IS, shared_gate=True), 1)
        assert e.value.status == Status.SHAPE_MISMATCH and "expected [24, 32]" in e.value.message

    del tensors["model.layers.1.mlp.experts.2.up_proj.weight"]
    write_safetensors(path, tensors)
    with pytest.raises(MoeError) as e:
        moefuse.Weights.load(ctx, path, spec, 1)
    assert e.value.status == Status.NOT_FOUND and "model.layers.1.mlp.experts.2.up_proj.weight" in e.value.message

    path.write_bytes(struct.pack("<Q", 5) + b"{oops")
    with pytest.raises(MoeError) as e:
        moefuse.Checkpoint(path)
    assert e.value.status == Status.PARSE_ERROR


@pytest.mark.parametrize("root, out_in", [
    ("model.language_model.layers.1.mlp.", False),  # Qwen3-VL-MoE's Hub files: [E, H, 2I], [E, I, H]
    ("model.language_model.layers.1.mlp.", True),   # as transformers 5 saves it: [E, 2I, H], [E, H, I]
    ("language_model.model.layers.1.mlp.", True),   # Mistral-Small-4 (Mistral3 around mistral4)
    ("model.layers.1.block_sparse_moe.", True),     # Granite-MoE-SWA
])
def test_fused_experts_gate_then_up(tmp_path, rng, ctx, root, out_in):
    """transformers' fused experts hold gate rows then up rows (not GPT-OSS's interleaving), in either
    orientation and under a multimodal wrapper's root: the loaded layer equals the same weights
    given to Weights directly."""
    gate, up = (rng.standard_normal((E, I, H)).astype(np.float32) * 0.2 for _ in range(2))
    down = rng.standard_normal((E, H, I)).astype(np.float32) * 0.2
    router = rng.standard_normal((E, H)).astype(np.float32)
    gate_up = np.concatenate([gate, up], axis=1)  # [E, 2I, H]
    tensors = {
        root + "experts.gate_up_proj": ("F32", gate_up if out_in else gate_up.transpose(0, 2, 1)),
        root + "experts.down_proj": ("F32", down if out_in else down.transpose(0, 2, 1)),
        root + ("router.weight" if "block_sparse_moe" in root else "gate.weight"): ("F32", router),
    }
    write_safetensors(tmp_path / "model.safetensors", tensors)
    spec = moefuse.LayerSpec(E, H, I, K, renormalize=True)
    direct = moefuse.Weights(ctx, spec, gate=gate, up=up, w2=down, layout="separate", format="f32", router=router)
    loaded = moefuse.Weights.load(ctx, tmp_path, spec, 1, "f32")
    for e in range(E):
        for got, want in zip(loaded.unpack(e), direct.unpack(e)):
            np.testing.assert_array_equal(got, want)
    x = rng.standard_normal((9, H)).astype(np.float32)
    np.testing.assert_array_equal(ctx.forward(loaded, x), ctx.forward(direct, x))
