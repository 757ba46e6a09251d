"""The Python objects over the C API: Context, LayerSpec, ModelConfig, Weights, the number
format codecs and the host routing. numpy arrays are the tensor type here; moefuse.torch
hands in torch tensors as ready-made MoeTensor descriptors instead."""

import ctypes
import dataclasses
import os
import threading

from . import _lib
from ._lib import Activation, Backend, DType, Format, Layout, Memory, MoeError, MoeTensor, Score, Status, check

try:
    import numpy as np
except ImportError:  # the numpy API says so when called; torch users may not need numpy
    np = None

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None


def _need_numpy():
    if np is None:
        raise ImportError("moefuse: this call works on numpy arrays and numpy is not installed (pip install numpy)")


def _c(value):
    return value.encode("utf-8") if isinstance(value, str) else value


def version():
    """The library's version string, "0.1.0"."""
    return _lib.text(_lib.lib().moe_version())


# ---------------------------------------------------------------------------------------
# Names <-> enums.
# ---------------------------------------------------------------------------------------
_SCORES = {"softmax": Score.SOFTMAX, "sigmoid": Score.SIGMOID, "sqrtsoftplus": Score.SQRTSOFTPLUS}
_ACTIVATIONS = {
    "swiglu": Activation.SWIGLU, "geglu": Activation.GEGLU, "geglu-tanh": Activation.GEGLU_TANH,
    "reglu": Activation.REGLU, "relu2": Activation.RELU2, "swiglu-oai": Activation.SWIGLU_OAI,
}
_LAYOUTS = {"separate": Layout.SEPARATE, "concat": Layout.CONCAT, "interleaved": Layout.INTERLEAVED}
_BACKENDS = {"auto": Backend.AUTO, "cpu": Backend.CPU, "cuda": Backend.CUDA}


def _lookup(table, value, what, enum_type):
    """An enum member from a member, an int or a name (case and '_'/'-' insensitive)."""
    if isinstance(value, enum_type):
        return value
    if isinstance(value, int):
        return enum_type(value)
    key = str(value).lower().replace("_", "-")
    if key in table:
        return table[key]
    raise MoeError(Status.INVALID_ARGUMENT, _lib.status_name(Status.INVALID_ARGUMENT),
                   f"{what} = {value!r}, expected one of {', '.join(table)}")


def score_from(value):
    return _lookup(_SCORES, value, "score", Score)


def activation_from(value):
    return _lookup(_ACTIVATIONS, value, "activation", Activation)


def layout_from(value):
    return _lookup(_LAYOUTS, value, "layout", Layout)


def backend_from(value):
    return _lookup(_BACKENDS, value, "backend", Backend)


def format_from(value):
    """A Format from a member, an int or a name as moe_format_name writes it ("bf16",
    "fp8-block128", "nvfp4"; also "fp8" and "mxfp8"; '_' may stand for '-')."""
    if isinstance(value, Format):
        return value
    if isinstance(value, int):
        return Format(value)
    out = ctypes.c_int()
    name = str(value).lower().replace("_", "-")
    check(_lib.lib().moe_format_from_name(_c(name), ctypes.byref(out)))
    return Format(out.value)


def format_name(fmt):
    return _lib.text(_lib.lib().moe_format_name(format_from(fmt)))


def _enum_name(table, member):
    return next(name for name, m in table.items() if m == member)


# ---------------------------------------------------------------------------------------
# numpy arrays as moe_tensor descriptors.
# ---------------------------------------------------------------------------------------


def _numpy_dtypes():
    """numpy dtype -> DType for every dtype numpy (and ml_dtypes, when installed) can hold."""
    table = {np.dtype(np.float32): DType.F32, np.dtype(np.float16): DType.F16, np.dtype(np.float64): DType.F64,
             np.dtype(np.int32): DType.I32, np.dtype(np.int64): DType.I64, np.dtype(np.uint8): DType.U8}
    if ml_dtypes is not None:
        table[np.dtype(ml_dtypes.bfloat16)] = DType.BF16
        table[np.dtype(ml_dtypes.float8_e4m3fn)] = DType.E4M3
        table[np.dtype(ml_dtypes.float8_e5m2)] = DType.E5M2
    return table


