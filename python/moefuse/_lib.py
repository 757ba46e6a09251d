"""The C ABI of include/moefuse.h through ctypes: finding the library, the enums, the structs
(mirrored field by field, in the header's order) and the function prototypes.

Nothing here is loaded at import time: `lib()` opens the shared library on first use, so
`import moefuse` works on a machine without it and the first call says what was searched.
"""

import ctypes
import ctypes.util
import enum
import os
import sys
import threading

# ---------------------------------------------------------------------------------------
# Errors.
# ---------------------------------------------------------------------------------------


class LibraryNotFoundError(OSError):
    """The moefuse shared library could not be found or opened; the message lists where we looked."""


class MoeError(RuntimeError):
    """A call returned a moe_status other than MOE_STATUS_OK.

    Attributes: status (int), name ("MOE_STATUS_SHAPE_MISMATCH", ...), message (the detailed
    text of moe_last_error: which argument, which value, what was expected)."""

    def __init__(self, status, name, message):
        self.status = int(status)
        self.name = name
        self.message = message
        super().__init__(f"{message} [{name}]" if message else name)

    def __reduce__(self):  # picklable, so errors cross process boundaries intact
        return (MoeError, (self.status, self.name, self.message))


# ---------------------------------------------------------------------------------------
# Enums (values as in moefuse.h).
# ---------------------------------------------------------------------------------------


class Status(enum.IntEnum):
    OK = 0
    NULL_POINTER = 1
    INVALID_ARGUMENT = 2
    SHAPE_MISMATCH = 3
    DTYPE_MISMATCH = 4
    OVERFLOW = 5
    OUT_OF_MEMORY = 6
    WORKSPACE_TOO_SMALL = 7
    UNSUPPORTED = 8
    NOT_FOUND = 9
    IO_ERROR = 10
    PARSE_ERROR = 11
    NO_DEVICE = 12
    DEVICE_ERROR = 13
    INTERNAL = 14


class Backend(enum.IntEnum):
    AUTO = 0
    CPU = 1
    CUDA = 2


class DType(enum.IntEnum):
    F32 = 0
    F16 = 1
    BF16 = 2
    F64 = 3
    E4M3 = 4
    E5M2 = 5
    E2M1 = 6
    E8M0 = 7
    UE4M3 = 8
    I32 = 9
    I64 = 10
    U8 = 11


class Memory(enum.IntEnum):
    HOST = 0
    DEVICE = 1


class Format(enum.IntEnum):
    F32 = 0
    F16 = 1
    BF16 = 2
    FP8_TENSOR = 3
    FP8_ROW128 = 4
    FP8_BLOCK128 = 5
    MXFP8_OCP = 6
    MXFP8_TE = 7
    MXFP4 = 8
    NVFP4 = 9
    NVFP4_2D = 10


class Score(enum.IntEnum):
    SOFTMAX = 0
    SIGMOID = 1
    SQRTSOFTPLUS = 2


class Activation(enum.IntEnum):
    SWIGLU = 0
    GEGLU = 1
    GEGLU_TANH = 2
    REGLU = 3
    RELU2 = 4
    SWIGLU_OAI = 5


class Layout(enum.IntEnum):
    SEPARATE = 0
    CONCAT = 1
    INTERLEAVED = 2


def status_name(status):
    """"MOE_STATUS_SHAPE_MISMATCH" for 3; "MOE_STATUS_<n>" for values outside the table."""
    try:
        return "MOE_STATUS_" + Status(status).name
    except ValueError:
        return f"MOE_STATUS_{int(status)}"


# ---------------------------------------------------------------------------------------
# Structs. Every C enum field is an `int` (c_int), as the C compiler lays enums out here.
# ---------------------------------------------------------------------------------------
MAX_DIMS = 4
MAX_LAYERS = 1024
NAME_MAX = 64

_enum = ctypes.c_int


class MoeTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", _enum),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
        ("memory", _enum),
    ]


class MoeFormatLayout(ctypes.Structure):
    _fields_ = [
        ("code_bytes", ctypes.c_size_t),
        ("scale_rows", ctypes.c_int64),
        ("scale_cols", ctypes.c_int64),
        ("scale_dtype", _enum),
        ("has_tensor_scale", ctypes.c_int),
    ]


