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
to layers, and the reference model is read from it by transformers' own conversion mapping), QUANT
(quantised releases: GPT-OSS's MXFP4 experts and DeepSeek-V3's FP8 ones, quantised here and written
with the release's names, dtypes and quantization_config; a 'weights' line per layer compares the
weights moe_weights_load decodes, unpacked, with transformers' own dequantisation of the same bytes,
bit for bit, before the forward line; the forward's reference is the HF block on the dequantised
weights), REFUSED (families the reader must refuse: only their config.json is written, and the line
PASSes when moefuse says MOE_STATUS_UNSUPPORTED).

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
    # transformers' DeepseekV2 router ignores norm_topk_prob: moefuse follows it
    "deepseek_v2-norm": ("deepseek_v2", dict(intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                                             n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=2,
                                             first_k_dense_replace=1, routed_scaling_factor=1.5, topk_method="greedy",
                                             norm_topk_prob=True, q_lora_rank=32, kv_lora_rank=32,
                                             qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                                             num_key_value_heads=4), {}),
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
    # DeepSeek-V3's router and block under other names; glm5_next clamps its SwiGLU everywhere
    "axk2": {}, "beam": {}, "minicpm5_moe": {}, "dots3_note_text": dict(num_key_value_heads=4, pad_token_id=None),
    "glm5_next": dict(num_key_value_heads=4, pad_token_id=None, swiglu_limit=0.5), "unlimited_ocr": {},
    "qwen3_omni_moe_thinker": {},
    # Laguna: its correction bias sits with the experts (mlp.experts.e_score_correction_bias)
    "laguna": {},
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

# Quantised releases: the tiny model's experts are quantised here the way the release ships them, the
# checkpoint rewritten with the release's tensor names, shapes and dtypes and its config.json given the
# release's quantization_config; moe_weights_load's decoding is compared with transformers' own
# dequantisation of the same bytes (bit for bit, fp32), then the forward with the HF block run on it.
#   mxfp4   GPT-OSS's release: mlp.experts.{gate_up,down}_proj_blocks [E, rows, cols/32, 16] u8 (two E2M1
#           codes a byte, low nibble first) and _scales [E, rows, cols/32] u8 (E8M0, bias 127), out x in
#           (gate_up's rows interleaved gate, up), biases and router bf16; encoded by mx_encode (OCP MX
#           v1.0); transformers' reference: convert_moe_packed_tensors, and from_pretrained with
#           Mxfp4Config(dequantize=True) (its CPU path) for the block. A few scale codes of the last MoE
#           layer are set to 0..2 (2^-127..2^-125: fp32 subnormal weights) to test the decoder's low end.
#   fp8     DeepSeek-V3's release: experts.N.{gate,up,down}_proj.weight and shared_experts.*.weight F8_E4M3
#           with .weight_scale_inv F32 [ceil(rows/128), ceil(cols/128)] (x = q * s; the last block partial
#           where a dimension is not a multiple of 128, as DeepSeek's weight_dequant reads it), encoded by
#           fp8_block_encode (s = amax/448, DeepSeek's rule); transformers' reference: _dequantize_fp8_weight
#           (the same ceil grid), and from_pretrained with FineGrainedFP8Config(dequantize=True) for the block
#           where its loader accepts the file (fp8_loader_reference; fp8_loader_note says what its
#           Fp8Dequantize makes of the rest). moefuse packs "f32" and "fp8-block128".
QUANT = {
    "gpt_oss-mxfp4": ("gpt_oss", dict(intermediate_size=96, num_hidden_layers=2, num_local_experts=8,
                                      num_experts_per_tok=2, sliding_window=32),
                      {"quant": "mxfp4", "w_std": 0.5, "bias_std": 1.0}),
    "deepseek_v3-fp8": ("deepseek_v3", dict(hidden_size=256, intermediate_size=256, moe_intermediate_size=128,
                                            num_hidden_layers=3, n_routed_experts=16, num_experts_per_tok=4,
                                            n_group=4, topk_group=2, routed_scaling_factor=2.5, n_shared_experts=2,
                                            first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=32,
                                            qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                                            num_key_value_heads=4), {"quant": "fp8", "bias_std": 0.2}),
    # -p: H = 192, I = 160, shared 2 * 160 = 320: every matrix has partial 128x128 blocks
    "deepseek_v3-fp8-p": ("deepseek_v3", dict(hidden_size=192, intermediate_size=256,
                                                    moe_intermediate_size=160, num_hidden_layers=2,
                                                    n_routed_experts=16, num_experts_per_tok=4, n_group=4,
                                                    topk_group=2, routed_scaling_factor=2.5, n_shared_experts=2,
                                                    first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=32,
                                                    qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                                                    num_key_value_heads=4), {"quant": "fp8", "bias_std": 0.2}),
}
# The releases' config.json quantization_config (openai/gpt-oss-20b, deepseek-ai/DeepSeek-V3).
QUANT_CONFIG = {
    "mxfp4": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                         "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "fp8": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]},
}

