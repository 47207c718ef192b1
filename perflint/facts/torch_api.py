"""What PyTorch calls return, as far as tensor-ness goes.

A table, not a type checker: it answers "does `torch.X(...)` / `t.m(...)` / `t.attr` give a
tensor, a tuple of tensors, a module, or a plain Python value?", plus the dtype class (bool
masks matter for indexing rules) and whether the result is 0-dim (for index / size rules).
"""

from __future__ import annotations

import ast
import re

from . import amp
from .distributions import NORMAL_SAMPLING
from .ranks import function_result_dims, method_result_dims
from .values import (
    DISTRIBUTION,
    MODULE_OUTPUT,
    NORMAL_DISTRIBUTION,
    BOOL_TENSOR,
    DEVICE,
    DTYPE,
    FLOAT_TENSOR,
    INT_TENSOR,
    LOADER,
    LOSS_MODULE,
    MODULE,
    NDARRAY,
    NONE,
    PYTHON,
    TENSOR,
    TENSOR_DEVICE,
    TENSORS,
    UNKNOWN,
    Kind,
    Value,
    device_of_tensor,
    seq_of,
    tuple_of,
)

# Streams and events: `.synchronize()` on them blocks the host (the sync rules ask for these).
STREAM = Value(Kind.OBJECT, ref="torch.Stream")
EVENT = Value(Kind.OBJECT, ref="torch.Event")
_STREAM_FACTORIES = frozenset({"Stream", "ExternalStream", "current_stream", "default_stream"})
_ACCELERATOR_MODULES = frozenset({"cuda", "xpu", "mps", "accelerator", "mtia"})


def stream_or_event(qualname: str) -> Value | None:
    """`torch.cuda.Stream(...)`, `torch.cuda.current_stream()`, `torch.cuda.Event(...)`, ..."""
    parts = qualname.split(".")
    if len(parts) == 2 or (len(parts) >= 3 and parts[1] in _ACCELERATOR_MODULES):
        name = parts[-1]
        if name in _STREAM_FACTORIES:
            return STREAM
        if name == "Event":
            return EVENT
    return None


def is_stream_or_event(value: Value) -> bool:
    return value.kind is Kind.OBJECT and value.ref in (STREAM.ref, EVENT.ref)


# torch.distributed calls that answer with a Python value (the others take or give tensors, work handles, groups)
_DISTRIBUTED_QUERIES = frozenset({"get_rank", "get_world_size", "is_initialized", "is_available", "get_backend",
                                  "is_nccl_available", "get_global_rank", "get_node_local_rank",
                                  "is_torchelastic_launched"})


DTYPE_CLASS = {
    "bool": "bool",
    "uint8": "int",
    "int8": "int",
    "int16": "int",
    "short": "int",
    "int32": "int",
    "int": "int",
    "int64": "int",
    "long": "int",
    "uint16": "int",
    "uint32": "int",
    "uint64": "int",
    "float16": "float",
    "half": "float",
    "bfloat16": "float",
    "float32": "float",
    "float": "float",
    "float64": "float",
    "double": "float",
    "complex64": "float",
    "complex128": "float",
    "cfloat": "float",
    "cdouble": "float",
    "float8_e4m3fn": "float",
    "float8_e5m2": "float",
}

# torch.<name>(...) results that are not tensors.
_TORCH_PYTHON_FUNCS = frozenset(
    """numel is_tensor is_storage is_floating_point is_complex is_nonzero equal allclose
    is_same_size get_default_dtype set_default_dtype set_default_device get_default_device
    manual_seed seed initial_seed set_printoptions no_grad enable_grad inference_mode
    set_grad_enabled is_grad_enabled is_inference_mode_enabled autocast finfo iinfo
    get_num_threads set_num_threads get_num_interop_threads set_num_interop_threads
    use_deterministic_algorithms are_deterministic_algorithms_enabled compile save
    set_float32_matmul_precision get_float32_matmul_precision is_autocast_enabled typename
    can_cast Generator set_rng_state _assert _assert_async set_anomaly_enabled
    is_anomaly_enabled get_device_module is_inference cond vmap func""".split()
)
# torch.get_autocast_dtype(), torch.is_grad_enabled(), torch.set_default_dtype(...), ...
_PYTHON_PREFIXES = ("get_", "is_", "set_", "are_", "use_", "has_")
_TORCH_SEQ_FUNCS = frozenset(
    """split chunk unbind tensor_split hsplit vsplit dsplit meshgrid broadcast_tensors sort
    topk kthvalue mode aminmax std_mean var_mean frexp cummax cummin lu lu_unpack qr svd
    slogdet geqrf triangular_solve lstsq histogram histogramdd atleast_1d atleast_2d
    atleast_3d block_diag_ split_with_sizes unsafe_split unsafe_chunk""".split()
)
# Reductions that give a tuple (values, indices) when a dim is given.
_DIM_SEQ_FUNCS = frozenset({"max", "min", "median", "nanmedian"})
_BOOL_FUNCS = frozenset(
    """isnan isinf isfinite isneginf isposinf isreal isin isclose logical_and logical_or
    logical_not logical_xor eq ne gt lt ge le greater less greater_equal less_equal
    not_equal signbit any all bernoulli_""".split()
)
_INT_FUNCS = frozenset(
    """argmax argmin argsort nonzero argwhere randint randint_like randperm bincount
    searchsorted bucketize count_nonzero tril_indices triu_indices""".split()
)
# Full reductions: 0-dim when called without a dim.
_REDUCTIONS = frozenset(
    """sum mean max min amax amin prod norm std var argmax argmin all any count_nonzero
    median nanmedian nansum nanmean logsumexp trace det dot vdot inner""".split()
)
_DIM_KEYWORDS = ("dim", "axis")

