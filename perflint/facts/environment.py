"""Environments (name -> value), their joins, and the values that declarations prove.

An environment maps the names of one scope to abstract values (`values.Value`). This module
holds the joins of branch environments, what import statements bind, what annotations
declare, and what type checks (`isinstance`, `x.device.type == "cpu"`) prove about a name.
"""

from __future__ import annotations

import ast
from itertools import compress
from operator import is_not
from typing import Iterable

from .syntax import dotted
from .values import (
    BOOL_TENSOR,
    DEVICE,
    LOADER,
    MODULE,
    NDARRAY,
    NONE,
    OPTIMIZER,
    PYTHON,
    TENSOR,
    TENSORS,
    Kind,
    Value,
    join,
    ref,
    seq_of,
)

Env = dict[str, Value]


def join_env(a: Env, b: Env) -> Env:
    if a is b:
        return a
    out = dict(a)
    # Only keys whose values differ need a join (join(x, x) is x). Branch environments are
    # copies of one environment, so most values are the same objects: finding the few that
    # differ in C (compress/map/is_not) keeps a function with thousands of variables and
    # branches from taking quadratic Python time.
    keys = list(b)
    for key in compress(keys, map(is_not, map(a.get, keys), map(b.__getitem__, keys))):
        value = b[key]
        old = out.get(key)
        out[key] = value if old is None else join(old, value)
    return out


def import_bindings(node: ast.Import | ast.ImportFrom) -> list[tuple[str, Value]]:
    """The names an import statement binds, in order, and the qualified name each refers to
    (`import a.b` binds `a`; `from .m import f` binds `f` to ".m.f")."""
    bound: list[tuple[str, Value]] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                bound.append((alias.asname, ref(alias.name)))
            else:
                top = alias.name.split(".", 1)[0]
                bound.append((top, ref(top)))
        return bound
    module = ("." * node.level) + (node.module or "")
    for alias in node.names:
        if alias.name != "*":
            qual = f"{module}.{alias.name}" if module and not module.endswith(".") else module + alias.name
            bound.append((alias.asname or alias.name, ref(qual)))
    return bound


# ----------------------------------------------------------------- annotations
_ANNOTATION_VALUES: dict[str, Value] = {
    "Tensor": TENSOR,
    "torch.Tensor": TENSOR,
    "FloatTensor": TENSOR,
    "torch.FloatTensor": TENSOR,
    "LongTensor": Value(Kind.TENSOR, dtype="int"),
    "torch.LongTensor": Value(Kind.TENSOR, dtype="int"),
    "BoolTensor": BOOL_TENSOR,
    "torch.BoolTensor": BOOL_TENSOR,
    "nn.Module": MODULE,
    "torch.nn.Module": MODULE,
    "Module": MODULE,
    "DataLoader": LOADER,
    "torch.utils.data.DataLoader": LOADER,
    "torch.device": DEVICE,
    "device": DEVICE,
    "Optimizer": OPTIMIZER,
    "torch.optim.Optimizer": OPTIMIZER,
    "np.ndarray": NDARRAY,
    "numpy.ndarray": NDARRAY,
    "ndarray": NDARRAY,
}
_PY_ANNOTATIONS = frozenset({"bool", "int", "float", "str", "bytes", "dict", "Dict", "set"})
_SEQ_ANNOTATIONS = frozenset({"List", "list", "Tuple", "tuple", "Sequence", "Iterable", "Iterator"})
_OPTIONAL_ANNOTATIONS = frozenset({"Optional", "Union"})