def numpy_dtype(arr, what="array"):
    """The DType of a numpy array; MoeError(DTYPE_MISMATCH) for one moefuse has no name for."""
    dt = _numpy_dtypes().get(arr.dtype)
    if dt is None:
        raise MoeError(Status.DTYPE_MISMATCH, _lib.status_name(Status.DTYPE_MISMATCH),
                       f"{what}: numpy dtype {arr.dtype}, expected float32/float16/bfloat16"
                       f"{'' if ml_dtypes else ' (bfloat16 needs the ml_dtypes package)'} or an integer type")
    return dt


def numpy_tensor(arr, what="array", dtype=None):
    """A MoeTensor describing host array `arr` (which the caller keeps alive). Strides are
    passed as they are when positive; `dtype` overrides the DType (uint8 codes as E4M3)."""
    _need_numpy()
    if arr.ndim > _lib.MAX_DIMS:
        raise MoeError(Status.SHAPE_MISMATCH, _lib.status_name(Status.SHAPE_MISMATCH),
                       f"{what}: {arr.ndim} dimensions, expected at most {_lib.MAX_DIMS}")
    t = MoeTensor()
    t.dtype = int(dtype if dtype is not None else numpy_dtype(arr, what))
    t.ndim = arr.ndim
    t.memory = Memory.HOST
    t.data = arr.ctypes.data or None
    for i, n in enumerate(arr.shape):
        t.shape[i] = n
    if not arr.flags.c_contiguous:  # all-zero strides mean "contiguous" to the library
        item = arr.itemsize
        if any(s <= 0 or s % item for s, n in zip(arr.strides, arr.shape) if n > 1):
            raise ValueError(f"{what}: strides {arr.strides} are not positive multiples of the element size")
        for i, (s, n) in enumerate(zip(arr.strides, arr.shape)):
            t.strides[i] = s // item if n > 1 else 1
    return t


def positive_strided(arr):
    """arr itself when the library can read it through strides, else a contiguous copy."""
    if arr.flags.c_contiguous:
        return arr
    item = arr.itemsize
    if all(s > 0 and s % item == 0 for s, n in zip(arr.strides, arr.shape) if n > 1):
        return arr
    return np.ascontiguousarray(arr)


def _as_tensor(value, what):
    """A MoeTensor from a MoeTensor (used as is) or a numpy array; None -> the absent tensor."""
    if value is None:
        return MoeTensor(), None
    if isinstance(value, MoeTensor):
        return value, None
    _need_numpy()
    arr = positive_strided(np.asarray(value))
    return numpy_tensor(arr, what), arr


# ---------------------------------------------------------------------------------------
# Context.
# ---------------------------------------------------------------------------------------


