"""fused_experts / fused_moe on torch tensors, with vLLM's signatures.

CPU tensors run on the CPU backend (float32, float16 and bfloat16 natively); CUDA tensors on
the CUDA backend of the tensor's device, on torch's current stream, with a workspace that
torch allocates on that device (kept per stream and reused; never freed once a CUDA graph
captured it). Weights are packed once per weight tensor (keyed on the tensor's identity,
data pointer, shape, dtype, device and in-place version counter) and dropped with it; a
repack after an in-place change replaces the older packing. Writes through `param.data`
(vLLM's weight loaders, RL weight sync) or by other kernels leave the version counter as it
was: call moefuse.torch.clear_cache() after them, or the old packed weights are used.

Packing reads the weights on the host when the library cannot read device tensors itself
(a one-time copy per weight set).
"""

import contextlib
import ctypes
import threading

try:
    import torch as _torch
except ImportError as e:  # pragma: no cover - depends on the machine
    raise ImportError("moefuse.torch needs PyTorch, which is not installed (pip install torch); "
                      "moefuse.fused_experts / fused_moe work on numpy arrays without it") from e

from . import _api, _frontend, _lib
from ._frontend import error as _error
from ._lib import DType, Memory, MoeError, MoeTensor, Status

__all__ = ["fused_experts", "fused_moe", "clear_cache", "cache_info"]

clear_cache = _frontend.clear_cache
cache_info = _frontend.cache_info


def _dtype_table():
    table = {_torch.float32: DType.F32, _torch.float16: DType.F16, _torch.bfloat16: DType.BF16,
             _torch.float64: DType.F64, _torch.int32: DType.I32, _torch.int64: DType.I64, _torch.uint8: DType.U8}
    for name, dt in (("float8_e4m3fn", DType.E4M3), ("float8_e5m2", DType.E5M2)):
        if hasattr(_torch, name):
            table[getattr(_torch, name)] = dt
    return table


_DTYPES = _dtype_table()