_LINALG_SEQ = frozenset(
    """eigh eig svd qr lu lu_factor lu_factor_ex ldl_factor ldl_factor_ex slogdet lstsq
    inv_ex cholesky_ex solve_ex""".split()
)

# Tensor methods whose results are not tensors.
TENSOR_PYTHON_METHODS = frozenset(
    """item tolist dim ndimension numel nelement size stride element_size data_ptr
    is_contiguous is_floating_point is_complex is_signed get_device is_pinned is_shared
    is_set_to is_nonzero equal allclose is_same_size storage_offset backward
    register_hook untyped_storage storage has_names is_coalesced dim_order
    register_post_accumulate_grad_hook is_inference""".split()
)
TENSOR_SEQ_METHODS = frozenset(
    """split chunk unbind tensor_split hsplit vsplit dsplit sort topk kthvalue mode aminmax
    frexp cummax cummin slogdet lu qr svd eig split_with_sizes""".split()
)
# Methods that keep the receiver's dtype (view / copy / move operations).
# `t.new_zeros(...)` and friends: a new tensor on the receiver's device, of its dtype unless given
_NEW_TENSOR_METHODS = frozenset({"new_zeros", "new_ones", "new_empty", "new_full"})
DTYPE_PRESERVING_METHODS = frozenset(
    """view reshape permute contiguous clone detach detach_ cuda cpu squeeze unsqueeze flatten
    expand expand_as transpose t repeat flip roll narrow select index_select gather
    reshape_as view_as unflatten movedim moveaxis requires_grad_ pin_memory share_memory_
    masked_select to swapaxes squeeze_ unsqueeze_ tile fliplr flipud rot90 diagonal diag
    triu tril masked_fill masked_fill_ index_fill index_fill_ scatter scatter_ clamp
    clamp_ clip clip_ abs abs_ neg neg_ sign T mT H mH data where resize_
    resize_as_ coalesce to_dense to_sparse requires_grad""".split()
)
_FLOAT_CASTS = frozenset({"float", "double", "half", "bfloat16"})
_INT_CASTS = frozenset({"long", "int", "short", "byte", "char"})

# Tensor attributes.
_TENSOR_PYTHON_ATTRS = frozenset(
    """shape ndim is_cuda is_cpu is_meta is_mps is_sparse is_quantized is_leaf requires_grad
    grad_fn layout names nbytes itemsize output_nr is_nested _version""".split()
)
_TENSOR_TENSOR_ATTRS = frozenset("T mT H mH data grad real imag".split())
# Metadata only a tensor has (not a tuple, dict or list of tensors).
TENSOR_METADATA_ATTRS = frozenset(
    """shape ndim dtype device is_cuda is_cpu layout requires_grad nbytes itemsize is_leaf
    grad_fn""".split()
)

# Module methods that return the module itself.
MODULE_SELF_METHODS = frozenset(
    """to cuda cpu train eval half float double bfloat16 requires_grad_ apply to_empty
    share_memory type xpu ipu mps""".split()
)


def _has_dim(call: ast.Call, first_positional_is_input: bool) -> bool:
    """Whether a reduction call passes a dim (positionally or by keyword)."""
    positional = len(call.args) - (1 if first_positional_is_input else 0)
    if positional > 0:
        return True
    return any(kw.arg in _DIM_KEYWORDS for kw in call.keywords)


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def has_star_args(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args) or any(
        kw.arg is None for kw in call.keywords
    )


