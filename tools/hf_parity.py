#!/usr/bin/env python3
"""End-to-end parity of moefuse's CPU forward against Hugging Face transformers' own MoE blocks.

For each MoE family below: build a tiny random model with transformers (fp32, or bf16 where the
family ships bf16 weights), give the router's correction bias / router bias random non-zero
values (transformers initialises them to zero, which would hide a selection bug), save it with
save_pretrained (config.json + model.safetensors, exactly as transformers writes them), then

  - read config.json with moefuse.load_config and the MoE layer's tensors from model.safetensors
    with moefuse.Checkpoint + moefuse.Weights.load (moe_weights_load), packed as "f32";
  - run moefuse's CPU forward on random hidden states twice: routing from the loaded router
    (logits computed by moefuse) and routing from the logits of the HF router module;
  - run the model's own MoE block (reloaded with from_pretrained in fp32) on the same states;
  - compare: max |y - y_ref| / max |y_ref| for both moefuse runs, and the top-k expert ids and
    weights moefuse returns (out_topk_ids / out_topk_weights) against the HF router's.

Tolerance: 1e-5 relative. Both sides compute in fp32 from the same fp32 (or exactly upcast bf16)
weights; moefuse accumulates in double and HF in fp32, so the gap is a few fp32 ulps of the
largest partial sums (observed ~1e-7..1e-6); a wrong routing decision, weight or activation
detail gives O(1e-2..1).

Families: FAMILIES (hand-written tiny configs, variants marked -name; llama4-vlm and mistral3-mistral4
wrap the text model in its multimodal model, as the Hub checkpoints of Llama-4 and Mistral-Small-4
are), AUTO (further families the reader accepts, from transformers' default config shrunk), HUB (AUTO
families whose Hub checkpoints differ from what save_pretrained writes: the saved file is rewritten
the Hub's way, Qwen3-VL-MoE's fused experts transposed, Kimi-K2.5's language_model.model.blocks back
to layers, and the reference model is read from it by transformers' own conversion mapping), REFUSED
(families the reader must refuse: only their config.json is written, and the line PASSes when moefuse
says MOE_STATUS_UNSUPPORTED).

One line per (family, MoE layer): family, layer, tokens, max rel err (routing by moefuse's
router / by HF logits), top-k ids agree, max top-k weight error, PASS/FAIL. A config.json the
reader refuses, a checkpoint moe_weights_load cannot read (the line lists the tensors saved for
that layer) or a model transformers cannot build prints FAIL with the message. Exits 1 on any FAIL.

Run (CPU only; needs torch, transformers >= 5, safetensors, numpy and a built build/libmoefuse.so):
    /work/helpers/hfenv/bin/python tools/hf_parity.py [family ...] [--tokens N] [--seed S] [--keep DIR]
Not part of `make check` (CI has neither torch nor transformers)."""

import argparse
import json
import os
import re
import struct
import sys
import tempfile
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoConfig  # noqa: E402

import moefuse  # noqa: E402

transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()

TOL = 1e-5

# Attention / embedding sizes every tiny model shares.
BASE = dict(vocab_size=128, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=256, tie_word_embeddings=False)