class TorchOps:
    """How _frontend sees torch tensors (the numpy counterpart is moefuse._numpy_ops)."""

    def __init__(self):
        self._local = threading.local()  # per-thread workspaces: {(place, stream): tensor}
        self._captured = []  # workspaces a CUDA graph captured: they must outlive the graph
        self._captured_lock = threading.Lock()

    def _tensor(self, t, what):
        if not isinstance(t, _torch.Tensor):
            raise TypeError(f"{what}: expected a torch.Tensor, got {type(t).__name__}")
        return t

    # -- where a call runs ---------------------------------------------------------------
    def place(self, t):
        dev = self._tensor(t, "hidden_states").device
        if dev.type == "cpu":
            return ("cpu", 0)
        if dev.type == "cuda":
            return ("cuda", dev.index if dev.index is not None else _torch.cuda.current_device())
        raise _error(Status.UNSUPPORTED, f"hidden_states: device {dev}, expected cpu or cuda")

    def context(self, place):
        return _api.default_context(place[0], place[1])

    def device_guard(self, place):
        return _torch.cuda.device(place[1]) if place[0] == "cuda" else contextlib.nullcontext()

    def stream(self, place):
        if place[0] != "cuda":
            return None
        return _torch.cuda.current_stream(place[1]).cuda_stream

    # -- describing tensors --------------------------------------------------------------
    def dtype_of(self, t):
        return _DTYPES.get(t.dtype)

    def ndim(self, t):
        return t.dim()

    def shape(self, t):
        return tuple(t.shape)

    def numel(self, t):
        return t.numel()

    def tensor(self, t, what, dtype=None):
        """A MoeTensor over t's memory (t stays alive with the caller)."""
        t = self._tensor(t, what)
        dt = dtype if dtype is not None else _DTYPES.get(t.dtype)
        if dt is None:
            raise _error(Status.DTYPE_MISMATCH, f"{what}: torch dtype {t.dtype} has no moefuse dtype")
        if t.dim() > _lib.MAX_DIMS:
            raise _error(Status.SHAPE_MISMATCH, f"{what}: {t.dim()} dimensions, expected at most {_lib.MAX_DIMS}")
        if t.device.type not in ("cpu", "cuda"):
            raise _error(Status.UNSUPPORTED, f"{what}: device {t.device}, expected cpu or cuda")
        out = MoeTensor()
        out.data = t.data_ptr() or None
        out.dtype = int(dt)
        out.ndim = t.dim()
        out.memory = int(Memory.DEVICE if t.device.type == "cuda" else Memory.HOST)
        for i, n in enumerate(t.shape):
            out.shape[i] = n
        if not t.is_contiguous():  # all-zero strides mean "contiguous" to the library
            for i, (s, n) in enumerate(zip(t.stride(), t.shape)):
                out.strides[i] = s if n > 1 else 1
        return out

    def _readable(self, t):
        """t when the library can read it through strides (all positive), else a copy."""
        if t.is_contiguous() or all(s > 0 for s, n in zip(t.stride(), t.shape) if n > 1):
            return t
        return t.contiguous()

    def check_place(self, t, what, place):
        """A CUDA tensor must be on the call's device (hidden_states'): the library tells host
        from device memory, not one device from another. Host tensors are the library's to take
        or refuse."""
        t = self._tensor(t, what)
        if place[0] == "cuda" and t.device.type == "cuda" and t.device.index != place[1]:
            raise _error(Status.INVALID_ARGUMENT, f"{what}: on {t.device}, expected cuda:{place[1]} (hidden_states')")

    def anchor(self, t):
        """The tensor owning t's memory: a view's base (torch keeps the root there)."""
        return t._base if t._base is not None else t

    def token(self, t, what):
        t = self._tensor(t, what)
        return (id(self.anchor(t)), t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype), str(t.device), t._version)

    # -- conversions and allocation ------------------------------------------------------
    def as_rows(self, x):
        x = self._tensor(x, "hidden_states")
        return x.reshape(-1, x.shape[-1]).contiguous()

    def empty_like(self, x):
        return _torch.empty_like(x, memory_format=_torch.contiguous_format)

    def reshape(self, t, shape):
        return t.reshape(shape)

    def copy_(self, dst, src):
        dst.copy_(src)

    def to_int32(self, t, what):
        t = self._tensor(t, what)
        if t.is_floating_point() or t.is_complex() or t.dtype == _torch.bool:
            raise _error(Status.DTYPE_MISMATCH, f"{what}: torch dtype {t.dtype}, expected an integer type")
        out = t.to(_torch.int32).contiguous()
        # Only host values can be checked without a device sync; the library checks their range.
        if t.device.type == "cpu" and t.dtype != _torch.int32 and t.numel() and not _torch.equal(out.to(t.dtype), t):
            raise _error(Status.INVALID_ARGUMENT, f"{what}: values outside int32")
        return out

    def to_float32(self, t):
        return self._tensor(t, "tensor").to(_torch.float32).contiguous()

    def remap_experts(self, ids, weights, expert_map, local_experts):
        # Only a host map can be checked without a device sync.
        if expert_map.device.type == "cpu" and expert_map.numel():
            lo, hi = int(expert_map.min()), int(expert_map.max())
            if lo < -1 or hi >= local_experts:
                raise _error(Status.INVALID_ARGUMENT, f"expert_map: values in {lo}..{hi}, expected local experts "
                                                      f"in 0..{local_experts - 1} (w1's) or -1 (another rank's)")
        emap = expert_map.to(device=ids.device, dtype=_torch.int32).reshape(-1)
        n = emap.numel()
        if ids.device.type == "cpu" and ids.numel() and (int(ids.min()) < -1 or int(ids.max()) >= n):
            raise _error(Status.INVALID_ARGUMENT, f"topk_ids: values in {int(ids.min())}..{int(ids.max())}, expected "
                                                  f"global experts in 0..{n - 1} or -1 (expert_map has {n} entries)")
        # Other ranks' experts, -1 and (on CUDA, where nothing is read back) ids outside the map
        # become -1, no expert: left out of the plan, adding nothing.
        valid = (ids >= 0) & (ids < n)
        local = _torch.where(valid, emap[ids.long().clamp(0, max(n - 1, 0))], -1)
        return local.masked_fill(local < 0, -1).to(_torch.int32).contiguous(), weights.contiguous()

    def broadcast_scale(self, scale, blocks):
        s = scale.to(_torch.float32).reshape(-1)
        if s.numel() == 1:
            return s.reshape(1, 1, 1).expand(blocks).contiguous()
        return s.reshape(-1, 1, 1).expand(blocks).contiguous()

    def zeros_like_shape(self, t, shape):
        return _torch.zeros(shape, dtype=t.dtype, device=t.device)

    def workspace(self, ctx, place, nbytes):
        """(pointer, size): a reused per-thread, per-stream byte buffer on the call's device."""
        if nbytes == 0:
            return None, 0
        stream = self.stream(place)
        buffers = getattr(self._local, "buffers", None)
        if buffers is None:
            buffers = self._local.buffers = {}
        key = (place, stream)
        buf = buffers.get(key)
        if buf is None or buf.numel() < nbytes:
            device = _torch.device("cuda", place[1]) if place[0] == "cuda" else _torch.device("cpu")
            # 256 bytes of slack so the start can be aligned (torch's CUDA blocks are already).
            buf = buffers[key] = _torch.empty(nbytes + 256, dtype=_torch.uint8, device=device)
        if place[0] == "cuda" and _torch.cuda.is_current_stream_capturing():
            with self._captured_lock:  # a graph replays into this memory: never let it be freed
                if not any(b is buf for b in self._captured):
                    self._captured.append(buf)
        base = buf.data_ptr()
        return base + (-base) % 256, nbytes

    # -- packing and host routing --------------------------------------------------------
    def pack(self, ctx, spec, fmt, layout, tensors, fp8):
        def describe(host):
            desc = _lib.MoeWeightsDesc()
            desc.layout = int(layout)
            keep = []
            for name, t in tensors.items():
                t = self._readable(self._tensor(t, name).detach())
                if host and t.device.type != "cpu":
                    t = t.to("cpu")
                # uint8 weights under use_fp8_w8a8 are e4m3 codes.
                dtype = DType.E4M3 if fp8 and name in ("gate_up", "down") and t.dtype == _torch.uint8 else None
                setattr(desc, name, self.tensor(t, "desc." + name, dtype))
                keep.append(t)
            return desc, keep

        on_device = any(t.device.type == "cuda" for t in tensors.values())
        if _torch.cuda.is_available() and _torch.cuda.is_current_stream_capturing():
            # Packing allocates and copies (and synchronises): none of that may be captured.
            raise _error(Status.INVALID_ARGUMENT,
                         "weights seen for the first time inside a CUDA graph capture: call fused_experts / "
                         "fused_moe once with these weights before capturing, so they are packed outside it")
        if on_device:
            # The library reads the weights on its own stream: let pending writes land first.
            _torch.cuda.synchronize()
            desc, keep = describe(host=False)
            try:
                return _api.Weights.from_desc(ctx, spec, desc, fmt)
            except MoeError as e:
                if e.status != Status.UNSUPPORTED or "device memory" not in e.message:
                    raise
        desc, keep = describe(host=True)
        return _api.Weights.from_desc(ctx, spec, desc, fmt)

    def route_host(self, fn, spec, logits, correction_bias):
        if logits.device.type != "cpu":
            raise _error(Status.UNSUPPORTED, f"{fn}: expert_map with CUDA tensors (routing over every rank's experts "
                                             f"runs on the host here); route first and call fused_experts")
        c_spec = _api.as_c_spec(spec)
        logits = logits.to(_torch.float32).contiguous()
        T, k = logits.shape[0], c_spec.top_k  # (shapes checked by _frontend.fused_moe: [T, E] and [E])
        ids = _torch.empty((T, k), dtype=_torch.int32)
        weights = _torch.empty((T, k), dtype=_torch.float32)
        bias = correction_bias.to(_torch.float32).contiguous().cpu() if correction_bias is not None else None
        ctx = _api.default_context("cpu")
        fp, ip = ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_int32)
        ctx.check(_lib.lib().moe_route(ctx.handle, ctypes.byref(c_spec), ctypes.cast(logits.data_ptr(), fp), T,
                                       ctypes.cast(bias.data_ptr(), fp) if bias is not None else None,
                                       ctypes.cast(ids.data_ptr(), ip), ctypes.cast(weights.data_ptr(), fp)))
        return ids, weights

    def call_guard(self):
        """Entered around every public call: the library's outputs carry no autograd history."""
        return _torch.no_grad()