def dtype_class_of(qualname: str | None) -> str | None:
    if qualname and qualname.startswith("torch.") and qualname.count(".") == 1:
        return DTYPE_CLASS.get(qualname[6:])
    return None


def _dtype_kwarg(call: ast.Call, resolve) -> str | None:
    node = keyword(call, "dtype")
    if node is None:
        return None
    return dtype_class_of(resolve(node))


def torch_function_value(
    qualname: str, call: ast.Call, args: list[Value], resolve
) -> Value:
    """The value of `torch.<...>(...)`; `resolve(expr)` gives an expression's qualified name."""
    parts = qualname.split(".")
    name = parts[-1]
    stream = stream_or_event(qualname) or amp.grad_scaler(qualname, call)
    if stream is not None:
        return stream
    if len(parts) == 2:
        value = _torch_top_level(name, call, args, resolve)
        return function_result_dims(name, call, args, value, legacy=name in LEGACY_CONSTRUCTORS)
    sub = parts[1]
    if sub == "autograd" and name == "Variable":  # (torch < 0.4) the tensor itself, where it lives
        return args[0] if args and args[0].kind is Kind.TENSOR else TENSOR
    if any(part.startswith("_") and not part.startswith("__") for part in parts[1:-1]):
        return UNKNOWN  # a private helper (`F._Reduction.get_enum(...)` is an int): no guess
    if sub == "nn":
        if len(parts) >= 3 and parts[2] == "functional":
            if name in ("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy",
                        "binary_cross_entropy_with_logits", "smooth_l1_loss", "kl_div",
                        "huber_loss", "cosine_embedding_loss", "margin_ranking_loss"):
                reduction = keyword(call, "reduction")
                zero = not (isinstance(reduction, ast.Constant) and reduction.value == "none")
                return Value(Kind.TENSOR, dtype="float", zero_dim=zero)
            return TENSOR
        if len(parts) >= 3 and parts[2] == "utils":
            if name in ("clip_grad_norm_", "clip_grad_norm", "get_total_norm"):
                return Value(Kind.TENSOR, zero_dim=True)
            if name in ("clip_grad_value_",):
                return NONE
            if name in ("parameters_to_vector", "pad_sequence"):
                return TENSOR
            return UNKNOWN
        if len(parts) >= 3 and parts[2] == "init":
            return TENSOR
        if name == "Parameter" or name == "Buffer":
            return TENSOR
        if name in ("ParameterList",):
            return TENSORS
        if name[:1].isupper():
            return LOSS_MODULE if name.endswith("Loss") else MODULE
        return UNKNOWN
    if sub == "linalg":
        if name in _LINALG_SEQ:
            return TENSORS
        if name in ("matrix_rank",):
            return INT_TENSOR
        return TENSOR
    if sub == "fft" or sub == "special":
        return TENSOR
    if sub == "optim":
        if len(parts) >= 3 and parts[2] == "lr_scheduler":
            return Value(Kind.OBJECT)
        if name[:1].isupper():
            return amp.optimizer(call)
        return UNKNOWN
    if sub == "utils" and len(parts) >= 3 and parts[2] == "data":
        if name == "DataLoader":
            return LOADER
        if name in ("random_split",):
            return seq_of(Value(Kind.OBJECT))
        if name == "default_collate":
            return Value(Kind.BATCH, elem=TENSOR)
        return Value(Kind.OBJECT)
    if sub == "distributions":
        if name in NORMAL_SAMPLING:
            return NORMAL_DISTRIBUTION
        if name[:1].isupper():
            return DISTRIBUTION
        return UNKNOWN
    if sub in ("cuda", "backends", "distributed", "jit", "profiler", "hub", "onnx", "testing",
               "random", "mps", "cpu", "xpu", "accelerator", "compiler", "export", "_dynamo",
               "fx", "overrides", "library", "multiprocessing", "package", "quantization",
               "ao", "amp", "autograd", "serialization", "version", "sparse", "nested",
               "masked", "func", "signal"):
        if sub == "amp" or (sub == "cuda" and len(parts) >= 3 and parts[2] == "amp"):
            return Value(Kind.OBJECT)
        if sub == "autograd" and name == "grad":
            return TENSORS
        if sub in ("sparse", "nested", "masked", "signal", "func"):
            return TENSOR if name[:1].islower() else UNKNOWN
        if sub == "distributed" and len(parts) >= 3 and parts[2] == "nn":
            return UNKNOWN
        if sub == "accelerator" and name == "current_accelerator":
            # the device source of device-generic code (None without one: code that moves
            # tensors to it is written for an accelerator)
            return Value(Kind.DEVICE, device="accel")
        if sub == "distributed":
            return PYTHON if name in _DISTRIBUTED_QUERIES else UNKNOWN
        if sub == "cuda" and name in LEGACY_CONSTRUCTORS:  # `torch.cuda.FloatTensor(...)`: made there
            return Value(Kind.TENSOR, device="cuda")
        return PYTHON
    if name in ("Tensor", "FloatTensor", "LongTensor", "BoolTensor", "IntTensor",
                "DoubleTensor", "HalfTensor", "ByteTensor", "BFloat16Tensor"):
        return TENSOR
    return UNKNOWN