class _Owned:
    """An opaque C handle freed once, by close(), `with`, or when collected. Subclasses name
    the C function that frees it in _FREE."""

    _FREE = None
    _handle = None

    def close(self):
        if getattr(self, "_handle", None) is not None:
            getattr(self._lib, self._FREE)(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Context(_Owned):
    """A moe_context_t: the backend ("auto", "cpu", "cuda"), its device, its last error.

    One context must not be used by two threads at once (it holds the last error message);
    the functional API (fused_experts, ...) keeps one per thread."""

    _FREE = "moe_context_free"

    def __init__(self, backend="auto", device=0, threads=0):
        handle = ctypes.c_void_p()
        b = backend_from(backend)
        check(_lib.lib().moe_context_create(int(b), int(device), ctypes.byref(handle)))
        self._handle = handle
        self._lib = _lib.lib()
        self.device = int(device)
        self._workspace = None  # host workspace, grown on demand
        if threads:
            self.set_threads(threads)

    @property
    def handle(self):
        if self._handle is None:
            raise ValueError("moefuse.Context: used after close()")
        return self._handle

    @property
    def backend(self):
        """"cpu" or "cuda": the backend the context resolved to."""
        return _lib.text(self._lib.moe_backend_name(self._lib.moe_context_backend(self.handle)))

    def set_threads(self, threads):
        self.check(self._lib.moe_context_set_threads(self.handle, int(threads)))

    @property
    def last_error(self):
        return _lib.text(self._lib.moe_last_error(self.handle))

    def check(self, status):
        check(status, self.handle)

    def __repr__(self):
        state = self.backend if self._handle is not None else "closed"
        return f"moefuse.Context({state})"

    # -- forward -------------------------------------------------------------------------
    def workspace_size(self, weights, num_tokens, act_format="f32"):
        out = ctypes.c_size_t()
        self.check(self._lib.moe_forward_workspace_size(self.handle, weights.handle, int(num_tokens),
                                                        int(format_from(act_format)), ctypes.byref(out)))
        return out.value

    def host_workspace(self, nbytes):
        """(pointer, size) of a host buffer of at least nbytes, 64-byte aligned, reused."""
        _need_numpy()
        if self._workspace is None or self._workspace.size < nbytes + 64:
            self._workspace = np.empty(nbytes + 64, dtype=np.uint8)
        base = self._workspace.ctypes.data
        return base + (-base) % 64, nbytes

    def forward_raw(self, weights, args):
        """moe_forward with a filled MoeForwardArgs (workspace included)."""
        self.check(self._lib.moe_forward(self.handle, weights.handle, ctypes.byref(args)))

    def forward(self, weights, x, y=None, *, topk_ids=None, topk_weights=None, router_logits=None,
                out_topk_ids=None, out_topk_weights=None, act_format="f32"):
        """y = MoE(x) on host numpy arrays (CPU backend). x [T, H] float32/float16/bfloat16;
        y is allocated like x when not given. Routing: topk_ids [T, k] int32 with
        topk_weights [T, k] float32, or router_logits [T, E] float32, or neither (the
        weights' router). Returns y."""
        _need_numpy()
        if y is None:
            y = np.empty_like(x)
        args = _lib.MoeForwardArgs()
        self._lib.moe_forward_args_init(ctypes.byref(args))
        keep = []
        for name, value in (("x", x), ("y", y), ("topk_ids", topk_ids), ("topk_weights", topk_weights),
                            ("router_logits", router_logits), ("out_topk_ids", out_topk_ids),
                            ("out_topk_weights", out_topk_weights)):
            if value is not None:
                setattr(args, name, numpy_tensor(value, name))
                keep.append(value)
        args.act_format = int(format_from(act_format))
        nbytes = self.workspace_size(weights, x.shape[0] if x.ndim else 0, args.act_format)
        args.workspace, args.workspace_size = self.host_workspace(nbytes)
        self.forward_raw(weights, args)
        return y


_local = threading.local()


def default_context(backend="cpu", device=0):
    """This thread's context for (backend, device), created on first use."""
    contexts = getattr(_local, "contexts", None)
    if contexts is None:
        contexts = _local.contexts = {}
    key = (str(backend), int(device))
    ctx = contexts.get(key)
    if ctx is None:
        ctx = contexts[key] = Context(backend, device)
    return ctx


# ---------------------------------------------------------------------------------------
# Layer spec and model configs.
# ---------------------------------------------------------------------------------------


def _short_float32(v):
    """The shortest decimal that reads back as the same float32 (1.702, not 1.7020000219...)."""
    for digits in range(6, 10):
        short = float(f"{v:.{digits}g}")
        if ctypes.c_float(short).value == v:
            return short
    return v


@dataclasses.dataclass
class LayerSpec:
    """moe_layer_spec as a dataclass; the defaults are moe_layer_spec_init's. score and
    activation are names ("softmax", "swiglu", ...); the flags are bools."""

    num_experts: int
    hidden: int
    intermediate: int
    top_k: int
    score: str = "softmax"
    use_correction_bias: bool = False
    n_group: int = 0
    topk_group: int = 0
    renormalize: bool = False
    routed_scale: float = 1.0
    router_has_bias: bool = False
    weight_on_input: bool = False
    activation: str = "swiglu"
    act_alpha: float = 1.702
    act_limit: float = 0.0
    expert_has_bias: bool = False
    num_shared_experts: int = 0
    shared_intermediate: int = 0
    shared_gate: bool = False

    def to_c(self):
        c = _lib.MoeLayerSpec()
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "score":
                value = int(score_from(value))
            elif f.name == "activation":
                value = int(activation_from(value))
            elif isinstance(value, bool):
                value = int(value)
            setattr(c, f.name, value)
        return c

    @classmethod
    def from_c(cls, c):
        values = {}
        for f in dataclasses.fields(cls):
            value = getattr(c, f.name)
            if f.name == "score":
                value = _enum_name(_SCORES, Score(value))
            elif f.name == "activation":
                value = _enum_name(_ACTIVATIONS, Activation(value))
            elif f.type in ("bool", bool):
                value = bool(value)
            elif f.type in ("float", float):
                value = _short_float32(value)
            values[f.name] = value
        return cls(**values)

    @property
    def is_gated(self):
        return activation_from(self.activation) != Activation.RELU2

    def key(self):
        """A hashable value equal for equal C specs (the cache key of packed weights)."""
        c = self.to_c()
        return tuple(getattr(c, name) for name, _ in c._fields_)

    def validate(self, ctx=None):
        """Raises MoeError naming the first bad field."""
        c = self.to_c()
        if ctx is None:
            check(_lib.lib().moe_layer_spec_validate(None, ctypes.byref(c)))
        else:
            ctx.check(_lib.lib().moe_layer_spec_validate(ctx.handle, ctypes.byref(c)))


def as_c_spec(spec):
    if isinstance(spec, _lib.MoeLayerSpec):
        return spec
    if isinstance(spec, ModelConfig):
        spec = spec.layer
    return spec.to_c()


_DTYPE_NAMES = {d: d.name.lower() for d in DType}


@dataclasses.dataclass
class ModelConfig:
    """moe_model_config: a model's shapes as config.json or a preset gives them."""

    name: str
    model_type: str
    layer: LayerSpec
    is_moe: bool
    num_layers: int
    num_moe_layers: int
    layer_is_moe: list
    dense_intermediate: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    torch_dtype: str  # "bf16", "f16", "f32", ...
    attention_window: int  # 0, or the span of the windowed layers (sliding window or chunk)
    layer_is_windowed: list

    @classmethod
    def from_c(cls, c):
        values = {}
        for f in dataclasses.fields(cls):
            value = getattr(c, f.name)
            if f.name in ("name", "model_type"):
                value = _lib.text(value)
            elif f.name == "layer":
                value = LayerSpec.from_c(value)
            elif f.name in ("layer_is_moe", "layer_is_windowed"):
                value = [bool(v) for v in list(value)[: max(0, min(c.num_layers, _lib.MAX_LAYERS))]]
            elif f.name in ("is_moe", "tie_word_embeddings"):
                value = bool(value)
            elif f.name == "torch_dtype":
                value = _DTYPE_NAMES.get(value, str(value))
            values[f.name] = value
        return cls(**values)


def _config_call(fn_name, *args):
    ctx = default_context("cpu")
    out = _lib.MoeModelConfig()
    ctx.check(getattr(_lib.lib(), fn_name)(ctx.handle, *args, ctypes.byref(out)))
    return ModelConfig.from_c(out)


def preset(name):
    """The built-in preset `name` ("deepseek-v3", "qwen3-30b-a3b", ...) as a ModelConfig."""
    return _config_call("moe_config_preset", _c(name))


def presets():
    """Names of the built-in presets."""
    handle = _lib.lib()
    return [_lib.text(handle.moe_preset_name(i)) for i in range(handle.moe_preset_count())]


def load_config(path):
    """A config.json (or a directory holding one) as a ModelConfig."""
    return _config_call("moe_config_load", _c(os.fspath(path)))


def parse_config(json_text):
    """config.json text as a ModelConfig."""
    data = _c(json_text)
    return _config_call("moe_config_parse", data, len(data))


# ---------------------------------------------------------------------------------------
# Weights.
# ---------------------------------------------------------------------------------------


class Weights(_Owned):
    """Packed expert weights (moe_weights_t), freed by close() or when collected.

    Weights(ctx, spec, w1, w2, layout="concat", format="bf16", ...) with numpy arrays:
      w1  gate_up [E, 2I, H] (layout "concat": gate rows first, vLLM's w1; "interleaved":
          even rows gate, GPT-OSS), or [E, I, H] for relu2; with layout "separate" pass
          gate= and up= [E, I, H] instead
      w2  down [E, H, I]
      w1_bias [E, 2I] / w2_bias [E, H] (spec.expert_has_bias); w1_scale / w2_scale: the
          [E, ceil(rows/128), ceil(cols/128)] fp32 block scales of e4m3 weights (uint8
          numpy arrays given with a scale are taken as e4m3 codes)
      router [E, H], router_bias [E], correction_bias [E]; shared_w1 / shared_w2 (and
      shared_gate / shared_up for "separate"), shared biases, shared_gate_weight [H].
    Arguments may also be MoeTensor descriptors (how moefuse.torch passes its tensors)."""

    _FREE = "moe_weights_free"

    def __init__(self, ctx, spec, w1=None, w2=None, *, layout="concat", format="bf16", w1_bias=None,
                 w2_bias=None, w1_scale=None, w2_scale=None, gate=None, up=None, gate_bias=None, up_bias=None,
                 router=None, router_bias=None, correction_bias=None, shared_w1=None, shared_w2=None,
                 shared_gate=None, shared_up=None, shared_w1_bias=None, shared_w2_bias=None,
                 shared_gate_bias=None, shared_up_bias=None, shared_gate_weight=None):
        self._handle = None
        lay = layout_from(layout)
        fields = {
            "gate_up": w1, "down": w2, "gate_up_bias": w1_bias, "down_bias": w2_bias,
            "gate_up_scale": w1_scale, "down_scale": w2_scale,
            "gate": gate, "up": up, "gate_bias": gate_bias, "up_bias": up_bias,
            "router": router, "router_bias": router_bias, "correction_bias": correction_bias,
            "shared_gate_up": shared_w1, "shared_down": shared_w2, "shared_gate": shared_gate, "shared_up": shared_up,
            "shared_gate_up_bias": shared_w1_bias, "shared_down_bias": shared_w2_bias,
            "shared_gate_bias": shared_gate_bias, "shared_up_bias": shared_up_bias,
            "shared_gate_weight": shared_gate_weight,
        }
        if lay == Layout.SEPARATE:  # w1 / w1_bias / w1_scale name gate_up, which SEPARATE has not
            for name, value in (("w1", w1), ("w1_bias", w1_bias), ("w1_scale", w1_scale), ("shared_w1", shared_w1),
                                ("shared_w1_bias", shared_w1_bias)):
                if value is not None:
                    raise MoeError(Status.INVALID_ARGUMENT, _lib.status_name(Status.INVALID_ARGUMENT),
                                   f"Weights: {name} given with layout 'separate'; pass gate= and up= instead")
        desc = _lib.MoeWeightsDesc()
        desc.layout = int(lay)
        keep = []
        for name, value in fields.items():
            t, owner = _as_tensor(value, "desc." + name)
            # A matrix given with block scales holds e4m3 codes: numpy has no fp8 dtype, so
            # uint8 stands for them.
            if t.dtype == DType.U8 and fields.get(name + "_scale") is not None:
                t.dtype = int(DType.E4M3)
            setattr(desc, name, t)
            keep.append(owner)
        self._create(ctx, spec, desc, format)

    @classmethod
    def from_desc(cls, ctx, spec, desc, format):
        """Weights from a filled MoeWeightsDesc (its tensors must stay alive during the call)."""
        self = cls.__new__(cls)
        self._handle = None
        self._create(ctx, spec, desc, format)
        return self

    @classmethod
    def load(cls, ctx, checkpoint, spec, layer, format="bf16"):
        """Layer `layer`'s MoE weights read from a checkpoint (a Checkpoint, or a path opened
        and closed here) and packed in `format` (moe_weights_load; the tensor names it reads
        are listed in moefuse.h). spec: a LayerSpec, a ModelConfig (its layer) or a
        MoeLayerSpec, and must match the checkpoint (biases, shared expert, correction bias)."""
        if not isinstance(checkpoint, Checkpoint):
            with Checkpoint(checkpoint) as ck:
                return cls.load(ctx, ck, spec, layer, format)
        self = cls.__new__(cls)
        self._handle = None
        c_spec = as_c_spec(spec)
        handle = ctypes.c_void_p()
        fmt = format_from(format)
        ctx.check(_lib.lib().moe_weights_load(ctx.handle, checkpoint.handle, ctypes.byref(c_spec), int(layer),
                                              int(fmt), ctypes.byref(handle)))
        self._set(handle, ctx, c_spec, fmt)
        return self

    def _set(self, handle, ctx, c_spec, fmt):
        self._handle = handle
        self._lib = _lib.lib()
        self.ctx = ctx  # kept alive as long as the weights
        self.spec = LayerSpec.from_c(c_spec)
        self.format = fmt

    def _create(self, ctx, spec, desc, format):
        c_spec = as_c_spec(spec)
        handle = ctypes.c_void_p()
        fmt = format_from(format)
        ctx.check(_lib.lib().moe_weights_create(ctx.handle, ctypes.byref(c_spec), ctypes.byref(desc), int(fmt),
                                                ctypes.byref(handle)))
        self._set(handle, ctx, c_spec, fmt)

    @property
    def handle(self):
        if self._handle is None:
            raise ValueError("moefuse.Weights: used after close()")
        return self._handle

    @property
    def nbytes(self):
        return self._lib.moe_weights_bytes(self.handle)

    def unpack(self, expert):
        """Expert `expert`'s weights as fp32 numpy arrays (gate [I, H], up [I, H] or None for
        relu2, down [H, I]), dequantised; expert -1 is the shared expert."""
        _need_numpy()
        s = self.spec
        inter = s.shared_intermediate if expert == -1 else s.intermediate
        gate = np.empty((inter, s.hidden), np.float32)
        up = np.empty((inter, s.hidden), np.float32) if s.is_gated else None
        down = np.empty((s.hidden, inter), np.float32)
        fp = ctypes.POINTER(ctypes.c_float)
        self.ctx.check(self._lib.moe_weights_unpack(
            self.ctx.handle, self.handle, int(expert), gate.ctypes.data_as(fp),
            up.ctypes.data_as(fp) if up is not None else None, down.ctypes.data_as(fp)))
        return gate, up, down

    def __repr__(self):
        if self._handle is None:
            return "moefuse.Weights(closed)"
        s = self.spec
        return (f"moefuse.Weights(E={s.num_experts}, H={s.hidden}, I={s.intermediate}, k={s.top_k}, "
                f"format={format_name(self.format)}, {self.nbytes} bytes)")


# ---------------------------------------------------------------------------------------
# Checkpoints.
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """moe_tensor_info of one checkpoint tensor: dtype name ("bf16", "f32", "e4m3", ...), shape,
    and its size in bytes."""

    dtype: str
    shape: tuple
    nbytes: int


# Raw checkpoint bytes -> numpy; the 16- and 8-bit float types need ml_dtypes, else their bits.
def _raw_numpy_dtype(dt):
    table = {DType.F32: np.float32, DType.F16: np.float16, DType.F64: np.float64, DType.I32: np.int32,
             DType.I64: np.int64, DType.U8: np.uint8, DType.E8M0: np.uint8, DType.UE4M3: np.uint8,
             DType.E2M1: np.uint8}
    if dt in table:
        return np.dtype(table[dt])
    exotic = {DType.BF16: ("bfloat16", np.uint16), DType.E4M3: ("float8_e4m3fn", np.uint8),
              DType.E5M2: ("float8_e5m2", np.uint8)}
    name, bits = exotic[dt]
    return np.dtype(getattr(ml_dtypes, name)) if ml_dtypes is not None else np.dtype(bits)


class Checkpoint(_Owned):
    """A safetensors checkpoint (moe_checkpoint_t): a .safetensors file, an index .json, or a
    directory holding either (a save_pretrained directory). Only the headers are read at open;
    tensors are read on demand. Closed by close(), `with`, or when collected.

        with moefuse.Checkpoint("path/to/model") as ck:
            print(len(ck), ck.info("model.layers.0.mlp.gate.weight"))
            w = ck.load_weights(ctx, config, layer=3, format="bf16")   # a moefuse.Weights

    Calls leave their error message in the calling thread's buffer (no context), so one
    checkpoint may be read from several threads."""

    _FREE = "moe_checkpoint_close"

    def __init__(self, path):
        self._handle = None
        self._lib = _lib.lib()
        handle = ctypes.c_void_p()
        self.path = os.fspath(path)
        check(self._lib.moe_checkpoint_open(None, _c(self.path), ctypes.byref(handle)))
        self._handle = handle

    @property
    def handle(self):
        if self._handle is None:
            raise ValueError("moefuse.Checkpoint: used after close()")
        return self._handle

    def __len__(self):
        return int(self._lib.moe_checkpoint_tensor_count(self.handle))

    def names(self):
        """Every tensor name, sorted."""
        return [_lib.text(self._lib.moe_checkpoint_tensor_name(self.handle, i)) for i in range(len(self))]

    def __iter__(self):
        return iter(self.names())

    def __contains__(self, name):
        info = _lib.MoeTensorInfo()
        return self._lib.moe_checkpoint_tensor_info(None, self.handle, _c(name), ctypes.byref(info)) != \
            Status.NOT_FOUND

    def _info(self, name):
        info = _lib.MoeTensorInfo()
        check(self._lib.moe_checkpoint_tensor_info(None, self.handle, _c(name), ctypes.byref(info)))
        return info

    def info(self, name):
        """A TensorInfo; MoeError(NOT_FOUND) when there is no such tensor."""
        info = self._info(name)
        return TensorInfo(_lib.text(self._lib.moe_dtype_name(info.dtype)), tuple(info.shape[: info.ndim]),
                          int(info.bytes))

    def read(self, name):
        """The tensor as a numpy array of its dtype (bf16 / e4m3 / e5m2 as ml_dtypes types when
        installed, else their raw uint16 / uint8 bits)."""
        _need_numpy()
        info = self._info(name)
        out = np.empty(tuple(info.shape[: info.ndim]), dtype=_raw_numpy_dtype(DType(info.dtype)))
        if out.nbytes != info.bytes:  # e2m1: two codes a byte
            out = np.empty(info.bytes, dtype=np.uint8)
        check(self._lib.moe_checkpoint_read(None, self.handle, _c(name), out.ctypes.data or None, out.nbytes))
        return out

    def load_weights(self, ctx, spec, layer, format="bf16"):
        """Weights.load(ctx, self, spec, layer, format)."""
        return Weights.load(ctx, self, spec, layer, format)

    def __repr__(self):
        if self._handle is None:
            return "moefuse.Checkpoint(closed)"
        return f"moefuse.Checkpoint({self.path!r}, {len(self)} tensors)"


def load_weights(ctx, checkpoint, spec, layer, format="bf16"):
    """Weights.load: layer `layer`'s MoE weights from a checkpoint (Checkpoint or path)."""
    return Weights.load(ctx, checkpoint, spec, layer, format)


# ---------------------------------------------------------------------------------------
# Number formats.
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Quantized:
    """A [rows, cols] matrix in `format`: codes (float32 / float16 / uint16 bf16 bits for the
    plain formats, uint8 e4m3 codes [rows, cols], or uint8 e2m1 pairs [rows, cols/2]), block
    scales (float32, or uint8 e8m0 / ue4m3 codes, [scale_rows, scale_cols]; None when the
    format has none) and the NVFP4 tensor scale (None otherwise)."""

    format: Format
    shape: tuple
    codes: object
    scales: object
    tensor_scale: object


def format_layout(format, rows, cols):
    """moe_format_layout_get: a MoeFormatLayout (code_bytes, scale_rows, scale_cols,
    scale_dtype, has_tensor_scale)."""
    out = _lib.MoeFormatLayout()
    check(_lib.lib().moe_format_layout_get(int(format_from(format)), int(rows), int(cols), ctypes.byref(out)))
    return out


_SCALE_NUMPY = {DType.F32: "float32", DType.E8M0: "uint8", DType.UE4M3: "uint8"}


def _codes_dtype(fmt):
    return {Format.F32: np.float32, Format.F16: np.float16, Format.BF16: np.uint16}.get(fmt, np.uint8)


def quantize(x, format):
    """Quantises a 2-D float array with moe_quantize; returns a Quantized."""
    _need_numpy()
    fmt = format_from(format)
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise MoeError(Status.SHAPE_MISMATCH, _lib.status_name(Status.SHAPE_MISMATCH),
                       f"quantize: x has {x.ndim} dimensions, expected 2 ([rows, cols])")
    rows, cols = x.shape
    lay = format_layout(fmt, rows, cols)
    cdt = np.dtype(_codes_dtype(fmt))
    codes = np.zeros(lay.code_bytes // cdt.itemsize, dtype=cdt)
    scales = None
    if lay.scale_rows * lay.scale_cols > 0:
        scales = np.zeros((lay.scale_rows, lay.scale_cols), dtype=_SCALE_NUMPY[DType(lay.scale_dtype)])
    tensor_scale = ctypes.c_float(0.0)
    check(_lib.lib().moe_quantize(int(fmt), x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), rows, cols, cols,
                                  codes.ctypes.data, scales.ctypes.data if scales is not None else None,
                                  ctypes.byref(tensor_scale)))
    per_row = codes.size // rows if rows else 0
    return Quantized(fmt, (rows, cols), codes.reshape(rows, per_row), scales,
                     tensor_scale.value if lay.has_tensor_scale else None)


def dequantize(q, format=None, scales=None, tensor_scale=None, shape=None):
    """Decodes a Quantized (or codes with format=, scales=, tensor_scale=, shape=) to float32
    [rows, cols] with moe_dequantize."""
    _need_numpy()
    if isinstance(q, Quantized):
        fmt, codes, scales, tensor_scale, shape = q.format, q.codes, q.scales, q.tensor_scale, q.shape
    else:
        if format is None or shape is None:
            raise TypeError("dequantize: pass a Quantized, or codes with format= and shape=")
        fmt, codes = format_from(format), q
    rows, cols = (int(n) for n in shape)
    lay = format_layout(fmt, rows, cols)
    codes = np.ascontiguousarray(codes)
    if codes.nbytes != lay.code_bytes:
        raise MoeError(Status.SHAPE_MISMATCH, _lib.status_name(Status.SHAPE_MISMATCH),
                       f"dequantize: codes hold {codes.nbytes} bytes, expected {lay.code_bytes} for "
                       f"{format_name(fmt)} [{rows}, {cols}]")
    n_scales = lay.scale_rows * lay.scale_cols
    if n_scales > 0:
        if scales is None:
            raise MoeError(Status.NULL_POINTER, _lib.status_name(Status.NULL_POINTER),
                           f"dequantize: {format_name(fmt)} needs block scales")
        scales = np.ascontiguousarray(scales, dtype=_SCALE_NUMPY[DType(lay.scale_dtype)])
        if scales.size != n_scales:
            raise MoeError(Status.SHAPE_MISMATCH, _lib.status_name(Status.SHAPE_MISMATCH),
                           f"dequantize: {scales.size} scales, expected {lay.scale_rows} x {lay.scale_cols}")
    out = np.empty((rows, cols), np.float32)
    check(_lib.lib().moe_dequantize(int(fmt), codes.ctypes.data, scales.ctypes.data if n_scales > 0 else None,
                                    float(tensor_scale if tensor_scale is not None else 1.0), rows, cols,
                                    out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), cols))
    return out