OPS = TorchOps()


# vLLM's signatures, taken from _frontend's functions (so positional calls and introspection
# match vLLM), each call handed to _frontend unchanged.

fused_experts = _frontend.public_entry(_frontend.fused_experts, OPS, __name__, """vLLM's fused_experts on torch tensors (CPU or CUDA).

    hidden_states [*, H] float32/float16/bfloat16; w1 [E, 2I, H] gate rows then up rows
    ("swigluoai": interleaved); w2 [E, H, I]; topk_weights / topk_ids [T, k]. FP8 w8a8:
    float8_e4m3fn weights with w1_scale/w2_scale per expert ([E]) or per 128x128 block
    (block_shape=[128, 128]). Returns a tensor like hidden_states (hidden_states itself when
    inplace). On CUDA it never synchronises the host and can be captured in a CUDA graph once
    the weights are packed (call it once before capturing).""")

fused_moe = _frontend.public_entry(_frontend.fused_moe, OPS, __name__, """vLLM's fused_moe on torch tensors: the routing from gating_output [T, E] runs inside the
    library (softmax top-k, renormalised when asked; grouped top-k; scoring_func "sigmoid" /
    "sqrtsoftplus" with e_score_correction_bias and routed_scaling_factor), then the experts.""")

sglang_fused_experts = _frontend.public_entry(_frontend.sglang_fused_experts, OPS, __name__, """SGLang's fused_experts on torch tensors (CPU or CUDA).

    topk_output: SGLang's TopKOutput (topk_weights, topk_ids, router_logits) or any tuple / object
    with those fields; moe_runner_config: its MoeRunnerConfig (or an object / dict with the fields:
    activation, is_gated, apply_router_weight_on_input, inplace (default True),
    routed_scaling_factor, gemm1_alpha and gemm1_clamp_limit: gpt-oss's swigluoai); b1 / b2 the
    biases; the quantisation options as fused_experts's. no_combine and the other activation forms
    are refused by name.""")