def _torch_top_level(name: str, call: ast.Call, args: list[Value], resolve) -> Value:
    if name in DTYPE_CLASS and not call.args:
        return UNKNOWN  # torch.float32(...) is not a thing; be safe
    if name == "device":
        return DEVICE
    if name in ("dtype", "result_type", "promote_types", "get_default_dtype", "get_autocast_dtype",
                "get_autocast_gpu_dtype", "get_autocast_cpu_dtype"):
        return DTYPE
    if name == "compile" and args:
        return args[0]  # `torch.compile(model)` wraps the module (or function) it is given
    if name in _TORCH_PYTHON_FUNCS or name.startswith(_PYTHON_PREFIXES):
        return PYTHON
    if name == "Size":
        return PYTHON
    if name == "load":  # whatever was saved: usually a dict (a checkpoint)
        return UNKNOWN
    if name in ("Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor"):
        return FLOAT_TENSOR if name != "Tensor" else TENSOR
    if name in ("LongTensor", "IntTensor", "ByteTensor", "ShortTensor", "CharTensor"):
        return INT_TENSOR
    if name == "BoolTensor":
        return BOOL_TENSOR
    if name[:1].isupper():
        return UNKNOWN
    if name in _DIM_SEQ_FUNCS:
        if len(call.args) >= 2 and args[1].kind is Kind.TENSOR:
            return TENSOR  # elementwise torch.max(a, b)
        if _has_dim(call, first_positional_is_input=True):
            return TENSORS
        return Value(Kind.TENSOR, zero_dim=True)
    if name in _TORCH_SEQ_FUNCS:
        return TENSORS
    if name in ("unique", "unique_consecutive"):
        if any(kw.arg in ("return_inverse", "return_counts") for kw in call.keywords):
            return TENSORS
        return TENSOR
    if name == "nonzero":
        as_tuple = keyword(call, "as_tuple")
        if isinstance(as_tuple, ast.Constant) and as_tuple.value is True:
            return seq_of(INT_TENSOR)
        return INT_TENSOR
    if name == "where" and len(call.args) == 1 and not call.keywords:
        return seq_of(INT_TENSOR)
    dtype = _dtype_kwarg(call, resolve)
    if name in _BOOL_FUNCS:
        dtype = "bool"
    elif name in _INT_FUNCS:
        dtype = "int"
    elif dtype is None and name == "arange" and not any(
            isinstance(a, ast.Constant) and isinstance(a.value, float) for a in call.args):
        dtype = "int"  # `torch.arange(len(x))`: integers (a float bound makes floats; as an index, an error)
    elif dtype is None and name.endswith("_like") and args and args[0].kind is Kind.TENSOR:
        if name in ("zeros_like", "ones_like", "empty_like", "full_like"):
            dtype = args[0].dtype
    elif dtype is None and name in ("where",) and len(args) == 3:
        dtype = None
    elif dtype is None and name in _JOINS and args:
        dtype = _joined_dtype(args[0])  # `torch.stack((j, k, left, right))` of masks is a mask
    zero_dim = False
    if name in _REDUCTIONS and not _has_dim(call, first_positional_is_input=True):
        zero_dim = True
    if name in ("tensor", "scalar_tensor", "as_tensor") and call.args:
        first = call.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, (int, float, bool)):
            zero_dim = True
            if dtype is None:
                dtype = {bool: "bool", int: "int", float: "float"}[type(first.value)]
    if name == "from_numpy" or name == "as_tensor" or name == "tensor":
        pass
    return Value(Kind.TENSOR, dtype=dtype, zero_dim=zero_dim)


_JOINS = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "row_stack"})


def _joined_dtype(parts: Value) -> str | None:
    """The dtype of joining the tensors of a list or tuple, when every part has the same one."""
    if parts.kind is not Kind.SEQ:
        return None
    values = parts.items if parts.items is not None else ((parts.elem,) if parts.elem is not None else ())
    dtypes = {v.dtype if v.kind is Kind.TENSOR else None for v in values}
    return dtypes.pop() if len(dtypes) == 1 else None


