"""Values of calls to names outside the file: builtins, torch, numpy and common libraries."""

from __future__ import annotations

import ast
import builtins

from .hotness import is_loss_function_name
from .ranks import numpy_result_dims
from .torch_api import tensor_method_value, torch_function_value
from .values import (
    MODULE,
    NDARRAY,
    NONE,
    PYTHON,
    TENSOR,
    UNKNOWN,
    Kind,
    Value,
    element_of,
    join,
    seq_of,
    tuple_of,
)

BUILTIN_NAMES = frozenset(dir(builtins))

_PYTHON_BUILTINS = frozenset(
    """len int float bool str repr complex isinstance issubclass hasattr callable id hash
    ord chr format open input dict vars locals globals bin hex oct ascii type getattr
    setattr delattr object memoryview bytes bytearray slice any all""".split()
)
_SEQ_BUILTINS = frozenset({"list", "tuple", "set", "frozenset", "sorted", "reversed"})
_NOT_TENSOR_MODULES = (
    "math.", "random.", "time.", "os.", "sys.", "json.", "logging.", "warnings.", "re.",
    "pathlib.", "collections.", "itertools.count", "functools.", "copy.deepcopy",
    "PIL.", "cv2.", "yaml.", "pickle.", "argparse.", "datetime.", "string.",
    "typing.", "dataclasses.", "inspect.", "subprocess.", "shutil.", "glob.",
)
# Functions of tensor libraries that answer a question about their arguments or the run.
_PREDICATE_PREFIXES = ("is_", "has_", "should_", "check_", "validate_", "can_")
_TENSOR_LIBRARIES = ("torchvision.ops.", "einops.", "torch_scatter.", "kornia.", "torchaudio.functional.")
_WRAPPERS = frozenset(
    {"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.rich.tqdm", "tqdm.std.tqdm",
     "itertools.islice", "itertools.cycle", "itertools.chain", "rich.progress.track",
     "accelerate.Accelerator.prepare", "more_itertools.peekable"}
)


# Progress bars of other libraries (`ultralytics.utils.TQDM`, `rich...track`): they iterate
# what they wrap.
_WRAPPER_NAMES = frozenset({"tqdm", "track", "progress_bar", "progressbar"})


def builtin_call_value(name: str, call: ast.Call, args: list[Value]) -> Value:
    if name in _PYTHON_BUILTINS:
        return PYTHON
    if name == "print":
        return NONE
    first = args[0] if args else UNKNOWN
    if name in ("abs", "round", "pow", "divmod"):
        if first.kind is Kind.TENSOR:
            return Value(Kind.TENSOR, dtype=first.dtype, zero_dim=first.zero_dim)
        return PYTHON if first.kind is Kind.PYTHON else UNKNOWN
    if name == "range":
        return seq_of(PYTHON)
    if name == "enumerate":
        return seq_of(tuple_of((PYTHON, element_of(first))))
    if name == "zip":
        return seq_of(tuple_of(tuple(element_of(a) for a in args)))
    if name == "iter":
        return first if first.kind is Kind.LOADER else seq_of(element_of(first))
    if name == "next":
        return element_of(first)
    if name in _SEQ_BUILTINS:
        if not args:
            return Value(Kind.SEQ)
        return seq_of(element_of(first))
    if name in ("map", "filter"):
        return seq_of(UNKNOWN)
    if name == "sum":
        elem = element_of(first)
        if elem.kind is Kind.TENSOR:
            return Value(Kind.TENSOR, zero_dim=elem.zero_dim)
        return PYTHON if elem.kind is Kind.PYTHON else UNKNOWN
    if name in ("max", "min"):
        candidates = [element_of(first)] if len(args) == 1 else args
        result = candidates[0] if candidates else UNKNOWN
        for c in candidates[1:]:
            result = join(result, c)
        if any(c.kind is Kind.TENSOR for c in candidates):
            return Value(Kind.TENSOR, zero_dim=all(c.zero_dim for c in candidates if c.is_tensor))
        return result
    return UNKNOWN