def annotation_value(node: ast.expr | None) -> Value | None:
    """What a parameter annotated `node` holds, if the annotation says."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # Tensor | None
        left, right = annotation_value(node.left), annotation_value(node.right)
        candidates = [v for v in (left, right) if v is not None and v.kind is not Kind.NONE]
        return candidates[0] if len(candidates) == 1 else None
    if isinstance(node, ast.Constant) and node.value is None:
        return NONE
    if isinstance(node, ast.Subscript):
        outer = dotted(node.value).rsplit(".", 1)[-1]
        inner = node.slice
        inner_nodes = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        if outer in _OPTIONAL_ANNOTATIONS:
            values = [annotation_value(n) for n in inner_nodes]
            real = [v for v in values if v is None or v.kind is not Kind.NONE]
            return real[0] if len(real) == 1 else None
        if outer in _SEQ_ANNOTATIONS:
            elems = [annotation_value(n) for n in inner_nodes if not (isinstance(n, ast.Constant) and n.value is Ellipsis)]
            if elems and all(e is not None and e.kind is Kind.TENSOR for e in elems):
                return TENSORS
            if elems and all(e is not None and e.kind is Kind.PYTHON for e in elems):
                return seq_of(PYTHON)  # `list[float]`
            return Value(Kind.SEQ)
        if outer in ("Dict", "dict", "Mapping", "MutableMapping"):
            values = [annotation_value(n) for n in inner_nodes]
            if len(values) == 2 and values[1] is not None and values[1].kind is Kind.TENSOR:
                return python_dict([values[1]])  # `batch[k]` is a tensor; `for k in batch`, a key
            return PYTHON
        return None
    name = dotted(node)
    if not name:
        return None
    if name in _ANNOTATION_VALUES:
        return _ANNOTATION_VALUES[name]
    if name in _PY_ANNOTATIONS:
        return PYTHON
    return None


def python_dict(values: list[Value]) -> Value:
    """A dict literal: a Python value whose subscripts give (the join of) its values."""
    if not values:
        return PYTHON
    elem = values[0]
    for value in values[1:]:
        elem = join(elem, value)
    return Value(Kind.PYTHON, elem=elem)


def merged_device(values: Iterable[Value]) -> str | None:
    """The device of an elementwise result: known only when every tensor operand agrees.

    Unknown operands are taken to be Python numbers (hyperparameters such as
    `self.layerdrop`): the usual case next to a known tensor.
    """
    device: str | None = None
    seen = False
    for value in values:
        if value.kind in (Kind.TENSOR, Kind.BATCH):
            if value.device is None:
                return None
            if seen and value.device != device:
                return None
            device, seen = value.device, True
    return device


# ----------------------------------------------------------------- narrowing
_PYTHON_TYPES = frozenset(
    """builtins.int builtins.float builtins.bool builtins.str builtins.bytes builtins.list
    builtins.tuple builtins.dict builtins.set int float bool str bytes list tuple dict set
    numbers.Number numbers.Real numbers.Integral collections.abc.Sequence collections.abc.Mapping
    typing.Sequence typing.Mapping""".split()
)
# Host objects that are never tensors: paths, images of the imaging libraries.
_HOST_TYPES = frozenset(
    """pathlib.Path pathlib.PurePath pathlib.PosixPath os.PathLike PIL.Image.Image Image.Image
    builtins.bytearray bytearray""".split()
)


def cpu_check_subject(test: ast.expr) -> str | None:
    """The name `x.device.type == "cpu"` (or `not x.is_cuda`) proves to be on the CPU."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Attribute) \
            and test.operand.attr == "is_cuda" and isinstance(test.operand.value, ast.Name):
        return test.operand.value.id
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return None
    sides = (test.left, test.comparators[0])
    if not any(isinstance(s, ast.Constant) and s.value == "cpu" for s in sides):
        return None
    for side in sides:
        if isinstance(side, ast.Attribute) and side.attr == "type" and isinstance(side.value, ast.Attribute) \
                and side.value.attr == "device" and isinstance(side.value.value, ast.Name):
            return side.value.value.id
    return None


def tensor_check_subject(test: ast.expr, qualname) -> str | None:
    """The name `isinstance(t, torch.Tensor)` / `torch.is_tensor(t)` checks, if it is one."""
    if not (isinstance(test, ast.Call) and test.args and isinstance(test.args[0], ast.Name)):
        return None
    if isinstance(test.func, ast.Name) and test.func.id == "isinstance" and len(test.args) == 2:
        kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        names = [qualname(k) or dotted(k) for k in kinds]
        if names and all(isinstance_value(n) is TENSOR for n in names):
            return test.args[0].id
        return None
    if qualname(test.func) == "torch.is_tensor" and len(test.args) == 1:
        return test.args[0].id
    return None


def isinstance_value(qualname: str) -> Value | None:
    """What `isinstance(x, T)` proves x is, for the types that matter here."""
    if qualname in ("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"):
        return TENSOR
    if qualname in ("torch.nn.Module", "torch.nn.modules.module.Module"):
        return MODULE
    if qualname.startswith(("numpy.", "np.")):
        return NDARRAY
    if qualname in _PYTHON_TYPES or qualname in _HOST_TYPES:
        return PYTHON
    if qualname.startswith(("torch.nn.", "nn.")) and qualname.rsplit(".", 1)[-1][:1].isupper():
        return MODULE  # `isinstance(m, nn.Linear)`
    last = qualname.rsplit(".", 1)[-1]
    if last.startswith("NonTensor"):
        return Value(Kind.OBJECT)  # tensordict's wrappers of non-tensor data
    if last.endswith("Tensor"):
        return TENSOR  # `MetaTensor`, `DTensor`: tensor subclasses
    return None  # other classes may subclass Tensor too (PyG's `EdgeIndex`): no narrowing
