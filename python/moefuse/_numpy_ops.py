"""fused_experts / fused_moe on numpy arrays, run by the CPU backend."""

import contextlib

from . import _api, _frontend, _lib
from ._api import np
from ._frontend import error as _error
from ._lib import DType, Status


class NumpyOps:
    """How _frontend sees numpy arrays (see moefuse.torch for the torch counterpart)."""

    def _array(self, a, what):
        if not isinstance(a, np.ndarray):
            hint = " (torch tensors go through moefuse.torch)" if type(a).__module__.startswith("torch") else ""
            raise TypeError(f"{what}: expected a numpy array, got {type(a).__name__}{hint}")
        return a

    def place(self, a):
        self._array(a, "hidden_states")
        return ("cpu", 0)

    def check_place(self, a, what, place):
        """Every numpy array is on the host."""

    def context(self, place):
        return _api.default_context("cpu")

    def dtype_of(self, a):
        return _api._numpy_dtypes().get(np.asarray(a).dtype)

    def ndim(self, a):
        return np.ndim(a)

    def shape(self, a):
        return tuple(np.shape(a))

    def numel(self, a):
        return int(np.size(a))

    def tensor(self, a, what, dtype=None):
        return _api.numpy_tensor(a, what, dtype)

    def as_rows(self, x):
        x = self._array(x, "hidden_states")
        return np.ascontiguousarray(x.reshape(-1, x.shape[-1]))

    def empty_like(self, x):
        return np.empty_like(x)

    def reshape(self, a, shape):
        return a.reshape(shape)

    def copy_(self, dst, src):
        np.copyto(dst, src)

    def to_int32(self, a, what):
        a = np.asarray(a)
        if not np.issubdtype(a.dtype, np.integer):
            raise _error(Status.DTYPE_MISMATCH, f"{what}: numpy dtype {a.dtype}, expected an integer type")
        out = np.ascontiguousarray(a, dtype=np.int32)
        if a.dtype != np.int32 and a.size and not np.array_equal(out, a):
            bad = np.flatnonzero(out.reshape(-1) != a.reshape(-1))[0]
            raise _error(Status.INVALID_ARGUMENT,
                         f"{what}: value {a.reshape(-1)[bad]} at flat index {bad} does not fit in int32")
        return out

    def to_float32(self, a):
        return np.ascontiguousarray(a, dtype=np.float32)

    def remap_experts(self, ids, weights, expert_map, local_experts):
        emap = np.asarray(expert_map).reshape(-1)
        if emap.size and (emap.min() < -1 or emap.max() >= local_experts):
            raise _error(Status.INVALID_ARGUMENT,
                         f"expert_map: values in {emap.min()}..{emap.max()}, expected local experts in "
                         f"0..{local_experts - 1} (w1's) or -1 (another rank's)")
        if ids.size and (ids.min() < -1 or ids.max() >= emap.size):
            raise _error(Status.INVALID_ARGUMENT,
                         f"topk_ids: values in {ids.min()}..{ids.max()}, expected global experts in "
                         f"0..{emap.size - 1} or -1 (expert_map has {emap.size} entries)")
        # Other ranks' experts (and -1) become -1, no expert: left out of the plan, adding nothing.
        local = emap[np.maximum(ids, 0)]
        return np.ascontiguousarray(np.where((ids < 0) | (local < 0), -1, local), dtype=np.int32), weights

    def broadcast_scale(self, scale, blocks):
        s = np.asarray(scale, dtype=np.float32).reshape(-1)
        if s.size == 1:
            return np.full(blocks, s[0], np.float32)
        return np.ascontiguousarray(np.broadcast_to(s[:, None, None], blocks))

    def zeros_like_shape(self, a, shape):
        return np.zeros(shape, dtype=np.asarray(a).dtype)

    def anchor(self, a):
        """The array owning a's memory: a view's base, followed to its end."""
        while isinstance(a.base, np.ndarray):
            a = a.base
        return a

    def token(self, a, what):
        a = self._array(a, what)
        return (id(self.anchor(a)), a.ctypes.data, a.shape, a.strides, a.dtype.str, 0)  # numpy: no version

    def pack(self, ctx, spec, fmt, layout, tensors, fp8):
        desc = _lib.MoeWeightsDesc()
        desc.layout = int(layout)
        keep = []
        for name, a in tensors.items():
            arr = _api.positive_strided(self._array(a, name))
            # uint8 weights under use_fp8_w8a8 are e4m3 codes (numpy has no fp8 dtype).
            dtype = DType.E4M3 if fp8 and name in ("gate_up", "down") and arr.dtype == np.uint8 else None
            setattr(desc, name, _api.numpy_tensor(arr, "desc." + name, dtype))
            keep.append(arr)
        return _api.Weights.from_desc(ctx, spec, desc, fmt)

    def workspace(self, ctx, place, nbytes):
        return ctx.host_workspace(nbytes)

    def stream(self, place):
        return None

    def device_guard(self, place):
        return contextlib.nullcontext()

    def route_host(self, fn, spec, logits, correction_bias):
        return _api.route(spec, logits, correction_bias)

    def call_guard(self):
        """Entered around every public call: numpy must be installed."""
        _api._need_numpy()
        return contextlib.nullcontext()


OPS = NumpyOps()


# vLLM's signatures, taken from _frontend's functions (so positional calls and introspection
# match vLLM), each call handed to _frontend unchanged.

fused_experts = _frontend.public_entry(_frontend.fused_experts, OPS, __name__, """vLLM's fused_experts on numpy arrays (CPU backend).

    hidden_states [*, H] float32/float16 (bfloat16 with ml_dtypes); w1 [E, 2I, H] gate rows
    then up rows; w2 [E, H, I]; topk_weights / topk_ids [T, k]. Returns an array like
    hidden_states (hidden_states itself, overwritten, when inplace). Weights are packed once
    per weight array (see moefuse.cache_info). moefuse extras: format= (weight storage, e.g.
    "nvfp4"), act_format=, w1_layout= ("concat", "interleaved"), act_alpha=/act_limit=,
    context=. Unsupported vLLM options raise MoeError(MOE_STATUS_UNSUPPORTED).""")

fused_moe = _frontend.public_entry(_frontend.fused_moe, OPS, __name__, """vLLM's fused_moe on numpy arrays: routes gating_output [T, E] (softmax top-k,
    renormalised when asked; grouped top-k with use_grouped_topk; scoring_func "sigmoid" /
    "sqrtsoftplus", e_score_correction_bias and routed_scaling_factor as DeepSeek uses them),
    then runs the experts as fused_experts does.""")

sglang_fused_experts = _frontend.public_entry(_frontend.sglang_fused_experts, OPS, __name__, """SGLang's fused_experts on numpy arrays (CPU backend).

    topk_output: (topk_weights, topk_ids[, router_logits]) or an object with those fields;
    moe_runner_config: SGLang's MoeRunnerConfig or any object / dict with its fields (activation,
    is_gated, apply_router_weight_on_input, inplace (default True), routed_scaling_factor,
    gemm1_alpha and gemm1_clamp_limit: gpt-oss's swigluoai); b1 / b2 the biases. no_combine and
    the other activation forms are refused by name.""")