# family -> (model_type, config overrides, extra options). Options:
#   dtype        torch dtype of the saved model (the reference runs in fp32 from those weights)
#   w_std        std of the random MoE weights (GPT-OSS: large, so the swiglu clamp is reached)
#   bias_std     std of the random correction / router bias
#   wrapper      (model_type, overrides): build the multimodal model of that type around this text
#                config (its text model then lives under language_model.model.layers.L)
TINY_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)
FAMILIES = {
    "mixtral": ("mixtral", dict(intermediate_size=96, num_hidden_layers=2, num_local_experts=8,
                                num_experts_per_tok=2), {}),
    "qwen2_moe": ("qwen2_moe", dict(intermediate_size=128, moe_intermediate_size=48, num_hidden_layers=3,
                                    num_experts=8, num_experts_per_tok=2, shared_expert_intermediate_size=80,
                                    mlp_only_layers=[1]), {}),
    "qwen2_moe-norm": ("qwen2_moe", dict(intermediate_size=128, moe_intermediate_size=48, num_hidden_layers=2,
                                         num_experts=8, num_experts_per_tok=3, shared_expert_intermediate_size=80,
                                         norm_topk_prob=True), {}),
    "qwen3_moe": ("qwen3_moe", dict(intermediate_size=128, moe_intermediate_size=48, num_hidden_layers=3,
                                    num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
                                    decoder_sparse_step=1, mlp_only_layers=[0]), {}),
    "deepseek_v3": ("deepseek_v3", dict(intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=3,
                                        n_routed_experts=16, num_experts_per_tok=4, n_group=4, topk_group=2,
                                        routed_scaling_factor=2.5, n_shared_experts=2, first_k_dense_replace=1,
                                        q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                                        v_head_dim=16, num_key_value_heads=4), {"bias_std": 0.2}),
    "deepseek_v3-top1": ("deepseek_v3", dict(intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                                             n_routed_experts=16, num_experts_per_tok=1, n_group=4, topk_group=2,
                                             routed_scaling_factor=2.5, n_shared_experts=1, first_k_dense_replace=1,
                                             q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16,
                                             qk_rope_head_dim=8, v_head_dim=16, num_key_value_heads=4),
                         {"bias_std": 0.2}),
    "gpt_oss": ("gpt_oss", dict(intermediate_size=64, num_hidden_layers=2, num_local_experts=8,
                                num_experts_per_tok=2, sliding_window=32), {"dtype": torch.bfloat16, "w_std": 0.5,
                                                                            "bias_std": 1.0}),
    "gpt_oss-alpha": ("gpt_oss", dict(intermediate_size=64, num_hidden_layers=2, num_local_experts=8,
                                      num_experts_per_tok=2, sliding_window=32, swiglu_alpha=1.25, swiglu_limit=5.0),
                      {"dtype": torch.bfloat16, "w_std": 0.5, "bias_std": 1.0}),
    "glm4_moe": ("glm4_moe", dict(intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=3,
                                  n_routed_experts=16, num_experts_per_tok=4, n_group=1, topk_group=1,
                                  routed_scaling_factor=2.5, n_shared_experts=1, first_k_dense_replace=1),
                 {"bias_std": 0.2}),
    "glm4_moe_lite": ("glm4_moe_lite", dict(intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=3,
                                            n_routed_experts=16, num_experts_per_tok=4, n_group=1, topk_group=1,
                                            routed_scaling_factor=1.8, n_shared_experts=1,
                                            mlp_layer_types=["dense", "sparse", "sparse"], q_lora_rank=32,
                                            kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                                            v_head_dim=16, num_key_value_heads=4), {"bias_std": 0.2}),
    "olmoe": ("olmoe", dict(intermediate_size=48, num_hidden_layers=2, num_experts=8, num_experts_per_tok=2), {}),
    "qwen3_next": ("qwen3_next", dict(intermediate_size=128, moe_intermediate_size=48, num_hidden_layers=4,
                                      num_experts=8, num_experts_per_tok=2, shared_expert_intermediate_size=64,
                                      linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
                                      linear_num_value_heads=4), {}),
    "llama4": ("llama4_text", dict(intermediate_size=64, intermediate_size_mlp=128, num_hidden_layers=2,
                                   num_local_experts=4, num_experts_per_tok=1, interleave_moe_layer_step=1), {}),
    "llama4-interleave": ("llama4_text", dict(intermediate_size=64, intermediate_size_mlp=128, num_hidden_layers=4,
                                              num_local_experts=4, num_experts_per_tok=1,
                                              interleave_moe_layer_step=2), {}),
    # Llama-4 as released: Llama4ForConditionalGeneration, text model under language_model.model.layers
    # (H == I here, so down_proj's orientation is told by gate_up_proj's)
    "llama4-vlm": ("llama4_text", dict(intermediate_size=64, intermediate_size_mlp=128, num_hidden_layers=2,
                                       num_local_experts=4, num_experts_per_tok=1, interleave_moe_layer_step=1),
                   {"wrapper": ("llama4", dict(vision_config=dict(TINY_VISION, vision_output_dim=32,
                                                                  projector_input_dim=32,
                                                                  projector_output_dim=32)))}),
    # transformers 5's fused experts [E, 2I, H] / [E, H, I]; H == 2I here, so gate_up_proj's
    # orientation is told by down_proj's
    "mistral4": ("mistral4", dict(intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                                  n_routed_experts=16, num_experts_per_tok=4, n_group=1, topk_group=1,
                                  n_shared_experts=1, first_k_dense_replace=0, routed_scaling_factor=1.5,
                                  q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                                  qk_head_dim=24, head_dim=24, v_head_dim=16, num_key_value_heads=4), {}),
    # Mistral-Small-4's shape: Mistral3ForConditionalGeneration around a mistral4 text model
    "mistral3-mistral4": ("mistral4", dict(intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                                           n_routed_experts=16, num_experts_per_tok=4, n_group=1, topk_group=1,
                                           n_shared_experts=1, first_k_dense_replace=0, routed_scaling_factor=1.5,
                                           q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16,
                                           qk_rope_head_dim=8, qk_head_dim=24, head_dim=24, v_head_dim=16,
                                           num_key_value_heads=4),
                          {"wrapper": ("mistral3", dict(vision_config=dict(TINY_VISION, model_type="pixtral",
                                                                           head_dim=16)))}),
    "minimax": ("minimax", dict(intermediate_size=48, num_hidden_layers=2, num_local_experts=8,
                                num_experts_per_tok=2, block_size=16,
                                layer_types=["linear_attention", "full_attention"]), {}),
    "minimax_m2": ("minimax_m2", dict(intermediate_size=48, num_hidden_layers=2, num_local_experts=8,
                                      num_experts_per_tok=2), {"bias_std": 0.2}),
    "deepseek_v2": ("deepseek_v2", dict(intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                                        n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=2,
                                        first_k_dense_replace=1, routed_scaling_factor=1.5, topk_method="greedy",
                                        q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                                        v_head_dim=16, num_key_value_heads=4), {}),
    "deepseek_v2-group": ("deepseek_v2", dict(intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                                              n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=2,
                                              first_k_dense_replace=1, routed_scaling_factor=1.5,
                                              topk_method="group_limited_greedy", n_group=4, topk_group=2,
                                              q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16,
                                              qk_rope_head_dim=8, v_head_dim=16, num_key_value_heads=4), {}),
}