class MoeLayerSpec(ctypes.Structure):
    _fields_ = [
        ("num_experts", ctypes.c_int64),
        ("hidden", ctypes.c_int64),
        ("intermediate", ctypes.c_int64),
        ("top_k", ctypes.c_int64),
        ("score", _enum),
        ("use_correction_bias", ctypes.c_int32),
        ("n_group", ctypes.c_int64),
        ("topk_group", ctypes.c_int64),
        ("renormalize", ctypes.c_int32),
        ("routed_scale", ctypes.c_float),
        ("router_has_bias", ctypes.c_int32),
        ("weight_on_input", ctypes.c_int32),
        ("activation", _enum),
        ("act_alpha", ctypes.c_float),
        ("act_limit", ctypes.c_float),
        ("expert_has_bias", ctypes.c_int32),
        ("num_shared_experts", ctypes.c_int64),
        ("shared_intermediate", ctypes.c_int64),
        ("shared_gate", ctypes.c_int32),
    ]


# The tensor fields of moe_weights_desc, in the header's order (after `layout`).
WEIGHTS_DESC_TENSORS = (
    "gate", "up", "gate_up", "down",
    "gate_scale", "up_scale", "gate_up_scale", "down_scale",
    "gate_bias", "up_bias", "gate_up_bias", "down_bias",
    "router", "router_bias", "correction_bias",
    "shared_gate", "shared_up", "shared_gate_up", "shared_down",
    "shared_gate_up_bias", "shared_gate_bias", "shared_up_bias", "shared_down_bias",
    "shared_gate_weight",
)


class MoeWeightsDesc(ctypes.Structure):
    _fields_ = [("layout", _enum)] + [(name, MoeTensor) for name in WEIGHTS_DESC_TENSORS]