def tensor_method_value(name: str, call: ast.Call, recv: Value, resolve) -> Value:
    """The value of `t.<name>(...)` for a tensor receiver."""
    return method_result_dims(name, call, recv, _tensor_method_value(name, call, recv, resolve))


# Methods of Python containers that tensors lack: a "tensor" they are called on is really a
# dict or list (the losses dict a module's `forward_train` returns), and so is what they give.
_CONTAINER_METHODS = frozenset({"items", "keys", "get", "setdefault", "append", "extend", "update", "popitem"})


def _tensor_method_value(name: str, call: ast.Call, recv: Value, resolve) -> Value:
    if name in _CONTAINER_METHODS:
        return UNKNOWN
    if name in ("size", "stride") and not call.args and not call.keywords:
        return SHAPE
    if name in TENSOR_PYTHON_METHODS:
        return PYTHON if name != "backward" else NONE
    if name == "numpy":
        return NDARRAY
    if name in TENSOR_SEQ_METHODS:
        return TENSORS
    if name in _DIM_SEQ_FUNCS:
        if _has_dim(call, first_positional_is_input=False):
            if call.args and not any(kw.arg in _DIM_KEYWORDS for kw in call.keywords):
                return TENSORS  # t.max(1)
            return TENSORS
        return Value(Kind.TENSOR, dtype=recv.dtype, zero_dim=True)
    if name in ("unique", "unique_consecutive"):
        if any(kw.arg in ("return_inverse", "return_counts") for kw in call.keywords):
            return TENSORS
        return Value(Kind.TENSOR, dtype=recv.dtype)
    if name == "nonzero":
        as_tuple = keyword(call, "as_tuple")
        if isinstance(as_tuple, ast.Constant) and as_tuple.value is True:
            return seq_of(INT_TENSOR)
        return INT_TENSOR
    if name == "type":
        if not call.args and not call.keywords:
            return PYTHON
        return Value(Kind.TENSOR, dtype=dtype_class_of(resolve(call.args[0])) if call.args else None)
    if name == "tolist":
        return PYTHON
    if name in ("bool",):
        return Value(Kind.TENSOR, dtype="bool", zero_dim=recv.zero_dim)
    if name in _FLOAT_CASTS:
        return Value(Kind.TENSOR, dtype="float", zero_dim=recv.zero_dim)
    if name in _INT_CASTS:
        return Value(Kind.TENSOR, dtype="int", zero_dim=recv.zero_dim)
    if name in _BOOL_FUNCS or name in ("eq_", "ne_") :
        zero = name in ("any", "all") and not _has_dim(call, first_positional_is_input=False)
        return Value(Kind.TENSOR, dtype="bool", zero_dim=zero)
    if name in ("to", "type_as"):
        dtype = None
        for arg in list(call.args) + [kw.value for kw in call.keywords if kw.arg == "dtype"]:
            dtype = dtype or dtype_class_of(resolve(arg))
        preserve = recv.dtype if dtype is None and name == "to" else None
        return Value(Kind.TENSOR, dtype=dtype or preserve, zero_dim=recv.zero_dim)
    if name in DTYPE_PRESERVING_METHODS:
        return Value(Kind.TENSOR, dtype=recv.dtype, zero_dim=recv.zero_dim and name != "repeat")
    if name in _NEW_TENSOR_METHODS:  # `w.new_zeros(n, dtype=torch.bool)`: the receiver's dtype unless given
        given = keyword(call, "dtype")
        return Value(Kind.TENSOR, dtype=_dtype_kwarg(call, resolve) if given is not None else recv.dtype)
    dtype = "int" if name in _INT_FUNCS else None
    zero_dim = name in _REDUCTIONS and not _has_dim(call, first_positional_is_input=False)
    return Value(Kind.TENSOR, dtype=dtype, zero_dim=zero_dim)


# `t.shape`, `t.size()`, `t.stride()`: a tuple of Python ints (torch.Size), never a tensor.
SHAPE = seq_of(PYTHON)


def tensor_attribute_value(name: str, recv: Value) -> Value:
    if name == "shape":
        return SHAPE
    if name.startswith("__"):  # __class__, __dict__, __name__, ...
        return PYTHON
    if name in _TENSOR_PYTHON_ATTRS or name.startswith(("is_", "has_")):
        return PYTHON
    if name == "device":
        return device_of_tensor(recv)
    if name == "dtype":
        return DTYPE
    if name in _TENSOR_TENSOR_ATTRS:
        dtype = recv.dtype if name not in ("real", "imag") else "float"
        return Value(Kind.TENSOR, dtype=dtype, device=recv.device)
    if recv.ref == MODULE_OUTPUT:
        # Model outputs are attribute bags: `out.logits` is a tensor, `out.hidden_states` a
        # tuple of them. A batch is "a tensor or a structure of tensors": tensor-only methods
        # on it are reported, truth tests are not.
        return Value(Kind.BATCH, device=recv.device)
    if recv.device == "cpu":
        # `predictor(img)["instances"].to("cpu").pred_classes`: a structure moved to the host
        # (detectron2's `Instances`), whose fields went with it
        return Value(Kind.TENSOR, device="cpu")
    return UNKNOWN  # not an attribute tensors have (`img.mode` on what is really an image)


