"""moefuse: the Mixture-of-Experts MLP block, through ctypes over libmoefuse (no compiled
extension).

The library is found on first use, not at import: $MOEFUSE_LIB (a file, or a directory
holding libmoefuse.so), else <repository>/build/libmoefuse.so beside this package, else
ctypes.util.find_library("moefuse"). Calls raise moefuse.LibraryNotFoundError listing those
places when none is there; every failing library call raises moefuse.MoeError(status, name,
message) with the library's message.

    import moefuse
    y = moefuse.fused_experts(x, w1, w2, topk_weights, topk_ids)       # numpy, CPU backend
    y = moefuse.fused_moe(x, w1, w2, router_logits, topk=8, renormalize=True)

moefuse.torch has the same two functions for torch tensors (CPU or CUDA).

A real model's layer, from its config.json and safetensors (any layout moe_weights_load reads):

    ctx = moefuse.Context("cpu")
    config = moefuse.load_config("path/to/model")
    with moefuse.Checkpoint("path/to/model") as ck:
        weights = moefuse.load_weights(ctx, ck, config, layer=3, format="bf16")
"""

from ._lib import (Activation, Backend, DType, Format, Layout, LibraryNotFoundError, Memory, MoeError,
                   MoeForwardArgs, MoeLayerSpec, MoeModelConfig, MoeTensor, MoeWeightsDesc, Score, Status)
from ._api import (Checkpoint, Context, LayerSpec, ModelConfig, Quantized, TensorInfo, Weights, default_context,
                   dequantize, format_layout, format_name, load_config, load_weights, parse_config, preset, presets,
                   quantize, route, version)
from ._frontend import cache_info, clear_cache
from ._numpy_ops import fused_experts, fused_moe, sglang_fused_experts

__version__ = "0.1.0"

__all__ = [
    "Activation", "Backend", "DType", "Format", "Layout", "LibraryNotFoundError", "Memory", "MoeError",
    "MoeForwardArgs", "MoeLayerSpec", "MoeModelConfig", "MoeTensor", "MoeWeightsDesc", "Score", "Status",
    "Checkpoint", "Context", "LayerSpec", "ModelConfig", "Quantized", "TensorInfo", "Weights", "default_context",
    "dequantize", "format_layout", "format_name", "load_config", "load_weights", "parse_config", "preset", "presets",
    "quantize", "route", "version",
    "cache_info", "clear_cache", "fused_experts", "fused_moe", "sglang_fused_experts",
]