# Families the reader must refuse with MOE_STATUS_UNSUPPORTED: only their config.json is written and read.
# Entries "family" use transformers' default config; ("name", model_type, overrides) a modified one.
REFUSED = ["phimoe", "jamba", "nemotron_h", "ernie4_5_moe", "dbrx", "hunyuan_v1_moe", "granitemoeshared",
           "granitemoehybrid", "kimi_linear", "afmoe", "exaone_moe", "longcat_flash", "aria_text",
           "minimax_m3_vl_text", "jetmoe", "doge", "zaya", "lfm2_moe", "kolibri1", "flint", "lara_mini",
           "inkling_text", "inkling2", "muse_spark", "openai_privacy_filter",
           ("mistral4-group", "mistral4", dict(n_group=2, topk_group=1)),
           ("mistral_large4-group", "mistral_large4", {"text_config": dict(n_group=2, topk_group=1)}),
           "axk1", "hy_v4", "hy_v4_vl", "qwen3_omni_moe", ("deepseek_v4-hash", "deepseek_v4", {}),
           "ergo", "ernie4_5_vl_moe", "hy_v3",
           ("axk2-group", "axk2", dict(n_group=2, topk_group=1)),
           ("laguna-softcap", "laguna", dict(moe_router_logit_softcapping=30.0)),
           ("step3p5-clamp", "step3p5", dict(swiglu_limits=[0.0] * 44 + [7.0])),
           ("step3p5-bias", "step3p5", dict(mlp_bias=True)),
           ("deepseek_v2-bias", "deepseek_v2", dict(mlp_bias=True, num_experts_per_tok=2))]
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


def forward_line(family, layer, ctx, w, spec, block, x):
    """moefuse's forward on weights w against the HF block on x [T, H]: routing by moefuse's
    router and by the HF router's logits, and the top-k ids / weights. (line, ok)."""
    tokens = x.shape[0]
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
    agree = "n/a" if topk_ok is None else ("yes" if topk_ok else f"no ({bad_tokens} tokens)")
    return (f"{family:18s} {layer:5d} {tokens:6d}  rel_err {err:.2e} (router) {err_l:.2e} (HF logits)  "
            f"topk_ids {agree:>4s}  topk_w_err {w_err:.1e}  {'PASS' if good else 'FAIL'}"), good


def run_family(family, tokens, seed, keep):
    if family in REFUSED_BY_NAME:
        return run_refused(family, tokens, keep)
    if family in QUANT:
        return run_quant(family, tokens, seed, keep)
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
            line, good = forward_line(family, layer, ctx, w, spec, block, x)
            ok &= good
            lines.append(line)
    return lines, ok