# Further families the config reader accepts, built from transformers' default config shrunk
# (shrink_defaults) plus the overrides given here.
AUTO = {
    "cohere2_moe": {}, "mellum": {}, "flex_olmo": dict(pad_token_id=None), "qwen3_5_moe_text": {},
    "qwen4_exp_text": dict(linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
                           linear_num_value_heads=4),
    "deepseek_v32": {}, "glm_moe_dsa": {}, "dots1": dict(n_routed_experts=8, n_shared_experts=1), "solar_open": {},
    "sarvam_moe": {}, "param2moe": {}, "sarvam_mla": {}, "mimo_v2_flash": {},
    # Granite: block_sparse_moe.input_linear / output_linear (the Hub's names, which transformers 5 writes
    # back) and router.layer; Granite-MoE-SWA: block_sparse_moe.experts.{gate_up,down}_proj, router
    "granitemoe": {}, "granitemoe_swa": {},
    # multimodal wrappers: the text model under model.language_model.layers (Qwen3-VL-MoE's fused experts
    # [E, 2I, H], GLM-4.5V's per-expert names) or, as transformers 5 saves Kimi-K2.5, language_model.model.blocks
    "qwen3_vl_moe": dict(moe_intermediate_size=48), "glm4v_moe": {}, "kimi_k25": {},
}

# The same families with the checkpoint rewritten as the Hub holds it where that differs from what
# save_pretrained writes; from_pretrained then reads the rewritten file through transformers' own
# conversion mapping, so the reference is transformers' reading of the Hub layout.
#   transpose_fused   experts.gate_up_proj / down_proj transposed to [E, H, 2I] / [E, I, H]: Qwen3-VL-MoE's
#                     Hub checkpoints (transformers' qwen3_vl_moe mapping transposes them when the shape
#                     differs from the module's)
#   blocks_to_layers  language_model.model.blocks.L -> language_model.model.layers.L: Kimi-K2.5's Hub
#                     names (transformers' kimi_k25 mapping renames blocks to layers, for the vision tower,
#                     and its reversal at save renames the text layers to blocks)
HUB = {"qwen3_vl_moe-hub": ("qwen3_vl_moe", "transpose_fused"), "kimi_k25-hub": ("kimi_k25", "blocks_to_layers")}