class MoeForwardArgs(ctypes.Structure):
    _fields_ = [
        ("x", MoeTensor),
        ("y", MoeTensor),
        ("topk_ids", MoeTensor),
        ("topk_weights", MoeTensor),
        ("router_logits", MoeTensor),
        ("out_topk_ids", MoeTensor),
        ("out_topk_weights", MoeTensor),
        ("act_format", _enum),
        ("workspace", ctypes.c_void_p),
        ("workspace_size", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
    ]


class MoeDispatchPlan(ctypes.Structure):
    _fields_ = [
        ("num_tokens", ctypes.c_int64),
        ("top_k", ctypes.c_int64),
        ("num_experts", ctypes.c_int64),
        ("block", ctypes.c_int64),
        ("max_rows", ctypes.c_int64),
        ("max_blocks", ctypes.c_int64),
        ("expert_counts", ctypes.POINTER(ctypes.c_int64)),
        ("expert_offsets", ctypes.POINTER(ctypes.c_int64)),
        ("sorted_ids", ctypes.POINTER(ctypes.c_int32)),
        ("block_expert", ctypes.POINTER(ctypes.c_int32)),
    ]


class MoeBackwardArgs(ctypes.Structure):
    _fields_ = [
        ("x", MoeTensor),
        ("dy", MoeTensor),
        ("topk_ids", MoeTensor),
        ("topk_weights", MoeTensor),
        ("router_logits", MoeTensor),
        ("dx", MoeTensor),
        ("d_gate_up", MoeTensor),
        ("d_down", MoeTensor),
        ("d_topk_weights", MoeTensor),
        ("d_router_logits", MoeTensor),
        ("d_router", MoeTensor),
        ("workspace", ctypes.c_void_p),
        ("workspace_size", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
    ]


class MoeModelConfig(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * NAME_MAX),
        ("model_type", ctypes.c_char * NAME_MAX),
        ("layer", MoeLayerSpec),
        ("is_moe", ctypes.c_int32),
        ("num_layers", ctypes.c_int64),
        ("num_moe_layers", ctypes.c_int64),
        ("layer_is_moe", ctypes.c_uint8 * MAX_LAYERS),
        ("dense_intermediate", ctypes.c_int64),
        ("num_heads", ctypes.c_int64),
        ("num_kv_heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("vocab_size", ctypes.c_int64),
        ("tie_word_embeddings", ctypes.c_int32),
        ("q_lora_rank", ctypes.c_int64),
        ("kv_lora_rank", ctypes.c_int64),
        ("qk_nope_head_dim", ctypes.c_int64),
        ("qk_rope_head_dim", ctypes.c_int64),
        ("v_head_dim", ctypes.c_int64),
        ("torch_dtype", _enum),
        ("attention_window", ctypes.c_int64),
        ("layer_is_windowed", ctypes.c_uint8 * MAX_LAYERS),
    ]


class MoeTensorInfo(ctypes.Structure):
    _fields_ = [
        ("dtype", _enum),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("bytes", ctypes.c_size_t),
    ]


# Every mirrored struct by its C name (the layout test compares each with the C compiler's).
STRUCTS = {
    "moe_tensor": MoeTensor,
    "moe_format_layout": MoeFormatLayout,
    "moe_layer_spec": MoeLayerSpec,
    "moe_weights_desc": MoeWeightsDesc,
    "moe_forward_args": MoeForwardArgs,
    "moe_dispatch_plan": MoeDispatchPlan,
    "moe_backward_args": MoeBackwardArgs,
    "moe_model_config": MoeModelConfig,
    "moe_tensor_info": MoeTensorInfo,
}

# ---------------------------------------------------------------------------------------
# Prototypes.
# ---------------------------------------------------------------------------------------
_p = ctypes.c_void_p  # opaque handles (moe_context_t *, moe_weights_t *, ...)
_st = ctypes.c_int  # moe_status
_i64 = ctypes.c_int64
_PTR = ctypes.POINTER

_PROTOTYPES = {
    "moe_version": (ctypes.c_char_p, []),
    "moe_status_string": (ctypes.c_char_p, [_st]),
    "moe_context_create": (_st, [_enum, ctypes.c_int, _PTR(_p)]),
    "moe_context_free": (None, [_p]),
    "moe_context_backend": (_enum, [_p]),
    "moe_context_set_threads": (_st, [_p, ctypes.c_int]),
    "moe_last_error": (ctypes.c_char_p, [_p]),
    "moe_backend_name": (ctypes.c_char_p, [_enum]),
    "moe_dtype_name": (ctypes.c_char_p, [_enum]),
    "moe_dtype_bits": (ctypes.c_int, [_enum]),
    # The scalar codecs of the number formats (moefuse.h, "Number formats").
    "moe_bf16_to_float": (ctypes.c_float, [ctypes.c_uint16]),
    "moe_float_to_bf16": (ctypes.c_uint16, [ctypes.c_float]),
    "moe_f16_to_float": (ctypes.c_float, [ctypes.c_uint16]),
    "moe_float_to_f16": (ctypes.c_uint16, [ctypes.c_float]),
    "moe_e4m3_to_float": (ctypes.c_float, [ctypes.c_uint8]),
    "moe_float_to_e4m3": (ctypes.c_uint8, [ctypes.c_float]),
    "moe_e5m2_to_float": (ctypes.c_float, [ctypes.c_uint8]),
    "moe_float_to_e5m2": (ctypes.c_uint8, [ctypes.c_float]),
    "moe_e2m1_to_float": (ctypes.c_float, [ctypes.c_uint8]),
    "moe_float_to_e2m1": (ctypes.c_uint8, [ctypes.c_float]),
    "moe_e8m0_to_float": (ctypes.c_float, [ctypes.c_uint8]),
    "moe_ue4m3_to_float": (ctypes.c_float, [ctypes.c_uint8]),
    "moe_float_to_ue4m3": (ctypes.c_uint8, [ctypes.c_float]),
    "moe_format_name": (ctypes.c_char_p, [_enum]),
    "moe_format_from_name": (_st, [ctypes.c_char_p, _PTR(_enum)]),
    "moe_format_layout_get": (_st, [_enum, _i64, _i64, _PTR(MoeFormatLayout)]),
    "moe_quantize": (_st, [_enum, _PTR(ctypes.c_float), _i64, _i64, _i64, _p, _p, _PTR(ctypes.c_float)]),
    "moe_dequantize": (_st, [_enum, _p, _p, ctypes.c_float, _i64, _i64, _PTR(ctypes.c_float), _i64]),
    "moe_score_name": (ctypes.c_char_p, [_enum]),
    "moe_activation_name": (ctypes.c_char_p, [_enum]),
    "moe_activation_is_gated": (ctypes.c_int, [_enum]),
    "moe_layer_spec_init": (None, [_PTR(MoeLayerSpec), _i64, _i64, _i64, _i64]),
    "moe_layer_spec_validate": (_st, [_p, _PTR(MoeLayerSpec)]),
    "moe_weights_create": (_st, [_p, _PTR(MoeLayerSpec), _PTR(MoeWeightsDesc), _enum, _PTR(_p)]),
    "moe_weights_free": (None, [_p]),
    "moe_weights_format": (_enum, [_p]),
    "moe_weights_bytes": (ctypes.c_size_t, [_p]),
    "moe_weights_unpack": (_st, [_p, _p, _i64, _PTR(ctypes.c_float), _PTR(ctypes.c_float),
                                 _PTR(ctypes.c_float)]),
    "moe_forward_args_init": (None, [_PTR(MoeForwardArgs)]),
    "moe_forward_workspace_size": (_st, [_p, _p, _i64, _enum, _PTR(ctypes.c_size_t)]),
    "moe_forward": (_st, [_p, _p, _PTR(MoeForwardArgs)]),
    "moe_route": (_st, [_p, _PTR(MoeLayerSpec), _PTR(ctypes.c_float), _i64, _PTR(ctypes.c_float),
                        _PTR(ctypes.c_int32), _PTR(ctypes.c_float)]),
    "moe_config_parse": (_st, [_p, ctypes.c_char_p, ctypes.c_size_t, _PTR(MoeModelConfig)]),
    "moe_config_load": (_st, [_p, ctypes.c_char_p, _PTR(MoeModelConfig)]),
    "moe_config_preset": (_st, [_p, ctypes.c_char_p, _PTR(MoeModelConfig)]),
    "moe_checkpoint_open": (_st, [_p, ctypes.c_char_p, _PTR(_p)]),
    "moe_checkpoint_close": (None, [_p]),
    "moe_checkpoint_tensor_count": (_i64, [_p]),
    "moe_checkpoint_tensor_name": (ctypes.c_char_p, [_p, _i64]),
    "moe_checkpoint_tensor_info": (_st, [_p, _p, ctypes.c_char_p, _PTR(MoeTensorInfo)]),
    "moe_checkpoint_read": (_st, [_p, _p, ctypes.c_char_p, _p, ctypes.c_size_t]),
    "moe_weights_load": (_st, [_p, _p, _PTR(MoeLayerSpec), _i64, _enum, _PTR(_p)]),
    "moe_preset_count": (ctypes.c_int, []),
    "moe_preset_name": (ctypes.c_char_p, [ctypes.c_int]),
}

# ---------------------------------------------------------------------------------------
# Finding and opening the library.
# ---------------------------------------------------------------------------------------
_LIB_NAMES = {"darwin": "libmoefuse.dylib", "win32": "moefuse.dll"}
LIB_FILE = _LIB_NAMES.get(sys.platform, "libmoefuse.so")
# python/moefuse/_lib.py -> the repository root, two levels above the package.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_lock = threading.Lock()
_lib = None


def _candidates():
    """(description, path or None) in search order; the first that opens wins, except that an
    explicit MOEFUSE_LIB is never silently passed over."""
    env = os.environ.get("MOEFUSE_LIB")
    if env:
        path = os.path.join(env, LIB_FILE) if os.path.isdir(env) else env
        return [(f"MOEFUSE_LIB={env}", path)], True
    found = ctypes.util.find_library("moefuse")
    return [
        ("the repository's build directory", os.path.join(REPO_ROOT, "build", LIB_FILE)),
        ('ctypes.util.find_library("moefuse")', found),
    ], False


def _open():
    candidates, explicit = _candidates()
    tried = []
    for what, path in candidates:
        if not path:
            tried.append(f"{what}: nothing found")
            continue
        if os.path.sep in path and not os.path.exists(path):
            tried.append(f"{what}: {path} does not exist")
            if explicit:
                break
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{what}: {path} could not be opened ({e})")
            if explicit:
                break
    raise LibraryNotFoundError(
        "moefuse: the shared library " + LIB_FILE + " was not found. Searched:\n  - " + "\n  - ".join(tried) +
        "\nBuild it with `make build` in the repository root, or set MOEFUSE_LIB to its path.")


def _declare(handle):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(handle, name)
        fn.restype = restype
        fn.argtypes = argtypes


def lib():
    """The opened library with its prototypes declared; LibraryNotFoundError if there is none."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                handle = _open()
                _declare(handle)
                _lib = handle
    return _lib


def text(c_string):
    return c_string.decode("utf-8", "replace") if c_string else ""


def check(status, ctx=None):
    """Raises MoeError for a status other than OK, with moe_last_error(ctx)'s message (ctx is a
    raw context pointer, or None for the calls that take no context)."""
    if status == Status.OK:
        return
    message = text(lib().moe_last_error(ctx))
    if not message:
        message = text(lib().moe_status_string(status))
    raise MoeError(status, status_name(status), message)
