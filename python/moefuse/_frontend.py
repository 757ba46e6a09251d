"""vLLM's fused_experts / fused_moe arguments turned into moefuse calls, once for every array
library: numpy (moefuse._numpy_ops) and torch (moefuse.torch) differ only in an `ops` object
that knows how to describe, convert and allocate their arrays.

What vLLM's names mean here:
  w1 [E, 2I, H]   gate rows 0..I-1, up rows I..2I-1 (MOE_LAYOUT_CONCAT); GPT-OSS's
                  "swigluoai" has them interleaved (even rows gate), as vLLM expects it;
                  "relu2_no_mul" has the I rows of W1 only
  w2 [E, H, I]
  topk_ids / topk_weights [T, k]: any integer / float dtype, converted to int32 / float32
  use_fp8_w8a8    e4m3 weights with per-expert scales w1_scale [E] (block_shape None) or
                  DeepSeek 128x128 block scales [E, ceil(rows/128), ceil(cols/128)]
                  (block_shape [128, 128]); activations quantised dynamically by the library
                  (per tensor, or in 1x128 groups)
  expert_map      global expert id -> local id or -1: ids of other ranks' experts become -1,
                  no expert (left out of the plan: no work, nothing added)
  topk_ids -1     no expert, with or without expert_map (the library's convention)
"""

import ctypes
import inspect
import threading
import weakref

from . import _api, _lib
from ._lib import Activation, DType, Format, Layout, MoeError, Status

# vLLM activation name -> (moefuse activation, alpha, limit, w1 layout).
ACTIVATIONS = {
    "silu": (Activation.SWIGLU, None, None, Layout.CONCAT),
    "swiglu": (Activation.SWIGLU, None, None, Layout.CONCAT),
    "gelu": (Activation.GEGLU, None, None, Layout.CONCAT),
    "geglu": (Activation.GEGLU, None, None, Layout.CONCAT),
    "gelu_tanh": (Activation.GEGLU_TANH, None, None, Layout.CONCAT),
    "gelu_pytorch_tanh": (Activation.GEGLU_TANH, None, None, Layout.CONCAT),
    "geglu_tanh": (Activation.GEGLU_TANH, None, None, Layout.CONCAT),
    "relu": (Activation.REGLU, None, None, Layout.CONCAT),
    "reglu": (Activation.REGLU, None, None, Layout.CONCAT),
    "swigluoai": (Activation.SWIGLU_OAI, 1.702, 7.0, Layout.INTERLEAVED),
    "swiglu_oai": (Activation.SWIGLU_OAI, 1.702, 7.0, Layout.INTERLEAVED),
    # the same form on w1's gate rows then up rows (vLLM's MoEActivation.SWIGLUOAI_UNINTERLEAVE)
    "swigluoai_uninterleave": (Activation.SWIGLU_OAI, 1.702, 7.0, Layout.CONCAT),
    "relu2_no_mul": (Activation.RELU2, None, None, Layout.CONCAT),
    "relu2": (Activation.RELU2, None, None, Layout.CONCAT),
}


def error(status, message):
    return MoeError(status, _lib.status_name(status), message)


def unsupported(fn, what):
    return error(Status.UNSUPPORTED, f"{fn}: {what} is not supported by moefuse")


def _activation(fn, name, act_alpha, act_limit):
    name = getattr(name, "value", name)  # vLLM's MoEActivation members carry the name as their value
    key = str(name).lower().replace("-", "_")
    if key not in ACTIVATIONS:
        raise error(Status.INVALID_ARGUMENT,
                    f"{fn}: activation = {name!r}, expected one of {', '.join(sorted(ACTIVATIONS))}")
    act, alpha, limit, layout = ACTIVATIONS[key]
    return act, (act_alpha if act_alpha is not None else alpha), (act_limit if act_limit is not None else limit), layout


# ---------------------------------------------------------------------------------------
# The packed-weights cache: one moe_weights_t per (weight arrays, spec, format, device).
# ---------------------------------------------------------------------------------------