E2M1_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def mx_encode(w):
    """MXFP4 of w [..., cols] (cols % 32 == 0) by the OCP MX v1.0 rule, written here without moefuse or
    transformers: each 32-element block along cols gets the shared exponent e = floor(log2(amax)) - 2
    (E2M1's emax), clamped to E8M0's -127..127 (e = 0 for an all-zero block), stored as e + 127; each
    element x / 2^e rounds to the nearest E2M1 magnitude (ties to the even code), saturating at 6, with
    x's sign in bit 3. Returns (blocks [..., cols/32, 16] u8, element 2j in the low nibble of byte j;
    scales [..., cols/32] u8)."""
    x = np.asarray(w, np.float64)
    xb = x.reshape(*x.shape[:-1], x.shape[-1] // 32, 32)
    amax = np.abs(xb).max(-1)
    e = np.where(amax > 0, np.frexp(amax)[1] - 1 - 2, 0).clip(-127, 127)
    y = np.abs(xb) / np.exp2(e)[..., None]
    d = np.abs(y[..., None] - E2M1_GRID)
    near = d == d.min(-1, keepdims=True)  # one code, or two neighbours (one even) on a tie
    even = near & (np.arange(8) % 2 == 0)
    code = np.where(even.any(-1), even.argmax(-1), near.argmax(-1)).astype(np.uint8)
    code |= np.where(np.signbit(xb), 8, 0).astype(np.uint8)
    blocks = code[..., 0::2] | (code[..., 1::2] << 4)
    return blocks.astype(np.uint8), (e + 127).astype(np.uint8)


def fp8_block_encode(w):
    """DeepSeek-V3's FP8 weight quantisation of w [rows, cols] (torch fp32): per 128x128 block (the last
    ones partial) s = amax / 448 (1 for an all-zero block), q = e4m3(x / s) (RNE, clamped to +-448).
    Returns (q float8_e4m3fn [rows, cols], weight_scale_inv fp32 [ceil(rows/128), ceil(cols/128)])."""
    rows, cols = w.shape
    q = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    s = torch.empty((rows + 127) // 128, (cols + 127) // 128, dtype=torch.float32)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128].float()
            amax = float(blk.abs().max())
            s[i, j] = amax / 448.0 if amax > 0 else 1.0
            q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = (blk / s[i, j]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return q, s


def ds_weight_dequant(q, s):
    """DeepSeek's weight_dequant (inference/kernel.py) in numpy: y[i, j] = fp32(q[i, j]) * s[i // 128, j // 128]."""
    qf = q.float().numpy()
    return qf * np.repeat(np.repeat(s.numpy(), 128, 0), 128, 1)[:qf.shape[0], :qf.shape[1]]


def bits_equal(a, b):
    """Whether two fp32 arrays are the same bit for bit (so -0 differs from +0), and max |a - b|."""
    a, b = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)
    if a.shape != b.shape:
        return False, float("inf")
    return bool((a.view(np.uint32) == b.view(np.uint32)).all()), float(np.abs(a - b).max(initial=0.0))


def quantize_checkpoint(out_dir, how, moe_layers, layer_prefix, gen):
    """Rewrites save_pretrained's model.safetensors in out_dir as the release ships its experts (see QUANT)
    and adds the release's quantization_config to config.json. Returns the reference weights of each MoE
    layer, {layer: {"gate": [E, I, H], "up": [E, I, H], "down": [E, H, I], ("shared": (g, u, d))}} fp32,
    dequantised by transformers (mxfp4: convert_moe_packed_tensors; fp8: _dequantize_fp8_weight), and
    notes on the reference (a disagreement with the independent decoder here is a FAIL)."""
    from safetensors.torch import load_file, save_file
    f = os.path.join(out_dir, "model.safetensors")
    sd, refs, notes = load_file(f), {}, []
    for layer in moe_layers:
        p = f"{layer_prefix}.{layer}.mlp."
        ref = {}
        if how == "mxfp4":
            from transformers.integrations.mxfp4 import convert_moe_packed_tensors
            for proj in ("gate_up_proj", "down_proj"):
                w = sd.pop(p + f"experts.{proj}").float().transpose(1, 2)  # [E, H, 2I] / [E, I, H] -> out x in
                blocks, scales = (torch.from_numpy(np.ascontiguousarray(a)) for a in mx_encode(w.numpy()))
                if proj == "gate_up_proj" and layer == moe_layers[-1]:  # 2^-127..2^-125 blocks
                    idx = torch.randint(0, scales.numel(), (6,), generator=gen)
                    scales.view(-1)[idx] = torch.tensor([0, 0, 1, 1, 2, 2], dtype=torch.uint8)
                sd[p + f"experts.{proj}_blocks"], sd[p + f"experts.{proj}_scales"] = blocks, scales
                deq = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)  # in x out, as GptOssExperts
                deq16 = convert_moe_packed_tensors(blocks, scales)  # transformers' default, bf16
                if not torch.equal(deq16.float(), deq):
                    notes.append(f"layer {layer} {proj}: bf16 and fp32 dequantisation differ")
                if proj == "gate_up_proj":
                    ref["gate"] = deq[:, :, 0::2].transpose(1, 2).numpy()
                    ref["up"] = deq[:, :, 1::2].transpose(1, 2).numpy()
                else:
                    ref["down"] = deq.transpose(1, 2).numpy()
        else:
            from transformers.integrations.finegrained_fp8 import _dequantize_fp8_weight

            def quant(name):
                q, s = fp8_block_encode(sd[name])
                sd[name], sd[name[:-len("weight")] + "weight_scale_inv"] = q, s
                deq = _dequantize_fp8_weight(q, s, [128, 128], torch.float32).numpy()
                if not bits_equal(deq, ds_weight_dequant(q, s))[0]:
                    notes.append(f"{name}: transformers' _dequantize_fp8_weight differs from weight_dequant")
                return deq
            E = 1 + max(int(m.group(1)) for k in sd for m in [re.match(re.escape(p) + r"experts\.(\d+)\.", k)] if m)
            for proj, key in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down")):
                ref[key] = np.stack([quant(p + f"experts.{e}.{proj}.weight") for e in range(E)])
            if p + "shared_experts.down_proj.weight" in sd:
                ref["shared"] = tuple(quant(p + f"shared_experts.{proj}.weight")
                                      for proj in ("gate_proj", "up_proj", "down_proj"))
            if p + "gate.e_score_correction_bias" in sd:  # F32 in the release
                sd[p + "gate.e_score_correction_bias"] = sd[p + "gate.e_score_correction_bias"].float()
        refs[layer] = ref
    save_file(sd, f, metadata={"format": "pt"})
    cfg_path = os.path.join(out_dir, "config.json")
    with open(cfg_path) as fh:
        cfg = json.load(fh)
    cfg["quantization_config"] = QUANT_CONFIG[how]
    with open(cfg_path, "w") as fh:
        json.dump(cfg, fh, indent=2)
    return refs, notes


def set_block_weights(block, ref):
    """Puts a layer's reference weights (quantize_checkpoint) into a DeepSeek-V3 HF MoE block."""
    with torch.no_grad():
        ex = block.experts
        ex.gate_up_proj.copy_(torch.from_numpy(np.concatenate([ref["gate"], ref["up"]], 1)))
        ex.down_proj.copy_(torch.from_numpy(ref["down"]))
        if "shared" in ref:
            for proj, wt in zip(("gate_proj", "up_proj", "down_proj"), ref["shared"]):
                getattr(block.shared_experts, proj).weight.copy_(torch.from_numpy(wt))


def hf_block_weights(block):
    """A DeepSeek-V3 / GPT-OSS HF block's expert weights in quantize_checkpoint's reference form."""
    ex, out = block.experts, {}
    if hasattr(ex, "gate_up_proj_bias"):  # GPT-OSS: in x out, interleaved
        gu = ex.gate_up_proj.detach()
        out.update(gate=gu[:, :, 0::2].transpose(1, 2).numpy(), up=gu[:, :, 1::2].transpose(1, 2).numpy(),
                   down=ex.down_proj.detach().transpose(1, 2).numpy())
    else:  # transformers 5's experts: [E, 2I, H] gate rows then up, [E, H, I]
        gu = ex.gate_up_proj.detach().numpy()
        i = gu.shape[1] // 2
        out.update(gate=gu[:, :i], up=gu[:, i:], down=ex.down_proj.detach().numpy())
        if getattr(block, "shared_experts", None) is not None:
            out["shared"] = tuple(getattr(block.shared_experts, p).weight.detach().numpy()
                                  for p in ("gate_proj", "up_proj", "down_proj"))
    return out


def same_weights(a, b):
    """Whether two reference-weight dicts agree bit for bit."""
    keys = ("gate", "up", "down")
    return all(bits_equal(a[k], b[k])[0] for k in keys) and (
        ("shared" in a) == ("shared" in b) and all(bits_equal(x, y)[0] for x, y in zip(a.get("shared", ()),
                                                                                        b.get("shared", ()))))


def fp8_loader_reference(cls, out_dir):
    """transformers' FP8 loader on the quantised checkpoint, dequantising (its CPU path), or the reason it
    cannot read it. Its availability check asks for accelerate, which the dequantising path does not use."""
    from transformers import FineGrainedFP8Config
    import transformers.quantizers.quantizer_finegrained_fp8 as qfp8
    had = qfp8.is_accelerate_available
    qfp8.is_accelerate_available = lambda *a, **k: True
    try:
        return cls.from_pretrained(out_dir, dtype=torch.float32,
                                   quantization_config=FineGrainedFP8Config(dequantize=True)).eval(), None
    except Exception as e:  # noqa: BLE001 (what transformers says goes into the line)
        return None, f"{type(e).__name__}"
    finally:
        qfp8.is_accelerate_available = had


def fp8_loader_note(out_dir, layers_path, layer, refs):
    """What transformers' Fp8Dequantize (the from_pretrained(dequantize=True) path) makes of a routed and
    the shared gate_proj of `layer`: it takes the block size from the scale grid (rows // scale_rows), so
    where a dimension is not a multiple of 128 it raises, or reads blocks of the wrong size."""
    from safetensors import safe_open
    from transformers.integrations.finegrained_fp8 import Fp8Dequantize
    out = []
    with safe_open(os.path.join(out_dir, "model.safetensors"), "pt") as fh:
        for what, name, want in (("experts.0.gate_proj", "experts.0.gate_proj.", refs[layer]["gate"][0]),
                                 ("shared_experts.gate_proj", "shared_experts.gate_proj.",
                                  refs[layer].get("shared", (None,))[0])):
            if want is None:
                continue
            q = fh.get_tensor(f"{layers_path}.{layer}.mlp.{name}weight")
            sc = fh.get_tensor(f"{layers_path}.{layer}.mlp.{name}weight_scale_inv")
            shape = f"{list(q.shape)} (scales {list(sc.shape)})"
            try:
                got = Fp8Dequantize(None)._dequantize_one(q, sc, output_dtype=torch.float32).numpy()
            except Exception as e:  # noqa: BLE001
                out.append(f"{what} {shape}: {type(e).__name__}")
                continue
            same, diff = bits_equal(got, want)
            out.append(f"{what} {shape}: " + ("bit-exact" if same else f"{q.shape[0] // sc.shape[0]}x"
                                              f"{q.shape[1] // sc.shape[1]} blocks, max abs diff {diff:.1e}"))
    return "transformers' Fp8Dequantize on " + "; ".join(out)


def run_quant(family, tokens, seed, keep):
    """One QUANT family: per MoE layer a 'weights' line (moefuse's decoded weights against transformers'
    dequantisation, bit for bit, per format) and the usual forward line (format f32)."""
    model_type, overrides, opts = QUANT[family]
    how = opts["quant"]
    kw = dict(BASE)
    kw.update(overrides)
    cfg = AutoConfig.for_model(model_type, **kw)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    cls = model_class(cfg)
    model = cls._from_config(cfg, dtype=torch.float32)
    randomize(model, opts, gen)
    model = model.to(torch.bfloat16)  # both releases ship bf16 beside the quantised experts
    plain_dir = tempfile.mkdtemp(prefix=f"hfpar-{family}-bf16-", dir=keep)
    out_dir = tempfile.mkdtemp(prefix=f"hfpar-{family}-", dir=keep)
    model.save_pretrained(plain_dir)
    model.save_pretrained(out_dir)
    layers_path, layers = decoder_layers(model)
    hf_moe_layers = [l for l in range(len(layers)) if moe_block(model, l)[1] is not None]
    refs, notes = quantize_checkpoint(out_dir, how, hf_moe_layers, layers_path, gen)
    lines, ok = [], not notes
    for n in notes:
        lines.append(f"{family:18s} {'-':>5s} {tokens:6d}  reference: {n}  FAIL")
    try:
        mcfg = moefuse.load_config(out_dir)
    except moefuse.MoeError as e:
        return lines + [f"{family:18s} {'-':>5s} {tokens:6d}  config.json (quantization_config "
                        f"{QUANT_CONFIG[how]['quant_method']}) refused: {e.name}: {e.message}  FAIL"], False
    spec = mcfg.layer
    mf_moe_layers = [l for l in range(mcfg.num_layers) if mcfg.layer_is_moe[l]]
    if hf_moe_layers != mf_moe_layers:
        lines.append(f"{family:18s} {'-':>5s} {tokens:6d}  MoE layers differ: HF {hf_moe_layers}, moefuse "
                     f"{mf_moe_layers}  FAIL")
        ok = False
    # The reference model: transformers' own loader dequantising the release where it reads it (its weights
    # must then be the reference weights), else the bf16 model with the reference weights put in.
    if how == "mxfp4":
        from transformers import Mxfp4Config
        ref_model = cls.from_pretrained(out_dir, dtype=torch.float32,
                                        quantization_config=Mxfp4Config(dequantize=True)).eval()
        source, why = "transformers' MXFP4 loader (dequantize=True)", None
    else:
        ref_model, why = fp8_loader_reference(cls, out_dir)
        source = "transformers' FP8 loader (dequantize=True)"
        if ref_model is None:
            ref_model = cls.from_pretrained(plain_dir, dtype=torch.float32).eval()
            for layer in hf_moe_layers:
                set_block_weights(moe_block(ref_model, layer)[1], refs[layer])
            source = f"_dequantize_fp8_weight (transformers' FP8 loader refuses the file: {why})"
    for layer in hf_moe_layers:
        if not same_weights(hf_block_weights(moe_block(ref_model, layer)[1]), refs[layer]):
            lines.append(f"{family:18s} {layer:5d} {tokens:6d}  {source}: weights differ from the reference "
                         f"dequantisation  FAIL")
            ok = False
    formats = ["f32", "mxfp4"] if how == "mxfp4" else ["f32", "fp8-block128"]
    ctx = moefuse.Context("cpu")
    rng = np.random.default_rng(seed)
    with moefuse.Checkpoint(out_dir) as ck:
        for layer in hf_moe_layers:
            ref = refs[layer]
            parts, good, w32 = [], True, None
            for fmt in formats:
                try:
                    w = moefuse.Weights.load(ctx, ck, spec, layer, fmt)
                except moefuse.MoeError as e:
                    parts.append(f"{fmt}: not read: {e.name}: {e.message}")
                    good = False
                    continue
                exact, total, worst = 0, 0, 0.0
                pairs = []
                for e in range(spec.num_experts):
                    g, u, d = w.unpack(e)
                    pairs += [(g, ref["gate"][e]), (u, ref["up"][e]), (d, ref["down"][e])]
                shared_exact, shared_err = None, 0.0
                if "shared" in ref:
                    got = w.unpack(-1)
                    res = [bits_equal(a, b) for a, b in zip(got, ref["shared"])]
                    shared_exact = all(r[0] for r in res)
                    shared_err = max(r[1] / float(np.abs(b).max()) for r, b in zip(res, ref["shared"]))
                for a, b in pairs:
                    same, err = bits_equal(a, b)
                    exact, total, worst = exact + same, total + 1, max(worst, err / float(np.abs(b).max()))
                # Routed experts: exact in every format (the MXFP4 grid survives re-quantisation; E4M3 codes
                # and scales are copied). The shared expert is re-quantised in the FP8 formats (the
                # descriptor has no shared scales): within half an e4m3 step (2^-4 relative) of the block max.
                fine = exact == total and (shared_exact is None or shared_exact or
                                           (fmt != "f32" and shared_err <= 2.0 ** -4))
                good &= fine
                text = f"{fmt}: {exact}/{total} bit-exact" + (f" (max rel {worst:.1e})" if exact != total else "")
                if shared_exact is not None:
                    text += ", shared " + ("bit-exact" if shared_exact else f"max rel {shared_err:.1e}")
                parts.append(text)
                if fmt == "f32":
                    w32 = w
            ok &= good
            lines.append(f"{family:18s} {layer:5d} {tokens:6d}  weights vs transformers' dequantisation: "
                         f"{'; '.join(parts)}  {'PASS' if good else 'FAIL'}")
            if w32 is None:
                continue
            x = rng.standard_normal((tokens, spec.hidden)).astype(np.float32)
            line, good = forward_line(family, layer, ctx, w32, spec, moe_block(ref_model, layer)[1], x)
            ok &= good
            lines.append(line)
    if how == "fp8":
        note = fp8_loader_note(out_dir, layers_path, hf_moe_layers[0], refs)
        lines.append(f"# {family}: reference model from {source}; {note}")
    return lines, ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("families", nargs="*", help=f"default: all ({', '.join(FAMILIES)})")
    ap.add_argument("--tokens", type=int, default=37)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--keep", help="write the tiny models under this directory (kept)")
    args = ap.parse_args()
    known = list(FAMILIES) + list(AUTO) + list(HUB) + list(QUANT) + list(REFUSED_BY_NAME)
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