def external_call_value(qualname: str, call: ast.Call, args: list[Value], resolve) -> Value:
    """The value of a call to a qualified name defined outside this file."""
    if qualname.startswith("builtins."):
        return builtin_call_value(qualname[9:], call, args)
    if qualname.startswith("torch."):
        if qualname.startswith("torch.Tensor.") and args:
            method = qualname.split(".", 2)[2]
            return tensor_method_value(method, call, args[0], resolve)
        return torch_function_value(qualname, call, args, resolve)
    if qualname.startswith(("numpy.", "pandas.", "scipy.", "sklearn.", "cupy.")):
        # array libraries: nothing derived from their values is a torch tensor
        return numpy_result_dims(qualname, call, NDARRAY)
    if qualname in _WRAPPERS or (qualname.rsplit(".", 1)[-1].lower() in _WRAPPER_NAMES and args):
        return args[0] if args else UNKNOWN  # `TQDM(enumerate(loader))`: the same iteration
    if qualname.startswith(_NOT_TENSOR_MODULES):
        return PYTHON
    last = qualname.rsplit(".", 1)[-1]
    if qualname.startswith(_TENSOR_LIBRARIES):
        public = last.lstrip("_")
        if public.startswith(_PREDICATE_PREFIXES):
            return PYTHON  # `kornia.core.utils.is_compiling()`: a bool
        return TENSOR if public[:1].islower() else MODULE if public[:1].isupper() else UNKNOWN
    if qualname.startswith("torchvision.models.") or qualname == "timm.create_model":
        return MODULE if last[:1].islower() else UNKNOWN
    if last == "from_pretrained" and ("Model" in qualname or "For" in qualname):
        return MODULE
    if is_loss_function_name(last):
        return TENSOR
    return UNKNOWN


# --------------------------------------------------------------------------- host conversions
# Calls that turn a tensor argument into a Python number through `__float__`, `__int__`,
# `__index__`, `__bool__` or `__complex__`: each reads the value to the host.
_SCALAR_CONVERSIONS = frozenset(
    """builtins.float builtins.int builtins.bool builtins.complex operator.index
    operator.truth operator.not_""".split()
)
# `math` functions that do not convert: `prod` multiplies the elements with `*` (a tensor
# result), `trunc` raises for tensors (no `__trunc__`).
_MATH_WITHOUT_CONVERSION = frozenset({"math.prod", "math.trunc"})


def converts_to_python_scalar(qualname: str | None) -> bool:
    """Does this call read its tensor arguments to the host as Python numbers?

    True for `float`, `int`, `bool`, `complex`, `operator.index` / `truth` / `not_` and the
    `math` functions (`math.sqrt(t)` calls `t.__float__()`, `math.factorial(t)`
    `t.__index__()`; checked on torch 2.13).
    """
    if qualname is None:
        return False
    if qualname in _SCALAR_CONVERSIONS:
        return True
    return qualname.startswith("math.") and qualname.count(".") == 1 and qualname not in _MATH_WITHOUT_CONVERSION


# Top-level packages whose functions are not the user's project: a call into them is not a
# reason to analyze another file.
# (Other third-party packages are left to the project pass, which drops names that are not
# modules of the files being checked: linting timm's own sources, `timm.layers` is the project.)
_KNOWN_LIBRARIES = frozenset(
    """builtins torch numpy pandas scipy sklearn math random time os sys json logging warnings
    re pathlib collections itertools functools copy typing dataclasses inspect subprocess shutil
    glob PIL cv2 yaml pickle argparse datetime string contextlib abc enum operator traceback""".split()
)


def may_be_project_function(qualname: str) -> bool:
    """Could `qualname` (as imported) be a function defined in the user's own files?"""
    if qualname.startswith("."):
        return True
    return qualname.split(".", 1)[0] not in _KNOWN_LIBRARIES
