"""Which tensors surely have dimensions (`Value.has_dims`).

PyTorch treats a 0-dim tensor as a number in places where a tensor with dimensions is used
as a tensor: `x[i]` reads a 0-dim integer index with `item()` but copies an index tensor to
`x`'s device; a 0-dim CPU tensor is a scalar operand of a GPU op. Rules that care need to
know "this one has dimensions", which is what these tables answer for the results of torch
functions and tensor methods (the lattice keeps the mark through names, joins and
broadcasting arithmetic).
"""

from __future__ import annotations

import ast
from dataclasses import replace

from .values import Kind, Value

# Functions whose result always has at least one dimension.
_DIMENSIONED_FUNCS = frozenset(
    """arange range randperm linspace logspace tril_indices triu_indices cat concat concatenate
    stack hstack vstack column_stack nonzero argwhere flatten ravel atleast_1d""".split()
)
# Constructors from data, whose result has dimensions when the data has.
_DATA_CONSTRUCTORS = frozenset({"tensor", "as_tensor", "asarray", "from_numpy"})
_SIZED_FACTORIES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn"})
# Tensor methods whose result has dimensions when the receiver has them (casts, copies,
# moves, reorderings), and those whose result always has some.
_DIMS_KEEPING_METHODS = frozenset(
    """long int short byte char float double half bfloat16 bool to type type_as clone contiguous
    detach cpu cuda pin_memory flip roll repeat expand expand_as""".split()
)
_DIMENSIONED_METHODS = frozenset({"unsqueeze", "flatten", "ravel", "masked_select", "nonzero", "argwhere"})
# NumPy functions whose result always has at least one dimension (index arrays, mostly).
_NUMPY_DIMENSIONED = frozenset(
    """arange argsort concatenate stack hstack vstack flatnonzero linspace random.permutation""".split()
)


def _dimensioned_data(node: ast.expr, value: Value) -> bool:
    """Data with dimensions: a list or tuple display, a comprehension, a Python sequence, a
    NumPy array."""
    if isinstance(node, (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)):
        return True
    return value.kind in (Kind.SEQ, Kind.NDARRAY)


def _sized(node: ast.expr) -> bool:
    """A size argument that gives at least one dimension: an int literal, `(n, 3)`."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and not any(isinstance(e, ast.Starred) for e in node.elts)
    return isinstance(node, ast.Constant) and type(node.value) is int


def function_result_dims(name: str, call: ast.Call, args: list[Value], value: Value, legacy: bool) -> Value:
    """`value` (what `torch.<name>(...)` returns) marked as having dimensions when it surely
    has them; `legacy` for the typed constructors (`torch.LongTensor(...)`)."""
    if value.kind is Kind.SEQ and name in ("nonzero", "where") and value.elem is not None:
        return Value(Kind.SEQ, elem=replace(value.elem, has_dims=True))  # one 1-D index per dim
    if value.kind is not Kind.TENSOR or value.zero_dim or value.has_dims:
        return value
    first = call.args[0] if call.args and not isinstance(call.args[0], ast.Starred) else None
    dims = name in _DIMENSIONED_FUNCS
    if (name in _DATA_CONSTRUCTORS or legacy) and first is not None:
        dims = _dimensioned_data(first, args[0]) or (legacy and _sized(first))
    elif name in _SIZED_FACTORIES and first is not None:
        # `torch.zeros(n)` with an int `n` (not `torch.zeros(shape)`, which may be `()`)
        dims = _sized(first) or (name != "full" and args[0].kind is Kind.PYTHON
                                 and isinstance(first, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)))
    elif name.endswith("_like") and args:
        dims = args[0].has_dims
    elif name == "where" and len(args) == 3:
        dims = any(a.has_dims for a in args)
    return replace(value, has_dims=True) if dims else value


def method_result_dims(name: str, call: ast.Call, recv: Value, value: Value) -> Value:
    """`value` (what `t.<name>(...)` returns) marked as having dimensions when it surely has."""
    if value.kind is not Kind.TENSOR or value.zero_dim or value.has_dims:
        return value
    dims = name in _DIMENSIONED_METHODS or (name in _DIMS_KEEPING_METHODS and recv.has_dims)
    if name in ("view", "reshape") and call.args and not call.keywords:
        dims = all(isinstance(a, ast.Constant) and type(a.value) is int for a in call.args)  # `view(-1)`
    return replace(value, has_dims=True) if dims else value


def numpy_result_dims(qualname: str, call: ast.Call, value: Value) -> Value:
    """`value` (what `numpy.<...>(...)` returns) marked as having dimensions when it surely has
    them: `np.arange(n)`, `np.random.permutation(n)`, `np.array([...])`."""
    if value.kind is not Kind.NDARRAY or not qualname.startswith("numpy."):
        return value
    name = qualname[6:]
    dims = name in _NUMPY_DIMENSIONED or (
        name in ("array", "asarray") and bool(call.args)
        and isinstance(call.args[0], (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)))
    return replace(value, has_dims=True) if dims else value