def module_method_value(name: str) -> Value:
    if name in MODULE_SELF_METHODS:
        return MODULE
    if name in ("parameters", "buffers"):
        return TENSORS
    if name in ("named_parameters", "named_buffers"):
        return seq_of(tuple_of((PYTHON, TENSOR)))
    if name in ("children", "modules"):
        return seq_of(MODULE)
    if name in ("forward", "__call__"):
        return TENSOR
    if name in ("state_dict", "load_state_dict", "zero_grad", "register_buffer",
                "register_parameter", "add_module", "register_forward_hook",
                "register_forward_pre_hook", "extra_repr", "get_parameter", "named_modules"):
        return PYTHON if name != "get_parameter" else TENSOR
    return UNKNOWN


def ndarray_method_value(name: str) -> Value:
    if name in ("item", "tolist", "tobytes", "ndim", "size"):
        return PYTHON
    return NDARRAY


__all__ = [
    "names_a_device",
    "DTYPE_CLASS",
    "DTYPE",
    "keyword",
    "has_star_args",
    "dtype_class_of",
    "torch_function_value",
    "tensor_method_value",
    "tensor_attribute_value",
    "module_method_value",
    "ndarray_method_value",
]


# --------------------------------------------------------------------------- devices
# Factories put their result on the CPU unless told otherwise (`device=`), so a value made
# by one and never moved cannot make the host wait for a GPU.
FACTORIES = frozenset(
    """tensor as_tensor from_numpy zeros ones empty full rand randn randint randperm arange
    linspace logspace eye scalar_tensor empty_strided tril_indices triu_indices complex
    polar frombuffer asarray zeros_like ones_like empty_like full_like rand_like randn_like
    randint_like""".split()
)
# The legacy typed constructors build CPU tensors (`torch.cuda.LongTensor` is another name).
LEGACY_CONSTRUCTORS = frozenset(
    """Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor LongTensor IntTensor
    ShortTensor CharTensor ByteTensor BoolTensor""".split()
)
_ACCELERATORS = ("cuda", "mps", "xpu", "xla", "hpu", "npu", "privateuseone")


def classify_device(text: str) -> str | None:
    text = text.strip().lower()
    if text.startswith("cpu"):
        return "cpu"
    if text.startswith(_ACCELERATORS):
        return "accel"
    return None