# Families the reader must refuse with MOE_STATUS_UNSUPPORTED: only their config.json is written and read.
# Entries "family" use transformers' default config; ("name", model_type, overrides) a modified one.
REFUSED = ["phimoe", "jamba", "nemotron_h", "ernie4_5_moe", "dbrx", "hunyuan_v1_moe", "granitemoeshared",
           "granitemoehybrid", "kimi_linear", "afmoe", "exaone_moe", "longcat_flash", "aria_text",
           "minimax_m3_vl_text", "jetmoe", "doge", "zaya", "lfm2_moe", "kolibri1", "flint", "lara_mini",
           "inkling_text", "inkling2", "muse_spark", "openai_privacy_filter",
           ("mistral4-group", "mistral4", dict(n_group=2, topk_group=1)),
           ("mistral_large4-group", "mistral_large4", {"text_config": dict(n_group=2, topk_group=1)})]
REFUSED_BY_NAME = {(r if isinstance(r, str) else r[0]): ((r, r, {}) if isinstance(r, str) else r) for r in REFUSED}

SHRINK = dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, vocab_size=128, shared_expert_intermediate_size=48,
              max_position_embeddings=256, q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16,
              qk_rope_head_dim=8, v_head_dim=16)


def shrink_defaults(model_type, extra):
    """Overrides that make transformers' default config of model_type tiny: widths, 8 experts,
    top-2, 3 layers (per-layer lists cut to 3, the first dense where the family has dense layers)."""
    d = json.loads(transformers.CONFIG_MAPPING[model_type]().to_json_string())
    text = d.get("text_config") if isinstance(d.get("text_config"), dict) else None
    src = text or d
    kw = {k: v for k, v in SHRINK.items() if src.get(k) not in (None, 0)}
    for k in ("n_routed_experts", "num_experts", "num_local_experts"):
        if src.get(k):
            kw[k] = 8
    if "num_experts_per_tok" in src:
        kw["num_experts_per_tok"] = 2
    n = kw["num_hidden_layers"] = 3
    for k, v in src.items():
        if isinstance(v, list) and len(v) == src.get("num_hidden_layers") and k != "num_hidden_layers":
            kw[k] = v[:n]
    if "mlp_layer_types" in kw:  # keep whether the family starts dense; the rest sparse
        kw["mlp_layer_types"] = [src["mlp_layer_types"][0]] + ["sparse"] * (n - 1)
    if src.get("first_k_dense_replace"):
        kw["first_k_dense_replace"] = 1
        if "mlp_layer_types" in kw:
            kw["mlp_layer_types"] = ["dense"] + ["sparse"] * (n - 1)
    if (src.get("n_group") or 0) > 1:
        kw["n_group"], kw["topk_group"] = 4, 2
    kw.update(extra)
    return {"text_config": kw} if text else kw


MOE_BLOCK_NAMES = ("mlp", "block_sparse_moe", "feed_forward", "moe")