# ---------------------------------------------------------------------------------------
# Host routing.
# ---------------------------------------------------------------------------------------


def route(spec, logits, correction_bias=None, ctx=None):
    """moe_route on the host: logits [T, E] -> (topk_ids [T, k] int32, topk_weights [T, k]
    float32), slots by descending selection score."""
    _need_numpy()
    ctx = ctx or default_context("cpu")
    c_spec = as_c_spec(spec)
    logits = np.ascontiguousarray(logits, dtype=np.float32)
    if logits.ndim != 2 or logits.shape[1] != c_spec.num_experts:
        raise MoeError(Status.SHAPE_MISMATCH, _lib.status_name(Status.SHAPE_MISMATCH),
                       f"route: logits shape {logits.shape}, expected [T, {c_spec.num_experts}]")
    T, k = logits.shape[0], c_spec.top_k
    ids = np.empty((T, k), np.int32)
    weights = np.empty((T, k), np.float32)
    fp = ctypes.POINTER(ctypes.c_float)
    bias = None
    if correction_bias is not None:
        bias = np.ascontiguousarray(correction_bias, dtype=np.float32)
        if bias.shape != (c_spec.num_experts,):  # the library reads num_experts of them
            raise MoeError(Status.SHAPE_MISMATCH, _lib.status_name(Status.SHAPE_MISMATCH),
                           f"route: correction_bias shape {bias.shape}, expected ({c_spec.num_experts},)")
    ctx.check(_lib.lib().moe_route(ctx.handle, ctypes.byref(c_spec), logits.ctypes.data_as(fp), T,
                                   bias.ctypes.data_as(fp) if bias is not None else None,
                                   ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), weights.ctypes.data_as(fp)))
    return ids, weights