class PackCache:
    """Packed weights keyed on the arrays they were packed from (the id of the array owning
    their memory, a view's base; data pointer, shape, strides, dtype, and torch's in-place
    version counter), the spec, format, layout and device. Entries hold weak references to
    the owning arrays and leave when any of them is collected; an array that cannot be
    weakly referenced is held strongly (so its id cannot be reused while the entry lives). A
    repack of the same memory at a new version replaces the older entry. Values changed in
    place behind an unchanged key are not seen: numpy arrays, and torch writes through
    `.data` or by other kernels, which leave the version counter as it was; call clear()
    after them."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries = {}  # key -> (weak references, packed weights, slot)
        self._slots = {}    # slot (the key without the versions) -> its live key
        self.packs = 0
        self.hits = 0

    def _drop(self, key):
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is not None and self._slots.get(entry[2]) == key:
                del self._slots[entry[2]]

    def get(self, key, slot, arrays, pack):
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and all(ref() is a for ref, a in zip(entry[0], arrays)):
                self.hits += 1
                return entry[1]
        weights = pack()  # outside the lock: packing large weights takes time
        refs = []
        for a in arrays:
            try:
                refs.append(weakref.ref(a, lambda _r, key=key: self._drop(key)))
            except TypeError:
                refs.append(lambda a=a: a)
        with self._lock:
            stale = self._slots.get(slot)
            if stale is not None and stale != key:
                self._entries.pop(stale, None)
            self._entries[key] = (refs, weights, slot)
            self._slots[slot] = key
            self.packs += 1
        return weights

    def clear(self):
        with self._lock:
            self._entries.clear()
            self._slots.clear()

    def info(self):
        with self._lock:
            return {"entries": len(self._entries), "packs": self.packs, "hits": self.hits}


CACHE = PackCache()


def clear_cache():
    """Forgets every packed weight set (they are freed once no call uses them)."""
    CACHE.clear()


def cache_info():
    """{"entries": live packed weight sets, "packs": packings done, "hits": reuses}."""
    return CACHE.info()


# ---------------------------------------------------------------------------------------
# Shared pieces.
# ---------------------------------------------------------------------------------------


def _check_unsupported(fn, use_int8_w8a8, use_int8_w8a16, use_int4_w4a16, use_mxfp4_w4a4, per_channel_quant,
                       w1_zp, w2_zp, a1_scale, a2_scale):
    for flag, name in ((use_int8_w8a8, "use_int8_w8a8"), (use_int8_w8a16, "use_int8_w8a16"),
                       (use_int4_w4a16, "use_int4_w4a16"), (use_mxfp4_w4a4, "use_mxfp4_w4a4"),
                       (per_channel_quant, "per_channel_quant")):
        if flag:
            raise unsupported(fn, name)
    for value, name in ((w1_zp, "w1_zp"), (w2_zp, "w2_zp")):
        if value is not None:
            raise unsupported(fn, name + " (zero points)")
    for value, name in ((a1_scale, "a1_scale"), (a2_scale, "a2_scale")):
        if value is not None:
            raise unsupported(fn, name + " (static activation scales; moefuse quantises activations dynamically)")


def _formats(fn, ops, w1, w2, use_fp8_w8a8, block_shape, w1_scale, w2_scale, format, act_format):
    """(weights format, activation format) for the call: from the weights' dtype and the FP8
    options, unless format= / act_format= say otherwise."""
    if use_fp8_w8a8:
        if w1_scale is None or w2_scale is None:
            raise error(Status.NULL_POINTER, f"{fn}: use_fp8_w8a8 needs w1_scale and w2_scale")
        if block_shape is None:
            wf, af = Format.FP8_TENSOR, Format.FP8_TENSOR
        elif list(block_shape) == [128, 128]:
            wf, af = Format.FP8_BLOCK128, Format.FP8_ROW128
        else:
            raise unsupported(fn, f"block_shape = {list(block_shape)} (only None or [128, 128])")
    else:
        if w1_scale is not None or w2_scale is not None:
            raise error(Status.INVALID_ARGUMENT, f"{fn}: w1_scale/w2_scale given without use_fp8_w8a8")
        wf = {DType.F16: Format.F16, DType.BF16: Format.BF16}.get(ops.dtype_of(w1), Format.F32)
        af = Format.F32
        floats = (DType.F32, DType.F16, DType.BF16)  # (other dtypes: the library names them)
        if format is None and ops.dtype_of(w1) in floats and ops.dtype_of(w2) in floats and \
                ops.dtype_of(w1) != ops.dtype_of(w2):  # both would be stored in w1's format
            raise error(Status.DTYPE_MISMATCH, f"{fn}: w1 is {DType(ops.dtype_of(w1)).name.lower()} and w2 "
                                               f"{DType(ops.dtype_of(w2)).name.lower()}, expected one dtype for both "
                                               f"(or format=)")
    wf = _api.format_from(format) if format is not None else wf
    af = _api.format_from(act_format) if act_format is not None else af
    return wf, af


def _block_scales(fn, ops, scale, name, E, rows, cols, block_shape):
    """The [E, ceil(rows/128), ceil(cols/128)] fp32 scales moe_weights_create takes: as given
    for block_shape [128, 128], broadcast from per-expert [E] scales otherwise."""
    blocks = (E, -(-rows // 128), -(-cols // 128))
    if block_shape is not None:
        return ops.to_float32(scale)
    if ops.numel(scale) not in (1, E):
        raise error(Status.SHAPE_MISMATCH,
                    f"{fn}: {name} has {ops.numel(scale)} elements, expected one per expert ({E}) "
                    f"for per-tensor FP8 (per-channel scales are not supported)")
    return ops.broadcast_scale(scale, blocks)


# The library's weight tensor names -> the caller's argument names (for messages).
_CALLER_NAMES = {"gate_up": "w1", "down": "w2", "gate_up_bias": "w1_bias", "down_bias": "w2_bias",
                 "gate_up_scale": "w1_scale", "down_scale": "w2_scale", "correction_bias": "e_score_correction_bias"}


def _spec_and_weights(fn, ops, ctx, place, w1, w2, top_k, activation, act_alpha, act_limit, w1_layout,
                      weight_on_input, w1_bias, w2_bias, w1_scale, w2_scale, fmt, use_fp8_w8a8, block_shape,
                      routing=None, correction_bias=None):
    """The layer spec of the call and its packed weights, through the cache."""
    if ops.ndim(w1) != 3 or ops.ndim(w2) != 3:
        raise error(Status.SHAPE_MISMATCH, f"{fn}: w1 has {ops.ndim(w1)} and w2 {ops.ndim(w2)} dimensions, "
                                           f"expected 3 each (w1 [E, 2I, H], w2 [E, H, I])")
    act, alpha, limit, layout = _activation(fn, activation, act_alpha, act_limit)
    if w1_layout is not None:
        layout = _api.layout_from(w1_layout)
    E, R13, H = (int(n) for n in ops.shape(w1))
    H2, inter = (int(n) for n in ops.shape(w2)[1:])
    rows = inter if act == Activation.RELU2 else 2 * inter
    if R13 != rows:
        raise error(Status.SHAPE_MISMATCH,
                    f"{fn}: w1 has {R13} rows an expert, expected {rows} for activation = {activation!r} "
                    + ("(not gated: W1's I rows only)" if act == Activation.RELU2 else "(gated: I gate and I up rows)")
                    + f", with I = {inter} from w2 [E, H, I]")
    spec = _api.LayerSpec(E, H, inter, int(top_k), activation=_api._enum_name(_api._ACTIVATIONS, act),
                          weight_on_input=bool(weight_on_input))
    if alpha is not None:
        spec.act_alpha = float(alpha)
    if limit is not None:
        spec.act_limit = float(limit)
    for name, value in (routing or {}).items():
        setattr(spec, name, value)
    spec.use_correction_bias = correction_bias is not None
    spec.expert_has_bias = w1_bias is not None or w2_bias is not None

    # The key holds the caller's arrays; what is derived from them (broadcast scales, the
    # zero bias standing in for a missing one) is made only when packing.
    sources = {"gate_up": w1, "down": w2, "gate_up_bias": w1_bias, "down_bias": w2_bias,
               "gate_up_scale": w1_scale, "down_scale": w2_scale, "correction_bias": correction_bias}
    names = sorted(n for n, a in sources.items() if a is not None)
    for n in names:
        ops.check_place(sources[n], _CALLER_NAMES[n], place)
    rest = (spec.key(), int(fmt), int(layout), bool(use_fp8_w8a8), block_shape is not None, place)
    # Tokens name the array owning the memory (a view's base), so a view made anew each call (w1[:],
    # a slice of a stacked parameter) keys as the same memory does and does not repack every call.
    # Their last item is the in-place version: a repack at a new version replaces the entry of the
    # same memory (its slot).
    tokens = tuple(ops.token(sources[n], _CALLER_NAMES[n]) for n in names)
    key = (tuple(names), tokens) + rest
    slot = (tuple(names), tuple(t[:-1] for t in tokens)) + rest
    anchors = [ops.anchor(sources[n]) for n in names]

    def pack():
        tensors = dict(sources)
        if spec.expert_has_bias:  # the library wants both biases: a missing one is zeros
            if w1_bias is None:
                tensors["gate_up_bias"] = ops.zeros_like_shape(w2_bias, (E, R13))
            if w2_bias is None:
                tensors["down_bias"] = ops.zeros_like_shape(w1_bias, (E, H2))
        if use_fp8_w8a8:
            tensors["gate_up_scale"] = _block_scales(fn, ops, w1_scale, "w1_scale", E, R13, H, block_shape)
            tensors["down_scale"] = _block_scales(fn, ops, w2_scale, "w2_scale", E, H2, inter, block_shape)
        tensors = {n: a for n, a in tensors.items() if a is not None}
        return ops.pack(ctx, spec, fmt, layout, tensors, bool(use_fp8_w8a8))

    return spec, CACHE.get(key, slot, anchors, pack)


def _run(fn, ops, ctx, place, weights, hidden_states, act_format, inplace, routing_inputs):
    """moe_forward on [*, H] hidden states; returns the output (hidden_states when inplace)."""
    shape = ops.shape(hidden_states)
    if len(shape) < 1:
        raise error(Status.SHAPE_MISMATCH, f"{fn}: hidden_states is a scalar, expected [T, H]")
    x = ops.as_rows(hidden_states)  # [T, H], contiguous
    y = ops.empty_like(x)
    args = _lib.MoeForwardArgs()
    _lib.lib().moe_forward_args_init(ctypes.byref(args))
    keep = [x, y]
    args.x = ops.tensor(x, "hidden_states")
    args.y = ops.tensor(y, "output")
    for name, value in routing_inputs.items():
        ops.check_place(value, name, place)
        setattr(args, name, ops.tensor(value, name))
        keep.append(value)
    args.act_format = int(act_format)
    with ops.device_guard(place):
        nbytes = ctx.workspace_size(weights, ops.shape(x)[0], act_format)
        args.workspace, args.workspace_size = ops.workspace(ctx, place, nbytes)
        args.stream = ops.stream(place)
        ctx.forward_raw(weights, args)
    y = ops.reshape(y, shape)
    if inplace:
        ops.copy_(hidden_states, y)
        return hidden_states
    return y


def _check_flags(fn, **flags):
    """vLLM's boolean options must be bools: anything else is most likely an argument of a
    different vLLM signature landing in that position."""
    for name, value in flags.items():
        # numpy's bool scalar is numpy.bool_ (numpy 1) or numpy.bool (numpy 2), never a bool
        numpy_bool = type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool")
        if not isinstance(value, bool) and not numpy_bool:
            raise error(Status.INVALID_ARGUMENT,
                        f"{fn}: {name} = {value!r}, expected a bool (moefuse takes vLLM's flat signature "
                        f"(..., apply_router_weight_on_input, use_fp8_w8a8, ...); pass global_num_experts, "
                        f"expert_map and the quantisation options by keyword)")


def _check_global_num_experts(fn, ops, w1, global_num_experts, expert_map):
    E = int(ops.shape(w1)[0])
    n = ops.numel(expert_map) if expert_map is not None else E
    if global_num_experts is None:  # as -1: some callers pass Optional[int]
        return
    if int(global_num_experts) not in (-1, n):
        raise error(Status.INVALID_ARGUMENT,
                    f"{fn}: global_num_experts = {global_num_experts}, expected -1 or "
                    + (f"{n} (expert_map's size)" if expert_map is not None else f"{E} (w1's experts; no expert_map)"))


# current vLLM (fused_experts(..., global_num_experts, expert_map, quant_config, allow_deep_gemm)):
# the FusedMoEQuantConfig properties this binding maps, and those it refuses when set.
_QC_FIELDS = ("use_fp8_w8a8", "w1_scale", "w2_scale", "a1_scale", "a2_scale", "block_shape", "w1_bias", "w2_bias",
              "w1_zp", "w2_zp", "use_int8_w8a8", "use_int8_w8a16", "use_int4_w4a16", "use_mxfp4_w4a4")
_QC_REFUSED = ("use_fp8_w8a16", "use_nvfp4_w4a4", "use_mxfp4_w4a16", "use_nvfp4_w4a16", "use_mxfp4_w4a8",
               "ocp_mx_scheme", "per_out_ch_quant", "a1_gscale", "a2_gscale", "g1_alphas", "g2_alphas")


def _from_quant_config(fn, quant_config, flat):
    """flat (the caller's flat quantisation arguments) updated from a vLLM FusedMoEQuantConfig
    (duck-typed: torch-free); a flat argument also set is a conflict."""
    def get(name, default=None):
        try:
            return getattr(quant_config, name, default)
        except AssertionError:  # vLLM's accessors assert on GPT-OSS PrecisionConfig scales
            raise unsupported(fn, f"quant_config.{name} (not a tensor)") from None
    for name in _QC_REFUSED:
        if get(name) not in (None, False):
            raise unsupported(fn, f"quant_config.{name}")
    out = dict(flat)
    values = {n: get(n) for n in _QC_FIELDS}
    values["per_channel_quant"] = get("per_act_token_quant", False)
    for name, value in values.items():
        if value is None or value is False:
            continue
        if flat[name] is not None and flat[name] is not False:
            raise error(Status.INVALID_ARGUMENT, f"{fn}: {name} given both directly and in quant_config")
        out[name] = value
    return out


# The flat quantisation arguments of fused_experts / fused_moe, in the order _apply_quant_config
# returns them.
_QUANT_ARGS = ("use_fp8_w8a8", "w1_scale", "w2_scale", "a1_scale", "a2_scale", "block_shape", "w1_bias", "w2_bias",
               "w1_zp", "w2_zp", "use_int8_w8a8", "use_int8_w8a16", "use_int4_w4a16", "use_mxfp4_w4a4",
               "per_channel_quant")


def _apply_quant_config(fn, quant_config, activation, act_alpha, act_limit, args):
    """The flat quantisation arguments (_QUANT_ARGS, from `args`: the caller's locals), then
    act_alpha and act_limit, after vLLM's FusedMoEQuantConfig."""
    q = _from_quant_config(fn, quant_config, {n: args[n] for n in _QUANT_ARGS})
    q["use_fp8_w8a8"], q["per_channel_quant"] = bool(q["use_fp8_w8a8"]), bool(q["per_channel_quant"])
    return tuple(q[n] for n in _QUANT_ARGS) + _gemm1_from_quant_config(fn, quant_config, activation, act_alpha,
                                                                       act_limit)


def _number(fn, name, value):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise unsupported(fn, f"{name} = {value!r} (not one number)") from None


def _gemm1_from_quant_config(fn, quant_config, activation, act_alpha, act_limit):
    """(act_alpha, act_limit) after vLLM's FusedMoEQuantConfig gemm1_alpha / gemm1_clamp_limit /
    gemm1_beta: the alpha, clamp limit and up offset of the swigluoai forms (their offset is 1).
    With any other activation they are refused: neither applied nor ignored."""
    fields = {n: getattr(quant_config, n, None) for n in ("gemm1_alpha", "gemm1_clamp_limit", "gemm1_beta")}
    given = [n for n, v in fields.items() if v is not None]
    if not given:
        return act_alpha, act_limit
    if _activation(fn, activation, None, None)[0] != Activation.SWIGLU_OAI:
        raise unsupported(fn, f"quant_config.{' / '.join(given)} with activation = {activation!r} (moefuse takes "
                              f"them with the swigluoai forms only)")
    if fields["gemm1_beta"] is not None and _number(fn, "quant_config.gemm1_beta", fields["gemm1_beta"]) != 1.0:
        raise unsupported(fn, f"quant_config.gemm1_beta = {fields['gemm1_beta']!r} (swigluoai adds 1 to up)")
    out = []
    for own, name in ((act_alpha, "gemm1_alpha"), (act_limit, "gemm1_clamp_limit")):
        if fields[name] is None:
            out.append(own)
            continue
        value = _number(fn, "quant_config." + name, fields[name])
        if own is not None and float(own) != value:
            raise error(Status.INVALID_ARGUMENT, f"{fn}: quant_config.{name} = {value} and the act_ keyword "
                                                 f"= {own} disagree")
        out.append(value)
    return tuple(out)


def _routing_tensors(fn, ops, topk_weights, topk_ids, expert_map, local_experts):
    if ops.shape(topk_ids) != ops.shape(topk_weights) or ops.ndim(topk_ids) != 2:
        raise error(Status.SHAPE_MISMATCH, f"{fn}: topk_ids {tuple(ops.shape(topk_ids))} and topk_weights "
                                           f"{tuple(ops.shape(topk_weights))}, expected both [T, k]")
    ids = ops.to_int32(topk_ids, "topk_ids")
    weights = ops.to_float32(topk_weights)
    if expert_map is not None:
        ids, weights = ops.remap_experts(ids, weights, expert_map, local_experts)
    return {"topk_ids": ids, "topk_weights": weights}


# ---------------------------------------------------------------------------------------
# The two entry points.
# ---------------------------------------------------------------------------------------


def fused_experts(ops, hidden_states, w1, w2, topk_weights, topk_ids, inplace=False, activation="silu",
                  apply_router_weight_on_input=False, use_fp8_w8a8=False, use_int8_w8a8=False,
                  use_int8_w8a16=False, use_int4_w4a16=False, use_mxfp4_w4a4=False, per_channel_quant=False,
                  global_num_experts=-1, expert_map=None, w1_scale=None, w2_scale=None, w1_zp=None, w2_zp=None,
                  a1_scale=None, a2_scale=None, block_shape=None, w1_bias=None, w2_bias=None, *, format=None,
                  act_format=None, w1_layout=None, act_alpha=None, act_limit=None, context=None,
                  allow_deep_gemm=False, allow_cutlass_block_scaled_grouped_gemm=False, quant_config=None):
    # allow_deep_gemm / allow_cutlass_*: vLLM kernel-choice hints, meaningless here.
    fn = "fused_experts"
    if quant_config is not None:
        (use_fp8_w8a8, w1_scale, w2_scale, a1_scale, a2_scale, block_shape, w1_bias, w2_bias, w1_zp, w2_zp,
         use_int8_w8a8, use_int8_w8a16, use_int4_w4a16, use_mxfp4_w4a4, per_channel_quant, act_alpha,
         act_limit) = _apply_quant_config(fn, quant_config, activation, act_alpha, act_limit, locals())
    _check_flags(fn, inplace=inplace, apply_router_weight_on_input=apply_router_weight_on_input,
                 use_fp8_w8a8=use_fp8_w8a8, use_int8_w8a8=use_int8_w8a8, use_int8_w8a16=use_int8_w8a16,
                 use_int4_w4a16=use_int4_w4a16, use_mxfp4_w4a4=use_mxfp4_w4a4, per_channel_quant=per_channel_quant)
    _check_unsupported(fn, use_int8_w8a8, use_int8_w8a16, use_int4_w4a16, use_mxfp4_w4a4, per_channel_quant,
                       w1_zp, w2_zp, a1_scale, a2_scale)
    _check_global_num_experts(fn, ops, w1, global_num_experts, expert_map)
    place = ops.place(hidden_states)
    ctx = context or ops.context(place)
    fmt, afmt = _formats(fn, ops, w1, w2, use_fp8_w8a8, block_shape, w1_scale, w2_scale, format, act_format)
    routing = _routing_tensors(fn, ops, topk_weights, topk_ids, expert_map, int(ops.shape(w1)[0]))
    k = ops.shape(topk_ids)[1]
    _spec, weights = _spec_and_weights(fn, ops, ctx, place, w1, w2, k, activation, act_alpha, act_limit, w1_layout,
                                       apply_router_weight_on_input, w1_bias, w2_bias, w1_scale, w2_scale, fmt,
                                       use_fp8_w8a8, block_shape)
    return _run(fn, ops, ctx, place, weights, hidden_states, afmt, inplace, routing)


def fused_moe(ops, hidden_states, w1, w2, gating_output, topk, renormalize=False, inplace=False, activation="silu",
              use_grouped_topk=False, num_expert_group=None, topk_group=None, custom_routing_function=None,
              use_fp8_w8a8=False, use_int8_w8a8=False, use_int8_w8a16=False, use_int4_w4a16=False,
              use_mxfp4_w4a4=False, per_channel_quant=False, global_num_experts=-1, expert_map=None,
              w1_scale=None, w2_scale=None, w1_zp=None, w2_zp=None, a1_scale=None, a2_scale=None, block_shape=None,
              w1_bias=None, w2_bias=None, *, scoring_func="softmax", e_score_correction_bias=None,
              routed_scaling_factor=1.0, apply_router_weight_on_input=False, format=None, act_format=None,
              w1_layout=None, act_alpha=None, act_limit=None, context=None, quant_config=None):
    fn = "fused_moe"
    if quant_config is not None:  # vLLM's test helper's fused_moe takes one, as fused_experts does
        (use_fp8_w8a8, w1_scale, w2_scale, a1_scale, a2_scale, block_shape, w1_bias, w2_bias, w1_zp, w2_zp,
         use_int8_w8a8, use_int8_w8a16, use_int4_w4a16, use_mxfp4_w4a4, per_channel_quant, act_alpha,
         act_limit) = _apply_quant_config(fn, quant_config, activation, act_alpha, act_limit, locals())
    _check_flags(fn, renormalize=renormalize, inplace=inplace, use_grouped_topk=use_grouped_topk, use_fp8_w8a8=use_fp8_w8a8,
                 use_int8_w8a8=use_int8_w8a8, use_int8_w8a16=use_int8_w8a16, use_int4_w4a16=use_int4_w4a16,
                 use_mxfp4_w4a4=use_mxfp4_w4a4, per_channel_quant=per_channel_quant)
    common = dict(global_num_experts=global_num_experts, inplace=inplace, activation=activation, apply_router_weight_on_input=apply_router_weight_on_input,
                  use_fp8_w8a8=use_fp8_w8a8, use_int8_w8a8=use_int8_w8a8, use_int8_w8a16=use_int8_w8a16,
                  use_int4_w4a16=use_int4_w4a16, use_mxfp4_w4a4=use_mxfp4_w4a4, per_channel_quant=per_channel_quant,
                  expert_map=expert_map, w1_scale=w1_scale, w2_scale=w2_scale, w1_zp=w1_zp, w2_zp=w2_zp,
                  a1_scale=a1_scale, a2_scale=a2_scale, block_shape=block_shape, w1_bias=w1_bias, w2_bias=w2_bias,
                  format=format, act_format=act_format, w1_layout=w1_layout, act_alpha=act_alpha,
                  act_limit=act_limit, context=context)
    if custom_routing_function is not None and not use_grouped_topk:
        # (an array bias is compared by presence only: == on arrays is elementwise)
        for ignored, name in ((scoring_func != "softmax", "scoring_func"),
                              (e_score_correction_bias is not None, "e_score_correction_bias"),
                              (routed_scaling_factor not in (None, 1.0), "routed_scaling_factor")):
            if ignored:
                raise error(Status.INVALID_ARGUMENT, f"{fn}: {name} with custom_routing_function (the function "
                                                     f"does the routing; {name} would be ignored)")
        topk_weights, topk_ids = custom_routing_function(hidden_states, gating_output, topk, renormalize)
        return fused_experts(ops, hidden_states, w1, w2, topk_weights, topk_ids, **common)

    if ops.ndim(gating_output) != 2:
        raise error(Status.SHAPE_MISMATCH, f"{fn}: gating_output has shape {tuple(ops.shape(gating_output))}, "
                                           f"expected [T, E]")
    E_global = int(ops.shape(gating_output)[1])
    if e_score_correction_bias is not None and tuple(ops.shape(e_score_correction_bias)) != (E_global,):
        raise error(Status.SHAPE_MISMATCH, f"{fn}: e_score_correction_bias has shape "
                                           f"{tuple(ops.shape(e_score_correction_bias))}, expected ({E_global},) "
                                           f"(gating_output's experts)")
    if routed_scaling_factor is None:  # SGLang's and some vLLM layers' default: no scaling
        routed_scaling_factor = 1.0
    routing = {"score": _api._enum_name(_api._SCORES, _api.score_from(scoring_func)),
               "renormalize": bool(renormalize), "routed_scale": float(routed_scaling_factor)}
    if use_grouped_topk:
        if num_expert_group is None or topk_group is None:
            raise error(Status.INVALID_ARGUMENT, f"{fn}: use_grouped_topk needs num_expert_group and topk_group")
        routing["n_group"], routing["topk_group"] = int(num_expert_group), int(topk_group)

    if expert_map is not None:
        # The logits cover every rank's experts, the weights only this rank's: route over all
        # of them on the host, then run the local experts with the mapped ids.
        if ops.numel(expert_map) != E_global:
            raise error(Status.SHAPE_MISMATCH, f"{fn}: expert_map has {ops.numel(expert_map)} entries, expected "
                                               f"{E_global} (one per expert of gating_output)")
        spec = _api.LayerSpec(E_global, int(ops.shape(w1)[2]), int(ops.shape(w2)[2]), int(topk), **routing)
        spec.use_correction_bias = e_score_correction_bias is not None
        topk_ids, topk_weights = ops.route_host(fn, spec, gating_output, e_score_correction_bias)
        return fused_experts(ops, hidden_states, w1, w2, topk_weights, topk_ids, **common)

    _check_unsupported(fn, use_int8_w8a8, use_int8_w8a16, use_int4_w4a16, use_mxfp4_w4a4, per_channel_quant,
                       w1_zp, w2_zp, a1_scale, a2_scale)
    _check_global_num_experts(fn, ops, w1, global_num_experts, None)
    place = ops.place(hidden_states)
    ctx = context or ops.context(place)
    fmt, afmt = _formats(fn, ops, w1, w2, use_fp8_w8a8, block_shape, w1_scale, w2_scale, format, act_format)
    _spec, weights = _spec_and_weights(fn, ops, ctx, place, w1, w2, topk, activation, act_alpha, act_limit, w1_layout,
                                       apply_router_weight_on_input, w1_bias, w2_bias, w1_scale, w2_scale, fmt,
                                       use_fp8_w8a8, block_shape, routing=routing,
                                       correction_bias=e_score_correction_bias)
    logits = ops.to_float32(gating_output)
    return _run(fn, ops, ctx, place, weights, hidden_states, afmt, inplace, {"router_logits": logits})


# ---------------------------------------------------------------------------------------
# The public functions of one array library (moefuse._numpy_ops, moefuse.torch).
# ---------------------------------------------------------------------------------------


def _field(obj, name, default):
    """obj.name, obj[name] (a dict) or default: SGLang's configs and outputs, duck-typed."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def sglang_fused_experts(ops, hidden_states, w1, w2, topk_output, moe_runner_config=None, b1=None, b2=None,
                         use_fp8_w8a8=False, use_int8_w8a8=False, use_int8_w8a16=False, use_int4_w4a16=False,
                         per_channel_quant=False, w1_scale=None, w2_scale=None, w1_zp=None, w2_zp=None,
                         a1_scale=None, a2_scale=None, block_shape=None):
    """SGLang's fused_experts: the routing as topk_output (topk_weights, topk_ids[, router_logits],
    a tuple or an object with those fields), the options in moe_runner_config (a MoeRunnerConfig,
    any object or dict with its fields; None: SGLang's defaults, which include inplace=True)."""
    fn = "sglang_fused_experts"
    cfg = moe_runner_config if moe_runner_config is not None else {}
    if isinstance(topk_output, (tuple, list)):
        if len(topk_output) < 2:
            raise error(Status.INVALID_ARGUMENT, f"{fn}: topk_output has {len(topk_output)} items, expected "
                                                 "(topk_weights, topk_ids[, router_logits])")
        topk_weights, topk_ids = topk_output[0], topk_output[1]
    else:
        topk_weights, topk_ids = _field(topk_output, "topk_weights", None), _field(topk_output, "topk_ids", None)
        if topk_weights is None or topk_ids is None:
            raise error(Status.INVALID_ARGUMENT, f"{fn}: topk_output has no topk_weights / topk_ids")
    activation = str(_field(cfg, "activation", "silu"))
    gated = bool(_field(cfg, "is_gated", True))
    alpha, limit = _field(cfg, "gemm1_alpha", None), _field(cfg, "gemm1_clamp_limit", None)
    for name in ("no_combine", "custom_act_fn"):
        if _field(cfg, name, None) not in (None, False):
            raise unsupported(fn, f"moe_runner_config.{name}")
    beta = _field(cfg, "gemm1_beta", None)  # the up offset of gpt-oss's form: swigluoai's is 1
    try:
        beta_ok = beta is None or float(beta) == 1.0
    except (TypeError, ValueError):
        beta_ok = False
    if not beta_ok:
        raise unsupported(fn, f"moe_runner_config.gemm1_beta = {beta!r} (swigluoai adds 1 to up)")
    swiglu_limit = _field(cfg, "swiglu_limit", None)  # DeepSeek-V4: gate <= limit, |up| <= limit
    interleaved = bool(_field(cfg, "gate_up_interleaved", True))
    act, act_alpha, act_limit = activation, None, None
    if swiglu_limit is not None and not (activation == "silu" and gated and alpha is None and limit is None):
        raise unsupported(fn, f"moe_runner_config.swiglu_limit with activation = {activation!r}, is_gated = "
                              f"{gated}{', gemm1_alpha' if alpha is not None else ''}"
                              f"{', gemm1_clamp_limit' if limit is not None else ''} (moefuse clamps gated silu)")
    if swiglu_limit is not None:
        act_limit = float(swiglu_limit)
    elif activation == "silu" and gated and alpha is not None:
        # gpt-oss: SGLang's gated SiLU with gemm1_alpha and gemm1_clamp_limit is swigluoai, on
        # interleaved gate/up rows unless gate_up_interleaved is False (gate rows, then up rows).
        if limit is None:
            raise unsupported(fn, "moe_runner_config.gemm1_alpha without gemm1_clamp_limit (swigluoai clamps)")
        act = "swigluoai" if interleaved else "swigluoai_uninterleave"
        act_alpha, act_limit = float(alpha), float(limit)
    elif limit is not None:
        raise unsupported(fn, f"moe_runner_config.gemm1_clamp_limit without gemm1_alpha (SGLang clamps after "
                              f"the activation; moefuse's limit clamps the gate before it)")
    elif activation == "relu2" and not gated:
        act = "relu2"
    elif not gated or activation not in ("silu", "gelu"):
        raise unsupported(fn, f"moe_runner_config activation = {activation!r} with is_gated = {gated} (moefuse "
                              f"takes silu and gelu gated, relu2 not gated)")
    y = fused_experts(ops, hidden_states, w1, w2, topk_weights, topk_ids, inplace=False, activation=act,
                      apply_router_weight_on_input=bool(_field(cfg, "apply_router_weight_on_input", False)),
                      use_fp8_w8a8=bool(use_fp8_w8a8), use_int8_w8a8=bool(use_int8_w8a8),
                      use_int8_w8a16=bool(use_int8_w8a16), use_int4_w4a16=bool(use_int4_w4a16),
                      per_channel_quant=bool(per_channel_quant), w1_scale=w1_scale, w2_scale=w2_scale, w1_zp=w1_zp,
                      w2_zp=w2_zp, a1_scale=a1_scale, a2_scale=a2_scale, block_shape=block_shape, w1_bias=b1,
                      w2_bias=b2, act_alpha=act_alpha, act_limit=act_limit)
    scale = _field(cfg, "routed_scaling_factor", None)
    if scale is not None and float(scale) != 1.0:
        y *= float(scale)
    if bool(_field(cfg, "inplace", True)):
        ops.copy_(hidden_states, y)
        return hidden_states
    return y


def public_entry(entry, ops, module, doc):
    """entry (fused_experts or fused_moe above) as a public function of one array library:
    vLLM's signature without `ops` (inspect.signature and help() show it, and positional
    calls bind as in vLLM), `doc` as its docstring, `module` as its module. Every call runs
    inside ops.call_guard() (numpy: checks that numpy is installed; torch: no_grad)."""
    def call(*args, **kwargs):
        with ops.call_guard():
            return entry(ops, *args, **kwargs)

    signature = inspect.signature(entry)
    call.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
    call.__name__ = call.__qualname__ = entry.__name__
    call.__module__ = module
    call.__doc__ = doc
    return call