def model_class(cfg, multimodal=False):
    """The transformers class that builds a model for this config: a causal LM where there is one,
    else the other heads that hold the text decoder (token classifier, vision-language model);
    the vision-language model first when multimodal."""
    from transformers.models.auto import modeling_auto as auto
    tables = ["MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES",
              "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "MODEL_MAPPING_NAMES"]
    if multimodal:
        tables.insert(0, tables.pop(2))
    for table in tables:
        name = getattr(auto, table, {}).get(cfg.model_type)
        if isinstance(name, (list, tuple)):
            name = name[0]
        if name and hasattr(transformers, name):
            return getattr(transformers, name)
    raise ValueError(f"no transformers model class for model_type {cfg.model_type!r}")


def decoder_layers(model):
    """The decoder's layer list: model.model.layers, or the first 'layers' ModuleList that holds
    an MoE block (multimodal wrappers nest the text model deeper)."""
    inner = getattr(getattr(model, "model", None), "layers", None)
    if isinstance(inner, torch.nn.ModuleList):
        return "model.layers", inner
    for name, mod in model.named_modules():
        if name.endswith("layers") and isinstance(mod, torch.nn.ModuleList) and any(
                moe_block_of(layer)[1] is not None for layer in mod):
            return name, mod
    return None, torch.nn.ModuleList()


def moe_block_of(layer_module):
    for name in MOE_BLOCK_NAMES:
        block = getattr(layer_module, name, None)
        if block is not None and (hasattr(block, "experts") or hasattr(block, "router") or
                                  isinstance(getattr(block, "gate", None), torch.nn.Module)):
            return name, block
    return None, None


def moe_block(model, layer):
    return moe_block_of(decoder_layers(model)[1][layer])


def randomize(model, opts, gen):
    """Random MoE weights (std w_std) and random non-zero router / correction biases."""
    w_std = opts.get("w_std", 0.15)
    bias_std = opts.get("bias_std", 0.5)
    with torch.no_grad():
        for layer in range(len(decoder_layers(model)[1])):
            _, block = moe_block(model, layer)
            if block is None:
                continue
            for name, p in list(block.named_parameters()) + list(block.named_buffers()):
                if "e_score_correction_bias" in name or (name.endswith("bias") and ("gate" in name or "router" in name)
                                                         and p.dim() == 1):
                    p.copy_(torch.randn(p.shape, generator=gen) * bias_std)
                elif name.endswith("bias"):
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
                elif p.dtype.is_floating_point:
                    std = 0.3 if ("gate" in name or "router" in name) and "proj" not in name else w_std
                    p.copy_(torch.randn(p.shape, generator=gen) * std)


def to_hub_layout(path, how):
    """Rewrites the save_pretrained checkpoint in `path` as the Hub holds it (see HUB)."""
    from safetensors.torch import load_file, save_file
    files = [f for f in os.listdir(path) if f.endswith(".safetensors")]
    if files != ["model.safetensors"]:
        raise ValueError(f"expected one model.safetensors, found {files}")
    f = os.path.join(path, "model.safetensors")
    sd, out, changed = load_file(f), {}, 0
    for k, v in sd.items():
        if how == "transpose_fused" and re.search(r"\.experts\.(gate_up|down)_proj$", k):
            v, changed = v.transpose(1, 2).contiguous(), changed + 1
        elif how == "blocks_to_layers" and k.startswith("language_model.model.blocks."):
            k, changed = "language_model.model.layers." + k[len("language_model.model.blocks."):], changed + 1
        out[k] = v
    if not changed:
        raise ValueError(f"{how}: nothing to rewrite")
    save_file(out, f, metadata={"format": "pt"})


def safetensors_names(path):
    """{name: (dtype, shape)} read from the safetensors header(s) of a save_pretrained directory."""
    files = [f for f in os.listdir(path) if f.endswith(".safetensors")]
    out = {}
    for f in files:
        with open(os.path.join(path, f), "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(n))
        for k, v in header.items():
            if k != "__metadata__":
                out[k] = (v["dtype"], tuple(v["shape"]))
    return out


def hf_route(block, x2d):
    """(ids [T, k], weights [T, k]) from the HF block's router, or None if its API is unknown."""
    router = getattr(block, "gate", None)
    if router is None or not isinstance(router, torch.nn.Module):
        router = getattr(block, "router", None)
    if router is None:
        return None, None
    try:
        if hasattr(block, "e_score_correction_bias") and not hasattr(router, "e_score_correction_bias"):
            out = router(x2d, block.e_score_correction_bias)  # MiniMax-M2
        else:
            out = router(x2d)
    except TypeError:
        return None, None
    if isinstance(out, tuple) and len(out) == 3:
        logits, weights, ids = out
        return ids, weights, logits
    if isinstance(out, tuple) and len(out) == 2:  # Llama-4: (scores [T, E] with -inf off the top-k, logits)
        scores, logits = out
        k = block.top_k
        ids = torch.topk(logits, k, dim=-1)[1]
        return ids, scores.gather(1, ids), logits
    return None, None


def compare_topk(ids, w, ref_ids, ref_w):
    """Whether each token picks the same expert set, and the largest weight difference by expert."""
    ids, ref_ids = np.asarray(ids), np.asarray(ref_ids, dtype=np.int64)
    order, ref_order = np.argsort(ids, axis=1), np.argsort(ref_ids, axis=1)
    a = np.take_along_axis(ids, order, 1)
    b = np.take_along_axis(ref_ids, ref_order, 1)
    same = bool((a == b).all())
    wa = np.take_along_axis(np.asarray(w), order, 1)
    wb = np.take_along_axis(np.asarray(ref_w, dtype=np.float32), ref_order, 1)
    return same, float(np.abs(wa - wb).max()) if same else float("nan"), int((a != b).any(axis=1).sum())


def run_refused(family, tokens, keep):
    """The reader must refuse this family's config.json (as transformers writes it) as UNSUPPORTED."""
    _, model_type, overrides = REFUSED_BY_NAME[family]
    out_dir = tempfile.mkdtemp(prefix=f"hfpar-{family}-", dir=keep)
    AutoConfig.for_model(model_type, **overrides).save_pretrained(out_dir)
    try:
        cfg = moefuse.load_config(out_dir)
    except moefuse.MoeError as e:
        ok = e.status == moefuse.Status.UNSUPPORTED and bool(e.message)
        return [f"{family:18s} {'-':>5s} {tokens:6d}  refused: {e.name}: {e.message.split(': ', 1)[-1]}  "
                f"{'PASS' if ok else 'FAIL'}"], ok
    return [f"{family:18s} {'-':>5s} {tokens:6d}  accepted (E={cfg.layer.num_experts}), expected "
            f"MOE_STATUS_UNSUPPORTED  FAIL"], False


def run_family(family, tokens, seed, keep):
    if family in REFUSED_BY_NAME:
        return run_refused(family, tokens, keep)
    hub = None
    if family in HUB:
        base, hub = HUB[family]
        model_type, opts = base, {"bias_std": 0.2}
        kw = shrink_defaults(base, AUTO[base])
    elif family in AUTO:
        model_type, opts = family, {"bias_std": 0.2}
        kw = shrink_defaults(family, AUTO[family])
    else:
        model_type, overrides, opts = FAMILIES[family]
        kw = dict(BASE)
        kw.update(overrides)
    if "wrapper" in opts:
        wrapper_type, wrapper_kw = opts["wrapper"]
        kw.pop("tie_word_embeddings", None)
        cfg = AutoConfig.for_model(wrapper_type, text_config=dict(kw, model_type=model_type), **wrapper_kw)
    else:
        cfg = AutoConfig.for_model(model_type, **kw)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    cls = model_class(cfg, multimodal="wrapper" in opts)
    model = cls._from_config(cfg, dtype=torch.float32)
    randomize(model, opts, gen)
    dtype = opts.get("dtype", torch.float32)
    model = model.to(dtype)
    out_dir = tempfile.mkdtemp(prefix=f"hfpar-{family}-", dir=keep)
    model.save_pretrained(out_dir)
    if hub:
        to_hub_layout(out_dir, hub)
    names = safetensors_names(out_dir)
    ref_model = cls.from_pretrained(out_dir, dtype=torch.float32).eval()

    lines = []
    try:
        mcfg = moefuse.load_config(out_dir)
    except moefuse.MoeError as e:
        return [f"{family:18s} {'-':>5s} {tokens:6d}  config.json refused: {e.name}: {e.message}  FAIL"], False
    spec = mcfg.layer
    layers_path, layers = decoder_layers(ref_model)
    hf_moe_layers = [l for l in range(len(layers)) if moe_block(ref_model, l)[1] is not None]
    mf_moe_layers = [l for l in range(mcfg.num_layers) if mcfg.layer_is_moe[l]]
    ok = True
    if hf_moe_layers != mf_moe_layers:
        lines.append(f"{family:18s} {'-':>5s} {tokens:6d}  MoE layers differ: HF {hf_moe_layers}, moefuse "
                     f"{mf_moe_layers}  FAIL")
        ok = False
    ctx = moefuse.Context("cpu")
    rng = np.random.default_rng(seed)
    with moefuse.Checkpoint(out_dir) as ck:
        for layer in hf_moe_layers:
            block_name, block = moe_block(ref_model, layer)
            try:
                w = moefuse.Weights.load(ctx, ck, spec, layer, "f32")
            except moefuse.MoeError as e:
                here = re.compile(rf"(^|\.)(layers|blocks)\.{layer}\.({'|'.join(MOE_BLOCK_NAMES)})\.")
                mine = sorted(n for n in names if here.search(n))
                shown = ", ".join(f"{n} {names[n][0]}{list(names[n][1])}" for n in mine[:6])
                lines.append(f"{family:18s} {layer:5d} {tokens:6d}  checkpoint not read: {e.name}: {e.message} "
                             f"| saved: {shown}{' ...' if len(mine) > 6 else ''}  FAIL")
                ok = False
                continue
            x = rng.standard_normal((tokens, spec.hidden)).astype(np.float32)
            xt = torch.from_numpy(x)
            with torch.no_grad():
                ref = block(xt[None])
                ref = (ref[0] if isinstance(ref, tuple) else ref).reshape(tokens, -1).numpy()
                routed = hf_route(block, xt)
            k = spec.top_k
            ids = np.empty((tokens, k), np.int32)
            tw = np.empty((tokens, k), np.float32)
            y = ctx.forward(w, x, out_topk_ids=ids, out_topk_weights=tw)
            scale = float(np.abs(ref).max())
            err = float(np.abs(y - ref).max()) / scale
            err_l = float("nan")
            topk_ok, w_err, bad_tokens = None, float("nan"), 0
            if routed[0] is not None:
                ref_ids, ref_w, logits = routed
                y2 = ctx.forward(w, x, router_logits=np.ascontiguousarray(logits.float().numpy()))
                err_l = float(np.abs(y2 - ref).max()) / scale
                topk_ok, w_err, bad_tokens = compare_topk(ids, tw, ref_ids.numpy(), ref_w.float().numpy())
            good = err <= TOL and (np.isnan(err_l) or err_l <= TOL) and topk_ok is not False
            ok &= good
            agree = "n/a" if topk_ok is None else ("yes" if topk_ok else f"no ({bad_tokens} tokens)")
            lines.append(f"{family:18s} {layer:5d} {tokens:6d}  rel_err {err:.2e} (router) {err_l:.2e} (HF logits)  "
                         f"topk_ids {agree:>4s}  topk_w_err {w_err:.1e}  {'PASS' if good else 'FAIL'}")
    return lines, ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("families", nargs="*", help=f"default: all ({', '.join(FAMILIES)})")
    ap.add_argument("--tokens", type=int, default=37)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--keep", help="write the tiny models under this directory (kept)")
    args = ap.parse_args()
    known = list(FAMILIES) + list(AUTO) + list(HUB) + list(REFUSED_BY_NAME)
    families = args.families or known
    print(f"# hf_parity: transformers {transformers.__version__}, torch {torch.__version__}, moefuse "
          f"{moefuse.version()}, tokens {args.tokens}, seed {args.seed}, tolerance {TOL:g} (max abs err / max |ref|)")
    print(f"# {'family':16s} {'layer':>5s} {'tokens':>6s}  result")
    all_ok = True
    tmp = None
    if not args.keep:
        tmp = tempfile.TemporaryDirectory(prefix="hf_parity-")
    keep = args.keep or tmp.name
    os.makedirs(keep, exist_ok=True)
    for family in families:
        if family not in known:
            print(f"{family:18s} unknown family (known: {', '.join(known)})  FAIL")
            all_ok = False
            continue
        try:
            lines, ok = run_family(family, args.tokens, args.seed, keep)
        except Exception as e:  # transformers could not build or run the model here
            tb = traceback.format_exc().strip().splitlines()[-1]
            lines, ok = [f"{family:18s} {'-':>5s} {args.tokens:6d}  error: {type(e).__name__}: {tb[:300]}  FAIL"], False
        for line in lines:
            print(line, flush=True)
        all_ok &= ok
    print(f"# {'all PASS' if all_ok else 'some FAIL'}")
    if tmp:
        tmp.cleanup()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