def device_of_expr(node: ast.expr | None, resolve, value_of) -> str | None:
    """Where `device=<node>` / `.to(<node>)` puts a tensor, when it can be told.

    A device the program chose and that is not known to be the CPU (a `device` argument or
    setting, `torch.device("cuda" if ok else "cpu")`) is taken to be the accelerator: code
    that moves tensors to it is written for one. A tensor's own device (`x.device`) is
    wherever that tensor is: unknown when the tensor's device is."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return classify_device(node.value) if isinstance(node.value, str) else None
    if isinstance(node, ast.Call) and resolve(node.func) == "torch.device" and node.args:
        return device_of_expr(node.args[0], resolve, value_of)
    value = value_of(node)
    if value.kind is Kind.DEVICE:
        if value.device is None and value.ref != TENSOR_DEVICE:
            return "accel"
        return value.device
    if value.kind is Kind.TENSOR:  # .to(other_tensor)
        return value.device
    if value.kind is Kind.PYTHON and names_a_device(node):
        return "accel"  # a device index or name (`device = rank % torch.cuda.device_count()`)
    return None


_DEVICE_WORD = re.compile(r"device|rank|gpu|cuda", re.IGNORECASE)


def names_a_device(node: ast.expr) -> bool:
    """`device`, `self.local_rank`, `args.gpu`: a name that says it holds a device or its index
    (a Python value passed to `.to()` may also be a dtype: `self.dtype = getattr(torch, name)`)."""
    if isinstance(node, ast.Call):
        node = node.func
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return bool(_DEVICE_WORD.search(name))


# Parameters and buffers move with their module (`model.to(device)`), so where the tensor
# they wrap was made says nothing about where they live.
MODULE_STATE_CONSTRUCTORS = frozenset(
    {"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer",
     "torch.nn.parameter.Buffer", "torch.nn.UninitializedParameter",
     "torch.nn.parameter.UninitializedParameter", "torch.nn.UninitializedBuffer"}
)


def _common_device(values: list[Value]) -> str | None:
    """Where an op's result lives: with its tensor arguments when they agree (the tensors in
    a list argument too: `torch.cat([a, b])`); on the default device (the CPU) when every
    argument is a Python number (`torch.sqrt(1.0 - lam)`)."""
    if values and all(v.kind is Kind.PYTHON for v in values):
        return "cpu"
    tensors: list[Value] = []
    for value in values:
        if value.kind is Kind.SEQ:
            tensors.extend(v for v in (value.items or (value.elem,)) if v is not None and v.kind is Kind.TENSOR)
        elif value.kind is Kind.TENSOR:
            tensors.append(value)
    devices = {v.device for v in tensors}
    return devices.pop() if len(devices) == 1 else None


def torch_call_device(name: str, call: ast.Call, args: list[Value], resolve, value_of) -> str | None:
    """Device of the tensor `torch.<name>(...)` returns."""
    explicit = keyword(call, "device")
    if explicit is not None:
        return device_of_expr(explicit, resolve, value_of)
    if any(kw.arg is None for kw in call.keywords):
        return None  # `**factory_kwargs` may carry a device
    if name == "from_numpy" or name == "frombuffer":
        return "cpu"
    if name.endswith("_like"):
        return args[0].device if args and args[0].kind is Kind.TENSOR else None
    if name in ("as_tensor", "asarray") and args and args[0].kind is Kind.TENSOR:
        return args[0].device
    if name in FACTORIES:
        if name == "tensor" and any(a.kind is Kind.TENSOR and not a.on_cpu for a in args):
            return None
        return "cpu"
    if name in LEGACY_CONSTRUCTORS:  # `torch.LongTensor(ids)`: always a CPU tensor
        return "cpu"
    return _common_device(args)


def move_destination(name: str, call: ast.Call, resolve, value_of) -> str | None:
    """Where `t.cpu()` / `t.cuda()` / `t.to(...)` explicitly sends a tensor, when it can be told.

    `.to()` takes its device from `device=`, or from the first positional argument that is
    not a dtype (a device string, a `torch.device`, or another tensor whose device is known).
    """
    if name == "cpu":
        return "cpu"
    if name == "cuda":
        return "accel"
    if name == "to":
        explicit = keyword(call, "device")
        if explicit is not None:
            return device_of_expr(explicit, resolve, value_of)
        if any(kw.arg is None for kw in call.keywords):
            return None
        for arg in call.args:
            if is_dtype_expr(arg, resolve, value_of):
                continue
            return device_of_expr(arg, resolve, value_of)
    return None


_DTYPE_FUNCTIONS = frozenset(
    """torch.get_default_dtype torch.get_autocast_dtype torch.get_autocast_gpu_dtype
    torch.get_autocast_cpu_dtype torch.result_type torch.promote_types""".split()
)


def is_dtype_expr(node: ast.expr, resolve, value_of) -> bool:
    """`torch.float16`, `x.dtype`, `torch.get_default_dtype()`: a dtype, not a device."""
    if dtype_class_of(resolve(node)) is not None:
        return True
    if isinstance(node, ast.Attribute) and node.attr == "dtype":
        return True
    if isinstance(node, ast.Call) and resolve(node.func) in _DTYPE_FUNCTIONS:
        return True
    return value_of(node).kind is Kind.DTYPE


def is_non_blocking(call: ast.Call) -> bool | None:
    """`non_blocking=` of a copy: True/False if a constant, None if an expression; absent: False (the default)."""
    node = keyword(call, "non_blocking")
    if node is None:
        # Positional forms: to(device, dtype, non_blocking), to(dtype, non_blocking),
        # to(other, non_blocking). A bool constant after the first argument is that flag.
        flags = [a for a in call.args[1:3] if isinstance(a, ast.Constant) and isinstance(a.value, bool)]
        return bool(flags[0].value) if flags else False
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return node.value
    return None


# A batch moved or cast stays a batch (`.type(torch.FloatTensor)`: an old `.float()`)
BATCH_KEEPING_METHODS = frozenset({"to", "cuda", "cpu", "pin_memory", "float", "half", "bfloat16", "type"})


def tensor_method_device(name: str, call: ast.Call, recv: Value, resolve, value_of) -> str | None:
    """Device of the tensor `t.<name>(...)` returns."""
    if name == "pin_memory":
        return "cpu"
    if name in ("cpu", "cuda"):
        return move_destination(name, call, resolve, value_of)
    if name == "to":
        destination = move_destination(name, call, resolve, value_of)
        if destination is not None or keyword(call, "device") is not None or has_star_args(call):
            return destination
        if not all(is_dtype_expr(arg, resolve, value_of) for arg in call.args):
            return None  # moved to a device we cannot tell
        return recv.device
    if name in ("type_as",):
        return None
    if name == "type" and call.args and (resolve(call.args[0]) or "").startswith("torch.cuda."):
        return "cuda"  # `imgs.type(torch.cuda.FloatTensor)`: a copy to the GPU
    return recv.device


# --------------------------------------------------------------------------- host integers
# Arguments PyTorch reads as Python numbers (sizes, counts, bounds, indices). A tensor passed
# there is converted with `__index__` / `item()`, which copies it to the host. Each entry is
# (positions, keywords): `None` positions means every positional argument; a tuple or list
# literal in such a position is a size whose elements are each read.
_ALL = None
INT_ARG_FUNCTIONS: dict[str, tuple[tuple[int, ...] | None, frozenset[str]]] = {
    **{name: (_ALL, frozenset({"size"})) for name in ("zeros", "ones", "empty", "rand", "randn")},
    "full": ((0,), frozenset({"size"})),
    "randint": (_ALL, frozenset({"low", "high", "size"})),
    "randperm": ((0,), frozenset({"n"})),
    "eye": (_ALL, frozenset({"n", "m"})),
    "arange": (_ALL, frozenset({"start", "end", "step"})),
    "linspace": (_ALL, frozenset({"start", "end", "steps"})),
    "logspace": ((0, 1, 2), frozenset({"start", "end", "steps"})),
    "tril_indices": (_ALL, frozenset({"row", "col", "offset"})),
    "triu_indices": (_ALL, frozenset({"row", "col", "offset"})),
    "empty_strided": (_ALL, frozenset({"size", "stride"})),
}
INT_ARG_METHODS: dict[str, tuple[tuple[int, ...] | None, frozenset[str]]] = {
    **{name: (_ALL, frozenset({"size", "shape", "sizes", "dims", "repeats"}))
       for name in ("view", "reshape", "expand", "repeat", "tile", "new_zeros", "new_ones", "new_empty")},
    "new_full": ((0,), frozenset({"size"})),
    "narrow": ((1, 2), frozenset({"start", "length"})),
    "select": ((1,), frozenset({"index"})),
    "topk": ((0,), frozenset({"k"})),
    "split": ((0,), frozenset({"split_size", "split_size_or_sections"})),
    "chunk": ((0,), frozenset({"chunks"})),
    "roll": ((0,), frozenset({"shifts"})),
    "unflatten": ((1,), frozenset({"sizes"})),
}
# torch.nn.functional.<name>: the same, for functions taking the input first.
INT_ARG_FUNCTIONAL: dict[str, tuple[tuple[int, ...] | None, frozenset[str]]] = {
    "pad": ((1,), frozenset({"pad"})),
}


def int_arguments(qualname: str | None, method: str | None, call: ast.Call) -> list[ast.expr]:
    """The argument expressions of a call that PyTorch reads as host numbers.

    `qualname` is the resolved name of a function call (`torch.zeros`, `torch.reshape`,
    `torch.nn.functional.pad`); `method` the name of a method called on a tensor (`view`).
    Tuple / list literals are opened: `torch.zeros((n, 3))` gives `n` and `3`.
    """
    spec = None
    shift = 0
    if method is not None:
        spec = INT_ARG_METHODS.get(method)
    elif qualname is not None and qualname.startswith("torch."):
        parts = qualname.split(".")
        if len(parts) == 2:
            spec = INT_ARG_FUNCTIONS.get(parts[1])
            if spec is None and parts[1] in INT_ARG_METHODS:
                spec, shift = INT_ARG_METHODS[parts[1]], 1  # torch.reshape(x, shape)
        elif qualname.startswith("torch.nn.functional.") and len(parts) == 4:
            spec = INT_ARG_FUNCTIONAL.get(parts[3])
    if spec is None:
        return []
    positions, keywords = spec
    found: list[ast.expr] = []
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred) or index < shift:
            continue
        if positions is None or index - shift in positions:
            found.append(arg)
    found.extend(kw.value for kw in call.keywords if kw.arg in keywords)
    opened: list[ast.expr] = []
    for node in found:
        if isinstance(node, (ast.Tuple, ast.List)):
            opened.extend(e for e in node.elts if not isinstance(e, ast.Starred))
        else:
            opened.append(node)
    return opened
